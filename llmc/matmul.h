/*
Matrix multiplication with bias: the linear layers of GPT-2.

Weights are stored as in PyTorch's nn.Linear, (OC, C): output channel major.
All backward functions accumulate (+=) into their outputs, so a caller can sum
the gradients of several uses of one tensor (and of several micro-batches).
*/
#pragma once

#include <stddef.h>

// out is (BT, OC), inp is (BT, C), weight is (OC, C), bias is (OC) or NULL.
static void matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                           int BT, int C, int OC) {
    #pragma omp parallel for collapse(2)
    for (int i = 0; i < BT; i++) {
        for (int o = 0; o < OC; o++) {
            const float *x = inp + (size_t)i * C;
            const float *w = weight + (size_t)o * C;
            float sum = bias != NULL ? bias[o] : 0.0f;
            for (int c = 0; c < C; c++) { sum += x[c] * w[c]; }
            out[(size_t)i * OC + o] = sum;
        }
    }
}

// dout is (BT, OC). Accumulates dinp (BT, C) += dout . weight, dweight (OC, C) += dout^T . inp,
// dbias (OC) += column sums of dout. dinp or dbias may be NULL to skip them.
static void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, int BT, int C, int OC) {
    if (dinp != NULL) {
        #pragma omp parallel for
        for (int i = 0; i < BT; i++) {
            const float *g = dout + (size_t)i * OC;
            float *dx = dinp + (size_t)i * C;
            for (int o = 0; o < OC; o++) {
                const float *w = weight + (size_t)o * C;
                for (int c = 0; c < C; c++) { dx[c] += g[o] * w[c]; }
            }
        }
    }
    #pragma omp parallel for
    for (int o = 0; o < OC; o++) {
        float *dw = dweight + (size_t)o * C;
        float db = 0.0f;
        for (int i = 0; i < BT; i++) {
            float g = dout[(size_t)i * OC + o];
            const float *x = inp + (size_t)i * C;
            for (int c = 0; c < C; c++) { dw[c] += g * x[c]; }
            db += g;
        }
        if (dbias != NULL) { dbias[o] += db; }
    }
}
