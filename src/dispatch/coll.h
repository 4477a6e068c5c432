/*
 * The dispatcher: validates a call, picks the algorithm (configuration,
 * tuning table, fallbacks) from the one list of config/algs.h and starts it on
 * the engine. Nothing below it includes this header.
 */
#ifndef ARCOLL_DISPATCH_COLL_H
#define ARCOLL_DISPATCH_COLL_H

#include "engine/engine.h"

/* The algorithm of CORE_ALG_* id (never auto), or NULL. */
const coll_alg_t *coll_alg_by_id(int id);
/* Does algorithm id serve the collective? */
int coll_alg_serves(int id, coll_type_t type);

/* Validate and start a call with the configured algorithm. site: the
 * application's call site (profiler), or NULL. ARCOLL_OK, _INPROGRESS
 * (*out set) or an error. */
int coll_start_args(struct arcoll_team *t, const coll_args_t *a, const void *site,
                    coll_req_t **out);
/* The same for a nonblocking call whose handle is u: behind a full window
 * (or calls queued before it) it queues and returns ARCOLL_INPROGRESS with
 * *out NULL; u then follows it (u->pend, later u->r). */
int coll_submit(struct arcoll_team *t, const coll_args_t *a, const void *site,
                struct arcoll_request *u, coll_req_t **out);
/* alltoall/allgather of bytes per rank (the profiler's own calls too). */
int coll_start(struct arcoll_team *t, coll_type_t type, const void *sbuf, void *rbuf, size_t bytes,
               const void *site, coll_req_t **out);
/* The algorithm a call of bytes per rank would run, without starting one
 * (arcoll_info): auto through the tuning table into *picked, then the
 * fallbacks; *why says why the result differs from *picked (NULL if not). */
int coll_alg_resolve(struct arcoll_team *t, coll_type_t type, size_t bytes, int alg, int *picked,
                     const char **why);

#endif
