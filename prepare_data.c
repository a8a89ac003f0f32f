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
so memory stays bounded (a few blocks per thread) whatever the input size. A run
longer than 2 seconds shows its progress on stderr (MB done, MB/s, time left).
Every output file is written through llmc/atomic_file.h (NAME.tmp, fsync, rename,
directory fsync); on any error or signal the temporary files are removed, so no
half-written file ever has a final name.
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
#include "llmc/atomic_file.h"
#include "llmc/bpe.h"
#include "llmc/dataloader.h"
#include "llmc/text_input.h"
#include "llmc/tokenizer.h"
#include "llmc/utils.h"

// A signal removes the temporary files not yet renamed, then ends the process as it would have.
static void on_signal(int sig) {
    atomic_remove_pending();  // async-signal-safe
    signal(sig, SIG_DFL);
    raise(sig);
}

// ----------------------------------------------------------------------------
// shards

typedef struct {
    const char *outdir;
    const char *name;
    long val_tokens;     // tokens still owed to the validation shard at the start
    long shard_tokens;   // at most this many per train shard
    // the shard being written
    AtomicFile file;
    int open;
    const char *split;   // "val" or "train"
    int index;           // train shard number
    long count;          // tokens in it so far
    uint16_t buf[1 << 16];
    size_t buf_len;
    // the finished val shard keeps its temporary name until the run succeeds, so a
    // failed run (too few tokens, full disk, ...) leaves no val shard behind
    AtomicFile val_done;
    int val_pending;
    long total_tokens, val_written, train_written;
    long documents;      // EOT tokens written
    int train_shards;
} ShardWriter;

static void output_path(char *out, const char *outdir, const char *file) {
    if (snprintf(out, PATH_MAX, "%s/%s", outdir, file) >= PATH_MAX) { die("%s/%s: path too long", outdir, file); }
}

static void shard_flush(ShardWriter *w) {
    if (w->buf_len == 0) { return; }
    atomic_write(&w->file, w->buf, w->buf_len * sizeof(uint16_t));
    w->buf_len = 0;
}

static void shard_open(ShardWriter *w, const char *split, int index) {
    char file[PATH_MAX], path[PATH_MAX];
    if (snprintf(file, sizeof(file), "%s_%s_%06d.bin", w->name, split, index) >= (int)sizeof(file)) {
        die("--name: too long");
    }
    output_path(path, w->outdir, file);
    atomic_open(&w->file, path, 0);
    w->open = 1;
    w->split = split;
    w->index = index;
    w->count = 0;
    int header[256] = {0};  // the real count is written when the shard is complete
    atomic_write(&w->file, header, sizeof(header));
}

// Completes the current shard: header, sync, rename (the val shard's rename waits).
static void shard_close(ShardWriter *w) {
    shard_flush(w);
    int header[256] = {0};
    header[0] = SHARD_MAGIC;
    header[1] = SHARD_VERSION;
    header[2] = (int)w->count;
    atomic_write_at(&w->file, 0, header, sizeof(header));
    if (strcmp(w->split, "val") == 0) {
        w->val_done = w->file;
        w->val_pending = 1;
    } else {
        atomic_commit(&w->file);
        w->train_shards++;
    }
    w->open = 0;
}

static void shard_commit_val(ShardWriter *w) {
    if (!w->val_pending) { return; }
    atomic_commit(&w->val_done);
    w->val_pending = 0;
}

static void shard_write(ShardWriter *w, const uint32_t *tokens, size_t n) {
    const size_t buf_cap = sizeof(w->buf) / sizeof(w->buf[0]);
    size_t i = 0;
    while (i < n) {
        if (!w->open) {
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
    char path[PATH_MAX];
    output_path(path, outdir, "gpt2_tokenizer.bin");
    AtomicFile f;
    atomic_open(&f, path, 0);
    int header[256] = {0};
    header[0] = TOKENIZER_MAGIC;
    header[1] = TOKENIZER_VERSION;
    header[2] = t->vocab_size;
    header[3] = t->eot_token;
    atomic_write(&f, header, sizeof(header));
    uint8_t *buf = malloc_or_die((size_t)t->vocab_size * 256, "the tokenizer file");
    size_t n = 0;
    for (int id = 0; id < t->vocab_size; id++) {
        size_t len;
        const uint8_t *bytes = bpe_token_bytes(t, (uint32_t)id, &len);
        buf[n++] = (uint8_t)len;  // at most 255: checked when encoder.json was read
        memcpy(buf + n, bytes, len);
        n += len;
    }
    atomic_write(&f, buf, n);
    free(buf);
    atomic_commit(&f);
}

// ----------------------------------------------------------------------------
// reading


// Progress on stderr, for long inputs: bytes done, MB/s and (when the total is known: plain
// files) the time left. Nothing for the first `delay` seconds, so a quick run prints nothing;
// then on a terminal one line redrawn in place (\r) twice a second (or every `every` s, if
// less), elsewhere (a log) a line every `every` seconds, and a last line when done.
typedef struct {
    double start, last_print;
    double delay, every;  // seconds
    long bytes_read;      // of text, over all inputs so far
    long total_bytes;     // of all inputs, -1: unknown (stdin, a pipe, gzip)
    int on_terminal;
    int shown;            // a progress line was printed
    ShardWriter *w;
} Progress;

static void progress_show(Progress *p, const ShardWriter *w, int final) {
    const double now = now_seconds(), elapsed = now - p->start > 1e-9 ? now - p->start : 1e-9;
    if (final ? !p->shown : elapsed < p->delay || now - p->last_print < (p->on_terminal && p->every > 0.5 ? 0.5 : p->every)) {
        return;
    }
    p->last_print = now;
    p->shown = 1;
    const double mb = p->bytes_read / 1e6, rate = mb / elapsed;
    char line[256];
    if (final) {
        snprintf(line, sizeof(line), "progress: done, %.1f MB in %.1f s, %.1f MB/s, %ld tokens", mb, elapsed, rate,
                 w->total_tokens);
    } else if (p->total_bytes > 0) {
        const double left = rate > 0 ? (p->total_bytes / 1e6 - mb) / rate : 0.0;
        snprintf(line, sizeof(line), "progress: %.1f of %.1f MB (%.0f%%), %.1f MB/s, %.0f s left, %ld tokens", mb,
                 p->total_bytes / 1e6, 100.0 * p->bytes_read / p->total_bytes, rate, left > 0 ? left : 0.0,
                 w->total_tokens);
    } else {
        snprintf(line, sizeof(line), "progress: %.1f MB, %.1f MB/s, %ld tokens", mb, rate, w->total_tokens);
    }
    if (p->on_terminal) { fprintf(stderr, "\r%-79s%s", line, final ? "\n" : ""); }  // pads over a longer line
    else { fprintf(stderr, "%s\n", line); }
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


static void usage_and_exit(void) {
    fprintf(stderr,
        "usage: ./prepare_data --vocab DIR -i FILE [-i FILE...] -o OUTDIR --name NAME\n"
        "                      [--val-tokens N] [--shard-tokens N] [--threads N] [--split-blank-lines]\n"
        "Writes OUTDIR/NAME_val_000000.bin (the first N tokens, if N > 0), OUTDIR/NAME_train_%%06d.bin\n"
        "and OUTDIR/gpt2_tokenizer.bin in llm.c's formats. Each input file is a document and the\n"
        "EOT token goes before each document; --split-blank-lines also ends a document after\n"
        "every \"\\n\\n\" (llm.c's Tiny Shakespeare sections). Inputs may be gzip-compressed; - reads stdin.\n"
        "A run over 2 seconds shows its progress on stderr (MB done, MB/s, time left).\n");
    exit(1);
}

int main(int argc, char **argv) {
    const char *vocab_dir = NULL, *outdir = NULL, *name = NULL;
    const char **inputs = malloc_or_die((size_t)argc * sizeof(char *), "arguments");
    int n_inputs = 0;
    long val_tokens = 0, shard_tokens = 100000000, block_bytes = 4L << 20;
    int n_threads = 1, split_blank_lines = 0;
    Progress progress = {.delay = 2.0, .every = 5.0, .total_bytes = 0};
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
        // DELAY,EVERY: progress after DELAY s, a line every EVERY s off a terminal; for tests
        else if (strcmp(a, "--progress-timing") == 0) {
            char tail;
            if (sscanf(v, "%lf,%lf%c", &progress.delay, &progress.every, &tail) != 2 || !(progress.delay >= 0) ||
                !(progress.every >= 0)) {
                die("%s: expected DELAY,EVERY (seconds), got \"%s\"", a, v);
            }
        }
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
    // The total for the progress's time left: known when every input is a plain file.
    for (int k = 0; k < n_inputs; k++) {
        if (strcmp(inputs[k], "-") == 0) { progress.total_bytes = -1; continue; }
        struct stat st;
        if (stat(inputs[k], &st) != 0) { die("%s: cannot open for reading: %s", inputs[k], strerror(errno)); }
        if (S_ISDIR(st.st_mode)) { die("%s: is a directory, not a text file", inputs[k]); }
        if (!S_ISREG(st.st_mode)) { progress.total_bytes = -1; continue; }
        if (st.st_size == 0) { die("%s: empty input (no text to tokenize)", inputs[k]); }
        FILE *f = fopen_or_die(inputs[k], "rb");  // readable?
        unsigned char magic[2] = {0, 0};
        const int gzipped = fread(magic, 1, 2, f) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
        fclose(f);
        if (gzipped || progress.total_bytes < 0) { progress.total_bytes = -1; }
        else { progress.total_bytes += (long)st.st_size; }
    }
    make_dirs_or_die(outdir, NULL);
    atexit(atomic_remove_pending);  // an error's exit leaves no temporary file
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
    progress.start = now_seconds();
    progress.on_terminal = isatty(2);
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
    if (w->open) { shard_close(w); }
    shard_commit_val(w);

    // A previous run with more data may have left higher-numbered shards: they would
    // be read as part of this dataset, so remove them.
    for (int k = w->train_shards;; k++) {
        char file[4096];
        snprintf(file, sizeof(file), "%s_train_%06d.bin", name, k);
        char stale[PATH_MAX];
        output_path(stale, outdir, file);
        int gone = unlink(stale) != 0;
        if (!gone) { fprintf(stderr, "removed %s, left from an earlier run\n", stale); }
        if (gone) { break; }
    }
    if (val_tokens == 0) {
        char file[4096];
        snprintf(file, sizeof(file), "%s_val_000000.bin", name);
        char stale[PATH_MAX];
        output_path(stale, outdir, file);
        if (unlink(stale) == 0) { fprintf(stderr, "removed %s, left from an earlier run\n", stale); }
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
