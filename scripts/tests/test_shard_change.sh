# A token shard truncated, rewritten, replaced or deleted while train_gpt2 reads
# it: the run stops at its next batch with a one-line error naming the shard and
# what happened (llmc/dataloader.h), never a crash or other tokens.
set -u
source scripts/tests/testlib.sh
PY=$PWD/.venv/bin/python

model=data/ref/odd/model.bin
if [ ! -f $model ]; then fail "shard change tests" "$model is missing (scripts/tests/test_gpt2.sh writes it)"; exit 0; fi
make -s train_gpt2 || { fail "shard change tests" "make train_gpt2 failed"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$PY scripts/reference/make_synthetic_data.py --out "$tmp/data" --vocab 517 --tokens 20000 > /dev/null

# changed NAME PATTERN CMD: starts a long run on a fresh copy of the shard, waits for
# its 3rd step, runs CMD (on $shard), and expects exit 1 with the one-line error.
changed() {
    local name=$1 pattern=$2 cmd=$3
    rm -rf "$tmp/run"; mkdir -p "$tmp/run"
    shard=$tmp/run/train_000000.bin
    cp "$tmp/data/synth_train_000000.bin" "$shard"
    # empty the output first: the trainer's own redirection happens after the fork, and until
    # then the wait below would read the previous run's "step 3" (a race seen under load)
    : > "$tmp/out"
    ./train_gpt2 -e $model -i "$shard" -b 4 -t 32 -x 1000000 -v 0 -s 0 > "$tmp/out" 2> "$tmp/err" &
    local pid=$! waited=0
    until grep -q "^step *3" "$tmp/out" 2>/dev/null || ! kill -0 $pid 2>/dev/null || [ $waited -ge 600 ]; do sleep 0.1; waited=$((waited + 1)); done
    eval "$cmd"
    waited=0
    while kill -0 $pid 2>/dev/null && [ $waited -lt 600 ]; do sleep 0.1; waited=$((waited + 1)); done
    if kill -0 $pid 2>/dev/null; then kill $pid; wait $pid 2>/dev/null; fail "$name" "still running 60 s after the change"; return; fi
    wait $pid; local rc=$?
    local first; first=$(head -n 1 "$tmp/err")
    if [ $rc -ne 1 ]; then fail "$name" "exit $rc, expected 1; stderr: $(head -n 3 "$tmp/err" | tr '\n' ' ')"
    elif [ "$(grep -c . "$tmp/err")" -ne 1 ]; then fail "$name" "expected one line on stderr, got: $(head -n 4 "$tmp/err" | tr '\n' '|')"
    elif ! printf '%s' "$first" | grep -Eq -- "$pattern"; then fail "$name" "stderr '$first' does not match /$pattern/"
    else pass "$name"; fi
}

changed "shard truncated while read: the run stops" \
    "^error: .*train_000000.bin: token shard truncated while this run reads it$" 'truncate -s 30000 "$shard"'
changed "shard rewritten in place (same size) while read: the run stops" \
    "^error: .*train_000000.bin: token shard rewritten while this run reads it$" \
    'dd if=/dev/zero of="$shard" bs=1 count=64 seek=2048 conv=notrunc status=none'
changed "shard replaced (renamed over) while read: the run stops" \
    "^error: .*train_000000.bin: token shard replaced by another file while this run reads it$" \
    'cp "$shard" "$shard.new" && mv "$shard.new" "$shard"'
changed "shard deleted while read: the run stops" \
    "^error: .*train_000000.bin: token shard deleted while this run reads it$" 'rm "$shard"'
changed "shard grown while read: the run stops" \
    "^error: .*train_000000.bin: token shard grown while this run reads it$" 'printf "\0\0" >> "$shard"'
