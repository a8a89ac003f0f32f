/*
prepare_data's reading of one text input: a file (plain or gzip-compressed, read
transparently by zlib) or "-" for stdin, streamed in blocks and encoded with the
GPT-2 BPE (bpe.h), so that memory stays bounded whatever the input size.

A document starts with the EOT token. With split_blank_lines each "\n\n" also
ends a document (llm.c's Tiny Shakespeare sections). The tokens go to a sink in
order; the concatenation is exactly what encoding each whole document at once
gives (blocks are cut at bpe_is_split_point() places only).
*/
#pragma once

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "bpe.h"
#include "utils.h"

#define MAX_CARRY_BYTES (64u << 20)  // text without any split point longer than this is cut

// Where the tokens go: write() gets every token in order (the EOT of each document
// included); document() is called when a document begins, block() after each block
// read (bytes: its size). document and block may be NULL.
typedef struct {
    void (*write)(void *ctx, const uint32_t *tokens, size_t n);
    void (*document)(void *ctx);
    void (*block)(void *ctx, size_t bytes);
    void *ctx;
} TokenSink;

// The encoder's state, reused across inputs: n_threads caches and token vectors,
// a text buffer of block_bytes per thread plus the unencoded carry.
typedef struct {
    const BPETokenizer *tok;
    int n_threads;
    BPECache *caches;
    TokenVec *parts;
    TokenVec tokens;
    size_t step;  // bytes read per block
    uint8_t *buf;
    size_t cap;
    int split_blank_lines;
} TextEncoder;

static void text_encoder_init(TextEncoder *e, const BPETokenizer *tok, int n_threads, size_t block_bytes,
                              int split_blank_lines) {
    memset(e, 0, sizeof(*e));
    e->tok = tok;
    e->n_threads = n_threads;
    e->caches = malloc_or_die((size_t)n_threads * sizeof(BPECache), "caches");
    e->parts = calloc((size_t)n_threads, sizeof(TokenVec));
    if (e->parts == NULL) { die("out of memory"); }
    for (int k = 0; k < n_threads; k++) { bpe_cache_init(&e->caches[k]); }
    if (block_bytes < bpe_parallel_min_bytes) { bpe_parallel_min_bytes = block_bytes; }
    e->step = block_bytes * (size_t)n_threads;
    e->cap = e->step + 1024;
    e->buf = malloc_or_die(e->cap, "text buffer");
    e->split_blank_lines = split_blank_lines;
}

static void text_encoder_free(TextEncoder *e) {
    for (int k = 0; k < e->n_threads; k++) { bpe_cache_free(&e->caches[k]); tokenvec_free(&e->parts[k]); }
    free(e->caches);
    free(e->parts);
    free(e->buf);
    tokenvec_free(&e->tokens);
    memset(e, 0, sizeof(*e));
}

// Reads up to n bytes into buf: the count (0 only at the end of the input), or -1
// with a message in err.
static long text_read_some(gzFile gz, const char *path, uint8_t *buf, size_t n, char *err, size_t errlen) {
    if (n > (1u << 30)) { n = 1u << 30; }
    int got = gzread(gz, buf, (unsigned)n);
    int zerr;
    const char *msg = gzerror(gz, &zerr);
    if (got < 0 || (zerr != Z_OK && zerr != Z_BUF_ERROR)) {
        snprintf(err, errlen, "%s: read error: %s", path, zerr == Z_ERRNO ? strerror(errno) : msg);
        return -1;
    }
    if (got == 0 && zerr == Z_BUF_ERROR) { snprintf(err, errlen, "%s: truncated gzip stream", path); return -1; }
    return got;
}

static void text_emit(TextEncoder *e, const TokenSink *sink, const uint8_t *text, size_t n) {
    e->tokens.len = 0;
    bpe_encode_parallel(e->tok, e->caches, e->parts, e->n_threads, text, n, &e->tokens);
    sink->write(sink->ctx, e->tokens.data, e->tokens.len);
}

static void text_begin_document(const TextEncoder *e, const TokenSink *sink) {
    uint32_t eot = (uint32_t)e->tok->eot_token;
    sink->write(sink->ctx, &eot, 1);
    if (sink->document != NULL) { sink->document(sink->ctx); }
}

// Encodes the input at path ("-": stdin) into sink. Returns its size in bytes
// (after decompression), or -1 with a one-line message in err.
static long text_input_try_encode(TextEncoder *e, const char *path, const TokenSink *sink, char *err, size_t errlen) {
    gzFile gz = strcmp(path, "-") == 0 ? gzdopen(dup(0), "rb") : gzopen(path, "rb");
    if (gz == NULL) {
        snprintf(err, errlen, "%s: cannot open for reading: %s", path, errno ? strerror(errno) : "out of memory");
        return -1;
    }
    gzbuffer(gz, 1 << 18);
    size_t have = 0;   // bytes in buf
    size_t scan = 0;   // where to look for the next "\n\n" (split_blank_lines)
    long file_bytes = 0;
    int warned = 0;
    text_begin_document(e, sink);
    for (;;) {
        if (e->cap - have < e->step) {  // only when no split point was found: grow up to MAX_CARRY_BYTES
            e->cap = have + e->step;
            uint8_t *grown = realloc(e->buf, e->cap);
            if (grown == NULL) { die("out of memory growing the text buffer to %zu bytes", e->cap); }
            e->buf = grown;
        }
        uint8_t *buf = e->buf;
        long got = text_read_some(gz, path, buf + have, e->step, err, errlen);
        if (got < 0) { gzclose(gz); return -1; }
        have += (size_t)got;
        file_bytes += got;
        size_t start = 0;  // buf[0:start) is encoded
        if (e->split_blank_lines) {
            // Each "\n\n" ends a document (leftmost first, not overlapping, as
            // Python's str.split finds them); the next one starts with EOT.
            for (;;) {
                const uint8_t *nl = scan < have ? memchr(buf + scan, '\n', have - scan) : NULL;
                if (nl == NULL) { break; }
                size_t at = (size_t)(nl - buf);
                if (at + 1 >= have) { break; }
                if (buf[at + 1] != '\n') { scan = at + 1; continue; }
                size_t end = at + 2;
                text_emit(e, sink, buf + start, end - start);
                text_begin_document(e, sink);
                start = scan = end;
            }
        }
        size_t cut;  // encode buf[start:cut) now, keep the rest for the next block
        if (got == 0) {
            cut = have;  // the end of the document
        } else {
            cut = start + bpe_last_split_point(buf + start, have - start);
            if (cut == start && have - start >= MAX_CARRY_BYTES) {
                // One piece longer than MAX_CARRY_BYTES (say, a huge run of letters):
                // cut before the last character start to keep memory bounded, and say so.
                cut = have - 1;
                while (cut > start && (buf[cut] & 0xC0) == 0x80) { cut--; }
                if (cut == start) { cut = have; }
                if (!warned) {
                    fprintf(stderr, "warning: %s: no piece boundary in %u MB of text before byte %ld: cut there, so "
                            "tokens next to the cut may differ from GPT-2's\n", path, MAX_CARRY_BYTES >> 20, file_bytes);
                    warned = 1;
                }
            }
        }
        if (cut > start) { text_emit(e, sink, buf + start, cut - start); }
        memmove(buf, buf + cut, have - cut);
        have -= cut;
        // A "\n\n" can only straddle the carry's last byte and the next block's first.
        scan = have > 0 ? have - 1 : 0;
        if (sink->block != NULL) { sink->block(sink->ctx, (size_t)got); }
        if (got == 0) { break; }
    }
    gzclose(gz);
    return file_bytes;
}
