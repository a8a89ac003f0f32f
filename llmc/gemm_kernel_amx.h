/*
The bf16 GEMM micro-kernel on Intel AMX tiles (Xeon 4th generation and later): TDPBF16PS.

AMX has eight tile registers of up to 16 rows x 64 bytes. TDPBF16PS tmm_c, tmm_a, tmm_b adds
to the fp32 16 x 16 tile C the product of A (16 rows x 16 pair words: row m holds the bf16 of
k = 0..31 of row m, k even in the low half) and B (16 rows of pair words: row p holds, for 16
columns n, the pair (B(2p, n), B(2p+1, n))). gemm.h's packed B panels of the vdpbf16ps kernel
already hold exactly that: a panel row p is the 32 columns' pair words of pair p, so a B tile
is 16 panel rows, 128 bytes apart, and its left or right 64 bytes. A wants each row contiguous
in k, so its panels here are [chunk of 16 pairs][row][16 pair words] (a tile is 1 KiB,
contiguous). K is padded with zero pairs to a multiple of 16 pairs in both.

The tile: 32 x 32 of C in the four accumulator tiles 0..3 (rows 0-15 / 16-31 x columns
0-15 / 16-31), A in tiles 4 and 5, B in 6 and 7: per 16 pairs, four loads and four TDPBF16PS.
The accumulators start from the addend (or from C, after the first k block), loaded into the
tiles, and a whole tile goes back to C by tile stores; the bias and GELU of a product's last
k block, and the edges of C, go through a scratch tile and the shared fp32 epilogue
(gemm_kernel.h's gemm_tile_finish). What TDPBF16PS computes, measured by dev/cpu/amx_check.c on the lent
Xeon (dev/cpu/results/2026-11-26-xeon-amx): a pair's two products summed and rounded to fp32
before the accumulator is added, denormal inputs, products and results flushed to zero, and
over a tile row an order no simple formula tried reproduces. So its sums are not the emulated
(= vdpbf16ps) path's bits: it is checked against float64 (gemm_check, test_gpt2's bf16 tolerances).

Linux gives a process the AMX state only on request: arch_prctl(ARCH_REQ_XCOMP_PERM,
XFEATURE_XTILEDATA) once (gemm_amx_available, from serial code), and each thread loads the
tile configuration before its first tile (gemm_amx_thread_init). Compiled by target attribute
in every x86-64 build; chosen at run time (precision.h).

-DGEMM_AMX_EMULATE builds the same packing and loops on a plain C model of the tile
instructions (each pair's products added in the SDM's order, k then k+1, each add rounded):
scripts/tests/test_gemm.sh checks the packing and the loops this way on CPUs without AMX.
*/
#pragma once

#include <stdint.h>
#include <string.h>

#include "gemm_kernel.h"
#include "gemm_kernel_bf16.h"

#define GEMM_AMX_MR 32
#define GEMM_AMX_NR 32
#define GEMM_AMX_KP 16  // pairs per tile row: a k block's pairs are padded to a multiple of it
#ifndef GEMM_AMX_KCP
#define GEMM_AMX_KCP 384  // pairs per k block: K = 768 (GPT-2 124M's C) in one block
#endif
#ifndef GEMM_AMX_MC
#define GEMM_AMX_MC 256
#endif
#ifndef GEMM_AMX_NC
#define GEMM_AMX_NC 1024
#endif

// Blocks whose a panels take at most this many bytes (k blocks of up to 128 pairs: K = 256, the
// products to the weights at T=64 and the LM head's) run their tiles a row of tiles after
// another where they span whole rows of C (gemm_macro_kernel). Measured on the lent Xeon
// (gemm_ab, 5 rounds, same bits): the LM head's weight gradient (M = 50304, N = 768, K = 256,
// 154 MB of C) 1.37x, T=64's qkv and fc weight gradients 1.09-1.10x; fc proj's, whose 3072
// columns the two threads split, 0.91x in that order, hence the whole rows. 0: never.
#ifndef GEMM_AMX_ROWS_OUTER_BYTES
#define GEMM_AMX_ROWS_OUTER_BYTES 16384
#endif

#if GEMM_HAVE_BF16_KERNEL
#define GEMM_HAVE_AMX_KERNEL 1
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#define GEMM_AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512bf16,avx512f,avx512bw,avx512vl")))

#ifdef GEMM_AMX_EMULATE
// The tile registers of this thread, and the instructions on them, in C.
static __thread uint8_t gemm_amx_tmm[8][16][64] __attribute__((aligned(64)));
static inline float gemm_amx_bf16_to_f32(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}
static void gemm_amx_emu_load(int t, const void *base, ptrdiff_t stride) {
    for (int r = 0; r < 16; r++) { memcpy(gemm_amx_tmm[t][r], (const char *)base + r * stride, 64); }
}
static void gemm_amx_emu_store(int t, void *base, ptrdiff_t stride) {
    for (int r = 0; r < 16; r++) { memcpy((char *)base + r * stride, gemm_amx_tmm[t][r], 64); }
}
static void gemm_amx_emu_dp(int tc, int ta, int tb) {
    for (int m = 0; m < 16; m++) {
        for (int n = 0; n < 16; n++) {
            float acc;
            memcpy(&acc, &gemm_amx_tmm[tc][m][4 * n], 4);
            for (int p = 0; p < 16; p++) {
                uint16_t a[2], b[2];
                memcpy(a, &gemm_amx_tmm[ta][m][4 * p], 4);
                memcpy(b, &gemm_amx_tmm[tb][p][4 * n], 4);
                volatile float t = acc + gemm_amx_bf16_to_f32(a[0]) * gemm_amx_bf16_to_f32(b[0]);
                acc = t + gemm_amx_bf16_to_f32(a[1]) * gemm_amx_bf16_to_f32(b[1]);
            }
            memcpy(&gemm_amx_tmm[tc][m][4 * n], &acc, 4);
        }
    }
}
#define GEMM_AMX_ZERO(t) memset(gemm_amx_tmm[t], 0, sizeof(gemm_amx_tmm[t]))
#define GEMM_AMX_LOAD(t, base, stride) gemm_amx_emu_load(t, base, stride)
#define GEMM_AMX_LOAD_ONCE(t, base, stride) gemm_amx_emu_load(t, base, stride)
#define GEMM_AMX_STORE(t, base, stride) gemm_amx_emu_store(t, base, stride)
#define GEMM_AMX_DP(c, a, b) gemm_amx_emu_dp(c, a, b)
#else
#define GEMM_AMX_ZERO(t) _tile_zero(t)
#define GEMM_AMX_LOAD(t, base, stride) _tile_loadd(t, base, stride)
#define GEMM_AMX_LOAD_ONCE(t, base, stride) _tile_stream_loadd(t, base, stride)  // TILELOADDT1
#define GEMM_AMX_STORE(t, base, stride) _tile_stored(t, base, stride)
#define GEMM_AMX_DP(c, a, b) _tile_dpbf16ps(c, a, b)
#endif

// 1 if this CPU has AMX-TILE and AMX-BF16 (and AVX512_BF16, which the packing uses), the OS
// enables the tile state, and Linux granted this process its use. Call from serial code; the
// permission is asked for once. With GEMM_AMX_EMULATE: the CPU needs AVX512_BF16 only.
static int gemm_amx_available(void) {
    static int available = -1;
    if (available >= 0) { return available; }
    available = 0;
    if (!gemm_bf16_native_available()) { return 0; }
#ifdef GEMM_AMX_EMULATE
    available = 1;
#else
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) { return 0; }
    const int amx_bf16 = (edx >> 22) & 1, amx_tile = (edx >> 24) & 1;
    if (!amx_bf16 || !amx_tile) { return 0; }
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !((ecx >> 27) & 1)) { return 0; }  // OSXSAVE
    uint32_t xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    if ((xcr0_lo & (3u << 17)) != (3u << 17)) { return 0; }  // XTILECFG and XTILEDATA enabled by the OS
    // Linux (5.16+): ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18)
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) { return 0; }
    available = 1;
#endif
    return available;
}

// The tile configuration: palette 1, tiles 0..7 all 16 rows x 64 bytes.
typedef struct {
    uint8_t palette_id, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} gemm_amx_config;

// Palette 1, tiles 0..7 all 16 rows x 64 bytes. A constant object, not one filled on the stack:
// GCC 12's _tile_loadconfig names only the first 8 bytes as the memory it reads, so stores to a
// local's colsb and rows were dropped as dead and LDTILECFG read stack garbage (a thread's first
// tile instruction then raised SIGILL, seen on a Xeon with AMX under Debian 12's gcc 12.2).
static const gemm_amx_config gemm_amx_tile_config __attribute__((aligned(64))) = {
    .palette_id = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

// Loads the tile configuration on this thread, once.
GEMM_AMX_TARGET
static void gemm_amx_thread_init(void) {
#ifndef GEMM_AMX_EMULATE
    static __thread int configured = 0;
    if (configured) { return; }
    __asm__ volatile("ldtilecfg %0" : : "m"(gemm_amx_tile_config));  // the operand is the whole 64 bytes
    configured = 1;
#endif
}

// Pairs per panel row of a k block of kc k's: (kc + 1) / 2 rounded up to a tile row.
static inline int gemm_amx_kw(int kc) { return ((kc + 1) / 2 + GEMM_AMX_KP - 1) / GEMM_AMX_KP * GEMM_AMX_KP; }

// Element e of an A block's source as bf16 bits in the high half: rounded from fp32 at a, or
// taken from bf16 bits at a16 where that is not NULL.
static inline __attribute__((always_inline)) uint32_t gemm_amx_bits_at(const float *a, const uint16_t *a16, ptrdiff_t e) {
    return a16 != NULL ? (uint32_t)a16[e] << 16 : gemm_bf16_bits(a[e]);
}

// A (mc x kc k's, A(i, k) = a[i*rs + k*cs], or bf16 bits at a16 where that is not NULL) into
// 32-row panels of kw = gemm_amx_kw(kc) pairs: panel[chunk q][row r][pair j] = the pair (k =
// 2(16q + j), k + 1) of row r, rounded to bf16 (nearest-even), zero past mc and kc. Rows along k
// (cs = 1, the forward products and the product to the input): 16 pairs of a row at a time (by
// vcvtne2ps2bf16 from fp32); any other layout is packed into the vdpbf16ps layout ([pair][row],
// gemm_pack_block_bf16_fast) on the stack and transposed 16 x 16 words at a time.
GEMM_AMX_TARGET
static inline __attribute__((always_inline)) void gemm_pack_a_amx_ex(int mc, int kc, const float *a, const uint16_t *a16,
                                                                     ptrdiff_t rs, ptrdiff_t cs, float *buf) {
    const int kw = gemm_amx_kw(kc), kfull = kc / 2, kcp = (kc + 1) / 2;
    uint32_t *w = (uint32_t *)buf;
    for (int r0 = 0; r0 < mc; r0 += GEMM_AMX_MR) {
        const int rn = mc - r0 < GEMM_AMX_MR ? mc - r0 : GEMM_AMX_MR;
        uint32_t *panel = w + (size_t)r0 * kw;
        if (cs == 1) {
            for (int r = 0; r < GEMM_AMX_MR; r++) {
                const ptrdiff_t row = (ptrdiff_t)(r0 + r) * rs;
                int p = 0;
                if (r < rn) {
                    for (; p + 16 <= kfull; p += 16) {
                        __m512i v;
                        if (a16 != NULL) {
                            v = _mm512_loadu_si512((const void *)(a16 + row + 2 * p));
                        } else {
                            v = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(a + row + 2 * p + 16), _mm512_loadu_ps(a + row + 2 * p));
                        }
                        _mm512_store_si512((void *)(panel + (size_t)(p / 16) * GEMM_AMX_MR * 16 + r * 16), v);
                    }
                }
                for (; p < kw; p++) {
                    const uint32_t lo = r < rn && p < kcp ? gemm_amx_bits_at(a, a16, row + 2 * p) : 0;
                    const uint32_t hi = r < rn && p < kfull ? gemm_amx_bits_at(a, a16, row + 2 * p + 1) : 0;
                    panel[(size_t)(p / 16) * GEMM_AMX_MR * 16 + r * 16 + p % 16] = hi | lo >> 16;
                }
            }
            continue;
        }
        // [pair][row] on the stack, then each 16 x 16 block of words transposed into place
        uint32_t stage[GEMM_AMX_KCP * GEMM_AMX_MR] __attribute__((aligned(64)));
        const int fast = rn == GEMM_AMX_MR && gemm_pack_block_bf16_fast(GEMM_AMX_MR, GEMM_AMX_MR, kfull, kw,
                                                                        a16 != NULL ? NULL : a + r0 * rs,
                                                                        a16 != NULL ? a16 + r0 * rs : NULL, rs, cs, stage)
                             ? kfull : 0;
        for (int p = fast; p < kw; p++) {
            for (int r = 0; r < GEMM_AMX_MR; r++) {
                const ptrdiff_t e = (ptrdiff_t)(r0 + r) * rs + (ptrdiff_t)(2 * p) * cs;
                const uint32_t lo = r < rn && p < kcp ? gemm_amx_bits_at(a, a16, e) : 0;
                const uint32_t hi = r < rn && p < kfull ? gemm_amx_bits_at(a, a16, e + cs) : 0;
                stage[(size_t)p * GEMM_AMX_MR + r] = hi | lo >> 16;
            }
        }
        for (int q = 0; q < kw / 16; q++) {
            for (int g = 0; g < GEMM_AMX_MR; g += 16) {
                __m512i v[16];
                #pragma GCC unroll 16
                for (int j = 0; j < 16; j++) { v[j] = _mm512_load_si512((const void *)(stage + (size_t)(16 * q + j) * GEMM_AMX_MR + g)); }
                gemm_transpose16_epi32(v);  // v[r]: the 16 pairs of row g + r
                #pragma GCC unroll 16
                for (int r = 0; r < 16; r++) { _mm512_store_si512((void *)(panel + (size_t)q * GEMM_AMX_MR * 16 + (g + r) * 16), v[r]); }
            }
        }
    }
}
GEMM_AMX_TARGET
static void gemm_pack_a_amx(int mc, int kc, const float *a, ptrdiff_t rs, ptrdiff_t cs, float *buf) {
    gemm_pack_a_amx_ex(mc, kc, a, NULL, rs, cs, buf);
}
GEMM_AMX_TARGET
static void gemm_pack_a16_amx(int mc, int kc, const uint16_t *a, ptrdiff_t rs, ptrdiff_t cs, float *buf) {
    gemm_pack_a_amx_ex(mc, kc, NULL, a, rs, cs, buf);
}

// The panel that the next tile does not reuse is loaded by TILELOADDT1, a hint that its lines
// will not be read again soon, so that it does not evict the reused one from L1 (48 KiB on the
// lent Xeon, each 384-pair panel 48 KiB): in a column of tiles the a panel (the b panel is
// reused), in a row of tiles the b panel (oneDNN's AMX kernels load B so, their tiles a row after
// another). Measured on the lent Xeon (gemm_ab, 5 rounds, same bits; dev/cpu/results/2026-12-04-
// xeon-amx): 1.054 on the geometric mean of GPT-2 124M's 27 products, T=1024's 1.02-1.19x, the LM
// head's 1.00-1.12x, T=64's 0.97-1.03x. The a panel so in every order cost the products to the
// weights at T=64, whose blocks run a row after another, 5%: hence the panel by the order.
// GEMM_AMX_LOAD_HINT=0 builds plain loads for both.
#ifndef GEMM_AMX_LOAD_HINT
#define GEMM_AMX_LOAD_HINT 1
#endif

// One k step of the 32 x 32 tile: 16 pairs of its a panel (2 KiB at aq: rows 0-15, then 16-31)
// and of its b panel (2 KiB at bq: 16 rows of 32 columns' pair words) into the accumulators.
// once: the panel loaded by TILELOADDT1 (0 a, 1 b, -1 neither); a constant where it is inlined.
#define GEMM_AMX_LOAD_HINTED(hint, t, base, stride) \
    do {                                            \
        if (hint) {                                 \
            GEMM_AMX_LOAD_ONCE(t, base, stride);    \
        } else {                                    \
            GEMM_AMX_LOAD(t, base, stride);         \
        }                                           \
    } while (0)
GEMM_AMX_TARGET
static inline __attribute__((always_inline)) void gemm_amx_k_step(const char *aq, const char *bq, const int once) {
    GEMM_AMX_LOAD_HINTED(once == 0, 4, aq, 64);
    GEMM_AMX_LOAD_HINTED(once == 1, 6, bq, GEMM_AMX_NR * 4);
    GEMM_AMX_LOAD_HINTED(once == 1, 7, bq + 64, GEMM_AMX_NR * 4);
    GEMM_AMX_DP(0, 4, 6);
    GEMM_AMX_DP(1, 4, 7);
    GEMM_AMX_LOAD_HINTED(once == 0, 5, aq + 16 * 64, 64);
    GEMM_AMX_DP(2, 5, 6);
    GEMM_AMX_DP(3, 5, 7);
}

// The four accumulators to the 32 x 32 floats at c (ldc floats a row) by tile stores.
GEMM_AMX_TARGET
static inline __attribute__((always_inline)) void gemm_amx_store_c(float *c, ptrdiff_t ldc) {
    GEMM_AMX_STORE(0, c, ldc * 4);
    GEMM_AMX_STORE(1, c + 16, ldc * 4);
    GEMM_AMX_STORE(2, c + 16 * ldc, ldc * 4);
    GEMM_AMX_STORE(3, c + 16 * ldc + 16, ldc * 4);
}

// The 32 x 32 tile (its mr x nr corner written) over kw pairs (a multiple of 16). The four
// accumulator tiles start from cin where there is one (C itself after the first k block, or
// the caller's addend), loaded straight from it, and a whole tile without bias or GELU is
// stored straight to C: no pass of the shared epilogue over a scratch copy. Other tiles go through
// the scratch tile: a whole tile of the last k block of a product with bias or GELU then through
// gemm_tile_finish inlined for the whole tile (below), the edges of C through its call. The
// addend thus enters TDPBF16PS's accumulation, which flushes a subnormal accumulator to zero, as it does its other
// denormals. GEMM_AMX_C_IN_TILES=0 builds the older way: the sums from zero, then always the
// scratch tile and the epilogue (dev/cpu/gemm_ab times the two).
#ifndef GEMM_AMX_C_IN_TILES
#define GEMM_AMX_C_IN_TILES 1
#endif
// A tile's k loop (four TDPBF16PS per 16 pairs, 8 to 24 steps on GPT-2's products) is too short
// to hide a miss on its own C, whose tile loads come first and stores last: each call instead
// fetches the next tile's rows (C, cin, pre; gemm_tile_epilogue's next_*) into L2, a few rows per
// k step, spread as the vdpbf16ps kernel's fetches are. Measured on the lent Xeon (gemm_ab, 5
// rounds, same bits): 1.23x on the geometric mean of GPT-2 124M's 27 products, every one faster,
// the most where C is large: the LM head's weight gradient 1.96x, its forward 1.39x.
// GEMM_AMX_FETCH_C=0 builds without. Writing a large C's final tiles by non-temporal stores from
// the scratch tile instead (no read for ownership) was slower on top of it: 0.98x, 0.76x there.
#ifndef GEMM_AMX_FETCH_C
#define GEMM_AMX_FETCH_C 1
#endif
// A tile's a and b panels of 384 pairs (48 KiB each) do not fit L1 (48 KiB on the lent Xeon)
// together, so its tile loads come from L2. Every other tile of C (a checkerboard, gemm.h's
// k_reverse) runs its k steps last to first: it then begins on the end of the panel it shares
// with the tile before, which that tile has just loaded into L1. Measured on the lent Xeon
// (gemm_ab, 9 rounds, run 10 of 2026-11-30): 1.024 on the geometric mean of the 27 products,
// T=1024's 1.00-1.08; the products to the weights at T=64 (128 pairs, whose two panels fit L1
// anyway) 0.98-0.99, hence only above GEMM_AMX_K_REVERSE_PAIRS (the descriptor's k_reverse_words,
// gemm.h). The order of a tile's sums then depends on where it lies in C (not on the threads).
// GEMM_AMX_K_REVERSE=0 builds without.
#ifndef GEMM_AMX_K_REVERSE
#define GEMM_AMX_K_REVERSE 1
#endif
#define GEMM_AMX_K_REVERSE_PAIRS 128
static inline __attribute__((always_inline)) void gemm_amx_fetch_next(const gemm_tile_epilogue *ep, ptrdiff_t ldc, int r0,
                                                                       int r1) {
    for (int r = r0; r < r1; r++) {
        gemm_fetch_rows(1, GEMM_AMX_NR, ep->next_c + r * ldc, ldc, 0, 0);
        if (ep->next_cin != NULL) { gemm_fetch_rows(1, GEMM_AMX_NR, ep->next_cin + r * ep->ldcin, ep->ldcin, 0, 0); }
        if (ep->next_pre != NULL) { gemm_fetch_rows(1, GEMM_AMX_NR, ep->next_pre + r * ep->ldpre, ep->ldpre, 0, 0); }
    }
}
// A whole tile's epilogue by gemm_tile_finish inlined with its constant sizes (finished in
// registers, 1.06x over GPT-2's 27 products, fc's forward 1.44-1.57x, on the lent Xeon, run 34);
// GEMM_AMX_FINISH_WHOLE=0 builds the call with run-time sizes for every tile.
#ifndef GEMM_AMX_FINISH_WHOLE
#define GEMM_AMX_FINISH_WHOLE 1
#endif
// The tile's k loop over kw pairs, fetching the next tile's C as it goes; once as gemm_amx_k_step's.
GEMM_AMX_TARGET
static inline __attribute__((always_inline)) void gemm_amx_k_loop(int kw, const char *a, const char *b, ptrdiff_t ldc,
                                                                   const gemm_tile_epilogue *ep, const int once) {
    const int fetch = GEMM_AMX_FETCH_C && ep->next_c != NULL;
    const int fetch_rows = kw > 0 ? (GEMM_AMX_MR * GEMM_AMX_KP + kw - 1) / kw : 0;  // rows of the next tile per k step
    const int steps = kw / GEMM_AMX_KP, reverse = ep->k_reverse;
    for (int s = 0; s < steps; s++) {  // 16 pairs: 2 KiB of A, 2 KiB of B
        const int q = (reverse ? steps - 1 - s : s) * GEMM_AMX_KP;
        if (fetch) {
            const int r0 = s * fetch_rows, r1 = r0 + fetch_rows;
            gemm_amx_fetch_next(ep, ldc, r0 < GEMM_AMX_MR ? r0 : GEMM_AMX_MR, r1 < GEMM_AMX_MR ? r1 : GEMM_AMX_MR);
        }
        gemm_amx_k_step(a + (size_t)q * GEMM_AMX_MR * 4, b + (size_t)q * GEMM_AMX_NR * 4, once);
    }
}
GEMM_AMX_TARGET
static void gemm_tile_amx(int mr, int nr, int kw, const float *apanel, const float *bpanel, float *c, ptrdiff_t ldc,
                          const gemm_tile_epilogue *ep, gemm_prefetch *pf) {
    (void)pf;
    const char *a = (const char *)apanel, *b = (const char *)bpanel;
    const int whole = mr == GEMM_AMX_MR && nr == GEMM_AMX_NR;
    float tile[GEMM_AMX_MR * GEMM_AMX_NR] __attribute__((aligned(64)));
    const int cin_in_tiles = GEMM_AMX_C_IN_TILES && ep->cin != NULL;
    if (cin_in_tiles) {
        const float *cin = ep->cin;
        ptrdiff_t ld = ep->ldcin;
        if (!whole) {  // the corner of cin, in a zeroed scratch tile
            memset(tile, 0, sizeof(tile));
            for (int i = 0; i < mr; i++) { memcpy(tile + i * GEMM_AMX_NR, cin + i * ld, nr * sizeof(float)); }
            cin = tile, ld = GEMM_AMX_NR;
        }
        GEMM_AMX_LOAD(0, cin, ld * 4);
        GEMM_AMX_LOAD(1, cin + 16, ld * 4);
        GEMM_AMX_LOAD(2, cin + 16 * ld, ld * 4);
        GEMM_AMX_LOAD(3, cin + 16 * ld + 16, ld * 4);
    } else {
        GEMM_AMX_ZERO(0);
        GEMM_AMX_ZERO(1);
        GEMM_AMX_ZERO(2);
        GEMM_AMX_ZERO(3);
    }
    if (!GEMM_AMX_LOAD_HINT) {
        gemm_amx_k_loop(kw, a, b, ldc, ep, -1);
    } else if (ep->rows_outer) {
        gemm_amx_k_loop(kw, a, b, ldc, ep, 1);
    } else {
        gemm_amx_k_loop(kw, a, b, ldc, ep, 0);
    }
    // What is left for gemm_tile_finish, copied whole only now, long after the caller's stores to
    // *ep: at the start the copy would wait for the previous tile's stores to drain (gemm.h's
    // gemm_macro_kernel says why).
    gemm_tile_epilogue rest = *ep;
    if (cin_in_tiles) { rest.cin = NULL; }
    float *out = tile;
    ptrdiff_t ld_out = GEMM_AMX_NR;
    const int straight = GEMM_AMX_C_IN_TILES && whole && rest.cin == NULL && rest.bias == NULL && !rest.gelu;
    if (straight) { out = c, ld_out = ldc; }
    gemm_amx_store_c(out, ld_out);
    if (straight) { return; }
    if (GEMM_AMX_FINISH_WHOLE && whole) {
        gemm_tile_finish_inline(tile, GEMM_AMX_NR, GEMM_AMX_MR, GEMM_AMX_NR, c, ldc, &rest);
    } else {
        gemm_tile_finish(tile, GEMM_AMX_NR, mr, nr, c, ldc, &rest);
    }
}
#else
#define GEMM_HAVE_AMX_KERNEL 0
static int gemm_amx_available(void) { return 0; }
#endif
