# Data-parallel training over MPI (llmc/zero.h, llmc/collectives.h): N ranks x B against one process with N
# accumulation steps, ZeRO-1, bit-identical reruns, checkpoints resumed with another
# number of ranks, a rank killed, bad input on one rank, and a run across two "hosts"
# (network namespaces). OpenMPI over TCP, one thread per rank, a tiny 2-layer model.
set -u
source scripts/tests/testlib.sh
PY=$PWD/.venv/bin/python

if ! command -v mpirun > /dev/null; then
    echo "SKIP test_mpi.sh: mpirun not found (install openmpi-bin libopenmpi-dev: make setup)"
    exit 0
fi
if ! ldd ./train_gpt2 | grep -q libmpi; then
    fail "train_gpt2 is built with MPI" "mpirun is installed but ./train_gpt2 does not link libmpi (make)"
    exit 0
fi
pass "train_gpt2 is built with MPI"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
# TEST_QUICK=1 (make test): 2 ranks against 1 process (-z 0 and 1), one resume on another
# number of ranks, one bad input, two mutants; make test-all runs everything below
quick=${TEST_QUICK:-0}
data=data/synth
[ -f $data/synth_val_000000.bin ] || $PY scripts/reference/make_synthetic_data.py --out $data --vocab 517 --tokens 20000 > /dev/null
# a 2-layer model, C=64, V=517 (0.14M parameters)
$PY scripts/reference/gpt2_reference.py --layers 2 --heads 4 --channels 64 --max-seq-len 64 --vocab 517 -B 1 -T 8 \
    --steps 1 --threads 1 --out "$tmp/ref" > /dev/null
model=$tmp/ref/model.bin
# weight decay on, so that a shard applying the wrong tensor's decay shows
TRAIN=(-e $model -i "$data/synth_train_*" -j "$data/synth_val_*" -b 4 -t 32 -v 5 -m 6 -s 0 -l 1e-3 -c 0.1)
# TCP over the loopback interface: the path between hosts, without needing a network
MPIRUN=(timeout 120 mpirun -q --allow-run-as-root --oversubscribe --mca btl self,tcp
        --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
single() { ./train_gpt2 "${TRAIN[@]}" "$@"; }
ranks() { local n=$1; shift; "${MPIRUN[@]}" -np "$n" ./train_gpt2 "${TRAIN[@]}" "$@"; }
losses() { grep -E ' (trl|tel):' "$1" | sed 's/ lr:.*//'; }           # "s:N trl:L" / "s:N tel:L" lines
# close LOG_A LOG_B [EXTRA_OK]: the same steps (a step repeated after a resume: each time;
# EXTRA_OK=1: B may hold more steps than A), every loss within 1e-6 relative, every gradient norm
# within 1.5e-4 (the log rounds it to 4 decimals); prints the largest loss difference
close() {
    awk -v extra_ok="${3:-0}" 'NR == FNR { a[$1 " " $2] = $3; n++; next }
         { k = $1 " " $2; if (!(k in a)) { if (!extra_ok) bad = 1; next }
           d = a[k] - $3; d = d < 0 ? -d : d; if (!(k in seen)) { seen[k]; m++ }
           if ($2 == "norm") { if (d > 1.5e-4) bad = 1; if (d > worstn) worstn = d; next }
           r = d / (a[k] < 0 ? -a[k] : a[k]); if (r > worst) worst = r }
         END { printf "max rel loss diff %.2g, max norm diff %.2g, over %d values", worst, worstn, m
               exit !(bad == 0 && m == n && m > 0 && worst <= 1e-6) }' <(fields "$1") <(fields "$2")
}
# "s:N KIND VALUE" for the train and val losses and the gradient norms of a main.log
fields() {
    sed -n -e 's/^\(s:[0-9]*\) trl:\([^ ]*\) .*norm:\([^ ]*\).*/\1 trl \2\n\1 norm \3/p' \
           -e 's/^\(s:[0-9]*\) tel:\([^ ]*\).*/\1 tel \2/p' "$1"
}

# --- the same binary without mpirun runs exactly as a build without MPI
nompi_cmd=$(make -s -B -n NO_MPI=1 train_gpt2 | sed "s| -o train_gpt2 | -o $tmp/train_nompi |")
if [ "$quick" = 1 ]; then :
elif eval "nice -n 15 $nompi_cmd" && ! ldd "$tmp/train_nompi" | grep -q libmpi; then
    single -x 6 -d 256 -o "$tmp/plain" > /dev/null 2>&1
    "$tmp/train_nompi" "${TRAIN[@]}" -x 6 -d 256 -o "$tmp/nompi" > /dev/null 2>&1
    if [ "$(losses "$tmp/plain/main.log")" = "$(losses "$tmp/nompi/main.log")" ] && [ -n "$(losses "$tmp/plain/main.log")" ]; then
        pass "without mpirun the MPI build's losses are bit-identical to a build without MPI"
    else
        fail "single process" "$(diff <(losses "$tmp/plain/main.log") <(losses "$tmp/nompi/main.log") | head -n 3 | tr '\n' '|')"
    fi
else
    fail "build without MPI" "$nompi_cmd failed"
fi

# --- N ranks x B = one process with N accumulation steps (global -d the same): the gradient
# sums overlapped with the backward pass (the default), and blocking after it (LLMC_OVERLAP=0)
ns="2 3"; [ "$quick" = 1 ] && ns=2
for n in $ns; do
    single -x 20 -d $((n * 128)) -o "$tmp/single$n" > /dev/null 2>&1
    for z in 0 1; do
        ranks $n -x 20 -d $((n * 128)) -z $z -n 20 -o "$tmp/r$n-z$z" > "$tmp/r$n-z$z.out" 2>&1; rc=$?
        if [ $rc -eq 0 ] && why=$(close "$tmp/single$n/main.log" "$tmp/r$n-z$z/main.log"); then
            pass "$n ranks x B=4 (-z $z) = 1 process x $n accumulation steps, 20 steps + 5 validations: $why"
        else
            fail "$n ranks -z $z against 1 process" "exit $rc; ${why:-} $(tail -n 2 "$tmp/r$n-z$z.out" | tr '\n' ' ')"
        fi
    done
done
[ "$quick" = 1 ] ||
for z in 0 1; do
    "${MPIRUN[@]}" -x LLMC_OVERLAP=0 -np 3 ./train_gpt2 "${TRAIN[@]}" -x 20 -d 384 -z $z -o "$tmp/block-z$z" > "$tmp/block-z$z.out" 2>&1; rc=$?
    if [ $rc -eq 0 ] && why=$(close "$tmp/single3/main.log" "$tmp/block-z$z/main.log"); then
        pass "LLMC_OVERLAP=0 (blocking sums), 3 ranks -z $z = 1 process x 3 accumulation steps: $why"
    else
        fail "LLMC_OVERLAP=0, 3 ranks -z $z against 1 process" "exit $rc; ${why:-} $(tail -n 2 "$tmp/block-z$z.out" | tr '\n' ' ')"
    fi
done
# ZeRO-1 keeps 1/N of AdamW's m and v per rank
mv_of() { sed -n 's/.*AdamW m+v .* per rank (\([0-9]*\) bytes).*/\1/p' "$1"; }
if [ "$quick" != 1 ]; then
full=$(mv_of "$tmp/r3-z0.out"); z3=$(mv_of "$tmp/r3-z1.out")
awk -v f="$full" -v z="$z3" 'BEGIN { exit !(f > 0 && z > 0 && z * 3 >= f && z * 3 <= f + 3 * 64) }' \
    && pass "ZeRO-1 on 3 ranks: AdamW m+v $z3 bytes per rank, a third of $full" \
    || fail "ZeRO-1 memory" "m+v per rank '$z3' bytes, whole '$full'"
fi

# --- reruns with the same N and threads are bit-identical (losses, parameters, m and v)
reruns=("2 1" "3 0"); [ "$quick" = 1 ] && reruns=()
for nz in "${reruns[@]+"${reruns[@]}"}"; do
    set -- $nz
    ranks $1 -x 20 -d $(($1 * 128)) -z $2 -n 20 -o "$tmp/again$1-z$2" > /dev/null 2>&1
    if [ "$(losses "$tmp/r$1-z$2/main.log")" = "$(losses "$tmp/again$1-z$2/main.log")" ] &&
       cmp -s "$tmp/r$1-z$2/model_00000020.bin" "$tmp/again$1-z$2/model_00000020.bin" &&
       cmp -s "$tmp/r$1-z$2/state_00000020.bin" "$tmp/again$1-z$2/state_00000020.bin"; then
        pass "rerun of $1 ranks -z $2: bit-identical losses and checkpoint"
    else
        fail "rerun of $1 ranks -z $2" "losses or checkpoint files differ"
    fi
done

# --- resume with another number of ranks: -d 768 = 6 micro-batches of 128 tokens, as
# 6 x 1, 3 x 2 or 2 x 3; the first 10 steps from one N, the last 10 from another
D=(-d 768 -n 10)
single -x 20 "${D[@]}" -o "$tmp/ref20" > /dev/null 2>&1
first() {  # first NAME N Z: steps 0..9 and a checkpoint at 10
    if [ "$2" = 1 ]; then single -x 10 "${D[@]}" -z $3 -o "$tmp/$1" > /dev/null 2>&1
    else ranks $2 -x 10 "${D[@]}" -z $3 -o "$tmp/$1" > /dev/null 2>&1; fi
}
cases=("from2 1 0" "from2 3 0" "from1 2 1" "from3 2 0")
if [ "$quick" = 1 ]; then first from1 1 0; cases=("from1 2 1")
else first from1 1 0; first from2 2 1; first from3 3 1; fi
for case in "${cases[@]}"; do
    set -- $case
    dir="$tmp/$1-to$2"; cp -r "$tmp/$1" "$dir"
    if [ "$2" = 1 ]; then single -x 20 "${D[@]}" -z $3 -y 1 -o "$dir" > "$dir.out" 2>&1; rc=$?
    else ranks $2 -x 20 "${D[@]}" -z $3 -y 1 -o "$dir" > "$dir.out" 2>&1; rc=$?; fi
    from=${1#from}
    if [ $rc -eq 0 ] && grep -q "resuming from $dir/model_00000010.bin (step 10)" "$dir.out" &&
       why=$(close "$tmp/ref20/main.log" "$dir/main.log"); then
        pass "checkpoint of $from rank(s) resumed on $2 (-z $3): 20 steps as one uninterrupted process: $why"
    else
        fail "resume $from -> $2 ranks" "exit $rc; ${why:-} $(grep -m1 -E 'resuming|error' "$dir.out")"
    fi
done

# --- a rank killed with SIGKILL ends the job; the checkpoints stay intact and resume
descendants() { local c; for c in $(pgrep -P "$1"); do echo "$c"; descendants "$c"; done; }
if [ "$quick" != 1 ]; then
ranks 2 -x 2000 -d 768 -n 2 -o "$tmp/kill" > "$tmp/kill.out" 2>&1 &
mpi_pid=$!
victim=""
for _ in $(seq 1 400); do
    if [ -z "$victim" ]; then
        for p in $(descendants $mpi_pid); do
            [ "$(cat /proc/$p/comm 2>/dev/null)" = train_gpt2 ] &&
                grep -qz '^OMPI_COMM_WORLD_RANK=1$' /proc/$p/environ 2>/dev/null && victim=$p
        done
    fi
    [ -n "$victim" ] && [ -f "$tmp/kill/state_00000004.bin" ] && break
    sleep 0.05
done
if [ -n "$victim" ]; then kill -9 "$victim"; fi
wait $mpi_pid; rc=$?
last=$(ls "$tmp/kill" | sed -n 's/^state_0*\([0-9][0-9]*\)\.bin$/\1/p' | sort -n | tail -n 1)
if [ -n "$victim" ] && [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ -n "$last" ] && [ "$last" -lt 2000 ]; then
    pass "rank 1 killed (SIGKILL) at step ~$last: the job ended (mpirun exit $rc), no hang"
    ranks 2 -x $((last + 4)) -d 768 -n 2 -y 1 -o "$tmp/kill" > "$tmp/kill2.out" 2>&1; rc=$?
    single -x $((last + 4)) -d 768 -o "$tmp/killref" > /dev/null 2>&1
    if [ $rc -eq 0 ] && grep -q "resuming from $tmp/kill/model_$(printf %08d $last).bin" "$tmp/kill2.out" &&
       why=$(close "$tmp/killref/main.log" "$tmp/kill/main.log" 1); then
        pass "after the kill, resumed from checkpoint $last: every step as an uninterrupted run, before and after: $why"
    else
        fail "resume after a rank was killed" "exit $rc; ${why:-} $(grep -m1 -E 'resuming|error' "$tmp/kill2.out")"
    fi
else
    fail "rank killed" "victim '${victim}', mpirun exit $rc, newest checkpoint '${last}'"
fi
fi

# --- bad input on one rank: every rank exits non-zero with that rank's one-line error
one_bad() {  # one_bad NAME CODE PATTERN ARGS...: rank 1 gets ARGS, rank 0 the good command
    local name=$1 code=$2 pattern=$3; shift 3
    local start=$SECONDS err rc
    err=$("${MPIRUN[@]}" -np 1 ./train_gpt2 "${TRAIN[@]}" -x 50 : -np 1 ./train_gpt2 "${TRAIN[@]}" -x 50 "$@" 2>&1 >/dev/null); rc=$?
    local first=$(printf '%s\n' "$err" | head -n 1)
    if [ $rc -eq $code ] && printf '%s' "$first" | grep -Eq -- "$pattern"; then
        pass "$name: exit $rc in $((SECONDS - start)) s, '$first'"
    else
        fail "$name" "exit $rc (expected $code); stderr: $(printf '%s' "$err" | head -n 3 | tr '\n' '|')"
    fi
}
one_bad "missing shard on rank 1" 1 "^error: rank 1: -i $tmp/none_\*: no files match$" -i "$tmp/none_*"
if [ "$quick" != 1 ]; then
one_bad "bad flag on rank 1" 2 "^error: rank 1: -z: 2 is outside 0..1$" -z 2
one_bad "-d not divisible by ranks*B*T" 2 "^error: rank [01]: -d: 384 tokens per step is not a multiple of ranks\*B\*T = 2\*4\*32 = 256$" -d 384
err=$("${MPIRUN[@]}" -np 1 ./train_gpt2 "${TRAIN[@]}" -x 50 : -np 1 env LLMC_OVERLAP=yes ./train_gpt2 "${TRAIN[@]}" -x 50 2>&1 >/dev/null); rc=$?
first=$(printf '%s\n' "$err" | head -n 1)
[ $rc -eq 1 ] && printf '%s' "$first" | grep -Eq '^error: rank 1: LLMC_OVERLAP=yes: expected 0 .* or 1 ' \
    && pass "LLMC_OVERLAP=yes on rank 1: exit $rc, '$first'" || fail "bad LLMC_OVERLAP" "exit $rc; $(printf '%s' "$err" | head -n 3 | tr '\n' '|')"
err=$("${MPIRUN[@]}" -np 1 ./train_gpt2 "${TRAIN[@]}" -x 50 : -np 1 env LLMC_OVERLAP=0 ./train_gpt2 "${TRAIN[@]}" -x 50 2>&1 >/dev/null); rc=$?
first=$(printf '%s\n' "$err" | head -n 1)
[ $rc -eq 1 ] && printf '%s' "$first" | grep -Eq '^error: rank 1: -z, -v, -m, -n, -y, LLMC_OVERLAP or the training data differ' \
    && pass "LLMC_OVERLAP=0 on rank 1 only: exit $rc, '$first'" || fail "LLMC_OVERLAP on one rank" "exit $rc; $(printf '%s' "$err" | head -n 3 | tr '\n' '|')"
one_bad "another -b on rank 1" 1 "^error: rank 1: the model, batch or optimizer settings differ from rank 0's" -b 2
printf '%s\n' 'junk' > "$tmp/junk_model.bin"
one_bad "corrupt model on rank 1" 1 "^error: rank 1: $tmp/junk_model.bin: truncated" -e "$tmp/junk_model.bin"
fi

# --- mutants: a copy of the sources with deliberate bugs, each switched on by
# LLMC_MUTANT=K (one build for all), must fail the comparison with one process
mut=$tmp/mutant
mkdir -p "$mut" && cp -r Makefile train_gpt2.c llmc "$mut/"
if ! $PY - "$mut" << 'PYEOF'
import sys
d = sys.argv[1]
edits = [  # file, original, mutated; MUTANT(K) is true when LLMC_MUTANT=K
    ("llmc/utils.h", "#pragma once\n",
     "#pragma once\n#define MUTANT(k) (getenv(\"LLMC_MUTANT\") != NULL && atoi(getenv(\"LLMC_MUTANT\")) == (k))\n"),
    ("llmc/gpt2_update.h", "PARAMETER_DECAYS[i] ? weight_decay : 0.0f",
     "(MUTANT(1) ? weight_decay : PARAMETER_DECAYS[i] ? weight_decay : 0.0f)"),
    ("llmc/zero.h", "    zero_all_gather_f32(model->params_memory, model->params_span);",
     "    if (!MUTANT(2)) { zero_all_gather_f32(model->params_memory, model->params_span); }"),
    ("llmc/collectives.h", "if (offset > 0) { memmove(", "if (offset > 0 && !MUTANT(3)) { memmove("),
    ("llmc/zero.h", "opt->num_layers - final_from)", "opt->num_layers - final_from + MUTANT(6))"),
    ("train_gpt2.c", "if (micro == run->rank_accum - 1) { zero_overlap_arm(",
     "if (micro == (MUTANT(7) ? 0 : run->rank_accum - 1)) { zero_overlap_arm("),
    ("train_gpt2.c", "a->B, a->T, 1.0f / (float)run->accum);",
     "a->B, a->T, 1.0f / (float)(MUTANT(4) ? run->rank_accum : run->accum));"),
    ("train_gpt2.c", "if (r == zero.rank && zero.size > 1)", "if ((MUTANT(5) ? r == 0 : r == zero.rank) && zero.size > 1)"),
]
for path, old, new in edits:
    text = open(f"{d}/{path}").read()
    if text.count(old) != 1:
        sys.exit(f"{path}: '{old}' found {text.count(old)} times: update the mutant")
    open(f"{d}/{path}", "w").write(text.replace(old, new))
PYEOF
then
    fail "mutants" "the sources changed: update the edits"
elif ! out=$(make -s -C "$mut" train_gpt2 2>&1); then
    fail "mutants" "do not compile: $(printf '%s' "$out" | head -n 3 | tr '\n' ' ')"
else
    MUTANTS=(  # K|ranks|-z|-d|the one-process run to match|what
        "1|3|1|384|single3|AdamW (a ZeRO-1 shard of it) applies weight decay to every tensor (biases, LayerNorms too)"
        "2|2|1|256|single2|ZeRO-1 without the parameter all-gather"
        "3|3|1|384|single3|reduce-scatter leaves a rank's part at the start of the array (or range)"
        "4|3|0|384|single3|gradients summed over ranks, not averaged (loss scale 1/local micro-batches)"
        "5|2|0|256|single2|every rank trains on the first batch of each group of N"
        "6|3|0|384|single3|overlap: each bucket's sum started one bucket early (before its gradients are final)"
        "7|2|1|768|ref20|overlap: sums started in the first of 3 micro-batches' backward, not the last"
    )
    for entry in "${MUTANTS[@]}"; do
        IFS='|' read -r k n z d ref what <<< "$entry"
        [ "$quick" = 1 ] && [ "$k" != 2 ] && [ "$k" != 7 ] && continue
        LLMC_MUTANT=$k "${MPIRUN[@]}" -np $n "$mut/train_gpt2" "${TRAIN[@]}" -x 20 -d $d -z $z \
            -o "$tmp/mutant$k" > /dev/null 2>&1
        if why=$(close "$tmp/$ref/main.log" "$tmp/mutant$k/main.log"); then
            fail "mutant caught: $what" "it matched one process: $why"
        else
            pass "mutant caught: $what ($why)"
        fi
    done
fi

# --- 2 ranks x 2 threads in bf16: AdamW beside the next forward pass (gpt2_update.h's gpt2_update_defer, on
# by default there on AMD's CPUs) against after the backward: the same checkpoints (-z 0; -z 1 runs its
# shard's update at once)
for ov in 0 1; do
    OMP_NUM_THREADS=2 LLMC_OVERLAP_UPDATE=$ov "${MPIRUN[@]}" -x OMP_NUM_THREADS -x LLMC_OVERLAP_UPDATE -np 2 \
        ./train_gpt2 "${TRAIN[@]}" -x 10 --precision bf16 -n 10 -o "$tmp/ovl$ov" > "$tmp/ovl$ov.out" 2>&1
done
if cmp -s "$tmp/ovl0/model_00000010.bin" "$tmp/ovl1/model_00000010.bin" &&
    cmp -s "$tmp/ovl0/state_00000010.bin" "$tmp/ovl1/state_00000010.bin" && grep -q '^threads: 2 | 2 ranks' "$tmp/ovl1.out"; then
    pass "2 ranks x 2 threads, bf16: LLMC_OVERLAP_UPDATE=0 and =1 give the same checkpoint after 10 steps"
else
    fail "2 ranks x 2 threads, LLMC_OVERLAP_UPDATE" "$(grep -m 1 -E 'error|threads' "$tmp/ovl1.out")"
fi

# --- two hosts: network namespaces joined by a veth pair, OpenMPI launching into them
[ "$quick" = 1 ] || bash scripts/tests/mpi_two_hosts.sh "$tmp" "${TRAIN[@]}"
