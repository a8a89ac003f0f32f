/*
Checks llmc/sampler.h on crafted logits: temperature 0 is the argmax; top-k and
top-p (alone and together) keep exactly the expected tokens, each drawn with its
renormalized probability; top-p's shortcut (sorting only the tokens that can be in
the nucleus) gives the nucleus of a full sort on a 50257-token distribution.
Coins are an even grid over [0, 1), so a token of probability q is drawn for
q * M of the M coins, to within one: frequencies are checked to 1.5 / M.
Prints one line per check; exit 0 when all pass.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmc/rand.h"
#include "llmc/sampler.h"

#define COINS 20000  // coins per distribution (a tenth of it for the 50257-token one)

static int failures = 0;

static void check(int ok, const char *what) {
    printf("%s: %s\n", ok ? "ok" : "FAILED", what);
    failures += !ok;
}

// Draws M tokens with coins (j + 0.5) / M and compares their frequencies with want (V),
// the expected probabilities (0 = never drawn).
static int frequencies_match(const float *logits, int V, float temperature, int top_k, float top_p,
                             const double *want) {
    const int coins = V > 1000 ? COINS / 10 : COINS;
    float *scratch = malloc(V * sizeof(float));
    SampleCandidate *cand = malloc(V * sizeof(SampleCandidate));
    int *count = calloc(V, sizeof(int));
    for (int j = 0; j < coins; j++) {
        int t = sample_token_ex(logits, V, temperature, top_k, top_p, (j + 0.5f) / coins, scratch, cand);
        if (t < 0 || t >= V) { free(scratch); free(cand); free(count); return 0; }
        count[t]++;
    }
    int ok = 1;
    for (int i = 0; i < V; i++) {
        const double got = (double)count[i] / coins;
        if (want[i] == 0.0 ? count[i] != 0 : fabs(got - want[i]) > 1.5 / coins) {
            if (ok) { printf("  token %d: drawn %.5f, expected %.5f\n", i, got, want[i]); }
            ok = 0;
        }
    }
    free(scratch);
    free(cand);
    free(count);
    return ok;
}

// want = softmax(logits / temperature) restricted to the first `keep` of order, renormalized.
static void restricted(double *want, const float *logits, int V, float temperature, const int *order, int keep) {
    double sum = 0.0;
    for (int i = 0; i < V; i++) { want[i] = 0.0; }
    for (int r = 0; r < keep; r++) { want[order[r]] = exp(logits[order[r]] / temperature); sum += want[order[r]]; }
    for (int i = 0; i < V; i++) { want[i] /= sum; }
}

static const float *sort_logits;
static int by_logit_desc(const void *a, const void *b) {
    const float x = sort_logits[*(const int *)a], y = sort_logits[*(const int *)b];
    if (x != y) { return x > y ? -1 : 1; }
    return *(const int *)a - *(const int *)b;
}

int main(void) {
    // probabilities 0.05, 0.5, 0.15, 0.3, 0 (-inf), in shuffled order
    const int V = 5;
    const float logits[5] = {logf(0.05f), logf(0.5f), logf(0.15f), logf(0.3f), -INFINITY};
    const int order[5] = {1, 3, 2, 0, 4};  // most likely first
    float scratch[5];
    double want[5];

    int greedy = 1;
    for (int j = 0; j < 100; j++) { greedy &= sample_token(logits, V, 0.0f, 0, j / 100.0f, scratch) == 1; }
    const float ties[4] = {1.0f, 3.0f, 3.0f, 2.0f};
    greedy &= sample_token(ties, 4, 0.0f, 0, 0.5f, scratch) == 1;
    check(greedy, "temperature 0 picks the most likely token (the lower id of a tie), whatever the coin");

    restricted(want, logits, V, 1.0f, order, 4);
    check(frequencies_match(logits, V, 1.0f, 0, 1.0f, want), "no top-k or top-p: the softmax");
    restricted(want, logits, V, 0.5f, order, 4);
    check(frequencies_match(logits, V, 0.5f, 0, 1.0f, want), "temperature 0.5: softmax(logits / 0.5)");
    restricted(want, logits, V, 1.0f, order, 2);
    check(frequencies_match(logits, V, 1.0f, 2, 1.0f, want), "top-k 2: the two most likely, renormalized");
    restricted(want, logits, V, 1.0f, order, 1);
    check(frequencies_match(logits, V, 1.0f, 0, 0.4f, want), "top-p 0.4: the most likely alone (0.5 >= 0.4)");
    restricted(want, logits, V, 1.0f, order, 2);
    check(frequencies_match(logits, V, 1.0f, 0, 0.75f, want), "top-p 0.75: 0.5 + 0.3 (the token crossing p is kept)");
    restricted(want, logits, V, 1.0f, order, 3);
    check(frequencies_match(logits, V, 1.0f, 0, 0.85f, want), "top-p 0.85: 0.5 + 0.3 + 0.15");
    restricted(want, logits, V, 1.0f, order, 4);
    check(frequencies_match(logits, V, 1.0f, 0, 0.99f, want), "top-p 0.99: all four");
    restricted(want, logits, V, 1.0f, order, 1);
    check(frequencies_match(logits, V, 1.0f, 2, 0.6f, want), "top-k 2 then top-p 0.6: 0.5/0.8 = 0.625 >= 0.6, one token");
    restricted(want, logits, V, 1.0f, order, 2);
    check(frequencies_match(logits, V, 1.0f, 3, 0.8f, want), "top-k 3 then top-p 0.8: 0.5/0.95 + 0.3/0.95 = 0.84 >= 0.8");

    // a GPT-2-sized distribution: the nucleus against a full sort
    const int BV = 50257;
    float *big = malloc(BV * sizeof(float));
    int *sorted = malloc(BV * sizeof(int));
    double *bigwant = malloc(BV * sizeof(double));
    uint64_t rng = random_seed_state(42);
    random_normal(big, BV, 0.0f, 3.0f, &rng);
    const float temperature = 0.8f, top_p = 0.9f;
    for (int i = 0; i < BV; i++) { sorted[i] = i; }
    sort_logits = big;
    qsort(sorted, BV, sizeof(int), by_logit_desc);
    double total = 0.0, cum = 0.0;
    for (int i = 0; i < BV; i++) { total += exp((big[i] - big[sorted[0]]) / temperature); }
    int keep = 0;
    while (cum < top_p * total) { cum += exp((big[sorted[keep]] - big[sorted[0]]) / temperature); keep++; }
    const float top = big[sorted[0]];
    for (int i = 0; i < BV; i++) { big[i] -= top; }  // the same probabilities, exp without overflow
    restricted(bigwant, big, BV, temperature, sorted, keep);
    char what[160];
    snprintf(what, sizeof(what), "top-p 0.9 over %d tokens (temperature 0.8): the %d of a full sort", BV, keep);
    check(frequencies_match(big, BV, temperature, 0, top_p, bigwant), what);
    free(big);
    free(sorted);
    free(bigwant);

    printf("%s\n", failures == 0 ? "OK" : "FAIL");
    return failures == 0 ? 0 : 1;
}
