/*
Causal self-attention backward: accumulates dqkv (B,T,3C) from dout (B,T,C),
given the forward's out (B,T,C), lse (B,NH,T) and qkv (B,T,3C).

Versions:
  1  simple: one head per task, then query by query and key by key, scalar
     loops (the original llmc/attention.h, the reference)
  2  materializing, the PyTorch way: uses the (B,NH,T,T) probabilities P saved
     by the forward; per head dV += P^T dO, dP = dO V^T, dS = P (dP - rowsum(P dP)),
     dQ += scale dS K, dK += scale dS^T Q, the products with OpenBLAS sgemm on the
     full (T,T) matrices. Speed yardstick.
  3  llmc/attention.h: per head, key blocks x query blocks at or below the
     diagonal, P recomputed from lse, register-tiled vector products, vectorized exp

FLOPs counted: the five matrix products (S = Q K^T, dP = dO V^T, dV, dK, dQ)
over the causal half only, 5 * 2*B*NH*hs*T(T+1)/2, 2.5x the forward's count;
exp and the elementwise softmax backward are not counted. Version 1 also
computes D = dout.out once per query, version 3 once per (query, key block).
Version 2 computes four full (T,T) products but is credited the same count.

./attention_backward       checks every version against version 1 on every shape and times it
./attention_backward N     the same for version N only
*/
#include "common.h"
#include <cblas.h>
#include "llmc/attention.h"

// ----------------------------------------------------------------------------
// version 1: the original simple kernel

static void attention_backward1(float *dqkv, const float *dout, const float *out, const float *lse,
                                const float *qkv, int B, int T, int C, int NH) {
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    // one (b, h) per task: keys and values of a head receive gradient from all its queries
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const size_t row = ((size_t)b * T + t);
                const float *q = qkv + row * 3 * C + h * hs;
                float *dq = dqkv + row * 3 * C + h * hs;
                const float *go = dout + row * C + h * hs;
                const float *o = out + row * C + h * hs;
                const float row_lse = lse[((size_t)b * NH + h) * T + t];
                float D = 0.0f;
                for (int i = 0; i < hs; i++) { D += go[i] * o[i]; }
                for (int j = 0; j <= t; j++) {
                    const size_t krow = ((size_t)b * T + j) * 3 * C + C + h * hs;
                    const float *k = qkv + krow, *v = qkv + krow + C;
                    float *dk = dqkv + krow, *dv = dqkv + krow + C;
                    float s = 0.0f, dp = 0.0f;
                    for (int i = 0; i < hs; i++) { s += q[i] * k[i]; dp += go[i] * v[i]; }
                    float p = expf(s * scale - row_lse);
                    float ds = p * (dp - D) * scale;
                    for (int i = 0; i < hs; i++) {
                        dq[i] += ds * k[i];
                        dk[i] += ds * q[i];
                        dv[i] += p * go[i];
                    }
                }
            }
        }
    }
}

// ----------------------------------------------------------------------------
// version 2: the saved (T,T) probabilities per head, OpenBLAS for the products

static float *saved_att;     // (B, NH, T, T) probabilities P from the forward, made by main
static float *scratch_datt;  // (B, NH, T, T) dP, then dS

// P per head as the materializing forward makes it: sgemm, then masked softmax rows.
static void materialize_probs(float *att, const float *qkv, int B, int T, int C, int NH) {
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * 3 * C + h * hs;
            float *a = att + ((size_t)b * NH + h) * T * T;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, 3 * C, q + C, 3 * C,
                        0.0f, a, T);
            for (int t = 0; t < T; t++) {
                float *row = a + (size_t)t * T;
                float m = -INFINITY, l = 0.0f;
                for (int j = 0; j <= t; j++) { m = row[j] > m ? row[j] : m; }
                for (int j = 0; j <= t; j++) { row[j] = expf(row[j] - m); l += row[j]; }
                for (int j = 0; j <= t; j++) { row[j] /= l; }
                for (int j = t + 1; j < T; j++) { row[j] = 0.0f; }
            }
        }
    }
}

static void attention_backward2(float *dqkv, const float *dout, const float *out, const float *lse,
                                const float *qkv, int B, int T, int C, int NH) {
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const size_t head = (size_t)b * T * 3 * C + h * hs;  // rows 3C apart
            const float *q = qkv + head, *k = q + C, *v = q + 2 * C;
            float *dq = dqkv + head, *dk = dq + C, *dv = dq + 2 * C;
            const float *go = dout + (size_t)b * T * C + h * hs;  // rows C apart
            const float *att = saved_att + ((size_t)b * NH + h) * T * T;
            float *datt = scratch_datt + ((size_t)b * NH + h) * T * T;
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, att, T, go, C, 1.0f, dv, 3 * C);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, go, C, v, 3 * C, 0.0f, datt, T);
            for (int t = 0; t < T; t++) {
                const float *p = att + (size_t)t * T;
                float *ds = datt + (size_t)t * T;
                float D = 0.0f;
                for (int j = 0; j <= t; j++) { D += p[j] * ds[j]; }
                for (int j = 0; j <= t; j++) { ds[j] = p[j] * (ds[j] - D); }
                for (int j = t + 1; j < T; j++) { ds[j] = 0.0f; }
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, datt, T, k, 3 * C, 1.0f, dq, 3 * C);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, datt, T, q, 3 * C, 1.0f, dk, 3 * C);
        }
    }
}

// ----------------------------------------------------------------------------
// harness

typedef void (*backward_fn)(float *dqkv, const float *dout, const float *out, const float *lse,
                            const float *qkv, int B, int T, int C, int NH);

static const struct { backward_fn fn; const char *name; } versions[] = {
    {NULL, NULL},
    {attention_backward1, "simple (reference)"},
    {attention_backward2, "materialized (T,T), sgemm"},
    {attention_backward, "llmc/attention.h"},
};
static const int n_versions = sizeof(versions) / sizeof(versions[0]) - 1;

// amp scales the random qkv: larger amp, sharper softmax rows.
static const struct { int B, T, C, NH; float amp; const char *what; } shapes[] = {
    {4, 64, 768, 12, 1.0f, "GPT-2 124M, T=64"},
    {4, 1024, 768, 12, 1.0f, "GPT-2 124M, T=1024"},
    {4, 256, 384, 6, 1.0f, "d6"},
    {3, 29, 57, 3, 1.0f, "odd, hs=19"},
    {2, 1, 64, 2, 1.0f, "T=1"},
    {1, 100, 40, 4, 4.0f, "hs=10, sharp softmax"},
    {2, 130, 200, 8, 3.0f, "hs=25, T past two blocks"},
    {1, 300, 96, 1, 1.0f, "B*NH=1, hs=96"},
    {1, 70, 256, 2, 1.0f, "hs=128, largest supported"},
};

// Max relative error over the dq, dk and dv parts of a (B*T, 3C) gradient, each
// measured against its own largest value.
static double dqkv_rel_err(const float *got, const float *ref, size_t rows, int C) {
    double worst = 0.0;
    for (int part = 0; part < 3; part++) {
        double err = 0.0, scale = 0.0;
        for (size_t t = 0; t < rows; t++) {
            for (int i = 0; i < C; i++) {
                size_t at = t * 3 * C + part * C + i;
                double e = fabs((double)got[at] - (double)ref[at]);
                if (!(e <= err)) { err = e; }
                if (fabs(ref[at]) > scale) { scale = fabs(ref[at]); }
            }
        }
        double rel = err / (scale > 0 ? scale : 1.0);
        if (!(rel <= worst)) { worst = rel; }
    }
    return worst;
}

struct run {
    backward_fn fn;
    float *dqkv;
    const float *dout, *out, *lse, *qkv;
    int B, T, C, NH;
};

static void run_version(void *ctx) {
    struct run *r = ctx;
    r->fn(r->dqkv, r->dout, r->out, r->lse, r->qkv, r->B, r->T, r->C, r->NH);
}

int main(int argc, char **argv) {
    int only = argc > 1 ? atoi(argv[1]) : 0;
    if (argc > 2 || only < 0 || only > n_versions) { die("usage: %s [version 1..%d]", argv[0], n_versions); }
    openblas_set_num_threads(1);  // version 2 calls sgemm from each OpenMP thread
    printf("attention backward, %d threads, vector width %d floats\n", omp_get_max_threads(), ATTN_VW);
    int failures = 0;
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        const int B = shapes[s].B, T = shapes[s].T, C = shapes[s].C, NH = shapes[s].NH;
        const int hs = C / NH;
        const size_t n_qkv = (size_t)B * T * 3 * C, n_out = (size_t)B * T * C;
        const double flops = 5.0 * 2.0 * B * NH * hs * (double)T * (T + 1) / 2.0;
        printf("B=%d T=%d C=%d NH=%d (hs=%d) %s: %.3f GFLOP\n", B, T, C, NH, hs, shapes[s].what, flops * 1e-9);
        float *qkv = make_random(n_qkv, 1 + s);
        for (size_t i = 0; i < n_qkv; i++) { qkv[i] *= shapes[s].amp; }
        float *dout = make_random(n_out, 50 + s);
        float *out = make_random(n_out, 0);
        float *lse = make_random((size_t)B * NH * T, 0);
        attention_forward(out, lse, qkv, B, T, C, NH);
        // errors are measured on gradients accumulated from zero; the backward's
        // accumulation onto existing values is checked from dqkv_init
        float *dqkv_init = make_random(n_qkv, 99);
        float *ref = calloc(n_qkv, sizeof(float));
        float *ref_acc = make_random(n_qkv, 0);
        float *dqkv = make_random(n_qkv, 0);
        float *dqkv2 = make_random(n_qkv, 0);
        if (ref == NULL) { die("out of memory"); }
        attention_backward1(ref, dout, out, lse, qkv, B, T, C, NH);
        memcpy(ref_acc, dqkv_init, n_qkv * sizeof(float));
        attention_backward1(ref_acc, dout, out, lse, qkv, B, T, C, NH);
        saved_att = aligned_alloc_or_die((size_t)B * NH * T * T * sizeof(float), "(B,NH,T,T) probabilities");
        scratch_datt = aligned_alloc_or_die((size_t)B * NH * T * T * sizeof(float), "(B,NH,T,T) scratch");
        materialize_probs(saved_att, qkv, B, T, C, NH);
        for (int v = 1; v <= n_versions; v++) {
            if (only && v != only) { continue; }
            memset(dqkv, 0, n_qkv * sizeof(float));
            struct run r = {versions[v].fn, dqkv, dout, out, lse, qkv, B, T, C, NH};
            run_version(&r);
            double err = dqkv_rel_err(dqkv, ref, (size_t)B * T, C);
            int ok = err <= 1e-5;
            if (!ok) { printf("  MISMATCH dqkv: rel err %.3e > 1e-5\n", err); }
            // determinism: a second call from the same start gives the same bits
            memset(dqkv2, 0, n_qkv * sizeof(float));
            r.dqkv = dqkv2;
            run_version(&r);
            int same = memcmp(dqkv, dqkv2, n_qkv * sizeof(float)) == 0;
            memcpy(dqkv, dqkv_init, n_qkv * sizeof(float));
            r.dqkv = dqkv;
            run_version(&r);
            ok &= check_close("dqkv accumulated onto nonzero", dqkv, ref_acc, n_qkv, 1e-5);
            double ms = time_budget_ms(run_version, &r, 500.0);
            printf("  %d %-28s %10.3f ms %8.2f GFLOP/s   err dqkv %.1e %s%s\n", v, versions[v].name, ms,
                   flops / (ms * 1e-3) * 1e-9, err, ok ? "OK" : "FAIL", same ? "" : " NONDETERMINISTIC");
            failures += !ok || !same;
        }
        free(saved_att); free(scratch_datt);
        free(qkv); free(dout); free(out); free(lse); free(dqkv_init); free(ref); free(ref_acc); free(dqkv); free(dqkv2);
    }
    if (failures) { printf("%d FAILURES\n", failures); return 1; }
    printf("all OK\n");
    return 0;
}
