/* The PAP profiler's exchanges at init and finalize (profile.c): clock
 * offsets, T(size), the file. The records are the engine's (engine/prof.h). */
#ifndef ARCOLL_API_PROFILE_H
#define ARCOLL_API_PROFILE_H

#include "engine/prof.h"

/* Collective over the context, once its world team exists, when any rank
 * has ARCOLL_PROFILE set: estimates this rank's clock offset to rank 0.
 * Ranks without the variable take part but record nothing. *out stays NULL
 * (profiling off, with a warning) if a rank lacks memory; fails only if the
 * bootstrap or the world team fails (arcoll_init then fails with it). */
int prof_create(struct arcoll_context *ctx, prof_t **out);

/* Collective over the context unless lost (a peer is gone: then only the
 * file is written): a second clock exchange, T(size) between ranks 0 and 1,
 * then FILE.<rank>. Logs a warning on failure; frees p. Call with ctx->prof
 * already cleared so that its own collectives are not recorded. */
void prof_finalize(struct arcoll_context *ctx, prof_t *p, int lost);

#endif
