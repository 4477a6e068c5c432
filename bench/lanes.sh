#!/bin/bash
# Copy-path pipelining (ARCOLL_LANES, docs/protocol.md §6): what a message
# of F fragments costs with one lane (a credit round trip per fragment) and
# with the default four, next to the bound "one round trip + F transfers".
#
#   bench/lanes.sh [BUILD]          simulator, then shared memory at np=2
#
# Simulator (virtual time, so one run each): ring allgather on 2 nodes (one
# stream each way), ib-edr with the receiver's copy cost set to 0 so that the
# wire is the only per-byte cost and the bound is exact: RTT = 2 x (inter_o +
# inter_L), then the bytes at inter_G; and a few collectives with the model as
# it is. Shared memory: ring allgather (a schedule, copy path) and pap/copy
# (the flat copy path) next to pap/zcopy (one write of the whole block, no
# fragments) in one run per lane count, 64 KiB slots set by hand (shared
# memory's default is one 16 KiB lane), a warm loop. The realistic buffer use
# through the shim: bench/realistic.sh with REAL_ENV=ARCOLL_LANES=1, then 4,
# and REAL_ENV=ARCOLL_BOUNCE_SIZE=64k.
set -euo pipefail
BUILD=${1:-build}
SIM=$BUILD/bin/arcoll-sim
BENCH=$BUILD/bin/arcoll-bench
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

o=200 L=1000 G=0.08
sim() { # BOUNCE LANES ARGS...: the time of the one size asked for (us)
    local b=$1 l=$2
    shift 2
    ARCOLL_LANES=$l $SIM --params ib-edr --bounce "$b" --iters 3 "$@" 2>/dev/null |
        awk '$1 ~ /^[0-9]+$/ { print $2 }'
}
echo "# simulator: ib-edr, copy_G=0, 2 nodes, ring allgather (one stream each way), us;"
echo "# bound = one round trip + the bytes at wire speed; old = 16 KiB slot, 1 lane (before);"
echo "# new = 64 KiB slot, 4 lanes of 16 KiB (verbs' and this model's default now)"
printf '%-8s %10s %10s %10s %10s %8s %8s\n' bytes old 64k/1lane new bound r-old r-new
for size in 65536 262144 1048576 4194304; do
    common=(-n 2 --ppn 1 --coll allgather --alg ring --size $size --set copy_G=0)
    t0=$(sim 16384 1 "${common[@]}")
    t1=$(sim 65536 1 "${common[@]}")
    t4=$(sim 65536 4 "${common[@]}")
    awk -v s=$size -v t0="$t0" -v t1="$t1" -v t4="$t4" -v o=$o -v L=$L -v G=$G 'BEGIN {
        bound = 2 * (o + L) / 1000 + s * G / 1000
        printf "%-8d %10.1f %10.1f %10.1f %10.1f %8.2f %8.2f\n", s, t0, t1, t4, bound,
            t0 / bound, t4 / bound }'
done
echo
echo "# simulator: ib-edr as it is (the receiver pays for landing and copying out), us"
printf '%-28s %-8s %10s %10s %10s %8s\n' case bytes old 64k/1lane new old/new
for c in "2 allgather ring" "8 allgather ring" "8 alltoall pap" "8 alltoall mn_co" \
    "16 alltoall pap"; do
    set -- $c
    for size in 65536 1048576; do
        common=(-n "$1" --ppn 1 --coll "$2" --alg "$3" --size $size)
        t0=$(sim 16384 1 "${common[@]}")
        t1=$(sim 65536 1 "${common[@]}")
        t4=$(sim 65536 4 "${common[@]}")
        awk -v c="$1 ranks $2 $3" -v s=$size -v t0="$t0" -v t1="$t1" -v t4="$t4" 'BEGIN {
            printf "%-28s %-8d %10.1f %10.1f %10.1f %8.2f\n", c, s, t0, t1, t4, t0 / t4 }'
    done
done
echo
echo "# shared memory, np=2, ARCOLL_BOUNCE_SIZE=64k (not its default); ratio = pap/zcopy / ALG"
for lanes in 1 4; do
    echo "## lanes=$lanes"
    ARCOLL_LANES=$lanes ARCOLL_BOUNCE_SIZE=64k mpirun -np 2 --oversubscribe --bind-to none \
        -x ARCOLL_LANES -x ARCOLL_BOUNCE_SIZE "$BENCH" -q -t allgather \
        -a pap/zcopy,ring,pap/copy -b pap/zcopy -m 64k:1m -M 0 -i 200 -x 20 --stat median 2>&1 |
        grep -v '^$'
done
