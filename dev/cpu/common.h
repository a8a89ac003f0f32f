/*
Shared harness for the dev/cpu kernel workbench.

Each kernel file defines numbered versions; version 1 is the simplest correct
one. The harness runs a version, compares its outputs with version 1's and
times it (median of several runs).
*/
#pragma once

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llmc/utils.h"

// Deterministic uniform floats in [-1, 1) (xorshift), so runs are comparable.
static void fill_random(float *x, size_t n, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        x[i] = (float)((s >> 40) * (1.0 / (1 << 23)) - 1.0);
    }
}

static float *make_random(size_t n, uint64_t seed) {
    float *x = aligned_alloc_or_die(n * sizeof(float), "dev buffer");
    fill_random(x, n, seed);
    return x;
}

// A random weight matrix of the model's size, uniform in [-1/16, 1/16) (about 0.036 rms): a product of
// it with inputs in [-1, 1) over C = 768 spreads over about [-3, 3], as the model's pre-activations do.
// Weights in [-1, 1) put them at 10-30, where GELU's exp(-2u) is subnormal and vec_exp takes its slow
// path (2026-11-28 run 15 and 2026-11-30 run 18 on the lent Xeon): a harness would time that path.
static float *make_random_weight(size_t n, uint64_t seed) {
    float *w = make_random(n, seed);
    for (size_t i = 0; i < n; i++) { w[i] *= 1.0f / 16; }
    return w;
}

// Compares got against ref: max |got - ref| relative to max |ref|. Returns 1 if within tol.
static int check_close(const char *what, const float *got, const float *ref, size_t n, double tol) {
    double max_err = 0.0, max_ref = 0.0;
    size_t worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - (double)ref[i]);
        if (!(e <= max_err)) { max_err = e; worst = i; }  // catches NaN too
        if (fabs(ref[i]) > max_ref) { max_ref = fabs(ref[i]); }
    }
    double rel = max_err / (max_ref > 0 ? max_ref : 1.0);
    int ok = rel <= tol;
    if (!ok) {
        printf("  MISMATCH %s: max err %.3e (rel %.3e > %.1e) at %zu: got %.8g want %.8g\n", what,
               max_err, rel, tol, worst, got[worst], ref[worst]);
    }
    return ok;
}

// The median of x (n), which it sorts in place.
static double median_of(double *x, int n) {
    for (int i = 1; i < n; i++) {  // insertion sort, n is small
        double v = x[i]; int j = i - 1;
        while (j >= 0 && x[j] > v) { x[j + 1] = x[j]; j--; }
        x[j + 1] = v;
    }
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

// Median wall time in ms of `reps` calls of fn(ctx) (the caller has warmed it up).
static double time_median_ms(void (*fn)(void *), void *ctx, int reps) {
    double t[64];
    if (reps > 64) { reps = 64; }
    for (int r = 0; r < reps; r++) {
        double t0 = now_seconds();
        fn(ctx);
        t[r] = (now_seconds() - t0) * 1e3;
    }
    return median_of(t, reps);
}

// Max |got - ref| / max |ref|, for reporting how close a version came.
static double max_rel_err(const float *got, const float *ref, size_t n) {
    double err = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - (double)ref[i]);
        if (!(e <= err)) { err = e; }  // NaN sticks
        if (fabs(ref[i]) > scale) { scale = fabs(ref[i]); }
    }
    return err / (scale > 0 ? scale : 1.0);
}

// Median wall time in ms of fn(ctx) over about budget_ms of calls (3 to 25 of them,
// after a warm-up call); a single call when one takes more than budget_ms / 2.
static double time_budget_ms(void (*fn)(void *), void *ctx, double budget_ms) {
    double t0 = now_seconds();
    fn(ctx);
    double first = (now_seconds() - t0) * 1e3;
    if (first > budget_ms / 2) { return first; }
    int reps = (int)(budget_ms / (first + 1e-3));
    return time_median_ms(fn, ctx, reps < 3 ? 3 : reps > 25 ? 25 : reps);
}

// ----------------------------------------------------------------------------
// Versions of a kernel against version 1, for the elementwise harnesses.

// The outputs of a kernel call: what each holds before a call (accumulating kernels
// start from init; NULL leaves it as it is) and version 1's results, the reference.
#define MAX_OUTPUTS 4
typedef struct {
    int count;
    const char *name[MAX_OUTPUTS];
    float *buf[MAX_OUTPUTS];
    const float *init[MAX_OUTPUTS];
    float *ref[MAX_OUTPUTS];
    size_t n[MAX_OUTPUTS];
} Outputs;

static void outputs_add(Outputs *o, const char *name, float *buf, const float *init, size_t n) {
    if (o->count == MAX_OUTPUTS) { die("too many outputs"); }
    o->name[o->count] = name;
    o->buf[o->count] = buf;
    o->init[o->count] = init;
    o->ref[o->count] = aligned_alloc_or_die(n * sizeof(float), "reference output");
    o->n[o->count] = n;
    o->count++;
}

static void outputs_free(Outputs *o) {
    for (int i = 0; i < o->count; i++) { free(o->ref[i]); }
    o->count = 0;
}

// The shortest wall time in ms of `reps` calls of fn(ctx) (the caller has warmed it up): on
// a shared machine the least disturbed run (a median still moves by 2x when a neighbour runs).
static double time_best_ms(void (*fn)(void *), void *ctx, int reps) {
    double best = INFINITY;
    for (int r = 0; r < reps; r++) {
        double t0 = now_seconds();
        fn(ctx);
        double ms = (now_seconds() - t0) * 1e3;
        if (ms < best) { best = ms; }
    }
    return best;
}

// Calls fn(ctx) once from the initial outputs (also the warm-up); version 1's results become the reference,
// any other version's are checked against it (relative tolerance tol). Then, if timed (and
// DEV_UNTIMED is not set: make test's quick checks), the best time of enough calls to take
// about a second (5 to 50), printed with the bandwidth of `bytes` moved per call. Returns 1
// if it matched.
static int run_version(const char *shape, int version, const char *what, void (*fn)(void *), void *ctx,
                       Outputs *o, double bytes, double tol, int timed) {
    for (int i = 0; i < o->count; i++) {
        if (o->init[i] != NULL) { memcpy(o->buf[i], o->init[i], o->n[i] * sizeof(float)); }
    }
    double t0 = now_seconds();
    fn(ctx);
    double first_ms = (now_seconds() - t0) * 1e3;
    int ok = 1;
    for (int i = 0; i < o->count; i++) {
        if (version == 1) { memcpy(o->ref[i], o->buf[i], o->n[i] * sizeof(float)); }
        else { ok &= check_close(o->name[i], o->buf[i], o->ref[i], o->n[i], tol); }
    }
    if (timed && getenv("DEV_UNTIMED") == NULL) {
        int reps = (int)(1000.0 / (first_ms + 1e-3));
        double ms = time_best_ms(fn, ctx, reps < 5 ? 5 : reps > 50 ? 50 : reps);
        printf("  %-16s v%d %-44s %9.3f ms %7.1f GB/s%s\n", shape, version, what, ms, bytes / ms * 1e-6,
               ok ? "" : "  MISMATCH");
    } else if (!ok) {
        printf("  %-16s v%d %-44s MISMATCH\n", shape, version, what);
    }
    return ok;
}

// The version asked for on the command line (0: all).
static int version_arg(int argc, char **argv) {
    int v = argc > 1 ? atoi(argv[1]) : 0;
    if (argc > 2 || v < 0) { die("usage: %s [VERSION]", argv[0]); }
    return v;
}
