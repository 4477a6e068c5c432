#!/usr/bin/env bash
# Integration tests: the collectives for real, across processes.
#   mpirun (PMIx bootstrap) at 1, 2, 3, 4 and 8 ranks, a PMIx singleton, forked
#   ranks with caller-supplied callbacks, injected skew, bad input, a killed
#   rank, and the fault-injection build that must be caught corrupting data.
# Usage: tests/integ/run.sh BUILD_DIR [FILTER]; prints "integ: N passed, N failed".
set -u
B=${1:-build}
FILTER=${2:-}
# TEST_SET=asan (make asan): the tests the sanitizer build runs (tests/timing.sh; tests/README.md,
# "Time budget"): the algorithm matrix in one process over the model channel (sim-matrix) and
# the simulator's tests but its scale runs, and one launcher test per family at 2-4 ranks: mpirun, PMIx singleton, forked ranks, TCP
# launcher, pretend nodes, node heap, sh_co, a killed rank, a mismatch. make check runs them all.
TEST_SET_ASAN="sim-matrix* sim-fault-* sim-*-deadlock-reported sim-model-* sim-set-* sim-8-skew-*
    sim-5-alltoall-window* sim-2x* sim-1x16-* sim-16x* sim-nopayload-identical
    sim-landed-skip-same-rows-direct sim-resources-vs-real sim-compare-* sim-calibrate-*
    sim-trends-smoke sim-progress-lines sim-channel-outside-fails sim-internal-* singleton-matrix
    mpirun-3-matrix mpirun-3-bad-input mpirun-3-skew-random
    mpirun-3-v mpirun-3-vbad mpirun-3-inflight mpirun-3-split mpirun-4-a2av mpirun-3-realloc
    shm-4-nodes-2-matrix nl-4-nodes-2-matrix mnco-4-nodes-2-sizes mpirun-2-heap mpirun-4-kill
    shm-4-nodes-2-kill-sloavx
    oob-4-matrix shco-4-check shco-4-sockets2-check tcp-2x2-matrix"
T=$B/tests
LOG=$B/integ-logs
mkdir -p "$LOG"
. "$(dirname "$0")/../timing.sh"
timing_init "$LOG/times.txt"
# Open MPI refuses root and more ranks than cores unless told; CI runs as root on 2 cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# A hang must become a failure: generous per-collective timeout, hard per-test limit.
export ARCOLL_TIMEOUT_MS=${ARCOLL_TIMEOUT_MS:-20000}
MPIRUN="mpirun --oversubscribe --bind-to none"
# Repetitions of the long loops: the sanitizer build (make asan) runs fewer (it looks for memory
# errors, which each code path shows on its first run); make check runs the full counts (1000
# skewed calls, 1000 vskew calls per multi-round algorithm, 15 crashed jobs: 100, then 50,
# then 30, then 15, each cut for the CI time budget, tests/README.md; the named segments
# before memfds leaked 3 names in 10).
SKEW_N=${INTEG_SKEW_CALLS:-1000}
VSKEW_N=${INTEG_VSKEW_CALLS:-1000}
CRASH_N=${INTEG_CRASH_RUNS:-15}
pass=0
fail=0
failed_names=()

# run NAME EXPECT CMD...   EXPECT: ok (exit 0 and "0 failed"), ok:TEXT (and the log names TEXT),
#   fail (must fail), fail:TEXT (must fail naming TEXT), kill N (N KILL-OK lines),
#   text:RE1|RE2... (exit 0, each extended regexp in the output), fails:TEXT (a non-zero exit
#   other than the time limit's, with TEXT in the output), lines N TEXT (N lines with TEXT, and
#   not killed by a time limit: one per rank that must report), shco N (exit 0, "0 failed",
#   N "ran as sh_co" debug lines and no "sh_co ran as pap": sh_co served, not its fallback)
run() {
    local name=$1 expect=$2
    shift 2
    local want_kills=0 want_text=
    if [ "$expect" = kill ]; then
        want_kills=$1
        shift
    elif [ "$expect" = shco ]; then
        want_kills=$1
        shift
    elif [ "$expect" = lines ]; then
        want_kills=$1 want_text=$2
        shift 2
    fi
    if [ -n "$FILTER" ] && [[ "$name" != *$FILTER* ]]; then
        return
    fi
    over_max_np "$name" && return
    not_in_test_set "$name" && return
    local log="$LOG/$name.log" start=$SECONDS rc verdict=FAIL
    timeout 300 "$@" >"$log" 2>&1
    rc=$?
    case $expect in
    ok) [ $rc -eq 0 ] && grep -q " 0 failed" "$log" && verdict=PASS ;;
    ok:*) [ $rc -eq 0 ] && grep -q " 0 failed" "$log" && grep -q "${expect#ok:}" "$log" &&
        verdict=PASS ;;
    fail) [ $rc -ne 0 ] && grep -q "corrupted calls" "$log" && verdict=PASS ;;
    fail:*) [ $rc -ne 0 ] && grep -q "${expect#fail:}" "$log" && verdict=PASS ;;
    kill) [ "$(grep -c KILL-OK "$log")" -eq "$want_kills" ] && verdict=PASS ;;
    lines) [ $rc -ne 124 ] && [ "$(grep -cF -- "$want_text" "$log")" -eq "$want_kills" ] &&
        verdict=PASS ;;
    shco) [ $rc -eq 0 ] && grep -q " 0 failed" "$log" &&
        [ "$(grep -c "ran as sh_co" "$log")" -eq "$want_kills" ] &&
        ! grep -q "sh_co ran as pap" "$log" && verdict=PASS ;;
    text:*)
        verdict=PASS
        [ $rc -eq 0 ] || verdict=FAIL
        local re
        IFS='|' read -ra res <<<"${expect#text:}"
        for re in "${res[@]}"; do
            grep -qE -- "$re" "$log" || { verdict=FAIL; echo "     missing: $re"; }
        done
        ;;
    fails:*) [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -qF -- "${expect#fails:}" "$log" && verdict=PASS ;;
    esac
    printf '%-4s %-36s %3ds  %s\n' "$verdict" "$name" $((SECONDS - start)) \
        "$(grep -E 'passed, [0-9]+ failed|KILL-OK' "$log" | head -1)"
    timing_add "$name" $((SECONDS - start))
    if [ $verdict = PASS ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        failed_names+=("$name")
        echo "---- last lines of $log (exit $rc):"
        tail -n 25 "$log"
        echo "----"
    fi
}

if ! command -v mpirun >/dev/null; then
    echo "integ: mpirun not found (Debian package openmpi-bin): cannot run"
    echo "integ: 0 passed, 1 failed"
    exit 1
fi

# Dependencies point one way (docs/architecture.md, "Layers"): every include and every symbol
# between the library's directories goes down the order of scripts/layers.sh.
run layering-one-way "text:^layering ok" "$(dirname "$0")/../../scripts/layers.sh" "$B"
run singleton-matrix ok "$T/coll_test" matrix
# Rank counts and node shapes beyond these are the in-process matrix's (sim-matrix below);
# here: the same algorithms between real processes over shared memory. At 3 ranks with a
# network's slots, 4 lanes of 16 KiB (shared memory's own are one lane, docs/protocol.md §2):
# 1 MiB messages wrap 64 fragments around the lanes on the real channel.
for n in 1 2 3 4; do
    slots=""
    [ $n = 3 ] && slots="env ARCOLL_BOUNCE_SIZE=64k"
    run "mpirun-$n-matrix" ok $slots $MPIRUN -np $n "$T/coll_test" matrix
done
for n in 2 3 4; do
    run "mpirun-$n-bad-input" ok $MPIRUN -np $n "$T/coll_test" bad
done
# 1000 back-to-back calls per algorithm x path x collective, random delays on
# every rank, or only on the last one (the others run a whole call ahead); at 3 ranks, and
# 8 oversubscribed ranks for the late one (random skew at other counts: the matrix).
run "mpirun-3-skew-random" ok $MPIRUN -np 3 "$T/coll_test" skew $SKEW_N 200 random
for n in 3 8; do
    run "mpirun-$n-skew-late" ok $MPIRUN -np $n "$T/coll_test" skew $SKEW_N 500 late
done
# The other collectives (tests/integ/coll_more.c): alltoallv, allgatherv, reduce_scatter_block
# and allreduce x every algorithm x sizes 0..200000 x in place x blocking or not; bad input and
# disagreements across ranks (a mismatch on every rank, never a hang); 8 calls in flight;
# arcoll_team_split (also on pretend nodes, node algorithms on the new teams); 1000
# back-to-back calls per multi-round algorithm under random skew at a power of two and not.
for n in 1 2 3 4 5 8; do
    run "mpirun-$n-v" ok $MPIRUN -np $n "$T/coll_test" v
done
# Pipe lanes (docs/protocol.md §2, §12) with the slot forced to 1 KiB: a schedule's stream to a
# peer at a pipe distance has a window of 64 fragments, so messages of up to 200000 bytes wrap
# around slot and pipe lanes (every byte checked, every algorithm); and rejections of streams
# whose sender may write 64 fragments before any credit.
for n in 2 4 5; do
    run "pipe-$n-v-slot1k" ok env ARCOLL_BOUNCE_SIZE=1k $MPIRUN -np $n "$T/coll_test" v
done
run pipe-3-vbad-slot1k ok env ARCOLL_BOUNCE_SIZE=1k $MPIRUN -np 3 "$T/coll_test" vbad
# At 3 ranks with 4 lanes of 16 KiB (ARCOLL_BOUNCE_SIZE=64k): rejections of streams whose
# sender may write up to 4 fragments before any credit (docs/protocol.md §8, §14).
for n in 2 3 4 5 8; do
    slots=""
    [ $n = 3 ] && slots="env ARCOLL_BOUNCE_SIZE=64k"
    run "mpirun-$n-vbad" ok $slots $MPIRUN -np $n "$T/coll_test" vbad
done
# Sizes on different paths (copy and zero-copy) or algorithms (a node algorithm and its flat
# fallback above ARCOLL_SHM_MAX) must end in a mismatch on every rank, never the timeout
# (vbad's size kinds; the pretend nodes make masters run the inter-node step). On nodes 1,3
# rank 0 is alone: sloavx's disagreeing block from rank 0 to 1 crosses the masters' step.
for shape in 4:2 8:2 6:1,3; do
    n=${shape%%:*} k=${shape#*:}
    run "vbad-$n-nodes-$k" ok env ARCOLL_NODE_SIZE=$k $MPIRUN -np $n "$T/coll_test" vbad
done
for n in 2 3 4 8; do
    run "mpirun-$n-inflight" ok $MPIRUN -np $n "$T/coll_test" inflight
done
# A smaller window (ARCOLL_WINDOW, 2w banks): 8 calls started still complete, starts wait.
for w in 1 3; do
    run "mpirun-4-inflight-window$w" ok env ARCOLL_WINDOW=$w $MPIRUN -np 4 "$T/coll_test" inflight
done
for n in 1 2 3 5 8; do
    run "mpirun-$n-split" ok $MPIRUN -np $n "$T/coll_test" split
done
run split-8-nodes-2 ok env ARCOLL_NODE_SIZE=2 $MPIRUN -np 8 "$T/coll_test" split
run split-6-nodes-3,1 ok env ARCOLL_NODE_SIZE=3,1 $MPIRUN -np 6 "$T/coll_test" split
# 40 teams made and freed, a rank late to each free: the library's own agreements write
# nothing late (no late advertisement; protocol.md §17). Without that rule: 58-74 per rank.
run mpirun-3-churn ok $MPIRUN -np 3 "$T/coll_test" churn 40
run fork-4-v ok "$T/fork_test" 4 v
for alg in pap direct ring rdd rdh; do
    for n in 4 5; do
        run "mpirun-$n-vskew-$alg" ok env VSKEW_ALG=$alg $MPIRUN -np $n "$T/coll_test" vskew "$VSKEW_N" 300
    done
done
run mpirun-3-vskew-mixed-slow ok $MPIRUN -np 3 "$T/coll_test" vskew 300 3000
# Logarithmic alltoallv (Xu et al.): sloav, sloavx (pretend nodes of 2 and 4, unequal,
# interleaved) and pap, every count distribution, blocks around ARCOLL_SLOAV_MAX, 0/1/1 MiB
# in one call; 1000 back-to-back skewed calls each.
for n in 1 2 3 4 5 8 16; do
    run "mpirun-$n-a2av" ok $MPIRUN -np $n "$T/coll_test" a2av
done
for shape in 8:2 8:4 6:3,1 7:3,2,2 16:4 11:5; do
    n=${shape%%:*} k=${shape#*:}
    run "a2av-$n-nodes-$k" ok env ARCOLL_NODE_SIZE=$k $MPIRUN -np $n "$T/coll_test" a2av
done
# Xu et al.'s two-phase steps (ARCOLL_SLOAV_PHASES=2: a size message, then the data; the
# default sends the data alone and the receiver reads its length from the header).
for n in 5 16; do
    run "mpirun-$n-a2av-2phase" ok env ARCOLL_SLOAV_PHASES=2 $MPIRUN -np $n "$T/coll_test" a2av
done
run a2av-8-nodes-3-2phase ok env ARCOLL_SLOAV_PHASES=2 ARCOLL_NODE_SIZE=3 $MPIRUN -np 8 \
    "$T/coll_test" a2av
for n in 3 8; do
    run "mpirun-$n-vbad-2phase" ok env ARCOLL_SLOAV_PHASES=2 $MPIRUN -np $n "$T/coll_test" vbad
done
for alg in sloav sloavx; do
    run "mpirun-5-vskew-$alg" ok env VSKEW_ALG=$alg ARCOLL_NODE_SIZE=2 $MPIRUN -np 5 \
        "$T/coll_test" vskew "$VSKEW_N" 300
    run "mpirun-16-vskew-$alg" ok env VSKEW_ALG=$alg ARCOLL_NODE_SIZE=4 $MPIRUN -np 16 \
        "$T/coll_test" vskew "$VSKEW_N" 300
done
# MN-CO (Li et al. 2.5): flat over all ranks, two rounds through Morton-order owners, on pretend
# nodes (the schedule does not look at them; the dispatcher and hier do): 0 and 1 B .. 64 KiB per
# block, blocking and not, then 1000 back-to-back skewed calls per path and collective.
MNCO="env COLL_TEST_ALGS=mn_co"
for shape in 2:1 3:2 4:2 6:2 8:2; do
    n=${shape%%:*} k=${shape#*:}
    run "mnco-$n-nodes-$k-sizes" ok $MNCO ARCOLL_NODE_SIZE=$k $MPIRUN -np $n "$T/coll_test" sizes
done
run mnco-8-nodes-2-skew-random ok $MNCO ARCOLL_NODE_SIZE=2 $MPIRUN -np 8 "$T/coll_test" skew \
    $SKEW_N 200 random
run mnco-6-nodes-3-skew-late ok $MNCO ARCOLL_NODE_SIZE=3 $MPIRUN -np 6 "$T/coll_test" skew \
    $SKEW_N 500 late
# Bad input and a size that differs across ranks (a mismatch, never an overrun or a hang).
run mnco-4-bad-input ok env ARCOLL_ALLTOALL_ALG=mn_co ARCOLL_ALLGATHER_ALG=mn_co $MPIRUN -np 4 \
    "$T/coll_test" bad
# Algorithm and path chosen by the environment, as a user would, at 1 to 8 ranks.
for n in 1 2 3 8; do
    for cfg in direct:copy direct:zcopy pap:copy pap:zcopy pap_shm:auto; do
        alg=${cfg%:*} path=${cfg#*:}
        run "mpirun-$n-env-$alg-$path" ok env ARCOLL_ALLTOALL_ALG=$alg ARCOLL_ALLGATHER_ALG=$alg \
            ARCOLL_PATH=$path $MPIRUN -np $n "$T/coll_test" env
    done
done
# Shared-memory aware algorithms on pretend nodes (ARCOLL_NODE_SIZE): equal nodes of 2 and
# 4, unequal nodes (3,1 and 3,2,1: padded areas), non-consecutive node members (the
# interleaved team of the matrix), back-to-back skew, bad input and a killed rank.
SHM="env COLL_TEST_ALGS=shm_direct,pap_shm"
# Equal and unequal nodes between processes (more shapes: the in-process matrix).
for shape in 4:2 6:3,1; do
    n=${shape%%:*} k=${shape#*:}
    run "shm-$n-nodes-$k-matrix" ok $SHM ARCOLL_NODE_SIZE=$k $MPIRUN -np $n "$T/coll_test" matrix
done
for shape in 8:4 5:3,1; do
    n=${shape%%:*} k=${shape#*:}
    run "shm-$n-nodes-$k-skew-random" ok $SHM ARCOLL_NODE_SIZE=$k $MPIRUN -np $n \
        "$T/coll_test" skew $SKEW_N 200 random
    run "shm-$n-nodes-$k-skew-late" ok $SHM ARCOLL_NODE_SIZE=$k $MPIRUN -np $n \
        "$T/coll_test" skew $SKEW_N 500 late
done
# mn_cox: a size mismatch found by its masters' schedule (mn_co) between processes.
for alg in shm_direct pap_shm mn_cox; do
    run "shm-4-nodes-2-bad-input-$alg" ok env ARCOLL_NODE_SIZE=2 ARCOLL_ALLTOALL_ALG=$alg \
        ARCOLL_ALLGATHER_ALG=$alg $MPIRUN -np 4 "$T/coll_test" bad
done
run shm-4-nodes-2-kill kill 3 env ARCOLL_NODE_SIZE=2 ARCOLL_ALLTOALL_ALG=pap_shm \
    ARCOLL_TIMEOUT_MS=5000 $MPIRUN --enable-recovery -np 4 "$T/coll_test" kill
# sloavx (alltoallv through the node segment): the killed rank's master sees its pid, publishes
# PEER to its node and fails its masters' call, which the other node's master learns from and
# publishes to its own node: every survivor PEER (not the 5 s timeout, which kill N accepts).
run shm-4-nodes-2-kill-sloavx lines 3 "KILL-OK a peer process is gone" env ARCOLL_NODE_SIZE=2 ARCOLL_ALLTOALLV_ALG=sloavx KILL_V=1 \
    ARCOLL_TIMEOUT_MS=5000 $MPIRUN --enable-recovery -np 4 "$T/coll_test" kill
# Shared segments cannot leak or be hijacked (docs/reliability.md "Shared memory"): 30 jobs
# with a rank SIGKILLed in setup or at a random moment of the loop, then a clean one, leave
# no arcoll* name in /dev/shm (mpirun exits at once when a rank dies: sigkill_timeout 0).
run shm-crash-kill-$CRASH_N-no-leak "text:shm-crash: [0-9]+ kills in $CRASH_N runs, 0 leaked names" \
    "$(dirname "$0")/shm_crash.sh" "$CRASH_N" coll_test env ARCOLL_TIMEOUT_MS=2000 $SHM \
    $MPIRUN --mca odls_base_sigkill_timeout 0 -np 2 "$T/coll_test" skew 3000 20 random
# The named fallback: each rank pre-creates the names it would have had before random names
# (arcoll.<its pid>.<0-2>), and init must still succeed.
run shm-named-planted-names ok env ARCOLL_SMP_SEG=named $SHM $MPIRUN -np 2 sh -c \
    'for t in 0 1 2; do : >/dev/shm/arcoll.$$.$t; done; exec "$0" "$@"' "$T/coll_test" skew 200 20 random
# A stale name of a dead pid: init on the named fallback removes it, and so does
# arcoll_info --cleanup (which also removes the planted names above, now stale).
run shm-named-init-sweeps-stale ok bash -c 'f=/dev/shm/arcoll.$(sh -c "echo \$\$").0; : >$f &&
    "$0" "$@" && [ ! -e $f ]' env ARCOLL_SMP_SEG=named $MPIRUN -np 2 "$T/coll_test" skew 50 20 random
run shm-cleanup-removes-stale "text:removed /dev/shm/arcoll\.[0-9]+\.0 |^gone$" bash -c \
    'f=/dev/shm/arcoll.$(sh -c "echo \$\$").0; : >$f && "$0" --cleanup && [ ! -e $f ] && echo gone' \
    "$B/bin/arcoll_info"
# Degraded environments (issue 40 item 6; docs/reliability.md): a seccomp filter that fails
# process_vm_writev (container runtimes' default without CAP_SYS_PTRACE), or ranks that are not
# dumpable and lack CAP_SYS_PTRACE (no /proc/<pid>/fd of a peer, no CMA): init must succeed
# on the copy path and named segments, say so in one warning, check every byte, and leave no
# name behind. DEGRADE is read by tests/integ/degrade_preload.c.
DG=$B/tests/libdegrade.so
run degraded-3-no-cma ok:"warning: smp: process_vm_writev from rank" $MPIRUN -np 3 env \
    LD_PRELOAD="$DG" DEGRADE=cma ARCOLL_PATH=auto "$T/coll_test" env
run degraded-3-no-proc ok:"warning: smp: rank 0 cannot open rank 1's memfd through /proc" \
    bash -c '"$@" && ! ls /dev/shm | grep -q "^arcoll\."' _ $MPIRUN -np 3 env \
    LD_PRELOAD="$DG" DEGRADE=proc "$T/coll_test" env
# Node segments with the epoch check disabled must be caught (one node: no flat phase 2).
run fault-no-epoch-shm-is-caught fail $SHM ARCOLL_FAULT=no_epoch ARCOLL_TIMEOUT_MS=3000 \
    $MPIRUN -np 4 "$T/coll_test_fault" skew 300 100 late
# Non-leader alltoall (Kumar et al.) and the leader-based one on pretend nodes: node-major teams
# (the step into the user's buffer) and the interleaved team of the matrix (through the
# receive slices), 3 nodes, back-to-back skew, every algorithm changing call by call over
# the same node segments (mix), bad input, a killed rank, and unequal nodes (fallback).
NL="env COLL_TEST_ALGS=sa,sa_direct,rd,leader"
for shape in 4:2; do
    n=${shape%%:*} k=${shape#*:}
    run "nl-$n-nodes-$k-matrix" ok $NL ARCOLL_NODE_SIZE=$k $MPIRUN -np $n "$T/coll_test" matrix
done
run "nl-6-nodes-3,1-falls-back" "ok:sa runs as pap on this team (unequal ranks per node)" \
    env ARCOLL_ALLTOALL_ALG=sa ARCOLL_LOG=info ARCOLL_NODE_SIZE=3,1 $MPIRUN -np 6 "$T/coll_test" env
for shape in 8:4; do
    n=${shape%%:*} k=${shape#*:}
    run "nl-$n-nodes-$k-skew-random" ok $NL ARCOLL_NODE_SIZE=$k $MPIRUN -np $n \
        "$T/coll_test" skew $SKEW_N 200 random
    run "nl-$n-nodes-$k-skew-late" ok $NL ARCOLL_NODE_SIZE=$k $MPIRUN -np $n \
        "$T/coll_test" skew $SKEW_N 500 late
    run "all-$n-nodes-$k-skew-mix" ok env COLL_TEST_ALGS=direct,pap,shm_direct,pap_shm,sa,sa_direct,rd,leader \
        ARCOLL_NODE_SIZE=$k $MPIRUN -np $n "$T/coll_test" skew $SKEW_N 200 mix
done
for alg in sa sa_direct rd; do
    run "nl-4-nodes-2-bad-input-$alg" ok env ARCOLL_NODE_SIZE=2 ARCOLL_ALLTOALL_ALG=$alg \
        $MPIRUN -np 4 "$T/coll_test" bad
done
for alg in sa rd; do
    run "nl-4-nodes-2-kill-$alg" kill 3 env ARCOLL_NODE_SIZE=2 ARCOLL_ALLTOALL_ALG=$alg \
        ARCOLL_TIMEOUT_MS=5000 $MPIRUN --enable-recovery -np 4 "$T/coll_test" kill
done
run fault-no-epoch-nl-is-caught fail env COLL_TEST_ALGS=sa,rd ARCOLL_NODE_SIZE=2 \
    ARCOLL_FAULT=no_epoch ARCOLL_TIMEOUT_MS=3000 $MPIRUN -np 4 "$T/coll_test_fault" skew 300 100 late
# ARCOLL_*_ALG=auto: the tuning table picks by size and team shape (the matrix's sub-teams
# have other shapes than the world); arcoll_info shows the choice; bad or differing tables fail
# at init.
TUNE="alltoall:0-8:@pap_shm#alltoall:8-4k:ppn=2:@shm_direct#alltoall:4k-inf:@direct#"
TUNE+="allgather:0-2:@direct#allgather:2-inf:nodes=2-inf:@pap_shm"
AUTO="env COLL_TEST_ALGS=auto ARCOLL_ALLTOALL_ALG=auto ARCOLL_ALLGATHER_ALG=auto"
run tune-4-nodes-2-matrix ok $AUTO ARCOLL_NODE_SIZE=2 ARCOLL_TUNE="$TUNE" $MPIRUN -np 4 \
    "$T/coll_test" matrix
# A flat algorithm's line ends in its path ([copy] or [zcopy], from the path rules or the threshold).
P=' \[z?copy\]$'
run tune-4-nodes-2-info "text:alltoall +auto +1 B-8 B +pap_shm$|alltoall +auto +8 B-4 KiB +shm_direct$|\
alltoall +auto +4 KiB-[0-9]+ [KM]iB +direct$P|allgather +auto +1 B-2 B +direct$P|\
allgather +auto +2 B-65537 B +pap_shm$|\
allgather +auto +65537 B-[^p]+pap_shm \(falls back to pap: messages above ARCOLL_SHM_MAX|\
ARCOLL_TUNE\): ARCOLL_TUNE string: 5 rules" \
    $AUTO ARCOLL_NODE_SIZE=2 ARCOLL_TUNE="$TUNE" $MPIRUN -np 4 "$B/bin/arcoll_info"
# Unequal nodes, rules from a file: sa cannot run there, so auto passes its rule over.
printf '; integ: unequal nodes\n\nalltoall:0-1k:@sa # alltoall:0-64:@shm_direct\n%s\n' \
    "allgather:0-inf:ppn=3:@shm_direct" >"$LOG/tune-file.txt"
run tune-4-nodes-3,1-file-matrix ok $AUTO ARCOLL_NODE_SIZE=3,1 ARCOLL_TUNE="file:$LOG/tune-file.txt" \
    $MPIRUN -np 4 "$T/coll_test" matrix
run tune-4-nodes-3,1-file-info "text:alltoall +auto +1 B-64 B +shm_direct$|alltoall +auto +64 B-[0-9]+ [KM]iB +pap$P|\
allgather +auto +1 B-65537 B +shm_direct$|tune-file.txt: 3 rules" \
    $AUTO ARCOLL_NODE_SIZE=3,1 ARCOLL_TUNE="file:$LOG/tune-file.txt" $MPIRUN -np 4 "$B/bin/arcoll_info"
# Path rules: over= is the job's shape, agreed at init (4 ranks oversubscribe a host of fewer
# than 4 processing units); both ends of every pair take the same path, so the data checks out.
# The user's rules come first; where none matches, the default table's (zero-copy from 32 KiB
# with ranks <= cores on smp) answer.
PT='alltoall:0-inf:over=yes:@copy#alltoall:0-16k:over=no:@zcopy#alltoall:16k-128k:over=no:@copy#'
PT+='allgather:0-inf:@copy'
# Below 512 B per peer with ranks <= cores, the default serve rules keep the shim's calls in MPI.
M=" \(the shim: MPI's\)"
run tune-path-2-info "text:alltoall +auto +1 B-512 B +pap$M \[zcopy\]$|alltoall +auto +512 B-16 KiB +pap \[zcopy\]$|\
alltoall +auto +16 KiB-128 KiB +pap \[copy\]$|alltoall +auto +128 KiB-inf +pap \[zcopy\]$|\
allgather +auto +1 B-512 B +pap$M \[copy\]$|allgather +auto +512 B-inf +pap \[copy\]$" \
    env ARCOLL_TUNE="$PT" $MPIRUN -np 2 "$B/bin/arcoll_info"
run tune-path-2-default-info "text:alltoall +auto +1 B-512 B +pap$M \[copy\]$|alltoall +auto +512 B-32 KiB +pap \[copy\]$|\
alltoall +auto +32 KiB-inf +pap \[zcopy\]$|allgather +auto +1 B-512 B +pap$M \[copy\]$|\
allgather +auto +512 B-32 KiB +pap \[copy\]$|allgather +auto +32 KiB-inf +pap \[zcopy\]$" \
    $MPIRUN -np 2 "$B/bin/arcoll_info"
# A user's @arcoll rule before the default's @mpi keeps the calls in arcoll.
run tune-serve-2-arcoll-info "text:alltoall +auto +1 B-32 KiB +pap \[copy\]$|allgather +auto +1 B-512 B +pap$M \[copy\]$" \
    env ARCOLL_TUNE="alltoall:0-inf:@arcoll" $MPIRUN -np 2 "$B/bin/arcoll_info"
if [ "$(nproc)" -lt 4 ]; then
    run tune-path-4-over-info "text:alltoall +auto +1 B-inf +pap \[copy\]$" env ARCOLL_TUNE="$PT" \
        $MPIRUN -np 4 "$B/bin/arcoll_info"
    run tune-path-4-over-default-info "text:alltoall +auto +1 B-32 KiB +pap \[copy\]$|\
alltoall +auto +32 KiB-inf +pap \[zcopy\]$|allgather +auto +32 KiB-inf +pap \[zcopy\]$" \
        $MPIRUN -np 4 "$B/bin/arcoll_info"
fi
# arcoll-bench compares paths side by side (ALG/PATH, data checked); arcoll-tune.sh writes
# rules that a job then reads (a tiny, noisy sweep: which rules it finds is not checked, only
# that both tables are in the file and the file is valid).
run bench-paths-2 ok $MPIRUN -np 2 "$B/bin/arcoll-bench" -t both -a pap/copy,pap/zcopy,direct \
    -m 16k:64k -M 0,8 -i 20 -x 2 -c -q
run bench-paths-bad-fails "fails:--alg pap/fast: expected ALG or ALG/copy|zcopy|auto" \
    $MPIRUN -np 2 "$B/bin/arcoll-bench" -a pap/fast -m 1k -i 2
run tune-tool-2 "text:^; np=2 over=no alltoall: size|^; np=2 over=no allgather: size|\
ARCOLL_TUNE\): file .*tool.tune: [0-4] rules?," \
    sh -c "TUNE_SIZES=8k:128k TUNE_REPS=1 TUNE_ITERS=20 bench/arcoll-tune.sh $B $LOG/tool.tune 2 &&
        cat $LOG/tool.tune && ARCOLL_TUNE=file:$LOG/tool.tune $MPIRUN -np 2 $B/bin/arcoll_info"
run tune-path-2-matrix ok env ARCOLL_TUNE="$PT" $MPIRUN -np 2 "$T/coll_test" matrix
run tune-bad-rule-fails 'fails:ARCOLL_TUNE rule 2 "allgather:0-inf:@sa": sa does not serve allgather' \
    env ARCOLL_TUNE="alltoall:0-256:@pap#allgather:0-inf:@sa" $MPIRUN -np 2 "$T/coll_test" matrix
run tune-differs-across-ranks-fails "fails:rank 1 has ARCOLL_TUNE different from rank 0" \
    $MPIRUN -np 1 env ARCOLL_TUNE=alltoall:0-1:@direct "$T/coll_test" matrix : -np 1 "$T/coll_test" matrix
run mpirun-3-realloc ok $MPIRUN -np 3 "$T/coll_test" realloc
# The node heap: every rank reads every other's heap buffers through their owner's pointers
# (docs/heap.md); every rank in slot 0 must leave it private, and say why.
run mpirun-2-heap ok $MPIRUN -np 2 "$T/coll_test" heap
# libarcoll_heap.so alone (not under a sanitizer, whose malloc it cannot replace).
if ldd "$T/heap_preload_test" | grep -q libasan; then
    echo "SKIP heap-preload: a sanitizer build"
else
    run heap-preload ok env LD_PRELOAD="$B/lib/libarcoll_heap.so" ARCOLL_HEAP_SIZE=64m \
        ARCOLL_HEAP_HUGE=1m "$T/heap_preload_test"
    run heap-preload-absent-is-caught fail:"is in the heap" "$T/heap_preload_test"
    # Disagreements across ranks (vbad) with every buffer in the node heap: the schedules'
    # messages from 4 KiB meet by rendezvous (docs/protocol.md §17), so each kind of
    # disagreement must end in a mismatch on that path too, never a hang.
    run mpirun-3-vbad-heap ok env LD_PRELOAD="$B/lib/libarcoll_heap.so" $MPIRUN -np 3 \
        "$T/coll_test" vbad
fi
run mpirun-4-heap ok $MPIRUN -np 4 "$T/coll_test" heap
# Zero-copy calls on heap buffers reallocated per call: smp makes no heap MR (the heap MR's
# counts are checked over verbs in the guests: tests/vm), every byte checked.
run mpirun-3-heapmr-smp ok $MPIRUN -np 3 "$T/coll_test" heapmr api 10
# sh_co through the API on heap buffers (arcoll_heap_malloc): every call of the mode, on every
# rank, must be served by sh_co (its debug line per call), none by its pap fallback;
# 2 x (6 sizes + ITERS skewed calls) per rank.
SHCO_ENV="-x ARCOLL_LOG=debug -x ARCOLL_ALLTOALL_ALG=sh_co -x ARCOLL_ALLGATHER_ALG=sh_co"
for n in 2 3 4 6 8; do
    run "mpirun-$n-heap-shco" shco $((n * 2 * (6 + 20))) $MPIRUN -np $n $SHCO_ENV \
        "$T/coll_test" heapcoll 20 100
done
run mpirun-4-heap-shco-skew shco $((4 * 2 * (6 + SKEW_N))) $MPIRUN -np 4 $SHCO_ENV \
    "$T/coll_test" heapcoll "$SKEW_N" 200
# The check must see a fallback: ranks 2 and 3 past ARCOLL_HEAP_SLOTS have private heaps, so
# every rank's calls run as pap (right data, but not sh_co).
run mpirun-4-heap-shco-fallback-is-seen "text:sh_co ran as pap|0 failed" $MPIRUN -np 4 \
    $SHCO_ENV -x ARCOLL_HEAP_SLOTS=2 "$T/coll_test" heapcoll 20 100
# Which algorithm served, by arcoll_context_counters (coll_test heapauto): auto picks sh_co where
# the heap is shared (2 ranks: ranks <= cores; 4: oversubscribed, the other rules), sh_co counted
# on heap buffers and a fallback on malloc'd ones; forced sh_co too; with a private heap (every
# rank in slot 0) auto never tries it and forced sh_co always falls back.
for n in 2 4; do
    run "mpirun-$n-heap-auto" ok $MPIRUN -np $n -x ARCOLL_ALLTOALL_ALG=auto \
        -x ARCOLL_ALLGATHER_ALG=auto "$T/coll_test" heapauto shared
done
run mpirun-2-heap-auto-forced ok $MPIRUN -np 2 -x ARCOLL_ALLTOALL_ALG=sh_co \
    -x ARCOLL_ALLGATHER_ALG=sh_co "$T/coll_test" heapauto shared
run mpirun-2-heap-auto-private ok $MPIRUN -np 2 -x ARCOLL_HEAP_SLOT=0 -x ARCOLL_ALLTOALL_ALG=auto \
    -x ARCOLL_ALLGATHER_ALG=auto "$T/coll_test" heapauto private
run mpirun-2-heap-auto-private-forced ok $MPIRUN -np 2 -x ARCOLL_HEAP_SLOT=0 \
    -x ARCOLL_ALLTOALL_ALG=sh_co -x ARCOLL_ALLGATHER_ALG=sh_co "$T/coll_test" heapauto private
# The counter check must be able to fail: told the heap is private when it is shared.
run mpirun-2-heap-auto-wrong-is-caught fail:"want 0, 1 and 0" $MPIRUN -np 2 \
    -x ARCOLL_ALLTOALL_ALG=sh_co -x ARCOLL_ALLGATHER_ALG=sh_co "$T/coll_test" heapauto private
run mpirun-2-heap-private "ok:same slot" $MPIRUN -np 2 -x ARCOLL_HEAP_SLOT=0 -x ARCOLL_LOG=info \
    "$T/coll_test" heap private
# Shared memory has no QPs: arcoll_context_resources says 0 and counts shared bytes; a wrong
# expectation must fail (the test can fail).
run mpirun-4-qps-smp ok env ARCOLL_NODE_SIZE=2 ARCOLL_ALLTOALL_ALG=pap_shm $MPIRUN -np 4 \
    "$T/coll_test" qps 0
run mpirun-2-qps-wrong-count-fails 'fail:RC QPs after alltoall' $MPIRUN -np 2 "$T/coll_test" qps 1
# Zero-copy unavailable: the copy path must serve every size.
run mpirun-2-matrix-no-cma ok env ARCOLL_SMP_CMA=off $MPIRUN -np 2 "$T/coll_test" matrix
# The test must be able to fail: with the epoch check disabled it has to see corruption.
# One bank for all calls: eight calls in flight overwrite each other's slots, which the epoch
# check turns into a timeout rather than wrong data (docs/protocol.md §5).
run fault-one-bank-is-caught 'fails:timed out' env ARCOLL_FAULT=one_bank ARCOLL_TIMEOUT_MS=3000 \
    $MPIRUN -np 3 "$T/coll_test_fault" inflight
run fault-no-epoch-is-caught fail env ARCOLL_FAULT=no_epoch ARCOLL_TIMEOUT_MS=3000 \
    $MPIRUN -np 4 "$T/coll_test_fault" skew 300 100 late
# A receive buffer that cannot be registered: zero-copy falls back to bounce slots.
run zcopy-reg-fail-falls-back ok env ARCOLL_FAULT=reg_fail $MPIRUN -np 3 \
    "$T/coll_test_fault" matrix
# A rank that dies: the others must return an error, well within the timeout.
run mpirun-4-kill kill 3 env ARCOLL_TIMEOUT_MS=5000 $MPIRUN --enable-recovery -np 4 \
    "$T/coll_test" kill
# A rank that fails a call for a reason only it sees (a transport error, injected) tells its
# peers through its failure word: the rank still waiting for its data fails within 2 s, not at
# the 20 s timeout, although the failed rank stays alive (docs/protocol.md §8).
run failtell-4 lines 4 "TOLD failtell: " timeout 60 env ARCOLL_TIMEOUT_MS=20000 \
    ARCOLL_FAULT=fail_call $MPIRUN -np 4 "$T/coll_test_fault" failtell
# No write after return (issue 40 item 1): a rank 1 s late to a zero-copy call must not write
# into the receive buffers of the ranks that timed out at 0.5 s (the test sets the timeout after
# init); they fill them with a canary at once and check it 1 s later (docs/protocol.md §6,
# "Revocation"; before: 261125 bytes changed).
for c in alltoall alltoallv; do
    run "latewrite-3-$c" lines 2 "CANARY-OK latewrite" timeout 60 \
        $MPIRUN -np 3 "$T/coll_test" latewrite $c 500
done
# The same for sh_co on node-heap buffers, where every rank copies a share of the blocks
# between the others' buffers (§15: before, the late rank copied its share into a returned
# rank's buffer, 261125 bytes), and for alltoallv on them, whose peers memcpy into buffers
# advertised by address (§6, "Heap buffers").
run latewrite-3-shco-alltoall lines 2 "CANARY-OK latewrite" timeout 60 \
    $MPIRUN -np 3 "$T/coll_test" heaplatewrite alltoall 500
run latewrite-3-heap-alltoallv lines 2 "CANARY-OK latewrite alltoallv (heap)" timeout 60 \
    $MPIRUN -np 3 "$T/coll_test" heaplatewrite alltoallv 500
# Two ranks, 64 KiB blocks: sh_co's column share (each copies into its own buffer, §15).
# The late rank only reads the returned one's send buffer (overwritten on return), so the
# canary cannot change here; what this holds is that the pull runs under the fault and the
# late rank's call fails (the CHECK in test_latewrite) rather than returning stale bytes.
run latewrite-2-shco-pull lines 2 "-OK latewrite alltoall" timeout 60 \
    $MPIRUN -np 2 "$T/coll_test" heaplatewrite alltoall 500 65536
# A writer that is on time but stalls (stopped, descheduled) for 2T between its last look at
# the advertisement and its memcpy into the heap buffer (ARCOLL_FAULT=zc_stall): the receiver
# it stalls on must wait for that copy before it returns, however long (§6, "Revocation";
# before: it gave up at ARCOLL_TIMEOUT_MS and the copy landed after the return).
run stallwrite-3-heap-alltoallv lines 2 "CANARY-OK stallwrite alltoallv (heap)" timeout 60 \
    env ARCOLL_FAULT=zc_stall $MPIRUN -np 3 "$T/coll_test_fault" stallwrite alltoallv 500
# The same stall in a schedule's zero-copy message (ring allgather, 256 KiB blocks written
# into the heap buffers by address, docs/protocol.md §17).
run stallwrite-3-heap-ring lines 2 "CANARY-OK stallwrite allgather (heap)" timeout 60 \
    env ARCOLL_FAULT=zc_stall ARCOLL_ALLGATHER_ALG=ring $MPIRUN -np 3 "$T/coll_test_fault" \
    stallwrite allgather 500
# Faults outside the data path (docs/reliability.md): every surviving rank ends within
# ARCOLL_TIMEOUT_MS (+ 5 s, checked by coll_test; timeout 30 proves no hang). A setting that
# does not parse on rank 1 only, and one that differs on rank 1 only, fail every rank naming it.
PF="timeout 30 env ARCOLL_TIMEOUT_MS=3000 $MPIRUN --enable-recovery"
run init-bad-setting-rank1 lines 3 "arcoll_init: invalid configuration" $PF \
    -np 1 "$T/coll_test" env : -np 1 env ARCOLL_PATH=bogus "$T/coll_test" env : -np 1 "$T/coll_test" env
run init-bad-setting-names-rank1 lines 2 "configuration: arcoll_init: rank 1 has an invalid ARCOLL_" $PF \
    -np 1 "$T/coll_test" env : -np 1 env ARCOLL_PATH=bogus "$T/coll_test" env : -np 1 "$T/coll_test" env
run init-differing-setting lines 3 "init: invalid configuration: arcoll_init: rank 1 has ARCOLL_PATH different from rank 0" \
    $PF -np 1 "$T/coll_test" env : -np 1 env ARCOLL_PATH=copy "$T/coll_test" env : -np 1 "$T/coll_test" env
# The last rank kills or stops itself just before the phase. Each survivor must report the
# documented code within ARCOLL_TIMEOUT_MS + 5 s (docs/reliability.md): a stopped rank is seen
# at the timeout (TIMEOUT), a killed one by its pid (PEER), but in init, before the pids are
# exchanged (TIMEOUT). After a stop the survivors stay until every one has met its timeout
# (COLL_PHASE_LINGER), or one of them may see the other exit first (PEER) and report that.
phase_code() { [ "$2" = kill ] && [ "$1" != init ] && echo PEER || echo TIMEOUT; }
phase_env() { [ "$1" = stop ] && echo COLL_PHASE_LINGER=1 || echo COLL_PHASE_NO_LINGER=1; }
for phase in init create destroy finalize; do
    for sig in kill stop; do
        run "phasefault-3-$phase-$sig" lines 2 "KILL-OK phasefault $phase: $(phase_code $phase $sig) (" \
            $PF -np 3 env "$(phase_env $sig)" "$T/coll_test" phasefault $phase $sig
    done
done
# ARCOLL_PROFILE's exchanges at finalize run over the world team, not PMIx: a rank gone
# before them still lets every survivor end within the deadline, its profile written.
PD=$(mktemp -d)
for sig in kill stop; do
    run "phasefault-3-finalize-$sig-profile" lines 2 \
        "KILL-OK phasefault finalize: $(phase_code finalize $sig) (" env ARCOLL_PROFILE="$PD/prof-$sig" \
        $PF -np 3 env "$(phase_env $sig)" "$T/coll_test" phasefault finalize $sig
    run "phasefault-3-finalize-$sig-profile-written" "text:^2 profiles$" bash -c \
        'echo "$(ls "$0".0 "$0".1 2>/dev/null | wc -l) profiles"' "$PD/prof-$sig"
done
rm -rf "$PD"
# Caller-supplied bootstrap callbacks (an embedding runtime), forked ranks.
if [ -x "$T/fork_test" ]; then
    run oob-4-matrix ok "$T/fork_test" 4 matrix
    run oob-5-skew-late ok "$T/fork_test" 5 skew 500 200 late
    run oob-3-bad-input ok "$T/fork_test" 3 bad
    run oob-4-kill kill 3 env ARCOLL_TIMEOUT_MS=5000 "$T/fork_test" 4 kill
    # sh_co over a same-address region the launcher maps before the fork (shco_test.c).
    for n in 2 3 4 6 8; do
        run "shco-$n-check" ok "$T/fork_test" $n shco check
    done
    run shco-3-skew ok "$T/fork_test" 3 shco skew "$SKEW_N" 200
    run shco-4-skew ok "$T/fork_test" 4 shco skew "$SKEW_N" 200
    run shco-8-skew ok "$T/fork_test" 8 shco skew "$SKEW_N" 200
    run shco-4-skew-mix ok "$T/fork_test" 4 shco skew "$SKEW_N" 200 mix
    run shco-5-skew-late ok "$T/fork_test" 5 shco skew "$SKEW_N" 200 late
    # SH-NUMA-CO: sh_co on pretend sockets of ARCOLL_SOCKET_SIZE consecutive ranks (2 sockets,
    # 3 at 6 ranks, unequal 3 + 1 at 4): check (sizes, in place, mismatch, outside-region
    # fallback, timeout, calls in flight) and 1000 skewed calls.
    SOCK="ok:sh_co: [0-9]* sockets on the node: SH-NUMA-CO order"
    for n in 2 4 6 8; do
        run "shco-$n-sockets2-check" "$SOCK" env ARCOLL_LOG=info ARCOLL_SOCKET_SIZE=$((n / 2)) \
            "$T/fork_test" $n shco check
    done
    run shco-6-sockets3-check "$SOCK" env ARCOLL_LOG=info ARCOLL_SOCKET_SIZE=2 \
        "$T/fork_test" 6 shco check
    run shco-4-sockets3+1-check "$SOCK" env ARCOLL_LOG=info ARCOLL_SOCKET_SIZE=3 \
        "$T/fork_test" 4 shco check
    run shco-4-sockets2-skew ok env ARCOLL_SOCKET_SIZE=2 "$T/fork_test" 4 shco skew "$SKEW_N" 200
    run shco-6-sockets3-skew ok env ARCOLL_SOCKET_SIZE=2 "$T/fork_test" 6 shco skew "$SKEW_N" 200
    run shco-8-sockets2-skew ok env ARCOLL_SOCKET_SIZE=4 "$T/fork_test" 8 shco skew "$SKEW_N" 200
    run shco-4-sockets3+1-skew ok env ARCOLL_SOCKET_SIZE=3 "$T/fork_test" 4 shco skew "$SKEW_N" 200
    run shco-5-sockets2-skew-late ok env ARCOLL_SOCKET_SIZE=3 \
        "$T/fork_test" 5 shco skew "$SKEW_N" 200 late
    # A rank killed mid-run (buffers outside any region: each call goes on as pap).
    run shco-4-kill kill 3 env ARCOLL_TIMEOUT_MS=5000 ARCOLL_ALLTOALL_ALG=sh_co \
        "$T/fork_test" 4 kill
    # Ranks on two (pretend) nodes: sh_co is unfit and runs as pap (and auto cannot pick it).
    run shco-4-two-nodes-unfit "ok:sh_co runs as pap on this team" env ARCOLL_LOG=info \
        ARCOLL_NODE_SIZE=2 ARCOLL_ALLTOALL_ALG=sh_co ARCOLL_ALLGATHER_ALG=sh_co \
        "$T/fork_test" 4 env
fi
# Two launchers standing in for two nodes, bootstrap callbacks over loopback TCP.
if [ -x "$T/tcp_launch" ]; then
    port=$((20000 + RANDOM % 20000))
    run tcp-2x2-matrix ok bash -c "'$T/tcp_launch' --nodes 2 --node 1 --ppn 2 \
        --server 127.0.0.1:$port -- matrix & '$T/tcp_launch' --nodes 2 --node 0 --ppn 2 \
        --server 127.0.0.1:$port -- matrix; a=\$?; wait \$!; b=\$?; exit \$((a | b))"
    # A rank stopped before init: its peers wait in the launcher's first bootstrap round,
    # which --round-timeout must end after 3 s (before, only the stopped rank's death at 6 s).
    port=$((port + 1))
    TL="'$T/tcp_launch' --nodes 2 --ppn 2 --server 127.0.0.1:$port --round-timeout 3"
    run tcp-2x2-phasefault-init-stop lines 3 "did not come within the round timeout" \
        env ARCOLL_TIMEOUT_MS=3000 bash -c "$TL --node 1 -- phasefault init stop &
        $TL --node 0 -- phasefault init stop; a=\$?; wait \$!; b=\$?; exit \$((a | b))"
fi
# The PAP profiler: ARCOLL_PROFILE runs, arcoll-pap-report on them, and the report's errors.
run pap-profile ok "$(dirname "$0")/pap_profile.sh" "$B"
# Hostile input (docs/reliability.md, "Bounded input"): crafted profiles, and tune files that
# are devices: refused at once with ARCOLL_ERR_CONFIG (a bug read /dev/zero until memory ran out).
run pap-report-input ok "$(dirname "$0")/pap_report_input.sh" "$B"
run input-tune-dev-zero-fails "fails:ARCOLL_TUNE file /dev/zero: not a regular file" \
    env ARCOLL_TUNE=file:/dev/zero timeout 20 "$T/coll_test" matrix
run input-long-setting-fails "fails:longer than 64 characters" \
    env ARCOLL_PATH="$(printf 'z%.0s' $(seq 100))" timeout 20 "$T/coll_test" matrix
# The benchmark in each of its modes, validating every iteration of every algorithm (-c).
BENCH="$B/bin/arcoll-bench"
QUICK="-m 1:16k -i 20 -x 2 -c -q"
run bench-1-random ok $MPIRUN -np 1 $BENCH $QUICK -M 0,16
run bench-3-random-spin ok $MPIRUN -np 3 $BENCH $QUICK -M 0,16 -s spin -f
run bench-4-random-sleep ok $MPIRUN -np 4 $BENCH $QUICK -M 0,16 -s sleep
run bench-4-late ok $MPIRUN -np 4 $BENCH $QUICK -L 0.25,0.75 -M 32 -t alltoall
run bench-3-late-delays-csv ok $MPIRUN -np 3 $BENCH $QUICK -L 0.5 -M 8 --arrivals delays \
    -p copy -F csv
run bench-2-zcopy-json ok $MPIRUN -np 2 $BENCH $QUICK -M 8 -p zcopy -F json -t allgather
# The other collectives: every algorithm of each, random and sparse alltoallv/allgatherv counts.
run bench-5-rd-collectives ok $MPIRUN -np 5 $BENCH $QUICK -M 0,16 \
    -t allgather,allgatherv,reduce_scatter,allreduce -a pap,direct,ring,rdd,rdh
run bench-4-v-random ok $MPIRUN -np 4 $BENCH $QUICK -M 0,16 -t alltoallv,allgatherv -D random
run bench-3-v-sparse-median ok $MPIRUN -np 3 $BENCH $QUICK -M 8 -t all -D sparse --stat median
if command -v gnuplot >/dev/null; then
    run bench-2-plot ok $MPIRUN -np 2 $BENCH $QUICK -M 0,8,32 --plot "$LOG/bench-2-plot.png"
fi
# The MPI build: Open MPI's own collectives under the same skew, arcoll bootstrapped over MPI.
if [ -x "$B/bin/arcoll-bench-mpi" ]; then
    # Open MPI leaks on purpose at exit (from components it has dlclose'd, which a
    # suppression cannot name): in the sanitizer build, leak checks are off for these runs.
    MPIYIELD="env ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 $MPIRUN --mca mpi_yield_when_idle 1"
    run bench-mpi-4-random ok $MPIYIELD -np 4 "$B/bin/arcoll-bench-mpi" $QUICK \
        -a pap,direct,mpi -M 0,16
    run bench-mpi-3-late ok $MPIYIELD -np 3 "$B/bin/arcoll-bench-mpi" $QUICK \
        -a mpi,pap -L 0.25 -M 32 -F csv
    run bench-mpi-4-all-collectives ok $MPIYIELD -np 4 "$B/bin/arcoll-bench-mpi" $QUICK \
        -t all -a pap,direct,mpi -M 0,16
fi

# The scale simulator (docs/scale.md): the library's algorithms at n virtual ranks in one process
# over the model channel, every received byte checked; a channel that reorders or corrupts must
# be caught; the model channel outside the simulator is a configuration error.
SIM="$B/bin/arcoll-sim --iters 3 --warmup 1"
SIMOK="text:, 0 corrupted calls$"
# The algorithm matrix (tests/matrix/sim_matrix.c; tests/README.md, "The in-process matrix"):
# every algorithm of src/config/algs.h's list x each collective it serves x 0 B .. 70000 B x copy
# and zero-copy x blocking, in place, 3 and 10 in flight, under skew, on 2-16 ranks with pretend
# nodes, every byte checked; an algorithm that never runs as itself fails it. MATRIX_COMBOS
# path x mode combinations per size and shape (make asan: 1; 6: all, on every shape).
run sim-matrix "ok:sim_matrix: 12 ranks on nodes 4:" "$T/sim_matrix" --combos "${MATRIX_COMBOS:-2}"
run sim-matrix-corrupt-caught "fail:sim_matrix: [0-9]* passed, [1-9][0-9]* failed" \
    "$T/sim_matrix" --fault corrupt --shape 4:1 --alg pap,rdh --combos 1
run sim-matrix-reorder-caught "fail:wrong bytes" "$T/sim_matrix" --fault reorder --shape 5:1 \
    --alg direct,sloav --combos 1
run sim-matrix-unknown-alg-fails 'fail:unknown algorithm "nosuch"' "$T/sim_matrix" --alg pap,nosuch
# The tool itself (arcoll-sim) on the collective it took last: reduce_scatter_block's shares.
run sim-6-reduce_scatter-rdh "$SIMOK" $SIM -n 6 --coll reduce_scatter --alg rdh --size 8,4000
run sim-8-skew-random-json "$SIMOK" $SIM -n 8 --coll alltoall --alg pap --size 8 --skew 32 --json
run sim-8-skew-late-csv "text:^alltoall,direct,8,1,8,ib-edr,8,32,0.25,.*,0,direct$" $SIM -n 8 --coll alltoall \
    --alg direct --size 8 --skew 32 --late 0.25 --params ib-edr --csv
# --alg auto sees the job the model describes (docs/scale.md, "Tuning at scale"): nodes and ppn
# from the placement, over=no, and the rules of the channel modelled (ib-edr: verbs, host-shm:
# smp); the "ran" column names what the table picked.
SIMRULE="alltoall:0-inf:nodes=2:over=no:chan=verbs:@sa"
run sim-2x4-auto-verbs-rule "text:^alltoall,auto,8,4,2,ib-edr,8,.*,0,sa$" env ARCOLL_TUNE=$SIMRULE \
    $SIM -n 8 --ppn 4 --coll alltoall --alg auto --size 8 --params ib-edr --csv
run sim-2x4-auto-smp-no-verbs-rule "text:^alltoall,auto,8,4,2,host-shm,8,.*,0,pap$" \
    env ARCOLL_TUNE=$SIMRULE $SIM -n 8 --ppn 4 --coll alltoall --alg auto --size 8 --csv
# The default table's rules for 2+ nodes (chan=verbs, over=no) as auto picks them in the model.
run sim-2x4-auto-default "text:^alltoall,auto,8,4,2,ib-edr,8,.*,0,sa$|^alltoall,auto,8,4,2,ib-edr,4096,.*,0,pap$" \
    $SIM -n 8 --ppn 4 --coll alltoall --alg auto --size 8,4096 --params ib-edr --csv
run sim-2x4-allgather-auto-default \
    "text:^allgather,auto,8,4,2,ib-edr,8,.*,0,pap_shm$|^allgather,auto,8,4,2,ib-edr,4096,.*,0,pap_shm$|^allgather,auto,8,4,2,ib-edr,8192,.*,0,pap$" \
    $SIM -n 8 --ppn 4 --coll allgather --alg auto --size 8,4096,8192 --params ib-edr --csv
run sim-16x1-auto-default "text:^alltoall,auto,16,1,16,ib-edr,8,.*,0,mn_co$|^alltoall,auto,16,1,16,ib-edr,4096,.*,0,pap$" \
    $SIM -n 16 --coll alltoall --alg auto --size 8,4096 --params ib-edr --csv
run sim-16x4-auto-mncox "text:^alltoall,auto,64,4,16,ib-edr,8,.*,0,mn_cox$|^alltoall,auto,64,4,16,ib-edr,64,.*,0,sa$" \
    $SIM -n 64 --ppn 4 --coll alltoall --alg auto --size 8,64 --params ib-edr --csv
# alltoallv's auto (src/dispatch/coll.c, by team shape): sloav on 16+ ranks over 2+ nodes, pap else.
run sim-2x16-alltoallv-auto-sloav "text:^alltoallv,auto,32,16,2,ib-edr,8,.*,0,sloav$" \
    $SIM -n 32 --ppn 16 --coll alltoallv --alg auto --size 8 --params ib-edr --csv
run sim-1x16-alltoallv-auto-pap "text:^alltoallv,auto,16,16,1,ib-edr,8,.*,0,pap$" \
    $SIM -n 16 --ppn 16 --coll alltoallv --alg auto --size 8 --params ib-edr --csv
# Node algorithms under skew: ranks that wait on node memory while a late peer computes.
run sim-16x4-alltoall-pap_shm-skew "$SIMOK" $SIM -n 16 --ppn 4 --coll alltoall --alg pap_shm \
    --size 8 --skew 512 --params ib-edr
run sim-16x4-allgather-pap_shm-late "$SIMOK" $SIM -n 16 --ppn 4 --coll allgather --alg pap_shm \
    --size 8 --skew 64 --late 0.25
run sim-256x16-alltoall-pap "$SIMOK" $SIM -n 256 --ppn 16 --coll alltoall --alg pap --size 8 \
    --params ib-edr
run sim-256x16-allgather-rdh "$SIMOK" $SIM -n 256 --ppn 16 --coll allgather --alg rdh --size 8 \
    --params ib-edr
# The window (ARCOLL_WINDOW): 2 or 6 banks per peer, fragments (20000 B over 16 KiB slots).
for w in 1 3; do
    run "sim-5-alltoall-window$w" "$SIMOK" $SIM -n 5 --coll alltoall --alg pap --size 8,20000 \
        --window $w --iters 4
done
# Payload-free (--no-payload): the same virtual times as with payload, algorithm by algorithm,
# and bytes really dropped; then a mid-size job in that mode (memory and time), with the
# progress line a long run's log gets (--progress: the driver's tick, a line per interval).
run sim-nopayload-identical "text:^nopayload: 10 same, 0 differ, 0 payload-free runs" \
    "$(dirname "$0")/sim_nopayload.sh" "$B"
run sim-512x16-allgather-rdh-nopayload "text:payload-free: not checked, [1-9][0-9]* of them|^arcoll-sim: [0-9.]+ s: init [0-9]+/512 ranks, calls [0-9]+/1024 \([0-9]+%\), [0-9]+ ranks done, [0-9.]+ M puts, virtual" \
    $SIM -n 512 --ppn 16 --coll allgather --alg rdh --size 8 --params ib-edr --bounce 64 \
    --window 1 --no-payload --iters 1 --progress 0.5
run sim-fault-reorder-caught "fails:check: 16 calls checked byte for byte, 16 corrupted calls" \
    $SIM -n 4 --coll alltoall --size 1000 --fault reorder
run sim-fault-corrupt-caught "fails:corrupted calls" $SIM -n 4 --coll alltoall --size 1000 \
    --fault corrupt
# A rank that leaves (rank 1 skips its calls): a deadlock reported, never a hang, also where
# ranks wake to look at node memory (ppn 4).
run sim-8-deadlock-reported "fails:sim: deadlock: 8 of 8 ranks wait" $SIM -n 8 --coll alltoall \
    --size 8 --fault quit
run sim-8x4-deadlock-reported "fails:sim: deadlock: 8 of 8 ranks wait" $SIM -n 8 --ppn 4 \
    --coll alltoall --alg pap_shm --size 8 --fault quit
# The cost model's terms (virtual times are deterministic model outputs): node-segment copies
# cost time (one node, so nothing else grows with the size; with copy_G 0 they are free and the
# times equal), reductions cost time (reduce_G 0 vs the default), a 2:1 oversubscribed fat tree slows recursive doubling across leaves but not
# within one leaf (16 nodes of 24), and the receive-side NIC slows an alltoall's incast.
SIMCMP="$(dirname "$0")/sim_cmp.sh $B/bin/arcoll-sim"
SIMP="$(dirname "$0")/sim"
for alg in pap_shm shm_direct leader sa rd; do
    run "sim-model-copy-$alg" ok $SIMCMP lt -n 4 --ppn 4 --coll alltoall --alg $alg --size 8,8 \
        --iters 2 --vs -n 4 --ppn 4 --coll alltoall --alg $alg --size 16384,65536 --iters 2
done
run sim-model-nocopy-pap_shm-flat ok $SIMCMP eq -n 4 --ppn 4 --coll alltoall --alg pap_shm \
    --size 8 --iters 2 --params "$SIMP/host-shm-nocopy.params" --vs -n 4 --ppn 4 --coll alltoall \
    --alg pap_shm --size 65536 --iters 2 --params "$SIMP/host-shm-nocopy.params"
run sim-model-allreduce-reduce ok $SIMCMP lt -n 4 --coll allreduce --alg rdd --size 65536 \
    --iters 2 --params "$SIMP/host-shm-noreduce.params" --vs -n 4 --coll allreduce --alg rdd \
    --size 65536 --iters 2
run sim-model-congested-rdd ok $SIMCMP lt -n 32 --coll allgather --alg rdd --size 16384 \
    --iters 2 --params ib-edr --vs -n 32 --coll allgather --alg rdd --size 16384 --iters 2 \
    --params ib-edr-2to1
run sim-model-one-leaf-rdd ok $SIMCMP eq -n 16 --coll allgather --alg rdd --size 16384 \
    --iters 2 --params ib-edr --vs -n 16 --coll allgather --alg rdd --size 16384 --iters 2 \
    --params ib-edr-2to1
run sim-model-incast-direct ok $SIMCMP lt -n 32 --ppn 4 --coll alltoall --alg direct \
    --size 16384 --iters 2 --params "$SIMP/ib-edr-norx.params" --vs -n 32 --ppn 4 \
    --coll alltoall --alg direct --size 16384 --iters 2 --params ib-edr
# The congestion model of uplink cables (docs/scale.md, "003"; ib-edr-mu2: leaves of 24 nodes, 12
# D-mod-k routed cables up, mu = 1/2). Streams fast enough to fill a cable (one call in flight,
# 32 KiB slots of 2 lanes at 64 ranks): flows sharing a cable slow recursive doubling's cross-leaf
# rounds, so distance-halving, whose large rounds stay in the leaf, beats it (Sack 2011's
# result); 24 cables a leaf (mu = 1) are faster than 12, so the cables are queues of their own, not
# one pipe; within one leaf the cables are never used (the rows equal ib-edr's); a fraction of a
# cable or a third routing is refused.
CONG="--coll allgather --size 16384 --iters 2 --window 1 --bounce 65536"
run sim-model-uplinks-rdh-beats-rdd ok $SIMCMP lt -n 64 $CONG --alg rdh --params ib-edr-mu2 \
    --vs -n 64 $CONG --alg rdd --params ib-edr-mu2
run sim-model-uplinks-shared-slow-rdd ok $SIMCMP lt -n 64 $CONG --alg rdd --params ib-edr \
    --vs -n 64 $CONG --alg rdd --params ib-edr-mu2
run sim-model-uplinks-more-cables-rdd ok $SIMCMP lt -n 64 $CONG --alg rdd --params ib-edr-mu2 \
    --set up_links=24 --vs -n 64 $CONG --alg rdd --params ib-edr-mu2
run sim-model-uplinks-one-leaf-rdd ok $SIMCMP eq -n 16 $CONG --alg rdd --params ib-edr \
    --vs -n 16 $CONG --alg rdd --params ib-edr-mu2
run sim-set-up-links-fraction-fails 'fails:sim: "up_links=1.5": expected KEY=VALUE' $SIM -n 4 \
    --size 8 --params ib-edr-mu2 --set up_links=1.5
run sim-set-up-route-fails 'fails:sim: "up_route=2": expected KEY=VALUE' $SIM -n 4 --size 8 \
    --params ib-edr-mu2 --set up_route=2
# Pipe lanes (docs/protocol.md §2, §12): a schedule message of many fragments is faster with the
# default pipe window than with the slot's lanes only (--pipe 0, the protocol before), at 2
# ranks with the slot forced small, at 13 (not a power of two: some streams have no pipe entry)
# and at 64 ranks on 16 nodes, where the budget shrinks the slot to 1 KiB (docs/performance.md,
# "Pipelined schedule messages").
run sim-model-pipe-ring-2 ok $SIMCMP lt -n 2 --coll allgather --alg ring --params ib-edr \
    --bounce 4k --size 16384,262144 --iters 2 --vs -n 2 --coll allgather --alg ring \
    --params ib-edr --bounce 4k --pipe 0 --size 16384,262144 --iters 2
run sim-model-pipe-rdd-13 ok $SIMCMP lt -n 13 --coll allgather --alg rdd --params host-shm \
    --bounce 1k --size 3000,20000 --iters 2 --skew 2 --vs -n 13 --coll allgather --alg rdd \
    --params host-shm --bounce 1k --pipe 0 --size 3000,20000 --iters 2 --skew 2
run sim-model-pipe-sloav-64 ok $SIMCMP lt -n 64 --ppn 4 --coll alltoallv --alg sloav \
    --params ib-edr --size 1024 --iters 2 --vs -n 64 --ppn 4 --coll alltoallv --alg sloav \
    --params ib-edr --pipe 0 --size 1024 --iters 2
# The library's own agreements (the closing barrier of finalize) run the allreduce auto
# picks, whatever ARCOLL_ALLREDUCE_ALG forces: the same puts with pap forced as with rdh
# (before: a linear pap barrier, 23166 puts against 3258 at 64 ranks on 16 nodes).
run sim-internal-agree-ignores-forced-alg "text:^same [0-9]+ puts$" bash -c \
    'p() { ARCOLL_ALLREDUCE_ALG=$1 "$0" -n 64 --ppn 4 --params ib-edr --coll alltoall --alg sa \
           --size 8 --iters 1 --warmup 0 --no-payload 2>&1 | sed -n "1s/.* \([0-9]*\) puts.*/\1/p"; }
     a=$(p pap) b=$(p rdh); [ -n "$a" ] && [ "$a" = "$b" ] && echo "same $a puts" ||
     echo "pap $a rdh $b"' "$B/bin/arcoll-sim"
# The receive scan that looks only at the slots puts landed in (chan_model_ops.landed_at) changes
# no row: --rescan scans every pending peer on every pass, as a real channel must. With
# payload: the linear, logarithmic, routed and node-memory families, PAP's unordered
# receives, 4 calls in flight (landings in other banks; the flat allgather would not reach the
# executor, allgatherv and allreduce do) and fragmented streams.
run sim-landed-skip-same-rows-direct ok $SIMCMP eq -n 64 --ppn 4 --coll allreduce --alg direct \
    --size 8,4096 --iters 2 --params ib-edr --vs -n 64 --ppn 4 --coll allreduce --alg direct \
    --size 8,4096 --iters 2 --params ib-edr --rescan
run sim-landed-skip-same-rows-sloav ok $SIMCMP eq -n 64 --ppn 4 --coll alltoallv --alg sloav \
    --size 8,512 --iters 2 --params ib-edr --vs -n 64 --ppn 4 --coll alltoallv --alg sloav \
    --size 8,512 --iters 2 --params ib-edr --rescan
run sim-landed-skip-same-rows-mn_co ok $SIMCMP eq -n 64 --ppn 4 --coll alltoall --alg mn_co \
    --size 8,512 --iters 2 --params ib-edr --vs -n 64 --ppn 4 --coll alltoall --alg mn_co \
    --size 8,512 --iters 2 --params ib-edr --rescan
run sim-landed-skip-same-rows-allgatherv-window ok $SIMCMP eq -n 64 --ppn 4 --coll allgatherv \
    --alg pap --size 8,4096 --iters 4 --window 4 --bounce 64 --params ib-edr --vs -n 64 \
    --ppn 4 --coll allgatherv --alg pap --size 8,4096 --iters 4 --window 4 --bounce 64 \
    --params ib-edr --rescan
run sim-landed-skip-same-rows-sloavx-frag ok $SIMCMP eq -n 32 --ppn 4 --coll alltoallv \
    --alg sloavx --size 8,512 --iters 2 --bounce 64 --params ib-edr --vs -n 32 --ppn 4 \
    --coll alltoallv --alg sloavx --size 8,512 --iters 2 --bounce 64 --params ib-edr --rescan
run sim-landed-skip-same-rows-allreduce-pap ok $SIMCMP eq -n 64 --ppn 4 --coll allreduce \
    --alg pap --size 8,4096 --iters 4 --window 4 --skew 32 --params ib-edr --vs -n 64 --ppn 4 \
    --coll allreduce --alg pap --size 8,4096 --iters 4 --window 4 --skew 32 --params ib-edr \
    --rescan
# --set KEY=VALUE changes one parameter exactly as a file would (the same rows), and a wrong
# key is refused by name.
run sim-model-set-equals-file ok $SIMCMP eq -n 32 --ppn 4 --coll alltoall --alg direct \
    --size 16384 --iters 2 --params "$SIMP/ib-edr-norx.params" --vs -n 32 --ppn 4 \
    --coll alltoall --alg direct --size 16384 --iters 2 --params ib-edr --set rx_nic=0
run sim-set-unknown-key-fails 'fails:sim: "rx_nik=0": expected KEY=VALUE' $SIM -n 4 --size 8 \
    --params ib-edr --set rx_nik=0
# inf passed "VALUE >= 0" and was cast to the uint64 clock; a name cut at 63 characters read as
# another value ("+oob_a=12" for 123456): both refused.
run sim-set-inf-fails 'fails:sim: "poll=inf": expected KEY=VALUE' $SIM -n 4 --size 8 \
    --params ib-edr --set poll=inf
run sim-set-name-too-long-fails 'fails:sim: "oob_a=123456": expected KEY=VALUE' $SIM -n 4 \
    --size 8 --params ib-edr --set poll=1000 --set qp_ns=0 --set rx_nic=0 --set inter_g=5 \
    --set oob_b=5000 --set oob_a=123456
# The progress line's form without depending on wall time: an interval of 1 ns passes at the
# first check (every 64 turns), so a 4-rank run logs it, a whole line each (not a tty).
run sim-progress-lines "text:^arcoll-sim: [0-9.]+ s: init 4/4 ranks, calls [0-9]+/8 \([0-9]+%\), [0-9]+ ranks done, [0-9.]+ M puts, virtual [0-9.]+ ms$" \
    $SIM -n 4 --size 8 --iters 1 --progress 1e-9
# sloavx vs sloav (docs/scale.md "000"): the node step through the node segment and one
# aggregated message per pair of nodes must beat sloav at 16 ranks a node (Xu et al.'s
# trend; the relay tree it replaced was 5x slower at 64 ranks), and more so when the node's
# ranks' messages share a NIC with a 1 us per-message gap.
A2AV16="-n 32 --ppn 16 --coll alltoallv --size 16 --bounce 16384 --iters 2"
run sim-model-sloavx-nic-gap ok $SIMCMP lt $A2AV16 --alg sloavx --params "$SIMP/ib-edr-gap1us.params" \
    --vs $A2AV16 --alg sloav --params "$SIMP/ib-edr-gap1us.params"
run sim-model-sloavx-below-sloav ok $SIMCMP lt -n 64 --ppn 16 --coll alltoallv --alg sloavx \
    --size 1,16 --bounce 16384 --iters 2 --params ib-edr --vs -n 64 --ppn 16 \
    --coll alltoallv --alg sloav --size 1,16 --bounce 16384 --iters 2 --params ib-edr
run sim-channel-outside-fails "fails:runs only inside arcoll-sim" env ARCOLL_CHANNEL=sim \
    "$T/coll_test" matrix
# Calibration (docs/scale.md, "Calibration"): sim-compare.sh measure calibrates host-shm with
# arcoll-chanperf --sim on 2 real ranks before and after the bench runs (data validated), the
# simulator predicts the same alltoall at N = 2 with it, and the table must have both rows and
# every column (the error's size is not checked). A side that fails must fail the comparison.
BENCHDIR="$(dirname "$0")/../../bench"
CMPROW="+[0-9.]+ +[0-9.]+ +[-+][0-9.]+ +[0-9.]+ *(moved)?$"
run sim-calibrate-compare-2 "text:^sim-calibrate: wrote .*: o [0-9.]+ L [0-9.]+ G [0-9.]+ copy_G [0-9.]+ poll [0-9.]+ |^N +coll +alg +size +measured_us +predicted_us +error_% +cal_L_ns +note$|^2 +alltoall +pap +1024 $CMPROW|^2 +alltoall +direct +1024 $CMPROW" \
    env CAL_ITERS=200 CMP_NS=2 CMP_SIZES=1024 CMP_CASES=alltoall:pap,direct CMP_REPS=1 \
    CMP_ITERS=50 CMP_WARMUP=5 "$BENCHDIR/sim-compare.sh" "$B" measure
run sim-compare-sim-fails "fails:sim-compare: arcoll-sim failed: N 2 alltoall pap" \
    env CMP_NS=2 CMP_SIZES=8 CMP_CASES=alltoall:pap CMP_REPS=1 CMP_ITERS=5 CMP_WARMUP=1 \
    "$BENCHDIR/sim-compare.sh" "$B" /nonexistent.params
run sim-compare-bench-fails "fails:sim-compare: arcoll-bench failed: N 2 alltoall nosuch" \
    env CMP_NS=2 CMP_SIZES=8 CMP_CASES=alltoall:nosuch CMP_REPS=1 "$BENCHDIR/sim-compare.sh" "$B" host-shm
# --resources: the model's bytes equal the real smp counters, its QPs the verbs counts the
# Soft-RoCE guest asserts, eager QPs add their cost to init (docs/scale.md, "Resources per rank").
run sim-resources-vs-real ok "$(dirname "$0")/sim_resources.sh" "$B"
# The trends script (bench/sim-trends.sh, docs/scale.md "Trends") at tiny sizes, so that it
# cannot rot: every trend's runs pass their byte checks and its ratio table is printed.
run sim-trends-smoke "text:^002: direct over pap|^004: direct over mn_co pap|^000: direct over sloav pap|^000x: sloav over sloavx|^001: leader over sa direct|^003: rdd over rdh" \
    env SIM_TRENDS_SMOKE=1 "$(dirname "$0")/../../bench/sim-trends.sh" "$B" "$LOG/sim-trends"

timing_top integ
max_np_note integ
echo "integ: $pass passed, $fail failed"
[ $fail -eq 0 ] || { echo "failed: ${failed_names[*]}"; exit 1; }
