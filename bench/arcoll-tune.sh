#!/usr/bin/env bash
# arcoll-tune: measure this machine's copy / zero-copy crossover for alltoall and allgather,
# separately for jobs with ranks <= cores and oversubscribed ones, and write a tune file of
# path rules (docs/configuration.md, "Path rules") that ARCOLL_TUNE=file:OUT uses; through the
# shim (TUNE_BENCH=shim) also serve rules: the sizes where Open MPI was faster than arcoll on
# both paths, which the shim then hands to Open MPI (@mpi).
#
#   bench/arcoll-tune.sh BUILD OUT.tune [NP...]        (NP: 2 4 by default)
#
# Per NP, TUNE_BENCH=bench (the default): arcoll-bench runs `pap/copy,pap/zcopy` side by side
# (the same calls alternate paths, so noise hits both), MIF 0, median latency per size;
# TUNE_BENCH=shim: an unmodified MPI benchmark (arcoll-mpi-lat) through the PMPI shim, one run
# per path (ARCOLL_PATH=copy, =zcopy, alternating), each size's latency taken as a ratio to Open
# MPI's in the same run (which cancels the run-to-run drift of a shared machine). TUNE_REPS
# times; the medians of the repetitions decide. The crossover of a collective is the smallest size from which zero-copy is
# never more than TUNE_TIE (3%) slower than copy at any larger size: ties go to zero-copy, which
# moves every byte once instead of twice. A serve rule (shim only) covers each run of sizes at
# which the faster path is more than TUNE_TIE slower than Open MPI. A job's shape is over=yes when NP exceeds the cores
# (nproc), else over=no; rules carry chan=smp (the channel measured).
# Environment: TUNE_LAUNCH (mpirun; as root add the ALLOW_RUN_AS_ROOT variables), TUNE_BENCH,
# TUNE_SIZES (1k:4m; shim: 1:4m), TUNE_REPS (3), TUNE_TIE (0.03), TUNE_ITERS (the benchmark's -i; its
# default, 1000 for shim), TUNE_PRELOAD (shim: LD_PRELOAD; BUILD's libarcoll_mpi.so).
# The measurements are kept in OUT.csv; the medians go into OUT as comments (";" lines).
set -euo pipefail
B=${1:?usage: bench/arcoll-tune.sh BUILD OUT.tune [NP...]}
OUT=${2:?usage: bench/arcoll-tune.sh BUILD OUT.tune [NP...]}
shift 2
NPS=("$@")
[ ${#NPS[@]} -gt 0 ] || NPS=(2 4)
SIZES=${TUNE_SIZES:-1k:4m}
[ "${TUNE_BENCH:-bench}" = shim ] && SIZES=${TUNE_SIZES:-1:4m}
REPS=${TUNE_REPS:-3}
TIE=${TUNE_TIE:-0.03}
CORES=$(nproc)
LAUNCH=${TUNE_LAUNCH:-mpirun}
MODE=${TUNE_BENCH:-bench}
case $MODE in
bench) BENCH=$B/bin/arcoll-bench UNIT=us ;;
shim)
    BENCH=$B/bin/arcoll-mpi-lat UNIT="x Open MPI" ITERS=${TUNE_ITERS:-1000}
    PRELOAD=${TUNE_PRELOAD:-$(realpath "$B/lib/libarcoll_mpi.so")}
    ;;
*) echo "arcoll-tune: TUNE_BENCH=bench or shim, not $MODE" >&2; exit 2 ;;
esac
[ -x "$BENCH" ] || { echo "arcoll-tune: no $BENCH (make BUILD=$B; shim: needs mpicc)" >&2; exit 2; }
CSV=$OUT.csv
: >"$CSV"

for np in "${NPS[@]}"; do
    over=no
    extra=()
    if [ "$np" -gt "$CORES" ]; then
        over=yes
        extra=(--oversubscribe --mca mpi_yield_when_idle 1)
    fi
    [ "$LAUNCH" = mpirun ] || extra=()
    for rep in $(seq 1 "$REPS"); do
        echo "arcoll-tune: np=$np over=$over repetition $rep/$REPS" >&2
        if [ "$MODE" = bench ]; then
            # shellcheck disable=SC2086
            $LAUNCH -np "$np" "${extra[@]}" "$BENCH" -t both -a pap/copy,pap/zcopy -m "$SIZES" \
                -M 0 --stat median -F csv -q ${TUNE_ITERS:+-i $TUNE_ITERS} |
                awk -F, -v np="$np" -v over="$over" -v rep="$rep" '$1 == "alltoall" ||
                    $1 == "allgather" { print np "," over "," rep "," $1 "," $2 "," $8 "," $9 }' \
                    >>"$CSV"
            continue
        fi
        for path in copy zcopy; do
            # @arcoll: measure arcoll at every size, whatever the serve rules in force say.
            $LAUNCH -np "$np" "${extra[@]}" env ARCOLL_PATH=$path LD_PRELOAD="$PRELOAD" \
                ARCOLL_TUNE="alltoall:0-inf:@arcoll#allgather:0-inf:@arcoll" \
                "$BENCH" -t both -m "$SIZES" \
                -M 0 -i "$ITERS" -x $((ITERS / 10)) -o "$OUT.run.csv" >/dev/null
            awk -F, -v np="$np" -v over="$over" -v rep="$rep" -v col="pap/$path" 'NR > 1 {
                print np "," over "," rep "," $1 "," $2 "," col "," $8 }' "$OUT.run.csv" >>"$CSV"
        done
        rm -f "$OUT.run.csv"
    done
done

# CSV: np,over,rep,coll,size,column,latency. Medians over repetitions, then the crossover.
awk -F, -v tie="$TIE" -v cores="$CORES" -v sizes="$SIZES" -v reps="$REPS" -v mode="$MODE" \
    -v unit="$UNIT" '
function median(key,    n, i, j, t, v) {
    n = split(vals[key], v, " ")
    for (i = 2; i <= n; i++)
        for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
function human(b) {
    if (b >= 1048576 && b % 1048576 == 0) return (b / 1048576) "m"
    if (b >= 1024 && b % 1024 == 0) return (b / 1024) "k"
    return b
}
{
    k = $1 SUBSEP $4 SUBSEP $5 SUBSEP $6
    vals[k] = vals[k] " " $7
    shape[$1] = $2; colls[$4] = 1; sz[$5] = 1; nps[$1] = 1
}
END {
    ns = 0
    for (s in sz) list[++ns] = s + 0
    for (i = 2; i <= ns; i++)
        for (j = i; j > 1 && list[j - 1] > list[j]; j--) { t = list[j]; list[j] = list[j - 1]; list[j - 1] = t }
    if (mode == "bench") {
        printf "; arcoll-tune: path rules measured on this machine (%d cores), arcoll-bench\n", cores
        printf "; -t both -a pap/copy,pap/zcopy -m %s -M 0 --stat median, median of %d runs;\n", sizes, reps
    } else {
        printf "; arcoll-tune: path rules measured on this machine (%d cores), arcoll-mpi-lat\n", cores
        printf "; through libarcoll_mpi.so, -t both -m %s -M 0, ARCOLL_PATH=copy and =zcopy, latency\n", sizes
        printf "; over Open MPI in the same run, median of %d runs;\n", reps
    }
    printf "; zero-copy from the smallest size after which it is never > %.0f%% slower.\n", tie * 100
    if (mode == "shim")
        printf "; @mpi (the shim hands the call to Open MPI) where both paths are > %.0f%% slower.\n", tie * 100
    for (np in nps) for (c in colls) {
        cross = -1
        printf "; np=%s over=%s %s: size copy(%s) zcopy(%s) zcopy/copy\n", np, shape[np], c, unit, unit
        for (i = 1; i <= ns; i++) {
            kc = np SUBSEP c SUBSEP list[i] SUBSEP "pap/copy"
            kz = np SUBSEP c SUBSEP list[i] SUBSEP "pap/zcopy"
            if (!(kc in vals) || !(kz in vals)) continue
            mc = median(kc); mz = median(kz)
            printf ";   %9d %10.2f %10.2f %6.2f\n", list[i], mc, mz, mz / mc
            if (mz <= mc * (1 + tie)) { if (cross < 0) cross = list[i] }
            else cross = -1
        }
        if (cross < 0)
            printf "; np=%s %s: copy at every size measured; no rule\n", np, c
        else if (cross == list[1])
            printf "%s:0-inf:over=%s:chan=smp:@zcopy\n", c, shape[np]
        else
            printf "%s:0-%s:over=%s:chan=smp:@copy\n%s:%s-inf:over=%s:chan=smp:@zcopy\n", c,
                human(cross), shape[np], c, human(cross), shape[np]
        if (mode != "shim") continue
        # Serve rules: each run of sizes where the faster path loses to Open MPI by more than
        # the tie; a run starting at the smallest size measured starts at 0, one ending at the
        # largest stops at twice that size.
        lo = -1
        for (i = 1; i <= ns + 1; i++) {
            slow = 0
            if (i <= ns) {
                kc = np SUBSEP c SUBSEP list[i] SUBSEP "pap/copy"
                kz = np SUBSEP c SUBSEP list[i] SUBSEP "pap/zcopy"
                if (!(kc in vals) || !(kz in vals)) continue
                best = median(kc); if (median(kz) < best) best = median(kz)
                slow = best > 1 + tie
            }
            if (slow && lo < 0) lo = i
            if (!slow && lo >= 0) {
                from = lo == 1 ? 0 : human(list[lo])
                to = human((i > ns) ? 2 * list[ns] : list[i]) # not beyond what was measured
                printf "%s:%s-%s:over=%s:chan=smp:@mpi\n", c, from, to, shape[np]
                lo = -1
            }
        }
    }
}' "$CSV" >"$OUT"
cat "$OUT"
