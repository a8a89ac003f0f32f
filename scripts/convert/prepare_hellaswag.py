#!/usr/bin/python3
"""
HellaSwag's official jsonl -> an eval file for ./eval --hellaswag and train_gpt2 --eval-file.

    /usr/bin/python3 scripts/convert/prepare_hellaswag.py hellaswag_val.jsonl data/hellaswag/hellaswag_val.bin \
        [--vocab data/gpt2] [--tokenize ./tokenize]

The jsonl is the one of github.com/rowanz/hellaswag (the user downloads it; nothing here
fetches anything): one JSON object per line with at least "ctx" (a string), "endings"
(a list of strings) and "label" (the index of the right ending). The texts are encoded
by our own C tokenizer (./tokenize --records, llmc/bpe.h), the context as it is and each
ending as " " + ending, as llm.c's dev/data/hellaswag.py does. The output is llm.c's
eval file format (dev/data/data_common.py write_evalfile; described in llmc/hellaswag.h),
written under a temporary name and renamed. Bad input: one line on stderr, exit 1.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_gpt2 import BadInput, write_atomically  # noqa: E402

EVAL_MAGIC, EVAL_VERSION = 20240522, 1


def read_examples(path):
    """[(ctx, endings, label)] from the jsonl, checked."""
    examples = []
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        raise BadInput(f"{path}: cannot open for reading: {e.strerror or e}")
    with f:
        try:
            lines = list(f)
        except UnicodeDecodeError as e:
            raise BadInput(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            ex = json.loads(line)
        except json.JSONDecodeError as e:
            raise BadInput(f"{path}: line {n}: not JSON ({e.msg} at column {e.colno})")
        if not isinstance(ex, dict):
            raise BadInput(f"{path}: line {n}: not a JSON object")
        for key in ("ctx", "endings", "label"):
            if key not in ex:
                raise BadInput(f"{path}: line {n}: no \"{key}\" (the official HellaSwag schema has ctx, endings, label)")
        ctx, endings, label = ex["ctx"], ex["endings"], ex["label"]
        if not isinstance(ctx, str) or not ctx:
            raise BadInput(f"{path}: line {n}: \"ctx\" is not a non-empty string")
        if not isinstance(endings, list) or not 1 <= len(endings) <= 16 or not all(isinstance(e, str) for e in endings):
            raise BadInput(f"{path}: line {n}: \"endings\" is not a list of 1 to 16 strings")
        if isinstance(label, str) and label.isdigit():
            label = int(label)
        if not isinstance(label, int) or isinstance(label, bool) or not 0 <= label < len(endings):
            raise BadInput(f"{path}: line {n}: \"label\" {label!r} is not an index into its {len(endings)} endings")
        if "\0" in ctx or any("\0" in e for e in endings):
            raise BadInput(f"{path}: line {n}: a text holds a NUL character")
        examples.append((ctx, endings, label))
    if not examples:
        raise BadInput(f"{path}: no examples")
    if len(examples) > 65535:
        raise BadInput(f"{path}: {len(examples)} examples; the eval format holds at most 65535")
    return examples


def tokenize_all(texts, tokenize, vocab):
    """Token ids of each text, by our C tokenizer, in one process."""
    if not os.path.isfile(tokenize) or not os.access(tokenize, os.X_OK):
        raise BadInput(f"{tokenize}: the tokenizer program is missing (run make tokenize)")
    data = b"".join(t.encode("utf-8") + b"\0" for t in texts)
    p = subprocess.run([tokenize, "--vocab", vocab, "--records", "-"], input=data, capture_output=True)
    if p.returncode != 0:
        raise BadInput(p.stderr.decode(errors="replace").strip().splitlines()[-1].removeprefix("error: ") if p.stderr else
                       f"{tokenize} failed with exit status {p.returncode}")
    lines = p.stdout.decode().split("\n")
    if len(lines) != len(texts) + 1 or lines[-1] != "":
        raise BadInput(f"{tokenize}: {len(lines) - 1} lines of ids for {len(texts)} texts")
    return [[int(x) for x in line.split()] for line in lines[:-1]]


def build_stream(examples, tokens):
    """llm.c's eval stream of uint16 (see llmc/hellaswag.h) and the longest example in bytes."""
    stream, longest, i = [], 0, 0
    for idx, (ctx, endings, label) in enumerate(examples):
        ctx_tokens = tokens[i]
        end_tokens = tokens[i + 1:i + 1 + len(endings)]
        i += 1 + len(endings)
        ex = [65535, 0, idx, label, len(endings), len(ctx_tokens)] + ctx_tokens
        for e in end_tokens:
            ex += [len(e)] + e
        if len(ex) * 2 >= 65536:
            raise BadInput(f"example {idx} (line {idx + 1} of the non-empty lines) is {len(ex) * 2} bytes; "
                           "the eval format holds less than 65536")
        if max(ex[5:]) >= 65535:
            raise BadInput(f"example {idx}: a token id >= 65535 does not fit the eval format")
        ex[1] = len(ex) * 2
        longest = max(longest, len(ex) * 2)
        stream += ex
    return np.array(stream, dtype="<u2"), longest


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsonl")
    ap.add_argument("out")
    ap.add_argument("--vocab", default=os.path.join(root, "data", "gpt2"), help="encoder.json and vocab.bpe")
    ap.add_argument("--tokenize", default=os.path.join(root, "tokenize"), help="our tokenizer program")
    args = ap.parse_args()
    try:
        examples = read_examples(args.jsonl)
        texts = []
        for ctx, endings, _ in examples:
            texts.append(ctx)
            texts += [" " + e for e in endings]  # llm.c: " " + ending (GPT-2 tokens carry their leading space)
        stream, longest = build_stream(examples, tokenize_all(texts, args.tokenize, args.vocab))
        header = np.zeros(256, dtype="<i4")
        header[:4] = [EVAL_MAGIC, EVAL_VERSION, len(examples), longest]
        def write(tmp):
            with open(tmp, "wb") as f:
                f.write(header.tobytes())
                f.write(stream.tobytes())
        write_atomically(args.out, write)
    except BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: {e.filename or args.out}: {e.strerror or e}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}: {len(examples)} examples, {len(stream) * 2} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
