/*
 * Shared-memory aware Shm_Direct and PAP_Shm_Direct (Qian and Afsahi §4.4-4.5),
 * on the node segments of engine/hier_seg.h (grouping: engine/hier.h);
 * docs/protocol.md "Node segments". mn_cox is the same machinery with MN-CO
 * (alg/sched/alg_mn_co.c) among the masters: Li et al.'s node-leader form,
 * one aggregated block per node pair (docs/protocol.md §16).
 *
 * Phase 1: every rank copies its outgoing blocks into its node's send area
 *   (one copy) and sets its arrive word. Phase 2: the master, once all its
 *   local ranks arrived, runs the Direct (shm_direct) or PAP_Direct (pap_shm)
 *   collective of the same kind among the masters, from the send area into
 *   the receive area. Phase 3: ranks copy their blocks out (one copy):
 *   pap_shm publishes one done word per source node as soon as that node's
 *   data is in, shm_direct one word once all is in.
 * Blocks from the rank's own node need no master: they are copied out of the
 * send area as soon as their writer's arrive word is set.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "util/log.h"

enum { SHM_PH_LOCAL = 0, SHM_PH_NET, SHM_PH_DONE };
enum { SHM_V_DIRECT = 0, SHM_V_PAP, SHM_V_MNCO };

/* Per-team state of the family (eng_state_get): what the current call has
 * done so far, reset at each start (calls on the node segment are serial). */
typedef struct shm_team {
    uint8_t *pub;  /* master, [nnodes]: done word published in this call */
    uint8_t got[]; /* [nnodes * lmax]: copied out in this call */
} shm_team_t;

/* Per-call state of the family (inside the request). */
typedef struct shm_call {
    uint32_t phase;    /* master: SHM_PH_* */
    uint32_t left;     /* blocks still to copy out */
    uint64_t seq;      /* the node segment's call number (hier_seg.h) */
    coll_req_t *inner; /* master: phase 2 among the masters */
    shm_team_t *st;    /* the team's, kept for the polling loops */
} shm_call_t;

#define SC(r) COLL_PRIV(r, shm_call_t)

/* Phase 2 runs a flat algorithm, or MN-CO's schedule, on the masters' team. */
extern const coll_alg_t coll_alg_pap, coll_alg_direct, coll_alg_mn_co;

static const coll_alg_t *shm_inner_alg(const coll_req_t *r)
{
    switch (r->alg->variant) {
    case SHM_V_PAP: return &coll_alg_pap;
    case SHM_V_MNCO: return &coll_alg_mn_co;
    default: return &coll_alg_direct;
    }
}

static const char *shm_coll_name(const coll_req_t *r)
{
    return coll_type_name(r->type);
}

static void *shm_team_make(struct arcoll_team *t)
{
    const hier_t *h = t->hier;
    size_t ngot = (size_t)h->nnodes * h->lmax;
    shm_team_t *st = malloc(sizeof(*st) + ngot + h->nnodes);

    if (st == NULL) {
        log_err("pap_shm, shm_direct, leader: out of memory for their per-team state");
        return NULL;
    }
    st->pub = st->got + ngot;
    return st;
}

static const eng_state_kind_t shm_team_kind = {.make = shm_team_make, .free = free};

static char *shm_send(const coll_req_t *r)
{
    const hier_seg_t *g = r->team->hseg;

    return hier_seg_at(g, g->lay.off_send + (uint64_t)(SC(r)->seq & 1) * g->lay.area);
}

/* Where block (node, s -> l) sits in an area: alltoall [node][s][l],
 * allgather [node][s]. */
static size_t shm_block(const coll_req_t *r, uint32_t node, uint32_t s, uint32_t l)
{
    const hier_t *h = r->team->hier;
    size_t i = (size_t)node * h->lmax + s;

    return (r->type == COLL_ALLTOALL ? i * h->lmax + l : i) * r->bytes;
}

/* Phase 1: our blocks into the send area, then our arrive word. */
static void shm_arrive(coll_req_t *r)
{
    const hier_t *h = r->team->hier;
    char *send = shm_send(r);
    size_t m = r->bytes;

    eng_cost(r->team->ctx, CHAN_COST_COPY, r->type == COLL_ALLGATHER ? m : r->team->size * m);
    if (r->type == COLL_ALLGATHER) {
        memcpy(send + shm_block(r, 0, h->lrank, 0), r->sbuf, m);
    } else {
        for (uint32_t d = 0; d < h->nnodes; d++) {
            char *dst = send + shm_block(r, d, h->lrank, 0);
            if (h->node_first[d] != HIER_NONE) { /* the usual case: one run per node */
                memcpy(dst, r->sbuf + (size_t)h->node_first[d] * m, (size_t)h->node_size[d] * m);
                continue;
            }
            for (uint32_t l = 0; l < h->node_size[d]; l++)
                memcpy(dst + (size_t)l * m, r->sbuf + (size_t)h->node_rank[d * h->lmax + l] * m, m);
        }
    }
    hier_seg_arrive_set(r->team->hseg, h->lrank, SC(r)->seq, r->epoch, (uint64_t)m);
}

static int shm_start(coll_req_t *r)
{
    const hier_t *h = r->team->hier;
    shm_team_t *st = eng_state_get(r->team, &shm_team_kind);

    if (st == NULL)
        return ARCOLL_ERR_NOMEM;
    SC(r)->st = st;
    SC(r)->seq = ++r->team->hseg->seq;
    memset(st->got, 0, (size_t)h->nnodes * h->lmax);
    memset(st->pub, 0, h->nnodes);
    SC(r)->left = r->team->size;
    SC(r)->phase = hier_is_master(h) ? SHM_PH_LOCAL : SHM_PH_DONE;
    SC(r)->inner = NULL;
    shm_arrive(r);
    return ARCOLL_OK;
}

/* Copy node e's blocks for us (from its local rank s, or all of them with
 * HIER_NONE) out of an area where that node's blocks are at index at: the
 * receive area (at = e), or the send area for our own node's blocks (at =
 * our node for alltoall, 0 for allgather, whose send area is one node's). */
static void shm_copy_node(coll_req_t *r, const char *area, uint32_t at, uint32_t e, uint32_t s)
{
    const hier_t *h = r->team->hier;
    uint32_t lo = s == HIER_NONE ? 0 : s, hi = s == HIER_NONE ? h->node_size[e] : s + 1;
    size_t m = r->bytes;

    eng_cost(r->team->ctx, CHAN_COST_COPY, (hi - lo) * m);
    if (r->type == COLL_ALLGATHER && s == HIER_NONE && h->node_first[e] != HIER_NONE) {
        memcpy(r->rbuf + (size_t)h->node_first[e] * m, area + shm_block(r, at, 0, 0),
               (size_t)h->node_size[e] * m);
        return;
    }
    for (uint32_t i = lo; i < hi; i++)
        memcpy(r->rbuf + (size_t)h->node_rank[e * h->lmax + i] * m,
               area + shm_block(r, at, i, h->lrank), m);
}

/* Local rank s of this node passed size bytes per rank: say so once, in the
 * caller's terms (team ranks, bytes per peer). */
static void shm_local_mismatch(coll_req_t *r, uint32_t s, uint64_t size)
{
    const hier_t *h = r->team->hier;

    if (!r->deferred)
        coll_log_sizes(r, shm_coll_name(r), h->node_rank[h->node * h->lmax + s], size, r->bytes,
                       "");
    r->deferred = ARCOLL_ERR_MISMATCH;
}

/* This node's master published that node e's blocks will never come. */
static void shm_told(coll_req_t *r, uint32_t e, unsigned status)
{
    const hier_t *h = r->team->hier;

    if (!r->deferred)
        log_err("%s (epoch %llu): this node's master (team rank %u) reports that the blocks of the "
                "node of team rank %u will not come: %s",
                shm_coll_name(r), (unsigned long long)r->epoch, h->node_rank[h->node * h->lmax],
                h->node_rank[e * h->lmax], arcoll_strerror(-(int)status));
    r->deferred = -(int)status;
}

/* Phase 3 (and our own node's blocks): copy out whatever is ready. */
static void shm_copy_out(coll_req_t *r)
{
    const hier_t *h = r->team->hier;
    const hier_seg_t *g = r->team->hseg;
    shm_team_t *st = SC(r)->st;
    const char *send = shm_send(r), *recv = hier_seg_at(g, g->lay.off_recv);

    for (uint32_t s = 0; s < h->lsize; s++) {
        uint8_t *got = &st->got[h->node * h->lmax + s];
        uint64_t size;
        if (*got || !hier_seg_arrived(g, s, SC(r)->seq, r->epoch, &size))
            continue;
        if (size != r->bytes) {
            shm_local_mismatch(r, s, size);
        } else {
            shm_copy_node(r, send, r->type == COLL_ALLTOALL ? h->node : 0, h->node, s);
        }
        *got = 1;
        SC(r)->left--;
    }
    if (h->nnodes < 2 || SC(r)->left == 0)
        return;
    if (r->alg->variant != SHM_V_PAP) { /* all nodes' blocks are published at once */
        uint64_t w = atomic_load_explicit(hier_seg_word(g, g->lay.off_all), memory_order_acquire);
        if (!wire_done_epoch_match(w, SC(r)->seq))
            return;
    }
    for (uint32_t e = 0; e < h->nnodes; e++) {
        uint8_t *got = &st->got[e * h->lmax];
        uint64_t w;
        if (e == h->node || *got)
            continue;
        w = atomic_load_explicit(hier_seg_word(g, g->lay.off_done + (uint64_t)e * WIRE_LINE),
                                 memory_order_acquire);
        if (!wire_done_epoch_match(w, SC(r)->seq))
            continue;
        if (wire_done_status(w) != 0) {
            shm_told(r, e, wire_done_status(w));
        } else {
            shm_copy_node(r, recv, e, e, HIER_NONE);
        }
        *got = 1;
        SC(r)->left -= h->node_size[e];
    }
}

/* Master: node e's data is in the receive area (status 0), or never will be. */
static void shm_publish(coll_req_t *r, uint32_t e, int rc)
{
    const hier_seg_t *g = r->team->hseg;
    uint8_t *pub = SC(r)->st->pub;

    if (pub[e])
        return;
    pub[e] = 1;
    atomic_store_explicit(hier_seg_word(g, g->lay.off_done + (uint64_t)e * WIRE_LINE),
                          wire_done_word(SC(r)->seq, (unsigned)-rc), memory_order_release);
}

static void shm_publish_rest(coll_req_t *r, int rc)
{
    const hier_t *h = r->team->hier;
    const hier_seg_t *g = r->team->hseg;

    for (uint32_t e = 0; e < h->nnodes; e++)
        if (e != h->node)
            shm_publish(r, e, rc);
    atomic_store_explicit(hier_seg_word(g, g->lay.off_all),
                          wire_done_word(SC(r)->seq, (unsigned)-rc), memory_order_release);
}

/* Master: the masters' collective failed on a size. Its sizes are whole
 * nodes' (lmax * lmax or lmax blocks), one byte short from a node whose own
 * ranks disagree (shm_master_local): say it per rank. */
static void shm_inner_mismatch(coll_req_t *r, const coll_req_t *in)
{
    const hier_t *h = r->team->hier;
    uint64_t per = (uint64_t)h->lmax * (r->type == COLL_ALLTOALL ? h->lmax : 1);
    uint32_t m = in->mm_peer > 0 ? h->node_rank[(in->mm_peer - 1) * h->lmax] : 0;
    unsigned long long ep = (unsigned long long)r->epoch;

    if (in->mm_peer == 0) /* a schedule (mn_cox) logged it in the masters' terms */
        log_err("%s (epoch %llu): the nodes' masters found a size mismatch: the ranks of some "
                "node, or of two nodes, pass different sizes",
                shm_coll_name(r), ep);
    else if (in->mm_size == UINT64_MAX)
        log_err("%s (epoch %llu): the master of the node of team rank %u reported a size mismatch "
                "with this node",
                shm_coll_name(r), ep, m);
    else if (in->mm_size == WIRE_SIZE_NONE) /* that master is in another kind of call */
        coll_log_sizes(r, shm_coll_name(r), m, WIRE_SIZE_NONE, r->bytes, "");
    else if (in->mm_size % per != 0)
        log_err("%s (epoch %llu): the ranks of the node of team rank %u pass different sizes",
                shm_coll_name(r), ep, m);
    else
        coll_log_sizes(r, shm_coll_name(r), m, in->mm_size / per, r->bytes, "");
}

/* Master, phase 1 -> 2: once every local rank arrived, start the masters'
 * collective. A local size mismatch still runs it, with a size no other
 * master uses, so that every node learns of the error (docs/protocol.md). */
static int shm_master_local(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    const hier_t *h = t->hier;
    const hier_seg_t *g = t->hseg;
    size_t bytes;
    int mismatch = 0, rc;

    for (uint32_t s = 0; s < h->lsize; s++) {
        uint64_t size;
        if (!hier_seg_arrived(g, s, SC(r)->seq, r->epoch, &size))
            return ARCOLL_OK;
        if (size != r->bytes && !mismatch)
            shm_local_mismatch(r, s, size);
        mismatch |= size != r->bytes;
    }
    if (h->nnodes < 2) {
        SC(r)->phase = SHM_PH_DONE;
        return ARCOLL_OK;
    }
    bytes = r->bytes * h->lmax * (r->type == COLL_ALLTOALL ? h->lmax : 1);
    if (mismatch)
        bytes--; /* >= 3: a mismatch needs two local ranks */
    {
        coll_args_t in = {.type = r->type,
                          .sbuf = shm_send(r),
                          .rbuf = hier_seg_at(g, g->lay.off_recv),
                          .bytes = bytes,
                          .call = r->epoch,
                          .internal = r->args.internal};
        rc = eng_start(h->xteam, &in, shm_inner_alg(r), COLL_F_INNER, NULL, &SC(r)->inner);
    }
    if (rc == ARCOLL_ERR_MISMATCH && SC(r)->inner != NULL && !r->deferred)
        shm_inner_mismatch(r, SC(r)->inner); /* it failed in its first pass */
    if (rc < 0)
        return rc;
    SC(r)->phase = SHM_PH_NET;
    return ARCOLL_OK;
}

/* Master, phase 2: progress the masters' collective, publish what is in. */
static int shm_master_net(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    const hier_t *h = t->hier;
    const uint8_t *pub = SC(r)->st->pub;
    coll_req_t *in = SC(r)->inner;
    int rc = coll_progress(in);

    if (rc == ARCOLL_ERR_MISMATCH && !r->deferred)
        shm_inner_mismatch(r, in);
    if (rc < 0)
        return rc; /* published by shm_fail */
    if (r->alg->variant == SHM_V_PAP) {
        /* A peer's block counts as in once its receive is done without a
         * size error (a mismatch marks it done too, and sets deferred). */
        for (uint32_t e = 0; e < h->nnodes; e++)
            if (e != h->node && !pub[e] && SC(r)->inner->peers[e].rx_done)
                shm_publish(r, e, in->deferred ? in->deferred : ARCOLL_OK);
    }
    if (rc == ARCOLL_OK) {
        shm_publish_rest(r, ARCOLL_OK);
        SC(r)->phase = SHM_PH_DONE;
    }
    return ARCOLL_OK;
}

static int shm_slow_path(coll_req_t *r, uint64_t now)
{
    const hier_t *h = r->team->hier;

    r->next_check_ns = now + 100000000ULL;
    int s = hier_local_gone(h);

    if (s >= 0) {
        log_err("%s (epoch %llu): local rank %d of this node (pid %ld) has exited",
                shm_coll_name(r), (unsigned long long)r->epoch, s, h->local_pid[s]);
        return ARCOLL_ERR_PEER;
    }
    if (now < r->deadline_ns)
        return ARCOLL_INPROGRESS;
    log_err("%s (epoch %llu, %s, %zu bytes) timed out after %ld ms (ARCOLL_TIMEOUT_MS): %s; "
            "%u of %u blocks not copied out",
            shm_coll_name(r), (unsigned long long)r->epoch, r->alg->name, r->bytes,
            r->team->ctx->cfg.timeout_ms,
            SC(r)->phase == SHM_PH_LOCAL ? "waiting for this node's ranks to arrive"
            : SC(r)->phase == SHM_PH_NET ? "waiting for the other nodes' masters"
                                         : "waiting for this node's master",
            SC(r)->left, r->team->size);
    return ARCOLL_ERR_TIMEOUT;
}

/* The call fails: tell this node's ranks (master), end the masters' call if
 * it is still under way (it releases its registrations, and that team is
 * failed too), then fail ours. */
static int shm_fail(coll_req_t *r, int rc)
{
    const hier_t *h = r->team->hier;
    int trc = rc == ARCOLL_ERR_MISMATCH ? coll_refuse_all(r) : ARCOLL_OK;

    if (trc != ARCOLL_OK)
        rc = trc; /* a flat peer may now wait for its timeout; the channel's error wins */
    if (hier_is_master(h) && h->nnodes > 1)
        shm_publish_rest(r, rc);
    if (SC(r)->inner != NULL && SC(r)->inner->active)
        coll_fail(SC(r)->inner, rc);
    return coll_fail(r, rc);
}

static int shm_progress(coll_req_t *r)
{
    int rc = ARCOLL_OK;

    if (SC(r)->phase == SHM_PH_LOCAL)
        rc = shm_master_local(r);
    if (rc == ARCOLL_OK && SC(r)->phase == SHM_PH_NET)
        rc = shm_master_net(r);
    if (rc < 0)
        return shm_fail(r, rc);
    shm_copy_out(r);
    if (SC(r)->left == 0 && SC(r)->phase == SHM_PH_DONE)
        return r->deferred ? shm_fail(r, r->deferred) : coll_finish(r);
    if ((++r->polls & 63) == 0) {
        uint64_t now = eng_time_ns(r->team->ctx);
        /* A peer whose size is above ARCOLL_SHM_MAX, or 0, runs the flat
         * fallback (or a 0-byte pap call): it writes our team region, never
         * the node segment. */
        rc = coll_flat_check(r);
        if (rc == ARCOLL_OK && now >= r->next_check_ns)
            rc = shm_slow_path(r, now);
        if (rc != ARCOLL_OK && rc != ARCOLL_INPROGRESS)
            return shm_fail(r, rc);
    }
    return ARCOLL_INPROGRESS;
}

/* Why the node-master algorithms cannot run a call on a team, or NULL (the
 * same on every rank: team shape, settings, size). Also the non-leader ones'
 * first test (src/alg/node/alg_nl.c). */
const char *shm_unfit(const struct arcoll_team *t, const coll_args_t *a)
{
    const hier_t *h = t->hier;

    if (h == NULL)
        return "no node holds two of its ranks";
    if (a->bytes > t->hseg->max_bytes || a->bytes > t->ctx->cfg.shm_max)
        return "messages above ARCOLL_SHM_MAX for this job shape";
    return NULL;
}

/* The family's members differ in their phase 2 (variant) and their fallback. */
#define SHM_ALG(nm, fb, var)                                                         \
    {                                                                                \
        .name = nm, .unfit = shm_unfit, .fallback = fb, .serial = 1, .variant = var, \
        .start = shm_start, .progress = shm_progress                                 \
    }

const coll_alg_t coll_alg_shm_direct = SHM_ALG("shm_direct", CORE_ALG_DIRECT, SHM_V_DIRECT);
const coll_alg_t coll_alg_pap_shm = SHM_ALG("pap_shm", CORE_ALG_PAP, SHM_V_PAP);
/* Kumar et al.'s leader-based alltoall: the node-master machinery with a Direct
 * exchange between leaders (shm_direct under its Kumar et al. name). */
const coll_alg_t coll_alg_leader = SHM_ALG("leader", CORE_ALG_DIRECT, SHM_V_DIRECT);
/* Li et al.'s topology-aware MN-CO: the node-master machinery with MN-CO among
 * the masters, each block a whole node pair's [local s][local l] rectangle; pap
 * where it cannot run (one rank per node: flat mn_co is that form there). */
const coll_alg_t coll_alg_mn_cox = SHM_ALG("mn_cox", CORE_ALG_PAP, SHM_V_MNCO);
