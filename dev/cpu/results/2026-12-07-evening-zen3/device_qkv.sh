#!/bin/bash
# One device call (Xeon host with AMX): qkv's dqkv as bf16 bits on the AMX path.
#  1. 10 bf16 steps with LLMC_BF16_DQKV=0 and =1 give the same checkpoint and log (losses, norms);
#  2. bias_bf16_ab, qkv and fc, at T=1024 and T=64 (weight panels, as the step on AMX);
#  3. whole steps, LLMC_BF16_DQKV=0 and 1 alternated (ab_env.sh), T=1024 and T=64.
# Writes into $OUT (default /tmp/out).
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
here=$(cd "$(dirname "$0")" && pwd)
{ date -u; lscpu | grep -E 'Model name|^Model:|^CPU\(s\)'; lscpu | grep -o 'amx[a-z0-9_]*' | sort -u | tr '\n' ' '; echo; gcc --version | head -1; git log --oneline -1; } > "$OUT/env.txt" 2>&1
make -s train_gpt2 > "$OUT/build.txt" 2>&1 || { cat "$OUT/build.txt"; exit 1; }
(cd dev/cpu && gcc -O3 -std=gnu11 -march=native -fopenmp -I../.. -I. "$here/bias_bf16_ab.c" -o /tmp/bias_ab -lm) >> "$OUT/build.txt" 2>&1 || { cat "$OUT/build.txt"; exit 1; }
d=data/tinyshakespeare
run() {  # run DIR ENV...: 10 bf16 steps at B=4 T=64 from a fresh d12, a checkpoint at the end
    local dir=$1; shift
    env "$@" OMP_NUM_THREADS=2 taskset -c 0,1 ./train_gpt2 -e d12 -b 4 -t 64 -x 10 -v 5 -m 2 -s 0 -n 10 --shuffle 0 \
        -i $d/tiny_shakespeare_train_000000.bin -j $d/tiny_shakespeare_val_000000.bin --precision bf16 -o "$dir" > "$dir.out" 2>&1
}
{
    run /tmp/q0 LLMC_BF16_DQKV=0; run /tmp/q1 LLMC_BF16_DQKV=1
    grep -m1 -i 'bf16' /tmp/q1.out
    if cmp /tmp/q0/model_00000010.bin /tmp/q1/model_00000010.bin && cmp /tmp/q0/state_00000010.bin /tmp/q1/state_00000010.bin &&
        diff <(sed 's/ ms:.*//' /tmp/q0/main.log) <(sed 's/ ms:.*//' /tmp/q1/main.log); then
        echo "LLMC_BF16_DQKV=0 and 1: the same checkpoint and log after 10 steps"
    else
        echo "LLMC_BF16_DQKV=0 and 1: DIFFER"
    fi
    tail -n 3 /tmp/q1/main.log
} > "$OUT/bits.txt" 2>&1
{
    for m in qkv fc qkv fc; do for N in 4096 256; do OMP_NUM_THREADS=2 taskset -c 0,1 /tmp/bias_ab $m $N 15 1; done; done
} > "$OUT/bias_bf16_ab.txt" 2>&1
{
    OMP_NUM_THREADS=2 taskset -c 0,1 bash "$here/ab_env.sh" 1024 8 3 LLMC_BF16_DQKV=0 LLMC_BF16_DQKV=1
    OMP_NUM_THREADS=2 taskset -c 0,1 bash "$here/ab_env.sh" 64 24 3 LLMC_BF16_DQKV=0 LLMC_BF16_DQKV=1
} > "$OUT/steps.txt" 2>&1
cat "$OUT"/*.txt
