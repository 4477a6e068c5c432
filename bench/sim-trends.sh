#!/usr/bin/env bash
# sim-trends: the five source papers' trends (docs/architecture.md, "Sources") (issue 18 item 4) in arcoll-sim's virtual time, our
# algorithms only, each with the seed's workload (docs/scale.md, "Trends").
#
#   bench/sim-trends.sh BUILD OUTDIR [TREND...]     TREND: 002 004 000 000x 001 003 (default all)
#
# Per trend: OUTDIR/TREND.csv (arcoll-sim's CSV with a leading "case" column), OUTDIR/TREND.png
# if gnuplot is installed, and the ratio table (baseline avg / challenger avg, mean completion
# time over ranks and calls) on stdout and in OUTDIR/ratios.txt; OUTDIR/commands.txt lists every
# run. Runs are niced (SIM_TRENDS_NICE, 10); virtual times do not depend on the machine's load, only the wall time.
# SIM_TRENDS_SMOKE=1: every trend at a tiny size (a few seconds in all; the integ test), not for
# numbers. SIM_TRENDS_REPLOT=1: no runs, the table and plot from an existing OUTDIR/TREND.csv.
# SIM_TRENDS_PARAMS: the model (ib-edr); SIM_TRENDS_CONGESTED: the congested set
# for 003 (ib-edr-mu2). SIM_TRENDS_000_N: 000's rank counts (256 1024); SIM_TRENDS_001_N (512),
# SIM_TRENDS_003_N (256 1024) and SIM_TRENDS_001_SIZES, SIM_TRENDS_003_SIZES: other runs.
set -euo pipefail
B=${1:?usage: bench/sim-trends.sh BUILD OUTDIR [TREND...]}
OUT=${2:?usage: bench/sim-trends.sh BUILD OUTDIR [TREND...]}
shift 2
TRENDS=("$@")
[ ${#TRENDS[@]} -gt 0 ] || TRENDS=(002 004 000 000x 001 003)
SMOKE=${SIM_TRENDS_SMOKE:-0}
REPLOT=${SIM_TRENDS_REPLOT:-0}
PARAMS=${SIM_TRENDS_PARAMS:-ib-edr}
CONGESTED=${SIM_TRENDS_CONGESTED:-ib-edr-mu2}
SIM=$B/bin/arcoll-sim
[ -x "$SIM" ] || { echo "sim-trends: no $SIM (make first)" >&2; exit 2; }
mkdir -p "$OUT"
: >"$OUT/commands.txt"
: >"$OUT/ratios.txt"

# run TREND CASE ARGS...: one arcoll-sim run; its CSV rows, prefixed by CASE, go to OUT/TREND.csv.
run() {
    local trend=$1 cas=$2 csv
    shift 2
    [ "$REPLOT" = 0 ] || return 0
    echo "arcoll-sim $* --params ${P:-$PARAMS} --csv" >>"$OUT/commands.txt"
    csv=$(nice -n "${SIM_TRENDS_NICE:-10}" "$SIM" "$@" --params "${P:-$PARAMS}" --csv 2>"$OUT/$trend.log.tmp") || {
        echo "sim-trends: FAILED: arcoll-sim $*" >&2
        cat "$OUT/$trend.log.tmp" >&2
        return 1
    }
    tail -n 1 "$OUT/$trend.log.tmp" >>"$OUT/$trend.log"
    [ -s "$OUT/$trend.csv" ] || echo "case,$(head -n 1 <<<"$csv")" >"$OUT/$trend.csv"
    tail -n +2 <<<"$csv" | sed "s/^/$cas,/" >>"$OUT/$trend.csv"
    rm -f "$OUT/$trend.log.tmp"
}

# ratios TREND BASE NEW...: per case and size, BASE's avg over each NEW's (> 1: NEW is faster).
ratios() {
    local trend=$1 base=$2
    shift 2
    awk -F, -v base="$base" -v news="$*" -v trend="$trend" '
        NR == 1 { next }
        { k = $1 SUBSEP $4 SUBSEP $8; avg[k, $3] = $11; if (!(k in seen)) { seen[k] = 1; keys[++nk] = k } }
        END {
            nn = split(news, nw, " ")
            printf "%s: %s over", trend, base
            for (i = 1; i <= nn; i++) printf " %s", nw[i]
            printf " (avg us ratio; > 1: the challenger is faster)\n"
            printf "  %-26s %5s %6s %10s", "case", "n", "size", base " us"
            for (i = 1; i <= nn; i++) printf " %10s %8s", nw[i] " us", "ratio"
            printf "\n"
            for (q = 1; q <= nk; q++) {
                split(keys[q], f, SUBSEP)
                if (!((keys[q], base) in avg)) continue
                printf "  %-26s %5s %6s %10.2f", f[1], f[2], f[3], avg[keys[q], base]
                for (i = 1; i <= nn; i++) {
                    if ((keys[q], nw[i]) in avg && avg[keys[q], nw[i]] > 0)
                        printf " %10.2f %8.2f", avg[keys[q], nw[i]], avg[keys[q], base] / avg[keys[q], nw[i]]
                    else
                        printf " %10s %8s", "-", "-"
                }
                printf "\n"
            }
        }' "$OUT/$trend.csv" | tee -a "$OUT/ratios.txt"
}

# plot TREND XCOL XLABEL TITLE [SCOL]: one panel per case, one line per algorithm (and value of
# CSV column SCOL, e.g. 8 the size when x is the rank count), log-log.
plot() {
    local trend=$1 xcol=$2 xlabel=$3 title=$4 scol=${5:-0} d
    d="$OUT/.plot-$trend"
    command -v gnuplot >/dev/null || return 0
    rm -rf "$d"
    mkdir -p "$d"
    awk -F, -v x="$xcol" -v sc="$scol" -v d="$d" 'NR > 1 {
        s = sc == 0 ? $3 : $3 (sc == 4 ? " n=" : " ") $sc (sc == 8 ? " B" : "")
        print $x, $11 >> (d "/" $1 "@" s ".dat")
        if (!($1 in c)) { c[$1] = 1; print $1 >> (d "/cases") }
        if (!(($1, s) in a)) { a[$1, s] = 1; print s >> (d "/algs-" $1) } }' "$OUT/$trend.csv"
    local ncase cols rows gp="$d/plot.gp"
    ncase=$(wc -l <"$d/cases")
    cols=$((ncase > 1 ? 2 : 1))
    rows=$(((ncase + cols - 1) / cols))
    {
        echo "set terminal pngcairo size $((cols * 520)),$((rows * 380 + 40)) font ',9' noenhanced"
        echo "set output '$OUT/$trend.png'"
        echo "set multiplot layout $rows,$cols title '$title'"
        echo "set logscale xy; set xlabel '$xlabel'; set ylabel 'virtual us (mean over ranks)'"
        echo "set key top left; set grid"
        while read -r c; do
            echo "set title '$c'"
            local sep="plot"
            while read -r a; do
                printf "%s '%s' using 1:2 with linespoints title '%s'" "$sep" "$d/$c@$a.dat" "$a"
                sep=","
            done <"$d/algs-$c"
            echo
        done <"$d/cases"
        echo "unset multiplot"
    } >"$gp"
    gnuplot "$gp" 2>>"$OUT/gnuplot.log"
    rm -rf "$d"
}

# Every trend: algorithms, workload (n, ppn, sizes, skew), calls. Smoke: tiny n, 1 call.
t002() {
    local sizes=1,8,64,512,4096,32768 it=(--iters 20 --warmup 2) n=(-n 16 --ppn 4) c m
    local mifs=(32 512) lates=(0.25 0.75)
    if [ "$SMOKE" = 1 ]; then
        sizes=8 it=(--iters 1 --warmup 0) n=(-n 4 --ppn 2) mifs=(32) lates=(0.25)
    fi
    for c in alltoall allgather; do
        for m in "${mifs[@]}"; do
            for a in pap direct; do
                run 002 "$c-random-mif$m" "${n[@]}" --coll $c --alg $a --size $sizes --skew $m \
                    "${it[@]}"
            done
        done
        # The seed's Fig. 10/13: 25% and 75% of the ranks late by MIF 128 message times.
        for l in "${lates[@]}"; do
            for a in pap direct; do
                run 002 "$c-late$l-mif128" "${n[@]}" --coll $c --alg $a --size $sizes --skew 128 \
                    --late $l "${it[@]}"
            done
        done
    done
    ratios 002 direct pap
    plot 002 8 'bytes per block' '002: PAP vs Direct, 16 ranks = 4 nodes x 4 (skew: random, late)'
}

t004() {
    local sizes=8,64,256,512,1024 n=(-n 256) it=(--iters 3 --warmup 1)
    if [ "$SMOKE" = 1 ]; then sizes=8 n=(-n 4) it=(--iters 1 --warmup 0); fi
    # 1 KiB slots: the default 16 KiB ones take 256 x 2 x 16 KiB per rank (such runs were killed
    # for memory on the shared machine); mn_co's aggregated messages (16 blocks) fragment above 64 B.
    for a in mn_co direct pap; do
        run 004 alltoall-ppn1 "${n[@]}" --ppn 1 --coll alltoall --alg $a --size $sizes --bounce 1024 \
            "${it[@]}"
    done
    ratios 004 direct mn_co pap
    plot 004 8 'bytes per block' '004: MN-CO vs Direct, alltoall, 256 nodes x 1'
}

t000() {
    local ns=(${SIM_TRENDS_000_N:-256 1024}) it=(--iters 1 --warmup 1) k
    if [ "$SMOKE" = 1 ]; then ns=(4) it=(--iters 1 --warmup 0); fi
    # Bounce slots: 64 B holds the linear algorithms' 1-8 B blocks and keeps their N^2 slots
    # small; sloav's packed step messages (up to N/2 elements with 12-byte entries) need 16 KiB,
    # else they fragment with a credit round trip per 64 B. It touches only its log2 N peers' slots.
    for k in "${ns[@]}"; do
        run 000 alltoallv-ppn16 -n "$k" --ppn 16 --coll alltoallv --alg sloav --size 1,8 \
            --bounce 16384 "${it[@]}"
        for a in direct pap; do
            run 000 alltoallv-ppn16 -n "$k" --ppn 16 --coll alltoallv --alg $a --size 1,8 --bounce 64 \
                "${it[@]}"
        done
    done
    ratios 000 direct sloav pap
    plot 000 8 'bytes per block' '000: SLOAV vs linear alltoallv, 16 ranks per node' 4
}

t000x() {
    local ns=(32 64 128 256) it=(--iters 3 --warmup 1) k
    if [ "$SMOKE" = 1 ]; then ns=(8) it=(--iters 1 --warmup 0); fi
    for k in "${ns[@]}"; do
        for a in sloavx sloav; do
            run 000x alltoallv-16B-ppn16 -n "$k" --ppn 16 --coll alltoallv --alg $a --size 16 \
                --bounce 16384 "${it[@]}"
        done
    done
    ratios 000x sloav sloavx
    plot 000x 4 'ranks (16 per node)' '000: SLOAVx vs SLOAV, alltoallv 16 B, 16 ranks per node' 8
}

t001() {
    local sizes=${SIM_TRENDS_001_SIZES:-64,512,2048} n=(-n "${SIM_TRENDS_001_N:-512}" --ppn 8)
    local it=(--iters 2 --warmup 1)
    if [ "$SMOKE" = 1 ]; then sizes=512 n=(-n 8 --ppn 4) it=(--iters 1 --warmup 0); fi
    # 2 KiB slots: 512 ranks x 512 peers x 2 slots is most of the memory (16 KiB slots were killed
    # for memory); the aggregated messages of sa (8 blocks) and leader (64) fragment.
    for a in sa leader direct; do
        run 001 alltoall-ppn8 "${n[@]}" --coll alltoall --alg $a --size $sizes --bounce 2048 "${it[@]}"
    done
    ratios 001 leader sa direct
    plot 001 8 'bytes per block' '001: SA vs leader alltoall, 8 ranks per node'
}

# 003: rdd vs rdh allgather, 1 rank per node, in the congestion model: CONGESTED (ib-edr-mu2: 24
# nodes per leaf, 12 uplink cables routed D-mod-k, mu = 1/2), the same tree at mu = 1 (24 cables)
# and PARAMS (one switch). One call in flight (--window 1) and 64 KiB slots asked for: the team
# region's budget still cuts them (8 KiB at 256 ranks, 2 KiB at 1024) unless BUILD was made with a
# larger WIRE_REGION_BUDGET, where a stream then reaches link speed (docs/scale.md, "003").
t003() {
    local sizes=${SIM_TRENDS_003_SIZES:-8,512,4096,65536} ns it=(--iters 2 --warmup 1) n c a f
    local flow=(--window 1 --bounce 65536 --no-payload)
    read -ra ns <<<"${SIM_TRENDS_003_N:-256 1024}"
    local cases=("mu1/2 $CONGESTED" "mu1 $CONGESTED --set up_links=24" "flat $PARAMS")
    if [ "$SMOKE" = 1 ]; then sizes=64 ns=(8) it=(--iters 1 --warmup 0); fi
    for n in "${ns[@]}"; do
        for c in "${cases[@]}"; do
            read -ra f <<<"$c" # case name, set, its --set options
            for a in rdh rdd; do
                P=${f[1]} run 003 "allgather-${f[0]/\//-}" -n "$n" --ppn 1 --coll allgather \
                    --alg $a --size "$sizes" "${f[@]:2}" "${flow[@]}" "${it[@]}"
            done
        done
    done
    ratios 003 rdd rdh
    plot 003 8 'bytes per rank' '003: distance-halving (rdh) vs recursive doubling (rdd), 1 rank per node' 4
}

for t in "${TRENDS[@]}"; do
    [ "$REPLOT" = 1 ] || rm -f "$OUT/$t.csv" "$OUT/$t.log" "$OUT/$t.png"
    case $t in
    002 | 004 | 000 | 000x | 001 | 003) "t$t" ;;
    *) echo "sim-trends: unknown trend $t (002 004 000 000x 001 003)" >&2; exit 2 ;;
    esac
done
