/*
The bf16 GEMM (llmc/gemm.h with matmul_set_precision(PRECISION_BF16)) on GPT-2's shapes, for
each of a linear layer's three products, beside oneDNN's bf16 matmul (linked in dev/ only).

  ./matmul_bf16          every shape and product: checked, timed, against oneDNN
  ./matmul_bf16 quick    GPT-2 124M's shapes only
Run it alone on the machine:
  OMP_NUM_THREADS=2 flock -x /tmp/cpu.lock ./matmul_bf16

Versions:
  1  naive fp32 dot products over the operands rounded to bf16 beforehand (the reference; on
     large shapes only the first and last REF_ROWS rows, not timed).
  2  llmc/gemm.h in bf16: the operands rounded while packed, the vdpbf16ps micro-kernel where
     the CPU has AVX512_BF16 (else the emulated path: it says which).
  oneDNN: the matmul primitive, src and weights bf16, dst f32, on operands converted to bf16
     before timing (by its reorder primitive, not timed; ours rounds inside its time).
  oneDNN from fp32: the same, timed with the conversion of both operands from the fp32 tensors
     the model holds (oneDNN's reorder primitive, f32 to bf16, then the matmul), which is what
     ours does; PyTorch's autocast converts too, though it keeps a weight's bf16 copy from the
     forward for the backward. The target is the first ratio; this one says how much of the gap
     is the conversion.
Products (as in llmc/matmul.h; C is the plain product, no epilogue):
  fwd   out (BT, OC)  = inp (BT, C) . weight^T
  dinp  dinp (BT, C)  = dout (BT, OC) . weight (OC, C)
  dw    dw (OC, C)    = dout^T . inp (BT, C)
The peak: that of the unit the run's bf16 path computes on (peaks.h's peak_of_run: vdpbf16ps,
AMX tiles, or the fp32 FMA on the emulated path), the figures of fma_peak (it had its own loop
here, which printed 291.8 GFLOP/s on a Zen 5 whose peak is 817: ours then ran at "279% of peak").
*/
#include <oneapi/dnnl/dnnl.h>
#include "peaks.h"
#include "matmul_bench.h"
#include "llmc/matmul.h"

#define DNNL_CHECK(call) do { dnnl_status_t st_ = (call); if (st_ != dnnl_success) { die("%s: oneDNN status %d", #call, (int)st_); } } while (0)

// One product: C (M, N) = A . B with A(m, k) = a[m*rs_a + k*cs_a], B(k, n) = b[k*rs_b + n*cs_b].
typedef struct {
    const char *name;
    int M, N, K;
    const float *a, *b;
    ptrdiff_t rs_a, cs_a, rs_b, cs_b;
    float *c;
    // oneDNN's copy: the operands in bf16 with the same strides, and its primitive
    uint16_t *a16, *b16;
    dnnl_primitive_t prim, reorder_a, reorder_b;
    dnnl_memory_t ma, mb, mc, ma32, mb32;
    dnnl_stream_t stream;
} product;

static dnnl_engine_t engine;

typedef enum { RUN_OURS, RUN_DNNL, RUN_DNNL_FROM_FP32 } runner;

typedef struct {
    product *r;
    runner who;
} run_ctx;

static void run(void *p) {
    const run_ctx *x = p;
    product *r = x->r;
    if (x->who == RUN_OURS) {
        gemm(r->M, r->N, r->K, r->a, r->rs_a, r->cs_a, r->b, r->rs_b, r->cs_b, r->c, r->N, NULL);
    } else {
        if (x->who == RUN_DNNL_FROM_FP32) {
            dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, r->ma32}, {DNNL_ARG_TO, r->ma}};
            dnnl_exec_arg_t rb[2] = {{DNNL_ARG_FROM, r->mb32}, {DNNL_ARG_TO, r->mb}};
            DNNL_CHECK(dnnl_primitive_execute(r->reorder_a, r->stream, 2, ra));
            DNNL_CHECK(dnnl_primitive_execute(r->reorder_b, r->stream, 2, rb));
        }
        dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, r->ma}, {DNNL_ARG_WEIGHTS, r->mb}, {DNNL_ARG_DST, r->mc}};
        DNNL_CHECK(dnnl_primitive_execute(r->prim, r->stream, 3, args));
        DNNL_CHECK(dnnl_stream_wait(r->stream));
    }
}

static void dnnl_setup(product *r, size_t na, size_t nb) {
    r->a16 = aligned_alloc_or_die(na * sizeof(uint16_t), "bf16 copy of a");
    r->b16 = aligned_alloc_or_die(nb * sizeof(uint16_t), "bf16 copy of b");
    dnnl_memory_desc_t da, db, dc;
    const dnnl_dims_t sa = {r->M, r->K}, ssa = {r->rs_a, r->cs_a};
    const dnnl_dims_t sb = {r->K, r->N}, ssb = {r->rs_b, r->cs_b};
    const dnnl_dims_t sc = {r->M, r->N}, ssc = {r->N, 1};
    DNNL_CHECK(dnnl_memory_desc_init_by_strides(&da, 2, sa, dnnl_bf16, ssa));
    DNNL_CHECK(dnnl_memory_desc_init_by_strides(&db, 2, sb, dnnl_bf16, ssb));
    DNNL_CHECK(dnnl_memory_desc_init_by_strides(&dc, 2, sc, dnnl_f32, ssc));
    dnnl_matmul_desc_t desc;
    DNNL_CHECK(dnnl_matmul_desc_init(&desc, &da, &db, NULL, &dc));
    dnnl_primitive_desc_t pd;
    DNNL_CHECK(dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL));
    DNNL_CHECK(dnnl_primitive_create(&r->prim, pd));
    DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
    DNNL_CHECK(dnnl_memory_create(&r->ma, &da, engine, r->a16));
    DNNL_CHECK(dnnl_memory_create(&r->mb, &db, engine, r->b16));
    DNNL_CHECK(dnnl_memory_create(&r->mc, &dc, engine, r->c));
    DNNL_CHECK(dnnl_stream_create(&r->stream, engine, dnnl_stream_default_flags));
    // the fp32 operands, same strides, and their conversions into the bf16 ones above
    dnnl_memory_desc_t da32, db32;
    DNNL_CHECK(dnnl_memory_desc_init_by_strides(&da32, 2, sa, dnnl_f32, ssa));
    DNNL_CHECK(dnnl_memory_desc_init_by_strides(&db32, 2, sb, dnnl_f32, ssb));
    DNNL_CHECK(dnnl_memory_create(&r->ma32, &da32, engine, (void *)r->a));
    DNNL_CHECK(dnnl_memory_create(&r->mb32, &db32, engine, (void *)r->b));
    DNNL_CHECK(dnnl_reorder_primitive_desc_create(&pd, &da32, engine, &da, engine, NULL));
    DNNL_CHECK(dnnl_primitive_create(&r->reorder_a, pd));
    DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
    DNNL_CHECK(dnnl_reorder_primitive_desc_create(&pd, &db32, engine, &db, engine, NULL));
    DNNL_CHECK(dnnl_primitive_create(&r->reorder_b, pd));
    DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
    // the bf16 operands of the runs given bf16: the same conversions, once, before any timing
    run_ctx convert = {r, RUN_DNNL_FROM_FP32};
    run(&convert);
}

static void dnnl_teardown(product *r) {
    dnnl_primitive_destroy(r->prim);
    dnnl_primitive_destroy(r->reorder_a);
    dnnl_primitive_destroy(r->reorder_b);
    dnnl_memory_destroy(r->ma32);
    dnnl_memory_destroy(r->mb32);
    dnnl_memory_destroy(r->ma);
    dnnl_memory_destroy(r->mb);
    dnnl_memory_destroy(r->mc);
    dnnl_stream_destroy(r->stream);
    free(r->a16);
    free(r->b16);
}

// Version 1: rows [i0, i1) of C from bf16-rounded copies of the operands (ar, br: same strides).
static void reference_rows(const product *r, const float *ar, const float *br, float *ref, int i0, int i1) {
    #pragma omp parallel for collapse(2)
    for (int i = i0; i < i1; i++) {
        for (int j = 0; j < r->N; j++) {
            float sum = 0.0f;
            for (int k = 0; k < r->K; k++) { sum += ar[i * r->rs_a + k * r->cs_a] * br[k * r->rs_b + j * r->cs_b]; }
            ref[(size_t)i * r->N + j] = sum;
        }
    }
}

int main(int argc, char **argv) {
    const int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    if (argc > 1 && !quick) { die("usage: %s [quick]", argv[0]); }
    gemm_init();
    matmul_set_precision(PRECISION_BF16);
    DNNL_CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
    const char *peak_name;
    const double peak = peak_of_run(omp_get_max_threads(), &peak_name);
    printf("threads: %d; ours: %s\n", omp_get_max_threads(), matmul_precision_path());
    printf("peak (%s): %.1f GFLOP/s\n", peak_name, peak);
    printf("times: best of 3 to 31 runs (about 0.3 s), %d alternating rounds of ours and oneDNN; ratio = median of\n"
           "the rounds' oneDNN ms / ours; then as many rounds of ours and oneDNN from fp32 (its operands converted\n"
           "from fp32 in its time, as ours does)\n", MATMUL_ROUNDS);
    int all_ok = 1;
    double log_ratio = 0.0, log_ratio_fp32 = 0.0, log_peak = 0.0;
    int nratio = 0;
    char summary[MATMUL_NSHAPES * 3][160];
    int nsummary = 0;
    const int nshapes = quick ? MATMUL_GPT2_SHAPES : MATMUL_NSHAPES;
    for (int s = 0; s < nshapes; s++) {
        const matmul_shape sh = matmul_shapes[s];
        const int BT = sh.BT, C = sh.C, OC = sh.OC;
        float *inp = make_random((size_t)BT * C, 1), *w = make_random((size_t)OC * C, 2);
        float *dout = make_random((size_t)BT * OC, 3);
        size_t nmax = (size_t)BT * OC;  // the largest of the three outputs
        if ((size_t)BT * C > nmax) { nmax = (size_t)BT * C; }
        if ((size_t)OC * C > nmax) { nmax = (size_t)OC * C; }
        float *c = make_random(nmax, 4), *ref = make_random(nmax, 5);
        product prods[3] = {
            {.name = "fwd ", .M = BT, .N = OC, .K = C, .a = inp, .b = w, .rs_a = C, .cs_a = 1, .rs_b = 1, .cs_b = C, .c = c},
            {.name = "dinp", .M = BT, .N = C, .K = OC, .a = dout, .b = w, .rs_a = OC, .cs_a = 1, .rs_b = C, .cs_b = 1, .c = c},
            {.name = "dw  ", .M = OC, .N = C, .K = BT, .a = dout, .b = inp, .rs_a = 1, .cs_a = OC, .rs_b = C, .cs_b = 1, .c = c},
        };
        const size_t nsrc[3][2] = {{(size_t)BT * C, (size_t)OC * C}, {(size_t)BT * OC, (size_t)OC * C},
                                   {(size_t)BT * OC, (size_t)BT * C}};
        for (int q = 0; q < 3; q++) {
            product *r = &prods[q];
            const double flops = 2.0 * r->M * r->N * r->K;
            // version 1 on rounded copies
            float *ar = malloc_or_die(nsrc[q][0] * sizeof(float), "a"), *br = malloc_or_die(nsrc[q][1] * sizeof(float), "b");
            for (size_t i = 0; i < nsrc[q][0]; i++) { ar[i] = gemm_bf16_round(r->a[i]); }
            for (size_t i = 0; i < nsrc[q][1]; i++) { br[i] = gemm_bf16_round(r->b[i]); }
            const int all_rows = ref_all_rows(r->M, flops);
            if (all_rows) {
                reference_rows(r, ar, br, ref, 0, r->M);
            } else {
                reference_rows(r, ar, br, ref, 0, REF_ROWS);
                reference_rows(r, ar, br, ref, r->M - REF_ROWS, r->M);
            }
            free(ar);
            free(br);
            run_ctx ours = {r, RUN_OURS}, dnnl = {r, RUN_DNNL}, dnnl_fp32 = {r, RUN_DNNL_FROM_FP32};
            run(&ours);
            const int ok = check_rows("ours", c, ref, r->M, r->N, all_rows);
            dnnl_setup(r, nsrc[q][0], nsrc[q][1]);
            run(&dnnl);
            int ok_dnnl = check_rows("oneDNN", c, ref, r->M, r->N, all_rows);
            memset(c, 0, (size_t)r->M * r->N * sizeof(float));
            run(&dnnl_fp32);
            ok_dnnl &= check_rows("oneDNN from fp32", c, ref, r->M, r->N, all_rows);
            all_ok &= ok;
            if (flops < 1e8) {
                printf("%-18s %s M=%d N=%d K=%d: ours %s, oneDNN %s (not timed)\n", sh.name, r->name, r->M, r->N, r->K,
                       ok ? "ok" : "WRONG", ok_dnnl ? "ok" : "WRONG");
                dnnl_teardown(r);
                continue;
            }
            settle();
            double ms_ours = bench_ms(run, &ours, 300.0);
            settle();
            double ms_dnnl = bench_ms(run, &dnnl, 300.0);
            const double ratio = bench_more_rounds(run, &ours, &dnnl, 300.0, &ms_ours, &ms_dnnl);
            settle();
            double ms_dnnl_fp32 = bench_ms(run, &dnnl_fp32, 300.0);
            const double ratio_fp32 = bench_more_rounds(run, &ours, &dnnl_fp32, 300.0, &ms_ours, &ms_dnnl_fp32);
            const double g = gflops(flops, ms_ours), gd = gflops(flops, ms_dnnl);
            printf("%-18s %s M=%d N=%d K=%d: ours %8.3f ms %6.1f GFLOP/s (%3.0f%% of peak) %s | oneDNN %8.3f ms %6.1f GFLOP/s %s | oneDNN/ours %.2f | from fp32 %8.3f ms, %.2f\n",
                   sh.name, r->name, r->M, r->N, r->K, ms_ours, g, peak > 0 ? 100 * g / peak : 0.0, ok ? "ok" : "WRONG",
                   ms_dnnl, gd, ok_dnnl ? "ok" : "WRONG", ratio, ms_dnnl_fp32, ratio_fp32);
            snprintf(summary[nsummary++], 160, "%-18s %s %6.1f %5.0f%% %7.1f  %5.2f  %5.2f", sh.name, r->name, g,
                     peak > 0 ? 100 * g / peak : 0.0, gd, ratio, ratio_fp32);
            log_ratio += log(ratio);
            log_ratio_fp32 += log(ratio_fp32);
            log_peak += log(g / (peak > 0 ? peak : 1.0));
            nratio++;
            dnnl_teardown(r);
        }
        free(inp); free(w); free(dout); free(c); free(ref);
    }
    printf("\nbf16 GFLOP/s, %% of the bf16 dot peak (%.1f GFLOP/s), oneDNN's, oneDNN ms / ours, and oneDNN from\n"
           "fp32 ms / ours:\n", peak);
    printf("%-18s %s %6s %6s %7s  %5s  %5s\n", "shape", "prod", "ours", "peak", "oneDNN", "ratio", "fp32");
    for (int i = 0; i < nsummary; i++) { printf("%s\n", summary[i]); }
    if (nratio > 0) {
        printf("geometric means over the timed products: %.0f%% of peak, oneDNN ms / ours %.3f, oneDNN from fp32 ms / ours %.3f\n",
               100 * exp(log_peak / nratio), exp(log_ratio / nratio), exp(log_ratio_fp32 / nratio));
    }
    if (!all_ok) { die("ours disagrees with version 1"); }
    return 0;
}
