#!/usr/bin/env bash
# One GPU session's worth of dev/cuda in one command: builds everything (with the mutants),
# runs both harnesses (every version: checked and timed), the mutants (each must fail) and
# the PyTorch yardstick, saving each output as a file in DIR (default: $OUT if set, else
# dev/cuda/gpu_run; 7 files: env, build, forward, backward, mutants, torch, and write_flush,
# the timings again with the L2 flush by writing). Exit status 0 only if every harness
# passed and every mutant failed.
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
: >"$out/mutants.txt"
for m in "layernorm_forward_mutant1 5" "layernorm_forward_mutant1 6" "layernorm_backward_mutant1 3" "layernorm_backward_mutant2 4"; do
    set -- $m
    log=$(./"$1" "$2" 2>&1)
    rc=$?
    if [ "$rc" -eq 1 ] && printf '%s\n' "$log" | grep -q MISMATCH; then line="mutant $1 (version $2): caught"
    else line="mutant $1 (version $2): NOT caught (exit $rc)"; status=1; fi
    echo "$line"
    { echo "== $line"; printf '%s\n' "$log"; } >>"$out/mutants.txt"
done
grep -q "NOT caught" "$out/mutants.txt" && status=1
python3 bench_torch.py 2>&1 | tee "$out/torch.txt"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
# the same timings with the old flush (a write: the timed calls also write back its dirty lines)
for cmd in ./layernorm_forward ./layernorm_backward "python3 bench_torch.py"; do
    echo "== DEV_CUDA_FLUSH=write $cmd"; DEV_CUDA_FLUSH=write $cmd 2>&1 | grep -v '^  MISMATCH'
done >"$out/write_flush.txt"
tail -n 12 "$out/write_flush.txt"
exit $status
