/* Recursive doubling/halving and ring schedule builders (rd_sched.h). */
#include "alg/sched/rd_sched.h"

#include <stdlib.h>
#include <string.h>

#include "arcoll.h"

/* Local copies that run after everything (sched.h, rule 4). */
#define RD_ROUND_LAST UINT32_MAX

/* Where block j lives: how rd_seg maps a block to a segment. */
enum {
    RD_BLK_AG, /* allgatherv: RECV at off[j]; own block in SEND (or RECV if in place) */
    RD_BLK_RS, /* reduction working vector: TMP at off[j] */
    RD_BLK_AR, /* allreduce's allgather: RECV, but block `local` is final in TMP */
};

typedef struct rd_ctx {
    sched_t *s;
    uint32_t n, me, nbits;                /* nbits = ceil(lg n) */
    int halving, mode, in_place, orphans; /* orphans: n is not a power of two */
    uint32_t local;
    uint32_t *owner, *slot; /* position -> rank, rank -> position; NULL: identity */
    uint32_t *ranks;        /* scratch: the blocks of one class */
    sched_seg_t *segs;      /* scratch: the segments of one message */
    const uint64_t *len, *off;
    uint64_t *layout; /* len/off storage when computed here */
} rd_ctx_t;

static uint32_t rd_bitrev(uint32_t x, uint32_t nbits)
{
    uint32_t r = 0;

    for (uint32_t i = 0; i < nbits; i++)
        r |= ((x >> i) & 1u) << (nbits - 1 - i);
    return r;
}

/* The bit that stage s of the allgather flips. */
static uint32_t rd_bit(const rd_ctx_t *c, uint32_t s)
{
    return c->halving ? c->nbits - 1 - s : s;
}

static uint32_t rd_owner(const rd_ctx_t *c, uint32_t v)
{
    return c->owner != NULL ? c->owner[v] : v;
}

static uint32_t rd_slot(const rd_ctx_t *c, uint32_t r)
{
    return c->slot != NULL ? c->slot[r] : r;
}

static void rd_ctx_fini(rd_ctx_t *c)
{
    free(c->layout);
    free(c->slot);
    free(c->owner);
    free(c->segs);
    free(c->ranks);
}

/* On failure the caller's rd_ctx_fini releases whatever was allocated. */
static int rd_ctx_init(rd_ctx_t *c, sched_t *s, int variant, uint32_t n, uint32_t me)
{
    c->s = s;
    c->n = n;
    c->me = me;
    while ((1ull << c->nbits) < n)
        c->nbits++;
    c->halving = variant == RD_HALVING;
    c->orphans = (n & (n - 1)) != 0;
    c->ranks = malloc(sizeof(*c->ranks) * n);
    c->segs = malloc(sizeof(*c->segs) * n);
    if (c->ranks == NULL || c->segs == NULL)
        return ARCOLL_ERR_NOMEM;
    if (!c->halving || n == 1)
        return ARCOLL_OK;
    c->owner = malloc(sizeof(*c->owner) * n);
    c->slot = malloc(sizeof(*c->slot) * n);
    if (c->owner == NULL || c->slot == NULL)
        return ARCOLL_ERR_NOMEM;
    /* Existing positions in bit-reversed order get ranks 0, 1, ...: then the
     * class of every stage is a contiguous run of ranks. */
    for (uint64_t x = 0, k = 0; x < (1ull << c->nbits); x++) {
        uint32_t u = rd_bitrev((uint32_t)x, c->nbits);
        if (u >= n)
            continue;
        c->owner[u] = (uint32_t)k;
        c->slot[k++] = u;
    }
    return ARCOLL_OK;
}

/* Common argument checks; n <= 2^31 keeps positions in 32 bits. */
static int rd_args_ok(const sched_t *s, int variant, uint32_t n, uint32_t me)
{
    return s != NULL && variant >= 0 && variant < RD_NVARIANT && n >= 1 && n <= (1u << 31) &&
           me < n;
}

/*
 * The blocks position v holds before allgather stage s (after stage s-1): the
 * existing positions differing from v only in bits b(0) .. b(s-1), as ranks,
 * ascending. Ascending without a sort: for DOUBLING the positions are an
 * aligned run; for HALVING bitrev(u) = bitrev(base) | k, and owner follows
 * bitrev order.
 */
static uint32_t rd_class(rd_ctx_t *c, uint32_t v, uint32_t s)
{
    uint32_t base = v, m = 0;

    for (uint32_t t = 0; t < s; t++)
        base &= ~(1u << rd_bit(c, t));
    for (uint64_t k = 0; k < (1ull << s); k++) {
        uint32_t u = base;
        for (uint32_t t = 0; t < s; t++)
            if ((k >> t) & 1u)
                u |= 1u << rd_bit(c, t);
        if (u < c->n)
            c->ranks[m++] = rd_owner(c, u);
    }
    return m;
}

/* Who stands in for the missing position p in stage s: p with bits b(s-1),
 * b(s-2), ... cleared in turn until it exists (the thesis's forwarding
 * target first). >= n: p's class is empty, nothing to forward. */
static uint32_t rd_provider(const rd_ctx_t *c, uint32_t p, uint32_t s)
{
    for (uint32_t t = s; t-- > 0 && p >= c->n;)
        p &= ~(1u << rd_bit(c, t));
    return p;
}

/* Does this rank stand in for orphan i's missing partner in stage s? */
static int rd_serves(const rd_ctx_t *c, uint32_t i, uint32_t s)
{
    uint32_t p = i ^ (1u << rd_bit(c, s));

    return c->orphans && i != c->me && p >= c->n && rd_provider(c, p, s) == c->me;
}

static sched_seg_t rd_seg(const rd_ctx_t *c, uint32_t j, int send)
{
    sched_seg_t g = {.off = c->off[j], .len = c->len[j], .buf = SCHED_BUF_RECV};

    if (c->mode == RD_BLK_RS || (c->mode == RD_BLK_AR && j == c->local)) {
        g.buf = SCHED_BUF_TMP;
    } else if (c->mode == RD_BLK_AG && j == c->me) {
        if (send && !c->in_place) {
            g.buf = SCHED_BUF_SEND;
            g.off = 0;
        } else if (!send && c->in_place) {
            /* HALVING brings the own block back; it must not overwrite the
             * input an earlier send may still be reading. */
            g.buf = SCHED_BUF_TMP;
            g.off = 0;
        }
    }
    return g;
}

/* One message carrying blocks blk[0 .. nblk), adjacent segments merged. */
static int rd_msg(rd_ctx_t *c, int send, uint32_t round, uint32_t peer, int action,
                  const uint32_t *blk, uint32_t nblk)
{
    sched_seg_t *g = c->segs;
    uint32_t m = 0;
    int rc;

    for (uint32_t i = 0; i < nblk; i++) {
        sched_seg_t x = rd_seg(c, blk[i], send);
        if (x.len == 0)
            continue;
        if (m > 0 && g[m - 1].buf == x.buf && g[m - 1].off + g[m - 1].len == x.off)
            g[m - 1].len += x.len;
        else
            g[m++] = x;
    }
    if (m == 0)
        return ARCOLL_OK; /* both ends know the lengths: an empty message is left out */
    if (!send)
        return sched_add_recv(c->s, round, peer, action, g, m);
    rc = sched_add_send(c->s, round, peer, g, m);
    if (rc == ARCOLL_OK)
        c->s->send[c->s->nsend - 1].action = (uint32_t)action; /* what its receiver does */
    return rc;
}

static int rd_local(rd_ctx_t *c, uint32_t round, sched_seg_t dst, sched_seg_t src)
{
    if (dst.len == 0)
        return ARCOLL_OK;
    return sched_add_local(c->s, round, &dst, 1, &src, 1);
}

/* Allgather stage s: send my class to my partner and to the orphans I stand
 * in for, receive the partner's class from the partner or its provider. */
static int rd_ag_stage(rd_ctx_t *c, uint32_t s, uint32_t round)
{
    uint32_t p = c->me ^ (1u << rd_bit(c, s)), from, nb;
    int rc = ARCOLL_OK;

    nb = rd_class(c, c->me, s);
    if (p < c->n)
        rc = rd_msg(c, 1, round, p, SCHED_COPY, c->ranks, nb);
    for (uint32_t i = 0; rc == ARCOLL_OK && c->orphans && i < c->n; i++)
        if (rd_serves(c, i, s))
            rc = rd_msg(c, 1, round, i, SCHED_COPY, c->ranks, nb);
    from = p < c->n ? p : rd_provider(c, p, s);
    if (rc != ARCOLL_OK || from >= c->n)
        return rc;
    nb = rd_class(c, p, s);
    return rd_msg(c, 0, round, from, SCHED_COPY, c->ranks, nb);
}

/* Reduce-scatter step for stage s, the allgather stage with every message
 * reversed: my partials for the partner's class go to the partner (or, if
 * it is missing, to its provider); partials for my class come from the
 * partner and from the orphans I stand in for, in that list order. */
static int rd_rs_stage(rd_ctx_t *c, uint32_t s, uint32_t round)
{
    uint32_t p = c->me ^ (1u << rd_bit(c, s)), to, nb;
    int rc = ARCOLL_OK;

    to = p < c->n ? p : rd_provider(c, p, s);
    if (to < c->n) {
        nb = rd_class(c, p, s);
        rc = rd_msg(c, 1, round, to, SCHED_REDUCE, c->ranks, nb);
    }
    nb = rd_class(c, c->me, s);
    if (rc == ARCOLL_OK && p < c->n)
        rc = rd_msg(c, 0, round, p, SCHED_REDUCE, c->ranks, nb);
    for (uint32_t i = 0; rc == ARCOLL_OK && c->orphans && i < c->n; i++)
        if (rd_serves(c, i, s))
            rc = rd_msg(c, 0, round, i, SCHED_REDUCE, c->ranks, nb);
    return rc;
}

/* Ring allgather from round first: in round r, block me - r goes to me + 1
 * and block me - r - 1 comes from me - 1. */
static int rd_ag_ring(rd_ctx_t *c, uint32_t first)
{
    uint32_t n = c->n, next = (c->me + 1) % n, prev = (c->me + n - 1) % n;
    int rc = ARCOLL_OK;

    for (uint32_t r = 0; rc == ARCOLL_OK && r + 1 < n; r++) {
        uint32_t js = (c->me + n - r) % n, jr = (uint32_t)((c->me + 2ull * n - r - 1) % n);
        rc = rd_msg(c, 1, first + r, next, SCHED_COPY, &js, 1);
        if (rc == ARCOLL_OK)
            rc = rd_msg(c, 0, first + r, prev, SCHED_COPY, &jr, 1);
    }
    return rc;
}

/* Ring reduce-scatter: in round r, the partial of block me - r - 1 goes to
 * me + 1 and that of block me - r - 2 comes from me - 1; after n - 1 rounds
 * block me holds everyone's contribution. */
static int rd_rs_ring(rd_ctx_t *c)
{
    uint32_t n = c->n, next = (c->me + 1) % n, prev = (c->me + n - 1) % n;
    int rc = ARCOLL_OK;

    for (uint32_t r = 0; rc == ARCOLL_OK && r + 1 < n; r++) {
        uint32_t js = (uint32_t)((c->me + 2ull * n - r - 1) % n);
        uint32_t jr = (uint32_t)((c->me + 2ull * n - r - 2) % n);
        rc = rd_msg(c, 1, r, next, SCHED_REDUCE, &js, 1);
        if (rc == ARCOLL_OK)
            rc = rd_msg(c, 0, r, prev, SCHED_REDUCE, &jr, 1);
    }
    return rc;
}

static int rd_ag_recursive(rd_ctx_t *c)
{
    uint32_t first = c->halving ? 1 : 0, me = c->me;
    int rc = ARCOLL_OK;

    if (rd_owner(c, me) == me && !c->in_place) {
        sched_seg_t dst = rd_seg(c, me, 0), src = rd_seg(c, me, 1);
        rc = rd_local(c, 0, dst, src);
    }
    if (rc == ARCOLL_OK && rd_owner(c, me) != me) {
        /* The swap: my block to the position that holds it, rank
         * owner(me)'s block in. */
        uint32_t from = rd_owner(c, me);
        c->s->tmp_len = c->in_place ? c->len[me] : 0;
        rc = rd_msg(c, 1, 0, rd_slot(c, me), SCHED_COPY, &me, 1);
        if (rc == ARCOLL_OK)
            rc = rd_msg(c, 0, 0, from, SCHED_COPY, &from, 1);
    }
    for (uint32_t s = 0; rc == ARCOLL_OK && s < c->nbits; s++)
        rc = rd_ag_stage(c, s, first + s);
    return rc;
}

int rd_sched_allgatherv(sched_t *s, int variant, uint32_t n, uint32_t me, const uint64_t *counts,
                        const uint64_t *displs, int in_place)
{
    rd_ctx_t c;
    int rc = ARCOLL_ERR_INVALID;

    memset(&c, 0, sizeof(c));
    if (s != NULL)
        sched_reset(s);
    if (!rd_args_ok(s, variant, n, me) || counts == NULL || displs == NULL)
        goto out;
    for (uint32_t j = 0; j < n; j++)
        if (displs[j] + counts[j] < displs[j])
            goto out;
    rc = rd_ctx_init(&c, s, variant, n, me);
    if (rc != ARCOLL_OK)
        goto out;
    c.mode = RD_BLK_AG;
    c.in_place = in_place != 0;
    c.len = counts;
    c.off = displs;
    if (variant == RD_RING) {
        if (!c.in_place)
            rc = rd_local(&c, 0, rd_seg(&c, me, 0), rd_seg(&c, me, 1));
        if (rc == ARCOLL_OK)
            rc = rd_ag_ring(&c, 0);
    } else {
        rc = rd_ag_recursive(&c);
    }
out:
    rd_ctx_fini(&c);
    if (rc != ARCOLL_OK && s != NULL)
        sched_reset(s);
    return rc;
}

int rd_sched_allgather(sched_t *s, int variant, uint32_t n, uint32_t me, uint64_t bytes,
                       int in_place)
{
    uint64_t *counts = NULL;
    int rc = ARCOLL_ERR_INVALID;

    if (n == 0 || (bytes != 0 && n > UINT64_MAX / bytes))
        goto out;
    rc = ARCOLL_ERR_NOMEM;
    counts = malloc(sizeof(*counts) * 2 * n);
    if (counts == NULL)
        goto out;
    for (uint32_t j = 0; j < n; j++) {
        counts[j] = bytes;
        counts[n + j] = (uint64_t)j * bytes;
    }
    rc = rd_sched_allgatherv(s, variant, n, me, counts, counts + n, in_place);
out:
    free(counts);
    if (rc != ARCOLL_OK && s != NULL)
        sched_reset(s);
    return rc;
}

/* Blocks of elements to byte lengths and offsets (prefix sums) in
 * c->layout; ARCOLL_ERR_INVALID on overflow. */
static int rd_layout(rd_ctx_t *c, const uint64_t *counts, uint64_t count, uint64_t elem,
                     uint64_t *total)
{
    uint64_t *len, *off, sum = 0;

    c->layout = malloc(sizeof(*c->layout) * 2 * c->n);
    if (c->layout == NULL)
        return ARCOLL_ERR_NOMEM;
    len = c->layout;
    off = c->layout + c->n;
    for (uint32_t j = 0; j < c->n; j++) {
        uint64_t k = counts != NULL ? counts[j] : count / c->n + (j < count % c->n);
        if (k > UINT64_MAX / elem || sum + k * elem < sum)
            return ARCOLL_ERR_INVALID;
        len[j] = k * elem;
        off[j] = sum;
        sum += len[j];
    }
    if (sum > SIZE_MAX)
        return ARCOLL_ERR_INVALID;
    c->len = len;
    c->off = off;
    *total = sum;
    return ARCOLL_OK;
}

/* The reduction working vector: the whole input copied to TMP in round 0
 * (rd_sched.h, E2), so SEND is never written and an in-place input can be
 * overwritten by the result. */
static int rd_tmp_init(rd_ctx_t *c, uint64_t total)
{
    sched_seg_t dst = {.off = 0, .len = total, .buf = SCHED_BUF_TMP};
    sched_seg_t src = {
        .off = 0, .len = total, .buf = c->in_place ? SCHED_BUF_RECV : SCHED_BUF_SEND};

    c->s->tmp_len = (size_t)total;
    return rd_local(c, 0, dst, src);
}

/* Recursive halving: the allgather's stages in reverse, L rounds from 0. */
static int rd_rs_recursive(rd_ctx_t *c)
{
    int rc = ARCOLL_OK;

    for (uint32_t s = c->nbits; rc == ARCOLL_OK && s-- > 0;)
        rc = rd_rs_stage(c, s, c->nbits - 1 - s);
    return rc;
}

int rd_sched_reduce_scatter(sched_t *s, int variant, uint32_t n, uint32_t me,
                            const uint64_t *counts, uint64_t elem, int in_place)
{
    sched_seg_t res = {.off = 0, .buf = SCHED_BUF_RECV};
    uint64_t total = 0;
    uint32_t done;
    rd_ctx_t c;
    int rc = ARCOLL_ERR_INVALID;

    memset(&c, 0, sizeof(c));
    if (s != NULL)
        sched_reset(s);
    if (!rd_args_ok(s, variant, n, me) || counts == NULL || elem == 0)
        goto out;
    rc = rd_ctx_init(&c, s, variant, n, me);
    if (rc == ARCOLL_OK)
        rc = rd_layout(&c, counts, 0, elem, &total);
    if (rc != ARCOLL_OK)
        goto out;
    c.mode = RD_BLK_RS;
    c.in_place = in_place != 0;
    res.len = c.len[me];
    rc = rd_tmp_init(&c, total);
    if (rc == ARCOLL_OK)
        rc = variant == RD_RING ? rd_rs_ring(&c) : rd_rs_recursive(&c);
    if (rc != ARCOLL_OK)
        goto out;
    /* This position finished rank owner(me)'s block: the swap back, or a
     * copy if that is my own. */
    done = rd_owner(&c, me);
    if (done == me) {
        rc = rd_local(&c, RD_ROUND_LAST, res, rd_seg(&c, me, 1));
    } else {
        rc = rd_msg(&c, 1, c.nbits, done, SCHED_COPY, &done, 1);
        if (rc == ARCOLL_OK && res.len > 0)
            rc = sched_add_recv(s, c.nbits, rd_slot(&c, me), SCHED_COPY, &res, 1);
    }
out:
    rd_ctx_fini(&c);
    if (rc != ARCOLL_OK && s != NULL)
        sched_reset(s);
    return rc;
}

int rd_sched_allreduce(sched_t *s, int variant, uint32_t n, uint32_t me, uint64_t count,
                       uint64_t elem, int in_place)
{
    uint64_t total = 0;
    rd_ctx_t c;
    int rc = ARCOLL_ERR_INVALID;

    memset(&c, 0, sizeof(c));
    if (s != NULL)
        sched_reset(s);
    if (!rd_args_ok(s, variant, n, me) || elem == 0)
        goto out;
    rc = rd_ctx_init(&c, s, variant, n, me);
    if (rc == ARCOLL_OK)
        rc = rd_layout(&c, NULL, count, elem, &total);
    if (rc != ARCOLL_OK)
        goto out;
    c.in_place = in_place != 0;
    c.mode = RD_BLK_RS;
    rc = rd_tmp_init(&c, total);
    if (rc == ARCOLL_OK)
        rc = variant == RD_RING ? rd_rs_ring(&c) : rd_rs_recursive(&c);
    if (rc != ARCOLL_OK)
        goto out;
    /* No swaps: the allgather starts from the block this position reduced,
     * final in TMP; the others land in RECV. */
    c.mode = RD_BLK_AR;
    c.local = rd_owner(&c, me);
    if (variant == RD_RING) {
        rc = rd_ag_ring(&c, n - 1);
    } else {
        for (uint32_t st = 0; rc == ARCOLL_OK && st < c.nbits; st++)
            rc = rd_ag_stage(&c, st, c.nbits + st);
    }
    if (rc == ARCOLL_OK) {
        sched_seg_t dst = {.off = c.off[c.local], .len = c.len[c.local], .buf = SCHED_BUF_RECV};
        rc = rd_local(&c, RD_ROUND_LAST, dst, rd_seg(&c, c.local, 1));
    }
out:
    rd_ctx_fini(&c);
    if (rc != ARCOLL_OK && s != NULL)
        sched_reset(s);
    return rc;
}
