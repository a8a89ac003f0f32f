# generate and the key/value cache: cached logits against the full forward (test_kvcache),
# the sampler on crafted logits (test_sampler), broken versions of both that must fail,
# and generate from the shell: determinism, greedy, prompts, decoders, end-of-text, bad input.
set -u
source scripts/tests/testlib.sh
PY=$PWD/.venv/bin/python
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- the cache against the full forward. Small: 3 layers, 3 heads of 24 channels, V=999
# (sizes that are multiples of no vector width), 400 positions in one context, and 300
# in a window of 64 (8 slides); GPT-2 124M briefly.
SMALL="-c 3,3,72,512,999"
# TEST_QUICK=1 (make test): no GPT-2 124M runs, the portable build only, three of the mutants
quick=${TEST_QUICK:-0}
quick_mutants="cache length off by one|the bf16 copy of the weights truncated|top-p drops the token"
expect_ok "cached logits = full forward's, 400 positions (small random model)" ./test_kvcache $SMALL -n 400
expect_ok "cached logits = full forward's, 300 positions in a sliding window of 64" ./test_kvcache $SMALL -n 300 -w 64
expect_ok "cached logits = full forward's, one-position window (every token re-encoded)" ./test_kvcache $SMALL -n 20 -w 1
[ "$quick" = 1 ] ||
expect_ok "cached logits = full forward's, GPT-2 124M (d12), 40 positions, window 32" ./test_kvcache -e d12 -n 40 -w 32
# bf16: the steps' bf16 GEMV (bf16 copy of the weights) against the bf16 GEMM, matmul by matmul
# and through the whole model; the vdpbf16ps and the portable path must give the same bits.
expect_ok "bf16: cached logits = full forward's, matmuls = the bf16 GEMM's, both bf16 paths bit-identical (small)" \
    ./test_kvcache $SMALL -n 300 -w 64 --precision bf16
expect_ok "bf16: the same starting from the portable path (LLMC_BF16_EMULATE=1)" \
    env LLMC_BF16_EMULATE=1 ./test_kvcache $SMALL -n 100 --precision bf16
[ "$quick" = 1 ] ||
expect_ok "bf16: the same on GPT-2 124M (d12), 40 positions, window 32" ./test_kvcache -e d12 -n 40 -w 32 --precision bf16
expect_ok "sampler: temperature, top-k, top-p on crafted logits" ./test_sampler

# The other builds: portable (4-lane vectors) and the AVX-512 shapes forced (16 lanes, as
# pairs of 8-lane vectors on an AVX2 machine, at -O2 without GCSE as in test_gpt2.sh, which
# says why; on an AVX-512 machine the native build is that build).
for variant in "portable|PORTABLE=1" "AVX-512 shapes forced|CFLAGS=-O2 -fno-gcse -std=gnu11 -march=native -fopenmp -DVEC_WIDTH=16"; do
    IFS='|' read -r what flags <<< "$variant"
    [ "$quick" = 1 ] && [ "$what" != portable ] && continue
    if [ "$what" != portable ] && [ "$(native_vec_width)" = 16 ]; then
        pass "cached logits, $what build skipped: this CPU has AVX-512, so the native build above is that build"
        continue
    fi
    dir=$tmp/variant
    rm -rf "$dir" && mkdir -p "$dir" && cp -r Makefile test_kvcache.c llmc "$dir/"
    if out=$(make -s -C "$dir" "$flags" test_kvcache 2>&1) && out=$("$dir/test_kvcache" $SMALL -n 120 -w 32 2>&1); then
        pass "cached logits = full forward's, $what build"
    else
        fail "cached logits, $what build" "$(printf '%s' "$out" | tail -n 2 | tr '\n' ' ')"
    fi
done

# The AMX path (LLMC_BF16_PATH=amx: the batched forward's GEMM and attention on AMX tiles, which
# sum in their own order), on real tiles where the CPU has them, else on the C model of them
# (-DGEMM_AMX_EMULATE, which needs AVX512_BF16): cached logits within the bf16 tolerance of the
# batched forward's, and vdpbf16ps and the portable path still bit-identical.
if grep -q avx512_bf16 /proc/cpuinfo; then
    amx_cflags="CFLAGS=-O3 -std=gnu11 -march=native -fopenmp"
    grep -q amx_bf16 /proc/cpuinfo || amx_cflags="$amx_cflags -DGEMM_AMX_EMULATE"
    dir=$tmp/variant
    rm -rf "$dir" && mkdir -p "$dir" && cp -r Makefile test_kvcache.c llmc "$dir/"
    if out=$(make -s -C "$dir" "$amx_cflags" test_kvcache 2>&1) &&
       out=$(LLMC_BF16_PATH=amx "$dir/test_kvcache" $SMALL -n 150 -w 64 --precision bf16 2>&1); then
        pass "bf16 on the AMX path: cached logits = full forward's, the other two paths bit-identical"
    else
        fail "bf16 on the AMX path" "$(printf '%s' "$out" | grep -v '^OK' | tail -n 2 | tr '\n' ' ')"
    fi
else
    pass "bf16 on the AMX path skipped: this CPU has neither AMX nor AVX512_BF16 for the model of the tiles"
fi

# --- mutants: a copy of the sources with one deliberate bug each must fail.
# file | sed expression | program and its arguments | what
# (The pair-order mutant needs rows of 5 or more 32-value chunks: with 4 or fewer, each of the
# GEMV's 4 partial sums gets one chunk, 0 + a + b rounds once, and the order cannot show; C=264.
# The tail mutant needs rows that are not a whole number of vectors: C=60 leaves a tail of 4
# floats with AVX2's 8-float vectors and 12 with AVX-512's 16, where SMALL's C=72 leaves none
# with AVX2.)
MUTANTS=(
    "llmc/gpt2_cache.h|s/wpe = model->params.wpe + (size_t)pos \* C/wpe = model->params.wpe + (size_t)(pos + 1) * C/|test_kvcache $SMALL -n 100|the new token gets the next position's wpe row"
    "llmc/gpt2_cache.h|s/cache->k + layer, cache->v + layer, pos + 1,/cache->k + layer, cache->v + layer, pos,/|test_kvcache $SMALL -n 100|the new token's query misses its own key (cache length off by one)"
    "llmc/gpt2_cache.h|s/memcpy(cache->k + dst, qkv + (size_t)t \* 3 \* C + C + h \* hs/memcpy(cache->k + dst, qkv + (size_t)t * 3 * C + 2 * C + h * hs/|test_kvcache $SMALL -n 100|keys cached from the value part of qkv"
    "llmc/gpt2_cache.h|s/    cache->len = n;/    cache->len = n - (n > 1);/|test_kvcache $SMALL -n 300 -w 64|the prompt's forward leaves the cache one position short (every token re-encoded)"
    "llmc/attention.h|s/acc += vec_select(vec_lanes_below(n - j), p, (vfloat){0});/acc += p;/|test_kvcache $SMALL -n 100|cached attention sums the softmax over the padding lanes too"
    "llmc/attention.h|s/for (int d = 0; d < hs; d++) { o\[d\] \*= alpha; }/(void)alpha;/|test_kvcache $SMALL -n 4 --precision bf16|bf16 cached attention does not rescale its sums when the running maximum grows"
    "llmc/gemv.h|s/    if (c < C) {/    if (0) {/|test_kvcache -c 3,3,60,512,999 -n 100|GEMV drops the tail of rows that are not whole vectors"
    "llmc/gemv.h|s/dst\[r \* Cp + c\] = (uint16_t)(gemm_bf16_bits(src\[r \* C + c\]) >> 16);/dst[r * Cp + c] = (uint16_t)(*(const uint32_t *)\&src[r * C + c] >> 16);/|test_kvcache $SMALL -n 60 --precision bf16|the bf16 copy of the weights truncated instead of rounded to nearest even"
    "llmc/gemv.h|s/x16\[c\] = (uint16_t)(gemm_bf16_bits(x\[c\]) >> 16);/x16[c] = (uint16_t)(*(const uint32_t *)\&x[c] >> 16);/|test_kvcache $SMALL -n 60 --precision bf16|the bf16 GEMV's input row truncated, not rounded"
    "llmc/gemv.h|s/acc\[j\] = acc\[j\] + (gemv_v16)(ww \& hi_mask) \* (gemv_v16)(xw \& hi_mask);/acc[j] = acc[j] + (gemv_v16)(ww << 16) * (gemv_v16)(xw << 16); acc[j] = acc[j] + (gemv_v16)(ww \& hi_mask) * (gemv_v16)(xw \& hi_mask); continue;/|test_kvcache -c 3,3,264,512,999 -n 60 --precision bf16|the portable bf16 GEMV adds each pair low first (vdpbf16ps: high first)"
    "llmc/sampler.h|s/if (cum >= target) { keep = r + 1; break; }/if (cum >= target) { keep = r > 0 ? r : 1; break; }/|test_sampler|top-p drops the token that crosses p"
    "llmc/sampler.h|s/const double floor = (1.0 - top_p) \* sum \/ V;/const double floor = (1.0 - top_p) * sum \/ 100;/|test_sampler|top-p's shortcut skips tokens that can be in the nucleus"
)
selected=()  # the mutants that run, each built in $tmp/mutant/N (two builds at a time)
for entry in "${MUTANTS[@]}"; do
    IFS='|' read -r file expr cmd what <<< "$entry"
    [ "$quick" = 1 ] && ! printf '%s' "$what" | grep -Eq "$quick_mutants" && continue
    dir=$tmp/mutant/${#selected[@]}
    selected+=("$entry")
    mkdir -p "$dir" && cp -r Makefile test_kvcache.c test_sampler.c llmc "$dir/"
    sed -i "$expr" "$dir/$file"
    cmp -s "$file" "$dir/$file" || build_start "$dir" make -s -C "$dir" "${cmd%% *}"
done
for i in "${!selected[@]}"; do
    IFS='|' read -r file expr cmd what <<< "${selected[$i]}"
    dir=$tmp/mutant/$i
    if cmp -s "$file" "$dir/$file"; then fail "mutant: $what" "the sed expression no longer matches $file; update the mutant"; continue; fi
    if ! build_wait "$dir"; then fail "mutant: $what" "does not compile: $(head -n 2 "$dir/build.log" | tr '\n' ' ')"; continue; fi
    # shellcheck disable=SC2086
    out=$("$dir/"$cmd 2>/dev/null); rc=$?
    verdict=$(printf '%s\n' "$out" | grep -E '^(FAIL|FAILED)' | head -n 1)
    if [ $rc -eq 1 ] && [ -n "$verdict" ]; then pass "mutant caught: $what (${verdict:0:110})"
    else fail "mutant caught: $what" "exit $rc: $(printf '%s' "$out" | tail -n 1)"; fi
done

# --- generate from the shell, on a small random GPT-2 with GPT-2's vocabulary (maxT 64,
# so that -n 100 slides). eot.bin: the same whose final LayerNorm always points at the
# end-of-text token's embedding, so that it is the most likely token everywhere.
$PY - "$tmp" <<'EOF'
import numpy as np, sys
out = sys.argv[1]
maxT, V, L, NH, C, Vp = 64, 50257, 2, 2, 32, 50304
rng = np.random.default_rng(5)
def model(path, eot):
    shapes = [(Vp, C), (maxT, C), (L, C), (L, C), (L, 3*C, C), (L, 3*C), (L, C, C), (L, C), (L, C), (L, C),
              (L, 4*C, C), (L, 4*C), (L, C, 4*C), (L, C), (C,), (C,)]
    t = [rng.normal(0, 0.3, s).astype(np.float32) for s in shapes]
    t[0][V:] = 0
    for i in (2, 8, 14): t[i][:] = 1
    if eot:
        t[14][:] = 0; t[15][:] = 1; t[0][50256] = 1
    h = np.zeros(256, np.int32); h[:8] = [20240326, 3, maxT, V, L, NH, C, Vp]
    with open(path, 'wb') as f:
        f.write(h.tobytes())
        for x in t: f.write(x.tobytes())
model(out + '/model.bin', False)
model(out + '/eot.bin', True)
h = np.zeros(256, np.int32); h[:8] = [20240326, 3, maxT, 60000, L, NH, C, 60032]
open(out + '/bigvocab.bin', 'wb').write(h.tobytes())
EOF
m=$tmp/model.bin
gen() { ./generate -e "$m" "$@" 2>/dev/null; }
a=$(gen -p "Once upon a time" -n 40 --seed 7); b=$(gen -p "Once upon a time" -n 40 --seed 7)
c=$(gen -p "Once upon a time" -n 40 --seed 8)
[ -n "$a" ] && [ "$a" = "$b" ] && pass "same seed, same text" || fail "same seed" "'$a' vs '$b'"
[ "$a" != "$c" ] && pass "another seed, another text" || fail "another seed" "the same text"
t1=$(OMP_NUM_THREADS=1 ./generate -e "$m" -p "Once upon a time" -n 40 --seed 7 2>/dev/null)
[ "$t1" = "$a" ] && pass "1 thread and the default give the same text" || fail "threads" "'$t1' vs '$a'"
g1=$(gen -p "Once upon a time" -n 40 --temperature 0 --seed 1); g2=$(gen -p "Once upon a time" -n 40 --temperature 0 --seed 2)
k1=$(gen -p "Once upon a time" -n 40 --top-k 1 --seed 3)
[ "$g1" = "$g2" ] && [ "$g1" = "$k1" ] && pass "temperature 0 is greedy: any seed, and the same as top-k 1" \
    || fail "greedy" "'$g1' / '$g2' / '$k1'"
p1=$(gen -p "Once upon a time" -n 40 --top-p 0.5 --seed 7)
[ -n "$p1" ] && [ "$p1" != "$a" ] && pass "top-p 0.5 changes the text" || fail "top-p" "'$p1'"

prompt='Héllo, 世界 — naïve café'
out=$(gen -p "$prompt" -n 20)
[ "${out:0:${#prompt}}" = "$prompt" ] && pass "the output starts with the prompt, UTF-8 intact" || fail "prompt echo" "'$out'"
printf '%s' "$prompt" > "$tmp/prompt.txt"
[ "$(gen -f "$tmp/prompt.txt" -n 20)" = "$out" ] && pass "-f FILE gives the same text as -p" || fail "-f FILE" "differs"
[ "$(printf '%s' "$prompt" | gen -f - -n 20)" = "$out" ] && pass "-f - reads the prompt from stdin" || fail "-f -" "differs"
tok=data/tinyshakespeare/gpt2_tokenizer.bin
if [ -f $tok ]; then
    [ "$(gen -p "$prompt" -n 60 --tokenizer $tok)" = "$(gen -p "$prompt" -n 60)" ] \
        && pass "the llm.c tokenizer file and the BPE vocabulary decode the same bytes" || fail "decoders" "differ"
else
    fail "decoders" "$tok is missing (make setup)"
fi
err=$(./generate -e "$m" -p "abc" -n 100 2>&1 >/dev/null)
printf '%s' "$err" | grep -q "generated 100 tokens" && pass "-n 100 past the model's context of 64 (the cache slides)" \
    || fail "slide" "$(printf '%s' "$err" | tail -n 1)"
out=$(./generate -e $tmp/eot.bin -p "abc" -n 50 --seed 3 2>"$tmp/err")
[ "$out" = "abc" ] && grep -q "generated 0 tokens.*stopped at end-of-text" "$tmp/err" \
    && pass "stops at end-of-text, which is not printed" || fail "end-of-text" "'$out' $(tail -n 1 "$tmp/err")"
out=$(./generate -e "$m" --eot -n 10 2>/dev/null)
[ -n "$out" ] && pass "--eot alone starts from end-of-text" || fail "--eot" "no text"

expect_ok "-h prints the usage" sh -c './generate -h | grep -q "^usage: ./generate"'
expect_error "no model" 2 "^error: -e: a model is required" ./generate -p hi
expect_error "no prompt" 2 "^error: -p: give a prompt" ./generate -e "$m"
expect_error "-p and -f" 2 "^error: -f: give the prompt with -p or -f, not both" ./generate -e "$m" -p hi -f x
expect_error "unknown flag" 2 "^error: --bogus: unknown flag" ./generate -e "$m" --bogus 1
expect_error "-n not a number" 2 "^error: -n: 'x' is not an integer" ./generate -e "$m" -p hi -n x
expect_error "--top-p 0" 2 "^error: --top-p: must be above 0" ./generate -e "$m" -p hi --top-p 0
expect_error "bad --precision" 2 "^error: --precision: 'fp16' is not fp32 or bf16" ./generate -e "$m" -p hi --precision fp16
# bf16: the matmuls round their operands; greedy text from the same prompt is made (and says so)
if out=$(./generate -e "$m" -p "Once upon a time" -n 20 --temperature 0 --precision bf16 2>"$tmp/bf16.err") &&
   grep -q "matmuls: bf16" "$tmp/bf16.err" && [ "${#out}" -gt 16 ]; then
    pass "generate --precision bf16 runs the bf16 matmuls"
else
    fail "generate --precision bf16" "$(head -c 300 "$tmp/bf16.err")"
fi
b1=$(gen -p "Once upon a time" -n 40 --seed 7 --precision bf16); b2=$(gen -p "Once upon a time" -n 40 --seed 7 --precision bf16)
b3=$(OMP_NUM_THREADS=1 ./generate -e "$m" -p "Once upon a time" -n 40 --seed 7 --precision bf16 2>/dev/null)
b4=$(LLMC_BF16_EMULATE=1 ./generate -e "$m" -p "Once upon a time" -n 40 --seed 7 --precision bf16 2>/dev/null)
[ -n "$b1" ] && [ "$b1" = "$b2" ] && [ "$b1" = "$b3" ] && [ "$b1" = "$b4" ] \
    && pass "bf16: same seed, same text (twice, 1 thread, the portable path)" || fail "bf16 same seed" "'$b1' / '$b2' / '$b3' / '$b4'"
expect_error "--top-p above 1" 2 "^error: --top-p: 1.5 is outside" ./generate -e "$m" -p hi --top-p 1.5
expect_error "--temperature negative" 2 "^error: --temperature: -1 is outside" ./generate -e "$m" -p hi --temperature -1
expect_error "missing model file" 1 "^error: $tmp/none.bin: cannot open" ./generate -e $tmp/none.bin -p hi
head -c 5000 "$m" > "$tmp/short.bin"
expect_error "truncated model file" 1 "short.bin: truncated model file" ./generate -e "$tmp/short.bin" -p hi
expect_error "missing vocabulary" 1 "$tmp/novocab/encoder.json: cannot open" ./generate -e "$m" -p hi --vocab $tmp/novocab
expect_error "missing prompt file" 1 "^error: $tmp/none.txt: cannot open" ./generate -e "$m" -f $tmp/none.txt
expect_error "model vocabulary larger than the tokenizer's" 1 "a vocabulary of 50257 tokens, the model's has 60000" \
    ./generate -e $tmp/bigvocab.bin -p hi
expect_error "empty prompt" 1 "^error: -p: the prompt is empty" ./generate -e "$m" -p ""
