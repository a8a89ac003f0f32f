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

// Median wall time in ms of `reps` calls of fn(ctx), after one warm-up call.
static double time_median_ms(void (*fn)(void *), void *ctx, int reps) {
    double t[64];
    if (reps > 64) { reps = 64; }
    fn(ctx);
    for (int r = 0; r < reps; r++) {
        double t0 = now_seconds();
        fn(ctx);
        t[r] = (now_seconds() - t0) * 1e3;
    }
    for (int i = 1; i < reps; i++) {  // insertion sort, reps is small
        double v = t[i]; int j = i - 1;
        while (j >= 0 && t[j] > v) { t[j + 1] = t[j]; j--; }
        t[j + 1] = v;
    }
    return t[reps / 2];
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
