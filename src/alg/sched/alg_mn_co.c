/*
 * MN-CO (Li et al. §2.5): alltoall and allgather among all the team's ranks
 * as two rounds of aggregated messages over the block matrix cut in Morton
 * order (alg/sched/mnco_sched.h builds the schedule; docs/protocol.md §16). It is
 * a schedule, so it runs over any channel and PAP-aware: round-0 messages go
 * to owners that have arrived first, and an owner forwards as soon as all of
 * its sources' rows are in. Flat over the team's ranks: the seed's
 * node-leader ("topo-aware") form is not built.
 */
#include "alg/sched/mnco_sched.h"
#include "engine/engine.h"

/* The schedule is rebuilt per call into the request slot's reused memory
 * (as the other schedules are): O(team size) and no allocation. */
static int mnco_start(coll_req_t *r)
{
    const coll_args_t *a = &r->args;
    uint32_t n = r->team->size, me = r->team->rank;
    sched_t *s = eng_sched(r);
    int rc;

    if (s == NULL)
        return ARCOLL_ERR_NOMEM;
    switch (a->type) {
    case COLL_ALLTOALL: rc = mnco_sched_alltoall(s, n, me, a->bytes); break;
    case COLL_ALLGATHER: rc = mnco_sched_allgather(s, n, me, a->bytes); break;
    default: rc = ARCOLL_ERR_UNSUPPORTED; break;
    }
    /* Every rank's receive buffer needs a block of every rank: a full exchange. */
    return rc != ARCOLL_OK ? rc : eng_sched_start(r, ENG_SCHED_PAP);
}

const coll_alg_t coll_alg_mn_co = {
    .name = "mn_co", .fallback = CORE_ALG_PAP, .start = mnco_start, .progress = eng_sched_progress};
