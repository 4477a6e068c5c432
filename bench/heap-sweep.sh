#!/usr/bin/env bash
# heap-sweep: sh_co (same-address copies, buffers in the node heap) against arcoll's other
# one-node paths and Open MPI, with an unmodified MPI benchmark (arcoll-mpi-lat) and the heap
# preloaded, so that the program's malloc'd buffers are in the heap (docs/heap.md, issue 16).
#
#   bench/heap-sweep.sh BUILD OUTDIR [NP...]          (NP: 2 4 by default)
#
# Per NP and repetition (HEAP_SWEEP_REPS, 1): one mpirun per configuration sh_co, auto, pap,
# pap_shm (ARCOLL_ALLTOALL_ALG / ARCOLL_ALLGATHER_ALG; auto: the default tuning table, which picks
# sh_co where the heap is shared, at the sizes of its sh_co rules, and pap elsewhere; pap_shm is
# pap above ARCOLL_SHM_MAX), -M 0,
# HEAP_SWEEP_SIZES (1k:4m) bytes per peer, HEAP_SWEEP_ITERS (200, arcoll-mpi-lat's own reduction
# above 8 KiB). Every run also times Open MPI (the PMPI column) and every rank's memcpy of the
# bytes it receives, all ranks at once; the table gives medians over the runs of that NP.
# Before timing, a short run with ARCOLL_LOG=debug must show sh_co serving every call (its
# "ran as sh_co" line) and never falling back ("sh_co ran as pap"); else the script stops. The
# auto runs log at info: the shim's report at MPI_Finalize gives each rank's sh_co counters
# (arcoll_context_counters), summed into tables.md.
# Output in OUTDIR: one CSV and log per run, tables.md, commands.txt.
set -euo pipefail
B=${1:?usage: bench/heap-sweep.sh BUILD OUTDIR [NP...]}
OUT=${2:?usage: bench/heap-sweep.sh BUILD OUTDIR [NP...]}
shift 2
NPS=("$@")
[ ${#NPS[@]} -gt 0 ] || NPS=(2 4)
REPS=${HEAP_SWEEP_REPS:-1}
SIZES=${HEAP_SWEEP_SIZES:-1k:4m}
ITERS=${HEAP_SWEEP_ITERS:-200}
CFGS=(sh_co auto pap pap_shm)
CORES=$(nproc)
LIB=$(realpath "$B/lib")
LAT=$(realpath "$B/bin/arcoll-mpi-lat")
PRE="$LIB/libarcoll_heap.so:$LIB/libarcoll_mpi.so"
# Every size on arcoll (the default table hands the smallest to MPI).
TUNE="alltoall:0-inf:@arcoll#allgather:0-inf:@arcoll"
mkdir -p "$OUT"
: >"$OUT/commands.txt"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# lat NP ALG LOG ARGS...: arcoll-mpi-lat under the heap and the shim, output into LOG
lat() {
    local np=$1 alg=$2 log=$3 extra=()
    shift 3
    [ "$np" -le "$CORES" ] || extra=(--oversubscribe --mca mpi_yield_when_idle 1)
    local cmd=(mpirun -np "$np" "${extra[@]}" env "LD_PRELOAD=$PRE" "ARCOLL_TUNE=$TUNE"
        "ARCOLL_ALLTOALL_ALG=$alg" "ARCOLL_ALLGATHER_ALG=$alg" "$@")
    echo "${cmd[*]}" >>"$OUT/commands.txt"
    "${cmd[@]}" >"$log" 2>&1 || {
        echo "heap-sweep: failed, see $log" >&2
        exit 1
    }
}

for np in "${NPS[@]}"; do
    chk=$OUT/np$np-check.log
    lat "$np" sh_co "$chk" env ARCOLL_LOG=debug "$LAT" -t both -m "$SIZES" -M 0 -i 5 -x 1 -c
    served=$(grep -c "ran as sh_co" "$chk" || true)
    if [ "$served" -eq 0 ] || grep -q "sh_co ran as pap" "$chk"; then
        echo "heap-sweep: np=$np: sh_co did not serve every call ($served lines), see $chk" >&2
        exit 1
    fi
    echo "heap-sweep: np=$np: sh_co served $served calls (all ranks), no fallback" >&2
    for rep in $(seq 1 "$REPS"); do
        for cfg in "${CFGS[@]}"; do
            echo "heap-sweep: np=$np $cfg r$rep" >&2
            log=()
            [ "$cfg" != auto ] || log=(env ARCOLL_LOG=info)
            lat "$np" "$cfg" "$OUT/np$np-$cfg-r$rep.log" "${log[@]}" "$LAT" -t both -m "$SIZES" \
                -M 0 -i "$ITERS" -x $((ITERS / 10)) -o "$OUT/np$np-$cfg-r$rep.csv"
        done
    done
done

# tables.md: per NP and collective, medians over that NP's runs (CSV columns of arcoll-mpi-lat:
# coll,bytes,mif,T_us,bound_us,shim_us,pmpi_us,ratio,memcpy_us,memcpy_frac).
for f in "$OUT"/np*-r*.csv; do
    base=$(basename "$f" .csv)
    np=${base%%-*}
    cfg=${base#*-}
    tail -n +2 "$f" | sed "s/^/${np#np},${cfg%-r*},/"
done | awk -F, -v load="$(cut -d' ' -f1-3 /proc/loadavg)" -v date="$(date -u '+%F %H:%M UTC')" '
function med(s,    n, v, i, j, t) {
    n = split(substr(s, 2), v, " ")
    for (i = 2; i <= n; i++)
        for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
function kib(b) { return b >= 1048576 ? b / 1048576 " MiB" : b / 1024 " KiB" }
{
    k = $1 SUBSEP $3 SUBSEP $4
    if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
    t[k SUBSEP $2] = t[k SUBSEP $2] " " $8
    ompi[k] = ompi[k] " " $9; mc[k] = mc[k] " " $11
}
END {
    printf "%s, load average at the end %s (1, 5, 15 min)\n", date, load
    last = ""
    for (i = 1; i <= nk; i++) {
        split(order[i], f, SUBSEP)
        if (f[1] SUBSEP f[2] != last) {
            last = f[1] SUBSEP f[2]
            printf "\n### %s ranks, %s\n\n", f[1], f[2]
            print "| B/peer | sh_co us | auto us | pap us | pap_shm us | Open MPI us | memcpy us |" \
                " pap/sh_co | pap_shm/sh_co | OMPI/sh_co | memcpy/sh_co | pap/auto | OMPI/auto |"
            print "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        }
        k = order[i]
        s = med(t[k SUBSEP "sh_co"]); p = med(t[k SUBSEP "pap"]); ps = med(t[k SUBSEP "pap_shm"])
        a = med(t[k SUBSEP "auto"]); o = med(ompi[k]); m = med(mc[k])
        printf "| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
            kib(f[3]), s, a, p, ps, o, m, p / s, ps / s, o / s, m / s, p / a, o / a
    }
}' >"$OUT/tables.md"
# auto's sh_co counters per NP, summed over ranks and runs (the shim's report lines).
for np in "${NPS[@]}"; do
    cat "$OUT"/np"$np"-auto-r*.log | sed -n 's/.*sh_co: \([0-9]*\) calls, \([0-9]*\) fallbacks.*/\1 \2/p' |
        awk -v np="$np" '{c += $1; f += $2} END {printf "\nauto at %s ranks: %d calls ran as sh_co, %d fell back to pap (all ranks and runs)\n", np, c, f}'
done >>"$OUT/tables.md"
cat "$OUT/tables.md"
