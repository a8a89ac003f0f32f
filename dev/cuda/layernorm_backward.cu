/*
LayerNorm backward on the GPU: with n = (x - mean) * rstd and g = dout * weight per row,
  dinp += rstd * (g - mean(g) - n * mean(g * n)),  dweight += sum over rows of dout * n,
  dbias += sum over rows of dout
(all three accumulate, as in the trainer). The CPU reference is llmc/layernorm.h.

  ./layernorm_backward [VERSION]

The question is how the N = B * T rows reduce into dweight and dbias (C each):
  1  one thread per row, atomicAdd of every row's terms into dweight and dbias: N-way
     contention on each address, and not deterministic (the order of the float adds
     depends on the scheduling; two runs can differ in the last bits)
  2  parallel over C: a warp per row for dinp, then a second kernel with one thread per
     channel looping over all N rows (coalesced across threads, no contention); it reads
     dout and inp twice and has only C threads for the reduction
  3  parallel over rows: a grid of resident blocks, a warp per row, 128-bit loads, the row
     in registers; each lane sums its channels' dweight/dbias over the warp's rows in
     registers (past C = 1024 in its warp's slice of shared memory: the registers would
     spill), the block adds its warps' sums in shared memory (in warp order) into one
     partial per block in a scratch buffer; a second kernel adds the partials in block order
  4  as 3, fused: the last block to finish (an atomic counter, after a memory fence) adds
     the partials, so there is one launch and no second kernel
Versions 2-4 are deterministic (fixed order of every sum, for a given GPU's SM count);
each is run twice and the bits compared.

Bytes a call must move: dout and inp read, dinp read and written (4 N C floats), mean and
rstd read, weight read, dweight and dbias read and written; the partials (a few hundred KB,
in L2) are not counted.
*/
#include "common.h"

enum { NUM_VERSIONS = 4 };

// The mutants (make mutants) break the fast versions subtly; the checks must catch them.
// 1: mean(g n) divided by C + 1 instead of C (dinp off by ~1/C of one term);
// 2: the reduction of the partials skips the last block's partial (dweight/dbias lose rows).
#if defined(MUTANT) && MUTANT == 1
#define GN_DIVISOR(C) ((float)(C) + 1.0f)
#else
#define GN_DIVISOR(C) ((float)(C))
#endif
#if defined(MUTANT) && MUTANT == 2
#define PARTIALS_SKIPPED 1
#else
#define PARTIALS_SKIPPED 0
#endif

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset /= 2) { v += __shfl_xor_sync(0xffffffffu, v, offset); }
    return v;  // every lane holds the sum (butterfly)
}

// ---- 1: one thread per row, atomics

__global__ void layernorm_backward_kernel1(float *dinp, float *dweight, float *dbias, const float *dout,
                                           const float *inp, const float *mean, const float *rstd,
                                           const float *weight, int N, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) { return; }
    const float *x = inp + (size_t)i * C, *d = dout + (size_t)i * C;
    float *dx = dinp + (size_t)i * C;
    const float m = mean[i], s = rstd[i];
    float g_sum = 0.0f, gn_sum = 0.0f;
    for (int c = 0; c < C; c++) {
        float n = (x[c] - m) * s, g = d[c] * weight[c];
        g_sum += g;
        gn_sum += g * n;
        atomicAdd(&dweight[c], d[c] * n);
        atomicAdd(&dbias[c], d[c]);
    }
    const float g_mean = g_sum / C, gn_mean = gn_sum / C;
    for (int c = 0; c < C; c++) {
        float n = (x[c] - m) * s, g = d[c] * weight[c];
        dx[c] += s * (g - g_mean - n * gn_mean);
    }
}

static void layernorm_backward1(float *dinp, float *dweight, float *dbias, float *scratch, const float *dout,
                                const float *inp, const float *mean, const float *rstd, const float *weight,
                                int N, int C) {
    (void)scratch;
    LAUNCH(layernorm_backward_kernel1, (N + 255) / 256, 256, 0, dinp, dweight, dbias, dout, inp, mean, rstd, weight, N, C);
}

// ---- 2: dinp by a warp per row; dweight and dbias by a thread per channel

__global__ void dinp_kernel2(float *dinp, const float *dout, const float *inp, const float *mean,
                             const float *rstd, const float *weight, int N, int C) {
    const int lane = threadIdx.x % 32;
    const int i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (i >= N) { return; }
    const float *x = inp + (size_t)i * C, *d = dout + (size_t)i * C;
    float *dx = dinp + (size_t)i * C;
    const float m = mean[i], s = rstd[i];
    float g_sum = 0.0f, gn_sum = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float n = (x[c] - m) * s, g = d[c] * weight[c];
        g_sum += g;
        gn_sum += g * n;
    }
    const float g_mean = warp_sum(g_sum) / C, gn_mean = warp_sum(gn_sum) / C;
    for (int c = lane; c < C; c += 32) {
        float n = (x[c] - m) * s, g = d[c] * weight[c];
        dx[c] += s * (g - g_mean - n * gn_mean);
    }
}

__global__ void dweight_dbias_kernel2(float *dweight, float *dbias, const float *dout, const float *inp,
                                      const float *mean, const float *rstd, int N, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) { return; }
    float dw = 0.0f, db = 0.0f;
    for (int i = 0; i < N; i++) {
        const size_t at = (size_t)i * C + c;
        const float d = dout[at];
        dw += d * (inp[at] - mean[i]) * rstd[i];
        db += d;
    }
    dweight[c] += dw;
    dbias[c] += db;
}

static void layernorm_backward2(float *dinp, float *dweight, float *dbias, float *scratch, const float *dout,
                                const float *inp, const float *mean, const float *rstd, const float *weight,
                                int N, int C) {
    (void)scratch;
    LAUNCH(dinp_kernel2, (N + 7) / 8, 256, 0, dinp, dout, inp, mean, rstd, weight, N, C);
    LAUNCH(dweight_dbias_kernel2, (C + 127) / 128, 128, 0, dweight, dbias, dout, inp, mean, rstd, N, C);
}

// ---- 3 and 4: per-block partials

// Four consecutive floats of a row at channel c (a multiple of 4) into v: 128-bit when rows
// are whole float4s (C % 4 == 0: every row 16-byte aligned), else one at a time; 0 past C.
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

// Per lane: the row (x and dout), 8 K floats, in registers; the lane's dweight and dbias sums
// (8 K more) in registers up to K = 8, past that in the warp's own slice of shared memory
// (the registers would spill). Threads per block: 512 leave 128 registers a thread, enough
// for K <= 4; 256 leave 255.
#define PARTIAL_THREADS(K) ((K) <= 4 ? 512 : 256)
#define SHARED_SUMS(K) ((K) > 8)
// Dynamic shared memory of the partials kernel: the block's partial (2 Cp floats), or one per warp.
static size_t partials_smem(int K, int C) {
    const size_t Cp = (C + 3) / 4 * 4;
    return (SHARED_SUMS(K) ? PARTIAL_THREADS(K) / 32 : 1) * 2 * Cp * sizeof(float);
}

// A partial is 2 Cp floats, Cp = C rounded up to 4: dweight's sums, then dbias's.
// The sum of the first G partials into dweight and dbias, in block order, by the threads
// t = 0, tcount, 2 tcount, ... of those taking part: each owns a float4 column.
__device__ void reduce_partials(float *dweight, float *dbias, const float *partials, int G, int C,
                                int t, int tcount) {
    const int Cp = (C + 3) / 4 * 4, columns = Cp / 2;  // float4 columns of a partial
    const float4 *p4 = reinterpret_cast<const float4 *>(partials);
    G -= PARTIALS_SKIPPED;
    for (int j = t; j < columns; j += tcount) {
        // four interleaved sums (blocks b = u mod 4), added in a fixed order at the end;
        // __ldcg: from L2, never a stale L1 line (other blocks wrote them)
        float4 a[4];
        #pragma unroll
        for (int u = 0; u < 4; u++) { a[u] = make_float4(0.f, 0.f, 0.f, 0.f); }
        int b = 0;
        #pragma unroll 2
        for (; b + 4 <= G; b += 4) {
            #pragma unroll
            for (int u = 0; u < 4; u++) {
                float4 v = __ldcg(p4 + (size_t)(b + u) * columns + j);
                a[u].x += v.x; a[u].y += v.y; a[u].z += v.z; a[u].w += v.w;
            }
        }
        for (; b < G; b++) {
            float4 v = __ldcg(p4 + (size_t)b * columns + j);
            a[0].x += v.x; a[0].y += v.y; a[0].z += v.z; a[0].w += v.w;
        }
        const float sum[4] = {(a[0].x + a[1].x) + (a[2].x + a[3].x), (a[0].y + a[1].y) + (a[2].y + a[3].y),
                              (a[0].z + a[1].z) + (a[2].z + a[3].z), (a[0].w + a[1].w) + (a[2].w + a[3].w)};
        #pragma unroll
        for (int k = 0; k < 4; k++) {
            const int e = 4 * j + k;
            if (e < Cp) {
                if (e < C) { dweight[e] += sum[k]; }
            } else if (e - Cp < C) {
                dbias[e - Cp] += sum[k];
            }
        }
    }
}

// The main pass of 3 and 4. Warp w of the grid takes rows w, w + W G, ...; lane l holds
// channels 4 (l + 32 k), k < K, of a row. FUSED (4): the last block done reduces the
// partials; counter is 0 before the call and after it.
template <int K, bool FUSED>
__global__ void __launch_bounds__(PARTIAL_THREADS(K))
    layernorm_backward_partials_kernel(float *dinp, float *dweight, float *dbias, float *partials,
                                       unsigned *counter, const float *dout, const float *inp, const float *mean,
                                       const float *rstd, const float *weight, int N, int C) {
    constexpr int THREADS = PARTIAL_THREADS(K), W = THREADS / 32;
    constexpr bool SHARED = SHARED_SUMS(K);
    constexpr int KR = SHARED ? 1 : K;  // float4 of sums held in registers
    DYNAMIC_SHARED(float, block_sums);  // 2 Cp: this block's partial; or 2 Cp per warp: its sums
    __shared__ bool is_last;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int Cp = (C + 3) / 4 * 4;
    const bool vec = C % 4 == 0;
    float dw[4 * KR], db[4 * KR];
    float *warp_sums = block_sums + (size_t)warp * 2 * Cp;
    #pragma unroll
    for (int k = 0; k < 4 * KR; k++) { dw[k] = 0.0f; db[k] = 0.0f; }
    if constexpr (SHARED) {
        for (int j = lane; j < 2 * Cp; j += 32) { warp_sums[j] = 0.0f; }
        __syncwarp();
    }

    for (int i = blockIdx.x * W + warp; i < N; i += gridDim.x * W) {
        const float *x = inp + (size_t)i * C, *d = dout + (size_t)i * C;
        float *dx = dinp + (size_t)i * C;
        float nv[4 * K], gv[4 * K];  // x then n; dout then g
        #pragma unroll
        for (int k = 0; k < K; k++) {
            load4(nv + 4 * k, x, 4 * (lane + 32 * k), C, vec);
            load4(gv + 4 * k, d, 4 * (lane + 32 * k), C, vec);
        }
        const float m = mean[i], s = rstd[i];
        float g_sum = 0.0f, gn_sum = 0.0f;
        #pragma unroll
        for (int k = 0; k < K; k++) {
            float w[4];
            load4(w, weight, 4 * (lane + 32 * k), C, vec);
            #pragma unroll
            for (int j = 0; j < 4; j++) {
                // past C: dout = 0, so g, dweight's and dbias's terms are all 0
                const float n = (nv[4 * k + j] - m) * s, dout_c = gv[4 * k + j], g = dout_c * w[j];
                g_sum += g;
                gn_sum += g * n;
                if constexpr (SHARED) {  // each lane owns its channels: no conflict, no barrier
                    const int c = 4 * (lane + 32 * k) + j;
                    if (c < Cp) { warp_sums[c] += dout_c * n; warp_sums[Cp + c] += dout_c; }
                } else {
                    dw[4 * k + j] += dout_c * n;
                    db[4 * k + j] += dout_c;
                }
                nv[4 * k + j] = n;
                gv[4 * k + j] = g;
            }
        }
        const float g_mean = warp_sum(g_sum) / C, gn_mean = warp_sum(gn_sum) / GN_DIVISOR(C);
        #pragma unroll
        for (int k = 0; k < K; k++) {
            float v[4];
            load4(v, dx, 4 * (lane + 32 * k), C, vec);
            #pragma unroll
            for (int j = 0; j < 4; j++) { v[j] += s * (gv[4 * k + j] - g_mean - nv[4 * k + j] * gn_mean); }
            store4(dx, v, 4 * (lane + 32 * k), C, vec);
        }
    }

    // The block's partial: the warps' sums added in warp order (deterministic), then stored.
    float *partial = partials + (size_t)blockIdx.x * 2 * Cp;
    if constexpr (SHARED) {
        __syncthreads();
        for (int j = threadIdx.x; j < 2 * Cp; j += THREADS) {
            float sum = 0.0f;
            for (int w = 0; w < W; w++) { sum += block_sums[(size_t)w * 2 * Cp + j]; }
            partial[j] = sum;
        }
    } else {
        for (int w = 0; w < W; w++) {
            if (warp == w) {
                #pragma unroll
                for (int k = 0; k < K; k++) {
                    const int c = 4 * (lane + 32 * k);
                    if (c < Cp) {
                        #pragma unroll
                        for (int j = 0; j < 4; j++) {
                            block_sums[c + j] = (w == 0 ? 0.0f : block_sums[c + j]) + dw[4 * k + j];
                            block_sums[Cp + c + j] = (w == 0 ? 0.0f : block_sums[Cp + c + j]) + db[4 * k + j];
                        }
                    }
                }
            }
            __syncthreads();
        }
        for (int j = threadIdx.x; j < 2 * Cp; j += THREADS) { partial[j] = block_sums[j]; }
    }
    if (!FUSED) { return; }

    // Last block done: every block fences its partial to device scope, then counts itself;
    // the one that counts last sees every partial and adds them.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) { is_last = atomicAdd(counter, 1u) == gridDim.x - 1; }
    __syncthreads();
    if (!is_last) { return; }
    __threadfence();
    reduce_partials(dweight, dbias, partials, gridDim.x, C, threadIdx.x, THREADS);
    if (threadIdx.x == 0) { *counter = 0; }  // ready for the next call
}

// Version 3's second kernel: one thread per float4 column of the partials.
__global__ void reduce_partials_kernel3(float *dweight, float *dbias, const float *partials, int G, int C) {
    reduce_partials(dweight, dbias, partials, G, C, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}

// The scratch buffer: the partials, then (at the end) the counter of version 4.
static const size_t SCRATCH_FLOATS = (size_t)2048 * 2 * 2048 + 64;
static unsigned *scratch_counter(float *scratch) { return (unsigned *)(scratch + SCRATCH_FLOATS - 64); }

// Launches the partials kernel for K; returns its grid size (blocks resident on the GPU at once,
// at most one per warp's worth of rows).
template <int K, bool FUSED>
static int launch_partials(float *dinp, float *dweight, float *dbias, float *scratch, const float *dout,
                           const float *inp, const float *mean, const float *rstd, const float *weight, int N, int C) {
    constexpr int THREADS = PARTIAL_THREADS(K), W = THREADS / 32;
    const size_t smem = partials_smem(K, C);
    static int sms = 0, per_sm = 0;  // one static pair per instantiation
    if (sms == 0) {
        int dev;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        // sized for the largest C of this K, so the grid (and the sums' order) is one per K
        const size_t smem_max = partials_smem(K, 128 * K);
        CUDA_CHECK(cudaFuncSetAttribute(layernorm_backward_partials_kernel<K, FUSED>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_max));
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, layernorm_backward_partials_kernel<K, FUSED>, THREADS, smem_max));
        if (per_sm < 1) { per_sm = 1; }
    }
    int grid = sms * per_sm;
    if (grid > (N + W - 1) / W) { grid = (N + W - 1) / W; }
    if ((size_t)grid * 2 * ((C + 3) / 4 * 4) > SCRATCH_FLOATS - 64) {
        fprintf(stderr, "error: scratch too small for %d blocks at C=%d\n", grid, C);
        exit(1);
    }
    auto kernel = layernorm_backward_partials_kernel<K, FUSED>;
    LAUNCH(kernel, grid, THREADS, smem,
        dinp, dweight, dbias, scratch, scratch_counter(scratch), dout, inp, mean, rstd, weight, N, C);
    return grid;
}

template <bool FUSED>
static int launch_partials_for_C(float *dinp, float *dweight, float *dbias, float *scratch, const float *dout,
                                 const float *inp, const float *mean, const float *rstd, const float *weight,
                                 int N, int C) {
    // float4 per lane, rounded up to one of the compiled sizes (the extra ones are masked)
    const int K = ((C + 3) / 4 + 31) / 32;
#define CASEK(k) if (K <= k) { return launch_partials<k, FUSED>(dinp, dweight, dbias, scratch, dout, inp, mean, rstd, weight, N, C); }
    CASEK(1) CASEK(2) CASEK(3) CASEK(4) CASEK(6) CASEK(8) CASEK(10) CASEK(13) CASEK(16)
#undef CASEK
    fprintf(stderr, "error: versions 3 and 4 handle C up to 2048, not %d\n", C);
    exit(1);
}

static void layernorm_backward3(float *dinp, float *dweight, float *dbias, float *scratch, const float *dout,
                                const float *inp, const float *mean, const float *rstd, const float *weight,
                                int N, int C) {
    const int G = launch_partials_for_C<false>(dinp, dweight, dbias, scratch, dout, inp, mean, rstd, weight, N, C);
    const int columns = (C + 3) / 4 * 4 / 2;
    LAUNCH(reduce_partials_kernel3, (columns + 127) / 128, 128, 0, dweight, dbias, scratch, G, C);
}

static void layernorm_backward4(float *dinp, float *dweight, float *dbias, float *scratch, const float *dout,
                                const float *inp, const float *mean, const float *rstd, const float *weight,
                                int N, int C) {
    launch_partials_for_C<true>(dinp, dweight, dbias, scratch, dout, inp, mean, rstd, weight, N, C);
}

// ---- the harness

typedef void (*BackwardFn)(float *, float *, float *, float *, const float *, const float *, const float *,
                           const float *, const float *, int, int);
static const BackwardFn VERSIONS[NUM_VERSIONS + 1] = {
    NULL, layernorm_backward1, layernorm_backward2, layernorm_backward3, layernorm_backward4,
};

// Tolerances, relative to the largest |reference|. dinp: the same fp32 formulas as
// llmc/layernorm.h, differing only in the order of the two sums over a row (C <= 1600 terms):
// up to ~1e-6 seen; 1e-5 leaves a margin and catches the mutant's 1/C. dweight and dbias sum
// N = 8192 rows in a different order (blocks of rows, atomics): the rounding of a sum of N
// terms grows like sqrt(N) 2^-24 |partial sums|, ~1e-6 of the result here; 2e-5 is 10-20
// times that, while losing one block's rows (mutant 2) is off by ~1e-2. Their terms are of
// size up to 1 (inputs in [-1, 1]), so the error is taken relative to at least 1: with C = 1
// the only result may nearly cancel to 0, and its rounding error relative to itself is large.
static const double TOL_DINP = 1e-5, TOL_DPARAM = 2e-5;

static const char *USAGE =
    "usage: layernorm_backward [VERSION]\n"
    "  VERSION 1-4: run, check (against version 1 and the CPU reference) and time that\n"
    "  version on every shape; none: every version, then a table\n";

int main(int argc, char **argv) {
    const int only = parse_version(argc, argv, NUM_VERSIONS, USAGE);
    const double bandwidth = measured_bandwidth_gbs();
    float *scratch = device_alloc(SCRATCH_FLOATS);
    CUDA_CHECK(cudaMemset(scratch, 0, SCRATCH_FLOATS * sizeof(float)));  // the counter starts at 0
    double ms[NUM_SHAPES][NUM_VERSIONS + 1];
    int failed = 0;
    for (int si = 0; si < NUM_SHAPES; si++) {
        const Shape sh = SHAPES[si];
        const int N = sh.B * sh.T, C = sh.C;
        const size_t NC = (size_t)N * C;
        // the statistics from the CPU forward on inp, as in training
        float *inp = host_random(NC, 1), *weight = host_random(C, 2), *bias = host_random(C, 3);
        float *dout = host_random(NC, 4);
        float *out = host_alloc(NC), *mean = host_alloc(N), *rstd = host_alloc(N);
        cpu_layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
        // the gradients accumulate into these starting values
        float *dinp0 = host_random(NC, 5), *dweight0 = host_random(C, 6), *dbias0 = host_random(C, 7);
        float *cpu_dinp = host_alloc(NC), *cpu_dweight = host_alloc(C), *cpu_dbias = host_alloc(C);
        memcpy(cpu_dinp, dinp0, NC * sizeof(float));
        memcpy(cpu_dweight, dweight0, C * sizeof(float));
        memcpy(cpu_dbias, dbias0, C * sizeof(float));
        cpu_layernorm_backward(cpu_dinp, cpu_dweight, cpu_dbias, dout, inp, mean, rstd, weight, N, C);

        float *d_inp = device_copy(inp, NC), *d_dout = device_copy(dout, NC), *d_weight = device_copy(weight, C);
        float *d_mean = device_copy(mean, N), *d_rstd = device_copy(rstd, N);
        float *d_dinp = device_copy(dinp0, NC), *d_dweight = device_copy(dweight0, C), *d_dbias = device_copy(dbias0, C);
        float *ref_dinp = host_alloc(NC), *ref_dweight = host_alloc(C), *ref_dbias = host_alloc(C);
        float *got_dinp = host_alloc(NC), *got_dweight = host_alloc(C), *got_dbias = host_alloc(C);
        float *again_dinp = host_alloc(NC), *again_dweight = host_alloc(C), *again_dbias = host_alloc(C);
        const double bytes = 4.0 * (4.0 * NC + 2.0 * N + 5.0 * C);
        printf("B=%d T=%d C=%d (%.1f MB moved a call)\n", sh.B, sh.T, C, bytes / 1e6);
        for (int v = 1; v <= NUM_VERSIONS; v++) {
            ms[si][v] = NAN;
            if (only != 0 && v != only && v != 1) { continue; }
            // two calls from the same starting values: checked, and compared bit for bit
            for (int run = 0; run < 2; run++) {
                CUDA_CHECK(cudaMemcpy(d_dinp, dinp0, NC * sizeof(float), cudaMemcpyHostToDevice));
                CUDA_CHECK(cudaMemcpy(d_dweight, dweight0, C * sizeof(float), cudaMemcpyHostToDevice));
                CUDA_CHECK(cudaMemcpy(d_dbias, dbias0, C * sizeof(float), cudaMemcpyHostToDevice));
                VERSIONS[v](d_dinp, d_dweight, d_dbias, scratch, d_dout, d_inp, d_mean, d_rstd, d_weight, N, C);
                CUDA_CHECK_LAUNCH();
                CUDA_CHECK(cudaDeviceSynchronize());
                float *gi = run ? again_dinp : v == 1 ? ref_dinp : got_dinp;
                float *gw = run ? again_dweight : v == 1 ? ref_dweight : got_dweight;
                float *gb = run ? again_dbias : v == 1 ? ref_dbias : got_dbias;
                to_host(gi, d_dinp, NC);
                to_host(gw, d_dweight, C);
                to_host(gb, d_dbias, C);
            }
            const float *gi = v == 1 ? ref_dinp : got_dinp, *gw = v == 1 ? ref_dweight : got_dweight;
            const float *gb = v == 1 ? ref_dbias : got_dbias;
            const int same = memcmp(gi, again_dinp, NC * sizeof(float)) == 0 &&
                             memcmp(gw, again_dweight, C * sizeof(float)) == 0 &&
                             memcmp(gb, again_dbias, C * sizeof(float)) == 0;
            double err_cpu = 0.0, err_v1 = 0.0;
            err_cpu = fmax(err_cpu, check_close("dinp vs cpu", gi, cpu_dinp, NC, TOL_DINP) / TOL_DINP);
            err_cpu = fmax(err_cpu, check_close("dweight vs cpu", gw, cpu_dweight, C, TOL_DPARAM, 1.0) / TOL_DPARAM);
            err_cpu = fmax(err_cpu, check_close("dbias vs cpu", gb, cpu_dbias, C, TOL_DPARAM, 1.0) / TOL_DPARAM);
            if (v != 1) {
                err_v1 = fmax(err_v1, check_close("dinp vs version 1", gi, ref_dinp, NC, TOL_DINP) / TOL_DINP);
                err_v1 = fmax(err_v1, check_close("dweight vs version 1", gw, ref_dweight, C, TOL_DPARAM, 1.0) / TOL_DPARAM);
                err_v1 = fmax(err_v1, check_close("dbias vs version 1", gb, ref_dbias, C, TOL_DPARAM, 1.0) / TOL_DPARAM);
            }
            // versions 2-4 promise the same bits every run; version 1 (atomics) may differ
            const int ok = err_cpu <= 1.0 && err_v1 <= 1.0 && (same || v == 1);
            if (!same && v != 1) { printf("  MISMATCH version %d: two runs gave different bits\n", v); }
            failed |= !ok;
            if (only != 0 && v != only) { continue; }
            ms[si][v] = time_median_ms([&] {
                VERSIONS[v](d_dinp, d_dweight, d_dbias, scratch, d_dout, d_inp, d_mean, d_rstd, d_weight, N, C);
            });
            const double gbs = bytes / ms[si][v] / 1e6;
            if (isnan(ms[si][v])) {  // emulated
                printf("  version %d: checked (emulation: not timed)  ", v);
            } else {
                printf("  version %d: %9.4f ms %7.0f GB/s %5.1f%% of bandwidth  ", v, ms[si][v], gbs, 100.0 * gbs / bandwidth);
            }
            printf("err/tol vs cpu %.2f, vs v1 %.2f  %s  %s\n", err_cpu, err_v1,
                   same ? "same bits twice" : "bits differ between runs", ok ? "OK" : "FAIL");
        }
        free(inp); free(weight); free(bias); free(dout); free(out); free(mean); free(rstd);
        free(dinp0); free(dweight0); free(dbias0); free(cpu_dinp); free(cpu_dweight); free(cpu_dbias);
        free(ref_dinp); free(ref_dweight); free(ref_dbias); free(got_dinp); free(got_dweight); free(got_dbias);
        free(again_dinp); free(again_dweight); free(again_dbias);
        CUDA_CHECK(cudaFree(d_inp)); CUDA_CHECK(cudaFree(d_dout)); CUDA_CHECK(cudaFree(d_weight));
        CUDA_CHECK(cudaFree(d_mean)); CUDA_CHECK(cudaFree(d_rstd)); CUDA_CHECK(cudaFree(d_dinp));
        CUDA_CHECK(cudaFree(d_dweight)); CUDA_CHECK(cudaFree(d_dbias));
    }
    if (only == 0 && !isnan(bandwidth)) {
        printf("\ntime in us (share of the measured %.0f GB/s)\n%-18s", bandwidth, "shape");
        for (int v = 1; v <= NUM_VERSIONS; v++) { printf("  version %d       ", v); }
        printf("\n");
        for (int si = 0; si < NUM_SHAPES; si++) {
            const Shape sh = SHAPES[si];
            const double N = (double)sh.B * sh.T, bytes = 4.0 * (4.0 * N * sh.C + 2.0 * N + 5.0 * sh.C);
            char name[32];
            snprintf(name, sizeof name, "B%d T%d C%d", sh.B, sh.T, sh.C);
            printf("%-18s", name);
            for (int v = 1; v <= NUM_VERSIONS; v++) {
                printf("  %9.1f (%3.0f%%)", 1000.0 * ms[si][v], 100.0 * bytes / ms[si][v] / 1e6 / bandwidth);
            }
            printf("\n");
        }
    }
    CUDA_CHECK(cudaFree(scratch));
    printf(failed ? "FAILED: a version does not match\n" : "all versions match version 1 and the CPU reference\n");
    return failed ? 1 : 0;
}
