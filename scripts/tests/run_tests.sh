#!/usr/bin/env bash
# Runs every scripts/tests/test_*.sh (or the ones named) from the repository root and
# ends with the line "N passed, N failed". Exit status 0 only if none failed and
# at least one check passed.
#   --quick   (make test) sets TEST_QUICK=1: each script keeps its cheapest
#             representative checks (every program and kernel path, a few mutants)
#             and skips the expensive repeats; without it (make test-all, CI),
#             everything runs.
# A script that exits non-zero, or prints no PASS or FAIL line at all, counts as
# one failed check: a script that dies half-way cannot pass unnoticed.
set -u
cd "$(dirname "$0")/../.."
if [ "${1:-}" = --quick ]; then export TEST_QUICK=1; shift; fi
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(scripts/tests/test_*.sh)
log=$(mktemp)    # every script's output
out=$(mktemp)    # the current script's
times=$(mktemp)
trap 'rm -f "$log" "$out" "$times"' EXIT
for t in "${tests[@]}"; do
    echo "== $t${TEST_QUICK:+ (quick)}"
    start=$(date +%s)
    bash "$t" 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -ne 0 ]; then
        echo "FAIL $t: exited with status $rc" | tee -a "$out"
    elif ! grep -qE '^(PASS|FAIL|SKIP) ' "$out"; then
        echo "FAIL $t: no check ran (no PASS or FAIL line, nor a SKIP saying why)" | tee -a "$out"
    fi
    cat "$out" >> "$log"
    seconds=$(( $(date +%s) - start ))
    echo "   ($seconds s)"
    printf '%6d s  %3d passed  %3d failed  %s\n' "$seconds" "$(grep -c '^PASS ' "$out")" "$(grep -c '^FAIL ' "$out")" "$t" >> "$times"
done
echo "== time per script"
cat "$times"
passed=$(grep -c '^PASS ' "$log")
failed=$(grep -c '^FAIL ' "$log")
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
