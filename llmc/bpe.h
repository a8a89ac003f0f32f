/*
GPT-2 byte-level BPE encoding, exact, from the original encoder.json and vocab.bpe.

The steps are those of OpenAI's encoder.py (tiktoken's "gpt2" encoding behaves the same):
1. Pre-tokenization splits the text into pieces with the pattern
       's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
   under Unicode semantics: \p{L} and \p{N} are general categories and \s is the
   White_Space property (llmc/unicode_tables.h, generated from Unicode's data files).
   The pattern is hand-compiled in bpe_next_piece(); the comments there say which
   alternative each branch is.
2. Each piece's UTF-8 bytes become single-byte tokens, and merges from vocab.bpe are
   applied lowest rank first, every occurrence of the chosen pair left to right.
3. The merged tokens are looked up in encoder.json.

Where references differ: JavaScript's \s (used by GPT-2 encoders written in
JavaScript) is not White_Space: it counts U+FEFF as a space and not U+0085.
Here both follow White_Space (U+0085 is a space, U+FEFF a symbol), as Python's
regex module and tiktoken do; scripts/tests/test_tokenizer.sh checks that these two code
points are the only differences and pins their effect on small texts. Characters
assigned after the tables' Unicode version (see unicode_tables.h) count as
"other"; a reference built on a newer Unicode may call some of them letters.

Text is ordinary text: "<|endoftext|>" in the input is just characters. The EOT
token is inserted by the caller (prepare_data) between documents.

Invalid UTF-8: GPT-2 works on bytes, so any byte string can be encoded. A byte that
does not start a well-formed UTF-8 sequence (stray continuation bytes, overlong
forms, surrogates, values above U+10FFFF, truncated sequences) is a one-byte
character of the class "other", as U+FFFD would be. Its byte is kept, so
decode(encode(x)) == x for every byte string x.

Splitting for threads and streaming: bpe_is_split_point() finds places where a
piece always ends, whatever follows, so that encoding two parts separately gives
exactly the tokens of encoding the whole.

Thread safety: a BPETokenizer is read-only once loaded and can be shared; each
thread needs its own BPECache.
*/
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "utils.h"
#include "unicode_tables.h"

#define BPE_EOT_STRING "<|endoftext|>"

// ----------------------------------------------------------------------------
// small growable vector of token ids

typedef struct {
    uint32_t *data;
    size_t len;
    size_t cap;
} TokenVec;

static void tokenvec_reserve(TokenVec *v, size_t extra) {
    if (v->len + extra <= v->cap) { return; }
    size_t cap = v->cap ? v->cap : 1024;
    while (cap < v->len + extra) { cap *= 2; }
    uint32_t *data = realloc(v->data, cap * sizeof(uint32_t));
    if (data == NULL) { die("out of memory growing a token buffer to %zu tokens", cap); }
    v->data = data;
    v->cap = cap;
}

static inline void tokenvec_push(TokenVec *v, uint32_t token) {
    if (v->len == v->cap) { tokenvec_reserve(v, 1); }
    v->data[v->len++] = token;
}

static void tokenvec_free(TokenVec *v) {
    free(v->data);
    v->data = NULL;
    v->len = v->cap = 0;
}

// ----------------------------------------------------------------------------
// hashing

static inline uint64_t bpe_hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 29;
        p += 8; n -= 8;
    }
    // the tail assembled in a register: a variable-length memcpy into a stack word
    // would stall the load that follows it
    uint64_t w = 0;
    for (size_t k = 0; k < n; k++) { w |= (uint64_t)p[k] << (8 * k); }
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 31);
}

// ----------------------------------------------------------------------------
// the vocabulary

// A merge of two adjacent tokens: its rank (line number among the merges, lower
// merges first; UINT32_MAX when the pair does not merge) and the token it makes.
typedef struct {
    uint32_t rank;
    uint32_t result;
} BPEMerge;

#define BPE_NO_MERGE UINT32_MAX
#define BPE_MAX_VOCAB 65535  // token pairs are packed into 32 bits: (left << 16) | right

typedef struct {
    int vocab_size;
    int eot_token;             // id of "<|endoftext|>", or -1 when encoder.json lacks it
    uint8_t *token_bytes;      // bytes of token i: token_bytes[token_offset[i] .. token_offset[i+1])
    uint32_t *token_offset;    // vocab_size + 1 entries
    uint32_t byte_token[256];  // the token of each single byte
    int max_token_len;
    // bytes -> id, to resolve the tokens named in vocab.bpe
    uint32_t *lookup;          // open addressing, UINT32_MAX = empty
    size_t lookup_mask;
    // (left, right) -> rank: 8-byte slots (pair << 32 | rank, UINT64_MAX = empty) in
    // a table of 1 MB for GPT-2, small enough to stay in the L3 cache
    uint64_t *merge_slots;
    int merge_shift;           // 64 - log2(number of slots)
    uint32_t *merge_result;    // rank -> the token the merge makes
    uint32_t *merge_pair;      // rank -> (left << 16) | right
    int n_merges;
    // True when every merge comes after all merges that create its two parts (GPT-2's
    // vocab.bpe does). Then merging pairs in (rank, position) order with a heap gives
    // GPT-2's result, and long pieces can use it; otherwise every piece takes the
    // plain quadratic GPT-2 loop.
    int merges_ordered;
} BPETokenizer;

// Pieces with at least this many bytes are merged with the O(n log n) heap method
// instead of GPT-2's O(n^2) loop (same result; tests lower it to compare the two).
static size_t bpe_heap_min_bytes = 128;

// bpe_encode_parallel gives each thread at least this many bytes (threads cost more
// than they gain on less); prepare_data lowers it with small test blocks.
static size_t bpe_parallel_min_bytes = 65536;

// GPT-2's bytes_to_unicode(): printable bytes stand for themselves, the other 68
// bytes get code points 256, 257, ... in byte order. unicode_to_byte inverts it
// (-1 for code points outside the alphabet).
static void bpe_byte_alphabet(int byte_to_unicode[256], int unicode_to_byte[512]) {
    for (int i = 0; i < 512; i++) { unicode_to_byte[i] = -1; }
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        byte_to_unicode[b] = printable ? b : 256 + n++;
        unicode_to_byte[byte_to_unicode[b]] = b;
    }
}

// The whole file at path, NUL-terminated, or NULL with a message in err.
static char *bpe_read_file(const char *path, size_t *size_out, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) { snprintf(err, errlen, "%s: cannot open for reading: %s", path, strerror(errno)); return NULL; }
    long size = file_size(f);
    if (size < 0) {
        snprintf(err, errlen, "%s: cannot seek: %s", path, strerror(errno));
        fclose(f);
        return NULL;
    }
    char *buf = malloc_or_die((size_t)size + 1, path);
    if (size > 0 && fread(buf, 1, (size_t)size, f) != (size_t)size) {
        snprintf(err, errlen, "%s: read error: %s", path, ferror(f) ? strerror(errno) : "file shrank");
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    buf[size] = '\0';
    *size_out = (size_t)size;
    return buf;
}

// Error exits of the loaders below: the message goes to err.
#define BPE_FAIL_RETURN(value, ...) do { snprintf(err, errlen, __VA_ARGS__); return value; } while (0)
#define BPE_FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); goto fail; } while (0)

static size_t bpe_lookup_slot(const BPETokenizer *t, const uint8_t *bytes, size_t n) {
    size_t slot = bpe_hash_bytes(bytes, n) & t->lookup_mask;
    for (;;) {
        uint32_t id = t->lookup[slot];
        if (id == UINT32_MAX) { return slot; }
        uint32_t len = t->token_offset[id + 1] - t->token_offset[id];
        if (len == n && memcmp(t->token_bytes + t->token_offset[id], bytes, n) == 0) { return slot; }
        slot = (slot + 1) & t->lookup_mask;
    }
}

// Token id of a byte string, or -1.
static int bpe_token_of_bytes(const BPETokenizer *t, const uint8_t *bytes, size_t n) {
    uint32_t id = t->lookup[bpe_lookup_slot(t, bytes, n)];
    return id == UINT32_MAX ? -1 : (int)id;
}

static inline size_t bpe_merge_slot(const BPETokenizer *t, uint32_t pair) {
    return (size_t)(((uint64_t)pair * 0x9E3779B97F4A7C15ULL) >> t->merge_shift);  // Fibonacci hashing
}

static inline BPEMerge bpe_find_merge(const BPETokenizer *t, uint32_t left, uint32_t right) {
    uint32_t pair = (left << 16) | right;
    size_t mask = ((size_t)1 << (64 - t->merge_shift)) - 1;
    for (size_t slot = bpe_merge_slot(t, pair);; slot = (slot + 1) & mask) {
        uint64_t entry = t->merge_slots[slot];
        if ((uint32_t)(entry >> 32) == pair) {
            uint32_t rank = (uint32_t)entry;
            return (BPEMerge){ rank, t->merge_result[rank] };
        }
        if (entry == UINT64_MAX) { return (BPEMerge){ BPE_NO_MERGE, 0 }; }
    }
}

// Decodes one JSON string token's characters (escapes included) through the byte
// alphabet into out (capacity cap). Returns the byte count, or SIZE_MAX with a message
// naming the offset in err.
// *pos points after the opening quote and is left after the closing quote.
static size_t bpe_json_string(const char *json, size_t size, size_t *pos, const int unicode_to_byte[512],
                              uint8_t *out, size_t cap, const char *path, char *err, size_t errlen) {
    size_t i = *pos, n = 0, start = *pos - 1;
    for (;;) {
        if (i >= size) { BPE_FAIL_RETURN(SIZE_MAX, "%s: malformed JSON: string starting at byte %zu is not closed", path, start); }
        uint32_t cp;
        unsigned char c = (unsigned char)json[i];
        if (c == '"') { i++; break; }
        if (c == '\\') {
            if (i + 1 >= size) { BPE_FAIL_RETURN(SIZE_MAX, "%s: malformed JSON: unfinished escape at byte %zu", path, i); }
            char e = json[i + 1];
            i += 2;
            switch (e) {
                case '"': cp = '"'; break;
                case '\\': cp = '\\'; break;
                case '/': cp = '/'; break;
                case 'b': cp = '\b'; break;
                case 'f': cp = '\f'; break;
                case 'n': cp = '\n'; break;
                case 'r': cp = '\r'; break;
                case 't': cp = '\t'; break;
                case 'u': {
                    cp = 0;
                    for (int k = 0; k < 4; k++, i++) {
                        char h = i < size ? json[i] : 0;
                        int v = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                              : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
                        if (v < 0) { BPE_FAIL_RETURN(SIZE_MAX, "%s: malformed JSON: bad \\u escape at byte %zu", path, i); }
                        cp = cp * 16 + (uint32_t)v;
                    }
                    break;  // a surrogate is outside the byte alphabet and is rejected below
                }
                default:  // a control byte is shown as its code: the message stays one line
                    if ((unsigned char)e < 0x20 || (unsigned char)e >= 0x7f) {
                        BPE_FAIL_RETURN(SIZE_MAX, "%s: malformed JSON: unknown escape (backslash, byte 0x%02x) at byte %zu",
                                        path, (unsigned char)e, i - 2);
                    }
                    BPE_FAIL_RETURN(SIZE_MAX, "%s: malformed JSON: unknown escape '\\%c' at byte %zu", path, e, i - 2);
            }
        } else if (c < 0x20) {
            BPE_FAIL_RETURN(SIZE_MAX, "%s: malformed JSON: control byte 0x%02x inside a string at byte %zu", path, c, i);
        } else if (c < 0x80) {
            cp = c;
            i++;
        } else {
            // raw UTF-8: the alphabet only needs code points below 0x800 (two bytes)
            if ((c & 0xE0) == 0xC0 && i + 1 < size && ((unsigned char)json[i + 1] & 0xC0) == 0x80) {
                cp = ((uint32_t)(c & 0x1F) << 6) | ((unsigned char)json[i + 1] & 0x3F);
                i += 2;
            } else {
                BPE_FAIL_RETURN(SIZE_MAX, "%s: token at byte %zu has a character outside GPT-2's byte alphabet", path, start);
            }
        }
        if (cp >= 512 || unicode_to_byte[cp] < 0) {
            BPE_FAIL_RETURN(SIZE_MAX, "%s: token at byte %zu has character U+%04X, which is not in GPT-2's byte alphabet", path,
                start, cp);
        }
        if (n == cap) { BPE_FAIL_RETURN(SIZE_MAX, "%s: token at byte %zu is longer than %zu bytes", path, start, cap); }
        out[n++] = (uint8_t)unicode_to_byte[cp];
    }
    *pos = i;
    return n;
}

static size_t bpe_skip_ws(const char *s, size_t size, size_t i) {
    while (i < size && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) { i++; }
    return i;
}

// Reads encoder.json: one JSON object mapping each token (in the byte alphabet) to
// its id. Ids must be exactly 0 .. n-1.
// Returns 0, or -1 with a message in err.
static int bpe_load_encoder(BPETokenizer *t, const char *path, const int unicode_to_byte[512], char *err,
                            size_t errlen) {
    size_t size;
    uint32_t *len_by_id = NULL, *src_by_id = NULL;
    char *json = bpe_read_file(path, &size, err, errlen);
    if (json == NULL) { return -1; }
    // First pass collects (bytes, id) pairs in file order into a flat buffer.
    size_t bytes_cap = size + 16, bytes_len = 0, n = 0, n_cap = 1024;
    uint8_t *bytes = malloc_or_die(bytes_cap, "encoder.json tokens");
    uint32_t *start = malloc_or_die(n_cap * sizeof(uint32_t), "encoder.json index");
    long *ids = malloc_or_die(n_cap * sizeof(long), "encoder.json ids");
    size_t i = bpe_skip_ws(json, size, 0);
    if (i >= size || json[i] != '{') { BPE_FAIL("%s: malformed JSON: expected '{' at byte %zu", path, i); }
    i = bpe_skip_ws(json, size, i + 1);
    if (i < size && json[i] == '}') { BPE_FAIL("%s: the token table is empty", path); }
    for (;;) {
        if (i >= size || json[i] != '"') { BPE_FAIL("%s: malformed JSON: expected a string at byte %zu", path, i); }
        i++;
        if (n + 1 >= n_cap) {
            n_cap *= 2;
            uint32_t *start2 = realloc(start, n_cap * sizeof(uint32_t));
            if (start2 != NULL) { start = start2; }
            long *ids2 = realloc(ids, n_cap * sizeof(long));
            if (ids2 != NULL) { ids = ids2; }
            if (start2 == NULL || ids2 == NULL) { BPE_FAIL("out of memory reading %s", path); }
        }
        start[n] = (uint32_t)bytes_len;
        size_t len = bpe_json_string(json, size, &i, unicode_to_byte, bytes + bytes_len, bytes_cap - bytes_len, path,
                                     err, errlen);
        if (len == SIZE_MAX) { goto fail; }
        if (len == 0) { BPE_FAIL("%s: empty token before byte %zu", path, i); }
        if (len > 255) { BPE_FAIL("%s: token before byte %zu is %zu bytes long (at most 255 fit llm.c's format)", path, i, len); }
        bytes_len += len;
        i = bpe_skip_ws(json, size, i);
        if (i >= size || json[i] != ':') { BPE_FAIL("%s: malformed JSON: expected ':' at byte %zu", path, i); }
        i = bpe_skip_ws(json, size, i + 1);
        size_t digits = i;
        long id = 0;
        while (i < size && json[i] >= '0' && json[i] <= '9' && id < 100000000) { id = id * 10 + (json[i++] - '0'); }
        if (i == digits) { BPE_FAIL("%s: malformed JSON: expected a token id (a non-negative integer) at byte %zu", path, i); }
        if (i < size && (json[i] == '.' || json[i] == 'e' || json[i] == 'E' || (json[i] >= '0' && json[i] <= '9'))) {
            BPE_FAIL("%s: token id at byte %zu is not a small integer", path, digits);
        }
        ids[n++] = id;
        i = bpe_skip_ws(json, size, i);
        if (i < size && json[i] == ',') { i = bpe_skip_ws(json, size, i + 1); continue; }
        if (i < size && json[i] == '}') { break; }
        BPE_FAIL("%s: malformed JSON: expected ',' or '}' at byte %zu", path, i);
    }
    i = bpe_skip_ws(json, size, i + 1);
    if (i != size) { BPE_FAIL("%s: malformed JSON: unexpected data after the object at byte %zu", path, i); }
    start[n] = (uint32_t)bytes_len;

    if (n > BPE_MAX_VOCAB) { BPE_FAIL("%s: %zu tokens: at most %d are supported", path, n, BPE_MAX_VOCAB); }
    // Place tokens by id; every id in 0 .. n-1 exactly once.
    t->vocab_size = (int)n;
    len_by_id = calloc(n, sizeof(uint32_t));
    src_by_id = malloc_or_die(n * sizeof(uint32_t), "encoder.json index");
    if (len_by_id == NULL) { BPE_FAIL("out of memory reading %s", path); }
    for (size_t k = 0; k < n; k++) {
        if (ids[k] >= (long)n) { BPE_FAIL("%s: token id %ld is not below the number of tokens (%zu): ids must be 0..%zu", path, ids[k], n, n - 1); }
        if (len_by_id[ids[k]] != 0) { BPE_FAIL("%s: token id %ld is used twice", path, ids[k]); }
        len_by_id[ids[k]] = start[k + 1] - start[k];
        src_by_id[ids[k]] = start[k];
    }
    t->token_offset = malloc_or_die((n + 1) * sizeof(uint32_t), "token offsets");
    t->token_bytes = malloc_or_die(bytes_len, "token bytes");
    uint32_t off = 0;
    t->max_token_len = 0;
    for (size_t id = 0; id < n; id++) {
        t->token_offset[id] = off;
        memcpy(t->token_bytes + off, bytes + src_by_id[id], len_by_id[id]);
        off += len_by_id[id];
        if ((int)len_by_id[id] > t->max_token_len) { t->max_token_len = (int)len_by_id[id]; }
    }
    t->token_offset[n] = off;
    free(len_by_id); free(src_by_id); free(bytes); free(start); free(ids); free(json);
    len_by_id = src_by_id = start = NULL; bytes = NULL; ids = NULL; json = NULL;

    // bytes -> id
    size_t slots = 1;
    while (slots < 2 * n) { slots *= 2; }
    t->lookup = malloc_or_die(slots * sizeof(uint32_t), "token lookup");
    memset(t->lookup, 0xFF, slots * sizeof(uint32_t));
    t->lookup_mask = slots - 1;
    for (size_t id = 0; id < n; id++) {
        const uint8_t *b = t->token_bytes + t->token_offset[id];
        size_t len = t->token_offset[id + 1] - t->token_offset[id];
        size_t slot = bpe_lookup_slot(t, b, len);
        if (t->lookup[slot] != UINT32_MAX) {
            BPE_FAIL("%s: tokens %u and %zu are the same string", path, t->lookup[slot], id);
        }
        t->lookup[slot] = (uint32_t)id;
    }
    for (int b = 0; b < 256; b++) {
        uint8_t byte = (uint8_t)b;
        int id = bpe_token_of_bytes(t, &byte, 1);
        if (id < 0) { BPE_FAIL("%s: no token for the single byte 0x%02x (GPT-2 has one for each of the 256 bytes)", path, b); }
        t->byte_token[b] = (uint32_t)id;
    }
    t->eot_token = bpe_token_of_bytes(t, (const uint8_t *)BPE_EOT_STRING, strlen(BPE_EOT_STRING));
    return 0;
fail:
    free(len_by_id); free(src_by_id); free(bytes); free(start); free(ids); free(json);
    return -1;
}

// Reads vocab.bpe: an optional "#version" line, then one merge "A B" per line,
// highest priority first. A, B and AB must all be tokens of encoder.json.
// Returns 0, or -1 with a message in err.
static int bpe_load_merges(BPETokenizer *t, const char *path, const int unicode_to_byte[512], char *err,
                           size_t errlen) {
    size_t size;
    char *text = bpe_read_file(path, &size, err, errlen);
    if (text == NULL) { return -1; }
    // Each token pair merges at most once and there are fewer than 2^32 pairs; a
    // merge line has at least 4 bytes, so size/4 bounds the count.
    size_t max_merges = size / 4 + 16, slots = 1;
    int log2_slots = 0;
    while (slots < 2 * max_merges) { slots *= 2; log2_slots++; }
    t->merge_slots = malloc_or_die(slots * sizeof(uint64_t), "merge table");
    memset(t->merge_slots, 0xFF, slots * sizeof(uint64_t));
    t->merge_shift = 64 - log2_slots;
    t->merge_result = malloc_or_die(max_merges * sizeof(uint32_t), "merge table");
    t->merge_pair = malloc_or_die(max_merges * sizeof(uint32_t), "merge table");
    t->n_merges = 0;
    // the highest rank of a merge that creates each token, -1 if none
    int32_t *created_rank = malloc_or_die((size_t)t->vocab_size * sizeof(int32_t), "merge ranks");
    for (int k = 0; k < t->vocab_size; k++) { created_rank[k] = -1; }
    t->merges_ordered = 1;

    uint8_t part[2][256], joined[512];
    size_t line_no = 0, i = 0;
    while (i < size) {
        size_t end = i;
        while (end < size && text[end] != '\n') { end++; }
        line_no++;
        size_t line_start = i;
        i = end + 1;
        if (line_no == 1 && end - line_start >= 8 && memcmp(text + line_start, "#version", 8) == 0) { continue; }
        // split the line into whitespace-separated fields, as Python's str.split()
        size_t p = line_start, n_fields = 0, part_len[2] = {0, 0}, field_at[2] = {0, 0}, field_len[2] = {0, 0};
        for (;;) {
            while (p < end && (text[p] == ' ' || text[p] == '\t' || text[p] == '\r')) { p++; }
            if (p == end) { break; }
            size_t q = p;
            while (q < end && text[q] != ' ' && text[q] != '\t' && text[q] != '\r') { q++; }
            if (n_fields < 2) {
                field_at[n_fields] = p;
                field_len[n_fields] = q - p;
                // decode the field's UTF-8 characters through the byte alphabet
                size_t len = 0;
                for (size_t r = p; r < q;) {
                    unsigned char c = (unsigned char)text[r];
                    uint32_t cp;
                    if (c < 0x80) { cp = c; r++; }
                    else if ((c & 0xE0) == 0xC0 && r + 1 < q && ((unsigned char)text[r + 1] & 0xC0) == 0x80) {
                        cp = ((uint32_t)(c & 0x1F) << 6) | ((unsigned char)text[r + 1] & 0x3F);
                        r += 2;
                    } else { cp = 0xFFFF; r++; }
                    if (cp >= 512 || unicode_to_byte[cp] < 0) {
                        BPE_FAIL("%s: line %zu: character outside GPT-2's byte alphabet", path, line_no);
                    }
                    if (len == sizeof(part[0])) { BPE_FAIL("%s: line %zu: token longer than 255 bytes", path, line_no); }
                    part[n_fields][len++] = (uint8_t)unicode_to_byte[cp];
                }
                part_len[n_fields] = len;
            }
            n_fields++;
            p = q;
        }
        if (n_fields == 0 && end >= size) { break; }  // the empty remainder after the final newline
        if (n_fields != 2) {
            BPE_FAIL("%s: line %zu: expected a merge of two tokens \"A B\", found %zu fields", path, line_no, n_fields);
        }
        int left = bpe_token_of_bytes(t, part[0], part_len[0]);
        int right = bpe_token_of_bytes(t, part[1], part_len[1]);
        if (left < 0 || right < 0) {
            int which = left < 0 ? 0 : 1;
            BPE_FAIL("%s: line %zu: token \"%.*s\" is not in encoder.json", path, line_no, (int)field_len[which],
                text + field_at[which]);
        }
        memcpy(joined, part[0], part_len[0]);
        memcpy(joined + part_len[0], part[1], part_len[1]);
        int result = bpe_token_of_bytes(t, joined, part_len[0] + part_len[1]);
        if (result < 0) { BPE_FAIL("%s: line %zu: the merged token is not in encoder.json", path, line_no); }
        uint32_t pair = ((uint32_t)left << 16) | (uint32_t)right;
        size_t slot = bpe_merge_slot(t, pair);
        while (t->merge_slots[slot] != UINT64_MAX) {
            if ((uint32_t)(t->merge_slots[slot] >> 32) == pair) {
                BPE_FAIL("%s: line %zu: duplicate merge (first given at rank %u)", path, line_no, (uint32_t)t->merge_slots[slot]);
            }
            slot = (slot + 1) & (slots - 1);
        }
        int rank = t->n_merges++;
        t->merge_slots[slot] = ((uint64_t)pair << 32) | (uint32_t)rank;
        t->merge_result[rank] = (uint32_t)result;
        t->merge_pair[rank] = pair;
        if (created_rank[left] >= rank || created_rank[right] >= rank) { t->merges_ordered = 0; }
        if (created_rank[result] < rank) { created_rank[result] = rank; }
    }
    // a merge that creates a token already used by an earlier merge also breaks the order
    // (checked above only for merges that come later); recheck globally
    for (int rank = 0; rank < t->n_merges && t->merges_ordered; rank++) {
        uint32_t left = t->merge_pair[rank] >> 16, right = t->merge_pair[rank] & 0xFFFF;
        if (created_rank[left] >= rank || created_rank[right] >= rank) { t->merges_ordered = 0; }
    }
    if (t->n_merges == 0) { BPE_FAIL("%s: no merges found", path); }
    // Every token but the 256 bytes and EOT is made by a merge. One that is not
    // could never be produced: most likely vocab.bpe lost lines (a cut-off copy
    // still parses, and would silently give other tokens).
    int unreachable = 0, example = -1;
    for (int id = 0; id < t->vocab_size; id++) {
        int is_byte = t->token_offset[id + 1] - t->token_offset[id] == 1;
        if (created_rank[id] < 0 && !is_byte && id != t->eot_token) {
            unreachable++;
            if (example < 0) { example = id; }
        }
    }
    if (unreachable > 0) {
        BPE_FAIL("%s: %d tokens of encoder.json (e.g. id %d) are made by no merge: is vocab.bpe cut off? (%d merges read)",
            path, unreachable, example, t->n_merges);
    }
    free(created_rank);
    free(text);
    return 0;
fail:
    free(created_rank);
    free(text);
    return -1;
}

static void bpe_free(BPETokenizer *t);

// Loads DIR/encoder.json and DIR/vocab.bpe. Returns 0, or -1 with a one-line
// message naming the file and the problem in err (and t left empty).
static int bpe_try_load(BPETokenizer *t, const char *vocab_dir, char *err, size_t errlen) {
    memset(t, 0, sizeof(*t));
    int byte_to_unicode[256], unicode_to_byte[512];
    bpe_byte_alphabet(byte_to_unicode, unicode_to_byte);
    size_t n = strlen(vocab_dir);
    char *path = malloc_or_die(n + 32, "path");
    snprintf(path, n + 32, "%s/encoder.json", vocab_dir);
    int rc = bpe_load_encoder(t, path, unicode_to_byte, err, errlen);
    if (rc == 0) {
        snprintf(path, n + 32, "%s/vocab.bpe", vocab_dir);
        rc = bpe_load_merges(t, path, unicode_to_byte, err, errlen);
    }
    free(path);
    if (rc != 0) { bpe_free(t); }
    return rc;
}

// The same, dying with that message.
static void bpe_load(BPETokenizer *t, const char *vocab_dir) {
    char err[4096 + 256];
    if (bpe_try_load(t, vocab_dir, err, sizeof(err)) != 0) { die("%s", err); }
}

static void bpe_free(BPETokenizer *t) {
    free(t->token_bytes);
    free(t->token_offset);
    free(t->lookup);
    free(t->merge_slots);
    free(t->merge_result);
    free(t->merge_pair);
    memset(t, 0, sizeof(*t));
}

static inline const uint8_t *bpe_token_bytes(const BPETokenizer *t, uint32_t id, size_t *len) {
    *len = t->token_offset[id + 1] - t->token_offset[id];
    return t->token_bytes + t->token_offset[id];
}

// Decodes token ids written as text (tokenize --decode's input): non-negative
// decimal numbers separated by whitespace. emit(ctx, bytes, n) gets each token's
// bytes in order. Returns 0, or -1 with a one-line message naming path and the line
// in err (a malformed number or an id outside the vocabulary; the bytes before it
// were emitted).
static int bpe_try_decode_id_text(const BPETokenizer *t, const uint8_t *text, size_t size, const char *path,
                                  void (*emit)(void *ctx, const uint8_t *bytes, size_t n), void *ctx,
                                  char *err, size_t errlen) {
    size_t line = 1;
    for (size_t i = 0; i < size;) {
        if (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n') {
            if (text[i] == '\n') { line++; }
            i++;
            continue;
        }
        size_t start = i;
        uint64_t id = 0;
        while (i < size && text[i] >= '0' && text[i] <= '9') {
            id = id * 10 + (uint64_t)(text[i] - '0');
            if (id > UINT32_MAX) { break; }
            i++;
        }
        int ends_ok = i == size || text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n';
        if (i == start || !ends_ok) {
            // quote at most 20 bytes of it, control bytes as '?', so the message stays one line
            char found[21];
            size_t n = 0;
            for (size_t k = start; k < size && k <= i && n < 20; k++) {
                found[n++] = text[k] < 0x20 || text[k] == 0x7f ? '?' : (char)text[k];
            }
            found[n] = '\0';
            snprintf(err, errlen, "%s: line %zu: expected a token id (a non-negative integer), found \"%s\"", path, line,
                     found);
            return -1;
        }
        if (id >= (uint64_t)t->vocab_size) {
            snprintf(err, errlen, "%s: line %zu: token id %llu is outside the vocabulary (0..%d)", path, line,
                     (unsigned long long)id, t->vocab_size - 1);
            return -1;
        }
        size_t len;
        const uint8_t *bytes = bpe_token_bytes(t, (uint32_t)id, &len);
        emit(ctx, bytes, len);
    }
    return 0;
}

// ----------------------------------------------------------------------------
// pre-tokenization

// Class and length of the character at p (p < end). Malformed UTF-8: one byte, class other.
static inline int bpe_char_class(const uint8_t *p, const uint8_t *end, int *len) {
    uint8_t c = p[0];
    if (c < 0x80) { *len = 1; return unicode_stage2[0][c]; }
    size_t avail = (size_t)(end - p);
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
        if (avail < 2 || (p[1] & 0xC0) != 0x80) { goto invalid; }
        cp = ((uint32_t)(c & 0x1F) << 6) | (p[1] & 0x3F);
        *len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        if (avail < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) { goto invalid; }
        if (c == 0xE0 && p[1] < 0xA0) { goto invalid; }  // overlong
        if (c == 0xED && p[1] > 0x9F) { goto invalid; }  // UTF-16 surrogate
        cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
        *len = 3;
    } else if (c >= 0xF0 && c <= 0xF4) {
        if (avail < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) { goto invalid; }
        if (c == 0xF0 && p[1] < 0x90) { goto invalid; }  // overlong
        if (c == 0xF4 && p[1] > 0x8F) { goto invalid; }  // above U+10FFFF
        cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) | ((uint32_t)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
        *len = 4;
    } else {
        goto invalid;
    }
    return unicode_class(cp);
invalid:
    *len = 1;
    return UCLASS_OTHER;
}

// End of the run of characters of class cls starting at p.
static inline const uint8_t *bpe_run_end(const uint8_t *p, const uint8_t *end, int cls) {
    while (p < end) {
        if (*p < 0x80) {
            if (unicode_stage2[0][*p] != cls) { break; }
            p++;
        } else {
            int len;
            if (bpe_char_class(p, end, &len) != cls) { break; }
            p += len;
        }
    }
    return p;
}

// The end of the piece that starts at p: the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// matched at p, alternatives tried in order as a backtracking regex engine does.
static inline const uint8_t *bpe_next_piece(const uint8_t *p, const uint8_t *end) {
    int len;
    int cls = bpe_char_class(p, end, &len);
    // 's|'t|'re|'ve|'m|'ll|'d  (case-sensitive, as in GPT-2)
    if (p[0] == '\'' && end - p >= 2) {
        uint8_t c = p[1];
        if (c == 's' || c == 't' || c == 'm' || c == 'd') { return p + 2; }
        if (end - p >= 3 && ((c == 'r' && p[2] == 'e') || (c == 'v' && p[2] == 'e') || (c == 'l' && p[2] == 'l'))) {
            return p + 3;
        }
    }
    // ' ?X+' for X = \p{L}, \p{N}, [^\s\p{L}\p{N}]: an optional ASCII space, then a run of one class
    if (p[0] == ' ' && end - p >= 2) {
        int next_len;
        int next_cls = bpe_char_class(p + 1, end, &next_len);
        if (next_cls != UCLASS_SPACE) { return bpe_run_end(p + 1 + next_len, end, next_cls); }
    }
    if (cls != UCLASS_SPACE) { return bpe_run_end(p + len, end, cls); }
    // \s+(?!\S): the whitespace run, but if a non-space follows it, give its last
    // character back (to become the ' ' of ' ?X+', or a piece of its own); \s+ when
    // the run is a single character followed by a non-space.
    const uint8_t *last = p, *q = p + len;
    while (q < end) {
        int l;
        if (bpe_char_class(q, end, &l) != UCLASS_SPACE) { break; }
        last = q;
        q += l;
    }
    if (q == end || last == p) { return q; }
    return last;
}

// True when a piece ends at text + i whatever comes after (0 < i < n): the byte
// before is a printable ASCII non-space character and the byte at i is an ASCII
// character of another class. Then no run continues across i and no whitespace
// run's look-ahead reaches past it; the one exception, an apostrophe followed by
// a letter, could start a contraction and is excluded. So encoding text[0:i] and
// text[i:n] separately gives the same tokens as encoding text[0:n].
static inline int bpe_is_split_point(const uint8_t *text, size_t i) {
    uint8_t before = text[i - 1], at = text[i];
    if (before <= 0x20 || before >= 0x7F || at >= 0x80) { return 0; }
    int cls_before = unicode_stage2[0][before], cls_at = unicode_stage2[0][at];
    if (cls_before == cls_at) { return 0; }
    if (before == '\'' && cls_at == UCLASS_LETTER) { return 0; }
    return 1;
}

// The first split point at or after `from` (clamped to at least 1), or n if none.
static size_t bpe_next_split_point(const uint8_t *text, size_t n, size_t from) {
    for (size_t i = from < 1 ? 1 : from; i < n; i++) {
        if (bpe_is_split_point(text, i)) { return i; }
    }
    return n;
}

// The last split point in text[0:n], or 0 if none.
static size_t bpe_last_split_point(const uint8_t *text, size_t n) {
    for (size_t i = n; i-- > 1;) {
        if (bpe_is_split_point(text, i)) { return i; }
    }
    return 0;
}

// ----------------------------------------------------------------------------
// merging

// GPT-2's bpe(): repeatedly take the lowest-ranked adjacent pair and merge every
// occurrence of it, left to right. Quadratic, for short pieces. The rank of each
// adjacent pair is kept in an array and looked up again only next to a merge. ids
// has n entries on entry; returns the new count.
static size_t bpe_merge_simple(const BPETokenizer *t, uint32_t *ids, size_t n) {
    if (n < 2) { return n; }
    uint32_t rank_stack[256], result_stack[256];
    uint8_t merged_stack[256];
    int on_heap = n > 256;
    uint32_t *rank = on_heap ? malloc_or_die(n * sizeof(uint32_t), "BPE ranks") : rank_stack;
    uint32_t *result = on_heap ? malloc_or_die(n * sizeof(uint32_t), "BPE ranks") : result_stack;
    uint8_t *merged = on_heap ? malloc_or_die(n, "BPE ranks") : merged_stack;
    // rank[i], result[i]: the merge of pair (i, i+1), UINT32_MAX when there is none
    for (size_t i = 0; i + 1 < n; i++) {
        BPEMerge m = bpe_find_merge(t, ids[i], ids[i + 1]);
        rank[i] = m.rank;
        result[i] = m.result;
    }
    while (n >= 2) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < n; i++) {
            if (rank[i] < rank[best]) { best = i; }
        }
        if (rank[best] == BPE_NO_MERGE) { break; }
        uint32_t left = ids[best], right = ids[best + 1], merged_id = result[best];
        // Merge every occurrence of (left, right), left to right. A kept token keeps
        // its pair's rank: the pair is unchanged unless its right neighbour merged,
        // and those pairs are looked up again below.
        size_t out = 0;
        for (size_t i = 0; i < n;) {
            if (i + 1 < n && ids[i] == left && ids[i + 1] == right) {
                ids[out] = merged_id;
                merged[out++] = 1;
                i += 2;
            } else {
                ids[out] = ids[i];
                rank[out] = rank[i];
                result[out] = result[i];
                merged[out++] = 0;
                i++;
            }
        }
        n = out;
        for (size_t i = 0; i + 1 < n; i++) {
            if (merged[i] || merged[i + 1]) {
                BPEMerge m = bpe_find_merge(t, ids[i], ids[i + 1]);
                rank[i] = m.rank;
                result[i] = m.result;
            }
        }
    }
    if (on_heap) { free(rank); free(result); free(merged); }
    return n;
}

typedef struct {
    uint32_t rank;
    uint32_t pos;    // the left symbol's index
    uint32_t left;   // the ids the pair had when pushed: it is stale if they changed
    uint32_t right;
} BPEHeapEntry;

static inline int bpe_heap_less(const BPEHeapEntry *a, const BPEHeapEntry *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void bpe_heap_push(BPEHeapEntry *heap, size_t *n, BPEHeapEntry e) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bpe_heap_less(&e, &heap[parent])) { break; }
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = e;
}

static BPEHeapEntry bpe_heap_pop(BPEHeapEntry *heap, size_t *n) {
    BPEHeapEntry top = heap[0], last = heap[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= *n) { break; }
        if (child + 1 < *n && bpe_heap_less(&heap[child + 1], &heap[child])) { child++; }
        if (!bpe_heap_less(&heap[child], &last)) { break; }
        heap[i] = heap[child];
        i = child;
    }
    if (*n > 0) { heap[i] = last; }
    return top;
}

// The same result as bpe_merge_simple in O(n log n), for long pieces: pairs wait in a
// heap ordered by (rank, position). Popping all pairs of one rank left to right and
// skipping those a previous merge destroyed is GPT-2's "merge every occurrence left
// to right"; it needs merges_ordered so that a merge never creates a pair ranked
// below the one being merged.
static size_t bpe_merge_heap(const BPETokenizer *t, uint32_t *ids, size_t n) {
    if (n < 2) { return n; }
    int32_t *next = malloc_or_die(n * sizeof(int32_t), "BPE links");
    int32_t *prev = malloc_or_die(n * sizeof(int32_t), "BPE links");
    BPEHeapEntry *heap = malloc_or_die(3 * n * sizeof(BPEHeapEntry), "BPE heap");  // n-1, then 2 per merge
    size_t heap_n = 0;
    for (size_t i = 0; i < n; i++) {
        next[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
        prev[i] = (int32_t)i - 1;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        BPEMerge m = bpe_find_merge(t, ids[i], ids[i + 1]);
        if (m.rank != BPE_NO_MERGE) { bpe_heap_push(heap, &heap_n, (BPEHeapEntry){ m.rank, (uint32_t)i, ids[i], ids[i + 1] }); }
    }
    const uint32_t DEAD = UINT32_MAX;
    while (heap_n > 0) {
        BPEHeapEntry e = bpe_heap_pop(heap, &heap_n);
        int32_t right = next[e.pos];
        if (ids[e.pos] != e.left || right < 0 || ids[right] != e.right) { continue; }
        ids[e.pos] = t->merge_result[e.rank];
        ids[right] = DEAD;
        next[e.pos] = next[right];
        if (next[right] >= 0) { prev[next[right]] = (int32_t)e.pos; }
        int32_t before = prev[e.pos], after = next[e.pos];
        if (before >= 0) {
            BPEMerge m = bpe_find_merge(t, ids[before], ids[e.pos]);
            if (m.rank != BPE_NO_MERGE) { bpe_heap_push(heap, &heap_n, (BPEHeapEntry){ m.rank, (uint32_t)before, ids[before], ids[e.pos] }); }
        }
        if (after >= 0) {
            BPEMerge m = bpe_find_merge(t, ids[e.pos], ids[after]);
            if (m.rank != BPE_NO_MERGE) { bpe_heap_push(heap, &heap_n, (BPEHeapEntry){ m.rank, e.pos, ids[e.pos], ids[after] }); }
        }
    }
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] != DEAD) { ids[out++] = ids[i]; }
    }
    free(next); free(prev); free(heap);
    return out;
}

// ----------------------------------------------------------------------------
// per-thread cache of piece -> tokens (most pieces of real text are repeated words)

#define BPE_CACHE_SLOTS (1u << 15)          // 8 bytes each: 256 KB, most of it stays in L2
#define BPE_CACHE_MAX_PIECE 64              // longer pieces are not cached
#define BPE_CACHE_ARENA_BYTES (4u << 20)

typedef struct {
    uint32_t tag;        // upper hash bits, 0 = empty
    uint32_t offset;     // in the arena: piece length, token count, 2 spare bytes, the
                         // piece's bytes padded to 4, then its tokens
} BPECacheSlot;

typedef struct {
    BPECacheSlot *slots;
    uint8_t *arena;
    size_t arena_used;
    size_t n_used;
    uint32_t scratch[BPE_CACHE_MAX_PIECE];
} BPECache;

static void bpe_cache_clear(BPECache *c) {
    memset(c->slots, 0, BPE_CACHE_SLOTS * sizeof(BPECacheSlot));
    c->arena_used = 0;
    c->n_used = 0;
}

static void bpe_cache_init(BPECache *c) {
    c->slots = malloc_or_die(BPE_CACHE_SLOTS * sizeof(BPECacheSlot), "BPE cache");
    c->arena = malloc_or_die(BPE_CACHE_ARENA_BYTES, "BPE cache");
    bpe_cache_clear(c);
}

static void bpe_cache_free(BPECache *c) {
    free(c->slots);
    free(c->arena);
}

// a == b for short byte strings, without a call to memcmp (the cache's hot path)
static inline int bpe_bytes_equal(const uint8_t *a, const uint8_t *b, size_t n) {
    while (n >= 8) {
        uint64_t x, y;
        memcpy(&x, a, 8); memcpy(&y, b, 8);
        if (x != y) { return 0; }
        a += 8; b += 8; n -= 8;
    }
    while (n > 0) {
        if (*a++ != *b++) { return 0; }
        n--;
    }
    return 1;
}

// Merges one piece and appends its tokens: from the cache when it has the piece,
// else merged and remembered. Pieces too long for the cache are merged in place at
// the end of out.
static void bpe_encode_piece(const BPETokenizer *t, BPECache *c, const uint8_t *piece, size_t n, TokenVec *out) {
    if (n == 1) { tokenvec_push(out, t->byte_token[piece[0]]); return; }
    if (n > BPE_CACHE_MAX_PIECE) {
        tokenvec_reserve(out, n);
        uint32_t *ids = out->data + out->len;
        for (size_t i = 0; i < n; i++) { ids[i] = t->byte_token[piece[i]]; }
        out->len += (n >= bpe_heap_min_bytes && t->merges_ordered) ? bpe_merge_heap(t, ids, n) : bpe_merge_simple(t, ids, n);
        return;
    }
    uint64_t h = bpe_hash_bytes(piece, n);
    uint32_t tag = (uint32_t)(h >> 32) | 1;  // never 0, the empty mark
    size_t slot = h & (BPE_CACHE_SLOTS - 1);
    for (;;) {
        const BPECacheSlot *s = &c->slots[slot];
        if (s->tag == 0) { break; }
        if (s->tag == tag) {
            const uint8_t *entry = c->arena + s->offset;
            if (entry[0] == n && bpe_bytes_equal(entry + 4, piece, n)) {
                const uint32_t *tokens = (const uint32_t *)(entry + 4 + ((n + 3) & ~(size_t)3));
                size_t n_tokens = entry[1];
                tokenvec_reserve(out, n_tokens);
                uint32_t *dst = out->data + out->len;
                for (size_t k = 0; k < n_tokens; k++) { dst[k] = tokens[k]; }
                out->len += n_tokens;
                return;
            }
        }
        slot = (slot + 1) & (BPE_CACHE_SLOTS - 1);
    }
    uint32_t *ids = c->scratch;
    for (size_t i = 0; i < n; i++) { ids[i] = t->byte_token[piece[i]]; }
    size_t n_tokens = (n >= bpe_heap_min_bytes && t->merges_ordered) ? bpe_merge_heap(t, ids, n) : bpe_merge_simple(t, ids, n);
    tokenvec_reserve(out, n_tokens);
    memcpy(out->data + out->len, ids, n_tokens * sizeof(uint32_t));
    out->len += n_tokens;
    // Remember it. A full cache is emptied: memory stays bounded and real text
    // refills the common words at once.
    size_t need = 4 + ((n + 3) & ~(size_t)3) + n_tokens * sizeof(uint32_t);
    if (c->arena_used + need > BPE_CACHE_ARENA_BYTES || c->n_used >= BPE_CACHE_SLOTS / 2) {
        bpe_cache_clear(c);
        slot = h & (BPE_CACHE_SLOTS - 1);
    }
    uint8_t *entry = c->arena + c->arena_used;
    entry[0] = (uint8_t)n;
    entry[1] = (uint8_t)n_tokens;
    entry[2] = entry[3] = 0;
    memcpy(entry + 4, piece, n);
    memcpy(entry + 4 + ((n + 3) & ~(size_t)3), ids, n_tokens * sizeof(uint32_t));
    c->slots[slot] = (BPECacheSlot){ .tag = tag, .offset = (uint32_t)c->arena_used };
    c->arena_used += need;
    c->n_used++;
}

// Appends the tokens of text[0:n] to out (no EOT: text is ordinary text).
static void bpe_encode(const BPETokenizer *t, BPECache *c, const uint8_t *text, size_t n, TokenVec *out) {
    const uint8_t *p = text, *end = text + n;
    while (p < end) {
        const uint8_t *q = bpe_next_piece(p, end);
        bpe_encode_piece(t, c, p, (size_t)(q - p), out);
        p = q;
    }
}

// Encodes text[0:n] on up to n_threads threads (OpenMP), appending to out tokens
// identical to bpe_encode's: the text is cut only at split points. caches holds one
// BPECache per thread. parts must hold n_threads TokenVecs (reused between calls).
static void bpe_encode_parallel(const BPETokenizer *t, BPECache *caches, TokenVec *parts, int n_threads,
                                const uint8_t *text, size_t n, TokenVec *out) {
    if (n_threads <= 1 || n < (size_t)n_threads * bpe_parallel_min_bytes) {
        bpe_encode(t, &caches[0], text, n, out);
        return;
    }
    size_t cut[65];
    if (n_threads > 64) { n_threads = 64; }
    cut[0] = 0;
    for (int k = 1; k < n_threads; k++) {
        size_t target = n / (size_t)n_threads * (size_t)k;
        if (target < cut[k - 1]) { target = cut[k - 1]; }
        cut[k] = bpe_next_split_point(text, n, target);
    }
    cut[n_threads] = n;
#ifdef _OPENMP
    #pragma omp parallel for num_threads(n_threads) schedule(static, 1)
#endif
    for (int k = 0; k < n_threads; k++) {
        // Work on copies on this thread's stack: parts[] and caches[] are arrays, and
        // neighbours writing their length counters into one cache line would make the
        // threads take turns for it.
        TokenVec part = parts[k];
        BPECache cache = caches[k];
        part.len = 0;
        if (cut[k] < cut[k + 1]) { bpe_encode(t, &cache, text + cut[k], cut[k + 1] - cut[k], &part); }
        parts[k] = part;
        caches[k] = cache;
    }
    for (int k = 0; k < n_threads; k++) {
        if (parts[k].len == 0) { continue; }  // a thread's empty range: its data may be NULL
        tokenvec_reserve(out, parts[k].len);
        memcpy(out->data + out->len, parts[k].data, parts[k].len * sizeof(uint32_t));
        out->len += parts[k].len;
    }
}
