/*
General single-precision matrix multiply, GotoBLAS/BLIS style:

    C (M, N) = addend + A (M, K) . B (K, N) + bias, then optionally GELU.

A and B are read through a row stride and a column stride, so either may be transposed
(A(m, k) = a[m*rs_a + k*cs_a], B(k, n) = b[k*rs_b + n*cs_b]); C is row-major with leading
dimension ldc. The linear layers of GPT-2 in these terms (matmul.h wraps them):
    forward      out  (BT, OC)  = inp (BT, C)   . weight^T        a: rs C,  cs 1   b: rs 1, cs C
    to input     dinp (BT, C)  += dout (BT, OC) . weight (OC, C)  a: rs OC, cs 1   b: rs C, cs 1
    to weight    dw   (OC, C)  += dout^T        . inp (BT, C)     a: rs 1,  cs OC  b: rs C, cs 1
and the LM head with the tied embedding wte (Vp, C):
    logits (rows, Vp) = x (rows, C) . wte^T   is matmul_forward(logits, x, wte, NULL, rows, C, Vp);
    a block of vocabulary columns [v0, v1) of it, written into logits with ldc = Vp:
    gemm(rows, v1 - v0, C, x, C, 1, wte + v0*C, 1, C, logits + v0, Vp, NULL).

How it runs. The loops around the micro-kernel (gemm_kernel.h), per thread:
    for jc over N in blocks of nc <= GEMM_NC          B block (kc x nc) in L3
      for pc over K in blocks of kc <= GEMM_KC        pack B block into NR-column panels
        for ic over M in blocks of mc <= GEMM_MC      pack A block (mc x kc, in L2) into MR-row panels
          for jr over nc in steps of NR               b panel (kc x NR) in L1
            for ir over mc in steps of MR             micro-kernel: MR x NR tile of C
The first k block adds the addend (or nothing), later ones add the tile C already holds; the
last applies bias and GELU while the tile is still in registers.

Threads. C is cut into a fixed grid of tm x tn rectangles on tile boundaries, one per OpenMP
thread, and each thread runs the loops above on its rectangle with its own packing buffers:
no barrier, no shared writes. When N is split, each thread packs all of A (and when M is
split, all of B); the grid minimizes the busiest thread's flops plus packing, which keeps
the threads equally loaded and duplicates the cheaper operand. The k order of every sum
is fixed by K alone, so the results are bit-identical for any thread count.

Memory. Each OpenMP thread number owns one packing buffer of GEMM_MC*GEMM_KC + GEMM_KC*GEMM_NC
floats (4.1 MiB for the AVX2 variant), allocated by the first gemm that runs with that many
threads (or by gemm_init) and kept until the process exits: calls after the first allocate
nothing.
The buffers are per translation unit (static); gemm is called from serial code only, never
from inside a parallel region.
*/
#pragma once

#include <stddef.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "gemm_kernel.h"
#include "utils.h"

// Cache blocking, in elements: GEMM_KC x GEMM_NR of B (the b panel) stays in L1 while a
// panels stream past it, GEMM_MC x GEMM_KC of A fits L2, GEMM_KC x GEMM_NC of B fits a thread's
// share of L3. GEMM_MC is a multiple of GEMM_MR and GEMM_NC of GEMM_NR. The AVX2 values were
// measured on Zen 3 (32 KiB L1, 512 KiB L2); the AVX-512 ones follow from Zen 4/5's caches
// (32-48 KiB L1, 1 MiB L2: a 24 KiB b panel, 256 rows of BT in one block), not measured.
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

#define GEMM_MAX_THREADS 256

typedef struct {
    const float *addend;  // (M, N) added to the product, or NULL; may be c itself (with
    ptrdiff_t ld_addend;  //   ld_addend = ldc) to accumulate: C += A.B
    const float *bias;    // (N) added to every row, or NULL
    int gelu;             // 0: C = value; 1: C = gelu(value) (tanh approximation, gelu.h)
    float *pre;           // with gelu: (M, N) gets the value before GELU, or NULL
    ptrdiff_t ld_pre;
} gemm_epilogue;

static float *gemm_thread_buffer[GEMM_MAX_THREADS];

// Makes sure threads 0..nth-1 have their packing buffers: allocated here, in serial code, the
// first time a thread count is seen (each buffer's pages are first touched by its thread).
static void gemm_buffers(int nth) {
    if (nth > GEMM_MAX_THREADS) { die("gemm: %d threads, at most %d supported", nth, GEMM_MAX_THREADS); }
    for (int t = 0; t < nth; t++) {
        if (gemm_thread_buffer[t] == NULL) {
            gemm_thread_buffer[t] = aligned_alloc_or_die(
                sizeof(float) * ((size_t)GEMM_MC * GEMM_KC + (size_t)GEMM_KC * GEMM_NC), "gemm packing buffer");
        }
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
static void gemm_init(void) { gemm_buffers(gemm_max_threads()); }

static inline int gemm_min(int a, int b) { return a < b ? a : b; }

// Block size for `len` elements in blocks of at most `max`, as equal as possible, rounded up
// to a multiple of `unit` (max is a multiple of unit): 300 rows in blocks of at most 144 in
// steps of 6 are 102 + 102 + 96, not 144 + 144 + 12.
static int gemm_block_size(int len, int max, int unit) {
    int blocks = (len + max - 1) / max;
    int size = (len + blocks - 1) / blocks;
    return (size + unit - 1) / unit * unit;
}

// Rows of the source are copied in chunks of GEMM_PACK_ROWS: for a strided (copy) pack, each
// chunk's rows are read left to right across all panels, so the hardware prefetcher sees a few
// sequential streams instead of one jump to a new row (and often a new page) per 64 bytes.
#define GEMM_PACK_ROWS 8

// Packs the mc x kc block of A at a into MR-row panels, buf[panel][k][i] (rows past mc zero).
static void gemm_pack_a(int mc, int kc, const float *a, ptrdiff_t rs, ptrdiff_t cs, float *restrict buf) {
    const int mfull = mc / GEMM_MR * GEMM_MR;
    if (rs == 1) {  // columns run along m (A is a transposed matrix): MR contiguous per k
        for (int k0 = 0; k0 < kc; k0 += GEMM_PACK_ROWS) {
            const int kb = gemm_min(GEMM_PACK_ROWS, kc - k0);
            for (int i0 = 0; i0 < mfull; i0 += GEMM_MR) {
                float *dst = buf + (size_t)i0 * kc + (size_t)k0 * GEMM_MR;
                for (int k = 0; k < kb; k++) {  // a fixed-size copy: plain moves, not gathers
                    memcpy(dst + k * GEMM_MR, a + (k0 + k) * cs + i0, GEMM_MR * sizeof(float));
                }
            }
        }
    } else if (cs == 1) {  // rows run along k: interleave MR rows
        for (int i0 = 0; i0 < mfull; i0 += GEMM_MR) {
            const float *src = a + i0 * rs;
            float *dst = buf + (size_t)i0 * kc;
            // as in gemm_pack_b: fetch the next panel's rows while this one is interleaved
            const float *next = i0 + GEMM_MR < mfull ? src + GEMM_MR * rs : src;
            for (int k0 = 0; k0 < kc; k0 += 16) {
                #pragma GCC unroll 16
                for (int i = 0; i < GEMM_MR; i++) { __builtin_prefetch(next + i * rs + k0); }
                const int kend = gemm_min(k0 + 16, kc);
                for (int k = k0; k < kend; k++) {
                    #pragma GCC unroll 16
                    for (int i = 0; i < GEMM_MR; i++) { dst[k * GEMM_MR + i] = src[i * rs + k]; }
                }
            }
        }
    } else {
        for (int i0 = 0; i0 < mfull; i0 += GEMM_MR) {
            for (int k = 0; k < kc; k++) {
                for (int i = 0; i < GEMM_MR; i++) { buf[(size_t)i0 * kc + k * GEMM_MR + i] = a[(i0 + i) * rs + k * cs]; }
            }
        }
    }
    if (mfull < mc) {  // the last, partial panel
        const int mr = mc - mfull;
        float *dst = buf + (size_t)mfull * kc;
        for (int k = 0; k < kc; k++) {
            for (int i = 0; i < GEMM_MR; i++) { dst[k * GEMM_MR + i] = i < mr ? a[(mfull + i) * rs + k * cs] : 0.0f; }
        }
    }
}

// Packs the kc x nc block of B at b into NR-column panels, buf[panel][k][j] (columns past nc zero).
static void gemm_pack_b(int kc, int nc, const float *b, ptrdiff_t rs, ptrdiff_t cs, float *restrict buf) {
    const int nfull = nc / GEMM_NR * GEMM_NR;
    if (cs == 1) {  // rows run along n: NR contiguous per k
        for (int k0 = 0; k0 < kc; k0 += GEMM_PACK_ROWS) {
            const int kb = gemm_min(GEMM_PACK_ROWS, kc - k0);
            for (int j0 = 0; j0 < nfull; j0 += GEMM_NR) {
                float *dst = buf + (size_t)j0 * kc + (size_t)k0 * GEMM_NR;
                for (int k = 0; k < kb; k++) {
                    #pragma GCC unroll 4
                    for (int j = 0; j < GEMM_NV; j++) {
                        ((gemm_vf *)(dst + k * GEMM_NR))[j] = *(const gemm_vfu *)(b + (k0 + k) * rs + j0 + j * GEMM_VEC);
                    }
                }
            }
        }
    } else if (rs == 1) {  // columns run along k (B is a transposed matrix): interleave NR columns
        for (int j0 = 0; j0 < nfull; j0 += GEMM_NR) {
            const float *src = b + j0 * cs;
            float *dst = buf + (size_t)j0 * kc;
            // NR short runs are too many streams for the hardware prefetcher: fetch the next
            // panel's runs, a line (16 floats) of each per 16 k, while this one is transposed.
            const float *next = j0 + GEMM_NR < nfull ? src + GEMM_NR * cs : src;
            for (int k0 = 0; k0 < kc; k0 += 16) {
                #pragma GCC unroll 32
                for (int j = 0; j < GEMM_NR; j++) { __builtin_prefetch(next + j * cs + k0); }
                const int kend = gemm_min(k0 + 16, kc);
                for (int k = k0; k < kend; k++) {
                    #pragma GCC unroll 32
                    for (int j = 0; j < GEMM_NR; j++) { dst[k * GEMM_NR + j] = src[j * cs + k]; }
                }
            }
        }
    } else {
        for (int j0 = 0; j0 < nfull; j0 += GEMM_NR) {
            for (int k = 0; k < kc; k++) {
                for (int j = 0; j < GEMM_NR; j++) { buf[(size_t)j0 * kc + k * GEMM_NR + j] = b[k * rs + (j0 + j) * cs]; }
            }
        }
    }
    if (nfull < nc) {  // the last, partial panel
        const int nr = nc - nfull;
        float *dst = buf + (size_t)nfull * kc;
        for (int k = 0; k < kc; k++) {
            for (int j = 0; j < GEMM_NR; j++) { dst[k * GEMM_NR + j] = j < nr ? b[k * rs + (nfull + j) * cs] : 0.0f; }
        }
    }
}

// The two innermost loops: C block (mc x nc) at (ic, jc) of C from the packed A and B blocks.
// first/last: this is the first/last k block. ep is the caller's epilogue (or NULL).
static void gemm_macro_kernel(int mc, int nc, int kc, const float *abuf, const float *bbuf,
                              float *c, ptrdiff_t ldc, int ic, int jc, int first, int last,
                              const gemm_epilogue *ep) {
    for (int jr = 0; jr < nc; jr += GEMM_NR) {
        const int nr = gemm_min(GEMM_NR, nc - jr);
        const float *bpanel = bbuf + (size_t)jr * kc;
        for (int ir = 0; ir < mc; ir += GEMM_MR) {
            const int mr = gemm_min(GEMM_MR, mc - ir);
            const float *apanel = abuf + (size_t)ir * kc;
            const size_t row = (size_t)(ic + ir), col = (size_t)(jc + jr);
            float *ctile = c + row * ldc + col;
            gemm_tile_epilogue tep = {0};
            if (!first) {
                tep.cin = ctile;
                tep.ldcin = ldc;
            } else if (ep != NULL && ep->addend != NULL) {
                tep.cin = ep->addend + row * ep->ld_addend + col;
                tep.ldcin = ep->ld_addend;
            }
            if (last && ep != NULL) {
                tep.bias = ep->bias != NULL ? ep->bias + col : NULL;
                tep.gelu = ep->gelu;
                if (ep->gelu && ep->pre != NULL) {
                    tep.pre = ep->pre + row * ep->ld_pre + col;
                    tep.ldpre = ep->ld_pre;
                }
            }
            if (mr == GEMM_MR && nr == GEMM_NR) {
                gemm_micro_kernel(kc, apanel, bpanel, ctile, ldc, &tep);
                continue;
            }
            // Edge tile: the kernel works on a full tile in a scratch copy; only mr x nr go back.
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
            gemm_micro_kernel(kc, apanel, bpanel, tile, GEMM_NR, &tep);
            for (int i = 0; i < mr; i++) {
                memcpy(ctile + i * ldc, tile + i * GEMM_NR, nr * sizeof(float));
                if (pre_out != NULL) { memcpy(pre_out + i * ld_pre_out, tile_pre + i * GEMM_NR, nr * sizeof(float)); }
            }
        }
    }
}

// One thread's share: rows [m0, m1) and columns [n0, n1) of C, all of K, packing into its
// own buffer.
static void gemm_rectangle(int m0, int m1, int n0, int n1, int K, const float *a, ptrdiff_t rs_a,
                           ptrdiff_t cs_a, const float *b, ptrdiff_t rs_b, ptrdiff_t cs_b, float *c,
                           ptrdiff_t ldc, const gemm_epilogue *ep, float *buf) {
    float *abuf = buf;
    float *bbuf = buf + (size_t)GEMM_MC * GEMM_KC;
    const int nc_max = gemm_block_size(n1 - n0, GEMM_NC, GEMM_NR);
    const int kc_max = K > 0 ? gemm_block_size(K, GEMM_KC, 1) : 0;
    const int mc_max = gemm_block_size(m1 - m0, GEMM_MC, GEMM_MR);
    for (int jc = n0; jc < n1; jc += nc_max) {
        const int nc = gemm_min(nc_max, n1 - jc);
        int pc = 0;
        do {  // at least once: with K = 0 the epilogue still writes C
            const int kc = gemm_min(kc_max, K - pc);
            gemm_pack_b(kc, nc, b + pc * rs_b + jc * cs_b, rs_b, cs_b, bbuf);
            for (int ic = m0; ic < m1; ic += mc_max) {
                const int mc = gemm_min(mc_max, m1 - ic);
                gemm_pack_a(mc, kc, a + ic * rs_a + pc * cs_a, rs_a, cs_a, abuf);
                gemm_macro_kernel(mc, nc, kc, abuf, bbuf, c, ldc, ic, jc, pc == 0, pc + kc >= K, ep);
            }
            pc += kc;
        } while (pc < K);
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
static void gemm_thread_grid(int M, int N, int nth, int *tm, int *tn) {
    const int mtiles = (M + GEMM_MR - 1) / GEMM_MR, ntiles = (N + GEMM_NR - 1) / GEMM_NR;
    double best = -1.0;
    *tm = 1;  // fewer tiles than threads along every split: one thread
    *tn = 1;
    for (int t = 1; t <= nth; t++) {
        if (nth % t != 0 || t > ntiles || nth / t > mtiles) { continue; }
        const double rows = (double)((mtiles + nth / t - 1) / (nth / t)) * GEMM_MR;
        const double cols = (double)((ntiles + t - 1) / t) * GEMM_NR;
        const double cost = 2.0 * rows * cols + GEMM_PACK_FLOPS * (rows + cols);
        if (best < 0.0 || cost < best) {
            best = cost;
            *tn = t;
            *tm = nth / t;
        }
    }
}

// Thread tid of a tm x tn grid over C (M, N): its rectangle.
static void gemm_thread(int tid, int tm, int tn, int M, int N, int K, const float *a, ptrdiff_t rs_a,
                        ptrdiff_t cs_a, const float *b, ptrdiff_t rs_b, ptrdiff_t cs_b, float *c,
                        ptrdiff_t ldc, const gemm_epilogue *ep) {
    const int mtiles = (M + GEMM_MR - 1) / GEMM_MR, ntiles = (N + GEMM_NR - 1) / GEMM_NR;
    const int ti = tid / tn, tj = tid % tn;
    const int m0 = gemm_min(M, (int)((long)mtiles * ti / tm) * GEMM_MR);
    const int m1 = gemm_min(M, (int)((long)mtiles * (ti + 1) / tm) * GEMM_MR);
    const int n0 = gemm_min(N, (int)((long)ntiles * tj / tn) * GEMM_NR);
    const int n1 = gemm_min(N, (int)((long)ntiles * (tj + 1) / tn) * GEMM_NR);
    gemm_rectangle(m0, m1, n0, n1, K, a, rs_a, cs_a, b, rs_b, cs_b, c, ldc, ep, gemm_thread_buffer[tid]);
}

// C (M, N) = epilogue(A (M, K) . B (K, N)), see the top of this file; ep may be NULL (C = A.B).
static void gemm(int M, int N, int K, const float *a, ptrdiff_t rs_a, ptrdiff_t cs_a, const float *b,
                 ptrdiff_t rs_b, ptrdiff_t cs_b, float *c, ptrdiff_t ldc, const gemm_epilogue *ep) {
    if (M <= 0 || N <= 0) { return; }
    int tm, tn;
    gemm_thread_grid(M, N, gemm_max_threads(), &tm, &tn);
    gemm_buffers(tm * tn);
    #pragma omp parallel num_threads(tm * tn)
    {
#ifdef _OPENMP
        // A team smaller than asked for (a thread limit, a nested region) runs on one thread.
        if (omp_get_num_threads() == tm * tn) {
            gemm_thread(omp_get_thread_num(), tm, tn, M, N, K, a, rs_a, cs_a, b, rs_b, cs_b, c, ldc, ep);
        } else if (omp_get_thread_num() == 0) {
            gemm_thread(0, 1, 1, M, N, K, a, rs_a, cs_a, b, rs_b, cs_b, c, ldc, ep);
        }
#else
        gemm_thread(0, tm, tn, M, N, K, a, rs_a, cs_a, b, rs_b, cs_b, c, ldc, ep);
#endif
    }
}
