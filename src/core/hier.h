/*
 * Node grouping of a team, for the shared-memory aware algorithms
 * (src/pap/alg_shm.c, docs/protocol.md "Node segments").
 *
 * Team ranks are grouped by node (bootstrap hostnames, or ARCOLL_NODE_SIZE);
 * nodes are numbered in order of their first team rank, whose rank is the
 * node's master. Each node of the team has one shared segment, created by
 * the master and mapped by its local ranks:
 *
 *   [ header 64 B ]
 *   arrive[lmax]  64 B each: {epoch, bytes} of local rank s, set after its phase-1 copy
 *   done[nnodes]  64 B each: master's word "node e's data is in the receive area"
 *   all           64 B:      master's word "every node's data is there" (shm_direct)
 *   send[2]       area each, banks by epoch parity: phase-1 data of the node's ranks
 *   recv          area:      phase-2 data from the other nodes
 *
 * An alltoall area is [node d][local s][local l] blocks of the message size
 * (lmax x lmax per node, so unequal nodes are padded); an allgather area is
 * [node e][local s]. The masters form their own team for phase 2.
 */
#ifndef ARCOLL_CORE_HIER_H
#define ARCOLL_CORE_HIER_H

#include <stddef.h>
#include <stdint.h>

#include "smp/smp_seg.h"

#define HIER_NONE UINT32_MAX

struct arcoll_team;
struct arcoll_mem;

typedef struct hier_layout {
    uint64_t off_arrive, off_done, off_all, off_send, off_recv;
    uint64_t area; /* bytes of one send bank or of the receive area */
    uint64_t total;
} hier_layout_t;

typedef struct hier {
    uint32_t nnodes, lmax;
    uint32_t node, lrank, lsize; /* this rank's node, index on it, ranks on it */
    uint32_t *node_size;         /* [nnodes] */
    uint32_t *node_rank;         /* [nnodes * lmax]: team rank of (node, local), HIER_NONE pads */
    uint32_t *node_first;        /* [nnodes]: first team rank if the node's ranks are consecutive */
    long *local_pid;             /* [lsize]: pids of this node's ranks, for liveness checks */
    size_t max_bytes;            /* largest bytes per rank the areas hold */
    hier_layout_t lay;
    smp_seg_t seg;
    struct arcoll_mem *pin;      /* master: the segment registered for zero-copy phase 2 */
    struct arcoll_team *masters; /* master of a multi-node team: the team of masters */
    uint8_t *got;                /* [nnodes * lmax]: copied out in this call */
    uint8_t *pub;                /* master, [nnodes]: done word published in this call */
} hier_t;

/* Local planning, before the team's bootstrap exchange: group the ranks and,
 * on a master, create the segment. t->hier stays NULL when no node holds
 * two of the team's ranks (nothing to share). */
int hier_plan(struct arcoll_team *t);
/* After the exchange: map the master's segment. pid/tag: per team rank. */
int hier_attach(struct arcoll_team *t, const long *pid, const uint64_t *tag);
/* Every member has mapped the segment: its name may go. */
void hier_seal(struct arcoll_team *t);
/* Context ranks of the masters in node order, if this rank is the master of
 * a multi-node team; *n = 0 otherwise. list has room for t->size entries. */
void hier_masters(const struct arcoll_team *t, int *list, int *n);
void hier_free(struct arcoll_team *t);

static inline int hier_is_master(const hier_t *h)
{
    return h->lrank == 0;
}

#endif
