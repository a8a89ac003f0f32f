// matmul_backward_bias: 1024-column blocks (3 on 2 threads at OC=2304) against llmc's (whole rounds of the threads)
#include "common.h"
#include "llmc/matmul.h"
static void bias_old(float *dbias, const float *dout, int BT, int OC, int overwrite) {
    enum { MAX_COLS = 1024 };
    int nth = omp_get_max_threads();
    int blocks = (OC + MAX_COLS - 1) / MAX_COLS;
    blocks = blocks < nth ? gemm_min(nth, (OC + 15) / 16) : blocks;
    const int cols = ((OC + blocks - 1) / blocks + 15) / 16 * 16;
    #pragma omp parallel for schedule(static)
    for (int blk = 0; blk < blocks; blk++) {
        const int o0 = blk * cols, n = gemm_min(cols, OC - o0);
        float sum[MAX_COLS];
        for (int o = 0; o < n; o++) { sum[o] = 0.0f; }
        for (int i = 0; i < BT; i++) { const float *g = dout + (size_t)i * OC + o0; for (int o = 0; o < n; o++) { sum[o] += g[o]; } }
        for (int o = 0; o < n; o++) { dbias[o0 + o] = overwrite ? sum[o] : dbias[o0 + o] + sum[o]; }
    }
}
static int cmpd(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
int main(void) {
    const int shapes[][2] = {{4096, 2304}, {4096, 768}, {4096, 3072}, {256, 2304}, {256, 768}};
    for (int s = 0; s < 5; s++) {
        const int N = shapes[s][0], OC = shapes[s][1], R = 21;
        float *big = make_random((size_t)64 << 20, 9);  // 256 MB to flush the caches between calls
        float *d = make_random((size_t)N * OC, 1), *b0 = aligned_alloc_or_die(OC * 4, "b"), *b1 = aligned_alloc_or_die(OC * 4, "b");
        double t[2][32];
        volatile float sink = 0;
        for (int r = 0; r < R; r++) {
            for (int k = 0; k < 2; k++) {
                if (N == 4096) { float acc = 0; for (size_t i = 0; i < ((size_t)64 << 20); i += 16) { acc += big[i]; } sink += acc; }
                double t0 = now_seconds();
                if (k == 0) { bias_old(b0, d, N, OC, 1); } else { matmul_backward_bias(b1, d, N, OC, 1); }
                t[k][r] = (now_seconds() - t0) * 1e3;
            }
        }
        qsort(t[0], R, sizeof(double), cmpd); qsort(t[1], R, sizeof(double), cmpd);
        printf("N=%d OC=%d: 1024-column blocks %.3f ms, whole rounds %.3f ms; %s\n", N, OC, t[0][R / 2], t[1][R / 2],
               memcmp(b0, b1, OC * 4) ? "DIFFER" : "same bits");
        free(big); free(d); free(b0); free(b1);
    }
    return 0;
}
