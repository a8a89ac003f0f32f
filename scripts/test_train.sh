# train_gpt2 from the shell: flags, logs, learning, determinism, bad input.
# Uses the small "odd" reference model (V=517) and a synthetic dataset.
set -u
source scripts/testlib.sh
PY=/usr/bin/python3

model=data/ref/odd/model.bin
if [ ! -f $model ]; then
    fail "train tests" "$model is missing (scripts/test_gpt2.sh writes it)"
    exit 0
fi
data=data/synth
$PY scripts/make_synthetic_data.py --out $data --vocab 517 --tokens 20000
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
train() { ./train_gpt2 -e $model -i "$data/synth_train_*.bin" -j "$data/synth_val_*.bin" -b 4 -t 32 "$@"; }

# --- flags
expect_ok "-h prints the usage" sh -c './train_gpt2 -h | grep -q "^usage: ./train_gpt2"'
expect_error "unknown flag" 2 "^error: --bogus: unknown flag" ./train_gpt2 --bogus 1
expect_error "flag without its value" 2 "^error: -b: missing value" ./train_gpt2 -b
expect_error "-b not a number" 2 "^error: -b: 'abc' is not an integer" ./train_gpt2 -b abc
expect_error "-b zero" 2 "^error: -b: 0 is outside 1\.\." ./train_gpt2 -b 0
expect_error "-l negative" 2 "^error: -l: -1 is outside" ./train_gpt2 -l -1
expect_error "-l not finite" 2 "^error: -l: 'nan' is not a number" ./train_gpt2 -l nan
expect_error "-x 0" 2 "^error: -x: 0 steps" ./train_gpt2 -x 0

# --- bad input
expect_error "T above the model's maximum" 1 "^error: -t 64: longer than the model's maximum sequence length 37" train -t 64
expect_error "no train shards" 1 "^error: -i $tmp/none_\*.bin: no files match" ./train_gpt2 -e $model -t 32 -i "$tmp/none_*.bin"
expect_error "missing model" 1 "^error: $tmp/model.bin: cannot open" ./train_gpt2 -e $tmp/model.bin
mkshard() { $PY -c "
import numpy as np, sys
path, magic, version, count, n, tok = sys.argv[1], *map(int, sys.argv[2:])
h = np.zeros(256, np.int32); h[:3] = [magic, version, count]
open(path, 'wb').write(h.tobytes() + np.full(n, tok, np.uint16).tobytes())" "$@"; }
mkshard "$tmp/magic.bin" 20240326 1 1000 1000 5
expect_error "shard with wrong magic" 1 "magic.bin: bad magic number 20240326" train -i "$tmp/magic.bin" -v 0 -s 0
mkshard "$tmp/version.bin" 20240520 7 1000 1000 5
expect_error "shard with wrong version" 1 "version.bin: unsupported token shard version 7" train -i "$tmp/version.bin" -v 0 -s 0
mkshard "$tmp/short.bin" 20240520 1 1000 600 5
expect_error "truncated shard" 1 "short.bin: truncated token shard" train -i "$tmp/short.bin" -v 0 -s 0
mkshard "$tmp/tiny.bin" 20240520 1 100 100 5
expect_error "shard too small for one batch" 1 "tiny.bin: the shards hold no batch" train -i "$tmp/tiny.bin" -v 0 -s 0
mkshard "$tmp/vocab.bin" 20240520 1 1000 1000 600
expect_error "token outside the vocabulary" 1 "vocab.bin: token 600 at index [0-9]+ is outside the vocabulary \(0\.\.516\)" train -i "$tmp/vocab.bin" -v 0 -s 0
expect_error "no val shards with -v" 1 "^error: -j $tmp/nope_\*.bin: no files match" train -j "$tmp/nope_*.bin" -v 5 -s 0
expect_error "missing tokenizer when sampling" 1 "nope.bin: tokenizer not found" train -s 5 --tokenizer "$tmp/nope.bin"
: > "$tmp/file"
expect_error "output dir is a file" 1 "^error: -o $tmp/file: " train -x 1 -v 0 -s 0 -o "$tmp/file"

# --- a training run: it learns, logs and samples
if out=$(train -x 60 -l 1e-2 -v 20 -m 4 -s 30 -g 8 -o "$tmp/run1" 2>&1); then
    pass "training run exits 0"
else
    fail "training run exits 0" "$(printf '%s' "$out" | tail -n 2 | tr '\n' ' ')"
fi
log=$tmp/run1/main.log
first=$(grep -m1 ' trl:' "$log" | sed 's/.*trl:\([^ ]*\).*/\1/')
last=$(grep ' trl:' "$log" | tail -n 1 | sed 's/.*trl:\([^ ]*\).*/\1/')
if awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 5.5 && b < 3.5) }'; then
    pass "the loss falls on learnable data ($first -> $last in 60 steps)"
else
    fail "the loss falls on learnable data" "first $first, last $last"
fi
n=$(grep -cE '^s:[0-9]+ trl:[0-9]+\.[0-9]{6} lr:[0-9.e+-]+ norm:[0-9.]+ ms:[0-9.]+ tok/s:[0-9]+$' "$log")
[ "$n" -eq 60 ] && pass "main.log: one line per step in llm.c's format" || fail "main.log step lines" "$n of 60 match; $(head -n 2 "$log" | tr '\n' '|')"
vals=$(grep -cE '^s:(0|20|40|60) tel:[0-9]+\.[0-9]{6}$' "$log")
[ "$vals" -eq 4 ] && pass "main.log: validation at steps 0, 20, 40 and at the end" || fail "main.log val lines" "$vals of 4; $(grep tel "$log" | tr '\n' '|')"
samples=$(printf '%s\n' "$out" | grep -A1 '^generating:' | grep -c '^---')
[ "$samples" -eq 2 ] && pass "samples every -s steps and at the end" || fail "samples" "found $samples"
sample_text=$(printf '%s\n' "$out" | grep -A2 '^generating:' | sed -n 3p)
printf '%s' "$sample_text" | grep -qE '^(<[0-9]+>){8}$' && pass "a sample is decoded with the tokenizer ($sample_text)" \
    || fail "sample decoded" "got '$sample_text'"
printf '%s\n' "$out" | grep -q '^memory: parameters .* activations .* (B=4, T=32)' \
    && pass "memory sizes printed at start" || fail "memory sizes printed" "no memory line"

# --- determinism: same seed and threads, identical losses and samples
train -x 60 -l 1e-2 -v 20 -m 4 -s 30 -g 8 -o "$tmp/run2" > "$tmp/out2" 2>&1
strip() { sed 's/ ms:.*//' "$1"; }
if diff <(strip "$tmp/run1/main.log") <(strip "$tmp/run2/main.log") > /dev/null && \
   diff <(printf '%s\n' "$out" | grep -v -e ' ms ' -e '^peak RSS') <(grep -v -e ' ms ' -e '^peak RSS' "$tmp/out2") > /dev/null; then
    pass "two runs with one seed print bit-identical losses and samples"
else
    fail "determinism" "runs differ"
fi
train -x 3 -v 0 -s 0 -o "$tmp/run3" --seed 5 > /dev/null 2>&1
train -x 3 -v 0 -s 0 -o "$tmp/run3" --seed 5 > /dev/null 2>&1
[ "$(grep -c trl "$tmp/run3/main.log")" -eq 6 ] && pass "main.log is appended to, never truncated" \
    || fail "main.log appended" "$(grep -c trl "$tmp/run3/main.log") lines"

# --- a model built from scratch
if out=$(./train_gpt2 -e d6 -i "$data/synth_train_*.bin" -b 1 -t 16 -x 2 -v 0 -s 0 2>&1) && \
   printf '%s' "$out" | grep -q 'L=6 NH=6 C=384 maxT=1024 V=50257 (padded 50304)'; then
    loss=$(printf '%s\n' "$out" | grep -m1 '^step' | sed 's/.*loss \([^ ]*\).*/\1/')
    # a fresh model predicts about uniformly: loss near ln(50257) = 10.82
    awk -v l="$loss" 'BEGIN { exit !(l > 10.6 && l < 11.1) }' && pass "-e d6 builds a GPT-2 from scratch (first loss $loss)" \
        || fail "-e d6 initial loss" "$loss, expected about 10.82"
else
    fail "-e d6 builds a GPT-2 from scratch" "$(printf '%s' "$out" | tail -n 2 | tr '\n' ' ')"
fi
