/*
Where the AMX tile loop's time goes: TDPBF16PS fed from memory as the GEMM feeds it, one cost
added at a time, each thread on its own macro block (mc rows of packed A, nc columns of packed
B, kw pairs: the layout of llmc/gemm_kernel_amx.h), timed against each other in rounds:

  peak     amx_peak.h's loop (four TDPBF16PS on tiles loaded once, no memory traffic) for as
           many TDPBF16PS as the block has, on random operands; peak-0 on zeros
  bare     the k loop of every 32 x 32 tile of the block (four tile loads and four TDPBF16PS
           per 16 pairs), into the same four accumulators: A and B from L1 or L2, no C at all;
           +rev: every other tile's k steps last to first (the GEMM's checkerboard);
           +store: each tile's accumulators stored to an L1 tile at its end; +drain: stored and
           zeroed (what a tile call's end and start do); +pipe: drained, with the next tile's
           first k step on the top accumulators issued before the bottom ones are stored
  scratch  gemm_tile_amx per tile, its C one 4 KiB tile (in L1): the accumulators start from
           zero or from it (cin) and go back to it at the tile's end
  tile     gemm_tile_amx per tile into the mc x nc block of a C of ldc columns, fetching the
           next tile's C as gemm_macro_kernel has it do: what the GEMM's tiles do
  ils      the tile's accumulators stored to one of two L1 staging tiles, copied to C by vector
           stores interleaved with the next tile's k steps (oneDNN's brgemm can interleave so)
  direct   gemm_tile_amx's k loop inline, stored straight to C; fetch picks how the next tile's
           C is fetched (direct_block: 1 as the GEMM, 2-6 other hints and distances) or 7: no
           fetch, stored through an L1 staging tile by non-temporal stores (no read for
           ownership); -cold: each rep writes a new block of C (192 in turn), so C's lines come
           from memory, as where a product writes its output once (the step's)

  beside   (one thread, after the table) attn_amx_product of 32 x 32 over 32 pairs (attention's scores at hs = 64),
           stored to L1, and a vector pass over its 1024 results (vec_exp, written back, as the
           softmax does): each alone, alternated as attention runs them, four products then
           four passes, and each pass with the next product threaded through it (its eight
           TDPBF16PS spread one per 8 vectors, or all issued before the pass). If the core
           overlapped tile and vector work, these would cost less than the sum of the two alone.

So bare against peak is the cost of feeding A and B, bare at kw = 384 against 192 or 128 that of
their panels outgrowing L1 (48 KiB each at 384 pairs), scratch against bare that of a tile's start
and end (the accumulators loaded, stored, the pipeline drained), tile against scratch that of C
in memory, direct-cold against tile that of C's lines coming from memory rather than L3, and
fetch 7 what writing C without reading it first would save. The operands are random bf16s: the
lent Xeon's TDPBF16PS runs faster on zeros (peak-0 against peak). Its speed also drifts within
a minute (see dev/cpu/README.md), so each variant runs once a round, and the best of the
rounds is the figure to compare (the mean shows the drift).

    OMP_NUM_THREADS=2 taskset -c 0,1 ./amx_tile_loop [ROUNDS] [huge]   # 20 rounds by default
    AMX_LOOP_GFLOP=60 ...    # each variant's work per round and thread (default 4 GFLOP: milliseconds,
                             # too short where the host's speed moves within milliseconds)
huge: the buffers 2 MiB aligned and marked MADV_HUGEPAGE (transparent huge pages). Without AMX
it says so and exits 0. Results: dev/cpu/results/2026-11-27-xeon-amx/run16-20, and
dev/cpu/results/2026-12-03-xeon-amx/amx_tile_loop_*.txt (the ends, ils, direct and cold variants;
those runs fetched into L2 by prefetcht1 in ils and direct, where gemm_fetch_rows, used since, has
prefetcht2, as the GEMM).
*/
#include <sys/mman.h>

#include "amx_peak.h"
#include "common.h"
#include "llmc/attention_kernel.h"  // attn_amx_product, the products beside
#include "llmc/gemm.h"

#if GEMM_HAVE_AMX_KERNEL && !defined(GEMM_AMX_EMULATE)
enum { PEAK, PEAK_ZEROS, BARE, SCRATCH, TILE, ILS, DIRECT };
static const char *mode_names[] = {"peak", "peak-0", "bare", "scratch", "tile", "ils", "direct"};

typedef struct {
    int mode, kw, mc, nc, ldc;
    int end;    // bare: how each tile ends (END_*)
    int cold;   // direct: each rep writes the next of COLD_REGIONS blocks of C (so C comes from memory)
    int cin;    // the accumulators start from C (a k block after the first)
    int fetch;  // tile: the next tile's C fetched into L2 (gemm_tile_epilogue's next_c)
} variant;

// The panel the inline k loops load by TILELOADDT1, as gemm_tile_amx does in a column of tiles
// (gemm_amx_k_step's once: the a panel; -1 with GEMM_AMX_LOAD_HINT=0, neither).
#define AMX_LOOP_ONCE (GEMM_AMX_LOAD_HINT ? 0 : -1)

// 1 where the GEMM runs the tile at (ir, jr) of a block of kw pairs k last to first (gemm.h's
// checkerboard of gemm_tile_epilogue's k_reverse).
static int checkerboard(int kw, int ir, int jr) {
    return GEMM_AMX_K_REVERSE && kw > GEMM_AMX_K_REVERSE_PAIRS && ((ir / GEMM_AMX_MR + jr / GEMM_AMX_NR) & 1);
}

// C of the tile `ahead` tiles after (ir, jr) in a block's order (a b panel's column of tiles after
// another), or NULL past the block.
static const float *tile_ahead(const variant *x, const float *c, int ir, int jr, int ahead) {
    const int tiles_down = x->mc / GEMM_AMX_MR, t = ir / GEMM_AMX_MR + ahead;
    const int next_ir = (t % tiles_down) * GEMM_AMX_MR, next_jr = jr + (t / tiles_down) * GEMM_AMX_NR;
    return next_jr < x->nc ? c + (size_t)next_ir * x->ldc + next_jr : NULL;
}

GEMM_AMX_TARGET
static inline void zero_accumulators(void) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
}

// How a bare block ends each tile (the accumulators go on into the next tile unless drained):
// none; STORE: the four stored to an L1 scratch tile; DRAIN: stored, then zeroed, as every
// gemm_tile_amx call does; PIPE: drained, but the next tile's first k step on the top two
// accumulators issued before the bottom two are stored (stores interleaved with tile work);
// and REV (added to any of them): the tiles' k steps in the GEMM's checkerboard (every other
// tile last to first, so that it starts on the panel lines the tile before ended on).
enum { END_NONE, END_STORE, END_DRAIN, END_PIPE, REV = 4 };
static const char *end_names[] = {"", "+store", "+drain", "+pipe", "+rev", "+store+rev", "+drain+rev", "+pipe+rev"};

GEMM_AMX_TARGET
static void bare_block(int mc, int nc, int kw, const char *abuf, const char *bbuf, int reps, int end) {
    float scratch[GEMM_AMX_MR * GEMM_AMX_NR] __attribute__((aligned(64)));
    zero_accumulators();
    const int steps = kw / GEMM_AMX_KP;
    int first = 1, parity = 0;
    const int rev = end & REV;
    end &= ~REV;
    for (int rep = 0; rep < reps; rep++) {
        for (int jr = 0; jr < nc; jr += GEMM_AMX_NR) {  // as gemm_macro_kernel: B panel outer, A inner
            for (int ir = 0; ir < mc; ir += GEMM_AMX_MR) {
                const char *a = abuf + (size_t)ir * kw * 4, *b = bbuf + (size_t)jr * kw * 4;
                const int reverse = rev && (parity++ & 1);
                int s0 = 0;
                if (end == END_PIPE && !first) {  // the last tile's bottom half still to store
                    const size_t q0 = (size_t)(reverse ? steps - 1 : 0) * GEMM_AMX_KP;
                    const char *a0 = a + q0 * GEMM_AMX_MR * 4, *b0 = b + q0 * GEMM_AMX_NR * 4;
                    _tile_stored(0, scratch, GEMM_AMX_NR * 4);
                    _tile_zero(0);
                    _tile_stored(1, scratch + 16, GEMM_AMX_NR * 4);
                    _tile_zero(1);
                    _tile_loadd(4, a0, 64);
                    _tile_loadd(6, b0, GEMM_AMX_NR * 4);
                    _tile_loadd(7, b0 + 64, GEMM_AMX_NR * 4);
                    _tile_dpbf16ps(0, 4, 6);
                    _tile_dpbf16ps(1, 4, 7);
                    _tile_stored(2, scratch + 16 * GEMM_AMX_NR, GEMM_AMX_NR * 4);
                    _tile_zero(2);
                    _tile_stored(3, scratch + 16 * GEMM_AMX_NR + 16, GEMM_AMX_NR * 4);
                    _tile_zero(3);
                    _tile_loadd(5, a0 + 16 * 64, 64);
                    _tile_dpbf16ps(2, 5, 6);
                    _tile_dpbf16ps(3, 5, 7);
                    s0 = 1;
                }
                first = 0;
                for (int s = s0; s < steps; s++) {
                    const int q = (reverse ? steps - 1 - s : s) * GEMM_AMX_KP;
                    gemm_amx_k_step(a + (size_t)q * GEMM_AMX_MR * 4, b + (size_t)q * GEMM_AMX_NR * 4, AMX_LOOP_ONCE);
                }
                if (end == END_STORE || end == END_DRAIN) { gemm_amx_store_c(scratch, GEMM_AMX_NR); }
                if (end == END_DRAIN) { zero_accumulators(); }
            }
        }
    }
    _tile_stored(0, scratch, 64);
    if (scratch[0] == 12345.0f) { printf(" "); }  // keeps the loop
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
                ep.k_reverse = checkerboard(x->kw, ir, jr);
                if (x->fetch) { ep.next_c = tile_ahead(x, c, ir, jr, 1); }
                gemm_tile_amx(GEMM_AMX_MR, GEMM_AMX_NR, x->kw, abuf + (size_t)ir * x->kw, bbuf + (size_t)jr * x->kw, ct, ld,
                              &ep, NULL);
            }
        }
    }
}

// ils: the tile's k loop as gemm_tile_amx's (checkerboard included), the accumulators stored to
// one of two L1 staging tiles at its end, and the tile before's staging copied to its place in C
// by vector loads and stores, a few rows after each k step's TDPBF16PS (interleaved stores, as
// oneDNN's brgemm can do): C's misses then overlap the next tile's products. fetch: the next
// tile's rows of C are fetched into L2 as the tile runs (as gemm_tile_amx's next_c).
GEMM_AMX_TARGET
static void ils_block(const variant *x, const char *abuf, const char *bbuf, float *c, int reps) {
    float stage[2][GEMM_AMX_MR * GEMM_AMX_NR] __attribute__((aligned(64)));
    const int kw = x->kw, steps = kw / GEMM_AMX_KP, ldc = x->ldc;
    const int rows_per_step = steps > 1 ? (GEMM_AMX_MR + steps - 2) / (steps - 1) : GEMM_AMX_MR;  // all by the last step
    float *pend = NULL;
    int pend_buf = 0, pend_row = GEMM_AMX_MR, cur = 0;
    for (int rep = 0; rep < reps; rep++) {
        for (int jr = 0; jr < x->nc; jr += GEMM_AMX_NR) {
            for (int ir = 0; ir < x->mc; ir += GEMM_AMX_MR) {
                const char *a = abuf + (size_t)ir * kw * 4, *b = bbuf + (size_t)jr * kw * 4;
                const int reverse = checkerboard(kw, ir, jr);
                const float *next_c = x->fetch ? tile_ahead(x, c, ir, jr, 1) : NULL;
                const int fetch_rows = (GEMM_AMX_MR + steps - 1) / steps;
                zero_accumulators();
                for (int s = 0; s < steps; s++) {
                    const int q = (reverse ? steps - 1 - s : s) * GEMM_AMX_KP;
                    gemm_amx_k_step(a + (size_t)q * GEMM_AMX_MR * 4, b + (size_t)q * GEMM_AMX_NR * 4, AMX_LOOP_ONCE);
                    for (int r = 0; r < rows_per_step && pend_row < GEMM_AMX_MR; r++, pend_row++) {
                        const float *src = stage[pend_buf] + pend_row * GEMM_AMX_NR;
                        float *dst = pend + (size_t)pend_row * ldc;
                        _mm512_storeu_ps(dst, _mm512_load_ps(src));
                        _mm512_storeu_ps(dst + 16, _mm512_load_ps(src + 16));
                    }
                    if (next_c != NULL) {
                        for (int r = s * fetch_rows; r < (s + 1) * fetch_rows && r < GEMM_AMX_MR; r++) {
                            gemm_fetch_rows(1, GEMM_AMX_NR, next_c + (size_t)r * ldc, ldc, 0, 0);
                        }
                    }
                }
                for (; pend_row < GEMM_AMX_MR; pend_row++) {
                    memcpy(pend + (size_t)pend_row * ldc, stage[pend_buf] + pend_row * GEMM_AMX_NR, GEMM_AMX_NR * 4);
                }
                gemm_amx_store_c(stage[cur], GEMM_AMX_NR);
                pend = c + (size_t)ir * ldc + jr, pend_buf = cur, pend_row = 0, cur ^= 1;
            }
        }
    }
    for (; pend_row < GEMM_AMX_MR; pend_row++) {
        memcpy(pend + (size_t)pend_row * ldc, stage[pend_buf] + pend_row * GEMM_AMX_NR, GEMM_AMX_NR * 4);
    }
}

// direct: gemm_tile_amx's k loop (checkerboard included), the accumulators zeroed at the start
// and stored straight to C at the end by tile stores, with the next tile's rows of C fetched
// (gemm_fetch_rows) by x->fetch: 1 into L2, as gemm_tile_amx; 2 into L1; 3 into L1 for writing
// (prefetchw where the build has it: the tile stores then need no read for ownership), spread
// over the k steps, or (4, 5) over the second half of them only, into L1 and into L1 for writing;
// 6: into L2, the tile after the next (twice the distance); 7: no fetch, the accumulators stored to an L1
// staging tile and copied to C by non-temporal stores (no read for ownership: the bound for C
// written once and not read soon).
enum { COLD_REGIONS = 192 };  // 192 MiB a thread at mc 256, ldc 1024: past any L3 seen
GEMM_AMX_TARGET
static void direct_block(const variant *x, const char *abuf, const char *bbuf, float *c0, int reps) {
    const int kw = x->kw, steps = kw / GEMM_AMX_KP, ldc = x->ldc, late = x->fetch >= 4;
    const int first = late ? steps / 2 : 0, fetch_rows = (GEMM_AMX_MR + (steps - first) - 1) / (steps - first);
    const int ahead = x->fetch == 6 ? 2 : 1, stream = x->fetch == 7;
    float stage[GEMM_AMX_MR * GEMM_AMX_NR] __attribute__((aligned(64)));
    static __thread int region = 0;
    for (int rep = 0; rep < reps; rep++) {
        float *c = c0 + (x->cold ? (size_t)(region++ % COLD_REGIONS) * x->mc * ldc : 0);
        for (int jr = 0; jr < x->nc; jr += GEMM_AMX_NR) {
            for (int ir = 0; ir < x->mc; ir += GEMM_AMX_MR) {
                const char *a = abuf + (size_t)ir * kw * 4, *b = bbuf + (size_t)jr * kw * 4;
                const int reverse = checkerboard(kw, ir, jr);
                const float *next_c = x->fetch && !stream ? tile_ahead(x, c, ir, jr, ahead) : NULL;
                float *ct = c + (size_t)ir * ldc + jr;
                zero_accumulators();
                for (int s = 0; s < steps; s++) {
                    const int q = (reverse ? steps - 1 - s : s) * GEMM_AMX_KP;
                    const char *aq = a + (size_t)q * GEMM_AMX_MR * 4, *bq = b + (size_t)q * GEMM_AMX_NR * 4;
                    if (next_c != NULL && s >= first) {
                        for (int r = (s - first) * fetch_rows; r < (s - first + 1) * fetch_rows && r < GEMM_AMX_MR; r++) {
                            const float *row = next_c + (size_t)r * ldc;
                            if (x->fetch == 1 || x->fetch == 6) {
                                gemm_fetch_rows(1, GEMM_AMX_NR, row, ldc, 0, 0);
                            } else if (x->fetch == 2 || x->fetch == 4) {
                                gemm_fetch_rows(1, GEMM_AMX_NR, row, ldc, 0, 1);
                            } else {
                                gemm_fetch_rows(1, GEMM_AMX_NR, row, ldc, 1, 1);
                            }
                        }
                    }
                    gemm_amx_k_step(aq, bq, AMX_LOOP_ONCE);
                }
                if (stream) {
                    gemm_amx_store_c(stage, GEMM_AMX_NR);
                    for (int r = 0; r < GEMM_AMX_MR; r++) {
                        _mm512_stream_ps(ct + (size_t)r * ldc, _mm512_load_ps(stage + r * GEMM_AMX_NR));
                        _mm512_stream_ps(ct + (size_t)r * ldc + 16, _mm512_load_ps(stage + r * GEMM_AMX_NR + 16));
                    }
                    continue;
                }
                gemm_amx_store_c(ct, ldc);
            }
        }
    }
    if (stream) { _mm_sfence(); }
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

// beside, modes 4 and 5: the pass over c_pass's 1024 results with the next product (into c_next,
// 32 x 32 over 32 pairs, tiles 0-7 as attn_amx_product) threaded through it: one TDPBF16PS and
// its loads every `every` vectors (mode 4: 8, spread over the pass), or all eight before the
// pass's first vector and stored after its last (mode 5, every = 0). c_next is not read by the
// passes. If the tile unit ran beside the vector units, this would cost the longer of the two.
static inline void beside_dp(int t, const uint32_t *a, const uint32_t *b) {
    const int p = t / 4 * 16;  // the product's eight TDPBF16PS, in order
    switch (t % 4) {
    case 0: GEMM_AMX_LOAD(4, a + p, 32 * 4); GEMM_AMX_LOAD(6, b + p * 32, 32 * 4); GEMM_AMX_DP(0, 4, 6); break;
    case 1: GEMM_AMX_LOAD(7, b + p * 32 + 16, 32 * 4); GEMM_AMX_DP(1, 4, 7); break;
    case 2: GEMM_AMX_LOAD(5, a + 16 * 32 + p, 32 * 4); GEMM_AMX_DP(2, 5, 6); break;
    case 3: GEMM_AMX_DP(3, 5, 7); break;
    }
}

GEMM_AMX_TARGET static float beside_interleaved(float *c_pass, float *c_next, const uint32_t *a, const uint32_t *b,
                                                int every) {
    vfloat acc = vec_set1(0.0f);
    GEMM_AMX_ZERO(0); GEMM_AMX_ZERO(1); GEMM_AMX_ZERO(2); GEMM_AMX_ZERO(3);
    for (int t = 0; every == 0 && t < 8; t++) { beside_dp(t, a, b); }
    for (int i = 0, step = 0; i < 1024; i += VEC_WIDTH, step++) {
        if (every > 0 && step % every == 0 && step / every < 8) { beside_dp(step / every, a, b); }
        const vfloat e = vec_exp(vec_load(c_pass + i) * vec_set1(1e-3f));
        vec_store(c_pass + i, e);
        acc += e;
    }
    GEMM_AMX_STORE(0, c_next, 32 * 4); GEMM_AMX_STORE(1, c_next + 16, 32 * 4);
    GEMM_AMX_STORE(2, c_next + 16 * 32, 32 * 4); GEMM_AMX_STORE(3, c_next + 16 * 32 + 16, 32 * 4);
    return vec_sum(acc);
}

// beside: ns per product and pass, by mode: 0 product alone, 1 pass alone, 2 alternated,
// 3 four products then their four passes, 4 and 5 each pass with the next product threaded
// through it (beside_interleaved; c's second half holds those products). A product is
// attention's (attn_amx_product): 32 x 32 results from a (32 rows of kw pair words) and b (kw
// rows of 32 words), both in L1.
static double beside_ns(int mode, const uint32_t *a, const uint32_t *b, int kw, float *c) {
    const int reps = 20000;
    float keep = 0.0f;
    const double t0 = now_seconds();
    for (int r = 0; r < reps; r += 4) {
        for (int i = 0; i < 4; i++) {
            if (mode >= 4) {
                keep += beside_interleaved(c + i * 1024, c + (4 + (i + 1) % 4) * 1024, a, b, mode == 4 ? 8 : 0);
                continue;
            }
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
    float *a = buffer((size_t)GEMM_AMX_MR * kw), *b = buffer((size_t)GEMM_AMX_NR * kw), *c = buffer(8 * 1024);
    fill_pairs(a, (size_t)GEMM_AMX_MR * kw, 7);
    fill_pairs(b, (size_t)GEMM_AMX_NR * kw, 8);
    for (int i = 0; i < 4 * 1024; i++) { c[i] = 0.5f; }
    gemm_amx_thread_init();
    static const char *names[] = {"product alone", "pass alone", "alternated", "4 products, 4 passes",
                                  "next product spread", "next product first"};
    double best[6] = {1e30, 1e30, 1e30, 1e30, 1e30, 1e30};
    for (int r = 0; r < rounds; r++) {
        for (int m = 0; m < 6; m++) {
            const double ns = beside_ns(m, (const uint32_t *)a, (const uint32_t *)b, kw, c);
            best[m] = ns < best[m] ? ns : best[m];
        }
    }
    printf("\nbeside: a 32 x 32 product of %d pairs and a vector pass over its results, one thread, best of %d rounds\n",
           kw, rounds);
    for (int m = 0; m < 6; m++) { printf("  %-22s %7.1f ns\n", names[m], best[m]); }
    printf("  against the two alone: alternated %.2fx, next product spread %.2fx, first %.2fx (below 1: they overlap)\n",
           best[2] / (best[0] + best[1]), best[4] / (best[0] + best[1]), best[5] / (best[0] + best[1]));
    free(a);
    free(b);
    free(c);
}

// Flops a thread runs per variant and round (AMX_LOOP_GFLOP, default 4: milliseconds a variant; more
// where the host's speed moves within milliseconds).
static double work_flops = 4e9;

// One round of variant x on every thread: GFLOP/s per thread.
static double time_variant(const variant *x) {
    const double flops_per_rep = 4.0 * x->mc * x->nc * x->kw;  // 2 flops x 2 k's a pair
    const int reps = (int)(work_flops / flops_per_rep) + 1;
    double t0 = 0.0, t1 = 0.0;
    #pragma omp parallel
    {
        float *a = buffer((size_t)x->mc * x->kw), *b = buffer((size_t)x->nc * x->kw);
        const size_t cwords = (size_t)x->mc * x->ldc * (x->cold ? COLD_REGIONS : 1);
        float *c = buffer(cwords);
        fill_pairs(a, (size_t)x->mc * x->kw, 1 + omp_get_thread_num());
        fill_pairs(b, (size_t)x->nc * x->kw, 101 + omp_get_thread_num());
        memset(c, 0, cwords * sizeof(float));
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
                bare_block(x->mc, x->nc, x->kw, (const char *)a, (const char *)b, n, x->end);
            } else if (x->mode == DIRECT) {
                direct_block(x, (const char *)a, (const char *)b, c, n);
            } else if (x->mode == ILS) {
                ils_block(x, (const char *)a, (const char *)b, c, n);
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
    const char *gflop = getenv("AMX_LOOP_GFLOP");
    if (gflop != NULL) { work_flops = 1e9 * (double)parse_count_or_die("AMX_LOOP_GFLOP", gflop, 1, 100000); }
    if (!gemm_amx_available()) {
        printf("amx_tile_loop: this CPU (or OS) has no AMX: nothing to time\n");
        return 0;
    }
    const int threads = omp_get_max_threads();
    amx_peak_tiles(0);  // filled here, before the threads read it
#define V(m, k, e, ci, f) {.mode = m, .kw = k, .mc = 256, .nc = 1024, .ldc = 1024, .end = e, .cin = ci, .fetch = f}
#define VC(k, f) {.mode = DIRECT, .kw = k, .mc = 256, .nc = 1024, .ldc = 1024, .fetch = f, .cold = 1}
    static const variant variants[] = {
        V(PEAK, 384, 0, 0, 0),              V(PEAK_ZEROS, 384, 0, 0, 0),
        V(BARE, 384, END_NONE, 0, 0),       V(BARE, 192, END_NONE, 0, 0),        V(BARE, 128, END_NONE, 0, 0),
        V(BARE, 384, REV, 0, 0),            V(BARE, 384, END_STORE | REV, 0, 0), V(BARE, 384, END_DRAIN | REV, 0, 0),
        V(BARE, 384, END_PIPE | REV, 0, 0), V(BARE, 128, END_DRAIN, 0, 0),       V(BARE, 128, END_PIPE, 0, 0),
        V(SCRATCH, 384, 0, 0, 0),           V(SCRATCH, 192, 0, 1, 0),            V(SCRATCH, 128, 0, 0, 0),
        V(TILE, 384, 0, 0, 0),              V(TILE, 384, 0, 0, 1),               V(TILE, 128, 0, 0, 1),
        V(ILS, 384, 0, 0, 1),               V(DIRECT, 384, 0, 0, 1),             V(DIRECT, 384, 0, 0, 3),
        V(DIRECT, 384, 0, 0, 7),
        VC(384, 0),                         VC(384, 1),                          VC(384, 6),
        VC(384, 7),                         VC(192, 1),                          VC(192, 7),
        VC(128, 1),                         VC(128, 7),
    };
#undef V
#undef VC
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
    printf("%-12s %4s %4s %5s %5s %3s %5s  %6s %6s  GFLOP/s a thread\n", "variant", "kw", "mc", "nc", "ldc", "cin", "fetch",
           "best", "mean");
    for (int v = 0; v < NV; v++) {
        const variant *x = &variants[v];
        char name[32];
        snprintf(name, sizeof(name), "%s%s%s", mode_names[x->mode], x->mode == BARE ? end_names[x->end] : "", x->cold ? "-cold" : "");
        printf("%-12s %4d %4d %5d %5d %3d %5d  %6.0f %6.0f\n", name, x->kw, x->mc, x->nc, x->ldc, x->cin,
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
