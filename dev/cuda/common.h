/*
Shared harness for the dev/cuda kernel workbench (the GPU twin of dev/cpu/common.h).

Each kernel file defines numbered versions; version 1 is the simplest correct one. The
harness runs a version on the GPU, compares its outputs with version 1's and with the CPU
reference (llmc/layernorm.h through cpu_reference.c), and times it with CUDA events.

Timing: each repetition is preceded by an untimed read of a buffer twice the size of the
L2 cache (flush_l2: a read, not a write, which would leave dirty lines to write back), so
the inputs come from device memory as they would in the model (B=8 T=1024 C=768 is 25 MB
a tensor, and the H100's L2 is 50 MB: without the flush a kernel could
read its inputs from L2 and report more than the memory bandwidth). The time is the
median over the repetitions, after a warm-up call.
*/
#pragma once

#ifdef CUDA_EMU
#include "emu.h"
#else
#include <cuda_runtime.h>
#define DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#define LAUNCH(kernel, grid, block, smem, ...) kernel<<<(grid), (block), (smem)>>>(__VA_ARGS__)
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUDA_CHECK(call)                                                                    \
    do {                                                                                    \
        cudaError_t err_ = (call);                                                          \
        if (err_ != cudaSuccess) {                                                          \
            fprintf(stderr, "error: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,            \
                    cudaGetErrorString(err_));                                              \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

// A kernel launch: the launch itself, then errors raised while it ran (checked runs only).
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

extern "C" {
void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C);
void cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *mean, const float *rstd,
                            const float *weight, int N, int C);
}

// The shapes every harness runs: GPT-2 124M's and 1.5B's C at B=8 T=1024, then odd ones
// (C not a multiple of 4 or 32, a single row) that exercise the tails of every kernel.
// (Not C = 1: its variance is 0, rstd = 1/sqrt(eps) = 316 multiplies one rounding of
// dout * weight, which gcc and nvcc contract into FMAs differently, into dinp.)
struct Shape { int B, T, C; };
#ifndef CUDA_EMU
static const Shape SHAPES[] = {
    {8, 1024, 768}, {8, 1024, 1600}, {4, 333, 57}, {1, 1, 768}, {1, 1, 57}, {3, 7, 3},
};
#else  // the emulation is slow: fewer rows, the same C (every kernel path and tail)
static const Shape SHAPES[] = {
    {2, 32, 768}, {1, 40, 1600}, {4, 33, 57}, {1, 1, 768}, {1, 1, 57}, {3, 7, 3},
};
#endif
static const int NUM_SHAPES = sizeof(SHAPES) / sizeof(SHAPES[0]);

// Deterministic uniform floats in [-1, 1) (xorshift, as dev/cpu), so runs are comparable.
static void fill_random(float *x, size_t n, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        x[i] = (float)((s >> 40) * (1.0 / (1 << 23)) - 1.0);
    }
}

static float *host_alloc(size_t n) {
    float *p = (float *)malloc((n > 0 ? n : 1) * sizeof(float));
    if (p == NULL) { fprintf(stderr, "error: out of host memory (%zu floats)\n", n); exit(1); }
    return p;
}

static float *host_random(size_t n, uint64_t seed) {
    float *p = host_alloc(n);
    fill_random(p, n, seed);
    return p;
}

static float *device_alloc(size_t n) {
    float *p;
    CUDA_CHECK(cudaMalloc(&p, (n > 0 ? n : 1) * sizeof(float)));
    return p;
}

// A device copy of host (n floats).
static float *device_copy(const float *host, size_t n) {
    float *p = device_alloc(n);
    CUDA_CHECK(cudaMemcpy(p, host, n * sizeof(float), cudaMemcpyHostToDevice));
    return p;
}

static void to_host(float *host, const float *dev, size_t n) {
    CUDA_CHECK(cudaMemcpy(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost));
}

// Compares got against ref: max |got - ref| relative to max |ref| (or to floor, if larger)
// must be <= tol. Returns that relative error (NaN or inf in got gives inf), printing a line
// on a mismatch. floor: the size of the terms a result sums, where sums may cancel.
static double check_close(const char *what, const float *got, const float *ref, size_t n, double tol,
                          double floor = 0.0) {
    double max_err = 0.0, max_ref = 0.0;
    size_t worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - (double)ref[i]);
        if (!(e <= max_err)) { max_err = e; worst = i; }  // catches NaN too
        if (fabs(ref[i]) > max_ref) { max_ref = fabs(ref[i]); }
    }
    if (max_ref < floor) { max_ref = floor; }
    double rel = max_err / (max_ref > 0 ? max_ref : 1.0);
    if (!(rel == rel) || isinf(max_err)) { rel = INFINITY; }
    if (!(rel <= tol)) {
        printf("  MISMATCH %s: max err %.3e (rel %.3e > %.1e) at %zu: got %.8g want %.8g\n", what,
               max_err, rel, tol, worst, got[worst], ref[worst]);
    }
    return rel;
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

// The L2 flush buffer: twice the L2 size, written before every timed repetition.
static void *flush_buffer(size_t *bytes) {
    static void *buf = NULL;
    static size_t size = 0;
    if (buf == NULL) {
        int dev;
        cudaDeviceProp prop;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
        size = 2 * (size_t)(prop.l2CacheSize > 0 ? prop.l2CacheSize : (64 << 20));
        CUDA_CHECK(cudaMalloc(&buf, size));
    }
    *bytes = size;
    return buf;
}

#ifndef CUDA_EMU
enum { MAX_REPS = 200 };

// The L2 flush before each timed call reads a buffer twice the L2 size, leaving the L2
// full of clean lines (a sum no one uses, stored only if impossible). Writing the buffer
// instead (cudaMemset, DEV_CUDA_FLUSH=write) leaves it full of dirty lines, which the timed
// call then pays to write back as it evicts them: on the H100 that made a plain 25 MB copy
// take 23.3 us instead of 17.5 (run of 2026-11-23), a cost of the flush, not of the kernel.
__global__ static void flush_read_kernel(const float4 *src, size_t n4, float *sink) {
    float sum = 0.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = src[i];
        sum += v.x + v.y + v.z + v.w;
    }
    if (sum == 12345.678f) { *sink = sum; }
}

static void flush_l2(void *flush, size_t flush_bytes, int r) {
    static int write = -1;
    if (write < 0) {
        const char *env = getenv("DEV_CUDA_FLUSH");
        write = env != NULL && strcmp(env, "write") == 0;
        if (env != NULL && !write && strcmp(env, "read") != 0) {
            fprintf(stderr, "error: DEV_CUDA_FLUSH '%s': must be read or write\n", env);
            exit(2);
        }
    }
    if (write) { CUDA_CHECK(cudaMemsetAsync(flush, r & 1, flush_bytes)); }
    else { LAUNCH(flush_read_kernel, 1024, 512, 0, (const float4 *)flush, flush_bytes / 16, (float *)flush); }
}

// Median time in ms of launch() over repetitions, each timed alone by CUDA events after an
// L2 flush. Warms up with one call, then picks the count: up to 200, about 0.3 s in all.
template <typename F>
static double time_median_ms(F launch) {
    size_t flush_bytes;
    void *flush = flush_buffer(&flush_bytes);
    static cudaEvent_t start[MAX_REPS], stop[MAX_REPS];
    static int have_events = 0;
    if (!have_events) {
        for (int r = 0; r < MAX_REPS; r++) {
            CUDA_CHECK(cudaEventCreate(&start[r]));
            CUDA_CHECK(cudaEventCreate(&stop[r]));
        }
        have_events = 1;
    }
    CUDA_CHECK(cudaMemset(flush, 0, flush_bytes));
    flush_l2(flush, flush_bytes, 0);
    CUDA_CHECK(cudaEventRecord(start[0]));
    launch();
    CUDA_CHECK(cudaEventRecord(stop[0]));
    CUDA_CHECK(cudaEventSynchronize(stop[0]));
    CUDA_CHECK_LAUNCH();
    float first;
    CUDA_CHECK(cudaEventElapsedTime(&first, start[0], stop[0]));
    int reps = first > 0 ? (int)(300.0 / first) : MAX_REPS;
    reps = reps < 5 ? 5 : reps > MAX_REPS ? MAX_REPS : reps;
    for (int r = 0; r < reps; r++) {
        flush_l2(flush, flush_bytes, r);
        CUDA_CHECK(cudaEventRecord(start[r]));
        launch();
        CUDA_CHECK(cudaEventRecord(stop[r]));
    }
    CUDA_CHECK(cudaEventSynchronize(stop[reps - 1]));
    CUDA_CHECK_LAUNCH();
    double ms[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        float t;
        CUDA_CHECK(cudaEventElapsedTime(&t, start[r], stop[r]));
        ms[r] = t;
    }
    return median_of(ms, reps);
}

// A plain copy kernel, 16 bytes a thread per step, grid-stride.
__global__ static void copy_kernel(float4 *dst, const float4 *src, size_t n4) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        dst[i] = src[i];
    }
}

// The device's measured memory bandwidth in GB/s (bytes read + bytes written per second):
// the better of a device-to-device cudaMemcpy and the copy kernel, on 1 GiB (20 times the
// L2), median time. Prints both once.
static double measured_bandwidth_gbs(void) {
    static double best = 0.0;
    if (best > 0.0) { return best; }
    const size_t bytes = (size_t)1 << 30;
    float *a = device_alloc(bytes / 4), *b = device_alloc(bytes / 4);
    CUDA_CHECK(cudaMemset(a, 0, bytes));
    CUDA_CHECK(cudaMemset(b, 0, bytes));
    int dev, sms;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    double ms_memcpy = time_median_ms([&] { CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); });
    double ms_kernel = time_median_ms([&] { LAUNCH(copy_kernel, sms * 8, 512, 0, (float4 *)b, (const float4 *)a, bytes / 16); });
    double gbs_memcpy = 2.0 * bytes / ms_memcpy / 1e6, gbs_kernel = 2.0 * bytes / ms_kernel / 1e6;
    best = gbs_memcpy > gbs_kernel ? gbs_memcpy : gbs_kernel;
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    printf("device: %s, %d SMs, L2 %d MB; memory bandwidth (read + write, 1 GiB copy): "
           "cudaMemcpy %.0f GB/s, copy kernel %.0f GB/s -> %.0f GB/s is 100%%\n",
           prop.name, sms, prop.l2CacheSize >> 20, gbs_memcpy, gbs_kernel, best);
    CUDA_CHECK(cudaFree(a));
    CUDA_CHECK(cudaFree(b));
    return best;
}

#else  // emulated: nothing is timed; launch() still runs twice more, as a timing would run it

template <typename F>
static double time_median_ms(F launch) {
    launch();
    launch();
    return NAN;
}

static double measured_bandwidth_gbs(void) {
    static int printed = 0;
    if (!printed) { printf("device: CPU emulation (emu.h): results checked, nothing timed\n"); printed = 1; }
    return NAN;
}
#endif

// Parses the optional version argument: 0 (all) when absent; exits 2 with usage when bad.
static int parse_version(int argc, char **argv, int num_versions, const char *usage) {
    if (argc > 2) {
        fprintf(stderr, "error: too many arguments\n%s", usage);
        exit(2);
    }
    if (argc < 2) { return 0; }
    char *end;
    long v = strtol(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || v < 1 || v > num_versions) {
        fprintf(stderr, "error: version '%s': must be a number from 1 to %d\n%s", argv[1], num_versions, usage);
        exit(2);
    }
    return (int)v;
}
