# train_gpt2 from the shell: flags, logs, learning, determinism, bad input.
# Uses the small "odd" reference model (V=517) and a synthetic dataset.
set -u
source scripts/tests/testlib.sh
PY=$PWD/.venv/bin/python

model=data/ref/odd/model.bin
if [ ! -f $model ]; then
    fail "train tests" "$model is missing (scripts/tests/test_gpt2.sh writes it)"
    exit 0
fi
data=data/synth
$PY scripts/reference/make_synthetic_data.py --out $data --vocab 517 --tokens 20000
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

# --- make help: one line for every target the Makefile names (pattern rules aside)
declared=$(grep -oE '^[a-zA-Z0-9_-][a-zA-Z0-9_.-]*:' Makefile | tr -d : | sort | tr '\n' ' ')
listed=$(make -s help | awk '{ print $1 }' | sort | tr '\n' ' ')
[ -n "$declared" ] && [ "$listed" = "$declared" ] && pass "make help lists every target ($(echo $listed | wc -w))" \
    || fail "make help" "targets: $declared; listed: $listed"

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

# --- token and step counts past 32 bits: -d goes up to 2^40 tokens per step; the
# accumulation count (2^35 micro-batches of B*T = 32, or 2^40 of one token) and the tokens
# per step must be counted in 64 bits. The run's first line tells; its first step would never
# end, so it is stopped once the line is out.
first_plan_line() {  # first_plan_line OUT ARGS...: runs the trainer until its "threads:" line
    local out=$1; shift
    ./train_gpt2 -e $model -i "$data/synth_train_*.bin" -v 0 -s 0 "$@" > "$out" 2>&1 &
    local pid=$! i
    for i in $(seq 300); do
        grep -q '^threads:' "$out" && break
        kill -0 $pid 2> /dev/null || break
        sleep 0.1
    done
    kill -KILL $pid 2> /dev/null; wait $pid 2> /dev/null
    local rc=$?
    grep -m1 '^threads:' "$out" || echo "no plan line (exit $rc): $(tail -n 1 "$out")"
}
line=$(first_plan_line "$tmp/d40.out" -b 1 -t 32 -d 1099511627776 -x 1)
case "$line" in *"B=1 T=32, 34359738368 accumulation steps = 1099511627776 tokens per step | 1 steps"*)
    pass "-d 2^40: 2^35 accumulation steps and the tokens per step counted in 64 bits";;
    *) fail "-d 2^40 with B*T = 32" "$line";; esac
line=$(first_plan_line "$tmp/d40x.out" -b 1 -t 1 -d 1099511627776 -x -1)
case "$line" in *"B=1 T=1, 1099511627776 accumulation steps = 1099511627776 tokens per step | 1 steps"*)
    pass "-d 2^40 with B*T = 1 and -x -1: 2^40 accumulation steps, one step (less than an epoch)";;
    *) fail "-d 2^40 with B*T = 1, -x -1" "$line";; esac

# --- GPT-2 XL's sizes (d48) computed without overflow and without allocating it (--dry-run):
# the parameter count against GPT-2 XL's known 1,557,611,200 (V=50257; ours pads wte to
# 50304 rows), the activations and the arena (38 GB) against exact integer arithmetic
xl_sizes() {  # xl_sizes RECOMPUTE: what --dry-run must print for d48 at B=4, T=1024
    $PY - "$1" <<'EOF'
import sys
recompute = int(sys.argv[1])
L, C, NH, maxT, V, Vp, B, T = 48, 1600, 25, 1024, 50257, 50304, 4, 1024
params = [Vp*C, maxT*C] + [L*n for n in (C, C, 3*C*C, 3*C, C*C, C, C, C, 4*C*C, 4*C, 4*C*C, C)] + [C, C]
assert sum(params) - (Vp - V) * C == 1557611200  # GPT-2 XL
N, Lk = B*T, 1 if recompute else L
acts = [N*C, Lk*N*C, Lk*N, Lk*N, Lk*N*3*C, Lk*NH*N, Lk*N*C, Lk*N*C, Lk*N*C, Lk*N, Lk*N, Lk*N*4*C, Lk*N*4*C, L*N*C,
        N*C, N, N, N, min(N, 256)*Vp, N*C, N*C, N*C, N*3*C, N*4*C]
P, A = (sum((n + 15) // 16 * 16 for n in sizes) for sizes in (params, acts))
print(f"{sum(params)} parameters|sizes: {P} parameter floats with alignment gaps, {A} activation floats, "
      f"AdamW m and v {P} floats each, arena {(4*P + A) * 4} bytes")
EOF
}
for recompute in 0 1; do
    want=$(xl_sizes $recompute)
    out=$(./train_gpt2 -e d48 -b 4 -t 1024 -i "$data/synth_train_*.bin" -v 0 -s 0 --recompute $recompute --dry-run 1 2>&1)
    if printf '%s\n' "$out" | grep -qF "${want%%|*}" && printf '%s\n' "$out" | grep -qxF "${want#*|}" && \
       printf '%s\n' "$out" | grep -q '^dry run: nothing allocated'; then
        pass "d48 (GPT-2 XL) sizes, --recompute $recompute: ${want#*sizes: }"
    else
        fail "d48 sizes, --recompute $recompute" "want '$want', got: $(printf '%s' "$out" | grep -E '^(model|sizes|error)' | tr '\n' '|')"
    fi
done

# --- --recompute 1 (each block's forward re-run before its backward) is the same arithmetic
# as --recompute 0: bit-identical losses, validation losses, samples, parameters and AdamW
# state after 10 steps, in fp32 and bf16. On the 3-layer "chunks" model, so that two layers
# are recomputed (the last one's activations are still there from the forward).
chunks=data/ref/chunks/model.bin
# recompute_run BIN PRECISION RECOMPUTE DIR: 10 steps with validation, samples and a checkpoint
recompute_run() {
    "$1" -e $chunks -i "$data/synth_train_*.bin" -j "$data/synth_val_*.bin" -b 4 -t 32 -x 10 -v 5 -m 2 \
        -s 5 -g 8 -n 10 --precision "$2" --recompute "$3" -o "$4" > "$4.out" 2>&1
}
# same_run DIR_A DIR_B: the checkpoints, main.log and stdout (less timings, memory, paths) agree;
# the bf16 banner's "vdpbf16ps measured at 0.50x ..." is a timing too (precision.h's start-up
# measurement: 0.49 or 0.50 from run to run on an Intel Xeon)
same_run() {
    local quiet=(-e ' ms ' -e '^peak RSS' -e '^memory' -e ': checkpoint ' -e 'vdpbf16ps measured at ')
    cmp -s "$1/model_00000010.bin" "$2/model_00000010.bin" && cmp -s "$1/state_00000010.bin" "$2/state_00000010.bin" &&
        diff <(sed 's/ ms:.*//' "$1/main.log") <(sed 's/ ms:.*//' "$2/main.log") > /dev/null &&
        diff <(grep -v "${quiet[@]}" "$1.out") <(grep -v "${quiet[@]}" "$2.out") > /dev/null
}
if [ ! -f $chunks ]; then
    fail "--recompute tests" "$chunks is missing (scripts/tests/test_gpt2.sh writes it)"
else
    expect_error "--recompute 2" 2 "^error: --recompute: 2 is outside 0\.\.1" ./train_gpt2 --recompute 2
    for precision in fp32 bf16; do
        recompute_run ./train_gpt2 $precision 0 "$tmp/rc0_$precision"
        recompute_run ./train_gpt2 $precision 1 "$tmp/rc1_$precision"
        if [ "$(grep -c ' trl:' "$tmp/rc0_$precision/main.log")" -eq 10 ] && same_run "$tmp/rc0_$precision" "$tmp/rc1_$precision"; then
            pass "--recompute 1 is bit-identical to --recompute 0 over 10 steps, $precision (checkpoints, losses, samples)"
        else
            fail "--recompute 1 bit-identical, $precision" "$(tail -n 1 "$tmp/rc1_$precision.out")"
        fi
    done
    a0=$(sed -n 's/.*activations \([0-9.]*\) MiB (B=4, T=32)$/\1/p' "$tmp/rc0_fp32.out")
    a1=$(sed -n 's/.*activations \([0-9.]*\) MiB (B=4, T=32; each block recomputed in the backward)$/\1/p' "$tmp/rc1_fp32.out")
    # of the per-layer tensors, all but residual3 (the blocks' inputs) hold one layer instead of 3
    awk -v a="$a0" -v b="$a1" 'BEGIN { exit !(a != "" && b != "" && b < a * 0.8) }' \
        && pass "--recompute 1 allocates less activation memory ($a0 -> $a1 MiB)" || fail "--recompute memory" "'$a0' -> '$a1' MiB"

    # Mutants: a copy of the sources with one deliberate bug each must break the bit-identity.
    RECOMPUTE_MUTANTS=(
        "s/if (model->recompute \&\& l < L - 1) { block_forward(model, l, B, T, 1); }/if (0) { }/|the backward skips the recompute (stale activations of the last layer)"
        "s/if (model->recompute \&\& l < L - 1) { block_forward(model, l, B, T, 1); }/if (model->recompute \&\& l < L - 1) { block_forward(model, l + 1, B, T, 1); }/|the recompute re-runs the layer above"
    )
    # build_mutant FILE EXPR WHAT: a copy of the sources in build/mutant, EXPR applied to FILE,
    # its train_gpt2 built; 1 (a failure reported) where EXPR no longer matches or it does not compile
    build_mutant() {
        local file=$1 expr=$2 what=$3 dir=build/mutant out
        rm -rf "$dir" "$tmp/mutant" "$tmp/mutant.out" && mkdir -p "$dir" && cp -r Makefile train_gpt2.c llmc "$dir/"
        sed -i "$expr" "$dir/$file"
        if cmp -s "$file" "$dir/$file"; then fail "mutant: $what" "the sed expression no longer matches $file"; return 1; fi
        if ! out=$(make -s -C "$dir" train_gpt2 2>&1); then
            fail "mutant: $what" "does not compile: $(printf '%s' "$out" | head -n 2 | tr '\n' ' ')"; return 1
        fi
    }
    for entry in "${RECOMPUTE_MUTANTS[@]}"; do
        IFS='|' read -r expr what <<< "$entry"
        # TEST_QUICK=1 (make test): the first mutant only
        [ "${TEST_QUICK:-0}" = 1 ] && [ "$entry" != "${RECOMPUTE_MUTANTS[0]}" ] && continue
        build_mutant llmc/gpt2.h "$expr" "$what" || continue
        recompute_run build/mutant/train_gpt2 fp32 1 "$tmp/mutant"
        if same_run "$tmp/rc0_fp32" "$tmp/mutant"; then fail "mutant caught: $what" "still bit-identical"
        else pass "mutant caught: $what (the run differs from --recompute 0)"; fi
    done

    # --- bf16 training packs the weights from the bf16 copy AdamW writes (llmc/gpt2.h,
    # params_bf16): bit-identical to rounding the fp32 weights in every product
    # (LLMC_BF16_WEIGHTS=0) over 10 steps, on the fastest bf16 path and the emulated one; and
    # a copy truncated instead of rounded by AdamW must break it (the first step, whose copy is
    # rounded from the loaded weights, still agrees).
    LLMC_BF16_WEIGHTS=0 recompute_run ./train_gpt2 bf16 0 "$tmp/w16off_bf16"
    if [ "$(grep -c ' trl:' "$tmp/w16off_bf16/main.log")" -eq 10 ] && same_run "$tmp/rc0_bf16" "$tmp/w16off_bf16"; then
        pass "bf16 weights from AdamW's bf16 copy are bit-identical to LLMC_BF16_WEIGHTS=0 over 10 steps (checkpoints, losses, samples)"
    else
        fail "bf16 copy of the weights bit-identical to LLMC_BF16_WEIGHTS=0" "$(tail -n 1 "$tmp/w16off_bf16.out")"
    fi
    LLMC_BF16_PATH=emulated recompute_run ./train_gpt2 bf16 1 "$tmp/w16on_emu"
    LLMC_BF16_PATH=emulated LLMC_BF16_WEIGHTS=0 recompute_run ./train_gpt2 bf16 1 "$tmp/w16off_emu"
    if [ "$(grep -c ' trl:' "$tmp/w16on_emu/main.log")" -eq 10 ] && same_run "$tmp/w16on_emu" "$tmp/w16off_emu"; then
        pass "bf16 weights from the copy bit-identical to LLMC_BF16_WEIGHTS=0 on the emulated path, --recompute 1"
    else
        fail "bf16 copy of the weights bit-identical on the emulated path" "$(tail -n 1 "$tmp/w16on_emu.out")"
    fi
    what="AdamW writes the bf16 copy truncated instead of rounded to nearest-even"
    # (both stores: the non-temporal one of whole vectors, and the plain one of a tensor's tail)
    if build_mutant llmc/adamw.h 's/vec_put_bf16(params16 + i, np, k, c->stream16, c->ftz16);/vec_put_bf16(params16 + i, (vfloat)((vint)np \& (int32_t)0xffff0000u), k, c->stream16, c->ftz16);/' "$what"; then
        recompute_run build/mutant/train_gpt2 bf16 0 "$tmp/mutant"
        if same_run "$tmp/w16off_bf16" "$tmp/mutant"; then fail "mutant caught: $what" "still bit-identical"
        elif [ "$(sed -n 's/^s:0 trl:\([^ ]*\) .*/\1/p' "$tmp/mutant/main.log")" != "$(sed -n 's/^s:0 trl:\([^ ]*\) .*/\1/p' "$tmp/w16off_bf16/main.log")" ]; then
            fail "mutant caught: $what" "step 0 differs too: the mutant should change AdamW's copy only"
        else pass "mutant caught: $what (step 0 agrees, the run differs after)"; fi
    fi

    # --- the blocks' weights kept packed for their input gradients' products (gpt2.h's
    # weight_panels, LLMC_WEIGHT_PANELS, on by default on AMX), written by AdamW a pair of rows at
    # a time: bit-identical to packing them from the bf16 copy over 10 steps, on the kernels with
    # such panels (vdpbf16ps, AMX) where the CPU has them; and AdamW leaving them as they were
    # packed before the first step must break it (the first step still agrees).
    if grep -q avx512_bf16 /proc/cpuinfo; then
        for path in avx512bf16 $(grep -q amx_bf16 /proc/cpuinfo && echo amx); do
            LLMC_BF16_PATH=$path LLMC_WEIGHT_PANELS=1 recompute_run ./train_gpt2 bf16 0 "$tmp/panels1_$path"
            LLMC_BF16_PATH=$path LLMC_WEIGHT_PANELS=0 recompute_run ./train_gpt2 bf16 0 "$tmp/panels0_$path"
            if [ "$(grep -c ' trl:' "$tmp/panels1_$path/main.log")" -eq 10 ] && same_run "$tmp/panels0_$path" "$tmp/panels1_$path"; then
                pass "weights kept packed for their input gradients (LLMC_WEIGHT_PANELS=1) bit-identical to packing them from the copy over 10 steps, path $path"
            else
                fail "weight panels bit-identical to LLMC_WEIGHT_PANELS=0, path $path" "$(tail -n 1 "$tmp/panels1_$path.out")"
            fi
        done
        what="AdamW not writing the weight panels (left as packed before the first step)"
        if build_mutant llmc/adamw.h 's/sink->fn(sink->ctx, (int)p, (int)c0, (int)n, bits\[0\], two ? bits\[1\] : NULL);//' "$what"; then
            LLMC_BF16_PATH=avx512bf16 LLMC_WEIGHT_PANELS=1 recompute_run build/mutant/train_gpt2 bf16 0 "$tmp/mutant"
            if same_run "$tmp/panels0_avx512bf16" "$tmp/mutant"; then fail "mutant caught: $what" "still bit-identical"
            elif [ "$(sed -n 's/^s:0 trl:\([^ ]*\) .*/\1/p' "$tmp/mutant/main.log")" != "$(sed -n 's/^s:0 trl:\([^ ]*\) .*/\1/p' "$tmp/panels0_avx512bf16/main.log")" ]; then
                fail "mutant caught: $what" "step 0 differs too: the mutant should change the panels after AdamW only"
            else pass "mutant caught: $what (step 0 agrees, the run differs after)"; fi
        fi
        what="every layer's input gradient reading layer 0's weight panels (gpt2_panels)"
        if build_mutant llmc/gpt2.h 's/return model->weight_panels + model->weight_panels_at\[i\] + (size_t)l \* model->weight_panels_words\[i\];/return model->weight_panels + model->weight_panels_at[i];/' "$what"; then
            LLMC_BF16_PATH=avx512bf16 LLMC_WEIGHT_PANELS=1 recompute_run build/mutant/train_gpt2 bf16 0 "$tmp/mutant"
            if same_run "$tmp/panels0_avx512bf16" "$tmp/mutant"; then fail "mutant caught: $what" "still bit-identical"
            else pass "mutant caught: $what"; fi
        fi
    else
        pass "weight panels skipped: this CPU has no AVX512_BF16, so no kernel with pair-word panels (vdpbf16ps, AMX) runs here"
    fi

    # bf16_bits_switch VAR STEM WHAT: a tensor bf16 training may write as bf16 bits (VAR=1; VAR=0:
    # as floats, which the products' packing rounds; unset: the kernel's default) is bit-identical
    # both ways over 10 steps (checkpoints, losses, samples), on the fastest bf16 path and on the
    # emulated one with --recompute 1; the runs with VAR=0 are left in $tmp/STEM_off_fastest and
    # $tmp/STEM_off_emulated; VAR=2 is refused.
    bf16_bits_switch() {
        local var=$1 stem=$2 what=$3 path on rc
        for path in fastest emulated; do
            rc=0; [ $path = emulated ] && rc=1
            for on in 1 0; do
                (export "$var=$on"; [ $path = emulated ] && export LLMC_BF16_PATH=emulated
                 recompute_run ./train_gpt2 bf16 $rc "$tmp/${stem}_$([ $on = 1 ] && echo on || echo off)_$path")
            done
            if [ "$(grep -c ' trl:' "$tmp/${stem}_off_$path/main.log")" -eq 10 ] &&
                same_run "$tmp/${stem}_on_$path" "$tmp/${stem}_off_$path"; then
                pass "bf16 $what: $var=1 bit-identical to $var=0 over 10 steps (checkpoints, losses, samples), $path path, --recompute $rc"
            else
                fail "bf16 $what: $var=1 bit-identical to $var=0, $path path" "$(tail -n 1 "$tmp/${stem}_on_$path.out")"
            fi
        done
        expect_error "$var=2" 1 "^error: $var=2: expected 0" env "$var=2" \
            ./train_gpt2 -e $chunks -i "$data/synth_train_*.bin" -j "$data/synth_val_*.bin" -b 4 -t 32 -x 1 --precision bf16
    }

    # --- bf16 training writes the classifier's dlogits as bf16 bits, which the head's backward
    # products pack from (llmc/classifier.h); dlogits written without the target's -1 (times
    # dloss) must break it.
    bf16_bits_switch LLMC_BF16_DLOGITS dl32 "dlogits written as bf16 bits"
    what="the classifier's bf16 dlogits without the target's term"
    if build_mutant llmc/classifier.h 's/{ x\[t - v\] -= dloss; }/{ }/' "$what"; then
        LLMC_BF16_DLOGITS=1 recompute_run build/mutant/train_gpt2 bf16 0 "$tmp/mutant"
        if same_run "$tmp/dl32_off_fastest" "$tmp/mutant"; then fail "mutant caught: $what" "still bit-identical"
        else pass "mutant caught: $what (the run differs from LLMC_BF16_DLOGITS=0)"; fi
    fi

    # bias_pass_mutants REF VAR 'SED|WHAT'...: each mutant of llmc/matmul.h (bf16, VAR=1, 10 steps)
    # must differ from the run with VAR=0 in $tmp/REF.
    bias_pass_mutants() {
        local ref=$1 var=$2 entry expr what; shift 2
        for entry in "$@"; do
            IFS='|' read -r expr what <<< "$entry"
            if build_mutant llmc/matmul.h "$expr" "$what"; then
                (export "$var=1"; recompute_run build/mutant/train_gpt2 bf16 0 "$tmp/mutant")
                if same_run "$tmp/$ref" "$tmp/mutant"; then fail "mutant caught: $what" "still bit-identical"
                else pass "mutant caught: $what (the run differs from $var=0)"; fi
            fi
        done
    }

    # --- bf16 training writes the MLP's dfch as bf16 bits alone and sums fc's bias gradient in the
    # same pass (llmc/matmul.h's matmul_backward_bias_bf16 with GELU), where LLMC_BF16_DFCH=0 writes
    # the floats and matmul_backward_bias sums them; the bias summed from values truncated to bf16,
    # and the bits truncated instead of rounded, must break it.
    bf16_bits_switch LLMC_BF16_DFCH dfch32 "dfch written as bf16 bits with fc's bias gradient in the same pass"
    bias_pass_mutants dfch32_off_fastest LLMC_BF16_DFCH \
        's/sum\[(c - b0) \/ VEC_WIDTH\] += g;/sum[(c - b0) \/ VEC_WIDTH] += gelu ? (vfloat)((vint)g \& (int32_t)0xffff0000u) : g;/|fc'"'"'s bias gradient summed from dfch truncated to bf16, not from the floats' \
        's/vec_bf16_bits_operand(g, ftz)/vec_bf16_bits_operand(gelu ? (vfloat)((vint)g \& (int32_t)0xffff0000u) : g, ftz)/|dfch'"'"'s bf16 bits truncated instead of rounded'

    # --- qkv's bias pass also writes attention's dqkv as bf16 bits, which qkv's products read
    # (the same matmul_backward_bias_bf16, without GELU), where LLMC_BF16_DQKV=0 they pack the
    # floats and matmul_backward_bias sums them; the same two faults in the pass without GELU must
    # break it.
    bf16_bits_switch LLMC_BF16_DQKV dqkv32 "dqkv's bf16 bits made in qkv's bias pass"
    bias_pass_mutants dqkv32_off_fastest LLMC_BF16_DQKV \
        's/sum\[(c - b0) \/ VEC_WIDTH\] += g;/sum[(c - b0) \/ VEC_WIDTH] += gelu ? g : (vfloat)((vint)g \& (int32_t)0xffff0000u);/|qkv'"'"'s bias gradient summed from dqkv truncated to bf16, not from the floats' \
        's/vec_bf16_bits_operand(g, ftz)/vec_bf16_bits_operand(gelu ? g : (vfloat)((vint)g \& (int32_t)0xffff0000u), ftz)/|dqkv'"'"'s bf16 bits truncated instead of rounded'

    # --- the gradient norm summed block by block as the backward pass finishes the gradients
    # (llmc/gpt2.h, GradNormSums) is the pass after the backward, bit for bit
    # (LLMC_NORM_IN_BACKWARD=0): fp32 and bf16, 10 steps; and a block's slice summed one layer
    # early (before that layer's backward writes it) must break it.
    for precision in fp32 bf16; do
        LLMC_NORM_IN_BACKWARD=0 recompute_run ./train_gpt2 $precision 0 "$tmp/normoff_$precision"
        if [ "$(grep -c ' trl:' "$tmp/normoff_$precision/main.log")" -eq 10 ] && same_run "$tmp/rc0_$precision" "$tmp/normoff_$precision"; then
            pass "gradient norm summed during the backward is bit-identical to LLMC_NORM_IN_BACKWARD=0 over 10 steps, $precision"
        else
            fail "gradient norm summed during the backward bit-identical to the pass after it, $precision" "$(tail -n 1 "$tmp/normoff_$precision.out")"
        fi
    done
    for env in 1 0; do  # with two micro-batches a step: the sums follow the second's backward only
        LLMC_NORM_IN_BACKWARD=$env ./train_gpt2 -e $chunks -i "$data/synth_train_*.bin" -j "$data/synth_val_*.bin" -b 4 -t 32 \
            -d 256 -x 4 -v 0 -s 0 -n 4 -o "$tmp/normacc_$env" > "$tmp/normacc_$env.out" 2>&1
    done
    if cmp -s "$tmp/normacc_1/state_00000004.bin" "$tmp/normacc_0/state_00000004.bin" &&
       diff <(sed 's/ ms:.*//' "$tmp/normacc_1/main.log") <(sed 's/ ms:.*//' "$tmp/normacc_0/main.log") > /dev/null &&
       [ "$(grep -c ' trl:' "$tmp/normacc_1/main.log")" -eq 4 ]; then
        pass "gradient norm summed during the backward bit-identical to the pass after it with 2 micro-batches a step (-d 256)"
    else
        fail "gradient norm summed during the backward, 2 micro-batches a step" "$(tail -n 1 "$tmp/normacc_1.out")"
    fi
    what="the gradient norm's blocks of a layer summed one layer early, before its backward writes them"
    if build_mutant llmc/gpt2_update.h 's/return L - (int)((pos - t0) \/ (model->param_sizes\[i\] \/ (size_t)L));/return L - 1 - (int)((pos - t0) \/ (model->param_sizes[i] \/ (size_t)L));/' "$what"; then
        recompute_run build/mutant/train_gpt2 fp32 0 "$tmp/mutant"
        if same_run "$tmp/rc0_fp32" "$tmp/mutant"; then fail "mutant caught: $what" "still bit-identical"
        else pass "mutant caught: $what"; fi
    fi
    # the products sum the blocks of the rows they finish (gemm.h's on_final); wte's rows of the
    # batch's tokens must wait for the encoder's backward
    what="the gradient norm's blocks of wte's token rows summed by the classifier's product, before the encoder's backward adds to them"
    if build_mutant llmc/gpt2_update.h 's/if (g->wte_late\[r \/ 64\] >> (r % 64) \& 1) { return 1; }/(void)g;/' "$what"; then
        recompute_run build/mutant/train_gpt2 fp32 0 "$tmp/mutant"
        if same_run "$tmp/rc0_fp32" "$tmp/mutant"; then fail "mutant caught: $what" "still bit-identical"
        else pass "mutant caught: $what"; fi
    fi

    # --- software prefetches in AdamW and GELU's backward (utils.h's soft_prefetch_enabled: on
    # Intel's CPUs by default) change the speed only: forced off and on, 10 bf16 steps agree
    for pf in 0 1; do LLMC_SOFT_PREFETCH=$pf recompute_run ./train_gpt2 bf16 0 "$tmp/softpf_$pf"; done
    if [ "$(grep -c ' trl:' "$tmp/softpf_0/main.log")" -eq 10 ] && same_run "$tmp/softpf_0" "$tmp/softpf_1"; then
        pass "LLMC_SOFT_PREFETCH=0 and =1 bit-identical over 10 bf16 steps (checkpoints, losses, samples)"
    else
        fail "LLMC_SOFT_PREFETCH=0 and =1 bit-identical" "$(tail -n 1 "$tmp/softpf_1.out")"
    fi
    expect_error "LLMC_SOFT_PREFETCH=2 refused" 1 "^error: LLMC_SOFT_PREFETCH=2: expected 0 .* or 1$" \
        env LLMC_SOFT_PREFETCH=2 ./train_gpt2 -e $chunks -i "$data/synth_train_*.bin" -j "$data/synth_val_*.bin" -b 4 -t 32 -x 1

    # --- the threads' copies of each other's packed A dropped after a product (gemm.h's
    # gemm_flush_shared_a_enabled: on AMD's CPUs by default) change the speed only
    if grep -qw clflushopt /proc/cpuinfo; then
        for fl in 0 1; do LLMC_FLUSH_SHARED_A=$fl recompute_run ./train_gpt2 bf16 0 "$tmp/flush_$fl"; done
        if [ "$(grep -c ' trl:' "$tmp/flush_0/main.log")" -eq 10 ] && same_run "$tmp/flush_0" "$tmp/flush_1"; then
            pass "LLMC_FLUSH_SHARED_A=0 and =1 bit-identical over 10 bf16 steps (checkpoints, losses, samples)"
        else
            fail "LLMC_FLUSH_SHARED_A=0 and =1 bit-identical" "$(tail -n 1 "$tmp/flush_1.out")"
        fi
    else
        expect_error "LLMC_FLUSH_SHARED_A=1 refused without CLFLUSHOPT" 1 "^error: LLMC_FLUSH_SHARED_A=1: this CPU has no CLFLUSHOPT$" \
            env LLMC_FLUSH_SHARED_A=1 ./train_gpt2 -e $chunks -i "$data/synth_train_*.bin" -j "$data/synth_val_*.bin" -b 4 -t 32 -x 1
    fi
    expect_error "LLMC_FLUSH_SHARED_A=2 refused" 1 "^error: LLMC_FLUSH_SHARED_A=2: expected 0 .* or 1$" \
        env LLMC_FLUSH_SHARED_A=2 ./train_gpt2 -e $chunks -i "$data/synth_train_*.bin" -j "$data/synth_val_*.bin" -b 4 -t 32 -x 1

    # --- AdamW's step run by the next forward pass, beside its first blocks (gpt2_update.h's
    # gpt2_update_defer: on AMD's CPUs with two threads by default) changes the speed only, also
    # where validation, samples and checkpoints come between the steps and with two accumulated
    # micro-batches a step (the zeroing of the gradients waits for the update); samples at steps 3, 6 and
    # 9 with no validation before them (the sample's weights are the updated ones)
    for precision in fp32 bf16; do
        for ov in 0 1; do
            OMP_NUM_THREADS=2 LLMC_OVERLAP_UPDATE=$ov ./train_gpt2 -e $chunks -i "$data/synth_train_*.bin" -j "$data/synth_val_*.bin" \
                -b 4 -t 32 -x 10 -v 5 -m 2 -s 3 -g 8 -n 10 --precision $precision -o "$tmp/ov${ov}_$precision" \
                > "$tmp/ov${ov}_$precision.out" 2>&1
        done
        if [ "$(grep -c ' trl:' "$tmp/ov0_$precision/main.log")" -eq 10 ] && same_run "$tmp/ov0_$precision" "$tmp/ov1_$precision"; then
            pass "LLMC_OVERLAP_UPDATE=0 and =1 bit-identical over 10 $precision steps (checkpoints, losses, samples)"
        else
            fail "LLMC_OVERLAP_UPDATE=0 and =1 bit-identical, $precision" "$(tail -n 1 "$tmp/ov1_$precision.out")"
        fi
    done
    for ov in 0 1; do
        OMP_NUM_THREADS=2 LLMC_OVERLAP_UPDATE=$ov ./train_gpt2 -e $chunks -i "$data/synth_train_*.bin" -j "$data/synth_val_*.bin" \
            -b 4 -t 32 -d 256 -x 6 -v 3 -m 2 -s 0 -n 6 -o "$tmp/ova$ov" > "$tmp/ova$ov.out" 2>&1
    done
    if grep -q '2 accumulation steps' "$tmp/ova1.out" && cmp -s "$tmp/ova0/model_00000006.bin" "$tmp/ova1/model_00000006.bin" &&
        cmp -s "$tmp/ova0/state_00000006.bin" "$tmp/ova1/state_00000006.bin" &&
        diff <(sed 's/ ms:.*//' "$tmp/ova0/main.log") <(sed 's/ ms:.*//' "$tmp/ova1/main.log") > /dev/null; then
        pass "LLMC_OVERLAP_UPDATE=0 and =1 bit-identical with 2 accumulated micro-batches a step"
    else
        fail "LLMC_OVERLAP_UPDATE with accumulation" "$(grep -m1 'accumulation\|error' "$tmp/ova1.out")"
    fi
    expect_error "LLMC_OVERLAP_UPDATE=2 refused" 1 "^error: LLMC_OVERLAP_UPDATE=2: expected 0 .* or 1 .*$" \
        env OMP_NUM_THREADS=2 LLMC_OVERLAP_UPDATE=2 ./train_gpt2 -e $chunks -i "$data/synth_train_*.bin" -j "$data/synth_val_*.bin" -b 4 -t 32 -x 2

    # --- the arena in transparent huge pages (utils.h's arena_alloc_or_die marks it MADV_HUGEPAGE):
    # where the kernel backs only marked regions ("madvise") and backs a marked mapping of this
    # process's, a running trainer's memory holds huge pages; without the mark (a mutant), none.
    # arena_huge_kb BIN: AnonHugePages (kB) of BIN's process once it has trained a step (its arena
    # is allocated and first touched before that), 0 if no step came within 10 s
    arena_huge_kb() {
        local pid kb=0
        "$1" -e $chunks -i "$data/synth_train_*.bin" -j "$data/synth_val_*.bin" -b 4 -t 32 -x 100000 -v 0 -s 0 \
            > "$tmp/thp.out" 2>&1 & pid=$!
        for _ in $(seq 1 100); do
            if grep -q '^step' "$tmp/thp.out"; then
                kb=$(sed -n 's/^AnonHugePages: *\([0-9]*\) kB$/\1/p' /proc/$pid/smaps_rollup 2>/dev/null); break
            fi
            sleep 0.1
        done
        kill $pid 2>/dev/null; wait $pid 2>/dev/null
        echo "${kb:-0}"
    }
    thp_mode=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)
    thp_probe=$($PY -c '
import mmap, re
m = mmap.mmap(-1, 16 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS); m.madvise(mmap.MADV_HUGEPAGE); m.write(b"\1" * (16 << 20))
print(re.search(r"AnonHugePages:\s+(\d+)", open("/proc/self/smaps_rollup").read()).group(1))' 2>/dev/null)
    if [ "$thp_mode" != madvise ] || [ "${thp_probe:-0}" -eq 0 ]; then
        echo "SKIP the arena in transparent huge pages: the kernel's mode is '${thp_mode:-none}' and a marked 16 MiB mapping got ${thp_probe:-no} kB of them (needs 'madvise' and some)"
    else
        kb=$(arena_huge_kb ./train_gpt2)
        [ "$kb" -gt 0 ] && pass "the arena is in transparent huge pages ($kb kB while training)" ||
            fail "the arena in transparent huge pages" "no AnonHugePages while training ($(tail -n 1 "$tmp/thp.out"))"
        what="the arena not marked for transparent huge pages"
        if [ "${TEST_QUICK:-0}" != 1 ] && build_mutant llmc/utils.h 's/(void)madvise(p, rounded, MADV_HUGEPAGE);/(void)p;/' "$what"; then
            kb=$(arena_huge_kb build/mutant/train_gpt2)
            [ "$kb" -eq 0 ] && pass "mutant caught: $what (no huge pages)" || fail "mutant caught: $what" "$kb kB of huge pages"
        fi
    fi
    rm -rf build/mutant
fi
