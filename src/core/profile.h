/* PAP profiler (ARCOLL_PROFILE=FILE): every collective's arrival and exit
 * time per rank on a clock common to all ranks, written to FILE.<rank> at
 * arcoll_finalize and summarised by arcoll-pap-report (docs/profiling.md).
 *
 * Costs nothing when off: the engine tests ctx->prof once per call start and
 * r->prof_slot once per completion. When on, a call's record is taken from a
 * preallocated buffer at start (which doubles when full) and completed
 * without allocating. Profiling never makes a collective fail: a record that
 * cannot be stored is counted as dropped. */
#ifndef ARCOLL_CORE_PROFILE_H
#define ARCOLL_CORE_PROFILE_H

#include "core/core.h"

#define PROF_FORMAT_VERSION 1

typedef struct prof prof_t;

/* Collective over the context, once its world team exists, when any rank
 * has ARCOLL_PROFILE set: estimates this rank's clock offset to rank 0.
 * Ranks without the variable take part but record nothing. *out stays NULL
 * (profiling off, with a warning) if a rank lacks memory; fails only if the
 * bootstrap or the world team fails (arcoll_init then fails with it). */
int prof_create(struct arcoll_context *ctx, prof_t **out);

/* The call r (epoch assigned, start_ns set) begins; site is the caller's
 * return address. */
void prof_call_begin(prof_t *p, coll_req_t *r, const void *site);
/* The call r is over with r->status. */
void prof_call_end(prof_t *p, coll_req_t *r);

/* Collective over the context unless lost (a peer is gone: then only the
 * file is written): a second clock exchange, T(size) between ranks 0 and 1,
 * then FILE.<rank>. Logs a warning on failure; frees p. Call with ctx->prof
 * already cleared so that its own collectives are not recorded. */
void prof_finalize(struct arcoll_context *ctx, prof_t *p, int lost);

#endif
