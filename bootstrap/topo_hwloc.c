/* Node topology through hwloc; sysconf when hwloc cannot tell. */
#include <unistd.h>

#include <hwloc.h>

#include "bootstrap/boot.h"
#include "util/log.h"

/* The package whose cpus hold all of this process's binding, -1 if none
 * does (bound across packages) or hwloc cannot tell. */
static int boot_topo_hwloc_socket(hwloc_topology_t topo)
{
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    hwloc_obj_t pkg;
    int socket = -1;

    if (set == NULL) {
        log_debug("hwloc_bitmap_alloc failed");
        goto out;
    }
    if (hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) != 0) {
        log_debug("hwloc_get_cpubind failed");
        goto out_set;
    }
    pkg = hwloc_get_next_obj_covering_cpuset_by_type(topo, set, HWLOC_OBJ_PACKAGE, NULL);
    if (pkg != NULL)
        socket = (int)pkg->logical_index;
out_set:
    hwloc_bitmap_free(set);
out:
    return socket;
}

/* Cores and PUs inside the cpuset this process may use (cgroups, cpusets),
 * and its socket. */
static int boot_topo_hwloc_count(int *ncores, int *npus, int *socket)
{
    hwloc_topology_t topo;
    hwloc_const_cpuset_t allowed;
    int ret = -1;

    if (hwloc_topology_init(&topo) != 0) {
        log_debug("hwloc_topology_init failed");
        goto err;
    }
    if (hwloc_topology_load(topo) != 0) {
        log_debug("hwloc_topology_load failed");
        goto err_topo;
    }
    allowed = hwloc_topology_get_allowed_cpuset(topo);
    if (allowed == NULL) {
        log_debug("hwloc_topology_get_allowed_cpuset failed");
        goto err_topo;
    }
    *ncores = hwloc_get_nbobjs_inside_cpuset_by_type(topo, allowed, HWLOC_OBJ_CORE);
    *npus = hwloc_get_nbobjs_inside_cpuset_by_type(topo, allowed, HWLOC_OBJ_PU);
    /* Some platforms expose no cores (or PUs only at depth -1): do not trust 0. */
    if (*ncores <= 0 || *npus <= 0) {
        log_debug("hwloc counted %d cores, %d PUs", *ncores, *npus);
        goto err_topo;
    }
    *socket = boot_topo_hwloc_socket(topo);
    ret = 0;

err_topo:
    hwloc_topology_destroy(topo);
err:
    return ret;
}

int boot_topo_query(boot_topo_t *t)
{
    long n;

    t->socket = -1;
    if (boot_topo_hwloc_count(&t->ncores, &t->npus, &t->socket) == 0)
        return ARCOLL_OK;
    n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n <= 0)
        n = 1;
    t->ncores = (int)n;
    t->npus = (int)n;
    log_debug("hwloc topology unavailable, using %ld online processors", n);
    return ARCOLL_OK;
}
