/* SLOAV element routing (route.h, docs/protocol.md §14). */
#include "alg/sched/route.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "arcoll.h"

#define RT_NONE   UINT32_MAX
#define RT_STUB   UINT32_MAX /* wire length of a direct element's stub */
#define RT_ENTRY  12u        /* {src, dst, len} as three u32 */
#define RT_HEAD   4u         /* the entry count */
#define RT_BUFMSK 0x3u       /* rt_el.flags: SCHED_BUF_* of the bytes */
#define RT_FSTUB  0x4u       /* rt_el.flags: a stub, no bytes */

typedef struct rt_el {
    uint32_t src, dst, len, flags;
    uint64_t off;
} rt_el_t;

typedef struct rt_step {
    uint32_t to, from; /* team ranks, RT_NONE */
    uint32_t bit;
    uint32_t send_data, recv_data; /* message indices, RT_NONE */
    uint64_t recv_at;              /* TMP offset of the received message */
} rt_step_t;

struct rt {
    uint32_t n, me, nsteps, phases;
    uint64_t thresh;
    int in_place, bad;
    uint8_t srcbuf;
    const size_t *scounts, *sdispls, *rcounts, *rdispls;
    uint8_t *seen;    /* [n] */
    uint64_t *ip_off; /* [n] in place: TMP offset of a direct receive */
    rt_step_t *steps;
    rt_el_t *el; /* the Element Index Table: what this rank holds */
    uint32_t nel, cap_el;
    uint64_t cursor;   /* next free TMP byte */
    uint32_t bad_from; /* sent a message that does not parse: stop its stream */
    uint32_t absorbed; /* steps whose received message joined the table */
    char why[192];
};

static uint32_t rt_log2up(uint32_t x)
{
    uint32_t k = 0;

    while (k < 32 && (1ull << k) < x)
        k++;
    return k;
}

static uint64_t rt_size_out(uint32_t st)
{
    return 16ull * st;
}

static uint64_t rt_size_in(uint32_t st)
{
    return 16ull * st + 8;
}

static void rt_steps(rt_t *rt)
{
    uint32_t n = rt->n;

    for (uint32_t b = 0; b < rt->nsteps; b++) {
        rt_step_t *p = &rt->steps[b];
        p->bit = b;
        p->to = (rt->me + (1u << b)) % n;
        p->from = (rt->me + n - (1u << b) % n) % n;
        p->send_data = p->recv_data = RT_NONE;
        p->recv_at = 0;
    }
}

/* Carve the state out of one aux block: it lives with the schedule. */
static rt_t *rt_alloc(sched_t *s, uint32_t n, uint32_t nsteps, uint32_t cap_el)
{
    size_t o_seen, o_ip, o_steps, o_el;
    char *p;

    o_ip = (sizeof(rt_t) + 7) & ~(size_t)7;
    o_steps = o_ip + sizeof(uint64_t) * n;
    o_el = o_steps + sizeof(rt_step_t) * nsteps;
    o_el = (o_el + 7) & ~(size_t)7;
    o_seen = o_el + sizeof(rt_el_t) * cap_el;
    p = sched_aux(s, o_seen + n);
    if (p == NULL)
        return NULL;
    rt_t *rt = (rt_t *)(void *)p;
    memset(rt, 0, sizeof(*rt));
    rt->ip_off = (uint64_t *)(void *)(p + o_ip);
    rt->steps = (rt_step_t *)(void *)(p + o_steps);
    rt->el = (rt_el_t *)(void *)(p + o_el);
    rt->seen = (uint8_t *)(p + o_seen);
    rt->cap_el = cap_el;
    rt->nsteps = nsteps;
    return rt;
}

int rt_build(sched_t *s, const rt_geom_t *g, const rt_call_t *c)
{
    uint32_t n = g->n, me = g->me, B = rt_log2up(n);
    uint8_t src = c->in_place ? SCHED_BUF_RECV : SCHED_BUF_SEND;
    const size_t *sc = c->in_place ? c->rcounts : c->scounts,
                 *sd = c->in_place ? c->rdispls : c->sdispls;
    uint64_t fixed;
    rt_t *rt;
    int rc = 0;

    sched_reset(s);
    /* What one rank can hold at once: one element per distance (after step
     * b, those from the ranks behind it for the ranks ahead), n at most. */
    if (n > UINT32_MAX / 2)
        return ARCOLL_ERR_NOMEM;
    rt = rt_alloc(s, n, B, n);
    if (rt == NULL)
        return ARCOLL_ERR_NOMEM;
    rt->n = n;
    rt->me = me;
    rt->thresh = c->thresh < RT_STUB ? c->thresh : RT_STUB - 1;
    rt->in_place = c->in_place;
    rt->phases = c->phases == 1 ? 1 : 2;
    rt->bad_from = RT_NONE;
    rt->srcbuf = src;
    rt->scounts = sc;
    rt->sdispls = sd;
    rt->rcounts = c->rcounts;
    rt->rdispls = c->rdispls;
    rt_steps(rt);
    memset(rt->seen, 0, n);

    /* TMP: the sizes out and in of every step, then (in place) a copy of
     * each block that goes direct (a direct receive overwrites the block for
     * the same peer), then the packed messages of the call. */
    fixed = 16ull * rt->nsteps;
    for (uint32_t d = 0; d < n; d++) {
        rt->ip_off[d] = fixed;
        if (c->in_place && d != me && sc[d] > rt->thresh)
            fixed += sc[d];
    }
    s->tmp_len = fixed;
    rt->cursor = fixed;

    /* Direct blocks: one message each way, outside the rounds (nothing waits
     * for them but the call's end). */
    for (uint32_t d = 0; rc == 0 && d < n; d++)
        if (d != me && sc[d] > rt->thresh) {
            sched_seg_t seg = {.off = c->in_place ? rt->ip_off[d] : sd[d],
                               .len = sc[d],
                               .buf = c->in_place ? SCHED_BUF_TMP : SCHED_BUF_SEND};
            rc = sched_add_send(s, 0, d, &seg, 1);
            if (rc == 0)
                s->send[s->nsend - 1].unordered = 1;
            if (rc == 0 && c->in_place)
                rc = sched_add_local(s, 0, &seg, 1,
                                     &(sched_seg_t){.off = sd[d], .len = sc[d], .buf = src}, 1);
        }
    for (uint32_t q = 0; rc == 0 && q < n; q++)
        if (q != me && c->rcounts[q] > rt->thresh) {
            sched_seg_t seg = {.off = c->rdispls[q], .len = c->rcounts[q], .buf = SCHED_BUF_RECV};
            rc = sched_add_recv(s, 0, q, SCHED_COPY, &seg, 1);
            if (rc == 0)
                s->recv[s->nrecv - 1].unordered = 1;
        }
    /* Routed steps: the size (8 bytes), then the packed message (sized by the
     * hook); or the message alone, open at the receiver. */
    for (uint32_t st = 0; rc == 0 && st < rt->nsteps; st++) {
        rt_step_t *p = &rt->steps[st];
        uint32_t round = rt->phases * st;
        sched_seg_t size = {.off = rt_size_out(st), .len = 8, .buf = SCHED_BUF_TMP},
                    data = {.off = 0, .len = 0, .buf = SCHED_BUF_TMP};
        if (p->to == RT_NONE)
            continue;
        if (rt->phases == 2)
            rc = sched_add_send(s, round++, p->to, &size, 1);
        p->send_data = s->nsend;
        if (rc == 0)
            rc = sched_add_send(s, round, p->to, &data, 1);
    }
    for (uint32_t st = 0; rc == 0 && st < rt->nsteps; st++) {
        rt_step_t *p = &rt->steps[st];
        uint32_t round = rt->phases * st;
        sched_seg_t size = {.off = rt_size_in(st), .len = 8, .buf = SCHED_BUF_TMP},
                    data = {.off = 0, .len = RT_HEAD, .buf = SCHED_BUF_TMP};
        if (p->from == RT_NONE)
            continue;
        if (rt->phases == 2)
            rc = sched_add_recv(s, round++, p->from, SCHED_COPY, &size, 1);
        p->recv_data = s->nrecv;
        if (rc == 0)
            rc = sched_add_recv(s, round, p->from, SCHED_COPY, &data, 1);
        if (rc == 0)
            s->recv[p->recv_data].open = rt->phases == 1;
    }
    if (rc == 0 && !c->in_place && sc[me] > 0) {
        sched_seg_t from = {.off = sd[me], .len = sc[me], .buf = SCHED_BUF_SEND},
                    to = {.off = c->rdispls[me], .len = sc[me], .buf = SCHED_BUF_RECV};
        rc = sched_add_local(s, 0, &to, 1, &from, 1);
    }
    if (rc != 0)
        return ARCOLL_ERR_NOMEM;
    /* Every rank runs every step's hooks, with messages or not: the last
     * hook places what arrived. */
    s->nrounds = rt->phases * rt->nsteps;
    s->hook = rt_round;
    s->on_size = rt->phases == 1 ? rt_sized : NULL;
    s->hook_arg = rt;

    /* The table starts with this rank's own blocks for everyone else. */
    for (uint32_t d = 0; d < n; d++) {
        rt_el_t *e;
        if (d == me)
            continue;
        e = &rt->el[rt->nel++];
        e->src = me;
        e->dst = d;
        if (sc[d] > rt->thresh) {
            e->len = 0;
            e->flags = RT_FSTUB;
        } else {
            e->len = (uint32_t)sc[d];
            e->flags = src;
        }
        e->off = sd[d];
    }
    return 0;
}

static int rt_mismatch(rt_t *rt, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Keep the first disagreement's description: the call ends with MISMATCH. */
static int rt_mismatch(rt_t *rt, const char *fmt, ...)
{
    va_list ap;

    if (!rt->bad) {
        va_start(ap, fmt);
        vsnprintf(rt->why, sizeof(rt->why), fmt, ap);
        va_end(ap);
    }
    rt->bad = 1;
    return ARCOLL_ERR_MISMATCH;
}

/* Does element e leave this rank in step st? */
static int rt_selected(const rt_t *rt, const rt_step_t *p, const rt_el_t *e)
{
    return (((e->dst + rt->n - rt->me) % rt->n) >> p->bit) & 1u;
}

/* Pack the elements leaving in step st into the message [count][entries][data]. */
static int rt_pack(rt_t *rt, sched_t *s, sched_mem_t *m, uint32_t st)
{
    rt_step_t *p = &rt->steps[st];
    uint64_t need = RT_HEAD, at;
    uint32_t count = 0, keep = 0;
    char *out, *ent, *data;
    int rc;

    if (p->to == RT_NONE)
        return 0;
    for (uint32_t i = 0; i < rt->nel; i++)
        if (rt_selected(rt, p, &rt->el[i])) {
            count++;
            need += RT_ENTRY + rt->el[i].len;
        }
    rc = sched_mem_tmp(m, rt->cursor + need); /* before anything changes (INPROGRESS) */
    if (rc != ARCOLL_OK)
        return rc;
    at = rt->cursor;
    rt->cursor += need;
    out = m->buf[SCHED_BUF_TMP] + at;
    memcpy(out, &count, 4);
    ent = out + RT_HEAD;
    data = ent + (size_t)count * RT_ENTRY;
    for (uint32_t i = 0; i < rt->nel; i++) {
        rt_el_t *e = &rt->el[i];
        uint32_t w[3] = {e->src, e->dst, e->flags & RT_FSTUB ? RT_STUB : e->len};
        if (!rt_selected(rt, p, e)) {
            rt->el[keep++] = *e;
            continue;
        }
        memcpy(ent, w, sizeof(w));
        ent += RT_ENTRY;
        if (e->len) {
            m->copied += e->len;
            memcpy(data, m->buf[e->flags & RT_BUFMSK] + e->off, e->len);
            data += e->len;
        }
    }
    rt->nel = keep;
    memcpy(m->buf[SCHED_BUF_TMP] + rt_size_out(st), &need, 8);
    s->segs[s->send[p->send_data].seg] =
        (sched_seg_t){.off = at, .len = need, .buf = SCHED_BUF_TMP};
    return 0;
}

/* Step p's message is size bytes: make room for it in TMP. */
static int rt_land(rt_t *rt, sched_t *s, sched_mem_t *m, rt_step_t *p, uint32_t st, uint64_t size)
{
    uint64_t most = RT_HEAD + (uint64_t)rt->cap_el * (RT_ENTRY + rt->thresh), take = size;
    int rc;

    if (size < RT_HEAD || size > most)
        take = RT_HEAD;                       /* it will be rejected: expect the minimum */
    rc = sched_mem_tmp(m, rt->cursor + take); /* before anything changes (INPROGRESS) */
    if (rc != ARCOLL_OK)
        return rc;
    s->segs[s->recv[p->recv_data].seg] =
        (sched_seg_t){.off = rt->cursor, .len = take, .buf = SCHED_BUF_TMP};
    p->recv_at = rt->cursor;
    rt->cursor += take;
    if (take != size && !rt->bad)
        return rt_mismatch(rt, "team rank %u announced a %llu-byte message in step %u", p->from,
                           (unsigned long long)size, st);
    return ARCOLL_OK;
}

/* Step st's size has landed (two-phase). */
static int rt_size(rt_t *rt, sched_t *s, sched_mem_t *m, uint32_t st)
{
    rt_step_t *p = &rt->steps[st];
    uint64_t size;

    if (p->from == RT_NONE)
        return 0;
    memcpy(&size, m->buf[SCHED_BUF_TMP] + rt_size_in(st), 8);
    return rt_land(rt, s, m, p, st, rt->bad ? RT_HEAD : size);
}

int rt_sized(void *arg, sched_t *s, sched_mem_t *m, uint32_t idx, uint64_t len)
{
    rt_t *rt = arg;

    for (uint32_t st = 0; st < rt->nsteps; st++)
        if (rt->steps[st].recv_data == idx)
            return rt_land(rt, s, m, &rt->steps[st], st, len);
    return ARCOLL_ERR_INVALID;
}

/* Step st's message has landed: its entries join the table, pointing at
 * their bytes where they landed. */
static int rt_absorb(rt_t *rt, sched_t *s, sched_mem_t *m, uint32_t st)
{
    rt_step_t *p = &rt->steps[st];
    uint64_t size, off, at;
    uint32_t count;
    const char *msg;

    if (p->from == RT_NONE || rt->bad)
        return 0;
    size = s->segs[s->recv[p->recv_data].seg].len;
    at = p->recv_at;
    msg = m->buf[SCHED_BUF_TMP] + at;
    memcpy(&count, msg, 4);
    /* Whatever goes wrong below, the peer's stream is not what we expect. */
    if (!rt->bad)
        rt->bad_from = p->from;
    if (count > rt->cap_el - rt->nel || RT_HEAD + (uint64_t)count * RT_ENTRY > size)
        return rt_mismatch(rt, "team rank %u sent %u elements in step %u", p->from, count, st);
    off = at + RT_HEAD + (uint64_t)count * RT_ENTRY;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t w[3];
        rt_el_t *e = &rt->el[rt->nel];
        memcpy(w, msg + RT_HEAD + (size_t)i * RT_ENTRY, sizeof(w));
        if (w[0] >= rt->n || w[1] >= rt->n || w[0] == w[1] ||
            (w[2] != RT_STUB && (w[2] > rt->thresh || off + w[2] > at + size)))
            return rt_mismatch(rt, "team rank %u sent a malformed element (%u) in step %u", p->from,
                               i, st);
        e->src = w[0];
        e->dst = w[1];
        e->len = w[2] == RT_STUB ? 0 : w[2];
        e->flags = w[2] == RT_STUB ? RT_FSTUB : SCHED_BUF_TMP;
        e->off = off;
        off += e->len;
        rt->nel++;
    }
    if (off != at + size)
        return rt_mismatch(rt, "team rank %u's message of step %u does not add up", p->from, st);
    if (!rt->bad)
        rt->bad_from = RT_NONE;
    return 0;
}

/* The last hook: every element left here is for this rank; put each where
 * the receive counts say, after checking that its path and length agree.
 * A block whose path disagrees marks its source for rejection (the caller
 * stops that stream: a direct receive that will never come, or a direct
 * send nobody reads). */
static int rt_place(rt_t *rt, sched_mem_t *m)
{
    int rc = 0;

    if (rt->bad)
        return 0;
    for (uint32_t i = 0; i < rt->nel; i++) {
        const rt_el_t *e = &rt->el[i];
        size_t want = rt->rcounts[e->src];
        int stub = (e->flags & RT_FSTUB) != 0;
        if (e->dst != rt->me)
            return rt_mismatch(rt,
                               "a block from team rank %u for team rank %u ended at team "
                               "rank %u: ranks disagree on the team's shape",
                               e->src, e->dst, rt->me);
        if (rt->seen[e->src])
            return rt_mismatch(rt, "team rank %u's block reached team rank %u twice", e->src,
                               rt->me);
        rt->seen[e->src] = 1;
        if (stub != (want > rt->thresh)) {
            rt->seen[e->src] = 2;
            rc =
                rt_mismatch(rt, "team rank %u sent its block %s where this rank expects %zu bytes",
                            e->src, stub ? "direct (more than the routing limit)" : "routed", want);
        } else if (!stub && want != e->len) {
            rc = rt_mismatch(rt, "team rank %u sent %u bytes where this rank expects %zu", e->src,
                             e->len, want);
        } else if (e->len) {
            m->copied += e->len;
            memcpy(m->buf[SCHED_BUF_RECV] + rt->rdispls[e->src],
                   m->buf[e->flags & RT_BUFMSK] + e->off, e->len);
        }
    }
    for (uint32_t q = 0; rc == 0 && q < rt->n; q++)
        if (q != rt->me && !rt->seen[q])
            rc = rt_mismatch(rt, "no block from team rank %u reached this rank", q);
    return rc;
}

int rt_rejects(const rt_t *rt, uint32_t q, uint32_t round)
{
    return q == rt->bad_from || (round == rt->phases * rt->nsteps && rt->seen[q] == 2);
}

int rt_round(void *arg, sched_t *s, sched_mem_t *m, uint32_t round)
{
    rt_t *rt = arg;
    uint32_t st = round / rt->phases;
    int rc = 0, rc2;

    if (round % rt->phases)
        return rt_size(rt, s, m, st);
    /* A hook that must wait (INPROGRESS) runs again: absorb once. */
    if (st > 0 && rt->absorbed < st) {
        rt->absorbed = st;
        rc = rt_absorb(rt, s, m, st - 1);
    }
    if (rc != 0 && rc != ARCOLL_ERR_MISMATCH)
        return rc;
    rc2 = st == rt->nsteps ? rt_place(rt, m) : rt_pack(rt, s, m, st);
    return rc2 != 0 ? rc2 : rc;
}

const char *rt_why(const rt_t *rt)
{
    return rt->why;
}

int rt_failed(const rt_t *rt)
{
    return rt->bad;
}

void rt_poison(rt_t *rt)
{
    rt->bad = 1;
}
