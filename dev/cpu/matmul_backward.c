/*
matmul_backward: with dout (BT, OC), accumulates
  dinp (BT, C) += dout . weight         "to input"
  dweight (OC, C) += dout^T . inp       "to weight" (timed together with dbias)
  dbias (OC) += column sums of dout

  ./matmul_backward      every version on every shape, each checked against version 1
  ./matmul_backward 2    version 2 only (still checked against version 1)
The two products are timed separately (the other output NULL). Each shape also runs OpenBLAS
cblas_sgemm for both (NoTrans, NoTrans and Trans, NoTrans, beta = 1) with as many threads as
ours, and prints ours (the last version) over OpenBLAS. Run it alone on the machine:
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=2 flock -x /tmp/cpu.lock ./matmul_backward

Versions (2 is in matmul_steps.h):
  1  naive: rows of dinp in parallel, a row of dweight per output channel in parallel.
  2  GotoBLAS loops around the register-blocked vector micro-kernel of llmc/gemm_kernel.h:
     cache blocks, packed panels, threads over column blocks, for both products; dout^T is
     read through strides by the packing (no transposed copy).
  3  llmc/matmul.h (llmc/gemm.h): a fixed thread grid over each output with per-thread
     packing buffers allocated once, packing that reads rows sequentially, C prefetched into
     L1; dbias by column blocks in parallel.
*/
#include "matmul_bench.h"
#include "matmul_steps.h"
#include "llmc/matmul.h"

static void matmul_backward1(float *dinp, float *dweight, float *dbias, const float *dout,
                             const float *inp, const float *weight, int BT, int C, int OC) {
    if (dinp != NULL) {
        #pragma omp parallel for
        for (int i = 0; i < BT; i++) {
            const float *g = dout + (size_t)i * OC;
            float *dx = dinp + (size_t)i * C;
            for (int o = 0; o < OC; o++) {
                const float *w = weight + (size_t)o * C;
                for (int c = 0; c < C; c++) { dx[c] += g[o] * w[c]; }
            }
        }
    }
    if (dweight == NULL) { return; }
    #pragma omp parallel for
    for (int o = 0; o < OC; o++) {
        float *dw = dweight + (size_t)o * C;
        float db = 0.0f;
        for (int i = 0; i < BT; i++) {
            float g = dout[(size_t)i * OC + o];
            const float *x = inp + (size_t)i * C;
            for (int c = 0; c < C; c++) { dw[c] += g * x[c]; }
            db += g;
        }
        if (dbias != NULL) { dbias[o] += db; }
    }
}

static void matmul_backward2(float *dinp, float *dweight, float *dbias, const float *dout,
                             const float *inp, const float *weight, int BT, int C, int OC) {
    if (dinp != NULL) { step_gemm(BT, C, OC, dout, OC, 1, weight, C, 1, dinp, C, 1); }
    if (dweight == NULL) { return; }
    step_gemm(OC, C, BT, dout, 1, OC, inp, C, 1, dweight, C, 1);
    if (dbias != NULL) {
        #pragma omp parallel for
        for (int o = 0; o < OC; o++) {
            float db = 0.0f;
            for (int i = 0; i < BT; i++) { db += dout[(size_t)i * OC + o]; }
            dbias[o] += db;
        }
    }
}

typedef void (*backward_fn)(float *, float *, float *, const float *, const float *, const float *, int, int, int);
static const backward_fn versions[] = {NULL, matmul_backward1, matmul_backward2, matmul_backward};
#define NVERSIONS ((int)(sizeof(versions) / sizeof(versions[0])) - 1)

typedef struct {
    backward_fn fn;  // NULL: OpenBLAS
    int to_weight;   // 0: dinp only, 1: dweight (and dbias) only
    float *dinp, *dweight, *dbias;
    const float *dout, *inp, *weight;
    int BT, C, OC;
} run_ctx;

static void run(void *p) {
    run_ctx *r = p;
    if (r->fn != NULL) {
        if (r->to_weight) {
            r->fn(NULL, r->dweight, r->dbias, r->dout, r->inp, r->weight, r->BT, r->C, r->OC);
        } else {
            r->fn(r->dinp, NULL, NULL, r->dout, r->inp, r->weight, r->BT, r->C, r->OC);
        }
    } else if (r->to_weight) {  // OpenBLAS has no bias: it gets the plain product
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r->OC, r->C, r->BT, 1.0f, r->dout, r->OC,
                    r->inp, r->C, 1.0f, r->dweight, r->C);
    } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r->BT, r->C, r->OC, 1.0f, r->dout, r->OC,
                    r->weight, r->C, 1.0f, r->dinp, r->C);
    }
}

int main(int argc, char **argv) {
    const int only = matmul_bench_start(argc, argv, NVERSIONS);
    const int ours = only != 0 ? only : NVERSIONS;
    double log_ratio[2] = {0.0, 0.0};
    int nratio = 0, all_ok = 1;
    char summary[MATMUL_NSHAPES][200];
    for (int s = 0; s < MATMUL_NSHAPES; s++) {
        const matmul_shape sh = matmul_shapes[s];
        const size_t n_inp = (size_t)sh.BT * sh.C, n_w = (size_t)sh.OC * sh.C, n_out = (size_t)sh.BT * sh.OC;
        float *dout = make_random(n_out, 1), *inp = make_random(n_inp, 2), *weight = make_random(n_w, 3);
        // reference gradients start from these values (they accumulate)
        float *dinp_ref = make_random(n_inp, 4), *dw_ref = make_random(n_w, 5), *db_ref = make_random(sh.OC, 6);
        float *dinp = malloc_or_die(n_inp * sizeof(float), "dinp"), *dw = malloc_or_die(n_w * sizeof(float), "dw");
        float *db = malloc_or_die(sh.OC * sizeof(float), "db");
        const double flops = 2.0 * sh.BT * sh.C * sh.OC;
        const double budget = 400.0;
        printf("\n%-18s BT=%d C=%d OC=%d (%.3f GFLOP each)\n", sh.name, sh.BT, sh.C, sh.OC, flops * 1e-9);
        // dinp's rows are independent (a subset of them is enough on big shapes), dweight's are not
        const int all_rows = only == 1 || ref_all_rows(sh.BT, flops);
        double t0 = now_seconds();
        if (all_rows) {
            matmul_backward1(dinp_ref, NULL, NULL, dout, inp, weight, sh.BT, sh.C, sh.OC);
        } else {
            const int last = sh.BT - REF_ROWS;
            matmul_backward1(dinp_ref, NULL, NULL, dout, inp, weight, REF_ROWS, sh.C, sh.OC);
            matmul_backward1(dinp_ref + (size_t)last * sh.C, NULL, NULL, dout + (size_t)last * sh.OC, inp, weight,
                             REF_ROWS, sh.C, sh.OC);
        }
        double t1 = now_seconds();
        matmul_backward1(NULL, dw_ref, db_ref, dout, inp, weight, sh.BT, sh.C, sh.OC);
        double ms_ref[2] = {(t1 - t0) * 1e3, (now_seconds() - t1) * 1e3};
        double ms_ours[2] = {0.0, 0.0}, ms_blas[2];
        for (int v = 1; v <= NVERSIONS; v++) {
            if (only != 0 && v != only) { continue; }
            run_ctx ctx = {versions[v], 0, dinp, dw, db, dout, inp, weight, sh.BT, sh.C, sh.OC};
            int ok = 1;
            if (v != 1) {  // one accumulating call from the reference's starting values, checked
                fill_random(dinp, n_inp, 4);
                fill_random(dw, n_w, 5);
                fill_random(db, sh.OC, 6);
                versions[v](dinp, dw, db, dout, inp, weight, sh.BT, sh.C, sh.OC);
                ok = check_rows("dinp", dinp, dinp_ref, sh.BT, sh.C, all_rows) &
                     check_close("dweight", dw, dw_ref, n_w, 1e-5) & check_close("dbias", db, db_ref, sh.OC, 1e-5);
                all_ok &= ok;
            }
            double ms[2];
            settle();
            for (int w = 0; w < 2; w++) {
                ctx.to_weight = w;
                ms[w] = v == 1 && (ms_ref[w] > budget || (w == 0 && !all_rows)) ? ms_ref[w] : bench_ms(run, &ctx, budget);
                if (v == ours) { ms_ours[w] = ms[w]; }
            }
            if (v == 1 && !all_rows) {
                printf("  version 1  to input: reference on the first and last %d rows only, not timed;"
                       "   to weight %9.3f ms %7.1f GFLOP/s\n", REF_ROWS, ms[1], gflops(flops, ms[1]));
                continue;
            }
            printf("  version %d  to input %9.3f ms %7.1f GFLOP/s   to weight %9.3f ms %7.1f GFLOP/s  %s\n", v,
                   ms[0], gflops(flops, ms[0]), ms[1], gflops(flops, ms[1]), ok ? "ok" : "WRONG");
        }
        run_ctx blas = {NULL, 0, dinp, dw, db, dout, inp, weight, sh.BT, sh.C, sh.OC};
        fill_random(dinp, n_inp, 4);
        fill_random(dw, n_w, 5);
        run(&blas);
        blas.to_weight = 1;
        run(&blas);
        int ok_blas = check_rows("OpenBLAS dinp", dinp, dinp_ref, sh.BT, sh.C, all_rows) &
                      check_close("OpenBLAS dweight", dw, dw_ref, n_w, 1e-5);
        settle();
        for (int w = 0; w < 2; w++) {
            blas.to_weight = w;
            ms_blas[w] = bench_ms(run, &blas, budget);
        }
        printf("  OpenBLAS   to input %9.3f ms %7.1f GFLOP/s   to weight %9.3f ms %7.1f GFLOP/s  %s\n", ms_blas[0],
               gflops(flops, ms_blas[0]), ms_blas[1], gflops(flops, ms_blas[1]), ok_blas ? "ok" : "WRONG");
        double ratio[2];
        for (int w = 0; w < 2; w++) {
            run_ctx ours_ctx = {versions[ours], w, dinp, dw, db, dout, inp, weight, sh.BT, sh.C, sh.OC};
            blas.to_weight = w;
            ratio[w] = bench_more_rounds(run, &ours_ctx, &blas, budget, &ms_ours[w], &ms_blas[w]);
        }
        printf("  %d rounds, version %d / OpenBLAS: to input %.1f / %.1f GFLOP/s (best), %.2f (median), "
               "to weight %.1f / %.1f GFLOP/s, %.2f\n", MATMUL_ROUNDS, ours, gflops(flops, ms_ours[0]),
               gflops(flops, ms_blas[0]), ratio[0], gflops(flops, ms_ours[1]), gflops(flops, ms_blas[1]), ratio[1]);
        snprintf(summary[s], sizeof(summary[s]), "%-18s %5d %5d %6d  %7.1f %7.1f %5.2f   %7.1f %7.1f %5.2f",
                 sh.name, sh.BT, sh.C, sh.OC, gflops(flops, ms_ours[0]), gflops(flops, ms_blas[0]),
                 ratio[0], gflops(flops, ms_ours[1]), gflops(flops, ms_blas[1]), ratio[1]);
        if (flops >= 1e8) {
            for (int w = 0; w < 2; w++) { log_ratio[w] += log(ratio[w]); }
            nratio++;
        }
        free(dout); free(inp); free(weight); free(dinp_ref); free(dw_ref); free(db_ref);
        free(dinp); free(dw); free(db);
    }
    printf("\nbackward, version %d vs OpenBLAS, GFLOP/s:\n%-18s %5s %5s %6s  %7s %7s %5s   %7s %7s %5s\n", ours,
           "shape", "BT", "C", "OC", "in:ours", "OpenBLAS", "ratio", "w:ours", "OpenBLAS", "ratio");
    for (int s = 0; s < MATMUL_NSHAPES; s++) { printf("%s\n", summary[s]); }
    printf("geometric mean ratio over shapes of >= 0.1 GFLOP: to input %.3f, to weight %.3f\n",
           exp(log_ratio[0] / nratio), exp(log_ratio[1] / nratio));
    if (!all_ok) { die("some version disagrees with version 1"); }
    return 0;
}
