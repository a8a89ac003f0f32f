#!/usr/bin/env bash
# The kernel workbench (dev/cpu) builds without warnings, and the harnesses of the
# elementwise kernels and the GEMV find every version equal to version 1 (the matmul and attention
# harnesses take minutes of timing; gemm_check covers the GEMM in test_gemm.sh). The attention
# harnesses' bf16 mode runs untimed on the shapes up to T=512 (--check, a few seconds): the
# llmc kernel on both bf16 paths against the float64 bf16 reference.
source "$(dirname "$0")/testlib.sh"
# TEST_QUICK=1 (make test): only the harnesses run here are built, and they run untimed
# (DEV_UNTIMED, common.h), without gemv's benchmark and vecmath's sweep over a quarter of all floats
targets=() built="every harness"
if [ "${TEST_QUICK:-0}" = 1 ]; then
    targets=(layernorm_forward layernorm_backward gelu crossentropy_softmax adamw encoder attention_forward
             attention_backward) built="the harnesses run here"
    export DEV_UNTIMED=1  # checked, not timed (common.h)
fi
if out=$(make -C dev/cpu -B -j2 "${targets[@]}" 2>&1) && ! printf '%s\n' "$out" | grep -q 'warning:'; then
    pass "make -C dev/cpu builds $built without warnings"
else
    fail "make -C dev/cpu" "$(printf '%s\n' "$out" | grep -m 3 -E 'warning|error' | tr '\n' ' ')"
fi
# The oneDNN yardstick (matmul_torch.py, Python) lists the GPT-2 shapes that amx_bench takes from
# matmul_bench.h: the same names and sizes, or run_amx.sh's side-by-side table pairs wrong rows
if [ "${TEST_QUICK:-0}" != 1 ]; then
    torch_shapes=$(python3 -c 'import ast, sys
src = open(sys.argv[1]).read()
tree = ast.parse(src)
shapes = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "SHAPES")
print("\n".join(" ".join(map(str, s)) for s in shapes))' dev/cpu/matmul_torch.py 2>&1)
    if [ "$torch_shapes" = "$(dev/cpu/amx_bench --list 2>&1)" ]; then
        pass "dev/cpu/matmul_torch.py's shapes are amx_bench's (matmul_bench.h)"
    else
        fail "dev/cpu/matmul_torch.py's shapes" "they differ from amx_bench --list: $(printf '%s' "$torch_shapes" | tr '\n' ';' | head -c 200)"
    fi
    # torch_step.py's side by side (run_amx.sh ratio): under OMP_WAIT_POLICY=ACTIVE (PyTorch's fastest for bf16)
    # its OpenMP threads would spin beside our timed trainer (our T=64 step read 2.5x slow so); the command runs
    # while PyTorch's process is stopped, which the command checks here ($TORCH_STEP_PID's state)
    stopped_cmd='grep -q "^State:.*stopped" /proc/$TORCH_STEP_PID/status && echo "step 2/2 | loss 1 | 5.0 ms |"'
    out=$(OMP_WAIT_POLICY=ACTIVE timeout 120 .venv/bin/python dev/cpu/torch_step.py --steps 1 --alternate "$stopped_cmd" 2>&1); rc=$?
    if [ $rc = 0 ] && printf '%s' "$out" | grep -q '^torch_step: .* ours_median_ms=5.0 '; then
        pass "dev/cpu/torch_step.py --alternate runs our command while PyTorch's process (and its spinning threads) is stopped"
    else
        fail "dev/cpu/torch_step.py --alternate under OMP_WAIT_POLICY=ACTIVE" "exit $rc: $(printf '%s' "$out" | tail -n 1)"
    fi
fi
for harness in layernorm_forward layernorm_backward gelu crossentropy_softmax adamw encoder gemv; do
    [ "${TEST_QUICK:-0}" = 1 ] && [ $harness = gemv ] && continue  # (test_generate checks the GEMV)
    expect_ok "dev/cpu/$harness: every version matches version 1" env OMP_NUM_THREADS=2 "dev/cpu/$harness"
done
for harness in attention_forward attention_backward; do
    expect_ok "dev/cpu/$harness --precision bf16: the kernel's emulated and vdpbf16ps paths match version 1 (within rounding flips) and each other" \
        env OMP_NUM_THREADS=2 "dev/cpu/$harness" --precision bf16 --check
done
# The kernel on AMX tiles (version 4): on real tiles where the CPU has them, else built on the C
# model of them (-DGEMM_AMX_EMULATE), which needs AVX512_BF16 for the packing.
if grep -q avx512_bf16 /proc/cpuinfo; then
    amx_flags=""; grep -q amx_bf16 /proc/cpuinfo || amx_flags="-DGEMM_AMX_EMULATE"
    for harness in attention_forward attention_backward; do
        bin=build/${harness}_amx  # a copy of its own: the default build in dev/cpu stays as it is
        # shellcheck disable=SC2086
        if out=$(mkdir -p build && gcc -O3 -std=gnu11 -march=native -fopenmp -I. $amx_flags "dev/cpu/$harness.c" -o "$bin" \
                 -lm -lopenblas 2>&1 && OMP_NUM_THREADS=2 "$bin" --precision bf16 --check 4 2>&1) &&
           [ "$(printf '%s\n' "$out" | grep -c ' 4 llmc/attention.h, AMX tiles .* OK')" -ge 8 ]; then
            pass "dev/cpu/$harness --precision bf16: the kernel on AMX tiles${amx_flags:+ (their C model)} matches version 1 on every shape"
        else
            fail "dev/cpu/$harness on AMX tiles" "$(printf '%s\n' "$out" | grep -E 'FAIL|MISMATCH|skipped|error' | head -n 2 | tr '\n' ' ')"
        fi
    done
else
    pass "dev/cpu attention on AMX tiles skipped: this CPU has neither AMX nor AVX512_BF16 for the model of the tiles"
fi
if [ "${TEST_QUICK:-0}" != 1 ]; then
    expect_ok "dev/cpu/vecmath: vec_exp, vec_sqrt and the GELU forms within their ulp bounds" env OMP_NUM_THREADS=2 dev/cpu/vecmath
    # vec_exp's other ways on every float too: the two multiplies and the mask test of 8-float
    # vectors (AVX2: Zen 3), and of the portable build's 4 (SSE2, no FMA)
    for variant in "-march=native -DVEC_WIDTH=8" "-march=x86-64 -mtune=generic"; do
        if [ "$variant" = "-march=native -DVEC_WIDTH=8" ] && [ "$(native_vec_width)" = 8 ]; then
            pass "dev/cpu/vecmath built with $variant skipped: dev/cpu/vecmath above is that build on this CPU"
            continue
        fi
        bin=build/vecmath_$(printf '%s' "$variant" | tr -c 'a-zA-Z0-9' '_')
        # shellcheck disable=SC2086
        if out=$(mkdir -p build && gcc -O3 -std=gnu11 -fopenmp -I. $variant dev/cpu/vecmath.c -o "$bin" -lm 2>&1); then
            expect_ok "dev/cpu/vecmath built with $variant: within the bounds, vec_exp the two multiplies' bits" env OMP_NUM_THREADS=2 "$bin"
        else
            fail "dev/cpu/vecmath built with $variant" "$(printf '%s' "$out" | head -n 2 | tr '\n' ' ')"
        fi
    done
fi
