/*
Checkpoints of a training run, written so that a crash at any moment leaves
the previous ones intact, and checked on load.

A checkpoint of step S is two files in the output directory:
  model_S.bin  llm.c's model format (loadable with -e, and by llm.c), with the
               CRC32 of the tensor bytes in header[9] (header[8] = CHECKPOINT_CRC_MARK;
               llm.c ignores both)
  state_S.bin  the rest of the run: a 256 x int32 header (magic 20261124,
               version 1; the fields below), then AdamW's m and v (each the
               parameters' size, fp32, in checkpoint order); header[255] is the
               CRC32 of the header (with that field 0) and the tensors.
Each file is written through llmc/atomic_file.h (NAME.tmp, fsync, rename, directory
fsync): NAME exists only when complete. The state is written after the model, so a
state file implies its model file.
*/
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "atomic_file.h"
#include "dataloader.h"
#include "gpt2.h"
#include "runctl.h"
#include "utils.h"

#define TRAIN_STATE_MAGIC 20261124
#define TRAIN_STATE_VERSION 1

// Everything besides the tensors that a run needs to continue exactly.
typedef struct {
    int step;                // optimizer steps completed
    GPT2Config config;
    int B, T;
    int64_t grad_accum_steps;  // up to -d's 2^40 (B = T = 1)
    uint64_t seed;
    int shuffle;
    DataPosition data;       // of the next training batch
    uint64_t sample_rng;
    int consecutive_skips;   // non-finite steps in a row so far
    // the hyperparameters of the run, so that a resume cannot silently change them
    float learning_rate, final_fraction, weight_decay, grad_clip;
    int schedule, warmup_steps, max_steps;
} TrainState;

// ----------------------------------------------------------------------------
// the model file

static void write_model_checkpoint(const GPT2 *model, const char *path, size_t kill_after) {
    int header[256];
    gpt2_fill_header(model, header);
    header[8] = CHECKPOINT_CRC_MARK;
    uint32_t crc = params_crc32(model, (float *const *)&model->params);
    memcpy(&header[9], &crc, sizeof(crc));
    AtomicFile af;
    atomic_open(&af, path, kill_after);
    atomic_write(&af, header, sizeof(header));
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        atomic_write(&af, ((float *const *)&model->params)[i], model->param_sizes[i] * sizeof(float));
    }
    atomic_commit(&af);
}

// ----------------------------------------------------------------------------
// the state file

enum {  // header fields of state_S.bin
    ST_MAGIC, ST_VERSION, ST_STEP, ST_MAXT, ST_V, ST_L, ST_NH, ST_C, ST_VP, ST_B, ST_T, ST_ACCUM,
    ST_SEED_LO, ST_SEED_HI, ST_SHUFFLE, ST_EPOCH, ST_SHARD_POS, ST_SLOT_POS_LO, ST_SLOT_POS_HI,
    ST_RNG_LO, ST_RNG_HI, ST_SKIPS, ST_LR, ST_FINAL_FRACTION, ST_WEIGHT_DECAY, ST_GRAD_CLIP,
    ST_SCHEDULE, ST_WARMUP, ST_MAX_STEPS, ST_NUM_PARAMS_LO, ST_NUM_PARAMS_HI,
    ST_ACCUM_HI,  // the high half of the accumulation steps: 0 in files from before it
    ST_CRC = 255
};

static void put_u64(int *h, int lo, uint64_t v) { h[lo] = (int)(uint32_t)v; h[lo + 1] = (int)(uint32_t)(v >> 32); }
static uint64_t get_u64(const int *h, int lo) { return (uint64_t)(uint32_t)h[lo] | (uint64_t)(uint32_t)h[lo + 1] << 32; }
static void put_f32(int *h, int i, float v) { memcpy(&h[i], &v, sizeof(v)); }
static float get_f32(const int *h, int i) { float v; memcpy(&v, &h[i], sizeof(v)); return v; }

static void state_to_header(const TrainState *s, size_t num_params, int h[256]) {
    memset(h, 0, 256 * sizeof(int));
    h[ST_MAGIC] = TRAIN_STATE_MAGIC;
    h[ST_VERSION] = TRAIN_STATE_VERSION;
    h[ST_STEP] = s->step;
    h[ST_MAXT] = s->config.max_seq_len;
    h[ST_V] = s->config.vocab_size;
    h[ST_L] = s->config.num_layers;
    h[ST_NH] = s->config.num_heads;
    h[ST_C] = s->config.channels;
    h[ST_VP] = s->config.padded_vocab_size;
    h[ST_B] = s->B;
    h[ST_T] = s->T;
    h[ST_ACCUM] = (int)(uint32_t)s->grad_accum_steps;
    h[ST_ACCUM_HI] = (int)(uint32_t)((uint64_t)s->grad_accum_steps >> 32);
    put_u64(h, ST_SEED_LO, s->seed);
    h[ST_SHUFFLE] = s->shuffle;
    h[ST_EPOCH] = s->data.epoch;
    h[ST_SHARD_POS] = s->data.shard_pos;
    put_u64(h, ST_SLOT_POS_LO, s->data.slot_pos);
    put_u64(h, ST_RNG_LO, s->sample_rng);
    h[ST_SKIPS] = s->consecutive_skips;
    put_f32(h, ST_LR, s->learning_rate);
    put_f32(h, ST_FINAL_FRACTION, s->final_fraction);
    put_f32(h, ST_WEIGHT_DECAY, s->weight_decay);
    put_f32(h, ST_GRAD_CLIP, s->grad_clip);
    h[ST_SCHEDULE] = s->schedule;
    h[ST_WARMUP] = s->warmup_steps;
    h[ST_MAX_STEPS] = s->max_steps;
    put_u64(h, ST_NUM_PARAMS_LO, num_params);
}

static void header_to_state(const int h[256], TrainState *s) {
    s->step = h[ST_STEP];
    s->config.max_seq_len = h[ST_MAXT];
    s->config.vocab_size = h[ST_V];
    s->config.num_layers = h[ST_L];
    s->config.num_heads = h[ST_NH];
    s->config.channels = h[ST_C];
    s->config.padded_vocab_size = h[ST_VP];
    s->B = h[ST_B];
    s->T = h[ST_T];
    s->grad_accum_steps = (int64_t)((uint64_t)(uint32_t)h[ST_ACCUM] | (uint64_t)(uint32_t)h[ST_ACCUM_HI] << 32);
    s->seed = get_u64(h, ST_SEED_LO);
    s->shuffle = h[ST_SHUFFLE];
    s->data.epoch = h[ST_EPOCH];
    s->data.shard_pos = h[ST_SHARD_POS];
    s->data.slot_pos = (size_t)get_u64(h, ST_SLOT_POS_LO);
    s->sample_rng = get_u64(h, ST_RNG_LO);
    s->consecutive_skips = h[ST_SKIPS];
    s->learning_rate = get_f32(h, ST_LR);
    s->final_fraction = get_f32(h, ST_FINAL_FRACTION);
    s->weight_decay = get_f32(h, ST_WEIGHT_DECAY);
    s->grad_clip = get_f32(h, ST_GRAD_CLIP);
    s->schedule = h[ST_SCHEDULE];
    s->warmup_steps = h[ST_WARMUP];
    s->max_steps = h[ST_MAX_STEPS];
}

static void write_state_checkpoint(const GPT2 *model, const TrainState *s, const char *path, size_t kill_after) {
    int header[256];
    state_to_header(s, model->num_parameters, header);
    uLong crc = crc32(0L, (const Bytef *)header, sizeof(header));
    crc = crc32_combine(crc, params_crc32(model, (float *const *)&model->m),
                        (z_off_t)(model->num_parameters * sizeof(float)));
    crc = crc32_combine(crc, params_crc32(model, (float *const *)&model->v),
                        (z_off_t)(model->num_parameters * sizeof(float)));
    uint32_t crc32v = (uint32_t)crc;
    memcpy(&header[ST_CRC], &crc32v, sizeof(crc32v));
    AtomicFile af;
    atomic_open(&af, path, kill_after);
    atomic_write(&af, header, sizeof(header));
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        atomic_write(&af, ((float *const *)&model->m)[i], model->param_sizes[i] * sizeof(float));
    }
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        atomic_write(&af, ((float *const *)&model->v)[i], model->param_sizes[i] * sizeof(float));
    }
    atomic_commit(&af);
}

// Reads the header of a state file into s. Returns 0, or -1 with a message in err.
static int read_state_header(const char *path, TrainState *s, int header[256], char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) { snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno)); return -1; }
    size_t got = fread(header, sizeof(int), 256, f);
    fclose(f);
    if (got != 256) { snprintf(err, errlen, "%s: truncated (corrupt) state file", path); return -1; }
    if (header[ST_MAGIC] != TRAIN_STATE_MAGIC || header[ST_VERSION] != TRAIN_STATE_VERSION) {
        snprintf(err, errlen, "%s: not a training state file (corrupt magic or version)", path);
        return -1;
    }
    header_to_state(header, s);
    return 0;
}

// Loads m and v from a state file whose header matched the model, checking the
// CRC. Returns 0, or -1 with a message in err (the model's m, v are then garbage).
static int read_state_tensors(GPT2 *model, const char *path, const int header[256], char *err, size_t errlen) {
    size_t n = model->num_parameters;
    if (get_u64(header, ST_NUM_PARAMS_LO) != n) {
        snprintf(err, errlen, "%s: holds %llu parameters, the model has %zu", path,
                 (unsigned long long)get_u64(header, ST_NUM_PARAMS_LO), n);
        return -1;
    }
    FILE *f = fopen(path, "rb");
    if (f == NULL) { snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno)); return -1; }
    long size = file_size(f);
    long expected = (long)(256 * sizeof(int) + 2 * n * sizeof(float));
    if (size != expected) {
        fclose(f);
        snprintf(err, errlen, "%s: %ld bytes, expected %ld (truncated or corrupt)", path, size, expected);
        return -1;
    }
    fseek(f, 256 * sizeof(int), SEEK_SET);
    int ok = 1;
    for (int i = 0; i < NUM_PARAMETER_TENSORS && ok; i++) {
        ok = fread(((float **)&model->m)[i], sizeof(float), model->param_sizes[i], f) == model->param_sizes[i];
    }
    for (int i = 0; i < NUM_PARAMETER_TENSORS && ok; i++) {
        ok = fread(((float **)&model->v)[i], sizeof(float), model->param_sizes[i], f) == model->param_sizes[i];
    }
    fclose(f);
    if (!ok) { snprintf(err, errlen, "%s: read failed (corrupt)", path); return -1; }
    int h[256];
    memcpy(h, header, sizeof(h));
    uint32_t stored;
    memcpy(&stored, &h[ST_CRC], sizeof(stored));
    h[ST_CRC] = 0;
    uLong crc = crc32(0L, (const Bytef *)h, sizeof(h));
    crc = crc32_combine(crc, params_crc32(model, (float *const *)&model->m), (z_off_t)(n * sizeof(float)));
    crc = crc32_combine(crc, params_crc32(model, (float *const *)&model->v), (z_off_t)(n * sizeof(float)));
    if ((uint32_t)crc != stored) {
        snprintf(err, errlen, "%s: CRC mismatch, the file is corrupt", path);
        return -1;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// finding checkpoints

// The steps S for which DIR/state_S.bin exists, newest first. Returns the count.
static int list_checkpoint_steps(const char *dir, int *steps, int max) {
    DIR *d = opendir(dir);
    if (d == NULL) { return 0; }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < max) {
        int step;
        char tail;
        if (sscanf(e->d_name, "state_%d.bi%c", &step, &tail) == 2 && tail == 'n' && step >= 0 &&
            strlen(e->d_name) == (size_t)snprintf(NULL, 0, "state_%08d.bin", step)) {
            steps[n++] = step;
        }
    }
    closedir(d);
    for (int i = 1; i < n; i++) {  // insertion sort, descending
        int v = steps[i], j = i - 1;
        while (j >= 0 && steps[j] < v) { steps[j + 1] = steps[j]; j--; }
        steps[j + 1] = v;
    }
    return n;
}

static void checkpoint_paths(const char *dir, int step, char *model_path, char *state_path) {
    snprintf(model_path, PATH_MAX, "%s/model_%08d.bin", dir, step);
    snprintf(state_path, PATH_MAX, "%s/state_%08d.bin", dir, step);
}

// Deletes all but the newest `keep` checkpoints (the state first: a model
// file without its state is not a checkpoint).
static void prune_checkpoints(const char *dir, int keep) {
    enum { MAX_CHECKPOINTS = 100000 };
    static int steps[MAX_CHECKPOINTS];
    int n = list_checkpoint_steps(dir, steps, MAX_CHECKPOINTS);
    for (int i = keep; i < n; i++) {
        char model_path[PATH_MAX], state_path[PATH_MAX];
        checkpoint_paths(dir, steps[i], model_path, state_path);
        unlink(state_path);
        unlink(model_path);
    }
}
