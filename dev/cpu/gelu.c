/*
GELU forward and backward (llmc/gelu.h), tanh approximation.

  ./gelu [VERSION]

Kernels and versions:
  gelu_forward    out = gelu(inp)
    1  the simple code: scalar tanhf (libm), parallel
    2  llmc/gelu.h: vectorized, as x / (1 + exp(-2u)) with vec_exp
  gelu_backward   dinp = gelu'(inp) * dout, in place as the model calls it
    1  the simple code: scalar tanhf
    2  llmc/gelu.h: vectorized, s (1 + 2 x u' (1 - s)) with s = 1 / (1 + exp(-2u))

Sizes: the MLP's (B, T, 4C) at GPT-2 124M, B=4 with T=64 and T=1024, and odd ones.
Bytes per call: forward reads inp, writes out: 2 floats per element; backward reads inp
and dout, writes dinp: 3. The inputs are pre-activations spread over about [-6, 6].
*/
#include "common.h"
#include "llmc/gelu.h"

// 1: the simple code, as it was in llmc/gelu.h.
static void gelu_forward1(float *out, const float *inp, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + 0.044715f * x * x * x)));
    }
}

static void gelu_backward1(float *dinp, const float *inp, const float *dout, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float du = GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = (0.5f * (1.0f + th) + 0.5f * x * sech2 * du) * dout[i];
    }
}

typedef struct {
    float *out, *dinp;
    const float *inp, *dout;
    size_t N;
} Args;

static void fwd1(void *p) { Args *a = p; gelu_forward1(a->out, a->inp, a->N); }
static void fwd2(void *p) { Args *a = p; gelu_forward(a->out, a->inp, a->N); }
// Not in place here (the model's call is): repeated timed calls would shrink dout to subnormals.
static void bwd1(void *p) { Args *a = p; gelu_backward1(a->dinp, a->inp, a->dout, a->N); }
static void bwd2(void *p) { Args *a = p; gelu_backward(a->dinp, a->inp, a->dout, a->N); }

int main(int argc, char **argv) {
    const int only = version_arg(argc, argv);
    const struct { const char *name; size_t N; } shapes[] = {
        {"B4 T64 4C=3072", 256 * 3072}, {"B4 T1024 4C=3072", 4096 * 3072}, {"B3 T29 4C=228", 87 * 228}, {"7x20", 140}};
    printf("gelu: %d threads, VEC_WIDTH %d\n", omp_get_max_threads(), VEC_WIDTH);
    int fails = 0;
    for (int backward = 0; backward <= 1; backward++) {
        printf("%s\n", backward ? "gelu_backward" : "gelu_forward");
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
            const size_t N = shapes[s].N;
            float *inp = make_random(N, 1), *dout = make_random(N, 2);
            for (size_t i = 0; i < N; i++) { inp[i] *= 6.0f; }
            Args a = {aligned_alloc_or_die(N * 4, "out"), aligned_alloc_or_die(N * 4, "dinp"), inp, dout, N};
            Outputs o = {0};
            if (backward) { outputs_add(&o, "dinp", a.dinp, NULL, N); }
            else { outputs_add(&o, "out", a.out, NULL, N); }
            void (*fn[2])(void *) = {backward ? bwd1 : fwd1, backward ? bwd2 : fwd2};
            const char *what[2] = {"simple (tanhf)", "llmc: vectorized (vec_exp)"};
            for (int v = 1; v <= 2; v++) {
                if (v == 1 || only == 0 || only == v) {
                    fails += !run_version(shapes[s].name, v, what[v - 1], fn[v - 1], &a, &o,
                                          (backward ? 3.0 : 2.0) * N * sizeof(float), 1e-6, only == 0 || only == v);
                }
            }
            outputs_free(&o);
            free(a.out); free(a.dinp); free(inp); free(dout);
        }
    }
    printf("%s\n", fails ? "FAIL" : "OK: every version matches version 1");
    return fails ? 1 : 0;
}
