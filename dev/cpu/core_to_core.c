/*
How far apart two CPUs are: the round trip of one cache line between them, in ns. Two threads,
pinned to CPU_A and CPU_B, hand a counter back and forth (each waits for the other's write
before it writes), so a round trip is two transfers of the line between their caches.

  ./core_to_core [CPU_A CPU_B]     (default 0 1) prints, the median of 7 batches:
                 round trip CPU 0 - CPU 1: 56.3 ns

Why it is here: the 2-vCPU Zen 4 VMs we measure on are moved by their host, within seconds,
between two placements (docs/speed.md, "the two speeds are the vCPUs' placement"). Both vCPUs on one
CCD (one L3): a round trip of 50-80 ns; on two CCDs: 300-380 ns. The T=64 bf16 step is about 15
ms faster in the first (its threads read each other's results from the shared L3) except for
AdamW, which streams memory through one CCD's link there and takes 63 ms instead of 38. So
make bench prints this round trip beside each of our rows: a step time means little without it.
No OpenMP: the threads must stay on the two CPUs asked for.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include "llmc/utils.h"  // now_seconds

enum { BATCHES = 7, ROUNDS = 20000 };

// The line the two threads hand back and forth, alone on its cache line: -2 until CPU_B's
// thread is pinned (then 0, or -1 where it could not be), then the count of transfers.
static _Alignas(64) _Atomic long turn = -2;
static int cpu_b;

// Pins the calling thread to cpu; 0, or the error number.
static int pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// CPU_B's side: waits for each odd value and answers with the next even one.
static void *answer(void *arg) {
    (void)arg;
    if (pin(cpu_b) != 0) {
        atomic_store(&turn, -1);
        return NULL;
    }
    atomic_store(&turn, 0);
    for (long i = 0; i < (long)BATCHES * ROUNDS; i++) {
        while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * i + 1) {}
        atomic_store_explicit(&turn, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// A CPU number from the command line: 0..CPU_SETSIZE-1, digits only.
static int parse_cpu(const char *s) {
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 0 || v >= CPU_SETSIZE) {
        fprintf(stderr, "core_to_core: '%s' is not a CPU number (0..%d)\n", s, CPU_SETSIZE - 1);
        exit(1);
    }
    return (int)v;
}

int main(int argc, char **argv) {
    if (argc != 1 && argc != 3) {
        fprintf(stderr, "core_to_core: %d arguments: give two CPU numbers or none\n", argc - 1);
        fprintf(stderr, "usage: %s [CPU_A CPU_B]   (default 0 1)\n", argv[0]);
        return 2;
    }
    const int cpu_a = argc == 3 ? parse_cpu(argv[1]) : 0;
    cpu_b = argc == 3 ? parse_cpu(argv[2]) : 1;
    if (cpu_a == cpu_b) {
        fprintf(stderr, "core_to_core: CPU_A and CPU_B are both %d: give two CPUs\n", cpu_a);
        return 1;
    }
    // Both CPUs must be ours to run on before the other thread spins waiting for this one.
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || !CPU_ISSET(cpu_a, &allowed) ||
        !CPU_ISSET(cpu_b, &allowed)) {
        fprintf(stderr, "core_to_core: CPU %d or %d is not available to this process (see nproc, taskset)\n", cpu_a,
                cpu_b);
        return 1;
    }
    if (pin(cpu_a) != 0) {
        fprintf(stderr, "core_to_core: cannot run on CPU %d\n", cpu_a);
        return 1;
    }
    pthread_t other;
    if (pthread_create(&other, NULL, answer, NULL) != 0) {
        fprintf(stderr, "core_to_core: cannot start a second thread\n");
        return 1;
    }
    long ready;
    while ((ready = atomic_load(&turn)) == -2) {}
    if (ready == -1) {
        pthread_join(other, NULL);
        fprintf(stderr, "core_to_core: cannot run on CPU %d\n", cpu_b);
        return 1;
    }
    double ns[BATCHES];
    long i = 0;
    for (int b = 0; b < BATCHES; b++) {
        const double t0 = now_seconds();
        for (int r = 0; r < ROUNDS; r++, i++) {
            atomic_store_explicit(&turn, 2 * i + 1, memory_order_release);
            while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * i + 2) {}
        }
        ns[b] = (now_seconds() - t0) / ROUNDS * 1e9;
    }
    pthread_join(other, NULL);
    qsort(ns, BATCHES, sizeof ns[0], cmp_double);
    printf("round trip CPU %d - CPU %d: %.1f ns\n", cpu_a, cpu_b, ns[BATCHES / 2]);
    return 0;
}
