/*
General matrix multiply, GotoBLAS/BLIS style, with fp32 sums of fp32 or bf16-rounded operands:

    C (M, N) = addend + A (M, K) . B (K, N) + bias, then optionally GELU.

A and B are read through a row stride and a column stride, so either may be transposed
(A(m, k) = a[m*rs_a + k*cs_a], B(k, n) = b[k*rs_b + n*cs_b]); C is row-major with leading
dimension ldc. The linear layers of GPT-2 in these terms (matmul.h wraps them):
    forward      out  (BT, OC)  = inp (BT, C)   . weight^T        a: rs C,  cs 1   b: rs 1, cs C
    to input     dinp (BT, C)  += dout (BT, OC) . weight (OC, C)  a: rs OC, cs 1   b: rs C, cs 1
    to weight    dw   (OC, C)  += dout^T        . inp (BT, C)     a: rs 1,  cs OC  b: rs C, cs 1
and the LM head with the tied embedding wte (Vp, C):
    logits (rows, Vp) = x (rows, C) . wte^T   is matmul_forward(logits, x, wte, NULL, NULL, rows, C, Vp);
    a block of vocabulary columns [v0, v1) of it, written into logits with ldc = Vp:
    gemm(rows, v1 - v0, C, x, C, 1, wte + v0*C, 1, C, logits + v0, Vp, NULL).

The micro-kernel. gemm.h's loops run any micro-kernel through its descriptor (gemm_kernel,
gemm_kernel.h): tile and block sizes, A and B packing, one tile function that applies the
epilogue, a per-thread set-up. The table gemm_kernels holds them: fp32 (gemm_kernel.h), bf16 on
vdpbf16ps (gemm_kernel_bf16.h), bf16 emulated on the fp32 kernel, bf16 on AMX tiles
(gemm_kernel_amx.h); each call takes the one of the run's precision and bf16 path (precision.h,
chosen once at start-up). The packing of A and B into each kernel's panels, and bf16's rounding
with it, is gemm_pack.h's.

How it runs. The loops around the micro-kernel, per thread:
    for jc over N in blocks of nc <= GEMM_NC          B block (kc x nc) in L3
      for pc over K in blocks of kc <= GEMM_KC        pack B block into NR-column panels
        for ic over M in blocks of mc <= GEMM_MC      pack A block (mc x kc, in L2) into MR-row panels
          for jr over nc in steps of NR               b panel (kc x NR) in L1
            for ir over mc in steps of MR             micro-kernel: MR x NR tile of C
(with jr and ir swapped where an a panel fits L1 and the block spans whole rows of C:
gemm_macro_kernel).
The first k block adds the addend (or nothing), later ones add the tile C already holds; the
last applies bias and GELU while the tile is still in registers. In bf16, the micro-kernel
calls of a block also fetch the source lines of the blocks packed next (gemm_prefetch), so
that packing a weight matrix read from memory does not leave the vdpbf16ps units waiting.

Threads. C is cut into a fixed grid of tm x tn rectangles on tile boundaries, one per OpenMP
thread, and each thread runs the loops above on its rectangle with its own packing buffers.
When M is split, each thread packs all of B; when N is split, the threads of a grid row need
the same rows of A: where all of them packed fit gemm_shared_a, they pack them once together
(all of K, a share of the panels each) and meet at one barrier, otherwise each packs all of
A itself; on AMD's CPUs, once done, each drops the caches' copies of the others' panels
(gemm_flush_a_part: where the team spans two L3s, the next packing would wait for them). The
grid minimizes the busiest thread's flops plus packing, which keeps the threads equally loaded
and duplicates the cheaper operand. A thread whose rectangle spans more than one
B block (nc columns) would pack its rows of A again for each: where they fit gemm_thread_a, it
packs them once, all of K, before its first block (GEMM_PACK_A_ONCE). The k order of every sum
is fixed by K alone, so the results are bit-identical for any thread count.

Memory. Each OpenMP thread number owns one packing buffer of an A block and a B block of the
largest kernel built (6.4 MiB: the vdpbf16ps kernel's 264 + 4096 panel rows of 384 pairs, in
every x86 build), allocated by the first gemm that runs with that many
threads (or by gemm_init), with two threads or more one shared buffer for A of 4 MiB, and,
from the first call that packs A once per thread (AMX at T=1024), one such buffer per thread,
all kept until the process exits: calls after the first allocate nothing.
The buffers are per translation unit (static) and per thread number, so gemm refuses to run
inside a parallel region (where two teams' thread 0 would share one): call it from serial code,
or from thread 0 of a region whose threads run their own regions on one thread each.
*/
#pragma once

#include <stddef.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "gemm_kernel.h"
#include "gemm_kernel_amx.h"
#include "gemm_kernel_bf16.h"
#include "gemm_pack.h"
#include "precision.h"
#include "utils.h"
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>  // gemm_flush_shared_a_enabled
#endif

// Cache blocking, in elements: GEMM_KC x GEMM_NR of B (the b panel) stays in L1 while a
// panels stream past it, GEMM_MC x GEMM_KC of A fits L2, GEMM_KC x GEMM_NC of B fits a thread's
// share of L3. GEMM_MC is a multiple of GEMM_MR and GEMM_NC of GEMM_NR. The AVX2 values were
// measured on Zen 3 (32 KiB L1, 512 KiB L2); the AVX-512 ones follow from Zen 4/5's caches
// (32-48 KiB L1, 1 MiB L2: a 24 KiB b panel, 256 rows of BT in one block), not measured.
// A build may set them (all three fp32 ones together) with -D: dev/cpu/gemm_ab times two builds.
#ifndef GEMM_KC
#if VEC_WIDTH == 16
#  define GEMM_KC 192
#  define GEMM_MC 264
#  define GEMM_NC 4096
#elif VEC_WIDTH == 8
#  define GEMM_KC 256
#  define GEMM_MC 144
#  define GEMM_NC 4096
#else
#  define GEMM_KC 256
#  define GEMM_MC 120
#  define GEMM_NC 4096
#endif
#endif

// bf16 blocking. K is counted in pairs: a b panel of GEMM_BF16_KCP pairs x 32 columns is
// 48 KiB, more than Zen 4's L1 (32 KiB), so it streams from L2 as the a panels do: 128 bytes a
// k step for 24 vdpbf16ps keep up with them. What the longer blocks save is per tile call
// (filling and draining the accumulators' chains, the epilogue, loading and storing C), about
// five k steps' time each. On Zen 4 (2026-11-30, dev/cpu/gemm_ab), 384 pairs against 192: GPT-2
// 124M's 27 products 1.1-1.3% faster on the geometric mean, T=1024's 1-8%, T=64's even, the LM
// head's input gradient 2-3% slower (its B block and the next A block's source crowd L2); the
// bf16 T=1024 step's products 1.2% faster, the T=64 step even (docs/speed.md).
// The emulated path packs the same GEMM_BF16_KCP pairs per k block (the k blocks are part of
// the order of the sums, which the two paths share) as 2 * GEMM_BF16_KCP floats, in A and B
// blocks of the bytes it was measured with at 192 pairs (GEMM_MC rows, GEMM_NC / 2 columns):
// at 384 pairs, half as many rows and a quarter of GEMM_NC's columns.
#ifndef GEMM_BF16_KCP
#define GEMM_BF16_KCP 384
#endif
#ifndef GEMM_BF16_MC
#define GEMM_BF16_MC 264
#endif
#ifndef GEMM_BF16_NC
#define GEMM_BF16_NC 4096
#endif
#define GEMM_AT_LEAST(unit, n) ((n) > (unit) ? (n) : (unit))  // (a build may set a far longer GEMM_BF16_KCP)
#define GEMM_EMU_MC GEMM_AT_LEAST(GEMM_MR, GEMM_MC * 192 / GEMM_BF16_KCP / GEMM_MR * GEMM_MR)
#define GEMM_EMU_NC GEMM_AT_LEAST(GEMM_NR, GEMM_NC * 96 / GEMM_BF16_KCP / GEMM_NR * GEMM_NR)

#define GEMM_MAX_THREADS 256

// Where a thread's time goes, for dev/cpu/gemm_phases.c: a build that defines GEMM_PHASE_TIMING
// before including this file counts each thread's time stamp counter ticks in packing B, packing
// A, the tiles, the shared-A barrier and the whole call (gemm_phase_ticks, added up over calls);
// in every other build GEMM_PHASE(phase, statement) is the statement alone.
#ifdef GEMM_PHASE_TIMING
#include <x86intrin.h>
enum { GEMM_PHASE_PACK_B, GEMM_PHASE_PACK_A, GEMM_PHASE_TILES, GEMM_PHASE_WAIT, GEMM_PHASE_CALL, GEMM_PHASES };
static double gemm_phase_ticks[GEMM_MAX_THREADS][GEMM_PHASES];
#define GEMM_PHASE(phase, statement)                                                  \
    do {                                                                              \
        const unsigned long long start_ = __rdtsc();                                  \
        statement;                                                                    \
        gemm_phase_ticks[omp_get_thread_num()][phase] += (double)(__rdtsc() - start_); \
    } while (0)
#else
#define GEMM_PHASE(phase, statement) statement
#endif

// Told of runs of C, n floats from `run`, as soon as they hold their final values, by the thread
// that wrote them, while they are still in its cache: gpt2.h sums a weight gradient's squares
// for the norm so. The calls of one gemm_ex cover C once, concurrently. With a hook the threads
// split M only, where M has a tile for each, so that a run is a block of whole rows (where
// ldc = N); otherwise a run is a row's part.
typedef struct {
    void (*fn)(void *ctx, float *run, size_t n);  // NULL: none
    void *ctx;
} gemm_final_hook;

typedef struct {
    const float *addend;  // (M, N) added to the product, or NULL; may be c itself (with
    ptrdiff_t ld_addend;  //   ld_addend = ldc) to accumulate: C += A.B
    const float *bias;    // (N) added to every row, or NULL
    int gelu;             // 0: C = value; 1: C = gelu(value) (tanh approximation, gelu.h)
    float *pre;           // with gelu: (M, N) gets the value before GELU, or NULL
    ptrdiff_t ld_pre;
    gemm_final_hook on_final;  // see above
} gemm_epilogue;

// Block size for `len` elements in blocks of at most `max`, as equal as possible, rounded up
// to a multiple of `unit` (max is a multiple of unit): 300 rows in blocks of at most 144 in
// steps of 6 are 102 + 102 + 96, not 144 + 144 + 12.
static int gemm_block_size(int len, int max, int unit) {
    int blocks = (len + max - 1) / max;
    int size = (len + blocks - 1) / blocks;
    return (size + unit - 1) / unit * unit;
}

// The source of the blocks packed next (up to two: the next A block, and the next B block),
// fetched into L2 a line per k step inside the micro-kernel calls of this block: packed
// one after the other, a weight matrix's block came from memory while the vdpbf16ps units
// waited (on GPT-2 124M at T=64, a fifth of a forward product's time went to packing B).
struct gemm_prefetch {
    const char *base[2];
    ptrdiff_t stride[2];  // bytes between runs
    int runs[2], lines[2];
    int region, run, line;  // the next line to fetch
    int per_call;         // lines fetched per micro-kernel call
};

// Adds region (len rows x kc k's of a block to pack, element (r, k) at src[r*s_r + k*s_k]):
// its contiguous runs (of r or of k) and their 64-byte lines; elem: bytes per element (4, or 2 for bf16).
static void gemm_prefetch_add(gemm_prefetch *pf, int len, int kc, const void *src, int elem, ptrdiff_t s_r, ptrdiff_t s_k) {
    int n = pf->runs[0] > 0 ? 1 : 0;
    if (pf->runs[n] > 0 || len <= 0 || kc <= 0) { return; }
    int runs, run_len;
    ptrdiff_t stride;
    if (s_k == 1) {
        runs = len, run_len = kc, stride = s_r;
    } else if (s_r == 1) {
        runs = kc, run_len = len, stride = s_k;
    } else {
        return;
    }
    pf->base[n] = (const char *)src;
    pf->stride[n] = stride * (ptrdiff_t)elem;
    pf->runs[n] = runs;
    pf->lines[n] = (int)(((size_t)run_len * elem + 63) / 64) + 1;  // + 1: runs need not start a line
}

// Spreads the fetches of the regions over `calls` micro-kernel calls.
static void gemm_prefetch_arm(gemm_prefetch *pf, long calls) {
    const long lines = (long)pf->runs[0] * pf->lines[0] + (long)pf->runs[1] * pf->lines[1];
    pf->per_call = calls > 0 ? (int)((lines + calls - 1) / calls) : 0;
}

// Eight 64-bit integers in one 64-byte vector (GCC's vector extension): gemm_prefetch_take's stores.
typedef long long gemm_v8i64 __attribute__((vector_size(64)));

// The next lines of this call's share (pf->per_call): up to `max` of them into line[] for the
// micro-kernel to fetch one per k step (a burst of 60 fetches before the call filled the miss
// buffers and stalled it: 5-8% of a T=64 forward product), any beyond max fetched here. Returns
// how many are in line[].
static inline int gemm_prefetch_take(gemm_prefetch *pf, const char **line_out, int max) {
    int region = pf->region, run = pf->run, line = pf->line, left = pf->per_call, n_out = 0;
    while (left > 0 && region < 2) {  // the position in registers, written back once
        if (run >= pf->runs[region]) {
            region++;
            run = line = 0;
            continue;
        }
        const char *src = pf->base[region] + run * pf->stride[region] + (ptrdiff_t)line * 64;
        const int n = gemm_min(pf->lines[region] - line, left);  // lines of this run, this call
        int l = 0;
        // eight at a time by one 64-byte store: right after the last tile's stores to C, one
        // store per pointer filled the store queue and stalled the call
        for (; l + 8 <= n && n_out + 8 <= max; l += 8, n_out += 8) {
            const gemm_v8i64 lines = (gemm_v8i64){0, 64, 128, 192, 256, 320, 384, 448} + (long long)(intptr_t)(src + (ptrdiff_t)l * 64);
            memcpy(line_out + n_out, &lines, sizeof(lines));
        }
        for (; l < n; l++) {
            if (n_out < max) {
                line_out[n_out++] = src + (ptrdiff_t)l * 64;
            } else {
                __builtin_prefetch(src + (ptrdiff_t)l * 64, 0, 2);
            }
        }
        left -= n;
        line += n;
        if (line == pf->lines[region]) {
            line = 0;
            run++;
        }
    }
    pf->region = region;
    pf->run = run;
    pf->line = line;
    return n_out;
}

// The fp32 micro-kernel's tile (also the emulated bf16 path's, over kw = 2 floats per pair):
// a full-width tile straight to C; fewer than NR columns through a full-width scratch copy,
// of which only mr x nr go back.
static void gemm_tile_fp32(int mr, int nr, int kw, const float *apanel, const float *bpanel, float *ctile,
                           ptrdiff_t ldc, const gemm_tile_epilogue *ep, gemm_prefetch *pf) {
    (void)pf;
    if (nr == GEMM_NR) {  // mr rows, straight to C
        gemm_micro_kernel(mr, kw, apanel, bpanel, ctile, ldc, ep);
        return;
    }
    gemm_tile_epilogue tep = *ep;
    float tile[GEMM_MR * GEMM_NR] __attribute__((aligned(64)));
    float tile_in[GEMM_MR * GEMM_NR] __attribute__((aligned(64)));
    float tile_pre[GEMM_MR * GEMM_NR] __attribute__((aligned(64)));
    float tile_bias[GEMM_NR] __attribute__((aligned(64)));
    if (tep.cin != NULL) {
        memset(tile_in, 0, sizeof(tile_in));
        for (int i = 0; i < mr; i++) { memcpy(tile_in + i * GEMM_NR, tep.cin + i * tep.ldcin, nr * sizeof(float)); }
        tep.cin = tile_in;
        tep.ldcin = GEMM_NR;
    }
    if (tep.bias != NULL) {
        memset(tile_bias, 0, sizeof(tile_bias));
        memcpy(tile_bias, tep.bias, nr * sizeof(float));
        tep.bias = tile_bias;
    }
    float *pre_out = tep.pre;
    ptrdiff_t ld_pre_out = tep.ldpre;
    if (pre_out != NULL) {
        tep.pre = tile_pre;
        tep.ldpre = GEMM_NR;
    }
    gemm_micro_kernel(mr, kw, apanel, bpanel, tile, GEMM_NR, &tep);
    for (int i = 0; i < mr; i++) {
        memcpy(ctile + i * ldc, tile + i * GEMM_NR, nr * sizeof(float));
        if (pre_out != NULL) { memcpy(pre_out + i * ld_pre_out, tile_pre + i * GEMM_NR, nr * sizeof(float)); }
    }
}

#if GEMM_HAVE_BF16_KERNEL
// The vdpbf16ps kernel's tile over kw pairs: it fetches the next blocks' source lines (pf) as
// it goes; a full tile without GELU is done in registers; with GELU the value goes to pre (or
// a scratch tile) and GELU from there to C; fewer than NR columns go through a scratch tile
// and the shared epilogue, of which only the mr x nr corner of cin and bias may be read.
static void gemm_tile_bf16_native(int mr, int nr, int kw, const float *apanel, const float *bpanel, float *ctile,
                                  ptrdiff_t ldc, const gemm_tile_epilogue *ep, gemm_prefetch *pf) {
    const uint32_t *ap = (const uint32_t *)apanel, *bp = (const uint32_t *)bpanel;
    const char *fetch[GEMM_BF16_FETCH_MAX];
    const int nfetch = gemm_prefetch_take(pf, fetch, gemm_min(kw, GEMM_BF16_FETCH_MAX));
    const gemm_bf16_fetch f = {fetch, nfetch};
    if (nr == GEMM_BF16_NR && !ep->gelu) {  // all in registers, mr rows
        gemm_micro_kernel_bf16(mr, kw, ap, bp, ctile, ldc, ep->cin, ep->ldcin, ep->bias, f);
        return;
    }
    float tile[GEMM_BF16_MR * GEMM_BF16_NR] __attribute__((aligned(64)));
    if (nr == GEMM_BF16_NR) {  // GELU: the value to pre (or a scratch tile), its GELU to C
        float *val = ep->pre != NULL ? ep->pre : tile;
        const ptrdiff_t ld_val = ep->pre != NULL ? ep->ldpre : GEMM_BF16_NR;
        gemm_fetch_rows(mr, GEMM_BF16_NR, ctile, ldc, 1, 0);  // C's lines into L2 meanwhile
        gemm_micro_kernel_bf16(mr, kw, ap, bp, val, ld_val, ep->cin, ep->ldcin, ep->bias, f);
        gemm_tile_gelu(mr, GEMM_BF16_NR, val, ld_val, ctile, ldc);
        return;
    }
    gemm_micro_kernel_bf16(mr, kw, ap, bp, tile, GEMM_BF16_NR, NULL, 0, NULL, f);
    gemm_tile_finish(tile, GEMM_BF16_NR, mr, nr, ctile, ldc, ep);
}
#endif

// The micro-kernels (gemm_kernel.h's descriptor). The two bf16 paths before AMX share their k
// blocks (GEMM_BF16_KCP pairs: the blocks are part of the order of the sums) and give the same
// bits; AMX's blocks are its own (its sums differ anyway: gemm_kernel_amx.h).
enum { GEMM_KERNEL_FP32, GEMM_KERNEL_BF16_EMULATED, GEMM_KERNEL_BF16_AVX512, GEMM_KERNEL_BF16_AMX, GEMM_KERNELS };
static const gemm_kernel gemm_kernels[GEMM_KERNELS] = {
    [GEMM_KERNEL_FP32] = {"fp32 FMA", GEMM_MR, GEMM_NR, GEMM_KC, GEMM_MC, GEMM_NC, 1, 1, 1, 0,
                          gemm_pack_a, gemm_pack_b, gemm_tile_fp32, NULL, NULL, NULL, 0, 0, 0},
    [GEMM_KERNEL_BF16_EMULATED] = {"emulated: fp32 FMA kernel on bf16-rounded panels", GEMM_MR, GEMM_NR, GEMM_BF16_KCP,
                                   GEMM_EMU_MC, GEMM_EMU_NC, 2, 2, 1, 0, gemm_pack_a_bf16_emulated, gemm_pack_b_bf16_emulated,
                                   gemm_tile_fp32, NULL, gemm_pack_b16_bf16_emulated, gemm_pack_a16_bf16_emulated, 0, 0, 0},
#if GEMM_HAVE_BF16_KERNEL
    [GEMM_KERNEL_BF16_AVX512] = {"AVX512_BF16 vdpbf16ps kernel", GEMM_BF16_MR, GEMM_BF16_NR, GEMM_BF16_KCP, GEMM_BF16_MC,
                                 GEMM_BF16_NC, 2, 1, 1, 1, gemm_pack_a_bf16_native, gemm_pack_b_bf16_native,
                                 gemm_tile_bf16_native, NULL, gemm_pack_b16_bf16_native, gemm_pack_a16_bf16_native, 0, 1, 0},
#endif
#if GEMM_HAVE_AMX_KERNEL
    [GEMM_KERNEL_BF16_AMX] = {"AMX tdpbf16ps kernel", GEMM_AMX_MR, GEMM_AMX_NR, GEMM_AMX_KCP, GEMM_AMX_MC, GEMM_AMX_NC, 2,
                              1, GEMM_AMX_KP, 0, gemm_pack_a_amx, gemm_pack_b_amx, gemm_tile_amx, gemm_amx_thread_init,
                              gemm_pack_b16_amx, gemm_pack_a16_amx, GEMM_AMX_ROWS_OUTER_BYTES, 1,
                              GEMM_AMX_K_REVERSE ? GEMM_AMX_K_REVERSE_PAIRS : 0},
#endif
};

// The kernel of the run's precision and bf16 path (precision.h).
static const gemm_kernel *gemm_kernel_current(void) {
    if (!precision_is_bf16()) { return &gemm_kernels[GEMM_KERNEL_FP32]; }
    switch (precision_bf16_path()) {
#if GEMM_HAVE_AMX_KERNEL
    case BF16_PATH_AMX: return &gemm_kernels[GEMM_KERNEL_BF16_AMX];
#endif
#if GEMM_HAVE_BF16_KERNEL
    case BF16_PATH_AVX512BF16: return &gemm_kernels[GEMM_KERNEL_BF16_AVX512];
#endif
    default: return &gemm_kernels[GEMM_KERNEL_BF16_EMULATED];
    }
}

// Which kernel the next gemm runs, in words, and why.
static const char *gemm_path_name(void) {
    if (!precision_is_bf16()) { return "fp32 (fp32 FMA kernel)"; }
    static char name[256];
    const Bf16Path path = precision_bf16_path(), best = bf16_path_best();
    char measured[80] = "";
    if (path != BF16_PATH_AMX && bf16_dot_over_fma() > 0.0) {
        snprintf(measured, sizeof(measured), "; vdpbf16ps measured at %.2fx the fp32 FMA's multiply-adds", bf16_dot_over_fma());
    }
    const char *why = precision_bf16_forced ? "forced by LLMC_BF16_PATH or LLMC_BF16_EMULATE"
                    : path != best          ? "chosen by the program"
                    : path == BF16_PATH_EMULATED && !bf16_path_available(BF16_PATH_AVX512BF16) ? "this CPU has no AVX512_BF16"
                                                 : "the fastest this CPU has";
    snprintf(name, sizeof(name), "bf16 (%s; path %s: %s%s)", gemm_kernel_current()->name, bf16_path_name(path), why, measured);
    return name;
}

// The bf16 dispatch as it was before the paths had names (tests and harnesses): whether the
// native (vdpbf16ps or AMX) path runs; force the emulated one (on) or the fastest (off).
static int gemm_bf16_uses_native(void) { return precision_bf16_path() != BF16_PATH_EMULATED; }
static void gemm_bf16_force_emulated(int on) { (void)precision_force_bf16_path(on ? BF16_PATH_EMULATED : bf16_path_best()); }
static int gemm_bf16_emulate_requested(void) {
    Bf16Path p;
    return bf16_path_requested(&p) && p == BF16_PATH_EMULATED;
}

// Words (4 bytes) per row of a packed panel for ku packed units.
static inline int gemm_panel_words(const gemm_kernel *g, int ku) {
    return (ku + g->kpad - 1) / g->kpad * g->kpad * g->unit_words;
}

// Packing buffer of one thread, in words: the largest of the kernels' A block + B block.
static size_t gemm_buffer_words(void) {
    size_t best = 0;
    for (int i = 0; i < GEMM_KERNELS; i++) {
        const gemm_kernel *g = &gemm_kernels[i];
        if (g->tile == NULL) { continue; }  // not built here
        const size_t w = (size_t)gemm_panel_words(g, g->kc) * ((size_t)g->mc + g->nc);
        if (w > best) { best = w; }
    }
    return best;
}

static float *gemm_thread_buffer[GEMM_MAX_THREADS];

// When N is split among threads, every thread of a row of the grid would pack the same rows of
// A; instead they pack it once, all of K, into this buffer together (a share of its panels
// each), wait for each other once, and read it from there. Only where all of A packed fits
// (GPT-2 at T=64: up to 256 x 3072, 1.5 MiB; the LM head's 256-row chunks, which also saved
// re-packing A for each of the 7 column blocks of a thread).
#ifndef GEMM_SHARED_A_WORDS
#define GEMM_SHARED_A_WORDS (1 << 20)
#endif
static float *gemm_shared_a;
// 1 if the threads that shared A drop their copies of each other's panels after a product
// (gemm_flush_a_part): on AMD's CPUs with CLFLUSHOPT, whose L3 is per CCD, so that a team may
// span two; Intel's L3 is one per socket. LLMC_FLUSH_SHARED_A=0|1 forces it (1 needs CLFLUSHOPT).
// Serial code: the first call reads the environment.
static int gemm_flush_shared_a_enabled(void) {
    static int enabled = -1;
    if (enabled < 0) {
        int has = 0;
#if defined(__x86_64__) && defined(__GNUC__)
        unsigned eax, ebx, ecx, edx;  // CLFLUSHOPT: CPUID leaf 7, EBX bit 23 (clang's cpu_supports lacks it)
        has = __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && ((ebx >> 23) & 1);
#endif
        enabled = env_flag("LLMC_FLUSH_SHARED_A", cpu_vendor() == CPU_AMD && has, "the threads keep their copies of each other's packed A", NULL);
        if (enabled && !has) { die("LLMC_FLUSH_SHARED_A=1: this CPU has no CLFLUSHOPT"); }
    }
    return enabled;
}
#if defined(__x86_64__) && defined(__GNUC__)
// Drops the cache lines of [p, p + words) from every cache (gemm_flush_a_part).
__attribute__((target("clflushopt"))) static void gemm_flush_lines(const float *p, size_t words) {
    const uintptr_t end = (uintptr_t)(p + words);
    for (uintptr_t line = (uintptr_t)p & ~(uintptr_t)63; line < end; line += 64) { __builtin_ia32_clflushopt((void *)line); }
}
#endif
// A thread's own rows of A packed once for all its B blocks (see the top of this file): the
// same size. On AMX (1024-column blocks) T=1024's products with N = 2304 and 3072 (qkv and fc
// forward, fc proj's input and weight gradients) packed their A three times: packed once, their
// pack-A time fell by half or more and the four ran 1.02x faster on the lent Xeon (gemm_ab, median
// of 7 rounds; the later blocks' A panels now come from L3 instead of a fresh packing in L2).
#ifndef GEMM_PACK_A_ONCE
#define GEMM_PACK_A_ONCE 1
#endif
static float *gemm_thread_a[GEMM_MAX_THREADS];
// With A packed once, a B block may be small at no cost in packing A again: 256 columns keep
// the source of the next block (fetched into L2 while this one runs: 393 KB in bf16 at
// GEMM_BF16_KCP) in L2 beside this block and A's block. Measured on Zen 4 (1 MiB L2): the LM
// head's forward 15% faster in bf16, 4% in fp32, than with blocks of GEMM_NC (its source
// came from L3, where L2 had evicted it; 128 to 256 columns measured alike).
#ifndef GEMM_SHARED_NC
#define GEMM_SHARED_NC 256
#endif

// Makes sure threads 0..nth-1 have their packing buffers: allocated here, in serial code, the
// first time a thread count is seen (each buffer's pages are first touched by its thread).
// a_once: the call packs A once per thread (gemm_thread_a).
static void gemm_buffers(int nth, int a_once) {
    if (nth > GEMM_MAX_THREADS) { die("gemm: %d threads, at most %d supported", nth, GEMM_MAX_THREADS); }
    for (int t = 0; t < nth; t++) {
        if (gemm_thread_buffer[t] == NULL) {
            gemm_thread_buffer[t] = aligned_alloc_or_die(sizeof(float) * gemm_buffer_words(), "gemm packing buffer");
        }
        if (a_once && gemm_thread_a[t] == NULL) {
            gemm_thread_a[t] = aligned_alloc_or_die(sizeof(float) * GEMM_SHARED_A_WORDS, "gemm packed A buffer");
        }
    }
    if (nth > 1 && gemm_shared_a == NULL) {
        gemm_shared_a = aligned_alloc_or_die(sizeof(float) * GEMM_SHARED_A_WORDS, "gemm shared A buffer");
    }
}

static int gemm_max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

// Allocates the packing buffers of all OpenMP threads now rather than in the first gemm call.
static void gemm_init(void) { gemm_buffers(gemm_max_threads(), 0); }

// The epilogue of the tile at (row, col) of C, written into *tep: its cin (C itself after the
// first k block, else the caller's addend) and, in the last k block, the caller's bias, GELU and
// pre; the next_* fields and k_reverse left for the caller.
static void gemm_tile_ep(gemm_tile_epilogue *tep, const gemm_epilogue *ep, float *c, ptrdiff_t ldc, size_t row,
                         size_t col, int first, int last) {
    *tep = (gemm_tile_epilogue){0};
    if (!first) {
        tep->cin = c + row * ldc + col;
        tep->ldcin = ldc;
    } else if (ep != NULL && ep->addend != NULL) {
        tep->cin = ep->addend + row * ep->ld_addend + col;
        tep->ldcin = ep->ld_addend;
    }
    if (last && ep != NULL) {
        tep->bias = ep->bias != NULL ? ep->bias + col : NULL;
        tep->gelu = ep->gelu;
        if (ep->gelu && ep->pre != NULL) {
            tep->pre = ep->pre + row * ep->ld_pre + col;
            tep->ldpre = ep->ld_pre;
        }
    }
}

// The two innermost loops: C block (mc x nc) at (ic, jc) of C from the packed A and B blocks.
// first/last: this is the first/last k block. ep is the caller's epilogue (or NULL).
// ku is in packed units of kernel g (gemm_panel_words gives the words per panel row).
// Each tile's epilogue names the next tile's C, cin and pre (gemm_tile_epilogue's next_*).
// The order of the tiles: a b panel's column of tiles after another (the b panel stays in L1
// while the a panels pass); where the a panels fit in L1 (g->rows_outer_bytes) and the block
// spans whole rows of C, a row of tiles after another instead: the a panel stays in L1 and C
// is written as one contiguous run per row of tiles.
static void gemm_macro_kernel(const gemm_kernel *g, int mc, int nc, int ku, const float *abuf,
                              const float *bbuf, float *c, ptrdiff_t ldc, int ic, int jc, int first,
                              int last, const gemm_epilogue *ep, gemm_prefetch *pf) {
    const int kw = gemm_panel_words(g, ku);
    const int rows_outer = nc == ldc && (size_t)g->mr * kw * 4 <= (size_t)g->rows_outer_bytes;
    const int checkerboard = g->k_reverse_words > 0 && kw > g->k_reverse_words;
    // This tile's epilogue and the next one's, in turn, each written in place: a whole copy (a
    // 64-byte load over the field stores just made) cannot take its bytes from the store buffer
    // and waits for it to drain, the last tile's stores to C included. On Zen 4 that wait held
    // 2.4% of the bf16 T=64 step's samples; written in place, the step is 1.3-2.0% faster.
    gemm_tile_epilogue teps[2];
    int cur = 0;
    gemm_tile_ep(&teps[cur], ep, c, ldc, (size_t)ic, (size_t)jc, first, last);
    int ir = 0, jr = 0;  // this tile's
    while (jr < nc && ir < mc) {
        int next_ir = ir, next_jr = jr;  // the next tile's, in the block's order; past the block after the last
        if (rows_outer) {
            next_jr += g->nr;
            if (next_jr >= nc) { next_jr = 0, next_ir += g->mr; }
        } else {
            next_ir += g->mr;
            if (next_ir >= mc) { next_ir = 0, next_jr += g->nr; }
        }
        const int mr = gemm_min(g->mr, mc - ir), nr = gemm_min(g->nr, nc - jr);
        const float *apanel = abuf + (size_t)ir * kw, *bpanel = bbuf + (size_t)jr * kw;
        float *ctile = c + (size_t)(ic + ir) * ldc + (size_t)(jc + jr);
        gemm_tile_epilogue *tep = &teps[cur], *next = &teps[cur ^ 1];
        if (next_ir < mc && next_jr < nc) {
            gemm_tile_ep(next, ep, c, ldc, (size_t)(ic + next_ir), (size_t)(jc + next_jr), first, last);
            tep->next_c = c + (size_t)(ic + next_ir) * ldc + (size_t)(jc + next_jr);
            tep->next_cin = next->cin != tep->next_c ? next->cin : NULL;
            tep->next_pre = gemm_pre_streams(next->pre, next->ldpre) ? NULL : next->pre;
        }
        tep->rows_outer = rows_outer;
        if (checkerboard) { tep->k_reverse = (int)(((size_t)(ic + ir) / g->mr + (size_t)(jc + jr) / g->nr) & 1); }
        g->tile(mr, nr, kw, apanel, bpanel, ctile, ldc, tep, pf);
        ir = next_ir, jr = next_jr, cur ^= 1;
    }
}

// K in packed units (pairs in bf16, whose last may be half padding), and the size of its k
// blocks: as equal as possible, so that the blocks depend on K alone.
static int gemm_k_units(const gemm_kernel *g, int K) { return (K + g->kstep - 1) / g->kstep; }
static int gemm_k_block(const gemm_kernel *g, int K) {
    const int Ku = gemm_k_units(g, K);
    return Ku > 0 ? gemm_block_size(Ku, g->kc, g->kpad) : 0;
}

// B packed whole (gemm_pack_b_whole): its k blocks one after the other, each N columns (rounded
// up to NR) of panels as one block packs them; the block of units [pu, pu + ku) from column jc
// (a multiple of NR) starts this many words in, and the whole takes gemm_packed_b_words.
static size_t gemm_packed_b_offset(const gemm_kernel *g, int N, int pu, int ku, int jc) {
    const size_t cols = (size_t)(N + g->nr - 1) / g->nr * g->nr;
    return cols * gemm_panel_words(g, pu) + (size_t)jc * gemm_panel_words(g, ku);
}
static size_t gemm_packed_b_words_for(const gemm_kernel *g, int K, int N) {
    return gemm_packed_b_offset(g, N, gemm_k_units(g, K), 0, 0);
}
static size_t gemm_packed_b_words(int K, int N) { return gemm_packed_b_words_for(gemm_kernel_current(), K, N); }

// Thread `part` of `parts` packs its share of the MR-row panels of rows [m0, m1) of A: rows
// [*r0, *r1) of them, counted from m0. Returns m1 - m0 rounded up to MR.
static int gemm_a_part(const gemm_kernel *g, int part, int parts, int m0, int m1, int *r0, int *r1) {
    const int panels = (m1 - m0 + g->mr - 1) / g->mr;
    *r0 = panels * part / parts * g->mr;
    *r1 = gemm_min(m1 - m0, panels * (part + 1) / parts * g->mr);
    return panels * g->mr;
}

// Rows [m0, m1) of A, all of K, packed as the k blocks of gemm_rectangle one after the other:
// the block of units [pu, pu + ku) holds its MR-row panels from dst + rows * gemm_panel_words(pu),
// rows = m1 - m0 rounded up to MR. Thread `part` of `parts` packs its share of the panels.
static void gemm_pack_a_all(const gemm_kernel *g, int part, int parts, int m0, int m1, int K, const float *a,
                            const uint16_t *a16, ptrdiff_t rs_a, ptrdiff_t cs_a, float *dst) {
    const int kstep = g->kstep, Ku = gemm_k_units(g, K), ku_max = gemm_k_block(g, K);
    int r0, r1;
    const int rows = gemm_a_part(g, part, parts, m0, m1, &r0, &r1);
    for (int pu = 0; pu < Ku && r0 < r1; pu += ku_max) {
        const int ku = gemm_min(ku_max, Ku - pu), pc = pu * kstep, kc = gemm_min(ku * kstep, K - pc);
        float *block = dst + (size_t)rows * gemm_panel_words(g, pu);
        float *panels = block + (size_t)r0 * gemm_panel_words(g, ku);
        const ptrdiff_t at = (m0 + r0) * rs_a + pc * cs_a;
        if (a16 != NULL) {
            g->pack_a16(r1 - r0, kc, a16 + at, rs_a, cs_a, panels);
        } else {
            g->pack_a(r1 - r0, kc, a + at, rs_a, cs_a, panels);
        }
    }
}

// Drops every cache's copy of part `part`'s share of gemm_pack_a_all's panels (dst as there),
// writing back what is dirty. Where the team spans two L3s (AMD's CCDs), a thread that read the
// other's panels holds copies of them, and the other's next packing into the same buffer would
// wait, line by line, for those copies to be invalidated from the far L3. Measured on a Zen 4 VM
// whose two vCPUs the host puts on one CCD or two (docs/speed.md, 2026-11-29, tenth session): on
// two L3s, packing A in the shared-A products took 2.6-4.5x as long as on one, and the products
// of the T=64 bf16 step 8-10 ms less with the flush (482 against 491 ms); on one L3 within 1 ms.
// No barrier first: where the owner is still reading its panels, it reads them from memory.
static void gemm_flush_a_part(const gemm_kernel *g, int part, int parts, int m0, int m1, int K, float *dst) {
#if defined(__x86_64__) && defined(__GNUC__)
    const int Ku = gemm_k_units(g, K), ku_max = gemm_k_block(g, K);
    int r0, r1;
    const int rows = gemm_a_part(g, part, parts, m0, m1, &r0, &r1);
    for (int pu = 0; pu < Ku && r0 < r1; pu += ku_max) {
        const int ku = gemm_min(ku_max, Ku - pu);
        const float *block = dst + (size_t)rows * gemm_panel_words(g, pu);
        gemm_flush_lines(block + (size_t)r0 * gemm_panel_words(g, ku), (size_t)(r1 - r0) * gemm_panel_words(g, ku));
    }
#else
    (void)g, (void)part, (void)parts, (void)m0, (void)m1, (void)K, (void)dst;
#endif
}

// With more than one k block and more than one column block, the k blocks outermost: each k
// block of A is read for all the thread's columns before the next. With the columns outermost,
// A's whole K (1.5 MB at T=64's K = 3072, more than the thread's L2 beside B and C) came again
// from L3 for every column block.
#ifndef GEMM_K_OUTER
#define GEMM_K_OUTER 1
#endif
#ifndef GEMM_K_OUTER_C_BYTES
#define GEMM_K_OUTER_C_BYTES (512 * 1024)
#endif

// One thread's share: rows [m0, m1) and columns [n0, n1) of C, all of K, packing into its
// own buffer; A comes packed already (gemm_pack_a_all) where apacked is not NULL.
// b16: B from its bf16 copy (g->pack_b16) instead of b, or NULL; a16 likewise for A (g->pack_a16).
// nc: columns per B block at most.
static void gemm_rectangle(const gemm_kernel *g, int m0, int m1, int n0, int n1, int K, const float *a,
                           const uint16_t *a16, ptrdiff_t rs_a, ptrdiff_t cs_a, const float *b, const uint16_t *b16, ptrdiff_t rs_b, ptrdiff_t cs_b,
                           const float *bpacked, int N, float *c, ptrdiff_t ldc, const gemm_epilogue *ep, float *buf,
                           const float *apacked, int nc_block) {
    const int kstep = g->kstep, Ku = gemm_k_units(g, K), ku_max = gemm_k_block(g, K);
    const int arows = (m1 - m0 + g->mr - 1) / g->mr * g->mr;  // rows of each block of apacked
    float *bbuf = buf + (size_t)g->mc * gemm_panel_words(g, g->kc);
    const int nc_max = gemm_block_size(n1 - n0, nc_block, g->nr);
    const int mc_max = gemm_block_size(m1 - m0, g->mc, g->mr);
    const int fetch = g->fetch_next;  // the next blocks' sources (see below)
    const int k_outer = GEMM_K_OUTER && Ku > ku_max && n1 - n0 > nc_max &&
                        (size_t)(m1 - m0) * (size_t)(n1 - n0) * sizeof(float) <= GEMM_K_OUTER_C_BYTES;
    int jc = n0, pu = 0;
    for (;;) {  // at least one block: with K = 0 the epilogue still writes C
        const int nc = gemm_min(nc_max, n1 - jc);
        const int ku = gemm_min(ku_max, Ku - pu);
        const int pc = pu * kstep, kc = gemm_min(ku * kstep, K - pc);  // the block's k's of A and B
        const float *bblock = bbuf;
        if (bpacked != NULL) {
            bblock = bpacked + gemm_packed_b_offset(g, N, pu, ku, jc);
        } else if (b16 != NULL) {
            GEMM_PHASE(GEMM_PHASE_PACK_B, g->pack_b16(kc, nc, b16 + pc * rs_b + jc * cs_b, rs_b, cs_b, bbuf));
        } else {
            GEMM_PHASE(GEMM_PHASE_PACK_B, g->pack_b(kc, nc, b + pc * rs_b + jc * cs_b, rs_b, cs_b, bbuf));
        }
        // the block after this one: its source
        int next_jc = jc, next_pu = pu;
        if (k_outer) {  // the next column block, or the first of the next k block
            next_jc += nc;
            if (next_jc >= n1) { next_jc = n0, next_pu += ku; }
        } else {  // the next k block, or the first of the next column block
            next_pu += ku;
            if (next_pu >= Ku) { next_jc += nc, next_pu = 0; }
        }
        const int has_next = k_outer ? next_pu < Ku : next_jc < n1;
        const int next_pc = next_pu * kstep, next_kc = gemm_min(gemm_min(ku_max, Ku - next_pu) * kstep, K - next_pc);
        const int next_nc = gemm_min(nc_max, n1 - next_jc);
        for (int ic = m0; ic < m1; ic += mc_max) {
            const int mc = gemm_min(mc_max, m1 - ic);
            const float *abuf = buf;
            if (apacked != NULL) {
                abuf = apacked + (size_t)arows * gemm_panel_words(g, pu) + (size_t)(ic - m0) * gemm_panel_words(g, ku);
            } else {
                if (a16 != NULL) {
                    GEMM_PHASE(GEMM_PHASE_PACK_A, g->pack_a16(mc, kc, a16 + ic * rs_a + pc * cs_a, rs_a, cs_a, buf));
                } else {
                    GEMM_PHASE(GEMM_PHASE_PACK_A, g->pack_a(mc, kc, a + ic * rs_a + pc * cs_a, rs_a, cs_a, buf));
                }
            }
            // while this block runs: fetch the next A block's source, and after the last A
            // block of this k block, the next B block's, or its panels where B is packed already
            // (bf16 only: the fp32 kernel, at half the rate, measured no faster with it, and its
            // packing fetches ahead itself)
            gemm_prefetch pf = {0};
            if (fetch && ic + mc < m1) {
                if (apacked == NULL) {
                    const ptrdiff_t at = (ic + mc) * rs_a + pc * cs_a;
                    gemm_prefetch_add(&pf, gemm_min(mc_max, m1 - ic - mc), kc, a16 != NULL ? (const void *)(a16 + at) : (const void *)(a + at),
                                      a16 != NULL ? 2 : 4, rs_a, cs_a);
                }
            } else if (fetch && has_next) {
                if (apacked == NULL) {
                    const ptrdiff_t at = m0 * rs_a + next_pc * cs_a;
                    gemm_prefetch_add(&pf, gemm_min(mc_max, m1 - m0), next_kc, a16 != NULL ? (const void *)(a16 + at) : (const void *)(a + at),
                                      a16 != NULL ? 2 : 4, rs_a, cs_a);
                }
                if (bpacked != NULL) {  // the next block's panels themselves, one run
                    const int next_ku = gemm_min(ku_max, Ku - next_pu);
                    const size_t words = (size_t)((next_nc + g->nr - 1) / g->nr * g->nr) * gemm_panel_words(g, next_ku);
                    gemm_prefetch_add(&pf, 1, (int)words, bpacked + gemm_packed_b_offset(g, N, next_pu, next_ku, next_jc), 4,
                                      (ptrdiff_t)words, 1);
                } else if (b16 != NULL) {
                    gemm_prefetch_add(&pf, next_nc, next_kc, b16 + next_pc * rs_b + next_jc * cs_b, 2, cs_b, rs_b);
                } else {
                    gemm_prefetch_add(&pf, next_nc, next_kc, b + next_pc * rs_b + next_jc * cs_b, 4, cs_b, rs_b);
                }
            }
            gemm_prefetch_arm(&pf, (long)((nc + g->nr - 1) / g->nr) * ((mc + g->mr - 1) / g->mr));
            GEMM_PHASE(GEMM_PHASE_TILES,
                       gemm_macro_kernel(g, mc, nc, ku, abuf, bblock, c, ldc, ic, jc, pu == 0, pu + ku >= Ku, ep, &pf));
            if (ep != NULL && ep->on_final.fn != NULL && pu + ku >= Ku && jc + nc >= n1) {
                if (n0 == 0 && n1 == ldc) {  // whole rows: one run
                    ep->on_final.fn(ep->on_final.ctx, c + (size_t)ic * ldc, (size_t)mc * ldc);
                } else {
                    for (int i = ic; i < ic + mc; i++) {
                        ep->on_final.fn(ep->on_final.ctx, c + (size_t)i * ldc + n0, (size_t)(n1 - n0));
                    }
                }
            }
        }
        if (!has_next) { break; }
        jc = next_jc, pu = next_pu;
    }
}

// Packing an element takes about as long as this many flops of the micro-kernel (Zen 3:
// 0.15-0.5 ns per element, against 95 GFLOP/s on a core).
#define GEMM_PACK_FLOPS 48

// Splits C among nth threads as a tm x tn grid of rectangles on tile boundaries: the grid that
// minimizes the busiest thread's time, its tiles' flops plus its packing. A thread packs the
// rows of A and the columns of B of its rectangle, so splitting N makes every thread pack all
// of A, splitting M all of B: per unit of K the busiest thread does 2 rows cols flops and packs
// rows + cols elements.
// whole_rows: only M is split where it can be (an on_final hook is told of whole rows then).
static void gemm_thread_grid(const gemm_kernel *g, int M, int N, int nth, int whole_rows, int *tm, int *tn) {
    const int mtiles = (M + g->mr - 1) / g->mr, ntiles = (N + g->nr - 1) / g->nr;
    double best = -1.0;
    *tm = 1;  // fewer tiles than threads along every split: one thread
    *tn = 1;
    for (int t = 1; t <= nth; t++) {
        if (nth % t != 0 || t > ntiles || nth / t > mtiles) { continue; }
        if (whole_rows && t > 1 && best >= 0.0) { break; }
        const double rows = (double)((mtiles + nth / t - 1) / (nth / t)) * g->mr;
        const double cols = (double)((ntiles + t - 1) / t) * g->nr;
        const double cost = 2.0 * rows * cols + GEMM_PACK_FLOPS * (rows + cols);
        if (best < 0.0 || cost < best) {
            best = cost;
            *tn = t;
            *tm = nth / t;
        }
    }
}

// 1 if the threads of a row of the tm x tn grid pack their rows of A together (see
// gemm_shared_a): N split, and all of A packed fits the buffer.
static int gemm_share_a(const gemm_kernel *g, int tn, int M, int K) {
    const size_t rows = (size_t)(M + g->mr - 1) / g->mr * g->mr;
    return tn > 1 && rows * gemm_panel_words(g, gemm_k_units(g, K)) <= GEMM_SHARED_A_WORDS;
}

// 1 if a thread with rows [m0, m1) and columns [n0, n1) of C packs its rows of A once into
// gemm_thread_a (see there): more than one B block, and all of K fits.
static int gemm_a_once(const gemm_kernel *g, int m0, int m1, int n0, int n1, int K) {
    const size_t rows = (size_t)(m1 - m0 + g->mr - 1) / g->mr * g->mr;
    return GEMM_PACK_A_ONCE && n1 - n0 > g->nc && rows * gemm_panel_words(g, gemm_k_units(g, K)) <= GEMM_SHARED_A_WORDS;
}

// The team's barrier, as a call (GEMM_PHASE times it).
static void gemm_barrier(void) {
    #pragma omp barrier
}

// Thread tid of a tm x tn grid over C (M, N): its rectangle. With share_a, it first packs its
// part of its grid row's rows of A into gemm_shared_a (at row m0: the rows of a grid row are
// whole panels, so each grid row's blocks lie apart), and waits there for the whole team; with
// flush_a too, once done it drops the caches' copies of the other parts (gemm_flush_a_part).
static void gemm_thread(const gemm_kernel *g, int tid, int tm, int tn, int share_a, int flush_a, int M, int N, int K, const float *a,
                        const uint16_t *a16, ptrdiff_t rs_a, ptrdiff_t cs_a, const float *b, const uint16_t *b16, ptrdiff_t rs_b, ptrdiff_t cs_b,
                        const float *bpacked, float *c,
                        ptrdiff_t ldc, const gemm_epilogue *ep) {
    const int mtiles = (M + g->mr - 1) / g->mr, ntiles = (N + g->nr - 1) / g->nr;
    const int ti = tid / tn, tj = tid % tn;
    const int m0 = gemm_min(M, (int)((long)mtiles * ti / tm) * g->mr);
    const int m1 = gemm_min(M, (int)((long)mtiles * (ti + 1) / tm) * g->mr);
    const int n0 = gemm_min(N, (int)((long)ntiles * tj / tn) * g->nr);
    const int n1 = gemm_min(N, (int)((long)ntiles * (tj + 1) / tn) * g->nr);
    if (g->thread_init != NULL) { g->thread_init(); }
    const float *apacked = NULL;
    int nc = g->nc;
    float *group = share_a ? gemm_shared_a + (size_t)m0 * gemm_panel_words(g, gemm_k_units(g, K)) : NULL;
    if (share_a) {
        GEMM_PHASE(GEMM_PHASE_PACK_A, gemm_pack_a_all(g, tj, tn, m0, m1, K, a, a16, rs_a, cs_a, group));
        GEMM_PHASE(GEMM_PHASE_WAIT, gemm_barrier());
        apacked = group;
        nc = GEMM_SHARED_NC;
    } else if (gemm_thread_a[tid] != NULL && gemm_a_once(g, m0, m1, n0, n1, K)) {
        GEMM_PHASE(GEMM_PHASE_PACK_A, gemm_pack_a_all(g, 0, 1, m0, m1, K, a, a16, rs_a, cs_a, gemm_thread_a[tid]));
        apacked = gemm_thread_a[tid];
    }
    gemm_rectangle(g, m0, m1, n0, n1, K, a, a16, rs_a, cs_a, b, b16, rs_b, cs_b, bpacked, N, c, ldc, ep, gemm_thread_buffer[tid],
                   apacked, nc);
    if (ep != NULL && ep->pre != NULL) { vec_stream_fence(); }  // pre's streamed lines (gemm_pre_streams)
    if (share_a && flush_a) {
        for (int part = 0; part < tn; part++) {
            if (part != tj) { gemm_flush_a_part(g, part, tn, m0, m1, K, group); }
        }
    }
}

// C (M, N) = epilogue(A (M, K) . B (K, N)), see the top of this file; ep may be NULL (C = A.B).
// b16: NULL, or B's bf16 copy (uint16 bits at the same offsets as b's floats, each what the bf16
// packing would round that float to: gemm_bf16_bits, NaN included; where the kernel flushes denormal
// operands, gemm_flushes_bf16_denormals, a denormal's may be a zero instead), which the bf16 kernels that
// have pack_b16 pack from instead of b (half the bytes read, no rounding; the same bits). b must
// be given too (fp32, and kernels without pack_b16, read it), unless the run is bf16 and
// gemm_b16_usable() says the copy will be used. a16: NULL, or A as bf16 bits alone (a unused;
// gemm_ex_a16).
static void gemm_run(int M, int N, int K, const float *a, const uint16_t *a16, ptrdiff_t rs_a, ptrdiff_t cs_a, const float *b,
                     const uint16_t *b16, ptrdiff_t rs_b, ptrdiff_t cs_b, const float *bpacked, float *c, ptrdiff_t ldc,
                     const gemm_epilogue *ep) {
#ifdef _OPENMP
    // a parallel region's thread 0 may call it when its own teams are of one thread (gpt2_update.h's forward beside AdamW)
    if (omp_in_parallel() && (omp_get_thread_num() != 0 || omp_get_max_threads() > 1)) {
        die("gemm: called inside a parallel region (its packing buffers are per thread number): call it from serial code");
    }
#endif
    if (M <= 0 || N <= 0) { return; }
    const gemm_kernel *g = gemm_kernel_current();
    if (g->pack_b16 == NULL) { b16 = NULL; }
    if (b16 == NULL && b == NULL && bpacked == NULL) { die("gemm: no fp32 B for the %s kernel (only a bf16 copy)", g->name); }
    if (a16 != NULL && g->pack_a16 == NULL) { die("gemm: the %s kernel has no bf16 packing of A", g->name); }
    int tm, tn;
    gemm_thread_grid(g, M, N, gemm_max_threads(), ep != NULL && ep->on_final.fn != NULL, &tm, &tn);
    // the largest rectangle of the grid, and the whole of C (a team of one, below): packs A once?
    const int rows_max = ((M + g->mr - 1) / g->mr + tm - 1) / tm * g->mr, cols_max = ((N + g->nr - 1) / g->nr + tn - 1) / tn * g->nr;
    gemm_buffers(tm * tn, gemm_a_once(g, 0, rows_max, 0, cols_max, K) || gemm_a_once(g, 0, M, 0, N, K));
    const int flush_a = gemm_flush_shared_a_enabled();
    #pragma omp parallel num_threads(tm * tn)
    {
#ifdef _OPENMP
        // A team smaller than asked for (a thread limit) runs on one thread.
        if (omp_get_num_threads() == tm * tn) {
            GEMM_PHASE(GEMM_PHASE_CALL, gemm_thread(g, omp_get_thread_num(), tm, tn, gemm_share_a(g, tn, M, K), flush_a, M, N,
                                                    K, a, a16, rs_a, cs_a, b, b16, rs_b, cs_b, bpacked, c, ldc, ep));
        } else if (omp_get_thread_num() == 0) {
            GEMM_PHASE(GEMM_PHASE_CALL, gemm_thread(g, 0, 1, 1, 0, 0, M, N, K, a, a16, rs_a, cs_a, b, b16, rs_b, cs_b, bpacked, c, ldc, ep));
        }
#else
        (void)flush_a;  // one thread: nothing shared
        gemm_thread(g, 0, tm, tn, 0, 0, M, N, K, a, a16, rs_a, cs_a, b, b16, rs_b, cs_b, bpacked, c, ldc, ep);
#endif
    }
}

static void gemm_ex(int M, int N, int K, const float *a, ptrdiff_t rs_a, ptrdiff_t cs_a, const float *b,
                    const uint16_t *b16, ptrdiff_t rs_b, ptrdiff_t cs_b, float *c, ptrdiff_t ldc, const gemm_epilogue *ep) {
    gemm_run(M, N, K, a, NULL, rs_a, cs_a, b, b16, rs_b, cs_b, NULL, c, ldc, ep);
}

// B (K, N) from its bf16 copy (gemm_ex's b16), packed whole for the current kernel into
// panels (gemm_packed_b_words words, 64-byte aligned, as the kernels' vector loads want): what
// gemm_ex_packed_b reads instead of packing B.
static void gemm_pack_b_whole(int K, int N, const uint16_t *b16, ptrdiff_t rs_b, ptrdiff_t cs_b, float *panels) {
    const gemm_kernel *g = gemm_kernel_current();
    if (g->pack_b16 == NULL) { die("gemm: the %s kernel has no bf16 packing of B", g->name); }
    const int Ku = gemm_k_units(g, K), ku_max = gemm_k_block(g, K);
    for (int pu = 0; pu < Ku; pu += ku_max) {
        const int ku = gemm_min(ku_max, Ku - pu), pc = pu * g->kstep, kc = gemm_min(ku * g->kstep, K - pc);
        g->pack_b16(kc, N, b16 + pc * rs_b, rs_b, cs_b, panels + gemm_packed_b_offset(g, N, pu, ku, 0));
    }
}

// B packed whole kept between calls and written a pair of B's rows at a time by whoever makes
// those rows: gpt2.h keeps each weight matrix so for its input gradient (B = W, pairs of rows
// 2p, 2p + 1 interleaved), written by AdamW as it rounds the new weights to bf16, so that the
// product reads its B blocks without packing them. Kernel g's panels must be pair words (the
// native bf16 kernels: vdpbf16ps, AMX). The puts write no padding: the panels are packed whole
// first (gemm_pack_b_whole writes the padding's zeros), then only their pairs are written again.
static int gemm_kernel_pair_panels(const gemm_kernel *g) { return g->pack_b16 != NULL && g->kstep == 2 && g->unit_words == 1; }

// Sixteen bf16 values (any alignment) and sixteen pair words, for gemm_put_b_pair.
typedef uint16_t gemm_v16h __attribute__((vector_size(32), aligned(2), may_alias));
typedef uint32_t gemm_v16w __attribute__((vector_size(64)));

// Into B's panels (packed whole for kernel g, K x N): the pair of k's 2p, 2p + 1 for columns
// [c0, c0 + n), c0 a multiple of g->nr: lo[j] and hi[j] the bf16 bits of B(2p, c0 + j) and
// B(2p + 1, c0 + j); hi NULL where 2p + 1 = K. The same words as gemm_pack_b_whole's, written
// around the caches in whole lines (nothing reads them before the next product; the caller
// fences its thread's stores).
static void gemm_put_b_pair(const gemm_kernel *g, int K, int N, float *panels, int p, int c0, int n, const uint16_t *lo,
                            const uint16_t *hi) {
    const int Ku = gemm_k_units(g, K), ku_max = gemm_k_block(g, K);
    const int pu = p / ku_max * ku_max, ku = gemm_min(ku_max, Ku - pu);
    const size_t cols = (size_t)(N + g->nr - 1) / g->nr * g->nr, kw = (size_t)gemm_panel_words(g, ku);
    uint32_t *row = (uint32_t *)panels + cols * gemm_panel_words(g, pu) + (size_t)(p - pu) * g->nr;
    int j = 0;
    if (g->nr % 16 == 0) {
        for (; j + 16 <= n; j += 16) {
            const int c = c0 + j;
            uint32_t *dst = row + (size_t)(c / g->nr) * g->nr * kw + c % g->nr;
            gemm_v16w w = __builtin_convertvector(*(const gemm_v16h *)(lo + j), gemm_v16w);
            if (hi != NULL) { w |= __builtin_convertvector(*(const gemm_v16h *)(hi + j), gemm_v16w) << 16; }
            if ((uintptr_t)dst % sizeof(w) == 0) {
                for (int q = 0; q < 16; q += VEC_WIDTH) {
                    vfloat x;
                    memcpy(&x, (const uint32_t *)&w + q, sizeof(x));
                    vec_stream((float *)dst + q, x);
                }
            } else {
                memcpy(dst, &w, sizeof(w));
            }
        }
    }
    for (; j < n; j++) {
        const int c = c0 + j;
        row[(size_t)(c / g->nr) * g->nr * kw + c % g->nr] = (uint32_t)lo[j] | (hi != NULL ? (uint32_t)hi[j] << 16 : 0u);
    }
}

// gemm_ex with B packed whole already (gemm_pack_b_whole, for the same kernel, K and N); A from
// its floats a, or where a16 is not NULL from bf16 bits alone as gemm_ex_a16's.
static void gemm_ex_packed_b(int M, int N, int K, const float *a, const uint16_t *a16, ptrdiff_t rs_a, ptrdiff_t cs_a,
                             const float *panels, float *c, ptrdiff_t ldc, const gemm_epilogue *ep) {
    gemm_run(M, N, K, a16 != NULL ? NULL : a, a16, rs_a, cs_a, NULL, NULL, 0, 0, panels, c, ldc, ep);
}

static void gemm(int M, int N, int K, const float *a, ptrdiff_t rs_a, ptrdiff_t cs_a, const float *b,
                 ptrdiff_t rs_b, ptrdiff_t cs_b, float *c, ptrdiff_t ldc, const gemm_epilogue *ep) {
    gemm_ex(M, N, K, a, rs_a, cs_a, b, NULL, rs_b, cs_b, c, ldc, ep);
}

// gemm_ex with A given only as bf16 bits a16 (at the strides a's floats would have, each what
// the bf16 packing would round that float to, as gemm_run's b16): packed by the kernel's pack_a16
// (half the bytes read, no rounding; the same bits). For a run where gemm_a16_usable() says so.
static void gemm_ex_a16(int M, int N, int K, const uint16_t *a16, ptrdiff_t rs_a, ptrdiff_t cs_a, const float *b,
                        const uint16_t *b16, ptrdiff_t rs_b, ptrdiff_t cs_b, float *c, ptrdiff_t ldc, const gemm_epilogue *ep) {
    gemm_run(M, N, K, NULL, a16, rs_a, cs_a, b, b16, rs_b, cs_b, NULL, c, ldc, ep);
}

// 1 if the next gemm_ex packs B from a bf16 copy when given one: bf16, on a kernel with pack_b16.
static int gemm_b16_usable(void) { return precision_is_bf16() && gemm_kernel_current()->pack_b16 != NULL; }
// 1 if the next gemm_ex_a16 can run: bf16, on a kernel with pack_a16 (every bf16 path).
static int gemm_a16_usable(void) { return precision_is_bf16() && gemm_kernel_current()->pack_a16 != NULL; }
// 1 if an operand A is worth its producer writing as bf16 bits for gemm_ex_a16: on kernels whose
// panels hold bf16 pairs (unit_words 1: AMX, vdpbf16ps), where packing floats converts them. The
// emulated kernel's panels hold floats, rounded in place about as cheaply as bits are widened, so
// the producer's narrowing is extra work: on a Zen 3 (2026-12-07), qkv's and fc's backward with
// dout as bits took 1-3% longer there (dev/cpu/results/2026-12-07-evening-zen3). It pays where the producer
// writes the operand anyway (GELU's backward, dfch); a pass that only read gained nothing even on AMX
// (gpt2.h's qkv_bf16_dqkv).
static int gemm_a16_pays(void) { return gemm_a16_usable() && gemm_kernel_current()->unit_words == 1; }
// 1 if the run's bf16 products flush denormal operands to zero (gemm_kernel's flushes_denormals).
static int gemm_flushes_bf16_denormals(void) { return precision_is_bf16() && gemm_kernel_current()->flushes_denormals; }
