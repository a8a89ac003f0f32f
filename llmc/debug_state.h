/*
Readers of test_gpt2's inputs written by scripts/reference/gpt2_reference.py.

The debug state (llm.c's gpt2_124M_debug_state.bin, version 2): a 256 x int32
header (magic 20240327, version 2, B, T), then x (B*T int32), y (B*T int32), the
logits (B*T*V fp32), the loss (fp32), and the gradients of the 16 parameter
tensors, packed (fp32).

The activations file: a 256 x int32 header (magic 20261122, version 1, number of
records), then per record a 64-byte NUL-padded name, int32 ndim and 4 int32 dims
(unused ones 1), and the record's floats.

Both readers return 0, or -1 with a one-line message in err and nothing held.
*/
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2.h"
#include "utils.h"

#define STATE_MAGIC 20240327
#define STATE_VERSION 2
#define ACTIVATIONS_MAGIC 20261122
#define ACTIVATIONS_VERSION 1

typedef struct {
    int B, T;
    int *x, *y;          // (B, T) inputs and targets
    float *ref_logits;   // (B, T, V)
    float ref_loss;
    float *ref_grads;    // all parameters' gradients, packed in checkpoint order
} DebugState;

static void debug_state_free(DebugState *s) {
    free(s->x); free(s->y); free(s->ref_logits); free(s->ref_grads);
    memset(s, 0, sizeof(*s));
}

// Reads the debug state at path for a model of config (read from model_path, named
// in errors).
static int debug_state_try_load(DebugState *s, const char *path, const GPT2Config *config, const char *model_path,
                                char *err, size_t errlen) {
    memset(s, 0, sizeof(*s));
    FILE *sf = fopen(path, "rb");
    if (sf == NULL) { snprintf(err, errlen, "%s: cannot open for reading: %s", path, strerror(errno)); return -1; }
    int header[256];
    if (read_header_checked(sf, path, header, STATE_MAGIC, STATE_VERSION, "debug state", err, errlen) != 0) {
        goto fail;
    }
    const int B = header[2], T = header[3];
    if (B < 1 || T < 1 || (double)B * T > 1e8) { snprintf(err, errlen, "%s: bad B=%d, T=%d", path, B, T); goto fail; }
    if (T > config->max_seq_len) {
        snprintf(err, errlen, "%s: T=%d is longer than the model's maximum sequence length %d (%s)", path, T,
                 config->max_seq_len, model_path);
        goto fail;
    }
    size_t N = (size_t)B * T, V = (size_t)config->vocab_size;
    size_t nparams = 0;
    {
        size_t sizes[NUM_PARAMETER_TENSORS];
        fill_parameter_sizes(sizes, config);
        for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) { nparams += sizes[i]; }
    }
    // in double: a huge config must not wrap around to a plausible size
    double expected = 256 * 4.0 + 2.0 * N * sizeof(int) + ((double)N * V + 1 + nparams) * sizeof(float);
    long size = file_size(sf);
    if (size < 0 || fseek(sf, 256 * sizeof(int), SEEK_SET) != 0) {
        snprintf(err, errlen, "%s: cannot seek: %s", path, strerror(errno));
        goto fail;
    }
    if ((double)size != expected) {
        snprintf(err, errlen, "%s: %ld bytes, but a state for B=%d, T=%d and model %s (V=%zu, %zu parameters) has %.0f: "
                 "truncated, or written for another config", path, size, B, T, model_path, V, nparams, expected);
        goto fail;
    }
    s->B = B;
    s->T = T;
    s->x = malloc(N * sizeof(int));
    s->y = malloc(N * sizeof(int));
    s->ref_logits = malloc(N * V * sizeof(float));
    s->ref_grads = malloc(nparams * sizeof(float));
    if (s->x == NULL || s->y == NULL || s->ref_logits == NULL || s->ref_grads == NULL) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    if (fread(s->x, sizeof(int), N, sf) != N || fread(s->y, sizeof(int), N, sf) != N ||
        fread(s->ref_logits, sizeof(float), N * V, sf) != N * V || fread(&s->ref_loss, sizeof(float), 1, sf) != 1 ||
        fread(s->ref_grads, sizeof(float), nparams, sf) != nparams) {
        snprintf(err, errlen, "%s: read error: %s", path, strerror(errno));
        goto fail;
    }
    fclose(sf);
    sf = NULL;
    for (size_t i = 0; i < N; i++) {
        if (s->x[i] < 0 || (size_t)s->x[i] >= V || s->y[i] < 0 || (size_t)s->y[i] >= V) {
            snprintf(err, errlen, "%s: token %d at position %zu is outside the vocabulary (0..%zu)", path,
                     s->x[i] < 0 || (size_t)s->x[i] >= V ? s->x[i] : s->y[i], i, V - 1);
            goto fail;
        }
    }
    return 0;
fail:
    if (sf != NULL) { fclose(sf); }
    debug_state_free(s);
    return -1;
}

// ----------------------------------------------------------------------------
// the reference activations, loaded whole

typedef struct {
    char name[64];
    size_t count;
    float *data;
    int used;
} Record;

typedef struct {
    Record *records;
    int num_records;
    // for the logits, which come from the debug state rather than this file
    const float *ref_logits;  // (B*T, V)
    int V;
    int resync;  // replace the matmuls' operands by the reference's (test_gpt2 --precision bf16)
} Reference;

static void activations_free(Reference *ref) {
    for (int i = 0; ref->records != NULL && i < ref->num_records; i++) { free(ref->records[i].data); }
    free(ref->records);
    ref->records = NULL;
    ref->num_records = 0;
}

static int activations_try_load(Reference *ref, const char *path, char *err, size_t errlen) {
    ref->records = NULL;
    ref->num_records = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL) { snprintf(err, errlen, "%s: cannot open for reading: %s", path, strerror(errno)); return -1; }
    int header[256];
    if (read_header_checked(f, path, header, ACTIVATIONS_MAGIC, ACTIVATIONS_VERSION, "activations", err, errlen) != 0) {
        goto fail;
    }
    if (header[2] < 0 || header[2] > 100000) { snprintf(err, errlen, "%s: bad record count %d", path, header[2]); goto fail; }
    long remaining = file_size(f);
    if (remaining >= 0) { remaining -= 256 * (long)sizeof(int); }
    if (remaining < 0 || fseek(f, 256 * sizeof(int), SEEK_SET) != 0) {
        snprintf(err, errlen, "%s: cannot seek: %s", path, strerror(errno));
        goto fail;
    }
    ref->records = calloc((size_t)header[2] + 1, sizeof(Record));
    if (ref->records == NULL) { snprintf(err, errlen, "%s: out of memory", path); goto fail; }
    for (int i = 0; i < header[2]; i++) {
        Record *r = &ref->records[i];
        ref->num_records = i + 1;
        int dims[5];
        if (remaining < 64 + 5 * (long)sizeof(int) || fread(r->name, 1, 64, f) != 64 ||
            fread(dims, sizeof(int), 5, f) != 5) {
            snprintf(err, errlen, "%s: truncated file (record %d of %d)", path, i, header[2]);
            goto fail;
        }
        r->name[63] = '\0';
        // the name goes into error messages, which are one line
        for (char *c = r->name; *c != '\0'; c++) { if ((unsigned char)*c < 0x20 || *c == 0x7f) { *c = '?'; } }
        r->count = 1;
        if (dims[0] < 1 || dims[0] > 4) { snprintf(err, errlen, "%s: record %d (%s): bad ndim %d", path, i, r->name, dims[0]); goto fail; }
        for (int d = 1; d <= 4; d++) {
            if (dims[d] < 1) { snprintf(err, errlen, "%s: record %d (%s): bad dimension %d", path, i, r->name, dims[d]); goto fail; }
            r->count *= (size_t)dims[d];  // at most (2^31)^4 = 2^124: can wrap; caught by the size check in double below
        }
        remaining -= 64 + 5 * sizeof(int);
        double need = (double)dims[1] * dims[2] * dims[3] * dims[4] * sizeof(float);
        if (need > (double)remaining) {
            snprintf(err, errlen, "%s: truncated file (record %s needs %.0f floats)", path, r->name, need / sizeof(float));
            goto fail;
        }
        remaining -= (long)(r->count * sizeof(float));
        r->data = malloc(r->count * sizeof(float) + 1);
        if (r->data == NULL) { snprintf(err, errlen, "%s: out of memory", path); goto fail; }
        if (fread(r->data, sizeof(float), r->count, f) != r->count) {
            snprintf(err, errlen, "%s: read error: %s", path, strerror(errno));
            goto fail;
        }
    }
    if (remaining != 0) { snprintf(err, errlen, "%s: %ld bytes of unexpected data after the last record", path, remaining); goto fail; }
    fclose(f);
    return 0;
fail:
    fclose(f);
    activations_free(ref);
    return -1;
}
