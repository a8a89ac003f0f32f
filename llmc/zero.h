/*
Data-parallel training over MPI, and ZeRO-1 (llm.c's name for this layer: zero).

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
evenly, each starting on a 16-float boundary; the last may be shorter (MPI's v-variants
take per-rank counts, so nothing needs padding in memory).

Every sum of floats across ranks is computed once, by one rank, and then copied to the
others (reduce-scatter, then all-gather), and small sums of doubles are added in rank
order on every rank: all ranks hold bit-identical parameters, and a rerun with the same
N and thread count is bit-identical.

Built without USE_MPI (no mpicc), or run without mpirun, this is one rank of one: every
collective is a no-op, and the trainer runs exactly as a single-process build.
Only rank 0 writes to stdout (the others' stdout goes to /dev/null); errors on any rank
name it ("error: rank 1: ...") and end the whole job (MPI_Abort), never a hang.
*/
#pragma once

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef USE_MPI
#include <mpi.h>
#endif

#include "checkpoint.h"
#include "gpt2.h"
#include "utils.h"

typedef struct {
    int rank, size;
    int mpi;              // MPI_Init was called (launched by mpirun)
    double comm_seconds;  // time spent in collectives so far
    double wait_seconds;  // of which waiting for the slowest rank before the gradient sum
} Zero;

static Zero zero = {0, 1, 0, 0.0, 0.0};

enum { ZERO_SUM, ZERO_MEAN, ZERO_MAX };

#ifdef USE_MPI
static void zero_abort(int code) {
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);  // not reached
}
#endif

// MPI takes int counts: the parameter arrays of every preset fit.
static int zero_int_count(size_t n) {
    if (n > INT_MAX) { die("%zu elements: too many for one MPI message", n); }
    return (int)n;
}

static void zero_finalize(void) {
#ifdef USE_MPI
    int finalized = 0;
    if (zero.mpi && MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) { MPI_Finalize(); }
#endif
}

// Called first thing in main. Under mpirun: MPI_Init, rank and size; without it (no
// launcher in the environment), one rank of one and MPI is never touched.
static void zero_init(int *argc, char ***argv) {
#ifdef USE_MPI
    if (getenv("OMPI_COMM_WORLD_SIZE") == NULL && getenv("PMIX_RANK") == NULL && getenv("PMI_SIZE") == NULL) {
        return;
    }
    if (MPI_Init(argc, argv) != MPI_SUCCESS) { die("MPI_Init failed"); }
    zero.mpi = 1;
    atexit(zero_finalize);  // a normal exit (-h, the end) finalizes; errors abort instead
    MPI_Comm_rank(MPI_COMM_WORLD, &zero.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &zero.size);
    if (zero.size > 1) {
        snprintf(die_rank_label, sizeof(die_rank_label), "rank %d: ", zero.rank);
        die_exit_hook = zero_abort;
        // one voice on stdout: rank 0's
        if (zero.rank != 0 && freopen("/dev/null", "w", stdout) == NULL) { die("cannot silence stdout"); }
    }
#else
    (void)argc;
    (void)argv;
#endif
}


static void zero_barrier(void) {
#ifdef USE_MPI
    if (zero.size > 1) {
        double t0 = now_seconds();
        MPI_Barrier(MPI_COMM_WORLD);
        zero.comm_seconds += now_seconds() - t0;
    }
#endif
}

// Copies `bytes` bytes at data from rank root to every rank.
static void zero_broadcast(void *data, size_t bytes, int root) {
#ifdef USE_MPI
    if (zero.size == 1) { return; }
    double t0 = now_seconds();
    for (size_t done = 0; done < bytes;) {  // in pieces of at most 1 GiB: MPI counts are ints
        size_t n = bytes - done < ((size_t)1 << 30) ? bytes - done : ((size_t)1 << 30);
        MPI_Bcast((char *)data + done, (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
        done += n;
    }
    zero.comm_seconds += now_seconds() - t0;
#else
    (void)data; (void)bytes; (void)root;
#endif
}

// x (n) becomes the sum (or mean, or max) over ranks of x, added in rank order on every rank:
// the same bits everywhere. For a few scalars (losses, sums of squares).
static void zero_allreduce_f64(double *x, int n, int op) {
#ifdef USE_MPI
    if (zero.size > 1) {
        double t0 = now_seconds();
        double *all = malloc_or_die((size_t)n * zero.size * sizeof(double), "all-reduce");
        MPI_Allgather(x, n, MPI_DOUBLE, all, n, MPI_DOUBLE, MPI_COMM_WORLD);
        for (int i = 0; i < n; i++) {
            double s = op == ZERO_MAX ? all[i] : 0.0;
            for (int r = op == ZERO_MAX ? 1 : 0; r < zero.size; r++) {
                const double v = all[(size_t)r * n + i];
                s = op == ZERO_MAX ? (v > s ? v : s) : s + v;
            }
            x[i] = s;
        }
        free(all);
        zero.comm_seconds += now_seconds() - t0;
    }
#endif
    if (op == ZERO_MEAN) {
        for (int i = 0; i < n; i++) { x[i] /= zero.size; }
    }
}

// Every rank must run the same job (model, batch, schedule, data): this rank's `bytes` at
// data are compared with rank 0's, and a difference is this rank's error (the job ends).
static void zero_check_same(const void *data, size_t bytes, const char *what) {
    if (zero.size == 1) { return; }
    char *root = malloc_or_die(bytes, "rank 0's settings");
    memcpy(root, data, bytes);
    zero_broadcast(root, bytes, 0);
    if (memcmp(root, data, bytes) != 0) { die("%s differ from rank 0's: every rank must run the same command", what); }
    free(root);
}

// Rank r's shard of a flat array of n floats: [*offset, *offset + *count). Shards are
// ceil(n / size) rounded up to 16 floats (64 bytes), the last one what is left.
static void zero_shard_of(size_t n, int rank, int size, size_t *offset, size_t *count) {
    size_t shard = ((n + (size_t)size - 1) / (size_t)size + 15) / 16 * 16;
    size_t start = (size_t)rank * shard < n ? (size_t)rank * shard : n;
    *offset = start;
    *count = n - start < shard ? n - start : shard;
}

#ifdef USE_MPI
static void zero_counts(size_t n, int *counts, int *displs) {
    for (int r = 0; r < zero.size; r++) {
        size_t off, cnt;
        zero_shard_of(n, r, zero.size, &off, &cnt);
        counts[r] = zero_int_count(cnt);
        displs[r] = zero_int_count(off);
    }
}
#endif

// An in-place reduce-scatter leaves this rank's part of the sum (count floats) at the start
// of the buffer x: it belongs at x + offset (the parts of the lower ranks come first).
static void zero_place_part(float *x, size_t offset, size_t count) {
    if (offset > 0) { memmove(x + offset, x, count * sizeof(float)); }
}

// x (n) is summed over ranks, in place, but only this rank's shard of the sum is kept:
// x[offset, offset + count) (zero_shard_of); the rest of x is then garbage.
static void zero_reduce_scatter_f32(float *x, size_t n) {
#ifdef USE_MPI
    if (zero.size == 1) { return; }
    double t0 = now_seconds();
    int *counts = malloc_or_die(2 * zero.size * sizeof(int), "shard table"), *displs = counts + zero.size;
    zero_counts(n, counts, displs);
    MPI_Reduce_scatter(MPI_IN_PLACE, x, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    zero_place_part(x, (size_t)displs[zero.rank], (size_t)counts[zero.rank]);
    free(counts);
    zero.comm_seconds += now_seconds() - t0;
#else
    (void)x; (void)n;
#endif
}

// Every rank's shard of x (n), at its offset, is copied to every rank, in place.
static void zero_all_gather_f32(float *x, size_t n) {
#ifdef USE_MPI
    if (zero.size == 1) { return; }
    double t0 = now_seconds();
    int *counts = malloc_or_die(2 * zero.size * sizeof(int), "shard table"), *displs = counts + zero.size;
    zero_counts(n, counts, displs);
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, counts, displs, MPI_FLOAT, MPI_COMM_WORLD);
    free(counts);
    zero.comm_seconds += now_seconds() - t0;
#else
    (void)x; (void)n;
#endif
}

// x (n) becomes the sum (or mean) over ranks on every rank: a reduce-scatter, then an
// all-gather (a ring all-reduce's two halves), so each element is added up once.
static void zero_allreduce_f32(float *x, size_t n, int op) {
    zero_reduce_scatter_f32(x, n);
    if (op == ZERO_MEAN && zero.size > 1) {
        size_t off, cnt;
        zero_shard_of(n, zero.rank, zero.size, &off, &cnt);
        for (size_t i = 0; i < cnt; i++) { x[off + i] /= zero.size; }
    }
    zero_all_gather_f32(x, n);
}

// Rank 0's full (n) from every rank's shard (count floats, zero_shard_of), or the reverse.
static void zero_gather_f32(const float *shard, float *full, size_t n) {
#ifdef USE_MPI
    if (zero.size > 1) {
        double t0 = now_seconds();
        int *counts = malloc_or_die(2 * zero.size * sizeof(int), "shard table"), *displs = counts + zero.size;
        zero_counts(n, counts, displs);
        MPI_Gatherv(shard, counts[zero.rank], MPI_FLOAT, full, counts, displs, MPI_FLOAT, 0, MPI_COMM_WORLD);
        free(counts);
        zero.comm_seconds += now_seconds() - t0;
        return;
    }
#endif
    memcpy(full, shard, n * sizeof(float));
}

static void zero_scatter_f32(const float *full, float *shard, size_t n) {
#ifdef USE_MPI
    if (zero.size > 1) {
        double t0 = now_seconds();
        int *counts = malloc_or_die(2 * zero.size * sizeof(int), "shard table"), *displs = counts + zero.size;
        zero_counts(n, counts, displs);
        MPI_Scatterv(full, counts, displs, MPI_FLOAT, shard, counts[zero.rank], MPI_FLOAT, 0, MPI_COMM_WORLD);
        free(counts);
        zero.comm_seconds += now_seconds() - t0;
        return;
    }
#endif
    memcpy(shard, full, n * sizeof(float));
}

// ----------------------------------------------------------------------------
// the GPT-2 trainer's side: gradients, the optimizer step, checkpoints

// Overlap: the gradient sums start during the backward pass of a step's last micro-batch,
// as parts of the flat gradient array become final (the model's backward_hook), and make
// progress between its kernels (OpenMPI progresses non-blocking collectives only inside
// MPI calls). The parts, in the order they become final: the final LayerNorm's; then a
// bucket per block, L-1 down to 0, its slice of each of the 12 per-layer tensors (the
// tensors are (L, ...): a block's slices are 12 ranges; ~28 MB a block at d12, about
// PyTorch DDP's 25 MB buckets); last the embeddings (wte's gradient is final only after
// the encoder's backward, the last kernel). Each range is one non-blocking reduce-scatter
// onto the owners of the shards it crosses (the same sums, at the same places, as the
// blocking reduce-scatter); under -z 0 its all-gather follows, started when the bucket after
// next becomes final (a bucket's reduce-scatters are waited for then: by then they are
// likely done), so that every rank starts the same collectives in the same order. LLMC_OVERLAP=0: the blocking sums after
// the backward pass instead.
typedef struct {
    size_t start, count;  // floats of the flat gradient array
    int bucket;           // 0: lnf, 1..L: blocks L-1..0, L+1: the embeddings
    int *counts, *displs; // (size): its part in each rank's shard, as MPI wants: counts, offsets from start
} ZeroRange;

typedef struct {
    int stage;                  // 0, or 1: ZeRO-1
    size_t shard_offset;        // this rank's shard of the flat parameter array (stage 1)
    size_t shard_count;
    int overlap;                // the sums overlap the backward pass (several ranks, LLMC_OVERLAP not 0)
    int num_layers, num_ranges;
    ZeroRange *ranges;          // in the order they become final
    float *grads;               // the gradients being summed (while armed)
    int started, finished;      // ranges whose reduce-scatter was started, waited for
#ifdef USE_MPI
    MPI_Request *requests;      // (2, num_ranges): each range's reduce-scatter, then its all-gather (-z 0)
#endif
} ZeroOptimizer;

// The ranges of the flat array (tensor offsets as point_tensors lays them out) in the order
// the backward pass finishes them, each with its part in every rank's shard.
static void zero_overlap_init(ZeroOptimizer *opt, const size_t sizes[NUM_PARAMETER_TENSORS], int L, size_t span) {
    size_t offsets[NUM_PARAMETER_TENSORS + 1] = {0};
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) { offsets[i + 1] = offsets[i] + (sizes[i] + 15) / 16 * 16; }
    const int first_layer_tensor = 2, end_layer_tensors = 14;  // ln1w .. fcprojb; then lnfw, lnfb
    opt->num_layers = L;
    opt->num_ranges = 2 + L * (end_layer_tensors - first_layer_tensor);
    opt->ranges = malloc_or_die((size_t)opt->num_ranges * sizeof(ZeroRange), "overlap ranges");
    int *tables = malloc_or_die((size_t)opt->num_ranges * 2 * zero.size * sizeof(int), "overlap shard tables");
    int n = 0;
    opt->ranges[n++] = (ZeroRange){offsets[end_layer_tensors], span - offsets[end_layer_tensors], 0, NULL, NULL};
    for (int l = L - 1; l >= 0; l--) {
        for (int i = first_layer_tensor; i < end_layer_tensors; i++) {
            const size_t slice = sizes[i] / (size_t)L;
            opt->ranges[n++] = (ZeroRange){offsets[i] + (size_t)l * slice, slice, L - l, NULL, NULL};
        }
    }
    opt->ranges[n++] = (ZeroRange){0, offsets[first_layer_tensor], L + 1, NULL, NULL};
    for (int k = 0; k < n; k++) {
        ZeroRange *r = &opt->ranges[k];
        r->counts = tables + (size_t)k * 2 * zero.size;
        r->displs = r->counts + zero.size;
        for (int q = 0; q < zero.size; q++) {
            size_t off, cnt;
            zero_shard_of(span, q, zero.size, &off, &cnt);
            const size_t lo = off > r->start ? off : r->start;
            const size_t hi = off + cnt < r->start + r->count ? off + cnt : r->start + r->count;
            r->counts[q] = lo < hi ? zero_int_count(hi - lo) : 0;
            r->displs[q] = lo < hi ? zero_int_count(lo - r->start) : 0;
        }
    }
#ifdef USE_MPI
    opt->requests = malloc_or_die((size_t)n * 2 * sizeof(MPI_Request), "overlap requests");
    for (int k = 0; k < 2 * n; k++) { opt->requests[k] = MPI_REQUEST_NULL; }
#endif
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
    const char *env = getenv("LLMC_OVERLAP");
    if (env != NULL && strcmp(env, "0") != 0 && strcmp(env, "1") != 0) {
        die("LLMC_OVERLAP=%s: expected 0 (blocking gradient sums) or 1 (overlapped with the backward pass)", env);
    }
    opt->overlap = zero.size > 1 && (env == NULL || strcmp(env, "1") == 0);
    if (opt->overlap) { zero_overlap_init(opt, sizes, config->num_layers, span); }
    return opt->shard_count;
}

static void zero_optimizer_free(ZeroOptimizer *opt) {
    if (opt->ranges != NULL) { free(opt->ranges[0].counts); }
    free(opt->ranges);
#ifdef USE_MPI
    free(opt->requests);
#endif
}

#ifdef USE_MPI
// Waits for range k's reduce-scatter and puts this rank's part in place; under -z 0 starts
// the all-gather that copies every rank's part to every rank.
static void zero_finish_range(ZeroOptimizer *opt, int k) {
    ZeroRange *r = &opt->ranges[k];
    float *x = opt->grads + r->start;
    MPI_Wait(&opt->requests[k], MPI_STATUS_IGNORE);
    zero_place_part(x, (size_t)r->displs[zero.rank], (size_t)r->counts[zero.rank]);
    if (opt->stage == 0) {
        MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, r->counts, r->displs, MPI_FLOAT, MPI_COMM_WORLD,
                        &opt->requests[opt->num_ranges + k]);
    }
}
#endif

// The model's backward_hook while armed: starts the sums of the ranges now final, in order,
// and lets the outstanding ones progress.
static void zero_backward_hook(void *ctx, int final_from) {
#ifdef USE_MPI
    ZeroOptimizer *opt = ctx;
    double t0 = now_seconds();
    const int final_buckets = opt->num_layers - final_from;  // buckets 0..final_buckets are final
    while (opt->started < opt->num_ranges && opt->ranges[opt->started].bucket <= final_buckets) {
        ZeroRange *r = &opt->ranges[opt->started];
        while (opt->stage == 0 && opt->ranges[opt->finished].bucket < r->bucket - 1) {
            zero_finish_range(opt, opt->finished++);
        }
        MPI_Ireduce_scatter(MPI_IN_PLACE, opt->grads + r->start, r->counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                            &opt->requests[opt->started]);
        opt->started++;
    }
    int done;
    MPI_Testall(2 * opt->num_ranges, opt->requests, &done, MPI_STATUSES_IGNORE);
    zero.comm_seconds += now_seconds() - t0;
#else
    (void)ctx; (void)final_from;
#endif
}

// Before the backward pass of a step's last micro-batch (when the gradient sums overlap it).
static void zero_overlap_arm(ZeroOptimizer *opt, GPT2 *model) {
    if (!opt->overlap) { return; }
    opt->grads = model->grads_memory;
    opt->started = opt->finished = 0;
    model->backward_hook = zero_backward_hook;
    model->backward_hook_ctx = opt;
}

// After the backward pass: the gradients summed over ranks (all of them, or this rank's shard).
// Overlapped: waits for the sums started during the backward pass. Blocking: a barrier first
// times the wait for the slowest rank apart from the transfer itself.
static void zero_sync_gradients(ZeroOptimizer *opt, GPT2 *model) {
#ifdef USE_MPI
    if (model->backward_hook != NULL) {
        double t0 = now_seconds();
        if (opt->started != opt->num_ranges) { die("the backward pass ended with gradient sums not started"); }
        while (opt->finished < opt->num_ranges) { zero_finish_range(opt, opt->finished++); }
        MPI_Waitall(2 * opt->num_ranges, opt->requests, MPI_STATUSES_IGNORE);
        model->backward_hook = NULL;
        zero.comm_seconds += now_seconds() - t0;
        return;
    }
#endif
    double before = zero.comm_seconds;
    zero_barrier();
    zero.wait_seconds += zero.comm_seconds - before;
    if (opt->stage == 0) { zero_allreduce_f32(model->grads_memory, model->params_span, ZERO_SUM); }
    else { zero_reduce_scatter_f32(model->grads_memory, model->params_span); }
}

// The global gradient norm (the same on every rank).
static float zero_grad_norm(const ZeroOptimizer *opt, const GPT2 *model) {
    if (opt->stage == 0) { return gpt2_grad_norm(model); }
    double ss = sum_of_squares(model->grads_memory + opt->shard_offset, opt->shard_count);
    zero_allreduce_f64(&ss, 1, ZERO_SUM);
    return (float)sqrt(ss);
}

// One AdamW step. Stage 1: each tensor's part inside this rank's shard, with that
// tensor's weight decay (a shard may cut through tensors), then the all-gather.
static void zero_update(const ZeroOptimizer *opt, GPT2 *model, float lr, float beta1, float beta2, float eps,
                        float weight_decay, float grad_scale, int t) {
    if (opt->stage == 0) {
        gpt2_update(model, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
        return;
    }
    const size_t s0 = opt->shard_offset, s1 = s0 + opt->shard_count;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const size_t t0 = (size_t)(((float **)&model->params)[i] - model->params_memory);
        const size_t t1 = t0 + model->param_sizes[i];
        const size_t lo = t0 > s0 ? t0 : s0, hi = t1 < s1 ? t1 : s1;
        if (lo >= hi) { continue; }
        adamw_update(model->params_memory + lo, model->grads_memory + lo, model->m_memory + (lo - s0),
                     model->v_memory + (lo - s0), hi - lo, lr, beta1, beta2, eps,
                     PARAMETER_DECAYS[i] ? weight_decay : 0.0f, grad_scale, t);
    }
    zero_all_gather_f32(model->params_memory, model->params_span);
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
