/*
The AMX bf16 peak: every thread runs TDPBF16PS on four accumulator tiles from two A and two B
tiles loaded once (no memory traffic in the loop), as llmc/gemm_kernel_amx.h's tile does per
16 pairs. One TDPBF16PS is 16 x 16 x 32 multiply-adds = 16384 flops. amx_peak returns 0 where
the CPU (or OS) has no AMX; the code is compiled by target attribute, so this builds anywhere.
The operand tiles hold random bf16s: on the lent Xeon TDPBF16PS ran up to 1.25x faster on
zeros (dev/cpu/amx_tile_loop, results/2026-11-27-xeon-amx runs 16-20), a rate no product of
real data reaches; amx_peak_operands(threads, 1) still times the loop on zeros.
*/
#pragma once

#include "common.h"
#include "llmc/precision.h"

#if GEMM_HAVE_AMX_KERNEL && !defined(GEMM_AMX_EMULATE)
// The A and B operand tiles: random bf16 pairs of magnitude below 2, or zeros.
static const uint8_t *amx_peak_tiles(int zeros) {
    static uint32_t tiles[2][4 * 256] __attribute__((aligned(64)));
    static int filled = 0;
    if (!filled) {
        uint64_t s = 0x9E3779B97F4A7C15ull;
        for (int i = 0; i < 4 * 256; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            tiles[0][i] = (uint32_t)s & 0xbfffbfffu;
            tiles[1][i] = 0;
        }
        filled = 1;
    }
    return (const uint8_t *)tiles[zeros ? 1 : 0];
}

GEMM_AMX_TARGET
static void amx_peak_loop(long iters, const uint8_t *tiles) {
    gemm_amx_thread_init();
    _tile_loadd(4, tiles, 64);
    _tile_loadd(5, tiles + 1024, 64);
    _tile_loadd(6, tiles + 2048, 64);
    _tile_loadd(7, tiles + 3072, 64);
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
    if (out[0] == 12345.0f) { printf(" "); }  // keep the loop alive
}

// GFLOP/s of `threads` threads on random operands (zeros: on zero tiles), the best of 3 runs of
// about 0.2 s; 0 without AMX.
static double amx_peak_operands(int threads, int zeros) {
    if (!gemm_amx_available()) { return 0.0; }
    const long iters = 2000000;
    const uint8_t *tiles = amx_peak_tiles(zeros);
    double best = 0.0;
    for (int r = 0; r < 4; r++) {  // the first run warms up
        const double t0 = now_seconds();
        #pragma omp parallel num_threads(threads)
        amx_peak_loop(iters, tiles);
        const double g = 4.0 * 16384.0 * (double)iters * threads / (now_seconds() - t0) / 1e9;
        if (r > 0 && g > best) { best = g; }
    }
    return best;
}

static double amx_peak(int threads) { return amx_peak_operands(threads, 0); }
#else
static double amx_peak_operands(int threads, int zeros) {
    (void)threads, (void)zeros;
    return 0.0;
}
static double amx_peak(int threads) { return amx_peak_operands(threads, 0); }
#endif
