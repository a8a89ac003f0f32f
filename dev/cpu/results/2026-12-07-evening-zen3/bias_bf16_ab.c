// The backward of qkv or fc in bf16 training, as block_backward calls it: old (fc: gelu_backward into
// floats; then the products from the floats and the bias pass: matmul_backward_ex) against new (the
// bias pass that also rounds dout to bf16 bits, with GELU's backward first for fc:
// matmul_backward_bias_bf16; then the products from the bits: matmul_backward_bf16_dout), calls
// alternated, medians; whether dinp, dW and db agree bit for bit.
//   ./bias_bf16_ab qkv|fc [N=4096] [calls=15] [panels=0: 1 reads the weight packed whole, as on AMX]
// Built from dev/cpu: gcc -O3 -march=native -fopenmp -I../.. -I. bias_bf16_ab.c -o bias_bf16_ab -lm
#include "common.h"
#include "llmc/adamw.h"
#include "llmc/matmul.h"
static int cmpd(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    const int fc = argc > 1 && strcmp(argv[1], "fc") == 0;
    const int N = argc > 2 ? atoi(argv[2]) : 4096, C = 768, OC = fc ? 4 * 768 : 3 * 768, R = argc > 3 ? atoi(argv[3]) : 15;
    const int use_panels = argc > 4 ? atoi(argv[4]) : 0;
    if (R < 1 || R > 64 || N < 1) { fprintf(stderr, "usage: bias_bf16_ab qkv|fc [N] [calls 1..64] [panels]\n"); return 1; }
    gemm_init();
    matmul_set_precision(PRECISION_BF16);
    const size_t n = (size_t)N * OC;
    float *dout = make_random(n, 2), *inp = make_random((size_t)N * C, 3), *fch = NULL;
    if (fc) {
        fch = make_random(n, 1);
        for (size_t i = 0; i < n; i++) { fch[i] *= 6.0f; }
    }
    float *w = make_random_weight((size_t)OC * C, 4);
    uint16_t *w16 = aligned_alloc_or_die((size_t)OC * C * 2, "w16");
    bf16_round_floats(w16, w, (size_t)OC * C);
    float *panels = NULL;
    if (use_panels) {
        panels = aligned_alloc_or_die(gemm_packed_b_words(OC, C) * sizeof(float), "panels");
        gemm_pack_b_whole(OC, C, w16, C, 1, panels);
    }
    float *buf = aligned_alloc_or_die(n * 4, "buf");
    uint16_t *d16 = aligned_alloc_or_die(n * 2, "d16");
    float *dinp[2], *dw[2], *db[2];
    for (int k = 0; k < 2; k++) {
        dinp[k] = aligned_alloc_or_die((size_t)N * C * 4, "dinp"); dw[k] = aligned_alloc_or_die((size_t)OC * C * 4, "dw");
        db[k] = aligned_alloc_or_die(OC * 4, "db");
    }
    const unsigned flags = MATMUL_OVERWRITE_DINP | MATMUL_OVERWRITE_DWEIGHT | MATMUL_OVERWRITE_DBIAS;
    const int ftz = gemm_flushes_bf16_denormals();
    double t[2][3][64];
    for (int r = 0; r < R + 2; r++) {
        for (int k = 0; k < 2; k++) {
            double t0 = now_seconds(), t1 = t0, t2;
            if (k == 0) {
                const float *d = dout;
                if (fc) { gelu_backward(buf, fch, dout, n); d = buf; t1 = now_seconds(); }
                matmul_backward_ex(dinp[0], dw[0], db[0], d, inp, w, w16, panels, N, C, OC, flags, NULL);
            } else {
                matmul_backward_bias_bf16(d16, db[1], dout, fch, N, OC, 1, ftz); t1 = now_seconds();
                matmul_backward_bf16_dout(dinp[1], dw[1], d16, OC, inp, w, w16, panels, N, C, OC, flags, NULL);
            }
            t2 = now_seconds();
            if (r >= 2) { t[k][0][r - 2] = (t1 - t0) * 1e3; t[k][1][r - 2] = (t2 - t1) * 1e3; t[k][2][r - 2] = (t2 - t0) * 1e3; }
        }
    }
    const int same = !memcmp(dinp[0], dinp[1], (size_t)N * C * 4) && !memcmp(dw[0], dw[1], (size_t)OC * C * 4) &&
                     !memcmp(db[0], db[1], OC * 4);
    printf("%s N=%d %s%s, %d threads, medians of %d alternated calls; results %s\n", fc ? "fc" : "qkv", N,
           matmul_precision_path(), panels ? ", weight panels" : "", omp_get_max_threads(), R,
           same ? "the same bits" : "DIFFER");
    const char *name[2][2] = {{"old: products from floats + bias pass", "new: bias pass with bits, products from bits"},
                              {"old: gelu_backward, products + bias pass", "new: gelu + bias pass with bits, products"}};
    for (int k = 0; k < 2; k++) {
        for (int p = 0; p < 3; p++) { qsort(t[k][p], R, sizeof(double), cmpd); }
        printf("  %-46s first pass %7.3f  products %7.3f  both %7.3f ms\n", name[fc][k], t[k][0][R / 2], t[k][1][R / 2],
               t[k][2][R / 2]);
    }
    return 0;
}
