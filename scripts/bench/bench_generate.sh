#!/usr/bin/env bash
# make bench-generate: generate's speed on GPT-2 124M (a random d12 with llm.c's
# initialization: the speed does not depend on the weights) at batch 1, fp32 and bf16:
# - tokens/s of incremental decoding (one position per token, after the prompt),
#   against the memory-bandwidth bound: a token reads every weight once (all but
#   wpe, of which one row), so the bound is dev/cpu/read_bandwidth's GB/s over
#   those bytes; the goal is >= 70% of it. In bf16 the matmul weights (and the LM
#   head, wte) are read as bf16, 2 bytes; the biases, LayerNorms and the embedding
#   rows stay fp32: that row has its own bound, over its own bytes;
# - against transformers' own GPT2LMHeadModel.generate (scripts/bench/bench_generate.py):
#   greedy, with its key/value cache, on the same model exported by
#   scripts/convert/llmc_to_hf.py to a local directory and loaded offline (HF_HUB_OFFLINE=1), in
#   fp32 and in bf16 (the bf16 export, loaded as bf16: the way a bf16 transformers user
#   runs it), same prompt, same number of new tokens, same thread count. Compared: the
#   decoding rate after the first token, and the whole generation (prompt + N tokens).
#   Run interleaved, ROUNDS times, best of each.
#   transformers runs as PyTorch's CPU performance guide tunes it (as in make bench):
#   tcmalloc preloaded and OMP_WAIT_POLICY=PASSIVE, OPENBLAS_CORETYPE and
#   OPENBLAS_L2_SIZE unset.
# - fp32's greedy tokens must be transformers' (the text of both is compared): the
#   script says so, or stops with an error.
# OMP_WAIT_POLICY is left as the environment has it for generate: a token's barriers spin
# briefly then sleep whatever it says (llmc/barrier.h); it still applies to the prompt's
# batched forward and to the start and end of each token's parallel region.
#   THREADS=2 ROUNDS=3 NEW=64 OMP_WAIT_POLICY=passive bash scripts/bench/bench_generate.sh
# (DEPTH=d6 times a smaller GPT-2 instead: scripts/tests/test_bench.sh's quick run.)
set -euo pipefail
cd "$(dirname "$0")/../.."
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
NEW=${NEW:-64}
DEPTH=${DEPTH:-d12}
PY=$PWD/.venv/bin/python
case $DEPTH in d6|d12|d24) ;; *) echo "error: DEPTH=$DEPTH: expected d6, d12 or d24" >&2; exit 1 ;; esac
for v in THREADS ROUNDS NEW; do
    [[ ${!v} =~ ^[1-9][0-9]{0,3}$ ]] || { echo "error: $v=${!v}: expected a whole number from 1 to 9999" >&2; exit 1; }
done
[ "$NEW" -ge 2 ] || { echo "error: NEW=$NEW: expected at least 2 (the decoding rate is over the tokens after the first)" >&2; exit 1; }
[ -f data/gpt2/encoder.json ] || { echo "error: data/gpt2/encoder.json missing: run make setup (or make data) first" >&2; exit 1; }
[ -x ./generate ] && [ -x ./tokenize ] && [ -x dev/cpu/read_bandwidth ] || { echo "error: build first: make generate tokenize; make -C dev/cpu read_bandwidth" >&2; exit 1; }
[ -x "$PY" ] || { echo "error: $PY missing: run make setup (it makes the project venv with transformers)" >&2; exit 1; }
tcmalloc=$(dpkg -L libgoogle-perftools4 2> /dev/null | grep -m 1 -E '/libtcmalloc\.so\.[0-9]+$' || true)
[ -n "$tcmalloc" ] && [ -f "$tcmalloc" ] || { echo "error: tcmalloc not found (dpkg -L libgoogle-perftools4): install Debian's libgoogle-perftools4 (make setup does)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $THREADS threads (OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "transformers setting: $($PY -c 'import torch, transformers; print(f"transformers {transformers.__version__}, torch {torch.__version__}")'), $tcmalloc preloaded, $THREADS threads, OMP_WAIT_POLICY=PASSIVE"
$PY scripts/bench/bench_generate.py --write-model "$tmp/model.bin" --depth "$DEPTH"
$PY scripts/convert/llmc_to_hf.py "$tmp/model.bin" "$tmp/hf_fp32" > /dev/null
$PY scripts/convert/llmc_to_hf.py "$tmp/model.bin" "$tmp/hf_bf16" --dtype bf16 > /dev/null
printf 'First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\nFirst Citizen:\nYou are all resolved rather to die than to famish?\n' > "$tmp/prompt.txt"
./tokenize --vocab data/gpt2 "$tmp/prompt.txt" > "$tmp/prompt.ids"
# bytes a token reads: every parameter but wpe's other rows (header words 2..7: maxT V L NH C Vp)
read -r maxT L C Vp < <($PY -c "
import numpy as np; h = np.fromfile('$tmp/model.bin', np.int32, 8); print(h[2], h[4], h[6], h[7])")
params=$(( Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C ))
bytes=$(( (params - (maxT - 1) * C) * 4 ))
bytes_bf16=$(( (Vp * C + L * 12 * C * C) * 2 + (2 * C + L * 13 * C + 2 * C) * 4 ))  # bf16 weights; wte, wpe rows, biases, LayerNorms fp32

best() { sort -g | tail -n 1; }
: > "$tmp/bw"
for p in fp32 bf16; do for f in step total hf_step hf_total; do : > "$tmp/${f}_$p"; done; done
for round in $(seq 1 "$ROUNDS"); do
    OMP_NUM_THREADS=$THREADS dev/cpu/read_bandwidth 1024 | tee "$tmp/bw.out"
    sed -n 's/.*: \([0-9.]*\) GB\/s with.*/\1/p' "$tmp/bw.out" >> "$tmp/bw"
    for p in fp32 bf16; do
        OMP_NUM_THREADS=$THREADS ./generate -e "$tmp/model.bin" -f "$tmp/prompt.txt" -n "$NEW" --temperature 0 \
            --precision $p > "$tmp/ours_$p.txt" 2> "$tmp/ours.err"
        echo "$p: $(tail -n 1 "$tmp/ours.err")"
        grep -q "generated $NEW tokens" "$tmp/ours.err" || { echo "error: generate stopped early: $(tail -n 1 "$tmp/ours.err")" >&2; exit 1; }
        sed -n 's/.*tokens: \([0-9.]*\) tok\/s after the first.*/\1/p' "$tmp/ours.err" >> "$tmp/step_$p"
        # the whole run minus start-up (allocation and loading): prompt + NEW tokens
        awk -v p="$(sed -n 's/^prompt: [0-9]* tokens in \([0-9.]*\) ms.*/\1/p' "$tmp/ours.err")" \
            -v s="$(sed -n 's/.*(\([0-9.]*\) ms per token).*/\1/p' "$tmp/ours.err")" -v n="$NEW" \
            'BEGIN { printf "%.3f\n", n / ((p + s * (n - 1)) / 1000) }' >> "$tmp/total_$p"
        env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE LD_PRELOAD="$tcmalloc" OMP_WAIT_POLICY=PASSIVE \
            OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS HF_HUB_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 \
            TRANSFORMERS_VERBOSITY=error $PY scripts/bench/bench_generate.py --hf-dir "$tmp/hf_$p" --dtype $p \
            --prompt-ids "$tmp/prompt.ids" -n "$NEW" --threads "$THREADS" --ids-out "$tmp/hf_$p.ids" > "$tmp/hf.out" 2>&1 ||
            { cat "$tmp/hf.out" >&2; echo "error: scripts/bench/bench_generate.py failed (transformers generate, $p)" >&2; exit 1; }
        echo "$p: $(tail -n 1 "$tmp/hf.out")"
        sed -n 's/.* tok_per_s=\([0-9.]*\).*/\1/p' "$tmp/hf.out" >> "$tmp/hf_total_$p"
        sed -n 's/.* decode_tok_per_s=\([0-9.]*\).*/\1/p' "$tmp/hf.out" >> "$tmp/hf_step_$p"
        # the same greedy text? (generate prints the prompt and the new text, then a newline)
        { ./tokenize --vocab data/gpt2 --decode "$tmp/hf_$p.ids"; echo; } > "$tmp/hf_$p.txt"
        if cmp -s "$tmp/ours_$p.txt" "$tmp/hf_$p.txt"; then echo "the same as transformers'" > "$tmp/same_$p"
        else
            echo "not the same as transformers' (first difference at byte $(cmp "$tmp/ours_$p.txt" "$tmp/hf_$p.txt" 2>&1 | sed -n 's/.* byte \([0-9]*\).*/\1/p'))" > "$tmp/same_$p"
            [ $p = bf16 ] || { echo "error: generate's greedy fp32 text is $(cat "$tmp/same_$p")" >&2; exit 1; }
        fi
    done
done
bw=$(best < "$tmp/bw")
echo "GPT-2 $DEPTH, batch 1, prompt of $(wc -l < "$tmp/prompt.ids") tokens + $NEW new, greedy; read bandwidth $bw GB/s (best of $ROUNDS)"
for p in fp32 bf16; do
    b=$bytes; [ $p = bf16 ] && b=$bytes_bf16
    awk -v p=$p -v bw="$bw" -v bytes="$b" -v step="$(best < "$tmp/step_$p")" -v total="$(best < "$tmp/total_$p")" \
        -v hf_step="$(best < "$tmp/hf_step_$p")" -v hf_total="$(best < "$tmp/hf_total_$p")" -v same="$(cat "$tmp/same_$p")" 'BEGIN {
        bound = bw * 1e9 / bytes
        printf "%s: %.1f MB read per token, bound %.2f tok/s; incremental decoding %.2f tok/s = %.0f%% of the bound (goal >= 70%%) ", p, bytes / 1e6, bound, step, 100 * step / bound
        printf "= %.2fx transformers generate %s (%.2f tok/s); ", step / hf_step, p, hf_step
        printf "prompt + new: %.2f tok/s = %.2fx transformers generate %s (%.2f tok/s); greedy text: %s\n", total, total / hf_total, p, hf_total, same
    }'
done
