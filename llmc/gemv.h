/*
Matrix-vector product for the linear layers on one row (BT = 1): the incremental
decoding of llmc/gpt2.h produces one position per step, and the LM head of a
sample is one row too.

    out (OC) = addend (OC) + weight (OC, C) . inp (C) + bias (OC), then optionally GELU.

With one row there is nothing to reuse: every weight is read once and used once,
so the product is bound by memory bandwidth, and the GEMM's packing (a copy of
the whole weight matrix per call) would triple the traffic. Here each weight row
is read in place, once, as one sequential stream; rows are taken 4 at a time so
that each load of inp serves 4 rows. The threads split the output channels in
equal contiguous blocks (static schedule), and every output's sum runs over C in
one fixed order (vector lanes, then the lanes in order, then the tail), so the
result is bit-identical for any thread count. It differs from the GEMM's only by
fp32 rounding (another order of the same sum).

The GELU epilogue is gelu.h's gelu_vec, as the GEMM's, and `pre` gets the value
before it, as in gemm_epilogue.
*/
#pragma once

#include <stddef.h>
#include "gelu.h"
#include "vecmath.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

// The dot products of rows w0..w3 (each C floats) with x, into d[0..3].
static inline void gemv_dot4(float d[4], const float *w0, const float *w1, const float *w2, const float *w3,
                             const float *x, int C) {
    vfloat a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    int c = 0;
    for (; c + VEC_WIDTH <= C; c += VEC_WIDTH) {
        const vfloat xv = vec_load(x + c);
        a0 += vec_load(w0 + c) * xv;
        a1 += vec_load(w1 + c) * xv;
        a2 += vec_load(w2 + c) * xv;
        a3 += vec_load(w3 + c) * xv;
    }
    if (c < C) {
        const int n = C - c;
        const vfloat xv = vec_load_partial(x + c, n);
        a0 += vec_load_partial(w0 + c, n) * xv;
        a1 += vec_load_partial(w1 + c, n) * xv;
        a2 += vec_load_partial(w2 + c, n) * xv;
        a3 += vec_load_partial(w3 + c, n) * xv;
    }
    d[0] = vec_sum(a0);
    d[1] = vec_sum(a1);
    d[2] = vec_sum(a2);
    d[3] = vec_sum(a3);
}

// out (OC) = addend + weight (OC, C) . inp (C) + bias; with gelu, out = gelu(that) and pre
// (if not NULL) = that. addend and bias may be NULL; addend may be out itself.
static void gemv(float *out, const float *addend, const float *inp, const float *weight, const float *bias,
                 int C, int OC, int gelu, float *pre) {
    const int quads = (OC + 3) / 4;
    #pragma omp parallel for schedule(static)
    for (int q = 0; q < quads; q++) {
        const int o0 = 4 * q, n = OC - o0 < 4 ? OC - o0 : 4;
        const float *w[4];
        for (int i = 0; i < 4; i++) { w[i] = weight + (size_t)(o0 + (i < n ? i : 0)) * C; }  // past OC: a dummy row
        float d[4];
        gemv_dot4(d, w[0], w[1], w[2], w[3], inp, C);
        for (int i = 0; i < n; i++) {
            const int o = o0 + i;
            float v = (addend != NULL ? addend[o] : 0.0f) + d[i] + (bias != NULL ? bias[o] : 0.0f);
            if (gelu) {
                if (pre != NULL) { pre[o] = v; }
                v = gelu_vec(vec_set1(v))[0];
            }
            out[o] = v;
        }
    }
}

#pragma GCC diagnostic pop
