#!/usr/bin/env bash
# The alltoallv comparison of docs/measurements/sloav.md: Open MPI's MPI_Alltoallv and
# arcoll's pap, direct, sloav and sloavx side by side in one run per team shape
# (arcoll-bench-mpi), mean counts 1 B - 8 KiB per pair, MIF 0 and 32, on this host:
# 2 ranks (ranks <= cores), then 4, 8 and 16 (oversubscribed), sloavx on pretend nodes of 2
# and 4 ranks (ARCOLL_NODE_SIZE). Prints one markdown table per run: MPI's latency and each
# algorithm's latency over MPI's (< 1: faster than MPI), plus the raw CSV in OUTDIR.
# Usage: bench/a2av-sweep.sh BUILD_DIR OUTDIR [DIST] [ITERS]
set -eu
B=${1:-build}
OUT=${2:-a2av-sweep}
DIST=${3:-uniform}
ITERS=${4:-300}
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ALGS=mpi,pap,direct,sloav,sloavx

table() { # CSV -> markdown: size, MIF, mpi us, then alg/mpi per algorithm
    awk -F, -v algs="$ALGS" '
        NR == 1 { next }
        { key = $2 " " $3; if (!(key in seen)) { seen[key] = 1; order[++n] = key }
          lat[key, $8] = $9 }
        END {
            na = split(algs, a, ",")
            printf "| size (B) | MIF | MPI (us) |"
            for (i = 2; i <= na; i++) printf " %s/MPI |", a[i]
            printf "\n|---|---|---|"
            for (i = 2; i <= na; i++) printf "---|"
            printf "\n"
            for (k = 1; k <= n; k++) {
                split(order[k], f, " ")
                m = lat[order[k], "mpi"]
                printf "| %s | %s | %.2f |", f[1], f[2], m
                for (i = 2; i <= na; i++) printf " %.2f |", lat[order[k], a[i]] / m
                printf "\n"
            }
        }' "$1"
}

run() { # NAME NP NODE_SIZE
    local name=$1 np=$2 ns=$3 csv=$OUT/$1.csv
    env ${ns:+ARCOLL_NODE_SIZE=$ns} timeout 1800 mpirun --oversubscribe --bind-to none -np "$np" \
        "$B/bin/arcoll-bench-mpi" -t alltoallv -a "$ALGS" -m 1:8192 -M 0,32 -D "$DIST" \
        -i "$ITERS" -x 30 --stat median -q -F csv >"$csv"
    echo "### $np ranks${ns:+, pretend nodes of $ns} ($DIST counts)"
    echo
    table "$csv"
    echo
}

run np2 2 ""
run np4-nodes2 4 2
run np8-nodes2 8 2
run np8-nodes4 8 4
run np16-nodes4 16 4
run np16-nodes2 16 2
