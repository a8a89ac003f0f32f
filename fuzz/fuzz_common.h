/*
Shared by the libFuzzer harnesses (fuzz/fuzz_*.c; docs/testing.md, "Fuzzing").

The loaders read files by path, so each input is written to a file of this
process's own (fuzz_dir()) and the real loader reads it back.
A loader's error return is an ordinary outcome; a crash, a sanitizer report, a
leak, a timeout, or a failed property check (fuzz_check) is a finding.
*/
#pragma once

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// A property the harness checks: on failure, say which and abort (libFuzzer then
// saves the input as a crash).
#define fuzz_check(cond, ...) do { if (!(cond)) { fprintf(stderr, "property failed: " __VA_ARGS__); \
    fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__); abort(); } } while (0)

static char fuzz_dir_path[4096];

// Removes the directory and its files when the fuzzer exits (not after a crash:
// then they are evidence).
static void fuzz_dir_remove(void) {
    DIR *d = opendir(fuzz_dir_path);
    if (d == NULL) { return; }
    struct dirent *e;
    char path[8192];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) { continue; }
        snprintf(path, sizeof(path), "%s/%s", fuzz_dir_path, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(fuzz_dir_path);
}

// A directory of this process's own for the files it writes, made once: under
// $TMPDIR if set, else /dev/shm (memory: about 25x the executions per second of a
// disk-backed /tmp here), else /tmp.
static const char *fuzz_dir(void) {
    if (fuzz_dir_path[0] == '\0') {
        const char *tmp = getenv("TMPDIR");
        if (tmp == NULL || tmp[0] == '\0') { tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"; }
        snprintf(fuzz_dir_path, sizeof(fuzz_dir_path), "%s/llmc_fuzz_XXXXXX", tmp);
        if (mkdtemp(fuzz_dir_path) == NULL) { perror("mkdtemp"); abort(); }
        atexit(fuzz_dir_remove);
    }
    return fuzz_dir_path;
}

// Writes data to fuzz_dir()/name and returns the path (static storage, per name slot).
static const char *fuzz_write_file(const char *name, const uint8_t *data, size_t size) {
    static char paths[4][4096];
    static int next = 0;
    char *path = paths[next++ % 4];
    snprintf(path, 4096, "%s/%s", fuzz_dir(), name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || (size > 0 && fwrite(data, 1, size, f) != size) || fclose(f) != 0) { perror(path); abort(); }
    return path;
}

// The model code prints its config and memory use: keep the fuzzer's output readable.
static void fuzz_quiet_stdout(void) {
    if (freopen("/dev/null", "w", stdout) == NULL) { perror("/dev/null"); abort(); }
}

// The GPT-2 vocabulary for the BPE harnesses: $FUZZ_VOCAB_DIR, else data/gpt2 (make
// setup's copy), else the tiny hand-made one in fuzz/vocab_tiny.
static const char *fuzz_vocab_dir(void) {
    const char *dir = getenv("FUZZ_VOCAB_DIR");
    if (dir != NULL && dir[0] != '\0') { return dir; }
    if (access("data/gpt2/encoder.json", R_OK) == 0 && access("data/gpt2/vocab.bpe", R_OK) == 0) { return "data/gpt2"; }
    return "fuzz/vocab_tiny";
}
