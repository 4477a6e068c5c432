/* Copy-based path: data goes through the receiver's pre-registered bounce
 * slots; a filled slot is the sender's arrival signal (Qian and Afsahi §4.1).
 * Messages larger than a lane go as fragments, one per lane of the slot in
 * turn, so that a slot's lanes are in flight at once; a fragment reuses a
 * lane after the receiver's credit for the lane's previous fragment
 * (docs/protocol.md, "Copy path"). */
#include <string.h>

#include "engine/engine.h"
#include "util/log.h"

/* Bytes of fragment k of a len-byte block. */
static size_t bounce_frag_len(const coll_req_t *r, size_t len, uint32_t k)
{
    size_t b = (size_t)r->team->layout.frag, off = (size_t)k * b;

    return len - off < b ? len - off : b;
}

/* Direct waits for each receiver's readiness, so receivers advertise it;
 * PAP needs no advertisement on this path. */
static int bounce_start(coll_req_t *r)
{
    return r->is_direct ? coll_advertise(r, NULL, 0) : ARCOLL_OK;
}

static int bounce_flag_match(const coll_req_t *r, uint64_t flag, uint32_t frag)
{
#ifdef ARCOLL_FAULTS
    /* Fault injection for the tests: forget the epoch, keep the fragment. */
    if (wire_fault_no_epoch)
        return (uint32_t)flag == frag + 1;
#endif
    return flag == wire_frag_word(r->epoch, frag);
}

static int bounce_arrived(coll_req_t *r, uint32_t peer)
{
    struct arcoll_team *t = r->team;
    const coll_peer_t *p = &r->peers[peer];

    if (p->rx_frag > 0 || p->rx_done)
        return 1;
    return bounce_flag_match(r, wire_load(&t->region, wire_slot_off(&t->layout, peer, r->bank)), 0);
}

static int bounce_tx_ready(coll_req_t *r, uint32_t peer)
{
    wire_ctrl_t adv;

    if (!r->is_direct)
        return 1; /* the epoch banks make the slot free: docs/protocol.md */
    if (!coll_ctrl_read(r, peer, &adv))
        return 0;
    /* On a size mismatch still send: the receiver checks the size in the slot
     * header before copying, so it learns of the mismatch too. */
    if (adv.size != coll_tx_len(r, peer))
        r->deferred = coll_mismatch(r, peer, 1, adv.size);
    return 1;
}

/* Write the fragments of the block to peer that the window allows: 1 when
 * the last is written, 0 when the next waits for a credit. */
static int bounce_tx(coll_req_t *r, uint32_t peer)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;
    coll_peer_t *p = &r->peers[peer];
    const chan_rmem_t *dst = &t->peer_region[peer];
    size_t len = coll_tx_len(r, peer);
    uint32_t n = coll_nfrags(r, len);
    int cr = t->ranks[peer], rc;

    while (p->tx_frag < n) {
        uint32_t k = p->tx_frag;
        uint64_t off = wire_lane_off(&t->layout, t->rank, r->bank, k);
        size_t flen = bounce_frag_len(r, len, k);
        if (k > 0) {
            uint64_t cred = wire_load(&t->region, wire_cred_off(&t->layout, peer, r->bank));
            if (cred == wire_frag_word(r->epoch, WIRE_FRAG_REJECT))
                return coll_mismatch(r, peer, 1, UINT64_MAX);
            if (!wire_frag_credited(cred, r->epoch, k, t->layout.lanes))
                return 0;
        }
        if (k == 0) {
            /* size and want, and a small payload after them in the header's
             * line: one put, and one line for the receiver to take */
            size_t hlen = WIRE_INLINE_OFF - offsetof(wire_slot_hdr_t, size);
            uint64_t line[WIRE_LINE / 8] = {len, coll_is_v(r) ? coll_v_word(r, peer) : 0};
            if (len <= WIRE_INLINE && len > 0)
                memcpy((char *)line + hlen, coll_src(r, peer), len);
            rc = c->ops->put(c, cr, line, hlen + (len <= WIRE_INLINE ? len : 0), NULL, dst,
                             off + offsetof(wire_slot_hdr_t, size));
            if (rc != ARCOLL_OK)
                return rc;
        }
        if (flen > 0 && len > WIRE_INLINE) {
            rc = c->ops->put(c, cr, coll_src(r, peer) + (size_t)k * t->layout.frag, flen, NULL, dst,
                             off + WIRE_LINE);
            if (rc != ARCOLL_OK)
                return rc;
        }
        rc = c->ops->put_u64(c, cr, wire_frag_word(r->epoch, k), dst, off);
        if (rc != ARCOLL_OK)
            return rc;
        p->tx_frag = k + 1;
    }
    return 1;
}

/* Nothing new in the slot: has the peer refused the call, or (alltoall,
 * allgather: a control slot carries the sender's own size) advertised a size
 * that is not ours, which puts it on the zero-copy path while we wait here
 * (docs/protocol.md §8)? */
static int bounce_rx_idle(coll_req_t *r, uint32_t peer)
{
    wire_ctrl_t adv;

    if (!coll_rx_idle_check(r))
        return 0;
    if (coll_refused(r, peer))
        return coll_mismatch(r, peer, 0, UINT64_MAX);
    if (coll_is_v(r) || r->peers[peer].rx_frag > 0 || !coll_ctrl_read(r, peer, &adv) ||
        adv.size == r->bytes)
        return 0;
    return coll_mismatch(r, peer, 0, adv.size);
}

static int bounce_rx(coll_req_t *r, uint32_t peer)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;
    coll_peer_t *p = &r->peers[peer];
    const wire_layout_t *l = &t->layout;
    size_t len = coll_rx_len(r, peer);
    uint32_t k0 = p->rx_frag, k = k0, n = coll_nfrags(r, len);
    int rc;

    /* Every fragment that has landed, then one credit for the last. */
    for (;;) {
        uint64_t off = wire_lane_off(l, peer, r->bank, k);
        const wire_slot_hdr_t *hdr = (const wire_slot_hdr_t *)((char *)t->region.addr + off);
        size_t flen = bounce_frag_len(r, len, k);
        if (!bounce_flag_match(r, wire_load(&t->region, off), k))
            break;
        if (k == 0 && hdr->size != len) /* never copy more than our buffer holds */
            return coll_mismatch(r, peer, 0, hdr->size);
        /* allgatherv: a sender whose receive counts differ from ours */
        if (k == 0 && r->type == COLL_ALLGATHERV && hdr->want != coll_v_word(r, peer))
            return coll_mismatch(r, peer, 0, WIRE_SIZE_SIG);
        if (k == 0)
            p->rx_want = hdr->want; /* zcopy_tx's check of our own block to it */
        if (flen > 0)
            memcpy(coll_dst(r, peer) + (size_t)k * l->frag,
                   (const char *)hdr + (len <= WIRE_INLINE ? WIRE_INLINE_OFF : WIRE_LINE), flen);
        p->rx_frag = ++k;
        if (k == n)
            return 1;
    }
    if (k == k0)
        return bounce_rx_idle(r, peer);
    /* More fragments follow (k < n): the sender reuses the lanes of what we
     * copied out once it sees the credit. */
    rc = c->ops->put_u64(c, t->ranks[peer], wire_frag_word(r->epoch, k - 1), &t->peer_region[peer],
                         wire_cred_off(l, t->rank, r->bank));
    return rc == ARCOLL_OK ? 0 : rc;
}

static void bounce_finish(coll_req_t *r)
{
    (void)r;
}

const coll_proto_t coll_proto_bounce = {
    .name = "copy",
    .start = bounce_start,
    .arrived = bounce_arrived,
    .tx_ready = bounce_tx_ready,
    .tx = bounce_tx,
    .rx = bounce_rx,
    .finish = bounce_finish,
};
