#!/usr/bin/python3
"""
PyTorch reference for ./eval (scripts/tests/test_eval.sh), in float64.

    /usr/bin/python3 scripts/reference/eval_reference.py --model MODEL.bin --jsonl ITEMS.jsonl --evalfile ITEMS.bin
    /usr/bin/python3 scripts/reference/eval_reference.py --model MODEL.bin --shard VAL.bin -B 4 -T 64 -m 5

HellaSwag: renders each jsonl item as llm.c's dev/data/hellaswag.py does (context tokens,
then " " + ending; a (4, max_len) batch of rows padded with 0 and a mask over the
ending's tokens; losses at the shifted positions; acc from the argmin of the sum of an
ending's losses, acc_norm from the argmin of their mean), the tokens coming from our C
tokenizer (./tokenize --records). It also parses --evalfile (llm.c's eval format) on
its own and checks that it holds exactly these tokens and labels. Prints, per example,
the line ./eval --verbose 1 prints, then "acc A acc_norm N min_gap G" (G: the smallest
gap between the best and the second best ending, by sum or mean, over all examples).
Shards: the mean over the first m batches (slot k: tokens k*B*T .. k*B*T+B*T) of the
mean cross-entropy, printed as "val loss X".
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "convert"))  # hf_gpt2
from gpt2_reference import GPT2  # noqa: E402
from hf_gpt2 import read_llmc  # noqa: E402


def load_model(path):
    cfg, t = read_llmc(path)
    model = GPT2(cfg["L"], cfg["NH"], cfg["C"], cfg["maxT"], cfg["V"])
    with torch.no_grad():
        model.wte.weight.copy_(torch.from_numpy(t[0][:cfg["V"]].copy()))
        model.wpe.weight.copy_(torch.from_numpy(t[1].copy()))
        for i, b in enumerate(model.h):
            for mod, wi in ((b.ln_1, 2), (b.c_attn, 4), (b.c_proj, 6), (b.ln_2, 8), (b.c_fc, 10), (b.c_proj2, 12)):
                mod.weight.copy_(torch.from_numpy(t[wi][i].copy()))  # llm.c's (out, in) is nn.Linear's
                mod.bias.copy_(torch.from_numpy(t[wi + 1][i].copy()))
        model.ln_f.weight.copy_(torch.from_numpy(t[14].copy()))
        model.ln_f.bias.copy_(torch.from_numpy(t[15].copy()))
    return model.double(), cfg


def losses_of(model, x, y):
    logits, _ = model(x, y)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), reduction="none").view(y.shape)


def parse_evalfile(path):
    raw = open(path, "rb").read()
    header = np.frombuffer(raw, dtype="<i4", count=256)
    assert header[0] == 20240522 and header[1] == 1, f"{path}: bad header"
    s = np.frombuffer(raw, dtype="<u2", offset=1024).tolist()
    examples, pos = [], 0
    for e in range(header[2]):
        assert s[pos] == 65535 and s[pos + 2] == e
        nbytes, label, k, n = s[pos + 1], s[pos + 3], s[pos + 4], s[pos + 5]
        at = pos + 6
        ctx = s[at:at + n]
        at += n
        ends = []
        for _ in range(k):
            m = s[at]
            ends.append(s[at + 1:at + 1 + m])
            at += 1 + m
        assert at - pos == nbytes // 2, f"example {e}: size field {nbytes} does not match"
        examples.append((ctx, ends, label))
        pos = at
    assert pos == len(s) and max(len(ex) for ex in [s]) >= 0
    return examples


def hellaswag(model, jsonl, evalfile, tokenize, vocab):
    items = [json.loads(line) for line in open(jsonl, encoding="utf-8") if line.strip()]
    texts = []
    for it in items:
        texts += [it["ctx"]] + [" " + e for e in it["endings"]]
    out = subprocess.run([tokenize, "--vocab", vocab, "--records", "-"],
                         input=b"".join(t.encode() + b"\0" for t in texts), capture_output=True, check=True)
    toks = [[int(v) for v in line.split()] for line in out.stdout.decode().split("\n")[:-1]]
    assert len(toks) == len(texts)
    from_file = parse_evalfile(evalfile)
    assert len(from_file) == len(items), f"{evalfile}: {len(from_file)} examples, the jsonl has {len(items)}"
    correct = correct_norm = 0
    min_gap = float("inf")
    i = 0
    for e, it in enumerate(items):
        ctx, ends = toks[i], toks[i + 1:i + 1 + len(it["endings"])]
        i += 1 + len(it["endings"])
        assert from_file[e] == (ctx, ends, it["label"]), f"{evalfile}: example {e} differs from the jsonl's rendering"
        rows = [ctx + end for end in ends]
        T = max(len(r) for r in rows)
        tokens = torch.zeros((len(rows), T), dtype=torch.long)
        mask = torch.zeros((len(rows), T), dtype=torch.long)
        for r, end in enumerate(ends):
            tokens[r, :len(rows[r])] = torch.tensor(rows[r])
            mask[r, len(ctx):len(rows[r])] = 1
        with torch.no_grad():
            shift_losses = losses_of(model, tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()) if T > 1 else torch.zeros(len(rows), 0)
        shift_mask = mask[:, 1:].double()
        sum_loss = (shift_losses * shift_mask).sum(dim=1)
        avg_loss = sum_loss / shift_mask.sum(dim=1)
        pred, pred_norm = sum_loss.argmin().item(), avg_loss.argmin().item()
        correct += pred == it["label"]
        correct_norm += pred_norm == it["label"]
        for v in (sum_loss, avg_loss):
            if len(v) > 1:
                top2 = torch.sort(v).values[:2]
                min_gap = min(min_gap, (top2[1] - top2[0]).item())
        print(f"example {e} label {it['label']} pred {pred} pred_norm {pred_norm} sum "
              + " ".join(f"{v:.9g}" for v in sum_loss.tolist()) + " mean "
              + " ".join(f"{v:.9g}" for v in avg_loss.tolist()))
    print(f"acc {correct / len(items):.4f} acc_norm {correct_norm / len(items):.4f} min_gap {min_gap:.6g}")


def shard_loss(model, shard, B, T, m):
    raw = open(shard, "rb").read()
    header = np.frombuffer(raw, dtype="<i4", count=256)
    tokens = np.frombuffer(raw, dtype="<u2", offset=1024, count=int(header[2])).astype(np.int64)
    n = min(m, (len(tokens) - 1) // (B * T))
    total = 0.0
    for k in range(n):
        buf = torch.from_numpy(tokens[k * B * T:k * B * T + B * T + 1].copy())
        with torch.no_grad():
            total += losses_of(model, buf[:-1].view(B, T), buf[1:].view(B, T)).mean().item()
    print(f"val loss {total / n:.9g} ({n} batches)")


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--jsonl")
    ap.add_argument("--evalfile")
    ap.add_argument("--shard")
    ap.add_argument("-B", type=int, default=4)
    ap.add_argument("-T", type=int, default=64)
    ap.add_argument("-m", type=int, default=1 << 30)
    ap.add_argument("--vocab", default=os.path.join(root, "data", "gpt2"))
    ap.add_argument("--tokenize", default=os.path.join(root, "tokenize"))
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    model, _ = load_model(a.model)
    if a.jsonl:
        hellaswag(model, a.jsonl, a.evalfile, a.tokenize, a.vocab)
    if a.shard:
        shard_loss(model, a.shard, a.B, a.T, a.m)
    return 0


if __name__ == "__main__":
    sys.exit(main())
