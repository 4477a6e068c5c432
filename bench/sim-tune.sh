#!/usr/bin/env bash
# sim-tune: tuning rules for jobs of 2+ nodes from the scale simulator (docs/scale.md, "Tuning at
# scale"). Every algorithm of alltoall, allgather, alltoallv and allreduce runs in arcoll-sim at
# each shape (NODESxPPN) and size; per cell the fastest algorithm (mean virtual latency) and its
# margin over the runner-up are printed, and the cells where something beats pap (what auto runs
# without a rule) by more than SIMTUNE_TIE become candidate rules (alltoall and allgather: the
# collectives the tuning table takes algorithm rules for; the others are reported only).
#
#   bench/sim-tune.sh BUILD OUT          (OUT: a directory; made if missing)
#
# Writes OUT/sim.csv (every run's rows, arcoll-sim --csv), OUT/winners.txt (the table) and
# OUT/rules.tune (candidate rules, one per cell, each with its cell and margin as a comment;
# ARCOLL_TUNE=file:OUT/rules.tune accepts it as is). The model is virtual: the runs are
# deterministic, so one repetition suffices and the machine's load does not matter.
# Environment:
#   SIMTUNE_SHAPES  "2x1 4x1 16x1 64x1 2x8 8x8 16x16 64x16" (NODESxPPN)
#   SIMTUNE_SIZES   "8 64 512 4096 32768 65536" (bytes per rank; allreduce: of the vector)
#   SIMTUNE_COLLS   "alltoall allgather alltoallv allreduce"
#   SIMTUNE_PARAMS  ib-edr (a parameter set with a NIC: rules say chan=verbs)
#   SIMTUNE_BUDGET  2^28: a size runs at N ranks only while N x N x size (an alltoall's bytes
#                   moved, real payloads) stays within it; larger cells are left out ("-")
#   SIMTUNE_ITERS   1, SIMTUNE_WARMUP 1, SIMTUNE_BOUNCE (ARCOLL_BOUNCE_SIZE at N >= 256: 4096)
#   SIMTUNE_TIE     0.05: a rule only where the winner beats pap by more than this fraction
#   SIMTUNE_JOBS    1 (simulations run at once)
#   SIMTUNE_ALGS    run only these algorithms (e.g. auto, to check a new table against the
#                   sweep); the other runs already in OUT/runs are kept
#   SIMTUNE_RUN     0: run nothing, only summarize OUT/runs (e.g. while a sweep still runs)
# The model in use is whatever BUILD's arcoll-sim implements (its header line is kept in
# OUT/model.txt): re-run after a model change and compare the rules.
set -euo pipefail
B=${1:?usage: bench/sim-tune.sh BUILD OUT}
OUT=${2:?usage: bench/sim-tune.sh BUILD OUT}
SIM=$B/bin/arcoll-sim
[ -x "$SIM" ] || { echo "sim-tune: no $SIM (make BUILD=$B)" >&2; exit 2; }
SHAPES=${SIMTUNE_SHAPES:-2x1 4x1 16x1 64x1 2x8 8x8 16x16 64x16}
SIZES=${SIMTUNE_SIZES:-8 64 512 4096 32768 65536}
COLLS=${SIMTUNE_COLLS:-alltoall allgather alltoallv allreduce}
PARAMS=${SIMTUNE_PARAMS:-ib-edr}
BUDGET=${SIMTUNE_BUDGET:-268435456}
ITERS=${SIMTUNE_ITERS:-1}
WARMUP=${SIMTUNE_WARMUP:-1}
BOUNCE=${SIMTUNE_BOUNCE:-4096}
TIE=${SIMTUNE_TIE:-0.05}
JOBS=${SIMTUNE_JOBS:-1}
mkdir -p "$OUT/runs"

# Algorithms per collective; node algorithms only where a node holds 2+ ranks (sh_co needs one
# node: never at 2+ nodes).
algs() {
    local coll=$1 ppn=$2
    case $coll in
    alltoall)
        echo direct pap mn_co
        [ "$ppn" -lt 2 ] || echo shm_direct pap_shm sa sa_direct rd leader
        ;;
    allgather)
        echo direct pap ring rdd rdh mn_co
        [ "$ppn" -lt 2 ] || echo shm_direct pap_shm
        ;;
    alltoallv) echo direct pap sloav sloavx ;;
    allreduce) echo direct pap ring rdd rdh ;;
    esac
}

# One simulation: every size of the cell that fits the budget, one process.
run_one() {
    local coll=$1 alg=$2 nodes=$3 ppn=$4 n=$(($3 * $4)) sizes="" s extra=()
    for s in $SIZES; do
        [ $((n * n * s)) -le "$BUDGET" ] || continue
        [ "$coll" != allreduce ] || [ $((s % 8)) -eq 0 ] || continue
        sizes=${sizes:+$sizes,}$s
    done
    [ -n "$sizes" ] || return 0
    [ "$n" -lt 256 ] || extra=(--bounce "$BOUNCE")
    local f="$OUT/runs/$coll-$alg-${nodes}x$ppn"
    if ! "$SIM" -n "$n" --ppn "$ppn" --coll "$coll" --alg "$alg" --size "$sizes" --iters "$ITERS" \
        --warmup "$WARMUP" --params "$PARAMS" --csv "${extra[@]}" >"$f.csv" 2>"$f.err"; then
        echo "sim-tune: $coll $alg ${nodes}x$ppn failed (see $f.err)" >&2
        : >"$f.csv"
    fi
}

"$SIM" -n 2 --coll alltoall --size 8 --iters 1 --params "$PARAMS" 2>/dev/null >"$OUT/model.txt"
todo=()
for shape in $SHAPES; do
    nodes=${shape%x*} ppn=${shape#*x}
    for coll in $COLLS; do
        for alg in ${SIMTUNE_ALGS:-$(algs "$coll" "$ppn") auto}; do
            todo+=("$coll $alg $nodes $ppn")
        done
    done
done
[ "${SIMTUNE_RUN:-1}" != 0 ] || todo=()
i=0
for job in ${todo[@]+"${todo[@]}"}; do
    i=$((i + 1))
    echo "sim-tune: $i/${#todo[@]}: $job" >&2
    # shellcheck disable=SC2086
    run_one $job &
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
done
wait
: >"$OUT/sim.csv"
for f in "$OUT"/runs/*.csv; do
    [ -s "$OUT/sim.csv" ] || head -n1 "$f" >"$OUT/sim.csv"
    tail -n +2 "$f" >>"$OUT/sim.csv"
done

# Winners per cell (auto's rows are not candidates: they show what the table picks now).
awk -F, -v tie="$TIE" -v params="$PARAMS" '
NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
{
    c = $col["coll"]; a = $col["alg"]; key = c SUBSEP $col["nodes"] SUBSEP $col["ppn"] SUBSEP $col["size"]
    lat = $col["avg_us"] + 0
    if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
    if (a == "auto") { auto_lat[key] = lat; auto_ran[key] = ("ran" in col) ? $col["ran"] : "?"; next }
    if ($col["corrupt"] + 0 > 0) { bad[key] = bad[key] " " a; next }
    # an algorithm that cannot run the cell falls back (ran names what ran): not a candidate
    if (("ran" in col) && $col["ran"] != a) { fell[key] = fell[key] " " a; next }
    if (a == "pap") pap[key] = lat
    # ties go to pap (what auto runs without a rule)
    if (!(key in best) || lat < best[key] || (lat == best[key] && a == "pap")) { second[key] = best[key]; salg[key] = balg[key]; best[key] = lat; balg[key] = a }
    else if (!(key in second) || second[key] == "" || lat < second[key]) { second[key] = lat; salg[key] = a }
}
function sz(v) { return v >= 1024 && v % 1024 == 0 ? (v / 1024) "k" : v }
END {
    printf "# %-9s %6s %4s %7s  %-10s %10s  %-10s %6s  %7s  %-10s %7s\n", "coll", "nodes", "ppn", "size",
        "best", "us", "runner-up", "x", "pap/best", "auto ran", "auto/best"
    for (k = 1; k <= nk; k++) {
        split(keys[k], f, SUBSEP)
        if (!(keys[k] in best)) continue
        key = keys[k]
        r = second[key] != "" ? second[key] / best[key] : 0
        p = (key in pap) ? pap[key] / best[key] : 0
        al = (key in auto_lat) ? sprintf("%.2f", auto_lat[key] / best[key]) : "-"
        printf "  %-9s %6d %4d %7s  %-10s %10.3f  %-10s %6.2f  %7.2f  %-10s %7s%s\n", f[1], f[2], f[3], f[4],
            balg[key], best[key], salg[key], r, p, (key in auto_ran) ? auto_ran[key] : "-", al,
            ((key in bad) ? "  corrupt:" bad[key] : "") ((key in fell) ? "  fell back:" fell[key] : "")
        print f[1], f[2], f[3], f[4], balg[key], p > "/dev/fd/3"
    }
}' "$OUT/sim.csv" 3>"$OUT/cells.txt" | LC_ALL=C sort -b -k1,1 -k2,2n -k3,3n -k4,4n >"$OUT/winners.txt"
cat "$OUT/winners.txt"

# Candidate rules: per (coll, shape), runs of consecutive sampled sizes with the same winner
# that beats pap by more than TIE; a run covers from its first size to the next sampled size
# (the first from 0, the last to inf).
awk -v tie="$TIE" -v params="$PARAMS" -v sizes="$SIZES" '
BEGIN { ns = split(sizes, S, " "); for (i = 1; i <= ns; i++) idx[S[i]] = i }
function sz(v) { return v >= 1024 && v % 1024 == 0 ? (v / 1024) "k" : v }
$1 == "alltoall" || $1 == "allgather" {
    key = $1 " " $2 " " $3; if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
    win[key, idx[$4]] = ($6 > 1 + tie) ? $5 : ""; marg[key, idx[$4]] = $6
}
END {
    print "; candidate rules from bench/sim-tune.sh, params " params ", sizes " sizes
    print "; a rule per run of sizes where the winner beats pap by more than " tie
    for (k = 1; k <= nk; k++) {
        split(order[k], f, " ")
        for (i = 1; i <= ns; i = j) {
            for (j = i + 1; j <= ns && win[order[k], j] == win[order[k], i] && ((order[k], j) in win); j++) ;
            if (!((order[k], i) in win) || win[order[k], i] == "") continue
            lo = i == 1 ? 0 : S[i]; hi = j > ns ? "inf" : sz(S[j])
            m = ""
            for (x = i; x < j; x++) m = m sprintf(" %s:%.2f", sz(S[x]), marg[order[k], x])
            printf "; %s %sx%s, pap/best at%s\n", f[1], f[2], f[3], m
            printf "%s:%s-%s:ppn=%s:nodes=%s:over=no:chan=verbs:@%s\n", f[1], sz(lo), hi, f[3], f[2],
                win[order[k], i]
        }
    }
}' "$OUT/cells.txt" >"$OUT/rules.tune"
cat "$OUT/rules.tune"
