/*
 * Logarithmic alltoallv (Xu et al.): SLOAV as an element-routing schedule
 * (docs/protocol.md §14). Pure logic on a dynamic schedule (engine/sched.h):
 * no channel, no engine, so that unit tests run it in memory
 * (tests/unit/test_sloav.c). Its node form, sloavx, runs the node step
 * through the node segment instead (src/alg/node/alg_sloavx.c).
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
 * Steps b = 0 .. ceil(log2 N) - 1 (Bruck): elements whose ((dst - rank) mod
 * N) has bit b set go to rank + 2^b. Each step is two rounds (the 8-byte size
 * of the packed message, then the message [count][count x {src, dst,
 * len}][data]), or one (the message, its length from its header):
 * 2 ceil(log2 N) or ceil(log2 N) start-ups.
 */
#ifndef ARCOLL_ALG_SCHED_ROUTE_H
#define ARCOLL_ALG_SCHED_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/sched.h"

/* Team shape. */
typedef struct rt_geom {
    uint32_t n, me;
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
