# make bench-mpi: data-parallel training of GPT-2 124M (d12) on this machine's cores.
# 2 ranks x 1 thread (mpirun, shared-memory transport: OpenMPI's vader BTL) against
# 1 rank x 2 threads, at the same per-rank batch, B=4 T=64 and B=8 T=256: tokens/s, the
# share of each step spent communicating (the collectives, timed inside llmc/collectives.h, less
# "wait": a barrier's wait for the slower rank before the gradient sum), and the scaling efficiency = tokens/s of 2 x 1 / tokens/s of 1 x 2.
# Each 2-rank layout runs twice, side by side: the gradient sums overlapped with the backward
# pass (the default; "comm" is then the time in MPI calls during the step: the exposed part)
# and blocking after it (LLMC_OVERLAP=0).
# Each figure is the median over the steps after the first (warm-up) one.
#   STEPS=N (default 4: 3 timed)   SHAPES="B:T ..." (default "4:64 8:256")
#   ZERO_STAGES="0 1" (the -z of the 2-rank runs)   OVERLAPS="0 1" (the LLMC_OVERLAP values)
set -u
cd "$(dirname "$0")/../.."
STEPS=${STEPS:-4}
SHAPES=${SHAPES:-"4:64 8:256"}
ZERO_STAGES=${ZERO_STAGES:-"0 1"}
OVERLAPS=${OVERLAPS:-"0 1"}
command -v mpirun > /dev/null || { echo "mpirun not found (make setup installs OpenMPI)"; exit 1; }
ldd ./train_gpt2 | grep -q libmpi || { echo "./train_gpt2 is not built with MPI (make, with mpicc installed)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
COMMON=(-e d12 -x "$STEPS" -v 0 -s 0 --shuffle 0)
MPIRUN=(mpirun -q --allow-run-as-root --mca btl self,vader --bind-to core -np 2 -x OMP_NUM_THREADS=1)

# median of the steps after the first: "ms tok/s comm_ms"
stats() {
    awk 'BEGIN { n = 0 } /^step +[0-9]+\/[0-9]+ \|/ { split($2, s, "/"); if (s[1] < 2) next
             for (i = 1; i <= NF; i++) { if ($i == "ms" && $(i-2) != "comm") ms[n] = $(i-1); if ($i == "tok/s") tk[n] = $(i-1)
                                         if ($i == "comm") cm[n] = $(i+1); if ($i == "(wait") wt[n] = $(i+1) + 0 }
             n++ }
         function med(a,   i, j, t, m) { m = n; for (i = 0; i < m; i++) b[i] = a[i] + 0
             for (i = 1; i < m; i++) { t = b[i]; for (j = i - 1; j >= 0 && b[j] > t; j--) b[j+1] = b[j]; b[j+1] = t }
             return m % 2 ? b[int(m/2)] : (b[m/2-1] + b[m/2]) / 2 }
         END { if (n == 0) { print "- - - -"; exit 1 } printf "%.1f %.0f %.1f %.1f\n", med(ms), med(tk), med(cm), med(wt) }' "$1"
}

echo "GPT-2 124M (d12), $(nproc) cores: $(lscpu | sed -n 's/^Model name: *//p'); $STEPS steps each, medians of the last $((STEPS - 1))"
echo "(other processes share this machine: the timings are noisy); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-10s %-26s %10s %10s %10s %10s %8s %11s\n" "B x T" "layout" "step ms" "tok/s" "comm ms" "wait ms" "comm %" "efficiency"
for shape in $SHAPES; do
    B=${shape%:*}; T=${shape#*:}
    OMP_NUM_THREADS=2 ./train_gpt2 "${COMMON[@]}" -b "$B" -t "$T" > "$tmp/one.out" 2>&1 || { echo "1 x 2 failed: $(tail -n 1 "$tmp/one.out")"; exit 1; }
    read -r ms1 tok1 _ <<< "$(stats "$tmp/one.out")"
    printf "%-10s %-26s %10s %10s %10s %10s %8s %11s\n" "${B}x${T}" "1 rank x 2 thr" "$ms1" "$tok1" "-" "-" "-" "-"
    for z in $ZERO_STAGES; do
        for overlap in $OVERLAPS; do
            "${MPIRUN[@]}" -x LLMC_OVERLAP=$overlap ./train_gpt2 "${COMMON[@]}" -b "$B" -t "$T" -z $z > "$tmp/two.out" 2>&1 ||
                { echo "2 x 1 failed: $(tail -n 3 "$tmp/two.out")"; exit 1; }
            read -r ms2 tok2 comm2 wait2 <<< "$(stats "$tmp/two.out")"
            xfer=$(awk -v c="$comm2" -v w="$wait2" 'BEGIN { printf "%.1f", c - w }')
            share=$(awk -v c="$xfer" -v m="$ms2" 'BEGIN { printf "%.1f%%", 100 * c / m }')
            eff=$(awk -v a="$tok2" -v b="$tok1" 'BEGIN { printf "%.1f%%", 100 * a / b }')
            layout="2 ranks x 1, z$z, $([ "$overlap" = 1 ] && echo overlap || echo blocking)"
            printf "%-10s %-26s %10s %10s %10s %10s %8s %11s\n" "${B}x${T}" "$layout" "$ms2" "$tok2" "$xfer" "$wait2" "$share" "$eff"
        done
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
