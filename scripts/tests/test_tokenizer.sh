#!/usr/bin/env bash
# Tests of the GPT-2 tokenizer (llmc/bpe.h, ./tokenize) and the data tool
# (./prepare_data): exactness against the reference encoder, round trips,
# threads and streaming, llm.c's file formats, and every bad input of issue 3.
#
# Needs: gcc, make, zlib (the build); the project's .venv (make setup) with tiktoken (the
# reference encoder, built from the local vocabulary by scripts/reference/gpt2_tiktoken.py) and regex
# (the second reference, OpenAI's encoder.py, and the check of the character classes);
# Debian's unicode-data (to check llmc/unicode_tables.h against its source). No network.
# Environment: GPT2_VOCAB_DIR (encoder.json + vocab.bpe; default: make setup's data/gpt2,
# its SHA-256 checked there) and TINYSHAKESPEARE_TXT (default: make setup's
# data/tinyshakespeare/input.txt, a copy of the given file or the download). Reference token
# ids are cached in data/ref-cache/ by the input's SHA-256.
set -u
cd "$(dirname "$0")/../.."
source scripts/tests/testlib.sh

# TEST_QUICK=1 (make test): the build, Tiny Shakespeare and the stress text against tiktoken,
# invalid UTF-8, tokenize's errors, prepare_data's outputs and formats, one streaming comparison
# (2 threads, 4 KB blocks), one tiny block size, gzip/stdin and a few bad inputs. It skips the
# Unicode tables, OpenAI's encoder.py, the repeated heap-merge runs, the other streaming runs,
# the multi-shard split, the 100 MB bounded-memory stream, the killed run and the portable build
# (make test-all: everything).
quick=${TEST_QUICK:-0}

tmp=$(mktemp -d)
mounts=()
cleanup() {
    for m in "${mounts[@]+"${mounts[@]}"}"; do umount "$m" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT

# locked CMD...: CPU-heavy work shares the machine's CPU lock (no-op without flock)
locked() { if command -v flock >/dev/null; then flock -s /tmp/cpu.lock "$@"; else "$@"; fi; }

# ---------------------------------------------------------------- build
if make -B -j2 tokenize prepare_data >"$tmp/build.log" 2>&1; then
    if grep -qi 'warning' "$tmp/build.log"; then
        fail build_warning_free "$(grep -i -m 2 warning "$tmp/build.log" | tr '\n' ' ')"
    else
        pass build_warning_free
    fi
else
    fail build_warning_free "make failed: $(tail -n 3 "$tmp/build.log" | tr '\n' ' ')"
    exit 0
fi
gcc -O2 -std=gnu11 -Wall -Wextra -Wno-unused-function -o "$tmp/llmc_data_check" scripts/tests/llmc_data_check.c 2>"$tmp/check_build.log" \
    || fail build_check_tool "$(head -n 3 "$tmp/check_build.log" | tr '\n' ' ')"
CHECK=$tmp/llmc_data_check

# ---------------------------------------------------------------- inputs and the reference
VOCAB=${GPT2_VOCAB_DIR:-data/gpt2}  # make setup's copy (its SHA-256 checked there)
TS=${TINYSHAKESPEARE_TXT:-data/tinyshakespeare/input.txt}
if [ ! -f "$TS" ] || [ ! -f "$VOCAB/encoder.json" ]; then
    bash scripts/setup/setup_data.sh >"$tmp/setup.log" 2>&1 || fail setup_data "$(tail -n 1 "$tmp/setup.log")"
fi
if [ ! -f "$VOCAB/encoder.json" ] || [ ! -f "$VOCAB/vocab.bpe" ] || [ ! -f "$TS" ]; then
    fail inputs "no vocabulary ($VOCAB) or Tiny Shakespeare ($TS): set GPT2_VOCAB_DIR and TINYSHAKESPEARE_TXT"
    exit 0
fi
# the project's Python (make setup: .venv from requirements.txt) runs both references
PY=$PWD/.venv/bin/python
if ! "$PY" -c 'import tiktoken, regex' 2>"$tmp/py.log"; then
    fail reference_python "$PY cannot import tiktoken and regex (run make setup): $(tail -n 1 "$tmp/py.log")"
    exit 0
fi

# py_ref_ids FILE: path of OpenAI's encoder.py ids for FILE (cached)
py_ref_ids() {
    local out
    out=data/ref-cache/$(sha256sum "$1" | cut -c1-32)-encoder-py.ids
    if [ ! -f "$out" ]; then
        mkdir -p data/ref-cache
        locked "$PY" scripts/reference/gpt2_encoder_py.py "$VOCAB" "$1" >"$out.tmp" && mv "$out.tmp" "$out"
    fi
    echo "$out"
}

# ref_ids FILE [--js-space|--llmc-sections]: path of tiktoken's ids for FILE (cached)
ref_ids() {
    local key out
    key=$(sha256sum "$1" | cut -c1-32)
    out=data/ref-cache/$key-tiktoken${2:-}.ids  # ${2:-} is an option of gpt2_tiktoken.py
    if [ ! -f "$out" ]; then
        mkdir -p data/ref-cache
        locked "$PY" scripts/reference/gpt2_tiktoken.py "$VOCAB" ${2:-} "$1" >"$out.tmp" && mv "$out.tmp" "$out"
    fi
    echo "$out"
}

enc() { ./tokenize --vocab "$VOCAB" "$@"; }

# same NAME FILE1 FILE2 [WHY]: the files must be identical
same() {
    if cmp -s "$2" "$3"; then pass "$1"; else fail "$1" "${4:-differ}: $(cmp "$2" "$3" 2>&1 | head -n 1)"; fi
}

# roundtrip NAME FILE [TOKENIZE OPTIONS]: decode(encode(FILE)) == FILE
roundtrip() {
    local name=$1 file=$2; shift 2
    enc "$@" "$file" >"$tmp/rt.ids" && enc --decode "$tmp/rt.ids" >"$tmp/rt.out" && cmp -s "$file" "$tmp/rt.out" \
        && pass "$name" || fail "$name" "decode(encode(x)) != x: $(cmp "$file" "$tmp/rt.out" 2>&1 | head -n 1)"
}

# ---------------------------------------------------------------- Unicode tables
if [ "$quick" = 1 ]; then :
elif [ -f /usr/share/unicode/UnicodeData.txt ] && [ -f /usr/share/unicode/PropList.txt ]; then
    "$PY" scripts/tools/gen_unicode_tables.py /usr/share/unicode >"$tmp/unicode_tables.h" 2>&1
    same unicode_tables_regenerate_identically "$tmp/unicode_tables.h" llmc/unicode_tables.h \
        "llmc/unicode_tables.h is not what scripts/tools/gen_unicode_tables.py makes from /usr/share/unicode"
    ./tokenize --char-classes >"$tmp/classes.txt"
    # the classes against another implementation of Unicode's properties: the regex module's
    if "$PY" scripts/reference/tokenizer_test_data.py compare-classes /usr/share/unicode/UnicodeData.txt "$tmp/classes.txt" >"$tmp/classes.log" 2>&1; then
        pass unicode_classes_match_python_regex
    else
        fail unicode_classes_match_python_regex "$(head -n 3 "$tmp/classes.log" | tr '\n' ' ')"
    fi
else
    fail unicode_tables_regenerate_identically "needs Debian's unicode-data (/usr/share/unicode)"
fi

# JavaScript's \s (the class of gpt2_tiktoken.py --js-space) versus Unicode's White_Space:
# exactly the two documented code points.
"$PY" scripts/reference/gpt2_tiktoken.py --space-deviations >"$tmp/dev.txt"
printf 'U+0085 unicode-only\nU+FEFF js-only\n' >"$tmp/dev_expected.txt"
same js_space_deviations_are_U+0085_and_U+FEFF "$tmp/dev.txt" "$tmp/dev_expected.txt"

# ---------------------------------------------------------------- exactness
enc "$TS" >"$tmp/ts.ids"
ts_ref=$(ref_ids "$TS")
same tinyshakespeare_token_for_token "$tmp/ts.ids" "$ts_ref"
n=$(wc -l <"$tmp/ts.ids")
[ "$n" -eq 338025 ] && pass tinyshakespeare_338025_tokens || fail tinyshakespeare_338025_tokens "got $n"
enc --threads 2 "$TS" >"$tmp/ts2.ids"
same tinyshakespeare_two_threads_identical "$tmp/ts2.ids" "$tmp/ts.ids"
if [ "$quick" != 1 ]; then
enc --heap-min 2 "$TS" >"$tmp/tsheap.ids"
same tinyshakespeare_heap_merge_identical "$tmp/tsheap.ids" "$tmp/ts.ids"
fi

"$PY" scripts/reference/tokenizer_test_data.py stress "$tmp/stress.txt"
"$PY" scripts/reference/tokenizer_test_data.py stress "$tmp/stress_nodev.txt" --no-js-deviations
enc "$tmp/stress.txt" >"$tmp/stress.ids"
enc "$tmp/stress_nodev.txt" >"$tmp/stress_nodev.ids"
# 1. tiktoken (\s is Unicode's White_Space, as ours): identical
same stress_text_exact_vs_tiktoken "$tmp/stress.ids" "$(ref_ids "$tmp/stress.txt")"
same stress_text_without_deviating_chars_exact_vs_tiktoken "$tmp/stress_nodev.ids" "$(ref_ids "$tmp/stress_nodev.txt")"
# 2. the text tells the whitespace classes apart: with JavaScript's \s the encoder differs ...
if cmp -s "$tmp/stress.ids" "$(ref_ids "$tmp/stress.txt" --js-space)"; then
    fail stress_text_differs_from_js_where_documented "identical to JavaScript's \\s: U+0085/U+FEFF not handled as White_Space"
else
    pass stress_text_differs_from_js_where_documented
fi
# 3. ... and only there: without U+0085 and U+FEFF it is identical
same stress_text_exact_vs_js_space_without_deviating_chars "$tmp/stress_nodev.ids" "$(ref_ids "$tmp/stress_nodev.txt" --js-space)"
if [ "$quick" != 1 ]; then
enc --heap-min 2 "$tmp/stress.txt" >"$tmp/stress_heap.ids"
same stress_text_heap_merge_identical "$tmp/stress_heap.ids" "$tmp/stress.ids"

# OpenAI's original encoder.py (Python regex: \s is White_Space): identical everywhere,
# U+0085 and U+FEFF included.
same tinyshakespeare_exact_vs_openai_encoder_py "$tmp/ts.ids" "$(py_ref_ids "$TS")"
same stress_text_exact_vs_openai_encoder_py "$tmp/stress.ids" "$(py_ref_ids "$tmp/stress.txt")"
fi

# The deviations in small contexts. Mostly U+0085 and U+FEFF give the same tokens
# either way (a lone space character and a lone symbol form the same pieces); these
# are contexts where they do not, with the ids each semantics gives. Ours, tiktoken's and
# encoder.py's must be the White_Space ones, and tiktoken with --js-space the JavaScript ones.
i=0
while IFS='|' read -r -u 4 s want_unicode want_js; do
    i=$((i + 1))
    printf "$s" >"$tmp/dev$i.txt"
    got=$(enc "$tmp/dev$i.txt" | tr '\n' ' ')
    uni=$(tr '\n' ' ' <"$(ref_ids "$tmp/dev$i.txt")")
    js=$(tr '\n' ' ' <"$(ref_ids "$tmp/dev$i.txt" --js-space)")
    if [ "$got" != "$want_unicode " ]; then fail "js_deviation_case_$i" "'$s': got $got, expected $want_unicode"
    elif [ "$uni" != "$want_unicode " ]; then fail "js_deviation_case_$i" "'$s': tiktoken gives $uni"
    elif [ "$js" != "$want_js " ]; then fail "js_deviation_case_$i" "'$s': JavaScript's \\s gives $js, expected $want_js"
    elif [ "$quick" != 1 ] && [ "$(tr '\n' ' ' <"$(py_ref_ids "$tmp/dev$i.txt")")" != "$want_unicode " ]; then
        fail "js_deviation_case_$i" "'$s': OpenAI's encoder.py gives $(tr '\n' ' ' <"$(py_ref_ids "$tmp/dev$i.txt")")"
    else pass "js_deviation_case_$i"; fi
done 4<<'CASES'
a  \xc2\x85b|64 220 220 126 227 65|64 220 1587 227 65
end.\n\n\xc2\x85\xc2\x85|437 13 628 126 227 126 227|437 13 198 198 126 227 126 227
word  \xef\xbb\xbfx|4775 220 27332 119 123 87|4775 220 220 171 119 123 87
1 \xef\xbb\xbf2|16 27332 119 123 17|16 220 171 119 123 17
\xef\xbb\xbf\xef\xbb\xbfBOM|171 119 123 171 119 123 33 2662|171 119 123 171 119 123 33 2662
CASES

# A few ids pinned by hand, so that the reference and we cannot be wrong together.
printf 'Hello world' >"$tmp/hello.txt"
[ "$(enc "$tmp/hello.txt" | tr '\n' ' ')" = "15496 995 " ] && pass pinned_hello_world || fail pinned_hello_world "$(enc "$tmp/hello.txt" | tr '\n' ' ')"
printf '<|endoftext|>' >"$tmp/eot.txt"
got=$(enc "$tmp/eot.txt" | tr '\n' ' ')
[ "$got" = "27 91 437 1659 5239 91 29 " ] && pass endoftext_text_is_not_special || fail endoftext_text_is_not_special "got $got"

# ---------------------------------------------------------------- bytes, invalid UTF-8
roundtrip roundtrip_tinyshakespeare "$TS"
roundtrip roundtrip_stress_text "$tmp/stress.txt"
"$PY" scripts/reference/tokenizer_test_data.py bytes "$tmp/random.bin" 1000000 7
roundtrip roundtrip_1MB_random_bytes "$tmp/random.bin"
if [ "$quick" != 1 ]; then
roundtrip roundtrip_1MB_random_bytes_two_threads "$tmp/random.bin" --threads 2
enc "$tmp/random.bin" >"$tmp/random.ids"
enc --heap-min 2 "$tmp/random.bin" >"$tmp/random_heap.ids"
same random_bytes_heap_merge_identical "$tmp/random_heap.ids" "$tmp/random.ids"
fi
# every kind of malformed UTF-8: stray continuation, overlong, surrogate, > U+10FFFF,
# bytes never used, truncated sequences (also at the end), all 256 bytes
printf 'a\x80b \xbf\xbf c\xc0\x80 \xc1\xbf \xe0\x80\x80 \xed\xa0\x80\xed\xbf\xbf \xf4\x90\x80\x80 \xf5\xff\xfe \xe2\x82 x\xf0\x9f\x98 \xc3' >"$tmp/bad_utf8.txt"
for b in $(seq 0 255); do printf "\\x$(printf %02x "$b")"; done >>"$tmp/bad_utf8.txt"
roundtrip roundtrip_invalid_utf8_cases "$tmp/bad_utf8.txt"
# an invalid byte is a character of its own of the class "other": it splits letters
printf 'abc\x80def' >"$tmp/inv1.txt"; printf 'abc' >"$tmp/inv_a.txt"; printf '\x80' >"$tmp/inv_b.txt"; printf 'def' >"$tmp/inv_c.txt"
enc "$tmp/inv1.txt" >"$tmp/inv1.ids"; cat "$tmp"/inv_{a,b,c}.txt >/dev/null
enc "$tmp/inv_a.txt" "$tmp/inv_b.txt" "$tmp/inv_c.txt" >"$tmp/inv_parts.ids"
same invalid_byte_is_its_own_piece "$tmp/inv1.ids" "$tmp/inv_parts.ids"
# ... and joins a run of other symbols, with the leading space, like U+FFFD would
printf 'x \xff\xfe!?' >"$tmp/inv2.txt"; printf 'x' >"$tmp/inv2a.txt"; printf ' \xff\xfe!?' >"$tmp/inv2b.txt"
enc "$tmp/inv2.txt" >"$tmp/inv2.ids"; enc "$tmp/inv2a.txt" "$tmp/inv2b.txt" >"$tmp/inv2_parts.ids"
same invalid_bytes_join_symbol_run "$tmp/inv2.ids" "$tmp/inv2_parts.ids"

# Long pieces: the heap merge against GPT-2's quadratic loop, on an 8 KB word.
"$PY" scripts/reference/tokenizer_test_data.py word "$tmp/longword.txt" 8000
enc --heap-min 2 "$tmp/longword.txt" >"$tmp/long_heap.ids"
enc --heap-min 1000000 "$tmp/longword.txt" >"$tmp/long_simple.ids"
same long_piece_heap_equals_gpt2_loop "$tmp/long_heap.ids" "$tmp/long_simple.ids"

# ---------------------------------------------------------------- tokenize's errors
printf '15496\n995\n50257\n' >"$tmp/bad_id.ids"
expect_error decode_id_outside_vocabulary 1 'bad_id.ids: line 3: token id 50257 is outside the vocabulary' ./tokenize --vocab "$VOCAB" --decode "$tmp/bad_id.ids"
printf '15496\nhello\n' >"$tmp/bad_word.ids"
expect_error decode_not_a_number 1 'bad_word.ids: line 2: expected a token id' ./tokenize --vocab "$VOCAB" --decode "$tmp/bad_word.ids"
expect_error tokenize_missing_input 1 'nope.txt: cannot open for reading' ./tokenize --vocab "$VOCAB" "$tmp/nope.txt"
expect_error tokenize_unknown_option 1 '^error: --frobnicate: unknown option' ./tokenize --vocab "$VOCAB" --frobnicate "$TS"
if [ -w /dev/full ]; then
    expect_error tokenize_stdout_full 1 'stdout: write failed' sh -c './tokenize --vocab "$1" "$2" >/dev/full' sh "$VOCAB" "$TS"
fi

# ---------------------------------------------------------------- prepare_data
prep() { ./prepare_data --vocab "$VOCAB" "$@"; }
# tokens_of SHARD: the shard's tokens, one per line
tokens_of() { od -An -v -t u2 -j 1024 -w2 "$1" | tr -d ' '; }
# header SHARD I: int32 number I of the header
header() { od -An -t d4 -j $(( $2 * 4 )) -N 4 "$1" | tr -d ' '; }

out=$tmp/ts_out
if prep -i "$TS" -o "$out" --name tiny_shakespeare --val-tokens 32768 >"$tmp/prep.log" 2>&1; then
    pass prepare_tinyshakespeare_runs
else
    fail prepare_tinyshakespeare_runs "$(tail -n 2 "$tmp/prep.log" | tr '\n' ' ')"
fi
val=$out/tiny_shakespeare_val_000000.bin train=$out/tiny_shakespeare_train_000000.bin tokfile=$out/gpt2_tokenizer.bin
if [ -f "$val" ] && [ -f "$train" ] && [ -f "$tokfile" ]; then
    h="$(header "$val" 0) $(header "$val" 1) $(header "$val" 2) / $(header "$train" 0) $(header "$train" 1) $(header "$train" 2)"
    [ "$h" = "20240520 1 32768 / 20240520 1 305258" ] && pass shard_headers || fail shard_headers "got $h"
    [ "$(stat -c %s "$val") $(stat -c %s "$train")" = "$((1024 + 2 * 32768)) $((1024 + 2 * 305258))" ] \
        && pass shard_sizes || fail shard_sizes "$(stat -c %s "$val") $(stat -c %s "$train")"
    { echo 50256; cat "$ts_ref"; } >"$tmp/expected_stream.ids"
    { tokens_of "$val"; tokens_of "$train"; } >"$tmp/stream.ids"
    same shards_are_eot_then_reference_tokens "$tmp/stream.ids" "$tmp/expected_stream.ids"
    h="$(header "$tokfile" 0) $(header "$tokfile" 1) $(header "$tokfile" 2) $(header "$tokfile" 3)"
    [ "$h" = "20240328 2 50257 50256" ] && pass tokenizer_file_header || fail tokenizer_file_header "got $h"
    # the trainer's decoder (llmc/tokenizer.h) reads it all back: EOT + the input text
    if "$CHECK" "$tokfile" "$val" "$train" >"$tmp/decoded.txt" 2>"$tmp/check.log"; then
        { printf '<|endoftext|>'; cat "$TS"; } >"$tmp/expected_decoded.txt"
        same shards_decode_to_input_with_llmc_tokenizer "$tmp/decoded.txt" "$tmp/expected_decoded.txt"
    else
        fail shards_decode_to_input_with_llmc_tokenizer "$(tail -n 1 "$tmp/check.log")"
    fi
    # every token's bytes in the tokenizer file equal ./tokenize --decode of that id
    seq 0 50256 >"$tmp/all.ids"
    ./tokenize --vocab "$VOCAB" --decode "$tmp/all.ids" >"$tmp/all_tokens.bin"
    "$PY" scripts/reference/tokenizer_test_data.py token-bytes "$tokfile" "$tmp/tok_bytes.bin"
    same tokenizer_file_token_bytes "$tmp/tok_bytes.bin" "$tmp/all_tokens.bin"
    [ -z "$(ls "$out" | grep -v -E '^(gpt2_tokenizer|tiny_shakespeare_(val|train)_000000)\.bin$')" ] \
        && pass no_temporary_files_left || fail no_temporary_files_left "$(ls "$out" | tr '\n' ' ')"
else
    fail prepare_tinyshakespeare_outputs "missing output files: $(ls "$out" 2>&1 | tr '\n' ' ')"
fi

# streaming in 4 KB blocks on 2 threads == one block on 1 thread, byte for byte
prep -i "$TS" -o "$tmp/one" --name ts --val-tokens 32768 --threads 1 --block-bytes 1073741824 >/dev/null 2>&1
prep -i "$TS" -o "$tmp/many" --name ts --val-tokens 32768 --threads 2 --block-bytes 4096 >/dev/null 2>&1
if cmp -s "$tmp/one/ts_train_000000.bin" "$tmp/many/ts_train_000000.bin" && cmp -s "$tmp/one/ts_val_000000.bin" "$tmp/many/ts_val_000000.bin" \
    && cmp -s "$tmp/one/ts_val_000000.bin" "$val"; then
    pass prepare_streaming_and_threads_identical
else
    fail prepare_streaming_and_threads_identical "shards differ between --threads 1 (one block) and --threads 2 --block-bytes 4096"
fi
# tiny blocks put a cut at nearly every split point: a wrong split point rule (say, between
# an apostrophe and a letter) changes the tokens
# (one thread: a parallel region per few bytes would only measure OpenMP's overhead)
tiny_sizes="5 7 13"; [ "$quick" = 1 ] && tiny_sizes=7
for b in $tiny_sizes; do
    prep -i "$tmp/stress.txt" -i "$TS" -o "$tmp/tiny$b" --name t --threads 1 --block-bytes $b >/dev/null 2>&1
done
prep -i "$tmp/stress.txt" -i "$TS" -o "$tmp/tiny_whole" --name t --threads 1 --block-bytes 1073741824 >/dev/null 2>&1
tiny_same=1
for b in $tiny_sizes; do cmp -s "$tmp/tiny$b/t_train_000000.bin" "$tmp/tiny_whole/t_train_000000.bin" || tiny_same=0; done
if [ $tiny_same = 1 ]; then
    pass prepare_tiny_blocks_identical
else
    fail prepare_tiny_blocks_identical "shards with --block-bytes ${tiny_sizes// //} differ from one block"
fi
if [ "$quick" != 1 ]; then
# the same on text that is mostly invalid UTF-8 and on the stress text (with 2 documents)
prep -i "$tmp/random.bin" -i "$tmp/stress.txt" -o "$tmp/r1" --name r --threads 1 --block-bytes 1073741824 >/dev/null 2>&1
prep -i "$tmp/random.bin" -i "$tmp/stress.txt" -o "$tmp/r2" --name r --threads 2 --block-bytes 1000 >/dev/null 2>&1
same prepare_streaming_identical_on_random_bytes "$tmp/r2/r_train_000000.bin" "$tmp/r1/r_train_000000.bin"
if "$CHECK" "$tmp/r2/gpt2_tokenizer.bin" "$tmp/r2/r_train_000000.bin" >"$tmp/r_decoded.bin" 2>/dev/null; then
    { printf '<|endoftext|>'; cat "$tmp/random.bin"; printf '<|endoftext|>'; cat "$tmp/stress.txt"; } >"$tmp/r_expected.bin"
    same prepare_two_documents_invalid_utf8_roundtrip "$tmp/r_decoded.bin" "$tmp/r_expected.bin"
else
    fail prepare_two_documents_invalid_utf8_roundtrip "llmc_data_check failed"
fi
[ ! -e "$tmp/r1/r_val_000000.bin" ] && pass no_val_shard_without_val_tokens || fail no_val_shard_without_val_tokens "r_val_000000.bin written"

# several train shards: 100000 tokens each, together the single shard's tokens
prep -i "$TS" -o "$tmp/sh" --name ts --val-tokens 32768 --shard-tokens 100000 >/dev/null 2>&1
counts=$(for f in "$tmp"/sh/ts_train_*.bin; do header "$f" 2; done | tr '\n' ' ')
[ "$counts" = "100000 100000 100000 5258 " ] && pass prepare_shard_tokens || fail prepare_shard_tokens "shard counts: $counts"
for f in "$tmp"/sh/ts_train_*.bin; do tokens_of "$f"; done >"$tmp/sh.ids"
tokens_of "$tmp/one/ts_train_000000.bin" >"$tmp/one.ids"
same prepare_shards_concatenate_to_stream "$tmp/sh.ids" "$tmp/one.ids"
# a later run with fewer shards removes the stale ones
prep -i "$TS" -o "$tmp/sh" --name ts --val-tokens 32768 --shard-tokens 200000 >/dev/null 2>&1
[ "$(ls "$tmp"/sh/ts_train_*.bin | wc -l)" -eq 2 ] && pass prepare_removes_stale_shards || fail prepare_removes_stale_shards "$(ls "$tmp/sh" | tr '\n' ' ')"
fi

# --split-blank-lines: llm.c's tinyshakespeare.py token stream (EOT before each
# "\n\n"-separated section), also when the blocks cut through every "\n\n"
prep -i "$TS" -o "$tmp/sec" --name ts --val-tokens 32768 --split-blank-lines >/dev/null 2>&1
{ tokens_of "$tmp/sec/ts_val_000000.bin"; tokens_of "$tmp/sec/ts_train_000000.bin"; } >"$tmp/sec.ids"
same split_blank_lines_matches_llmc_tinyshakespeare_py "$tmp/sec.ids" "$(ref_ids "$TS" --llmc-sections)"
[ "$(header "$tmp/sec/ts_train_000000.bin" 2)" = 305260 ] && pass split_blank_lines_305260_train_tokens \
    || fail split_blank_lines_305260_train_tokens "got $(header "$tmp/sec/ts_train_000000.bin" 2)"
if [ "$quick" != 1 ]; then
prep -i "$TS" -o "$tmp/sec2" --name ts --val-tokens 32768 --split-blank-lines --threads 2 --block-bytes 333 >/dev/null 2>&1
same split_blank_lines_streaming_identical "$tmp/sec2/ts_train_000000.bin" "$tmp/sec/ts_train_000000.bin"
fi
printf '\n\nA\n\n\nB \n\n\n\nC\n\n' >"$tmp/blank.txt"
prep -i "$tmp/blank.txt" -o "$tmp/blank" --name b --split-blank-lines --block-bytes 3 >/dev/null 2>&1
tokens_of "$tmp/blank/b_train_000000.bin" >"$tmp/blank.ids"
same split_blank_lines_edge_cases "$tmp/blank.ids" "$(ref_ids "$tmp/blank.txt" --llmc-sections)"

# (prepare_data's progress lines: scripts/tests/test_prepare_data.sh)

# gzip input, read transparently, and stdin
gzip -c "$TS" >"$tmp/ts.txt.gz"
prep -i "$tmp/ts.txt.gz" -o "$tmp/gz" --name ts --val-tokens 32768 >/dev/null 2>&1
same prepare_gzip_input "$tmp/gz/ts_train_000000.bin" "$tmp/one/ts_train_000000.bin"
prep -i - -o "$tmp/stdin" --name ts --val-tokens 32768 <"$TS" >/dev/null 2>&1
same prepare_stdin_input "$tmp/stdin/ts_train_000000.bin" "$tmp/one/ts_train_000000.bin"

if [ "$quick" != 1 ]; then
# memory stays bounded: 100 MB streamed through a 300 MB address-space limit (the
# same limit stops ./tokenize, which holds a whole file and its tokens in memory)
for _ in $(seq 90); do cat "$TS"; done >"$tmp/ts90.txt"
if bash -c 'ulimit -v 300000; exec "$@"' sh ./prepare_data --vocab "$VOCAB" -i - -o "$tmp/bounded" --name b --threads 2 \
        <"$tmp/ts90.txt" >"$tmp/bounded.log" 2>&1 \
    && [ "$(header "$tmp/bounded/b_train_000000.bin" 2)" = $((90 * 338025 + 1)) ]; then
    pass prepare_streams_100MB_in_300MB_address_space
else
    fail prepare_streams_100MB_in_300MB_address_space "$(tail -n 1 "$tmp/bounded.log")"
fi
expect_error tokenize_whole_file_hits_that_limit 1 'out of memory' bash -c 'ulimit -v 300000; exec "$@"' sh ./tokenize --vocab "$VOCAB" "$tmp/ts90.txt"
rm -rf "$tmp/ts90.txt" "$tmp/bounded"
fi

# ---------------------------------------------------------------- bad input
# no_shards NAME DIR: after a failure, no shard and no temporary file is left in DIR
no_shards() {
    local left
    left=$(ls "$2" 2>/dev/null | grep -E '_(val|train)_[0-9]+\.bin|\.tmp$' | tr '\n' ' ')
    [ -z "$left" ] && pass "$1" || fail "$1" "left behind: $left"
}
bad=$tmp/vocab_bad
mkdir -p "$bad"
# bad_vocab NAME PATTERN: prepare_data with $bad as the vocabulary must fail with PATTERN
bad_vocab() {
    expect_error "$1" 1 "$2" ./prepare_data --vocab "$bad" -i "$TS" -o "$tmp/bad_out" --name x
    no_shards "$1_leaves_nothing" "$tmp/bad_out"
}
cp "$VOCAB/vocab.bpe" "$bad/vocab.bpe"
bad_vocab missing_encoder_json 'encoder.json: cannot open for reading: No such file'
head -c 500000 "$VOCAB/encoder.json" >"$bad/encoder.json"
bad_vocab truncated_encoder_json 'encoder.json: malformed JSON'
printf '{"a": 0, "b": }' >"$bad/encoder.json"
bad_vocab encoder_json_missing_id 'encoder.json: malformed JSON: expected a token id'
printf '[1, 2, 3]' >"$bad/encoder.json"
bad_vocab encoder_json_not_an_object "encoder.json: malformed JSON: expected '\\{'"
sed 's/"!": 0/"!": 1/' "$VOCAB/encoder.json" >"$bad/encoder.json"
bad_vocab encoder_json_duplicate_id 'encoder.json: token id 1 is used twice'
sed 's/"!": 0/"\\u4e00": 0/' "$VOCAB/encoder.json" >"$bad/encoder.json"
bad_vocab encoder_json_outside_byte_alphabet 'encoder.json: .*U\+4E00, which is not in GPT-2.s byte alphabet'
sed 's/"!": 0/"!": 1.5/' "$VOCAB/encoder.json" >"$bad/encoder.json"
bad_vocab encoder_json_non_integer_id 'encoder.json: token id at byte [0-9]+ is not a small integer'
cp "$VOCAB/encoder.json" "$bad/encoder.json"
rm "$bad/vocab.bpe"
bad_vocab missing_vocab_bpe 'vocab.bpe: cannot open for reading: No such file'
{ head -n 100 "$VOCAB/vocab.bpe"; echo 'Ġ t h'; } >"$bad/vocab.bpe"
bad_vocab vocab_bpe_three_fields 'vocab.bpe: line 101: expected a merge of two tokens "A B", found 3 fields'
{ head -n 100 "$VOCAB/vocab.bpe"; echo 'qqqqqqqqqq zzzz'; } >"$bad/vocab.bpe"
bad_vocab vocab_bpe_unknown_token 'vocab.bpe: line 101: token "qqqqqqqqqq" is not in encoder.json'
{ head -n 100 "$VOCAB/vocab.bpe"; sed -n 2p "$VOCAB/vocab.bpe"; } >"$bad/vocab.bpe"
bad_vocab vocab_bpe_duplicate_merge 'vocab.bpe: line 101: duplicate merge'
head -n 40000 "$VOCAB/vocab.bpe" >"$bad/vocab.bpe"
bad_vocab vocab_bpe_cut_off_at_a_line 'vocab.bpe: 10001 tokens of encoder.json \(e.g. id 40255\) are made by no merge: is vocab.bpe cut off\? \(39999 merges read\)'
printf '#version: 0.2\n' >"$bad/vocab.bpe"
bad_vocab vocab_bpe_no_merges 'vocab.bpe: no merges found'
expect_error tokenize_bad_vocab_too 1 'vocab.bpe: no merges found' ./tokenize --vocab "$bad" "$TS"

: >"$tmp/empty.txt"
expect_error empty_input 1 'empty.txt: empty input' prep -i "$tmp/empty.txt" -o "$tmp/e_out" --name x
no_shards empty_input_leaves_nothing "$tmp/e_out"
gzip -c "$tmp/empty.txt" >"$tmp/empty.txt.gz"
expect_error empty_gzip_input 1 'empty.txt.gz: empty input' prep -i "$tmp/empty.txt.gz" -o "$tmp/e_out" --name x
no_shards empty_gzip_input_leaves_nothing "$tmp/e_out"
head -c 100000 "$tmp/ts.txt.gz" >"$tmp/cut.txt.gz"
expect_error truncated_gzip_input 1 'cut.txt.gz: truncated gzip stream' prep -i "$tmp/cut.txt.gz" -o "$tmp/cut_out" --name x
no_shards truncated_gzip_leaves_nothing "$tmp/cut_out"
expect_error missing_input 1 'nope.txt: cannot open for reading: No such file' prep -i "$tmp/nope.txt" -o "$tmp/m_out" --name x
expect_error too_few_tokens_for_val 1 'only 338026 tokens in the input: --val-tokens 400000 leaves none for training' \
    prep -i "$TS" -o "$tmp/few" --name x --val-tokens 400000
no_shards too_few_tokens_leaves_nothing "$tmp/few"
expect_error missing_name 1 '^error: --name NAME is required' prep -i "$TS" -o "$tmp/x"
expect_error bad_val_tokens 1 '^error: --val-tokens: expected an integer' prep -i "$TS" -o "$tmp/x" --name x --val-tokens lots

# output directory that cannot be written: a read-only file system if we may mount
# one, else a directory without write permission (only binding for non-root), else /sys
touch "$tmp/a_file"
expect_error output_dir_under_a_file 1 'a_file/out: cannot create directory: Not a directory' prep -i "$TS" -o "$tmp/a_file/out" --name x
mkdir -p "$tmp/ro"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o ro,size=1m tmpfs "$tmp/ro" 2>/dev/null; then
    mounts+=("$tmp/ro")
    expect_error unwritable_output_dir_readonly_fs 1 'ro/.*: Read-only file system' prep -i "$TS" -o "$tmp/ro" --name x
    no_shards unwritable_output_dir_leaves_nothing "$tmp/ro"
elif [ "$(id -u)" != 0 ]; then
    chmod 555 "$tmp/ro"
    expect_error unwritable_output_dir_no_permission 1 'ro/.*: Permission denied' prep -i "$TS" -o "$tmp/ro" --name x
    no_shards unwritable_output_dir_leaves_nothing "$tmp/ro"
else
    # root without mount rights: sysfs is a directory nobody may create files in
    expect_error unwritable_output_dir_sysfs 1 '^error: /sys/gpt2_tokenizer.bin.tmp: cannot create: Permission denied' prep -i "$TS" -o /sys --name x
fi

# full disk: a 600 KB tmpfs holds the tokenizer file (372 KB) and the val shard (66 KB)
# but not the 611 KB train shard. Without mount rights, a file size limit
# (ulimit -f, write fails with EFBIG) stands in for it.
mkdir -p "$tmp/full"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=600k tmpfs "$tmp/full" 2>/dev/null; then
    mounts+=("$tmp/full")
    expect_error full_disk_tmpfs 1 'tiny_shakespeare_train_000000.bin: (write|fsync|close) failed: No space left on device' \
        prep -i "$TS" -o "$tmp/full" --name tiny_shakespeare --val-tokens 32768
else
    expect_error full_disk_file_size_limit 1 'tiny_shakespeare_train_000000.bin: (write|fsync|close) failed: File too large' \
        bash -c 'trap "" XFSZ; ulimit -f 500; exec "$@"' sh ./prepare_data --vocab "$VOCAB" -i "$TS" -o "$tmp/full" --name tiny_shakespeare --val-tokens 32768
fi
no_shards full_disk_leaves_no_shard "$tmp/full"

[ "$quick" = 1 ] && exit 0  # (the killed run and the portable build: make test-all)

# killed mid-run (SIGTERM) while waiting for input: the open shard's temporary file goes too
mkfifo "$tmp/fifo"
./prepare_data --vocab "$VOCAB" -i "$tmp/fifo" -o "$tmp/killed" --name x >/dev/null 2>&1 &
pid=$!
exec 3>"$tmp/fifo"
(trap '' PIPE; printf 'The quick brown fox ' >&3) 2>/dev/null
for _ in $(seq 50); do [ -e "$tmp/killed/x_train_000000.bin.tmp" ] && break; sleep 0.1; done
if [ -e "$tmp/killed/x_train_000000.bin.tmp" ]; then
    kill -TERM "$pid"; wait "$pid" 2>/dev/null; rc=$?
    exec 3>&-
    if [ "$rc" -ne 143 ]; then fail killed_run_leaves_nothing "exit status $rc, expected 143 (SIGTERM)"
    else no_shards killed_run_leaves_nothing "$tmp/killed"; fi
else
    kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; exec 3>&-
    fail killed_run_leaves_nothing "the shard's temporary file never appeared"
fi

# ---------------------------------------------------------------- other builds
# PORTABLE=1 flags (-march=x86-64) and no OpenMP: the same tokens
gcc -O3 -std=gnu11 -march=x86-64 -mtune=generic -Wall -Wextra -Wno-unused-function -Wno-unused-parameter \
    tokenize.c -o "$tmp/tokenize_portable" -lm -lz 2>"$tmp/portable.log"
if [ -x "$tmp/tokenize_portable" ] && ! grep -qi warning "$tmp/portable.log"; then
    "$tmp/tokenize_portable" --vocab "$VOCAB" "$TS" >"$tmp/ts_portable.ids"
    same portable_no_openmp_build_identical "$tmp/ts_portable.ids" "$tmp/ts.ids"
else
    fail portable_no_openmp_build_identical "build failed or warned: $(head -n 2 "$tmp/portable.log" | tr '\n' ' ')"
fi
