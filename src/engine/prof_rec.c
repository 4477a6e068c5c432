/* The engine's side of the PAP profiler (engine/prof.h): one record per
 * call, taken at its start and completed at its end, never allocating on
 * the way but to double a full buffer. */
#include <stdlib.h>

#include "engine/prof_int.h"
#include "util/log.h"

static int prof_grow(prof_t *p)
{
    size_t cap = p->cap ? p->cap * 2 : PROF_FIRST_RECS;
    prof_rec_t *recs = cap > p->cap ? realloc(p->recs, sizeof(*recs) * cap) : NULL;

    if (recs == NULL) {
        if (!p->warned++)
            log_warn("ARCOLL_PROFILE: out of memory after %zu records; later calls are "
                     "dropped (the report will refuse this profile)",
                     p->nrecs);
        return ARCOLL_ERR_NOMEM;
    }
    p->recs = recs;
    p->cap = cap;
    return ARCOLL_OK;
}

void prof_call_begin(prof_t *p, coll_req_t *r, const void *site)
{
    prof_rec_t *rec;

    if (!p->record)
        return;
    if (p->nrecs == p->cap && prof_grow(p) != ARCOLL_OK) {
        p->dropped++;
        return;
    }
    rec = &p->recs[p->nrecs++];
    rec->arrive_ns = prof_local(r->start_ns);
    rec->exit_ns = 0;
    rec->epoch = r->epoch;
    rec->bytes = r->bytes;
    rec->site = site;
    rec->team_id = r->team->id;
    rec->team_size = r->team->size;
    rec->leader = (uint32_t)r->team->ranks[0];
    rec->status = ARCOLL_INPROGRESS;
    rec->type = (uint32_t)r->type;
    r->prof_slot = p->nrecs;
}

void prof_call_end(prof_t *p, coll_req_t *r)
{
    if (p != NULL && r->prof_slot <= p->nrecs) {
        prof_rec_t *rec = &p->recs[r->prof_slot - 1];
        rec->exit_ns = prof_local(core_time_ns());
        rec->status = r->status;
    }
    r->prof_slot = 0;
}
