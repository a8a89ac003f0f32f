#!/usr/bin/python3
"""
Writes a small synthetic dataset in llm.c's formats, for tests that need
training data for a model with a small vocabulary:

  OUT/synth_train_000000.bin, OUT/synth_train_000001.bin, OUT/synth_val_000000.bin
      token shards (magic 20240520, version 1, uint16 tokens)
  OUT/gpt2_tokenizer.bin
      an llm.c tokenizer (magic 20240328, version 2) whose token i decodes to "<i>"

The token stream is a noisy repetition of a fixed random "sentence", so a
model can learn it quickly and its loss must fall.
"""
import argparse
import os

import numpy as np


def write_shard(path, tokens):
    header = np.zeros(256, dtype=np.int32)
    header[:3] = [20240520, 1, len(tokens)]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype=np.uint16).tobytes())


def write_tokenizer(path, vocab):
    header = np.zeros(256, dtype=np.int32)
    header[:4] = [20240328, 2, vocab, vocab - 1]  # the last token plays end-of-text
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for i in range(vocab):
            b = f"<{i}>".encode()
            f.write(bytes([len(b)]) + b)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--tokens", type=int, default=20000, help="tokens per train shard")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    sentence = rng.integers(0, args.vocab - 1, size=23)
    def stream(n):
        reps = np.tile(sentence, n // len(sentence) + 1)[:n]
        noise = rng.random(n) < 0.05
        reps[noise] = rng.integers(0, args.vocab - 1, size=int(noise.sum()))
        return reps
    os.makedirs(args.out, exist_ok=True)
    write_shard(os.path.join(args.out, "synth_train_000000.bin"), stream(args.tokens))
    write_shard(os.path.join(args.out, "synth_train_000001.bin"), stream(args.tokens))
    write_shard(os.path.join(args.out, "synth_val_000000.bin"), stream(args.tokens // 4))
    write_tokenizer(os.path.join(args.out, "gpt2_tokenizer.bin"), args.vocab)


if __name__ == "__main__":
    main()
