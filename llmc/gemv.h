/*
Matrix-vector product for the linear layers on one row (BT = 1): the incremental
decoding of llmc/gpt2_cache.h produces one position per step, and the LM head of a
sample is one row too.

    out (OC) = addend (OC) + weight (OC, C) . inp (C) + bias (OC), then optionally GELU.

With one row there is nothing to reuse: every weight is read once and used once,
so the product is bound by memory bandwidth, and the GEMM's packing (a copy of
the whole weight matrix per call) would triple the traffic. Here the weights are
read in place, row after row, so that each thread reads one sequential stream,
which the hardware prefetchers follow at the core's full rate. (Four rows read
side by side, so that each load of inp served four, read more slowly: four streams
per thread; dev/cpu/gemv.c times both.)
A row's sum runs in 4 partial sums (vector k of the row into sum k mod 4), so the
adds do not wait on each other, then (s0 + s1) + (s2 + s3), then its lanes in
order. The threads split the output channels in equal contiguous blocks (static
schedule), and every output's sum runs over C in that one order, so the result
is bit-identical for any thread count. It differs from the GEMM's only by fp32
rounding (another order of the same sum).

The GELU epilogue is gelu.h's gelu_vec, as the GEMM's, and `pre` gets the value
before it, as in gemm_epilogue.

gemv_quads is one thread's share (gpt2_cache_step splits the rows itself, in one
parallel region per token). The bf16 GEMV (gemv_bf16_*, below) reads weights
stored as bf16, half the bytes: gpt2_cache_use_bf16 makes that copy once.
*/
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "gelu.h"
#include "gemm.h"
#include "vecmath.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

// The dot product of one row w (C floats) with x, in the order above.
static inline float gemv_dot(const float *w, const float *x, int C) {
    vfloat acc[4] = {{0}};
    int c = 0, k = 0;
    for (; c + 4 * VEC_WIDTH <= C; c += 4 * VEC_WIDTH) {
        for (int i = 0; i < 4; i++) { acc[i] += vec_load(w + c + i * VEC_WIDTH) * vec_load(x + c + i * VEC_WIDTH); }
    }
    for (; c + VEC_WIDTH <= C; c += VEC_WIDTH, k++) { acc[k] += vec_load(w + c) * vec_load(x + c); }
    if (c < C) { acc[k] += vec_load_partial(w + c, C - c) * vec_load_partial(x + c, C - c); }
    return vec_sum((acc[0] + acc[1]) + (acc[2] + acc[3]));
}

// out[o] = addend[o] + d + bias[o] for the n outputs o0.. of one quad (d[i]: the dot product of
// row o0 + i); with gelu, out = gelu(that) and pre (if not NULL) = that.
static inline void gemv_finish(float *out, const float *addend, const float *bias, int gelu, float *pre,
                               int o0, int n, const float d[4]) {
    vfloat v = {0};  // the quad's values in lanes 0..n-1: one vector GELU for the four
    for (int i = 0; i < n; i++) {
        const int o = o0 + i;
        v[i] = (addend != NULL ? addend[o] : 0.0f) + d[i] + (bias != NULL ? bias[o] : 0.0f);
        if (gelu && pre != NULL) { pre[o] = v[i]; }
    }
    if (gelu) { v = gelu_vec(v); }
    for (int i = 0; i < n; i++) { out[o0 + i] = v[i]; }
}

// The outputs of quads [q0, q1) (rows 4 q0 .. 4 q1 - 1, fewer at OC) of gemv below, on the
// calling thread: a thread's share when the caller splits the work itself (gpt2_cache_step).
static void gemv_quads(int q0, int q1, float *out, const float *addend, const float *inp, const float *weight,
                       const float *bias, int C, int OC, int gelu, float *pre) {
    for (int q = q0; q < q1; q++) {
        const int o0 = 4 * q, n = OC - o0 < 4 ? OC - o0 : 4;
        float d[4];
        for (int i = 0; i < n; i++) { d[i] = gemv_dot(weight + (size_t)(o0 + i) * C, inp, C); }
        gemv_finish(out, addend, bias, gelu, pre, o0, n, d);
    }
}

// out (OC) = addend + weight (OC, C) . inp (C) + bias; with gelu, out = gelu(that) and pre
// (if not NULL) = that. addend and bias may be NULL; addend may be out itself.
static void gemv(float *out, const float *addend, const float *inp, const float *weight, const float *bias,
                 int C, int OC, int gelu, float *pre) {
    #pragma omp parallel for schedule(static)
    for (int q = 0; q < (OC + 3) / 4; q++) { gemv_quads(q, q + 1, out, addend, inp, weight, bias, C, OC, gelu, pre); }
}

// ---------------------------------------------------------------------------------------
// bf16: weights stored as bf16 (the top 16 bits of the fp32, rounded to nearest even by
// gemm_bf16_bits, as the GEMM's packing rounds them), the input row rounded the same way,
// products summed in fp32. A product of two bf16 values is exact in fp32, so the result is
// the bf16 GEMM's up to the order of the sums. Half the bytes of fp32: twice the speed.
//
// Layout: a row of C values is stored in Cp = gemv_bf16_stride(C) uint16 (a whole number of
// 32-value chunks, zero past C), so that both paths below read whole chunks only. A chunk
// is 16 pairs (k, k+1), k even, each a 32-bit word with k in the low half. Chunk j of a row
// goes to partial sum j mod 4 (16 fp32 lanes each, as in the fp32 GEMV): lane i takes pair i
// of the chunk, acc[i] += w[k+1] x[k+1], then acc[i] += w[k] x[k], each add rounded. That is
// what vdpbf16ps does (gemm_kernel_bf16.h), and the portable path does the same adds in the
// same order on bf16 values widened to fp32 (a 16-bit shift), so both give the same bits
// (denormals aside: vdpbf16ps flushes them). The 4 sums are added (s0 + s1) + (s2 + s3), and
// the 16 lanes summed by one tree (gemv_bf16_hsum), in both.

typedef float gemv_v16 __attribute__((vector_size(64)));
typedef uint32_t gemv_w16 __attribute__((vector_size(64)));
typedef uint32_t gemv_w16_u __attribute__((vector_size(64), aligned(4), may_alias));
typedef float gemv_v8 __attribute__((vector_size(32)));

static inline int gemv_bf16_stride(int C) { return (C + 31) / 32 * 32; }

// dst (rows, Cp) = src (rows, C) rounded to bf16, rows zero-padded to Cp = gemv_bf16_stride(C).
static void gemv_bf16_convert(uint16_t *dst, const float *src, size_t rows, int C) {
    const int Cp = gemv_bf16_stride(C);
    #pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; r++) {
        for (int c = 0; c < C; c++) { dst[r * Cp + c] = (uint16_t)(gemm_bf16_bits(src[r * C + c]) >> 16); }
        for (int c = C; c < Cp; c++) { dst[r * Cp + c] = 0; }
    }
}

// The input row x (C) rounded to bf16 into x16 (Cp), on the calling thread.
static inline void gemv_bf16_round_row(uint16_t *x16, const float *x, int C) {
    const int Cp = gemv_bf16_stride(C);
    for (int c = 0; c < C; c++) { x16[c] = (uint16_t)(gemm_bf16_bits(x[c]) >> 16); }
    for (int c = C; c < Cp; c++) { x16[c] = 0; }
}

// The 16 lanes of a row's accumulator summed in one fixed order: halves, then halves again.
// (By pointer: a 64-byte vector passed by value warns of its ABI where AVX-512 is off.)
VEC_INLINE float gemv_bf16_hsum(const void *acc) {
    gemv_v8 lo, hi;
    memcpy(&lo, acc, sizeof(lo));
    memcpy(&hi, (const char *)acc + sizeof(lo), sizeof(hi));
    const gemv_v8 s8 = lo + hi;
    const float s4[4] = {s8[0] + s8[4], s8[1] + s8[5], s8[2] + s8[6], s8[3] + s8[7]};
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

// The dot product of the bf16 row w (Cp) with the bf16 row x, portable: each pair widened to
// fp32 (the high half masked, the low half shifted up), added high first as vdpbf16ps does.
static float gemv_bf16_dot_emulated(const uint16_t *w, const uint16_t *x, int Cp) {
    gemv_v16 acc[4] = {{0}};
    const gemv_w16 hi_mask = (gemv_w16){0} + 0xffff0000u;
    for (int c = 0, j = 0; c < Cp; c += 32, j = (j + 1) & 3) {
        const gemv_w16 xw = *(const gemv_w16_u *)(x + c), ww = *(const gemv_w16_u *)(w + c);
        acc[j] = acc[j] + (gemv_v16)(ww & hi_mask) * (gemv_v16)(xw & hi_mask);  // exact products: an FMA changes nothing
        acc[j] = acc[j] + (gemv_v16)(ww << 16) * (gemv_v16)(xw << 16);
    }
    const gemv_v16 sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    return gemv_bf16_hsum(&sum);
}

#if GEMM_HAVE_BF16_KERNEL
// The same with vdpbf16ps (only called where the CPU has AVX512_BF16).
GEMM_BF16_TARGET
static float gemv_bf16_dot_native(const uint16_t *w, const uint16_t *x, int Cp) {
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    int c = 0;
    for (; c + 128 <= Cp; c += 128) {
        #pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            acc[j] = _mm512_dpbf16_ps(acc[j], (__m512bh)_mm512_loadu_si512((const void *)(w + c + 32 * j)),
                                      (__m512bh)_mm512_loadu_si512((const void *)(x + c + 32 * j)));
        }
    }
    for (int j = 0; c < Cp; c += 32, j++) {  // the last 1-3 chunks, into sums 0..2
        acc[j] = _mm512_dpbf16_ps(acc[j], (__m512bh)_mm512_loadu_si512((const void *)(w + c)),
                                  (__m512bh)_mm512_loadu_si512((const void *)(x + c)));
    }
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    return gemv_bf16_hsum(&sum);
}
#endif

// The outputs of quads [q0, q1) of out (OC) = addend + weight (OC, Cp bf16) . x16 (Cp bf16) + bias,
// then GELU if gelu (pre: as gemv's); on the calling thread. The path is the run's, chosen at
// start-up (precision_bf16_dot_native: vdpbf16ps unless the CPU lacks it or the emulated path is forced).
static void gemv_bf16_quads(int q0, int q1, float *out, const float *addend, const uint16_t *x16,
                            const uint16_t *weight, const float *bias, int C, int OC, int gelu, float *pre) {
    const int Cp = gemv_bf16_stride(C);
    const int native = precision_bf16_dot_native();
    (void)native;  // unused where no vdpbf16ps kernel is built
    for (int q = q0; q < q1; q++) {
        const int o0 = 4 * q, n = OC - o0 < 4 ? OC - o0 : 4;
        float d[4];
        for (int i = 0; i < n; i++) {
            const uint16_t *w = weight + (size_t)(o0 + i) * Cp;
#if GEMM_HAVE_BF16_KERNEL
            if (native) { d[i] = gemv_bf16_dot_native(w, x16, Cp); continue; }
#endif
            d[i] = gemv_bf16_dot_emulated(w, x16, Cp);
        }
        gemv_finish(out, addend, bias, gelu, pre, o0, n, d);
    }
}

#pragma GCC diagnostic pop
