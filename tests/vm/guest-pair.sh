#!/usr/bin/env bash
# Two guests, two nodes: node1 (192.168.77.1) serves, node2 (192.168.77.2) connects, over the
# virtual Ethernet link between the two qemu processes. Run by init inside each guest.
# Env from run.sh: VM_BUILD (host build dir), VM_PEER (the other guest's IPv4).
set -uo pipefail
. "$(dirname "$0")/guest-lib.sh"
# shellcheck disable=SC2034 # for the hook at the end
B=${VM_BUILD:-}
PEER=${VM_PEER:?VM_PEER not set}
P=$VMOUT/perftest
mkdir -p "$P"
ROLE=client
[ "$(hostname)" = node1 ] && ROLE=server

step "guest $(hostname) ($ROLE): kernel $(uname -r), ip $MYIP, peer $PEER, $(nproc) vCPU"
if ! setup_rxe; then
    verdict FAIL rxe_setup "no RoCE v2 GID for $MYIP"
    exit 1
fi
G=$(roce_v2_gid_index)
verdict PASS rxe_setup "gid index $G"
link_watch $$ &

# The peer boots at about the same time: wait for it (a few seconds under TCG).
step "ping $PEER"
if retry 60 busybox ping -c 1 -W 1 "$PEER" >/dev/null; then
    verdict PASS ping "$(busybox ping -c 3 "$PEER" | tail -1)"
else
    verdict FAIL ping "peer $PEER unreachable"
fi

# pair_perftest NAME TOOL ARGS...: node1 runs the server, node2 the client (retrying until
# node1's server listens). Servers time out if the peer never comes.
pair_perftest() {
    local name=$1 tool=$2 rc detail=
    shift 2
    step "$tool $* ($ROLE)"
    if [ $ROLE = server ]; then
        timeout 120 "$tool" -d rxe0 -x "$G" -F "$@" >"$P/$name.server.txt" 2>&1
        rc=$?
        cat "$P/$name.server.txt"
        [ $rc -eq 0 ] && detail=server
    else
        retry 30 timeout 120 "$tool" -d rxe0 -x "$G" -F "$@" "$PEER" >"$P/$name.client.txt" 2>&1
        rc=$?
        cat "$P/$name.client.txt"
        detail=$(perftest_summary "$tool" "$P/$name.client.txt")
    fi
    rxe_counters # cumulative; retries here mean a lossy or slow link
    if [ $rc -eq 0 ] && [ -n "$detail" ]; then
        verdict PASS "$name" "$detail"
    else
        verdict FAIL "$name" "(exit $rc)"
    fi
}
pair_perftest ib_write_lat ib_write_lat -n 1000
pair_perftest ib_write_bw ib_write_bw -s 65536 -n 500 --report_gbits

# Open MPI inside one guest of the pair (eth0 only, no default route, no DNS).
check_mpirun

# ==== arcoll across the two nodes =========================================================
# Each guest starts its 2 ranks with tcp_launch (no ssh, no cross-guest PMIx server): the
# ranks bootstrap through arcoll's out-of-band callbacks over TCP to node1, and group into
# nodes by hostname (node1/node2), so the job is a real 2-node job. Each test gets its own
# port so that a late guest never joins the previous test's rendezvous.
NODE=0
[ $ROLE = client ] && NODE=1
PORT=23500
# ap NAME ARGS...: coll_test ARGS on 2 nodes x AP_PPN ranks (default 2).
ap() {
    local name=$1 ppn=${AP_PPN:-2} log rc ok=0 t0 t1
    shift
    [[ -z ${VM_ONLY:-} || $name =~ $VM_ONLY ]] || return 0
    log=$VMOUT/$name.log
    PORT=$((PORT + 1))
    step "arcoll verbs, 2 nodes x $ppn ranks: $name: $*"
    read -r t0 _ </proc/uptime
    timeout 300 env ARCOLL_CHANNEL=verbs ARCOLL_TIMEOUT_MS="${AP_TIMEOUT_MS:-30000}" \
        "$B/tests/tcp_launch" --nodes 2 --node $NODE --ppn "$ppn" --server 192.168.77.1:$PORT \
        --timeout 120 -- "$@" >"$log" 2>&1
    rc=$?
    read -r t1 _ </proc/uptime
    tail -n 4 "$log"
    rxe_counters
    # Rank 0 (node1) prints the job's summary, which names the node count.
    if [ $rc -eq 0 ] && { [ $NODE = 1 ] || grep -q '(2 nodes): [0-9]* passed, 0 failed' "$log"; }; then
        ok=1
    fi
    if [ $ok = 1 ]; then
        verdict PASS "$name" "$(grep -m1 -E 'passed, [0-9]+ failed|KILL-OK' "$log") [${t0}s..${t1}s]"
    else
        verdict FAIL "$name" "(exit $rc; see $name.log)"
    fi
}
ap pair_matrix matrix
COLL_TEST_ALGS=direct,pap ap pair_skew_random skew 300 200 random
# Shared-memory aware algorithms on real nodes: each guest's two ranks share a node segment.
COLL_TEST_ALGS=shm_direct,pap_shm ap pair_shm_skew_late skew 150 300 late
# Non-leader alltoall on real nodes: sa/sa_direct/rd's inter-node step pairs the ranks with
# the same local index (node1's rank 0 with node2's rank 0, ...); leader through node masters.
COLL_TEST_ALGS=sa,sa_direct,rd,leader ap pair_nl_matrix matrix
COLL_TEST_ALGS=sa,sa_direct,rd,leader ap pair_nl_skew_late skew 150 300 late
ARCOLL_NOTIFY=imm ap pair_imm_env env
ARCOLL_WIREUP=rdmacm ap pair_rdmacm_realloc realloc
# Connection handshakes across the link: bad input with every QP wired at init (eager), and
# pap_shm's QPs on demand: only the node masters (ranks 0 and 2) connect, to each other.
ARCOLL_VERBS_CONNECT=eager ap pair_eager_bad_input bad
ARCOLL_ALLTOALL_ALG=pap_shm ap pair_qps_pap_shm qps 1,0,1,0
ARCOLL_ALLTOALL_ALG=pap_shm ARCOLL_ALLGATHER_ALG=pap_shm ap pair_shm_bad_input bad
# The other collectives across the nodes (tests/integ/coll_more.c): alltoallv, allgatherv,
# reduce_scatter_block, allreduce x direct/pap/ring/rdd/rdh x sizes x in place x nonblocking
# (every 8th dtype x op pair per cell, as in the single guest) with one rank per node and two;
# bad input and cross-rank mismatches on split teams; team_split (ranks 0 and 3 form a team
# with one rank on each node, where the node algorithms run too); 1000 random calls of random
# algorithm and size under random skew, then 1000 for each multi-round algorithm (VSKEW_ALG:
# its allgatherv, reduce_scatter_block and allreduce; alltoallv stays pap).
COLL_V_OPS_EVERY=8 AP_PPN=1 ap pair_v_np2 v
COLL_V_OPS_EVERY=8 ap pair_v v
AP_PPN=1 ap pair_vbad_np2 vbad
ap pair_split split
ap pair_vskew vskew 1000 200
for alg in ring rdd rdh; do
    VSKEW_ALG=$alg ap pair_vskew_$alg vskew 1000 200
done
# The logarithmic alltoallv (src/sloav/) across the nodes: sloav, sloavx and pap x the four
# count distributions x sizes x in place x nonblocking x routing limits, and blocks of 0, 1
# and 1 MiB mixed in one call (as in the single guest: all of it at one and two ranks per
# node, the limits rotating from cell to cell at four), where sloavx's nodes are the guests;
# then 1000 back-to-back skewed calls of sloavx.
AP_PPN=1 ap pair_a2av_np2 a2av
ap pair_a2av a2av
COLL_A2AV_QUICK=1 AP_PPN=4 ap pair_a2av_quick_np8 a2av
VSKEW_ALG=sloavx ap pair_vskew_sloavx vskew 1000 200
# ==== end of arcoll tests ================================================================

step "done"
exit $VM_FAILED
