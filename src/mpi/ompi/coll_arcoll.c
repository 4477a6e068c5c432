/*
 * mca_coll_arcoll.so: arcoll as an Open MPI 4.1 `coll` component
 * (docs/embedding.md, "The Open MPI component"). Open MPI selects it per
 * communicator like coll/ucc or coll/hcoll; it serves MPI_Alltoall(v),
 * MPI_Allgather(v), MPI_Reduce_scatter_block, MPI_Allreduce and their
 * nonblocking forms, from C and Fortran alike (every binding reaches the
 * communicator's coll table), and hands everything else, and every call it
 * declines, to the module that was there before it (saved at enable).
 *
 * The rules are the PMPI shim's, shared with it (src/mpi/arcoll_mpi_common.c):
 * a communicator's record is made at its first blocking served call,
 * collective over it (every rank makes the same calls in the same order), and
 * every step there that may fail on one rank is agreed before it is used;
 * reductions go to the previous module by (datatype, op), never by a rank's
 * own count or datatype; the tuning table's serve rules; the agreement after
 * a team failure. Record and context: a communicator whose group is that of
 * a live context (a dup, or any communicator of the same processes) gets a
 * team that arcoll_team_split makes from the context's world team, collective
 * over exactly its members; any other bootstraps a context of its own over a
 * private copy of itself. Every team is freed with its communicator (the
 * module's destructor), a context with its last communicator, the rest at
 * MPI_Finalize (an MPI_COMM_SELF attribute, deleted while MPI still works).
 *
 * Calls the component makes itself go to the previous module: those on a
 * communicator while its record is being made (m->making), and every call
 * on its private copies (bootstrap, agreements), whose modules it marks as
 * it makes them (cm_private). Both are marks on the communicator, not on the
 * thread: Open MPI may run a communicator's creation steps, its coll query
 * among them, in any thread's progress. Nonblocking calls return an
 * ompi_request_t that an opal_progress callback completes (arcoll_test); a
 * start never waits. arcoll's own waits call opal_progress through its
 * progress hook, where the callback stays out (amc_inlib).
 *
 * MPI_THREAD_MULTIPLE (docs/embedding.md, "Threads"): threads may call
 * collectives on different communicators at once. arcoll is not thread
 * safe, so the component runs it under one process-wide lock (amc_lock),
 * dropped wherever this rank may wait for another (arcoll's progress hook,
 * the bootstrap callbacks, its own blocking MPI calls, the previous module's
 * calls), or a thread waiting in one communicator would hold up a peer that
 * waits in another. Every communicator then bootstraps a context of its own
 * (no team split from a shared one), and the progress callback only tries
 * the lock. A job mixing thread levels across its ranks must not load the
 * component.
 *
 * Not served: intercommunicators and communicators of one rank (no module),
 * and any Open MPI release other than the one it was built for (refused at
 * open: it reads Open MPI's internal structures).
 */
#include "ompi_config.h"

#include <dlfcn.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/base/base.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/request/request.h"
#include "ompi/runtime/mpiruntime.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/runtime/opal_progress.h"

#include "mpi/arcoll_mpi_common.h"

/* The served collectives: (name, K_*). */
#define CM_COLLS(X)                          \
    X(alltoall, K_ALLTOALL)                  \
    X(allgather, K_ALLGATHER)                \
    X(alltoallv, K_ALLTOALLV)                \
    X(allgatherv, K_ALLGATHERV)              \
    X(reduce_scatter_block, K_RSB)           \
    X(allreduce, K_ALLREDUCE)                \
    X(ialltoall, AMC_NB + K_ALLTOALL)        \
    X(iallgather, AMC_NB + K_ALLGATHER)      \
    X(ialltoallv, AMC_NB + K_ALLTOALLV)      \
    X(iallgatherv, AMC_NB + K_ALLGATHERV)    \
    X(ireduce_scatter_block, AMC_NB + K_RSB) \
    X(iallreduce, AMC_NB + K_ALLREDUCE)

typedef struct cm_module {
    mca_coll_base_module_t super;
    MPI_Comm comm;
    amc_comm_t *rec; /* made at the first blocking served call */
    int decided;     /* the record was tried: rec NULL means the previous module for good */
    int making;      /* the record is being made: calls on comm are the component's own */
    int priv;        /* one of the component's private copies (cm_private) */
#define CM_PREV(name, k)                            \
    mca_coll_base_module_##name##_fn_t prev_##name; \
    mca_coll_base_module_t *prev_##name##_module;
    CM_COLLS(CM_PREV)
#undef CM_PREV
} cm_module_t;

/* A nonblocking call: the request Open MPI waits on. */
typedef struct cm_req {
    ompi_request_t super;
    struct cm_req *next, *prev;
    arcoll_request_t areq; /* NULL once arcoll is done */
    amc_job_t job;
    int claimed; /* a thread is waiting for it or completing it: the others leave it */
    int done;    /* completed */
    int freed;   /* MPI_Request_free came before completion */
} cm_req_t;

static void cm_module_construct(cm_module_t *m);
static void cm_module_destruct(cm_module_t *m);
static OBJ_CLASS_INSTANCE(cm_module_t, mca_coll_base_module_t, cm_module_construct,
                          cm_module_destruct);
static OBJ_CLASS_INSTANCE(cm_req_t, ompi_request_t, NULL, NULL);

/* MCA variables (ompi_info --param coll arcoll --level 9). */
static int cm_priority = 40; /* above coll/tuned (30) */
static int cm_verbose;
static char *cm_alg[6];    /* ARCOLL_<COLL>_ALG, by K_* */
static char *cm_tune;      /* ARCOLL_TUNE */
static char *cm_built_for; /* test hook: pretend to be built for this release */
static const char *const cm_alg_names[6] = {
    "alltoall", "allgather", "alltoallv", "allgatherv", "reduce_scatter_block", "allreduce"};
static const char *const cm_alg_settings[6] = {"ARCOLL_ALLTOALL_ALG",       "ARCOLL_ALLGATHER_ALG",
                                               "ARCOLL_ALLTOALLV_ALG",      "ARCOLL_ALLGATHERV_ALG",
                                               "ARCOLL_REDUCE_SCATTER_ALG", "ARCOLL_ALLREDUCE_ALG"};
static const char *cm_config[2 * 7 + 1];

static int cm_started; /* progress callback, finalize attribute and fault hook set up */
static int cm_keyval = MPI_KEYVAL_INVALID;
static cm_req_t *cm_reqs; /* live requests, newest first */
/* Requests not done: read without the lock by the progress callback. */
static _Atomic unsigned cm_npending;

static int cm_register(void);
static int cm_open(void);
static int cm_close(void);
static int cm_init_query(bool progress_threads, bool mpi_threads);
static mca_coll_base_module_t *cm_comm_query(struct ompi_communicator_t *comm, int *priority);

OMPI_MODULE_DECLSPEC extern mca_coll_base_component_2_0_0_t mca_coll_arcoll_component;
mca_coll_base_component_2_0_0_t mca_coll_arcoll_component = {
    .collm_version =
        {
            MCA_COLL_BASE_VERSION_2_0_0,
            .mca_component_name = "arcoll",
            MCA_BASE_MAKE_VERSION(component, ARCOLL_VERSION_MAJOR, ARCOLL_VERSION_MINOR,
                                  ARCOLL_VERSION_PATCH),
            .mca_open_component = cm_open,
            .mca_close_component = cm_close,
            .mca_register_component_params = cm_register,
        },
    .collm_data = {MCA_BASE_METADATA_PARAM_NONE},
    .collm_init_query = cm_init_query,
    .collm_comm_query = cm_comm_query,
};

/* The same counters as the shim's (arcoll_mpi.h), found the same way. */
__attribute__((visibility("default"))) int arcoll_mpi_stats(arcoll_mpi_stats_t *out);
int arcoll_mpi_stats(arcoll_mpi_stats_t *out)
{
    amc_stats_get(out);
    return 0;
}

static int cm_register(void)
{
    const mca_base_component_t *c = &mca_coll_arcoll_component.collm_version;
    static char help[6][160];

    mca_base_component_var_register(c, "priority", "Priority of coll/arcoll (tuned: 30)",
                                    MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_6,
                                    MCA_BASE_VAR_SCOPE_READONLY, &cm_priority);
    mca_base_component_var_register(
        c, "verbose", "0: ARCOLL_LOG decides; 1: at least info; 2: debug", MCA_BASE_VAR_TYPE_INT,
        NULL, 0, 0, OPAL_INFO_LVL_9, MCA_BASE_VAR_SCOPE_READONLY, &cm_verbose);
    for (int k = 0; k < 6; k++) {
        char name[64];
        snprintf(name, sizeof(name), "%s_algorithm", cm_alg_names[k]);
        snprintf(help[k], sizeof(help[k]),
                 "arcoll's %s algorithm (docs/configuration.md, %s); empty: %s or the default",
                 cm_alg_names[k], cm_alg_settings[k], cm_alg_settings[k]);
        cm_alg[k] = NULL;
        mca_base_component_var_register(c, name, help[k], MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0,
                                        OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY, &cm_alg[k]);
    }
    cm_tune = NULL;
    mca_base_component_var_register(c, "tune",
                                    "arcoll's tuning table (ARCOLL_TUNE: rules or file:PATH); "
                                    "empty: ARCOLL_TUNE or the default",
                                    MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_5,
                                    MCA_BASE_VAR_SCOPE_READONLY, &cm_tune);
    cm_built_for = NULL;
    mca_base_component_var_register(c, "built_for",
                                    "Tests only: the Open MPI release (e.g. 4.0.9) to take the "
                                    "component as built for; empty: the real one",
                                    MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_9,
                                    MCA_BASE_VAR_SCOPE_READONLY, &cm_built_for);
    return OMPI_SUCCESS;
}

/* The component reads Open MPI's internal layouts, which change between
 * releases while the coll API version may not: only the release it was
 * built for may load it. */
static int cm_release_ok(void)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "", built[32];
    int len = 0, a = -1, b = -1, c = -1;

    if (cm_built_for != NULL && cm_built_for[0] != '\0')
        snprintf(built, sizeof(built), "%s", cm_built_for);
    else
        snprintf(built, sizeof(built), "%d.%d.%d", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION,
                 OMPI_RELEASE_VERSION);
    if (PMPI_Get_library_version(lib, &len) == MPI_SUCCESS &&
        sscanf(lib, "Open MPI v%d.%d.%d", &a, &b, &c) == 3) {
        char run[32];
        snprintf(run, sizeof(run), "%d.%d.%d", a, b, c);
        if (strcmp(run, built) == 0)
            return 1;
        amc_log(AMC_LOG_WARN, "built for Open MPI %s, running on %s: not loaded", built, run);
        return 0;
    }
    amc_log(AMC_LOG_WARN, "built for Open MPI %s, running on \"%.60s\": not loaded", built, lib);
    return 0;
}

static int cm_open(void)
{
    const char *split = getenv("ARCOLL_MPI_SPLIT");
    int k = 0;

    amc_log_name = "coll/arcoll";
    amc_call_errhandler = 0; /* Open MPI raises what an entry point returns */
    amc_level = amc_level_parse();
    if (cm_verbose > 0 && amc_level < (cm_verbose > 1 ? AMC_LOG_DEBUG : AMC_LOG_INFO))
        amc_level = cm_verbose > 1 ? AMC_LOG_DEBUG : AMC_LOG_INFO;
    if (!cm_release_ok())
        return OMPI_ERROR;
    amc_split_env = split == NULL || (strcmp(split, "off") != 0 && strcmp(split, "0") != 0);
    /* MCA variables that are set win over the ARCOLL_* environment. */
    for (int i = 0; i < 6; i++)
        if (cm_alg[i] != NULL && cm_alg[i][0] != '\0') {
            cm_config[k++] = cm_alg_settings[i];
            cm_config[k++] = cm_alg[i];
        }
    if (cm_tune != NULL && cm_tune[0] != '\0') {
        cm_config[k++] = "ARCOLL_TUNE";
        cm_config[k++] = cm_tune;
    }
    cm_config[k] = NULL;
    amc_config = cm_config;
    return OMPI_SUCCESS;
}

static int cm_close(void)
{
    return OMPI_SUCCESS;
}

/* Once at MPI_Init, before any communicator is queried: MPI_THREAD_MULTIPLE
 * puts the lock in force before a second thread can call. */
static int cm_init_query(bool progress_threads, bool mpi_threads)
{
    (void)progress_threads;
    if (mpi_threads || ompi_mpi_thread_multiple)
        amc_mt = 1;
    return OMPI_SUCCESS;
}

/* ---------------------------------------------------------------- requests */

static void cm_req_release(cm_req_t *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        cm_reqs = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    OMPI_REQUEST_FINI(&r->super);
    OBJ_RELEASE(r);
}

/* arcoll finished r with status rc: unpack, complete it for Open MPI. The
 * caller claimed r (amc_finish may drop the lock after a failure). */
static void cm_req_done(cm_req_t *r, int rc)
{
    rc = amc_fault_take(AMC_FAULT_ICOLL_FAIL, &r->job, rc);
    r->super.req_status.MPI_ERROR = amc_finish(&r->job, rc);
    r->done = 1;
    cm_npending--;
    amc_stats.requests++;
    if (r->freed)
        cm_req_release(r);
    else
        ompi_request_complete(&r->super, true);
}

/* opal_progress's callback: every pending request once. Not from inside
 * arcoll (its hook runs opal_progress), nor from within itself; in any
 * thread at MPI_THREAD_MULTIPLE, but only if the lock is free: a thread that
 * holds it makes progress itself, and this callback must never wait. */
static int cm_progress(void)
{
    static int polling;
    cm_req_t *next;
    int n = 0, rc;

    if (cm_npending == 0 || amc_inlib > 0 || !amc_trylock())
        return 0;
    if (polling) {
        amc_unlock();
        return 0;
    }
    polling = 1;
    for (cm_req_t *r = cm_reqs; r != NULL; r = next) {
        next = r->next;
        if (r->done || r->claimed)
            continue;
        rc = arcoll_test(&r->areq);
        if (rc != ARCOLL_INPROGRESS) {
            r->claimed = 1;
            cm_req_done(r, rc);
            n++;
            next = cm_reqs; /* the list may have changed while the lock was dropped */
        }
    }
    polling = 0;
    amc_unlock();
    return n;
}

/* Before a communicator's team goes, or at MPI_Finalize (comm NULL: all):
 * MPI lets a program free a communicator with operations pending. */
static void cm_req_drain(MPI_Comm comm)
{
    for (;;) {
        cm_req_t *r;
        int others = 0, rc;
        for (r = cm_reqs; r != NULL; r = r->next) {
            if (r->done || (comm != MPI_COMM_NULL && r->job.comm != comm))
                continue;
            if (!r->claimed)
                break;
            others = 1; /* another thread completes it (the lock dropped after a failure) */
        }
        if (r == NULL) {
            if (!others || !amc_mt)
                return;
            AMC_UNLOCKED(sched_yield()); /* its record must outlive that */
            continue;
        }
        /* Claimed: the progress callback of a thread that runs while the
         * hook has dropped the lock must not spend its handle. From the
         * head again after each: the list may have changed meanwhile. */
        r->claimed = 1;
        amc_inlib++;
        rc = arcoll_wait(&r->areq);
        amc_inlib--;
        cm_req_done(r, rc);
    }
}

/* MPI_Wait/Test free a completed request; MPI_Request_free may come first. */
static int cm_req_free(ompi_request_t **rp)
{
    cm_req_t *r = (cm_req_t *)*rp;

    amc_lock();
    if (r->done)
        cm_req_release(r);
    else
        r->freed = 1;
    amc_unlock();
    *rp = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

/* A collective cannot be cancelled (MPI: erroneous); nothing to do. */
static int cm_req_cancel(ompi_request_t *req, int complete)
{
    (void)req;
    (void)complete;
    return OMPI_SUCCESS;
}

/* ----------------------------------------------------- setup and finalize */

/* arcoll's progress hook: Open MPI's progress while arcoll waits for peers,
 * and at MPI_THREAD_MULTIPLE the lock for other threads meanwhile (arcoll is
 * between steps here: every call's state is whole). */
static void cm_hook(void *arg)
{
    unsigned held;

    (void)arg;
    amc_inlib++;
    held = amc_drop();
    opal_progress();
    amc_retake(held);
    amc_inlib--;
}

/* The context MPI_Finalize frees next: the newest, the reverse of an order
 * every process agrees on, since creations are collective; but threads at
 * MPI_THREAD_MULTIPLE create contexts in any order, so there the one of the
 * highest context id of its private communicator, which all of its ranks
 * share: contexts shared by two processes go in the same order on both. */
static amc_ctx_t *cm_ctx_last(void)
{
    amc_ctx_t *best = amc_ctxs;

    if (!amc_mt)
        return best;
    for (amc_ctx_t *x = amc_ctxs; x != NULL; x = x->next)
        if (ompi_comm_get_cid(x->oob) > ompi_comm_get_cid(best->oob))
            best = x;
    return best;
}

/* MPI_Finalize, while MPI still works (MPI_COMM_SELF's attributes go
 * first): every request, every team with its context (cm_ctx_last). The
 * modules' destructors later find their records empty. */
static int cm_finalize(MPI_Comm comm, int keyval, void *val, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)val;
    (void)extra;
    amc_lock();
    amc_finalizing = 1;
    cm_req_drain(MPI_COMM_NULL);
    while (amc_live != NULL) {
        amc_comm_t *c = amc_live;
        amc_comm_unlink(c);
        if (c->sends != NULL) {
            AMC_UNLOCKED(PMPI_Waitall(c->size, c->sends, MPI_STATUSES_IGNORE));
            free(c->sends);
            c->sends = NULL;
        }
        if (c->agree != MPI_COMM_NULL)
            AMC_UNLOCKED(PMPI_Comm_free(&c->agree));
        c->sc = NULL; /* arcoll_finalize frees the teams with their contexts */
        c->team = NULL;
    }
    while (amc_ctxs != NULL)
        amc_ctx_free(cm_ctx_last());
    opal_progress_unregister(cm_progress);
    amc_unlock();
    amc_report();
    return MPI_SUCCESS;
}

/* Once, at the first record (MPI fully up): rank, fault hook, progress
 * callback, the finalize attribute. */
static int cm_start(void)
{
    const char *fault = getenv("ARCOLL_MPI_FAULT");
    int level = MPI_THREAD_SINGLE;

    if (cm_started)
        return cm_keyval != MPI_KEYVAL_INVALID;
    cm_started = 1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &amc_wrank);
    /* The node heap's malloc comes with the process (arcoll-ompi preloads
     * libarcoll_heap.so), not with this component: found by name. */
    amc_heap_report((int (*)(size_t *))dlsym(RTLD_DEFAULT, "preload_heap_state"));
    /* The lock must have been in force from the first call (cm_init_query). */
    PMPI_Query_thread(&level);
    if (level == MPI_THREAD_MULTIPLE && !amc_mt) {
        amc_log(AMC_LOG_WARN, "MPI_THREAD_MULTIPLE unknown at MPI_Init: arcoll is not used");
        return 0;
    }
    if (amc_mt)
        amc_log(AMC_LOG_INFO, "MPI_THREAD_MULTIPLE: arcoll runs under one lock, a context "
                              "per communicator");
    if (fault != NULL && amc_wrank == 1)
        amc_fault = strcmp(fault, "coll_fail") == 0         ? AMC_FAULT_COLL_FAIL
                    : strcmp(fault, "icoll_fail") == 0      ? AMC_FAULT_ICOLL_FAIL
                    : strcmp(fault, "coll_fail_named") == 0 ? AMC_FAULT_COLL_FAIL_NAMED
                                                            : AMC_FAULT_NONE;
    amc_progress_hook = cm_hook;
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, cm_finalize, &cm_keyval, NULL) !=
            MPI_SUCCESS ||
        PMPI_Comm_set_attr(MPI_COMM_SELF, cm_keyval, NULL) != MPI_SUCCESS) {
        amc_log(AMC_LOG_WARN, "no MPI_COMM_SELF attribute: arcoll is not used");
        cm_keyval = MPI_KEYVAL_INVALID;
        return 0;
    }
    opal_progress_register(cm_progress);
    return 1;
}

static int cm_private(MPI_Comm comm);

/* The live context of exactly comm's processes that lets teams split. */
static amc_ctx_t *cm_ctx_find(MPI_Comm comm)
{
    MPI_Group g, cg;
    int same = MPI_UNEQUAL;

    if (PMPI_Comm_group(comm, &g) != MPI_SUCCESS)
        return NULL;
    for (amc_ctx_t *x = amc_ctxs; x != NULL; x = x->next) {
        if (!x->split || PMPI_Comm_group(x->oob, &cg) != MPI_SUCCESS)
            continue;
        PMPI_Group_compare(g, cg, &same);
        PMPI_Group_free(&cg);
        if (same == MPI_IDENT || same == MPI_SIMILAR) {
            PMPI_Group_free(&g);
            return x;
        }
    }
    PMPI_Group_free(&g);
    return NULL;
}

/*
 * Collective over m->comm, at its first blocking served call: its record,
 * with a team split from a context of the same processes (made here if there
 * is none), or NULL: the previous module for good. Each step that may fail
 * on one rank is agreed before its outcome is used.
 */
static amc_comm_t *cm_record(cm_module_t *m)
{
    MPI_Comm comm = m->comm, agree = MPI_COMM_NULL, oob = MPI_COMM_NULL;
    amc_comm_t *c;
    amc_ctx_t *x = NULL, *made = NULL;
    arcoll_team_t nt = NULL;
    int n = 0, me = 0, ok[2], all[2] = {0, 0}, mine, verdict = 1, rc;

    m->decided = 1;
    m->making = 1;
    PMPI_Comm_size(comm, &n);
    PMPI_Comm_rank(comm, &me);
    c = calloc(1, sizeof(*c));
    /* Blocking MPI calls drop the lock (AMC_UNLOCKED): what they wait for
     * may need another thread's communicator to progress. Nothing here is
     * reachable by other threads before it is linked, under the lock. */
    ok[0] = cm_start() && c != NULL && amc_copy(comm, &agree) == 0 && cm_private(agree);
    x = cm_ctx_find(comm); /* none at MPI_THREAD_MULTIPLE: no context lets teams split */
    ok[1] = x != NULL;
    AMC_UNLOCKED(rc = PMPI_Allreduce(ok, all, 2, MPI_INT, MPI_MIN, comm));
    if (rc != MPI_SUCCESS)
        all[0] = 0;
    if (!all[0])
        goto mpi;
    if (!all[1]) {
        /* A context of its own, bootstrapped over a private copy. */
        made = calloc(1, sizeof(*made));
        ok[0] = made != NULL && amc_copy(comm, &oob) == 0 && cm_private(oob);
        AMC_UNLOCKED(rc = PMPI_Allreduce(ok, all, 1, MPI_INT, MPI_MIN, comm));
        if (rc != MPI_SUCCESS || !all[0]) {
            if (oob != MPI_COMM_NULL)
                AMC_UNLOCKED(PMPI_Comm_free(&oob));
            free(made);
            goto mpi;
        }
        made->oob = oob;
        if (amc_ctx_create(made, comm, n) != 0) /* frees made and oob */
            goto mpi;
        x = made;
    }
    /* Every communicator's team is split from the context's world team,
     * which thus never has a collective in flight to refuse a split. */
    mine = arcoll_team_split(arcoll_team_world(x->ctx), 0, me, &nt) == ARCOLL_OK && nt != NULL &&
           arcoll_team_rank(nt) == me && arcoll_team_size(nt) == n;
    AMC_UNLOCKED(rc = PMPI_Allreduce(&mine, &verdict, 1, MPI_INT, MPI_MIN, comm));
    if (rc != MPI_SUCCESS)
        verdict = 0;
    if (!verdict) {
        amc_log(AMC_LOG_INFO, "arcoll_team_split failed: a communicator (%d ranks) uses MPI", n);
        if (nt != NULL)
            arcoll_team_free(nt);
        if (made != NULL)
            amc_ctx_free(made); /* no user: collective over the same ranks */
        amc_stats.split_failed++;
        goto mpi;
    }
    c->comm = comm;
    c->size = n;
    c->sc = x;
    c->team = nt;
    c->split = 1;
    c->agree = agree;
    x->users++;
    amc_comm_link(c);
    amc_stats.comms_arcoll++;
    if (made == NULL)
        amc_stats.comms_split++;
    m->rec = c;
    m->making = 0;
    return c;
mpi:
    if (agree != MPI_COMM_NULL)
        AMC_UNLOCKED(PMPI_Comm_free(&agree));
    free(c);
    amc_stats.comms_mpi++;
    m->making = 0;
    return NULL;
}

/* ----------------------------------------------------------- entry points */

/* The record and team for a call, or NULL: the previous module. A
 * nonblocking call never makes the record (it would wait for the others). */
static arcoll_team_t cm_route(cm_module_t *m, int kind, const char *why, amc_comm_t **rec)
{
    amc_comm_t *c = m->rec;

    *rec = NULL;
    if (m->making || m->priv)
        return NULL;
    if (c == NULL && !m->decided && kind < AMC_NB)
        c = cm_record(m);
    if (c == NULL || c->sc == NULL) {
        amc_passed[kind]++;
        return NULL;
    }
    if (why != NULL) {
        amc_log(AMC_LOG_DEBUG, "%s (%d ranks): %s: to MPI", amc_names[kind], c->size, why);
        amc_passed[kind]++;
        return NULL;
    }
    *rec = c;
    return c->team;
}

/* Run a planned job: blocking (req NULL) or with a request. */
static int cm_run(amc_job_t *j, ompi_request_t **req)
{
    cm_req_t *r;
    int rc;

    amc_served[j->kind]++;
    if (j->packed)
        amc_stats.packed++;
    j->in_call = 1;
    if (req == NULL) {
        rc = amc_fault_take(AMC_FAULT_COLL_FAIL, j, amc_start(j, NULL));
        return amc_finish(j, rc);
    }
    r = OBJ_NEW(cm_req_t);
    if (r == NULL) {
        amc_job_free(j);
        amc_fail_seen(j->rec, "no memory for a request", 1);
        return amc_raise(j->comm, MPI_ERR_NO_MEM, amc_names[j->kind], "no memory for a request");
    }
    OMPI_REQUEST_INIT(&r->super, false);
    r->super.req_state = OMPI_REQUEST_ACTIVE;
    r->super.req_type = OMPI_REQUEST_COLL;
    r->super.req_free = cm_req_free;
    r->super.req_cancel = cm_req_cancel;
    r->super.req_status.MPI_ERROR = MPI_SUCCESS;
    r->super.req_status.MPI_SOURCE = MPI_ANY_SOURCE;
    r->super.req_status.MPI_TAG = MPI_ANY_TAG;
    r->super.req_mpi_object.comm = j->comm;
    r->job = *j;
    r->areq = NULL;
    r->claimed = r->done = r->freed = 0;
    r->prev = NULL; /* OBJ_NEW does not clear */
    /* The datatype must outlive the call: the program may free its handle. */
    if (r->job.ubuf != NULL && PMPI_Type_dup(j->utype, &r->job.utype) == MPI_SUCCESS)
        r->job.utype_dup = 1;
    r->next = cm_reqs;
    if (cm_reqs != NULL)
        cm_reqs->prev = r;
    cm_reqs = r;
    cm_npending++;
    *req = &r->super;
    rc = amc_start(&r->job, &r->areq);
    /* A failure in a completion is agreed at the communicator's next call:
     * opal_progress is no place to wait for the others' word. */
    r->job.in_call = 0;
    if (rc != ARCOLL_OK || r->areq == NULL) {
        r->claimed = 1;
        cm_req_done(r, rc); /* done already (a no-op, or failed) */
    }
    return MPI_SUCCESS;
}

/* The gate after a failure, then the plan's error or the run. */
#define CM_GATE(kind, c, comm, team)                  \
    do {                                              \
        int code_;                                    \
        team = amc_gate(kind, c, comm, team, &code_); \
        if (team == NULL && code_ != MPI_SUCCESS) {   \
            amc_unlock();                             \
            return code_;                             \
        }                                             \
    } while (0)

/* The entry points hold the lock (amc_lock) from here to their return, but
 * not in the previous module's calls (they may block) nor in the plan's or
 * run's waits (they drop it). */

static int cm_uniform(cm_module_t *m, int kind, const void *sbuf, int scount, MPI_Datatype stype,
                      void *rbuf, int rcount, MPI_Datatype rtype, ompi_request_t **req)
{
    amc_comm_t *c;
    arcoll_team_t team;
    amc_job_t j;
    int rc;

    amc_lock();
    team = cm_route(m, kind, NULL, &c);
    /* The serve rules were measured against Open MPI's blocking calls. Its
     * ialltoall/iallgather (libnbc), reached through this component, were
     * as slow as arcoll's or slower at every size (docs/performance.md), so
     * those go to arcoll whatever their size (the shim, whose PMPI route is
     * cheaper, keeps the rules). Blocking or not is the same on every rank. */
    if (kind < AMC_NB)
        team = amc_route_size(kind, c, team, rcount, rtype);
    CM_GATE(kind, c, m->comm, team);
    if (team == NULL) {
        amc_unlock();
        switch (kind) {
        case K_ALLTOALL:
            return m->prev_alltoall(sbuf, scount, stype, rbuf, rcount, rtype, m->comm,
                                    m->prev_alltoall_module);
        case K_ALLGATHER:
            return m->prev_allgather(sbuf, scount, stype, rbuf, rcount, rtype, m->comm,
                                     m->prev_allgather_module);
        case AMC_NB + K_ALLTOALL:
            return m->prev_ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, m->comm, req,
                                     m->prev_ialltoall_module);
        default:
            return m->prev_iallgather(sbuf, scount, stype, rbuf, rcount, rtype, m->comm, req,
                                      m->prev_iallgather_module);
        }
    }
    amc_job_init(&j, kind, m->comm, team, c);
    rc = amc_plan_uniform(&j, sbuf, scount, stype, rbuf, rcount, rtype);
    rc = rc != MPI_SUCCESS ? amc_plan_failed(&j, rc) : cm_run(&j, req);
    amc_unlock();
    return rc;
}

static int cm_v(cm_module_t *m, int kind, const void *sbuf, const int *scounts, const int *sdispls,
                int scount, MPI_Datatype stype, void *rbuf, const int *rcounts, const int *rdispls,
                MPI_Datatype rtype, ompi_request_t **req)
{
    amc_comm_t *c;
    arcoll_team_t team;
    int a2a = kind % AMC_NB == K_ALLTOALLV, rc;
    amc_job_t j;

    amc_lock();
    team = cm_route(m, kind, NULL, &c);
    if (!a2a)
        team = amc_route_mean(kind, c, team, rcounts, rtype);
    CM_GATE(kind, c, m->comm, team);
    if (team == NULL) {
        amc_unlock();
        switch (kind) {
        case K_ALLTOALLV:
            return m->prev_alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype,
                                     m->comm, m->prev_alltoallv_module);
        case K_ALLGATHERV:
            return m->prev_allgatherv(sbuf, scount, stype, rbuf, rcounts, rdispls, rtype, m->comm,
                                      m->prev_allgatherv_module);
        case AMC_NB + K_ALLTOALLV:
            return m->prev_ialltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype,
                                      m->comm, req, m->prev_ialltoallv_module);
        default:
            return m->prev_iallgatherv(sbuf, scount, stype, rbuf, rcounts, rdispls, rtype, m->comm,
                                       req, m->prev_iallgatherv_module);
        }
    }
    amc_job_init(&j, kind, m->comm, team, c);
    rc = a2a ? amc_plan_alltoallv(&j, sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype)
             : amc_plan_allgatherv(&j, sbuf, scount, stype, rbuf, rcounts, rdispls, rtype);
    rc = rc != MPI_SUCCESS ? amc_plan_failed(&j, rc) : cm_run(&j, req);
    amc_unlock();
    return rc;
}

static int cm_reduce(cm_module_t *m, int kind, const void *sbuf, void *rbuf, int count,
                     MPI_Datatype type, MPI_Op op, ompi_request_t **req)
{
    arcoll_dtype_t dt = ARCOLL_INT32;
    arcoll_op_t aop = ARCOLL_SUM;
    const char *why;
    amc_comm_t *c;
    arcoll_team_t team;
    amc_job_t j;
    int rc;

    amc_lock();
    why = amc_reduce_why(type, op, &dt, &aop);
    team = cm_route(m, kind, why, &c);
    team = amc_route_count(kind, c, team, count, type);
    CM_GATE(kind, c, m->comm, team);
    if (team == NULL) {
        amc_unlock();
        switch (kind) {
        case K_RSB:
            return m->prev_reduce_scatter_block(sbuf, rbuf, count, type, op, m->comm,
                                                m->prev_reduce_scatter_block_module);
        case K_ALLREDUCE:
            return m->prev_allreduce(sbuf, rbuf, count, type, op, m->comm,
                                     m->prev_allreduce_module);
        case AMC_NB + K_RSB:
            return m->prev_ireduce_scatter_block(sbuf, rbuf, count, type, op, m->comm, req,
                                                 m->prev_ireduce_scatter_block_module);
        default:
            return m->prev_iallreduce(sbuf, rbuf, count, type, op, m->comm, req,
                                      m->prev_iallreduce_module);
        }
    }
    amc_job_init(&j, kind, m->comm, team, c);
    if (count < 0) {
        rc = amc_plan_failed(&j, MPI_ERR_COUNT);
        amc_unlock();
        return rc;
    }
    /* Open MPI's own calls (communicator activation) alias the buffers for
     * in place. */
    j.sbuf = sbuf == MPI_IN_PLACE || sbuf == rbuf ? ARCOLL_IN_PLACE : sbuf;
    j.rbuf = rbuf;
    j.count = (size_t)count;
    j.dtype = dt;
    j.op = aop;
    rc = cm_run(&j, req);
    amc_unlock();
    return rc;
}

#define CM_M ((cm_module_t *)module)

static int cm_alltoall(const void *sbuf, int scount, struct ompi_datatype_t *stype, void *rbuf,
                       int rcount, struct ompi_datatype_t *rtype, struct ompi_communicator_t *comm,
                       mca_coll_base_module_t *module)
{
    (void)comm;
    return cm_uniform(CM_M, K_ALLTOALL, sbuf, scount, stype, rbuf, rcount, rtype, NULL);
}

static int cm_allgather(const void *sbuf, int scount, struct ompi_datatype_t *stype, void *rbuf,
                        int rcount, struct ompi_datatype_t *rtype, struct ompi_communicator_t *comm,
                        mca_coll_base_module_t *module)
{
    (void)comm;
    return cm_uniform(CM_M, K_ALLGATHER, sbuf, scount, stype, rbuf, rcount, rtype, NULL);
}

static int cm_ialltoall(const void *sbuf, int scount, struct ompi_datatype_t *stype, void *rbuf,
                        int rcount, struct ompi_datatype_t *rtype, struct ompi_communicator_t *comm,
                        ompi_request_t **req, mca_coll_base_module_t *module)
{
    (void)comm;
    return cm_uniform(CM_M, AMC_NB + K_ALLTOALL, sbuf, scount, stype, rbuf, rcount, rtype, req);
}

static int cm_iallgather(const void *sbuf, int scount, struct ompi_datatype_t *stype, void *rbuf,
                         int rcount, struct ompi_datatype_t *rtype,
                         struct ompi_communicator_t *comm, ompi_request_t **req,
                         mca_coll_base_module_t *module)
{
    (void)comm;
    return cm_uniform(CM_M, AMC_NB + K_ALLGATHER, sbuf, scount, stype, rbuf, rcount, rtype, req);
}

static int cm_alltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                        struct ompi_datatype_t *stype, void *rbuf, const int *rcounts,
                        const int *rdispls, struct ompi_datatype_t *rtype,
                        struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    (void)comm;
    return cm_v(CM_M, K_ALLTOALLV, sbuf, scounts, sdispls, 0, stype, rbuf, rcounts, rdispls, rtype,
                NULL);
}

static int cm_ialltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                         struct ompi_datatype_t *stype, void *rbuf, const int *rcounts,
                         const int *rdispls, struct ompi_datatype_t *rtype,
                         struct ompi_communicator_t *comm, ompi_request_t **req,
                         mca_coll_base_module_t *module)
{
    (void)comm;
    return cm_v(CM_M, AMC_NB + K_ALLTOALLV, sbuf, scounts, sdispls, 0, stype, rbuf, rcounts,
                rdispls, rtype, req);
}

static int cm_allgatherv(const void *sbuf, int scount, struct ompi_datatype_t *stype, void *rbuf,
                         const int *rcounts, const int *displs, struct ompi_datatype_t *rtype,
                         struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    (void)comm;
    return cm_v(CM_M, K_ALLGATHERV, sbuf, NULL, NULL, scount, stype, rbuf, rcounts, displs, rtype,
                NULL);
}

static int cm_iallgatherv(const void *sbuf, int scount, struct ompi_datatype_t *stype, void *rbuf,
                          const int *rcounts, const int *displs, struct ompi_datatype_t *rtype,
                          struct ompi_communicator_t *comm, ompi_request_t **req,
                          mca_coll_base_module_t *module)
{
    (void)comm;
    return cm_v(CM_M, AMC_NB + K_ALLGATHERV, sbuf, NULL, NULL, scount, stype, rbuf, rcounts, displs,
                rtype, req);
}

static int cm_reduce_scatter_block(const void *sbuf, void *rbuf, int count,
                                   struct ompi_datatype_t *type, struct ompi_op_t *op,
                                   struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    (void)comm;
    return cm_reduce(CM_M, K_RSB, sbuf, rbuf, count, type, op, NULL);
}

static int cm_ireduce_scatter_block(const void *sbuf, void *rbuf, int count,
                                    struct ompi_datatype_t *type, struct ompi_op_t *op,
                                    struct ompi_communicator_t *comm, ompi_request_t **req,
                                    mca_coll_base_module_t *module)
{
    (void)comm;
    return cm_reduce(CM_M, AMC_NB + K_RSB, sbuf, rbuf, count, type, op, req);
}

static int cm_allreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *type,
                        struct ompi_op_t *op, struct ompi_communicator_t *comm,
                        mca_coll_base_module_t *module)
{
    (void)comm;
    return cm_reduce(CM_M, K_ALLREDUCE, sbuf, rbuf, count, type, op, NULL);
}

static int cm_iallreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *type,
                         struct ompi_op_t *op, struct ompi_communicator_t *comm,
                         ompi_request_t **req, mca_coll_base_module_t *module)
{
    (void)comm;
    return cm_reduce(CM_M, AMC_NB + K_ALLREDUCE, sbuf, rbuf, count, type, op, req);
}

/* A private copy (amc_copy) just made, before any call on it: its module,
 * if it got one, hands every call to the previous module, uncounted, on
 * every rank alike. 1. */
static int cm_private(MPI_Comm comm)
{
    mca_coll_base_comm_coll_t *t = comm->c_coll;

#define CM_PRIV(name, k)                                                \
    if (t->coll_##name == cm_##name && t->coll_##name##_module != NULL) \
        ((cm_module_t *)t->coll_##name##_module)->priv = 1;
    CM_COLLS(CM_PRIV)
#undef CM_PRIV
    return 1;
}

/* ------------------------------------------------------------------ module */

static void cm_module_construct(cm_module_t *m)
{
    m->comm = MPI_COMM_NULL;
    m->rec = NULL;
    m->decided = m->making = m->priv = 0;
#define CM_CLEAR(name, k)  \
    m->prev_##name = NULL; \
    m->prev_##name##_module = NULL;
    CM_COLLS(CM_CLEAR)
#undef CM_CLEAR
}

/* The communicator goes (MPI_Comm_free, collective over it): its team, its
 * context's use, the modules it fell back on. */
static void cm_module_destruct(cm_module_t *m)
{
    amc_comm_t *c = m->rec;

    if (c != NULL) {
        amc_lock();
        if (c->sc != NULL)
            cm_req_drain(m->comm);
        amc_comm_destroy(c, 1);
        m->rec = NULL;
        amc_unlock();
    }
#define CM_DROP(name, k)                 \
    if (m->prev_##name##_module != NULL) \
        OBJ_RELEASE(m->prev_##name##_module);
    CM_COLLS(CM_DROP)
#undef CM_DROP
}

/* Where the communicator's functions come from until now: the previous
 * module of each collective, kept (retained) to fall back on. A collective
 * with none is left to whoever has it (our pointer is dropped). */
static int cm_module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm)
{
    cm_module_t *m = CM_M;

#define CM_SAVE(name, k)                                                                   \
    if (comm->c_coll->coll_##name != NULL && comm->c_coll->coll_##name##_module != NULL) { \
        m->prev_##name = comm->c_coll->coll_##name;                                        \
        m->prev_##name##_module = comm->c_coll->coll_##name##_module;                      \
        OBJ_RETAIN(m->prev_##name##_module);                                               \
    } else {                                                                               \
        m->super.coll_##name = NULL;                                                       \
    }
    CM_COLLS(CM_SAVE)
#undef CM_SAVE
    return OMPI_SUCCESS;
}

/* Decided alike on every rank: the communicator's kind and size only. Not
 * by who is making it: Open MPI may run this query in whichever thread
 * progresses the creation, on each rank another (the component's private
 * copies are marked after, by cm_private). */
static mca_coll_base_module_t *cm_comm_query(struct ompi_communicator_t *comm, int *priority)
{
    cm_module_t *m;

    *priority = cm_priority;
    if (cm_priority < 0 || OMPI_COMM_IS_INTER(comm) || ompi_comm_size(comm) < 2)
        return NULL;
    m = OBJ_NEW(cm_module_t);
    if (m == NULL)
        return NULL;
    m->comm = comm;
    m->super.coll_module_enable = cm_module_enable;
#define CM_SET(name, k) m->super.coll_##name = cm_##name;
    CM_COLLS(CM_SET)
#undef CM_SET
    return &m->super;
}
