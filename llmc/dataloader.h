/*
Batches of tokens from llm.c's token shards.

A shard is a 256 x int32 header (magic 20240520, version 1, header[2] = the
number of tokens) followed by that many uint16 tokens. A glob pattern names
the shards; they are read in sorted order. A batch is B*T+1 consecutive
tokens of one shard: inputs are the first B*T, targets the same shifted by
one. Batches do not cross shard boundaries; the tail of a shard too short for
a batch is skipped, as in llm.c.
*/
#pragma once

#include <fcntl.h>
#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "utils.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_BYTES (256 * sizeof(int))

typedef struct {
    int B, T;
    int vocab_size;           // tokens must be below this
    int num_shards;
    char **shard_paths;       // sorted
    size_t *shard_tokens;     // tokens in each shard
    size_t batches_per_epoch; // sum over shards of the batches each holds
    // position of the next batch
    int shard;                // index into shard_paths
    size_t offset;            // token index within the shard
    int epoch;                // completed passes over all shards
    int fd;                   // the open shard (pread: no stdio buffer to allocate per batch)
    int fd_shard;             // which shard fd is, -1 for none
    // buffers
    uint16_t *buffer;         // (B*T + 1) tokens as read
    int *inputs;              // (B, T)
    int *targets;             // (B, T)
} DataLoader;

static size_t shard_batches(size_t tokens, int B, int T) {
    size_t need = (size_t)B * T;
    return tokens >= need + 1 ? (tokens - 1) / need : 0;
}

// Opens every shard matching pattern and checks its header and size. `flag`
// names the command-line flag for the error when nothing matches.
static void dataloader_init(DataLoader *loader, const char *pattern, const char *flag, int B, int T,
                            int vocab_size) {
    memset(loader, 0, sizeof(*loader));
    loader->B = B;
    loader->T = T;
    loader->vocab_size = vocab_size;
    loader->fd = -1;
    loader->fd_shard = -1;
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) { die("%s %s: no files match", flag, pattern); }
    if (rc != 0) { die("%s %s: glob failed", flag, pattern); }
    loader->num_shards = (int)g.gl_pathc;
    loader->shard_paths = malloc_or_die(g.gl_pathc * sizeof(char *), "shard list");
    loader->shard_tokens = malloc_or_die(g.gl_pathc * sizeof(size_t), "shard list");
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const char *path = g.gl_pathv[i];
        loader->shard_paths[i] = strdup(path);
        FILE *f = fopen_or_die(path, "rb");
        int header[256];
        read_header_or_die(f, path, header, SHARD_MAGIC, SHARD_VERSION, "token shard");
        if (header[2] < 0) { die("%s: bad token count %d in the header", path, header[2]); }
        long expected = (long)SHARD_HEADER_BYTES + 2L * header[2];
        long size = file_size_or_die(f, path);
        if (size < expected) {
            die("%s: truncated token shard (%ld bytes, its header promises %d tokens = %ld bytes)", path,
                size, header[2], expected);
        }
        if (size > expected) {
            die("%s: token shard longer than its header says (%ld bytes, expected %ld)", path, size, expected);
        }
        fclose(f);
        loader->shard_tokens[i] = (size_t)header[2];
        loader->batches_per_epoch += shard_batches(loader->shard_tokens[i], B, T);
    }
    globfree(&g);
    if (loader->batches_per_epoch == 0) {
        die("%s %s: the shards hold no batch of B*T+1 = %d tokens", flag, pattern, B * T + 1);
    }
    size_t n = (size_t)B * T;
    loader->buffer = malloc_or_die((n + 1) * sizeof(uint16_t), "token buffer");
    loader->inputs = malloc_or_die(n * sizeof(int), "token buffer");
    loader->targets = malloc_or_die(n * sizeof(int), "token buffer");
}

// Back to the first batch of the first shard (used before every validation).
static void dataloader_reset(DataLoader *loader) {
    loader->shard = 0;
    loader->offset = 0;
    loader->epoch = 0;
}

// Loads the next batch into loader->inputs and loader->targets.
static void dataloader_next_batch(DataLoader *loader) {
    const size_t n = (size_t)loader->B * loader->T;
    // skip shards (and shard tails) too short for a batch
    while (loader->offset + n + 1 > loader->shard_tokens[loader->shard]) {
        loader->offset = 0;
        loader->shard++;
        if (loader->shard == loader->num_shards) {
            loader->shard = 0;
            loader->epoch++;
        }
    }
    const char *path = loader->shard_paths[loader->shard];
    if (loader->fd_shard != loader->shard) {
        if (loader->fd >= 0) { close(loader->fd); }
        loader->fd = open(path, O_RDONLY);
        if (loader->fd < 0) { die("%s: cannot open for reading: %s", path, strerror(errno)); }
        loader->fd_shard = loader->shard;
    }
    size_t want = (n + 1) * sizeof(uint16_t), got = 0;
    off_t at = (off_t)(SHARD_HEADER_BYTES + loader->offset * sizeof(uint16_t));
    while (got < want) {
        ssize_t r = pread(loader->fd, (char *)loader->buffer + got, want - got, at + (off_t)got);
        if (r < 0 && errno == EINTR) { continue; }
        if (r <= 0) { die("%s: read failed (%s)", path, r < 0 ? strerror(errno) : "file shrank"); }
        got += (size_t)r;
    }
    for (size_t i = 0; i < n + 1; i++) {
        if (loader->buffer[i] >= loader->vocab_size) {
            die("%s: token %u at index %zu is outside the vocabulary (0..%d)", path, loader->buffer[i],
                loader->offset + i, loader->vocab_size - 1);
        }
    }
    for (size_t i = 0; i < n; i++) {
        loader->inputs[i] = loader->buffer[i];
        loader->targets[i] = loader->buffer[i + 1];
    }
    loader->offset += n;
}

static void dataloader_free(DataLoader *loader) {
    if (loader->fd >= 0) { close(loader->fd); }
    for (int i = 0; i < loader->num_shards; i++) { free(loader->shard_paths[i]); }
    free(loader->shard_paths);
    free(loader->shard_tokens);
    free(loader->buffer);
    free(loader->inputs);
    free(loader->targets);
}
