/*
Checks incremental decoding (the key/value cache of llmc/gpt2_cache.h) against the full
forward pass: for every position of a random token sequence, the logits that
gpt2_cache_logits gives (one position's forward per token, the cache sliding when
full) must equal those of a batched forward over the same context, within
test_gpt2's logits tolerance (2e-5 of the largest logit).

    ./test_kvcache -e MODEL|dN [-c L,NH,C,maxT,V] -n POSITIONS [-w WINDOW] [--seed N] [--precision bf16]

-e takes an llm.c model file or dN (a random GPT-2 of depth N, as train_gpt2);
-c instead builds a random model of any config. The window defaults to the model's
maxT; a smaller one makes the cache slide (every window/2 tokens), and each
stretch of positions between slides is compared with one batched forward over the
context the cache holds then. Exit 0 when every position matches, 1 otherwise.

--precision bf16: the cache's steps read the bf16 copy of the weights (gpt2_cache_use_bf16,
gemv.h's bf16 GEMV), the reference is the batched forward with the bf16 GEMM. Both round the
same weights with the same function and their inputs the same way, and a product of two bf16
values is exact in fp32: only the order of the fp32 sums differs, as in fp32. Then the whole
sequence runs again on the other bf16 path (vdpbf16ps, or the portable one: LLMC_BF16_EMULATE),
whose logits must be bit-identical to the first run's (skipped where the CPU lacks AVX512_BF16;
where the first run was on AMX tiles, which sum in another order, vdpbf16ps's run stands in for it);
on every CPU, the portable path's dot products must equal, bit for bit, a scalar model of the
order in which vdpbf16ps adds (bf16_dot_model).
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmc/cli.h"
#include "llmc/gpt2.h"
#include "llmc/gpt2_cache.h"

#define TOL_LOGITS 2e-5  // as test_gpt2's, relative to the largest |logit| of the reference
// bf16: the cached and the full forward round the same operands, but a last-bit difference of an
// fp32 sum (another order) moves a value across a bf16 rounding boundary now and then, a change
// of 2^-8 of it, and the LayerNorms of a random model (whose residual stream is ~0.02) magnify
// such changes 50x; measured: 1.3e-3 (small random model, 400 positions) and 4.5e-3 (d12, 40).
// The tight check is the one on the matmuls themselves (check_bf16_matmuls, TOL_MATMUL).
#define TOL_LOGITS_BF16 1e-2

// bf16: each matmul of a step (gpt2_cache_matmul on the bf16 copy, all rows on one thread) against
// the bf16 GEMM (matmul_forward*) on the same random input row: the same rounded operands, exact
// products, fp32 sums in another order, so they agree to fp32 rounding: within TOL_MATMUL of the
// largest |output|. (The cached logits go through many such matmuls, where a last-bit difference
// can move a value across a bf16 rounding boundary, 2^-8 away; those spread, hence TOL_LOGITS_BF16.)
#define TOL_MATMUL 1e-5

// gemv.h's bf16 dot product in scalar code, in vdpbf16ps's order as gemv.h lays it out: chunk j
// of 32 values into partial sum j mod 4, lane i of a chunk adding pair i's high element's
// product (k+1), then the low one's (k), each add rounded; the 4 sums added (s0 + s1) + (s2 + s3),
// the 16 lanes by gemv.h's own tree. The yardstick of the portable path's order of adds on every
// CPU (the comparison with the instruction itself needs AVX512_BF16).
static float bf16_to_float(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static float bf16_dot_model(const uint16_t *w, const uint16_t *x, int Cp) {
    float acc[4][16] = {{0}};
    for (int c = 0, j = 0; c < Cp; c += 32, j = (j + 1) & 3) {
        for (int i = 0; i < 16; i++) {
            acc[j][i] += bf16_to_float(w[c + 2 * i + 1]) * bf16_to_float(x[c + 2 * i + 1]);
            acc[j][i] += bf16_to_float(w[c + 2 * i]) * bf16_to_float(x[c + 2 * i]);
        }
    }
    float lane[16];
    for (int i = 0; i < 16; i++) { lane[i] = (acc[0][i] + acc[1][i]) + (acc[2][i] + acc[3][i]); }
    return gemv_bf16_hsum(lane);
}

// bf16: the cached attention of each position against attention_forward's row for it, on
// random q, k, v of T positions (several key blocks, scores spread enough that the running
// maximum grows from block to block): the same rounded operands, the same online softmax over
// the same key blocks, the same order of every sum, so the same bits. That is vdpbf16ps's order
// (and the emulated path's): on the amx path attention_forward sums on AMX tiles, so the
// comparison runs on vdpbf16ps there.
static int check_bf16_attention(const GPT2Config *cfg, uint64_t seed) {
    const Bf16Path path = precision_bf16_path();
    if (path == BF16_PATH_AMX && !precision_force_bf16_path(BF16_PATH_AVX512BF16)) { die("AMX without AVX512_BF16"); }
    const int C = cfg->channels, NH = cfg->num_heads, hs = C / NH;
    const int T = cfg->max_seq_len < 3 * ATTN_BK - 7 ? cfg->max_seq_len : 3 * ATTN_BK - 7;
    float *qkv = malloc_or_die((size_t)T * 3 * C * sizeof(float), "qkv");
    float *out = malloc_or_die((size_t)T * C * sizeof(float), "out"), *lse = malloc_or_die((size_t)NH * T * sizeof(float), "lse");
    float *kcache = malloc_or_die((size_t)T * C * sizeof(float), "keys"), *vcache = malloc_or_die((size_t)T * C * sizeof(float), "values");
    float *cached = malloc_or_die((size_t)C * sizeof(float), "out"), *scores = malloc_or_die((size_t)NH * T * sizeof(float), "scores");
    uint64_t rng = random_seed_state(seed ^ 0xA77);
    for (size_t i = 0; i < (size_t)T * 3 * C; i++) { qkv[i] = 6.0f * random_f32(&rng) - 3.0f; }
    attention_forward(out, lse, qkv, 1, T, C, NH);
    for (int t = 0; t < T; t++) {  // (NH, T, hs): head h's key of position t at (h*T + t)*hs
        for (int h = 0; h < NH; h++) {
            memcpy(kcache + ((size_t)h * T + t) * hs, qkv + (size_t)t * 3 * C + C + h * hs, (size_t)hs * sizeof(float));
            memcpy(vcache + ((size_t)h * T + t) * hs, qkv + (size_t)t * 3 * C + 2 * C + h * hs, (size_t)hs * sizeof(float));
        }
    }
    int differ = 0, first = -1;
    for (int t = 0; t < T; t++) {
        attention_forward_cached(cached, qkv + (size_t)t * 3 * C, kcache, vcache, t + 1, T, C, NH, scores);
        if (memcmp(cached, out + (size_t)t * C, (size_t)C * sizeof(float)) != 0) { differ++; first = first < 0 ? t : first; }
    }
    printf("%s: bf16 cached attention against attention_forward's rows, %d positions: %d differ (the first: %d)\n",
           differ == 0 ? "OK" : "FAIL", T, differ, first);
    free(qkv);
    free(out);
    free(lse);
    free(kcache);
    free(vcache);
    free(cached);
    free(scores);
    precision_force_bf16_path(path);
    return differ == 0;
}

static int check_bf16_matmuls(GPT2 *model, GPT2Cache *cache, uint64_t seed) {
    const GPT2Config *cfg = &model->config;
    const int C = cfg->channels, Vp = cfg->padded_vocab_size, L = cfg->num_layers;
    const LayerTensors w = layer_tensors(&model->params, cfg, L - 1);
    const LayerWeights16 w16 = gpt2_cache_layer_w16(cache, cfg, L - 1);
    struct { const char *name; const float *weight; const uint16_t *w16; const float *bias; int in, out, gelu, residual; } mm[5] = {
        {"qkv", w.qkvw, w16.qkvw, w.qkvb, C, 3 * C, 0, 0},
        {"attproj + residual", w.attprojw, w16.attprojw, w.attprojb, C, C, 0, 1},
        {"fc + GELU", w.fcw, w16.fcw, w.fcb, C, 4 * C, 1, 0},
        {"fcproj + residual", w.fcprojw, w16.fcprojw, w.fcprojb, 4 * C, C, 0, 1},
        {"LM head", model->params.wte, gpt2_cache_wte_w16(cache, cfg), NULL, C, Vp, 0, 0},
    };
    float *inp = malloc_or_die((size_t)4 * C * sizeof(float), "input"), *res = malloc_or_die((size_t)4 * C * sizeof(float), "residual");
    const size_t outs = Vp > 4 * C ? Vp : 4 * C;  // the widest output: the LM head's, or fc's where V is small
    float *ours = malloc_or_die(outs * sizeof(float), "out"), *ref = malloc_or_die(outs * sizeof(float), "out");
    uint16_t *x16 = malloc_or_die((size_t)gemv_bf16_stride(4 * C) * sizeof(uint16_t), "bf16 input");
    uint64_t rng = random_seed_state(seed ^ 0xB16);
    int ok = 1;
    for (int m = 0; m < 5; m++) {
        for (int i = 0; i < mm[m].in; i++) { inp[i] = 2.0f * random_f32(&rng) - 1.0f; }
        for (int i = 0; i < mm[m].out && mm[m].residual; i++) { res[i] = 2.0f * random_f32(&rng) - 1.0f; }
        const float *addend = mm[m].residual ? res : NULL;
        gpt2_cache_matmul(cache, 0, 1, ours, addend, inp, mm[m].weight, mm[m].w16, mm[m].bias, mm[m].in, mm[m].out, mm[m].gelu);
        if (mm[m].gelu) { matmul_forward_gelu(ref, NULL, inp, mm[m].weight, NULL, mm[m].bias, 1, mm[m].in, mm[m].out); }
        else if (addend != NULL) { matmul_forward_residual(ref, addend, inp, mm[m].weight, NULL, mm[m].bias, 1, mm[m].in, mm[m].out); }
        else { matmul_forward(ref, inp, mm[m].weight, NULL, mm[m].bias, 1, mm[m].in, mm[m].out); }
        double err = 0.0, mx = 0.0;
        for (int o = 0; o < mm[m].out; o++) {
            const double e = fabs((double)ours[o] - ref[o]);
            if (!(e <= err)) { err = isnan(e) ? INFINITY : e; }
            if (fabs(ref[o]) > mx) { mx = fabs(ref[o]); }
        }
        const double rel = err / (mx > 0.0 ? mx : 1.0);
        printf("%s: bf16 GEMV against the bf16 GEMM, %s (%d -> %d): max |diff| %.3g, %.3g of max |out| %.3g (tolerance %.0e)\n",
               rel <= TOL_MATMUL ? "OK" : "FAIL", mm[m].name, mm[m].in, mm[m].out, err, rel, mx, TOL_MATMUL);
        ok = ok && rel <= TOL_MATMUL;
        // the portable dot product of every row against the scalar model: the same bits
        const int Cp = gemv_bf16_stride(mm[m].in);
        gemv_bf16_round_row(x16, inp, mm[m].in);
        int differ = 0, first = -1;
        for (int o = 0; o < mm[m].out; o++) {
            const uint16_t *row = mm[m].w16 + (size_t)o * Cp;
            const float got = gemv_bf16_dot_emulated(row, x16, Cp), want = bf16_dot_model(row, x16, Cp);
            if (memcmp(&got, &want, sizeof(float)) != 0) { differ++; first = first < 0 ? o : first; }
        }
        printf("%s: portable bf16 dot products against vdpbf16ps's order in scalar code, %s: %d of %d rows differ (the first: %d)\n",
               differ == 0 ? "OK" : "FAIL", mm[m].name, differ, mm[m].out, first);
        ok = ok && differ == 0;
    }
    free(x16);
    free(inp);
    free(res);
    free(ours);
    free(ref);
    return ok;
}

static void usage(void) {
    fprintf(stderr, "usage: ./test_kvcache -e MODEL|dN [-c L,NH,C,maxT,V] -n POSITIONS [-w WINDOW] [--seed N]\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *model_arg = NULL, *config_arg = NULL;
    int n = 0, window = 0;
    uint64_t seed = 1337;
    Precision precision = PRECISION_FP32;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) { fprintf(stderr, "error: %s: missing value\n", argv[i]); usage(); }
        const char *flag = argv[i], *val = argv[i + 1];
        if (strcmp(flag, "-e") == 0) { model_arg = val; }
        else if (strcmp(flag, "-c") == 0) { config_arg = val; }
        else if (strcmp(flag, "-n") == 0) { n = atoi(val); }
        else if (strcmp(flag, "-w") == 0) { window = atoi(val); }
        else if (strcmp(flag, "--seed") == 0) { seed = strtoull(val, NULL, 10); }
        else if (strcmp(flag, "--precision") == 0) { precision = (Precision)parse_precision(flag, val); }
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
    } else {
        from_file = !gpt2_config_from_arg(model_arg, &config);
    }
    if (window == 0) { window = config.max_seq_len; }
    if (window < 1 || window > config.max_seq_len) { die("-w %d: outside 1..maxT=%d", window, config.max_seq_len); }

    GPT2 model;
    gpt2_create_ex(&model, &config, 1, window, "test_kvcache", 0, 0, 0);
    if (from_file) { gpt2_load_params(&model, model_arg); }
    else { gpt2_init_params(&model, seed); }
    GPT2Cache cache;
    gpt2_cache_create(&cache, &model, window);
    matmul_set_precision(precision);
    if (precision == PRECISION_BF16) { gpt2_cache_use_bf16(&cache, &model); }

    const int V = config.vocab_size, Vp = config.padded_vocab_size;
    int *tokens = malloc_or_die((size_t)n * sizeof(int), "tokens");
    uint64_t rng = random_seed_state(seed ^ 0x70CE5);
    for (int i = 0; i < n; i++) { tokens[i] = (int)(random_f32(&rng) * V) % V; }
    float *cached = malloc_or_die((size_t)Vp * sizeof(float), "logits");
    float *ref = malloc_or_die((size_t)window * Vp * sizeof(float), "reference logits");
    float *all_cached = malloc_or_die((size_t)n * Vp * sizeof(float), "logits");  // of every position

    // ref holds the logits of every row of one batched forward over tokens[ref_start ..
    // ref_start + ref_len): row r predicts token ref_start + r + 1 from the context before it.
    int ref_start = -1, ref_len = 0, slides = 0, steps = 0;
    double max_err = 0.0, max_ref = 0.0;
    int worst = -1;
    for (int i = 1; i <= n; i++) {
        const int len_before = cache.len;
        memcpy(cached, gpt2_cache_logits(&model, &cache, tokens, i), (size_t)Vp * sizeof(float));
        memcpy(all_cached + (size_t)(i - 1) * Vp, cached, (size_t)Vp * sizeof(float));
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
    const double tol = precision == PRECISION_BF16 ? TOL_LOGITS_BF16 : TOL_LOGITS;
    int ok = rel <= tol && steps == expect_steps && slides == expect_slides;
    printf("%s: %d positions (window %d: %d cached steps, %d slides), max |cached - full| = %.3g, "
           "%.3g of max |logit| %.3g (tolerance %.0e), worst at position %d\n",
           ok ? "OK" : "FAIL", n, window, steps, slides, max_err, rel, max_ref, tol, worst);
    if (precision == PRECISION_BF16) {
        ok = check_bf16_matmuls(&model, &cache, seed) && ok;
        ok = check_bf16_attention(&config, seed) && ok;
        // vdpbf16ps and the portable path add in the same order: over the same sequence the other
        // of the two must give the same bits at every position. AMX tiles add otherwise: where they
        // ran first, the sequence runs again on vdpbf16ps, then on the portable path.
        char first[160];
        snprintf(first, sizeof(first), "%s", matmul_precision_path());
        if (!gemm_bf16_native_available()) {
            printf("bf16 paths: this CPU has no AVX512_BF16, only the portable path ran (%s)\n", first);
        } else {
            const Bf16Path ran = precision_bf16_path();
            if (ran == BF16_PATH_AMX) {
                precision_force_bf16_path(BF16_PATH_AVX512BF16);
                snprintf(first, sizeof(first), "%s", matmul_precision_path());
                gpt2_cache_reset(&cache);
                for (int i = 1; i <= n; i++) {
                    memcpy(all_cached + (size_t)(i - 1) * Vp, gpt2_cache_logits(&model, &cache, tokens, i), (size_t)Vp * sizeof(float));
                }
            }
            precision_force_bf16_path(ran == BF16_PATH_EMULATED ? BF16_PATH_AVX512BF16 : BF16_PATH_EMULATED);
            gpt2_cache_reset(&cache);
            long differ = 0;
            int first_differ = -1;
            for (int i = 1; i <= n; i++) {
                const float *other = gpt2_cache_logits(&model, &cache, tokens, i);
                if (memcmp(other, all_cached + (size_t)(i - 1) * Vp, (size_t)V * sizeof(float)) != 0) {
                    if (first_differ < 0) { first_differ = i; }
                    differ++;
                }
            }
            printf("%s: bf16 paths %s and %s: %s (%ld of %d positions differ, the first at %d)\n",
                   differ == 0 ? "OK" : "FAIL", first, matmul_precision_path(),
                   differ == 0 ? "bit-identical cached logits" : "the cached logits differ", differ, n, first_differ);
            ok = ok && differ == 0;
        }
    }
    if (steps != expect_steps || slides != expect_slides) {
        printf("expected %d cached steps and %d slides, got %d and %d\n", expect_steps, expect_slides, steps, slides);
    }
    free(tokens);
    free(cached);
    free(ref);
    free(all_cached);
    gpt2_cache_free(&cache);
    gpt2_free(&model);
    return ok ? 0 : 1;
}
