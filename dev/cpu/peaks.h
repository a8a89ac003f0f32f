/*
The arithmetic peaks, shared by fma_peak.c (scripts/bench/bench.sh's MFU yardsticks), amx_bench.c
and matmul_bf16.c (their "% of peak"): every thread runs llmc/precision.h's independent chains of
vector instructions that never touch memory (the loops train_gpt2 times for a millisecond at
start-up to choose its bf16 path), here for longer, or amx_peak.h's TDPBF16PS loop.
- fp32 FMA: VEC_WIDTH lanes an instruction (the widest the build targets), 2 flops a lane.
- vdpbf16ps (AVX512_BF16): each 512-bit one multiplies 32 pairs of bf16 and adds them, pairwise,
  into 16 fp32 lanes: 64 flops. Compiled with a target attribute and called only where the CPU
  has it (bf16_dot_available), so this builds on any x86-64.
*/
#pragma once

#include "amx_peak.h"
#include "common.h"
#include "llmc/precision.h"

static int bf16_dot_available(void) { return bf16_path_available(BF16_PATH_AVX512BF16); }

// GFLOP/s of `threads` threads, each running the chains for `iters` rounds.
static double fma_gflops(int threads, long iters) {
    double madds = 0.0;  // a second, summed over the threads
    #pragma omp parallel num_threads(threads) reduction(+ : madds)
    madds += fma_madds_per_second(iters);
    return 2.0 * madds / 1e9;
}
static double bf16_dot_gflops(int threads, long iters) {
    double madds = 0.0;
#if GEMM_HAVE_BF16_KERNEL
    #pragma omp parallel num_threads(threads) reduction(+ : madds)
    madds += bf16_dot_madds_per_second(iters);
#else
    (void)threads, (void)iters;
#endif
    return 2.0 * madds / 1e9;
}

// The best of 3 runs of 100M rounds after a warm-up of 20M (the clocks ramp).
static double peak_best_of_3(double (*gflops)(int, long), int threads) {
    gflops(threads, 20000000);
    double best = 0.0;
    for (int r = 0; r < 3; r++) {
        const double g = gflops(threads, 100000000);
        if (g > best) { best = g; }
    }
    return best;
}

// GFLOP/s of `threads` threads: the fp32 FMA's, and vdpbf16ps's (0 without AVX512_BF16).
static double fma_peak_gflops(int threads) { return peak_best_of_3(fma_gflops, threads); }
static double bf16_dot_peak(int threads) { return bf16_dot_available() ? peak_best_of_3(bf16_dot_gflops, threads) : 0.0; }

// The yardstick of this run's products (matmul_set_precision called): AMX tiles on the amx
// path, vdpbf16ps on the avx512bf16 path, else the fp32 FMA (fp32, and bf16 on the emulated path,
// which runs the fp32 kernel); *name says which.
static double peak_of_run(int threads, const char **name) {
    if (precision_is_bf16() && precision_bf16_path() == BF16_PATH_AMX) {
        *name = "AMX TDPBF16PS";
        return amx_peak(threads);
    }
    if (precision_is_bf16() && precision_bf16_path() == BF16_PATH_AVX512BF16) {
        *name = "vdpbf16ps";
        return bf16_dot_peak(threads);
    }
    *name = "fp32 FMA";
    return fma_peak_gflops(threads);
}
