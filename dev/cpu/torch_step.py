"""PyTorch's GPT-2 124M training step (forward, backward, AdamW) on the CPU, the way a PyTorch 2
user writes it: nn.Linear layers, F.scaled_dot_product_attention (causal), fused AdamW where
the build has it, fp32 or bf16 autocast (torch.autocast("cpu", dtype=torch.bfloat16): oneDNN's
bf16 matmuls, on AMX where the CPU has it), eager or torch.compile. The yardstick of
dev/cpu/run_amx.sh for train_gpt2 on the same machine and threads. Random tokens: the time of a
step does not depend on them.

    python3 dev/cpu/torch_step.py -B 4 -T 64 --steps 6 --threads 2 --precision bf16 [--compile]
prints its configuration, one line per step, and
    torch_step: B=4 T=64 precision=bf16 mode=eager threads=2 median_ms=994.1
"""
import argparse
import os
import sys
import statistics
import time

import torch


# The model is make bench's (scripts/bench/bench_pytorch.py): one definition of the PyTorch peer.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "bench"))
from bench_pytorch import GPT  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-B", type=int, default=4)
    ap.add_argument("-T", type=int, default=64)
    ap.add_argument("--steps", type=int, default=6, help="timed steps, after the warm-up steps")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--compile", action="store_true")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    model = GPT(12, 768, 12)  # GPT-2 124M
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.0, fused=True)
        fused = True
    except (RuntimeError, TypeError):
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.0)
        fused = False
    fwd = torch.compile(model) if args.compile else model
    mode = "compiled" if args.compile else "eager"
    print(f"torch_step config: torch {torch.__version__}, precision {args.precision}, {mode}, threads "
          f"{torch.get_num_threads()}, fused AdamW {fused}, B={args.B} T={args.T}", flush=True)

    def step():
        idx = torch.randint(0, 50257, (args.B, args.T))
        targets = torch.randint(0, 50257, (args.B, args.T))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = fwd(idx, targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    t0 = time.perf_counter()
    for _ in range(2 if args.compile else 1):  # warm-up (compiling: the forward, then the backward)
        step()
    print(f"torch_step warm-up: {time.perf_counter() - t0:.1f} s", flush=True)
    times = []
    for i in range(args.steps):
        t0 = time.perf_counter()
        loss = step()
        times.append((time.perf_counter() - t0) * 1e3)
        print(f"torch_step step {i + 1}: loss {loss:.4f} {times[-1]:.1f} ms", flush=True)
    print(f"torch_step: B={args.B} T={args.T} precision={args.precision} mode={mode} threads={args.threads} "
          f"median_ms={statistics.median(times):.1f}")


if __name__ == "__main__":
    main()
