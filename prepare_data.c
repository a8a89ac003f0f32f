/*
Text files -> llm.c training data: GPT-2 token shards and the tokenizer file.

    ./prepare_data --vocab DIR -i FILE [-i FILE...] -o OUTDIR --name NAME
                   [--val-tokens N] [--shard-tokens N] [--threads N] [--split-blank-lines]

Documents: each input file is one document, and the EOT token (50256) goes before
each document, as llm.c's data scripts put it at the start of every document. The
token stream is
    EOT tokens(file 1) EOT tokens(file 2) ...
and its first N tokens (--val-tokens, default 0) go to OUTDIR/NAME_val_000000.bin,
the rest to OUTDIR/NAME_train_000000.bin, NAME_train_000001.bin, ... of at most
--shard-tokens tokens each (default 100,000,000, llm.c's fineweb shard size).
--split-blank-lines also ends a document after every "\n\n" (so the next one
starts with EOT), which reproduces llm.c's dev/data/tinyshakespeare.py token
stream: it splits the text at "\n\n" into sections, puts EOT before each, and
encodes each section with its "\n\n" put back (except the last).

Formats (llm.c's): a shard is a 256 x int32 header (magic 20240520, version 1,
number of tokens) then the tokens as uint16. OUTDIR/gpt2_tokenizer.bin is a
256 x int32 header (magic 20240328, version 2, vocab size, EOT token) then, for
each token, a uint8 length and its bytes.

Inputs may be gzip-compressed (read transparently) and are streamed in blocks,
so memory stays bounded (a few blocks per thread) whatever the input size. Every
output file is written as NAME.tmp, synced, and renamed only when complete; on
any error the temporary file is removed, so no half-written file ever has a
final name.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <signal.h>
#include <unistd.h>
#include <sys/stat.h>
#include <zlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "llmc/utils.h"
#include "llmc/bpe.h"
#include "llmc/text_input.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define TOKENIZER_FILE_MAGIC 20240328
#define TOKENIZER_FILE_VERSION 2

// ----------------------------------------------------------------------------
// temporary files: removed on any exit that did not rename them

#define MAX_PENDING 4
static char *pending_tmp[MAX_PENDING];

static void remove_pending_tmp(void) {
    for (int i = 0; i < MAX_PENDING; i++) {
        if (pending_tmp[i]) { unlink(pending_tmp[i]); }
    }
}

static void on_signal(int sig) {
    remove_pending_tmp();  // unlink is async-signal-safe
    signal(sig, SIG_DFL);
    raise(sig);
}

static void add_pending(char *tmp_path) {
    for (int i = 0; i < MAX_PENDING; i++) {
        if (pending_tmp[i] == NULL) { pending_tmp[i] = tmp_path; return; }
    }
    die("internal error: too many temporary files");
}

static void drop_pending(const char *tmp_path) {
    for (int i = 0; i < MAX_PENDING; i++) {
        if (pending_tmp[i] == tmp_path) { pending_tmp[i] = NULL; }
    }
}

static char *path_join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc_or_die(n, "path");
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static char *tmp_name(const char *path) {
    size_t n = strlen(path) + 5;
    char *p = malloc_or_die(n, "path");
    snprintf(p, n, "%s.tmp", path);
    return p;
}

static FILE *create_tmp_or_die(char *tmp_path) {
    add_pending(tmp_path);  // before creating it, so that no exit can miss it
    FILE *f = fopen(tmp_path, "wb");
    if (f == NULL) { die("%s: cannot create: %s", tmp_path, strerror(errno)); }
    return f;
}

// Flushes, syncs and closes f, then renames tmp_path to path. A full disk shows up
// here at the latest (buffered writes, delayed allocation).
static void commit_tmp_or_die(FILE *f, char *tmp_path, const char *path) {
    if (fflush(f) != 0) { die("%s: write failed: %s", tmp_path, strerror(errno)); }
    if (fsync(fileno(f)) != 0 && errno != EINVAL) { die("%s: sync failed: %s", tmp_path, strerror(errno)); }
    if (fclose(f) != 0) { die("%s: close failed: %s", tmp_path, strerror(errno)); }
    if (rename(tmp_path, path) != 0) { die("%s: cannot rename to %s: %s", tmp_path, path, strerror(errno)); }
    drop_pending(tmp_path);
}

// ----------------------------------------------------------------------------
// shards

typedef struct {
    const char *outdir;
    const char *name;
    long val_tokens;     // tokens still owed to the validation shard at the start
    long shard_tokens;   // at most this many per train shard
    // the shard being written
    FILE *f;
    char *path, *tmp_path;
    const char *split;   // "val" or "train"
    int index;           // train shard number
    long count;          // tokens in it so far
    uint16_t buf[1 << 16];
    size_t buf_len;
    // the finished val shard keeps its temporary name until the run succeeds, so a
    // failed run (too few tokens, full disk, ...) leaves no val shard behind
    FILE *val_done_f;
    char *val_done_path, *val_done_tmp;
    long total_tokens, val_written, train_written;
    long documents;      // EOT tokens written
    int train_shards;
} ShardWriter;

static void shard_flush(ShardWriter *w) {
    if (w->buf_len == 0) { return; }
    if (fwrite(w->buf, sizeof(uint16_t), w->buf_len, w->f) != w->buf_len) {
        die("%s: write failed: %s", w->tmp_path, strerror(errno));
    }
    w->buf_len = 0;
}

static void shard_open(ShardWriter *w, const char *split, int index) {
    char file[4096];
    int n = snprintf(file, sizeof(file), "%s_%s_%06d.bin", w->name, split, index);
    if (n < 0 || n >= (int)sizeof(file)) { die("--name: too long"); }
    w->path = path_join(w->outdir, file);
    w->tmp_path = tmp_name(w->path);
    w->f = create_tmp_or_die(w->tmp_path);
    w->split = split;
    w->index = index;
    w->count = 0;
    int header[256] = {0};  // the real count is written when the shard is complete
    if (fwrite(header, sizeof(int), 256, w->f) != 256) { die("%s: write failed: %s", w->tmp_path, strerror(errno)); }
}

static void shard_write_header(ShardWriter *w) {
    shard_flush(w);
    int header[256] = {0};
    header[0] = SHARD_MAGIC;
    header[1] = SHARD_VERSION;
    header[2] = (int)w->count;
    if (fflush(w->f) != 0) { die("%s: write failed: %s", w->tmp_path, strerror(errno)); }
    if (fseek(w->f, 0, SEEK_SET) != 0) { die("%s: cannot seek: %s", w->tmp_path, strerror(errno)); }
    if (fwrite(header, sizeof(int), 256, w->f) != 256) { die("%s: write failed: %s", w->tmp_path, strerror(errno)); }
}

static void shard_commit_val(ShardWriter *w) {
    if (w->val_done_f == NULL) { return; }
    commit_tmp_or_die(w->val_done_f, w->val_done_tmp, w->val_done_path);
    w->val_done_f = NULL;
    free(w->val_done_path);
    free(w->val_done_tmp);
}

// Completes the current shard: header, sync, rename (the val shard's rename waits).
static void shard_close(ShardWriter *w) {
    shard_write_header(w);
    if (strcmp(w->split, "val") == 0) {
        w->val_done_f = w->f;
        w->val_done_path = w->path;
        w->val_done_tmp = w->tmp_path;
    } else {
        commit_tmp_or_die(w->f, w->tmp_path, w->path);
        w->train_shards++;
        free(w->path);
        free(w->tmp_path);
    }
    w->f = NULL;
}

static void shard_write(ShardWriter *w, const uint32_t *tokens, size_t n) {
    const size_t buf_cap = sizeof(w->buf) / sizeof(w->buf[0]);
    size_t i = 0;
    while (i < n) {
        if (w->f == NULL) {
            if (w->val_written < w->val_tokens) { shard_open(w, "val", 0); }
            else { shard_open(w, "train", w->train_shards); }
        }
        int is_val = strcmp(w->split, "val") == 0;
        long room = is_val ? w->val_tokens - w->val_written : w->shard_tokens - w->count;
        size_t take = n - i < (size_t)room ? n - i : (size_t)room;
        for (size_t k = 0; k < take; k++) {
            w->buf[w->buf_len++] = (uint16_t)tokens[i + k];  // < 65536: checked at load
            if (w->buf_len == buf_cap) { shard_flush(w); }
        }
        i += take;
        w->count += (long)take;
        w->total_tokens += (long)take;
        if (is_val) { w->val_written += (long)take; } else { w->train_written += (long)take; }
        if ((long)take == room) { shard_close(w); }
    }
}

// ----------------------------------------------------------------------------
// the tokenizer file

static void write_tokenizer_file(const BPETokenizer *t, const char *outdir) {
    char *path = path_join(outdir, "gpt2_tokenizer.bin");
    char *tmp = tmp_name(path);
    FILE *f = create_tmp_or_die(tmp);
    int header[256] = {0};
    header[0] = TOKENIZER_FILE_MAGIC;
    header[1] = TOKENIZER_FILE_VERSION;
    header[2] = t->vocab_size;
    header[3] = t->eot_token;
    if (fwrite(header, sizeof(int), 256, f) != 256) { die("%s: write failed: %s", tmp, strerror(errno)); }
    for (int id = 0; id < t->vocab_size; id++) {
        size_t len;
        const uint8_t *bytes = bpe_token_bytes(t, (uint32_t)id, &len);
        uint8_t len8 = (uint8_t)len;  // at most 255: checked when encoder.json was read
        if (fwrite(&len8, 1, 1, f) != 1 || fwrite(bytes, 1, len, f) != len) {
            die("%s: write failed: %s", tmp, strerror(errno));
        }
    }
    commit_tmp_or_die(f, tmp, path);
    free(tmp);
    free(path);
}

// ----------------------------------------------------------------------------
// reading

static void make_dirs_or_die(const char *dir) {
    char *p = malloc_or_die(strlen(dir) + 1, "path");
    strcpy(p, dir);
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST) { die("%s: cannot create directory: %s", p, strerror(errno)); }
            *s = c;
            if (c == '\0') { break; }
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0) { die("%s: cannot access: %s", dir, strerror(errno)); }
    if (!S_ISDIR(st.st_mode)) { die("%s: not a directory", dir); }
    free(p);
}

typedef struct {
    double start;
    double last_print;
    long bytes_read;
    int on_terminal;
    ShardWriter *w;
} Progress;

static void progress_show(Progress *p, const ShardWriter *w, int final) {
    if (!p->on_terminal) { return; }
    double now = now_seconds();
    if (!final && now - p->last_print < 0.5) { return; }
    p->last_print = now;
    double s = now - p->start > 1e-9 ? now - p->start : 1e-9;
    fprintf(stderr, "\r%.1f MB read, %ld tokens, %.1f MB/s   %s", p->bytes_read / 1e6, w->total_tokens,
            p->bytes_read / 1e6 / s, final ? "\n" : "");
    fflush(stderr);
}

// text_input.h's token sink: the shards, and the progress line.
static void sink_write(void *ctx, const uint32_t *tokens, size_t n) { shard_write(((Progress *)ctx)->w, tokens, n); }
static void sink_document(void *ctx) { ((Progress *)ctx)->w->documents++; }
static void sink_block(void *ctx, size_t bytes) {
    Progress *p = ctx;
    p->bytes_read += (long)bytes;
    progress_show(p, p->w, 0);
}

static long parse_count_or_die(const char *flag, const char *value, long min, long max) {
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (errno || end == value || *end != '\0' || v < min || v > max) {
        die("%s: expected an integer from %ld to %ld, got \"%s\"", flag, min, max, value);
    }
    return v;
}

static void usage_and_exit(void) {
    fprintf(stderr,
        "usage: ./prepare_data --vocab DIR -i FILE [-i FILE...] -o OUTDIR --name NAME\n"
        "                      [--val-tokens N] [--shard-tokens N] [--threads N] [--split-blank-lines]\n"
        "Writes OUTDIR/NAME_val_000000.bin (the first N tokens, if N > 0), OUTDIR/NAME_train_%%06d.bin\n"
        "and OUTDIR/gpt2_tokenizer.bin in llm.c's formats. Each input file is a document and the\n"
        "EOT token goes before each document; --split-blank-lines also ends a document after\n"
        "every \"\\n\\n\" (llm.c's Tiny Shakespeare sections). Inputs may be gzip-compressed; - reads stdin.\n");
    exit(1);
}

int main(int argc, char **argv) {
    const char *vocab_dir = NULL, *outdir = NULL, *name = NULL;
    const char **inputs = malloc_or_die((size_t)argc * sizeof(char *), "arguments");
    int n_inputs = 0;
    long val_tokens = 0, shard_tokens = 100000000, block_bytes = 4L << 20;
    int n_threads = 1, split_blank_lines = 0;
#ifdef _OPENMP
    n_threads = omp_get_max_threads();
#endif
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) { usage_and_exit(); }
        if (strcmp(a, "--split-blank-lines") == 0) { split_blank_lines = 1; continue; }
        if (a[0] != '-') { die("%s: unexpected argument (inputs are given with -i)", a); }
        if (i + 1 >= argc) { die("%s: missing value", a); }
        const char *v = argv[++i];
        if (strcmp(a, "--vocab") == 0) { vocab_dir = v; }
        else if (strcmp(a, "-i") == 0) { inputs[n_inputs++] = v; }
        else if (strcmp(a, "-o") == 0) { outdir = v; }
        else if (strcmp(a, "--name") == 0) { name = v; }
        else if (strcmp(a, "--val-tokens") == 0) { val_tokens = parse_count_or_die(a, v, 0, INT32_MAX); }
        else if (strcmp(a, "--shard-tokens") == 0) { shard_tokens = parse_count_or_die(a, v, 1, INT32_MAX); }
        else if (strcmp(a, "--threads") == 0) { n_threads = (int)parse_count_or_die(a, v, 1, 64); }
        // bytes of text per thread per step; small values exercise the streaming in tests
        else if (strcmp(a, "--block-bytes") == 0) { block_bytes = parse_count_or_die(a, v, 1, 1L << 30); }
        else { die("%s: unknown option (see ./prepare_data --help)", a); }
    }
    if (vocab_dir == NULL) { die("--vocab DIR is required (the directory with encoder.json and vocab.bpe)"); }
    if (n_inputs == 0) { die("-i FILE is required (at least one input)"); }
    if (outdir == NULL) { die("-o OUTDIR is required"); }
    if (name == NULL) { die("--name NAME is required (shards are OUTDIR/NAME_train_000000.bin, ...)"); }
    if (name[0] == '\0' || strchr(name, '/') != NULL) { die("--name: \"%s\" must be a plain file name prefix", name); }

    BPETokenizer tok;
    bpe_load(&tok, vocab_dir);
    if (tok.eot_token < 0) { die("%s/encoder.json: has no \"%s\" token", vocab_dir, BPE_EOT_STRING); }
    if (tok.vocab_size > 65536) {
        die("%s/encoder.json: %d tokens do not fit llm.c's uint16 shards", vocab_dir, tok.vocab_size);
    }
    // Fail before writing anything if an input cannot be opened or is empty (an
    // empty gzip file is caught after reading it).
    // (Pipes are not opened here: a second open could lose the writer's data.)
    for (int k = 0; k < n_inputs; k++) {
        if (strcmp(inputs[k], "-") == 0) { continue; }
        struct stat st;
        if (stat(inputs[k], &st) != 0) { die("%s: cannot open for reading: %s", inputs[k], strerror(errno)); }
        if (S_ISDIR(st.st_mode)) { die("%s: is a directory, not a text file", inputs[k]); }
        if (!S_ISREG(st.st_mode)) { continue; }
        if (st.st_size == 0) { die("%s: empty input (no text to tokenize)", inputs[k]); }
        fclose(fopen_or_die(inputs[k], "rb"));  // readable?
    }
    make_dirs_or_die(outdir);
    atexit(remove_pending_tmp);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
    signal(SIGPIPE, on_signal);
    write_tokenizer_file(&tok, outdir);

    ShardWriter *w = calloc(1, sizeof(ShardWriter));
    if (w == NULL) { die("out of memory"); }
    w->outdir = outdir;
    w->name = name;
    w->val_tokens = val_tokens;
    w->shard_tokens = shard_tokens;
    Progress progress = { .start = now_seconds(), .on_terminal = isatty(2) };
    progress.w = w;
    TextEncoder enc;
    text_encoder_init(&enc, &tok, n_threads, (size_t)block_bytes, split_blank_lines);
    TokenSink sink = { sink_write, sink_document, sink_block, &progress };
    for (int k = 0; k < n_inputs; k++) {
        char err[4096 + 256];
        long file_bytes = text_input_try_encode(&enc, inputs[k], &sink, err, sizeof(err));
        if (file_bytes < 0) { die("%s", err); }
        if (file_bytes == 0) { die("%s: empty input (no text to tokenize)", inputs[k]); }
    }
    progress_show(&progress, w, 1);
    if (w->total_tokens <= val_tokens) {
        die("only %ld tokens in the input: --val-tokens %ld leaves none for training", w->total_tokens, val_tokens);
    }
    if (w->f != NULL) { shard_close(w); }
    shard_commit_val(w);

    // A previous run with more data may have left higher-numbered shards: they would
    // be read as part of this dataset, so remove them.
    for (int k = w->train_shards;; k++) {
        char file[4096];
        snprintf(file, sizeof(file), "%s_train_%06d.bin", name, k);
        char *stale = path_join(outdir, file);
        int gone = unlink(stale) != 0;
        if (!gone) { fprintf(stderr, "removed %s, left from an earlier run\n", stale); }
        free(stale);
        if (gone) { break; }
    }
    if (val_tokens == 0) {
        char file[4096];
        snprintf(file, sizeof(file), "%s_val_000000.bin", name);
        char *stale = path_join(outdir, file);
        if (unlink(stale) == 0) { fprintf(stderr, "removed %s, left from an earlier run\n", stale); }
        free(stale);
    }

    printf("%s: %ld tokens from %ld document%s: ", outdir, w->total_tokens, w->documents, w->documents == 1 ? "" : "s");
    if (w->val_written > 0) { printf("%ld val (%s_val_000000.bin), ", w->val_written, name); }
    printf("%ld train in %d shard%s (%s_train_*.bin)\n", w->train_written, w->train_shards,
           w->train_shards == 1 ? "" : "s", name);
    if (fflush(stdout) != 0) { die("stdout: write failed: %s", strerror(errno)); }
    text_encoder_free(&enc);
    free(w); free(inputs);
    bpe_free(&tok);
    return 0;
}
