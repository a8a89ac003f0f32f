#!/usr/bin/env bash
# make bench: train_gpt2 against PyTorch 2 (the project venv's, scripts/bench/bench_pytorch.py) on
# GPT-2 124M, with PyTorch in every mode a careful PyTorch user would try on this CPU:
#  - the model eager and under torch.compile (the default inductor backend; the steps that
#    compile are warm-up, not timed, and bench_pytorch.py checks that dynamo compiled the model
#    and that the compiled step 0 gives eager's loss and gradient norm);
#  - fp32 and bf16 autocast (torch.autocast("cpu", dtype=torch.bfloat16): oneDNN's bf16
#    matmuls), the latter on CPUs with AVX-512 (TORCH_BF16=auto): without it oneDNN has no bf16
#    kernels and autocast runs far slower than fp32, which makes it no one's best setting
#    there and this benchmark last hours (TORCH_BF16=1 runs it anyway, 0 never);
#  - F.scaled_dot_product_attention(is_causal=True);
#  - tcmalloc preloaded (LD_PRELOAD of Debian's libgoogle-perftools4), OMP_NUM_THREADS,
#    OPENBLAS_NUM_THREADS and torch.set_num_threads all equal to train_gpt2's thread count,
#    OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset for PyTorch's command;
#  - a calibration pass first, eager, at B=4 T=64: each candidate OpenMP setting (CANDIDATES
#    below: wait policy PASSIVE or ACTIVE, threads bound to cores or not, inter-op threads) runs
#    a few steps in fp32 and in bf16 autocast with fused AdamW; then the fastest setting of each
#    precision runs with foreach AdamW; the fastest setting and AdamW of each precision are kept,
#    printed, and used by that precision's eager and compiled rows.
# Then, per shape and round, interleaved so that all see the same machine state:
# train_gpt2 fp32, train_gpt2 --precision bf16, PyTorch eager fp32, eager bf16 autocast,
# compile fp32, compile bf16 autocast, train_gpt2 --precision bf16 --recompute 1 (activation
# checkpointing: the memory-saving option). Same model, batches from the same shard, same
# thread count. (A train_gpt2 row runs where this build has the flag; TORCH_MODES=eager or
# compile runs only those PyTorch rows.) Each run's line of step times ends with CPUs 0 and 1's
# cache-line round trip before and after it (dev/cpu/core_to_core; where it may run on both).
# Prints per row: ms/step (median of the timed steps, over all rounds), tokens/s, model
# GFLOP/s, MFU (fp32 rows against the fp32 FMA peak, bf16 rows against the AMX TDPBF16PS peak where
# the CPU has AMX, else the faster of the bf16 dot-product peak and the fp32 FMA peak, all measured by
# dev/cpu/fma_peak: bf16 products run on the FMA where there is no vdpbf16ps or it is the slower, as on
# Intel's cores without AMX), peak RSS; then the ratios: train_gpt2 fp32 against
# PyTorch's fastest fp32 row, train_gpt2 bf16 against PyTorch's fastest bf16 row, our fastest
# (fp32 or bf16, without recompute) against PyTorch's fastest row of all, and bf16 with
# recompute against PyTorch's fastest bf16 row.
# While it runs, stderr gets a line per run: which, and about how long is left (from the wall
# time of the runs so far, scaled by model FLOPs to other shapes).
#
# MFU = model FLOPs per step / step time / peak. Model FLOPs of a step = 3 x the forward's
# (backward = 2 x forward), forward = 2*B*T*(12*L*C^2 + C*Vp) (the four linear layers and
# the LM head: 2 flops per multiply-add) + L*4*B*NH*hs*T*(T+1)/2 (causal attention: the
# T(T+1)/2 scores and the weighted sum of V, hs = C/NH). The same count for both programs,
# whatever work they actually do.
#
# Overrides (all optional):
#   THREADS=2 ROUNDS=2 SHAPES="4x64 4x1024" MODEL=d12 CALIBRATE=1 CAL_SHAPE=4x64 CAL_STEPS=3
#   STEPS= (timed steps per run; default 6, 3 when T >= 512) TORCH_BF16=auto
#   TORCH_MODES="eager compile"
set -euo pipefail
cd "$(dirname "$0")/../.."
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-2}
SHAPES=${SHAPES:-"4x64 4x1024"}
MODEL=${MODEL:-d12}
CALIBRATE=${CALIBRATE:-1}
CAL_SHAPE=${CAL_SHAPE:-4x64}
CAL_STEPS=${CAL_STEPS:-3}
STEPS=${STEPS:-}
TORCH_BF16=${TORCH_BF16:-auto}
TORCH_MODES=${TORCH_MODES:-eager compile}
PY=$PWD/.venv/bin/python
shard=data/tinyshakespeare/tiny_shakespeare_train_000000.bin

die() { echo "error: $*" >&2; exit 1; }
posint() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1=$2: expected a positive integer"; }
posint THREADS "$THREADS"; posint ROUNDS "$ROUNDS"; posint CAL_STEPS "$CAL_STEPS"
[ -z "$STEPS" ] || posint STEPS "$STEPS"
[[ $CALIBRATE =~ ^[01]$ ]] || die "CALIBRATE=$CALIBRATE: expected 0 or 1"
[[ $TORCH_BF16 =~ ^(auto|0|1)$ ]] || die "TORCH_BF16=$TORCH_BF16: expected auto, 0 or 1"
[[ $TORCH_MODES =~ ^\ *(eager|compile)(\ +(eager|compile))*\ *$ ]] ||
    die "TORCH_MODES='$TORCH_MODES': expected eager, compile or both"
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
[ -x dev/cpu/core_to_core ] || die "dev/cpu/core_to_core missing: run make -C dev/cpu core_to_core first"
[ -x "$PY" ] || die "$PY missing: run make setup (it makes the project venv with PyTorch)"
[ -f $shard ] || die "$shard missing: run make setup (or make data) first"
tcmalloc=$(dpkg -L libgoogle-perftools4 2> /dev/null | grep -m 1 -E '/libtcmalloc\.so\.[0-9]+$' || true)
[ -n "$tcmalloc" ] && [ -f "$tcmalloc" ] ||
    die "tcmalloc not found (dpkg -L libgoogle-perftools4): install Debian's libgoogle-perftools4 (make setup does)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The peaks: the largest of three readings (a shared VM's host can take cycles from one; on the Zen 4
# VM one reading of the bf16 dot peak came out 443.6 GFLOP/s where the others gave 462-469)
for i in 1 2 3; do OMP_NUM_THREADS=$THREADS dev/cpu/fma_peak >> "$tmp/peak"; done
peak_fp32=$(sed -n 's/^fp32 FMA peak: \([0-9.]*\) GFLOP.*/\1/p' "$tmp/peak" | sort -g | tail -n 1)
peak_bf16=$(sed -n 's/^bf16 dot peak: \([0-9.]*\) GFLOP.*/\1/p' "$tmp/peak" | sort -g | tail -n 1)  # empty: no bf16 dot unit
peak_amx=$(sed -n 's/^AMX bf16 peak: \([0-9.]*\) GFLOP.*/\1/p' "$tmp/peak" | sort -g | tail -n 1)  # empty: no AMX
[ -n "$peak_fp32" ] || die "dev/cpu/fma_peak printed no fp32 peak: $(head -n 1 "$tmp/peak")"
peak_readings="fp32 $(sed -n 's/^fp32 FMA peak: \([0-9.]*\) GFLOP.*/\1/p' "$tmp/peak" | paste -sd' ')"
peak_readings="$peak_readings; bf16 $(sed -n 's/^bf16 dot peak: \([0-9.]*\) GFLOP.*/\1/p' "$tmp/peak" | paste -sd' ')"
[ -n "$peak_amx" ] && peak_readings="$peak_readings; AMX $(sed -n 's/^AMX bf16 peak: \([0-9.]*\) GFLOP.*/\1/p' "$tmp/peak" | paste -sd' ')"
cpu_flags=$(grep -m 1 '^flags' /proc/cpuinfo)
flags_that_matter=""
for f in avx2 fma avx512f avx512_bf16 amx_bf16; do
    [[ " $cpu_flags " == *" $f "* ]] && flags_that_matter="$flags_that_matter $f"
done
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, flags:$flags_that_matter"
echo "peaks with $THREADS threads (dev/cpu/fma_peak, the largest of 3 readings: $peak_readings): fp32 FMA $peak_fp32 GFLOP/s, bf16 dot ${peak_bf16:-none (no AVX512_BF16)}${peak_bf16:+ GFLOP/s}${peak_amx:+, AMX $peak_amx GFLOP/s}"
# bf16 rows' yardstick: the fastest unit bf16 products can run on here (train_gpt2 picks it too,
# and PyTorch's oneDNN): AMX's tiles where the CPU has them, else the faster of the bf16 dot
# product and the fp32 FMA
peak_bf16_rows=$peak_bf16 bf16_unit="bf16 dot"
if [ -z "$peak_bf16" ] || awk -v b="$peak_bf16" -v f="$peak_fp32" 'BEGIN { exit !(f > b) }'; then
    peak_bf16_rows=$peak_fp32 bf16_unit="fp32 FMA"
fi
if [ -n "$peak_amx" ]; then peak_bf16_rows=$peak_amx bf16_unit="AMX"; fi
echo "bf16 rows' MFU against the $bf16_unit peak"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d ' ' -f 1-3 /proc/loadavg)"
echo "PyTorch: $($PY -c 'import torch; print(torch.__version__)' 2> /dev/null)" || die "$PY cannot import torch: run make setup"
# PyTorch bf16 autocast: where it runs, and why not where it does not (the rows' note)
torch_bf16=$TORCH_BF16 torch_bf16_note="not run: TORCH_BF16=0"
if [ "$torch_bf16" = auto ]; then
    torch_bf16=0 torch_bf16_note="not run: no AVX-512 on this CPU, where it is far slower than PyTorch fp32 (TORCH_BF16=1 runs it)"
    [[ " $cpu_flags " == *" avx512bw "* ]] && torch_bf16=1
fi
[ $torch_bf16 = 1 ] || echo "PyTorch bf16 autocast: $torch_bf16_note"
torch_modes=""
for m in eager compile; do [[ " $TORCH_MODES " == *" $m "* ]] && torch_modes="$torch_modes $m"; done

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

# The candidate settings of PyTorch's OpenMP runtime (the PyTorch wheel's GNU libgomp, so
# KMP_* variables do nothing; OMP_PROC_BIND/OMP_PLACES are its affinity). Words starting
# with -- are bench_pytorch.py flags, the others environment variables.
CANDIDATES=(
    "OMP_WAIT_POLICY=PASSIVE"
    "OMP_WAIT_POLICY=ACTIVE"
    "OMP_WAIT_POLICY=PASSIVE OMP_PROC_BIND=close OMP_PLACES=cores"
    "OMP_WAIT_POLICY=ACTIVE OMP_PROC_BIND=close OMP_PLACES=cores"
    "OMP_WAIT_POLICY=PASSIVE --interop $THREADS"
)

# run_torch MODE PRECISION "CANDIDATE" OPTIMIZER B T STEPS: as run_ours; the timed steps are
# those after bench_pytorch.py's warm-up steps (1 eager, 2 compiled), numbered as it numbers them.
run_torch() {
    local vars=() args=() w
    for w in $3; do if [[ $w == --* ]]; then args+=("$w"); elif [[ $w == *=* ]]; then vars+=("$w"); else args+=("$w"); fi; done
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u OMP_WAIT_POLICY -u OMP_PROC_BIND -u OMP_PLACES \
        -u GOMP_CPU_AFFINITY -u GOMP_SPINCOUNT -u ATEN_CPU_CAPABILITY \
        LD_PRELOAD="$tcmalloc" OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS" "${vars[@]}" \
        $PY scripts/bench/bench_pytorch.py --depth "$MODEL" -B "$5" -T "$6" --steps "$7" --threads "$THREADS" \
        --mode "$1" --precision "$2" --optimizer "$4" --shard $shard "${args[@]}" > "$tmp/torch.out" 2>&1 ||
        { cat "$tmp/torch.out" >&2; die "scripts/bench/bench_pytorch.py failed ($1 $2, $3, AdamW $4)"; }
    grep -q 'allocator tcmalloc' "$tmp/torch.out" || die "PyTorch did not load $tcmalloc"
    sed -n 's/.*peak_rss_mb=\([0-9.]*\).*/\1/p' "$tmp/torch.out" > "$tmp/rss"
    local warmup
    warmup=$(sed -n 's/^pytorch config: .*, warmup \([0-9]*\),.*/\1/p' "$tmp/torch.out")
    sed -n 's/^pytorch step \([0-9]*\):.* \([0-9.]*\) ms$/\1 \2/p' "$tmp/torch.out" | awk -v w="$warmup" '$1 >= w'
}

# The plan: one line per run, "KEY B T STEPS WHAT" (KEY: a row key below with _ for spaces;
# STEPS: the steps it runs, warm-up included), for the progress lines: which run this is, and
# about how long the rest takes.
ROWS=("ours fp32" "ours bf16" "torch eager fp32" "torch eager bf16" "torch compile fp32" "torch compile bf16" "ours bf16r")
row_name() {
    case $1 in
        "ours fp32") echo "train_gpt2 fp32" ;; "ours bf16") echo "train_gpt2 bf16" ;;
        "torch eager fp32") echo "PyTorch eager fp32" ;; "torch eager bf16") echo "PyTorch eager bf16 autocast" ;;
        "torch compile fp32") echo "PyTorch compile fp32" ;; "torch compile bf16") echo "PyTorch compile bf16 autocast" ;;
        "ours bf16r") echo "train_gpt2 bf16 --recompute 1" ;;
    esac
}
# row_runs ROW: whether this row runs here (0) or not (1)
row_runs() {
    case $1 in
        "ours bf16") [ $ours_bf16 = 1 ] ;; "ours bf16r") [ $ours_recompute = 1 ] ;;
        "torch "*) local m=${1#torch }; m=${m% *}
                   [[ " $torch_modes " == *" $m "* ]] && { [ "${1##* }" = fp32 ] || [ $torch_bf16 = 1 ]; } ;;
        *) true ;;
    esac
}
timed_steps() { local T=${1#*x}; echo "${STEPS:-$([ "$T" -ge 512 ] && echo 3 || echo 6)}"; }
warmup_of() { case $1 in "torch compile"*) echo 2 ;; *) echo 1 ;; esac; }
cal_precisions="fp32"; [ $torch_bf16 = 1 ] && cal_precisions="fp32 bf16"
: > "$tmp/plan"
if [ "$CALIBRATE" = 1 ]; then
    for cand in "${CANDIDATES[@]}"; do for prec in $cal_precisions; do
        echo "torch_eager_$prec ${CAL_SHAPE/x/ } $((CAL_STEPS + 1)) calibration $prec $cand, AdamW fused" >> "$tmp/plan"
    done; done
    for prec in $cal_precisions; do
        echo "torch_eager_$prec ${CAL_SHAPE/x/ } $((CAL_STEPS + 1)) calibration $prec, AdamW foreach" >> "$tmp/plan"
    done
fi
for shape in $SHAPES; do for round in $(seq 1 "$ROUNDS"); do for row in "${ROWS[@]}"; do
    row_runs "$row" || continue
    echo "${row// /_} ${shape/x/ } $(($(timed_steps "$shape") + $(warmup_of "$row"))) $(row_name "$row"), $MODEL B=${shape%x*} T=${shape#*x}, round $round of $ROUNDS" >> "$tmp/plan"
done; done; done
: > "$tmp/done"  # one line per finished run: KEY B T STEPS MEDIAN_MS WALL_S
nplan=$(wc -l < "$tmp/plan") irun=0 t_start=$(date +%s.%N)

# Before run number irun + 1: print which it is and the time left, estimated from the runs done:
# a run of a row already done (the latest such) takes its time outside the steps (start-up,
# compiling) plus its median step scaled by model FLOPs to this shape, times its steps; a row
# not run yet takes the average wall time per model FLOP of the runs done.
progress() {
    irun=$((irun + 1))
    awk -v i="$irun" -v n="$nplan" -v L="$L" -v C="$C" -v NH="$NH" -v elapsed="$(awk -v s="$t_start" -v e="$(date +%s.%N)" 'BEGIN { print e - s }')" '
    function flops(B, T) { return 2 * B * T * (12 * L * C * C + C * 50304) + L * 4 * B * C * T * (T + 1) / 2 }
    FILENAME == ARGV[1] {  # runs done
        k = $1; last_B[k] = $2; last_T[k] = $3; last_n[k] = $4; last_ms[k] = $5; last_wall[k] = $6
        per_flop += $6 / (flops($2, $3) * $4); ndone++; next
    }
    FNR == i { what = $0; for (j = 0; j < 4; j++) sub(/^[^ ]+ /, "", what) }
    FNR >= i {
        k = $1; f = flops($2, $3) * $4
        if (k in last_wall) {
            step_s = last_ms[k] / 1e3 * flops($2, $3) / flops(last_B[k], last_T[k])
            outside = last_wall[k] - last_n[k] * last_ms[k] / 1e3
            left += (outside > 0 ? outside : 0) + $4 * step_s
        } else if (ndone > 0) { left += per_flop / ndone * f; guessed++ }
    }
    END {
        if (ndone == 0) eta = "time left: known after the first run"
        else eta = sprintf("about %s left%s", left < 90 ? sprintf("%.0f s", left) : sprintf("%.0f min", left / 60),
                           guessed ? sprintf(" (%d of them guessed: rows not timed yet)", guessed) : "")
        printf "bench: run %d of %d, %s; %.0f s so far, %s\n", i, n, what, elapsed, eta
    }' "$tmp/done" "$tmp/plan" >&2
}
# done_run KEY B T WALL_START: record the run that just ended (its step lines in $tmp/ms)
done_run() {
    local n
    n=$(grep -c '' "$tmp/ms.all" || true)
    echo "${1// /_} $2 $3 $n $(cut -d ' ' -f 2 "$tmp/ms" | median) $(awk -v s="$4" -v e="$(date +%s.%N)" 'BEGIN { print e - s }')" >> "$tmp/done"
}

# Calibration: every candidate in both precisions, interleaved, eager with fused AdamW; each
# keeps the median of its timed steps, and the fastest candidate of each precision wins; then
# that candidate with foreach AdamW, kept if faster. A candidate gives up as soon as its median
# is over twice the best so far (under a busy machine, a spinning OMP_WAIT_POLICY=ACTIVE can be
# 5x slower, and would otherwise take minutes).
best_fp32=${CANDIDATES[0]}; best_bf16=${CANDIDATES[0]}; opt_fp32=fused; opt_bf16=fused
if [ "$CALIBRATE" = 1 ]; then
    cB=${CAL_SHAPE%x*}; cT=${CAL_SHAPE#*x}
    echo "-- calibration of PyTorch's settings: $MODEL B=$cB T=$cT, eager, $CAL_STEPS timed steps after a warm-up, tcmalloc, OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=$THREADS"
    for prec in fp32 bf16; do echo "inf" > "$tmp/cal_best_$prec"; done
    # calibrate PRECISION CANDIDATE OPTIMIZER: run it, print it, keep it if fastest
    calibrate() {
        local best give_up ms note t0
        best=$(cat "$tmp/cal_best_$1")
        give_up=$([ "$best" = inf ] || awk -v b="$best" 'BEGIN { printf "--give-up-ms %.1f", 2 * b }')
        progress; t0=$(date +%s.%N)
        run_torch eager "$1" "$2 $give_up" "$3" "$cB" "$cT" "$CAL_STEPS" > "$tmp/ms"
        sed -n 's/^pytorch step \([0-9]*\):.* \([0-9.]*\) ms$/\1 \2/p' "$tmp/torch.out" > "$tmp/ms.all"
        done_run "torch eager $1" "$cB" "$cT" "$t0"
        ms=$(cut -d ' ' -f 2 "$tmp/ms" | median)
        note=$(grep -q '^pytorch: gave up' "$tmp/torch.out" && echo " (gave up: over twice the best)" || true)
        printf -- '-- calibration %s %-62s %8.1f ms/step%s\n' "$1" "$2, AdamW $3" "$ms" "$note"
        if awk -v a="$ms" -v b="$best" 'BEGIN { exit !(b == "inf" || a < b) }'; then
            echo "$ms" > "$tmp/cal_best_$1"
            if [ "$1" = fp32 ]; then best_fp32=$2 opt_fp32=$3; else best_bf16=$2 opt_bf16=$3; fi
        fi
    }
    for cand in "${CANDIDATES[@]}"; do
        for prec in $cal_precisions; do calibrate $prec "$cand" fused; done
    done
    calibrate fp32 "$best_fp32" foreach
    [ $torch_bf16 = 1 ] && calibrate bf16 "$best_bf16" foreach
    setting_note="the fastest of ${#CANDIDATES[@]} candidates with fused AdamW, then foreach AdamW, in calibration"
else
    setting_note="calibration skipped: CALIBRATE=0"
fi
echo "PyTorch fp32 setting: tcmalloc, $THREADS threads, $best_fp32, AdamW $opt_fp32 ($setting_note)"
[ $torch_bf16 = 1 ] && echo "PyTorch bf16 setting: tcmalloc, $THREADS threads, $best_bf16, AdamW $opt_bf16 ($setting_note)"

# CPUs 0 and 1's cache-line round trip in ns (dev/cpu/core_to_core), or nothing where this process
# may not run on both: on the small VMs we measure on it tells the host's two placements of the
# vCPUs apart (one L3 or two), which move a step by 2-3% (docs/speed.md); printed before and after
# each row's run.
round_trip() {
    { dev/cpu/core_to_core 0 1 2> /dev/null || true; } | sed -n 's/^round trip CPU 0 - CPU 1: \([0-9.]*\) ns$/\1/p'
}

for shape in $SHAPES; do
    B=${shape%x*}; T=${shape#*x}
    steps=$(timed_steps "$shape")
    for row in "${ROWS[@]}"; do : > "$tmp/ms_${row// /_}"; : > "$tmp/rss_${row// /_}"; done
    for round in $(seq 1 "$ROUNDS"); do
        for row in "${ROWS[@]}"; do
            row_runs "$row" || continue
            f=${row// /_}; prec=${row##* }
            progress; rt_before=$(round_trip); t0=$(date +%s.%N)
            if [ "${row%% *}" = ours ]; then
                run_ours "$prec" "$B" "$T" "$steps" > "$tmp/ms"
                sed -n 's/^step *\([0-9]*\)\/.*| \([0-9.]*\) ms |.*/\1 \2/p' "$tmp/ours.out" > "$tmp/ms.all"
            else
                mode=${row#torch }; mode=${mode% *}
                if [ "$prec" = fp32 ]; then cand=$best_fp32 opt=$opt_fp32; else cand=$best_bf16 opt=$opt_bf16; fi
                run_torch "$mode" "$prec" "$cand" "$opt" "$B" "$T" "$steps" > "$tmp/ms"
                sed -n 's/^pytorch step \([0-9]*\):.* \([0-9.]*\) ms$/\1 \2/p' "$tmp/torch.out" > "$tmp/ms.all"
                grep '^pytorch compile:' "$tmp/torch.out" | sed "s/^pytorch compile:/-- $MODEL B=$B T=$T round $round: $(row_name "$row"):/" || true
            fi
            done_run "$row" "$B" "$T" "$t0"; rt_after=$(round_trip)
            cut -d ' ' -f 2 "$tmp/ms" >> "$tmp/ms_$f"; cat "$tmp/rss" >> "$tmp/rss_$f"
            echo "-- $MODEL B=$B T=$T round $round: $(row_name "$row") ms of step:$(awk '{ printf " %s:%s", $1, $2 }' "$tmp/ms")${rt_before:+ (CPU 0-1 round trip $rt_before ns before, $rt_after after)}"
        done
    done
    # one line per row, tab-separated: key name ms rss peak note ("-" when the row did not run;
    # the note says why)
    for row in "${ROWS[@]}"; do
        f=${row// /_}
        if [ -s "$tmp/ms_$f" ]; then ms=$(median < "$tmp/ms_$f"); rss=$(sort -n "$tmp/rss_$f" | tail -n 1); else ms=-; rss=-; fi
        peak=$([ "${row##* }" = fp32 ] && echo "$peak_fp32" || echo "$peak_bf16_rows")
        case $row in
            "torch "*" bf16") note=$torch_bf16_note; [ $torch_bf16 = 1 ] && note="not run: TORCH_MODES='$TORCH_MODES'" ;;
            "torch "*) note="not run: TORCH_MODES='$TORCH_MODES'" ;;
            *) note="not available in this build (no --precision or --recompute flag)" ;;
        esac
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$row" "$(row_name "$row")" "$ms" "$rss" "$peak" "$note"
    done > "$tmp/rows"
    awk -F '\t' -v B="$B" -v T="$T" -v L="$L" -v C="$C" -v NH="$NH" -v model="$MODEL" -v bf16unit="$bf16_unit" '
    function ratio(a, b, what) {
        if (!a || !b) { printf "RESULT %s: n/a (%s not run)\n", what, !a ? a_missing : b_missing; return }
        printf "RESULT %s: %s %.0f ms against %s %.0f ms: %.2fx its step rate, %.2fx its peak RSS\n",
            what, name[a], ms[a], name[b], ms[b], ms[b] / ms[a], rss[a] / rss[b]
    }
    # fastest(PATTERN): the row whose key matches PATTERN with the smallest ms (0: none ran)
    function fastest(pattern,   r, best) {
        for (r = 1; r <= n; r++) if (key[r] ~ pattern && ms[r] != "-" && (!best || ms[r] + 0 < ms[best] + 0)) best = r
        return best
    }
    { n++; key[n] = $1; name[n] = $2; ms[n] = $3; rss[n] = $4; peak[n] = $5; note[n] = $6 }
    END {
        Vp = 50304; hs = C / NH
        fwd = 2 * B * T * (12 * L * C * C + C * Vp) + L * 4 * B * NH * hs * T * (T + 1) / 2
        gflop = 3 * fwd / 1e9
        printf "RESULT %s B=%d T=%d: %.3f model GFLOP per step\n", model, B, T, gflop
        for (r = 1; r <= n; r++) {
            if (ms[r] == "-") { printf "RESULT %s B=%d T=%d %s: %s\n", model, B, T, name[r], note[r]; continue }
            unit = name[r] ~ /fp32/ ? "fp32 FMA" : bf16unit
            mfu = sprintf("MFU %.1f%% of the %s peak", 100 * gflop / ms[r] * 1e3 / peak[r], unit)
            printf "RESULT %s B=%d T=%d %s: %.0f ms/step, %.0f tok/s, %.1f GFLOP/s, %s, peak RSS %.0f MiB\n",
                model, B, T, name[r], ms[r], B * T / ms[r] * 1e3, gflop / ms[r] * 1e3, mfu, rss[r]
        }
        what = sprintf("%s B=%d T=%d ratio", model, B, T)
        a_missing = "train_gpt2 fp32"; b_missing = "PyTorch fp32"
        ratio(fastest("^ours fp32$"), fastest("^torch .* fp32$"), what " fp32/fp32")
        a_missing = "train_gpt2 bf16"; b_missing = "PyTorch bf16 autocast"
        ratio(fastest("^ours bf16$"), fastest("^torch .* bf16$"), what " bf16/bf16")
        a_missing = "train_gpt2"; b_missing = "PyTorch"
        ratio(fastest("^ours (fp32|bf16)$"), fastest("^torch "), what " best/best")
        a_missing = "train_gpt2 bf16 --recompute 1"; b_missing = "PyTorch bf16 autocast"
        ratio(fastest("^ours bf16r$"), fastest("^torch .* bf16$"), what " bf16 --recompute 1/bf16")
    }' "$tmp/rows"
done
echo "bench: done in $(awk -v s="$t_start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f s", e - s }')" >&2
