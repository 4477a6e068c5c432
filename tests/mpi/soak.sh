#!/usr/bin/env bash
# Soak test of the PMPI shim (make soak; a 2-minute run in tests/mpi/run.sh): jobs of
# tests/mpi/shim_soak_test.c (random collectives, sizes, datatypes, communicators made and
# freed, in place or not, blocking and nonblocking, random skew, every byte checked,
# resources after warm-up against the end) until SECONDS are used, cycling through:
#   clean jobs at 2-5 ranks, on arcoll for every size (ARCOLL_TUNE) or with the default rules;
#   a job whose first nonblocking call on MPI_COMM_WORLD the shim fails on purpose
#     (ARCOLL_MPI_FAULT=icoll_fail): the ranks agree, later calls go to MPI and stay right;
#   the same for a blocking call (coll_fail);
#   a job where world rank 1 SIGKILLs itself at a random call: the job must end (not hang)
#     and leave no arcoll name in /dev/shm.
# Usage: tests/mpi/soak.sh BUILD_DIR SECONDS; last line "soak: N passed, N failed".
set -u
B=${1:-build}
TOTAL=${2:-600}
LOG=$B/soak-logs
mkdir -p "$LOG"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
SHIM=$(cd "$B/lib" && pwd)/libarcoll_mpi.so
asan=$(ldd "$SHIM" | awk '/libasan/ {print $3}')
PRE=${asan:+$asan:}$SHIM
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
PROG=$B/tests/shim_soak_test
MPIRUN="mpirun --oversubscribe --bind-to none"
ALL="alltoall:0-inf:@arcoll#allgather:0-inf:@arcoll#allreduce:0-inf:@arcoll#allgatherv:0-inf:@arcoll#reduce_scatter:0-inf:@arcoll"
# A job's own share: at least 10 s, an eighth of the whole.
SECS=$((TOTAL / 8))
[ "$SECS" -ge 10 ] || SECS=10
pass=0
fail=0
calls=0
faults=0
bytes=0
start=$SECONDS

job() { # NAME EXPECT(ok|fault|killed) CMD...
    local name=$1 expect=$2 rc good=0 t0=$SECONDS log="$LOG/$1.log"
    shift 2
    timeout $((SECS * 3 + 60)) "$@" >"$log" 2>&1
    rc=$?
    case $expect in
    ok) [ $rc -eq 0 ] && grep -q " 0 failed" "$log" && good=1 ;;
    fault) [ $rc -eq 0 ] && grep -q " 0 failed" "$log" &&
        grep -qE "soak: .* [1-9][0-9]* failed calls expected by the fault" "$log" && good=1 ;;
    killed) [ $rc -ne 0 ] && [ $rc -ne 124 ] && ! ls /dev/shm | grep -q '^arcoll\.' && good=1 ;;
    esac
    local c f b
    c=$(sed -n 's/^soak: .* s, \([0-9]*\) calls.*/\1/p' "$log" | head -1)
    f=$(sed -n 's/^soak: .*, \([0-9]*\) failed calls expected.*/\1/p' "$log" | head -1)
    b=$(sed -n 's/^soak: .* calls, \([0-9]*\) bytes checked.*/\1/p' "$log" | head -1)
    calls=$((calls + ${c:-0}))
    faults=$((faults + ${f:-0}))
    bytes=$((bytes + ${b:-0}))
    if [ $good = 1 ]; then
        pass=$((pass + 1))
        printf 'PASS %-32s %3ds  %s\n' "$name" $((SECONDS - t0)) "$(grep -m1 '^soak: .* calls' "$log")"
        grep -m1 '^soak: rank 0 after' "$log" | sed 's/^/     /'
    else
        fail=$((fail + 1))
        printf 'FAIL %-32s %3ds  (exit %d, expected %s)\n' "$name" $((SECONDS - t0)) $rc "$expect"
        tail -n 15 "$log" | sed 's/^/    /'
    fi
}

i=0
while [ $((SECONDS - start + SECS)) -le "$TOTAL" ] || [ $i -lt 4 ]; do
    seed=$((1000 + i * 7919))
    case $((i % 6)) in
    0) job "soak-$i-4-arcoll" ok $MPIRUN -np 4 env LD_PRELOAD="$PRE" ARCOLL_TUNE=$ALL \
        ARCOLL_TIMEOUT_MS=20000 "$PROG" $SECS $seed ;;
    1) job "soak-$i-2-default" ok $MPIRUN -np 2 env LD_PRELOAD="$PRE" ARCOLL_TIMEOUT_MS=20000 \
        "$PROG" $SECS $seed ;;
    2) job "soak-$i-3-icoll-fail" fault $MPIRUN -np 3 env LD_PRELOAD="$PRE" ARCOLL_TUNE=$ALL \
        ARCOLL_TIMEOUT_MS=3000 ARCOLL_MPI_FAULT=icoll_fail SOAK_FAULT_OK=1 "$PROG" $SECS $seed ;;
    3) job "soak-$i-5-arcoll" ok $MPIRUN -np 5 env LD_PRELOAD="$PRE" ARCOLL_TUNE=$ALL \
        ARCOLL_TIMEOUT_MS=20000 "$PROG" $SECS $seed ;;
    4) job "soak-$i-4-kill" killed $MPIRUN -np 4 env LD_PRELOAD="$PRE" ARCOLL_TUNE=$ALL \
        ARCOLL_TIMEOUT_MS=5000 SOAK_KILL_AT=$((seed % 3000)) "$PROG" $SECS $seed ;;
    *) job "soak-$i-2-coll-fail" fault $MPIRUN -np 2 env LD_PRELOAD="$PRE" ARCOLL_TUNE=$ALL \
        ARCOLL_TIMEOUT_MS=3000 ARCOLL_MPI_FAULT=coll_fail SOAK_FAULT_OK=1 "$PROG" $SECS $seed ;;
    esac
    i=$((i + 1))
done
echo "soak: $i jobs in $((SECONDS - start)) s: $calls calls, $bytes bytes checked, $faults calls failed by injected faults"
echo "soak: $pass passed, $fail failed"
[ $fail -eq 0 ]
