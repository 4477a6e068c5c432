#!/bin/bash
# Every algorithm of arcoll-sim at a large N, 8 B, payload-free (docs/scale.md, "How N scales"):
# one row per run with the virtual latency, wall time, user + sys CPU and max RSS.
#
#   bench/sim-scale.sh BUILD OUT [N] [FILTER]
#
# N defaults to 4096 (256 nodes x 16, --params ib-edr --set qp_ns=0); FILTER (a regex on
# "coll:alg") picks runs. Flat algorithms run on nodes of 16 too (the model charges intra- and
# inter-node puts differently either way). --window 1 keeps the team regions small (2 banks per
# peer); 1 warm-up (SIM_WARMUP) and 1 timed call. pap and direct write to every peer, so every slot of every
# rank's region is touched: they run with --bounce 64 (their 8 B blocks fit; 1 KiB slots would
# be 37 GiB at 4096). The others keep the default slots (1 KiB at this N): their aggregated
# messages would fragment into 64 B (pap_shm at 1024: 1224.8 us instead of 41.5), and the slots
# of peers they never write stay untouched calloc'd pages, not resident. Runs are niced; on a
# shared machine user + sys CPU is the honest measure, not the wall time. OUT gets one CSV line
# per run and each run's output in OUT.d/. SIM_SHM_MAX (8) is the runs' ARCOLL_SHM_MAX. With
# --resources each row also has the QPs (min/avg/max over ranks, lazy wiring), the registered
# and shared KiB per rank and the virtual init time (avg): docs/scale.md's resource table at
# this layout.
set -u
B=${1:?usage: sim-scale.sh BUILD OUT [N] [FILTER]}
OUT=${2:?usage: sim-scale.sh BUILD OUT [N] [FILTER]}
N=${3:-4096}
FILTER=${4:-.}
PPN=${SIM_PPN:-16}
# The node segments are sized by ARCOLL_SHM_MAX: each of a node's 3 areas holds ppn x N x
# ARCOLL_SHM_MAX bytes (at most 16 MiB), so at 4096 ranks even 256 B make 48 MiB a node, 12 GiB
# in all, which the OOM killer ended. 8 B calls need 8: 1.5 MiB a node.
SHM_MAX=${SIM_SHM_MAX:-8}
# SIM_POLL: ranks waiting on node memory look again every `poll` ns of virtual time (ib-edr:
# 100), each look a turn of the scheduler. Unset: ib-edr's own. 1000 costs the node-aware runs
# 1.4-2.6% of latency at 1024 ranks for 1.5x less CPU (docs/scale.md, "How N scales").
POLL=${SIM_POLL:-}
# qp_ns 0: verbs' lazy QP set-up (100 us a peer in ib-edr) happens in the warm-up call only, and
# at 4096 ranks its 25 ms of virtual time were most of a node-aware run's turns (the node's other
# ranks polling while their master connects). The timed call, QPs and init are identical
# without it (checked at 256 ranks for pap, pap_shm, sa, mn_co, sloavx, rdh).
# SIM_WARMUP (1): warm-up calls. With qp_ns 0 the warm-up changes nothing in allreduce direct's
# timed call (identical to the digit at 1024 and 4096 ranks), and at 4096 it was 350 of its 645 s
# of wall time; SIM_WARMUP=0 measures that row within 10 minutes (docs/scale.md).
WARMUP=${SIM_WARMUP:-1}
[[ $WARMUP =~ ^[0-9]+$ ]] || { echo "sim-scale: SIM_WARMUP wants a count" >&2; exit 2; }
# SIM_MEM_GIB: wait before each run until the host has this much memory available (two lanes of
# this script at once: a 4096-rank alltoall pap or direct takes 13-15 GiB).
MEM_GIB=${SIM_MEM_GIB:-0}
# A fraction or a word made `[ -lt ]` fail, which ended the wait at once; more than the host
# has would wait forever.
[[ $MEM_GIB =~ ^[0-9]+$ ]] || { echo "sim-scale: SIM_MEM_GIB wants whole GiB" >&2; exit 2; }
[ "$MEM_GIB" -le "$(awk '/^MemTotal:/ { print int($2 / 1048576) }' /proc/meminfo)" ] ||
    { echo "sim-scale: SIM_MEM_GIB $MEM_GIB is more than the host has" >&2; exit 2; }
sets=(--set qp_ns=0)
[ -n "$POLL" ] && sets=(--set "poll=$POLL" "${sets[@]}")
SIM="$B/bin/arcoll-sim"
[ -x "$SIM" ] || { echo "sim-scale: no $SIM (make first)" >&2; exit 2; }
mkdir -p "$OUT.d"
echo "coll,alg,n,ppn,avg_us,wall_s,user_s,sys_s,maxrss_mib,status,qps_min,qps_avg,qps_max,reg_kib,shared_kib,init_us" >"$OUT"
RUNS="alltoall:pap alltoall:direct alltoall:pap_shm alltoall:shm_direct alltoall:sa
alltoall:sa_direct alltoall:rd alltoall:leader alltoall:mn_co
allgather:pap allgather:direct allgather:ring allgather:rdd allgather:rdh allgather:mn_co
allgather:pap_shm allgather:shm_direct
alltoallv:pap alltoallv:direct alltoallv:sloav alltoallv:sloavx
allreduce:pap allreduce:direct allreduce:ring allreduce:rdd allreduce:rdh"
for ca in $RUNS; do
    [[ $ca =~ $FILTER ]] || continue
    c=${ca%%:*} a=${ca#*:} log="$OUT.d/$c-$a-$N.txt"
    said=
    while [ "$(awk '/^MemAvailable:/ { print int($2 / 1048576) }' /proc/meminfo)" -lt "$MEM_GIB" ]; do
        [ -n "$said" ] || echo "sim-scale: $c:$a waits for $MEM_GIB GiB available" >&2
        said=1
        sleep 10
    done
    bounce=()
    [[ $a == pap || $a == direct ]] && bounce=(--bounce 64)
    /usr/bin/time -f "TIME %e %U %S %M" env ARCOLL_SHM_MAX="$SHM_MAX" nice -n 19 "$SIM" -n "$N" \
        --ppn "$PPN" --params ib-edr "${sets[@]}" ${bounce[@]+"${bounce[@]}"} \
        --coll "$c" --alg "$a" --size 8 --iters 1 --warmup "$WARMUP" --window 1 \
        --no-payload --resources --progress 30 --csv >"$log" 2>&1
    rc=$?
    t=$(grep '^TIME ' "$log" | tail -1)
    row=$(grep "^$c,$a," "$log" | tail -1)
    avg=$(echo "$row" | cut -d, -f10)
    read -r _ wall user sys rss <<<"${t:-TIME - - - 0}"
    # Resource fields of the sim's row: 15-17 qps, 19 registered avg, 22 shared avg, 25 init avg.
    res=$(echo "$row" | awk -F, 'NF >= 26 { printf "%s,%s,%s,%.1f,%.1f,%.0f", $15, $16, $17, $19 / 1024, $22 / 1024, $25 }')
    status=ok
    [ $rc -eq 0 ] && [ -n "$row" ] || status="failed($rc)"
    printf '%s,%s,%s,%s,%s,%s,%s,%s,%.0f,%s,%s\n' "$c" "$a" "$N" "$PPN" "${avg:--}" "$wall" \
        "$user" "$sys" "$((rss / 1024))" "$status" "${res:-,,,,,}" | tee -a "$OUT"
done
