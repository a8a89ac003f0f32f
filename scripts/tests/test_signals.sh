# Long unattended runs (llmc/runctl.h): SIGTERM/SIGINT stop the trainer at a step
# boundary with a checkpoint and exit 0, and -y 1 continues exactly; a second signal
# exits at once, the finished checkpoints intact; one run per -o directory (flock);
# a failing checkpoint or main.log write (file size limit, full tmpfs) ends the run
# with one line naming the file, and leaves no temporary file and every earlier
# checkpoint resumable. Real signals, sent to the trainer process itself.
# Uses the small "odd" reference model (V=517) and the synthetic shards.
set -u
source scripts/tests/testlib.sh
PY=$PWD/.venv/bin/python

model=data/ref/odd/model.bin
if [ ! -f $model ]; then fail "signal tests" "$model is missing (scripts/tests/test_gpt2.sh writes it)"; exit 0; fi
data=data/synth
[ -f $data/synth_val_000000.bin ] || $PY scripts/reference/make_synthetic_data.py --out $data --vocab 517 --tokens 20000
tmp=$(mktemp -d)
mounts=()
pids=()
cleanup() {
    for p in "${pids[@]+"${pids[@]}"}"; do kill -9 "$p" 2>/dev/null; done
    for m in "${mounts[@]+"${mounts[@]}"}"; do umount "$m" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
# -k constant: the learning rate does not depend on -x, so a run started with a huge
# -x, stopped and resumed with a small one follows the run made with the small one
TRAIN=(./train_gpt2 -e $model -i "$data/synth_train_*.bin" -j "$data/synth_val_*.bin" -b 4 -t 32 -v 0 -s 0
       -u 2 -k constant)
train() { "${TRAIN[@]}" "$@"; }
losses() { grep ' trl:' "$1" | sed 's/ lr:.*//' | sort -u | sort -t: -k2n; }  # "s:N trl:L" lines, once each
vals() { grep ' tel:' "$1" | sort -u | sort -t: -k2n; }
trl_count() { grep -c ' trl:' "$1" 2>/dev/null; }
# wait_for FILE PATTERN: until FILE has a line matching PATTERN (60 s at most)
wait_for() {
    for _ in $(seq 600); do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
    return 1
}
tmp_files() { ls "$1" | grep '\.tmp$' | tr '\n' ' '; }

# ---------------------------------------------------------------- graceful stop
# SIGTERM mid-training: the step finishes, a checkpoint (even with -n 0), "s:N stop:SIGTERM", exit 0
"${TRAIN[@]}" -x 1000000 -o "$tmp/term" > "$tmp/term.out" 2>&1 &
pid=$!; pids+=($pid)
wait_for "$tmp/term/main.log" '^s:4 trl:' || fail "SIGTERM stop" "the run never reached step 5"
kill -TERM $pid; wait $pid; rc=$?
n=$(trl_count "$tmp/term/main.log")
if [ $rc -eq 0 ] && [ "$(tail -n 1 "$tmp/term/main.log")" = "s:$n stop:SIGTERM" ] && \
   [ -f "$tmp/term/model_$(printf %08d "$n").bin" ] && [ -f "$tmp/term/state_$(printf %08d "$n").bin" ] && \
   grep -q "^step $n: stopped by SIGTERM" "$tmp/term.out" && [ -z "$(tmp_files "$tmp/term")" ]; then
    pass "SIGTERM: the step finishes, checkpoint $n is written, main.log says 's:$n stop:SIGTERM', exit 0"
else
    fail "SIGTERM stop" "exit $rc, $n steps, log ends '$(tail -n 1 "$tmp/term/main.log")', files: $(ls "$tmp/term" | tr '\n' ' ')"
fi
m=$((n + 8))
train -x $m -o "$tmp/term_ref" > /dev/null 2>&1
train -x $m -o "$tmp/term" -y 1 > "$tmp/term_resume.out" 2>&1
if grep -q "resuming from $tmp/term/model_$(printf %08d "$n").bin (step $n)" "$tmp/term_resume.out" && \
   [ "$(losses "$tmp/term/main.log" | wc -l)" -eq $m ] && \
   diff <(losses "$tmp/term_ref/main.log") <(losses "$tmp/term/main.log") > /dev/null; then
    pass "-y 1 after the SIGTERM stop: all $m losses equal an uninterrupted run's, bit for bit"
else
    fail "resume after SIGTERM" "$(grep -m1 -E 'resuming|error' "$tmp/term_resume.out"); $(diff <(losses "$tmp/term_ref/main.log") <(losses "$tmp/term/main.log") | head -n 3 | tr '\n' '|')"
fi

# SIGINT (Ctrl-C) while validation and sampling take most of the time: honoured at the
# next step boundary; the val losses and the samples (the sampler's RNG) continue exactly
VS=(-v 1 -m 20 -s 1 -g 8)
"${TRAIN[@]}" "${VS[@]}" -x 1000000 -o "$tmp/int" > "$tmp/int.out" 2>&1 &
pid=$!; pids+=($pid)
wait_for "$tmp/int/main.log" '^s:3 tel:' || fail "SIGINT stop" "the run never reached step 3"
kill -INT $pid; wait $pid; rc=$?
n=$(trl_count "$tmp/int/main.log")
if [ $rc -eq 0 ] && [ "$(tail -n 1 "$tmp/int/main.log")" = "s:$n stop:SIGINT" ] && \
   [ -f "$tmp/int/state_$(printf %08d "$n").bin" ]; then
    pass "SIGINT during validation/sampling: stops at the step boundary $n with a checkpoint, exit 0"
else
    fail "SIGINT stop" "exit $rc, $n steps, log ends '$(tail -n 1 "$tmp/int/main.log")'"
fi
m=$((n + 3))
train "${VS[@]}" -x $m -o "$tmp/int_ref" > "$tmp/int_ref.out" 2>&1
train "${VS[@]}" -x $m -o "$tmp/int" -y 1 > "$tmp/int_resume.out" 2>&1
# last_sample OUT: the text of the last "generating:\n---\nTEXT\n---" block
last_sample() { awk '/^generating:$/ { g = 1; next } g == 1 && /^---$/ { g = 2; cur = ""; next }
                     g == 2 && /^---$/ { g = 0; last = cur; next } g == 2 { cur = cur $0 "\n" }
                     END { printf "%s", last }' "$1"; }
sample_ref=$(last_sample "$tmp/int_ref.out")
sample_res=$(last_sample "$tmp/int_resume.out")
if diff <(losses "$tmp/int_ref/main.log") <(losses "$tmp/int/main.log") > /dev/null && \
   diff <(vals "$tmp/int_ref/main.log") <(vals "$tmp/int/main.log") > /dev/null && \
   [ "$(vals "$tmp/int/main.log" | wc -l)" -eq $((m + 1)) ] && [ -n "$sample_ref" ] && [ "$sample_ref" = "$sample_res" ]; then
    pass "-y 1 after the SIGINT stop: train and val losses and the last sample equal an uninterrupted run's"
else
    fail "resume after SIGINT" "$(diff <(losses "$tmp/int_ref/main.log") <(losses "$tmp/int/main.log") | head -n 2 | tr '\n' '|') $(diff <(vals "$tmp/int_ref/main.log") <(vals "$tmp/int/main.log") | head -n 2 | tr '\n' '|') samples: '$sample_ref' vs '$sample_res'"
fi

# a second signal exits at once (128+15), without the stop checkpoint; the earlier ones
# are intact. Big steps (B=512, ~1 s here) so that the second signal lands inside the step, sent
# once the trainer has said it got the first (two signals sent at once may merge into one).
BIG=(-b 512 -n 1)
"${TRAIN[@]}" "${BIG[@]}" -x 1000000 -o "$tmp/twice" > "$tmp/twice.out" 2>&1 &
pid=$!; pids+=($pid)
wait_for "$tmp/twice/main.log" '^s:1 trl:' || fail "second signal" "the run never reached step 2"
kill -TERM $pid
for _ in $(seq 1000); do grep -q 'stop requested' "$tmp/twice.out" && break; sleep 0.01; done
kill -TERM $pid
wait $pid; rc=$?
n=$(trl_count "$tmp/twice/main.log")
if [ $rc -eq 143 ] && ! grep -q 'stop:' "$tmp/twice/main.log" && [ -z "$(tmp_files "$tmp/twice")" ] && \
   grep -q "second signal: exiting now" "$tmp/twice.out"; then
    pass "a second SIGTERM exits at once with status 143, no stop checkpoint, no temporary file"
else
    fail "second signal" "exit $rc; log ends '$(tail -n 1 "$tmp/twice/main.log")'; files: $(ls "$tmp/twice" | tr '\n' ' ')"
fi
newest=$(ls "$tmp/twice" | sed -n 's/^state_\([0-9]*\)\.bin$/\1/p' | tail -n 1)
if [ -n "$newest" ] && out=$(train "${BIG[@]}" -x $((n + 2)) -o "$tmp/twice" -y 1 2>&1) && \
   printf '%s\n' "$out" | grep -q "resuming from $tmp/twice/model_$newest.bin (step $((10#$newest)))"; then
    pass "after the second signal, -y 1 resumes from the newest checkpoint (step $((10#$newest)) of $n)"
else
    fail "resume after the second signal" "$(printf '%s\n' "$out" | grep -m2 -E 'resuming|warning|error' | tr '\n' '|')"
fi

# two SIGTERMs while checkpoint 8 is half written (a testing hook raises them there):
# the handler removes the temporary file; checkpoint 4 stays and resumes exactly
train -x 12 -n 4 -o "$tmp/ref12" > /dev/null 2>&1
LLMC_FAULT=term-in-checkpoint:8 train -x 12 -n 4 -o "$tmp/mid" > "$tmp/mid.out" 2>&1; rc=$?
if [ $rc -eq 143 ] && [ -f "$tmp/mid/state_00000004.bin" ] && [ ! -e "$tmp/mid/model_00000008.bin" ] && \
   [ -z "$(tmp_files "$tmp/mid")" ]; then
    pass "two signals while a checkpoint is written: exit 143, its temporary file removed, checkpoint 4 kept"
else
    fail "signals during a checkpoint" "exit $rc; files: $(ls "$tmp/mid" | tr '\n' ' ')"
fi
train -x 12 -n 4 -o "$tmp/mid" -y 1 > "$tmp/mid_resume.out" 2>&1
if grep -q "resuming from $tmp/mid/model_00000004.bin (step 4)" "$tmp/mid_resume.out" && \
   diff <(losses "$tmp/ref12/main.log") <(losses "$tmp/mid/main.log") > /dev/null; then
    pass "resumed from checkpoint 4: all 12 losses equal the uninterrupted run's"
else
    fail "resume after signals during a checkpoint" "$(grep -m1 -E 'resuming|error' "$tmp/mid_resume.out")"
fi

# ---------------------------------------------------------------- one run per directory
"${TRAIN[@]}" -x 1000000 -o "$tmp/locked" > /dev/null 2>&1 &
pid=$!; pids+=($pid)
wait_for "$tmp/locked/main.log" '^s:2 trl:' || fail "lock" "the first run never reached step 3"
expect_error "a second trainer on the same -o exits at once, naming the holder's PID" 1 \
    "^error: $tmp/locked/lock: another train_gpt2 \(PID $pid\) is running in $tmp/locked" train -x 5 -o "$tmp/locked" -y 1
kill -9 $pid; wait $pid 2>/dev/null
: > "$tmp/locked/state_00000099.bin.tmp"  # as a run killed while writing checkpoint 99 leaves it
if out=$(train -x 3 -o "$tmp/locked" 2>&1) && [ ! -e "$tmp/locked/state_00000099.bin.tmp" ] && \
   printf '%s\n' "$out" | grep -q "^removed $tmp/locked/state_00000099.bin.tmp (left by an interrupted run)"; then
    pass "after the holder is killed (SIGKILL), no stale lock: the next run starts (and removes the dead run's .tmp)"
else
    fail "stale lock" "$(printf '%s' "$out" | tail -n 1)"
fi
# the refused run touches nothing: a directory held by another process (flock(1), PID
# written as the trainer writes it) is byte for byte the same afterwards
train -x 4 -n 2 -o "$tmp/held" > /dev/null 2>&1
echo 4242 > "$tmp/held/lock"
before=$(cd "$tmp/held" && ls -l --time-style=+%s.%N && md5sum *)
if command -v flock > /dev/null; then
    flock "$tmp/held/lock" sleep 30 &
    fpid=$!; pids+=($fpid)
    for _ in $(seq 50); do flock -n "$tmp/held/lock" true 2>/dev/null || break; sleep 0.1; done
    expect_error "a directory locked by another process is refused (PID from the lock file)" 1 \
        "^error: $tmp/held/lock: another train_gpt2 \(PID 4242\)" train -x 8 -n 2 -o "$tmp/held" -y 1
    [ "$before" = "$(cd "$tmp/held" && ls -l --time-style=+%s.%N && md5sum *)" ] \
        && pass "the refused run changed nothing in the directory" || fail "refused run" "the directory changed"
    kill $fpid 2>/dev/null; wait $fpid 2>/dev/null
else
    fail "lock held by another process" "flock(1) (util-linux) not found"
fi

# ---------------------------------------------------------------- failing writes
# no_tmp_and_resumes NAME DIR STEP REF: no temporary file in DIR; -y 1 resumes from STEP
# and, run to REF's length, logs REF's losses
no_tmp_and_resumes() {
    local name=$1 dir=$2 step=$3 ref=$4 out steps
    steps=$(trl_count "$ref/main.log")
    if [ -n "$(tmp_files "$dir")" ]; then fail "$name" "temporary files left: $(tmp_files "$dir")"; return; fi
    out=$(train -x "$steps" -n 4 -o "$dir" -y 1 2>&1)
    if printf '%s\n' "$out" | grep -q "resuming from $dir/model_$(printf %08d "$step").bin (step $step)" && \
       diff <(losses "$ref/main.log") <(losses "$dir/main.log") > /dev/null; then
        pass "$name"
    else
        fail "$name" "$(printf '%s\n' "$out" | grep -m2 -E 'resuming|warning|error' | tr '\n' '|') $(diff <(losses "$ref/main.log") <(losses "$dir/main.log") | head -n 2 | tr '\n' '|')"
    fi
}
train -x 16 -n 4 -o "$tmp/ref16" > /dev/null 2>&1
# file size limit 600 KiB: a model file (463 KB) fits, a state file (924 KB) does not;
# SIGXFSZ ignored, so the write fails with EFBIG
train -x 8 -n 4 -o "$tmp/efbig" > /dev/null 2>&1
expect_error "a state file over the file size limit: one line naming it (EFBIG)" 1 \
    "^error: $tmp/efbig/state_00000012.bin: write failed: File too large" \
    bash -c 'trap "" XFSZ; ulimit -f 600; exec "$@"' sh "${TRAIN[@]}" -x 16 -n 4 -o "$tmp/efbig" -y 1
no_tmp_and_resumes "after EFBIG: no temporary file; checkpoint 8 resumes, losses as uninterrupted" "$tmp/efbig" 8 "$tmp/ref16"

# main.log over the limit: one line naming it; the log keeps complete lines only
train -x 4 -n 4 -o "$tmp/logfull" > /dev/null 2>&1
blocks=$(( $(stat -c %s "$tmp/logfull/main.log") / 1024 + 1 ))
expect_error "a main.log write over the file size limit: one line naming it (EFBIG)" 1 \
    "^error: $tmp/logfull/main.log: write failed: File too large" \
    bash -c 'trap "" XFSZ; ulimit -f '$blocks'; exec "$@"' sh "${TRAIN[@]}" -x 100 -o "$tmp/logfull" -y 1
if [ "$(tail -c 1 "$tmp/logfull/main.log" | od -An -c | tr -d ' ')" = '\n' ] && \
   ! grep -v -E '^s:[0-9]+ (trl:[0-9.]+ lr:[0-9.e+-]+ norm:[0-9.]+ ms:[0-9.]+ tok/s:[0-9]+|stop:SIG[A-Z]+|tel:[0-9.]+)$' "$tmp/logfull/main.log" > /dev/null; then
    pass "main.log holds whole lines only after the failed write ($(trl_count "$tmp/logfull/main.log") steps)"
else
    fail "main.log after a failed write" "last line: '$(tail -n 1 "$tmp/logfull/main.log")'"
fi

# a full disk: a 2 MiB tmpfs holds checkpoint 4 (1.4 MB) and model 8, not state 8 (ENOSPC)
mkdir -p "$tmp/small"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=2m tmpfs "$tmp/small" 2>/dev/null; then
    mounts+=("$tmp/small")
    expect_error "a full disk while writing a checkpoint: one line naming the file (ENOSPC)" 1 \
        "^error: $tmp/small/run/state_00000008.bin: (write|fsync) failed: No space left on device" \
        train -x 16 -n 4 -o "$tmp/small/run"
    cp -r "$tmp/small/run" "$tmp/from_small"
    [ -z "$(tmp_files "$tmp/small/run")" ] && pass "full disk: the temporary file is removed" \
        || fail "full disk" "temporary files left: $(tmp_files "$tmp/small/run")"
    rm -f "$tmp/from_small/lock"
    no_tmp_and_resumes "full disk: checkpoint 4 resumes (elsewhere), losses as uninterrupted" "$tmp/from_small" 4 "$tmp/ref16"
    umount "$tmp/small" && mounts=()
else
    echo "(skipped the tmpfs test: cannot mount a tmpfs here; the file size limit tests stand in)"
fi
