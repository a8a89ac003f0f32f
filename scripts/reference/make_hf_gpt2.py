"""
A random GPT-2 written in Hugging Face's layout, for the conversion tests
(scripts/tests/test_convert.sh): the layouts the hub's checkpoints come in, including
those today's transformers no longer writes (no "transformer." prefix, the mask
buffers, fp16, no config.json). transformers' own save_pretrained is tested with
scripts/reference/hf_check.py.

    .venv/bin/python scripts/reference/make_hf_gpt2.py --layers 2 --heads 2 --channels 128 \
        --max-seq-len 48 --vocab 1001 [--seed N] OUT_DIR[:OPTION,...] ...

OPTIONs (one model, several layouts, in one process: PyTorch takes seconds to start):
bin (pytorch_model.bin instead of model.safetensors), prefix, lm-head, buffers,
no-config, F16 or BF16 (instead of F32).

Keys h.{i}.ln_1.weight, h.{i}.attn.c_attn.weight (Conv1D: (in, out)), ... with the
"transformer." prefix (--prefix, as GPT2LMHeadModel's state dict) or without (as the
hub's gpt2 files); lm_head.weight, tied to wte (--lm-head); the causal-mask buffers
h.{i}.attn.bias (1, 1, maxT, maxT) and h.{i}.attn.masked_bias (--buffers). The weights
depend on the seed only, not on the format, prefix or dtype flags (F16/BF16 round them).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "convert"))  # hf_gpt2
from hf_gpt2 import hf_config_json, write_safetensors  # noqa: E402


def random_gpt2(L, NH, C, maxT, V, seed):
    """{HF name: float32 tensor} in GPT2Model's order, Conv1D weights (in, out)."""
    g = torch.Generator().manual_seed(seed)
    def rnd(*shape, std=0.02, mean=0.0):
        return torch.randn(*shape, generator=g, dtype=torch.float32) * std + mean
    sd = {"wte.weight": rnd(V, C), "wpe.weight": rnd(maxT, C, std=0.01)}
    proj_std = 0.02 / math.sqrt(2 * L)
    for i in range(L):
        p = f"h.{i}."
        sd[p + "ln_1.weight"], sd[p + "ln_1.bias"] = rnd(C, std=0.1, mean=1.0), rnd(C)
        sd[p + "attn.c_attn.weight"], sd[p + "attn.c_attn.bias"] = rnd(C, 3 * C), rnd(3 * C)
        sd[p + "attn.c_proj.weight"], sd[p + "attn.c_proj.bias"] = rnd(C, C, std=proj_std), rnd(C)
        sd[p + "ln_2.weight"], sd[p + "ln_2.bias"] = rnd(C, std=0.1, mean=1.0), rnd(C)
        sd[p + "mlp.c_fc.weight"], sd[p + "mlp.c_fc.bias"] = rnd(C, 4 * C), rnd(4 * C)
        sd[p + "mlp.c_proj.weight"], sd[p + "mlp.c_proj.bias"] = rnd(4 * C, C, std=proj_std), rnd(C)
    sd["ln_f.weight"], sd["ln_f.bias"] = rnd(C, std=0.1, mean=1.0), rnd(C)
    return sd


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outs", nargs="+", metavar="OUT_DIR[:OPTION,...]")
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--channels", type=int, required=True)
    ap.add_argument("--max-seq-len", type=int, required=True)
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--seed", type=int, default=5)
    a = ap.parse_args()
    L, NH, C, maxT, V = a.layers, a.heads, a.channels, a.max_seq_len, a.vocab
    sd = random_gpt2(L, NH, C, maxT, V, a.seed)
    for spec in a.outs:
        out_dir, _, opts = spec.partition(":")
        opts = set(opts.split(",")) - {""}
        unknown = opts - {"bin", "prefix", "lm-head", "buffers", "no-config", "F16", "BF16"}
        if unknown:
            ap.error(f"{spec}: unknown option {sorted(unknown)[0]}")
        write(sd, out_dir, opts, L, NH, C, maxT, V)
    return 0


def write(sd, out_dir, opts, L, NH, C, maxT, V):
    a = argparse.Namespace(out=out_dir, prefix="prefix" in opts, lm_head="lm-head" in opts,
                           buffers="buffers" in opts, no_config="no-config" in opts,
                           format="bin" if "bin" in opts else "safetensors",
                           dtype="F16" if "F16" in opts else "BF16" if "BF16" in opts else "F32")
    torch_dtype = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[a.dtype]
    out = {}
    for k, v in sd.items():
        out[("transformer." if a.prefix else "") + k] = v.to(torch_dtype)
        if a.buffers and k.endswith("ln_1.bias"):  # the buffers sit between ln_1 and attn in the hub's files
            i = k.split(".")[1]
            pre = ("transformer." if a.prefix else "") + f"h.{i}.attn."
            out[pre + "bias"] = torch.tril(torch.ones(maxT, maxT)).view(1, 1, maxT, maxT)
            out[pre + "masked_bias"] = torch.tensor(-1e4)
    if a.lm_head:
        out["lm_head.weight"] = out[("transformer." if a.prefix else "") + "wte.weight"]
    os.makedirs(a.out, exist_ok=True)
    if a.format == "bin":
        torch.save(out, os.path.join(a.out, "pytorch_model.bin"))
    else:
        def np_of(t):
            if t.dtype == torch.bfloat16:
                return "BF16", t.view(torch.int16).numpy().view(np.uint16)
            return {torch.float32: "F32", torch.float16: "F16"}[t.dtype], t.numpy()
        write_safetensors(os.path.join(a.out, "model.safetensors"),
                          [(k,) + np_of(v.contiguous()) for k, v in out.items()], metadata={"format": "pt"})
    if not a.no_config:
        with open(os.path.join(a.out, "config.json"), "w") as f:
            json.dump(hf_config_json(dict(L=L, NH=NH, C=C, maxT=maxT, V=V)), f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
