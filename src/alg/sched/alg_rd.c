/*
 * Sack 2011's algorithms for allgather(v), reduce_scatter_block and
 * allreduce: ring, rdd (recursive doubling/halving, distance-doubling
 * allgather) and rdh (recursive doubling in distance-halving order, made
 * correct by one swap round; allreduce pairs the two halves so the swaps
 * cancel). The schedules are built by src/alg/sched/rd_sched.c and run by the
 * engine's schedule executor.
 */
#include <stdlib.h>

#include "alg/sched/rd_sched.h"
#include "engine/engine.h"
#include "util/log.h"

static int rd_start(coll_req_t *r)
{
    const coll_args_t *a = &r->args;
    uint32_t n = r->team->size, me = r->team->rank;
    sched_t *s = eng_sched(r);
    uint64_t *v = NULL;
    int rc;

    if (s == NULL)
        return ARCOLL_ERR_NOMEM;
    switch (a->type) {
    case COLL_ALLGATHER:
        rc = rd_sched_allgather(s, r->alg->variant, n, me, a->bytes, a->in_place);
        break;
    case COLL_ALLGATHERV:
    case COLL_REDUCE_SCATTER:
        v = malloc(sizeof(*v) * 2 * n);
        if (v == NULL) {
            log_err("%s: out of memory", coll_type_name(a->type));
            return ARCOLL_ERR_NOMEM;
        }
        for (uint32_t j = 0; j < n; j++) {
            v[j] = a->type == COLL_REDUCE_SCATTER ? a->count
                   : a->rcounts != NULL           ? a->rcounts[j]
                                                  : a->bytes;
            v[n + j] = a->rdispls != NULL ? a->rdispls[j] : (uint64_t)j * a->bytes;
        }
        rc = a->type == COLL_ALLGATHERV
                 ? rd_sched_allgatherv(s, r->alg->variant, n, me, v, v + n, a->in_place)
                 : rd_sched_reduce_scatter(s, r->alg->variant, n, me, v, a->elem, a->in_place);
        free(v);
        break;
    case COLL_ALLREDUCE:
        rc = rd_sched_allreduce(s, r->alg->variant, n, me, a->count, a->elem, a->in_place);
        break;
    default: rc = ARCOLL_ERR_UNSUPPORTED; break;
    }
    return rc != ARCOLL_OK ? rc : eng_sched_start(r, ENG_SCHED_PAP);
}

/* An allgatherv with an empty block leaves messages out, so a rank could
 * finish without hearing from every rank: not a full exchange, which the PAP
 * schedules need (engine/engine.h). rcounts are equal on every rank, so every
 * rank decides alike. */
static const char *rd_unfit(const struct arcoll_team *t, const coll_args_t *a)
{
    if (a->type != COLL_ALLGATHERV || a->rcounts == NULL)
        return NULL;
    for (uint32_t j = 0; j < t->size; j++)
        if (a->rcounts[j] == 0)
            return "an allgatherv block is empty";
    return NULL;
}

const coll_alg_t coll_alg_ring = {.name = "ring",
                                  .unfit = rd_unfit,
                                  .fallback = CORE_ALG_PAP,
                                  .variant = RD_RING,
                                  .start = rd_start,
                                  .progress = eng_sched_progress};
const coll_alg_t coll_alg_rdd = {.name = "rdd",
                                 .unfit = rd_unfit,
                                 .fallback = CORE_ALG_PAP,
                                 .variant = RD_DOUBLING,
                                 .start = rd_start,
                                 .progress = eng_sched_progress};
const coll_alg_t coll_alg_rdh = {.name = "rdh",
                                 .unfit = rd_unfit,
                                 .fallback = CORE_ALG_PAP,
                                 .variant = RD_HALVING,
                                 .start = rd_start,
                                 .progress = eng_sched_progress};
