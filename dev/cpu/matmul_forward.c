/*
matmul_forward: out (BT, OC) = inp (BT, C) . weight^T + bias, weight (OC, C) as nn.Linear.

  ./matmul_forward      every version on every shape, each checked against version 1
  ./matmul_forward 2    version 2 only (still checked against version 1)
Each shape also runs OpenBLAS cblas_sgemm (NoTrans, Trans) with as many threads as ours, and
prints ours (the last version) over OpenBLAS. Run it alone on the machine:
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=2 flock -x /tmp/cpu.lock ./matmul_forward

Versions (2 is in matmul_steps.h):
  1  naive: one dot product per output, threads over (row, column).
  2  GotoBLAS loops around the register-blocked vector micro-kernel of llmc/gemm_kernel.h:
     cache blocks, packed panels, threads over column blocks; out starts as the bias and the
     product is accumulated onto it.
  3  llmc/matmul.h (llmc/gemm.h): a fixed thread grid over the output with per-thread packing
     buffers allocated once, packing that reads rows sequentially, C prefetched into L1, the
     bias added in the micro-kernel's epilogue.
*/
#include "matmul_bench.h"
#include "matmul_steps.h"
#include "llmc/matmul.h"

static void matmul_forward1(float *out, const float *inp, const float *weight, const float *bias,
                            int BT, int C, int OC) {
    #pragma omp parallel for collapse(2)
    for (int i = 0; i < BT; i++) {
        for (int o = 0; o < OC; o++) {
            const float *x = inp + (size_t)i * C;
            const float *w = weight + (size_t)o * C;
            float sum = bias != NULL ? bias[o] : 0.0f;
            for (int c = 0; c < C; c++) { sum += x[c] * w[c]; }
            out[(size_t)i * OC + o] = sum;
        }
    }
}

static void matmul_forward2(float *out, const float *inp, const float *weight, const float *bias,
                            int BT, int C, int OC) {
    #pragma omp parallel for
    for (int i = 0; i < BT; i++) {
        for (int o = 0; o < OC; o++) { out[(size_t)i * OC + o] = bias != NULL ? bias[o] : 0.0f; }
    }
    step_gemm(BT, OC, C, inp, C, 1, weight, 1, C, out, OC, 1);
}

// version 3: llmc/matmul.h's, without a bf16 copy of the weight
static void matmul_forward3(float *out, const float *inp, const float *weight, const float *bias,
                            int BT, int C, int OC) {
    matmul_forward(out, inp, weight, NULL, bias, BT, C, OC);
}

typedef void (*forward_fn)(float *, const float *, const float *, const float *, int, int, int);
static const forward_fn versions[] = {NULL, matmul_forward1, matmul_forward2, matmul_forward3};
#define NVERSIONS ((int)(sizeof(versions) / sizeof(versions[0])) - 1)

typedef struct {
    forward_fn fn;  // NULL: OpenBLAS
    float *out;
    const float *inp, *weight, *bias;
    int BT, C, OC;
} run_ctx;

static void run(void *p) {
    run_ctx *r = p;
    if (r->fn != NULL) {
        r->fn(r->out, r->inp, r->weight, r->bias, r->BT, r->C, r->OC);
    } else {  // OpenBLAS has no bias: it gets the plain product
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r->BT, r->OC, r->C, 1.0f, r->inp, r->C,
                    r->weight, r->C, 0.0f, r->out, r->OC);
    }
}

int main(int argc, char **argv) {
    const int only = matmul_bench_start(argc, argv, NVERSIONS);
    const int ours = only != 0 ? only : NVERSIONS;
    double ratio_sum_log = 0.0;
    int nratio = 0, all_ok = 1;
    char summary[MATMUL_NSHAPES][160];
    for (int s = 0; s < MATMUL_NSHAPES; s++) {
        const matmul_shape sh = matmul_shapes[s];
        const size_t n_inp = (size_t)sh.BT * sh.C, n_w = (size_t)sh.OC * sh.C, n_out = (size_t)sh.BT * sh.OC;
        float *inp = make_random(n_inp, 1), *weight = make_random(n_w, 2), *bias = make_random(sh.OC, 3);
        float *ref = make_random(n_out, 4), *out = make_random(n_out, 5);
        const double flops = 2.0 * sh.BT * sh.C * sh.OC;
        const double budget = 400.0;
        printf("\n%-18s BT=%d C=%d OC=%d (%.3f GFLOP)\n", sh.name, sh.BT, sh.C, sh.OC, flops * 1e-9);
        const int all_rows = only == 1 || ref_all_rows(sh.BT, flops);
        run_ctx ctx = {matmul_forward1, ref, inp, weight, bias, sh.BT, sh.C, sh.OC};
        double t0 = now_seconds();
        if (all_rows) {
            run(&ctx);
        } else {
            const int last = sh.BT - REF_ROWS;
            matmul_forward1(ref, inp, weight, bias, REF_ROWS, sh.C, sh.OC);
            matmul_forward1(ref + (size_t)last * sh.OC, inp + (size_t)last * sh.C, weight, bias, REF_ROWS, sh.C, sh.OC);
        }
        double ms_ref = (now_seconds() - t0) * 1e3;
        double ms_ours = 0.0;
        for (int v = 1; v <= NVERSIONS; v++) {
            if (only != 0 && v != only) { continue; }
            if (v == 1 && !all_rows) {
                printf("  version 1  reference on the first and last %d rows only, not timed\n", REF_ROWS);
                continue;
            }
            ctx.fn = versions[v];
            ctx.out = out;
            settle();
            double ms = v == 1 && ms_ref > budget ? ms_ref : bench_ms(run, &ctx, budget);
            int ok = v == 1 ? 1 : check_rows("out", out, ref, sh.BT, sh.OC, all_rows);
            all_ok &= ok;
            printf("  version %d  %9.3f ms  %7.1f GFLOP/s  %s\n", v, ms, gflops(flops, ms), ok ? "ok" : "WRONG");
            if (v == ours) { ms_ours = ms; }
        }
        ctx.fn = NULL;
        settle();
        run(&ctx);
        for (size_t i = 0; i < n_out; i++) { out[i] += bias[i % sh.OC]; }  // plus bias, for the check
        int ok_blas = check_rows("OpenBLAS out", out, ref, sh.BT, sh.OC, all_rows);
        double ms_blas = bench_ms(run, &ctx, budget);
        run_ctx ours_ctx = ctx;
        ours_ctx.fn = versions[ours];
        const double ratio = bench_more_rounds(run, &ours_ctx, &ctx, budget, &ms_ours, &ms_blas);
        printf("  OpenBLAS   %9.3f ms  %7.1f GFLOP/s  %s\n", ms_blas, gflops(flops, ms_blas), ok_blas ? "ok" : "WRONG");
        printf("  %d rounds: version %d %.1f GFLOP/s, OpenBLAS %.1f GFLOP/s (best), version %d / OpenBLAS = %.2f (median)\n",
               MATMUL_ROUNDS, ours, gflops(flops, ms_ours), gflops(flops, ms_blas), ours, ratio);
        snprintf(summary[s], sizeof(summary[s]), "%-18s %5d %5d %6d  %7.1f  %7.1f  %5.2f", sh.name, sh.BT,
                 sh.C, sh.OC, gflops(flops, ms_ours), gflops(flops, ms_blas), ratio);
        if (flops >= 1e8) {
            ratio_sum_log += log(ratio);
            nratio++;
        }
        free(inp); free(weight); free(bias); free(ref); free(out);
    }
    printf("\nforward, version %d vs OpenBLAS, GFLOP/s:\n%-18s %5s %5s %6s  %7s  %7s  %5s\n", ours, "shape", "BT",
           "C", "OC", "ours", "OpenBLAS", "ratio");
    for (int s = 0; s < MATMUL_NSHAPES; s++) { printf("%s\n", summary[s]); }
    printf("geometric mean ratio over shapes of >= 0.1 GFLOP: %.3f\n", exp(ratio_sum_log / nratio));
    if (!all_ok) { die("some version disagrees with version 1"); }
    return 0;
}
