/* PAP_Direct (Qian and Afsahi §4.2-4.3): write first to every peer already known to
 * have arrived, then to the others as soon as we may; never wait on one late
 * peer while another could be served. Scan order is the paper's: from
 * (p-i) mod N on the copy path (we look at who wrote to us), from (p+i) mod N
 * on the zero-copy path (we look at who advertised to us). */
#include "alg/sched/lin_sched.h"
#include "engine/engine.h"

static uint32_t pap_peer(const coll_req_t *r, uint32_t i)
{
    const struct arcoll_team *t = r->team;

    return r->proto == &coll_proto_zcopy ? (t->rank + i) % t->size
                                         : (t->rank + t->size - i) % t->size;
}

static int pap_tx_progress(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    int rc = coll_tx_continue(r);

    if (rc != ARCOLL_OK)
        return rc;
    /* Arrived peers first ... */
    for (uint32_t i = 1; r->tx_left && i < t->size; i++) {
        uint32_t peer = pap_peer(r, i);
        if (r->peers[peer].tx_state != COLL_TX_IDLE || !r->proto->arrived(r, peer))
            continue;
        rc = coll_tx(r, peer);
        if (rc != ARCOLL_OK)
            return rc;
    }
    /* ... then everyone we may already write to (copy path: all of them). Where
     * "may write" is "arrived" (zero-copy), the first pass did it all. */
    if (r->proto->tx_ready == r->proto->arrived)
        return ARCOLL_OK;
    for (uint32_t i = 1; r->tx_left && i < t->size; i++) {
        uint32_t peer = pap_peer(r, i);
        if (r->peers[peer].tx_state != COLL_TX_IDLE)
            continue;
        int ready = r->proto->tx_ready(r, peer);
        if (ready < 0)
            return ready;
        if (ready) {
            rc = coll_tx(r, peer);
            if (rc != ARCOLL_OK)
                return rc;
        }
    }
    return ARCOLL_OK;
}

/* The v-forms in place and the reductions: a linear schedule, arrived peers
 * first (not in place, alltoallv and allgatherv run flat: eng_is_flat). */
static int pap_sched_start(coll_req_t *r)
{
    sched_t *s = eng_sched(r);
    int rc = s != NULL ? lin_sched_build(r, s) : ARCOLL_ERR_NOMEM;

    return rc != ARCOLL_OK ? rc : eng_sched_start(r, ENG_SCHED_PAP);
}

const coll_alg_t coll_alg_pap = {
    .name = "pap",
    .fallback = CORE_ALG_PAP,
    .is_direct = 0,
    .tx_progress = pap_tx_progress,
    .start = pap_sched_start,
    .progress = eng_sched_progress,
};
