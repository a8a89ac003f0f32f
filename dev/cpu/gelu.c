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

  gelu_backward with fc's bias gradient, in bf16 training: dinp = gelu'(inp) * dout (BT, 4C)
  as bf16 bits (what the products' packing rounds it to) and dbias = its column sums; and the
  same pass without GELU (qkv's bias and dqkv's bits, "no GELU" shapes)
    1  gelu_backward into floats, matmul_backward_bias over them, then the floats rounded
    2  llmc/matmul.h: matmul_backward_bias_bf16, one pass that stores only the bits (the
       model's call in bf16 training); the same bits

  gelu_forward in the product: pre = inp . weight^T + bias, out = gelu(pre), the MLP's first
  layer (BT rows, C = 768 to 4C = 3072), in fp32 and in bf16 on this CPU's fastest bf16 path
    1  the product (matmul_forward) into pre, then gelu_forward from pre into out
    2  llmc/matmul.h: matmul_forward_gelu, GELU in the product's epilogue (the model's call);
       the same bits

Sizes: the MLP's (B, T, 4C) at GPT-2 124M, B=4 with T=64 and T=1024, and odd ones.
Bytes per call: forward reads inp, writes out: 2 floats per element; backward reads inp
and dout, writes dinp: 3; in the product, the least it must move of the (BT, 4C) tensors,
writing pre and out: 2 (its time is mostly the product's, the same in both).
The inputs are pre-activations spread over about [-6, 6].
*/
#include "common.h"
#include "llmc/adamw.h"  // bf16_round_floats
#include "llmc/gelu.h"
#include "llmc/matmul.h"

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

typedef struct {
    float *out, *pre;
    const float *inp, *weight, *bias;
    const uint16_t *weight16;  // NULL in fp32
    int BT, C, OC;             // inp (BT, C); weight (OC, C); out, pre (BT, OC)
} ProductArgs;
static void product1(void *p) {
    ProductArgs *a = p;
    matmul_forward(a->pre, a->inp, a->weight, a->weight16, a->bias, a->BT, a->C, a->OC);
    gelu_forward(a->out, a->pre, (size_t)a->BT * a->OC);
}
static void product2(void *p) {
    ProductArgs *a = p;
    matmul_forward_gelu(a->out, a->pre, a->inp, a->weight, a->weight16, a->bias, a->BT, a->C, a->OC);
}

typedef struct {
    uint16_t *dinp16;
    float *dbias, *scratch;  // scratch: version 1's floats of GELU's backward
    const float *inp, *dout;  // inp NULL: no GELU
    int BT, OC;
} BiasArgs;
static void bias1(void *p) {
    BiasArgs *a = p;
    const size_t n = (size_t)a->BT * a->OC;
    const float *d = a->dout;  // without GELU, dout itself
    if (a->inp != NULL) {
        gelu_backward(a->scratch, a->inp, a->dout, n);
        d = a->scratch;
    }
    matmul_backward_bias(a->dbias, d, a->BT, a->OC, 1);
    bf16_round_floats(a->dinp16, d, n);
}
static void bias2(void *p) {
    BiasArgs *a = p;
    matmul_backward_bias_bf16(a->dinp16, a->dbias, a->dout, a->inp, a->BT, a->OC, 1, 0);
}

// The third kernel, gelu_backward with the bias gradient in bf16 (and the pass without GELU): both
// versions, the same bits.
static int check_bias(int only) {
    const struct { const char *name; int BT, OC, gelu; } shapes[] = {
        {"B4 T64 4C=3072", 256, 3072, 1}, {"B4 T1024 4C=3072", 4096, 3072, 1}, {"B3 T29 4C=228", 87, 228, 1}, {"7x20", 7, 20, 1},
        {"no GELU B4 T64 3C=2304", 256, 2304, 0}, {"no GELU B4 T1024 3C=2304", 4096, 2304, 0}, {"no GELU 7x20", 7, 20, 0}};
    int fails = 0;
    printf("gelu_backward with the bias gradient, dinp as bf16 bits\n");
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        const int BT = shapes[s].BT, OC = shapes[s].OC;
        const size_t n = (size_t)BT * OC;
        float *inp = make_random(n, 1), *dout = make_random(n, 2);
        for (size_t i = 0; i < n; i++) { inp[i] *= 6.0f; }
        BiasArgs a = {aligned_alloc_or_die((n + 1) * sizeof(uint16_t), "dinp16"), aligned_alloc_or_die(OC * sizeof(float), "dbias"),
                      aligned_alloc_or_die(n * sizeof(float), "scratch"), shapes[s].gelu ? inp : NULL, dout, BT, OC};
        a.dinp16[n] = 0;  // an odd count's last bits pair with zero
        Outputs o = {0};
        outputs_add(&o, "dinp16 (pairs of bits as floats)", (float *)a.dinp16, NULL, (n + 1) / 2);
        outputs_add(&o, "dbias", a.dbias, NULL, OC);
        void (*fn[2])(void *) = {bias1, bias2};
        const char *what[2] = {"gelu_backward, the bias, then the rounding", "llmc: matmul_backward_bias_bf16, one pass"};
        for (int v = 1; v <= 2; v++) {
            if (v == 1 || only == 0 || only == v) {
                fails += !run_version(shapes[s].name, v, what[v - 1], fn[v - 1], &a, &o,
                                      ((shapes[s].gelu ? 2.0 : 1.0) * sizeof(float) + sizeof(uint16_t)) * n, 0.0, only == 0 || only == v);
            }
        }
        outputs_free(&o);
        free(a.dinp16); free(a.dbias); free(a.scratch); free(inp); free(dout);
    }
    return fails;
}

// The fourth kernel, gelu_forward in the product: both versions in fp32, then in bf16.
static int check_product(int only) {
    const struct { const char *name; int BT, C, OC; } shapes[] = {
        {"B4 T64 4C=3072", 256, 768, 3072}, {"B4 T1024 4C=3072", 4096, 768, 3072}, {"B3 T29 4C=228", 87, 57, 228}};
    int fails = 0;
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        matmul_set_precision(bf16 ? PRECISION_BF16 : PRECISION_FP32);
        printf("gelu_forward in the product, %s\n", matmul_precision_path());
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
            const int BT = shapes[s].BT, C = shapes[s].C, OC = shapes[s].OC;
            const size_t n = (size_t)BT * OC;
            float *inp = make_random((size_t)BT * C, 3), *weight = make_random_weight((size_t)OC * C, 4);
            float *bias = make_random(OC, 5);
            uint16_t *weight16 = NULL;
            if (bf16) {  // the model's bf16 copy of the weight (AdamW's rounding)
                weight16 = aligned_alloc_or_die((size_t)OC * C * sizeof(uint16_t), "weight16");
                bf16_round_floats(weight16, weight, (size_t)OC * C);
            }
            ProductArgs a = {aligned_alloc_or_die(n * sizeof(float), "out"), aligned_alloc_or_die(n * sizeof(float), "pre"),
                             inp, weight, bias, weight16, BT, C, OC};
            Outputs o = {0};
            outputs_add(&o, "out", a.out, NULL, n);
            outputs_add(&o, "pre", a.pre, NULL, n);
            void (*fn[2])(void *) = {product1, product2};
            const char *what[2] = {"product, then gelu_forward", "llmc: GELU in the product's epilogue"};
            for (int v = 1; v <= 2; v++) {
                if (v == 1 || only == 0 || only == v) {
                    fails += !run_version(shapes[s].name, v, what[v - 1], fn[v - 1], &a, &o, 2.0 * n * sizeof(float), 0.0,
                                          only == 0 || only == v);
                }
            }
            outputs_free(&o);
            free(a.out); free(a.pre); free(inp); free(weight); free(bias); free(weight16);
        }
    }
    matmul_set_precision(PRECISION_FP32);
    return fails;
}

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
    fails += check_bias(only);
    fails += check_product(only);
    printf("%s\n", fails ? "FAIL" : "OK: every version matches version 1");
    return fails ? 1 : 0;
}
