#!/usr/bin/python3
"""
The PyTorch reference for test_gpt2: a GPT-2 of any config, one batch, and
everything our C implementation must reproduce.

    /usr/bin/python3 scripts/reference/gpt2_reference.py --depth d12 -B 4 -T 64 --out data/ref/d12
    /usr/bin/python3 scripts/reference/gpt2_reference.py --layers 2 --heads 3 --channels 57 \
        --max-seq-len 37 --vocab 517 -B 3 -T 29 --out data/ref/odd

writes into OUT:
  model.bin        llm.c checkpoint (magic 20240326, version 3, fp32, wte padded to Vp rows)
  state.bin        llm.c debug state (magic 20240327, version 2): B, T, inputs x (B,T) and
                   targets y (B,T) as int32, logits (B,T,V), the mean loss, the gradient of
                   every parameter in checkpoint order (padded wte rows zero), all fp32
  losses.txt       the loss at each of --steps AdamW steps on that same batch (lr 1e-4,
                   betas 0.9/0.999, eps 1e-8, no weight decay), one per line
  activations.bin  every intermediate of the forward pass in forward order, then the gradients
                   of the ones the backward pass materializes ("h.0.dqkv", "dlogits": format below)

The model is initialized in fp32 (GPT-2's scheme, plus non-zero biases and
LayerNorm parameters so that every parameter shapes the forward pass), and then
computed in float64: the reference is then exact to fp32 precision, and the
test's tolerances measure the error of our fp32 kernels alone.

--precision bf16: every matmul (the four linear layers and the LM head; forward, and both
products of the backward pass) takes its two operands rounded to bf16 as train_gpt2
--precision bf16 does (the value as fp32, then round-to-nearest-even to bf16) and
computes the product, the bias and everything else in float64. The attention products
round their operands too, as train_gpt2's bf16 attention does: Q, K, V, the probabilities P
(normalized by the log-sum-exp, not renormalized after rounding), the output's gradient dY
and dS; the softmax, D = rowsum(dY * Y) and dS itself stay float64.

activations.bin: a 256 x int32 header (magic 20261122, version 1, header[2] =
number of records), then records: name (64 bytes, NUL-padded ASCII, e.g.
"h.0.qkv"), ndim (int32), 4 dims (int32, unused ones 1), the fp32 data.
"""
import argparse
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MODEL_MAGIC, MODEL_VERSION = 20240326, 3
STATE_MAGIC, STATE_VERSION = 20240327, 2
ACTS_MAGIC, ACTS_VERSION = 20261122, 1
LN_EPS = 1e-5

DEPTHS = {"d6": (6, 384, 6), "d12": (12, 768, 12), "d24": (24, 1024, 16),
          "d36": (36, 1280, 20), "d48": (48, 1600, 25)}


def round_bf16(t):
    """t rounded as our kernels round: to fp32, then to bf16 (nearest even), exactly
    representable in float64."""
    return t.to(torch.float32).to(torch.bfloat16).to(t.dtype)


class Bf16Matmul(torch.autograd.Function):
    """x (..., K) . w (N, K)^T with both operands rounded to bf16, in the forward and in
    each product of the backward: dx = r(dy) . r(w), dw = r(dy)^T . r(x)."""
    @staticmethod
    def forward(ctx, x, w):
        xr, wr = round_bf16(x), round_bf16(w)
        ctx.save_for_backward(xr, wr)
        return xr @ wr.t()

    @staticmethod
    def backward(ctx, dy):
        xr, wr = ctx.saved_tensors
        dyr = round_bf16(dy)
        dw = dyr.reshape(-1, dyr.shape[-1]).t() @ xr.reshape(-1, xr.shape[-1])
        return dyr @ wr, dw


ATTN_BK = 64  # keys per block of attention_forward's online softmax (llmc/attention.h)


class Bf16Attention(torch.autograd.Function):
    """Causal attention of q, k, v (B, NH, T, hs) with the operands of its four products
    rounded to bf16 as train_gpt2 --precision bf16 computes it; returns y (B, NH, T, hs)
    and the log-sum-exp of the scores (B, NH, T)."""
    @staticmethod
    def forward(ctx, q, k, v):
        T, hs = q.shape[-2], q.shape[-1]
        scale = 1.0 / math.sqrt(hs)
        qr, kr, vr = round_bf16(q), round_bf16(k), round_bf16(v)
        scores = (qr @ kr.transpose(-2, -1)) * scale
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        lse = torch.logsumexp(scores, dim=-1)
        p = torch.exp(scores - lse.unsqueeze(-1))
        # The kernel's softmax is online, over blocks of ATTN_BK keys: it rounds p~ = exp(score -
        # m) as it feeds the product with V, m the query's running maximum after the key's block,
        # and rescales the blocks' sums by exp(m - m_last) as the maximum grows, and their total
        # by 1 / sum exp(score - m_last) at the end: y = sum over keys round(p~) exp(m - lse) v.
        nb = -(-T // ATTN_BK)
        padded = F.pad(scores, (0, nb * ATTN_BK - T), value=float("-inf"))
        m = padded.view(*scores.shape[:-1], nb, ATTN_BK).amax(dim=-1).cummax(dim=-1).values
        m = m.repeat_interleave(ATTN_BK, dim=-1)[..., :T]  # finite: key 0 is in the first block
        y = (round_bf16(torch.exp(scores - m)) * torch.exp(m - lse.unsqueeze(-1))) @ vr
        ctx.save_for_backward(qr, kr, vr, p, y)
        ctx.scale = scale
        ctx.mark_non_differentiable(lse)
        return y, lse

    @staticmethod
    def backward(ctx, dy, dlse):
        qr, kr, vr, p, y = ctx.saved_tensors
        dyr = round_bf16(dy)
        dp = dyr @ vr.transpose(-2, -1)
        # D from the unrounded dY and the forward's Y, as the kernel computes it (= rowsum(P * dP)
        # without rounding)
        d = (dy * y).sum(dim=-1, keepdim=True)
        ds = p * (dp - d)  # zero where masked, as P is
        dsr = round_bf16(ds)
        # the scale multiplies the product of the rounded, unscaled dS
        dq = ctx.scale * (dsr @ kr)
        dk = ctx.scale * (dsr.transpose(-2, -1) @ qr)
        dv = round_bf16(p).transpose(-2, -1) @ dyr
        return dq, dk, dv


PRECISION = "fp32"  # --precision


def matmul(x, w):
    """x (..., K) . w (N, K)^T: the product of a linear layer, in the precision of the run."""
    return Bf16Matmul.apply(x, w) if PRECISION == "bf16" else x @ w.t()


def linear(x, layer):
    return matmul(x, layer.weight) + layer.bias


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln_1 = nn.LayerNorm(C, eps=LN_EPS)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=LN_EPS)
        self.c_fc = nn.Linear(C, 4 * C)
        self.c_proj2 = nn.Linear(4 * C, C)

    def forward(self, x, record):
        B, T, C = x.shape
        NH, hs = self.NH, C // self.NH
        record_layernorm_stats("ln1", x, record)
        h = self.ln_1(x)
        record("ln1", h, grad=True)
        qkv = linear(h, self.c_attn)
        record("qkv", qkv, grad=True)
        q, k, v = qkv.split(C, dim=2)
        q = q.view(B, T, NH, hs).transpose(1, 2)  # (B, NH, T, hs)
        k = k.view(B, T, NH, hs).transpose(1, 2)
        v = v.view(B, T, NH, hs).transpose(1, 2)
        if PRECISION == "bf16":
            y, lse = Bf16Attention.apply(q, k, v)
            record("att_lse", lse)  # (B, NH, T)
        else:
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            causal = torch.ones(T, T, dtype=torch.bool).tril()
            scores = scores.masked_fill(~causal, float("-inf"))
            record("att_lse", torch.logsumexp(scores, dim=-1))  # (B, NH, T)
            att = F.softmax(scores, dim=-1)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        record("atty", y, grad=True)
        y = linear(y, self.c_proj)
        record("attproj", y)
        x = x + y
        record("residual2", x, grad=True)
        record_layernorm_stats("ln2", x, record)
        h = self.ln_2(x)
        record("ln2", h, grad=True)
        h = linear(h, self.c_fc)
        record("fch", h, grad=True)
        h = F.gelu(h, approximate="tanh")
        record("fch_gelu", h)
        h = linear(h, self.c_proj2)
        record("fcproj", h)
        x = x + h
        record("residual3", x, grad=True)
        return x


def record_layernorm_stats(prefix, x, record):
    mean = x.mean(dim=-1)
    var = ((x - mean.unsqueeze(-1)) ** 2).mean(dim=-1)
    record(prefix + "_mean", mean)
    record(prefix + "_rstd", 1.0 / torch.sqrt(var + LN_EPS))


class GPT2(nn.Module):
    def __init__(self, L, NH, C, maxT, V):
        super().__init__()
        self.V = V
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(maxT, C)
        self.h = nn.ModuleList([Block(C, NH) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C, eps=LN_EPS)

    def forward(self, idx, targets, record=lambda name, t, grad=False: None):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        record("encoded", x)
        for l, block in enumerate(self.h):
            x = block(x, lambda name, t, grad=False, l=l: record(f"h.{l}.{name}", t, grad))
        record_layernorm_stats("lnf", x, record)
        x = self.ln_f(x)
        record("lnf", x, grad=True)
        logits = matmul(x, self.wte.weight)  # the LM head is tied to the token embedding
        record("logits", logits, grad=True)  # only its gradient is written (the logits are in state.bin)
        losses = F.cross_entropy(logits.view(-1, self.V), targets.view(-1), reduction="none")
        record("losses", losses.view(B, T))
        return logits, losses.mean()

    def llmc_tensors(self, grads=False):
        """The 16 tensors of llm.c's checkpoint, in order (wte unpadded)."""
        def get(p):
            return p.grad if grads else p.data
        def stack(fn):
            return torch.stack([get(fn(b)) for b in self.h])
        return [get(self.wte.weight), get(self.wpe.weight),
                stack(lambda b: b.ln_1.weight), stack(lambda b: b.ln_1.bias),
                stack(lambda b: b.c_attn.weight), stack(lambda b: b.c_attn.bias),
                stack(lambda b: b.c_proj.weight), stack(lambda b: b.c_proj.bias),
                stack(lambda b: b.ln_2.weight), stack(lambda b: b.ln_2.bias),
                stack(lambda b: b.c_fc.weight), stack(lambda b: b.c_fc.bias),
                stack(lambda b: b.c_proj2.weight), stack(lambda b: b.c_proj2.bias),
                get(self.ln_f.weight), get(self.ln_f.bias)]


def init_weights(model, L, seed):
    """GPT-2's initialization (std 0.02, residual projections 0.02/sqrt(2L)) in fp32,
    with small random biases and LayerNorm parameters near (1, 0) instead of exactly
    (1, 0), so that a kernel that drops a bias or a LayerNorm weight is caught."""
    g = torch.Generator().manual_seed(seed)
    def normal(p, std, mean=0.0):
        with torch.no_grad():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float32) * std + mean)
    normal(model.wte.weight, 0.02)
    normal(model.wpe.weight, 0.02)
    for b in model.h:
        for lin, std in ((b.c_attn, 0.02), (b.c_proj, 0.02 / math.sqrt(2 * L)),
                         (b.c_fc, 0.02), (b.c_proj2, 0.02 / math.sqrt(2 * L))):
            normal(lin.weight, std)
            normal(lin.bias, 0.02)
        for ln in (b.ln_1, b.ln_2):
            normal(ln.weight, 0.1, 1.0)
            normal(ln.bias, 0.02)
    normal(model.ln_f.weight, 0.1, 1.0)
    normal(model.ln_f.bias, 0.02)


def load_hf_weights(model, path):
    """The weights of a Hugging Face GPT-2 pytorch_model.bin ("transformer." prefix
    optional), mapped here independently of scripts/convert/hf_to_llmc.py: HF's Conv1D
    weights are (in, out), nn.Linear's (out, in)."""
    sd = torch.load(path, map_location="cpu")
    sd = {k[len("transformer."):] if k.startswith("transformer.") else k: v.float() for k, v in sd.items()}
    with torch.no_grad():
        model.wte.weight.copy_(sd["wte.weight"])
        model.wpe.weight.copy_(sd["wpe.weight"])
        for i, b in enumerate(model.h):
            for mine, theirs in ((b.ln_1, "ln_1"), (b.ln_2, "ln_2"), (b.c_attn, "attn.c_attn"),
                                 (b.c_proj, "attn.c_proj"), (b.c_fc, "mlp.c_fc"), (b.c_proj2, "mlp.c_proj")):
                w = sd[f"h.{i}.{theirs}.weight"]
                mine.weight.copy_(w.t() if w.dim() == 2 else w)
                mine.bias.copy_(sd[f"h.{i}.{theirs}.bias"])
        model.ln_f.weight.copy_(sd["ln_f.weight"])
        model.ln_f.bias.copy_(sd["ln_f.bias"])


def f32(t):
    return t.detach().to(torch.float32).contiguous().numpy()


def write_model(path, model, cfg):
    header = np.zeros(256, dtype=np.int32)
    header[:8] = [MODEL_MAGIC, MODEL_VERSION, cfg["maxT"], cfg["V"], cfg["L"], cfg["NH"], cfg["C"], cfg["Vp"]]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for i, t in enumerate(model.llmc_tensors()):
            f.write(pad_wte(f32(t), cfg) if i == 0 else f32(t).tobytes())


def pad_wte(wte, cfg):
    padded = np.zeros((cfg["Vp"], cfg["C"]), dtype=np.float32)
    padded[: cfg["V"]] = wte
    return padded.tobytes()


def write_state(path, model, cfg, x, y, logits, loss):
    B, T = x.shape
    header = np.zeros(256, dtype=np.int32)
    header[:4] = [STATE_MAGIC, STATE_VERSION, B, T]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(x.numpy().astype(np.int32).tobytes())
        f.write(y.numpy().astype(np.int32).tobytes())
        f.write(f32(logits).tobytes())
        f.write(np.float32(loss.item()).tobytes())
        for i, t in enumerate(model.llmc_tensors(grads=True)):
            f.write(pad_wte(f32(t), cfg) if i == 0 else f32(t).tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--depth", choices=sorted(DEPTHS), help="llm.c preset (maxT 1024, V 50257)")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--channels", type=int)
    ap.add_argument("--max-seq-len", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--padded-vocab", type=int, help="default: vocab rounded up to a multiple of 128")
    ap.add_argument("-B", type=int, default=4)
    ap.add_argument("-T", type=int, default=64)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--steps", type=int, default=10, help="AdamW steps for losses.txt")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                    help="bf16: the operands of the matmuls and attention products rounded to bf16 "
                         "(see the top of this file)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    ap.add_argument("--hf", metavar="PYTORCH_MODEL_BIN",
                    help="take the weights from a Hugging Face GPT-2 pytorch_model.bin of this config")
    args = ap.parse_args()

    if args.depth:
        L, C, NH = DEPTHS[args.depth]
    else:
        if None in (args.layers, args.heads, args.channels):
            ap.error("give --depth, or --layers, --heads and --channels")
        L, NH, C = args.layers, args.heads, args.channels
    V, maxT = args.vocab, args.max_seq_len
    Vp = args.padded_vocab or (V + 127) // 128 * 128
    if C % NH != 0 or min(L, NH, C, V, maxT, args.B, args.T) < 1 or Vp < V or args.T > maxT:
        ap.error(f"inconsistent config: L={L} NH={NH} C={C} V={V} Vp={Vp} maxT={maxT} B={args.B} T={args.T}")
    cfg = dict(L=L, NH=NH, C=C, maxT=maxT, V=V, Vp=Vp)
    global PRECISION
    PRECISION = args.precision
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)

    torch.manual_seed(args.seed)
    model = GPT2(L, NH, C, maxT, V)
    init_weights(model, L, args.seed)
    if args.hf:
        load_hf_weights(model, args.hf)
    write_model(os.path.join(args.out, "model.bin"), model, cfg)
    model = model.double()

    g = torch.Generator().manual_seed(args.seed + 1)
    x = torch.randint(0, V, (args.B, args.T), generator=g)
    y = torch.randint(0, V, (args.B, args.T), generator=g)

    # one forward and backward pass, recording every intermediate
    # and the gradient of the loss with respect to some of them, named "d" + the tensor's name
    # ("h.0.dqkv"), written after the forward records: the ones our backward pass computes as
    # explicit tensors (test_gpt2 checks them as they are made).
    records, wanted_grads = [], []
    def record(name, t, grad=False):
        if name != "logits":
            records.append((name, f32(t)))
        if grad:
            t.retain_grad()
            wanted_grads.append((name, t))
    logits, loss = model(x, y, record)
    loss.backward()
    for name, t in wanted_grads:
        prefix, _, base = name.rpartition(".")
        records.append((f"{prefix}.d{base}" if prefix else f"d{base}", f32(t.grad)))
    write_state(os.path.join(args.out, "state.bin"), model, cfg, x, y, logits, loss)
    with open(os.path.join(args.out, "activations.bin"), "wb") as f:
        header = np.zeros(256, dtype=np.int32)
        header[:3] = [ACTS_MAGIC, ACTS_VERSION, len(records)]
        f.write(header.tobytes())
        for name, a in records:
            dims = list(a.shape) + [1] * (4 - a.ndim)
            f.write(struct.pack("64s5i", name.encode(), a.ndim, *dims))
            f.write(a.tobytes())

    # AdamW steps on the same batch
    model.zero_grad()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    with open(os.path.join(args.out, "losses.txt"), "w") as f:
        for step in range(args.steps):
            opt.zero_grad()
            _, loss = model(x, y)
            loss.backward()
            opt.step()
            f.write(f"{loss.item():.17g}\n")
    print(f"wrote {args.out}: L={L} NH={NH} C={C} maxT={maxT} V={V} Vp={Vp} B={args.B} T={args.T} "
          f"seed={args.seed}, {PRECISION}, loss {loss.item():.6f} after {args.steps} steps")


if __name__ == "__main__":
    sys.exit(main())
