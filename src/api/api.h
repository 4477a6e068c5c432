/* The API's own functions shared by its files: contexts (context.c), teams
 * (team.c), collective entry points and requests (calls.c). */
#ifndef ARCOLL_API_API_H
#define ARCOLL_API_API_H

#include "engine/team.h"

#define CORE_CTX_MAGIC  0x6172636f6c6c4358ULL
#define CORE_TEAM_MAGIC 0x6172636f6c6c544dULL

/* Is ctx a live context? Logs "what: ..." if not. */
int core_ctx_check(struct arcoll_context *ctx, const char *what);
int core_team_create(struct arcoll_context *ctx, const int *ranks, int n, struct arcoll_team **out);
void core_team_free(struct arcoll_team *t);
/* A team handle of a live context? Logs "what: ..." if not. */
int core_team_check(arcoll_team_t team, const char *what);
/* Every rank of the context, over its world team (finalize, team destroy). */
int core_ctx_barrier(struct arcoll_context *ctx);
/* Mark the context's user requests as belonging to no context (finalize). */
void core_ureqs_drop(struct arcoll_context *ctx);

#endif
