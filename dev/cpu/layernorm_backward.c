/*
LayerNorm backward: dinp (N, C) += ..., dweight (C) += sum over rows of dout * n,
dbias (C) += sum over rows of dout (llmc/layernorm.h has the formulas).

  ./layernorm_backward [VERSION]

Versions:
  1  the simple code: a parallel pass over rows for dinp, then a second parallel pass
     in which each thread owns a range of channels and sums them over all rows
  2  vectorized (llmc/vecmath.h), the same two passes: dweight/dbias by partitioning C
  3  vectorized, one pass: each thread sums a partial dweight/dbias over its rows as it
     computes dinp, and the per-thread partials are reduced at the end
  4  llmc/layernorm.h: as 3 with a fixed 16 row blocks instead of one per thread, so the
     result does not depend on the thread count (checked: 1 thread and all give the same bits)

Bytes per call: dout and inp read, dinp read and written: 4 N C floats (the partials,
weights and statistics are small and stay in cache).

Which reduction wins, and why. Measured on 2 threads, Zen 3 (AVX2), quiet machine, best of
runs, GPT-2 124M's C = 768:
                     v1 simple    v2 partition C   v3 per-thread partials   v4 fixed blocks
  B4 T64   (N=256)   0.154 ms     0.085 ms         0.063 ms                 0.049 ms
  B4 T1024 (N=4096)  3.98 ms      3.08 ms          1.50 ms                  1.27 ms
The partials win: by 1.7x at T=64 and 2.4x at T=1024. Partitioning C needs a second pass
over dout and inp (6 N C floats moved instead of 4), and at T=1024 those tensors (12.6 MB
each) have left the caches by then, so it reads them from memory twice; and its second pass
is a narrow stream per thread (half a row) with one dependent add chain per vector of
dweight. The partials cost 2 C floats per block, kept in L1 while the block's rows stream
by, and one reduction over 16 x 2 C floats at the end (~100 KB, from L2). At T=64 the
second pass hits L2/L3, so the gap is smaller but still there. The fixed 16 blocks (v4)
are at least as fast as one block per thread (v3): 10-20% faster in every run so far, for
no reason identified (each thread streams the same contiguous rows in both), and they make
the result independent of the thread count: the model uses v4.
*/
#include "common.h"
#include "llmc/layernorm.h"

typedef struct {
    float *dinp, *dweight, *dbias;
    const float *dout, *inp, *mean, *rstd, *weight;
    int N, C;
} Args;

// 1: the simple code, as it was in llmc/layernorm.h.
static void layernorm_backward1(float *dinp, float *dweight, float *dbias, const float *dout,
                                const float *inp, const float *mean, const float *rstd,
                                const float *weight, int N, int C) {
    #pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C, *d = dout + (size_t)i * C;
        float *dx = dinp + (size_t)i * C;
        const float m = mean[i], s = rstd[i];
        float g_mean = 0.0f, gn_mean = 0.0f;
        for (int c = 0; c < C; c++) {
            float g = d[c] * weight[c];
            g_mean += g;
            gn_mean += g * (x[c] - m) * s;
        }
        g_mean /= C;
        gn_mean /= C;
        for (int c = 0; c < C; c++) {
            float n = (x[c] - m) * s;
            dx[c] += s * (d[c] * weight[c] - g_mean - n * gn_mean);
        }
    }
    #pragma omp parallel
    {
        int nth = omp_get_num_threads(), tid = omp_get_thread_num();
        int c0 = (int)((long)C * tid / nth), c1 = (int)((long)C * (tid + 1) / nth);
        for (int i = 0; i < N; i++) {
            const float *x = inp + (size_t)i * C, *d = dout + (size_t)i * C;
            const float m = mean[i], s = rstd[i];
            for (int c = c0; c < c1; c++) {
                dweight[c] += d[c] * (x[c] - m) * s;
                dbias[c] += d[c];
            }
        }
    }
}

// 2: vectorized rows; dweight/dbias in a second pass, each thread owning whole vectors of channels.
static void layernorm_backward2(float *dinp, float *dweight, float *dbias, const float *dout,
                                const float *inp, const float *mean, const float *rstd,
                                const float *weight, int N, int C) {
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const size_t row = (size_t)i * C;
        layernorm_row_backward(dinp + row, NULL, NULL, dout + row, inp + row, mean[i], rstd[i], weight, C);
    }
    const int nvec = (C + VEC_WIDTH - 1) / VEC_WIDTH;
    #pragma omp parallel
    {
        int nth = omp_get_num_threads(), tid = omp_get_thread_num();
        int c0 = (int)((long)nvec * tid / nth) * VEC_WIDTH, c1 = (int)((long)nvec * (tid + 1) / nth) * VEC_WIDTH;
        if (c1 > C) { c1 = C; }
        for (int i = 0; i < N; i++) {  // rows outer: each thread streams its part of every row
            const size_t row = (size_t)i * C;
            const vfloat m = vec_set1(mean[i]), s = vec_set1(rstd[i]);
            for (int c = c0; c < c1; c += VEC_WIDTH) {
                const int k = C - c < VEC_WIDTH ? C - c : VEC_WIDTH;
                const vfloat d = vec_load_partial(dout + row + c, k);
                const vfloat n = (vec_load_partial(inp + row + c, k) - m) * s;
                vec_store_partial(dweight + c, vec_load_partial(dweight + c, k) + d * n, k);
                vec_store_partial(dbias + c, vec_load_partial(dbias + c, k) + d, k);
            }
        }
    }
}

// 3: one pass, a partial dweight/dbias per thread over its contiguous rows, reduced at the end.
static void layernorm_backward3(float *dinp, float *dweight, float *dbias, const float *dout,
                                const float *inp, const float *mean, const float *rstd,
                                const float *weight, int N, int C) {
    const size_t Cp = ((size_t)C + 15) / 16 * 16;
    const int nth = omp_get_max_threads();
    float *partial = aligned_alloc_or_die(nth * 2 * Cp * sizeof(float), "partials");
    #pragma omp parallel num_threads(nth)
    {
        const int tid = omp_get_thread_num(), team = omp_get_num_threads();
        float *pdw = partial + (size_t)tid * 2 * Cp, *pdb = pdw + Cp;
        memset(pdw, 0, 2 * Cp * sizeof(float));
        const int i0 = (int)((long)N * tid / team), i1 = (int)((long)N * (tid + 1) / team);
        for (int i = i0; i < i1; i++) {
            const size_t row = (size_t)i * C;
            layernorm_row_backward(dinp + row, pdw, pdb, dout + row, inp + row, mean[i], rstd[i], weight, C);
        }
        #pragma omp barrier
        #pragma omp for schedule(static)
        for (int c = 0; c < C; c += VEC_WIDTH) {
            vfloat dw = {0}, db = {0};
            for (int t = 0; t < team; t++) {
                dw += vec_load(partial + (size_t)t * 2 * Cp + c);
                db += vec_load(partial + (size_t)t * 2 * Cp + Cp + c);
            }
            const int k = C - c < VEC_WIDTH ? C - c : VEC_WIDTH;
            vec_store_partial(dweight + c, vec_load_partial(dweight + c, k) + dw, k);
            vec_store_partial(dbias + c, vec_load_partial(dbias + c, k) + db, k);
        }
    }
    free(partial);
}

#define CALL(f) \
    static void run##f(void *p) { \
        Args *a = p; \
        f(a->dinp, a->dweight, a->dbias, a->dout, a->inp, a->mean, a->rstd, a->weight, a->N, a->C); \
    }
CALL(layernorm_backward1)
CALL(layernorm_backward2)
CALL(layernorm_backward3)
CALL(layernorm_backward)

static const struct { void (*fn)(void *); const char *what; } VERSIONS[] = {
    {runlayernorm_backward1, "simple, dweight/dbias: partition C"},
    {runlayernorm_backward2, "vectorized, dweight/dbias: partition C"},
    {runlayernorm_backward3, "vectorized, partials per thread"},
    {runlayernorm_backward, "llmc: partials per fixed row block"},
};
#define NUM_VERSIONS (int)(sizeof(VERSIONS) / sizeof(VERSIONS[0]))

int main(int argc, char **argv) {
    const int only = version_arg(argc, argv);
    const struct { const char *name; int N, C; } shapes[] = {
        {"B4 T64 C768", 256, 768}, {"B4 T1024 C768", 4096, 768}, {"B3 T29 C57", 87, 57}, {"B1 T7 C5", 7, 5}};
    printf("layernorm_backward: %d threads, VEC_WIDTH %d\n", omp_get_max_threads(), VEC_WIDTH);
    int fails = 0;
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        const int N = shapes[s].N, C = shapes[s].C;
        const size_t NC = (size_t)N * C;
        float *inp = make_random(NC, 1), *dout = make_random(NC, 2), *weight = make_random(C, 3);
        float *dinp0 = make_random(NC, 4), *dweight0 = make_random(C, 5), *dbias0 = make_random(C, 6);
        float *mean = make_random(N, 7), *rstd = make_random(N, 8);
        for (int i = 0; i < N; i++) { rstd[i] = 1.0f + rstd[i] * 0.5f; }
        Args a = {aligned_alloc_or_die(NC * 4, "dinp"), aligned_alloc_or_die(C * 4, "dweight"),
                  aligned_alloc_or_die(C * 4, "dbias"), dout, inp, mean, rstd, weight, N, C};
        Outputs o = {0};
        outputs_add(&o, "dinp", a.dinp, dinp0, NC);
        outputs_add(&o, "dweight", a.dweight, dweight0, C);
        outputs_add(&o, "dbias", a.dbias, dbias0, C);
        const double bytes = 4.0 * NC * sizeof(float);
        for (int v = 1; v <= NUM_VERSIONS; v++) {
            if (v == 1 || only == 0 || only == v) {
                fails += !run_version(shapes[s].name, v, VERSIONS[v - 1].what, VERSIONS[v - 1].fn, &a, &o,
                                      bytes, 1e-5, only == 0 || only == v);
            }
        }
        // the model's version must give the same bits with one thread as with all of them
        float *all_threads[3];
        for (int threads = omp_get_max_threads(), pass = 0; pass < 2; pass++) {
            omp_set_num_threads(pass == 0 ? threads : 1);
            for (int i = 0; i < 3; i++) { memcpy(o.buf[i], o.init[i], o.n[i] * 4); }
            runlayernorm_backward(&a);
            for (int i = 0; i < 3; i++) {
                if (pass == 0) {
                    all_threads[i] = aligned_alloc_or_die(o.n[i] * 4, "copy");
                    memcpy(all_threads[i], o.buf[i], o.n[i] * 4);
                } else {
                    if (memcmp(all_threads[i], o.buf[i], o.n[i] * 4) != 0) {
                        printf("  %-16s v%d %s differs between %d threads and 1\n", shapes[s].name, NUM_VERSIONS,
                               o.name[i], threads);
                        fails++;
                    }
                    free(all_threads[i]);
                }
            }
            omp_set_num_threads(threads);
        }
        outputs_free(&o);
        free(a.dinp); free(a.dweight); free(a.dbias);
        free(inp); free(dout); free(weight); free(dinp0); free(dweight0); free(dbias0); free(mean); free(rstd);
    }
    printf("%s\n", fails ? "FAIL" : "OK: every version matches version 1");
    return fails ? 1 : 0;
}
