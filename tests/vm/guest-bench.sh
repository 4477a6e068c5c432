#!/usr/bin/env bash
# One guest, a measurement: arcoll-bench over verbs (rxe0) with the arguments in ./args and
# VM_BENCH_NP ranks; output in bench.out. Run by init (tests/vm/run.sh BUILD bench).
set -uo pipefail
. "$(dirname "$0")/guest-lib.sh"
B=${VM_BUILD:-}
step "guest $(hostname): bench, $(nproc) vCPU"
if ! setup_rxe; then
    verdict FAIL rxe_setup "no RoCE v2 GID for $MYIP"
    exit 1
fi
verdict PASS rxe_setup "gid index $(roce_v2_gid_index)"
read -r -a args <"$(dirname "$0")/args"
step "mpirun -np ${VM_BENCH_NP:-4} arcoll-bench ${args[*]}"
timeout 3000 env ARCOLL_CHANNEL=verbs mpirun --oversubscribe --bind-to none -np "${VM_BENCH_NP:-4}" \
    "$B/bin/arcoll-bench" "${args[@]}" >"$VMOUT/bench.out" 2>"$VMOUT/bench.err"
rc=$?
tail -n 3 "$VMOUT/bench.err"
if [ $rc -eq 0 ]; then verdict PASS bench "$(grep -m1 validation "$VMOUT/bench.err")"; else
    verdict FAIL bench "(exit $rc)"
fi
step "done"
exit $VM_FAILED
