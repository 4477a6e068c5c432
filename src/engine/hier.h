/*
 * Node grouping of a team, for the node-aware algorithms (src/alg/node/),
 * the tuning table's team shape and the liveness checks. Made when the team
 * is (hier_plan, hier_attach) and read-only afterwards.
 *
 * Team ranks are grouped by node (bootstrap hostnames, or ARCOLL_NODE_SIZE);
 * nodes are numbered in order of their first team rank, whose rank is the
 * node's master. Each rank's "cross team" is the ranks with its local index
 * on every node (for a master: the masters' team, phase 2 of the node-master
 * algorithms; for every rank a step of the non-leader ones).
 *
 * What the algorithms share on a node is the node segment (engine/hier_seg.h,
 * created here with the grouping); what a family keeps per team is its own
 * (eng_state_get, engine/engine.h).
 */
#ifndef ARCOLL_ENGINE_HIER_H
#define ARCOLL_ENGINE_HIER_H

#include <stddef.h>
#include <stdint.h>

#include "config/tune.h"

#define HIER_NONE UINT32_MAX

struct arcoll_team;

typedef struct hier {
    uint32_t nnodes, lmax;
    uint32_t node, lrank, lsize; /* this rank's node, index on it, ranks on it */
    int equal;                   /* every node holds lmax ranks */
    int node_major;              /* equal, and node e is team ranks [e*lmax, (e+1)*lmax) */
    uint32_t *node_size;         /* [nnodes] */
    uint32_t *node_rank;         /* [nnodes * lmax]: team rank of (node, local), HIER_NONE pads */
    uint32_t *node_first;        /* [nnodes]: first team rank if the node's ranks are consecutive */
    long *local_pid;             /* [lsize]: pids of this node's ranks, for liveness checks */
    /* Sockets of this node's ranks, numbered 0 .. nsockets-1 in order of their
     * first local rank; one socket if any rank's is unknown (boot_topo_t), or
     * pretend sockets of ARCOLL_SOCKET_SIZE consecutive local ranks. The same
     * on every rank of the node (from the team records). For sh_co. */
    uint32_t nsockets;
    uint32_t *lsocket; /* [lsize] */
    /* Every member of the team maps the node heap as one region (the same id
     * in every team record): auto may pick sh_co (config/tune.c). */
    int heap;
    /* Multi-node team: the ranks with this rank's local index on every node, in
     * node order (team rank = node), for a master (the masters' team) and, if
     * nodes are equal, for every rank; NULL otherwise. Freed by core_team_free. */
    struct arcoll_team *xteam;
    /* The cross teams are made, on every rank (arcoll_team_create and split
     * make them in a second round, which runs collectives on the team
     * itself): a family that runs a step on xteam may start. */
    int xready;
} hier_t;

/* Local planning, before the team's bootstrap exchange: group the ranks and
 * make the node segment (t->hseg; on a master, created). t->hier and
 * t->hseg stay NULL when no node holds two of the team's ranks (nothing to
 * share) or the segment would hold no bytes (ARCOLL_SHM_MAX=0). */
int hier_plan(struct arcoll_team *t);
/* After the exchange: the node's pids and sockets, heap (every member maps
 * the node heap as one region), and the master's segment mapped. pid/key/
 * socket: per team rank. */
int hier_attach(struct arcoll_team *t, const long *pid, const uint64_t *key, const int32_t *socket,
                int heap);
/* Context ranks of this rank's cross team (see xteam) in node order; *n = 0
 * if it has none. list has room for t->size entries. */
void hier_xteam_ranks(const struct arcoll_team *t, int *list, int *n);
/* The grouping and the node segment (the cross team is core_team_free's). */
void hier_free(struct arcoll_team *t);
/* Local index of another rank of this node whose process has exited, or -1
 * (slow path: one kill(pid, 0) per local rank). */
int hier_local_gone(const hier_t *h);
/* Has the process of team rank q, a rank of this node, exited? 0 if q is not
 * on this node or is this rank. */
int hier_rank_gone(const hier_t *h, uint32_t q);
/* The team's shape for the tuning table from its node grouping (NULL: no node
 * holds two members); over and chan are 0. hier_team_shape fills them from
 * the team's context. */
void hier_shape(const hier_t *h, uint32_t team_size, core_tune_shape_t *out);
void hier_team_shape(const struct arcoll_team *t, core_tune_shape_t *out);

static inline int hier_is_master(const hier_t *h)
{
    return h->lrank == 0;
}

#endif
