/*
The machine's memory read bandwidth: a streaming sum over a buffer much larger
than the caches, each thread summing its own contiguous part (first touched by
that thread). The yardstick for generate's tokens/s (scripts/bench_generate.sh):
one token of incremental decoding reads every weight once, so bytes of weights /
this bandwidth is the fastest a token can be.

  ./read_bandwidth [MiB]   prints GB/s (1e9 bytes/s) with all threads (OMP_NUM_THREADS)
                           and with one, best of 7 passes; default 1024 MiB
*/
#include <stdlib.h>
#include "common.h"

#if defined(__AVX512F__)
#define LANES 16
#elif defined(__AVX2__)
#define LANES 8
#else
#define LANES 4
#endif
typedef float vfloat __attribute__((vector_size(LANES * 4)));
#define CHAINS 8   // independent sums, so the adds never wait on each other
#define STREAMS 4  // sequential streams per thread

// Best GB/s of `passes` sums of buf (n floats, a multiple of LANES * CHAINS * STREAMS) on `threads` threads.
static double read_gbs(const float *buf, size_t n, int threads, int passes) {
    double best = 0.0;
    float sink = 0.0f;
    for (int p = 0; p < passes; p++) {
        double t0 = now_seconds();
        #pragma omp parallel num_threads(threads) reduction(+ : sink)
        {
            const int nt = omp_get_num_threads(), t = omp_get_thread_num();
            // the thread's part is read as STREAMS sequential streams at once (as the GEMV reads
            // 4 weight rows): one stream alone leaves the prefetchers short of memory parallelism
            const size_t blocks = n / (LANES * CHAINS) / STREAMS;
            const size_t b0 = blocks * t / nt, b1 = blocks * (t + 1) / nt;
            vfloat acc[CHAINS] = {{0}};
            for (size_t b = b0; b < b1; b++) {
                #pragma GCC unroll 4
                for (int st = 0; st < STREAMS; st++) {
                    const vfloat *v = (const vfloat *)(buf + (st * blocks + b) * LANES * CHAINS);
                    #pragma GCC unroll 8
                    for (int c = 0; c < CHAINS; c++) { acc[c] += v[c]; }
                }
            }
            for (int c = 0; c < CHAINS; c++) { sink += acc[c][0]; }
        }
        const double gbs = n * sizeof(float) / (now_seconds() - t0) / 1e9;  // blocks * STREAMS covers all of n
        best = gbs > best ? gbs : best;
    }
    if (sink == 12345.0f) { printf(" "); }  // keep the sums alive
    return best;
}

int main(int argc, char **argv) {
    const size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1024;
    if (mib < 64 || mib > 65536) { fprintf(stderr, "error: %s MiB: outside 64..65536\n", argv[1]); return 2; }
    const size_t n = mib * 1024 * 1024 / sizeof(float) / (LANES * CHAINS * STREAMS) * (LANES * CHAINS * STREAMS);
    float *buf = aligned_alloc(64, n * sizeof(float));
    if (buf == NULL) { fprintf(stderr, "error: cannot allocate %zu MiB\n", mib); return 1; }
    const int threads = omp_get_max_threads();
    // first touch by the threads that read it (as the model arena: gpt2_create zeroes it in parallel)
    #pragma omp parallel num_threads(threads)
    {
        const int nt = omp_get_num_threads(), t = omp_get_thread_num();
        for (size_t i = n * t / nt; i < n * (t + 1) / nt; i++) { buf[i] = 1.0f; }
    }
    printf("read bandwidth over %zu MiB: %.1f GB/s with %d threads, %.1f GB/s with 1\n", mib,
           read_gbs(buf, n, threads, 7), threads, read_gbs(buf, n, 1, 7));
    free(buf);
    return 0;
}
