/* The engine: the per-call state machine that the blocking and nonblocking
 * calls share, the window of calls in flight, completion and failure rules
 * (docs/protocol.md, "Completion"), and the primitives of engine/engine.h.
 * Protocols and algorithms plug in through coll_proto_t and coll_alg_t; the
 * engine never chooses an algorithm (the dispatcher, coll.c, does). */
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "config/tune.h"
#include "engine/eng_int.h"
#include "engine/prof.h"
#include "util/log.h"

/* The progress registry (engine/team.h): the live contexts, which the context code
 * links in and out, and the calls in flight over all of them. */
struct arcoll_context *core_live;
unsigned core_nactive;

int coll_advertise_to(coll_req_t *r, uint32_t peer, const wire_ctrl_t *adv)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;
    uint64_t off = wire_ctrl_off(&t->layout, t->rank, r->bank);
    int cr = t->ranks[peer];
    wire_ctrl_t body = *adv;
    int rc;

    body.epoch = r->epoch; /* every body says which call it is for (coll_ctrl_read) */
    rc = c->ops->put(c, cr, &body.size, sizeof(body) - sizeof(body.flag), NULL,
                     &t->peer_region[peer], off + sizeof(body.flag));
    if (rc != ARCOLL_OK)
        return rc;
    return c->ops->put_u64(c, cr, r->epoch, &t->peer_region[peer], off);
}

int coll_advertise(coll_req_t *r, const chan_rkey_t *rkey, uint64_t boff)
{
    struct arcoll_team *t = r->team;
    wire_ctrl_t adv;
    int rc;

    memset(&adv, 0, sizeof(adv));
    adv.size = r->bytes;
    if (rkey != NULL) {
        adv.rkey = *rkey;
        adv.boff = boff;
    }
    for (uint32_t i = 1; i < t->size; i++) {
        rc = coll_advertise_to(r, (t->rank + i) % t->size, &adv);
        if (rc != ARCOLL_OK)
            return rc;
    }
    return ARCOLL_OK;
}

int eng_path_zcopy(const struct arcoll_team *t, int type, size_t len)
{
    const struct arcoll_context *ctx = t->ctx;
    int path = ctx->cfg.path;

    if (path == CORE_PATH_AUTO && ctx->cfg.zcopy_threshold == CORE_CONFIG_AUTO_SIZE &&
        (type == COLL_ALLTOALL || type == COLL_ALLGATHER || type == COLL_ALLTOALLV ||
         type == COLL_ALLGATHERV)) {
        /* The tuning table's path rules: measured per job shape (over=). An
         * alltoallv block costs what an alltoall block of its length does;
         * its receiver alone decides and advertises the path (protocol §6). */
        core_tune_shape_t shape;
        hier_team_shape(t, &shape);
        path = core_tune_path(&ctx->cfg.tune,
                              type == COLL_ALLTOALLV    ? COLL_ALLTOALL
                              : type == COLL_ALLGATHERV ? COLL_ALLGATHER
                                                        : type,
                              len, &shape);
        if (path < 0)
            path = CORE_PATH_AUTO;
    }
    if (path == CORE_PATH_AUTO) {
        size_t thr = ctx->cfg.zcopy_threshold == CORE_CONFIG_AUTO_SIZE ? ctx->chan->zcopy_threshold
                                                                       : ctx->cfg.zcopy_threshold;
        path = len >= thr ? CORE_PATH_ZCOPY : CORE_PATH_COPY;
    }
    /* Every input above is the same on every rank (the table, the agreed
     * shape, the length both ends of the pair share); the channel said
     * whether it can at init: all ranks agree. */
    return path == CORE_PATH_ZCOPY && ctx->chan->zcopy;
}

int eng_memo(struct arcoll_team *t, struct eng_memo *m, int type, size_t len,
             int (*ask)(const struct arcoll_team *t, int type, size_t len,
                        const core_tune_shape_t *shape))
{
    core_tune_shape_t shape;

    /* The team's shape is fixed while it lives (its grouping is made at
     * creation, oversubscription agreed at init, the channel and its model at
     * init) but for the channel setting, which bumps the generation: building
     * it was half of a memo hit's cost, so only a miss builds it. */
    if (!m->valid || m->gen != t->ctx->cfg.gen || m->type != type || m->len != len) {
        memset(&shape, 0, sizeof(shape));
        hier_team_shape(t, &shape);
        m->val = ask(t, type, len, &shape);
        m->gen = t->ctx->cfg.gen;
        m->type = type;
        m->len = len;
        m->valid = 1;
    }
    return m->val;
}

static int eng_path_ask(const struct arcoll_team *t, int type, size_t len,
                        const core_tune_shape_t *shape)
{
    (void)shape; /* eng_path_zcopy finds it where the table is asked */
    return eng_path_zcopy(t, type, len);
}

int eng_zcopy_pick(coll_req_t *r, size_t len)
{
    /* alltoallv asks per pair, mostly of one length: the tuning table once. */
    if (len != r->zp_len || len == 0) {
        r->zp_val = eng_memo(r->team, &r->team->path_memo, (int)r->type, len, eng_path_ask);
        r->zp_len = len;
    }
    return r->zp_val;
}

int coll_ready_to(coll_req_t *r, uint32_t peer)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;

    return c->ops->put_u64(c, t->ranks[peer], r->epoch, &t->peer_region[peer],
                           wire_ctrl_off(&t->layout, t->rank, r->bank));
}

static int coll_tx_step(coll_req_t *r, uint32_t peer)
{
    coll_peer_t *p = &r->peers[peer];
    int rc = r->proto->tx(r, peer);

    if (rc == ARCOLL_ERR_MISMATCH) /* finish the call with the others, then fail */
        return coll_peer_drop(r, peer, 0);
    if (rc < 0)
        return rc;
    if (rc == 1) {
        p->tx_state = COLL_TX_DONE;
        r->tx_left--;
    } else {
        p->tx_state = COLL_TX_ACTIVE;
    }
    return ARCOLL_OK;
}

int coll_tx(coll_req_t *r, uint32_t peer)
{
    return coll_tx_step(r, peer);
}

/* Continue peers whose message needs more fragments (copy path), and
 * alltoallv's copy blocks sent before the receiver's advertisement, which
 * stay active until it comes (zcopy.c). */
int coll_tx_continue(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    int rc;

    if (r->nfrags <= 1 && !coll_is_v(r))
        return ARCOLL_OK;
    for (uint32_t peer = 0; peer < t->size; peer++) {
        if (r->peers[peer].tx_state != COLL_TX_ACTIVE)
            continue;
        rc = coll_tx_step(r, peer);
        if (rc != ARCOLL_OK)
            return rc;
    }
    return ARCOLL_OK;
}

/* The call is over with r->status: the profiler notes when (once per call,
 * never in the polling loop), the window slot is free, a node-segment call
 * lets the next one start, and the caller's handle keeps the status. */
static inline void coll_done(coll_req_t *r)
{
    struct arcoll_team *t = r->team;

    if (__builtin_expect(r->prof_slot != 0, 0))
        prof_call_end(t->ctx->prof, r);
    t->nactive--;
    core_nactive--;
    if (r->alg->serial)
        t->hseg->busy = 0;
    if (r->ureq != NULL) {
        r->ureq->status = r->status;
        r->ureq->r = NULL;
        r->ureq = NULL;
    }
}

int coll_fail(coll_req_t *r, int rc)
{
    eng_fail_tell(r->team, r->epoch, rc);
    if (r->on_end != NULL)
        r->on_end(r, 1);
    if (r->proto->revoke != NULL)
        r->proto->revoke(r);
    r->proto->finish(r);
    r->team->failed = rc;
    r->status = rc;
    r->active = 0;
    coll_done(r);
    return rc;
}

int coll_finish(coll_req_t *r)
{
    if (r->deferred)
        return coll_fail(r, r->deferred);
    if (r->on_end != NULL)
        r->on_end(r, 0);
    r->proto->finish(r);
    r->active = 0;
    r->status = ARCOLL_OK;
    coll_done(r);
    return ARCOLL_OK;
}

/* One pass of the state machine: receive what landed, write what may be
 * written, then check completion. Never blocks. */
int coll_progress(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;
    int outstanding, rc;

    if (!r->active)
        return r->status;
    if (r->proto == &coll_proto_none)
        return r->alg->progress(r); /* a multi-phase algorithm drives itself */
    outstanding = c->ops->progress(c);
    if (outstanding < 0)
        return coll_fail(r, outstanding);
    for (uint32_t peer = 0; r->rx_left && peer < t->size; peer++) {
        coll_peer_t *p = &r->peers[peer];
        if (p->rx_done)
            continue;
        rc = r->proto->rx(r, peer);
        if (rc == ARCOLL_ERR_MISMATCH) /* nothing was copied; keep serving the others */
            rc = coll_peer_drop(r, peer, 1);
        if (rc < 0)
            return coll_fail(r, rc);
        if (rc == 1) {
            p->rx_done = 1;
            r->rx_left--;
        }
    }
    if (r->tx_left) {
        rc = r->alg->tx_progress(r);
        if (rc < 0)
            return coll_fail(r, rc);
    }
    if (!r->tx_left && !r->rx_left) {
        /* The first count predates this pass's writes: count again before
         * declaring the sends locally complete. */
        if (outstanding == 0)
            outstanding = c->ops->progress(c);
        if (outstanding == 0)
            return coll_finish(r);
        if (outstanding < 0)
            return coll_fail(r, outstanding);
    }
    rc = eng_check_time(r);
    return rc == ARCOLL_INPROGRESS ? rc : coll_fail(r, rc);
}

/* Polls a waiting rank spins before it yields its core (ARCOLL_SPIN_COUNT).
 * auto: 4 when ranks outnumber cores (the peer we wait for may need ours:
 * 4 ranks on 2 cores through the shim, realistic mode, 1-64 B alltoall went
 * from 1.27-1.32x Open MPI's time with 32 to 1.12-1.14x, allgather from
 * 1.19-1.25x to 0.97-1.04x, 1 KiB-4 MiB unchanged or faster; 0 measured
 * alike); never otherwise, like Open MPI: a yield hands the core to any
 * other runnable process for a scheduler slice, which made waits for a late
 * peer end milliseconds after its arrival (docs/measurements/new-collectives.md,
 * "Library issue"). */
static long coll_spin_limit(const struct arcoll_context *ctx)
{
    if (ctx->cfg.spin_count >= 0)
        return ctx->cfg.spin_count;
    return ctx->oversubscribed ? 4 : LONG_MAX;
}

/* The embedding's progress hook, every 64th idle pass of a wait (a short
 * wait never pays for it): a peer may have to finish one of the host
 * library's operations (a nonblocking barrier the program waits for before
 * its next arcoll call) before it reaches ours, and that needs this rank's
 * host progress too (MPI's progress rule). */
static void coll_hook(struct arcoll_context *ctx)
{
    if (ctx->hook == NULL || ctx->in_hook || (++ctx->hook_polls & 63) != 0)
        return;
    ctx->in_hook = 1;
    ctx->hook(ctx->hook_arg);
    ctx->in_hook = 0;
}

/* One idle pass of a wait loop: spin until the limit, then yield. No pause
 * instruction: oversubscribed, it only delays the yield the peer needs (8 B
 * alltoall, 4 ranks on 2 cores, through the shim: 1.12-1.39x Open MPI with
 * it, 1.06-1.12x without; noisy runs). */
static void coll_relax(struct arcoll_context *ctx, long *polls, long limit)
{
    coll_hook(ctx);
    if (ctx->chan->ops->model != NULL && ctx->chan->ops->model->idle != NULL) {
        ctx->chan->ops->model->idle(ctx->chan); /* the simulator: its scheduler runs another rank */
        return;
    }
    if (*polls < limit) {
        (*polls)++;
        __asm__ __volatile__("" ::: "memory");
    } else {
        sched_yield();
    }
}

/* Whether a call of alg may take the team's next epoch now: no call queued
 * before it, its window slot free (the call t->window epochs back is done
 * here before its slot and banks are reused; docs/protocol.md §5), and for a
 * serial family the node segment free. */
static int eng_slot_free(const struct arcoll_team *t, const coll_alg_t *alg)
{
    return !t->reqs[(t->seq + 1) % t->window].active && !(alg->serial && t->hseg->busy);
}

/* A blocking call (or a step of another call): progress until it may start,
 * queued calls first. */
static int eng_start_wait(struct arcoll_team *t, const coll_alg_t *alg)
{
    long polls = 0, limit = coll_spin_limit(t->ctx);

    while (!t->failed && (t->npend != 0 || !eng_slot_free(t, alg))) {
        coll_progress_all(t);
        if (!t->failed && (t->npend != 0 || !eng_slot_free(t, alg)))
            coll_relax(t->ctx, &polls, limit);
    }
    return t->failed ? ARCOLL_ERR_STATE : ARCOLL_OK;
}

/* A queued call: what eng_start needs, and whose handle it completes. */
typedef struct eng_pend {
    struct eng_pend *next;
    coll_args_t a;
    const coll_alg_t *alg;
    unsigned flags;
    const void *site;
    struct arcoll_request *ureq;
} eng_pend_t;

int eng_must_queue(const struct arcoll_team *t, const coll_alg_t *alg)
{
    return t->npend != 0 || !eng_slot_free(t, alg);
}

int eng_enqueue(struct arcoll_team *t, const coll_args_t *a, const coll_alg_t *alg, unsigned flags,
                const void *site, struct arcoll_request *u)
{
    eng_pend_t *p = calloc(1, sizeof(*p));

    if (p == NULL) {
        log_err("%s: out of memory for a queued call (%u queued on this team)",
                coll_type_name(a->type), t->npend);
        return ARCOLL_ERR_NOMEM;
    }
    p->a = *a;
    p->alg = alg;
    p->flags = flags;
    p->site = site;
    p->ureq = u;
    if (u != NULL) {
        u->pend = p;
        u->r = NULL;
        u->status = ARCOLL_INPROGRESS;
    }
    if (t->pend_tail != NULL)
        t->pend_tail->next = p;
    else
        t->pend_head = p;
    t->pend_tail = p;
    t->npend++;
    return ARCOLL_INPROGRESS;
}

static int eng_start_now(struct arcoll_team *t, const coll_args_t *a, const coll_alg_t *alg,
                         unsigned flags, const void *site, coll_req_t **out);

/* Start queued calls, in order, while their slots are free. A start may
 * progress everything (a family's step on another team) and so come back
 * here: each call is off the queue before its start and takes its epoch
 * before anything progresses, so the order holds. */
static void eng_pend_run(struct arcoll_team *t)
{
    while (t->pend_head != NULL) {
        eng_pend_t *p = t->pend_head;
        struct arcoll_request *u = p->ureq;
        coll_req_t *r = NULL;
        int rc;

        if (!t->failed && !eng_slot_free(t, p->alg))
            return;
        t->pend_head = p->next;
        if (t->pend_head == NULL)
            t->pend_tail = NULL;
        t->npend--;
        if (t->failed) {
            /* Its peers may disagree on epochs from here on: it never starts. */
            log_err("%s: an earlier call of this team failed while this one was queued",
                    coll_type_name(p->a.type));
            rc = ARCOLL_ERR_STATE;
        } else {
            rc = eng_start_now(t, &p->a, p->alg, p->flags, p->site, &r);
        }
        if (u != NULL) {
            u->pend = NULL;
            if (rc == ARCOLL_INPROGRESS) {
                r->ureq = u;
                u->r = r;
            } else {
                u->status = rc;
            }
        }
        free(p);
    }
}

void eng_pend_drop(struct arcoll_team *t)
{
    while (t->pend_head != NULL) {
        eng_pend_t *p = t->pend_head;
        t->pend_head = p->next;
        if (p->ureq != NULL) {
            p->ureq->pend = NULL;
            p->ureq->status = ARCOLL_ERR_STATE;
        }
        free(p);
    }
    t->pend_tail = NULL;
    t->npend = 0;
}

void coll_team_progress(struct arcoll_team *t)
{
    for (unsigned i = 0; t->nactive && i < t->window; i++)
        if (t->reqs[i].active)
            coll_progress(&t->reqs[i]);
    if (t->npend != 0)
        eng_pend_run(t);
}

void coll_progress_all(struct arcoll_team *t)
{
    coll_team_progress(t);
    if (core_nactive == t->nactive)
        return; /* nothing in flight elsewhere: the common case costs nothing */
    if (t->ctx->chan->solo) {
        /* Simulated ranks: the other contexts are other ranks, which must
         * progress only in their own virtual time. */
        for (struct arcoll_team *u = t->ctx->teams; u != NULL; u = u->next)
            if (u != t && u->nactive)
                coll_team_progress(u);
        return;
    }
    for (struct arcoll_context *c = core_live; c != NULL; c = c->next)
        for (struct arcoll_team *u = c->teams; u != NULL && core_nactive; u = u->next)
            if (u != t && u->nactive)
                coll_team_progress(u);
}

int coll_team_drain(struct arcoll_team *t)
{
    long polls = 0, limit = coll_spin_limit(t->ctx);

    while (coll_team_busy(t)) {
        coll_progress_all(t);
        if (coll_team_busy(t))
            coll_relax(t->ctx, &polls, limit);
    }
    return t->failed ? ARCOLL_ERR_STATE : ARCOLL_OK;
}

/* Flat algorithms serve alltoall, allgather and (not in place) alltoallv and allgatherv
 * through the per-peer protocols; everything else runs the algorithm's own start/progress. */
static int eng_is_flat(const coll_req_t *r)
{
    return r->alg->tx_progress != NULL && (r->type == COLL_ALLTOALL || r->type == COLL_ALLGATHER ||
                                           (coll_is_v(r) && !r->args.in_place));
}

/* The most copy-path fragments of any block this call sends or receives: those
 * of its longest block (one count of fragments, not one per block). */
static uint32_t eng_max_frags(const coll_req_t *r)
{
    size_t len = 0;

    for (uint32_t j = 0; j < r->team->size; j++) {
        size_t tx = coll_tx_len(r, j), rx = coll_rx_len(r, j);
        if (tx > len)
            len = tx;
        if (rx > len)
            len = rx;
    }
    return coll_nfrags(r, len);
}

/* How the call's bytes move: a flat algorithm's per-peer protocol, or none. */
static void eng_pick_proto(coll_req_t *r)
{
    if (eng_is_flat(r) && coll_is_v(r)) {
        /* Per pair: the zero-copy protocol's advertisements carry each pair's
         * length and path (docs/protocol.md §6). */
        r->proto = &coll_proto_zcopy;
        r->nfrags = eng_max_frags(r);
    } else if (eng_is_flat(r)) {
        /* A 0-byte call (docs/protocol.md §8) sends its size in a copy-path
         * header whatever the path rules say: there is nothing to register. */
        r->proto =
            r->bytes > 0 && eng_zcopy_pick(r, r->bytes) ? &coll_proto_zcopy : &coll_proto_bounce;
        r->nfrags = coll_nfrags(r, r->bytes);
    } else {
        r->proto = &coll_proto_none;
    }
}

/* A flat call's first step: its own block, then the protocol's start. */
static int eng_flat_begin(coll_req_t *r)
{
    uint32_t me = r->team->rank;

    /* Inner phases leave their own block where the outer call reads it. */
    if (!(r->flags & COLL_F_NOSELF) && coll_rx_len(r, me) > 0) {
        eng_cost(r->team->ctx, CHAN_COST_COPY, coll_rx_len(r, me));
        memcpy(coll_dst(r, me), coll_src(r, me), coll_rx_len(r, me));
    }
    r->peers[me].tx_state = COLL_TX_DONE;
    r->peers[me].rx_done = 1;
    return r->proto->start(r);
}

int eng_start(struct arcoll_team *t, const coll_args_t *a, const coll_alg_t *alg, unsigned flags,
              const void *site, coll_req_t **out)
{
    int rc;

    *out = NULL;
    /* Queued calls, the window, then (node-segment algorithms) one such call
     * at a time. */
    rc = eng_start_wait(t, alg);
    if (rc != ARCOLL_OK) {
        log_err("%s: an earlier call of this team failed while this one waited to start",
                coll_type_name(a->type));
        return rc;
    }
    return eng_start_now(t, a, alg, flags, site, out);
}

/* eng_start once the call may start (its slot and the node segment free, no
 * call queued before it). */
static int eng_start_now(struct arcoll_team *t, const coll_args_t *a, const coll_alg_t *alg,
                         unsigned flags, const void *site, coll_req_t **out)
{
    struct arcoll_context *ctx = t->ctx;
    coll_req_t *r = &t->reqs[(t->seq + 1) % t->window];
    int rc;

    *out = NULL;
    {
        coll_peer_t *peers = &t->peer_mem[(size_t)(r - t->reqs) * t->size];
        struct sched_exec *sx = r->sx; /* kept across calls */
        memset(r, 0, offsetof(coll_req_t, priv));
        memset(peers, 0, sizeof(*peers) * t->size);
        r->peers = peers;
        r->sx = sx;
    }
    r->team = t;
    r->args = *a;
    r->type = a->type;
    r->sbuf = a->sbuf;
    r->rbuf = a->rbuf;
    r->bytes = a->bytes;
    r->alg = alg;
    r->flags = flags;
    r->is_direct = alg->is_direct;
    eng_pick_proto(r);
    /* The bank follows the epoch; the wire words carry the call's number:
     * its epoch, or the outer call's for a step (docs/protocol.md §8). */
    t->seq++;
    r->epoch = a->call != 0 ? a->call : t->seq;
    r->bank = wire_bank(t->seq, t->layout.banks);
    r->tx_left = r->rx_left = t->size - 1;
    r->step = 1;
    r->start_ns = eng_start_time_ns(ctx);
    r->deadline_ns = r->start_ns + (uint64_t)ctx->cfg.timeout_ms * 1000000ULL;
    r->next_check_ns = r->start_ns + COLL_CHECK_NS;
    r->active = 1;
    t->nactive++;
    core_nactive++;
    if (alg->serial)
        t->hseg->busy = 1;
    r->status = ARCOLL_INPROGRESS;
    /* Arrival is start_ns: the call is accepted and nothing is sent yet. */
    if (__builtin_expect(ctx->prof != NULL, 0) && !(flags & COLL_F_NOPROF))
        prof_call_begin(ctx->prof, r, site);

    if (r->proto == &coll_proto_none) {
        rc = alg->start(r);
        if (rc != ARCOLL_OK)
            return r->active ? coll_fail(r, rc) : rc;
        *out = r;
        return coll_progress(r);
    }
    rc = eng_flat_begin(r);
    if (rc != ARCOLL_OK)
        return coll_fail(r, rc);
    *out = r;
    return coll_progress(r);
}

int eng_switch_flat(coll_req_t *r, const coll_alg_t *alg)
{
    if (r->alg->serial)
        r->team->hseg->busy = 0; /* done with the node segment: the next such call may start */
    r->alg = alg;
    r->is_direct = alg->is_direct;
    eng_pick_proto(r);
    return eng_flat_begin(r);
}

void eng_ureq_wait(struct arcoll_request *u)
{
    long polls = 0, limit;

    if (u->pend != NULL) {
        limit = coll_spin_limit(u->team->ctx);
        while (u->pend != NULL) {
            coll_progress_all(u->team);
            if (u->pend != NULL)
                coll_relax(u->team->ctx, &polls, limit);
        }
    }
    if (u->r != NULL)
        coll_wait(u->r);
}

int coll_wait(coll_req_t *r)
{
    long polls = 0, limit = coll_spin_limit(r->team->ctx);
    int rc;

    while ((rc = coll_progress(r)) == ARCOLL_INPROGRESS) {
        /* Other calls in flight, of any team, may be what a peer waits for. */
        if (core_nactive > 1)
            coll_progress_all(r->team);
        coll_relax(r->team->ctx, &polls, limit);
    }
    /* Its slot is free: calls queued behind it may start. */
    if (r->team->npend != 0)
        coll_team_progress(r->team);
    return rc;
}
