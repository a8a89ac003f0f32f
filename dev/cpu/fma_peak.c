/*
The machine's arithmetic peaks, the yardsticks for MFU in scripts/bench/bench.sh:
every thread runs independent chains of vector instructions that never touch memory.

  ./fma_peak        prints GFLOP/s with all threads (OMP_NUM_THREADS) and with one:
                    fp32 FMA peak: 229.3 GFLOP/s with 2 threads, 114.9 with 1 (16-lane vectors)
                    bf16 dot peak: 458.1 GFLOP/s with 2 threads, 229.6 with 1 (vdpbf16ps, 512-bit)
                    (or "bf16 dot peak: none: this CPU has no AVX512_BF16")
                    AMX bf16 peak: 2000.0 GFLOP/s with 2 threads, ... (TDPBF16PS tiles, amx_peak.h)
                    (or "AMX bf16 peak: none: this CPU (or OS) has no AMX")

fp32: the vector width is the widest the build targets (16 floats with AVX-512,
8 with AVX2, 4 otherwise); 12 chains cover the FMA latency of current cores.
bf16: vdpbf16ps (AVX512_BF16), the instruction a bf16 GEMM runs on: each 512-bit one
multiplies 32 pairs of bf16 and adds them, pairwise, into 16 fp32 lanes, i.e. 32
multiply-adds = 64 flops. It is compiled with a target attribute and called only when
the CPU has it (checked at run time), so this file builds and runs on any x86-64.
*/
#include <immintrin.h>
#include "amx_peak.h"
#include "bf16_peak.h"
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

// The best of 3 timed runs with `threads` threads of fn.
static double best_of_3(double (*fn)(int, long), int threads, long iters) {
    double best = 0.0;
    for (int r = 0; r < 3; r++) {
        double g = fn(threads, iters);
        if (g > best) { best = g; }
    }
    return best;
}

int main(void) {
    int threads = omp_get_max_threads();
    fma_gflops(threads, 20000000);  // warm up: clocks ramp
    double all = best_of_3(fma_gflops, threads, 100000000);
    double one = best_of_3(fma_gflops, 1, 100000000);
    printf("fp32 FMA peak: %.1f GFLOP/s with %d threads, %.1f with 1 (%d-lane vectors)\n", all, threads, one,
           PEAK_LANES);
    if (bf16_dot_available()) {
        all = bf16_dot_peak(threads);
        one = bf16_dot_peak(1);
        printf("bf16 dot peak: %.1f GFLOP/s with %d threads, %.1f with 1 (vdpbf16ps, 512-bit)\n", all, threads, one);
    } else {
        printf("bf16 dot peak: none: this CPU has no AVX512_BF16\n");
    }
    all = amx_peak(threads);
    if (all > 0.0) {
        one = amx_peak(1);
        printf("AMX bf16 peak: %.1f GFLOP/s with %d threads, %.1f with 1 (TDPBF16PS tiles)\n", all, threads, one);
    } else {
        printf("AMX bf16 peak: none: this CPU (or OS) has no AMX\n");
    }
    return 0;
}
