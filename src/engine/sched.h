/*
 * Round-based schedules (docs/protocol.md, "Schedules"): what one rank sends
 * to whom and receives from whom in one collective call, as data. A
 * multi-round algorithm builds one per call (or caches it per team shape) and
 * the engine runs it, PAP-aware: every send whose dependencies are met goes
 * out, peers that have arrived first; receives are applied whenever their data
 * lands. Algorithms never see the channel.
 *
 * Buffers are named, not pointed to, so that a schedule is pure data that
 * unit tests can run in memory: SCHED_BUF_SEND is the user's send buffer,
 * SCHED_BUF_RECV the user's receive buffer, SCHED_BUF_TMP a scratch buffer of
 * tmp_len bytes the engine allocates for the call.
 *
 * Rules a schedule must follow, and what the engine guarantees
 * (tests/unit/test_rd_sched.c runs schedules under exactly this model):
 *   1. A send of round r starts once every receive of rounds < r has been
 *      applied and every local copy of rounds <= r has run. A receive of
 *      round r is applied as soon as its data lands and the local copies of
 *      rounds <= r have run (so round-0 copies precede everything).
 *   2. Messages between one ordered pair of ranks form a stream: the sender's
 *      sends to peer p, in list order, match p's receives from the sender, in
 *      list order, message by message and byte for byte (the engine checks
 *      the lengths and reports ARCOLL_ERR_MISMATCH otherwise).
 *   3. No receive writes bytes that a send of the same call reads: a send's
 *      bytes stay as they are until it completes locally, which the engine
 *      does not wait for before applying later receives. Reading what an
 *      earlier receive wrote is the normal forward pattern (rule 1 orders it).
 *      SCHED_COPY receives overlap nothing; SCHED_REDUCE receives may overlap
 *      each other: each combines into what is there, one at a time, in
 *      arrival order (exact for integers; floats may round differently from
 *      run to run, never from rank to rank for allreduce, whose every block is
 *      reduced at one rank).
 *   4. Local copies of round r run once every receive of rounds < r has been
 *      applied and every send of rounds < r has completed locally; a local
 *      copy of round >= nrounds runs after everything. nrounds counts the
 *      rounds of sends and receives only.
 * SEND, RECV and TMP never alias.
 *
 * Dynamic schedules (SLOAV: what a rank forwards in round r depends on what
 * it received before): the shape (who sends to whom, in which round) is fixed
 * at start, the lengths are not. An optional hook runs once for each round
 * r = 0 .. nrounds, after every receive of rounds < r was applied and every
 * send of rounds < r was written (the channel may still be reading it:
 * sched_mem_t.pinned), and before any send or receive of round r moves a
 * byte (it counts as a local copy of round r, rule 4). It may rewrite the
 * segments of messages of rounds >= r (lengths included) and grow TMP
 * (sched_mem_tmp); hook(nrounds) runs after everything else but the
 * unordered messages. A hook that returns ARCOLL_INPROGRESS changed nothing
 * and runs again later.
 */
#ifndef ARCOLL_ENGINE_SCHED_H
#define ARCOLL_ENGINE_SCHED_H

#include <stddef.h>
#include <stdint.h>

enum { SCHED_BUF_SEND = 0, SCHED_BUF_RECV = 1, SCHED_BUF_TMP = 2, SCHED_NBUF };

/* What a receive does with the bytes that land: copy them into its segments,
 * or combine them elementwise into what is there (the call's dtype and op). */
enum { SCHED_COPY = 0, SCHED_REDUCE = 1 };

/* A message has fewer than 2^24 segments (sched_add_* refuse more with
 * ARCOLL_ERR_UNSUPPORTED): the count shares a word with the flags. */
#define SCHED_NSEG_BITS 24
#define SCHED_NSEG_MAX  ((1u << SCHED_NSEG_BITS) - 1)

/* 16 bytes: a large schedule holds one per pair and peer (a 4096-rank
 * allreduce 4 per pair). No buffer is 2^56 bytes long. */
typedef struct sched_seg {
    uint64_t off : 56;
    uint64_t buf : 8; /* SCHED_BUF_* */
    uint64_t len;
} sched_seg_t;

/* A message (send or receive) or a local copy: its bytes are the
 * concatenation of its segments, in order. */
typedef struct sched_msg {
    union {
        uint32_t peer;     /* sends, receives: the team rank */
        uint32_t src_nseg; /* local copies: source segments, after the dest ones */
    };
    uint32_t round; /* dependency level, rule 1 and 4 */
    uint32_t seg;   /* segments: segs[seg .. seg + nseg) */
    uint32_t nseg : SCHED_NSEG_BITS;
    /* Receives: SCHED_COPY or SCHED_REDUCE. Sends: what the receiver does
     * with it, set on the message just added where it reduces (both ends
     * must agree: a reduced message never takes the zero-copy rendezvous,
     * docs/protocol.md §17; a send left at SCHED_COPY whose receive reduces
     * is a mismatch there). */
    uint32_t action : 6;
    /* Sends and receives of round 0 only: outside the round order (they
     * neither wait for nor hold back any round; the call still completes
     * only after them). For messages nothing else depends on, such as
     * SLOAV's direct blocks. Set it on the message just added. */
    uint32_t unordered : 1;
    /* Receives of dynamic schedules: the sender's header gives the length,
     * and sched_t.on_size places the message when its first fragment lands
     * (one round where two-phase would need a size message first). */
    uint32_t open : 1;
} sched_msg_t;

_Static_assert(sizeof(sched_seg_t) == 16 && sizeof(sched_msg_t) == 16,
               "schedule entries stay small: a 4096-rank schedule has millions");

/* A local copy's source segments: segs[sched_src_seg(m) .. + m->src_nseg),
 * right after its destination ones (sched_add_local adds them so). */
static inline uint32_t sched_src_seg(const sched_msg_t *m)
{
    return m->seg + m->nseg;
}

/* The buffers a schedule runs on (the engine's, or a test's). */
typedef struct sched_mem {
    char *buf[SCHED_NBUF];
    size_t tmp_cap;
    /* Set by the executor while channel operations may still read TMP (a
     * put the channel queued keeps its source pointer): TMP must not move,
     * so sched_mem_tmp refuses to grow it (ARCOLL_INPROGRESS) and the hook
     * or on_size returns that, having changed nothing, to be called again. */
    int pinned;
    /* Bytes a hook copied (it adds them): the executor charges them as local
     * work (eng_cost) for the simulator. */
    uint64_t copied;
} sched_mem_t;

typedef struct sched sched_t;
/* A round hook (above): 0, or a status that fails the call. */
typedef int (*sched_hook_t)(void *arg, sched_t *s, sched_mem_t *m, uint32_t round);
/* An open receive (s->recv[idx]) is len bytes long: set its segments (grow
 * TMP if needed). 0; ARCOLL_ERR_MISMATCH rejects the stream like a length
 * that disagrees; another status fails the call. */
typedef int (*sched_size_t)(void *arg, sched_t *s, sched_mem_t *m, uint32_t idx, uint64_t len);

struct sched {
    uint32_t nrounds;
    sched_msg_t *send, *recv, *local;
    uint32_t nsend, nrecv, nlocal;
    sched_seg_t *segs;
    uint32_t nsegs;
    size_t tmp_len;       /* bytes of SCHED_BUF_TMP, 0 if none */
    sched_hook_t hook;    /* dynamic schedules: NULL, or called per round (above) */
    sched_size_t on_size; /* open receives (sched_msg_t.open) */
    void *hook_arg;       /* of both */
    /* capacities (sched_add_* grow them) */
    uint32_t cap_send, cap_recv, cap_local, cap_segs;
    /* Scratch an algorithm keeps with its schedule (reused per call, freed
     * with it): sched_aux. */
    void *aux;
    size_t aux_cap;
};

void sched_init(sched_t *s);
void sched_free(sched_t *s);
/* Forget the messages, keep the memory (a schedule rebuilt per call). */
void sched_reset(sched_t *s);
/* Append a message; segments are copied. 0, ARCOLL_ERR_NOMEM, or
 * ARCOLL_ERR_UNSUPPORTED (more than SCHED_NSEG_MAX segments). Messages of
 * one kind must be added in nondecreasing round order. */
int sched_add_send(sched_t *s, uint32_t round, uint32_t peer, const sched_seg_t *segs,
                   uint32_t nseg);
int sched_add_recv(sched_t *s, uint32_t round, uint32_t peer, int action, const sched_seg_t *segs,
                   uint32_t nseg);
/* Segments that several messages share: sched_add_segs stores them once
 * (their index in *first), and the _at forms add a message over segments
 * [first, first + nseg) already stored. A linear schedule sends one block to
 * every peer, or reduces every peer's block into one: stored once, that is
 * 16 bytes less per peer and message (256 MiB at 4096 ranks). Only for
 * static schedules: a hook or on_size that rewrites one message's segments
 * would rewrite them for all that share them. */
int sched_add_segs(sched_t *s, const sched_seg_t *segs, uint32_t nseg, uint32_t *first);
int sched_add_send_at(sched_t *s, uint32_t round, uint32_t peer, uint32_t first, uint32_t nseg);
int sched_add_recv_at(sched_t *s, uint32_t round, uint32_t peer, int action, uint32_t first,
                      uint32_t nseg);
/* dst and src describe the same number of bytes. */
int sched_add_local(sched_t *s, uint32_t round, const sched_seg_t *dst, uint32_t ndst,
                    const sched_seg_t *src, uint32_t nsrc);
/* At least len bytes of aux, kept (zeroed only where new): NULL if out of memory. */
void *sched_aux(sched_t *s, size_t len);
/* Grow TMP to at least len bytes, keeping its contents (segments name TMP by
 * offset, so they stay valid). ARCOLL_OK, ARCOLL_ERR_NOMEM, or
 * ARCOLL_INPROGRESS if it would have to move while pinned. */
int sched_mem_tmp(sched_mem_t *m, size_t len);
/* Total bytes of a message's (or a local copy's destination) segments. */
uint64_t sched_msg_len(const sched_t *s, const sched_msg_t *m);

#endif
