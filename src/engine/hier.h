/*
 * Node grouping of a team, for the shared-memory aware algorithms
 * (src/alg/node/alg_shm.c, docs/protocol.md "Node segments").
 *
 * Team ranks are grouped by node (bootstrap hostnames, or ARCOLL_NODE_SIZE);
 * nodes are numbered in order of their first team rank, whose rank is the
 * node's master. Each node of the team has one shared segment, created by
 * the master and mapped by its local ranks:
 *
 *   [ header 64 B ]
 *   arrive[lmax]  64 B each: {call, bytes} of local rank s, set after its phase-1 copy
 *   done[nnodes]  64 B each: master's word "node e's data is in the receive area"
 *   all           64 B:      master's word "every node's data is there" (shm_direct)
 *   send[2]       area each, banks by call parity: phase-1 data of the node's ranks
 *   recv          area:      phase-2 data from the other nodes
 *   addr[lmax]    64 B each: local rank s's buffers by address (sh_co, src/alg/node/alg_sh_co.c)
 *
 * An alltoall area is [node d][local s][local l] blocks of the message size
 * (lmax x lmax per node, so unequal nodes are padded); an allgather area is
 * [node e][local s]. The masters form their own team for phase 2.
 *
 * The non-leader algorithms (src/alg/node/alg_nl.c) use the same segment with other
 * indexing: rank x's slice of a bank is [node][local] blocks (sa: what the
 * node's ranks send to local rank x of every node; rd: what local rank x
 * received for this node), and each rank's "cross team" is the ranks with
 * its local index on every node (for a master: the masters' team).
 */
#ifndef ARCOLL_ENGINE_HIER_H
#define ARCOLL_ENGINE_HIER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "chan/smp/smp_seg.h"
#include "config/tune.h"
#include "util/util.h"

#define HIER_NONE UINT32_MAX

struct arcoll_team;
struct arcoll_mem;

typedef struct hier_layout {
    uint64_t off_arrive, off_done, off_all, off_send, off_recv, off_addr;
    uint64_t area; /* bytes of one send bank or of the receive area */
    uint64_t total;
} hier_layout_t;

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
    size_t max_bytes; /* largest bytes per rank the areas hold */
    hier_layout_t lay;
    smp_seg_t seg;
    struct arcoll_mem *pin; /* master: the segment registered for zero-copy phase 2 */
    /* Multi-node team: the ranks with this rank's local index on every node, in
     * node order (team rank = node), for a master (the masters' team) and, if
     * nodes are equal, for every rank; NULL otherwise. */
    struct arcoll_team *xteam;
    uint8_t *got; /* [nnodes * lmax]: copied out in this call */
    uint8_t *pub; /* master, [nnodes]: done word published in this call */
    char *pack;   /* rd on a team that is not node-major: private staging */
    size_t pack_len;
    /* Calls on the node segment run one at a time per rank (a later one waits
     * in its start), numbered by seq: its banks, arrive and done words follow
     * seq, not the team's epoch, so calls of other algorithms in between (or
     * in flight) leave the argument of docs/protocol.md §10 intact. */
    uint64_t seq;
    int busy;
    /* A node algorithm's per-team state, made on its first call (sh_co: the
     * rank's Morton share), freed with the team. */
    void *alg_state;
    void (*alg_state_free)(void *);
} hier_t;

/* Local planning, before the team's bootstrap exchange: group the ranks and,
 * on a master, create the segment. t->hier stays NULL when no node holds
 * two of the team's ranks (nothing to share). */
int hier_plan(struct arcoll_team *t);
/* After the exchange: map the master's segment. pid/key: per team rank. */
int hier_attach(struct arcoll_team *t, const long *pid, const uint64_t *key, const int32_t *socket);
/* Every member has mapped the segment: the way to find it may go. */
void hier_seal(struct arcoll_team *t);
/* Context ranks of this rank's cross team (see xteam) in node order; *n = 0
 * if it has none. list has room for t->size entries. */
void hier_xteam_ranks(const struct arcoll_team *t, int *list, int *n);
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

static inline char *hier_at(const hier_t *h, uint64_t off)
{
    return (char *)h->seg.addr + off;
}

static inline _Atomic uint64_t *hier_word(const hier_t *h, uint64_t off)
{
    return (_Atomic uint64_t *)hier_at(h, off);
}

/* Local rank s's arrive line: word 0 the segment call number (hier_t.seq,
 * called "epoch" below) of its last arrival, words 1-2 its size per bank
 * (parity), words 3-4 a done word per bank (rd), words 5-6 per bank the
 * number of its call on the team (docs/protocol.md §8). */
static inline _Atomic uint64_t *hier_arrive_line(const hier_t *h, uint32_t s)
{
    return hier_word(h, h->lay.off_arrive + (uint64_t)s * 64);
}

/* The size hier_arrived reports for a local rank whose call there is not
 * ours (its team call number differs: the calls no longer line up). */
#define HIER_OTHER_CALL UINT64_MAX

/* Local rank s has arrived at the call of this epoch: its arrive word holds
 * the epoch, or the next one if s already finished this call (it can be no
 * further ahead: finishing the next call needs our arrival). Its size for an
 * epoch sits in the word of that epoch's bank, so the next call cannot hide
 * it (docs/protocol.md §10); so does its team call number, which must be num,
 * else the size is HIER_OTHER_CALL. */
static inline int hier_arrived(const hier_t *h, uint32_t s, uint64_t epoch, uint64_t num,
                               uint64_t *size)
{
    const _Atomic uint64_t *w = hier_arrive_line(h, s);
    uint64_t e = atomic_load_explicit(w, memory_order_acquire);

#ifdef ARCOLL_FAULTS
    if (wire_fault_no_epoch && e != 0) {
        e = epoch; /* tests: any earlier arrival passes for this one */
        num = atomic_load_explicit(w + 5 + (epoch & 1), memory_order_relaxed);
    }
#endif
    if ((int64_t)(e - epoch) < 0)
        return 0;
    *size = atomic_load_explicit(w + 1 + (epoch & 1), memory_order_relaxed);
    if (atomic_load_explicit(w + 5 + (epoch & 1), memory_order_relaxed) != num)
        *size = HIER_OTHER_CALL;
    return 1;
}

/* Announce our arrival at epoch with our size, in our call num of the team. */
static inline void hier_arrive_set(const hier_t *h, uint64_t epoch, uint64_t num, uint64_t size)
{
    _Atomic uint64_t *w = hier_arrive_line(h, h->lrank);

    atomic_store_explicit(w + 1 + (epoch & 1), size, memory_order_relaxed);
    atomic_store_explicit(w + 5 + (epoch & 1), num, memory_order_relaxed);
    atomic_store_explicit(w, epoch, memory_order_release);
}

#endif
