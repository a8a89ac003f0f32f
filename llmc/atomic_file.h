/*
Crash-safe output files: a file is written as NAME.tmp, fsync'ed, renamed to NAME, and the
directory fsync'ed, so NAME exists only when complete and a crash at any moment leaves the
files written before intact. Checkpoints (llmc/checkpoint.h) and prepare_data's shards and
tokenizer file are written this way.

The temporary files not yet renamed are registered (a few at once): a signal handler or an
exit handler removes them with atomic_remove_pending (async-signal-safe), so that no
half-written file outlives the process (llmc/runctl.h's second stop signal, prepare_data's
signals and errors). A failed write, sync or rename removes its own temporary file and ends
the process with one line naming the file.
*/
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "utils.h"

#define ATOMIC_MAX_PENDING 4

// The temporary files being written; a slot's path is complete before its flag is set.
static char atomic_pending_path[ATOMIC_MAX_PENDING][PATH_MAX + 8];
static volatile sig_atomic_t atomic_pending_active[ATOMIC_MAX_PENDING];

// Async-signal-safe: sig_atomic_t loads and unlink only.
static void atomic_remove_pending(void) {
    for (int i = 0; i < ATOMIC_MAX_PENDING; i++) {
        if (atomic_pending_active[i]) { unlink(atomic_pending_path[i]); }
    }
}

typedef struct {
    int fd;
    int slot;           // in atomic_pending_path
    char path[PATH_MAX];
    char tmp[PATH_MAX + 8];
    size_t written;
    size_t kill_after;  // testing hook: signal ourselves once this many bytes are written (0: never)
} AtomicFile;

// The testing hook's signal: SIGKILL, or SIGTERM for two stop signals in a row.
static int atomic_fault_signal = SIGKILL;

static void atomic_unregister(AtomicFile *af) {
    atomic_pending_active[af->slot] = 0;
}

static void atomic_fail(AtomicFile *af, const char *what, int err) {
    if (af->fd >= 0) { close(af->fd); }
    unlink(af->tmp);
    atomic_unregister(af);
    die("%s: %s: %s", af->path, what, strerror(err));
}

static void atomic_open(AtomicFile *af, const char *path, size_t kill_after) {
    if (snprintf(af->path, sizeof(af->path), "%s", path) >= (int)sizeof(af->path)) { die("%s: path too long", path); }
    snprintf(af->tmp, sizeof(af->tmp), "%s.tmp", path);
    af->slot = -1;
    for (int i = 0; i < ATOMIC_MAX_PENDING && af->slot < 0; i++) {
        if (!atomic_pending_active[i]) { af->slot = i; }
    }
    if (af->slot < 0) { die("%s: more than %d files written at once", path, ATOMIC_MAX_PENDING); }
    // registered before it exists, so that no exit can miss it
    atomic_signal_fence(memory_order_seq_cst);
    snprintf(atomic_pending_path[af->slot], sizeof(atomic_pending_path[af->slot]), "%s", af->tmp);
    atomic_signal_fence(memory_order_seq_cst);
    atomic_pending_active[af->slot] = 1;
    af->fd = open(af->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (af->fd < 0) { atomic_unregister(af); die("%s: cannot create: %s", af->tmp, strerror(errno)); }
    af->written = 0;
    af->kill_after = kill_after;
}

static void atomic_write(AtomicFile *af, const void *data, size_t n) {
    const char *p = data;
    while (n > 0) {
        size_t chunk = n < (64u << 20) ? n : (64u << 20);
        if (af->kill_after > 0 && af->written + chunk >= af->kill_after) {
            chunk = af->kill_after > af->written ? af->kill_after - af->written : 1;
        }
        ssize_t w = write(af->fd, p, chunk);
        if (w < 0 && errno == EINTR) { continue; }
        if (w <= 0) { atomic_fail(af, "write failed", w < 0 ? errno : ENOSPC); }
        p += w;
        n -= (size_t)w;
        af->written += (size_t)w;
        if (af->kill_after > 0 && af->written >= af->kill_after) {
            raise(atomic_fault_signal);
            raise(atomic_fault_signal);
        }
    }
}

// Overwrites n bytes at offset (inside what was written: a header completed at the end).
static void atomic_write_at(AtomicFile *af, size_t offset, const void *data, size_t n) {
    const char *p = data;
    while (n > 0) {
        ssize_t w = pwrite(af->fd, p, n, (off_t)offset);
        if (w < 0 && errno == EINTR) { continue; }
        if (w <= 0) { atomic_fail(af, "write failed", w < 0 ? errno : ENOSPC); }
        p += w;
        n -= (size_t)w;
        offset += (size_t)w;
    }
}

// fsync, rename into place, fsync the directory: the file now exists, complete.
static void atomic_commit(AtomicFile *af) {
    if (fsync(af->fd) != 0) { atomic_fail(af, "fsync failed", errno); }
    const int fd = af->fd;
    af->fd = -1;
    if (close(fd) != 0) { atomic_fail(af, "close failed", errno); }
    if (rename(af->tmp, af->path) != 0) { atomic_fail(af, "rename failed", errno); }
    atomic_unregister(af);
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", af->path);
    char *slash = strrchr(dir, '/');
    if (slash != NULL) { *slash = '\0'; } else { snprintf(dir, sizeof(dir), "."); }
    if (dir[0] == '\0') { snprintf(dir, sizeof(dir), "/"); }
    // the rename is durable only once the directory is: a failure here is a failed write
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) { die("%s: cannot open its directory to sync it: %s", af->path, strerror(errno)); }
    if (fsync(dfd) != 0 && errno != EINVAL) { die("%s: fsync of the directory failed: %s", af->path, strerror(errno)); }
    close(dfd);
}
