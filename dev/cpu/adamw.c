/*
The passes over all parameters in an optimizer step (llmc/adamw.h): AdamW, the
gradients' sum of squares (for the norm) and zeroing the gradients.

  ./adamw [VERSION]

Kernels and versions:
  adamw_update     params, m, v updated from grads
    1  the simple code: scalar (GCC does not vectorize it: sqrtf sets errno)
    2  vectorized, sqrtf lane by lane (exact, but scalar square roots)
    3  llmc/adamw.h: vectorized, vec_sqrt (the vector square root: version 2's bits)
    4  llmc/adamw.h with the bf16 copy of the parameters written in the same pass (the bf16
       step's AdamW: 2 more bytes a parameter, by non-temporal stores unless built with
       -DADAMW_STREAM_BF16=0); the copy is checked against the rounded parameters
    5  the same with the copy rounded by vcvtneps2bf16 (vec_bf16_bits_ftz: the vdpbf16ps and AMX
       paths' AdamW) where the build has AVX512_BF16, else as version 4; checked the same way,
       and both copies on special values: denormals (version 5: a zero of their sign), the
       largest floats, infinities, NaNs, ties
    6  llmc/adamw.h's adamw_update_rows: version 5 a pair of rows at a time (the array as a matrix of
       768 columns; the smaller sizes 999 rows of 1001, an odd count of a width no panel divides,
       and one row), each pair's bits also interleaved into the GEMM's panels
       (gemm_put_b_pair: gpt2.h's weight panels on AMX); the copy checked as version 5's, the
       panels against packing the copy whole (gemm_pack_b_whole). Where the run's bf16 kernel has
       no pair-word panels (no AVX512_BF16), as version 5
  sum_of_squares   sum of g^2 over the gradients, in double (gpt2_grad_norm)
    1  the simple code of gpt2_grad_norm: 64 parts, a double running sum each
    2  llmc/adamw.h: the same 64 parts, blocks of 1024 in float vectors into a double
  zero             grads = 0 (gpt2_zero_grad, for the tensors the backward adds to)
    1  memset, one thread
    2  llmc/adamw.h zero_floats: all threads, non-temporal stores of whole lines

n = 124,475,904 floats (GPT-2 124M's parameters with Vp = 50304), and an odd 1,000,003.
Bytes per call: AdamW reads params, grads, m, v and writes params, m, v: 7 n floats (7.5 with
the bf16 copy, 8 with the panels too);
sum of squares reads n; zeroing writes n.
*/
#include "common.h"
#include "llmc/adamw.h"
#include "llmc/gemm.h"              // gemm_put_b_pair, gemm_pack_b_whole: version 6's panels
#include "llmc/gemm_kernel_bf16.h"  // gemm_bf16_bits: the rounding the copy must match

// 1: the simple code, as it was in llmc/adamw.h.
static void adamw_update1(float *params, const float *grads, float *m, float *v, size_t n, float lr,
                          float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
    const float bias_correction1 = 1.0f - powf(beta1, (float)t);
    const float sqrt_bias_correction2 = sqrtf(1.0f - powf(beta2, (float)t));
    const float step_size = lr / bias_correction1;
    const float decay = 1.0f - lr * weight_decay;
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) {
        float g = grads[i] * grad_scale;
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        params[i] = params[i] * decay - step_size * mi / (sqrtf(vi) / sqrt_bias_correction2 + eps);
    }
}

// 2: vectorized, with the exact sqrtf of each lane (v >= 0, so no errno path is taken).
static void adamw_update2(float *params, const float *grads, float *m, float *v, size_t n, float lr,
                          float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
    const float bias_correction1 = 1.0f - powf(beta1, (float)t);
    const float sqrt_bias_correction2 = sqrtf(1.0f - powf(beta2, (float)t));
    const float step_size = lr / bias_correction1;
    const float decay = 1.0f - lr * weight_decay;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i += VEC_WIDTH) {
        const int k = n - i < VEC_WIDTH ? (int)(n - i) : VEC_WIDTH;
        const vfloat g = vec_load_partial(grads + i, k) * grad_scale;
        const vfloat mi = beta1 * vec_load_partial(m + i, k) + (1.0f - beta1) * g;
        const vfloat vi = beta2 * vec_load_partial(v + i, k) + (1.0f - beta2) * g * g;
        vec_store_partial(m + i, mi, k);
        vec_store_partial(v + i, vi, k);
        vfloat root;
        for (int l = 0; l < VEC_WIDTH; l++) { root[l] = vi[l] >= 0.0f ? sqrtf(vi[l]) : 0.0f; }
        const vfloat p = vec_load_partial(params + i, k);
        vec_store_partial(params + i, p * decay - step_size * mi / (root / sqrt_bias_correction2 + eps), k);
    }
}

// 1: the simple code of gpt2_grad_norm (squared).
static double sum_of_squares1(const float *x, size_t n) {
    enum { PARTS = 64 };
    double partial[PARTS];
    #pragma omp parallel for
    for (int p = 0; p < PARTS; p++) {
        size_t i0 = n * p / PARTS, i1 = n * (p + 1) / PARTS;
        double s = 0.0;
        for (size_t i = i0; i < i1; i++) { s += (double)x[i] * x[i]; }
        partial[p] = s;
    }
    double total = 0.0;
    for (int p = 0; p < PARTS; p++) { total += partial[p]; }
    return total;
}

typedef struct {
    float *params, *m, *v, *sum, *zeroed;
    const float *grads;
    size_t n;
    uint16_t *params16;  // version 4's bf16 copy
    float *panels;       // version 6's panels (NULL where the kernel has no pair-word panels)
    int rows, cols;      // version 6's matrix
} Args;

#define ADAMW_ARGS(a) a->params, a->grads, a->m, a->v, a->n, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f, 3
static void adamw1(void *p) { Args *a = p; adamw_update1(ADAMW_ARGS(a)); }
static void adamw2(void *p) { Args *a = p; adamw_update2(ADAMW_ARGS(a)); }
static void adamw3(void *p) { Args *a = p; adamw_update(ADAMW_ARGS(a)); }
static void adamw4(void *p) {
    Args *a = p;
    adamw_update_ex(a->params, a->params16, 0, a->grads, a->m, a->v, a->n, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f, 3);
}
static void adamw5(void *p) {
    Args *a = p;
    adamw_update_ex(a->params, a->params16, 1, a->grads, a->m, a->v, a->n, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f, 3);
}
static void put_pair(void *ctx, int pair, int c0, int n, const uint16_t *lo, const uint16_t *hi) {
    const Args *a = ctx;
    gemm_put_b_pair(gemm_kernel_current(), a->rows, a->cols, a->panels, pair, c0, n, lo, hi);
}
static void adamw6(void *p) {
    Args *a = p;
    if (a->panels == NULL) { adamw5(p); return; }
    const adamw_pair_sink sink = {put_pair, a};
    adamw_update_rows(a->params, a->params16, 1, a->grads, a->m, a->v, (size_t)a->rows, (size_t)a->cols, &sink, 6e-4f, 0.9f,
                      0.95f, 1e-8f, 0.1f, 0.7f, 3);
}
// 1 if version 6's panels are not the copy packed whole
static int panels_wrong(const Args *a) {
    if (a->panels == NULL) { return 0; }
    const size_t words = gemm_packed_b_words(a->rows, a->cols);
    float *ref = aligned_alloc_or_die(words * sizeof(float), "panels");
    gemm_pack_b_whole(a->rows, a->cols, a->params16, a->cols, 1, ref);
    const int wrong = memcmp(ref, a->panels, words * sizeof(float)) != 0;
    free(ref);
    return wrong;
}

// The bf16 bits the copy should hold for x: the GEMM packing's rounding (gemm_bf16_bits); with ftz
// (version 5 on a build with the conversion instruction) a denormal becomes a zero of its sign.
static uint16_t expected_bf16(float x, int ftz) {
    uint32_t w;
    memcpy(&w, &x, 4);
    if (ftz && VEC_HAVE_BF16_CVT && (w & 0x7f800000u) == 0) { return (uint16_t)((w >> 16) & 0x8000u); }
    return (uint16_t)(gemm_bf16_bits(x) >> 16);
}
// 1 if the bf16 copy is not its parameters' expected bits
static int params16_wrong(const Args *a, int ftz) {
    for (size_t i = 0; i < a->n; i++) {
        if (a->params16[i] != expected_bf16(a->params[i], ftz)) { return 1; }
    }
    return 0;
}
// The copies of versions 4 and 5 on special values, the update a no-op (lr 0, m = v = grads = 0):
// the number of wrong words.
static int special_values_wrong(void) {
    static const uint32_t bits[] = {0x00000001u, 0x007fffffu, 0x80400000u, 0x00008000u, 0x00800000u, 0x80800000u,
                                    0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00001u, 0x7f800001u,
                                    0xffa00000u, 0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x00000000u, 0x80000000u,
                                    // NaNs that the rounding's carry would turn into zeros if not told apart
                                    0x7fffffffu, 0xffffffffu, 0x7fff8000u};
    enum { VALUES = sizeof(bits) / sizeof(bits[0]), N = (VALUES / VEC_WIDTH + 2) * VEC_WIDTH + 3 };  // whole vectors and a tail
    float params[N], grads[N] = {0}, m[N] = {0}, v[N] = {0};
    uint16_t copy[N] __attribute__((aligned(64)));
    int wrong = 0;
    for (int ftz = 0; ftz <= 1; ftz++) {
        for (int i = 0; i < N; i++) { memcpy(&params[i], &bits[i % VALUES], 4); }
        adamw_update_ex(params, copy, ftz, grads, m, v, N, 0.0f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, 1);
        for (int i = 0; i < N; i++) {
            uint32_t w;  // the input's bits, a signaling NaN quieted by the update's arithmetic
            memcpy(&w, &params[i], 4);
            if (copy[i] != expected_bf16(params[i], ftz)) {
                printf("  special values, version %d: %08x gave %04x, expected %04x\n", 4 + ftz, w, copy[i], expected_bf16(params[i], ftz));
                wrong++;
            }
        }
    }
    return wrong;
}
static void sumsq1(void *p) { Args *a = p; a->sum[0] = (float)sum_of_squares1(a->grads, a->n); }
static void sumsq2(void *p) { Args *a = p; a->sum[0] = (float)sum_of_squares(a->grads, a->n); }
static void zero1(void *p) { Args *a = p; memset(a->zeroed, 0, a->n * sizeof(float)); }
static void zero2(void *p) { Args *a = p; zero_floats(a->zeroed, a->n); }

typedef struct { const char *kernel; void (*fn[6])(void *); const char *what[6]; double floats; } Kernel;
static const Kernel KERNELS[] = {
    {"adamw_update", {adamw1, adamw2, adamw3, adamw4, adamw5, adamw6},
     {"simple", "vectorized, sqrtf per lane", "llmc: vectorized, vec_sqrt", "llmc: and the bf16 copy",
      VEC_HAVE_BF16_CVT ? "llmc: the copy by vcvtneps2bf16" : "llmc: the copy (no vcvtneps2bf16: as 4)",
      "llmc: rows, the copy and the weight panels"}, 7},
    {"sum_of_squares", {sumsq1, sumsq2}, {"simple (double running sums)", "llmc: float vector blocks into double"}, 1},
    {"zero", {zero1, zero2}, {"memset", "llmc: parallel, non-temporal stores"}, 1},
};

int main(int argc, char **argv) {
    const int only = version_arg(argc, argv);
    // n and version 6's matrix columns: GPT-2 124M's parameters as rows of 768 (pairs of rows), an
    // odd count of rows (the last alone) of a width no panel or vector divides, and one row
    const size_t sizes[][2] = {{124475904, 768}, {999 * 1001, 1001}, {1000003, 1000003}};
    printf("adamw: %d threads, VEC_WIDTH %d\n", omp_get_max_threads(), VEC_WIDTH);
    precision_set(PRECISION_BF16);  // version 6's panels: the fastest bf16 kernel's
    const int panels = gemm_kernel_pair_panels(gemm_kernel_current());
    printf("version 6's panels: %s\n", panels ? gemm_kernel_current()->name : "none (this bf16 kernel has no pair-word panels)");
    int fails = special_values_wrong();
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        const size_t n = sizes[s][0], cols = sizes[s][1];
        char shape[32];
        snprintf(shape, sizeof(shape), "n=%zu", n);
        float *params0 = make_random(n, 1), *grads = make_random(n, 2), *m0 = make_random(n, 3), *v0 = make_random(n, 4);
        for (size_t i = 0; i < n; i++) { v0[i] = v0[i] * v0[i] * 1e-4f; m0[i] *= 1e-2f; grads[i] *= 1e-2f; }
        for (size_t i = 0; i < n; i += 1000) { v0[i] = 0.0f; m0[i] = 0.0f; }  // as in the padded rows of wte
        Args a = {aligned_alloc_or_die(n * 4, "params"), aligned_alloc_or_die(n * 4, "m"),
                  aligned_alloc_or_die(n * 4, "v"), aligned_alloc_or_die(4, "sum"), aligned_alloc_or_die(n * 4, "zeroed"),
                  grads, n, aligned_alloc_or_die(n * 2, "params16"), NULL, (int)(n / cols), (int)cols};
        if (panels) { a.panels = aligned_alloc_or_die(gemm_packed_b_words(a.rows, a.cols) * sizeof(float), "panels"); }
        for (size_t k = 0; k < sizeof(KERNELS) / sizeof(KERNELS[0]); k++) {
            const Kernel *K = &KERNELS[k];
            Outputs o = {0};
            if (k == 0) {
                outputs_add(&o, "params", a.params, params0, n);
                outputs_add(&o, "m", a.m, m0, n);
                outputs_add(&o, "v", a.v, v0, n);
            } else if (k == 1) {
                outputs_add(&o, "sum", a.sum, NULL, 1);
            } else {
                outputs_add(&o, "zeroed", a.zeroed, params0, n);
            }
            for (int v = 1; v <= 6 && K->fn[v - 1] != NULL; v++) {
                if (v == 1 || only == 0 || only == v) {
                    char what[96];
                    snprintf(what, sizeof(what), "%s: %s", K->kernel, K->what[v - 1]);
                    fails += !run_version(shape, v, what, K->fn[v - 1], &a, &o, (K->floats + (k == 0 && v >= 4) * 0.5 + (k == 0 && v == 6 && panels) * 0.5) * n * sizeof(float),
                                          1e-6, only == 0 || only == v);
                    if (k == 0 && v == 6 && panels_wrong(&a)) {
                        printf("  %s: version 6's panels are not its bf16 copy packed whole\n", shape);
                        fails++;
                    }
                    if (k == 0 && v >= 4 && params16_wrong(&a, v >= 5)) {
                        printf("  %s: version %d's bf16 copy is not its parameters rounded\n", shape, v);
                        fails++;
                    }
                }
            }
            outputs_free(&o);
        }
        free(a.params); free(a.m); free(a.v); free(a.sum); free(a.zeroed); free(a.params16); free(a.panels);
        free(params0); free(grads); free(m0); free(v0);
    }
    printf("%s\n", fails ? "FAIL" : "OK: every version matches version 1");
    return fails ? 1 : 0;
}
