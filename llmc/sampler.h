/*
Sampling the next token from logits: softmax with a temperature, optionally
restricted to the k most likely tokens (top-k) and/or to the smallest set
whose probabilities add up to p (top-p, the nucleus), driven by a uniform "coin"
from a seeded RNG so that samples are reproducible.
*/
#pragma once

#include <math.h>
#include <stdlib.h>

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

// A token's weight, for sorting: the larger first, then the lower id.
typedef struct { float p; int id; } SampleCandidate;
static int sampler_cmp_desc(const void *a_, const void *b_) {
    const SampleCandidate *a = a_, *b = b_;
    if (a->p != b->p) { return a->p > b->p ? -1 : 1; }
    return (a->id > b->id) - (a->id < b->id);
}

// The nucleus (top-p) of the weights p[0..V) (unnormalized, total sum): the fewest most
// likely tokens whose weights add up to at least top_p * sum; the others' weights are set to
// 0. Returns the new total. Only tokens of weight >= (1 - top_p) * sum / V can be in it
// (those below add up to less than (1 - top_p) * sum, so the ones above reach top_p * sum
// first), which leaves few to sort for a peaked distribution. Ties: the lower id first.
// cand is scratch of V entries.
static double nucleus(float *p, int V, double sum, float top_p, SampleCandidate *cand) {
    const double floor = (1.0 - top_p) * sum / V;
    int n = 0;
    for (int i = 0; i < V; i++) {
        if (p[i] > 0.0f && p[i] >= floor) { cand[n].p = p[i]; cand[n].id = i; n++; }
    }
    qsort(cand, (size_t)n, sizeof(cand[0]), sampler_cmp_desc);
    double cum = 0.0, target = top_p * sum;
    int keep = n;
    for (int r = 0; r < n; r++) {
        cum += cand[r].p;
        if (cum >= target) { keep = r + 1; break; }
    }
    // keep a token only when it is in the first `keep` of the order: mark them by sign
    for (int r = 0; r < keep; r++) { p[cand[r].id] = -cand[r].p; }
    double kept = 0.0;
    for (int i = 0; i < V; i++) {
        if (p[i] < 0.0f) { p[i] = -p[i]; kept += p[i]; }
        else { p[i] = 0.0f; }
    }
    return kept;
}

// A token id from logits (V). temperature 0 picks the most likely token; top_k
// <= 0 (or >= V) keeps every token; top_p >= 1 keeps every token, below 1 the
// nucleus of what top-k kept (as Hugging Face's: top-k, then top-p). The coin in
// [0, 1) picks from the distribution left, renormalized, walking the ids in
// order. scratch holds V floats; cand, V entries (used only when top_p < 1, else may be NULL).
static int sample_token_ex(const float *logits, int V, float temperature, int top_k, float top_p, float coin,
                           float *scratch, SampleCandidate *cand) {
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
    if (top_p < 1.0f) { sum = nucleus(scratch, V, sum, top_p, cand); }
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

// sample_token_ex without top-p.
static int sample_token(const float *logits, int V, float temperature, int top_k, float coin,
                        float *scratch) {
    return sample_token_ex(logits, V, temperature, top_k, 1.0f, coin, scratch, NULL);
}
