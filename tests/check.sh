#!/usr/bin/env bash
# make check: unit tests, integration tests on this host, then the verbs tests in
# Soft-RoCE guests; one closing line for all.
set -u
B=${1:-build}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
# Unit tests under valgrind too, except in the sanitizer build (the two do not mix).
vg=1
[ -n "${ASAN_OPTIONS:-}" ] && vg=0
UNIT_VALGRIND=$vg tests/run-unit.sh "$B" 2>&1 | tee -a "$out"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
tests/integ/run.sh "$B" 2>&1 | tee -a "$out"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
# Embedding: the example channel and the PMPI shim (tests/mpi/).
tests/mpi/run.sh "$B" 2>&1 | tee -a "$out"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
# srun --mpi=pmix on a single-node Slurm started for it; skipped where Slurm cannot be had.
tests/slurm/run.sh "$B" 2>&1 | tee -a "$out"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
# Soft-RoCE guests (verbs channel); skipped with a clear line where qemu cannot be had.
tests/vm/run.sh "$B" all 2>&1 | tee -a "$out"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
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
