/*
GPT-2 BPE from the command line, for inspection, diffing and benchmarking.

    ./tokenize --vocab DIR [--ids] FILE...     token ids of each file, one per line
    ./tokenize --vocab DIR --decode FILE       ids (one per line) back to the original bytes
    ./tokenize --vocab DIR --bench FILE        encode speed in MB/s, single- and multi-threaded
    ./tokenize --vocab DIR --records FILE      FILE holds texts, each ended by a NUL byte: one
                                               line of space-separated ids per text (for the
                                               eval-data scripts: many short texts, one process)

FILE may be "-" for standard input; gzip-compressed files are read transparently.
Each file is encoded as one ordinary text: no EOT is added (prepare_data does that).

Testing knobs: --heap-min N merges pieces of N bytes and more with the heap method;
--threads N encodes on N threads; --char-classes prints the code point ranges of
the pre-tokenizer's classes (letter, number, space, other) and needs no vocabulary.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <zlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "llmc/utils.h"
#include "llmc/bpe.h"

static void usage_and_exit(void) {
    fprintf(stderr,
        "usage: ./tokenize --vocab DIR [--ids] FILE...    print each file's token ids, one per line\n"
        "       ./tokenize --vocab DIR --decode FILE      turn token ids (one per line) back into text\n"
        "       ./tokenize --vocab DIR --bench FILE       measure encoding speed (MB/s)\n"
        "       ./tokenize --vocab DIR --records FILE     texts each ended by a NUL byte -> a line of ids per text\n"
        "options: --threads N (default: all cores), --reps N (bench repetitions, default 20)\n"
        "DIR holds GPT-2's encoder.json and vocab.bpe; FILE may be - for stdin, or gzip-compressed.\n");
    exit(1);
}

// Reads a whole (possibly gzip-compressed) file or stdin into memory.
static uint8_t *read_input(const char *path, size_t *size_out) {
    gzFile gz = strcmp(path, "-") == 0 ? gzdopen(0, "rb") : gzopen(path, "rb");
    if (gz == NULL) { die("%s: cannot open for reading: %s", path, errno ? strerror(errno) : "out of memory"); }
    size_t cap = 1 << 20, size = 0;
    uint8_t *buf = malloc_or_die(cap, path);
    for (;;) {
        if (size == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            if (buf == NULL) { die("%s: out of memory reading the input", path); }
        }
        size_t want = cap - size > (1u << 30) ? (1u << 30) : cap - size;
        int got = gzread(gz, buf + size, (unsigned)want);
        if (got < 0) {
            int err;
            const char *msg = gzerror(gz, &err);
            die("%s: read error: %s", path, err == Z_ERRNO ? strerror(errno) : msg);
        }
        if (got == 0) { break; }
        size += (size_t)got;
    }
    // gzread returns 0 both at the end and for a gzip stream cut short
    int err;
    const char *msg = gzerror(gz, &err);
    if (err != Z_OK && err != Z_BUF_ERROR) { die("%s: read error: %s", path, msg); }
    if (err == Z_BUF_ERROR) { die("%s: truncated gzip stream", path); }
    gzclose(gz);
    *size_out = size;
    return buf;
}

static void write_stdout_or_die(const void *p, size_t n) {
    if (fwrite(p, 1, n, stdout) != n) { die("stdout: write failed: %s", strerror(errno)); }
}

static void flush_stdout_or_die(void) {
    if (fflush(stdout) != 0 || ferror(stdout)) { die("stdout: write failed: %s", strerror(errno)); }
}

static void print_ids(const TokenVec *tokens) {
    char line[16];
    for (size_t i = 0; i < tokens->len; i++) {
        // a hand-rolled itoa: printf is the bottleneck for millions of lines
        uint32_t v = tokens->data[i];
        int k = sizeof(line);
        line[--k] = '\n';
        do { line[--k] = (char)('0' + v % 10); v /= 10; } while (v);
        write_stdout_or_die(line + k, sizeof(line) - (size_t)k);
    }
}

static void emit_stdout(void *ctx, const uint8_t *bytes, size_t n) { write_stdout_or_die(bytes, n); }

static void decode_file(const BPETokenizer *t, const char *path) {
    size_t size;
    uint8_t *text = read_input(path, &size);
    char err[4096 + 256];
    if (bpe_try_decode_id_text(t, text, size, path, emit_stdout, NULL, err, sizeof(err)) != 0) { die("%s", err); }
    free(text);
}

// --records: FILE is texts, each followed by a NUL byte; prints one line per text,
// its ids separated by spaces (an empty text gives an empty line).
static void encode_records(const BPETokenizer *t, const char *path) {
    size_t size;
    uint8_t *text = read_input(path, &size);
    if (size > 0 && text[size - 1] != 0) { die("%s: the last text is not ended by a NUL byte (truncated?)", path); }
    BPECache cache;
    bpe_cache_init(&cache);
    TokenVec tokens = {0};
    char num[16];
    for (size_t start = 0; start < size;) {
        size_t end = start;
        while (text[end] != 0) { end++; }
        tokens.len = 0;
        bpe_encode(t, &cache, text + start, end - start, &tokens);
        for (size_t i = 0; i < tokens.len; i++) {
            int n = snprintf(num, sizeof(num), i == 0 ? "%u" : " %u", tokens.data[i]);
            write_stdout_or_die(num, (size_t)n);
        }
        write_stdout_or_die("\n", 1);
        start = end + 1;
    }
    bpe_cache_free(&cache);
    tokenvec_free(&tokens);
    free(text);
}

// Ranges "FIRST LAST CLASS" (hex code points) of equal class, for comparing the
// generated tables with another implementation.
static void print_char_classes(void) {
    static const char *names[] = { "other", "letter", "number", "space" };
    uint32_t start = 0;
    int cls = unicode_class(0);
    for (uint32_t cp = 1; cp <= 0x110000; cp++) {
        int c = cp < 0x110000 ? unicode_class(cp) : -1;
        if (c != cls) {
            printf("%04X %04X %s\n", start, cp - 1, names[cls]);
            start = cp;
            cls = c;
        }
    }
}

static int default_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static double thread_cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Wall-clock seconds of one cold-cache encode; *cpu gets the calling thread's CPU
// seconds (the same for one thread when the machine is quiet; on a busy machine it
// leaves out the time other processes had the core).
static double encode_seconds(const BPETokenizer *t, BPECache *caches, TokenVec *parts, int n_threads,
                             const uint8_t *text, size_t size, TokenVec *out, double *cpu) {
    for (int k = 0; k < n_threads; k++) { bpe_cache_clear(&caches[k]); }  // cold: no head start
    out->len = 0;
    double c0 = thread_cpu_seconds(), t0 = now_seconds();
    bpe_encode_parallel(t, caches, parts, n_threads, text, size, out);
    double seconds = now_seconds() - t0;
    *cpu = thread_cpu_seconds() - c0;
    return seconds;
}

// Best of `reps` cold-cache runs on the file (best-of-many sees past other processes
// taking the core), then best of a few on the file repeated to at least
// 32 MB, single-threaded and on n_threads threads (the results must be identical).
static void bench(const BPETokenizer *t, const char *path, int n_threads, int reps, double load_seconds) {
    size_t size;
    uint8_t *text = read_input(path, &size);
    if (size == 0) { die("%s: empty input", path); }
    BPECache *caches = malloc_or_die((size_t)n_threads * sizeof(BPECache), "caches");
    TokenVec *parts = calloc((size_t)n_threads, sizeof(TokenVec));
    for (int k = 0; k < n_threads; k++) { bpe_cache_init(&caches[k]); }
    TokenVec ref = {0}, out = {0};
    printf("vocabulary loaded in %.1f ms\n", 1e3 * load_seconds);

    double best = 1e30, best_cpu = 1e30, cpu;
    for (int r = 0; r < reps; r++) {
        double s = encode_seconds(t, caches, parts, 1, text, size, &ref, &cpu);
        if (s < best) { best = s; }
        if (cpu < best_cpu) { best_cpu = cpu; }
    }
    printf("%s: %.2f MB, %zu tokens\n", path, size / 1e6, ref.len);
    printf("single-threaded encode: %.1f MB/s (best of %d, cold cache; %.1f MB per CPU-second)\n",
           size / 1e6 / best, reps, size / 1e6 / best_cpu);

    size_t copies = (32000000 + size - 1) / size, big_size = copies * size;
    uint8_t *big = malloc_or_die(big_size, "benchmark text");
    for (size_t c = 0; c < copies; c++) { memcpy(big + c * size, text, size); }
    double best1 = 1e30, bestn = 1e30;
    int big_reps = reps < 5 ? reps : 5;
    for (int r = 0; r < big_reps; r++) {
        double s = encode_seconds(t, caches, parts, 1, big, big_size, &ref, &cpu);
        if (s < best1) { best1 = s; }
        s = encode_seconds(t, caches, parts, n_threads, big, big_size, &out, &cpu);
        if (s < bestn) { bestn = s; }
    }
    int same = ref.len == out.len && memcmp(ref.data, out.data, ref.len * sizeof(uint32_t)) == 0;
    printf("%zu copies (%.1f MB, %zu tokens): single-threaded %.1f MB/s, %d threads %.1f MB/s, outputs %s\n",
           copies, big_size / 1e6, ref.len, big_size / 1e6 / best1, n_threads, big_size / 1e6 / bestn,
           same ? "identical" : "DIFFERENT");
    if (!same) { die("multi-threaded encoding differs from single-threaded"); }
    for (int k = 0; k < n_threads; k++) { bpe_cache_free(&caches[k]); tokenvec_free(&parts[k]); }
    free(caches); free(parts); free(big); free(text);
    tokenvec_free(&ref); tokenvec_free(&out);
}


int main(int argc, char **argv) {
    const char *vocab_dir = NULL;
    int decode = 0, do_bench = 0, records = 0, n_threads = default_threads(), reps = 20;
    const char **files = malloc_or_die((size_t)argc * sizeof(char *), "arguments");
    int n_files = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (strcmp(a, "--vocab") == 0) {
            if (!has_value) { die("--vocab: missing directory"); }
            vocab_dir = argv[++i];
        } else if (strcmp(a, "--ids") == 0) {
            decode = 0;
        } else if (strcmp(a, "--decode") == 0) {
            decode = 1;
        } else if (strcmp(a, "--bench") == 0) {
            do_bench = 1;
        } else if (strcmp(a, "--records") == 0) {
            records = 1;
        } else if (strcmp(a, "--threads") == 0) {
            if (!has_value) { die("--threads: missing value"); }
            n_threads = (int)parse_count_or_die(a, argv[++i], 1, 64);
        } else if (strcmp(a, "--reps") == 0) {
            if (!has_value) { die("--reps: missing value"); }
            reps = (int)parse_count_or_die(a, argv[++i], 1, 1000);
        } else if (strcmp(a, "--heap-min") == 0) {
            if (!has_value) { die("--heap-min: missing value"); }
            bpe_heap_min_bytes = (size_t)parse_count_or_die(a, argv[++i], 2, 1L << 30);
        } else if (strcmp(a, "--char-classes") == 0) {
            print_char_classes();
            flush_stdout_or_die();
            return 0;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage_and_exit();
        } else if (a[0] == '-' && a[1] != '\0') {
            die("%s: unknown option (see ./tokenize --help)", a);
        } else {
            files[n_files++] = a;
        }
    }
    if (vocab_dir == NULL) { die("--vocab DIR is required (the directory with encoder.json and vocab.bpe)"); }
    if (n_files == 0) { die("no input FILE given (see ./tokenize --help)"); }
    if ((decode || do_bench || records) && n_files != 1) {
        die("%s takes exactly one FILE", decode ? "--decode" : do_bench ? "--bench" : "--records");
    }

    double t0 = now_seconds();
    BPETokenizer tok;
    bpe_load(&tok, vocab_dir);
    double load_seconds = now_seconds() - t0;

    if (do_bench) {
        bench(&tok, files[0], n_threads, reps, load_seconds);
    } else if (decode) {
        decode_file(&tok, files[0]);
    } else if (records) {
        encode_records(&tok, files[0]);
    } else {
        BPECache *caches = malloc_or_die((size_t)n_threads * sizeof(BPECache), "caches");
        TokenVec *parts = calloc((size_t)n_threads, sizeof(TokenVec));
        for (int k = 0; k < n_threads; k++) { bpe_cache_init(&caches[k]); }
        TokenVec tokens = {0};
        for (int f = 0; f < n_files; f++) {
            size_t size;
            uint8_t *text = read_input(files[f], &size);
            tokens.len = 0;
            bpe_encode_parallel(&tok, caches, parts, n_threads, text, size, &tokens);
            print_ids(&tokens);
            free(text);
        }
        for (int k = 0; k < n_threads; k++) { bpe_cache_free(&caches[k]); tokenvec_free(&parts[k]); }
        free(caches); free(parts);
        tokenvec_free(&tokens);
    }
    flush_stdout_or_die();
    bpe_free(&tok);
    free(files);
    return 0;
}
