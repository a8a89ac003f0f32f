/*
GELU with the tanh approximation, as GPT-2 (PyTorch's approximate='tanh'):
gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)

Computed through one exp as a sigmoid, since 0.5 (1 + tanh(u)) = s = 1 / (1 + e) with
e = exp(-2u): gelu(x) = x s. No step cancels: where 1 + tanh(u) is tiny (x very negative)
s keeps its full relative precision, unlike 1 + tanhf(u). The derivative, with
1 - tanh(u)^2 = 4 e s^2:
  gelu'(x) = s + 2 x e s^2 u'(x) = s (1 + 2 x u'(x) (e s)),  u'(x) = sqrt(2/pi) (1 + 3 0.044715 x^2)
where e s = 1 - s is taken as e * s when e < 1 and as 1 - s otherwise (no cancellation
either way, and no inf * 0 when e overflows). Both are within 2.5 ulp of 1 (their scale)
of the exact function: dev/cpu/vecmath.c. This is the form of the GEMM's GELU epilogue too.

The simple scalar versions these replace are version 1 in dev/cpu/gelu.c.
*/
#pragma once

#include <stddef.h>
#include "utils.h"    // soft_prefetch_enabled
#include "vecmath.h"

#define GELU_SCALE 0.7978845608028654f  // sqrt(2/pi)
#define GELU_CUBIC 0.044715f

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

// exp(-2u) for the GELU of x.
VEC_INLINE vfloat gelu_exp_minus_2u(vfloat x) {
    return vec_exp(x * (x * x * (-2.0f * GELU_SCALE * GELU_CUBIC) - 2.0f * GELU_SCALE));
}

VEC_INLINE vfloat gelu_vec(vfloat x) { return x / (gelu_exp_minus_2u(x) + 1.0f); }

VEC_INLINE vfloat gelu_grad_vec(vfloat x) {
    const vfloat e = gelu_exp_minus_2u(x);
    const vfloat s = 1.0f / (e + 1.0f);
    const vfloat one_minus_s = vec_select(e < 1.0f, e * s, 1.0f - s);
    const vfloat du = (x * x * (3.0f * GELU_CUBIC) + 1.0f) * GELU_SCALE;
    return s * (1.0f + 2.0f * x * du * one_minus_s);
}

#pragma GCC diagnostic pop

// out, inp are (N) for any shape.
static void gelu_forward(float *out, const float *inp, size_t N) {
    const size_t body = N / VEC_WIDTH * VEC_WIDTH;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < body; i += VEC_WIDTH) { vec_store(out + i, gelu_vec(vec_load(inp + i))); }
    if (body < N) {
        const int n = (int)(N - body);
        vec_store_partial(out + body, gelu_vec(vec_load_partial(inp + body, n)), n);
    }
}

// gelu_backward fetches its two sources this many floats ahead (0: none): in the step they come
// from memory (fch from the forward pass, 50 MB a layer at B=4 T=1024), and the hardware
// prefetchers alone kept the pass at about 16 GB/s, where AdamW streams at 46. On this session's
// Intel Xeon (family 6 model 207, no AMX shown, 2026-11-28), fp32 B=4 T=1024, builds alternated
// (2 rounds of 3 steps): the gelu line 100-103 ms a step against 111-119 (1024 floats ahead:
// 98-106); on the lent Xeon with AMX, bf16 (3 rounds): 118-150 against 143-185. The same bits.
// On AMD's Zen 4 (bf16, 2 rounds) 82-93 ms with them against 80-83 without: Intel's CPUs only
// (soft_prefetch_enabled, utils.h).
#ifndef GELU_PREFETCH
#define GELU_PREFETCH 256
#endif
// dinp = gelu'(inp) * dout. Overwrites dinp, which may alias dout (in place).
static void gelu_backward(float *dinp, const float *inp, const float *dout, size_t N) {
    const size_t body = N / VEC_WIDTH * VEC_WIDTH;
    const int prefetch = GELU_PREFETCH > 0 && soft_prefetch_enabled();
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < body; i += VEC_WIDTH) {
        if (prefetch && i % 16 == 0) {
            __builtin_prefetch(inp + i + GELU_PREFETCH, 0, 3);
            __builtin_prefetch(dout + i + GELU_PREFETCH, 0, 3);
        }
        vec_store(dinp + i, gelu_grad_vec(vec_load(inp + i)) * vec_load(dout + i));
    }
    if (body < N) {
        const int n = (int)(N - body);
        vec_store_partial(dinp + body, gelu_grad_vec(vec_load_partial(inp + body, n)) *
                                           vec_load_partial(dout + body, n), n);
    }
}

