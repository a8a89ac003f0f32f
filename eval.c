/*
Scores a model without training: the loss and perplexity over token shards,
and HellaSwag (or any eval file in llm.c's format) as llm.c scores it.

  ./eval -e MODEL -j 'data/tinyshakespeare/tiny_shakespeare_val_*.bin' -b 4 -t 64 -m 20
  ./eval -e MODEL --hellaswag data/hellaswag/hellaswag_val.bin

The loss is the mean over the first -m batches (all, by default) of the mean
cross-entropy of a batch's B*T next-token predictions, the number train_gpt2
prints as "val loss" for the same -j, -b, -t, -m; the perplexity is exp(loss).
HellaSwag: see llmc/hellaswag.h (acc by the sum of an ending's token losses,
acc_norm by their mean, as llm.c's dev/data/hellaswag.py). The forward pass is
llmc/gpt2.h's, the one train_gpt2 runs.
*/
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmc/dataloader.h"
#include "llmc/cli.h"
#include "llmc/gpt2.h"
#include "llmc/hellaswag.h"
#include "llmc/utils.h"
#include "llmc/val_loss.h"

typedef struct {
    const char *model;        // -e
    const char *val_pattern;  // -j, NULL: none
    const char *hellaswag;    // --hellaswag, NULL: none
    int B, T;                 // -b, -t (0: the model's maxT, at most 1024)
    int max_batches;          // -m, -1: all
    int max_examples;         // --max-examples, -1: all
    int verbose;              // --verbose: a line per HellaSwag example
    int precision;            // --precision: PRECISION_FP32 or PRECISION_BF16 (llmc/gemm.h)
} EvalArgs;

static void print_usage(FILE *out) {
    fprintf(out,
        "usage: ./eval -e MODEL [-j PATTERN] [--hellaswag FILE] [options]\n"
        "  -e MODEL          llm.c model file (required)\n"
        "  -j PATTERN        token shards (glob): the mean loss and the perplexity over them\n"
        "  -b N              batch size B for -j   default 4\n"
        "  -t N              sequence length T for -j   default the model's maxT, at most 1024\n"
        "  -m N              batches of -j to score, -1 = all   default -1\n"
        "  --hellaswag FILE  an eval file (scripts/convert/prepare_hellaswag.py): acc and acc_norm\n"
        "  --max-examples N  score the first N examples only, -1 = all   default -1\n"
        "  --verbose 0|1     print every example's ending losses   default 0\n"
        "  --precision fp32|bf16   matmul operands in fp32, or rounded to bf16 (fp32 sums)   default fp32\n"
        "  -h                this help\n"
        "At least one of -j and --hellaswag. Threads: OMP_NUM_THREADS.\n");
}

static void parse_args(EvalArgs *a, int argc, char **argv) {
    cli_print_usage = print_usage;
    *a = (EvalArgs){.B = 4, .T = 0, .max_batches = -1, .max_examples = -1};
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        const char *val = cli_flag_value(argc, argv, &i);
        if (strcmp(flag, "-e") == 0) { a->model = val; }
        else if (strcmp(flag, "-j") == 0) { a->val_pattern = val; }
        else if (strcmp(flag, "--hellaswag") == 0) { a->hellaswag = val; }
        else if (strcmp(flag, "-b") == 0) { a->B = (int)parse_long(flag, val, 1, 1 << 16); }
        else if (strcmp(flag, "-t") == 0) { a->T = (int)parse_long(flag, val, 1, 1 << 20); }
        else if (strcmp(flag, "-m") == 0) {
            a->max_batches = (int)parse_long(flag, val, -1, INT_MAX);
            if (a->max_batches == 0) { usage_error(flag, "0 batches: give -1 for all, or a positive count"); }
        }
        else if (strcmp(flag, "--max-examples") == 0) {
            a->max_examples = (int)parse_long(flag, val, -1, INT_MAX);
            if (a->max_examples == 0) { usage_error(flag, "0 examples: give -1 for all, or a positive count"); }
        }
        else if (strcmp(flag, "--verbose") == 0) { a->verbose = (int)parse_long(flag, val, 0, 1); }
        else if (strcmp(flag, "--precision") == 0) { a->precision = parse_precision(flag, val); }
        else { usage_error(flag, "unknown flag"); }
    }
    if (a->model == NULL) { usage_error("-e", "a model file is required"); }
    if (a->val_pattern == NULL && a->hellaswag == NULL) {
        usage_error("-j", "nothing to evaluate: give -j PATTERN and/or --hellaswag FILE");
    }
}

int main(int argc, char **argv) {
    EvalArgs args;
    parse_args(&args, argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0);

    GPT2Config config;
    gpt2_read_config(args.model, &config);
    if (args.T == 0) { args.T = config.max_seq_len < 1024 ? config.max_seq_len : 1024; }
    if (args.T > config.max_seq_len) {
        die("-t %d: longer than the model's maximum sequence length %d (%s)", args.T, config.max_seq_len, args.model);
    }

    // inputs first (cheap checks before the big allocation)
    DataLoader loader;
    int batches = 0;
    if (args.val_pattern != NULL) {
        dataloader_init(&loader, args.val_pattern, "-j", args.B, args.T, config.vocab_size, 0, 0);
        batches = (int)(loader.batches_per_epoch < (size_t)INT_MAX ? loader.batches_per_epoch : INT_MAX);
        if (args.max_batches > 0 && args.max_batches < batches) { batches = args.max_batches; }
    }
    HellaSwag hs;
    int B = args.val_pattern != NULL ? args.B : 1, T = args.val_pattern != NULL ? args.T : 1;
    if (args.hellaswag != NULL) {
        hellaswag_load(&hs, args.hellaswag);
        hellaswag_check_fits(&hs, args.hellaswag, &config, config.max_seq_len);
        // llm.c's batching: an example's endings in one batch, as long as its longest row
        if (hs.max_endings > B) { B = hs.max_endings; }
        if (hs.longest_row > T) { T = hs.longest_row; }
    }

    GPT2 model;  // parameters and activations only: no gradients nor AdamW state
    matmul_set_precision((Precision)args.precision);  // first: the classifier's chunk depends on it
    gpt2_create_ex(&model, &config, B, T, args.model, 0, 0, 0);
    gpt2_load_params(&model, args.model);
    char b1[32], b2[32];
    printf("model: L=%d NH=%d C=%d maxT=%d V=%d (padded %d), %zu parameters | matmuls: %s\n", config.num_layers,
           config.num_heads, config.channels, config.max_seq_len, config.vocab_size, config.padded_vocab_size,
           model.num_parameters, matmul_precision_path());
    printf("memory: parameters %s, activations %s (B=%d, T=%d)\n", human_bytes(model.params_span * 4.0, b1),
           human_bytes(model.num_activations * 4.0, b2), B, T);

    if (args.val_pattern != NULL) {
        double t0 = now_seconds();
        double loss = validation_loss(&model, &loader, batches);  // train_gpt2's, a float
        printf("val loss %.6f | perplexity %.4f | %d batches of B=%d T=%d (%ld tokens) from %s | %.1f s\n", loss,
               exp(loss), batches, args.B, args.T, (long)batches * args.B * args.T, args.val_pattern,
               now_seconds() - t0);
        dataloader_free(&loader);
    }
    if (args.hellaswag != NULL) {
        double t0 = now_seconds();
        int *inputs = malloc_or_die((size_t)B * T * sizeof(int), "eval inputs");
        int *targets = malloc_or_die((size_t)B * T * sizeof(int), "eval targets");
        HellaSwagResult r = hellaswag_evaluate(&model, &hs, args.max_examples, inputs, targets,
                                               args.verbose ? stdout : NULL);
        printf("hellaswag: %d examples | acc %.4f (%d, lowest sum of ending losses) | acc_norm %.4f (%d, "
               "lowest mean) | %.1f s\n", r.num_examples, (double)r.correct / r.num_examples, r.correct,
               (double)r.correct_norm / r.num_examples, r.correct_norm, now_seconds() - t0);
        free(inputs);
        free(targets);
        hellaswag_free(&hs);
    }
    gpt2_free(&model);
    return 0;
}
