# Sourced by scripts/tests/test_*.sh. Each check prints one line, "PASS name" or
# "FAIL name: why"; run_tests.sh counts them.

pass() { printf 'PASS %s\n' "$1"; }
fail() { printf 'FAIL %s: %s\n' "$1" "$2"; }

# expect_ok NAME CMD...: the command must exit 0.
expect_ok() {
    local name=$1; shift
    local out
    if out=$("$@" 2>&1); then pass "$name"; else fail "$name" "exit $?: $(printf '%s' "$out" | tail -n 3 | tr '\n' ' ')"; fi
}

# expect_error NAME CODE PATTERN CMD...: the command must exit with CODE, and
# the first line on stderr must match the extended regex PATTERN. Exit code 1
# (bad input) allows exactly one line; exit code 2 (bad usage) must be
# followed by the usage text.
expect_error() {
    local name=$1 code=$2 pattern=$3; shift 3
    local err rc first
    err=$("$@" 2>&1 >/dev/null); rc=$?
    first=$(printf '%s\n' "$err" | head -n 1)
    if [ "$rc" -ne "$code" ]; then fail "$name" "exit $rc, expected $code; stderr: $(printf '%s' "$err" | head -n 3 | tr '\n' ' ')"; return; fi
    if [ "$code" -eq 2 ]; then
        if ! printf '%s\n' "$err" | grep -q '^usage:'; then fail "$name" "no usage text after the error"; return; fi
    elif [ "$(printf '%s\n' "$err" | grep -c .)" -ne 1 ]; then
        fail "$name" "expected one line on stderr, got: $(printf '%s' "$err" | head -n 5 | tr '\n' '|')"; return
    fi
    if ! printf '%s' "$first" | grep -Eq -- "$pattern"; then fail "$name" "stderr '$first' does not match /$pattern/"; return; fi
    pass "$name"
}

# Builds two at a time (mutants, variants: each one compiler process, and the machines have two
# cores or more). build_start DIR CMD... starts CMD in the background once fewer than
# TEST_BUILD_JOBS (default 2) of these run, its output in DIR/build.log; build_wait DIR waits for
# it and returns its exit status.
declare -A build_pids=()
build_start() {
    local dir=$1; shift
    while [ "$(jobs -rp | wc -l)" -ge "${TEST_BUILD_JOBS:-2}" ]; do wait -n 2>/dev/null || true; done
    ( "$@" > "$dir/build.log" 2>&1; echo $? > "$dir/build.rc" ) &
    build_pids[$dir]=$!
}
build_wait() {
    wait "${build_pids[$1]}" 2>/dev/null
    [ "$(cat "$1/build.rc" 2>/dev/null)" = 0 ]
}

# native_vec_width [MARCH]: the vector width llmc/vecmath.h picks (VEC_WIDTH) for -march=MARCH,
# native unless given: 16 where the compiler defines __AVX512F__, 8 where __AVX__, else 4. It asks
# gcc, the compiler of the builds, for its macros rather than reading /proc/cpuinfo, so it cannot
# disagree with a -march=native build. A forced width (-DVEC_WIDTH=N) equal to it builds the
# native build again.
native_vec_width() {
    local macros
    macros=$(gcc -march="${1:-native}" -dM -E - </dev/null 2>/dev/null) || return 1
    if grep -q '^#define __AVX512F__ ' <<< "$macros"; then echo 16
    elif grep -q '^#define __AVX__ ' <<< "$macros"; then echo 8
    else echo 4
    fi
}
