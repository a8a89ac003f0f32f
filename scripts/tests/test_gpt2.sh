# The model against PyTorch: references for several configs, test_gpt2 on each,
# deliberately broken kernels that must fail the check, and bad input files.
set -u
source scripts/tests/testlib.sh
PY=$PWD/.venv/bin/python

# reference NAME ARGS...: writes data/ref/NAME with scripts/reference/gpt2_reference.py,
# unless it is there already from the same script and arguments.
reference() {
    local name=$1; shift
    local dir=data/ref/$name
    local stamp
    stamp="$(sha256sum scripts/reference/gpt2_reference.py | cut -c1-16) $*"
    if [ -f "$dir/stamp" ] && [ "$(cat "$dir/stamp")" = "$stamp" ]; then return 0; fi
    rm -rf "$dir"
    mkdir -p "$dir"
    $PY scripts/reference/gpt2_reference.py "$@" --out "$dir" || return 1
    echo "$stamp" > "$dir/stamp"
}

check_reference() {  # check_reference NAME [FLAGS...]: test_gpt2 on all four files of data/ref/NAME
    local dir=data/ref/$1; shift
    ./test_gpt2 -e "$dir/model.bin" -s "$dir/state.bin" -l "$dir/losses.txt" -a "$dir/activations.bin" "$@"
}

# TEST_QUICK=1 (make test): the small configs in fp32 and odd in bf16 (no GPT-2 124M), --recompute
# and the bf16 emulated path on odd, the portable build, two mutants (make test-all: everything).
quick=${TEST_QUICK:-0}
quick_mutants="causal mask off by one|bf16 rounding by truncation instead"

# Configs: GPT-2 124M as in llm.c's test; sizes that are multiples of nothing;
# the smallest possible (one head of 5 channels, T = maxT); and one whose
# B*T rows span several classifier chunks (1100 rows: 256-row chunks in fp32, 1024 in bf16,
# each precision's last one partial).
CONFIGS=(
    "d12|--depth d12 -B 4 -T 64 --steps 10"
    "odd|--layers 2 --heads 3 --channels 57 --max-seq-len 37 --vocab 517 -B 3 -T 29 --steps 10 --seed 7"
    "tiny|--layers 1 --heads 1 --channels 5 --max-seq-len 7 --vocab 11 -B 1 -T 7 --steps 10 --seed 3"
    "chunks|--layers 3 --heads 5 --channels 80 --max-seq-len 100 --vocab 1003 -B 11 -T 100 --steps 5 --seed 11"
)
# Each config in fp32, and in bf16 (NAME-bf16: the reference rounds the matmuls' operands as
# test_gpt2 --precision bf16 does; see the top of test_gpt2.c).
for entry in "${CONFIGS[@]}"; do
    [ "$quick" = 1 ] && [ "${entry%%|*}" = d12 ] && continue
    for precision in fp32 bf16; do
        name=${entry%%|*}
        args="${entry#*|} --precision $precision"
        [ $precision = bf16 ] && name=$name-bf16
        [ "$quick" = 1 ] && [ $precision = bf16 ] && [ $name != odd-bf16 ] && continue
        # shellcheck disable=SC2086
        if ! out=$(reference "$name" $args 2>&1); then
            fail "reference $name" "$(printf '%s' "$out" | tail -n 2 | tr '\n' ' ')"
            continue
        fi
        if out=$(check_reference "$name" --precision $precision 2>&1); then
            # the 124M tables, summarized for the log
            case $name in d12*) printf '%s\n' "$out" | grep -E '^(checking|tensor|logits|loss|grad\.|step 9|OK|FAIL)';; esac
            pass "test_gpt2 matches PyTorch: $name ($args; $(printf '%s\n' "$out" | sed -n 's/.*matmuls: //p'))"
        else
            printf '%s\n' "$out" | grep -E 'MISMATCH|FAIL|error' | head -n 20
            fail "test_gpt2 matches PyTorch: $name" "$(printf '%s' "$out" | tail -n 1)"
        fi
    done
done

# --recompute 1 (train_gpt2's activation checkpointing): each block's forward re-run
# before its backward, whose recomputed tensors are compared with the reference again.
recompute_names="odd chunks tiny odd-bf16 chunks-bf16"; [ "$quick" = 1 ] && recompute_names="odd odd-bf16"
for name in $recompute_names; do
    precision=fp32; [ "${name%-bf16}" != "$name" ] && precision=bf16
    if out=$(check_reference $name --precision $precision --recompute 1 2>&1); then
        pass "test_gpt2 --recompute 1 matches PyTorch: $name"
    else
        fail "test_gpt2 --recompute 1 matches PyTorch: $name" "$(printf '%s' "$out" | tail -n 1)"
    fi
done

# bf16 on the fp32 micro-kernel over bf16-rounded panels, the path of CPUs without
# AVX512_BF16, forced (on such a CPU the runs above took it already, so they are not repeated).
emulated_names="odd chunks d12"; [ "$quick" = 1 ] && emulated_names=odd
if ! grep -q avx512_bf16 /proc/cpuinfo; then
    pass "test_gpt2 bf16 emulated: the bf16 runs above took that path (this CPU has no AVX512_BF16)"
    emulated_names=""
fi
for name in $emulated_names; do
    if out=$(LLMC_BF16_EMULATE=1 check_reference $name-bf16 --precision bf16 2>&1); then
        pass "test_gpt2 matches PyTorch, bf16 emulated: $name ($(printf '%s\n' "$out" | sed -n 's/.*matmuls: //p'))"
    else
        fail "test_gpt2 matches PyTorch, bf16 emulated: $name" "$(printf '%s' "$out" | tail -n 1)"
    fi
done

# Other builds must match at the same tolerances: the portable one (-march=x86-64:
# SSE2 only), the one an AVX2-only CPU such as Zen 3 runs (8-lane vectors, bf16 on the
# emulated path, as that CPU's start-up would choose), and one with the AVX-512 shapes
# of the vector kernels forced (16-lane vectors, the 12x32 GEMM tile), which GCC runs
# on an AVX2 machine as pairs of 8-lane vectors, with fused multiply-adds as there:
# the arithmetic of an AVX-512 machine, checked on any machine. An AVX-512 target
# (-march=x86-64-v4) must also compile warning-free.
# (Split 16-lane vectors are slow, so that build checks the small configs only, and builds
# at -O2 without GCSE: GCC took 7 minutes at -O3 on a Zen 3 to lower them onto 8-lane
# registers, 1.5 so.) On a CPU without AVX-512 the native build above is already the AVX2
# build, which then skips GPT-2 124M; on one with AVX-512 the native build is the forced
# one, which is then skipped.
# The AMX path (the GEMM and attention on AMX tiles, LLMC_BF16_PATH=amx) runs on real tiles
# where the CPU has them, else on gemm_kernel_amx.h's C model of them (-DGEMM_AMX_EMULATE), which
# needs AVX512_BF16 for the packing; its sums are not the other paths' bits, so it is checked
# against the bf16 references at their tolerances.
# Each line: what | make's arguments | configs [| environment]
native_width=$(native_vec_width)  # 16: AVX-512, 8: AVX2 (as Zen 3), 4 (testlib.sh)
amx_cflags="CFLAGS=-O3 -std=gnu11 -march=native -fopenmp"
grep -q amx_bf16 /proc/cpuinfo || amx_cflags="$amx_cflags -DGEMM_AMX_EMULATE"
BUILDS=(
    "portable|PORTABLE=1|odd d12 odd-bf16"
    "AVX2 (Zen 3's code)|MARCH=x86-64-v3|odd d12 odd-bf16|LLMC_BF16_EMULATE=1"
    "AVX-512 shapes forced|CFLAGS=-O2 -fno-gcse -std=gnu11 -march=native -fopenmp -DVEC_WIDTH=16|odd tiny chunks odd-bf16"
    "AMX path|$amx_cflags|odd-bf16 tiny-bf16 chunks-bf16|LLMC_BF16_PATH=amx"
)
for entry in "${BUILDS[@]}"; do
    IFS='|' read -r what flags names environment <<< "$entry"
    if [ "$quick" = 1 ]; then
        case $what in portable | AVX2*) names="odd odd-bf16" ;; AMX*) names=odd-bf16 ;; *) continue ;; esac
    fi
    if [ "${what#AVX2}" != "$what" ] && ! grep -qw avx2 /proc/cpuinfo; then
        pass "$what build skipped: this CPU has no AVX2 to run it"
        continue
    fi
    if [ "${what#AVX2}" != "$what" ] && [ "$native_width" = 8 ]; then
        kept=""  # GPT-2 124M (d12) ran on this code above
        for n in $names; do [ "$n" = d12 ] || kept+="${kept:+ }$n"; done
        names=$kept
    fi
    if [ "${what#AVX-512}" != "$what" ] && [ "$native_width" = 16 ]; then
        pass "$what build skipped: this CPU has AVX-512, so the native build above is that build"
        continue
    fi
    if [ "${what#AMX}" != "$what" ] && ! grep -q avx512_bf16 /proc/cpuinfo; then
        pass "$what build skipped: this CPU has neither AMX nor AVX512_BF16 for the model of the tiles"
        continue
    fi
    rm -rf build/variant && mkdir -p build/variant && cp -r Makefile test_gpt2.c llmc build/variant/
    if ! out=$(make -s -C build/variant "$flags" test_gpt2 2>&1); then
        fail "$what build" "does not compile: $(printf '%s' "$out" | head -n 3 | tr '\n' ' ')"
        continue
    fi
    for name in $names; do
        precision=fp32; [ "${name%-bf16}" != "$name" ] && precision=bf16
        # shellcheck disable=SC2086
        if out=$(env $environment build/variant/test_gpt2 -e data/ref/$name/model.bin -s data/ref/$name/state.bin \
                 -l data/ref/$name/losses.txt -a data/ref/$name/activations.bin --precision $precision 2>&1); then
            pass "$what build matches PyTorch: $name"
        else
            fail "$what build matches PyTorch: $name" "$(printf '%s' "$out" | tail -n 1)"
        fi
    done
done
if [ "$quick" = 1 ]; then :
elif out=$(gcc -O3 -std=gnu11 -march=x86-64-v4 -fopenmp -Wall -Wextra -Wno-unused-function -Wno-unused-parameter \
         -Werror -c test_gpt2.c -o build/variant/avx512.o 2>&1); then
    pass "an AVX-512 target (-march=x86-64-v4) compiles warning-free"
else
    fail "AVX-512 target compiles" "$(printf '%s' "$out" | head -n 3 | tr '\n' ' ')"
fi
rm -rf build/variant

# ----------------------------------------------------------------------------
# Mutants: a copy of the sources with one deliberate bug each must fail the
# check on the odd config, and name the tensor where the bug first shows.
# Each line: file | sed expression | the first tensor expected to diverge | what
#   [| bf16 (checked with --precision bf16 against odd-bf16) | environment | another config than odd]
# (used twice below: the A packing's pair order swapped, on the emulated path and on vdpbf16ps's)
a_pair_swap='llmc/gemm_pack.h|s#    const int swap = emulated ? 1 : 0; #    const int swap = emulated \&\& P != GEMM_MR ? 1 : 0; #;s#= gemm_bf16_pair(lo, hi);#= r_panel == GEMM_BF16_MR ? gemm_bf16_pair(hi, lo) : gemm_bf16_pair(lo, hi);#'
MUTANTS=(
    "llmc/layernorm.h|s/#define LAYERNORM_EPS 1e-5f/#define LAYERNORM_EPS 1e-6f/|h.0.ln1_rstd|LayerNorm eps 1e-6 instead of 1e-5"
    "llmc/attention.h|s/vint masked = attn_iota() + q < j;/vint masked = attn_iota() + q < j - 1;/|h.0.att_lse|causal mask off by one: each query also sees the next key"
    "llmc/attention.h|0,\\#const float scale = 1.0f / sqrtf((float)(C / NH));#s##const float scale = 1.0f / (float)(C / NH);#|h.0.att_lse|attention scaled by 1/hs instead of 1/sqrt(hs)"
    "llmc/gelu.h|s/#define GELU_CUBIC 0.044715f/#define GELU_CUBIC 0.04715f/|h.0.fch_gelu|GELU with 0.04715 instead of 0.044715, a digit dropped (the fc matmul's epilogue and the backward)"
    "llmc/layernorm.h|s/s \* (g - g_mean - n \* gn_mean)/s * (g - n * gn_mean)/|h.1.dresidual3|LayerNorm backward without the mean term (first seen in the final LayerNorm's input gradient)"
    "llmc/adamw.h|s/.step_size = lr \/ (1.0f - powf(beta1, (float)t)),/.step_size = lr,/|step 1 loss|AdamW without the first-moment bias correction"
    "llmc/encoder.h|s/vec_store(pos + c, vec_load(pos + c) + dc);/vec_store(pos + c, dc);/;s/pos\[c\] += d\[c\];/pos[c] = d[c];/|grad.wpe|position embedding gradient overwritten instead of accumulated"
    # the attention backward writes dqkv without a zeroing pass: its first sums start from zero
    "llmc/attention.h|s/const vfloat base = first ? vec_set1(0.0f) : (vfloat)(\*(vfloat_u \*)dst);/const vfloat base = (vfloat)(*(vfloat_u *)dst);/|h.0.dqkv|attention backward adding dQ to what dqkv held (the layer above's gradient) instead of to zero"
    "llmc/attention_kernel.h|s/: vec_set1(0.0f) + scale \* x\[r\]);/: vec_load(d) + scale * x[r]);/|h.0.dqkv|attention backward adding dK and dV to what dqkv held instead of to zero"
    # the gradients the backward pass adds to (wpe, the LayerNorms') not zeroed before a step:
    # the previous step's stay in them; and the first pass's overwriting not ended, so that a
    # second pass (gradient accumulation) replaces the gradients instead of adding to them
    "llmc/gpt2_update.h|s/zero_floats(from, (size_t)(grads\[i\] - from));/(void)from;/|grads, 2nd step (bits)|gradients not zeroed between steps (wpe, the blocks' LayerNorms)"
    "llmc/gpt2.h|s/model->grads_overwrite = 0;  \/\/ later micro-batches/(void)0;  \/\/ later micro-batches/|grads, 2 passes summed|a step's second micro-batch overwrites the gradients instead of adding to them"
    # bf16: AdamW's non-temporal stores of the weights' bf16 copy writing other bits than the
    # rounding of the new weights (the next forward pass's products read the copy)
    "llmc/adamw.h|s/        vec_stream_bf16(dst, h);/        vec_stream_bf16(dst, vec_bf16_bits(x * 1.01f));/|h.0.qkv|bf16 copy of the weights streamed from the wrong values by AdamW|bf16"
    # bf16: rounding by truncation; the A operand (activations, or dout) left unrounded, on the
    # emulated path where panels are fp32; A's bf16 pairs packed in the wrong order, which
    # pairs A's k with B's k+1 (on each of the two paths it breaks: not AMX's, a CPU's default
    # where it has the tiles, whose A panels are packed by rows).
    "llmc/gemm_kernel_bf16.h|s/u += 0x7fffu + ((u >> 16) \& 1u);/u += 0;/|h.0.qkv|bf16 rounding by truncation instead of to nearest even|bf16"
    "llmc/gemm_pack.h|s/    if (!emulated) { return; }/    if (!emulated) { return; } if (P == GEMM_MR) { return; }/|h.0.qkv|bf16 A operand left unrounded (emulated path)|bf16|LLMC_BF16_EMULATE=1"
    "$a_pair_swap|h.0.qkv|bf16 pair order swapped in the A packing (emulated path)|bf16|LLMC_BF16_EMULATE=1"
    "$a_pair_swap|h.0.qkv|bf16 pair order swapped in the A packing (vdpbf16ps path)|bf16|LLMC_BF16_PATH=avx512bf16"
    # bf16: the dlogits' bf16 bits (llmc/classifier.h; here, with test_gpt2's observer, rounded
    # after it resyncs them) truncated instead of rounded: the head's input gradient shows it
    "llmc/classifier.h|s/vec_bf16_bits_operand(vec_load(row + v), ftz)/vec_bf16_bits_operand((vfloat)((vint)vec_load(row + v) \& (int32_t)0xffff0000u), ftz)/|dlnf|bf16 dlogits rounded by truncation|bf16"
    # bf16's classifier chunks of 1024 rows (fp32's of 256): the last, partial one left out (chunks-bf16's 1100 rows)
    "llmc/gpt2.h|s/for (int r0 = 0; r0 < N; r0 += chunk) {/for (int r0 = 0; r0 + (chunk > CLASSIFIER_CHUNK_ROWS ? chunk : 0) <= N \&\& r0 < N; r0 += chunk) {/|losses|bf16 classifier: the last, partial chunk of 1024 rows left out|bf16||chunks"
    # bf16 attention: its vector rounding (P, V, dout, K's pairs of keys) by truncation; the
    # pair order swapped in attn_pack_row_pairs (pairs of rows), and in attn_pack_col_pairs
    # (pairs along a row), as pair words (vdpbf16ps) and as split floats (emulated): each
    # packer feeds both operands of some products, which then only add in another order, but
    # dQ = dS K meets dS's pairs of keys from the one with K's from the other; Q^T, K^T and V^T
    # paired along the wrong dimension
    "llmc/attention_kernel.h|s/VEC_INLINE vuint attn_bf16_bits(vfloat x) { return vec_bf16_bits32(x); }/VEC_INLINE vuint attn_bf16_bits(vfloat x) { return (vuint)x \& 0xffff0000u; }/|h.0.att_lse|bf16 attention rounding by truncation (emulated path: Q and K too, by vectors from 16 channels)|bf16|LLMC_BF16_EMULATE=1"
    "llmc/attention_kernel.h|s/VEC_INLINE vuint attn_bf16_bits(vfloat x) { return vec_bf16_bits32(x); }/VEC_INLINE vuint attn_bf16_bits(vfloat x) { return (vuint)x \& 0xffff0000u; }/|h.0.atty|bf16 attention rounding by truncation (vdpbf16ps path: pairs of channels by vectors from 32)|bf16|LLMC_BF16_PATH=avx512bf16"
    "llmc/attention_kernel.h|s/attn_bf16_pairs(vec_load(lo + c), has_hi ? vec_load(hi + c) : (vfloat){0})/(has_hi ? attn_bf16_pairs(vec_load(hi + c), vec_load(lo + c)) : attn_bf16_pairs(vec_load(lo + c), (vfloat){0}))/;s/dst\[p \* ldd + c\] = gemm_bf16_pair(lo\[c\], has_hi ? hi\[c\] : 0.0f);/dst[p * ldd + c] = has_hi ? gemm_bf16_pair(hi[c], lo[c]) : gemm_bf16_pair(lo[c], 0.0f);/|h.1.dqkv|bf16 attention pair order swapped in attn_pack_row_pairs (first seen in dQ)|bf16|LLMC_BF16_PATH=avx512bf16"
    "llmc/attention_kernel.h|s/float \*d_hi = (float \*)dst + 2 \* p \* ldd, \*d_lo = d_hi + ldd;/float *d_lo = (float *)dst + 2 * p * ldd, *d_hi = d_lo + ldd;/|h.1.dqkv|bf16 attention split pairs of rows in the wrong order (emulated path, first seen in dQ)|bf16|LLMC_BF16_EMULATE=1"
    "llmc/attention_kernel.h|s/dst\[r \* ldd + p\] = gemm_bf16_pair(s\[2 \* p\], 2 \* p + 1 < nc ? s\[2 \* p + 1\] : 0.0f);/dst[r * ldd + p] = 2 * p + 1 < nc ? gemm_bf16_pair(s[2 * p + 1], s[2 * p]) : gemm_bf16_pair(s[2 * p], 0.0f);/|h.1.dqkv|bf16 attention pair order swapped in attn_pack_col_pairs (first seen in dQ)|bf16|LLMC_BF16_PATH=avx512bf16"
    "llmc/attention_kernel.h|s/swap\[l\] = l ^ 1;/swap[l] = l;/;s/d\[c ^ 1\] = gemm_bf16_round(s\[c\]);/d[c] = gemm_bf16_round(s[c]);/;s/if (nc % 2 == 1) { d\[nc - 1\] = 0.0f; }/if (nc % 2 == 1) { d[nc] = 0.0f; }/|h.0.att_lse|bf16 attention split pairs along a row in the wrong order (emulated path: K's pairs against Q^T's)|bf16|LLMC_BF16_EMULATE=1"
    "llmc/attention_kernel.h|s/attn_pack_col_pairs(arith, words.u, rows, src, lds, nr, nc);/attn_pack_row_pairs(arith, words.u, rows, src, lds, nr, nc);/|h.0.att_lse|bf16 attention: Q^T, K^T and V^T paired along the positions instead of the channels (vdpbf16ps path)|bf16|LLMC_BF16_PATH=avx512bf16"
    "llmc/attention_kernel.h|s/float \*d = dst + ((r0 + r) ^ swap) \* ldd + c0;/float *d = dst + (r0 + r) * ldd + c0;/;s/dst\[(r ^ swap) \* ldd + c\] =/dst[r * ldd + c] =/|h.0.att_lse|bf16 attention: Q^T, K^T and V^T as split pairs in the wrong order (emulated path)|bf16|LLMC_BF16_EMULATE=1"
    # bf16 attention on AMX tiles (built as the "AMX path" build above): the forward's mask one
    # key late; the backward's P unmasked on the diagonal; dQ added to what dqkv held, or its
    # sums not restarted for the next head; a block product's second row of tiles fed the
    # first's A; V^T's, dout^T's and Q^T's last channel left out of the pairs of positions
    "llmc/attention.h|s/\*s = attn_fwd_mask(\*s, j0 + j, q0 + v \* ATTN_VW);/*s = attn_fwd_mask(*s, j0 + j + 1, q0 + v * ATTN_VW);/|h.0.att_lse|AMX attention: causal mask off by one|bf16|LLMC_BF16_PATH=amx"
    "llmc/attention.h|s/\*p = attn_bwd_p(\*p, scale, row_lse\[i\], diag ? i - c : ATTN_BLK);/*p = attn_bwd_p(*p, scale, row_lse[i], ATTN_BLK);/|h.1.dqkv|AMX attention backward: P not masked on the diagonal|bf16|LLMC_BF16_PATH=amx"
    "llmc/attention.h|s/dq\[t \* C3 + d\] = Q.dq\[t \* hs_pad + d\] \* scale;/dq[t * C3 + d] += Q.dq[t * hs_pad + d] * scale;/|h.0.dqkv|AMX attention backward adding dQ to what dqkv held instead of to zero|bf16|LLMC_BF16_PATH=amx"
    "llmc/attention.h|s/hs_pad, kk, !first);/hs_pad, kk, 1);/|h.1.dqkv|AMX attention backward: a head's dQ sums not restarted (the previous head's kept)|bf16|LLMC_BF16_PATH=amx"
    "llmc/attention_kernel.h|s/GEMM_AMX_LOAD(5, a + (i0 + 16) \* lda + p, lda \* 4);/GEMM_AMX_LOAD(5, a + i0 * lda + p, lda * 4);/|h.0.att_lse|AMX attention: rows 16-31 of a block product multiplied from rows 0-15's A tile|bf16|LLMC_BF16_PATH=amx"
    "llmc/attention_kernel.h|s/attn_transpose((float \*)dst, ldd, words.f, nc, nc, np, 1.0f, ATTN_COPY);/attn_transpose((float *)dst, ldd, words.f, nc, nc - 1, np, 1.0f, ATTN_COPY);/|h.0.atty|AMX attention: the last channel left out of V^T's pairs of keys|bf16|LLMC_BF16_PATH=amx"
)
# mutant_skip ENVIRONMENT: succeeds, printing why, where a mutant of the path that ENVIRONMENT
# forces cannot run on this CPU (fails, printing nothing, where it can); such a mutant is not built
mutant_skip() {
    case $1 in
    *LLMC_BF16_PATH=amx*) ! grep -q avx512_bf16 /proc/cpuinfo && echo "this CPU has neither AMX nor AVX512_BF16 for the model of the tiles" ;;
    *LLMC_BF16_PATH=avx512bf16*) ! grep -q avx512_bf16 /proc/cpuinfo && echo "this CPU has no AVX512_BF16, whose path it breaks" ;;
    *) false ;;
    esac
}
mkdir -p build
rm -rf build/mutant
selected=()  # the mutants that run, each built in build/mutant/N (two builds at a time)
for entry in "${MUTANTS[@]}"; do
    IFS='|' read -r file expr expected what precision environment config <<< "$entry"
    [ "$quick" = 1 ] && ! printf '%s' "$what" | grep -Eq "$quick_mutants" && continue
    if why=$(mutant_skip "$environment"); then
        pass "mutant skipped ($why): $what"
        continue
    fi
    dir=build/mutant/${#selected[@]}
    selected+=("$entry")
    mkdir -p "$dir"
    cp -r Makefile test_gpt2.c llmc "$dir/"
    sed -i "$expr" "$dir/$file"
    make_args=()
    case $environment in *LLMC_BF16_PATH=amx*) make_args=("$amx_cflags") ;; esac
    cmp -s "$file" "$dir/$file" || build_start "$dir" make -s -C "$dir" "${make_args[@]}" test_gpt2
done
for i in "${!selected[@]}"; do
    IFS='|' read -r file expr expected what precision environment config <<< "${selected[$i]}"
    dir=build/mutant/$i
    if cmp -s "$file" "$dir/$file"; then
        fail "mutant: $what" "the sed expression no longer matches $file; update the mutant"
        continue
    fi
    if ! build_wait "$dir"; then
        fail "mutant: $what" "does not compile: $(head -n 3 "$dir/build.log" | tr '\n' ' ')"
        continue
    fi
    ref=data/ref/${config:-odd}${precision:+-$precision}
    # shellcheck disable=SC2086
    out=$(env $environment "$dir/test_gpt2" -e $ref/model.bin -s $ref/state.bin -l $ref/losses.txt \
          -a $ref/activations.bin --precision "${precision:-fp32}" 2>&1)
    rc=$?
    verdict=$(printf '%s\n' "$out" | grep -E '^FAIL:' || true)
    if [ $rc -eq 1 ] && printf '%s' "$verdict" | grep -q "first to diverge is $expected\$"; then
        pass "mutant caught: $what ($verdict)"
    else
        fail "mutant caught: $what" "exit $rc, expected a FAIL naming $expected; got: ${verdict:-$(printf '%s' "$out" | tail -n 1)}"
    fi
done
rm -rf build/mutant

# ----------------------------------------------------------------------------
# Bad input: one line on stderr naming the file and the problem, exit 1.
ref=data/ref/odd
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { ./test_gpt2 -e "$1" -s "$2"; }
# patch FILE OFFSET INT32: overwrite one little-endian int32 of a copy
patch_int() { $PY -c "import struct,sys; f=open(sys.argv[1],'r+b'); f.seek(int(sys.argv[2])); f.write(struct.pack('<i', int(sys.argv[3])))" "$@"; }

expect_error "missing model file" 1 "^error: $tmp/none.bin: cannot open" run "$tmp/none.bin" $ref/state.bin
expect_error "missing state file" 1 "^error: $tmp/none.bin: cannot open" run $ref/model.bin "$tmp/none.bin"
cp $ref/model.bin "$tmp/magic.bin"; patch_int "$tmp/magic.bin" 0 12345
expect_error "model with wrong magic" 1 "magic.bin: bad magic number 12345" run "$tmp/magic.bin" $ref/state.bin
cp $ref/model.bin "$tmp/version.bin"; patch_int "$tmp/version.bin" 4 2
expect_error "model with wrong version" 1 "version.bin: unsupported model version 2" run "$tmp/version.bin" $ref/state.bin
head -c 100000 $ref/model.bin > "$tmp/short.bin"
expect_error "truncated model" 1 "short.bin: truncated model file" run "$tmp/short.bin" $ref/state.bin
head -c 500 $ref/model.bin > "$tmp/stub.bin"
expect_error "model shorter than its header" 1 "stub.bin: truncated file" run "$tmp/stub.bin" $ref/state.bin
cp $ref/model.bin "$tmp/heads.bin"; patch_int "$tmp/heads.bin" 20 4
expect_error "model config inconsistent (heads do not divide C)" 1 "heads.bin: num_heads 4 does not divide channels 57" run "$tmp/heads.bin" $ref/state.bin
cp $ref/state.bin "$tmp/state_magic.bin"; patch_int "$tmp/state_magic.bin" 0 20240326
expect_error "state with wrong magic" 1 "state_magic.bin: bad magic number 20240326" run $ref/model.bin "$tmp/state_magic.bin"
head -c 5000 $ref/state.bin > "$tmp/state_short.bin"
expect_error "truncated state" 1 "state_short.bin: .*truncated" run $ref/model.bin "$tmp/state_short.bin"
expect_error "state of another config" 1 "state.bin: .*written for another config" run data/ref/chunks/model.bin $ref/state.bin
cp $ref/model.bin "$tmp/maxT.bin"; patch_int "$tmp/maxT.bin" 8 16
expect_error "T larger than the model's maximum" 1 "state.bin: T=29 is longer than the model's maximum sequence length 16" run "$tmp/maxT.bin" $ref/state.bin
cp $ref/state.bin "$tmp/token.bin"; patch_int "$tmp/token.bin" 1024 517
expect_error "token id outside the vocabulary" 1 "token.bin: token 517 at position 0 is outside the vocabulary" run $ref/model.bin "$tmp/token.bin"
printf 'abc\n' > "$tmp/losses.txt"
expect_error "malformed losses file" 1 "losses.txt: not a list of numbers" ./test_gpt2 -e $ref/model.bin -s $ref/state.bin -l "$tmp/losses.txt"
cp $ref/activations.bin "$tmp/acts.bin"; truncate -s -100 "$tmp/acts.bin"
expect_error "truncated activations" 1 "acts.bin: truncated" ./test_gpt2 -e $ref/model.bin -s $ref/state.bin -a "$tmp/acts.bin"
expect_error "unknown flag" 2 "^error: -q: unknown flag" ./test_gpt2 -q 1
expect_error "missing -s" 2 "^error: -e MODEL and -s STATE are required" ./test_gpt2 -e $ref/model.bin
expect_error "bad --recompute" 2 "^error: --recompute: expected 0 or 1, got '2'" ./test_gpt2 -e $ref/model.bin -s $ref/state.bin --recompute 2
expect_error "bad --precision" 2 "^error: --precision: expected fp32 or bf16, got 'fp16'" ./test_gpt2 -e $ref/model.bin -s $ref/state.bin --precision fp16
