/*
The optimizer step of llmc/gpt2.h: readying the gradients (zeroing only what the next backward
pass adds to), the global gradient norm (summed as the backward pass finishes each block's
gradients, or in a pass after it), and AdamW (after the backward pass, or beside the next forward
pass's first blocks).

Not a header of its own: gpt2.h includes it after the blocks' forward and backward kernels and
before the passes that call it (gpt2_forward_to_lnf runs a pending update, gpt2_forward_backward
arms the norm), and it uses gpt2.h's GPT2, its tensors and kernels.
*/
#pragma once

// The gradients that the next backward pass adds to rather than writes (PARAMETER_GRAD_OVERWRITTEN's
// others), and the alignment gaps between tensors, set to zero.
static void zero_grads_not_overwritten(GPT2 *model) {
    float *const *grads = (float *const *)&model->grads;
    float *from = model->grads_memory;  // the start of what is left to zero
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        if (!PARAMETER_GRAD_OVERWRITTEN[i]) { continue; }
        zero_floats(from, (size_t)(grads[i] - from));
        from = grads[i] + model->param_sizes[i];
    }
    zero_floats(from, (size_t)(model->grads_memory + model->params_span - from));
}

// ----------------------------------------------------------------------------
// AdamW beside the next forward pass
//
// AdamW is a pass over memory (30 bytes a parameter), and on a Zen 4 VM one thread of it moved
// about as many bytes a second as two (2026-11-29: a pass reading 2 GB took 57 ms on one thread,
// 53 on two): while it runs, the second core could compute. So train_gpt2 hands a step's update
// to the next training forward pass (gpt2_update_defer). There thread 1 updates the parameters in
// the order the pass reads them (stage 0: wpe and the rows of wte the batch's tokens pick; stage
// 1 + h: half h of the blocks' (block h / 2's attention or MLP, block_forward_half); the last:
// lnf's and the rest of wte) while thread 0 runs the encoder and the first halves of blocks on
// its own, each once its stage is done. When what is left of the update would take less than
// half of thread 0's next half, thread 0 stops; the rest of the update runs on every thread, then
// the rest of the forward pass. Every parameter gets the same arithmetic whichever thread updates
// it, and every kernel gives the same bits on any number of threads: the results are those of the
// update run at once (test_train.sh checks it). Whatever else reads the parameters, m or v runs
// gpt2_update_finish first: train_gpt2 before its evaluations, samples and checkpoints, and
// gpt2_forward itself.

// On by default in bf16 runs with exactly two threads on AMD's CPUs: on the Zen 4 VM a T=64 bf16
// step 17-25 ms faster (medians of 8 steps, 4 rounds alternated, the VM's two vCPUs on one L3),
// fp32 within the noise (its blocks take twice as long beside an update that does not), and where
// the host put the vCPUs on two L3s (each with its own link to memory) no faster.
// LLMC_OVERLAP_UPDATE=0|1 forces it (with more threads, two then run the overlap). Serial code.
static int update_overlap_enabled(void) {
    static int enabled = -1;
    if (enabled < 0) {
        enabled = env_flag("LLMC_OVERLAP_UPDATE", cpu_vendor() == CPU_AMD && omp_get_max_threads() == 2 && precision_is_bf16(),
                           "AdamW runs after the backward pass, on every thread", "beside the next forward pass");
        if (omp_get_max_threads() < 2) { enabled = 0; }
    }
    return enabled;
}

// AdamW's sink for a weight matrix's panels (gpt2.h's weight_panels): each pair of rows' new
// bits into them.
typedef struct {
    const gemm_kernel *kernel;
    int rows, cols;
    float *panels;
} PanelSink;
static void panel_sink_put(void *ctx, int pair, int c0, int n, const uint16_t *lo, const uint16_t *hi) {
    const PanelSink *s = (const PanelSink *)ctx;
    gemm_put_b_pair(s->kernel, s->rows, s->cols, s->panels, pair, c0, n, lo, hi);
}

// AdamW on the n parameters from flat position a, all of tensor i, their moments at m and v, and
// the bf16 copy where params16 (the copy's start) is not NULL: where the tensor has weight panels,
// written too, a layer's matrix at a time (the range is whole layers then).
static void update_params(GPT2 *model, int i, size_t a, size_t n, float *m, float *v, uint16_t *params16, float lr,
                          float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
    const int ftz = gemm_flushes_bf16_denormals();
    const float decay = PARAMETER_DECAYS[i] ? weight_decay : 0.0f;
    const size_t t0 = (size_t)(((float **)&model->params)[i] - model->params_memory);
    const size_t per_layer = model->param_sizes[i] / model->config.num_layers;
    int rows, cols;
    if (params16 == NULL || model->weight_panels == NULL || model->weight_panels_words[i] == 0 ||
        !gpt2_panel_matrix(model, i, &rows, &cols)) {
        adamw_update_ex(model->params_memory + a, params16 != NULL ? params16 + a : NULL, ftz, model->grads_memory + a, m, v,
                        n, lr, beta1, beta2, eps, decay, grad_scale, t);
        return;
    }
    if ((a - t0) % per_layer != 0 || n % per_layer != 0) { die("AdamW: part of a layer's matrix with panels"); }
    for (size_t at = a; at < a + n; at += per_layer) {
        PanelSink sink = {model->weight_panels_kernel, rows, cols,
                          model->weight_panels + model->weight_panels_at[i] + (at - t0) / per_layer * model->weight_panels_words[i]};
        const adamw_pair_sink put = {panel_sink_put, &sink};
        adamw_update_rows(model->params_memory + at, params16 + at, ftz, model->grads_memory + at, m + (at - a), v + (at - a),
                          (size_t)rows, (size_t)cols, &put, lr, beta1, beta2, eps, decay, grad_scale, t);
    }
}

// AdamW (the pending step's arguments) on n parameters of tensor i from its element lo, with the
// bf16 copy where there is one; then n added to *progress where it is not NULL.
static void update_tensor_part(GPT2 *model, int i, size_t lo, size_t n, atomic_llong *progress) {
    const PendingUpdate *u = &model->pending;
    const size_t a = (size_t)(((float **)&model->params)[i] - model->params_memory) + lo;
    update_params(model, i, a, n, model->m_memory + a, model->v_memory + a, model->params_bf16, u->lr, u->beta1, u->beta2,
                  u->eps, u->weight_decay, u->grad_scale, u->t);
    if (progress != NULL) { atomic_fetch_add(progress, (long long)n); }
}

static int wte_row_marked(const PendingUpdate *u, int r) { return (int)((u->rows[r / 64] >> (r % 64)) & 1); }

// The rows of wte that are marked (marked = 1) or not (0), in runs of neighbours of at most
// 1024 rows (a few ms on one thread, the step by which thread 0 sees the update's progress).
static void update_wte_rows(GPT2 *model, int marked, atomic_llong *progress) {
    const int Vp = model->config.padded_vocab_size;
    const size_t C = (size_t)model->config.channels;
    for (int r = 0; r < Vp;) {
        int e = r;
        while (e < Vp && e - r < 1024 && wte_row_marked(&model->pending, e) == marked) { e++; }
        if (e > r) { update_tensor_part(model, 0, r * C, (size_t)(e - r) * C, progress); }
        r = e > r ? e : r + 1;  // row r is not of this kind
    }
}

// Stage s (0 .. 2L + 1) of the pending update, each part's parameters added to *progress where
// it is not NULL; its parameter count where update is 0.
static size_t update_stage(GPT2 *model, int s, int update, atomic_llong *progress) {
    const int L = model->config.num_layers, C = model->config.channels, Vp = model->config.padded_vocab_size;
    size_t n = 0;
    if (s == 0 || s == 2 * L + 1) {  // the encoder's: wpe and the batch's rows of wte; or lnf and wte's other rows
        const int first = s == 0;
        for (int r = 0; r < Vp; r++) { n += wte_row_marked(&model->pending, r) == first ? (size_t)C : 0; }
        for (int i = first ? 1 : 14; i <= (first ? 1 : 15); i++) {
            if (update) { update_tensor_part(model, i, 0, model->param_sizes[i], progress); }
            n += model->param_sizes[i];
        }
        if (update) { update_wte_rows(model, first, progress); }
        return n;
    }
    const int h = s - 1, first = h % 2 == 0 ? 2 : 8;  // ln1w .. attprojb, or ln2w .. fcprojb
    for (int i = first; i < first + 6; i++) {  // block h / 2's part of each
        const size_t part = model->param_sizes[i] / L;
        if (update) { update_tensor_part(model, i, (size_t)(h / 2) * part, part, progress); }
        n += part;
    }
    return n;
}

// The end of a pending update: the stages from `from` on, on every thread, then the zeroing
// gpt2_zero_grad left.
static void update_finish_from(GPT2 *model, int from) {
    PendingUpdate *u = &model->pending;
    for (int s = from; s < 2 * model->config.num_layers + 2; s++) { update_stage(model, s, 1, NULL); }
    model->params_bf16_current = model->params_bf16 != NULL;
    u->active = 0;
    if (u->zero_grads) { zero_grads_not_overwritten(model); }
    u->zero_grads = 0;
}

// Runs a pending update now, if there is one (serial code).
static void gpt2_update_finish(GPT2 *model) {
    if (!model->pending.active) { return; }
    memset(model->pending.rows, 0, ((size_t)model->config.padded_vocab_size + 63) / 64 * sizeof(uint64_t));
    update_finish_from(model, 0);
}

// The pending update beside the encoder and the first blocks of the forward pass over inputs
// (B, T), as above, in halves of blocks. Returns how much of the pass it ran: 0 nothing, 1 the
// encoder, 1 + k the encoder and the blocks' halves 0 .. k-1 (block_forward_half).
static int forward_beside_update(GPT2 *model, const int *inputs, int B, int T) {
    PendingUpdate *u = &model->pending;
    const int L = model->config.num_layers, N = B * T, stages = 2 * L + 2;
    check_tokens(model, inputs, N, "input");
    memset(u->rows, 0, ((size_t)model->config.padded_vocab_size + 63) / 64 * sizeof(uint64_t));
    for (int i = 0; i < N; i++) { u->rows[inputs[i] / 64] |= (uint64_t)1 << (inputs[i] % 64); }
    double total = 0;  // parameters
    for (int s = 0; s < stages; s++) { total += (double)update_stage(model, s, 0, NULL); }
    model->params_bf16_current = model->params_bf16 != NULL;  // each stage writes its part of the copy
    atomic_int done = 0, stop = 0;  // stages done; thread 0 has left
    atomic_llong updated = 0;       // parameters done
    int ran = 0;
    const double t0 = now_seconds();
    #pragma omp parallel num_threads(2)
    {
        omp_set_num_threads(1);  // the kernels each thread calls run on that thread alone
        if (omp_get_num_threads() < 2) {  // a thread limit: the update then runs after
            atomic_store(&stop, 1);
        } else if (omp_get_thread_num() == 1) {
            for (int s = 0; s < stages && !atomic_load(&stop); s++) {
                update_stage(model, s, 1, &updated);
                atomic_store(&done, s + 1);
            }
        } else if (omp_get_thread_num() == 0) {
            while (atomic_load(&done) < 1) {}
            fwd_lap(model, PROF_ADAMW);
            forward_encoder(model, inputs, B, T);
            ran = 1;
            for (int h = 0; h < 2 * L; h++) {
                const double n = (double)atomic_load(&updated);
                const double left_ms = (now_seconds() - t0) * 1e3 * (total - n) / n;
                if (atomic_load(&done) == stages || left_ms < 0.5 * u->half_ms[h % 2]) { break; }
                while (atomic_load(&done) < h + 2) {}
                fwd_lap(model, PROF_ADAMW);
                const double h0 = now_seconds();
                block_forward_half(model, h, B, T);
                u->half_ms[h % 2] = (now_seconds() - h0) * 1e3;
                ran = 2 + h;
            }
            atomic_store(&stop, 1);
        }
    }
    update_finish_from(model, atomic_load(&done));
    fwd_lap(model, PROF_ADAMW);
    return ran;
}

// Readies the gradients for a step: the first gpt2_forward_backward after it writes the
// tensors of PARAMETER_GRAD_OVERWRITTEN, so only the others and the alignment gaps between
// tensors (which the gradient norm and the MPI sums read) are zeroed here, not the whole
// gradient array again.
// A pending update (gpt2_update_defer) still reads the gradients: then the zeroing waits for it.
static void gpt2_zero_grad(GPT2 *model) {
    if (model->pending.active) {
        model->pending.zero_grads = 1;
    } else {
        zero_grads_not_overwritten(model);
    }
    model->grads_overwrite = 1;
    fwd_lap(model, PROF_ZEROING);
}

static int grad_norm_in_backward_enabled(void) {
    static int enabled = -1;
    if (enabled < 0) { enabled = env_flag("LLMC_NORM_IN_BACKWARD", 1, "the norm's pass after the backward", NULL); }
    return enabled;
}

// The group (see GradNormSums) of flat gradient position pos: when the backward pass has
// finished it. Tensors 2..13 are the blocks' (L slices each), 14 and 15 the final LayerNorm's.
static int grad_norm_group(const GPT2 *model, size_t pos) {
    const int L = model->config.num_layers;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const size_t t0 = (size_t)(((float *const *)&model->grads)[i] - model->grads_memory), t1 = t0 + model->param_sizes[i];
        if (pos < t0 || pos >= t1) { continue; }
        if (i < 2) { return L + 1; }
        if (i >= 14) { return 0; }
        return L - (int)((pos - t0) / (model->param_sizes[i] / (size_t)L));
    }
    return 0;  // a gap between tensors: zero, never written
}

// Before the backward pass of a step's last micro-batch (one process): its gradients are
// final as it finishes them, and the norm's sums follow (the first call sets the blocks up).
static void gpt2_grad_norm_arm(GPT2 *model) {
    if (!grad_norm_in_backward_enabled()) { return; }
    GradNormSums *g = &model->norm;
    if (g->order == NULL) {
        const int L = model->config.num_layers;
        sum_squares_blocks_init(&g->blocks, model->params_span);
        const size_t nb = g->blocks.num_blocks;
        g->num_groups = L + 2;
        g->order = malloc_or_die((nb > 0 ? nb : 1) * sizeof(size_t), "the gradient norm's block order");
        g->group_first = calloc(g->num_groups + 1, sizeof(size_t));
        int *group = malloc_or_die((nb > 0 ? nb : 1) * sizeof(int), "the gradient norm's block groups");
        if (g->group_first == NULL) { die("out of memory for the gradient norm's blocks"); }
        for (size_t k = 0; k < nb; k++) {  // a block is final when its latest position is
            const size_t b0 = g->blocks.start[k], b1 = g->blocks.start[k + 1];
            int grp = grad_norm_group(model, b0);
            // within a tensor, lower positions are lower layers: final later; so each tensor's
            // first position in the block is its latest
            for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
                const size_t t0 = (size_t)(((float *const *)&model->grads)[i] - model->grads_memory);
                if (t0 > b0 && t0 < b1) {
                    const int gi = grad_norm_group(model, t0);
                    if (gi > grp) { grp = gi; }
                }
            }
            group[k] = grp;
            g->group_first[grp + 1]++;
        }
        for (int i = 0; i < g->num_groups; i++) { g->group_first[i + 1] += g->group_first[i]; }
        size_t *next = malloc_or_die((size_t)g->num_groups * sizeof(size_t), "the gradient norm's block order");
        memcpy(next, g->group_first, (size_t)g->num_groups * sizeof(size_t));
        for (size_t k = 0; k < nb; k++) { g->order[next[group[k]]++] = k; }
        free(next);
        free(group);
        g->summed = malloc_or_die(nb > 0 ? nb : 1, "the gradient norm's block flags");
        g->wte_late = calloc(((size_t)model->config.padded_vocab_size + 63) / 64, sizeof(uint64_t));
        if (g->wte_late == NULL) { die("out of memory for the gradient norm's wte rows"); }
        g->hook = (gemm_final_hook){grad_norm_final_run, model};
    }
    memset(g->summed, 0, g->blocks.num_blocks);
    g->armed = 1;
    g->done_group = -1;
}

// The on_final hook of the weight gradients' products while armed (NULL otherwise).
static const gemm_final_hook *grad_norm_hook(GPT2 *model) { return model->norm.armed ? &model->norm.hook : NULL; }

// 1 if the encoder's backward has still to add to one of wte's gradient rows r0..r1.
static int grad_norm_wte_late(const GradNormSums *g, size_t r0, size_t r1) {
    for (size_t r = r0; r <= r1; r++) {
        if (g->wte_late[r / 64] >> (r % 64) & 1) { return 1; }
    }
    return 0;
}

// A product's hook (gemm.h's on_final, any thread): the gradients in run (n floats) are final;
// the blocks wholly inside it are summed now, while the run is in this thread's cache. Runs of
// one product are disjoint, so are their blocks.
static void grad_norm_final_run(void *ctx, float *run, size_t n) {
    GPT2 *model = ctx;
    GradNormSums *g = &model->norm;
    const SumSquaresBlocks *s = &g->blocks;
    const size_t lo = (size_t)(run - model->grads_memory), hi = lo + n, C = (size_t)model->config.channels;
    const size_t wte0 = (size_t)(model->grads.wte - model->grads_memory), wte1 = wte0 + model->param_sizes[0];
    for (size_t k = sum_squares_block_at(s, lo); k < s->num_blocks && s->start[k + 1] <= hi; k++) {
        const size_t b0 = s->start[k], b1 = s->start[k + 1];
        if (b0 >= wte0 && b0 < wte1 && grad_norm_wte_late(g, (b0 - wte0) / C, (b1 - 1 - wte0) / C)) { continue; }
        s->sum[k] = sum_of_squares_block(model->grads_memory, b0, b1);
        g->summed[k] = 1;
    }
}

// The tokens (N) whose wte gradient rows the encoder's backward adds to: set (late = 1) before
// the classifier's product, cleared after the encoder's backward.
static void grad_norm_mark_wte(GPT2 *model, const int *tokens, int N, int late) {
    GradNormSums *g = &model->norm;
    if (!g->armed) { return; }
    for (int i = 0; i < N; i++) {
        const uint64_t bit = (uint64_t)1 << (tokens[i] % 64);
        if (late) { g->wte_late[tokens[i] / 64] |= bit; } else { g->wte_late[tokens[i] / 64] &= ~bit; }
    }
}

// backward_done's part: the blocks of the groups final now (final_from as backward_hook's).
static void grad_norm_progress(GPT2 *model, int final_from) {
    GradNormSums *g = &model->norm;
    if (!g->armed) { return; }
    const int final_group = final_from < 0 ? g->num_groups - 1 : model->config.num_layers - final_from;
    if (final_group <= g->done_group) { return; }
    const size_t first = g->group_first[g->done_group + 1], end = g->group_first[final_group + 1];
    sum_squares_blocks_compute(&g->blocks, model->grads_memory, g->order + first, end - first, g->summed);
    g->done_group = final_group;
    bwd_lap(model, PROF_GRAD_NORM);
}

// The L2 norm of all gradients (sum_of_squares in adamw.h: deterministic, any thread count):
// from the blocks summed during the backward pass where it was armed and ran to its end,
// otherwise by a pass over the gradients. The same bits either way.
static float gpt2_grad_norm(GPT2 *model) {
    GradNormSums *g = &model->norm;
    const int ready = g->armed && g->done_group == g->num_groups - 1;
    g->armed = 0;
    if (ready) { return (float)sqrt(sum_squares_blocks_total(&g->blocks)); }
    return (float)sqrt(sum_of_squares(model->grads_memory, model->params_span));
}

// One AdamW step (t counts from 1) of the parameters in [lo, hi) of the flat array (all of it:
// 0 to params_span), m and v holding that range only: each tensor's part with its weight decay
// (the 2-D tensors only). The range may cut through tensors (a ZeRO-1 shard, llmc/zero.h).
static void gpt2_update_range(GPT2 *model, size_t lo, size_t hi, float *m, float *v, float lr, float beta1,
                              float beta2, float eps, float weight_decay, float grad_scale, int t) {
    // the whole span: the bf16 copy (where there is one) written in the same pass, and current
    // after; a shard: the copy is left alone and stale (the next forward rounds it anew)
    uint16_t *params16 = lo == 0 && hi == model->params_span ? model->params_bf16 : NULL;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const size_t t0 = (size_t)(((float **)&model->params)[i] - model->params_memory);
        const size_t t1 = t0 + model->param_sizes[i];
        const size_t a = t0 > lo ? t0 : lo, b = t1 < hi ? t1 : hi;
        if (a >= b) { continue; }
        update_params(model, i, a, b - a, m + (a - lo), v + (a - lo), params16, lr, beta1, beta2, eps, weight_decay,
                      grad_scale, t);
    }
    model->params_bf16_current = params16 != NULL;
}

static void gpt2_update(GPT2 *model, float lr, float beta1, float beta2, float eps, float weight_decay,
                        float grad_scale, int t) {
    gpt2_update_range(model, 0, model->params_span, model->m_memory, model->v_memory, lr, beta1, beta2, eps,
                      weight_decay, grad_scale, t);
}

// gpt2_update, run by the next training forward pass beside its first blocks where that is on
// (update_overlap_enabled), else now. The caller runs gpt2_update_finish before anything else
// reads the parameters, m or v (an evaluation, a sample, a checkpoint; gpt2_forward does it itself).
static void gpt2_update_defer(GPT2 *model, float lr, float beta1, float beta2, float eps, float weight_decay,
                              float grad_scale, int t) {
    if (!update_overlap_enabled()) {
        gpt2_update(model, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
        return;
    }
    PendingUpdate *u = &model->pending;
    if (u->rows == NULL) {
        u->rows = calloc(((size_t)model->config.padded_vocab_size + 63) / 64, sizeof(uint64_t));
        if (u->rows == NULL) { die("out of memory for the update's rows of wte"); }
    }
    u->lr = lr, u->beta1 = beta1, u->beta2 = beta2, u->eps = eps, u->weight_decay = weight_decay;
    u->grad_scale = grad_scale, u->t = t;
    u->active = 1;
}
