/*
The intermediate version of the matmul kernels (version 2 of matmul_forward.c and
matmul_backward.c): a plain GotoBLAS-style GEMM, the step between the naive loops and
llmc/gemm.h.

  C (M, N) (+)= A (M, K) . B (K, N),  A(m, k) = a[m*rs_a + k*cs_a],  B(k, n) = b[k*rs_b + n*cs_b]

Loops: column blocks of STEP_NC (spread over the threads with omp for) > k blocks of GEMM_KC
(pack B) > row blocks of GEMM_MC (pack A) > GEMM_NR-column panels > GEMM_MR-row tiles of
llmc/gemm_kernel.h's register-blocked micro-kernel. The packing reads each panel straight
down its strided source, and the buffers are malloc'ed per call: what llmc/gemm.h improved.
*/
#pragma once

#include "llmc/gemm.h"

#define STEP_NC 256  // columns per thread task: small enough that every shape feeds both threads

static void step_gemm(int M, int N, int K, const float *a, ptrdiff_t rs_a, ptrdiff_t cs_a, const float *b,
                      ptrdiff_t rs_b, ptrdiff_t cs_b, float *c, ptrdiff_t ldc, int accumulate) {
    #pragma omp parallel
    {
        float *abuf = aligned_alloc_or_die(sizeof(float) * GEMM_MC * GEMM_KC, "A block");
        float *bbuf = aligned_alloc_or_die(sizeof(float) * GEMM_KC * STEP_NC, "B block");
        float tile[GEMM_MR * GEMM_NR] __attribute__((aligned(64)));
        #pragma omp for schedule(static)
        for (int jc = 0; jc < N; jc += STEP_NC) {
            const int nc = gemm_min(STEP_NC, N - jc);
            for (int pc = 0; pc < K; pc += GEMM_KC) {
                const int kc = gemm_min(GEMM_KC, K - pc);
                for (int j0 = 0; j0 < nc; j0 += GEMM_NR) {  // pack B: panel by panel, zero-padded
                    for (int k = 0; k < kc; k++) {
                        for (int j = 0; j < GEMM_NR; j++) {
                            bbuf[j0 * kc + k * GEMM_NR + j] =
                                j0 + j < nc ? b[(pc + k) * rs_b + (jc + j0 + j) * cs_b] : 0.0f;
                        }
                    }
                }
                for (int ic = 0; ic < M; ic += GEMM_MC) {
                    const int mc = gemm_min(GEMM_MC, M - ic);
                    for (int i0 = 0; i0 < mc; i0 += GEMM_MR) {  // pack A: panel by panel, zero-padded
                        for (int k = 0; k < kc; k++) {
                            for (int i = 0; i < GEMM_MR; i++) {
                                abuf[i0 * kc + k * GEMM_MR + i] =
                                    i0 + i < mc ? a[(ic + i0 + i) * rs_a + (pc + k) * cs_a] : 0.0f;
                            }
                        }
                    }
                    // the first k block adds to C only when accumulating
                    const int add_to_c = accumulate || pc > 0;
                    for (int jr = 0; jr < nc; jr += GEMM_NR) {
                        for (int ir = 0; ir < mc; ir += GEMM_MR) {
                            const int mr = gemm_min(GEMM_MR, mc - ir), nr = gemm_min(GEMM_NR, nc - jr);
                            float *ct = c + (size_t)(ic + ir) * ldc + jc + jr;
                            if (mr == GEMM_MR && nr == GEMM_NR) {
                                const gemm_tile_epilogue tep = {.cin = add_to_c ? ct : NULL, .ldcin = ldc};
                                gemm_micro_kernel(GEMM_MR, kc, abuf + ir * kc, bbuf + jr * kc, ct, ldc, &tep);
                                continue;
                            }
                            for (int i = 0; i < mr; i++) {  // edge tile: through a full scratch tile
                                for (int j = 0; j < nr; j++) { tile[i * GEMM_NR + j] = ct[i * ldc + j]; }
                            }
                            const gemm_tile_epilogue tep = {.cin = add_to_c ? tile : NULL, .ldcin = GEMM_NR};
                            gemm_micro_kernel(GEMM_MR, kc, abuf + ir * kc, bbuf + jr * kc, tile, GEMM_NR, &tep);
                            for (int i = 0; i < mr; i++) {
                                for (int j = 0; j < nr; j++) { ct[i * ldc + j] = tile[i * GEMM_NR + j]; }
                            }
                        }
                    }
                }
            }
        }
        free(abuf);
        free(bbuf);
    }
}
