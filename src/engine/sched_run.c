/*
 * The schedule executor (engine/engine.h, docs/protocol.md "Schedules").
 *
 * Every ordered pair of ranks has one stream per call: the sender's messages
 * to that peer, in schedule order, cut into fragments of at most one lane of
 * a bounce slot. Fragment k of the stream goes into lane k mod lanes of the
 * sender's slot of the call's bank at the receiver, with flag
 * wire_frag_word(epoch, k); the first fragment of each message carries the
 * message's length in the lane header, which the receiver checks against its
 * own schedule before it copies a byte. Fragment k >= lanes waits for the
 * receiver's (cumulative) credit for k - lanes, as on the flat copy path; the
 * first lanes need none (the bank is free, protocol.md §5). A stream to a
 * peer at a power-of-two distance (or n minus one) has more lanes, in its
 * pipe entry at the receiver (wire_stream_lane_off): its window is the
 * slot's lanes plus the pipe's, fragment k in lane k mod the window.
 *
 * PAP: sends whose dependencies are met go first to peers whose data has
 * already landed here, then to the rest; a receive is applied as soon as its
 * data lands (and the local copies of its round have run).
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/reduce.h"
#include "engine/sched_exec.h"
#include "util/log.h"

static uint64_t sx_sig(const coll_req_t *r, const sched_msg_t *m)
{
    return r->args.sig ^ (m->unordered ? SX_SIG_UNORDERED : 0);
}

sched_t *eng_sched(coll_req_t *r)
{
    if (r->sx == NULL) {
        r->sx = calloc(1, sizeof(*r->sx));
        if (r->sx == NULL)
            return NULL;
        sched_init(&r->sx->s);
    }
    return &r->sx->s;
}

void eng_sched_release(coll_req_t *r)
{
    sched_exec_t *x = r->sx;

    if (x == NULL)
        return;
    sched_free(&x->s);
    free(x->tx_head);
    free(x->tx_off);
    free(x->next_send);
    free(x->send_left);
    free(x->rx_cand);
    free(x->mem.buf[SCHED_BUF_TMP]);
    free(x);
    r->sx = NULL;
}

/* Grow a reused array to n elements of sz bytes. */
static int sx_grow(void **arr, uint32_t *cap, uint32_t n, size_t sz)
{
    void *p;

    if (n <= *cap)
        return ARCOLL_OK;
    p = realloc(*arr, (size_t)n * sz);
    if (p == NULL)
        return ARCOLL_ERR_NOMEM;
    *arr = p;
    *cap = n;
    return ARCOLL_OK;
}

/* The per-peer, per-message and per-round arrays, each one block, reused. */
static int sx_reserve(sched_exec_t *x, uint32_t n, uint32_t nmsg, uint32_t nround)
{
    uint32_t cap_n = x->cap_n;

    if (sx_grow((void **)&x->tx_head, &x->cap_n, n, 15 * sizeof(uint32_t)) != ARCOLL_OK ||
        sx_grow((void **)&x->tx_off, &cap_n, n, 2 * sizeof(uint64_t)) != ARCOLL_OK ||
        sx_grow((void **)&x->next_send, &x->cap_msg, nmsg, 2 * sizeof(uint32_t)) != ARCOLL_OK ||
        sx_grow((void **)&x->send_left, &x->cap_round, nround, 3 * sizeof(uint32_t)) != ARCOLL_OK)
        return ARCOLL_ERR_NOMEM;
    x->rx_head = x->tx_head + x->cap_n;
    x->tx_frag = x->rx_head + x->cap_n;
    x->rx_frag = x->tx_frag + x->cap_n;
    x->rx_total = x->rx_frag + x->cap_n;
    x->tx_peers = x->rx_total + x->cap_n;
    x->rx_peers = x->tx_peers + x->cap_n;
    x->tx_seen = x->rx_peers + x->cap_n;
    x->tx_pipe = x->tx_seen + x->cap_n;
    x->rx_pipe = x->tx_pipe + x->cap_n;
    x->rx_cred = x->rx_pipe + x->cap_n;
    x->tx_seq = x->rx_cred + x->cap_n;
    x->rx_seq = x->tx_seq + x->cap_n;
    x->tx_zc = x->rx_seq + x->cap_n;
    x->rx_zc = x->tx_zc + x->cap_n;
    x->rx_off = x->tx_off + x->cap_n;
    x->next_recv = x->next_send + x->cap_msg;
    x->recv_left = x->send_left + x->cap_round;
    x->local_left = x->recv_left + x->cap_round;
    return ARCOLL_OK;
}

static uint32_t sx_frags(uint64_t len, uint64_t bounce)
{
    return len == 0 ? 1 : (uint32_t)((len + bounce - 1) / bounce);
}

/* Fragments of each whole stream we receive (the credit rule needs them):
 * counted at start and again after a dynamic schedule's hook changed lengths.
 * Messages not yet sized count one fragment, so a credit is never withheld
 * from a stream that has more to come. Counted in slot lanes: a stream with
 * pipe lanes, which are no smaller, has at most as many, and an overcount
 * only sends a credit nobody waits for. */
static int sx_count_frags(coll_req_t *r, sched_exec_t *x)
{
    const sched_t *s = &x->s;
    uint64_t bounce = r->team->layout.frag;

    memset(x->rx_total, 0, sizeof(uint32_t) * r->team->size);
    for (uint32_t i = 0; i < s->nrecv; i++) {
        uint32_t p = s->recv[i].peer;
        uint64_t total = (uint64_t)x->rx_total[p] + sx_frags(sched_msg_len(s, &s->recv[i]), bounce);
        if (total >= WIRE_FRAG_REJECT) {
            log_err("%s: more than %u copy-path fragments from one peer in one call",
                    coll_type_name(r->type), WIRE_FRAG_REJECT - 1);
            return ARCOLL_ERR_INVALID;
        }
        x->rx_total[p] = (uint32_t)total;
    }
    return ARCOLL_OK;
}

/* Link each stream's messages in list order; count rounds and fragments. */
static int sx_plan(coll_req_t *r, sched_exec_t *x)
{
    struct arcoll_team *t = r->team;
    const sched_t *s = &x->s;
    uint32_t n = t->size, nr = s->nrounds + 1, *last_s, *last_r;
    int rc;

    rc = sx_reserve(x, n, s->nsend > s->nrecv ? s->nsend : s->nrecv, nr);
    if (rc != ARCOLL_OK)
        return rc;
    memset(x->tx_head, 0xff, sizeof(uint32_t) * n);
    memset(x->rx_head, 0xff, sizeof(uint32_t) * n);
    memset(x->tx_frag, 0, sizeof(uint32_t) * n);
    memset(x->rx_frag, 0, sizeof(uint32_t) * n);
    memset(x->rx_total, 0, sizeof(uint32_t) * n);
    memset(x->rx_cred, 0, sizeof(uint32_t) * n);
    memset(x->tx_seq, 0, sizeof(uint32_t) * 4 * x->cap_n); /* tx_seq .. rx_zc */
    memset(x->tx_off, 0, sizeof(uint64_t) * n);
    memset(x->rx_off, 0, sizeof(uint64_t) * n);
    memset(x->send_left, 0, sizeof(uint32_t) * nr * 3);
    x->tx_unordered = 0;
    /* The stream tails, kept in the fragment counters until the walk is done. */
    last_s = x->tx_frag;
    last_r = x->rx_frag;
    for (uint32_t i = 0; i < s->nsend; i++) {
        uint32_t p = s->send[i].peer;
        if (p >= n || p == t->rank)
            goto bad_peer;
        x->next_send[i] = SX_NONE;
        if (x->tx_head[p] == SX_NONE)
            x->tx_head[p] = i;
        else
            x->next_send[last_s[p]] = i;
        last_s[p] = i;
        if (!s->send[i].unordered)
            x->send_left[s->send[i].round]++;
        else
            x->tx_unordered++;
    }
    x->ntx_peers = 0;
    for (uint32_t i = 1, p = t->rank; i < n; i++) {
        p = p == 0 ? n - 1 : p - 1;
        if (x->tx_head[p] != SX_NONE) {
            x->tx_peers[x->ntx_peers++] = p;
            x->tx_pipe[p] = wire_pipe_of(&t->layout, t->rank, p);
        }
    }
    for (uint32_t i = 0; i < s->nrecv; i++) {
        uint32_t p = s->recv[i].peer;
        if (p >= n || p == t->rank)
            goto bad_peer;
        x->next_recv[i] = SX_NONE;
        if (x->rx_head[p] == SX_NONE)
            x->rx_head[p] = i;
        else
            x->next_recv[last_r[p]] = i;
        last_r[p] = i;
        if (!s->recv[i].unordered)
            x->recv_left[s->recv[i].round]++;
    }
    x->nrx_peers = 0;
    for (uint32_t p = 0; p < n; p++) {
        if (x->rx_head[p] != SX_NONE) {
            x->rx_peers[x->nrx_peers++] = p;
            x->rx_pipe[p] = wire_pipe_of(&t->layout, p, t->rank);
        }
    }
    rc = sx_count_frags(r, x);
    if (rc != ARCOLL_OK)
        return rc;
    for (uint32_t i = 0; i < s->nlocal; i++)
        x->local_left[s->local[i].round < s->nrounds ? s->local[i].round : s->nrounds]++;
    /* A dynamic schedule's hooks are local steps of rounds 0 .. nrounds. */
    for (uint32_t i = 0; s->hook != NULL && i <= s->nrounds; i++)
        x->local_left[i]++;
    memset(x->tx_frag, 0, sizeof(uint32_t) * n);
    memset(x->rx_frag, 0, sizeof(uint32_t) * n);
    x->sends = s->nsend;
    x->recvs = s->nrecv;
    x->locals = s->nlocal + (s->hook != NULL ? s->nrounds + 1 : 0);
    x->hook_next = 0;
    x->recv_ok = x->send_ok = x->local_ok = 0;
    x->local_next = x->order_next = 0;
    x->scan_valid = 0;
    x->rx_retry = 0;
    return ARCOLL_OK;

bad_peer:
    log_err("%s (%s): schedule names team rank out of range or this rank", coll_type_name(r->type),
            r->alg->name);
    return ARCOLL_ERR_INVALID;
}

/* Advance the "everything below this round is done" marks. */
static void sx_rounds(sched_exec_t *x)
{
    uint32_t nr = x->s.nrounds;

    while (x->recv_ok < nr && x->recv_left[x->recv_ok] == 0)
        x->recv_ok++;
    while (x->send_ok < nr && x->send_left[x->send_ok] == 0)
        x->send_ok++;
    while (x->local_ok <= nr && x->local_left[x->local_ok] == 0)
        x->local_ok++;
}

/* Copy len bytes between the concatenations of two segment lists. */
static void sx_copy_segs(coll_req_t *r, sched_exec_t *x, const sched_seg_t *dst, uint32_t nd,
                         const sched_seg_t *src, uint32_t ns)
{
    uint32_t i = 0, j = 0;
    uint64_t di = 0, sj = 0;

    while (i < nd && j < ns) {
        uint64_t len = dst[i].len - di < src[j].len - sj ? dst[i].len - di : src[j].len - sj;
        if (len) {
            eng_cost(r->team->ctx, CHAN_COST_COPY, len);
            memmove(x->mem.buf[dst[i].buf] + dst[i].off + di,
                    x->mem.buf[src[j].buf] + src[j].off + sj, len);
        }
        di += len;
        sj += len;
        if (di == dst[i].len) {
            i++;
            di = 0;
        }
        if (j < ns && sj == src[j].len) {
            j++;
            sj = 0;
        }
    }
}

/* Run the local copies and round hooks whose turn has come (sched.h rule 4,
 * dynamic schedules). */
static int sx_locals(coll_req_t *r, sched_exec_t *x, int outstanding)
{
    sched_t *s = &x->s;

    for (;;) {
        const sched_msg_t *m = x->local_next < s->nlocal ? &s->local[x->local_next] : NULL;
        uint32_t round = m == NULL ? UINT32_MAX : m->round < s->nrounds ? m->round : s->nrounds;
        if (s->hook != NULL && x->hook_next <= s->nrounds && x->hook_next <= round) {
            uint32_t h = x->hook_next;
            int rc;
            if (h > x->recv_ok || h > x->send_ok)
                return ARCOLL_OK;
            x->mem.pinned = outstanding != 0;
            x->mem.copied = 0;
            rc = s->hook(s->hook_arg, s, &x->mem, h);
            /* After the hook, but before the puts it enables: it copied
             * only into memory of this rank's own. */
            eng_cost(r->team->ctx, CHAN_COST_COPY, x->mem.copied);
            if (rc == ARCOLL_INPROGRESS)
                return ARCOLL_OK; /* TMP must grow but may not move yet */
            if (rc == ARCOLL_OK)
                rc = sx_count_frags(r, x);
            if (rc != ARCOLL_OK)
                return rc;
            x->hook_next++;
            x->locals--;
            x->local_left[h]--;
            sx_rounds(x);
            continue;
        }
        if (m == NULL)
            return ARCOLL_OK;
        if (round > x->recv_ok || round > x->send_ok)
            return ARCOLL_OK;
        /* Sends of earlier rounds must be complete here before we overwrite. */
        if (round > 0 && s->nsend > 0 && outstanding != 0)
            return ARCOLL_OK;
        sx_copy_segs(r, x, s->segs + m->seg, m->nseg, s->segs + sched_src_seg(m), m->src_nseg);
        x->local_next++;
        x->locals--;
        x->local_left[round]--;
        sx_rounds(x);
    }
}

/* Apply len bytes of the slot payload at message offset off to its segments. */
static void sx_apply(coll_req_t *r, sched_exec_t *x, const sched_msg_t *m, uint64_t off,
                     const char *src, uint64_t len)
{
    const sched_seg_t *g = x->s.segs + m->seg;

    for (uint32_t i = 0; i < m->nseg && len > 0; i++) {
        uint64_t take;
        char *dst;
        if (off >= g[i].len) {
            off -= g[i].len;
            continue;
        }
        take = g[i].len - off < len ? g[i].len - off : len;
        dst = x->mem.buf[g[i].buf] + g[i].off + off;
        if (m->action == SCHED_REDUCE) {
            eng_cost(r->team->ctx, CHAN_COST_REDUCE, take);
            reduce_apply(r->args.dtype, r->args.op, dst, src, take / r->args.elem);
        } else {
            memcpy(dst, src, take);
        }
        src += take;
        len -= take;
        off = 0;
    }
}

void eng_sched_reject(coll_req_t *r, uint32_t p)
{
    struct arcoll_team *t = r->team;
    sched_exec_t *x = r->sx;
    chan_t *c = t->ctx->chan;

    if (x->rx_head[p] != SX_NONE) {
        sx_drop_rx(x, p);
        r->peers[p].rx_done = 1;
    }
    r->deferred = ARCOLL_ERR_MISMATCH;
    /* A sender waiting for a credit learns of it; a failed write here shows
     * as the peer's failure elsewhere, the mismatch is what we report. */
    (void)c->ops->put_u64(c, t->ranks[p], wire_frag_word(r->epoch, WIRE_FRAG_REJECT),
                          &t->peer_region[p], wire_cred_off(&t->layout, t->rank, r->bank));
}

/* A peer whose calls do not line up with ours, or in another kind of call:
 * drop its receives and sends, tell it, ARCOLL_ERR_MISMATCH at the end (the
 * request's drop_peer, for the engine's checks). */
static void eng_sched_drop_peer(coll_req_t *r, uint32_t p)
{
    eng_sched_reject(r, p);
    sx_drop_tx(r->sx, p);
    r->peers[p].rx_done = 1;
    r->peers[p].tx_state = COLL_TX_DONE;
}

void eng_sched_reject_pending(coll_req_t *r)
{
    for (uint32_t p = 0; p < r->team->size; p++)
        if (r->sx->rx_head[p] != SX_NONE)
            eng_sched_reject(r, p);
}

/* Take the next fragment of peer p's stream if it has landed: 1 taken, 0 not
 * (or the stream rejected). */
static int sx_rx_frag(coll_req_t *r, sched_exec_t *x, uint32_t p)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;
    uint32_t k = x->rx_frag[p], mi = x->rx_head[p];
    uint64_t off = wire_stream_lane_off(&t->layout, p, r->bank, x->rx_pipe[p], k);
    const wire_slot_hdr_t *hdr = (const wire_slot_hdr_t *)((char *)t->region.addr + off);
    const sched_msg_t *m = &x->s.recv[mi];
    uint64_t len, b = wire_stream_frag(&t->layout, x->rx_pipe[p], k), flen, sig = sx_sig(r, m);
    int reject = 0;

    if (m->round >= x->local_ok || wire_load(&t->region, off) != wire_frag_word(r->epoch, k))
        return 0;
    len = sched_msg_len(&x->s, m);
    if (x->rx_off[p] == 0 && m->open && hdr->sig == sig && x->s.on_size != NULL) {
        /* The length is the sender's: the algorithm places the message now. */
        int rc = x->s.on_size(x->s.hook_arg, &x->s, &x->mem, mi, hdr->size);
        if (rc == ARCOLL_INPROGRESS) {
            x->rx_retry = 1; /* landed, not taken: no landing will say so again */
            return 0;        /* taken once TMP may move */
        }
        if (rc == ARCOLL_OK)
            rc = sx_count_frags(r, x);
        if (rc != ARCOLL_OK && rc != ARCOLL_ERR_MISMATCH)
            return rc;
        reject = rc == ARCOLL_ERR_MISMATCH;
        len = sched_msg_len(&x->s, m);
    }
    if (x->rx_off[p] == 0 && (reject || hdr->size != len || hdr->sig != sig)) {
        c->ops->put_u64(c, t->ranks[p], wire_frag_word(r->epoch, WIRE_FRAG_REJECT),
                        &t->peer_region[p], wire_cred_off(&t->layout, t->rank, r->bank));
        if (!r->deferred && hdr->sig == (sig ^ SX_SIG_UNORDERED))
            log_err("%s (epoch %llu, %s): team rank %u sent a block direct where this rank "
                    "expects it routed, or the reverse (round %u): its counts disagree with ours",
                    coll_type_name(r->type), (unsigned long long)r->epoch, r->alg->name, p,
                    m->round);
        else if (!r->deferred && hdr->sig != sig)
            log_err("%s (epoch %llu, %s): team rank %u called it with other arguments than this "
                    "rank (its size, count, datatype, op or receive counts differ), or passes on "
                    "such a "
                    "disagreement",
                    coll_type_name(r->type), (unsigned long long)r->epoch, r->alg->name, p);
        else if (!r->deferred && reject)
            log_err("%s (epoch %llu, %s): team rank %u sent a %llu-byte message that this rank "
                    "cannot take (round %u): its counts disagree with ours",
                    coll_type_name(r->type), (unsigned long long)r->epoch, r->alg->name, p,
                    (unsigned long long)hdr->size, m->round);
        else if (!r->deferred)
            log_err("%s (epoch %llu, %s): team rank %u sent %llu bytes where this rank expects "
                    "%llu (round %u): its counts disagree with ours",
                    coll_type_name(r->type), (unsigned long long)r->epoch, r->alg->name, p,
                    (unsigned long long)hdr->size, (unsigned long long)len, m->round);
        r->deferred = ARCOLL_ERR_MISMATCH;
        sx_drop_rx(x, p);
        r->peers[p].rx_done = 1;
        return 0;
    }
    flen = len - x->rx_off[p] < b ? len - x->rx_off[p] : b;
    sx_apply(r, x, m, x->rx_off[p], (const char *)hdr + WIRE_LINE, flen);
    x->rx_off[p] += flen;
    x->rx_frag[p] = ++k;
    r->peers[p].rx_frag = k;
    if (x->rx_off[p] == len) {
        x->rx_off[p] = 0;
        sx_rx_next(r, x, p);
    }
    return 1;
}

/* Receive what landed from peer p: every fragment in its lanes, in stream
 * order, then one credit for the last while more are to come, once at least
 * half the stream's window (rounded up) is uncredited. The sender waits only
 * with a whole window uncredited (wire_frag_credited), all of it written, so
 * the credit it waits for always comes once those fragments are taken; with
 * a window of one, a credit every pass that took something. (Not only when
 * the sender needs it to reuse a lane: a message not yet sized counts one
 * fragment in rx_total, so that test could withhold a credit it waits for.
 * k < rx_total whenever the stream has messages left, as every message left
 * counts at least one fragment; the test below only skips a finished one.) */
static int sx_rx(coll_req_t *r, sched_exec_t *x, uint32_t p)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;
    uint32_t k0 = x->rx_frag[p], k, half = (wire_stream_window(&t->layout, x->rx_pipe[p]) + 1) / 2;
    int rc = 0;

    while (x->rx_head[p] != SX_NONE) {
        /* A message that meets its sender by advertisement, unless the
         * advertisement said "copy" (then its fragments, as any other). */
        if (x->rx_zc[p] != SX_ZC_COPY && sx_zc_ok(x, &x->s.recv[x->rx_head[p]], x->rx_seq[p]))
            rc = sx_zc_rx(r, x, p);
        else if ((rc = sx_rx_frag(r, x, p)) == 0 && x->zc_min != 0 && x->rx_head[p] != SX_NONE)
            rc = sx_zc_late(r, x, p);
        if (rc != 1 && rc != 2)
            break;
    }
    if (rc < 0)
        return rc;
    k = x->rx_frag[p];
    /* A rejected stream keeps its reject credit; a finished one needs none. */
    if (k == k0 || x->rx_head[p] == SX_NONE || k >= x->rx_total[p] || k - x->rx_cred[p] < half)
        return ARCOLL_OK;
    x->rx_cred[p] = k;
    return c->ops->put_u64(c, t->ranks[p], wire_frag_word(r->epoch, k - 1), &t->peer_region[p],
                           wire_cred_off(&t->layout, t->rank, r->bank));
}

/* Write the next fragment of the stream to peer p if allowed: 1 written, 0 not. */
static int sx_tx_frag(coll_req_t *r, sched_exec_t *x, uint32_t p)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;
    const chan_rmem_t *dst = &t->peer_region[p];
    uint32_t k = x->tx_frag[p], mi = x->tx_head[p];
    uint64_t off = wire_stream_lane_off(&t->layout, t->rank, r->bank, x->tx_pipe[p], k),
             b = wire_stream_frag(&t->layout, x->tx_pipe[p], k);
    const sched_msg_t *m = &x->s.send[mi];
    uint64_t len, at = x->tx_off[p], flen, pos = 0;
    const sched_seg_t *g = x->s.segs + m->seg;
    int cr = t->ranks[p], rc;

    if (m->round > x->recv_ok || m->round >= x->local_ok)
        return 0;
    if (at == 0 && x->tx_zc[p] != SX_ZC_COPY && sx_zc_ok(x, m, x->tx_seq[p])) {
        rc = sx_zc_tx(r, x, p);
        if (rc != 2)
            return rc;
        /* The receiver asked for fragments: from here as any message. */
    }
    if (k > 0) {
        uint64_t cred = wire_load(&t->region, wire_cred_off(&t->layout, p, r->bank));
        if (cred == wire_frag_word(r->epoch, WIRE_FRAG_REJECT)) {
            if (!r->deferred)
                log_err("%s (epoch %llu, %s): team rank %u rejected our message: its size "
                        "or counts disagree with ours",
                        coll_type_name(r->type), (unsigned long long)r->epoch, r->alg->name, p);
            r->deferred = ARCOLL_ERR_MISMATCH;
            sx_drop_tx(x, p);
            r->peers[p].tx_state = COLL_TX_DONE;
            return 0;
        }
        if (!wire_frag_credited(cred, r->epoch, k, wire_stream_window(&t->layout, x->tx_pipe[p])))
            return 0;
    } else if (x->wait_adv &&
               wire_load(&t->region, wire_ctrl_off(&t->layout, p, r->bank)) != r->epoch) {
        return 0; /* not before the receiver is in this call (protocol.md §5); its flag is all */
    }
    len = sched_msg_len(&x->s, m);
    flen = len - at < b ? len - at : b;
    if (at == 0) {
        /* size, sig (copied at the call, chan.h). After a mismatch here, what we
         * send is poisoned: ranks downstream learn of it instead of using it. */
        uint64_t sig = sx_sig(r, m), hdr[2] = {len, r->deferred ? ~sig : sig};
        rc = c->ops->put(c, cr, hdr, sizeof(hdr), NULL, dst, off + offsetof(wire_slot_hdr_t, size));
        if (rc != ARCOLL_OK)
            return rc;
    }
    /* The fragment's bytes, gathered from the message's segments. */
    for (uint32_t i = 0; i < m->nseg && pos < at + flen; i++) {
        uint64_t lo = pos > at ? pos : at,
                 hi = pos + g[i].len < at + flen ? pos + g[i].len : at + flen;
        if (hi > lo) {
            rc = c->ops->put(c, cr, x->mem.buf[g[i].buf] + g[i].off + (lo - pos), hi - lo, NULL,
                             dst, off + WIRE_LINE + (lo - at));
            if (rc != ARCOLL_OK)
                return rc;
        }
        pos += g[i].len;
    }
    rc = c->ops->put_u64(c, cr, wire_frag_word(r->epoch, k), dst, off);
    if (rc != ARCOLL_OK)
        return rc;
    x->tx_frag[p] = k + 1;
    r->peers[p].tx_frag = k + 1;
    r->peers[p].tx_state = COLL_TX_ACTIVE;
    x->tx_off[p] = at + flen;
    if (x->tx_off[p] == len)
        sx_tx_next(r, x, p);
    return 1;
}

/* Write the fragments of peer p's stream that the rounds and the lanes allow
 * (in order mode: of the current message only): 1 if any, 0 if none. */
static int sx_tx(coll_req_t *r, sched_exec_t *x, uint32_t p)
{
    uint32_t before = x->order_next;
    int rc, wrote = 0;

    while ((rc = sx_tx_frag(r, x, p)) == 1) {
        wrote = 1;
        if (x->tx_head[p] == SX_NONE || (x->in_order && x->order_next != before))
            break;
    }
    return rc < 0 ? rc : wrote;
}

/* Has peer p's data of this call landed here (PAP's arrival signal)? */
static int sx_arrived(coll_req_t *r, sched_exec_t *x, uint32_t p)
{
    struct arcoll_team *t = r->team;

    if (x->rx_frag[p] > 0 || (x->zc_min != 0 && sx_zc_arrived(r, p)))
        return 1;
    return x->rx_head[p] != SX_NONE &&
           wire_load(&t->region, wire_slot_off(&t->layout, p, r->bank)) ==
               wire_frag_word(r->epoch, 0);
}

/* May any send left go by the round rules (sched.h rule 1; sx_tx)? Ordered
 * sends left are of rounds >= send_ok, unordered ones of round 0. */
static int sx_round_may_send(const sched_exec_t *x)
{
    if (x->tx_unordered > 0 && x->local_ok > 0)
        return 1;
    return x->send_ok < x->s.nrounds && x->send_ok <= x->recv_ok && x->send_ok < x->local_ok;
}

static int sx_sends(coll_req_t *r, sched_exec_t *x)
{
    int rc;

    if (x->in_order) {
        /* Direct: the list order, one message at a time. */
        while (x->order_next < x->s.nsend) {
            uint32_t p = x->s.send[x->order_next].peer;
            uint32_t before = x->order_next;
            if (x->tx_head[p] == SX_NONE) { /* dropped by a mismatch */
                x->order_next++;
                continue;
            }
            rc = sx_tx(r, x, p);
            if (rc < 0)
                return rc;
            if (rc == 0 || x->order_next == before)
                return ARCOLL_OK; /* blocked, or a multi-fragment message under way */
        }
        return ARCOLL_OK;
    }
    /* Every send left waits for an earlier round (sx_tx's test): skip the
     * passes, which would visit every peer left for nothing, as often as a
     * rank waiting for a round's data polls. */
    if (!sx_round_may_send(x))
        return ARCOLL_OK;
    /* PAP: arrived peers first, then the others (copy path: no readiness
     * needed). The second pass skips the ones the first found arrived (its
     * answer, not a second look: a peer that lands in between goes first in
     * the next pass): the first just tried them, and what stopped them (a
     * credit) is a pass away at best. */
    for (int pass = 0; pass < 2 && x->sends; pass++) {
        uint32_t k = 0;
        if (pass == 1 && !x->by_arrival)
            break; /* ARCOLL_SCHED_ORDER=fixed: one pass in the fixed order */
        for (uint32_t i = 0; i < x->ntx_peers; i++) {
            uint32_t p = x->tx_peers[i];
            int go = 0;
            if (x->tx_head[p] != SX_NONE) {
                if (!x->by_arrival)
                    go = 1;
                else if (pass == 0)
                    go = x->tx_seen[p] = (uint32_t)sx_arrived(r, x, p);
                else
                    go = !x->tx_seen[p];
            }
            if (go) {
                rc = sx_tx(r, x, p);
                if (rc < 0) {
                    memmove(&x->tx_peers[k], &x->tx_peers[i],
                            sizeof(uint32_t) * (x->ntx_peers - i));
                    x->ntx_peers = k + x->ntx_peers - i;
                    return rc;
                }
            }
            if (x->tx_head[p] != SX_NONE)
                x->tx_peers[k++] = p;
        }
        x->ntx_peers = k;
    }
    return ARCOLL_OK;
}

int eng_sched_start(coll_req_t *r, int mode)
{
    struct arcoll_team *t = r->team;
    sched_exec_t *x = r->sx;
    int rc;

    if (x == NULL)
        return ARCOLL_ERR_NOMEM;
    r->drop_peer = eng_sched_drop_peer;
    /* The first call after partial exchanges cannot lean on the full-exchange
     * chain of protocol.md §5 either: it waits for advertisements too. */
    if (mode == ENG_SCHED_PAP && t->after_partial)
        mode = ENG_SCHED_PARTIAL;
    t->after_partial = r->args.type == COLL_SENDRECV;
    rc = sx_plan(r, x);
    if (rc != ARCOLL_OK)
        return rc;
    /* The slot's previous call completed with nothing outstanding. */
    x->mem.pinned = 0;
    if (sched_mem_tmp(&x->mem, x->s.tmp_len) != ARCOLL_OK) {
        log_err("%s: out of memory for a %zu-byte scratch buffer", coll_type_name(r->type),
                x->s.tmp_len);
        return ARCOLL_ERR_NOMEM;
    }
    x->mem.buf[SCHED_BUF_SEND] = (char *)(uintptr_t)r->args.sbuf;
    x->mem.buf[SCHED_BUF_RECV] = r->args.rbuf;
    x->in_order = mode == ENG_SCHED_DIRECT;
    x->by_arrival = t->ctx->cfg.sched_order == CORE_SCHED_ORDER_ARRIVAL;
    x->wait_adv = mode != ENG_SCHED_PAP;
    sx_zc_plan(r, x, mode);
    for (uint32_t p = 0; p < t->size; p++) {
        r->peers[p].rx_done = x->rx_head[p] == SX_NONE;
        r->peers[p].tx_state = x->tx_head[p] == SX_NONE ? COLL_TX_DONE : COLL_TX_IDLE;
    }
    sx_rounds(x);
    /* Direct waits for each receiver's readiness: receivers advertise it to
     * everyone; a partial schedule only to the peers it receives from. The
     * sender reads the flag only (sx_tx), so it goes alone, without a body:
     * one write per pair (docs/protocol.md §2). */
    for (uint32_t i = 0; mode != ENG_SCHED_PAP && i < t->size; i++) {
        uint32_t p = mode == ENG_SCHED_DIRECT ? (t->rank + 1 + i) % t->size : i;
        if (p == t->rank || (mode == ENG_SCHED_PARTIAL && x->rx_head[p] == SX_NONE))
            continue;
        rc = coll_ready_to(r, p);
        if (rc != ARCOLL_OK)
            return rc;
    }
    return ARCOLL_OK;
}

static int sx_cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

/* The peers with receives left whose slot of this call's bank a landing
 * since the last scan wrote (chan_model_ops.landed_at), into x->rx_cand in rank
 * order, each once; -1 if the channel forgot some of those landings or they
 * are too many to be worth sorting (then a whole scan). */
static int sx_landed_peers(coll_req_t *r, sched_exec_t *x, uint64_t landed)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;
    const wire_layout_t *l = &t->layout;
    uintptr_t lo = (uintptr_t)t->region.addr + l->off_slot;
    uintptr_t plo = (uintptr_t)t->region.addr + l->off_pipe;
    uint64_t span = (uint64_t)t->size * l->banks * l->slot_stride;
    uint64_t pspan = (uint64_t)l->pipes * l->banks * l->pipe_stride;
    uint32_t n = 0, k = 0;

    if (landed == x->scan_landed)
        return 0; /* the common poll: nothing new */
    if (landed - x->scan_landed > SX_CAND_MAX)
        return -1;
    if (x->rx_cand == NULL && (x->rx_cand = malloc(SX_CAND_MAX * sizeof(uint32_t))) == NULL)
        return -1; /* a whole scan needs no memory */
    for (uint64_t seq = x->scan_landed; seq < landed; seq++) {
        uintptr_t at = (uintptr_t)c->ops->model->landed_at(c, seq);
        uint64_t q;
        if (at == 0)
            return -1;
        /* A pipe entry's lane: its writer is the peer at its distance
         * below this rank. */
        if (at >= plo && at - plo < pspan) {
            uint32_t p;
            q = (at - plo) / l->pipe_stride;
            p = (uint32_t)((t->rank + t->size - wire_pipe_dist(l, (uint32_t)(q / l->banks))) %
                           t->size);
            if (q % l->banks == r->bank && x->rx_head[p] != SX_NONE)
                x->rx_cand[n++] = p;
            continue;
        }
        /* Credits, advertisements, other calls' banks, other teams: no
         * receive of ours waits on them. */
        if (at < lo || at - lo >= span)
            continue;
        q = (at - lo) / l->slot_stride;
        if (q % l->banks == r->bank && x->rx_head[q / l->banks] != SX_NONE)
            x->rx_cand[n++] = (uint32_t)(q / l->banks);
    }
    if (n > 1)
        qsort(x->rx_cand, n, sizeof(uint32_t), sx_cmp_u32);
    for (uint32_t i = 0; i < n; i++)
        if (k == 0 || x->rx_cand[k - 1] != x->rx_cand[i])
            x->rx_cand[k++] = x->rx_cand[i];
    return (int)k;
}

/* Receive from the peers with messages left, in rank order; finished ones
 * leave the list (x->rx_peers), so a pass costs the peers left. On a channel
 * that tells where puts landed, only the peers whose slots changed since the
 * last scan, in the same order: a whole scan would do the same, because a
 * receive it could not take waits for its slot or for the round gate. (Only
 * the simulator can tell; there a whole scan is a cache miss per pending
 * peer, as often as puts land: O(N) per put for a linear schedule.) */
static int sx_recvs(coll_req_t *r, sched_exec_t *x)
{
    chan_t *c = r->team->ctx->chan;
    const struct chan_model_ops *m = c->ops->model;
    uint64_t landed = m != NULL && m->landed_at != NULL ? m->landed(c) : 0;
    uint32_t k = 0, i;
    int rc = ARCOLL_OK, nc = -1;

    /* Zero-copy receives wait for a done word or to advertise, and a late
     * copy-path receive advertises after SX_ZC_LATE_POLLS passes (then watches
     * for a refusal): no landing in a slot shows either. */
    if (m != NULL && m->landed_at != NULL && x->scan_valid && !x->rx_retry &&
        x->local_ok == x->scan_local_ok && x->zc_rx_left == 0 &&
        (x->zc_min == 0 || r->polls < SX_ZC_LATE_POLLS))
        nc = sx_landed_peers(r, x, landed);
    x->rx_retry = 0;
    for (i = 0; nc >= 0 && i < (uint32_t)nc && rc == ARCOLL_OK; i++)
        if (x->rx_head[x->rx_cand[i]] != SX_NONE) /* one taken before may have ended another */
            rc = sx_rx(r, x, x->rx_cand[i]);
    for (i = 0; nc < 0 && i < x->nrx_peers && rc == ARCOLL_OK; i++) {
        uint32_t p = x->rx_peers[i];
        if (x->rx_head[p] != SX_NONE)
            rc = sx_rx(r, x, p);
        if (x->rx_head[p] != SX_NONE)
            x->rx_peers[k++] = p;
    }
    if (nc < 0) {
        memmove(&x->rx_peers[k], &x->rx_peers[i], sizeof(uint32_t) * (x->nrx_peers - i));
        x->nrx_peers = k + x->nrx_peers - i;
    }
    x->scan_valid = rc == ARCOLL_OK;
    x->scan_landed = landed;
    x->scan_local_ok = x->local_ok;
    return rc;
}

int eng_sched_progress(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;
    sched_exec_t *x = r->sx;
    int outstanding, rc;

    outstanding = c->ops->progress(c);
    if (outstanding < 0)
        return coll_fail(r, outstanding);
    x->mem.pinned = outstanding != 0;
    rc = sx_locals(r, x, outstanding);
    if (rc == ARCOLL_OK && x->recvs)
        rc = sx_recvs(r, x);
    if (rc == ARCOLL_OK) {
        sx_rounds(x);
        rc = sx_locals(r, x, outstanding);
    }
    if (rc == ARCOLL_OK && x->sends)
        rc = sx_sends(r, x);
    if (rc != ARCOLL_OK)
        return coll_fail(r, rc);
    sx_rounds(x);
    if (!x->sends && !x->recvs) {
        /* Count again after this pass's writes before calling them complete. */
        if (outstanding == 0 || x->locals)
            outstanding = c->ops->progress(c);
        if (outstanding < 0)
            return coll_fail(r, outstanding);
        if (x->locals && (rc = sx_locals(r, x, outstanding)) != ARCOLL_OK)
            return coll_fail(r, rc);
        if (outstanding == 0 && !x->locals)
            return coll_finish(r);
    }
    rc = eng_check_time(r);
    return rc == ARCOLL_INPROGRESS ? rc : coll_fail(r, rc);
}

/* The engine's own one-exchange "algorithm" (eng_sendrecv): a schedule of at
 * most one send and one receive. */
static int sendrecv_start(coll_req_t *r)
{
    const coll_args_t *a = &r->args;
    sched_t *s = eng_sched(r);
    int rc = ARCOLL_OK;

    if (s == NULL)
        return ARCOLL_ERR_NOMEM;
    sched_reset(s);
    if (a->to != UINT32_MAX) {
        sched_seg_t g = {.off = 0, .len = a->bytes, .buf = SCHED_BUF_SEND};
        rc = sched_add_send(s, 0, a->to, &g, 1);
    }
    if (rc == ARCOLL_OK && a->from != UINT32_MAX) {
        sched_seg_t g = {.off = 0, .len = a->rbytes, .buf = SCHED_BUF_RECV};
        rc = sched_add_recv(s, 0, a->from, SCHED_COPY, &g, 1);
    }
    /* Pairwise: no full exchange, so the bank argument needs the advertisement. */
    return rc != ARCOLL_OK ? rc : eng_sched_start(r, ENG_SCHED_PARTIAL);
}

static const coll_alg_t eng_alg_sendrecv = {.name = "sendrecv",
                                            .fallback = CORE_ALG_PAP,
                                            .start = sendrecv_start,
                                            .progress = eng_sched_progress};

int eng_sendrecv(struct arcoll_team *t, uint32_t to, const void *sbuf, size_t slen, uint32_t from,
                 void *rbuf, size_t rlen)
{
    coll_args_t a = {.type = COLL_SENDRECV,
                     .sbuf = sbuf,
                     .rbuf = rbuf,
                     .bytes = to != UINT32_MAX ? slen : 0,
                     .to = to,
                     .from = from,
                     .rbytes = from != UINT32_MAX ? rlen : 0};
    coll_req_t *r;
    int rc;

    if (t->failed) {
        log_err("exchange: this team failed earlier (%s)", arcoll_strerror(t->failed));
        return ARCOLL_ERR_STATE;
    }
    rc = eng_start(t, &a, &eng_alg_sendrecv, COLL_F_NOPROF, NULL, &r);
    return rc == ARCOLL_INPROGRESS ? coll_wait(r) : rc;
}
