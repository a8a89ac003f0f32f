#!/usr/bin/env bash
# make bench: train_gpt2 against PyTorch (scripts/bench_pytorch.py) on GPT-2 124M, with
# PyTorch set up the way a careful PyTorch user would set it up on this CPU:
#  - tcmalloc preloaded (LD_PRELOAD of Debian's libgoogle-perftools4), OMP_NUM_THREADS,
#    OPENBLAS_NUM_THREADS and torch.set_num_threads all equal to train_gpt2's thread count,
#    OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset for PyTorch's command;
#  - a calibration pass first: each candidate OpenMP/ATen setting (CANDIDATES below: wait
#    policy PASSIVE or ACTIVE, threads bound to cores or not, AVX-512 ATen kernels, inter-op
#    threads) runs a few steps at B=4 T=64, in fp32 and in bf16 autocast; the fastest setting
#    of each precision is kept and printed;
#  - fp32 and bf16 autocast (torch.autocast("cpu", dtype=torch.bfloat16): oneDNN's bf16 matmuls),
#    the latter on CPUs with AVX-512 (TORCH_BF16=auto): on Zen 3 (AVX2 only) a step of it took
#    70 s at B=4 T=64, 34x PyTorch fp32's, which makes it no one's best setting there and
#    would make this benchmark last hours (TORCH_BF16=1 runs it anyway, 0 never).
# Then, per shape and round, interleaved so that all see the same machine state:
# train_gpt2 fp32, train_gpt2 --precision bf16 (where this build has the flag), PyTorch
# fp32, PyTorch bf16, train_gpt2 --precision bf16 --recompute 1 (activation checkpointing:
# the memory-saving option; where this build has the flag). Same model, batches from the
# same shard, same thread count.
# Prints per row: ms/step (median of the timed steps after one warm-up step, over all
# rounds), tokens/s, model GFLOP/s, MFU (fp32 rows against the fp32 FMA peak, bf16 rows
# against the bf16 dot-product peak, both measured by dev/cpu/fma_peak), peak RSS; then
# the ratios fp32/fp32, bf16/bf16, our best/their best (of the rows without recompute), and
# bf16 with recompute/PyTorch bf16.
#
# MFU = model FLOPs per step / step time / peak. Model FLOPs of a step = 3 x the forward's
# (backward = 2 x forward), forward = 2*B*T*(12*L*C^2 + C*Vp) (the four linear layers and
# the LM head: 2 flops per multiply-add) + L*4*B*NH*hs*T*(T+1)/2 (causal attention: the
# T(T+1)/2 scores and the weighted sum of V, hs = C/NH). The same count for both programs,
# whatever work they actually do (PyTorch computes the masked half of the scores too).
#
# Overrides (all optional):
#   THREADS=2 ROUNDS=2 SHAPES="4x64 4x1024" MODEL=d12 CALIBRATE=1 CAL_SHAPE=4x64 CAL_STEPS=3
#   STEPS= (timed steps per run; default 6, 3 when T >= 512) TORCH_BF16=auto
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-2}
SHAPES=${SHAPES:-"4x64 4x1024"}
MODEL=${MODEL:-d12}
CALIBRATE=${CALIBRATE:-1}
CAL_SHAPE=${CAL_SHAPE:-4x64}
CAL_STEPS=${CAL_STEPS:-3}
STEPS=${STEPS:-}
TORCH_BF16=${TORCH_BF16:-auto}
PY=$PWD/.venv/bin/python
shard=data/tinyshakespeare/tiny_shakespeare_train_000000.bin

die() { echo "error: $*" >&2; exit 1; }
posint() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1=$2: expected a positive integer"; }
posint THREADS "$THREADS"; posint ROUNDS "$ROUNDS"; posint CAL_STEPS "$CAL_STEPS"
[ -z "$STEPS" ] || posint STEPS "$STEPS"
[[ $CALIBRATE =~ ^[01]$ ]] || die "CALIBRATE=$CALIBRATE: expected 0 or 1"
[[ $TORCH_BF16 =~ ^(auto|0|1)$ ]] || die "TORCH_BF16=$TORCH_BF16: expected auto, 0 or 1"
for shape in $SHAPES $CAL_SHAPE; do
    [[ $shape =~ ^[1-9][0-9]*x[1-9][0-9]*$ ]] || die "shape '$shape' in SHAPES/CAL_SHAPE: expected BxT, e.g. 4x64"
    [ "${shape#*x}" -le 1024 ] || die "shape '$shape' in SHAPES/CAL_SHAPE: T is at most 1024 (GPT-2's context)"
done
[ -n "$SHAPES" ] || die "SHAPES is empty"
# layers, channels, heads of the models both programs can build
case $MODEL in
    d6) L=6 C=384 NH=6 ;; d12) L=12 C=768 NH=12 ;; d24) L=24 C=1024 NH=16 ;;
    d36) L=36 C=1280 NH=20 ;; d48) L=48 C=1600 NH=25 ;;
    *) die "MODEL=$MODEL: expected one of d6 d12 d24 d36 d48" ;;
esac
[ -x ./train_gpt2 ] || die "./train_gpt2 missing: run make first"
[ -x dev/cpu/fma_peak ] || die "dev/cpu/fma_peak missing: run make -C dev/cpu fma_peak first"
[ -f $shard ] || die "$shard missing: run make setup (or make data) first"
tcmalloc=$(dpkg -L libgoogle-perftools4 2> /dev/null | grep -m 1 -E '/libtcmalloc\.so\.[0-9]+$' || true)
[ -n "$tcmalloc" ] && [ -f "$tcmalloc" ] ||
    die "tcmalloc not found (dpkg -L libgoogle-perftools4): install Debian's libgoogle-perftools4 (make setup does)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

OMP_NUM_THREADS=$THREADS dev/cpu/fma_peak > "$tmp/peak"
peak_fp32=$(sed -n 's/^fp32 FMA peak: \([0-9.]*\) GFLOP.*/\1/p' "$tmp/peak")
peak_bf16=$(sed -n 's/^bf16 dot peak: \([0-9.]*\) GFLOP.*/\1/p' "$tmp/peak")  # empty: no bf16 dot unit
[ -n "$peak_fp32" ] || die "dev/cpu/fma_peak printed no fp32 peak: $(head -n 1 "$tmp/peak")"
cpu_flags=$(grep -m 1 '^flags' /proc/cpuinfo)
flags_that_matter=""
for f in avx2 fma avx512f avx512_bf16 amx_bf16; do
    [[ " $cpu_flags " == *" $f "* ]] && flags_that_matter="$flags_that_matter $f"
done
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, flags:$flags_that_matter"
echo "peaks with $THREADS threads (dev/cpu/fma_peak): fp32 FMA $peak_fp32 GFLOP/s, bf16 dot ${peak_bf16:-none (no AVX512_BF16)}${peak_bf16:+ GFLOP/s}"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d ' ' -f 1-3 /proc/loadavg)"
# PyTorch bf16 autocast: where it runs, and why not where it does not (the row's note)
torch_bf16=$TORCH_BF16 torch_bf16_note="not run: TORCH_BF16=0"
if [ "$torch_bf16" = auto ]; then
    torch_bf16=0 torch_bf16_note="not run: no AVX-512 on this CPU, where it is far slower than PyTorch fp32 (TORCH_BF16=1 runs it)"
    [[ " $cpu_flags " == *" avx512bw "* ]] && torch_bf16=1
fi
[ $torch_bf16 = 1 ] || echo "PyTorch bf16 autocast: $torch_bf16_note"

ours_bf16=0 ours_recompute=0
./train_gpt2 -h 2>&1 | grep -q -- --precision && ours_bf16=1
./train_gpt2 -h 2>&1 | grep -q -- --recompute && ours_recompute=1

median() { sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# run_ours PRECISION B T STEPS: the timed steps to stdout, one "STEP MS" line each (the warm-up step
# is step 0, so the timed ones are 1..STEPS), peak RSS (MiB) to $tmp/rss. PRECISION fp32, bf16,
# or bf16r (bf16 with --recompute 1).
run_ours() {
    local flags=()
    case $1 in bf16) flags=(--precision bf16) ;; bf16r) flags=(--precision bf16 --recompute 1) ;; esac
    OMP_NUM_THREADS=$THREADS ./train_gpt2 -e "$MODEL" -b "$2" -t "$3" -x $(($4 + 1)) -v 0 -s 0 --shuffle 0 \
        -i "$shard" "${flags[@]}" > "$tmp/ours.out" 2>&1 || { cat "$tmp/ours.out" >&2; die "train_gpt2 failed"; }
    sed -n 's/^peak RSS: \([0-9.]*\) MiB/\1/p' "$tmp/ours.out" > "$tmp/rss"
    sed -n 's/^step *\([0-9]*\)\/.*| \([0-9.]*\) ms |.*/\1 \2/p' "$tmp/ours.out" |
        awk '$1 >= 2 { print $1 - 1, $2 }'  # train_gpt2 counts steps from 1
}

# The candidate settings of PyTorch's OpenMP runtime (Debian's PyTorch uses GNU libgomp, so
# KMP_* variables do nothing; OMP_PROC_BIND/OMP_PLACES are its affinity) and ATen. Words
# starting with -- are bench_pytorch.py flags, the others environment variables.
CANDIDATES=(
    "OMP_WAIT_POLICY=PASSIVE"
    "OMP_WAIT_POLICY=ACTIVE"
    "OMP_WAIT_POLICY=PASSIVE OMP_PROC_BIND=close OMP_PLACES=cores"
    "OMP_WAIT_POLICY=ACTIVE OMP_PROC_BIND=close OMP_PLACES=cores"
    "OMP_WAIT_POLICY=PASSIVE --interop $THREADS"
)
# ATen's AVX-512 kernels, which PyTorch 1.13 does not pick by itself on this CPU
[[ " $cpu_flags " == *" avx512bw "* ]] && CANDIDATES+=("OMP_WAIT_POLICY=PASSIVE ATEN_CPU_CAPABILITY=avx512")

# run_torch PRECISION "CANDIDATE" B T STEPS: as run_ours
run_torch() {
    local vars=() args=() w
    for w in $2; do if [[ $w == --* ]]; then args+=("$w"); elif [[ $w == *=* ]]; then vars+=("$w"); else args+=("$w"); fi; done
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u OMP_WAIT_POLICY -u OMP_PROC_BIND -u OMP_PLACES \
        -u GOMP_CPU_AFFINITY -u GOMP_SPINCOUNT -u ATEN_CPU_CAPABILITY \
        LD_PRELOAD="$tcmalloc" OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS" "${vars[@]}" \
        $PY scripts/bench_pytorch.py --depth "$MODEL" -B "$3" -T "$4" --steps "$5" --threads "$THREADS" \
        --precision "$1" --shard $shard "${args[@]}" > "$tmp/torch.out" 2>&1 ||
        { cat "$tmp/torch.out" >&2; die "scripts/bench_pytorch.py failed ($1, $2)"; }
    grep -q 'allocator tcmalloc' "$tmp/torch.out" || die "PyTorch did not load $tcmalloc"
    sed -n 's/.*peak_rss_mb=\([0-9.]*\).*/\1/p' "$tmp/torch.out" > "$tmp/rss"
    sed -n 's/^pytorch step \([0-9]*\):.* \([0-9.]*\) ms$/\1 \2/p' "$tmp/torch.out" | awk '$1 >= 1'
}

# Calibration: every candidate in both precisions, interleaved; each keeps the median of
# its timed steps, and the fastest candidate of each precision wins. A candidate gives up
# as soon as its median is over twice the best so far (under a busy machine, a spinning
# OMP_WAIT_POLICY=ACTIVE can be 5x slower, and would otherwise take minutes).
best_fp32=${CANDIDATES[0]}; best_bf16=${CANDIDATES[0]}
cal_precisions="fp32"; [ $torch_bf16 = 1 ] && cal_precisions="fp32 bf16"
if [ "$CALIBRATE" = 1 ]; then
    cB=${CAL_SHAPE%x*}; cT=${CAL_SHAPE#*x}
    echo "-- calibration of PyTorch's settings: $MODEL B=$cB T=$cT, $CAL_STEPS timed steps after a warm-up, tcmalloc, OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=$THREADS"
    for prec in fp32 bf16; do echo "inf" > "$tmp/cal_best_$prec"; done
    for cand in "${CANDIDATES[@]}"; do
        for prec in $cal_precisions; do
            best=$(cat "$tmp/cal_best_$prec")
            give_up=$([ "$best" = inf ] || awk -v b="$best" 'BEGIN { printf "--give-up-ms %.1f", 2 * b }')
            ms=$(run_torch $prec "$cand $give_up" "$cB" "$cT" "$CAL_STEPS" | cut -d ' ' -f 2 | median)
            note=$(grep -q '^pytorch: gave up' "$tmp/torch.out" && echo " (gave up: over twice the best)" || true)
            printf -- '-- calibration %s %-62s %8.1f ms/step%s\n' "$prec" "$cand" "$ms" "$note"
            if awk -v a="$ms" -v b="$(cat "$tmp/cal_best_$prec")" 'BEGIN { exit !(b == "inf" || a < b) }'; then
                echo "$ms" > "$tmp/cal_best_$prec"
                if [ $prec = fp32 ]; then best_fp32=$cand; else best_bf16=$cand; fi
            fi
        done
    done
    setting_note="the fastest of ${#CANDIDATES[@]} candidates in calibration"
else
    setting_note="calibration skipped: CALIBRATE=0"
fi
echo "PyTorch fp32 setting: tcmalloc, $THREADS threads, $best_fp32 ($setting_note)"
[ $torch_bf16 = 1 ] && echo "PyTorch bf16 setting: tcmalloc, $THREADS threads, $best_bf16 ($setting_note)"

ROWS=("ours fp32" "ours bf16" "torch fp32" "torch bf16" "ours bf16r")
row_name() {
    case $1 in
        "ours fp32") echo "train_gpt2 fp32" ;; "ours bf16") echo "train_gpt2 bf16" ;;
        "torch fp32") echo "PyTorch fp32" ;; "torch bf16") echo "PyTorch bf16 autocast" ;;
        "ours bf16r") echo "train_gpt2 bf16 --recompute 1" ;;
    esac
}
for shape in $SHAPES; do
    B=${shape%x*}; T=${shape#*x}
    steps=${STEPS:-$([ "$T" -ge 512 ] && echo 3 || echo 6)}
    for row in "${ROWS[@]}"; do : > "$tmp/ms_${row/ /_}"; : > "$tmp/rss_${row/ /_}"; done
    for round in $(seq 1 "$ROUNDS"); do
        for row in "${ROWS[@]}"; do
            prog=${row% *}; prec=${row#* }; f=${row/ /_}
            [ "$row" = "ours bf16" ] && [ $ours_bf16 = 0 ] && continue
            [ "$row" = "ours bf16r" ] && [ $ours_recompute = 0 ] && continue
            [ "$row" = "torch bf16" ] && [ $torch_bf16 = 0 ] && continue
            if [ "$prog" = ours ]; then
                run_ours "$prec" "$B" "$T" "$steps" > "$tmp/ms"
            else
                cand=$([ "$prec" = fp32 ] && echo "$best_fp32" || echo "$best_bf16")
                run_torch "$prec" "$cand" "$B" "$T" "$steps" > "$tmp/ms"
            fi
            cut -d ' ' -f 2 "$tmp/ms" >> "$tmp/ms_$f"; cat "$tmp/rss" >> "$tmp/rss_$f"
            echo "-- $MODEL B=$B T=$T round $round: $(row_name "$row") ms of step:$(awk '{ printf " %s:%s", $1, $2 }' "$tmp/ms")"
        done
    done
    # one line per row, tab-separated: name ms rss peak note ("-" when the row did not run or
    # there is no peak; the note says why a row did not run)
    for row in "${ROWS[@]}"; do
        f=${row/ /_}
        if [ -s "$tmp/ms_$f" ]; then ms=$(median < "$tmp/ms_$f"); rss=$(sort -n "$tmp/rss_$f" | tail -n 1); else ms=-; rss=-; fi
        peak=$([ "${row#* }" = fp32 ] && echo "$peak_fp32" || echo "${peak_bf16:--}")
        note="not available in this build (no --precision or --recompute flag)"
        [ "$row" = "torch bf16" ] && note=$torch_bf16_note
        printf '%s\t%s\t%s\t%s\t%s\n' "$(row_name "$row")" "$ms" "$rss" "$peak" "$note"
    done > "$tmp/rows"
    awk -F '\t' -v B="$B" -v T="$T" -v L="$L" -v C="$C" -v NH="$NH" -v model="$MODEL" '
    function ratio(a, b, what) {
        if (ms[a] == "-" || ms[b] == "-") { printf "RESULT %s: n/a (%s not run)\n", what, ms[a] == "-" ? name[a] : name[b]; return }
        printf "RESULT %s: %s %.0f ms against %s %.0f ms: %.2fx its step rate, %.2fx its peak RSS\n",
            what, name[a], ms[a], name[b], ms[b], ms[b] / ms[a], rss[a] / rss[b]
    }
    { n++; name[n] = $1; ms[n] = $2; rss[n] = $3; peak[n] = $4; note[n] = $5 }
    END {
        Vp = 50304; hs = C / NH
        fwd = 2 * B * T * (12 * L * C * C + C * Vp) + L * 4 * B * NH * hs * T * (T + 1) / 2
        gflop = 3 * fwd / 1e9
        printf "RESULT %s B=%d T=%d: %.3f model GFLOP per step\n", model, B, T, gflop
        for (r = 1; r <= n; r++) {
            if (ms[r] == "-") { printf "RESULT %s B=%d T=%d %s: %s\n", model, B, T, name[r], note[r]; continue }
            unit = name[r] ~ /fp32/ ? "fp32 FMA" : "bf16 dot"
            mfu = peak[r] == "-" ? sprintf("MFU n/a (no %s peak)", unit) : sprintf("MFU %.1f%% of the %s peak", 100 * gflop / ms[r] * 1e3 / peak[r], unit)
            printf "RESULT %s B=%d T=%d %s: %.0f ms/step, %.0f tok/s, %.1f GFLOP/s, %s, peak RSS %.0f MiB\n",
                model, B, T, name[r], ms[r], B * T / ms[r] * 1e3, gflop / ms[r] * 1e3, mfu, rss[r]
        }
        ratio(1, 3, sprintf("%s B=%d T=%d ratio fp32/fp32", model, B, T))
        ratio(2, 4, sprintf("%s B=%d T=%d ratio bf16/bf16", model, B, T))
        ours = ms[2] != "-" && ms[2] < ms[1] ? 2 : 1
        theirs = ms[4] != "-" && ms[4] < ms[3] ? 4 : 3
        ratio(ours, theirs, sprintf("%s B=%d T=%d ratio best/best", model, B, T))
        ratio(5, 4, sprintf("%s B=%d T=%d ratio bf16 --recompute 1/bf16", model, B, T))
    }' "$tmp/rows"
done
