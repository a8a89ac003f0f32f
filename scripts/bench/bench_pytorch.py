#!/usr/bin/env python3
"""
PyTorch's time per training step of GPT-2 (forward, backward, AdamW), the peer
of train_gpt2 in scripts/bench/bench.sh. A nanoGPT-style model, written as a careful
PyTorch 2 user would write it: F.scaled_dot_product_attention(is_causal=True)
for the attention, AdamW fused or foreach (--optimizer), the model eager or
under torch.compile (--mode compile: the default inductor backend), in fp32 or
in bf16 autocast (--precision bf16: the forward pass and the loss under
torch.autocast("cpu", dtype=torch.bfloat16), so the matmuls run on oneDNN's
bf16 kernels; parameters, gradients and AdamW stay fp32, as PyTorch's AMP
recipe says).

  .venv/bin/python scripts/bench/bench_pytorch.py --depth d12 -B 4 -T 64 --steps 6 --threads 2 \
      --precision bf16 --mode compile --optimizer fused

prints its configuration, one line per step (the first `warmup` steps are not
timed: the first eager step allocates, the first compiled step compiles) and a
summary line:
  pytorch config: torch 2.13.0+cpu, mode compile, precision bf16 (autocast), optimizer fused, warmup 2, ...
  pytorch step 0: loss 10.9869 41234.5 ms
  pytorch compile: step 0 took 41.2 s; dynamo graphs 1, graph breaks 0, recompiles 0; step 0 against eager: ...
  pytorch step 1: ...
  pytorch: B=4 T=64 ... median_ms=1550.2 tok_per_s=165 peak_rss_mb=2345.6
Under --mode compile, step 0's loss and gradient norm are also computed by the
same model run eagerly (before the compiled step, same batch and weights, not
timed); the run fails if they differ by more than the precision allows, if
dynamo compiled no graph (a silent fall-back to eager), or if it compiled
again during the timed steps.
Batches are read from a token shard (llm.c format), as train_gpt2 reads them.
The process environment (LD_PRELOAD of tcmalloc, OMP_* settings) is scripts/bench/bench.sh's.
"""
import argparse
import os
import resource
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DEPTHS = {"d6": (6, 384, 6), "d12": (12, 768, 12), "d24": (24, 1024, 16), "d36": (36, 1280, 20), "d48": (48, 1600, 25)}
# Compiled against eager on step 0, relative differences allowed. fp32: inductor only
# reorders fp32 sums. bf16: the compiled graph may keep in fp32 what eager autocast
# rounds to bf16 between ops (about 2^-9 each).
TOLERANCE = {"fp32": {"loss": 1e-5, "grad_norm": 1e-5}, "bf16": {"loss": 1e-3, "grad_norm": 5e-3}}


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.c_proj2 = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))  # (B, NH, T, hs)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.c_proj2(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, NH, V=50257, Vp=50304, maxT=1024):
        super().__init__()
        self.Vp = Vp
        self.wte, self.wpe = nn.Embedding(Vp, C), nn.Embedding(maxT, C)
        self.h = nn.ModuleList([Block(C, NH) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied LM head
        return F.cross_entropy(logits.view(-1, self.Vp), targets.view(-1))


def grad_norm(model):
    return torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters() if p.grad is not None)).item()


def dynamo_counts():
    """(graphs compiled, graph breaks, frames recompiled) so far, from torch._dynamo's counters."""
    c = torch._dynamo.utils.counters
    return (c["stats"]["unique_graphs"], sum(c["graph_break"].values()), c["recompiles"]["total"] if "recompiles" in c
            else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--depth", default="d12", choices=sorted(DEPTHS))
    ap.add_argument("-B", type=int, default=4)
    ap.add_argument("-T", type=int, default=64)
    ap.add_argument("--steps", type=int, default=6, help="timed steps, after the warm-up steps")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--interop", type=int, default=0, help="inter-op threads (0 = PyTorch's default)")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--mode", default="eager", choices=["eager", "compile"])
    ap.add_argument("--optimizer", default="fused", choices=["fused", "foreach"], help="AdamW's implementation")
    ap.add_argument("--give-up-ms", type=float, default=0.0,
                    help="stop once the median of the timed steps so far (two or more) is above this (0 = never): "
                         "bench.sh's calibration drops a setting that cannot win")
    ap.add_argument("--shard", default="data/tinyshakespeare/tiny_shakespeare_train_000000.bin")
    args = ap.parse_args()
    for name in ("B", "T", "steps", "threads"):
        if getattr(args, name) < 1:
            ap.error(f"--{name}: expected a positive integer")
    if args.T > 1024:
        ap.error("-T: at most 1024 (GPT-2's context)")
    torch.set_num_threads(args.threads)
    if args.interop > 0:
        torch.set_num_interop_threads(args.interop)  # only valid before any inter-op work
    bf16 = args.precision == "bf16"
    if bf16 and not torch.backends.mkldnn.is_available():
        sys.exit("error: --precision bf16: this PyTorch has no oneDNN (mkldnn) for bf16 autocast on the CPU")
    warmup = 2 if args.mode == "compile" else 1  # compile: the step that compiles, and one more
    with open("/proc/self/maps") as f:
        allocator = "tcmalloc" if "libtcmalloc" in f.read() else "glibc malloc"
    omp_env = " ".join(f"{k}={os.environ[k]}" for k in sorted(os.environ)
                       if k.startswith(("OMP_", "GOMP_", "KMP_", "OPENBLAS_", "ATEN_", "MKL_")))
    print(f"pytorch config: torch {torch.__version__}, mode {args.mode}, precision {args.precision}"
          f"{' (autocast)' if bf16 else ''}, optimizer {args.optimizer}, warmup {warmup}, "
          f"attention scaled_dot_product_attention, ATen capability {torch.backends.cpu.get_cpu_capability()}, "
          f"threads {torch.get_num_threads()}, interop threads {torch.get_num_interop_threads()}, "
          f"allocator {allocator}, {omp_env or 'no OpenMP/OpenBLAS variables'}", flush=True)
    torch.manual_seed(1337)

    tokens = np.fromfile(args.shard, dtype=np.uint16, offset=1024).astype(np.int64)
    n = args.B * args.T
    if len(tokens) < (args.steps + warmup) * n + 1:
        sys.exit(f"error: {args.shard}: {len(tokens)} tokens, fewer than the {(args.steps + warmup) * n + 1} "
                 f"the steps need")
    model = GPT(*DEPTHS[args.depth])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0,
                            **{args.optimizer: True})
    run = torch.compile(model) if args.mode == "compile" else model

    def batch(step):
        chunk = torch.from_numpy(tokens[step * n: step * n + n + 1])
        return chunk[:-1].view(args.B, args.T), chunk[1:].view(args.B, args.T)

    if args.mode == "compile":
        # step 0 eagerly, untimed: the loss and gradient norm the compiled step 0 must give
        x, y = batch(0)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            eager_loss = model(x, y)
        eager_loss.backward()
        eager_loss, eager_grad_norm = eager_loss.item(), grad_norm(model)
        opt.zero_grad(set_to_none=True)
    times = []
    for step in range(args.steps + warmup):
        x, y = batch(step)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = run(x, y)
        loss.backward()
        if step == 0 and args.mode == "compile":
            # the check's own time (the gradient norm) is left out of step 0, which is not timed anyway
            t_check = time.perf_counter()
            compiled_grad_norm = grad_norm(model)
            t0 += time.perf_counter() - t_check
        opt.step()
        ms = (time.perf_counter() - t0) * 1e3
        print(f"pytorch step {step}: loss {loss.item():.4f} {ms:.1f} ms", flush=True)
        if step == 0 and args.mode == "compile":
            compile_ms = ms
            graphs, breaks, recompiles = dynamo_counts()
            dl = abs(loss.item() - eager_loss) / abs(eager_loss)
            dg = abs(compiled_grad_norm - eager_grad_norm) / eager_grad_norm
            tol = TOLERANCE[args.precision]
            print(f"pytorch compile: step 0 took {compile_ms / 1e3:.1f} s; dynamo graphs {graphs}, graph breaks "
                  f"{breaks}, recompiles {recompiles}; step 0 against eager: loss {loss.item():.6f} vs "
                  f"{eager_loss:.6f} (rel diff {dl:.1e}, allowed {tol['loss']:.0e}), grad norm "
                  f"{compiled_grad_norm:.6f} vs {eager_grad_norm:.6f} (rel diff {dg:.1e}, allowed "
                  f"{tol['grad_norm']:.0e})", flush=True)
            if graphs == 0:
                sys.exit("error: torch.compile compiled no graph: the model ran eagerly")
            if not (dl <= tol["loss"] and dg <= tol["grad_norm"]):
                sys.exit(f"error: torch.compile's step 0 differs from eager's beyond the {args.precision} tolerance")
        if step == warmup - 1 and args.mode == "compile":
            counts_after_warmup = dynamo_counts()
        if step >= warmup:
            times.append(ms)
            # not on the first timed step alone: eager bf16 autocast's first step after the warm-up took
            # 2.6x the later ones on a Xeon with AMX (2026-12-02), and gave up settings that were the fastest
            if len(times) >= 2 and 0 < args.give_up_ms < statistics.median(times):
                print(f"pytorch: gave up after step {step}: median {statistics.median(times):.1f} ms "
                      f"> {args.give_up_ms:.1f} ms", flush=True)
                break
    if args.mode == "compile" and dynamo_counts() != counts_after_warmup:
        sys.exit(f"error: torch.compile compiled again during the timed steps (graphs, breaks, recompiles: "
                 f"{counts_after_warmup} after the warm-up, {dynamo_counts()} at the end)")
    median = statistics.median(times)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"pytorch: B={args.B} T={args.T} threads={args.threads} mode={args.mode} precision={args.precision} "
          f"optimizer={args.optimizer} warmup={warmup} median_ms={median:.1f} tok_per_s={n / median * 1e3:.0f} "
          f"peak_rss_mb={rss_mb:.1f}")


if __name__ == "__main__":
    sys.exit(main())
