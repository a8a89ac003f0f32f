/*
Portable SIMD for the elementwise kernels: GCC vector extensions, so the same source is
correct on any x86-64 (and any other target GCC or clang has); ISA intrinsics only where
the target has them, each with a portable equivalent (vec_exp_scale, vec_any).

Vector width VEC_WIDTH: 16 floats with AVX-512, 8 with AVX, 4 otherwise (the portable
-march=x86-64 build); -DVEC_WIDTH=N forces one. A width wider than the target's is split
by the compiler into narrower operations: slow, but the same arithmetic, which is how the
AVX-512 code path is tested on an AVX2 machine. Results depend on VEC_WIDTH only through
the order of sums (each kernel documents its order); for one build they are bit-identical
run after run and for any thread count.

Math:
- vec_exp(x): expf to within 1.01 ulp (measured by dev/cpu/vecmath.c against double exp on
  every float from -104 to 89), with IEEE limits: +inf above 88.72, gradual underflow to
  subnormals and 0 below -87.34, exp(-inf) = 0, NaN for NaN. The same bits at every width:
  its last step (one vscalefps on AVX-512; integer arithmetic for results below FLT_MIN)
  is checked against the plain two multiplies on every float by dev/cpu/vecmath.c.
- vec_sqrt(x): sqrtf correctly rounded, by the target's vector square root (the compiler
  only vectorizes sqrtf itself under -fno-math-errno).
GELU's tanh is computed through vec_exp as a sigmoid (gelu.h), which has no cancellation
anywhere; so there is no separate vector tanh.

The helpers are static and always inlined, so vectors passed by value have no ABI
to keep (hence -Wpsabi off while a forced width is wider than the target's).
*/
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__AVX512F__) || defined(__AVX__) || defined(__SSE2__)
#include <immintrin.h>  // vec_exp's vscalefps and vec_any's mask tests only
#endif

#ifndef VEC_WIDTH
#if defined(__AVX512F__)
#define VEC_WIDTH 16
#elif defined(__AVX__)
#define VEC_WIDTH 8
#else
#define VEC_WIDTH 4
#endif
#endif
#if VEC_WIDTH != 4 && VEC_WIDTH != 8 && VEC_WIDTH != 16
#error "VEC_WIDTH must be 4, 8 or 16"  // kernels pad rows to 16 floats
#endif

// A width forced past the target's (a test build) makes every function that passes a vector
// by value warn that its ABI differs; they are all inlined, so there is no ABI to keep.
#if (VEC_WIDTH == 16 && !defined(__AVX512F__)) || (VEC_WIDTH == 8 && !defined(__AVX__))
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float vfloat __attribute__((vector_size(VEC_WIDTH * sizeof(float))));
typedef int32_t vint __attribute__((vector_size(VEC_WIDTH * sizeof(float))));
// The same vector at any alignment, allowed to alias float arrays: every load and store
// goes through it (activation rows start anywhere: C need not be a multiple of VEC_WIDTH).
typedef float vfloat_u __attribute__((vector_size(VEC_WIDTH * sizeof(float)), aligned(4), may_alias));

#define VEC_INLINE static inline __attribute__((always_inline))

// Register tiles of R rows (the GEMM micro-kernels, attention's tiles) are written with R a
// compile-time constant, so that their accumulators stay in registers; a switch on the row
// count calls fn(R, ...) for each R in 1..6, and 7..12 where the tile has 12 rows:
//     switch (rows) { VEC_CASES_ROWS_1_TO_6(fn, args) VEC_CASES_ROWS_7_TO_12(fn, args) default: break; }
#define VEC_CASES_ROWS_1_TO_6(fn, ...)                                                   \
    case 1: fn(1, __VA_ARGS__); break; case 2: fn(2, __VA_ARGS__); break;                \
    case 3: fn(3, __VA_ARGS__); break; case 4: fn(4, __VA_ARGS__); break;                \
    case 5: fn(5, __VA_ARGS__); break; case 6: fn(6, __VA_ARGS__); break;
#define VEC_CASES_ROWS_7_TO_12(fn, ...)                                                  \
    case 7: fn(7, __VA_ARGS__); break; case 8: fn(8, __VA_ARGS__); break;                \
    case 9: fn(9, __VA_ARGS__); break; case 10: fn(10, __VA_ARGS__); break;              \
    case 11: fn(11, __VA_ARGS__); break; case 12: fn(12, __VA_ARGS__); break;

VEC_INLINE vfloat vec_load(const float *p) { return *(const vfloat_u *)p; }
VEC_INLINE void vec_store(float *p, vfloat v) { *(vfloat_u *)p = v; }
// v to p, aligned to a whole vector, by a non-temporal store where the target has one (around
// the caches: no read for ownership of the line), for data read again only long after; else a
// plain store. They are weakly ordered: a thread calls vec_stream_fence after its last one,
// before another thread may read them.
VEC_INLINE void vec_stream(float *p, vfloat v) {
#if VEC_WIDTH == 16 && defined(__AVX512F__)
    _mm512_stream_ps(p, (__m512)v);
#elif VEC_WIDTH == 8 && defined(__AVX__)
    _mm256_stream_ps(p, (__m256)v);
#elif VEC_WIDTH == 4 && defined(__SSE2__)
    _mm_stream_ps(p, (__m128)v);
#else
    *(vfloat *)p = v;
#endif
}
static inline void vec_stream_fence(void) {
#if defined(__SSE2__)
    _mm_sfence();
#endif
}
VEC_INLINE vfloat vec_set1(float x) { return (vfloat){0} + x; }

// x rounded to bf16 lane by lane, as fp32 bits with the low 16 bits zero: to nearest, ties to
// even, a NaN kept and quieted; in each lane exactly gemm_bf16_bits (gemm_kernel_bf16.h), so the
// bf16 GEMM's packing, attention and AdamW's bf16 copy of the weights all round alike.
typedef uint32_t vuint __attribute__((vector_size(VEC_WIDTH * sizeof(float))));
VEC_INLINE vuint vec_bf16_bits32(vfloat x) {
    const vuint w = (vuint)x;
    // all ones where NaN: x != x needs no constant (the build has no -ffinite-math-only); the
    // unsigned compare of the bits it replaced took two more operations and constants in AVX2
    const vuint nan = (vuint)(x != x);
    const vuint rounded = w + 0x7fffu + ((w >> 16) & 1u);  // ties go to the even bf16
    return ((rounded & ~nan) | ((w | 0x00400000u) & nan)) & 0xffff0000u;
}
VEC_INLINE vfloat vec_bf16_round(vfloat x) { return (vfloat)vec_bf16_bits32(x); }

// The bf16 bits of VEC_WIDTH floats (vbf16: VEC_WIDTH uint16 lanes): vec_bf16_bits32, which rounds
// exactly as the bf16 GEMM's packing does (gemm_bf16_bits), so that what AdamW's copy of the
// weights and the classifier's dlogits hold is what the packing would round the floats to.
typedef uint16_t vbf16 __attribute__((vector_size(VEC_WIDTH * sizeof(uint16_t))));
VEC_INLINE vbf16 vec_bf16_bits(vfloat x) { return __builtin_convertvector(vec_bf16_bits32(x) >> 16, vbf16); }

// The same by the CPU's own conversion where the build has it (vcvtneps2bf16, AVX512_BF16): the
// same nearest-even rounding and quieted NaN, but a denormal becomes a zero of its sign, as the
// native packing's vcvtne2ps2bf16 does. So it serves where the products flush denormal bf16
// operands to zero anyway (vdpbf16ps, AMX: gemm_flushes_bf16_denormals), and there it takes a
// third of AdamW's work off (the integer rounding's eight operations a vector: on Zen 4, with
// the arrays in L3, 0.27 against 0.39 ms per million parameters; in the T=64 bf16 step AdamW
// lower in 5 of 6 rounds, builds alternated, medians 51 against 61 ms, 2026-11-29; on the lent
// Xeon's AMX path the step did not show it beyond the host's drift). Elsewhere: vec_bf16_bits.
#if VEC_WIDTH == 16 && defined(__AVX512BF16__)
#define VEC_HAVE_BF16_CVT 1
VEC_INLINE vbf16 vec_bf16_bits_ftz(vfloat x) { return (vbf16)_mm512_cvtneps_pbh((__m512)x); }
#else
#define VEC_HAVE_BF16_CVT 0
VEC_INLINE vbf16 vec_bf16_bits_ftz(vfloat x) { return vec_bf16_bits(x); }
#endif

// vec_bf16_bits's bits, by the CPU's conversion where the build has it and the lanes that hold a
// denormal (vfpclassps; all but never in a model's weights) redone by the integer rounding: for
// the emulated path (its products keep denormals) on CPUs with AVX512_BF16, as an Intel Xeon whose
// VM hides AMX. dev/cpu/adamw in cache (1M parameters, 2 threads, 2026-11-30): the copy's cost over
// AdamW alone from 0.08 to 0.02 ms on Zen 4, from 0.03-0.37 to 0.03-0.05 ms on the lent Xeon.
#if VEC_HAVE_BF16_CVT && defined(__AVX512DQ__) && defined(__AVX512BW__) && defined(__AVX512VL__)
VEC_INLINE vbf16 vec_bf16_bits_fast(vfloat x) {
    const __mmask16 denormal = _mm512_fpclass_ps_mask((__m512)x, 0x20);  // imm 0x20: denormal
    const __m256i h = (__m256i)vec_bf16_bits_ftz(x);
    if (denormal == 0) { return (vbf16)h; }
    return (vbf16)_mm256_mask_blend_epi16(denormal, h, (__m256i)vec_bf16_bits(x));
}
#else
VEC_INLINE vbf16 vec_bf16_bits_fast(vfloat x) { return vec_bf16_bits(x); }
#endif

// The bf16 bits the GEMM's packing rounds x to, for operands written as bf16 by their producer
// (the classifier's dlogits, the MLP's dfch): vec_bf16_bits_fast, or where the run's products flush
// denormal operands to zero anyway (ftz: gemm_flushes_bf16_denormals) the CPU's conversion alone.
VEC_INLINE vbf16 vec_bf16_bits_operand(vfloat x, int ftz) { return ftz ? vec_bf16_bits_ftz(x) : vec_bf16_bits_fast(x); }

// The first n <= VEC_WIDTH of h into dst[0..n).
VEC_INLINE void vec_store_bf16_partial(uint16_t *dst, vbf16 h, int n) {
    if (n == VEC_WIDTH) {
        memcpy(dst, &h, sizeof(h));
    } else {
        for (int i = 0; i < n; i++) { dst[i] = h[i]; }
    }
}

// Transposes the VEC_WIDTH x VEC_WIDTH block x in registers: lane l of x[r] becomes lane r of
// x[l]. Stage s swaps bit s of the row number with bit s of the lane number: rows i and i + s
// (bit s of i clear) trade their lanes with bit s set and clear respectively, two two-source
// shuffles (one vpermt2ps each with AVX-512), log2(VEC_WIDTH) stages.
#if defined(__clang__)  // no __builtin_shuffle (its shufflevector takes constant lanes only): through memory
VEC_INLINE void vec_transpose(vfloat x[VEC_WIDTH]) {
    float t[VEC_WIDTH][VEC_WIDTH];
    for (int r = 0; r < VEC_WIDTH; r++) {
        for (int l = 0; l < VEC_WIDTH; l++) { t[l][r] = x[r][l]; }
    }
    for (int l = 0; l < VEC_WIDTH; l++) { x[l] = vec_load(t[l]); }
}
#else
VEC_INLINE void vec_transpose(vfloat x[VEC_WIDTH]) {
    vint lane;
    for (int l = 0; l < VEC_WIDTH; l++) { lane[l] = l; }
    #pragma GCC unroll 4
    for (int s = VEC_WIDTH / 2; s >= 1; s /= 2) {
        const vint high = (lane & s) != 0;  // all ones in the lanes with bit s set
        const vint to_low = (high & (VEC_WIDTH + lane - s)) | (~high & lane);   // row i's new lanes
        const vint to_high = (high & (VEC_WIDTH + lane)) | (~high & (lane + s)); // row i + s's
        #pragma GCC unroll 16
        for (int i = 0; i < VEC_WIDTH; i++) {
            if (i & s) { continue; }
            const vfloat a = x[i], b = x[i + s];
            x[i] = __builtin_shuffle(a, b, to_low);
            x[i + s] = __builtin_shuffle(a, b, to_high);
        }
    }
}
#endif

// The first n <= VEC_WIDTH floats at p, the other lanes 0; and its store: for the tail of
// a row, so that every element goes through the same vector arithmetic.
VEC_INLINE vfloat vec_load_partial(const float *p, int n) {
    if (n == VEC_WIDTH) { return vec_load(p); }
    vfloat v = {0};
    for (int i = 0; i < n; i++) { v[i] = p[i]; }
    return v;
}
VEC_INLINE void vec_store_partial(float *p, vfloat v, int n) {
    if (n == VEC_WIDTH) { vec_store(p, v); return; }
    for (int i = 0; i < n; i++) { p[i] = v[i]; }
}

// Lanes 0..n-1 true (all ones), the others false.
VEC_INLINE vint vec_lanes_below(int n) {
    vint lane;
    for (int i = 0; i < VEC_WIDTH; i++) { lane[i] = i; }
    return lane < n;
}

// Lane-wise select: mask lanes are all ones (true) or zero, as comparisons make them.
VEC_INLINE vfloat vec_select(vint mask, vfloat if_true, vfloat if_false) {
    return (vfloat)(((vint)if_true & mask) | ((vint)if_false & ~mask));
}

// 1 if any lane of a mask (as comparisons make them) is true.
VEC_INLINE int vec_any(vint mask) {
#if VEC_WIDTH == 16 && defined(__AVX512F__)
    return _mm512_test_epi32_mask((__m512i)mask, (__m512i)mask) != 0;
#elif VEC_WIDTH == 8 && defined(__AVX__)
    return _mm256_movemask_ps((__m256)mask) != 0;
#elif VEC_WIDTH == 4 && defined(__SSE2__)
    return _mm_movemask_ps((__m128)mask) != 0;
#else
    int32_t any = 0;
    for (int i = 0; i < VEC_WIDTH; i++) { any |= mask[i]; }
    return any != 0;
#endif
}

// Lane-wise max; a NaN in a propagates.
VEC_INLINE vfloat vec_max(vfloat a, vfloat b) { return vec_select(a < b, b, a); }

// Sum of the lanes in lane order (one fixed order, for determinism).
VEC_INLINE float vec_sum(vfloat v) {
    float s = v[0];
    for (int i = 1; i < VEC_WIDTH; i++) { s += v[i]; }
    return s;
}

VEC_INLINE float vec_max_lane(vfloat v) {
    float m = v[0];
    for (int i = 1; i < VEC_WIDTH; i++) { m = v[i] > m ? v[i] : m; }
    return m;
}

// exp(x) in every lane, within 1.01 ulp (see the header comment for the limits).
// x = n ln2 + r with |r| <= ln2/2 (Cody-Waite: ln2 in two parts, n * the first exact),
// exp(r) by Cephes' expf polynomial, then times 2^n as 2^(n/2) * 2^(n - n/2): each
// factor is a normal float for every n that occurs, so results that overflow become
// +inf and results below FLT_MIN round to subnormals, as expf's.

// Below -104 exp rounds to 0 anyway: x clamped there keeps n within the rounding trick's range.
VEC_INLINE vfloat vec_exp_clamp_low(vfloat x) { return vec_select(x < -104.0f, vec_set1(-104.0f), x); }

// The reduction of x >= -104 (or NaN): returns exp(r) and sets *n to n.
VEC_INLINE vfloat vec_exp_reduced(vfloat x, vfloat *n) {
    x = vec_select(x > 89.0f, vec_set1(89.0f), x);  // beyond, +inf anyway; NaN compares false: stays NaN
    const float round_magic = 0x1.8p23f;  // adding it rounds to an integer held in the low bits
    *n = (x * 1.44269504088896341f + round_magic) - round_magic;
    vfloat r = x - *n * 0.693359375f;  // 0.693359375 has 8 significant bits: n * it is exact
    r = r + *n * 2.12194440e-4f;       // ln2 - 0.693359375
    vfloat p = r * 1.9875691500e-4f + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    return p * (r * r) + r + 1.0f;
}

// p * 2^n (n from vec_exp_reduced, -150..128) as two multiplies by normal floats, 2^(n/2) and
// 2^(n - n/2): the first is exact, the second rounds only where the result is subnormal.
VEC_INLINE vfloat vec_exp_times_2n(vfloat p, vfloat n) {
    const vint ni = __builtin_convertvector(n, vint);
    const vint half = ni >> 1, rest = ni - half;  // both within -75..64
    return p * (vfloat)((half + 127) << 23) * (vfloat)((rest + 127) << 23);
}

// exp(x) by the reduction and the two multiplies alone. Every width; the reference for vec_exp's
// bits (dev/cpu/vecmath.c checks they agree on every float).
VEC_INLINE vfloat vec_exp_two_multiplies(vfloat x) {
    vfloat n;
    const vfloat p = vec_exp_reduced(vec_exp_clamp_low(x), &n);
    return vec_exp_times_2n(p, n);
}

// p * 2^n for n <= -126 (p from vec_exp_reduced, in [0.70, 1.42]): a subnormal, 0, or just above
// FLT_MIN, rounded once to the subnormal grid (multiples of 2^-149) as a multiply rounds it, in
// integer arithmetic. y = p * 2^(n + 149) is exact (a normal float below 2^24) and the result's
// bits are y rounded to an integer (by adding and taking away 2^23 below 2^23; above, y already is
// one): those bits read as a float are that many multiples of 2^-149, across FLT_MIN too.
VEC_INLINE vfloat vec_exp_tiny(vfloat p, vfloat n) {
    const vint e = __builtin_convertvector(n, vint) + (149 + 127);  // y's scale 2^(n + 149), n >= -150
    const vfloat y = p * (vfloat)(e << 23);
    const vfloat whole = vec_select(y < 0x1p23f, (y + 0x1p23f) - 0x1p23f, y);
    return (vfloat)__builtin_convertvector(whole, vint);
}

// p * 2^n for n >= -126 and p from vec_exp_reduced: one vscalefps on AVX-512 (the nine
// instructions of the two multiplies in one: exp's throughput 1.26x on the Xeon of 2026-11-28),
// else the two multiplies.
VEC_INLINE vfloat vec_exp_scale(vfloat p, vfloat n) {
#if VEC_WIDTH == 16 && defined(__AVX512F__)
    return (vfloat)_mm512_scalef_ps((__m512)p, (__m512)n);
#else
    return vec_exp_times_2n(p, n);
#endif
}

// exp(x) in every lane, x anywhere: the lanes whose result is below FLT_MIN (n <= -126) by
// vec_exp_tiny, the others by vec_exp_scale with n at -125 or above.
VEC_INLINE vfloat vec_exp_any(vfloat x) {
    vfloat n;
    const vfloat p = vec_exp_reduced(vec_exp_clamp_low(x), &n);
    const vint tiny = n < -125.5f;  // NaN compares false
    const vfloat low = vec_exp_tiny(p, vec_select(tiny, n, vec_set1(-126.0f)));
    return vec_select(tiny, low, vec_exp_scale(p, vec_max(n, vec_set1(-125.0f))));
}

// exp(x), with the two multiplies' bits. A vector with a lane below -86.5, whose result may be
// below FLT_MIN (subnormal or 0: x below -87.3, and exp(-inf) = 0 for attention's masked scores),
// goes through vec_exp_any: on the Xeon of 2026-11-28 a subnormal result costs vscalefps a
// microcode assist, and an underflow to 0 the two multiplies, for the whole vector (16 floats in
// 90 and 64 ns, against 4.2 and 5.6 in range; a product's GELU epilogue ran 5x slower on values
// of magnitude 10). The test takes the place of the low clamp: in range, the cost is the same.
VEC_INLINE vfloat vec_exp(vfloat x) {
    if (__builtin_expect(vec_any(x < -86.5f), 0)) { return vec_exp_any(x); }
    vfloat n;
    const vfloat p = vec_exp_reduced(x, &n);  // n >= -125
    return vec_exp_scale(p, n);
}

// sqrt(x) in every lane, correctly rounded (sqrtf's bits, and torch.sqrt's): the vector square
// root of the target (vsqrtps; every x86-64 has one at 4 lanes), else sqrtf lane by lane. It
// was a reciprocal square root by Newton's method, within 1 ulp, until 2026-11-28: its twenty
// multiply-adds a vector made AdamW compute-bound on a Zen 4 core (one thread: 132 ms a pass
// over GPT-2 124M's parameters, against 88 with vsqrtps; dev/cpu/adamw).
VEC_INLINE vfloat vec_sqrt(vfloat x) {
#if VEC_WIDTH == 16 && defined(__AVX512F__)
    return (vfloat)_mm512_sqrt_ps((__m512)x);
#elif VEC_WIDTH == 8 && defined(__AVX__)
    return (vfloat)_mm256_sqrt_ps((__m256)x);
#elif defined(__SSE2__)  // 4 lanes at a time (a width forced past the target's: test builds)
    vfloat r;
    for (int i = 0; i < VEC_WIDTH; i += 4) {
        __m128 q;
        __builtin_memcpy(&q, (const float *)&x + i, sizeof(q));
        q = _mm_sqrt_ps(q);
        __builtin_memcpy((float *)&r + i, &q, sizeof(q));
    }
    return r;
#else
    vfloat r;
    for (int i = 0; i < VEC_WIDTH; i++) { r[i] = __builtin_sqrtf(x[i]); }
    return r;
#endif
}

#pragma GCC diagnostic pop
