/*
One build of llmc/gemm.h for gemm_ab.c: the Makefile compiles this file twice, with
-DGEMM_AB_NAME=gemm_a plus A_FLAGS and with -DGEMM_AB_NAME=gemm_b plus B_FLAGS (blocking sizes,
GEMM_C_LEAD, ...: each a -D that llmc/gemm.h or its kernels take). Not a harness of its own.
*/
#include <stdlib.h>
#include "llmc/matmul.h"

// C (M, N) = A . B in the given precision (0 fp32, 1 bf16), as gemm.h's gemm with no epilogue.
void GEMM_AB_NAME(int bf16, int M, int N, int K, const float *a, ptrdiff_t rs_a, ptrdiff_t cs_a, const float *b,
                  ptrdiff_t rs_b, ptrdiff_t cs_b, float *c) {
    matmul_set_precision(bf16 ? PRECISION_BF16 : PRECISION_FP32);
    gemm(M, N, K, a, rs_a, cs_a, b, rs_b, cs_b, c, N, NULL);
}
