#!/usr/bin/env bash
# Runs every scripts/test_*.sh (or the ones named) from the repository root and
# ends with the line "N passed, N failed". Exit status 0 only if none failed.
set -u
cd "$(dirname "$0")/.."
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(scripts/test_*.sh)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "${tests[@]}"; do
    echo "== $t"
    start=$(date +%s)
    bash "$t" 2>&1 | tee -a "$log"
    echo "   ($(( $(date +%s) - start )) s)"
done
passed=$(grep -c '^PASS ' "$log")
failed=$(grep -c '^FAIL ' "$log")
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
