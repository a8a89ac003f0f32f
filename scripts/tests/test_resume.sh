# Long-run features of train_gpt2: schedule, accumulation, clipping, data order,
# checkpoints, exact resume (also after SIGKILL), corrupt checkpoints,
# non-finite steps, the loss plot. Uses the small "odd" reference model (V=517).
set -u
source scripts/tests/testlib.sh
PY=$PWD/.venv/bin/python

model=data/ref/odd/model.bin
if [ ! -f $model ]; then fail "resume tests" "$model is missing (scripts/tests/test_gpt2.sh writes it)"; exit 0; fi
data=data/synth
[ -f $data/synth_val_000000.bin ] || $PY scripts/reference/make_synthetic_data.py --out $data --vocab 517 --tokens 20000
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
TRAIN=(./train_gpt2 -e $model -i "$data/synth_train_*.bin" -j "$data/synth_val_*.bin" -b 4 -t 32 -v 0 -s 0)
train() { "${TRAIN[@]}" "$@"; }
field() { sed -n "s/^s:$2 .*$3:\([^ ]*\).*/\1/p" "$1" | head -n 1; }  # field LOG STEP NAME
losses() { grep ' trl:' "$1" | sed 's/ lr:.*//'; }                   # "s:N trl:L" lines

# --- learning-rate schedule
train -x 20 -u 5 -l 1e-3 -q 0.1 -o "$tmp/cos" > /dev/null 2>&1
got="$(field $tmp/cos/main.log 0 lr) $(field $tmp/cos/main.log 4 lr) $(field $tmp/cos/main.log 12 lr) $(field $tmp/cos/main.log 19 lr)"
# warmup 1e-3*1/5, the peak at step 4, cosine halfway (steps 5..19) = 0.55e-3, the end 0.1e-3
[ "$got" = "2.000000e-04 1.000000e-03 5.500000e-04 1.000000e-04" ] && pass "cosine schedule with warmup: $got" \
    || fail "cosine schedule" "got $got"
train -x 20 -u 5 -l 1e-3 -q 0.1 -k linear -o "$tmp/lin" > /dev/null 2>&1
got="$(field $tmp/lin/main.log 12 lr) $(field $tmp/lin/main.log 19 lr)"
[ "$got" = "5.500000e-04 1.000000e-04" ] && pass "linear decay: $got" || fail "linear decay" "got $got"
expect_error "unknown schedule" 2 "^error: -k: 'step' is not cosine, linear or constant" ./train_gpt2 -k step

# --- gradient accumulation: 2 micro-batches of B=2 see the same rows as one of B=4
expect_error "-d not divisible by B*T" 2 "^error: -d: 100 tokens per step is not a multiple of B\*T = 4\*32 = 128" train -d 100
train -x 2 --shuffle 0 -o "$tmp/b4" > /dev/null 2>&1
./train_gpt2 -e $model -i "$data/synth_train_*.bin" -b 2 -t 32 -d 128 -v 0 -s 0 -x 2 --shuffle 0 -o "$tmp/acc" > "$tmp/acc.out" 2>&1
a="$(field $tmp/b4/main.log 0 trl) $(field $tmp/b4/main.log 1 trl)"
b="$(field $tmp/acc/main.log 0 trl) $(field $tmp/acc/main.log 1 trl)"
if awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ");
        exit !(x[1] != "" && y[2] != "" && (x[1]-y[1])^2 < 1e-10 && (x[2]-y[2])^2 < 1e-10) }' && grep -q "2 accumulation steps = 128 tokens" "$tmp/acc.out"; then
    pass "accumulating 2 x B=2 equals one B=4 step ($a vs $b)"
else
    fail "gradient accumulation" "B=4: $a, 2 x B=2: $b"
fi

# --- clipping: with a norm bound of 1e-12, Adam's steps shrink below eps and the loss of
# a repeated batch stays put; unclipped, it falls
$PY -c "
import numpy as np
h = np.zeros(256, np.int32); h[:3] = [20240520, 1, 129]
open('$tmp/one_batch.bin', 'wb').write(h.tobytes() + (np.arange(129) % 500).astype(np.uint16).tobytes())"
one() { ./train_gpt2 -e $model -i "$tmp/one_batch.bin" -b 4 -t 32 -v 0 -s 0 -x 5 -l 1e-3 "$@"; }
one --grad-clip 1e-12 -o "$tmp/clip" > /dev/null 2>&1
one --grad-clip 0 -o "$tmp/noclip" > /dev/null 2>&1
c0=$(field $tmp/clip/main.log 0 trl); c4=$(field $tmp/clip/main.log 4 trl); n4=$(field $tmp/noclip/main.log 4 trl)
awk -v c0="$c0" -v c4="$c4" -v n4="$n4" 'BEGIN { exit !(c0 != "" && (c0-c4)^2 < 1e-6 && n4 < c0 - 0.05) }' \
    && pass "clipping bounds the update (clipped $c0 -> $c4, unclipped -> $n4)" \
    || fail "clipping" "clipped $c0 -> $c4, unclipped -> $n4"

# --- data order: shuffled by seed, sorted without shuffling, epochs announced
train -x 2 --seed 1 -o "$tmp/s1" > /dev/null 2>&1; train -x 2 --seed 2 -o "$tmp/s2" > /dev/null 2>&1
train -x 2 --seed 1 --shuffle 0 -o "$tmp/u1" > /dev/null 2>&1; train -x 2 --seed 2 --shuffle 0 -o "$tmp/u2" > /dev/null 2>&1
if [ "$(field $tmp/s1/main.log 0 trl)" != "$(field $tmp/s2/main.log 0 trl)" ] && \
   [ "$(field $tmp/u1/main.log 0 trl)" = "$(field $tmp/u2/main.log 0 trl)" ]; then
    pass "the seed shuffles the batch order; --shuffle 0 keeps it"
else
    fail "data order" "seeds 1/2 shuffled: $(field $tmp/s1/main.log 0 trl)/$(field $tmp/s2/main.log 0 trl), unshuffled: $(field $tmp/u1/main.log 0 trl)/$(field $tmp/u2/main.log 0 trl)"
fi
# 2 shards of 20000 tokens: 156 batches of B*T = 8*32 tokens per epoch
out=$(train -b 8 -x 160 -l 1e-4 2>&1)
printf '%s\n' "$out" | grep -q '^epoch 2 begins (shards and batches reshuffled)' && pass "a new epoch is announced" \
    || fail "epoch announcement" "not printed"

# --- checkpoints: every -n steps and at the end, --keep, loadable with -e
train -x 12 -n 5 --keep 2 -o "$tmp/ck" > /dev/null 2>&1
files=$(cd "$tmp/ck" && ls | tr '\n' ' ')
[ "$files" = "lock main.log model_00000010.bin model_00000012.bin state_00000010.bin state_00000012.bin " ] \
    && pass "checkpoints every -n steps and at the end, the newest --keep 2 kept" || fail "checkpoint files" "$files"
if out=$(./train_gpt2 -e "$tmp/ck/model_00000012.bin" -i "$data/synth_train_*.bin" -b 4 -t 32 -v 0 -s 0 -x 1 2>&1); then
    pass "a checkpoint loads with -e"
else
    fail "a checkpoint loads with -e" "$(printf '%s' "$out" | tail -n 1)"
fi
expect_error "-n without -o" 2 "^error: -n: checkpoints need an output directory" train -n 5
expect_error "-y without -o" 2 "^error: -y: resuming needs" train -y 1

# --- exact resume: N steps, then N more, equal 2N steps in one go
train -x 20 -u 3 -k constant -n 10 -o "$tmp/full" > /dev/null 2>&1
train -x 10 -u 3 -k constant -n 10 -o "$tmp/half" > /dev/null 2>&1
train -x 20 -u 3 -k constant -n 10 -o "$tmp/half" -y 1 > "$tmp/half.out" 2>&1
if grep -q "resuming from $tmp/half/model_00000010.bin (step 10)" "$tmp/half.out" && \
   diff <(losses "$tmp/full/main.log") <(losses "$tmp/half/main.log") > /dev/null; then
    pass "10 steps + resume for 10 more print the losses of 20 steps, bit for bit"
else
    fail "exact resume" "$(diff <(losses "$tmp/full/main.log") <(losses "$tmp/half/main.log") | head -n 4 | tr '\n' '|')"
fi

# --- SIGKILL while writing a checkpoint: resume from the one before, still exact
train -x 16 -u 2 -q 0.1 -n 4 -o "$tmp/ref16" > /dev/null 2>&1
LLMC_FAULT=kill-in-checkpoint:12 train -x 16 -u 2 -q 0.1 -n 4 -o "$tmp/kill" > /dev/null 2>&1
rc=$?
if [ $rc -eq 137 ] && [ -f "$tmp/kill/model_00000012.bin.tmp" ] && [ ! -f "$tmp/kill/model_00000012.bin" ]; then
    pass "killed halfway through writing checkpoint 12 (a .tmp file is left, no model_00000012.bin)"
else
    fail "kill during checkpoint" "exit $rc; files: $(ls "$tmp/kill" | tr '\n' ' ')"
fi
train -x 16 -u 2 -q 0.1 -n 4 -o "$tmp/kill" -y 1 > "$tmp/kill.out" 2>&1
if grep -q "resuming from $tmp/kill/model_00000008.bin (step 8)" "$tmp/kill.out" && \
   diff <(losses "$tmp/ref16/main.log") <(losses "$tmp/kill/main.log" | sort -u | sort -t: -k2n) > /dev/null; then
    pass "resumed from checkpoint 8 after the kill: all 16 losses as an uninterrupted run"
else
    fail "resume after kill" "$(grep -m1 resuming "$tmp/kill.out"); $(diff <(losses "$tmp/ref16/main.log") <(losses "$tmp/kill/main.log" | sort -u | sort -t: -k2n) | head -n 3 | tr '\n' '|')"
fi

# --- SIGKILL at random moments, resumed each time, until the run completes. Each
# attempt is killed at a moment drawn uniformly from the first sixth of an uninterrupted
# run's time (measured just before): mid-step, mid-checkpoint, during start-up, anywhere;
# so a run needs at least 6 attempts (5 of them killed), whatever the machine's speed.
# (TEST_QUICK=1, make test: skipped; the kill inside a checkpoint above stands for it)
if [ "${TEST_QUICK:-0}" != 1 ]; then
start=$(date +%s%N)
train -x 40 -u 2 -q 0.1 -n 3 --keep 3 -o "$tmp/ref40" > /dev/null 2>&1
run_ms=$(( ($(date +%s%N) - start) / 1000000 ))
kills=0
mkdir -p "$tmp/chaos"
for attempt in $(seq 1 60); do
    [ "$(field $tmp/chaos/main.log 39 trl 2>/dev/null)" != "" ] && break
    # not through train(): $! must be train_gpt2 itself, not a subshell around it
    "${TRAIN[@]}" -x 40 -u 2 -q 0.1 -n 3 --keep 3 -o "$tmp/chaos" -y 1 > /dev/null 2>&1 &
    pid=$!
    sleep "$(awk -v r=$RANDOM -v ms=$run_ms 'BEGIN { printf "%.4f", r / 32768 * ms / 6 / 1000 }')"
    kill -9 $pid 2>/dev/null && kills=$((kills + 1))
    wait $pid 2>/dev/null
done
train -x 40 -u 2 -q 0.1 -n 3 --keep 3 -o "$tmp/chaos" -y 1 > /dev/null 2>&1  # finish if still short
if [ $kills -ge 5 ] && diff <(losses "$tmp/ref40/main.log") <(losses "$tmp/chaos/main.log" | sort -u | sort -t: -k2n) > /dev/null; then
    pass "killed $kills times at random moments and resumed: every logged loss equals the uninterrupted run's"
else
    fail "random kills" "$kills kills; $(diff <(losses "$tmp/ref40/main.log") <(losses "$tmp/chaos/main.log" | sort -u | sort -t: -k2n) | head -n 4 | tr '\n' '|')"
fi
fi

# --- a corrupt newest checkpoint is reported and the previous one used
cp -r "$tmp/ck" "$tmp/bad"
$PY -c "f = open('$tmp/bad/state_00000012.bin', 'r+b'); f.seek(5000); b = f.read(1); f.seek(5000); f.write(bytes([b[0] ^ 1]))"
if out=$(train -x 12 -n 5 --keep 2 -o "$tmp/bad" -y 1 2>&1) && \
   printf '%s\n' "$out" | grep -q "warning: $tmp/bad/state_00000012.bin: CRC mismatch, the file is corrupt" && \
   printf '%s\n' "$out" | grep -q "resuming from $tmp/bad/model_00000010.bin (step 10)"; then
    pass "a corrupt state file is reported (CRC) and the checkpoint before it used"
else
    fail "corrupt state" "$(printf '%s' "$out" | grep -E 'warning|resuming|error' | head -n 3 | tr '\n' '|')"
fi
cp -r "$tmp/ck" "$tmp/bad2"
$PY -c "f = open('$tmp/bad2/model_00000012.bin', 'r+b'); f.seek(300000); b = f.read(1); f.seek(300000); f.write(bytes([b[0] ^ 4]))"
if out=$(train -x 12 -n 5 --keep 2 -o "$tmp/bad2" -y 1 2>&1) && \
   printf '%s\n' "$out" | grep -q "warning: $tmp/bad2/model_00000012.bin: CRC mismatch, the file is corrupt" && \
   printf '%s\n' "$out" | grep -q "resuming from $tmp/bad2/model_00000010.bin (step 10)"; then
    pass "a corrupt model file is reported (CRC) and the checkpoint before it used"
else
    fail "corrupt model" "$(printf '%s' "$out" | grep -E 'warning|resuming|error' | head -n 3 | tr '\n' '|')"
fi
expect_error "a checkpoint of another model config is refused" 1 "state_00000012.bin: a checkpoint of another model config" \
    ./train_gpt2 -e data/ref/chunks/model.bin -i "$data/synth_train_*.bin" -b 4 -t 32 -v 0 -s 0 -x 12 -o "$tmp/ck" -y 1
expect_error "a resume with another batch size is refused" 1 "state_00000012.bin: the run was made with -b 4, this command has 2" \
    ./train_gpt2 -e $model -i "$data/synth_train_*.bin" -b 2 -t 32 -v 0 -s 0 -x 12 -o "$tmp/ck" -y 1
# seeds compared exactly: 2^53 + 1 and 2^53 are one double, two data orders
train -x 2 -n 2 --seed 9007199254740993 -o "$tmp/seed" > /dev/null 2>&1
expect_error "a resume with another seed above 2^53 is refused" 1 \
    "state_00000002.bin: the run was made with --seed 9007199254740993, this command has 9007199254740992;" \
    train -x 4 --seed 9007199254740992 -o "$tmp/seed" -y 1
expect_ok "a resume with the same seed above 2^53 goes on" train -x 4 --seed 9007199254740993 -o "$tmp/seed" -y 1

# --- non-finite steps: skipped with a warning; K in a row stop the run
if out=$(LLMC_FAULT=nan-loss:3 train -x 6 -o "$tmp/nan" 2>&1) && \
   printf '%s\n' "$out" | grep -q "warning: step 4: non-finite loss (nan) or gradient norm (.*); update skipped (1 in a row)" && \
   [ "$(grep -c ' trl:' "$tmp/nan/main.log")" -eq 6 ]; then
    pass "a non-finite loss skips its update with a warning, and the run goes on"
else
    fail "non-finite skip" "$(printf '%s' "$out" | grep -E 'warning|error' | head -n 2 | tr '\n' '|')"
fi
err=$(LLMC_FAULT=nan-loss:3 ./train_gpt2 -e $model -i "$data/synth_train_*.bin" -b 4 -t 32 -v 0 -s 0 -x 6 -n 2 \
      --max-skips 1 -o "$tmp/stop" 2>&1 >/dev/null); rc=$?
if [ $rc -eq 1 ] && printf '%s\n' "$err" | tail -n 1 | \
   grep -q "^error: 1 steps in a row had a non-finite loss or gradient norm; stopping at step 4 (checkpoints in $tmp/stop are intact)"; then
    pass "K non-finite steps in a row stop the run with a clear message"
else
    fail "K non-finite steps stop the run" "exit $rc: $(printf '%s' "$err" | tr '\n' '|')"
fi
if ls "$tmp/stop" | grep -q "state_00000002.bin" && out=$(train -x 6 -n 2 -o "$tmp/stop" -y 1 2>&1) && \
   printf '%s\n' "$out" | grep -q "resuming from $tmp/stop/model_00000002.bin"; then
    pass "after the stop the checkpoints are intact and resume"
else
    fail "checkpoints after stop" "$(ls "$tmp/stop" | tr '\n' ' ')"
fi

# --- the loss plot
if scripts/tools/plot_loss "$tmp/cos/main.log" "$tmp/loss.png" > /dev/null 2>&1 && \
   [ "$(head -c 8 "$tmp/loss.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] && [ "$(stat -c %s "$tmp/loss.png")" -gt 5000 ]; then
    pass "scripts/tools/plot_loss draws main.log as a PNG"
else
    fail "plot_loss" "no PNG"
fi
expect_error "plot_loss on a missing log" 1 "nope.log" scripts/tools/plot_loss "$tmp/nope.log" "$tmp/x.png"
