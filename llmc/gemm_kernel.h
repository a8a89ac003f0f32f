/*
The GEMM micro-kernel: one GEMM_MR x GEMM_NR tile of C from packed panels of A and B.

Written once with GCC vector extensions; the variants differ only by constants:

  GEMM_KERNEL  vector           tile (MR x NR)   registers           for
  512          16 floats, zmm   12 x 32          24 acc of 32 zmm    AVX-512 (Zen 4/5, Skylake-X)
  256           8 floats, ymm    6 x 16          12 acc of 16 ymm    AVX2 + FMA (Zen 2/3, Haswell)
  128           4 floats, xmm    6 x 8           12 acc of 16 xmm    any x86-64 (SSE2), other ISAs

The variant follows the target (__AVX512F__, then __AVX2__ with __FMA__, else 128) unless
-DGEMM_KERNEL=512|256|128 forces one. Any variant compiles and runs on any x86-64: a vector
wider than the target's is split by GCC into narrower ones, slow but the same arithmetic (with
FMA where the target has it), which is how the AVX-512 variant is tested on an AVX2 machine
(dev/cpu/gemm_check.c, scripts/test_gemm.sh).

Packed layouts (written by gemm.h):
  a panel: kc x MR, a[k*MR + i] = A(i, k)  (rows past the edge of A are zero)
  b panel: kc x NR, b[k*NR + j] = B(k, j)  (columns past the edge of B are zero)
Each element of the tile is one running fp32 sum over k in increasing order, with one fused
multiply-add per k where the target has FMA (GCC contracts a*b+c under -std=gnu11, whose
default is -ffp-contract=fast), so results do not depend on where the tile sits in C.
*/
#pragma once

#include <stddef.h>

#ifndef GEMM_KERNEL
#  if defined(__AVX512F__)
#    define GEMM_KERNEL 512
#  elif defined(__AVX2__) && defined(__FMA__)
#    define GEMM_KERNEL 256
#  else
#    define GEMM_KERNEL 128
#  endif
#endif

#if GEMM_KERNEL == 512
#  define GEMM_VEC 16  // floats per vector
#  define GEMM_MR 12   // rows of the tile: one broadcast each per k
#  define GEMM_NV 2    // vectors across the tile: GEMM_NR = GEMM_NV * GEMM_VEC columns
#elif GEMM_KERNEL == 256
#  define GEMM_VEC 8
#  define GEMM_MR 6
#  define GEMM_NV 2
#elif GEMM_KERNEL == 128
#  define GEMM_VEC 4
#  define GEMM_MR 6
#  define GEMM_NV 2
#else
#  error "GEMM_KERNEL must be 512, 256 or 128"
#endif
#define GEMM_NR (GEMM_NV * GEMM_VEC)

// gemm_vf: aligned vector (packed panels, 64-byte aligned); gemm_vfu: any alignment (C, bias).
typedef float gemm_vf __attribute__((vector_size(GEMM_VEC * sizeof(float))));
typedef float gemm_vfu __attribute__((vector_size(GEMM_VEC * sizeof(float)), aligned(4), may_alias));
typedef int gemm_vi __attribute__((vector_size(GEMM_VEC * sizeof(int))));

// *v = exp(*v) in every lane, within 2 ulp for arguments in [-86, 88.72]; below that it gives
// exp(-86) (callers only need it tiny), above it +inf (the true value overflows), NaN for NaN.
// (Vectors go by pointer: a vector wider than the target, as in a forced variant, must not be
// an argument or result, whose ABI would change.)
static inline void gemm_vexp(gemm_vf *v) {
    gemm_vf y = *v;
    const gemm_vf lo = (gemm_vf){0} - 86.0f, hi = (gemm_vf){0} + 88.72f;
    const gemm_vi overflow = y > hi;
    y = (gemm_vf)(((gemm_vi)y & ~(y < lo)) | ((gemm_vi)lo & (y < lo)));
    y = (gemm_vf)(((gemm_vi)y & ~overflow) | ((gemm_vi)hi & overflow));
    // y = n ln2 + r with n = round(y / ln2), |r| <= ln2 / 2; ln2 split in two (Cody-Waite)
    // so n*ln2_hi is exact. Adding 1.5 * 2^23 rounds to an integer in the low mantissa bits.
    const float round_magic = 12582912.0f;
    gemm_vf n = (y * 1.44269504088896341f + round_magic) - round_magic;
    gemm_vf r = y - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    // exp(r) on [-ln2/2, ln2/2]: Cephes expf polynomial.
    gemm_vf p = r * 1.9875691500e-4f + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    // times 2^n = 2^(n-1) * 2, 2^(n-1) built in the exponent bits (n - 1 is in [-125, 127])
    const gemm_vi two_n_minus_1 = (__builtin_convertvector(n, gemm_vi) + 126) << 23;
    const gemm_vf e = p * (gemm_vf)two_n_minus_1 * 2.0f;
    const gemm_vf inf = (gemm_vf){0} + __builtin_inff();
    *v = (gemm_vf)(((gemm_vi)e & ~overflow) | ((gemm_vi)inf & overflow));
}

// GELU with the tanh approximation, 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
// computed as x / (1 + exp(-2u)) (the same function: 1 + tanh(u) = 2 / (1 + exp(-2u))),
// which keeps full relative precision where 1 + tanh(u) is tiny (x very negative).
// *v = gelu(*v) in every lane.
static inline void gemm_vgelu(gemm_vf *v) {
    const gemm_vf x = *v;
    const float two_sqrt_2_over_pi = 2.0f * 0.7978845608028654f;
    gemm_vf minus_2u = x * (x * x * (-two_sqrt_2_over_pi * 0.044715f) - two_sqrt_2_over_pi);
    gemm_vexp(&minus_2u);
    *v = x / (minus_2u + 1.0f);
}

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

// c (MR x NR, row stride ldc) = epilogue(sum over k < kc of a panel (kc x MR) x b panel (kc x NR)).
static inline void gemm_micro_kernel(int kc, const float *restrict a, const float *restrict b,
                                     float *c, ptrdiff_t ldc, const gemm_tile_epilogue *ep) {
    // The tile of C is written (and C or the addend read) after the k loop, typically from L3
    // as the previous k block left it: ask for those lines now, so that the loads and stores
    // at the end find them in L1.
    #pragma GCC unroll 16
    for (int i = 0; i < GEMM_MR; i++) {
        __builtin_prefetch(c + i * ldc, 1);
        __builtin_prefetch(c + i * ldc + GEMM_NR - 1, 1);
    }
    if (ep->cin != NULL && ep->cin != c) {
        #pragma GCC unroll 16
        for (int i = 0; i < GEMM_MR; i++) {
            __builtin_prefetch(ep->cin + i * ep->ldcin);
            __builtin_prefetch(ep->cin + i * ep->ldcin + GEMM_NR - 1);
        }
    }
    gemm_vf acc[GEMM_MR][GEMM_NV];
    #pragma GCC unroll 16
    for (int i = 0; i < GEMM_MR; i++) {
        #pragma GCC unroll 4
        for (int j = 0; j < GEMM_NV; j++) { acc[i][j] = (gemm_vf){0}; }
    }
    for (int k = 0; k < kc; k++) {
        gemm_vf bk[GEMM_NV];
        #pragma GCC unroll 4
        for (int j = 0; j < GEMM_NV; j++) { bk[j] = ((const gemm_vf *)b)[j]; }
        #pragma GCC unroll 16
        for (int i = 0; i < GEMM_MR; i++) {
            const float ai = a[i];
            #pragma GCC unroll 4
            for (int j = 0; j < GEMM_NV; j++) { acc[i][j] += ai * bk[j]; }
        }
        a += GEMM_MR;
        b += GEMM_NR;
    }
    if (ep->cin != NULL) {
        #pragma GCC unroll 16
        for (int i = 0; i < GEMM_MR; i++) {
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
            for (int i = 0; i < GEMM_MR; i++) { acc[i][j] += bias; }
        }
    }
    if (ep->gelu) {
        if (ep->pre != NULL) {
            #pragma GCC unroll 16
            for (int i = 0; i < GEMM_MR; i++) {
                #pragma GCC unroll 4
                for (int j = 0; j < GEMM_NV; j++) {
                    *(gemm_vfu *)(ep->pre + i * ep->ldpre + j * GEMM_VEC) = acc[i][j];
                }
            }
        }
        #pragma GCC unroll 16
        for (int i = 0; i < GEMM_MR; i++) {
            #pragma GCC unroll 4
            for (int j = 0; j < GEMM_NV; j++) { gemm_vgelu(&acc[i][j]); }
        }
    }
    #pragma GCC unroll 16
    for (int i = 0; i < GEMM_MR; i++) {
        #pragma GCC unroll 4
        for (int j = 0; j < GEMM_NV; j++) { *(gemm_vfu *)(c + i * ldc + j * GEMM_VEC) = acc[i][j]; }
    }
}
