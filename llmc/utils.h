/*
Error handling, checked file I/O and timing shared by every program.

A failure is reported as one line on stderr that names the file (or flag) and
the problem, followed by exit(1). Nothing here ever returns on error, so
callers read straight-line code.
*/
#pragma once

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

// Set by a distributed run (llmc/collectives.h): errors name this process's rank, and
// exiting ends every process of the job (MPI_Abort), so that no rank waits forever.
static char die_rank_label[32];          // "rank 1: ", or empty
static void (*die_exit_hook)(int code);  // NULL: plain exit

__attribute__((noreturn))
static void exit_job(int code) {
    if (die_exit_hook != NULL) { die_exit_hook(code); }
    exit(code);
}

// One message per process: when several threads fail at once (gemm called inside a parallel
// region, say), the first one reports and exits; the others wait for that exit to end them.
static int die_started;
static _Thread_local int die_started_here;

__attribute__((noreturn, format(printf, 1, 2)))
static void die(const char *fmt, ...) {
    if (__atomic_exchange_n(&die_started, 1, __ATOMIC_SEQ_CST)) {
        if (die_started_here) { _exit(1); }  // an exit handler failed while dying: stop now
        for (;;) { pause(); }
    }
    die_started_here = 1;
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout);
    fprintf(stderr, "error: %s", die_rank_label);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit_job(1);
}

static FILE *fopen_or_die(const char *path, const char *mode) {
    FILE *f = fopen(path, mode);
    if (f == NULL) {
        die("%s: cannot open for %s: %s", path, mode[0] == 'r' ? "reading" : "writing",
            strerror(errno));
    }
    return f;
}

// Reads exactly n items or dies naming the file: a short read is a truncated file.
static void fread_or_die(void *ptr, size_t size, size_t n, FILE *f, const char *path) {
    size_t got = fread(ptr, size, n, f);
    if (got != n) {
        if (ferror(f)) { die("%s: read error: %s", path, strerror(errno)); }
        die("%s: truncated file (wanted %zu more bytes, found %zu)", path, size * n, size * got);
    }
}

static void fwrite_or_die(const void *ptr, size_t size, size_t n, FILE *f, const char *path) {
    if (fwrite(ptr, size, n, f) != n) { die("%s: write failed: %s", path, strerror(errno)); }
}

// Size of an open file in bytes, or -1 (errno says why); the position is restored.
static long file_size(FILE *f) {
    long pos = ftell(f);
    if (pos < 0 || fseek(f, 0, SEEK_END) != 0) { return -1; }
    long size = ftell(f);
    if (size < 0 || fseek(f, pos, SEEK_SET) != 0) { return -1; }
    return size;
}

static long file_size_or_die(FILE *f, const char *path) {
    long size = file_size(f);
    if (size < 0) { die("%s: cannot seek: %s", path, strerror(errno)); }
    return size;
}

// Reads llm.c's 256 x int32 header and checks its magic number and version.
// `kind` names the file type in the error ("model", "debug state", ...).
// Returns 0, or -1 with a one-line message in err (the try_ loaders, fuzzing).
static int read_header_checked(FILE *f, const char *path, int header[256], int magic, int version,
                               const char *kind, char *err, size_t errlen) {
    long pos = ftell(f), size = file_size(f);
    if (pos < 0 || size < 0) {
        snprintf(err, errlen, "%s: cannot seek: %s", path, strerror(errno));
        return -1;
    }
    if (size - pos < 256 * (long)sizeof(int)) {
        snprintf(err, errlen, "%s: truncated file (shorter than the 1024-byte %s header)", path, kind);
        return -1;
    }
    if (fread(header, sizeof(int), 256, f) != 256) {
        snprintf(err, errlen, "%s: read error: %s", path, strerror(errno));
        return -1;
    }
    if (header[0] != magic) {
        snprintf(err, errlen, "%s: bad magic number %d (a %s file has %d)", path, header[0], kind, magic);
        return -1;
    }
    if (header[1] != version) {
        snprintf(err, errlen, "%s: unsupported %s version %d (expected %d)", path, kind, header[1], version);
        return -1;
    }
    return 0;
}

static void read_header_or_die(FILE *f, const char *path, int header[256], int magic, int version,
                               const char *kind) {
    char err[4096 + 256];
    if (read_header_checked(f, path, header, magic, version, kind, err, sizeof(err)) != 0) { die("%s", err); }
}

static void *malloc_or_die(size_t bytes, const char *what) {
    void *p = malloc(bytes > 0 ? bytes : 1);
    if (p == NULL) { die("out of memory allocating %zu bytes for %s", bytes, what); }
    return p;
}

// 64-byte aligned: one cache line, one AVX-512 register.
static void *aligned_alloc_or_die(size_t bytes, const char *what) {
    size_t rounded = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, rounded > 0 ? rounded : 64);
    if (p == NULL) { die("out of memory allocating %zu bytes for %s", bytes, what); }
    return p;
}

// For the big arenas: 2 MiB aligned (whole pages, cache-line aligned tensors) and marked for
// transparent huge pages, which Linux's default THP mode ("madvise") gives to marked regions
// only: the products walk the weights, their bf16 copy and the gradients over 512 times fewer
// pages (a bf16 T=64 step 2% faster on Zen 4, for about a second more start-up at GPT-2 124M;
// docs/speed.md).
static void *arena_alloc_or_die(size_t bytes, const char *what) {
    const size_t huge = 2u << 20;
    size_t rounded = (bytes + huge - 1) / huge * huge;
    if (rounded == 0) { rounded = huge; }
    void *p = aligned_alloc(huge, rounded);
    if (p == NULL) { die("out of memory allocating %zu bytes for %s", bytes, what); }
#ifdef MADV_HUGEPAGE
    (void)madvise(p, rounded, MADV_HUGEPAGE);  // a hint: where the kernel says no, small pages
#endif
    return p;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// The integer value of a command-line flag, from min to max, or a one-line error naming it.
static long parse_count_or_die(const char *flag, const char *value, long min, long max) {
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (errno || end == value || *end != '\0' || v < min || v > max) {
        die("%s: expected an integer from %ld to %ld, got \"%s\"", flag, min, max, value);
    }
    return v;
}

// mkdir -p dir, or a one-line error naming the directory that cannot be made (after
// "FLAG DIR: " when the directory came with a flag, NULL otherwise).
static void make_dirs_or_die(const char *dir, const char *flag) {
    const char *sep = flag != NULL ? " " : "", *f = flag != NULL ? flag : "", *d = flag != NULL ? dir : "";
    const char *colon = flag != NULL ? ": " : "";
    char *p = malloc_or_die(strlen(dir) + 1, "path");
    strcpy(p, dir);
    for (char *s = p;; s++) {
        if ((*s == '/' && s > p) || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                die("%s%s%s%s%s: cannot create directory: %s", f, sep, d, colon, p, strerror(errno));
            }
            *s = c;
            if (c == '\0') { break; }
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0) { die("%s%s%s: cannot access: %s", f, sep, dir, strerror(errno)); }
    if (!S_ISDIR(st.st_mode)) { die("%s%s%s: not a directory", f, sep, dir); }
    free(p);
}

// The CPU's vendor, for the choices measured per vendor.
typedef enum { CPU_OTHER, CPU_AMD, CPU_INTEL } CpuVendor;
static CpuVendor cpu_vendor(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_is("amd")) { return CPU_AMD; }
    if (__builtin_cpu_is("intel")) { return CPU_INTEL; }
#endif
    return CPU_OTHER;
}

// Environment variable name as a switch: 0 or 1, def where it is unset; anything else dies with
// a message saying what 0 means (off) and, where on is not NULL, what 1 means. Serial code.
static int env_flag(const char *name, int def, const char *off, const char *on) {
    const char *env = getenv(name);
    if (env == NULL) { return def; }
    if (strcmp(env, "0") != 0 && strcmp(env, "1") != 0) {
        die("%s=%s: expected 0 (%s) or 1%s%s%s", name, env, off, on != NULL ? " (" : "", on != NULL ? on : "", on != NULL ? ")" : "");
    }
    return env[0] == '1';
}
// env_flag for a switch whose default is decided at each use: -1 where name is unset.
static int env_flag_or_unset(const char *name, const char *off, const char *on) {
    return getenv(name) == NULL ? -1 : env_flag(name, 0, off, on);
}

// 1 if the memory-bound passes (AdamW, GELU's backward) fetch their sources ahead by software
// prefetches, as measured per vendor (dev/cpu/adamw, and in the step): on Intel's Xeons (family 6
// model 207, 2026-11-28) AdamW ran 80-83 ms with them against 91-99 without; on AMD's Zen 4
// (family 25 model 17, 2026-11-28) 68-88 ms with them against 65-71 without, its hardware
// prefetchers keeping up alone. So on for Intel's CPUs only; LLMC_SOFT_PREFETCH=0|1 forces it.
// Serial code: the first call reads the environment.
static int soft_prefetch_enabled(void) {
    static int enabled = -1;
    if (enabled < 0) {
        enabled = env_flag("LLMC_SOFT_PREFETCH", cpu_vendor() == CPU_INTEL, "no software prefetches in the memory-bound passes", NULL);
    }
    return enabled;
}
