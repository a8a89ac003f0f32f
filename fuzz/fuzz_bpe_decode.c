// Decoding arbitrary token id lists, both ways the programs do it: tokenize's
// (bpe_token_bytes of encoder.json's tokens) and train_gpt2's samples
// (llmc/tokenizer.h, from the gpt2_tokenizer.bin of the same vocabulary). Input:
// uint16 ids, little-endian (GPT-2's 50257 ids and beyond). Properties: both give
// the same bytes for ids inside the vocabulary and nothing outside it, and the
// decoded bytes encode to tokens that decode back to them.
#include "../llmc/bpe.h"
#include "../llmc/tokenizer.h"
#include "fuzz_common.h"

static BPETokenizer bpe;
static Tokenizer tok;
static BPECache cache;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    bpe_load(&bpe, fuzz_vocab_dir());
    bpe_cache_init(&cache);
    // the tokenizer file as prepare_data writes it: header, then (length, bytes) per token
    char path[4200];
    snprintf(path, sizeof(path), "%s/gpt2_tokenizer.bin", fuzz_dir());
    FILE *f = fopen(path, "wb");
    int header[256] = {TOKENIZER_MAGIC, TOKENIZER_VERSION, bpe.vocab_size, bpe.eot_token < 0 ? 0 : bpe.eot_token};
    fwrite(header, sizeof(int), 256, f);
    for (int id = 0; id < bpe.vocab_size; id++) {
        size_t len;
        const uint8_t *b = bpe_token_bytes(&bpe, (uint32_t)id, &len);
        uint8_t len8 = (uint8_t)len;
        fwrite(&len8, 1, 1, f);
        fwrite(b, 1, len, f);
    }
    fclose(f);
    tokenizer_init(&tok, path);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t n = size / 2, len_total = 0;
    uint8_t *text = malloc(n * 256 + 1);
    for (size_t i = 0; i < n; i++) {
        uint32_t id = (uint32_t)data[2 * i] | (uint32_t)data[2 * i + 1] << 8;
        const char *s = tokenizer_decode(&tok, id);
        if (id >= (uint32_t)bpe.vocab_size) {
            fuzz_check(s == NULL, "id %u outside the vocabulary decodes to nothing", id);
            continue;
        }
        size_t len;
        const uint8_t *b = bpe_token_bytes(&bpe, id, &len);
        fuzz_check(s != NULL && tok.token_len[id] == len && memcmp(s, b, len) == 0 && s[len] == '\0',
                   "both decoders agree on id %u", id);
        memcpy(text + len_total, b, len);
        len_total += len;
    }
    TokenVec ids = {0};
    bpe_cache_clear(&cache);
    bpe_encode(&bpe, &cache, text, len_total, &ids);
    size_t pos = 0;
    for (size_t i = 0; i < ids.len; i++) {
        size_t len;
        const uint8_t *b = bpe_token_bytes(&bpe, ids.data[i], &len);
        fuzz_check(pos + len <= len_total && memcmp(text + pos, b, len) == 0, "decode(encode(decode(ids)))");
        pos += len;
    }
    fuzz_check(pos == len_total, "decode(encode(decode(ids))) has every byte");
    tokenvec_free(&ids);
    free(text);
    return 0;
}
