/*
Causal multi-head self-attention.

qkv is (B, T, 3C): for each position the query, key and value vectors side by
side, each (C) = NH heads of hs = C / NH channels; head h of the query of
position t is qkv[(b*T + t)*3C + h*hs], its key is C further, its value 2C.

The (T, T) attention matrix is never stored. The forward pass keeps only the
log-sum-exp of each softmax row, lse (B, NH, T); the backward pass recomputes
the probabilities from it: p = exp(q.k * scale - lse). Memory stays O(B*T*C).
*/
#pragma once

#include <math.h>
#include <stddef.h>

// out is (B, T, C), lse is (B, NH, T), qkv is (B, T, 3C).
static void attention_forward(float *out, float *lse, const float *qkv, int B, int T, int C, int NH) {
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(3)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            for (int h = 0; h < NH; h++) {
                const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                float *o = out + ((size_t)b * T + t) * C + h * hs;
                // online softmax over keys 0..t: running max m, running sum l, o = sum p_j v_j
                float m = -INFINITY, l = 0.0f;
                for (int i = 0; i < hs; i++) { o[i] = 0.0f; }
                for (int j = 0; j <= t; j++) {
                    const float *k = qkv + ((size_t)b * T + j) * 3 * C + C + h * hs;
                    const float *v = k + C;
                    float s = 0.0f;
                    for (int i = 0; i < hs; i++) { s += q[i] * k[i]; }
                    s *= scale;
                    if (s > m) {  // new maximum: rescale what was summed so far
                        float r = expf(m - s);
                        l *= r;
                        for (int i = 0; i < hs; i++) { o[i] *= r; }
                        m = s;
                    }
                    float p = expf(s - m);
                    l += p;
                    for (int i = 0; i < hs; i++) { o[i] += p * v[i]; }
                }
                for (int i = 0; i < hs; i++) { o[i] /= l; }
                lse[((size_t)b * NH + h) * T + t] = m + logf(l);
            }
        }
    }
}

// Accumulates dqkv (B, T, 3C) from dout (B, T, C), given the forward's out, lse and qkv.
// With p the softmax row and dp_j = dout.v_j, the softmax backward is
// ds_j = p_j (dp_j - sum_i p_i dp_i), and sum_i p_i dp_i = dout.out.
static void attention_backward(float *dqkv, const float *dout, const float *out, const float *lse,
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
