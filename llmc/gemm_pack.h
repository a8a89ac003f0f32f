/*
Packing for gemm.h: the blocks of A and B copied into the panels each micro-kernel reads, and
rounded to bf16 on the way where the run is bf16 (the micro-kernels round nothing themselves).

  fp32 and the emulated bf16 path (gemm_pack_panels_ex): P-wide panels of floats, buf[panel][k][r];
    the emulated path's hold each pair's two bf16-rounded values in the order (k+1, k), in which
    vdpbf16ps adds them, so that the fp32 micro-kernel gives its bits (gemm_kernel_bf16.h).
  vdpbf16ps and AMX (gemm_pack_bf16): panels of pair words, buf[panel][p][r] = (k = 2p, 2p+1);
    AMX's B panels are the same, padded to whole tile rows, and its A panels are its own
    (gemm_pack_a_amx in gemm_kernel_amx.h: each row contiguous in k, as a tile wants).

Any source layout is read through a row stride and a k stride, fp32 or bf16 bits (src16: the
weights' copy, or the classifier's dlogits); the layouts the model uses have vectorized paths (in-register transposes, and
gemm_kernel_bf16.h's gemm_pack_block_bf16_fast). gemm.h's kernel table (gemm_kernels) names, for each
kernel, the packers at the end of this file.
*/
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gemm_kernel.h"      // GEMM_MR, GEMM_NR
#include "gemm_kernel_amx.h"  // GEMM_AMX_NR, gemm_amx_kw
#include "gemm_kernel_bf16.h" // GEMM_BF16_MR, GEMM_BF16_NR, gemm_bf16_pair, gemm_pack_block_bf16_fast
#include "vecmath.h"

static inline int gemm_min(int a, int b) { return a < b ? a : b; }

// x's bf16 bits as the float they stand for.
static inline float gemm_bf16_float(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

// VEC_WIDTH bf16 values at h (any alignment) as floats.
typedef uint16_t gemm_vu16 __attribute__((vector_size(VEC_WIDTH * sizeof(uint16_t)), aligned(2), may_alias));
VEC_INLINE vfloat gemm_bf16_vec(const uint16_t *h) {
    return (vfloat)(__builtin_convertvector(*(const gemm_vu16 *)h, vuint) << 16);
}

// Element e of a pack's source: fp32 at src, or bf16 bits at src16 where that is not NULL
// (gpt2.h's bf16 copy of the weights); src16 is a constant at every call but one.
static inline __attribute__((always_inline)) float gemm_pack_load(const float *src, const uint16_t *src16, ptrdiff_t e) {
    return src16 != NULL ? gemm_bf16_float(src16[e]) : src[e];
}

// The emulated bf16 path rounds a panel's rows to bf16 in place right after writing them,
// while they are in L1 (n floats at p; nothing for fp32). Rounding a bf16 source again leaves
// it as it is (a NaN quiet already stays so).
static inline __attribute__((always_inline)) void gemm_pack_round(const int emulated, const int P, float *p, int n) {
    if (!emulated) { return; }
    int i = 0;
    for (; i + VEC_WIDTH <= n; i += VEC_WIDTH) { vec_store(p + i, vec_bf16_round(vec_load(p + i))); }
    for (; i < n; i++) { p[i] = gemm_bf16_round(p[i]); }
}

// Rows of the source are copied in chunks of GEMM_PACK_ROWS: for a strided (copy) pack, each
// chunk's rows are read left to right across all panels, so the hardware prefetcher sees a few
// sequential streams instead of one jump to a new row (and often a new page) per 64 bytes.
#define GEMM_PACK_ROWS 8
// 1: a panel whose width is whole vectors (B's) is interleaved from rows along k by in-register
// transposes (vec_transpose), 0: element by element (dev/cpu/gemm_ab times the two).
#ifndef GEMM_PACK_TRANSPOSE
#define GEMM_PACK_TRANSPOSE 1
#endif
#ifndef GEMM_PACK_FETCH_AHEAD
#define GEMM_PACK_FETCH_AHEAD 1
#endif

// Packs len rows (of A; or columns, of B) by kc k's, element (r, k) at src[r*s_r + k*s_k] (or
// src16's), into P-wide panels buf[panel][k][r] (rows past len zero): A's MR-row panels and B's
// NR-column panels, P a compile-time constant, and so is `emulated`:
//   0: fp32, kc rows a panel;
//   1: the emulated bf16 path's panels: 2 * ((kc + 1) / 2) rows, source k in row k ^ 1 (the
//      pairs (k+1, k): the fp32 micro-kernel adds in packed order, so k+1 goes first, as
//      vdpbf16ps adds it, gemm_kernel_bf16.h), rounded to bf16; an odd kc's missing k is zero.
// The native bf16 paths pack pair words instead (gemm_pack_bf16).
static inline __attribute__((always_inline)) void gemm_pack_panels_ex(const int P, const int emulated, int len, int kc,
                                                                      const float *src, const uint16_t *src16,
                                                                      ptrdiff_t s_r, ptrdiff_t s_k, float *restrict buf) {
    const int rows = emulated ? (kc + 1) / 2 * 2 : kc;  // k rows of a panel
    const int swap = emulated ? 1 : 0;                  // source k goes to row k ^ swap
    const int pad = rows > kc;                          // row kc - 1 (odd kc's) stays zero
    const int full = len / P * P;  // rows in full panels
    if (s_r == 1) {  // a panel's P values of one k are contiguous (A transposed, B as it is)
        for (int k0 = 0; k0 < kc; k0 += GEMM_PACK_ROWS) {
            const int kb = gemm_min(GEMM_PACK_ROWS, kc - k0);
            for (int r0 = 0; r0 < full; r0 += P) {
                float *panel = buf + (size_t)r0 * rows;
                for (int k = k0; k < k0 + kb; k++) {  // a fixed-size copy: plain vector moves, not gathers
                    float *dst = panel + (k ^ swap) * P;
                    if (GEMM_PACK_FETCH_AHEAD && emulated && k + GEMM_PACK_ROWS < kc) {  // the next chunk's lines
                        if (src16 != NULL) {
                            __builtin_prefetch(src16 + (k + GEMM_PACK_ROWS) * s_k + r0);
                        } else {
                            __builtin_prefetch(src + (k + GEMM_PACK_ROWS) * s_k + r0);
                            __builtin_prefetch(src + (k + GEMM_PACK_ROWS) * s_k + r0 + P - 1);
                        }
                    }
                    if (src16 != NULL) {
                        int r = 0;
                        for (; r + VEC_WIDTH <= P; r += VEC_WIDTH) { vec_store(dst + r, gemm_bf16_vec(src16 + k * s_k + r0 + r)); }
                        for (; r < P; r++) { dst[r] = gemm_bf16_float(src16[k * s_k + r0 + r]); }
                    } else {
                        memcpy(dst, src + k * s_k + r0, P * sizeof(float));
                    }
                }
                // rows k0 .. k0 + kb rounded up to a pair are written (row kc - 1 of an odd kc
                // with garbage, zeroed below)
                gemm_pack_round(emulated, P, panel + k0 * P, (gemm_min(k0 + kb + 1, rows) & ~1) * P - k0 * P);
            }
        }
        if (pad) {
            for (int r0 = 0; r0 < full; r0 += P) { memset(buf + (size_t)r0 * rows + (kc - 1) * P, 0, P * sizeof(float)); }
        }
    } else if (s_k == 1) {  // each row runs along k: interleave P rows
        for (int r0 = 0; r0 < full; r0 += P) {
            float *dst = buf + (size_t)r0 * rows;
            // P short runs are too many streams for the hardware prefetcher: fetch the next
            // panel's runs, a line of each per 16 k (fp32) or per 32 k (bf16), while this one
            // is interleaved.
            const ptrdiff_t next = r0 + P < full ? (ptrdiff_t)(r0 + P) * s_r : (ptrdiff_t)r0 * s_r;
            for (int k0 = 0; k0 < kc; k0 += 16) {
                #pragma GCC unroll 32
                for (int r = 0; r < P; r++) {
                    if (src16 != NULL) {
                        if (k0 % 32 == 0) { __builtin_prefetch(src16 + next + r * s_r + k0); }
                    } else {
                        __builtin_prefetch(src + next + r * s_r + k0);
                    }
                }
                const int kend = gemm_min(k0 + 16, kc);
                if (GEMM_PACK_TRANSPOSE && P % VEC_WIDTH == 0 && kend == k0 + 16) {
                    // B's panels: VEC_WIDTH rows x VEC_WIDTH k at a time, transposed in registers
                    #pragma GCC unroll 4
                    for (int g = 0; g < P; g += VEC_WIDTH) {
                        #pragma GCC unroll 4
                        for (int v = 0; v < 16; v += VEC_WIDTH) {
                            vfloat x[VEC_WIDTH];
                            #pragma GCC unroll 16
                            for (int r = 0; r < VEC_WIDTH; r++) {
                                const ptrdiff_t e = (ptrdiff_t)(r0 + g + r) * s_r + k0 + v;
                                x[r] = src16 != NULL ? gemm_bf16_vec(src16 + e) : vec_load(src + e);
                                if (emulated) { x[r] = vec_bf16_round(x[r]); }
                            }
                            vec_transpose(x);
                            #pragma GCC unroll 16
                            for (int k = 0; k < VEC_WIDTH; k++) { vec_store(dst + ((k0 + v + k) ^ swap) * P + g, x[k]); }
                        }
                    }
                    continue;
                }
                if (emulated && kend == k0 + 16) {
                    // A's panels (MR rows: not a whole number of vectors, so no transpose in
                    // registers): each row's 16 k as vectors into t, rounded there, then
                    // interleaved from L1
                    float t[32][16] __attribute__((aligned(64)));  // P <= 32 (GEMM_NR)
                    #pragma GCC unroll 32
                    for (int r = 0; r < P; r++) {
                        const ptrdiff_t e = (ptrdiff_t)(r0 + r) * s_r + k0;
                        #pragma GCC unroll 4
                        for (int v = 0; v < 16; v += VEC_WIDTH) {
                            vfloat x;
                            if (src16 != NULL) {
                                x = gemm_bf16_vec(src16 + e + v);
                            } else {
                                x = vec_load(src + e + v);
                            }
                            vec_store(&t[r][v], x);
                        }
                    }
                    gemm_pack_round(emulated, P, &t[0][0], P * 16);
                    for (int k = 0; k < 16; k++) {
                        #pragma GCC unroll 32
                        for (int r = 0; r < P; r++) { dst[((k0 + k) ^ swap) * P + r] = t[r][k]; }
                    }
                    continue;
                }
                for (int k = k0; k < kend; k++) {
                    #pragma GCC unroll 32
                    for (int r = 0; r < P; r++) { dst[(k ^ swap) * P + r] = gemm_pack_load(src, src16, (ptrdiff_t)(r0 + r) * s_r + k); }
                }
                if (emulated) {  // rows k0 .. kend (rounded up to a pair) are written
                    const int rend = gemm_min(kend + (kend & 1), rows);
                    if (pad && rend == rows) { memset(dst + (kc - 1) * P, 0, P * sizeof(float)); }
                    gemm_pack_round(emulated, P, dst + k0 * P, (rend - k0) * P);
                }
            }
        }
    } else {
        for (int r0 = 0; r0 < full; r0 += P) {
            float *dst = buf + (size_t)r0 * rows;
            if (pad) { memset(dst + (kc - 1) * P, 0, P * sizeof(float)); }
            for (int k = 0; k < kc; k++) {
                for (int r = 0; r < P; r++) { dst[(k ^ swap) * P + r] = gemm_pack_load(src, src16, (ptrdiff_t)(r0 + r) * s_r + (ptrdiff_t)k * s_k); }
            }
            gemm_pack_round(emulated, P, dst, rows * P);
        }
    }
    if (full < len) {  // the last, partial panel
        const int rn = len - full;
        float *dst = buf + (size_t)full * rows;
        if (pad) { memset(dst + (kc - 1) * P, 0, P * sizeof(float)); }
        for (int k = 0; k < kc; k++) {
            for (int r = 0; r < P; r++) {
                dst[(k ^ swap) * P + r] = r < rn ? gemm_pack_load(src, src16, (ptrdiff_t)(full + r) * s_r + (ptrdiff_t)k * s_k) : 0.0f;
            }
        }
        gemm_pack_round(emulated, P, dst, rows * P);
    }
}

// The mc x kc block of A at a into MR-row panels, buf[panel][k][i].
static void gemm_pack_a(int mc, int kc, const float *a, ptrdiff_t rs, ptrdiff_t cs, float *restrict buf) {
    gemm_pack_panels_ex(GEMM_MR, 0, mc, kc, a, NULL, rs, cs, buf);
}

// The kc x nc block of B at b into NR-column panels, buf[panel][k][j].
static void gemm_pack_b(int kc, int nc, const float *b, ptrdiff_t rs, ptrdiff_t cs, float *restrict buf) {
    gemm_pack_panels_ex(GEMM_NR, 0, nc, kc, b, NULL, cs, rs, buf);
}

// Packs a block of A or B for the native bf16 paths (vdpbf16ps, AMX): len rows of A (or columns
// of B) by kc k's, element (r, k) at src[r*s_r + k*s_k], into r_panel-wide panels of
// kw >= (kc + 1) / 2 pair words, buf[panel][p][r] = (k = 2p, 2p+1) (rows past len, the k past kc
// and the pairs past them padded with zero: AMX's panels hold a multiple of 16). src16, where
// not NULL, is the source already in bf16 instead (uint16 bits, the same strides; src unused),
// e.g. gpt2.h's copy of the weights: rounding a bf16 value again leaves it as it is (a NaN there
// is quiet already), so the panels are those of the fp32 values it came from.
static void gemm_pack_bf16(int r_panel, int len, int kc, int kw, const float *src, const uint16_t *src16,
                           ptrdiff_t s_r, ptrdiff_t s_k, uint32_t *buf) {
    const int kcp = (kc + 1) / 2, kfull = kc / 2;  // pairs, and pairs with both halves in K
    const int full = len / r_panel * r_panel;     // rows in full panels
    int fast_pairs = 0;  // pairs of the full panels already packed, vectorized where the layout allows
#if GEMM_HAVE_BF16_KERNEL
    if (full > 0 && gemm_pack_block_bf16_fast(r_panel, full, kfull, kw, src, src16, s_r, s_k, buf)) {
        fast_pairs = kfull;
    }
#endif
    for (int r0 = 0; r0 < len; r0 += r_panel) {
        const int rn = gemm_min(r_panel, len - r0);
        uint32_t *w = buf + (size_t)r0 * kw;
        for (int p = rn == r_panel ? fast_pairs : 0; p < kw; p++) {
            for (int r = 0; r < r_panel; r++) {
                float lo = 0.0f, hi = 0.0f;
                if (r < rn && p < kcp) {
                    const ptrdiff_t e = (ptrdiff_t)(r0 + r) * s_r + (ptrdiff_t)(2 * p) * s_k;
                    lo = gemm_pack_load(src, src16, e);
                    hi = p >= kfull ? 0.0f : gemm_pack_load(src, src16, e + s_k);
                }
                w[(size_t)p * r_panel + r] = gemm_bf16_pair(lo, hi);
            }
        }
    }
}

// The emulated bf16 path's packing: the fp32 kernel's panels of bf16-rounded floats, pairs (k+1, k).
static void gemm_pack_a_bf16_emulated(int mc, int kc, const float *a, ptrdiff_t rs, ptrdiff_t cs, float *buf) {
    gemm_pack_panels_ex(GEMM_MR, 1, mc, kc, a, NULL, rs, cs, buf);
}
static void gemm_pack_b_bf16_emulated(int kc, int nc, const float *b, ptrdiff_t rs, ptrdiff_t cs, float *buf) {
    gemm_pack_panels_ex(GEMM_NR, 1, nc, kc, b, NULL, cs, rs, buf);
}
static void gemm_pack_b16_bf16_emulated(int kc, int nc, const uint16_t *b, ptrdiff_t rs, ptrdiff_t cs, float *buf) {
    gemm_pack_panels_ex(GEMM_NR, 1, nc, kc, NULL, b, cs, rs, buf);
}
static void gemm_pack_a16_bf16_emulated(int mc, int kc, const uint16_t *a, ptrdiff_t rs, ptrdiff_t cs, float *buf) {
    gemm_pack_panels_ex(GEMM_MR, 1, mc, kc, NULL, a, rs, cs, buf);
}

#if GEMM_HAVE_BF16_KERNEL
static void gemm_pack_b16_bf16_native(int kc, int nc, const uint16_t *b, ptrdiff_t rs, ptrdiff_t cs, float *buf) {
    gemm_pack_bf16(GEMM_BF16_NR, nc, kc, (kc + 1) / 2, NULL, b, cs, rs, (uint32_t *)buf);
}
static void gemm_pack_a_bf16_native(int mc, int kc, const float *a, ptrdiff_t rs, ptrdiff_t cs, float *buf) {
    gemm_pack_bf16(GEMM_BF16_MR, mc, kc, (kc + 1) / 2, a, NULL, rs, cs, (uint32_t *)buf);
}
static void gemm_pack_a16_bf16_native(int mc, int kc, const uint16_t *a, ptrdiff_t rs, ptrdiff_t cs, float *buf) {
    gemm_pack_bf16(GEMM_BF16_MR, mc, kc, (kc + 1) / 2, NULL, a, rs, cs, (uint32_t *)buf);
}
static void gemm_pack_b_bf16_native(int kc, int nc, const float *b, ptrdiff_t rs, ptrdiff_t cs, float *buf) {
    gemm_pack_bf16(GEMM_BF16_NR, nc, kc, (kc + 1) / 2, b, NULL, cs, rs, (uint32_t *)buf);
}

#if GEMM_HAVE_AMX_KERNEL
// AMX's B panels are the vdpbf16ps kernel's (32 columns of pair words), each padded with zero
// pairs to gemm_amx_kw(kc), a whole number of tile rows.
static void gemm_pack_b_amx(int kc, int nc, const float *b, ptrdiff_t rs, ptrdiff_t cs, float *buf) {
    gemm_pack_bf16(GEMM_AMX_NR, nc, kc, gemm_amx_kw(kc), b, NULL, cs, rs, (uint32_t *)buf);
}
static void gemm_pack_b16_amx(int kc, int nc, const uint16_t *b, ptrdiff_t rs, ptrdiff_t cs, float *buf) {
    gemm_pack_bf16(GEMM_AMX_NR, nc, kc, gemm_amx_kw(kc), NULL, b, cs, rs, (uint32_t *)buf);
}
#endif
#endif  // GEMM_HAVE_BF16_KERNEL
