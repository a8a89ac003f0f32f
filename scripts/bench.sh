#!/usr/bin/env bash
# make bench: train_gpt2 against PyTorch (scripts/bench_pytorch.py) on GPT-2 124M,
# same batch, data and thread count, run interleaved (ours, PyTorch, ours, PyTorch)
# so both see the same machine state. Prints ms/step (median of the timed steps),
# tokens/s, MFU against the measured fp32 FMA peak, peak RSS, and the ratios.
#   THREADS=2 ROUNDS=2 SHAPES="4x64 4x1024" bash scripts/bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-2}
SHAPES=${SHAPES:-"4x64 4x1024"}
PY=/usr/bin/python3
shard=data/tinyshakespeare/tiny_shakespeare_train_000000.bin
[ -f $shard ] || { echo "error: $shard missing: run make setup (or make data) first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

peak=$(OMP_NUM_THREADS=$THREADS dev/cpu/fma_peak | sed -n 's/^fp32 FMA peak: \([0-9.]*\) GFLOP.*/\1/p')
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; fp32 FMA peak $peak GFLOP/s with $THREADS threads"
echo "date: $(date -u +%Y-%m-%d)"

median() { sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

for shape in $SHAPES; do
    B=${shape%x*}; T=${shape#*x}
    steps=$([ "$T" -ge 512 ] && echo 3 || echo 6)
    : > "$tmp/ours_ms"; : > "$tmp/torch_ms"; : > "$tmp/ours_rss"; : > "$tmp/torch_rss"
    for round in $(seq 1 "$ROUNDS"); do
        echo "-- B=$B T=$T round $round: train_gpt2"
        OMP_NUM_THREADS=$THREADS ./train_gpt2 -e d12 -b "$B" -t "$T" -x $((steps + 1)) -v 0 -s 0 --shuffle 0 \
            -i "$shard" > "$tmp/ours.out"
        grep '^step' "$tmp/ours.out" | tail -n "$steps" | sed 's/.*| \([0-9.]*\) ms |.*/\1/' | tee -a "$tmp/ours_ms" | tr '\n' ' '; echo
        sed -n 's/^peak RSS: \([0-9.]*\) MiB/\1/p' "$tmp/ours.out" >> "$tmp/ours_rss"
        echo "-- B=$B T=$T round $round: PyTorch"
        env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=$THREADS \
            $PY scripts/bench_pytorch.py --depth d12 -B "$B" -T "$T" --steps "$steps" --threads "$THREADS" --shard $shard > "$tmp/torch.out"
        grep '^pytorch step' "$tmp/torch.out" | tail -n "$steps" | sed 's/.* \([0-9.]*\) ms$/\1/' | tee -a "$tmp/torch_ms" | tr '\n' ' '; echo
        sed -n 's/.*peak_rss_mb=\([0-9.]*\).*/\1/p' "$tmp/torch.out" >> "$tmp/torch_rss"
    done
    ours=$(median < "$tmp/ours_ms"); torch=$(median < "$tmp/torch_ms")
    ours_rss=$(sort -n "$tmp/ours_rss" | tail -n 1); torch_rss=$(sort -n "$tmp/torch_rss" | tail -n 1)
    # model FLOPs of a step: 3x the forward's matmuls (2*B*T*(12*L*C^2 + C*Vp)) and causal attention
    awk -v B="$B" -v T="$T" -v ours="$ours" -v torch="$torch" -v peak="$peak" -v ro="$ours_rss" -v rt="$torch_rss" 'BEGIN {
        L = 12; C = 768; NH = 12; Vp = 50304; hs = C / NH
        fwd = 2 * B * T * (12 * L * C * C + C * Vp) + L * 4 * B * NH * hs * T * (T + 1) / 2
        gflop = 3 * fwd / 1e9
        printf "RESULT B=%d T=%d (%.0f GFLOP/step): train_gpt2 %.0f ms/step, %.0f tok/s, %.1f GFLOP/s, MFU %.1f%%, peak RSS %.0f MiB\n",
            B, T, gflop, ours, B * T / ours * 1e3, gflop / ours * 1e3, 100 * gflop / ours * 1e3 / peak, ro
        printf "RESULT B=%d T=%d: PyTorch %.0f ms/step, %.0f tok/s, %.1f GFLOP/s, MFU %.1f%%, peak RSS %.0f MiB\n",
            B, T, torch, B * T / torch * 1e3, gflop / torch * 1e3, 100 * gflop / torch * 1e3 / peak, rt
        printf "RESULT B=%d T=%d: train_gpt2 is %.2fx PyTorch'\''s step rate, with %.2fx its peak RSS\n", B, T, torch / ours, ro / rt
    }'
done
