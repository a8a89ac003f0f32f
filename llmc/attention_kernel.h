/*
The arithmetic of attention.h: its tile sizes, the register tiles that compute every product
(fp32 FMAs; bf16 pairs on vdpbf16ps, or emulated on fp32 FMAs with the same bits), the block
product on AMX tiles (the amx path), and the packing of operands into the stack tiles (bf16 pair
words, transposes through registers).
attention.h walks the forward and backward passes over these; it says how the work is laid out.
*/
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "gemm.h"       // gemm_bf16_bits, gemm_bf16_pair
#include "precision.h"  // the run's precision and bf16 path
#include "utils.h"      // die
#include "vecmath.h"

#define ATTN_VW VEC_WIDTH
// Rows of a register tile: R x 2 accumulators + 2 vectors + 1 broadcast fit the
// 32 registers of AVX-512 or the 16 of AVX2 and SSE.
#define ATTN_R (ATTN_VW == 16 ? 12 : 6)
#define ATTN_W (2 * ATTN_VW)   // queries (forward) or keys (backward) in one tile's two vectors
#define ATTN_BK 64             // forward: keys per online-softmax block, a multiple of ATTN_W
#define ATTN_G (128 / ATTN_W)  // forward: query tiles per group, sharing each packed key block
#define ATTN_BLK 64            // backward: queries and keys per block, a multiple of ATTN_W
#define ATTN_MAX_HS 128        // largest head size; sizes the stack tiles
#define ATTN_MAX_T 8192        // longest sequence: the backward keeps dout.out of a head's rows on its stack

// All vector helpers are static and inlined, so passing vectors by value has no ABI to keep.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

// Lane i holds i.
VEC_INLINE vint attn_iota(void) {
    vint v;
    for (int i = 0; i < ATTN_VW; i++) { v[i] = i; }
    return v;
}

// The register tile: acc[r][v] += sum_{k<K} a[r*a_r + k*a_k] * b[k*ldb + v*ATTN_VW], r < R, v < 2.
// a is read one scalar at a time (broadcast), b two aligned vectors at a time.
// Called with a constant R (see ATTN_WITH_ROWS), so the accumulators stay in registers.
VEC_INLINE void attn_tile(const int R, vfloat acc[ATTN_R][2], const float *a, ptrdiff_t a_r,
                           ptrdiff_t a_k, const float *b, ptrdiff_t ldb, int K) {
    for (int k = 0; k < K; k++) {
        const vfloat b0 = *(const vfloat *)(b + k * ldb);
        const vfloat b1 = *(const vfloat *)(b + k * ldb + ATTN_VW);
        #pragma GCC unroll 16
        for (int r = 0; r < R; r++) {
            const float ar = a[r * a_r + k * a_k];
            acc[r][0] += ar * b0;
            acc[r][1] += ar * b1;
        }
    }
}

// ----------------------------------------------------------------------------
// bf16 (--precision bf16): the same products on operands rounded to bf16, fp32 sums.
//
// A bf16 operand is packed as pair words (gemm_kernel_bf16.h): element k in the low half,
// k+1 in the high half, so that vdpbf16ps adds both products of a pair into an fp32 lane
// (the high one first). The broadcast side (a) holds the pairs of its k's, the vector side
// (b) a row of pair words per pair of k's; strides count words and K counts pairs; an odd
// last k pairs with 0.
//
// The emulated path (no AVX512_BF16 in the build, vdpbf16ps slower than the FMA as on Intel's
// cores (precision.h), or LLMC_BF16_EMULATE=1) gets the same bits from the fp32 tile: each
// pair is packed as its two halves, rounded floats, the high one first (element k^1 at k), and
// fp32 FMAs add the exact products in the instruction's order, denormals aside. A pair costs
// two k steps of attn_tile, as two floats would: unpacking pair words in registers instead
// cost 1.4x the fp32 products on Intel Xeon (family 6 model 207), whose AVX-512 shifts and
// masks share the FMA's two ports.

typedef enum { ATTN_FP32, ATTN_BF16_EMULATED, ATTN_BF16_NATIVE, ATTN_BF16_AMX } attn_arith;

// The tile's k steps over n elements: n floats (fp32), (n+1)/2 pair words (vdpbf16ps, AMX), or
// 2 floats a pair (emulated). Each is 4 bytes, so offsets and strides count them on every path.
static inline int attn_k(attn_arith arith, int n) {
    if (arith == ATTN_FP32) { return n; }
    return arith == ATTN_BF16_EMULATED ? (n + 1) / 2 * 2 : (n + 1) / 2;
}

#if ATTN_VW == 16 && defined(__AVX512BF16__) && GEMM_HAVE_BF16_KERNEL
#define ATTN_HAVE_BF16_NATIVE 1
#else
#define ATTN_HAVE_BF16_NATIVE 0
#endif

// AMX tiles (see "bf16 on AMX tiles" below) take blocks of 16 x 16 products: a forward tile's W
// queries must be a whole number of them (not so with the 4-lane vectors of a portable build).
#if GEMM_HAVE_AMX_KERNEL && ATTN_W % 16 == 0 && ATTN_BK % 32 == 0 && ATTN_BLK % 32 == 0
#define ATTN_HAVE_AMX 1
#else
#define ATTN_HAVE_AMX 0
#endif

// The arithmetic of the products from now on: that of the matmuls (matmul_set_precision).
// On the amx path the products run on AMX tiles too, with their sums (not vdpbf16ps's bits).
static attn_arith attn_current_arith(void) {
    if (!precision_is_bf16()) { return ATTN_FP32; }
    if (ATTN_HAVE_AMX && precision_bf16_path() == BF16_PATH_AMX) { return ATTN_BF16_AMX; }
    return ATTN_HAVE_BF16_NATIVE && precision_bf16_dot_native() ? ATTN_BF16_NATIVE : ATTN_BF16_EMULATED;
}

typedef uint32_t vuint_u __attribute__((vector_size(ATTN_VW * sizeof(float)), aligned(4), may_alias));

// x rounded to bf16 lane by lane, as fp32 bits with the low 16 bits zero (gemm_bf16_bits's rule):
// every vector rounding of attention's operands goes through here, but AMX's where the build has
// the CPU's conversion (attn_bf16_pairs_amx below).
VEC_INLINE vuint attn_bf16_bits(vfloat x) { return vec_bf16_bits32(x); }
VEC_INLINE vfloat attn_bf16_round(vfloat x) { return (vfloat)attn_bf16_bits(x); }

// The packings read (and the transposes write) rows of qkv, 3C floats apart (9 KiB at GPT-2
// 124M: each on its own 4 KiB page, beyond the strides the hardware prefetchers follow), so
// each row waited for memory in turn: their loops fetch the row ATTN_PF_AHEAD rows ahead.
// On the lent Xeon's AMX tiles, where those waits weigh most, attention at T=1024 ran 1.1x
// faster with it (dev/cpu/results/2026-11-28-xeon-amx, run 10). The same loops also pack the
// kernel's own blocks (rows at most a few hundred floats apart, in L1): not fetched.
#ifndef ATTN_PF_AHEAD
#define ATTN_PF_AHEAD 8
#endif
#define ATTN_PF_MIN_LD 512  // floats between rows (2 KiB) from which rows are fetched ahead
// Row `row` of base (rows ld floats apart, `rows` of them): its n floats fetched (write: for
// writing), where it exists and its rows lie that far apart.
VEC_INLINE void attn_prefetch_row(const float *base, ptrdiff_t ld, int row, int rows, int n, int write) {
    if (ld < ATTN_PF_MIN_LD || row >= rows) { return; }
    const float *p = base + row * ld;
    for (int i = 0; i < n; i += 16) {
        if (write) {
            __builtin_prefetch(p + i, 1);
        } else {
            __builtin_prefetch(p + i, 0);
        }
    }
}

// Pair words of lo and hi lane by lane, each rounded to bf16.
VEC_INLINE vuint attn_bf16_pairs(vfloat lo, vfloat hi) { return attn_bf16_bits(hi) | (attn_bf16_bits(lo) >> 16); }

// AMX's operands by the CPU's own conversion where the build has it (vcvtne2ps2bf16: a denormal
// becomes a zero of its sign, which TDPBF16PS makes of a denormal operand anyway, so the products
// keep their bits): one instruction for the integer rounding's eight operations a vector. The pair
// words of lo and hi lane by lane, interleaved as the GEMM's packing interleaves two rows; pairs of
// neighbours in a row are the GEMM's gemm_bf16_row_pairs.
#if VEC_HAVE_BF16_CVT
VEC_INLINE vuint attn_bf16_pairs_amx(vfloat lo, vfloat hi) {
    return (vuint)gemm_bf16_interleave((__m512i)_mm512_cvtne2ps_pbh((__m512)hi, (__m512)lo));
}
#endif

// Pairs of rows: two rows of src (rows lds apart, nr rows, nc columns) make one row p of dst
// (rows ldd apart), for p < (nr+1)/2; an odd last row pairs with 0. As pair words (dst[p*ldd +
// c] = pair (src[2p][c], src[2p+1][c])), or split (emulated: float rows 2p and 2p+1 of dst =
// src rows 2p+1 and 2p, rounded, where ldd counts floats).
static void attn_pack_row_pairs(attn_arith arith, uint32_t *dst, ptrdiff_t ldd, const float *src, ptrdiff_t lds,
                                int nr, int nc) {
    const int split = arith == ATTN_BF16_EMULATED;
    for (int p = 0; 2 * p < nr; p++) {
        const float *lo = src + 2 * p * lds, *hi = lo + lds;
        const int has_hi = 2 * p + 1 < nr;
        attn_prefetch_row(src, lds, 2 * p + ATTN_PF_AHEAD, nr, nc, 0);
        attn_prefetch_row(src, lds, 2 * p + ATTN_PF_AHEAD + 1, nr, nc, 0);
        if (split) {
            float *d_hi = (float *)dst + 2 * p * ldd, *d_lo = d_hi + ldd;
            int c = 0;
            for (; c + ATTN_VW <= nc; c += ATTN_VW) {
                vec_store(d_hi + c, has_hi ? attn_bf16_round(vec_load(hi + c)) : (vfloat){0});
                vec_store(d_lo + c, attn_bf16_round(vec_load(lo + c)));
            }
            for (; c < nc; c++) {
                d_hi[c] = has_hi ? gemm_bf16_round(hi[c]) : 0.0f;
                d_lo[c] = gemm_bf16_round(lo[c]);
            }
            continue;
        }
        int c = 0;
#if VEC_HAVE_BF16_CVT
        if (arith == ATTN_BF16_AMX) {
            for (; c + ATTN_VW <= nc; c += ATTN_VW) {
                *(vuint_u *)(dst + p * ldd + c) =
                    attn_bf16_pairs_amx(vec_load(lo + c), has_hi ? vec_load(hi + c) : (vfloat){0});
            }
        }
#endif
        for (; c + ATTN_VW <= nc; c += ATTN_VW) {
            *(vuint_u *)(dst + p * ldd + c) = attn_bf16_pairs(vec_load(lo + c), has_hi ? vec_load(hi + c) : (vfloat){0});
        }
        for (; c < nc; c++) { dst[p * ldd + c] = gemm_bf16_pair(lo[c], has_hi ? hi[c] : 0.0f); }
    }
}

// Pairs along each row r < nr of src (rows lds apart, nc columns): as pair words (dst[r*ldd + p]
// = pair (src[r][2p], src[r][2p+1]) for p < (nc+1)/2), or split (emulated: floats dst[r*ldd +
// 2p] = src[r][2p+1] and dst[r*ldd + 2p+1] = src[r][2p], rounded, where ldd counts floats); an
// odd last column pairs with 0.
static void attn_pack_col_pairs(attn_arith arith, uint32_t *dst, ptrdiff_t ldd, const float *src, ptrdiff_t lds,
                                int nr, int nc) {
    const int split = arith == ATTN_BF16_EMULATED;
#if !defined(__clang__)
    // the bf16 halves of 2 VW rounded floats, 2VW 16-bit lanes: lane m of the result is lane 2m+1
    // (the high half of float m) of the two vectors side by side
    typedef uint16_t vhalf __attribute__((vector_size(ATTN_VW * sizeof(float))));
    vhalf odd;
    vint swap;  // the lanes of each pair exchanged
    for (int m = 0; m < 2 * ATTN_VW; m++) { odd[m] = (uint16_t)(2 * m + 1); }
    for (int l = 0; l < ATTN_VW; l++) { swap[l] = l ^ 1; }
#endif
    for (int r = 0; r < nr; r++) {
        const float *s = src + r * lds;
        attn_prefetch_row(src, lds, r + ATTN_PF_AHEAD, nr, nc, 0);
        if (split) {
            float *d = (float *)dst + r * ldd;
            int c = 0;
#if !defined(__clang__)
            for (; c + ATTN_VW <= nc; c += ATTN_VW) {
                vec_store(d + c, __builtin_shuffle(attn_bf16_round(vec_load(s + c)), swap));
            }
#endif
            for (; c < nc; c++) { d[c ^ 1] = gemm_bf16_round(s[c]); }
            if (nc % 2 == 1) { d[nc - 1] = 0.0f; }
            continue;
        }
        int p = 0;
#if VEC_HAVE_BF16_CVT
        if (arith == ATTN_BF16_AMX) {
            for (; 2 * (p + ATTN_VW) <= nc; p += ATTN_VW) {
                *(vuint_u *)(dst + r * ldd + p) = (vuint)gemm_bf16_row_pairs((const char *)(s + 2 * p), 0);
            }
        }
#endif
#if !defined(__clang__)
        for (; 2 * (p + ATTN_VW) <= nc; p += ATTN_VW) {
            const vhalf a = (vhalf)attn_bf16_bits(vec_load(s + 2 * p));
            const vhalf b = (vhalf)attn_bf16_bits(vec_load(s + 2 * p + ATTN_VW));
            *(vuint_u *)(dst + r * ldd + p) = (vuint)__builtin_shuffle(a, b, odd);
        }
#endif
        for (; 2 * p < nc; p++) { dst[r * ldd + p] = gemm_bf16_pair(s[2 * p], 2 * p + 1 < nc ? s[2 * p + 1] : 0.0f); }
    }
}

#if ATTN_HAVE_BF16_NATIVE
VEC_INLINE void attn_tile_bf16_native(const int R, vfloat acc[ATTN_R][2], const uint32_t *a, ptrdiff_t a_r,
                                      ptrdiff_t a_p, const uint32_t *b, ptrdiff_t ldb, int KP) {
    for (int p = 0; p < KP; p++) {
        const __m512bh b0 = (__m512bh)(*(const __m512i *)(b + p * ldb));
        const __m512bh b1 = (__m512bh)(*(const __m512i *)(b + p * ldb + ATTN_VW));
        #pragma GCC unroll 16
        for (int r = 0; r < R; r++) {
            const __m512bh ar = (__m512bh)_mm512_set1_epi32((int)a[r * a_r + p * a_p]);
            acc[r][0] = (vfloat)_mm512_dpbf16_ps((__m512)acc[r][0], ar, b0);
            acc[r][1] = (vfloat)_mm512_dpbf16_ps((__m512)acc[r][1], ar, b1);
        }
    }
}
#endif

// One product, K steps (attn_k): floats (fp32, and the emulated path's split pairs) or pair
// words on vdpbf16ps. The AMX path makes block products instead (attn_amx_product).
VEC_INLINE void attn_product(const int R, vfloat acc[ATTN_R][2], const void *a, ptrdiff_t a_r, ptrdiff_t a_k,
                             const void *b, ptrdiff_t ldb, int K, attn_arith arith) {
#if ATTN_HAVE_BF16_NATIVE
    if (arith == ATTN_BF16_NATIVE) {
        attn_tile_bf16_native(R, acc, a, a_r, a_k, b, ldb, K);
        return;
    }
#endif
    (void)arith;
    attn_tile(R, acc, a, a_r, a_k, b, ldb, K);
}

// ----------------------------------------------------------------------------
// bf16 on AMX tiles (the run's bf16 path is amx): the same pair words, a block product at a time.
//
// TDPBF16PS multiplies a 16 x 16 pair-word tile A (rows contiguous in pairs) by a 16 x 16 tile B
// (a row of 16 columns' words per pair): the broadcast side of attn_product is A, read row by
// row instead of column by column, and its vector side is B as it is. So the products over
// channel pairs (scores, dP, dQ) take the operands packed as for vdpbf16ps, and those over
// pairs of positions (O^T = V^T P^T, dV^T, dK^T) take V^T, dout^T and Q^T with the positions'
// pairs along each row (attn_pack_pairs_transposed). Every dimension is padded to whole tiles
// (16 rows, 16 pairs) with zero words, which add nothing. The masking, softmax and scaling run
// on the stored blocks as vector passes. The sums are TDPBF16PS's (gemm_kernel_amx.h: pairs
// rounded to fp32 before they are added, denormals flushed), not vdpbf16ps's bits; they are
// checked against the bf16 reference at its tolerances, as the AMX GEMM is.

static inline int attn_round16(int n) { return (n + 15) / 16 * 16; }

// dst[r*ldd + c] = 0 for r0 <= r < r1, c0 <= c < c1: the padding of a block to whole tiles.
static void attn_zero_words(uint32_t *dst, ptrdiff_t ldd, int r0, int r1, int c0, int c1) {
    for (int r = r0; r < r1; r++) {
        for (int c = c0; c < c1; c++) { dst[r * ldd + c] = 0; }
    }
}

#if ATTN_HAVE_AMX
// C (m x n floats, rows ldc apart) = A B, or C + A B where accumulate: A is m rows of kp pair
// words (lda apart), B kp rows of n words (ldb apart); m, n and kp multiples of 16, and the
// pairs past a product's K zero in both operands. C is 32 x 32 at a time in tiles 0-3, A in 4-5,
// B in 6-7, as in the GEMM's tile.
GEMM_AMX_TARGET
static void attn_amx_product(float *c, ptrdiff_t ldc, const uint32_t *a, ptrdiff_t lda, const uint32_t *b,
                             ptrdiff_t ldb, int m, int n, int kp, int accumulate) {
    gemm_amx_thread_init();
    for (int i0 = 0; i0 < m; i0 += 32) {
        const int two_i = i0 + 16 < m;  // a second row of tiles
        for (int j0 = 0; j0 < n; j0 += 32) {
            const int two_j = j0 + 16 < n;  // a second column of tiles
            float *c00 = c + i0 * ldc + j0, *c10 = c00 + 16 * ldc;
            if (accumulate) {
                GEMM_AMX_LOAD(0, c00, ldc * 4);
                if (two_j) { GEMM_AMX_LOAD(1, c00 + 16, ldc * 4); }
                if (two_i) { GEMM_AMX_LOAD(2, c10, ldc * 4); }
                if (two_i && two_j) { GEMM_AMX_LOAD(3, c10 + 16, ldc * 4); }
            } else {
                GEMM_AMX_ZERO(0);
                GEMM_AMX_ZERO(1);
                GEMM_AMX_ZERO(2);
                GEMM_AMX_ZERO(3);
            }
            for (int p = 0; p < kp; p += 16) {
                GEMM_AMX_LOAD(4, a + i0 * lda + p, lda * 4);
                GEMM_AMX_LOAD(6, b + p * ldb + j0, ldb * 4);
                GEMM_AMX_DP(0, 4, 6);
                if (two_j) {
                    GEMM_AMX_LOAD(7, b + p * ldb + j0 + 16, ldb * 4);
                    GEMM_AMX_DP(1, 4, 7);
                }
                if (two_i) {
                    GEMM_AMX_LOAD(5, a + (i0 + 16) * lda + p, lda * 4);
                    GEMM_AMX_DP(2, 5, 6);
                    if (two_j) { GEMM_AMX_DP(3, 5, 7); }
                }
            }
            GEMM_AMX_STORE(0, c00, ldc * 4);
            if (two_j) { GEMM_AMX_STORE(1, c00 + 16, ldc * 4); }
            if (two_i) { GEMM_AMX_STORE(2, c10, ldc * 4); }
            if (two_i && two_j) { GEMM_AMX_STORE(3, c10 + 16, ldc * 4); }
        }
    }
}
#else
static void attn_amx_product(float *c, ptrdiff_t ldc, const uint32_t *a, ptrdiff_t lda, const uint32_t *b,
                             ptrdiff_t ldb, int m, int n, int kp, int accumulate) {
    (void)c, (void)ldc, (void)a, (void)lda, (void)b, (void)ldb, (void)m, (void)n, (void)kp, (void)accumulate;
    die("attention: AMX tiles are not in this build");  // unreachable: attn_current_arith never picks them
}
#endif

// An operand of a product at word i: of the fp32 floats, or of the bf16 pair words.
static inline const void *attn_words(int bf16, const float *fp32, const uint32_t *pairs, ptrdiff_t i) {
    return bf16 ? (const void *)(pairs + i) : (const void *)(fp32 + i);
}

// Calls fn(rows, ...) with rows in 1..ATTN_R as a compile-time constant (vecmath.h).
#if ATTN_R > 6
#define ATTN_WIDE_ROWS VEC_CASES_ROWS_7_TO_12
#else
#define ATTN_WIDE_ROWS(fn, ...)
#endif
#define ATTN_WITH_ROWS(rows, fn, ...)                                                        \
    do {                                                                                     \
        switch (rows) {                                                                      \
        VEC_CASES_ROWS_1_TO_6(fn, __VA_ARGS__)                                               \
        ATTN_WIDE_ROWS(fn, __VA_ARGS__)                                                      \
        default: break;                                                                      \
        }                                                                                    \
    } while (0)

static inline int attn_min(int a, int b) { return a < b ? a : b; }

// One round of attn_transpose_block: swaps the off-diagonal b x b sub-blocks of
// every 2b x 2b block of the VW x VW block held in x[0..VW-1]. b is a constant,
// so the lane masks are too.
VEC_INLINE void attn_transpose_round(vfloat x[ATTN_VW], const int b) {
    vint lo, hi;  // lanes of the shuffles: x[i]'s where bit b of the lane is clear, else x[i+b]'s
    for (int l = 0; l < ATTN_VW; l++) {
        lo[l] = (l & b) ? ATTN_VW + l - b : l;
        hi[l] = (l & b) ? ATTN_VW + l : l + b;
    }
    #pragma GCC unroll 16
    for (int i = 0; i < ATTN_VW; i++) {
        if (i & b) { continue; }
        const vfloat top = x[i], bottom = x[i + b];
#if defined(__clang__)  // has no __builtin_shuffle; it turns constant lane moves into shuffles itself
        for (int l = 0; l < ATTN_VW; l++) {
            x[i][l] = lo[l] < ATTN_VW ? top[lo[l]] : bottom[lo[l] - ATTN_VW];
            x[i + b][l] = hi[l] < ATTN_VW ? top[hi[l]] : bottom[hi[l] - ATTN_VW];
        }
#else
        x[i] = __builtin_shuffle(top, bottom, lo);
        x[i + b] = __builtin_shuffle(top, bottom, hi);
#endif
    }
}

// Transposes the VW x VW block held in x[0..VW-1]: x[i] lane l becomes x[l] lane i.
VEC_INLINE void attn_transpose_block(vfloat x[ATTN_VW]) {
#if ATTN_VW == 16
    attn_transpose_round(x, 8);
#endif
#if ATTN_VW >= 8
    attn_transpose_round(x, 4);
#endif
    attn_transpose_round(x, 2);
    attn_transpose_round(x, 1);
}

// What attn_transpose does with each element x = src[c*lds + r] at d = dst[r*ldd + c].
typedef enum {
    ATTN_COPY,        // d = x
    ATTN_SET_SCALED,  // d = 0 + scale * x: what adding scale * x to a zeroed d gives, bit for bit (-0 becomes +0)
    ATTN_SPLIT_PAIRS, // d = x rounded to bf16, at row r^1 instead of r: the emulated path's split pairs
} attn_transpose_mode;

// dst[r*ldd + c] = src[c*lds + r] for r < nr, c < nc (or as mode says): packs rows into columns
// and back, a VW x VW block at a time through registers.
static void attn_transpose(float *dst, ptrdiff_t ldd, const float *src, ptrdiff_t lds, int nr, int nc,
                           float scale, attn_transpose_mode mode) {
    const int nr_full = nr / ATTN_VW * ATTN_VW, nc_full = nc / ATTN_VW * ATTN_VW;
    const int swap = mode == ATTN_SPLIT_PAIRS;  // r^1 stays within a VW x VW block (r0 is even)
    for (int r0 = 0; r0 < nr_full; r0 += ATTN_VW) {
        for (int c0 = 0; c0 < nc_full; c0 += ATTN_VW) {
            if (r0 == 0 && lds >= ATTN_PF_MIN_LD) {  // the first pass over src's rows c0..: fetch the next VW rows
                for (int c = c0 + ATTN_VW; c < c0 + 2 * ATTN_VW; c++) { attn_prefetch_row(src, lds, c, nc, nr, 0); }
            }
            if (c0 == 0 && ldd >= ATTN_PF_MIN_LD) {  // the first pass over dst's rows r0..: fetch the next VW rows for writing
                for (int r = r0 + ATTN_VW; r < r0 + 2 * ATTN_VW; r++) { attn_prefetch_row(dst, ldd, r, nr, nc, 1); }
            }
            vfloat x[ATTN_VW];
            for (int c = 0; c < ATTN_VW; c++) { x[c] = *(const vfloat_u *)(src + (c0 + c) * lds + r0); }
            attn_transpose_block(x);
            for (int r = 0; r < ATTN_VW; r++) {
                float *d = dst + ((r0 + r) ^ swap) * ldd + c0;
                vec_store(d, mode == ATTN_COPY ? x[r] : swap ? attn_bf16_round(x[r]) : vec_set1(0.0f) + scale * x[r]);
            }
        }
    }
    // the ragged edges, one element at a time
    for (int r = 0; r < nr; r++) {
        for (int c = r < nr_full ? nc_full : 0; c < nc; c++) {
            const float x = src[c * lds + r];
            dst[(r ^ swap) * ldd + c] = mode == ATTN_COPY ? x : swap ? gemm_bf16_round(x) : 0.0f + scale * x;
        }
    }
}

// Q^T, K^T or V^T (channels x positions) of nr positions of src (rows lds apart), nc channels:
// dst[d*ldd + r] = src[r][d] for d < nc, r < nr, and 0 for nr <= r < ldd (positions past T).
// In bf16 the channels as attn_pack_col_pairs packs them: pair words of channel pairs in place of
// the channels (dst[p*ldd + r] = pair (src[r][2p], src[r][2p+1]), the float view of the words),
// or split (emulated: row d of dst holds channel d^1, rounded, as attn_pack_col_pairs splits them:
// rounded and swapped in attn_transpose's registers); pair words are packed along each row, then
// transposed as they are (moves only: the bits pass through). nr <= ATTN_BLK.
static void attn_pack_transposed(float *dst, ptrdiff_t ldd, const float *src, ptrdiff_t lds, int nr, int nc,
                                 attn_arith arith) {
    const int rows = attn_k(arith, nc);  // of dst
    if (arith == ATTN_BF16_EMULATED) {
        attn_transpose(dst, ldd, src, lds, nc, nr, 1.0f, ATTN_SPLIT_PAIRS);
        if (nc % 2 == 1) {  // row nc-1 holds channel nc, past the last: an odd last channel pairs with 0
            for (int r = 0; r < nr; r++) { dst[(nc - 1) * ldd + r] = 0.0f; }
        }
    } else if (arith != ATTN_FP32) {
        union { float f[ATTN_BLK * ATTN_MAX_HS]; uint32_t u[ATTN_BLK * ATTN_MAX_HS]; } words;
        attn_pack_col_pairs(arith, words.u, rows, src, lds, nr, nc);
        attn_transpose(dst, ldd, words.f, rows, rows, nr, 1.0f, ATTN_COPY);
    } else {
        attn_transpose(dst, ldd, src, lds, nc, nr, 1.0f, ATTN_COPY);
    }
    for (int d = 0; d < rows; d++) {
        for (int r = nr; r < ldd; r++) { dst[d * ldd + r] = 0.0f; }
    }
}

// attn_pack_col_pairs for an AMX operand: then zero words to whole tiles, pairs up to ldd (a
// multiple of 16) and rows up to attn_round16(nr).
static void attn_pack_col_pairs_tiles(uint32_t *dst, ptrdiff_t ldd, const float *src, ptrdiff_t lds, int nr, int nc) {
    attn_pack_col_pairs(ATTN_BF16_AMX, dst, ldd, src, lds, nr, nc);
    attn_zero_words(dst, ldd, 0, nr, (nc + 1) / 2, (int)ldd);
    attn_zero_words(dst, ldd, nr, attn_round16(nr), 0, (int)ldd);
}

// attn_pack_row_pairs for an AMX operand: then rows of zero words up to attn_round16((nr+1)/2).
static void attn_pack_row_pairs_tiles(uint32_t *dst, ptrdiff_t ldd, const float *src, ptrdiff_t lds, int nr, int nc) {
    attn_pack_row_pairs(ATTN_BF16_AMX, dst, ldd, src, lds, nr, nc);
    attn_zero_words(dst, ldd, (nr + 1) / 2, attn_round16((nr + 1) / 2), 0, nc);
}

// AMX's A side of the products over pairs of positions: dst[d*ldd + p] = pair (src[2p][d],
// src[2p+1][d]) for d < nc, p < (nr+1)/2 (nr positions, rows lds apart; an odd last one pairs
// with 0), then zero words to whole tiles: pairs up to attn_round16((nr+1)/2), rows up to
// attn_round16(nc). Packed as pairs of rows (attn_pack_row_pairs), then transposed as words.
static void attn_pack_pairs_transposed(uint32_t *dst, ptrdiff_t ldd, const float *src, ptrdiff_t lds, int nr, int nc) {
    const int np = (nr + 1) / 2;
    union { float f[ATTN_BLK * ATTN_MAX_HS / 2]; uint32_t u[ATTN_BLK * ATTN_MAX_HS / 2]; } words;
    attn_pack_row_pairs(ATTN_BF16_AMX, words.u, nc, src, lds, nr, nc);
    attn_transpose((float *)dst, ldd, words.f, nc, nc, np, 1.0f, ATTN_COPY);
    attn_zero_words(dst, ldd, 0, nc, np, attn_round16(np));
    attn_zero_words(dst, ldd, nc, attn_round16(nc), 0, attn_round16(np));
}

// dst[r*ldd + d] = src[r*lds + d] for r < nr, d < nc: rows of qkv (3C apart) or dout (C apart)
// packed nc apart.
static void attn_copy_rows(float *dst, ptrdiff_t ldd, const float *src, ptrdiff_t lds, int nr, int nc) {
    for (int r = 0; r < nr; r++) {
        attn_prefetch_row(src, lds, r + ATTN_PF_AHEAD, nr, nc, 0);
        memcpy(dst + r * ldd, src + r * lds, (size_t)nc * sizeof(float));
    }
}

#pragma GCC diagnostic pop
