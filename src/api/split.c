/* Team split by merging sorted tables along recursive doubling (split.h,
 * docs/split.md). */
#include "api/split.h"

#include <stdlib.h>
#include <string.h>

#include "arcoll.h"

/* What exchange k of a split is; see split_op_at. */
enum {
    SPLIT_OP_FOLD,   /* rank p2 + v sends its entry to v */
    SPLIT_OP_A_HDR,  /* pruned, first pass: color-set sizes */
    SPLIT_OP_A_DATA, /* pruned, first pass: color sets */
    SPLIT_OP_B_HDR,  /* pruned: table sizes */
    SPLIT_OP_B_DATA, /* tables */
    SPLIT_OP_U_HDR,  /* v tells p2 + v the size of its new team */
    SPLIT_OP_U_DATA, /* ... and its members */
    SPLIT_OP_DONE
};

/* ---- wire words --------------------------------------------------------- */

static void split_le32_put(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t split_le32_get(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Two's complement without relying on the implementation-defined cast. */
static int32_t split_i32(uint32_t v)
{
    return v <= INT32_MAX ? (int32_t)v : (int32_t)(v - 2147483648u) - INT32_MAX - 1;
}

void split_entry_put(uint8_t *w, uint32_t i, const split_entry_t *e)
{
    uint8_t *p = w + (size_t)i * SPLIT_ENTRY_WIRE;

    split_le32_put(p, (uint32_t)e->color);
    split_le32_put(p + 4, (uint32_t)e->key);
    split_le32_put(p + 8, e->rank);
}

void split_entry_get(const uint8_t *w, uint32_t i, split_entry_t *e)
{
    const uint8_t *p = w + (size_t)i * SPLIT_ENTRY_WIRE;

    e->color = split_i32(split_le32_get(p));
    e->key = split_i32(split_le32_get(p + 4));
    e->rank = split_le32_get(p + 8);
}

static int32_t split_color_at(const uint8_t *w, uint32_t i)
{
    return split_i32(split_le32_get(w + (size_t)i * SPLIT_ENTRY_WIRE));
}

static int split_entry_cmp(const split_entry_t *a, const split_entry_t *b)
{
    if (a->color != b->color)
        return a->color < b->color ? -1 : 1;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    return 0;
}

/* ---- merging ------------------------------------------------------------ */

/* First i in [lo, n) with color >= c, by galloping from lo: cheap when the
 * answer is near lo, never worse than a binary search. */
static uint32_t split_tab_gallop(const uint8_t *w, uint32_t lo, uint32_t n, int32_t c)
{
    uint32_t hi = lo, step = 1;

    while (hi < n && split_color_at(w, hi) < c) {
        lo = hi + 1;
        hi = (n - lo > step) ? lo + step : n;
        step *= 2;
    }
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (split_color_at(w, mid) < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static uint32_t split_set_gallop(const split_set_t *s, uint32_t lo, int32_t c)
{
    uint32_t hi = lo, step = 1;

    while (hi < s->n && s->c[hi] < c) {
        lo = hi + 1;
        hi = (s->n - lo > step) ? lo + step : s->n;
        step *= 2;
    }
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s->c[mid] < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Linear merge of two sorted runs; entries are copied as wire bytes. */
static uint32_t split_runs_merge(const uint8_t *a, uint32_t na, const uint8_t *b, uint32_t nb,
                                 uint8_t *out)
{
    uint32_t i = 0, j = 0, o = 0;
    split_entry_t ea, eb;

    if (out == NULL)
        return na + nb;
    if (na > 0)
        split_entry_get(a, 0, &ea);
    if (nb > 0)
        split_entry_get(b, 0, &eb);
    while (i < na && j < nb) {
        if (split_entry_cmp(&ea, &eb) <= 0) {
            memcpy(out + (size_t)o++ * SPLIT_ENTRY_WIRE, a + (size_t)i++ * SPLIT_ENTRY_WIRE,
                   SPLIT_ENTRY_WIRE);
            if (i < na)
                split_entry_get(a, i, &ea);
        } else {
            memcpy(out + (size_t)o++ * SPLIT_ENTRY_WIRE, b + (size_t)j++ * SPLIT_ENTRY_WIRE,
                   SPLIT_ENTRY_WIRE);
            if (j < nb)
                split_entry_get(b, j, &eb);
        }
    }
    /* An empty run may come as NULL: memcpy must not see it (even for 0 bytes). */
    if (na > i)
        memcpy(out + (size_t)o * SPLIT_ENTRY_WIRE, a + (size_t)i * SPLIT_ENTRY_WIRE,
               (size_t)(na - i) * SPLIT_ENTRY_WIRE);
    o += na - i;
    if (nb > j)
        memcpy(out + (size_t)o * SPLIT_ENTRY_WIRE, b + (size_t)j * SPLIT_ENTRY_WIRE,
               (size_t)(nb - j) * SPLIT_ENTRY_WIRE);
    return o + nb - j;
}

uint32_t split_tab_merge(const uint8_t *a, uint32_t na, const uint8_t *b, uint32_t nb,
                         const split_set_t *keep, uint8_t *out)
{
    uint32_t ia = 0, ib = 0, ik = 0, o = 0;

    if (keep == NULL)
        return split_runs_merge(a, na, b, nb, out);
    /* Walk the colors present in a or b and the kept colors together,
     * galloping over whichever side has the gap: tables and sets of very
     * different sizes meet in time proportional to the smaller. */
    while ((ia < na || ib < nb) && ik < keep->n) {
        int32_t next, c;
        uint32_t a1, b1;

        if (ia < na && ib < nb) {
            int32_t ca = split_color_at(a, ia), cb = split_color_at(b, ib);
            next = ca < cb ? ca : cb;
        } else {
            next = ia < na ? split_color_at(a, ia) : split_color_at(b, ib);
        }
        ik = split_set_gallop(keep, ik, next);
        if (ik == keep->n)
            break;
        c = keep->c[ik];
        ia = split_tab_gallop(a, ia, na, c);
        ib = split_tab_gallop(b, ib, nb, c);
        a1 = c == INT32_MAX ? na : split_tab_gallop(a, ia, na, c + 1);
        b1 = c == INT32_MAX ? nb : split_tab_gallop(b, ib, nb, c + 1);
        o += split_runs_merge(a + (size_t)ia * SPLIT_ENTRY_WIRE, a1 - ia,
                              b + (size_t)ib * SPLIT_ENTRY_WIRE, b1 - ib,
                              out ? out + (size_t)o * SPLIT_ENTRY_WIRE : NULL);
        ia = a1;
        ib = b1;
        ik++;
    }
    return o;
}

uint32_t split_plan_count(uint32_t n, uint32_t first, uint32_t size)
{
    uint32_t p2 = 1, r;

    while (p2 <= n / 2)
        p2 *= 2;
    r = n - p2;
    if (first >= r)
        return size;
    return size + ((r - first < size) ? r - first : size);
}

/* ---- color sets --------------------------------------------------------- */

static void split_set_free(split_set_t *s)
{
    free(s->c);
    s->c = NULL;
    s->n = 0;
}

/* out = a u b (both ascending, unique). */
static int split_set_union(const split_set_t *a, const split_set_t *b, split_set_t *out)
{
    uint32_t i = 0, j = 0, o = 0;
    int32_t *c = malloc(((size_t)a->n + b->n + 1) * sizeof(*c));

    if (c == NULL)
        return ARCOLL_ERR_NOMEM;
    while (i < a->n || j < b->n) {
        if (j == b->n || (i < a->n && a->c[i] < b->c[j]))
            c[o++] = a->c[i++];
        else if (i == a->n || b->c[j] < a->c[i])
            c[o++] = b->c[j++];
        else {
            c[o++] = a->c[i++];
            j++;
        }
    }
    out->c = c;
    out->n = o;
    return ARCOLL_OK;
}

static void split_set_add(split_set_t *s, int32_t c)
{
    uint32_t i = split_set_gallop(s, 0, c);

    if (i < s->n && s->c[i] == c)
        return;
    memmove(s->c + i + 1, s->c + i, (size_t)(s->n - i) * sizeof(*s->c));
    s->c[i] = c;
    s->n++;
}

/* ---- the state machine -------------------------------------------------- */

static int split_op_at(const split_state_t *st, uint32_t k, uint32_t *t)
{
    uint32_t lv = st->levels;

    *t = 0;
    if (st->r > 0) {
        if (k == 0)
            return SPLIT_OP_FOLD;
        k--;
    }
    if (st->prune) {
        if (k < 2 * lv) {
            *t = lv - 1 - k / 2;
            return k % 2 ? SPLIT_OP_A_DATA : SPLIT_OP_A_HDR;
        }
        k -= 2 * lv;
        if (k < 2 * lv) {
            *t = k / 2;
            return k % 2 ? SPLIT_OP_B_DATA : SPLIT_OP_B_HDR;
        }
        k -= 2 * lv;
    } else {
        if (k < lv) {
            *t = k;
            return SPLIT_OP_B_DATA;
        }
        k -= lv;
    }
    if (st->r > 0 && k < 2)
        return k ? SPLIT_OP_U_DATA : SPLIT_OP_U_HDR;
    return SPLIT_OP_DONE;
}

/* Bytes held now, plus extra in flight; the peak is what the tests bound. */
static void split_mem_note(split_state_t *st, size_t extra)
{
    size_t h = (size_t)st->ntab * SPLIT_ENTRY_WIRE + st->scap + st->rcap + extra;

    h += ((size_t)st->own.n + st->cur.n + st->nout + st->nxout) * 4;
    for (uint32_t t = 0; t < st->levels; t++)
        h += ((size_t)st->mine[t].n + st->part[t].n) * 4;
    st->held = h;
    if (h > st->peak)
        st->peak = h;
}

static int split_buf_reserve(split_state_t *st, uint8_t **buf, size_t *cap, size_t len)
{
    uint8_t *p;

    if (len <= *cap)
        return ARCOLL_OK;
    p = realloc(*buf, len);
    if (p == NULL)
        return ARCOLL_ERR_NOMEM;
    *buf = p;
    *cap = len;
    split_mem_note(st, 0);
    return ARCOLL_OK;
}

/* tab = merge(tab, b) restricted to keep, sized exactly. */
static int split_tab_absorb(split_state_t *st, const uint8_t *b, uint32_t nb,
                            const split_set_t *keep)
{
    uint32_t cnt = split_tab_merge(st->tab, st->ntab, b, nb, keep, NULL);
    uint8_t *out = malloc((size_t)cnt * SPLIT_ENTRY_WIRE + 1);

    if (out == NULL)
        return ARCOLL_ERR_NOMEM;
    split_mem_note(st, (size_t)cnt * SPLIT_ENTRY_WIRE);
    split_tab_merge(st->tab, st->ntab, b, nb, keep, out);
    free(st->tab);
    st->tab = out;
    st->ntab = cnt;
    return ARCOLL_OK;
}

int split_state_init(split_state_t *st, uint32_t n, uint32_t me, const split_entry_t *mine,
                     int prune)
{
    int rc = ARCOLL_ERR_INVALID;

    memset(st, 0, sizeof(*st));
    st->xcolor = SPLIT_UNDEFINED;
    st->myindex = SPLIT_NONE;
    if (n == 0 || n == SPLIT_NONE || me >= n || mine == NULL || mine->rank != me ||
        mine->color < SPLIT_UNDEFINED)
        goto fail;
    st->n = n;
    st->me = me;
    st->prune = prune != 0;
    st->self = *mine;
    st->p2 = 1;
    while (st->p2 <= n / 2) {
        st->p2 *= 2;
        st->levels++;
    }
    st->r = n - st->p2;
    st->nx = (st->prune ? 4 : 1) * st->levels + (st->r > 0 ? 3 : 0);

    rc = ARCOLL_ERR_NOMEM;
    /* Room for the folded rank's color too. */
    st->own.c = malloc(2 * sizeof(*st->own.c));
    st->cur.c = malloc(2 * sizeof(*st->cur.c));
    st->tab = malloc(SPLIT_ENTRY_WIRE);
    if (st->own.c == NULL || st->cur.c == NULL || st->tab == NULL)
        goto fail;
    if (mine->color != SPLIT_UNDEFINED)
        split_set_add(&st->own, mine->color);
    if (st->prune)
        memcpy(st->cur.c, st->own.c, (size_t)st->own.n * sizeof(*st->own.c));
    st->cur.n = st->prune ? st->own.n : 0;
    /* Full tables keep UNDEFINED entries so that every size follows from n;
     * pruned tables never hold them. */
    if (!st->prune || mine->color != SPLIT_UNDEFINED) {
        split_entry_put(st->tab, 0, mine);
        st->ntab = 1;
    }
    split_mem_note(st, 0);
    return ARCOLL_OK;

fail:
    split_state_fini(st);
    return rc;
}

void split_state_fini(split_state_t *st)
{
    for (uint32_t t = 0; t < SPLIT_MAX_LEVELS; t++) {
        split_set_free(&st->part[t]);
        split_set_free(&st->mine[t]);
    }
    free(st->xout);
    free(st->out);
    split_set_free(&st->cur);
    split_set_free(&st->own);
    free(st->rbuf);
    free(st->sbuf);
    free(st->tab);
    st->xout = st->out = NULL;
    st->rbuf = st->sbuf = st->tab = NULL;
    st->nxout = st->nout = st->ntab = 0;
    st->rcap = st->scap = 0;
}

/* The parent ranks of color c's run in tab. */
static int split_run_extract(const split_state_t *st, int32_t c, uint32_t **ranks, uint32_t *nr)
{
    uint32_t lo = split_tab_gallop(st->tab, 0, st->ntab, c);
    uint32_t hi = c == INT32_MAX ? st->ntab : split_tab_gallop(st->tab, lo, st->ntab, c + 1);

    *ranks = malloc(((size_t)hi - lo + 1) * sizeof(**ranks));
    if (*ranks == NULL)
        return ARCOLL_ERR_NOMEM;
    for (uint32_t i = lo; i < hi; i++)
        (*ranks)[i - lo] = split_le32_get(st->tab + (size_t)i * SPLIT_ENTRY_WIRE + 8);
    *nr = hi - lo;
    return ARCOLL_OK;
}

/* After the last table step: this rank's team, the folded rank's team, and
 * the table is no longer needed. */
static int split_state_extract(split_state_t *st)
{
    int rc = ARCOLL_OK;

    if (st->extracted || st->me >= st->p2)
        goto done;
    if (st->self.color != SPLIT_UNDEFINED) {
        rc = split_run_extract(st, st->self.color, &st->out, &st->nout);
        if (rc != ARCOLL_OK)
            goto done;
        for (uint32_t i = 0; i < st->nout; i++)
            if (st->out[i] == st->me)
                st->myindex = i;
        if (st->myindex == SPLIT_NONE) {
            rc = ARCOLL_ERR_MISMATCH;
            goto done;
        }
    }
    if (st->me < st->r && st->xcolor != SPLIT_UNDEFINED) {
        rc = split_run_extract(st, st->xcolor, &st->xout, &st->nxout);
        if (rc != ARCOLL_OK)
            goto done;
    }
    free(st->tab);
    st->tab = NULL;
    st->ntab = 0;
    st->extracted = 1;
    split_mem_note(st, 0);
done:
    return rc;
}

static void split_hdr_put(uint8_t *h, uint32_t count, uint32_t k)
{
    split_le32_put(h, count);
    split_le32_put(h + 4, SPLIT_HDR_MAGIC ^ k);
}

int split_state_next(split_state_t *st, split_xfer_t *x)
{
    uint32_t t, peer, me = st->me, k = st->k;
    int op, rc = ARCOLL_OK;
    int member = me < st->p2; /* takes part in the doubling steps */

    memset(x, 0, sizeof(*x));
    x->to = x->from = SPLIT_NONE;
    st->rcount = 0;
    op = split_op_at(st, k, &t);
    if (op == SPLIT_OP_U_HDR || op == SPLIT_OP_DONE) {
        rc = split_state_extract(st);
        if (rc != ARCOLL_OK)
            goto done;
    }
    peer = me ^ (1u << t);
    switch (op) {
    case SPLIT_OP_FOLD:
        if (!member) {
            rc = split_buf_reserve(st, &st->sbuf, &st->scap, SPLIT_ENTRY_WIRE);
            if (rc != ARCOLL_OK)
                goto done;
            split_entry_put(st->sbuf, 0, &st->self);
            x->to = me - st->p2;
            x->sbuf = st->sbuf;
            x->slen = SPLIT_ENTRY_WIRE;
        } else if (me < st->r) {
            st->rcount = 1;
            x->from = me + st->p2;
            x->rlen = SPLIT_ENTRY_WIRE;
        }
        break;
    case SPLIT_OP_A_HDR:
    case SPLIT_OP_B_HDR:
        if (!member)
            break;
        if (op == SPLIT_OP_B_HDR) {
            /* Stage what the partner's side will need, and announce its size. */
            uint32_t cnt = split_tab_merge(st->tab, st->ntab, NULL, 0, &st->part[t], NULL);
            /* Nothing to filter out: send the table itself, no copy. */
            st->send_tab = cnt == st->ntab;
            if (!st->send_tab) {
                rc = split_buf_reserve(st, &st->sbuf, &st->scap, (size_t)cnt * SPLIT_ENTRY_WIRE);
                if (rc != ARCOLL_OK)
                    goto done;
                split_tab_merge(st->tab, st->ntab, NULL, 0, &st->part[t], st->sbuf);
            }
            split_hdr_put(st->hdr_s, cnt, k);
        } else {
            split_hdr_put(st->hdr_s, st->cur.n, k);
        }
        x->to = x->from = peer;
        x->sbuf = st->hdr_s;
        x->slen = x->rlen = SPLIT_HDR_WIRE;
        x->rbuf = st->hdr_r;
        break;
    case SPLIT_OP_A_DATA:
        if (!member)
            break;
        rc = split_buf_reserve(st, &st->sbuf, &st->scap, (size_t)st->cur.n * 4);
        if (rc != ARCOLL_OK)
            goto done;
        for (uint32_t i = 0; i < st->cur.n; i++)
            split_le32_put(st->sbuf + (size_t)i * 4, (uint32_t)st->cur.c[i]);
        x->slen = (size_t)st->cur.n * 4;
        x->sbuf = st->sbuf;
        st->rcount = split_le32_get(st->hdr_r);
        x->rlen = (size_t)st->rcount * 4;
        break;
    case SPLIT_OP_B_DATA:
        if (!member)
            break;
        if (st->prune) {
            x->slen = (size_t)split_le32_get(st->hdr_s) * SPLIT_ENTRY_WIRE;
            x->sbuf = st->send_tab ? st->tab : st->sbuf;
            st->rcount = split_le32_get(st->hdr_r);
        } else {
            x->slen = (size_t)st->ntab * SPLIT_ENTRY_WIRE;
            x->sbuf = st->tab;
            st->rcount = split_plan_count(st->n, peer >> t << t, 1u << t);
        }
        x->rlen = (size_t)st->rcount * SPLIT_ENTRY_WIRE;
        break;
    case SPLIT_OP_U_HDR:
        if (me < st->r && st->xcolor != SPLIT_UNDEFINED) {
            split_hdr_put(st->hdr_s, st->nxout, k);
            x->to = me + st->p2;
            x->sbuf = st->hdr_s;
            x->slen = SPLIT_HDR_WIRE;
        } else if (!member && st->self.color != SPLIT_UNDEFINED) {
            x->from = me - st->p2;
            x->rbuf = st->hdr_r;
            x->rlen = SPLIT_HDR_WIRE;
        }
        break;
    case SPLIT_OP_U_DATA:
        if (me < st->r && st->xcolor != SPLIT_UNDEFINED) {
            rc = split_buf_reserve(st, &st->sbuf, &st->scap, (size_t)st->nxout * 4);
            if (rc != ARCOLL_OK)
                goto done;
            for (uint32_t i = 0; i < st->nxout; i++)
                split_le32_put(st->sbuf + (size_t)i * 4, st->xout[i]);
            x->to = me + st->p2;
            x->sbuf = st->sbuf;
            x->slen = (size_t)st->nxout * 4;
        } else if (!member && st->self.color != SPLIT_UNDEFINED) {
            st->rcount = split_le32_get(st->hdr_r);
            x->from = me - st->p2;
            x->rlen = (size_t)st->rcount * 4;
        }
        break;
    default: goto done;
    }
    /* Data exchanges: a side with nothing to move is no message at all. */
    if (op == SPLIT_OP_A_DATA || op == SPLIT_OP_B_DATA) {
        x->to = x->slen ? peer : SPLIT_NONE;
        x->from = x->rlen ? peer : SPLIT_NONE;
    }
    if (x->from != SPLIT_NONE && x->rbuf == NULL) {
        rc = split_buf_reserve(st, &st->rbuf, &st->rcap, x->rlen);
        if (rc != ARCOLL_OK)
            goto done;
        x->rbuf = st->rbuf;
    }
    if (x->to == SPLIT_NONE)
        x->sbuf = NULL;
    return 1;

done:
    return rc;
}

/* A header from the exchange of index k announcing at most max items. */
static int split_hdr_check(const split_state_t *st, uint32_t max)
{
    if (split_le32_get(st->hdr_r + 4) != (SPLIT_HDR_MAGIC ^ st->k) ||
        split_le32_get(st->hdr_r) > max)
        return ARCOLL_ERR_MISMATCH;
    return ARCOLL_OK;
}

/* Pruned, first pass, bit t: the partner's color set is what it will need
 * from this rank at step t of the table pass; this rank's set so far is
 * what it needs itself then. */
static int split_pass_a_absorb(split_state_t *st, uint32_t t)
{
    split_set_t *p = &st->part[t];
    int rc = ARCOLL_ERR_NOMEM;

    p->c = malloc((size_t)st->rcount * sizeof(*p->c) + 1);
    if (p->c == NULL)
        goto fail;
    for (uint32_t i = 0; i < st->rcount; i++) {
        p->c[i] = split_i32(split_le32_get(st->rbuf + (size_t)i * 4));
        if (p->c[i] < 0 || (i > 0 && p->c[i] <= p->c[i - 1])) {
            rc = ARCOLL_ERR_MISMATCH;
            goto fail_set;
        }
    }
    p->n = st->rcount;
    st->mine[t] = st->cur;
    memset(&st->cur, 0, sizeof(st->cur));
    if (t > 0) {
        rc = split_set_union(&st->mine[t], p, &st->cur);
        if (rc != ARCOLL_OK)
            goto fail;
    }
    split_mem_note(st, 0);
    return ARCOLL_OK;

fail_set:
    split_set_free(p);
fail:
    return rc;
}

int split_state_complete(split_state_t *st)
{
    uint32_t t, me = st->me;
    int op = split_op_at(st, st->k, &t), rc = ARCOLL_OK;
    split_entry_t e;

    switch (op) {
    case SPLIT_OP_FOLD:
        if (me >= st->r)
            break;
        split_entry_get(st->rbuf, 0, &e);
        if (e.rank != me + st->p2 || e.color < SPLIT_UNDEFINED) {
            rc = ARCOLL_ERR_MISMATCH;
            goto done;
        }
        st->xcolor = e.color;
        if (e.color != SPLIT_UNDEFINED) {
            split_set_add(&st->own, e.color);
            if (st->prune)
                split_set_add(&st->cur, e.color);
        }
        if (!st->prune || e.color != SPLIT_UNDEFINED)
            rc = split_tab_absorb(st, st->rbuf, 1, NULL);
        break;
    case SPLIT_OP_A_HDR:
    case SPLIT_OP_B_HDR:
        if (me < st->p2)
            rc = split_hdr_check(st, st->n);
        break;
    case SPLIT_OP_U_HDR:
        if (me >= st->p2 && st->self.color != SPLIT_UNDEFINED)
            rc = split_hdr_check(st, st->n);
        break;
    case SPLIT_OP_A_DATA:
        if (me < st->p2)
            rc = split_pass_a_absorb(st, t);
        break;
    case SPLIT_OP_B_DATA:
        if (me >= st->p2)
            break;
        st->rx_entries += st->rcount;
        if (st->prune) {
            rc = split_tab_absorb(st, st->rbuf, st->rcount, &st->mine[t]);
            split_set_free(&st->mine[t]);
            split_set_free(&st->part[t]);
        } else {
            /* Only the last merge may drop colors: until then the partner
             * forwards everything this rank has. */
            rc = split_tab_absorb(st, st->rbuf, st->rcount, t + 1 == st->levels ? &st->own : NULL);
        }
        break;
    case SPLIT_OP_U_DATA:
        if (me < st->p2 || st->self.color == SPLIT_UNDEFINED)
            break;
        st->out = malloc((size_t)st->rcount * sizeof(*st->out) + 1);
        if (st->out == NULL) {
            rc = ARCOLL_ERR_NOMEM;
            goto done;
        }
        st->nout = st->rcount;
        for (uint32_t i = 0; i < st->nout; i++) {
            st->out[i] = split_le32_get(st->rbuf + (size_t)i * 4);
            if (st->out[i] == me)
                st->myindex = i;
        }
        if (st->myindex == SPLIT_NONE)
            rc = ARCOLL_ERR_MISMATCH;
        split_mem_note(st, 0);
        break;
    default: rc = ARCOLL_ERR_STATE; goto done;
    }
    if (rc == ARCOLL_OK)
        st->k++;
done:
    return rc;
}

int split_state_take(split_state_t *st, uint32_t **members, uint32_t *nmembers, uint32_t *myindex)
{
    int rc = ARCOLL_ERR_STATE;

    if (st->k != st->nx)
        goto done;
    rc = split_state_extract(st);
    if (rc != ARCOLL_OK)
        goto done;
    if (st->self.color == SPLIT_UNDEFINED) {
        free(st->out);
        st->out = NULL;
        st->nout = 0;
        st->myindex = SPLIT_NONE;
    }
    *members = st->out;
    *nmembers = st->nout;
    *myindex = st->myindex;
    st->out = NULL;
    st->nout = 0;
done:
    return rc;
}

static int split_drive(uint32_t n, uint32_t me, const split_entry_t *mine, split_xchg_fn xchg,
                       void *arg, int prune, uint32_t **members, uint32_t *nmembers,
                       uint32_t *myindex)
{
    split_state_t st;
    split_xfer_t x;
    int rc = ARCOLL_ERR_INVALID;

    if (xchg == NULL || members == NULL || nmembers == NULL || myindex == NULL)
        goto done;
    rc = split_state_init(&st, n, me, mine, prune);
    if (rc != ARCOLL_OK)
        goto done;
    while ((rc = split_state_next(&st, &x)) == 1) {
        rc = xchg(arg, x.to, x.sbuf, x.slen, x.from, x.rbuf, x.rlen);
        if (rc != ARCOLL_OK)
            goto fini;
        rc = split_state_complete(&st);
        if (rc != ARCOLL_OK)
            goto fini;
    }
    if (rc == ARCOLL_OK)
        rc = split_state_take(&st, members, nmembers, myindex);
fini:
    split_state_fini(&st);
done:
    return rc;
}

int split_run(uint32_t n, uint32_t me, const split_entry_t *mine, split_xchg_fn xchg, void *arg,
              uint32_t **members, uint32_t *nmembers, uint32_t *myindex)
{
    return split_drive(n, me, mine, xchg, arg, 0, members, nmembers, myindex);
}

int split_run_pruned(uint32_t n, uint32_t me, const split_entry_t *mine, split_xchg_fn xchg,
                     void *arg, uint32_t **members, uint32_t *nmembers, uint32_t *myindex)
{
    return split_drive(n, me, mine, xchg, arg, 1, members, nmembers, myindex);
}
