/*
The CPU reference for the dev/cuda LayerNorm harnesses: the trainer's own kernels from
llmc/layernorm.h, compiled by gcc (nvcc compiles .cu files as C++, and the header uses C
idioms and GCC vector extensions), exported as plain C functions for the .cu files.
*/
#include "llmc/layernorm.h"

// out (N, C), mean (N), rstd (N) from inp (N, C), weight (C), bias (C).
void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C) {
    layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
}

// dinp (N, C), dweight (C), dbias (C) accumulated (+=) from dout (N, C).
void cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *mean, const float *rstd,
                            const float *weight, int N, int C) {
    layernorm_backward(dinp, dweight, dbias, dout, inp, mean, rstd, weight, N, C);
}
