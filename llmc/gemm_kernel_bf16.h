/*
The bf16 side of the GEMM (gemm.h): rounding fp32 to bf16, and the vdpbf16ps micro-kernel.

bf16 is the top half of an fp32: sign, 8 exponent bits, 7 mantissa bits. gemm_bf16_bits
rounds an fp32 to nearest-even at bit 16 and returns the fp32 bit pattern with the low 16
bits clear (the value as a float is exactly the bf16 value); NaN stays NaN (quieted), +-inf
stays, finite values past the largest bf16 round to +-inf as IEEE rounding does.

vdpbf16ps (AVX512_BF16, _mm512_dpbf16_ps(acc, a, b)): each 32-bit lane i of a and b holds a
pair of bf16, element 2i in the low half and 2i+1 in the high half, and (Intel SDM)
    acc[i] += a[2i+1] * b[2i+1];   then   acc[i] += a[2i] * b[2i];
each product exact in fp32 (8-bit significands), each add rounded to nearest-even, with
denormal inputs and outputs flushed to zero. dev/cpu/gemm_check.c checks that order on the
CPU it runs on. So the packed panels hold (k, k+1) pairs in one 32-bit word, k = 2p even,
and the fp32 micro-kernel reproduces the instruction bit for bit (denormals aside) when it
is fed the same bf16 values as fp32, each pair in the order (k+1, k): that is the emulated
path of CPUs without AVX512_BF16.

The micro-kernel: a GEMM_BF16_MR x GEMM_BF16_NR tile (12 x 32: 24 accumulators of 16 floats,
2 b vectors and a broadcast of the 32 zmm) over kcp pairs:
    a panel: kcp x MR words, a[p*MR + i] = bf16 pair (A(i, 2p), A(i, 2p+1))
    b panel: kcp x NR words, b[p*NR + j] = bf16 pair (B(2p, j), B(2p+1, j))
It adds the addend (or C) and the bias in registers, in the fp32 micro-kernel's order, and
writes the tile to C; a tile of the last, partial row panel runs as a kernel of that many
rows. GELU (gemm.h's gemm_tile_gelu, after the kernel has written the value to pre) and tiles
of fewer than NR columns (written through an aligned MR x NR scratch tile, gemm_tile_finish)
run the same fp32 code as the fp32 micro-kernel's epilogue. It is
compiled for AVX512_BF16 by a target attribute whatever the build's -march, and only called
when the CPU has it (gemm_bf16_native_available).
*/
#pragma once

#include <stdint.h>
#include <string.h>

#include "gemm_kernel.h"  // gemm_fetch_tile
#include "vecmath.h"      // VEC_CASES_ROWS_*

#define GEMM_BF16_MR 12
#define GEMM_BF16_NR 32

// fp32 x rounded to bf16 (nearest-even), as fp32 bits with the low 16 bits zero.
static inline uint32_t gemm_bf16_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u) { return (u | 0x00400000u) & 0xffff0000u; }  // NaN: keep it one
    u += 0x7fffu + ((u >> 16) & 1u);  // ties go to the even bf16
    return u & 0xffff0000u;
}

// x rounded to bf16, as a float.
static inline float gemm_bf16_round(float x) {
    uint32_t u = gemm_bf16_bits(x);
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

// One packed pair word: element k (lo) in the low half, k+1 (hi) in the high half.
static inline uint32_t gemm_bf16_pair(float lo, float hi) {
    return gemm_bf16_bits(hi) | (gemm_bf16_bits(lo) >> 16);
}

#if defined(__x86_64__) && defined(__GNUC__) && (defined(__clang__) || __GNUC__ >= 10)
#define GEMM_HAVE_BF16_KERNEL 1
#include <immintrin.h>

#define GEMM_BF16_TARGET __attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl")))

// Source lines of the blocks packed next (gemm.h's gemm_prefetch), for the micro-kernel to
// fetch into L2 one per k step: line[p] at step p < n.
#define GEMM_BF16_FETCH_MAX 64
typedef struct {
    const char *const *line;
    int n;
} gemm_bf16_fetch;

// c (R x NR, row stride ldc) = sum over kcp pairs of the first R rows of a panel x b panel,
// + cin (R x NR, row stride ldcin; may be c itself) where not NULL, then + bias (NR) where not
// NULL: the same fp32 adds in the same order as the fp32 micro-kernel's epilogue (gemm_kernel.h),
// done in registers. R (1..MR) is a compile-time constant at every call (gemm_micro_kernel_bf16
// below), so the accumulators stay in registers: a panel of fewer than MR rows at the bottom
// of C (M = B*T = 256 leaves 4) costs R rows' work, not MR's.
// GELU is not applied here (gemm.h's gemm_tile_gelu does it, with the fp32 kernel's code).
GEMM_BF16_TARGET
static inline __attribute__((always_inline)) void
gemm_micro_kernel_bf16_rows(const int R, int kcp, const uint32_t *restrict a, const uint32_t *restrict b, float *c,
                            ptrdiff_t ldc, const float *cin, ptrdiff_t ldcin, const float *bias, gemm_bf16_fetch f) {
    // the tile of C (and of cin) is touched after the k loop: its lines into L2 now, into L1
    // GEMM_C_LEAD pairs before the end (gemm_kernel.h)
    gemm_fetch_tile(R, GEMM_BF16_NR, c, ldc, cin, ldcin, NULL, 0, 0);
    const int fetch_at = kcp > GEMM_C_LEAD ? kcp - GEMM_C_LEAD : 0;
    __m512 acc[GEMM_BF16_MR][2];
    #pragma GCC unroll 16
    for (int i = 0; i < R; i++) {
        acc[i][0] = _mm512_setzero_ps();
        acc[i][1] = _mm512_setzero_ps();
    }
    for (int p = 0; p < kcp; p++) {
        if (p == fetch_at) { gemm_fetch_tile(R, GEMM_BF16_NR, c, ldc, cin, ldcin, NULL, 0, 1); }
        if (p < f.n) { __builtin_prefetch(f.line[p], 0, 2); }
        const __m512bh b0 = (__m512bh)_mm512_load_si512((const void *)b);
        const __m512bh b1 = (__m512bh)_mm512_load_si512((const void *)(b + 16));
        #pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            const __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i]);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
        }
        a += GEMM_BF16_MR;  // the panel's rows past R are zero padding
        b += GEMM_BF16_NR;
    }
    if (cin != NULL) {
        #pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            acc[i][0] = _mm512_add_ps(acc[i][0], _mm512_loadu_ps(cin + i * ldcin));
            acc[i][1] = _mm512_add_ps(acc[i][1], _mm512_loadu_ps(cin + i * ldcin + 16));
        }
    }
    if (bias != NULL) {
        const __m512 bias0 = _mm512_loadu_ps(bias), bias1 = _mm512_loadu_ps(bias + 16);
        #pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            acc[i][0] = _mm512_add_ps(acc[i][0], bias0);
            acc[i][1] = _mm512_add_ps(acc[i][1], bias1);
        }
    }
    #pragma GCC unroll 16
    for (int i = 0; i < R; i++) {
        _mm512_storeu_ps(c + i * ldc, acc[i][0]);
        _mm512_storeu_ps(c + i * ldc + 16, acc[i][1]);
    }
}

// The tile of mr rows (1..MR) x NR: gemm_micro_kernel_bf16_rows with R = mr.
GEMM_BF16_TARGET
static void gemm_micro_kernel_bf16(int mr, int kcp, const uint32_t *restrict a, const uint32_t *restrict b, float *c,
                                   ptrdiff_t ldc, const float *cin, ptrdiff_t ldcin, const float *bias, gemm_bf16_fetch f) {
    switch (mr) {
    VEC_CASES_ROWS_1_TO_6(gemm_micro_kernel_bf16_rows, kcp, a, b, c, ldc, cin, ldcin, bias, f)
    VEC_CASES_ROWS_7_TO_12(gemm_micro_kernel_bf16_rows, kcp, a, b, c, ldc, cin, ldcin, bias, f)
    default: break;
    }
}

static inline int gemm_min_bf16(int a, int b) { return a < b ? a : b; }

// v[i] lane j becomes v[j] lane i (16 x 16 32-bit words).
GEMM_BF16_TARGET
static inline void gemm_transpose16_epi32(__m512i v[16]) {
    __m512i t[16];
    #pragma GCC unroll 8
    for (int i = 0; i < 16; i += 2) {  // rows i, i+1 interleaved within 128-bit lanes
        t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
    }
    #pragma GCC unroll 4
    for (int i = 0; i < 16; i += 4) {  // lane L of v[i + j]: rows i..i+3 of column 4L + j
        v[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        v[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        v[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        v[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    #pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {  // gather the 128-bit lanes: column c from lane c / 4 of the four v[4g + c % 4]
        t[j] = _mm512_shuffle_i32x4(v[j], v[4 + j], 0x88);
        t[4 + j] = _mm512_shuffle_i32x4(v[j], v[4 + j], 0xdd);
        t[8 + j] = _mm512_shuffle_i32x4(v[8 + j], v[12 + j], 0x88);
        t[12 + j] = _mm512_shuffle_i32x4(v[8 + j], v[12 + j], 0xdd);
    }
    #pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        v[j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0x88);
        v[8 + j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0xdd);
        v[4 + j] = _mm512_shuffle_i32x4(t[4 + j], t[12 + j], 0x88);
        v[12 + j] = _mm512_shuffle_i32x4(t[4 + j], t[12 + j], 0xdd);
    }
}

// The source of gemm_pack_block_bf16_fast, fp32 or bf16 (from16), as bytes: element e at
// x + e * (from16 ? 2 : 4). The loops below are written once; from16 is a constant in each of
// the two copies the compiler makes of them.
//   16 pairs of a row (32 elements at x) as 16 pair words, k = 2p in the low half:
GEMM_BF16_TARGET
static inline __attribute__((always_inline)) __m512i gemm_bf16_row_pairs(const char *x, int from16) {
    if (from16) { return _mm512_loadu_si512((const void *)x); }
    return (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps((const float *)x + 16), _mm512_loadu_ps((const float *)x));
}
//   the first 16 (mask m) of source rows k (lo) and k+1 (hi) as 32 bf16, lo's in the low half:
GEMM_BF16_TARGET
static inline __attribute__((always_inline)) __m512i gemm_bf16_two_rows(__mmask16 m, const char *lo, const char *hi, int from16) {
    if (from16) {
        return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_maskz_loadu_epi16(m, lo)), _mm256_maskz_loadu_epi16(m, hi), 1);
    }
    return (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m, hi), _mm512_maskz_loadu_ps(m, lo));
}

//   32 bf16 as gemm_bf16_two_rows gives them (row k's in the low half, row k+1's in the high) as
//   16 pair words: word j = bf16 j of row k (low half), then bf16 j of row k+1 (high half)
GEMM_BF16_TARGET
static inline __attribute__((always_inline)) __m512i gemm_bf16_interleave(__m512i two_rows) {
    const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                                23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(interleave, two_rows);
}

GEMM_BF16_TARGET
static inline __attribute__((always_inline)) int gemm_pack_block_bf16_any(int R, int full, int kcp, int kcp_stride,
                                                                          const char *src, int from16, ptrdiff_t s_r,
                                                                          ptrdiff_t s_k, uint32_t *w) {
    const ptrdiff_t es = from16 ? 2 : 4;  // bytes per source element
    const size_t panel_words = (size_t)kcp_stride * R;
    if (s_k == 1) {
        const int p16 = kcp / 16 * 16, p8 = kcp / 8 * 8;
        for (int r0 = 0; r0 < full; r0 += R) {  // a panel: its rows in groups of 16 (12 for A)
            uint32_t *wp = w + (size_t)(r0 / R) * panel_words;
            for (int g = 0; g < R; g += 16) {
                const int rn = gemm_min_bf16(16, R - g);
                const __mmask16 m = (__mmask16)((1u << rn) - 1);
                const ptrdiff_t ahead = g + 16 < R ? 16 : R - g;  // rows to the next group: this panel's, or the next panel's first
                for (int p0 = 0; p0 < p16; p0 += 16) {
                    __m512i v[16];
                    #pragma GCC unroll 16
                    for (int r = 0; r < 16; r++) {
                        const char *x = src + ((ptrdiff_t)(r0 + g + r) * s_r + 2 * p0) * es;
                        if (r < rn) {  // the same lines of the row one group on
                            __builtin_prefetch(x + ahead * s_r * es);
                            if (!from16) { __builtin_prefetch(x + ahead * s_r * es + 64); }
                        }
                        v[r] = r < rn ? gemm_bf16_row_pairs(x, from16) : _mm512_setzero_si512();
                    }
                    gemm_transpose16_epi32(v);
                    #pragma GCC unroll 16
                    for (int q = 0; q < 16; q++) { _mm512_mask_storeu_epi32((void *)(wp + (size_t)(p0 + q) * R + g), m, v[q]); }
                }
            }
        }
        for (int r = 0; r < full; r++) {  // the pairs past the last 16
            const char *row = src + (ptrdiff_t)r * s_r * es;
            uint32_t *wr = w + (size_t)(r / R) * panel_words + r % R;
            int p = p16;
            if (from16) {
                for (; p < kcp; p++) { memcpy(&wr[(size_t)p * R], row + 4 * p, 4); }  // k = 2p in the low half (little-endian)
                continue;
            }
            const float *rowf = (const float *)row;
            for (; p < p8; p += 8) {
                uint32_t words[8] __attribute__((aligned(32)));
                _mm256_store_si256((__m256i *)words, (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(rowf + 2 * p)));
                #pragma GCC unroll 8
                for (int q = 0; q < 8; q++) { wr[(size_t)(p + q) * R] = words[q]; }
            }
            for (; p < kcp; p++) { wr[(size_t)p * R] = gemm_bf16_pair(rowf[2 * p], rowf[2 * p + 1]); }
        }
        return 1;
    }
    if (s_r == 1) {
        for (int p0 = 0; p0 < kcp; p0 += 4) {
            const int pn = gemm_min_bf16(4, kcp - p0);
            for (int r0 = 0; r0 < full; r0 += R) {
                uint32_t *dst = w + (size_t)(r0 / R) * panel_words + (size_t)p0 * R;
                for (int q = 0; q < pn; q++) {
                    const char *lo = src + ((ptrdiff_t)(2 * (p0 + q)) * s_k + r0) * es, *hi = lo + s_k * es;
                    for (int r = 0; r < R; r += 16) {
                        const __mmask16 m = R - r >= 16 ? 0xffff : (__mmask16)((1u << (R - r)) - 1);  // 12-row A panels
                        __builtin_prefetch(lo + (8 * s_k + r) * es);  // the same line of the rows four pairs on
                        __builtin_prefetch(hi + (8 * s_k + r) * es);
                        const __m512i pairs = gemm_bf16_two_rows(m, lo + r * es, hi + r * es, from16);
                        _mm512_mask_storeu_epi32((void *)(dst + (size_t)q * R + r), m, gemm_bf16_interleave(pairs));
                    }
                }
            }
        }
        return 1;
    }
    return 0;
}

// Packs the full panels of a block for the vdpbf16ps kernel: `full` rows of A (or columns of B),
// a multiple of R, in R-row panels, by kcp full pairs; element (r, k) at src[r*s_r + k*s_k] goes
// to w[(r / R) * kcp_stride * R + p*R + r % R] as the pair (k = 2p, 2p+1), rounded with
// vcvtne2ps2bf16 (nearest-even, NaN kept; denormals become zero, which vdpbf16ps does to them
// anyway). src16, where not NULL, is the source already in bf16 instead (uint16 bits, the same
// strides; src unused; gpt2.h's copy of the weights): no rounding, half the bytes read.
// kcp_stride is the pairs per panel of the buffer. Two layouts run vectorized, and both read
// the source as a few sequential streams (a panel's rows are short runs far apart: packed one
// panel at a time they left the loads waiting on memory):
//   s_k = 1 (a row's pairs are adjacent): 16 rows by 16 pairs at a time, each row's 32 elements
//     becoming 16 words, then a 16 x 16 transpose of the words;
//   s_r = 1 (rows adjacent, a pair is two source rows k, k+1): four pairs (8 source rows) are
//     read across the whole block, each 16 rows of a pair interleaved by one vpermw.
// Returns 0 for any other layout, which the caller packs itself.
GEMM_BF16_TARGET
static int gemm_pack_block_bf16_fast(int R, int full, int kcp, int kcp_stride, const float *src, const uint16_t *src16,
                                     ptrdiff_t s_r, ptrdiff_t s_k, uint32_t *w) {
    if (src16 != NULL) { return gemm_pack_block_bf16_any(R, full, kcp, kcp_stride, (const char *)src16, 1, s_r, s_k, w); }
    return gemm_pack_block_bf16_any(R, full, kcp, kcp_stride, (const char *)src, 0, s_r, s_k, w);
}

// 1 if this CPU (and OS) runs AVX-512 with AVX512_BF16.
static int gemm_bf16_native_available(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
}
#else
#define GEMM_HAVE_BF16_KERNEL 0
static int gemm_bf16_native_available(void) { return 0; }
#endif
