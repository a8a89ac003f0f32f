/*
Trains GPT-2 on the CPU. Flags follow llm.c's train_gpt2.cu; run with -h.

  ./train_gpt2 -e d6 -b 8 -t 128 -x 200 -v 50 -s 100 -o log_d6

Each step: load a batch, forward and backward, AdamW. Every -v steps the
validation loss, every -s steps a sample. With -o DIR, DIR/main.log gets one
line per step ("s:STEP trl:LOSS ...") and one per validation ("s:STEP tel:LOSS").
*/
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "llmc/dataloader.h"
#include "llmc/gpt2.h"
#include "llmc/sampler.h"
#include "llmc/tokenizer.h"
#include "llmc/utils.h"

// ----------------------------------------------------------------------------
// command line

typedef struct {
    const char *train_pattern;   // -i
    const char *val_pattern;     // -j
    const char *model;           // -e: a checkpoint file or d6|d12|d24|d36|d48
    const char *output_dir;      // -o, NULL for none
    const char *tokenizer_path;  // --tokenizer, NULL: gpt2_tokenizer.bin beside the train shards
    int B, T;                    // -b, -t
    float learning_rate;         // -l
    int max_steps;               // -x, -1: one epoch
    int val_every, val_batches;  // -v, -m
    int sample_every, gen_tokens;// -s, -g
    float temperature;           // --temperature
    int top_k;                   // --top-k
    uint64_t seed;               // --seed
} TrainArgs;

static void print_usage(FILE *out) {
    fprintf(out,
        "usage: ./train_gpt2 [options]\n"
        "  -i PATTERN  train token shards (glob)   default data/tinyshakespeare/tiny_shakespeare_train_*.bin\n"
        "  -j PATTERN  val token shards (glob)     default data/tinyshakespeare/tiny_shakespeare_val_*.bin\n"
        "  -e MODEL    llm.c checkpoint file, or d6|d12|d24|d36|d48 for a new model   default d12\n"
        "  -o DIR      output directory for main.log (created if missing)   default none\n"
        "  -b N        batch size B                default 4\n"
        "  -t N        sequence length T           default 64\n"
        "  -l LR       learning rate               default 3e-4\n"
        "  -x N        training steps, -1 = one epoch   default -1\n"
        "  -v N        validate every N steps, 0 = never   default 20\n"
        "  -m N        validation batches          default 20\n"
        "  -s N        sample every N steps, 0 = never   default 20\n"
        "  -g N        tokens to generate          default 64\n"
        "  --temperature F   sampling temperature, 0 = greedy   default 1.0\n"
        "  --top-k N   sample from the N most likely tokens, 0 = all   default 0\n"
        "  --seed N    seed of the initialization and the sampler   default 1337\n"
        "  --tokenizer FILE  llm.c tokenizer   default gpt2_tokenizer.bin beside the train shards\n"
        "  -h          this help\n"
        "Threads: OMP_NUM_THREADS (default: all cores).\n");
}

__attribute__((noreturn, format(printf, 2, 3)))
static void usage_error(const char *flag, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "error: %s: ", flag);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    print_usage(stderr);
    exit(2);
}

static long parse_long(const char *flag, const char *s, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0') { usage_error(flag, "'%s' is not an integer", s); }
    if (v < lo || v > hi) { usage_error(flag, "%ld is outside %ld..%ld", v, lo, hi); }
    return v;
}

static float parse_float(const char *flag, const char *s, float lo, float hi) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v)) {
        usage_error(flag, "'%s' is not a number", s);
    }
    if (v < lo || v > hi) { usage_error(flag, "%g is outside %g..%g", v, lo, hi); }
    return v;
}

static void parse_args(TrainArgs *a, int argc, char **argv) {
    *a = (TrainArgs){
        .train_pattern = "data/tinyshakespeare/tiny_shakespeare_train_*.bin",
        .val_pattern = "data/tinyshakespeare/tiny_shakespeare_val_*.bin",
        .model = "d12", .B = 4, .T = 64, .learning_rate = 3e-4f, .max_steps = -1,
        .val_every = 20, .val_batches = 20, .sample_every = 20, .gen_tokens = 64,
        .temperature = 1.0f, .top_k = 0, .seed = 1337};
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (strcmp(flag, "-h") == 0 || strcmp(flag, "--help") == 0) {
            print_usage(stdout);
            exit(0);
        }
        if (flag[0] != '-') { usage_error(flag, "unexpected argument"); }
        if (i + 1 >= argc) { usage_error(flag, "missing value"); }
        const char *val = argv[++i];
        if (strcmp(flag, "-i") == 0) { a->train_pattern = val; }
        else if (strcmp(flag, "-j") == 0) { a->val_pattern = val; }
        else if (strcmp(flag, "-e") == 0) { a->model = val; }
        else if (strcmp(flag, "-o") == 0) { a->output_dir = val; }
        else if (strcmp(flag, "--tokenizer") == 0) { a->tokenizer_path = val; }
        else if (strcmp(flag, "-b") == 0) { a->B = (int)parse_long(flag, val, 1, 1 << 16); }
        else if (strcmp(flag, "-t") == 0) { a->T = (int)parse_long(flag, val, 1, 1 << 20); }
        else if (strcmp(flag, "-l") == 0) { a->learning_rate = parse_float(flag, val, 0.0f, 10.0f); }
        else if (strcmp(flag, "-x") == 0) { a->max_steps = (int)parse_long(flag, val, -1, INT_MAX - 1); }
        else if (strcmp(flag, "-v") == 0) { a->val_every = (int)parse_long(flag, val, 0, INT_MAX); }
        else if (strcmp(flag, "-m") == 0) { a->val_batches = (int)parse_long(flag, val, 1, INT_MAX); }
        else if (strcmp(flag, "-s") == 0) { a->sample_every = (int)parse_long(flag, val, 0, INT_MAX); }
        else if (strcmp(flag, "-g") == 0) { a->gen_tokens = (int)parse_long(flag, val, 1, 1 << 20); }
        else if (strcmp(flag, "--temperature") == 0) { a->temperature = parse_float(flag, val, 0.0f, 100.0f); }
        else if (strcmp(flag, "--top-k") == 0) { a->top_k = (int)parse_long(flag, val, 0, 1 << 24); }
        else if (strcmp(flag, "--seed") == 0) { a->seed = (uint64_t)parse_long(flag, val, 0, LONG_MAX); }
        else { usage_error(flag, "unknown flag"); }
    }
    if (a->max_steps == 0) { usage_error("-x", "0 steps: use -1 for one epoch or a positive count"); }
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

// The mean loss over the first n batches of the validation shards.
static float validation_loss(GPT2 *model, DataLoader *val, int n) {
    dataloader_reset(val);
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        dataloader_next_batch(val);
        sum += gpt2_forward(model, val->inputs, val->targets, val->B, val->T);
    }
    return (float)(sum / n);
}

// Generates n tokens after the end-of-text token and prints them. The context
// is the last T tokens when the sample grows longer than the model's T.
static void generate_sample(GPT2 *model, const Tokenizer *tok, int *tokens, int n, int eot,
                            float temperature, int top_k, uint64_t *rng, float *scratch) {
    const int maxT = model->seq_len, V = model->config.vocab_size;
    tokens[0] = eot;
    printf("generating:\n---\n");
    for (int i = 1; i <= n; i++) {
        int start = i > maxT ? i - maxT : 0, len = i - start;
        gpt2_forward(model, tokens + start, NULL, 1, len);
        const float *logits = gpt2_logits(model, len - 1);
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

// ----------------------------------------------------------------------------

int main(int argc, char **argv) {
    TrainArgs args;
    parse_args(&args, argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0);

    // the model: a checkpoint, or a new one of a given depth
    GPT2Config config;
    int from_scratch = gpt2_config_from_depth(args.model, &config);
    if (!from_scratch) { gpt2_read_config(args.model, &config); }
    if (args.T > config.max_seq_len) {
        die("-t %d: longer than the model's maximum sequence length %d (%s)", args.T, config.max_seq_len,
            args.model);
    }

    // data, checked before the big allocation so that mistakes surface at once
    DataLoader train_loader, val_loader;
    dataloader_init(&train_loader, args.train_pattern, "-i", args.B, args.T, config.vocab_size);
    if (args.val_every > 0) {
        dataloader_init(&val_loader, args.val_pattern, "-j", args.B, args.T, config.vocab_size);
        if ((size_t)args.val_batches > val_loader.batches_per_epoch) {
            args.val_batches = (int)val_loader.batches_per_epoch;
        }
    }
    Tokenizer tokenizer = {0};
    int eot = 0;
    if (args.sample_every > 0) {
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
    FILE *log = NULL;
    char log_path[PATH_MAX];
    if (args.output_dir != NULL) {
        make_dir(args.output_dir);
        snprintf(log_path, sizeof(log_path), "%s/main.log", args.output_dir);
        log = fopen_or_die(log_path, "a");
    }

    GPT2 model;
    gpt2_create(&model, &config, args.B, args.T, args.model);
    if (from_scratch) { gpt2_init_params(&model, args.seed); }
    else { gpt2_load_params(&model, args.model); }

    int steps = args.max_steps > 0 ? args.max_steps : (int)train_loader.batches_per_epoch;
    printf("threads: %d | B=%d T=%d | %d steps | train: %d shards, %zu batches per epoch\n",
           omp_get_max_threads(), args.B, args.T, steps, train_loader.num_shards,
           train_loader.batches_per_epoch);

    int *gen_tokens = malloc_or_die(((size_t)args.gen_tokens + 1) * sizeof(int), "sample tokens");
    float *sample_scratch = malloc_or_die((size_t)config.vocab_size * sizeof(float), "sampler");
    uint64_t sample_rng = random_seed_state(args.seed ^ 0x5A3D1E);

    for (int step = 0; step <= steps; step++) {
        int last_step = step == steps;
        if (args.val_every > 0 && (step % args.val_every == 0 || last_step)) {
            float val_loss = validation_loss(&model, &val_loader, args.val_batches);
            printf("val loss %.6f\n", val_loss);
            if (log != NULL) { fprintf(log, "s:%d tel:%.6f\n", step, val_loss); fflush(log); }
        }
        if (args.sample_every > 0 && ((step > 0 && step % args.sample_every == 0) || last_step)) {
            generate_sample(&model, &tokenizer, gen_tokens, args.gen_tokens, eot, args.temperature,
                            args.top_k, &sample_rng, sample_scratch);
        }
        if (last_step) { break; }

        double t0 = now_seconds();
        dataloader_next_batch(&train_loader);
        gpt2_zero_grad(&model);
        float loss = gpt2_forward_backward(&model, train_loader.inputs, train_loader.targets, args.B,
                                           args.T, 1.0f);
        float norm = gpt2_grad_norm(&model);
        gpt2_update(&model, args.learning_rate, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, step + 1);
        double ms = (now_seconds() - t0) * 1e3;
        double tok_per_s = (double)args.B * args.T / (ms / 1e3);
        printf("step %4d/%d | loss %.6f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s\n", step + 1, steps,
               loss, norm, args.learning_rate, ms, tok_per_s);
        if (log != NULL) {
            fprintf(log, "s:%d trl:%.6f lr:%.6e norm:%.4f ms:%.2f tok/s:%.0f\n", step, loss,
                    args.learning_rate, norm, ms, tok_per_s);
            fflush(log);
        }
    }

    if (log != NULL) { fclose_or_die(log, log_path); }
    free(gen_tokens);
    free(sample_scratch);
    if (args.sample_every > 0) { tokenizer_free(&tokenizer); }
    dataloader_free(&train_loader);
    if (args.val_every > 0) { dataloader_free(&val_loader); }
    gpt2_free(&model);
    return 0;
}
