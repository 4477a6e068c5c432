/* The engine's functions shared by its own files only: the per-call state
 * machine (eng_call.c) and the checks a waiting call runs (engine_check.c:
 * size mismatch, refusal, peers' failure words, liveness,
 * timeouts). */
#ifndef ARCOLL_ENGINE_ENG_INT_H
#define ARCOLL_ENGINE_ENG_INT_H

#include "engine/engine.h"

#define COLL_CHECK_NS 100000000ULL /* peer liveness checks: every 100 ms of waiting */

/* A size mismatch with a peer ends the call with it both ways (engine_check.c). */
int coll_peer_drop(coll_req_t *r, uint32_t peer, int rx_over);
/* A failed call writes the team's failure word to every ready peer, once. */
void eng_fail_tell(struct arcoll_team *t, uint64_t num, int rc);

#endif
