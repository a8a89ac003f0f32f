#!/bin/bash
# prec_ab.sh T steps rounds BIN: fp32 (A) against bf16 (B) steps of one build alternated
T=$1; X=$2; R=$3; BIN=$4
d=data/tinyshakespeare
one() { OMP_NUM_THREADS=2 OMP_WAIT_POLICY=ACTIVE $BIN -e d12 -b 4 -t $T -x $X -v 0 -s 0 --shuffle 0 --precision $1 -i $d/tiny_shakespeare_train_000000.bin -j $d/tiny_shakespeare_val_000000.bin 2>&1 |
  awk '/^step/ {n++; if (n > 3) {for (i=1;i<=NF;i++) if ($(i+1)=="ms") {s+=$i; k++}}} END {printf "%.1f", s/k}'; }
for r in $(seq 1 $R); do
  if [ $((r % 2)) = 1 ]; then a=$(one fp32); b=$(one bf16); else b=$(one bf16); a=$(one fp32); fi
  echo "round $r T=$T: fp32 $a ms  bf16 $b ms  bf16/fp32 $(echo "$b / $a" | bc -l | cut -c1-5)"
done
