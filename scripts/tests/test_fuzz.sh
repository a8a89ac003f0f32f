# The libFuzzer harnesses (fuzz/, README "Fuzzing"): they build warning-free with
# clang; every committed seed and regression reproducer passes; each harness fuzzes
# for FUZZ_SECONDS (default 20) without a finding (fuzz/run.sh); and broken loaders
# (mutants of the real headers, built the same way) are caught.
set -u
source scripts/tests/testlib.sh
# TEST_QUICK=1 (make test): the committed inputs and 1 s of fuzzing per harness, two mutants
quick=${TEST_QUICK:-0}
if [ "$quick" = 1 ]; then seconds=${FUZZ_SECONDS:-1}; else seconds=${FUZZ_SECONDS:-20}; fi
quick_mutants="dataloader without the vocabulary check|model loader skipping its CRC check"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if ! command -v clang >/dev/null; then fail "fuzzers build" "clang is not installed (scripts/setup/setup.sh installs it)"; exit 0; fi
if make -j2 fuzzers > "$tmp/build.log" 2>&1; then
    if grep -qi 'warning' "$tmp/build.log"; then fail "fuzzers build warning-free" "$(grep -i -m 2 warning "$tmp/build.log" | tr '\n' ' ')"
    else pass "fuzzers build warning-free"; fi
else
    fail "fuzzers build" "$(grep -m 3 -E 'error' "$tmp/build.log" | tr '\n' ' ')"
    exit 0
fi

FUZZ_SECONDS=$seconds bash fuzz/run.sh

# mutant NAME HARNESS HEADER SED_EXPR: the harness built against a copy of llmc/ with
# SED_EXPR applied to HEADER must fail on its committed inputs (seeds + regressions).
fuzz_cflags=$(make -pn fuzzers 2>/dev/null | sed -n 's/^FUZZ_CFLAGS = //p')
mutant() {
    local name=$1 h=$2 header=$3 expr=$4
    [ "$quick" = 1 ] && ! printf '%s' "$name" | grep -Eq "$quick_mutants" && return
    rm -rf "$tmp/m"; mkdir -p "$tmp/m/fuzz"
    cp -r llmc "$tmp/m/llmc"
    cp fuzz/fuzz_common.h "fuzz/fuzz_$h.c" "$tmp/m/fuzz/"
    sed -i "$expr" "$tmp/m/llmc/$header"
    if cmp -s "llmc/$header" "$tmp/m/llmc/$header"; then fail "mutant: $name" "the edit did not apply to llmc/$header"; return; fi
    # shellcheck disable=SC2086
    if ! clang $fuzz_cflags "$tmp/m/fuzz/fuzz_$h.c" -o "$tmp/m/fuzzer" -lm -lz > "$tmp/m/build.log" 2>&1; then
        fail "mutant: $name" "does not build: $(head -n 2 "$tmp/m/build.log" | tr '\n' ' ')"; return
    fi
    local dirs=(fuzz/corpus/$h)
    [ -d fuzz/regressions/$h ] && dirs+=(fuzz/regressions/$h)
    if "$tmp/m/fuzzer" -runs=0 -artifact_prefix="$tmp/m/" "${dirs[@]}" > "$tmp/m/run.log" 2>&1; then
        fail "mutant: $name" "the harness passed a broken loader"
    else
        pass "mutant: $name is caught ($(grep -m 1 -oE 'property failed: [^(]*|ERROR: [A-Za-z]+: [a-z-]+|runtime error: [a-z ]+' "$tmp/m/run.log"))"
    fi
}
mutant "dataloader without the vocabulary check" dataloader dataloader.h \
    's/if (loader->buffer\[i\] >= loader->vocab_size) {/if (0) {/'
mutant "dataloader reading one token short" dataloader dataloader.h \
    's/size_t want = (n + 1) \* sizeof(uint16_t), got = 0;/size_t want = n * sizeof(uint16_t), got = 0;/'
mutant "tokenizer writing a token's NUL one byte past its buffer" tokenizer tokenizer.h \
    's/tok->token_table\[i\]\[len\] = .\\0.;/tok->token_table[i][len + 1] = 0;/'
mutant "activations reader without its newline-in-name guard" activations debug_state.h \
    's/if ((unsigned char)\*c < 0x20 || \*c == 0x7f) { \*c = .?.; }//'
mutant "bpe_encode_parallel copying an empty part (the bug fuzzing found)" bpe_encode bpe.h \
    '/a thread.s empty range: its data may be NULL/d'
mutant "BPE heap merge choosing the right pair of equal rank first" bpe_encode bpe.h \
    's/static inline int bpe_heap_less(const BPEHeapEntry \*a, const BPEHeapEntry \*b) {/&\n    if (a->rank == b->rank) { return a->pos > b->pos; }/'
mutant "model loader skipping its CRC check" model gpt2.h \
    's/if (rc == 0 \&\& header\[8\] == CHECKPOINT_CRC_MARK \&\&/if (rc == 0 \&\& 0 \&\&/'
mutant "tokenize --decode without its vocabulary check" decode_ids bpe.h \
    's/if (id >= (uint64_t)t->vocab_size) {/if (id > (uint64_t)t->vocab_size) {/'
