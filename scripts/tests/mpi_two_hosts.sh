# A data-parallel run across two "hosts" on this machine: two network namespaces joined
# by a veth pair, each with its own private address, and OpenMPI launching one rank into
# each through `ip netns exec` (its rsh launch agent; the host names are the namespace
# names), TCP between them on the veth addresses only. Called by scripts/tests/test_mpi.sh:
#   bash scripts/tests/mpi_two_hosts.sh TMPDIR TRAIN_ARGS...
# Prints PASS/FAIL lines (testlib.sh), or a SKIP line where namespaces cannot be made.
set -u
source scripts/tests/testlib.sh
tmp=$1; shift
TRAIN=("$@")

if [ "$(id -u)" -ne 0 ] || ! command -v ip > /dev/null; then
    echo "SKIP two-host run: needs root and iproute2 (ip) to make network namespaces"; exit 0
fi
# names unique to this run (a concurrent test run makes its own)
h0=llmc$$a; h1=llmc$$b; net=10.201.$(( $$ % 250 ))
cleanup() { ip netns del $h0 2> /dev/null; ip netns del $h1 2> /dev/null; }
trap cleanup EXIT
if ! ip netns add $h0 2> /dev/null || ! ip netns add $h1 2> /dev/null; then
    echo "SKIP two-host run: cannot create network namespaces here"; exit 0
fi
if ! { ip link add v$$a netns $h0 type veth peer name v$$b netns $h1 &&
       ip -n $h0 addr add $net.1/24 dev v$$a && ip -n $h1 addr add $net.2/24 dev v$$b &&
       ip -n $h0 link set v$$a up && ip -n $h1 link set v$$b up &&
       ip -n $h0 link set lo up && ip -n $h1 link set lo up; } 2> "$tmp/netns.err"; then
    echo "SKIP two-host run: cannot set up the veth pair: $(head -n 1 "$tmp/netns.err")"; exit 0
fi
# the launch agent: "ssh HOST COMMAND" becomes "ip netns exec HOST sh -c COMMAND", with a /tmp
# of the host's own. OpenMPI keeps its session directories in $TMPDIR/ompi.HOSTNAME.UID, and both
# namespaces have this machine's host name: with one /tmp, rank 0 and the second host's daemon
# made and removed directories in the same jf.JOBFAMILY tree, as real hosts never do, and once
# (CI, 2026-12-05; not reproduced in 125 runs here) that daemon could not create its own
# (ORTE_ERROR_LOG, session_dir.c line 107)
agent=$tmp/netns_agent.sh
printf '#!/bin/sh\nhost=$1; shift\nexec ip netns exec "$host" env TMPDIR="%s/$host.tmp" sh -c "$*"\n' "$tmp" > "$agent"
chmod +x "$agent"
mkdir -p "$tmp/$h0.tmp" "$tmp/$h1.tmp"

export OMP_NUM_THREADS=1
./train_gpt2 "${TRAIN[@]}" -x 10 -d 256 -o "$tmp/hosts_single" > /dev/null 2>&1
start=$SECONDS
# mpirun itself runs in the first host, so that its daemons reach it on the veth network
# rtc_hwloc_vmhole none: OpenMPI 4.1.4's remote daemon (orted) otherwise maps hwloc's topology
# into a hole of its address space and can segfault there
# (hwloc_shmem_topology_write: 6 of 60 runs here, none of 299 with it off)
TMPDIR=$tmp/$h0.tmp ip netns exec $h0 timeout 120 mpirun -q --allow-run-as-root --host $h0,$h1 -np 2 --map-by node \
    --mca plm_rsh_agent "$agent" --mca btl self,tcp --mca rtc_hwloc_vmhole none \
    --mca btl_tcp_if_include $net.0/24 --mca oob_tcp_if_include $net.0/24 \
    -x OMP_NUM_THREADS -x PATH --wdir "$PWD" \
    sh -c 'echo "rank $OMPI_COMM_WORLD_RANK in $(ip netns identify $$) ${TMPDIR##*/}" >&2; exec ./train_gpt2 "$@"' sh \
    "${TRAIN[@]}" -x 10 -d 256 -o "$tmp/hosts" > "$tmp/hosts.out" 2> "$tmp/hosts.err"; rc=$?
veth_bytes=$(ip -n $h1 -s link show v$$b | awk '/RX:/ { getline; print $1 }')
where=$(grep -E '^rank [01] in ' "$tmp/hosts.err" | sort | tr '\n' ' ')
same() { grep -E ' (trl|tel):' "$1" | sed 's/ lr:.*//'; }
if [ $rc -eq 0 ] && [ "${veth_bytes:-0}" -gt 1000000 ] && [ "$where" = "rank 0 in $h0 $h0.tmp rank 1 in $h1 $h1.tmp " ] && [ -n "$(same "$tmp/hosts/main.log")" ] &&
   awk 'NR == FNR { a[$1 " " substr($2, 1, 4)] = substr($2, 5); n++; next }
        { k = $1 " " substr($2, 1, 4); d = a[k] - substr($2, 5); if (d < 0) d = -d; if (!(k in a) || d > 1e-6 * a[k]) bad = 1; m++ }
        END { exit !(bad == 0 && m == n) }' <(same "$tmp/hosts_single/main.log") <(same "$tmp/hosts/main.log"); then
    pass "two hosts: rank 0 in $h0, rank 1 in $h1 over TCP ($net.0/24), 10 steps as 1 process x 2 accumulation steps; $veth_bytes bytes into $h1 over veth ($((SECONDS - start)) s)"
else
    fail "two-host run" "exit $rc; placement '$where'; $(grep -v '^rank' "$tmp/hosts.err" | head -n 3 | tr '\n' '|')"
fi
