/*
The classifier: LM head (logits = x . wte^T, the weights tied to the token
embedding), softmax and cross-entropy, fused.

The logits of all B*T rows would be (B*T, Vp) floats, 824 MB at B=4, T=1024,
so the rows are processed in chunks through one (chunk_rows, Vp) scratch
buffer. When training, each chunk's logits become dlogits in place and the
head's backward runs right away, as llm.c's fused classifier does on the GPU:
the logits never have to be computed twice.
*/
#pragma once

#include <math.h>
#include <stddef.h>
#include <string.h>
#include "matmul.h"

// Softmax over the first V columns of each row of logits (N, Vp) and the
// cross-entropy loss against targets (N): losses[i] = logsumexp - logits[target].
// If dloss != 0, the row becomes d(dloss * loss)/dlogits = dloss * (softmax - onehot)
// in place, with zeros in the padded columns V..Vp-1.
static void crossentropy_softmax_forward_backward(float *losses, float *logits, const int *targets,
                                                  float dloss, int N, int V, int Vp) {
    #pragma omp parallel for
    for (int i = 0; i < N; i++) {
        float *row = logits + (size_t)i * Vp;
        float maxval = -INFINITY;
        for (int v = 0; v < V; v++) { maxval = fmaxf(maxval, row[v]); }
        double sum = 0.0;  // 50257 terms: a double keeps the loss exact to fp32
        for (int v = 0; v < V; v++) { sum += expf(row[v] - maxval); }
        const float lse = maxval + (float)log(sum);
        losses[i] = lse - row[targets[i]];
        if (dloss != 0.0f) {
            for (int v = 0; v < V; v++) { row[v] = expf(row[v] - lse) * dloss; }
            row[targets[i]] -= dloss;
            for (int v = V; v < Vp; v++) { row[v] = 0.0f; }
        }
    }
}
