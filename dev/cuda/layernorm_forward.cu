/*
LayerNorm forward on the GPU: out (N, C) = (inp - mean) * rstd * weight + bias per row,
with mean (N) and rstd (N) kept for the backward pass; N = B * T rows, eps = 1e-5.
The CPU reference is llmc/layernorm.h (two passes: mean, then the variance of x - mean).

  ./layernorm_forward [VERSION]

Versions:
  1  one thread per row, three loops over the row (mean, variance, output): the rows of a
     warp are C floats apart, so no load is coalesced
  2  three kernels: mean and rstd, one block per row, each with a shared-memory tree
     reduction, then an elementwise normalize over all N * C
  3  one warp per row, lane-strided (coalesced) loads, sums by warp shuffles, one kernel;
     the row is read from memory once, the later passes hit L1
  4  one block per row, 128-bit loads, the row kept in registers (a float4 per thread),
     block reduction by shuffles and shared memory
  5  one warp per row, 128-bit loads, the row kept in registers (C / 128 float4 per lane),
     warp-only reductions: no shared memory and no barrier
  6  as 5, with streaming (evict-first) loads of inp and stores of out, launch bounds (8
     blocks of 4 warps an SM up to C = 768), and a grid of only resident blocks whose warps
     loop over the rows; rows a warp at a time as a parameter (1: 2 and 4 measured slower)

Each version is checked against version 1 and the CPU reference, then timed: the median
over many runs of CUDA events, each after an L2 flush (common.h). Then a plain copy of
inp to out (the same 2 N C floats) is timed the same way: the floor for that size. GB/s counts the bytes a
call must move (inp read, out written, mean/rstd written, weight and bias read) and is
compared with the device's copy bandwidth measured at start.
*/
#include "common.h"

#define EPS 1e-5f
enum { NUM_VERSIONS = 6 };

// The variance's divisor; the mutant build (make mutants) divides by C + 1, a 1/(2C)
// relative error in rstd that the check must catch.
#ifdef MUTANT
#define VAR_DIVISOR(C) ((float)(C) + 1.0f)
#else
#define VAR_DIVISOR(C) ((float)(C))
#endif

// ---- 1: one thread per row

__global__ void layernorm_forward_kernel1(float *out, float *mean, float *rstd, const float *inp,
                                          const float *weight, const float *bias, int N, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) { return; }
    const float *x = inp + (size_t)i * C;
    float m = 0.0f;
    for (int c = 0; c < C; c++) { m += x[c]; }
    m /= C;
    float v = 0.0f;
    for (int c = 0; c < C; c++) { float d = x[c] - m; v += d * d; }
    v /= C;
    float s = 1.0f / sqrtf(v + EPS);
    float *o = out + (size_t)i * C;
    for (int c = 0; c < C; c++) { o[c] = (x[c] - m) * s * weight[c] + bias[c]; }
    mean[i] = m;
    rstd[i] = s;
}

static void layernorm_forward1(float *out, float *mean, float *rstd, const float *inp,
                               const float *weight, const float *bias, int N, int C) {
    LAUNCH(layernorm_forward_kernel1, (N + 255) / 256, 256, 0, out, mean, rstd, inp, weight, bias, N, C);
}

// ---- 2: mean, rstd, normalize as three kernels; shared-memory tree reductions

enum { TREE_THREADS = 256 };  // a power of two, for the tree

// The sum of v over the block (TREE_THREADS threads) by halving in shared memory; all get it.
__device__ float block_tree_sum(float v, float *shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int stride = TREE_THREADS / 2; stride > 0; stride /= 2) {
        if ((int)threadIdx.x < stride) { shared[threadIdx.x] += shared[threadIdx.x + stride]; }
        __syncthreads();
    }
    float sum = shared[0];
    __syncthreads();  // shared is reused by the caller's next reduction
    return sum;
}

__global__ void mean_kernel2(float *mean, const float *inp, int C) {
    __shared__ float shared[TREE_THREADS];
    const float *x = inp + (size_t)blockIdx.x * C;
    float sum = 0.0f;
    for (int c = threadIdx.x; c < C; c += TREE_THREADS) { sum += x[c]; }
    sum = block_tree_sum(sum, shared);
    if (threadIdx.x == 0) { mean[blockIdx.x] = sum / C; }
}

__global__ void rstd_kernel2(float *rstd, const float *mean, const float *inp, int C) {
    __shared__ float shared[TREE_THREADS];
    const float *x = inp + (size_t)blockIdx.x * C;
    const float m = mean[blockIdx.x];
    float sum = 0.0f;
    for (int c = threadIdx.x; c < C; c += TREE_THREADS) { float d = x[c] - m; sum += d * d; }
    sum = block_tree_sum(sum, shared);
    if (threadIdx.x == 0) { rstd[blockIdx.x] = 1.0f / sqrtf(sum / C + EPS); }
}

__global__ void normalize_kernel2(float *out, const float *inp, const float *mean, const float *rstd,
                                  const float *weight, const float *bias, int N, int C) {
    size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * C) { return; }
    int i = (int)(idx / C), c = (int)(idx % C);
    out[idx] = (inp[idx] - mean[i]) * rstd[i] * weight[c] + bias[c];
}

static void layernorm_forward2(float *out, float *mean, float *rstd, const float *inp,
                               const float *weight, const float *bias, int N, int C) {
    LAUNCH(mean_kernel2, N, TREE_THREADS, 0, mean, inp, C);
    LAUNCH(rstd_kernel2, N, TREE_THREADS, 0, rstd, mean, inp, C);
    size_t total = (size_t)N * C;
    LAUNCH(normalize_kernel2, (unsigned)((total + 255) / 256), 256, 0, out, inp, mean, rstd, weight, bias, N, C);
}

// ---- 3: one warp per row, shuffles

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset /= 2) { v += __shfl_xor_sync(0xffffffffu, v, offset); }
    return v;  // every lane holds the sum (butterfly)
}

__global__ void layernorm_forward_kernel3(float *out, float *mean, float *rstd, const float *inp,
                                          const float *weight, const float *bias, int N, int C) {
    const int lane = threadIdx.x % 32;
    const int i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (i >= N) { return; }  // whole warps leave together
    const float *x = inp + (size_t)i * C;
    float sum = 0.0f;
    for (int c = lane; c < C; c += 32) { sum += x[c]; }
    const float m = warp_sum(sum) / C;
    sum = 0.0f;
    for (int c = lane; c < C; c += 32) { float d = x[c] - m; sum += d * d; }
    const float s = 1.0f / sqrtf(warp_sum(sum) / VAR_DIVISOR(C) + EPS);
    float *o = out + (size_t)i * C;
    for (int c = lane; c < C; c += 32) { o[c] = (x[c] - m) * s * weight[c] + bias[c]; }
    if (lane == 0) { mean[i] = m; rstd[i] = s; }
}

static void layernorm_forward3(float *out, float *mean, float *rstd, const float *inp,
                               const float *weight, const float *bias, int N, int C) {
    const int warps = 8;  // rows per block
    LAUNCH(layernorm_forward_kernel3, (N + warps - 1) / warps, warps * 32, 0, out, mean, rstd, inp, weight, bias, N, C);
}

// ---- helpers for 4 and 5: four consecutive floats of a row at channel c (a multiple of 4)
// into v; 128-bit when the rows are whole float4s (C % 4 == 0, so every row is 16-byte
// aligned), else one float at a time. Channels at or past C read as 0 and are not written.

__device__ __forceinline__ void load4(float *v, const float *row, int c, int C, bool vec) {
    if (vec) {
        float4 f = c < C ? *reinterpret_cast<const float4 *>(row + c) : make_float4(0.f, 0.f, 0.f, 0.f);
        v[0] = f.x; v[1] = f.y; v[2] = f.z; v[3] = f.w;
    } else {
        #pragma unroll
        for (int j = 0; j < 4; j++) { v[j] = c + j < C ? row[c + j] : 0.0f; }
    }
}

__device__ __forceinline__ void store4(float *row, const float *v, int c, int C, bool vec) {
    if (vec) {
        if (c < C) { *reinterpret_cast<float4 *>(row + c) = make_float4(v[0], v[1], v[2], v[3]); }
    } else {
        #pragma unroll
        for (int j = 0; j < 4; j++) { if (c + j < C) { row[c + j] = v[j]; } }
    }
}

// One row held as K float4 per thread, thread t holding channels 4 (t + k P) for k < K
// (P threads per row): its sum, and its sum of squares about m (masked past C).
template <int K>
__device__ __forceinline__ float row_part_sum(const float *x) {
    float sum = 0.0f;
    #pragma unroll
    for (int k = 0; k < 4 * K; k++) { sum += x[k]; }
    return sum;
}

template <int K>
__device__ __forceinline__ float row_part_sq(const float *x, float m, int c0, int stride, int C) {
    float sum = 0.0f;
    #pragma unroll
    for (int k = 0; k < K; k++) {
        #pragma unroll
        for (int j = 0; j < 4; j++) {
            float d = c0 + k * stride + j < C ? x[4 * k + j] - m : 0.0f;
            sum += d * d;
        }
    }
    return sum;
}

// out = (x - m) * s * weight + bias for the thread's K float4.
template <int K>
__device__ __forceinline__ void row_part_apply(float *o, const float *x, float m, float s, const float *weight,
                                               const float *bias, int c0, int stride, int C, bool vec) {
    #pragma unroll
    for (int k = 0; k < K; k++) {
        const int c = c0 + k * stride;
        float w[4], b[4], y[4];
        load4(w, weight, c, C, vec);
        load4(b, bias, c, C, vec);
        #pragma unroll
        for (int j = 0; j < 4; j++) { y[j] = (x[4 * k + j] - m) * s * w[j] + b[j]; }
        store4(o, y, c, C, vec);
    }
}

// ---- 4: one block per row, row in registers

// The sum of v over the block (blockDim.x a multiple of 32, at most 1024); all threads get it.
__device__ float block_sum(float v) {
    __shared__ float warp_sums[32];
    v = warp_sum(v);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    if (lane == 0) { warp_sums[warp] = v; }
    __syncthreads();
    v = lane < warps ? warp_sums[lane] : 0.0f;
    v = warp_sum(v);
    __syncthreads();  // warp_sums is reused by the next call
    return v;
}

template <int K>
__global__ void layernorm_forward_kernel4(float *out, float *mean, float *rstd, const float *inp,
                                          const float *weight, const float *bias, int N, int C) {
    const int i = blockIdx.x;  // the grid is N blocks
    (void)N;
    const bool vec = C % 4 == 0;
    const int c0 = 4 * threadIdx.x, stride = 4 * blockDim.x;
    const float *row = inp + (size_t)i * C;
    float x[4 * K];
    #pragma unroll
    for (int k = 0; k < K; k++) { load4(x + 4 * k, row, c0 + k * stride, C, vec); }
    const float m = block_sum(row_part_sum<K>(x)) / C;
    const float v = block_sum(row_part_sq<K>(x, m, c0, stride, C)) / VAR_DIVISOR(C);
    const float s = 1.0f / sqrtf(v + EPS);
    row_part_apply<K>(out + (size_t)i * C, x, m, s, weight, bias, c0, stride, C, vec);
    if (threadIdx.x == 0) { mean[i] = m; rstd[i] = s; }
}

static void layernorm_forward4(float *out, float *mean, float *rstd, const float *inp,
                               const float *weight, const float *bias, int N, int C) {
    const int C4 = (C + 3) / 4;                   // float4 per row
    const int K = (C4 + 1023) / 1024;             // float4 per thread, at most 1024 threads
    const int threads = ((C4 + K - 1) / K + 31) / 32 * 32;
    switch (K) {
        case 1: LAUNCH(layernorm_forward_kernel4<1>, N, threads, 0, out, mean, rstd, inp, weight, bias, N, C); break;
        case 2: LAUNCH(layernorm_forward_kernel4<2>, N, threads, 0, out, mean, rstd, inp, weight, bias, N, C); break;
        case 3: LAUNCH(layernorm_forward_kernel4<3>, N, threads, 0, out, mean, rstd, inp, weight, bias, N, C); break;
        case 4: LAUNCH(layernorm_forward_kernel4<4>, N, threads, 0, out, mean, rstd, inp, weight, bias, N, C); break;
        default: fprintf(stderr, "error: version 4 handles C up to 16384, not %d\n", C); exit(1);
    }
}

// ---- 5: one warp per row, row in registers

template <int K>
__global__ void layernorm_forward_kernel5(float *out, float *mean, float *rstd, const float *inp,
                                          const float *weight, const float *bias, int N, int C) {
    const int lane = threadIdx.x % 32;
    const int i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (i >= N) { return; }
    const bool vec = C % 4 == 0;
    const int c0 = 4 * lane, stride = 128;
    const float *row = inp + (size_t)i * C;
    float x[4 * K];
    #pragma unroll
    for (int k = 0; k < K; k++) { load4(x + 4 * k, row, c0 + k * stride, C, vec); }
    const float m = warp_sum(row_part_sum<K>(x)) / C;
    const float v = warp_sum(row_part_sq<K>(x, m, c0, stride, C)) / VAR_DIVISOR(C);
    const float s = 1.0f / sqrtf(v + EPS);
    row_part_apply<K>(out + (size_t)i * C, x, m, s, weight, bias, c0, stride, C, vec);
    if (lane == 0) { mean[i] = m; rstd[i] = s; }
}

static void layernorm_forward5(float *out, float *mean, float *rstd, const float *inp,
                               const float *weight, const float *bias, int N, int C) {
    const int K = ((C + 3) / 4 + 31) / 32;  // float4 per lane
    const int warps = 4;                    // rows per block
    const int grid = (N + warps - 1) / warps, threads = 32 * warps;
    // K rounded up to one of the compiled sizes (the extra float4 are masked)
#define CASE5(k) if (K <= k) { LAUNCH(layernorm_forward_kernel5<k>, grid, threads, 0, out, mean, rstd, inp, weight, bias, N, C); return; }
    CASE5(1) CASE5(2) CASE5(3) CASE5(4) CASE5(6) CASE5(8) CASE5(10) CASE5(13) CASE5(16)
#undef CASE5
    fprintf(stderr, "error: version 5 handles C up to 2048, not %d\n", C);
    exit(1);
}

// ---- 6: as 5, with streaming cache hints, launch bounds and a grid of resident blocks
// that loops over the rows; R rows a warp (every load of the R rows issued before any
// reduction) is a parameter, ROWS6 = 1 because 2 and 4 measured slower (README)

// Streaming loads and stores of a row (evict-first: inp is read once and out is not read
// again by this kernel, so neither should push weight and bias out of L2); as load4/store4.
__device__ __forceinline__ void load4_stream(float *v, const float *row, int c, int C, bool vec) {
    if (vec) {
        float4 f = c < C ? __ldcs(reinterpret_cast<const float4 *>(row + c)) : make_float4(0.f, 0.f, 0.f, 0.f);
        v[0] = f.x; v[1] = f.y; v[2] = f.z; v[3] = f.w;
    } else {
        #pragma unroll
        for (int j = 0; j < 4; j++) { v[j] = c + j < C ? __ldcs(row + c + j) : 0.0f; }
    }
}

__device__ __forceinline__ void store4_stream(float *row, const float *v, int c, int C, bool vec) {
    if (vec) {
        if (c < C) { __stcs(reinterpret_cast<float4 *>(row + c), make_float4(v[0], v[1], v[2], v[3])); }
    } else {
        #pragma unroll
        for (int j = 0; j < 4; j++) { if (c + j < C) { __stcs(row + c + j, v[j]); } }
    }
}

enum { WARPS6 = 4, ROWS6 = 1 };  // warps a block, rows a warp at a time

// Each warp takes R consecutive rows at a time (rows i0 .. i0 + R - 1), lane t holding
// channels 4 (t + 32 k), k < K, of each; the warps stride over the row groups, so a grid
// of only resident blocks covers any N. Rows past N read as 0 and are not written; the
// condition is the same for the whole warp, so the shuffles see every lane.
// MIN_BLOCKS (launch bounds): blocks an SM must hold, which caps the registers a thread.
template <int K, int R, int MIN_BLOCKS>
__global__ void __launch_bounds__(32 * WARPS6, MIN_BLOCKS) layernorm_forward_kernel6(
        float *out, float *mean, float *rstd, const float *inp, const float *weight, const float *bias, int N, int C) {
    const int lane = threadIdx.x % 32;
    const int warps = gridDim.x * WARPS6;
    const bool vec = C % 4 == 0;
    const int c0 = 4 * lane, stride = 128;
    for (int i0 = R * (blockIdx.x * WARPS6 + threadIdx.x / 32); i0 < N; i0 += R * warps) {
        float x[R][4 * K];
        #pragma unroll
        for (int r = 0; r < R; r++) {  // all R K float4 loads in flight at once
            const float *row = inp + (size_t)(i0 + r) * C;
            #pragma unroll
            for (int k = 0; k < K; k++) {
                if (i0 + r < N) { load4_stream(x[r] + 4 * k, row, c0 + k * stride, C, vec); }
                else { x[r][4 * k] = x[r][4 * k + 1] = x[r][4 * k + 2] = x[r][4 * k + 3] = 0.0f; }
            }
        }
        float m[R], s[R];
        #pragma unroll
        for (int r = 0; r < R; r++) { m[r] = warp_sum(row_part_sum<K>(x[r])) / C; }
        #pragma unroll
        for (int r = 0; r < R; r++) {
            const float v = warp_sum(row_part_sq<K>(x[r], m[r], c0, stride, C)) / VAR_DIVISOR(C);
            s[r] = 1.0f / sqrtf(v + EPS);
        }
        #pragma unroll
        for (int r = 0; r < R; r++) {
            if (i0 + r >= N) { break; }
            float *o = out + (size_t)(i0 + r) * C;
            #pragma unroll
            for (int k = 0; k < K; k++) {
                const int c = c0 + k * stride;
                float w[4], b[4], y[4];
                load4(w, weight, c, C, vec);
                load4(b, bias, c, C, vec);
                #pragma unroll
                for (int j = 0; j < 4; j++) { y[j] = (x[r][4 * k + j] - m[r]) * s[r] * w[j] + b[j]; }
                store4_stream(o, y, c, C, vec);
            }
        }
        // lane r stores row i0 + r's mean and rstd: one store instruction each for the R rows
        float my_m = m[0], my_s = s[0];
        #pragma unroll
        for (int r = 1; r < R; r++) { if (lane == r) { my_m = m[r]; my_s = s[r]; } }
        if (lane < R && i0 + lane < N) { mean[i0 + lane] = my_m; rstd[i0 + lane] = my_s; }
    }
}

template <int K, int R, int MIN_BLOCKS>
static void launch6(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                    const float *bias, int N, int C) {
    // a block for every WARPS6 row groups, but no more blocks than fit on the device at once
    static int resident = 0;
    if (resident == 0) {
        int dev, sms, per_sm;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, layernorm_forward_kernel6<K, R, MIN_BLOCKS>, 32 * WARPS6, 0));
        resident = sms * (per_sm > 0 ? per_sm : 1);
    }
    const int groups = (N + R - 1) / R, needed = (groups + WARPS6 - 1) / WARPS6;
    LAUNCH((layernorm_forward_kernel6<K, R, MIN_BLOCKS>), needed < resident ? needed : resident, 32 * WARPS6, 0,
           out, mean, rstd, inp, weight, bias, N, C);
}

static void layernorm_forward6(float *out, float *mean, float *rstd, const float *inp,
                               const float *weight, const float *bias, int N, int C) {
    const int K = ((C + 3) / 4 + 31) / 32;  // float4 per lane per row
    // Up to C = 768 (K <= 6), 8 blocks an SM: 63 registers a thread at K = 6 (ptxas, sm_90),
    // 32 warps an SM, about 2 rows a warp at N = 8192; past it the registers are left free
    // (168 at K = 13: 3 blocks an SM; measured 28% slower than version 5 there, README).
#define CASE6(k) if (K <= k) { launch6<k, ROWS6, (k <= 6 ? 8 : 1)>(out, mean, rstd, inp, weight, bias, N, C); return; }
    CASE6(1) CASE6(2) CASE6(3) CASE6(4) CASE6(6) CASE6(8) CASE6(10) CASE6(13) CASE6(16)
#undef CASE6
    fprintf(stderr, "error: version 6 handles C up to 2048, not %d\n", C);
    exit(1);
}

// ---- the harness

typedef void (*ForwardFn)(float *, float *, float *, const float *, const float *, const float *, int, int);
static const ForwardFn VERSIONS[NUM_VERSIONS + 1] = {
    NULL, layernorm_forward1, layernorm_forward2, layernorm_forward3, layernorm_forward4, layernorm_forward5,
    layernorm_forward6,
};

// Tolerance: every version computes the same fp32 formulas as llmc/layernorm.h and differs
// from it only in the order of the two sums over a row (C <= 1600 terms of size <= 1).
// Reordering a sum of C such terms changes it by about sqrt(C) * 2^-24 * |partial sums|:
// up to ~1e-6 of max |mean| or |out| seen (the emulation, emu.h); 1e-5 leaves a margin of
// 10 over that and is still 30 times tighter than the mutant's error (the variance divided
// by C + 1: 1 / (2 C) ~ 3e-4 of out at C = 1600). Relative to the largest |reference|.
static const double TOL = 1e-5;

static const char *USAGE =
    "usage: layernorm_forward [VERSION]\n"
    "  VERSION 1-6: run, check (against version 1 and the CPU reference) and time that\n"
    "  version on every shape; none: every version, then a table\n";

int main(int argc, char **argv) {
    const int only = parse_version(argc, argv, NUM_VERSIONS, USAGE);
    const double bandwidth = measured_bandwidth_gbs();
    double ms[NUM_SHAPES][NUM_VERSIONS + 1];
    int failed = 0;
    for (int si = 0; si < NUM_SHAPES; si++) {
        const Shape sh = SHAPES[si];
        const int N = sh.B * sh.T, C = sh.C;
        const size_t NC = (size_t)N * C;
        float *inp = host_random(NC, 1), *weight = host_random(C, 2), *bias = host_random(C, 3);
        float *cpu_out = host_alloc(NC), *cpu_mean = host_alloc(N), *cpu_rstd = host_alloc(N);
        cpu_layernorm_forward(cpu_out, cpu_mean, cpu_rstd, inp, weight, bias, N, C);
        float *d_inp = device_copy(inp, NC), *d_weight = device_copy(weight, C), *d_bias = device_copy(bias, C);
        float *d_out = device_alloc(NC), *d_mean = device_alloc(N), *d_rstd = device_alloc(N);
        float *ref_out = host_alloc(NC), *ref_mean = host_alloc(N), *ref_rstd = host_alloc(N);
        float *out = host_alloc(NC), *mean = host_alloc(N), *rstd = host_alloc(N);
        // bytes a call must move: inp read, out written, mean and rstd written, weight and bias read
        const double bytes = 4.0 * (2.0 * NC + 2.0 * N + 2.0 * C);
        printf("B=%d T=%d C=%d (%.1f MB moved a call)\n", sh.B, sh.T, C, bytes / 1e6);
        for (int v = 1; v <= NUM_VERSIONS; v++) {
            ms[si][v] = NAN;
            if (only != 0 && v != only && v != 1) { continue; }
            // NaN (all bits set) in the outputs first: a value a kernel fails to write shows
            CUDA_CHECK(cudaMemset(d_out, 0xff, NC * sizeof(float)));
            CUDA_CHECK(cudaMemset(d_mean, 0xff, N * sizeof(float)));
            CUDA_CHECK(cudaMemset(d_rstd, 0xff, N * sizeof(float)));
            VERSIONS[v](d_out, d_mean, d_rstd, d_inp, d_weight, d_bias, N, C);
            CUDA_CHECK_LAUNCH();
            CUDA_CHECK(cudaDeviceSynchronize());
            float *o = v == 1 ? ref_out : out, *m = v == 1 ? ref_mean : mean, *r = v == 1 ? ref_rstd : rstd;
            to_host(o, d_out, NC);
            to_host(m, d_mean, N);
            to_host(r, d_rstd, N);
            double err_cpu = 0.0, err_v1 = 0.0, e;
            e = check_close("out vs cpu", o, cpu_out, NC, TOL); err_cpu = fmax(err_cpu, e);
            e = check_close("mean vs cpu", m, cpu_mean, N, TOL); err_cpu = fmax(err_cpu, e);
            e = check_close("rstd vs cpu", r, cpu_rstd, N, TOL); err_cpu = fmax(err_cpu, e);
            if (v != 1) {
                e = check_close("out vs version 1", o, ref_out, NC, TOL); err_v1 = fmax(err_v1, e);
                e = check_close("mean vs version 1", m, ref_mean, N, TOL); err_v1 = fmax(err_v1, e);
                e = check_close("rstd vs version 1", r, ref_rstd, N, TOL); err_v1 = fmax(err_v1, e);
            }
            const int ok = err_cpu <= TOL && err_v1 <= TOL;
            failed |= !ok;
            if (only != 0 && v != only) { continue; }  // version 1 only as the reference
            ms[si][v] = time_median_ms([&] { VERSIONS[v](d_out, d_mean, d_rstd, d_inp, d_weight, d_bias, N, C); });
            const double gbs = bytes / ms[si][v] / 1e6;
            if (isnan(ms[si][v])) {  // emulated
                printf("  version %d: checked (emulation: not timed)  ", v);
            } else {
                printf("  version %d: %9.4f ms %7.0f GB/s %5.1f%% of bandwidth  ", v, ms[si][v], gbs, 100.0 * gbs / bandwidth);
            }
            printf("rel err vs cpu %.1e, vs v1 %.1e  %s\n", err_cpu, err_v1, ok ? "OK" : "FAIL");
        }
#ifndef CUDA_EMU
        if (NC % 4 == 0 && NC >= 4096) {
            // the floor for this size: a plain copy of inp to out (the same 2 N C floats), timed
            // the same way; the launch and the ramp up and down are in it as in the versions'
            int dev, sms;
            CUDA_CHECK(cudaGetDevice(&dev));
            CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
            const double ms_copy = time_median_ms([&] { LAUNCH(copy_kernel, sms * 8, 512, 0, (float4 *)d_out, (const float4 *)d_inp, NC / 4); });
            const double gbs = 8.0 * NC / ms_copy / 1e6;
            printf("  a copy of inp to out: %.4f ms %7.0f GB/s %5.1f%% of bandwidth (the floor at this size)\n", ms_copy, gbs, 100.0 * gbs / bandwidth);
        }
#endif
        free(inp); free(weight); free(bias); free(cpu_out); free(cpu_mean); free(cpu_rstd);
        free(ref_out); free(ref_mean); free(ref_rstd); free(out); free(mean); free(rstd);
        CUDA_CHECK(cudaFree(d_inp)); CUDA_CHECK(cudaFree(d_weight)); CUDA_CHECK(cudaFree(d_bias));
        CUDA_CHECK(cudaFree(d_out)); CUDA_CHECK(cudaFree(d_mean)); CUDA_CHECK(cudaFree(d_rstd));
    }
    if (only == 0 && !isnan(bandwidth)) {
        printf("\ntime in us (share of the measured %.0f GB/s)\n%-18s", bandwidth, "shape");
        for (int v = 1; v <= NUM_VERSIONS; v++) { printf("  version %d      ", v); }
        printf("\n");
        for (int si = 0; si < NUM_SHAPES; si++) {
            const Shape sh = SHAPES[si];
            const double N = (double)sh.B * sh.T, bytes = 4.0 * (2.0 * N * sh.C + 2.0 * N + 2.0 * sh.C);
            char name[32];
            snprintf(name, sizeof name, "B%d T%d C%d", sh.B, sh.T, sh.C);
            printf("%-18s", name);
            for (int v = 1; v <= NUM_VERSIONS; v++) {
                printf("  %8.1f (%3.0f%%)", 1000.0 * ms[si][v], 100.0 * bytes / ms[si][v] / 1e6 / bandwidth);
            }
            printf("\n");
        }
    }
    printf(failed ? "FAILED: a version does not match\n" : "all versions match version 1 and the CPU reference\n");
    return failed ? 1 : 0;
}
