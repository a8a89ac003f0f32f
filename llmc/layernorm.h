/*
LayerNorm over the channels of each position, eps = 1e-5 as in GPT-2.

The forward pass keeps only the per-row mean and reciprocal standard deviation
(rstd); the normalized output is recomputed from them when the backward pass
needs it (layernorm_apply), which saves storing a (B, T, C) tensor per use.
*/
#pragma once

#include <math.h>
#include <stddef.h>
#include "omp_compat.h"

#define LAYERNORM_EPS 1e-5f

// out = (inp - mean) * rstd * weight + bias, given the row statistics.
// out, inp are (N, C) with N = B*T rows; mean, rstd are (N); weight, bias are (C).
static void layernorm_apply(float *out, const float *inp, const float *mean, const float *rstd,
                            const float *weight, const float *bias, int N, int C) {
    #pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        float *o = out + (size_t)i * C;
        const float m = mean[i], s = rstd[i];
        for (int c = 0; c < C; c++) { o[c] = (x[c] - m) * s * weight[c] + bias[c]; }
    }
}

static void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                              const float *weight, const float *bias, int N, int C) {
    #pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        float m = 0.0f;
        for (int c = 0; c < C; c++) { m += x[c]; }
        m /= C;
        float v = 0.0f;  // two passes: the variance of x - mean has no cancellation
        for (int c = 0; c < C; c++) { v += (x[c] - m) * (x[c] - m); }
        v /= C;
        mean[i] = m;
        rstd[i] = 1.0f / sqrtf(v + LAYERNORM_EPS);
    }
    layernorm_apply(out, inp, mean, rstd, weight, bias, N, C);
}

// Accumulates dinp (N, C), dweight (C), dbias (C) from dout (N, C).
// With n = (x - mean) * rstd and g = dout * weight:
//   dx = rstd * (g - mean(g) - n * mean(g * n))
static void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
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
    // dweight and dbias sum over all rows: each thread owns a range of channels,
    // so the sums need no reduction across threads and keep a fixed order.
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
