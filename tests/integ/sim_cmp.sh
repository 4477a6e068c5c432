#!/usr/bin/env bash
# Compare two arcoll-sim runs row by row (docs/scale.md, "Tests"): the model's virtual latencies
# are deterministic outputs, so an order between two configurations can be asserted.
# Usage: sim_cmp.sh SIM lt|eq ARGS_A... --vs ARGS_B...
#   lt: every row's avg_us of A is below B's; eq: equal to the nanosecond (printed with 3 decimals).
# Both runs must check every byte clean. Prints "sim_cmp: N passed, N failed".
set -u
sim=$1 op=$2
shift 2
a=()
while [ $# -gt 0 ] && [ "$1" != --vs ]; do
    a+=("$1")
    shift
done
shift
b=("$@")
ra=$("$sim" "${a[@]}" --csv) || { echo "sim_cmp: run A failed: ${a[*]}"; exit 1; }
rb=$("$sim" "${b[@]}" --csv) || { echo "sim_cmp: run B failed: ${b[*]}"; exit 1; }
# Columns: coll,alg,n,ppn,nodes,params,size,mif,late,avg_us,min_us,max_us,iters,corrupt
paste -d' ' <(tail -n +2 <<<"$ra" | cut -d, -f7,10,14 | tr , ' ') \
    <(tail -n +2 <<<"$rb" | cut -d, -f7,10,14 | tr , ' ') |
    awk -v op="$op" '
    NF != 6 { print "sim_cmp: the runs have different rows"; bad++; next }
    {
        ok = $3 == 0 && $6 == 0 && (op == "lt" ? $2 + 0 < $5 + 0 : $2 == $5)
        printf "%s size %s / %s: A %s us %s B %s us\n", ok ? "ok  " : "FAIL", $1, $4, $2, op, $5
        if (ok) good++; else bad++
    }
    END { printf "sim_cmp: %d passed, %d failed\n", good, bad; exit bad > 0 || good == 0 }'
