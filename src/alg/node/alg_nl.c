/*
 * Non-leader alltoall (Kumar et al. §5): every rank drives the network, each with
 * only (nodes - 1) remote peers, on the node segments of engine/hier_seg.h;
 * docs/protocol.md "Non-leader alltoall".
 *
 * sa / sa_direct (send-side aggregation):
 *   step 1  every rank copies, for each local index x, its blocks for local
 *           rank x of every node into x's slice of the send bank, [node][src
 *           local], then sets its arrive word;
 *   step 2  once all local ranks arrived, rank x runs an alltoall of
 *           lmax-times larger messages on its cross team (local index x of
 *           every node): PAP_Direct (sa) or Direct (sa_direct). When the team
 *           is node-major that alltoall lands straight in the user's receive
 *           buffer; otherwise in x's receive slice, then one copy out.
 * rd (receive-side distribution):
 *   step 1  at once, rank x runs a PAP_Direct alltoall on its cross team from
 *           its send buffer (node-major; else packed first) into x's slice of
 *           the bank: [source node][destination local];
 *   step 2  x publishes a done word; every local rank copies its blocks out
 *           of each x's slice as that x's word shows up.
 * Equal nodes only (coll_alg_pick falls back otherwise).
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "util/log.h"

enum { NL_PH_LOCAL = 0, NL_PH_NET, NL_PH_OUT, NL_PH_DONE };
enum { NL_V_SA = 0, NL_V_SA_DIRECT, NL_V_RD };

/* Per-team state of the family (eng_state_get); got and pub are reset at
 * each start (calls on the node segment are serial). */
typedef struct nl_team {
    char *pack; /* rd on a team that is not node-major: private staging */
    size_t pack_len;
    uint8_t pub;   /* rd: our done word is published in this call */
    uint8_t got[]; /* rd, [lsize]: local rank x's slice copied out in this call */
} nl_team_t;

/* Per-call state of the family (inside the request). */
typedef struct nl_call {
    uint32_t phase;    /* NL_PH_* */
    uint32_t left;     /* rd: local ranks whose slice is still to copy out */
    uint64_t seq;      /* the node segment's call number (hier_seg.h) */
    coll_req_t *inner; /* step 2 on the cross team */
    nl_team_t *st;     /* the team's, kept for the polling loops */
} nl_call_t;

#define NC(r) COLL_PRIV(r, nl_call_t)

/* Step 2 runs a flat algorithm on the cross team. */
extern const coll_alg_t coll_alg_pap, coll_alg_direct;
/* The node-master family's fitness test (src/alg/node/alg_shm.c). */
const char *shm_unfit(const struct arcoll_team *t, const coll_args_t *a);

#define NL_CHECK_NS 100000000ULL

static void *nl_team_make(struct arcoll_team *t)
{
    nl_team_t *st = calloc(1, sizeof(*st) + t->hier->lsize);

    if (st == NULL)
        log_err("sa, sa_direct, rd: out of memory for their per-team state");
    return st;
}

static void nl_team_free(void *p)
{
    nl_team_t *st = p;

    free(st->pack);
    free(st);
}

static const eng_state_kind_t nl_team_kind = {.make = nl_team_make, .free = nl_team_free};

/* Rank x's slice (nnodes * lmax blocks) of a bank or of the receive area. */
static char *nl_slice(const coll_req_t *r, uint64_t area_off, uint32_t x)
{
    const hier_t *h = r->team->hier;

    return hier_seg_at(r->team->hseg, area_off + (uint64_t)x * h->nnodes * h->lmax * r->bytes);
}

static uint64_t nl_bank_off(const coll_req_t *r)
{
    const hier_seg_t *g = r->team->hseg;

    return g->lay.off_send + (uint64_t)(NC(r)->seq & 1) * g->lay.area;
}

/* rd: local rank x's done word for this epoch's bank (its slice is complete,
 * or its step 1 failed with the status in the word). */
static _Atomic uint64_t *nl_done_word(const coll_req_t *r, uint32_t x)
{
    return hier_seg_arrive_line(r->team->hseg, x) + 3 + (NC(r)->seq & 1);
}

static const char *nl_phase_name(const coll_req_t *r)
{
    switch (NC(r)->phase) {
    case NL_PH_LOCAL: return "waiting for this node's ranks to arrive";
    case NL_PH_NET: return "in the inter-node step";
    default: return "waiting for this node's ranks to finish their inter-node step";
    }
}

/* sa step 1: our blocks into every local rank's slice, then our arrive word. */
static void nl_sa_arrive(coll_req_t *r)
{
    const hier_t *h = r->team->hier;
    uint64_t bank = nl_bank_off(r);
    size_t m = r->bytes;

    eng_cost(r->team->ctx, CHAN_COST_COPY, (size_t)h->lmax * h->nnodes * m);
    for (uint32_t x = 0; x < h->lmax; x++) {
        char *slice = nl_slice(r, bank, x);
        for (uint32_t d = 0; d < h->nnodes; d++)
            memcpy(slice + ((size_t)d * h->lmax + h->lrank) * m,
                   r->sbuf + (size_t)h->node_rank[d * h->lmax + x] * m, m);
    }
    hier_seg_arrive_set(r->team->hseg, h->lrank, NC(r)->seq, r->epoch, (uint64_t)m);
}

/* Start our cross team's alltoall of lmax-block messages (bytes - 1 if a
 * local rank disagrees on the size, so that every node hears of it). */
static int nl_inner_start(coll_req_t *r, const void *sbuf, void *rbuf, int mismatch)
{
    const hier_t *h = r->team->hier;
    size_t bytes = r->bytes * h->lmax - (mismatch ? 1 : 0);
    const coll_alg_t *alg = r->alg->variant == NL_V_SA_DIRECT ? &coll_alg_direct : &coll_alg_pap;
    coll_args_t a = {.type = COLL_ALLTOALL,
                     .sbuf = sbuf,
                     .rbuf = rbuf,
                     .bytes = bytes,
                     .call = r->epoch,
                     .internal = r->args.internal};
    coll_req_t *in;
    int rc;

    rc = eng_start(h->xteam, &a, alg, COLL_F_NOPROF, NULL, &in);
    if (rc < 0)
        return rc;
    NC(r)->inner = in;
    NC(r)->phase = NL_PH_NET;
    return ARCOLL_OK;
}

/* Check the local ranks' sizes; 1 if all arrived. */
static int nl_local_sizes(coll_req_t *r, int *mismatch)
{
    const hier_t *h = r->team->hier;
    const hier_seg_t *g = r->team->hseg;

    *mismatch = 0;
    for (uint32_t s = 0; s < h->lsize; s++) {
        uint64_t size;
        if (!hier_seg_arrived(g, s, NC(r)->seq, r->epoch, &size))
            return 0;
        if (size != r->bytes) {
            if (!*mismatch && !r->deferred)
                coll_log_sizes(r, "alltoall", h->node_rank[h->node * h->lmax + s], size, r->bytes,
                               "");
            *mismatch = 1;
        }
    }
    return 1;
}

/* sa, all local ranks in: step 2 on the cross team. */
static int nl_sa_local(coll_req_t *r)
{
    const hier_t *h = r->team->hier;
    int mismatch, rc;

    if (!nl_local_sizes(r, &mismatch))
        return ARCOLL_OK;
    rc = nl_inner_start(r, nl_slice(r, nl_bank_off(r), h->lrank),
                        h->node_major ? (void *)r->rbuf
                                      : nl_slice(r, r->team->hseg->lay.off_recv, h->lrank),
                        mismatch);
    if (rc == ARCOLL_OK && mismatch)
        r->deferred = ARCOLL_ERR_MISMATCH;
    return rc;
}

/* sa on a team that is not node-major: from our receive slice to the user. */
static void nl_sa_copy_out(coll_req_t *r)
{
    const hier_t *h = r->team->hier;
    const char *slice = nl_slice(r, r->team->hseg->lay.off_recv, h->lrank);
    size_t m = r->bytes;

    eng_cost(r->team->ctx, CHAN_COST_COPY, (size_t)h->nnodes * h->lmax * m);
    for (uint32_t e = 0; e < h->nnodes; e++)
        for (uint32_t s = 0; s < h->lmax; s++)
            memcpy(r->rbuf + (size_t)h->node_rank[e * h->lmax + s] * m,
                   slice + ((size_t)e * h->lmax + s) * m, m);
}

/* rd step 1: straight from the user's buffer when it is node-major (node d's
 * ranks are one run), else packed into our receive slice first. */
static int nl_rd_begin(coll_req_t *r)
{
    const hier_t *h = r->team->hier;
    const char *src = r->sbuf;
    size_t m = r->bytes;

    hier_seg_arrive_set(r->team->hseg, h->lrank, NC(r)->seq, r->epoch, (uint64_t)m);
    if (!h->node_major) {
        /* Private, not the receive area: a local rank may still be copying a
         * node-master call's data out of that (docs/protocol.md). */
        size_t need = (size_t)h->nnodes * h->lmax * m;
        nl_team_t *st = NC(r)->st;
        char *pack = st->pack;
        if (st->pack_len < need) {
            pack = realloc(st->pack, need);
            if (pack == NULL) {
                log_err("alltoall (rd): out of memory for a %zu-byte staging buffer", need);
                return ARCOLL_ERR_NOMEM;
            }
            st->pack = pack;
            st->pack_len = need;
        }
        eng_cost(r->team->ctx, CHAN_COST_COPY, need);
        for (uint32_t d = 0; d < h->nnodes; d++)
            for (uint32_t l = 0; l < h->lmax; l++)
                memcpy(pack + ((size_t)d * h->lmax + l) * m,
                       r->sbuf + (size_t)h->node_rank[d * h->lmax + l] * m, m);
        src = pack;
    }
    return nl_inner_start(r, src, nl_slice(r, nl_bank_off(r), h->lrank), 0);
}

/* rd step 2: copy our blocks out of every local rank's slice that is done. */
static void nl_rd_copy_out(coll_req_t *r)
{
    const hier_t *h = r->team->hier;
    const hier_seg_t *g = r->team->hseg;
    uint8_t *got = NC(r)->st->got;
    uint64_t bank = nl_bank_off(r);
    size_t m = r->bytes;

    for (uint32_t x = 0; x < h->lsize; x++) {
        uint64_t size, w;
        const char *slice;
        if (got[x] || !hier_seg_arrived(g, x, NC(r)->seq, r->epoch, &size))
            continue;
        w = atomic_load_explicit(nl_done_word(r, x), memory_order_acquire);
        if (!wire_done_epoch_match(w, NC(r)->seq))
            continue;
        got[x] = 1;
        NC(r)->left--;
        if (wire_done_status(w) != 0) {
            if (!r->deferred) {
                log_err("alltoall (epoch %llu, rd): team rank %u of this node reports that its "
                        "inter-node step failed: %s",
                        (unsigned long long)r->epoch, h->node_rank[h->node * h->lmax + x],
                        arcoll_strerror(-(int)wire_done_status(w)));
                r->deferred = -(int)wire_done_status(w);
            }
            continue;
        }
        if (size != r->bytes) {
            if (!r->deferred)
                coll_log_sizes(r, "alltoall", h->node_rank[h->node * h->lmax + x], size, r->bytes,
                               "");
            r->deferred = ARCOLL_ERR_MISMATCH;
            continue;
        }
        slice = nl_slice(r, bank, x);
        eng_cost(r->team->ctx, CHAN_COST_COPY, (size_t)h->nnodes * m);
        for (uint32_t e = 0; e < h->nnodes; e++)
            memcpy(r->rbuf + (size_t)h->node_rank[e * h->lmax + x] * m,
                   slice + ((size_t)e * h->lmax + h->lrank) * m, m);
    }
}

static void nl_rd_publish(coll_req_t *r, int rc)
{
    nl_team_t *st = NC(r)->st;

    if (st->pub)
        return;
    st->pub = 1;
    atomic_store_explicit(nl_done_word(r, r->team->hier->lrank),
                          wire_done_word(NC(r)->seq, (unsigned)-rc), memory_order_release);
}

/* The call fails: tell this node's ranks (rd), end the cross team's call if it
 * is under way (that team is failed too), then fail ours. */
static int nl_fail(coll_req_t *r, int rc)
{
    /* A flat peer (its size above ARCOLL_SHM_MAX) waits for a word from every
     * rank: refuse it the call, as the node-master family does (§10). */
    int trc = rc == ARCOLL_ERR_MISMATCH ? coll_refuse_all(r) : ARCOLL_OK;

    if (trc != ARCOLL_OK)
        rc = trc;
    if (r->alg->variant == NL_V_RD)
        nl_rd_publish(r, rc);
    if (NC(r)->inner != NULL && NC(r)->inner->active)
        coll_fail(NC(r)->inner, rc);
    return coll_fail(r, rc);
}

static int nl_slow_path(coll_req_t *r, uint64_t now)
{
    const hier_t *h = r->team->hier;

    r->next_check_ns = now + NL_CHECK_NS;
    int s = hier_local_gone(h);

    if (s >= 0) {
        log_err("alltoall (epoch %llu, %s): local rank %d of this node (pid %ld) has exited",
                (unsigned long long)r->epoch, r->alg->name, s, h->local_pid[s]);
        return ARCOLL_ERR_PEER;
    }
    /* The inter-node step times out by itself, naming the peers it waits for. */
    if (now < r->deadline_ns || NC(r)->phase == NL_PH_NET)
        return ARCOLL_INPROGRESS;
    log_err("alltoall (epoch %llu, %s, %zu bytes) timed out after %ld ms (ARCOLL_TIMEOUT_MS): %s",
            (unsigned long long)r->epoch, r->alg->name, r->bytes, r->team->ctx->cfg.timeout_ms,
            nl_phase_name(r));
    return ARCOLL_ERR_TIMEOUT;
}

/* Returns ARCOLL_OK, or the error with the call already failed. */
static int nl_start(coll_req_t *r)
{
    const hier_t *h = r->team->hier;
    nl_team_t *st = eng_state_get(r->team, &nl_team_kind);
    int rc = ARCOLL_OK;

    if (st == NULL)
        return ARCOLL_ERR_NOMEM; /* before the segment's call number: nothing to tell */
    NC(r)->st = st;
    NC(r)->seq = ++r->team->hseg->seq;
    NC(r)->inner = NULL;
    NC(r)->phase = NL_PH_LOCAL;
    NC(r)->left = h->lsize;
    memset(st->got, 0, h->lsize);
    st->pub = 0;
    if (r->alg->variant == NL_V_RD)
        rc = nl_rd_begin(r);
    else
        nl_sa_arrive(r);
    return rc == ARCOLL_OK ? ARCOLL_OK : nl_fail(r, rc);
}

static int nl_progress(coll_req_t *r)
{
    const hier_t *h = r->team->hier;
    int rc = ARCOLL_OK;

    if (NC(r)->phase == NL_PH_LOCAL)
        rc = nl_sa_local(r);
    if (rc == ARCOLL_OK && NC(r)->phase == NL_PH_NET) {
        rc = coll_progress(NC(r)->inner);
        if (rc == ARCOLL_OK) {
            NC(r)->phase = NL_PH_OUT;
            if (r->alg->variant == NL_V_RD)
                nl_rd_publish(r, ARCOLL_OK);
            else if (!h->node_major && !r->deferred)
                nl_sa_copy_out(r);
        } else if (rc == ARCOLL_INPROGRESS) {
            rc = ARCOLL_OK;
        }
    }
    if (rc < 0)
        return nl_fail(r, rc);
    if (r->alg->variant == NL_V_RD)
        nl_rd_copy_out(r);
    else if (NC(r)->phase == NL_PH_OUT)
        NC(r)->left = 0;
    if (NC(r)->phase == NL_PH_OUT && NC(r)->left == 0)
        return r->deferred ? nl_fail(r, r->deferred) : coll_finish(r);
    if ((++r->polls & 63) == 0) {
        uint64_t now = eng_time_ns(r->team->ctx);
        /* A peer whose size is above ARCOLL_SHM_MAX, or 0, runs the flat
         * fallback (or a 0-byte pap call): it writes our team region. */
        rc = coll_flat_check(r);
        if (rc == ARCOLL_OK && now >= r->next_check_ns)
            rc = nl_slow_path(r, now);
        if (rc != ARCOLL_OK && rc != ARCOLL_INPROGRESS)
            return nl_fail(r, rc);
    }
    return ARCOLL_INPROGRESS;
}

static const char *nl_unfit(const struct arcoll_team *t, const coll_args_t *a)
{
    const char *why = shm_unfit(t, a);

    if (why != NULL)
        return why;
    if (t->hier->nnodes < 2)
        return "one node";
    if (!t->hier->equal)
        return "unequal ranks per node";
    return NULL;
}

const coll_alg_t coll_alg_sa = {.name = "sa",
                                .unfit = nl_unfit,
                                .fallback = CORE_ALG_PAP,
                                .serial = 1,
                                .variant = NL_V_SA,
                                .start = nl_start,
                                .progress = nl_progress};
const coll_alg_t coll_alg_sa_direct = {.name = "sa_direct",
                                       .unfit = nl_unfit,
                                       .fallback = CORE_ALG_DIRECT,
                                       .serial = 1,
                                       .variant = NL_V_SA_DIRECT,
                                       .start = nl_start,
                                       .progress = nl_progress};
const coll_alg_t coll_alg_rd = {.name = "rd",
                                .unfit = nl_unfit,
                                .fallback = CORE_ALG_PAP,
                                .serial = 1,
                                .variant = NL_V_RD,
                                .start = nl_start,
                                .progress = nl_progress};
