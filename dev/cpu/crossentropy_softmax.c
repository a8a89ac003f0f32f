/*
Softmax + cross-entropy over the vocabulary, forward and backward in place
(crossentropy_softmax_forward_backward in llmc/classifier.h).

  ./crossentropy_softmax [VERSION]

Versions:
  1  the simple code: scalar; max, then a double sum of expf(x - max), then
     row = expf(x - lse) * dloss
  2  vectorized (vec_exp), the same three passes: two exps per element
  3  llmc/classifier.h: the sum pass stores exp(x - max) in the row, and the last pass
     only scales it by dloss / sum: one exp per element

Each runs training (dloss = 1/N: losses and dlogits) and evaluation (dloss = 0: losses
only, logits untouched). The model calls it on chunks of 256 rows (CLASSIFIER_CHUNK_ROWS; 1024
in bf16 training where B*T reaches it); its rows are independent, each a thread's, so 256 x
50257 (padded 50304) times either chunk's rows.
Bytes per call: training reads and writes the (N, Vp) logits, 2 N Vp floats; evaluation
reads N V. The passes after the first find the row (200 KB) in L2.
The loss of each version is also compared with a float64 softmax.
*/
#include "common.h"
#include "llmc/classifier.h"

// 1: the simple code, as it was in llmc/classifier.h.
static void crossentropy_softmax1(float *losses, float *logits, const int *targets, float dloss, int N,
                                  int V, int Vp) {
    #pragma omp parallel for
    for (int i = 0; i < N; i++) {
        float *row = logits + (size_t)i * Vp;
        float maxval = -INFINITY;
        for (int v = 0; v < V; v++) { maxval = fmaxf(maxval, row[v]); }
        double sum = 0.0;
        for (int v = 0; v < V; v++) { sum += expf(row[v] - maxval); }
        const float lse = maxval + (float)log(sum);
        losses[i] = lse - row[targets[i]];
        if (dloss != 0.0f) {
            for (int v = 0; v < V; v++) { row[v] = expf(row[v] - lse) * dloss; }
            row[targets[i]] -= dloss;
            for (int v = V; v < Vp; v++) { row[v] = 0.0f; }
        }
    }
}

// 2: vectorized, with the exp computed again in the last pass.
static void crossentropy_softmax2(float *losses, float *logits, const int *targets, float dloss, int N,
                                  int V, int Vp) {
    const int body = V / VEC_WIDTH * VEC_WIDTH, tail = V - body;
    const vint tail_lanes = vec_lanes_below(tail);
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        float *row = logits + (size_t)i * Vp;
        vfloat mx = vec_set1(-INFINITY);
        for (int v = 0; v < body; v += VEC_WIDTH) { mx = vec_max(mx, vec_load(row + v)); }
        if (tail > 0) { mx = vec_max(mx, vec_select(tail_lanes, vec_load_partial(row + body, tail), mx)); }
        const float maxval = vec_max_lane(mx);
        const vfloat m = vec_set1(maxval);
        double sum = 0.0;
        for (int b0 = 0; b0 < body; b0 += CE_SUM_BLOCK) {
            const int b1 = b0 + CE_SUM_BLOCK < body ? b0 + CE_SUM_BLOCK : body;
            vfloat acc = {0};
            for (int v = b0; v < b1; v += VEC_WIDTH) { acc += vec_exp(vec_load(row + v) - m); }
            sum += (double)vec_sum(acc);
        }
        if (tail > 0) {
            sum += (double)vec_sum(vec_select(tail_lanes, vec_exp(vec_load_partial(row + body, tail) - m), vec_set1(0.0f)));
        }
        const float lse = maxval + (float)log(sum);
        losses[i] = lse - row[targets[i]];
        if (dloss != 0.0f) {
            const vfloat l = vec_set1(lse);
            for (int v = 0; v < body; v += VEC_WIDTH) { vec_store(row + v, vec_exp(vec_load(row + v) - l) * dloss); }
            if (tail > 0) { vec_store_partial(row + body, vec_exp(vec_load_partial(row + body, tail) - l) * dloss, tail); }
            row[targets[i]] -= dloss;
            for (int v = V; v < Vp; v++) { row[v] = 0.0f; }
        }
    }
}

typedef struct {
    float *losses, *logits;
    const float *init;  // the logits before a call
    const int *targets;
    float dloss;
    int N, V, Vp;
} Args;

#define CALL(f) \
    static void run##f(void *p) { Args *a = p; f(a->losses, a->logits, a->targets, a->dloss, a->N, a->V, a->Vp); }
CALL(crossentropy_softmax1)
CALL(crossentropy_softmax2)
static void runcrossentropy_softmax_forward_backward(void *p) {
    Args *a = p;
    crossentropy_softmax_forward_backward(a->losses, a->logits, a->targets, a->dloss, a->N, a->V, a->Vp, 0, 0);
}
// bf16 training's (llmc): the dlogits as bf16 bits in each row's first half
static void runcrossentropy_softmax_bf16(void *p) {
    Args *a = p;
    crossentropy_softmax_forward_backward(a->losses, a->logits, a->targets, a->dloss, a->N, a->V, a->Vp, 1, 0);
}

// 1 if bf16 training's dlogits (a's logits after runcrossentropy_softmax_bf16) are bit for bit the
// floats' (want, after the llmc version) rounded to bf16, the same losses too; prints the time.
static int check_bf16_dlogits(const char *shape, Args *a, const float *want, const float *want_losses) {
    const size_t n = (size_t)a->N * a->Vp;
    memcpy(a->logits, a->init, n * 4);
    runcrossentropy_softmax_bf16(a);
    size_t bad = 0;
    for (int i = 0; i < a->N; i++) {
        const uint16_t *row16 = (const uint16_t *)(a->logits + (size_t)i * a->Vp);
        for (int v = 0; v < a->Vp; v++) { bad += row16[v] != (uint16_t)(gemm_bf16_bits(want[(size_t)i * a->Vp + v]) >> 16); }
        bad += a->losses[i] != want_losses[i];
    }
    double best = 1e30;
    for (int k = 0; k < 5; k++) {
        memcpy(a->logits, a->init, n * 4);
        const double t0 = now_seconds();
        runcrossentropy_softmax_bf16(a);
        best = fmin(best, (now_seconds() - t0) * 1e3);
    }
    printf("  %-16s llmc, dlogits as bf16 bits: %.3f ms, %s\n", shape, best,
           bad ? "MISMATCH with the floats' rounding" : "each the bf16 rounding of the floats, bit for bit");
    return bad == 0;
}

static const struct { void (*fn)(void *); const char *what; } VERSIONS[] = {
    {runcrossentropy_softmax1, "simple"},
    {runcrossentropy_softmax2, "vectorized, exp twice"},
    {runcrossentropy_softmax_forward_backward, "llmc: vectorized, exp stored"},
};
#define NUM_VERSIONS (int)(sizeof(VERSIONS) / sizeof(VERSIONS[0]))

// max over rows of |loss - the float64 loss|
static double loss_error(const float *losses, const float *logits, const int *targets, int N, int V, int Vp) {
    double worst = 0.0;
    for (int i = 0; i < N; i++) {
        const float *row = logits + (size_t)i * Vp;
        double mx = -INFINITY, sum = 0.0;
        for (int v = 0; v < V; v++) { mx = row[v] > mx ? row[v] : mx; }
        for (int v = 0; v < V; v++) { sum += exp(row[v] - mx); }
        double e = fabs(losses[i] - (mx + log(sum) - row[targets[i]]));
        if (!(e <= worst)) { worst = e; }
    }
    return worst;
}

int main(int argc, char **argv) {
    const int only = version_arg(argc, argv);
    const struct { const char *name; int N, V, Vp; } shapes[] = {
        {"256 x 50257", 256, 50257, 50304}, {"87 x 517", 87, 517, 640}, {"7 x 11", 7, 11, 128}};
    printf("crossentropy_softmax: %d threads, VEC_WIDTH %d\n", omp_get_max_threads(), VEC_WIDTH);
    int fails = 0;
    for (int training = 1; training >= 0; training--) {
        printf("%s\n", training ? "training (dloss = 1/N): losses and dlogits" : "evaluation (dloss = 0): losses");
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
            const int N = shapes[s].N, V = shapes[s].V, Vp = shapes[s].Vp;
            const size_t NVp = (size_t)N * Vp;
            float *init = make_random(NVp, 1);
            for (size_t i = 0; i < NVp; i++) { init[i] *= 8.0f; }  // logits of a trained model span ~ +-10
            for (int i = 0; i < N; i++) {
                for (int v = V; v < Vp; v++) { init[(size_t)i * Vp + v] = 0.0f; }  // wte's padded rows are 0
            }
            int *targets = malloc_or_die(N * sizeof(int), "targets");
            for (int i = 0; i < N; i++) { targets[i] = (int)((i * 7919L) % V); }
            Args a = {aligned_alloc_or_die(N * 4, "losses"), aligned_alloc_or_die(NVp * 4, "logits"), init,
                      targets, training ? 1.0f / N : 0.0f, N, V, Vp};
            Outputs o = {0};
            outputs_add(&o, "losses", a.losses, NULL, N);
            outputs_add(&o, "logits", a.logits, init, NVp);
            const double bytes = (training ? 2.0 * NVp : (double)N * V) * sizeof(float);
            for (int v = 1; v <= NUM_VERSIONS; v++) {
                if (v == 1 || only == 0 || only == v) {
                    fails += !run_version(shapes[s].name, v, VERSIONS[v - 1].what, VERSIONS[v - 1].fn, &a, &o,
                                          bytes, 1e-5, only == 0 || only == v);
                    // timed calls start from the logits the previous call left: compute the loss once more
                    memcpy(a.logits, init, NVp * 4);
                    VERSIONS[v - 1].fn(&a);
                    printf("  %-16s v%d max |loss - float64 loss| = %.3e\n", shapes[s].name, v,
                           loss_error(a.losses, init, targets, N, V, Vp));
                }
            }
            if (training) {  // the llmc version's floats, then its bf16 bits against them
                float *want = aligned_alloc_or_die(NVp * 4, "dlogits"), *want_losses = aligned_alloc_or_die(N * 4, "losses");
                memcpy(a.logits, init, NVp * 4);
                runcrossentropy_softmax_forward_backward(&a);
                memcpy(want, a.logits, NVp * 4);
                memcpy(want_losses, a.losses, N * 4);
                fails += !check_bf16_dlogits(shapes[s].name, &a, want, want_losses);
                free(want); free(want_losses);
            }
            outputs_free(&o);
            free(a.losses); free(a.logits); free(init); free(targets);
        }
    }
    printf("%s\n", fails ? "FAIL" : "OK: every version matches version 1");
    return fails ? 1 : 0;
}
