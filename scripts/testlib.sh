# Sourced by scripts/test_*.sh. Each check prints one line, "PASS name" or
# "FAIL name: why"; run_tests.sh counts them.

pass() { printf 'PASS %s\n' "$1"; }
fail() { printf 'FAIL %s: %s\n' "$1" "$2"; }

# expect_ok NAME CMD...: the command must exit 0.
expect_ok() {
    local name=$1; shift
    local out
    if out=$("$@" 2>&1); then pass "$name"; else fail "$name" "exit $?: $(printf '%s' "$out" | tail -n 3 | tr '\n' ' ')"; fi
}

# expect_error NAME CODE PATTERN CMD...: the command must exit with CODE and
# print exactly one line on stderr matching the extended regex PATTERN.
expect_error() {
    local name=$1 code=$2 pattern=$3; shift 3
    local err rc
    err=$("$@" 2>&1 >/dev/null); rc=$?
    if [ "$rc" -ne "$code" ]; then fail "$name" "exit $rc, expected $code; stderr: $(printf '%s' "$err" | head -n 3 | tr '\n' ' ')"; return; fi
    if [ "$(printf '%s\n' "$err" | grep -c .)" -ne 1 ]; then fail "$name" "expected one line on stderr, got: $(printf '%s' "$err" | head -n 5 | tr '\n' '|')"; return; fi
    if ! printf '%s' "$err" | grep -Eq -- "$pattern"; then fail "$name" "stderr '$err' does not match /$pattern/"; return; fi
    pass "$name"
}
