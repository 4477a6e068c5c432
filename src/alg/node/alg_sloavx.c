/*
 * SLOAVx (Xu et al. §IV): the node step of the logarithmic alltoallv through
 * the node segment (engine/hier_seg.h), one aggregated message per pair of
 * nodes between the node masters; docs/protocol.md §14, "sloavx".
 *
 * 1. Every rank writes its counts and its expected bytes per source node
 *    into its count line of the send bank, then its arrive word. Once every
 *    local rank's counts are in, every rank lays out the node messages alike
 *    ([src local][dst local] counts, then the blocks in that order), writes
 *    its rows and blocks into each, then its data word.
 * 2. The master, once every local rank's data is in, runs the masters'
 *    alltoallv from those messages into the receive area.
 * 3. It publishes a done word; every rank copies its blocks out of the
 *    receive area, checking each count against its own. Blocks between ranks
 *    of one node come out of the own node's message, with no master.
 * A block longer than T goes straight from its source to its destination (a
 * message of the call's schedule), its count a stub in the tables, as sloav
 * does: both ends know its length, so both pick the same path.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "util/log.h"

#define SLX_STUB UINT32_MAX
/* The arrive word's size: no alltoall or allgather size (at most
 * max_bytes), so a node call of another kind reads as a mismatch. */
#define SLX_TAG (1ULL << 62)

/* The masters' step: PAP_Direct, not sloav. A node message holds lsize^2
 * blocks and their counts, above ARCOLL_SLOAV_MAX from 16 B blocks on nodes
 * of 16, so sloav would send it direct anyway and route a stub of it
 * through log2(nodes) steps; routed (a higher limit) it costs more still.
 * In the scale simulator sloav there was 1.6-2.5x slower than pap at
 * 64-512 ranks, 1-16 B (docs/scale.md, "000"). */
extern const coll_alg_t coll_alg_pap;

/* Per-team state: where this call's node messages sit in the send bank
 * (every rank lays them out alike), and a master's counts for the masters'
 * call. */
typedef struct slx_team {
    uint64_t *base, *len;      /* [nnodes]: node message for node d (own node: its blocks) */
    size_t *sc, *sd, *rc, *rd; /* [nnodes] each */
} slx_team_t;

typedef struct slx_call {
    uint64_t seq;      /* the node segment's call number */
    uint64_t thresh;   /* T: largest block through the segment */
    uint64_t next_ns;  /* next look at this node's pids */
    coll_req_t *inner; /* master: the masters' call */
    slx_team_t *st;
    uint32_t polls;
    uint32_t narrived,
        nlaid; /* local ranks seen arrived, laid: each wait pass goes on from there */
    uint8_t laid, own, net, published;
    uint8_t poison; /* a local rank is in another call: the masters' call must fail */
} slx_call_t;

#define XC(r) COLL_PRIV(r, slx_call_t)

static void *slx_team_make(struct arcoll_team *t)
{
    uint32_t m = t->hier->nnodes;
    slx_team_t *st = malloc(sizeof(*st) + (size_t)m * (2 * sizeof(uint64_t) + 4 * sizeof(size_t)));

    if (st == NULL) {
        log_err("sloavx: out of memory for its per-team state");
        return NULL;
    }
    st->base = (uint64_t *)(void *)(st + 1);
    st->len = st->base + m;
    st->sc = (size_t *)(void *)(st->len + m);
    st->sd = st->sc + m;
    st->rc = st->sd + m;
    st->rd = st->rc + m;
    return st;
}

static const eng_state_kind_t slx_team_kind = {.make = slx_team_make, .free = free};

/* A send bank: the local ranks' count lines (u32 count[n], SLX_STUB for a
 * direct block; u64 expected bytes from each node[nnodes]), then the node
 * messages. */
static uint64_t slx_line(uint32_t n, uint32_t nnodes)
{
    return 4ull * n + 8ull * nnodes;
}

/* T, the same on every rank (settings, team shape, segment): the count
 * lines, the node messages' count tables and blocks of up to T fit a send
 * bank, and what a node receives fits the receive area (smaller). */
static uint64_t slx_thresh(const struct arcoll_team *t)
{
    const hier_t *h = t->hier;
    const hier_seg_t *g = t->hseg;
    uint64_t n = t->size, head, lim = t->ctx->cfg.sloav_max;

    if (h == NULL || g == NULL || g->max_bytes == 0)
        return 0;
    head = (uint64_t)h->lmax * (slx_line(t->size, h->nnodes) + 4 * n) + 16ull * h->nnodes;
    if (g->lay.area <= head)
        return 0;
    n = (g->lay.area - head) / (n * h->lmax);
    lim = lim < n ? lim : n;
    return lim < SLX_STUB ? lim : SLX_STUB - 1;
}

static char *slx_bank(const coll_req_t *r)
{
    const hier_seg_t *g = r->team->hseg;

    return hier_seg_at(g, g->lay.off_send + (XC(r)->seq & 1) * g->lay.area);
}

static char *slx_line_at(const coll_req_t *r, uint32_t s)
{
    const struct arcoll_team *t = r->team;

    return slx_bank(r) + (uint64_t)s * slx_line(t->size, t->hier->nnodes);
}

static uint32_t slx_u32(const char *p, size_t i)
{
    uint32_t v;

    memcpy(&v, p + 4 * i, 4);
    return v;
}

static const size_t *slx_scounts(const coll_req_t *r)
{
    return r->args.in_place ? r->args.rcounts : r->args.scounts;
}

/* Local rank s's word "my blocks are in the node messages" (per bank). */
static _Atomic uint64_t *slx_data_word(const coll_req_t *r, uint32_t s)
{
    return hier_seg_arrive_line(r->team->hseg, s) + 3 + (XC(r)->seq & 1);
}

/* Step 1a: our count line, then the arrive word; our own block straight to
 * the receive buffer. */
static void slx_arrive(coll_req_t *r)
{
    const struct arcoll_team *t = r->team;
    const hier_t *h = t->hier;
    const coll_args_t *a = &r->args;
    const size_t *sc = slx_scounts(r), *sd = a->in_place ? a->rdispls : a->sdispls;
    char *line = slx_line_at(r, h->lrank);
    uint64_t rsum[1] = {0}, T = XC(r)->thresh;

    for (uint32_t d = 0; d < t->size; d++) {
        uint32_t c = d == t->rank ? 0 : sc[d] > T ? SLX_STUB : (uint32_t)sc[d];
        memcpy(line + 4ull * d, &c, 4);
    }
    for (uint32_t e = 0; e < h->nnodes; e++) {
        rsum[0] = 0;
        for (uint32_t l = 0; l < h->node_size[e]; l++) {
            uint32_t q = h->node_rank[e * h->lmax + l];
            if (q != t->rank && a->rcounts[q] <= T)
                rsum[0] += a->rcounts[q];
        }
        memcpy(line + 4ull * t->size + 8ull * e, rsum, 8);
    }
    eng_cost(t->ctx, CHAN_COST_COPY, slx_line(t->size, h->nnodes));
    if (!a->in_place && sc[t->rank] > 0) {
        eng_cost(t->ctx, CHAN_COST_COPY, sc[t->rank]);
        memcpy(a->rbuf + a->rdispls[t->rank], a->sbuf + sd[t->rank], sc[t->rank]);
    }
    hier_seg_arrive_set(t->hseg, h->lrank, XC(r)->seq, r->epoch, SLX_TAG);
}

/* Every local rank arrived (in this call of ours): 1; a local rank in
 * another call is a mismatch, and poisons the node's messages. */
static int slx_all_arrived(coll_req_t *r)
{
    const hier_t *h = r->team->hier;

    for (; XC(r)->narrived < h->lsize; XC(r)->narrived++) {
        uint32_t s = XC(r)->narrived;
        uint64_t size;
        if (!hier_seg_arrived(r->team->hseg, s, XC(r)->seq, r->epoch, &size))
            return 0;
        if (size == SLX_TAG)
            continue;
        XC(r)->poison = 1;
        if (!r->deferred)
            log_err("alltoallv (epoch %llu, sloavx): team rank %u of this node is in another "
                    "call",
                    (unsigned long long)r->epoch, h->node_rank[h->node * h->lmax + s]);
        r->deferred = ARCOLL_ERR_MISMATCH;
    }
    return 1;
}

/* Bytes local rank s sends node d's ranks through the segment. */
static uint64_t slx_row(const coll_req_t *r, uint32_t s, uint32_t d)
{
    const hier_t *h = r->team->hier;
    const char *line = slx_line_at(r, s);
    uint64_t sum = 0;

    for (uint32_t l = 0; l < h->node_size[d]; l++) {
        uint32_t c = slx_u32(line, h->node_rank[d * h->lmax + l]);
        sum += c == SLX_STUB ? 0 : c;
    }
    return sum;
}

/* Step 1b, once every local rank's counts are in: lay the node messages out
 * (every rank alike: [src local][dst local] counts, then the blocks in that
 * order; the own node's too, never sent), write our rows of each, then our
 * data word. 0, or ARCOLL_ERR_MISMATCH: the counts do not fit (only counts
 * of a rank in another call can do that). */
static int slx_lay(coll_req_t *r)
{
    const struct arcoll_team *t = r->team;
    const hier_t *h = t->hier;
    const coll_args_t *a = &r->args;
    const size_t *sd = a->in_place ? a->rdispls : a->sdispls;
    const char *src = a->in_place ? a->rbuf : a->sbuf;
    slx_team_t *st = XC(r)->st;
    char *bank = slx_bank(r), *mine = slx_line_at(r, h->lrank);
    uint64_t at = (uint64_t)h->lmax * slx_line(t->size, h->nnodes), moved = 0;

    for (uint32_t d = 0; !XC(r)->poison && d < h->nnodes; d++) {
        uint64_t len = 4ull * h->lsize * h->node_size[d], pre = 0;
        for (uint32_t s = 0; s < h->lsize; s++) {
            uint64_t row = slx_row(r, s, d);
            pre += s < h->lrank ? row : 0;
            len += row;
        }
        st->base[d] = at;
        st->len[d] = len;
        at += len;
        if (at > t->hseg->lay.area) {
            XC(r)->poison = 1;
            break;
        }
        /* our row of counts, then our blocks after the earlier ranks' */
        {
            char *msg = bank + st->base[d], *data = msg + 4ull * h->lsize * h->node_size[d] + pre;
            for (uint32_t l = 0; l < h->node_size[d]; l++) {
                uint32_t q = h->node_rank[d * h->lmax + l], c = slx_u32(mine, q);
                memcpy(msg + 4ull * ((size_t)h->lrank * h->node_size[d] + l), &c, 4);
                if (c != SLX_STUB && c > 0) {
                    memcpy(data, src + sd[q], c);
                    data += c;
                    moved += c;
                }
            }
        }
    }
    eng_cost(t->ctx, CHAN_COST_COPY, moved + 4ull * t->size);
    atomic_store_explicit(slx_data_word(r, h->lrank), XC(r)->seq, memory_order_release);
    if (!XC(r)->poison)
        return ARCOLL_OK;
    if (!r->deferred)
        log_err("alltoallv (epoch %llu, sloavx): this node's counts do not fit its segment",
                (unsigned long long)r->epoch);
    r->deferred = ARCOLL_ERR_MISMATCH;
    return ARCOLL_OK;
}

/* Every local rank of this call has written its blocks: 1. */
static int slx_all_laid(coll_req_t *r)
{
    const hier_t *h = r->team->hier;

    for (; XC(r)->nlaid < h->lsize; XC(r)->nlaid++) {
        uint32_t s = XC(r)->nlaid;
        uint64_t size;
        if (!hier_seg_arrived(r->team->hseg, s, XC(r)->seq, r->epoch, &size) || size != SLX_TAG)
            continue; /* in another call: it writes no data word */
        if (atomic_load_explicit(slx_data_word(r, s), memory_order_acquire) != XC(r)->seq)
            return 0;
    }
    return 1;
}

/* The block from team rank q came as count c (SLX_STUB: direct) where we
 * expect rcounts[q]: 1 if it agrees. A path that disagrees stops q's
 * stream (a direct block that will not come, or one nobody reads). */
static int slx_check(coll_req_t *r, uint32_t q, uint32_t c)
{
    size_t want = r->args.rcounts[q];
    int stub = c == SLX_STUB, want_stub = want > XC(r)->thresh;

    if (stub == want_stub && (stub || c == want))
        return 1;
    if (!r->deferred && stub)
        log_err("alltoallv (epoch %llu, sloavx): team rank %u sent its block direct (more than "
                "the node step's limit) where this rank expects %zu bytes",
                (unsigned long long)r->epoch, q, want);
    else if (!r->deferred)
        log_err("alltoallv (epoch %llu, sloavx): team rank %u sent %u bytes through the node "
                "segment where this rank expects %zu%s",
                (unsigned long long)r->epoch, q, c, want, want_stub ? " direct" : "");
    if (stub != want_stub)
        eng_sched_reject(r, q);
    r->deferred = ARCOLL_ERR_MISMATCH;
    return 0;
}

/* Our blocks out of node e's message of len bytes ([src local][dst local]
 * counts, then the blocks). */
static void slx_take(coll_req_t *r, const char *msg, uint64_t len, uint32_t e)
{
    const hier_t *h = r->team->hier;
    uint32_t ls = h->node_size[e];
    uint64_t off = 4ull * ls * h->lsize, moved = 0;

    for (uint32_t s = 0; s < ls; s++) {
        uint32_t q = h->node_rank[e * h->lmax + s];
        for (uint32_t l = 0; l < h->lsize; l++) {
            uint32_t c = slx_u32(msg, (size_t)s * h->lsize + l);
            uint64_t n = c == SLX_STUB ? 0 : c;
            if (off + n > len) { /* its master's layout: cannot happen */
                log_err("alltoallv (epoch %llu, sloavx): the message of the node of team "
                        "rank %u does not add up",
                        (unsigned long long)r->epoch, h->node_rank[e * h->lmax]);
                r->deferred = ARCOLL_ERR_MISMATCH;
                return;
            }
            if (l == h->lrank && q != r->team->rank && slx_check(r, q, c) && n > 0) {
                memcpy(r->args.rbuf + r->args.rdispls[q], msg + off, n);
                moved += n;
            }
            off += n;
        }
    }
    eng_cost(r->team->ctx, CHAN_COST_COPY, moved);
}

/* Blocks from the other nodes, out of the receive area: at its start the
 * masters' offset and length of each node's message. */
static void slx_copy_net(coll_req_t *r)
{
    const hier_t *h = r->team->hier;
    const hier_seg_t *g = r->team->hseg;
    const char *recv = hier_seg_at(g, g->lay.off_recv);

    for (uint32_t e = 0; e < h->nnodes && !r->deferred; e++) {
        uint64_t pos[2];
        if (e == h->node)
            continue;
        memcpy(pos, recv + 16ull * e, 16);
        slx_take(r, recv + pos[0], pos[1], e);
    }
}

/* Master: the other nodes' blocks are in the receive area (status 0), or
 * never will be. */
static void slx_publish(coll_req_t *r, int rc)
{
    const hier_seg_t *g = r->team->hseg;

    if (XC(r)->published)
        return;
    XC(r)->published = 1;
    atomic_store_explicit(hier_seg_word(g, g->lay.off_all),
                          wire_done_word(XC(r)->seq, (unsigned)-rc), memory_order_release);
}

/* Master, step 2: the masters' alltoallv, from the node messages in the
 * send bank into the receive area. */
static int slx_master_start(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    const hier_t *h = t->hier;
    const hier_seg_t *g = t->hseg;
    slx_team_t *st = XC(r)->st;
    uint64_t rat = 16ull * h->nnodes;
    char *recv = hier_seg_at(g, g->lay.off_recv);

    for (uint32_t d = 0; d < h->nnodes; d++) {
        uint64_t in = 0;
        for (uint32_t s = 0; d != h->node && s < h->lsize; s++) {
            uint64_t v;
            memcpy(&v, slx_line_at(r, s) + 4ull * t->size + 8ull * d, 8);
            in += v;
        }
        in += d != h->node ? 4ull * h->lsize * h->node_size[d] : 0;
        st->sc[d] = d != h->node ? st->len[d] : 0;
        st->sd[d] = st->base[d];
        st->rc[d] = in;
        st->rd[d] = rat;
        rat += in;
    }
    if (rat > g->lay.area && !XC(r)->poison) { /* T keeps it within: cannot happen */
        log_err("alltoallv (epoch %llu, sloavx): this node's ranks expect %llu bytes from the "
                "other nodes, more than the receive area holds",
                (unsigned long long)r->epoch, (unsigned long long)rat);
        XC(r)->poison = 1;
        r->deferred = ARCOLL_ERR_MISMATCH;
    }
    if (XC(r)->poison) /* empty messages both ways where each has its count table: */
        memset(st->sc, 0, sizeof(size_t) * 4 * h->nnodes); /* every master fails */
    for (uint32_t d = 0; d < h->nnodes; d++) {
        uint64_t pos[2] = {st->rd[d], st->rc[d]};
        memcpy(recv + 16ull * d, pos, 16);
    }
    {
        coll_args_t in = {.type = COLL_ALLTOALLV,
                          .sbuf = slx_bank(r),
                          .rbuf = recv,
                          .scounts = st->sc,
                          .sdispls = st->sd,
                          .rcounts = st->rc,
                          .rdispls = st->rd,
                          .sig = r->args.sig,
                          .call = r->epoch,
                          .internal = r->args.internal};
        return eng_start(h->xteam, &in, &coll_alg_pap, COLL_F_INNER, NULL, &XC(r)->inner);
    }
}

/* Master: the masters' call (rc: its start's, or INPROGRESS). Done:
 * publish; a mismatch there fails this node's ranks with it. */
static int slx_master_net(coll_req_t *r, int rc)
{
    coll_req_t *in = XC(r)->inner;

    if (rc == ARCOLL_INPROGRESS)
        rc = coll_progress(in);
    if (rc == ARCOLL_INPROGRESS)
        return rc;
    if (rc == ARCOLL_ERR_MISMATCH) {
        if (!r->deferred)
            log_err("alltoallv (epoch %llu, sloavx): the node messages between the masters "
                    "disagree in length: counts of ranks on different nodes disagree",
                    (unsigned long long)r->epoch);
        r->deferred = rc;
    }
    if (rc < 0 && rc != ARCOLL_ERR_MISMATCH)
        return rc;
    slx_publish(r, r->deferred);
    return ARCOLL_OK;
}

/* The node step, the hook of the call's last round: INPROGRESS until our
 * blocks from every other rank (direct ones aside) are in. */
static int slx_hook(void *arg, sched_t *s, sched_mem_t *m, uint32_t round)
{
    coll_req_t *r = arg;
    const hier_t *h = r->team->hier;
    const hier_seg_t *g = r->team->hseg;
    slx_call_t *x = XC(r);
    int master = h->nnodes > 1 && hier_is_master(h), rc;

    (void)s;
    (void)m;
    if (round == 0)
        return ARCOLL_OK; /* round 0 is the direct blocks' */
    if (!x->laid) {
        if (!slx_all_arrived(r))
            goto wait;
        slx_lay(r);
        x->laid = 1;
    }
    if (!x->own) {
        if (!slx_all_laid(r))
            goto wait;
        x->own = 1;
        if (!x->poison)
            slx_take(r, slx_bank(r) + x->st->base[h->node], x->st->len[h->node], h->node);
        rc = master ? slx_master_net(r, slx_master_start(r)) : ARCOLL_OK;
        if (rc < 0 && rc != ARCOLL_INPROGRESS)
            return rc;
    }
    if (master && !x->published) {
        rc = slx_master_net(r, ARCOLL_INPROGRESS);
        if (rc == ARCOLL_INPROGRESS)
            goto wait;
        if (rc < 0)
            return rc;
    }
    if (h->nnodes > 1 && !x->net) {
        uint64_t w = atomic_load_explicit(hier_seg_word(g, g->lay.off_all), memory_order_acquire);
        if (!wire_done_epoch_match(w, x->seq))
            goto wait;
        x->net = 1;
        rc = -(int)wire_done_status(w);
        if (rc == ARCOLL_OK)
            slx_copy_net(r);
        else if (rc != ARCOLL_ERR_MISMATCH)
            return rc;
        else if (!r->deferred)
            log_err("alltoallv (epoch %llu, sloavx): this node's master (team rank %u) reports "
                    "that blocks from other nodes disagree with this node's counts",
                    (unsigned long long)r->epoch, h->node_rank[h->node * h->lmax]);
        if (rc == ARCOLL_ERR_MISMATCH)
            r->deferred = rc;
    }
    /* A failed call's direct blocks may never come: stop waiting for them. */
    if (r->deferred)
        eng_sched_reject_pending(r);
    return ARCOLL_OK;

wait:
    if ((++x->polls & 63) == 0) {
        uint64_t now = eng_time_ns(r->team->ctx);
        int gone = now >= x->next_ns ? hier_local_gone(h) : -1;
        if (now >= x->next_ns)
            x->next_ns = now + 100000000ULL;
        if (gone >= 0) {
            log_err("alltoallv (epoch %llu, sloavx): local rank %d of this node (pid %ld) has "
                    "exited",
                    (unsigned long long)r->epoch, gone, h->local_pid[gone]);
            return ARCOLL_ERR_PEER;
        }
    }
    return ARCOLL_INPROGRESS;
}

/* The schedule: direct blocks both ways (outside the rounds), and the node
 * step as the hook of its last round. */
static int slx_build(coll_req_t *r, sched_t *s)
{
    const struct arcoll_team *t = r->team;
    const coll_args_t *a = &r->args;
    const size_t *sc = slx_scounts(r), *sd = a->in_place ? a->rdispls : a->sdispls;
    uint64_t T = XC(r)->thresh, tmp = 0;
    int rc = 0;

    sched_reset(s);
    for (uint32_t d = 0; rc == 0 && d < t->size; d++) {
        sched_seg_t seg = {.off = sd[d], .len = sc[d], .buf = SCHED_BUF_SEND};
        if (d == t->rank || sc[d] <= T)
            continue;
        if (a->in_place) { /* a direct receive from d lands on top of it */
            sched_seg_t from = {.off = sd[d], .len = sc[d], .buf = SCHED_BUF_RECV};
            seg = (sched_seg_t){.off = tmp, .len = sc[d], .buf = SCHED_BUF_TMP};
            tmp += sc[d];
            rc = sched_add_local(s, 0, &seg, 1, &from, 1);
        }
        if (rc == 0)
            rc = sched_add_send(s, 0, d, &seg, 1);
        if (rc == 0)
            s->send[s->nsend - 1].unordered = 1;
    }
    for (uint32_t q = 0; rc == 0 && q < t->size; q++) {
        sched_seg_t seg = {.off = a->rdispls[q], .len = a->rcounts[q], .buf = SCHED_BUF_RECV};
        if (q == t->rank || a->rcounts[q] <= T)
            continue;
        rc = sched_add_recv(s, 0, q, SCHED_COPY, &seg, 1);
        if (rc == 0)
            s->recv[s->nrecv - 1].unordered = 1;
    }
    s->tmp_len = tmp;
    /* The node step is the hook of round 1, the last: the direct blocks
     * (round 0, unordered) and their in-place copies wait for no hook. */
    s->nrounds = 1;
    s->hook = slx_hook;
    s->on_size = NULL;
    s->hook_arg = r;
    return rc == 0 ? ARCOLL_OK : ARCOLL_ERR_NOMEM;
}

static int slx_start(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    sched_t *s = eng_sched(r);
    slx_call_t *x = XC(r);
    int rc;

    memset(x, 0, sizeof(*x));
    if (s == NULL)
        return ARCOLL_ERR_NOMEM;
    x->st = eng_state_get(t, &slx_team_kind);
    if (x->st == NULL)
        return ARCOLL_ERR_NOMEM;
    x->seq = ++t->hseg->seq;
    x->thresh = slx_thresh(t);
    rc = slx_build(r, s);
    if (rc != ARCOLL_OK) {
        log_err("alltoallv (sloavx): out of memory for the call's schedule");
        return rc;
    }
    slx_arrive(r);
    /* A full exchange: every rank's blocks reach every rank through its
     * node's master and the masters' call (docs/protocol.md §5, §14). */
    return eng_sched_start(r, ENG_SCHED_PAP);
}

/* The masters' call and this node's ranks must learn of any failure: the
 * executor fails the call on its own too (a direct peer gone, the timeout). */
static int slx_progress(coll_req_t *r)
{
    const hier_t *h = r->team->hier;
    int rc = eng_sched_progress(r);

    if (rc == ARCOLL_INPROGRESS || !hier_is_master(h) || h->nnodes < 2 || XC(r)->published)
        return rc;
    slx_publish(r, rc < 0 ? rc : ARCOLL_ERR_MISMATCH);
    if (XC(r)->inner != NULL && XC(r)->inner->active)
        coll_fail(XC(r)->inner, rc < 0 ? rc : ARCOLL_ERR_MISMATCH);
    return rc;
}

static const char *slx_unfit(const struct arcoll_team *t, const coll_args_t *a)
{
    if (a->type != COLL_ALLTOALLV)
        return "alltoallv only";
    if (t->hier == NULL)
        return "no node holds two of its ranks";
    if (t->hier->nnodes > 1 && !t->hier->xready)
        return "the team's masters' team is not made yet";
    if (slx_thresh(t) == 0)
        return "the node segment holds no block for this job shape (ARCOLL_SHM_MAX)";
    return NULL;
}

const coll_alg_t coll_alg_sloavx = {.name = "sloavx",
                                    .unfit = slx_unfit,
                                    .fallback = CORE_ALG_SLOAV,
                                    .serial = 1,
                                    .start = slx_start,
                                    .progress = slx_progress};
