/*
The matrix-vector products of incremental decoding (llmc/gemv.h). A token of GPT-2 124M at
batch 1 multiplies one row by every weight matrix: per layer qkv (2304 x 768), attproj
(768 x 768), fc (3072 x 768) and fcproj (768 x 3072), then the LM head (50304 x 768). Each
weight is read once and used once, so a token is bound by memory bandwidth: the harness
prints the GB/s of weights read per token, beside the machine's read bandwidth measured in
the same round (read_bandwidth.h, as ./read_bandwidth) and OpenBLAS's cblas_sgemv (fp32) over
the same matrices. (Debian's OpenBLAS is built without its bf16 routines: no cblas_sbgemv.)

  ./gemv [VERSION]

Versions. The threads split each matrix's rows in equal blocks of 4 and wait for each other
after each matrix, as gpt2_cache_step does (one parallel region per token).
  1  fp32, the simple code: a row at a time, one scalar sum
  2  fp32, four rows side by side, so that each load of x serves four (gemv.h's first kernel)
  3  fp32, llmc/gemv.h: a row at a time, 4 partial vector sums
  4  bf16, four rows side by side with vdpbf16ps (gemv.h's first bf16 kernel; AVX512_BF16 only)
  5  bf16, llmc/gemv.h: a row at a time, 4 partial sums (vdpbf16ps, or the portable path)
2 and 3 are checked against 1; 4 and 5 against 1 run on the bf16-rounded weights and input
(whose products are exact in fp32): within 1e-5 of max |out|, per matrix.

What it showed on Zen 4 (2 threads): versions 2 and 4 read four streams of one row (1.5-3 KB)
each per quad, which the hardware prefetchers follow badly, at about half the rate of one
sequential stream a thread (3 and 5): 1 thread's bf16 rate went from 14 to 27 GB/s.

Timing: 5 rounds; in each, the read bandwidth (best of 3 passes over 512 MiB), then every
version and OpenBLAS, each the best of 5 tokens after a warm-up. GB/s is each one's best round;
"of read bw" is the median over rounds of its GB/s over the same round's read bandwidth (this
VM's bandwidth moves by a third from one second to the next; a round sees one condition).
*/
#include <cblas.h>
#include "common.h"
#include "read_bandwidth.h"
#include "llmc/barrier.h"
#include "llmc/gemv.h"

#define ROUNDS 5
#define TOKENS 5
#define NUM_VERSIONS 5
#define TOL 1e-5

typedef struct { int in, out; } Shape;
#define MATRICES (4 * 12 + 1)
static Shape shapes[MATRICES];
static size_t offsets[MATRICES + 1];  // of each matrix in the weights, in elements (bf16: rows padded to 32)
static size_t offsets16[MATRICES + 1];

static float *weights, *x, *out, *ref;  // out, ref: every matrix's outputs, one after another
static uint16_t *weights16, *x16;
static size_t outs[MATRICES + 1];
static SpinBarrier barrier;

// --- 1: the simple code
static void rows1(int m, int r0, int r1) {
    const Shape s = shapes[m];
    const float *w = weights + offsets[m];
    for (int o = r0; o < r1; o++) {
        float sum = 0.0f;
        for (int c = 0; c < s.in; c++) { sum += w[(size_t)o * s.in + c] * x[c]; }
        out[outs[m] + o] = sum;
    }
}

// --- 2: four rows side by side
static void rows2(int m, int r0, int r1) {
    const Shape s = shapes[m];
    const float *w = weights + offsets[m];
    for (int o = r0; o < r1; o += 4) {  // r0, r1: multiples of 4 (the shapes' rows are)
        const float *w0 = w + (size_t)o * s.in, *w1 = w0 + s.in, *w2 = w1 + s.in, *w3 = w2 + s.in;
        vfloat a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        for (int c = 0; c < s.in; c += VEC_WIDTH) {  // in: a multiple of the vector width
            const vfloat xv = vec_load(x + c);
            a0 += vec_load(w0 + c) * xv;
            a1 += vec_load(w1 + c) * xv;
            a2 += vec_load(w2 + c) * xv;
            a3 += vec_load(w3 + c) * xv;
        }
        float *y = out + outs[m] + o;
        y[0] = vec_sum(a0), y[1] = vec_sum(a1), y[2] = vec_sum(a2), y[3] = vec_sum(a3);
    }
}

// --- 3: llmc/gemv.h
static void rows3(int m, int r0, int r1) {
    const Shape s = shapes[m];
    gemv_quads(r0 / 4, r1 / 4, out + outs[m], NULL, x, weights + offsets[m], NULL, s.in, s.out, 0, NULL);
}

// --- 4: bf16, four rows side by side
static int have_bf16_kernel(void) { return GEMM_HAVE_BF16_KERNEL && gemm_bf16_native_available(); }
#if GEMM_HAVE_BF16_KERNEL
GEMM_BF16_TARGET
static void rows4(int m, int r0, int r1) {
    const Shape s = shapes[m];
    const int Cp = gemv_bf16_stride(s.in);
    const uint16_t *w = weights16 + offsets16[m];
    for (int o = r0; o < r1; o += 4) {
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
        for (int c = 0; c < Cp; c += 32) {
            const __m512bh xv = (__m512bh)_mm512_loadu_si512((const void *)(x16 + c));
            for (int i = 0; i < 4; i++) {
                const uint16_t *wi = w + (size_t)(o + i) * Cp + c;
                acc[i] = _mm512_dpbf16_ps(acc[i], (__m512bh)_mm512_loadu_si512((const void *)wi), xv);
            }
        }
        for (int i = 0; i < 4; i++) { out[outs[m] + o + i] = _mm512_reduce_add_ps(acc[i]); }
    }
}
#else
static void rows4(int m, int r0, int r1) { (void)m, (void)r0, (void)r1; }
#endif

// --- 5: llmc/gemv.h's bf16
static void rows5(int m, int r0, int r1) {
    const Shape s = shapes[m];
    gemv_bf16_quads(r0 / 4, r1 / 4, out + outs[m], NULL, x16, weights16 + offsets16[m], NULL, s.in, s.out, 0, NULL);
}

static void (*const versions[NUM_VERSIONS + 1])(int, int, int) = {NULL, rows1, rows2, rows3, rows4, rows5};

// One token: every matrix, the rows split between the threads in blocks of 4, a barrier after each.
static void token(int version) {
    #pragma omp parallel
    {
        const int nth = omp_get_num_threads(), tid = omp_get_thread_num();
        for (int m = 0; m < MATRICES; m++) {
            const int quads = shapes[m].out / 4;
            versions[version](m, 4 * (int)((long)quads * tid / nth), 4 * (int)((long)quads * (tid + 1) / nth));
            spin_barrier_wait(&barrier, nth);
        }
    }
}

// OpenBLAS's sgemv over the same matrices (its own threads, OMP_NUM_THREADS of them).
static void token_openblas(void) {
    for (int m = 0; m < MATRICES; m++) {
        const Shape s = shapes[m];
        cblas_sgemv(CblasRowMajor, CblasNoTrans, s.out, s.in, 1.0f, weights + offsets[m], s.in, x, 1, 0.0f,
                    out + outs[m], 1);
    }
}

static double best_token_ms(int version) {  // version 0: OpenBLAS
    double best = 1e30;
    for (int t = 0; t <= TOKENS; t++) {  // the first is a warm-up
        const double t0 = now_seconds();
        if (version > 0) { token(version); } else { token_openblas(); }
        const double ms = (now_seconds() - t0) * 1e3;
        if (t > 0 && ms < best) { best = ms; }
    }
    return best;
}

// Version v's outputs against version 1's on the same operands (fp32, or bf16-rounded for 4, 5).
static int check(int v) {
    if (v == 4 && !have_bf16_kernel()) { return 1; }
    const int bf16 = v >= 4;
    float *w32 = weights, *x32 = x;
    if (bf16) {  // version 1 on the bf16-rounded values
        weights = malloc_or_die(offsets[MATRICES] * sizeof(float), "weights");
        x = malloc_or_die(4 * 768 * sizeof(float), "x");
        for (size_t i = 0; i < offsets[MATRICES]; i++) { weights[i] = gemm_bf16_round(w32[i]); }
        for (int c = 0; c < 4 * 768; c++) { x[c] = gemm_bf16_round(x32[c]); }
    }
    token(1);
    memcpy(ref, out, outs[MATRICES] * sizeof(float));
    if (bf16) { free(weights), free(x), weights = w32, x = x32; }
    token(v);
    int ok = 1;
    for (int m = 0; m < MATRICES; m++) {
        char what[64];
        snprintf(what, sizeof(what), "version %d, matrix %d (%d x %d)", v, m, shapes[m].out, shapes[m].in);
        ok &= check_close(what, out + outs[m], ref + outs[m], shapes[m].out, TOL);
    }
    return ok;
}

int main(int argc, char **argv) {
    const int only = argc > 1 ? atoi(argv[1]) : 0;
    if (argc > 1 && (only < 1 || only > NUM_VERSIONS)) { fprintf(stderr, "error: version %s: outside 1..%d\n", argv[1], NUM_VERSIONS); return 2; }
    const int C = 768, layers = 12, Vp = 50304, threads = omp_get_max_threads();
    openblas_set_num_threads(threads);
    for (int l = 0; l < layers; l++) {
        shapes[4 * l] = (Shape){C, 3 * C}, shapes[4 * l + 1] = (Shape){C, C};
        shapes[4 * l + 2] = (Shape){C, 4 * C}, shapes[4 * l + 3] = (Shape){4 * C, C};
    }
    shapes[MATRICES - 1] = (Shape){C, Vp};
    for (int m = 0; m < MATRICES; m++) {
        offsets[m + 1] = offsets[m] + (size_t)shapes[m].out * shapes[m].in;
        offsets16[m + 1] = offsets16[m] + (size_t)shapes[m].out * gemv_bf16_stride(shapes[m].in);
        outs[m + 1] = outs[m] + shapes[m].out;
    }
    weights = make_random(offsets[MATRICES], 1);
    x = make_random(4 * C, 2);
    weights16 = aligned_alloc_or_die(offsets16[MATRICES] * sizeof(uint16_t), "bf16 weights");
    x16 = aligned_alloc_or_die(4 * C * sizeof(uint16_t), "bf16 x");
    for (int m = 0; m < MATRICES; m++) {
        gemv_bf16_convert(weights16 + offsets16[m], weights + offsets[m], shapes[m].out, shapes[m].in);
    }
    gemv_bf16_round_row(x16, x, 4 * C);
    out = aligned_alloc_or_die(outs[MATRICES] * sizeof(float), "out");
    ref = aligned_alloc_or_die(outs[MATRICES] * sizeof(float), "ref");
    const double bytes[2] = {offsets[MATRICES] * 4.0, offsets16[MATRICES] * 2.0};
    printf("GPT-2 124M, one token: %d matrices, %.1f MB of fp32 weights, %.1f MB of bf16; %d threads; bf16 path: %s\n",
           MATRICES, bytes[0] / 1e6, bytes[1] / 1e6, threads,
           gemm_bf16_uses_native() ? "vdpbf16ps" : "portable (the emulated bf16 path: no AVX512_BF16, measured slower, or forced)");

    int ok = 1;
    for (int v = 2; v <= NUM_VERSIONS; v++) {
        if (only > 1 && v != only) { continue; }
        const int good = check(v);
        printf("version %d against version 1: %s\n", v, v == 4 && !have_bf16_kernel() ? "skipped (no AVX512_BF16)" : good ? "OK" : "MISMATCH");
        ok &= good;
    }

    // the timed set: 0 is OpenBLAS
    int timed[NUM_VERSIONS + 1], n = 0;
    for (int v = only ? only : 1; v <= (only ? only : NUM_VERSIONS); v++) {
        if (v == 4 && !have_bf16_kernel()) { continue; }
        timed[n++] = v;
    }
    timed[n++] = 0;
    double best_ms[NUM_VERSIONS + 1], share[NUM_VERSIONS + 1][ROUNDS], read_best = 0.0;
    const size_t nread = read_buffer_floats(512);
    float *buf = read_buffer_create(nread);
    if (buf == NULL) { die("cannot allocate the read-bandwidth buffer"); }
    for (int i = 0; i < n; i++) { best_ms[i] = 1e30; }
    for (int r = 0; r < ROUNDS; r++) {
        const double gbs = read_gbs(buf, nread, threads, 3);
        read_best = gbs > read_best ? gbs : read_best;
        for (int i = 0; i < n; i++) {
            const double ms = best_token_ms(timed[i]);
            best_ms[i] = ms < best_ms[i] ? ms : best_ms[i];
            share[i][r] = bytes[timed[i] >= 4] / (ms * 1e-3) / 1e9 / gbs;
        }
    }
    printf("read bandwidth: %.1f GB/s (best round)\n", read_best);
    printf("%-22s %10s %8s %12s\n", "", "ms/token", "GB/s", "of read bw");
    for (int i = 0; i < n; i++) {
        char name[32];
        if (timed[i] > 0) { snprintf(name, sizeof(name), "version %d (%s)", timed[i], timed[i] >= 4 ? "bf16" : "fp32"); }
        else { snprintf(name, sizeof(name), "OpenBLAS sgemv (fp32)"); }
        const double b = bytes[timed[i] >= 4];
        printf("%-22s %10.2f %8.1f %11.0f%%\n", name, best_ms[i], b / (best_ms[i] * 1e-3) / 1e9, 100 * median_of(share[i], ROUNDS));
    }
    free(buf);
    return ok ? 0 : 1;
}
