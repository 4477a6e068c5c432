/* The simulator's network model: the ranks' event queues of puts in flight,
 * a put's cost (LogGP, the node's NIC, leaf uplinks; the parameter sets are
 * sim_params.c's), its delivery into the target's memory once the target's
 * clock has passed its arrival, the RC QPs verbs would hold and the landed
 * log (docs/scale.md, "How it runs"). It runs on the scheduler's ranks
 * (sim_sched.c) and tells the scheduler what it did through the functions
 * sim_int.h names. */
#include <stdlib.h>
#include <string.h>

#include "chan/chan.h"
#include "chan/sim/sim_int.h"
#include "util/log.h"

/* The world both halves share (sim_int.h); the scheduler fills it in sim_run. */
sim_world_t sim_world = {.cur = -1};

/* Where a rank's last puts landed (chan_model_ops.landed_at), a ring: a poll loop
 * falls behind it only after this many landings, and then scans once. */
#define SIM_LOG 512

/* SIM_EV_POOL: carved from a slab and recycled through the free list of
 * its size class (the class number above SIM_EV_CLASS_SHIFT); else malloc'd
 * alone (puts above CHAN_PUT_COPY bytes). */
enum { SIM_EV_FLAG = 1, SIM_EV_NODATA = 2, SIM_EV_POOL = 4 };
#define SIM_EV_CLASS_SHIFT 3
#define SIM_SLAB_BYTES     (1u << 20)
_Static_assert(CHAN_PUT_COPY <= 64, "ev_class_len must have a class for CHAN_PUT_COPY bytes");
_Static_assert(((SIM_EV_CLASSES - 1) << SIM_EV_CLASS_SHIFT | 7) < 256,
               "an event's flags and class fit sim_evq_t.flag");
/* Under ASan every event is its own allocation, so that its redzones catch a
 * write past an event's data. */
#ifdef SIM_ASAN
#define SIM_EV_MALLOC 1
#else
#define SIM_EV_MALLOC 0
#endif

/* ---- event queue of a rank ------------------------------------------- */

static int ev_less(const sim_evq_t *a, const sim_evq_t *b)
{
    /* seq modulo 2^32: a rank never has 2^31 puts in flight to it */
    return a->t < b->t || (a->t == b->t && (int32_t)(a->e->seq - b->e->seq) < 0);
}

static void ev_sift(sim_rank_t *r, int i)
{
    sim_evq_t *q = r->evq;

    while (i > 0 && ev_less(&q[i], &q[(i - 1) / 2])) {
        sim_evq_t t = q[i];
        q[i] = q[(i - 1) / 2];
        q[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
    for (;;) {
        int l = 2 * i + 1, m = i;
        if (l < r->nev && ev_less(&q[l], &q[m]))
            m = l;
        if (l + 1 < r->nev && ev_less(&q[l + 1], &q[m]))
            m = l + 1;
        if (m == i)
            return;
        sim_evq_t t = q[i];
        q[i] = q[m];
        q[m] = t;
        i = m;
    }
}

/* Most puts are small (words, headers, bytes of small messages): their
 * events come from slabs and are recycled, instead of a malloc and free per
 * put. */
static sim_ev_t *ev_new(size_t len, uint32_t *flag)
{
    uint32_t c = 0;
    size_t sz;
    sim_ev_t *e;

    *flag = 0;
    if (len > CHAN_PUT_COPY || SIM_EV_MALLOC)
        return malloc(sizeof(*e) + len);
    while (ev_class_len[c] < len)
        c++;
    *flag = SIM_EV_POOL | c << SIM_EV_CLASS_SHIFT;
    e = sim_world.pool[c];
    if (e != NULL) {
        sim_world.pool[c] = e->dst;
        return e;
    }
    sz = sizeof(*e) + ev_class_len[c];
    if (sim_world.slab_left < sz) {
        void **slab = malloc(SIM_SLAB_BYTES);
        if (slab == NULL)
            return NULL;
        *slab = sim_world.slabs;
        sim_world.slabs = slab;
        sim_world.slab_at = (char *)slab + sizeof(sim_ev_t); /* keeps events 8-aligned */
        sim_world.slab_left = SIM_SLAB_BYTES - sizeof(sim_ev_t);
    }
    e = (sim_ev_t *)(void *)sim_world.slab_at;
    sim_world.slab_at += sz;
    sim_world.slab_left -= sz;
    return e;
}

/* flag: the one ev_new gave (the queue entry's). */
static void ev_free(sim_ev_t *e, uint32_t flag)
{
    if (flag & SIM_EV_POOL) {
        sim_ev_t **pool = &sim_world.pool[flag >> SIM_EV_CLASS_SHIFT];
        e->dst = *pool;
        *pool = e;
    } else {
        free(e);
    }
}

uint64_t sim_ev_next(const sim_rank_t *r)
{
    return r->nev > 0 ? r->evq[0].t : SIM_NEVER;
}

/* ---- setup and teardown ---------------------------------------------- */

/* The model's options and the links' busy times (sim_setup): -1 if out of
 * memory. */
int sim_net_setup(const sim_opts_t *o)
{
    sim_world.fault = o->fault;
    sim_world.nodata = o->nodata;
    sim_world.nodata_len = o->nodata_len;
    sim_world.rescan = o->rescan;
    sim_world.nic_free = calloc((size_t)sim_world.n, sizeof(*sim_world.nic_free));
    sim_world.rx_free = calloc((size_t)sim_world.n, sizeof(*sim_world.rx_free));
    /* leaves <= nodes <= ranks; a leaf's cables (up_links, at least the one pipe) each */
    size_t links = (size_t)sim_world.n * (o->params.up_links >= 1 ? (size_t)o->params.up_links : 1);
    sim_world.up_free = calloc(links, sizeof(*sim_world.up_free));
    sim_world.down_free = calloc(links, sizeof(*sim_world.down_free));
    if (sim_world.nic_free == NULL || sim_world.rx_free == NULL || sim_world.up_free == NULL ||
        sim_world.down_free == NULL)
        return -1;
    return 0;
}

/* A rank's connection table and landed log (sim_setup): -1 if out of memory. */
int sim_net_rank_setup(sim_rank_t *r)
{
    r->qp = calloc((size_t)sim_world.n, 1);
    r->log = calloc(SIM_LOG, sizeof(*r->log));
    return r->qp == NULL || r->log == NULL ? -1 : 0;
}

/* Everything the model holds (sim_free). */
void sim_net_free(void)
{
    for (int i = 0; sim_world.r != NULL && i < sim_world.n; i++) {
        sim_rank_t *r = &sim_world.r[i];
        for (int k = 0; k < r->nev; k++)
            ev_free(r->evq[k].e, r->evq[k].flag);
        free(r->evq);
        free(r->qp);
        free(r->log);
    }
    while (sim_world.slabs != NULL) {
        void **slab = sim_world.slabs;
        sim_world.slabs = *slab;
        free(slab);
    }
    free(sim_world.nic_free);
    free(sim_world.rx_free);
    free(sim_world.up_free);
    free(sim_world.down_free);
}

/* ---- the channel's side ----------------------------------------------- */

int sim_nic(void)
{
    return sim_world.p.nic;
}

uint64_t sim_landed(int rank)
{
    return sim_world.rescan ? sim_world.r[rank].landed++ : sim_world.r[rank].landed;
}

const void *sim_landed_at(int rank, uint64_t seq)
{
    const sim_rank_t *r = &sim_world.r[rank];

    if (sim_world.rescan || seq >= r->landed || r->landed - seq > SIM_LOG)
        return NULL;
    return r->log[seq % SIM_LOG];
}

/* One stage of a put's path, busy until *busy. Bytes flow through the stages
 * cut-through: a stage starts no earlier than the one before it started and
 * ends no earlier than that one ended. Stages take puts in the order they are
 * made, which may differ from virtual time order by up to the lookahead. */
static void sim_stage(uint64_t *busy, uint64_t dur, uint64_t *start, uint64_t *end)
{
    if (*start < *busy)
        *start = *busy;
    if (*end < *start + dur)
        *end = *start + dur;
    *busy = *end;
}

/* The cable of the leaves' up_links that a put from node sn to node dn takes
 * up from its leaf and down into the target's (the same index: the spine it
 * goes through): static routing, the same for every put of the pair. */
static size_t sim_route(const sim_params_t *p, int sn, int dn)
{
    uint64_t links = (uint64_t)p->up_links, x;

    if (p->up_route == 0)
        return (size_t)((uint64_t)dn % links); /* D-mod-k */
    /* ECMP: a hash of the pair (splitmix64's finalizer) */
    x = (uint64_t)(uint32_t)sn << 32 | (uint32_t)dn;
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    return (size_t)(x % links);
}

/* An inter-node put: the sender's o, its NIC, the leaf uplink and downlink
 * when it changes leaf (one pipe each, or the routed cable of up_links), the
 * target's NIC; arrival L after the last stage. */
static uint64_t sim_net(sim_rank_t *s, const sim_rank_t *d, size_t len)
{
    const sim_params_t *p = &sim_world.p;
    double wire = (double)len * p->inter_G;
    uint64_t occ = (uint64_t)(wire > p->inter_g ? wire : p->inter_g);
    uint64_t start, end = 0;

    s->clock += (uint64_t)p->inter_o;
    start = s->clock;
    sim_stage(&sim_world.nic_free[s->node], occ, &start, &end);
    if (p->leaf_nodes >= 1) {
        int ls = s->node / (int)p->leaf_nodes, ld = d->node / (int)p->leaf_nodes;
        if (ls != ld) {
            uint64_t up = (uint64_t)((double)len * p->up_G);
            size_t u = (size_t)ls, w = (size_t)ld;
            if (p->up_links >= 1) {
                size_t links = (size_t)p->up_links, k = sim_route(p, s->node, d->node);
                u = u * links + k;
                w = w * links + k;
            }
            sim_stage(&sim_world.up_free[u], up, &start, &end);
            sim_stage(&sim_world.down_free[w], up, &start, &end);
        }
    }
    if (p->rx_nic != 0)
        sim_stage(&sim_world.rx_free[d->node], occ, &start, &end);
    return end + (uint64_t)p->inter_L;
}

int sim_put(int src, int dst, void *to, const void *from, size_t len, int flag, uint64_t *last)
{
    sim_rank_t *s = &sim_world.r[src], *d = &sim_world.r[dst];
    const sim_params_t *p = &sim_world.p;
    sim_ev_t *e;
    uint32_t evflag;
    uint64_t arr, handshake = 0;
    /* Faults hit payload only (puts above CHAN_PUT_COPY bytes; control words
     * are smaller), so that the tool's byte check is what must catch them.
     * Payload-free drops bytes read from the user's buffers (sim_opts_t). */
    int payload = !flag && len > CHAN_PUT_COPY;
    int nodata = !flag && (uintptr_t)from - (uintptr_t)sim_world.nodata < sim_world.nodata_len;

    e = ev_new(nodata ? 0 : len, &evflag);
    if (e == NULL || (d->nev == d->cap && d->cap > INT32_MAX / 2)) {
        if (e != NULL)
            ev_free(e, evflag);
        log_err("sim: out of memory queueing a put");
        return ARCOLL_ERR_NOMEM;
    }
    if (d->nev == d->cap) {
        int cap = d->cap ? 2 * d->cap : 64;
        sim_evq_t *q = realloc(d->evq, sizeof(*q) * (size_t)cap);
        if (q == NULL) {
            ev_free(e, evflag);
            log_err("sim: out of memory queueing a put");
            return ARCOLL_ERR_NOMEM;
        }
        d->evq = q;
        d->cap = cap;
    }
    if (src != dst && !s->qp[dst]) {
        /* verbs' first write to a peer: our QP and a HELLO over UD; the peer
         * creates and connects its own and answers; the put waits for that.
         * A set without QP cost (host-shm: no QPs) has no handshake either. */
        s->qp[dst] = d->qp[src] = 1;
        s->nqps++;
        d->nqps++;
        s->clock += (uint64_t)p->qp_ns;
        if (p->qp_ns > 0)
            handshake = (uint64_t)(p->qp_ns + 2 * (s->node == d->node ? p->intra_L : p->inter_L));
    }
    if (s->node == d->node) {
        s->clock += (uint64_t)(p->intra_o + (double)len * p->intra_G);
        arr = s->clock + (uint64_t)p->intra_L;
    } else {
        arr = sim_net(s, d, len);
    }
    arr += handshake;
    if (sim_world.fault == SIM_FAULT_REORDER && payload) {
        arr += 20000; /* data after its flag: the ordering rule broken on purpose */
    } else {
        if (arr < *last)
            arr = *last; /* one pair's puts land in order (RC) */
        *last = arr;
    }
    if (arr > SIM_EV_T_MAX) {
        ev_free(e, evflag);
        log_err("sim: virtual time passed 2^%d ns", SIM_EV_T_BITS);
        return ARCOLL_ERR_UNSUPPORTED;
    }
    e->seq = d->evseq++;
    e->dst = to;
    e->len = (uint32_t)len;
    evflag |= (flag ? SIM_EV_FLAG : 0) | (nodata ? SIM_EV_NODATA : 0);
    if (!nodata)
        memcpy(e->data, from, len);
    if (sim_world.fault == SIM_FAULT_CORRUPT && payload && !nodata && sim_world.seq++ % 7 == 0)
        e->data[len / 2] ^= 0x5a;
    d->evq[d->nev].t = arr;
    d->evq[d->nev].flag = evflag & 0xffu;
    d->evq[d->nev++].e = e;
    ev_sift(d, d->nev - 1);
    sim_world.inflight++;
    sim_world.sched.activity(s);
    sim_world.sched.wake(dst, arr);
    sim_world.sched.changed(s);
    sim_world.sched.maybe_yield(s);
    return ARCOLL_OK;
}

/* Apply the puts due by the rank's clock; 1 if there were any. */
int sim_deliver(sim_rank_t *r)
{
    int applied = 0;

    while (r->nev > 0 && r->evq[0].t <= r->clock) {
        sim_ev_t *e = r->evq[0].e;
        uint32_t flag = r->evq[0].flag;
        r->evq[0] = r->evq[--r->nev];
        if (r->nev > 0)
            ev_sift(r, 0);
        if (flag & SIM_EV_FLAG) {
            uint64_t v;
            memcpy(&v, e->data, sizeof(v));
            __atomic_store_n((uint64_t *)e->dst, v, __ATOMIC_RELEASE);
        } else {
            if (!(flag & SIM_EV_NODATA))
                memcpy(e->dst, e->data, e->len);
            else
                sim_world.dropped++;
            r->clock += (uint64_t)((double)e->len * sim_world.p.copy_G);
        }
        r->log[r->landed++ % SIM_LOG] = e->dst;
        ev_free(e, flag);
        sim_world.events++;
        sim_world.inflight--;
        sim_world.sched.activity(r);
        applied = 1;
    }
    if (applied)
        sim_world.sched.changed(r);
    return applied;
}

int sim_qps(int rank)
{
    return sim_world.r[rank].nqps;
}

void sim_connect_all(int rank)
{
    sim_rank_t *r = &sim_world.r[rank];

    /* verbs_connect_all creates a QP per peer, then runs the handshakes: the
     * creates are serial on this rank. */
    for (int i = 0; i < sim_world.n; i++) {
        if (i == rank || r->qp[i])
            continue;
        r->qp[i] = sim_world.r[i].qp[rank] = 1;
        r->nqps++;
        sim_world.r[i].nqps++;
        r->clock += (uint64_t)sim_world.p.qp_ns;
    }
    sim_world.sched.activity(r);
    sim_world.sched.maybe_yield(r);
}

void sim_purge(int rank, const void *addr, size_t len)
{
    sim_rank_t *r = &sim_world.r[rank];
    const char *lo = addr, *hi = lo + len;
    int k = 0;

    for (int i = 0; i < r->nev; i++) {
        sim_evq_t q = r->evq[i];
        if ((const char *)q.e->dst >= lo && (const char *)q.e->dst < hi) {
            ev_free(q.e, q.flag);
            sim_world.inflight--;
        } else {
            r->evq[k++] = q;
        }
    }
    r->nev = k;
    for (int i = k / 2; i >= 0 && k > 0; i--)
        ev_sift(r, i);
}

/* Local work the channel does not see, charged before it is done: node
 * memory it writes is then visible to the other ranks no earlier than the
 * charged time less the lookahead (a rank runs on without yielding while it
 * is less than a lookahead ahead of the next one). */
void sim_cost(int rank, int kind, size_t bytes)
{
    sim_rank_t *r = &sim_world.r[rank];
    double ns =
        (double)bytes * (kind == CHAN_COST_REDUCE ? sim_world.p.reduce_G : sim_world.p.copy_G);
    uint64_t whole;

    ns += r->cost_frac;
    whole = (uint64_t)ns;
    r->cost_frac = ns - (double)whole;
    if (whole == 0)
        return;
    r->clock += whole;
    sim_world.sched.activity(r);
    sim_world.sched.maybe_yield(r);
}
