#!/usr/bin/env bash
# make bench-generate: generate's speed on GPT-2 124M (a random d12 with llm.c's
# initialization: the speed does not depend on the weights) at batch 1, fp32:
# - tokens/s of incremental decoding (one position per token, after the prompt),
#   against the memory-bandwidth bound: a token reads every weight once (all but
#   wpe, of which one row), so the bound is dev/cpu/read_bandwidth's GB/s over
#   those bytes; the goal is >= 70% of it;
# - the whole generation (prompt + N tokens, greedy) against a PyTorch loop that
#   re-runs the full sequence for every token (scripts/bench_generate.py), same
#   model file, prompt, thread count; run interleaved, ROUNDS times, best of each.
# OMP_WAIT_POLICY defaults to passive here: on a shared, oversubscribed machine, threads
# that spin at the ~100 small parallel regions of a token wait for each other's time
# slices (5-10x slower); on a quiet machine passive costs a futex wake per region (~1%).
#   THREADS=2 ROUNDS=2 NEW=64 OMP_WAIT_POLICY=active bash scripts/bench_generate.sh
set -euo pipefail
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-2}
NEW=${NEW:-64}
PY=/usr/bin/python3
[ -f data/gpt2/encoder.json ] || { echo "error: data/gpt2/encoder.json missing: run make setup (or make data) first" >&2; exit 1; }
[ -x ./generate ] && [ -x ./tokenize ] && [ -x dev/cpu/read_bandwidth ] || { echo "error: build first: make generate tokenize; make -C dev/cpu read_bandwidth" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $THREADS threads (OMP_WAIT_POLICY=$OMP_WAIT_POLICY); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
$PY scripts/bench_generate.py --write-model "$tmp/d12.bin" --depth d12
printf 'First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\nFirst Citizen:\nYou are all resolved rather to die than to famish?\n' > "$tmp/prompt.txt"
./tokenize --vocab data/gpt2 "$tmp/prompt.txt" > "$tmp/prompt.ids"
# bytes a token reads: every parameter but wpe's other rows (header words 2..7: maxT V L NH C Vp)
read -r maxT L C Vp < <($PY -c "
import numpy as np; h = np.fromfile('$tmp/d12.bin', np.int32, 8); print(h[2], h[4], h[6], h[7])")
params=$(( Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C ))
bytes=$(( (params - (maxT - 1) * C) * 4 ))

best() { sort -g | tail -n 1; }
: > "$tmp/bw"; : > "$tmp/ours_step"; : > "$tmp/ours_total"; : > "$tmp/torch"
for round in $(seq 1 "$ROUNDS"); do
    OMP_NUM_THREADS=$THREADS dev/cpu/read_bandwidth 1024 | tee "$tmp/bw.out"
    sed -n 's/.*: \([0-9.]*\) GB\/s with.*/\1/p' "$tmp/bw.out" >> "$tmp/bw"
    start=$(date +%s.%N)
    OMP_NUM_THREADS=$THREADS ./generate -e "$tmp/d12.bin" -f "$tmp/prompt.txt" -n "$NEW" --temperature 0 \
        > "$tmp/ours.txt" 2> "$tmp/ours.err"
    end=$(date +%s.%N)
    tail -n 1 "$tmp/ours.err"
    grep -q "generated $NEW tokens" "$tmp/ours.err" || { echo "error: generate stopped early: $(tail -n 1 "$tmp/ours.err")" >&2; exit 1; }
    sed -n 's/.*tokens: \([0-9.]*\) tok\/s after the first.*/\1/p' "$tmp/ours.err" >> "$tmp/ours_step"
    # the whole run minus start-up (allocation and loading): prompt + NEW tokens
    awk -v p="$(sed -n 's/^prompt: [0-9]* tokens in \([0-9.]*\) ms.*/\1/p' "$tmp/ours.err")" \
        -v s="$(sed -n 's/.*(\([0-9.]*\) ms per token).*/\1/p' "$tmp/ours.err")" -v n="$NEW" \
        'BEGIN { printf "%.3f\n", n / ((p + s * (n - 1)) / 1000) }' >> "$tmp/ours_total"
    env -u OPENBLAS_CORETYPE OMP_NUM_THREADS=$THREADS $PY scripts/bench_generate.py --model "$tmp/d12.bin" \
        --prompt-ids "$tmp/prompt.ids" -n "$NEW" --threads "$THREADS" | tee "$tmp/torch.out"
    sed -n 's/.*tok_per_s=\([0-9.]*\).*/\1/p' "$tmp/torch.out" >> "$tmp/torch"
done
bw=$(best < "$tmp/bw"); step=$(best < "$tmp/ours_step"); total=$(best < "$tmp/ours_total"); torch=$(best < "$tmp/torch")
awk -v bw="$bw" -v bytes="$bytes" -v step="$step" -v total="$total" -v torch="$torch" -v n="$NEW" \
    -v p="$(wc -l < "$tmp/prompt.ids")" 'BEGIN {
    bound = bw * 1e9 / bytes
    printf "GPT-2 124M fp32, batch 1: %.1f MB of weights read per token\n", bytes / 1e6
    printf "bandwidth bound: %.1f GB/s / %.1f MB = %.2f tok/s\n", bw, bytes / 1e6, bound
    printf "generate, incremental decoding: %.2f tok/s = %.0f%% of the bound (goal >= 70%%)\n", step, 100 * step / bound
    printf "prompt of %d tokens + %d new, greedy: generate %.2f tok/s, PyTorch full-sequence loop %.2f tok/s: %.1fx (goal >= 5x)\n",
           p, n, total, torch, total / torch
}'
