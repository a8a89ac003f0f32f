#!/usr/bin/env bash
# prepare_data's progress on stderr: nothing for a quick run; on a large input, off a terminal,
# whole lines a parser can read (bytes done, total, MB/s, time left, tokens; without the
# total for gzip and stdin) and a last "done" line; on a terminal, one line redrawn with \r;
# the shards the same bytes with and without it. Mutants of the progress must fail.
set -u
cd "$(dirname "$0")/../.."
source scripts/tests/testlib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
VOCAB=data/gpt2
TS=${TINYSHAKESPEARE_TXT:-data/tinyshakespeare/input.txt}
if [ ! -f "$VOCAB/encoder.json" ] || [ ! -f "$TS" ]; then
    fail prepare_data_inputs "$VOCAB/encoder.json or $TS missing (make setup)"; exit 0
fi
for _ in $(seq 8); do cat "$TS"; done > "$tmp/big.txt"  # 8.9 MB
gzip -c "$tmp/big.txt" > "$tmp/big.txt.gz"
# progress lines every 0.01 s from the start (--progress-timing), blocks of 64 KB: many lines
FAST=(--progress-timing 0,0.01 --threads 1 --block-bytes 65536)
KNOWN='^progress: [0-9]+\.[0-9] of [0-9]+\.[0-9] MB \([0-9]+%\), [0-9]+\.[0-9] MB/s, [0-9]+ s left, [0-9]+ tokens$'
UNKNOWN='^progress: [0-9]+\.[0-9] MB, [0-9]+\.[0-9] MB/s, [0-9]+ tokens$'
DONE='^progress: done, [0-9]+\.[0-9] MB in [0-9]+\.[0-9] s, [0-9]+\.[0-9] MB/s, [0-9]+ tokens$'

# check_log NAME BIN LOG TOTAL_RE TOTAL_MB: every stderr line a progress line, at least 3 before
# the done line, which is last; the MB done never decrease and end at the input's size
check_log() {
    local name=$1 log=$2 re=$3 mb=$4 why=""
    if grep -q $'\r' "$log"; then why="carriage returns off a terminal"
    elif grep -vEq "$re|$DONE" "$log"; then why="unparseable line '$(grep -vE "$re|$DONE" "$log" | head -n 1)'"
    elif [ "$(grep -cE "$re" "$log")" -lt 3 ]; then why="$(grep -cE "$re" "$log") progress lines"
    elif ! tail -n 1 "$log" | grep -qE "$DONE" || [ "$(grep -cE "$DONE" "$log")" -ne 1 ]; then why="no single done line at the end"
    elif ! awk '{ v = $2 + 0; if (v < last) exit 1; last = v }' <(grep -E "$re" "$log"); then why="MB done decrease"
    elif ! tail -n 1 "$log" | grep -q "done, $mb MB"; then why="done line '$(tail -n 1 "$log")', expected $mb MB"
    elif [ "$re" = "$KNOWN" ] && ! awk '{ gsub(/[(%),]/, " "); done = $2; total = $4; pct = $6; rate = $7; left = $9
             if (pct < 100 * done / total - 1.5 || pct > 100 * done / total + 1.5) exit 1
             if (rate > 0 && (left < (total - done) / rate - 1.5 || left > (total - done) / rate + 1.5)) exit 1 }' \
             <(grep -E "$re" "$log"); then why="a percentage or time left off from the MB and MB/s shown"
    fi
    if [ -z "$why" ]; then pass "$name ($(grep -cE "$re" "$log") lines)"; else fail "$name" "$why"; fi
}

# run BIN OUT LOG ARGS...: shards in OUT, stderr in LOG (not a terminal)
run() { local bin=$1 out=$2 log=$3; shift 3; "$bin" --vocab "$VOCAB" -o "$out" --name t --val-tokens 1000 "$@" > /dev/null 2> "$log"; }
checks() {  # checks BIN PREFIX: the checks on one build
    local bin=$1 p=$2
    run "$bin" "$tmp/$p-quiet" "$tmp/$p-quiet.log" -i "$TS"
    [ -s "$tmp/$p-quiet.log" ] && fail "${p}quick run prints nothing on stderr" "'$(head -c 200 "$tmp/$p-quiet.log")'" \
        || pass "${p}quick run prints nothing on stderr"
    run "$bin" "$tmp/$p-file" "$tmp/$p-file.log" -i "$tmp/big.txt" "${FAST[@]}"
    check_log "${p}progress lines off a terminal, plain file: done, total, %, MB/s, time left, tokens" \
        "$tmp/$p-file.log" "$KNOWN" 8.9
    run "$bin" "$tmp/$p-gz" "$tmp/$p-gz.log" -i "$tmp/big.txt.gz" "${FAST[@]}"
    check_log "${p}progress lines off a terminal, gzip input: no total, no time left" "$tmp/$p-gz.log" "$UNKNOWN" 8.9
    if command -v script > /dev/null; then
        script -qec "'$bin' --vocab '$VOCAB' -i '$tmp/big.txt' -o '$tmp/$p-tty' --name t --val-tokens 1000 ${FAST[*]}" \
            /dev/null < /dev/null > "$tmp/$p-tty.log" 2>&1
        local redraws lines
        redraws=$(grep -ao $'\rprogress: [0-9.]* of' "$tmp/$p-tty.log" | wc -l)
        lines=$(tr -d '\r' < "$tmp/$p-tty.log" | grep -c 'progress:')
        if [ "$redraws" -ge 3 ] && [ "$lines" -eq 1 ] && grep -aq 'progress: done' "$tmp/$p-tty.log"; then
            pass "${p}on a terminal: one line redrawn in place ($redraws redraws)"
        else
            fail "${p}on a terminal: one line redrawn" "$redraws redraws, $lines lines: $(tr '\r\n' '||' < "$tmp/$p-tty.log" | head -c 200)"
        fi
    fi
}
checks ./prepare_data ""
# the tokens: the same shards with progress every 0.01 s as without it (quiet: the default
# timing on a quick run), from a file, gzip and stdin
./prepare_data --vocab "$VOCAB" -i "$tmp/big.txt" -o "$tmp/plain" --name t --val-tokens 1000 --threads 1 --block-bytes 65536 > /dev/null 2>&1
./prepare_data --vocab "$VOCAB" -i - -o "$tmp/stdin" --name t --val-tokens 1000 "${FAST[@]}" < "$tmp/big.txt" > /dev/null 2> "$tmp/stdin.log"
ok=1
for d in file gz; do for f in t_val_000000.bin t_train_000000.bin gpt2_tokenizer.bin; do
    cmp -s "$tmp/plain/$f" "$tmp/-$d/$f" || ok=0
done; done
for f in t_val_000000.bin t_train_000000.bin; do cmp -s "$tmp/plain/$f" "$tmp/stdin/$f" || ok=0; done
[ $ok = 1 ] && pass "the shards and tokenizer file are the same bytes with progress lines as without" \
    || fail "tokens unchanged by progress" "shards differ"
grep -qE "$UNKNOWN" "$tmp/stdin.log" && ! grep -qE "$KNOWN" "$tmp/stdin.log" \
    && pass "stdin: progress without a total" || fail "stdin progress" "$(head -n 2 "$tmp/stdin.log" | tr '\n' '|')"
expect_error "bad --progress-timing" 1 '^error: --progress-timing: expected DELAY,EVERY' \
    ./prepare_data --vocab "$VOCAB" -i "$TS" -o "$tmp/bad" --name t --progress-timing 1

# --- mutants: sed expression | what
MUTANTS=(
    's/if (p->on_terminal) { fprintf(stderr, "\\r%-79s%s", line, final ? "\\n" : ""); }/if (1) { fprintf(stderr, "\\r%-79s%s", line, final ? "\\n" : ""); }/|carriage returns off a terminal'
    's/elapsed < p->delay/elapsed < 0/|a quick run prints progress'
    's/100.0 \* p->bytes_read \/ p->total_bytes/100.0 * p->bytes_read \/ (p->total_bytes + 1000000)/|the percentage of another total than the one shown'
)
for entry in "${MUTANTS[@]}"; do
    IFS='|' read -r expr what <<< "$entry"
    dir=$tmp/mutant
    rm -rf "$dir" && mkdir -p "$dir" && cp -r Makefile prepare_data.c llmc "$dir/"
    sed -i "$expr" "$dir/prepare_data.c"
    if cmp -s prepare_data.c "$dir/prepare_data.c"; then fail "mutant: $what" "the sed expression no longer matches prepare_data.c"; continue; fi
    if ! make -s -C "$dir" prepare_data > /dev/null 2>&1; then fail "mutant: $what" "does not compile"; continue; fi
    out=$(checks "$dir/prepare_data" "mutant: " | grep '^FAIL' | head -n 1)
    if [ -n "$out" ]; then pass "mutant caught: $what (${out:0:100})"; else fail "mutant caught: $what" "every check passed"; fi
done
