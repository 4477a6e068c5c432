#!/usr/bin/env bash
# Prediction vs measurement (docs/scale.md, "Calibration"): for each algorithm, rank count and
# size, arcoll-bench measures the collective on this host (real ranks, smp channel, copy path,
# no skew, every call validated) and arcoll-sim predicts it (one node of N ranks, the same
# collective, sizes, iterations and no skew). Prints one row per case:
#   N coll alg size measured_us predicted_us error_% cal_L_ns note
# measured: median over CMP_REPS runs of the bench's --stat median (the median over iterations
# of the mean over ranks); predicted: the simulator's mean over ranks and calls (deterministic);
# error = (predicted - measured) / measured, signed; cal_L_ns: the L of the parameters the
# prediction used. note: "node-lb" for the node-segment algorithms (their intra-node copies are
# free in the model: lower bounds), "over" when N exceeds the cores (no CPU sharing in the model),
# "moved" when the calibration after the bench runs found L more than 2x off the one before.
# The simulator runs CMP_SIM_ITERS calls (10, after 2): without skew every call of a virtual run
# costs the same, so more would only cost time.
#   bench/sim-compare.sh BUILD PARAMS|measure
# PARAMS: a set or file of arcoll-sim --params. measure: calibrate (bench/sim-calibrate.sh,
# CAL_REPS 1) before and after the bench runs of each (N, collective, size) and predict with the
# one before: this host's figures move by 5x when the hypervisor moves its vCPUs (docs/scale.md,
# "Calibration"), so a row is only fair against a calibration taken just before it.
# Environment: CMP_NS ("2 4 8"), CMP_SIZES ("8 1024 65536"), CMP_CASES (coll:alg,alg;...: every
# family that runs on one host), CMP_ITERS (200; the bench runs a tenth above 8 KiB),
# CMP_WARMUP (20), CMP_REPS (3), CMP_LAUNCH (mpirun --oversubscribe --bind-to none).
# Exits 1 if a bench, calibration or simulator run fails, or a call's data was wrong.
set -euo pipefail
B=${1:?usage: bench/sim-compare.sh BUILD PARAMS}
PARAMS=${2:?usage: bench/sim-compare.sh BUILD PARAMS|measure}
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
CAL=(env CAL_REPS="${CAL_REPS:-1}" "$(dirname "$0")/sim-calibrate.sh" "$B")
SIM_ITERS=${CMP_SIM_ITERS:-10}

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

# The L of a parameter set or file.
param_l() {
    "$B/bin/arcoll-sim" -n 1 --size 0 --params "$1" 2>/dev/null |
        sed -n 's/.*(intra o [^ ]* L \([^ ]*\) .*/\1/p'
}

# predict N COLL ALG SIZE PARAMS NOTE: appends "N coll alg size avg_us L note".
predict() {
    local n=$1 coll=$2 alg=$3 size=$4 params=$5 note=$6 out=$TMP/sim.out l
    l=$(param_l "$params") || l='?' # a bad set fails the run below, with its message
    if ! "$B/bin/arcoll-sim" -n "$n" --ppn "$n" --coll "$coll" --alg "$alg" --size "$size" \
        --iters "$SIM_ITERS" --warmup 2 --params "$params" --csv >"$out" 2>&1; then
        echo "sim-compare: arcoll-sim failed: N $n $coll $alg:" >&2
        tail -n 15 "$out" >&2
        return 1
    fi
    # CSV: coll,alg,n,ppn,nodes,params,size,mif,late,avg_us,min_us,max_us,iters,corrupt
    awk -F, -v l="${l:-?}" -v note="$note" \
        '$1 != "coll" && NF == 14 && $14 == 0 { print $3, $1, $2, $7, $10, l, note }' "$out" >>"$PRED"
}

IFS=';' read -ra cases <<<"$CASES"
for n in $NS; do
    for c in "${cases[@]}"; do
        coll=${c%%:*} algs=${c#*:}
        for size in $SIZES; do
            params=$PARAMS moved=
            if [ "$PARAMS" = measure ]; then
                params=$TMP/params.$n.$coll.$size
                "${CAL[@]}" "$params" >&2
            fi
            echo "sim-compare: N $n $coll $algs $size B" >&2
            measure "$n" "$coll" "$algs" "$size"
            if [ "$PARAMS" = measure ]; then
                "${CAL[@]}" "$TMP/after" >&2
                moved=$(awk -v a="$(param_l "$params")" -v b="$(param_l "$TMP/after")" \
                    'BEGIN { if (a > 2 * b || b > 2 * a) print "moved" }')
            fi
            for alg in ${algs//,/ }; do
                predict "$n" "$coll" "$alg" "$size" "$params" "$moved"
            done
        done
    done
done

echo "# sim-compare: $CORES cores; load average $(cut -d' ' -f1-3 /proc/loadavg); params $PARAMS"
echo "# measured: arcoll-bench -p copy -M 0 --stat median, median of $REPS runs; predicted: arcoll-sim --ppn N"
printf '%-3s %-10s %-10s %7s %12s %12s %8s %8s %s\n' N coll alg size measured_us predicted_us \
    error_% cal_L_ns note
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
                read -r p l note < <(awk -v n="$n" -v c="$coll" -v a="$alg" -v s="$size" \
                    '$1 == n && $2 == c && $3 == a && $4 == s { print $5, $6, $7; exit }' "$PRED") || true
                if [ -z "$m" ] || [ -z "$p" ]; then
                    what=measurement
                    [ -n "$m" ] && what=prediction
                    echo "sim-compare: no $what for N $n $coll $alg $size B" >&2
                    missing=$((missing + 1))
                    continue
                fi
                [[ $NODE_ALGS == *" $alg "* ]] && note=${note:+$note,}node-lb
                [ "$n" -gt "$CORES" ] && note=${note:+$note,}over
                awk -v n="$n" -v c="$coll" -v a="$alg" -v s="$size" -v m="$m" -v p="$p" -v l="$l" \
                    -v note="$note" 'BEGIN { printf "%-3s %-10s %-10s %7s %12.3f %12.3f %+8.1f %8s %s\n",
                        n, c, a, s, m, p, (m > 0 ? 100 * (p - m) / m : 0), l, note }'
            done
        done
    done
done
[ $missing -eq 0 ] || { echo "sim-compare: $missing rows missing" >&2; exit 1; }
