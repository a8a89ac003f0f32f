/*
Where the AMX tile loop's time goes: TDPBF16PS fed from memory as the GEMM feeds it, one cost
added at a time, each thread on its own macro block (mc rows of packed A, nc columns of packed
B, kw pairs: the layout of llmc/gemm_kernel_amx.h), timed against each other in rounds:

  peak     amx_peak.h's loop (four TDPBF16PS on tiles loaded once, no memory traffic) for as
           many TDPBF16PS as the block has, on random operands; peak-0 on zeros
  bare     the k loop of every 32 x 32 tile of the block (four tile loads and four TDPBF16PS
           per 16 pairs), into the same four accumulators: A and B from L1 or L2, no C at all
  scratch  gemm_tile_amx per tile, its C one 4 KiB tile (in L1): the accumulators start from
           zero or from it (cin) and go back to it at the tile's end
  tile     gemm_tile_amx per tile into the mc x nc block of a C of ldc columns, fetching the
           next tile's C as gemm_macro_kernel has it do: what the GEMM's tiles do

  beside   (one thread, after the table) attn_amx_product of 32 x 32 over 32 pairs (attention's scores at hs = 64),
           stored to L1, and a vector pass over its 1024 results (vec_exp, written back, as the
           softmax does): each alone, alternated as attention runs them, and four products then
           four passes. If the core overlapped tile and vector work, alternated would cost less
           than the sum of the two alone.

So bare against peak is the cost of feeding A and B, bare at
kw = 384 against 192 or 128 that of their panels outgrowing L1 (48 KiB each at 384 pairs), scratch
against bare that of a tile's start and end (the accumulators loaded, stored, the pipeline
drained), and tile against scratch that of C in memory. The operands are random bf16s: the
lent Xeon's TDPBF16PS runs faster on zeros (peak-0 against peak). Its speed also drifts within
a minute (see dev/cpu/README.md), so each variant runs once a round, and the best of the
rounds is the figure to compare (the mean shows the drift).

    OMP_NUM_THREADS=2 taskset -c 0,1 ./amx_tile_loop [ROUNDS] [huge]   # 20 rounds by default
huge: the buffers 2 MiB aligned and marked MADV_HUGEPAGE (transparent huge pages). Without AMX
it says so and exits 0. Results: dev/cpu/results/2026-11-27-xeon-amx/run16-20.
*/
#include <sys/mman.h>

#include "amx_peak.h"
#include "common.h"
#include "llmc/attention_kernel.h"  // attn_amx_product, the products beside
#include "llmc/gemm.h"

#if GEMM_HAVE_AMX_KERNEL && !defined(GEMM_AMX_EMULATE)
enum { PEAK, PEAK_ZEROS, BARE, SCRATCH, TILE };
static const char *mode_names[] = {"peak", "peak-0", "bare", "scratch", "tile"};

typedef struct {
    int mode, kw, mc, nc, ldc;
    int cin;    // the accumulators start from C (a k block after the first)
    int fetch;  // tile: the next tile's C fetched into L2 (gemm_tile_epilogue's next_c)
} variant;

GEMM_AMX_TARGET
static void bare_block(int mc, int nc, int kw, const char *abuf, const char *bbuf, int reps) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int rep = 0; rep < reps; rep++) {
        for (int jr = 0; jr < nc; jr += GEMM_AMX_NR) {  // as gemm_macro_kernel: B panel outer, A inner
            for (int ir = 0; ir < mc; ir += GEMM_AMX_MR) {
                const char *a = abuf + (size_t)ir * kw * 4, *b = bbuf + (size_t)jr * kw * 4;
                for (int q = 0; q < kw; q += GEMM_AMX_KP) {
                    const char *aq = a + (size_t)q * GEMM_AMX_MR * 4, *bq = b + (size_t)q * GEMM_AMX_NR * 4;
                    _tile_loadd(4, aq, 64);
                    _tile_loadd(6, bq, GEMM_AMX_NR * 4);
                    _tile_loadd(7, bq + 64, GEMM_AMX_NR * 4);
                    _tile_dpbf16ps(0, 4, 6);
                    _tile_dpbf16ps(1, 4, 7);
                    _tile_loadd(5, aq + 16 * 64, 64);
                    _tile_dpbf16ps(2, 5, 6);
                    _tile_dpbf16ps(3, 5, 7);
                }
            }
        }
    }
    float out[256] __attribute__((aligned(64)));
    _tile_stored(0, out, 64);
    if (out[0] == 12345.0f) { printf(" "); }  // keeps the loop
}

static void tile_block(const variant *x, const float *abuf, const float *bbuf, float *c, int reps) {
    float scratch[GEMM_AMX_MR * GEMM_AMX_NR] __attribute__((aligned(64))) = {0};
    for (int rep = 0; rep < reps; rep++) {
        for (int jr = 0; jr < x->nc; jr += GEMM_AMX_NR) {
            for (int ir = 0; ir < x->mc; ir += GEMM_AMX_MR) {
                const int to_scratch = x->mode == SCRATCH;
                float *ct = to_scratch ? scratch : c + (size_t)ir * x->ldc + jr;
                const ptrdiff_t ld = to_scratch ? GEMM_AMX_NR : x->ldc;
                gemm_tile_epilogue ep = {0};
                if (x->cin) { ep.cin = ct, ep.ldcin = ld; }
                const int next_ir = ir + GEMM_AMX_MR < x->mc ? ir + GEMM_AMX_MR : 0;
                const int next_jr = ir + GEMM_AMX_MR < x->mc ? jr : jr + GEMM_AMX_NR;
                if (x->fetch && next_jr < x->nc) { ep.next_c = c + (size_t)next_ir * x->ldc + next_jr; }
                gemm_tile_amx(GEMM_AMX_MR, GEMM_AMX_NR, x->kw, abuf + (size_t)ir * x->kw, bbuf + (size_t)jr * x->kw, ct, ld,
                              &ep, NULL);
            }
        }
    }
}

static int use_huge = 0;
static float *buffer(size_t floats) {
    const size_t align = use_huge ? 2u << 20 : 64, bytes = (floats * sizeof(float) + align - 1) / align * align;
    float *p = aligned_alloc(align, bytes);
    if (p == NULL) { die("out of memory for a %zu-byte buffer", bytes); }
    if (use_huge) { madvise(p, bytes, MADV_HUGEPAGE); }
    return p;
}

// Random bf16 pairs of magnitude below 2 (finite sums over any k).
static void fill_pairs(float *x, size_t n, uint64_t seed) {
    fill_random(x, n, seed);
    for (size_t i = 0; i < n; i++) {
        uint32_t w;
        memcpy(&w, &x[i], 4);
        w &= 0xbfffbfffu;
        memcpy(&x[i], &w, 4);
    }
}

// beside: the vector pass over a product's 1024 results, written back; returns their sum.
static float beside_pass(float *c) {
    vfloat acc = vec_set1(0.0f);
    for (int i = 0; i < 1024; i += VEC_WIDTH) {
        const vfloat e = vec_exp(vec_load(c + i) * vec_set1(1e-3f));
        vec_store(c + i, e);
        acc += e;
    }
    return vec_sum(acc);
}

// beside: ns per product and pass, by mode: 0 product alone, 1 pass alone, 2 alternated,
// 3 four products then their four passes. A product is attention's (attn_amx_product): 32 x 32
// results from a (32 rows of kw pair words) and b (kw rows of 32 words), both in L1.
static double beside_ns(int mode, const uint32_t *a, const uint32_t *b, int kw, float *c) {
    const int reps = 20000;
    float keep = 0.0f;
    const double t0 = now_seconds();
    for (int r = 0; r < reps; r += 4) {
        for (int i = 0; i < 4; i++) {
            if (mode != 1) { attn_amx_product(c + i * 1024, 32, a, kw, b, 32, 32, 32, kw, 0); }
            if (mode == 1 || mode == 2) { keep += beside_pass(c + i * 1024); }
        }
        for (int i = 0; mode == 3 && i < 4; i++) { keep += beside_pass(c + i * 1024); }
        for (int i = 0; mode != 1 && i < 4 * 1024; i += 97) { c[i] = 0.5f; }  // finite inputs for the passes
    }
    const double ns = (now_seconds() - t0) * 1e9 / reps;
    if (keep == 12345.0f) { printf(" "); }
    return ns;
}

static void beside_table(int rounds) {
    const int kw = 32;
    float *a = buffer((size_t)GEMM_AMX_MR * kw), *b = buffer((size_t)GEMM_AMX_NR * kw), *c = buffer(4 * 1024);
    fill_pairs(a, (size_t)GEMM_AMX_MR * kw, 7);
    fill_pairs(b, (size_t)GEMM_AMX_NR * kw, 8);
    for (int i = 0; i < 4 * 1024; i++) { c[i] = 0.5f; }
    gemm_amx_thread_init();
    static const char *names[] = {"product alone", "pass alone", "alternated", "4 products, 4 passes"};
    double best[4] = {1e30, 1e30, 1e30, 1e30};
    for (int r = 0; r < rounds; r++) {
        for (int m = 0; m < 4; m++) {
            const double ns = beside_ns(m, (const uint32_t *)a, (const uint32_t *)b, kw, c);
            best[m] = ns < best[m] ? ns : best[m];
        }
    }
    printf("\nbeside: a 32 x 32 product of %d pairs and a vector pass over its results, one thread, best of %d rounds\n",
           kw, rounds);
    for (int m = 0; m < 4; m++) { printf("  %-22s %7.1f ns\n", names[m], best[m]); }
    printf("  alternated against the two alone: %.2fx (below 1: they overlap)\n", best[2] / (best[0] + best[1]));
    free(a);
    free(b);
    free(c);
}

// One round of variant x on every thread: GFLOP/s per thread.
static double time_variant(const variant *x) {
    const double flops_per_rep = 4.0 * x->mc * x->nc * x->kw;  // 2 flops x 2 k's a pair
    const int reps = (int)(4e9 / flops_per_rep) + 1;
    double t0 = 0.0, t1 = 0.0;
    #pragma omp parallel
    {
        float *a = buffer((size_t)x->mc * x->kw), *b = buffer((size_t)x->nc * x->kw);
        float *c = buffer((size_t)x->mc * x->ldc);
        fill_pairs(a, (size_t)x->mc * x->kw, 1 + omp_get_thread_num());
        fill_pairs(b, (size_t)x->nc * x->kw, 101 + omp_get_thread_num());
        memset(c, 0, (size_t)x->mc * x->ldc * sizeof(float));
        gemm_amx_thread_init();
        for (int pass = 0; pass < 2; pass++) {  // a warm-up rep, then the timed reps
            const int n = pass == 0 ? 1 : reps;
            #pragma omp barrier
            #pragma omp master
            t0 = now_seconds();
            if (x->mode == PEAK || x->mode == PEAK_ZEROS) {
                amx_peak_loop((long)n * x->mc / GEMM_AMX_MR * x->nc / GEMM_AMX_NR * x->kw / GEMM_AMX_KP,
                              amx_peak_tiles(x->mode == PEAK_ZEROS));
            } else if (x->mode == BARE) {
                bare_block(x->mc, x->nc, x->kw, (const char *)a, (const char *)b, n);
            } else {
                tile_block(x, a, b, c, n);
            }
            #pragma omp barrier
            #pragma omp master
            t1 = now_seconds();
        }
        free(a);
        free(b);
        free(c);
    }
    return flops_per_rep * reps / (t1 - t0) / 1e9;
}

int main(int argc, char **argv) {
    const int rounds = argc > 1 ? (int)parse_count_or_die("ROUNDS", argv[1], 1, 1000) : 20;
    if (argc > 2 && strcmp(argv[2], "huge") != 0) { die("usage: %s [ROUNDS] [huge]: %s is not huge", argv[0], argv[2]); }
    use_huge = argc > 2;
    if (!gemm_amx_available()) {
        printf("amx_tile_loop: this CPU (or OS) has no AMX: nothing to time\n");
        return 0;
    }
    const int threads = omp_get_max_threads();
    amx_peak_tiles(0);  // filled here, before the threads read it
    static const variant variants[] = {
        {PEAK, 384, 256, 1024, 1024, 0, 0},    {PEAK_ZEROS, 384, 256, 1024, 1024, 0, 0},
        {BARE, 384, 256, 1024, 1024, 0, 0},    {BARE, 192, 256, 1024, 1024, 0, 0},    {BARE, 128, 256, 1024, 1024, 0, 0},
        {SCRATCH, 384, 256, 1024, 1024, 0, 0}, {SCRATCH, 192, 256, 1024, 1024, 1, 0}, {TILE, 384, 256, 1024, 1024, 0, 1},
        {TILE, 384, 256, 1024, 1024, 0, 0},    {TILE, 384, 256, 1024, 1024, 1, 1},    {TILE, 384, 256, 1024, 3072, 0, 1},
        {TILE, 384, 256, 768, 768, 0, 1},      {TILE, 192, 256, 1024, 1024, 0, 1},    {TILE, 192, 256, 1024, 1024, 1, 1},
    };
    enum { NV = sizeof(variants) / sizeof(variants[0]) };
    double best[NV] = {0}, sum[NV] = {0};
    for (int r = 0; r < rounds; r++) {
        for (int v = 0; v < NV; v++) {
            const double g = time_variant(&variants[v]);
            best[v] = g > best[v] ? g : best[v];
            sum[v] += g;
        }
    }
    printf("AMX tile loop, %d threads, %d rounds%s\n", threads, rounds, use_huge ? ", huge pages" : "");
    printf("%-8s %4s %4s %5s %5s %3s %5s  %6s %6s  GFLOP/s a thread\n", "variant", "kw", "mc", "nc", "ldc", "cin", "fetch",
           "best", "mean");
    for (int v = 0; v < NV; v++) {
        const variant *x = &variants[v];
        printf("%-8s %4d %4d %5d %5d %3d %5d  %6.0f %6.0f\n", mode_names[x->mode], x->kw, x->mc, x->nc, x->ldc, x->cin,
               x->fetch, best[v], sum[v] / rounds);
    }
    beside_table(rounds);
    return 0;
}
#else
int main(void) {
    printf("amx_tile_loop: built without real AMX tiles (GEMM_AMX_EMULATE, or no bf16 kernel): nothing to time\n");
    return 0;
}
#endif
