/*
Sampling the next token from logits: softmax with a temperature, optionally
restricted to the k most likely tokens (top-k), driven by a uniform "coin"
from a seeded RNG so that samples are reproducible.
*/
#pragma once

#include <math.h>

// The k-th largest of x[0..n) (1 <= k <= n), by quickselect. Reorders x.
static float kth_largest(float *x, int n, int k) {
    int lo = 0, hi = n - 1, want = k - 1;  // position of the answer in descending order
    while (lo < hi) {
        float pivot = x[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (x[i] > pivot) { i++; }
            while (x[j] < pivot) { j--; }
            if (i <= j) {
                float tmp = x[i]; x[i] = x[j]; x[j] = tmp;
                i++; j--;
            }
        }
        if (want <= j) { hi = j; }
        else if (want >= i) { lo = i; }
        else { return x[want]; }
    }
    return x[want];
}

// A token id from logits (V). temperature 0 picks the most likely token; top_k
// <= 0 (or >= V) keeps every token. scratch holds V floats.
static int sample_token(const float *logits, int V, float temperature, int top_k, float coin,
                        float *scratch) {
    int best = 0;
    for (int i = 1; i < V; i++) { if (logits[i] > logits[best]) { best = i; } }
    if (temperature <= 0.0f) { return best; }
    float threshold = -INFINITY;  // logits below it are out of the top k
    int ties_allowed = V;         // how many logits equal to threshold may stay in
    if (top_k > 0 && top_k < V) {
        for (int i = 0; i < V; i++) { scratch[i] = logits[i]; }
        threshold = kth_largest(scratch, V, top_k);
        int above = 0;
        for (int i = 0; i < V; i++) { above += logits[i] > threshold; }
        ties_allowed = top_k - above;
    }
    const float maxval = logits[best];
    double sum = 0.0;
    int ties = 0;
    for (int i = 0; i < V; i++) {
        float p = 0.0f;
        if (logits[i] > threshold || (logits[i] == threshold && ties++ < ties_allowed)) {
            p = expf((logits[i] - maxval) / temperature);
        }
        scratch[i] = p;
        sum += p;
    }
    double target = coin * sum, cdf = 0.0;
    int last = best;
    for (int i = 0; i < V; i++) {
        if (scratch[i] == 0.0f) { continue; }
        cdf += scratch[i];
        last = i;
        if (target < cdf) { return i; }
    }
    return last;  // rounding: coin * sum landed at the very end
}
