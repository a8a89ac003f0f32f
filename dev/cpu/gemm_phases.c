/*
Where the GEMM's time goes on GPT-2 124M's 27 products (matmul_bench.h's MATMUL_GPT2_SHAPES, each of
a layer's three products), called as train_gpt2 calls them: matmul_forward and matmul_backward_ex,
B from the bf16 copy of the weights in bf16. llmc/gemm.h, built here with GEMM_PHASE_TIMING,
counts each thread's time stamp counter ticks in packing B, packing A (its own blocks, or its
share of the shared A and the barrier after it), the tiles, and the whole call; this prints
each as ms per call, the mean over the threads, beside the call's wall time (best of the calls),
then the same summed over a layer's 12 products at T=64 and at T=1024 and over the LM head's 3.
In bf16 the LM head's two backward products run once more with dout as bf16 bits ("A bf16"), as
train_gpt2 gives them its dlogits (llmc/classifier.h): the same tiles, half the bytes to pack A from.
Packing plus tiles plus waiting falls short of the call by the loops' own overhead.

    OMP_NUM_THREADS=2 ./gemm_phases [fp32]            # bf16 on the run's path by default
    LLMC_BF16_PATH=amx OMP_NUM_THREADS=2 taskset -c 0,1 ./gemm_phases    # the lent Xeon's AMX

On the lent Xeon (2026-11-27, dev/cpu/results/2026-11-27-xeon-amx/run11) the AMX tiles took
80-85% of every group, at about 450 GFLOP/s a thread.
*/
#define GEMM_PHASE_TIMING
#include "common.h"
#include "matmul_bench.h"

// Time stamp counter ticks per ms, over 200 ms of wall time.
static double ticks_per_ms(void) {
    const double t0 = omp_get_wtime();
    const unsigned long long c0 = __rdtsc();
    while (omp_get_wtime() - t0 < 0.2) {}
    return (double)(__rdtsc() - c0) / ((omp_get_wtime() - t0) * 1e3);
}

int main(int argc, char **argv) {
    const int fp32 = argc > 1 && strcmp(argv[1], "fp32") == 0;
    if (argc > 1 && !fp32) { die("usage: %s [fp32]", argv[0]); }
    gemm_init();
    matmul_set_precision(fp32 ? PRECISION_FP32 : PRECISION_BF16);
    const double tpm = ticks_per_ms();
    const int threads = omp_get_max_threads(), calls = 9;
    printf("threads: %d; %s; ms per call (wall: best of %d; the rest: the mean over the threads)\n", threads,
           matmul_precision_path(), calls);
    enum { GROUPS = 3 };
    static const char *const group_names[GROUPS] = {"a layer's 12 at T=64", "a layer's 12 at T=1024", "the LM head's 3"};
    double sums[GROUPS][GEMM_PHASES + 1] = {{0}};  // the phases, then wall
    for (int s = 0; s < MATMUL_GPT2_SHAPES; s++) {
        const int group = s < 4 ? 0 : (s < 8 ? 1 : 2);  // matmul_bench.h's order: T=64's four, T=1024's, the LM head
        matmul_product r = matmul_product_alloc(&matmul_shapes[s], !fp32);
        // in bf16 the LM head's two backward products once more, dout (dlogits) as bf16 bits as
        // train_gpt2 gives it (not in the group's sums)
        const int extra = group == 2 && !fp32 ? 2 : 0;
        for (int q = MATMUL_FWD; q <= MATMUL_DW + extra; q++) {
            r.prod = q > MATMUL_DW ? q - 2 : q;
            if (q > MATMUL_DW && r.dout16 == NULL) {
                r.dout16 = aligned_alloc_or_die((size_t)r.BT * r.OC * sizeof(uint16_t), "dout's bf16 bits");
                bf16_round_floats(r.dout16, r.dout, (size_t)r.BT * r.OC);
            }
            // warm-up, not counted: 50 ms of calls at least (after a single call, the first
            // product's timed calls ran at half speed on the Zen 4 VM)
            for (const double t0 = omp_get_wtime(); omp_get_wtime() - t0 < 0.05;) { matmul_product_run(&r); }
            memset(gemm_phase_ticks, 0, sizeof(gemm_phase_ticks));
            double wall = 1e30;
            for (int i = 0; i < calls; i++) {
                const double t0 = omp_get_wtime();
                matmul_product_run(&r);
                const double ms = (omp_get_wtime() - t0) * 1e3;
                wall = ms < wall ? ms : wall;
            }
            double ph[GEMM_PHASES] = {0};
            for (int t = 0; t < threads; t++) {
                for (int k = 0; k < GEMM_PHASES; k++) { ph[k] += gemm_phase_ticks[t][k] / tpm / calls / threads; }
            }
            if (q <= MATMUL_DW) {
                for (int k = 0; k < GEMM_PHASES; k++) { sums[group][k] += ph[k]; }
                sums[group][GEMM_PHASES] += wall;
            }
            int M, N, K;
            matmul_product_dims(&r, &M, &N, &K);
            printf("%-18s %-4s M=%-5d N=%-5d K=%-5d wall %8.3f | pack B %7.3f | pack A %7.3f | tiles %8.3f | wait %6.3f | "
                   "call %8.3f | tiles %6.1f GFLOP/s a thread\n",
                   matmul_shapes[s].name, q > MATMUL_DW ? (r.prod == MATMUL_DINP ? "dinp, A bf16" : "dw, A bf16") : matmul_product_names[q], M, N, K, wall, ph[GEMM_PHASE_PACK_B], ph[GEMM_PHASE_PACK_A],
                   ph[GEMM_PHASE_TILES], ph[GEMM_PHASE_WAIT], ph[GEMM_PHASE_CALL],
                   ph[GEMM_PHASE_TILES] > 0 ? 2.0 * M * N * K / threads / (ph[GEMM_PHASE_TILES] * 1e6) : 0.0);
        }
        matmul_product_free(&r);
    }
    for (int g = 0; g < GROUPS; g++) {
        const double *x = sums[g], call = x[GEMM_PHASE_CALL];
        printf("%-24s wall %8.3f | pack B %5.1f%% | pack A %5.1f%% | tiles %5.1f%% | wait %5.1f%% of the call (%.3f ms)\n",
               group_names[g], x[GEMM_PHASES], 100 * x[GEMM_PHASE_PACK_B] / call, 100 * x[GEMM_PHASE_PACK_A] / call,
               100 * x[GEMM_PHASE_TILES] / call, 100 * x[GEMM_PHASE_WAIT] / call, call);
    }
    return 0;
}
