/*
 * Xu et al.'s logarithmic alltoallv, sloav: Bruck with an Element Index Table
 * and two-phase transfers, an element-routing schedule (src/alg/sched/route.c)
 * run by the engine's schedule executor; docs/protocol.md §14. Its node form,
 * sloavx, is src/alg/node/alg_sloavx.c.
 */
#include "alg/sched/route.h"
#include "engine/engine.h"
#include "util/log.h"

/* A hook that finds disagreeing counts keeps the call going (peers are
 * still owed their messages), ends it with MISMATCH and stops the streams
 * that carry what we do not expect. After the last hook of a failed call the
 * direct blocks still awaited may never come (a poisoned call skips the path
 * checks that would tell which): stop waiting for all of them. */
static int sloav_hook(void *arg, sched_t *s, sched_mem_t *m, uint32_t round)
{
    coll_req_t *r = arg;
    rt_t *rt = s->aux;
    int rc;

    if (r->deferred)
        rt_poison(rt);
    rc = rt_round(rt, s, m, round);
    if (rc != ARCOLL_OK && rc != ARCOLL_ERR_MISMATCH)
        return rc; /* INPROGRESS (it runs again), or a local failure */
    if (rt_failed(rt)) {
        if (!r->deferred)
            log_err("%s (epoch %llu, %s): %s", coll_type_name(r->type),
                    (unsigned long long)r->epoch, r->alg->name, rt_why(rt));
        r->deferred = ARCOLL_ERR_MISMATCH;
        for (uint32_t q = 0; q < r->team->size; q++)
            if (rt_rejects(rt, q, round))
                eng_sched_reject(r, q);
    }
    if (r->deferred && round == s->nrounds)
        eng_sched_reject_pending(r);
    return ARCOLL_OK;
}

/* One-phase steps: an incoming message's length comes from its header. */
static int sloav_sized(void *arg, sched_t *s, sched_mem_t *m, uint32_t idx, uint64_t len)
{
    (void)arg;
    return rt_sized(s->aux, s, m, idx, len);
}

static int sloav_start(coll_req_t *r)
{
    const struct arcoll_team *t = r->team;
    const coll_args_t *a = &r->args;
    sched_t *s = eng_sched(r);
    rt_geom_t g = {.n = t->size, .me = t->rank};
    rt_call_t c = {.scounts = a->scounts,
                   .sdispls = a->sdispls,
                   .rcounts = a->rcounts,
                   .rdispls = a->rdispls,
                   .in_place = a->in_place,
                   .thresh = t->ctx->cfg.sloav_max,
                   .phases = (int)t->ctx->cfg.sloav_phases};
    int rc;

    if (s == NULL)
        return ARCOLL_ERR_NOMEM;
    rc = rt_build(s, &g, &c);
    if (rc != ARCOLL_OK) {
        log_err("%s (%s): out of memory for the call's schedule", coll_type_name(a->type),
                r->alg->name);
        return rc;
    }
    s->hook = sloav_hook;
    if (s->on_size != NULL)
        s->on_size = sloav_sized;
    s->hook_arg = r;
    /* Every block, empty or not, reaches its destination through chains that
     * start at its source: a full exchange (protocol.md §5, §14). */
    return eng_sched_start(r, ENG_SCHED_PAP);
}

static const char *sloav_unfit(const struct arcoll_team *t, const coll_args_t *a)
{
    (void)t;
    return a->type == COLL_ALLTOALLV ? NULL : "alltoallv only";
}

const coll_alg_t coll_alg_sloav = {.name = "sloav",
                                   .unfit = sloav_unfit,
                                   .fallback = CORE_ALG_PAP,
                                   .start = sloav_start,
                                   .progress = eng_sched_progress};
