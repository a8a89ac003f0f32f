/*
Decoding token ids to text with llm.c's tokenizer file (gpt2_tokenizer.bin).

Format: a 256 x int32 header (magic 20240328, version 2, vocab_size,
eot_token), then for each token one uint8 length followed by that many bytes.
The bytes of a token are raw (not UTF-8 safe on their own: GPT-2 tokens can
split a multi-byte character), so a sample is printed token by token.
*/
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "utils.h"

#define TOKENIZER_MAGIC 20240328
#define TOKENIZER_VERSION 2

typedef struct {
    uint32_t vocab_size;
    uint32_t eot_token;
    char **token_table;  // token_table[i] is a NUL-terminated copy of token i's bytes
    uint8_t *token_len;  // its length (a token may contain a NUL byte)
} Tokenizer;

static void tokenizer_free(Tokenizer *tok);

// Reads the tokenizer file at path. Returns 0, or -1 with a one-line message in
// err (and tok left empty).
static int tokenizer_try_init(Tokenizer *tok, const char *path, char *err, size_t errlen) {
    memset(tok, 0, sizeof(*tok));
    FILE *f = fopen(path, "rb");
    if (f == NULL) { snprintf(err, errlen, "%s: cannot open for reading: %s", path, strerror(errno)); return -1; }
    int header[256];
    if (read_header_checked(f, path, header, TOKENIZER_MAGIC, TOKENIZER_VERSION, "tokenizer", err, errlen) != 0) {
        goto fail;
    }
    if (header[2] <= 0 || header[2] > (1 << 24)) { snprintf(err, errlen, "%s: bad vocab_size %d", path, header[2]); goto fail; }
    if (header[3] < 0 || header[3] >= header[2]) {
        snprintf(err, errlen, "%s: eot_token %d outside the vocabulary of %d", path, header[3], header[2]);
        goto fail;
    }
    // each token takes at least 2 bytes: a vocab_size the file cannot hold is refused
    // before allocating for it
    long size = file_size(f);
    if (size < 0 || fseek(f, 256 * sizeof(int), SEEK_SET) != 0) {
        snprintf(err, errlen, "%s: cannot seek: %s", path, strerror(errno));
        goto fail;
    }
    if ((size - 256 * (long)sizeof(int)) / 2 < header[2]) {
        snprintf(err, errlen, "%s: truncated file (%ld bytes cannot hold %d tokens)", path, size, header[2]);
        goto fail;
    }
    tok->token_table = calloc((size_t)header[2], sizeof(char *));
    tok->token_len = malloc((size_t)header[2]);
    if (tok->token_table == NULL || tok->token_len == NULL) {
        snprintf(err, errlen, "%s: out of memory for %d tokens", path, header[2]);
        goto fail;
    }
    tok->vocab_size = (uint32_t)header[2];
    tok->eot_token = (uint32_t)header[3];
    for (uint32_t i = 0; i < tok->vocab_size; i++) {
        uint8_t len;
        char s[256];
        if (fread(&len, 1, 1, f) != 1 || (len > 0 && fread(s, 1, len, f) != len)) {
            snprintf(err, errlen, "%s: truncated file (token %u of %u)", path, i, tok->vocab_size);
            goto fail;
        }
        if (len == 0) { snprintf(err, errlen, "%s: token %u has length 0", path, i); goto fail; }
        tok->token_table[i] = malloc((size_t)len + 1);
        if (tok->token_table[i] == NULL) { snprintf(err, errlen, "%s: out of memory", path); goto fail; }
        memcpy(tok->token_table[i], s, len);
        tok->token_table[i][len] = '\0';
        tok->token_len[i] = len;
    }
    if (fgetc(f) != EOF) { snprintf(err, errlen, "%s: unexpected data after the last token", path); goto fail; }
    fclose(f);
    return 0;
fail:
    fclose(f);
    tokenizer_free(tok);
    return -1;
}

static void tokenizer_init(Tokenizer *tok, const char *path) {
    char err[4096 + 256];
    if (tokenizer_try_init(tok, path, err, sizeof(err)) != 0) { die("%s", err); }
}

// The bytes of token_id, or NULL for an id outside the vocabulary.
static const char *tokenizer_decode(const Tokenizer *tok, uint32_t token_id) {
    return token_id < tok->vocab_size ? tok->token_table[token_id] : NULL;
}

// Prints a token, replacing bytes that would garble a terminal (control bytes other
// than newline and tab) with nothing; multi-byte UTF-8 pieces pass through.
static void tokenizer_print(const Tokenizer *tok, uint32_t token_id, FILE *out) {
    const char *s = tokenizer_decode(tok, token_id);
    if (s == NULL) { return; }
    for (int i = 0; i < tok->token_len[token_id]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 || c == '\n' || c == '\t') { fputc(c, out); }
    }
}

static void tokenizer_free(Tokenizer *tok) {
    for (uint32_t i = 0; i < tok->vocab_size && tok->token_table != NULL; i++) { free(tok->token_table[i]); }
    free(tok->token_table);
    free(tok->token_len);
    memset(tok, 0, sizeof(*tok));
}
