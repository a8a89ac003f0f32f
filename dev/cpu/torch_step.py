"""PyTorch's GPT-2 124M training step (forward, backward, AdamW) on the CPU, the way a PyTorch 2
user writes it: nn.Linear layers, F.scaled_dot_product_attention (causal), fused AdamW where
the build has it, fp32 or bf16 autocast (torch.autocast("cpu", dtype=torch.bfloat16): oneDNN's
bf16 matmuls, on AMX where the CPU has it), eager or torch.compile. The yardstick of
dev/cpu/run_amx.sh for train_gpt2 on the same machine and threads. Random tokens: the time of a
step does not depend on them.

    python3 dev/cpu/torch_step.py -B 4 -T 64 --steps 6 --threads 2 --precision bf16 [--compile]
prints its configuration, one line per step, and
    torch_step: B=4 T=64 precision=bf16 mode=eager threads=2 median_ms=994.1

Side by side with our trainer (--alternate CMD --rounds R): after the warm-up, R rounds of
PyTorch's timed steps, each followed by CMD (a shell command running train_gpt2, whose
"step N/M | ... | X ms |" lines it reads: its first step is a warm-up and left out). The lent
Xeon's speed changes within a minute (two threads sometimes share one core's AMX unit), so a
ratio means something only within a round; it prints each round's and then
    torch_step: ... median_ms=781.0 ours_median_ms=334.5 ratio=2.31
ratio: the median over the rounds of PyTorch's median over ours, in the same round.
While CMD runs, this process is stopped (SIGSTOP, sent by CMD's shell, SIGCONT when it ends), so
PyTorch's OpenMP threads cannot spin beside it under OMP_WAIT_POLICY=ACTIVE, PyTorch's fastest
setting for bf16 (spinning beside it, they made our T=64 step 2.5x slower on 2 vCPUs, 2026-12-05).
"""
import argparse
import os
import re
import subprocess
import sys
import statistics
import tempfile
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
    ap.add_argument("--alternate", metavar="CMD", help="our trainer's command, run after each round")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of timed steps (with --alternate)")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
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
    theirs, ours, ratios = [], [], []
    for r in range(args.rounds):
        times = []
        for i in range(args.steps):
            t0 = time.perf_counter()
            loss = step()
            times.append((time.perf_counter() - t0) * 1e3)
            print(f"torch_step step {i + 1}: loss {loss:.4f} {times[-1]:.1f} ms", flush=True)
        theirs.append(statistics.median(times))
        if args.alternate:
            ours.append(our_median_ms(args.alternate))
            ratios.append(theirs[-1] / ours[-1])
            print(f"torch_step round {r + 1}: median_ms={theirs[-1]:.1f} ours_median_ms={ours[-1]:.1f} "
                  f"ratio={ratios[-1]:.2f}", flush=True)
    line = (f"torch_step: B={args.B} T={args.T} precision={args.precision} mode={mode} threads={args.threads} "
            f"median_ms={statistics.median(theirs):.1f}")
    if args.alternate:
        line += f" ours_median_ms={statistics.median(ours):.1f} ratio={statistics.median(ratios):.2f}"
    print(line)


def our_median_ms(cmd):
    """The median ms of cmd's train_gpt2 step lines after its first; exits if it fails or prints none.
    cmd's shell stops this process (all its threads) first and continues it when cmd ends, however it
    ends; its output goes to a file, which a stopped reader could not drain as it could a pipe."""
    pid = os.getpid()
    wrapped = f"trap 'kill -CONT {pid}' EXIT; kill -STOP {pid}; {cmd}"
    with tempfile.TemporaryFile("w+") as log:
        rc = subprocess.run(["bash", "-c", wrapped], stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, TORCH_STEP_PID=str(pid))).returncode
        log.seek(0)
        out = log.read()
    ms = [float(m.group(2)) for m in re.finditer(r"^step +(\d+)/\d+ .*\| *([0-9.]+) ms \|", out, re.M)
          if int(m.group(1)) >= 2]
    if rc != 0 or not ms:
        tail = " ".join(out.strip().splitlines()[-2:])
        sys.exit(f"error: --alternate command failed (exit {rc}, {len(ms)} timed steps): {tail}")
    return statistics.median(ms)


if __name__ == "__main__":
    main()
