#!/bin/bash
# Payload-free mode of arcoll-sim (docs/scale.md): for each algorithm, the rows of a run with
# payload (every byte checked) and of a --no-payload run must be identical, virtual times
# included; and the payload-free runs must really have dropped bytes (not pap_shm and sa: their
# data leaves through the node segment, not from the user's buffers). Prints
# "nopayload: K same, D differ, P payload-free runs without dropped puts".
# usage: sim_nopayload.sh BUILD
SIM="$1/bin/arcoll-sim -n 16 --ppn 4 --params ib-edr --iters 1 --warmup 1 --csv --size 8,20000"
same=0 differ=0 nodrop=0
for ca in alltoall:pap alltoall:direct alltoall:pap_shm:0 alltoall:sa:0 alltoall:mn_co \
    allgather:ring allgather:rdh alltoallv:sloav alltoallv:sloavx allreduce:rdh; do
    c=${ca%%:*} a=${ca#*:} drops=1
    [ "${a%:0}" != "$a" ] && a=${a%:0} drops=0
    x=$($SIM --coll "$c" --alg "$a" 2>/dev/null | cut -d, -f1-13)
    y=$($SIM --coll "$c" --alg "$a" --no-payload 2>/tmp/sim_nopayload.$$ | cut -d, -f1-13)
    if [ -n "$x" ] && [ "$x" = "$y" ]; then
        same=$((same + 1))
    else
        differ=$((differ + 1))
        printf 'differ: %s\n--- with payload\n%s\n--- payload-free\n%s\n' "$ca" "$x" "$y"
    fi
    [ $drops -eq 0 ] || grep -qE "not checked, [1-9][0-9]* of them payload-free" /tmp/sim_nopayload.$$ || {
        nodrop=$((nodrop + 1))
        echo "no dropped puts: $ca"
    }
done
rm -f /tmp/sim_nopayload.$$
echo "nopayload: $same same, $differ differ, $nodrop payload-free runs without dropped puts"
[ $differ -eq 0 ] && [ $nodrop -eq 0 ]
