#!/bin/bash
# step_ab.sh T steps rounds BIN_A BIN_B: fp32 steps of two train_gpt2 builds alternated (A first in odd rounds,
# B first in even), mean ms of the steps after the 3rd
T=$1; X=$2; R=$3; A=$4; B=$5
d=data/tinyshakespeare  # run from the repository root
one() { OMP_NUM_THREADS=2 OMP_WAIT_POLICY=ACTIVE $1 -e d12 -b 4 -t $T -x $X -v 0 -s 0 --shuffle 0 -i $d/tiny_shakespeare_train_000000.bin -j $d/tiny_shakespeare_val_000000.bin 2>&1 |
  awk '/^step/ {n++; if (n > 3) {for (i=1;i<=NF;i++) if ($(i+1)=="ms") {s+=$i; k++}}} END {printf "%.1f", s/k}'; }
for r in $(seq 1 $R); do
  if [ $((r % 2)) = 1 ]; then a=$(one $A); b=$(one $B); else b=$(one $B); a=$(one $A); fi
  echo "round $r T=$T: A $a ms  B $b ms  A/B $(echo "$a / $b" | bc -l | cut -c1-5)"
done
