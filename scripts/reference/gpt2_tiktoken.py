"""
The reference encoder of scripts/tests/test_tokenizer.sh: tiktoken (OpenAI's BPE, Rust core)
built from the local GPT-2 vocabulary files, no network.

    .venv/bin/python scripts/reference/gpt2_tiktoken.py VOCAB_DIR [--js-space] [--llmc-sections] FILE > ids.txt
    .venv/bin/python scripts/reference/gpt2_tiktoken.py --space-deviations

VOCAB_DIR holds encoder.json and vocab.bpe. FILE must be valid UTF-8 (a Python str
cannot hold other bytes). Token ids are printed one per line; "<|endoftext|>" in the
text is ordinary text, as for ./tokenize.

The encoding: mergeable ranks = encoder.json's ids of the tokens' bytes (the tokens are
spelled in GPT-2's byte -> unicode alphabet), checked against vocab.bpe (merge number i
makes token 256 + i: so tiktoken's order, lowest token id first, is GPT-2's order, lowest
merge first); GPT-2's split pattern (encoder.py's, whose \\s is Unicode's White_Space in
Rust's regex as in Python's); <|endoftext|> = 50256.

--js-space: the same encoder with \\s as JavaScript's (ECMAScript's WhiteSpace and
LineTerminator: Zs, TAB, VT, FF, LF, CR, U+2028, U+2029 and U+FEFF). Ports of GPT-2's
encoder to JavaScript (the npm package gpt-3-encoder) split that way; the tests use it
to show that their inputs tell the two apart.

--llmc-sections prints the token stream of llm.c's dev/data/tinyshakespeare.py (EOT
before each "\\n\\n"-separated section, each encoded with its "\\n\\n" but the last), to
check prepare_data --split-blank-lines.

--space-deviations prints every code point on which the --js-space class and Unicode's
White_Space disagree, as "U+XXXX js-only" or "U+XXXX unicode-only".
"""
import json
import os
import sys

EOT = 50256
# GPT-2's split pattern, as in its encoder.py
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# JavaScript's \s: its WhiteSpace (TAB VT FF SP NBSP ZWNBSP, any Zs) and LineTerminator (LF CR LS PS)
JS_SPACE = r"\t\n\x0B\x0C\r\p{Zs}\u2028\u2029\uFEFF"
JS_PATTERN = (r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^""" + JS_SPACE + r"""\p{L}\p{N}]+|"""
              + f"[{JS_SPACE}]+(?![^{JS_SPACE}])|[{JS_SPACE}]+")


def bytes_to_unicode():
    """GPT-2's map of the 256 bytes to printable characters: the printable Latin-1 bytes
    stand for themselves, the others for 256, 257, ... in byte order."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars = {b: chr(b) for b in printable}
    n = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + n)
            n += 1
    return chars


def mergeable_ranks(vocab_dir):
    """{token bytes: id} of encoder.json (without <|endoftext|>), checked against vocab.bpe."""
    with open(os.path.join(vocab_dir, "encoder.json"), encoding="utf-8") as f:
        encoder = json.load(f)
    with open(os.path.join(vocab_dir, "vocab.bpe"), encoding="utf-8") as f:
        merges = [line.split() for line in f.read().split("\n")[1:] if line]
    byte_of = {c: b for b, c in bytes_to_unicode().items()}
    if encoder.pop("<|endoftext|>", None) != EOT:
        sys.exit(f"error: {vocab_dir}/encoder.json: <|endoftext|> is not {EOT}")
    ranks = {bytes(byte_of[c] for c in token): i for token, i in encoder.items()}
    if len(ranks) != len(encoder) or sorted(ranks.values()) != list(range(len(ranks))):
        sys.exit(f"error: {vocab_dir}/encoder.json: the ids are not 0..{len(encoder) - 1}, each once")
    for i, (a, b) in enumerate(merges):
        if encoder.get(a + b) != 256 + i:
            sys.exit(f"error: {vocab_dir}/vocab.bpe: merge {i + 1} ({a} {b}) does not make token {256 + i}")
    return ranks


def encoding(vocab_dir, js_space=False):
    import tiktoken
    return tiktoken.Encoding("gpt2-local" + ("-js-space" if js_space else ""),
                             pat_str=JS_PATTERN if js_space else GPT2_PATTERN,
                             mergeable_ranks=mergeable_ranks(vocab_dir), special_tokens={"<|endoftext|>": EOT})


def space_deviations():
    import regex
    chars = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    js = {m.start() for m in regex.finditer(f"[{JS_SPACE}]", chars)}
    uni = {m.start() for m in regex.finditer(r"\p{White_Space}", chars)}
    for i in sorted(js ^ uni):
        print("U+%04X %s" % (ord(chars[i]), "js-only" if i in js else "unicode-only"))


def main():
    args = sys.argv[1:]
    if args == ["--space-deviations"]:
        space_deviations()
        return 0
    js_space, sections = "--js-space" in args, "--llmc-sections" in args
    rest = [a for a in args if a not in ("--js-space", "--llmc-sections")]
    if len(rest) != 2:
        print("usage: gpt2_tiktoken.py VOCAB_DIR [--js-space] [--llmc-sections] FILE | --space-deviations",
              file=sys.stderr)
        return 2
    enc = encoding(rest[0], js_space)
    with open(rest[1], "rb") as f:
        text = f.read().decode("utf-8")  # strict: invalid UTF-8 is an error
    if sections:
        parts = text.split("\n\n")
        ids = []
        for i, s in enumerate(parts):
            ids.append(EOT)
            ids += enc.encode_ordinary(s + "\n\n" if i != len(parts) - 1 else s)
    else:
        ids = enc.encode_ordinary(text)
    sys.stdout.write("".join("%d\n" % i for i in ids))
    return 0


if __name__ == "__main__":
    sys.exit(main())
