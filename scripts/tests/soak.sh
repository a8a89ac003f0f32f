#!/usr/bin/env bash
# Soak test of interrupted training (make soak; not part of make test):
# for SOAK_SECONDS (default 1800), trains a tiny model (2 layers, V=517, on
# synthetic shards) while killing the trainer at random moments, with SIGKILL or
# SIGTERM (a coin toss), and resuming it with -y 1, until each run of SOAK_STEPS
# steps (default 400) completes; then starts another run. Each run must end with
# a final model file identical (cmp) to an uninterrupted run's, the same logged
# train and val losses, and no corrupt or unreadable checkpoint ever met on a
# resume (the trainer's "warning:" lines; any "error:" ends the soak). Prints the
# counts of kills, graceful stops, resumes and steps.
#     SOAK_SECONDS=300 nice -n 15 bash scripts/tests/soak.sh
# Environment: SOAK_SECONDS, SOAK_STEPS, SOAK_DIR (work directory, default a
# temporary one, removed after a clean soak), SOAK_SEED (bash's $RANDOM seed).
set -u
cd "$(dirname "$0")/../.."
SECONDS_TOTAL=${SOAK_SECONDS:-1800}
STEPS=${SOAK_STEPS:-400}
RANDOM=${SOAK_SEED:-$$}
PY=$PWD/.venv/bin/python

work=${SOAK_DIR:-$(mktemp -d)}
mkdir -p "$work"
[ -x ./train_gpt2 ] || make train_gpt2
# scripts/tests/test_gpt2.sh's small config, copied (or made here if missing): like the shards
# below, the soak's own, which no test running meanwhile can rewrite or delete
model=$work/odd/model.bin
mkdir -p "$work/odd"
if [ ! -f $model ] && ! cp data/ref/odd/model.bin $model 2> /dev/null; then
    $PY scripts/reference/gpt2_reference.py --layers 2 --heads 3 --channels 57 --max-seq-len 37 --vocab 517 \
        -B 3 -T 29 --steps 10 --seed 7 --out "$work/odd" > /dev/null || { echo "error: cannot make the tiny model" >&2; exit 1; }
fi
# its own shards: a test that rewrites data/synth meanwhile would (rightly) stop a run
data=$work/synth
[ -f $data/synth_val_000000.bin ] || $PY scripts/reference/make_synthetic_data.py --out $data --vocab 517 --tokens 20000 > /dev/null
TRAIN=(./train_gpt2 -e "$model" -i "$data/synth_train_*.bin" -j "$data/synth_val_*.bin" -b 4 -t 32
       -x "$STEPS" -u 10 -q 0.1 -v 50 -m 4 -s 100 -g 8 -n 7 --keep 3)
losses() { grep -E ' (trl|tel):' "$1" | sed 's/ lr:.*//' | sort -u | sort -t: -k2n; }
final=$(printf 'model_%08d.bin' "$STEPS")

pid=
trap '[ -n "$pid" ] && kill -9 $pid 2> /dev/null; exit 1' INT TERM

# the uninterrupted run, and its time: kills land uniformly in the first eighth of it
start=$(date +%s%N)
"${TRAIN[@]}" -o "$work/ref" > "$work/ref.out" 2>&1 || { echo "error: the reference run failed: $(tail -n 1 "$work/ref.out")" >&2; exit 1; }
run_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "soak: an uninterrupted run of $STEPS steps takes $run_ms ms; soaking for $SECONDS_TOTAL s in $work"

deadline=$(( $(date +%s) + SECONDS_TOTAL ))
identical=0 runs=0 kills=0 terms=0 stops=0 early_terms=0 resumes=0 steps=0 warnings=0 failures=0
while [ "$(date +%s)" -lt $deadline ] || [ $runs -eq 0 ]; do
    runs=$((runs + 1))
    dir=$work/run$runs
    rm -rf "$dir"
    attempt=0
    while [ ! -f "$dir/$final" ]; do
        attempt=$((attempt + 1))
        out=$dir.out.$attempt
        # not through a subshell: $! must be train_gpt2 itself; $out exists before the launch,
        # since a SIGKILL that lands before the child's redirection would leave none
        : > "$out"
        "${TRAIN[@]}" -o "$dir" -y 1 > "$out" 2>&1 &
        pid=$!
        signal=
        if [ "$(date +%s)" -lt $deadline ]; then  # past the deadline, the run is only finished
            sleep "$(awk -v r=$RANDOM -v ms=$run_ms 'BEGIN { printf "%.4f", r / 32768 * ms / 8 / 1000 }')"
            if [ $((RANDOM % 2)) -eq 0 ]; then signal=KILL; else signal=TERM; fi
            kill -$signal $pid 2> /dev/null || signal=  # already done
        fi
        { wait $pid; } 2> /dev/null; rc=$?  # quiet: no "Killed" line from bash
        pid=
        grep -q '^resuming from' "$out" && resumes=$((resumes + 1))
        steps=$((steps + $(grep -c '^step *[0-9]*/' "$out")))
        if grep -q '^warning:' "$out"; then
            warnings=$((warnings + 1))
            echo "soak: run $runs attempt $attempt met a bad checkpoint: $(grep -m1 '^warning:' "$out")"
        fi
        if [ $rc -eq 0 ] && [ -f "$dir/$final" ] && ! grep -q 'stopped by' "$out"; then
            continue  # the run completed (the signal, if any, came too late)
        fi
        case "$signal:$rc" in
            KILL:137) kills=$((kills + 1)) ;;
            TERM:0) terms=$((terms + 1)); stops=$((stops + 1))
                    if ! grep -q '^step [0-9]*: stopped by SIGTERM' "$out"; then
                        echo "soak: run $runs attempt $attempt: exit 0 after SIGTERM without a stop"
                        failures=$((failures + 1))
                    fi ;;
            TERM:143) terms=$((terms + 1)); early_terms=$((early_terms + 1)) ;;  # before the handler was set
            *) echo "soak: run $runs attempt $attempt: SIG${signal:-none}, exit $rc: $(grep -m1 '^error:' "$out")"
               failures=$((failures + 1)); continue 2 ;;
        esac
    done
    if ! cmp -s "$work/ref/$final" "$dir/$final"; then
        echo "soak: run $runs: $final differs from the uninterrupted run's"; failures=$((failures + 1))
    elif ! diff <(losses "$work/ref/main.log") <(losses "$dir/main.log") > /dev/null; then
        echo "soak: run $runs: the logged losses differ from the uninterrupted run's"; failures=$((failures + 1))
    else
        identical=$((identical + 1))
        echo "soak: run $runs: $attempt attempts; final model identical to the uninterrupted run's"
        rm -rf "$dir" "$dir".out.*
    fi
done

echo "soak: $runs runs of $STEPS steps in $SECONDS_TOTAL s: $((kills + terms)) kills ($kills SIGKILL, $terms SIGTERM:" \
     "$stops graceful stops with a checkpoint, $early_terms during start-up), $resumes resumes, $steps steps trained" \
     "($((steps - runs * STEPS)) redone after kills), $warnings corrupt or unreadable checkpoints met," \
     "$identical of $runs final models identical to the uninterrupted run's"
if [ $failures -eq 0 ] && [ $warnings -eq 0 ]; then
    [ -z "${SOAK_DIR:-}" ] && rm -rf "$work"
    echo "soak: PASS"
else
    echo "soak: FAIL (kept $work)"
    exit 1
fi
