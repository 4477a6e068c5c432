#!/usr/bin/env bash
# perf-sweep: arcoll through the PMPI shim against the MPI library itself, with an unmodified MPI
# benchmark (arcoll-mpi-lat), MPI_Alltoall and MPI_Allgather, 1 B-32 MiB per peer, per job size,
# with the memcpy limit; optionally a second arcoll build (e.g. an older commit) side by side.
#
#   bench/perf-sweep.sh BUILD OUTDIR [NP...]          (NP: 2 4 by default)
#   SWEEP_BEFORE=/path/to/old/build bench/perf-sweep.sh build /tmp/perf 2 4
#
# Per NP: SWEEP_REPS (3) repetitions of MIF 0 over SWEEP_SIZES (1:32m), each configuration a
# separate mpirun, configurations interleaved within a repetition; then MIF 32 and 512 once per
# configuration over SWEEP_SKEW_SIZES (1:1m); SWEEP_ITERS (1000) iterations per size.
# Configurations: `after` (BUILD's shim) and, with
# SWEEP_BEFORE, `before` (that build's shim). Every run measures Open MPI (the PMPI column) in the
# same run, so a ratio is always arcoll / Open MPI of one run; the tables give the median over
# repetitions of each run's ratio, Open MPI's and the memcpy limit's median times.
# Output in OUTDIR: one CSV per run, summary.csv, tables.md, ratio-np<NP>.png, commands.txt.
# SWEEP_REPORT_ONLY=1 makes the summary, tables and plots again from OUTDIR's CSVs.
set -euo pipefail
B=${1:?usage: bench/perf-sweep.sh BUILD OUTDIR [NP...]}
OUT=${2:?usage: bench/perf-sweep.sh BUILD OUTDIR [NP...]}
shift 2
NPS=("$@")
[ ${#NPS[@]} -gt 0 ] || NPS=(2 4)
REPS=${SWEEP_REPS:-3}
SIZES=${SWEEP_SIZES:-1:32m}
SKEW_SIZES=${SWEEP_SKEW_SIZES:-1:1m}
ITERS=${SWEEP_ITERS:-1000} # arcoll-mpi-lat -i: a tenth above 8 KiB, fewer above 1 MiB (>= 5)
CORES=$(nproc)
mkdir -p "$OUT"
[ -n "${SWEEP_REPORT_ONLY:-}" ] || : >"$OUT/commands.txt"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
CFGS=(after)
declare -A SHIM=([after]=$(realpath "$B/lib/libarcoll_mpi.so"))
if [ -n "${SWEEP_BEFORE:-}" ]; then
    CFGS=(before after)
    SHIM[before]=$(realpath "$SWEEP_BEFORE/lib/libarcoll_mpi.so")
fi
LAT=$(realpath "$B/bin/arcoll-mpi-lat")

# run NP CFG TAG MIFS SIZES: one arcoll-mpi-lat run into OUT/np<NP>-<CFG>-<TAG>.csv
run() {
    local np=$1 cfg=$2 tag=$3 mifs=$4 sizes=$5 extra=()
    [ "$np" -le "$CORES" ] || extra=(--oversubscribe --mca mpi_yield_when_idle 1)
    local cmd=(mpirun -np "$np" "${extra[@]}" env "LD_PRELOAD=${SHIM[$cfg]}" "$LAT" -t both
        -m "$sizes" -M "$mifs" -i "$ITERS" -x $((ITERS / 10)) -o "$OUT/np$np-$cfg-$tag.csv")
    echo "${cmd[*]}" >>"$OUT/commands.txt"
    echo "perf-sweep: np=$np $cfg $tag" >&2
    "${cmd[@]}" >"$OUT/np$np-$cfg-$tag.log" 2>&1 || {
        echo "perf-sweep: failed, see $OUT/np$np-$cfg-$tag.log" >&2
        exit 1
    }
}

for np in "${NPS[@]}"; do
    [ -z "${SWEEP_REPORT_ONLY:-}" ] || break
    for rep in $(seq 1 "$REPS"); do
        for cfg in "${CFGS[@]}"; do
            run "$np" "$cfg" "r$rep" 0 "$SIZES"
        done
    done
    for cfg in "${CFGS[@]}"; do
        run "$np" "$cfg" skew 32,512 "$SKEW_SIZES"
    done
done

# summary.csv: np,cfg,coll,bytes,mif,runs,ompi_us,arcoll_us,ratio,memcpy_us,memcpy_frac (medians)
for f in "$OUT"/np*-*-*.csv; do
    base=$(basename "$f" .csv)
    np=${base%%-*}
    np=${np#np}
    cfg=${base#*-}
    cfg=${cfg%-*}
    tail -n +2 "$f" | sed "s/^/$np,$cfg,/"
done | awk -F, '
function med(s,    n, v, i, j, t) {
    n = split(substr(s, 2), v, " ")
    for (i = 2; i <= n; i++)
        for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
{
    k = $1 "," $2 "," $3 "," $4 "," $5
    if (!(k in n)) order[++nk] = k
    n[k]++; pm[k] = pm[k] " " $9; ar[k] = ar[k] " " $8; ra[k] = ra[k] " " $10
    mc[k] = mc[k] " " $11; fr[k] = fr[k] " " $12
}
END {
    print "np,cfg,coll,bytes,mif,runs,ompi_us,arcoll_us,ratio,memcpy_us,memcpy_frac"
    for (i = 1; i <= nk; i++) {
        k = order[i]
        printf "%s,%d,%.3f,%.3f,%.3f,%.3f,%.3f\n", k, n[k], med(pm[k]), med(ar[k]), med(ra[k]),
            med(mc[k]), med(fr[k])
    }
}' >"$OUT/summary.csv"

# tables.md: per NP and collective, MIF 0 with every configuration's ratio; then the skew rows.
awk -F, -v cfgs="${CFGS[*]}" -v reps="$REPS" '
NR > 1 {
    k = $1 SUBSEP $3 SUBSEP $4 SUBSEP $5
    ratio[k SUBSEP $2] = $9; ompi[k] = $7; mcpy[k] = $10; frac[k SUBSEP $2] = $11
    if (!((k) in seen)) { seen[k] = 1; rows[$1 SUBSEP $3 SUBSEP $5] = rows[$1 SUBSEP $3 SUBSEP $5] " " $4 }
    nps[$1] = 1; mifs[$5] = 1
}
END {
    nc = split(cfgs, c, " ")
    split("alltoall allgather", colls, " ")
    for (np in nps) for (ci = 1; ci <= 2; ci++) for (mif = 0; mif <= 512; mif++) {
        if (!(mif in mifs)) continue
        key = np SUBSEP colls[ci] SUBSEP mif
        if (!(key in rows)) continue
        printf "\n### np=%s, %s, MIF %s%s\n\n", np, colls[ci], mif,
            mif == 0 ? " (median of " reps " runs)" : " (one run)"
        printf "| bytes per peer | Open MPI (us) |"
        for (j = 1; j <= nc; j++) printf " %s / Open MPI |", c[j]
        printf " memcpy (us) | memcpy / %s |\n|---|---|", c[nc]
        for (j = 1; j <= nc; j++) printf "---|"
        printf "---|---|\n"
        ns = split(substr(rows[key], 2), sz, " ")
        for (s = 1; s <= ns; s++) {
            k = np SUBSEP colls[ci] SUBSEP sz[s] SUBSEP mif
            printf "| %s | %.2f |", sz[s], ompi[k]
            for (j = 1; j <= nc; j++) printf " %.2f |", ratio[k SUBSEP c[j]]
            printf " %.2f | %.2f |\n", mcpy[k], frac[k SUBSEP c[nc]]
        }
    }
}' "$OUT/summary.csv" >"$OUT/tables.md"

# ratio-np<NP>.png: arcoll / Open MPI vs bytes per peer at MIF 0, one line per configuration and
# collective.
if command -v gnuplot >/dev/null; then
    for np in "${NPS[@]}"; do
        plots=()
        for cfg in "${CFGS[@]}"; do
            for coll in alltoall allgather; do
                awk -F, -v np="$np" -v cfg="$cfg" -v coll="$coll" \
                    'NR > 1 && $1 == np && $2 == cfg && $3 == coll && $5 == 0 { print $4, $9 }' \
                    "$OUT/summary.csv" >"$OUT/plot-np$np-$cfg-$coll.dat"
                plots+=("'$OUT/plot-np$np-$cfg-$coll.dat' using 1:2 with linespoints title '$cfg $coll'")
            done
        done
        joined=$(printf '%s, ' "${plots[@]}")
        gnuplot <<EOF
set terminal pngcairo size 900,500 noenhanced
set output '$OUT/ratio-np$np.png'
set title 'arcoll (PMPI shim) / Open MPI 4.1, np=$np, MIF 0, median of $REPS runs (lower is better)'
set logscale x 2
set format x '%.0b %BB'
set xlabel 'bytes per peer'
set ylabel 'latency ratio'
set yrange [0:2.5]
set grid
set key top left
plot ${joined} 1 with lines dt 2 lc rgb 'black' title 'parity', 0.8 with lines dt 3 lc rgb 'red' title 'target from 64 KiB'
EOF
    done
fi
cat "$OUT/tables.md"
