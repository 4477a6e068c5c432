#!/bin/bash
# Copy-path pipelining (ARCOLL_LANES, docs/protocol.md §6): what a message
# of F fragments costs with one lane (a credit round trip per fragment) and
# with the default four, next to the bound "one round trip + F transfers".
#
#   bench/lanes.sh [BUILD]          simulator, then shared memory at np=2
#
# Simulator: ring allgather on 2 nodes (one stream each way), ib-edr with the
# receiver's copy cost set to 0 so that the wire is the only per-byte cost
# and the bound is exact: RTT = 2 x (inter_o + inter_L), a transfer =
# fragment x inter_G. Shared memory: ring allgather (a schedule, copy path)
# and pap/copy (the flat copy path) next to pap/zcopy (one write of the whole
# block, no fragments) in one run per lane count, with the slot forced small
# (ARCOLL_BOUNCE_SIZE=4k: 1 KiB fragments), a warm loop. The realistic buffer
# use through the shim: bench/realistic.sh with REAL_ENV=ARCOLL_LANES=1, then 4.
set -euo pipefail
BUILD=${1:-build}
SIM=$BUILD/bin/arcoll-sim
BENCH=$BUILD/bin/arcoll-bench
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

o=200 L=1000 G=0.08
echo "# simulator: ib-edr, copy_G=0, 2 nodes, ring allgather, us"
printf '%-8s %-8s %6s %10s %10s %10s %8s %8s\n' bounce bytes F lanes=1 lanes=4 bound r1 r4
for bounce in 16384 65536; do
    frag=$((bounce / 4))
    for size in 65536 262144 1048576 4194304; do
        t=()
        for lanes in 1 4; do
            t+=("$(ARCOLL_LANES=$lanes $SIM -n 2 --ppn 1 --coll allgather --alg ring \
                --size $size --params ib-edr --set copy_G=0 --bounce $bounce --iters 3 |
                awk -v s=$size '$1 == s { print $2 }')")
        done
        # lanes=1 cuts the slot into one fragment of the whole bounce, lanes=4 into 4
        awk -v b=$bounce -v f=$frag -v s=$size -v t1="${t[0]}" -v t4="${t[1]}" \
            -v o=$o -v L=$L -v G=$G 'BEGIN {
                F = int((s + f - 1) / f); rtt = 2 * (o + L) / 1000
                bound = rtt + F * f * G / 1000
                printf "%-8d %-8d %6d %10.1f %10.1f %10.1f %8.2f %8.2f\n", b, s, F, t1, t4,
                    bound, t1 / bound, t4 / bound }'
    done
done

echo
echo "# shared memory, np=2, ARCOLL_BOUNCE_SIZE=4k; ratio = ALG / pap/zcopy in the same run"
for lanes in 1 4; do
    echo "## lanes=$lanes"
    ARCOLL_LANES=$lanes ARCOLL_BOUNCE_SIZE=4k mpirun -np 2 --oversubscribe --bind-to none \
        -x ARCOLL_LANES -x ARCOLL_BOUNCE_SIZE "$BENCH" -q -t allgather \
        -a pap/zcopy,ring,pap/copy -b pap/zcopy -m 64k:1m -M 0 -i 200 -x 20 --stat median 2>&1 |
        grep -v '^$'
done
