#!/usr/bin/env bash
# realistic: what a user gets from the one switch (LD_PRELOAD of the shim alone, no ARCOLL_*
# variable) against Open MPI, with the realistic buffer use of arcoll-mpi-lat -R (every call:
# send buffer rewritten, receive buffer cleared, a barrier, the call timed alone, the result
# checked; 2 buffer pairs in turn). Several shim libraries can be compared: their runs
# alternate, and each run measures its own Open MPI column, so every ratio is side by side.
#
#   bench/realistic.sh OUTDIR NP LABEL=SHIMLIB [LABEL=SHIMLIB ...]
#   e.g. bench/realistic.sh /tmp/r 2 before=/tmp/old/build/lib/libarcoll_mpi.so \
#            after=build/lib/libarcoll_mpi.so
#
# REAL_RUNS (3) runs per library, REAL_ARGS (-t all -m 1:4m -g 4) for arcoll-mpi-lat (the one
# of the first library's build), REAL_ENV extra environment (e.g. ARCOLL_HEAP=off). With more
# ranks than cores, --mca mpi_yield_when_idle 1 (Open MPI then yields as arcoll does).
# Output: OUTDIR/LABEL.N.txt per run, and OUTDIR/table.md: per library, the median over its runs
# of r-med (arcoll's median call over Open MPI's, same run), one row per collective.
# The shim's malloc serves Open MPI's own allocations too (its temporary buffers then come from
# a reused heap instead of fresh glibc mmaps), so a run's Open MPI column is Open MPI under the
# shim, not Open MPI alone. REAL_REF=LABEL adds, for every other library, the ratio of its
# median call to LABEL's Open MPI median call of the same round (run LABEL=SHIMLIB with
# REAL_REF_ENV, e.g. ARCOLL_HEAP=off, to time Open MPI alone beside it).
# A LABEL=DIR whose DIR holds mca_coll_arcoll.so runs Open MPI with that component instead of
# the preload (OMPI_MCA_mca_base_component_path=DIR:Open MPI's own; REAL_COMPONENT_PRELOAD, e.g.
# the node heap's libarcoll_heap.so, is preloaded then). With the component loaded PMPI_* reach
# it too, so its runs' ratio columns are 1: compare it through REAL_REF, or REAL_VS=LABEL (its
# median call over LABEL's of the same round: the component against the shim, side by side).
# A LABEL=WRAPPER that is not a .so (build/bin/arcoll-ompi, the component's one switch) runs
# every rank through it, with nothing else set.
# REAL_TABLE_ONLY=1 makes the tables from the runs already in OUTDIR.
set -euo pipefail
OUT=${1:?usage: bench/realistic.sh OUTDIR NP LABEL=SHIMLIB ...}
NP=${2:?usage: bench/realistic.sh OUTDIR NP LABEL=SHIMLIB ...}
shift 2
[ $# -gt 0 ] || { echo "usage: bench/realistic.sh OUTDIR NP LABEL=SHIMLIB ..." >&2; exit 2; }
RUNS=${REAL_RUNS:-3}
read -r -a ARGS <<<"${REAL_ARGS:--t all -m 1:4m -g 4}"
read -r -a XENV <<<"${REAL_ENV:-}"
LAT=$(realpath "$(dirname "${1#*=}")/../bin/arcoll-mpi-lat")
MCA=()
[ "$NP" -gt "$(nproc)" ] && MCA=(--mca mpi_yield_when_idle 1)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$OUT"
REF=${REAL_REF:-}
VS=${REAL_VS:-}
OMPI_OWN=$(dirname "$(find /usr/lib -name mca_coll_tuned.so -print -quit 2>/dev/null || true)")
read -r -a RENV <<<"${REAL_REF_ENV:-}"
for ((r = 1; r <= RUNS && ${REAL_TABLE_ONLY:-0} == 0; r++)); do
    for spec in "$@"; do
        label=${spec%%=*}
        lib=$(realpath "${spec#*=}")
        env=("${XENV[@]}")
        wrap=()
        [ "$label" = "$REF" ] && env+=("${RENV[@]}")
        if [ -d "$lib" ]; then # the Open MPI component
            env+=("OMPI_MCA_mca_base_component_path=$lib:$OMPI_OWN"
                "LD_PRELOAD=${REAL_COMPONENT_PRELOAD:-}")
        elif [ "${lib%.so}" = "$lib" ]; then # a rank wrapper (bin/arcoll-ompi)
            wrap=("$lib")
        else
            env+=("LD_PRELOAD=$lib")
        fi
        echo "run $r/$RUNS $label: np=$NP ${ARGS[*]} ${env[*]} ${wrap[*]}" >&2
        env "${env[@]}" mpirun --oversubscribe --bind-to none "${MCA[@]}" -np "$NP" \
            "${wrap[@]}" "$LAT" -R "${ARGS[@]}" >"$OUT/$label.$r.txt" 2>&1 ||
            echo "  (exit $?: see $OUT/$label.$r.txt)" >&2
    done
done
# A row: coll bytes iters PMPI shim ratio PMPI-med shim-med r-med r-p10 ...; the table is the
# median over runs per (library, coll, bytes) of r-med, or (with REF) of shim-med over REF's
# PMPI-med in the run of the same round.
table() { # table LABEL [REF [COLUMN]]: COLUMN 7 (REF's Open MPI, default) or 8 (REF's arcoll)
    for f in "$OUT/$1".*.txt; do
        r=${f%.txt}
        r=${r##*.}
        if [ -n "${2:-}" ]; then
            [ -e "$OUT/$2.$r.txt" ] || continue
            awk -v col="${3:-7}" '$1 ~ /^[a-z_]+$/ && $2 ~ /^[0-9]+$/ && NF >= 10 {
                print "R", $1, $2, $col }' "$OUT/$2.$r.txt"
        fi
        awk '$1 ~ /^[a-z_]+$/ && $2 ~ /^[0-9]+$/ && NF >= 10 { print "S", $1, $2, $8, $9 }' "$f"
    done | awk -v ref="${2:-}" '
            $1 == "R" { pm[$2 SUBSEP $3] = $4; next }
            {
                k = $2 SUBSEP $3
                x = ref == "" ? $5 : ((k in pm) && pm[k] > 0 ? $4 / pm[k] : "")
                if (x != "") v[k] = v[k] " " x
                if (!(($2) in seen)) { seen[$2] = 1; colls[++nc] = $2 }
                if (!(($3) in seenb)) { seenb[$3] = 1; sizes[++ns] = $3 + 0 }
            }
            function med(s,   a, n, i, j, t) {
                n = split(s, a, " ")
                for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) {
                    t = a[j]; a[j] = a[j-1]; a[j-1] = t }
                return n == 0 ? "" : (n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2)
            }
            function hb(b) { return b >= 1048576 ? b/1048576 "M" : b >= 1024 ? b/1024 "k" : b }
            END {
                for (i = 1; i <= ns; i++) for (j = i; j > 1 && sizes[j-1] > sizes[j]; j--) {
                    t = sizes[j]; sizes[j] = sizes[j-1]; sizes[j-1] = t }
                printf "| coll |"; for (i = 1; i <= ns; i++) printf " %s |", hb(sizes[i]); print ""
                printf "|---|"; for (i = 1; i <= ns; i++) printf "---|"; print ""
                for (c = 1; c <= nc; c++) {
                    printf "| %s |", colls[c]
                    for (i = 1; i <= ns; i++) {
                        k = colls[c] SUBSEP sizes[i]
                        printf " %s |", (k in v) ? sprintf("%.2f", med(v[k])) : ""
                    }
                    print ""
                }
            }'
}
cross() { # cross LABEL COLUMN NAME TEXT SPEC...: every other library's calls over LABEL's COLUMN
    local ref=$1 col=$2 name=$3 text=$4 spec
    shift 4
    echo
    echo "$text"
    for spec in "$@"; do
        [ "${spec%%=*}" = "$ref" ] && continue
        echo
        echo "### ${spec%%=*} / $name"
        table "${spec%%=*}" "$ref" "$col"
    done
}
{
    echo "np=$NP, $RUNS runs per library, arcoll-mpi-lat -R ${ARGS[*]} ${REAL_ENV:-}"
    echo "cell: median over runs of r-med (arcoll / Open MPI, median call, the same run); below 1: arcoll faster"
    for spec in "$@"; do
        echo
        echo "### ${spec%%=*}"
        table "${spec%%=*}"
    done
    [ -z "$REF" ] || cross "$REF" 7 "Open MPI alone" "Against Open MPI alone: cell = median over rounds \
of the library's median call over the Open MPI median call of $REF's run in the same round \
(${REAL_REF_ENV:-})" "$@"
    [ -z "$VS" ] || cross "$VS" 8 "$VS" "Against $VS: cell = median over rounds of the library's \
median call over $VS's median call (its MPI_* column) in the same round" "$@"
} >"$OUT/table.md"
cat "$OUT/table.md"
