#!/usr/bin/env bash
# dev/cuda, the GPU kernel workbench. Without a GPU (CI): the kernels run on the CPU
# emulation (dev/cuda/emu.h) and must match version 1 and the CPU reference, in thread
# order and in reverse order; the mutant builds must be caught; with nvcc present (here or
# at /usr/local/cuda/bin), the real build must be warning-free, else it is skipped with a
# message. With a GPU too (nvidia-smi lists one), the real harnesses and mutants run.
source "$(dirname "$0")/testlib.sh"
dir=dev/cuda

# expect_caught NAME CMD...: a mutant must exit 1 having printed a MISMATCH.
expect_caught() {
    local name=$1; shift
    local out rc
    out=$("$@" 2>&1); rc=$?
    if [ "$rc" -eq 1 ] && printf '%s\n' "$out" | grep -q 'MISMATCH'; then pass "$name"
    else fail "$name" "exit $rc, $(printf '%s\n' "$out" | grep -c MISMATCH) mismatches (a broken kernel went unnoticed)"; fi
}

# TEST_QUICK=1 (make test): the emulated builds that run here, each harness once, two mutants
quick=${TEST_QUICK:-0}
targets=(emu); [ "$quick" = 1 ] && targets=(layernorm_forward_emu layernorm_backward_emu layernorm_forward_mutant1_emu
                                             layernorm_backward_mutant2_emu)
if out=$(make -C "$dir" -B -j2 "${targets[@]}" 2>&1) && ! printf '%s\n' "$out" | grep -q 'warning:'; then
    pass "make -C dev/cuda ${targets[*]} builds the emulated harnesses without warnings"
else
    fail "make -C dev/cuda emu" "$(printf '%s\n' "$out" | grep -m 3 -E 'warning|error' | tr '\n' ' ')"
fi
for h in layernorm_forward layernorm_backward; do
    expect_ok "dev/cuda/$h (emulated): every version matches version 1 and the CPU reference" "$dir/${h}_emu"
    [ "$quick" = 1 ] && continue
    expect_ok "dev/cuda/$h (emulated, threads in reverse order): every version matches" env CUDA_EMU_REVERSE=1 "$dir/${h}_emu"
done
if [ "$quick" != 1 ]; then
for sms in 1 7; do
    expect_ok "dev/cuda/layernorm_backward (emulated, $sms SMs: other grids for 3 and 4): every version matches" \
        env CUDA_EMU_SMS=$sms "$dir/layernorm_backward_emu"
done
fi
expect_caught "mutant: forward variance divided by C + 1 is caught" "$dir/layernorm_forward_mutant1_emu" 5
[ "$quick" = 1 ] ||
expect_caught "mutant: forward variance divided by C + 1 is caught in version 6" "$dir/layernorm_forward_mutant1_emu" 6
[ "$quick" = 1 ] ||
expect_caught "mutant: backward mean(g n) divided by C + 1 is caught" "$dir/layernorm_backward_mutant1_emu" 3
expect_caught "mutant: backward reduction skipping a block's partial is caught" "$dir/layernorm_backward_mutant2_emu" 4
expect_error "layernorm_forward: bad version" 2 "^error: version '9': must be a number from 1 to 6" "$dir/layernorm_forward_emu" 9
expect_error "layernorm_backward: bad version" 2 "^error: version 'x': must be a number from 1 to 4" "$dir/layernorm_backward_emu" x

nvcc=$(command -v nvcc 2>/dev/null || true)
[ -n "$nvcc" ] || { [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc; }
if [ -z "$nvcc" ]; then
    echo "skipped: no nvcc on PATH or at /usr/local/cuda/bin: dev/cuda's GPU build not compiled"
else
    # (-Werror all-warnings makes any warning an error; the grep is a second net)
    if out=$(make -C "$dir" -B -j2 NVCC="$nvcc" all 2>&1) && ! printf '%s\n' "$out" | grep -Eqi 'warning( #|:)'; then
        pass "make -C dev/cuda (nvcc, sm_90) builds every harness without warnings"
    else
        fail "make -C dev/cuda with $nvcc" "$(printf '%s\n' "$out" | grep -m 3 -Ei 'warning( #|:)|error' | tr '\n' ' ')"
    fi
    if nvidia-smi -L >/dev/null 2>&1 && make -C "$dir" -j2 NVCC="$nvcc" mutants >/dev/null 2>&1; then
        expect_ok "dev/cuda/layernorm_forward on the GPU: every version matches" "$dir/layernorm_forward"
        expect_ok "dev/cuda/layernorm_backward on the GPU: every version matches" "$dir/layernorm_backward"
        expect_caught "mutant on the GPU: forward variance divided by C + 1 is caught" "$dir/layernorm_forward_mutant1" 5
        expect_caught "mutant on the GPU: forward variance divided by C + 1 is caught in version 6" "$dir/layernorm_forward_mutant1" 6
        expect_caught "mutant on the GPU: backward mean(g n) divided by C + 1 is caught" "$dir/layernorm_backward_mutant1" 3
        expect_caught "mutant on the GPU: backward skipped partial is caught" "$dir/layernorm_backward_mutant2" 4
    else
        echo "skipped: no GPU (nvidia-smi lists none): the real harnesses were compiled, not run"
    fi
fi
