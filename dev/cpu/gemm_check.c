/*
Correctness of llmc/gemm.h and llmc/matmul.h against float64 references, for whichever
micro-kernel variant this is compiled with (-DVEC_WIDTH=16|8|4, default: the target's).
No OpenBLAS, no timing: scripts/tests/test_gemm.sh builds it for every variant (the AVX-512 one
too, on any x86-64) and runs it in CI.

  ./gemm_check          prints one line per check group and "N passed, N failed"; exit 1 on a failure
  ./gemm_check bf16     the bf16 checks only
  ./gemm_check --path   prints the bf16 path the dispatcher picks (LLMC_BF16_PATH forces one)
  ./gemm_check --nested calls gemm inside a parallel region of 2 threads: must die with one line

Checked: every shape class (1, below/at/above the tile and block sizes, odd), transposed and
strided operands, every epilogue (addend separate or in place, bias, GELU with and without the
pre-activation, K = 0), the matmul.h wrappers and backward flags, GELU accuracy, and
bit-identical results across runs and thread counts 1 to 4. All of it again in bf16
(references on the bf16-rounded operands, same fp32 bounds) on every bf16 path this CPU has
(AMX tiles, vdpbf16ps, emulated; a -DGEMM_AMX_EMULATE build runs the AMX path's packing and
loops on a C model of the tiles); the rounding itself; and where the CPU has AVX512_BF16, the
instruction's order of adds and the vdpbf16ps and emulated paths giving identical bits.
*/
#include "common.h"
#include <float.h>
#include "llmc/matmul.h"

static int n_passed = 0, n_failed = 0;

// bf16 checks: the references take the GEMM operands rounded to bf16 by bf16_ref (written
// independently of gemm_kernel_bf16.h: through frexp and nearbyint) and everything else in
// float64, so the only error left is the fp32 summation's and the fp32 bounds apply as they are.
static int bf16_mode = 0;
static const char *mode_name = "fp32";

// x rounded to the nearest bf16 (8 significant bits), ties to even; NaN, inf and 0 as they are.
static double bf16_ref(float x) {
    if (!isfinite(x) || x == 0.0f) { return x; }
    int e;
    const double m = frexp(x, &e);           // x = m 2^e, 0.5 <= |m| < 1
    return ldexp(nearbyint(ldexp(m, 8)), e - 8);  // default rounding: to nearest, ties to even
}

// A GEMM operand as the kernel multiplies it.
static double op(float x) { return bf16_mode ? bf16_ref(x) : (double)x; }

// op of each of x's n floats, rounded once rather than once per product in the references
// (bf16_ref per product made the bf16 checks 20x slower than the fp32 ones).
static double *ops(const float *x, size_t n) {
    double *r = malloc_or_die(n * sizeof(double), "reference operand");
    for (size_t i = 0; i < n; i++) { r[i] = op(x[i]); }
    return r;
}

static void set_threads(int n) {
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;  // built without OpenMP: always one thread
#endif
}

static void report(const char *what, int ok, const char *detail) {
    if (ok) {
        n_passed++;
        printf("ok    %s\n", what);
    } else {
        n_failed++;
        printf("FAIL  %s: %s\n", what, detail);
    }
}

// 0.5 x (1 + tanh(u)) written as x / (1 + exp(-2u)): in float64 too, 1 + tanh(u) cancels to
// nothing for x below about -6, where the true value is still a normal float.
static double gelu64(double x) { return x / (1.0 + exp(-2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x))); }

// One gemm problem: operands with arbitrary strides, C with ldc >= N, every epilogue option.
typedef struct {
    int M, N, K;
    int trans_a, trans_b;  // 1: A stored (K, M) / B stored (N, K)
    int addend;            // 0: none, 1: separate matrix, 2: C itself (accumulate)
    int bias, gelu, pre;
} problem;

// Runs p with `threads` threads and leaves C in c_out (M x ldc) and the pre-activation in
// pre_out. With check: returns the max error over the error bound (<= 1 passes).
static double run_problem(const problem *p, int threads, float *c_out, float *pre_out, int check) {
    const int M = p->M, N = p->N, K = p->K, ldc = N + 3;
    const ptrdiff_t lda = (p->trans_a ? M : K) + 1, ldb = (p->trans_b ? K : N) + 2;
    const size_t na = (size_t)(p->trans_a ? K : M) * lda + 1, nb = (size_t)(p->trans_b ? N : K) * ldb + 1;
    float *a = make_random(na, 11), *b = make_random(nb, 12);
    double *a64 = check ? ops(a, na) : NULL, *b64 = check ? ops(b, nb) : NULL;
    float *addend = make_random((size_t)M * ldc, 13), *bias = make_random(N, 14);
    float *c = c_out, *pre = pre_out;
    fill_random(c, (size_t)M * ldc, 15);
    fill_random(pre, (size_t)M * ldc, 16);
    float *c_init = malloc_or_die(sizeof(float) * M * ldc, "c copy");
    memcpy(c_init, c, sizeof(float) * M * ldc);
    if (p->addend == 2) { memcpy(addend, c, sizeof(float) * M * ldc); }
    const ptrdiff_t rs_a = p->trans_a ? 1 : lda, cs_a = p->trans_a ? lda : 1;
    const ptrdiff_t rs_b = p->trans_b ? 1 : ldb, cs_b = p->trans_b ? ldb : 1;
    gemm_epilogue ep = {0};
    if (p->addend == 1) { ep.addend = addend; ep.ld_addend = ldc; }
    if (p->addend == 2) { ep.addend = c; ep.ld_addend = ldc; }
    ep.bias = p->bias ? bias : NULL;
    ep.gelu = p->gelu;
    if (p->pre) { ep.pre = pre; ep.ld_pre = ldc; }
    set_threads(threads);
    gemm(M, N, K, a, rs_a, cs_a, b, rs_b, cs_b, c, ldc, &ep);
    double worst = 0.0;
    for (int i = 0; i < (check ? M : 0); i++) {
        for (int j = 0; j < N; j++) {
            double sum = 0.0, mag = 0.0;
            for (int k = 0; k < K; k++) {
                double t = a64[i * rs_a + k * cs_a] * b64[k * rs_b + j * cs_b];
                sum += t;
                mag += fabs(t);
            }
            if (p->addend) { sum += addend[(size_t)i * ldc + j]; mag += fabs(addend[(size_t)i * ldc + j]); }
            if (p->bias) { sum += bias[j]; mag += fabs(bias[j]); }
            // fp32 sums of K + 2 terms: |error| <= (K + 2) u * sum of |terms|, u = 2^-24
            double bound = (K + 2) * 0x1p-24 * mag + 1e-30;
            double got = c[(size_t)i * ldc + j], want = sum;
            if (p->gelu) {
                if (p->pre) {
                    double e = fabs(pre[(size_t)i * ldc + j] - sum) / bound;
                    if (!(e <= worst)) { worst = e; }
                }
                // GELU's slope is within [-0.17, 1.13]; its own evaluation adds a few ulp
                want = gelu64(sum);
                bound = 1.13 * bound + 8 * 0x1p-24 * fabs(want) + 1e-37;
            }
            double e = fabs(got - want) / bound;
            if (!(e <= worst)) { worst = e; }  // NaN counts as a failure
        }
    }
    if (p->pre == 0) {  // pre must be untouched
        float *pre_ref = make_random((size_t)M * ldc, 16);
        if (memcmp(pre, pre_ref, sizeof(float) * M * ldc) != 0) { worst = INFINITY; }
        free(pre_ref);
    }
    for (int i = 0; i < M; i++) {  // the padding columns of C must be untouched
        for (int j = N; j < ldc; j++) {
            if (c[(size_t)i * ldc + j] != c_init[(size_t)i * ldc + j]) { worst = INFINITY; }
        }
    }
    free(a); free(b); free(a64); free(b64); free(addend); free(bias); free(c_init);
    return worst;
}

static void check_problems(void) {
    // sizes around the tile and block edges of every variant, and the model's own small sizes
    const int sizes[] = {1, 2, 5, 6, 7, 12, 13, 16, 17, 31, 33, 64, 97, 145, 200, 257};
    const int nsizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
    uint64_t s = 7;
    char name[200], detail[200];
    int fails = 0, count = 0;
    double worst_all = 0.0;
    for (int trial = 0; trial < 300; trial++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        problem p = {sizes[s % nsizes], sizes[(s >> 8) % nsizes], sizes[(s >> 16) % nsizes], (s >> 24) & 1,
                     (s >> 25) & 1, (s >> 26) % 3, (s >> 28) & 1, (s >> 29) & 1, (s >> 30) & 1};
        if (trial % 10 == 0) { p.K = 0; }
        if (trial % 7 == 0) { p.K = 2 * GEMM_BF16_KCP + 1 + (int)(s >> 40) % 500; }  // several k blocks (bf16's too)
        if (trial % 11 == 0) { p.N = 600 + (int)(s >> 40) % 300; p.M = 1 + (int)(s >> 50) % 40; }
        float *c = malloc_or_die(sizeof(float) * p.M * (p.N + 3), "c");
        float *pre = malloc_or_die(sizeof(float) * p.M * (p.N + 3), "pre");
        double e = run_problem(&p, 1 + trial % 4, c, pre, 1);
        count++;
        if (e > worst_all) { worst_all = e; }
        if (!(e <= 1.0)) {
            if (fails++ < 5) {
                snprintf(name, sizeof(name), "%s gemm M=%d N=%d K=%d transA=%d transB=%d addend=%d bias=%d gelu=%d pre=%d",
                         mode_name, p.M, p.N, p.K, p.trans_a, p.trans_b, p.addend, p.bias, p.gelu, p.pre);
                snprintf(detail, sizeof(detail), "error %.3g x the bound", e);
                report(name, 0, detail);
            }
        }
        free(c); free(pre);
    }
    // A packed once: for all the threads of a grid row, N split among 2 and 4 threads (gemm.h,
    // gemm_shared_a): A in two row blocks, each thread's columns in several blocks, several k
    // blocks (the smallest such problems: their float64 references cost as much as all the random
    // ones); and by a thread for all of its B blocks (gemm_thread_a): one thread with more columns
    // than any kernel's B block, and two splitting M with more than AMX's 1024 columns each
    static const struct { problem p; int threads; const char *what; } packed_once[] = {
        {{300, 600, 2 * GEMM_BF16_KCP + 6, 0, 1, 1, 1, 0, 0}, 2, "A packed once for the threads of a grid row"},
        {{300, 600, 2 * GEMM_BF16_KCP + 7, 1, 0, 2, 0, 1, 1}, 4, "A packed once for the threads of a grid row"},
        {{40, 4200, 2 * GEMM_BF16_KCP + 7, 0, 1, 1, 1, 0, 0}, 1, "A packed once by a thread for its B blocks"},
        {{1216, 1060, 100, 1, 0, 2, 0, 1, 1}, 2, "A packed once by each thread for its B blocks"},
    };
    for (size_t i = 0; i < sizeof(packed_once) / sizeof(packed_once[0]); i++) {
        const problem p = packed_once[i].p;
        float *c = malloc_or_die(sizeof(float) * p.M * (p.N + 3), "c");
        float *pre = malloc_or_die(sizeof(float) * p.M * (p.N + 3), "pre");
        double e = run_problem(&p, packed_once[i].threads, c, pre, 1);
        count++;
        if (e > worst_all) { worst_all = e; }
        if (!(e <= 1.0)) {
            if (fails++ < 5) {
                snprintf(name, sizeof(name), "%s gemm M=%d N=%d K=%d, %d threads: error %.3g x the bound", mode_name, p.M,
                         p.N, p.K, packed_once[i].threads, e);
                report(name, 0, packed_once[i].what);
            }
        }
        free(c); free(pre);
    }
    snprintf(name, sizeof(name), "%s gemm: %d random problems within the fp32 error bound (worst %.3f of it)",
             mode_name, count, worst_all);
    report(name, fails == 0, "see above");
}

// Same inputs, 1..4 threads (grids 1 x n, n x 1 and 2 x 2) and repeated runs: identical bits.
static void check_determinism(void) {
    const problem shapes[] = {
        {256, 768, 320, 0, 1, 0, 1, 0, 0},   // forward
        {128, 768, 600, 0, 0, 2, 0, 0, 0},   // to input, accumulating
        {768, 384, 64, 1, 0, 2, 0, 0, 0},    // to weight
        {100, 1000, 300, 0, 1, 1, 1, 1, 1},  // GELU epilogue
        {87, 171, 57, 1, 1, 1, 1, 0, 0},
        {300, 600, 390, 0, 1, 0, 1, 0, 0},  // N split, A packed once for the threads (2, 3 or 4)
        {40, 4200, 200, 0, 1, 0, 1, 0, 0},  // more columns than a B block: A packed once by each thread
    };
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        const problem *p = &shapes[i];
        const size_t n = (size_t)p->M * (p->N + 3);
        float *c1 = malloc_or_die(n * sizeof(float), "c"), *pre1 = malloc_or_die(n * sizeof(float), "pre");
        float *c2 = malloc_or_die(n * sizeof(float), "c"), *pre2 = malloc_or_die(n * sizeof(float), "pre");
        run_problem(p, 1, c1, pre1, 0);
        int same = 1;
        for (int t = 1; t <= 4; t++) {
            for (int rep = 0; rep < 2; rep++) {
                run_problem(p, t, c2, pre2, 0);
                same &= memcmp(c1, c2, n * sizeof(float)) == 0 && memcmp(pre1, pre2, n * sizeof(float)) == 0;
            }
        }
        char name[160];
        snprintf(name, sizeof(name), "%s bit-identical over runs and 1..4 threads: M=%d N=%d K=%d", mode_name, p->M,
                 p->N, p->K);
        report(name, same, "outputs differ");
        free(c1); free(pre1); free(c2); free(pre2);
    }
}

// The on_final hook (gemm.h): every element of C told of once, and when told, already its
// final value (a snapshot taken then equals C after the call); whole rows in one run where a
// thread's share is whole rows. Shapes with several k blocks, with N split among the threads
// (M too small to split), with ldc > N, accumulating into C; 1..4 threads.
typedef struct {
    const float *c;
    float *snapshot;
    unsigned char *told;  // times each element was told of (2 and more: told twice)
    int runs;
} final_log;
static void log_final_run(void *ctx, float *run, size_t n) {
    final_log *log = ctx;
    const size_t at = (size_t)(run - log->c);
    memcpy(log->snapshot + at, run, n * sizeof(float));
    for (size_t i = 0; i < n; i++) { log->told[at + i] += log->told[at + i] < 255; }
    #pragma omp atomic
    log->runs++;
}
static void check_final_hook(void) {
    const struct { int M, N, K, pad; } shapes[] = {
        {768, 384, 1600, 0},  // whole rows (M split), several k blocks
        {10, 2000, 700, 0},   // too few row tiles for 3 or 4 threads: N split, parts of rows
        {300, 257, 900, 5},   // ldc > N: a row's part each
        {50304 / 64, 768, 256, 0},
    };
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        const int M = shapes[i].M, N = shapes[i].N, K = shapes[i].K, ldc = N + shapes[i].pad;
        float *a = make_random((size_t)M * K, 21), *b = make_random((size_t)K * N, 22);
        float *c = malloc_or_die((size_t)M * ldc * sizeof(float), "c");
        final_log log = {c, malloc_or_die((size_t)M * ldc * sizeof(float), "snapshot"), malloc_or_die((size_t)M * ldc, "told"), 0};
        int ok = 1, whole = 1;
        for (int t = 1; t <= 4; t++) {
            fill_random(c, (size_t)M * ldc, 23);
            memset(log.snapshot, 0, (size_t)M * ldc * sizeof(float));
            memset(log.told, 0, (size_t)M * ldc);
            log.runs = 0;
            const gemm_epilogue ep = {.addend = c, .ld_addend = ldc, .on_final = {log_final_run, &log}};
            set_threads(t);
            gemm(M, N, K, a, K, 1, b, N, 1, c, ldc, &ep);
            for (int r = 0; r < M; r++) {
                for (int j = 0; j < ldc; j++) {
                    const size_t e = (size_t)r * ldc + j;
                    const int want = j < N;  // the padding past N: never told of
                    ok &= log.told[e] == want && (!want || memcmp(&log.snapshot[e], &c[e], sizeof(float)) == 0);
                }
            }
            // one thread has whole rows: a run per row block, not per row (when ldc = N)
            if (t == 1 && ldc == N) { whole &= log.runs < M; }
        }
        char name[160];
        snprintf(name, sizeof(name), "%s on_final hook: each element told of once, final when told, 1..4 threads: M=%d N=%d K=%d ldc=%d",
                 mode_name, M, N, K, ldc);
        report(name, ok && whole, ok ? "one thread told of each row apart" : "an element told of twice, never, or before its final value");
        free(a); free(b); free(c); free(log.snapshot); free(log.told);
    }
}

// The wrappers in matmul.h against float64, on a GPT-2-like and an odd shape.
static void check_matmul_wrappers(int BT, int C, int OC) {
    set_threads(2);
    const size_t n_in = (size_t)BT * C, n_out = (size_t)BT * OC, n_w = (size_t)OC * C;
    float *inp = make_random(n_in, 21), *w = make_random(n_w, 22), *bias = make_random(OC, 23);
    float *dout = make_random(n_out, 24), *res = make_random(n_out, 25);
    float *out = make_random(n_out, 26), *pre = make_random(n_out, 27);
    float *dinp = make_random(n_in, 28), *dw = make_random(n_w, 29), *db = make_random(OC, 30);
    float *dinp0 = make_random(n_in, 28), *dw0 = make_random(n_w, 29), *db0 = make_random(OC, 30);
    double *inp64 = ops(inp, n_in), *w64 = ops(w, n_w), *dout64 = ops(dout, n_out);
    double *fwd = malloc_or_die(n_out * sizeof(double), "ref"), *fwd_mag = malloc_or_die(n_out * sizeof(double), "ref");
    for (int i = 0; i < BT; i++) {
        for (int o = 0; o < OC; o++) {
            double s = bias[o], m = fabs(bias[o]);
            for (int c = 0; c < C; c++) {
                double t = inp64[(size_t)i * C + c] * w64[(size_t)o * C + c];
                s += t;
                m += fabs(t);
            }
            fwd[(size_t)i * OC + o] = s;
            fwd_mag[(size_t)i * OC + o] = m;
        }
    }
    const double u = 0x1p-24;
    char name[160];
    double worst;
    #define WORST(count, got, want, bound) do { worst = 0.0; for (size_t q = 0; q < (count); q++) { \
        double e_ = fabs((double)(got) - (want)) / ((bound) + 1e-30); if (!(e_ <= worst)) { worst = e_; } } } while (0)

    matmul_forward(out, inp, w, NULL, bias, BT, C, OC);
    WORST(n_out, out[q], fwd[q], (C + 2) * u * fwd_mag[q]);
    snprintf(name, sizeof(name), "%s matmul_forward BT=%d C=%d OC=%d", mode_name, BT, C, OC);
    report(name, worst <= 1.0, "beyond the fp32 error bound");

    matmul_forward_residual(out, res, inp, w, NULL, bias, BT, C, OC);
    WORST(n_out, out[q], fwd[q] + res[q], (C + 3) * u * (fwd_mag[q] + fabs(res[q])));
    snprintf(name, sizeof(name), "%s matmul_forward_residual BT=%d C=%d OC=%d", mode_name, BT, C, OC);
    report(name, worst <= 1.0, "beyond the fp32 error bound");

    memcpy(out, res, n_out * sizeof(float));
    matmul_forward_residual(out, out, inp, w, NULL, bias, BT, C, OC);
    WORST(n_out, out[q], fwd[q] + res[q], (C + 3) * u * (fwd_mag[q] + fabs(res[q])));
    snprintf(name, sizeof(name), "%s matmul_forward_residual in place BT=%d C=%d OC=%d", mode_name, BT, C, OC);
    report(name, worst <= 1.0, "beyond the fp32 error bound");

    matmul_forward_gelu(out, pre, inp, w, NULL, bias, BT, C, OC);
    WORST(n_out, out[q], gelu64(fwd[q]), 1.13 * (C + 2) * u * fwd_mag[q] + 8 * u * fabs(gelu64(fwd[q])));
    double worst_gelu = worst;
    WORST(n_out, pre[q], fwd[q], (C + 2) * u * fwd_mag[q]);
    snprintf(name, sizeof(name), "%s matmul_forward_gelu BT=%d C=%d OC=%d", mode_name, BT, C, OC);
    report(name, worst <= 1.0 && worst_gelu <= 1.0, "beyond the fp32 error bound");

    float *out2 = make_random(n_out, 31);
    matmul_forward_gelu(out2, NULL, inp, w, NULL, bias, BT, C, OC);
    snprintf(name, sizeof(name), "%s matmul_forward_gelu without pre BT=%d C=%d OC=%d", mode_name, BT, C, OC);
    report(name, memcmp(out, out2, n_out * sizeof(float)) == 0, "differs from the run that stores pre");

    // backward, accumulating: dinp0/dw0/db0 keep the starting values
    matmul_backward(dinp, dw, db, dout, inp, w, BT, C, OC);
    for (int pass = 0; pass < 2; pass++) {  // pass 0: accumulated, pass 1: overwritten
        double w_in = 0.0, w_w = 0.0, w_b = 0.0;
        for (int i = 0; i < BT; i++) {
            for (int c = 0; c < C; c++) {
                double s = pass ? 0.0 : dinp0[(size_t)i * C + c], m = fabs(s);
                for (int o = 0; o < OC; o++) {
                    double t = dout64[(size_t)i * OC + o] * w64[(size_t)o * C + c];
                    s += t;
                    m += fabs(t);
                }
                double e = fabs(dinp[(size_t)i * C + c] - s) / ((OC + 2) * u * m + 1e-30);
                if (!(e <= w_in)) { w_in = e; }
            }
        }
        for (int o = 0; o < OC; o++) {
            double sb = pass ? 0.0 : db0[o], mb = fabs(sb);
            for (int i = 0; i < BT; i++) { sb += dout[(size_t)i * OC + o]; mb += fabs(dout[(size_t)i * OC + o]); }
            double e = fabs(db[o] - sb) / ((BT + 2) * u * mb + 1e-30);
            if (!(e <= w_b)) { w_b = e; }
            for (int c = 0; c < C; c++) {
                double s = pass ? 0.0 : dw0[(size_t)o * C + c], m = fabs(s);
                for (int i = 0; i < BT; i++) {
                    double t = dout64[(size_t)i * OC + o] * inp64[(size_t)i * C + c];
                    s += t;
                    m += fabs(t);
                }
                double e2 = fabs(dw[(size_t)o * C + c] - s) / ((BT + 2) * u * m + 1e-30);
                if (!(e2 <= w_w)) { w_w = e2; }
            }
        }
        snprintf(name, sizeof(name), "%s matmul_backward%s BT=%d C=%d OC=%d: dinp, dweight, dbias", mode_name,
                 pass ? "_ex overwriting" : " accumulating", BT, C, OC);
        report(name, w_in <= 1.0 && w_w <= 1.0 && w_b <= 1.0, "beyond the fp32 error bound");
        if (pass == 0) {
            fill_random(dinp, n_in, 99);
            fill_random(dw, n_w, 98);
            fill_random(db, OC, 97);
            matmul_backward_ex(dinp, dw, db, dout, inp, w, NULL, NULL, BT, C, OC,
                               MATMUL_OVERWRITE_DINP | MATMUL_OVERWRITE_DWEIGHT | MATMUL_OVERWRITE_DBIAS, NULL);
        }
    }
    // NULL outputs are skipped
    memcpy(dw0, dw, n_w * sizeof(float));
    matmul_backward(dinp, NULL, NULL, dout, inp, w, BT, C, OC);
    matmul_backward(NULL, NULL, db, dout, inp, w, BT, C, OC);
    snprintf(name, sizeof(name), "%s matmul_backward with NULL outputs BT=%d C=%d OC=%d", mode_name, BT, C, OC);
    report(name, memcmp(dw0, dw, n_w * sizeof(float)) == 0, "dweight changed");
    #undef WORST
    free(inp); free(w); free(bias); free(dout); free(res); free(out); free(out2); free(pre);
    free(dinp); free(dw); free(db); free(dinp0); free(dw0); free(db0); free(fwd); free(fwd_mag);
    free(inp64); free(w64); free(dout64);
}

// gelu_vec (gelu.h, the GELU epilogue) against float64 on a dense sweep. Allowed: 8 ulp, plus where x is very negative
// the conditioning of exp at -2u (an ulp of the fp32 argument moves exp by |2u| ulp), and
// 1e-37 absolute (values near FLT_MIN, where exp(-2u) overflows).
static void check_gelu(void) {
    double worst = 0.0, worst_x = 0.0;
    for (int i = -2000000; i <= 2000000; i += GEMM_VEC) {
        gemm_vf x;
        for (int l = 0; l < GEMM_VEC; l++) { x[l] = (float)((i + l) * 1e-5); }
        gemm_vf y = gelu_vec(x);
        for (int l = 0; l < GEMM_VEC; l++) {
            double want = gelu64(x[l]), two_u = fabs(2.0 * 0.7978845608028654 * (x[l] + 0.044715 * x[l] * x[l] * x[l]));
            double e = fabs(y[l] - want) / ((8.0 + 4.0 * two_u) * 0x1p-24 * fabs(want) + 1e-37);
            if (!(e <= worst)) { worst = e; worst_x = x[l]; }
        }
    }
    char name[160];
    snprintf(name, sizeof(name), "gelu_vec on [-20, 20]: worst %.2f of (8 + 4|2u|) ulp (at x = %.5g)", worst, worst_x);
    report(name, worst <= 1.0, "beyond the bound");
    gemm_vf big = (gemm_vf){0} + 1e30f, small = (gemm_vf){0} - 1e30f, nan = (gemm_vf){0} + NAN;
    big = gelu_vec(big);
    small = gelu_vec(small);
    nan = gelu_vec(nan);
    report("gelu_vec at +-1e30 and NaN", big[0] == 1e30f && small[0] == 0.0f && isnan(nan[0]),
           "wrong limits");
}

// gemm_bf16_round against bf16_ref: a million random normal floats (every exponent), the exact
// ties (half way between two bf16: to even), +-inf, NaN, and rounding past the largest bf16.
static void check_bf16_rounding(void) {
    uint64_t s = 99;
    int bad = 0;
    float bad_x = 0.0f;
    for (int i = 0; i < 1100000; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        uint32_t u = (uint32_t)(s >> 16);
        if (i >= 1000000) { u = (u & 0xffff0000u) | 0x8000u; }  // exact ties
        float x;
        memcpy(&x, &u, sizeof(x));
        if (!isnormal(x)) { continue; }  // subnormals: not compared (see gemm_kernel_bf16.h)
        const float got = gemm_bf16_round(x), want = (float)bf16_ref(x);
        if (memcmp(&got, &want, sizeof(got)) != 0) { bad++; bad_x = x; }
    }
    const float big = gemm_bf16_round(FLT_MAX), inf = gemm_bf16_round(INFINITY), ninf = gemm_bf16_round(-INFINITY);
    const float nan = gemm_bf16_round(NAN), one_tie = gemm_bf16_round(1.0f + 0x1p-8f), one_up = gemm_bf16_round(1.0f + 0x1.8p-8f);
    char detail[120];
    snprintf(detail, sizeof(detail), "%d values differ from the float64 rounding, e.g. %.9g", bad, bad_x);
    report("bf16 rounding: nearest-even on 1.1M floats, ties", bad == 0, detail);
    report("bf16 rounding: inf, NaN, FLT_MAX -> inf, 1 + 2^-8 -> 1, 1 + 1.5 2^-8 -> 1 + 2^-7",
           big == INFINITY && inf == INFINITY && ninf == -INFINITY && isnan(nan) && one_tie == 1.0f &&
               one_up == 1.0f + 0x1p-7f,
           "wrong special values");
}

#if GEMM_HAVE_BF16_KERNEL
// Lane 0 of vdpbf16ps: acc + (a_lo, a_hi) . (b_lo, b_hi) as the instruction computes it.
GEMM_BF16_TARGET
static float dpbf16_lane(float acc, float a_lo, float a_hi, float b_lo, float b_hi) {
    const __m512bh a = (__m512bh)_mm512_set1_epi32((int)gemm_bf16_pair(a_lo, a_hi));
    const __m512bh b = (__m512bh)_mm512_set1_epi32((int)gemm_bf16_pair(b_lo, b_hi));
    return _mm512_cvtss_f32(_mm512_dpbf16_ps(_mm512_set1_ps(acc), a, b));
}

// What the emulated path does for one pair: k+1 first, then k, each an fp32 add of an exact product.
static float dpbf16_emulated(float acc, float a_lo, float a_hi, float b_lo, float b_hi) {
    volatile float t = acc + gemm_bf16_round(a_hi) * gemm_bf16_round(b_hi);
    return t + gemm_bf16_round(a_lo) * gemm_bf16_round(b_lo);
}

// The instruction's order, read off this CPU: 1 + (-1) + 2^-30 is 2^-30 when the odd element
// (k+1) goes first and 0 when k goes first; 2^-30 + 1 + (-1) is 0 with two roundings and
// 2^-30 with one. Then a million random lanes against the emulated formula.
static void check_dpbf16_semantics(void) {
    const float odd_first = dpbf16_lane(1.0f, 0x1p-15f, 1.0f, 0x1p-15f, -1.0f);
    const float two_roundings = dpbf16_lane(0x1p-30f, 1.0f, 1.0f, -1.0f, 1.0f);
    char detail[160];
    snprintf(detail, sizeof(detail), "1 + (-1) + 2^-30 gave %a (expected 0x1p-30); 2^-30 + 1 - 1 gave %a (expected 0)",
             odd_first, two_roundings);
    report("vdpbf16ps adds element 2i+1 first, then 2i, rounding each add", odd_first == 0x1p-30f && two_roundings == 0.0f,
           detail);
    uint64_t s = 5;
    int bad = 0;
    for (int i = 0; i < 1000000; i++) {
        float v[5];
        for (int j = 0; j < 5; j++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            v[j] = (float)(((s >> 40) * (1.0 / (1 << 23)) - 1.0) * ldexp(1.0, (int)(s >> 20) % 41 - 20));
        }
        const float got = dpbf16_lane(v[0], v[1], v[2], v[3], v[4]), want = dpbf16_emulated(v[0], v[1], v[2], v[3], v[4]);
        if (memcmp(&got, &want, sizeof(got)) != 0) { bad++; }
    }
    snprintf(detail, sizeof(detail), "%d of 1M lanes differ", bad);
    report("vdpbf16ps = two fp32 adds of exact products on 1M random lanes", bad == 0, detail);
}

// The native and emulated paths on the same problems (all epilogues, transposes, odd K, sizes
// from 1, several k blocks): identical bits.
static void check_native_vs_emulated(void) {
    const int sizes[] = {1, 2, 3, 7, 12, 13, 31, 32, 33, 64, 97, 200, 385};
    const int nsizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
    uint64_t s = 31;
    int differ = 0, count = 0;
    char first[160] = "";
    for (int trial = 0; trial < 120; trial++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        problem p = {sizes[s % nsizes], sizes[(s >> 8) % nsizes], sizes[(s >> 16) % nsizes], (s >> 24) & 1,
                     (s >> 25) & 1, (s >> 26) % 3, (s >> 28) & 1, (s >> 29) & 1, (s >> 30) & 1};
        if (trial % 5 == 0) { p.K = 2 * GEMM_BF16_KCP + 1 + (int)(s >> 40) % 700; }  // several k blocks, odd and even
        const size_t n = (size_t)p.M * (p.N + 3);
        float *c1 = malloc_or_die(n * sizeof(float), "c"), *pre1 = malloc_or_die(n * sizeof(float), "pre");
        float *c2 = malloc_or_die(n * sizeof(float), "c"), *pre2 = malloc_or_die(n * sizeof(float), "pre");
        precision_force_bf16_path(BF16_PATH_AVX512BF16);
        run_problem(&p, 1 + trial % 2, c1, pre1, 0);
        precision_force_bf16_path(BF16_PATH_EMULATED);
        run_problem(&p, 1 + trial % 3, c2, pre2, 0);
        count++;
        if (memcmp(c1, c2, n * sizeof(float)) != 0 || memcmp(pre1, pre2, n * sizeof(float)) != 0) {
            if (differ++ == 0) {
                snprintf(first, sizeof(first), "first at M=%d N=%d K=%d transA=%d transB=%d addend=%d bias=%d gelu=%d",
                         p.M, p.N, p.K, p.trans_a, p.trans_b, p.addend, p.bias, p.gelu);
            }
        }
        free(c1); free(pre1); free(c2); free(pre2);
    }
    char name[160], detail[240];
    snprintf(name, sizeof(name), "bf16 native and emulated paths bit-identical on %d problems", count);
    snprintf(detail, sizeof(detail), "%d differ, %s", differ, first);
    report(name, differ == 0, detail);
}
#endif

// The AMX and emulated paths on the same problems: how many results differ, and by how many
// ulps at most. Reported, not checked: TDPBF16PS's sums are not the emulated path's (see
// llmc/gemm_kernel_amx.h); both are checked against float64 above.
static void compare_amx_emulated(void) {
    const int sizes[] = {1, 7, 31, 32, 33, 97, 200, 385};
    uint64_t s = 77;
    long differ = 0, total = 0;
    int max_ulp = 0;
    for (int trial = 0; trial < 40; trial++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        problem p = {sizes[s % 8], sizes[(s >> 8) % 8], sizes[(s >> 16) % 8], (s >> 24) & 1, (s >> 25) & 1, 0, 0, 0, 0};
        const size_t n = (size_t)p.M * (p.N + 3);
        float *c1 = malloc_or_die(n * sizeof(float), "c"), *pre1 = malloc_or_die(n * sizeof(float), "pre");
        float *c2 = malloc_or_die(n * sizeof(float), "c"), *pre2 = malloc_or_die(n * sizeof(float), "pre");
        precision_force_bf16_path(BF16_PATH_AMX);
        run_problem(&p, 2, c1, pre1, 0);
        precision_force_bf16_path(BF16_PATH_EMULATED);
        run_problem(&p, 2, c2, pre2, 0);
        for (size_t i = 0; i < n; i++) {
            int32_t u1, u2;
            memcpy(&u1, &c1[i], 4);
            memcpy(&u2, &c2[i], 4);
            total++;
            if (u1 != u2) {
                differ++;
                const int d = abs(u1 - u2);
                if ((u1 ^ u2) >= 0 && d > max_ulp) { max_ulp = d; }
            }
        }
        free(c1); free(pre1); free(c2); free(pre2);
    }
    printf("info  AMX vs emulated bf16 paths: %ld of %ld results differ, at most %d ulp (same sign)\n", differ, total,
           max_ulp);
}

static uint64_t xorshift(uint64_t *s) {
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return *s;
}

// An operand element from random bits r: mostly a value in [-1.3, 1.3], and once in special_every
// a NaN, -inf, a subnormal or a rounding tie (checks of the bf16 copies of A and B).
static float operand_with_specials(uint64_t r, uint64_t special_every) {
    switch ((r >> 40) % special_every) {
    case 0: return NAN;
    case 1: return -INFINITY;
    case 2: return 0x1p-130f * (float)((int)(r >> 20) % 97 - 48);  // subnormal
    case 3: return 1.0f + 0x1p-8f;                                 // a tie: to even (1)
    case 4: return 1.0f + 0x1.8p-8f;                               // a tie: to even (up)
    default: return (float)((int)(r % 200001) - 100000) / 77777.0f;
    }
}

// gemm_ex with B from its bf16 copy (gemm_bf16_bits of each float: what gpt2.h's AdamW writes)
// against gemm with the fp32 B, on the current bf16 path: the same bits, for B as it is and
// transposed (both of GPT-2's layouts: pairs along rows, and pairs across two rows), odd K,
// partial panels, several k blocks, an odd leading dimension (pairs at odd uint16 offsets),
// addend and bias, 1 to 4 threads; B holds NaN, inf, subnormals and rounding ties too. The same
// for B packed whole from the copy beforehand (gemm_pack_b_whole, gemm_ex_packed_b).
// Where a kernel has no pack_b16 the copy is ignored and B is read from fp32 (every bf16 kernel has one now).
static void check_b16_copy(void) {
    const int sizes[] = {1, 2, 3, 12, 13, 31, 32, 33, 64, 97, 200, 385};
    const int nsizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
    uint64_t s = 4242;
    int differ = 0, count = 0, differ_whole = 0, differ_put = 0, puts_count = 0;
    char first[200] = "", first_whole[200] = "", first_put[200] = "";
    for (int trial = 0; trial < 96; trial++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        const int M = sizes[s % nsizes], N = sizes[(s >> 8) % nsizes], trans_b = (int)((s >> 24) & 1);
        int K = sizes[(s >> 16) % nsizes];
        if (trial % 4 == 0) { K = 2 * GEMM_BF16_KCP + 1 + (int)(s >> 40) % 700; }  // several k blocks, odd and even
        const int pad = (int)((s >> 30) % 3), threads = 1 + trial % 4, epilogue = (int)((s >> 32) % 3);
        const ptrdiff_t ldb = (trans_b ? K : N) + pad;  // pad 1: rows start at odd offsets
        const ptrdiff_t rs_b = trans_b ? 1 : ldb, cs_b = trans_b ? ldb : 1;
        const size_t nb = (size_t)(trans_b ? N : K) * ldb;
        float *a = malloc_or_die((size_t)M * K * sizeof(float), "a"), *b = malloc_or_die(nb * sizeof(float), "b");
        uint16_t *b16 = malloc_or_die(nb * sizeof(uint16_t), "b16");
        float *add = malloc_or_die((size_t)M * N * sizeof(float), "addend"), *bias = malloc_or_die(N * sizeof(float), "bias");
        float *c1 = malloc_or_die((size_t)M * N * sizeof(float), "c"), *c2 = malloc_or_die((size_t)M * N * sizeof(float), "c");
        float *c3 = malloc_or_die((size_t)M * N * sizeof(float), "c");
        for (size_t i = 0; i < (size_t)M * K; i++) { a[i] = (float)((int)(xorshift(&s) % 2001) - 1000) / 997.0f; }
        // each special value about once in 64 elements, but once in 64 per 64 k's of a long K: a
        // NaN or -inf in every column of B would make every sum NaN, and NaN = NaN hides the rest
        const uint64_t special_every = 64 * (uint64_t)((K + 63) / 64);
        for (size_t i = 0; i < nb; i++) {
            b[i] = operand_with_specials(xorshift(&s), special_every);
            b16[i] = (uint16_t)(gemm_bf16_bits(b[i]) >> 16);
        }
        for (size_t i = 0; i < (size_t)M * N; i++) { add[i] = (float)i * 0.001f; }
        for (int j = 0; j < N; j++) { bias[j] = (float)j * -0.01f; }
        const gemm_epilogue ep = {.addend = epilogue == 1 ? add : NULL, .ld_addend = N, .bias = epilogue == 2 ? bias : NULL};
        set_threads(threads);
        gemm(M, N, K, a, K, 1, b, rs_b, cs_b, c1, N, &ep);
        // the copy alone where the kernel packs from it (b NULL: a fallback to fp32 would die)
        gemm_ex(M, N, K, a, K, 1, gemm_b16_usable() ? NULL : b, b16, rs_b, cs_b, c2, N, &ep);
        count++;
        if (memcmp(c1, c2, (size_t)M * N * sizeof(float)) != 0 && differ++ == 0) {
            snprintf(first, sizeof(first), "first at M=%d N=%d K=%d transB=%d ldb=%td threads=%d epilogue=%d", M, N, K,
                     trans_b, ldb, threads, epilogue);
        }
        if (gemm_b16_usable()) {
            float *panels = aligned_alloc_or_die(gemm_packed_b_words(K, N) * sizeof(float), "packed B");
            gemm_pack_b_whole(K, N, b16, rs_b, cs_b, panels);
            gemm_ex_packed_b(M, N, K, a, NULL, K, 1, panels, c3, N, &ep);
            if (memcmp(c1, c3, (size_t)M * N * sizeof(float)) != 0 && differ_whole++ == 0) {
                snprintf(first_whole, sizeof(first_whole), "first at M=%d N=%d K=%d transB=%d ldb=%td threads=%d epilogue=%d",
                         M, N, K, trans_b, ldb, threads, epilogue);
            }
            // B as it is (the input gradient's weight): the same panels written a pair of rows at
            // a time (gemm_put_b_pair, as AdamW writes gpt2.h's weight panels) over panels packed
            // from another B (the step before's): the same words, and the same product
            if (!trans_b && gemm_kernel_pair_panels(gemm_kernel_current())) {
                const size_t words = gemm_packed_b_words(K, N);
                float *put = aligned_alloc_or_die(words * sizeof(float), "panels put");
                uint16_t *other = malloc_or_die(nb * sizeof(uint16_t), "other b16");
                for (size_t i = 0; i < nb; i++) { other[i] = (uint16_t)(b16[i] ^ 0x5a5a); }
                gemm_pack_b_whole(K, N, other, rs_b, cs_b, put);
                for (int p = 0; 2 * p < K; p++) {
                    for (int c0 = 0; c0 < N; c0 += 64) {  // in chunks of columns, as AdamW's
                        const uint16_t *lo = b16 + (size_t)(2 * p) * ldb + c0;
                        gemm_put_b_pair(gemm_kernel_current(), K, N, put, p, c0, gemm_min(64, N - c0), lo,
                                        2 * p + 1 < K ? lo + ldb : NULL);
                    }
                }
                float *c4 = malloc_or_die((size_t)M * N * sizeof(float), "c");
                gemm_ex_packed_b(M, N, K, a, NULL, K, 1, put, c4, N, &ep);
                puts_count++;
                if ((memcmp(put, panels, words * sizeof(float)) != 0 || memcmp(c1, c4, (size_t)M * N * sizeof(float)) != 0) &&
                    differ_put++ == 0) {
                    snprintf(first_put, sizeof(first_put), "first at M=%d N=%d K=%d ldb=%td threads=%d epilogue=%d: %s", M, N,
                             K, ldb, threads, epilogue, memcmp(put, panels, words * sizeof(float)) != 0 ? "panels" : "product");
                }
                free(put); free(other); free(c4);
            }
            free(panels);
        }
        free(a); free(b); free(b16); free(add); free(bias); free(c1); free(c2); free(c3);
    }
    set_threads(4);
    char name[200], detail[260];
    snprintf(name, sizeof(name), "%s: B from its bf16 copy bit-identical to B from fp32 on %d problems%s", mode_name, count,
             gemm_b16_usable() ? "" : " (this kernel has no pack_b16: the copy is ignored)");
    snprintf(detail, sizeof(detail), "%d differ, %s", differ, first);
    report(name, differ == 0, detail);
    if (gemm_b16_usable()) {
        snprintf(name, sizeof(name), "%s: B packed whole from its bf16 copy bit-identical to B from fp32 on %d problems",
                 mode_name, count);
        snprintf(detail, sizeof(detail), "%d differ, %s", differ_whole, first_whole);
        report(name, differ_whole == 0, detail);
    }
    if (gemm_b16_usable() && gemm_kernel_pair_panels(gemm_kernel_current())) {
        snprintf(name, sizeof(name), "%s: B's panels written a pair of rows at a time (gemm_put_b_pair) equal to packing it whole, "
                 "and so is the product, on %d problems", mode_name, puts_count);
        snprintf(detail, sizeof(detail), "%d differ, %s", differ_put, first_put);
        report(name, differ_put == 0 && puts_count > 0, detail);
    }
}

// gemm_ex_a16 (A given only as bf16 bits: the classifier's dlogits in bf16 training) against gemm
// with the floats those bits were rounded from, on the current bf16 path: the same bits, for A as
// it is and transposed (the head's two backward products read dlogits both ways), rows of A
// further apart than K (dlogits' rows are 2 Vp uint16 apart), odd K, partial panels, several k
// blocks, 1 to 4 threads; A holds NaN, inf, subnormals and rounding ties.
static void check_a16(void) {
    if (!gemm_a16_usable()) {
        report("A from bf16 bits: skipped, fp32 has no pack_a16", 1, "");
        return;
    }
    const int sizes[] = {1, 2, 3, 12, 13, 31, 32, 33, 64, 97, 200, 385};
    const int nsizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
    uint64_t s = 2424;
    int differ = 0, count = 0, differ_packed = 0, packed_count = 0;
    char first[200] = "", first_packed[200] = "";
    for (int trial = 0; trial < 96; trial++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        const int M = sizes[s % nsizes], N = sizes[(s >> 8) % nsizes], trans_a = (int)((s >> 24) & 1);
        int K = sizes[(s >> 16) % nsizes];
        if (trial % 4 == 0) { K = 2 * GEMM_BF16_KCP + 1 + (int)(s >> 40) % 700; }
        const int pad = (int)((s >> 30) % 3) * 17, threads = 1 + trial % 4;
        const ptrdiff_t lda = (trans_a ? M : K) + pad;
        const ptrdiff_t rs_a = trans_a ? 1 : lda, cs_a = trans_a ? lda : 1;
        const size_t na = (size_t)(trans_a ? K : M) * lda;
        float *a = malloc_or_die(na * sizeof(float), "a"), *b = malloc_or_die((size_t)K * N * sizeof(float), "b");
        uint16_t *a16 = malloc_or_die(na * sizeof(uint16_t), "a16");
        float *c1 = malloc_or_die((size_t)M * N * sizeof(float), "c"), *c2 = malloc_or_die((size_t)M * N * sizeof(float), "c");
        for (size_t i = 0; i < (size_t)K * N; i++) { b[i] = (float)((int)(xorshift(&s) % 2001) - 1000) / 997.0f; }
        const uint64_t special_every = 64 * (uint64_t)((K + 63) / 64);
        for (size_t i = 0; i < na; i++) {
            a[i] = operand_with_specials(xorshift(&s), special_every);
            a16[i] = (uint16_t)(gemm_bf16_bits(a[i]) >> 16);
        }
        set_threads(threads);
        gemm(M, N, K, a, rs_a, cs_a, b, N, 1, c1, N, NULL);
        gemm_ex_a16(M, N, K, a16, rs_a, cs_a, b, NULL, N, 1, c2, N, NULL);
        count++;
        if (memcmp(c1, c2, (size_t)M * N * sizeof(float)) != 0 && differ++ == 0) {
            snprintf(first, sizeof(first), "first at M=%d N=%d K=%d transA=%d lda=%td threads=%d", M, N, K, trans_a, lda, threads);
        }
        // and B packed whole beforehand from its bf16 bits (the MLP's dfch against fc's weight panels)
        if (gemm_b16_usable()) {
            uint16_t *b16 = malloc_or_die((size_t)K * N * sizeof(uint16_t), "b16");
            for (size_t i = 0; i < (size_t)K * N; i++) { b16[i] = (uint16_t)(gemm_bf16_bits(b[i]) >> 16); }
            float *panels = aligned_alloc_or_die(gemm_packed_b_words(K, N) * sizeof(float), "packed B");
            gemm_pack_b_whole(K, N, b16, N, 1, panels);
            gemm_ex_packed_b(M, N, K, NULL, a16, rs_a, cs_a, panels, c2, N, NULL);
            packed_count++;
            if (memcmp(c1, c2, (size_t)M * N * sizeof(float)) != 0 && differ_packed++ == 0) {
                snprintf(first_packed, sizeof(first_packed), "first at M=%d N=%d K=%d transA=%d lda=%td threads=%d", M, N, K,
                         trans_a, lda, threads);
            }
            free(b16); free(panels);
        }
        free(a); free(b); free(a16); free(c1); free(c2);
    }
    set_threads(4);
    char name[200], detail[260];
    snprintf(name, sizeof(name), "%s: A from bf16 bits bit-identical to A from fp32 on %d problems", mode_name, count);
    snprintf(detail, sizeof(detail), "%d differ, %s", differ, first);
    report(name, differ == 0, detail);
    if (packed_count > 0) {
        snprintf(name, sizeof(name), "%s: A from bf16 bits with B packed whole bit-identical to fp32 on %d problems", mode_name,
                 packed_count);
        snprintf(detail, sizeof(detail), "%d differ, %s", differ_packed, first_packed);
        report(name, differ_packed == 0, detail);
    }
}

static void check_all_gemms(void) {
    check_problems();
    check_determinism();
    check_final_hook();
    check_matmul_wrappers(32, 768, 2304);
    check_matmul_wrappers(87, 57, 171);
    check_matmul_wrappers(1, 1, 1);
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--path") == 0) {  // which bf16 path the dispatcher picks here
        matmul_set_precision(PRECISION_BF16);
        printf("%s\n", matmul_precision_path());
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--nested") == 0) {  // gemm inside a parallel region must refuse
        float a[4] = {1, 2, 3, 4}, c[2][4];
        #pragma omp parallel num_threads(2)
        {
            int t = 0;
#ifdef _OPENMP
            t = omp_get_thread_num();
#endif
            gemm(2, 2, 2, a, 2, 1, a, 2, 1, c[t], 2, NULL);
        }
        printf("gemm ran inside a parallel region: %g %g\n", c[0][0], c[1][3]);
        return 0;
    }
    const int bf16_only = argc == 2 && strcmp(argv[1], "bf16") == 0;  // the mutant runs skip the fp32 checks
    if (argc > 1 && !bf16_only) { die("usage: %s [--path | --nested | bf16]", argv[0]); }
    printf("micro-kernel variant VEC_WIDTH=%d: %d x %d tile, %d-float vectors\n", VEC_WIDTH, GEMM_MR,
           GEMM_NR, GEMM_VEC);
    if (!bf16_only) {
        check_gelu();
        check_all_gemms();
    }
    check_bf16_rounding();
    const int native = GEMM_HAVE_BF16_KERNEL && gemm_bf16_native_available();
#if GEMM_HAVE_BF16_KERNEL
    if (native) { check_dpbf16_semantics(); }
#endif
    if (!native) { printf("skip  vdpbf16ps checks and native path: this CPU has no AVX512_BF16\n"); }
    matmul_set_precision(PRECISION_BF16);
    bf16_mode = 1;
    static const char *const mode_names[] = {"bf16-emulated", "bf16-native", "bf16-amx"};
    for (int path = BF16_PATH_AMX; path >= BF16_PATH_EMULATED; path--) {
        if (!precision_force_bf16_path((Bf16Path)path)) {
            printf("skip  bf16 path %s: this CPU (or OS) lacks it%s\n", bf16_path_name((Bf16Path)path),
                   path == BF16_PATH_AMX ? " (AMX-TILE and AMX-BF16, granted by Linux's arch_prctl)" : "");
            continue;
        }
        mode_name = mode_names[path];
        printf("%s: %s\n", mode_name, matmul_precision_path());
        check_all_gemms();
        check_b16_copy();
        check_a16();
    }
#if GEMM_HAVE_BF16_KERNEL
    if (native) { check_native_vs_emulated(); }
#endif
    if (bf16_path_available(BF16_PATH_AMX)) { compare_amx_emulated(); }
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed == 0 ? 0 : 1;
}
