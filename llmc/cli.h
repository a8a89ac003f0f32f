/*
Command-line parsing shared by the programs (train_gpt2, eval, generate): a bad flag gets
"error: FLAG: what is wrong" (the rank first under MPI), then the program's usage, exit 2.
A program sets cli_print_usage to its usage printer before parsing.
*/
#pragma once

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "matmul.h"  // Precision
#include "utils.h"

static void (*cli_print_usage)(FILE *out);

__attribute__((noreturn, format(printf, 2, 3)))
static void usage_error(const char *flag, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout);
    fprintf(stderr, "error: %s%s: ", die_rank_label, flag);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (cli_print_usage != NULL) { cli_print_usage(stderr); }
    exit_job(2);
}

// The value of the flag at argv[*i] (every flag but a program's switches takes one), with
// *i moved onto it: -h or --help prints the usage and exits 0; a word that is not a flag, or
// a flag at the end, is a usage error.
static const char *cli_flag_value(int argc, char **argv, int *i) {
    const char *flag = argv[*i];
    if (strcmp(flag, "-h") == 0 || strcmp(flag, "--help") == 0) {
        if (cli_print_usage != NULL) { cli_print_usage(stdout); }
        exit(0);
    }
    if (flag[0] != '-' || flag[1] == '\0') { usage_error(flag, "unexpected argument"); }
    if (*i + 1 >= argc) { usage_error(flag, "missing value"); }
    return argv[++*i];
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
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v)) { usage_error(flag, "'%s' is not a number", s); }
    if (v < lo || v > hi) { usage_error(flag, "%g is outside %g..%g", v, lo, hi); }
    return v;
}

// --precision fp32|bf16
static Precision parse_precision(const char *flag, const char *s) {
    if (strcmp(s, "fp32") == 0) { return PRECISION_FP32; }
    if (strcmp(s, "bf16") == 0) { return PRECISION_BF16; }
    usage_error(flag, "'%s' is not fp32 or bf16", s);
}
