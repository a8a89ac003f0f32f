#!/usr/bin/env bash
# One GPU session's worth of dev/cuda in one command: builds everything (with the mutants),
# runs both harnesses (every version: checked and timed), the mutants (each must fail) and
# the PyTorch yardstick, saving each output as a file in DIR (default: $OUT if set, else
# dev/cuda/gpu_run). Exit status 0 only if every harness passed and every mutant failed.
#
#   bash dev/cuda/run_gpu.sh [DIR]
set -u
cd "$(dirname "$0")"
out=${1:-${OUT:-gpu_run}}
mkdir -p "$out"
status=0
{ date -u; nvidia-smi; nvcc --version; python3 -c 'import torch; print("torch", torch.__version__)'; } >"$out/env.txt" 2>&1
if ! make -j8 all mutants >"$out/build.txt" 2>&1; then
    echo "error: the build failed (see $out/build.txt)"; tail -n 20 "$out/build.txt"; exit 1
fi
./layernorm_forward 2>&1 | tee "$out/forward.txt"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
./layernorm_backward 2>&1 | tee "$out/backward.txt"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
for m in "layernorm_forward_mutant1 5" "layernorm_backward_mutant1 3" "layernorm_backward_mutant2 4"; do
    set -- $m
    ./"$1" "$2" >"$out/$1.txt" 2>&1
    rc=$?
    if [ "$rc" -eq 1 ] && grep -q MISMATCH "$out/$1.txt"; then echo "mutant $1 (version $2): caught"
    else echo "mutant $1 (version $2): NOT caught (exit $rc)"; status=1; fi
done | tee "$out/mutants.txt"
grep -q "NOT caught" "$out/mutants.txt" && status=1
python3 bench_torch.py 2>&1 | tee "$out/torch.txt"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
exit $status
