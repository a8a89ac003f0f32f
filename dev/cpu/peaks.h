/*
The bf16 dot-product peak, shared by fma_peak.c (scripts/bench/bench.sh's MFU yardstick) and
matmul_bf16.c (its "% of peak"): every thread runs independent chains of vdpbf16ps that
never touch memory. Each 512-bit vdpbf16ps multiplies 32 pairs of bf16 and adds them,
pairwise, into 16 fp32 lanes: 64 flops. Compiled with a target attribute and called only
where the CPU has AVX512_BF16 (bf16_dot_available), so it builds on any x86-64.
*/
#pragma once

#include <immintrin.h>
#include "common.h"

static int bf16_dot_available(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512f");
}

// 12 chains of 512-bit vdpbf16ps, acc[c] (16 fp32) += pairwise dot of a and b (32 bf16 each).
// The operands are small (1e-3), so the sums stay normal numbers for any iteration count.
#define BF16_CHAINS 12
__attribute__((target("avx512bf16,avx512f")))
static double bf16_dot_gflops(int threads, long iters) {
    float sink = 0.0f;
    double t0 = now_seconds();
    #pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
        __m512 acc[BF16_CHAINS];
        __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
        __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
        for (int c = 0; c < BF16_CHAINS; c++) { acc[c] = _mm512_set1_ps((float)c); }
        for (long it = 0; it < iters; it++) {
            #pragma GCC unroll 12
            for (int c = 0; c < BF16_CHAINS; c++) { acc[c] = _mm512_dpbf16_ps(acc[c], a, b); }
        }
        for (int c = 0; c < BF16_CHAINS; c++) { sink += _mm512_reduce_add_ps(acc[c]); }
    }
    double seconds = now_seconds() - t0;
    if (sink == 12345.0f) { printf(" "); }  // keep the result alive
    return 64.0 * BF16_CHAINS * (double)iters * threads / seconds / 1e9;
}

// GFLOP/s of `threads` threads: the best of 3 runs after a warm-up (the clocks ramp); 0 without AVX512_BF16.
static double bf16_dot_peak(int threads) {
    if (!bf16_dot_available()) { return 0.0; }
    bf16_dot_gflops(threads, 20000000);
    double best = 0.0;
    for (int r = 0; r < 3; r++) {
        const double g = bf16_dot_gflops(threads, 100000000);
        if (g > best) { best = g; }
    }
    return best;
}
