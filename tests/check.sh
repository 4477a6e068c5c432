#!/usr/bin/env bash
# make check: unit tests, integration tests on this host, then the verbs tests in
# Soft-RoCE guests; one closing line for all.
set -u
B=${1:-build}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
# suite NAME CMD...: one suite, its output also into $out, its wall time after it.
suite() {
    local name=$1 t=$SECONDS
    shift
    "$@" 2>&1 | tee -a "$out"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    echo "check time: $name $((SECONDS - t)) s"
}
# Unit tests under valgrind too, except in the sanitizer build (the two do not mix).
vg=1
[ -n "${ASAN_OPTIONS:-}" ] && vg=0
suite unit env UNIT_VALGRIND=$vg tests/run-unit.sh "$B"
suite integ tests/integ/run.sh "$B"
# Embedding: the example channel and the PMPI shim (tests/mpi/).
suite mpi tests/mpi/run.sh "$B"
# srun --mpi=pmix on a single-node Slurm started for it; skipped where Slurm cannot be had.
suite slurm tests/slurm/run.sh "$B"
# Soft-RoCE guests (verbs channel); skipped with a clear line where qemu cannot be had.
suite vm tests/vm/run.sh "$B" all
p=0
f=0
while read -r _ np _ nf _; do
    p=$((p + np))
    f=$((f + nf))
done < <(grep -E '^(unit|integ|mpi|slurm|vm): [0-9]+ passed, [0-9]+ failed$' "$out")
[ "$(grep -cE '^(unit|integ|mpi): ' "$out")" -eq 3 ] || { echo "check: a test stage printed no summary"; status=1; f=$((f + 1)); }
echo
echo "check: $p passed, $f failed"
exit $status
