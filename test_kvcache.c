/*
Checks incremental decoding (the key/value cache of llmc/gpt2.h) against the full
forward pass: for every position of a random token sequence, the logits that
gpt2_cache_logits gives (one position's forward per token, the cache sliding when
full) must equal those of a batched forward over the same context, within
test_gpt2's logits tolerance (2e-5 of the largest logit).

    ./test_kvcache -e MODEL|dN [-c L,NH,C,maxT,V] -n POSITIONS [-w WINDOW] [--seed N]

-e takes an llm.c model file or dN (a random GPT-2 of depth N, as train_gpt2);
-c instead builds a random model of any config. The window defaults to the model's
maxT; a smaller one makes the cache slide (every window/2 tokens), and each
stretch of positions between slides is compared with one batched forward over the
context the cache holds then. Exit 0 when every position matches, 1 otherwise.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmc/gpt2.h"

#define TOL_LOGITS 2e-5  // as test_gpt2's, relative to the largest |logit| of the reference

static void usage(void) {
    fprintf(stderr, "usage: ./test_kvcache -e MODEL|dN [-c L,NH,C,maxT,V] -n POSITIONS [-w WINDOW] [--seed N]\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *model_arg = NULL, *config_arg = NULL;
    int n = 0, window = 0;
    uint64_t seed = 1337;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) { fprintf(stderr, "error: %s: missing value\n", argv[i]); usage(); }
        const char *flag = argv[i], *val = argv[i + 1];
        if (strcmp(flag, "-e") == 0) { model_arg = val; }
        else if (strcmp(flag, "-c") == 0) { config_arg = val; }
        else if (strcmp(flag, "-n") == 0) { n = atoi(val); }
        else if (strcmp(flag, "-w") == 0) { window = atoi(val); }
        else if (strcmp(flag, "--seed") == 0) { seed = strtoull(val, NULL, 10); }
        else { fprintf(stderr, "error: %s: unknown flag\n", flag); usage(); }
    }
    if ((model_arg == NULL) == (config_arg == NULL) || n < 1) { fprintf(stderr, "error: give -e or -c, and -n\n"); usage(); }

    GPT2Config config;
    int from_file = 0;
    if (config_arg != NULL) {
        if (sscanf(config_arg, "%d,%d,%d,%d,%d", &config.num_layers, &config.num_heads, &config.channels,
                   &config.max_seq_len, &config.vocab_size) != 5) {
            fprintf(stderr, "error: -c %s: expected L,NH,C,maxT,V\n", config_arg);
            usage();
        }
        config.padded_vocab_size = (config.vocab_size + 127) / 128 * 128;
        char err[256];
        if (gpt2_config_error(&config, "-c", err, sizeof(err)) != 0) { die("%s", err); }
    } else if (!gpt2_config_from_depth(model_arg, &config)) {
        gpt2_read_config(model_arg, &config);
        from_file = 1;
    }
    if (window == 0) { window = config.max_seq_len; }
    if (window < 1 || window > config.max_seq_len) { die("-w %d: outside 1..maxT=%d", window, config.max_seq_len); }

    GPT2 model;
    gpt2_create_ex(&model, &config, 1, window, "test_kvcache", 0, 0, 0);
    if (from_file) { gpt2_load_params(&model, model_arg); }
    else { gpt2_init_params(&model, seed); }
    GPT2Cache cache;
    gpt2_cache_create(&cache, &model, window);

    const int V = config.vocab_size, Vp = config.padded_vocab_size;
    int *tokens = malloc_or_die((size_t)n * sizeof(int), "tokens");
    uint64_t rng = random_seed_state(seed ^ 0x70CE5);
    for (int i = 0; i < n; i++) { tokens[i] = (int)(random_f32(&rng) * V) % V; }
    float *cached = malloc_or_die((size_t)Vp * sizeof(float), "logits");
    float *ref = malloc_or_die((size_t)window * Vp * sizeof(float), "reference logits");

    // ref holds the logits of every row of one batched forward over tokens[ref_start ..
    // ref_start + ref_len): row r predicts token ref_start + r + 1 from the context before it.
    int ref_start = -1, ref_len = 0, slides = 0, steps = 0;
    double max_err = 0.0, max_ref = 0.0;
    int worst = -1;
    for (int i = 1; i <= n; i++) {
        const int len_before = cache.len;
        memcpy(cached, gpt2_cache_logits(&model, &cache, tokens, i), (size_t)Vp * sizeof(float));
        if (cache.len == len_before + 1 && len_before > 0) { steps++; }
        if (cache.start != ref_start) {  // a new context (the first call, or a slide): its reference
            if (ref_start >= 0) { slides++; }
            ref_start = cache.start;
            ref_len = n - ref_start < window ? n - ref_start : window;
            gpt2_forward(&model, tokens + ref_start, NULL, 1, ref_len);
            for (int r = 0; r < ref_len; r++) { memcpy(ref + (size_t)r * Vp, gpt2_logits(&model, r), (size_t)Vp * sizeof(float)); }
        }
        const int row = i - 1 - ref_start;
        if (row < 0 || row >= ref_len) { die("position %d: the cache holds tokens %d..%d", i, cache.start, cache.start + cache.len - 1); }
        double err = 0.0;
        for (int v = 0; v < V; v++) {
            const double r = ref[(size_t)row * Vp + v], e = fabs((double)cached[v] - r);
            if (!(e <= err)) { err = isnan(e) ? INFINITY : e; }
            if (fabs(r) > max_ref) { max_ref = fabs(r); }
        }
        if (!(err <= max_err)) { max_err = err; worst = i; }
    }
    // the cost: every call but the first and the slides must be one position's step, and the
    // cache must slide exactly when full (len: 1 after the first call, +1 per step, keep after a slide)
    int expect_steps = 0, expect_slides = 0;
    for (int i = 2, len = 1; i <= n; i++) {
        if (len < window) { len++; expect_steps++; }
        else { len = window / 2 > 0 ? window / 2 : 1; expect_slides++; }
    }
    const double rel = max_err / (max_ref > 0.0 ? max_ref : 1.0);
    const int ok = rel <= TOL_LOGITS && steps == expect_steps && slides == expect_slides;
    if (steps != expect_steps || slides != expect_slides) {
        printf("expected %d cached steps and %d slides, got %d and %d\n", expect_steps, expect_slides, steps, slides);
    }
    printf("%s: %d positions (window %d: %d cached steps, %d slides), max |cached - full| = %.3g, "
           "%.3g of max |logit| %.3g (tolerance %.0e), worst at position %d\n",
           ok ? "OK" : "FAIL", n, window, steps, slides, max_err, rel, max_ref, TOL_LOGITS, worst);
    free(tokens);
    free(cached);
    free(ref);
    gpt2_cache_free(&cache);
    gpt2_free(&model);
    return ok ? 0 : 1;
}
