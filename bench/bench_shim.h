/* The PMPI shim as an MPI benchmark sees it: present only when preloaded. */
#ifndef ARCOLL_BENCH_SHIM_H
#define ARCOLL_BENCH_SHIM_H

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "arcoll_mpi.h"

/* The shim's counters function (NULL: no shim loaded) and a first snapshot of
 * them in *s0 (zeros without the shim). */
static inline arcoll_mpi_stats_fn bench_shim_stats(arcoll_mpi_stats_t *s0)
{
    arcoll_mpi_stats_fn fn =
        (arcoll_mpi_stats_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "arcoll_mpi_stats");

    memset(s0, 0, sizeof(*s0));
    if (fn != NULL)
        fn(s0);
    return fn;
}

#endif
