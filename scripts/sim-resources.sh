#!/usr/bin/env bash
# The resource table of docs/scale.md ("Resources per rank"): arcoll-sim --resources for each
# algorithm family at N ranks in nodes of 16 (ib-edr: its start-up costs), one 8-byte call each.
#   scripts/sim-resources.sh BUILD N [N...]     e.g. build 64 256 1024 (4096 once the simulator
#                                               holds it: the i18-scale branch)
#   FAMILIES="coll:alg ..." and PPN (16) override the defaults.
# The parameters are ib-edr's with poll 10 us instead of 0.1 us: ranks waiting on node memory
# wake 100 times less often (the node-aware families took minutes per run at N = 256 on the
# loaded machine), which changes no count and coarsens only the first-call column.
# Prints one markdown row per family and N. "verbs reg" adds what the verbs channel registers
# beyond the team regions the model counts (docs/scale.md explains and checks it): its staging
# ring and UD buffers (4 MiB + 10 KiB, src/chan/verbs/verbs_chan.c) on every rank, and on each node's
# master the node segment, page-rounded (engine/hier.c pins it when there are 2+ nodes).
set -u
B=${1:?usage: scripts/sim-resources.sh BUILD N [N...]}
shift
PPN=${PPN:-16}
VERBS_FIXED=$(((4 << 20) + 80 * 128))
PARAMS=$(mktemp)
trap 'rm -f "$PARAMS"' EXIT
printf '%s\n' "name ib-edr-poll10us" "intra_o 50" "intra_L 150" "intra_G 0.1" "copy_G 0.1" \
    "reduce_G 0.2" "inter_o 200" "inter_L 1000" "inter_G 0.08" "inter_g 5" \
    "rx_nic 1" "oob_a 20000" "oob_b 5000" "oob_c 1" "qp_ns 100000" "poll 10000" >"$PARAMS"
FAMILIES=${FAMILIES:-"alltoall:pap alltoall:direct alltoall:pap_shm alltoall:sa alltoall:leader
alltoallv:sloavx allgather:rdh allgather:ring alltoall:mn_co"}
echo "| N | family | collective | QPs min / avg / max | regions MiB | verbs reg MiB (rank / master) | shared MiB | init us | init eager us | first call us | wall s |"
echo "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|"
for n in "$@"; do
    for f in $FAMILIES; do
        coll=${f%%:*} alg=${f#*:}
        t0=$SECONDS
        row=$(nice "$B/bin/arcoll-sim" -n "$n" --ppn "$PPN" --coll "$coll" --alg "$alg" \
            --params "$PARAMS" --size 8 --iters 1 --warmup 0 --resources --csv 2>/dev/null | tail -n 1)
        case $row in
        "$coll,$alg,"*",0,"*) ;;
        *) echo "| $n | $alg | $coll | run failed | | | | | | | $((SECONDS - t0)) |"; continue ;;
        esac
        # Fields: 10 avg_us, 15-17 qps, 18-20 registered, 21-23 shared, 24-26 init_us.
        echo "$row" | awk -F, -v n="$n" -v ppn="$PPN" -v fixed="$VERBS_FIXED" -v wall=$((SECONDS - t0)) '{
            mib = 1048576; reg = $19; sh = $22
            pin = (n > ppn) ? int((sh * ppn + 4095) / 4096) * 4096 : 0
            printf "| %d | %s | %s | %d / %.2f / %d | %.2f | %.2f / %.2f | %.2f | %.0f | %.0f | %.1f | %d |\n",
                n, $2, $1, $15, $16, $17, reg / mib, (reg + fixed) / mib, (reg + fixed + pin) / mib,
                sh / mib, $25, $25 + (n - 1) * 100, $10, wall }'
    done
done
