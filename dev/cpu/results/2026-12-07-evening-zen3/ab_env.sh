#!/bin/bash
# usage: ab_env.sh T steps rounds ENV1 ENV2 ...: one train_gpt2 (bf16, --profile 1) with each
# environment setting in turn, round after round: the matmul line (forward, backward) and the step,
# means over the steps after the 4th.
T=$1; X=$2; R=$3; shift 3
d=data/tinyshakespeare
for r in $(seq 1 "$R"); do
  for e in "$@"; do
    env "$e" OMP_WAIT_POLICY=ACTIVE ./train_gpt2 -e d12 -b 4 -t "$T" -x "$X" -v 0 -s 0 --shuffle 0 --precision bf16 --profile 1 \
        -i $d/tiny_shakespeare_train_000000.bin -j $d/tiny_shakespeare_val_000000.bin 2>&1 |
    awk -v e="$e" -v T="$T" '/^step/ {s++} s>4 && /^  matmul/ {mf+=$2; mb+=$3} s>4 && /^  sum/ {st+=$2; n++}
      END {printf "T=%-5s %-18s matmul fwd %7.1f bwd %7.1f step %7.1f (%d steps)\n", T, e, mf/n, mb/n, st/n, n}'
  done
done
