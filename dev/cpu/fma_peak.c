/*
The machine's arithmetic peaks, the yardsticks for MFU in scripts/bench/bench.sh:
every thread runs independent chains of vector instructions that never touch memory.

  ./fma_peak        prints GFLOP/s with all threads (OMP_NUM_THREADS) and with one:
                    fp32 FMA peak: 229.3 GFLOP/s with 2 threads, 114.9 with 1 (16-lane vectors)
                    bf16 dot peak: 458.1 GFLOP/s with 2 threads, 229.6 with 1 (vdpbf16ps, 512-bit)
                    (or "bf16 dot peak: none: this CPU has no AVX512_BF16")
                    AMX bf16 peak: 2000.0 GFLOP/s with 2 threads, ... (TDPBF16PS tiles, amx_peak.h)
                    (or "AMX bf16 peak: none: this CPU (or OS) has no AMX")

fp32: the vector width is the widest the build targets (16 floats with AVX-512,
8 with AVX2, 4 otherwise); 12 chains cover the FMA latency of current cores.
bf16: vdpbf16ps (AVX512_BF16), the instruction a bf16 GEMM runs on: each 512-bit one
multiplies 32 pairs of bf16 and adds them, pairwise, into 16 fp32 lanes, i.e. 32
multiply-adds = 64 flops. It is compiled with a target attribute and called only when
the CPU has it (checked at run time), so this file builds and runs on any x86-64.
The loops: peaks.h.
*/
#include "peaks.h"

int main(void) {
    const int threads = omp_get_max_threads();
    double all = fma_peak_gflops(threads);
    double one = fma_peak_gflops(1);
    printf("fp32 FMA peak: %.1f GFLOP/s with %d threads, %.1f with 1 (%d-lane vectors)\n", all, threads, one,
           VEC_WIDTH);
    if (bf16_dot_available()) {
        all = bf16_dot_peak(threads);
        one = bf16_dot_peak(1);
        printf("bf16 dot peak: %.1f GFLOP/s with %d threads, %.1f with 1 (vdpbf16ps, 512-bit)\n", all, threads, one);
    } else {
        printf("bf16 dot peak: none: this CPU has no AVX512_BF16\n");
    }
    all = amx_peak(threads);
    if (all > 0.0) {
        one = amx_peak(1);
        printf("AMX bf16 peak: %.1f GFLOP/s with %d threads, %.1f with 1 (TDPBF16PS tiles)\n", all, threads, one);
    } else {
        printf("AMX bf16 peak: none: this CPU (or OS) has no AMX\n");
    }
    return 0;
}
