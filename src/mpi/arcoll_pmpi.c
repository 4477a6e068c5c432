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

enum { SHIM_LOG_NONE, SHIM_LOG_ERROR, SHIM_LOG_WARN, SHIM_LOG_INFO, SHIM_LOG_DEBUG };
enum { SHIM_UNKNOWN = 0, SHIM_ON = 1, SHIM_OFF = -1 };
/* Test hooks (ARCOLL_MPI_FAULT): world rank 1 alone takes a split team as
 * failed, or as ordered unlike the communicator, so that tests can see that
 * every rank of the new communicator still makes the same choice; or
 * (coll_fail) its first blocking collective on MPI_COMM_WORLD that arcoll
 * ran as failed (a timeout), as if the others had completed it and it had
 * not: the failure agreement's hardest case; (icoll_fail) the same for its
 * first nonblocking one, seen in the wait or test that completes it; or
 * (setattr_fail) every other MPI_Comm_set_attr of the shim (the first, the
 * third, ...) as failed, a local failure in setting up a communicator. */
enum {
    SHIM_FAULT_NONE,
    SHIM_FAULT_SPLIT_FAIL,
    SHIM_FAULT_SPLIT_ORDER,
    SHIM_FAULT_COLL_FAIL,
    SHIM_FAULT_ICOLL_FAIL,
    SHIM_FAULT_SETATTR_FAIL
};
/* A communicator's team: healthy; failed as this rank saw it (the others may
 * not know yet); failed as every rank agreed (calls from `from` on go to
 * PMPI). */
enum { SHIM_TEAM_OK, SHIM_TEAM_SEEN, SHIM_TEAM_AGREED };

/* The collectives, blocking first; SHIM_NB + k is the nonblocking form of k. */
enum {
    K_ALLTOALL,
    K_ALLGATHER,
    K_ALLTOALLV,
    K_ALLGATHERV,
    K_RSB,
    K_ALLREDUCE,
    SHIM_NB,
    SHIM_NKINDS = 2 * SHIM_NB
};
static const char *const shim_names[SHIM_NKINDS] = {"MPI_Alltoall",
                                                    "MPI_Allgather",
                                                    "MPI_Alltoallv",
                                                    "MPI_Allgatherv",
                                                    "MPI_Reduce_scatter_block",
                                                    "MPI_Allreduce",
                                                    "MPI_Ialltoall",
                                                    "MPI_Iallgather",
                                                    "MPI_Ialltoallv",
                                                    "MPI_Iallgatherv",
                                                    "MPI_Ireduce_scatter_block",
                                                    "MPI_Iallreduce"};

/* A context and how many communicators of this process use it. */
typedef struct shim_ctx {
    struct shim_ctx *next, *prev; /* live list, newest first */
    arcoll_context_t ctx;
    MPI_Comm oob;   /* private copy of its root communicator: bootstrap, agreements */
    int size;       /* its ranks */
    int split;      /* every rank allows team splits (ARCOLL_MPI_SPLIT) */
    unsigned users; /* communicators of this process on it */
} shim_ctx_t;

/* One communicator's state, its attribute value. */
typedef struct shim_comm {
    struct shim_comm *next, *prev; /* live list, newest first */
    MPI_Comm comm;                 /* the application's */
    shim_ctx_t *sc;                /* NULL: every call on comm goes to PMPI */
    arcoll_team_t team;
    int split; /* team made by arcoll_team_split: freed with comm */
    int size;  /* ranks of comm */
    /* After a failure (docs/reliability.md, "The PMPI shim after a failure"):
     * a private copy of comm for the agreement, the calls that were bound
     * for arcoll so far (the same count on every rank), the state, this
     * rank's word and its sends, and the first call that goes to PMPI once
     * all agree. */
    MPI_Comm agree;
    unsigned long long calls, from, word;
    MPI_Request *sends;
    int fail;
    char reason[160];
    /* The last serve decision per collective (K_*): a loop
     * calls one size again and again, and the shim's contexts' settings never
     * change after init, so the answer does not either. */
    size_t host_bytes[SHIM_NB]; /* 0: none yet (a call of 0 bytes never asks) */
    int host[SHIM_NB];
} shim_comm_t;

static int shim_state = SHIM_UNKNOWN;
static int shim_keyval = MPI_KEYVAL_INVALID;
static int shim_level = SHIM_LOG_WARN;
static int shim_wrank = -1;    /* rank in MPI_COMM_WORLD, for log lines */
static int shim_led;           /* communicators this process was rank 0 of (profile names) */
static int shim_busy;          /* inside a shim call: MPI calls from within go straight through */
static int shim_split_env = 1; /* ARCOLL_MPI_SPLIT is not off */
static int shim_fault;         /* ARCOLL_MPI_FAULT (tests): SHIM_FAULT_* */
static int shim_finalizing;    /* in MPI_Finalize: contexts go whole, teams with them */
static shim_ctx_t *shim_ctxs;
static shim_comm_t *shim_live;
static unsigned shim_nlive;
/* The communicator of the last lookup and its record (a one-entry cache in
 * front of MPI_Comm_get_attr, the costliest step of a small call): cleared
 * by the attribute's delete callback, so a freed handle reused for a new
 * communicator never finds the old record. */
static MPI_Comm shim_last_comm = MPI_COMM_NULL;
static shim_comm_t *shim_last_rec;
/* The attribute of a communicator this rank had no memory for: it uses PMPI,
 * as the others learn from the first allreduce of shim_comm_create or
 * shim_derive. */
static shim_comm_t shim_comm_nomem;
static arcoll_mpi_stats_t shim_stats;
static unsigned long long shim_served[SHIM_NKINDS], shim_passed[SHIM_NKINDS];
/* arcoll_context_counters of the contexts freed so far: the report at MPI_Finalize. */
static arcoll_counters_t shim_counters;

/* Named datatypes and what they are. Only named ones are cached: their
 * handles are never freed, so an entry cannot come to mean another type. */
typedef struct shim_type {
    size_t size;     /* bytes of data in one element */
    MPI_Aint extent; /* from one element to the next */
    MPI_Aint tlb;    /* where an element's data starts */
    int contig;      /* count elements are count * size bytes at buf + tlb */
} shim_type_t;
#define SHIM_TYPE_CACHE 16
static MPI_Datatype shim_types[SHIM_TYPE_CACHE];
static shim_type_t shim_type_info[SHIM_TYPE_CACHE];
static unsigned shim_ntypes;

static void shim_req_drain(MPI_Comm comm);

static void shim_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void shim_log(int level, const char *fmt, ...)
{
    static const char *const names[] = {"", "error", "warning", "info", "debug"};
    char msg[2048];
    va_list ap;

    if (level > shim_level)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "arcoll-mpi[%d] %s: %s\n", shim_wrank, names[level], msg);
}

/* ARCOLL_LOG as the library reads it; the library reports a bad value. */
static int shim_level_parse(void)
{
    static const char *const names[] = {"none", "error", "warn", "info", "debug"};
    const char *s = getenv("ARCOLL_LOG");

    for (int i = 0; s != NULL && i <= SHIM_LOG_DEBUG; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return SHIM_LOG_WARN;
}

static int shim_oob_allgather(const void *sbuf, void *rbuf, size_t len, void *user)
{
    const shim_ctx_t *x = user;

    if (len > INT_MAX)
        return -1;
    return PMPI_Allgather(sbuf, (int)len, MPI_BYTE, rbuf, (int)len, MPI_BYTE, x->oob) == MPI_SUCCESS
               ? 0
               : -1;
}

static int shim_oob_barrier(void *user)
{
    const shim_ctx_t *x = user;

    return PMPI_Barrier(x->oob) == MPI_SUCCESS ? 0 : -1;
}

static void shim_comm_link(shim_comm_t *c)
{
    c->prev = NULL;
    c->next = shim_live;
    if (shim_live != NULL)
        shim_live->prev = c;
    shim_live = c;
    shim_nlive++;
}

static void shim_comm_unlink(shim_comm_t *c)
{
    if (c->prev == NULL && shim_live != c)
        return; /* never linked */
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        shim_live = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    c->next = c->prev = NULL;
    shim_nlive--;
}

/* Collective over the context's ranks: finalize it and forget it. */
static void shim_ctx_free(shim_ctx_t *x)
{
    arcoll_counters_t c;
    int rc;

    if (x->prev != NULL)
        x->prev->next = x->next;
    else
        shim_ctxs = x->next;
    if (x->next != NULL)
        x->next->prev = x->prev;
    if (arcoll_context_counters(x->ctx, &c, sizeof(c)) == ARCOLL_OK) {
        shim_counters.sh_co_calls += c.sh_co_calls;
        shim_counters.sh_co_fallbacks += c.sh_co_fallbacks;
    }
    rc = arcoll_finalize(x->ctx);
    if (rc != ARCOLL_OK)
        shim_log(SHIM_LOG_WARN, "arcoll_finalize: %s: %s", arcoll_strerror(rc),
                 arcoll_last_error(NULL));
    if (x->oob != MPI_COMM_NULL)
        PMPI_Comm_free(&x->oob);
    free(x);
    shim_stats.contexts_live--;
}

/*
 * Collective over c's communicator (in its MPI_Comm_free): free its own
 * team, then drop its use of the context. The context goes only where the
 * communicator spans all of its ranks, so that all of them take part, and
 * only once none uses it (MAX of the users left): on other frees the ranks
 * may drop their last use at different times, and the context waits for a
 * later whole free or MPI_Finalize.
 */
static void shim_comm_release(shim_comm_t *c)
{
    shim_ctx_t *x = c->sc;
    unsigned left, most = 1;
    int rc;

    if (c->split) {
        rc = arcoll_team_free(c->team);
        if (rc != ARCOLL_OK)
            shim_log(SHIM_LOG_WARN, "arcoll_team_free: %s: %s", arcoll_strerror(rc),
                     arcoll_last_error(NULL));
        shim_stats.teams_freed++;
    }
    left = --x->users;
    if (c->size == x->size &&
        PMPI_Allreduce(&left, &most, 1, MPI_UNSIGNED, MPI_MAX, x->oob) == MPI_SUCCESS &&
        most == 0) {
        shim_ctx_free(x);
        shim_stats.contexts_freed++;
    }
}

/* Collective over the communicator: the attribute's delete callback. */
static void shim_comm_destroy(shim_comm_t *c)
{
    if (c == shim_last_rec) {
        shim_last_comm = MPI_COMM_NULL;
        shim_last_rec = NULL;
    }
    shim_comm_unlink(c);
    if (c->sends != NULL) {
        /* Its word, sent before an agreement that never came: eight bytes,
         * sent eagerly; the buffer goes with c. */
        PMPI_Waitall(c->size, c->sends, MPI_STATUSES_IGNORE);
        free(c->sends);
    }
    if (c->agree != MPI_COMM_NULL)
        PMPI_Comm_free(&c->agree);
    if (c->sc != NULL) {
        shim_req_drain(c->comm);
        /* At MPI_Finalize arcoll_finalize frees the teams with their contexts. */
        if (!shim_finalizing)
            shim_comm_release(c);
        shim_stats.comms_freed++;
    }
    free(c);
}

static int shim_comm_delete(MPI_Comm comm, int keyval, void *val, void *extra)
{
    (void)keyval;
    (void)extra;
    if (comm == shim_last_comm || val == shim_last_rec) {
        shim_last_comm = MPI_COMM_NULL;
        shim_last_rec = NULL;
    }
    if (val == &shim_comm_nomem)
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

    shim_level = shim_level_parse();
    PMPI_Comm_rank(MPI_COMM_WORLD, &shim_wrank);
    shim_split_env = split == NULL || (strcmp(split, "off") != 0 && strcmp(split, "0") != 0);
    if (fault != NULL && shim_wrank == 1)
        shim_fault = strcmp(fault, "split_fail") == 0     ? SHIM_FAULT_SPLIT_FAIL
                     : strcmp(fault, "split_order") == 0  ? SHIM_FAULT_SPLIT_ORDER
                     : strcmp(fault, "coll_fail") == 0    ? SHIM_FAULT_COLL_FAIL
                     : strcmp(fault, "icoll_fail") == 0   ? SHIM_FAULT_ICOLL_FAIL
                     : strcmp(fault, "setattr_fail") == 0 ? SHIM_FAULT_SETATTR_FAIL
                                                          : SHIM_FAULT_NONE;
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
    if (shim_state == SHIM_ON)
        return;
    if (ok[1])
        PMPI_Comm_free_keyval(&shim_keyval);
    if (!all[0])
        shim_log(ok[0] && shim_wrank == 0 ? SHIM_LOG_INFO : SHIM_LOG_DEBUG,
                 "MPI_THREAD_MULTIPLE%s: arcoll is not thread safe, every collective goes to PMPI",
                 ok[0] ? " on another rank" : "");
    else
        shim_log(SHIM_LOG_WARN, "MPI_Comm_create_keyval failed%s: every collective goes to PMPI",
                 ok[1] ? " on another rank" : "");
}

/* After PMPI's MPI_Init(_thread) returned rc: the agreed setup. */
static int shim_init(int rc)
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

/* ARCOLL_PROFILE, when set: MPI_COMM_WORLD profiles into FILE itself, any
 * other root communicator into FILE.comm<L>_<n> (L: world rank of its rank
 * 0, n: how many communicators L had led before), a name all its ranks agree
 * on and no other communicator of the job has. Collective over oob. */
static int shim_profile_name(MPI_Comm comm, MPI_Comm oob, char *name, size_t len)
{
    const char *base = getenv("ARCOLL_PROFILE");
    int me, id[2] = {shim_wrank, shim_led};

    name[0] = '\0';
    PMPI_Comm_rank(oob, &me);
    if (me == 0)
        shim_led++;
    if (PMPI_Bcast(id, 2, MPI_INT, 0, oob) != MPI_SUCCESS)
        return -1;
    if (base == NULL || base[0] == '\0' || strcmp(base, "off") == 0 || comm == MPI_COMM_WORLD)
        return 0;
    if ((size_t)snprintf(name, len, "%s.comm%d_%d", base, id[0], id[1]) >= len) {
        shim_log(SHIM_LOG_WARN, "ARCOLL_PROFILE=%s: too long for a per-communicator name", base);
        name[0] = '\0';
    } else if (me == 0) {
        shim_log(SHIM_LOG_INFO, "a communicator led by world rank %d profiles into %s", id[0],
                 name);
    }
    return 0;
}

/* Collective over x->oob (the private copy of comm, which has n ranks):
 * create the context and agree that every rank has one. -1 when some rank
 * failed: then x and its copy are freed. */
static int shim_ctx_create(shim_ctx_t *x, MPI_Comm comm, int n)
{
    arcoll_oob_t oob = {0};
    char prof[1024];
    const char *cfg[3] = {NULL, NULL, NULL};
    int ok[2], all[2] = {0, 0}, rc;

    PMPI_Comm_rank(x->oob, &oob.rank);
    if (shim_profile_name(comm, x->oob, prof, sizeof(prof)) == 0 && prof[0] != '\0') {
        cfg[0] = "ARCOLL_PROFILE";
        cfg[1] = prof;
    }
    oob.allgather = shim_oob_allgather;
    oob.barrier = shim_oob_barrier;
    oob.user = x;
    oob.size = n;
    rc = arcoll_init_config(&oob, cfg, &x->ctx);
    /* With it, whether every rank lets its communicators split teams. */
    ok[0] = rc == ARCOLL_OK;
    ok[1] = shim_split_env;
    if (PMPI_Allreduce(ok, all, 2, MPI_INT, MPI_MIN, x->oob) != MPI_SUCCESS)
        all[0] = 0;
    if (!all[0]) {
        if (ok[0])
            /* Finalizing is collective and some rank has no context: keep it
             * unused; the process's exit releases it. */
            shim_log(SHIM_LOG_WARN,
                     "arcoll_init failed on another rank: this communicator "
                     "(%d ranks) uses PMPI",
                     n);
        else
            shim_log(SHIM_LOG_WARN, "arcoll_init: %s: %s; this communicator (%d ranks) uses PMPI",
                     arcoll_strerror(rc), arcoll_last_error(NULL), n);
        PMPI_Comm_free(&x->oob);
        free(x);
        return -1;
    }
    x->size = n;
    x->split = all[1];
    x->next = shim_ctxs;
    if (shim_ctxs != NULL)
        shim_ctxs->prev = x;
    shim_ctxs = x;
    shim_stats.contexts++;
    shim_stats.contexts_live++;
    return 0;
}

/* A private copy of comm (collective over it): a split, not a dup, which
 * would run the application's attribute copy callbacks on it. */
static int shim_copy(MPI_Comm comm, MPI_Comm *out)
{
    int me = 0;

    PMPI_Comm_rank(comm, &me);
    if (PMPI_Comm_split(comm, 0, me, out) != MPI_SUCCESS) {
        *out = MPI_COMM_NULL;
        return -1;
    }
    PMPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
    return 0;
}

/* PMPI_Comm_set_attr of the shim's key (ARCOLL_MPI_FAULT=setattr_fail: every
 * other one fails on world rank 1). */
static int shim_attr_set(MPI_Comm comm, void *val)
{
    static unsigned tries;

    if (shim_fault == SHIM_FAULT_SETATTR_FAIL && tries++ % 2 == 0) {
        shim_log(SHIM_LOG_WARN, "ARCOLL_MPI_FAULT=setattr_fail: MPI_Comm_set_attr taken as failed");
        return MPI_ERR_OTHER;
    }
    return PMPI_Comm_set_attr(comm, shim_keyval, val);
}

/* The attribute could not be set on some rank: none keeps one (set: this
 * rank's is), so every rank creates the record again at the next call. */
static void shim_attr_drop(MPI_Comm comm, int set, shim_comm_t *c)
{
    static int said;

    if (set)
        PMPI_Comm_delete_attr(comm, shim_keyval); /* its callback frees c */
    else if (c != &shim_comm_nomem)
        free(c);
    if (said++ == 0)
        shim_log(SHIM_LOG_WARN,
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
static shim_comm_t *shim_comm_create(MPI_Comm comm)
{
    shim_comm_t *c = calloc(1, sizeof(*c));
    shim_ctx_t *x = NULL;
    MPI_Comm oob = MPI_COMM_NULL, agree = MPI_COMM_NULL;
    int inter = 0, n = 0, set, ok[2], all[2] = {0, 0};

    PMPI_Comm_test_inter(comm, &inter);
    PMPI_Comm_size(comm, &n);
    if (c != NULL) {
        c->comm = comm;
        c->size = n;
        c->agree = MPI_COMM_NULL;
    } else {
        c = &shim_comm_nomem;
    }
    /* The attribute first: a rank without it would create the record again
     * at its next call, collective where the others' would not be. */
    set = shim_attr_set(comm, c) == MPI_SUCCESS;
    if (inter) {
        /* Every rank knows it is one: nothing to agree on. */
        shim_log(SHIM_LOG_DEBUG, "intercommunicator: its collectives go to PMPI");
        ok[0] = all[0] = set;
    } else {
        /* Collective even where this rank lacks memory or the attribute. */
        x = c != &shim_comm_nomem ? calloc(1, sizeof(*x)) : NULL;
        ok[0] = set;
        ok[1] = x != NULL;
        ok[1] &= shim_copy(comm, &oob) == 0;
        ok[1] &= shim_copy(comm, &agree) == 0;
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
    if (c == &shim_comm_nomem) {
        shim_log(SHIM_LOG_WARN, "out of memory: a communicator uses PMPI");
        return c;
    }
    if (x != NULL && shim_ctx_create(x, comm, n) == 0) {
        c->sc = x;
        c->team = arcoll_team_world(x->ctx);
        c->agree = agree;
        x->users++;
    } else if (agree != MPI_COMM_NULL) {
        PMPI_Comm_free(&agree);
    }
    shim_comm_link(c);
    if (c->sc != NULL)
        shim_stats.comms_arcoll++;
    else
        shim_stats.comms_mpi++;
    return c;
}

/* This process's record of comm, created at its first call; NULL: PMPI. */
static shim_comm_t *shim_comm_get(MPI_Comm comm)
{
    shim_comm_t *c = NULL;
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
    shim_comm_t *c = shim_comm_get(comm);

    return c != NULL && c->sc != NULL ? c->team : NULL;
}

/* The datatype's layout; -1 for an invalid handle. */
static int shim_type_get(MPI_Datatype t, shim_type_t *ti)
{
    int ni, na, nd, comb, size;
    MPI_Aint lb, textent;

    for (unsigned i = 0; i < shim_ntypes; i++)
        if (shim_types[i] == t) {
            *ti = shim_type_info[i];
            return 0;
        }
    if (t == MPI_DATATYPE_NULL || PMPI_Type_size(t, &size) != MPI_SUCCESS || size < 0 ||
        PMPI_Type_get_extent(t, &lb, &ti->extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(t, &ti->tlb, &textent) != MPI_SUCCESS)
        return -1;
    ti->size = (size_t)size;
    /* No gap inside an element (size == true extent) nor between two (size ==
     * extent): count elements are one run of bytes. */
    ti->contig = size == 0 || (textent == size && ti->extent == size);
    if (shim_ntypes < SHIM_TYPE_CACHE &&
        PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) == MPI_SUCCESS &&
        comb == MPI_COMBINER_NAMED) {
        shim_types[shim_ntypes] = t;
        shim_type_info[shim_ntypes++] = *ti;
    }
    return 0;
}

/* buf + off, also for MPI_BOTTOM (NULL) with absolute displacements. */
static char *shim_at(const void *buf, MPI_Aint off)
{
    return (char *)(uintptr_t)((uintptr_t)buf + (uintptr_t)off);
}

/* count elements of t at buf, packed at byte off of out (len bytes long). */
static int shim_pack(const void *buf, int count, MPI_Datatype t, size_t size, char *out, size_t len,
                     size_t off, MPI_Comm comm)
{
    int pos = (int)off, rc;

    if (len > INT_MAX)
        return MPI_ERR_COUNT;
    rc = PMPI_Pack(buf, count, t, out, (int)len, &pos, comm);
    /* arcoll moves the bytes as they are: the packed form must be exactly
     * the data (Open MPI on one architecture adds nothing). */
    if (rc == MPI_SUCCESS && (size_t)pos != off + (size_t)count * size)
        rc = MPI_ERR_INTERN;
    return rc;
}

/* Reduction datatypes and ops that arcoll has: by size, for C and Fortran. */
static int shim_dtype(MPI_Datatype t, arcoll_dtype_t *out)
{
    /* kind: 's' signed, 'u' unsigned, 'f' floating */
    const struct {
        MPI_Datatype t;
        char kind;
    } map[] = {{MPI_INT, 's'},           {MPI_INT32_T, 's'},
               {MPI_LONG, 's'},          {MPI_LONG_LONG, 's'},
               {MPI_LONG_LONG_INT, 's'}, {MPI_INT64_T, 's'},
               {MPI_UNSIGNED_LONG, 'u'}, {MPI_UNSIGNED_LONG_LONG, 'u'},
               {MPI_UINT64_T, 'u'},      {MPI_FLOAT, 'f'},
               {MPI_DOUBLE, 'f'},        {MPI_INTEGER, 's'},
               {MPI_INTEGER4, 's'},      {MPI_INTEGER8, 's'},
               {MPI_REAL, 'f'},          {MPI_REAL4, 'f'},
               {MPI_REAL8, 'f'},         {MPI_DOUBLE_PRECISION, 'f'}};
    int size;

    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        if (map[i].t != t)
            continue;
        if (PMPI_Type_size(t, &size) != MPI_SUCCESS)
            return -1;
        if (map[i].kind == 's' && (size == 4 || size == 8))
            *out = size == 4 ? ARCOLL_INT32 : ARCOLL_INT64;
        else if (map[i].kind == 'u' && size == 8)
            *out = ARCOLL_UINT64;
        else if (map[i].kind == 'f' && (size == 4 || size == 8))
            *out = size == 4 ? ARCOLL_FLOAT : ARCOLL_DOUBLE;
        else
            return -1;
        return 0;
    }
    return -1;
}

static int shim_op(MPI_Op op, arcoll_dtype_t dt, arcoll_op_t *out)
{
    const MPI_Op map[ARCOLL_OP_COUNT] = {MPI_SUM,  MPI_PROD, MPI_MIN, MPI_MAX,
                                         MPI_BAND, MPI_BOR,  MPI_BXOR};

    for (int i = 0; i < ARCOLL_OP_COUNT; i++)
        if (map[i] == op) {
            /* Bitwise ops on floating types are erroneous MPI: PMPI says so. */
            if (i >= ARCOLL_BAND && (dt == ARCOLL_FLOAT || dt == ARCOLL_DOUBLE))
                return -1;
            *out = (arcoll_op_t)i;
            return 0;
        }
    return -1;
}

/* An arcoll status as an MPI error class, raised on comm as MPI would. */
static int shim_error(MPI_Comm comm, int rc, const char *what)
{
    int code;

    switch (rc) {
    case ARCOLL_OK: return MPI_SUCCESS;
    case ARCOLL_ERR_INVALID: code = MPI_ERR_BUFFER; break;
    case ARCOLL_ERR_NOMEM: code = MPI_ERR_NO_MEM; break;
    case ARCOLL_ERR_MISMATCH: code = MPI_ERR_TRUNCATE; break;
    case ARCOLL_ERR_UNSUPPORTED: code = MPI_ERR_UNSUPPORTED_OPERATION; break;
    default: code = MPI_ERR_OTHER; break; /* a peer lost or late, transport, state */
    }
    shim_stats.errors++;
    shim_log(SHIM_LOG_ERROR, "%s on arcoll: %s: %s", what, arcoll_strerror(rc),
             arcoll_last_error(NULL));
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}

/* An MPI error this rank found by itself (bad argument, no memory). */
static int shim_raise(MPI_Comm comm, int code, const char *what, const char *why)
{
    shim_stats.errors++;
    shim_log(SHIM_LOG_ERROR, "%s: %s", what, why);
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}

/*
 * After a failure (docs/reliability.md, "The PMPI shim after a failure"). A
 * rank that saw its team fail (SEEN) cannot hand calls to PMPI alone: the
 * others may have completed the failing call and wait in arcoll for the
 * next. So when it sees the failure it sends every other rank its word (a
 * message on the private copy): "call + 1", the first call it may hand to
 * PMPI, and goes on without waiting. A rank that was still healthy sees the
 * failure when its own call fails (a timeout, since the SEEN rank no longer
 * comes) and sends its word likewise. A rank decides once it has every
 * rank's word: in the call that failed if they are all there already, else
 * at its next arcoll-bound call on the communicator, where it waits for
 * them. from, the highest word: the first call every rank hands to PMPI;
 * calls before it fail at once. Since no rank waits before it has sent its
 * own word, and every rank sends it at the latest in the call that times
 * out for want of the others, no MPI call in between (one the shim does not
 * see) can wait for a rank stuck here. Healthy communicators pay nothing per
 * call.
 */
enum { SHIM_TAG_WORD = 1 };

/* The end of the agreement: every other rank's word (all sent, or being
 * sent without waiting), the highest wins. */
static void shim_agree(shim_comm_t *c)
{
    unsigned long long top = c->word, theirs;
    char name[MPI_MAX_OBJECT_NAME] = "";
    int me = 0, n = 0, len = 0, ok = 1;

    if (c->agree == MPI_COMM_NULL)
        return; /* stays SEEN: every later call fails, as arcoll's would */
    PMPI_Comm_rank(c->agree, &me);
    PMPI_Comm_size(c->agree, &n);
    shim_log(SHIM_LOG_DEBUG, "a failed team: waiting for the other ranks' word at call %llu",
             c->calls);
    for (int r = 0; r < n; r++) {
        if (r == me)
            continue;
        if (PMPI_Recv(&theirs, 1, MPI_UNSIGNED_LONG_LONG, r, SHIM_TAG_WORD, c->agree,
                      MPI_STATUS_IGNORE) != MPI_SUCCESS)
            ok = 0;
        else if (theirs > top)
            top = theirs;
    }
    if (c->sends != NULL)
        PMPI_Waitall(n, c->sends, MPI_STATUSES_IGNORE);
    free(c->sends);
    c->sends = NULL;
    c->fail = SHIM_TEAM_AGREED;
    c->from = ok ? top : ULLONG_MAX;
    shim_stats.comms_failed++;
    PMPI_Comm_get_name(c->comm, name, &len);
    shim_log(me == 0 ? SHIM_LOG_WARN : SHIM_LOG_INFO,
             "arcoll team of communicator %s (%d ranks) failed (%s); its collectives go to MPI "
             "from now on",
             len > 0 ? name : "<unnamed>", n, c->reason);
}

/* Whether every other rank's word is here: probed for up to 10 ms (a
 * message may need some progress to be seen; only after a failure). */
static int shim_words_here(shim_comm_t *c)
{
    int me = 0, n = 0, flag, here;

    PMPI_Comm_rank(c->agree, &me);
    PMPI_Comm_size(c->agree, &n);
    for (double end = PMPI_Wtime() + 0.01;;) {
        here = 0;
        for (int r = 0; r < n; r++) {
            flag = 0;
            if (r != me &&
                (PMPI_Iprobe(r, SHIM_TAG_WORD, c->agree, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS ||
                 !flag))
                break;
            here += r != me;
        }
        if (here == n - 1)
            return 1;
        if (PMPI_Wtime() > end)
            return 0;
    }
}

/* This rank saw c's team fail: an arcoll error, or a call it could not take
 * part in. Sends its word; in_call: inside the call that failed (or the wait
 * that saw it), which decides at once if every word is here. */
static void shim_fail_seen(shim_comm_t *c, const char *reason, int in_call)
{
    int me = 0, n = 0, now;

    if (c == NULL || c == &shim_comm_nomem || c->fail != SHIM_TEAM_OK)
        return;
    c->fail = SHIM_TEAM_SEEN;
    snprintf(c->reason, sizeof(c->reason), "%s", reason);
    if (c->agree == MPI_COMM_NULL)
        return;
    c->word = c->calls + 1;
    PMPI_Comm_rank(c->agree, &me);
    PMPI_Comm_size(c->agree, &n);
    c->sends = malloc((size_t)n * sizeof(*c->sends));
    for (int r = 0; r < n; r++) {
        if (c->sends != NULL)
            c->sends[r] = MPI_REQUEST_NULL;
        if (r == me)
            continue;
        if (c->sends != NULL)
            PMPI_Isend(&c->word, 1, MPI_UNSIGNED_LONG_LONG, r, SHIM_TAG_WORD, c->agree,
                       &c->sends[r]);
        else /* eight bytes: sent eagerly */
            PMPI_Send(&c->word, 1, MPI_UNSIGNED_LONG_LONG, r, SHIM_TAG_WORD, c->agree);
    }
    now = in_call && shim_words_here(c);
    shim_log(SHIM_LOG_DEBUG, "a failed team at call %llu (%s): %s", c->calls, reason,
             now ? "every rank's word is here, agreeing now" : "agreeing at the next call");
    if (now)
        shim_agree(c);
}

/* A call that the rules so far send to arcoll (team): counted, and once the
 * team failed sent to PMPI (NULL) or failed (NULL, *code raised; a
 * nonblocking call's *req is then MPI_REQUEST_NULL). */
static arcoll_team_t shim_gate(int kind, MPI_Comm comm, arcoll_team_t team, int *code,
                               MPI_Request *req)
{
    shim_comm_t *c;

    *code = MPI_SUCCESS;
    if (team == NULL || (c = shim_comm_get(comm)) == NULL || c == &shim_comm_nomem)
        return team;
    c->calls++;
    if (c->fail == SHIM_TEAM_OK)
        return team;
    if (c->fail == SHIM_TEAM_SEEN)
        shim_agree(c);
    if (c->fail == SHIM_TEAM_AGREED && c->calls >= c->from) {
        shim_passed[kind]++;
        return NULL;
    }
    if (req != NULL)
        *req = MPI_REQUEST_NULL;
    *code = shim_raise(comm, MPI_ERR_OTHER, shim_names[kind],
                       "the communicator's arcoll team failed; this call failed with it");
    return NULL;
}

/*
 * One collective as arcoll runs it: buffers, byte counts, and the packed
 * copies that stand for non-contiguous user buffers.
 */
typedef struct shim_job {
    int kind;
    MPI_Comm comm;
    arcoll_team_t team;
    const void *sbuf; /* as arcoll sees them */
    void *rbuf;
    size_t bytes;         /* alltoall/allgather: per block; allgatherv: this rank's */
    size_t count;         /* reductions: elements */
    arcoll_dtype_t dtype; /* reductions */
    arcoll_op_t op;       /* reductions */
    size_t *v;            /* v-forms: scounts, sdispls, rcounts, rdispls in bytes */
    char *stmp, *rtmp;    /* copies owned by the job */
    size_t rlen;          /* bytes of rtmp */
    int packed;           /* a datatype was packed */
    /* rtmp goes back to ubuf at the end: ucount elements of utype (uniform
     * forms), or un blocks ucounts[j] at udispls[j] * uext, packed at upos[j]. */
    void *ubuf;
    MPI_Datatype utype;
    int utype_dup; /* utype is the job's own copy */
    MPI_Aint uext;
    int ucount;
    const int *ucounts, *udispls;
    const size_t *upos;
    int un;
    int err;          /* an MPI error this rank raises after taking part */
    shim_comm_t *rec; /* comm's record */
    int in_call;      /* inside the call that started it (not a wait or test) */
} shim_job_t;

static void shim_job_free(shim_job_t *j)
{
    free(j->stmp);
    free(j->rtmp);
    free(j->v);
    if (j->utype_dup)
        PMPI_Type_free(&j->utype);
    j->stmp = j->rtmp = NULL;
    j->v = NULL;
    j->utype_dup = 0;
}

/* Unpack rtmp into the user's buffer. */
static int shim_unpack(shim_job_t *j)
{
    int pos = 0, rc = MPI_SUCCESS;

    if (j->rlen > INT_MAX)
        return MPI_ERR_COUNT;
    if (j->ucounts == NULL)
        return PMPI_Unpack(j->rtmp, (int)j->rlen, &pos, j->ubuf, j->ucount, j->utype, j->comm);
    for (int b = 0; b < j->un && rc == MPI_SUCCESS; b++) {
        if (j->ucounts[b] == 0)
            continue;
        pos = (int)j->upos[b];
        rc = PMPI_Unpack(j->rtmp, (int)j->rlen, &pos,
                         shim_at(j->ubuf, (MPI_Aint)j->udispls[b] * j->uext), j->ucounts[b],
                         j->utype, j->comm);
    }
    return rc;
}

/* The end of a job that arcoll ran with status rc: unpack, free, raise. */
static int shim_finish(shim_job_t *j, int rc)
{
    const char *what = shim_names[j->kind];
    int code = MPI_SUCCESS;

    if (rc == ARCOLL_OK && j->ubuf != NULL)
        code = shim_unpack(j);
    shim_job_free(j);
    if (rc != ARCOLL_OK) {
        shim_fail_seen(j->rec, arcoll_strerror(rc), j->in_call);
        return shim_error(j->comm, rc, what);
    }
    if (code != MPI_SUCCESS)
        return shim_raise(j->comm, code, what, "MPI_Unpack failed");
    if (j->err != MPI_SUCCESS)
        return shim_raise(j->comm, j->err, what,
                          "send and receive sizes differ (zeros sent in their place)");
    return MPI_SUCCESS;
}

/* Where arcoll's input or output for n blocks of count elements of t at buf
 * is: buf itself when t is contiguous, else a packed copy (in: filled now). */
static int shim_side_uniform(shim_job_t *j, const void *buf, int count, MPI_Datatype t,
                             const shim_type_t *ti, int n, int in, char **where, char **tmp)
{
    size_t len = (size_t)count * ti->size * (size_t)n;

    if (ti->contig) {
        *where = shim_at(buf, ti->tlb);
        return MPI_SUCCESS;
    }
    *tmp = malloc(len ? len : 1);
    if (*tmp == NULL)
        return MPI_ERR_NO_MEM;
    *where = *tmp;
    j->packed = 1;
    return in ? shim_pack(buf, count * n, t, ti->size, *tmp, len, 0, j->comm) : MPI_SUCCESS;
}

/* alltoall/allgather (j->kind, j->comm, j->team set). */
static int shim_plan_uniform(shim_job_t *j, const void *sbuf, int scount, MPI_Datatype stype,
                             void *rbuf, int rcount, MPI_Datatype rtype)
{
    int a2a = j->kind % SHIM_NB == K_ALLTOALL, n = arcoll_team_size(j->team);
    int me = arcoll_team_rank(j->team), nsend = a2a ? n : 1, rc;
    shim_type_t st, rt;
    char *rwhere, *swhere;
    size_t rblk, sblk;

    if (rcount < 0 || (sbuf != MPI_IN_PLACE && scount < 0))
        return MPI_ERR_COUNT;
    if (shim_type_get(rtype, &rt) != 0 || (sbuf != MPI_IN_PLACE && shim_type_get(stype, &st)))
        return MPI_ERR_TYPE;
    rblk = (size_t)rcount * rt.size;
    rc = shim_side_uniform(j, rbuf, rcount, rtype, &rt, n, 0, &rwhere, &j->rtmp);
    if (rc != MPI_SUCCESS)
        return rc;
    j->rbuf = rwhere;
    j->bytes = rblk;
    if (j->rtmp != NULL) {
        j->ubuf = rbuf;
        j->utype = rtype;
        j->ucount = rcount * n;
        j->rlen = rblk * (size_t)n;
    }
    if (sbuf == MPI_IN_PLACE) {
        /* The input is in rbuf (alltoall: all of it; allgather: this rank's
         * block): a copy of it, since arcoll's buffers must not overlap. */
        const char *in = a2a ? rbuf : shim_at(rbuf, (MPI_Aint)me * rcount * rt.extent);
        size_t len = rblk * (size_t)nsend;
        j->stmp = malloc(len ? len : 1);
        if (j->stmp == NULL)
            return MPI_ERR_NO_MEM;
        j->sbuf = j->stmp;
        if (rt.contig) {
            if (len > 0)
                memcpy(j->stmp, shim_at(in, rt.tlb), len);
            return MPI_SUCCESS;
        }
        j->packed = 1;
        return shim_pack(in, rcount * nsend, rtype, rt.size, j->stmp, len, 0, j->comm);
    }
    sblk = (size_t)scount * st.size;
    if (sblk != rblk) {
        /* Erroneous MPI; take part with zeros rather than leave the others
         * waiting, and report it here. */
        j->err = MPI_ERR_TRUNCATE;
        j->stmp = calloc(1, rblk * (size_t)nsend + 1);
        j->sbuf = j->stmp;
        return j->stmp != NULL ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    }
    rc = shim_side_uniform(j, sbuf, scount, stype, &st, nsend, 1, &swhere, &j->stmp);
    j->sbuf = swhere;
    return rc;
}

/*
 * One side of a v-form: n blocks of counts[b] elements of t at buf +
 * displs[b] * extent. Gives arcoll's base and byte counts/displacements;
 * a non-contiguous t gets a packed copy (blocks in order), filled with the
 * block `only` (or all of them when only < 0) if in.
 */
static int shim_side_v(shim_job_t *j, const void *buf, const int *counts, const int *displs,
                       MPI_Datatype t, int n, int in, int only, size_t *bc, size_t *bd, char **base,
                       char **tmp, size_t *tlen, shim_type_t *ti)
{
    MPI_Aint lo = 0, off;
    size_t total = 0;
    int any = 0, rc = MPI_SUCCESS;

    if (shim_type_get(t, ti) != 0)
        return MPI_ERR_TYPE;
    for (int b = 0; b < n; b++) {
        if (counts[b] < 0)
            return MPI_ERR_COUNT;
        bc[b] = (size_t)counts[b] * ti->size;
    }
    if (ti->contig) {
        /* Byte offsets from the lowest block with data, the base. */
        for (int b = 0; b < n; b++) {
            off = (MPI_Aint)displs[b] * ti->extent + ti->tlb;
            if (bc[b] > 0 && (!any || off < lo)) {
                lo = off;
                any = 1;
            }
        }
        for (int b = 0; b < n; b++)
            bd[b] = bc[b] > 0 ? (size_t)((MPI_Aint)displs[b] * ti->extent + ti->tlb - lo) : 0;
        *base = shim_at(buf, lo);
        return MPI_SUCCESS;
    }
    for (int b = 0; b < n; b++) {
        bd[b] = total;
        total += bc[b];
    }
    *tmp = malloc(total ? total : 1);
    if (*tmp == NULL)
        return MPI_ERR_NO_MEM;
    *base = *tmp;
    *tlen = total;
    j->packed = 1;
    for (int b = 0; in && b < n && rc == MPI_SUCCESS; b++)
        if ((only < 0 || b == only) && counts[b] > 0)
            rc = shim_pack(shim_at(buf, (MPI_Aint)displs[b] * ti->extent), counts[b], t, ti->size,
                           *tmp, total, bd[b], j->comm);
    return rc;
}

static void shim_unpack_v(shim_job_t *j, void *rbuf, MPI_Datatype rtype, const shim_type_t *rt,
                          const int *rcounts, const int *rdispls, const size_t *rpos, int n)
{
    j->ubuf = rbuf;
    j->utype = rtype;
    j->uext = rt->extent;
    j->ucounts = rcounts;
    j->udispls = rdispls;
    j->upos = rpos;
    j->un = n;
}

static int shim_plan_alltoallv(shim_job_t *j, const void *sbuf, const int *scounts,
                               const int *sdispls, MPI_Datatype stype, void *rbuf,
                               const int *rcounts, const int *rdispls, MPI_Datatype rtype)
{
    size_t n = (size_t)arcoll_team_size(j->team), unused = 0;
    shim_type_t st, rt;
    char *sbase = NULL, *rbase = NULL;
    int rc, in_place = sbuf == MPI_IN_PLACE;

    j->v = malloc(4 * n * sizeof(size_t));
    if (j->v == NULL)
        return MPI_ERR_NO_MEM;
    /* In place, the input is rbuf's blocks: a packed copy starts with them. */
    rc = shim_side_v(j, rbuf, rcounts, rdispls, rtype, (int)n, in_place, -1, j->v + 2 * n,
                     j->v + 3 * n, &rbase, &j->rtmp, &j->rlen, &rt);
    if (rc != MPI_SUCCESS)
        return rc;
    j->rbuf = rbase;
    if (j->rtmp != NULL)
        shim_unpack_v(j, rbuf, rtype, &rt, rcounts, rdispls, j->v + 3 * n, (int)n);
    if (in_place) {
        memcpy(j->v, j->v + 2 * n, 2 * n * sizeof(size_t));
        j->sbuf = ARCOLL_IN_PLACE;
        return MPI_SUCCESS;
    }
    rc = shim_side_v(j, sbuf, scounts, sdispls, stype, (int)n, 1, -1, j->v, j->v + n, &sbase,
                     &j->stmp, &unused, &st);
    j->sbuf = sbase;
    return rc;
}

static int shim_plan_allgatherv(shim_job_t *j, const void *sbuf, int scount, MPI_Datatype stype,
                                void *rbuf, const int *rcounts, const int *displs,
                                MPI_Datatype rtype)
{
    size_t n = (size_t)arcoll_team_size(j->team);
    int me = arcoll_team_rank(j->team), rc, in_place = sbuf == MPI_IN_PLACE;
    shim_type_t st, rt;
    char *rbase = NULL, *swhere = NULL;

    j->v = malloc(2 * n * sizeof(size_t));
    if (j->v == NULL)
        return MPI_ERR_NO_MEM;
    rc = shim_side_v(j, rbuf, rcounts, displs, rtype, (int)n, in_place, me, j->v, j->v + n, &rbase,
                     &j->rtmp, &j->rlen, &rt);
    if (rc != MPI_SUCCESS)
        return rc;
    j->rbuf = rbase;
    if (j->rtmp != NULL)
        shim_unpack_v(j, rbuf, rtype, &rt, rcounts, displs, j->v + n, (int)n);
    if (in_place) {
        j->sbuf = ARCOLL_IN_PLACE;
        j->bytes = j->v[me];
        return MPI_SUCCESS;
    }
    if (scount < 0)
        return MPI_ERR_COUNT;
    if (shim_type_get(stype, &st) != 0)
        return MPI_ERR_TYPE;
    j->bytes = (size_t)scount * st.size;
    rc = shim_side_uniform(j, sbuf, scount, stype, &st, 1, 1, &swhere, &j->stmp);
    j->sbuf = swhere;
    return rc;
}

/* Start the job: blocking when req is NULL. An arcoll status. */
static int shim_start(shim_job_t *j, arcoll_request_t *req)
{
    arcoll_team_t t = j->team;
    size_t n = (size_t)arcoll_team_size(t);
    size_t *v = j->v;

    switch (j->kind % SHIM_NB) {
    case K_ALLTOALL:
        return req ? arcoll_ialltoall(t, j->sbuf, j->rbuf, j->bytes, req)
                   : arcoll_alltoall(t, j->sbuf, j->rbuf, j->bytes);
    case K_ALLGATHER:
        return req ? arcoll_iallgather(t, j->sbuf, j->rbuf, j->bytes, req)
                   : arcoll_allgather(t, j->sbuf, j->rbuf, j->bytes);
    case K_ALLTOALLV:
        return req ? arcoll_ialltoallv(t, j->sbuf, v, v + n, j->rbuf, v + 2 * n, v + 3 * n, req)
                   : arcoll_alltoallv(t, j->sbuf, v, v + n, j->rbuf, v + 2 * n, v + 3 * n);
    case K_ALLGATHERV:
        return req ? arcoll_iallgatherv(t, j->sbuf, j->bytes, j->rbuf, v, v + n, req)
                   : arcoll_allgatherv(t, j->sbuf, j->bytes, j->rbuf, v, v + n);
    case K_RSB:
        return req ? arcoll_ireduce_scatter_block(t, j->sbuf, j->rbuf, j->count, j->dtype, j->op,
                                                  req)
                   : arcoll_reduce_scatter_block(t, j->sbuf, j->rbuf, j->count, j->dtype, j->op);
    default:
        return req ? arcoll_iallreduce(t, j->sbuf, j->rbuf, j->count, j->dtype, j->op, req)
                   : arcoll_allreduce(t, j->sbuf, j->rbuf, j->count, j->dtype, j->op);
    }
}

/*
 * Nonblocking calls: an MPI generalized request per arcoll request, on a
 * list that the wait/test calls poll.
 */
typedef struct shim_req {
    struct shim_req *next, *prev;
    MPI_Request greq;      /* the application's handle */
    arcoll_request_t areq; /* NULL once arcoll is done */
    shim_job_t job;
    int done; /* MPI_Grequest_complete called */
    int code; /* the MPI status the request completes with */
} shim_req_t;

static shim_req_t *shim_reqs;
static unsigned shim_npending; /* requests not done */
/* Failed requests that MPI freed during the current wait or test call: their
 * handles and codes (the wait calls below). */
#define SHIM_FAILS 64
static MPI_Request shim_fail_h[SHIM_FAILS];
static int shim_fail_c[SHIM_FAILS];
static unsigned shim_nfails;

/* ARCOLL_MPI_FAULT=coll_fail or icoll_fail (which): the first such call on
 * MPI_COMM_WORLD that arcoll completed is taken as timed out. */
static int shim_fault_take(int which, const shim_job_t *j, int rc)
{
    if (shim_fault != which || rc != ARCOLL_OK || j->comm != MPI_COMM_WORLD)
        return rc;
    shim_fault = SHIM_FAULT_NONE;
    shim_log(SHIM_LOG_WARN, "ARCOLL_MPI_FAULT=%s: %s taken as failed",
             which == SHIM_FAULT_COLL_FAIL ? "coll_fail" : "icoll_fail", shim_names[j->kind]);
    return ARCOLL_ERR_TIMEOUT;
}

static void shim_req_done(shim_req_t *r, int rc)
{
    rc = shim_fault_take(SHIM_FAULT_ICOLL_FAIL, &r->job, rc);
    r->code = shim_finish(&r->job, rc);
    r->done = 1;
    shim_npending--;
    shim_stats.requests++;
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
}

/* Before a communicator's context goes, or at MPI_Finalize (comm NULL: all):
 * MPI lets a program free a communicator with operations pending. */
static void shim_req_drain(MPI_Comm comm)
{
    shim_req_t *next;

    for (shim_req_t *r = shim_reqs; r != NULL; r = next) {
        next = r->next;
        if (!r->done && (comm == MPI_COMM_NULL || r->job.comm == comm))
            shim_req_done(r, arcoll_wait(&r->areq));
    }
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
static int shim_run(shim_job_t *j, const void *site, MPI_Request *req)
{
    shim_req_t *r;
    int rc;

    shim_served[j->kind]++;
    if (j->packed)
        shim_stats.packed++;
    arcoll_call_site(site);
    j->in_call = 1;
    if (req == NULL) {
        rc = shim_fault_take(SHIM_FAULT_COLL_FAIL, j, shim_start(j, NULL));
        return shim_finish(j, rc);
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL || PMPI_Grequest_start(shim_req_query, shim_req_free, shim_req_cancel, r,
                                         &r->greq) != MPI_SUCCESS) {
        free(r);
        shim_job_free(j);
        shim_fail_seen(j->rec, "no memory for a request", 1);
        return shim_raise(j->comm, MPI_ERR_NO_MEM, shim_names[j->kind], "no memory for a request");
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
    rc = shim_start(&r->job, &r->areq);
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
        shim_log(SHIM_LOG_DEBUG, "%s (%d ranks): %s: to PMPI", shim_names[kind],
                 arcoll_team_size(team), why);
        team = NULL;
    }
    if (team == NULL)
        shim_passed[kind]++;
    return team;
}

static void shim_job_init(shim_job_t *j, int kind, MPI_Comm comm, arcoll_team_t team)
{
    memset(j, 0, sizeof(*j));
    j->kind = kind;
    j->comm = comm;
    j->team = team;
    j->utype = MPI_DATATYPE_NULL;
    j->rec = shim_comm_get(comm); /* cached by shim_route */
}

/* A plan that failed on this rank: free it and raise the error. */
static int shim_plan_failed(shim_job_t *j, int code)
{
    shim_job_free(j);
    shim_fail_seen(j->rec, "this rank could not take part in a call", 1);
    return shim_raise(j->comm, code, shim_names[j->kind],
                      code == MPI_ERR_NO_MEM ? "out of memory" : "invalid count or datatype");
}

/* A serve rule of the tuning table (@mpi: measured faster in the MPI library)
 * keeps this call in PMPI. Every rank decides alike: bytes is a size MPI
 * makes equal on every rank (the callers say which). */
static arcoll_team_t shim_route_bytes(int kind, MPI_Comm comm, arcoll_team_t team, size_t bytes)
{
    int k = kind % SHIM_NB;
    shim_comm_t *c;

    if (team == NULL || bytes == 0 || k == K_ALLTOALLV)
        return team;
    c = shim_comm_get(comm); /* the cached record of shim_route's lookup */
    if (c == NULL || c == &shim_comm_nomem)
        return team;
    if (c->host_bytes[k] != bytes) {
        c->host[k] = arcoll_team_host_serves(team, (arcoll_coll_t)k, bytes);
        c->host_bytes[k] = bytes;
    }
    if (!c->host[k])
        return team;
    shim_passed[kind]++;
    return NULL;
}

/* The same for alltoall and allgather: rcount x the receive type's size is
 * the call's bytes per peer on every rank (MPI's type-signature rule),
 * MPI_IN_PLACE or not. */
static arcoll_team_t shim_route_size(int kind, MPI_Comm comm, arcoll_team_t team, int rcount,
                                     MPI_Datatype rtype)
{
    int tsize;

    if (team == NULL || rcount <= 0 || PMPI_Type_size(rtype, &tsize) != MPI_SUCCESS || tsize <= 0)
        return team;
    return shim_route_bytes(kind, comm, team, (size_t)rcount * (size_t)tsize);
}

/* Alltoall and allgather, blocking (req NULL) or not; site: the caller. */
static int shim_uniform(int kind, const void *site, const void *sbuf, int scount,
                        MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                        MPI_Comm comm, MPI_Request *req)
{
    arcoll_team_t team = shim_route_size(kind, comm, shim_route(kind, comm, NULL), rcount, rtype);
    shim_job_t j;
    int rc;

    if ((team = shim_gate(kind, comm, team, &rc, req)) == NULL && rc != MPI_SUCCESS)
        return rc;
    if (team == NULL) {
        switch (kind) {
        case K_ALLTOALL: return PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm);
        case K_ALLGATHER: return PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
        case SHIM_NB + K_ALLTOALL:
            return PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req);
        default: return PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req);
        }
    }
    shim_job_init(&j, kind, comm, team);
    rc = shim_plan_uniform(&j, sbuf, scount, stype, rbuf, rcount, rtype);
    if (rc != MPI_SUCCESS)
        return shim_plan_failed(&j, rc);
    return shim_run(&j, site, req);
}

static int shim_alltoallv(int kind, const void *site, const void *sbuf, const int *scounts,
                          const int *sdispls, MPI_Datatype stype, void *rbuf, const int *rcounts,
                          const int *rdispls, MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    arcoll_team_t team = shim_route(kind, comm, NULL);
    shim_job_t j;
    int rc;

    if ((team = shim_gate(kind, comm, team, &rc, req)) == NULL && rc != MPI_SUCCESS)
        return rc;
    if (team == NULL)
        return req == NULL ? PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls,
                                            rtype, comm)
                           : PMPI_Ialltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls,
                                             rtype, comm, req);
    shim_job_init(&j, kind, comm, team);
    rc = shim_plan_alltoallv(&j, sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype);
    if (rc != MPI_SUCCESS)
        return shim_plan_failed(&j, rc);
    return shim_run(&j, site, req);
}

static int shim_allgatherv(int kind, const void *site, const void *sbuf, int scount,
                           MPI_Datatype stype, void *rbuf, const int *rcounts, const int *displs,
                           MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    arcoll_team_t team = shim_route(kind, comm, NULL);
    shim_job_t j;
    int rc;

    /* The mean of recvcounts: the same array on every rank. */
    if (team != NULL && rcounts != NULL) {
        int n = arcoll_team_size(team), tsize = 0;
        size_t sum = 0;
        for (int i = 0; i < n; i++)
            sum += rcounts[i] > 0 ? (size_t)rcounts[i] : 0;
        if (n > 0 && PMPI_Type_size(rtype, &tsize) == MPI_SUCCESS && tsize > 0)
            team = shim_route_bytes(kind, comm, team, sum * (size_t)tsize / (size_t)n);
    }
    if ((team = shim_gate(kind, comm, team, &rc, req)) == NULL && rc != MPI_SUCCESS)
        return rc;
    if (team == NULL)
        return req == NULL
                   ? PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm)
                   : PMPI_Iallgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, req);
    shim_job_init(&j, kind, comm, team);
    rc = shim_plan_allgatherv(&j, sbuf, scount, stype, rbuf, rcounts, displs, rtype);
    if (rc != MPI_SUCCESS)
        return shim_plan_failed(&j, rc);
    return shim_run(&j, site, req);
}

/* Reduce_scatter_block (count per rank) and allreduce. */
static int shim_reduce(int kind, const void *site, const void *sbuf, void *rbuf, int count,
                       MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request *req)
{
    arcoll_dtype_t dt = ARCOLL_INT32;
    arcoll_op_t aop = ARCOLL_SUM;
    const char *why = shim_dtype(type, &dt) != 0   ? "datatype not in arcoll"
                      : shim_op(op, dt, &aop) != 0 ? "op not in arcoll"
                                                   : NULL;
    arcoll_team_t team = shim_route(kind, comm, why);
    shim_job_t j;
    int tsize = 0, rc;

    /* count (per block, or of the vector) is the same on every rank. */
    if (team != NULL && count > 0 && PMPI_Type_size(type, &tsize) == MPI_SUCCESS && tsize > 0)
        team = shim_route_bytes(kind, comm, team, (size_t)count * (size_t)tsize);
    if ((team = shim_gate(kind, comm, team, &rc, req)) == NULL && rc != MPI_SUCCESS)
        return rc;
    if (team == NULL) {
        switch (kind) {
        case K_RSB: return PMPI_Reduce_scatter_block(sbuf, rbuf, count, type, op, comm);
        case K_ALLREDUCE: return PMPI_Allreduce(sbuf, rbuf, count, type, op, comm);
        case SHIM_NB + K_RSB:
            return PMPI_Ireduce_scatter_block(sbuf, rbuf, count, type, op, comm, req);
        default: return PMPI_Iallreduce(sbuf, rbuf, count, type, op, comm, req);
        }
    }
    shim_job_init(&j, kind, comm, team);
    if (count < 0)
        return shim_plan_failed(&j, MPI_ERR_COUNT);
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
    return shim_uniform(SHIM_NB + K_ALLTOALL, __builtin_return_address(0), sbuf, scount, stype,
                        rbuf, rcount, rtype, comm, req);
}

int MPI_Iallgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                   MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    return shim_uniform(SHIM_NB + K_ALLGATHER, __builtin_return_address(0), sbuf, scount, stype,
                        rbuf, rcount, rtype, comm, req);
}

int MPI_Ialltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                   void *rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                   MPI_Comm comm, MPI_Request *req)
{
    return shim_alltoallv(SHIM_NB + K_ALLTOALLV, __builtin_return_address(0), sbuf, scounts,
                          sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, req);
}

int MPI_Iallgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                    const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm,
                    MPI_Request *req)
{
    return shim_allgatherv(SHIM_NB + K_ALLGATHERV, __builtin_return_address(0), sbuf, scount, stype,
                           rbuf, rcounts, displs, rtype, comm, req);
}

int MPI_Ireduce_scatter_block(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                              MPI_Comm comm, MPI_Request *req)
{
    return shim_reduce(SHIM_NB + K_RSB, __builtin_return_address(0), sbuf, rbuf, count, type, op,
                       comm, req);
}

int MPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm, MPI_Request *req)
{
    return shim_reduce(SHIM_NB + K_ALLREDUCE, __builtin_return_address(0), sbuf, rbuf, count, type,
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
enum { SHIM_SPLIT_OK, SHIM_SPLIT_ORDER, SHIM_SPLIT_FAILED, SHIM_SPLIT_NOATTR };

/* Once per process at ARCOLL_LOG=info: why a new communicator does not share. */
static void shim_split_note(int verdict, int n)
{
    static int said[SHIM_SPLIT_FAILED + 1];

    if (said[verdict]++ == 0)
        shim_log(SHIM_LOG_INFO,
                 verdict == SHIM_SPLIT_FAILED
                     ? "arcoll_team_split failed: a new communicator (%d ranks) uses PMPI"
                     : "a split team's ranks differ from its communicator's (%d ranks): it gets "
                       "a context of its own",
                 n);
}

/* Collective over parent (prc: what PMPI's constructor returned here). */
static void shim_derive(MPI_Comm parent, int color, int key, MPI_Comm newcomm, int prc)
{
    shim_comm_t *p, *c = NULL;
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
    if (p == NULL || p->sc == NULL || !p->sc->split)
        goto out;
    /* A rank that PMPI failed still takes part, joining no team. */
    if (prc != MPI_SUCCESS || newcomm == MPI_COMM_NULL)
        color = ARCOLL_UNDEFINED;
    /* arcoll_team_split refuses a team with collectives in flight; every
     * rank of parent started the same ones, so all can finish them. */
    shim_req_drain(parent);
    /* A failed team cannot split (where this rank saw it fail, the others'
     * splits time out): the new communicator gets a context of its own. */
    rc = p->fail != SHIM_TEAM_OK ? ARCOLL_ERR_STATE : arcoll_team_split(p->team, color, key, &nt);
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
    set = shim_attr_set(newcomm, c != NULL ? (void *)c : &shim_comm_nomem) == MPI_SUCCESS;
    if (set && c != NULL)
        shim_comm_link(c);
    copied = shim_copy(newcomm, &agree) == 0;
    if (!set)
        mine = SHIM_SPLIT_NOATTR;
    else if ((rc != ARCOLL_OK && p->fail == SHIM_TEAM_OK) || c == NULL || !copied ||
             shim_fault == SHIM_FAULT_SPLIT_FAIL)
        mine = SHIM_SPLIT_FAILED;
    else if (p->fail != SHIM_TEAM_OK || nt == NULL || arcoll_team_rank(nt) != me ||
             arcoll_team_size(nt) != n || shim_fault == SHIM_FAULT_SPLIT_ORDER)
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
        shim_stats.comms_arcoll++;
        shim_stats.comms_split++;
        goto out;
    }
    if (agree != MPI_COMM_NULL)
        PMPI_Comm_free(&agree);
    /* nt's members are newcomm's, and all of them are here. */
    if (nt != NULL && arcoll_team_free(nt) != ARCOLL_OK)
        shim_log(SHIM_LOG_WARN, "arcoll_team_free: %s", arcoll_last_error(NULL));
    if (verdict == SHIM_SPLIT_NOATTR) {
        /* No record anywhere: the old path, at its first call. */
        shim_attr_drop(newcomm, set, c != NULL ? c : &shim_comm_nomem);
        goto out;
    }
    shim_split_note(verdict, n);
    if (verdict == SHIM_SPLIT_ORDER) {
        /* No record: the old path, a context of its own at its first call. */
        shim_stats.split_fallback++;
        if (c != NULL)
            PMPI_Comm_delete_attr(newcomm, shim_keyval);
    } else {
        shim_stats.split_failed++;
        shim_stats.comms_mpi++;
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

static void shim_poll_some(void)
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
 * fails it (shim_finish), its query function reports success, and the wait
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

static int shim_wait(MPI_Request *req, MPI_Status *st)
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

static int shim_test(MPI_Request *req, int *flag, MPI_Status *st)
{
    MPI_Request h = *req;

    shim_nfails = 0;
    shim_poll_some();
    return shim_fails_one(h, 1, PMPI_Test(req, flag, st), st);
}

/* Waitall (flag NULL) and testall. */
static int shim_all(int n, MPI_Request *reqs, int *flag, MPI_Status *sts)
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
static int shim_any(int n, MPI_Request *reqs, int *idx, int *flag, MPI_Status *st)
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
static int shim_some(int test, int n, MPI_Request *reqs, int *out, int *idx, MPI_Status *sts)
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
    shim_poll_some();
    return PMPI_Request_get_status(req, flag, st);
}

static void shim_report(void)
{
    static const char *const short_names[SHIM_NKINDS] = {"alltoall",
                                                         "allgather",
                                                         "alltoallv",
                                                         "allgatherv",
                                                         "reduce_scatter_block",
                                                         "allreduce",
                                                         "ialltoall",
                                                         "iallgather",
                                                         "ialltoallv",
                                                         "iallgatherv",
                                                         "ireduce_scatter_block",
                                                         "iallreduce"};
    char line[1024];
    size_t len = 0;

    for (int k = 0; k < SHIM_NKINDS; k++)
        if (shim_served[k] + shim_passed[k] > 0 && len < sizeof(line))
            len +=
                (size_t)snprintf(line + len, sizeof(line) - len, "%s %llu on arcoll, %llu on MPI; ",
                                 short_names[k], shim_served[k], shim_passed[k]);
    shim_log(SHIM_LOG_INFO,
             "%s%llu packed, %llu from Fortran, %llu requests; %llu communicators on arcoll "
             "(%llu by team split), %llu on MPI; %llu contexts; %llu errors; sh_co: %llu calls, "
             "%llu fallbacks to pap",
             len > 0 ? line : "no collectives; ", shim_stats.packed, shim_stats.fortran,
             shim_stats.requests, shim_stats.comms_arcoll, shim_stats.comms_split,
             shim_stats.comms_mpi, shim_stats.contexts, shim_stats.errors,
             shim_counters.sh_co_calls, shim_counters.sh_co_fallbacks);
}

/* Free every record, then every context still alive, newest first, while
 * MPI still works. */
static int shim_finalize(void)
{
    if (shim_state == SHIM_ON) {
        shim_busy++;
        shim_finalizing = 1;
        shim_req_drain(MPI_COMM_NULL);
        while (shim_live != NULL) {
            shim_comm_t *c = shim_live;
            unsigned n = shim_nlive;
            /* The delete callback unlinks and frees c; should MPI refuse, do
             * it here. */
            if (PMPI_Comm_delete_attr(c->comm, shim_keyval) != MPI_SUCCESS || shim_nlive == n)
                shim_comm_destroy(c);
        }
        while (shim_ctxs != NULL)
            shim_ctx_free(shim_ctxs);
        PMPI_Comm_free_keyval(&shim_keyval);
        shim_busy--;
        shim_state = SHIM_OFF;
        shim_report();
    }
    return PMPI_Finalize();
}

int MPI_Finalize(void)
{
    return shim_finalize();
}

int arcoll_mpi_stats(arcoll_mpi_stats_t *out)
{
    arcoll_mpi_stats_t *s = &shim_stats;
    unsigned long long *pairs[SHIM_NKINDS][2] = {
        {&s->alltoall_arcoll, &s->alltoall_mpi},
        {&s->allgather_arcoll, &s->allgather_mpi},
        {&s->alltoallv_arcoll, &s->alltoallv_mpi},
        {&s->allgatherv_arcoll, &s->allgatherv_mpi},
        {&s->reduce_scatter_block_arcoll, &s->reduce_scatter_block_mpi},
        {&s->allreduce_arcoll, &s->allreduce_mpi},
        {&s->ialltoall_arcoll, &s->ialltoall_mpi},
        {&s->iallgather_arcoll, &s->iallgather_mpi},
        {&s->ialltoallv_arcoll, &s->ialltoallv_mpi},
        {&s->iallgatherv_arcoll, &s->iallgatherv_mpi},
        {&s->ireduce_scatter_block_arcoll, &s->ireduce_scatter_block_mpi},
        {&s->iallreduce_arcoll, &s->iallreduce_mpi}};

    for (int k = 0; k < SHIM_NKINDS; k++) {
        *pairs[k][0] = shim_served[k];
        *pairs[k][1] = shim_passed[k];
    }
    *out = shim_stats;
    return 0;
}

/*
 * Fortran. Open MPI's mpif.h and `use mpi` bindings are the symbols mpi_x_
 * (and mpi_x, mpi_x__, MPI_X for other compilers' name mangling) in
 * libmpi_mpifh, which call PMPI_X; the mpi_f08 module's mpi_x_f08_ call
 * ompi_x_f, the same functions under another name. Defining all of them here
 * (preloaded, they come first) brings every Fortran call to the C code above.
 * Handles are MPI_Fint; the sentinels MPI_IN_PLACE, MPI_BOTTOM and
 * MPI_STATUS(ES)_IGNORE are the addresses of Open MPI's Fortran common
 * blocks, which are weak here so that a C program without the Fortran
 * libraries still loads the shim.
 */
extern int mpi_fortran_in_place_ __attribute__((weak));
extern int mpi_fortran_bottom_ __attribute__((weak));
extern int mpi_fortran_status_ignore_ __attribute__((weak));
extern int mpi_fortran_statuses_ignore_ __attribute__((weak));

_Static_assert(sizeof(MPI_Fint) == sizeof(int), "Fortran count arrays are passed as int arrays");
#define SHIM_F_STATUS_SIZE ((int)(sizeof(MPI_Status) / sizeof(MPI_Fint)))

/* Every Fortran name of one function defined here as f_impl. */
#define SHIM_FORTRAN(impl, lower, upper, ompi, params)   \
    void lower params __attribute__((alias(#impl)));     \
    void lower##_ params __attribute__((alias(#impl)));  \
    void lower##__ params __attribute__((alias(#impl))); \
    void upper params __attribute__((alias(#impl)));     \
    void ompi params __attribute__((alias(#impl)))

static void *shim_fbuf(void *p)
{
    if (&mpi_fortran_in_place_ != NULL && p == (void *)&mpi_fortran_in_place_)
        return MPI_IN_PLACE;
    if (&mpi_fortran_bottom_ != NULL && p == (void *)&mpi_fortran_bottom_)
        return MPI_BOTTOM;
    return p;
}

static int shim_fstatus_ignored(const MPI_Fint *st)
{
    return (&mpi_fortran_status_ignore_ != NULL && st == &mpi_fortran_status_ignore_) ||
           (MPI_F_STATUS_IGNORE != NULL && st == MPI_F_STATUS_IGNORE);
}

static int shim_fstatuses_ignored(const MPI_Fint *st)
{
    return (&mpi_fortran_statuses_ignore_ != NULL && st == &mpi_fortran_statuses_ignore_) ||
           (MPI_F_STATUSES_IGNORE != NULL && st == MPI_F_STATUSES_IGNORE);
}

static void shim_fret(MPI_Fint *ierr, int rc)
{
    if (ierr != NULL)
        *ierr = (MPI_Fint)rc;
}

/* The collectives: kind, the caller's site, C arguments. */
static void shim_f_uniform(int kind, const void *site, void *sbuf, MPI_Fint *scount,
                           MPI_Fint *stype, void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype,
                           MPI_Fint *comm, MPI_Fint *freq, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;

    shim_stats.fortran++;
    rc = shim_uniform(kind, site, shim_fbuf(sbuf), (int)*scount, PMPI_Type_f2c(*stype),
                      shim_fbuf(rbuf), (int)*rcount, PMPI_Type_f2c(*rtype), PMPI_Comm_f2c(*comm),
                      freq != NULL ? &req : NULL);
    if (freq != NULL && rc == MPI_SUCCESS)
        *freq = PMPI_Request_c2f(req);
    shim_fret(ierr, rc);
}

static void f_alltoall(void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcount,
                       MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *ierr)
{
    shim_f_uniform(K_ALLTOALL, __builtin_return_address(0), sbuf, scount, stype, rbuf, rcount,
                   rtype, comm, NULL, ierr);
}
SHIM_FORTRAN(f_alltoall, mpi_alltoall, MPI_ALLTOALL, ompi_alltoall_f,
             (void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
              MPI_Fint *));

static void f_allgather(void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcount,
                        MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *ierr)
{
    shim_f_uniform(K_ALLGATHER, __builtin_return_address(0), sbuf, scount, stype, rbuf, rcount,
                   rtype, comm, NULL, ierr);
}
SHIM_FORTRAN(f_allgather, mpi_allgather, MPI_ALLGATHER, ompi_allgather_f,
             (void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
              MPI_Fint *));

static void f_ialltoall(void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcount,
                        MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    shim_f_uniform(SHIM_NB + K_ALLTOALL, __builtin_return_address(0), sbuf, scount, stype, rbuf,
                   rcount, rtype, comm, req, ierr);
}
SHIM_FORTRAN(f_ialltoall, mpi_ialltoall, MPI_IALLTOALL, ompi_ialltoall_f,
             (void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
              MPI_Fint *, MPI_Fint *));

static void f_iallgather(void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf,
                         MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *req,
                         MPI_Fint *ierr)
{
    shim_f_uniform(SHIM_NB + K_ALLGATHER, __builtin_return_address(0), sbuf, scount, stype, rbuf,
                   rcount, rtype, comm, req, ierr);
}
SHIM_FORTRAN(f_iallgather, mpi_iallgather, MPI_IALLGATHER, ompi_iallgather_f,
             (void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
              MPI_Fint *, MPI_Fint *));

static void shim_f_alltoallv(int kind, const void *site, void *sbuf, MPI_Fint *scounts,
                             MPI_Fint *sdispls, MPI_Fint *stype, void *rbuf, MPI_Fint *rcounts,
                             MPI_Fint *rdispls, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *freq,
                             MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;

    shim_stats.fortran++;
    rc = shim_alltoallv(kind, site, shim_fbuf(sbuf), scounts, sdispls, PMPI_Type_f2c(*stype),
                        shim_fbuf(rbuf), rcounts, rdispls, PMPI_Type_f2c(*rtype),
                        PMPI_Comm_f2c(*comm), freq != NULL ? &req : NULL);
    if (freq != NULL && rc == MPI_SUCCESS)
        *freq = PMPI_Request_c2f(req);
    shim_fret(ierr, rc);
}

static void f_alltoallv(void *sbuf, MPI_Fint *scounts, MPI_Fint *sdispls, MPI_Fint *stype,
                        void *rbuf, MPI_Fint *rcounts, MPI_Fint *rdispls, MPI_Fint *rtype,
                        MPI_Fint *comm, MPI_Fint *ierr)
{
    shim_f_alltoallv(K_ALLTOALLV, __builtin_return_address(0), sbuf, scounts, sdispls, stype, rbuf,
                     rcounts, rdispls, rtype, comm, NULL, ierr);
}
SHIM_FORTRAN(f_alltoallv, mpi_alltoallv, MPI_ALLTOALLV, ompi_alltoallv_f,
             (void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *,
              MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_ialltoallv(void *sbuf, MPI_Fint *scounts, MPI_Fint *sdispls, MPI_Fint *stype,
                         void *rbuf, MPI_Fint *rcounts, MPI_Fint *rdispls, MPI_Fint *rtype,
                         MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    shim_f_alltoallv(SHIM_NB + K_ALLTOALLV, __builtin_return_address(0), sbuf, scounts, sdispls,
                     stype, rbuf, rcounts, rdispls, rtype, comm, req, ierr);
}
SHIM_FORTRAN(f_ialltoallv, mpi_ialltoallv, MPI_IALLTOALLV, ompi_ialltoallv_f,
             (void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *,
              MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void shim_f_allgatherv(int kind, const void *site, void *sbuf, MPI_Fint *scount,
                              MPI_Fint *stype, void *rbuf, MPI_Fint *rcounts, MPI_Fint *displs,
                              MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *freq, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;

    shim_stats.fortran++;
    rc = shim_allgatherv(kind, site, shim_fbuf(sbuf), (int)*scount, PMPI_Type_f2c(*stype),
                         shim_fbuf(rbuf), rcounts, displs, PMPI_Type_f2c(*rtype),
                         PMPI_Comm_f2c(*comm), freq != NULL ? &req : NULL);
    if (freq != NULL && rc == MPI_SUCCESS)
        *freq = PMPI_Request_c2f(req);
    shim_fret(ierr, rc);
}

static void f_allgatherv(void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf,
                         MPI_Fint *rcounts, MPI_Fint *displs, MPI_Fint *rtype, MPI_Fint *comm,
                         MPI_Fint *ierr)
{
    shim_f_allgatherv(K_ALLGATHERV, __builtin_return_address(0), sbuf, scount, stype, rbuf, rcounts,
                      displs, rtype, comm, NULL, ierr);
}
SHIM_FORTRAN(f_allgatherv, mpi_allgatherv, MPI_ALLGATHERV, ompi_allgatherv_f,
             (void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
              MPI_Fint *, MPI_Fint *));

static void f_iallgatherv(void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf,
                          MPI_Fint *rcounts, MPI_Fint *displs, MPI_Fint *rtype, MPI_Fint *comm,
                          MPI_Fint *req, MPI_Fint *ierr)
{
    shim_f_allgatherv(SHIM_NB + K_ALLGATHERV, __builtin_return_address(0), sbuf, scount, stype,
                      rbuf, rcounts, displs, rtype, comm, req, ierr);
}
SHIM_FORTRAN(f_iallgatherv, mpi_iallgatherv, MPI_IALLGATHERV, ompi_iallgatherv_f,
             (void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
              MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void shim_f_reduce(int kind, const void *site, void *sbuf, void *rbuf, MPI_Fint *count,
                          MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *freq,
                          MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;

    shim_stats.fortran++;
    rc =
        shim_reduce(kind, site, shim_fbuf(sbuf), shim_fbuf(rbuf), (int)*count, PMPI_Type_f2c(*type),
                    PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm), freq != NULL ? &req : NULL);
    if (freq != NULL && rc == MPI_SUCCESS)
        *freq = PMPI_Request_c2f(req);
    shim_fret(ierr, rc);
}

static void f_allreduce(void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
                        MPI_Fint *comm, MPI_Fint *ierr)
{
    shim_f_reduce(K_ALLREDUCE, __builtin_return_address(0), sbuf, rbuf, count, type, op, comm, NULL,
                  ierr);
}
SHIM_FORTRAN(f_allreduce, mpi_allreduce, MPI_ALLREDUCE, ompi_allreduce_f,
             (void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_iallreduce(void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
                         MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    shim_f_reduce(SHIM_NB + K_ALLREDUCE, __builtin_return_address(0), sbuf, rbuf, count, type, op,
                  comm, req, ierr);
}
SHIM_FORTRAN(f_iallreduce, mpi_iallreduce, MPI_IALLREDUCE, ompi_iallreduce_f,
             (void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
              MPI_Fint *));

static void f_reduce_scatter_block(void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type,
                                   MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)
{
    shim_f_reduce(K_RSB, __builtin_return_address(0), sbuf, rbuf, count, type, op, comm, NULL,
                  ierr);
}
SHIM_FORTRAN(f_reduce_scatter_block, mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK,
             ompi_reduce_scatter_block_f,
             (void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_ireduce_scatter_block(void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type,
                                    MPI_Fint *op, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    shim_f_reduce(SHIM_NB + K_RSB, __builtin_return_address(0), sbuf, rbuf, count, type, op, comm,
                  req, ierr);
}
SHIM_FORTRAN(f_ireduce_scatter_block, mpi_ireduce_scatter_block, MPI_IREDUCE_SCATTER_BLOCK,
             ompi_ireduce_scatter_block_f,
             (void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
              MPI_Fint *));

/* Request arrays between Fortran and C: NULL when n < 0 or no memory. */
static MPI_Request *shim_freqs(int n, const MPI_Fint *freqs)
{
    MPI_Request *r = n >= 0 ? malloc(((size_t)n + 1) * sizeof(*r)) : NULL;

    for (int i = 0; r != NULL && i < n; i++)
        r[i] = PMPI_Request_f2c(freqs[i]);
    return r;
}

/* C statuses for Fortran ones: 0, or -1 when out of memory. */
static int shim_fstatuses(int n, const MPI_Fint *fst, MPI_Status **sts)
{
    /* Open MPI's MPI_STATUSES_IGNORE is NULL: no memory is told apart. */
    *sts = MPI_STATUSES_IGNORE;
    if (shim_fstatuses_ignored(fst))
        return 0;
    *sts = malloc(((size_t)n + 1) * sizeof(MPI_Status));
    return *sts != NULL ? 0 : -1;
}

static void shim_fback(int n, const MPI_Request *r, MPI_Fint *freqs, const MPI_Status *sts,
                       MPI_Fint *fsts)
{
    for (int i = 0; i < n; i++) {
        freqs[i] = PMPI_Request_c2f(r[i]);
        if (sts != MPI_STATUSES_IGNORE)
            PMPI_Status_c2f(&sts[i], fsts + (size_t)i * SHIM_F_STATUS_SIZE);
    }
}

static void f_wait(MPI_Fint *freq, MPI_Fint *fst, MPI_Fint *ierr)
{
    MPI_Request req = PMPI_Request_f2c(*freq);
    MPI_Status st;
    int ign = shim_fstatus_ignored(fst), rc = shim_wait(&req, ign ? MPI_STATUS_IGNORE : &st);

    /* Also when a failed request was freed (its code in the status). */
    *freq = PMPI_Request_c2f(req);
    if (!ign && (rc == MPI_SUCCESS || req == MPI_REQUEST_NULL))
        PMPI_Status_c2f(&st, fst);
    shim_fret(ierr, rc);
}
SHIM_FORTRAN(f_wait, mpi_wait, MPI_WAIT, ompi_wait_f, (MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_test(MPI_Fint *freq, MPI_Fint *flag, MPI_Fint *fst, MPI_Fint *ierr)
{
    MPI_Request req = PMPI_Request_f2c(*freq);
    MPI_Status st;
    int ign = shim_fstatus_ignored(fst), done = 0, rc;

    rc = shim_test(&req, &done, ign ? MPI_STATUS_IGNORE : &st);
    if (rc == MPI_SUCCESS || (done && req == MPI_REQUEST_NULL)) {
        *flag = done != 0; /* gfortran's .true. */
        if (done) {
            *freq = PMPI_Request_c2f(req);
            if (!ign)
                PMPI_Status_c2f(&st, fst);
        }
    }
    shim_fret(ierr, rc);
}
SHIM_FORTRAN(f_test, mpi_test, MPI_TEST, ompi_test_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

/* Waitall and testall: test NULL for waitall. */
static void shim_f_all(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *flag, MPI_Fint *fsts,
                       MPI_Fint *ierr)
{
    int n = (int)*count, done = 1, rc;
    MPI_Request *r = shim_freqs(n, freqs);
    MPI_Status *sts = MPI_STATUSES_IGNORE;

    if (r == NULL || shim_fstatuses(n, fsts, &sts) != 0) {
        free(r);
        shim_fret(ierr, MPI_ERR_NO_MEM);
        return;
    }
    rc = shim_all(n, r, flag != NULL ? &done : NULL, sts);
    if (flag != NULL && (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS))
        *flag = done != 0;
    if ((rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && done)
        shim_fback(n, r, freqs, sts, fsts);
    if (sts != MPI_STATUSES_IGNORE)
        free(sts);
    free(r);
    shim_fret(ierr, rc);
}

static void f_waitall(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *fsts, MPI_Fint *ierr)
{
    shim_f_all(count, freqs, NULL, fsts, ierr);
}
SHIM_FORTRAN(f_waitall, mpi_waitall, MPI_WAITALL, ompi_waitall_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_testall(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *flag, MPI_Fint *fsts,
                      MPI_Fint *ierr)
{
    shim_f_all(count, freqs, flag, fsts, ierr);
}
SHIM_FORTRAN(f_testall, mpi_testall, MPI_TESTALL, ompi_testall_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

/* Waitany and testany (flag NULL: wait); Fortran indices count from 1. */
static void shim_f_any(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *index, MPI_Fint *flag,
                       MPI_Fint *fst, MPI_Fint *ierr)
{
    int n = (int)*count, idx = MPI_UNDEFINED, done = 1, rc;
    int ign = shim_fstatus_ignored(fst);
    MPI_Request *r = shim_freqs(n, freqs);
    MPI_Status st;

    if (r == NULL) {
        shim_fret(ierr, MPI_ERR_NO_MEM);
        return;
    }
    rc = shim_any(n, r, &idx, flag != NULL ? &done : NULL, ign ? MPI_STATUS_IGNORE : &st);
    if (flag != NULL && rc == MPI_SUCCESS)
        *flag = done != 0;
    if ((rc == MPI_SUCCESS || (idx != MPI_UNDEFINED && r[idx] == MPI_REQUEST_NULL)) && done) {
        *index = idx == MPI_UNDEFINED ? MPI_UNDEFINED : idx + 1;
        if (idx != MPI_UNDEFINED) {
            freqs[idx] = PMPI_Request_c2f(r[idx]);
            if (!ign)
                PMPI_Status_c2f(&st, fst);
        }
    }
    free(r);
    shim_fret(ierr, rc);
}

static void f_waitany(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *index, MPI_Fint *fst,
                      MPI_Fint *ierr)
{
    shim_f_any(count, freqs, index, NULL, fst, ierr);
}
SHIM_FORTRAN(f_waitany, mpi_waitany, MPI_WAITANY, ompi_waitany_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_testany(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *index, MPI_Fint *flag,
                      MPI_Fint *fst, MPI_Fint *ierr)
{
    shim_f_any(count, freqs, index, flag, fst, ierr);
}
SHIM_FORTRAN(f_testany, mpi_testany, MPI_TESTANY, ompi_testany_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

/* Waitsome and testsome (test: 1). */
static void shim_f_some(int test, MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *outcount,
                        MPI_Fint *indices, MPI_Fint *fsts, MPI_Fint *ierr)
{
    int n = (int)*count, out = 0, rc;
    MPI_Request *r = shim_freqs(n, freqs);
    MPI_Status *sts = MPI_STATUSES_IGNORE;
    int *idx = malloc(((size_t)n + 1) * sizeof(int));

    if (r == NULL || idx == NULL || shim_fstatuses(n, fsts, &sts) != 0) {
        free(r);
        free(idx);
        shim_fret(ierr, MPI_ERR_NO_MEM);
        return;
    }
    rc = shim_some(test, n, r, &out, idx, sts);
    if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) {
        *outcount = out;
        for (int i = 0; out != MPI_UNDEFINED && i < out; i++) {
            freqs[idx[i]] = PMPI_Request_c2f(r[idx[i]]);
            if (sts != MPI_STATUSES_IGNORE)
                PMPI_Status_c2f(&sts[i], fsts + (size_t)i * SHIM_F_STATUS_SIZE);
            indices[i] = idx[i] + 1;
        }
    }
    if (sts != MPI_STATUSES_IGNORE)
        free(sts);
    free(r);
    free(idx);
    shim_fret(ierr, rc);
}

static void f_waitsome(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *outcount, MPI_Fint *indices,
                       MPI_Fint *fsts, MPI_Fint *ierr)
{
    shim_f_some(0, count, freqs, outcount, indices, fsts, ierr);
}
SHIM_FORTRAN(f_waitsome, mpi_waitsome, MPI_WAITSOME, ompi_waitsome_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_testsome(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *outcount, MPI_Fint *indices,
                       MPI_Fint *fsts, MPI_Fint *ierr)
{
    shim_f_some(1, count, freqs, outcount, indices, fsts, ierr);
}
SHIM_FORTRAN(f_testsome, mpi_testsome, MPI_TESTSOME, ompi_testsome_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_request_get_status(MPI_Fint *freq, MPI_Fint *flag, MPI_Fint *fst, MPI_Fint *ierr)
{
    MPI_Status st;
    int ign = shim_fstatus_ignored(fst), done = 0, rc;

    shim_poll_some();
    rc = PMPI_Request_get_status(PMPI_Request_f2c(*freq), &done, ign ? MPI_STATUS_IGNORE : &st);
    if (rc == MPI_SUCCESS) {
        *flag = done != 0;
        if (done && !ign)
            PMPI_Status_c2f(&st, fst);
    }
    shim_fret(ierr, rc);
}
SHIM_FORTRAN(f_request_get_status, mpi_request_get_status, MPI_REQUEST_GET_STATUS,
             ompi_request_get_status_f, (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

/* MPI_Init from Fortran: the agreed setup as from C (no argc/argv there). */
static void f_init(MPI_Fint *ierr)
{
    shim_fret(ierr, shim_init(PMPI_Init(NULL, NULL)));
}
SHIM_FORTRAN(f_init, mpi_init, MPI_INIT, ompi_init_f, (MPI_Fint *));

static void f_init_thread(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
    int got = MPI_THREAD_SINGLE, rc = shim_init(PMPI_Init_thread(NULL, NULL, (int)*required, &got));

    if (rc == MPI_SUCCESS)
        *provided = (MPI_Fint)got;
    shim_fret(ierr, rc);
}
SHIM_FORTRAN(f_init_thread, mpi_init_thread, MPI_INIT_THREAD, ompi_init_thread_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_finalize(MPI_Fint *ierr)
{
    shim_fret(ierr, shim_finalize());
}
SHIM_FORTRAN(f_finalize, mpi_finalize, MPI_FINALIZE, ompi_finalize_f, (MPI_Fint *));

/* The communicator constructors, so that a Fortran program's communicators
 * share their parent's context too. */
static void shim_fcomm(MPI_Fint *newcomm, MPI_Comm c, int rc, MPI_Fint *ierr)
{
    if (rc == MPI_SUCCESS)
        *newcomm = PMPI_Comm_c2f(c);
    shim_fret(ierr, rc);
}

static void f_comm_split(MPI_Fint *comm, MPI_Fint *color, MPI_Fint *key, MPI_Fint *newcomm,
                         MPI_Fint *ierr)
{
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPI_Comm_split(PMPI_Comm_f2c(*comm), (int)*color, (int)*key, &c);

    shim_fcomm(newcomm, c, rc, ierr);
}
SHIM_FORTRAN(f_comm_split, mpi_comm_split, MPI_COMM_SPLIT, ompi_comm_split_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_comm_split_type(MPI_Fint *comm, MPI_Fint *type, MPI_Fint *key, MPI_Fint *info,
                              MPI_Fint *newcomm, MPI_Fint *ierr)
{
    MPI_Comm c = MPI_COMM_NULL;
    int rc =
        MPI_Comm_split_type(PMPI_Comm_f2c(*comm), (int)*type, (int)*key, PMPI_Info_f2c(*info), &c);

    shim_fcomm(newcomm, c, rc, ierr);
}
SHIM_FORTRAN(f_comm_split_type, mpi_comm_split_type, MPI_COMM_SPLIT_TYPE, ompi_comm_split_type_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_comm_create(MPI_Fint *comm, MPI_Fint *group, MPI_Fint *newcomm, MPI_Fint *ierr)
{
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPI_Comm_create(PMPI_Comm_f2c(*comm), PMPI_Group_f2c(*group), &c);

    shim_fcomm(newcomm, c, rc, ierr);
}
SHIM_FORTRAN(f_comm_create, mpi_comm_create, MPI_COMM_CREATE, ompi_comm_create_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_comm_dup(MPI_Fint *comm, MPI_Fint *newcomm, MPI_Fint *ierr)
{
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(PMPI_Comm_f2c(*comm), &c);

    shim_fcomm(newcomm, c, rc, ierr);
}
SHIM_FORTRAN(f_comm_dup, mpi_comm_dup, MPI_COMM_DUP, ompi_comm_dup_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_comm_dup_with_info(MPI_Fint *comm, MPI_Fint *info, MPI_Fint *newcomm, MPI_Fint *ierr)
{
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPI_Comm_dup_with_info(PMPI_Comm_f2c(*comm), PMPI_Info_f2c(*info), &c);

    shim_fcomm(newcomm, c, rc, ierr);
}
SHIM_FORTRAN(f_comm_dup_with_info, mpi_comm_dup_with_info, MPI_COMM_DUP_WITH_INFO,
             ompi_comm_dup_with_info_f, (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));
