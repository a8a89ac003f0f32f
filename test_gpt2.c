/*
Checks the model against a PyTorch reference (scripts/reference/gpt2_reference.py).

  ./test_gpt2 -e MODEL -s STATE [-l LOSSES] [-a ACTIVATIONS] [--precision fp32|bf16] [--recompute 0|1]

Runs forward and backward on the debug state's batch with the same model code
as train_gpt2 (llmc/gpt2.h) and compares, in this order: every intermediate
of the forward pass and every gradient the backward pass materializes (with
-a), the logits, the loss, the gradients of the 16 parameter tensors; then that
later passes over the batch give the same gradients (bit for bit, after
gpt2_zero_grad) or add to them (without); then (with -l) takes AdamW steps on
the same batch and compares the loss of each.
Prints the error of every tensor, names the first one that diverges, and exits
1 on any mismatch.

--precision bf16 runs the matmuls as train_gpt2 --precision bf16 does (operands
rounded to bf16) against a reference written with the same flag, which rounds
the same operands and computes everything else in float64; the matmuls'
operands are resynced to the reference's as the pass goes (compare_activation
says why), so the tolerances are the fp32 ones; the attention's output and input
gradient may also hold a few rounding flips of its probabilities (FLIPS_ALLOWED_FRACTION).

--recompute 1 runs the model as train_gpt2 --recompute 1 does (each block's forward
re-run before its backward); the tensors recomputed are observed, and compared, again.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmc/debug_state.h"
#include "llmc/gpt2.h"
#include "llmc/utils.h"

// Tolerances. The reference is computed in float64, so these bound the error of
// our fp32 kernels alone. The error measure is max |ours - ref| / max |ref| over
// a tensor: scale-relative, so it is meaningful for tensors whose elements pass
// through zero (gradients). Observed on GPT-2 124M (B=4, T=64) and the three odd
// configs of make test, the largest errors are about: activations 1e-6 (LayerNorm
// statistics, where x - mean cancels), logits 1e-6, grads 1e-6 (sums over B*T rows),
// AdamW step losses 1e-7 at first, growing to 1.5e-5 by step 9 of d12: AdamW's first
// steps move every parameter by about lr whatever its gradient's size (m / sqrt(v)),
// so rounding differences in small gradients become parameter differences, which
// compound. The bounds leave a margin of 3x (step losses) to 50x over that, and stay
// far below what a real bug produces: a LayerNorm eps of 1e-6 instead of 1e-5 changes
// the outputs by ~6e-3, an off-by-one causal mask by ~1e-1 (make test checks these and
// other broken kernels).
#define TOL_ACTIVATIONS 5e-5
#define TOL_LOGITS 2e-5
#define TOL_LOSS 1e-6        // relative to the loss itself
#define TOL_GRADS 5e-5
#define TOL_STEP_LOSS 5e-5   // relative, after several AdamW steps
// In bf16 the first pass is resynced (see compare_activation) and checked at the same
// tolerances: observed on the four configs, activations and gradients 1.3e-6 at most, as in
// fp32. A matmul whose operand is truncated instead of rounded to nearest even, or left
// unrounded, errs by 2e-3 from the first matmul on (make test checks these). The AdamW steps
// after the first pass are not resynced, so their losses carry the spread of bf16 rounding
// flips, which grows with the steps (AdamW moves a parameter by about lr whatever its
// gradient's size, so a flip that changes the sign of a small gradient moves it the other
// way): observed up to 5e-6 on the small configs and, on d12, 1.3e-3 at step 9 (2.2e-4 with
// the same rounding but another summation order); the bound leaves a margin of about 4x.
// Any bug of the bf16 path shows in the first, resynced pass; this bound catches a run
// that drifts away.
#define TOL_STEP_LOSS_BF16 5e-3
// bf16 attention rounds the probabilities P and dS, which are never materialized, so they cannot
// be resynced: where ours (fp32) and the reference's (float64) value of one probability straddle
// a bf16 rounding boundary, they round to neighbours one bf16 ulp (at most 2^-7 of the value)
// apart. With p's fp32 error of a few 2^-24, that is about one probability in 2^11, and each
// moves one output row by at most 2^-7 * p * max|V| (atty; dqkv likewise through dV, dQ, dK).
// So atty and dqkv pass if they are within the fp32 tolerance, or if at most 1/256 of their
// elements exceed it, by 2^-7 of the tensor's largest at most. Observed (GPT-2 124M, B=4,
// T=64): at most 53 of 196608 elements (1/3700) over, by 8.4e-4 of the largest at most.
// Rounding the normalized probabilities exp(score - lse) instead of exp(score - m), or rounding
// by truncation, moves most elements (make test checks the second; the first was measured).
#define FLIPS_ALLOWED_FRACTION (1.0 / 256)
#define TOL_FLIPS_BF16 (1.0 / 128)

typedef struct {
    char name[64];
    double max_err;    // max |ours - ref|, +inf if ours has a NaN
    double max_ref;    // max |ref|
    size_t count;      // elements compared
    size_t over;       // elements off by more than tol * max |ref| of the block compared
    double tol;
    int flips;         // bf16 attention output: may hold rounding flips (FLIPS_ALLOWED_FRACTION)
} Comparison;

#define MAX_COMPARISONS 4096
static Comparison comparisons[MAX_COMPARISONS];
static int num_comparisons = 0;

static double comparison_error(const Comparison *c) {
    return c->max_err / (c->max_ref > 0.0 ? c->max_ref : 1.0);
}

// The comparison called name, created on first use (chunks of one tensor accumulate).
static Comparison *comparison_for(const char *name, double tol) {
    for (int i = 0; i < num_comparisons; i++) {
        if (strcmp(comparisons[i].name, name) == 0) { return &comparisons[i]; }
    }
    if (num_comparisons == MAX_COMPARISONS) { die("too many tensors to compare"); }
    Comparison *c = &comparisons[num_comparisons++];
    memset(c, 0, sizeof(*c));
    snprintf(c->name, sizeof(c->name), "%s", name);
    c->tol = tol;
    return c;
}

static void accumulate(Comparison *c, const float *ours, const float *ref, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)ours[i] - (double)ref[i]);
        if (isnan(e)) { e = INFINITY; }
        if (e > c->max_err) { c->max_err = e; }
        if (fabs(ref[i]) > c->max_ref) { c->max_ref = fabs(ref[i]); }
    }
    c->count += n;
}

// A step's gradients must not depend on what the gradient memory held before it (the first
// pass writes most of them, gpt2_zero_grad zeroes the rest), and a pass without
// gpt2_zero_grad must add to them (gradient accumulation). Over all the gradient memory: two
// zero_grad + pass over the same batch must give the same bits, and one more pass without
// zero_grad twice those gradients, up to the rounding of the sums (1e-6 of the largest).
// The passes run free (with bf16, the checked pass took the reference's matmul operands);
// the checked pass's gradients are put back for the AdamW steps.
static void check_gradients_of_later_passes(GPT2 *model, const int *x, const int *y, int B, int T) {
    const size_t n = model->params_span;
    float *checked = malloc_or_die(n * sizeof(float), "a copy of the gradients");
    float *once = malloc_or_die(n * sizeof(float), "a copy of the gradients");
    memcpy(checked, model->grads_memory, n * sizeof(float));
    gpt2_zero_grad(model);
    gpt2_forward_backward(model, x, y, B, T, 1.0f);
    memcpy(once, model->grads_memory, n * sizeof(float));
    gpt2_zero_grad(model);
    gpt2_forward_backward(model, x, y, B, T, 1.0f);
    accumulate(comparison_for("grads, 2nd step (bits)", 0.0), model->grads_memory, once, n);
    gpt2_forward_backward(model, x, y, B, T, 1.0f);
    for (size_t i = 0; i < n; i++) { once[i] *= 2.0f; }  // exact
    accumulate(comparison_for("grads, 2 passes summed", 1e-6), model->grads_memory, once, n);
    memcpy(model->grads_memory, checked, n * sizeof(float));
    free(checked);
    free(once);
}

// Intermediates of the reference that the model never materializes: the two
// projections into the residual stream, whose matmul adds the residual in its
// epilogue. They are checked through residual2 and residual3.
static const char *const FUSED_AWAY[] = {"attproj", "fcproj"};

static int fused_away(const char *full_name) {
    const char *dot = strrchr(full_name, '.');
    const char *name = dot != NULL ? dot + 1 : full_name;
    for (size_t i = 0; i < sizeof(FUSED_AWAY) / sizeof(FUSED_AWAY[0]); i++) {
        if (strcmp(name, FUSED_AWAY[i]) == 0) { return 1; }
    }
    return 0;
}

// With --precision bf16, the tensors that the matmuls round to bf16 (their operands other
// than the weights), in the forward and the backward pass. See resync below.
static const char *const MATMUL_OPERANDS[] = {
    "ln1", "qkv", "atty", "ln2", "fch_gelu", "lnf",                     // forward (and again where recomputed)
    "dlogits", "dresidual3", "dfch", "datty", "dresidual2", "dqkv"};  // backward

static int is_matmul_operand(const char *name) {
    for (size_t i = 0; i < sizeof(MATMUL_OPERANDS) / sizeof(MATMUL_OPERANDS[0]); i++) {
        if (strcmp(name, MATMUL_OPERANDS[i]) == 0) { return 1; }
    }
    return 0;
}

// Rows [row0, row0 + nrows) of ours (rows, width) against the reference (rows, V) where width
// is Vp >= V (the logits and their gradient): the padded columns must be exactly 0.
static void accumulate_padded(Comparison *c, const float *ours, const float *ref, size_t row0,
                              size_t nrows, size_t width, size_t V) {
    if (c->flips) {  // count the elements over the tolerance, which only the flips rule reads
        double block_max = 0.0;  // of the reference's rows
        for (size_t r = 0; r < nrows; r++) {
            for (size_t v = 0; v < V; v++) { block_max = fmax(block_max, fabs(ref[(row0 + r) * V + v])); }
        }
        for (size_t r = 0; r < nrows; r++) {
            for (size_t v = 0; v < V; v++) {
                if (!(fabs((double)ours[r * width + v] - (double)ref[(row0 + r) * V + v]) <= c->tol * block_max)) { c->over++; }
            }
        }
    }
    for (size_t r = 0; r < nrows; r++) {
        accumulate(c, ours + r * width, ref + (row0 + r) * V, V);
        for (size_t v = V; v < width; v++) {
            if (ours[r * width + v] != 0.0f) { c->max_err = INFINITY; }
        }
    }
}

static Record *find_record(Reference *ref, const char *full) {
    for (int i = 0; i < ref->num_records; i++) {
        if (strcmp(ref->records[i].name, full) == 0) { return &ref->records[i]; }
    }
    die("the model produced activation %s, which the reference file does not have", full);
    return NULL;
}

// The observer the model calls after each kernel of the forward and backward passes.
//
// resync (bf16): after the comparison, a matmul operand is replaced by the reference's
// value. Rounding to bf16 is not continuous: where ours and the reference's fp32 values of
// an operand differ by an ulp (as fp32 arithmetic does), about one element in 2^16 rounds to
// the neighbouring bf16 value, 2^-8 away, and from there such differences spread through
// every later layer (measured: errors grow to 1e-3 within three layers). With the operands
// resynced, both sides round the same fp32 numbers, each kernel is checked on the
// reference's inputs, and only the order of the fp32 sums differs: the fp32 tolerances apply.
static void compare_activation(void *ctx, const char *name, int layer, float *data, size_t row0,
                               size_t nrows, size_t width) {
    Reference *ref = ctx;
    char full[64];
    if (layer >= 0) { snprintf(full, sizeof(full), "h.%d.%s", layer, name); }
    else { snprintf(full, sizeof(full), "%s", name); }

    if (strcmp(name, "logits") == 0) {  // from the debug state, (B*T, V)
        accumulate_padded(comparison_for("logits", TOL_LOGITS), data, ref->ref_logits, row0, nrows, width,
                          (size_t)ref->V);
        return;
    }
    if (ref->records == NULL) { return; }  // no -a: only the logits are checked here
    Record *r = find_record(ref, full);
    r->used = 1;
    const size_t ref_width = strcmp(name, "dlogits") == 0 ? (size_t)ref->V : width;
    if (r->count % ref_width != 0 || (row0 + nrows) * ref_width > r->count ||
        (strcmp(name, "dlogits") != 0 && (row0 != 0 || r->count != nrows * width))) {
        die("activations %s: reference has %zu values, the model produced %zu rows of %zu", full, r->count,
            nrows, width);
    }
    Comparison *c = comparison_for(full, TOL_ACTIVATIONS);
    c->flips = ref->resync && (strcmp(name, "atty") == 0 || strcmp(name, "dqkv") == 0);
    accumulate_padded(c, data, r->data, row0, nrows, width, ref_width);
    if (ref->resync && is_matmul_operand(name)) {
        for (size_t i = 0; i < nrows; i++) {
            memcpy(data + i * width, r->data + (row0 + i) * ref_width, ref_width * sizeof(float));
        }
    }
}

// ----------------------------------------------------------------------------

static void print_usage(FILE *out) {
    fprintf(out, "usage: ./test_gpt2 -e MODEL -s STATE [-l LOSSES] [-a ACTIVATIONS] [--precision fp32|bf16] [--recompute 0|1]\n"
                 "  files written by scripts/reference/gpt2_reference.py (with the same --precision)\n");
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *state_path = NULL, *losses_path = NULL, *acts_path = NULL;
    Precision precision = PRECISION_FP32;
    int recompute = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0) { print_usage(stdout); return 0; }
        if (i + 1 >= argc) { fprintf(stderr, "error: %s: missing value\n", argv[i]); print_usage(stderr); return 2; }
        if (strcmp(argv[i], "-e") == 0) { model_path = argv[++i]; }
        else if (strcmp(argv[i], "-s") == 0) { state_path = argv[++i]; }
        else if (strcmp(argv[i], "-l") == 0) { losses_path = argv[++i]; }
        else if (strcmp(argv[i], "-a") == 0) { acts_path = argv[++i]; }
        else if (strcmp(argv[i], "--precision") == 0) {
            i++;
            if (strcmp(argv[i], "fp32") == 0) { precision = PRECISION_FP32; }
            else if (strcmp(argv[i], "bf16") == 0) { precision = PRECISION_BF16; }
            else { fprintf(stderr, "error: --precision: expected fp32 or bf16, got '%s'\n", argv[i]); print_usage(stderr); return 2; }
        }
        else if (strcmp(argv[i], "--recompute") == 0) {
            i++;
            if (strcmp(argv[i], "0") != 0 && strcmp(argv[i], "1") != 0) {
                fprintf(stderr, "error: --recompute: expected 0 or 1, got '%s'\n", argv[i]); print_usage(stderr); return 2;
            }
            recompute = argv[i][0] == '1';
        }
        else { fprintf(stderr, "error: %s: unknown flag\n", argv[i]); print_usage(stderr); return 2; }
    }
    if (model_path == NULL || state_path == NULL) {
        fprintf(stderr, "error: -e MODEL and -s STATE are required\n");
        print_usage(stderr);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);

    GPT2Config config;
    gpt2_read_config(model_path, &config);

    // the debug state: B, T, x, y, logits (B,T,V), loss, grads, and nothing else
    DebugState ds;
    char err[PATH_MAX + 256];
    if (debug_state_try_load(&ds, state_path, &config, model_path, err, sizeof(err)) != 0) { die("%s", err); }
    const int B = ds.B, T = ds.T;
    const size_t V = (size_t)config.vocab_size;
    int *x = ds.x, *y = ds.y;
    const float *ref_logits = ds.ref_logits, *ref_grads = ds.ref_grads;
    const float ref_loss = ds.ref_loss;

    Reference ref = {0};
    ref.ref_logits = ref_logits;
    ref.V = (int)V;
    ref.resync = precision == PRECISION_BF16;
    if (acts_path != NULL && activations_try_load(&ref, acts_path, err, sizeof(err)) != 0) { die("%s", err); }

    double *ref_step_losses = NULL;
    int num_steps = 0;
    if (losses_path != NULL) {
        FILE *lf = fopen_or_die(losses_path, "r");
        double v;
        int cap = 0;
        while (fscanf(lf, "%lf", &v) == 1) {
            if (num_steps == cap) {
                cap = cap ? 2 * cap : 16;
                ref_step_losses = realloc(ref_step_losses, (size_t)cap * sizeof(double));
            }
            ref_step_losses[num_steps++] = v;
        }
        if (!feof(lf)) { die("%s: not a list of numbers", losses_path); }
        fclose(lf);
        if (num_steps == 0) { die("%s: no losses", losses_path); }
    }

    GPT2 model;
    matmul_set_precision(precision);  // first, as train_gpt2: the classifier's chunk (its logits' rows) depends on it
    gpt2_create_ex(&model, &config, B, T, model_path, 1, 0, recompute);
    gpt2_load_params(&model, model_path);
    printf("checking B=%d, T=%d, %d threads, matmuls: %s%s\n", B, T, omp_get_max_threads(), matmul_precision_path(),
           recompute ? ", blocks recomputed in the backward" : "");

    // forward and backward with the observer comparing as the forward pass goes
    model.observer = compare_activation;
    model.observer_ctx = &ref;
    gpt2_zero_grad(&model);
    float loss = gpt2_forward_backward(&model, x, y, B, T, 1.0f);
    model.observer = NULL;
    for (int i = 0; i < ref.num_records; i++) {
        if (!ref.records[i].used && !fused_away(ref.records[i].name)) {
            die("%s: reference tensor %s was not produced by the model", acts_path, ref.records[i].name);
        }
    }
    Comparison *lc = comparison_for("loss", TOL_LOSS);
    accumulate(lc, &loss, &ref_loss, 1);
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        char name[64];
        snprintf(name, sizeof(name), "grad.%s", PARAMETER_NAMES[i]);
        const float *ours = ((float **)&model.grads)[i];
        // the reference is packed; our tensors start at 64-byte boundaries
        size_t packed = 0;
        for (int j = 0; j < i; j++) { packed += model.param_sizes[j]; }
        accumulate(comparison_for(name, TOL_GRADS), ours, ref_grads + packed, model.param_sizes[i]);
    }

    check_gradients_of_later_passes(&model, x, y, B, T);

    // AdamW steps on the same batch, as the reference did
    for (int step = 0; step < num_steps; step++) {
        if (step > 0) {
            gpt2_zero_grad(&model);
            loss = gpt2_forward_backward(&model, x, y, B, T, 1.0f);
        }
        char name[64];
        snprintf(name, sizeof(name), "step %d loss", step);
        float ref_step = (float)ref_step_losses[step];
        accumulate(comparison_for(name, precision == PRECISION_BF16 ? TOL_STEP_LOSS_BF16 : TOL_STEP_LOSS), &loss,
                   &ref_step, 1);
        // the reference's AdamW (scripts/reference/gpt2_reference.py): PyTorch's default betas, no weight decay
        const float ref_lr = 1e-4f, ref_beta1 = 0.9f, ref_beta2 = 0.999f, ref_eps = 1e-8f;
        gpt2_update(&model, ref_lr, ref_beta1, ref_beta2, ref_eps, 0.0f, 1.0f, step + 1);
    }

    // the report, in the order of the computation
    const char *first_failure = NULL;
    int failures = 0;
    printf("%-24s %10s %12s %12s %10s\n", "tensor", "elements", "max |err|", "max |ref|", "err/ref");
    for (int i = 0; i < num_comparisons; i++) {
        const Comparison *c = &comparisons[i];
        double e = comparison_error(c);
        int ok = e <= c->tol ||
                 (c->flips && c->over <= FLIPS_ALLOWED_FRACTION * c->count && e <= TOL_FLIPS_BF16);
        if (!ok) {
            failures++;
            if (first_failure == NULL) { first_failure = c->name; }
        }
        printf("%-24s %10zu %12.3e %12.3e %10.2e  %s", c->name, c->count, c->max_err, c->max_ref, e,
               ok ? "ok" : "MISMATCH");
        if (c->flips && c->over > 0) { printf(" (%zu rounding flips)", c->over); }
        printf("\n");
    }
    if (failures > 0) {
        printf("FAIL: %d of %d tensors differ; the first to diverge is %s\n", failures, num_comparisons,
               first_failure);
    } else {
        printf("OK: all %d tensors match the reference\n", num_comparisons);
    }
    gpt2_free(&model);
    activations_free(&ref);
    debug_state_free(&ds);
    free(ref_step_losses);
    return failures > 0 ? 1 : 0;
}
