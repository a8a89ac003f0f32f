#!/usr/bin/env bash
# make bench's script (scripts/bench/bench.sh) still works, in two tiny runs (GPT-2 d6, B=1 T=16, one
# round of 3 timed steps):
#  A. the calibration (1 timed step a candidate) and PyTorch fp32 eager and compiled (TORCH_BF16=0):
#     a calibration line per candidate, the faster AdamW kept, the compile check's line, the PyTorch
#     bf16 rows saying why they did not run;
#  B. no calibration, PyTorch eager only, bf16 autocast too (TORCH_BF16=1, also on a CPU without
#     AVX-512 where make bench skips it).
# In each, every row prints (--recompute 1 too) with sane figures: the medians of the step times it
# printed, the model FLOPs of the documented formula; the ratios are those of the printed rows,
# against PyTorch's fastest row of the precision; a progress line per run, with the time left. Bad
# settings give one-line errors. (Timings are not checked.)
# The same for make bench-generate's script (scripts/bench/bench_generate.sh), on d6.
#
# TEST_QUICK=1 (make test): run B and the bad settings' errors only (no calibration, no torch.compile
# row, no TORCH_BF16=0 run, no bench_generate.sh run); make test-all: everything.
source "$(dirname "$0")/testlib.sh"
quick=${TEST_QUICK:-0}
make -s train_gpt2 > /dev/null && make -s -C dev/cpu fma_peak core_to_core > /dev/null || { fail "bench build" "make failed"; exit 0; }

log=$(mktemp)
genlog=$(mktemp)
trap 'rm -f "$log" "$genlog"' EXIT
ours_bf16=0 ours_recompute=0
two_cpus=0  # CPUs 0 and 1 are this process's to run on (taskset), so bench.sh prints their round trip
[ "$(python3 -c 'import os; print(int({0, 1} <= os.sched_getaffinity(0)))')" = 1 ] && two_cpus=1
./train_gpt2 -h 2>&1 | grep -q -- --precision && ours_bf16=1
./train_gpt2 -h 2>&1 | grep -q -- --recompute && ours_recompute=1

# read_peaks: the fp32 and bf16 peaks the run in $log measured (each run measures its own)
read_peaks() {
    peak_fp32=$(sed -n 's/^peaks with .*: fp32 FMA \([0-9.]*\) GFLOP\/s.*/\1/p' "$log")
    peak_bf16=$(sed -n 's/^peaks with .*, bf16 dot \([0-9.]*\) GFLOP\/s.*/\1/p' "$log")
    peak_amx=$(sed -n 's/^peaks with .*, AMX \([0-9.]*\) GFLOP\/s$/\1/p' "$log")
    # bf16 rows: against AMX's peak where fma_peak measured one (a CPU with AMX that Linux lets us
    # use), else the faster of the bf16 dot and the fp32 FMA (the emulated path's unit)
    bf16_peak_words="bf16 dot"
    if [ -z "$peak_bf16" ] || awk -v b="$peak_bf16" -v f="$peak_fp32" 'BEGIN { exit !(f > b) }'; then
        bf16_peak_words="fp32 FMA" peak_bf16=$peak_fp32
    fi
    if [ -n "$peak_amx" ]; then
        grep -q amx_bf16 /proc/cpuinfo || fail "bench.sh $run: the AMX peak" "an AMX peak on a CPU without amx_bf16"
        bf16_peak_words="AMX" peak_bf16=$peak_amx
    fi
}
# check_row NAME PEAK_WORDS WARMUP: the RESULT row exists, its ms/step is the median of the step
# times printed for it, which are those of steps WARMUP..WARMUP+2, tok/s, GFLOP/s and MFU (against
# the peak of the row's precision) follow from it, RSS is plausible; where CPUs 0 and 1 are ours, its
# line of step times ends with their round trip.
figures='([0-9]+) ms/step, ([0-9]+) tok/s, ([0-9.]+) GFLOP/s, MFU ([0-9.]+)% of the'
check_row() {
    local name=$1 peak_words=$2 warmup=$3 line steps want
    line=$(grep -m 1 "^RESULT d6 B=1 T=16 $name: " "$log")
    if ! [[ $line =~ $figures\ $peak_words\ peak,\ peak\ RSS\ ([0-9]+)\ MiB$ ]]; then
        fail "bench.sh $run: row $name" "'$line'"; return
    fi
    local ms=${BASH_REMATCH[1]} toks=${BASH_REMATCH[2]} gflops=${BASH_REMATCH[3]} mfu=${BASH_REMATCH[4]} rss=${BASH_REMATCH[5]}
    local timed
    timed=$(grep -m 1 "^-- d6 B=1 T=16 round 1: $name ms of step: " "$log")
    # where CPUs 0 and 1 are ours, the line ends with their cache-line round trip before and after
    if [ $two_cpus = 1 ] && ! [[ $timed =~ \ \(CPU\ 0-1\ round\ trip\ [0-9]+\.[0-9]\ ns\ before,\ [0-9]+\.[0-9]\ after\)$ ]]; then
        fail "bench.sh $run: row $name" "no CPU 0-1 round trip at the end of '$timed'"; return
    fi
    steps=$(printf '%s\n' "$timed" | sed 's/.*ms of step: //; s/ (CPU 0-1 round trip .*//')
    if [ "$(printf '%s\n' $steps | cut -d : -f 1 | tr '\n' ' ')" != "$warmup $((warmup + 1)) $((warmup + 2)) " ]; then
        fail "bench.sh $run: row $name" "timed steps '$steps' are not steps $warmup to $((warmup + 2))"; return
    fi
    want=$(printf '%s\n' $steps | cut -d : -f 2 | sort -n | sed -n 2p)
    if [ "$(printf '%.0f' "$want")" != "$ms" ]; then
        fail "bench.sh $run: row $name" "ms/step $ms is not the median of the step times '$steps'"; return
    fi
    local peak=$peak_fp32
    [ "$peak_words" != "fp32 FMA" ] && peak=$peak_bf16  # (where bf16 rows use the fp32 FMA's, they are equal)
    if ! awk -v ms="$ms" -v t="$toks" -v g="$gflops" -v m="$mfu" -v r="$rss" -v p="$peak" 'BEGIN {
        tw = 16e3 / ms; gw = 2.877 / ms * 1e3  # what tok/s and GFLOP/s should be (ms is rounded: 2%)
        exit !(ms > 0 && t >= tw * 0.98 - 0.5 && t <= tw * 1.02 + 0.5 && g >= gw * 0.98 - 0.05 &&
               g <= gw * 1.02 + 0.05 && m >= 100 * g / p - 5 / p - 0.06 && m <= 100 * g / p + 5 / p + 0.06 && m > 0 && m <= 100 &&
               r > 50 && r < 4000) }'; then
        fail "bench.sh $run: row $name" "figures do not add up: '$line'"; return
    fi
    pass "bench.sh $run: row $name: the median step, tokens/s, GFLOP/s, MFU, peak RSS, the CPUs' round trip"
}
# a bf16 row: its MFU against AMX's peak, the bf16 dot peak, or the fp32 FMA's where that is the faster
check_bf16_row() { check_row "$1" "$bf16_peak_words" "$2"; }
# check_ratio WHAT "A1|A2|..." "B1|B2|...": the ratio line WHAT compares the fastest of rows A1, A2...
# with the fastest of rows B1, B2... (of those that ran; either of a tie), with the ms and RSS those
# rows printed, and its ratios are theirs (within the rounding)
row_ms() { sed -n "s/^RESULT d6 B=1 T=16 $1: \([0-9]*\) ms\/step, .*/\1/p" "$log"; }
row_rss() { sed -n "s/^RESULT d6 B=1 T=16 $1: .*, peak RSS \([0-9]*\) MiB$/\1/p" "$log"; }
fastest_ms() {
    local IFS='|' r
    for r in $1; do row_ms "$r"; done | sort -n | head -n 1
}
check_ratio() {
    local what=$1 as=$2 bs=$3 line ms_a ms_b re
    ms_a=$(fastest_ms "$as"); ms_b=$(fastest_ms "$bs")
    line=$(grep -m 1 "^RESULT d6 B=1 T=16 ratio $what: " "$log")
    if [ -z "$ms_a" ] || [ -z "$ms_b" ]; then fail "bench.sh $run: ratio $what" "rows not found for '$line'"; return; fi
    re="^RESULT d6 B=1 T=16 ratio $what: (.*) $ms_a ms against (.*) $ms_b ms: ([0-9.]+)x its step rate, ([0-9.]+)x its peak RSS$"
    if ! [[ $line =~ $re ]] || ! [[ "|$as|" == *"|${BASH_REMATCH[1]}|"* ]] || ! [[ "|$bs|" == *"|${BASH_REMATCH[2]}|"* ]] ||
       [ "$(row_ms "${BASH_REMATCH[1]}")" != "$ms_a" ] || [ "$(row_ms "${BASH_REMATCH[2]}")" != "$ms_b" ]; then
        fail "bench.sh $run: ratio $what" "'$line' is not the fastest of $as ($ms_a ms) against the fastest of $bs ($ms_b ms)"; return
    fi
    local rss_a rss_b
    rss_a=$(row_rss "${BASH_REMATCH[1]}"); rss_b=$(row_rss "${BASH_REMATCH[2]}")
    if awk -v r="${BASH_REMATCH[3]}" -v s="${BASH_REMATCH[4]}" -v a="$ms_a" -v b="$ms_b" -v ra="$rss_a" -v rb="$rss_b" '
        function abs(v) { return v < 0 ? -v : v }
        BEGIN { exit !(abs(r - b / a) <= 0.006 + b / a * (0.5 / a + 0.5 / b) && abs(s - ra / rb) <= 0.006 + ra / rb * (0.5 / ra + 0.5 / rb)) }'; then
        pass "bench.sh $run: ratio $what: the fastest rows compared, the ratios of their figures"
    else
        fail "bench.sh $run: ratio $what" "ratios in '$line' are not those of the rows ($ms_a, $ms_b ms; $rss_a, $rss_b MiB)"
    fi
}
# check_progress: a line per run, numbered 1..N of N, each after the first with the time left
check_progress() {
    local n
    n=$(grep -c '^bench: run [0-9]* of [0-9]*, ' "$log")
    if [ "$n" -gt 1 ] && [ "$(grep '^bench: run ' "$log" | sed 's/^bench: run \([0-9]*\) of \([0-9]*\), .*/\1 \2/' | tr '\n' ' ')" = "$(seq 1 "$n" | sed "s/\$/ $n/" | tr '\n' ' ')" ] &&
       [ "$(grep '^bench: run ' "$log" | tail -n +2 | grep -Ec '; [0-9]+ s so far, about [0-9]+ (s|min) left')" = $((n - 1)) ] &&
       grep -q '^bench: done in [0-9]* s$' "$log"; then
        pass "bench.sh $run: a progress line per run ($n), with the time left"
    else
        fail "bench.sh $run: progress lines" "$(grep '^bench: ' "$log" | head -n 3 | tr '\n' '|')"
    fi
}

# A: calibration, PyTorch fp32 eager and compiled
if [ "$quick" != 1 ]; then
run=A
if MODEL=d6 SHAPES=1x16 ROUNDS=1 STEPS=3 CALIBRATE=1 CAL_SHAPE=1x16 CAL_STEPS=1 THREADS=2 TORCH_BF16=0 \
   TORCH_MODES="eager compile" bash scripts/bench/bench.sh > "$log" 2>&1; then
    pass "bench.sh A runs (d6, B=1 T=16, calibration, PyTorch fp32 eager and compiled)"
else
    fail "bench.sh A runs" "exit $?: $(tail -n 3 "$log" | tr '\n' ' ')"
fi
if grep -Eq '^peaks with 2 threads \(dev/cpu/fma_peak, the largest of 3 readings: fp32 [0-9.]+ [0-9.]+ [0-9.]+; bf16 [0-9. ]*(; AMX [0-9.]+ [0-9.]+ [0-9.]+)?\): fp32 FMA [0-9.]+ GFLOP/s, bf16 dot ([0-9.]+ GFLOP/s|none)(, AMX [0-9.]+ GFLOP/s)?' "$log"; then
    pass "bench.sh A: prints the fp32 and bf16 peaks, and AMX's where there is one (the largest of 3 readings)"
else
    fail "bench.sh A: peaks" "$(grep -m 1 '^peaks' "$log")"
fi
# 5 candidates with fused AdamW, then the fastest with foreach; the setting kept is the fastest line
cal=$(grep '^-- calibration fp32 ' "$log")
kept=$(printf '%s\n' "$cal" | awk '{ d = $0; sub(/^-- calibration fp32 /, "", d); sub(/ +[0-9.]+ ms\/step.*/, "", d)
    for (i = 1; i < NF; i++) if ($(i + 1) == "ms/step") ms = $i
    if (best == "" || ms + 0 < best + 0) { best = ms; kept = d } } END { print kept }')
if [ "$(printf '%s\n' "$cal" | grep -c 'AdamW fused')" = 5 ] && [ "$(printf '%s\n' "$cal" | grep -c 'AdamW foreach')" = 1 ] &&
   grep -q "^PyTorch fp32 setting: tcmalloc, 2 threads, $kept (the fastest of 5 candidates" "$log"; then
    pass "bench.sh A: calibration of 5 settings and 2 AdamWs, the fastest kept ($kept)"
else
    fail "bench.sh A: calibration" "kept '$kept' of: $(printf '%s' "$cal" | tr '\n' '|'); $(grep '^PyTorch fp32 setting' "$log")"
fi
if grep -Eq '^-- d6 B=1 T=16 round 1: PyTorch compile fp32: step 0 took [0-9.]+ s; dynamo graphs [1-9][0-9]*, graph breaks 0, recompiles 0; step 0 against eager: loss .*\(rel diff .*, allowed 1e-05\), grad norm .*allowed 1e-05\)$' "$log"; then
    pass "bench.sh A: torch.compile compiled the model without graph breaks, step 0 as eager's"
else
    fail "bench.sh A: compile check" "$(grep -m 1 'PyTorch compile fp32:' "$log")"
fi
# 3 * (2*B*T*(12*L*C^2 + C*Vp) + L*4*B*NH*hs*T*(T+1)/2) for d6 (L=6 C=384 NH=6), B=1 T=16
if grep -q '^RESULT d6 B=1 T=16: 2\.877 model GFLOP per step$' "$log"; then
    pass "bench.sh A: model FLOPs of a step (the documented formula)"
else
    fail "bench.sh A: model FLOPs" "$(grep -m 1 'model GFLOP' "$log")"
fi
read_peaks
check_row "train_gpt2 fp32" "fp32 FMA" 1
check_row "PyTorch eager fp32" "fp32 FMA" 1
check_row "PyTorch compile fp32" "fp32 FMA" 2
for r in "PyTorch eager bf16 autocast" "PyTorch compile bf16 autocast"; do
    expect_ok "bench.sh A: row $r says why it did not run" grep -q "^RESULT d6 B=1 T=16 $r: not run: TORCH_BF16=0$" "$log"
done
expect_ok "bench.sh A: no PyTorch bf16 run" bash -c "! grep -q 'PyTorch.*bf16.*ms of step' '$log'"
check_ratio "fp32/fp32" "train_gpt2 fp32" "PyTorch eager fp32|PyTorch compile fp32"
expect_ok "bench.sh A: ratio bf16/bf16 n/a" grep -q '^RESULT d6 B=1 T=16 ratio bf16/bf16: n/a (\(train_gpt2 bf16\|PyTorch bf16 autocast\) not run)$' "$log"
check_ratio "best/best" "train_gpt2 fp32|train_gpt2 bf16" "PyTorch eager fp32|PyTorch compile fp32"
check_progress
fi

# B: no calibration, PyTorch eager fp32 and bf16 autocast
run=B
if MODEL=d6 SHAPES=1x16 ROUNDS=1 STEPS=3 CALIBRATE=0 THREADS=2 TORCH_BF16=1 TORCH_MODES=eager bash scripts/bench/bench.sh > "$log" 2>&1; then
    pass "bench.sh B runs (d6, B=1 T=16, PyTorch eager fp32 and bf16 autocast)"
else
    fail "bench.sh B runs" "exit $?: $(tail -n 3 "$log" | tr '\n' ' ')"
fi
if [ "$(grep -c '^PyTorch \(fp32\|bf16\) setting: tcmalloc, 2 threads, OMP_WAIT_POLICY=PASSIVE, AdamW fused (calibration skipped: CALIBRATE=0)$' "$log")" = 2 ]; then
    pass "bench.sh B: names PyTorch's setting for each precision"
else
    fail "bench.sh B: PyTorch setting" "$(grep '^PyTorch' "$log" | tr '\n' ' ')"
fi
read_peaks
check_row "train_gpt2 fp32" "fp32 FMA" 1
check_row "PyTorch eager fp32" "fp32 FMA" 1
check_bf16_row "PyTorch eager bf16 autocast" 1
for r in "PyTorch compile fp32" "PyTorch compile bf16 autocast"; do
    expect_ok "bench.sh B: row $r says why it did not run" grep -q "^RESULT d6 B=1 T=16 $r: not run: TORCH_MODES='eager'$" "$log"
done
if [ $ours_bf16 = 1 ]; then
    check_bf16_row "train_gpt2 bf16" 1
    check_ratio "bf16/bf16" "train_gpt2 bf16" "PyTorch eager bf16 autocast"
else
    expect_ok "bench.sh B: row train_gpt2 bf16: not available in this build" grep -q '^RESULT d6 B=1 T=16 train_gpt2 bf16: not available in this build' "$log"
    expect_ok "bench.sh B: ratio bf16/bf16: n/a" grep -q '^RESULT d6 B=1 T=16 ratio bf16/bf16: n/a' "$log"
fi
if [ $ours_recompute = 1 ]; then
    check_bf16_row "train_gpt2 bf16 --recompute 1" 1
    check_ratio "bf16 --recompute 1/bf16" "train_gpt2 bf16 --recompute 1" "PyTorch eager bf16 autocast"
else
    expect_ok "bench.sh B: row train_gpt2 bf16 --recompute 1: not available in this build" grep -q '^RESULT d6 B=1 T=16 train_gpt2 bf16 --recompute 1: not available in this build' "$log"
fi
check_ratio "fp32/fp32" "train_gpt2 fp32" "PyTorch eager fp32"
check_ratio "best/best" "train_gpt2 fp32|train_gpt2 bf16" "PyTorch eager fp32|PyTorch eager bf16 autocast"
check_progress

# dev/cpu/core_to_core, whose round trip the rows print: a figure, and one-line errors
if [ $two_cpus = 1 ]; then
    if dev/cpu/core_to_core 2>&1 | grep -Eq '^round trip CPU 0 - CPU 1: [0-9]+\.[0-9] ns$' &&
        dev/cpu/core_to_core 1 0 2>&1 | grep -Eq '^round trip CPU 1 - CPU 0: [0-9]+\.[0-9] ns$'; then
        pass "dev/cpu/core_to_core: CPUs 0 and 1's round trip, either way"
    else
        fail "dev/cpu/core_to_core" "$(dev/cpu/core_to_core 2>&1 | head -n 2 | tr '\n' ' ')"
    fi
fi
expect_error "core_to_core 0 0: one-line error" 1 'both 0' dev/cpu/core_to_core 0 0
expect_error "core_to_core x 1: one-line error" 1 "'x' is not a CPU number" dev/cpu/core_to_core x 1
expect_error "core_to_core 0 -1: one-line error" 1 "'-1' is not a CPU number" dev/cpu/core_to_core 0 -1
expect_error "core_to_core 0 1000: one-line error" 1 'not available to this process' dev/cpu/core_to_core 0 1000
expect_error "core_to_core 0 (one CPU): usage" 2 'give two CPU numbers or none' dev/cpu/core_to_core 0
expect_error "bench.sh MODEL=d7: one-line error" 1 'MODEL=d7' env MODEL=d7 bash scripts/bench/bench.sh
expect_error "bench.sh TORCH_BF16=yes: one-line error" 1 'TORCH_BF16=yes' env TORCH_BF16=yes bash scripts/bench/bench.sh
expect_error "bench.sh TORCH_MODES=fast: one-line error" 1 "TORCH_MODES='fast'" env TORCH_MODES=fast bash scripts/bench/bench.sh
expect_error "bench.sh SHAPES=4x2048: one-line error" 1 "shape '4x2048'.*at most 1024" env SHAPES=4x2048 bash scripts/bench/bench.sh
expect_error "bench.sh SHAPES=4-64: one-line error" 1 "shape '4-64'" env SHAPES=4-64 bash scripts/bench/bench.sh
expect_error "bench.sh THREADS=0: one-line error" 1 'THREADS=0' env THREADS=0 bash scripts/bench/bench.sh
expect_error "bench.sh CALIBRATE=yes: one-line error" 1 'CALIBRATE=yes' env CALIBRATE=yes bash scripts/bench/bench.sh

# bench_generate.sh: one round of 4 new tokens on d6 (L=6 C=384 maxT=1024 Vp=50304). A token reads
# every parameter but wpe's other 1023 rows: 119.9 MB in fp32; in bf16 the matmul weights and wte
# are bf16, the rest fp32: 60.0 MB. The share of the bound is tok/s over the bound; the ratios are
# ours over transformers' rates printed beside them; fp32's greedy text is transformers'.
if [ "$quick" != 1 ]; then
if make -s generate tokenize > /dev/null && make -s -C dev/cpu read_bandwidth > /dev/null &&
   DEPTH=d6 ROUNDS=1 NEW=4 THREADS=2 bash scripts/bench/bench_generate.sh > "$genlog" 2>&1; then
    pass "bench_generate.sh runs (d6, 4 new tokens, 1 round)"
else
    fail "bench_generate.sh runs" "exit $?: $(tail -n 3 "$genlog" | tr '\n' ' ')"
fi
num='([0-9.]+)'
for p in fp32:119.9 bf16:60.0; do
    prec=${p%%:*}
    re="^$prec: ${p#*:} MB read per token, bound $num tok/s; incremental decoding $num tok/s = ([0-9]+)% of the bound \(goal >= 70%\) = ${num}x transformers generate $prec \($num tok/s\); prompt \+ new: $num tok/s = ${num}x transformers generate $prec \($num tok/s\); greedy text: (the same as transformers'|not the same as transformers' \\(first difference at byte [0-9]+\\))$"
    line=$(grep "^$prec: .* MB read per token" "$genlog" | tail -n 1)
    # (the printed figures are rounded: the share within 1 point, the ratios within 0.01)
    if [[ $line =~ $re ]] && awk -v b="${BASH_REMATCH[1]}" -v r="${BASH_REMATCH[2]}" -v pct="${BASH_REMATCH[3]}" \
        -v x1="${BASH_REMATCH[4]}" -v h1="${BASH_REMATCH[5]}" -v t="${BASH_REMATCH[6]}" -v x2="${BASH_REMATCH[7]}" \
        -v h2="${BASH_REMATCH[8]}" 'function abs(v) { return v < 0 ? -v : v }
        BEGIN { exit !(b > 0 && r > 0 && abs(pct - 100 * r / b) <= 1 && h1 > 0 && h2 > 0 &&
                       abs(x1 - r / h1) <= 0.006 + r / h1 * 0.01 / h1 && abs(x2 - t / h2) <= 0.006 + t / h2 * 0.01 / h2) }'; then
        pass "bench_generate.sh $prec: bytes per token, bound, share and transformers ratios consistent"
    else
        fail "bench_generate.sh $prec" "'$line'"
    fi
done
expect_ok "bench_generate.sh: fp32 greedy text the same as transformers generate's" grep -q "^fp32: .*; greedy text: the same as transformers'$" "$genlog"
expect_ok "bench_generate.sh: transformers generate ran offline with sdpa attention, fp32 and bf16" \
    bash -c "[ \$(grep -Ec '^(fp32|bf16): transformers: dtype=(fp32|bf16) attention=sdpa prompt=[0-9]+ new=4 threads=2 ' '$genlog') = 2 ]"
fi
expect_error "bench_generate.sh DEPTH=d7: one-line error" 1 'DEPTH=d7' env DEPTH=d7 bash scripts/bench/bench_generate.sh
expect_error "bench_generate.sh NEW=0: one-line error" 1 'NEW=0' env NEW=0 bash scripts/bench/bench_generate.sh
expect_error "bench_generate.sh NEW=1: one-line error" 1 'NEW=1' env NEW=1 bash scripts/bench/bench_generate.sh
