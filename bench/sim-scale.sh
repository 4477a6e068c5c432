#!/bin/bash
# Every algorithm of arcoll-sim at a large N, 8 B, payload-free (docs/scale.md, "How N scales"):
# one row per run with the virtual latency, wall time, user + sys CPU and max RSS.
#
#   bench/sim-scale.sh BUILD OUT [N] [FILTER]
#
# N defaults to 4096 (256 nodes x 16, --params ib-edr); FILTER (a regex on "coll:alg") picks
# runs. Flat algorithms run on nodes of 16 too (the model charges intra- and inter-node puts
# differently either way). --window 1 and --bounce 64 keep the team regions small (2 banks
# of 64 B slots per peer); 1 warm-up and 1 timed call. Runs are niced; on a shared machine
# user + sys CPU is the honest measure, not the wall time. OUT gets one CSV line per run and
# each run's output in OUT.d/. SIM_SHM_MAX (8) is the runs' ARCOLL_SHM_MAX.
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
SIM="$B/bin/arcoll-sim"
[ -x "$SIM" ] || { echo "sim-scale: no $SIM (make first)" >&2; exit 2; }
mkdir -p "$OUT.d"
echo "coll,alg,n,ppn,avg_us,wall_s,user_s,sys_s,maxrss_mib,status" >"$OUT"
RUNS="alltoall:pap alltoall:direct alltoall:pap_shm alltoall:shm_direct alltoall:sa
alltoall:sa_direct alltoall:rd alltoall:leader alltoall:mn_co
allgather:pap allgather:direct allgather:ring allgather:rdd allgather:rdh allgather:mn_co
allgather:pap_shm allgather:shm_direct
alltoallv:pap alltoallv:direct alltoallv:sloav alltoallv:sloavx
allreduce:pap allreduce:direct allreduce:ring allreduce:rdd allreduce:rdh"
for ca in $RUNS; do
    [[ $ca =~ $FILTER ]] || continue
    c=${ca%%:*} a=${ca#*:} log="$OUT.d/$c-$a-$N.txt"
    /usr/bin/time -f "TIME %e %U %S %M" env ARCOLL_SHM_MAX="$SHM_MAX" nice -n 19 "$SIM" -n "$N" --ppn "$PPN" --params ib-edr \
        --coll "$c" --alg "$a" --size 8 --iters 1 --warmup 1 --bounce 64 --window 1 \
        --no-payload --csv >"$log" 2>&1
    rc=$?
    t=$(grep '^TIME ' "$log" | tail -1)
    row=$(grep "^$c,$a," "$log" | tail -1)
    avg=$(echo "$row" | cut -d, -f10)
    read -r _ wall user sys rss <<<"${t:-TIME - - - 0}"
    status=ok
    [ $rc -eq 0 ] && [ -n "$row" ] || status="failed($rc)"
    printf '%s,%s,%s,%s,%s,%s,%s,%s,%.0f,%s\n' "$c" "$a" "$N" "$PPN" "${avg:--}" "$wall" \
        "$user" "$sys" "$((rss / 1024))" "$status" | tee -a "$OUT"
done
