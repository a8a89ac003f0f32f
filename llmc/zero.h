/*
Data-parallel training of GPT-2 over MPI, and ZeRO-1 (llm.c's name for this layer: zero):
the trainer's use of the model-agnostic collectives of llmc/collectives.h.

`mpirun -np N ./train_gpt2 ...` starts N ranks. Each trains on its own micro-batches
of the same global data order; the gradients are summed across ranks (each rank
scales its loss by 1 / the global number of micro-batches, so the sum is the mean).
  stage 0: the sum reaches every rank (all-reduce); every rank runs the whole AdamW
           step and holds all of m and v.
  stage 1 (ZeRO-1, -z 1): the flat gradient array is reduce-scattered: rank r gets the
           sum of its contiguous shard only, runs AdamW on that shard of the parameters
           with its shard of m and v (the only part of them it allocates), and the
           parameters are then all-gathered.
The shards split the flat parameter array (params_span floats, alignment gaps included)
as zero_shard_of does. Run without mpirun, this is one rank of one and the trainer runs
exactly as a single-process build.

Overlap: the gradient sums start during the backward pass of a step's last micro-batch,
as parts of the flat gradient array become final (the model's backward_hook), and make
progress between its kernels. The parts, in the order they become final: the final
LayerNorm's; then a bucket per block, L-1 down to 0, its slice of each of the 12 per-layer
tensors (the tensors are (L, ...): a block's slices are 12 ranges; ~28 MB a block at d12,
about PyTorch DDP's 25 MB buckets); last the embeddings (wte's gradient is final only after
the encoder's backward, the last kernel). They are summed as ranges (ZeroRangeSums), the
same sums at the same places as the blocking reduce-scatter; under -z 0 each range's
all-gather follows. LLMC_OVERLAP=0: the blocking sums after the backward pass instead.
*/
#pragma once

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "collectives.h"
#include "gpt2.h"
#include "utils.h"

typedef struct {
    int stage;                  // 0, or 1: ZeRO-1
    size_t shard_offset;        // this rank's shard of the flat parameter array (stage 1)
    size_t shard_count;
    int overlap;                // the sums overlap the backward pass (several ranks, LLMC_OVERLAP not 0)
    int num_layers;
    ZeroRangeSums sums;         // the gradient's ranges, in the order the backward pass finishes them
} ZeroOptimizer;

// The ranges of the flat gradient array (tensor offsets as point_tensors lays them out) in
// the order the backward pass finishes them; group 0: lnf, 1..L: blocks L-1..0, L+1: the
// embeddings.
static void zero_overlap_init(ZeroOptimizer *opt, const size_t sizes[NUM_PARAMETER_TENSORS], int L, size_t span) {
    size_t offsets[NUM_PARAMETER_TENSORS + 1] = {0};
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) { offsets[i + 1] = offsets[i] + (sizes[i] + 15) / 16 * 16; }
    const int first_layer_tensor = 2, end_layer_tensors = 14;  // ln1w .. fcprojb; then lnfw, lnfb
    const int num = 2 + L * (end_layer_tensors - first_layer_tensor);
    size_t *start = malloc_or_die((size_t)num * 2 * sizeof(size_t), "overlap ranges"), *count = start + num;
    int *group = malloc_or_die((size_t)num * sizeof(int), "overlap ranges");
    int n = 0;
    start[n] = offsets[end_layer_tensors], count[n] = span - offsets[end_layer_tensors], group[n++] = 0;
    for (int l = L - 1; l >= 0; l--) {
        for (int i = first_layer_tensor; i < end_layer_tensors; i++) {
            const size_t slice = sizes[i] / (size_t)L;
            start[n] = offsets[i] + (size_t)l * slice, count[n] = slice, group[n++] = L - l;
        }
    }
    start[n] = 0, count[n] = offsets[first_layer_tensor], group[n++] = L + 1;
    opt->num_layers = L;
    zero_range_sums_init(&opt->sums, span, n, start, count, group, opt->stage == 0);
    free(start);
    free(group);
}

// The floats this rank's m and v each need: all of params_span, or its shard.
static size_t zero_optimizer_init(ZeroOptimizer *opt, const GPT2Config *config, int stage) {
    memset(opt, 0, sizeof(*opt));
    size_t sizes[NUM_PARAMETER_TENSORS];
    fill_parameter_sizes(sizes, config);
    size_t span = point_tensors(NULL, sizes, NUM_PARAMETER_TENSORS, NULL);
    opt->stage = stage;
    if (stage == 0) {
        opt->shard_offset = 0;
        opt->shard_count = span;
    } else {
        zero_shard_of(span, zero.rank, zero.size, &opt->shard_offset, &opt->shard_count);
    }
    const int overlap = env_flag("LLMC_OVERLAP", 1, "blocking gradient sums", "overlapped with the backward pass");
    opt->overlap = zero.size > 1 && overlap;
    if (opt->overlap) { zero_overlap_init(opt, sizes, config->num_layers, span); }
    return opt->shard_count;
}

static void zero_optimizer_free(ZeroOptimizer *opt) {
    if (opt->overlap) { zero_range_sums_free(&opt->sums); }
}

// The model's backward_hook while armed: blocks final_from.. are done, and so are the
// buckets before theirs.
static void zero_backward_hook(void *ctx, int final_from) {
    ZeroOptimizer *opt = ctx;
    zero_range_sums_progress(&opt->sums, opt->num_layers - final_from);
}

// Before the backward pass of a step's last micro-batch: in one process, the gradient norm's
// sums follow the backward pass (gpt2_grad_norm_arm); with several ranks, where the gradient
// sums overlap it, they start as its parts become final.
static void zero_overlap_arm(ZeroOptimizer *opt, GPT2 *model) {
    if (zero.size == 1) {
        gpt2_grad_norm_arm(model);
        return;
    }
    if (!opt->overlap) { return; }
    zero_range_sums_begin(&opt->sums, model->grads_memory);
    model->backward_hook = zero_backward_hook;
    model->backward_hook_ctx = opt;
}

// After the backward pass: the gradients summed over ranks (all of them, or this rank's shard).
// Overlapped: waits for the sums started during the backward pass. Blocking: a barrier first
// times the wait for the slowest rank apart from the transfer itself.
static void zero_sync_gradients(ZeroOptimizer *opt, GPT2 *model) {
    if (model->backward_hook != NULL) {
        zero_range_sums_end(&opt->sums);
        model->backward_hook = NULL;
        return;
    }
    double before = zero.comm_seconds;
    zero_barrier();
    zero.wait_seconds += zero.comm_seconds - before;
    if (opt->stage == 0) { zero_allreduce_f32(model->grads_memory, model->params_span); }
    else { zero_reduce_scatter_f32(model->grads_memory, model->params_span); }
}

// The global gradient norm (the same on every rank).
static float zero_grad_norm(const ZeroOptimizer *opt, GPT2 *model) {
    if (opt->stage == 0) { return gpt2_grad_norm(model); }
    double ss = sum_of_squares(model->grads_memory + opt->shard_offset, opt->shard_count);
    zero_allreduce_f64(&ss, 1, ZERO_SUM);
    return (float)sqrt(ss);
}

// One AdamW step: all of it (stage 0: where gpt2_update_defer says so, run by the next training
// forward pass; the caller runs gpt2_update_finish before it reads the parameters, m or v), or
// this rank's shard and then the all-gather (stage 1).
static void zero_update(const ZeroOptimizer *opt, GPT2 *model, float lr, float beta1, float beta2, float eps,
                        float weight_decay, float grad_scale, int t) {
    if (opt->stage == 0) {
        gpt2_update_defer(model, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
        return;
    }
    gpt2_update_range(model, opt->shard_offset, opt->shard_offset + opt->shard_count, model->m_memory,
                      model->v_memory, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
    zero_all_gather_f32(model->params_memory, model->params_span);
    gpt2_params_changed(model);  // gpt2_update_range left the bf16 copy stale already; said again here
}

// Checkpoints hold all of m and v. Under ZeRO-1, rank 0 reads and writes them through a
// view of the model whose m and v are whole: m in the gradients' memory (unused between
// steps: they are zeroed when the next one begins), v in a buffer allocated for the
// occasion. Returns the view (the model itself when its m and v are already whole).
static GPT2 *zero_whole_state_view(const ZeroOptimizer *opt, GPT2 *model, GPT2 *view, float **buffer) {
    *buffer = NULL;
    if (opt->stage == 0 || zero.rank != 0) { return model; }
    *view = *model;
    *buffer = aligned_alloc_or_die(model->params_span * sizeof(float), "AdamW v for a checkpoint");
    memset(*buffer, 0, model->params_span * sizeof(float));
    memset(model->grads_memory, 0, model->params_span * sizeof(float));
    view->m_memory = model->grads_memory;
    view->v_memory = *buffer;
    point_tensors((float **)&view->m, model->param_sizes, NUM_PARAMETER_TENSORS, view->m_memory);
    point_tensors((float **)&view->v, model->param_sizes, NUM_PARAMETER_TENSORS, view->v_memory);
    return view;
}

// Writes the state checkpoint of step state->step from rank 0 (a collective: every rank calls it).
static void zero_write_state_checkpoint(const ZeroOptimizer *opt, GPT2 *model, const TrainState *state,
                                        const char *path) {
    GPT2 view;
    float *buffer;
    GPT2 *whole = zero_whole_state_view(opt, model, &view, &buffer);
    if (opt->stage == 1) {
        zero_gather_f32(model->m_memory, whole->m_memory, model->params_span);
        zero_gather_f32(model->v_memory, whole->v_memory, model->params_span);
    }
    if (zero.rank == 0) { write_state_checkpoint(whole, state, path, 0); }
    free(buffer);
}

// After rank 0 has initialized, loaded or resumed the model (into `whole`, from
// zero_whole_state_view) and the state: every rank gets the parameters, the state,
// and m and v (all, or its shard). Collective.
static void zero_distribute_model(const ZeroOptimizer *opt, GPT2 *model, GPT2 *whole, float *buffer,
                                  TrainState *state, int *resumed) {
    zero_broadcast(resumed, sizeof(*resumed), 0);
    zero_broadcast(state, sizeof(*state), 0);
    zero_broadcast(model->params_memory, model->params_span * sizeof(float), 0);
    gpt2_params_changed(model);
    if (*resumed) {
        if (opt->stage == 0) {
            zero_broadcast(model->m_memory, model->params_span * sizeof(float), 0);
            zero_broadcast(model->v_memory, model->params_span * sizeof(float), 0);
        } else {
            zero_scatter_f32(whole->m_memory, model->m_memory, model->params_span);
            zero_scatter_f32(whole->v_memory, model->v_memory, model->params_span);
        }
    }
    if (whole != model) { memset(model->grads_memory, 0, model->params_span * sizeof(float)); }
    free(buffer);
}
