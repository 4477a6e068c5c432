/* PAP profiler (ARCOLL_PROFILE=FILE): every collective's arrival and exit
 * time per rank on a clock common to all ranks, written to FILE.<rank> at
 * arcoll_finalize and summarised by arcoll-pap-report (docs/profiling.md).
 *
 * Costs nothing when off: the engine tests ctx->prof once per call start and
 * r->prof_slot once per completion. When on, a call's record is taken from a
 * preallocated buffer at start (which doubles when full) and completed
 * without allocating. Profiling never makes a collective fail: a record that
 * cannot be stored is counted as dropped. This is the engine's half (the
 * records, prof_rec.c); the API's half is api/profile.h. */
#ifndef ARCOLL_ENGINE_PROF_H
#define ARCOLL_ENGINE_PROF_H

#include "engine/team.h"

#define PROF_FORMAT_VERSION 1

typedef struct prof prof_t;

/* The call r (epoch assigned, start_ns set) begins; site is the caller's
 * return address. */
void prof_call_begin(prof_t *p, coll_req_t *r, const void *site);
/* The call r is over with r->status. */
void prof_call_end(prof_t *p, coll_req_t *r);

#endif
