/*
The residual connection: out = a + b.

Its backward passes dout unchanged to both a and b. The model gets that for
free by letting both branches accumulate into one gradient buffer (see
block_backward in gpt2.h), so there is no separate backward kernel.
*/
#pragma once

#include <stddef.h>

// out, a, b are (N) for any shape; out may alias a.
static void residual_forward(float *out, const float *a, const float *b, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i++) { out[i] = a[i] + b[i]; }
}
