// The GPT-2 BPE encoder (llmc/bpe.h) on arbitrary bytes, with the real vocabulary
// (fuzz_vocab_dir()). Properties: decode(encode(x)) == x; the heap merge gives
// GPT-2's loop's tokens; encoding the two sides of a split point separately gives
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
    bpe_cache_clear(&cache);
    bpe_encode(&tok, &cache, x, n, &whole);
    size_t pos = 0;
    for (size_t i = 0; i < whole.len; i++) {
        size_t len;
        const uint8_t *b = bpe_token_bytes(&tok, whole.data[i], &len);
        fuzz_check(pos + len <= n && memcmp(x + pos, b, len) == 0, "decode(encode(x)) == x at byte %zu", pos);
        pos += len;
    }
    fuzz_check(pos == n, "decode(encode(x)) has all %zu bytes of x", n);
    // the cache hit path: the same again
    bpe_encode(&tok, &cache, x, n, &other);
    same(&whole, &other, "encoding again (from the cache) gives the same tokens");
    // GPT-2's quadratic loop for every piece, without the cache, against the heap
    size_t saved = bpe_heap_min_bytes;
    other.len = 0;
    bpe_heap_min_bytes = SIZE_MAX;
    bpe_cache_clear(&cache);
    bpe_encode(&tok, &cache, x, n, &other);
    same(&whole, &other, "GPT-2's merge loop gives the tokens of the default path");
    other.len = 0;
    bpe_heap_min_bytes = 2;
    bpe_cache_clear(&cache);
    bpe_encode(&tok, &cache, x, n, &other);
    bpe_heap_min_bytes = saved;
    same(&whole, &other, "the heap merge gives the tokens of the default path");
    // a split point near the middle: the two halves encode to the whole's tokens
    size_t cut = bpe_next_split_point(x, n, n / 2);
    if (cut < n) {
        other.len = 0;
        bpe_encode(&tok, &cache, x, cut, &other);
        bpe_encode(&tok, &cache, x + cut, n - cut, &other);
        same(&whole, &other, "encoding at a split point");
    }
    // the threaded encoder's cuts (threads run in turn in this build)
    for (int k = 0; k < 3; k++) { bpe_cache_clear(&caches[k]); }
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
