#!/bin/bash
# A schedule message of F fragments against "one round trip + F transfers" (issue 39, item 1;
# docs/protocol.md §6, "Pipe lanes"): 2 ranks, ring allgather (one stream each way, one message
# of F slots per call), the slot forced to BOUNCE bytes, for ARCOLL_LANES 1 and 4 and
# ARCOLL_PIPE_WINDOW 0 (the slot's lanes only: the protocol before pipes) and the default.
#
#   bench/pipe.sh [BUILD] [sim|smp|scale|all]
#
# Every constant comes from the same setup and run: lambda = T(8 B), the latency of an 8-byte
# exchange (one line each way, call overhead included); RTT = 2 lambda; tau = T(one slot) -
# T(8 B), what one fragment's bytes add; bound(F) = RTT + F tau; r = T(F slots) / bound(F).
# Simulator: virtual time, one run each (no noise), ib-edr (a NIC: o = 200 ns a put, L = 1 us)
# and host-shm (this host's calibration). Shared memory: arcoll-bench at np=2, median of
# ITERS iterations (a tenth above 8 KiB), ROUNDS rounds alternating the configurations; the
# lowest time of the rounds is kept (the least disturbed by the other jobs on a 2-core host).
# scale: the simulator (ib-edr, one rank a node) at 2-256 ranks with the default slots, which
# the region budget shrinks (16 KiB at 16 ranks, 1 KiB at 256): time with ARCOLL_PIPE_WINDOW=0
# over the default's, for the schedules that talk to O(log N) peers.
set -euo pipefail
BUILD=${1:-build}
WHAT=${2:-all}
SIM=$BUILD/bin/arcoll-sim
BENCH=$BUILD/bin/arcoll-bench
BOUNCE=${BOUNCE:-4096}
ROUNDS=${ROUNDS:-2}
ITERS=${ITERS:-1000}
FS="1 4 16 64 256"
CONFS="1:0 4:0 1:64k 4:64k" # lanes:pipe window
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# table FILE: rows "conf size us" -> the ratio table, one column per configuration
table() {
    awk -v b="$BOUNCE" -v fs="$FS" -v confs="$CONFS" '
        { t[$1 " " $2] = $3 }
        END {
            nc = split(confs, c, " ")
            nf = split(fs, f, " ")
            printf "%-6s %-9s", "F", "bytes"
            for (i = 1; i <= nc; i++) printf " %12s", "l" c[i]
            for (i = 1; i <= nc; i++) printf " %9s", "r l" c[i]
            printf "\n"
            for (i = 1; i <= nc; i++) {
                lam[i] = t[c[i] " 8"]
                tau[i] = t[c[i] " " b] - lam[i]
            }
            for (j = 1; j <= nf; j++) {
                s = f[j] * b
                printf "%-6d %-9d", f[j], s
                for (i = 1; i <= nc; i++) printf " %12.2f", t[c[i] " " s]
                for (i = 1; i <= nc; i++) printf " %9.2f", t[c[i] " " s] / (2 * lam[i] + f[j] * tau[i])
                printf "\n"
            }
            printf "# lambda (us):"
            for (i = 1; i <= nc; i++) printf " l%s %.3f", c[i], lam[i]
            printf "; tau (us):"
            for (i = 1; i <= nc; i++) printf " l%s %.3f", c[i], tau[i]
            printf "\n"
        }' "$1"
}

sizes() {
    local out=8
    for f in $FS; do out="$out,$((f * BOUNCE))"; done
    echo "$out"
}

if [ "$WHAT" = sim ] || [ "$WHAT" = all ]; then
    for params in ib-edr host-shm; do
        echo "# simulator, $params, 2 nodes, ring allgather, slot $BOUNCE B; columns: lanes:pipe"
        echo "# window (pipe 0: the protocol before pipes), times in us, r = time / bound"
        tmp=$(mktemp)
        for conf in $CONFS; do
            ARCOLL_LANES=${conf%%:*} "$SIM" -n 2 --ppn 1 --coll allgather --alg ring \
                --params $params --bounce "$BOUNCE" --pipe "${conf##*:}" --size "$(sizes)" \
                --iters 3 2>/dev/null | awk -v c="$conf" '$1 ~ /^[0-9]+$/ { print c, $1, $2 }' >>"$tmp"
        done
        table "$tmp"
        rm -f "$tmp"
        echo
    done
fi

if [ "$WHAT" = smp ] || [ "$WHAT" = all ]; then
    echo "# shared memory, np=2, ring allgather, ARCOLL_BOUNCE_SIZE=$BOUNCE; columns: lanes:pipe"
    echo "# window; best of $ROUNDS rounds of the median of $ITERS iterations, us; r = time / bound"
    tmp=$(mktemp)
    max=$(($(echo $FS | tr ' ' '\n' | tail -1) * BOUNCE))
    for round in $(seq "$ROUNDS"); do
        for conf in $CONFS; do
            ARCOLL_LANES=${conf%%:*} ARCOLL_PIPE_WINDOW=${conf##*:} ARCOLL_BOUNCE_SIZE=$BOUNCE \
                mpirun -np 2 --oversubscribe --bind-to none -x ARCOLL_LANES -x ARCOLL_PIPE_WINDOW \
                -x ARCOLL_BOUNCE_SIZE "$BENCH" -q -t allgather -a ring -m 8:$max -M 0 \
                -i "$ITERS" -x $((ITERS / 10)) --stat median -F csv 2>/dev/null |
                awk -F, -v c="$conf" '$1 == "allgather" { print c, $2, $9 }' >>"$tmp"
        done
    done
    sort -k1,1 -k2,2n -k3,3g "$tmp" | awk '!seen[$1 " " $2]++' >"$tmp.best"
    table "$tmp.best"
    rm -f "$tmp" "$tmp.best"
fi

if [ "$WHAT" = scale ] || [ "$WHAT" = all ]; then
    echo
    echo "# simulator, ib-edr, one rank a node, default slots; us, pipe 0 (before) and default"
    printf '%-5s %-10s %-6s %-8s %10s %10s %8s\n' n coll alg bytes pipe0 default ratio
    for n in 2 8 16 64 256; do
        for ca in allgather:ring allgather:rdd allgather:rdh allreduce:rdh alltoallv:sloav; do
            c=${ca%%:*} a=${ca##*:}
            size=262144
            [ "$n" -ge 64 ] && size=16384
            [ "$a" = sloav ] && size=$((size / 16))
            t=()
            for w in 0 64k; do
                t+=("$("$SIM" -n "$n" --ppn 1 --coll "$c" --alg "$a" --params ib-edr --pipe $w \
                    --size $size --iters 2 2>/dev/null | awk '$1 ~ /^[0-9]+$/ { print $2 }')")
            done
            awk -v n="$n" -v c="$c" -v a="$a" -v s="$size" -v t0="${t[0]}" -v t1="${t[1]}" \
                'BEGIN { printf "%-5d %-10s %-6s %-8d %10.1f %10.1f %8.2f\n", n, c, a, s, t0, t1, t0 / t1 }'
        done
    done
fi
