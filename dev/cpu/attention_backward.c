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
  3  tiled: a task is a head, walked key block (outer) by query block (inner,
     at or below the diagonal); P recomputed from lse, register-tiled vector
     products, vectorized exp; dK and dV of the key block in stack tiles
  4  llmc/attention.h: as 3, with the query block's Q and dout packed
     contiguous once per block pair instead of read in place by every product,
     D = dout.out computed once per query instead of once per block pair, and
     K^T, V^T, dK and dV transposed VW x VW blocks at a time in registers

FLOPs counted: the five matrix products (S = Q K^T, dP = dO V^T, dV, dK, dQ)
over the causal half only, 5 * 2*B*NH*hs*T(T+1)/2, 2.5x the forward's count;
exp, the elementwise softmax backward and D = dout.out (2*hs per query; version
3 recomputes it per key block) are not counted. Version 2 computes four full
(T,T) products but is credited the same count.

./attention_backward       checks every version against version 1 on every shape and times it
./attention_backward N     the same for version N only
Every version also runs twice on the same input and must give the same bits.
Threads: OMP_NUM_THREADS (default: all cores); version 2 runs single-threaded
sgemm calls from each OpenMP thread.
*/
#include "common.h"
#include <cblas.h>
#include "llmc/attention.h"
#include "attention_harness.h"

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
// version 3: the first tiled version: the products, exp and task layout of
// llmc/attention.h (whose helpers it calls), but the query block's Q and dout
// are read in place from qkv and dout, rows 3C and C apart, by every product.
// Version 4 packs them once per block pair.

// All of head h of batch element b.
static void bwd3_head(float *dqkv, const float *dout, const float *out, const float *lse,
                          const float *qkv, int b, int h, int T, int C, int NH, float scale) {
    const int hs = C / NH;
    const int hs_pad = (hs + ATTN_W - 1) / ATTN_W * ATTN_W;  // K's rows padded to whole tiles
    const ptrdiff_t C3 = 3 * (ptrdiff_t)C;
    const size_t head = (size_t)b * T * C3 + h * hs;  // query of position t at head + t*C3, key +C, value +2C
    const float *q = qkv + head, *k = q + C, *v = q + 2 * C;
    float *dq = dqkv + head, *dk = dq + C, *dv = dq + 2 * C;
    const float *go = dout + (size_t)b * T * C + h * hs;  // dout and out of position t: + t*C
    const float *o = out + (size_t)b * T * C + h * hs;
    const float *head_lse = lse + ((size_t)b * NH + h) * T;
    float kt[ATTN_MAX_HS * ATTN_BLK] __attribute__((aligned(64)));   // K^T of the key block (hs x BLK)
    float vt[ATTN_MAX_HS * ATTN_BLK] __attribute__((aligned(64)));   // V^T
    float kp[ATTN_BLK * ATTN_MAX_HS] __attribute__((aligned(64)));   // K (BLK x hs_pad)
    float dkt[ATTN_MAX_HS * ATTN_BLK] __attribute__((aligned(64)));  // dK^T / scale
    float dvt[ATTN_MAX_HS * ATTN_BLK] __attribute__((aligned(64)));  // dV^T
    float pb[ATTN_BLK * ATTN_BLK] __attribute__((aligned(64)));      // P of a tile pair (queries x keys)
    float dsb[ATTN_BLK * ATTN_BLK] __attribute__((aligned(64)));     // dS / scale
    float row_D[ATTN_BLK];
    for (int k0 = 0; k0 < T; k0 += ATTN_BLK) {
        const int nk = attn_min(ATTN_BLK, T - k0);
        for (int d = 0; d < hs; d++) {
            for (int j = 0; j < ATTN_BLK; j++) {
                kt[d * ATTN_BLK + j] = j < nk ? k[(k0 + j) * C3 + d] : 0.0f;
                vt[d * ATTN_BLK + j] = j < nk ? v[(k0 + j) * C3 + d] : 0.0f;
                dkt[d * ATTN_BLK + j] = 0.0f;
                dvt[d * ATTN_BLK + j] = 0.0f;
            }
        }
        for (int j = 0; j < ATTN_BLK; j++) {
            for (int d = 0; d < hs_pad; d++) { kp[j * hs_pad + d] = j < nk && d < hs ? k[(k0 + j) * C3 + d] : 0.0f; }
        }
        // query blocks at and below the diagonal; the first (q0 = k0) is the diagonal one,
        // where query i sees only keys j <= i of the block
        for (int q0 = k0; q0 < T; q0 += ATTN_BLK) {
            const int nq = attn_min(ATTN_BLK, T - q0);
            const int diag = q0 == k0;
            for (int i = 0; i < nq; i++) { row_D[i] = attn_dot(go + (q0 + i) * C, o + (q0 + i) * C, hs); }
            for (int i0 = 0; i0 < nq; i0 += ATTN_R) {
                const int rows = attn_min(ATTN_R, nq - i0);
                for (int c = 0; c < ATTN_BLK; c += ATTN_W) {
                    // keys all after these queries: P = dS = 0, and the products below never read them
                    if (diag && c > i0 + rows - 1) { continue; }
                    // mask_from: key column c+x comes after query row i0+r when x > (i0 - c) + r
                    ATTN_WITH_ROWS(rows, attn_bwd_probs, pb + i0 * ATTN_BLK + c, dsb + i0 * ATTN_BLK + c,
                                   q + (q0 + i0) * C3, C3, go + (q0 + i0) * C, C, kt + c, vt + c, hs,
                                   head_lse + q0 + i0, row_D + i0, scale, diag ? i0 - c : ATTN_BLK, ATTN_FP32);
                }
            }
            for (int c = 0; c < ATTN_BLK; c += ATTN_W) {
                // on the diagonal, queries before key column c contribute nothing
                const int i_from = diag ? c : 0;
                if (i_from >= nq) { continue; }
                for (int d0 = 0; d0 < hs; d0 += ATTN_R) {
                    const int rows = attn_min(ATTN_R, hs - d0);
                    ATTN_WITH_ROWS(rows, attn_bwd_kv, dvt + d0 * ATTN_BLK + c, go + (q0 + i_from) * C + d0, 1, C,
                                   pb + i_from * ATTN_BLK + c, nq - i_from, ATTN_BLK, ATTN_FP32);
                    ATTN_WITH_ROWS(rows, attn_bwd_kv, dkt + d0 * ATTN_BLK + c, q + (q0 + i_from) * C3 + d0, 1, C3,
                                   dsb + i_from * ATTN_BLK + c, nq - i_from, ATTN_BLK, ATTN_FP32);
                }
            }
            for (int i0 = 0; i0 < nq; i0 += ATTN_R) {
                const int rows = attn_min(ATTN_R, nq - i0);
                const int keys = diag ? attn_min(nk, i0 + rows) : nk;  // on the diagonal, keys after the last row are 0
                for (int c0 = 0; c0 < hs_pad; c0 += ATTN_W) {
                    ATTN_WITH_ROWS(rows, attn_bwd_q, dq + (q0 + i0) * C3, C3, dsb + i0 * ATTN_BLK, ATTN_BLK, kp + c0,
                                   hs_pad, keys, c0, hs, scale, ATTN_FP32);
                }
            }
        }
        for (int j = 0; j < nk; j++) {
            for (int d = 0; d < hs; d++) {
                dk[(k0 + j) * C3 + d] += scale * dkt[d * ATTN_BLK + j];
                dv[(k0 + j) * C3 + d] += dvt[d * ATTN_BLK + j];
            }
        }
    }
}

static void attention_backward3(float *dqkv, const float *dout, const float *out, const float *lse,
                               const float *qkv, int B, int T, int C, int NH) {
    attn_check_shape(T, C, NH);
    const float scale = 1.0f / sqrtf((float)(C / NH));
    // one head per task: every head costs the same, and its dK, dV, dQ are written by it alone
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            bwd3_head(dqkv, dout, out, lse, qkv, b, h, T, C, NH, scale);
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
    {attention_backward3, "blocks, Q and dout in place"},
    {attention_backward, "llmc/attention.h"},
};
static const int n_versions = sizeof(versions) / sizeof(versions[0]) - 1;


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

static void call_version(void *ctx) {
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
            call_version(&r);
            double err = dqkv_rel_err(dqkv, ref, (size_t)B * T, C);
            int ok = err <= 1e-5;
            if (!ok) { printf("  MISMATCH dqkv: rel err %.3e > 1e-5\n", err); }
            // determinism: a second call from the same start gives the same bits
            memset(dqkv2, 0, n_qkv * sizeof(float));
            r.dqkv = dqkv2;
            call_version(&r);
            int same = memcmp(dqkv, dqkv2, n_qkv * sizeof(float)) == 0;
            memcpy(dqkv, dqkv_init, n_qkv * sizeof(float));
            r.dqkv = dqkv;
            call_version(&r);
            ok &= check_close("dqkv accumulated onto nonzero", dqkv, ref_acc, n_qkv, 1e-5);
            double ms = time_budget_ms(call_version, &r, 500.0);
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
