/*
The GEMM micro-kernel: one GEMM_MR x GEMM_NR tile of C (or its first rows, in the last row
panel) from packed panels of A and B.

Written once with GCC vector extensions (llmc/vecmath.h); the variants differ only by the
vector width VEC_WIDTH, which follows the target like every other kernel's:

  VEC_WIDTH  vector           tile (MR x NR)   registers           for
  16         16 floats, zmm   12 x 32          24 acc of 32 zmm    AVX-512 (Zen 4/5, Skylake-X)
   8          8 floats, ymm    6 x 16          12 acc of 16 ymm    AVX2 + FMA (Zen 2/3, Haswell)
   4          4 floats, xmm    6 x 8           12 acc of 16 xmm    any x86-64 (SSE2), other ISAs

-DVEC_WIDTH=16|8|4 forces one. Any width compiles and runs on any x86-64: a vector wider
than the target's is split by GCC into narrower ones, slow but the same arithmetic (with FMA
where the target has it), which is how the AVX-512 variant is tested on an AVX2 machine
(dev/cpu/gemm_check.c, scripts/test_gemm.sh, scripts/test_gpt2.sh).

Packed layouts (written by gemm.h):
  a panel: kc x MR, a[k*MR + i] = A(i, k)  (rows past the edge of A are zero)
  b panel: kc x NR, b[k*NR + j] = B(k, j)  (columns past the edge of B are zero)
Each element of the tile is one running fp32 sum over k in increasing order, with one fused
multiply-add per k where the target has FMA (GCC contracts a*b+c under -std=gnu11, whose
default is -ffp-contract=fast), so results do not depend on where the tile sits in C.
*/
#pragma once

#include <stddef.h>

#include "gelu.h"  // gelu_vec, the epilogue's GELU (and vecmath.h)

#define GEMM_VEC VEC_WIDTH               // floats per vector
#define GEMM_MR (VEC_WIDTH == 16 ? 12 : 6)  // rows of the tile: one broadcast each per k
#define GEMM_NV 2                        // vectors across the tile: GEMM_NR = GEMM_NV * GEMM_VEC columns
#define GEMM_NR (GEMM_NV * GEMM_VEC)

// gemm_vf: aligned vector (packed panels, 64-byte aligned); gemm_vfu: any alignment (C, bias).
typedef vfloat gemm_vf;
typedef vfloat_u gemm_vfu;

// What the micro-kernel does with its tile of sums after the k loop. C (and cin, pre) are
// row-major with unit column stride; all pointers point at the tile's (0, 0).
typedef struct {
    const float *cin;  // MR x NR tile added to the sums (C itself after the first k block,
    ptrdiff_t ldcin;   //   the caller's addend or NULL on the first)
    const float *bias; // NR values added to every row, or NULL
    float *pre;        // with gelu: where the value before GELU goes, or NULL
    ptrdiff_t ldpre;
    int gelu;          // 1: C gets gelu(value)
} gemm_tile_epilogue;

// A micro-kernel reads and writes its tile of C (reads cin: C itself or the caller's addend;
// writes pre, with GELU) after its k loop, often from L3, where the previous k block left it.
// Its lines are fetched in two steps: into L2 as the call starts (into_l1 0), and into L1
// GEMM_C_LEAD k steps before the loop ends (into_l1 1). Fetched into L1 at the start, they were
// evicted again on Zen 4 before the end: its L1 (32 KiB) has room for the b panel (24 KiB) and
// little more, and a panels stream through it. Measured on Zen 4 over GPT-2 124M's products,
// bit-identical results: 1-2% faster (2-8% on T=1024's), fp32 and bf16 alike; 16 k steps were
// too few, 128 less good.
// Fetching pre too made fc's forward product (GELU) 2% faster in fp32 at T=64.
#ifndef GEMM_C_LEAD
#define GEMM_C_LEAD 64
#endif
// The lines of R rows of `width` floats at p (rows ld apart): into L2 (into_l1 0) or into L1,
// for writing (write 1) or reading. width and the flags are constants at every call, and so is
// R in the micro-kernels.
static inline __attribute__((always_inline)) void gemm_fetch_rows(const int R, const int width, const float *p,
                                                                  ptrdiff_t ld, const int write, const int into_l1) {
    #pragma GCC unroll 16
    for (int i = 0; i < R; i++) {
        if (!into_l1) {
            __builtin_prefetch(p + i * ld, 0, 1);
            __builtin_prefetch(p + i * ld + width - 1, 0, 1);
        } else if (write) {
            __builtin_prefetch(p + i * ld, 1, 3);
            __builtin_prefetch(p + i * ld + width - 1, 1, 3);
        } else {
            __builtin_prefetch(p + i * ld, 0, 3);
            __builtin_prefetch(p + i * ld + width - 1, 0, 3);
        }
    }
}

// The tiles the epilogue touches: C (written), cin (read, unless NULL or C itself) and pre
// (written, unless NULL).
static inline __attribute__((always_inline)) void gemm_fetch_tile(const int R, const int width, const float *c,
                                                                  ptrdiff_t ldc, const float *cin, ptrdiff_t ldcin,
                                                                  const float *pre, ptrdiff_t ldpre, const int into_l1) {
    gemm_fetch_rows(R, width, c, ldc, 1, into_l1);
    if (cin != NULL && cin != c) { gemm_fetch_rows(R, width, cin, ldcin, 0, into_l1); }
    if (pre != NULL) { gemm_fetch_rows(R, width, pre, ldpre, 1, into_l1); }
}

// c (R x NR, row stride ldc) = epilogue(sum over k < kc of the first R rows of a panel (kc x MR)
// x b panel (kc x NR)); cin and pre are R x NR too. R (1..MR) is a compile-time constant at every
// call (gemm_micro_kernel below), so the accumulators stay in registers and a tile of the last,
// partial row panel (M = B*T = 256 leaves 4 rows of 12, or of 6) costs R rows' work.
static inline __attribute__((always_inline)) void
gemm_micro_kernel_rows(const int R, int kc, const float *restrict a, const float *restrict b, float *c,
                       ptrdiff_t ldc, const gemm_tile_epilogue *ep) {
    const float *pre = ep->gelu ? ep->pre : NULL;  // written after the k loop
    gemm_fetch_tile(R, GEMM_NR, c, ldc, ep->cin, ep->ldcin, pre, ep->ldpre, 0);
    const int fetch_at = kc > GEMM_C_LEAD ? kc - GEMM_C_LEAD : 0;
    gemm_vf acc[GEMM_MR][GEMM_NV];
    #pragma GCC unroll 16
    for (int i = 0; i < R; i++) {
        #pragma GCC unroll 4
        for (int j = 0; j < GEMM_NV; j++) { acc[i][j] = (gemm_vf){0}; }
    }
    for (int k = 0; k < kc; k++) {
        if (k == fetch_at) { gemm_fetch_tile(R, GEMM_NR, c, ldc, ep->cin, ep->ldcin, pre, ep->ldpre, 1); }
        gemm_vf bk[GEMM_NV];
        #pragma GCC unroll 4
        for (int j = 0; j < GEMM_NV; j++) { bk[j] = ((const gemm_vf *)b)[j]; }
        #pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            const float ai = a[i];
            #pragma GCC unroll 4
            for (int j = 0; j < GEMM_NV; j++) { acc[i][j] += ai * bk[j]; }
        }
        a += GEMM_MR;  // the panel's rows past R are zero padding
        b += GEMM_NR;
    }
    if (ep->cin != NULL) {
        #pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            #pragma GCC unroll 4
            for (int j = 0; j < GEMM_NV; j++) {
                acc[i][j] += *(const gemm_vfu *)(ep->cin + i * ep->ldcin + j * GEMM_VEC);
            }
        }
    }
    if (ep->bias != NULL) {
        #pragma GCC unroll 4
        for (int j = 0; j < GEMM_NV; j++) {
            const gemm_vf bias = *(const gemm_vfu *)(ep->bias + j * GEMM_VEC);
            #pragma GCC unroll 16
            for (int i = 0; i < R; i++) { acc[i][j] += bias; }
        }
    }
    if (ep->gelu) {
        if (ep->pre != NULL) {
            #pragma GCC unroll 16
            for (int i = 0; i < R; i++) {
                #pragma GCC unroll 4
                for (int j = 0; j < GEMM_NV; j++) {
                    *(gemm_vfu *)(ep->pre + i * ep->ldpre + j * GEMM_VEC) = acc[i][j];
                }
            }
        }
        #pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            #pragma GCC unroll 4
            for (int j = 0; j < GEMM_NV; j++) { acc[i][j] = gelu_vec(acc[i][j]); }
        }
    }
    #pragma GCC unroll 16
    for (int i = 0; i < R; i++) {
        #pragma GCC unroll 4
        for (int j = 0; j < GEMM_NV; j++) { *(gemm_vfu *)(c + i * ldc + j * GEMM_VEC) = acc[i][j]; }
    }
}

// The tile of mr rows (1..MR) x NR: gemm_micro_kernel_rows with R = mr.
static void gemm_micro_kernel(int mr, int kc, const float *restrict a, const float *restrict b, float *c,
                              ptrdiff_t ldc, const gemm_tile_epilogue *ep) {
    switch (mr) {
    VEC_CASES_ROWS_1_TO_6(gemm_micro_kernel_rows, kc, a, b, c, ldc, ep)
#if GEMM_MR > 6
    VEC_CASES_ROWS_7_TO_12(gemm_micro_kernel_rows, kc, a, b, c, ldc, ep)
#endif
    default: break;
    }
}
