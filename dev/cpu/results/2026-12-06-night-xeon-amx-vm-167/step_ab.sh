#!/bin/bash
# usage: step_ab.sh T steps rounds "ENV_A" "ENV_B" [binary]
T=$1; X=$2; R=$3; A=$4; B=$5; BIN=${6:-./train_gpt2}
last=$((X - 4))
for r in $(seq 1 $R); do
  for cfg in "$A" "$B"; do
    out=$(env $cfg OMP_NUM_THREADS=2 $BIN -e d12 -b 4 -t $T -x $X -v 0 -s 0 --shuffle 0 --precision bf16 --profile 1 2>&1)
    echo "$out" | awk -v cfg="[$cfg]" -v T=$T -v skip=4 '
      /^step/ {s++} 
      s>skip && /^  matmul/ {mf+=$2; mb+=$3; n++}
      s>skip && /^  adamw/ {ad+=$2}
      s>skip && /^  sum/ {st+=$2}
      END {printf "T=%-5s %-28s matmul fwd %.1f bwd %.1f adamw %.1f step %.1f (%d steps)\n", T, cfg, mf/n, mb/n, ad/n, st/n, n}'
  done
done
