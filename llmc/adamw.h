/*
AdamW (Loshchilov & Hutter), exactly as PyTorch's torch.optim.AdamW:
  p -= lr * weight_decay * p                      (decoupled weight decay)
  m  = beta1 * m + (1 - beta1) * g
  v  = beta2 * v + (1 - beta2) * g^2
  p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
t counts from 1. grad_scale multiplies g first (gradient clipping).
*/
#pragma once

#include <math.h>
#include <stddef.h>

// params, grads, m, v are (n).
static void adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr,
                         float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                         int t) {
    const float bias_correction1 = 1.0f - powf(beta1, (float)t);
    const float sqrt_bias_correction2 = sqrtf(1.0f - powf(beta2, (float)t));
    const float step_size = lr / bias_correction1;
    const float decay = 1.0f - lr * weight_decay;
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) {
        float g = grads[i] * grad_scale;
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        params[i] = params[i] * decay - step_size * mi / (sqrtf(vi) / sqrt_bias_correction2 + eps);
    }
}
