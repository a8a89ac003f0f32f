// tokenize --decode's input: token ids as text, arbitrary bytes
// (bpe_try_decode_id_text, GPT-2's vocabulary from fuzz_vocab_dir()). Properties:
// it fails exactly when a word is not a decimal id inside the vocabulary, with a
// one-line message; otherwise it emits each id's bytes.
#include "../llmc/bpe.h"
#include "fuzz_common.h"

static BPETokenizer tok;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    bpe_load(&tok, fuzz_vocab_dir());
    return 0;
}

typedef struct { size_t tokens, bytes; } Count;

static void count(void *ctx, const uint8_t *bytes, size_t n) {
    Count *c = ctx;
    c->tokens++;
    c->bytes += n;
}

int LLVMFuzzerTestOneInput(const uint8_t *text, size_t size) {
    // the same parse, plainly: split at whitespace, every word must be digits < vocab_size
    size_t words = 0, bytes = 0;
    int valid = 1;
    for (size_t i = 0; i < size && valid;) {
        if (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n') { i++; continue; }
        size_t j = i;
        while (j < size && !(text[j] == ' ' || text[j] == '\t' || text[j] == '\r' || text[j] == '\n')) { j++; }
        unsigned long long id = 0;
        for (size_t k = i; k < j && valid; k++) {
            valid = text[k] >= '0' && text[k] <= '9' && id < 100000000000ULL;
            id = id * 10 + (unsigned)(text[k] - '0');
        }
        valid = valid && id < (unsigned long long)tok.vocab_size;
        if (valid) {
            size_t len;
            bpe_token_bytes(&tok, (uint32_t)id, &len);
            words++;
            bytes += len;
        }
        i = j;
    }
    Count c = {0, 0};
    char err[4096 + 256];
    int rc = bpe_try_decode_id_text(&tok, text, size, "ids.txt", count, &c, err, sizeof(err));
    fuzz_check((rc == 0) == valid, "fails exactly on a bad id (rc %d)", rc);
    if (rc == 0) {
        fuzz_check(c.tokens == words && c.bytes == bytes, "every id decoded");
    } else {
        fuzz_check(err[0] != '\0' && strchr(err, '\n') == NULL, "a one-line error message: %s", err);
    }
    return 0;
}
