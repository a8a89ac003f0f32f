#!/usr/bin/env bash
# The GEMM behind every matmul (llmc/gemm.h), checked against float64 for each micro-kernel
# variant: the one -march=native picks, each variant forced (the AVX-512 one runs on any
# x86-64, split into narrower vectors by GCC), the portable build, and a build without OpenMP;
# each checks the bf16 GEMM too, on every bf16 path the CPU has (gemm_check.c); a build with
# -DGEMM_AMX_EMULATE runs the AMX path's packing and loops on a C model of the tiles where the
# CPU has AVX512_BF16 but no AMX. Then the bf16 dispatch (LLMC_BF16_PATH, LLMC_BF16_EMULATE),
# gemm refusing to run inside a parallel region, and bf16 mutants that must fail.
# Builds with -Werror: the headers must stay warning-free in every configuration.
source "$(dirname "$0")/testlib.sh"
mkdir -p build
flags="-O2 -std=gnu11 -Wall -Wextra -Wno-unused-function -Wno-unused-parameter -Werror -I."
configs=(
    "native:-march=native -fopenmp"
    "avx512-forced:-march=native -fopenmp -DVEC_WIDTH=16"
    "avx2-forced:-march=native -fopenmp -DVEC_WIDTH=8"
    "sse-forced:-march=native -fopenmp -DVEC_WIDTH=4"
    "portable:-march=x86-64 -mtune=generic -fopenmp"
    "no-openmp:-march=native -Wno-unknown-pragmas"
    "amx-emulated:-march=native -fopenmp -DGEMM_AMX_EMULATE"
)
# TEST_QUICK=1 (make test): the native build (both bf16 paths) and one mutant; make test-all
# runs every variant and mutant (test_gpt2's quick checks run the portable build and a bf16
# rounding mutant)
quick=${TEST_QUICK:-0}
quick_configs="native amx-emulated"
quick_mutants="pair order swapped in the native packing|pair halves swapped in the bf16-source packing"
native_width=$(native_vec_width)  # 16, 8 or 4 (testlib.sh)
for config in "${configs[@]}"; do
    name=${config%%:*}
    extra=${config#*:}
    [ "$quick" = 1 ] && [[ " $quick_configs " != *" $name "* ]] && continue
    # a width forced to the one the CPU has is the native build again
    if [[ $extra =~ -DVEC_WIDTH=([0-9]+) ]] && [ "${BASH_REMATCH[1]}" = "$native_width" ]; then
        pass "gemm $name skipped: the native build above has this CPU's width"
        continue
    fi
    bin=build/gemm_check_$name
    # shellcheck disable=SC2086  # the flags are word lists
    if out=$(gcc $flags $extra dev/cpu/gemm_check.c -o "$bin" -lm 2>&1); then
        pass "gemm builds: $name"
        if [ "$name" = amx-emulated ] && ! grep -q avx512_bf16 /proc/cpuinfo; then
            pass "gemm correct: $name skipped (the AMX path's packing needs AVX512_BF16, which this CPU lacks)"
            continue
        fi
        expect_ok "gemm correct: $name" env OMP_NUM_THREADS=2 "$bin"
        if [ "$name" = native ] && [ "$quick" != 1 ]; then  # teams smaller than asked for (it asks for up to 4)
            expect_ok "gemm correct: $name, OMP_THREAD_LIMIT=2" env OMP_NUM_THREADS=2 OMP_THREAD_LIMIT=2 "$bin"
        fi
    else
        fail "gemm builds: $name" "$(printf '%s' "$out" | head -n 5 | tr '\n' ' ')"
    fi
done

# bf16: which path the dispatcher picks (the fastest the CPU has), LLMC_BF16_PATH and
# LLMC_BF16_EMULATE=1 forcing one, and a path the CPU lacks or an unknown one refused.
bin=build/gemm_check_native
if [ -x "$bin" ]; then
    path=$("$bin" --path)
    # with AVX512_BF16 and no AMX, vdpbf16ps only where it was measured faster than the fp32 FMA
    ratio=$(printf '%s' "$path" | sed -n 's/.*vdpbf16ps measured at \([0-9.]*\)x.*/\1/p')
    if grep -q amx_bf16 /proc/cpuinfo; then want="AMX"
    elif grep -q avx512_bf16 /proc/cpuinfo && [ -z "$ratio" ]; then want="a measured vdpbf16ps rate"
    elif grep -q avx512_bf16 /proc/cpuinfo && awk -v r="$ratio" 'BEGIN { exit !(r > 1.0) }'; then want="vdpbf16ps"
    else want="path emulated"; fi
    if printf '%s' "$path" | grep -q "$want"; then pass "bf16 path on this CPU: $path"; else fail "bf16 path on this CPU" "got '$path', expected $want"; fi
    path=$(LLMC_BF16_EMULATE=1 "$bin" --path)
    if printf '%s' "$path" | grep -q "emulated"; then pass "LLMC_BF16_EMULATE=1 picks the emulated path"; else fail "LLMC_BF16_EMULATE=1 picks the emulated path" "got '$path'"; fi
    path=$(LLMC_BF16_PATH=emulated "$bin" --path)
    if printf '%s' "$path" | grep -q "path emulated: forced"; then pass "LLMC_BF16_PATH=emulated picks the emulated path"; else fail "LLMC_BF16_PATH=emulated picks the emulated path" "got '$path'"; fi
    expect_error "LLMC_BF16_PATH with an unknown path" 1 "LLMC_BF16_PATH=tpu: unknown bf16 path" env LLMC_BF16_PATH=tpu "$bin" --path
    if ! grep -q amx_bf16 /proc/cpuinfo; then
        expect_error "LLMC_BF16_PATH=amx on a CPU without AMX" 1 "LLMC_BF16_PATH=amx: this CPU \\(or OS\\) does not support it" env LLMC_BF16_PATH=amx "$bin" --path
    else
        path=$(LLMC_BF16_PATH=amx "$bin" --path)
        if printf '%s' "$path" | grep -q "AMX"; then pass "LLMC_BF16_PATH=amx picks AMX"; else fail "LLMC_BF16_PATH=amx picks AMX" "got '$path'"; fi
    fi
    # the packing buffers are per thread number: two teams' thread 0 would share one
    expect_error "gemm refuses to run inside a parallel region" 1 "gemm: called inside a parallel region" env OMP_NUM_THREADS=2 "$bin" --nested
fi

# Mutants: a copy of the GEMM headers with one deliberate bug each must fail gemm_check's
# bf16 checks (whose emulated path runs the fp32 micro-kernel too). Each line: file | sed expression (no '|' in it) | needs: 0 nothing,
# 1 AVX512_BF16 (caught only by native = emulated), 2 the AMX path (real AMX, or -DGEMM_AMX_EMULATE on AVX512_BF16) | what
MUTANTS=(
    "llmc/gemm_kernel_bf16.h|s/    u += 0x7fffu + ((u >> 16) \& 1u);.*/    \/\/ truncated/|0|truncation instead of round-to-nearest-even"
    "llmc/gemm_pack.h|s/    if (!emulated) { return; }/    if (!emulated) { return; } if (P == GEMM_MR) { return; }/|0|the A operand left unrounded (emulated path)"
    "llmc/gemm_kernel_bf16.h|s/    return gemm_bf16_bits(hi) \(.\) (gemm_bf16_bits(lo) >> 16);/    return gemm_bf16_bits(lo) \1 (gemm_bf16_bits(hi) >> 16);/|1|pair order swapped in the native packing (k in the high half)"
    "llmc/gemm_pack.h|s/    const int swap = emulated ? 1 : 0; /    const int swap = 0; /|1|pair order swapped in the emulated packing (k first)"
    "llmc/gemm_kernel_bf16.h|s/        v\[8 + j\] = _mm512_shuffle_i32x4(t\[j\], t\[8 + j\], 0xdd);/        v[8 + j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0x88);/|1|a wrong lane shuffle in the packing's 16x16 transpose (native path)"
    "llmc/gemm_kernel_bf16.h|s/_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m, hi), _mm512_maskz_loadu_ps(m, lo))/_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m, lo), _mm512_maskz_loadu_ps(m, hi))/|1|pair order swapped in the vpermw interleave of the native packing (source rows k, k+1 adjacent)"
    "llmc/gemm_pack.h|s/    return src16 != NULL ? gemm_bf16_float(src16\[e\]) : src\[e\];/    return src16 != NULL ? gemm_bf16_float(src16[e ^ 1]) : src[e];/|0|pair halves swapped in the bf16-source packing (B from the bf16 copy of the weights, element by element: the emulated path's partial panels and tails, the native path's)"
    "llmc/vecmath.h|s/(~high & (lane + s))/(~high \& lane)/|0|the packing's in-register transpose (B panels from rows along k) giving row i + s its own low lanes"
    "llmc/gemm_pack.h|s/__builtin_convertvector(\*(const gemm_vu16 \*)h, vuint)/__builtin_convertvector(*(const gemm_vu16 *)(h + 1), vuint)/|0|the bf16-source packing's vector widening reading one element late (emulated path: whole rows and 16-k runs)"
    "llmc/gemm_kernel_bf16.h|s/_mm256_maskz_loadu_epi16(m, lo)),/_mm256_maskz_loadu_epi16(m, hi)),/|1|the bf16-source vpermw interleave reading row k+1 for both halves (native packing of B rows k, k+1 adjacent)"
    "llmc/gemm_kernel_bf16.h|s/if (from16) { return _mm512_loadu_si512((const void \*)x); }/if (from16) { return _mm512_loadu_si512((const void *)(x + 4)); }/|1|the bf16-source packing of pairs along rows reading one pair late (native, 16 x 16 transposed blocks)"
    "llmc/gemm_kernel_bf16.h|s/_mm512_loadu_ps(cin + i \* ldcin));/_mm512_loadu_ps(cin));/|1|every row given the addend's first row in the native kernel's in-register epilogue"
    "llmc/gemm_kernel.h|s/        a += GEMM_MR;  \/\/ the panel's rows past R are zero padding/        a += R;/|0|a tile of fewer than MR rows stepping through its a panel by its own row count (fp32 kernel, which the emulated bf16 path runs)"
    "llmc/gemm_kernel_bf16.h|s/        a += GEMM_BF16_MR;  \/\/ the panel's rows past R are zero padding/        a += R;/|1|a tile of fewer than 12 rows stepping through its a panel by its own row count (native kernel)"
    "llmc/gemm.h|s/ + (size_t)(ic - m0) \* gemm_panel_words(g, ku);/;/|0|every row block of the shared packed A read from the first one's place"
    "llmc/gemm.h|s/gemm_v16w w = __builtin_convertvector(\*(const gemm_v16h \*)(lo + j), gemm_v16w);/gemm_v16w w = __builtin_convertvector(*(const gemm_v16h *)(hi != NULL ? hi + j : lo + j), gemm_v16w);/|1|the weight panels' pair words given row 2p+1 in both halves (gemm_put_b_pair, AdamW's writer)"
    "llmc/gemm.h|s/ \* g->nr \* kw + c % g->nr/ * g->nr * kw + (c % g->nr ^ 16)/|1|gemm_put_b_pair swapping the two halves of each panel's columns"
    "llmc/gemm.h|s/bblock = bpacked + gemm_packed_b_offset(g, N, pu, ku, jc);/bblock = bpacked + gemm_packed_b_offset(g, N, 0, ku, jc);/|0|B packed whole (gemm_ex_packed_b) read from its first k block for every k block"
    "llmc/gemm.h|s/if (next_jc >= n1) { next_jc = n0, next_pu += ku; }/if (next_jc >= n1) { next_jc = n0, next_pu += 2 * ku; }/|0|the k blocks outermost (a thread's C of several column blocks) stepping two k blocks at a time: every other k block left out"
    "llmc/gemm.h|s/panels \* (part + 1) \/ parts \* g->mr);/panels * (part + 1) \/ parts * g->mr - g->mr);/|0|each thread's share of the shared A packing one panel short"
    "llmc/gemm.h|s/gemm_pack_a_all(g, 0, 1, m0, m1, K, a, a16, rs_a, cs_a, gemm_thread_a\[tid\])/gemm_pack_a_all(g, 0, 1, m0, m1 - g->mr, K, a, a16, rs_a, cs_a, gemm_thread_a[tid])/|0|a thread's A, packed once for all its B blocks, one panel short"
    "llmc/gemm_kernel.h|s/gelu_vec(\*(const gemm_vfu \*)(val + i \* ld_val + j))/gelu_vec(*(const gemm_vfu *)(val + i * width + j))/|1|the GELU of a full native tile reading its value (in pre) a scratch tile's row length apart"
    "llmc/gemm.h|s/pu + ku >= Ku \&\& jc + nc >= n1/pu == 0 \&\& jc + nc >= n1/|0|the on_final hook told of C after the first k block, not the last"
    "llmc/gemm.h|s/if (n0 == 0 \&\& n1 == ldc) {  \/\/ whole rows/if (n1 == ldc) {  \/\/ whole rows/|0|the on_final hook told of whole rows where the thread has only the right part of each"
    "llmc/gemm_kernel_amx.h|s/_mm512_cvtne2ps_pbh(_mm512_loadu_ps(a + row + 2 \* p + 16), _mm512_loadu_ps(a + row + 2 \* p))/_mm512_cvtne2ps_pbh(_mm512_loadu_ps(a + row + 2 * p), _mm512_loadu_ps(a + row + 2 * p + 16))/|2|AMX A packing: a row's two halves of 16 pairs swapped"
    "llmc/gemm_kernel_amx.h|s/GEMM_AMX_LOAD_HINTED(once == 0, 5, aq + 16 \* 64, 64);/GEMM_AMX_LOAD_HINTED(once == 0, 5, aq, 64);/|2|AMX tile: rows 16-31 multiplied from rows 0-15's A tile"
    "llmc/gemm_kernel_amx.h|s/v\[j\] = _mm512_load_si512((const void \*)(stage + (size_t)(16 \* q + j) \* GEMM_AMX_MR + g));/v[j] = _mm512_load_si512((const void *)(stage + (size_t)(16 * q + j) * GEMM_AMX_MR));/|2|AMX A packing of a transposed A: rows 16-31 of a panel staged from rows 0-15"
    "llmc/gemm_kernel_amx.h|s/GEMM_AMX_LOAD(3, cin + 16 \* ld + 16, ld \* 4);/GEMM_AMX_LOAD(3, cin + 16 * ld, ld * 4);/|2|AMX tile: the bottom-right accumulator started from the bottom-left quarter of the addend (or of C after the first k block)"
    "llmc/gemm.h|s/if (next_jr >= nc) { next_jr = 0, next_ir += g->mr; }/if (next_jr >= nc) { next_jr = 0, next_ir += 2 * g->mr; }/|2|AMX's tiles a row of tiles after another (K <= 256, whole rows of C) stepping two rows of tiles at a time: every other row of tiles never computed"
    "llmc/gemm_kernel_amx.h|s/const int q = (reverse ? steps - 1 - s : s) \* GEMM_AMX_KP;/const int q = (reverse ? steps - s : s) * GEMM_AMX_KP;/|2|AMX tile: every other tile's k steps, run last to first, one step off (its first skipped, one past its panel read)"
    "llmc/gemm_kernel_amx.h|s/    if (straight) { out = c, ld_out = ldc; }/    if (straight) { out = c, ld_out = GEMM_AMX_NR; }/|2|AMX tile: a whole tile stored straight to C with the scratch tile's row length"
    "llmc/gemm_kernel.h|s/            if (ep->bias != NULL) { v += \*(const gemm_vfu \*)(ep->bias + j); }/            if (ep->bias != NULL) { v += *(const gemm_vfu *)(ep->bias); }/|2|the shared epilogue in registers, AMX's whole tiles (a row of two vectors): every vector of a row given the first columns' bias"
    "llmc/gemm_kernel.h|s/(ep->pre + i \* ep->ldpre + j\([,)]\)/(ep->pre + j\1/g|1|the shared epilogue in registers (native edge tiles, AMX whole tiles): every row's value before GELU kept in pre's first row"
)
has_bf16=0
grep -q avx512_bf16 /proc/cpuinfo && has_bf16=1
[ $has_bf16 = 0 ] && quick_mutants="truncation instead of round-to-nearest-even"  # (one that runs here)
for entry in "${MUTANTS[@]}"; do
    IFS='|' read -r file expr needs what <<< "$entry"
    [ "$quick" = 1 ] && ! printf '%s' "$what" | grep -Eq "$quick_mutants" && continue
    if [ "$needs" != 0 ] && [ $has_bf16 = 0 ]; then
        pass "mutant skipped (this CPU has no AVX512_BF16, so native = emulated and the AMX path cannot be checked): $what"
        continue
    fi
    amx_flags=""  # the AMX path: real where the CPU has it, else on the C model of the tiles
    if [ "$needs" = 2 ] && ! grep -q amx_bf16 /proc/cpuinfo; then amx_flags="-DGEMM_AMX_EMULATE"; fi
    dir=build/mutant_gemm
    rm -rf "$dir"
    mkdir -p "$dir/dev/cpu"
    cp -r llmc "$dir/"
    cp dev/cpu/gemm_check.c dev/cpu/common.h "$dir/dev/cpu/"
    sed -i "$expr" "$dir/$file"
    if cmp -s "$file" "$dir/$file"; then
        fail "mutant: $what" "the sed expression no longer matches $file; update the mutant"
        continue
    fi
    # shellcheck disable=SC2086  # the mutant's headers first: -I. is left out
    if ! out=$(gcc ${flags% -I.} -I"$dir" -march=native -fopenmp $amx_flags "$dir/dev/cpu/gemm_check.c" -o "$dir/gemm_check" -lm 2>&1); then
        fail "mutant: $what" "does not compile: $(printf '%s' "$out" | head -n 3 | tr '\n' ' ')"
        continue
    fi
    out=$(OMP_NUM_THREADS=2 "$dir/gemm_check" bf16 2>&1)
    rc=$?
    if [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q '^FAIL'; then
        pass "mutant caught: $what ($(printf '%s\n' "$out" | grep '^FAIL' | head -n 1 | cut -c1-100))"
    else
        fail "mutant caught: $what" "exit $rc: $(printf '%s' "$out" | tail -n 1)"
    fi
done
rm -rf build/mutant_gemm
