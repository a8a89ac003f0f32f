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
(dev/cpu/gemm_check.c, scripts/tests/test_gemm.sh, scripts/tests/test_gpt2.sh).

This file also holds what every micro-kernel shares: the tile epilogue (gemm_tile_epilogue,
gemm_tile_finish) and the descriptor (gemm_kernel) by which gemm.h's loops run any of them.

Packed layouts (written by gemm.h):
  a panel: kc x MR, a[k*MR + i] = A(i, k)  (rows past the edge of A are zero)
  b panel: kc x NR, b[k*NR + j] = B(k, j)  (columns past the edge of B are zero)
Each element of the tile is one running fp32 sum over k in increasing order, with one fused
multiply-add per k where the target has FMA (GCC contracts a*b+c under -std=gnu11, whose
default is -ffp-contract=fast), so results do not depend on where the tile sits in C.
*/
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
    // The tile the block's next call writes, or NULL after its last: its C, and its cin and pre
    // where it has them and they are not its C (the same ldc, ldcin, ldpre). For a kernel whose
    // call is too short to fetch its own tile in time (AMX) to fetch the next one ahead.
    const float *next_c, *next_cin, *next_pre;
    // 1 on every other tile of C, a checkerboard of tiles, where the kernel asks for it
    // (gemm_kernel's k_reverse_words): the tile runs its k steps last to first, so that it
    // begins on the part of the panel it shares with the tile before, still in L1.
    int k_reverse;
    // 1 where the block runs a row of tiles after another (gemm.h's gemm_macro_kernel): the next
    // tile reuses this one's a panel; 0: a column after another, the next tile reuses the b panel
    int rows_outer;
} gemm_tile_epilogue;

// A micro-kernel reads and writes its tile of C (reads cin: C itself or the caller's addend;
// writes pre, with GELU) after its k loop, often from L3, where the previous k block left it.
// Its lines are fetched in two steps: into L2 as the call starts (into_l1 0), and into L1
// GEMM_C_LEAD k steps before the loop ends (into_l1 1). Fetched into L1 at the start, they were
// evicted again on Zen 4 before the end: its L1 (32 KiB) has room for the fp32 b panel (24 KiB) and
// little more, and a panels stream through it. Measured on Zen 4 over GPT-2 124M's products,
// bit-identical results: 1-2% faster (2-8% on T=1024's), fp32 and bf16 alike; 16 k steps were
// too few, 128 less good.
// Fetching pre too made fc's forward product (GELU) 2% faster in fp32 at T=64.
// With 8-float vectors or fewer (AVX2, SSE), where the b panel takes at most half of a 32 KiB
// L1, the lines go into L1 at the start instead and stay there: AVX2's fp32 panels (256 x 16
// floats, 16 KiB). On the Zen 3 VM the late fetch had made AVX2's fp32 products 5-11% slower;
// with the early one, and the k loop split at the fetch step (no test at every k, which the
// emulated bf16 path's 48 KiB panels gain from too), 1.02-1.03x over the 27 products, the same
// bits (gemm_ab, 2026-12-01). AVX-512 keeps the late fetch: on the lent Xeon an early one was
// 0.99x over the 27 products, and its 16 KiB panels of K = 256 (the products to the weights at
// T=64) lost up to 10% with it.
#ifndef GEMM_C_LEAD
#define GEMM_C_LEAD 64
#endif
#ifndef GEMM_L1_ROOM
#define GEMM_L1_ROOM (16 * 1024)  // bytes of b panel that leave L1 room for the tile and a panels
#endif

// The k step at which a tile's lines are fetched into L1 (gemm_fetch_tile's into_l1 1), for a
// loop of k_steps over a b panel of panel_bytes: 0, the first, or GEMM_C_LEAD steps before the end.
static inline int gemm_c_fetch_step(int k_steps, size_t panel_bytes) {
    if (GEMM_VEC <= 8 && panel_bytes <= GEMM_L1_ROOM) { return 0; }
    return k_steps > GEMM_C_LEAD ? k_steps - GEMM_C_LEAD : 0;
}
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

// 1 where the epilogue writes pre (the value before GELU) by non-temporal stores (vec_stream):
// pre is read again only by the backward pass, long after its product, from memory whatever
// the caches held, so writing it around them saves a read for ownership of each line; where its
// rows are aligned to whole vectors, and it is not fetched then (gemm_fetch_tile, AMX's next
// tile). The same bits. Measured on a Xeon with AMX (2026-12-02, dev/cpu/results): the bf16 T=64
// step 1.5% faster (medians of 6 rounds), fp32's about 1%; at T=1024 fc's forward 15.9 -> 13.4 ms
// in the step, but the step within its spread (the other products take the time back).
// GEMM_STREAM_PRE=0 builds plain stores.
#ifndef GEMM_STREAM_PRE
#define GEMM_STREAM_PRE 1
#endif
static inline int gemm_pre_streams(const float *pre, ptrdiff_t ldpre) {
    return GEMM_STREAM_PRE && pre != NULL && (uintptr_t)pre % (GEMM_VEC * sizeof(float)) == 0 && ldpre % GEMM_VEC == 0;
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

// acc (R x NR) += the first R rows of a panel (n x MR) x b panel (n x NR), k in increasing order.
static inline __attribute__((always_inline)) void gemm_micro_steps(const int R, int n, const float *restrict a,
                                                                   const float *restrict b,
                                                                   gemm_vf acc[GEMM_MR][GEMM_NV]) {
    for (int k = 0; k < n; k++) {
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
}

// c (R x NR, row stride ldc) = epilogue(sum over k < kc of the first R rows of a panel (kc x MR)
// x b panel (kc x NR)); cin and pre are R x NR too. R (1..MR) is a compile-time constant at every
// call (gemm_micro_kernel below), so the accumulators stay in registers and a tile of the last,
// partial row panel (M = B*T = 256 leaves 4 rows of 12, or of 6) costs R rows' work.
static inline __attribute__((always_inline)) void
gemm_micro_kernel_rows(const int R, int kc, const float *restrict a, const float *restrict b, float *c,
                       ptrdiff_t ldc, const gemm_tile_epilogue *ep) {
    const int stream_pre = ep->gelu && gemm_pre_streams(ep->pre, ep->ldpre);
    const float *pre = ep->gelu && !stream_pre ? ep->pre : NULL;  // written after the k loop: fetched
    const int fetch_at = gemm_c_fetch_step(kc, (size_t)kc * GEMM_NR * sizeof(float));
    if (fetch_at > 0) { gemm_fetch_tile(R, GEMM_NR, c, ldc, ep->cin, ep->ldcin, pre, ep->ldpre, 0); }
    gemm_vf acc[GEMM_MR][GEMM_NV];
    #pragma GCC unroll 16
    for (int i = 0; i < R; i++) {
        #pragma GCC unroll 4
        for (int j = 0; j < GEMM_NV; j++) { acc[i][j] = (gemm_vf){0}; }
    }
    // two loops, so that neither tests for the fetch step at every k
    gemm_micro_steps(R, fetch_at, a, b, acc);
    gemm_fetch_tile(R, GEMM_NR, c, ldc, ep->cin, ep->ldcin, pre, ep->ldpre, 1);
    gemm_micro_steps(R, kc - fetch_at, a + (ptrdiff_t)fetch_at * GEMM_MR, b + (ptrdiff_t)fetch_at * GEMM_NR, acc);
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
                    if (stream_pre) {
                        vec_stream(ep->pre + i * ep->ldpre + j * GEMM_VEC, acc[i][j]);
                    } else {
                        *(gemm_vfu *)(ep->pre + i * ep->ldpre + j * GEMM_VEC) = acc[i][j];
                    }
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

// c (mr x width, mr <= rows of val) = gelu(val) by gelu_vec, as the fp32 micro-kernel does it;
// width a multiple of GEMM_VEC, c may be val. A kernel that writes its tile's value to pre
// applies GELU from there.
static void gemm_tile_gelu(int mr, int width, const float *val, ptrdiff_t ld_val, float *c, ptrdiff_t ldc) {
    for (int i = 0; i < mr; i++) {
        #pragma GCC unroll 4
        for (int j = 0; j < width; j += GEMM_VEC) {
            *(gemm_vfu *)(c + i * ldc + j) = gelu_vec(*(const gemm_vfu *)(val + i * ld_val + j));
        }
    }
}

// The epilogue of a tile whose sums a kernel left in memory: tile holds them (rows ld_tile
// apart, ld_tile a multiple of GEMM_VEC and at least nr rounded up to it; overwritten); the mr x
// nr corner goes to c with the same operations, in the same order, as the fp32 micro-kernel's
// epilogue (addend, then bias, then GELU by gelu_vec), so that every path's epilogue gives the
// same bits from the same sums. A row's whole vectors are finished in registers; the columns
// past them (nr not a multiple of GEMM_VEC) in the tile, with GELU over a whole vector there.
// Inlined where a kernel calls it with constant sizes (AMX's whole 32 x 32 tile): its row loop
// then has no library copies, which made fc's forward (bias and GELU) twice as slow as fc
// proj's input gradient, the same shape, on the lent Xeon (2026-11-27); inlining the element
// loops of before instead of finishing in registers was 0.71-0.88x on the forward products.
static inline __attribute__((always_inline)) void gemm_tile_finish_inline(float *tile, ptrdiff_t ld_tile, int mr, int nr,
                                                                          float *c, ptrdiff_t ldc,
                                                                          const gemm_tile_epilogue *ep) {
    const int nv = nr / GEMM_VEC * GEMM_VEC;  // columns in whole vectors
    const int stream_pre = ep->gelu && gemm_pre_streams(ep->pre, ep->ldpre);
    for (int i = 0; i < mr; i++) {
        float *t = tile + i * ld_tile;
        #pragma GCC unroll 4
        for (int j = 0; j < nv; j += GEMM_VEC) {
            gemm_vfu v = *(const gemm_vfu *)(t + j);
            if (ep->cin != NULL) { v += *(const gemm_vfu *)(ep->cin + i * ep->ldcin + j); }
            if (ep->bias != NULL) { v += *(const gemm_vfu *)(ep->bias + j); }
            if (ep->gelu) {
                if (stream_pre) {
                    vec_stream(ep->pre + i * ep->ldpre + j, v);
                } else if (ep->pre != NULL) {
                    *(gemm_vfu *)(ep->pre + i * ep->ldpre + j) = v;
                }
                v = gelu_vec(v);
            }
            *(gemm_vfu *)(c + i * ldc + j) = v;
        }
        if (nv == nr) { continue; }
        if (ep->cin != NULL) {
            for (int j = nv; j < nr; j++) { t[j] += ep->cin[i * ep->ldcin + j]; }
        }
        if (ep->bias != NULL) {
            for (int j = nv; j < nr; j++) { t[j] += ep->bias[j]; }
        }
        if (ep->gelu) {
            if (ep->pre != NULL) { memcpy(ep->pre + i * ep->ldpre + nv, t + nv, (nr - nv) * sizeof(float)); }
            gemm_tile_gelu(1, GEMM_VEC, t + nv, ld_tile, t + nv, ld_tile);
        }
        memcpy(c + i * ldc + nv, t + nv, (nr - nv) * sizeof(float));
    }
}
static void gemm_tile_finish(float *tile, ptrdiff_t ld_tile, int mr, int nr, float *c, ptrdiff_t ldc,
                             const gemm_tile_epilogue *ep) {
    gemm_tile_finish_inline(tile, ld_tile, mr, nr, c, ldc, ep);
}

// The source lines of the blocks packed next, which a tile function may fetch (gemm.h).
typedef struct gemm_prefetch gemm_prefetch;

// A micro-kernel as gemm.h's loops see it, chosen once per gemm call from a table (gemm.h's
// gemm_kernels): its tile, its blocking, its packing, one tile function with the epilogue, and
// a per-thread set-up. The loops know nothing else of it.
//   A packed: mc rows in mr-row panels, each panel mr * kw words; B: nc columns in nr-column
//   panels of nr * kw words; kw = the block's packed units rounded up to kpad, times unit_words.
typedef struct {
    const char *name;   // for the start-up line, e.g. "AMX tdpbf16ps"
    int mr, nr;         // the tile of C of one tile call
    int kc, mc, nc;     // block sizes: kc in packed units (at most; a multiple of kpad), mc rows, nc columns
    int kstep;          // k's per packed unit: 1 (fp32 element) or 2 (bf16 pair)
    int unit_words;     // words (4 bytes) per packed unit in a panel row: 1, or 2 (a pair as two floats)
    int kpad;           // a block's units per panel row are rounded up to a multiple of this
    int fetch_next;     // 1: the tile calls fetch the source of the blocks packed next (gemm_prefetch)
    // pack the mc x kc (k's, not units) block of A at a, A(i, k) = a[i*rs + k*cs]; and B's kc x nc
    void (*pack_a)(int mc, int kc, const float *a, ptrdiff_t rs, ptrdiff_t cs, float *buf);
    void (*pack_b)(int kc, int nc, const float *b, ptrdiff_t rs, ptrdiff_t cs, float *buf);
    // c (mr x nr of the tile, mr <= MR, nr <= NR) = epilogue(a panel . b panel over kw words a row)
    void (*tile)(int mr, int nr, int kw, const float *apanel, const float *bpanel, float *c, ptrdiff_t ldc,
                 const gemm_tile_epilogue *ep, gemm_prefetch *pf);
    void (*thread_init)(void);  // NULL, or what a thread runs before its tiles (AMX: its tile configuration)
    // B's kc x nc block from a bf16 copy (uint16 bits, B(k, n) = b[k*rs + n*cs], what pack_b would
    // round each element to): the same packed panel as pack_b's; NULL where the kernel has none
    // (fp32), and gemm then packs B from the fp32 source
    void (*pack_b16)(int kc, int nc, const uint16_t *b, ptrdiff_t rs, ptrdiff_t cs, float *buf);
    // A's mc x kc block from bf16 bits (A(i, k) = a[i*rs + k*cs], what pack_a would round each
    // element to): pack_a's panel; NULL where the kernel has none (fp32)
    void (*pack_a16)(int mc, int kc, const uint16_t *a, ptrdiff_t rs, ptrdiff_t cs, float *buf);
    // a block whose a panels take at most this many bytes and whose columns are whole rows of C
    // runs its tiles a row of tiles after another (gemm_macro_kernel); 0: never
    int rows_outer_bytes;
    // 1: the products flush denormal bf16 operands to zero (vdpbf16ps, TDPBF16PS), so a bf16 copy
    // of B may hold a zero for a denormal (vecmath.h's vec_bf16_bits_ftz) and give the same sums
    int flushes_denormals;
    // a block whose panels are longer than this many words a row runs every other tile of C (a
    // checkerboard) with its k steps last to first (gemm_tile_epilogue's k_reverse); 0: never
    int k_reverse_words;
} gemm_kernel;
