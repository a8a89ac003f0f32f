"""The yardstick for dev/cuda/layernorm_*: PyTorch's LayerNorm forward and backward
(aten.native_layer_norm and aten.native_layer_norm_backward, the kernels F.layer_norm and
its autograd run) on the same GPU and shapes, timed like the harnesses: CUDA events, an L2
flush before each repetition (a read of twice the L2 size, or with DEV_CUDA_FLUSH=write a
write, as common.h), the median after a warm-up.

    python3 bench_torch.py

PyTorch's backward writes dinp (it does not accumulate) and recomputes dweight/dbias in a
kernel of its own; GB/s here use the harnesses' byte counts (forward 2 N C floats, backward
4 N C), so the columns compare times on equal terms.
"""
import os
import sys

import torch

SHAPES = [(8, 1024, 768), (8, 1024, 1600), (4, 333, 57), (1, 1, 768), (1, 1, 57), (3, 7, 3)]


def flush_l2(flush, r):
    if os.environ.get("DEV_CUDA_FLUSH", "read") == "write":
        flush.fill_(r & 1)  # leaves the L2 full of dirty lines that the timed call writes back
    else:
        flush.sum()  # leaves clean lines


def time_median_ms(fn, flush):
    fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    first = start.elapsed_time(stop)
    reps = max(5, min(200, int(300.0 / first) if first > 0 else 200))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for r in range(reps):
        flush_l2(flush, r)
        events[r][0].record()
        fn()
        events[r][1].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in events)
    n = len(times)
    return times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])


def main():
    if os.environ.get("DEV_CUDA_FLUSH", "read") not in ("read", "write"):
        print(f"error: DEV_CUDA_FLUSH '{os.environ['DEV_CUDA_FLUSH']}': must be read or write", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("error: no CUDA device for PyTorch", file=sys.stderr)
        return 1
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    flush = torch.zeros(2 * max(props.L2_cache_size, 64 << 20) // 4, dtype=torch.float32, device=dev)
    print(f"PyTorch {torch.__version__} on {props.name}, L2 flush by {os.environ.get('DEV_CUDA_FLUSH', 'read')}")
    print(f"{'shape':<18}{'forward us':>12}{'GB/s':>8}{'backward us':>13}{'GB/s':>8}")
    for B, T, C in SHAPES:
        N = B * T
        g = torch.Generator(device=dev).manual_seed(0)
        x = torch.rand((N, C), device=dev, generator=g) * 2 - 1
        w = torch.rand(C, device=dev, generator=g) * 2 - 1
        b = torch.rand(C, device=dev, generator=g) * 2 - 1
        dout = torch.rand((N, C), device=dev, generator=g) * 2 - 1
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, [C], w, b, 1e-5)
        fwd = lambda: torch.ops.aten.native_layer_norm(x, [C], w, b, 1e-5)
        bwd = lambda: torch.ops.aten.native_layer_norm_backward(dout, x, [C], mean, rstd, w, b, [True, True, True])
        ms_f = time_median_ms(fwd, flush)
        ms_b = time_median_ms(bwd, flush)
        bytes_f = 4.0 * (2 * N * C + 2 * N + 2 * C)
        bytes_b = 4.0 * (4 * N * C + 2 * N + 5 * C)
        name = f"B{B} T{T} C{C}"
        print(f"{name:<18}{1000 * ms_f:>12.1f}{bytes_f / ms_f / 1e6:>8.0f}{1000 * ms_b:>13.1f}{bytes_b / ms_b / 1e6:>8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
