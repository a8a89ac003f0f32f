/*
Two builds of attention (llmc/attention.h), A and B, compiled with different -D settings, timed
against each other on GPT-2 124M's attention (B=4, NH=12, hs=64) at T=64 and T=1024, forward and
backward, as gemm_ab.c does for the GEMM: the builds alternate in rounds of about 100 ms, and each
pass's ratio is the median over the rounds of A's time over B's in the same round, so that a
machine whose speed drifts from minute to minute (the Xeon VMs with AMX: 2x within minutes) still
compares the two. Both builds must give the same bits, or it says how far apart they are.

    make attention_ab B_FLAGS="-DATTN_BK=128"          # A: the defaults (A_FLAGS="")
    OMP_NUM_THREADS=2 ./attention_ab [bf16|fp32] [ROUNDS]   # bf16 and 9 rounds by default

Without flags the two builds are the same: the ratios then show this machine's noise floor.
*/
#include "common.h"
#include "matmul_bench.h"

typedef void attn_build(int bf16, int backward, float *out, float *lse, float *dqkv, const float *dout,
                        const float *qkv, int B, int T, int C, int NH);
attn_build attn_a, attn_b;

typedef struct {
    attn_build *build;
    int bf16, backward, B, T, C, NH;
    float *out, *lse, *dqkv;
    const float *dout, *qkv;
} pass;

static void run(void *p) {
    const pass *r = p;
    r->build(r->bf16, r->backward, r->out, r->lse, r->dqkv, r->dout, r->qkv, r->B, r->T, r->C, r->NH);
}

#define MAX_ROUNDS 41

int main(int argc, char **argv) {
    const int bf16 = argc > 1 ? strcmp(argv[1], "bf16") == 0 : 1;
    const int rounds = argc > 2 ? atoi(argv[2]) : 9;
    if ((argc > 1 && !bf16 && strcmp(argv[1], "fp32") != 0) || rounds < 1 || rounds > MAX_ROUNDS) {
        die("usage: %s [bf16|fp32] [ROUNDS: 1..%d]", argv[0], MAX_ROUNDS);
    }
    printf("attention_ab: %s, %d threads, %d rounds; ratio = median over the rounds of A ms / B ms (> 1: B faster)\n",
           bf16 ? "bf16" : "fp32", omp_get_max_threads(), rounds);
    const int Ts[2] = {64, 1024}, B = 4, C = 768, NH = 12;
    int differ = 0;
    for (int s = 0; s < 2; s++) {
        const int T = Ts[s];
        const size_t n = (size_t)B * T * C, nl = (size_t)B * NH * T;
        float *qkv = make_random(3 * n, 1), *dout = make_random(n, 2);
        // out and lse of A's forward pass feed both builds' backward passes
        float *out_a = make_random(n, 3), *out_b = make_random(n, 4), *lse_a = make_random(nl, 5), *lse_b = make_random(nl, 6);
        float *dqkv_a = make_random(3 * n, 7), *dqkv_b = make_random(3 * n, 8);
        for (int backward = 0; backward < 2; backward++) {
            pass A = {attn_a, bf16, backward, B, T, C, NH, out_a, lse_a, dqkv_a, dout, qkv};
            pass Bp = {attn_b, bf16, backward, B, T, C, NH, out_b, lse_b, dqkv_b, dout, qkv};
            if (backward) { Bp.out = out_a, Bp.lse = lse_a; }  // the same inputs
            run(&A);
            run(&Bp);
            const int same = backward ? memcmp(dqkv_a, dqkv_b, 3 * n * sizeof(float)) == 0
                                      : memcmp(out_a, out_b, n * sizeof(float)) == 0 && memcmp(lse_a, lse_b, nl * sizeof(float)) == 0;
            differ |= !same;
            double best_a, best_b;
            const double med = bench_ab(run, &A, &Bp, rounds, 100.0, &best_a, &best_b);
            // the two products of each pass (forward: Q K^T, P V; backward: four), over the causal half
            const double flops = (backward ? 4.0 : 2.0) * 2.0 * B * NH * (C / NH) * T * (T + 1.0) / 2.0;
            printf("T=%-5d %s A %8.3f ms %6.1f GFLOP/s | B %8.3f ms %6.1f GFLOP/s | A/B %.3f | %s\n", T,
                   backward ? "backward" : "forward ", best_a, gflops(flops, best_a), best_b, gflops(flops, best_b),
                   med, same ? "same bits" : "results differ");
            if (!same) {
                if (backward) {
                    printf("  largest |A - B| / max |A|: dqkv %.2e\n", max_rel_err(dqkv_b, dqkv_a, 3 * n));
                } else {
                    printf("  largest |A - B| / max |A|: out %.2e, lse %.2e\n", max_rel_err(out_b, out_a, n),
                           max_rel_err(lse_b, lse_a, nl));
                }
            }
        }
        free(qkv); free(dout); free(out_a); free(out_b); free(lse_a); free(lse_b); free(dqkv_a); free(dqkv_b);
    }
    printf("results %s\n", differ ? "differ" : "bit-identical");
    return 0;
}
