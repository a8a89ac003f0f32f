/*
Matrix multiplication with bias: the linear layers of GPT-2.

Weights are stored as in PyTorch's nn.Linear, (OC, C): output channel major.
matmul_backward accumulates (+=) into its outputs, so a caller can sum the gradients of
several uses of one tensor (and of several micro-batches); matmul_backward_ex can overwrite
instead, which saves zeroing them first.

One row (BT = 1, incremental decoding) in fp32 runs on gemv.h's matrix-vector product, which
reads the weights once in place (memory-bound); everything else (and one row in bf16, whose
rounding is the GEMM's packing; gpt2_cache.h's cached steps instead keep a bf16 copy of the weights
for gemv.h's bf16 GEMV) on the packed GEMM of gemm.h (its
header comment has the blocking, the threading and the packing buffers: allocated once per
thread, on first use or by gemm_init).
Each function opens its own OpenMP parallel region; call them from serial code. Results are
bit-identical run after run and for any thread count. The simple versions these replace are
version 1 in dev/cpu/matmul_forward.c and dev/cpu/matmul_backward.c.

The LM head is matmul_forward(logits, x, wte, NULL, NULL, rows, C, Vp) and
matmul_backward(dx, dwte, NULL, dlogits, x, wte, rows, C, Vp); gemm.h shows how to compute
a block of vocabulary columns at a time.

weight16: the forward functions and matmul_backward_ex take, beside the fp32 weight, an
optional bf16 copy of it (uint16 bits, the same layout, each what the bf16 packing would round
the float to: gemm_bf16_bits; gpt2_update.h's AdamW writes it) or NULL. In bf16, on a kernel that packs
B from bf16 (gemm.h's pack_b16: every bf16 path), the products read the copy instead of the
weight (half the bytes, no rounding; the same bits); otherwise, and in fp32, the fp32 weight.
The weight gradient never reads it. matmul_backward_ex may also take the weight already packed
for the input gradient's product (weight_panels: gpt2.h keeps the blocks' matrices so on AMX),
which that product then reads without packing.
*/
#pragma once

#include <stddef.h>
#include "gelu.h"  // gelu_grad_vec: GELU's backward fused into the MLP's bias pass
#include "gemm.h"
#include "gemv.h"

// Precision of the products from now on (precision.h: PRECISION_FP32, PRECISION_BF16), for
// the matmuls and attention alike; call it once, from serial code, before the first product.
// bf16: every matmul_* and gemm call after this one rounds both operands to bf16 (nearest
// even) while packing them and sums the products in fp32; bias, residual, GELU and the
// bias gradient stay fp32. The kernel is the fastest this CPU has (AMX tiles, vdpbf16ps, or
// the fp32 kernel on bf16-rounded panels, which gives vdpbf16ps's bits), unless the
// environment variable LLMC_BF16_PATH (or LLMC_BF16_EMULATE=1) forces one (precision.h).
static void matmul_set_precision(Precision p) { precision_set(p); }

// Which kernel the matmuls run now, in words, e.g. "bf16 (AVX512_BF16 vdpbf16ps kernel)".
static const char *matmul_precision_path(void) { return gemm_path_name(); }

// One row on the GEMV: fp32 only (the bf16 rounding is the GEMM's packing).
static int matmul_one_row(int BT) { return BT == 1 && !precision_is_bf16(); }

// out (BT, OC) = inp (BT, C) . weight^T + bias. weight is (OC, C), bias is (OC) or NULL.
static void matmul_forward(float *out, const float *inp, const float *weight, const uint16_t *weight16,
                           const float *bias, int BT, int C, int OC) {
    if (matmul_one_row(BT)) { gemv(out, NULL, inp, weight, bias, C, OC, 0, NULL); return; }
    const gemm_epilogue ep = {.bias = bias};
    gemm_ex(BT, OC, C, inp, C, 1, weight, weight16, 1, C, out, OC, &ep);
}

// out (BT, OC) = residual (BT, OC) + inp (BT, C) . weight^T + bias: the projection and the
// residual add in one pass. residual may be out itself (out += inp . weight^T + bias).
static void matmul_forward_residual(float *out, const float *residual, const float *inp,
                                    const float *weight, const uint16_t *weight16, const float *bias, int BT, int C,
                                    int OC) {
    if (matmul_one_row(BT)) { gemv(out, residual, inp, weight, bias, C, OC, 0, NULL); return; }
    const gemm_epilogue ep = {.addend = residual, .ld_addend = OC, .bias = bias};
    gemm_ex(BT, OC, C, inp, C, 1, weight, weight16, 1, C, out, OC, &ep);
}

// The MLP's first layer with its activation: pre (BT, OC) = inp (BT, C) . weight^T + bias
// and out (BT, OC) = gelu(pre), GELU with the tanh approximation
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), evaluated as x / (1 + exp(-2u)) by
// gelu_vec (gelu.h), the same function as gelu_forward's: the same bits as the product followed
// by gelu_forward (dev/cpu/gemm_check.c checks it against float64). pre may be NULL (not
// stored); pre and out must not overlap. pre, read next by the backward pass, is written around
// the caches where its rows are aligned to whole vectors (gemm_kernel.h's gemm_pre_streams).
static void matmul_forward_gelu(float *out, float *pre, const float *inp, const float *weight,
                                const uint16_t *weight16, const float *bias, int BT, int C, int OC) {
    if (matmul_one_row(BT)) { gemv(out, NULL, inp, weight, bias, C, OC, 1, pre); return; }
    const gemm_epilogue ep = {.bias = bias, .gelu = 1, .pre = pre, .ld_pre = OC};
    gemm_ex(BT, OC, C, inp, C, 1, weight, weight16, 1, C, out, OC, &ep);
}

// Flags of matmul_backward_ex: which gradients are overwritten (=) rather than accumulated (+=).
enum {
    MATMUL_OVERWRITE_DINP = 1,
    MATMUL_OVERWRITE_DWEIGHT = 2,
    MATMUL_OVERWRITE_DBIAS = 4,
};

// dbias (OC) (+)= column sums of dout (BT, OC). Each thread sums one contiguous block of
// columns (read row by row as long sequential runs) into partial sums kept in L1; every column
// is summed over the rows in order, so the result does not depend on the thread count.
static void matmul_backward_bias(float *dbias, const float *dout, int BT, int OC, int overwrite) {
    enum { MAX_COLS = 2048 };  // the partial sums of one block: 8 KiB
    int nth = 1;
#ifdef _OPENMP
    nth = omp_get_max_threads();
#endif
    // whole rounds of the threads (3 blocks of 768 columns on 2 threads, as qkv's 2304 made with
    // 1024-column blocks, left one thread alone for a third of the pass), no block narrower than a vector
    const int blocks = gemm_min((OC + MAX_COLS * nth - 1) / (MAX_COLS * nth) * nth, (OC + 15) / 16);
    const int cols = ((OC + blocks - 1) / blocks + 15) / 16 * 16;
    #pragma omp parallel for schedule(static)
    for (int blk = 0; blk < blocks; blk++) {
        const int o0 = blk * cols, n = gemm_min(cols, OC - o0);
        float sum[MAX_COLS];
        for (int o = 0; o < n; o++) { sum[o] = 0.0f; }
        for (int i = 0; i < BT; i++) {
            const float *g = dout + (size_t)i * OC + o0;
            for (int o = 0; o < n; o++) { sum[o] += g[o]; }
        }
        for (int o = 0; o < n; o++) { dbias[o0 + o] = overwrite ? sum[o] : dbias[o0 + o] + sum[o]; }
    }
}

#define MATMUL_BIAS_BF16_COLS 2048  // matmul_backward_bias_bf16's block of columns (partial sums in L1)
// Row i's columns [b0, b1) of matmul_backward_bias_bf16 (x: gelu_inp's row, or NULL). Inlined with
// `gelu` constant at each call: the loop is compiled once with GELU and once without.
static inline __attribute__((always_inline)) void matmul_bias_bf16_row(vfloat *sum, uint16_t *out, const float *d,
                                                                       const float *x, int b0, int b1, int OC,
                                                                       int ahead, int ftz, const int gelu) {
    for (int c = b0; c < b1; c += VEC_WIDTH) {
        const int n = b1 - c < VEC_WIDTH ? b1 - c : VEC_WIDTH;
        if (ahead) {
            __builtin_prefetch(d + OC + c, 0, 3);
            if (gelu) { __builtin_prefetch(x + OC + c, 0, 3); }
        }
        vfloat g = n == VEC_WIDTH ? vec_load(d + c) : vec_load_partial(d + c, n);
        if (gelu) { g = gelu_grad_vec(n == VEC_WIDTH ? vec_load(x + c) : vec_load_partial(x + c, n)) * g; }
        // g's other use (the rounding) keeps GCC from contracting the sum into an FMA
        sum[(c - b0) / VEC_WIDTH] += g;
        vec_store_bf16_partial(out + c, vec_bf16_bits_operand(g, ftz), n);
    }
}

// The bias pass of a product whose dout (N, OC) bf16 training's backward products read only as
// bf16 bits (gemm_a16_usable): dout16 (row i at dout16 + i * OC) gets each float rounded as the
// products' packing would round it (vec_bf16_bits_operand; ftz as there), and dbias (OC) (+)= the
// column sums of the floats as matmul_backward_bias forms them (each column over the rows in order,
// from zero; = where overwrite). The products then read half the bytes, unrounded. Where gelu_inp
// (N, OC) is not NULL, GELU's backward comes first, as gelu_backward computes it: the sums and bits
// are of gelu'(gelu_inp) * dout (the MLP's dfch, whose floats are then never stored). Each thread
// takes a contiguous range of columns and walks every row, so each column's sum is in order whatever
// the thread count; the partial sums of a block of at most MATMUL_BIAS_BF16_COLS columns stay in L1,
// and the next row's segment is fetched ahead where soft_prefetch_enabled (GELU_PREFETCH's reason).
static void matmul_backward_bias_bf16(uint16_t *dout16, float *dbias, const float *dout, const float *gelu_inp, int N,
                                      int OC, int overwrite, int ftz) {
    const int vecs = (OC + VEC_WIDTH - 1) / VEC_WIDTH;
    const int prefetch = GELU_PREFETCH > 0 && soft_prefetch_enabled();
    #pragma omp parallel
    {
        int nth = 1, t = 0;
#ifdef _OPENMP
        nth = omp_get_num_threads();
        t = omp_get_thread_num();
#endif
        const int end = (int)((long)vecs * (t + 1) / nth) * VEC_WIDTH, stop = end < OC ? end : OC;
        for (int b0 = (int)((long)vecs * t / nth) * VEC_WIDTH; b0 < stop; b0 += MATMUL_BIAS_BF16_COLS) {
            const int b1 = stop - b0 < MATMUL_BIAS_BF16_COLS ? stop : b0 + MATMUL_BIAS_BF16_COLS;
            vfloat sum[MATMUL_BIAS_BF16_COLS / VEC_WIDTH];
            for (int v = 0; v < (b1 - b0 + VEC_WIDTH - 1) / VEC_WIDTH; v++) { sum[v] = vec_set1(0.0f); }
            for (int i = 0; i < N; i++) {
                const size_t row = (size_t)i * OC;
                const int ahead = prefetch && i + 1 < N;  // the next row's segment: a new run for the prefetchers
                if (gelu_inp != NULL) {
                    matmul_bias_bf16_row(sum, dout16 + row, dout + row, gelu_inp + row, b0, b1, OC, ahead, ftz, 1);
                } else {
                    matmul_bias_bf16_row(sum, dout16 + row, dout + row, NULL, b0, b1, OC, ahead, ftz, 0);
                }
            }
            for (int c = b0; c < b1; c++) {
                const float s = sum[(c - b0) / VEC_WIDTH][(c - b0) % VEC_WIDTH];
                dbias[c] = overwrite ? s : dbias[c] + s;
            }
        }
    }
}

// The backward products from dout (BT, OC), rows ld apart, given as floats or, where dout16 is
// not NULL, only as bf16 bits (gemm_ex_a16; dout unused): dinp (BT, C) (+)= dout . weight and
// dweight (OC, C) (+)= dout^T . inp, as matmul_backward_ex's flags say.
static void matmul_backward_products(float *dinp, float *dweight, const float *dout, const uint16_t *dout16,
                                     ptrdiff_t ld, const float *inp, const float *weight, const uint16_t *weight16,
                                     const float *weight_panels, int BT, int C, int OC, unsigned flags,
                                     const gemm_final_hook *dweight_final) {
    if (dinp != NULL) {
        const gemm_epilogue ep = {.addend = (flags & MATMUL_OVERWRITE_DINP) ? NULL : dinp, .ld_addend = C};
        if (weight_panels != NULL) {
            gemm_ex_packed_b(BT, C, OC, dout, dout16, ld, 1, weight_panels, dinp, C, &ep);
        } else if (dout16 != NULL) {
            gemm_ex_a16(BT, C, OC, dout16, ld, 1, weight, weight16, C, 1, dinp, C, &ep);
        } else {
            gemm_ex(BT, C, OC, dout, ld, 1, weight, weight16, C, 1, dinp, C, &ep);
        }
    }
    if (dweight != NULL) {
        gemm_epilogue ep = {.addend = (flags & MATMUL_OVERWRITE_DWEIGHT) ? NULL : dweight, .ld_addend = C};
        if (dweight_final != NULL) { ep.on_final = *dweight_final; }
        if (dout16 != NULL) {
            gemm_ex_a16(OC, C, BT, dout16, 1, ld, inp, NULL, C, 1, dweight, C, &ep);
        } else {
            gemm(OC, C, BT, dout, 1, ld, inp, C, 1, dweight, C, &ep);
        }
    }
}

// dout is (BT, OC). dinp (BT, C) (+)= dout . weight, dweight (OC, C) (+)= dout^T . inp,
// dbias (OC) (+)= column sums of dout; flags (MATMUL_OVERWRITE_*) pick = over += for each.
// Any of dinp, dweight, dbias may be NULL to skip it. dweight_final (or NULL) is told of rows
// of dweight as the product finishes them (gemm.h's gemm_final_hook). weight_panels: NULL, or
// the weight packed whole as dinp's product reads it (gemm_pack_b_whole(OC, C, weight16, C, 1)
// for the run's kernel, or the same words written otherwise), which it then reads instead.
static void matmul_backward_ex(float *dinp, float *dweight, float *dbias, const float *dout,
                               const float *inp, const float *weight, const uint16_t *weight16,
                               const float *weight_panels, int BT, int C, int OC, unsigned flags,
                               const gemm_final_hook *dweight_final) {
    matmul_backward_products(dinp, dweight, dout, NULL, OC, inp, weight, weight16, weight_panels, BT, C, OC, flags,
                             dweight_final);
    if (dbias != NULL) { matmul_backward_bias(dbias, dout, BT, OC, (flags & MATMUL_OVERWRITE_DBIAS) != 0); }
}

// matmul_backward_ex's dinp and dweight (no dbias) from dout given only as bf16 bits: dout16's
// row i at dout16 + i * ld16, each what the bf16 packing would round dout's float to (the
// classifier writes dlogits so, and matmul_backward_bias_bf16 the MLP's dfch and attention's dqkv). For a bf16 run where
// gemm_a16_usable(): the products pack A from it (half the bytes read, no rounding), with the same
// bits as from the floats. weight_panels as matmul_backward_ex's.
static void matmul_backward_bf16_dout(float *dinp, float *dweight, const uint16_t *dout16, ptrdiff_t ld16,
                                      const float *inp, const float *weight, const uint16_t *weight16,
                                      const float *weight_panels, int BT, int C, int OC, unsigned flags,
                                      const gemm_final_hook *dweight_final) {
    matmul_backward_products(dinp, dweight, NULL, dout16, ld16, inp, weight, weight16, weight_panels, BT, C, OC, flags,
                             dweight_final);
}

// dinp (BT, C) += dout . weight, dweight (OC, C) += dout^T . inp, dbias (OC) += column sums
// of dout. dinp, dweight or dbias may be NULL to skip it.
static void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, int BT, int C, int OC) {
    matmul_backward_ex(dinp, dweight, dbias, dout, inp, weight, NULL, NULL, BT, C, OC, 0, NULL);
}
