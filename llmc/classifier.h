/*
The classifier: LM head (logits = x . wte^T, the weights tied to the token
embedding), softmax and cross-entropy, fused.

The logits of all B*T rows would be (B*T, Vp) floats, 824 MB at B=4, T=1024,
so the rows are processed in chunks through one (chunk_rows, Vp) scratch
buffer. When training, each chunk's logits become dlogits in place and the
head's backward runs right away, as llm.c's fused classifier does on the GPU:
the logits never have to be computed twice. In bf16 the dlogits are written as
bf16 bits, which is all the products read of them (half the bytes).
*/
#pragma once

#include <math.h>
#include <stddef.h>
#include <string.h>
#include "matmul.h"
#include "vecmath.h"

// Softmax over the first V columns of each row of logits (N, Vp) and the
// cross-entropy loss against targets (N): losses[i] = logsumexp - logits[target].
// If dloss != 0, the row becomes d(dloss * loss)/dlogits = dloss * (softmax - onehot)
// in place, with zeros in the padded columns V..Vp-1; otherwise logits are left as they are.
// With bf16 set (a bf16 run), that gradient is written instead as bf16 bits into the first half
// of the row's own storage (see classifier_rows_to_bf16), what the products' packing would round
// each float to: the backward products then read half the bytes (matmul_backward_bf16_dout).
//
// Vectorized (vecmath.h), parallel over rows; a row (V = 50257 floats, 200 KB) stays in L2
// between its passes: the max; then e = exp(x - max) and their sum (stored into the row
// when training, so that the last pass needs no exp); then the row times dloss / sum.
// The sum runs in blocks of CE_SUM_BLOCK terms, each summed in 4 x VEC_WIDTH float
// partial sums and added to a double: 50257 terms lose nothing to fp32 rounding.
#define CE_SUM_BLOCK 1024
// bf16 bits of a float, scalar: as vec_bf16_bits (the ftz flavour differs only on denormals, which
// the products that flush them read as zeros either way).
static inline uint16_t classifier_bf16(float x) { return (uint16_t)(gemm_bf16_bits(x) >> 16); }

// Row i of dlogits (N, Vp) as bf16 bits at (uint16_t *)(dlogits + i * Vp), its first Vp / 2 floats'
// bytes, rows 2 Vp uint16 apart: each row is rounded in place, front to back, every vector loaded
// before the bytes it overwrites are stored (those of floats already read), so rows stay apart and
// run in parallel. ftz (gemm_flushes_bf16_denormals): denormals may become zeros (vec_bf16_bits_ftz).
static void classifier_rows_to_bf16(float *dlogits, int N, int V, int Vp, int ftz) {
    const int body = V / VEC_WIDTH * VEC_WIDTH;
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        float *row = dlogits + (size_t)i * Vp;
        uint16_t *row16 = (uint16_t *)row;
        int v = 0;
        for (; v < body; v += VEC_WIDTH) { vec_store_bf16_partial(row16 + v, vec_bf16_bits_operand(vec_load(row + v), ftz), VEC_WIDTH); }
        for (; v < V; v++) { row16[v] = classifier_bf16(row[v]); }
        for (; v < Vp; v++) { row16[v] = 0; }
    }
}

static void crossentropy_softmax_forward_backward(float *losses, float *logits, const int *targets,
                                                  float dloss, int N, int V, int Vp, int bf16, int ftz) {
    const int body = V / VEC_WIDTH * VEC_WIDTH, tail = V - body;
    const vint tail_lanes = vec_lanes_below(tail);
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        float *row = logits + (size_t)i * Vp;
        vfloat mx[4];
        for (int k = 0; k < 4; k++) { mx[k] = vec_set1(-INFINITY); }
        int v = 0;
        for (; v + 4 * VEC_WIDTH <= body; v += 4 * VEC_WIDTH) {
            #pragma GCC unroll 4
            for (int k = 0; k < 4; k++) { mx[k] = vec_max(mx[k], vec_load(row + v + k * VEC_WIDTH)); }
        }
        for (; v < body; v += VEC_WIDTH) { mx[0] = vec_max(mx[0], vec_load(row + v)); }
        if (tail > 0) { mx[0] = vec_max(mx[0], vec_select(tail_lanes, vec_load_partial(row + body, tail), mx[0])); }
        const float maxval = vec_max_lane(vec_max(vec_max(mx[0], mx[1]), vec_max(mx[2], mx[3])));
        const vfloat m = vec_set1(maxval);
        const float target_logit = row[targets[i]];  // before the row is overwritten

        const int store = dloss != 0.0f;
        double sum = 0.0;
        for (int b0 = 0; b0 < body; b0 += CE_SUM_BLOCK) {
            const int b1 = b0 + CE_SUM_BLOCK < body ? b0 + CE_SUM_BLOCK : body;
            vfloat acc[4] = {{0}, {0}, {0}, {0}};
            v = b0;
            for (; v + 4 * VEC_WIDTH <= b1; v += 4 * VEC_WIDTH) {
                #pragma GCC unroll 4
                for (int k = 0; k < 4; k++) {
                    const vfloat e = vec_exp(vec_load(row + v + k * VEC_WIDTH) - m);
                    acc[k] += e;
                    if (store) { vec_store(row + v + k * VEC_WIDTH, e); }
                }
            }
            for (; v < b1; v += VEC_WIDTH) {
                const vfloat e = vec_exp(vec_load(row + v) - m);
                acc[0] += e;
                if (store) { vec_store(row + v, e); }
            }
            sum += (double)vec_sum((acc[0] + acc[1]) + (acc[2] + acc[3]));
        }
        if (tail > 0) {
            const vfloat e = vec_select(tail_lanes, vec_exp(vec_load_partial(row + body, tail) - m), vec_set1(0.0f));
            sum += (double)vec_sum(e);
            if (store) { vec_store_partial(row + body, e, tail); }
        }
        losses[i] = maxval + (float)log(sum) - target_logit;
        if (store && bf16) {  // as below, rounded, into the row's first half (classifier_rows_to_bf16)
            const vfloat scale = vec_set1((float)(dloss / sum));
            const int t = targets[i];
            uint16_t *row16 = (uint16_t *)row;
            for (v = 0; v < body; v += VEC_WIDTH) {
                vfloat x = vec_load(row + v) * scale;
                if (t - v >= 0 && t - v < VEC_WIDTH) { x[t - v] -= dloss; }
                vec_store_bf16_partial(row16 + v, vec_bf16_bits_operand(x, ftz), VEC_WIDTH);
            }
            for (; v < V; v++) { row16[v] = classifier_bf16(v == t ? row[v] * scale[0] - dloss : row[v] * scale[0]); }
            for (; v < Vp; v++) { row16[v] = 0; }
        } else if (store) {
            const vfloat scale = vec_set1((float)(dloss / sum));
            for (v = 0; v < body; v += VEC_WIDTH) { vec_store(row + v, vec_load(row + v) * scale); }
            for (; v < V; v++) { row[v] *= scale[0]; }
            row[targets[i]] -= dloss;
            for (v = V; v < Vp; v++) { row[v] = 0.0f; }
        }
    }
}
