// llm.c tokenizer files (gpt2_tokenizer.bin, llmc/tokenizer.h, read by train_gpt2
// to print samples): tokenizer_try_init, then every token decoded and printed.
#include "../llmc/tokenizer.h"
#include "fuzz_common.h"

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    devnull = fopen("/dev/null", "w");
    return devnull == NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_file("tokenizer.bin", data, size);
    Tokenizer tok;
    char err[4096 + 256];
    if (tokenizer_try_init(&tok, path, err, sizeof(err)) != 0) {
        fuzz_check(err[0] != '\0' && strchr(err, '\n') == NULL, "a one-line error message: [%s]", err);
        return 0;
    }
    size_t pos = 1024;
    for (uint32_t i = 0; i < tok.vocab_size; i++) {
        const char *s = tokenizer_decode(&tok, i);
        fuzz_check(s != NULL && tok.token_len[i] == data[pos], "token %u's length", i);
        fuzz_check(memcmp(s, data + pos + 1, tok.token_len[i]) == 0, "token %u's bytes", i);
        pos += 1 + tok.token_len[i];
        tokenizer_print(&tok, i, devnull);
    }
    fuzz_check(pos == size, "the file holds exactly the tokens");
    fuzz_check(tokenizer_decode(&tok, tok.vocab_size) == NULL, "an id past the vocabulary decodes to nothing");
    tokenizer_print(&tok, tok.vocab_size, devnull);
    tokenizer_free(&tok);
    return 0;
}
