/*
LayerNorm over the channels of each position, eps = 1e-5 as in GPT-2.

The forward pass writes the normalized output and the per-row mean and reciprocal
standard deviation (rstd), which the backward pass reads with the input.

Vectorized with llmc/vecmath.h, parallel over rows. A row (C floats) stays in L1
between the passes over it, so each kernel reads and writes each tensor once.
Sums over a row run in 4 x VEC_WIDTH interleaved partial sums, added together at
the end in a fixed order; the tail of a row that is not a whole vector is masked.

The simple versions these replace are version 1 of dev/cpu/layernorm_forward.c and
dev/cpu/layernorm_backward.c, which also time each step.
*/
#pragma once

#include <math.h>
#include <stddef.h>
#include <string.h>
#include "omp_compat.h"
#include "utils.h"
#include "vecmath.h"

#define LAYERNORM_EPS 1e-5f

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

// Sum of x[0..C-1], or of (x[c] - center)^2 if squared: in 4 interleaved vector sums.
VEC_INLINE float layernorm_row_sum(const float *x, int C, float center, int squared) {
    const vfloat m = vec_set1(center);
    vfloat acc[4] = {{0}, {0}, {0}, {0}};
    int c = 0;
    for (; c + 4 * VEC_WIDTH <= C; c += 4 * VEC_WIDTH) {
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const vfloat v = vec_load(x + c + k * VEC_WIDTH) - m;
            acc[k] += squared ? v * v : v;
        }
    }
    for (; c < C; c += VEC_WIDTH) {
        const int n = C - c < VEC_WIDTH ? C - c : VEC_WIDTH;
        const vfloat v = vec_select(vec_lanes_below(n), vec_load_partial(x + c, n) - m, vec_set1(0.0f));
        acc[0] += squared ? v * v : v;
    }
    const float sum = vec_sum((acc[0] + acc[1]) + (acc[2] + acc[3]));
    return squared ? sum : sum + center * C;
}

// Mean and rstd of the row x (C). Two passes: the variance of x - mean has no cancellation.
VEC_INLINE void layernorm_row_stats(const float *x, int C, float *mean, float *rstd) {
    const float m = layernorm_row_sum(x, C, 0.0f, 0) / C;
    const float v = layernorm_row_sum(x, C, m, 1) / C;
    *mean = m;
    *rstd = 1.0f / sqrtf(v + LAYERNORM_EPS);
}

// o = (x - mean) * rstd * weight + bias over one row.
VEC_INLINE void layernorm_row_apply(float *o, const float *x, float mean, float rstd,
                                    const float *weight, const float *bias, int C) {
    const vfloat m = vec_set1(mean), s = vec_set1(rstd);
    int c = 0;
    for (; c + VEC_WIDTH <= C; c += VEC_WIDTH) {
        vec_store(o + c, (vec_load(x + c) - m) * s * vec_load(weight + c) + vec_load(bias + c));
    }
    if (c < C) {
        const int n = C - c;
        const vfloat y = (vec_load_partial(x + c, n) - m) * s * vec_load_partial(weight + c, n) +
                         vec_load_partial(bias + c, n);
        vec_store_partial(o + c, y, n);
    }
}

#pragma GCC diagnostic pop

// out (N, C) = LayerNorm of inp (N, C); writes the row statistics mean, rstd (N) too.
static void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                              const float *weight, const float *bias, int N, int C) {
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        layernorm_row_stats(x, C, &mean[i], &rstd[i]);
        layernorm_row_apply(out + (size_t)i * C, x, mean[i], rstd[i], weight, bias, C);
    }
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"


// One row of the backward pass: dx (C) += the row's dinp, and if pdw is not NULL, the row's
// share of dweight and dbias added into pdw and pdb, (C) padded to a whole vector.
// The first pass over the row reads d and x (from memory) and sums mean(g) and mean(g n);
// the second reads them again from L1 and adds dx.
VEC_INLINE void layernorm_row_backward(float *dx, float *pdw, float *pdb, const float *d, const float *x,
                                       float mean, float rstd, const float *weight, int C) {
    const vfloat m = vec_set1(mean), s = vec_set1(rstd);
    vfloat g_sum = {0}, gn_sum = {0};
    for (int c = 0; c < C; c += VEC_WIDTH) {
        const int k = C - c < VEC_WIDTH ? C - c : VEC_WIDTH;  // a partial tail has d = 0 past C
        const vfloat dc = vec_load_partial(d + c, k), xc = vec_load_partial(x + c, k);
        const vfloat w = vec_load_partial(weight + c, k);
        const vfloat n = (xc - m) * s, g = dc * w;
        g_sum += g;
        gn_sum += g * n;
        if (pdw != NULL) {
            vec_store(pdw + c, vec_load(pdw + c) + dc * n);
            vec_store(pdb + c, vec_load(pdb + c) + dc);
        }
    }
    const vfloat g_mean = vec_set1(vec_sum(g_sum) / C), gn_mean = vec_set1(vec_sum(gn_sum) / C);
    int c = 0;
    for (; c + VEC_WIDTH <= C; c += VEC_WIDTH) {
        const vfloat n = (vec_load(x + c) - m) * s, g = vec_load(d + c) * vec_load(weight + c);
        vec_store(dx + c, vec_load(dx + c) + s * (g - g_mean - n * gn_mean));
    }
    if (c < C) {
        const int k = C - c;
        const vfloat n = (vec_load_partial(x + c, k) - m) * s;
        const vfloat g = vec_load_partial(d + c, k) * vec_load_partial(weight + c, k);
        vec_store_partial(dx + c, vec_load_partial(dx + c, k) + s * (g - g_mean - n * gn_mean), k);
    }
}

#pragma GCC diagnostic pop

// Rows of the backward pass are cut into this many blocks, each summing its own partial
// dweight and dbias; a fixed count (not one per thread) makes the sums, and so the
// results, the same for any number of threads. dev/cpu/layernorm_backward.c measures
// this against partitioning the channels among the threads (the simple version's way).
#define LAYERNORM_BACKWARD_BLOCKS 16

// Accumulates dinp (N, C), dweight (C), dbias (C) from dout (N, C).
// With n = (x - mean) * rstd and g = dout * weight:
//   dx = rstd * (g - mean(g) - n * mean(g * n)),  dweight = sum of dout * n,  dbias = sum of dout
// One pass over the rows reads dout and inp once: each block of rows sums its own partial
// dweight and dbias (in L1/L2) as it goes. The partials are then added in block order, each
// channel by one thread, into dweight and dbias.
static void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                               const float *inp, const float *mean, const float *rstd,
                               const float *weight, int N, int C) {
    enum { BLOCKS = LAYERNORM_BACKWARD_BLOCKS };
    const size_t Cp = ((size_t)C + 15) / 16 * 16;  // partial rows: whole vectors, on cache lines
    float *partial = aligned_alloc_or_die(BLOCKS * 2 * Cp * sizeof(float), "layernorm_backward partials");
    #pragma omp parallel
    {
        #pragma omp for schedule(static)
        for (int blk = 0; blk < BLOCKS; blk++) {
            float *pdw = partial + (size_t)blk * 2 * Cp, *pdb = pdw + Cp;
            memset(pdw, 0, 2 * Cp * sizeof(float));
            const int i0 = (int)((long)N * blk / BLOCKS), i1 = (int)((long)N * (blk + 1) / BLOCKS);
            for (int i = i0; i < i1; i++) {
                const size_t row = (size_t)i * C;
                layernorm_row_backward(dinp + row, pdw, pdb, dout + row, inp + row, mean[i], rstd[i], weight, C);
            }
        }
        // (the implicit barrier: every partial is complete)
        #pragma omp for schedule(static)
        for (int c = 0; c < C; c += VEC_WIDTH) {
            vfloat dw = {0}, db = {0};
            for (int blk = 0; blk < BLOCKS; blk++) {
                dw += vec_load(partial + (size_t)blk * 2 * Cp + c);
                db += vec_load(partial + (size_t)blk * 2 * Cp + Cp + c);
            }
            const int k = C - c < VEC_WIDTH ? C - c : VEC_WIDTH;
            vec_store_partial(dweight + c, vec_load_partial(dweight + c, k) + dw, k);
            vec_store_partial(dbias + c, vec_load_partial(dbias + c, k) + db, k);
        }
    }
    free(partial);
}
