/*
HellaSwag (or any multiple-choice completion eval) scored as llm.c scores it,
shared by eval.c and train_gpt2.c (--eval-every).

The file is llm.c's eval file (dev/data/data_common.py write_evalfile; written
here by scripts/convert/prepare_hellaswag.py): a 256 x int32 header (magic 20240522,
version 1, header[2] = number of examples, header[3] = the longest example in
bytes), then per example a stream of uint16:
  65535 (start of example), the example's size in bytes (this whole stream),
  its index, the label (the correct ending), the number of endings K,
  the context length and tokens, then K times: an ending's length and tokens.
Endings are tokenized with a leading space (" " + ending), as llm.c does.

Each example is one batch of K rows (row k = context + ending k, padded): for
each ending, the loss of each of its tokens given everything before it; its
sum and its mean over the ending's tokens. As llm.c's dev/data/hellaswag.py:
acc counts examples whose lowest SUM of losses is the label's, acc_norm those
whose lowest MEAN is (llm.c's C trainer logs acc_norm as "eval"). Ties go to
the lowest index, as torch's argmin.
*/
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2.h"
#include "utils.h"

#define EVAL_MAGIC 20240522
#define EVAL_VERSION 1
#define HELLASWAG_MAX_ENDINGS 16

typedef struct {
    int index, label, num_endings;
    int ctx_len;
    const uint16_t *ctx;
    int end_len[HELLASWAG_MAX_ENDINGS];
    const uint16_t *end[HELLASWAG_MAX_ENDINGS];
} HellaSwagExample;

typedef struct {
    int num_examples;
    int longest_row;   // the most tokens of context + ending over all rows
    int max_endings;   // the most endings of any example
    int max_token;     // the largest token id in the file
    HellaSwagExample *examples;
    uint16_t *stream;  // the file after the header; examples point into it
} HellaSwag;

// Reads and checks a whole eval file; any problem is a one-line error naming the file.
static void hellaswag_load(HellaSwag *hs, const char *path) {
    memset(hs, 0, sizeof(*hs));
    FILE *f = fopen_or_die(path, "rb");
    int header[256];
    read_header_or_die(f, path, header, EVAL_MAGIC, EVAL_VERSION, "HellaSwag eval");
    long size = file_size_or_die(f, path) - 256 * (long)sizeof(int);
    if (header[2] < 1 || header[2] > 65536) { die("%s: bad number of examples %d", path, header[2]); }
    if (size % 2 != 0) { die("%s: truncated file (an odd number of bytes after the header)", path); }
    size_t n = (size_t)size / 2;
    hs->stream = malloc_or_die(n * sizeof(uint16_t), path);
    fread_or_die(hs->stream, sizeof(uint16_t), n, f, path);
    fclose(f);
    hs->num_examples = header[2];
    hs->examples = malloc_or_die((size_t)hs->num_examples * sizeof(HellaSwagExample), path);
    size_t pos = 0;
    for (int e = 0; e < hs->num_examples; e++) {
        HellaSwagExample *ex = &hs->examples[e];
        const uint16_t *s = hs->stream + pos;
        size_t left = n - pos;
        if (left < 6) { die("%s: truncated file (example %d of %d missing)", path, e, hs->num_examples); }
        if (s[0] != 65535) { die("%s: example %d does not start with the delimiter 65535 (corrupt file)", path, e); }
        size_t words = s[1] / 2;
        if (s[1] % 2 != 0 || words < 6) { die("%s: example %d: bad size %u bytes", path, e, s[1]); }
        if (words > left) { die("%s: truncated file (example %d needs %zu bytes, %zu left)", path, e, words * 2, left * 2); }
        ex->index = s[2];
        ex->label = s[3];
        ex->num_endings = s[4];
        ex->ctx_len = s[5];
        if (ex->num_endings < 1 || ex->num_endings > HELLASWAG_MAX_ENDINGS) {
            die("%s: example %d: %d endings (1..%d supported)", path, e, ex->num_endings, HELLASWAG_MAX_ENDINGS);
        }
        if (ex->label >= ex->num_endings) { die("%s: example %d: label %d but %d endings", path, e, ex->label, ex->num_endings); }
        if (ex->ctx_len < 1) { die("%s: example %d: empty context (its first ending token could not be scored)", path, e); }
        size_t at = 6 + (size_t)ex->ctx_len;
        ex->ctx = s + 6;
        for (int k = 0; k < ex->num_endings; k++) {
            if (at >= words) { die("%s: example %d: its size %u bytes is shorter than its contents", path, e, s[1]); }
            ex->end_len[k] = s[at];
            ex->end[k] = s + at + 1;
            if (ex->end_len[k] < 1) { die("%s: example %d: ending %d is empty", path, e, k); }
            at += 1 + (size_t)ex->end_len[k];
            int row = ex->ctx_len + ex->end_len[k];
            if (row > hs->longest_row) { hs->longest_row = row; }
        }
        if (at != words) { die("%s: example %d: its size %u bytes does not match its contents (%zu bytes)", path, e, s[1], at * 2); }
        for (size_t i = 6; i < words; i++) {
            if (s[i] == 65535) { die("%s: example %d: token 65535 inside an example (corrupt file)", path, e); }
        }
        for (size_t i = 6; i < (size_t)6 + ex->ctx_len; i++) { if (s[i] > hs->max_token) { hs->max_token = s[i]; } }
        for (int k = 0; k < ex->num_endings; k++) {
            for (int i = 0; i < ex->end_len[k]; i++) { if (ex->end[k][i] > hs->max_token) { hs->max_token = ex->end[k][i]; } }
        }
        if (ex->num_endings > hs->max_endings) { hs->max_endings = ex->num_endings; }
        pos += words;
    }
    if (pos != n) { die("%s: %zu bytes after the last of its %d examples", path, (n - pos) * 2, hs->num_examples); }
}

// Checks that the model can score every example with activations of (B, T).
static void hellaswag_check_fits(const HellaSwag *hs, const char *path, const GPT2Config *cfg, int T) {
    if (hs->max_token >= cfg->vocab_size) {
        die("%s: token %d is outside the model's vocabulary (0..%d)", path, hs->max_token, cfg->vocab_size - 1);
    }
    if (hs->longest_row > T) {
        die("%s: an example has %d tokens of context + ending, more than T=%d%s", path, hs->longest_row, T,
            T < cfg->max_seq_len ? " (raise -t)" : ", the model's maximum sequence length");
    }
}

typedef struct {
    int num_examples, correct, correct_norm;  // acc = correct / num_examples (sum), acc_norm (mean)
} HellaSwagResult;

// Scores one example: sum[k] and mean[k] of the losses of ending k's tokens.
// Rows go through the model in groups of up to the model's batch size; inputs and
// targets are scratch of model->batch_size * model->seq_len ints. Returns the
// prediction by sum; *pred_norm gets the one by mean.
static int hellaswag_score_example(GPT2 *model, const HellaSwagExample *ex, int *inputs, int *targets,
                                   double *sum, double *mean, int *pred_norm) {
    int T = 0;
    for (int k = 0; k < ex->num_endings; k++) {
        if (ex->ctx_len + ex->end_len[k] > T) { T = ex->ctx_len + ex->end_len[k]; }
    }
    for (int k0 = 0; k0 < ex->num_endings; k0 += model->batch_size) {
        int rows = ex->num_endings - k0 < model->batch_size ? ex->num_endings - k0 : model->batch_size;
        // row r = context + ending k0+r, then token 0 as padding; targets are the row shifted by one
        for (int r = 0; r < rows; r++) {
            const HellaSwagExample *x = ex;
            int k = k0 + r, len = x->ctx_len + x->end_len[k];
            int *in = inputs + (size_t)r * T, *tg = targets + (size_t)r * T;
            for (int t = 0; t < T; t++) {
                in[t] = t < x->ctx_len ? x->ctx[t] : t < len ? x->end[k][t - x->ctx_len] : 0;
            }
            for (int t = 0; t < T; t++) { tg[t] = t + 1 < len ? in[t + 1] : 0; }
        }
        gpt2_forward(model, inputs, targets, rows, T);
        for (int r = 0; r < rows; r++) {
            int k = k0 + r;
            const float *losses = model->acts.losses + (size_t)r * T;
            // ending token i sits at position ctx_len + i and is predicted at position ctx_len + i - 1
            double s = 0.0;
            for (int i = 0; i < ex->end_len[k]; i++) { s += losses[ex->ctx_len + i - 1]; }
            sum[k] = s;
            mean[k] = s / ex->end_len[k];
        }
    }
    int pred = 0, pn = 0;
    for (int k = 1; k < ex->num_endings; k++) {
        if (sum[k] < sum[pred]) { pred = k; }
        if (mean[k] < mean[pn]) { pn = k; }
    }
    *pred_norm = pn;
    return pred;
}

// Scores the first max_examples examples (all if < 0). With `verbose`, prints one
// line per example: its index, label, predictions and every ending's sum and mean.
static HellaSwagResult hellaswag_evaluate(GPT2 *model, const HellaSwag *hs, int max_examples, int *inputs,
                                          int *targets, FILE *verbose) {
    HellaSwagResult r = {0, 0, 0};
    int n = max_examples < 0 || max_examples > hs->num_examples ? hs->num_examples : max_examples;
    for (int e = 0; e < n; e++) {
        const HellaSwagExample *ex = &hs->examples[e];
        double sum[HELLASWAG_MAX_ENDINGS], mean[HELLASWAG_MAX_ENDINGS];
        int pred_norm, pred = hellaswag_score_example(model, ex, inputs, targets, sum, mean, &pred_norm);
        r.num_examples++;
        r.correct += pred == ex->label;
        r.correct_norm += pred_norm == ex->label;
        if (verbose != NULL) {
            fprintf(verbose, "example %d label %d pred %d pred_norm %d sum", ex->index, ex->label, pred, pred_norm);
            for (int k = 0; k < ex->num_endings; k++) { fprintf(verbose, " %.9g", sum[k]); }
            fprintf(verbose, " mean");
            for (int k = 0; k < ex->num_endings; k++) { fprintf(verbose, " %.9g", mean[k]); }
            fprintf(verbose, "\n");
        }
    }
    return r;
}

static void hellaswag_free(HellaSwag *hs) {
    free(hs->examples);
    free(hs->stream);
    memset(hs, 0, sizeof(*hs));
}
