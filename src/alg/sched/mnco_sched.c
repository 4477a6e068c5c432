/* MN-CO schedule builders (alg/sched/mnco_sched.h). */
#include "alg/sched/mnco_sched.h"

#include "alg/sched/morton.h"
#include "arcoll.h"

/* Where side L is cut for n0 of n ranks: in proportion, rounded, and never
 * leaving a part empty while the side can be split. */
static uint32_t mnco_cut(uint32_t len, uint32_t n0, uint32_t n)
{
    uint64_t c = ((uint64_t)len * n0 + n / 2) / n;

    if (len >= 2 && c < 1)
        c = 1;
    if (len >= 2 && c > len - 1)
        c = len - 1;
    return (uint32_t)c;
}

/* Rectangle r for ranks [r0, r0 + n): halve the ranks, cut the longer side
 * (destinations on a tie, as the Morton code's top bit is the row's). */
static void mnco_split(mnco_rect_t r, uint32_t r0, uint32_t n, mnco_rect_t *out)
{
    while (n > 1) {
        uint32_t n0 = n / 2, lx = r.x1 - r.x0, ly = r.y1 - r.y0;
        mnco_rect_t lo = r;
        if (ly >= lx)
            lo.y1 = r.y0 = r.y0 + mnco_cut(ly, n0, n);
        else
            lo.x1 = r.x0 = r.x0 + mnco_cut(lx, n0, n);
        mnco_split(lo, r0, n0, out);
        r0 += n0;
        n -= n0;
    }
    out[r0] = r;
}

void mnco_rects(uint32_t n, mnco_rect_t *out)
{
    mnco_rect_t all = {0, n, 0, n};

    if (n > 0)
        mnco_split(all, 0, n, out);
}

static sched_seg_t mnco_seg(int buf, uint64_t off, uint64_t len)
{
    return (sched_seg_t){.off = off, .len = len, .buf = (uint8_t)buf};
}

static int mnco_in(uint32_t v, uint32_t lo, uint32_t hi)
{
    return v >= lo && v < hi;
}

/* Shared by both collectives: the rectangles (kept with the schedule as its
 * aux), argument checks, and the messages whose layout is the same. */
static int mnco_begin(sched_t *s, uint32_t n, uint32_t me, uint64_t bytes, mnco_rect_t **rects)
{
    if (s == NULL || n == 0 || me >= n || bytes == 0 || bytes > UINT64_MAX / 2 / n / n)
        return ARCOLL_ERR_INVALID;
    sched_reset(s);
    *rects = sched_aux(s, sizeof(**rects) * n);
    if (*rects == NULL)
        return ARCOLL_ERR_NOMEM;
    mnco_rects(n, *rects);
    return ARCOLL_OK;
}

/*
 * Round 0 from rank me as a source: one message to each owner j whose X_j
 * holds me (in order from me + 1 on, so that ranks start on different
 * owners), of `unit` bytes per destination of Y_j at SEND offset y0 * unit
 * (alltoall) or our one block (unit = 0: allgather).
 */
static int mnco_round0_sends(sched_t *s, const mnco_rect_t *rc, uint32_t n, uint32_t me,
                             uint64_t bytes, int a2a)
{
    int st = ARCOLL_OK;

    for (uint32_t i = 1; st == ARCOLL_OK && i < n; i++) {
        uint32_t j = (me + i) % n;
        const mnco_rect_t *q = &rc[j];
        if (!mnco_in(me, q->x0, q->x1) || q->y1 == q->y0)
            continue;
        sched_seg_t g = a2a ? mnco_seg(SCHED_BUF_SEND, q->y0 * bytes, (q->y1 - q->y0) * bytes)
                            : mnco_seg(SCHED_BUF_SEND, 0, bytes);
        st = sched_add_send(s, 0, j, &g, 1);
    }
    return st;
}

/* Round 1 into rank me as a destination: from each owner k whose Y_k holds
 * me, the blocks of X_k at RECV[x0 .. x1). */
static int mnco_round1_recvs(sched_t *s, const mnco_rect_t *rc, uint32_t n, uint32_t me,
                             uint64_t bytes)
{
    int st = ARCOLL_OK;

    for (uint32_t i = 1; st == ARCOLL_OK && i < n; i++) {
        uint32_t k = (me + n - i) % n;
        const mnco_rect_t *q = &rc[k];
        if (!mnco_in(me, q->y0, q->y1) || q->x1 == q->x0)
            continue;
        sched_seg_t g = mnco_seg(SCHED_BUF_RECV, q->x0 * bytes, (q->x1 - q->x0) * bytes);
        st = sched_add_recv(s, 1, k, SCHED_COPY, &g, 1);
    }
    return st;
}

/* Round 1 out of rank me as an owner: to each y of Y_me but me, `len` bytes
 * at TMP offset first + (y - y0) * stride. */
static int mnco_round1_sends(sched_t *s, const mnco_rect_t *r, uint32_t me, uint64_t first,
                             uint64_t stride, uint64_t len)
{
    uint32_t b = r->y1 - r->y0;
    int st = ARCOLL_OK;

    for (uint32_t i = 0; st == ARCOLL_OK && len > 0 && i < b; i++) {
        uint32_t y = r->y0 + (me + 1 + i) % b; /* from me + 1 on, as round 0 */
        if (y == me)
            continue;
        sched_seg_t g = mnco_seg(SCHED_BUF_TMP, first + (uint64_t)(y - r->y0) * stride, len);
        st = sched_add_send(s, 1, y, &g, 1);
    }
    return st;
}

static int mnco_end(sched_t *s, int st)
{
    if (st != ARCOLL_OK)
        sched_reset(s);
    return st;
}

/*
 * TMP: [0, a*b*m) the received rows, T1(x, y) = ((x - x0) * b + y - y0) * m;
 * [a*b*m, 2*a*b*m) the transposed rows, T2(y, x) = a*b*m + ((y - y0) * a +
 * x - x0) * m, so that destination y's message is one run.
 */
int mnco_sched_alltoall(sched_t *s, uint32_t n, uint32_t me, uint64_t bytes)
{
    mnco_rect_t *rc, r;
    uint64_t a, b, m = bytes, half;
    int st = mnco_begin(s, n, me, bytes, &rc);

    if (st != ARCOLL_OK)
        return st;
    r = rc[me];
    a = r.x1 - r.x0;
    b = r.y1 - r.y0;
    half = a * b * m;
    s->tmp_len = 2 * half;
    /* Round 0: our own row of the rectangle is a copy, the other rows come. */
    if (mnco_in(me, r.x0, r.x1) && b > 0) {
        sched_seg_t d = mnco_seg(SCHED_BUF_TMP, (me - r.x0) * b * m, b * m);
        sched_seg_t g = mnco_seg(SCHED_BUF_SEND, r.y0 * m, b * m);
        st = sched_add_local(s, 0, &d, 1, &g, 1);
    }
    if (st == ARCOLL_OK)
        st = mnco_round0_sends(s, rc, n, me, m, 1);
    for (uint32_t x = r.x0; st == ARCOLL_OK && b > 0 && x < r.x1; x++) {
        sched_seg_t d = mnco_seg(SCHED_BUF_TMP, (x - r.x0) * b * m, b * m);
        if (x != me)
            st = sched_add_recv(s, 0, x, SCHED_COPY, &d, 1);
    }
    /* Round 1: the transpose in Morton order (rows = destinations), our own
     * column straight from the received rows into RECV. */
    for (uint64_t c = 0; st == ARCOLL_OK && c < a * b; c++) {
        morton_block_t k = morton_block_rect((uint32_t)b, (uint32_t)a, c);
        if (r.y0 + k.row == me)
            continue;
        sched_seg_t d = mnco_seg(SCHED_BUF_TMP, half + ((uint64_t)k.row * a + k.col) * m, m);
        sched_seg_t g = mnco_seg(SCHED_BUF_TMP, ((uint64_t)k.col * b + k.row) * m, m);
        st = sched_add_local(s, 1, &d, 1, &g, 1);
    }
    for (uint64_t i = 0; st == ARCOLL_OK && mnco_in(me, r.y0, r.y1) && i < a; i++) {
        sched_seg_t d = mnco_seg(SCHED_BUF_RECV, (r.x0 + i) * m, m);
        sched_seg_t g = mnco_seg(SCHED_BUF_TMP, (i * b + (me - r.y0)) * m, m);
        st = sched_add_local(s, 1, &d, 1, &g, 1);
    }
    if (st == ARCOLL_OK)
        st = mnco_round1_sends(s, &r, me, half, a * m, a * m);
    if (st == ARCOLL_OK)
        st = mnco_round1_recvs(s, rc, n, me, m);
    return mnco_end(s, st);
}

/* TMP: [0, a*m) the blocks of X, source x at (x - x0) * m: every destination's
 * message as it is, no transpose. */
int mnco_sched_allgather(sched_t *s, uint32_t n, uint32_t me, uint64_t bytes)
{
    mnco_rect_t *rc, r;
    uint64_t a, m = bytes;
    int st = mnco_begin(s, n, me, bytes, &rc);

    if (st != ARCOLL_OK)
        return st;
    r = rc[me];
    a = r.x1 - r.x0;
    s->tmp_len = r.y1 > r.y0 ? a * m : 0;
    if (mnco_in(me, r.x0, r.x1) && r.y1 > r.y0) {
        sched_seg_t d = mnco_seg(SCHED_BUF_TMP, (me - r.x0) * m, m);
        sched_seg_t g = mnco_seg(SCHED_BUF_SEND, 0, m);
        st = sched_add_local(s, 0, &d, 1, &g, 1);
    }
    if (st == ARCOLL_OK)
        st = mnco_round0_sends(s, rc, n, me, m, 0);
    for (uint32_t x = r.x0; st == ARCOLL_OK && r.y1 > r.y0 && x < r.x1; x++) {
        sched_seg_t d = mnco_seg(SCHED_BUF_TMP, (x - r.x0) * m, m);
        if (x != me)
            st = sched_add_recv(s, 0, x, SCHED_COPY, &d, 1);
    }
    if (st == ARCOLL_OK && mnco_in(me, r.y0, r.y1) && a > 0) {
        sched_seg_t d = mnco_seg(SCHED_BUF_RECV, r.x0 * m, a * m);
        sched_seg_t g = mnco_seg(SCHED_BUF_TMP, 0, a * m);
        st = sched_add_local(s, 1, &d, 1, &g, 1);
    }
    if (st == ARCOLL_OK)
        st = mnco_round1_sends(s, &r, me, 0, 0, a * m);
    if (st == ARCOLL_OK)
        st = mnco_round1_recvs(s, rc, n, me, m);
    return mnco_end(s, st);
}
