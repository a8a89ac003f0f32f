/*
Incremental decoding with a key/value cache, for generate and train_gpt2's samples: the
model of gpt2.h, its weights and kernels, one new position at a time.

The keys and values of every layer are kept for the positions seen so far, so
each new token costs one position's forward: matmuls on one row (gemv.h, bound
by reading the weights) and one query against the cache (attention.h); the
prefix is never recomputed and no (T, T) tensor exists. The first tokens (a
prompt) go through the ordinary batched forward over (1, n), whose per-layer
qkv fills the cache. When the cache is full (window positions), it slides: it
restarts from the last window/2 tokens, re-encoded by one batched forward, so
positions stay below window. The same arithmetic as the full forward, in
another order of the sums: logits agree to fp32 rounding (test_kvcache).
*/
#pragma once

#include <stdint.h>
#include <string.h>

#include "barrier.h"
#include "gemv.h"
#include "gpt2.h"
#include "rand.h"
#include "sampler.h"

typedef struct {
    int window;       // positions the cache holds: the longest context
    int start;        // the index, in the caller's token sequence, of cache position 0
    int len;          // positions filled
    int threads;      // the team of a step (omp_get_max_threads() at creation)
    float *k, *v;     // (L, NH, window, hs): keys and values, contiguous per head
    float *x;         // (C) the residual stream of the new position
    float *ln;        // (threads, C) each thread's LayerNorm output (each computes its own: no barrier)
    float *qkv;       // (3C)
    float *atty;      // (C)
    float *fch_gelu;  // (4C)
    float *scores;    // (NH, window) one row of attention scores per head
    float *logits;    // (Vp)
    uint16_t *x16;    // (threads, x16_stride) each thread's matmul input rounded to bf16
    int x16_stride;   // gemv_bf16_stride(4C)
    uint16_t *w16;    // NULL, or the bf16 copy of the matmul weights (gpt2_cache_use_bf16)
    SpinBarrier barrier;
    float *memory;    // all of the float tensors and x16, allocated once
} GPT2Cache;

// A cache of `window` positions for model, whose activations must hold (1, window):
// the batched forward of a prompt or a slide runs in them.
static void gpt2_cache_create(GPT2Cache *cache, const GPT2 *model, int window) {
    const GPT2Config *cfg = &model->config;
    if (window < 1 || window > cfg->max_seq_len || window > model->seq_len) {
        die("a key/value cache of %d positions: outside 1..%d (the model's maxT and activations)", window,
            cfg->max_seq_len < model->seq_len ? cfg->max_seq_len : model->seq_len);
    }
    memset(cache, 0, sizeof(*cache));
    cache->window = window;
    cache->threads = omp_get_max_threads();
    const size_t C = cfg->channels, L = cfg->num_layers, NH = cfg->num_heads, nth = cache->threads;
    size_t sizes[10] = {L * window * C, L * window * C, C, nth * C, 3 * C, C, 4 * C, NH * window,
                        cfg->padded_vocab_size, nth * gemv_bf16_stride(4 * C) / 2}; // x16: two per float;
    float **tensors[9] = {&cache->k, &cache->v, &cache->x, &cache->ln, &cache->qkv, &cache->atty,
                          &cache->fch_gelu, &cache->scores, &cache->logits};
    float *ptrs[10];
    const size_t floats = point_tensors(NULL, sizes, 10, NULL);
    cache->memory = arena_alloc_or_die(floats * sizeof(float), "the key/value cache");
    memset(cache->memory, 0, floats * sizeof(float));
    point_tensors(ptrs, sizes, 10, cache->memory);
    for (int i = 0; i < 9; i++) { *tensors[i] = ptrs[i]; }
    cache->x16 = (uint16_t *)ptrs[9];
    cache->x16_stride = gemv_bf16_stride(4 * C);
}

static void gpt2_cache_free(GPT2Cache *cache) {
    free(cache->memory);
    free(cache->w16);
    cache->memory = NULL;
    cache->w16 = NULL;
}

// The bf16 copy of the matmul weights, rows gemv_bf16_stride(in) apart: per layer qkvw, attprojw,
// fcw, fcprojw, then wte (the LM head). Returns the uint16 values of one layer's four, and
// (through *total) of the whole copy.
static size_t gpt2_cache_w16_layer(const GPT2Config *cfg, size_t *total) {
    const size_t C = cfg->channels, Cp = gemv_bf16_stride(C), C4p = gemv_bf16_stride(4 * C);
    const size_t layer = (3 * C + C + 4 * C) * Cp + C * C4p;
    *total = layer * cfg->num_layers + (size_t)cfg->padded_vocab_size * Cp;
    return layer;
}

// Where each matrix of layer l lies in the bf16 copy (cache->w16 not NULL), and wte's.
typedef struct { uint16_t *qkvw, *attprojw, *fcw, *fcprojw; } LayerWeights16;
static LayerWeights16 gpt2_cache_layer_w16(const GPT2Cache *cache, const GPT2Config *cfg, int l) {
    size_t total;
    const size_t C = cfg->channels, Cp = gemv_bf16_stride(C);
    uint16_t *p = cache->w16 + l * gpt2_cache_w16_layer(cfg, &total);
    return (LayerWeights16){p, p + 3 * C * Cp, p + 4 * C * Cp, p + 8 * C * Cp};
}
static uint16_t *gpt2_cache_wte_w16(const GPT2Cache *cache, const GPT2Config *cfg) {
    size_t total;
    return cache->w16 + cfg->num_layers * gpt2_cache_w16_layer(cfg, &total);
}

// From now on the steps (and the prompt's last logits) read bf16 weights: a copy of the model's
// matmul weights rounded to nearest even (gemm_bf16_bits, as the bf16 GEMM rounds them), the
// matmul inputs rounded the same way, fp32 sums (gemv.h): the arithmetic of --precision bf16's
// GEMM, in another order of the sums, at half the bytes. Call it again after the weights change.
static void gpt2_cache_use_bf16(GPT2Cache *cache, const GPT2 *model) {
    const GPT2Config *cfg = &model->config;
    const int C = cfg->channels;
    size_t total;
    gpt2_cache_w16_layer(cfg, &total);
    if (cache->w16 == NULL) { cache->w16 = arena_alloc_or_die(total * sizeof(uint16_t), "the bf16 weights"); }
    for (int l = 0; l < cfg->num_layers; l++) {
        const LayerTensors w = layer_tensors(&model->params, cfg, l);
        const LayerWeights16 dst = gpt2_cache_layer_w16(cache, cfg, l);
        gemv_bf16_convert(dst.qkvw, w.qkvw, 3 * C, C);
        gemv_bf16_convert(dst.attprojw, w.attprojw, C, C);
        gemv_bf16_convert(dst.fcw, w.fcw, 4 * C, C);
        gemv_bf16_convert(dst.fcprojw, w.fcprojw, C, 4 * C);
    }
    gemv_bf16_convert(gpt2_cache_wte_w16(cache, cfg), model->params.wte, cfg->padded_vocab_size, C);
}

// Forget the sequence: the next gpt2_cache_logits starts afresh.
static void gpt2_cache_reset(GPT2Cache *cache) { cache->start = cache->len = 0; }

// Copies the key and value of heads [h0, h1) of positions [t0, t0 + n) from rows of qkv (n, 3C)
// into layer l.
static void gpt2_cache_store(GPT2Cache *cache, const GPT2Config *cfg, int l, const float *qkv, int t0, int n,
                             int h0, int h1) {
    const int C = cfg->channels, NH = cfg->num_heads, hs = C / NH;
    for (int t = 0; t < n; t++) {
        for (int h = h0; h < h1; h++) {
            const size_t dst = (((size_t)l * NH + h) * cache->window + t0 + t) * hs;
            memcpy(cache->k + dst, qkv + (size_t)t * 3 * C + C + h * hs, hs * sizeof(float));
            memcpy(cache->v + dst, qkv + (size_t)t * 3 * C + 2 * C + h * hs, hs * sizeof(float));
        }
    }
}

// Thread tid's share (of nth) of a step's matmul out (OC) = addend + weight (OC, C) . inp (C) + bias
// (then GELU): the rows in equal contiguous blocks of quads, on gemv.h's fp32 GEMV, or on the bf16
// one when w16 (the bf16 copy of weight) is not NULL. Each row is computed whole by one thread, so
// the result does not depend on the split.
static void gpt2_cache_matmul(GPT2Cache *cache, int tid, int nth, float *out, const float *addend,
                              const float *inp, const float *weight, const uint16_t *w16, const float *bias,
                              int C, int OC, int gelu) {
    const int quads = (OC + 3) / 4;
    const int q0 = (int)((long)quads * tid / nth), q1 = (int)((long)quads * (tid + 1) / nth);
    if (w16 == NULL) { gemv_quads(q0, q1, out, addend, inp, weight, bias, C, OC, gelu, NULL); return; }
    uint16_t *x16 = cache->x16 + (size_t)tid * cache->x16_stride;
    gemv_bf16_round_row(x16, inp, C);  // every thread rounds the whole row for itself: no barrier
    gemv_bf16_quads(q0, q1, out, addend, x16, w16, bias, C, OC, gelu, NULL);
}

// The LM head of one row: logits (Vp) = wte (Vp, C) . lnf (C), thread tid's share (of nth).
static void gpt2_cache_lm_head(GPT2Cache *cache, const GPT2 *model, int tid, int nth, const float *lnf) {
    const GPT2Config *cfg = &model->config;
    const uint16_t *wte16 = cache->w16 != NULL ? gpt2_cache_wte_w16(cache, cfg) : NULL;
    gpt2_cache_matmul(cache, tid, nth, cache->logits, NULL, lnf, model->params.wte, wte16, NULL, cfg->channels,
                      cfg->padded_vocab_size, 0);
}

// The batched forward over tokens (n) at positions 0..n-1, which fills the cache
// layer by layer (with recompute, qkv holds one layer at a time).
// Returns the logits (Vp) of the last position.
static const float *gpt2_cache_prefill(GPT2 *model, GPT2Cache *cache, const int *tokens, int n) {
    const GPT2Config *cfg = &model->config;
    forward_encoder(model, tokens, 1, n);
    for (int l = 0; l < cfg->num_layers; l++) {
        block_forward(model, l, 1, n, 0);
        gpt2_cache_store(cache, cfg, l, layer_activations(model, l, 1, n).qkv, 0, n, 0, cfg->num_heads);
    }
    forward_final_layernorm(model, 1, n);
    cache->len = n;
    if (cache->w16 == NULL) { return gpt2_logits(model, n - 1); }
    // bf16: the LM head on the bf16 copy (the GEMM would pack all of wte for one row)
    const float *lnf = model->acts.lnf + (size_t)(n - 1) * cfg->channels;
    #pragma omp parallel num_threads(cache->threads)
    gpt2_cache_lm_head(cache, model, omp_get_thread_num(), omp_get_num_threads(), lnf);
    return cache->logits;
}

// One position's forward: token at position cache->len, against the cached keys and values
// of the positions before it. Returns its logits (Vp).
// One parallel region for the whole token, split by hand (rows of each matmul, heads of the
// attention), with spin_barrier_wait between the steps that read what others wrote: about 5
// barriers per layer instead of as many parallel regions, and a brief spin then a sleep at
// each whatever OMP_WAIT_POLICY says (barrier.h). Each thread computes the LayerNorms itself
// (C floats: cheaper than a barrier). The arithmetic is that of the kernels run one by one:
// every output element is computed whole by one thread, in a fixed order.
static const float *gpt2_cache_step(GPT2 *model, GPT2Cache *cache, int token) {
    const GPT2Config *cfg = &model->config;
    const int C = cfg->channels, NH = cfg->num_heads, L = cfg->num_layers, pos = cache->len;
    check_tokens(model, &token, 1, "input");
    attn_check_shape(pos + 1, C, NH);
    if (precision_is_bf16() && cache->w16 == NULL) {
        die("gpt2_cache_step: bf16 matmuls without the bf16 weights (gpt2_cache_use_bf16)");
    }
    const float *tok = model->params.wte + (size_t)token * C, *wpe = model->params.wpe + (size_t)pos * C;
    float *x = cache->x;
    for (int c = 0; c < C; c++) { x[c] = tok[c] + wpe[c]; }
    #pragma omp parallel num_threads(cache->threads)
    {
        const int nth = omp_get_num_threads(), tid = omp_get_thread_num();
        const int h0 = NH * tid / nth, h1 = NH * (tid + 1) / nth;
        float *ln = cache->ln + (size_t)tid * C;
        SpinBarrier *bar = &cache->barrier;
        for (int l = 0; l < L; l++) {
            const LayerTensors w = layer_tensors(&model->params, cfg, l);
            const LayerWeights16 w16 = cache->w16 != NULL ? gpt2_cache_layer_w16(cache, cfg, l) : (LayerWeights16){0};
            const size_t layer = (size_t)l * cache->window * C;  // NH * window * hs
            float mean, rstd;
            layernorm_row_stats(x, C, &mean, &rstd);
            layernorm_row_apply(ln, x, mean, rstd, w.ln1w, w.ln1b, C);
            gpt2_cache_matmul(cache, tid, nth, cache->qkv, NULL, ln, w.qkvw, w16.qkvw, w.qkvb, C, 3 * C, 0);
            spin_barrier_wait(bar, nth);
            gpt2_cache_store(cache, cfg, l, cache->qkv, pos, 1, h0, h1);
            for (int h = h0; h < h1; h++) {
                attention_head_cached(cache->atty, cache->qkv, cache->k + layer, cache->v + layer, pos + 1,
                                      cache->window, C, NH, cache->scores, h);
            }
            spin_barrier_wait(bar, nth);
            gpt2_cache_matmul(cache, tid, nth, x, x, cache->atty, w.attprojw, w16.attprojw,
                              w.attprojb, C, C, 0);
            spin_barrier_wait(bar, nth);
            layernorm_row_stats(x, C, &mean, &rstd);
            layernorm_row_apply(ln, x, mean, rstd, w.ln2w, w.ln2b, C);
            gpt2_cache_matmul(cache, tid, nth, cache->fch_gelu, NULL, ln, w.fcw, w16.fcw,
                              w.fcb, C, 4 * C, 1);
            spin_barrier_wait(bar, nth);
            gpt2_cache_matmul(cache, tid, nth, x, x, cache->fch_gelu, w.fcprojw, w16.fcprojw,
                              w.fcprojb, 4 * C, C, 0);
            spin_barrier_wait(bar, nth);
        }
        float mean, rstd;
        layernorm_row_stats(x, C, &mean, &rstd);
        layernorm_row_apply(ln, x, mean, rstd, model->params.lnfw, model->params.lnfb, C);
        gpt2_cache_lm_head(cache, model, tid, nth, ln);
    }
    cache->len++;
    return cache->logits;
}

// The logits (Vp) that predict token n of a sequence from tokens[0..n), n >= 1.
// Called with n one more than last time (the sequence grew by the token just
// sampled), it costs one position's forward; a full cache slides; any other n
// (a first call, a new sequence) re-encodes the last min(n, window) tokens, or
// window/2 of them when there are more than window.
static const float *gpt2_cache_logits(GPT2 *model, GPT2Cache *cache, const int *tokens, int n) {
    if (n < 1) { die("gpt2_cache_logits: an empty sequence"); }
    if (cache->len > 0 && cache->start + cache->len == n - 1 && cache->len < cache->window) {
        return gpt2_cache_step(model, cache, tokens[n - 1]);
    }
    const int keep = cache->window / 2 > 0 ? cache->window / 2 : 1;
    const int count = n <= cache->window ? n : keep;
    cache->start = n - count;
    return gpt2_cache_prefill(model, cache, tokens + cache->start, count);
}

// The next token after tokens[0..n), through the cache (gpt2_cache_logits), drawn with the
// temperature, top-k and top-p from the next coin of rng. cand: top-p's scratch, NULL when
// top_p is 1 (sampler.h).
static int gpt2_cache_sample(GPT2 *model, GPT2Cache *cache, const int *tokens, int n, float temperature, int top_k,
                             float top_p, uint64_t *rng, float *scratch, SampleCandidate *cand) {
    const float *logits = gpt2_cache_logits(model, cache, tokens, n);
    return sample_token_ex(logits, model->config.vocab_size, temperature, top_k, top_p, random_f32(rng), scratch,
                           cand);
}
