/* Unit tests of src/recdbl/rd_sched.c: all n ranks' schedules run together in
 * memory on real buffers by a seeded random-order executor that also checks
 * sched.h's rules (and rd_sched.h's E1/E2), then the results byte for byte.
 *
 * The executor repeatedly runs one runnable action of any rank: a send whose
 * lower-round receives are applied (its payload is captured then, and
 * compared again at its local completion, which happens at a random later
 * step), a receive whose matching send was issued (REDUCE = wrapping int32 or
 * int64 sum, so the order cannot matter), or a local copy whose round's
 * dependencies are met; round-0 local copies run first (E2). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "arcoll.h"
#include "recdbl/rd_sched.h"

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
    uint32_t rfront, sfront;           /* first round with an unapplied receive / incomplete send */
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
        return b->round == 0 || a->round < b->round; /* E2, rule 4 */
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
        acc_push(v, &nv, s, s->local[k].src_seg, s->local[k].src_nseg, ACC_LR, s->local[k].round,
                 id, 0);
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
                sl += s->segs[m->src_seg + g].len;
            if (dl != sl || (k > 0 && m->round < s->local[k - 1].round))
                rc = sim_fail(sim, "rank %u: local copy %u: %llu bytes from %llu", i, k,
                              (unsigned long long)dl, (unsigned long long)sl);
            if (rc == 0)
                rc = sim_check_segs(sim, i, m, m->seg, m->nseg, 0);
            if (rc == 0)
                rc = sim_check_segs(sim, i, m, m->src_seg, m->src_nseg, 0);
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
    while (r->next_send < s->nsend && s->send[r->next_send].round <= r->rfront)
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
        sim_gather(r, m->src_seg, m->src_nseg, tmp);
        for (uint32_t k = 0; k < m->nseg; k++) {
            const sched_seg_t *g = &s->segs[m->seg + k];
            memcpy(r->buf[g->buf] + g->off, p, g->len);
            p += g->len;
        }
        free(tmp);
        r->local_done[a.idx] = 1;
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
        assert_true(r->send_st && r->recv_done && r->local_done && r->snap && r->send_match &&
                    r->recv_match && r->recv_left && r->send_left);
        for (uint32_t k = 0; k < s->nsend; k++)
            r->send_left[s->send[k].round]++;
        for (uint32_t k = 0; k < s->nrecv; k++)
            r->recv_left[s->recv[k].round]++;
    }
    rc = sim_check_static(sim);
    /* E2: round-0 local copies before anything else. */
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        sim_rank_t *r = &sim->r[i];
        while (rc == 0 && r->next_local < r->s.nlocal && r->s.local[r->next_local].round == 0)
            rc = sim_do(sim, (act_t){ACT_LOCAL, i, r->next_local++});
    }
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

/* ---- collectives against references ------------------------------------ */

static const char *const vname[] = {"halving", "doubling", "ring"};

static uint32_t ilog2(uint32_t n)
{
    uint32_t l = 0;

    while ((1u << l) < n)
        l++;
    return l;
}

static int is_pow2(uint32_t n)
{
    return (n & (n - 1)) == 0;
}

static uint32_t bitrev(uint32_t x, uint32_t nbits)
{
    uint32_t r = 0;

    for (uint32_t i = 0; i < nbits; i++)
        r |= ((x >> i) & 1u) << (nbits - 1 - i);
    return r;
}

/* Did every rank's schedule send exactly `want` bytes in `rounds` rounds? */
static uint64_t total_sent(const sim_t *sim, uint32_t i)
{
    const sched_t *s = &sim->r[i].s;
    uint64_t t = 0;

    for (uint32_t k = 0; k < s->nsend; k++)
        t += sched_msg_len(s, &s->send[k]);
    return t;
}

#define SIM_ASSERT(sim, rc, ...)                   \
    do {                                           \
        if ((rc) != 0) {                           \
            print_error(__VA_ARGS__);              \
            fail_msg("simulator: %s", (sim)->err); \
        }                                          \
    } while (0)

static void check_allgatherv(int variant, uint32_t n, const uint64_t *counts,
                             const uint64_t *displs, int in_place, uint64_t seed, int regular)
{
    uint64_t recv_len = 0, total = 0;
    uint32_t salt = (uint32_t)seed;
    sim_t sim;

    for (uint32_t j = 0; j < n; j++) {
        if (displs[j] + counts[j] > recv_len)
            recv_len = displs[j] + counts[j];
        total += counts[j];
    }
    recv_len += 5; /* a tail that must stay untouched */
    sim_init(&sim, n, 0);
    for (uint32_t i = 0; i < n; i++) {
        sim_rank_t *r = &sim.r[i];
        assert_int_equal(rd_sched_allgatherv(&r->s, variant, n, i, counts, displs, in_place),
                         ARCOLL_OK);
        sim_alloc(&sim, i, in_place ? 0 : counts[i], recv_len);
        for (uint64_t k = 0; k < counts[i]; k++) {
            if (in_place)
                r->buf[SCHED_BUF_RECV][displs[i] + k] = input_byte(i, k, salt);
            else
                r->buf[SCHED_BUF_SEND][k] = input_byte(i, k, salt);
        }
    }
    SIM_ASSERT(&sim, sim_run(&sim, seed), "allgatherv %s n=%u in_place=%d seed=%llu\n",
               vname[variant], n, in_place, (unsigned long long)seed);
    for (uint32_t i = 0; i < n; i++) {
        const sim_rank_t *r = &sim.r[i];
        const uint8_t *rb = r->buf[SCHED_BUF_RECV];
        uint8_t *mark = calloc(recv_len, 1);
        assert_non_null(mark);
        for (uint32_t j = 0; j < n; j++)
            for (uint64_t k = 0; k < counts[j]; k++) {
                if (rb[displs[j] + k] != input_byte(j, k, salt))
                    fail_msg("allgatherv %s n=%u in_place=%d: rank %u block %u byte %llu wrong",
                             vname[variant], n, in_place, i, j, (unsigned long long)k);
                mark[displs[j] + k] = 1;
            }
        for (uint64_t k = 0; k < recv_len; k++)
            if (!mark[k] && rb[k] != 0xee)
                fail_msg("allgatherv %s n=%u: rank %u wrote gap byte %llu", vname[variant], n, i,
                         (unsigned long long)k);
        free(mark);
        for (uint64_t k = 0; !in_place && k < counts[i]; k++)
            assert_int_equal(r->buf[SCHED_BUF_SEND][k], input_byte(i, k, salt));
        /* Every rank gets every other block once (HALVING: the swap's and
         * its own block once more, unless a fixed point). */
        if (variant != RD_HALVING)
            assert_int_equal(r->received, total - counts[i]);
        else
            assert_true(r->received == total || r->received == total - counts[i]);
        if (regular && !in_place)
            for (uint32_t k = 0; k < r->s.nsend + r->s.nrecv; k++) {
                const sched_msg_t *m = k < r->s.nsend ? &r->s.send[k] : &r->s.recv[k - r->s.nsend];
                /* one run of RECV, split by the own block read from SEND */
                if (variant != RD_RING && m->nseg > 3)
                    fail_msg("allgather %s n=%u rank %u: a message of %u segments", vname[variant],
                             n, i, m->nseg);
            }
        if (regular && counts[0] > 0 && n > 1) {
            uint64_t b = counts[0], want = (n - 1) * b;
            uint32_t lg = ilog2(n), rounds = variant == RD_RING       ? n - 1
                                             : variant == RD_DOUBLING ? lg
                                                                      : lg + 1;
            if (variant == RD_HALVING && is_pow2(n) && bitrev(i, lg) != i)
                want += b;
            if (is_pow2(n) || variant == RD_RING)
                assert_int_equal(total_sent(&sim, i), want);
            if (is_pow2(n) || variant == RD_RING)
                assert_int_equal(r->s.nrounds, rounds);
            else
                assert_true(r->s.nrounds <= rounds);
        }
    }
    sim_free(&sim);
}

static const uint32_t test_ns[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12,
                                   13, 14, 15, 16, 17, 24, 31, 32, 33, 64, 100};
#define N_NS (sizeof(test_ns) / sizeof(test_ns[0]))

static int nseeds(uint32_t n)
{
    return n <= 17 ? 3 : n <= 33 ? 2 : 1;
}

static void test_allgather_regular(void **state)
{
    static const uint64_t sizes[] = {0, 1, 7, 4096};

    (void)state;
    for (size_t a = 0; a < N_NS; a++)
        for (int v = 0; v < RD_NVARIANT; v++)
            for (size_t z = 0; z < 4; z++)
                for (int ip = 0; ip < 2; ip++)
                    for (int sd = 0; sd < nseeds(test_ns[a]); sd++) {
                        uint32_t n = test_ns[a];
                        uint64_t *c = malloc(sizeof(*c) * 2 * n);
                        sim_t chk;
                        assert_non_null(c);
                        for (uint32_t j = 0; j < n; j++) {
                            c[j] = sizes[z];
                            c[n + j] = j * sizes[z];
                        }
                        /* The convenience form builds the same schedule. */
                        sim_init(&chk, 2, 0);
                        assert_int_equal(rd_sched_allgather(&chk.r[0].s, v, n, n - 1, sizes[z], ip),
                                         ARCOLL_OK);
                        assert_int_equal(
                            rd_sched_allgatherv(&chk.r[1].s, v, n, n - 1, c, c + n, ip), ARCOLL_OK);
                        assert_int_equal(chk.r[0].s.nsegs, chk.r[1].s.nsegs);
                        assert_int_equal(chk.r[0].s.nsend, chk.r[1].s.nsend);
                        assert_int_equal(chk.r[0].s.nrecv, chk.r[1].s.nrecv);
                        for (uint32_t g = 0; g < chk.r[0].s.nsegs; g++) {
                            const sched_seg_t *x = &chk.r[0].s.segs[g], *y = &chk.r[1].s.segs[g];
                            assert_true(x->buf == y->buf && x->off == y->off && x->len == y->len);
                        }
                        sim_free(&chk);
                        check_allgatherv(v, n, c, c + n, ip, 1000 + sd * 7919 + n, 1);
                        free(c);
                    }
}

/* Uneven and zero counts, shuffled displacements with gaps. */
static void test_allgatherv_uneven(void **state)
{
    static const uint64_t maxes[] = {1, 7, 4096};

    (void)state;
    for (size_t a = 0; a < N_NS; a++)
        for (int v = 0; v < RD_NVARIANT; v++)
            for (size_t z = 0; z < 3; z++)
                for (int ip = 0; ip < 2; ip++)
                    for (int sd = 0; sd < nseeds(test_ns[a]); sd++) {
                        uint32_t n = test_ns[a], *perm = malloc(sizeof(*perm) * n);
                        uint64_t *c = malloc(sizeof(*c) * 2 * n), at = 3;
                        assert_true(c != NULL && perm != NULL);
                        rng_state = 77 + n * 131 + (uint64_t)sd * 17 + z;
                        for (uint32_t j = 0; j < n; j++) {
                            c[j] = rng_below(4) == 0 ? 0 : rng_below(maxes[z] + 1);
                            perm[j] = j;
                        }
                        for (uint32_t j = n; j-- > 1;) {
                            uint32_t k = rng_below(j + 1), t = perm[j];
                            perm[j] = perm[k];
                            perm[k] = t;
                        }
                        for (uint32_t j = 0; j < n; j++) {
                            c[n + perm[j]] = at;
                            at += c[perm[j]] + rng_below(3);
                        }
                        check_allgatherv(v, n, c, c + n, ip, 5000 + sd * 31 + n, 0);
                        free(c);
                        free(perm);
                    }
}

/* Reference: element e of block j reduced over all ranks, wrapping. */
static uint64_t ref_elem(uint32_t n, uint64_t byte_off, uint64_t elem, uint32_t salt)
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

static uint64_t get_elem(const uint8_t *p, uint64_t elem)
{
    uint64_t v = 0;

    for (uint64_t b = 0; b < elem; b++)
        v |= (uint64_t)p[b] << (8 * b);
    return v;
}

/* allreduce if counts == NULL (count elements), else reduce-scatter. */
static void check_reduction(int variant, uint32_t n, const uint64_t *counts, uint64_t count,
                            uint64_t elem, int in_place, uint64_t seed)
{
    uint64_t total = 0, *off = calloc(n + 1, sizeof(*off)), *len = calloc(n, sizeof(*len));
    uint32_t salt = (uint32_t)seed * 3;
    const char *what = counts ? "reduce_scatter" : "allreduce";
    uint64_t *ref;
    int allpos = 1;
    sim_t sim;

    assert_true(off != NULL && len != NULL);
    for (uint32_t j = 0; j < n; j++) {
        len[j] = (counts ? counts[j] : count / n + (j < count % n)) * elem;
        off[j] = total;
        total += len[j];
        allpos &= len[j] > 0;
    }
    ref = malloc(sizeof(*ref) * (total / elem + 1));
    assert_non_null(ref);
    for (uint64_t k = 0; k < total; k += elem)
        ref[k / elem] = ref_elem(n, k, elem, salt);
    sim_init(&sim, n, elem);
    for (uint32_t i = 0; i < n; i++) {
        sim_rank_t *r = &sim.r[i];
        uint64_t out = counts ? len[i] : total;
        int rc = counts ? rd_sched_reduce_scatter(&r->s, variant, n, i, counts, elem, in_place)
                        : rd_sched_allreduce(&r->s, variant, n, i, count, elem, in_place);
        assert_int_equal(rc, ARCOLL_OK);
        sim_alloc(&sim, i, in_place ? 0 : total, in_place ? total : out + 3);
        for (uint64_t k = 0; k < total; k++)
            r->buf[in_place ? SCHED_BUF_RECV : SCHED_BUF_SEND][k] = input_byte(i, k, salt);
    }
    SIM_ASSERT(&sim, sim_run(&sim, seed), "%s %s n=%u elem=%llu in_place=%d seed=%llu\n", what,
               vname[variant], n, (unsigned long long)elem, in_place, (unsigned long long)seed);
    for (uint32_t i = 0; i < n; i++) {
        const sim_rank_t *r = &sim.r[i];
        const uint8_t *rb = r->buf[SCHED_BUF_RECV];
        uint64_t from = counts ? off[i] : 0, out = counts ? len[i] : total;
        for (uint64_t k = 0; k < out; k += elem)
            if (get_elem(rb + k, elem) != ref[(from + k) / elem])
                fail_msg("%s %s n=%u elem=%llu in_place=%d: rank %u byte %llu wrong", what,
                         vname[variant], n, (unsigned long long)elem, in_place, i,
                         (unsigned long long)k);
        for (uint64_t k = out; !in_place && k < out + 3; k++)
            assert_int_equal(rb[k], 0xee);
        for (uint64_t k = 0; !in_place && k < total; k++)
            assert_int_equal(r->buf[SCHED_BUF_SEND][k], input_byte(i, k, salt));
        if (n > 1 && is_pow2(n) && variant != RD_RING && allpos) {
            uint32_t lg = ilog2(n);
            /* HALVING's swap is a round of its own unless bitrev(i) == i. */
            uint32_t rounds = counts ? lg + (variant == RD_HALVING && bitrev(i, lg) != i) : 2 * lg;
            assert_int_equal(r->s.nrounds, rounds);
            for (uint32_t k = 0; k < r->s.nsend + r->s.nrecv; k++) {
                const sched_msg_t *m = k < r->s.nsend ? &r->s.send[k] : &r->s.recv[k - r->s.nsend];
                /* allreduce: one run of RECV split by the block reduced here (TMP) */
                if (m->nseg > (counts ? 1u : 3u))
                    fail_msg("%s %s n=%u rank %u: a message of %u segments", what, vname[variant],
                             n, i, m->nseg);
            }
        }
        if (variant != RD_RING)
            assert_true(r->s.nrounds <= (counts ? ilog2(n) + 1 : 2 * ilog2(n)));
        if (n > 1 && variant == RD_RING && allpos)
            assert_int_equal(r->s.nrounds, counts ? n - 1 : 2 * (n - 1));
        if (counts && n > 1 && is_pow2(n) && variant != RD_RING && len[0] > 0) {
            /* Equal blocks: (n-1) blocks in the halving stages, plus the swap. */
            uint64_t want = (n - 1) * len[0];
            int uneven = 0;
            for (uint32_t j = 0; j < n; j++)
                uneven |= len[j] != len[0];
            if (variant == RD_HALVING && bitrev(i, ilog2(n)) != i)
                want += len[0];
            if (!uneven)
                assert_int_equal(total_sent(&sim, i), want);
        }
    }
    sim_free(&sim);
    free(ref);
    free(len);
    free(off);
}

static void test_reduce_scatter(void **state)
{
    static const uint64_t per[] = {0, 1, 7, 1000};

    (void)state;
    for (size_t a = 0; a < N_NS; a++)
        for (int v = 0; v < RD_NVARIANT; v++)
            for (size_t z = 0; z < 4; z++)
                for (int e = 0; e < 2; e++)
                    for (int ip = 0; ip < 2; ip++) {
                        uint32_t n = test_ns[a];
                        uint64_t elem = e ? 4 : 8, *c = malloc(sizeof(*c) * n);
                        /* 1000 elements per block only up to 33 ranks: the
                         * whole input is on every rank, n^2 blocks in memory. */
                        uint64_t k = per[z] == 1000 && n > 33 ? 40 : per[z];
                        assert_non_null(c);
                        for (int sd = 0; sd < nseeds(n); sd++) {
                            for (uint32_t j = 0; j < n; j++)
                                c[j] = k;
                            check_reduction(v, n, c, 0, elem, ip, 300 + sd + n * 3);
                            /* uneven and zero blocks */
                            rng_state = 99 + n + (uint64_t)sd * 1009 + z;
                            for (uint32_t j = 0; j < n; j++)
                                c[j] = rng_below(3) == 0 ? 0 : rng_below(k + 1);
                            check_reduction(v, n, c, 0, elem, ip, 700 + sd + n * 5);
                        }
                        free(c);
                    }
}

static void test_allreduce(void **state)
{
    (void)state;
    for (size_t a = 0; a < N_NS; a++)
        for (int v = 0; v < RD_NVARIANT; v++)
            for (int e = 0; e < 2; e++)
                for (int ip = 0; ip < 2; ip++) {
                    uint32_t n = test_ns[a];
                    /* empty, fewer elements than ranks, uneven, 1000 per block */
                    uint64_t counts[] = {0,
                                         1,
                                         7,
                                         n - 1 ? n - 1 : 1,
                                         3 * (uint64_t)n + n / 2,
                                         (n > 33 ? 40 : 1000) * (uint64_t)n};
                    for (size_t z = 0; z < sizeof(counts) / sizeof(counts[0]); z++)
                        for (int sd = 0; sd < nseeds(n); sd++)
                            check_reduction(v, n, NULL, counts[z], e ? 4 : 8, ip,
                                            900 + sd * 13 + n + z);
                }
}

/* ---- the checker catches broken schedules ------------------------------- */

/* A ring allgatherv of 3 ranks with distinct block sizes, built into sim. */
static void build_ring3(sim_t *sim, const uint64_t *c, const uint64_t *d)
{
    sim_init(sim, 3, 0);
    for (uint32_t i = 0; i < 3; i++) {
        assert_int_equal(rd_sched_allgatherv(&sim->r[i].s, RD_RING, 3, i, c, d, 0), ARCOLL_OK);
        sim_alloc(sim, i, c[i], 16);
    }
}

static void test_checker_catches(void **state)
{
    static const uint64_t c[3] = {2, 3, 5}, d[3] = {0, 2, 5};
    sim_t sim;
    sched_seg_t g8 = {.off = 0, .len = 8, .buf = SCHED_BUF_RECV};
    sched_t *s;

    (void)state;
    /* The unmodified schedule passes. */
    build_ring3(&sim, c, d);
    assert_int_equal(sim_run(&sim, 1), 0);
    sim_free(&sim);

    /* Rank 0 streams 2 then 3 bytes to rank 1, which expects 3 then 2. */
    sim_init(&sim, 2, 0);
    {
        sched_seg_t a = {.off = 0, .len = 2, .buf = SCHED_BUF_SEND};
        sched_seg_t b = {.off = 2, .len = 3, .buf = SCHED_BUF_SEND};
        sched_seg_t x = {.off = 0, .len = 3, .buf = SCHED_BUF_RECV};
        sched_seg_t y = {.off = 3, .len = 2, .buf = SCHED_BUF_RECV};
        assert_int_equal(sched_add_send(&sim.r[0].s, 0, 1, &a, 1), 0);
        assert_int_equal(sched_add_send(&sim.r[0].s, 0, 1, &b, 1), 0);
        assert_int_equal(sched_add_recv(&sim.r[1].s, 0, 0, SCHED_COPY, &x, 1), 0);
        assert_int_equal(sched_add_recv(&sim.r[1].s, 0, 0, SCHED_COPY, &y, 1), 0);
        sim_alloc(&sim, 0, 5, 5);
        sim_alloc(&sim, 1, 5, 5);
    }
    assert_int_not_equal(sim_run(&sim, 1), 0);
    assert_non_null(strstr(sim.err, "bytes, the send"));
    sim_free(&sim);

    /* Rank 0's two ring messages to rank 1 swapped: round 0 now sends the
     * block its round-0 receive writes. */
    build_ring3(&sim, c, d);
    sim.no_static = 1;
    s = &sim.r[0].s;
    assert_int_equal(s->nsend, 2);
    {
        uint32_t seg = s->send[0].seg, nseg = s->send[0].nseg;
        s->send[0].seg = s->send[1].seg;
        s->send[0].nseg = s->send[1].nseg;
        s->send[1].seg = seg;
        s->send[1].nseg = nseg;
    }
    assert_int_not_equal(sim_run(&sim, 1), 0);
    sim_free(&sim);

    /* A receive dropped: a message is left over. */
    build_ring3(&sim, c, d);
    sim.r[2].s.nrecv--;
    assert_int_not_equal(sim_run(&sim, 1), 0);
    assert_non_null(strstr(sim.err, "never received"));
    sim_free(&sim);

    /* A receive added on top of another. */
    build_ring3(&sim, c, d);
    s = &sim.r[1].s;
    assert_int_equal(
        sched_add_recv(s, s->recv[s->nrecv - 1].round, 0, SCHED_COPY, &s->segs[s->recv[0].seg], 1),
        0);
    assert_int_equal(sched_add_send(&sim.r[0].s, s->recv[s->nrecv - 1].round, 1,
                                    &sim.r[0].s.segs[sim.r[0].s.send[0].seg], 1),
                     0);
    assert_int_not_equal(sim_run(&sim, 1), 0);
    sim_free(&sim);

    /* Write-after-read: each of 2 ranks sends RECV[0..8) and receives into
     * it in the same round. The static check catches it for any order; the
     * dynamic one whenever the receive lands while its send may still read. */
    for (int no_static = 0; no_static < 2; no_static++) {
        int caught = 0;
        for (uint64_t seed = 0; seed < 32; seed++) {
            sim_init(&sim, 2, 0);
            sim.no_static = no_static;
            for (uint32_t i = 0; i < 2; i++) {
                assert_int_equal(sched_add_send(&sim.r[i].s, 0, 1 - i, &g8, 1), 0);
                assert_int_equal(sched_add_recv(&sim.r[i].s, 0, 1 - i, SCHED_COPY, &g8, 1), 0);
                sim_alloc(&sim, i, 0, 8);
            }
            caught += sim_run(&sim, seed) != 0;
            sim_free(&sim);
        }
        if (no_static)
            assert_true(caught > 0);
        else
            assert_int_equal(caught, 32);
    }

    /* A send that forwards what it receives in its own round. */
    sim_init(&sim, 2, 0);
    {
        sched_seg_t a = {.off = 0, .len = 4, .buf = SCHED_BUF_RECV};
        sched_seg_t b = {.off = 4, .len = 4, .buf = SCHED_BUF_RECV};
        assert_int_equal(sched_add_send(&sim.r[0].s, 0, 1, &a, 1), 0);
        assert_int_equal(sched_add_recv(&sim.r[1].s, 0, 0, SCHED_COPY, &a, 1), 0);
        assert_int_equal(sched_add_send(&sim.r[1].s, 0, 0, &a, 1), 0);
        assert_int_equal(sched_add_recv(&sim.r[0].s, 0, 1, SCHED_COPY, &b, 1), 0);
        sim_alloc(&sim, 0, 0, 8);
        sim_alloc(&sim, 1, 0, 8);
    }
    assert_int_not_equal(sim_run(&sim, 3), 0);
    assert_non_null(strstr(sim.err, "overlap"));
    sim_free(&sim);
}

static void test_invalid(void **state)
{
    uint64_t c[4] = {1, 1, 1, 1}, d[4] = {0, 1, 2, 3}, big[2] = {UINT64_MAX, 1};
    sched_t s;

    (void)state;
    sched_init(&s);
    assert_int_equal(rd_sched_allgatherv(NULL, RD_RING, 4, 0, c, d, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_allgatherv(&s, RD_RING, 0, 0, c, d, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_allgatherv(&s, RD_RING, 4, 4, c, d, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_allgatherv(&s, 7, 4, 0, c, d, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_allgatherv(&s, -1, 4, 0, c, d, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_allgatherv(&s, RD_HALVING, 4, 0, NULL, d, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_allgatherv(&s, RD_HALVING, 4, 0, c, NULL, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_allgatherv(&s, RD_HALVING, 2, 0, c, big, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_allgather(&s, RD_HALVING, 4, 0, UINT64_MAX / 2, 0),
                     ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_reduce_scatter(&s, RD_HALVING, 4, 0, c, 0, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_reduce_scatter(&s, RD_HALVING, 4, 0, NULL, 8, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_reduce_scatter(&s, RD_HALVING, 2, 0, big, 8, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_allreduce(&s, RD_DOUBLING, 4, 0, 10, 0, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_allreduce(&s, RD_DOUBLING, 4, 0, UINT64_MAX / 4, 8, 0),
                     ARCOLL_ERR_INVALID);
    /* A failed build leaves an empty schedule behind. */
    assert_int_equal(s.nsend + s.nrecv + s.nlocal + s.nrounds, 0);
    assert_int_equal(rd_sched_allreduce(&s, RD_DOUBLING, 4, 0, 10, 8, 0), ARCOLL_OK);
    assert_true(s.nsend > 0);
    sched_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_catches),   cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_allgather_regular), cmocka_unit_test(test_allgatherv_uneven),
        cmocka_unit_test(test_reduce_scatter),    cmocka_unit_test(test_allreduce),
    };

    int rc = cmocka_run_group_tests_name("rd_sched", tests, NULL, NULL);

    print_message("%lu simulated collective calls\n", sim_runs);
    return rc;
}
