/*
The run's arithmetic, chosen once at start-up and only read after: the precision of the
products (matmuls and attention: --precision fp32|bf16) and, in bf16, which units compute them.

precision_set(p) is called from serial code before the first product (matmul_set_precision);
nothing is decided lazily later, so no kernel decides it from inside a parallel region.

bf16 paths, each CPU's fastest where present, in this order:
    amx         Intel AMX TDPBF16PS tiles (Xeon 4th generation and later) for the GEMM and
                attention; the GEMV runs vdpbf16ps (every AMX CPU has AVX512_BF16)
    avx512bf16  vdpbf16ps (AVX512_BF16: AMD Zen 4/5, Intel Cooper Lake and AMX CPUs), where it
                is measured faster than the fp32 FMA (AMD's; not Intel's, at a quarter of the rate)
    emulated    fp32 FMAs over bf16-rounded operands: the same bits as vdpbf16ps (gemm_kernel_bf16.h)
The environment variable LLMC_BF16_PATH=amx|avx512bf16|emulated forces one (an error if this
CPU lacks it); LLMC_BF16_EMULATE=1 is LLMC_BF16_PATH=emulated.
*/
#pragma once

#include <stdlib.h>
#include <string.h>

#include "gemm_kernel_amx.h"   // gemm_amx_available
#include "gemm_kernel_bf16.h"  // gemm_bf16_native_available
#include "utils.h"             // die, now_seconds
#include "vecmath.h"

typedef enum { PRECISION_FP32 = 0, PRECISION_BF16 = 1 } Precision;
typedef enum { BF16_PATH_EMULATED = 0, BF16_PATH_AVX512BF16 = 1, BF16_PATH_AMX = 2 } Bf16Path;

static Precision precision_of_run = PRECISION_FP32;
static Bf16Path precision_bf16_path_of_run = BF16_PATH_EMULATED;
static int precision_bf16_forced = 0;  // 1: the path came from the environment
static int precision_dot_native_of_run = 0;  // see precision_bf16_dot_native

static const char *bf16_path_name(Bf16Path p) {
    return p == BF16_PATH_AMX ? "amx" : p == BF16_PATH_AVX512BF16 ? "avx512bf16" : "emulated";
}

// 1 if this CPU (and OS) can run path p.
static int bf16_path_available(Bf16Path p) {
    switch (p) {
    case BF16_PATH_AMX: return GEMM_HAVE_AMX_KERNEL && gemm_amx_available();
    case BF16_PATH_AVX512BF16: return GEMM_HAVE_BF16_KERNEL && gemm_bf16_native_available();
    default: return 1;
    }
}

// Between vdpbf16ps and the emulated path: how many more multiply-adds a second one core does
// by vdpbf16ps (32 a 512-bit instruction) than by the fp32 FMA the emulated path runs (VEC_WIDTH
// an instruction), measured once, in about a millisecond: 12 independent chains of each on
// registers only, each timed 3 times after a warm-up, the best kept. 2.0 on AMD Zen 4 (2026-11-26);
// 0.49 on an Intel Xeon (family 6 model 207, AMX not exposed by its VM, 2026-11-28), whose
// vdpbf16ps issues at a quarter of its FMA rate: there the emulated path is the faster.
// (dev/cpu/fma_peak's peaks run the same two loops, on every thread for longer.)
#define BF16_RATE_CHAINS 12
static volatile float bf16_rate_sink;
// fp32 multiply-adds a second on this thread: iters rounds of the chains' FMAs.
static double fma_madds_per_second(long iters) {
    vfloat acc[BF16_RATE_CHAINS];
    const vfloat a = vec_set1(0.999999f), b = vec_set1(1e-7f);
    for (int c = 0; c < BF16_RATE_CHAINS; c++) { acc[c] = vec_set1((float)c); }
    const double t0 = now_seconds();
    for (long it = 0; it < iters; it++) {
        #pragma GCC unroll 12
        for (int c = 0; c < BF16_RATE_CHAINS; c++) { acc[c] = acc[c] * a + b; }
    }
    const double seconds = now_seconds() - t0;
    for (int c = 0; c < BF16_RATE_CHAINS; c++) { bf16_rate_sink += acc[c][0]; }
    return (double)VEC_WIDTH * BF16_RATE_CHAINS * (double)iters / seconds;
}
#if GEMM_HAVE_BF16_KERNEL
// bf16 multiply-adds a second on this thread by vdpbf16ps (where the CPU has AVX512_BF16).
GEMM_BF16_TARGET static double bf16_dot_madds_per_second(long iters) {
    __m512 acc[BF16_RATE_CHAINS];
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
    for (int c = 0; c < BF16_RATE_CHAINS; c++) { acc[c] = _mm512_set1_ps((float)c); }
    const double t0 = now_seconds();
    for (long it = 0; it < iters; it++) {
        #pragma GCC unroll 12
        for (int c = 0; c < BF16_RATE_CHAINS; c++) { acc[c] = _mm512_dpbf16_ps(acc[c], a, a); }
    }
    const double seconds = now_seconds() - t0;
    for (int c = 0; c < BF16_RATE_CHAINS; c++) { bf16_rate_sink += _mm512_reduce_add_ps(acc[c]); }
    return 32.0 * BF16_RATE_CHAINS * (double)iters / seconds;
}
#endif
static double bf16_dot_over_fma(void) {
    static double ratio = 0.0;  // 0: not measured yet
#if GEMM_HAVE_BF16_KERNEL
    if (ratio == 0.0 && bf16_path_available(BF16_PATH_AVX512BF16)) {
        const long iters = 20000;  // 240k instructions: 0.1-0.5 ms each
        bf16_dot_madds_per_second(iters);  // warm-up: the 512-bit units power up, the clocks settle
        fma_madds_per_second(iters);
        double dot = 0.0, fma = 0.0;
        for (int r = 0; r < 3; r++) {
            const double d = bf16_dot_madds_per_second(iters), f = fma_madds_per_second(iters);
            if (d > dot) { dot = d; }
            if (f > fma) { fma = f; }
        }
        ratio = dot / fma;
    }
#endif
    return ratio;
}

// The fastest path this CPU has: AMX where present, else vdpbf16ps where it does more
// multiply-adds a second than the fp32 FMA (bf16_dot_over_fma), else the emulated path.
static Bf16Path bf16_path_best(void) {
    if (bf16_path_available(BF16_PATH_AMX)) { return BF16_PATH_AMX; }
    if (bf16_path_available(BF16_PATH_AVX512BF16) && bf16_dot_over_fma() > 1.0) { return BF16_PATH_AVX512BF16; }
    return BF16_PATH_EMULATED;
}

// The path the environment asks for: 1 and *p set, or 0 where it asks for none.
static int bf16_path_requested(Bf16Path *p) {
    const char *e = getenv("LLMC_BF16_PATH");
    if (e != NULL && *e != '\0') {
        for (int i = BF16_PATH_EMULATED; i <= BF16_PATH_AMX; i++) {
            if (strcmp(e, bf16_path_name((Bf16Path)i)) == 0) {
                *p = (Bf16Path)i;
                return 1;
            }
        }
        die("LLMC_BF16_PATH=%s: unknown bf16 path (amx, avx512bf16 or emulated)", e);
    }
    e = getenv("LLMC_BF16_EMULATE");
    if (e != NULL && strcmp(e, "1") == 0) {
        *p = BF16_PATH_EMULATED;
        return 1;
    }
    return 0;
}

// The precision of every product from now on, and in bf16 the path (forced by the environment,
// else the fastest this CPU has). Call from serial code.
static void precision_set(Precision p) {
    precision_of_run = p;
    if (p != PRECISION_BF16) { return; }
    Bf16Path path;
    precision_bf16_forced = bf16_path_requested(&path);
    if (!precision_bf16_forced) {
        path = bf16_path_best();
    } else if (!bf16_path_available(path)) {
        die("LLMC_BF16_PATH=%s: this CPU (or OS) does not support it", bf16_path_name(path));
    }
    precision_bf16_path_of_run = path;
    precision_dot_native_of_run = path != BF16_PATH_EMULATED && bf16_path_available(BF16_PATH_AVX512BF16);
}

// For tests: run path p from now on; 0 (and nothing changed) where this CPU lacks it.
static int precision_force_bf16_path(Bf16Path p) {
    if (!bf16_path_available(p)) { return 0; }
    precision_bf16_path_of_run = p;
    precision_dot_native_of_run = p != BF16_PATH_EMULATED && bf16_path_available(BF16_PATH_AVX512BF16);
    return 1;
}

static Precision precision_get(void) { return precision_of_run; }
static int precision_is_bf16(void) { return precision_of_run == PRECISION_BF16; }
static Bf16Path precision_bf16_path(void) { return precision_bf16_path_of_run; }

// The GEMV's and attention's bf16 dot products: vdpbf16ps (1) or fp32 FMAs on the pairs (0).
// The GEMV has no AMX kernel: on the AMX path it runs vdpbf16ps (attention runs AMX tiles there,
// attention_kernel.h, and its one-query form for the key/value cache vdpbf16ps's order).
static int precision_bf16_dot_native(void) { return precision_dot_native_of_run; }
