/*
One build of llmc/gemm.h for gemm_ab.c: the Makefile compiles this file twice, with
-DGEMM_AB_NAME=gemm_a plus A_FLAGS and with -DGEMM_AB_NAME=gemm_b plus B_FLAGS (blocking sizes,
GEMM_C_LEAD, ...: each a -D that llmc/gemm.h or its kernels take). Not a harness of its own.
*/
#include <stdlib.h>
#include "llmc/matmul.h"

// C (M, N) = epilogue(A . B) in the given precision (0 fp32, 1 bf16), as gemm.h's gemm: bias, addend
// and pre may be NULL (pre is written only with gelu); addend and pre are (M, N) like C.
void GEMM_AB_NAME(int bf16, int M, int N, int K, const float *a, ptrdiff_t rs_a, ptrdiff_t cs_a, const float *b,
                  ptrdiff_t rs_b, ptrdiff_t cs_b, float *c, const float *bias, const float *addend, int gelu,
                  float *pre) {
    matmul_set_precision(bf16 ? PRECISION_BF16 : PRECISION_FP32);
    const gemm_epilogue ep = {.addend = addend, .ld_addend = N, .bias = bias, .gelu = gelu, .pre = pre, .ld_pre = N};
    gemm(M, N, K, a, rs_a, cs_a, b, rs_b, cs_b, c, N, &ep);
}
