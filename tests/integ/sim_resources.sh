#!/usr/bin/env bash
# arcoll-sim --resources against real counters (docs/scale.md, "Resources per rank").
#   Bytes: on smp every region is shared memory, so a real rank's shared_bytes must equal the
#   simulated rank's registered (its team regions) + shared (its part of node segments), for
#   every rank (min and max), after the same alltoalls of the same algorithm.
#   QPs: the counts the Soft-RoCE guest asserts for the real verbs channel (tests/vm/
#   guest-single.sh, verbs_qps_*: connections on demand) must come out of the model.
#   Init: --connect eager adds (N - 1) QP creations to every rank's init time, exactly.
# Usage: tests/integ/sim_resources.sh BUILD_DIR; prints "sim-resources: N passed, N failed".
set -u
B=${1:-build}
# As tests/integ/run.sh: CI runs as root, more ranks than cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
SIM="$B/bin/arcoll-sim --iters 3 --warmup 1 --coll alltoall --size 1,1024,32768 --resources --csv"
pass=0
fail=0

check() { # NAME GOT WANT
    if [ "$2" = "$3" ]; then
        pass=$((pass + 1))
        echo "PASS $1: $2"
    else
        fail=$((fail + 1))
        echo "FAIL $1: got $2, want $3"
    fi
}

# Fields of the CSV row: 15-17 qps, 18-20 registered, 21-23 shared, 24-26 init_us (min avg max).
sim_row() { # N PPN ALG [ARGS...]
    local n=$1 ppn=$2 alg=$3
    shift 3
    $SIM -n "$n" --ppn "$ppn" --alg "$alg" "$@" 2>/dev/null | tail -n 1
}

# N PPN ALG: real smp counters (coll_test qps prints one line per rank) vs the model.
for cfg in "4 2 pap_shm" "8 2 sa" "8 4 rd"; do
    set -- $cfg
    real=$(ARCOLL_NODE_SIZE=$2 ARCOLL_ALLTOALL_ALG=$3 timeout 120 mpirun --oversubscribe \
        --bind-to none -np "$1" "$B/tests/coll_test" qps 0 2>&1 |
        sed -n 's/.*qps: 0 RC QPs (0 ready), 0 registered bytes, \([0-9]*\) shared bytes.*/\1/p' |
        sort -n | uniq | tr '\n' ' ')
    row=$(sim_row "$1" "$2" "$3")
    model=$(echo "$row" | awk -F, '{ lo = $18 + $21; hi = $20 + $23; print (lo == hi ? lo : lo "-" hi) " " }')
    check "bytes-$1x$2-$3 (smp shared = sim registered + shared)" "$model" "${real:-none}"
done

# N PPN ALG QPS(min avg max), as guest-single.sh's verbs_qps_* assert them on real verbs.
while read -r n ppn alg want; do
    row=$(sim_row "$n" "$ppn" "$alg")
    check "qps-$n-ppn$ppn-$alg" "$(echo "$row" | cut -d, -f15-17)" "$want"
done <<'LIST'
4 2 pap 3,3.00,3
4 2 pap_shm 0,0.50,1
8 2 sa 3,3.00,3
8 4 rd 1,1.00,1
8 2 leader 0,1.50,3
LIST

lazy=$(sim_row 4 2 pap_shm --params ib-edr)
eager=$(sim_row 4 2 pap_shm --params ib-edr --connect eager)
check "qps-eager-4" "$(echo "$eager" | cut -d, -f15-17)" "3,3.00,3"
# ib-edr's qp_ns is 100 us: 3 more per rank, all before the first bootstrap call ends.
check "init-eager-minus-lazy-us" "$(awk -v a="$(echo "$lazy" | cut -d, -f25)" \
    -v b="$(echo "$eager" | cut -d, -f25)" 'BEGIN { printf "%.2f", b - a }')" "300.00"

echo "sim-resources: $pass passed, $fail failed"
[ $fail -eq 0 ]
