/*
Text from a prompt with a GPT-2 model: the prompt is encoded with the GPT-2 BPE
(llmc/bpe.h), run through one batched forward pass that fills the key/value
cache, and then every new token costs one position's forward (llmc/gpt2.h,
gpt2_cache_*). Tokens are sampled (temperature, top-k, top-p, seeded) and their
bytes written to stdout as they are made.

    ./generate -e MODEL -p "PROMPT" [-n TOKENS] [--temperature F] [--top-k K] [--top-p P] [--seed N]

Output on stdout: the prompt's text, the generated text, a newline; nothing
else (the model summary and the speed go to stderr). Each token's bytes are
written as decoded and flushed: a multi-byte UTF-8 character split across two
tokens arrives whole once its second token is out. Generation stops after -n
tokens or at end-of-text (not printed).
*/
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmc/bpe.h"
#include "llmc/cli.h"
#include "llmc/gpt2.h"
#include "llmc/gpt2_cache.h"
#include "llmc/rand.h"
#include "llmc/sampler.h"
#include "llmc/tokenizer.h"

typedef struct {
    const char *model;           // -e
    const char *vocab_dir;       // --vocab
    const char *tokenizer_path;  // --tokenizer
    const char *prompt;          // -p
    const char *prompt_file;     // -f
    int eot;                     // --eot
    int max_tokens;              // -n
    float temperature;           // --temperature
    int top_k;                   // --top-k
    float top_p;                 // --top-p
    uint64_t seed;               // --seed
    int precision;               // --precision: PRECISION_FP32 or PRECISION_BF16 (llmc/gemm.h)
} GenerateArgs;

static void print_usage(FILE *out) {
    fprintf(out,
        "usage: ./generate -e MODEL (-p TEXT | -f FILE | --eot) [options]\n"
        "  -e MODEL          llm.c model file, or d6|d12|d24|d36|d48 for a random model (--seed)\n"
        "  -p TEXT           the prompt\n"
        "  -f FILE           the prompt from a file, - for stdin\n"
        "  --eot             start from the end-of-text token (before the prompt, if any), as train_gpt2's samples\n"
        "  --vocab DIR       GPT-2 BPE vocabulary (encoder.json, vocab.bpe) for the prompt and the output   default data/gpt2\n"
        "  --tokenizer FILE  llm.c tokenizer file to decode the output with instead\n"
        "  -n N              tokens to generate (fewer if end-of-text comes)   default 256\n"
        "  --temperature F   sampling temperature, 0 = greedy   default 1.0\n"
        "  --top-k K         sample from the K most likely tokens, 0 = all   default 0\n"
        "  --top-p P         sample from the fewest most likely tokens of probability >= P, 1 = all   default 1.0\n"
        "  --seed N          seed of the sampler (and of a random model)   default 1337\n"
        "  --precision fp32|bf16   matmul operands in fp32, or rounded to bf16 (fp32 sums)   default fp32\n"
        "  -h                this help\n"
        "Output: the prompt and the generated text on stdout, streamed; the speed on stderr.\n"
        "Threads: OMP_NUM_THREADS (default: all cores).\n");
}

static void parse_args(GenerateArgs *a, int argc, char **argv) {
    cli_print_usage = print_usage;
    *a = (GenerateArgs){.vocab_dir = "data/gpt2", .max_tokens = 256, .temperature = 1.0f, .top_p = 1.0f,
                        .seed = 1337};
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (strcmp(flag, "--eot") == 0) { a->eot = 1; continue; }  // the one flag without a value
        const char *val = cli_flag_value(argc, argv, &i);
        if (strcmp(flag, "-e") == 0) { a->model = val; }
        else if (strcmp(flag, "--vocab") == 0) { a->vocab_dir = val; }
        else if (strcmp(flag, "--tokenizer") == 0) { a->tokenizer_path = val; }
        else if (strcmp(flag, "-p") == 0) { a->prompt = val; }
        else if (strcmp(flag, "-f") == 0) { a->prompt_file = val; }
        else if (strcmp(flag, "-n") == 0) { a->max_tokens = (int)parse_long(flag, val, 0, 1 << 24); }
        else if (strcmp(flag, "--temperature") == 0) { a->temperature = parse_float(flag, val, 0.0f, 100.0f); }
        else if (strcmp(flag, "--top-k") == 0) { a->top_k = (int)parse_long(flag, val, 0, 1 << 24); }
        else if (strcmp(flag, "--top-p") == 0) {
            a->top_p = parse_float(flag, val, 0.0f, 1.0f);
            if (a->top_p <= 0.0f) { usage_error(flag, "must be above 0 (1 keeps every token)"); }
        }
        else if (strcmp(flag, "--seed") == 0) { a->seed = (uint64_t)parse_long(flag, val, 0, LONG_MAX); }
        else if (strcmp(flag, "--precision") == 0) { a->precision = parse_precision(flag, val); }
        else { usage_error(flag, "unknown flag"); }
    }
    if (a->model == NULL) { usage_error("-e", "a model is required"); }
    if (a->prompt != NULL && a->prompt_file != NULL) { usage_error("-f", "give the prompt with -p or -f, not both"); }
    if (a->prompt == NULL && a->prompt_file == NULL && !a->eot) {
        usage_error("-p", "give a prompt (-p TEXT or -f FILE), or --eot to start from end-of-text");
    }
}

// The whole of a file, or of stdin for "-"; *size gets its length.
static char *read_prompt_file(const char *path, size_t *size) {
    const int is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen_or_die(path, "rb");
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc_or_die(cap, "the prompt");
    for (;;) {
        if (n == cap) {
            if (cap > ((size_t)1 << 30)) { die("%s: prompt over 1 GiB", is_stdin ? "stdin" : path); }
            cap *= 2;
            char *grown = realloc(buf, cap);
            if (grown == NULL) { die("%s: out of memory reading the prompt", is_stdin ? "stdin" : path); }
            buf = grown;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) { break; }
    }
    if (ferror(f)) { die("%s: read error: %s", is_stdin ? "stdin" : path, strerror(errno)); }
    if (!is_stdin) { fclose(f); }
    *size = n;
    return buf;
}

// Decodes token ids to bytes with either an llm.c tokenizer file or the BPE vocabulary.
typedef struct {
    const Tokenizer *file;  // or NULL
    const BPETokenizer *bpe;
} Decoder;

static void write_token(const Decoder *d, int token) {
    if (d->file != NULL) {
        fwrite(tokenizer_decode(d->file, (uint32_t)token), 1, d->file->token_len[token], stdout);
    } else {
        size_t len;
        const uint8_t *bytes = bpe_token_bytes(d->bpe, (uint32_t)token, &len);
        fwrite(bytes, 1, len, stdout);
    }
}

int main(int argc, char **argv) {
    GenerateArgs args;
    parse_args(&args, argc, argv);

    // the prompt's text, the vocabulary and the model's config, all checked before the big allocation
    char *text = NULL;
    size_t text_len = 0;
    if (args.prompt != NULL) {
        text_len = strlen(args.prompt);
        text = malloc_or_die(text_len + 1, "the prompt");
        memcpy(text, args.prompt, text_len + 1);
    } else if (args.prompt_file != NULL) {
        text = read_prompt_file(args.prompt_file, &text_len);
    }
    Tokenizer tokenizer = {0};
    BPETokenizer bpe = {0};
    const int need_bpe = text_len > 0 || args.tokenizer_path == NULL;
    if (need_bpe) { bpe_load(&bpe, args.vocab_dir); }
    if (args.tokenizer_path != NULL) { tokenizer_init(&tokenizer, args.tokenizer_path); }
    const Decoder decoder = {args.tokenizer_path != NULL ? &tokenizer : NULL, &bpe};
    const int decode_vocab = decoder.file != NULL ? (int)tokenizer.vocab_size : bpe.vocab_size;
    const char *decode_source = decoder.file != NULL ? args.tokenizer_path : args.vocab_dir;
    const int eot = decoder.file != NULL ? (int)tokenizer.eot_token : bpe.eot_token;
    if (eot < 0) { die("%s/encoder.json: has no \"%s\" token", args.vocab_dir, BPE_EOT_STRING); }

    GPT2Config config;
    const int random_model = gpt2_config_from_arg(args.model, &config);
    if (decode_vocab < config.vocab_size) {
        die("%s: a vocabulary of %d tokens, the model's has %d", decode_source, decode_vocab, config.vocab_size);
    }
    gpt2_check_eot(&config, eot, decode_source);

    TokenVec prompt = {0};
    if (args.eot) { tokenvec_push(&prompt, (uint32_t)eot); }
    if (text_len > 0) {
        BPECache bpe_cache;
        bpe_cache_init(&bpe_cache);
        bpe_encode(&bpe, &bpe_cache, (const uint8_t *)text, text_len, &prompt);
        bpe_cache_free(&bpe_cache);
    }
    if (prompt.len == 0) { die("%s: the prompt is empty (give some text, or --eot)", args.prompt != NULL ? "-p" : args.prompt_file); }
    if (prompt.len > (size_t)INT_MAX - (size_t)args.max_tokens) { die("the prompt is too long (%zu tokens)", prompt.len); }
    for (size_t i = 0; i < prompt.len; i++) {
        if (prompt.data[i] >= (uint32_t)config.vocab_size) {
            die("%s: prompt token %u is outside the model's vocabulary of %d", args.vocab_dir, prompt.data[i], config.vocab_size);
        }
    }

    // the model, activations for one batched forward over the whole context, the cache
    const int window = config.max_seq_len;
    GPT2 model;
    gpt2_create_ex(&model, &config, 1, window, args.model, 0, 0, 0);
    if (random_model) { gpt2_init_params(&model, args.seed); }
    else { gpt2_load_params(&model, args.model); }
    GPT2Cache cache;
    gpt2_cache_create(&cache, &model, window);
    // after the model: its logits sized for fp32's chunks (256 rows; generate reads one row at a
    // time, gpt2_logits), not bf16's 1024 (150 MB more, unused); the classifier, which generate
    // never runs, would stop on chunks larger than the logits
    matmul_set_precision((Precision)args.precision);
    if (args.precision == PRECISION_BF16) { gpt2_cache_use_bf16(&cache, &model); }  // the steps read bf16 weights
    char b1[32];
    fprintf(stderr, "model: %s, L=%d NH=%d C=%d maxT=%d V=%d, %zu parameters (%s) | threads: %d | matmuls: %s\n",
            random_model ? "random" : args.model, config.num_layers, config.num_heads, config.channels,
            config.max_seq_len, config.vocab_size, model.num_parameters,
            human_bytes(model.num_parameters * 4.0, b1), omp_get_max_threads(), matmul_precision_path());
    const int n_prompt = (int)prompt.len, n_total = n_prompt + args.max_tokens;
    int *tokens = malloc_or_die((size_t)n_total * sizeof(int), "tokens");
    for (int i = 0; i < n_prompt; i++) { tokens[i] = (int)prompt.data[i]; }
    float *scratch = malloc_or_die((size_t)config.vocab_size * sizeof(float), "sampler");
    SampleCandidate *cand = malloc_or_die((size_t)config.vocab_size * sizeof(SampleCandidate), "sampler");
    if (n_prompt > window) {
        fprintf(stderr, "the prompt's %d tokens are over the model's context of %d: its last %d are used\n",
                n_prompt, window, window / 2 > 0 ? window / 2 : 1);
    }

    if (text_len > 0) { fwrite(text, 1, text_len, stdout); }
    fflush(stdout);
    uint64_t rng = random_seed_state(args.seed);
    double t0 = now_seconds(), t_first = t0;
    int n = n_prompt, generated = 0;
    while (n < n_total) {
        const int next = gpt2_cache_sample(&model, &cache, tokens, n, args.temperature, args.top_k, args.top_p, &rng,
                                           scratch, cand);
        if (n == n_prompt) { t_first = now_seconds(); }
        if (next == eot) { break; }
        tokens[n++] = next;
        generated++;
        write_token(&decoder, next);
        fflush(stdout);
    }
    fputc('\n', stdout);
    fflush(stdout);
    const double t_end = now_seconds();
    // the first token's time is the prompt's batched forward; the others, one position each
    const double steps_s = t_end - t_first;
    const int steps = generated > 0 ? generated - 1 + (n < n_total) : 0;
    fprintf(stderr, "prompt: %d tokens in %.1f ms | generated %d tokens: %.2f tok/s after the first "
            "(%.2f ms per token) | %s\n", n_prompt, (t_first - t0) * 1e3, generated,
            steps > 0 ? steps / steps_s : 0.0, steps > 0 ? steps_s * 1e3 / steps : 0.0,
            n < n_total ? "stopped at end-of-text" : "stopped at -n");

    free(tokens);
    free(scratch);
    free(cand);
    free(text);
    tokenvec_free(&prompt);
    gpt2_cache_free(&cache);
    gpt2_free(&model);
    if (decoder.file != NULL) { tokenizer_free(&tokenizer); }
    if (need_bpe) { bpe_free(&bpe); }
    return 0;
}
