/*
 * The engine: the exchange primitives every algorithm is written with, and
 * the per-call machinery (start, progress, completion, failure, the window of
 * calls in flight). Algorithms include this header, never dispatch/coll.h (the
 * dispatcher above them): dependencies point one way,
 *   dispatcher (coll.c) -> algorithms (src/alg/)
 *     -> engine (this) -> channel (chan/chan.h) -> bootstrap.
 * docs/architecture.md.
 */
#ifndef ARCOLL_ENGINE_ENGINE_H
#define ARCOLL_ENGINE_ENGINE_H

#include "engine/team.h"

extern const coll_proto_t coll_proto_bounce;
extern const coll_proto_t coll_proto_zcopy;
/* Multi-phase algorithms drive the call themselves: no per-peer hooks. */
extern const coll_proto_t coll_proto_none;

/* eng_start flags for a step of another collective: leave the own block
 * alone (the outer call reads it where it is), do not profile. */
#define COLL_F_NOSELF 1u
#define COLL_F_NOPROF 2u
#define COLL_F_INNER  (COLL_F_NOSELF | COLL_F_NOPROF)
/* The dispatcher's auto picked the algorithm (sh_co's fallback hint). */
#define COLL_F_AUTO 4u

/* A flat call with per-pair lengths (not in place): alltoallv, and
 * allgatherv, whose own block goes to every peer (docs/protocol.md §6). */
static inline int coll_is_v(const coll_req_t *r)
{
    return r->type == COLL_ALLTOALLV || r->type == COLL_ALLGATHERV;
}

/* Flat blocks per peer: what we send it (source, length) and what we expect
 * from it (destination, length). Uniform for alltoall/allgather, per pair
 * for alltoallv and allgatherv (not in place). */
static inline const char *coll_src(const coll_req_t *r, uint32_t peer)
{
    if (r->type == COLL_ALLTOALLV)
        return r->sbuf + r->args.sdispls[peer];
    return r->type == COLL_ALLTOALL ? r->sbuf + (size_t)peer * r->bytes : r->sbuf;
}

static inline size_t coll_tx_len(const coll_req_t *r, uint32_t peer)
{
    return r->type == COLL_ALLTOALLV ? r->args.scounts[peer] : r->bytes;
}

static inline char *coll_dst(const coll_req_t *r, uint32_t peer)
{
    return coll_is_v(r) ? r->rbuf + r->args.rdispls[peer] : r->rbuf + (size_t)peer * r->bytes;
}

static inline size_t coll_rx_len(const coll_req_t *r, uint32_t peer)
{
    return coll_is_v(r) ? r->args.rcounts[peer] : r->bytes;
}

/* The word a v-form's receiver gives each sender to agree on, in its
 * advertisement's size and in the want word of its own block's header:
 * alltoallv, the length it expects from that sender; allgatherv, the
 * signature of its receive counts (below WIRE_SIZE_NONE), which covers every
 * pair, so that a rank whose counts differ disagrees with every peer
 * (docs/protocol.md §6). */
static inline uint64_t coll_v_word(const coll_req_t *r, uint32_t peer)
{
    return r->type == COLL_ALLTOALLV ? r->args.rcounts[peer] : r->args.sig >> 2;
}

/* What a v-form's sender must find in its receiver's word. */
static inline uint64_t coll_v_expect(const coll_req_t *r, uint32_t peer)
{
    return r->type == COLL_ALLTOALLV ? r->args.scounts[peer] : r->args.sig >> 2;
}

/* Copy-path fragments of a block of len bytes: an empty block is one empty
 * fragment, so its receiver still learns the sender's length. */
static inline uint32_t coll_nfrags(const coll_req_t *r, size_t len)
{
    uint64_t b = r->team->layout.frag;

    return len == 0 ? 1 : (uint32_t)((len + b - 1) / b);
}

static inline int coll_peer_rank(const coll_req_t *r, uint32_t peer)
{
    return r->team->ranks[peer];
}

/* A family's per-call state, inside the request. */
#define COLL_PRIV(r, type) \
    ((type *)(void *)((r)->priv + 0 * sizeof(char[sizeof(type) <= COLL_PRIV_BYTES ? 1 : -1])))

/* The context's clock: its channel's if it keeps one (the simulator's virtual
 * time), else core_time_ns(). Timeouts and liveness checks read this. */
uint64_t eng_time_ns(const struct arcoll_context *ctx);
/* A call's start: the same clock, read at its tick (core_time_coarse_ns: up to
 * a few ms early, a few ns to read instead of some 20) unless the profiler
 * records arrivals. It sets deadlines and the 100 ms checks only. */
uint64_t eng_start_time_ns(const struct arcoll_context *ctx);
/* About to copy (CHAN_COST_COPY) or reduce (CHAN_COST_REDUCE) bytes outside
 * the channel: the simulator charges it in virtual time; real channels leave
 * the op NULL and this is one test. Call it before the work (chan.h). */
static inline void eng_cost(const struct arcoll_context *ctx, int kind, size_t bytes)
{
    chan_t *c = ctx->chan;

    if (c->ops->model != NULL && c->ops->model->cost != NULL)
        c->ops->model->cost(c, kind, bytes);
}

/* Start algorithm alg for a validated call on team t (the dispatcher, or a
 * family running a step on another team). Returns ARCOLL_OK (done),
 * ARCOLL_INPROGRESS (*out is the request) or an error. */
int eng_start(struct arcoll_team *t, const coll_args_t *a, const coll_alg_t *alg, unsigned flags,
              const void *site, coll_req_t **out);
/* A multi-phase call (alltoall or allgather) that has not used the team
 * region in its epoch goes on as flat algorithm alg in that same epoch, from
 * its start (every rank of the team must switch alike: its peers run the
 * flat protocol of that epoch). Frees the node segment of a serial one. Then
 * the engine drives it; an error return means: fail the call with it. */
int eng_switch_flat(coll_req_t *r, const coll_alg_t *alg);
/* A family's per-team state (the node families' scratch, sh_co's Morton
 * share): made by make at the family's first call on the team, freed by
 * free with the team. The kind's address is its key, so a new family brings
 * its own kind and touches nothing here. Called at a call's start; the call
 * keeps the pointer for its polling loops. */
typedef struct eng_state_kind {
    void *(*make)(struct arcoll_team *t); /* NULL: out of memory (it said so) */
    void (*free)(void *state);
} eng_state_kind_t;
/* The team's state of this kind, made now if it has none; NULL if make fails. */
void *eng_state_get(struct arcoll_team *t, const eng_state_kind_t *kind);
/* Free every family's state of the team (core_team_free). */
void eng_state_free_all(struct arcoll_team *t);
/* One pass over the call: never blocks. */
int coll_progress(coll_req_t *r);
/* Progress until the call completes (and the team's other calls meanwhile). */
int coll_wait(coll_req_t *r);
/* Progress every active call of the team (errors are kept in each call). */
void coll_team_progress(struct arcoll_team *t);
/* The same, then every call in flight on any team of any live context. */
void coll_progress_all(struct arcoll_team *t);
/* Progress until no call of the team is in flight: ARCOLL_OK, or
 * ARCOLL_ERR_STATE if one failed (the team is failed then). */
int coll_team_drain(struct arcoll_team *t);
static inline int coll_team_busy(const struct arcoll_team *t)
{
    return t->nactive != 0 || t->npend != 0;
}
/* Whether a nonblocking call of alg must queue on t
 * rather than start now: calls queued before it, or its window slot (or the
 * node segment) still busy. */
int eng_must_queue(const struct arcoll_team *t, const coll_alg_t *alg);
/* Queue a validated nonblocking call in
 * order behind the team's calls; it starts from the team's progress once it
 * may, and u follows it. ARCOLL_INPROGRESS, or ARCOLL_ERR_NOMEM. */
int eng_enqueue(struct arcoll_team *t, const coll_args_t *a, const coll_alg_t *alg, unsigned flags,
                const void *site, struct arcoll_request *u);
/* Until the call of handle u is complete (queued, then started). */
void eng_ureq_wait(struct arcoll_request *u);
/* The team goes: its queued calls never start (their handles: ERR_STATE). */
void eng_pend_drop(struct arcoll_team *t);
/* End a call with rc (< 0): the team is failed from now on. */
int coll_fail(coll_req_t *r, int rc);
/* Finish a call: OK, or the deferred error. */
int coll_finish(coll_req_t *r);

/* Flat algorithms: start/continue writing to one peer; continue every peer
 * whose multi-fragment message is under way. */
int coll_tx(coll_req_t *r, uint32_t peer);
int coll_tx_continue(coll_req_t *r);
/* Post our control advertisement (size, optional rkey and the buffer's offset
 * inside the keyed memory) to every peer. */
int coll_advertise(coll_req_t *r, const chan_rkey_t *rkey, uint64_t boff);
/* Post one advertisement to one peer (alltoallv: each peer gets its own). */
int coll_advertise_to(coll_req_t *r, uint32_t peer, const wire_ctrl_t *adv);
/* Whether a block of len bytes per peer goes zero-copy (ARCOLL_PATH, the
 * tuning table's path rules, ARCOLL_ZCOPY_THRESHOLD, the channel): both ends
 * of a pair ask it with the length they agree on. */
int eng_zcopy_pick(coll_req_t *r, size_t len);
/* Can [p, p + len) be written by address, as a node-heap span that every
 * member of this one-node team maps (docs/protocol.md §6, "Heap buffers")? */
int eng_zcopy_heap_ok(const coll_req_t *r, const void *p, size_t len);
/* A failed call's revocation: write WIRE_CTRL_REVOKED into our control slot
 * at team rank p (docs/protocol.md §6, "Revocation"). */
void eng_zcopy_revoke_to(coll_req_t *r, uint32_t p);
/* A failed call's revocation, where puts land when they return: wait while
 * team rank p's done word for tag (an epoch, or a schedule message's tag)
 * says BUSY and p lives, warning once past *until (then 0). */
void eng_zcopy_wait_busy(coll_req_t *r, uint32_t p, uint64_t tag, uint64_t *until);
#ifdef ARCOLL_FAULTS
/* ARCOLL_FAULT=zc_stall: the stall before a zero-copy write (zcopy.c). */
void eng_zcopy_fault_stall(const coll_req_t *r);
#endif
/* The same for a team, a collective (coll_type_t) and a message length, outside
 * a call (arcoll_info). */
int eng_path_zcopy(const struct arcoll_team *t, int type, size_t len);
/* A team's memo of one tuning-table answer (engine/team.h): ask(t, type,
 * len, the team's shape) once, then its answer while type, len, the shape and
 * the settings generation stay the same. */
int eng_memo(struct arcoll_team *t, struct eng_memo *m, int type, size_t len,
             int (*ask)(const struct arcoll_team *t, int type, size_t len,
                        const core_tune_shape_t *shape));
/* Read a peer's advertisement for this epoch; 1 if present. A flag alone
 * (coll_ready_to) reads as size WIRE_SIZE_NONE and no key. */
int coll_ctrl_read(coll_req_t *r, uint32_t peer, wire_ctrl_t *out);
/* Tell one peer this rank is in the call with the control flag alone, no
 * body: for a peer that only waits for the flag (schedules). */
int coll_ready_to(coll_req_t *r, uint32_t peer);
/* The block to (tx) or from the peer has their_size bytes there (UINT64_MAX:
 * the peer refused it) and another length here: log in the caller's terms
 * (inner calls only note it, for their outer call), ARCOLL_ERR_MISMATCH. */
/* "team rank P passed N bytes per peer, team rank R (this rank) passed M:
 * every rank must pass the same size" + note: a size mismatch in the
 * caller's terms, for every path that finds one. */
void coll_log_sizes(const coll_req_t *r, const char *what, uint32_t peer, uint64_t theirs,
                    size_t ours, const char *note);
int coll_mismatch(coll_req_t *r, uint32_t peer, int tx, uint64_t their_size);
/* The peer refused this call with us: its done word carries a status. */
int coll_refused(const coll_req_t *r, uint32_t peer);
/* Refuse this call to a peer: a done word with the mismatch status and a
 * reject credit, whichever it waits on (docs/protocol.md §8). */
int coll_refuse(coll_req_t *r, uint32_t peer);
/* The size a peer's flat call of this epoch announced in our region (its
 * advertisement, or its first fragment's header); 0 if nothing is there. */
int coll_flat_arrival(const coll_req_t *r, uint32_t peer, uint64_t *size);
/* Node-segment algorithms: a peer that runs the flat fallback of this call
 * (its size is on the other side of ARCOLL_SHM_MAX) is a mismatch: logged,
 * ARCOLL_ERR_MISMATCH; ARCOLL_OK if no peer did. */
int coll_flat_check(coll_req_t *r);
/* Refuse this call to every peer of the team, arrived or not: a node-segment
 * call that ends in a mismatch, since a flat peer waits for a word from each
 * rank. The bank is free: every rank has finished epoch e - 16 (protocol §5),
 * and the node algorithms' peers never read it. */
int coll_refuse_all(coll_req_t *r);
/* Whether a receive with nothing new should also look for a peer's refusal or
 * a peer on the other path (§8): every 8th pass, so that an empty poll costs
 * one load on the others, and a mismatch is still found within microseconds. */
static inline int coll_rx_idle_check(const coll_req_t *r)
{
    return (r->polls & 7) == 7;
}
/* Whether the block from a peer comes zero-copy into our buffer (we
 * advertised a key for it): then only its done word ends the receive. */
static inline int coll_rx_keyed(const coll_req_t *r, uint32_t peer)
{
    if (r->proto != &coll_proto_zcopy)
        return 0;
    return coll_is_v(r) ? r->peers[peer].rx_zc : !r->zc_bounce;
}
/* Every 64th pass: peer liveness and the call's deadline. ARCOLL_INPROGRESS,
 * or the error to fail the call with (logged, naming the peers waited for). */
int eng_check_time(coll_req_t *r);
/* "alltoall", "allreduce", ... */
const char *coll_type_name(coll_type_t type);

/*
 * Schedules (engine/sched.h, src/engine/sched_run.c). An algorithm's start builds
 * the call's schedule into eng_sched(r) (kept per request slot, so a repeated
 * call allocates nothing), then calls eng_sched_start; its progress is
 * eng_sched_progress. Modes:
 *   ENG_SCHED_PAP      sends go to arrived peers first and never wait for a
 *                      receiver. Only for full exchanges: schedules where a
 *                      rank's completion needs every rank to have started the
 *                      call (every block non-empty and needed everywhere, or a
 *                      message, even empty, between every pair); the epoch-bank
 *                      argument of docs/protocol.md §5 rests on it.
 *   ENG_SCHED_DIRECT   sends strictly in list order, each after its receiver
 *                      advertised its arrival (the Direct baseline).
 *   ENG_SCHED_PARTIAL  any schedule: a stream's first fragment waits for the
 *                      receiver's advertisement, which receivers post to the
 *                      peers they receive from.
 */
enum { ENG_SCHED_PAP = 0, ENG_SCHED_DIRECT = 1, ENG_SCHED_PARTIAL = 2 };
sched_t *eng_sched(coll_req_t *r);
int eng_sched_start(coll_req_t *r, int mode);
int eng_sched_progress(coll_req_t *r);
/* One exchange on team t, blocking: slen bytes to team rank to and exactly
 * rlen bytes from team rank from (UINT32_MAX: none). Every member calls it
 * the same number of times (it takes an epoch, even with nothing to move). */
int eng_sendrecv(struct arcoll_team *t, uint32_t to, const void *sbuf, size_t slen, uint32_t from,
                 void *rbuf, size_t rlen);
/* From a dynamic schedule's hook: the stream from team rank p carries what
 * this rank does not expect. Drop its remaining receives, tell the sender
 * (its next fragment sees the rejection), and end the call with
 * ARCOLL_ERR_MISMATCH. */
void eng_sched_reject(coll_req_t *r, uint32_t p);
/* The same for every peer we still expect a message from. */
void eng_sched_reject_pending(coll_req_t *r);
/* Free a request slot's schedule state (team teardown). */
void eng_sched_release(coll_req_t *r);

#endif
