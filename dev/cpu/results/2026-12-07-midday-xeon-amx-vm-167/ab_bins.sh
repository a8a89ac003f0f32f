#!/bin/bash
# usage: ab_bins.sh T steps rounds bin1 bin2 ...: each bin's attention and step ms, medians over steps after the 4th
T=$1; X=$2; R=$3; shift 3
for r in $(seq 1 $R); do
  for bin in "$@"; do
    OMP_NUM_THREADS=2 OMP_WAIT_POLICY=ACTIVE $bin -e d12 -b 4 -t $T -x $X -v 0 -s 0 --shuffle 0 --precision bf16 --profile 1 2>&1 |
    awk -v b=$bin -v T=$T 'BEGIN{n=0} /^step/ {s++} s>4 && /^  attention/ {at+=$4; n++} s>4 && /^  sum/ {st+=$2}
      /loss/ && s==4 {l=$5} END {printf "T=%-5s %-16s attention %7.1f step %7.1f (%d steps)\n", T, b, at/n, st/n, n}'
  done
done
