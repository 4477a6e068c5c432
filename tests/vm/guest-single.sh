#!/usr/bin/env bash
# One guest: Soft-RoCE on eth0, verbs checked with the standard tools (server and client in the
# same guest, talking through rxe0), Open MPI, then arcoll. Run by init inside the guest.
# Env from run.sh: VM_BUILD (host build dir, readable at the same path here).
# Keeps perftest's output in /tmp/vmout/perftest/ for comparing arcoll with it later.
set -uo pipefail
. "$(dirname "$0")/guest-lib.sh"
B=${VM_BUILD:-}
P=$VMOUT/perftest
mkdir -p "$P"

step "guest $(hostname): kernel $(uname -r), ip $MYIP, $(nproc) vCPU"
if ! setup_rxe; then
    verdict FAIL rxe_setup "no RoCE v2 GID for $MYIP"
    exit 1
fi
G=$(roce_v2_gid_index)
verdict PASS rxe_setup "gid index $G"

step "ibv_devinfo -d rxe0"
ibv_devinfo -d rxe0 | tee "$P/ibv_devinfo.txt"
if grep -q 'state:.*PORT_ACTIVE' "$P/ibv_devinfo.txt"; then
    verdict PASS rxe_port_active
else
    verdict FAIL rxe_port_active
fi

# perftest NAME TOOL ARGS...: server in the background, client against our own address;
# the verdict carries the client's summary (avg latency or average bandwidth).
perftest() {
    local name=$1 tool=$2 srv rc_c rc_s detail
    shift 2
    step "$tool $* (server + client in this guest)"
    timeout 120 "$tool" -d rxe0 -x "$G" -F "$@" >"$P/$name.server.txt" 2>&1 &
    srv=$!
    sleep 0.5
    # the client fails at once if the server is not listening yet: retry
    retry 10 timeout 120 "$tool" -d rxe0 -x "$G" -F "$@" "$MYIP" >"$P/$name.client.txt" 2>&1
    rc_c=$?
    wait $srv
    rc_s=$?
    cat "$P/$name.client.txt"
    rxe_counters # cumulative
    detail=$(perftest_summary "$tool" "$P/$name.client.txt")
    if [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ] && [ -n "$detail" ]; then
        verdict PASS "$name" "$detail"
    else
        verdict FAIL "$name" "(client exit $rc_c, server exit $rc_s)"
    fi
}
perftest ib_write_lat ib_write_lat -n 1000
perftest ib_write_bw ib_write_bw -s 65536 -n 1000 --report_gbits

# Open MPI in the guest: as root, one node, loopback plus eth0.
check_mpirun

# arcoll's build, read from the host at its own path: PMIx bootstrap in the guest.
if [ -n "$B" ] && [ -x "$B/bin/arcoll_info" ]; then
    step "mpirun -np 2 arcoll_info"
    out=$(timeout 60 mpirun --oversubscribe -np 2 "$B/bin/arcoll_info" 2>&1)
    echo "$out"
    if grep -q '^ranks 2,' <<<"$out"; then
        verdict PASS arcoll_info_np2
    else
        verdict FAIL arcoll_info_np2
    fi
else
    verdict FAIL arcoll_build "VM_BUILD='$B' has no bin/arcoll_info"
fi

# ==== arcoll over verbs (rxe0): the same test programs as on the shared-memory channel ====
# av NAME NP EXPECT CMD...: mpirun -np NP CMD with ARCOLL_CHANNEL=verbs; EXPECT is ok (exit 0
# and " 0 failed"), kill:N (N KILL-OK lines), kill:N:CODE (N KILL-OK lines, each naming CODE:
# coll_test phasefault), lines:N:TEXT (N lines naming TEXT, no hang), or error:TEXT (must
# fail, log naming TEXT).
# The device and GID are chosen automatically (docs/verbs.md); one test pins them.
av() {
    local name=$1 np=$2 expect=$3 log rc t0 t1 ok=0
    shift 3
    [[ -z ${VM_ONLY:-} || $name =~ $VM_ONLY ]] || return 0
    log=$VMOUT/$name.log
    step "arcoll verbs: $name: mpirun -np $np $*"
    read -r t0 _ </proc/uptime
    timeout 300 env ARCOLL_CHANNEL=verbs ARCOLL_TIMEOUT_MS="${AV_TIMEOUT_MS:-60000}" \
        mpirun --oversubscribe --bind-to none ${AV_MPIRUN_ARGS:-} -np "$np" "$@" >"$log" 2>&1
    rc=$?
    read -r t1 _ </proc/uptime
    tail -n 6 "$log"
    rxe_counters
    case $expect in
    ok) [ $rc -eq 0 ] && grep -q ' 0 failed' "$log" && ok=1 ;;
    kill:*:*)
        local k=${expect#kill:}
        [ "$(grep -c KILL-OK "$log")" -eq "${k%%:*}" ] &&
            [ "$(grep -c "KILL-OK phasefault [a-z]*: ${k#*:} (" "$log")" -eq "${k%%:*}" ] && ok=1
        ;;
    kill:*) [ "$(grep -c KILL-OK "$log")" -eq "${expect#kill:}" ] && ok=1 ;;
    lines:*:*)
        local l=${expect#lines:}
        [ $rc -ne 124 ] && [ "$(grep -c "${l#*:}" "$log")" -eq "${l%%:*}" ] && ok=1
        ;;
    error:*) [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "${expect#error:}" "$log" && ok=1 ;;
    esac
    if [ $ok = 1 ]; then
        verdict PASS "$name" "$(grep -m1 -E 'passed, [0-9]+ failed|KILL-OK|arcoll-chanperf' "$log" ||
            grep -m1 "${expect#error:}" "$log") [${t0}s..${t1}s]"
    else
        verdict FAIL "$name" "(exit $rc, expected $expect; see $name.log)"
    fi
}
T=$B/tests
av verbs_info 1 ok bash -c "'$B/bin/arcoll_info' && echo 'info: 1 passed, 0 failed'"
# The guests test what is specific to verbs (the data path, wire-up, registration, faults over
# a real device), not the algorithms' logic at every rank count and shape: that is the
# in-process matrix's (tests/matrix/sim_matrix.c), where the same algorithm code runs over the
# simulated channel. So the verbs runs take the flat algorithms (COLL_TEST_ALGS), one node
# algorithm family each, and 2-5 ranks (8 where connections per rank are counted).
FLAT="env COLL_TEST_ALGS=direct,pap"
av verbs_matrix_np3 3 ok $FLAT "$T/coll_test" matrix
ARCOLL_NOTIFY=imm av verbs_imm_matrix_np3 3 ok $FLAT "$T/coll_test" matrix
ARCOLL_DEVICE=rxe0:1 ARCOLL_GID_INDEX="$G" av verbs_pinned_gid_env_np2 2 ok "$T/coll_test" env
ARCOLL_WIREUP=rdmacm ARCOLL_LOG=info av verbs_rdmacm_env_np2 2 ok "$T/coll_test" env
av verbs_skew_random_np4 4 ok $FLAT "$T/coll_test" skew 300 200 random
av verbs_skew_late_np4 4 ok $FLAT "$T/coll_test" skew 200 500 late
ARCOLL_NOTIFY=imm av verbs_imm_skew_late_np3 3 ok $FLAT "$T/coll_test" skew 300 300 late
# Shared-memory aware algorithms on pretend nodes: node segments in shared memory, the
# masters' phase 2 over verbs; equal nodes of 2 and unequal nodes of 3 and 1.
SHMA="env COLL_TEST_ALGS=shm_direct,pap_shm"
ARCOLL_NODE_SIZE=2 av verbs_shm_nodes2_matrix_np4 4 ok env COLL_TEST_ALGS=pap_shm "$T/coll_test" matrix
ARCOLL_NODE_SIZE=2 av verbs_shm_nodes2_skew_late_np4 4 ok $SHMA "$T/coll_test" skew 200 500 late
# 100 random-skew calls on the unequal nodes: 300 took 200 s of guest time at host load 15.
ARCOLL_NODE_SIZE=3,1 av verbs_shm_nodes31_skew_random_np4 4 ok $SHMA "$T/coll_test" skew 100 200 random
# Non-leader alltoall (Kumar et al.) on pretend nodes over verbs: cross teams of one rank per node.
NLA="env COLL_TEST_ALGS=sa,rd,leader"
ARCOLL_NODE_SIZE=2 av verbs_nl_nodes2_matrix_np4 4 ok env COLL_TEST_ALGS=sa,rd "$T/coll_test" matrix
ARCOLL_NODE_SIZE=2 av verbs_nl_nodes2_skew_late_np4 4 ok env COLL_TEST_ALGS=sa,rd \
    "$T/coll_test" skew 150 300 late
# MN-CO (Li et al. 2.5) over verbs on one guest: 3 ranks (owners of unequal rectangles).
av verbs_mnco_sizes_np3 3 ok env COLL_TEST_ALGS=mn_co "$T/coll_test" sizes
# Connections on demand (docs/verbs.md): a process holds RC QPs only to the peers its
# algorithm writes to. 4 ranks on pretend nodes of 2: pap_shm's masters (ranks 0, 2) talk to
# each other only; flat pap needs every peer; eager wires every peer at init. A wrong count
# must fail.
ARCOLL_NODE_SIZE=2 ARCOLL_ALLTOALL_ALG=pap_shm av verbs_qps_pap_shm_np4 4 ok "$T/coll_test" qps 1,0,1,0
ARCOLL_NODE_SIZE=2 ARCOLL_ALLTOALL_ALG=pap av verbs_qps_pap_np4 4 ok "$T/coll_test" qps 3
ARCOLL_NODE_SIZE=2 ARCOLL_ALLTOALL_ALG=pap_shm ARCOLL_VERBS_CONNECT=eager \
    av verbs_qps_eager_np4 4 ok "$T/coll_test" qps 3
ARCOLL_NODE_SIZE=2 ARCOLL_ALLTOALL_ALG=pap_shm av verbs_qps_wrong_count_fails_np4 4 \
    'error:RC QPs after alltoall' "$T/coll_test" qps 3
# Eager wiring with every collective once (env; the matrix's data paths do not depend on when
# a QP was connected, and took 43 s at host load 15).
ARCOLL_VERBS_CONNECT=eager av verbs_eager_env_np3 3 ok "$T/coll_test" env
# The non-leader algorithms talk only to their cross team: nodes - 1 QPs per process at 8
# ranks (pap would need 7); leader only between masters.
ARCOLL_NODE_SIZE=2 ARCOLL_ALLTOALL_ALG=sa av verbs_qps_sa_4x2_np8 8 ok "$T/coll_test" qps 3
ARCOLL_NODE_SIZE=4 ARCOLL_ALLTOALL_ALG=rd av verbs_qps_rd_2x4_np8 8 ok "$T/coll_test" qps 1
ARCOLL_NODE_SIZE=2 ARCOLL_ALLTOALL_ALG=leader av verbs_qps_leader_4x2_np8 8 ok "$T/coll_test" \
    qps 3,0,3,0,3,0,3,0
av verbs_bad_input_np3 3 ok "$T/coll_test" bad
av verbs_realloc_np2 2 ok "$T/coll_test" realloc
# Every size through the zero-copy path (env: 0 B to 1 MiB, in place too), each registration
# failing: the bounce slots serve. (The matrix took 58 s at host load 15; the fallback is below the
# algorithms, and tests/integ runs the matrix on smp.)
ARCOLL_FAULT=reg_fail ARCOLL_PATH=zcopy av verbs_reg_fail_falls_back_np3 3 ok "$T/coll_test_fault" env
# Connection handshakes that lose HELLOs: every other one lost still connects (retransmission;
# env connects every pair of the 3 ranks); all lost must end in a timeout that names the silent
# peer, not a hang.
ARCOLL_FAULT=hello_drop av verbs_hello_drop_np3 3 ok "$T/coll_test_fault" env
ARCOLL_FAULT=hello_drop_all AV_TIMEOUT_MS=3000 av verbs_hello_drop_all_times_out_np2 2 \
    'error:hellos sent, no answer' "$T/coll_test_fault" env
# A wrong rkey must give the documented error (a remote access error), not a hang.
ARCOLL_FAULT=bad_rkey ARCOLL_PATH=zcopy AV_TIMEOUT_MS=5000 \
    av verbs_bad_rkey_np2 2 'error:remote access error' "$T/coll_test_fault" env
# A rank that dies: the others must return an error within the timeout.
AV_TIMEOUT_MS=5000 AV_MPIRUN_ARGS=--enable-recovery av verbs_kill_np4 4 kill:3 "$T/coll_test" kill
# The last rank killed or stopped just before an alltoall (coll_test phasefault; the pair of
# guests runs every phase across its link): on one host the survivors see the killed rank's
# pid gone (PEER), the stopped one only at ARCOLL_TIMEOUT_MS (TIMEOUT), within it + 5 s.
for sig in kill:PEER stop:TIMEOUT; do
    AV_TIMEOUT_MS=3000 AV_MPIRUN_ARGS=--enable-recovery av verbs_phasefault_alltoall_${sig%:*}_np4 \
        4 "kill:3:${sig#*:}" env COLL_PHASE_LINGER=1 "$T/coll_test" phasefault alltoall "${sig%:*}"
done
# No write after return over verbs (docs/protocol.md §6, "Revocation"): the ranks that time
# out while the late rank holds their advertisements fill their receive buffers with a canary,
# which must not change; with a per-call registration (deregistered at the call's end) and a
# cached one (dropped from the cache when the call fails).
for rc in off on; do
    ARCOLL_REGCACHE=$rc av verbs_latewrite_regcache_${rc}_np3 3 \
        "lines:2:CANARY-OK latewrite" "$T/coll_test" latewrite alltoall 1000
done
# The heap MR (one registration over the node heap) cannot be dropped for one call: a writer
# that read the advertisement before the revocation reached it and stalls 2T before its RDMA
# WRITE (ARCOLL_FAULT=zc_stall) must find the key dead (zmem_revoke deregisters the heap MR
# when a call that advertised it fails; a new one serves the next call).
ARCOLL_FAULT=zc_stall ARCOLL_ALLTOALLV_ALG=pap av verbs_stallwrite_heapmr_np3 3 \
    "lines:2:CANARY-OK stallwrite alltoallv (heap)" "$T/coll_test_fault" stallwrite alltoallv 1000
# The same in a schedule's zero-copy message (ring allgather, docs/protocol.md §17): its
# receive buffer is advertised in the heap MR, which the failed call revokes.
ARCOLL_FAULT=zc_stall ARCOLL_ALLGATHER_ALG=ring av verbs_stallwrite_heapmr_ring_np3 3 \
    "lines:2:CANARY-OK stallwrite allgather (heap)" "$T/coll_test_fault" stallwrite allgather 1000
av verbs_bench_np4 4 ok bash -c "'$B/bin/arcoll-bench' -m 2048:4096 -M 0,32 -i 10 -x 2 -v &&
    echo 'bench: 1 passed, 0 failed'"
# One RDMA WRITE through the channel, measured like ib_write_lat / ib_write_bw above.
av verbs_chanperf_np2 2 ok bash -c "'$B/bin/arcoll-chanperf' 65536 1000 &&
    echo 'chanperf: 1 passed, 0 failed'"
ARCOLL_NOTIFY=imm av verbs_imm_chanperf_np2 2 ok bash -c "'$B/bin/arcoll-chanperf' 65536 1000 &&
    echo 'chanperf: 1 passed, 0 failed'"
# The PMPI shim over verbs: an ordinary MPI program's MPI_Alltoall/MPI_Allgather on arcoll,
# a context per communicator (world, a duplicate, two splits), checked against PMPI.
if [ -e "$B/lib/libarcoll_mpi.so" ]; then
    av verbs_shim_np3 3 ok env LD_PRELOAD="$B/lib/libarcoll_mpi.so" "$T/shim_test" shim 4096
fi
# The Open MPI component over verbs (mca_coll_arcoll.so, no preload): stock mpirun with only
# the component's directory set, every served collective on world, a split and a dup, the
# fallbacks, 20 dup/free cycles; the test fails unless the counters show arcoll served them.
if [ -e "$B/lib/openmpi/mca_coll_arcoll.so" ] && [ -x "$T/ompi_coll_test" ]; then
    OCP="$B/lib/openmpi:$(mpicc --showme:libdirs | awk '{print $1}')/openmpi3"
    av verbs_component_np3 3 ok env OMPI_MCA_mca_base_component_path="$OCP" ARCOLL_LOG=info \
        ARCOLL_TUNE="alltoall:0-inf:@arcoll#allgather:0-inf:@arcoll#allreduce:0-inf:@arcoll#allgatherv:0-inf:@arcoll#reduce_scatter:0-inf:@arcoll" \
        "$T/ompi_coll_test" arcoll 20
    # MPI_THREAD_MULTIPLE over verbs: 2 and 4 threads at once, a dup each, every call on arcoll.
    av verbs_component_mt_np2 2 ok env OMPI_MCA_mca_base_component_path="$OCP" \
        ARCOLL_TUNE="alltoall:0-inf:@arcoll#allgather:0-inf:@arcoll#allreduce:0-inf:@arcoll#allgatherv:0-inf:@arcoll#reduce_scatter:0-inf:@arcoll" \
        "$T/ompi_coll_test" multiple 10
    # ... over verbs: the summary line counts the RC QPs its contexts had connected.
    if [[ -z ${VM_ONLY:-} || verbs_component_np3 =~ $VM_ONLY ]]; then
        if grep -q -E 'coll/arcoll\[0\] info: .*; [1-9][0-9]* RC QPs' "$VMOUT/verbs_component_np3.log"; then
            verdict PASS verbs_component_np3_qps "$(sed -n 's/^coll\/arcoll\[0\] info: .*; \([0-9]*\) RC QPs$/rank 0: \1 RC QPs/p' \
                "$VMOUT/verbs_component_np3.log")"
        else
            verdict FAIL verbs_component_np3_qps "no RC QP in the component's summary line"
        fi
    fi
fi
# The other collectives (tests/integ/coll_more.c): alltoallv, allgatherv, reduce_scatter_block
# and allreduce x direct/pap/ring/rdd/rdh x sizes x in place x nonblocking, every byte checked
# (4 ranks: the pair runs v at 4, 2 per node); bad input and cross-rank mismatches; 8 calls in
# flight; team_split (node algorithms on split teams of pretend nodes); 1000 random calls
# under random skew. v runs every algorithm, size, in place and nonblocking, but only every
# 8th dtype x op pair of the reductions per cell, rotating (all pairs on every algorithm).
# A power of two and not (2, 5; 3 repeated 5's uneven rounds; the pair runs 2 and 4).
VOPS="env COLL_V_OPS_EVERY=8"
av verbs_v_np2 2 ok $VOPS "$T/coll_test" v
av verbs_vbad_np3 3 ok "$T/coll_test" vbad
av verbs_inflight_np3 3 ok "$T/coll_test" inflight
ARCOLL_NODE_SIZE=2 av verbs_split_nodes2_np4 4 ok "$T/coll_test" split
av verbs_split_np3 3 ok "$T/coll_test" split
# Teams made and freed, a rank late to each free: nothing is written into a peer's region
# after its barrier (a late write there is a remote access error, the pair's QP lost).
av verbs_churn_np3 3 ok "$T/coll_test" churn 40
av verbs_vskew_np4 4 ok "$T/coll_test" vskew 1000 200
# The logarithmic alltoallv (src/alg/sched/route.c, alg_sloavx.c): sloav, sloavx and pap x the four count
# distributions x sizes x in place x nonblocking x routing limits (ARCOLL_SLOAV_MAX 2k, 0,
# 64k), and blocks of 0, 1 and 1 MiB mixed in one call; sloavx on pretend nodes of 2; 1000
# back-to-back skewed calls of each (vbad above covers their cross-rank mismatches). All of
# it at 2 ranks; at 5 (not a power of two: a partial last round) the limits rotate from cell to
# cell (COLL_A2AV_QUICK: every limit still meets every distribution and size). sloavx on real
# nodes: the pair; 16 ranks' four rounds and the pretend nodes: the in-process matrix.
av verbs_a2av_np2 2 ok "$T/coll_test" a2av
av verbs_a2av_quick_np5 5 ok env COLL_A2AV_QUICK=1 "$T/coll_test" a2av
for alg in sloav sloavx; do
    VSKEW_ALG=$alg av verbs_vskew_${alg}_np4 4 ok "$T/coll_test" vskew 1000 200
done
# The heap registered once (docs/heap.md, "The heap registered on verbs"): zero-copy
# alltoall/allgather on heap buffers allocated afresh for every call while the heap grows,
# every byte checked; no registration for any heap buffer but the heap MR's doublings, mmap
# buffers still per call and through the cache. Through the API and, unmodified malloc,
# through the preload library. The per-rank counts go to guest.log. pap: on one host whose
# ranks share the heap, auto (the default) picks sh_co there, a memcpy with no RDMA at all.
ARCOLL_ALLTOALL_ALG=pap ARCOLL_ALLGATHER_ALG=pap av verbs_heapmr_np3 3 ok "$T/coll_test" heapmr api 6
ARCOLL_ALLTOALL_ALG=pap ARCOLL_ALLGATHER_ALG=pap av verbs_heapmr_preload_np2 2 ok \
    env LD_PRELOAD="$B/lib/libarcoll_heap.so" "$T/coll_test" heapmr preload 4
for n in verbs_heapmr_np3 verbs_heapmr_preload_np2; do
    grep -h '\] heapmr ' "$VMOUT/$n.log" 2>/dev/null
done
# The heap MR's registration fails (fault build): one info line per rank, and the heap
# buffers registered per call, data still checked.
ARCOLL_FAULT=heapmr_fail ARCOLL_LOG=info ARCOLL_ALLTOALL_ALG=pap ARCOLL_ALLGATHER_ALG=pap \
    av verbs_heapmr_fail_falls_back_np2 2 ok "$T/coll_test_fault" heapmr api 4
if [[ -z ${VM_ONLY:-} || verbs_heapmr_fail_logged_once =~ $VM_ONLY ]]; then
    n=$(grep -c 'registering the heap MR for .* failed' "$VMOUT/verbs_heapmr_fail_falls_back_np2.log")
    if [ "$n" = 2 ]; then
        verdict PASS verbs_heapmr_fail_logged_once "$n lines from 2 ranks"
    else
        verdict FAIL verbs_heapmr_fail_logged_once "($n lines from 2 ranks, want 2)"
    fi
fi
# ==== end of arcoll tests ================================================================

step "done"
exit $VM_FAILED
