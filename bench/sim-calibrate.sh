#!/usr/bin/env bash
# Calibrate the simulator's host-shm parameter set on this host (docs/scale.md, "Calibration"):
# arcoll-chanperf --sim on 2 real ranks pinned to distinct cores measures the cost model of the
# smp channel (o, L, G, copy_G and the look of a wait loop); this repeats it CAL_REPS times and
# writes the median of each figure to OUT, a parameter file of arcoll-sim (--params OUT), with
# the date, the host, the load and the method in comments.
#   bench/sim-calibrate.sh BUILD OUT
# Environment: CAL_REPS (5), CAL_ITERS (1000: flag round trips per batch), CAL_LAUNCH (mpirun).
set -euo pipefail
B=${1:?usage: bench/sim-calibrate.sh BUILD OUT}
OUT=${2:?usage: bench/sim-calibrate.sh BUILD OUT}
REPS=${CAL_REPS:-5}
ITERS=${CAL_ITERS:-1000}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
read -ra LAUNCH <<<"${CAL_LAUNCH:-mpirun --bind-to core}"
[ -x "$B/bin/arcoll-chanperf" ] || { echo "sim-calibrate: no $B/bin/arcoll-chanperf (make)" >&2; exit 2; }
RUNS=$(mktemp)
trap 'rm -f "$RUNS"' EXIT
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for rep in $(seq 1 "$REPS"); do
    # One run's lines, each prefixed with the run's number.
    "${LAUNCH[@]}" -np 2 "$B/bin/arcoll-chanperf" --sim "$ITERS" | sed "s/^/$rep /" >>"$RUNS" || {
        echo "sim-calibrate: arcoll-chanperf --sim failed (run $rep)" >&2
        exit 1
    }
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
# The median over runs of one key.
med() {
    awk -v k="$1" '$2 == k { print $3 }' "$RUNS" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) exit 1; print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
o=$(med intra_o) L=$(med intra_L) G=$(med intra_G) cg=$(med copy_G) look=$(med poll) ||
    { echo "sim-calibrate: a run printed no parameters" >&2; exit 1; }
# A waiting rank notices a word another core wrote one cache-line transfer later: the half flag
# round trip (o + L), which is what the simulator's poll stands for (node memory is written
# without the channel, so the model has no L of its own for it), not the loop's look alone.
poll=$(awk -v o="$o" -v l="$L" 'BEGIN { printf "%.2f", o + l }')
cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
{
    echo "# host-shm measured by bench/sim-calibrate.sh on $(hostname) ($cpu, $(nproc) cores)"
    echo "# date $(date -u '+%Y-%m-%d %H:%M UTC'); load average (1/5/15 min) before $load0, after $load1"
    echo "# method: $REPS runs of '${LAUNCH[*]} -np 2 arcoll-chanperf --sim $ITERS' (smp channel,"
    echo "# 2 ranks on distinct cores), each figure a median over batches; below the median over runs."
    echo "# Within a host there is no NIC: the inter-node values repeat the intra-node ones, g 0."
    echo "# poll = intra_o + intra_L (a word another core wrote is seen one transfer later);"
    echo "# the wait loop's own look measured $look ns. The runs:"
    sed 's/^/#   /' "$RUNS"
    echo "name host-shm-measured"
    echo "intra_o $o"
    echo "intra_L $L"
    echo "intra_G $G"
    echo "inter_o $o"
    echo "inter_L $L"
    echo "inter_G $G"
    echo "inter_g 0"
    echo "copy_G $cg"
    echo "poll $poll"
} >"$OUT"
echo "sim-calibrate: wrote $OUT: o $o L $L G $G copy_G $cg poll $poll (load $load0 -> $load1)"
