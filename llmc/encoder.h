/*
The encoder: token embedding plus position embedding.

Vectorized (llmc/vecmath.h); the simple versions are version 1 in dev/cpu/encoder.c.
*/
#pragma once

#include <stddef.h>
#include "omp_compat.h"
#include "vecmath.h"

// out is (B, T, C), inp is (B, T) token ids, wte is (Vp, C), wpe is (maxT, C).
static void encoder_forward(float *out, const int *inp, const float *wte, const float *wpe,
                            int B, int T, int C) {
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < B * T; i++) {
        float *o = out + (size_t)i * C;
        const float *tok = wte + (size_t)inp[i] * C;
        const float *pos = wpe + (size_t)(i % T) * C;
        int c = 0;
        for (; c + VEC_WIDTH <= C; c += VEC_WIDTH) { vec_store(o + c, vec_load(tok + c) + vec_load(pos + c)); }
        for (; c < C; c++) { o[c] = tok[c] + pos[c]; }
    }
}

// Accumulates dwte and dwpe from dout (B, T, C). A token id can repeat, so the
// threads split the channels, not the positions: no two threads touch one row
// element, and each element sums its positions in a fixed order (deterministic).
// The split is in whole vectors, so each thread's part of a row is aligned alike.
static void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp,
                             int B, int T, int C) {
    const int nvec = (C + VEC_WIDTH - 1) / VEC_WIDTH;
    #pragma omp parallel
    {
        const int nth = omp_get_num_threads(), tid = omp_get_thread_num();
        const int c0 = (int)((long)nvec * tid / nth) * VEC_WIDTH;
        const int c1 = (int)((long)nvec * (tid + 1) / nth) * VEC_WIDTH < C ? (int)((long)nvec * (tid + 1) / nth) * VEC_WIDTH : C;
        for (int i = 0; i < B * T; i++) {
            const float *d = dout + (size_t)i * C;
            float *tok = dwte + (size_t)inp[i] * C;
            float *pos = dwpe + (size_t)(i % T) * C;
            int c = c0;
            for (; c + VEC_WIDTH <= c1; c += VEC_WIDTH) {
                const vfloat dc = vec_load(d + c);
                vec_store(tok + c, vec_load(tok + c) + dc);
                vec_store(pos + c, vec_load(pos + c) + dc);
            }
            for (; c < c1; c++) {
                tok[c] += d[c];
                pos[c] += d[c];
            }
        }
    }
}
