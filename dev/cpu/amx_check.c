/*
What TDPBF16PS computes, read off the CPU it runs on, against candidate formulas: the order of
the two products of a pair, whether each add is rounded or a pair (or a whole tile row of 16
pairs) is summed first, and denormals. Then the AMX GEMM path (llmc/gemm_kernel_amx.h) against
the emulated path, element by element. Where the CPU (or OS) has no AMX it says so and exits 0.

  ./amx_check

One TDPBF16PS adds to each fp32 C(m, n) the 16 pairs of row m of A times column n of B (pair
p: A's bf16 2p, 2p+1 against B's). The candidates, per element, from C = c:
  seq-odd-first   for p: c += a[2p+1] b[2p+1]; c += a[2p] b[2p]   (each add rounded: vdpbf16ps,
                  and the emulated path)
  seq-even-first  for p: c += a[2p] b[2p]; c += a[2p+1] b[2p+1]   (the SDM's pseudo-code)
  pair-fused      for p: c += (a[2p] b[2p] + a[2p+1] b[2p+1]), the pair summed exactly, one rounding
  row-fused       c += sum over the 16 pairs, exactly, one rounding
  pair-rounded    for p: c += fl(a[2p] b[2p] + a[2p+1] b[2p+1]), the pair's sum rounded, then the add
  pair-tree       the 16 rounded pair sums added as a binary tree in fp32, then added to c
each with denormal products and sums kept (IEEE) or flushed to zero (FTZ/DAZ): the random tests
use normal values far from the denormal range, and separate cases probe the denormals.
*/
#include "common.h"
#include "llmc/precision.h"

#if GEMM_HAVE_AMX_KERNEL && !defined(GEMM_AMX_EMULATE)
#include "llmc/matmul.h"

static float bf(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// One TDPBF16PS: c (16 x 16 fp32, row-major) += a (16 rows x 32 bf16) . b (16 pair rows x 16 pairs).
GEMM_AMX_TARGET
static void tdp(float *c, const uint16_t *a, const uint16_t *b) {
    gemm_amx_thread_init();
    _tile_loadd(0, c, 64);
    _tile_loadd(4, a, 64);
    _tile_loadd(6, b, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_stored(0, c, 64);
}

enum { SEQ_ODD, SEQ_EVEN, PAIR_FUSED, ROW_FUSED, PAIR_ROUNDED, PAIR_TREE, NMODELS };
static const char *const model_names[NMODELS] = {"seq-odd-first", "seq-even-first", "pair-fused", "row-fused",
                                                 "pair-rounded", "pair-tree"};

static float model(int which, float c, const uint16_t *arow, const uint16_t *b, int n) {
    volatile float acc = c;
    double row = 0.0;
    float pairs[16];
    for (int p = 0; p < 16; p++) {
        const float a0 = bf(arow[2 * p]), a1 = bf(arow[2 * p + 1]);
        const float b0 = bf(b[p * 32 + 2 * n]), b1 = bf(b[p * 32 + 2 * n + 1]);
        const float p0 = a0 * b0, p1 = a1 * b1;  // exact: 8-bit significands
        switch (which) {
        case SEQ_ODD: acc = acc + p1; acc = acc + p0; break;
        case SEQ_EVEN: acc = acc + p0; acc = acc + p1; break;
        case PAIR_FUSED: acc = (float)((double)acc + ((double)p0 + (double)p1)); break;
        case PAIR_ROUNDED: { volatile float t = p0 + p1; acc = acc + t; break; }
        case PAIR_TREE: pairs[p] = p0 + p1; break;
        default: row += (double)p0 + (double)p1; break;  // exact in double for these ranges
        }
    }
    if (which == ROW_FUSED) { acc = (float)((double)acc + row); }
    if (which == PAIR_TREE) {  // the 16 pair sums added as a tree (fp32 roundings), then to C
        for (int w = 8; w >= 1; w /= 2) {
            for (int i = 0; i < w; i++) { volatile float t = pairs[i] + pairs[i + w]; pairs[i] = t; }
        }
        acc = acc + pairs[0];
    }
    return acc;
}

static uint64_t rng = 88172645463325252ull;
static uint32_t next32(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
// a random bf16 of either sign with exponent in 2^[-span, span]
static uint16_t rand_bf16(int span) {
    const uint32_t r = next32();
    const int e = 127 + (int)(r % (2 * span + 1)) - span;
    return (uint16_t)(((r >> 16) & 0x8000) | (e << 7) | ((r >> 8) & 0x7f));
}

static void numerics(void) {
    static uint16_t a[16 * 32] __attribute__((aligned(64))), b[16 * 32] __attribute__((aligned(64)));
    static float c[256] __attribute__((aligned(64))), c0[256];
    long mismatch[NMODELS] = {0}, total = 0;
    for (int trial = 0; trial < 2000; trial++) {
        const int span = trial % 2 ? 3 : 12;  // narrow: cancellation and ties; wide: magnitudes apart
        for (int i = 0; i < 16 * 32; i++) { a[i] = rand_bf16(span); b[i] = rand_bf16(span); }
        for (int i = 0; i < 256; i++) { c0[i] = c[i] = bf((uint16_t)rand_bf16(span)) * (1.0f + (float)(next32() % 1000) / 997.0f); }
        tdp(c, a, b);
        for (int m = 0; m < 16; m++) {
            for (int n = 0; n < 16; n++) {
                total++;
                for (int k = 0; k < NMODELS; k++) {
                    const float want = model(k, c0[m * 16 + n], a + m * 32, b, n);
                    if (memcmp(&want, &c[m * 16 + n], 4) != 0) { mismatch[k]++; }
                }
            }
        }
    }
    printf("TDPBF16PS on %ld random elements (16 pairs each), mismatches per candidate formula:\n", total);
    for (int k = 0; k < NMODELS; k++) { printf("  %-15s %ld\n", model_names[k], mismatch[k]); }

    // single cases in element (0, 0), all else zero
    struct { const char *what; float c; float a0, a1, b0, b1; } cases[] = {
        {"1 + (2^-30 [k]) + (-1 [k+1]): 2^-30 if k+1 is added first or the pair fused, 0 if k first", 1.0f, 0x1p-15f, 1.0f, 0x1p-15f, -1.0f},
        {"2^-30 + (1 [k]) + (-1 [k+1]): 0 with two roundings, 2^-30 with the pair fused", 0x1p-30f, 1.0f, 1.0f, 1.0f, -1.0f},
        {"0 + 2^-70 * 2^-70 (a denormal product, 2^-140): 0 if flushed", 0.0f, 0x1p-70f, 0.0f, 0x1p-70f, 0.0f},
        {"0 + 2^-130 (a denormal bf16 input) * 2^10: 0 if inputs are flushed (DAZ)", 0.0f, 0x1p-130f, 0.0f, 0x1p10f, 0.0f},
        {"2^-130 (a denormal accumulator) + 0: 0 if the accumulator is flushed", 0x1p-130f, 0.0f, 0.0f, 0.0f, 0.0f},
        {"2^-125 + (-1.5 * 2^-126) (a denormal sum, 2^-127): 0 if the result is flushed", 0x1p-125f, -1.5f, 0.0f, 0x1p-126f, 0.0f},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memset(a, 0, sizeof(a));
        memset(b, 0, sizeof(b));
        memset(c, 0, sizeof(c));
        a[0] = (uint16_t)(gemm_bf16_bits(cases[i].a0) >> 16);
        a[1] = (uint16_t)(gemm_bf16_bits(cases[i].a1) >> 16);
        b[0] = (uint16_t)(gemm_bf16_bits(cases[i].b0) >> 16);
        b[1] = (uint16_t)(gemm_bf16_bits(cases[i].b1) >> 16);
        if (cases[i].a0 == 0x1p-130f) { a[0] = 0x0008; }  // the bf16 denormal 2^-130, by its bits
        if (cases[i].b0 == 0x1p-126f) { b[0] = 0x0080; }  // 2^-126, the smallest normal
        c[0] = cases[i].c;
        tdp(c, a, b);
        printf("  case: %-90s -> %a\n", cases[i].what, c[0]);
    }
}

// The AMX GEMM path against the emulated one on GPT-2's forward shapes: bits equal or not.
static void gemm_vs_emulated(void) {
    const int shapes[][3] = {{256, 2304, 768}, {256, 768, 3072}, {87, 171, 57}};
    matmul_set_precision(PRECISION_BF16);
    for (int s = 0; s < 3; s++) {
        const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *a = make_random((size_t)M * K, 1), *b = make_random((size_t)K * N, 2);
        float *c1 = malloc_or_die((size_t)M * N * 4, "c"), *c2 = malloc_or_die((size_t)M * N * 4, "c");
        precision_force_bf16_path(BF16_PATH_AMX);
        gemm(M, N, K, a, K, 1, b, N, 1, c1, N, NULL);
        precision_force_bf16_path(BF16_PATH_EMULATED);
        gemm(M, N, K, a, K, 1, b, N, 1, c2, N, NULL);
        long differ = 0;
        double worst = 0.0;
        for (size_t i = 0; i < (size_t)M * N; i++) {
            if (memcmp(&c1[i], &c2[i], 4) != 0) {
                differ++;
                const double d = fabs((double)c1[i] - c2[i]) / (fabs((double)c2[i]) + 1e-30);
                if (d > worst) { worst = d; }
            }
        }
        printf("GEMM M=%d N=%d K=%d: AMX vs emulated path: %ld of %d results differ, largest relative difference %.3g\n",
               M, N, K, differ, M * N, worst);
        free(a); free(b); free(c1); free(c2);
    }
}

int main(void) {
    if (!gemm_amx_available()) {
        printf("skip  AMX checks: this CPU (or OS) has no AMX-TILE/AMX-BF16, or Linux refused the tile state\n");
        return 0;
    }
    numerics();
    gemm_vs_emulated();
    return 0;
}
#else
int main(void) {
    printf("skip  AMX checks: not built for AMX (needs GCC 10+ or clang on x86-64, without GEMM_AMX_EMULATE)\n");
    return 0;
}
#endif
