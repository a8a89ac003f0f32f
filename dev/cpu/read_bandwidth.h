/*
The machine's memory read bandwidth (read_bandwidth.c, and the yardstick of gemv.c): a
streaming sum over a buffer much larger than the caches, each thread summing its own
contiguous part.
*/
#pragma once

#include <stdlib.h>
#include "common.h"

#if defined(__AVX512F__)
#define RB_LANES 16
#elif defined(__AVX2__)
#define RB_LANES 8
#else
#define RB_LANES 4
#endif
typedef float rb_vfloat __attribute__((vector_size(RB_LANES * 4)));
#define RB_CHAINS 8   // independent sums, so the adds never wait on each other

// Best GB/s of `passes` sums of buf (n floats, a multiple of RB_LANES * RB_CHAINS) on `threads` threads.
// Each thread reads its part as one sequential stream: the fastest pattern measured on Zen 4
// (one thread 25-28 GB/s; as 4 streams a quarter of the buffer apart, 18-21 GB/s; 16 chains
// of 1 KiB per step, 10 GB/s), so that the bound it gives is one no kernel beats.
static double read_gbs(const float *buf, size_t n, int threads, int passes) {
    double best = 0.0;
    float sink = 0.0f;
    for (int p = 0; p < passes; p++) {
        double t0 = now_seconds();
        #pragma omp parallel num_threads(threads) reduction(+ : sink)
        {
            const int nt = omp_get_num_threads(), t = omp_get_thread_num();
            const size_t blocks = n / (RB_LANES * RB_CHAINS);
            const size_t b0 = blocks * t / nt, b1 = blocks * (t + 1) / nt;
            rb_vfloat acc[RB_CHAINS] = {{0}};
            for (size_t b = b0; b < b1; b++) {
                const rb_vfloat *v = (const rb_vfloat *)(buf + b * RB_LANES * RB_CHAINS);
                #pragma GCC unroll 8
                for (int c = 0; c < RB_CHAINS; c++) { acc[c] += v[c]; }
            }
            for (int c = 0; c < RB_CHAINS; c++) { sink += acc[c][0]; }
        }
        const double gbs = n * sizeof(float) / (now_seconds() - t0) / 1e9;
        best = gbs > best ? gbs : best;
    }
    if (sink == 12345.0f) { printf(" "); }  // keep the sums alive
    return best;
}

// The floats of a buffer of about mib MiB that read_gbs takes (a whole number of blocks).
static size_t read_buffer_floats(size_t mib) {
    const size_t block = RB_LANES * RB_CHAINS;
    return mib * 1024 * 1024 / sizeof(float) / block * block;
}

// A buffer of n floats first touched by the threads that read it (as the model arena:
// gpt2_create zeroes it in parallel), or NULL.
static float *read_buffer_create(size_t n) {
    float *buf = aligned_alloc(64, n * sizeof(float));
    if (buf == NULL) { return NULL; }
    #pragma omp parallel
    {
        const int nt = omp_get_num_threads(), t = omp_get_thread_num();
        for (size_t i = n * t / nt; i < n * (t + 1) / nt; i++) { buf[i] = 1.0f; }
    }
    return buf;
}
