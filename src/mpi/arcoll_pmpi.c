/*
 * libarcoll_mpi.so: the collectives of unmodified MPI programs on arcoll,
 * through the MPI profiling interface (docs/embedding.md, "The PMPI shim"):
 * MPI_Alltoall(v), MPI_Allgather(v), MPI_Reduce_scatter_block, MPI_Allreduce
 * and their nonblocking forms, from C and from Fortran.
 *
 * Contexts and teams. A communicator that is not made from one the shim
 * knows gets an arcoll context of its own at its first intercepted
 * collective (its "root" communicator): contexts bootstrap through callbacks,
 * here PMPI collectives on a private copy of the communicator, so their
 * traffic never meets the application's. A communicator made by
 * MPI_Comm_split, _split_type, _create, _dup or _dup_with_info from one with
 * a context instead gets a team that arcoll_team_split makes from its
 * parent's team, over the parent's channel, and shares the parent's context
 * (no bootstrap, no PMPI beyond one allreduce that checks the team's ranks
 * are the communicator's). Each communicator's record hangs on it as an
 * attribute whose delete callback frees its team (arcoll_team_free,
 * collective over the communicator like MPI_Comm_free); a context counts the
 * communicators of this process on it, and is finalized when the last goes,
 * at the free of a communicator spanning all its ranks once an allreduce
 * over them says no rank uses it any more: arcoll_finalize is collective over
 * every rank of the context, which no smaller communicator gathers. A
 * context whose last communicators go on different ranks at different frees
 * (a parent freed before children that do not span it) waits for
 * MPI_Finalize, which finalizes the remaining contexts newest first (the
 * reverse of an order every process agrees on, since creations are
 * collective) before PMPI_Finalize. ARCOLL_MPI_SPLIT=off (agreed at a
 * context's creation) gives every communicator its own context again.
 *
 * Agreement: every rank of a communicator must make the same choice between
 * arcoll and PMPI for a call, or the two halves wait for each other forever.
 * So the choice depends only on what MPI makes equal on all ranks, or on
 * what the ranks agreed on: the thread level (agreed over MPI_COMM_WORLD at
 * MPI_Init), the communicator (intracommunicator, and its record, agreed at
 * its first call or its creation: every local step that may fail there,
 * memory, the attribute, the private copies, the context, is part of one
 * allreduce the creation runs anyway), the collective, and for reductions
 * the (datatype, op) pair. Never on a rank's own datatype or
 * count: MPI lets ranks describe the same bytes with different datatypes.
 * Data movement therefore takes any datatype: a contiguous one goes straight
 * to arcoll, any other is packed into a temporary buffer (and unpacked after),
 * and MPI_IN_PLACE is served too. A reduction goes to PMPI when its datatype
 * has no arcoll_dtype_t or its op no arcoll_op_t, with a debug line
 * (ARCOLL_LOG=debug).
 *
 * Nonblocking calls return an MPI generalized request. arcoll moves only
 * inside arcoll_test/arcoll_wait, and the MPI library cannot know that, so
 * every MPI wait/test call is intercepted: while shim requests are pending it
 * polls them (arcoll_test, then MPI_Grequest_complete) between nonblocking
 * PMPI tests of the caller's requests, which keeps MPI progressing too. A
 * request that fails is raised on its communicator in the wait or test that
 * sees it, and enters the failure agreement there as a blocking call would.
 *
 * Fortran: Open MPI's Fortran bindings call the PMPI_ C functions, which the
 * C definitions below never see, so the shim also defines the Fortran
 * symbols (mpi_x_, mpi_x__, mpi_x, MPI_X for mpif.h and `use mpi`; ompi_x_f,
 * which the mpi_f08 module's wrappers call) for every call it defines in C,
 * MPI_Finalize, the wait/test calls and the communicator constructors
 * included. MPI_Comm_free needs none: the attribute's delete callback runs
 * inside PMPI_Comm_free, whichever binding called it.
 */
#include <dlfcn.h>
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arcoll.h"
#include "arcoll_mpi.h"
#include "arcoll_mpi_common.h"
#include "pmpi_int.h"
#include "preload/heap_preload.h"

enum { SHIM_UNKNOWN = 0, SHIM_ON = 1, SHIM_OFF = -1 };

static int shim_state = SHIM_UNKNOWN;
static int shim_keyval = MPI_KEYVAL_INVALID;
static int shim_busy; /* inside a shim call: MPI calls from within go straight through */
/* The communicator of the last lookup and its record (a one-entry cache in
 * front of MPI_Comm_get_attr, the costliest step of a small call): cleared
 * by the attribute's delete callback, so a freed handle reused for a new
 * communicator never finds the old record. */
static MPI_Comm shim_last_comm = MPI_COMM_NULL;
static amc_comm_t *shim_last_rec;

static void shim_req_drain(MPI_Comm comm);
static void shim_mpi_progress(void *arg);
static void shim_opal_hook(int on);

/* Collective over the communicator: the attribute's delete callback. */
static void shim_comm_destroy(amc_comm_t *c)
{
    if (c == shim_last_rec) {
        shim_last_comm = MPI_COMM_NULL;
        shim_last_rec = NULL;
    }
    if (c->sc != NULL)
        shim_req_drain(c->comm);
    /* At MPI_Finalize arcoll_finalize frees the teams with their contexts. */
    amc_comm_destroy(c, !amc_finalizing);
}

static int shim_comm_delete(MPI_Comm comm, int keyval, void *val, void *extra)
{
    (void)keyval;
    (void)extra;
    if (comm == shim_last_comm || val == shim_last_rec) {
        shim_last_comm = MPI_COMM_NULL;
        shim_last_rec = NULL;
    }
    if (val == &amc_comm_nomem)
        return MPI_SUCCESS;
    shim_busy++;
    shim_comm_destroy(val);
    shim_busy--;
    return MPI_SUCCESS;
}

/*
 * Once per process: log level, fault hook, thread level, keyval. At MPI_Init
 * (world 1) the processes agree over MPI_COMM_WORLD whether the shim serves:
 * MPI lets ranks ask for different thread levels, and a process whose shim
 * is off would call PMPI while the others enter arcoll. A process whose
 * MPI_Init the shim did not see decides alone at its first call.
 */
static void shim_setup(int world)
{
    const char *split = getenv("ARCOLL_MPI_SPLIT"), *fault = getenv("ARCOLL_MPI_FAULT");
    int level = MPI_THREAD_SINGLE, ok[2], all[2];

    amc_level = amc_level_parse();
    amc_progress_hook = shim_mpi_progress;
    PMPI_Comm_rank(MPI_COMM_WORLD, &amc_wrank);
    amc_heap_report(preload_heap_state); /* the copy this library carries */
    amc_split_env = split == NULL || (strcmp(split, "off") != 0 && strcmp(split, "0") != 0);
    if (fault != NULL && amc_wrank == 1)
        amc_fault = strcmp(fault, "split_fail") == 0     ? AMC_FAULT_SPLIT_FAIL
                    : strcmp(fault, "split_order") == 0  ? AMC_FAULT_SPLIT_ORDER
                    : strcmp(fault, "coll_fail") == 0    ? AMC_FAULT_COLL_FAIL
                    : strcmp(fault, "icoll_fail") == 0   ? AMC_FAULT_ICOLL_FAIL
                    : strcmp(fault, "setattr_fail") == 0 ? AMC_FAULT_SETATTR_FAIL
                                                         : AMC_FAULT_NONE;
    ok[0] = PMPI_Query_thread(&level) == MPI_SUCCESS && level != MPI_THREAD_MULTIPLE;
    ok[1] = PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, shim_comm_delete, &shim_keyval, NULL) ==
            MPI_SUCCESS;
    if (!ok[1])
        shim_keyval = MPI_KEYVAL_INVALID;
    all[0] = ok[0];
    all[1] = ok[1];
    if (world && PMPI_Allreduce(ok, all, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS)
        all[0] = all[1] = 0;
    shim_state = all[0] && all[1] ? SHIM_ON : SHIM_OFF;
    if (shim_state == SHIM_ON) {
        shim_opal_hook(1);
        return;
    }
    if (ok[1])
        PMPI_Comm_free_keyval(&shim_keyval);
    if (!all[0])
        amc_log(ok[0] && amc_wrank == 0 ? AMC_LOG_INFO : AMC_LOG_DEBUG,
                "MPI_THREAD_MULTIPLE%s: arcoll is not thread safe, every collective goes to PMPI",
                ok[0] ? " on another rank" : "");
    else
        amc_log(AMC_LOG_WARN, "MPI_Comm_create_keyval failed%s: every collective goes to PMPI",
                ok[1] ? " on another rank" : "");
}

/* After PMPI's MPI_Init(_thread) returned rc: the agreed setup. */
int shim_init(int rc)
{
    if (rc == MPI_SUCCESS && shim_state == SHIM_UNKNOWN)
        shim_setup(1);
    return rc;
}

int MPI_Init(int *argc, char ***argv)
{
    return shim_init(PMPI_Init(argc, argv));
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    return shim_init(PMPI_Init_thread(argc, argv, required, provided));
}

/* arcoll's progress hook: while it waits for peers, MPI's own operations
 * (a nonblocking barrier a peer waits for before it reaches arcoll's call)
 * must move too. An Iprobe on the context's private communicator matches
 * nothing (no message there has this tag) and runs MPI's progress engine. */
enum { SHIM_TAG_PROGRESS = 2 };
static void shim_mpi_progress(void *arg)
{
    const amc_ctx_t *x = arg;
    int flag = 0;

    if (amc_finalizing)
        return;
    amc_inlib++; /* inside arcoll: Open MPI's progress must not call back in */
    PMPI_Iprobe(MPI_ANY_SOURCE, SHIM_TAG_PROGRESS, x->oob, &flag, MPI_STATUS_IGNORE);
    amc_inlib--;
}

/* PMPI_Comm_set_attr of the shim's key (ARCOLL_MPI_FAULT=setattr_fail: every
 * other one fails on world rank 1). */
static int shim_attr_set(MPI_Comm comm, void *val)
{
    static unsigned tries;

    if (amc_fault == AMC_FAULT_SETATTR_FAIL && tries++ % 2 == 0) {
        amc_log(AMC_LOG_WARN, "ARCOLL_MPI_FAULT=setattr_fail: MPI_Comm_set_attr taken as failed");
        return MPI_ERR_OTHER;
    }
    return PMPI_Comm_set_attr(comm, shim_keyval, val);
}

/* The attribute could not be set on some rank: none keeps one (set: this
 * rank's is), so every rank creates the record again at the next call. */
static void shim_attr_drop(MPI_Comm comm, int set, amc_comm_t *c)
{
    static int said;

    if (set)
        PMPI_Comm_delete_attr(comm, shim_keyval); /* its callback frees c */
    else if (c != &amc_comm_nomem)
        free(c);
    if (said++ == 0)
        amc_log(AMC_LOG_WARN,
                "MPI_Comm_set_attr failed%s: a communicator's collectives go to "
                "PMPI until every rank can set it",
                set ? " on another rank" : "");
}

/*
 * Collective over comm (its first intercepted collective, or its first use as
 * a parent): a record with a context of its own, or without one, which sends
 * the communicator to PMPI for good; NULL (PMPI for this call) when the
 * attribute could not be set on some rank. Every step that may fail on one
 * rank only (memory, the attribute, the private copies, arcoll_init) is
 * agreed before its outcome is used, so that all ranks choose alike.
 */
static amc_comm_t *shim_comm_create(MPI_Comm comm)
{
    amc_comm_t *c = calloc(1, sizeof(*c));
    amc_ctx_t *x = NULL;
    MPI_Comm oob = MPI_COMM_NULL, agree = MPI_COMM_NULL;
    int inter = 0, n = 0, set, ok[2], all[2] = {0, 0};

    PMPI_Comm_test_inter(comm, &inter);
    PMPI_Comm_size(comm, &n);
    if (c != NULL) {
        c->comm = comm;
        c->size = n;
        c->agree = MPI_COMM_NULL;
    } else {
        c = &amc_comm_nomem;
    }
    /* The attribute first: a rank without it would create the record again
     * at its next call, collective where the others' would not be. */
    set = shim_attr_set(comm, c) == MPI_SUCCESS;
    if (inter) {
        /* Every rank knows it is one: nothing to agree on. */
        amc_log(AMC_LOG_DEBUG, "intercommunicator: its collectives go to PMPI");
        ok[0] = all[0] = set;
    } else {
        /* Collective even where this rank lacks memory or the attribute. */
        x = c != &amc_comm_nomem ? calloc(1, sizeof(*x)) : NULL;
        ok[0] = set;
        ok[1] = x != NULL;
        ok[1] &= amc_copy(comm, &oob) == 0;
        ok[1] &= amc_copy(comm, &agree) == 0;
        if (PMPI_Allreduce(ok, all, 2, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
            all[0] = all[1] = 0;
        if (all[0] && all[1]) {
            x->oob = oob;
        } else {
            if (oob != MPI_COMM_NULL)
                PMPI_Comm_free(&oob);
            if (agree != MPI_COMM_NULL)
                PMPI_Comm_free(&agree);
            free(x);
            x = NULL;
        }
    }
    if (!all[0]) {
        shim_attr_drop(comm, set, c);
        return NULL;
    }
    if (c == &amc_comm_nomem) {
        amc_log(AMC_LOG_WARN, "out of memory: a communicator uses PMPI");
        return c;
    }
    if (x != NULL && amc_ctx_create(x, comm, n) == 0) {
        c->sc = x;
        c->team = arcoll_team_world(x->ctx);
        c->agree = agree;
        x->users++;
    } else if (agree != MPI_COMM_NULL) {
        PMPI_Comm_free(&agree);
    }
    amc_comm_link(c);
    if (c->sc != NULL)
        amc_stats.comms_arcoll++;
    else
        amc_stats.comms_mpi++;
    return c;
}

/* This process's record of comm, created at its first call; NULL: PMPI. */
static amc_comm_t *shim_comm_get(MPI_Comm comm)
{
    amc_comm_t *c = NULL;
    int flag = 0;

    if (shim_state == SHIM_UNKNOWN)
        shim_setup(0);
    if (shim_state != SHIM_ON || comm == MPI_COMM_NULL)
        return NULL;
    if (comm == shim_last_comm)
        return shim_last_rec;
    if (PMPI_Comm_get_attr(comm, shim_keyval, &c, &flag) != MPI_SUCCESS)
        return NULL;
    if (!flag)
        c = shim_comm_create(comm);
    if (c != NULL) {
        shim_last_comm = comm;
        shim_last_rec = c;
    }
    return c;
}

/* The communicator's team; NULL: use PMPI. */
static arcoll_team_t shim_comm_team(MPI_Comm comm)
{
    amc_comm_t *c = shim_comm_get(comm);

    return c != NULL && c->sc != NULL ? c->team : NULL;
}

/*
 * Nonblocking calls: an MPI generalized request per arcoll request, on a
 * list that the wait/test calls poll.
 */
typedef struct shim_req {
    struct shim_req *next, *prev;
    MPI_Request greq;      /* the application's handle */
    arcoll_request_t areq; /* NULL once arcoll is done */
    amc_job_t job;
    int done; /* MPI_Grequest_complete called */
    int code; /* the MPI status the request completes with */
} shim_req_t;

static shim_req_t *shim_reqs;
static unsigned shim_npending; /* requests not done */
/* The list is being walked (shim_poll, shim_req_drain), or a wait or test
 * call polls it itself: Open MPI's progress callback stays out. */
static unsigned shim_walking, shim_in_wait;
/* Failed requests that MPI freed during the current wait or test call: their
 * handles and codes (the wait calls below). */
#define SHIM_FAILS 64
static MPI_Request shim_fail_h[SHIM_FAILS];
static int shim_fail_c[SHIM_FAILS];
static unsigned shim_nfails;

static void shim_req_done(shim_req_t *r, int rc)
{
    /* Done first, and the progress callback out meanwhile: amc_finish may
     * call MPI (a failure's word, a probe), whose progress must not finish r
     * a second time (shim_opal_progress). */
    r->done = 1;
    shim_npending--;
    shim_walking++;
    rc = amc_fault_take(AMC_FAULT_ICOLL_FAIL, &r->job, rc);
    r->code = amc_finish(&r->job, rc);
    shim_walking--;
    amc_stats.requests++;
    /* May free r at once (MPI_Request_free came first): the last use. */
    PMPI_Grequest_complete(r->greq);
}

/* Progress every pending request once; complete those arcoll finished.
 * waiting: inside a wait or test call, where a failure is handled as in the
 * call that failed (a blocking call's): reported, and agreed at once if
 * another rank already waits in the agreement. Elsewhere (the start of
 * another collective) it is agreed at the communicator's next call. */
static void shim_poll(int waiting)
{
    shim_req_t *next;
    int rc;

    shim_walking++;
    for (shim_req_t *r = shim_reqs; r != NULL; r = next) {
        next = r->next;
        if (r->done)
            continue;
        rc = arcoll_test(&r->areq);
        if (rc != ARCOLL_INPROGRESS) {
            r->job.in_call = waiting;
            shim_req_done(r, rc);
        }
    }
    shim_walking--;
}

/* Open MPI's progress engine calls this (opal_progress_register, found by
 * name: the shim does not link Open MPI's internals) wherever the program
 * waits inside MPI: a barrier, a receive, a wait on MPI's own requests. So
 * pending arcoll calls move there too, and a call that waits for a rank
 * stuck elsewhere times out and tells the others its word (the agreement
 * after a failure), whatever MPI call the program is in (docs/reliability.md,
 * "The PMPI shim after a failure"). Stays out of arcoll (amc_inlib: its
 * progress hook runs MPI's) and of the shim's own walks of the list. */
static int shim_opal_progress(void)
{
    if (shim_npending == 0 || shim_walking || shim_in_wait || shim_busy || amc_inlib > 0 ||
        amc_finalizing)
        return 0;
    shim_poll(0);
    return 0;
}

/* Register (on) or unregister the callback where the MPI library is Open
 * MPI's; elsewhere pending calls move only in the shim's own calls. */
static void shim_opal_hook(int on)
{
    typedef int (*opal_cb_t)(void);
    static int registered;
    int (*fn)(opal_cb_t);

    if (on == registered)
        return;
    *(void **)&fn = dlsym(RTLD_DEFAULT, on ? "opal_progress_register" : "opal_progress_unregister");
    if (fn != NULL && fn(shim_opal_progress) == 0)
        registered = on;
    amc_log(AMC_LOG_DEBUG, "Open MPI progress callback %s",
            registered ? "registered" : "not registered");
}

/* Before a communicator's context goes, or at MPI_Finalize (comm NULL: all):
 * MPI lets a program free a communicator with operations pending. */
static void shim_req_drain(MPI_Comm comm)
{
    shim_req_t *next;

    shim_walking++;
    for (shim_req_t *r = shim_reqs; r != NULL; r = next) {
        next = r->next;
        if (!r->done && (comm == MPI_COMM_NULL || r->job.comm == comm))
            shim_req_done(r, arcoll_wait(&r->areq));
    }
    shim_walking--;
}

static int shim_req_query(void *extra, MPI_Status *st)
{
    const shim_req_t *r = extra;

    PMPI_Status_set_elements(st, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(st, 0);
    st->MPI_SOURCE = MPI_ANY_SOURCE;
    st->MPI_TAG = MPI_ANY_TAG;
    (void)r;
    return MPI_SUCCESS; /* a failure is raised by the shim (see the wait calls) */
}

static int shim_req_free(void *extra)
{
    shim_req_t *r = extra;

    if (r->code != MPI_SUCCESS && shim_nfails < SHIM_FAILS) {
        shim_fail_h[shim_nfails] = r->greq;
        shim_fail_c[shim_nfails++] = r->code;
    }
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        shim_reqs = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    free(r);
    return MPI_SUCCESS;
}

/* A collective cannot be cancelled (MPI: erroneous); nothing to do. */
static int shim_req_cancel(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

/* Run a planned job, blocking (req NULL) or not. */
static int shim_run(amc_job_t *j, const void *site, MPI_Request *req)
{
    shim_req_t *r;
    int rc;

    amc_served[j->kind]++;
    if (j->packed)
        amc_stats.packed++;
    arcoll_call_site(site);
    j->in_call = 1;
    if (req == NULL) {
        rc = amc_fault_take(AMC_FAULT_COLL_FAIL, j, amc_start(j, NULL));
        return amc_finish(j, rc);
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL || PMPI_Grequest_start(shim_req_query, shim_req_free, shim_req_cancel, r,
                                         &r->greq) != MPI_SUCCESS) {
        free(r);
        amc_job_free(j);
        amc_fail_seen(j->rec, "no memory for a request", 1);
        return amc_raise(j->comm, MPI_ERR_NO_MEM, amc_names[j->kind], "no memory for a request");
    }
    r->job = *j;
    /* The datatype must outlive the call: the program may free its handle. */
    if (r->job.ubuf != NULL && PMPI_Type_dup(j->utype, &r->job.utype) == MPI_SUCCESS)
        r->job.utype_dup = 1;
    r->next = shim_reqs;
    if (shim_reqs != NULL)
        shim_reqs->prev = r;
    shim_reqs = r;
    shim_npending++;
    rc = amc_start(&r->job, &r->areq);
    *req = r->greq;
    /* Done already (a no-op, or failed): complete it now, the status goes
     * with the request. */
    if (rc != ARCOLL_OK || r->areq == NULL)
        shim_req_done(r, rc);
    r->job.in_call = 0; /* completes in a wait or test, or at a free */
    return MPI_SUCCESS;
}

/* The communicator's team for this call, or NULL for PMPI. why: a reason
 * for PMPI that all ranks share, or NULL. */
static arcoll_team_t shim_route(int kind, MPI_Comm comm, const char *why)
{
    arcoll_team_t team;

    if (shim_busy)
        return NULL;
    if (shim_npending > 0)
        shim_poll(0);
    shim_busy++;
    team = shim_comm_team(comm);
    shim_busy--;
    if (team != NULL && why != NULL) {
        amc_log(AMC_LOG_DEBUG, "%s (%d ranks): %s: to PMPI", amc_names[kind],
                arcoll_team_size(team), why);
        team = NULL;
    }
    if (team == NULL)
        amc_passed[kind]++;
    return team;
}

/* amc_gate; a nonblocking call that fails there returns MPI_REQUEST_NULL. */
static arcoll_team_t shim_gate(int kind, amc_comm_t *c, MPI_Comm comm, arcoll_team_t team,
                               int *code, MPI_Request *req)
{
    team = amc_gate(kind, c, comm, team, code);
    if (*code != MPI_SUCCESS && req != NULL)
        *req = MPI_REQUEST_NULL;
    return team;
}

/* comm's record, cached by shim_route's lookup, when it found a team. */
static amc_comm_t *shim_rec(arcoll_team_t team, MPI_Comm comm)
{
    return team != NULL ? shim_comm_get(comm) : NULL;
}

/* Alltoall and allgather, blocking (req NULL) or not; site: the caller. */
int shim_uniform(int kind, const void *site, const void *sbuf, int scount, MPI_Datatype stype,
                 void *rbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    arcoll_team_t team = shim_route(kind, comm, NULL);
    amc_comm_t *c = shim_rec(team, comm);
    amc_job_t j;
    int rc;

    team = amc_route_size(kind, c, team, rcount, rtype);
    if ((team = shim_gate(kind, c, comm, team, &rc, req)) == NULL && rc != MPI_SUCCESS)
        return rc;
    if (team == NULL) {
        switch (kind) {
        case K_ALLTOALL: return PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm);
        case K_ALLGATHER: return PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
        case AMC_NB + K_ALLTOALL:
            return PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req);
        default: return PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req);
        }
    }
    amc_job_init(&j, kind, comm, team, c);
    rc = amc_plan_uniform(&j, sbuf, scount, stype, rbuf, rcount, rtype);
    if (rc != MPI_SUCCESS)
        return amc_plan_failed(&j, rc);
    return shim_run(&j, site, req);
}

int shim_alltoallv(int kind, const void *site, const void *sbuf, const int *scounts,
                   const int *sdispls, MPI_Datatype stype, void *rbuf, const int *rcounts,
                   const int *rdispls, MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    arcoll_team_t team = shim_route(kind, comm, NULL);
    amc_comm_t *c = shim_rec(team, comm);
    amc_job_t j;
    int rc;

    if ((team = shim_gate(kind, c, comm, team, &rc, req)) == NULL && rc != MPI_SUCCESS)
        return rc;
    if (team == NULL)
        return req == NULL ? PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls,
                                            rtype, comm)
                           : PMPI_Ialltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls,
                                             rtype, comm, req);
    amc_job_init(&j, kind, comm, team, c);
    rc = amc_plan_alltoallv(&j, sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype);
    if (rc != MPI_SUCCESS)
        return amc_plan_failed(&j, rc);
    return shim_run(&j, site, req);
}

int shim_allgatherv(int kind, const void *site, const void *sbuf, int scount, MPI_Datatype stype,
                    void *rbuf, const int *rcounts, const int *displs, MPI_Datatype rtype,
                    MPI_Comm comm, MPI_Request *req)
{
    arcoll_team_t team = shim_route(kind, comm, NULL);
    amc_comm_t *c = shim_rec(team, comm);
    amc_job_t j;
    int rc;

    team = amc_route_mean(kind, c, team, rcounts, rtype);
    if ((team = shim_gate(kind, c, comm, team, &rc, req)) == NULL && rc != MPI_SUCCESS)
        return rc;
    if (team == NULL)
        return req == NULL
                   ? PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm)
                   : PMPI_Iallgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, req);
    amc_job_init(&j, kind, comm, team, c);
    rc = amc_plan_allgatherv(&j, sbuf, scount, stype, rbuf, rcounts, displs, rtype);
    if (rc != MPI_SUCCESS)
        return amc_plan_failed(&j, rc);
    return shim_run(&j, site, req);
}

/* Reduce_scatter_block (count per rank) and allreduce. */
int shim_reduce(int kind, const void *site, const void *sbuf, void *rbuf, int count,
                MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request *req)
{
    arcoll_dtype_t dt = ARCOLL_INT32;
    arcoll_op_t aop = ARCOLL_SUM;
    const char *why = amc_reduce_why(type, op, &dt, &aop);
    arcoll_team_t team = shim_route(kind, comm, why);
    amc_comm_t *c = shim_rec(team, comm);
    amc_job_t j;
    int rc;

    team = amc_route_count(kind, c, team, count, type);
    if ((team = shim_gate(kind, c, comm, team, &rc, req)) == NULL && rc != MPI_SUCCESS)
        return rc;
    if (team == NULL) {
        switch (kind) {
        case K_RSB: return PMPI_Reduce_scatter_block(sbuf, rbuf, count, type, op, comm);
        case K_ALLREDUCE: return PMPI_Allreduce(sbuf, rbuf, count, type, op, comm);
        case AMC_NB + K_RSB:
            return PMPI_Ireduce_scatter_block(sbuf, rbuf, count, type, op, comm, req);
        default: return PMPI_Iallreduce(sbuf, rbuf, count, type, op, comm, req);
        }
    }
    amc_job_init(&j, kind, comm, team, c);
    if (count < 0)
        return amc_plan_failed(&j, MPI_ERR_COUNT);
    j.sbuf = sbuf == MPI_IN_PLACE ? ARCOLL_IN_PLACE : sbuf;
    j.rbuf = rbuf;
    j.count = (size_t)count;
    j.dtype = dt;
    j.op = aop;
    return shim_run(&j, site, req);
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, MPI_Comm comm)
{
    return shim_uniform(K_ALLTOALL, __builtin_return_address(0), sbuf, scount, stype, rbuf, rcount,
                        rtype, comm, NULL);
}

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm)
{
    return shim_uniform(K_ALLGATHER, __builtin_return_address(0), sbuf, scount, stype, rbuf, rcount,
                        rtype, comm, NULL);
}

int MPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                  void *rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                  MPI_Comm comm)
{
    return shim_alltoallv(K_ALLTOALLV, __builtin_return_address(0), sbuf, scounts, sdispls, stype,
                          rbuf, rcounts, rdispls, rtype, comm, NULL);
}

int MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                   const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm)
{
    return shim_allgatherv(K_ALLGATHERV, __builtin_return_address(0), sbuf, scount, stype, rbuf,
                           rcounts, displs, rtype, comm, NULL);
}

int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm)
{
    return shim_reduce(K_RSB, __builtin_return_address(0), sbuf, rbuf, count, type, op, comm, NULL);
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm)
{
    return shim_reduce(K_ALLREDUCE, __builtin_return_address(0), sbuf, rbuf, count, type, op, comm,
                       NULL);
}

int MPI_Ialltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    return shim_uniform(AMC_NB + K_ALLTOALL, __builtin_return_address(0), sbuf, scount, stype, rbuf,
                        rcount, rtype, comm, req);
}

int MPI_Iallgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                   MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    return shim_uniform(AMC_NB + K_ALLGATHER, __builtin_return_address(0), sbuf, scount, stype,
                        rbuf, rcount, rtype, comm, req);
}

int MPI_Ialltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                   void *rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                   MPI_Comm comm, MPI_Request *req)
{
    return shim_alltoallv(AMC_NB + K_ALLTOALLV, __builtin_return_address(0), sbuf, scounts, sdispls,
                          stype, rbuf, rcounts, rdispls, rtype, comm, req);
}

int MPI_Iallgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                    const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm,
                    MPI_Request *req)
{
    return shim_allgatherv(AMC_NB + K_ALLGATHERV, __builtin_return_address(0), sbuf, scount, stype,
                           rbuf, rcounts, displs, rtype, comm, req);
}

int MPI_Ireduce_scatter_block(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                              MPI_Comm comm, MPI_Request *req)
{
    return shim_reduce(AMC_NB + K_RSB, __builtin_return_address(0), sbuf, rbuf, count, type, op,
                       comm, req);
}

int MPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm, MPI_Request *req)
{
    return shim_reduce(AMC_NB + K_ALLREDUCE, __builtin_return_address(0), sbuf, rbuf, count, type,
                       op, comm, req);
}

/*
 * Communicator constructors. PMPI makes the communicator; then, if the
 * parent has a context, arcoll_team_split makes the new communicator's team
 * from the parent's (collective over the parent, as the constructor is) with
 * a color and key that give it the communicator's members in its order.
 * A parent without a record gets its context first, here: the constructor
 * is collective over it, and one context for a parent and all its children
 * costs less than one per child, the old lazy path, whenever a parent has
 * more than one child or runs collectives itself. Intercommunicators, a
 * parent left to PMPI and a process at MPI_THREAD_MULTIPLE keep the old
 * rules (the child's first collective decides).
 */
/* Verdicts, the highest wins: NOATTR, a rank could not set the attribute. */
/* The verdict on a new communicator, worst (highest) wins. PARENT_FAILED:
 * its parent's team failed (as some rank saw it), or its parent is of a
 * failed line: it uses PMPI, and so do the communicators made from it. */
enum {
    SHIM_SPLIT_OK,
    SHIM_SPLIT_ORDER,
    SHIM_SPLIT_FAILED,
    SHIM_SPLIT_PARENT_FAILED,
    SHIM_SPLIT_NOATTR
};

/* Once per process at ARCOLL_LOG=info: why a new communicator does not share. */
static void shim_split_note(int verdict, int n)
{
    static int said[SHIM_SPLIT_PARENT_FAILED + 1];
    static const char *const why[SHIM_SPLIT_PARENT_FAILED + 1] = {
        [SHIM_SPLIT_ORDER] = "a split team's ranks differ from its communicator's (%d ranks): it "
                             "gets a context of its own",
        [SHIM_SPLIT_FAILED] = "arcoll_team_split failed: a new communicator (%d ranks) uses PMPI",
        [SHIM_SPLIT_PARENT_FAILED] = "a communicator (%d ranks) made from one whose arcoll team "
                                     "failed uses PMPI, as will those made from it"};

    if (verdict > SHIM_SPLIT_OK && verdict <= SHIM_SPLIT_PARENT_FAILED && said[verdict]++ == 0)
        amc_log(AMC_LOG_INFO, why[verdict], n);
}

/* Collective over parent (prc: what PMPI's constructor returned here). */
static void shim_derive(MPI_Comm parent, int color, int key, MPI_Comm newcomm, int prc)
{
    amc_comm_t *p, *c = NULL;
    arcoll_team_t nt = NULL;
    MPI_Comm agree = MPI_COMM_NULL;
    int inter = 0, me = -1, n = 0, mine, verdict = SHIM_SPLIT_FAILED, rc, set, copied;

    if (shim_busy || parent == MPI_COMM_NULL)
        return;
    if (shim_npending > 0)
        shim_poll(0);
    shim_busy++;
    /* Decided alike on every rank of parent: each rank's record of it came
     * from the same collective call. */
    if (PMPI_Comm_test_inter(parent, &inter) != MPI_SUCCESS || inter)
        goto out;
    p = shim_comm_get(parent);
    if (p == NULL || (p->sc == NULL && !p->failed_line) || (p->sc != NULL && !p->sc->split))
        goto out;
    /* A rank that PMPI failed still takes part, joining no team. */
    if (prc != MPI_SUCCESS || newcomm == MPI_COMM_NULL)
        color = ARCOLL_UNDEFINED;
    /* arcoll_team_split refuses a team with collectives in flight; every
     * rank of parent started the same ones, so all can finish them. */
    shim_req_drain(parent);
    /* A failed team cannot split (where this rank saw it fail, the others'
     * splits time out): the new communicator uses PMPI, as will those made
     * from it (verdict PARENT_FAILED). */
    rc = p->fail != AMC_TEAM_OK || p->sc == NULL ? ARCOLL_ERR_STATE
                                                 : arcoll_team_split(p->team, color, key, &nt);
    if (newcomm == MPI_COMM_NULL)
        goto out; /* joined none: nt is NULL */
    PMPI_Comm_rank(newcomm, &me);
    PMPI_Comm_size(newcomm, &n);
    /* The record stands for PMPI until every rank agrees on the team; the
     * attribute and the private copy are made first, so that a rank where
     * either failed is part of the verdict. */
    c = calloc(1, sizeof(*c));
    if (c != NULL) {
        c->comm = newcomm;
        c->size = n;
        c->agree = MPI_COMM_NULL;
    }
    set = shim_attr_set(newcomm, c != NULL ? (void *)c : &amc_comm_nomem) == MPI_SUCCESS;
    if (set && c != NULL)
        amc_comm_link(c);
    copied = amc_copy(newcomm, &agree) == 0;
    if (!set)
        mine = SHIM_SPLIT_NOATTR;
    else if (p->fail != AMC_TEAM_OK || p->failed_line)
        mine = SHIM_SPLIT_PARENT_FAILED;
    else if ((rc != ARCOLL_OK && p->fail == AMC_TEAM_OK) || c == NULL || !copied ||
             amc_fault == AMC_FAULT_SPLIT_FAIL)
        mine = SHIM_SPLIT_FAILED;
    else if (p->fail != AMC_TEAM_OK || nt == NULL || arcoll_team_rank(nt) != me ||
             arcoll_team_size(nt) != n || amc_fault == AMC_FAULT_SPLIT_ORDER)
        mine = SHIM_SPLIT_ORDER;
    else
        mine = SHIM_SPLIT_OK;
    if (PMPI_Allreduce(&mine, &verdict, 1, MPI_INT, MPI_MAX, newcomm) != MPI_SUCCESS)
        verdict = SHIM_SPLIT_FAILED;
    if (verdict == SHIM_SPLIT_OK) {
        c->sc = p->sc;
        c->team = nt;
        c->split = 1;
        c->agree = agree;
        p->sc->users++;
        amc_stats.comms_arcoll++;
        amc_stats.comms_split++;
        goto out;
    }
    if (agree != MPI_COMM_NULL)
        PMPI_Comm_free(&agree);
    /* nt's members are newcomm's, and all of them are here. */
    if (nt != NULL && arcoll_team_free(nt) != ARCOLL_OK)
        amc_log(AMC_LOG_WARN, "arcoll_team_free: %s", arcoll_last_error(NULL));
    if (verdict == SHIM_SPLIT_NOATTR) {
        /* No record anywhere: the old path, at its first call. */
        shim_attr_drop(newcomm, set, c != NULL ? c : &amc_comm_nomem);
        goto out;
    }
    shim_split_note(verdict, n);
    if (verdict == SHIM_SPLIT_ORDER) {
        /* No record: the old path, a context of its own at its first call. */
        amc_stats.split_fallback++;
        if (c != NULL)
            PMPI_Comm_delete_attr(newcomm, shim_keyval);
    } else {
        if (verdict == SHIM_SPLIT_PARENT_FAILED && c != NULL)
            c->failed_line = 1;
        amc_stats.split_failed++;
        amc_stats.comms_mpi++;
    }
out:
    shim_busy--;
}

/* The parent rank of rank 0 of g: a color that is the same for the members
 * of one group and differs between disjoint groups. */
static int shim_leader(MPI_Group g, MPI_Comm parent)
{
    MPI_Group pg;
    int zero = 0, leader = ARCOLL_UNDEFINED;

    if (PMPI_Comm_group(parent, &pg) != MPI_SUCCESS)
        return ARCOLL_UNDEFINED;
    if (PMPI_Group_translate_ranks(g, 1, &zero, pg, &leader) != MPI_SUCCESS ||
        leader == MPI_UNDEFINED)
        leader = ARCOLL_UNDEFINED;
    PMPI_Group_free(&pg);
    return leader;
}

/* Whether a constructor on comm may derive a team: shim on, not from inside. */
static int shim_deriving(void)
{
    if (shim_state == SHIM_UNKNOWN)
        shim_setup(0);
    return shim_state == SHIM_ON && !shim_busy;
}

/* MPI_UNDEFINED joins none; MPI orders by key, then parent rank, as arcoll. */
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_split(comm, color, key, newcomm);

    if (shim_deriving())
        shim_derive(comm, color == MPI_UNDEFINED || color < 0 ? ARCOLL_UNDEFINED : color, key,
                    rc == MPI_SUCCESS ? *newcomm : MPI_COMM_NULL, rc);
    return rc;
}

/* The groups MPI made are not known by a color: the new communicator's rank
 * 0 names its group. */
int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_split_type(comm, type, key, info, newcomm), color = ARCOLL_UNDEFINED;
    int me = 0;
    MPI_Group g;

    if (!shim_deriving())
        return rc;
    if (rc == MPI_SUCCESS && *newcomm != MPI_COMM_NULL &&
        PMPI_Comm_group(*newcomm, &g) == MPI_SUCCESS) {
        color = shim_leader(g, comm);
        PMPI_Group_free(&g);
        PMPI_Comm_rank(*newcomm, &me);
    }
    shim_derive(comm, color, me, rc == MPI_SUCCESS ? *newcomm : MPI_COMM_NULL, rc);
    return rc;
}

/* Color: the group's first member, which also tells apart the disjoint
 * groups MPI-2.2 allows; key: the rank in the group, so the order is the
 * group's. */
int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_create(comm, group, newcomm), color = ARCOLL_UNDEFINED, gr = MPI_UNDEFINED;

    if (!shim_deriving())
        return rc;
    if (rc == MPI_SUCCESS && PMPI_Group_rank(group, &gr) == MPI_SUCCESS && gr != MPI_UNDEFINED)
        color = shim_leader(group, comm);
    shim_derive(comm, color, gr, rc == MPI_SUCCESS ? *newcomm : MPI_COMM_NULL, rc);
    return rc;
}

static int shim_dup_derive(MPI_Comm comm, MPI_Comm *newcomm, int rc)
{
    int me = 0;

    if (!shim_deriving())
        return rc;
    PMPI_Comm_rank(comm, &me);
    shim_derive(comm, 0, me, rc == MPI_SUCCESS ? *newcomm : MPI_COMM_NULL, rc);
    return rc;
}

/* MPI_Comm_idup is left to the old path: its communicator is not usable
 * before the request completes, and the split is a blocking collective. */
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    return shim_dup_derive(comm, newcomm, PMPI_Comm_dup(comm, newcomm));
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
    return shim_dup_derive(comm, newcomm, PMPI_Comm_dup_with_info(comm, info, newcomm));
}

void shim_poll_some(void)
{
    if (shim_npending > 0)
        shim_poll(1);
}

/*
 * The wait/test calls. With no shim request pending they are PMPI's. With
 * some, a wait becomes a loop of shim_poll and the nonblocking PMPI test of
 * the same requests (which also runs MPI's progress engine), so that shim
 * requests anywhere, and the MPI requests the caller waits for, all move.
 *
 * A failed shim request: Open MPI raises a generalized request's error on
 * MPI_COMM_WORLD, whose handler is not the communicator's (fatal by
 * default). So the shim raises it on the communicator itself when arcoll
 * fails it (amc_finish), its query function reports success, and the wait
 * or test call that frees it returns its code (MPI_ERR_IN_STATUS with the
 * code in its status for the forms with several).
 */
static void shim_relax(unsigned spins)
{
    /* Ranks may outnumber cores: after a while, let the others run. */
    if (spins > 1000)
        sched_yield();
}

/* The code of a failed shim request freed in this wait or test call whose
 * handle was h; MPI_SUCCESS if none. */
static int shim_fail_code(MPI_Request h)
{
    for (unsigned i = 0; i < shim_nfails && i < SHIM_FAILS; i++)
        if (shim_fail_h[i] == h)
            return shim_fail_c[i];
    return MPI_SUCCESS;
}

/* After a call on one request (handle h before it) that returned rc and
 * completed it (done). */
static int shim_fails_one(MPI_Request h, int done, int rc, MPI_Status *st)
{
    int code = shim_nfails > 0 && done ? shim_fail_code(h) : MPI_SUCCESS;

    if (rc != MPI_SUCCESS || code == MPI_SUCCESS)
        return rc;
    if (st != MPI_STATUS_IGNORE)
        st->MPI_ERROR = code;
    return code;
}

/* The same for n requests (handles h before the call, NULL: not known) of
 * which out completed: idx[k] (NULL: all, in order). */
static int shim_fails_many(const MPI_Request *h, const int *idx, int out, int rc, MPI_Status *sts)
{
    int any = 0, code;

    if (shim_nfails == 0 || h == NULL || rc != MPI_SUCCESS)
        return rc;
    for (int k = 0; k < out && !any; k++)
        any = shim_fail_code(h[idx != NULL ? idx[k] : k]) != MPI_SUCCESS;
    if (!any)
        return rc;
    for (int k = 0; k < out && sts != MPI_STATUSES_IGNORE; k++) {
        code = shim_fail_code(h[idx != NULL ? idx[k] : k]);
        sts[k].MPI_ERROR = code;
    }
    return MPI_ERR_IN_STATUS;
}

/* A copy of the handles of n requests (into buf when they fit): NULL when
 * out of memory, and then failures are not told apart. */
#define SHIM_HANDLES 32
static MPI_Request *shim_handles(int n, const MPI_Request *reqs, MPI_Request *buf)
{
    MPI_Request *h = n <= SHIM_HANDLES ? buf : malloc((size_t)n * sizeof(*h));

    shim_nfails = 0;
    if (h != NULL && n > 0)
        memcpy(h, reqs, (size_t)n * sizeof(*h));
    return h;
}

static void shim_handles_free(MPI_Request *h, const MPI_Request *buf)
{
    if (h != buf)
        free(h);
}

static int shim_wait_polled(MPI_Request *req, MPI_Status *st)
{
    MPI_Request h = *req;
    int flag = 0, rc;

    shim_nfails = 0;
    for (unsigned spins = 0; shim_npending > 0; spins++) {
        shim_poll(1);
        rc = PMPI_Test(req, &flag, st);
        if (rc != MPI_SUCCESS || flag)
            return shim_fails_one(h, flag, rc, st);
        shim_relax(spins);
    }
    return shim_fails_one(h, 1, PMPI_Wait(req, st), st);
}

static int shim_test_polled(MPI_Request *req, int *flag, MPI_Status *st)
{
    MPI_Request h = *req;

    shim_nfails = 0;
    shim_poll_some();
    return shim_fails_one(h, 1, PMPI_Test(req, flag, st), st);
}

/* Waitall (flag NULL) and testall. */
static int shim_all_polled(int n, MPI_Request *reqs, int *flag, MPI_Status *sts)
{
    MPI_Request buf[SHIM_HANDLES], *h = shim_handles(n, reqs, buf);
    int done = 0, rc;

    if (flag != NULL) {
        shim_poll_some();
        rc = PMPI_Testall(n, reqs, &done, sts);
        *flag = done;
        goto out;
    }
    for (unsigned spins = 0; shim_npending > 0; spins++) {
        shim_poll(1);
        rc = PMPI_Testall(n, reqs, &done, sts);
        if (rc != MPI_SUCCESS || done)
            goto out;
        shim_relax(spins);
    }
    rc = PMPI_Waitall(n, reqs, sts);
    done = 1;
out:
    rc = shim_fails_many(h, NULL, done ? n : 0, rc, sts);
    shim_handles_free(h, buf);
    return rc;
}

/* Waitany (flag NULL) and testany. */
static int shim_any_polled(int n, MPI_Request *reqs, int *idx, int *flag, MPI_Status *st)
{
    MPI_Request buf[SHIM_HANDLES], *h = shim_handles(n, reqs, buf);
    int done = 0, rc;

    if (flag != NULL) {
        shim_poll_some();
        rc = PMPI_Testany(n, reqs, idx, &done, st);
        *flag = done;
        goto out;
    }
    for (unsigned spins = 0; shim_npending > 0; spins++) {
        shim_poll(1);
        rc = PMPI_Testany(n, reqs, idx, &done, st);
        if (rc != MPI_SUCCESS || done)
            goto out;
        shim_relax(spins);
    }
    rc = PMPI_Waitany(n, reqs, idx, st);
    done = 1;
out:
    if (h != NULL && *idx != MPI_UNDEFINED && *idx >= 0 && *idx < n)
        rc = shim_fails_one(h[*idx], done, rc, st);
    shim_handles_free(h, buf);
    return rc;
}

/* Waitsome (test 0) and testsome. */
static int shim_some_polled(int test, int n, MPI_Request *reqs, int *out, int *idx, MPI_Status *sts)
{
    MPI_Request buf[SHIM_HANDLES], *h = shim_handles(n, reqs, buf);
    int rc;

    if (test) {
        shim_poll_some();
        rc = PMPI_Testsome(n, reqs, out, idx, sts);
        goto out;
    }
    for (unsigned spins = 0; shim_npending > 0; spins++) {
        shim_poll(1);
        rc = PMPI_Testsome(n, reqs, out, idx, sts);
        if (rc != MPI_SUCCESS || *out != 0)
            goto out;
        shim_relax(spins);
    }
    rc = PMPI_Waitsome(n, reqs, out, idx, sts);
out:
    rc = shim_fails_many(h, idx, *out == MPI_UNDEFINED ? 0 : *out, rc, sts);
    shim_handles_free(h, buf);
    return rc;
}

/* The wait and test calls poll the shim's requests themselves: Open MPI's
 * progress callback stays out meanwhile (shim_opal_progress). */
int shim_wait(MPI_Request *req, MPI_Status *st)
{
    int rc;

    shim_in_wait++;
    rc = shim_wait_polled(req, st);
    shim_in_wait--;
    return rc;
}

int shim_test(MPI_Request *req, int *flag, MPI_Status *st)
{
    int rc;

    shim_in_wait++;
    rc = shim_test_polled(req, flag, st);
    shim_in_wait--;
    return rc;
}

int shim_all(int n, MPI_Request *reqs, int *flag, MPI_Status *sts)
{
    int rc;

    shim_in_wait++;
    rc = shim_all_polled(n, reqs, flag, sts);
    shim_in_wait--;
    return rc;
}

int shim_any(int n, MPI_Request *reqs, int *idx, int *flag, MPI_Status *st)
{
    int rc;

    shim_in_wait++;
    rc = shim_any_polled(n, reqs, idx, flag, st);
    shim_in_wait--;
    return rc;
}

int shim_some(int test, int n, MPI_Request *reqs, int *out, int *idx, MPI_Status *sts)
{
    int rc;

    shim_in_wait++;
    rc = shim_some_polled(test, n, reqs, out, idx, sts);
    shim_in_wait--;
    return rc;
}

int MPI_Wait(MPI_Request *req, MPI_Status *st)
{
    return shim_wait(req, st);
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[])
{
    return shim_all(n, reqs, NULL, sts);
}

int MPI_Waitany(int n, MPI_Request reqs[], int *idx, MPI_Status *st)
{
    return shim_any(n, reqs, idx, NULL, st);
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *out, int idx[], MPI_Status sts[])
{
    return shim_some(0, n, reqs, out, idx, sts);
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st)
{
    return shim_test(req, flag, st);
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[])
{
    return shim_all(n, reqs, flag, sts);
}

int MPI_Testany(int n, MPI_Request reqs[], int *idx, int *flag, MPI_Status *st)
{
    return shim_any(n, reqs, idx, flag, st);
}

int MPI_Testsome(int n, MPI_Request reqs[], int *out, int idx[], MPI_Status sts[])
{
    return shim_some(1, n, reqs, out, idx, sts);
}

int MPI_Request_get_status(MPI_Request req, int *flag, MPI_Status *st)
{
    int rc;

    shim_in_wait++;
    shim_poll_some();
    rc = PMPI_Request_get_status(req, flag, st);
    shim_in_wait--;
    return rc;
}

/* Free every record, then every context still alive, newest first, while
 * MPI still works. */
int shim_finalize(void)
{
    if (shim_state == SHIM_ON) {
        shim_busy++;
        amc_finalizing = 1;
        shim_req_drain(MPI_COMM_NULL);
        while (amc_live != NULL) {
            amc_comm_t *c = amc_live;
            unsigned n = amc_nlive;
            /* The delete callback unlinks and frees c; should MPI refuse, do
             * it here. */
            if (PMPI_Comm_delete_attr(c->comm, shim_keyval) != MPI_SUCCESS || amc_nlive == n)
                shim_comm_destroy(c);
        }
        while (amc_ctxs != NULL)
            amc_ctx_free(amc_ctxs);
        PMPI_Comm_free_keyval(&shim_keyval);
        shim_busy--;
        shim_state = SHIM_OFF;
        shim_opal_hook(0);
        amc_report();
    }
    return PMPI_Finalize();
}

int MPI_Finalize(void)
{
    return shim_finalize();
}

int arcoll_mpi_stats(arcoll_mpi_stats_t *out)
{
    amc_stats_get(out);
    return 0;
}
