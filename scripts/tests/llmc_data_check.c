/*
Test helper: reads llm.c data the way the trainer will, and prints it back as text.

    llmc_data_check TOKENIZER.bin SHARD.bin...

Loads the tokenizer with llmc/tokenizer.h (the trainer's API), checks each shard's
header (magic 20240520, version 1) and that its token count matches the file
size, then writes the bytes of every token to stdout (EOT as "<|endoftext|>").
Prints "SHARD: N tokens" for each shard on stderr. Built by scripts/tests/test_tokenizer.sh.
*/
#include <stdio.h>
#include <stdint.h>
#include "../../llmc/utils.h"
#include "../../llmc/tokenizer.h"

int main(int argc, char **argv) {
    if (argc < 3) { die("usage: llmc_data_check TOKENIZER.bin SHARD.bin..."); }
    Tokenizer tok;
    tokenizer_init(&tok, argv[1]);
    for (int a = 2; a < argc; a++) {
        const char *path = argv[a];
        FILE *f = fopen_or_die(path, "rb");
        int header[256];
        read_header_or_die(f, path, header, 20240520, 1, "token shard");
        long size = file_size_or_die(f, path);
        if (header[2] < 0 || (long)header[2] * 2 + 1024 != size) {
            die("%s: header says %d tokens, the file holds %ld bytes of tokens", path, header[2], size - 1024);
        }
        uint16_t buf[4096];
        long left = header[2];
        while (left > 0) {
            size_t n = left < 4096 ? (size_t)left : 4096;
            fread_or_die(buf, sizeof(uint16_t), n, f, path);
            for (size_t i = 0; i < n; i++) {
                if (buf[i] >= tok.vocab_size) { die("%s: token %u outside the vocabulary", path, buf[i]); }
                fwrite_or_die(tokenizer_decode(&tok, buf[i]), 1, tok.token_len[buf[i]], stdout, "stdout");
            }
            left -= (long)n;
        }
        fclose(f);
        fprintf(stderr, "%s: %d tokens\n", path, header[2]);
    }
    if (fflush(stdout) != 0) { die("stdout: write failed"); }
    tokenizer_free(&tok);
    return 0;
}
