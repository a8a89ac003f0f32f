/*
Batches of tokens from llm.c's token shards.

A shard is a 256 x int32 header (magic 20240520, version 1, header[2] = the
number of tokens) followed by that many uint16 tokens. A glob pattern names
the shards. A shard of n tokens holds (n - 1) / (B*T) batch slots: slot k is
the B*T+1 tokens from k*B*T on; inputs are the first B*T, targets the same
shifted by one. Batches never cross shards; a tail too short is skipped.

An epoch visits every slot of every shard once. With shuffling, each epoch
visits the shards in its own random order and the slots of each shard in a
random order. The orders are a pure function of (seed, epoch, shard), so the
position (epoch, shard_pos, slot_pos) is all a checkpoint needs to resume.
Without shuffling, shards go in sorted order and slots front to back.
*/
#pragma once

#include <fcntl.h>
#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "rand.h"
#include "utils.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_BYTES (256 * sizeof(int))

typedef struct {
    int epoch;        // passes over the data begun before this one
    int shard_pos;    // index into the epoch's shard order
    size_t slot_pos;  // index into the shard's slot order of the next batch
} DataPosition;

// What identifies a shard's file and its contents: a shard truncated, rewritten or
// replaced while a run reads it must stop the run, not feed it other tokens.
typedef struct {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
} ShardId;

static ShardId shard_id_of(const struct stat *st) {
    ShardId id = {st->st_dev, st->st_ino, st->st_size, st->st_mtim};
    return id;
}

// Names what differs between a shard's file now and when it was checked, or NULL.
static const char *shard_id_change(const ShardId *was, const ShardId *now) {
    if (was->dev != now->dev || was->ino != now->ino) { return "replaced by another file"; }
    if (was->size != now->size) { return now->size < was->size ? "truncated" : "grown"; }
    if (was->mtime.tv_sec != now->mtime.tv_sec || was->mtime.tv_nsec != now->mtime.tv_nsec) { return "rewritten"; }
    return NULL;
}

typedef struct {
    int B, T;
    int vocab_size;           // tokens must be below this
    int shuffle;
    uint64_t seed;
    int num_shards;
    char **shard_paths;       // sorted
    size_t *shard_slots;      // batch slots in each shard
    size_t batches_per_epoch; // sum of shard_slots
    DataPosition pos;
    size_t *shard_order;      // (num_shards) this epoch's order of the shards
    size_t *slot_order;       // (largest shard_slots) the current shard's order of slots
    int slot_order_shard;     // the shard slot_order was made for, -1 for none yet
    ShardId *shard_ids;       // (num_shards) each shard's file as checked by init
    int fd;                   // the open shard (pread: no stdio buffer to allocate per batch)
    int fd_shard;             // which shard fd is, -1 for none
    uint16_t *buffer;         // (B*T + 1) tokens as read
    int *inputs;              // (B, T)
    int *targets;             // (B, T)
} DataLoader;

// Fisher-Yates with an RNG seeded from (seed, epoch, salt): the same inputs give the same order.
static void shuffle_order(size_t *order, size_t n, uint64_t seed, int epoch, uint64_t salt) {
    uint64_t rng = random_seed_state(seed ^ ((uint64_t)epoch * 0x9E3779B97F4A7C15ull) ^ (salt * 0xD1B54A32D192ED03ull));
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(((uint64_t)random_u32(&rng) << 32 | random_u32(&rng)) % i);
        size_t t = order[i - 1]; order[i - 1] = order[j]; order[j] = t;
    }
}

static void make_shard_order(DataLoader *loader) {
    size_t n = (size_t)loader->num_shards;
    for (size_t i = 0; i < n; i++) { loader->shard_order[i] = i; }
    if (loader->shuffle) { shuffle_order(loader->shard_order, n, loader->seed, loader->pos.epoch, 0); }
}

static void make_slot_order(DataLoader *loader, int shard) {
    size_t n = loader->shard_slots[shard];
    for (size_t i = 0; i < n; i++) { loader->slot_order[i] = i; }
    if (loader->shuffle) { shuffle_order(loader->slot_order, n, loader->seed, loader->pos.epoch, 1 + (uint64_t)shard); }
    loader->slot_order_shard = shard;
}

static void dataloader_free(DataLoader *loader);

// Opens every shard matching pattern and checks its header and size. `flag`
// names the command-line flag for the error when nothing matches. Returns 0, or
// -1 with a one-line message in err (the loader then holds nothing).
static int dataloader_try_init(DataLoader *loader, const char *pattern, const char *flag, int B, int T,
                               int vocab_size, int shuffle, uint64_t seed, char *err, size_t errlen) {
    memset(loader, 0, sizeof(*loader));
    loader->B = B;
    loader->T = T;
    loader->vocab_size = vocab_size;
    loader->shuffle = shuffle;
    loader->seed = seed;
    loader->fd = -1;
    loader->fd_shard = -1;
    loader->slot_order_shard = -1;
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) {
        if (rc == 0) { globfree(&g); }
        snprintf(err, errlen, "%s %s: no files match", flag, pattern);
        return -1;
    }
    if (rc != 0) { snprintf(err, errlen, "%s %s: glob failed", flag, pattern); return -1; }
    loader->shard_paths = calloc(g.gl_pathc, sizeof(char *));
    loader->shard_slots = calloc(g.gl_pathc, sizeof(size_t));
    loader->shard_ids = calloc(g.gl_pathc, sizeof(ShardId));
    if (loader->shard_paths == NULL || loader->shard_slots == NULL || loader->shard_ids == NULL) {
        snprintf(err, errlen, "%s %s: out of memory for %zu shards", flag, pattern, g.gl_pathc);
        goto fail;
    }
    size_t batch_tokens = (size_t)B * T, max_slots = 0;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const char *path = g.gl_pathv[i];
        loader->shard_paths[i] = strdup(path);
        loader->num_shards = (int)i + 1;
        FILE *f = fopen(path, "rb");
        if (f == NULL) { snprintf(err, errlen, "%s: cannot open for reading: %s", path, strerror(errno)); goto fail; }
        int header[256];
        struct stat st;
        if (read_header_checked(f, path, header, SHARD_MAGIC, SHARD_VERSION, "token shard", err, errlen) != 0) {
            fclose(f);
            goto fail;
        }
        if (fstat(fileno(f), &st) != 0) {
            snprintf(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
            fclose(f);
            goto fail;
        }
        fclose(f);
        if (header[2] < 0) { snprintf(err, errlen, "%s: bad token count %d in the header", path, header[2]); goto fail; }
        long expected = (long)SHARD_HEADER_BYTES + 2L * header[2];
        long size = (long)st.st_size;
        if (size < expected) {
            snprintf(err, errlen, "%s: truncated token shard (%ld bytes, its header promises %d tokens = %ld bytes)",
                     path, size, header[2], expected);
            goto fail;
        }
        if (size > expected) {
            snprintf(err, errlen, "%s: token shard longer than its header says (%ld bytes, expected %ld)", path,
                     size, expected);
            goto fail;
        }
        loader->shard_ids[i] = shard_id_of(&st);
        size_t tokens = (size_t)header[2];
        loader->shard_slots[i] = tokens > batch_tokens ? (tokens - 1) / batch_tokens : 0;
        loader->batches_per_epoch += loader->shard_slots[i];
        if (loader->shard_slots[i] > max_slots) { max_slots = loader->shard_slots[i]; }
    }
    if (loader->batches_per_epoch == 0) {
        snprintf(err, errlen, "%s %s: the shards hold no batch of B*T+1 = %zu tokens", flag, pattern, batch_tokens + 1);
        goto fail;
    }
    globfree(&g);
    loader->shard_order = malloc_or_die((size_t)loader->num_shards * sizeof(size_t), "shard order");
    loader->slot_order = malloc_or_die(max_slots * sizeof(size_t), "slot order");
    loader->buffer = malloc_or_die((batch_tokens + 1) * sizeof(uint16_t), "token buffer");
    loader->inputs = malloc_or_die(batch_tokens * sizeof(int), "token buffer");
    loader->targets = malloc_or_die(batch_tokens * sizeof(int), "token buffer");
    make_shard_order(loader);
    return 0;
fail:
    globfree(&g);
    dataloader_free(loader);
    return -1;
}

static void dataloader_init(DataLoader *loader, const char *pattern, const char *flag, int B, int T,
                            int vocab_size, int shuffle, uint64_t seed) {
    char err[4096 + 256];
    if (dataloader_try_init(loader, pattern, flag, B, T, vocab_size, shuffle, seed, err, sizeof(err)) != 0) {
        die("%s", err);
    }
}

// Continues from a position saved by a checkpoint (or the start: all zero).
static void dataloader_seek(DataLoader *loader, DataPosition pos) {
    if (pos.epoch < 0 || pos.shard_pos < 0 || pos.shard_pos > loader->num_shards) {
        die("data position (epoch %d, shard %d) does not fit the %d shards", pos.epoch, pos.shard_pos,
            loader->num_shards);
    }
    loader->pos = pos;
    loader->slot_order_shard = -1;
    make_shard_order(loader);
}

static void dataloader_reset(DataLoader *loader) {
    DataPosition start = {0, 0, 0};
    dataloader_seek(loader, start);
}

// Loads the next batch into loader->inputs and loader->targets. Returns 1 if
// this batch began a new epoch (after the first), else 0; or -1 with a one-line
// message in err when the shard cannot be read, has changed since init (its
// file replaced, truncated or rewritten) or holds a token outside the vocabulary.
static int dataloader_try_next_batch(DataLoader *loader, char *err, size_t errlen) {
    const size_t n = (size_t)loader->B * loader->T;
    int new_epoch = 0;
    DataPosition *pos = &loader->pos;
    // past the end of the current shard: on to the next one with batches, or the next epoch
    while (pos->shard_pos == loader->num_shards ||
           pos->slot_pos >= loader->shard_slots[loader->shard_order[pos->shard_pos]]) {
        pos->slot_pos = 0;
        pos->shard_pos++;
        if (pos->shard_pos >= loader->num_shards) {
            pos->shard_pos = 0;
            pos->epoch++;
            new_epoch = 1;
            make_shard_order(loader);
        }
    }
    const int shard = (int)loader->shard_order[pos->shard_pos];
    if (loader->slot_order_shard != shard) { make_slot_order(loader, shard); }
    const size_t offset = loader->slot_order[pos->slot_pos] * n;
    const char *path = loader->shard_paths[shard];
    if (loader->fd_shard != shard) {
        if (loader->fd >= 0) { close(loader->fd); }
        loader->fd_shard = -1;
        loader->fd = open(path, O_RDONLY);
        if (loader->fd < 0) { snprintf(err, errlen, "%s: cannot open for reading: %s", path, strerror(errno)); return -1; }
        loader->fd_shard = shard;
    }
    // Is it still the file init checked? fstat sees the open file truncated or rewritten
    // in place; stat of the path sees it replaced (renamed over, or deleted and recreated).
    // Two system calls per batch: nothing beside a training step.
    struct stat st;
    if (fstat(loader->fd, &st) != 0) { snprintf(err, errlen, "%s: cannot stat: %s", path, strerror(errno)); return -1; }
    ShardId now = shard_id_of(&st);
    const char *change = shard_id_change(&loader->shard_ids[shard], &now);
    if (change == NULL) {
        if (stat(path, &st) != 0) { change = "deleted"; }
        else { now = shard_id_of(&st); change = shard_id_change(&loader->shard_ids[shard], &now); }
    }
    if (change != NULL) {
        snprintf(err, errlen, "%s: token shard %s while this run reads it", path, change);
        return -1;
    }
    size_t want = (n + 1) * sizeof(uint16_t), got = 0;
    off_t at = (off_t)(SHARD_HEADER_BYTES + offset * sizeof(uint16_t));
    while (got < want) {
        ssize_t r = pread(loader->fd, (char *)loader->buffer + got, want - got, at + (off_t)got);
        if (r < 0 && errno == EINTR) { continue; }
        if (r <= 0) {
            snprintf(err, errlen, "%s: read failed (%s)", path, r < 0 ? strerror(errno) : "file shrank");
            return -1;
        }
        got += (size_t)r;
    }
    for (size_t i = 0; i < n + 1; i++) {
        if (loader->buffer[i] >= loader->vocab_size) {
            snprintf(err, errlen, "%s: token %u at index %zu is outside the vocabulary (0..%d)", path,
                     loader->buffer[i], offset + i, loader->vocab_size - 1);
            return -1;
        }
    }
    for (size_t i = 0; i < n; i++) {
        loader->inputs[i] = loader->buffer[i];
        loader->targets[i] = loader->buffer[i + 1];
    }
    pos->slot_pos++;
    return new_epoch;
}

static int dataloader_next_batch(DataLoader *loader) {
    char err[4096 + 256];
    int rc = dataloader_try_next_batch(loader, err, sizeof(err));
    if (rc < 0) { die("%s", err); }
    return rc;
}

static void dataloader_free(DataLoader *loader) {
    if (loader->fd >= 0) { close(loader->fd); }
    for (int i = 0; i < loader->num_shards && loader->shard_paths != NULL; i++) { free(loader->shard_paths[i]); }
    free(loader->shard_paths);
    free(loader->shard_slots);
    free(loader->shard_ids);
    free(loader->shard_order);
    free(loader->slot_order);
    free(loader->buffer);
    free(loader->inputs);
    free(loader->targets);
    memset(loader, 0, sizeof(*loader));
    loader->fd = -1;
}
