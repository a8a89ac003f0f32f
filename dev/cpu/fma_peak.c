/*
The machine's fp32 FMA peak: every thread runs independent chains of vector
FMAs that never touch memory. The yardstick for MFU in scripts/bench.sh.

  ./fma_peak        prints GFLOP/s with all threads (OMP_NUM_THREADS) and with one

The vector width is the widest the build targets (16 floats with AVX-512,
8 with AVX2, 4 otherwise); 12 chains cover the FMA latency of current cores.
*/
#include "common.h"

#if defined(__AVX512F__)
#define PEAK_LANES 16
#elif defined(__AVX2__)
#define PEAK_LANES 8
#else
#define PEAK_LANES 4
#endif
typedef float vfloat __attribute__((vector_size(PEAK_LANES * 4)));
#define CHAINS 12

static double fma_gflops(int threads, long iters) {
    float sink = 0.0f;
    double t0 = now_seconds();
    #pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
        vfloat acc[CHAINS];
        vfloat a = {0}, b = {0};
        a += 0.999999f;
        b += 1e-7f;
        for (int c = 0; c < CHAINS; c++) { acc[c] = a * (float)c; }
        for (long it = 0; it < iters; it++) {
            #pragma GCC unroll 12
            for (int c = 0; c < CHAINS; c++) { acc[c] = acc[c] * a + b; }
        }
        for (int c = 0; c < CHAINS; c++) { sink += acc[c][0]; }
    }
    double seconds = now_seconds() - t0;
    if (sink == 12345.0f) { printf(" "); }  // keep the result alive
    return 2.0 * PEAK_LANES * CHAINS * (double)iters * threads / seconds / 1e9;
}

int main(void) {
    int threads = omp_get_max_threads();
    fma_gflops(threads, 20000000);  // warm up: clocks ramp
    double all = 0.0, one = 0.0;
    for (int r = 0; r < 3; r++) {
        double g = fma_gflops(threads, 100000000);
        if (g > all) { all = g; }
    }
    for (int r = 0; r < 3; r++) {
        double g = fma_gflops(1, 100000000);
        if (g > one) { one = g; }
    }
    printf("fp32 FMA peak: %.1f GFLOP/s with %d threads, %.1f with 1 (%d-lane vectors)\n", all, threads, one,
           PEAK_LANES);
    return 0;
}
