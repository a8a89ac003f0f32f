/*
The encoder: token embedding plus position embedding.
*/
#pragma once

#include <stddef.h>
#include "omp_compat.h"

// out is (B, T, C), inp is (B, T) token ids, wte is (Vp, C), wpe is (maxT, C).
static void encoder_forward(float *out, const int *inp, const float *wte, const float *wpe,
                            int B, int T, int C) {
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *tok = wte + (size_t)inp[b * T + t] * C;
            const float *pos = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++) { o[c] = tok[c] + pos[c]; }
        }
    }
}

// Accumulates dwte and dwpe from dout (B, T, C). A token id can repeat, so the
// threads split the channels, not the positions: no two threads touch one row
// element, and each element sums its positions in a fixed order (deterministic).
static void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp,
                             int B, int T, int C) {
    #pragma omp parallel
    {
        int nth = omp_get_num_threads(), tid = omp_get_thread_num();
        int c0 = (int)((long)C * tid / nth), c1 = (int)((long)C * (tid + 1) / nth);
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                const float *d = dout + ((size_t)b * T + t) * C;
                float *tok = dwte + (size_t)inp[b * T + t] * C;
                float *pos = dwpe + (size_t)t * C;
                for (int c = c0; c < c1; c++) {
                    tok[c] += d[c];
                    pos[c] += d[c];
                }
            }
        }
    }
}
