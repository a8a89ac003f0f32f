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

bf16 versions (--precision bf16: the kernels' arithmetic under matmul_set_precision(PRECISION_BF16),
given the bf16 forward's out and lse):
  1  simple: Bf16Attention.backward of scripts/reference/gpt2_reference.py (the spec) in float64 on Q,
     K, V and dout rounded to bf16, P and dS rounded to bf16 where they enter the products
     (the reference)
  2  llmc/attention.h, emulated: the fp32 tiles over each bf16 pair's halves, high first (CPUs
     without AVX512_BF16 or where vdpbf16ps is slower than the FMA, LLMC_BF16_EMULATE=1)
  3  llmc/attention.h, vdpbf16ps: skipped where the build or the CPU lacks AVX512_BF16 or
     with LLMC_BF16_EMULATE=1; must give version 2's bits
  4  llmc/attention.h, AMX tiles (TDPBF16PS, the amx path's attention): skipped where the build
     or the CPU lacks AMX (a -DGEMM_AMX_EMULATE build runs it on a C model of the tiles); its
     sums are not version 2's bits and are checked against version 1 only
  dqkv may differ from version 1 by rounding flips of P and dS, each element within the
  slack that version 1 computes for it (attention_harness.h). FLOPs counted as in fp32.

./attention_backward       checks every version against version 1 on every shape and times it
./attention_backward N     the same for version N only
The options (--precision bf16, --check), the checks and the threads: attention_harness.h.
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
// version 1 in bf16: Bf16Attention.backward of scripts/reference/gpt2_reference.py (the spec) written
// out: Q, K, V and dout rounded to bf16 (nearest even); per query D = dout . out, unrounded;
// per key p = exp(score - lse) from the given lse, dp = dout . v, dS = p (dp - D) (unscaled);
// dV += round(p) dout, dQ += scale round(dS) K, dK += scale round(dS) Q; all in float64, added
// to dqkv at the end. slack (B,T,3C), unless NULL: how far rounding flips of P and dS can move
// each gradient (attention_harness.h).

static void attention_backward1_bf16_slack(float *dqkv, float *slack, const float *dout, const float *out,
                                           const float *lse, const float *qkv, int B, int T, int C, int NH) {
    const int hs = C / NH;
    const double scale = 1.0 / sqrt((double)hs);
    float *qkvr = aligned_alloc_or_die((size_t)B * T * 3 * C * sizeof(float), "rounded qkv");
    float *doutr = aligned_alloc_or_die((size_t)B * T * C * sizeof(float), "rounded dout");
    for (size_t i = 0; i < (size_t)B * T * 3 * C; i++) { qkvr[i] = gemm_bf16_round(qkv[i]); }
    for (size_t i = 0; i < (size_t)B * T * C; i++) { doutr[i] = gemm_bf16_round(dout[i]); }
    // one (b, h) per task: keys and values of a head receive gradient from all its queries
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            // dq, dk, dv of the head (T x hs each, unscaled), then their slacks
            double *g = calloc((size_t)6 * T * hs, sizeof(double));
            if (g == NULL) { die("out of memory"); }
            double *dq = g, *dk = g + T * hs, *dv = g + 2 * T * hs;
            double *dq_slack = g + 3 * T * hs, *dk_slack = g + 4 * T * hs, *dv_slack = g + 5 * T * hs;
            for (int t = 0; t < T; t++) {
                const size_t row = (size_t)b * T + t;
                const float *q = qkvr + row * 3 * C + h * hs;
                const float *go = doutr + row * C + h * hs;
                const double row_lse = lse[((size_t)b * NH + h) * T + t];
                double D = 0.0, D_mag = 0.0;
                for (int i = 0; i < hs; i++) {
                    D += (double)dout[row * C + h * hs + i] * out[row * C + h * hs + i];
                    D_mag += fabs((double)dout[row * C + h * hs + i] * out[row * C + h * hs + i]);
                }
                for (int j = 0; j <= t; j++) {
                    const float *k = qkvr + ((size_t)b * T + j) * 3 * C + C + h * hs, *v = k + C;
                    double dot = 0.0, dot_mag = 0.0, dp = 0.0, dp_mag = 0.0;
                    for (int i = 0; i < hs; i++) {
                        dot += (double)q[i] * k[i];
                        dot_mag += fabs((double)q[i] * k[i]);
                        dp += (double)go[i] * v[i];
                        dp_mag += fabs((double)go[i] * v[i]);
                    }
                    const double p = exp(dot * scale - row_lse), ds = p * (dp - D);
                    const double pr = gemm_bf16_round((float)p), dsr = gemm_bf16_round((float)ds);
                    // the kernel's errors: p's through its score and exp (lse is the same float);
                    // dS's through p, its sums dp and D, and its subtraction and product
                    const double p_err = ATTN_FP32_ERR * (1.0 + scale * dot_mag + fabs(row_lse));
                    const double ds_err = fabs(ds) * (p_err + ATTN_FP32_ERR) + p * ATTN_FP32_ERR * (dp_mag + D_mag);
                    const double p_flip = attn_bf16_flip(p, p * p_err), ds_flip = attn_bf16_flip(ds, ds_err);
                    for (int i = 0; i < hs; i++) {
                        dq[t * hs + i] += dsr * k[i];
                        dk[j * hs + i] += dsr * q[i];
                        dv[j * hs + i] += pr * go[i];
                        dq_slack[t * hs + i] += ds_flip * fabs(k[i]);
                        dk_slack[j * hs + i] += ds_flip * fabs(q[i]);
                        dv_slack[j * hs + i] += p_flip * fabs(go[i]);
                    }
                }
            }
            for (int t = 0; t < T; t++) {
                const size_t at = ((size_t)b * T + t) * 3 * C + h * hs;
                for (int i = 0; i < hs; i++) {
                    dqkv[at + i] += (float)(scale * dq[t * hs + i]);
                    dqkv[at + C + i] += (float)(scale * dk[t * hs + i]);
                    dqkv[at + 2 * C + i] += (float)dv[t * hs + i];
                    if (slack != NULL) {
                        slack[at + i] = (float)(scale * dq_slack[t * hs + i]);
                        slack[at + C + i] = (float)(scale * dk_slack[t * hs + i]);
                        slack[at + 2 * C + i] = (float)dv_slack[t * hs + i];
                    }
                }
            }
            free(g);
        }
    }
    free(qkvr);
    free(doutr);
}

static void attention_backward1_bf16(float *dqkv, const float *dout, const float *out, const float *lse,
                                     const float *qkv, int B, int T, int C, int NH) {
    attention_backward1_bf16_slack(dqkv, NULL, dout, out, lse, qkv, B, T, C, NH);
}

// ----------------------------------------------------------------------------
// version 2: the saved (T,T) probabilities per head, OpenBLAS for the products

static float *saved_att;     // (B, NH, T, T) probabilities P from the forward, made by main
static float *scratch_datt;  // (B, NH, T, T) dP, then dS

// P per head as the materializing forward (its version 2) makes it.
static void materialize_probs(float *att, const float *qkv, int B, int T, int C, int NH) {
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            attn_materialize_head(att + ((size_t)b * NH + h) * T * T, NULL, qkv, b, h, T, C, NH);
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
                                   hs_pad, keys, c0, hs, scale, 0, ATTN_FP32);
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

// path: in bf16, the kernel's path (attn_bf16_select_path) for versions 2 and up.
// overwrites: the version writes dqkv whatever it held (llmc/attention.h, so that the model
// needs no zeroing pass); the others add to it.
typedef struct { backward_fn fn; const char *name; Bf16Path path; int overwrites; } version;

static const version versions_fp32[] = {
    {NULL, NULL, BF16_PATH_EMULATED, 0},
    {attention_backward1, "simple (reference)", BF16_PATH_EMULATED, 0},
    {attention_backward2, "materialized (T,T), sgemm", BF16_PATH_EMULATED, 0},
    {attention_backward3, "blocks, Q and dout in place", BF16_PATH_EMULATED, 0},
    {attention_backward, "llmc/attention.h", BF16_PATH_EMULATED, 1},
};
// bf16: the reference, then the kernel on each of its paths (emulated and vdpbf16ps: the same bits)
static const version versions_bf16[] = {
    {NULL, NULL, BF16_PATH_EMULATED, 0},
    {attention_backward1_bf16, "simple bf16 (reference)", BF16_PATH_EMULATED, 0},
    {attention_backward, "llmc/attention.h, emulated", BF16_PATH_EMULATED, 1},
    {attention_backward, "llmc/attention.h, vdpbf16ps", BF16_PATH_AVX512BF16, 1},
    {attention_backward, "llmc/attention.h, AMX tiles", BF16_PATH_AMX, 1},
};

// The dq, dk and dv parts of a (B*T, 3C) gradient against the reference, each relative to its
// own largest value (and each element within its slack, if any): the largest error of the
// three, and their counts added up.
static attn_error dqkv_error(const float *got, const float *ref, const float *slack, size_t rows, int C) {
    attn_error all = {0.0, 0, 0, 0};
    for (int part = 0; part < 3; part++) {
        const attn_error e = attn_error_of(got + part * C, ref + part * C, slack != NULL ? slack + part * C : NULL,
                                           rows, C, 3 * (size_t)C, 1e-5);
        if (!(e.err <= all.err)) { all.err = e.err; }
        all.over += e.over;
        all.fail += e.fail;
        all.n += e.n;
    }
    return all;
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
    const attn_options opt = attn_parse_args(argc, argv, N_VERSIONS(versions_fp32), N_VERSIONS(versions_bf16));
    const int bf16 = opt.precision == PRECISION_BF16;
    const version *versions = bf16 ? versions_bf16 : versions_fp32;
    attn_harness_start("backward", &opt);  // the forward below runs at this precision too
    int failures = 0;
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        if (!attn_shape_runs(&opt, s)) { continue; }
        const int B = shapes[s].B, T = shapes[s].T, C = shapes[s].C, NH = shapes[s].NH;
        const size_t n_qkv = (size_t)B * T * 3 * C, n_out = (size_t)B * T * C;
        const double flops = attn_shape_begin(s, 5);  // S = Q K^T, dP = dO V^T, dV, dK, dQ
        float *qkv = attn_random_qkv(s);
        float *dout = make_random(n_out, 50 + s);
        float *out = make_random(n_out, 0);
        float *lse = make_random((size_t)B * NH * T, 0);
        if (bf16) { attn_bf16_select_path(1, &(const char *){NULL}); }  // the forward's path: any, they agree
        attention_forward(out, lse, qkv, B, T, C, NH);
        // errors are measured on gradients accumulated from zero; a call onto existing values
        // (dqkv_init) is checked too: added to them, or ignoring them (overwrites)
        float *dqkv_init = make_random(n_qkv, 99);
        float *ref = calloc(n_qkv, sizeof(float));
        float *ref_acc = make_random(n_qkv, 0);
        float *ref_slack = NULL;  // bf16: what rounding flips of P and dS may move each gradient by
        float *dqkv = make_random(n_qkv, 0);
        float *dqkv2 = make_random(n_qkv, 0);
        if (ref == NULL) { die("out of memory"); }
        memcpy(ref_acc, dqkv_init, n_qkv * sizeof(float));
        if (bf16) {
            ref_slack = make_random(n_qkv, 0);
            attention_backward1_bf16_slack(ref, ref_slack, dout, out, lse, qkv, B, T, C, NH);
            attention_backward1_bf16(ref_acc, dout, out, lse, qkv, B, T, C, NH);
        } else {
            attention_backward1(ref, dout, out, lse, qkv, B, T, C, NH);
            attention_backward1(ref_acc, dout, out, lse, qkv, B, T, C, NH);
            saved_att = aligned_alloc_or_die((size_t)B * NH * T * T * sizeof(float), "(B,NH,T,T) probabilities");
            scratch_datt = aligned_alloc_or_die((size_t)B * NH * T * T * sizeof(float), "(B,NH,T,T) scratch");
            materialize_probs(saved_att, qkv, B, T, C, NH);
        }
        for (int v = 1; v <= opt.n_versions; v++) {
            if (!attn_version_runs(&opt, v, versions[v].name, versions[v].path)) { continue; }
            memset(dqkv, 0, n_qkv * sizeof(float));
            struct run r = {versions[v].fn, dqkv, dout, out, lse, qkv, B, T, C, NH};
            call_version(&r);
            // bf16: rounding flips of P and dS, within ref_slack
            const attn_error e = dqkv_error(dqkv, ref, ref_slack, (size_t)B * T, C);
            int ok = e.fail == 0;
            if (!ok) { printf("  MISMATCH dqkv: rel err %.3e, %zu of %zu elements beyond 1e-5 + their slack\n", e.err, e.fail, e.n); }
            // determinism: a second call from the same start gives the same bits
            memset(dqkv2, 0, n_qkv * sizeof(float));
            r.dqkv = dqkv2;
            call_version(&r);
            const int same = memcmp(dqkv, dqkv2, n_qkv * sizeof(float)) == 0;
            if (attn_is_vdpbf16ps(&opt, v, versions[v].path)) {
                memset(dqkv2, 0, n_qkv * sizeof(float));
                attn_call_emulated(call_version, &r);
                ok &= attn_paths_agree(memcmp(dqkv, dqkv2, n_qkv * sizeof(float)) == 0);
            }
            // a call onto a dqkv holding other values: added to them, or (overwrites) the
            // same bits as onto zeros, every element written
            memcpy(dqkv2, dqkv_init, n_qkv * sizeof(float));
            r.dqkv = dqkv2;
            call_version(&r);
            if (versions[v].overwrites) {
                if (memcmp(dqkv, dqkv2, n_qkv * sizeof(float)) != 0) {
                    printf("  MISMATCH dqkv written onto nonzero values differs from dqkv written onto zeros\n");
                    ok = 0;
                }
            } else {
                const attn_error e_acc = dqkv_error(dqkv2, ref_acc, ref_slack, (size_t)B * T, C);
                if (e_acc.fail > 0) {
                    printf("  MISMATCH dqkv accumulated onto nonzero: rel err %.3e, %zu elements beyond 1e-5 + their slack\n",
                           e_acc.err, e_acc.fail);
                    ok = 0;
                }
            }
            r.dqkv = dqkv;
            char errs[64];
            snprintf(errs, sizeof(errs), "err dqkv %.1e", e.err);
            failures += attn_version_end(&opt, v, versions[v].name, call_version, &r, flops, errs, ok, same, e.over);
        }
        if (!bf16) { free(saved_att); free(scratch_datt); }
        free(qkv); free(dout); free(out); free(lse); free(dqkv_init); free(ref); free(ref_acc); free(ref_slack);
        free(dqkv); free(dqkv2);
    }
    return attn_harness_end(failures);
}
