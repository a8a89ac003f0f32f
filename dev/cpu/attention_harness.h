/*
What both attention harnesses (attention_forward.c, attention_backward.c) share: the shapes
they check and time, their command line, in bf16 the kernel's two paths and the check
that allows rounding flips, and the steps of their loops over shapes and versions.
*/
#pragma once

#include <cblas.h>
#include "common.h"
#include "llmc/attention.h"

// amp scales the random qkv: larger amp, sharper softmax rows.
static const struct { int B, T, C, NH; float amp; const char *what; } shapes[] = {
    {4, 64, 768, 12, 1.0f, "GPT-2 124M, T=64"},
    {4, 1024, 768, 12, 1.0f, "GPT-2 124M, T=1024"},
    {4, 256, 384, 6, 1.0f, "d6"},
    {3, 29, 57, 3, 1.0f, "odd, hs=19"},
    {2, 1, 64, 2, 1.0f, "T=1"},
    {1, 100, 40, 4, 4.0f, "hs=10, sharp softmax"},
    {2, 130, 200, 8, 3.0f, "hs=25, T past two blocks"},
    {1, 300, 96, 1, 1.0f, "B*NH=1, hs=96"},
    {1, 70, 256, 2, 1.0f, "hs=128, largest supported"},
};

// --check skips shapes longer than this: their version 1 takes seconds.
#define ATTN_CHECK_MAX_T 512

// The command line of both harnesses: [--precision fp32|bf16] [--check] [VERSION]
//   VERSION           that version only (else all), still checked against version 1
//   --precision bf16  the bf16 versions
//   --check           checks only: no timing, no shape over T=512 (scripts/tests/test_dev.sh)
// Every version also runs twice on the same input and must give the same bits.
// Threads: OMP_NUM_THREADS (default: all cores); version 2 runs single-threaded sgemm calls
// from each OpenMP thread.
typedef struct {
    Precision precision;
    int check_only;  // --check: correctness only, no timing, shapes up to ATTN_CHECK_MAX_T
    int version;     // 0: all
    int n_versions;  // of the precision asked for
} attn_options;

// n_fp32 and n_bf16: the versions of each precision.
static attn_options attn_parse_args(int argc, char **argv, int n_fp32, int n_bf16) {
    attn_options o = {PRECISION_FP32, 0, 0, 0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--precision") == 0 && i + 1 < argc &&
            (strcmp(argv[i + 1], "fp32") == 0 || strcmp(argv[i + 1], "bf16") == 0)) {
            o.precision = strcmp(argv[++i], "bf16") == 0 ? PRECISION_BF16 : PRECISION_FP32;
        } else if (strcmp(argv[i], "--check") == 0) {
            o.check_only = 1;
        } else if (o.version == 0 && atoi(argv[i]) >= 1) {
            o.version = atoi(argv[i]);
        } else {
            o.version = -1;
            break;
        }
    }
    o.n_versions = o.precision == PRECISION_BF16 ? n_bf16 : n_fp32;
    if (o.version < 0 || o.version > o.n_versions) {
        die("usage: %s [--precision fp32|bf16] [--check] [version: 1..%d in fp32, 1..%d in bf16]", argv[0], n_fp32,
            n_bf16);
    }
    return o;
}

// ----------------------------------------------------------------------------
// version 2 of both harnesses: the probabilities materialized, the PyTorch way

// P (T,T) of head h of batch element b as PyTorch's forward makes it: S = scale Q K^T with
// sgemm, then softmax rows over the keys j <= t (zeros after); head_lse (T), unless NULL, gets
// each row's log-sum-exp. The forward's version 2 goes on to O = P V; the backward's reads P.
static void attn_materialize_head(float *att, float *head_lse, const float *qkv, int b, int h, int T, int C,
                                  int NH) {
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    const float *q = qkv + (size_t)b * T * 3 * C + h * hs;  // rows 3C apart, keys C after
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, 3 * C, q + C, 3 * C, 0.0f, att, T);
    for (int t = 0; t < T; t++) {
        float *row = att + (size_t)t * T;
        float m = -INFINITY, l = 0.0f;
        for (int j = 0; j <= t; j++) { m = row[j] > m ? row[j] : m; }
        for (int j = 0; j <= t; j++) { row[j] = expf(row[j] - m); l += row[j]; }
        for (int j = 0; j <= t; j++) { row[j] /= l; }
        for (int j = t + 1; j < T; j++) { row[j] = 0.0f; }
        if (head_lse != NULL) { head_lse[t] = m + logf(l); }
    }
}

// ----------------------------------------------------------------------------
// bf16

// The llmc kernel's bf16 paths as versions: BF16_PATH_EMULATED forces fp32 FMAs on the pairs (what
// LLMC_BF16_EMULATE=1 asks for), BF16_PATH_AVX512BF16 vdpbf16ps, BF16_PATH_AMX AMX tiles. Returns 0
// (with the reason in *why) when the path cannot run here.
static int attn_bf16_select_path(Bf16Path path, const char **why) {
    if (path == BF16_PATH_AVX512BF16) {
        if (!ATTN_HAVE_BF16_NATIVE) { *why = "not built for it (needs AVX512_BF16 and 16-lane vectors)"; return 0; }
        if (!gemm_bf16_native_available()) { *why = "this CPU has no AVX512_BF16"; return 0; }
    }
    if (path == BF16_PATH_AMX) {
        if (!ATTN_HAVE_AMX) { *why = "not built for it (needs GCC 10+ on x86-64 and 8- or 16-lane vectors)"; return 0; }
        if (!gemm_amx_available()) { *why = "this CPU (or Linux) gives no AMX tiles"; return 0; }
    }
    if (path != BF16_PATH_EMULATED && gemm_bf16_emulate_requested()) { *why = "LLMC_BF16_EMULATE=1"; return 0; }
    if (!precision_force_bf16_path(path)) { die("bf16 path %s not available", bf16_path_name(path)); }
    const attn_arith want = path == BF16_PATH_AMX ? ATTN_BF16_AMX : path == BF16_PATH_AVX512BF16 ? ATTN_BF16_NATIVE
                                                                                            : ATTN_BF16_EMULATED;
    if (attn_current_arith() != want) { die("bf16 path not selected"); }
    return 1;
}

// bf16 rounding flips. The kernel and version 1 round the same P and dS to bf16, but the
// kernel's fp32 values differ from version 1's float64 ones by a few fp32 ulps, and where the
// two straddle a bf16 rounding boundary they round to neighbours one bf16 ulp (2^-8 to 2^-7
// of the value) apart, which moves every output the value feeds by that ulp times the other
// operand. Version 1 knows where: for each P and dS it takes the bf16 roundings of its value
// plus and minus a bound on the kernel's fp32 error (attn_bf16_flip: 0 unless a boundary lies
// within the bound), and adds that difference times |the other operand| to each output's
// slack. An output then passes if it is within the fp32 tolerance of version 1 plus its slack.
//
// The bound, ATTN_FP32_ERR per unit of the magnitudes that went into the value: 64 fp32 ulps
// (2^-24), where the kernel's sums of hs <= 128 products err by about sqrt(hs) <= 12 ulps of
// the sum of their magnitudes, exp by one ulp of its result, the exponent score - m (or - lse)
// by an ulp of its terms. Too small a bound fails correct kernels: they pass down to 2^-26
// (forward) and 2^-24 (backward), a margin of 64 (dev/cpu/README.md).
#define ATTN_FP32_ERR 0x1p-18

// How far apart the bf16 roundings (through fp32, as the spec's round_bf16) of two values within
// err of x can be: the difference of the roundings of x + err and x - err (rounding is monotonic).
static double attn_bf16_flip(double x, double err) {
    return (double)gemm_bf16_round((float)(x + err)) - (double)gemm_bf16_round((float)(x - err));
}

typedef struct {
    double err;   // max |got - ref| / max |ref|
    size_t over;  // elements off by more than tol * max |ref| (rounding flips, within their slack)
    size_t fail;  // elements off by more than tol * max |ref| + their slack (or NaN)
    size_t n;
} attn_error;

// got against ref over rows x width elements (rows ld apart; slack likewise, or NULL for none):
// each within tol of the largest |ref| among them plus its slack?
static attn_error attn_error_of(const float *got, const float *ref, const float *slack, size_t rows, size_t width,
                                size_t ld, double tol) {
    double max_err = 0.0, max_ref = 0.0;
    for (size_t r = 0; r < rows; r++) {
        for (size_t i = 0; i < width; i++) { max_ref = fmax(max_ref, fabs(ref[r * ld + i])); }
    }
    const double scale = max_ref > 0 ? max_ref : 1.0;
    attn_error e = {0.0, 0, 0, rows * width};
    for (size_t r = 0; r < rows; r++) {
        for (size_t i = 0; i < width; i++) {
            const size_t at = r * ld + i;
            const double d = fabs((double)got[at] - (double)ref[at]);
            if (!(d <= max_err)) { max_err = d; }  // NaN sticks
            if (!(d <= tol * scale)) { e.over++; }
            if (!(d <= tol * scale + (slack != NULL ? slack[at] : 0.0))) { e.fail++; }
        }
    }
    e.err = max_err / scale;
    return e;
}

// ----------------------------------------------------------------------------
// the harnesses' loops: over the shapes, then over the versions of the precision asked for

// A table of versions has an unused [0], so that v numbers them as the command line does.
#define N_VERSIONS(table) ((int)(sizeof(table) / sizeof(table[0])) - 1)

// Before the loops: OpenBLAS single-threaded (version 2 calls sgemm from each OpenMP thread),
// the kernels' arithmetic at the precision asked for (each version 1 has its own), and the
// run's first line. pass: "forward" or "backward".
static void attn_harness_start(const char *pass, const attn_options *o) {
    openblas_set_num_threads(1);
    precision_set(o->precision);
    printf("attention %s, %s, %d threads, vector width %d floats\n", pass,
           o->precision == PRECISION_BF16 ? "bf16" : "fp32", omp_get_max_threads(), ATTN_VW);
}

// Whether this run covers shapes[s]: --check skips those longer than ATTN_CHECK_MAX_T.
static int attn_shape_runs(const attn_options *o, size_t s) {
    return !o->check_only || shapes[s].T <= ATTN_CHECK_MAX_T;
}

// The FLOPs counted on shapes[s], n_products matrix products over the causal half
// (2*B*NH*hs*T(T+1)/2 each), after printing the shape's line.
static double attn_shape_begin(size_t s, int n_products) {
    const int B = shapes[s].B, T = shapes[s].T, C = shapes[s].C, NH = shapes[s].NH, hs = C / NH;
    const double flops = n_products * 2.0 * B * NH * hs * (double)T * (T + 1) / 2.0;
    printf("B=%d T=%d C=%d NH=%d (hs=%d) %s: %.3f GFLOP\n", B, T, C, NH, hs, shapes[s].what, flops * 1e-9);
    return flops;
}

// The random qkv (B,T,3C) of shapes[s], scaled by its amp.
static float *attn_random_qkv(size_t s) {
    const size_t n = (size_t)shapes[s].B * shapes[s].T * 3 * shapes[s].C;
    float *qkv = make_random(n, 1 + s);
    for (size_t i = 0; i < n; i++) { qkv[i] *= shapes[s].amp; }
    return qkv;
}

// Whether version v runs: all do unless one was asked for, and in bf16 the kernel's versions
// only on a path this build and CPU have (else its line says why it is skipped).
// path: in bf16, the kernel's path (attn_bf16_select_path) for versions 2 and up.
static int attn_version_runs(const attn_options *o, int v, const char *name, Bf16Path path) {
    if (o->version && v != o->version) { return 0; }
    const char *why = "";
    if (o->precision == PRECISION_BF16 && v >= 2 && !attn_bf16_select_path(path, &why)) {
        printf("  %d %-28s skipped: %s\n", v, name, why);
        return 0;
    }
    return 1;
}

// The kernel on vdpbf16ps must give the emulated path's bits (AMX tiles sum otherwise, and are
// checked against version 1 only): whether version v is that one, attn_call_emulated to run it
// again (call(ctx)) on the emulated path, and attn_paths_agree to say whether the bits were the same.
static int attn_is_vdpbf16ps(const attn_options *o, int v, Bf16Path path) {
    return o->precision == PRECISION_BF16 && v >= 2 && path == BF16_PATH_AVX512BF16;
}

static void attn_call_emulated(void (*call)(void *), void *ctx) {
    const char *why;
    attn_bf16_select_path(BF16_PATH_EMULATED, &why);
    call(ctx);
    attn_bf16_select_path(BF16_PATH_AVX512BF16, &why);
}

static int attn_paths_agree(int same_bits) {
    if (!same_bits) { printf("  MISMATCH: vdpbf16ps and the emulated path differ\n"); }
    return same_bits;
}

// The end of version v on a shape: timed (best ms of call(ctx) in about half a second)
// unless --check, and its line: time, errs (the errors, as the harness words them), OK or
// FAIL, NONDETERMINISTIC unless a second run gave the same bits, and in bf16 the elements
// off by rounding flips within their slack. Returns 1 if the version failed.
static int attn_version_end(const attn_options *o, int v, const char *name, void (*call)(void *), void *ctx,
                            double flops, const char *errs, int ok, int same, size_t flips) {
    char timing[64] = "  (not timed)";
    if (!o->check_only) {
        const double ms = time_budget_ms(call, ctx, 500.0);
        snprintf(timing, sizeof(timing), "%10.3f ms %8.2f GFLOP/s", ms, flops / (ms * 1e-3) * 1e-9);
    }
    printf("  %d %-28s %s   %s %s%s", v, name, timing, errs, ok ? "OK" : "FAIL", same ? "" : " NONDETERMINISTIC");
    if (o->precision == PRECISION_BF16 && ok && flips > 0) { printf(" (%zu rounding flips)", flips); }
    printf("\n");
    return !ok || !same;
}

// After the loops: the verdict, and main's exit status.
static int attn_harness_end(int failures) {
    if (failures) { printf("%d FAILURES\n", failures); return 1; }
    printf("all OK\n");
    return 0;
}
