/*
AdamW (Loshchilov & Hutter), exactly as PyTorch's torch.optim.AdamW:
  p -= lr * weight_decay * p                      (decoupled weight decay)
  m  = beta1 * m + (1 - beta1) * g
  v  = beta2 * v + (1 - beta2) * g^2
  p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
t counts from 1. grad_scale multiplies g first (gradient clipping).

And the other passes over all the gradients in a step: their sum of squares, for the
gradient norm, and zeroing those the next step's backward adds to (zero_floats).

These are memory-bound streams over arrays of up to 124M floats (GPT-2 124M): one
parallel, vectorized pass each (llmc/vecmath.h). The simple versions are version 1
in dev/cpu/adamw.c, which times them.
*/
#pragma once

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include "utils.h"
#include "vecmath.h"

// The betas and epsilon of training (llm.c's train_gpt2.cu uses the same).
#define ADAMW_BETA1 0.9f
#define ADAMW_BETA2 0.95f
#define ADAMW_EPS 1e-8f

// AdamW fetches each of its four source streams this many floats ahead (0: none, for A/B timing).
// The hardware prefetchers alone kept 2 threads of an Intel Xeon (family 6 model 207, 2026-11-28,
// dev/cpu/adamw with -DADAMW_PREFETCH=...) at 91-99 ms for GPT-2 124M's 124M parameters; 192-256
// floats ahead, 80-83 ms (64: 87-89, 1024: 85-111). On AMD's Zen 4 none was fastest (64-256
// floats ahead: 68-88 ms, none: 65-71), so they are on Intel's CPUs only (soft_prefetch_enabled).
#ifndef ADAMW_PREFETCH
#define ADAMW_PREFETCH 256
#endif

#ifndef ADAMW_STREAM_BF16
#define ADAMW_STREAM_BF16 1  // 0: the bf16 copy by plain stores (for A/B timing)
#endif

// The same bits of a whole vector into dst, aligned to their size (2 * VEC_WIDTH bytes), by a
// non-temporal store where the target has one: the bf16 copy of the weights is read next by
// the next step's forward pass, from memory whatever the caches held, so writing it around them
// saves a read for ownership of each line (2 of the 32 bytes a parameter that AdamW moved).
// A thread calls adamw_stream_fence after its last one (the stores are weakly ordered).
// Zen 4, GPT-2 124M, T=64 bf16 (2026-11-27, builds alternated): AdamW 68.7 -> 66.0 ms a step
// (medians of 12 steps), the same bits.
static inline int adamw_can_stream(const uint16_t *dst) { return (uintptr_t)dst % (2 * VEC_WIDTH) == 0; }
VEC_INLINE void vec_stream_bf16(uint16_t *dst, vbf16 h) {
#if defined(__x86_64__) && VEC_WIDTH == 16 && defined(__AVX__)
    _mm256_stream_si256((__m256i *)dst, (__m256i)h);
#elif defined(__x86_64__) && VEC_WIDTH == 8
    _mm_stream_si128((__m128i *)dst, (__m128i)h);
#else
    memcpy(dst, &h, sizeof(h));
#endif
}
static inline void adamw_stream_fence(void) {
#if defined(__x86_64__)
    _mm_sfence();
#endif
}

// dst[0..n) = the bf16 bits of x (by vec_bf16_bits_ftz where ftz is set): streamed where stream
// is set and the vector is whole (the caller checked adamw_can_stream once for the array), else
// by plain stores.
VEC_INLINE void vec_put_bf16(uint16_t *dst, vfloat x, int n, int stream, int ftz) {
    const vbf16 h = ftz ? vec_bf16_bits_ftz(x) : vec_bf16_bits_fast(x);
    if (stream && n == VEC_WIDTH) {
        vec_stream_bf16(dst, h);
    } else {
        vec_store_bf16_partial(dst, h, n);
    }
}

// dst (n) = the bf16 bits of src (n), as vec_store_bf16_partial: one parallel pass (gpt2.h
// refreshes its bf16 copy of the weights with it after anything but AdamW changed them).
static void bf16_round_floats(uint16_t *dst, const float *src, size_t n) {
    const int stream = ADAMW_STREAM_BF16 && adamw_can_stream(dst);
    #pragma omp parallel
    {
        #pragma omp for schedule(static)
        for (size_t i = 0; i < n; i += VEC_WIDTH) {
            const int k = n - i < VEC_WIDTH ? (int)(n - i) : VEC_WIDTH;
            vec_put_bf16(dst + i, vec_load_partial(src + i, k), k, stream, 0);
        }
        adamw_stream_fence();
    }
}

// AdamW's constants of one call, and its arithmetic on lanes [i, i + k) of the arrays (k is
// VEC_WIDTH but for an array's tail): written once for both, so that the whole vectors' loop is
// compiled with k a constant (no partial loads, and room in the registers for the constants).
typedef struct {
    float grad_scale, beta1, beta2, eps, step_size, decay, sqrt_bias_correction2;
    int stream16, ftz16;
} adamw_constants;
VEC_INLINE void adamw_lanes(const adamw_constants *c, float *params, uint16_t *params16, const float *grads, float *m,
                            float *v, size_t i, int k, int prefetch) {
    if (prefetch && i % 16 == 0) {  // a 64-byte line of each stream; past the end is harmless
        __builtin_prefetch(grads + i + ADAMW_PREFETCH, 0, 3);
        __builtin_prefetch(m + i + ADAMW_PREFETCH, 0, 3);
        __builtin_prefetch(v + i + ADAMW_PREFETCH, 0, 3);
        __builtin_prefetch(params + i + ADAMW_PREFETCH, 0, 3);
    }
    const vfloat g = vec_load_partial(grads + i, k) * c->grad_scale;
    const vfloat mi = c->beta1 * vec_load_partial(m + i, k) + (1.0f - c->beta1) * g;
    const vfloat vi = c->beta2 * vec_load_partial(v + i, k) + (1.0f - c->beta2) * g * g;
    vec_store_partial(m + i, mi, k);
    vec_store_partial(v + i, vi, k);
    const vfloat p = vec_load_partial(params + i, k);
    const vfloat np = p * c->decay - c->step_size * mi / (vec_sqrt(vi) / c->sqrt_bias_correction2 + c->eps);
    vec_store_partial(params + i, np, k);
    if (params16 != NULL) { vec_put_bf16(params16 + i, np, k, c->stream16, c->ftz16); }
}

// params, grads, m, v are (n). One pass: reads the four arrays once, writes three; and where
// params16 is not NULL, also the new parameters' bf16 bits into params16 (n) (the bf16 GEMM's
// copy of the weights, gpt2.h: 2 more bytes written per parameter, in the same pass), by
// vec_bf16_bits_ftz where params16_ftz is set (the run's products flush denormals anyway), else
// vec_bf16_bits_fast. sqrt is vec_sqrt (vecmath.h: sqrtf's bits by the vector square root):
// sqrtf itself does not vectorize unless the build says -fno-math-errno, and a scalar sqrtf per
// element makes this pass slower than memory.
static adamw_constants adamw_constants_of(float lr, float beta1, float beta2, float eps, float weight_decay,
                                          float grad_scale, int t, int stream16, int ftz16) {
    const adamw_constants c = {
        .grad_scale = grad_scale, .beta1 = beta1, .beta2 = beta2, .eps = eps,
        .step_size = lr / (1.0f - powf(beta1, (float)t)),  // lr over the first bias correction
        .decay = 1.0f - lr * weight_decay,
        .sqrt_bias_correction2 = sqrtf(1.0f - powf(beta2, (float)t)),
        .stream16 = stream16,
        .ftz16 = ftz16,
    };
    return c;
}
static void adamw_update_ex(float *params, uint16_t *params16, int params16_ftz, const float *grads, float *m, float *v,
                            size_t n, float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
    const adamw_constants c = adamw_constants_of(lr, beta1, beta2, eps, weight_decay, grad_scale, t,
                                                 params16 != NULL && ADAMW_STREAM_BF16 && adamw_can_stream(params16), params16_ftz);
    const int prefetch = ADAMW_PREFETCH > 0 && soft_prefetch_enabled();
    const size_t whole = n / VEC_WIDTH * VEC_WIDTH;  // the lanes of whole vectors
    #pragma omp parallel
    {
        #pragma omp for schedule(static) nowait
        for (size_t i = 0; i < whole; i += VEC_WIDTH) { adamw_lanes(&c, params, params16, grads, m, v, i, VEC_WIDTH, prefetch); }
        #pragma omp single nowait
        if (whole < n) { adamw_lanes(&c, params, params16, grads, m, v, whole, (int)(n - whole), 0); }
        adamw_stream_fence();
    }
}

// Told of each pair of rows' new bf16 bits by adamw_update_rows: rows 2 pair and 2 pair + 1,
// columns [c0, c0 + n), at lo and hi (hi NULL where the matrix has no row 2 pair + 1).
typedef struct {
    void (*fn)(void *ctx, int pair, int c0, int n, const uint16_t *lo, const uint16_t *hi);
    void *ctx;
} adamw_pair_sink;

// Columns of a pair of rows per call of the sink (a multiple of 64): 8 KiB of bits, in L1.
#define ADAMW_ROWS_CHUNK 2048

// adamw_update_ex on a matrix of rows x cols parameters (row major) with its bf16 copy params16,
// a pair of rows at a time: each chunk of the two rows' new bits goes to the copy and, while in
// L1, to sink (gpt2.h: the weights' panels for their input gradient). The same arithmetic on
// every element, so the same bits as adamw_update_ex.
static void adamw_update_rows(float *params, uint16_t *params16, int params16_ftz, const float *grads, float *m,
                              float *v, size_t rows, size_t cols, const adamw_pair_sink *sink, float lr, float beta1,
                              float beta2, float eps, float weight_decay, float grad_scale, int t) {
    const adamw_constants c = adamw_constants_of(lr, beta1, beta2, eps, weight_decay, grad_scale, t, 0, params16_ftz);
    // whole vectors of the copy streamed where each row starts on one
    const int stream = ADAMW_STREAM_BF16 && adamw_can_stream(params16) && cols % VEC_WIDTH == 0;
    const int prefetch = ADAMW_PREFETCH > 0 && soft_prefetch_enabled();
    const long pairs = (long)((rows + 1) / 2);
    #pragma omp parallel
    {
        uint16_t bits[2][ADAMW_ROWS_CHUNK] __attribute__((aligned(64)));
        #pragma omp for schedule(static) nowait
        for (long p = 0; p < pairs; p++) {
            const int two = 2 * (size_t)p + 1 < rows;
            for (size_t c0 = 0; c0 < cols; c0 += ADAMW_ROWS_CHUNK) {
                const size_t n = cols - c0 < ADAMW_ROWS_CHUNK ? cols - c0 : ADAMW_ROWS_CHUNK;
                for (int h = 0; h <= two; h++) {
                    const size_t at = (2 * (size_t)p + h) * cols + c0;
                    size_t i = 0;
                    for (; i + VEC_WIDTH <= n; i += VEC_WIDTH) {
                        adamw_lanes(&c, params + at, bits[h], grads + at, m + at, v + at, i, VEC_WIDTH, prefetch);
                    }
                    if (i < n) { adamw_lanes(&c, params + at, bits[h], grads + at, m + at, v + at, i, (int)(n - i), 0); }
                    for (i = 0; stream && i + VEC_WIDTH <= n; i += VEC_WIDTH) {
                        vec_stream_bf16(params16 + at + i, *(const vbf16 *)(bits[h] + i));
                    }
                    memcpy(params16 + at + i, bits[h] + i, (n - i) * sizeof(uint16_t));
                }
                sink->fn(sink->ctx, (int)p, (int)c0, (int)n, bits[0], two ? bits[1] : NULL);
            }
        }
        adamw_stream_fence();
    }
}

static void adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr,
                         float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                         int t) {
    adamw_update_ex(params, NULL, 0, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
}

// The sum of x[i]^2 over x (n), in double. Deterministic for any thread count: the array
// is cut into a fixed SUMSQ_PARTS parts; each sums blocks of SUMSQ_BLOCK squares (from the part's
// start) in 4 x VEC_WIDTH float partial sums and adds each block's total to a double; the
// parts are added in order. SumSquaresBlocks gives the same sum from blocks computed earlier.
enum { SUMSQ_PARTS = 64, SUMSQ_BLOCK = 1024 };

// The float total of one block x[b0..b1), b1 - b0 <= SUMSQ_BLOCK.
static inline float sum_of_squares_block(const float *x, size_t b0, size_t b1) {
    vfloat acc[4] = {{0}, {0}, {0}, {0}};
    size_t i = b0;
    for (; i + 4 * VEC_WIDTH <= b1; i += 4 * VEC_WIDTH) {
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const vfloat g = vec_load(x + i + k * VEC_WIDTH);
            acc[k] += g * g;
        }
    }
    for (; i < b1; i += VEC_WIDTH) {
        const int k = b1 - i < VEC_WIDTH ? (int)(b1 - i) : VEC_WIDTH;
        const vfloat g = vec_load_partial(x + i, k);
        acc[0] += g * g;
    }
    return vec_sum((acc[0] + acc[1]) + (acc[2] + acc[3]));
}

static double sum_of_squares(const float *x, size_t n) {
    double partial[SUMSQ_PARTS];
    #pragma omp parallel for schedule(static)
    for (int p = 0; p < SUMSQ_PARTS; p++) {
        const size_t i0 = n * p / SUMSQ_PARTS, i1 = n * (p + 1) / SUMSQ_PARTS;
        double s = 0.0;
        for (size_t b0 = i0; b0 < i1; b0 += SUMSQ_BLOCK) {
            s += (double)sum_of_squares_block(x, b0, b0 + SUMSQ_BLOCK < i1 ? b0 + SUMSQ_BLOCK : i1);
        }
        partial[p] = s;
    }
    double total = 0.0;
    for (int p = 0; p < SUMSQ_PARTS; p++) { total += partial[p]; }
    return total;
}

// sum_of_squares's blocks of an array of n floats, for a caller that computes their totals as
// parts of the array become final (gpt2.h: the gradients, during the backward pass) and adds
// them up after: the same double, bit for bit. Block k is [start[k], start[k + 1]); the blocks
// of part p are part_first[p] .. part_first[p + 1] - 1.
typedef struct {
    size_t n, num_blocks;
    size_t *start;                        // (num_blocks + 1)
    size_t part_first[SUMSQ_PARTS + 1];
    float *sum;                           // (num_blocks): each block's total, as its caller computed it
} SumSquaresBlocks;

static void sum_squares_blocks_init(SumSquaresBlocks *s, size_t n) {
    s->n = n;
    s->num_blocks = 0;
    for (int p = 0; p < SUMSQ_PARTS; p++) {
        const size_t len = n * (p + 1) / SUMSQ_PARTS - n * p / SUMSQ_PARTS;
        s->num_blocks += (len + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
    }
    s->start = malloc_or_die((s->num_blocks + 1) * sizeof(size_t), "the gradient norm's blocks");
    s->sum = malloc_or_die((s->num_blocks > 0 ? s->num_blocks : 1) * sizeof(float), "the gradient norm's blocks");
    size_t k = 0;
    for (int p = 0; p < SUMSQ_PARTS; p++) {
        const size_t i0 = n * p / SUMSQ_PARTS, i1 = n * (p + 1) / SUMSQ_PARTS;
        s->part_first[p] = k;
        for (size_t b0 = i0; b0 < i1; b0 += SUMSQ_BLOCK) { s->start[k++] = b0; }
    }
    s->part_first[SUMSQ_PARTS] = k;
    s->start[k] = n;
}

static void sum_squares_blocks_free(SumSquaresBlocks *s) {
    free(s->start);
    free(s->sum);
    s->start = NULL;
    s->sum = NULL;
}

// sum[k] for the blocks order[0..count) of x (any order: each block's total is its own), but
// those with done[k] set (done may be NULL).
static void sum_squares_blocks_compute(SumSquaresBlocks *s, const float *x, const size_t *order, size_t count,
                                       const uint8_t *done) {
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < count; i++) {
        const size_t k = order[i];
        if (done == NULL || !done[k]) { s->sum[k] = sum_of_squares_block(x, s->start[k], s->start[k + 1]); }
    }
}

// The first block of s that starts at or after position pos (num_blocks if none).
static size_t sum_squares_block_at(const SumSquaresBlocks *s, size_t pos) {
    size_t lo = 0, hi = s->num_blocks;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (s->start[mid] < pos) { lo = mid + 1; } else { hi = mid; }
    }
    return lo;
}

// sum_of_squares(x, n) from the blocks' totals.
static double sum_squares_blocks_total(const SumSquaresBlocks *s) {
    double total = 0.0;
    for (int p = 0; p < SUMSQ_PARTS; p++) {
        double part = 0.0;
        for (size_t k = s->part_first[p]; k < s->part_first[p + 1]; k++) { part += (double)s->sum[k]; }
        total += part;
    }
    return total;
}

// x (n floats) = 0, for the gradients that the backward pass adds to. Every thread, with
// non-temporal stores of whole 64-byte lines: the old lines are never read into the cache
// (dev/cpu/adamw.c times this against one thread's memset).
static void zero_floats(float *x, size_t n) {
#if defined(__x86_64__) && defined(__SSE2__)
    const size_t head = ((64 - ((uintptr_t)x & 63)) & 63) / sizeof(float);  // floats before a 64-byte line
    if (head >= n) {
        memset(x, 0, n * sizeof(float));
        return;
    }
    memset(x, 0, head * sizeof(float));
    float *lines = x + head;
    const size_t nlines = (n - head) / 16;
    #pragma omp parallel
    {
        const __m128 z = _mm_setzero_ps();
        #pragma omp for schedule(static)
        for (size_t i = 0; i < nlines; i++) {
            float *line = lines + 16 * i;
            _mm_stream_ps(line, z);  // four 16-byte stores fill one write-combining line
            _mm_stream_ps(line + 4, z);
            _mm_stream_ps(line + 8, z);
            _mm_stream_ps(line + 12, z);
        }
        _mm_sfence();  // this thread's streamed lines are visible before anyone reads them
    }
    memset(lines + 16 * nlines, 0, (n - head - 16 * nlines) * sizeof(float));
#else
    memset(x, 0, n * sizeof(float));
#endif
}
