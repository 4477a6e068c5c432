/*
 * The launcher's local rank, the node heap's slot (docs/heap.md). Its own
 * object: heap.c uses it for the slot, and the preload code (linked into
 * libarcoll_heap.so and libarcoll_mpi.so, which see no internal symbol of
 * libarcoll) uses it to tell an MPI rank from any other process.
 */
#include <stdlib.h>

#include "mem/heap.h"

int heap_launcher_rank(void)
{
    static const char *const vars[] = {"ARCOLL_HEAP_SLOT", "OMPI_COMM_WORLD_LOCAL_RANK",
                                       "MPI_LOCALRANKID", "SLURM_LOCALID", "PALS_LOCAL_RANKID"};

    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long r;

        if (v == NULL || *v == '\0')
            continue;
        r = strtol(v, &end, 10);
        if (*end == '\0' && r >= 0 && r < (1L << 20))
            return (int)r;
    }
    return -1;
}
