/*
The GPT-2 model: parameters, gradients, AdamW state and activations in one
arena allocated once, and the forward and backward passes over the llmc/
kernels; the optimizer step (the gradients' zeroing and norm, AdamW) is
llmc/gpt2_update.h, included below. Shared by train_gpt2.c and test_gpt2.c.

GPT-2 as OpenAI's and llm.c's: token + position embeddings; L pre-LayerNorm
blocks (LayerNorm, causal self-attention, residual; LayerNorm, MLP of width 4C
with tanh GELU, residual); a final LayerNorm; the LM head tied to the token
embedding. The vocabulary is padded to Vp (a multiple of 128): the padded rows
of wte stay zero and never enter the softmax.

Shapes: B batch, T time, C channels, NH heads, L layers, V vocab, Vp padded
vocab, maxT the longest sequence. A "row" is one (b, t) position: N = B*T rows.
*/
#pragma once

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "adamw.h"
#include "attention.h"
#include "classifier.h"
#include "encoder.h"
#include "gelu.h"
#include "layernorm.h"
#include "matmul.h"
#include "omp_compat.h"
#include "rand.h"
#include "utils.h"
#include <zlib.h>

#define MODEL_MAGIC 20240326
#define MODEL_VERSION 3  // llm.c's fp32 checkpoint

typedef struct {
    int max_seq_len;        // maxT
    int vocab_size;         // V
    int padded_vocab_size;  // Vp
    int num_layers;         // L
    int num_heads;          // NH
    int channels;           // C
} GPT2Config;

// The 16 parameter tensors in llm.c's checkpoint order. The same struct holds
// the gradients and the two AdamW moments.
#define NUM_PARAMETER_TENSORS 16
typedef struct {
    float *wte;       // (Vp, C)
    float *wpe;       // (maxT, C)
    float *ln1w;      // (L, C)
    float *ln1b;      // (L, C)
    float *qkvw;      // (L, 3C, C)
    float *qkvb;      // (L, 3C)
    float *attprojw;  // (L, C, C)
    float *attprojb;  // (L, C)
    float *ln2w;      // (L, C)
    float *ln2b;      // (L, C)
    float *fcw;       // (L, 4C, C)
    float *fcb;       // (L, 4C)
    float *fcprojw;   // (L, C, 4C)
    float *fcprojb;   // (L, C)
    float *lnfw;      // (C)
    float *lnfb;      // (C)
} ParameterTensors;

// The indexes of the blocks' weight matrices among the 16 tensors (gpt2_panels' i).
enum { PARAM_QKVW = 4, PARAM_ATTPROJW = 6, PARAM_FCW = 10, PARAM_FCPROJW = 12 };

static const char *const PARAMETER_NAMES[NUM_PARAMETER_TENSORS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};

// Weight decay applies to the 2-D tensors (embeddings and matmul weights), not
// to biases and LayerNorm parameters, as in llm.c and nanoGPT.
static const int PARAMETER_DECAYS[NUM_PARAMETER_TENSORS] = {1, 1, 0, 0, 1, 0, 1, 0,
                                                            0, 0, 1, 0, 1, 0, 0, 0};

// The gradients that the first backward pass of a step writes (=) instead of adding to (+=):
// each is written whole by one matmul product, the weights' and biases' of the four linear
// layers, and wte's by the LM head's first chunk (the later chunks and the encoder add to it).
// The others (wpe, the LayerNorms') are summed into a piece at a time, so gpt2_zero_grad
// zeroes them. 85% of GPT-2 124M's gradient floats are never zeroed.
static const int PARAMETER_GRAD_OVERWRITTEN[NUM_PARAMETER_TENSORS] = {1, 0, 0, 0, 1, 1, 1, 1,
                                                                      0, 0, 1, 1, 1, 1, 0, 0};

// What the forward pass keeps for the backward pass, per layer, and scratch
// buffers that every layer reuses. Everything the backward pass reads is kept, as PyTorch
// keeps it: the LayerNorm outputs and gelu(fch) too, which the backward pass recomputed until
// 2026-11-29 to save (B, T, 6C) floats a layer (906 MB at B=4, T=1024 for GPT-2 124M). Kept, the
// same bits; on the lent Xeon's AMX path at B=4 T=1024 the step's layernorm and gelu lines fell
// from 135-152 and 167-178 ms to 88-97 and 75-81 (3 rounds alternated). --recompute 1 is the
// way to less memory. The attention matrix is never stored (see attention.h).
// With recompute (train_gpt2 --recompute 1, activation checkpointing per block) the
// tensors marked "(L, ...)" other than residual3 hold one layer: the forward pass keeps
// only each block's input, and the backward pass re-runs block l's forward into them
// just before block l's backward (see gpt2_forward_backward).
typedef struct {
    float *encoded;    // (B, T, C)  the input of layer 0
    float *ln1;        // (L, B, T, C)  LayerNorm 1's output, the qkv product's input
    float *ln1_mean;   // (L, B, T)
    float *ln1_rstd;   // (L, B, T)
    float *qkv;        // (L, B, T, 3C)
    float *att_lse;    // (L, B, NH, T) log-sum-exp of each softmax row
    float *atty;       // (L, B, T, C)  attention output, before the projection
    float *residual2;  // (L, B, T, C)  after the attention residual
    float *ln2;        // (L, B, T, C)  LayerNorm 2's output, the fc product's input
    float *ln2_mean;   // (L, B, T)
    float *ln2_rstd;   // (L, B, T)
    float *fch;        // (L, B, T, 4C) MLP pre-activation
    float *fch_gelu;   // (L, B, T, 4C) gelu(fch), the fc projection's input
    float *residual3;  // (L, B, T, C)  the block output: the input of layer l+1
    float *lnf;        // (B, T, C)
    float *lnf_mean;   // (B, T)
    float *lnf_rstd;   // (B, T)
    float *losses;     // (B, T)
    // scratch
    float *logits;     // (chunk rows, Vp) one chunk of the classifier
    // gradient scratch for the backward pass
    float *dresidual;  // (B, T, C)  gradient of the residual stream
    float *dln;        // (B, T, C)  gradient of a LayerNorm output
    float *datty;      // (B, T, C)
    float *dqkv;       // (B, T, 3C)
    float *dfch;       // (B, T, 4C)
} ActivationTensors;
#define NUM_ACTIVATION_TENSORS 24

// Rows of the classifier processed at once: (256, 50304) floats = 51 MB of logits. In bf16
// 1024 (206 MB): each chunk's products pack wte's copy once (forward and input gradient) and
// read and write wte's gradient once, a quarter as often at T=1024. The B=4 T=1024 bf16 step
// was 2% faster on the Xeon VM with AMX (family 6 model 167, 2026-12-07: median of 12 alternated
// pairs, docs/amx.md) and 1-3.5% on Zen 4 (2026-11-28, docs/speed.md). fp32 keeps 256: the
// chunks are part of the order of wte's gradient sums, so its bits stay as they were.
#define CLASSIFIER_CHUNK_ROWS 256
#define CLASSIFIER_CHUNK_ROWS_BF16 1024

// The classifier's rows a chunk in the run's precision, for a pass over N rows.
static int classifier_chunk_rows(size_t N) {
    const size_t rows = precision_is_bf16() ? CLASSIFIER_CHUNK_ROWS_BF16 : CLASSIFIER_CHUNK_ROWS;
    return (int)(N < rows ? N : rows);
}

// Called by the forward and backward passes after each kernel with what it produced: rows
// [row0, row0 + nrows) of a (rows, width) tensor. Layer is -1 outside the blocks; a
// gradient's name is "d" + its tensor's ("dqkv"), and a tensor the backward pass recomputes
// is observed again under its forward name. test_gpt2 uses it to compare every intermediate
// with the PyTorch reference, and in bf16 to replace the operands of the matmuls with the
// reference's (the data is the model's own, so an observer may overwrite it).
typedef void (*ActivationObserver)(void *ctx, const char *name, int layer, float *data,
                                   size_t row0, size_t nrows, size_t width);

// Where the time of a step goes (train_gpt2 --profile). Each kernel call is
// followed by a "lap" that charges the time since the previous lap to it, so
// the laps of a step add up to the whole step.
typedef enum {
    PROF_DATA, PROF_ENCODER, PROF_LAYERNORM, PROF_MATMUL, PROF_ATTENTION, PROF_GELU, PROF_CLASSIFIER, PROF_ZEROING, PROF_GRAD_NORM, PROF_ADAMW, PROF_KINDS
} ProfileKind;
static const char *const PROFILE_NAMES[PROF_KINDS] = {
    "data loading", "encoder", "layernorm", "matmul", "attention", "gelu", "softmax+crossentropy", "zeroing", "grad norm", "adamw"};
enum { FWD, BWD };  // the pass a lap belongs to; optimizer work counts as forward

typedef struct {
    double last;                         // time of the previous lap
    double seconds[PROF_KINDS][2];
} Profile;

static void profile_start(Profile *p) {
    memset(p, 0, sizeof(*p));
    p->last = now_seconds();
}

static void profile_lap(Profile *p, ProfileKind kind, int pass) {
    double t = now_seconds();
    p->seconds[kind][pass] += t - p->last;
    p->last = t;
}

// The gradient norm without a pass of its own over the gradients (one process): while armed
// (gpt2_grad_norm_arm, before the backward pass of a step's last micro-batch), each block of
// sum_of_squares (adamw.h) is summed as soon as the backward pass has finished every gradient
// in it, a layer at a time (what of them is still in the caches: on Zen 4 little, the norm's
// time went from 15-16 to 13 ms); gpt2_grad_norm then adds the blocks' totals up: the same
// bits as the pass over all the gradients. Sooner still, the products of the weight gradients
// sum the blocks inside the rows they finish while those rows are in the thread's cache
// (grad_norm_final_run, through gemm.h's on_final hook; the classifier's only in its last
// chunk, and not wte's rows that the encoder's backward adds to after); the blocks' groups
// skip them. A block's group: when it is final,
// 0 (the final LayerNorm's, and the gaps between tensors, never written) to L + 1 (wte and
// wpe: after the encoder's backward, the last kernel); block l's slices are group L - l.
// LLMC_NORM_IN_BACKWARD=0 turns it off (the pass after the backward, for comparisons).
typedef struct {
    SumSquaresBlocks blocks;
    size_t *order;        // (num_blocks) the blocks by group
    size_t *group_first;  // (L + 3) order[group_first[g] .. group_first[g + 1]) are group g
    int num_groups;       // L + 2
    int done_group;       // the groups up to it are summed
    int armed;
    uint8_t *summed;      // (num_blocks) 1: summed already, by a product that finished it
    uint64_t *wte_late;   // bit r: wte's gradient row r is still to get the encoder's backward's part
    gemm_final_hook hook; // grad_norm_final_run, for the weight gradients' products while armed
} GradNormSums;

// The arguments of an AdamW step not yet run (see "AdamW beside the next forward pass").
typedef struct {
    int active;
    float lr, beta1, beta2, eps, weight_decay, grad_scale;
    int t;
    int zero_grads;     // gpt2_zero_grad came before the update ran: its zeroing is still to do
    double half_ms[2];  // the last attention and MLP half of a block that thread 0 ran on its own
                        // beside the update (a guess before), ms
    uint64_t *rows;     // bit r: wte's row r is read by the encoder (the batch's tokens)
} PendingUpdate;

typedef struct {
    GPT2Config config;
    size_t param_sizes[NUM_PARAMETER_TENSORS];
    size_t num_parameters;
    size_t params_span;  // floats from the first tensor's start to the last's end (with alignment gaps)
    ParameterTensors params, grads, m, v;  // v: AdamW's second moment
    float *params_memory, *grads_memory, *m_memory, *v_memory;
    // bf16 training: the parameters' bf16 bits (params_span of them, the layout of params_memory:
    // 2 bytes a parameter), which the bf16 GEMM packs the weights from (matmul.h's weight16);
    // allocated by the first training forward pass in bf16 (gpt2_bf16_weights_ready), NULL before
    // and otherwise. params_bf16_current: 1 while it holds the bits of params_memory as they are;
    // AdamW keeps it so (gpt2_update), anything else that writes the parameters calls
    // gpt2_params_changed, and the next forward pass rounds the copy anew.
    uint16_t *params_bf16;
    int params_bf16_current;
    // bf16 training on a kernel with pair-word panels (gpt2_weight_panels_enabled): the blocks'
    // four weight matrices of every layer also packed whole as their input gradient's product
    // reads them (B = W: gemm.h's gemm_put_b_pair, for the kernel weight_panels_kernel), written
    // by AdamW beside the copy, so that the product packs no B (2 more bytes a parameter of
    // those matrices). Current whenever params_bf16 is and the run's kernel is weight_panels_kernel.
    // A matrix of tensor i, layer l: weight_panels_words[i] words (0: a tensor without panels)
    // from weight_panels + weight_panels_at[i] + l * weight_panels_words[i].
    float *weight_panels;
    const gemm_kernel *weight_panels_kernel;
    size_t weight_panels_at[NUM_PARAMETER_TENSORS], weight_panels_words[NUM_PARAMETER_TENSORS];
    size_t act_sizes[NUM_ACTIVATION_TENSORS];
    size_t num_activations;
    ActivationTensors acts;
    float *arena;       // everything above, allocated once
    size_t arena_bytes;
    int batch_size;     // the largest (B, T) the activations hold
    int seq_len;
    int recompute;      // 1: the per-layer activations hold one layer, recomputed in the backward
    int grads_overwrite;  // 1 from gpt2_zero_grad to the end of the next backward pass
    float mean_loss;    // of the last forward pass with targets
    ActivationObserver observer;
    void *observer_ctx;
    Profile profile;
    // data-parallel training (llmc/zero.h) sets it for the backward pass whose gradients are
    // summed over ranks: called after each kernel with final_from, the first block whose
    // gradients are final (blocks final_from..L-1 and the final LayerNorm; L: only the
    // LayerNorm, -1: every gradient), so that the sums start as parts become final
    void (*backward_hook)(void *ctx, int final_from);
    void *backward_hook_ctx;
    GradNormSums norm;  // the gradient norm's sums, started as the backward pass finishes gradients
    PendingUpdate pending;  // an AdamW step handed to the next training forward pass (gpt2_update_defer)
} GPT2;

static void grad_norm_progress(GPT2 *model, int final_from);
static const gemm_final_hook *grad_norm_hook(GPT2 *model);
static void grad_norm_mark_wte(GPT2 *model, const int *tokens, int N, int late);
static void grad_norm_final_run(void *ctx, float *run, size_t n);

static void backward_done(GPT2 *model, int final_from) {
    grad_norm_progress(model, final_from);
    if (model->backward_hook != NULL) { model->backward_hook(model->backward_hook_ctx, final_from); }
}

static void fwd_lap(GPT2 *model, ProfileKind kind) { profile_lap(&model->profile, kind, FWD); }
static void bwd_lap(GPT2 *model, ProfileKind kind) { profile_lap(&model->profile, kind, BWD); }

// ----------------------------------------------------------------------------
// configuration

// llm.c's depth-to-width mapping for models built from scratch: "d12" is GPT-2 124M.
static int gpt2_config_from_depth(const char *name, GPT2Config *config) {
    static const struct { const char *name; int L, C, NH; } presets[] = {
        {"d6", 6, 384, 6}, {"d12", 12, 768, 12}, {"d24", 24, 1024, 16},
        {"d36", 36, 1280, 20}, {"d48", 48, 1600, 25}};
    for (size_t i = 0; i < sizeof(presets) / sizeof(presets[0]); i++) {
        if (strcmp(name, presets[i].name) == 0) {
            config->max_seq_len = 1024;
            config->vocab_size = 50257;
            config->padded_vocab_size = 50304;
            config->num_layers = presets[i].L;
            config->num_heads = presets[i].NH;
            config->channels = presets[i].C;
            return 1;
        }
    }
    return 0;
}

// Checks a config read from `path`; bounds keep every size well inside size_t.
// Returns 0, or -1 with a one-line message in err.
static int gpt2_config_error(const GPT2Config *c, const char *path, char *err, size_t errlen) {
    if (c->max_seq_len < 1 || c->max_seq_len > (1 << 20)) { snprintf(err, errlen, "%s: bad max_seq_len %d", path, c->max_seq_len); return -1; }
    if (c->vocab_size < 1 || c->vocab_size > (1 << 24)) { snprintf(err, errlen, "%s: bad vocab_size %d", path, c->vocab_size); return -1; }
    if (c->padded_vocab_size < c->vocab_size || c->padded_vocab_size > (1 << 24)) {
        snprintf(err, errlen, "%s: bad padded_vocab_size %d (vocab_size %d)", path, c->padded_vocab_size, c->vocab_size);
        return -1;
    }
    if (c->num_layers < 1 || c->num_layers > 1024) { snprintf(err, errlen, "%s: bad num_layers %d", path, c->num_layers); return -1; }
    if (c->channels < 1 || c->channels > (1 << 16)) { snprintf(err, errlen, "%s: bad channels %d", path, c->channels); return -1; }
    if (c->num_heads < 1 || c->channels % c->num_heads != 0) {
        snprintf(err, errlen, "%s: num_heads %d does not divide channels %d", path, c->num_heads, c->channels);
        return -1;
    }
    return 0;
}

// Reads and checks the config in a model file's header. Returns 0, or -1 with a
// one-line message in err.
static int gpt2_try_read_config(const char *path, GPT2Config *config, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) { snprintf(err, errlen, "%s: cannot open for reading: %s", path, strerror(errno)); return -1; }
    int header[256];
    int rc = read_header_checked(f, path, header, MODEL_MAGIC, MODEL_VERSION, "model", err, errlen);
    fclose(f);
    if (rc != 0) { return -1; }
    config->max_seq_len = header[2];
    config->vocab_size = header[3];
    config->num_layers = header[4];
    config->num_heads = header[5];
    config->channels = header[6];
    config->padded_vocab_size = header[7];
    return gpt2_config_error(config, path, err, errlen);
}

static void gpt2_read_config(const char *path, GPT2Config *config) {
    char err[PATH_MAX + 256];
    if (gpt2_try_read_config(path, config, err, sizeof(err)) != 0) { die("%s", err); }
}

// The model a -e argument names: d6|d12|d24|d36|d48, a new model of that depth (returns 1),
// or an llm.c checkpoint file, whose config is read (returns 0).
static int gpt2_config_from_arg(const char *model, GPT2Config *config) {
    if (gpt2_config_from_depth(model, config)) { return 1; }
    gpt2_read_config(model, config);
    return 0;
}

// The end-of-text token of a tokenizer (source: its file or vocabulary) must be a token of the model.
static void gpt2_check_eot(const GPT2Config *config, int eot, const char *source) {
    if (eot < 0 || eot >= config->vocab_size) {
        die("%s: end-of-text token %d is outside the model's vocabulary of %d", source, eot, config->vocab_size);
    }
}

static void fill_parameter_sizes(size_t sizes[NUM_PARAMETER_TENSORS], const GPT2Config *cfg) {
    size_t Vp = cfg->padded_vocab_size, C = cfg->channels, maxT = cfg->max_seq_len, L = cfg->num_layers;
    size_t s[NUM_PARAMETER_TENSORS] = {Vp * C, maxT * C, L * C, L * C, L * 3 * C * C, L * 3 * C,
                                       L * C * C, L * C, L * C, L * C, L * 4 * C * C, L * 4 * C,
                                       L * C * 4 * C, L * C, C, C};
    memcpy(sizes, s, sizeof(s));
}

static void fill_activation_sizes(size_t sizes[NUM_ACTIVATION_TENSORS], const GPT2Config *cfg,
                                  int B, int T, int recompute) {
    size_t N = (size_t)B * T, C = cfg->channels, L = cfg->num_layers, NH = cfg->num_heads;
    size_t chunk = (size_t)classifier_chunk_rows(N);  // the run's precision: set it first
    size_t Lk = recompute ? 1 : L;  // layers kept of all but residual3
    size_t s[NUM_ACTIVATION_TENSORS] = {
        N * C,                                         // encoded
        Lk * N * C, Lk * N, Lk * N, Lk * N * 3 * C,    // ln1, ln1_mean, ln1_rstd, qkv
        Lk * NH * N, Lk * N * C,                       // att_lse, atty
        Lk * N * C, Lk * N * C, Lk * N, Lk * N,        // residual2, ln2, ln2_mean, ln2_rstd
        Lk * N * 4 * C, Lk * N * 4 * C, L * N * C,     // fch, fch_gelu, residual3
        N * C, N, N, N,                                // lnf, lnf_mean, lnf_rstd, losses
        chunk * cfg->padded_vocab_size,                // logits
        N * C, N * C, N * C, N * 3 * C, N * 4 * C};    // dresidual, dln, datty, dqkv, dfch
    memcpy(sizes, s, sizeof(s));
}

// Points each tensor of a struct of float pointers at its part of memory,
// each start rounded up to 64 bytes (16 floats). Returns the floats used.
static size_t point_tensors(float **tensors, const size_t *sizes, int n, float *memory) {
    size_t offset = 0;
    for (int i = 0; i < n; i++) {
        if (memory != NULL) { tensors[i] = memory + offset; }
        offset += (sizes[i] + 15) / 16 * 16;
    }
    return offset;
}

static const char *human_bytes(double bytes, char buf[32]) {
    if (bytes >= 1024.0 * 1024 * 1024) { snprintf(buf, 32, "%.2f GiB", bytes / (1024.0 * 1024 * 1024)); }
    else { snprintf(buf, 32, "%.1f MiB", bytes / (1024.0 * 1024)); }
    return buf;
}

// The sizes of a model and of its arena for activations of up to (B, T), computed
// without allocating anything (train_gpt2 --dry-run prints them, GPT-2 XL's included).
// training, adamw_floats, recompute: as gpt2_create_ex's. Dies with a message if the
// activations would not fit the kernels' int row count or would be absurdly large.
typedef struct {
    size_t param_sizes[NUM_PARAMETER_TENSORS];
    size_t act_sizes[NUM_ACTIVATION_TENSORS];
    size_t num_parameters;  // the tensors' floats, wte's padded rows included
    size_t params_floats;   // the same with the 64-byte alignment gaps: params_span, and the gradients'
    size_t grads_floats;    // params_floats when training, else 0
    size_t mv_floats;       // each of AdamW's m and v: params_floats, this rank's shard (ZeRO-1), or 0
    size_t acts_floats;     // the activations, with their alignment gaps
    size_t arena_bytes;     // all of the above
    int sharded;            // m and v hold only this rank's shard
} GPT2Sizes;

static void gpt2_sizes(GPT2Sizes *s, const GPT2Config *config, int B, int T, const char *source, int training,
                       size_t adamw_floats, int recompute) {
    memset(s, 0, sizeof(*s));
    if (B < 1) { die("batch size B=%d must be at least 1", B); }
    if (T < 1 || T > config->max_seq_len) {
        die("%s: sequence length T=%d outside the model's range 1..%d", source, T, config->max_seq_len);
    }
    if ((int64_t)B * T > INT_MAX) {  // the passes count the B*T rows in an int
        die("B=%d, T=%d: %lld rows, more than the %d a pass can hold", B, T, (long long)B * T, INT_MAX);
    }
    if ((double)B * T * 4 * config->channels * config->num_layers > 1e11) {
        die("B=%d, T=%d: activations would be too large for this model", B, T);
    }
    fill_parameter_sizes(s->param_sizes, config);
    fill_activation_sizes(s->act_sizes, config, B, T, recompute);
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) { s->num_parameters += s->param_sizes[i]; }
    s->params_floats = point_tensors(NULL, s->param_sizes, NUM_PARAMETER_TENSORS, NULL);
    s->acts_floats = point_tensors(NULL, s->act_sizes, NUM_ACTIVATION_TENSORS, NULL);
    s->sharded = training && adamw_floats > 0 && adamw_floats < s->params_floats;
    s->mv_floats = !training ? 0 : s->sharded ? (adamw_floats + 15) / 16 * 16 : s->params_floats;
    s->grads_floats = training ? s->params_floats : 0;
    s->arena_bytes = (s->params_floats + s->grads_floats + 2 * s->mv_floats + s->acts_floats) * sizeof(float);
}

// The summary of a training model's sizes: its shape, and the memory of each part.
static void gpt2_print_sizes(const GPT2Sizes *s, const GPT2Config *config, int B, int T, int recompute) {
    char b1[32], b2[32], b3[32], b4[32];
    printf("model: L=%d NH=%d C=%d maxT=%d V=%d (padded %d), %zu parameters\n", config->num_layers,
           config->num_heads, config->channels, config->max_seq_len, config->vocab_size,
           config->padded_vocab_size, s->num_parameters);
    printf("memory: parameters %s, gradients %s, AdamW m+v %s, activations %s (B=%d, T=%d%s)\n",
           human_bytes(s->params_floats * 4.0, b1), human_bytes(s->params_floats * 4.0, b2),
           human_bytes(s->mv_floats * 8.0, b3), human_bytes(s->acts_floats * 4.0, b4), B, T,
           recompute ? "; each block recomputed in the backward" : "");
}

// Allocates the arena for config and activations of up to (B, T), and zeroes
// the gradients and AdamW state. Parameters are then loaded or initialized.
// training 0 (generate, evaluation): no gradients nor AdamW state (a quarter of the
// memory), and no summary printed, since stdout carries the program's output.
// adamw_floats: 0, or the size of a shard of the flat m and v that is all this
// process keeps (ZeRO-1, llmc/zero.h); m and v then have only m_memory, v_memory.
// recompute 1: activations for one layer only, recomputed in the backward (see ActivationTensors).
static void gpt2_create_ex(GPT2 *model, const GPT2Config *config, int B, int T, const char *source,
                           int training, size_t adamw_floats, int recompute) {
    memset(model, 0, sizeof(*model));
    model->config = *config;
    GPT2Sizes sz;
    gpt2_sizes(&sz, config, B, T, source, training, adamw_floats, recompute);
    model->batch_size = B;
    model->seq_len = T;
    model->recompute = recompute;
    memcpy(model->param_sizes, sz.param_sizes, sizeof(sz.param_sizes));
    memcpy(model->act_sizes, sz.act_sizes, sizeof(sz.act_sizes));
    model->num_parameters = sz.num_parameters;
    model->num_activations = sz.acts_floats;
    model->params_span = sz.params_floats;
    const size_t params_floats = sz.params_floats, grads_floats = sz.grads_floats, mv_floats = sz.mv_floats;
    const size_t acts_floats = sz.acts_floats;
    model->arena_bytes = sz.arena_bytes;
    model->arena = arena_alloc_or_die(model->arena_bytes, "the model arena");
    gemm_init();  // the matmuls' packing buffers, once
    (void)soft_prefetch_enabled();  // LLMC_SOFT_PREFETCH read (and a bad value refused) before any work
    float *p = model->arena;
    model->params_memory = p; p += params_floats;
    point_tensors((float **)&model->params, model->param_sizes, NUM_PARAMETER_TENSORS, model->params_memory);
    if (training) {
        model->grads_memory = p;  p += params_floats;
        model->m_memory = p;      p += mv_floats;
        model->v_memory = p;      p += mv_floats;
        point_tensors((float **)&model->grads, model->param_sizes, NUM_PARAMETER_TENSORS, model->grads_memory);
    }
    if (training && !sz.sharded) {
        point_tensors((float **)&model->m, model->param_sizes, NUM_PARAMETER_TENSORS, model->m_memory);
        point_tensors((float **)&model->v, model->param_sizes, NUM_PARAMETER_TENSORS, model->v_memory);
    }
    point_tensors((float **)&model->acts, model->act_sizes, NUM_ACTIVATION_TENSORS, p);
    // zero the padding between tensors too: the whole of params, grads, m and v; and first
    // touch every page of the arena now, on all threads (page faults are most of the cost)
    const size_t arena_floats = params_floats + grads_floats + 2 * mv_floats + acts_floats, zero_block = (size_t)1 << 20;
    #pragma omp parallel for schedule(static)
    for (long long b = 0; b < (long long)((arena_floats + zero_block - 1) / zero_block); b++) {
        const size_t i0 = (size_t)b * zero_block;
        memset(model->arena + i0, 0, (arena_floats - i0 < zero_block ? arena_floats - i0 : zero_block) * sizeof(float));
    }
    model->mean_loss = -1.0f;
    if (training) { gpt2_print_sizes(&sz, config, B, T, recompute); }  // else the caller reports what it loaded (stdout is its output)
}

static void gpt2_create(GPT2 *model, const GPT2Config *config, int B, int T, const char *source) {
    gpt2_create_ex(model, config, B, T, source, 1, 0, 0);
}

static void grad_norm_sums_free(GradNormSums *g) {
    if (g->order == NULL) { return; }
    sum_squares_blocks_free(&g->blocks);
    free(g->order);
    free(g->group_first);
    free(g->summed);
    free(g->wte_late);
    memset(g, 0, sizeof(*g));
}

static void gpt2_free(GPT2 *model) {
    grad_norm_sums_free(&model->norm);
    free(model->pending.rows);
    model->pending.rows = NULL;
    free(model->arena);
    model->arena = NULL;
    free(model->params_bf16);
    model->params_bf16 = NULL;
    model->params_bf16_current = 0;
    free(model->weight_panels);
    model->weight_panels = NULL;
    model->weight_panels_kernel = NULL;
}

// Whoever writes the parameters other than gpt2_update (loading, initializing, the ranks'
// broadcasts and all-gathers, tests) calls this: the bf16 copy is rounded anew before it is read.
static void gpt2_params_changed(GPT2 *model) { model->params_bf16_current = 0; }

// LLMC_BF16_WEIGHTS=0 turns the bf16 copy of the weights off: every bf16 product then rounds the
// fp32 weights as it packs them (the same bits, more bytes read); for tests and comparisons.
static int gpt2_bf16_weights_enabled(void) {
    static int enabled = -1;
    if (enabled < 0) {
        const char *e = getenv("LLMC_BF16_WEIGHTS");
        enabled = !(e != NULL && strcmp(e, "0") == 0);
    }
    return enabled;
}

// The bf16 copy of parameter tensor w (a pointer into params_memory) for the matmuls, or NULL
// where there is none or it is not current (the matmul then rounds w itself).
static const uint16_t *gpt2_w16(const GPT2 *model, const float *w) {
    if (model->params_bf16 == NULL || !model->params_bf16_current) { return NULL; }
    return model->params_bf16 + (w - model->params_memory);
}

// The weight matrices kept packed for their input gradients (weight_panels): the blocks' qkvw,
// attprojw, fcw and fcprojw, one a layer. For tensor i: 1 and a layer's matrix's shape (its
// columns are C, or 4C for fcprojw), or 0. wte's panels, for the LM head's input gradient, were
// measured and not kept (docs/amx.md, 2026-12-07).
static int gpt2_panel_matrix(const GPT2 *model, int i, int *rows, int *cols) {
    *rows = 0, *cols = 0;
    if (i != PARAM_QKVW && i != PARAM_ATTPROJW && i != PARAM_FCW && i != PARAM_FCPROJW) { return 0; }
    *cols = i == PARAM_FCPROJW ? 4 * model->config.channels : model->config.channels;
    *rows = (int)(model->param_sizes[i] / (size_t)model->config.num_layers / (size_t)*cols);
    return 1;
}

// LLMC_WEIGHT_PANELS=0|1: the weight panels off or on. On by default on AMX: on the Xeon VM with
// AMX (family 6 model 167, 2026-12-06) a T=64 bf16 step's input-gradient products took 12-17 ms
// less with panels packed beforehand (docs/amx.md). Off by default on vdpbf16ps, not measured
// there yet (issue 28).
static int gpt2_weight_panels_enabled(void) {
    static int forced = -2;  // -1: not forced
    if (forced == -2) {
        forced = getenv("LLMC_WEIGHT_PANELS") == NULL ? -1
                 : env_flag("LLMC_WEIGHT_PANELS", 0, "the input gradients' products pack the weights from the bf16 copy",
                            "the weights kept packed for them, written by AdamW");
    }
    const int on = forced >= 0 ? forced : precision_bf16_path() == BF16_PATH_AMX;
    return on && precision_is_bf16() && gemm_kernel_pair_panels(gemm_kernel_current());
}

// The panels of layer l's matrix of tensor i for matmul_backward_ex, or NULL where there are
// none, or they are not current or not the run's kernel's.
static const float *gpt2_panels(const GPT2 *model, int i, int l) {
    if (model->weight_panels == NULL || !model->params_bf16_current ||
        model->weight_panels_kernel != gemm_kernel_current() || model->weight_panels_words[i] == 0) {
        return NULL;
    }
    return model->weight_panels + model->weight_panels_at[i] + (size_t)l * model->weight_panels_words[i];
}

// Where enabled, the weight panels allocated for the run's kernel and packed from the bf16 copy
// (current) if they are not for that kernel or `repack` says the copy was rounded anew. Serial code.
static void gpt2_weight_panels_ready(GPT2 *model, int repack) {
    if (!gpt2_weight_panels_enabled() || model->params_bf16 == NULL) { return; }
    const gemm_kernel *g = gemm_kernel_current();
    const int L = model->config.num_layers;
    if (model->weight_panels_kernel != g) {
        size_t words = 0;
        for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
            int rows, cols;
            model->weight_panels_at[i] = words;
            model->weight_panels_words[i] = gpt2_panel_matrix(model, i, &rows, &cols) ? gemm_packed_b_words_for(g, rows, cols) : 0;
            words += (size_t)L * model->weight_panels_words[i];
        }
        free(model->weight_panels);
        model->weight_panels = arena_alloc_or_die(words * sizeof(float), "the weights' panels");
        model->weight_panels_kernel = g;
        repack = 1;
    }
    if (!repack) { return; }
    #pragma omp parallel for schedule(dynamic)
    for (int k = 0; k < NUM_PARAMETER_TENSORS * L; k++) {
        const int i = k / L, l = k % L;
        int rows, cols;
        if (!gpt2_panel_matrix(model, i, &rows, &cols)) { continue; }
        const float *w = ((float *const *)&model->params)[i] + (size_t)l * rows * cols;
        gemm_pack_b_whole(rows, cols, model->params_bf16 + (w - model->params_memory), cols, 1,
                          model->weight_panels + model->weight_panels_at[i] + (size_t)l * model->weight_panels_words[i]);
    }
}

// Before a forward pass: in bf16 training on a kernel that packs from bf16 (gemm_b16_usable),
// the copy allocated (the first time) and current (rounded from the parameters if it is not).
// Serial code.
static void gpt2_bf16_weights_ready(GPT2 *model) {
    if (model->grads_memory == NULL || !gemm_b16_usable() || !gpt2_bf16_weights_enabled()) { return; }
    if (model->params_bf16 == NULL) {
        const size_t bytes = model->params_span * sizeof(uint16_t);
        model->params_bf16 = arena_alloc_or_die(bytes, "the bf16 copy of the parameters");
        model->params_bf16_current = 0;
    }
    const int rounded = !model->params_bf16_current;
    if (rounded) {
        bf16_round_floats(model->params_bf16, model->params_memory, model->params_span);
        model->params_bf16_current = 1;
    }
    gpt2_weight_panels_ready(model, rounded);
}

#define CHECKPOINT_CRC_MARK 0x43524332  // "CRC2" in header[8]: header[9] is the CRC32 of the tensors

// The CRC32 of the 16 tensors' bytes in checkpoint order (params, or m, or v).
static uint32_t params_crc32(const GPT2 *model, float *const *tensors) {
    uLong crc = crc32(0L, Z_NULL, 0);
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const unsigned char *p = (const unsigned char *)tensors[i];
        size_t left = model->param_sizes[i] * sizeof(float);
        while (left > 0) {  // crc32 takes a uInt length
            uInt n = left < (1u << 30) ? (uInt)left : (1u << 30);
            crc = crc32(crc, p, n);
            p += n;
            left -= n;
        }
    }
    return (uint32_t)crc;
}

static void gpt2_fill_header(const GPT2 *model, int header[256]) {
    memset(header, 0, 256 * sizeof(int));
    header[0] = MODEL_MAGIC;
    header[1] = MODEL_VERSION;
    header[2] = model->config.max_seq_len;
    header[3] = model->config.vocab_size;
    header[4] = model->config.num_layers;
    header[5] = model->config.num_heads;
    header[6] = model->config.channels;
    header[7] = model->config.padded_vocab_size;
}

// Loads the parameters of an llm.c checkpoint whose config must equal
// model->config, and checks the CRC32 when the file has one (our checkpoints).
// Returns 0, or -1 with a one-line message in err.
static int gpt2_try_load_params(GPT2 *model, const char *path, char *err, size_t errlen) {
    gpt2_params_changed(model);
    FILE *f = fopen(path, "rb");
    if (f == NULL) { snprintf(err, errlen, "%s: cannot open for reading: %s", path, strerror(errno)); return -1; }
    int header[256], expected_header[256];
    long expected = 256 * (long)sizeof(int) + (long)(model->num_parameters * sizeof(float));
    long size = file_size(f);
    if (size < 256 * (long)sizeof(int) || fseek(f, 0, SEEK_SET) != 0 || fread(header, sizeof(int), 256, f) != 256) {
        snprintf(err, errlen, "%s: truncated file (shorter than the 1024-byte model header)", path);
        fclose(f);
        return -1;
    }
    gpt2_fill_header(model, expected_header);
    int rc = -1;
    if (header[0] != MODEL_MAGIC || header[1] != MODEL_VERSION) {
        snprintf(err, errlen, "%s: not an llm.c fp32 model (magic %d, version %d)", path, header[0], header[1]);
    } else if (memcmp(header + 2, expected_header + 2, 6 * sizeof(int)) != 0) {
        snprintf(err, errlen, "%s: a model of another config (maxT=%d V=%d L=%d NH=%d C=%d Vp=%d)", path,
                 header[2], header[3], header[4], header[5], header[6], header[7]);
    } else if (size < expected) {
        snprintf(err, errlen, "%s: truncated model file (%ld bytes, this config needs %ld)", path, size, expected);
    } else if (size > expected) {
        snprintf(err, errlen, "%s: model file too long (%ld bytes, this config needs %ld)", path, size, expected);
    } else {
        rc = 0;
        for (int i = 0; i < NUM_PARAMETER_TENSORS && rc == 0; i++) {
            float *t = ((float **)&model->params)[i];
            if (fread(t, sizeof(float), model->param_sizes[i], f) != model->param_sizes[i]) {
                snprintf(err, errlen, "%s: read error", path);
                rc = -1;
            }
        }
        uint32_t stored;
        memcpy(&stored, &header[9], sizeof(stored));
        if (rc == 0 && header[8] == CHECKPOINT_CRC_MARK &&
            params_crc32(model, (float *const *)&model->params) != stored) {
            snprintf(err, errlen, "%s: CRC mismatch, the file is corrupt", path);
            rc = -1;
        }
    }
    fclose(f);
    return rc;
}

static void gpt2_load_params(GPT2 *model, const char *path) {
    char err[PATH_MAX + 256];
    if (gpt2_try_load_params(model, path, err, sizeof(err)) != 0) { die("%s", err); }
    gpt2_params_changed(model);
}

// GPT-2's initialization, as llm.c: weights ~ N(0, 0.02), the projections back
// into the residual stream (attprojw, fcprojw) ~ N(0, 0.02 / sqrt(2L)), biases 0,
// LayerNorm weights 1. Only the first V rows of wte are drawn; the padding stays 0.
static void gpt2_init_params(GPT2 *model, uint64_t seed) {
    const GPT2Config *cfg = &model->config;
    const float residual_std = 0.02f / sqrtf(2.0f * cfg->num_layers);
    ParameterTensors *p = &model->params;
    // each tensor's values come from its own range of random streams (2^32 blocks apart)
    const uint64_t tensor = (uint64_t)1 << 32;
    gpt2_params_changed(model);
    random_normal_parallel(p->wte, (size_t)cfg->vocab_size * cfg->channels, 0.0f, 0.02f, seed, 0 * tensor);
    random_normal_parallel(p->wpe, model->param_sizes[1], 0.0f, 0.02f, seed, 1 * tensor);
    random_normal_parallel(p->qkvw, model->param_sizes[4], 0.0f, 0.02f, seed, 4 * tensor);
    random_normal_parallel(p->attprojw, model->param_sizes[6], 0.0f, residual_std, seed, 6 * tensor);
    random_normal_parallel(p->fcw, model->param_sizes[10], 0.0f, 0.02f, seed, 10 * tensor);
    random_normal_parallel(p->fcprojw, model->param_sizes[12], 0.0f, residual_std, seed, 12 * tensor);
    for (size_t i = 0; i < model->param_sizes[2]; i++) { p->ln1w[i] = 1.0f; }
    for (size_t i = 0; i < model->param_sizes[8]; i++) { p->ln2w[i] = 1.0f; }
    for (size_t i = 0; i < model->param_sizes[14]; i++) { p->lnfw[i] = 1.0f; }
}

// ----------------------------------------------------------------------------
// forward and backward

// The per-layer slices of the parameters (or of the gradients).
typedef struct {
    float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
} LayerTensors;

static LayerTensors layer_tensors(const ParameterTensors *p, const GPT2Config *cfg, int l) {
    size_t C = cfg->channels;
    LayerTensors t = {
        p->ln1w + l * C, p->ln1b + l * C, p->qkvw + l * 3 * C * C, p->qkvb + l * 3 * C,
        p->attprojw + l * C * C, p->attprojb + l * C, p->ln2w + l * C, p->ln2b + l * C,
        p->fcw + l * 4 * C * C, p->fcb + l * 4 * C, p->fcprojw + l * 4 * C * C, p->fcprojb + l * C};
    return t;
}

// The activations of layer l for a pass over (B, T): the per-layer tensors are
// laid out (L, B, T, ...) with the B and T of the current call; with recompute, all
// layers but residual3 share the one layer's worth there is.
typedef struct {
    float *input;  // the residual stream entering the layer: encoded or residual3 of layer l-1
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *att_lse, *atty, *residual2, *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu;
    float *residual3;
} LayerActivations;

static LayerActivations layer_activations(const GPT2 *model, int l, int B, int T) {
    const ActivationTensors *a = &model->acts;
    size_t N = (size_t)B * T, C = model->config.channels, NH = model->config.num_heads;
    size_t k = model->recompute ? 0 : l;  // the layer's slot in the tensors other than residual3
    LayerActivations la = {
        l == 0 ? a->encoded : a->residual3 + (l - 1) * N * C,
        a->ln1 + k * N * C, a->ln1_mean + k * N, a->ln1_rstd + k * N, a->qkv + k * N * 3 * C, a->att_lse + k * NH * N,
        a->atty + k * N * C, a->residual2 + k * N * C, a->ln2 + k * N * C, a->ln2_mean + k * N, a->ln2_rstd + k * N,
        a->fch + k * N * 4 * C, a->fch_gelu + k * N * 4 * C, a->residual3 + l * N * C};
    return la;
}

static void observe(const GPT2 *model, const char *name, int layer, float *data, size_t nrows,
                    size_t width) {
    if (model->observer != NULL) { model->observer(model->observer_ctx, name, layer, data, 0, nrows, width); }
}

// A tensor a kernel produced, for the observer: nrows rows of width floats.
typedef struct {
    const char *name;
    float *data;
    size_t nrows, width;
} Observed;

// FORWARD(kind, kernel call, {name, data, rows, width}...): runs the call, charges its
// time to profile kind `kind`, then shows the observer each tensor listed, in order.
// BACKWARD the same for the backward pass (inside block `layer`: blocks layer+1.. are
// final for backward_hook). Expect `model` and `layer` (-1 outside the blocks) in scope.
#define RUN_KERNEL(pass, kind, call, ...)                                                 \
    do {                                                                                  \
        call;                                                                             \
        profile_lap(&model->profile, kind, pass);                                         \
        if (pass == BWD) { backward_done(model, layer + 1); }                             \
        const Observed observed_[] = {__VA_ARGS__};  /* may be empty (GNU C) */           \
        const Observed *end_ = observed_ + sizeof(observed_) / sizeof(Observed);          \
        for (const Observed *o_ = observed_; o_ != end_; o_++) {                          \
            observe(model, o_->name, layer, o_->data, o_->nrows, o_->width);              \
        }                                                                                 \
    } while (0)
#define FORWARD(kind, call, ...) RUN_KERNEL(FWD, kind, call, __VA_ARGS__)
#define BACKWARD(kind, call, ...) RUN_KERNEL(BWD, kind, call, __VA_ARGS__)

// A block's forward pass is two halves: attention (block_forward_attention), then the MLP
// (block_forward_mlp). recomputing: the backward's re-run (with recompute), which stops before
// the MLP projection: residual3, the next layer's input, was kept by the forward pass. Its
// time counts as forward time in --profile.
static void block_forward_attention(GPT2 *model, int layer, int B, int T) {
    const GPT2Config *cfg = &model->config;
    const int N = B * T, C = cfg->channels, NH = cfg->num_heads;
    LayerTensors w = layer_tensors(&model->params, cfg, layer);
    LayerActivations a = layer_activations(model, layer, B, T);

    FORWARD(PROF_LAYERNORM, layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, a.input, w.ln1w, w.ln1b, N, C),
            {"ln1_mean", a.ln1_mean, N, 1}, {"ln1_rstd", a.ln1_rstd, N, 1}, {"ln1", a.ln1, N, C});
    FORWARD(PROF_MATMUL, matmul_forward(a.qkv, a.ln1, w.qkvw, gpt2_w16(model, w.qkvw), w.qkvb, N, C, 3 * C), {"qkv", a.qkv, N, 3 * C});
    FORWARD(PROF_ATTENTION, attention_forward(a.atty, a.att_lse, a.qkv, B, T, C, NH),
            {"att_lse", a.att_lse, (size_t)B * NH, T}, {"atty", a.atty, N, C});
    FORWARD(PROF_MATMUL, matmul_forward_residual(a.residual2, a.input, a.atty, w.attprojw, gpt2_w16(model, w.attprojw), w.attprojb,
                                                 N, C, C),
            {"residual2", a.residual2, N, C});
}

static void block_forward_mlp(GPT2 *model, int layer, int B, int T, int recomputing) {
    const GPT2Config *cfg = &model->config;
    const int N = B * T, C = cfg->channels;
    LayerTensors w = layer_tensors(&model->params, cfg, layer);
    LayerActivations a = layer_activations(model, layer, B, T);

    FORWARD(PROF_LAYERNORM, layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, w.ln2w, w.ln2b, N, C),
            {"ln2_mean", a.ln2_mean, N, 1}, {"ln2_rstd", a.ln2_rstd, N, 1}, {"ln2", a.ln2, N, C});
    FORWARD(PROF_MATMUL, matmul_forward_gelu(a.fch_gelu, a.fch, a.ln2, w.fcw, gpt2_w16(model, w.fcw), w.fcb, N, C, 4 * C),
            {"fch", a.fch, N, 4 * C}, {"fch_gelu", a.fch_gelu, N, 4 * C});
    if (recomputing) { return; }
    FORWARD(PROF_MATMUL,
            matmul_forward_residual(a.residual3, a.residual2, a.fch_gelu, w.fcprojw, gpt2_w16(model, w.fcprojw),
                                    w.fcprojb, N, 4 * C, C),
            {"residual3", a.residual3, N, C});
}

static void block_forward(GPT2 *model, int layer, int B, int T, int recomputing) {
    block_forward_attention(model, layer, B, T);
    block_forward_mlp(model, layer, B, T, recomputing);
}

// Half h (0 .. 2L-1) of the blocks' forward: block h / 2's attention (h even) or MLP (h odd).
static void block_forward_half(GPT2 *model, int h, int B, int T) {
    if (h % 2 == 0) {
        block_forward_attention(model, h / 2, B, T);
    } else {
        block_forward_mlp(model, h / 2, B, T, 0);
    }
}

// Whether a bf16 run's product reads its dout as bf16 bits written by its bias pass
// (matmul_backward_bias_bf16) rather than as floats: by_default unless the environment variable
// var forces it, =0 the floats, =1 the bits on every bf16 path (for tests and comparisons).
// forced caches the variable (-2: not read yet).
static int bf16_dout_bits(int *forced, int by_default, const char *var, const char *floats, const char *bits) {
    if (*forced == -2) { *forced = env_flag_or_unset(var, floats, bits); }
    return (*forced < 0 ? by_default : *forced) && gemm_a16_usable();
}

// The MLP's dfch: gelu's backward writes it only as bf16 bits, all that fc's two products read of
// it, and sums fc's bias gradient from the floats in the same pass: the same bits as the floats
// rounded by the products' packing, with half the bytes written and read and no pass for the bias.
// By default where that pays (gemm_a16_pays). Not where an observer (test_gpt2) wants the floats.
static int mlp_bf16_dfch(const GPT2 *model) {
    static int forced = -2;
    return bf16_dout_bits(&forced, gemm_a16_pays(), "LLMC_BF16_DFCH", "the MLP's dfch as floats",
                          "as bf16 bits on every bf16 path") &&
           model->observer == NULL;
}

// Attention's dqkv: qkv's bias pass also rounds it to bf16 bits, which qkv's two products then read:
// the same bits, half the bytes read by their packing. Off unless LLMC_BF16_DQKV=1: unlike dfch,
// whose floats it spares, the pass adds a write of the bits to a bias pass that only read, and on
// the lent Xeon's AMX (family 6 model 207, 2026-12-07) qkv's backward at B=4 T=1024 took 23.1 and
// 24.2 ms with the bits against 23.5 and 23.2 without, at T=64 4-6% longer
// (dev/cpu/results/2026-12-07-night). The floats stay (attention's backward sums into them).
static int qkv_bf16_dqkv(void) {
    static int forced = -2;
    return bf16_dout_bits(&forced, 0, "LLMC_BF16_DQKV", "qkv's products read dqkv's floats",
                          "its bf16 bits on every bf16 path");
}

// On entry acts.dresidual holds the gradient of the layer's output (residual3);
// on return, the gradient of its input. The residual connections: the forward
// adds them in the projections' epilogue (matmul_forward_residual); the backward
// passes dresidual on unchanged, and each branch's LayerNorm backward adds its
// gradient into it.
static void block_backward(GPT2 *model, int layer, int B, int T) {
    const GPT2Config *cfg = &model->config;
    const int N = B * T, C = cfg->channels, NH = cfg->num_heads;
    LayerTensors w = layer_tensors(&model->params, cfg, layer);
    LayerTensors g = layer_tensors(&model->grads, cfg, layer);
    LayerActivations a = layer_activations(model, layer, B, T);
    ActivationTensors *s = &model->acts;
    // the matmuls write their weight and bias gradients on the step's first backward pass
    const int dw = MATMUL_OVERWRITE_DINP |
                   (model->grads_overwrite ? MATMUL_OVERWRITE_DWEIGHT | MATMUL_OVERWRITE_DBIAS : 0);
    const int overwrite_dbias = (dw & MATMUL_OVERWRITE_DBIAS) != 0, ftz = gemm_flushes_bf16_denormals();
    observe(model, "dresidual3", layer, s->dresidual, N, C);

    // MLP: residual3 = residual2 + fcproj(gelu(fc(ln2(residual2))))
    BACKWARD(PROF_MATMUL, matmul_backward_ex(s->dfch, g.fcprojw, g.fcprojb, s->dresidual, a.fch_gelu, w.fcprojw,
                                             gpt2_w16(model, w.fcprojw), gpt2_panels(model, PARAM_FCPROJW, layer), N,
                                             4 * C, C, dw, grad_norm_hook(model)));
    if (mlp_bf16_dfch(model)) {  // dfch as bf16 bits alone, fc's bias gradient summed as they are made
        uint16_t *dfch16 = (uint16_t *)s->dqkv;  // (B, T, 4C) bits in dqkv's floats, unused until attention's backward
        BACKWARD(PROF_GELU, matmul_backward_bias_bf16(dfch16, g.fcb, s->dfch, a.fch, N, 4 * C, overwrite_dbias, ftz));
        BACKWARD(PROF_MATMUL, matmul_backward_bf16_dout(s->dln, g.fcw, dfch16, 4 * C, a.ln2, w.fcw, gpt2_w16(model, w.fcw),
                                                        gpt2_panels(model, PARAM_FCW, layer), N, C, 4 * C, dw,
                                                        grad_norm_hook(model)),
                 {"dln2", s->dln, N, C});
    } else {
        BACKWARD(PROF_GELU, gelu_backward(s->dfch, a.fch, s->dfch, (size_t)N * 4 * C), {"dfch", s->dfch, N, 4 * C});
        BACKWARD(PROF_MATMUL, matmul_backward_ex(s->dln, g.fcw, g.fcb, s->dfch, a.ln2, w.fcw, gpt2_w16(model, w.fcw),
                                                 gpt2_panels(model, PARAM_FCW, layer), N, C, 4 * C, dw,
                                                 grad_norm_hook(model)),
                 {"dln2", s->dln, N, C});
    }
    BACKWARD(PROF_LAYERNORM, layernorm_backward(s->dresidual, g.ln2w, g.ln2b, s->dln, a.residual2, a.ln2_mean,
                                                a.ln2_rstd, w.ln2w, N, C), {"dresidual2", s->dresidual, N, C});

    // attention: residual2 = input + attproj(attention(qkv(ln1(input)))). The
    // attention backward writes all of dqkv (its sums start from zero): no zeroing pass first.
    BACKWARD(PROF_MATMUL, matmul_backward_ex(s->datty, g.attprojw, g.attprojb, s->dresidual, a.atty, w.attprojw,
                                             gpt2_w16(model, w.attprojw), gpt2_panels(model, PARAM_ATTPROJW, layer), N,
                                             C, C, dw, grad_norm_hook(model)),
             {"datty", s->datty, N, C});
    BACKWARD(PROF_ATTENTION, attention_backward(s->dqkv, s->datty, a.atty, a.att_lse, a.qkv, B, T, C, NH),
             {"dqkv", s->dqkv, N, 3 * C});
    if (qkv_bf16_dqkv()) {  // the products read dqkv's bf16 bits, made as qkv's bias gradient is summed
        uint16_t *dqkv16 = (uint16_t *)s->dfch;  // (B, T, 3C) bits in dfch's floats, free since fc's backward
        BACKWARD(PROF_MATMUL, matmul_backward_bias_bf16(dqkv16, g.qkvb, s->dqkv, NULL, N, 3 * C, overwrite_dbias, ftz));
        BACKWARD(PROF_MATMUL, matmul_backward_bf16_dout(s->dln, g.qkvw, dqkv16, 3 * C, a.ln1, w.qkvw, gpt2_w16(model, w.qkvw),
                                                        gpt2_panels(model, PARAM_QKVW, layer), N, C, 3 * C, dw,
                                                        grad_norm_hook(model)),
                 {"dln1", s->dln, N, C});
    } else {
        BACKWARD(PROF_MATMUL, matmul_backward_ex(s->dln, g.qkvw, g.qkvb, s->dqkv, a.ln1, w.qkvw, gpt2_w16(model, w.qkvw),
                                                 gpt2_panels(model, PARAM_QKVW, layer), N, C, 3 * C, dw,
                                                 grad_norm_hook(model)),
                 {"dln1", s->dln, N, C});
    }
    BACKWARD(PROF_LAYERNORM, layernorm_backward(s->dresidual, g.ln1w, g.ln1b, s->dln, a.input, a.ln1_mean,
                                                a.ln1_rstd, w.ln1w, N, C));
}

static void check_tokens(const GPT2 *model, const int *tokens, int N, const char *what) {
    for (int i = 0; i < N; i++) {
        if (tokens[i] < 0 || tokens[i] >= model->config.vocab_size) {
            die("%s token %d at position %d is outside the vocabulary (0..%d)", what, tokens[i], i,
                model->config.vocab_size - 1);
        }
    }
}

// The forward pass before the blocks: the embeddings of inputs (B, T) into acts.encoded.
static void forward_encoder(GPT2 *model, const int *inputs, int B, int T) {
    if (B > model->batch_size || T > model->seq_len || B < 1 || T < 1) {
        die("forward pass over B=%d, T=%d: the activations were sized for B=%d, T=%d", B, T,
            model->batch_size, model->seq_len);
    }
    check_tokens(model, inputs, B * T, "input");
    const int N = B * T, C = model->config.channels;
    ActivationTensors *acts = &model->acts;
    const int layer = -1;  // outside the blocks, for FORWARD's observer
    FORWARD(PROF_ENCODER, encoder_forward(acts->encoded, inputs, model->params.wte, model->params.wpe, B, T, C),
            {"encoded", acts->encoded, N, C});
}

// The forward pass after the blocks: the final LayerNorm of the last block's output into acts.lnf.
static void forward_final_layernorm(GPT2 *model, int B, int T) {
    const int N = B * T, C = model->config.channels, L = model->config.num_layers;
    ActivationTensors *acts = &model->acts;
    const int layer = -1;
    const float *last = acts->residual3 + (size_t)(L - 1) * N * C;
    FORWARD(PROF_LAYERNORM, layernorm_forward(acts->lnf, acts->lnf_mean, acts->lnf_rstd, last, model->params.lnfw,
                                              model->params.lnfb, N, C),
            {"lnf_mean", acts->lnf_mean, N, 1}, {"lnf_rstd", acts->lnf_rstd, N, 1}, {"lnf", acts->lnf, N, C});
}

// ----------------------------------------------------------------------------
// the optimizer step: zeroing, the gradient norm, AdamW (now or beside the next forward pass)

#include "gpt2_update.h"

// Everything up to the final LayerNorm (acts.lnf); in training, beside a pending update.
static void gpt2_forward_to_lnf(GPT2 *model, const int *inputs, int B, int T) {
    gpt2_bf16_weights_ready(model);
    const int ran = model->pending.active ? forward_beside_update(model, inputs, B, T) : 0;
    if (ran == 0) { forward_encoder(model, inputs, B, T); }
    for (int h = ran > 0 ? ran - 1 : 0; h < 2 * model->config.num_layers; h++) {
        // before any ran beside an update: twice a half on every thread (of two) as its guess
        double *guess = &model->pending.half_ms[h % 2];
        const double t0 = *guess == 0 ? now_seconds() : 0;
        block_forward_half(model, h, B, T);
        if (*guess == 0) { *guess = 2e3 * (now_seconds() - t0); }
    }
    forward_final_layernorm(model, B, T);
}

// LLMC_BF16_DLOGITS=0: bf16 training writes the dlogits as floats, which the products round as they
// pack them (the same bits, more bytes moved); for tests and comparisons.
static int classifier_bf16_dlogits_enabled(void) {
    static int enabled = -1;
    if (enabled < 0) { enabled = env_flag("LLMC_BF16_DLOGITS", 1, "the dlogits as floats", "as bf16 bits, in bf16 training"); }
    return enabled;
}

// The classifier over all N rows, chunk by chunk (see classifier.h). With
// dloss != 0 it also runs the head's backward: dlnf = dlogits . wte and
// grads.wte += dlogits^T . lnf (= for the first chunk after gpt2_zero_grad). Returns the mean loss.
static float classifier(GPT2 *model, const int *targets, int N, float dloss, float *dlnf) {
    const GPT2Config *cfg = &model->config;
    const int C = cfg->channels, V = cfg->vocab_size, Vp = cfg->padded_vocab_size;
    ActivationTensors *acts = &model->acts;
    // in bf16 the dlogits as bf16 bits (classifier.h), to an observer first as floats
    const int dlogits16 = dloss != 0.0f && gemm_a16_usable() && classifier_bf16_dlogits_enabled();
    const int ftz = gemm_flushes_bf16_denormals();
    // the precision's chunk: the logits were sized for it where the precision was set before
    // the model was created (train_gpt2, test_gpt2, eval); a bf16 chunk in logits sized for
    // fp32's would overrun them
    const size_t logits_floats = model->act_sizes[offsetof(ActivationTensors, logits) / sizeof(float *)];
    const int chunk = classifier_chunk_rows((size_t)N);
    if ((size_t)chunk * (size_t)Vp > logits_floats) {
        die("classifier: chunks of %d rows, logits sized for %zu: the precision was set after the model was created",
            chunk, logits_floats / (size_t)Vp);
    }
    for (int r0 = 0; r0 < N; r0 += chunk) {
        int rows = N - r0 < chunk ? N - r0 : chunk;
        const float *x = acts->lnf + (size_t)r0 * C;
        matmul_forward(acts->logits, x, model->params.wte, gpt2_w16(model, model->params.wte), NULL, rows, C, Vp);
        fwd_lap(model, PROF_MATMUL);
        if (model->observer != NULL) {
            model->observer(model->observer_ctx, "logits", -1, acts->logits, r0, rows, Vp);
        }
        crossentropy_softmax_forward_backward(acts->losses + r0, acts->logits, targets + r0, dloss,
                                              rows, V, Vp, dlogits16 && model->observer == NULL, ftz);
        fwd_lap(model, PROF_CLASSIFIER);
        if (dloss != 0.0f) {
            if (model->observer != NULL) {  // the logits are now their gradient
                model->observer(model->observer_ctx, "dlogits", -1, acts->logits, r0, rows, Vp);
                if (dlogits16) { classifier_rows_to_bf16(acts->logits, rows, V, Vp, ftz); }
            }
            const unsigned flags = MATMUL_OVERWRITE_DINP | (model->grads_overwrite && r0 == 0 ? MATMUL_OVERWRITE_DWEIGHT : 0);
            // wte's gradient rows are final after the last chunk's product (but the tokens')
            const gemm_final_hook *final = r0 + rows >= N ? grad_norm_hook(model) : NULL;
            const uint16_t *wte16 = gpt2_w16(model, model->params.wte);
            if (dlogits16) {
                matmul_backward_bf16_dout(dlnf + (size_t)r0 * C, model->grads.wte, (const uint16_t *)acts->logits,
                                          2 * (ptrdiff_t)Vp, x, model->params.wte, wte16, NULL, rows, C, Vp, flags, final);
            } else {
                matmul_backward_ex(dlnf + (size_t)r0 * C, model->grads.wte, NULL, acts->logits, x, model->params.wte,
                                   wte16, NULL, rows, C, Vp, flags, final);
            }
            bwd_lap(model, PROF_MATMUL);
        }
    }
    observe(model, "losses", -1, acts->losses, N, 1);
    double sum = 0.0;
    for (int i = 0; i < N; i++) { sum += acts->losses[i]; }
    model->mean_loss = (float)(sum / N);
    return model->mean_loss;
}

// Forward pass over inputs (B, T). With targets (B, T) it returns the mean
// loss; without (NULL), -1, and the logits of any row can be had from gpt2_logits.
// Touches no gradient: this is the pass for evaluation and sampling.
static float gpt2_forward(GPT2 *model, const int *inputs, const int *targets, int B, int T) {
    gpt2_update_finish(model);
    gpt2_forward_to_lnf(model, inputs, B, T);
    if (targets == NULL) {
        model->mean_loss = -1.0f;
        return -1.0f;
    }
    check_tokens(model, targets, B * T, "target");
    return classifier(model, targets, B * T, 0.0f, NULL);
}

// The logits (Vp) of row `row` (= b*T + t) of the last forward pass.
static const float *gpt2_logits(GPT2 *model, int row) {
    const GPT2Config *cfg = &model->config;
    matmul_forward(model->acts.logits, model->acts.lnf + (size_t)row * cfg->channels, model->params.wte,
                   gpt2_w16(model, model->params.wte), NULL, 1, cfg->channels, cfg->padded_vocab_size);
    return model->acts.logits;
}

// Training: forward pass, loss, and backward pass, accumulating into the
// gradients the gradient of loss_scale * mean loss (loss_scale = 1 / the number
// of accumulated micro-batches); the first call after gpt2_zero_grad writes them. Forward and backward are one call because the
// classifier turns its logits into dlogits as it goes. Returns the mean loss.
static float gpt2_forward_backward(GPT2 *model, const int *inputs, const int *targets, int B, int T,
                                   float loss_scale) {
    const GPT2Config *cfg = &model->config;
    const int N = B * T, C = cfg->channels, L = cfg->num_layers;
    ActivationTensors *acts = &model->acts;
    gpt2_forward_to_lnf(model, inputs, B, T);
    check_tokens(model, targets, N, "target");

    grad_norm_mark_wte(model, inputs, N, 1);  // the encoder's backward adds to these rows of wte's gradient last
    float loss = classifier(model, targets, N, loss_scale / N, acts->dln);
    observe(model, "dlnf", -1, acts->dln, N, C);

    memset(acts->dresidual, 0, (size_t)N * C * sizeof(float));
    bwd_lap(model, PROF_ZEROING);
    const float *last = acts->residual3 + (size_t)(L - 1) * N * C;
    layernorm_backward(acts->dresidual, model->grads.lnfw, model->grads.lnfb, acts->dln, last,
                       acts->lnf_mean, acts->lnf_rstd, model->params.lnfw, N, C);
    bwd_lap(model, PROF_LAYERNORM);
    backward_done(model, L);
    for (int l = L - 1; l >= 0; l--) {
        // with recompute, the one layer of activations holds the last layer's from the forward
        if (model->recompute && l < L - 1) { block_forward(model, l, B, T, 1); }
        block_backward(model, l, B, T);
        backward_done(model, l);
    }
    // wte's gradient is final only now: the classifier and the encoder both add to it
    encoder_backward(model->grads.wte, model->grads.wpe, acts->dresidual, inputs, B, T, C);
    grad_norm_mark_wte(model, inputs, N, 0);
    bwd_lap(model, PROF_ENCODER);
    backward_done(model, -1);
    model->grads_overwrite = 0;  // later micro-batches of the step add to the gradients
    return loss;
}
