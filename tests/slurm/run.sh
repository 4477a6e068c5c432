#!/usr/bin/env bash
# srun --mpi=pmix against a real single-node Slurm started for this run: munged, slurmctld and
# slurmd with every file in a fresh directory and ports of their own, then arcoll programs
# launched by srun (PMIx bootstrap from slurmd's PMIx server), then the daemons stopped by PID.
# Usage: tests/slurm/run.sh BUILD_DIR [FILTER]
# Last line: "slurm: N passed, N failed", or "slurm: skipped: <reason>" (exit 0) where Slurm
# cannot be had (not root, packages missing) or SLURMBED=0. Logs: BUILD_DIR/slurm-logs/.
# Env: SLURMBED_PORT (first of two TCP ports; random by default).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=${1:-build}
FILTER=${2:-}
skip() {
    echo "slurm: skipped: $*"
    exit 0
}
[ "${SLURMBED:-1}" = 0 ] && skip "SLURMBED=0"
[ "$(id -u)" -eq 0 ] || skip "not root (munged and slurmd are started as root here)"
for c in munged mungekey munge slurmctld slurmd srun sinfo squeue scancel; do
    command -v $c >/dev/null ||
        skip "$c not found (Debian packages munge slurmctld slurmd slurm-client; make deps)"
done
B=$(cd "$B" && pwd)
LOG=$B/slurm-logs
rm -rf "$LOG"
mkdir -p "$LOG"
. "$HERE/../timing.sh"
timing_init "$LOG/times.txt"
W=$(mktemp -d /tmp/arcoll-slurm.XXXXXX)
export SLURM_CONF=$W/slurm.conf
pass=0
fail=0

verdict() { # verdict PASS|FAIL NAME DETAIL
    printf '%-4s %-30s %s\n' "$1" "$2" "$3"
    if [ "$1" = PASS ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
}

# A daemon that has exited but that nobody reaped (re-parented to a PID 1 that does not
# reap, as in some containers) counts as gone.
alive() {
    local s
    s=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $s != Z* ]]
}

stop_daemons() {
    local f pid i
    # Jobs first (there should be none): their step daemons would outlive slurmd.
    for j in $(squeue -h -o %i 2>/dev/null); do scancel "$j" 2>/dev/null; done
    for f in slurmd.pid slurmctld.pid munge/munged.pid; do
        [ -s "$W/$f" ] || continue
        pid=$(cat "$W/$f")
        alive "$pid" && kill "$pid"
        for ((i = 0; i < 100; i++)); do
            alive "$pid" || break
            sleep 0.05
        done
        if alive "$pid"; then
            kill -9 "$pid"
            echo "slurm: ${f%.pid} (pid $pid) ignored SIGTERM; killed"
        fi
    done
    cp "$W"/*.log "$W"/munge/*.log "$LOG/" 2>/dev/null
    rm -rf "$W"
}
trap stop_daemons EXIT

# The node as slurmd detects it: a slurm.conf claiming more CPUs or memory drains it.
read -r cpus mem < <(slurmd -C | awk '/^NodeName/ {
    for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    print v["CPUs"], int(v["RealMemory"] / 2) }')
# Below the kernel's ephemeral range: there a client socket of another job (mpirun, PMIx) can
# hold the port, and slurmctld then dies with "Address already in use".
read -r eph _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || eph=32768
[ "${eph:-0}" -gt 12000 ] || eph=32768
port=${SLURMBED_PORT:-$((10000 + RANDOM % (eph - 10002)))}
sed -e "s#@WORK@#$W#g" -e "s#@CPUS@#${cpus:-1}#" -e "s#@MEM@#${mem:-1000}#" \
    -e "s#@PORT0@#$port#" -e "s#@PORT1@#$((port + 1))#" "$HERE/slurm.conf.in" >"$SLURM_CONF"
mkdir -p "$W/munge" "$W/state" "$W/spool"
chmod 755 "$W" "$W/munge"
t0=$SECONDS
mungekey --create --keyfile="$W/munge/munge.key" &&
    chmod 600 "$W/munge/munge.key" &&
    munged --force --key-file="$W/munge/munge.key" --socket="$W/munge/munge.socket.2" \
        --pid-file="$W/munge/munged.pid" --log-file="$W/munge/munged.log" \
        --seed-file="$W/munge/munged.seed" &&
    munge -S "$W/munge/munge.socket.2" -n | unmunge -S "$W/munge/munge.socket.2" >/dev/null &&
    slurmctld -i && slurmd -N localhost
state=
# At most 30 s for the node to become idle (sinfo itself waits long for a missing controller);
# a controller that died will not come.
while ((SECONDS - t0 < 30)); do
    state=$(timeout 3 sinfo -h -N -o %T 2>/dev/null)
    [ "$state" = idle ] && break
    [ -s "$W/slurmctld.pid" ] && ! alive "$(cat "$W/slurmctld.pid")" && state="slurmctld exited" &&
        break
    sleep 0.1
done
if [ "$state" != idle ]; then
    verdict FAIL slurm-start "node state '${state:-none}' after $((SECONDS - t0)) s"
    tail -n 5 "$W/slurmctld.log" "$W/slurmd.log" 2>/dev/null
    echo "slurm: $pass passed, $fail failed"
    exit 1
fi
verdict PASS slurm-start "$cpus CPUs, ports $port-$((port + 1)), node idle after $((SECONDS - t0)) s"
if srun --mpi=list 2>&1 | grep -q pmix; then
    verdict PASS srun-mpi-list-pmix "$(srun --mpi=list 2>&1 | grep -c pmix) pmix plugin(s)"
else
    verdict FAIL srun-mpi-list-pmix "no pmix in srun --mpi=list (Debian package libpmix-dev?)"
fi

# s NAME NTASKS CMD...: srun --mpi=pmix with a time limit; passes on exit 0 and " 0 failed".
# -O: more tasks than the node's CPUs.
s() {
    local name=$1 n=$2 rc start=$SECONDS
    shift 2
    [ -z "$FILTER" ] || [[ $name == *$FILTER* ]] || return 0
    timeout 180 srun --mpi=pmix -n "$n" -O "$@" >"$LOG/$name.log" 2>&1
    rc=$?
    timing_add "$name" $((SECONDS - start))
    if [ $rc -eq 0 ] && grep -q " 0 failed" "$LOG/$name.log"; then
        verdict PASS "$name" "$(($SECONDS - start)) s  $(grep -m1 'passed, [0-9]* failed' "$LOG/$name.log")"
    else
        verdict FAIL "$name" "(exit $rc$([ $rc = 124 ] && echo ': timed out'); $LOG/$name.log)"
        tail -n 15 "$LOG/$name.log" | sed 's/^/    /'
    fi
}
s srun-pmix-4-bench 4 "$B/bin/arcoll-bench" -m 1:16k -i 20 -x 2 -M 0,16 -c -q
s srun-pmix-3-coll-test 3 "$B/tests/coll_test" matrix
# A rank SIGKILLed in an alltoall: slurmstepd kills the whole step about 1 s after the death and
# tells the survivors nothing through PMIx (docs/reliability.md, "A peer that dies"), so each of
# the two survivors must report PEER, on its own, before then (ARCOLL_TIMEOUT_MS is 20 s).
name=srun-pmix-3-kill-seen
if [ -z "$FILTER" ] || [[ $name == *$FILTER* ]]; then
    start=$SECONDS
    timeout 60 srun --mpi=pmix -n 3 -O env ARCOLL_TIMEOUT_MS=20000 "$B/tests/coll_test" \
        phasefault alltoall kill >"$LOG/$name.log" 2>&1
    timing_add "$name" $((SECONDS - start))
    seen=$(grep -c "KILL-OK phasefault alltoall: PEER (.*) after [01]\.[0-9]* s$" "$LOG/$name.log")
    if [ "$seen" = 2 ]; then
        verdict PASS "$name" "$(grep -o 'PEER (.*) after [0-9.]* s' "$LOG/$name.log" | sed 's/ (.*)//' | paste -sd,)"
    else
        verdict FAIL "$name" "($seen of 2 survivors reported PEER within 2 s; $LOG/$name.log)"
        tail -n 15 "$LOG/$name.log" | sed 's/^/    /'
    fi
fi
# Open MPI programs start under srun --mpi=pmix too: the shim on a Slurm-launched job.
SHIM=$B/lib/libarcoll_mpi.so
if [ -e "$SHIM" ]; then
    asan=$(ldd "$SHIM" | awk '/libasan/ {print $3}')
    s srun-pmix-4-shim 4 env LD_PRELOAD="${asan:+$asan:}$SHIM" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$B/tests/shim_test" shim 4096
fi
# The Open MPI component on a Slurm-launched job: only its path set (every size on arcoll,
# so that the test's counters must show every call served).
COMP=$B/lib/openmpi/mca_coll_arcoll.so
if [ -e "$COMP" ] && [ -x "$B/tests/ompi_coll_test" ]; then
    s srun-pmix-3-ompi-component 3 env OMPI_MCA_mca_base_component_path="$B/lib/openmpi:$(
        mpicc --showme:libdirs | awk '{print $1}')/openmpi3" \
        ARCOLL_TUNE="alltoall:0-inf:@arcoll#allgather:0-inf:@arcoll#allreduce:0-inf:@arcoll#allgatherv:0-inf:@arcoll#reduce_scatter:0-inf:@arcoll" \
        "$B/tests/ompi_coll_test" arcoll 20
fi

pids=$(cat "$W/slurmd.pid" "$W/slurmctld.pid" "$W/munge/munged.pid" 2>/dev/null | tr '\n' ' ')
trap - EXIT
stop_daemons
left=
for p in $pids; do alive "$p" && left="$left $p"; done
if [ -z "$left" ]; then
    verdict PASS slurm-stop "pids $pids gone"
else
    verdict FAIL slurm-stop "still running:$left"
fi
timing_add slurm-start+stop $((SECONDS - t0 - $(awk '{ s += $1 } END { print s + 0 }' "$TIMING_FILE")))
timing_top slurm
echo "slurm: $pass passed, $fail failed"
[ $fail -eq 0 ]
