#!/usr/bin/env bash
# One guest: Soft-RoCE on eth0, verbs checked with the standard tools (server and client in the
# same guest, talking through rxe0), Open MPI, then arcoll. Run by init inside the guest.
# Env from run.sh: ARCOLL_BUILD (host build dir, readable at the same path here).
# Keeps perftest's output in /tmp/vmout/perftest/ for comparing arcoll with it later.
set -uo pipefail
. "$(dirname "$0")/guest-lib.sh"
B=${ARCOLL_BUILD:-}
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
    case $tool in
    ib_write_lat) detail=$(awk '$1 ~ /^[0-9]+$/ && NF >= 6 {print "t_avg " $6 " us, t_typical " $5 " us"}' \
        "$P/$name.client.txt") ;;
    ib_write_bw) detail=$(awk '$1 ~ /^[0-9]+$/ && NF >= 5 {print "BW average " $4 " Gb/s"}' \
        "$P/$name.client.txt") ;;
    esac
    if [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ] && [ -n "$detail" ]; then
        verdict PASS "$name" "$detail"
    else
        verdict FAIL "$name" "(client exit $rc_c, server exit $rc_s)"
    fi
}
perftest ib_write_lat ib_write_lat -n 1000
perftest ib_write_bw ib_write_bw -s 65536 -n 1000 --report_gbits
step "rxe counters (non-zero)"
rxe_counters

# Open MPI in the guest: as root, one node, loopback plus eth0; no MCA settings needed.
step "mpirun -np 2 hostname"
out=$(timeout 60 mpirun --oversubscribe -np 2 hostname 2>&1)
echo "$out"
if [ "$(grep -cx "$(hostname)" <<<"$out")" -eq 2 ]; then
    verdict PASS mpirun_hostname
else
    verdict FAIL mpirun_hostname
fi

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
    verdict FAIL arcoll_build "ARCOLL_BUILD='$B' has no bin/arcoll_info"
fi

# ==== HOOK: arcoll over verbs (rxe0) =====================================================
# Off until the verbs channel lands (src/verbs/verbs_chan.c); try it with
#   ARCOLL_VM_VERBS=1 tests/vm/run.sh build single
# then make it unconditional. Each line: a test name, then the command; add more the same way
# (coll_test skew, arcoll-bench -v, ARCOLL_NOTIFY=imm, ARCOLL_WIREUP=rdmacm, ...).
# Compare latencies with $P/ib_write_lat.client.txt (TCG: correctness, not performance).
arcoll_verbs() {
    local name=$1 np=$2
    shift 2
    step "arcoll verbs: $name: mpirun -np $np $*"
    local log=$VMOUT/$name.log
    timeout 300 env ARCOLL_CHANNEL=verbs ARCOLL_DEVICE=rxe0 ARCOLL_GID_INDEX="$G" \
        mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$np" "$@" >"$log" 2>&1
    local rc=$?
    tail -n 5 "$log"
    if [ $rc -eq 0 ] && grep -q ' 0 failed' "$log"; then
        verdict PASS "$name" "$(grep -m1 'passed, [0-9]* failed' "$log")"
    else
        verdict FAIL "$name" "(exit $rc, see $name.log)"
    fi
}
if [ "${ARCOLL_VM_VERBS:-0}" = 1 ]; then
    arcoll_verbs verbs_matrix_np2 2 "$B/tests/coll_test" matrix
    arcoll_verbs verbs_matrix_np4 4 "$B/tests/coll_test" matrix
fi
# ==== end of hook ========================================================================

step "done"
exit $VM_FAILED
