/*
 * Linear schedules: every rank exchanges with every other one directly, so
 * a call costs N-1 start-ups per round and never waits on a rank it does not
 * need (docs/protocol.md, "Schedules"). The sends of a round go out in the
 * engine's order: arrived peers first (pap) or (p + i) mod N after each
 * receiver's advertisement (direct).
 *
 *   alltoallv       round 0: block j of the send buffer to j
 *   allgatherv      round 0: our block to everyone
 *   reduce_scatter  round 0: block j to j; rank j reduces what lands into its
 *                   result (arrival order: deterministic per run only for
 *                   integers)
 *   allreduce       round 0: reduce-scatter of ~count/N element blocks,
 *                   round 1: every rank's reduced block to everyone
 * In place, the data a send reads is first copied to the scratch buffer, so
 * no receive overwrites what a send may still read (sched.h, rule 3).
 */
#include "alg/sched/lin_sched.h"

#include <stdlib.h>
#include <string.h>

static sched_seg_t lin_seg(int buf, uint64_t off, uint64_t len)
{
    sched_seg_t g = {.off = off, .len = len, .buf = (uint8_t)buf};

    return g;
}

static size_t lin_rcount(const coll_args_t *a, uint32_t j)
{
    return a->rcounts != NULL ? a->rcounts[j] : a->bytes;
}

static size_t lin_rdispl(const coll_args_t *a, uint32_t j)
{
    return a->rdispls != NULL ? a->rdispls[j] : (size_t)j * a->bytes;
}

/* Block [lo, hi) of element range i of n over count elements: as even as can be. */
static void lin_block(uint64_t count, uint32_t n, uint32_t i, uint64_t *lo, uint64_t *hi)
{
    uint64_t q = count / n, rem = count % n;

    *lo = (uint64_t)i * q + (i < rem ? i : rem);
    *hi = *lo + q + (i < rem ? 1 : 0);
}

static int lin_alltoallv(const coll_req_t *r, sched_t *s)
{
    const coll_args_t *a = &r->args;
    uint32_t n = r->team->size, me = r->team->rank;
    int sb = SCHED_BUF_SEND, rc = 0;
    size_t total = 0;

    if (a->in_place) {
        /* Keep what we send: the whole receive layout goes to scratch first. */
        for (uint32_t j = 0; j < n; j++)
            if (lin_rdispl(a, j) + lin_rcount(a, j) > total)
                total = lin_rdispl(a, j) + lin_rcount(a, j);
        s->tmp_len = total;
        sched_seg_t d = lin_seg(SCHED_BUF_TMP, 0, total), g = lin_seg(SCHED_BUF_RECV, 0, total);
        rc = sched_add_local(s, 0, &d, 1, &g, 1);
        sb = SCHED_BUF_TMP;
    } else {
        sched_seg_t d = lin_seg(SCHED_BUF_RECV, lin_rdispl(a, me), lin_rcount(a, me));
        sched_seg_t g = lin_seg(SCHED_BUF_SEND, a->sdispls[me], a->scounts[me]);
        if (d.len != g.len)
            return ARCOLL_ERR_MISMATCH; /* our own block: the caller's counts disagree */
        rc = sched_add_local(s, 0, &d, 1, &g, 1);
    }
    for (uint32_t i = 1; rc == 0 && i < n; i++) {
        uint32_t to = (me + i) % n, from = (me + n - i) % n;
        sched_seg_t g = a->in_place ? lin_seg(sb, lin_rdispl(a, to), lin_rcount(a, to))
                                    : lin_seg(sb, a->sdispls[to], a->scounts[to]);
        sched_seg_t d = lin_seg(SCHED_BUF_RECV, lin_rdispl(a, from), lin_rcount(a, from));
        rc = sched_add_send(s, 0, to, &g, 1);
        if (rc == 0)
            rc = sched_add_recv(s, 0, from, SCHED_COPY, &d, 1);
    }
    return rc;
}

static int lin_allgatherv(const coll_req_t *r, sched_t *s)
{
    const coll_args_t *a = &r->args;
    uint32_t n = r->team->size, me = r->team->rank;
    sched_seg_t mine = lin_seg(SCHED_BUF_RECV, lin_rdispl(a, me), lin_rcount(a, me));
    int rc = 0;

    uint32_t first = 0;

    if (!a->in_place) {
        sched_seg_t g = lin_seg(SCHED_BUF_SEND, 0, a->bytes);
        rc = sched_add_local(s, 0, &mine, 1, &g, 1);
        mine = g;
    }
    if (rc == 0 && n > 1)
        rc = sched_add_segs(s, &mine, 1, &first); /* every send's, stored once */
    for (uint32_t i = 1; rc == 0 && i < n; i++) {
        uint32_t to = (me + i) % n, from = (me + n - i) % n;
        sched_seg_t d = lin_seg(SCHED_BUF_RECV, lin_rdispl(a, from), lin_rcount(a, from));
        rc = sched_add_send_at(s, 0, to, first, 1);
        if (rc == 0)
            rc = sched_add_recv(s, 0, from, SCHED_COPY, &d, 1);
    }
    return rc;
}

/* Reduce-scatter of blocks [lo_j, hi_j) (elements) of src into acc_buf at
 * acc_off for our block, in round 0; own_there: our own block is there
 * already (no copy). */
static int lin_reduce_round(const coll_req_t *r, sched_t *s, int src, const uint64_t *lo,
                            const uint64_t *hi, int acc_buf, uint64_t acc_off, int own_there)
{
    const coll_args_t *a = &r->args;
    uint32_t n = r->team->size, me = r->team->rank;
    uint64_t e = a->elem;
    sched_seg_t acc = lin_seg(acc_buf, acc_off, (hi[me] - lo[me]) * e);
    sched_seg_t own = lin_seg(src, lo[me] * e, (hi[me] - lo[me]) * e);
    uint32_t first = 0;
    int rc = 0;

    if (!own_there)
        rc = sched_add_local(s, 0, &acc, 1, &own, 1);
    if (rc == 0 && n > 1)
        rc = sched_add_segs(s, &acc, 1, &first); /* every receive's, stored once */
    for (uint32_t i = 1; rc == 0 && i < n; i++) {
        uint32_t to = (me + i) % n, from = (me + n - i) % n;
        sched_seg_t g = lin_seg(src, lo[to] * e, (hi[to] - lo[to]) * e);
        rc = sched_add_send(s, 0, to, &g, 1);
        if (rc == 0) {
            s->send[s->nsend - 1].action = SCHED_REDUCE; /* its receiver reduces it */
            rc = sched_add_recv_at(s, 0, from, SCHED_REDUCE, first, 1);
        }
    }
    return rc;
}

static int lin_reductions(const coll_req_t *r, sched_t *s, uint64_t *lo, uint64_t *hi)
{
    const coll_args_t *a = &r->args;
    uint32_t n = r->team->size, me = r->team->rank;
    uint64_t e = a->elem, total;
    int src = a->in_place ? SCHED_BUF_TMP : SCHED_BUF_SEND, rc;

    if (a->type == COLL_REDUCE_SCATTER) {
        for (uint32_t j = 0; j < n; j++) {
            lo[j] = (uint64_t)j * a->count;
            hi[j] = lo[j] + a->count;
        }
    } else {
        for (uint32_t j = 0; j < n; j++)
            lin_block(a->count, n, j, &lo[j], &hi[j]);
    }
    total = n > 0 ? hi[n - 1] * e : 0;
    if (a->in_place) {
        sched_seg_t d = lin_seg(SCHED_BUF_TMP, 0, total), g = lin_seg(SCHED_BUF_RECV, 0, total);
        s->tmp_len = total;
        rc = sched_add_local(s, 0, &d, 1, &g, 1);
        if (rc != 0)
            return rc;
    }
    /* In place, the copy to scratch is a round-0 local copy that reads the
     * whole receive buffer: no other round-0 copy may write it (local copies
     * of one round are unordered, sched.h). */
    if (a->type == COLL_REDUCE_SCATTER && !a->in_place)
        return lin_reduce_round(r, s, src, lo, hi, SCHED_BUF_RECV, 0, 0);
    if (a->type == COLL_REDUCE_SCATTER) {
        /* Reduced in scratch, where our block is, and moved to the front of
         * the receive buffer after everything (round 1 >= nrounds). */
        sched_seg_t d = lin_seg(SCHED_BUF_RECV, 0, (hi[me] - lo[me]) * e);
        sched_seg_t g = lin_seg(SCHED_BUF_TMP, lo[me] * e, d.len);
        rc = lin_reduce_round(r, s, src, lo, hi, SCHED_BUF_TMP, lo[me] * e, 1);
        return rc != 0 ? rc : sched_add_local(s, 1, &d, 1, &g, 1);
    }
    /* allreduce: our block reduced in place in the receive buffer (where it
     * is already in place), then shared. */
    sched_seg_t g = lin_seg(SCHED_BUF_RECV, lo[me] * e, (hi[me] - lo[me]) * e);
    uint32_t first = 0;

    rc = lin_reduce_round(r, s, src, lo, hi, SCHED_BUF_RECV, lo[me] * e, a->in_place);
    if (rc == 0 && n > 1)
        rc = sched_add_segs(s, &g, 1, &first); /* every send's, stored once */
    for (uint32_t i = 1; rc == 0 && i < n; i++) {
        uint32_t to = (me + i) % n, from = (me + n - i) % n;
        sched_seg_t d = lin_seg(SCHED_BUF_RECV, lo[from] * e, (hi[from] - lo[from]) * e);
        rc = sched_add_send_at(s, 1, to, first, 1);
        if (rc == 0)
            rc = sched_add_recv(s, 1, from, SCHED_COPY, &d, 1);
    }
    return rc;
}

int lin_sched_build(const coll_req_t *r, sched_t *s)
{
    uint32_t n = r->team->size;
    uint64_t *lo, *hi;
    int rc;

    sched_reset(s);
    switch (r->args.type) {
    case COLL_ALLTOALLV: return lin_alltoallv(r, s);
    case COLL_ALLGATHERV: return lin_allgatherv(r, s);
    case COLL_REDUCE_SCATTER:
    case COLL_ALLREDUCE:
        lo = calloc((size_t)2 * n, sizeof(*lo));
        if (lo == NULL)
            return ARCOLL_ERR_NOMEM;
        hi = lo + n;
        rc = lin_reductions(r, s, lo, hi);
        free(lo);
        return rc;
    default: return ARCOLL_ERR_UNSUPPORTED;
    }
}
