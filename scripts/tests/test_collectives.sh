# The collectives of data-parallel training (llmc/collectives.h, test_collectives.c): every
# collective in one process and under mpirun (2 and 3 ranks), with MPI calls limited to 7
# elements (-DZERO_MAX_COUNT=7) so that small arrays take the split path that counts past
# INT_MAX take, and with the real limit; mutants of the splitting must fail.
set -u
source scripts/tests/testlib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
FLAGS=(-O2 -std=gnu11 -Wall -Wextra -Werror -Wno-unused-function -Wno-unused-parameter)

# one process, a build without MPI
if gcc "${FLAGS[@]}" -DZERO_MAX_COUNT=7 test_collectives.c -o "$tmp/plain" -lm 2> "$tmp/cc.err"; then
    expect_ok "collectives in one process without MPI (ZERO_MAX_COUNT=7)" "$tmp/plain"
else
    fail "build test_collectives without MPI" "$(head -n 3 "$tmp/cc.err" | tr '\n' ' ')"
fi

if ! command -v mpicc > /dev/null || ! command -v mpirun > /dev/null; then
    echo "SKIP the MPI half of test_collectives.sh: mpicc or mpirun not found (install openmpi-bin libopenmpi-dev: make setup)"
    exit 0
fi
MPIRUN=(timeout 120 mpirun -q --allow-run-as-root --oversubscribe --mca btl self,tcp
        --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
build() {  # build OUT SOURCE_DIR [-D...]
    local out=$1 dir=$2; shift 2
    (cd "$dir" && mpicc "${FLAGS[@]}" -DUSE_MPI "$@" test_collectives.c -o "$out" -lm) 2> "$tmp/cc.err"
}
if ! build "$tmp/small" . -DZERO_MAX_COUNT=7 || ! build "$tmp/big" .; then
    fail "build test_collectives with MPI" "$(head -n 3 "$tmp/cc.err" | tr '\n' ' ')"
    exit 0
fi
expect_ok "collectives in one process, the MPI build without mpirun (ZERO_MAX_COUNT=7)" "$tmp/small"
for n in 2 3; do
    expect_ok "collectives on $n ranks, every MPI call at most 7 elements (split path)" "${MPIRUN[@]}" -np $n "$tmp/small"
done
expect_ok "collectives on 3 ranks, the real limit (one MPI call each)" "${MPIRUN[@]}" -np 3 "$tmp/big"

# --- mutants: file | sed expression | what
MUTANTS=(
    "llmc/collectives.h|s/return n - done < (size_t)ZERO_MAX_COUNT ? n - done : (size_t)ZERO_MAX_COUNT;/return n - done;/|no splitting: one MPI call per shard or range, its count past the limit (as before the fix)"
    "llmc/collectives.h|s/    if (n <= (size_t)ZERO_MAX_COUNT) {/    if (1) {/|every array in one v-variant call, whatever its extent (as before the fix)"
    "llmc/collectives.h|s/float \*piece = x + off + done;/float *piece = x + off;/|split reduce-scatter: every piece summed onto its shard's start"
    "llmc/collectives.h|s/MPI_Bcast(x + off + done, (int)m/MPI_Bcast(x + off, (int)m/|split all-gather: every piece copied to its shard's start"
    "llmc/collectives.h|s/\*r = (ZeroRange){start\[k\] + done, m,/*r = (ZeroRange){start[k], m,/|a range past the limit split into pieces that all start at its start"
    "llmc/collectives.h|s/const size_t per_call = (size_t)ZERO_MAX_COUNT \/ (size_t)zero.size;/const size_t per_call = (size_t)ZERO_MAX_COUNT;/|all-reduce of doubles gathering ranks x the limit in one call"
)
for entry in "${MUTANTS[@]}"; do
    IFS='|' read -r file expr what <<< "$entry"
    dir=$tmp/mutant
    rm -rf "$dir" && mkdir -p "$dir" && cp -r test_collectives.c llmc "$dir/"
    sed -i "$expr" "$dir/$file"
    if cmp -s "$file" "$dir/$file"; then fail "mutant: $what" "the sed expression no longer matches $file; update the mutant"; continue; fi
    if ! build "$tmp/mutant_bin" "$dir" -DZERO_MAX_COUNT=7; then fail "mutant: $what" "does not compile: $(head -n 2 "$tmp/cc.err" | tr '\n' ' ')"; continue; fi
    out=$("${MPIRUN[@]}" -np 3 "$tmp/mutant_bin" 2>&1); rc=$?
    verdict=$(printf '%s\n' "$out" | grep -E '^FAILED' | head -n 1)
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ -n "$verdict" ]; then pass "mutant caught: $what (${verdict:0:110})"
    else fail "mutant caught: $what" "exit $rc: $(printf '%s' "$out" | tail -n 1)"; fi
done
