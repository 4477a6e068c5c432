/*
 * The schedule simulator of the unit tests (test_rd_sched.c, test_mnco_sched.c):
 * all n ranks' schedules (engine/sched.h) run together in memory on real buffers
 * by a seeded random-order executor that also checks sched.h's rules (and
 * rd_sched.h's E1/E2); the tests then check the results byte for byte.
 *
 * The executor repeatedly runs one runnable action of any rank: a send whose
 * lower-round receives are applied and whose round's local copies have run
 * (sched.h rule 1; its payload is captured then, and compared again at its
 * local completion, which happens at a random later step), a receive whose
 * matching send was issued (REDUCE = wrapping int32 or int64 sum, so the
 * order cannot matter), or a local copy whose round's dependencies are met;
 * round-0 local copies run first (E2).
 */
#ifndef ARCOLL_TESTS_UNIT_SCHED_SIM_H
#define ARCOLL_TESTS_UNIT_SCHED_SIM_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "arcoll.h"
#include "engine/sched.h"

/* ---- random numbers ---------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng64(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static uint32_t rng_below(uint64_t k)
{
    return (uint32_t)(rng64() % k);
}

/* The input byte k of rank r: a fixed function, so references need no copy. */
static uint8_t input_byte(uint32_t r, uint64_t k, uint32_t salt)
{
    uint64_t x = ((uint64_t)r << 40) ^ (k * 0x9e3779b97f4a7c15ULL) ^ salt;

    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 32;
    return (uint8_t)x;
}

/* ---- the simulator ----------------------------------------------------- */

/* Reference of the reductions: the element at byte_off of the vector every
 * rank contributes (input_byte), summed over n ranks, wrapping. */
static inline uint64_t sim_ref_elem(uint32_t n, uint64_t byte_off, uint64_t elem, uint32_t salt)
{
    uint64_t sum = 0;

    for (uint32_t r = 0; r < n; r++) {
        uint64_t v = 0;
        for (uint64_t b = 0; b < elem; b++)
            v |= (uint64_t)input_byte(r, byte_off + b, salt) << (8 * b);
        sum += v;
    }
    return elem == 4 ? (uint32_t)sum : sum;
}

/* The little-endian element of elem bytes at p. */
static inline uint64_t sim_get_elem(const uint8_t *p, uint64_t elem)
{
    uint64_t v = 0;

    for (uint64_t b = 0; b < elem; b++)
        v |= (uint64_t)p[b] << (8 * b);
    return v;
}

enum { ST_IDLE = 0, ST_PENDING = 1, ST_DONE = 2 };
enum { ACT_SEND, ACT_RECV, ACT_COMPLETE, ACT_LOCAL };
enum { ACC_SR, ACC_LR, ACC_RW, ACC_LW }; /* send read, local read, receive write, local write */

typedef struct sim_rank {
    sched_t s;
    uint8_t *buf[SCHED_NBUF];
    uint64_t blen[SCHED_NBUF];
    uint8_t *send_st, *recv_done, *local_done;
    uint8_t **snap;
    uint32_t *send_match, *recv_match; /* the other end's index */
    uint32_t *recv_left, *send_left;   /* per round: not applied / not complete */
    uint32_t *local_left;              /* per round (nrounds: the last ones): not run */
    uint32_t rfront, sfront;           /* first round with an unapplied receive / incomplete send */
    uint32_t lfront;                   /* first round with a local copy not run */
    uint32_t next_send, next_local, first_busy;
    uint64_t sent, received;
} sim_rank_t;

typedef struct act {
    uint8_t kind;
    uint32_t rank, idx;
} act_t;

typedef struct sim {
    uint32_t n;
    uint64_t elem; /* REDUCE element: 4 or 8; 0 if none expected */
    int no_static; /* skip the static rule checks (to test the dynamic ones) */
    int running;   /* the round-0 local copies of every rank have run */
    sim_rank_t *r;
    act_t *ready;
    size_t nready, cap;
    char err[512];
} sim_t;

typedef struct acc {
    uint64_t off, end;
    uint32_t round, id;
    uint8_t buf, kind, reduce;
} acc_t;

static int sim_fail(sim_t *sim, const char *fmt, ...)
{
    va_list ap;

    if (sim->err[0] == '\0') {
        va_start(ap, fmt);
        vsnprintf(sim->err, sizeof(sim->err), fmt, ap);
        va_end(ap);
    }
    return -1;
}

static void sim_init(sim_t *sim, uint32_t n, uint64_t elem)
{
    memset(sim, 0, sizeof(*sim));
    sim->n = n;
    sim->elem = elem;
    sim->r = calloc(n, sizeof(*sim->r));
    assert_non_null(sim->r);
    for (uint32_t i = 0; i < n; i++)
        sched_init(&sim->r[i].s);
}

/* Buffers of rank i: SEND and RECV of the given lengths, TMP of tmp_len. */
static void sim_alloc(sim_t *sim, uint32_t i, uint64_t send_len, uint64_t recv_len)
{
    sim_rank_t *r = &sim->r[i];

    r->blen[SCHED_BUF_SEND] = send_len;
    r->blen[SCHED_BUF_RECV] = recv_len;
    r->blen[SCHED_BUF_TMP] = r->s.tmp_len;
    for (int b = 0; b < SCHED_NBUF; b++) {
        r->buf[b] = malloc(r->blen[b] + 1);
        assert_non_null(r->buf[b]);
        memset(r->buf[b], 0xee, r->blen[b] + 1);
    }
}

static void sim_free(sim_t *sim)
{
    for (uint32_t i = 0; i < sim->n; i++) {
        sim_rank_t *r = &sim->r[i];
        if (r->snap != NULL)
            for (uint32_t k = 0; k < r->s.nsend; k++)
                free(r->snap[k]);
        free(r->snap);
        free(r->send_st);
        free(r->recv_done);
        free(r->local_done);
        free(r->send_match);
        free(r->recv_match);
        free(r->recv_left);
        free(r->send_left);
        free(r->local_left);
        for (int b = 0; b < SCHED_NBUF; b++)
            free(r->buf[b]);
        sched_free(&r->s);
    }
    free(sim->r);
    free(sim->ready);
}

static int seg_overlap(const sched_seg_t *a, const sched_seg_t *b)
{
    return a->buf == b->buf && a->len > 0 && b->len > 0 && a->off < b->off + b->len &&
           b->off < a->off + a->len;
}

static int msgs_overlap(const sched_t *s, const sched_msg_t *a, uint32_t aseg, uint32_t anseg,
                        const sched_msg_t *b, uint32_t bseg, uint32_t bnseg)
{
    (void)a;
    (void)b;
    for (uint32_t i = 0; i < anseg; i++)
        for (uint32_t j = 0; j < bnseg; j++)
            if (seg_overlap(&s->segs[aseg + i], &s->segs[bseg + j]))
                return 1;
    return 0;
}

/* May these two overlapping accesses of one rank coexist (sched.h rules 1,
 * 3, 4 and rd_sched.h E1, E2)? a->kind <= b->kind. */
static int acc_ok(const acc_t *a, const acc_t *b)
{
    uint32_t lo = a->round < b->round ? a->round : b->round;
    uint32_t hi = a->round < b->round ? b->round : a->round;

    if (a->kind == ACC_SR && (b->kind == ACC_SR || b->kind == ACC_LR))
        return 1;
    if (a->kind == ACC_LR && b->kind == ACC_LR)
        return 1;
    if (a->id == b->id)
        return 0; /* one message's segments overlap, or a copy onto itself */
    if (a->kind == ACC_SR && b->kind == ACC_RW)
        return a->round > b->round; /* read after the write's round: rule 1 */
    if (a->kind == ACC_SR && b->kind == ACC_LW)
        return 1; /* the copy first if its round is not later (rule 1), else after (rule 4) */
    if (a->kind == ACC_LR && b->kind == ACC_RW)
        return a->round == 0 || b->round < a->round;
    if (a->kind == ACC_RW && b->kind == ACC_RW)
        return a->reduce && b->reduce; /* E1 */
    if (a->kind == ACC_RW && b->kind == ACC_LW)
        return b->round == 0 || a->round < b->round;
    /* two local copies: ordered only if one runs at the start (E2) */
    return lo == 0 && hi > 0;
}

static int acc_cmp(const void *x, const void *y)
{
    const acc_t *a = x, *b = y;

    if (a->buf != b->buf)
        return a->buf < b->buf ? -1 : 1;
    if (a->off != b->off)
        return a->off < b->off ? -1 : 1;
    return 0;
}

static const char *const acc_name[] = {"send", "local copy source", "receive", "local copy dest"};

static void acc_push(acc_t *v, size_t *nv, const sched_t *s, uint32_t seg, uint32_t nseg,
                     uint8_t kind, uint32_t round, uint32_t id, uint8_t reduce)
{
    for (uint32_t i = 0; i < nseg; i++) {
        const sched_seg_t *g = &s->segs[seg + i];
        if (g->len == 0)
            continue;
        v[(*nv)++] = (acc_t){g->off, g->off + g->len, round, id, g->buf, kind, reduce};
    }
}

/* Every overlapping pair of accesses of rank i, by a sweep over sorted ranges. */
static int sim_check_overlaps(sim_t *sim, uint32_t i)
{
    const sched_t *s = &sim->r[i].s;
    size_t nv = 0, nact = 0;
    acc_t *v = malloc(sizeof(*v) * (2 * (size_t)s->nsegs + 1));
    size_t *act = malloc(sizeof(*act) * (2 * (size_t)s->nsegs + 1));
    int rc = 0;

    assert_non_null(v);
    assert_non_null(act);
    for (uint32_t k = 0; k < s->nsend; k++)
        acc_push(v, &nv, s, s->send[k].seg, s->send[k].nseg, ACC_SR, s->send[k].round, k, 0);
    for (uint32_t k = 0; k < s->nrecv; k++)
        acc_push(v, &nv, s, s->recv[k].seg, s->recv[k].nseg, ACC_RW, s->recv[k].round, s->nsend + k,
                 s->recv[k].action == SCHED_REDUCE);
    for (uint32_t k = 0; k < s->nlocal; k++) {
        uint32_t id = s->nsend + s->nrecv + k;
        acc_push(v, &nv, s, s->local[k].seg, s->local[k].nseg, ACC_LW, s->local[k].round, id, 0);
        acc_push(v, &nv, s, sched_src_seg(&s->local[k]), s->local[k].src_nseg, ACC_LR,
                 s->local[k].round, id, 0);
    }
    qsort(v, nv, sizeof(*v), acc_cmp);
    for (size_t x = 0; x < nv && rc == 0; x++) {
        size_t keep = 0;
        for (size_t a = 0; a < nact; a++)
            if (v[act[a]].buf == v[x].buf && v[act[a]].end > v[x].off)
                act[keep++] = act[a];
        nact = keep;
        for (size_t a = 0; a < nact && rc == 0; a++) {
            const acc_t *p = &v[act[a]], *q = &v[x];
            if (p->kind > q->kind) {
                const acc_t *t = p;
                p = q;
                q = t;
            }
            if (!acc_ok(p, q))
                rc = sim_fail(sim,
                              "rank %u: %s (round %u) and %s (round %u) overlap in buffer %u "
                              "at %llu",
                              i, acc_name[p->kind], p->round, acc_name[q->kind], q->round, q->buf,
                              (unsigned long long)q->off);
        }
        act[nact++] = x;
    }
    free(act);
    free(v);
    return rc;
}

static int sim_check_segs(sim_t *sim, uint32_t i, const sched_msg_t *m, uint32_t seg, uint32_t nseg,
                          int reduce)
{
    const sim_rank_t *r = &sim->r[i];

    (void)m;
    for (uint32_t k = 0; k < nseg; k++) {
        const sched_seg_t *g = &r->s.segs[seg + k];
        if (g->buf >= SCHED_NBUF || g->off + g->len < g->off || g->off + g->len > r->blen[g->buf])
            return sim_fail(sim, "rank %u: segment %llu+%llu outside buffer %u (%llu bytes)", i,
                            (unsigned long long)g->off, (unsigned long long)g->len, g->buf,
                            (unsigned long long)r->blen[g->buf < SCHED_NBUF ? g->buf : 0]);
        if (reduce && (sim->elem == 0 || g->len % sim->elem != 0 || g->off % sim->elem != 0))
            return sim_fail(sim, "rank %u: REDUCE segment %llu+%llu not element aligned", i,
                            (unsigned long long)g->off, (unsigned long long)g->len);
    }
    return 0;
}

/* Form, bounds, and stream matching: receive k of rank i from p is p's
 * o-th send to i if it is i's o-th receive from p. */
static int sim_check_static(sim_t *sim)
{
    uint32_t n = sim->n;
    uint32_t *cnt = calloc((size_t)n * n, sizeof(*cnt));
    uint32_t **list = calloc(n, sizeof(*list));
    uint32_t *fill = calloc((size_t)n * n, sizeof(*fill));
    int rc = 0;

    assert_true(cnt != NULL && list != NULL && fill != NULL);
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        sim_rank_t *r = &sim->r[i];
        const sched_t *s = &r->s;
        for (uint32_t k = 0; k < s->nsend && rc == 0; k++) {
            const sched_msg_t *m = &s->send[k];
            if (m->peer >= n || m->peer == i || m->round >= s->nrounds ||
                (k > 0 && m->round < s->send[k - 1].round))
                rc = sim_fail(sim, "rank %u: bad send %u (peer %u round %u)", i, k, m->peer,
                              m->round);
            else
                rc = sim_check_segs(sim, i, m, m->seg, m->nseg, 0);
            if (rc == 0)
                cnt[(size_t)i * n + m->peer]++;
        }
        for (uint32_t k = 0; k < s->nrecv && rc == 0; k++) {
            const sched_msg_t *m = &s->recv[k];
            if (m->peer >= n || m->peer == i || m->round >= s->nrounds ||
                (k > 0 && m->round < s->recv[k - 1].round) ||
                (m->action != SCHED_COPY && m->action != SCHED_REDUCE))
                rc = sim_fail(sim, "rank %u: bad receive %u (peer %u round %u)", i, k, m->peer,
                              m->round);
            else
                rc = sim_check_segs(sim, i, m, m->seg, m->nseg, m->action == SCHED_REDUCE);
        }
        for (uint32_t k = 0; k < s->nlocal && rc == 0; k++) {
            const sched_msg_t *m = &s->local[k];
            uint64_t dl = sched_msg_len(s, m), sl = 0;
            for (uint32_t g = 0; g < m->src_nseg; g++)
                sl += s->segs[sched_src_seg(m) + g].len;
            if (dl != sl || (k > 0 && m->round < s->local[k - 1].round))
                rc = sim_fail(sim, "rank %u: local copy %u: %llu bytes from %llu", i, k,
                              (unsigned long long)dl, (unsigned long long)sl);
            if (rc == 0)
                rc = sim_check_segs(sim, i, m, m->seg, m->nseg, 0);
            if (rc == 0)
                rc = sim_check_segs(sim, i, m, sched_src_seg(m), m->src_nseg, 0);
        }
        if (rc == 0 && !sim->no_static)
            rc = sim_check_overlaps(sim, i);
    }
    /* Per sender: its sends grouped by peer, in list order. */
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        const sched_t *s = &sim->r[i].s;
        uint32_t *start = fill + (size_t)i * n, acc = 0;
        list[i] = malloc(sizeof(uint32_t) * (s->nsend + 1));
        assert_non_null(list[i]);
        for (uint32_t p = 0; p < n; p++) {
            start[p] = acc;
            acc += cnt[(size_t)i * n + p];
        }
        for (uint32_t k = 0; k < s->nsend; k++)
            list[i][start[s->send[k].peer]++] = k;
        for (uint32_t p = 0; p < n; p++)
            start[p] -= cnt[(size_t)i * n + p];
    }
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        sim_rank_t *r = &sim->r[i];
        uint32_t *seen = calloc(n, sizeof(*seen));
        assert_non_null(seen);
        for (uint32_t k = 0; k < r->s.nrecv && rc == 0; k++) {
            uint32_t p = r->s.recv[k].peer, o = seen[p]++;
            if (o >= cnt[(size_t)p * n + i]) {
                rc = sim_fail(sim, "rank %u: receive %u from %u has no matching send", i, k, p);
                break;
            }
            r->recv_match[k] = list[p][fill[(size_t)p * n + i] + o];
            sim->r[p].send_match[r->recv_match[k]] = k;
        }
        for (uint32_t p = 0; p < n && rc == 0; p++)
            if (seen[p] != cnt[(size_t)p * n + i])
                rc = sim_fail(sim, "%u message(s) from %u to %u never received",
                              cnt[(size_t)p * n + i] - seen[p], p, i);
        free(seen);
    }
    for (uint32_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
    free(fill);
    free(cnt);
    return rc;
}

static void sim_push(sim_t *sim, uint8_t kind, uint32_t rank, uint32_t idx)
{
    if (sim->nready == sim->cap) {
        sim->cap = sim->cap ? 2 * sim->cap : 256;
        sim->ready = realloc(sim->ready, sizeof(*sim->ready) * sim->cap);
        assert_non_null(sim->ready);
    }
    sim->ready[sim->nready++] = (act_t){kind, rank, idx};
}

/* Queue what rank i's fronts now allow. */
static void sim_wake(sim_t *sim, uint32_t i)
{
    sim_rank_t *r = &sim->r[i];
    const sched_t *s = &r->s;

    while (r->rfront < s->nrounds && r->recv_left[r->rfront] == 0)
        r->rfront++;
    while (r->sfront < s->nrounds && r->send_left[r->sfront] == 0)
        r->sfront++;
    while (r->lfront < s->nrounds && r->local_left[r->lfront] == 0)
        r->lfront++;
    while (r->next_send < s->nsend && s->send[r->next_send].round <= r->rfront &&
           s->send[r->next_send].round < r->lfront)
        sim_push(sim, ACT_SEND, i, r->next_send++);
    while (r->next_local < s->nlocal) {
        uint32_t l = s->local[r->next_local].round;
        if (l > s->nrounds)
            l = s->nrounds;
        if (r->rfront < l || r->sfront < l)
            break;
        sim_push(sim, ACT_LOCAL, i, r->next_local++);
    }
}

/* Gather a message's bytes from rank i's buffers. */
static void sim_gather(sim_rank_t *r, uint32_t seg, uint32_t nseg, uint8_t *out)
{
    for (uint32_t k = 0; k < nseg; k++) {
        const sched_seg_t *g = &r->s.segs[seg + k];
        memcpy(out, r->buf[g->buf] + g->off, g->len);
        out += g->len;
    }
}

static void reduce_into(uint8_t *dst, const uint8_t *src, uint64_t len, uint64_t elem)
{
    for (uint64_t k = 0; k < len; k += elem) {
        if (elem == 8) {
            uint64_t a, b;
            memcpy(&a, dst + k, 8);
            memcpy(&b, src + k, 8);
            a += b;
            memcpy(dst + k, &a, 8);
        } else {
            uint32_t a, b;
            memcpy(&a, dst + k, 4);
            memcpy(&b, src + k, 4);
            a += b;
            memcpy(dst + k, &a, 4);
        }
    }
}

/* Does any send of rank i that may still read its buffers (pending, or not
 * issued yet with round <= round) overlap these segments? */
static int sim_hits_send(sim_t *sim, uint32_t i, uint32_t seg, uint32_t nseg, uint32_t round,
                         int any_round)
{
    sim_rank_t *r = &sim->r[i];
    const sched_t *s = &r->s;

    while (r->first_busy < s->nsend && r->send_st[r->first_busy] == ST_DONE)
        r->first_busy++;
    for (uint32_t k = r->first_busy; k < s->nsend; k++) {
        const sched_msg_t *m = &s->send[k];
        if (!any_round && m->round > round)
            break;
        if (r->send_st[k] == ST_DONE || (any_round && r->send_st[k] == ST_IDLE))
            continue;
        if (msgs_overlap(s, m, m->seg, m->nseg, m, seg, nseg))
            return 1;
    }
    return 0;
}

static int sim_do(sim_t *sim, act_t a)
{
    sim_rank_t *r = &sim->r[a.rank];
    const sched_t *s = &r->s;

    switch (a.kind) {
    case ACT_SEND: {
        const sched_msg_t *m = &s->send[a.idx];
        uint64_t len = sched_msg_len(s, m);
        if (r->rfront < m->round)
            return sim_fail(sim, "rank %u: send %u before its receives", a.rank, a.idx);
        r->snap[a.idx] = malloc(len + 1);
        assert_non_null(r->snap[a.idx]);
        sim_gather(r, m->seg, m->nseg, r->snap[a.idx]);
        r->send_st[a.idx] = ST_PENDING;
        r->sent += len;
        sim_push(sim, ACT_COMPLETE, a.rank, a.idx);
        sim_push(sim, ACT_RECV, m->peer, r->send_match[a.idx]);
        return 0;
    }
    case ACT_COMPLETE: {
        const sched_msg_t *m = &s->send[a.idx];
        uint64_t len = sched_msg_len(s, m);
        uint8_t *now = malloc(len + 1);
        int same;
        assert_non_null(now);
        sim_gather(r, m->seg, m->nseg, now);
        same = memcmp(now, r->snap[a.idx], len) == 0;
        free(now);
        if (!same)
            return sim_fail(sim, "rank %u: send %u (round %u) changed before local completion",
                            a.rank, a.idx, m->round);
        r->send_st[a.idx] = ST_DONE;
        r->send_left[m->round]--;
        sim_wake(sim, a.rank);
        return 0;
    }
    case ACT_RECV: {
        const sched_msg_t *m = &s->recv[a.idx];
        sim_rank_t *from = &sim->r[m->peer];
        uint32_t si = r->recv_match[a.idx];
        uint64_t len = sched_msg_len(s, m), slen = sched_msg_len(&from->s, &from->s.send[si]);
        const uint8_t *src = from->snap[si];
        if (len != slen)
            return sim_fail(
                sim, "rank %u: receive %u from %u (round %u) is %llu bytes, the send %llu", a.rank,
                a.idx, m->peer, m->round, (unsigned long long)len, (unsigned long long)slen);
        if (sim_hits_send(sim, a.rank, m->seg, m->nseg, m->round, 0))
            return sim_fail(sim,
                            "rank %u: receive %u (round %u) writes bytes a send may be reading",
                            a.rank, a.idx, m->round);
        for (uint32_t k = 0; k < m->nseg; k++) {
            const sched_seg_t *g = &s->segs[m->seg + k];
            if (m->action == SCHED_REDUCE)
                reduce_into(r->buf[g->buf] + g->off, src, g->len, sim->elem);
            else
                memcpy(r->buf[g->buf] + g->off, src, g->len);
            src += g->len;
        }
        r->recv_done[a.idx] = 1;
        r->received += len;
        r->recv_left[m->round]--;
        sim_wake(sim, a.rank);
        return 0;
    }
    default: {
        const sched_msg_t *m = &s->local[a.idx];
        uint64_t len = sched_msg_len(s, m);
        uint8_t *tmp = malloc(len + 1), *p = tmp;
        assert_non_null(tmp);
        if (m->round > 0 && sim_hits_send(sim, a.rank, m->seg, m->nseg, 0, 1)) {
            free(tmp);
            return sim_fail(sim, "rank %u: local copy %u writes bytes a pending send reads", a.rank,
                            a.idx);
        }
        sim_gather(r, sched_src_seg(m), m->src_nseg, tmp);
        for (uint32_t k = 0; k < m->nseg; k++) {
            const sched_seg_t *g = &s->segs[m->seg + k];
            memcpy(r->buf[g->buf] + g->off, p, g->len);
            p += g->len;
        }
        free(tmp);
        r->local_done[a.idx] = 1;
        r->local_left[m->round < s->nrounds ? m->round : s->nrounds]--;
        if (sim->running) /* not among the first copies (E2): they wake no one */
            sim_wake(sim, a.rank);
        return 0;
    }
    }
}

static unsigned long sim_runs; /* executions, reported at the end */

/* Run every rank's schedule to the end in a random order; 0 or -1 (sim->err). */
static int sim_run(sim_t *sim, uint64_t seed)
{
    uint32_t n = sim->n;
    int rc;

    sim_runs++;
    rng_state = seed * 0x2545f4914f6cdd1dULL + 1;
    for (uint32_t i = 0; i < n; i++) {
        sim_rank_t *r = &sim->r[i];
        const sched_t *s = &r->s;
        r->send_st = calloc(s->nsend + 1, 1);
        r->recv_done = calloc(s->nrecv + 1, 1);
        r->local_done = calloc(s->nlocal + 1, 1);
        r->snap = calloc(s->nsend + 1, sizeof(*r->snap));
        r->send_match = calloc(s->nsend + 1, sizeof(uint32_t));
        r->recv_match = calloc(s->nrecv + 1, sizeof(uint32_t));
        r->recv_left = calloc(s->nrounds + 1, sizeof(uint32_t));
        r->send_left = calloc(s->nrounds + 1, sizeof(uint32_t));
        r->local_left = calloc(s->nrounds + 1, sizeof(uint32_t));
        assert_true(r->send_st && r->recv_done && r->local_done && r->snap && r->send_match &&
                    r->recv_match && r->recv_left && r->send_left && r->local_left);
        for (uint32_t k = 0; k < s->nsend; k++)
            r->send_left[s->send[k].round]++;
        for (uint32_t k = 0; k < s->nrecv; k++)
            r->recv_left[s->recv[k].round]++;
        for (uint32_t k = 0; k < s->nlocal; k++)
            r->local_left[s->local[k].round < s->nrounds ? s->local[k].round : s->nrounds]++;
    }
    rc = sim_check_static(sim);
    /* E2: round-0 local copies before anything else. */
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        sim_rank_t *r = &sim->r[i];
        while (rc == 0 && r->next_local < r->s.nlocal && r->s.local[r->next_local].round == 0)
            rc = sim_do(sim, (act_t){ACT_LOCAL, i, r->next_local++});
    }
    sim->running = 1;
    for (uint32_t i = 0; i < n && rc == 0; i++)
        sim_wake(sim, i);
    while (rc == 0 && sim->nready > 0) {
        uint32_t k = rng_below(sim->nready);
        act_t a = sim->ready[k];
        sim->ready[k] = sim->ready[--sim->nready];
        rc = sim_do(sim, a);
    }
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        const sim_rank_t *r = &sim->r[i];
        for (uint32_t k = 0; k < r->s.nsend && rc == 0; k++)
            if (r->send_st[k] != ST_DONE)
                rc = sim_fail(sim, "rank %u: send %u never completed (stuck)", i, k);
        for (uint32_t k = 0; k < r->s.nrecv && rc == 0; k++)
            if (!r->recv_done[k])
                rc = sim_fail(sim, "rank %u: receive %u never applied (stuck)", i, k);
        for (uint32_t k = 0; k < r->s.nlocal && rc == 0; k++)
            if (!r->local_done[k])
                rc = sim_fail(sim, "rank %u: local copy %u never ran (stuck)", i, k);
    }
    return rc;
}

#define SIM_ASSERT(sim, rc, ...)                   \
    do {                                           \
        if ((rc) != 0) {                           \
            print_error(__VA_ARGS__);              \
            fail_msg("simulator: %s", (sim)->err); \
        }                                          \
    } while (0)

#endif
