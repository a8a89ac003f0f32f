# Every program built with AddressSanitizer + UBSan (make SANITIZE=1, into
# build/sanitize/; any report aborts the program): test_gpt2 on the small
# reference configs, a short training run and its exact resume, the tokenizer's
# round trips, and prepare_data (plain, gzip, threads, small blocks), each with
# zero sanitizer reports (leak checking on, OpenMP on 2 threads).
set -u
source scripts/tests/testlib.sh
PY=$PWD/.venv/bin/python
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
S=build/sanitize
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# TEST_QUICK=1 (make test): test_gpt2 and tokenize only, on the tiny reference and the round trips
quick=${TEST_QUICK:-0}
targets=() built="every program"
[ "$quick" = 1 ] && targets=($S/test_gpt2 $S/tokenize) built="test_gpt2 and tokenize"
if make -j2 SANITIZE=1 "${targets[@]}" > "$tmp/build.log" 2>&1; then
    if grep -qi 'warning' "$tmp/build.log"; then fail "make SANITIZE=1 warning-free" "$(grep -i -m 2 warning "$tmp/build.log" | tr '\n' ' ')"
    else pass "make SANITIZE=1 builds $built warning-free"; fi
else
    fail "make SANITIZE=1" "$(grep -m 3 error "$tmp/build.log" | tr '\n' ' ')"; exit 0
fi

# The sanitizers are on and fatal: a heap overflow inside an OpenMP loop and a
# signed overflow must each abort with a report (same flags as the programs).
san_cflags=$(make -pn SANITIZE=1 2>/dev/null | sed -n 's/^SANITIZE_CFLAGS = \$(CFLAGS) //p')
printf '#include <stdlib.h>\nint main(int argc, char **argv) {\n  int *a = malloc(8 * sizeof(int)); long s = 0;\n  #pragma omp parallel for reduction(+:s)\n  for (int i = 0; i <= 8; i++) { a[i] = i; s += a[i]; }\n  int big = 2147483600 + (int)s * argc * 100; free(a); return big > 0 ? 0 : 1;\n}\n' > "$tmp/bad.c"
for what in heap-buffer-overflow signed-integer-overflow; do
    # shellcheck disable=SC2086
    if gcc -fopenmp $san_cflags "$tmp/bad.c" -o "$tmp/bad" 2>/dev/null; then
        [ $what = signed-integer-overflow ] && sed -i 's/i <= 8/i < 8/' "$tmp/bad.c" && gcc -fopenmp $san_cflags "$tmp/bad.c" -o "$tmp/bad"
        if (ulimit -c 0; "$tmp/bad" > /dev/null 2> "$tmp/bad.err") 2> /dev/null; then fail "sanitizers catch a $what" "it ran to the end"
        elif grep -q "$what\|signed integer overflow" "$tmp/bad.err"; then pass "sanitizers catch a $what and stop"
        else fail "sanitizers catch a $what" "$(head -n 2 "$tmp/bad.err" | tr '\n' ' ')"; fi
    else fail "sanitizers catch a $what" "the probe does not build"; fi
done

# clean NAME CMD...: the command exits 0 and no sanitizer reported anything
clean() {
    local name=$1; shift
    if "$@" > "$tmp/out" 2> "$tmp/err" && ! grep -qE 'Sanitizer|runtime error' "$tmp/err"; then pass "$name"
    else fail "$name" "$(grep -m 2 -E 'SUMMARY|ERROR|runtime error' "$tmp/err" | tr '\n' ' ') $(tail -n 2 "$tmp/err" | tr '\n' ' ')"; fi
}

# --- test_gpt2 on the small references (scripts/tests/test_gpt2.sh writes them; made here if missing)
declare -A REF_ARGS=(
    [odd]="--layers 2 --heads 3 --channels 57 --max-seq-len 37 --vocab 517 -B 3 -T 29 --steps 10 --seed 7"
    [tiny]="--layers 1 --heads 1 --channels 5 --max-seq-len 7 --vocab 11 -B 1 -T 7 --steps 10 --seed 3"
    [chunks]="--layers 3 --heads 5 --channels 80 --max-seq-len 100 --vocab 1003 -B 11 -T 100 --steps 5 --seed 11")
names="tiny odd chunks"; [ "$quick" = 1 ] && names=tiny
for name in $names; do
    d=data/ref/$name
    if [ ! -f $d/activations.bin ]; then
        mkdir -p $d
        # shellcheck disable=SC2086
        $PY scripts/reference/gpt2_reference.py ${REF_ARGS[$name]} --out $d > /dev/null 2>&1 || { fail "reference $name" "gpt2_reference.py failed"; continue; }
    fi
    clean "sanitized test_gpt2 matches PyTorch: $name" $S/test_gpt2 -e $d/model.bin -s $d/state.bin -l $d/losses.txt -a $d/activations.bin
done

if [ "$quick" != 1 ]; then
# --- a short training run, and 4 steps + a resume for 4 more giving the same losses
model=data/ref/odd/model.bin
$PY scripts/reference/make_synthetic_data.py --out "$tmp/data" --vocab 517 --tokens 20000 > /dev/null
train() { $S/train_gpt2 -e $model -i "$tmp/data/synth_train_*.bin" -j "$tmp/data/synth_val_*.bin" -b 4 -t 32 -v 4 -m 2 -s 4 \
          --tokenizer "$tmp/data/gpt2_tokenizer.bin" -g 8 -k constant -u 2 "$@"; }
clean "sanitized train_gpt2: 8 steps with validation, samples and checkpoints" train -x 8 -n 4 -o "$tmp/full"
clean "sanitized train_gpt2: 4 steps, then a resume for 4 more" bash -c \
    "$(declare -f train); S=$S model=$model tmp=$tmp; train -x 4 -n 4 -o $tmp/half && train -x 8 -n 4 -o $tmp/half -y 1"
grep -q "^resuming from .*model_00000004.bin" "$tmp/out" || fail "sanitized resume" "the second run did not resume from step 4"
losses() { grep -oE '^s:[0-9]+ trl:[0-9.]+' "$1" | sort -u; }
if [ -f "$tmp/full/main.log" ] && [ -n "$(losses "$tmp/full/main.log")" ] && \
   [ "$(losses "$tmp/full/main.log")" = "$(losses "$tmp/half/main.log")" ]; then
    pass "sanitized resume: the 8 losses equal the uninterrupted run's"
else
    fail "sanitized resume" "$(diff <(losses "$tmp/full/main.log" 2>/dev/null) <(losses "$tmp/half/main.log" 2>/dev/null) | head -n 4 | tr '\n' '|')"
fi

# --- incremental decoding: the key/value cache's steps (one parallel region, spin barrier) in
# fp32 and bf16 (the bf16 GEMV, both of its paths), sliding windows, against the full forward
clean "sanitized test_kvcache: fp32 and bf16 cached steps, sliding window" sh -c \
    "$S/test_kvcache -c 2,3,57,64,517 -n 80 -w 32 && $S/test_kvcache -c 2,3,57,64,517 -n 80 -w 32 --precision bf16"
fi

# --- the tokenizer's round trips and prepare_data, on the real vocabulary
vocab=${GPT2_VOCAB_DIR:-data/gpt2}
if [ ! -f "$vocab/encoder.json" ]; then fail "sanitized tokenizer" "no vocabulary in $vocab (set GPT2_VOCAB_DIR)"; exit 0; fi
{ cat README.md; printf 'naïve café 東京 🙂\r\n\n\n\xff\xfe\xc3 x\t\ty'; cat llmc/bpe.h; } > "$tmp/text.txt"
gzip -c "$tmp/text.txt" > "$tmp/text.txt.gz"
threads_list="1 2"; [ "$quick" = 1 ] && threads_list=2
for threads in $threads_list; do
    clean "sanitized tokenize: encode, $threads thread(s)" sh -c "$S/tokenize --vocab $vocab --threads $threads $tmp/text.txt.gz > $tmp/ids$threads"
    clean "sanitized tokenize: decode gives the text back, $threads thread(s)" \
        sh -c "$S/tokenize --vocab $vocab --decode $tmp/ids$threads > $tmp/back$threads && cmp $tmp/back$threads $tmp/text.txt"
done
[ "$quick" = 1 ] && exit 0
clean "sanitized tokenize: the heap merge on every piece gives the same ids" \
    sh -c "$S/tokenize --vocab $vocab --heap-min 2 $tmp/text.txt | cmp - $tmp/ids1"
prep() { "$1" --vocab "$vocab" -i "$tmp/text.txt" -i "$tmp/text.txt.gz" --name t --val-tokens 100 --shard-tokens 3000 \
         --split-blank-lines "${@:2}"; }
clean "sanitized prepare_data: plain + gzip, 2 threads, 1 KB blocks" prep $S/prepare_data -o "$tmp/san" --threads 2 --block-bytes 1024
expect_ok "normal prepare_data for comparison" prep ./prepare_data -o "$tmp/ref" --threads 1
if [ -n "$(ls "$tmp/ref")" ] && diff -r "$tmp/san" "$tmp/ref" > /dev/null; then pass "sanitized prepare_data writes the same files"
else fail "sanitized prepare_data writes the same files" "$(diff -rq "$tmp/san" "$tmp/ref" 2>&1 | head -n 2 | tr '\n' ' ')"; fi
