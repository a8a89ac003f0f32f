#!/usr/bin/env bash
# One device session's worth of the AMX work (issue 30) in one command, on a Xeon with AMX (the
# lent GPU machine's host: gcc, zlib, mpicc and PyTorch as python3, nothing installed): builds,
# runs the AMX checks, times the GEMM against oneDNN (PyTorch's bf16 torch.matmul) and train_gpt2
# against PyTorch, 2 threads on cores 0 and 1. Writes into DIR (default $OUT, else dev/cpu/amx_run):
#   env.txt     date, CPU (lscpu, its amx flags), compiler, PyTorch
#   build.txt   the builds
#   checks.txt  gemm_check (every bf16 path against float64), amx_check (what TDPBF16PS computes,
#               AMX vs emulated), test_gpt2 on the small references in data/ref (carried there)
#               with LLMC_BF16_PATH=amx and test_gpt2.sh's bf16 mutants, each on its path (AMX's or vdpbf16ps's)
#   gemm.txt    fma_peak (fp32, vdpbf16ps, AMX peaks), amx_bench per bf16 path, and the side-by-side
#               table of ours (AMX) against oneDNN (matmul_torch.py) on the 27 products, the two
#               alternating shape by shape for GEMM_ROUNDS (default 3) rounds
#   train.txt   train_gpt2 (fp32; bf16 on each path) and torch_step.py (eager and compiled, fp32 and
#               bf16 autocast) at B=4 T=64 and T=1024, ms per step (medians)
#   attention.txt  (part attention only) the attention harnesses in bf16 (version 3 vdpbf16ps,
#               4 AMX tiles; they need OpenBLAS for version 2), and train_gpt2 --profile 1 at B=4
#               T=1024 on the amx path, ours and BASELINE's in turn, each kernel's ms per step
#   ratio.txt   (part ratio only) train_gpt2 --precision bf16 (on RATIO_PATH, default amx) and PyTorch
#               side by side, round by round (torch_step.py --alternate, RATIO_ROUNDS rounds, default
#               3), for each T in TS and each mode in TORCH_MODES; then, for each T, the lowest ratio
#               over the modes. The ratio to quote: train.txt's runs follow one another over minutes,
#               in which this host's speed changes
#   pairs.txt   (part pairs only) our fp32 and bf16 (on PAIRS_PATH, default emulated: what a Xeon
#               without AMX runs) at the same time, one thread each on cores 0 and 1, then the cores
#               swapped, RATIO_ROUNDS times, for each T in TS: bf16's ms over fp32's, pair by pair
#               (the host's drift over minutes falls on both alike)
#
#   bash dev/cpu/run_amx.sh [DIR] [checks|gemm|train|all|attention|ratio|pairs]      (default all)
# GEMM_PATH (default amx) is our bf16 path in the gemm part's side-by-side table: avx512bf16 runs
# that part on an AMD Zen 4 or 5 (PY=.venv/bin/python there).
# STEPS64 (default 6) and STEPS1024 (default 2) set the timed steps; TORCH1024=0 skips PyTorch at T=1024;
# TS (default "64 1024") the sequence lengths timed (TS=64 fits checks and train in one 10-minute call);
# PATHS (default "fp32 amx avx512bf16 emulated") our runs at each T, TORCH_MODES (default "bf16 fp32
# bf16-compiled fp32-compiled"; set but empty: none) PyTorch's (torch.compile takes 40-90 s to warm up at each).
# MARCH (default native) builds everything for another CPU: MARCH=x86-64-v3 runs AVX2's code path (Zen 3's).
# A folder BASELINE (default baseline/, where present: another version's Makefile, train_gpt2.c and
# llmc/) is built too and its train_gpt2 timed beside ours at T=64 (fp32, bf16), in the same run.
# Data (git-ignored, so the device call must carry it): checks reads data/ref/{odd,chunks,tiny}-bf16
# (skipped where absent); train, ratio and attention read data/tinyshakespeare's
# tiny_shakespeare_train_000000.bin and gpt2_tokenizer.bin (make setup writes them).
set -u
cd "$(dirname "$0")/../.."
out=${1:-${OUT:-dev/cpu/amx_run}}
what=${2:-all}
case $what in
all | checks | gemm | train | ratio | pairs | attention) ;;
*) echo "error: run_amx.sh: unknown part '$what' (checks, gemm, train, all, attention, ratio or pairs)" >&2; exit 2 ;;
esac
STEPS64=${STEPS64:-6}
STEPS1024=${STEPS1024:-2}
TORCH1024=${TORCH1024:-1}
TS=${TS:-64 1024}
PATHS=${PATHS:-fp32 amx avx512bf16 emulated}
TORCH_MODES=${TORCH_MODES-bf16 fp32 bf16-compiled fp32-compiled}  # set but empty: none
GEMM_ROUNDS=${GEMM_ROUNDS:-3}
GEMM_PATH=${GEMM_PATH:-amx}
RATIO_PATH=${RATIO_PATH:-amx}
RATIO_ROUNDS=${RATIO_ROUNDS:-3}
PY=${PY:-python3}
mkdir -p "$out"
status=0
pin="taskset -c 0,1"
export OMP_NUM_THREADS=2

{ date -u; lscpu; echo "amx flags: $(lscpu | grep -o 'amx[a-z_0-9]*' | sort -u | tr '\n' ' ')"; gcc --version | head -n 1
  $PY -c 'import torch; print("torch", torch.__version__, "| oneDNN", torch.backends.mkldnn.is_available())'; } >"$out/env.txt" 2>&1
grep -q amx_bf16 /proc/cpuinfo || echo "warning: this CPU has no AMX: the AMX rows will say so" | tee -a "$out/env.txt"

flags="-O3 -std=gnu11 -march=${MARCH:-native} -fopenmp -falign-loops=64 -Wall -Wextra -Wno-unused-function -Wno-unused-parameter -Werror -I."
{
    make -j16 ${MARCH:+-B MARCH=$MARCH} train_gpt2 test_gpt2 &&
    mkdir -p build &&
    gcc $flags dev/cpu/gemm_check.c -o build/gemm_check -lm &&
    for p in amx_check amx_bench fma_peak; do gcc $flags -Idev/cpu dev/cpu/$p.c -o build/$p -lm -lopenblas || exit 1; done
} >"$out/build.txt" 2>&1 || { echo "error: the build failed (see build.txt)"; tail -n 20 "$out/build.txt"; exit 1; }

if [ "$what" = all ] || [ "$what" = checks ]; then
    {
        echo "== gemm_check (all paths, 2 threads)"; ./build/gemm_check | grep -v '^ok'; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
        echo "== amx_check"; ./build/amx_check || status=1
        for name in odd-bf16 chunks-bf16 tiny-bf16; do
            d=data/ref/$name
            [ -f $d/model.bin ] || { echo "skip test_gpt2 $name: data/ref/$name not here"; continue; }
            for path in amx avx512bf16 emulated; do
                if r=$(LLMC_BF16_PATH=$path ./test_gpt2 -e $d/model.bin -s $d/state.bin -l $d/losses.txt -a $d/activations.bin --precision bf16 2>&1); then
                    echo "PASS test_gpt2 $name, LLMC_BF16_PATH=$path: $(printf '%s\n' "$r" | grep -E '^OK|matmuls' | tr '\n' ' ')"
                else
                    echo "FAIL test_gpt2 $name, LLMC_BF16_PATH=$path:"; printf '%s\n' "$r" | grep -E 'MISMATCH|FAIL|error|matmuls' | head -n 20; status=1
                fi
            done
        done
        # test_gpt2.sh's bf16 mutants, each on its own path (vdpbf16ps's where it names that one, the
        # AMX path otherwise) and config: each must fail, naming the tensor test_gpt2.sh expects
        if [ -f data/ref/odd-bf16/model.bin ]; then
            # (not those of the emulated path's packing, which test_gpt2.sh runs with LLMC_BF16_EMULATE=1,
            # nor the swapped pairs of gemm_pack_bf16, the A packing of vdpbf16ps: AMX packs with
            # gemm_pack_a_amx, whose mutants test_gemm.sh has)
            sed -n '/^MUTANTS=(/,/^)/p' scripts/tests/test_gpt2.sh | grep '^ *"' | grep '|bf16' |
                grep -v -e '|LLMC_BF16_EMULATE=1"$' -e 'pair order swapped in the A packing' > build/bf16_mutants.txt
            # each mutant in its own copy, all built at once (the host has 16 cores), then run in turn
            n=0
            while IFS= read -r line; do
                line="${line#"${line%%[![:space:]]*}"}"  # the array line's indentation off
                eval "entry=$line"
                IFS='|' read -r file expr _ _ _ _ <<< "$entry"
                dir=build/mutant_amx/$n; n=$((n + 1)); mkdir -p $dir; cp -r Makefile test_gpt2.c llmc $dir/
                sed -i "$expr" "$dir/$file"
                ( make -s -C $dir test_gpt2 >/dev/null 2>&1; echo $? > $dir/rc ) &
            done < build/bf16_mutants.txt
            wait
            n=0
            while IFS= read -r line; do
                line="${line#"${line%%[![:space:]]*}"}"
                eval "entry=$line"
                IFS='|' read -r file expr expected mwhat _ menv mconfig <<< "$entry"
                dir=build/mutant_amx/$n; n=$((n + 1))
                if cmp -s "$file" "$dir/$file" || [ "$(cat $dir/rc)" != 0 ]; then echo "FAIL mutant $mwhat: no longer applies or builds"; status=1; continue; fi
                d=data/ref/${mconfig:-odd}-bf16
                case $menv in *LLMC_BF16_PATH=avx512bf16*) mpath=avx512bf16 ;; *) mpath=amx ;; esac
                r=$(LLMC_BF16_PATH=$mpath $dir/test_gpt2 -e $d/model.bin -s $d/state.bin -l $d/losses.txt -a $d/activations.bin --precision bf16 2>&1)
                rc=$?
                v=$(printf '%s\n' "$r" | grep -E '^FAIL:' || true)
                if [ $rc -eq 1 ] && printf '%s' "$v" | grep -q "first to diverge is $expected\$"; then
                    echo "PASS mutant caught on the $mpath path (${mconfig:-odd}-bf16): $mwhat ($v)"
                else echo "FAIL mutant not caught as expected on the $mpath path (${mconfig:-odd}-bf16): $mwhat (exit $rc, expected a FAIL naming $expected; got: ${v:-$(printf '%s' "$r" | tail -n 1)})"; status=1; fi
            done < build/bf16_mutants.txt
            rm -rf build/mutant_amx
        fi
    } 2>&1 | tee "$out/checks.txt"
    grep -q '^FAIL' "$out/checks.txt" && status=1
fi

if [ "$what" = all ] || [ "$what" = gemm ]; then
    {
        echo "== fma_peak"; $pin ./build/fma_peak
        for path in amx avx512bf16; do echo "== amx_bench, LLMC_BF16_PATH=$path"; LLMC_BF16_PATH=$path $pin ./build/amx_bench; done
        echo "== amx_bench fp32"; $pin ./build/amx_bench fp32
        # ours and oneDNN side by side: shape by shape, alternating, GEMM_ROUNDS rounds (this host's
        # speed moves by up to 2x within a minute, so the two run seconds apart, not minutes)
        for round in $(seq "$GEMM_ROUNDS"); do
            for shape in $(./build/amx_bench --list | cut -d' ' -f1); do
                echo "== round $round $shape ours"; LLMC_BF16_PATH=$GEMM_PATH $pin ./build/amx_bench "$shape"
                echo "== round $round $shape oneDNN"; $pin $PY dev/cpu/matmul_torch.py 2 "$shape"
            done
        done
    } >"$out/gemm_raw.txt" 2>&1
    {
        grep -E '^(fp32 FMA|bf16 dot|AMX bf16) peak' "$out/gemm_raw.txt"
        echo
        echo "ours = amx_bench with LLMC_BF16_PATH=$GEMM_PATH; oneDNN = torch.matmul in bf16 (matmul_torch.py), alternating shape by shape;"
        echo "ms: the median over $GEMM_ROUNDS rounds; ratio: the median over the rounds of oneDNN ms / ours in the same round"
        awk 'function median(a, n,   i, j, t) { for (i = 1; i < n; i++) for (j = i; j > 0 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
                                              return n % 2 ? a[int(n / 2)] : (a[n / 2 - 1] + a[n / 2]) / 2 }
             /^== / { s = ($5 == "ours") ? 1 : ($5 == "oneDNN") ? 2 : 0; r = $3 }
             /^product/ && s == 1 { k = $2 " " $3; if (!(k in seen)) { seen[k] = 1; order[n++] = k; dims[k] = $4 " " $5 " " $6 } ours[k, r] = $7; rounds[r] = 1 }
             /^product/ && s == 2 { k = $2 " " $3; dnn[k, r] = $7 }
             END { printf "%-15s %-4s %-22s %9s %8s %9s %6s\n", "shape", "prod", "M N K", "ours ms", "GFLOP/s", "oneDNN ms", "ratio";
                   for (i = 0; i < n; i++) { k = order[i]; split(k, kk, " "); split(dims[k], d, /[ =]/);
                     no = nd = nr = 0; for (r in rounds) { if ((k, r) in ours) { o[no++] = ours[k, r] } if ((k, r) in dnn) { e[nd++] = dnn[k, r] }
                                                          if ((k, r) in ours && (k, r) in dnn && ours[k, r] > 0) { q[nr++] = dnn[k, r] / ours[k, r] } }
                     om = no ? median(o, no) : 0; dm = nd ? median(e, nd) : 0; rm = nr ? median(q, nr) : 0
                     if (rm > 0) { lr += log(rm); m++ }
                     printf "%-15s %-4s %-22s %9.3f %8.1f %9.3f %6.2f\n", kk[1], kk[2], dims[k], om, (om > 0 ? 2 * d[2] * d[4] * d[6] / (om * 1e6) : 0), dm, rm }
                   if (m > 0) printf "geometric mean of oneDNN ms / ours: %.3f over %d products\n", exp(lr / m), m }' "$out/gemm_raw.txt"
        echo
        sed '/^== round/,$d' "$out/gemm_raw.txt" | grep -E '^(threads|geometric)|^== (fma|amx_bench)'
    } >"$out/gemm.txt" 2>&1
    cat "$out/gemm.txt"
fi

# train_gpt2's flags for a timed run of GPT-2 124M at B=4: step_flags T STEPS (the steps, a warm-up
# step added; no validation, no checkpoints, batches in order), shared by the parts train and ratio
step_flags() { echo "-e d12 -b 4 -t $1 -x $(($2 + 1)) -v 0 -s 0 --shuffle 0"; }
# the median ms a step of the train_gpt2 log on stdin, its first step (the warm-up) left out; nothing
# where no step was timed
median_ms() {
    sed -n 's/^step *\([0-9]*\)\/.*| \([0-9.]*\) ms |.*/\1 \2/p' | awk '$1 >= 2 { print $2 }' | sort -n |
        awk '{ a[n++] = $1 } END { if (n > 0) print (n % 2) ? a[int(n / 2)] : (a[n / 2 - 1] + a[n / 2]) / 2 }'
}
# ms per step of train_gpt2: the median of the timed steps (the first step is a warm-up)
ours() {  # ours LABEL T STEPS [ENV...] -- FLAGS...
    local label=$1 T=$2 steps=$3; shift 3
    local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
    local log
    # shellcheck disable=SC2046
    log=$(env "${envs[@]}" $pin ${BIN:-./train_gpt2} $(step_flags "$T" "$steps") "$@" 2>&1) ||
        { echo "FAIL train_gpt2 $label T=$T: $(printf '%s' "$log" | tail -n 2 | tr '\n' ' ')"; return; }
    local ms
    ms=$(printf '%s\n' "$log" | median_ms)
    echo "train_gpt2 $label T=$T: median_ms=$ms ($(printf '%s\n' "$log" | grep '^precision:'))"
}
theirs() {  # theirs T STEPS PRECISION [--compile]
    local r
    r=$($pin $PY dev/cpu/torch_step.py -B 4 -T "$1" --steps "$2" --threads 2 --precision "$3" ${4:-} 2>&1) ||
        { echo "FAIL torch_step T=$1 $3 ${4:-}: $(printf '%s' "$r" | tail -n 2 | tr '\n' ' ')"; return; }
    printf '%s\n' "$r" | grep -E '^torch_step(:| warm-up| config)'
}
if [ "$what" = all ] || [ "$what" = train ]; then
    {
        base=${BASELINE:-baseline}
        if [ -f "$base/train_gpt2.c" ] && make -s -C "$base" train_gpt2 >/dev/null 2>&1; then
            for round in 1 2; do
                BIN=$base/train_gpt2 ours "fp32 (baseline, round $round)" 64 $STEPS64 -- --precision fp32
                ours "fp32 (round $round)" 64 $STEPS64 -- --precision fp32
                BIN=$base/train_gpt2 ours "bf16 (baseline, round $round)" 64 $STEPS64 -- --precision bf16
                ours "bf16 (round $round)" 64 $STEPS64 -- --precision bf16
            done
        fi
        for T in $TS; do
            steps=$STEPS64; [ "$T" = 1024 ] && steps=$STEPS1024
            for path in $PATHS; do
                case $path in
                fp32) ours fp32 $T $steps -- --precision fp32 ;;
                *) ours "bf16 $path" $T $steps LLMC_BF16_PATH=$path -- --precision bf16 ;;
                esac
            done
            if [ "$T" = 64 ] || [ "$TORCH1024" = 1 ]; then
                for mode in $TORCH_MODES; do
                    case $mode in
                    *-compiled) theirs $T $steps "${mode%-compiled}" --compile ;;
                    *) theirs $T $steps "$mode" ;;
                    esac
                done
            fi
        done
    } 2>&1 | tee "$out/train.txt"
fi
if [ "$what" = ratio ]; then
    {
        for T in $TS; do
            steps=$STEPS64; [ "$T" = 1024 ] && steps=$STEPS1024
            cmd="LLMC_BF16_PATH=$RATIO_PATH ./train_gpt2 $(step_flags "$T" "$steps") --precision bf16"
            echo "== T=$T, ours: $cmd"
            for mode in $TORCH_MODES; do
                case $mode in *-compiled) prec=${mode%-compiled} c=--compile ;; *) prec=$mode c= ;; esac
                $pin $PY dev/cpu/torch_step.py -B 4 -T "$T" --steps "$steps" --threads 2 --precision "$prec" $c \
                    --rounds "$RATIO_ROUNDS" --alternate "$cmd" 2>&1 | grep -E '^(torch_step( round|:| config| warm-up)|error)'
            done
        done
    } 2>&1 | tee "$out/ratio.txt"
    {   # for each T, the lowest of the ratios over PyTorch's modes (measured at different minutes, the
        # fastest mode's ratio is not surely the lowest: the lowest is the one to quote)
        echo "== the lowest ratio over PyTorch's modes"
        sed -n 's/^torch_step: B=[0-9]* T=\([0-9]*\) precision=\([a-z0-9]*\) mode=\([a-z]*\) .* median_ms=\([0-9.]*\) ours_median_ms=\([0-9.]*\) ratio=\([0-9.]*\)$/\1 \2 \3 \4 \5 \6/p' "$out/ratio.txt" |
            sort -k1,1n -k6,6g | awk '$1 != last { last = $1; printf "T=%s: %sx, against PyTorch %s %s (%s ms; ours %s ms)\n", $1, $6, $2, $3, $4, $5 }'
    } 2>&1 | tee -a "$out/ratio.txt"
fi
if [ "$what" = pairs ]; then
    {
        path=${PAIRS_PATH:-emulated}
        for T in $TS; do
            steps=$STEPS64; [ "$T" = 1024 ] && steps=$STEPS1024
            for round in $(seq 1 "$RATIO_ROUNDS"); do
                for cf in 0 1; do  # fp32's core; bf16 on the other
                    cb=$((1 - cf))
                    # shellcheck disable=SC2046
                    OMP_NUM_THREADS=1 taskset -c $cf ./train_gpt2 $(step_flags "$T" "$steps") --precision fp32 >"$out/pair_fp32.log" 2>&1 &
                    # shellcheck disable=SC2046
                    OMP_NUM_THREADS=1 LLMC_BF16_PATH=$path taskset -c $cb ./train_gpt2 $(step_flags "$T" "$steps") --precision bf16 \
                        >"$out/pair_bf16.log" 2>&1 &
                    wait
                    a=$(median_ms <"$out/pair_fp32.log") b=$(median_ms <"$out/pair_bf16.log")
                    if [ -z "$a" ] || [ -z "$b" ]; then
                        echo "FAIL T=$T round $round: no steps timed: $(tail -n 1 "$out/pair_fp32.log") | $(tail -n 1 "$out/pair_bf16.log")"
                        continue
                    fi
                    echo "T=$T round $round: fp32 on CPU $cf $a ms, bf16 $path on CPU $cb $b ms, bf16 / fp32 $(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0) printf "%.3f", b / a }')"
                done
            done
        done
        rm -f "$out/pair_fp32.log" "$out/pair_bf16.log"
    } 2>&1 | tee "$out/pairs.txt"
fi
if [ "$what" = attention ]; then
    {
        for h in attention_forward attention_backward; do
            echo "== $h --precision bf16, 2 threads"
            if gcc $flags -Idev/cpu dev/cpu/$h.c -o build/$h -lm -lopenblas >build/$h.log 2>&1; then
                $pin ./build/$h --precision bf16 || status=1
            else
                echo "(not built: $(head -n 2 build/$h.log | tr '\n' ' '))"
            fi
        done
        base=${BASELINE:-baseline}
        [ -f "$base/train_gpt2.c" ] && make -s -C "$base" train_gpt2 >/dev/null 2>&1 || base=""
        for round in 1 2; do
            for bin in ./train_gpt2 ${base:+$base/train_gpt2}; do
                echo "== $bin --profile 1, B=4 T=1024, bf16 amx, round $round"
                LLMC_BF16_PATH=amx $pin $bin -e d12 -b 4 -t 1024 -x "$STEPS1024" -v 0 -s 0 --shuffle 0 --precision bf16 \
                    --profile 1 2>&1 | grep -E '^step|^  (kernel|matmul|attention|adamw|grad norm|layernorm|gelu)' | tail -n 9
            done
        done
    } 2>&1 | tee "$out/attention.txt"
fi
exit $status
