// fc's backward in bf16 training, as block_backward calls it: old (gelu_backward into floats, then the
// products from the floats and the bias pass) against new (gelu_backward_bf16_bias, then the products
// from the bits), calls alternated, medians. Prints the dW/dinp/dbias agreement too.
#include "common.h"
#include "llmc/adamw.h"
#include "llmc/gelu.h"
#include "llmc/matmul.h"
static int cmpd(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    const int N = argc > 1 ? atoi(argv[1]) : 4096, C = 768, OC = 3072, R = argc > 2 ? atoi(argv[2]) : 15;
    gemm_init();
    matmul_set_precision(PRECISION_BF16);
    const size_t n = (size_t)N * OC;
    float *fch = make_random(n, 1), *dout = make_random(n, 2), *ln2 = make_random((size_t)N * C, 3);
    for (size_t i = 0; i < n; i++) { fch[i] *= 6.0f; }
    float *w = make_random_weight((size_t)OC * C, 4);
    uint16_t *w16 = aligned_alloc_or_die((size_t)OC * C * 2, "w16");
    bf16_round_floats(w16, w, (size_t)OC * C);
    float *panels = aligned_alloc_or_die(gemm_packed_b_words(OC, C) * sizeof(float), "panels");
    gemm_pack_b_whole(OC, C, w16, C, 1, panels);
    float *buf = aligned_alloc_or_die(n * 4, "buf");
    uint16_t *d16 = aligned_alloc_or_die(n * 2, "d16");
    float *dln[2], *dw[2], *db[2];
    for (int k = 0; k < 2; k++) {
        dln[k] = aligned_alloc_or_die((size_t)N * C * 4, "dln"); dw[k] = aligned_alloc_or_die((size_t)OC * C * 4, "dw");
        db[k] = aligned_alloc_or_die(OC * 4, "db");
    }
    const unsigned flags = MATMUL_OVERWRITE_DINP | MATMUL_OVERWRITE_DWEIGHT | MATMUL_OVERWRITE_DBIAS;
    const int ftz = gemm_flushes_bf16_denormals();
    double t[2][3][64];
    for (int r = 0; r < R + 2; r++) {
        for (int k = 0; k < 2; k++) {
            double t0 = now_seconds(), t1, t2;
            if (k == 0) {
                gelu_backward(buf, fch, dout, n); t1 = now_seconds();
                matmul_backward_ex(dln[0], dw[0], db[0], buf, ln2, w, w16, panels, N, C, OC, flags, NULL);
            } else {
                gelu_backward_bf16_bias(d16, db[1], fch, dout, N, OC, 1, ftz); t1 = now_seconds();
                matmul_backward_bf16_dout(dln[1], dw[1], d16, OC, ln2, w, w16, panels, N, C, OC, flags, NULL);
            }
            t2 = now_seconds();
            if (r >= 2) { t[k][0][r - 2] = (t1 - t0) * 1e3; t[k][1][r - 2] = (t2 - t1) * 1e3; t[k][2][r - 2] = (t2 - t0) * 1e3; }
        }
    }
    const int same = !memcmp(dln[0], dln[1], (size_t)N * C * 4) && !memcmp(dw[0], dw[1], (size_t)OC * C * 4) && !memcmp(db[0], db[1], OC * 4);
    printf("N=%d %s, %d threads, medians of %d alternated calls; results %s\n", N, matmul_precision_path(), omp_get_max_threads(), R,
           same ? "the same bits" : "DIFFER");
    const char *name[2] = {"old: gelu_backward floats, products + bias pass", "new: gelu_backward_bf16_bias, products from bits"};
    for (int k = 0; k < 2; k++) {
        for (int p = 0; p < 3; p++) { qsort(t[k][p], R, sizeof(double), cmpd); }
        printf("  %-50s gelu %7.3f  products %7.3f  both %7.3f ms\n", name[k], t[k][0][R / 2], t[k][1][R / 2], t[k][2][R / 2]);
    }
    return 0;
}
