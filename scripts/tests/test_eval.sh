# ./eval and train_gpt2 --eval-every: HellaSwag items written here in the official
# schema -> scripts/convert/prepare_hellaswag.py -> ./eval --hellaswag, checked against a
# PyTorch scoring (scripts/reference/eval_reference.py, float64) of the same items with the same
# model: every ending's summed and mean loss, the predictions, acc and acc_norm; the
# loss over shards against PyTorch and against train_gpt2's; the training run's
# "s:STEP eval:ACC" lines; bad input; deliberately broken scoring must fail.
set -u
source scripts/tests/testlib.sh
PY=$PWD/.venv/bin/python
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
VAL="data/tinyshakespeare/tiny_shakespeare_val_*.bin"
VAL0=data/tinyshakespeare/tiny_shakespeare_val_000000.bin

nice -n 15 make -s eval tokenize train_gpt2 > /dev/null || { fail "build" "make eval tokenize train_gpt2 failed"; exit 0; }

# Items in the official schema (github.com/rowanz/hellaswag), labels 0-3, non-ASCII text,
# endings of different lengths.
cat > "$tmp/items.jsonl" <<'EOF'
{"ind": 24, "activity_label": "Roof shingle removal", "ctx_a": "A man is sitting on a roof.", "ctx_b": "he", "ctx": "A man is sitting on a roof. he", "split": "val", "split_type": "indomain", "label": 3, "endings": ["is using wrap to wrap a pair of skis.", "is ripping level tiles off.", "is holding a rubik's cube.", "starts pulling up roofing on a roof."], "source_id": "activitynet~v_-JhWjGDPHMY"}
{"ind": 92, "activity_label": "Clean and jerk", "ctx_a": "A lady walks to a barbell. She bends down and grabs the pole.", "ctx_b": "the lady", "ctx": "A lady walks to a barbell. She bends down and grabs the pole. the lady", "split": "val", "split_type": "zeroshot", "label": 3, "endings": ["swings and lands in her arms.", "pulls the barbell forward.", "pulls a rope attached to the barbell.", "stands and lifts the weight over her head."], "source_id": "activitynet~v_-lJS58hyo1c"}
{"ind": 106, "activity_label": "Canoeing", "ctx_a": "Two women in a child are shown in a canoe while a man pulls the canoe while standing in the water, with other individuals visible in the background.", "ctx_b": "the child and a different man", "ctx": "Two women in a child are shown in a canoe while a man pulls the canoe while standing in the water, with other individuals visible in the background. the child and a different man", "split": "val", "split_type": "indomain", "label": 2, "endings": ["are then shown paddling down a river in a boat while a woman talks.", "are driving the canoe, they go down the river flowing side to side.", "sit in a canoe while the man paddles.", "walking go down the rapids, while the man in his helicopter almost falls and goes out of canoehood."], "source_id": "activitynet~v_-xQvJmC2jhk"}
{"ind": 114, "activity_label": "Making a cake", "ctx_a": "Éloïse pours flour, sugar and two eggs into a bowl —", "ctx_b": "", "ctx": "Éloïse pours flour, sugar and two eggs into a bowl —", "split": "val", "split_type": "zeroshot", "label": 0, "endings": ["then she stirs it all with a wooden spoon.", "the bowl flies away.", "and the “cake” is a car.", "ok."], "source_id": "wikihow~1"}
{"ind": 200, "activity_label": "Theatre", "ctx_a": "KING RICHARD: Now is the winter of our discontent", "ctx_b": "made", "ctx": "KING RICHARD: Now is the winter of our discontent made", "split": "val", "split_type": "zeroshot", "label": 1, "endings": ["blue by the ocean's roar.", "glorious summer by this sun of York;", "of cheese.", "with seventeen hammers and a telephone, said the king of the lost shoes."], "source_id": "wikihow~2"}
{"ind": 201, "activity_label": "Theatre", "ctx_a": "First Citizen: Before we proceed any further, hear me", "ctx_b": "", "ctx": "First Citizen: Before we proceed any further, hear me", "split": "val", "split_type": "indomain", "label": 0, "endings": ["speak.", "eat the sandwich quickly.", "dance.", "run away into the 1990s with 42 robots."], "source_id": "wikihow~3"}
{"ind": 202, "activity_label": "Theatre", "ctx_a": "ROMEO: What light", "ctx_b": "", "ctx": "ROMEO: What light", "split": "val", "split_type": "indomain", "label": 2, "endings": ["bulb.", "is there.", "through yonder window breaks?", "year."], "source_id": "wikihow~4"}
{"ind": 203, "activity_label": "Cooking", "ctx_a": "The chef slices the onions and", "ctx_b": "", "ctx": "The chef slices the onions and", "split": "val", "split_type": "indomain", "label": 1, "endings": ["the onions slice the chef.", "puts them in the pan.", "12345.", "sings to the moon in Latin for three hours."], "source_id": "wikihow~5"}
EOF
expect_ok "prepare_hellaswag" $PY scripts/convert/prepare_hellaswag.py "$tmp/items.jsonl" "$tmp/items.bin"

# ./tokenize --records (many texts in one process, as prepare_hellaswag uses it) gives each
# text the ids that ./tokenize gives it as a file of its own (tested in test_tokenizer.sh)
printf 'A man is sitting on a roof. he\0 is using wrap.\0\0 Éloïse — “cake”\n\0' > "$tmp/records.bin"
./tokenize --vocab data/gpt2 --records "$tmp/records.bin" > "$tmp/records.txt" 2>&1
same=1; i=0
for text in 'A man is sitting on a roof. he' ' is using wrap.' '' " Éloïse — “cake”"$'\n'; do
    i=$((i + 1))
    printf '%s' "$text" > "$tmp/one.txt"
    [ "$(./tokenize --vocab data/gpt2 "$tmp/one.txt" | tr '\n' ' ' | sed 's/ $//')" = "$(sed -n "${i}p" "$tmp/records.txt")" ] || same=0
done
if [ $same -eq 1 ] && [ "$(wc -l < "$tmp/records.txt")" -eq 4 ]; then pass "tokenize --records = tokenize of each text alone"
else fail "tokenize --records" "differs from tokenizing each text: $(tr '\n' '|' < "$tmp/records.txt")"; fi
printf 'no terminator' > "$tmp/records_bad.bin"
expect_error "tokenize --records: a text without its NUL" 1 "records_bad.bin: the last text is not ended by a NUL byte" \
    ./tokenize --vocab data/gpt2 --records "$tmp/records_bad.bin"

# A small model, trained a little (a random one predicts nearly uniformly: too many near-ties
# between endings), with the HellaSwag eval every 20 steps at B=2 (two rows per forward pass)
$PY scripts/reference/gpt2_reference.py --layers 2 --heads 2 --channels 64 --max-seq-len 128 -B 1 -T 8 --steps 1 \
    --out "$tmp/init" > /dev/null
expect_ok "train_gpt2 --eval-every 20 --eval-file" ./train_gpt2 -e "$tmp/init/model.bin" -b 2 -t 64 -x 40 -l 3e-3 \
    -v 20 -m 5 -s 0 -n 40 --eval-every 20 --eval-file "$tmp/items.bin" -o "$tmp/run"
model=$tmp/run/model_00000040.bin
evals=$(grep -c '^s:[0-9]* eval:[0-9.]*$' "$tmp/run/main.log")
if [ "$evals" -eq 2 ] && grep -q '^s:20 eval:' "$tmp/run/main.log" && grep -q '^s:40 eval:' "$tmp/run/main.log"; then
    pass "train_gpt2 logs s:20 and s:40 eval:ACC to main.log"
else
    fail "train_gpt2 eval log lines" "expected s:20 and s:40 eval lines, got: $(grep eval "$tmp/run/main.log" | tr '\n' ' ')"
fi

# ./eval against PyTorch, example by example
./eval -e "$model" --hellaswag "$tmp/items.bin" --verbose 1 > "$tmp/ours.txt" 2>&1
# (the same PyTorch run also gives the loss of the first 5 batches of B=2 T=64 of the val shard)
$PY scripts/reference/eval_reference.py --model "$model" --jsonl "$tmp/items.jsonl" --evalfile "$tmp/items.bin" \
    --shard $VAL0 -B 2 -T 64 -m 5 > "$tmp/ref.txt" 2>&1
# compare OURS REF: same labels and predictions, every loss within 2e-6 relative, same acc
compare() {
    $PY - "$1" "$2" <<'EOF'
import re, sys
ours, ref = open(sys.argv[1]).read(), open(sys.argv[2]).read()
def parse(text):
    rows = []
    for line in text.splitlines():
        m = re.match(r"example (\d+) label (\d+) pred (\d+) pred_norm (\d+) sum (.*) mean (.*)$", line)
        if m:
            rows.append((tuple(int(g) for g in m.groups()[:4]), [float(v) for v in m.group(5).split()],
                         [float(v) for v in m.group(6).split()]))
    return rows
o, r = parse(ours), parse(ref)
if not r:
    sys.exit("the reference failed: " + (ref.strip().splitlines()[-1] if ref.strip() else "no output"))
if len(o) != len(r):
    sys.exit(f"{len(o)} examples scored, the reference has {len(r)}")
worst = 0.0
for (oi, osum, omean), (ri, rsum, rmean) in zip(o, r):
    if oi != ri:
        sys.exit(f"example {ri[0]}: (index, label, pred, pred_norm) {oi}, reference {ri}")
    for a, b in zip(osum + omean, rsum + rmean):
        worst = max(worst, abs(a - b) / abs(b))
if worst > 2e-6:
    sys.exit(f"an ending loss differs by {worst:.3g} relative (tolerance 2e-6)")
acc = re.search(r"acc (\S+) \(\d+, .*acc_norm (\S+) \(", ours)
racc = re.search(r"^acc (\S+) acc_norm (\S+) min_gap (\S+)", ref, re.M)
if not acc or (acc.group(1), acc.group(2)) != (racc.group(1), racc.group(2)):
    sys.exit(f"acc/acc_norm {acc.groups() if acc else None}, reference {racc.groups()[:2]}")
if float(racc.group(3)) < 1e-3:
    sys.exit(f"the items have a near-tie ({racc.group(3)}): the exact comparison of predictions is not meaningful")
print(f"{len(r)} examples, largest relative loss error {worst:.2g}, acc {acc.group(1)} acc_norm {acc.group(2)}, "
      f"smallest gap between the best two endings {float(racc.group(3)):.3g}")
EOF
}
if out=$(compare "$tmp/ours.txt" "$tmp/ref.txt" 2>&1); then
    pass "eval --hellaswag matches PyTorch: $out"
else
    fail "eval --hellaswag matches PyTorch" "$(printf '%s' "$out" | tail -n 1) | $(tail -n 1 "$tmp/ref.txt")"
fi
acc_norm=$(sed -n 's/.*acc_norm \([0-9.]*\) (.*/\1/p' "$tmp/ours.txt")
if grep -q "^s:40 eval:$acc_norm\$" "$tmp/run/main.log"; then
    pass "train_gpt2's s:40 eval (rows 2 at a time) equals eval's acc_norm $acc_norm"
else
    fail "train_gpt2's eval equals eval's acc_norm" "eval: $acc_norm; log: $(grep '^s:40 eval' "$tmp/run/main.log")"
fi

# Loss over shards: against PyTorch at two shapes, and against train_gpt2's validation loss
val_check() {  # val_check B T M [REFERENCE OUTPUT]
    local ours ref
    ours=$(./eval -e "$model" -j "$VAL" -b "$1" -t "$2" -m "$3" 2>&1 | sed -n 's/^val loss \([0-9.]*\) .*/\1/p')
    if [ $# -ge 4 ]; then ref=$(sed -n 's/^val loss \([0-9.]*\) .*/\1/p' "$4")
    else ref=$($PY scripts/reference/eval_reference.py --model "$model" --shard $VAL0 -B "$1" -T "$2" -m "$3" | sed -n 's/^val loss \([0-9.]*\) .*/\1/p'); fi
    if [ -n "$ours" ] && $PY -c "import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 1e-6 * b)" "$ours" "$ref"; then
        pass "eval -j loss matches PyTorch (B=$1 T=$2 m=$3: $ours vs $ref)"
    else
        fail "eval -j loss matches PyTorch (B=$1 T=$2 m=$3)" "ours '$ours', PyTorch '$ref'"
    fi
}
val_check 2 64 5 "$tmp/ref.txt"
[ "${TEST_QUICK:-0}" = 1 ] || val_check 3 37 4  # TEST_QUICK=1 (make test): one shape
ours=$(./eval -e "$model" -j "$VAL" -b 2 -t 64 -m 5 | sed -n 's/^val loss \([0-9.]*\) | perplexity \([0-9.]*\) .*/\1 \2/p')
tel=$(sed -n 's/^s:40 tel:\(.*\)/\1/p' "$tmp/run/main.log")
if [ "${ours% *}" = "$tel" ] && $PY -c "import math, sys; l, p = map(float, sys.argv[1:]); sys.exit(abs(math.exp(l) - p) > 1e-3 * p)" $ours; then
    pass "eval's loss equals train_gpt2's val loss for the same batches ($tel), perplexity = exp(loss)"
else
    fail "eval's loss equals train_gpt2's" "eval '$ours', train_gpt2 s:40 tel '$tel'"
fi

# ----------------------------------------------------------------------------
# Bad input: one line naming the file or flag, exit 1 (2 + usage for flags).
patch_u16() { $PY -c "import struct,sys; f=open(sys.argv[1],'r+b'); f.seek(int(sys.argv[2])); f.write(struct.pack('<H', int(sys.argv[3])))" "$@"; }
expect_error "eval: missing model" 1 "^error: $tmp/none.bin: cannot open" ./eval -e "$tmp/none.bin" --hellaswag "$tmp/items.bin"
expect_error "eval: missing eval file" 1 "^error: $tmp/none.bin: cannot open" ./eval -e "$model" --hellaswag "$tmp/none.bin"
expect_error "eval: a model file as the eval file" 1 "run/model_00000040.bin: bad magic number 20240326 \(a HellaSwag eval file has 20240522\)" ./eval -e "$model" --hellaswag "$model"
head -c -7 "$tmp/items.bin" > "$tmp/short.bin"
expect_error "eval: truncated eval file" 1 "short.bin: truncated file" ./eval -e "$model" --hellaswag "$tmp/short.bin"
head -c 1030 "$tmp/items.bin" > "$tmp/short2.bin"
expect_error "eval: eval file cut in an example's header" 1 "short2.bin: truncated file" ./eval -e "$model" --hellaswag "$tmp/short2.bin"
cp "$tmp/items.bin" "$tmp/delim.bin"; patch_u16 "$tmp/delim.bin" 1024 7
expect_error "eval: corrupt eval file (delimiter)" 1 "delim.bin: example 0 does not start with the delimiter" ./eval -e "$model" --hellaswag "$tmp/delim.bin"
cp "$tmp/items.bin" "$tmp/label.bin"; patch_u16 "$tmp/label.bin" 1030 4
expect_error "eval: label beyond the endings" 1 "label.bin: example 0: label 4 but 4 endings" ./eval -e "$model" --hellaswag "$tmp/label.bin"
cp "$tmp/items.bin" "$tmp/token.bin"; patch_u16 "$tmp/token.bin" 1036 60000
expect_error "eval: token outside the model's vocabulary" 1 "token.bin: token 60000 is outside the model's vocabulary" ./eval -e "$model" --hellaswag "$tmp/token.bin"
long=$(printf 'word %.0s' $(seq 1 150))
printf '{"ctx": "%s", "endings": ["a", "b", "c", "d"], "label": 0}\n' "$long" > "$tmp/long.jsonl"
$PY scripts/convert/prepare_hellaswag.py "$tmp/long.jsonl" "$tmp/long.bin" > /dev/null
expect_error "eval: an example longer than the model's maxT" 1 "long.bin: an example has 152 tokens of context \+ ending, more than T=128, the model's maximum" ./eval -e "$model" --hellaswag "$tmp/long.bin"
expect_error "eval: -t beyond maxT" 1 "^error: -t 500: longer than the model's maximum sequence length 128" ./eval -e "$model" -j "$VAL" -t 500
expect_error "eval: shards that do not exist" 1 "^error: -j $tmp/nothing\*.bin" ./eval -e "$model" -j "$tmp/nothing*.bin"
expect_error "eval: no -e" 2 "^error: -e: a model file is required" ./eval --hellaswag "$tmp/items.bin"
expect_error "eval: nothing to evaluate" 2 "^error: -j: nothing to evaluate" ./eval -e "$model"
expect_error "eval: unknown flag" 2 "^error: --bogus: unknown flag" ./eval -e "$model" --bogus 1
expect_error "eval: bad -m" 2 "^error: -m: 'x' is not an integer" ./eval -e "$model" -j "$VAL" -m x
expect_error "train_gpt2: --eval-every without --eval-file" 2 "^error: --eval-every: needs --eval-file" ./train_gpt2 -e "$model" --eval-every 5
expect_error "train_gpt2: eval file needs a longer T" 1 "items.bin: an example has [0-9]+ tokens of context \+ ending, more than T=16 \(raise -t\)" \
    ./train_gpt2 -e "$model" -t 16 -x 1 -s 0 --eval-every 1 --eval-file "$tmp/items.bin"

echo precious > "$tmp/out.bin"
prep_refuse() {  # prep_refuse NAME PATTERN JSONL
    expect_error "prepare_hellaswag refuses: $1" 1 "$2" $PY scripts/convert/prepare_hellaswag.py "$3" "$tmp/out.bin"
    [ "$(cat "$tmp/out.bin")" = precious ] || fail "prepare_hellaswag refuses: $1" "the existing output was changed"
}
prep_refuse "missing jsonl" "^error: $tmp/none.jsonl: cannot open" "$tmp/none.jsonl"
{ head -n 2 "$tmp/items.jsonl"; echo '{"ctx": "x", "endings": ["a"'; } > "$tmp/badjson.jsonl"
prep_refuse "a line that is not JSON" "badjson.jsonl: line 3: not JSON" "$tmp/badjson.jsonl"
echo '{"ctx": "x", "label": 0}' > "$tmp/nokey.jsonl"
prep_refuse "no endings" "nokey.jsonl: line 1: no \"endings\"" "$tmp/nokey.jsonl"
echo '{"ctx": "x", "endings": ["a", "b", "c", "d"], "label": 4}' > "$tmp/label.jsonl"
prep_refuse "label out of range" "label.jsonl: line 1: \"label\" 4 is not an index into its 4 endings" "$tmp/label.jsonl"
: > "$tmp/empty.jsonl"
prep_refuse "no examples" "empty.jsonl: no examples" "$tmp/empty.jsonl"

# ----------------------------------------------------------------------------
# Mutants: one deliberate bug each in a copy of the sources must fail the comparison with PyTorch.
# Each line: file | sed expression | what
EVAL_MUTANTS=(
    "llmc/hellaswag.h|s/s += losses\[ex->ctx_len + i - 1\];/s += losses[ex->ctx_len + i];/|each ending token's loss taken one position late"
    "llmc/hellaswag.h|s#mean\[k\] = s / ex->end_len\[k\];#mean[k] = s / (ex->end_len[k] + 1);#|the mean over one token too many"
    "llmc/hellaswag.h|s/if (mean\[k\] < mean\[pn\]) { pn = k; }/if (sum[k] < sum[pn]) { pn = k; }/|acc_norm picked by the sum instead of the mean"
    "scripts/convert/prepare_hellaswag.py|s/texts += \[\" \" + e for e in endings\]/texts += [e for e in endings]/|endings tokenized without llm.c's leading space"
)
for entry in "${EVAL_MUTANTS[@]}"; do
    IFS='|' read -r file expr what <<< "$entry"
    # TEST_QUICK=1 (make test): the first mutant only
    [ "${TEST_QUICK:-0}" = 1 ] && [ "$entry" != "${EVAL_MUTANTS[0]}" ] && continue
    dir=$tmp/mutant
    rm -rf "$dir" && mkdir -p "$dir/scripts/convert"
    cp -r Makefile eval.c llmc "$dir/" && cp scripts/convert/prepare_hellaswag.py scripts/convert/hf_gpt2.py "$dir/scripts/convert/"
    sed -i "$expr" "$dir/$file"
    if cmp -s "$file" "$dir/$file"; then fail "mutant: $what" "the sed expression no longer matches $file"; continue; fi
    if [ "${file%.h}" != "$file" ]; then  # a scoring mutant: the same items, the reference's scores from above
        if ! out=$(nice -n 15 make -s -C "$dir" eval 2>&1); then fail "mutant: $what" "does not compile: $(printf '%s' "$out" | head -n 2)"; continue; fi
        "$dir/eval" -e "$model" --hellaswag "$tmp/items.bin" --verbose 1 > "$dir/ours.txt" 2>&1
        cp "$tmp/ref.txt" "$dir/ref.txt"
    else  # a data mutant: our eval on its file; the reference checks the file against its own rendering
        $PY "$dir/scripts/convert/prepare_hellaswag.py" "$tmp/items.jsonl" "$dir/items.bin" --tokenize ./tokenize \
            --vocab data/gpt2 > /dev/null
        ./eval -e "$model" --hellaswag "$dir/items.bin" --verbose 1 > "$dir/ours.txt" 2>&1
        $PY scripts/reference/eval_reference.py --model "$model" --jsonl "$tmp/items.jsonl" --evalfile "$dir/items.bin" \
            > "$dir/ref.txt" 2>&1
    fi
    if out=$(compare "$dir/ours.txt" "$dir/ref.txt" 2>&1); then
        fail "mutant caught: $what" "the comparison still passes: $out"
    else
        pass "mutant caught: $what ($(printf '%s' "$out" | tail -n 1 | cut -c1-120))"
    fi
done

# --precision bf16: the same loss within bf16 rounding of the matmul operands (a loss of
# ~5 moves by ~1e-3 relative; an unrounded or a broken path would be 0 or far off)
fp32=$(./eval -e "$model" -j "$VAL" -b 2 -t 64 -m 5 | sed -n 's/^val loss \([0-9.]*\) .*/\1/p')
bf16=$(./eval -e "$model" -j "$VAL" -b 2 -t 64 -m 5 --precision bf16 | sed -n 's/^val loss \([0-9.]*\) .*/\1/p')
if awk -v a="$fp32" -v b="$bf16" 'BEGIN { d = (a - b) / a; if (d < 0) d = -d; exit !(a != b && d < 1e-2) }'; then
    pass "eval --precision bf16: val loss $bf16 against fp32 $fp32 (differs, within 1%)"
else
    fail "eval --precision bf16" "val loss '$bf16' against fp32 '$fp32'"
fi
expect_error "eval: bad --precision" 2 "^error: --precision: 'fp16' is not fp32 or bf16" ./eval -e "$model" -j "$VAL" --precision fp16
