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
#include "utils.h"

#define TOKENIZER_MAGIC 20240328
#define TOKENIZER_VERSION 2

typedef struct {
    uint32_t vocab_size;
    uint32_t eot_token;
    char **token_table;  // token_table[i] is a NUL-terminated copy of token i's bytes
    uint8_t *token_len;  // its length (a token may contain a NUL byte)
} Tokenizer;

static void tokenizer_init(Tokenizer *tok, const char *path) {
    FILE *f = fopen_or_die(path, "rb");
    int header[256];
    read_header_or_die(f, path, header, TOKENIZER_MAGIC, TOKENIZER_VERSION, "tokenizer");
    if (header[2] <= 0 || header[2] > (1 << 24)) { die("%s: bad vocab_size %d", path, header[2]); }
    if (header[3] < 0 || header[3] >= header[2]) {
        die("%s: eot_token %d outside the vocabulary of %d", path, header[3], header[2]);
    }
    tok->vocab_size = (uint32_t)header[2];
    tok->eot_token = (uint32_t)header[3];
    tok->token_table = malloc_or_die(tok->vocab_size * sizeof(char *), "tokenizer table");
    tok->token_len = malloc_or_die(tok->vocab_size, "tokenizer lengths");
    for (uint32_t i = 0; i < tok->vocab_size; i++) {
        uint8_t len;
        fread_or_die(&len, 1, 1, f, path);
        if (len == 0) { die("%s: token %u has length 0", path, i); }
        char *s = malloc_or_die((size_t)len + 1, "tokenizer entry");
        fread_or_die(s, 1, len, f, path);
        s[len] = '\0';
        tok->token_table[i] = s;
        tok->token_len[i] = len;
    }
    if (fgetc(f) != EOF) { die("%s: unexpected data after the last token", path); }
    fclose(f);
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
    for (uint32_t i = 0; i < tok->vocab_size; i++) { free(tok->token_table[i]); }
    free(tok->token_table);
    free(tok->token_len);
}
