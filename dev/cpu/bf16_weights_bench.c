/*
The bf16 GEMM with B packed from fp32 weights (rounded while packing) against B packed from
their bf16 copy (gemm_ex's b16, what gpt2.h's AdamW writes), and against B packed whole before
the call (gemm_ex_packed_b: the most that weights kept in the GEMM's packed panels between
steps could save, with AdamW writing them for free), on GPT-2 124M's weight products at B*T
rows: forward (B = weight^T) and the input gradient (B = weight). Median of `reps` calls each,
interleaved; also checks that the three give the same bits.
    gcc -O3 -march=native -fopenmp -I. dev/cpu/bf16_weights_bench.c -o build/bf16_weights_bench -lm
    OMP_NUM_THREADS=2 ./build/bf16_weights_bench [rows=256] [reps=21]
*/
#include "common.h"
#include "llmc/adamw.h"
#include "llmc/matmul.h"

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const int BT = argc > 1 ? atoi(argv[1]) : 256, reps = argc > 2 ? atoi(argv[2]) : 21;
    matmul_set_precision(PRECISION_BF16);
    printf("%s, %d threads, BT=%d\n", matmul_precision_path(), omp_get_max_threads(), BT);
    const struct { const char *name; int C, OC; } shapes[] = {
        {"qkv", 768, 2304}, {"attproj", 768, 768}, {"fc", 768, 3072}, {"fcproj", 3072, 768}, {"lm head", 768, 50304}};
    double total[3][2] = {{0}};
    for (int s = 0; s < 5; s++) {
        const int C = shapes[s].C, OC = shapes[s].OC;
        float *w = make_random((size_t)OC * C, 1), *inp = make_random((size_t)BT * C, 2), *dout = make_random((size_t)BT * OC, 3);
        uint16_t *w16 = aligned_alloc_or_die((size_t)OC * C * 2, "w16");
        bf16_round_floats(w16, w, (size_t)OC * C);
        // the weights packed whole, as the forward (B = weight^T) and the input gradient (B = weight) read them
        float *fwd_panels = aligned_alloc_or_die(sizeof(float) * gemm_packed_b_words(C, OC), "fwd panels");
        float *bwd_panels = aligned_alloc_or_die(sizeof(float) * gemm_packed_b_words(OC, C), "bwd panels");
        gemm_pack_b_whole(C, OC, w16, 1, C, fwd_panels);
        gemm_pack_b_whole(OC, C, w16, C, 1, bwd_panels);
        float *out[3], *dinp[3];
        for (int k = 0; k < 3; k++) {
            out[k] = aligned_alloc_or_die((size_t)BT * OC * 4, "out");
            dinp[k] = aligned_alloc_or_die((size_t)BT * C * 4, "dinp");
        }
        double *t = malloc(sizeof(double) * reps * 6);
        for (int r = 0; r < reps; r++) {
            for (int k = 0; k < 3; k++) {  // k 0: fp32 weights, 1: the bf16 copy, 2: packed whole
                double t0 = omp_get_wtime(), t1, t2;
                if (k < 2) {
                    matmul_forward(out[k], inp, w, k ? w16 : NULL, NULL, BT, C, OC);
                    t1 = omp_get_wtime();
                    matmul_backward_ex(dinp[k], NULL, NULL, dout, inp, w, k ? w16 : NULL, NULL, BT, C, OC, MATMUL_OVERWRITE_DINP,
                                       NULL);
                } else {  // as matmul_forward and matmul_backward_ex call gemm_ex
                    gemm_ex_packed_b(BT, OC, C, inp, NULL, C, 1, fwd_panels, out[k], OC, NULL);
                    t1 = omp_get_wtime();
                    gemm_ex_packed_b(BT, C, OC, dout, NULL, OC, 1, bwd_panels, dinp[k], C, NULL);
                }
                t2 = omp_get_wtime();
                t[(k * 2 + 0) * reps + r] = (t1 - t0) * 1e3;
                t[(k * 2 + 1) * reps + r] = (t2 - t1) * 1e3;
            }
        }
        int same = 1;
        for (int k = 1; k < 3; k++) {
            same &= memcmp(out[0], out[k], (size_t)BT * OC * 4) == 0 && memcmp(dinp[0], dinp[k], (size_t)BT * C * 4) == 0;
        }
        double med[6];
        for (int i = 0; i < 6; i++) {
            qsort(t + i * reps, reps, sizeof(double), cmp_double);
            med[i] = t[i * reps + reps / 2];
        }
        printf("%-8s (%5d x %4d): forward %7.3f -> %7.3f -> %7.3f ms, dinp %7.3f -> %7.3f -> %7.3f ms%s\n", shapes[s].name,
               OC, C, med[0], med[2], med[4], med[1], med[3], med[5], same ? "" : "  RESULTS DIFFER");
        const double x = s < 4 ? 12.0 : 1.0;  // 12 blocks, one head
        for (int k = 0; k < 3; k++) { total[k][0] += x * med[2 * k], total[k][1] += x * med[2 * k + 1]; }
        free(w); free(inp); free(dout); free(w16); free(t); free(fwd_panels); free(bwd_panels);
        for (int k = 0; k < 3; k++) { free(out[k]); free(dinp[k]); }
    }
    printf("(each: fp32 weights -> their bf16 copy -> packed whole beforehand)\n");
    printf("a step's weight products (12 blocks + the head): forward %.1f -> %.1f -> %.1f ms, dinp %.1f -> %.1f -> %.1f ms\n",
           total[0][0], total[1][0], total[2][0], total[0][1], total[1][1], total[2][1]);
    return 0;
}
