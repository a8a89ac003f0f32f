/*
The residual connection: out = a + b.

Its backward passes dout unchanged to both a and b. The model gets that for
free by letting both branches accumulate into one gradient buffer (see
block_backward in gpt2.h), so there is no separate backward kernel.

When a LayerNorm follows the add, residual_layernorm_forward (layernorm.h) does
both in one pass.
*/
#pragma once

#include <stddef.h>
#include "vecmath.h"

// out, a, b are (N) for any shape; out may alias a or b.
static void residual_forward(float *out, const float *a, const float *b, size_t N) {
    const size_t body = N / VEC_WIDTH * VEC_WIDTH;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < body; i += VEC_WIDTH) { vec_store(out + i, vec_load(a + i) + vec_load(b + i)); }
    for (size_t i = body; i < N; i++) { out[i] = a[i] + b[i]; }
}
