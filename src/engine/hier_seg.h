/*
 * A team's node segment, for the shared-memory aware algorithms
 * (src/alg/node/, docs/protocol.md §10 "Node segments"). The node grouping
 * it serves is engine/hier.h.
 *
 * One segment per node of the team, created by the node's master and mapped
 * by its local ranks: an smp segment (chan/smp/smp_seg.h does the mapping,
 * the naming and the seal) with the layout below, which is the algorithms'
 * and so stays in the engine, not in the channel:
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
 * received for this node). sloavx (src/alg/node/alg_sloavx.c) lays a bank
 * out as count lines and one message per node, the receive area as an
 * offset table and the other nodes' messages (docs/protocol.md §14).
 */
#ifndef ARCOLL_ENGINE_HIER_SEG_H
#define ARCOLL_ENGINE_HIER_SEG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "chan/smp/smp_seg.h"
#include "util/util.h"

struct arcoll_context;
struct arcoll_mem;

typedef struct hier_layout {
    uint64_t off_arrive, off_done, off_all, off_send, off_recv, off_addr;
    uint64_t area; /* bytes of one send bank or of the receive area */
    uint64_t total;
} hier_layout_t;

typedef struct hier_seg {
    smp_seg_t seg;
    hier_layout_t lay;
    size_t max_bytes;       /* largest bytes per rank the areas hold */
    struct arcoll_mem *pin; /* master: the segment registered for zero-copy phase 2 */
    /* Calls on the node segment run one at a time per rank (a later one waits
     * in its start: busy, taken and released by the engine for a serial
     * family), numbered by seq: its banks, arrive and done words follow seq,
     * not the team's epoch, so calls of other algorithms in between (or in
     * flight) leave the argument of docs/protocol.md §10 intact. */
    uint64_t seq;
    int busy;
} hier_seg_t;

/* Largest bytes per rank a segment for nnodes nodes of up to lmax ranks
 * holds under ARCOLL_SHM_MAX = shm_max; 0: no segment. The same on every
 * rank: it decides, per call, which algorithm runs. */
size_t hier_seg_max_bytes(uint32_t nnodes, uint32_t lmax, size_t shm_max);
/* The segment for nnodes nodes of up to lmax ranks and max_bytes per rank:
 * laid out, and on the node's master (master != 0) created and, when phase
 * 2 crosses nodes on a zero-copy channel, registered once. */
int hier_seg_create(struct arcoll_context *ctx, uint32_t nnodes, uint32_t lmax, size_t max_bytes,
                    int master, hier_seg_t **out);
/* Not the master: map the master's segment (its pid and key). */
int hier_seg_attach(hier_seg_t *g, long owner, uint64_t key);
/* Every member has mapped the segment: the way to find it may go. */
void hier_seg_seal(hier_seg_t *g);
void hier_seg_free(struct arcoll_context *ctx, hier_seg_t *g);

static inline char *hier_seg_at(const hier_seg_t *g, uint64_t off)
{
    return (char *)g->seg.addr + off;
}

static inline _Atomic uint64_t *hier_seg_word(const hier_seg_t *g, uint64_t off)
{
    return (_Atomic uint64_t *)hier_seg_at(g, off);
}

/* Local rank s's arrive line: word 0 the segment call number (hier_seg_t.seq,
 * called "epoch" below) of its last arrival, words 1-2 its size per bank
 * (parity), words 3-4 a done word per bank (rd; sloavx's data word), words 5-6 per bank the
 * number of its call on the team (docs/protocol.md §8). */
static inline _Atomic uint64_t *hier_seg_arrive_line(const hier_seg_t *g, uint32_t s)
{
    return hier_seg_word(g, g->lay.off_arrive + (uint64_t)s * 64);
}

/* The size hier_seg_arrived reports for a local rank whose call there is not
 * ours (its team call number differs: the calls no longer line up). */
#define HIER_OTHER_CALL UINT64_MAX

/* Local rank s has arrived at the call of this epoch: its arrive word holds
 * the epoch, or the next one if s already finished this call (it can be no
 * further ahead: finishing the next call needs our arrival). Its size for an
 * epoch sits in the word of that epoch's bank, so the next call cannot hide
 * it (docs/protocol.md §10); so does its team call number, which must be num,
 * else the size is HIER_OTHER_CALL. */
static inline int hier_seg_arrived(const hier_seg_t *g, uint32_t s, uint64_t epoch, uint64_t num,
                                   uint64_t *size)
{
    const _Atomic uint64_t *w = hier_seg_arrive_line(g, s);
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

/* Local rank s (this rank) announces its arrival at epoch with its size, in
 * its call num of the team. */
static inline void hier_seg_arrive_set(const hier_seg_t *g, uint32_t s, uint64_t epoch,
                                       uint64_t num, uint64_t size)
{
    _Atomic uint64_t *w = hier_seg_arrive_line(g, s);

    atomic_store_explicit(w + 1 + (epoch & 1), size, memory_order_relaxed);
    atomic_store_explicit(w + 5 + (epoch & 1), num, memory_order_relaxed);
    atomic_store_explicit(w, epoch, memory_order_release);
}

#endif
