#!/usr/bin/env bash
# Runs the libFuzzer harnesses (built by `make fuzzers` into build/fuzz/):
#   FUZZ_SECONDS=60 bash fuzz/run.sh [HARNESS...]     (default: all of fuzz/fuzz_*.c)
#   FUZZ_JOBS=N: harnesses at a time (default: one per core)
# For each: first every committed input once (fuzz/corpus/H, the seeds, and
# fuzz/regressions/H, reproducers of fixed bugs), then coverage-guided fuzzing for
# FUZZ_SECONDS from build/fuzz/corpus/H (the seeds plus what earlier runs found;
# the committed corpus is only read). A crash, sanitizer report, leak, timeout or
# failed property is a FAIL and its reproducer is saved in fuzz/crashes/H/.
# Prints "PASS fuzz H: ..." with the executions and final coverage (cov: edges,
# ft: features), or "FAIL fuzz H: ..."; exit status 1 if any failed.
set -u
cd "$(dirname "$0")/.."
source scripts/tests/testlib.sh
seconds=${FUZZ_SECONDS:-60}
harnesses=("$@")
if [ ${#harnesses[@]} -eq 0 ]; then
    for f in fuzz/fuzz_*.c; do h=${f#fuzz/fuzz_}; harnesses+=("${h%.c}"); done
fi
# ASan's leak check stays on; libFuzzer's -rss_limit_mb catches runaway allocations
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# fuzz_one H: H's committed inputs, then its fuzzing; prints its PASS or FAIL line, status 1 on a FAIL
fuzz_one() {
    local h=$1 bin log inputs d rc execs cov crash why
    bin=${FUZZ_BIN_DIR:-build/fuzz}/fuzz_$h
    if [ ! -x "$bin" ]; then fail "fuzz $h" "$bin not built (make fuzzers)"; return 1; fi
    mkdir -p "build/fuzz/corpus/$h" "fuzz/crashes/$h"
    log=${FUZZ_LOG_DIR:-build/fuzz}/$h.log
    # the committed inputs, once each
    inputs=()
    for d in "fuzz/corpus/$h" "fuzz/regressions/$h"; do
        [ -d "$d" ] && inputs+=("$d")
    done
    if ! "$bin" -runs=0 -rss_limit_mb=2048 -timeout=20 -artifact_prefix="fuzz/crashes/$h/" "${inputs[@]}" > "$log.replay" 2>&1; then
        fail "fuzz $h" "a committed input fails: $(grep -E 'ERROR|property failed|runtime error|Running:' "$log.replay" | tail -n 3 | tr '\n' ' ')"
        return 1
    fi
    "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 \
        -artifact_prefix="fuzz/crashes/$h/" "build/fuzz/corpus/$h" "${inputs[@]}" > "$log" 2>&1
    rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
    cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1)
    if [ $rc -eq 0 ]; then
        pass "fuzz $h: ${execs:-?} executions in ${seconds} s, $cov"
    else
        crash=$(grep -oE "Test unit written to [^ ]+" "$log" | tail -n 1 | sed 's/Test unit written to //')
        why=$(grep -E 'ERROR: |property failed|runtime error|SUMMARY' "$log" | head -n 2 | tr '\n' ' ')
        fail "fuzz $h" "${why:-exit $rc} reproducer: ${crash:-none} (log $log)"
        return 1
    fi
}

# One harness per core at a time (FUZZ_JOBS, default the cores there are; each libFuzzer
# process is one thread): each still fuzzes for FUZZ_SECONDS, so the whole run takes a
# fraction of the time. Their lines are printed in the harnesses' order.
parallel=${FUZZ_JOBS:-$(nproc)}
verdicts=$(mktemp -d)
trap 'rm -rf "$verdicts"' EXIT
for h in "${harnesses[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n 2>/dev/null || true; done
    ( fuzz_one "$h" > "$verdicts/$h" 2>&1; echo $? > "$verdicts/$h.rc" ) &
done
wait
failed=0
for h in "${harnesses[@]}"; do
    cat "$verdicts/$h"
    [ "$(cat "$verdicts/$h.rc" 2>/dev/null)" = 0 ] || failed=1
done
exit $failed
