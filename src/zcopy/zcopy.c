/* Zero-copy path: each receiver advertises its registered destination
 * buffer in every sender's control slot on arrival; that advertisement is
 * the arrival signal (seed 002 §4.1). Senders write straight into the final
 * buffer, then a done word after the data (docs/protocol.md, "Zero-copy"). */
#include <string.h>

#include "core/core.h"
#include "core/log.h"

static int zcopy_start(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;
    int rc;

    rc = c->ops->mem_reg(c, r->rbuf, r->bytes * t->size, &r->rreg);
    if (rc != ARCOLL_OK)
        return rc;
    r->rreg_valid = 1;
    return coll_advertise(r, &r->rreg.rkey);
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
                           &t->peer_region[peer], wire_done_off(&t->layout, t->rank));
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
    rc = c->ops->rmem_import(c, t->ranks[peer], &adv.rkey, &dst);
    if (rc != ARCOLL_OK)
        return rc;
    rc = c->ops->put(c, t->ranks[peer], coll_src(r, peer), r->bytes, NULL, &dst,
                     (uint64_t)t->rank * r->bytes);
    c->ops->rmem_release(c, &dst);
    if (rc != ARCOLL_OK)
        return rc;
    rc = zcopy_done_put(r, peer, WIRE_ST_OK);
    return rc == ARCOLL_OK ? 1 : rc;
}

static int zcopy_rx(coll_req_t *r, uint32_t peer)
{
    struct arcoll_team *t = r->team;
    uint64_t w = wire_load(&t->region, wire_done_off(&t->layout, peer));

    if (!wire_done_epoch_match(w, r->epoch))
        return 0;
    if (wire_done_status(w) != WIRE_ST_OK)
        return coll_mismatch(r, peer, UINT64_MAX);
    return 1;
}

static void zcopy_finish(coll_req_t *r)
{
    chan_t *c = r->team->ctx->chan;

    if (r->rreg_valid) {
        c->ops->mem_dereg(c, &r->rreg);
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
