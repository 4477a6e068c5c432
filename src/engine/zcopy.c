/* Zero-copy path: each receiver advertises its registered destination
 * buffer in every sender's control slot on arrival; that advertisement is
 * the arrival signal (Qian and Afsahi §4.1). Senders write straight into the final
 * buffer, then a done word after the data (docs/protocol.md, "Zero-copy"). */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "mem/heap.h"
#include "mem/region.h"
#include "util/log.h"

static int noticed;

/* Can [p, p + len) go by address: a channel whose writes land before they
 * return (the revocation below relies on it), a one-node team whose every
 * member maps the node heap as one region (its team records), and the span
 * inside that region? Then the peers memcpy into it: one copy, no
 * registration, no system call (process_vm_writev pins the pages on every
 * call: docs/performance.md). */
int eng_zcopy_heap_ok(const coll_req_t *r, const void *p, size_t len)
{
    const struct arcoll_team *t = r->team;
    uint64_t id;

    return len > 0 && t->ctx->chan->puts_sync && t->hier != NULL && t->hier->heap &&
           t->hier->nnodes == 1 && (id = heap_node_region()) != 0 && heap_region_find(p, len) == id;
}

/* Advertise [p, p + len) by address if it can go so (eng_zcopy_heap_ok): 1. */
static int zcopy_heap_key(coll_req_t *r, char *p, size_t len)
{
    if (!eng_zcopy_heap_ok(r, p, len))
        return 0;
    memset(&r->rheap, 0, sizeof(r->rheap));
    r->team->ctx->counters.zcopy_heap_calls++;
    r->rheap.kind = WIRE_KIND_HEAP;
    r->rheap.addr = (uint64_t)(uintptr_t)p;
    r->rheap.len = len;
    r->rheap.owner = (uint32_t)r->team->ctx->boot->rank;
    return 1;
}

/* The key we advertise and the address it starts at; kind 0 if none. */
static const chan_rkey_t *zcopy_rkey(const coll_req_t *r, const char **base)
{
    if (r->rheap.kind == WIRE_KIND_HEAP) {
        *base = (const char *)(uintptr_t)r->rheap.addr;
        return &r->rheap;
    }
    *base = r->rreg_valid ? r->rreg.mem->addr : NULL;
    return r->rreg_valid ? &r->rreg.mem->rkey : NULL;
}

/* alltoallv and allgatherv: each pair's path by its own length (eng_zcopy_pick),
 * in one pass over the peers (a small call's fixed cost is per function and
 * per pass, not per byte): the spans of the receive and send buffers that the
 * zero-copy blocks cover, registered (or keyed by address) once; then per peer
 * the advertisement, or, for a copy pair both ways, none (below). */
static int zcopy_v_start(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    struct arcoll_context *ctx = t->ctx;
    const coll_args_t *a = &r->args;
    const chan_rkey_t *key;
    const char *base;
    size_t rlo = SIZE_MAX, rhi = 0, slo = SIZE_MAX, shi = 0;
    int eager_ok = !r->is_direct && !t->after_partial, rc;

    for (uint32_t i = 1; i < t->size; i++) {
        uint32_t peer = (t->rank + i) % t->size;
        coll_peer_t *p = &r->peers[peer];
        size_t rx = a->rcounts[peer], tx = coll_tx_len(r, peer);
        p->rx_zc = rx > 0 && eng_zcopy_pick(r, rx);
        p->tx_eager = !eng_zcopy_pick(r, tx);
        if (p->rx_zc) {
            if (a->rdispls[peer] < rlo)
                rlo = a->rdispls[peer];
            if (a->rdispls[peer] + rx > rhi)
                rhi = a->rdispls[peer] + rx;
        }
        if (tx > 0 && !p->tx_eager && r->type == COLL_ALLTOALLV) {
            if (a->sdispls[peer] < slo)
                slo = a->sdispls[peer];
            if (a->sdispls[peer] + tx > shi)
                shi = a->sdispls[peer] + tx;
        }
    }
    if (r->type == COLL_ALLGATHERV) { /* one block, its own, to every peer */
        slo = 0;
        shi = r->bytes > 0 && eng_zcopy_pick(r, r->bytes) ? r->bytes : 0;
    }
    if (rhi != 0 && !zcopy_heap_key(r, r->rbuf + rlo, rhi - rlo)) {
        rc = zmem_get(ctx, r->rbuf + rlo, rhi - rlo, &r->rreg);
        if (rc == ARCOLL_OK) {
            r->rreg_valid = 1;
            ctx->counters.zcopy_reg_calls++;
        } else if (rc == ARCOLL_ERR_NOMEM && !noticed++)
            log_warn("%s: registering a %zu-byte receive buffer failed; this and later such "
                     "calls fall back to the copy path",
                     ctx->chan->ops->name, rhi - rlo);
        else if (rc != ARCOLL_ERR_NOMEM)
            return rc;
    }
    if (shi != 0 &&
        zmem_get(ctx, (void *)(uintptr_t)(r->sbuf + slo), shi - slo, &r->sreg) == ARCOLL_OK)
        r->sreg_valid = 1;
    key = zcopy_rkey(r, &base);
    for (uint32_t i = 1; i < t->size; i++) {
        uint32_t peer = (t->rank + i) % t->size;
        coll_peer_t *p = &r->peers[peer];
        wire_ctrl_t adv;
        p->rx_zc = p->rx_zc && key != NULL;
        /* Not after the split's partial exchanges: there the bank may still be
         * read (protocol.md §5, which this advertisement-first write keeps safe). */
        p->tx_eager = p->tx_eager && eager_ok;
        /* A copy pair both ways: our block to it, sent at once, carries the
         * same word in its header (want), so the advertisement is held back,
         * a line each way fewer (zcopy_adv_late writes it if the peer's
         * block is slow to come: a peer that waits for it). */
        if (p->tx_eager && !p->rx_zc) {
            p->adv_owed = 1;
            continue;
        }
        memset(&adv, 0, sizeof(adv));
        adv.size = coll_v_word(r, peer);
        if (p->rx_zc) {
            adv.rkey = *key;
            adv.boff = (uint64_t)(coll_dst(r, peer) - base);
        }
        rc = coll_advertise_to(r, peer, &adv);
        if (rc != ARCOLL_OK) {
            /* The peers after it were given nothing: none holds our key (the
             * first pass's choices are not advertisements; zcopy_revoke). */
            for (uint32_t k = i + 1; k < t->size; k++)
                r->peers[(t->rank + k) % t->size].rx_zc = 0;
            return rc;
        }
    }
    return ARCOLL_OK;
}

/* Passes of a call after which a held-back advertisement is written: well
 * past a block's usual one-way latency (a few dozen passes at 2 ranks), so
 * the common case writes none. */
#define ZCOPY_ADV_LATE_POLLS 256

/* A held-back advertisement (zcopy_v_start), written once the peer's block
 * is late: the peer may be waiting for it, having put its block on the
 * zero-copy path by a length of its own (a mismatch, which it then reports)
 * or by path rules that differ from ours. */
static int zcopy_adv_late(coll_req_t *r, uint32_t peer)
{
    wire_ctrl_t adv;

    if (!r->peers[peer].adv_owed || r->polls < ZCOPY_ADV_LATE_POLLS)
        return 0;
    r->peers[peer].adv_owed = 0;
    memset(&adv, 0, sizeof(adv));
    adv.size = coll_v_word(r, peer);
    return coll_advertise_to(r, peer, &adv);
}

/* Register the receive buffer and advertise it. If registration fails (out of
 * locked memory, say), advertise no key: senders then use our bounce slots
 * for this call, and so do we for receiving (docs/protocol.md, 6). */
static int zcopy_start(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    struct arcoll_context *ctx = t->ctx;
    size_t slen = r->type == COLL_ALLTOALL ? r->bytes * t->size : r->bytes;
    int rc;

    r->rheap.kind = 0;
    if (coll_is_v(r))
        return zcopy_v_start(r);
    if (zcopy_heap_key(r, r->rbuf, r->bytes * t->size))
        return coll_advertise(r, &r->rheap, 0);
    rc = zmem_get(ctx, r->rbuf, r->bytes * t->size, &r->rreg);
#ifdef ARCOLL_FAULTS
    if (wire_fault_reg_fail && rc == ARCOLL_OK) {
        zmem_put(ctx, &r->rreg);
        rc = ARCOLL_ERR_NOMEM;
    }
#endif
    if (rc == ARCOLL_ERR_NOMEM) {
        if (!noticed++)
            log_warn("%s: registering a %zu-byte receive buffer failed; this and later such "
                     "calls fall back to the copy path",
                     ctx->chan->ops->name, r->bytes * t->size);
        r->zc_bounce = 1;
        return coll_advertise(r, NULL, 0);
    }
    if (rc != ARCOLL_OK) {
        log_err("%s (epoch %llu): registering the %zu-byte receive buffer at %p with %s "
                "failed: %s",
                coll_type_name(r->type), (unsigned long long)r->epoch, r->bytes * t->size,
                (void *)r->rbuf, ctx->chan->ops->name, arcoll_strerror(rc));
        return rc;
    }
    r->rreg_valid = 1;
    ctx->counters.zcopy_reg_calls++;
    /* The send buffer: registered if possible, else the channel stages it. */
    if (zmem_get(ctx, (void *)(uintptr_t)r->sbuf, slen, &r->sreg) == ARCOLL_OK)
        r->sreg_valid = 1;
    return coll_advertise(r, &r->rreg.mem->rkey, (uint64_t)(r->rbuf - (char *)r->rreg.mem->addr));
}

/* The peer's arrival: its advertisement, or (the v-forms' copy pairs, whose
 * advertisement may be held back) its block in our bounce slot. */
static int zcopy_arrived(coll_req_t *r, uint32_t peer)
{
    struct arcoll_team *t = r->team;

    if (wire_load(&t->region, wire_ctrl_off(&t->layout, peer, r->bank)) == r->epoch)
        return 1;
    return coll_is_v(r) && !r->peers[peer].rx_zc && coll_proto_bounce.arrived(r, peer);
}

/* alltoallv: a block that the sender's own length puts on the copy path goes
 * at once, as alltoall's copy path does (PAP; Direct still waits for the
 * receiver): fragment 0's header carries the length, which the receiver
 * checks before it copies, so the advertisement is not waited for, a one-way
 * latency less per call (docs/protocol.md §6). The block is done only once
 * the advertisement has come and agrees: where only this direction of the
 * pair disagrees, the receiver's refusal might otherwise come after we
 * finished (its block to us may well be in already). */
static int zcopy_v_eager(const coll_req_t *r, uint32_t peer)
{
    return r->peers[peer].tx_eager; /* zcopy_v_start */
}

static int zcopy_tx_ready(coll_req_t *r, uint32_t peer)
{
    return zcopy_v_eager(r, peer) || zcopy_arrived(r, peer);
}

static int zcopy_done_put(coll_req_t *r, uint32_t peer, unsigned status)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;

    return c->ops->put_u64(c, t->ranks[peer], wire_done_word(r->epoch, status),
                           &t->peer_region[peer], wire_done_off(&t->layout, t->rank, r->bank));
}

#ifdef ARCOLL_FAULTS
/* ARCOLL_FAULT=zc_stall (util/util.h): the last context rank stalls once, in
 * the first write of its third zero-copy call, for 2 x ARCOLL_TIMEOUT_MS,
 * after its last look at the advertisement (coll_test stallwrite). */
void eng_zcopy_fault_stall(const coll_req_t *r)
{
    static const coll_req_t *last;
    static uint64_t last_epoch;
    static int calls;
    const struct arcoll_context *ctx = r->team->ctx;

    if (!wire_fault_zc_stall || ctx->boot->rank != ctx->boot->size - 1)
        return;
    if (r != last || r->epoch != last_epoch) {
        last = r;
        last_epoch = r->epoch;
        if (++calls != 3)
            return;
        log_err("ARCOLL_FAULT=zc_stall: stalling %ld ms before a zero-copy write",
                2 * ctx->cfg.timeout_ms);
        usleep((useconds_t)(2 * ctx->cfg.timeout_ms * 1000));
    }
}
#endif

/* A disagreeing word as a mismatch reports it: allgatherv's is a signature. */
static int zcopy_disagree(coll_req_t *r, uint32_t peer, uint64_t w)
{
    return coll_mismatch(r, peer, 1,
                         r->type == COLL_ALLGATHERV && w != WIRE_SIZE_NONE ? WIRE_SIZE_SIG : w);
}

static int zcopy_tx(coll_req_t *r, uint32_t peer)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;
    chan_rmem_t dst;
    wire_ctrl_t adv;
    size_t len = coll_tx_len(r, peer);
    /* what the receiver's word must say: the uniform forms advertise their size */
    uint64_t want = coll_is_v(r) ? coll_v_expect(r, peer) : len, off;
    int rc;

    if (zcopy_v_eager(r, peer)) {
        if (r->peers[peer].tx_frag < coll_nfrags(r, len) &&
            (rc = coll_proto_bounce.tx(r, peer)) != 1)
            return rc;
        /* Its block to us, if it came on the copy path, says what it
         * expects from us: the advertisement's size, one line fewer to wait
         * for (the receive runs first in each pass). */
        if (r->peers[peer].rx_frag > 0)
            return r->peers[peer].rx_want == want ? 1
                                                  : zcopy_disagree(r, peer, r->peers[peer].rx_want);
        if (!coll_ctrl_read(r, peer, &adv))
            return coll_refused(r, peer) ? coll_mismatch(r, peer, 1, UINT64_MAX) : 0;
        return adv.size == want ? 1 : zcopy_disagree(r, peer, adv.size);
    }
    if (r->peers[peer].tx_frag > 0)
        return coll_proto_bounce.tx(r, peer); /* checked at fragment 0 */
    if (!coll_ctrl_read(r, peer, &adv))
        return coll_refused(r, peer) ? coll_mismatch(r, peer, 1, UINT64_MAX) : 0;
    if (adv.size != want) /* nothing written; the engine tells the receiver (coll_refuse) */
        return zcopy_disagree(r, peer, adv.size);
    /* No key: the receiver chose the copy path for this block (alltoallv) or
     * could not register. */
    if (adv.rkey.kind == 0)
        return coll_proto_bounce.tx(r, peer);
#ifdef ARCOLL_FAULTS
    if (wire_fault_bad_rkey)
        adv.rkey.key ^= 0x5a5a; /* tests: a wrong key must fail, not hang */
#endif
    if (c->puts_sync) {
        /* Say we write, then look at the advertisement once more: a receiver
         * whose call failed has revoked it and, if it saw no BUSY, waits for
         * no write of ours (both sides store, fence, load: one of the two
         * loads sees the other's store; docs/protocol.md §6, "Revocation"). */
        rc = zcopy_done_put(r, peer, WIRE_ST_BUSY);
        if (rc != ARCOLL_OK)
            return rc;
        atomic_thread_fence(memory_order_seq_cst);
        if (wire_load(&t->region, wire_ctrl_off(&t->layout, peer, r->bank)) != r->epoch) {
            /* Revoked: write nothing; its failure word ends this call. */
            rc = zcopy_done_put(r, peer, WIRE_ST_REVOKED);
            return rc == ARCOLL_OK ? 0 : rc;
        }
    }
#ifdef ARCOLL_FAULTS
    eng_zcopy_fault_stall(r);
#endif
    /* alltoallv advertises each block's own offset; the uniform forms the buffer's. */
    off = adv.boff + (coll_is_v(r) ? 0 : (uint64_t)t->rank * len);
    if (adv.rkey.kind == WIRE_KIND_HEAP) {
        char *to = (char *)(uintptr_t)(adv.rkey.addr + off);
        if (off > adv.rkey.len || len > adv.rkey.len - off || !eng_zcopy_heap_ok(r, to, len)) {
            log_err("zcopy: team rank %u advertised a node-heap buffer (%llu bytes at %#llx) "
                    "that a %zu-byte block at offset %llu does not fit, or that is not in this "
                    "rank's mapping of the node heap",
                    peer, (unsigned long long)adv.rkey.len, (unsigned long long)adv.rkey.addr, len,
                    (unsigned long long)off);
            /* Not BUSY any more (heap keys: puts_sync): a receiver revoking
             * waits for no write of ours. */
            (void)zcopy_done_put(r, peer, WIRE_ST_REVOKED);
            return ARCOLL_ERR_CHANNEL;
        }
        memcpy(to, coll_src(r, peer), len);
    } else {
        rc = c->ops->rmem_import(c, t->ranks[peer], &adv.rkey, &dst);
        if (rc != ARCOLL_OK)
            return rc;
        rc = c->ops->put(c, t->ranks[peer], coll_src(r, peer), len,
                         r->sreg_valid ? r->sreg.mem : NULL, &dst, off);
        c->ops->rmem_release(c, &dst);
        if (rc != ARCOLL_OK && c->puts_sync)
            (void)zcopy_done_put(r, peer, WIRE_ST_REVOKED); /* not BUSY any more, as above */
        if (rc != ARCOLL_OK)
            return rc;
    }
    rc = zcopy_done_put(r, peer, WIRE_ST_OK);
    return rc == ARCOLL_OK ? 1 : rc;
}

static int zcopy_rx(coll_req_t *r, uint32_t peer)
{
    struct arcoll_team *t = r->team;
    uint64_t w;

    if (!coll_rx_keyed(r, peer)) {
        int rc = coll_proto_bounce.rx(r, peer); /* it also sees a sender's refusal */
        return rc == 0 ? zcopy_adv_late(r, peer) : rc;
    }
    w = wire_load(&t->region, wire_done_off(&t->layout, peer, r->bank));
    if (!wire_done_epoch_match(w, r->epoch)) {
        /* A sender whose size put it on the copy path writes our bounce slot
         * instead: its header shows the size (docs/protocol.md §8). */
        const wire_slot_hdr_t *hdr;
        uint64_t off = wire_slot_off(&t->layout, peer, r->bank);
        if (!coll_rx_idle_check(r) || wire_load(&t->region, off) != wire_frag_word(r->epoch, 0))
            return 0;
        hdr = (const wire_slot_hdr_t *)((const char *)t->region.addr + off);
        if (hdr->size != coll_rx_len(r, peer))
            return coll_mismatch(r, peer, 0, hdr->size);
        /* alltoallv, the same length: the sender's path rules picked the copy
         * path where ours picked zero-copy (rules that differ by node, say).
         * It never takes our key (it did not wait for it): receive it here. */
        if (!coll_is_v(r))
            return 0;
        r->peers[peer].rx_zc = 0;
        return coll_proto_bounce.rx(r, peer);
    }
    if (wire_done_status(w) == WIRE_ST_BUSY)
        return 0; /* the sender is writing; its done word follows */
    if (wire_done_status(w) != WIRE_ST_OK)
        return coll_mismatch(r, peer, 0, UINT64_MAX);
    return 1;
}

/* Is the peer still to finish writing into our buffer in this call? */
static int zcopy_rx_open(const coll_req_t *r, uint32_t peer)
{
    const struct arcoll_team *t = r->team;
    uint64_t w;

    if (peer == t->rank || !coll_rx_keyed(r, peer))
        return 0;
    w = wire_load(&t->region, wire_done_off(&t->layout, peer, r->bank));
    return !wire_done_epoch_match(w, r->epoch) || wire_done_status(w) == WIRE_ST_BUSY;
}

/* The call failed and is about to return: after that, no peer may write into
 * its receive buffer (docs/protocol.md §6, "Revocation"). Every peer that had
 * our key and has not finished gets its advertisement revoked. Where puts land
 * at once (shared memory, CMA), a peer that has not yet said BUSY will see the
 * revocation and write nothing, and one that has is waited for: one copy,
 * for as long as the peer lives (a peer stopped in its middle finishes that
 * copy when it resumes; a warning says so after ARCOLL_TIMEOUT_MS). Elsewhere
 * (verbs) the revocation reaches the peer late, so the registration is what
 * revokes: a per-call one is deregistered at finish anyway, a cached one is
 * dropped from the cache here, and the heap MR is deregistered here and
 * replaced at the next call (zmem_revoke); a late write then fails at the
 * peer with a remote access error. */
static void zcopy_revoke(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    struct arcoll_context *ctx = t->ctx;
    chan_t *c = ctx->chan;
    uint64_t until;
    int open = 0;

    if (!r->rreg_valid && r->rheap.kind != WIRE_KIND_HEAP)
        return; /* no key went out: peers write only our bounce slots */
    for (uint32_t p = 0; p < t->size; p++) {
        if (!zcopy_rx_open(r, p))
            continue;
        open++;
        eng_zcopy_revoke_to(r, p);
    }
    if (open == 0)
        return;
    if (!c->puts_sync) {
        if (r->rreg_valid)
            zmem_revoke(ctx, &r->rreg);
        return;
    }
    atomic_thread_fence(memory_order_seq_cst);
    until = eng_time_ns(ctx) + (uint64_t)ctx->cfg.timeout_ms * 1000000ULL;
    for (uint32_t p = 0; p < t->size; p++)
        if (coll_rx_keyed(r, p) && p != t->rank)
            eng_zcopy_wait_busy(r, p, r->epoch, &until);
}

void eng_zcopy_revoke_to(coll_req_t *r, uint32_t p)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;

    /* Where a flag may land late (verbs), only over a connected QP: one
     * that had not read the advertisement then waits instead of failing. */
    if (c->puts_sync || c->ops->peer_ready == NULL || c->ops->peer_ready(c, t->ranks[p]))
        (void)c->ops->put_u64(c, t->ranks[p], WIRE_CTRL_REVOKED, &t->peer_region[p],
                              wire_ctrl_off(&t->layout, t->rank, r->bank));
}

void eng_zcopy_wait_busy(coll_req_t *r, uint32_t p, uint64_t tag, uint64_t *until)
{
    struct arcoll_team *t = r->team;
    struct arcoll_context *ctx = t->ctx;
    chan_t *c = ctx->chan;
    uint64_t w;

    for (;;) {
        w = wire_load(&t->region, wire_done_off(&t->layout, p, r->bank));
        if (!wire_done_epoch_match(w, tag) || wire_done_status(w) != WIRE_ST_BUSY)
            return;
        if (c->ops->peer_check(c, t->ranks[p]) != ARCOLL_OK)
            return; /* gone: it writes nothing more */
        if (*until != 0 && eng_time_ns(ctx) > *until) {
            /* Alive and inside one copy (stopped, or descheduled): it
             * finishes that copy when it runs again, so returning now would
             * let it write into a buffer the caller owns again. */
            log_warn("%s: team rank %u was writing into this rank's receive buffer when the call "
                     "failed and has not finished within ARCOLL_TIMEOUT_MS; waiting for it to "
                     "finish that copy (it is alive)",
                     r->alg->name, p);
            *until = 0;
        }
        sched_yield();
    }
}

static void zcopy_finish(coll_req_t *r)
{
    struct arcoll_context *ctx = r->team->ctx;

    if (r->sreg_valid) {
        zmem_put(ctx, &r->sreg);
        r->sreg_valid = 0;
    }
    if (r->rreg_valid) {
        zmem_put(ctx, &r->rreg);
        r->rreg_valid = 0;
    }
    r->rheap.kind = 0;
}

const coll_proto_t coll_proto_zcopy = {
    .name = "zcopy",
    .start = zcopy_start,
    .arrived = zcopy_arrived,
    .tx_ready = zcopy_tx_ready,
    .tx = zcopy_tx,
    .rx = zcopy_rx,
    .finish = zcopy_finish,
    .revoke = zcopy_revoke,
};
