#!/usr/bin/env python3
"""
The peer of generate in scripts/bench/bench_generate.sh: transformers' own
GPT2LMHeadModel.generate, greedy, with its key/value cache, on the same model
(an llm.c model file exported by scripts/convert/llmc_to_hf.py to a local directory,
loaded offline).

  .venv/bin/python scripts/bench/bench_generate.py --write-model OUT.bin --depth d12 [--seed N]
      writes a random GPT-2 (llm.c's initialization) as an llm.c model file
  HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench/bench_generate.py --hf-dir DIR --dtype fp32|bf16 \\
      --prompt-ids FILE -n 64 --threads 2 --ids-out FILE
      loads DIR in that dtype, times generate for 1 and for N new tokens (after a warm-up),
      writes the prompt and the N new token ids (one per line) to --ids-out and prints:
      transformers: dtype=D attention=A prompt=P new=N threads=T first_s=S1 total_s=SN tok_per_s=X decode_tok_per_s=Y
tok_per_s is N over the whole generation (prompt + N tokens); decode_tok_per_s is
the N-1 tokens after the first over the time they add, (N-1) / (SN - S1).
"""
import argparse
import math
import sys
import time

import numpy as np

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


def time_generate(model, input_ids, n, eot):
    """(seconds, output ids) of greedy generate of exactly n new tokens with the KV cache."""
    import torch
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), do_sample=False, num_beams=1,
                             use_cache=True, max_new_tokens=n, min_new_tokens=n, pad_token_id=eot)
    return time.perf_counter() - t0, out[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--write-model")
    ap.add_argument("--depth", default="d12", choices=sorted(DEPTHS))
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--hf-dir")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--prompt-ids")
    ap.add_argument("--ids-out")
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    if a.write_model:
        write_model(a.write_model, a.depth, a.seed)
        return
    if not (a.hf_dir and a.prompt_ids and a.ids_out):
        ap.error("expected --write-model, or --hf-dir, --prompt-ids and --ids-out")
    if a.n < 2:
        ap.error("-n: expected at least 2 (the decoding rate is over the tokens after the first)")
    import torch
    from transformers import GPT2LMHeadModel
    torch.set_num_threads(a.threads)
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    model = GPT2LMHeadModel.from_pretrained(a.hf_dir, dtype=dtype, local_files_only=True).eval()
    ids = [int(line) for line in open(a.prompt_ids) if line.strip()]
    input_ids = torch.tensor([ids], dtype=torch.long)
    eot = model.config.eos_token_id
    time_generate(model, input_ids, 2, eot)  # warm-up
    first_s, _ = time_generate(model, input_ids, 1, eot)
    total_s, out = time_generate(model, input_ids, a.n, eot)
    with open(a.ids_out, "w") as f:
        f.write("".join(f"{t}\n" for t in out.tolist()))
    print(f"transformers: dtype={a.dtype} attention={model.config._attn_implementation} prompt={len(ids)} new={a.n} "
          f"threads={a.threads} first_s={first_s:.3f} total_s={total_s:.3f} tok_per_s={a.n / total_s:.2f} "
          f"decode_tok_per_s={(a.n - 1) / (total_s - first_s):.2f}")


if __name__ == "__main__":
    sys.exit(main())
