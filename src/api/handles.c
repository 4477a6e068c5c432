/* Handle checks of the API's entry points: a handle is looked up in the
 * engine's registry of live contexts (core_live) and their teams, so that a
 * call after arcoll_finalize or arcoll_team_free is an error, not a use after
 * free. */
#include "api/api.h"
#include "util/log.h"

int core_ctx_check(arcoll_context_t ctx, const char *what)
{
    for (struct arcoll_context *c = core_live; c != NULL; c = c->next)
        if (c == ctx)
            return ARCOLL_OK;
    if (core_live == NULL)
        log_err("%s: arcoll is not initialized (no live context; was arcoll_finalize "
                "called?)",
                what);
    else
        log_err("%s: invalid or finalized context handle %p", what, (void *)ctx);
    return ARCOLL_ERR_STATE;
}

int core_team_check(arcoll_team_t team, const char *what)
{
    for (struct arcoll_context *c = core_live; c != NULL; c = c->next)
        for (struct arcoll_team *t = c->teams; t != NULL; t = t->next)
            if (t == team)
                return ARCOLL_OK;
    if (core_live == NULL)
        log_err("%s: arcoll is not initialized (no live context; was arcoll_finalize "
                "called?)",
                what);
    else if (team == NULL)
        log_err("%s: team is NULL", what);
    else
        log_err("%s: invalid or destroyed team handle %p", what, (void *)team);
    return ARCOLL_ERR_STATE;
}
