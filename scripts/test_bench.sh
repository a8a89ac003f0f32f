#!/usr/bin/env bash
# make bench's script (scripts/bench.sh) still works: a tiny run (GPT-2 d6, B=1 T=16, one
# round of 3 timed steps, no calibration) must print every row (--recompute 1 too) with sane figures, the
# medians of the step times it printed, the model FLOPs of the documented formula, and
# the ratios; and bad settings must give one-line errors. (Timings are not checked.)
# The same for make bench-generate's script (scripts/bench_generate.sh), on d6.
source "$(dirname "$0")/testlib.sh"
make -s train_gpt2 > /dev/null && make -s -C dev/cpu fma_peak > /dev/null || { fail "bench build" "make failed"; exit 0; }

log=$(mktemp)
genlog=$(mktemp)
trap 'rm -f "$log" "$genlog"' EXIT
# TORCH_BF16=1: the PyTorch bf16 autocast row also on a CPU without AVX-512, where make bench skips it
if MODEL=d6 SHAPES=1x16 ROUNDS=1 STEPS=3 CALIBRATE=0 THREADS=2 TORCH_BF16=1 bash scripts/bench.sh > "$log" 2>&1; then
    pass "bench.sh runs (d6, B=1 T=16, 1 round)"
else
    fail "bench.sh runs" "exit $?: $(tail -n 3 "$log" | tr '\n' ' ')"
fi

if grep -Eq '^peaks with 2 threads \(dev/cpu/fma_peak\): fp32 FMA [0-9.]+ GFLOP/s, bf16 dot ([0-9.]+ GFLOP/s|none)' "$log"; then
    pass "bench.sh prints the fp32 and bf16 peaks"
else
    fail "bench.sh peaks" "$(grep -m 1 '^peaks' "$log")"
fi
if [ "$(grep -c '^PyTorch \(fp32\|bf16\) setting: tcmalloc, 2 threads, OMP_WAIT_POLICY=' "$log")" = 2 ]; then
    pass "bench.sh names PyTorch's setting for each precision"
else
    fail "bench.sh PyTorch setting" "$(grep '^PyTorch' "$log" | tr '\n' ' ')"
fi
# 3 * (2*B*T*(12*L*C^2 + C*Vp) + L*4*B*NH*hs*T*(T+1)/2) for d6 (L=6 C=384 NH=6), B=1 T=16
if grep -q '^RESULT d6 B=1 T=16: 2\.877 model GFLOP per step$' "$log"; then
    pass "bench.sh model FLOPs of a step (the documented formula)"
else
    fail "bench.sh model FLOPs" "$(grep -m 1 'model GFLOP' "$log")"
fi

# check_row NAME PEAK_WORDS: the RESULT row exists, its ms/step is the median of the step
# times printed for it, which are those of steps 1, 2, 3 (0 is the warm-up), tok/s, GFLOP/s
# and MFU (against the peak of the row's precision) follow from it, RSS is plausible.
peak_fp32=$(sed -n 's/^peaks with .*: fp32 FMA \([0-9.]*\) GFLOP\/s.*/\1/p' "$log")
peak_bf16=$(sed -n 's/^peaks with .*, bf16 dot \([0-9.]*\) GFLOP\/s.*/\1/p' "$log")
figures='([0-9]+) ms/step, ([0-9]+) tok/s, ([0-9.]+) GFLOP/s, MFU ([0-9.]+)% of the'
check_row() {
    local name=$1 peak_words=$2 line steps want
    line=$(grep -m 1 "^RESULT d6 B=1 T=16 $name: " "$log")
    if ! [[ $line =~ $figures\ $peak_words\ peak,\ peak\ RSS\ ([0-9]+)\ MiB$ ]]; then
        fail "bench.sh row $name" "'$line'"; return
    fi
    local ms=${BASH_REMATCH[1]} toks=${BASH_REMATCH[2]} gflops=${BASH_REMATCH[3]} mfu=${BASH_REMATCH[4]} rss=${BASH_REMATCH[5]}
    steps=$(grep -m 1 "^-- d6 B=1 T=16 round 1: $name ms of step: " "$log" | sed 's/.*ms of step: //')
    if [ "$(printf '%s\n' $steps | cut -d : -f 1 | tr '\n' ' ')" != "1 2 3 " ]; then
        fail "bench.sh row $name" "timed steps '$steps' are not steps 1, 2, 3"; return
    fi
    want=$(printf '%s\n' $steps | cut -d : -f 2 | sort -n | sed -n 2p)
    if [ "$(printf '%.0f' "$want")" != "$ms" ]; then
        fail "bench.sh row $name" "ms/step $ms is not the median of the step times '$steps'"; return
    fi
    local peak=$peak_fp32
    [ "$peak_words" = "bf16 dot" ] && peak=$peak_bf16
    if ! awk -v ms="$ms" -v t="$toks" -v g="$gflops" -v m="$mfu" -v r="$rss" -v p="$peak" 'BEGIN {
        tw = 16e3 / ms; gw = 2.877 / ms * 1e3  # what tok/s and GFLOP/s should be (ms is rounded: 2%)
        exit !(ms > 0 && t >= tw * 0.98 - 0.5 && t <= tw * 1.02 + 0.5 && g >= gw * 0.98 - 0.05 &&
               g <= gw * 1.02 + 0.05 && m >= 100 * g / p - 5 / p - 0.06 && m <= 100 * g / p + 5 / p + 0.06 && m > 0 && m <= 100 &&
               r > 50 && r < 4000) }'; then
        fail "bench.sh row $name" "figures do not add up: '$line'"; return
    fi
    pass "bench.sh row $name: the median step, tokens/s, GFLOP/s, MFU, peak RSS"
}
check_row "train_gpt2 fp32" "fp32 FMA"
check_row "PyTorch fp32" "fp32 FMA"
bf16_peak_words="bf16 dot"
grep -q '^peaks.*bf16 dot none' "$log" && bf16_peak_words="MFU n/a"
if [ "$bf16_peak_words" = "bf16 dot" ]; then
    check_row "PyTorch bf16 autocast" "bf16 dot"
else  # a CPU without AVX512_BF16: no peak to divide by
    expect_ok "bench.sh row PyTorch bf16 autocast (no bf16 peak)" grep -Eq '^RESULT d6 B=1 T=16 PyTorch bf16 autocast: [0-9]+ ms/step, .*MFU n/a' "$log"
fi
# a bf16 row of ours: its MFU against the bf16 dot peak, or n/a on a CPU without one
check_bf16_row() {
    if [ "$bf16_peak_words" = "bf16 dot" ]; then check_row "$1" "bf16 dot"; else
        expect_ok "bench.sh row $1 (no bf16 peak)" grep -Eq "^RESULT d6 B=1 T=16 $1: [0-9]+ ms/step, .*MFU n/a" "$log"
    fi
}
if ./train_gpt2 -h 2>&1 | grep -q -- --precision; then
    check_bf16_row "train_gpt2 bf16"
    expect_ok "bench.sh ratio bf16/bf16" grep -Eq '^RESULT d6 B=1 T=16 ratio bf16/bf16: train_gpt2 bf16 [0-9]+ ms against PyTorch bf16 autocast [0-9]+ ms: [0-9.]+x its step rate, [0-9.]+x its peak RSS$' "$log"
else
    expect_ok "bench.sh row train_gpt2 bf16: not available in this build" grep -q '^RESULT d6 B=1 T=16 train_gpt2 bf16: not available in this build' "$log"
    expect_ok "bench.sh ratio bf16/bf16: n/a" grep -q '^RESULT d6 B=1 T=16 ratio bf16/bf16: n/a' "$log"
fi
if ./train_gpt2 -h 2>&1 | grep -q -- --recompute; then
    check_bf16_row "train_gpt2 bf16 --recompute 1"
    expect_ok "bench.sh ratio bf16 --recompute 1/bf16" grep -Eq '^RESULT d6 B=1 T=16 ratio bf16 --recompute 1/bf16: train_gpt2 bf16 --recompute 1 [0-9]+ ms against PyTorch bf16 autocast [0-9]+ ms: [0-9.]+x its step rate, [0-9.]+x its peak RSS$' "$log"
else
    expect_ok "bench.sh row train_gpt2 bf16 --recompute 1: not available in this build" grep -q '^RESULT d6 B=1 T=16 train_gpt2 bf16 --recompute 1: not available in this build' "$log"
fi
expect_ok "bench.sh ratio fp32/fp32" grep -Eq '^RESULT d6 B=1 T=16 ratio fp32/fp32: train_gpt2 fp32 [0-9]+ ms against PyTorch fp32 [0-9]+ ms: [0-9.]+x its step rate, [0-9.]+x its peak RSS$' "$log"
expect_ok "bench.sh ratio best/best" grep -Eq '^RESULT d6 B=1 T=16 ratio best/best: train_gpt2 (fp32|bf16) [0-9]+ ms against PyTorch (fp32|bf16 autocast) [0-9]+ ms: [0-9.]+x its step rate' "$log"

# TORCH_BF16=0 (as auto on a CPU without AVX-512): no PyTorch bf16 row, the row says why, and
# our best is compared with PyTorch fp32
if MODEL=d6 SHAPES=1x16 ROUNDS=1 STEPS=1 CALIBRATE=0 THREADS=2 TORCH_BF16=0 bash scripts/bench.sh > "$log" 2>&1; then
    expect_ok "bench.sh TORCH_BF16=0: no PyTorch bf16 run" bash -c "! grep -q 'PyTorch bf16 autocast ms of step' '$log'"
    expect_ok "bench.sh TORCH_BF16=0: the row says why" grep -q '^RESULT d6 B=1 T=16 PyTorch bf16 autocast: not run: TORCH_BF16=0$' "$log"
    expect_ok "bench.sh TORCH_BF16=0: ratio bf16/bf16 n/a" grep -q '^RESULT d6 B=1 T=16 ratio bf16/bf16: n/a (PyTorch bf16 autocast not run)$' "$log"
    expect_ok "bench.sh TORCH_BF16=0: best/best against PyTorch fp32" grep -Eq '^RESULT d6 B=1 T=16 ratio best/best: train_gpt2 (fp32|bf16) [0-9]+ ms against PyTorch fp32 [0-9]+ ms: ' "$log"
else
    fail "bench.sh TORCH_BF16=0 runs" "exit $?: $(tail -n 3 "$log" | tr '\n' ' ')"
fi

expect_error "bench.sh MODEL=d7: one-line error" 1 'MODEL=d7' env MODEL=d7 bash scripts/bench.sh
expect_error "bench.sh TORCH_BF16=yes: one-line error" 1 'TORCH_BF16=yes' env TORCH_BF16=yes bash scripts/bench.sh
expect_error "bench.sh SHAPES=4x2048: one-line error" 1 "shape '4x2048'.*at most 1024" env SHAPES=4x2048 bash scripts/bench.sh
expect_error "bench.sh SHAPES=4-64: one-line error" 1 "shape '4-64'" env SHAPES=4-64 bash scripts/bench.sh
expect_error "bench.sh THREADS=0: one-line error" 1 'THREADS=0' env THREADS=0 bash scripts/bench.sh
expect_error "bench.sh CALIBRATE=yes: one-line error" 1 'CALIBRATE=yes' env CALIBRATE=yes bash scripts/bench.sh

# bench_generate.sh: one round of 4 new tokens on d6 (L=6 C=384 maxT=1024 Vp=50304). A token reads
# every parameter but wpe's other 1023 rows: 119.9 MB in fp32; in bf16 the matmul weights and wte
# are bf16, the rest fp32: 60.0 MB. The share of the bound is tok/s over the bound.
if make -s generate tokenize > /dev/null && make -s -C dev/cpu read_bandwidth > /dev/null &&
   DEPTH=d6 ROUNDS=1 NEW=4 THREADS=2 bash scripts/bench_generate.sh > "$genlog" 2>&1; then
    pass "bench_generate.sh runs (d6, 4 new tokens, 1 round)"
else
    fail "bench_generate.sh runs" "exit $?: $(tail -n 3 "$genlog" | tr '\n' ' ')"
fi
for p in fp32:119.9 bf16:60.0; do
    line=$(grep -E "^${p%%:*}: ${p#*:} MB read per token, bound [0-9.]+ tok/s; incremental decoding [0-9.]+ tok/s = [0-9]+% of the bound \(goal >= 70%\); prompt \+ new: [0-9.]+ tok/s = [0-9.]+x the PyTorch fp32 full-sequence loop \([0-9.]+ tok/s; goal >= 5x\)$" "$genlog")
    # (the printed figures are rounded: the share within 1 point, the ratio within 0.1)
    if [ -n "$line" ] && awk -v l="$line" 'function abs(v) { return v < 0 ? -v : v }
        BEGIN { split(l, w, " "); b = w[8]; r = w[12]; pct = w[15] + 0; t = w[25]; x = w[28] + 0
        torch = substr(w[34], 2) + 0
        exit !(b > 0 && r > 0 && abs(pct - 100 * r / b) <= 1 && torch > 0 && abs(x - t / torch) <= 0.1) }'; then
        pass "bench_generate.sh ${p%%:*}: bytes per token, bound, share and PyTorch ratio consistent"
    else
        fail "bench_generate.sh ${p%%:*}" "$(grep "^${p%%:*}: " "$genlog" | tail -n 1)"
    fi
done
expect_error "bench_generate.sh DEPTH=d7: one-line error" 1 'DEPTH=d7' env DEPTH=d7 bash scripts/bench_generate.sh
expect_error "bench_generate.sh NEW=0: one-line error" 1 'NEW=0' env NEW=0 bash scripts/bench_generate.sh
