/* The collective entry points of arcoll.h, blocking and nonblocking, and the
 * user requests (test, wait, progress). */
#include <stdlib.h>

#include "api/api.h"
#include "api/embed.h"
#include "dispatch/coll.h"
#include "util/log.h"

/* Live handles of nonblocking calls: a handle is checked against this list,
 * so that a spent or finalized one is an error, not a use after free. */
static struct arcoll_request *core_ureqs;
#define CORE_REQ_MAGIC 0x6172636f6c6c5251ULL

static void core_ureq_unlink(struct arcoll_request *u)
{
    for (struct arcoll_request **pp = &core_ureqs; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == u) {
            *pp = u->next;
            break;
        }
    }
    u->magic = 0;
    free(u);
}

/* Handles of a context that finalize frees: the calls are gone with it. */
void core_ureqs_drop(struct arcoll_context *ctx)
{
    struct arcoll_request **pp = &core_ureqs;

    for (struct arcoll_team *t = ctx->teams; t != NULL; t = t->next)
        eng_pend_drop(t); /* a failed team's queued calls never started */

    while (*pp != NULL) {
        struct arcoll_request *u = *pp;
        if (u->ctx != ctx) {
            pp = &u->next;
            continue;
        }
        if (u->r != NULL)
            u->r->ureq = NULL;
        *pp = u->next;
        u->magic = 0;
        free(u);
    }
}

/* A nonblocking call: its handle first, which the engine links to the call
 * when it starts (at once, or from the queue behind a full window). A call
 * that finished at once is handed back as NULL, which
 * test/wait treat as complete. */
static int core_coll_nb(arcoll_team_t team, coll_args_t *a, arcoll_request_t *req, const void *site)
{
    struct arcoll_request *u = calloc(1, sizeof(*u));
    coll_req_t *r;
    int rc;

    *req = NULL;
    if (u == NULL) {
        /* The others start it: run it to the end here rather than fail. */
        log_warn("nonblocking call: out of memory for a handle; completing it now");
        rc = coll_start_args(team, a, site, &r);
        return rc == ARCOLL_INPROGRESS ? coll_wait(r) : rc;
    }
    u->magic = CORE_REQ_MAGIC;
    u->ctx = team->ctx;
    u->team = team;
    u->status = ARCOLL_INPROGRESS;
    rc = coll_submit(team, a, site, u, &r);
    if (rc != ARCOLL_INPROGRESS) {
        free(u);
        return rc;
    }
    if (u->pend == NULL) {
        r->ureq = u;
        u->r = r;
    }
    u->next = core_ureqs;
    core_ureqs = u;
    *req = u;
    return ARCOLL_OK;
}

/* site: the application's return address, for the profiler. */
static int core_coll_args(arcoll_team_t team, coll_args_t *a, arcoll_request_t *req,
                          const void *site)
{
    coll_req_t *r;
    const void *given = core_call_site; /* arcoll_call_site: applies to this call only */
    int rc;

    core_call_site = NULL;
    if (given != NULL)
        site = given;
    rc = core_team_check(team, coll_type_name(a->type));
    if (rc != ARCOLL_OK)
        return rc;
    a->in_place = a->sbuf == ARCOLL_IN_PLACE;
    if (req != NULL)
        return core_coll_nb(team, a, req, site);
    rc = coll_start_args(team, a, site, &r);
    return rc == ARCOLL_INPROGRESS ? coll_wait(r) : rc;
}

static int core_coll(arcoll_team_t team, coll_type_t type, const void *sbuf, void *rbuf,
                     size_t bytes, arcoll_request_t *req, const void *site)
{
    coll_args_t a = {.type = type, .sbuf = sbuf, .rbuf = rbuf, .bytes = bytes};

    return core_coll_args(team, &a, req, site);
}

/* A nonblocking call needs somewhere to put its handle. */
static int core_req_arg(arcoll_request_t *req, const char *what)
{
    if (req != NULL)
        return ARCOLL_OK;
    log_err("%s: request pointer is NULL", what);
    return ARCOLL_ERR_INVALID;
}

int arcoll_alltoall(arcoll_team_t team, const void *sbuf, void *rbuf, size_t bytes)
{
    return core_coll(team, COLL_ALLTOALL, sbuf, rbuf, bytes, NULL, __builtin_return_address(0));
}

int arcoll_allgather(arcoll_team_t team, const void *sbuf, void *rbuf, size_t bytes)
{
    return core_coll(team, COLL_ALLGATHER, sbuf, rbuf, bytes, NULL, __builtin_return_address(0));
}

int arcoll_ialltoall(arcoll_team_t team, const void *sbuf, void *rbuf, size_t bytes,
                     arcoll_request_t *req)
{
    int rc = core_req_arg(req, "arcoll_ialltoall");

    return rc != ARCOLL_OK ? rc
                           : core_coll(team, COLL_ALLTOALL, sbuf, rbuf, bytes, req,
                                       __builtin_return_address(0));
}

int arcoll_iallgather(arcoll_team_t team, const void *sbuf, void *rbuf, size_t bytes,
                      arcoll_request_t *req)
{
    int rc = core_req_arg(req, "arcoll_iallgather");

    return rc != ARCOLL_OK ? rc
                           : core_coll(team, COLL_ALLGATHER, sbuf, rbuf, bytes, req,
                                       __builtin_return_address(0));
}

static int core_alltoallv(arcoll_team_t team, const void *sbuf, const size_t *scounts,
                          const size_t *sdispls, void *rbuf, const size_t *rcounts,
                          const size_t *rdispls, arcoll_request_t *req, const void *site)
{
    coll_args_t a = {.type = COLL_ALLTOALLV,
                     .sbuf = sbuf,
                     .rbuf = rbuf,
                     .scounts = scounts,
                     .sdispls = sdispls,
                     .rcounts = rcounts,
                     .rdispls = rdispls};

    return core_coll_args(team, &a, req, site);
}

int arcoll_alltoallv(arcoll_team_t team, const void *sbuf, const size_t *scounts,
                     const size_t *sdispls, void *rbuf, const size_t *rcounts,
                     const size_t *rdispls)
{
    return core_alltoallv(team, sbuf, scounts, sdispls, rbuf, rcounts, rdispls, NULL,
                          __builtin_return_address(0));
}

int arcoll_ialltoallv(arcoll_team_t team, const void *sbuf, const size_t *scounts,
                      const size_t *sdispls, void *rbuf, const size_t *rcounts,
                      const size_t *rdispls, arcoll_request_t *req)
{
    int rc = core_req_arg(req, "arcoll_ialltoallv");

    return rc != ARCOLL_OK ? rc
                           : core_alltoallv(team, sbuf, scounts, sdispls, rbuf, rcounts, rdispls,
                                            req, __builtin_return_address(0));
}

static int core_allgatherv(arcoll_team_t team, const void *sbuf, size_t sbytes, void *rbuf,
                           const size_t *rcounts, const size_t *rdispls, arcoll_request_t *req,
                           const void *site)
{
    coll_args_t a = {.type = COLL_ALLGATHERV,
                     .sbuf = sbuf,
                     .rbuf = rbuf,
                     .bytes = sbytes,
                     .rcounts = rcounts,
                     .rdispls = rdispls};

    return core_coll_args(team, &a, req, site);
}

int arcoll_allgatherv(arcoll_team_t team, const void *sbuf, size_t sbytes, void *rbuf,
                      const size_t *rcounts, const size_t *rdispls)
{
    return core_allgatherv(team, sbuf, sbytes, rbuf, rcounts, rdispls, NULL,
                           __builtin_return_address(0));
}

int arcoll_iallgatherv(arcoll_team_t team, const void *sbuf, size_t sbytes, void *rbuf,
                       const size_t *rcounts, const size_t *rdispls, arcoll_request_t *req)
{
    int rc = core_req_arg(req, "arcoll_iallgatherv");

    return rc != ARCOLL_OK ? rc
                           : core_allgatherv(team, sbuf, sbytes, rbuf, rcounts, rdispls, req,
                                             __builtin_return_address(0));
}

static int core_reduce(arcoll_team_t team, coll_type_t type, const void *sbuf, void *rbuf,
                       size_t count, arcoll_dtype_t dtype, arcoll_op_t op, arcoll_request_t *req,
                       const void *site)
{
    coll_args_t a = {
        .type = type, .sbuf = sbuf, .rbuf = rbuf, .count = count, .dtype = dtype, .op = op};

    return core_coll_args(team, &a, req, site);
}

int arcoll_reduce_scatter_block(arcoll_team_t team, const void *sbuf, void *rbuf, size_t count,
                                arcoll_dtype_t dtype, arcoll_op_t op)
{
    return core_reduce(team, COLL_REDUCE_SCATTER, sbuf, rbuf, count, dtype, op, NULL,
                       __builtin_return_address(0));
}

int arcoll_ireduce_scatter_block(arcoll_team_t team, const void *sbuf, void *rbuf, size_t count,
                                 arcoll_dtype_t dtype, arcoll_op_t op, arcoll_request_t *req)
{
    int rc = core_req_arg(req, "arcoll_ireduce_scatter_block");

    return rc != ARCOLL_OK ? rc
                           : core_reduce(team, COLL_REDUCE_SCATTER, sbuf, rbuf, count, dtype, op,
                                         req, __builtin_return_address(0));
}

int arcoll_allreduce(arcoll_team_t team, const void *sbuf, void *rbuf, size_t count,
                     arcoll_dtype_t dtype, arcoll_op_t op)
{
    return core_reduce(team, COLL_ALLREDUCE, sbuf, rbuf, count, dtype, op, NULL,
                       __builtin_return_address(0));
}

int arcoll_iallreduce(arcoll_team_t team, const void *sbuf, void *rbuf, size_t count,
                      arcoll_dtype_t dtype, arcoll_op_t op, arcoll_request_t *req)
{
    int rc = core_req_arg(req, "arcoll_iallreduce");

    return rc != ARCOLL_OK ? rc
                           : core_reduce(team, COLL_ALLREDUCE, sbuf, rbuf, count, dtype, op, req,
                                         __builtin_return_address(0));
}

static int core_req_check(arcoll_request_t *req, struct arcoll_request **out)
{
    struct arcoll_request *u;

    *out = NULL;
    if (req == NULL) {
        log_err("arcoll_test/wait: request pointer is NULL");
        return ARCOLL_ERR_INVALID;
    }
    if (*req == NULL)
        return ARCOLL_OK;
    for (u = core_ureqs; u != NULL; u = u->next) {
        if (u == *req) {
            *out = u;
            return ARCOLL_OK;
        }
    }
    log_err("arcoll_test/wait: invalid, completed or finalized request %p", (void *)*req);
    return ARCOLL_ERR_STATE;
}

/* The call behind u is over: hand its status back and spend the handle. */
static int core_req_spend(arcoll_request_t *req, struct arcoll_request *u)
{
    int rc = u->status;

    core_ureq_unlink(u);
    *req = NULL;
    return rc;
}

int arcoll_test(arcoll_request_t *req)
{
    struct arcoll_request *u;
    int rc = core_req_check(req, &u);

    if (rc != ARCOLL_OK || u == NULL)
        return rc;
    if (u->r != NULL || u->pend != NULL) {
        coll_progress_all(u->r != NULL ? u->r->team : u->team);
        if (u->r != NULL || u->pend != NULL)
            return ARCOLL_INPROGRESS;
    }
    return core_req_spend(req, u);
}

int arcoll_wait(arcoll_request_t *req)
{
    struct arcoll_request *u;
    int rc = core_req_check(req, &u);

    if (rc != ARCOLL_OK || u == NULL)
        return rc;
    eng_ureq_wait(u);
    return core_req_spend(req, u);
}

int arcoll_waitall(int n, arcoll_request_t *reqs)
{
    int first = ARCOLL_OK;

    if (n < 0 || (n > 0 && reqs == NULL)) {
        log_err("arcoll_waitall: %d requests at %p", n, (void *)reqs);
        return ARCOLL_ERR_INVALID;
    }
    for (int i = 0; i < n; i++) {
        int rc = arcoll_wait(&reqs[i]);
        if (rc != ARCOLL_OK && first == ARCOLL_OK)
            first = rc;
    }
    return first;
}

int arcoll_progress(arcoll_context_t ctx)
{
    int rc = core_ctx_check(ctx, "arcoll_progress");

    if (rc != ARCOLL_OK)
        return rc;
    for (struct arcoll_team *t = ctx->teams; t != NULL; t = t->next)
        coll_team_progress(t); /* errors are reported by arcoll_test/wait */
    return ARCOLL_OK;
}

int arcoll_context_progress_hook(arcoll_context_t ctx, void (*fn)(void *arg), void *arg)
{
    int rc = core_ctx_check(ctx, "arcoll_context_progress_hook");

    if (rc != ARCOLL_OK)
        return rc;
    ctx->hook = fn;
    ctx->hook_arg = arg;
    return ARCOLL_OK;
}
