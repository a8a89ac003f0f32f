/*
The bf16 GEMM on GPT-2 124M's 27 products (9 shapes x the three products of a linear layer),
timed alone: GFLOP/s and the share of the peak of the unit the run's path computes on (peaks.h:
AMX tiles, vdpbf16ps, or the fp32 FMA for fp32 and the emulated path). The bf16 path is the
run's (LLMC_BF16_PATH forces one). Its yardstick on the
lent Xeon is oneDNN's bf16 matmul through PyTorch (dev/cpu/matmul_torch.py, the same products
and the same lines), which dev/cpu/run_amx.sh sets side by side; matmul_bf16.c does the same
with oneDNN's C API where libdnnl is installed.

  OMP_NUM_THREADS=2 ./amx_bench [fp32] [SHAPE]
  ./amx_bench --list                   # the shapes, one a line: SHAPE BT C OC
prints one line per product:  product NAME PROD M N K ms GFLOP/s %peak
(SHAPE, the id of one of matmul_bench.h's first MATMUL_GPT2_SHAPES shapes: its three products
only; run_amx.sh alternates ours and oneDNN shape by shape, as this host's speed drifts within a
minute)
Products (matmul_bench.h's matmul_product: llmc/matmul.h's calls, without bias; operands as the
model holds them: activations and gradients in fp32, the weight in bf16 from its bf16 copy):
  fwd   out (BT, OC)  = inp (BT, C) . weight^T
  dinp  dinp (BT, C)  = dout (BT, OC) . weight (OC, C)
  dw    dw (OC, C)    = dout^T . inp (BT, C)
*/
#include "peaks.h"
#include "common.h"
#include "matmul_bench.h"

int main(int argc, char **argv) {
    int fp32 = 0;
    const char *only = NULL;  // one shape's id, or all
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (int s = 0; s < MATMUL_GPT2_SHAPES; s++) {
            printf("%s %d %d %d\n", matmul_shapes[s].id, matmul_shapes[s].BT, matmul_shapes[s].C, matmul_shapes[s].OC);
        }
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        int known = strcmp(argv[i], "fp32") == 0;
        fp32 |= known;
        for (int s = 0; s < MATMUL_GPT2_SHAPES && !known; s++) {
            if (strcmp(argv[i], matmul_shapes[s].id) == 0) { only = argv[i], known = 1; }
        }
        if (!known) { die("usage: %s [fp32] [SHAPE]: %s is neither fp32 nor a shape's name", argv[0], argv[i]); }
    }
    gemm_init();
    matmul_set_precision(fp32 ? PRECISION_FP32 : PRECISION_BF16);
    const int threads = omp_get_max_threads();
    const char *peak_name;
    const double peak = peak_of_run(threads, &peak_name);
    printf("threads: %d; ours: %s; peak (%s): %.1f GFLOP/s\n", threads, matmul_precision_path(), peak_name, peak);
    double log_g = 0.0;
    int n = 0;
    for (int s = 0; s < MATMUL_GPT2_SHAPES; s++) {
        if (only != NULL && strcmp(only, matmul_shapes[s].id) != 0) { continue; }
        matmul_product r = matmul_product_alloc(&matmul_shapes[s], !fp32);
        for (int q = MATMUL_FWD; q <= MATMUL_DW; q++) {
            r.prod = q;
            int M, N, K;
            matmul_product_dims(&r, &M, &N, &K);
            const double flops = 2.0 * M * N * K;
            const double ms = time_best_ms(matmul_product_run, &r, flops > 2e10 ? 5 : 15);
            const double g = flops / (ms * 1e6);
            printf("product %-15s %-4s M=%d N=%d K=%d %9.3f ms %8.1f GFLOP/s %5.1f%% of peak\n", matmul_shapes[s].id,
                   matmul_product_names[q], M, N, K, ms, g, peak > 0 ? 100.0 * g / peak : 0.0);
            log_g += log(g);
            n++;
        }
        matmul_product_free(&r);
    }
    const double gm = exp(log_g / n);
    printf("geometric mean: %.1f GFLOP/s, %.1f%% of peak\n", gm, peak > 0 ? 100.0 * gm / peak : 0.0);
    return 0;
}
