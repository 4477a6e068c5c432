/*
 * Logarithmic alltoallv (Xu et al.): SLOAV and its node-aware form SLOAVx, as
 * one element-routing schedule (docs/protocol.md §14). Pure logic on a
 * dynamic schedule (engine/sched.h): no channel, no engine, so that unit tests
 * run it in memory (tests/unit/test_sloav.c).
 *
 * Every block (src -> dst) of the call is an element. An element of at most
 * `thresh` bytes is routed: it travels in packed messages, hop by hop, and
 * only its entry in the holder's Element Index Table moves between hops,
 * never its bytes until it is packed. A larger element goes direct (one
 * message src -> dst, round 0), and a stub of it is routed instead so that
 * its destination can check that both ends chose the same path. Whether an
 * element is routed depends on its length only, which both of its ends know
 * (send count at the source, receive count at the destination): no rank ever
 * needs another rank's counts to decide, so no agreement is needed.
 *
 * Steps (each two rounds: the 8-byte size of the packed message, then the
 * message [count][count x {src, dst, len}][data]):
 *   gather  g = 0 .. G-1   binomial tree on each node towards local rank 0
 *   leader  b = 0 .. B-1   Bruck among node leaders: elements whose
 *                          ((node(dst) - node) mod M) has bit b set go to the
 *                          leader of node + 2^b
 *   scatter g = G-1 .. 0   the same tree back down, by destination
 * with G = ceil(log2 ranks per node), B = ceil(log2 nodes). SLOAV is the
 * case of one rank per node (G = 0): 2 ceil(log2 N) start-ups.
 */
#ifndef ARCOLL_ALG_SCHED_ROUTE_H
#define ARCOLL_ALG_SCHED_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/sched.h"

/* Team shape. node_rank == NULL: every rank is a node of its own (SLOAV). */
typedef struct rt_geom {
    uint32_t n, me;
    uint32_t nnodes, lmax;
    const uint32_t *node_size; /* [nnodes] */
    const uint32_t *node_rank; /* [nnodes * lmax]: team rank of (node, local) */
} rt_geom_t;

/* One call. In place: the blocks to send are the receive buffer's
 * (scounts = rcounts, sdispls = rdispls). */
typedef struct rt_call {
    const size_t *scounts, *sdispls, *rcounts, *rdispls;
    int in_place;
    uint64_t thresh; /* largest routed element, bytes (< 2^32 - 1) */
    /* 2: each step sends the size, then the message (Xu et al.); 1: the
     * message alone, its length taken from the header (open receive). */
    int phases;
} rt_call_t;

typedef struct rt rt_t;

/* Build this rank's schedule of the call into s (reset first): its shape,
 * the hook (s->hook_arg is the rt_t), and the state in s's aux. 0 or
 * ARCOLL_ERR_NOMEM. The counts must stay valid until the call completes. */
int rt_build(sched_t *s, const rt_geom_t *g, const rt_call_t *c);
/* The hook, for callers that wrap it. ARCOLL_ERR_MISMATCH means the call's
 * counts disagree across ranks (rt_why says how); the schedule can go on. */
int rt_round(void *arg, sched_t *s, sched_mem_t *m, uint32_t round);
/* The open receive of a one-phase step landed with len bytes (sched_size_t). */
int rt_sized(void *arg, sched_t *s, sched_mem_t *m, uint32_t idx, uint64_t len);
const char *rt_why(const rt_t *rt);
/* A mismatch was found (or rt_poison'ed): the call ends with MISMATCH. */
int rt_failed(const rt_t *rt);
/* After a hook that reported a mismatch: 1 if the stream from team rank q
 * carries what this rank does not expect (a message that does not parse, or,
 * after the last round's hook, a block that took another path than this rank
 * expects): stop it. */
int rt_rejects(const rt_t *rt, uint32_t q, uint32_t round);
/* After a mismatch the hooks only keep the streams going. */
void rt_poison(rt_t *rt);

#endif
