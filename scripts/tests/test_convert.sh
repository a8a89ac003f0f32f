# Weight conversion both ways (scripts/convert/hf_to_llmc.py, scripts/convert/llmc_to_hf.py): a random
# GPT-2 in Hugging Face's layout (safetensors and pytorch_model.bin, with and without
# the "transformer." prefix, lm_head and the mask buffers) -> llm.c; test_gpt2 against
# a PyTorch forward/backward of the HF weights; llm.c -> HF -> llm.c bit-identical; bf16
# export = round to nearest even; every refusal gives one line and leaves outputs alone;
# transformers' own GPT2LMHeadModel (scripts/reference/hf_check.py, offline) on the exports (fp32, bf16)
# and on models transformers saved: eval's loss and generate's greedy tokens.
set -u
source scripts/tests/testlib.sh
PY=$PWD/.venv/bin/python
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# TEST_QUICK=1 (make test): two HF layouts, test_gpt2 on the converted model, llm.c -> HF -> llm.c,
# the bf16 rounding, a few refusals, two mutants (transpose, bf16 rounding) and one check by
# transformers' GPT2LMHeadModel (the fp32 export's loss against eval's); make test-all: everything.
quick=${TEST_QUICK:-0}

nice -n 15 make -s test_gpt2 train_gpt2 eval generate >/dev/null || { fail "build" "make test_gpt2 train_gpt2 eval generate failed"; exit 0; }

# A config with 2 heads of 64 (so a checkpoint without config.json can be read from its
# shapes), a vocabulary that is not a multiple of 128, and T < maxT.
CFG="--layers 2 --heads 2 --channels 128 --max-seq-len 48 --vocab 1001"
# st_plain as the hub's gpt2/model.safetensors; bin_prefix as GPT2LMHeadModel.state_dict()
$PY scripts/reference/make_hf_gpt2.py $CFG "$tmp/st_plain:buffers" "$tmp/bin_prefix:bin,prefix,lm-head,buffers" \
    "$tmp/st_prefix_noconfig:prefix,lm-head,no-config" "$tmp/bin_plain:bin" "$tmp/st_bf16:BF16" "$tmp/bin_f16:bin,F16" \
    "$tmp/bin_int:bin" > /dev/null
layouts="bin_prefix st_prefix_noconfig bin_plain" nlayouts=four  # besides st_plain
[ "$quick" = 1 ] && layouts=bin_prefix nlayouts=two
for d in st_plain $layouts; do
    expect_ok "hf_to_llmc: $d" $PY scripts/convert/hf_to_llmc.py "$tmp/$d" "$tmp/$d.bin"
done
same=1
for d in $layouts; do cmp -s "$tmp/st_plain.bin" "$tmp/$d.bin" || same=0; done
if [ $same -eq 1 ]; then pass "the $nlayouts HF layouts convert to the same bytes"; else fail "the $nlayouts HF layouts convert to the same bytes" "outputs differ"; fi

# test_gpt2 on the converted model against PyTorch run on the HF file (gpt2_reference.py
# --hf maps the HF names and Conv1D transposes on its own, not through hf_gpt2.py)
if out=$($PY scripts/reference/gpt2_reference.py --hf "$tmp/bin_prefix/pytorch_model.bin" $CFG -B 2 -T 40 --steps 3 \
         --out "$tmp/ref" 2>&1); then
    if out=$(./test_gpt2 -e "$tmp/st_plain.bin" -s "$tmp/ref/state.bin" -a "$tmp/ref/activations.bin" \
             -l "$tmp/ref/losses.txt" 2>&1); then
        pass "test_gpt2 on the converted model matches PyTorch on the HF weights ($(printf '%s' "$out" | tail -n 1))"
    else
        fail "test_gpt2 on the converted model" "$(printf '%s' "$out" | grep -E 'FAIL|error' | head -n 2 | tr '\n' ' ')"
    fi
    if cmp -s <(tail -c +1025 "$tmp/ref/model.bin") <(tail -c +1025 "$tmp/st_plain.bin"); then
        pass "hf_to_llmc's tensors equal the reference's own mapping of the HF file"
    else
        fail "hf_to_llmc's tensors equal the reference's" "tensor bytes differ"
    fi
else
    fail "reference from HF weights" "$(printf '%s' "$out" | tail -n 1)"
fi

if [ "$quick" != 1 ]; then
# fp16 and bf16 checkpoints: exactly the fp32 values of the stored halves
$PY scripts/convert/hf_to_llmc.py "$tmp/st_bf16" "$tmp/st_bf16.bin" > /dev/null
$PY scripts/convert/hf_to_llmc.py "$tmp/bin_f16" "$tmp/bin_f16.bin" > /dev/null
check_halves() {
    $PY - "$tmp" <<'EOF'
import sys, numpy as np, torch
sys.path.insert(0, "scripts/convert")
from hf_gpt2 import read_llmc
d = sys.argv[1]
_, ref = read_llmc(f"{d}/st_plain.bin")
for name, dt in (("st_bf16", torch.bfloat16), ("bin_f16", torch.float16)):
    _, got = read_llmc(f"{d}/{name}.bin")
    for r, g in zip(ref, got):
        want = torch.from_numpy(r.copy()).to(dt).float().numpy()
        assert np.array_equal(want, g), name
EOF
}
if out=$(check_halves 2>&1); then pass "bf16 and fp16 checkpoints import as their exact values"; else fail "bf16/fp16 import" "$(printf '%s' "$out" | tail -n 1)"; fi
fi

# llm.c -> HF -> llm.c is bit-identical (header, CRC and all), for a checkpoint written by train_gpt2
$PY scripts/reference/gpt2_reference.py --layers 1 --heads 2 --channels 32 --max-seq-len 32 -B 1 -T 8 --steps 1 \
    --out "$tmp/small" > /dev/null
expect_ok "a train_gpt2 checkpoint" ./train_gpt2 -e "$tmp/small/model.bin" -b 2 -t 16 -x 1 -v 0 -s 0 -n 1 -o "$tmp/run"
cp "$tmp/run/model_00000001.bin" "$tmp/trained.bin"
expect_ok "llmc_to_hf fp32" $PY scripts/convert/llmc_to_hf.py "$tmp/trained.bin" "$tmp/export"
expect_ok "hf_to_llmc of the export" $PY scripts/convert/hf_to_llmc.py "$tmp/export" "$tmp/roundtrip.bin"
if cmp -s "$tmp/trained.bin" "$tmp/roundtrip.bin"; then pass "llm.c -> HF -> llm.c is bit-identical"; else fail "llm.c -> HF -> llm.c" "files differ"; fi
if [ "$quick" != 1 ]; then
$PY scripts/convert/llmc_to_hf.py "$tmp/st_plain.bin" "$tmp/export2" > /dev/null && $PY scripts/convert/hf_to_llmc.py "$tmp/export2" "$tmp/roundtrip2.bin" > /dev/null
if cmp -s "$tmp/st_plain.bin" "$tmp/roundtrip2.bin"; then pass "llm.c -> HF -> llm.c bit-identical (vocab 1001)"; else fail "llm.c -> HF -> llm.c (vocab 1001)" "files differ"; fi

# The export is Hugging Face's layout: names, shapes, Conv1D (in, out), metadata, config; read
# here with struct + json, not hf_gpt2.py
check_export() {
    $PY - "$tmp/st_plain.bin" "$tmp/export2" <<'EOF'
import json, struct, sys, numpy as np
model, d = sys.argv[1], sys.argv[2]
raw = open(model, "rb").read()
maxT, V, L, NH, C, Vp = struct.unpack("<6i", raw[8:32])
f = open(f"{d}/model.safetensors", "rb").read()
n = struct.unpack("<Q", f[:8])[0]
h = json.loads(f[8:8 + n]); data = f[8 + n:]
assert n % 8 == 0 and h.pop("__metadata__") == {"format": "pt"}
def get(k):
    e = h[k]; assert e["dtype"] == "F32", k
    b, end = e["data_offsets"]
    return np.frombuffer(data[b:end], dtype="<f4").reshape(e["shape"])
expect = {"wte.weight": [V, C], "wpe.weight": [maxT, C], "ln_f.weight": [C], "ln_f.bias": [C]}
for i in range(L):
    for k, s in {"ln_1.weight": [C], "ln_1.bias": [C], "attn.c_attn.weight": [C, 3*C], "attn.c_attn.bias": [3*C],
                 "attn.c_proj.weight": [C, C], "attn.c_proj.bias": [C], "ln_2.weight": [C], "ln_2.bias": [C],
                 "mlp.c_fc.weight": [C, 4*C], "mlp.c_fc.bias": [4*C], "mlp.c_proj.weight": [4*C, C],
                 "mlp.c_proj.bias": [C]}.items():
        expect[f"h.{i}.{k}"] = s
assert sorted(h) == sorted("transformer." + k for k in expect), sorted(h)[:3]
for k, s in expect.items():
    assert h["transformer." + k]["shape"] == s, k
# qkvw (L, 3C, C) in llm.c, c_attn.weight (C, 3C) in HF: the transpose
off = 1024 + 4 * (Vp * C + maxT * C + 2 * L * C)
qkvw0 = np.frombuffer(raw[off:off + 4 * 3 * C * C], dtype="<f4").reshape(3 * C, C)
assert np.array_equal(get("transformer.h.0.attn.c_attn.weight"), qkvw0.T)
wte = np.frombuffer(raw[1024:1024 + 4 * V * C], dtype="<f4").reshape(V, C)
assert np.array_equal(get("transformer.wte.weight"), wte)
c = json.load(open(f"{d}/config.json"))
assert (c["model_type"], c["n_layer"], c["n_head"], c["n_embd"], c["n_positions"], c["vocab_size"],
        c["activation_function"], c["layer_norm_epsilon"], c["architectures"]) == \
       ("gpt2", L, NH, C, maxT, V, "gelu_new", 1e-5, ["GPT2LMHeadModel"])
EOF
}
if out=$(check_export 2>&1); then pass "the export has GPT2LMHeadModel's names, shapes, Conv1D layout and config"; else fail "export layout" "$(printf '%s' "$out" | tail -n 1)"; fi
fi

# bf16 export: every value rounded to nearest, ties to even (as torch's .to(bfloat16)),
# including ties both ways, the largest float (rounds to inf), subnormals and -0
check_bf16() {
    $PY - "$tmp" <<'EOF'
import json, struct, subprocess, sys, numpy as np, torch
sys.path.insert(0, "scripts/convert")
from hf_gpt2 import read_llmc, write_llmc
d = sys.argv[1]
cfg, t = read_llmc(f"{d}/st_plain.bin")
t = [x.copy() for x in t]
special = np.array([0x3F808000, 0x3F818000, 0x3F80C000, 0x3F807FFF, 0x7F7FFFFF, 0x00000001, 0x80000000,
                    0x807FFFFF, 0xBF808000, 0x3F7FFFFF], dtype=np.uint32).view(np.float32)
t[0].reshape(-1)[:len(special)] = special
write_llmc(f"{d}/special.bin", cfg, t)
subprocess.run([sys.executable, "scripts/convert/llmc_to_hf.py", f"{d}/special.bin", f"{d}/bf16", "--dtype", "bf16"],
               check=True, capture_output=True)
f = open(f"{d}/bf16/model.safetensors", "rb").read()
n = struct.unpack("<Q", f[:8])[0]
h = json.loads(f[8:8 + n]); data = f[8 + n:]
e = h["transformer.wte.weight"]
assert e["dtype"] == "BF16" and json.load(open(f"{d}/bf16/config.json"))["torch_dtype"] == "bfloat16"
b, end = e["data_offsets"]
got = np.frombuffer(data[b:end], dtype="<u2")
want = torch.from_numpy(t[0][:cfg["V"]].reshape(-1).copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
assert np.array_equal(got, want), (got[:10], want[:10])
assert list(got[:5]) == [0x3F80, 0x3F82, 0x3F81, 0x3F80, 0x7F80]  # the rounding cases by hand
for k, e in h.items():
    if k != "__metadata__":
        assert e["dtype"] == "BF16", k
EOF
}
if out=$(check_bf16 2>&1); then pass "bf16 export = round to nearest even, bit for bit (incl. ties, overflow, subnormals)"; else fail "bf16 export" "$(printf '%s' "$out" | tail -n 2 | tr '\n' ' ')"; fi

# ----------------------------------------------------------------------------
# Refusals: one line naming the file and the problem, exit 1, and an existing OUT untouched.
# broken NAME PYTHON: a copy of st_plain whose tensors dict `t` (name -> (dtype, array)) and
# config dict `c` the Python statements change.
broken() {
    local name=$1 code=$2
    mkdir -p "$tmp/$name"
    $PY - "$tmp/st_plain" "$tmp/$name" "$code" <<'EOF'
import json, sys, numpy as np
sys.path.insert(0, "scripts/convert")
from hf_gpt2 import read_safetensors, write_safetensors
src, dst, code = sys.argv[1:]
t = dict(read_safetensors(f"{src}/model.safetensors"))
c = json.load(open(f"{src}/config.json"))
exec(code)
write_safetensors(f"{dst}/model.safetensors", [(k, dt, a) for k, (dt, a) in t.items()], {"format": "pt"})
json.dump(c, open(f"{dst}/config.json", "w"))
EOF
}
echo "precious" > "$tmp/out.bin"
refuse() {  # refuse NAME PATTERN DIR
    expect_error "hf_to_llmc refuses: $1" 1 "$2" $PY scripts/convert/hf_to_llmc.py "$3" "$tmp/out.bin"
    if [ "$(cat "$tmp/out.bin")" != "precious" ] || ls "$tmp"/out.bin.tmp* > /dev/null 2>&1; then
        fail "hf_to_llmc refuses: $1" "the existing output was changed or a temporary file left"
    fi
}
refuse "missing directory" "^error: $tmp/none: not a directory" "$tmp/none"
if [ "$quick" != 1 ]; then
mkdir -p "$tmp/empty"
refuse "no weights file" "empty: no model.safetensors, model.safetensors.index.json or pytorch_model.bin" "$tmp/empty"
fi
broken missing 'del t["h.1.mlp.c_fc.bias"]'
refuse "missing key" "model.safetensors: missing h.1.mlp.c_fc.bias: not a GPT-2 checkpoint" "$tmp/missing"
broken shape 't["h.0.attn.c_attn.weight"] = ("F32", np.zeros((128, 256), np.float32))'
refuse "inconsistent shape" "h.0.attn.c_attn.weight has shape \[128, 256\], expected \[128, 384\]" "$tmp/shape"
if [ "$quick" != 1 ]; then
broken config_shape 'c["n_embd"] = 192; c["n_head"] = 3'
refuse "config disagrees with the shapes" "wte.weight has shape \[1001, 128\], expected \[1001, 192\]" "$tmp/config_shape"
broken intdtype 't["wpe.weight"] = ("I32", np.zeros((48, 128), np.int32))'
refuse "integer tensor" "tensor wpe.weight has dtype I32, not a float" "$tmp/intdtype"
broken untied 't["lm_head.weight"] = ("F32", t["wte.weight"][1] + 1)'
refuse "lm_head not tied" "lm_head.weight differs from wte.weight" "$tmp/untied"
broken extra 't["h.0.attn.q_norm.weight"] = ("F32", np.ones(128, np.float32))'
refuse "unexpected tensor" "unexpected tensor h.0.attn.q_norm.weight" "$tmp/extra"
broken llama 'c["model_type"] = "llama"'
refuse "another architecture" "config.json: model_type is 'llama', not gpt2" "$tmp/llama"
broken relu 'c["activation_function"] = "relu"'
refuse "another activation" "config.json: activation_function 'relu'" "$tmp/relu"
broken extra_layer 'c["n_layer"] = 3'
refuse "config with more layers than the file" "missing h.2.ln_1.weight" "$tmp/extra_layer"
fi
mkdir -p "$tmp/truncated" && cp "$tmp/st_plain/config.json" "$tmp/truncated/"
head -c 300000 "$tmp/st_plain/model.safetensors" > "$tmp/truncated/model.safetensors"
refuse "truncated safetensors" "model.safetensors: tensor .* do not fit shape .*truncated file" "$tmp/truncated"
if [ "$quick" != 1 ]; then
mkdir -p "$tmp/garbage" && head -c 5000 /dev/urandom > "$tmp/garbage/model.safetensors"
refuse "garbage safetensors" "model.safetensors: (bad safetensors header length|the safetensors header is not)" "$tmp/garbage"
mkdir -p "$tmp/garbage_bin" && head -c 5000 /dev/urandom > "$tmp/garbage_bin/pytorch_model.bin"
refuse "garbage pytorch_model.bin" "pytorch_model.bin: cannot load with torch.load" "$tmp/garbage_bin"
$PY -c "import torch,sys; p=sys.argv[1]; sd=torch.load(p); sd['wte.weight']=sd['wte.weight'].long(); torch.save(sd,p)" "$tmp/bin_int/pytorch_model.bin"
refuse "integer tensor in pytorch_model.bin" "tensor wte.weight has dtype int64, not a float" "$tmp/bin_int"
fi

mkdir -p "$tmp/outdir" && echo "precious" > "$tmp/outdir/config.json"
llmc_refuse() {  # llmc_refuse NAME PATTERN MODEL
    expect_error "llmc_to_hf refuses: $1" 1 "$2" $PY scripts/convert/llmc_to_hf.py "$3" "$tmp/outdir"
    if [ "$(cat "$tmp/outdir/config.json")" != "precious" ] || [ -e "$tmp/outdir/model.safetensors" ]; then
        fail "llmc_to_hf refuses: $1" "the output directory was changed"
    fi
}
llmc_refuse "missing model" "^error: $tmp/none.bin: cannot open for reading" "$tmp/none.bin"
cp "$tmp/st_plain.bin" "$tmp/magic.bin"; printf '\x00\x00\x00\x00' | dd of="$tmp/magic.bin" conv=notrunc 2> /dev/null
llmc_refuse "wrong magic" "magic.bin: bad magic number 0" "$tmp/magic.bin"
if [ "$quick" != 1 ]; then
head -c 100000 "$tmp/st_plain.bin" > "$tmp/short.bin"
llmc_refuse "truncated model" "short.bin: truncated model file" "$tmp/short.bin"
fi
cp "$tmp/st_plain.bin" "$tmp/flip.bin"; printf '\x01' | dd of="$tmp/flip.bin" bs=1 seek=4000 conv=notrunc 2> /dev/null
llmc_refuse "corrupt model (CRC)" "flip.bin: CRC mismatch" "$tmp/flip.bin"
if [ "$quick" != 1 ]; then
err=$($PY scripts/convert/llmc_to_hf.py "$tmp/st_plain.bin" "$tmp/x" --dtype fp16 2>&1); rc=$?
if [ $rc -eq 2 ] && printf '%s' "$err" | grep -q "^usage:" && printf '%s' "$err" | grep -q "invalid choice: 'fp16'"; then
    pass "llmc_to_hf: bad --dtype gives usage, exit 2"
else
    fail "llmc_to_hf: bad --dtype" "exit $rc: $err"
fi
fi

# ----------------------------------------------------------------------------
# Mutants: a copy of the scripts with one deliberate bug each must fail a check above.
# Each line: file | sed expression | the check (a shell function below) | what
mutant_test_gpt2() {  # the converted model against the reference of the HF weights
    $PY "$1/hf_to_llmc.py" "$tmp/st_plain" "$tmp/mutant.bin" > /dev/null 2>&1 &&
        ./test_gpt2 -e "$tmp/mutant.bin" -s "$tmp/ref/state.bin" -a "$tmp/ref/activations.bin" > /dev/null 2>&1
}
mutant_bf16() {  # the bf16 export of the special values against torch's rounding
    $PY "$1/llmc_to_hf.py" "$tmp/special.bin" "$tmp/mutant_bf16" --dtype bf16 > /dev/null 2>&1 &&
        $PY - "$tmp" <<'PYEOF'
import json, struct, sys, numpy as np, torch
sys.path.insert(0, "scripts/convert")
from hf_gpt2 import read_llmc
d = sys.argv[1]
cfg, t = read_llmc(f"{d}/special.bin")
f = open(f"{d}/mutant_bf16/model.safetensors", "rb").read()
n = struct.unpack("<Q", f[:8])[0]
e = json.loads(f[8:8 + n])["transformer.wte.weight"]
got = np.frombuffer(f[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]], dtype="<u2")
want = torch.from_numpy(t[0][:cfg["V"]].reshape(-1).copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
sys.exit(0 if np.array_equal(got, want) else 1)
PYEOF
}
mutant_roundtrip() {  # llm.c -> HF -> llm.c
    $PY "$1/llmc_to_hf.py" "$tmp/trained.bin" "$tmp/mutant_rt" > /dev/null 2>&1 &&
        $PY "$1/hf_to_llmc.py" "$tmp/mutant_rt" "$tmp/mutant_rt.bin" > /dev/null 2>&1 && cmp -s "$tmp/trained.bin" "$tmp/mutant_rt.bin"
}
CONVERT_MUTANTS=(
    'hf_gpt2.py|s/(6, "attn.c_proj.weight", True)/(6, "attn.c_proj.weight", False)/|mutant_test_gpt2|attention projection (square) not transposed'
    'hf_gpt2.py|s/(2, "ln_1.weight", False), (3, "ln_1.bias", False)/(2, "ln_2.weight", False), (3, "ln_1.bias", False)/|mutant_test_gpt2|ln_2 weights read as ln_1'
    'hf_gpt2.py|s/((u + 0x7FFF + ((u >> 16) \& 1)) >> 16)/((u + 0x8000) >> 16)/|mutant_bf16|bf16 rounding half away from zero instead of to even'
    'hf_gpt2.py|s/wte\[:V\] = hf\["wte.weight"\]/wte[:V] = hf["wte.weight"]; wte[V:] = 1e-3/|mutant_roundtrip|vocabulary padding rows not zero'
)
quick_mutants="attention projection \(square\) not transposed|bf16 rounding half away from zero"
for entry in "${CONVERT_MUTANTS[@]}"; do
    IFS='|' read -r file expr check what <<< "$entry"
    [ "$quick" = 1 ] && ! printf '%s' "$what" | grep -Eq "$quick_mutants" && continue
    dir="$tmp/mutant_scripts"
    rm -rf "$dir" && mkdir -p "$dir" && cp scripts/convert/hf_gpt2.py scripts/convert/hf_to_llmc.py scripts/convert/llmc_to_hf.py "$dir/"
    sed -i "$expr" "$dir/$file"
    if cmp -s "scripts/convert/$file" "$dir/$file"; then fail "mutant: $what" "the sed expression no longer matches $file"; continue; fi
    if $check "$dir"; then fail "mutant caught: $what" "$check still passes"; else pass "mutant caught: $what ($check fails)"; fi
done

# ----------------------------------------------------------------------------
# transformers' own GPT2LMHeadModel (offline, from local directories) judges both converters:
# on the same batches it must give eval's loss, from the same prompt generate's greedy tokens.
# The model is small (3 layers, C=64) but trained (50 steps of train_gpt2 on Tiny Shakespeare,
# from a model that transformers initialized and saved), so its logits are not near ties.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
VAL=data/tinyshakespeare/tiny_shakespeare_val_000000.bin
EVAL_BATCHES="4 64 8"  # B T batches: eval -b -t -m, and hf_check.py loss
PROMPT="First Citizen:"
hf=$tmp/hf
mkdir -p "$hf"
# eval_loss MODEL [EVAL OPTIONS]: eval's mean loss over the batches
eval_loss() {
    local m=$1 b t n; shift
    read -r b t n <<< "$EVAL_BATCHES"
    ./eval -e "$m" -j "$VAL" -b "$b" -t "$t" -m "$n" "$@" 2> /dev/null | sed -n 's/^val loss \([0-9.]*\) .*/\1/p'
}
# within GOT WANT REL: |GOT - WANT| <= REL * |WANT|
within() {
    [ -n "$1" ] && [ -n "$2" ] &&
        awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; if (b < 0) b = -b; exit !(d <= r * b) }'
}
# close NAME GOT WANT REL
close() {
    if within "$2" "$3" "$4"; then pass "$1 ($2 vs $3)"; else fail "$1" "${2:-nothing} vs ${3:-nothing}: not within $4 relative"; fi
}
# hf_line N: line N of the last hf_check.py run's output
hf_line() { sed -n "${1}p" "$hf/check.out"; }

if [ ! -f "$VAL" ]; then
    fail "transformers' GPT2LMHeadModel checks" "no $VAL: run make setup (scripts/setup/setup_data.sh)"
elif ! $PY scripts/reference/hf_check.py init "$hf/init" --layers 3 --heads 2 --channels 64 --max-seq-len 64 \
        + loss "$hf/init" "$VAL" $EVAL_BATCHES > "$hf/check.out" 2> "$hf/check.log"; then
    fail "transformers' GPT2LMHeadModel checks" "hf_check.py init: $(tail -n 1 "$hf/check.log")"
else
    # (b) a model saved by transformers' save_pretrained (safetensors) converts to its loss ...
    expect_ok "hf_to_llmc of a model transformers initialized and saved" $PY scripts/convert/hf_to_llmc.py "$hf/init" "$hf/init.bin"
    close "save_pretrained's fresh model: eval's loss = GPT2LMHeadModel's" "$(eval_loss "$hf/init.bin")" "$(hf_line 1)" 1e-5
    # ... and trains
    if OMP_NUM_THREADS=2 nice -n 15 ./train_gpt2 -e "$hf/init.bin" -b 4 -t 64 -x 50 -l 3e-3 -u 5 -v 0 -s 0 -n 50 \
            -o "$hf/run" > "$hf/train.log" 2>&1; then
        trained=$hf/run/model_00000050.bin
        trained_loss=$(eval_loss "$trained")
        if awk -v l="$trained_loss" 'BEGIN { exit !(l != "" && l < 8) }'; then
            pass "the trained model beats chance (eval loss $trained_loss, ln 50257 = 10.8)"
        else
            fail "the trained model beats chance" "eval loss '$trained_loss'"
        fi
    else
        fail "train_gpt2 from the converted model" "$(tail -n 1 "$hf/train.log")"
        trained=
    fi
fi

# The exports (fp32, bf16) and mutants of them: a copy of the scripts with one deliberate bug.
# The transpose mutant keeps llm.c -> HF -> llm.c bit-identical (the bug is on both ways):
# only transformers can see it.
HF_MUTANTS=(
    'hf_gpt2.py|s/(6, "attn.c_proj.weight", True)/(6, "attn.c_proj.weight", False)/|the attention projection (square) not transposed'
    'hf_gpt2.py|s/"layer_norm_epsilon": LN_EPS/"layer_norm_epsilon": 1e-3/|config.json with layer_norm_epsilon 1e-3 (1e-4 moves this loss by only 9e-6)'
)
if [ -n "${trained:-}" ] && [ "$quick" = 1 ]; then
    # quick: the fp32 export's loss only
    expect_ok "llmc_to_hf fp32 of the trained model" $PY scripts/convert/llmc_to_hf.py "$trained" "$hf/fp32"
    $PY scripts/reference/hf_check.py loss "$hf/fp32" "$VAL" $EVAL_BATCHES > "$hf/check.out" 2> "$hf/check.log" ||
        fail "GPT2LMHeadModel on the fp32 export" "$(tail -n 1 "$hf/check.log")"
    close "GPT2LMHeadModel.from_pretrained(fp32 export): eval's loss" "$(hf_line 1)" "$trained_loss" 1e-5
elif [ -n "${trained:-}" ]; then
    expect_ok "llmc_to_hf fp32 of the trained model" $PY scripts/convert/llmc_to_hf.py "$trained" "$hf/fp32"
    expect_ok "llmc_to_hf bf16 of the trained model" $PY scripts/convert/llmc_to_hf.py "$trained" "$hf/bf16" --dtype bf16
    $PY scripts/convert/hf_to_llmc.py "$hf/bf16" "$hf/bf16_values.bin" > /dev/null  # the bf16 values, as fp32
    mutant_checks=()
    for i in "${!HF_MUTANTS[@]}"; do
        IFS='|' read -r file expr what <<< "${HF_MUTANTS[$i]}"
        dir=$hf/mutant_scripts$i
        mkdir -p "$dir" && cp scripts/convert/hf_gpt2.py scripts/convert/hf_to_llmc.py scripts/convert/llmc_to_hf.py "$dir/"
        sed -i "$expr" "$dir/$file"
        if cmp -s "scripts/convert/$file" "$dir/$file"; then fail "mutant: $what" "the sed expression no longer matches $file"; fi
        $PY "$dir/llmc_to_hf.py" "$trained" "$hf/mutant$i" > /dev/null
        mutant_checks+=(+ loss "$hf/mutant$i" "$VAL" $EVAL_BATCHES + greedy "$hf/mutant$i" data/gpt2 "$PROMPT" 48 "$hf/mutant$i.txt")
    done
    # one process for all (PyTorch and transformers take seconds to load): output lines
    # 1 fp32 loss, 2 fp32 greedy, 3 bf16 values' loss (fp32), 4 bf16 loss computed in bf16,
    # 5 the fp32 model resaved by transformers (safetensors), 6 the same as pytorch_model.bin, 7... mutants
    if ! $PY scripts/reference/hf_check.py loss "$hf/fp32" "$VAL" $EVAL_BATCHES + greedy "$hf/fp32" data/gpt2 "$PROMPT" 48 "$hf/greedy.txt" \
            + loss "$hf/bf16" "$VAL" $EVAL_BATCHES + loss "$hf/bf16" "$VAL" $EVAL_BATCHES --dtype bfloat16 \
            + resave "$hf/fp32" "$hf/resaved_st" "$hf/resaved_bin" + loss "$hf/resaved_st" "$VAL" $EVAL_BATCHES \
            + loss "$hf/resaved_bin" "$VAL" $EVAL_BATCHES "${mutant_checks[@]}" > "$hf/check.out" 2> "$hf/check.log"; then
        fail "GPT2LMHeadModel on the exports" "$(tail -n 1 "$hf/check.log")"
    fi
    # (a) fp32: the loss within 1e-5 (both fp32; eval prints 6 decimals) ...
    close "GPT2LMHeadModel.from_pretrained(fp32 export): eval's loss" "$(hf_line 1)" "$trained_loss" 1e-5
    # ... and generate's greedy tokens, 48 of them (generate ends its output with a newline), none
    # a near tie: the best logit at least 1e-3 above the second (fp32's differences are ~1e-5)
    ./generate -e "$trained" -p "$PROMPT" -n 48 --temperature 0 > "$hf/generate.txt" 2> "$hf/generate.log"
    printf '\n' >> "$hf/greedy.txt"
    read -r _ ntok _ margin <<< "$(hf_line 2)"
    if ! cmp -s "$hf/greedy.txt" "$hf/generate.txt"; then
        fail "GPT2LMHeadModel's greedy tokens = generate's" "$(cmp "$hf/greedy.txt" "$hf/generate.txt" 2>&1 | head -n 1)"
    elif [ "${ntok:-0}" -lt 40 ] || ! grep -q "generated $ntok tokens" "$hf/generate.log"; then
        fail "GPT2LMHeadModel's greedy tokens = generate's" "only ${ntok:-0} tokens before end-of-text, or generate made another number"
    elif ! awk -v m="$margin" 'BEGIN { exit !(m != "" && m >= 1e-3) }'; then
        fail "GPT2LMHeadModel's greedy tokens = generate's" "a near tie (best logit only $margin above the second): pick another prompt"
    else
        pass "GPT2LMHeadModel's $ntok greedy tokens = generate's (smallest lead of the best logit: $margin)"
    fi
    # bf16: computed in fp32, the export's values give eval's loss of those values (hf_to_llmc of the
    # export) within 1e-5, as fp32 does. Computed in bf16 (as a user loading it with dtype=bfloat16
    # would), activations and the residual stream are rounded to 8 bits each layer: here the loss
    # came within 5e-5 of eval's; 1e-3 bounds that and still catches a wrong weight (the transpose
    # mutant moves the loss by 7e-3).
    close "GPT2LMHeadModel(bf16 export, fp32 compute): eval's loss of those values" "$(hf_line 3)" "$(eval_loss "$hf/bf16_values.bin")" 1e-5
    close "GPT2LMHeadModel(bf16 export, bf16 compute): eval's loss within bf16's error" "$(hf_line 4)" "$trained_loss" 1e-3
    # (b) transformers' save_pretrained (safetensors) and torch.save (pytorch_model.bin) of the loaded
    # export: hf_to_llmc gives the trained checkpoint again, bit for bit, and its loss
    for f in st bin; do
        n=$([ $f = st ] && echo 5 || echo 6)
        if $PY scripts/convert/hf_to_llmc.py "$hf/resaved_$f" "$hf/resaved_$f.bin" > "$hf/convert.log" 2>&1; then
            close "transformers-saved ($f) -> hf_to_llmc: eval's loss = GPT2LMHeadModel's" "$(eval_loss "$hf/resaved_$f.bin")" "$(hf_line $n)" 1e-5
            cmp -s "$hf/resaved_$f.bin" "$trained" && pass "transformers-saved ($f) -> hf_to_llmc: the trained checkpoint, bit for bit" \
                || fail "transformers-saved ($f) -> hf_to_llmc" "differs from the trained checkpoint"
        else
            fail "hf_to_llmc of transformers-saved ($f)" "$(tail -n 1 "$hf/convert.log")"
        fi
    done
    # the mutants: each must fail the loss check, the transpose also the greedy one
    for i in "${!HF_MUTANTS[@]}"; do
        IFS='|' read -r _ _ what <<< "${HF_MUTANTS[$i]}"
        if within "$(hf_line $((7 + 2 * i)))" "$trained_loss" 1e-5; then fail "mutant caught by the loss: $what" "$(hf_line $((7 + 2 * i))) still within 1e-5"
        else pass "mutant caught by the loss: $what ($(hf_line $((7 + 2 * i))))"; fi
    done
    printf '\n' >> "$hf/mutant0.txt"
    cmp -s "$hf/mutant0.txt" "$hf/generate.txt" && fail "mutant caught by the greedy tokens: ${HF_MUTANTS[0]##*|}" "same tokens" \
        || pass "mutant caught by the greedy tokens: ${HF_MUTANTS[0]##*|}"
    # an import mutant: pytorch_model.bin's weights through bf16 on the way in
    dir=$hf/mutant_import
    mkdir -p "$dir" && cp scripts/convert/hf_gpt2.py scripts/convert/hf_to_llmc.py "$dir/"
    sed -i 's/out\[name\] = ("F32", t.detach().to(torch.float32)/out[name] = ("F32", t.detach().to(torch.bfloat16).to(torch.float32)/' "$dir/hf_to_llmc.py"
    if cmp -s scripts/convert/hf_to_llmc.py "$dir/hf_to_llmc.py"; then fail "mutant: pytorch_model.bin read through bf16" "the sed expression no longer matches"
    elif $PY "$dir/hf_to_llmc.py" "$hf/resaved_bin" "$hf/mutant_import.bin" > /dev/null 2>&1 &&
            within "$(eval_loss "$hf/mutant_import.bin")" "$(hf_line 6)" 1e-5; then
        fail "mutant caught by the loss: pytorch_model.bin read through bf16" "eval's loss still within 1e-5"
    else
        pass "mutant caught by the loss: pytorch_model.bin read through bf16"
    fi
fi
