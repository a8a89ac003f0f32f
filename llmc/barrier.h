/*
A barrier for the threads of one OpenMP parallel region that spins briefly, then sleeps.

Incremental decoding (gpt2_cache.h, gpt2_cache_step) runs a token in one parallel region with
about 5 barriers per layer between its small matmuls. OpenMP's own barrier follows
OMP_WAIT_POLICY, read from the environment: active (or libgomp's default, a long spin)
is fastest on an idle machine and 5-10x slower on a busy one, where a spinning thread
burns the time slice its partner needs; passive sleeps at once and pays a futex wake
(tens of microseconds in a VM) at every barrier. This one spins for up to
SPIN_BARRIER_SPIN_S, which covers the imbalance of a barrier on an idle machine, then
sleeps on a futex (Linux; elsewhere it yields), whatever the environment says.

    static SpinBarrier b;   // zero-initialized; one per concurrent region
    spin_barrier_wait(&b, omp_get_num_threads());   // from every thread of the team
*/
#pragma once

#include <limits.h>
#include <stdatomic.h>
#include <time.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#include <sched.h>
#endif

#define SPIN_BARRIER_SPIN_S 50e-6

typedef struct {
    atomic_int arrived;   // threads at the barrier now
    atomic_int phase;     // +1 each time the barrier opens (the futex word)
    atomic_int sleepers;  // threads that may be asleep on phase
} SpinBarrier;

static inline void spin_barrier_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static inline double spin_barrier_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Waits until all n threads of the team have called it (n the same in all of them).
static void spin_barrier_wait(SpinBarrier *b, int n) {
    if (n <= 1) { return; }
    const int phase = atomic_load(&b->phase);
    if (atomic_fetch_add(&b->arrived, 1) == n - 1) {  // the last to arrive opens it
        atomic_store(&b->arrived, 0);  // nobody comes back before phase moves
        atomic_fetch_add(&b->phase, 1);
        // seq_cst: a sleeper increments sleepers before it reads phase, so either it sees the
        // new phase or this sees it among the sleepers
        if (atomic_load(&b->sleepers) > 0) {
#ifdef __linux__
            syscall(SYS_futex, &b->phase, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#endif
        }
        return;
    }
    const double deadline = spin_barrier_now() + SPIN_BARRIER_SPIN_S;
    for (int i = 1; atomic_load_explicit(&b->phase, memory_order_acquire) == phase; i++) {
        spin_barrier_pause();
        if ((i & 31) == 0 && spin_barrier_now() > deadline) { break; }
    }
    atomic_fetch_add(&b->sleepers, 1);
    while (atomic_load(&b->phase) == phase) {
#ifdef __linux__
        syscall(SYS_futex, &b->phase, FUTEX_WAIT_PRIVATE, phase, NULL, NULL, 0);  // returns at once if phase moved
#else
        sched_yield();
#endif
    }
    atomic_fetch_sub(&b->sleepers, 1);
}
