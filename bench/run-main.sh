#!/usr/bin/env bash
# The main job (`make run`): alltoall and allgather on 4 local ranks, PAP_Direct vs Direct
# (and Open MPI's own collectives when the MPI build of the benchmark exists), without skew
# and with random arrival delays up to 32 x T(size), every iteration validated; prints the
# table and writes build/arcoll-run.png when gnuplot is there.
#   bench/run-main.sh [BUILD_DIR] [extra arcoll-bench options]
set -eu
B=${1:-build}
shift || true
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
NP=${ARCOLL_RUN_NP:-4}
CORES=$(nproc)
MPIRUN=(mpirun --bind-to none -np "$NP")
if [ "$NP" -gt "$CORES" ]; then
    # More ranks than cores: let Open MPI yield its core while it waits, as arcoll does,
    # so neither side wins by starving the other.
    MPIRUN+=(--oversubscribe --mca mpi_yield_when_idle 1)
fi
if [ -x "$B/bin/arcoll-bench-mpi" ]; then
    ALGS=pap,direct,mpi
    BENCH=("$B/bin/arcoll-bench-mpi" -a "$ALGS")
else
    ALGS=pap,direct
    BENCH=("$B/bin/arcoll-bench" -a "$ALGS")
    echo "run: $B/bin/arcoll-bench-mpi not built (needs mpicc, Debian libopenmpi-dev):" \
        "comparing pap and direct only"
fi
PLOT=()
if command -v gnuplot >/dev/null 2>&1; then
    PLOT=(--plot "$B/arcoll-run.png")
else
    echo "run: gnuplot not found (Debian package gnuplot-nox): no plot, table only"
fi
echo "run: ${MPIRUN[*]} ${BENCH[*]} ..."
"${MPIRUN[@]}" "${BENCH[@]}" -t both -m 1:1M -M 0,32 -i 500 -x 50 -c "${PLOT[@]}" "$@"
if [ ${#PLOT[@]} -gt 0 ]; then
    echo "run: plot written to $B/arcoll-run.png"
fi
