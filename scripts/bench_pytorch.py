#!/usr/bin/python3
"""
PyTorch's time per training step of GPT-2 (forward, backward, AdamW), the peer
of train_gpt2 in scripts/bench.sh. A plain nanoGPT-style model, as a PyTorch
user would write it (Debian's python3-torch 1.13: no fused attention), in fp32
or in bf16 autocast (`--precision bf16`: the forward pass and the loss under
torch.autocast("cpu", dtype=torch.bfloat16), so the matmuls run on oneDNN's bf16
kernels; parameters, gradients and AdamW stay fp32, as PyTorch's AMP recipe says).

  /usr/bin/python3 scripts/bench_pytorch.py --depth d12 -B 4 -T 64 --steps 6 --threads 2 --precision bf16

prints its configuration, one line per step and a summary line:
  pytorch config: torch 1.13.0a0, precision bf16 (autocast), threads 2, interop threads 1, allocator tcmalloc, ...
  pytorch step 1: loss 10.9876 1550.2 ms
  pytorch: B=4 T=64 threads=2 precision=bf16 median_ms=1550.2 tok_per_s=165 peak_rss_mb=2345.6
Batches are read from a token shard (llm.c format), as train_gpt2 reads them.
The process environment (LD_PRELOAD of tcmalloc, OMP_* settings) is scripts/bench.sh's.
"""
import argparse
import math
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


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.c_proj2 = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x, mask):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att.masked_fill(mask[:T, :T] == 0, float("-inf")), dim=-1)
        x = x + self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))
        return x + self.c_proj2(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, NH, V=50257, Vp=50304, maxT=1024):
        super().__init__()
        self.Vp = Vp
        self.wte, self.wpe = nn.Embedding(Vp, C), nn.Embedding(maxT, C)
        self.h = nn.ModuleList([Block(C, NH) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C)
        self.register_buffer("mask", torch.tril(torch.ones(maxT, maxT)))
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
        for block in self.h:
            x = block(x, self.mask)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied LM head
        return F.cross_entropy(logits.view(-1, self.Vp), targets.view(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--depth", default="d12", choices=sorted(DEPTHS))
    ap.add_argument("-B", type=int, default=4)
    ap.add_argument("-T", type=int, default=64)
    ap.add_argument("--steps", type=int, default=6, help="timed steps, after one warm-up step")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--interop", type=int, default=0, help="inter-op threads (0 = PyTorch's default)")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--give-up-ms", type=float, default=0.0,
                    help="stop once the median of the timed steps so far is above this (0 = never): "
                         "bench.sh's calibration drops a setting that cannot win")
    ap.add_argument("--shard", default="data/tinyshakespeare/tiny_shakespeare_train_000000.bin")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.interop > 0:
        torch.set_num_interop_threads(args.interop)  # only valid before any inter-op work
    bf16 = args.precision == "bf16"
    if bf16 and not torch.backends.mkldnn.is_available():
        sys.exit("error: --precision bf16: this PyTorch has no oneDNN (mkldnn) for bf16 autocast on the CPU")
    with open("/proc/self/maps") as f:
        allocator = "tcmalloc" if "libtcmalloc" in f.read() else "glibc malloc"
    omp_env = " ".join(f"{k}={os.environ[k]}" for k in sorted(os.environ)
                       if k.startswith(("OMP_", "GOMP_", "KMP_", "OPENBLAS_", "ATEN_")))
    print(f"pytorch config: torch {torch.__version__}, precision {args.precision}{' (autocast)' if bf16 else ''}, "
          f"threads {torch.get_num_threads()}, interop threads {torch.get_num_interop_threads()}, "
          f"allocator {allocator}, {omp_env or 'no OpenMP/OpenBLAS variables'}", flush=True)
    torch.manual_seed(1337)

    tokens = np.fromfile(args.shard, dtype=np.uint16, offset=1024).astype(np.int64)
    n = args.B * args.T
    model = GPT(*DEPTHS[args.depth])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    times = []
    for step in range(args.steps + 1):
        chunk = torch.from_numpy(tokens[step * n: step * n + n + 1])
        x, y = chunk[:-1].view(args.B, args.T), chunk[1:].view(args.B, args.T)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(x, y)
        loss.backward()
        opt.step()
        ms = (time.perf_counter() - t0) * 1e3
        print(f"pytorch step {step}: loss {loss.item():.4f} {ms:.1f} ms", flush=True)
        if step > 0:
            times.append(ms)
            if 0 < args.give_up_ms < statistics.median(times):
                print(f"pytorch: gave up after step {step}: median {statistics.median(times):.1f} ms "
                      f"> {args.give_up_ms:.1f} ms", flush=True)
                break
    median = statistics.median(times)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"pytorch: B={args.B} T={args.T} threads={args.threads} precision={args.precision} median_ms={median:.1f} "
          f"tok_per_s={n / median * 1e3:.0f} peak_rss_mb={rss_mb:.1f}")


if __name__ == "__main__":
    sys.exit(main())
