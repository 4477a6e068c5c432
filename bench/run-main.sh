#!/usr/bin/env bash
# The main job (`make run`): PAP_Direct vs Direct alltoall/allgather on 4
# local ranks over the shared-memory channel, with and without injected
# arrival skew, validated, printed as a table.
set -eu
B=${1:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
NP=${ARCOLL_RUN_NP:-4}
exec mpirun --oversubscribe --bind-to none -np "$NP" "$B/bin/arcoll-bench" \
    -c both -a direct,pap -m 1:64k -M 0,32,128 -i 200 -x 20 -v "$@"
