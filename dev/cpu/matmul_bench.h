/*
What matmul_forward.c and matmul_backward.c share: the shapes, timing with a time budget,
and OpenBLAS (the yardstick, linked in dev/ only) set to our thread count.
*/
#pragma once

#include <cblas.h>
#include "common.h"
#include "llmc/adamw.h"  // bf16_round_floats
#include "llmc/gemm.h"
#include "llmc/matmul.h"

typedef struct {
    const char *name;  // for the tables
    int BT, C, OC;
    const char *id;    // one word, for the command line (amx_bench SHAPE; matmul_torch.py has the same)
} matmul_shape;

// The first MATMUL_GPT2_SHAPES are GPT-2 124M's (C = 768) at B=4: a layer's four at T=64, the
// same at T=1024, and the LM head for a 256-row chunk. Then d6 (C = 384) at B=4, T=64, and odd
// sizes that exercise every edge of the tiling.
static const matmul_shape matmul_shapes[] = {
    {"qkv       T=64", 256, 768, 2304, "qkv_T64"},
    {"attn proj T=64", 256, 768, 768, "attnproj_T64"},
    {"fc        T=64", 256, 768, 3072, "fc_T64"},
    {"fc proj   T=64", 256, 3072, 768, "fcproj_T64"},
    {"qkv       T=1024", 4096, 768, 2304, "qkv_T1024"},
    {"attn proj T=1024", 4096, 768, 768, "attnproj_T1024"},
    {"fc        T=1024", 4096, 768, 3072, "fc_T1024"},
    {"fc proj   T=1024", 4096, 3072, 768, "fcproj_T1024"},
    {"lm head   256 rows", 256, 768, 50304, "lmhead_256rows"},
    {"d6 qkv    T=64", 256, 384, 1152, "d6_qkv_T64"},
    {"d6 proj   T=64", 256, 384, 384, "d6_attnproj_T64"},
    {"d6 fc     T=64", 256, 384, 1536, "d6_fc_T64"},
    {"d6 fcproj T=64", 256, 1536, 384, "d6_fcproj_T64"},
    {"odd", 87, 57, 171, "odd1"},
    {"odd", 1, 1, 1, "odd2"},
    {"odd", 1, 768, 2304, "odd3"},
    {"odd", 255, 1, 17, "odd4"},
    {"odd", 13, 1000, 1, "odd5"},
};
#define MATMUL_NSHAPES ((int)(sizeof(matmul_shapes) / sizeof(matmul_shapes[0])))
#define MATMUL_GPT2_SHAPES 9

// One of a linear layer's three products on a shape, called as train_gpt2 calls it (llmc/matmul.h),
// each overwriting its output, without bias: MATMUL_FWD out (BT, OC) = inp (BT, C) . weight^T,
// MATMUL_DINP dinp (BT, C) = dout (BT, OC) . weight (OC, C), MATMUL_DW dweight (OC, C) = dout^T . inp.
// In bf16 the weight comes from its bf16 copy (weight16), as the model keeps it between steps.
enum { MATMUL_FWD, MATMUL_DINP, MATMUL_DW };
static const char *const matmul_product_names[3] = {"fwd", "dinp", "dw"};
typedef struct {
    int prod, BT, C, OC;
    float *inp, *weight, *dout, *out, *dinp, *dweight;
    uint16_t *weight16;  // NULL in fp32
    uint16_t *dout16;    // where not NULL, the backward products read dout as these bf16 bits
                         // (matmul_backward_bf16_dout, the classifier's dlogits in bf16 training)
} matmul_product;

static matmul_product matmul_product_alloc(const matmul_shape *sh, int bf16) {
    const int BT = sh->BT, C = sh->C, OC = sh->OC;
    matmul_product r = {MATMUL_FWD, BT, C, OC, make_random((size_t)BT * C, 1), make_random((size_t)OC * C, 2),
                        make_random((size_t)BT * OC, 3), make_random((size_t)BT * OC, 4), make_random((size_t)BT * C, 5),
                        make_random((size_t)OC * C, 6), NULL, NULL};
    if (bf16) {
        r.weight16 = aligned_alloc_or_die((size_t)OC * C * sizeof(uint16_t), "the weight's bf16 copy");
        bf16_round_floats(r.weight16, r.weight, (size_t)OC * C);
    }
    return r;
}

static void matmul_product_free(matmul_product *r) {
    free(r->inp), free(r->weight), free(r->dout), free(r->out), free(r->dinp), free(r->dweight), free(r->weight16), free(r->dout16);
}

static void matmul_product_run(void *p) {
    const matmul_product *r = p;
    if (r->prod == MATMUL_FWD) { matmul_forward(r->out, r->inp, r->weight, r->weight16, NULL, r->BT, r->C, r->OC); }
    if (r->dout16 != NULL && r->prod != MATMUL_FWD) {
        const int dinp = r->prod == MATMUL_DINP;
        matmul_backward_bf16_dout(dinp ? r->dinp : NULL, dinp ? NULL : r->dweight, r->dout16, r->OC, r->inp, r->weight,
                                  r->weight16, NULL, r->BT, r->C, r->OC, MATMUL_OVERWRITE_DINP | MATMUL_OVERWRITE_DWEIGHT, NULL);
        return;
    }
    if (r->prod == MATMUL_DINP) {
        matmul_backward_ex(r->dinp, NULL, NULL, r->dout, r->inp, r->weight, r->weight16, NULL, r->BT, r->C, r->OC,
                           MATMUL_OVERWRITE_DINP, NULL);
    }
    if (r->prod == MATMUL_DW) {
        matmul_backward_ex(NULL, r->dweight, NULL, r->dout, r->inp, r->weight, r->weight16, NULL, r->BT, r->C, r->OC,
                           MATMUL_OVERWRITE_DWEIGHT, NULL);
    }
}

// The product's GEMM sizes: C (M x N) = A (M x K) B (K x N).
static void matmul_product_dims(const matmul_product *r, int *M, int *N, int *K) {
    *M = r->prod == MATMUL_DW ? r->OC : r->BT;
    *N = r->prod == MATMUL_FWD ? r->OC : r->C;
    *K = r->prod == MATMUL_FWD ? r->C : (r->prod == MATMUL_DINP ? r->OC : r->BT);
}

// Best (minimum) ms of fn(ctx) over as many runs as fit in about budget_ms (at least 3, at
// most 31), after a warm-up run. The best, not the median: on a machine shared with other
// work, the fastest run is the one least disturbed, for us and OpenBLAS alike.
static double bench_ms(void (*fn)(void *), void *ctx, double budget_ms) {
    double t0 = now_seconds();
    fn(ctx);
    double once = (now_seconds() - t0) * 1e3;
    int reps = (int)(budget_ms / (once > 1e-3 ? once : 1e-3));
    return time_best_ms(fn, ctx, reps < 3 ? 3 : reps > 31 ? 31 : reps);
}

// Two builds' contexts a and b timed in `rounds` alternating rounds (at most 64) of about budget_ms
// each, as gemm_ab and attention_ab do: *best_a and *best_b get each one's best ms; returns the
// median over the rounds of a's ms over b's in the same round (> 1: b faster). Which goes first
// alternates from round to round: with a always first, two identical builds on a Zen 3 VM
// (2026-12-07) gave b 6% slower on the geometric mean of the 27 products.
static double bench_ab(void (*fn)(void *), void *a, void *b, int rounds, double budget_ms, double *best_a,
                       double *best_b) {
    double ratio[64];
    *best_a = *best_b = INFINITY;
    for (int r = 0; r < rounds && r < 64; r++) {
        double ta, tb;
        if (r % 2 == 0) {
            ta = bench_ms(fn, a, budget_ms);
            tb = bench_ms(fn, b, budget_ms);
        } else {
            tb = bench_ms(fn, b, budget_ms);
            ta = bench_ms(fn, a, budget_ms);
        }
        *best_a = fmin(*best_a, ta);
        *best_b = fmin(*best_b, tb);
        ratio[r] = ta / tb;
    }
    return median_of(ratio, rounds < 64 ? rounds : 64);
}

// Ours (the last version) and OpenBLAS are timed in MATMUL_ROUNDS alternating rounds. Each
// keeps its best time (its GFLOP/s), and the ratio is the median over the rounds of OpenBLAS's
// time over ours in the same round: this VM's neighbours slow everything down for seconds at
// a time, and a round's pair sees the same conditions, so a slow phase spoils neither.
#ifndef MATMUL_ROUNDS
#define MATMUL_ROUNDS 5
#endif

static void settle(void);

// The rounds after the first (ours timed first, then the library): *ms_ours and *ms_blas hold
// the first round's times and get the best over all rounds; returns the median of the rounds'
// ratios (OpenBLAS ms / ours). ours and blas are the contexts fn runs. The odd rounds time the
// library first, as bench_ab alternates.
static double bench_more_rounds(void (*fn)(void *), void *ours, void *blas, double budget_ms,
                                double *ms_ours, double *ms_blas) {
    double ratio[MATMUL_ROUNDS];
    ratio[0] = *ms_blas / *ms_ours;
    for (int r = 1; r < MATMUL_ROUNDS; r++) {
        double t_ours, t_blas;
        if (r % 2 == 0) {
            settle();
            t_ours = bench_ms(fn, ours, budget_ms);
            settle();
            t_blas = bench_ms(fn, blas, budget_ms);
        } else {
            settle();
            t_blas = bench_ms(fn, blas, budget_ms);
            settle();
            t_ours = bench_ms(fn, ours, budget_ms);
        }
        if (t_ours < *ms_ours) { *ms_ours = t_ours; }
        if (t_blas < *ms_blas) { *ms_blas = t_blas; }
        ratio[r] = t_blas / t_ours;
    }
    return median_of(ratio, MATMUL_ROUNDS);
}

static double gflops(double flops, double ms) { return flops / (ms * 1e6); }

// Both libraries keep their idle threads spinning after a call (libgomp for a few ms, OpenBLAS's
// pthreads for up to 2^28 cycles, 0.1 s), which steals a core from the other's timed calls:
// the harness waits that out whenever it switches between ours and OpenBLAS.
static void settle(void) {
    struct timespec ts = {0, 250 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

// Version 1, the reference, is slow: on shapes above REF_FULL_FLOPS it computes only the first
// and last REF_ROWS rows of an output whose rows are independent (forward, to input), which
// are the values it would give on all rows, and is not timed there.
#define REF_ROWS 32
#define REF_FULL_FLOPS 2e9

static int ref_all_rows(int rows, double flops) { return flops <= REF_FULL_FLOPS || rows <= 2 * REF_ROWS; }

// check_close on all rows of a (rows, cols) output, or on the first and last REF_ROWS.
static int check_rows(const char *what, const float *got, const float *ref, int rows, int cols, int all) {
    if (all) { return check_close(what, got, ref, (size_t)rows * cols, 1e-5); }
    const size_t n = (size_t)REF_ROWS * cols, tail = (size_t)(rows - REF_ROWS) * cols;
    return check_close(what, got, ref, n, 1e-5) & check_close(what, got + tail, ref + tail, n, 1e-5);
}

// The command line, [VERSION] (1..n_versions), returned (0: all); then OpenBLAS runs with as
// many threads as our OpenMP kernels, and our packing buffers are allocated up front, as the
// trainer does at startup.
static int matmul_bench_start(int argc, char **argv, int n_versions) {
    int only = 0;
    if (argc > 1) {
        only = atoi(argv[1]);
        if (only < 1 || only > n_versions) { die("version must be 1..%d, got '%s'", n_versions, argv[1]); }
    }
    openblas_set_num_threads(omp_get_max_threads());
    gemm_init();
    printf("threads: %d (OpenMP and OpenBLAS); OpenBLAS %s, core %s\n", omp_get_max_threads(),
           openblas_get_config(), openblas_get_corename());
    printf("times: best of 3 to 31 runs (about 0.4 s) after a warm-up, in %d alternating rounds of ours and\n"
           "OpenBLAS; GFLOP/s from each one's best round, ratio = median of the rounds' OpenBLAS ms / ours\n",
           MATMUL_ROUNDS);
    return only;
}
