"""
transformers' own GPT2LMHeadModel as the judge of our Hugging Face files, for
scripts/tests/test_convert.sh. Offline: every model is a local directory.

    .venv/bin/python scripts/reference/hf_check.py init OUT_DIR --layers L --heads NH --channels C --max-seq-len T [--seed N]
        a GPT-2 of that shape (vocabulary 50257) initialized by transformers, saved with save_pretrained
    .venv/bin/python scripts/reference/hf_check.py loss HF_DIR SHARD B T BATCHES [--dtype float32|bfloat16]
        the mean loss over the first BATCHES batches of the token shard SHARD, the batches of
        ./eval -j SHARD -b B -t T -m BATCHES (slot k: the B*T+1 tokens from k*B*T on)
    .venv/bin/python scripts/reference/hf_check.py greedy HF_DIR VOCAB_DIR PROMPT N OUT
        N greedy tokens after PROMPT (stopping at end-of-text, as ./generate does); writes the
        prompt's and the tokens' bytes to OUT (./generate's output) and prints
        "tokens K min_margin M": M is the smallest gap between the best and the second-best
        logit, so a caller can tell a real disagreement from a near tie
    .venv/bin/python scripts/reference/hf_check.py resave HF_DIR OUT_SAFETENSORS OUT_BIN
        loads HF_DIR and writes it again with transformers: save_pretrained (model.safetensors)
        and torch.save of the model's state dict (pytorch_model.bin, with config.json)

Several commands may run in one process, separated by "+" (one line of output each but
init and resave, which print nothing). The model is loaded with GPT2LMHeadModel.from_pretrained(dir, local_files_only=True) in the
given dtype (default float32: a bf16 checkpoint's values exactly, computed in fp32).
"""
import os
import sys

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
import torch  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
EOT = 50256


def load(d, dtype="float32"):
    model = GPT2LMHeadModel.from_pretrained(d, local_files_only=True, dtype=getattr(torch, dtype))
    return model.eval()


def shard_tokens(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype="<i4")
        n = int(header[2])
        return np.frombuffer(f.read(2 * n), dtype="<u2").astype(np.int64)


def cmd_init(args):
    import argparse
    ap = argparse.ArgumentParser(prog="hf_check.py init")
    ap.add_argument("out")
    for a in ("--layers", "--heads", "--channels", "--max-seq-len"):
        ap.add_argument(a, type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(args)
    torch.manual_seed(a.seed)
    config = GPT2Config(vocab_size=50257, n_positions=a.max_seq_len, n_embd=a.channels, n_layer=a.layers,
                        n_head=a.heads, activation_function="gelu_new", layer_norm_epsilon=1e-5)
    GPT2LMHeadModel(config).save_pretrained(a.out)


def cmd_loss(d, shard, B, T, batches, dtype="float32"):
    model = load(d, dtype)
    tokens = shard_tokens(shard)
    B, T, batches = int(B), int(T), int(batches)
    total = 0.0
    with torch.no_grad():
        for k in range(batches):
            chunk = torch.from_numpy(tokens[k * B * T:k * B * T + B * T + 1].copy())
            x, y = chunk[:-1].view(B, T), chunk[1:].view(B, T)
            logits = model(x).logits.double()  # (B, T, V), the loss summed in float64
            total += torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.reshape(-1)).item()
    print("%.9f" % (total / batches))


def cmd_greedy(d, vocab_dir, prompt, n, out):
    from gpt2_tiktoken import bytes_to_unicode, encoding
    model = load(d)
    ids = encoding(vocab_dir).encode_ordinary(prompt)
    prompt_len, margins = len(ids), []
    with torch.no_grad():
        for _ in range(int(n)):
            logits = model(torch.tensor([ids])).logits[0, -1].double()
            top = torch.topk(logits, 2)
            margins.append((top.values[0] - top.values[1]).item())
            nxt = int(top.indices[0])
            if nxt == EOT:
                break
            ids.append(nxt)
    # decode: encoder.json's tokens are spelled in GPT-2's byte -> unicode alphabet
    import json
    with open(os.path.join(vocab_dir, "encoder.json"), encoding="utf-8") as f:
        spelling = {i: t for t, i in json.load(f).items()}
    byte_of = {c: b for b, c in bytes_to_unicode().items()}
    with open(out, "wb") as f:
        f.write(bytes(byte_of[c] for i in ids for c in spelling[i]))
    print("tokens %d min_margin %.6f" % (len(ids) - prompt_len, min(margins)))


def cmd_resave(d, out_st, out_bin):
    model = load(d)
    model.save_pretrained(out_st)
    os.makedirs(out_bin, exist_ok=True)
    torch.save(model.state_dict(), os.path.join(out_bin, "pytorch_model.bin"))
    model.config.save_pretrained(out_bin)


def run(cmd, args):
    if cmd == "init":
        cmd_init(args)
    elif cmd == "loss" and len(args) in (5, 7) and (len(args) == 5 or args[5] == "--dtype"):
        cmd_loss(*args[:5], *args[6:])
    elif cmd == "greedy" and len(args) == 5:
        cmd_greedy(*args)
    elif cmd == "resave" and len(args) == 3:
        cmd_resave(*args)
    else:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        sys.exit(2)


def main():
    # several commands in one process, separated by "+": PyTorch and transformers take seconds to load
    cmds, cur = [], []
    for a in sys.argv[1:] + ["+"]:
        if a == "+":
            if cur:
                cmds.append(cur)
            cur = []
        else:
            cur.append(a)
    if not cmds:
        run("", [])
    for c in cmds:
        run(c[0], c[1:])
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
