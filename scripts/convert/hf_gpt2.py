"""
GPT-2 weights between llm.c's model file and Hugging Face's layout, shared by
scripts/convert/hf_to_llmc.py and scripts/convert/llmc_to_hf.py (and the tests' HF writer).

safetensors is read and written here with json + numpy: an 8-byte little-endian
header length N, N bytes of JSON ({name: {"dtype", "shape", "data_offsets": [begin,
end]}, optional "__metadata__": {str: str}}), then the raw little-endian tensor
bytes, offsets relative to the end of the header. Not the safetensors library:
its numpy interface cannot hold bf16 (its torch one would make every conversion
load PyTorch), and its errors do not name the tensor and the problem as ours do.
scripts/tests/test_convert.sh checks this code against transformers both ways (our
files through GPT2LMHeadModel.from_pretrained, save_pretrained's through ours).

Every problem with an input is raised as BadInput with a one-line message; the
scripts print it as "error: ..." and exit 1.
"""
import json
import os
import struct
import zlib

import numpy as np

MODEL_MAGIC, MODEL_VERSION = 20240326, 3
CHECKPOINT_CRC_MARK = 0x43524332  # header[8] of our checkpoints: header[9] is the CRC32 of the tensors
LN_EPS = 1e-5


class BadInput(Exception):
    pass


# ----------------------------------------------------------------------------
# bf16

def f32_to_bf16_bits(x):
    """float32 array -> uint16 bf16 bits, rounded to nearest, ties to even (as
    PyTorch's .to(torch.bfloat16)); NaN stays a (quiet) NaN."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    if nan.any():
        rounded[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def bf16_bits_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


# ----------------------------------------------------------------------------
# safetensors

SAFETENSORS_DTYPES = {  # name -> (numpy dtype of the stored bytes, is a float)
    "F64": ("<f8", True), "F32": ("<f4", True), "F16": ("<f2", True), "BF16": ("<u2", True),
    "I64": ("<i8", False), "I32": ("<i4", False), "I16": ("<i2", False), "I8": ("i1", False),
    "U64": ("<u8", False), "U32": ("<u4", False), "U16": ("<u2", False), "U8": ("u1", False),
    "BOOL": ("?", False),
}


def read_safetensors(path):
    """{name: (dtype name, numpy array of the stored values)}; BF16 comes back as uint16 bits."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise BadInput(f"{path}: truncated safetensors file (no 8-byte header length)")
            (n,) = struct.unpack("<Q", head)
            if n > size - 8 or n > (100 << 20):
                raise BadInput(f"{path}: bad safetensors header length {n} (file of {size} bytes)")
            try:
                header = json.loads(f.read(n).decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise BadInput(f"{path}: the safetensors header is not valid JSON ({e})")
        # mapped, not read: gpt2-xl's 6 GB need not sit in memory twice
        data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n) if size > 8 + n else np.zeros(0, np.uint8)
    except OSError as e:
        raise BadInput(f"{path}: cannot read: {e.strerror or e}")
    if not isinstance(header, dict):
        raise BadInput(f"{path}: the safetensors header is not a JSON object")
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = info["dtype"], [int(d) for d in info["shape"]], info["data_offsets"]
        except (TypeError, KeyError, ValueError):
            raise BadInput(f"{path}: tensor {name}: malformed header entry")
        if dtype not in SAFETENSORS_DTYPES:
            raise BadInput(f"{path}: tensor {name}: unknown dtype {dtype}")
        np_dtype = np.dtype(SAFETENSORS_DTYPES[dtype][0])
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not (0 <= begin <= end <= len(data)) or end - begin != count * np_dtype.itemsize or min(shape + [0]) < 0:
            raise BadInput(f"{path}: tensor {name}: data_offsets [{begin}, {end}] do not fit shape {shape} "
                           f"of {dtype} in {len(data)} bytes of data (truncated file?)")
        tensors[name] = (dtype, np.asarray(data[begin:end]).view(np_dtype).reshape(shape))
    return tensors


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, dtype name, numpy array already of that dtype's bytes)."""
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, a in tensors:
        nbytes = a.nbytes
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as the reference writer does
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, a in tensors:
            f.write(np.ascontiguousarray(a).tobytes())


def write_atomically(path, write):
    """write(tmp_path), then rename over path: a failure never leaves a partial file at path."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


# ----------------------------------------------------------------------------
# llm.c's model file

def llmc_shapes(L, C, maxT, Vp):
    return [(Vp, C), (maxT, C), (L, C), (L, C), (L, 3 * C, C), (L, 3 * C), (L, C, C), (L, C),
            (L, C), (L, C), (L, 4 * C, C), (L, 4 * C), (L, C, 4 * C), (L, C), (C,), (C,)]


def read_llmc(path):
    """(config dict, the 16 float32 tensors in checkpoint order, wte padded)."""
    try:
        with open(path, "rb"):
            pass
        size = os.path.getsize(path)
        raw = np.memmap(path, dtype=np.uint8, mode="r") if size > 0 else np.zeros(0, np.uint8)  # mapped, not read
    except OSError as e:
        raise BadInput(f"{path}: cannot open for reading: {e.strerror or e}")
    if len(raw) < 1024:
        raise BadInput(f"{path}: truncated file (shorter than the 1024-byte model header)")
    header = np.asarray(raw[:1024]).view("<i4")
    if header[0] != MODEL_MAGIC:
        raise BadInput(f"{path}: bad magic number {header[0]} (a model file has {MODEL_MAGIC})")
    if header[1] != MODEL_VERSION:
        raise BadInput(f"{path}: unsupported model version {header[1]} (expected {MODEL_VERSION}, fp32)")
    maxT, V, L, NH, C, Vp = (int(v) for v in header[2:8])
    if min(maxT, V, L, NH, C) < 1 or Vp < V or C % NH != 0 or max(maxT, V, Vp) > (1 << 24) or C > (1 << 16) or L > 1024:
        raise BadInput(f"{path}: bad config maxT={maxT} V={V} Vp={Vp} L={L} NH={NH} C={C}")
    shapes = llmc_shapes(L, C, maxT, Vp)
    total = sum(int(np.prod(s)) for s in shapes)
    if len(raw) != 1024 + 4 * total:
        raise BadInput(f"{path}: truncated model file ({len(raw)} bytes, the config needs {1024 + 4 * total})"
                       if len(raw) < 1024 + 4 * total else
                       f"{path}: {len(raw) - 1024 - 4 * total} bytes more than the config needs")
    if header[8] == CHECKPOINT_CRC_MARK and zlib.crc32(memoryview(raw[1024:])) != int(header[9]) & 0xFFFFFFFF:
        raise BadInput(f"{path}: CRC mismatch, the file is corrupt")
    tensors, offset = [], 1024
    for s in shapes:
        n = int(np.prod(s))
        tensors.append(np.asarray(raw[offset:offset + 4 * n]).view("<f4").reshape(s))
        offset += 4 * n
    return dict(maxT=maxT, V=V, L=L, NH=NH, C=C, Vp=Vp), tensors


def write_llmc(path, cfg, tensors):
    """Our checkpoint layout: llm.c's header plus the CRC32 of the tensor bytes in words 8-9."""
    header = np.zeros(256, dtype="<i4")
    header[:8] = [MODEL_MAGIC, MODEL_VERSION, cfg["maxT"], cfg["V"], cfg["L"], cfg["NH"], cfg["C"], cfg["Vp"]]
    blobs = [np.ascontiguousarray(t, dtype="<f4") for t in tensors]  # no copy when they already are
    crc = 0
    for b in blobs:
        crc = zlib.crc32(memoryview(b).cast("B"), crc)
    header[8] = CHECKPOINT_CRC_MARK
    header[9] = np.array([crc], dtype="<u4").view("<i4")[0]

    def write(tmp):
        with open(tmp, "wb") as f:
            f.write(header.tobytes())
            for b in blobs:
                f.write(memoryview(b).cast("B"))
    write_atomically(path, write)


def padded_vocab(V):
    return (V + 127) // 128 * 128  # as llm.c: 50257 -> 50304


# ----------------------------------------------------------------------------
# Hugging Face's GPT-2 names. Conv1D weights are (in, out): the transpose of llm.c's (out, in).

# (llm.c tensor index, HF name within block i, transposed)
BLOCK_KEYS = [(2, "ln_1.weight", False), (3, "ln_1.bias", False),
              (4, "attn.c_attn.weight", True), (5, "attn.c_attn.bias", False),
              (6, "attn.c_proj.weight", True), (7, "attn.c_proj.bias", False),
              (8, "ln_2.weight", False), (9, "ln_2.bias", False),
              (10, "mlp.c_fc.weight", True), (11, "mlp.c_fc.bias", False),
              (12, "mlp.c_proj.weight", True), (13, "mlp.c_proj.bias", False)]
BUFFERS = ("attn.bias", "attn.masked_bias")  # the causal mask and -1e4 of older transformers: not weights


def hf_shapes(L, C, maxT, V):
    """{HF name (no prefix): shape}."""
    shapes = {"wte.weight": (V, C), "wpe.weight": (maxT, C), "ln_f.weight": (C,), "ln_f.bias": (C,)}
    per_block = {"ln_1.weight": (C,), "ln_1.bias": (C,), "attn.c_attn.weight": (C, 3 * C),
                 "attn.c_attn.bias": (3 * C,), "attn.c_proj.weight": (C, C), "attn.c_proj.bias": (C,),
                 "ln_2.weight": (C,), "ln_2.bias": (C,), "mlp.c_fc.weight": (C, 4 * C), "mlp.c_fc.bias": (4 * C,),
                 "mlp.c_proj.weight": (4 * C, C), "mlp.c_proj.bias": (C,)}
    for i in range(L):
        for k, s in per_block.items():
            shapes[f"h.{i}.{k}"] = s
    return shapes


def llmc_to_hf_tensors(cfg, tensors):
    """The 16 llm.c tensors -> {HF name (no prefix): float32 array}, wte unpadded."""
    L, V = cfg["L"], cfg["V"]
    out = {"wte.weight": tensors[0][:V], "wpe.weight": tensors[1]}
    for i in range(L):
        for idx, key, transposed in BLOCK_KEYS:
            t = tensors[idx][i]
            out[f"h.{i}.{key}"] = np.ascontiguousarray(t.T if transposed else t)
    out["ln_f.weight"], out["ln_f.bias"] = tensors[14], tensors[15]
    return out


def hf_to_llmc_tensors(cfg, hf):
    """{HF name (no prefix): float32 array} -> the 16 llm.c tensors, wte padded to Vp with zero rows."""
    L, C, V, Vp = cfg["L"], cfg["C"], cfg["V"], cfg["Vp"]
    wte = np.zeros((Vp, C), dtype=np.float32)
    wte[:V] = hf["wte.weight"]
    tensors = [wte, hf["wpe.weight"]] + [None] * 12 + [hf["ln_f.weight"], hf["ln_f.bias"]]
    for idx, key, transposed in BLOCK_KEYS:
        tensors[idx] = np.stack([hf[f"h.{i}.{key}"].T if transposed else hf[f"h.{i}.{key}"] for i in range(L)])
    return [np.ascontiguousarray(t, dtype=np.float32) for t in tensors]


def hf_config_json(cfg, dtype="float32"):
    return {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
        "vocab_size": cfg["V"], "n_positions": cfg["maxT"], "n_ctx": cfg["maxT"], "n_embd": cfg["C"],
        "n_layer": cfg["L"], "n_head": cfg["NH"], "n_inner": None, "activation_function": "gelu_new",
        "layer_norm_epsilon": LN_EPS, "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1,
        "initializer_range": 0.02, "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False, "use_cache": True, "tie_word_embeddings": True,
        "bos_token_id": 50256, "eos_token_id": 50256, "torch_dtype": dtype,
    }
