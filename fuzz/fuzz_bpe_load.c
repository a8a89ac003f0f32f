// encoder.json + vocab.bpe (llmc/bpe.h's bpe_try_load), as prepare_data and
// tokenize read them. Input: encoder.json, the line "==vocab.bpe==", vocab.bpe.
// A vocabulary that loads must encode any text so that it decodes back exactly,
// with the heap merge as with GPT-2's loop; the rest of the input is such a text.
#include "../llmc/bpe.h"
#include "fuzz_common.h"

static const char SEPARATOR[] = "\n==vocab.bpe==\n";

static void decode_check(const BPETokenizer *t, const TokenVec *ids, const uint8_t *text, size_t n) {
    size_t pos = 0;
    for (size_t i = 0; i < ids->len; i++) {
        fuzz_check(ids->data[i] < (uint32_t)t->vocab_size, "token id inside the vocabulary");
        size_t len;
        const uint8_t *b = bpe_token_bytes(t, ids->data[i], &len);
        fuzz_check(pos + len <= n && memcmp(text + pos, b, len) == 0, "decode(encode(x)) == x at byte %zu", pos);
        pos += len;
    }
    fuzz_check(pos == n, "decode(encode(x)) has all %zu bytes of x", n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *sep = NULL;
    for (size_t i = 0; i + sizeof(SEPARATOR) - 1 <= size && sep == NULL; i++) {
        if (memcmp(data + i, SEPARATOR, sizeof(SEPARATOR) - 1) == 0) { sep = data + i; }
    }
    if (sep == NULL) { return 0; }
    const uint8_t *merges = sep + sizeof(SEPARATOR) - 1;
    // vocab.bpe ends at a second separator, if any; what follows is the text
    const uint8_t *text = data + size;
    for (const uint8_t *p = merges; p + sizeof(SEPARATOR) - 1 <= data + size; p++) {
        if (memcmp(p, SEPARATOR, sizeof(SEPARATOR) - 1) == 0) { text = p; break; }
    }
    fuzz_write_file("encoder.json", data, (size_t)(sep - data));
    fuzz_write_file("vocab.bpe", merges, (size_t)(text - merges));
    BPETokenizer t;
    char err[4096 + 256];
    if (bpe_try_load(&t, fuzz_dir(), err, sizeof(err)) != 0) {
        fuzz_check(err[0] != '\0' && strchr(err, '\n') == NULL, "a one-line error message: [%s]", err);
        return 0;
    }
    static const char sample[] = "Hello world, it's 2024!\n\n  x\xff\xc3";
    const uint8_t *x = text < data + size ? text + sizeof(SEPARATOR) - 1 : (const uint8_t *)sample;
    size_t n = text < data + size ? (size_t)(data + size - x) : sizeof(sample) - 1;
    BPECache cache;
    bpe_cache_init(&cache);
    TokenVec loop = {0}, heap = {0};
    size_t saved = bpe_heap_min_bytes;
    bpe_heap_min_bytes = SIZE_MAX;  // GPT-2's loop for every piece
    bpe_encode(&t, &cache, x, n, &loop);
    bpe_cache_clear(&cache);
    bpe_heap_min_bytes = 2;  // the heap wherever the vocabulary allows it
    bpe_encode(&t, &cache, x, n, &heap);
    bpe_heap_min_bytes = saved;
    decode_check(&t, &loop, x, n);
    fuzz_check(loop.len == heap.len && (loop.len == 0 || memcmp(loop.data, heap.data, loop.len * sizeof(uint32_t)) == 0),
               "the heap merge gives the loop's tokens");
    tokenvec_free(&loop);
    tokenvec_free(&heap);
    bpe_cache_free(&cache);
    bpe_free(&t);
    return 0;
}
