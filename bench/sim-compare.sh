#!/usr/bin/env bash
# Prediction vs measurement (docs/scale.md, "Calibration"): for each algorithm, rank count and
# size, arcoll-bench measures the collective on this host (real ranks, smp channel, copy path,
# no skew, every call validated) and arcoll-sim predicts it with PARAMS (one node of N ranks, the
# same collective, sizes and no skew). Prints one row per case:
#   N coll alg size measured_us predicted_us error_% note
# measured: median over CMP_REPS runs of the bench's --stat median (the median over iterations
# of the mean over ranks); predicted: the simulator's mean over ranks and calls (deterministic);
# error = (predicted - measured) / measured, signed. note: "node-lb" for the node-segment
# algorithms (their intra-node copies are free in the model: lower bounds), "over" when N
# exceeds the cores (the model has no CPU sharing).
#   bench/sim-compare.sh BUILD PARAMS
# Environment: CMP_NS ("2 4 8"), CMP_SIZES ("8 1024 65536"), CMP_CASES (coll:alg,alg;...: every
# family that runs on one host), CMP_ITERS (200; the bench runs a tenth above 8 KiB),
# CMP_WARMUP (20), CMP_REPS (3), CMP_LAUNCH (mpirun --oversubscribe --bind-to none).
# Exits 1 if a bench or simulator run fails, or a call's data was wrong.
set -euo pipefail
B=${1:?usage: bench/sim-compare.sh BUILD PARAMS}
PARAMS=${2:?usage: bench/sim-compare.sh BUILD PARAMS}
NS=${CMP_NS:-2 4 8}
SIZES=${CMP_SIZES:-8 1024 65536}
CASES=${CMP_CASES:-alltoall:pap,direct,pap_shm,shm_direct,sa,rd,leader;allgather:pap,direct,ring,rdd,rdh;alltoallv:pap,sloav;allreduce:ring,rdd,rdh}
ITERS=${CMP_ITERS:-200}
WARMUP=${CMP_WARMUP:-20}
REPS=${CMP_REPS:-3}
NODE_ALGS=" pap_shm shm_direct sa sa_direct rd leader sloavx "
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
read -ra LAUNCH <<<"${CMP_LAUNCH:-mpirun --oversubscribe --bind-to none}"
CORES=$(nproc)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for p in arcoll-bench arcoll-sim; do
    [ -x "$B/bin/$p" ] || { echo "sim-compare: no $B/bin/$p (make)" >&2; exit 2; }
done
MEAS=$TMP/meas PRED=$TMP/pred
: >"$MEAS"
: >"$PRED"

# measure N COLL ALGS SIZE: appends "N coll alg size lat_us" per algorithm and repetition.
measure() {
    local n=$1 coll=$2 algs=$3 size=$4 extra=() out=$TMP/bench.out
    # More ranks than cores: the bench's waits sleep instead of spinning (its own default).
    [ "$n" -gt "$CORES" ] && extra=(--mca mpi_yield_when_idle 1)
    for rep in $(seq 1 "$REPS"); do
        if ! "${LAUNCH[@]}" "${extra[@]}" -np "$n" "$B/bin/arcoll-bench" -t "$coll" -a "$algs" \
            -p copy -m "$size:$size" -M 0 -i "$ITERS" -x "$WARMUP" -c -q --stat median -F csv \
            >"$out" 2>&1 || ! grep -q "^# validation: [0-9]* passed, 0 failed" "$out"; then
            echo "sim-compare: arcoll-bench failed: N $n $coll $algs $size B (run $rep):" >&2
            tail -n 15 "$out" >&2
            return 1
        fi
        # CSV rows: coll,size,mif,late,T_us,bound_us,memcpy_us,alg,lat_us,...
        awk -F, -v n="$n" '$1 !~ /^#/ && $1 != "coll" && NF > 9 { print n, $1, $8, $2, $9 }' \
            "$out" >>"$MEAS"
    done
}

# predict N COLL ALG: appends "N coll alg size avg_us" per size.
predict() {
    local n=$1 coll=$2 alg=$3 out=$TMP/sim.out
    if ! "$B/bin/arcoll-sim" -n "$n" --ppn "$n" --coll "$coll" --alg "$alg" \
        --size "$(echo "$SIZES" | tr ' ' ,)" --iters 10 --warmup 2 --params "$PARAMS" --csv \
        >"$out" 2>&1; then
        echo "sim-compare: arcoll-sim failed: N $n $coll $alg:" >&2
        tail -n 15 "$out" >&2
        return 1
    fi
    # CSV: coll,alg,n,ppn,nodes,params,size,mif,late,avg_us,min_us,max_us,iters,corrupt
    awk -F, '$1 != "coll" && NF == 14 && $14 == 0 { print $3, $1, $2, $7, $10 }' "$out" >>"$PRED"
}

IFS=';' read -ra cases <<<"$CASES"
for n in $NS; do
    for c in "${cases[@]}"; do
        coll=${c%%:*} algs=${c#*:}
        for size in $SIZES; do
            echo "sim-compare: N $n $coll $algs $size B" >&2
            measure "$n" "$coll" "$algs" "$size"
        done
        for alg in ${algs//,/ }; do
            predict "$n" "$coll" "$alg"
        done
    done
done

echo "# sim-compare: params $PARAMS; $CORES cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# measured: arcoll-bench -p copy -M 0 --stat median, median of $REPS runs; predicted: arcoll-sim --ppn N"
printf '%-3s %-10s %-10s %7s %12s %12s %8s %s\n' N coll alg size measured_us predicted_us error_% note
# Join: every expected (N, coll, alg, size) must have a measurement and a prediction.
missing=0
for n in $NS; do
    for c in "${cases[@]}"; do
        coll=${c%%:*} algs=${c#*:}
        for alg in ${algs//,/ }; do
            for size in $SIZES; do
                m=$(awk -v n="$n" -v c="$coll" -v a="$alg" -v s="$size" \
                    '$1 == n && $2 == c && $3 == a && $4 == s { print $5 }' "$MEAS" | sort -g |
                    awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
                p=$(awk -v n="$n" -v c="$coll" -v a="$alg" -v s="$size" \
                    '$1 == n && $2 == c && $3 == a && $4 == s { print $5; exit }' "$PRED")
                if [ -z "$m" ] || [ -z "$p" ]; then
                    echo "sim-compare: no ${m:+prediction}${m:-measurement} for N $n $coll $alg $size B" >&2
                    missing=$((missing + 1))
                    continue
                fi
                note=
                [[ $NODE_ALGS == *" $alg "* ]] && note=node-lb
                [ "$n" -gt "$CORES" ] && note=${note:+$note,}over
                awk -v n="$n" -v c="$coll" -v a="$alg" -v s="$size" -v m="$m" -v p="$p" -v note="$note" \
                    'BEGIN { printf "%-3s %-10s %-10s %7s %12.3f %12.3f %+8.1f %s\n", n, c, a, s, m, p,
                             (m > 0 ? 100 * (p - m) / m : 0), note }'
            done
        done
    done
done
[ $missing -eq 0 ] || { echo "sim-compare: $missing rows missing" >&2; exit 1; }
