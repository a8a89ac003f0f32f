#!/usr/bin/python3
"""
The PyTorch peer of generate in scripts/bench_generate.sh: greedy decoding that
re-runs the whole sequence through the model for every new token (no cache), as
a PyTorch loop written without one does, on the same llm.c model file.

  /usr/bin/python3 scripts/bench_generate.py --write-model OUT.bin --depth d12 [--seed N]
      writes a random GPT-2 (llm.c's initialization) as an llm.c model file
  /usr/bin/python3 scripts/bench_generate.py --model M.bin --prompt-ids FILE -n 64 --threads 2
      prints: pytorch: prompt=P new=N threads=T seconds=S tok_per_s=X
"""
import argparse
import math
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

DEPTHS = {"d6": (6, 384, 6), "d12": (12, 768, 12), "d24": (24, 1024, 16)}


def shapes(maxT, L, C, Vp):
    return [(Vp, C), (maxT, C), (L, C), (L, C), (L, 3 * C, C), (L, 3 * C), (L, C, C), (L, C), (L, C), (L, C),
            (L, 4 * C, C), (L, 4 * C), (L, C, 4 * C), (L, C), (C,), (C,)]


def write_model(path, depth, seed):
    L, C, NH = DEPTHS[depth]
    maxT, V, Vp = 1024, 50257, 50304
    rng = np.random.default_rng(seed)
    header = np.zeros(256, np.int32)
    header[:8] = [20240326, 3, maxT, V, L, NH, C, Vp]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for i, s in enumerate(shapes(maxT, L, C, Vp)):
            if i in (2, 8, 14):
                t = np.ones(s, np.float32)
            elif i in (3, 5, 7, 9, 11, 13, 15):
                t = np.zeros(s, np.float32)
            else:
                std = 0.02 / math.sqrt(2 * L) if i in (6, 12) else 0.02
                t = rng.normal(0.0, std, s).astype(np.float32)
                if i == 0:
                    t[V:] = 0.0
            f.write(t.tobytes())


def load_model(path):
    header = np.fromfile(path, np.int32, 256)
    if header[0] != 20240326 or header[1] != 3:
        sys.exit(f"error: {path}: not an llm.c fp32 model")
    maxT, V, L, NH, C, Vp = (int(x) for x in header[2:8])
    data = np.fromfile(path, np.float32, offset=1024)
    tensors, off = [], 0
    for s in shapes(maxT, L, C, Vp):
        n = int(np.prod(s))
        tensors.append(torch.from_numpy(data[off:off + n].reshape(s).copy()))
        off += n
    return (maxT, V, L, NH, C), tensors


def forward(cfg, w, idx):
    """Logits (T, V) of the token ids idx (T): the whole sequence, as nanoGPT's model."""
    maxT, V, L, NH, C = cfg
    wte, wpe, ln1w, ln1b, qkvw, qkvb, attw, attb, ln2w, ln2b, fcw, fcb, fcpw, fcpb, lnfw, lnfb = w
    T = idx.shape[0]
    x = wte[idx] + wpe[:T]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(L):
        h = F.layer_norm(x, (C,), ln1w[l], ln1b[l])
        q, k, v = F.linear(h, qkvw[l], qkvb[l]).split(C, dim=1)
        q, k, v = (t.view(T, NH, C // NH).transpose(0, 1) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // NH))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(0, 1).reshape(T, C)
        x = x + F.linear(y, attw[l], attb[l])
        h = F.layer_norm(x, (C,), ln2w[l], ln2b[l])
        x = x + F.linear(F.gelu(F.linear(h, fcw[l], fcb[l]), approximate="tanh"), fcpw[l], fcpb[l])
    x = F.layer_norm(x, (C,), lnfw, lnfb)
    return x @ wte[:V].t()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--write-model")
    ap.add_argument("--depth", default="d12", choices=sorted(DEPTHS))
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--model")
    ap.add_argument("--prompt-ids")
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    if a.write_model:
        write_model(a.write_model, a.depth, a.seed)
        return
    torch.set_num_threads(a.threads)
    cfg, w = load_model(a.model)
    ids = [int(line) for line in open(a.prompt_ids) if line.strip()]
    tokens = torch.tensor(ids, dtype=torch.long)
    with torch.no_grad():
        forward(cfg, w, tokens[:8])  # warm-up
        t0 = time.perf_counter()
        for _ in range(a.n):
            logits = forward(cfg, w, tokens[-cfg[0]:])
            tokens = torch.cat([tokens, logits[-1].argmax().view(1)])
        seconds = time.perf_counter() - t0
    print(f"pytorch: prompt={len(ids)} new={a.n} threads={a.threads} seconds={seconds:.3f} "
          f"tok_per_s={a.n / seconds:.2f}")


if __name__ == "__main__":
    main()
