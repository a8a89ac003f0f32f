/*
Two builds of the GEMM (llmc/gemm.h), A and B, compiled with different -D settings, timed
against each other on GPT-2 124M's products (matmul_bench.h's shapes, each of a layer's three
products), for tuning that a whole-harness run cannot resolve: this VM's speed drifts by 5-10%
from minute to minute, so two builds timed a few minutes apart compare the drift. Here they
alternate in rounds a few hundred ms long, and each product's ratio is the median over the
rounds of A's time over B's in the same round. Both builds must also give the same results
(bit for bit, unless B changes the order of the sums: then it says how far apart).

    make gemm_ab B_FLAGS="-DGEMM_C_LEAD=16"           # A: the defaults (A_FLAGS="" )
    OMP_NUM_THREADS=2 ./gemm_ab [bf16|fp32] [ROUNDS]     # bf16 and 7 rounds by default

Without flags the two builds are the same: the ratios then show this machine's noise floor
(within 1-2% per product on the Zen 4 VM, 0.3% on the geometric mean).
*/
#include "common.h"
#include "matmul_bench.h"

typedef void gemm_build(int bf16, int M, int N, int K, const float *a, ptrdiff_t rs_a, ptrdiff_t cs_a, const float *b,
                        ptrdiff_t rs_b, ptrdiff_t cs_b, float *c, const float *bias, const float *addend, int gelu,
                        float *pre);
gemm_build gemm_a, gemm_b;

typedef struct {
    gemm_build *build;
    int bf16, M, N, K;
    const float *a, *b;
    ptrdiff_t rs_a, cs_a, rs_b, cs_b;
    float *c;
    const float *bias, *addend;  // the epilogue, as in the model (see forward_epilogue)
    int gelu;
    float *pre;
} product;

static void run(void *p) {
    const product *r = p;
    r->build(r->bf16, r->M, r->N, r->K, r->a, r->rs_a, r->cs_a, r->b, r->rs_b, r->cs_b, r->c, r->bias, r->addend,
             r->gelu, r->pre);
}

#define MAX_ROUNDS 31

// The forward products' epilogues in the model (llmc/matmul.h, per matmul_shapes entry 0-8): the
// bias, the residual add of the two projections, GELU with its input kept for the backward pass
// (fc); none for the LM head. The products to the input and the weights have none (they
// overwrite their gradients on a step's first backward pass).
enum { EP_NONE, EP_BIAS, EP_RESIDUAL, EP_GELU };
static const int forward_epilogue[MATMUL_GPT2_SHAPES] = {EP_BIAS, EP_RESIDUAL, EP_GELU, EP_RESIDUAL,
                                        EP_BIAS, EP_RESIDUAL, EP_GELU, EP_RESIDUAL, EP_NONE};
static const char *const epilogue_names[] = {"", " + bias", " + bias + residual", " + bias, GELU (pre kept)"};

int main(int argc, char **argv) {
    const int bf16 = argc > 1 ? strcmp(argv[1], "bf16") == 0 : 1;
    const int rounds = argc > 2 ? atoi(argv[2]) : 7;
    if ((argc > 1 && !bf16 && strcmp(argv[1], "fp32") != 0) || rounds < 1 || rounds > MAX_ROUNDS) {
        die("usage: %s [bf16|fp32] [ROUNDS: 1..%d]", argv[0], MAX_ROUNDS);
    }
    gemm_init();
    printf("gemm_ab: %s, %d threads, %d rounds; ratio = median over the rounds of A ms / B ms (> 1: B faster)\n",
           bf16 ? "bf16" : "fp32", omp_get_max_threads(), rounds);
    double log_sum = 0.0;
    int n = 0, differ = 0;
    for (int s = 0; s < MATMUL_GPT2_SHAPES; s++) {
        const matmul_shape sh = matmul_shapes[s];
        const int BT = sh.BT, C = sh.C, OC = sh.OC;
        // the weight at the model's size: fc's GELU epilogue then sees the model's pre-activations
        float *inp = make_random((size_t)BT * C, 1), *w = make_random_weight((size_t)OC * C, 2);
        float *dout = make_random((size_t)BT * OC, 3);
        size_t nmax = (size_t)BT * OC;
        if ((size_t)BT * C > nmax) { nmax = (size_t)BT * C; }
        if ((size_t)OC * C > nmax) { nmax = (size_t)OC * C; }
        float *ca = make_random(nmax, 4), *cb = make_random(nmax, 5);
        float *pa = make_random((size_t)BT * OC, 6), *pb = make_random((size_t)BT * OC, 7);
        const float *bias = make_random(OC, 8), *residual = make_random((size_t)BT * OC, 9);
        const int ep = forward_epilogue[s];
        const product prods[3] = {  // as in matmul_bf16.c
            {.M = BT, .N = OC, .K = C, .a = inp, .b = w, .rs_a = C, .cs_a = 1, .rs_b = 1, .cs_b = C,
             .bias = ep != EP_NONE ? bias : NULL, .addend = ep == EP_RESIDUAL ? residual : NULL, .gelu = ep == EP_GELU},
            {.M = BT, .N = C, .K = OC, .a = dout, .b = w, .rs_a = OC, .cs_a = 1, .rs_b = C, .cs_b = 1},
            {.M = OC, .N = C, .K = BT, .a = dout, .b = inp, .rs_a = 1, .cs_a = OC, .rs_b = C, .cs_b = 1},
        };
        const char *names[3] = {"fwd ", "dinp", "dw  "};
        for (int q = 0; q < 3; q++) {
            product A = prods[q], B = prods[q];
            A.build = gemm_a, B.build = gemm_b;
            A.bf16 = B.bf16 = bf16;
            A.c = ca, B.c = cb;
            if (A.gelu) { A.pre = pa, B.pre = pb; }
            run(&A);
            run(&B);
            // same bits compared as bits (a NaN in either build is a difference too); the error only
            // says how large a difference is
            const size_t nc = (size_t)A.M * A.N;
            const int same = memcmp(ca, cb, nc * sizeof(float)) == 0 && (!A.gelu || memcmp(pa, pb, nc * sizeof(float)) == 0);
            differ |= !same;
            double best_a, best_b;
            const double med = bench_ab(run, &A, &B, rounds, 150.0, &best_a, &best_b);
            const double flops = 2.0 * A.M * A.N * A.K;
            printf("%-18s %s M=%-5d N=%-5d K=%-5d A %8.3f ms %6.1f GFLOP/s | B %8.3f ms %6.1f GFLOP/s | A/B %.3f | %s%s\n",
                   sh.name, names[q], A.M, A.N, A.K, best_a, gflops(flops, best_a), best_b, gflops(flops, best_b), med,
                   same ? "same bits" : "results differ", q == 0 ? epilogue_names[ep] : "");
            if (!same) {
                printf("  largest |A - B| / max |A|: C %.2e", max_rel_err(cb, ca, nc));
                if (A.gelu) { printf(", pre %.2e", max_rel_err(pb, pa, nc)); }
                printf("\n");
            }
            log_sum += log(med);
            n++;
        }
        free(inp); free(w); free(dout); free(ca); free(cb); free(pa); free(pb); free((void *)bias); free((void *)residual);
    }
    printf("geometric mean of A/B over %d products: %.4f; results %s\n", n, exp(log_sum / n),
           differ ? "differ (B sums in another order)" : "bit-identical");
    return 0;
}
