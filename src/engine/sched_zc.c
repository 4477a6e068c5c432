/*
 * Zero-copy schedule messages (docs/protocol.md §17).
 *
 * A message of a static schedule of at least zc_min bytes (both ends know its
 * length, rule 2 of engine/sched.h) meets its peer by rendezvous: once the
 * receiver may let the bytes land (the local copies of the message's round
 * have run, as the copy path waits before it applies one), it writes an
 * advertisement into the sender's control slot, tagged with the call and the
 * message's number in the stream (wire_sx_tag): where the message goes (a key
 * and an offset) or no key, for the copy path. The sender writes the bytes
 * there and then a done word with the same tag. One message of a stream at a
 * time: the receiver advertises the next only once the last is done, so one
 * control slot and one done word per stream and bank suffice.
 *
 * The destination is the message's own place in RECV or TMP, so the bytes
 * are written once instead of into a bounce slot and out again. Without a key
 * (a reduction, a destination in pieces, a buffer that cannot be registered
 * or reached by address) the message takes the copy path after one one-way
 * latency; zc_min keeps that to messages for which a keyed write is possible
 * on such a team (a buffer outside the node heap on a heap team still pays
 * it, up to the channel's registration threshold).
 *
 * A call that fails revokes what it advertised (sx_zc_revoke), as the flat
 * zero-copy path does (engine/zcopy.c): no sender writes into its buffers
 * after it returned.
 */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/sched_exec.h"
#include "util/log.h"

static int noticed;

/* ARCOLL_SCHED_ZCOPY=auto (docs/performance.md, "Zero-copy schedule
 * messages"): with ranks <= cores a rendezvous costs less than a copy from 4
 * KiB on (shared memory, np=2: ring allgather at 4 KiB 1.37 -> 0.77 us);
 * oversubscribed, a round trip waits for the peer to be scheduled, and below
 * 64 KiB it lost (np=4 on 2 cores: 5.9 -> 10.4 us at 4 KiB). */
#define SX_ZC_AUTO      ((size_t)4 << 10)
#define SX_ZC_AUTO_OVER ((size_t)64 << 10)

/* The channel's size from which a registered (not by address) destination is
 * worth it: the flat path's threshold. */
static size_t sx_zc_reg_min(const struct arcoll_context *ctx)
{
    if (ctx->cfg.path == CORE_PATH_ZCOPY)
        return 1;
    return ctx->cfg.zcopy_threshold == CORE_CONFIG_AUTO_SIZE ? ctx->chan->zcopy_threshold
                                                             : ctx->cfg.zcopy_threshold;
}

/* Is message m's every byte in one run of one buffer: 1, its buffer and offset. */
static int sx_zc_contig(const sched_exec_t *x, const sched_msg_t *m, int *buf, uint64_t *off)
{
    const sched_seg_t *g = x->s.segs + m->seg;
    uint64_t end;

    if (m->nseg == 0)
        return 0;
    *buf = g[0].buf;
    *off = g[0].off;
    end = g[0].off + g[0].len;
    for (uint32_t i = 1; i < m->nseg; i++) {
        if (g[i].buf != g[0].buf || g[i].off != end)
            return 0;
        end += g[i].len;
    }
    return 1;
}

/* Can receive m be written where it goes: a copy into one run of RECV or of
 * TMP, which stays where it is for the call unless a hook may grow it? */
static int sx_zc_dest_ok(const sched_exec_t *x, const sched_msg_t *m, int *buf, uint64_t *off)
{
    return m->action == SCHED_COPY && sx_zc_contig(x, m, buf, off) &&
           (*buf == SCHED_BUF_RECV || (*buf == SCHED_BUF_TMP && x->s.hook == NULL));
}

static void sx_zc_end(coll_req_t *r, int failed);

void sx_zc_plan(coll_req_t *r, sched_exec_t *x, int mode)
{
    struct arcoll_team *t = r->team;
    const struct arcoll_context *ctx = t->ctx;
    size_t min = ctx->cfg.sched_zcopy, reg = sx_zc_reg_min(ctx);

    if (min == CORE_CONFIG_AUTO_SIZE)
        min = ctx->job_oversubscribed ? SX_ZC_AUTO_OVER : SX_ZC_AUTO;
    x->zc_min = 0;
    x->zc_rx_left = 0;
    for (int b = 0; b < SCHED_NBUF; b++) {
        x->zstate[b] = SX_ZREG_UNTRIED;
        x->zlo[b] = UINT64_MAX;
        x->zhi[b] = 0;
    }
    /* Every input is the same on every rank: the agreed settings and
     * oversubscription, the channel's ability (agreed at init), the mode and
     * the kind of schedule (one algorithm), and whether the team's ranks all
     * map the node heap (team records). Without the heap, a keyed write needs
     * a registration, which pays from the channel's threshold on. */
    /* Not in the library's own agreements (r->args.internal, the same on every
     * rank): the last of them before a team's memory goes (arcoll_team_free,
     * finalize) must not write into a peer after that peer may be done, and a
     * late advertisement would (verbs: a remote access error that takes the
     * pair's QP down; protocol.md §17). Their messages are a few bytes anyway. */
    if (mode != ENG_SCHED_PAP || min == 0 || r->args.internal || ctx->cfg.path == CORE_PATH_COPY ||
        !ctx->chan->zcopy)
        return;
    if (ctx->cfg.path == CORE_PATH_ZCOPY)
        min = 1;
    else if (!(ctx->chan->puts_sync && t->hier != NULL && t->hier->heap && t->hier->nnodes == 1) &&
             reg > min)
        min = reg;
    if (min == SIZE_MAX)
        return;
    x->zc_min = min;
    /* The eligible receives, and the span of each buffer they write. */
    for (uint32_t i = 0; i < x->nrx_peers; i++) {
        uint32_t p = x->rx_peers[i], seq = 0;
        for (uint32_t mi = x->rx_head[p]; mi != SX_NONE; mi = x->next_recv[mi], seq++) {
            const sched_msg_t *m = &x->s.recv[mi];
            uint64_t off;
            int b;
            if (!sx_zc_ok(x, m, seq))
                continue;
            x->zc_rx_left++;
            if (!sx_zc_dest_ok(x, m, &b, &off))
                continue;
            if (off < x->zlo[b])
                x->zlo[b] = off;
            if (off + sched_msg_len(&x->s, m) > x->zhi[b])
                x->zhi[b] = off + sched_msg_len(&x->s, m);
        }
    }
    if (x->zc_rx_left > 0)
        r->on_end = sx_zc_end;
}

/* The key for message m's destination and its offset in the keyed memory;
 * NULL for the copy path (*rc says whether that is an error). Each buffer is
 * offered once per call, the span its eligible receives write: by address
 * (the node heap) or registered. */
static const chan_rkey_t *sx_zc_key(coll_req_t *r, sched_exec_t *x, const sched_msg_t *m,
                                    uint64_t *boff, int *rc)
{
    struct arcoll_context *ctx = r->team->ctx;
    uint64_t off, len = sched_msg_len(&x->s, m);
    char *base, *lo;
    size_t span;
    int b;

    *rc = ARCOLL_OK;
    if (!sx_zc_dest_ok(x, m, &b, &off))
        return NULL;
    base = x->mem.buf[b];
    lo = base + x->zlo[b];
    span = x->zhi[b] - x->zlo[b];
    if (x->zstate[b] == SX_ZREG_UNTRIED && eng_zcopy_heap_ok(r, lo, span)) {
        memset(&x->zheap[b], 0, sizeof(x->zheap[b]));
        x->zheap[b].kind = WIRE_KIND_HEAP;
        x->zheap[b].addr = (uint64_t)(uintptr_t)lo;
        x->zheap[b].len = span;
        x->zheap[b].owner = (uint32_t)ctx->boot->rank;
        x->zstate[b] = SX_ZREG_HEAP;
        ctx->counters.zcopy_heap_calls++;
    } else if (x->zstate[b] == SX_ZREG_UNTRIED && len >= sx_zc_reg_min(ctx)) {
        int st = zmem_get(ctx, lo, span, &x->zreg[b]);
        if (st == ARCOLL_OK) {
            x->zstate[b] = SX_ZREG_REG;
            ctx->counters.zcopy_reg_calls++;
        } else if (st == ARCOLL_ERR_NOMEM) {
            x->zstate[b] = SX_ZREG_NONE;
            if (!noticed++)
                log_warn("%s: registering a %zu-byte schedule buffer failed; such messages "
                         "take the copy path",
                         ctx->chan->ops->name, span);
        } else {
            log_err("%s (epoch %llu, %s): registering a %zu-byte %s buffer at %p with %s "
                    "failed: %s",
                    coll_type_name(r->type), (unsigned long long)r->epoch, r->alg->name, span,
                    b == SCHED_BUF_RECV ? "receive" : "scratch", (void *)lo, ctx->chan->ops->name,
                    arcoll_strerror(st));
            *rc = st;
            return NULL;
        }
    }
    if (x->zstate[b] == SX_ZREG_HEAP) {
        *boff = (uint64_t)(base + off - lo);
        return &x->zheap[b];
    }
    if (x->zstate[b] == SX_ZREG_REG) {
        *boff = (uint64_t)(base + off - (char *)x->zreg[b].mem->addr);
        return &x->zreg[b].mem->rkey;
    }
    return NULL;
}

/* Write our advertisement for the current message of p's stream into p's
 * control slot: body first, the tag last (the flag a sender polls). The body
 * carries the length and the call's signature, which the sender checks as a
 * copy-path receiver checks a header; its epoch field is the signature (the
 * tag in the flag already says which call and message it is for). */
static int sx_zc_advertise(coll_req_t *r, uint32_t p, uint64_t tag, uint64_t len,
                           const chan_rkey_t *key, uint64_t boff)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;
    uint64_t off = wire_ctrl_off(&t->layout, t->rank, r->bank);
    wire_ctrl_t body;
    int rc;

    memset(&body, 0, sizeof(body));
    body.size = len;
    if (key != NULL) {
        body.rkey = *key;
        body.boff = boff;
    }
    body.epoch = r->args.sig;
    rc = c->ops->put(c, t->ranks[p], &body.size, sizeof(body) - sizeof(body.flag), NULL,
                     &t->peer_region[p], off + sizeof(body.flag));
    return rc != ARCOLL_OK ? rc : c->ops->put_u64(c, t->ranks[p], tag, &t->peer_region[p], off);
}

/* A disagreement with peer p found by a receive: drop p's stream. The sender
 * learns of it from the reject credit, as from a copy-path receiver's
 * (eng_sched_reject): a zero-copy sender would otherwise wait for an
 * advertisement of the stream's next message. Our own messages to p go on,
 * poisoned (§12): the ranks downstream learn of the mismatch from them. */
static int sx_zc_mismatch_rx(coll_req_t *r, sched_exec_t *x, uint32_t p, const char *why)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;

    if (!r->deferred)
        log_err("%s (epoch %llu, %s): team rank %u %s (message %u of its stream to this rank): "
                "its counts or arguments disagree with ours",
                coll_type_name(r->type), (unsigned long long)r->epoch, r->alg->name, p, why,
                x->rx_seq[p]);
    r->deferred = ARCOLL_ERR_MISMATCH;
    sx_drop_rx(x, p);
    r->peers[p].rx_done = 1;
    return c->ops->put_u64(c, t->ranks[p], wire_frag_word(r->epoch, WIRE_FRAG_REJECT),
                           &t->peer_region[p], wire_cred_off(&t->layout, t->rank, r->bank));
}

int sx_zc_rx(coll_req_t *r, sched_exec_t *x, uint32_t p)
{
    struct arcoll_team *t = r->team;
    const sched_msg_t *m = &x->s.recv[x->rx_head[p]];
    uint64_t tag = wire_sx_tag(r->epoch, x->rx_seq[p]), len = sched_msg_len(&x->s, m), w, boff = 0;
    const chan_rkey_t *key;
    int rc;

    if (x->rx_zc[p] == SX_ZC_NONE) {
        /* Not before the local copies of its round have run: they may read
         * or write these bytes (engine/sched.h rules 1 and 4). */
        if (m->round >= x->local_ok)
            return 0;
        key = sx_zc_key(r, x, m, &boff, &rc);
        if (rc != ARCOLL_OK)
            return rc;
        rc = sx_zc_advertise(r, p, tag, len, key, boff);
        if (rc != ARCOLL_OK)
            return rc;
        x->rx_zc[p] = key != NULL ? SX_ZC_KEYED : SX_ZC_COPY;
        if (key == NULL)
            return 2;
    }
    w = wire_load(&t->region, wire_done_off(&t->layout, p, r->bank));
    if (!wire_done_epoch_match(w, tag)) {
        /* A sender that put this message on the copy path (it takes another
         * length, so another path) writes our slot instead. A fragment there
         * may also be the next message's, written after the done word that
         * the load above came too early for: look at the done word again
         * (the sender wrote it first, and the loads acquire). */
        uint64_t off = wire_stream_lane_off(&t->layout, p, r->bank, x->rx_pipe[p], x->rx_frag[p]);
        if (wire_load(&t->region, off) != wire_frag_word(r->epoch, x->rx_frag[p]))
            return 0;
        w = wire_load(&t->region, wire_done_off(&t->layout, p, r->bank));
        if (!wire_done_epoch_match(w, tag))
            return sx_zc_mismatch_rx(r, x, p,
                                     "sent by the copy path a message we expect zero-copy");
    }
    switch (wire_done_status(w)) {
    case WIRE_ST_BUSY: return 0; /* writing now; the done word follows */
    case WIRE_ST_OK: sx_rx_next(r, x, p); return 1;
    case WIRE_ST_REVOKED: return 0; /* our revocation: the call is failing anyway */
    default: return sx_zc_mismatch_rx(r, x, p, "refused our advertisement or passes on a mismatch");
    }
}

int sx_zc_late(coll_req_t *r, sched_exec_t *x, uint32_t p)
{
    struct arcoll_team *t = r->team;
    uint64_t tag = wire_sx_tag(r->epoch, x->rx_seq[p]), w;
    int rc;

    if (x->rx_zc[p] == SX_ZC_NONE) {
        if (r->polls < SX_ZC_LATE_POLLS || x->rx_off[p] != 0 || x->rx_seq[p] > WIRE_SX_SEQ_MAX)
            return 0;
        rc = sx_zc_advertise(r, p, tag, sched_msg_len(&x->s, &x->s.recv[x->rx_head[p]]), NULL, 0);
        if (rc != ARCOLL_OK)
            return rc;
        t->ctx->counters.sched_zc_late++;
        x->rx_zc[p] = SX_ZC_COPY;
        return 0;
    }
    w = wire_load(&t->region, wire_done_off(&t->layout, p, r->bank));
    if (x->rx_zc[p] == SX_ZC_COPY && wire_done_epoch_match(w, tag) &&
        wire_done_status(w) == WIRE_ST_MISMATCH)
        return sx_zc_mismatch_rx(r, x, p, "refused our advertisement");
    return 0;
}

static int sx_zc_done(coll_req_t *r, uint32_t p, uint64_t tag, unsigned status)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;

    return c->ops->put_u64(c, t->ranks[p], wire_done_word(tag, status), &t->peer_region[p],
                           wire_done_off(&t->layout, t->rank, r->bank));
}

/* Write message m's segments at boff of the advertised memory. */
static int sx_zc_write(coll_req_t *r, sched_exec_t *x, uint32_t p, const sched_msg_t *m,
                       const wire_ctrl_t *adv, uint64_t len)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;
    const sched_seg_t *g = x->s.segs + m->seg;
    chan_rmem_t dst;
    uint64_t pos = adv->boff;
    int rc = ARCOLL_OK;

    if (adv->rkey.kind == WIRE_KIND_HEAP) {
        char *to = (char *)(uintptr_t)(adv->rkey.addr + adv->boff);
        if (adv->boff > adv->rkey.len || len > adv->rkey.len - adv->boff ||
            !eng_zcopy_heap_ok(r, to, len)) {
            log_err("%s (%s): team rank %u advertised a node-heap buffer (%llu bytes at %#llx) "
                    "that a %llu-byte message at offset %llu does not fit, or that is not in "
                    "this rank's mapping of the node heap",
                    coll_type_name(r->type), r->alg->name, p, (unsigned long long)adv->rkey.len,
                    (unsigned long long)adv->rkey.addr, (unsigned long long)len,
                    (unsigned long long)adv->boff);
            return ARCOLL_ERR_CHANNEL;
        }
        for (uint32_t i = 0; i < m->nseg; i++) {
            memcpy(to, x->mem.buf[g[i].buf] + g[i].off, g[i].len);
            to += g[i].len;
        }
        return ARCOLL_OK;
    }
    rc = c->ops->rmem_import(c, t->ranks[p], &adv->rkey, &dst);
    if (rc != ARCOLL_OK)
        return rc;
    for (uint32_t i = 0; i < m->nseg && rc == ARCOLL_OK; i++) {
        if (g[i].len > 0)
            rc = c->ops->put(c, t->ranks[p], x->mem.buf[g[i].buf] + g[i].off, g[i].len, NULL, &dst,
                             pos);
        pos += g[i].len;
    }
    c->ops->rmem_release(c, &dst);
    return rc;
}

static int sx_zc_mismatch_tx(coll_req_t *r, sched_exec_t *x, uint32_t p, const char *why,
                             uint64_t theirs)
{
    if (!r->deferred)
        log_err("%s (epoch %llu, %s): team rank %u %s (message %u of our stream to it, %llu "
                "bytes; it expects %llu): its counts or arguments disagree with ours",
                coll_type_name(r->type), (unsigned long long)r->epoch, r->alg->name, p, why,
                x->tx_seq[p], (unsigned long long)sched_msg_len(&x->s, &x->s.send[x->tx_head[p]]),
                (unsigned long long)theirs);
    r->deferred = ARCOLL_ERR_MISMATCH;
    sx_drop_tx(x, p);
    r->peers[p].tx_state = COLL_TX_DONE;
    return 0;
}

int sx_zc_tx(coll_req_t *r, sched_exec_t *x, uint32_t p)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;
    const sched_msg_t *m = &x->s.send[x->tx_head[p]];
    uint64_t tag = wire_sx_tag(r->epoch, x->tx_seq[p]), len = sched_msg_len(&x->s, m),
             ctrl = wire_ctrl_off(&t->layout, p, r->bank);
    wire_ctrl_t adv;
    int rc;

    if (wire_load(&t->region, wire_cred_off(&t->layout, p, r->bank)) ==
        wire_frag_word(r->epoch, WIRE_FRAG_REJECT))
        return sx_zc_mismatch_tx(r, x, p, "rejected our stream", 0);
    if (wire_load(&t->region, ctrl) != tag)
        return 0; /* not advertised yet */
    /* The flag is written after the body, and the receiver writes the next
     * body only after our done word for this one: the body is this tag's. */
    memcpy(&adv, (const char *)t->region.addr + ctrl, sizeof(adv));
    if (adv.size != len || adv.epoch != r->args.sig) {
        /* Nothing written; the receiver learns from the done word. */
        rc = sx_zc_done(r, p, tag, WIRE_ST_MISMATCH);
        if (rc != ARCOLL_OK)
            return rc;
        return sx_zc_mismatch_tx(r, x, p,
                                 adv.size != len ? "expects another length"
                                                 : "called it with other arguments (its size, "
                                                   "count, datatype, op or receive counts differ)",
                                 adv.size);
    }
    if (adv.rkey.kind == 0) {
        x->tx_zc[p] = SX_ZC_COPY;
        return 2;
    }
    if (c->puts_sync) {
        /* Say we write, then look at the advertisement once more: a receiver
         * whose call failed has revoked it and, if it saw no BUSY, waits for
         * no write of ours (zcopy.c, docs/protocol.md §6 "Revocation"). */
        rc = sx_zc_done(r, p, tag, WIRE_ST_BUSY);
        if (rc != ARCOLL_OK)
            return rc;
        atomic_thread_fence(memory_order_seq_cst);
        if (wire_load(&t->region, ctrl) != tag) {
            rc = sx_zc_done(r, p, tag, WIRE_ST_REVOKED);
            return rc == ARCOLL_OK ? 0 : rc; /* its failure word ends this call */
        }
    }
#ifdef ARCOLL_FAULTS
    eng_zcopy_fault_stall(r);
#endif
    rc = sx_zc_write(r, x, p, m, &adv, len);
    if (rc != ARCOLL_OK) {
        /* Not BUSY any more: a receiver revoking waits for no write of ours. */
        if (c->puts_sync)
            (void)sx_zc_done(r, p, tag, WIRE_ST_REVOKED);
        return rc;
    }
    /* After a mismatch here what we send is poisoned, as on the copy path. */
    rc = sx_zc_done(r, p, tag, r->deferred ? WIRE_ST_MISMATCH : WIRE_ST_OK);
    if (rc != ARCOLL_OK)
        return rc;
    r->peers[p].tx_state = COLL_TX_ACTIVE;
    sx_tx_next(r, x, p);
    return 1;
}

int sx_zc_arrived(const coll_req_t *r, uint32_t p)
{
    const struct arcoll_team *t = r->team;

    /* Its advertisement to us, or a done word of this call from it. */
    return wire_sx_tag_epoch(wire_load(&t->region, wire_ctrl_off(&t->layout, p, r->bank)),
                             r->epoch) ||
           wire_sx_tag_epoch(wire_load(&t->region, wire_done_off(&t->layout, p, r->bank)) >> 8,
                             r->epoch);
}

/* The call failed: every sender that has our key for a message it has not
 * finished gets the advertisement revoked; then as zcopy_revoke: where puts
 * land at once, a sender that said BUSY is waited for (for as long as it
 * lives), one that had not sees the revocation and writes nothing; elsewhere
 * the registration is what revokes. */
static void sx_zc_revoke(coll_req_t *r, sched_exec_t *x)
{
    struct arcoll_team *t = r->team;
    struct arcoll_context *ctx = t->ctx;
    chan_t *c = ctx->chan;
    uint64_t until;
    int open = 0;

    for (uint32_t p = 0; p < t->size; p++) {
        uint64_t w;
        if (x->rx_zc[p] != SX_ZC_KEYED)
            continue;
        w = wire_load(&t->region, wire_done_off(&t->layout, p, r->bank));
        if (wire_done_epoch_match(w, wire_sx_tag(r->epoch, x->rx_seq[p])) &&
            wire_done_status(w) != WIRE_ST_BUSY) {
            x->rx_zc[p] = SX_ZC_NONE; /* finished (or refused): it writes no more */
            continue;
        }
        open++;
        eng_zcopy_revoke_to(r, p);
    }
    if (open == 0)
        return;
    if (!c->puts_sync) {
        for (int b = 0; b < SCHED_NBUF; b++)
            if (x->zstate[b] == SX_ZREG_REG)
                zmem_revoke(ctx, &x->zreg[b]);
        return;
    }
    atomic_thread_fence(memory_order_seq_cst);
    until = eng_time_ns(ctx) + (uint64_t)ctx->cfg.timeout_ms * 1000000ULL;
    for (uint32_t p = 0; p < t->size; p++)
        if (x->rx_zc[p] == SX_ZC_KEYED)
            eng_zcopy_wait_busy(r, p, wire_sx_tag(r->epoch, x->rx_seq[p]), &until);
}

/* The call's end (coll_req_t.on_end): if it failed, no sender may write into
 * its buffers any more; then its registrations go. */
static void sx_zc_end(coll_req_t *r, int failed)
{
    sched_exec_t *x = r->sx;
    struct arcoll_context *ctx = r->team->ctx;

    r->on_end = NULL;
    if (failed)
        sx_zc_revoke(r, x);
    for (int b = 0; b < SCHED_NBUF; b++) {
        int cached = x->zstate[b] == SX_ZREG_REG && x->zreg[b].ent != NULL;
        if (x->zstate[b] == SX_ZREG_REG)
            zmem_put(ctx, &x->zreg[b]);
        /* TMP is ours: its reallocations are reported to no registration
         * cache (ARCOLL_REGCACHE=on trusts the caller to report frees), so
         * what the cache took for it must not outlive the call. */
        if (cached && b == SCHED_BUF_TMP)
            zmem_invalidate(ctx, x->mem.buf[b] + x->zlo[b], x->zhi[b] - x->zlo[b]);
        x->zstate[b] = SX_ZREG_UNTRIED;
    }
}
