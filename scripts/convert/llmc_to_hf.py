"""
An llm.c model file -> a Hugging Face GPT-2 directory (model.safetensors + config.json),
loadable by transformers' GPT2LMHeadModel.from_pretrained(OUT_DIR).

    .venv/bin/python scripts/convert/llmc_to_hf.py MODEL.bin OUT_DIR [--dtype fp32|bf16]

Keys are GPT2LMHeadModel's ("transformer.wte.weight", "transformer.h.0.attn.c_attn.weight",
...); lm_head.weight is left out, as save_pretrained does, since it is tied to wte.
Conv1D weights are written (in, out), the transpose of llm.c's; wte loses its padding
rows. --dtype bf16 rounds every weight to nearest, ties to even. The files are written
under temporary names and renamed; OUT_DIR is created if missing.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_gpt2 import (BadInput, f32_to_bf16_bits, hf_config_json, llmc_to_hf_tensors, read_llmc,  # noqa: E402
                     write_atomically, write_safetensors)


def export(model_path, out_dir, dtype):
    cfg, tensors = read_llmc(model_path)
    if np.any(tensors[0][cfg["V"]:] != 0):
        print(f"warning: {model_path}: the padding rows of wte (beyond V={cfg['V']}) are not zero; "
              "they are dropped", file=sys.stderr)
    hf = llmc_to_hf_tensors(cfg, tensors)
    if dtype == "bf16":
        st = [(f"transformer.{k}", "BF16", f32_to_bf16_bits(v)) for k, v in hf.items()]
    else:
        st = [(f"transformer.{k}", "F32", np.ascontiguousarray(v, dtype="<f4")) for k, v in hf.items()]
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise BadInput(f"{out_dir}: exists and is not a directory")
    os.makedirs(out_dir, exist_ok=True)
    config = hf_config_json(cfg, "bfloat16" if dtype == "bf16" else "float32")
    write_atomically(os.path.join(out_dir, "model.safetensors"),
                     lambda tmp: write_safetensors(tmp, st, metadata={"format": "pt"}))
    def write_config(tmp):
        with open(tmp, "w") as f:
            json.dump(config, f, indent=2)
            f.write("\n")
    write_atomically(os.path.join(out_dir, "config.json"), write_config)
    return cfg


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", metavar="MODEL.bin")
    ap.add_argument("out_dir", metavar="OUT_DIR")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    args = ap.parse_args()
    try:
        cfg = export(args.model, args.out_dir, args.dtype)
    except BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: {e.filename or args.out_dir}: {e.strerror or e}", file=sys.stderr)
        return 1
    print(f"wrote {args.out_dir}/model.safetensors ({args.dtype}) and config.json: L={cfg['L']} "
          f"NH={cfg['NH']} C={cfg['C']} maxT={cfg['maxT']} V={cfg['V']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
