// The GPT-2 BPE encoder (llmc/bpe.h) on arbitrary bytes, with the real vocabulary
// (fuzz_vocab_dir()). Properties: decode(encode(x)) == x; the encoder's tokens
// (cached or not) are those of GPT-2's merge loop and of the heap merge on each piece; encoding the two sides of a split point separately gives
// the tokens of the whole; the threaded encoder's cuts give the same tokens.
#include "../llmc/bpe.h"
#include "fuzz_common.h"

static BPETokenizer tok;
static BPECache cache, caches[3];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    bpe_load(&tok, fuzz_vocab_dir());
    bpe_cache_init(&cache);
    for (int k = 0; k < 3; k++) { bpe_cache_init(&caches[k]); }
    return 0;
}

static void same(const TokenVec *a, const TokenVec *b, const char *what) {
    fuzz_check(a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len * sizeof(uint32_t)) == 0), "%s", what);
}

int LLVMFuzzerTestOneInput(const uint8_t *x, size_t n) {
    TokenVec whole = {0}, other = {0};
    bpe_encode(&tok, &cache, x, n, &whole);
    size_t pos = 0;
    for (size_t i = 0; i < whole.len; i++) {
        size_t len;
        const uint8_t *b = bpe_token_bytes(&tok, whole.data[i], &len);
        fuzz_check(pos + len <= n && memcmp(x + pos, b, len) == 0, "decode(encode(x)) == x at byte %zu", pos);
        pos += len;
    }
    fuzz_check(pos == n, "decode(encode(x)) has all %zu bytes of x", n);
    // the same again: the pieces now come from the cache
    bpe_encode(&tok, &cache, x, n, &other);
    same(&whole, &other, "encoding again (from the cache) gives the same tokens");
    // each piece merged directly, with GPT-2's quadratic loop and with the heap
    // (no cache): the encoder's tokens
    TokenVec loop = {0}, heap = {0};
    for (const uint8_t *p = x, *end = x + n; p < end;) {
        const uint8_t *q = bpe_next_piece(p, end);
        size_t len = (size_t)(q - p);
        fuzz_check(len > 0, "pieces are not empty");
        tokenvec_reserve(&loop, len);
        tokenvec_reserve(&heap, len);
        for (size_t i = 0; i < len; i++) { loop.data[loop.len + i] = heap.data[heap.len + i] = tok.byte_token[p[i]]; }
        loop.len += bpe_merge_simple(&tok, loop.data + loop.len, len);
        if (len >= 2 && tok.merges_ordered) { heap.len += bpe_merge_heap(&tok, heap.data + heap.len, len); }
        else { heap.len += bpe_merge_simple(&tok, heap.data + heap.len, len); }
        p = q;
    }
    same(&whole, &loop, "GPT-2's merge loop on each piece gives the encoder's tokens");
    same(&whole, &heap, "the heap merge on each piece gives the encoder's tokens");
    tokenvec_free(&loop);
    tokenvec_free(&heap);
    // a split point near the middle: the two halves encode to the whole's tokens
    size_t cut = bpe_next_split_point(x, n, n / 2);
    if (cut < n) {
        other.len = 0;
        bpe_encode(&tok, &cache, x, cut, &other);
        bpe_encode(&tok, &cache, x + cut, n - cut, &other);
        same(&whole, &other, "encoding at a split point");
    }
    // the threaded encoder's cuts (threads run in turn in this build)
    TokenVec parts[3] = {{0}};
    size_t saved_min = bpe_parallel_min_bytes;
    bpe_parallel_min_bytes = 1;
    other.len = 0;
    bpe_encode_parallel(&tok, caches, parts, 3, x, n, &other);
    bpe_parallel_min_bytes = saved_min;
    same(&whole, &other, "bpe_encode_parallel");
    for (int k = 0; k < 3; k++) { tokenvec_free(&parts[k]); }
    tokenvec_free(&whole);
    tokenvec_free(&other);
    return 0;
}
