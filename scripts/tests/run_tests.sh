#!/usr/bin/env bash
# Runs every scripts/tests/test_*.sh (or the ones named) from the repository root and
# ends with the line "N passed, N failed". Exit status 0 only if none failed and
# at least one check passed.
#   --quick   (make test) sets TEST_QUICK=1: each script keeps its cheapest
#             representative checks (every program and kernel path, a few mutants)
#             and skips the expensive repeats; without it (make test-all, CI),
#             everything runs. Quick runs go in two lanes at once (the machines have two
#             cores or more, and most of a quick script is one compiler or one Python):
#             the scripts that build and check in folders of their own (ISOLATED below)
#             beside the ones that share the trainer, its data and data/ref. OpenMP threads
#             then sleep rather than spin while they wait (OMP_WAIT_POLICY=passive), which
#             changes no result: two lanes of spinning threads on two cores slowed small
#             training runs tenfold.
# A script that exits non-zero, or prints no PASS or FAIL line at all, counts as
# one failed check: a script that dies half-way cannot pass unnoticed.
set -u
cd "$(dirname "$0")/../.."
if [ "${1:-}" = --quick ]; then export TEST_QUICK=1; shift; fi
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(scripts/tests/test_*.sh)
# Build only into their own folders (build/fuzz, build/sanitize, build/gemm_check_*, dev/cpu,
# dev/cuda, temporary folders), and read nothing the other scripts write.
ISOLATED=" test_docs.sh test_fuzz.sh test_sanitize.sh test_gemm.sh test_dev.sh test_cuda.sh test_collectives.sh "
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run_lane NAME SHOW SCRIPT...: runs the scripts one after the other; each one's output goes to
# $work/NAME.log (and, with SHOW=1, live to the terminal) and a line of its time and counts to
# $work/NAME.times.
run_lane() {
    local lane=$1 show=$2; shift 2
    local t out=$work/$lane.out start rc seconds
    for t in "$@"; do
        start=$(date +%s)
        [ "$show" = 1 ] && echo "== $t${TEST_QUICK:+ (quick)}"
        if [ "$show" = 1 ]; then
            bash "$t" 2>&1 | tee "$out"  # live on the terminal
            rc=${PIPESTATUS[0]}
        else
            bash "$t" > "$out" 2>&1
            rc=$?
        fi
        if [ "$rc" -ne 0 ]; then
            echo "FAIL $t: exited with status $rc" >> "$out"
        elif ! grep -qE '^(PASS|FAIL|SKIP) ' "$out"; then
            echo "FAIL $t: no check ran (no PASS or FAIL line, nor a SKIP saying why)" >> "$out"
        fi
        seconds=$(( $(date +%s) - start ))
        if [ "$show" = 1 ]; then
            grep '^FAIL [^ ]*: \(exited\|no check ran\)' "$out" | tail -n 1
            echo "   ($seconds s)"
        fi
        { echo "== $t${TEST_QUICK:+ (quick)}"; cat "$out"; echo "   ($seconds s)"; } >> "$work/$lane.log"
        printf '%6d s  %3d passed  %3d failed  %s\n' "$seconds" "$(grep -c '^PASS ' "$out")" \
            "$(grep -c '^FAIL ' "$out")" "$t" >> "$work/$lane.times"
    done
}

: > "$work/a.log"; : > "$work/b.log"; : > "$work/a.times"; : > "$work/b.times"
if [ "${TEST_QUICK:-0}" = 1 ] && [ ${#tests[@]} -gt 1 ]; then
    export OMP_WAIT_POLICY=passive
    lane_a=() lane_b=()
    for t in "${tests[@]}"; do
        if [[ "$ISOLATED" == *" $(basename "$t") "* ]]; then lane_b+=("$t"); else lane_a+=("$t"); fi
    done
    echo "(two lanes: ${#lane_b[@]} isolated scripts in the background, their output after the others')"
    run_lane b 0 "${lane_b[@]}" &
    lane_b_pid=$!
    run_lane a 1 "${lane_a[@]}"
    wait $lane_b_pid
    cat "$work/b.log"  # the background lane's output, whole, after the foreground one's
else
    run_lane a 1 "${tests[@]}"
fi
echo "== time per script"
sort -k5 "$work/a.times" "$work/b.times"
passed=$(cat "$work/a.log" "$work/b.log" | grep -c '^PASS ')
failed=$(cat "$work/a.log" "$work/b.log" | grep -c '^FAIL ')
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
