#!/usr/bin/env bash
# Install the Debian 12 packages arcoll needs to build, run and test, if any
# are missing. As root it installs them; otherwise it names the command.
set -eu
# libjemalloc-dev: the node heap's allocator (its PIC archive, linked privately: docs/heap.md).
# libopenmpi-dev: mpicc for arcoll-bench-mpi (Open MPI as a baseline); gnuplot-nox: the
# benchmark's --plot (make run writes build/arcoll-run.png).
PKGS="build-essential pkg-config libpmix-dev libhwloc-dev libcmocka-dev libibverbs-dev
      librdmacm-dev libjemalloc-dev openmpi-bin libopenmpi-dev gnuplot-nox"
# Optional tools used by 'make check' when present (skipped with a notice otherwise); the
# Slurm daemons and munge: tests/slurm/ (srun --mpi=pmix); gfortran: mpifort for the PMPI
# shim's Fortran tests (tests/mpi/shim_ftest*.f90); clang-14 and libclang-rt-14-dev: make fuzz
# (libFuzzer, tests/fuzz/).
OPT_PKGS="valgrind clang-format munge slurmctld slurmd slurm-client gfortran clang-14
      libclang-rt-14-dev"
[ "${ARCOLL_DEPS_OPTIONAL:-1}" = 1 ] && PKGS="$PKGS $OPT_PKGS"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "arcoll: missing Debian packages:$missing" >&2
    echo "arcoll: run as root: apt-get install -y --no-install-recommends$missing" >&2
    exit 1
fi
echo "arcoll: installing Debian packages:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
