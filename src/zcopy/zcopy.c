/* Zero-copy path: each receiver advertises its registered destination
 * buffer in every sender's control slot on arrival; that advertisement is
 * the arrival signal (seed 002 §4.1). Senders write straight into the final
 * buffer, then a done word after the data (docs/protocol.md, "Zero-copy"). */
#include <string.h>

#include "core/engine.h"
#include "core/log.h"

#ifdef ARCOLL_FAULTS
extern int wire_fault_reg_fail, wire_fault_bad_rkey;
#endif

/* Register the receive buffer and advertise it. If registration fails (out of
 * locked memory, say), advertise no key: senders then use our bounce slots
 * for this call, and so do we for receiving (docs/protocol.md, 6). */
static int zcopy_start(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    struct arcoll_context *ctx = t->ctx;
    size_t slen = r->type == COLL_ALLTOALL ? r->bytes * t->size : r->bytes;
    static int noticed;
    int rc;

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
    if (rc != ARCOLL_OK)
        return rc;
    r->rreg_valid = 1;
    /* The send buffer: registered if possible, else the channel stages it. */
    if (zmem_get(ctx, (void *)(uintptr_t)r->sbuf, slen, &r->sreg) == ARCOLL_OK)
        r->sreg_valid = 1;
    return coll_advertise(r, &r->rreg.mem->rkey, (uint64_t)(r->rbuf - (char *)r->rreg.mem->addr));
}

static int zcopy_arrived(coll_req_t *r, uint32_t peer)
{
    struct arcoll_team *t = r->team;

    return wire_load(&t->region, wire_ctrl_off(&t->layout, peer, r->bank)) == r->epoch;
}

static int zcopy_done_put(coll_req_t *r, uint32_t peer, unsigned status)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;

    return c->ops->put_u64(c, t->ranks[peer], wire_done_word(r->epoch, status),
                           &t->peer_region[peer], wire_done_off(&t->layout, t->rank, r->bank));
}

static int zcopy_tx(coll_req_t *r, uint32_t peer)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;
    chan_rmem_t dst;
    wire_ctrl_t adv;
    int rc;

    if (!coll_ctrl_read(r, peer, &adv))
        return 0;
    if (adv.size != r->bytes) {
        zcopy_done_put(r, peer, WIRE_ST_MISMATCH);
        return coll_mismatch(r, peer, adv.size);
    }
    if (adv.rkey.kind == 0)
        return coll_proto_bounce.tx(r, peer); /* the receiver could not register */
#ifdef ARCOLL_FAULTS
    if (wire_fault_bad_rkey)
        adv.rkey.key ^= 0x5a5a; /* tests: a wrong key must fail, not hang */
#endif
    rc = c->ops->rmem_import(c, t->ranks[peer], &adv.rkey, &dst);
    if (rc != ARCOLL_OK)
        return rc;
    rc = c->ops->put(c, t->ranks[peer], coll_src(r, peer), r->bytes,
                     r->sreg_valid ? r->sreg.mem : NULL, &dst,
                     adv.boff + (uint64_t)t->rank * r->bytes);
    c->ops->rmem_release(c, &dst);
    if (rc != ARCOLL_OK)
        return rc;
    rc = zcopy_done_put(r, peer, WIRE_ST_OK);
    return rc == ARCOLL_OK ? 1 : rc;
}

static int zcopy_rx(coll_req_t *r, uint32_t peer)
{
    struct arcoll_team *t = r->team;
    uint64_t w;

    if (r->zc_bounce)
        return coll_proto_bounce.rx(r, peer);
    w = wire_load(&t->region, wire_done_off(&t->layout, peer, r->bank));
    if (!wire_done_epoch_match(w, r->epoch))
        return 0;
    if (wire_done_status(w) != WIRE_ST_OK)
        return coll_mismatch(r, peer, UINT64_MAX);
    return 1;
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
}

const coll_proto_t coll_proto_zcopy = {
    .name = "zcopy",
    .start = zcopy_start,
    .arrived = zcopy_arrived,
    .tx_ready = zcopy_arrived,
    .tx = zcopy_tx,
    .rx = zcopy_rx,
    .finish = zcopy_finish,
};
