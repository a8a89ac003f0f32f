/*
The AMX bf16 peak: every thread runs TDPBF16PS on four accumulator tiles from two A and two B
tiles loaded once (no memory traffic in the loop), as llmc/gemm_kernel_amx.h's tile does per
16 pairs. One TDPBF16PS is 16 x 16 x 32 multiply-adds = 16384 flops. amx_peak returns 0 where
the CPU (or OS) has no AMX; the code is compiled by target attribute, so this builds anywhere.
*/
#pragma once

#include "common.h"
#include "llmc/precision.h"

#if GEMM_HAVE_AMX_KERNEL && !defined(GEMM_AMX_EMULATE)
GEMM_AMX_TARGET
static void amx_peak_loop(long iters) {
    static const uint8_t zero[1024] __attribute__((aligned(64))) = {0};
    gemm_amx_thread_init();
    _tile_loadd(4, zero, 64);
    _tile_loadd(5, zero, 64);
    _tile_loadd(6, zero, 64);
    _tile_loadd(7, zero, 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (long i = 0; i < iters; i++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    float out[256] __attribute__((aligned(64)));
    _tile_stored(0, out, 64);
    if (out[0] != 0.0f) { printf(" "); }  // keep the loop alive
}

// GFLOP/s of `threads` threads, the best of 3 runs of about 0.2 s; 0 without AMX.
static double amx_peak(int threads) {
    if (!gemm_amx_available()) { return 0.0; }
    const long iters = 2000000;
    double best = 0.0;
    for (int r = 0; r < 4; r++) {  // the first run warms up
        const double t0 = now_seconds();
        #pragma omp parallel num_threads(threads)
        amx_peak_loop(iters);
        const double g = 4.0 * 16384.0 * (double)iters * threads / (now_seconds() - t0) / 1e9;
        if (r > 0 && g > best) { best = g; }
    }
    return best;
}
#else
static double amx_peak(int threads) {
    (void)threads;
    return 0.0;
}
#endif
