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
DIR/lock keeps a second run out of DIR (llmc/runctl.h).
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
    int precision;                // --precision: PRECISION_FP32 or PRECISION_BF16 (llmc/matmul.h)
    int recompute;                // --recompute
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
        "  --eval-file FILE  its eval file (scripts/prepare_hellaswag.py)\n"
        "  -n N        checkpoint every N steps and at the end (needs -o), 0 = never   default 0\n"
        "  --keep K    keep the newest K checkpoints, 0 = all   default 0\n"
        "  -y 0|1      resume from the newest complete checkpoint in -o   default 0\n"
        "  --profile 0|1   print where the time of each step goes, kernel by kernel   default 0\n"
        "  --precision fp32|bf16   matmul operands in fp32, or rounded to bf16 (fp32 sums)   default fp32\n"
        "  --recompute 0|1  keep only each block's input, re-run the block's forward before its backward:\n"
        "                   less activation memory for 2/3 of another forward of the blocks   default 0\n"
        "  -h          this help\n"
        "Threads: OMP_NUM_THREADS (default: all cores). Data-parallel: mpirun -np N ./train_gpt2 ...\n");
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
        else { usage_error(flag, "unknown flag"); }
    }
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

// ----------------------------------------------------------------------------
// testing hooks: LLMC_FAULT="nan-loss:S" makes step S's loss NaN;
// "kill-in-checkpoint:S" sends SIGKILL to ourselves halfway through writing
// checkpoint S's model file; "term-in-checkpoint:S" sends two SIGTERMs there instead.
// Used by scripts/test_resume.sh and scripts/test_signals.sh only.

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

static void make_dir(const char *dir) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path)) { die("-o %s: path too long", dir); }
    for (char *p = path + 1; ; p++) {  // mkdir -p
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(path, 0755) != 0 && errno != EEXIST) { die("-o %s: cannot create %s: %s", dir, path, strerror(errno)); }
            *p = saved;
            if (saved == '\0') { break; }
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) { die("-o %s: not a directory", dir); }
}

// The mean loss over the first n batches of the validation shards. With N ranks,
// rank r evaluates batches r, r+N, r+2N, ... and the sums are added.
static float validation_loss(GPT2 *model, DataLoader *val, int n) {
    dataloader_reset(val);
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        dataloader_next_batch(val);
        if (i % zero.size != zero.rank) { continue; }
        sum += gpt2_forward(model, val->inputs, val->targets, val->B, val->T);
    }
    zero_allreduce_f64(&sum, 1, ZERO_SUM);
    return (float)(sum / n);
}

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
    const int V = model->config.vocab_size;
    tokens[0] = eot;
    gpt2_cache_reset(cache);
    if (precision_is_bf16()) { gpt2_cache_use_bf16(cache, model); }  // of the weights as they are now
    printf("generating:\n---\n");
    for (int i = 1; i <= n; i++) {
        const float *logits = gpt2_cache_logits(model, cache, tokens, i);
        int next = sample_token(logits, V, temperature, top_k, random_f32(rng), scratch);
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
static TrainState initial_state(const TrainArgs *a, const GPT2Config *config, int accum, int max_steps) {
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

// A checkpoint may only continue the run it came from: same model, batch and
// hyperparameters (only -x may grow, to train longer).
static void check_resume_matches(const char *path, const TrainState *ck, const TrainState *run) {
    const GPT2Config *a = &ck->config, *b = &run->config;
    if (memcmp(a, b, sizeof(*a)) != 0) {
        die("%s: a checkpoint of another model config (L=%d NH=%d C=%d maxT=%d V=%d) than this run's "
            "(L=%d NH=%d C=%d maxT=%d V=%d)", path, a->num_layers, a->num_heads, a->channels, a->max_seq_len,
            a->vocab_size, b->num_layers, b->num_heads, b->channels, b->max_seq_len, b->vocab_size);
    }
    struct { const char *flag; double ck, run; } fields[] = {
        {"-b", ck->B, run->B}, {"-t", ck->T, run->T},
        {"-d (accumulation steps)", ck->grad_accum_steps, run->grad_accum_steps},
        {"--seed", (double)ck->seed, (double)run->seed}, {"--shuffle", ck->shuffle, run->shuffle},
        {"-l", ck->learning_rate, run->learning_rate}, {"-q", ck->final_fraction, run->final_fraction},
        {"-c", ck->weight_decay, run->weight_decay}, {"--grad-clip", ck->grad_clip, run->grad_clip},
        {"-k", ck->schedule, run->schedule}, {"-u", ck->warmup_steps, run->warmup_steps}};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (fields[i].ck != fields[i].run) {
            die("%s: the run was made with %s %g, this command has %g; resume with the same settings",
                path, fields[i].flag, fields[i].ck, fields[i].run);
        }
    }
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

int main(int argc, char **argv) {
    zero_init(&argc, &argv);
    TrainArgs args;
    parse_args(&args, argc, argv);
    runctl_install_signal_handlers();  // from here on, SIGINT/SIGTERM stop at the first step boundary
    setvbuf(stdout, NULL, _IOLBF, 0);
    const Faults faults = read_faults();

    // the model: a checkpoint, or a new one of a given depth
    GPT2Config config;
    int from_scratch = gpt2_config_from_depth(args.model, &config);
    if (!from_scratch) { gpt2_read_config(args.model, &config); }
    if (args.T > config.max_seq_len) {
        die("-t %d: longer than the model's maximum sequence length %d (%s)", args.T, config.max_seq_len,
            args.model);
    }

    // data, tokenizer and output directory, checked before the big allocation
    DataLoader train_loader, val_loader;
    dataloader_init(&train_loader, args.train_pattern, "-i", args.B, args.T, config.vocab_size,
                    args.shuffle, args.seed);
    if (args.val_every > 0) {
        dataloader_init(&val_loader, args.val_pattern, "-j", args.B, args.T, config.vocab_size, 0, 0);
        if ((size_t)args.val_batches > val_loader.batches_per_epoch) {
            args.val_batches = (int)val_loader.batches_per_epoch;
        }
    }
    Tokenizer tokenizer = {0};
    int eot = 0;
    if (args.sample_every > 0 && zero.rank == 0) {  // only rank 0 samples
        char path[PATH_MAX];
        if (args.tokenizer_path != NULL) { snprintf(path, sizeof(path), "%s", args.tokenizer_path); }
        else { default_tokenizer_path(args.train_pattern, path, sizeof(path)); }
        if (access(path, R_OK) != 0) {
            die("%s: tokenizer not found (needed to print samples; give --tokenizer FILE, or -s 0)", path);
        }
        tokenizer_init(&tokenizer, path);
        eot = (int)tokenizer.eot_token;
        if (eot >= config.vocab_size) {
            die("%s: end-of-text token %d is outside the model's vocabulary of %d", path, eot, config.vocab_size);
        }
    }
    HellaSwag hellaswag;
    if (args.eval_every > 0) {  // rows of an example go args.B at a time, each must fit in T
        hellaswag_load(&hellaswag, args.eval_file);
        hellaswag_check_fits(&hellaswag, args.eval_file, &config, args.T);
    }
    const int tokens_per_micro = args.B * args.T;
    // accum: micro-batches per step over all ranks; each rank does accum / ranks of them
    const int accum = args.total_batch > 0 ? (int)(args.total_batch / tokens_per_micro) : zero.size;
    const int rank_accum = accum / zero.size;
    int max_steps = args.max_steps;
    if (max_steps < 0) {
        max_steps = (int)(train_loader.batches_per_epoch / (size_t)accum);
        if (max_steps < 1) { max_steps = 1; }
    }
    RunLog log = {.fd = -1};
    char log_path[PATH_MAX];
    if (args.output_dir != NULL && zero.rank == 0) {
        make_dir(args.output_dir);
        runctl_lock_dir(args.output_dir);  // one run per directory, before anything in it is read or written
        runctl_remove_stale_tmp(args.output_dir);
        snprintf(log_path, sizeof(log_path), "%s/main.log", args.output_dir);
    }

    // rank 0 initializes, loads or resumes the model, and hands it to the others
    GPT2 model;
    ZeroOptimizer opt;
    size_t adamw_floats = zero_optimizer_init(&opt, &config, args.zero_stage);
    gpt2_create_ex(&model, &config, args.B, args.T, args.model, 1, args.zero_stage ? adamw_floats : 0, args.recompute);
    if (zero.size > 1) {
        char b1[32], b2[32];
        printf("ranks: %d, ZeRO stage %d: AdamW m+v %s per rank (%zu bytes), the model arena %s per rank\n",
               zero.size, args.zero_stage, human_bytes(adamw_floats * 8.0, b1), adamw_floats * 8,
               human_bytes(model.arena_bytes, b2));
    }
    TrainState state = initial_state(&args, &config, accum, max_steps);
    const long job[] = {args.zero_stage, args.val_every, args.val_batches, args.checkpoint_every, args.resume,
                        (long)train_loader.batches_per_epoch, train_loader.num_shards, opt.overlap};
    zero_check_same(&state, sizeof(state), "the model, batch or optimizer settings");
    zero_check_same(job, sizeof(job), "-z, -v, -m, -n, -y, LLMC_OVERLAP or the training data");
    GPT2 whole_view;  // under -z 1, rank 0 resumes m and v whole into this view, then scatters them
    float *whole_buffer = NULL;
    GPT2 *whole = args.resume ? zero_whole_state_view(&opt, &model, &whole_view, &whole_buffer) : &model;
    int resumed = 0;
    if (zero.rank == 0) {
        resumed = args.resume && resume_from(args.output_dir, whole, &state);
        if (!resumed) {
            if (from_scratch) { gpt2_init_params(&model, args.seed); }
            else { gpt2_load_params(&model, args.model); }
        }
    }
    zero_distribute_model(&opt, &model, whole, whole_buffer, &state, &resumed);
    dataloader_seek(&train_loader, state.data);
    if (args.output_dir != NULL && zero.rank == 0) { runlog_open(&log, log_path); }
    Schedule schedule = {(ScheduleKind)args.schedule, args.learning_rate, args.warmup_steps, max_steps,
                         args.final_fraction};
    char ranks[32] = "";
    if (zero.size > 1) { snprintf(ranks, sizeof(ranks), "%d ranks x ", zero.size); }
    printf("threads: %d | %sB=%d T=%d, %d accumulation step%s = %d tokens per step | %d steps | "
           "train: %d shards, %zu batches per epoch\n", omp_get_max_threads(), ranks, args.B, args.T, rank_accum,
           rank_accum > 1 ? "s" : "", accum * tokens_per_micro, max_steps, train_loader.num_shards,
           train_loader.batches_per_epoch);
    matmul_set_precision((Precision)args.precision);
    printf("precision: %s\n", matmul_precision_path());

    int *rank_inputs = malloc_or_die((size_t)tokens_per_micro * sizeof(int), "micro-batch");
    int *rank_targets = malloc_or_die((size_t)tokens_per_micro * sizeof(int), "micro-batch");
    int *gen_tokens = malloc_or_die(((size_t)args.gen_tokens + 1) * sizeof(int), "sample tokens");
    float *sample_scratch = malloc_or_die((size_t)config.vocab_size * sizeof(float), "sampler");
    int *eval_tokens = args.eval_every > 0 ? malloc_or_die(2 * (size_t)tokens_per_micro * sizeof(int), "eval") : NULL;
    GPT2Cache sample_cache = {0};
    if (args.sample_every > 0 && zero.rank == 0) { gpt2_cache_create(&sample_cache, &model, args.T); }

    const int first_step = state.step;
    for (int step = first_step; step <= max_steps; step++) {
        const int last_step = step == max_steps;
        // at the step a checkpoint was made, its validation and sample were done before it
        const int just_resumed = resumed && step == state.step;
        if (!just_resumed && args.val_every > 0 && (step % args.val_every == 0 || last_step)) {
            float val_loss = validation_loss(&model, &val_loader, args.val_batches);
            printf("step %d: val loss %.6f\n", step, val_loss);
            runlog_printf(&log, "s:%d tel:%.6f\n", step, val_loss);
        }
        if (!just_resumed && args.eval_every > 0 && ((step > 0 && step % args.eval_every == 0) || last_step)) {
            // llm.c's "eval" is acc_norm: the ending with the lowest mean loss per token
            HellaSwagResult r = hellaswag_evaluate(&model, &hellaswag, -1, eval_tokens,
                                                   eval_tokens + tokens_per_micro, NULL);
            float acc_norm = (float)r.correct_norm / r.num_examples;
            printf("step %d: hellaswag acc_norm %.4f, acc %.4f (%d examples)\n", step, acc_norm,
                   (double)r.correct / r.num_examples, r.num_examples);
            runlog_printf(&log, "s:%d eval:%.4f\n", step, acc_norm);
        }
        if (!just_resumed && args.sample_every > 0 && zero.rank == 0 && ((step > 0 && step % args.sample_every == 0) || last_step)) {
            generate_sample(&model, &sample_cache, &tokenizer, gen_tokens, args.gen_tokens, eot, args.temperature,
                            args.top_k, &state.sample_rng, sample_scratch);
        }
        // a stop signal (during the step before, or this step's validation or sample) is
        // honoured here, at the step boundary: a checkpoint when there is -o, then the end
        // (all ranks take the same decision: any rank's signal stops them all)
        double signal_seen = last_step ? 0 : runctl_stop_requested();
        zero_allreduce_f64(&signal_seen, 1, ZERO_MAX);
        const int stop_signal = (int)signal_seen;
        if (!just_resumed && ((args.checkpoint_every > 0 &&
            ((step > 0 && step % args.checkpoint_every == 0) || last_step)) || (stop_signal && args.output_dir != NULL))) {
            char model_path[PATH_MAX], state_path[PATH_MAX];
            checkpoint_paths(args.output_dir, step, model_path, state_path);
            state.step = step;
            state.data = train_loader.pos;
            size_t kill_after = step == faults.kill_checkpoint_step ? model.num_parameters * 2 : 0;
            if (zero.rank == 0) { write_model_checkpoint(&model, model_path, kill_after); }
            zero_write_state_checkpoint(&opt, &model, &state, state_path);  // rank 0 writes
            if (args.keep > 0 && zero.rank == 0) { prune_checkpoints(args.output_dir, args.keep); }
            printf("step %d: checkpoint %s\n", step, model_path);
        }
        if (stop_signal) {
            printf("step %d: stopped by %s\n", step, runctl_signal_name(stop_signal));
            runlog_printf(&log, "s:%d stop:%s\n", step, runctl_signal_name(stop_signal));
            break;
        }
        if (last_step) { break; }

        if (step == first_step + 1) { perf_enable_events(); }
        // one optimizer step over `accum` micro-batches
        double t0 = now_seconds(), comm0 = zero.comm_seconds, wait0 = zero.wait_seconds;
        profile_start(&model.profile);
        gpt2_zero_grad(&model);
        double loss = 0.0;
        const int *inputs = zero.size > 1 ? rank_inputs : train_loader.inputs;
        const int *targets = zero.size > 1 ? rank_targets : train_loader.targets;
        for (int micro = 0; micro < rank_accum; micro++) {
            if (next_rank_batch(&train_loader, rank_inputs, rank_targets)) {
                printf("epoch %d begins%s\n", train_loader.pos.epoch + 1,
                       args.shuffle ? " (shards and batches reshuffled)" : "");
            }
            profile_lap(&model.profile, PROF_DATA, FWD);
            if (micro == rank_accum - 1) { zero_overlap_arm(&opt, &model); }  // its backward starts the sums
            loss += gpt2_forward_backward(&model, inputs, targets, args.B, args.T, 1.0f / accum);
        }
        zero_allreduce_f64(&loss, 1, ZERO_SUM);  // the global mean loss on every rank
        loss /= accum;
        if (step == faults.nan_loss_step) { loss = NAN; }
        zero_sync_gradients(&opt, &model);
        float norm = zero_grad_norm(&opt, &model);
        profile_lap(&model.profile, PROF_GRAD_NORM, FWD);
        float lr = schedule_lr(&schedule, step);
        if (!isfinite(loss) || !isfinite(norm)) {
            state.consecutive_skips++;
            if (zero.rank == 0) {
                fprintf(stderr, "warning: step %d: non-finite loss (%g) or gradient norm (%g); update skipped (%d in a row)\n",
                        step + 1, loss, norm, state.consecutive_skips);
            }
            if (state.consecutive_skips >= args.max_skips) {
                die("%d steps in a row had a non-finite loss or gradient norm; stopping at step %d "
                    "(checkpoints in %s are intact)", state.consecutive_skips, step + 1,
                    args.output_dir != NULL ? args.output_dir : "no -o dir");
            }
        } else {
            state.consecutive_skips = 0;
            float grad_scale = args.grad_clip > 0.0f && norm > args.grad_clip ? args.grad_clip / norm : 1.0f;
            zero_update(&opt, &model, lr, 0.9f, 0.95f, 1e-8f, args.weight_decay, grad_scale, step + 1);
            profile_lap(&model.profile, PROF_ADAMW, FWD);
        }
        double ms = (now_seconds() - t0) * 1e3;
        double tok_per_s = (double)accum * tokens_per_micro / (ms / 1e3);
        printf("step %4d/%d | loss %.6f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s", step + 1, max_steps,
               loss, norm, lr, ms, tok_per_s);
        if (zero.size > 1) {  // time in collectives, of which waiting for the slowest rank
            printf(" | comm %.1f ms (wait %.1f)", (zero.comm_seconds - comm0) * 1e3, (zero.wait_seconds - wait0) * 1e3);
        }
        printf("\n");
        if (args.profile) { print_profile(&model.profile, ms); }
        runlog_printf(&log, "s:%d trl:%.6f lr:%.6e norm:%.4f ms:%.2f tok/s:%.0f\n", step, loss, lr, norm, ms,
                      tok_per_s);
    }

    runlog_close(&log);
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    printf("peak RSS: %.1f MiB\n", usage.ru_maxrss / 1024.0);
    free(rank_inputs);
    free(rank_targets);
    free(gen_tokens);
    free(sample_scratch);
    gpt2_cache_free(&sample_cache);
    if (args.sample_every > 0 && zero.rank == 0) { tokenizer_free(&tokenizer); }
    dataloader_free(&train_loader);
    if (args.val_every > 0) { dataloader_free(&val_loader); }
    if (args.eval_every > 0) { hellaswag_free(&hellaswag); free(eval_tokens); }
    gpt2_free(&model);
    zero_optimizer_free(&opt);
    zero_finalize();
    return 0;
}
