"""
A Hugging Face GPT-2 checkpoint -> an llm.c model file (train_gpt2 -e, eval -e).

    .venv/bin/python scripts/convert/hf_to_llmc.py HF_DIR OUT.bin

HF_DIR holds model.safetensors (or a sharded model.safetensors.index.json, or
pytorch_model.bin, read with PyTorch) and, optionally, config.json. Any GPT-2
size (gpt2, -medium, -large, -xl). Keys may carry the "transformer." prefix;
lm_head.weight may be present (it must equal wte: GPT-2 ties them) or absent;
the attention mask buffers (attn.bias, attn.masked_bias) are ignored. Conv1D
weights (in, out) are transposed to llm.c's (out, in); the vocabulary is padded
to a multiple of 128 with zero rows; fp16/bf16/fp64 weights become fp32. The
config comes from config.json, or from the shapes (then n_head = n_embd / 64,
as in every GPT-2 size). OUT.bin carries the CRC32 of its tensors as our
checkpoints do, and is written under a temporary name, then renamed.

Anything that is not a GPT-2 checkpoint (missing or unexpected keys, shapes
that disagree, integer tensors, another architecture in config.json) is
refused with one line on stderr and exit status 1.
"""
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_gpt2 import (BUFFERS, LN_EPS, BadInput, bf16_bits_to_f32, hf_shapes, hf_to_llmc_tensors,  # noqa: E402
                     padded_vocab, read_safetensors, write_llmc)


def to_f32(path, name, dtype, a):
    if dtype == "BF16":
        return bf16_bits_to_f32(a)
    if dtype in ("F32", "F16", "F64"):
        return a.astype(np.float32, copy=False)  # F32: the mapped file itself, no copy
    raise BadInput(f"{path}: tensor {name} has dtype {dtype}, not a float: not a GPT-2 weight")


def load_pytorch_bin(path):
    import torch  # only for this format
    try:
        sd = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many kinds for a damaged file
        raise BadInput(f"{path}: cannot load with torch.load: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    if not isinstance(sd, dict):
        raise BadInput(f"{path}: not a state dict (a {type(sd).__name__})")
    names = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64"}
    out = {}
    for name, t in sd.items():
        if not isinstance(t, torch.Tensor):
            raise BadInput(f"{path}: entry {name} is not a tensor")
        if t.dtype in names:
            out[name] = ("F32", t.detach().to(torch.float32).contiguous().numpy())
        else:
            out[name] = (str(t.dtype).replace("torch.", ""), None)
    return out


def load_checkpoint(d):
    """{name: (dtype name, array)} of HF_DIR's weights, and the file they came from."""
    st, index, pt = (os.path.join(d, f) for f in ("model.safetensors", "model.safetensors.index.json",
                                                  "pytorch_model.bin"))
    if os.path.isfile(st):
        return read_safetensors(st), st
    if os.path.isfile(index):
        try:
            with open(index) as f:
                weight_map = json.load(f)["weight_map"]
            files = sorted(set(weight_map.values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise BadInput(f"{index}: not a safetensors index ({e})")
        tensors = {}
        for name in files:
            tensors.update(read_safetensors(os.path.join(d, name)))
        return tensors, index
    if os.path.isfile(pt):
        return load_pytorch_bin(pt), pt
    raise BadInput(f"{d}: no model.safetensors, model.safetensors.index.json or pytorch_model.bin")


def read_config(d, hf, source):
    """L, NH, C, maxT, V from config.json, checked against GPT-2's math, or from the shapes."""
    path = os.path.join(d, "config.json")
    wte = hf.get("wte.weight")
    if wte is None or wte.ndim != 2:
        raise BadInput(f"{source}: no 2-D wte.weight: not a GPT-2 checkpoint")
    layers = {int(m.group(1)) for k in hf for m in [re.match(r"h\.(\d+)\.", k)] if m}
    if not os.path.isfile(path):
        V, C = wte.shape
        wpe = hf.get("wpe.weight")
        if wpe is None or wpe.ndim != 2:
            raise BadInput(f"{source}: no 2-D wpe.weight: not a GPT-2 checkpoint")
        if C % 64 != 0:
            raise BadInput(f"{d}: no config.json, and n_embd {C} is not a multiple of 64: cannot tell n_head")
        if not layers:
            raise BadInput(f"{source}: no blocks (h.0.*): not a GPT-2 checkpoint")
        return dict(L=max(layers) + 1, NH=C // 64, C=C, maxT=wpe.shape[0], V=V)
    try:
        with open(path) as f:
            c = json.load(f)
        if not isinstance(c, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as e:
        raise BadInput(f"{path}: cannot read: {e}")
    def get(key, *alts):
        for k in (key,) + alts:
            if k in c:
                v = c[k]
                if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                    raise BadInput(f"{path}: {k} is {v!r}, not a positive integer")
                return v
        raise BadInput(f"{path}: no {key}: not a GPT-2 config")
    if c.get("model_type", "gpt2") != "gpt2":
        raise BadInput(f"{path}: model_type is {c.get('model_type')!r}, not gpt2")
    cfg = dict(L=get("n_layer"), NH=get("n_head"), C=get("n_embd"), maxT=get("n_positions", "n_ctx"),
               V=get("vocab_size"))
    # what llm.c computes: tanh GELU, LayerNorm eps 1e-5, attention scaled by 1/sqrt(head size), MLP of 4C
    if c.get("activation_function", "gelu_new") not in ("gelu_new", "gelu_pytorch_tanh"):
        raise BadInput(f"{path}: activation_function {c['activation_function']!r}: llm.c computes the tanh GELU")
    if abs(float(c.get("layer_norm_epsilon", LN_EPS)) - LN_EPS) > 1e-12:
        raise BadInput(f"{path}: layer_norm_epsilon {c['layer_norm_epsilon']}: llm.c uses {LN_EPS}")
    if c.get("n_inner") not in (None, 4 * cfg["C"]):
        raise BadInput(f"{path}: n_inner {c['n_inner']}: llm.c's MLP is 4 * n_embd = {4 * cfg['C']}")
    if c.get("scale_attn_by_inverse_layer_idx", False) or not c.get("scale_attn_weights", True):
        raise BadInput(f"{path}: attention scaling other than 1/sqrt(head size): not what llm.c computes")
    if cfg["C"] % cfg["NH"] != 0:
        raise BadInput(f"{path}: n_head {cfg['NH']} does not divide n_embd {cfg['C']}")
    return cfg


def convert(d, out):
    if not os.path.isdir(d):
        raise BadInput(f"{d}: not a directory")
    raw, source = load_checkpoint(d)
    hf = {}
    for name, (dtype, a) in raw.items():
        short = name[len("transformer."):] if name.startswith("transformer.") else name
        if short.endswith(BUFFERS) and re.fullmatch(r"h\.\d+\.attn\.(masked_)?bias", short):
            continue
        if short in hf:
            raise BadInput(f"{source}: {short} appears twice (with and without the transformer. prefix)")
        if a is None:  # from torch: a non-float dtype
            raise BadInput(f"{source}: tensor {name} has dtype {dtype}, not a float: not a GPT-2 weight")
        hf[short] = to_f32(source, name, dtype, a)
    cfg = read_config(d, hf, source)
    lm_head = hf.pop("lm_head.weight", None)
    expected = hf_shapes(cfg["L"], cfg["C"], cfg["maxT"], cfg["V"])
    for name, shape in expected.items():
        if name not in hf:
            raise BadInput(f"{source}: missing {name}: not a GPT-2 checkpoint of "
                           f"n_layer={cfg['L']} n_embd={cfg['C']}")
        if tuple(hf[name].shape) != shape:
            raise BadInput(f"{source}: {name} has shape {list(hf[name].shape)}, expected {list(shape)} "
                           f"(n_layer={cfg['L']} n_embd={cfg['C']} n_positions={cfg['maxT']} vocab_size={cfg['V']})")
    extra = sorted(set(hf) - set(expected))
    if extra:
        raise BadInput(f"{source}: unexpected tensor {extra[0]}" + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else "")
                       + ": not a GPT-2 checkpoint of this config")
    if lm_head is not None and not np.array_equal(lm_head, hf["wte.weight"]):
        raise BadInput(f"{source}: lm_head.weight differs from wte.weight: llm.c's GPT-2 ties them")
    cfg["Vp"] = padded_vocab(cfg["V"])
    write_llmc(out, cfg, hf_to_llmc_tensors(cfg, hf))
    return cfg


def main():
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        print("usage: scripts/convert/hf_to_llmc.py HF_DIR OUT.bin", file=sys.stderr)
        return 2
    try:
        cfg = convert(sys.argv[1], sys.argv[2])
    except BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: {e.filename or sys.argv[2]}: {e.strerror or e}", file=sys.stderr)
        return 1
    print(f"wrote {sys.argv[2]}: L={cfg['L']} NH={cfg['NH']} C={cfg['C']} maxT={cfg['maxT']} "
          f"V={cfg['V']} (padded {cfg['Vp']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
