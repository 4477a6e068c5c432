/* Out-of-band bootstrap: who am I, who is on my node, allgather a blob,
 * barrier. Used only at setup/teardown, never on the data path. */
#ifndef ARCOLL_BOOTSTRAP_BOOT_H
#define ARCOLL_BOOTSTRAP_BOOT_H

#include <stddef.h>

#include "arcoll.h"

#define BOOT_HOSTNAME_MAX 64

typedef struct boot boot_t;

struct boot {
    int rank;
    int size;
    int local_rank; /* index among ranks on my node */
    int local_size; /* ranks on my node */
    int nnodes;
    int *node_of;        /* [size]: node index of every rank, nodes numbered by first rank */
    int nhosts;          /* hosts (hostnames); nnodes is larger with ARCOLL_NODE_SIZE */
    int host_local_size; /* ranks on my host, whatever the pretend nodes */
    char hostname[BOOT_HOSTNAME_MAX];
    /* Blocking, collective: rbuf gets size*len bytes in rank order. */
    int (*allgather)(boot_t *b, const void *sbuf, void *rbuf, size_t len);
    int (*barrier)(boot_t *b);
    void (*fini)(boot_t *b);
    void *impl;
};

/* PMIx client; a process without a launcher is a singleton (size 1). Fences
 * and gets fail with ARCOLL_ERR_TIMEOUT after timeout_ms (rounded up to
 * seconds) if the server honours PMIX_TIMEOUT (docs/reliability.md). */
int boot_pmix_create(long timeout_ms, boot_t **b);
/* Caller-supplied callbacks (copied). */
int boot_oob_create(const arcoll_oob_t *oob, boot_t **b);
/* Fill node_of/nnodes/local_rank/local_size from everyone's hostname
 * (one allgather); shared by both implementations. */
int boot_nodes_compute(boot_t *b);
void boot_destroy(boot_t *b);
/* Has the process of this pid (on this node) exited? A dead child that its
 * launcher has not reaped yet (a zombie) counts as exited. */
int boot_pid_gone(long pid);

/* Topology (hwloc): processing units available on this node, and the
 * socket (package) this process is bound within, -1 if unbound, bound across
 * sockets or unknown. */
typedef struct boot_topo {
    int ncores;
    int npus;
    int socket;
} boot_topo_t;
int boot_topo_query(boot_topo_t *t);

#endif
