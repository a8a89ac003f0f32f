/*
Trains GPT-2 on the CPU. Flags follow llm.c's train_gpt2.cu; run with -h.

  ./train_gpt2 -e d6 -b 8 -t 128 -x 300 -u 30 -q 0.1 -v 50 -s 100 -n 100 -o log_d6

Each step: B*T*(accumulation) tokens forward and backward, gradient clipping,
AdamW with a warmup + decay schedule. Every -v steps the validation loss,
every -s steps a sample, every -n steps a checkpoint. With -o DIR, DIR/main.log
gets one line per step ("s:STEP trl:LOSS lr:LR norm:NORM ms:MS tok/s:N") and
one per validation ("s:STEP tel:LOSS"); -y 1 resumes from DIR's newest
complete checkpoint and continues exactly as if never stopped. SIGINT/SIGTERM
stop the run at the next step boundary with a checkpoint ("s:STEP stop:SIGTERM");
DIR/lock keeps a second run out of DIR (llmc/runctl.h). --dry-run 1 checks the
flags, the model's config and the data, prints the model's sizes and the run's plan,
and exits without allocating the model (GPT-2 XL's sizes on any machine).

main is the run's outline; each part is a function below "the run".
*/
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "llmc/checkpoint.h"
#include "llmc/dataloader.h"
#include "llmc/cli.h"
#include "llmc/gpt2.h"
#include "llmc/gpt2_cache.h"
#include "llmc/hellaswag.h"
#include "llmc/runctl.h"
#include "llmc/sampler.h"
#include "llmc/schedulers.h"
#include "llmc/tokenizer.h"
#include "llmc/utils.h"
#include "llmc/val_loss.h"
#include "llmc/zero.h"

// ----------------------------------------------------------------------------
// command line

typedef struct {
    const char *train_pattern;    // -i
    const char *val_pattern;      // -j
    const char *model;            // -e: a checkpoint file or d6|d12|d24|d36|d48
    const char *output_dir;       // -o, NULL for none
    const char *tokenizer_path;   // --tokenizer, NULL: gpt2_tokenizer.bin beside the train shards
    int B, T;                     // -b, -t
    long total_batch;             // -d tokens per step, -1: B*T
    float learning_rate;          // -l peak
    int warmup_steps;             // -u
    int schedule;                 // -k
    float final_fraction;         // -q
    float weight_decay;           // -c
    float grad_clip;              // --grad-clip, 0: off
    int max_steps;                // -x, -1: one epoch
    int val_every, val_batches;   // -v, -m
    int sample_every, gen_tokens; // -s, -g
    float temperature;            // --temperature
    int top_k;                    // --top-k
    int checkpoint_every;         // -n, 0: never
    int keep;                     // --keep, 0: all
    int resume;                   // -y
    int shuffle;                  // --shuffle
    int max_skips;                // --max-skips
    uint64_t seed;                // --seed
    int profile;                  // --profile
    int eval_every;               // --eval-every: HellaSwag every N steps, 0: never
    const char *eval_file;        // --eval-file
    int zero_stage;               // -z
    int precision;                // --precision: PRECISION_FP32 or PRECISION_BF16 (llmc/gemm.h)
    int recompute;                // --recompute
    int dry_run;                  // --dry-run
} TrainArgs;

static void print_usage(FILE *out) {
    fprintf(out,
        "usage: ./train_gpt2 [options]\n"
        "data and model\n"
        "  -i PATTERN  train token shards (glob)   default data/tinyshakespeare/tiny_shakespeare_train_*.bin\n"
        "  -j PATTERN  val token shards (glob)     default data/tinyshakespeare/tiny_shakespeare_val_*.bin\n"
        "  -e MODEL    llm.c checkpoint file, or d6|d12|d24|d36|d48 for a new model   default d12\n"
        "  -o DIR      output directory: main.log and checkpoints (created if missing)   default none\n"
        "  --tokenizer FILE  llm.c tokenizer for samples   default gpt2_tokenizer.bin beside the train shards\n"
        "  --shuffle 0|1     shuffle shards and batches every epoch   default 1\n"
        "  --seed N    seed of the initialization, data order and sampler   default 1337\n"
        "optimization\n"
        "  -b N        micro-batch size B          default 4\n"
        "  -t N        sequence length T           default 64\n"
        "  -d N        tokens per step (ranks*B*T times the accumulation steps), -1 = ranks*B*T   default -1\n"
        "  -l LR       peak learning rate          default 3e-4\n"
        "  -u N        warmup steps (linear)       default 0\n"
        "  -k NAME     decay after warmup: cosine|linear|constant   default cosine\n"
        "  -q F        final learning rate as a fraction of the peak   default 1.0\n"
        "  -c F        weight decay (2-D tensors only)   default 0.0\n"
        "  --grad-clip F   clip the global gradient norm to F, 0 = off   default 1.0\n"
        "  -x N        steps, -1 = one epoch       default -1\n"
        "  --max-skips K   stop after K steps in a row with a non-finite loss or norm   default 5\n"
        "  -z 0|1      ZeRO stage under mpirun: 1 = each rank keeps its shard of AdamW's m and v   default 0\n"
        "evaluation, samples, checkpoints\n"
        "  -v N        validate every N steps and at the end, 0 = never   default 20\n"
        "  -m N        validation batches          default 20\n"
        "  -s N        sample every N steps and at the end, 0 = never   default 20\n"
        "  -g N        tokens to generate          default 64\n"
        "  --temperature F   sampling temperature, 0 = greedy   default 1.0\n"
        "  --top-k N   sample from the N most likely tokens, 0 = all   default 0\n"
        "  --eval-every N    HellaSwag accuracy every N steps and at the end, 0 = never   default 0\n"
        "  --eval-file FILE  its eval file (scripts/convert/prepare_hellaswag.py)\n"
        "  -n N        checkpoint every N steps and at the end (needs -o), 0 = never   default 0\n"
        "  --keep K    keep the newest K checkpoints, 0 = all   default 0\n"
        "  -y 0|1      resume from the newest complete checkpoint in -o   default 0\n"
        "  --profile 0|1   print where the time of each step goes, kernel by kernel   default 0\n"
        "  --precision fp32|bf16   matmul operands in fp32, or rounded to bf16 (fp32 sums)   default fp32\n"
        "  --recompute 0|1  keep only each block's input, re-run the block's forward before its backward:\n"
        "                   less activation memory for 2/3 of another forward of the blocks   default 0\n"
        "  --dry-run 0|1   check the flags, the model's config and the data, print the model's sizes and\n"
        "                  the run's plan, then exit: nothing allocated, nothing written   default 0\n"
        "  -h          this help\n"
        "Threads: OMP_NUM_THREADS (default: all cores). Data-parallel: mpirun -np N ./train_gpt2 ...\n");
}

// The flags that depend on each other.
static void check_args(const TrainArgs *a) {
    if (a->max_steps == 0) { usage_error("-x", "0 steps: use -1 for one epoch or a positive count"); }
    long bt = (long)a->B * a->T;
    if (a->total_batch == 0 || (a->total_batch > 0 && a->total_batch % bt != 0)) {
        usage_error("-d", "%ld tokens per step is not a multiple of B*T = %d*%d = %ld", a->total_batch, a->B,
                    a->T, bt);
    }
    if (a->eval_every > 0 && a->eval_file == NULL) { usage_error("--eval-every", "needs --eval-file FILE"); }
    if (a->eval_file != NULL && a->eval_every == 0) { usage_error("--eval-file", "needs --eval-every N"); }
    if (a->total_batch > 0 && a->total_batch % (bt * zero.size) != 0) {
        usage_error("-d", "%ld tokens per step is not a multiple of ranks*B*T = %d*%d*%d = %ld", a->total_batch,
                    zero.size, a->B, a->T, bt * zero.size);
    }
    if (a->resume && a->output_dir == NULL) { usage_error("-y", "resuming needs the run's directory (-o DIR)"); }
    if (a->checkpoint_every > 0 && a->output_dir == NULL) { usage_error("-n", "checkpoints need an output directory (-o DIR)"); }
}

static void parse_args(TrainArgs *a, int argc, char **argv) {
    cli_print_usage = print_usage;
    *a = (TrainArgs){
        .train_pattern = "data/tinyshakespeare/tiny_shakespeare_train_*.bin",
        .val_pattern = "data/tinyshakespeare/tiny_shakespeare_val_*.bin",
        .model = "d12", .B = 4, .T = 64, .total_batch = -1, .learning_rate = 3e-4f,
        .schedule = SCHEDULE_COSINE, .final_fraction = 1.0f, .grad_clip = 1.0f, .max_steps = -1,
        .val_every = 20, .val_batches = 20, .sample_every = 20, .gen_tokens = 64,
        .temperature = 1.0f, .shuffle = 1, .max_skips = 5, .seed = 1337};
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        const char *val = cli_flag_value(argc, argv, &i);
        if (strcmp(flag, "-i") == 0) { a->train_pattern = val; }
        else if (strcmp(flag, "-j") == 0) { a->val_pattern = val; }
        else if (strcmp(flag, "-e") == 0) { a->model = val; }
        else if (strcmp(flag, "-o") == 0) { a->output_dir = val; }
        else if (strcmp(flag, "--tokenizer") == 0) { a->tokenizer_path = val; }
        else if (strcmp(flag, "-b") == 0) { a->B = (int)parse_long(flag, val, 1, 1 << 16); }
        else if (strcmp(flag, "-t") == 0) { a->T = (int)parse_long(flag, val, 1, 1 << 20); }
        else if (strcmp(flag, "-d") == 0) { a->total_batch = parse_long(flag, val, -1, 1L << 40); }
        else if (strcmp(flag, "-l") == 0) { a->learning_rate = parse_float(flag, val, 0.0f, 10.0f); }
        else if (strcmp(flag, "-u") == 0) { a->warmup_steps = (int)parse_long(flag, val, 0, INT_MAX); }
        else if (strcmp(flag, "-k") == 0) {
            a->schedule = schedule_from_name(val);
            if (a->schedule < 0) { usage_error(flag, "'%s' is not cosine, linear or constant", val); }
        }
        else if (strcmp(flag, "-q") == 0) { a->final_fraction = parse_float(flag, val, 0.0f, 1.0f); }
        else if (strcmp(flag, "-c") == 0) { a->weight_decay = parse_float(flag, val, 0.0f, 10.0f); }
        else if (strcmp(flag, "--grad-clip") == 0) { a->grad_clip = parse_float(flag, val, 0.0f, 1e30f); }
        else if (strcmp(flag, "-x") == 0) { a->max_steps = (int)parse_long(flag, val, -1, INT_MAX - 1); }
        else if (strcmp(flag, "-v") == 0) { a->val_every = (int)parse_long(flag, val, 0, INT_MAX); }
        else if (strcmp(flag, "-m") == 0) { a->val_batches = (int)parse_long(flag, val, 1, INT_MAX); }
        else if (strcmp(flag, "-s") == 0) { a->sample_every = (int)parse_long(flag, val, 0, INT_MAX); }
        else if (strcmp(flag, "-g") == 0) { a->gen_tokens = (int)parse_long(flag, val, 1, 1 << 20); }
        else if (strcmp(flag, "--temperature") == 0) { a->temperature = parse_float(flag, val, 0.0f, 100.0f); }
        else if (strcmp(flag, "--top-k") == 0) { a->top_k = (int)parse_long(flag, val, 0, 1 << 24); }
        else if (strcmp(flag, "-n") == 0) { a->checkpoint_every = (int)parse_long(flag, val, 0, INT_MAX); }
        else if (strcmp(flag, "--keep") == 0) { a->keep = (int)parse_long(flag, val, 0, INT_MAX); }
        else if (strcmp(flag, "-y") == 0) { a->resume = (int)parse_long(flag, val, 0, 1); }
        else if (strcmp(flag, "--shuffle") == 0) { a->shuffle = (int)parse_long(flag, val, 0, 1); }
        else if (strcmp(flag, "--profile") == 0) { a->profile = (int)parse_long(flag, val, 0, 1); }
        else if (strcmp(flag, "--eval-every") == 0) { a->eval_every = (int)parse_long(flag, val, 0, INT_MAX); }
        else if (strcmp(flag, "--eval-file") == 0) { a->eval_file = val; }
        else if (strcmp(flag, "--precision") == 0) { a->precision = parse_precision(flag, val); }
        else if (strcmp(flag, "--recompute") == 0) { a->recompute = (int)parse_long(flag, val, 0, 1); }
        else if (strcmp(flag, "--max-skips") == 0) { a->max_skips = (int)parse_long(flag, val, 1, INT_MAX); }
        else if (strcmp(flag, "--seed") == 0) { a->seed = (uint64_t)parse_long(flag, val, 0, LONG_MAX); }
        else if (strcmp(flag, "-z") == 0) { a->zero_stage = (int)parse_long(flag, val, 0, 1); }
        else if (strcmp(flag, "--dry-run") == 0) { a->dry_run = (int)parse_long(flag, val, 0, 1); }
        else { usage_error(flag, "unknown flag"); }
    }
    check_args(a);
}

// ----------------------------------------------------------------------------
// testing hooks: LLMC_FAULT="nan-loss:S" makes step S's loss NaN;
// "kill-in-checkpoint:S" sends SIGKILL to ourselves halfway through writing
// checkpoint S's model file; "term-in-checkpoint:S" sends two SIGTERMs there instead.
// Used by scripts/tests/test_resume.sh and scripts/tests/test_signals.sh only.

typedef struct { int nan_loss_step, kill_checkpoint_step; } Faults;

static Faults read_faults(void) {
    Faults f = {-1, -1};
    const char *s = getenv("LLMC_FAULT");
    if (s == NULL) { return f; }
    int step;
    if (sscanf(s, "nan-loss:%d", &step) == 1) { f.nan_loss_step = step; }
    else if (sscanf(s, "kill-in-checkpoint:%d", &step) == 1) { f.kill_checkpoint_step = step; }
    else if (sscanf(s, "term-in-checkpoint:%d", &step) == 1) {
        f.kill_checkpoint_step = step;
        atomic_fault_signal = SIGTERM;
    }
    else { die("LLMC_FAULT=%s: not nan-loss:STEP, kill-in-checkpoint:STEP or term-in-checkpoint:STEP", s); }
    return f;
}

// make profile: perf record starts with its events off (-D -1) and a control FIFO,
// named by LLMC_PERF_CTL; the trainer turns them on once the first (warm-up) step is
// done, so the profile holds steps only, not the start-up (allocation, initialization).
static void perf_enable_events(void) {
    const char *fifo = getenv("LLMC_PERF_CTL");
    if (fifo == NULL) { return; }
    int fd = open(fifo, O_WRONLY | O_NONBLOCK);
    if (fd < 0 || write(fd, "enable\n", 7) != 7) {
        fprintf(stderr, "warning: LLMC_PERF_CTL=%s: cannot tell perf to start: %s\n", fifo, strerror(errno));
    }
    if (fd >= 0) { close(fd); }
}

// ----------------------------------------------------------------------------
// helpers of the training loop

// The next micro-batch of this rank. The global order of micro-batches is the data
// order; of every N in a row, rank r trains on the r-th: loader sits at the same global
// position on every rank, and the tokens of a step do not depend on N. Reads all N
// (a batch is a few KB) and returns 1 if one of them began a new epoch.
static int next_rank_batch(DataLoader *loader, int *inputs, int *targets) {
    int new_epoch = 0;
    for (int r = 0; r < zero.size; r++) {
        new_epoch |= dataloader_next_batch(loader);
        if (r == zero.rank && zero.size > 1) {
            memcpy(inputs, loader->inputs, (size_t)loader->B * loader->T * sizeof(int));
            memcpy(targets, loader->targets, (size_t)loader->B * loader->T * sizeof(int));
        }
    }
    return new_epoch;
}

// Generates n tokens after the end-of-text token and prints them, one position's
// forward per token through the key/value cache (gpt2.h), whose window is the
// training T: a sample longer than that slides (the last T/2 tokens re-encoded).
static void generate_sample(GPT2 *model, GPT2Cache *cache, const Tokenizer *tok, int *tokens, int n, int eot,
                            float temperature, int top_k, uint64_t *rng, float *scratch) {
    tokens[0] = eot;
    gpt2_cache_reset(cache);
    if (precision_is_bf16()) { gpt2_cache_use_bf16(cache, model); }  // of the weights as they are now
    printf("generating:\n---\n");
    for (int i = 1; i <= n; i++) {
        int next = gpt2_cache_sample(model, cache, tokens, i, temperature, top_k, 1.0f, rng, scratch, NULL);
        tokens[i] = next;
        tokenizer_print(tok, (uint32_t)next, stdout);
        fflush(stdout);
    }
    printf("\n---\n");
}

// The default tokenizer: gpt2_tokenizer.bin in the directory of the train shards.
static void default_tokenizer_path(const char *train_pattern, char *out, size_t size) {
    char copy[PATH_MAX];
    snprintf(copy, sizeof(copy), "%s", train_pattern);
    snprintf(out, size, "%s/gpt2_tokenizer.bin", dirname(copy));
}

// The hyperparameters of this run, as a checkpoint records them.
static TrainState initial_state(const TrainArgs *a, const GPT2Config *config, int64_t accum, int max_steps) {
    TrainState s;
    memset(&s, 0, sizeof(s));
    s.config = *config;
    s.B = a->B;
    s.T = a->T;
    s.grad_accum_steps = accum;
    s.seed = a->seed;
    s.shuffle = a->shuffle;
    s.sample_rng = random_seed_state(a->seed ^ 0x5A3D1E);
    s.learning_rate = a->learning_rate;
    s.final_fraction = a->final_fraction;
    s.weight_decay = a->weight_decay;
    s.grad_clip = a->grad_clip;
    s.schedule = a->schedule;
    s.warmup_steps = a->warmup_steps;
    s.max_steps = max_steps;
    return s;
}

// A setting of the run a checkpoint came from, against this command's: integers compared as
// integers (a seed above 2^53 is not exact in a double), floats as floats.
static void check_same_int(const char *path, const char *flag, uint64_t ck, uint64_t run) {
    if (ck != run) {
        die("%s: the run was made with %s %llu, this command has %llu; resume with the same settings", path, flag,
            (unsigned long long)ck, (unsigned long long)run);
    }
}

static void check_same_float(const char *path, const char *flag, float ck, float run) {
    if (ck != run) {
        die("%s: the run was made with %s %g, this command has %g; resume with the same settings", path, flag,
            ck, run);
    }
}

// A checkpoint may only continue the run it came from: same model, batch and
// hyperparameters (only -x may grow, to train longer).
static void check_resume_matches(const char *path, const TrainState *ck, const TrainState *run) {
    const GPT2Config *a = &ck->config, *b = &run->config;
    if (memcmp(a, b, sizeof(*a)) != 0) {
        die("%s: a checkpoint of another model config (L=%d NH=%d C=%d maxT=%d V=%d) than this run's "
            "(L=%d NH=%d C=%d maxT=%d V=%d)", path, a->num_layers, a->num_heads, a->channels, a->max_seq_len,
            a->vocab_size, b->num_layers, b->num_heads, b->channels, b->max_seq_len, b->vocab_size);
    }
    check_same_int(path, "-b", (uint64_t)ck->B, (uint64_t)run->B);
    check_same_int(path, "-t", (uint64_t)ck->T, (uint64_t)run->T);
    check_same_int(path, "-d (accumulation steps)", (uint64_t)ck->grad_accum_steps, (uint64_t)run->grad_accum_steps);
    check_same_int(path, "--seed", ck->seed, run->seed);
    check_same_int(path, "--shuffle", (uint64_t)ck->shuffle, (uint64_t)run->shuffle);
    check_same_float(path, "-l", ck->learning_rate, run->learning_rate);
    check_same_float(path, "-q", ck->final_fraction, run->final_fraction);
    check_same_float(path, "-c", ck->weight_decay, run->weight_decay);
    check_same_float(path, "--grad-clip", ck->grad_clip, run->grad_clip);
    check_same_int(path, "-k", (uint64_t)ck->schedule, (uint64_t)run->schedule);
    check_same_int(path, "-u", (uint64_t)ck->warmup_steps, (uint64_t)run->warmup_steps);
}

// Loads the newest complete checkpoint of dir into model and *state; an
// unreadable or corrupt one is reported and the one before it tried. Returns 1
// if one was loaded, 0 if dir holds none.
static int resume_from(const char *dir, GPT2 *model, TrainState *state) {
    enum { MAX_CHECKPOINTS = 100000 };
    static int steps[MAX_CHECKPOINTS];
    int n = list_checkpoint_steps(dir, steps, MAX_CHECKPOINTS);
    for (int i = 0; i < n; i++) {
        char model_path[PATH_MAX], state_path[PATH_MAX], err[PATH_MAX + 256];
        checkpoint_paths(dir, steps[i], model_path, state_path);
        TrainState ck;
        int header[256];
        if (read_state_header(state_path, &ck, header, err, sizeof(err)) != 0) {
            fprintf(stderr, "warning: %s; trying the checkpoint before it\n", err);
            continue;
        }
        check_resume_matches(state_path, &ck, state);  // another run's checkpoint: refuse
        if (ck.step != steps[i]) {
            fprintf(stderr, "warning: %s: holds step %d (corrupt); trying the checkpoint before it\n",
                    state_path, ck.step);
            continue;
        }
        if (gpt2_try_load_params(model, model_path, err, sizeof(err)) != 0 ||
            read_state_tensors(model, state_path, header, err, sizeof(err)) != 0) {
            fprintf(stderr, "warning: %s; trying the checkpoint before it\n", err);
            continue;
        }
        ck.max_steps = state->max_steps;  // -x may change between runs
        *state = ck;
        printf("resuming from %s (step %d)\n", model_path, ck.step);
        return 1;
    }
    if (n > 0) { die("%s: none of its %d checkpoints is intact", dir, n); }
    return 0;
}

// The time of one step by kernel and pass, and how it adds up.
static void print_profile(const Profile *p, double step_ms) {
    printf("  %-22s %10s %10s %10s %7s\n", "kernel", "fwd ms", "bwd ms", "total ms", "share");
    double sum = 0.0;
    for (int k = 0; k < PROF_KINDS; k++) { sum += p->seconds[k][FWD] + p->seconds[k][BWD]; }
    for (int k = 0; k < PROF_KINDS; k++) {
        double f = p->seconds[k][FWD] * 1e3, b = p->seconds[k][BWD] * 1e3;
        printf("  %-22s %10.2f %10.2f %10.2f %6.1f%%\n", PROFILE_NAMES[k], f, b, f + b,
               100.0 * (f + b) / (sum * 1e3));
    }
    printf("  %-22s %32.2f  (the step: %.2f ms)\n", "sum", sum * 1e3, step_ms);
}

// ----------------------------------------------------------------------------
// the run: its set-up, one function a part

// Everything a training run holds from its set-up to its end.
typedef struct {
    TrainArgs args;
    Faults faults;
    GPT2Config config;
    int from_scratch;                 // -e named a depth: a new model
    DataLoader train_loader, val_loader;
    Tokenizer tokenizer;              // for samples (rank 0 with -s > 0)
    int eot;                          // its end-of-text token, the first of every sample
    HellaSwag hellaswag;              // with --eval-every > 0
    int64_t tokens_per_micro;         // B*T
    int64_t accum;                    // micro-batches per step over all ranks (up to -d's 2^40)
    int64_t rank_accum;               // of them, this rank's: accum / ranks
    int max_steps;
    RunLog log;                       // DIR/main.log on rank 0 with -o
    char log_path[PATH_MAX];
    GPT2 model;
    ZeroOptimizer opt;
    TrainState state;                 // what a checkpoint records besides the tensors
    int resumed;                      // the model and state came from a checkpoint in -o
    Schedule schedule;
    int *rank_inputs, *rank_targets;  // (B, T) this rank's micro-batch under MPI
    int *gen_tokens;                  // (-g + 1) a sample's tokens
    float *sample_scratch;            // (V) the sampler's
    int *eval_tokens;                 // (2, B, T) HellaSwag's rows and targets
    GPT2Cache sample_cache;
} Run;

// The model's config: a new model of -e's depth, or the one in -e's checkpoint file.
static void read_model_config(Run *run) {
    const TrainArgs *a = &run->args;
    run->from_scratch = gpt2_config_from_arg(a->model, &run->config);
    if (a->T > run->config.max_seq_len) {
        die("-t %d: longer than the model's maximum sequence length %d (%s)", a->T, run->config.max_seq_len,
            a->model);
    }
}

// The tokenizer that prints the samples, and its end-of-text token.
static void load_sample_tokenizer(Run *run) {
    char path[PATH_MAX];
    if (run->args.tokenizer_path != NULL) { snprintf(path, sizeof(path), "%s", run->args.tokenizer_path); }
    else { default_tokenizer_path(run->args.train_pattern, path, sizeof(path)); }
    if (access(path, R_OK) != 0) {
        die("%s: tokenizer not found (needed to print samples; give --tokenizer FILE, or -s 0)", path);
    }
    tokenizer_init(&run->tokenizer, path);
    run->eot = (int)run->tokenizer.eot_token;
    gpt2_check_eot(&run->config, run->eot, path);
}

// The data, the tokenizer and the HellaSwag file, opened and checked before the big allocation.
static void open_inputs(Run *run) {
    TrainArgs *a = &run->args;
    dataloader_init(&run->train_loader, a->train_pattern, "-i", a->B, a->T, run->config.vocab_size,
                    a->shuffle, a->seed);
    if (a->val_every > 0) {
        dataloader_init(&run->val_loader, a->val_pattern, "-j", a->B, a->T, run->config.vocab_size, 0, 0);
        if ((size_t)a->val_batches > run->val_loader.batches_per_epoch) {
            a->val_batches = (int)run->val_loader.batches_per_epoch;
        }
    }
    if (a->sample_every > 0 && zero.rank == 0) { load_sample_tokenizer(run); }  // only rank 0 samples
    if (a->eval_every > 0) {  // rows of an example go B at a time, each must fit in T
        hellaswag_load(&run->hellaswag, a->eval_file);
        hellaswag_check_fits(&run->hellaswag, a->eval_file, &run->config, a->T);
    }
}

// Micro-batches per step, and the steps: -x, or one epoch's.
static void plan_steps(Run *run) {
    const TrainArgs *a = &run->args;
    run->tokens_per_micro = (int64_t)a->B * a->T;
    run->accum = a->total_batch > 0 ? a->total_batch / run->tokens_per_micro : zero.size;
    run->rank_accum = run->accum / zero.size;
    run->max_steps = a->max_steps;
    if (run->max_steps < 0) {
        uint64_t epoch_steps = run->train_loader.batches_per_epoch / (uint64_t)run->accum;
        if (epoch_steps > INT_MAX - 1) {  // -x's range: the step is an int in checkpoints and their names
            die("-x -1: one epoch of %s is %llu steps, more than the %d a run can count; give -x", a->train_pattern,
                (unsigned long long)epoch_steps, INT_MAX - 1);
        }
        run->max_steps = epoch_steps < 1 ? 1 : (int)epoch_steps;
    }
}

// -o DIR on rank 0: created, locked against a second run, cleared of a crashed run's temporary files.
static void open_output_dir(Run *run) {
    const char *dir = run->args.output_dir;
    if (dir == NULL || zero.rank != 0) { return; }
    make_dirs_or_die(dir, "-o");
    runctl_lock_dir(dir);  // one run per directory, before anything in it is read or written
    runctl_remove_stale_tmp(dir);
    snprintf(run->log_path, sizeof(run->log_path), "%s/main.log", dir);
}

// The model's arena (and this rank's AdamW shard), and the run's state; every rank must
// run the same job.
static void create_model(Run *run) {
    const TrainArgs *a = &run->args;
    size_t adamw_floats = zero_optimizer_init(&run->opt, &run->config, a->zero_stage);
    gpt2_create_ex(&run->model, &run->config, a->B, a->T, a->model, 1, a->zero_stage ? adamw_floats : 0,
                   a->recompute);
    if (zero.size > 1) {
        char b1[32], b2[32];
        printf("ranks: %d, ZeRO stage %d: AdamW m+v %s per rank (%zu bytes), the model arena %s per rank\n",
               zero.size, a->zero_stage, human_bytes(adamw_floats * 8.0, b1), adamw_floats * 8,
               human_bytes(run->model.arena_bytes, b2));
    }
    run->state = initial_state(a, &run->config, run->accum, run->max_steps);
    const long job[] = {a->zero_stage, a->val_every, a->val_batches, a->checkpoint_every, a->resume,
                        (long)run->train_loader.batches_per_epoch, run->train_loader.num_shards, run->opt.overlap};
    zero_check_same(&run->state, sizeof(run->state), "the model, batch or optimizer settings");
    zero_check_same(job, sizeof(job), "-z, -v, -m, -n, -y, LLMC_OVERLAP or the training data");
}

// Rank 0 resumes the model from -o's newest checkpoint, or initializes or loads it, and
// hands it to the other ranks; the data continues where the state says.
static void load_model(Run *run) {
    const TrainArgs *a = &run->args;
    GPT2 whole_view;  // under -z 1, rank 0 resumes m and v whole into this view, then scatters them
    float *whole_buffer = NULL;
    GPT2 *whole = a->resume ? zero_whole_state_view(&run->opt, &run->model, &whole_view, &whole_buffer) : &run->model;
    if (zero.rank == 0) {
        run->resumed = a->resume && resume_from(a->output_dir, whole, &run->state);
        if (!run->resumed) {
            if (run->from_scratch) { gpt2_init_params(&run->model, a->seed); }
            else { gpt2_load_params(&run->model, a->model); }
        }
    }
    zero_distribute_model(&run->opt, &run->model, whole, whole_buffer, &run->state, &run->resumed);
    dataloader_seek(&run->train_loader, run->state.data);
}

// The run's shape: threads, ranks, batch, accumulation, steps and data.
static void print_plan(const Run *run) {
    const TrainArgs *a = &run->args;
    char ranks[32] = "";
    if (zero.size > 1) { snprintf(ranks, sizeof(ranks), "%d ranks x ", zero.size); }
    printf("threads: %d | %sB=%d T=%d, %lld accumulation step%s = %lld tokens per step | %d steps | "
           "train: %d shards, %zu batches per epoch\n", omp_get_max_threads(), ranks, a->B, a->T,
           (long long)run->rank_accum, run->rank_accum > 1 ? "s" : "",
           (long long)(run->accum * run->tokens_per_micro), run->max_steps,
           run->train_loader.num_shards, run->train_loader.batches_per_epoch);
}

// --dry-run 1: after the flags, the model's config and the data are checked, the sizes of the
// model and of its arena, exactly, and the run's plan; the model is not allocated.
static void print_dry_run(Run *run) {
    const TrainArgs *a = &run->args;
    size_t adamw_floats = zero_optimizer_init(&run->opt, &run->config, a->zero_stage);
    GPT2Sizes sz;
    gpt2_sizes(&sz, &run->config, a->B, a->T, a->model, 1, a->zero_stage ? adamw_floats : 0, a->recompute);
    gpt2_print_sizes(&sz, &run->config, a->B, a->T, a->recompute);
    printf("sizes: %zu parameter floats with alignment gaps, %zu activation floats, AdamW m and v %zu floats "
           "each, arena %zu bytes\n", sz.params_floats, sz.acts_floats, sz.mv_floats, sz.arena_bytes);
    print_plan(run);
    printf("dry run: nothing allocated, nothing written\n");
    zero_optimizer_free(&run->opt);
}

// The log, the schedule and the buffers of the loop; prints the run's shape and precision.
static void start_run(Run *run) {
    const TrainArgs *a = &run->args;
    if (a->output_dir != NULL && zero.rank == 0) { runlog_open(&run->log, run->log_path); }
    run->schedule = (Schedule){(ScheduleKind)a->schedule, a->learning_rate, a->warmup_steps, run->max_steps,
                               a->final_fraction};
    print_plan(run);
    printf("precision: %s\n", matmul_precision_path());

    const size_t micro = (size_t)run->tokens_per_micro;
    run->rank_inputs = malloc_or_die(micro * sizeof(int), "micro-batch");
    run->rank_targets = malloc_or_die(micro * sizeof(int), "micro-batch");
    run->gen_tokens = malloc_or_die(((size_t)a->gen_tokens + 1) * sizeof(int), "sample tokens");
    run->sample_scratch = malloc_or_die((size_t)run->config.vocab_size * sizeof(float), "sampler");
    run->eval_tokens = a->eval_every > 0 ? malloc_or_die(2 * micro * sizeof(int), "eval") : NULL;
    if (a->sample_every > 0 && zero.rank == 0) { gpt2_cache_create(&run->sample_cache, &run->model, a->T); }
}

// ----------------------------------------------------------------------------
// the run: the parts of a step boundary, and the step

// Whether an "every N steps" event falls on this step boundary (always at the last;
// at step 0 only if at_start).
static int due(int every, int step, int last_step, int at_start) {
    return every > 0 && ((step % every == 0 && (step > 0 || at_start)) || last_step);
}

static void log_validation_loss(Run *run, int step) {
    float val_loss = validation_loss(&run->model, &run->val_loader, run->args.val_batches);
    printf("step %d: val loss %.6f\n", step, val_loss);
    runlog_printf(&run->log, "s:%d tel:%.6f\n", step, val_loss);
}

static void log_hellaswag(Run *run, int step) {
    // llm.c's "eval" is acc_norm: the ending with the lowest mean loss per token
    HellaSwagResult r = hellaswag_evaluate(&run->model, &run->hellaswag, -1, run->eval_tokens,
                                           run->eval_tokens + run->tokens_per_micro, NULL);
    float acc_norm = (float)r.correct_norm / r.num_examples;
    printf("step %d: hellaswag acc_norm %.4f, acc %.4f (%d examples)\n", step, acc_norm,
           (double)r.correct / r.num_examples, r.num_examples);
    runlog_printf(&run->log, "s:%d eval:%.4f\n", step, acc_norm);
}

// The validation loss, HellaSwag and a sample, each when due at this step boundary.
static void evaluate(Run *run, int step, int last_step) {
    const TrainArgs *a = &run->args;
    const int val = due(a->val_every, step, last_step, 1), hellaswag = due(a->eval_every, step, last_step, 0);
    const int sample = zero.rank == 0 && due(a->sample_every, step, last_step, 0);
    if (val || hellaswag || sample) { gpt2_update_finish(&run->model); }  // the last step's, if it was left to the next
    if (val) { log_validation_loss(run, step); }
    if (hellaswag) { log_hellaswag(run, step); }
    if (sample) {
        generate_sample(&run->model, &run->sample_cache, &run->tokenizer, run->gen_tokens, a->gen_tokens,
                        run->eot, a->temperature, a->top_k, &run->state.sample_rng, run->sample_scratch);
    }
}

// A stop signal (during the step before, or this boundary's evaluations) is honoured at the
// step boundary; all ranks take the same decision: any rank's signal stops them all.
// Returns the signal, or 0.
static int stop_signal_on_any_rank(int last_step) {
    double signal_seen = last_step ? 0 : runctl_stop_requested();
    zero_allreduce_f64(&signal_seen, 1, ZERO_MAX);
    return (int)signal_seen;
}

// The checkpoint of step `step` in -o (model_S.bin, state_S.bin), and --keep's pruning.
static void write_checkpoint(Run *run, int step) {
    char model_path[PATH_MAX], state_path[PATH_MAX];
    checkpoint_paths(run->args.output_dir, step, model_path, state_path);
    run->state.step = step;
    run->state.data = run->train_loader.pos;
    gpt2_update_finish(&run->model);
    size_t kill_after = step == run->faults.kill_checkpoint_step ? run->model.num_parameters * 2 : 0;
    if (zero.rank == 0) { write_model_checkpoint(&run->model, model_path, kill_after); }
    zero_write_state_checkpoint(&run->opt, &run->model, &run->state, state_path);  // rank 0 writes
    if (run->args.keep > 0 && zero.rank == 0) { prune_checkpoints(run->args.output_dir, run->args.keep); }
    printf("step %d: checkpoint %s\n", step, model_path);
}

// The gradients of this rank's micro-batches of a step, summed into the model's; returns the
// global mean loss (on every rank).
static double accumulate_gradients(Run *run) {
    const TrainArgs *a = &run->args;
    DataLoader *loader = &run->train_loader;
    gpt2_zero_grad(&run->model);
    double loss = 0.0;
    const int *inputs = zero.size > 1 ? run->rank_inputs : loader->inputs;
    const int *targets = zero.size > 1 ? run->rank_targets : loader->targets;
    for (int64_t micro = 0; micro < run->rank_accum; micro++) {
        if (next_rank_batch(loader, run->rank_inputs, run->rank_targets)) {
            printf("epoch %d begins%s\n", loader->pos.epoch + 1, a->shuffle ? " (shards and batches reshuffled)" : "");
        }
        profile_lap(&run->model.profile, PROF_DATA, FWD);
        if (micro == run->rank_accum - 1) { zero_overlap_arm(&run->opt, &run->model); }  // its backward starts the sums
        loss += gpt2_forward_backward(&run->model, inputs, targets, a->B, a->T, 1.0f / (float)run->accum);
    }
    zero_allreduce_f64(&loss, 1, ZERO_SUM);
    return loss / (double)run->accum;
}

// AdamW with the clipped gradients; or, when the loss or the norm is not finite, no update,
// and the end of the run after --max-skips such steps in a row.
static void update_or_skip(Run *run, int step, double loss, float norm, float lr) {
    const TrainArgs *a = &run->args;
    if (!isfinite(loss) || !isfinite(norm)) {
        run->state.consecutive_skips++;
        if (zero.rank == 0) {
            fprintf(stderr, "warning: step %d: non-finite loss (%g) or gradient norm (%g); update skipped (%d in a row)\n",
                    step + 1, loss, norm, run->state.consecutive_skips);
        }
        if (run->state.consecutive_skips >= a->max_skips) {
            die("%d steps in a row had a non-finite loss or gradient norm; stopping at step %d "
                "(checkpoints in %s are intact)", run->state.consecutive_skips, step + 1,
                a->output_dir != NULL ? a->output_dir : "no -o dir");
        }
        return;
    }
    run->state.consecutive_skips = 0;
    float grad_scale = a->grad_clip > 0.0f && norm > a->grad_clip ? a->grad_clip / norm : 1.0f;
    zero_update(&run->opt, &run->model, lr, ADAMW_BETA1, ADAMW_BETA2, ADAMW_EPS, a->weight_decay, grad_scale, step + 1);
    profile_lap(&run->model.profile, PROF_ADAMW, FWD);
}

// The step's line on stdout (with --profile, its kernels) and in the log.
static void report_step(Run *run, int step, double loss, float norm, float lr, double ms, double comm_ms,
                        double wait_ms) {
    double tok_per_s = (double)run->accum * run->tokens_per_micro / (ms / 1e3);
    printf("step %4d/%d | loss %.6f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s", step + 1, run->max_steps,
           loss, norm, lr, ms, tok_per_s);
    if (zero.size > 1) {  // time in collectives, of which waiting for the slowest rank
        printf(" | comm %.1f ms (wait %.1f)", comm_ms, wait_ms);
    }
    printf("\n");
    if (run->args.profile) { print_profile(&run->model.profile, ms); }
    runlog_printf(&run->log, "s:%d trl:%.6f lr:%.6e norm:%.4f ms:%.2f tok/s:%.0f\n", step, loss, lr, norm, ms,
                  tok_per_s);
}

// Optimizer step `step` (from 0) over `accum` micro-batches.
static void train_step(Run *run, int step) {
    double t0 = now_seconds(), comm0 = zero.comm_seconds, wait0 = zero.wait_seconds;
    profile_start(&run->model.profile);
    double loss = accumulate_gradients(run);
    if (step == run->faults.nan_loss_step) { loss = NAN; }
    zero_sync_gradients(&run->opt, &run->model);
    float norm = zero_grad_norm(&run->opt, &run->model);
    profile_lap(&run->model.profile, PROF_GRAD_NORM, FWD);
    float lr = schedule_lr(&run->schedule, step);
    update_or_skip(run, step, loss, norm, lr);
    double ms = (now_seconds() - t0) * 1e3;
    report_step(run, step, loss, norm, lr, ms, (zero.comm_seconds - comm0) * 1e3, (zero.wait_seconds - wait0) * 1e3);
}

// The steps from the state's to -x. At each step boundary, the evaluations due, a checkpoint
// when due (or when a signal stops the run, with -o), then the next step. The boundary a run
// resumes at had its evaluations and checkpoint before the checkpoint was made.
static void train(Run *run) {
    const TrainArgs *a = &run->args;
    const int first_step = run->state.step;
    for (int step = first_step; step <= run->max_steps; step++) {
        const int last_step = step == run->max_steps;
        const int just_resumed = run->resumed && step == first_step;
        if (!just_resumed) { evaluate(run, step, last_step); }
        const int stop_signal = stop_signal_on_any_rank(last_step);
        if (!just_resumed && (due(a->checkpoint_every, step, last_step, 0) || (stop_signal && a->output_dir != NULL))) {
            write_checkpoint(run, step);
        }
        if (stop_signal) {
            printf("step %d: stopped by %s\n", step, runctl_signal_name(stop_signal));
            runlog_printf(&run->log, "s:%d stop:%s\n", step, runctl_signal_name(stop_signal));
            break;
        }
        if (last_step) { break; }
        if (step == first_step + 1) { perf_enable_events(); }
        train_step(run, step);
    }
    gpt2_update_finish(&run->model);
}

// The log closed, the peak memory printed, everything freed.
static void finish_run(Run *run) {
    const TrainArgs *a = &run->args;
    runlog_close(&run->log);
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    printf("peak RSS: %.1f MiB\n", usage.ru_maxrss / 1024.0);
    free(run->rank_inputs);
    free(run->rank_targets);
    free(run->gen_tokens);
    free(run->sample_scratch);
    gpt2_cache_free(&run->sample_cache);
    if (a->sample_every > 0 && zero.rank == 0) { tokenizer_free(&run->tokenizer); }
    dataloader_free(&run->train_loader);
    if (a->val_every > 0) { dataloader_free(&run->val_loader); }
    if (a->eval_every > 0) { hellaswag_free(&run->hellaswag); free(run->eval_tokens); }
    gpt2_free(&run->model);
    zero_optimizer_free(&run->opt);
}

// ----------------------------------------------------------------------------

int main(int argc, char **argv) {
    zero_init(&argc, &argv);
    static Run run = {.log = {.fd = -1}};
    parse_args(&run.args, argc, argv);
    runctl_install_signal_handlers();  // from here on, SIGINT/SIGTERM stop at the first step boundary
    setvbuf(stdout, NULL, _IOLBF, 0);
    run.faults = read_faults();

    read_model_config(&run);
    open_inputs(&run);      // checked before the big allocation
    plan_steps(&run);
    matmul_set_precision((Precision)run.args.precision);  // before the sizes: the classifier's chunk depends on it
    if (run.args.dry_run) {
        print_dry_run(&run);
    } else {
        open_output_dir(&run);
        create_model(&run);
        load_model(&run);
        start_run(&run);
        train(&run);
        finish_run(&run);
    }
    zero_finalize();
    return 0;
}
