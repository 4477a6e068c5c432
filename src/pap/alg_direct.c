/* Direct (seed 002 §4.2's baseline): at step i write to (p+i) mod N, and do
 * not move on before that peer is ready. One late peer stalls every later
 * step: this is what PAP_Direct improves on. Receiving goes on meanwhile. */
#include "core/core.h"

static int direct_tx_progress(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    int rc = coll_tx_continue(r);

    if (rc != ARCOLL_OK)
        return rc;
    while (r->step < t->size) {
        uint32_t peer = (t->rank + r->step) % t->size;
        int ready = r->proto->tx_ready(r, peer);
        if (ready <= 0)
            return ready;
        rc = coll_tx(r, peer);
        if (rc != ARCOLL_OK)
            return rc;
        r->step++;
    }
    return ARCOLL_OK;
}

const coll_alg_t coll_alg_direct = {
    .name = "direct",
    .tx_progress = direct_tx_progress,
};
