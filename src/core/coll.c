/* The collective engine: validation, the per-call state machine that the
 * blocking and nonblocking calls share, completion and failure rules
 * (docs/protocol.md, "Completion"). Protocols and algorithms plug in
 * through coll_proto_t and coll_alg_t. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "core/log.h"
#include "core/profile.h"
#include "core/tune.h"

#define COLL_CHECK_NS 100000000ULL /* peer liveness checks: every 100 ms of waiting */

uint64_t core_time_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static const char *coll_name(coll_type_t type)
{
    return type == COLL_ALLTOALL ? "alltoall" : "allgather";
}

int coll_advertise(coll_req_t *r, const chan_rkey_t *rkey, uint64_t boff)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;
    uint64_t off = wire_ctrl_off(&t->layout, t->rank, r->bank);
    wire_ctrl_t adv;
    int rc;

    memset(&adv, 0, sizeof(adv));
    adv.size = r->bytes;
    if (rkey != NULL) {
        adv.rkey = *rkey;
        adv.boff = boff;
    }
    for (uint32_t i = 1; i < t->size; i++) {
        uint32_t peer = (t->rank + i) % t->size;
        int cr = t->ranks[peer];
        rc = c->ops->put(c, cr, &adv.size, sizeof(adv) - sizeof(adv.flag), NULL,
                         &t->peer_region[peer], off + sizeof(adv.flag));
        if (rc != ARCOLL_OK)
            return rc;
        rc = c->ops->put_u64(c, cr, r->epoch, &t->peer_region[peer], off);
        if (rc != ARCOLL_OK)
            return rc;
    }
    return ARCOLL_OK;
}

int coll_ctrl_read(coll_req_t *r, uint32_t peer, wire_ctrl_t *out)
{
    struct arcoll_team *t = r->team;
    uint64_t off = wire_ctrl_off(&t->layout, peer, r->bank);

    if (wire_load(&t->region, off) != r->epoch)
        return 0;
    memcpy(out, (char *)t->region.addr + off, sizeof(*out));
    return 1;
}

int coll_mismatch(coll_req_t *r, uint32_t peer, uint64_t their_size)
{
    if (their_size == UINT64_MAX)
        log_err("%s (epoch %llu): team rank %u rejected our message: it expects a "
                "different size than our %zu bytes per rank",
                coll_name(r->type), (unsigned long long)r->epoch, peer, r->bytes);
    else
        log_err("%s (epoch %llu): team rank %u uses %llu bytes per rank, this rank %zu: "
                "message sizes must agree",
                coll_name(r->type), (unsigned long long)r->epoch, peer,
                (unsigned long long)their_size, r->bytes);
    return ARCOLL_ERR_MISMATCH;
}

static int coll_tx_step(coll_req_t *r, uint32_t peer)
{
    coll_peer_t *p = &r->team->peers[peer];
    int rc = r->proto->tx(r, peer);

    if (rc == ARCOLL_ERR_MISMATCH) {
        /* Finish the call with the others so that they see it too, then fail. */
        r->deferred = rc;
        rc = 1;
    }
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

/* Continue peers whose message needs more fragments (copy path). */
int coll_tx_continue(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    int rc;

    if (r->nfrags <= 1)
        return ARCOLL_OK;
    for (uint32_t peer = 0; peer < t->size; peer++) {
        if (t->peers[peer].tx_state != COLL_TX_ACTIVE)
            continue;
        rc = coll_tx_step(r, peer);
        if (rc != ARCOLL_OK)
            return rc;
    }
    return ARCOLL_OK;
}

static void coll_list_peers(coll_req_t *r, int want_rx, char *buf, size_t len)
{
    struct arcoll_team *t = r->team;
    size_t used = 0;
    int n = 0;

    buf[0] = '\0';
    for (uint32_t peer = 0; peer < t->size && used + 16 < len; peer++) {
        coll_peer_t *p = &t->peers[peer];
        int waiting = want_rx ? !p->rx_done : p->tx_state != COLL_TX_DONE;
        if (!waiting)
            continue;
        if (n++ == 8) {
            used += (size_t)snprintf(buf + used, len - used, ",...");
            break;
        }
        used += (size_t)snprintf(buf + used, len - used, "%s%u", used ? "," : "", peer);
    }
    if (n == 0)
        snprintf(buf, len, "none");
}

static int coll_slow_path(coll_req_t *r, uint64_t now)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;
    char rx[96], tx[96];

    r->next_check_ns = now + COLL_CHECK_NS;
    for (uint32_t peer = 0; peer < t->size; peer++) {
        coll_peer_t *p = &t->peers[peer];
        if (peer == t->rank || (p->rx_done && p->tx_state == COLL_TX_DONE))
            continue;
        int rc = c->ops->peer_check(c, t->ranks[peer]);
        if (rc != ARCOLL_OK)
            return rc; /* logged by the channel */
    }
    if (now < r->deadline_ns)
        return ARCOLL_INPROGRESS;
    coll_list_peers(r, 1, rx, sizeof(rx));
    coll_list_peers(r, 0, tx, sizeof(tx));
    log_err("%s (epoch %llu, %s/%s, %zu bytes) timed out after %ld ms (ARCOLL_TIMEOUT_MS): "
            "no data yet from team ranks %s; could not finish sending to team ranks %s",
            coll_name(r->type), (unsigned long long)r->epoch, r->alg->name, r->proto->name,
            r->bytes, t->ctx->cfg.timeout_ms, rx, tx);
    /* What the transport knows about each peer we wait for, to tell a lost
     * peer from a stuck link (logged, not returned). */
    for (uint32_t peer = 0; c->ops->peer_describe != NULL && peer < t->size; peer++) {
        coll_peer_t *p = &t->peers[peer];
        char desc[160];
        if (peer == t->rank || (p->rx_done && p->tx_state == COLL_TX_DONE))
            continue;
        c->ops->peer_describe(c, t->ranks[peer], desc, sizeof(desc));
        log_warn("  team rank %u: rx %s (fragment %u), tx %s (fragment %u); %s", peer,
                 p->rx_done ? "done" : "waiting", p->rx_frag,
                 p->tx_state == COLL_TX_DONE ? "done"
                 : p->tx_state               ? "active"
                                             : "idle",
                 p->tx_frag, desc);
    }
    return ARCOLL_ERR_TIMEOUT;
}

/* The call is over with r->status: the profiler notes when (once per call,
 * never in the polling loop). */
static inline void coll_done(coll_req_t *r)
{
    if (__builtin_expect(r->prof_slot != 0, 0))
        prof_call_end(r->team->ctx->prof, r);
}

int coll_fail(coll_req_t *r, int rc)
{
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
    uint64_t now;

    if (!r->active)
        return r->status;
    if (r->hier)
        return r->hier >= COLL_HIER_SA ? nl_progress(r) : shm_progress(r);
    outstanding = c->ops->progress(c);
    if (outstanding < 0)
        return coll_fail(r, outstanding);
    for (uint32_t peer = 0; r->rx_left && peer < t->size; peer++) {
        coll_peer_t *p = &t->peers[peer];
        if (p->rx_done)
            continue;
        rc = r->proto->rx(r, peer);
        if (rc == ARCOLL_ERR_MISMATCH) {
            r->deferred = rc; /* nothing was copied; keep serving the others */
            rc = 1;
        }
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
    /* The clock is for timeouts and liveness only: read it every 64th pass. */
    if ((++r->polls & 63) != 0)
        return ARCOLL_INPROGRESS;
    now = core_time_ns();
    if (now >= r->next_check_ns) {
        rc = coll_slow_path(r, now);
        if (rc != ARCOLL_INPROGRESS)
            return coll_fail(r, rc);
    }
    return ARCOLL_INPROGRESS;
}

static int coll_overlap(const void *a, size_t alen, const void *b, size_t blen)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

    return alen && blen && x < y + blen && y < x + alen;
}

/* By CORE_ALG_* (auto is resolved before): the algorithm and, for the
 * hierarchical ones, which state machine drives the call. */
static const coll_alg_t *const coll_algs[CORE_ALG_COUNT] = {
    [CORE_ALG_DIRECT] = &coll_alg_direct,
    [CORE_ALG_PAP] = &coll_alg_pap,
    [CORE_ALG_SHM_DIRECT] = &coll_alg_shm_direct,
    [CORE_ALG_PAP_SHM] = &coll_alg_pap_shm,
    [CORE_ALG_SA] = &coll_alg_sa,
    [CORE_ALG_SA_DIRECT] = &coll_alg_sa_direct,
    [CORE_ALG_RD] = &coll_alg_rd,
    [CORE_ALG_LEADER] = &coll_alg_leader,
};
static const int coll_hier_of[CORE_ALG_COUNT] = {
    [CORE_ALG_SHM_DIRECT] = COLL_HIER_DIRECT,
    [CORE_ALG_PAP_SHM] = COLL_HIER_PAP,
    [CORE_ALG_SA] = COLL_HIER_SA,
    [CORE_ALG_SA_DIRECT] = COLL_HIER_SA_DIRECT,
    [CORE_ALG_RD] = COLL_HIER_RD,
    [CORE_ALG_LEADER] = COLL_HIER_DIRECT,
};

/* Why a hierarchical algorithm cannot run this call on this team, or NULL.
 * Every rank decides alike (same team shape, settings and size). */
static const char *coll_alg_unfit(const struct arcoll_team *t, size_t bytes, int alg)
{
    const hier_t *h = t->hier;
    int nonleader = alg == CORE_ALG_SA || alg == CORE_ALG_SA_DIRECT || alg == CORE_ALG_RD;

    if (h == NULL)
        return "no node holds two of its ranks";
    if (bytes > h->max_bytes || bytes > t->ctx->cfg.shm_max)
        return "messages above ARCOLL_SHM_MAX for this job shape";
    if (nonleader && h->nnodes < 2)
        return "one node";
    if (nonleader && !h->equal)
        return "unequal ranks per node";
    return NULL;
}

/* The algorithm that runs: the configured one, or its flat counterpart with
 * a one-line notice per team when it cannot run (coll_alg_unfit). */
static int coll_alg_pick(struct arcoll_team *t, coll_type_t type, size_t bytes, int alg)
{
    const char *why;
    int flat;

    if (alg == CORE_ALG_AUTO)
        alg = core_tune_pick_team(t, type, bytes); /* by size and team shape */
    if (alg == CORE_ALG_DIRECT || alg == CORE_ALG_PAP)
        return alg;
    why = coll_alg_unfit(t, bytes, alg);
    if (why == NULL)
        return alg;
    flat = alg == CORE_ALG_PAP_SHM || alg == CORE_ALG_SA || alg == CORE_ALG_RD ? CORE_ALG_PAP
                                                                               : CORE_ALG_DIRECT;
    if (!t->hier_noticed++ && t->rank == 0)
        log_info("%s: %s runs as %s on this team (%s)", coll_name(type), core_alg_name(alg),
                 core_alg_name(flat), why);
    return flat;
}

int coll_alg_resolve(struct arcoll_team *t, coll_type_t type, size_t bytes, int alg, int *picked,
                     const char **why)
{
    int noticed = t->hier_noticed, run;

    if (alg == CORE_ALG_AUTO)
        alg = core_tune_pick_team(t, type, bytes);
    t->hier_noticed = 1; /* nothing runs: no fallback notice */
    run = coll_alg_pick(t, type, bytes, alg);
    t->hier_noticed = noticed;
    *picked = alg;
    *why = run != alg ? coll_alg_unfit(t, bytes, alg) : NULL;
    return run;
}

int coll_start(struct arcoll_team *t, coll_type_t type, const void *sbuf, void *rbuf, size_t bytes,
               const void *site, coll_req_t **out)
{
    return coll_start_ex(t, type, sbuf, rbuf, bytes, site, 0, -1, out);
}

int coll_start_ex(struct arcoll_team *t, coll_type_t type, const void *sbuf, void *rbuf,
                  size_t bytes, const void *site, unsigned flags, int alg, coll_req_t **out)
{
    struct arcoll_context *ctx = t->ctx;
    coll_req_t *r = &t->req;
    size_t slen, rlen;
    int path, rc;

    *out = NULL;
    if (t->failed) {
        log_err("%s: this team failed earlier (%s); its epochs may disagree across "
                "ranks, so it accepts no further collectives",
                coll_name(type), arcoll_strerror(t->failed));
        return ARCOLL_ERR_STATE;
    }
    if (r->active) {
        log_err("%s: the team already has a collective in progress (one at a time)",
                coll_name(type));
        return ARCOLL_ERR_STATE;
    }
    if (bytes == 0)
        return ARCOLL_OK; /* a valid no-op on every rank: no epoch is consumed */
    if (sbuf == NULL || rbuf == NULL) {
        log_err("%s: %s buffer is NULL with %zu bytes per rank", coll_name(type),
                sbuf == NULL ? "send" : "receive", bytes);
        return ARCOLL_ERR_INVALID;
    }
    if (bytes > SIZE_MAX / t->size || bytes > INT64_MAX / t->size) {
        log_err("%s: %zu bytes per rank times %u ranks overflows", coll_name(type), bytes, t->size);
        return ARCOLL_ERR_INVALID;
    }
    rlen = bytes * t->size;
    slen = type == COLL_ALLTOALL ? rlen : bytes;
    if (coll_overlap(sbuf, slen, rbuf, rlen)) {
        log_err("%s: send buffer [%p,+%zu) and receive buffer [%p,+%zu) overlap", coll_name(type),
                sbuf, slen, rbuf, rlen);
        return ARCOLL_ERR_INVALID;
    }

    memset(r, 0, sizeof(*r));
    memset(t->peers, 0, sizeof(*t->peers) * t->size);
    r->team = t;
    r->type = type;
    r->sbuf = sbuf;
    r->rbuf = rbuf;
    r->bytes = bytes;
    if (alg < 0)
        alg = type == COLL_ALLTOALL ? ctx->cfg.alltoall_alg : ctx->cfg.allgather_alg;
    alg = coll_alg_pick(t, type, bytes, alg);
    r->hier = coll_hier_of[alg];
    r->alg = coll_algs[alg];
    r->is_direct = alg == CORE_ALG_DIRECT;
    path = ctx->cfg.path;
    if (path == CORE_PATH_AUTO) {
        size_t thr = ctx->cfg.zcopy_threshold == CORE_CONFIG_AUTO_SIZE ? ctx->chan->zcopy_threshold
                                                                       : ctx->cfg.zcopy_threshold;
        path = bytes >= thr ? CORE_PATH_ZCOPY : CORE_PATH_COPY;
    }
    if (path == CORE_PATH_ZCOPY && !ctx->chan->zcopy)
        path = CORE_PATH_COPY; /* the channel said so once, at init; all ranks agree */
    r->proto = path == CORE_PATH_ZCOPY ? &coll_proto_zcopy : &coll_proto_bounce;
    if ((bytes + t->layout.bounce - 1) / t->layout.bounce >= WIRE_FRAG_REJECT) {
        log_err("%s: %zu bytes per rank needs too many %llu-byte fragments on the copy path",
                coll_name(type), bytes, (unsigned long long)t->layout.bounce);
        return ARCOLL_ERR_INVALID;
    }
    r->nfrags = (uint32_t)((bytes + t->layout.bounce - 1) / t->layout.bounce);
    r->epoch = ++t->seq;
    r->bank = wire_bank(r->epoch);
    r->tx_left = r->rx_left = t->size - 1;
    r->step = 1;
    r->start_ns = core_time_ns();
    r->deadline_ns = r->start_ns + (uint64_t)ctx->cfg.timeout_ms * 1000000ULL;
    r->next_check_ns = r->start_ns + COLL_CHECK_NS;
    r->active = 1;
    r->status = ARCOLL_INPROGRESS;
    /* Arrival is start_ns: the call is accepted and nothing is sent yet. */
    if (__builtin_expect(ctx->prof != NULL, 0) && !(flags & COLL_F_NOPROF))
        prof_call_begin(ctx->prof, r, site);

    if (r->hier >= COLL_HIER_SA) {
        r->proto = &coll_proto_node;
        rc = nl_start(r);
        if (rc != ARCOLL_OK)
            return rc; /* failed by nl_start */
        *out = r;
        return coll_progress(r);
    }
    if (r->hier) {
        r->proto = &coll_proto_node;
        rc = shm_start(r);
        if (rc != ARCOLL_OK)
            return coll_fail(r, rc);
        *out = r;
        return coll_progress(r);
    }
    /* Inner phases leave their own block where the outer call reads it. */
    if (!(flags & COLL_F_NOSELF))
        memcpy(r->rbuf + (size_t)t->rank * bytes, coll_src(r, t->rank), bytes);
    t->peers[t->rank].tx_state = COLL_TX_DONE;
    t->peers[t->rank].rx_done = 1;

    rc = r->proto->start(r);
    if (rc != ARCOLL_OK)
        return coll_fail(r, rc);
    *out = r;
    return coll_progress(r);
}

int coll_wait(coll_req_t *r)
{
    const core_config_t *cfg = &r->team->ctx->cfg;
    /* Oversubscribed: the peer we wait for may need our core, so yield soon. */
    long spin = r->team->ctx->oversubscribed ? (cfg->spin_count < 32 ? cfg->spin_count : 32)
                                             : cfg->spin_count;
    long polls = 0;
    int rc;

    while ((rc = coll_progress(r)) == ARCOLL_INPROGRESS) {
        if (++polls > spin)
            sched_yield();
        else
            __asm__ __volatile__("" ::: "memory");
    }
    return rc;
}
