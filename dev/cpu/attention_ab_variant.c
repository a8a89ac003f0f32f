/*
One build of llmc/attention.h for attention_ab.c: the Makefile compiles this file twice, with
-DATTN_AB_NAME=attn_a plus A_FLAGS and with -DATTN_AB_NAME=attn_b plus B_FLAGS (each a -D that
llmc/attention.h or its kernels take). Not a harness of its own.
*/
#include "llmc/attention.h"
#include "llmc/matmul.h"

#define ATTN_AB_CAT(a, b) a##b
#define ATTN_AB_FN(name, suffix) ATTN_AB_CAT(name, suffix)

// The forward pass (out, lse from qkv) or, with backward, the backward pass (dqkv, from dout, out,
// lse and qkv), in the given precision (0 fp32, 1 bf16: the CPU's fastest bf16 path).
void ATTN_AB_NAME(int bf16, int backward, float *out, float *lse, float *dqkv, const float *dout, const float *qkv,
                  int B, int T, int C, int NH) {
    matmul_set_precision(bf16 ? PRECISION_BF16 : PRECISION_FP32);
    if (backward) {
        attention_backward(dqkv, dout, out, lse, qkv, B, T, C, NH);
    } else {
        attention_forward(out, lse, qkv, B, T, C, NH);
    }
}
