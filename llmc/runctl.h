/*
Run control for long unattended training runs:
- graceful stop: SIGINT or SIGTERM sets a flag that the training loop reads at
  each step boundary (it then writes a checkpoint, logs why it stopped and exits
  0); a second signal exits at once with status 128+signal, first removing the
  temporary file of a checkpoint being written (the finished ones stay intact).
- one run per directory: an exclusive flock on DIR/lock, held for the process's
  lifetime (the kernel drops it when the process dies, however it dies), with
  the holder's PID written into the file for the error message of a second run.
- checked log writes: a failing write to main.log (ENOSPC, EFBIG, EIO) ends the
  run with a one-line error naming the file, the partial line cut off again.
*/
#pragma once

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/types.h>
#include <unistd.h>

#include "atomic_file.h"
#include "utils.h"

// ----------------------------------------------------------------------------
// graceful stop

static volatile sig_atomic_t runctl_signal = 0;  // the first stop signal received, 0: none
// Async-signal-safe: only sig_atomic_t stores, write, unlink and _exit.
static void runctl_on_signal(int sig) {
    if (runctl_signal != 0) {
        atomic_remove_pending();  // the checkpoint being written (llmc/atomic_file.h)
        static const char msg[] = "train_gpt2: second signal: exiting now (the finished checkpoints are intact)\n";
        ssize_t ignored = write(STDERR_FILENO, msg, sizeof(msg) - 1);
        (void)ignored;
        _exit(128 + sig);
    }
    runctl_signal = sig;
    static const char msg[] = "train_gpt2: stop requested: finishing this step, then a checkpoint "
                              "(a second signal exits at once)\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof(msg) - 1);
    (void)ignored;
}

// Installs the handler for SIGINT and SIGTERM (also when the shell started us with
// SIGINT ignored, as it does for background jobs: a stop request is never lost).
static void runctl_install_signal_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = runctl_on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // reads and writes go on; the flag is polled
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

// The signal that asked the run to stop (SIGINT or SIGTERM), 0 if none did.
static int runctl_stop_requested(void) { return runctl_signal; }

static const char *runctl_signal_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "signal";
}

// ----------------------------------------------------------------------------
// one run per directory

// Takes the exclusive lock DIR/lock for the rest of the process's life, or exits
// with one line naming the PID of the run that holds it.
static void runctl_lock_dir(const char *dir) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/lock", dir) >= (int)sizeof(path)) { die("-o %s: path too long", dir); }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) { die("%s: cannot open the run's lock file: %s", path, strerror(errno)); }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK) { die("%s: cannot lock: %s", path, strerror(errno)); }
        // the holder writes its PID right after locking: wait a moment for it
        char pid[32] = "";
        for (int tries = 0; tries < 50 && pid[0] == '\0'; tries++) {
            ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
            pid[n > 0 ? n : 0] = '\0';
            pid[strcspn(pid, "\n")] = '\0';
            if (pid[0] == '\0') { usleep(10000); }
        }
        die("%s: another train_gpt2 (PID %s) is running in %s; one run per directory", path,
            pid[0] != '\0' ? pid : "unknown", dir);
    }
    char pid[32];
    int len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        die("%s: cannot write the PID: %s", path, strerror(errno));
    }
    // fd stays open (and locked) until the process exits
}

// Removes the temporary files of checkpoints (model_S.bin.tmp, state_S.bin.tmp) that a
// killed run left behind. Only while holding DIR's lock: no other run is writing them.
static void runctl_remove_stale_tmp(const char *dir) {
    DIR *d = opendir(dir);
    if (d == NULL) { return; }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int step, end = 0;
        if ((sscanf(e->d_name, "model_%d.bin.tmp%n", &step, &end) == 1 ||
             sscanf(e->d_name, "state_%d.bin.tmp%n", &step, &end) == 1) &&
            end > 0 && e->d_name[end] == '\0') {
            char path[PATH_MAX];
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            if (unlink(path) == 0) { printf("removed %s (left by an interrupted run)\n", path); }
        }
    }
    closedir(d);
}

// ----------------------------------------------------------------------------
// main.log

typedef struct {
    int fd;            // -1: no log (no -o)
    const char *path;
    off_t size;        // bytes of complete lines in the file
} RunLog;

static void runlog_open(RunLog *log, const char *path) {
    log->path = path;
    log->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (log->fd < 0) { die("%s: cannot open for writing: %s", path, strerror(errno)); }
    log->size = lseek(log->fd, 0, SEEK_END);
    if (log->size < 0) { die("%s: cannot seek: %s", path, strerror(errno)); }
}

// Appends one line (fmt has its "\n") with write(2), no stdio buffer: a failed write
// ends the run naming the file, and the part of the line that did get written is cut
// off again, so that a resumed run appends after a complete line.
__attribute__((format(printf, 2, 3)))
static void runlog_printf(RunLog *log, const char *fmt, ...) {
    if (log->fd < 0) { return; }
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n < 0 || n >= (int)sizeof(line)) { die("%s: log line too long", log->path); }
    for (int done = 0; done < n;) {
        ssize_t w = write(log->fd, line + done, (size_t)(n - done));
        if (w < 0 && errno == EINTR) { continue; }
        if (w <= 0) {
            int err = w < 0 ? errno : ENOSPC;
            if (ftruncate(log->fd, log->size) != 0) { /* the write's error is the one to report */ }
            die("%s: write failed: %s", log->path, strerror(err));
        }
        done += (int)w;
    }
    log->size += n;
}

static void runlog_close(RunLog *log) {
    if (log->fd < 0) { return; }
    if (fsync(log->fd) != 0 && errno != EINVAL) { die("%s: fsync failed: %s", log->path, strerror(errno)); }
    if (close(log->fd) != 0) { die("%s: close failed: %s", log->path, strerror(errno)); }
    log->fd = -1;
}
