"""oneDNN's bf16 matmul through PyTorch on GPT-2 124M's 27 products, the yardstick of
dev/cpu/amx_bench.c (same shapes, products and output lines; on a Xeon with AMX, PyTorch's
bf16 torch.matmul runs oneDNN's AMX kernels). Operands are bf16 tensors made before timing
(the conversion from fp32 is not timed; ours rounds while packing, inside its time); the output
is bf16, as autocast gives it.

    python3 dev/cpu/matmul_torch.py [THREADS] [SHAPE]      (SHAPE: one shape's three products)
"""
import sys
import time

import torch

# matmul_bench.h's first MATMUL_GPT2_SHAPES, as `amx_bench --list` prints them (test_dev.sh checks)
SHAPES = [("qkv_T64", 256, 768, 2304), ("attnproj_T64", 256, 768, 768), ("fc_T64", 256, 768, 3072),
          ("fcproj_T64", 256, 3072, 768), ("qkv_T1024", 4096, 768, 2304), ("attnproj_T1024", 4096, 768, 768),
          ("fc_T1024", 4096, 768, 3072), ("fcproj_T1024", 4096, 3072, 768), ("lmhead_256rows", 256, 768, 50304)]


def best_ms(fn, reps):
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - t0) * 1e3)
    return best


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    only = sys.argv[2] if len(sys.argv) > 2 else None
    if only is not None and only not in [s[0] for s in SHAPES]:
        sys.exit(f"error: {only}: not a shape's name ({', '.join(s[0] for s in SHAPES)})")
    torch.set_num_threads(threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, mkldnn bf16 "
          f"{torch.backends.mkldnn.is_available()}")
    logs = []
    for name, BT, C, OC in SHAPES:
        if only is not None and name != only:
            continue
        inp = torch.randn(BT, C).bfloat16()
        w = torch.randn(OC, C).bfloat16()
        dout = torch.randn(BT, OC).bfloat16()
        prods = [("fwd", BT, OC, C, lambda: torch.matmul(inp, w.t())),
                 ("dinp", BT, C, OC, lambda: torch.matmul(dout, w)),
                 ("dw", OC, C, BT, lambda: torch.matmul(dout.t(), inp))]
        for pname, M, N, K, fn in prods:
            flops = 2.0 * M * N * K
            ms = best_ms(fn, 5 if flops > 2e10 else 15)
            g = flops / (ms * 1e6)
            logs.append(g)
            print(f"product {name:<15} {pname:<4} M={M} N={N} K={K} {ms:9.3f} ms {g:8.1f} GFLOP/s")
    import math
    print(f"geometric mean: {math.exp(sum(math.log(g) for g in logs) / len(logs)):.1f} GFLOP/s")


if __name__ == "__main__":
    main()
