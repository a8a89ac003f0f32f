// prepare_data's text input (llmc/text_input.h): a file, plain or gzip, streamed in
// small blocks through the BPE encoder. Input: byte 0: bit 0: gzip-compress the
// rest first; bit 1: --split-blank-lines; bits 2-7: the block size in bytes - 1
// (tiny blocks: many carries across block ends). The rest: the file (in plain mode
// it may itself be gzip or corrupt gzip: zlib reads both).
// Property (when the file's text is known): the tokens are EOT + encode(document)
// for each document, exactly as encoding each whole document at once.
#include <zlib.h>
#include "../llmc/text_input.h"
#include "fuzz_common.h"

static BPETokenizer tok;
static BPECache cache;
static TextEncoder enc;  // made once (its caches are megabytes); each input sets its block size

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    bpe_load(&tok, fuzz_vocab_dir());
    bpe_cache_init(&cache);
    text_encoder_init(&enc, &tok, 2, 1, 0);
    return 0;
}

static void collect(void *ctx, const uint32_t *tokens, size_t n) {
    TokenVec *v = ctx;
    if (n == 0) { return; }
    tokenvec_reserve(v, n);
    memcpy(v->data + v->len, tokens, n * sizeof(uint32_t));
    v->len += n;
}

// text compressed as a gzip stream into *out (malloc'ed); returns its size
static size_t gzip_bytes(const uint8_t *text, size_t n, uint8_t **out) {
    z_stream z = {0};
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) { abort(); }
    size_t cap = deflateBound(&z, n) + 64;
    *out = malloc(cap);
    z.next_in = (Bytef *)text;
    z.avail_in = (uInt)n;
    z.next_out = *out;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END) { abort(); }
    size_t size = z.total_out;
    deflateEnd(&z);
    return size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) { return 0; }
    int compress = data[0] & 1, split = (data[0] >> 1) & 1;
    size_t block = 1 + (data[0] >> 2);
    const uint8_t *text = data + 1;
    size_t n = size - 1;
    const char *path;
    if (compress) {
        uint8_t *gz;
        size_t gz_size = gzip_bytes(text, n, &gz);
        path = fuzz_write_file("input.txt.gz", gz, gz_size);
        free(gz);
    } else {
        path = fuzz_write_file("input.txt", text, n);
    }
    // plain bytes that start like gzip are read as gzip: no known text then
    int known = compress || n < 2 || !(text[0] == 0x1f && text[1] == 0x8b);
    enc.step = block * (size_t)enc.n_threads;  // as text_encoder_init(&enc, &tok, 2, block, split) sets them
    enc.split_blank_lines = split;
    TokenVec got = {0};
    TokenSink sink = {collect, NULL, NULL, &got};
    char err[4096 + 256];
    long bytes = text_input_try_encode(&enc, path, &sink, err, sizeof(err));
    if (bytes < 0) {
        fuzz_check(!known, "a readable input fails: %s", err);
        fuzz_check(err[0] != '\0' && strchr(err, '\n') == NULL, "a one-line error message: [%s]", err);
    } else if (known) {
        fuzz_check((size_t)bytes == n, "every byte read");
        TokenVec want = {0};
        size_t start = 0;
        for (;;) {  // a document ends after each "\n\n" (with split): Python's str.split
            size_t end = n;
            int more = 0;
            for (size_t i = start; split && i + 1 < n; i++) {
                if (text[i] == '\n' && text[i + 1] == '\n') { end = i + 2; more = 1; break; }
            }
            tokenvec_push(&want, (uint32_t)tok.eot_token);
            bpe_encode(&tok, &cache, text + start, end - start, &want);
            if (!more) { break; }
            start = end;
        }
        fuzz_check(got.len == want.len && (got.len == 0 || memcmp(got.data, want.data, got.len * sizeof(uint32_t)) == 0),
                   "streamed tokens == each document encoded whole (%zu vs %zu tokens)", got.len, want.len);
        tokenvec_free(&want);
    }
    tokenvec_free(&got);
    return 0;
}
