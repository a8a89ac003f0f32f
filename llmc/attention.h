/*
Causal multi-head self-attention, flash-style: tiled, vectorized, OpenMP-parallel.

qkv is (B, T, 3C): for each position the query, key and value vectors side by
side, each (C) = NH heads of hs = C / NH channels; head h of the query of
position t is qkv[(b*T + t)*3C + h*hs], its key is C further, its value 2C.

The (T, T) attention matrix is never stored. The forward pass keeps only the
log-sum-exp of each softmax row, lse (B, NH, T); the backward pass recomputes
the probabilities from it: p = exp(q.k * scale - lse). Memory stays O(B*T*C):
each thread works in fixed-size tiles on its stack, and in bf16 the backward
packs a head's queries and dout once into a buffer of its own (O(T*hs) words a
thread, allocated by the first backward).

How the work is laid out (the simple, obviously correct version of both
kernels is version 1 in dev/cpu/attention_forward.c and attention_backward.c,
which also time every step against it and against a (T,T)-materializing one):
- Every product is a small matrix product whose inner step broadcasts R
  scalars of one operand and multiplies them with two vectors of the other,
  held in R x 2 vector accumulators (attn_tile; these and the packing are in
  attention_kernel.h). The broadcast side needs no
  padding, so any hs works; operands are packed into contiguous tiles on the
  stack first, because rows of qkv are 3C floats apart (a multiple of a large
  power of two): read in place they would share few cache sets and each need a
  page of its own. Transposed packing goes VW x VW blocks at a time through
  registers (attn_transpose).
- Forward: a tile is W = 2 vectors of queries of one head, packed transposed
  (Q^T, hs x W) so that scores come out as S^T (keys x queries): the softmax
  statistics of W queries are then plain vectors (no horizontal reductions),
  updated online one block of BK keys at a time. The output is accumulated
  transposed too (O^T = V^T P^T) and transposed back once at the end. A group
  of up to G tiles (128 queries) shares each packed key and value block; a task
  takes groups i and n-1-i together, so that all tasks cost the same under the
  causal mask. Small problems get smaller groups, so that there are enough tasks.
  In bf16 with at least 8 heads per thread, a task is a whole head instead, whose
  keys and values are packed once for all its groups (every head costs the same).
- Backward: a task is one head, walked key block by key block (outer) and query
  block by query block (inner, only blocks at or below the diagonal); in bf16 the
  query side (Q and dout as pairs) is packed for all of the head's query blocks
  first, since each query block meets every key block up to its own. dK and dV
  of the key block stay in stack tiles for the whole inner loop; dQ of the query
  block is added into dqkv after each pair of blocks (AMX: summed on the tiles in
  the thread's buffer, into dqkv once the head is done). With one head per task no
  two threads ever write the same element: no atomics, and the result does not
  depend on the thread count or schedule. Every head costs the same, so B*NH
  heads keep the threads evenly busy when B*NH is a multiple of their number
  (for GPT-2, B*NH = 12B); otherwise the last round of heads leaves some idle.
- Vectors, exp and the other helpers are llmc/vecmath.h's (vec_exp: within
  1.01 ulp of expf; masked scores arrive as -inf and give exactly 0).

bf16 (--precision bf16, matmul_set_precision): the six products take their operands rounded to
bf16 (nearest even) and sum in fp32: Q, K, V, dout, and P and dS as they are computed; the
softmax, D and dS itself stay fp32. They are packed as pair words for vdpbf16ps, or on the
emulated path as each pair's two halves, high first, for the fp32 tiles (see "bf16" in
llmc/attention_kernel.h). The forward rounds p = exp(score - m) as it feeds the product with V, m the running
maximum of the online softmax after the key's block of ATTN_BK (FlashAttention-2's order; the
reference, scripts/reference/gpt2_reference.py, computes the same m); the backward rounds P = exp(score -
lse), which it recomputes.

On the amx path (precision.h) the same operands go through AMX tiles as whole-block products
(attention_kernel.h's attn_amx_product: a forward tile's scores against a key block, O^T += V^T P^T;
per backward block pair S, dP, dV^T, dK^T, dQ), each followed by its vector pass (masking and the
running maximum, exp, dS, dQ's scaling). Operands are padded to whole tiles with zero words; P and
dS are computed for the whole diagonal block and masked to 0 there, so the products need no ragged
edge. The tiles' sums are not vdpbf16ps's bits: that path is checked at the bf16 tolerances.

Limits: hs <= 128 and T <= 8192 (sizes of the stack tiles; both calls die
beyond them). Stack per thread: about 250 KB forward and 380 KB backward (GCC 12's
-fstack-usage, AVX2 or AVX-512, the packing's frames included); a thread's default stack is 2-8 MB.

Vector width: ATTN_VW = VEC_WIDTH (vecmath.h: 16 floats with AVX-512, 8 with AVX,
4 otherwise; -DVEC_WIDTH=N forces one, so each width can be tested on any x86-64).
*/
#pragma once

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "attention_kernel.h"  // tile sizes, the register tiles (fp32, bf16) and the packing
#include "utils.h"
#include "vecmath.h"

// All vector helpers are static and inlined, so passing vectors by value has no ABI to keep.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

static void attn_check_shape(int T, int C, int NH) {
    if (NH <= 0 || C % NH != 0 || C / NH > ATTN_MAX_HS) {
        die("attention: head size C/NH = %d/%d must be a whole number <= %d", C, NH, ATTN_MAX_HS);
    }
    if (T > ATTN_MAX_T) { die("attention: sequence length T = %d is over the supported %d", T, ATTN_MAX_T); }
}

// bf16 packs a head's operands once into a buffer per thread (the backward's query side, the
// forward's keys and values where a task is a whole head), grown in serial code as T and hs
// need (the first call of a run allocates it), like the GEMM's packing buffers.
#define ATTN_MAX_THREADS 256
static uint32_t *attn_ws[ATTN_MAX_THREADS];
static size_t attn_ws_words;  // of each thread's buffer

// Makes sure threads 0..nth-1 have buffers of at least `words`.
static void attn_workspace(int nth, size_t words) {
    if (nth > ATTN_MAX_THREADS) { die("attention: %d threads, at most %d supported", nth, ATTN_MAX_THREADS); }
    if (words > attn_ws_words) {
        for (int t = 0; t < ATTN_MAX_THREADS; t++) { free(attn_ws[t]); attn_ws[t] = NULL; }
        attn_ws_words = words;
    }
    for (int t = 0; t < nth; t++) {
        if (attn_ws[t] == NULL) { attn_ws[t] = aligned_alloc_or_die(attn_ws_words * sizeof(uint32_t), "attention workspace"); }
    }
}

// This thread's buffer (inside the parallel region), and the thread count (outside it).
static uint32_t *attn_thread_ws(void) {
#ifdef _OPENMP
    return attn_ws[omp_get_thread_num()];
#else
    return attn_ws[0];
#endif
}
static int attn_max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

// ----------------------------------------------------------------------------
// forward

// s, the scores of key j against queries q .. q+VW-1, with -inf where the key comes after the query.
VEC_INLINE vfloat attn_fwd_mask(vfloat s, int j, int q) {
    if (j <= q) { return s; }  // no query of this vector precedes key j
    vint masked = attn_iota() + q < j;
    const vfloat neg_inf = (vfloat){0} - INFINITY;
    return (vfloat)(((vint)s & ~masked) | ((vint)neg_inf & masked));
}

// Scores of R keys (rows of S^T) against a tile's W queries, masked where the
// key comes after the query, stored to st; mx collects the column maxima.
// k points at the first key (rows ldk apart), qt at the tile's Q^T (K rows of W),
// j0 and q0 are the positions of the first key and the first query.
VEC_INLINE void attn_fwd_scores(const int R, float *st, vfloat mx[2], const void *k, ptrdiff_t ldk,
                                 const void *qt, int K, int j0, int q0, attn_arith arith) {
    vfloat acc[ATTN_R][2] = {{{0}}};
    attn_product(R, acc, k, ldk, 1, qt, ATTN_W, K, arith);
    for (int r = 0; r < R; r++) {
        for (int v = 0; v < 2; v++) {
            const vfloat s = attn_fwd_mask(acc[r][v], j0 + r, q0 + v * ATTN_VW);
            *(vfloat *)(st + r * ATTN_W + v * ATTN_VW) = s;
            mx[v] = vec_max(mx[v], s);
        }
    }
}

// AMX: the scores of nk keys (k: rows of kp pairs) against a tile's queries (qt: Q^T's pair rows)
// as one block product into st, then masked as attn_fwd_scores does; mx collects the maxima.
static void attn_fwd_scores_amx(float *st, vfloat mx[2], const uint32_t *k, const uint32_t *qt, int kp, int nk,
                                int j0, int q0) {
    attn_amx_product(st, ATTN_W, k, kp, qt, ATTN_W, attn_round16(nk), ATTN_W, kp, 0);
    for (int j = 0; j < nk; j++) {
        for (int v = 0; v < 2; v++) {
            vfloat *s = (vfloat *)(st + j * ATTN_W + v * ATTN_VW);
            *s = attn_fwd_mask(*s, j0 + j, q0 + v * ATTN_VW);
            mx[v] = vec_max(mx[v], *s);
        }
    }
}

// ot rows d .. d+R-1 (of O^T, hs x W) = alpha * ot + sum over the keys of V^T[d][key] * pt[key],
// v pointing at V^T's row d (v_r per row, v_k per key; pairs of keys in bf16), pt = P^T (keys x W).
VEC_INLINE void attn_fwd_values(const int R, float *ot, const vfloat alpha[2], const void *v, ptrdiff_t v_r,
                                 ptrdiff_t v_k, const void *pt, int K, attn_arith arith) {
    vfloat acc[ATTN_R][2];
    for (int r = 0; r < R; r++) {
        acc[r][0] = *(vfloat *)(ot + r * ATTN_W) * alpha[0];
        acc[r][1] = *(vfloat *)(ot + r * ATTN_W + ATTN_VW) * alpha[1];
    }
    attn_product(R, acc, v, v_r, v_k, pt, ATTN_W, K, arith);
    for (int r = 0; r < R; r++) {
        *(vfloat *)(ot + r * ATTN_W) = acc[r][0];
        *(vfloat *)(ot + r * ATTN_W + ATTN_VW) = acc[r][1];
    }
}

// bf16, where a task is a whole head: its keys and values packed once for all its query groups
// (each key block is met by every group from its own on: 4.5 times on average at T=1024 in
// groups of 128 queries). Per block of BK keys: K as pairs of channels (k2: rows kw words apart,
// blk_k words a block) and V as rows of key pairs (v2[p*hs + d]; split: two float rows a pair)
// or as V^T with the pairs of keys along its rows (AMX: v2[d*BK/2 + p]), blk_v words a block.
struct attn_fwd_keys {
    const uint32_t *k2, *v2;
    ptrdiff_t blk_k, blk_v;
};

// The layout of struct attn_fwd_keys for head size hs (no buffer yet), and its words for T positions.
static struct attn_fwd_keys attn_fwd_keys_layout(int hs, attn_arith arith) {
    const int amx = arith == ATTN_BF16_AMX, kw = amx ? attn_round16((hs + 1) / 2) : attn_k(arith, hs);
    const ptrdiff_t blk_v = amx ? attn_round16(hs) * (ATTN_BK / 2) : hs * attn_k(arith, ATTN_BK);
    const struct attn_fwd_keys K = {NULL, NULL, (ptrdiff_t)ATTN_BK * kw, blk_v};
    return K;
}
static size_t attn_fwd_keys_words(int T, int hs, attn_arith arith) {
    const struct attn_fwd_keys K = attn_fwd_keys_layout(hs, arith);
    return (size_t)((T + ATTN_BK - 1) / ATTN_BK) * (size_t)(K.blk_k + K.blk_v);
}

// Packs the keys and values of a head (k, v: its first key and value, rows C3 apart) into ws.
static struct attn_fwd_keys attn_fwd_pack_keys(uint32_t *ws, const float *k, const float *v, int T, int C, int hs,
                                               attn_arith arith) {
    const int n_blocks = (T + ATTN_BK - 1) / ATTN_BK;
    const ptrdiff_t C3 = 3 * (ptrdiff_t)C;
    struct attn_fwd_keys K = attn_fwd_keys_layout(hs, arith);
    const int kw = (int)(K.blk_k / ATTN_BK);  // words of a key's row
    uint32_t *k2 = ws, *v2 = ws + n_blocks * K.blk_k;
    K.k2 = k2, K.v2 = v2;
    for (int i = 0; i < n_blocks; i++) {
        const int k0 = i * ATTN_BK, nk = attn_min(ATTN_BK, T - k0);
        if (arith == ATTN_BF16_AMX) {
            attn_pack_col_pairs_tiles(k2 + i * K.blk_k, kw, k + k0 * C3, C3, nk, hs);
            attn_pack_pairs_transposed(v2 + i * K.blk_v, ATTN_BK / 2, v + k0 * C3, C3, nk, hs);
        } else {
            attn_pack_col_pairs(arith, k2 + i * K.blk_k, kw, k + k0 * C3, C3, nk, hs);
            attn_pack_row_pairs(arith, v2 + i * K.blk_v, hs, v + k0 * C3, C3, nk, hs);
        }
    }
    return K;
}

// The state of one query tile: queries q0 .. q0+nq-1 in the lanes of two vectors.
struct attn_fwd_tile {
    int q0, nq;
    vfloat m[2];  // running maximum of the scaled scores
    vfloat l[2];  // running sum of exp(score - m)
    union {       // Q^T: qt[d*W + i] = q[q0+i][d]; bf16: qt2[p*W + i] = pair (q[q0+i][2p], q[q0+i][2p+1])
        float qt[ATTN_MAX_HS * ATTN_W];  // (split: qt holds channel d^1 in row d)
        uint32_t qt2[ATTN_MAX_HS * ATTN_W];
    } __attribute__((aligned(64)));
    float ot[ATTN_MAX_HS * ATTN_W] __attribute__((aligned(64)));  // O^T, unnormalized
};

// Queries g0 .. g0 + group_tiles*W - 1 (those < T) of head h of batch element b against keys
// 0 .. their own. The group's query tiles (at most ATTN_G) share each packed block of keys and values.
//
// One pass, the softmax online: O^T is rescaled whenever the maximum grows. bf16 rounds the
// probabilities as they feed the product with V, before they are normalized: p = exp(score -
// m), m the running maximum after the key block (as FlashAttention-2 does); the reference
// computes the same running maxima from the blocks of ATTN_BK keys.
// keys: the head's keys and values packed (bf16), or NULL: each block packed here.
static void attn_fwd_group(float *out, float *lse, const float *qkv, int b, int h, int g0, int group_tiles,
                           int T, int C, int NH, float scale, attn_arith arith, const struct attn_fwd_keys *keys) {
    const int hs = C / NH, hsp = (hs + 1) / 2;  // channels, and their pairs
    const int bf16 = arith != ATTN_FP32, amx = arith == ATTN_BF16_AMX;
    const int kw = amx ? attn_round16(hsp) : attn_k(arith, hs);  // words of a key's packed row (AMX: whole tiles)
    const int hs_rows = amx ? attn_round16(hs) : hs;  // rows of O^T computed (AMX: whole tiles)
    const ptrdiff_t C3 = 3 * (ptrdiff_t)C;
    const float *q = qkv + (size_t)b * T * C3 + h * hs;  // query of position t: q + t*C3
    const float *k = q + C, *v = q + 2 * C;               // key and value likewise
    struct attn_fwd_tile tiles[ATTN_G];
    // K and V of a key block, rows packed hs apart: in qkv they are 3C floats apart, a multiple
    // of a large power of two, so they would share few cache sets and need a page each.
    // bf16: K's rows as pairs of channels (kb2[j*kw + p]), V as rows of key pairs (vb2[p*hs + d]);
    // AMX: V^T with pairs of keys along its rows (vt2[d*BK/2 + p]). Split pairs take the floats' room.
    union { float kb[ATTN_BK * ATTN_MAX_HS]; uint32_t kb2[ATTN_BK * ATTN_MAX_HS]; } __attribute__((aligned(64))) kbu;
    union {
        float vb[ATTN_BK * ATTN_MAX_HS];
        uint32_t vb2[ATTN_BK * ATTN_MAX_HS];
        uint32_t vt2[ATTN_MAX_HS * ATTN_BK / 2];
    } __attribute__((aligned(64))) vbu;
    float st[ATTN_BK * ATTN_W] __attribute__((aligned(64)));  // S^T then P^T of a tile and a key block
    uint32_t pt2[ATTN_BK * ATTN_W] __attribute__((aligned(64)));  // bf16: P^T as rows of key pairs
    const int n_tiles = attn_min(group_tiles, (T - g0 + ATTN_W - 1) / ATTN_W);
    for (int t = 0; t < n_tiles; t++) {
        struct attn_fwd_tile *tile = &tiles[t];
        tile->q0 = g0 + t * ATTN_W;
        tile->nq = attn_min(ATTN_W, T - tile->q0);
        attn_pack_transposed(tile->qt, ATTN_W, q + tile->q0 * C3, C3, tile->nq, hs, arith);
        if (amx) { attn_zero_words(tile->qt2, ATTN_W, hsp, kw, 0, ATTN_W); }
        for (int d = 0; d < hs_rows; d++) {
            for (int i = 0; i < ATTN_W; i++) { tile->ot[d * ATTN_W + i] = 0.0f; }
        }
        for (int u = 0; u < 2; u++) {
            tile->m[u] = (vfloat){0} - INFINITY;
            tile->l[u] = (vfloat){0};
        }
    }
    const int kend = attn_min(g0 + n_tiles * ATTN_W, T);  // keys 0 .. kend-1 are seen by some query
    for (int k0 = 0; k0 < kend; k0 += ATTN_BK) {
        const int nk_block = attn_min(ATTN_BK, kend - k0);
        const uint32_t *kb2 = kbu.kb2, *vb2 = amx ? vbu.vt2 : vbu.vb2;  // bf16: the block's K and V (or V^T)
        if (keys != NULL) {
            kb2 = keys->k2 + k0 / ATTN_BK * keys->blk_k, vb2 = keys->v2 + k0 / ATTN_BK * keys->blk_v;
        } else if (amx) {  // zero words past the keys and channels, to whole tiles
            attn_pack_col_pairs_tiles(kbu.kb2, kw, k + k0 * C3, C3, nk_block, hs);
            attn_pack_pairs_transposed(vbu.vt2, ATTN_BK / 2, v + k0 * C3, C3, nk_block, hs);
        } else if (bf16) {
            attn_pack_col_pairs(arith, kbu.kb2, kw, k + k0 * C3, C3, nk_block, hs);
            attn_pack_row_pairs(arith, vbu.vb2, hs, v + k0 * C3, C3, nk_block, hs);
        } else {
            attn_copy_rows(kbu.kb, hs, k + k0 * C3, C3, nk_block, hs);
            attn_copy_rows(vbu.vb, hs, v + k0 * C3, C3, nk_block, hs);
        }
        for (int t = 0; t < n_tiles; t++) {
            struct attn_fwd_tile *tile = &tiles[t];
            // ATTN_BK is a multiple of W, and so is q0: a block that starts before the tile's
            // last query starts at or before its first, so every query sees a key of the block
            // and its block maximum is finite
            if (k0 >= tile->q0 + tile->nq) { continue; }
            const int nk = attn_min(nk_block, tile->q0 + tile->nq - k0);
            const void *qt = attn_words(bf16, tile->qt, tile->qt2, 0);
            vfloat mx[2];  // block maxima of the raw scores (scale > 0 keeps the order)
            mx[0] = mx[1] = (vfloat){0} - INFINITY;
            if (amx) {
                attn_fwd_scores_amx(st, mx, kb2, tile->qt2, kw, nk, k0, tile->q0);
            } else {
                for (int j0 = 0; j0 < nk; j0 += ATTN_R) {
                    const void *kj = attn_words(bf16, kbu.kb, kb2, j0 * kw);
                    ATTN_WITH_ROWS(attn_min(ATTN_R, nk - j0), attn_fwd_scores, st + j0 * ATTN_W, mx, kj,
                                   kw, qt, kw, k0 + j0, tile->q0, arith);
                }
            }
            vfloat alpha[2], sum[2] = {{0}};
            for (int u = 0; u < 2; u++) {
                const vfloat m_new = vec_max(tile->m[u], mx[u] * scale);
                alpha[u] = vec_exp(tile->m[u] - m_new);  // rescales the sums so far; exp(-inf) = 0 at first
                tile->m[u] = m_new;
            }
            if (amx) {  // O^T = alpha O^T here, two passes before the tile loads of the product with V:
                // a tile load of lines that vector stores have just written waits for those stores
                // to reach L1 (the T=1024 forward 1.03-1.06x faster than with the rescale right before it:
                // attention_ab, four runs on a Xeon VM, 2026-12-06)
                for (int d = 0; d < hs_rows; d++) {
                    for (int u = 0; u < 2; u++) { *(vfloat *)(tile->ot + d * ATTN_W + u * ATTN_VW) *= alpha[u]; }
                }
            }
            for (int j = 0; j < nk; j++) {
                for (int u = 0; u < 2; u++) {
                    vfloat *s = (vfloat *)(st + j * ATTN_W + u * ATTN_VW);
                    *s = vec_exp(*s * scale - tile->m[u]);
                    sum[u] += *s;
                }
            }
            for (int u = 0; u < 2; u++) { tile->l[u] = tile->l[u] * alpha[u] + sum[u]; }
            if (amx) {  // P^T rounded here
                attn_pack_row_pairs_tiles(pt2, ATTN_W, st, ATTN_W, nk, ATTN_W);
            } else if (bf16) {
                attn_pack_row_pairs(arith, pt2, ATTN_W, st, ATTN_W, nk, ATTN_W);
            }
            if (amx) {  // O^T (rescaled above) + V^T P^T as one block product
                const int np = (nk + 1) / 2;
                attn_amx_product(tile->ot, ATTN_W, vb2, ATTN_BK / 2, pt2, ATTN_W, hs_rows, ATTN_W, attn_round16(np), 1);
                continue;
            }
            const void *pt = attn_words(bf16, st, pt2, 0);
            for (int d0 = 0; d0 < hs; d0 += ATTN_R) {
                const void *vd = attn_words(bf16, vbu.vb, vb2, d0);
                ATTN_WITH_ROWS(attn_min(ATTN_R, hs - d0), attn_fwd_values, tile->ot + d0 * ATTN_W, alpha,
                               vd, 1, hs, pt, attn_k(arith, nk), arith);
            }
        }
    }
    for (int t = 0; t < n_tiles; t++) {
        struct attn_fwd_tile *tile = &tiles[t];
        for (int d = 0; d < hs; d++) {
            for (int u = 0; u < 2; u++) { *(vfloat *)(tile->ot + d * ATTN_W + u * ATTN_VW) /= tile->l[u]; }
        }
        attn_transpose(out + ((size_t)b * T + tile->q0) * C + h * hs, C, tile->ot, ATTN_W, tile->nq, hs, 1.0f, ATTN_COPY);
        for (int i = 0; i < tile->nq; i++) {
            const float m = tile->m[i / ATTN_VW][i % ATTN_VW], l = tile->l[i / ATTN_VW][i % ATTN_VW];
            lse[((size_t)b * NH + h) * T + tile->q0 + i] = m + logf(l);
        }
    }
}

// out is (B, T, C), lse is (B, NH, T), qkv is (B, T, 3C).
static void attention_forward(float *out, float *lse, const float *qkv, int B, int T, int C, int NH) {
    attn_check_shape(T, C, NH);
    const float scale = 1.0f / sqrtf((float)(C / NH));
    // Query group i costs about i+1 units under the causal mask; groups i and
    // n_groups-1-i together cost the same for every i, so a task takes one such pair.
    // Tasks are handed out dynamically, which evens out the few unequal ones (the
    // middle group of an odd count, a short last group). Groups are made smaller
    // while that leaves fewer than 8 tasks per thread; a tile's results are the
    // same bits whatever group computes it, and each output is written by one task.
    const int n_tiles = (T + ATTN_W - 1) / ATTN_W, n_threads = attn_max_threads();
    const attn_arith arith = attn_current_arith();
    // bf16 with enough heads to keep the threads evenly busy (every head costs the same): a
    // task is a whole head, whose keys and values are packed once for all its groups
    if (arith != ATTN_FP32 && (size_t)B * NH >= 8 * (size_t)n_threads) {
        const int hs = C / NH, n_groups = (T + ATTN_G * ATTN_W - 1) / (ATTN_G * ATTN_W);
        attn_workspace(n_threads, attn_fwd_keys_words(T, hs, arith));
        #pragma omp parallel for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                const float *k = qkv + (size_t)b * T * 3 * C + C + h * hs;
                const struct attn_fwd_keys keys = attn_fwd_pack_keys(attn_thread_ws(), k, k + C, T, C, hs, arith);
                for (int g = 0; g < n_groups; g++) {
                    attn_fwd_group(out, lse, qkv, b, h, g * ATTN_G * ATTN_W, ATTN_G, T, C, NH, scale, arith, &keys);
                }
            }
        }
        return;
    }
    int group_tiles = ATTN_G;
    while (group_tiles > 1 &&
           (size_t)B * NH * (((n_tiles + group_tiles - 1) / group_tiles + 1) / 2) < 8 * (size_t)n_threads) {
        group_tiles /= 2;
    }
    const int group = group_tiles * ATTN_W;
    const int n_groups = (T + group - 1) / group;
    const int n_pairs = (n_groups + 1) / 2;
    #pragma omp parallel for collapse(3) schedule(dynamic)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int p = 0; p < n_pairs; p++) {
                attn_fwd_group(out, lse, qkv, b, h, p * group, group_tiles, T, C, NH, scale, arith, NULL);
                if (n_groups - 1 - p != p) {
                    attn_fwd_group(out, lse, qkv, b, h, (n_groups - 1 - p) * group, group_tiles, T, C, NH, scale, arith, NULL);
                }
            }
        }
    }
}

// ----------------------------------------------------------------------------
// backward
//
// Per head, with S = scale Q K^T, P = exp(S - lse), dP = dO V^T and
// D_i = dO_i . O_i (= sum_j P_ij dP_ij):
//   dS = P * (dP - D),  dV = P^T dO,  dK = scale dS^T Q,  dQ = scale dS K.

// P = exp(s * scale - lse) of one query's scores s against a vector of keys, 0 for lanes past
// mask_from (on the diagonal, the keys after the query).
VEC_INLINE vfloat attn_bwd_p(vfloat s, float scale, float row_lse, int mask_from) {
    vfloat p = vec_exp(s * scale - row_lse);
    if (mask_from < ATTN_VW - 1) {
        vint masked = attn_iota() > mask_from;
        p = (vfloat)((vint)p & ~masked);
    }
    return p;
}

// The rows of one (query block, key block) tile pair: P and dS of R queries
// against the two key vectors starting at column c of the key block.
// q and go point at the first query's q and dout (rows ldq and ldgo apart, K k's;
// bf16: pairs of channels), kt and vt at column c of K^T and V^T (K rows of BLK),
// lse_i and D_i per row.
VEC_INLINE void attn_bwd_probs(const int R, float *pb, float *dsb, const void *q, ptrdiff_t ldq,
                                const void *go, ptrdiff_t ldgo, const void *kt, const void *vt, int K,
                                const float *row_lse, const float *row_D, float scale, int mask_from,
                                attn_arith arith) {
    vfloat acc[ATTN_R][2] = {{{0}}};
    attn_product(R, acc, q, ldq, 1, kt, ATTN_BLK, K, arith);
    for (int r = 0; r < R; r++) {
        for (int v = 0; v < 2; v++) {
            *(vfloat *)(pb + r * ATTN_BLK + v * ATTN_VW) = attn_bwd_p(acc[r][v], scale, row_lse[r], mask_from + r - v * ATTN_VW);
        }
    }
    vfloat dp[ATTN_R][2] = {{{0}}};
    attn_product(R, dp, go, ldgo, 1, vt, ATTN_BLK, K, arith);
    for (int r = 0; r < R; r++) {
        for (int v = 0; v < 2; v++) {
            const vfloat p = *(vfloat *)(pb + r * ATTN_BLK + v * ATTN_VW);
            *(vfloat *)(dsb + r * ATTN_BLK + v * ATTN_VW) = p * (dp[r][v] - row_D[r]);
        }
    }
}

// grad rows d .. d+R-1 (of dK^T or dV^T, hs x BLK), two key vectors: += sum over K queries
// of X^T[d][query] * w[query], x pointing at X^T's row d (x_r per row, x_k per query; bf16:
// pairs of queries), w at the key vectors of the first query's row of P or dS (rows ldw apart).
VEC_INLINE void attn_bwd_kv(const int R, float *grad, const void *x, ptrdiff_t x_r, ptrdiff_t x_k,
                             const void *w, int K, ptrdiff_t ldw, attn_arith arith) {
    vfloat acc[ATTN_R][2];
    for (int r = 0; r < R; r++) {
        acc[r][0] = *(vfloat *)(grad + r * ATTN_BLK);
        acc[r][1] = *(vfloat *)(grad + r * ATTN_BLK + ATTN_VW);
    }
    attn_product(R, acc, x, x_r, x_k, w, ldw, K, arith);
    for (int r = 0; r < R; r++) {
        *(vfloat *)(grad + r * ATTN_BLK) = acc[r][0];
        *(vfloat *)(grad + r * ATTN_BLK + ATTN_VW) = acc[r][1];
    }
}

// dq rows (R queries, C3 apart), channels c0 .. c0+2VW-1 (those < hs) += scale * dS K:
// ds at the first row of dS (rows ds_r apart, K keys; bf16: pairs of keys), kp at channel c0
// of K's first key (rows ldk apart; bf16: rows of key pairs). first: dq's first key block,
// whose sum is added to zero instead of to dq (no zeroing pass before; the same bits).
VEC_INLINE void attn_bwd_q(const int R, float *dq, ptrdiff_t C3, const void *ds, ptrdiff_t ds_r, const void *kp,
                            ptrdiff_t ldk, int K, int c0, int hs, float scale, int first, attn_arith arith) {
    vfloat acc[ATTN_R][2] = {{{0}}};
    attn_product(R, acc, ds, ds_r, 1, kp, ldk, K, arith);
    for (int r = 0; r < R; r++) {
        for (int v = 0; v < 2; v++) {
            float *dst = dq + r * C3 + c0 + v * ATTN_VW;
            const vfloat add = acc[r][v] * scale;
            if (c0 + (v + 1) * ATTN_VW <= hs) {
                const vfloat base = first ? vec_set1(0.0f) : (vfloat)(*(vfloat_u *)dst);
                *(vfloat_u *)dst = base + add;
            } else {
                for (int i = 0; c0 + v * ATTN_VW + i < hs; i++) { dst[i] = (first ? 0.0f : dst[i]) + add[i]; }
            }
        }
    }
}

static float attn_dot(const float *a, const float *b, int n) {
    vfloat acc = {0};
    int i = 0;
    for (; i + ATTN_VW <= n; i += ATTN_VW) { acc += *(const vfloat_u *)(a + i) * *(const vfloat_u *)(b + i); }
    float s = 0.0f;
    for (; i < n; i++) { s += a[i] * b[i]; }
    for (int u = 0; u < ATTN_VW; u++) { s += acc[u]; }
    return s;
}

// The operands of one head's products, packed per key block and per query block: fp32
// floats, or bf16 pair words (the arrays of a union are used by one precision only; split
// pairs, two floats each, take the floats' room).
struct attn_bwd_operands {
    union {  // K^T of the key block (hs x BLK); bf16: pairs of channels, kt2[p*BLK + j]
        float kt[ATTN_MAX_HS * ATTN_BLK];
        uint32_t kt2[ATTN_MAX_HS * ATTN_BLK];
    } __attribute__((aligned(64)));
    union {  // V^T likewise
        float vt[ATTN_MAX_HS * ATTN_BLK];
        uint32_t vt2[ATTN_MAX_HS * ATTN_BLK];
    } __attribute__((aligned(64)));
    union {  // K (BLK x hs_pad); bf16: pairs of keys, kp2[p*hs_pad + d]
        float kp[ATTN_BLK * ATTN_MAX_HS];
        uint32_t kp2[ATTN_BLK * ATTN_MAX_HS];
    } __attribute__((aligned(64)));
    union {  // each precision uses one of the two
        struct {
            // fp32: Q and dout of the query block, rows packed hs apart: the products read them many
            // times, and their rows 3C and C apart in memory would fall into few cache sets and many
            // pages (bf16 packs them once per head: struct attn_bwd_queries)
            float qb[ATTN_BLK * ATTN_MAX_HS] __attribute__((aligned(64)));
            float gob[ATTN_BLK * ATTN_MAX_HS] __attribute__((aligned(64)));
        };
        struct {
            // bf16: P and dS of a key vector pair, as rows of query pairs (for dV and dK); rows of dS as
            // pairs of keys (for dQ). AMX: P and dS of the whole block (pb2[p*BLK + j]), all rows of dS
            uint32_t pb2[ATTN_BLK * ATTN_BLK] __attribute__((aligned(64)));
            uint32_t dsb2[ATTN_BLK * ATTN_BLK] __attribute__((aligned(64)));
            uint32_t dsr2[ATTN_BLK * ATTN_BLK] __attribute__((aligned(64)));
        };
    };
};

// bf16: the query side of the products, packed once per head rather than once per (key block,
// query block) pair (each query block meets every key block up to its own: 8.5 times on average
// at T=1024): for each query block, Q and dout as pairs of channels (q2, go2: rows ld words
// apart, blk words a block) for P and dP, and as pairs of queries (qt2, got2: blk_t words a
// block) for dK and dV: rows of query pairs (qt2[p*hs + d]; split: two float rows a pair), or on AMX with the
// pairs along each channel's row (qt2[d*BLK/2 + p]) and every block padded with zero words to
// whole tiles. In this thread's buffer (attn_workspace).
struct attn_bwd_queries {
    uint32_t *q2, *go2, *qt2, *got2;
    ptrdiff_t ld, blk, blk_t;
    float *dq;  // AMX: the head's dQ / scale, summed on the tiles over the key blocks (rows hs_pad apart)
};

// The layout of struct attn_bwd_queries for head size hs (no buffer yet), and its words for T positions.
static struct attn_bwd_queries attn_bwd_queries_layout(int hs, attn_arith arith) {
    const int amx = arith == ATTN_BF16_AMX, ld = amx ? attn_round16((hs + 1) / 2) : attn_k(arith, hs);
    const ptrdiff_t blk_t = amx ? attn_round16(hs) * (ATTN_BLK / 2) : hs * attn_k(arith, ATTN_BLK);
    const struct attn_bwd_queries Q = {NULL, NULL, NULL, NULL, ld, (ptrdiff_t)ATTN_BLK * ld, blk_t, NULL};
    return Q;
}
static size_t attn_bwd_queries_words(int T, int hs, attn_arith arith) {
    const struct attn_bwd_queries Q = attn_bwd_queries_layout(hs, arith);
    const size_t n_blocks = (size_t)((T + ATTN_BLK - 1) / ATTN_BLK), hs_pad = (size_t)((hs + ATTN_W - 1) / ATTN_W * ATTN_W);
    return n_blocks * 2 * (size_t)(Q.blk + Q.blk_t) + (arith == ATTN_BF16_AMX ? n_blocks * ATTN_BLK * hs_pad : 0);
}

// Packs the query side of head (q: its first query, rows C3 apart; go: its first dout row, C apart) into ws.
static struct attn_bwd_queries attn_bwd_pack_queries(uint32_t *ws, const float *q, const float *go, int T, int C,
                                                     int hs, attn_arith arith) {
    const ptrdiff_t C3 = 3 * (ptrdiff_t)C;
    struct attn_bwd_queries Q = attn_bwd_queries_layout(hs, arith);
    const int n_blocks = (T + ATTN_BLK - 1) / ATTN_BLK;
    Q.q2 = ws, Q.go2 = ws + n_blocks * Q.blk;
    Q.qt2 = Q.go2 + n_blocks * Q.blk, Q.got2 = Q.qt2 + n_blocks * Q.blk_t;
    if (arith == ATTN_BF16_AMX) { Q.dq = (float *)(Q.got2 + n_blocks * Q.blk_t); }
    for (int i = 0; i < n_blocks; i++) {
        const int q0 = i * ATTN_BLK, nq = attn_min(ATTN_BLK, T - q0);
        uint32_t *q2 = Q.q2 + i * Q.blk, *go2 = Q.go2 + i * Q.blk, *qt2 = Q.qt2 + i * Q.blk_t, *got2 = Q.got2 + i * Q.blk_t;
        if (arith == ATTN_BF16_AMX) {
            attn_pack_col_pairs_tiles(q2, Q.ld, q + q0 * C3, C3, nq, hs);
            attn_pack_col_pairs_tiles(go2, Q.ld, go + q0 * C, C, nq, hs);
            attn_pack_pairs_transposed(qt2, ATTN_BLK / 2, q + q0 * C3, C3, nq, hs);
            attn_pack_pairs_transposed(got2, ATTN_BLK / 2, go + q0 * C, C, nq, hs);
        } else {
            attn_pack_col_pairs(arith, q2, Q.ld, q + q0 * C3, C3, nq, hs);
            attn_pack_col_pairs(arith, go2, Q.ld, go + q0 * C, C, nq, hs);
            attn_pack_row_pairs(arith, qt2, hs, q + q0 * C3, C3, nq, hs);
            attn_pack_row_pairs(arith, got2, hs, go + q0 * C, C, nq, hs);
        }
    }
    return Q;
}

// AMX: the products of one (query block, key block) pair as block products on tiles, each
// followed by its vector pass; the operands of the key block (kt2, vt2, kp2) are packed, padded
// with zero words to whole tiles, and pb, dsb, dkt, dvt are attn_bwd_head's. P and dS are
// computed for the whole block, 0 on the diagonal where the key comes after the query, so the
// products to dV, dK and dQ need no ragged edge. Q holds the query side (i: the query block) and
// the head's dQ sums; first: dQ's first key block (its sums start from zero).
static void attn_bwd_block_amx(struct attn_bwd_operands *op, const struct attn_bwd_queries *Q, int i, float *pb,
                               float *dsb, float *dkt, float *dvt, const float *row_lse, const float *row_D, int nq,
                               int nk, int diag, int first, int hs, float scale) {
    const int kp = (int)Q->ld, hs_rows = attn_round16(hs);
    const int hs_pad = (hs + ATTN_W - 1) / ATTN_W * ATTN_W, nq16 = attn_round16(nq);
    // S = Q K^T into pb and dP = dout V^T into dsb, then P and dS in their place
    attn_amx_product(pb, ATTN_BLK, Q->q2 + i * Q->blk, kp, op->kt2, ATTN_BLK, nq16, ATTN_BLK, kp, 0);
    attn_amx_product(dsb, ATTN_BLK, Q->go2 + i * Q->blk, kp, op->vt2, ATTN_BLK, nq16, ATTN_BLK, kp, 0);
    for (int i = 0; i < nq; i++) {
        for (int c = 0; c < ATTN_BLK; c += ATTN_VW) {
            vfloat *p = (vfloat *)(pb + i * ATTN_BLK + c), *ds = (vfloat *)(dsb + i * ATTN_BLK + c);
            *p = attn_bwd_p(*p, scale, row_lse[i], diag ? i - c : ATTN_BLK);
            *ds = *p * (*ds - row_D[i]);
        }
    }
    // dV^T += dout^T P and dK^T += Q^T dS over the block's pairs of queries
    const int kq = attn_round16((nq + 1) / 2);
    attn_pack_row_pairs_tiles(op->pb2, ATTN_BLK, pb, ATTN_BLK, nq, ATTN_BLK);
    attn_pack_row_pairs_tiles(op->dsb2, ATTN_BLK, dsb, ATTN_BLK, nq, ATTN_BLK);
    attn_amx_product(dvt, ATTN_BLK, Q->got2 + i * Q->blk_t, ATTN_BLK / 2, op->pb2, ATTN_BLK, hs_rows, ATTN_BLK, kq, 1);
    attn_amx_product(dkt, ATTN_BLK, Q->qt2 + i * Q->blk_t, ATTN_BLK / 2, op->dsb2, ATTN_BLK, hs_rows, ATTN_BLK, kq, 1);
    // dQ / scale += dS K over the key block's pairs of keys, on the tiles (scaled into dqkv once
    // the head is done: attn_bwd_head)
    const int kk = attn_round16((nk + 1) / 2);
    attn_pack_col_pairs_tiles(op->dsr2, ATTN_BLK / 2, dsb, ATTN_BLK, nq, nk);
    attn_amx_product(Q->dq + (ptrdiff_t)i * ATTN_BLK * hs_pad, hs_pad, op->dsr2, ATTN_BLK / 2, op->kp2, hs_pad, nq16,
                     hs_pad, kk, !first);
}

// All of head h of batch element b.
static void attn_bwd_head(float *dqkv, const float *dout, const float *out, const float *lse,
                          const float *qkv, int b, int h, int T, int C, int NH, float scale, attn_arith arith) {
    const int hs = C / NH, hsp = (hs + 1) / 2;  // channels, and their pairs
    const int bf16 = arith != ATTN_FP32, amx = arith == ATTN_BF16_AMX;
    const int hs_pad = (hs + ATTN_W - 1) / ATTN_W * ATTN_W;  // K's rows padded to whole tiles
    const int hs_rows = amx ? attn_round16(hs) : hs;          // rows of dK^T and dV^T computed
    const ptrdiff_t C3 = 3 * (ptrdiff_t)C;
    const size_t head = (size_t)b * T * C3 + h * hs;  // query of position t at head + t*C3, key +C, value +2C
    const float *q = qkv + head, *k = q + C, *v = q + 2 * C;
    float *dq = dqkv + head, *dk = dq + C, *dv = dq + 2 * C;
    const float *go = dout + (size_t)b * T * C + h * hs;  // dout and out of position t: + t*C
    const float *o = out + (size_t)b * T * C + h * hs;
    const float *head_lse = lse + ((size_t)b * NH + h) * T;
    struct attn_bwd_operands op;
    float dkt[ATTN_MAX_HS * ATTN_BLK] __attribute__((aligned(64)));  // dK^T / scale
    float dvt[ATTN_MAX_HS * ATTN_BLK] __attribute__((aligned(64)));  // dV^T
    float pb[ATTN_BLK * ATTN_BLK] __attribute__((aligned(64)));      // P of a tile pair (queries x keys)
    float dsb[ATTN_BLK * ATTN_BLK] __attribute__((aligned(64)));     // dS / scale
    float head_D[ATTN_MAX_T];  // D_i = dout_i . out_i of every query of the head
    for (int i = 0; i < T; i++) {
        attn_prefetch_row(go, C, i + ATTN_PF_AHEAD, T, hs, 0);
        attn_prefetch_row(o, C, i + ATTN_PF_AHEAD, T, hs, 0);
        head_D[i] = attn_dot(go + i * C, o + i * C, hs);
    }
    struct attn_bwd_queries Q = {0};
    if (bf16) { Q = attn_bwd_pack_queries(attn_thread_ws(), q, go, T, C, hs, arith); }
    const int K_hs = attn_k(arith, hs);  // k steps of the products over channels
    const ptrdiff_t ld_qb = K_hs;
    for (int k0 = 0; k0 < T; k0 += ATTN_BLK) {
        const int nk = attn_min(ATTN_BLK, T - k0);
        attn_pack_transposed(op.kt, ATTN_BLK, k + k0 * C3, C3, nk, hs, arith);  // keys past T: 0
        attn_pack_transposed(op.vt, ATTN_BLK, v + k0 * C3, C3, nk, hs, arith);
        if (bf16) {  // K's key pairs; the products read channels up to hs_pad, rows up to attn_k(nk)
            attn_pack_row_pairs(arith, op.kp2, hs_pad, k + k0 * C3, C3, nk, hs);
            attn_zero_words(op.kp2, hs_pad, 0, attn_k(arith, nk), hs, hs_pad);
            if (amx) {  // zero words to whole tiles: pairs of channels in K^T and V^T, pairs of keys in K
                const int hsp16 = attn_round16(hsp), nkp = (nk + 1) / 2;
                attn_zero_words(op.kt2, ATTN_BLK, hsp, hsp16, 0, ATTN_BLK);
                attn_zero_words(op.vt2, ATTN_BLK, hsp, hsp16, 0, ATTN_BLK);
                attn_zero_words(op.kp2, hs_pad, nkp, attn_round16(nkp), 0, hs_pad);
            }
        } else {
            for (int j = 0; j < ATTN_BLK; j++) {
                for (int d = 0; d < hs_pad; d++) { op.kp[j * hs_pad + d] = j < nk && d < hs ? k[(k0 + j) * C3 + d] : 0.0f; }
            }
        }
        for (int d = 0; d < hs_rows; d++) {
            for (int j = 0; j < ATTN_BLK; j++) { dkt[d * ATTN_BLK + j] = dvt[d * ATTN_BLK + j] = 0.0f; }
        }
        // query blocks at and below the diagonal; the first (q0 = k0) is the diagonal one,
        // where query i sees only keys j <= i of the block
        for (int q0 = k0; q0 < T; q0 += ATTN_BLK) {
            const int nq = attn_min(ATTN_BLK, T - q0);
            const int diag = q0 == k0;
            if (amx) {
                attn_bwd_block_amx(&op, &Q, q0 / ATTN_BLK, pb, dsb, dkt, dvt, head_lse + q0, head_D + q0, nq, nk, diag,
                                   k0 == 0, hs, scale);
                continue;
            }
            // the query block's Q and dout: pairs of channels and of queries (bf16), or rows (fp32)
            const uint32_t *qb2 = NULL, *gob2 = NULL, *qbt2 = NULL, *gobt2 = NULL;
            if (bf16) {
                const int i = q0 / ATTN_BLK;
                qb2 = Q.q2 + i * Q.blk, gob2 = Q.go2 + i * Q.blk, qbt2 = Q.qt2 + i * Q.blk_t, gobt2 = Q.got2 + i * Q.blk_t;
            } else {
                attn_copy_rows(op.qb, hs, q + q0 * C3, C3, nq, hs);
                attn_copy_rows(op.gob, hs, go + q0 * C, C, nq, hs);
            }
            for (int i0 = 0; i0 < nq; i0 += ATTN_R) {
                const int rows = attn_min(ATTN_R, nq - i0);
                for (int c = 0; c < ATTN_BLK; c += ATTN_W) {
                    // keys all after these queries: P = dS = 0, and the products below never read them
                    if (diag && c > i0 + rows - 1) { continue; }
                    const void *kt = attn_words(bf16, op.kt, op.kt2, c), *vt = attn_words(bf16, op.vt, op.vt2, c);
                    // mask_from: key column c+x comes after query row i0+r when x > (i0 - c) + r
                    ATTN_WITH_ROWS(rows, attn_bwd_probs, pb + i0 * ATTN_BLK + c, dsb + i0 * ATTN_BLK + c,
                                   attn_words(bf16, op.qb, qb2, i0 * ld_qb), ld_qb,
                                   attn_words(bf16, op.gob, gob2, i0 * ld_qb), ld_qb, kt, vt, K_hs, head_lse + q0 + i0, head_D + q0 + i0, scale,
                                   diag ? i0 - c : ATTN_BLK, arith);
                }
            }
            for (int c = 0; c < ATTN_BLK; c += ATTN_W) {
                // on the diagonal, queries before key column c contribute nothing
                const int i_from = diag ? c : 0;  // even: a whole number of query pairs
                if (i_from >= nq) { continue; }
                if (bf16) {  // P and dS of the key vector pair, as rows of query pairs
                    attn_pack_row_pairs(arith, op.pb2, ATTN_W, pb + i_from * ATTN_BLK + c, ATTN_BLK, nq - i_from, ATTN_W);
                    attn_pack_row_pairs(arith, op.dsb2, ATTN_W, dsb + i_from * ATTN_BLK + c, ATTN_BLK, nq - i_from, ATTN_W);
                }
                // P and dS from row i_from (rows BLK apart in fp32, W apart packed), dout^T and
                // Q^T from column i_from (columns hs apart); attn_k(nq - i_from) steps
                const void *p_rows = attn_words(bf16, pb + i_from * ATTN_BLK + c, op.pb2, 0);
                const void *ds_rows = attn_words(bf16, dsb + i_from * ATTN_BLK + c, op.dsb2, 0);
                const ptrdiff_t ld_pds = bf16 ? ATTN_W : ATTN_BLK, from = attn_k(arith, i_from) * hs;
                const int K = attn_k(arith, nq - i_from);
                for (int d0 = 0; d0 < hs; d0 += ATTN_R) {
                    const int rows = attn_min(ATTN_R, hs - d0);
                    ATTN_WITH_ROWS(rows, attn_bwd_kv, dvt + d0 * ATTN_BLK + c,
                                   attn_words(bf16, op.gob, gobt2, from + d0), 1, hs, p_rows, K, ld_pds, arith);
                    ATTN_WITH_ROWS(rows, attn_bwd_kv, dkt + d0 * ATTN_BLK + c,
                                   attn_words(bf16, op.qb, qbt2, from + d0), 1, hs, ds_rows, K, ld_pds, arith);
                }
            }
            for (int i0 = 0; i0 < nq; i0 += ATTN_R) {
                const int rows = attn_min(ATTN_R, nq - i0);
                const int keys = diag ? attn_min(nk, i0 + rows) : nk;  // on the diagonal, keys after the last row are 0
                if (bf16) {
                    attn_pack_col_pairs(arith, op.dsr2, attn_k(arith, ATTN_BLK), dsb + i0 * ATTN_BLK, ATTN_BLK, rows, keys);
                }
                const void *ds = attn_words(bf16, dsb + i0 * ATTN_BLK, op.dsr2, 0);
                for (int c0 = 0; c0 < hs_pad; c0 += ATTN_W) {
                    const void *kp = attn_words(bf16, op.kp, op.kp2, c0);
                    ATTN_WITH_ROWS(rows, attn_bwd_q, dq + (q0 + i0) * C3, C3, ds, attn_k(arith, ATTN_BLK), kp,
                                   hs_pad, attn_k(arith, keys), c0, hs, scale, k0 == 0, arith);
                }
            }
        }
        attn_transpose(dk + k0 * C3, C3, dkt, ATTN_BLK, nk, hs, scale, ATTN_SET_SCALED);
        attn_transpose(dv + k0 * C3, C3, dvt, ATTN_BLK, nk, hs, 1.0f, ATTN_SET_SCALED);
    }
    for (int t = 0; amx && t < T; t++) {  // dQ = scale (dS K summed over the key blocks)
        for (int d = 0; d < hs; d++) { dq[t * C3 + d] = Q.dq[t * hs_pad + d] * scale; }
    }
}

// Writes dqkv (B, T, 3C) from dout (B, T, C), given the forward's out, lse and qkv: every
// element, whatever it held before (each sum starts from zero, as if dqkv had been zeroed:
// the same bits without a zeroing pass).
static void attention_backward(float *dqkv, const float *dout, const float *out, const float *lse,
                               const float *qkv, int B, int T, int C, int NH) {
    attn_check_shape(T, C, NH);
    const float scale = 1.0f / sqrtf((float)(C / NH));
    const attn_arith arith = attn_current_arith();
    if (arith != ATTN_FP32) { attn_workspace(attn_max_threads(), attn_bwd_queries_words(T, C / NH, arith)); }
    // one head per task: every head costs the same, and its dK, dV, dQ are written by it alone
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            attn_bwd_head(dqkv, dout, out, lse, qkv, b, h, T, C, NH, scale, arith);
        }
    }
}

// ----------------------------------------------------------------------------
// one query against a key/value cache (incremental decoding)

// bf16 (attention_head_cached's arguments): the arithmetic of attention_forward's bf16 path for
// one query, its fp32 sums in the same order (each pair of channels or keys, the higher first;
// the online softmax over the same blocks of ATTN_BK keys, with the same rescaling), so the
// scores are the same bits, and the output is too unless a sum's order differs elsewhere.
#if defined(__clang__)
#define ATTN_NO_AUTOVECTORIZE
#else
#define ATTN_NO_AUTOVECTORIZE __attribute__((optimize("no-tree-vectorize")))
#endif
// Not auto-vectorized (GCC): GCC 12.2 (Debian) at -O2 and -O3 vectorizes the pair sum below
// (dot += a[d+1]*b[d+1]; dot += a[d]*b[d]; over d += 2) out of its order, which is wrong
// code without -ffast-math: a five-line loop of that form returned 1e8 for 62 (-O1: 62),
// and here the scores came out 10% off. test_kvcache --precision bf16 catches it.
ATTN_NO_AUTOVECTORIZE static void attention_head_cached_bf16(float *out, const float *q, const float *kcache, const float *vcache,
                                       int n, int ld, int C, int NH, float *scores, int h) {
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    const float *k = kcache + (size_t)h * ld * hs, *v = vcache + (size_t)h * ld * hs;
    float *s = scores + (size_t)h * ld;
    float qr[ATTN_MAX_HS + 1];
    for (int d = 0; d < hs; d++) { qr[d] = gemm_bf16_round(q[h * hs + d]); }
    qr[hs] = 0.0f;  // an odd last channel pairs with 0
    float *o = out + h * hs;
    for (int d = 0; d < hs; d++) { o[d] = 0.0f; }
    vfloat m = vec_set1(-INFINITY);  // the running maximum and sum, in every lane
    float l = 0.0f;
    for (int k0 = 0; k0 < n; k0 += ATTN_BK) {
        const int nk = attn_min(ATTN_BK, n - k0);
        float mx = -INFINITY;
        for (int j = k0; j < k0 + nk; j++) {
            const float *kj = k + (size_t)j * hs;
            float dot = 0.0f;
            for (int d = 0; d < hs; d += 2) {
                dot += qr[d + 1] * (d + 1 < hs ? gemm_bf16_round(kj[d + 1]) : 0.0f);
                dot += qr[d] * gemm_bf16_round(kj[d]);
            }
            s[j] = dot;
            mx = dot > mx ? dot : mx;
        }
        const vfloat m_new = vec_max(m, vec_set1(mx) * scale);
        const float alpha = vec_exp(m - m_new)[0];
        m = m_new;
        for (int j = k0; j < k0 + nk; j += ATTN_VW) {
            const int nj = attn_min(ATTN_VW, k0 + nk - j);
            vec_store_partial(s + j, vec_exp(vec_load_partial(s + j, nj) * scale - m), nj);
        }
        float sum = 0.0f;
        for (int j = k0; j < k0 + nk; j++) { sum += s[j]; }
        l = l * alpha + sum;
        for (int d = 0; d < hs; d++) { o[d] *= alpha; }
        for (int j0 = k0; j0 < k0 + nk; j0 += 2) {
            for (int j = attn_min(j0 + 1, k0 + nk - 1); j >= j0; j--) {  // the pair's higher key first
                const float p = gemm_bf16_round(s[j]);
                const float *vj = v + (size_t)j * hs;
                int d = 0;
                for (; d + ATTN_VW <= hs; d += ATTN_VW) {
                    vec_store(o + d, vec_load(o + d) + p * attn_bf16_round(vec_load(vj + d)));
                }
                for (; d < hs; d++) { o[d] += p * gemm_bf16_round(vj[d]); }
            }
        }
    }
    for (int d = 0; d < hs; d++) { o[d] /= l; }
}

// Head h of attention_forward_cached, on the calling thread (gpt2_cache_step splits the heads itself).
static void attention_head_cached(float *out, const float *q, const float *kcache, const float *vcache,
                                  int n, int ld, int C, int NH, float *scores, int h) {
    if (attn_current_arith() != ATTN_FP32) {
        attention_head_cached_bf16(out, q, kcache, vcache, n, ld, C, NH, scores, h);
        return;
    }
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    const float *qh = q + h * hs;
    const float *k = kcache + (size_t)h * ld * hs, *v = vcache + (size_t)h * ld * hs;
    float *s = scores + (size_t)h * ld;
    float mx = -INFINITY;
    for (int j = 0; j < n; j++) {
        s[j] = attn_dot(qh, k + (size_t)j * hs, hs);
        mx = s[j] > mx ? s[j] : mx;
    }
    const float m = mx * scale;  // scale > 0 keeps the order
    vfloat acc = {0};
    int j = 0;
    for (; j + ATTN_VW <= n; j += ATTN_VW) {
        const vfloat p = vec_exp(vec_load(s + j) * scale - m);
        vec_store(s + j, p);
        acc += p;
    }
    if (j < n) {
        const vfloat p = vec_exp(vec_load_partial(s + j, n - j) * scale - m);
        vec_store_partial(s + j, p, n - j);
        acc += vec_select(vec_lanes_below(n - j), p, (vfloat){0});
    }
    const float inv = 1.0f / vec_sum(acc);
    float *o = out + h * hs;
    for (int d = 0; d < hs; d++) { o[d] = 0.0f; }
    for (int j = 0; j < n; j++) {
        const float p = s[j];
        const float *vj = v + (size_t)j * hs;
        for (int d = 0; d < hs; d++) { o[d] += p * vj[d]; }
    }
    for (int d = 0; d < hs; d++) { o[d] *= inv; }
}

// The attention of the newest position: q (C) against the keys and values of positions
// 0 .. n-1 (itself included, the last), all of which it may see, so there is no mask.
// kcache and vcache are (NH, ld, hs): head h's key of position j at kcache + (h*ld + j)*hs,
// contiguous per head. out is (C); scores is scratch of NH*ld floats (one row per head, never
// a (T, T) matrix). The same softmax as attention_forward's, in fp32 in one pass instead of
// online: p = exp(q.k * scale - max), out = sum p v / sum p (bf16: online over the same key
// blocks as attention_forward's, its bits). Heads run in parallel; each head's sums
// run in a fixed order, so the result does not depend on the thread count.
static void attention_forward_cached(float *out, const float *q, const float *kcache, const float *vcache,
                                     int n, int ld, int C, int NH, float *scores) {
    attn_check_shape(n, C, NH);
    #pragma omp parallel for schedule(static)
    for (int h = 0; h < NH; h++) { attention_head_cached(out, q, kcache, vcache, n, ld, C, NH, scores, h); }
}

#pragma GCC diagnostic pop
