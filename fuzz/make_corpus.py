#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora (fuzz/corpus/<harness>/) and the tiny hand-made
GPT-2-style vocabulary (fuzz/vocab_tiny/): small valid files and near misses, all
made here from nothing (no file of ../shared). Run from the repository root:
    /usr/bin/python3 fuzz/make_corpus.py
"""
import json, os, struct, zlib

ROOT = "fuzz/corpus"

def put(harness, name, data):
    d = os.path.join(ROOT, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)

def header(*fields):
    h = list(fields) + [0] * (256 - len(fields))
    return struct.pack("<256i", *h)

def floats(n, scale=0.01):
    return struct.pack("<%df" % n, *[((i * 37) % 17 - 8) * scale for i in range(n)])

# --- the byte alphabet and a tiny vocabulary: 256 bytes, some merges, EOT
def byte_alphabet():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}

B2U = byte_alphabet()
def uni(bs):
    return "".join(B2U[b] for b in bs)

def tiny_vocab():
    tokens = [uni(bytes([b])) for b in range(256)]
    merges = []
    for word in [b" t", b"he", b" the", b"in", b"er", b" a", b"on", b"ll", b"hell", b"hello", b" w", b" wor", b" world", b"'s", b"  "]:
        # merge left to right from bytes: every prefix must be a token
        left = word[:1]
        for k in range(1, len(word)):
            right = word[k:k + 1]
            joined = left + right
            m = uni(left) + " " + uni(right)
            if uni(joined) not in tokens:
                tokens.append(uni(joined)); merges.append(m)
            left = joined
    tokens.append("<|endoftext|>")
    enc = {t: i for i, t in enumerate(tokens)}
    return json.dumps(enc, ensure_ascii=False).encode(), ("#version: 0.2\n" + "\n".join(merges) + "\n").encode()

enc_json, vocab_bpe = tiny_vocab()
os.makedirs("fuzz/vocab_tiny", exist_ok=True)
open("fuzz/vocab_tiny/encoder.json", "wb").write(enc_json)
open("fuzz/vocab_tiny/vocab.bpe", "wb").write(vocab_bpe)

SEP = b"\n==vocab.bpe==\n"
put("bpe_load", "tiny", enc_json + SEP + vocab_bpe)
put("bpe_load", "tiny_text", enc_json + SEP + vocab_bpe + SEP + b"hello world, the winner's  thing\n")
put("bpe_load", "escapes", enc_json.replace(b'"!"', b'"\\u0021"') + SEP + vocab_bpe)
put("bpe_load", "cut_merges", enc_json + SEP + vocab_bpe[: len(vocab_bpe) // 2])
put("bpe_load", "bad_json", enc_json[:-1] + SEP + vocab_bpe)
put("bpe_load", "unordered", enc_json + SEP + b"#version: 0.2\n" + b"\n".join(reversed(vocab_bpe.split(b"\n")[1:-1])) + b"\n")

for name, text in [("ascii", b"Hello world! It's 2024, isn't it?\n\nYes."), ("unicode", "naïve café 東京 🙂 ١٢٣".encode()),
                   ("spaces", b"a  b\t\t c \n\n\n  d   "), ("invalid_utf8", b"\xff\xfe\xc3\x28\xe2\x82 \xed\xa0\x80x\xf4\x90\x80\x80"),
                   ("contractions", b"we'll they're I'm you've he'd 'S 'LL"), ("nel_bom", "a\u0085b\ufeffc".encode()),
                   ("repeats", b"aaaaaaa eeeeee llllll ssssssss 000000 !!!!!! ......")]:
    put("bpe_encode", name, text)
    put("prepare_data", name, bytes([0x10 | 2]) + text)
    put("prepare_data", name + "_gz", bytes([0x04 | 1]) + text)
put("prepare_data", "corrupt_gz", bytes([0]) + zlib.compress(b"hello")[:0] + b"\x1f\x8b\x08\x00" + b"\x00" * 6 + b"garbage")
gzbytes = zlib.compressobj(6, zlib.DEFLATED, 31).compress(b"hello world\n\nagain") 
c = zlib.compressobj(6, zlib.DEFLATED, 31); gzbytes = c.compress(b"hello world\n\nagain") + c.flush()
put("prepare_data", "gzip_file", bytes([2]) + gzbytes)
put("prepare_data", "truncated_gzip", bytes([2]) + gzbytes[:-6])

put("bpe_decode", "ids", struct.pack("<8H", 15496, 995, 11, 50256, 0, 255, 50257, 65535))
put("bpe_decode", "split_char", struct.pack("<4H", 163, 226, 94, 120))

put("decode_ids", "valid", b"15496 995 11\n50256\n0 255\r\n")
put("decode_ids", "bad_word", b"15496 99x5\n")
put("decode_ids", "outside", b"50257\n")
put("decode_ids", "overflow", b"1\n\n 4294967296 3")

# --- models: L=1 NH=1 C=4 maxT=4 V=8 Vp=8
def nparams(maxT, V, L, NH, C, Vp):
    return Vp * C + maxT * C + L * (C + C + 3 * C * C + 3 * C + C * C + C + C + C + 4 * C * C + 4 * C + 4 * C * C + C) + C + C
cfg = dict(maxT=4, V=8, L=1, NH=1, C=4, Vp=8)
P = nparams(**cfg)
params = floats(P)
put("model", "tiny", header(20240326, 3, 4, 8, 1, 1, 4, 8) + params)
put("model", "tiny_crc", header(20240326, 3, 4, 8, 1, 1, 4, 8, 0x43524332, struct.unpack("<i", struct.pack("<I", zlib.crc32(params)))[0]) + params)
put("model", "bad_crc", header(20240326, 3, 4, 8, 1, 1, 4, 8, 0x43524332, 12345) + params)
put("model", "truncated", header(20240326, 3, 4, 8, 1, 1, 4, 8) + params[:-4])
put("model", "bad_heads", header(20240326, 3, 4, 8, 1, 3, 4, 8) + params)
put("model", "bad_magic", header(20240327, 3, 4, 8, 1, 1, 4, 8) + params)
put("model", "header_only", header(20240326, 3, 4, 8, 1, 1, 4, 8)[:1000])

# --- training state for that model (checkpoint.h's layout and CRC)
def state(step=5, maxT=4, V=8, L=1, NH=1, C=4, Vp=8, P=P, crc_ok=True):
    h = [0] * 256
    h[0:12] = [20261124, 1, step, maxT, V, L, NH, C, Vp, 2, 4, 1]
    h[12], h[13] = 42, 0          # seed
    h[14] = 1                      # shuffle
    h[15], h[16], h[17] = 1, 0, 3  # epoch, shard_pos, slot_pos
    h[19] = 7                      # sample rng
    h[22] = struct.unpack("<i", struct.pack("<f", 1e-3))[0]
    h[28] = 100
    h[29] = P
    m, v = floats(P, 0.001), floats(P, 0.0001)
    raw = struct.pack("<256i", *h)
    crc = zlib.crc32(raw + m + v) if crc_ok else 1
    h[255] = struct.unpack("<i", struct.pack("<I", crc))[0]
    return struct.pack("<256i", *h) + m + v
put("checkpoint", "valid", state())
put("checkpoint", "bad_crc", state(crc_ok=False))
put("checkpoint", "truncated", state()[:-8])
put("checkpoint", "other_count", state(P=P + 1))
put("checkpoint", "header_only", state()[:1024])

# --- tokenizer files
toks = [bytes([b]) for b in range(256)] + [b" the", b"hello", b"\x00\x01"]
tokfile = header(20240328, 2, len(toks), 256) + b"".join(bytes([len(t)]) + t for t in toks)
put("tokenizer", "valid", tokfile)
put("tokenizer", "truncated", tokfile[:-2])
put("tokenizer", "trailing", tokfile + b"x")
put("tokenizer", "bad_eot", header(20240328, 2, 3, 3) + b"\x01a\x01b\x01c")
put("tokenizer", "zero_len", header(20240328, 2, 3, 0) + b"\x01a\x00\x01c")
put("tokenizer", "huge_vocab", header(20240328, 2, 1 << 24, 0) + b"\x01a")

# --- shards through the dataloader: 4 control bytes, then the shard
def shard(tokens, count=None):
    return header(20240520, 1, len(tokens) if count is None else count) + struct.pack("<%dH" % len(tokens), *tokens)
toks = [(i * 7) % 50 for i in range(41)]
put("dataloader", "valid", bytes([1, 3, 49, 0]) + shard(toks))
put("dataloader", "shuffled_two", bytes([0xC0 | 1, 2, 49, 0]) + shard(toks))
put("dataloader", "bad_token", bytes([0, 3, 20, 0]) + shard(toks))
put("dataloader", "truncated", bytes([0, 3, 49, 0]) + shard(toks)[:-3])
put("dataloader", "too_long", bytes([0, 3, 49, 0]) + shard(toks, count=30))
put("dataloader", "no_batch", bytes([3, 15, 49, 0]) + shard(toks[:10]))

# --- debug state for the "tiny" config (L=1 NH=1 C=5 maxT=7 V=11 Vp=128), B=1 T=2
PT = nparams(7, 11, 1, 1, 5, 128)
ds = header(20240327, 2, 1, 2) + struct.pack("<4i", 1, 2, 3, 10) + floats(2 * 11) + floats(1) + floats(PT)
put("debug_state", "valid", ds)
put("debug_state", "bad_token", header(20240327, 2, 1, 2) + struct.pack("<4i", 1, 11, 3, 10) + floats(2 * 11 + 1 + PT))
put("debug_state", "long_T", header(20240327, 2, 1, 8) + floats(16 + 8 * 11 + 1 + PT))
put("debug_state", "truncated", ds[:-4])

# --- activations: records of name[64], ndim, 4 dims, floats
def record(name, dims):
    d = list(dims) + [1] * (4 - len(dims))
    n = d[0] * d[1] * d[2] * d[3]
    return name.encode().ljust(64, b"\0") + struct.pack("<5i", len(dims), *d) + floats(n)
acts = header(20261122, 1, 2) + record("encoded", (2, 5)) + record("h.0.qkv", (1, 2, 15))
put("activations", "valid", acts)
put("activations", "truncated", acts[:-4])
put("activations", "trailing", acts + b"\0\0")
put("activations", "bad_ndim", header(20261122, 1, 1) + record("x", (2,)).replace(struct.pack("<i", 1), struct.pack("<i", 9), 1))
put("activations", "huge_dims", header(20261122, 1, 1) + b"x".ljust(64, b"\0") + struct.pack("<5i", 4, 65536, 65536, 65536, 65536))
print("corpus written")
