/*
A CPU emulation of the few CUDA features the dev/cuda kernels use, so that the kernels'
logic (indexing, masking of tails, barriers, warp shuffles, the partials and the
last-block-done reduction) runs and is checked on a machine without a GPU, in CI
(`make emu`, scripts/tests/test_cuda.sh). It says nothing about speed, and the real compiler
and hardware are not involved: the GPU run is the real test; this one catches logic bugs
before spending GPU time.

Each block runs on its own: every thread of the block is a fiber (ucontext) on one OS
thread; a fiber runs until it reaches a barrier (__syncthreads, or the warp-level
__syncwarp and __shfl_xor_sync, which wait for the warp's lanes only) or ends, and the
scheduler releases a barrier once every live thread it waits for is there, and runs the
threads in thread order (a missing barrier between a write and another thread's read
usually shows as a wrong result; CUDA_EMU_REVERSE=1 runs them in reverse order, to expose
a dependence on the order either way). Blocks run one after another, so atomics are plain
adds and __shared__ variables are statics. Device memory is host memory; the device has
CUDA_EMU_SMS multiprocessors (default 4).
Mixing a warp barrier with a block barrier, or a barrier some live threads never reach,
is reported as a deadlock.
*/
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <functional>

// The emulated multiprocessor count: CUDA_EMU_SMS, default 4 (the backward's grid size,
// and so its rows per warp and its number of partials, follow it).
static int emu_sms() {
    static int sms = 0;
    if (sms == 0) {
        const char *env = getenv("CUDA_EMU_SMS");
        sms = env != NULL && atoi(env) > 0 ? atoi(env) : 4;
    }
    return sms;
}

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define DYNAMIC_SHARED(type, name) type *name = (type *)emu_dynamic_shared
#define LAUNCH(kernel, grid, block, smem, ...) \
    emu_launch((unsigned)(grid), (unsigned)(block), (size_t)(smem), [=] { kernel(__VA_ARGS__); })

struct dim3 { unsigned x, y, z; };
struct alignas(16) float4 { float x, y, z, w; };
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

// The running thread's coordinates, set by the scheduler before it resumes a fiber.
static dim3 threadIdx, blockIdx, blockDim, gridDim;
static unsigned char *emu_dynamic_shared;

enum { EMU_MAX_THREADS = 1024, EMU_STACK = 64 << 10 };
enum EmuState { EMU_RUNNABLE, EMU_AT_WARP, EMU_AT_BLOCK, EMU_DONE };

static struct {
    ucontext_t scheduler, fiber[EMU_MAX_THREADS];
    unsigned char *stacks;
    EmuState state[EMU_MAX_THREADS];
    int current, threads;
    float lane_value[EMU_MAX_THREADS];
    const std::function<void()> *body;
} emu;

static void emu_fail(const char *what) {
    fprintf(stderr, "error: emulated kernel: %s (block %u, thread %d)\n", what, blockIdx.x, emu.current);
    exit(1);
}

static void emu_wait(EmuState at) {
    emu.state[emu.current] = at;
    swapcontext(&emu.fiber[emu.current], &emu.scheduler);
}

static inline void __syncthreads() { emu_wait(EMU_AT_BLOCK); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
    if (mask != 0xffffffffu) { emu_fail("__syncwarp with a partial mask is not emulated"); }
    emu_wait(EMU_AT_WARP);
}
// Every live lane of the warp must take part (a full mask, as the kernels use).
static inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask) {
    const int me = emu.current, lane = me % 32, src = (me - lane) + (lane ^ lane_mask);
    emu.lane_value[me] = v;
    __syncwarp(mask);
    if (src >= emu.threads || emu.state[src] == EMU_DONE) { emu_fail("__shfl_xor_sync from an exited lane"); }
    const float got = emu.lane_value[src];
    __syncwarp(mask);  // no lane overwrites its value before every lane has read
    return got;
}
static inline void __threadfence() {}
static inline float atomicAdd(float *p, float v) { float old = *p; *p += v; return old; }
static inline unsigned atomicAdd(unsigned *p, unsigned v) { unsigned old = *p; *p += v; return old; }
static inline float4 __ldcg(const float4 *p) { return *p; }
// cache hints mean nothing here: plain loads and stores
static inline float4 __ldcs(const float4 *p) { return *p; }
static inline float __ldcs(const float *p) { return *p; }
static inline void __stcs(float4 *p, float4 v) { *p = v; }
static inline void __stcs(float *p, float v) { *p = v; }

static void emu_fiber_entry() {
    (*emu.body)();
    emu.state[emu.current] = EMU_DONE;
    swapcontext(&emu.fiber[emu.current], &emu.scheduler);
}

// Runs body as the kernel <<<grid, block, smem>>>: each block to completion, in order.
static void emu_launch(unsigned grid, unsigned block, size_t smem, const std::function<void()> &body) {
    if (block == 0 || block > EMU_MAX_THREADS || grid == 0) { emu_fail("bad launch configuration"); }
    if (emu.stacks == NULL) {
        emu.stacks = (unsigned char *)malloc((size_t)EMU_MAX_THREADS * EMU_STACK);
        if (emu.stacks == NULL) { emu_fail("out of memory for fiber stacks"); }
    }
    static const int reverse = getenv("CUDA_EMU_REVERSE") != NULL && strcmp(getenv("CUDA_EMU_REVERSE"), "1") == 0;
    unsigned char *shared = (unsigned char *)malloc(smem > 0 ? smem : 1);
    emu.body = &body;
    gridDim = dim3{grid, 1, 1};
    blockDim = dim3{block, 1, 1};
    emu.threads = (int)block;
    for (unsigned b = 0; b < grid; b++) {
        blockIdx = dim3{b, 1, 1};
        memset(shared, 0xff, smem > 0 ? smem : 1);  // NaN: uninitialized shared memory shows
        emu_dynamic_shared = shared;
        for (int t = 0; t < emu.threads; t++) {
            getcontext(&emu.fiber[t]);
            emu.fiber[t].uc_stack.ss_sp = emu.stacks + (size_t)t * EMU_STACK;
            emu.fiber[t].uc_stack.ss_size = EMU_STACK;
            emu.fiber[t].uc_link = NULL;
            makecontext(&emu.fiber[t], emu_fiber_entry, 0);
            emu.state[t] = EMU_RUNNABLE;
        }
        for (;;) {
            for (int i = 0; i < emu.threads; i++) {
                const int t = reverse ? emu.threads - 1 - i : i;
                if (emu.state[t] != EMU_RUNNABLE) { continue; }
                emu.current = t;
                threadIdx = dim3{(unsigned)t, 0, 0};
                swapcontext(&emu.scheduler, &emu.fiber[t]);
            }
            // every thread now waits at a barrier or is done: release what can go on
            int live = 0, at_block = 0, released = 0;
            for (int t = 0; t < emu.threads; t++) {
                live += emu.state[t] != EMU_DONE;
                at_block += emu.state[t] == EMU_AT_BLOCK;
            }
            if (live == 0) { break; }
            if (at_block == live) {
                for (int t = 0; t < emu.threads; t++) { if (emu.state[t] == EMU_AT_BLOCK) { emu.state[t] = EMU_RUNNABLE; } }
                continue;
            }
            for (int w0 = 0; w0 < emu.threads; w0 += 32) {
                int wl = 0, wa = 0;
                for (int t = w0; t < w0 + 32 && t < emu.threads; t++) {
                    wl += emu.state[t] != EMU_DONE;
                    wa += emu.state[t] == EMU_AT_WARP;
                }
                if (wl > 0 && wa == wl) {
                    for (int t = w0; t < w0 + 32 && t < emu.threads; t++) {
                        if (emu.state[t] == EMU_AT_WARP) { emu.state[t] = EMU_RUNNABLE; }
                    }
                    released++;
                }
            }
            if (released == 0) { emu.current = -1; emu_fail("deadlock: threads wait at different barriers"); }
        }
    }
    free(shared);
}

// ---- the runtime API, on host memory

typedef int cudaError_t;
enum { cudaSuccess = 0 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize };
struct cudaDeviceProp { char name[256]; int l2CacheSize; };

static inline const char *cudaGetErrorString(cudaError_t) { return "emulation error"; }
static inline cudaError_t cudaGetLastError() { return cudaSuccess; }
static inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
static inline cudaError_t cudaGetDevice(int *dev) { *dev = 0; return cudaSuccess; }
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
    snprintf(p->name, sizeof p->name, "CPU emulation (dev/cuda/emu.h)");
    p->l2CacheSize = 1 << 20;
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr, int) { *v = emu_sms(); return cudaSuccess; }
template <typename F>
static inline cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) { return cudaSuccess; }
template <typename F>
static inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, F, int, size_t) { *n = 1; return cudaSuccess; }
template <typename T>
static inline cudaError_t cudaMalloc(T **p, size_t bytes) {
    *p = (T *)aligned_alloc(256, (bytes + 255) / 256 * 256);
    return *p != NULL ? cudaSuccess : 2;
}
static inline cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }
static inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) { memcpy(d, s, n); return cudaSuccess; }
static inline cudaError_t cudaMemset(void *d, int v, size_t n) { memset(d, v, n); return cudaSuccess; }
