/* Direct (Qian and Afsahi §4.2's baseline): at step i write to (p+i) mod N, and do
 * not move on before that peer is ready. One late peer stalls every later
 * step: this is what PAP_Direct improves on. Receiving goes on meanwhile. */
#include "alg/sched/lin_sched.h"
#include "engine/engine.h"

static int direct_tx_progress(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    int rc = coll_tx_continue(r);

    if (rc != ARCOLL_OK)
        return rc;
    while (r->step < t->size) {
        uint32_t peer = (t->rank + r->step) % t->size;
        if (r->peers[peer].tx_state == COLL_TX_DONE) { /* ended by a mismatch */
            r->step++;
            continue;
        }
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

/* The v-forms in place and the reductions: a linear schedule, in order after
 * each receiver's advertisement (not in place, the v-forms run flat). */
static int direct_sched_start(coll_req_t *r)
{
    sched_t *s = eng_sched(r);
    int rc = s != NULL ? lin_sched_build(r, s) : ARCOLL_ERR_NOMEM;

    return rc != ARCOLL_OK ? rc : eng_sched_start(r, ENG_SCHED_DIRECT);
}

const coll_alg_t coll_alg_direct = {
    .name = "direct",
    .fallback = CORE_ALG_DIRECT,
    .is_direct = 1,
    .tx_progress = direct_tx_progress,
    .start = direct_sched_start,
    .progress = eng_sched_progress,
};
