#!/bin/bash
# usage: ab.sh T steps rounds bin1 bin2 ...: gelu, matmul and step ms, means over steps after the 4th
T=$1; X=$2; R=$3; shift 3
for r in $(seq 1 $R); do
  for bin in "$@"; do
    OMP_NUM_THREADS=2 OMP_WAIT_POLICY=ACTIVE $bin -e d12 -b 4 -t $T -x $X -v 0 -s 0 --shuffle 0 --precision bf16 --profile 1 2>&1 |
    awk -v b=$bin -v T=$T '/^step/ {s++} s>4 && /^  gelu/ {ge+=$4; n++} s>4 && /^  matmul/ {mm+=$3; mb+=$4} s>4 && /^  sum/ {st+=$2}
      END {printf "T=%-5s %-16s gelu %7.1f matmul bwd %7.1f all %7.1f step %7.1f (%d steps)\n", T, b, ge/n, mm/n, mb/n, st/n, n}'
  done
done
