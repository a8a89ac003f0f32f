/*
LayerNorm forward.

  ./layernorm_forward [VERSION]

Kernels and versions:
  layernorm_forward   out, mean, rstd = LayerNorm(inp)
    1  the simple code: scalar, two passes for the statistics and a third to write out
    2  llmc/layernorm.h: the same passes over a row in L1, vectorized (4 interleaved sums)

Bytes per call (floats of N x C): each reads inp and writes out, 2.
(The residual add before each LayerNorm is in the projection matmul's epilogue:
matmul_forward_residual in llmc/matmul.h.)

The inputs have a mean of 3 and a spread of 0.05, like the residual stream's rows: the
simple version's one running sum per row loses digits there (its out is about 1e-4 off
a float64 LayerNorm at C = 768, printed below), the vectorized one's 4 x VEC_WIDTH
interleaved sums about 10x less. So versions are checked against version 1 to 1e-4.
*/
#include "common.h"
#include "llmc/layernorm.h"

// 1: the simple code, as it was in llmc/layernorm.h.
static void layernorm_forward1(float *out, float *mean, float *rstd, const float *inp,
                               const float *weight, const float *bias, int N, int C) {
    #pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        float m = 0.0f;
        for (int c = 0; c < C; c++) { m += x[c]; }
        m /= C;
        float v = 0.0f;
        for (int c = 0; c < C; c++) { v += (x[c] - m) * (x[c] - m); }
        v /= C;
        const float r = 1.0f / sqrtf(v + LAYERNORM_EPS);
        mean[i] = m;
        rstd[i] = r;
        float *o = out + (size_t)i * C;
        for (int c = 0; c < C; c++) { o[c] = (x[c] - m) * r * weight[c] + bias[c]; }
    }
}

// The LayerNorm of inp in float64, rounded to float: how far each version is from exact.
static void layernorm_forward_f64(float *out, const float *inp, const float *weight, const float *bias, int N, int C) {
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        double m = 0.0, v = 0.0;
        for (int c = 0; c < C; c++) { m += x[c]; }
        m /= C;
        for (int c = 0; c < C; c++) { v += (x[c] - m) * (x[c] - m); }
        v /= C;
        const double s = 1.0 / sqrt(v + LAYERNORM_EPS);
        for (int c = 0; c < C; c++) { out[(size_t)i * C + c] = (float)((x[c] - m) * s * weight[c] + bias[c]); }
    }
}

static double max_abs_err(const float *got, const float *want, size_t n) {
    double e = 0.0;
    for (size_t i = 0; i < n; i++) { double d = fabs((double)got[i] - want[i]); if (!(d <= e)) { e = d; } }
    return e;
}

typedef struct {
    float *out, *mean, *rstd;
    const float *inp, *weight, *bias;
    int N, C;
} Args;

static void ln_forward1(void *p) { Args *a = p; layernorm_forward1(a->out, a->mean, a->rstd, a->inp, a->weight, a->bias, a->N, a->C); }
static void ln_forward2(void *p) { Args *a = p; layernorm_forward(a->out, a->mean, a->rstd, a->inp, a->weight, a->bias, a->N, a->C); }
int main(int argc, char **argv) {
    const int only = version_arg(argc, argv);
    const struct { const char *name; int N, C; } shapes[] = {
        {"B4 T64 C768", 256, 768}, {"B4 T1024 C768", 4096, 768}, {"B3 T29 C57", 87, 57}, {"B1 T7 C5", 7, 5}};
    void (*const fn[2])(void *) = {ln_forward1, ln_forward2};
    const char *const what[2] = {"simple", "llmc: vectorized"};
    printf("layernorm_forward: %d threads, VEC_WIDTH %d\n", omp_get_max_threads(), VEC_WIDTH);
    int fails = 0;
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        const int N = shapes[s].N, C = shapes[s].C;
        const size_t NC = (size_t)N * C;
        // inputs with an offset and scale, as activations have: the variance is not ~1/3
        float *inp = make_random(NC, 1);
        for (size_t i = 0; i < NC; i++) { inp[i] = 3.0f + 0.05f * inp[i]; }
        float *weight = make_random(C, 3), *bias = make_random(C, 4);
        Args a = {aligned_alloc_or_die(NC * 4, "out"), aligned_alloc_or_die(N * 4, "mean"),
                  aligned_alloc_or_die(N * 4, "rstd"), inp, weight, bias, N, C};
        float *exact = aligned_alloc_or_die(NC * 4, "float64 reference");
        layernorm_forward_f64(exact, inp, weight, bias, N, C);
        Outputs o = {0};
        outputs_add(&o, "out", a.out, NULL, NC);
        outputs_add(&o, "mean", a.mean, NULL, N);
        outputs_add(&o, "rstd", a.rstd, NULL, N);
        for (int v = 1; v <= 2; v++) {
            if (v == 1 || only == 0 || only == v) {
                fails += !run_version(shapes[s].name, v, what[v - 1], fn[v - 1], &a, &o, 2.0 * NC * sizeof(float), 1e-4,
                                      only == 0 || only == v);
                printf("  %-16s v%d max |out - float64 LayerNorm| = %.3e\n", shapes[s].name, v, max_abs_err(a.out, exact, NC));
            }
        }
        outputs_free(&o);
        free(a.out); free(a.mean); free(a.rstd);
        free(exact); free(inp); free(weight); free(bias);
    }
    printf("%s\n", fails ? "FAIL" : "OK: every version matches version 1");
    return fails ? 1 : 0;
}
