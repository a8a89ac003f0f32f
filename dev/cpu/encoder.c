/*
The encoder (llmc/encoder.h): out = wte[token] + wpe[t], and its backward, which
accumulates dout into the rows of dwte and dwpe.

  ./encoder [VERSION]

Kernels and versions:
  encoder_forward
    1  the simple code: scalar, parallel over (b, t)
    2  llmc/encoder.h: vectorized
  encoder_backward
    1  the simple code: each thread owns a range of channels and walks every row (a
       token id can repeat, so splitting rows would need atomics or partials)
    2  llmc/encoder.h: the same split in whole vectors, vectorized

Tokens are drawn from a small vocabulary (300 ids) so that ids repeat within a batch.
Bytes per call: forward reads a wte and a wpe row and writes out, 3 N C floats; backward
reads dout and reads and writes a dwte and a dwpe row per position, 5 N C floats.
*/
#include "common.h"
#include "llmc/encoder.h"

// 1: the simple code, as it was in llmc/encoder.h.
static void encoder_forward1(float *out, const int *inp, const float *wte, const float *wpe, int B, int T, int C) {
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *tok = wte + (size_t)inp[b * T + t] * C;
            const float *pos = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++) { o[c] = tok[c] + pos[c]; }
        }
    }
}

static void encoder_backward1(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T, int C) {
    #pragma omp parallel
    {
        int nth = omp_get_num_threads(), tid = omp_get_thread_num();
        int c0 = (int)((long)C * tid / nth), c1 = (int)((long)C * (tid + 1) / nth);
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                const float *d = dout + ((size_t)b * T + t) * C;
                float *tok = dwte + (size_t)inp[b * T + t] * C;
                float *pos = dwpe + (size_t)t * C;
                for (int c = c0; c < c1; c++) {
                    tok[c] += d[c];
                    pos[c] += d[c];
                }
            }
        }
    }
}

typedef struct {
    float *out, *dwte, *dwpe;
    const float *wte, *wpe, *dout;
    const int *inp;
    int B, T, C;
} Args;

static void fwd1(void *p) { Args *a = p; encoder_forward1(a->out, a->inp, a->wte, a->wpe, a->B, a->T, a->C); }
static void fwd2(void *p) { Args *a = p; encoder_forward(a->out, a->inp, a->wte, a->wpe, a->B, a->T, a->C); }
static void bwd1(void *p) { Args *a = p; encoder_backward1(a->dwte, a->dwpe, a->dout, a->inp, a->B, a->T, a->C); }
static void bwd2(void *p) { Args *a = p; encoder_backward(a->dwte, a->dwpe, a->dout, a->inp, a->B, a->T, a->C); }

int main(int argc, char **argv) {
    const int only = version_arg(argc, argv);
    const struct { const char *name; int B, T, C; } shapes[] = {
        {"B4 T64 C768", 4, 64, 768}, {"B4 T1024 C768", 4, 1024, 768}, {"B3 T29 C57", 3, 29, 57}, {"B1 T7 C5", 1, 7, 5}};
    enum { VOCAB = 300 };
    printf("encoder: %d threads, VEC_WIDTH %d\n", omp_get_max_threads(), VEC_WIDTH);
    int fails = 0;
    for (int backward = 0; backward <= 1; backward++) {
        printf("%s\n", backward ? "encoder_backward" : "encoder_forward");
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
            const int B = shapes[s].B, T = shapes[s].T, C = shapes[s].C, N = B * T;
            const size_t NC = (size_t)N * C;
            int *inp = malloc_or_die(N * sizeof(int), "tokens");
            for (int i = 0; i < N; i++) { inp[i] = (int)((i * 2654435761u) % VOCAB); }
            float *wte = make_random((size_t)VOCAB * C, 1), *wpe = make_random((size_t)T * C, 2);
            float *dout = make_random(NC, 3);
            Args a = {aligned_alloc_or_die(NC * 4, "out"), aligned_alloc_or_die((size_t)VOCAB * C * 4, "dwte"),
                      aligned_alloc_or_die((size_t)T * C * 4, "dwpe"), wte, wpe, dout, inp, B, T, C};
            Outputs o = {0};
            if (backward) {
                outputs_add(&o, "dwte", a.dwte, wte, (size_t)VOCAB * C);  // accumulates onto these
                outputs_add(&o, "dwpe", a.dwpe, wpe, (size_t)T * C);
            } else {
                outputs_add(&o, "out", a.out, NULL, NC);
            }
            void (*fn[2])(void *) = {backward ? bwd1 : fwd1, backward ? bwd2 : fwd2};
            const char *what[2] = {"simple", "llmc: vectorized"};
            for (int v = 1; v <= 2; v++) {
                if (v == 1 || only == 0 || only == v) {
                    fails += !run_version(shapes[s].name, v, what[v - 1], fn[v - 1], &a, &o,
                                          (backward ? 5.0 : 3.0) * NC * sizeof(float), 1e-6, only == 0 || only == v);
                }
            }
            outputs_free(&o);
            free(a.out); free(a.dwte); free(a.dwpe); free(inp); free(wte); free(wpe); free(dout);
        }
    }
    printf("%s\n", fails ? "FAIL" : "OK: every version matches version 1");
    return fails ? 1 : 0;
}
