/*
 * libarcoll_mpi.so: MPI_Alltoall and MPI_Allgather of unmodified MPI programs
 * on arcoll, through the MPI profiling interface (docs/embedding.md, "The
 * PMPI shim").
 *
 * A communicator gets an arcoll context of its own at its first
 * MPI_Alltoall/MPI_Allgather: contexts bootstrap through callbacks, and
 * arcoll_team_create is collective over a whole context, which a
 * communicator's members alone could not satisfy. The context's bootstrap
 * runs PMPI collectives on a private copy of the communicator, so its
 * traffic never meets the application's. The context hangs on the
 * communicator as an attribute whose delete callback frees it, so it goes
 * with MPI_Comm_free; MPI_Finalize frees the remaining ones, newest first
 * (the reverse of an order every process agrees on, since creations are
 * collective), before PMPI_Finalize.
 *
 * Whether a communicator uses arcoll is decided once, at that first call, by
 * facts all its ranks share (intracommunicator, thread level, arcoll_init
 * succeeded everywhere). Each call then goes to arcoll when its buffers are
 * plain bytes: not MPI_IN_PLACE, predefined datatypes whose size equals their
 * extent, send bytes equal to receive bytes. Otherwise it goes to PMPI, with
 * a debug line (ARCOLL_LOG=debug).
 */
#include <limits.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arcoll.h"
#include "arcoll_mpi.h"

enum { SHIM_LOG_NONE, SHIM_LOG_ERROR, SHIM_LOG_WARN, SHIM_LOG_INFO, SHIM_LOG_DEBUG };
enum { SHIM_UNKNOWN = 0, SHIM_ON = 1, SHIM_OFF = -1 };

/* One communicator's state, its attribute value. */
typedef struct shim_comm {
    struct shim_comm *next, *prev; /* live list, newest first */
    MPI_Comm comm;                 /* the application's */
    MPI_Comm oob;                  /* private copy (same group) for the bootstrap */
    arcoll_context_t ctx;          /* NULL: every call on comm goes to PMPI */
    arcoll_team_t team;
} shim_comm_t;

static int shim_state = SHIM_UNKNOWN;
static int shim_keyval = MPI_KEYVAL_INVALID;
static int shim_level = SHIM_LOG_WARN;
static int shim_wrank = -1; /* rank in MPI_COMM_WORLD, for log lines */
static int shim_led;        /* communicators this process was rank 0 of (profile names) */
static int shim_busy;       /* inside a shim call: MPI calls from within go straight through */
static shim_comm_t *shim_live;
static unsigned shim_nlive;
/* The attribute of a communicator this rank had no memory for: it uses PMPI,
 * as the others learn from the first allreduce of shim_comm_create. */
static shim_comm_t shim_comm_nomem;
static arcoll_mpi_stats_t shim_stats;

/* Named datatypes known to be plain bytes. Only named ones are cached: their
 * handles are never freed, so an entry cannot come to mean another type. */
#define SHIM_TYPE_CACHE 8
static MPI_Datatype shim_types[SHIM_TYPE_CACHE];
static size_t shim_type_size[SHIM_TYPE_CACHE];
static unsigned shim_ntypes;

static void shim_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void shim_log(int level, const char *fmt, ...)
{
    static const char *const names[] = {"", "error", "warning", "info", "debug"};
    char msg[512];
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
    const shim_comm_t *c = user;

    if (len > INT_MAX)
        return -1;
    return PMPI_Allgather(sbuf, (int)len, MPI_BYTE, rbuf, (int)len, MPI_BYTE, c->oob) == MPI_SUCCESS
               ? 0
               : -1;
}

static int shim_oob_barrier(void *user)
{
    const shim_comm_t *c = user;

    return PMPI_Barrier(c->oob) == MPI_SUCCESS ? 0 : -1;
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

/* Collective over the communicator: the attribute's delete callback. */
static void shim_comm_destroy(shim_comm_t *c)
{
    int rc;

    shim_comm_unlink(c);
    if (c->ctx != NULL) {
        rc = arcoll_finalize(c->ctx);
        if (rc != ARCOLL_OK)
            shim_log(SHIM_LOG_WARN, "arcoll_finalize: %s: %s", arcoll_strerror(rc),
                     arcoll_last_error(NULL));
        shim_stats.comms_freed++;
    }
    if (c->oob != MPI_COMM_NULL)
        PMPI_Comm_free(&c->oob);
    free(c);
}

static int shim_comm_delete(MPI_Comm comm, int keyval, void *val, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)extra;
    if (val == &shim_comm_nomem)
        return MPI_SUCCESS;
    shim_busy++;
    shim_comm_destroy(val);
    shim_busy--;
    return MPI_SUCCESS;
}

/* Once per process, at the first collective: thread level, keyval, log. */
static void shim_setup(void)
{
    int level = MPI_THREAD_SINGLE;

    shim_level = shim_level_parse();
    PMPI_Comm_rank(MPI_COMM_WORLD, &shim_wrank);
    shim_state = SHIM_OFF;
    if (PMPI_Query_thread(&level) != MPI_SUCCESS || level == MPI_THREAD_MULTIPLE) {
        shim_log(SHIM_LOG_DEBUG, "MPI_THREAD_MULTIPLE: arcoll is not thread safe, every "
                                 "collective goes to PMPI");
        return;
    }
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, shim_comm_delete, &shim_keyval, NULL) !=
        MPI_SUCCESS) {
        shim_log(SHIM_LOG_WARN, "MPI_Comm_create_keyval failed: every collective goes to PMPI");
        return;
    }
    shim_state = SHIM_ON;
}

/* ARCOLL_PROFILE, when set: MPI_COMM_WORLD profiles into FILE itself, any
 * other communicator into FILE.comm<L>_<n> (L: world rank of its rank 0, n:
 * how many communicators L had led before), a name all its ranks agree on and
 * no other communicator of the job has. Collective over c->oob. */
static int shim_profile_name(shim_comm_t *c, char *name, size_t len)
{
    const char *base = getenv("ARCOLL_PROFILE");
    int me, id[2] = {shim_wrank, shim_led};

    name[0] = '\0';
    PMPI_Comm_rank(c->oob, &me);
    if (me == 0)
        shim_led++;
    if (PMPI_Bcast(id, 2, MPI_INT, 0, c->oob) != MPI_SUCCESS)
        return -1;
    if (base == NULL || base[0] == '\0' || strcmp(base, "off") == 0 || c->comm == MPI_COMM_WORLD)
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

/* Collective over comm (the first alltoall/allgather on it): copy it,
 * create the context, and agree that every rank has one; a record without a
 * context sends the communicator to PMPI for good. NULL only when the
 * attribute could not be set. */
static shim_comm_t *shim_comm_create(MPI_Comm comm)
{
    shim_comm_t *c = calloc(1, sizeof(*c));
    arcoll_oob_t oob = {0};
    char prof[1024];
    const char *cfg[3] = {NULL, NULL, NULL};
    int inter = 0, ok, all = 0, rc = ARCOLL_OK;

    if (c != NULL)
        c->oob = MPI_COMM_NULL;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) {
        shim_log(SHIM_LOG_DEBUG, "intercommunicator: its collectives go to PMPI");
        goto decided; /* no collective call: the two groups may differ */
    }
    /* All ranks learn whether all have the memory before any other step. */
    ok = c != NULL;
    if (PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS || !all)
        goto decided;
    /* A split, not a dup: a dup would run the application's attribute copy
     * callbacks on our communicator. */
    PMPI_Comm_rank(comm, &oob.rank);
    if (PMPI_Comm_split(comm, 0, oob.rank, &c->oob) != MPI_SUCCESS) {
        c->oob = MPI_COMM_NULL;
        all = 0;
        goto decided;
    }
    PMPI_Comm_set_errhandler(c->oob, MPI_ERRORS_RETURN);
    c->comm = comm;
    if (shim_profile_name(c, prof, sizeof(prof)) == 0 && prof[0] != '\0') {
        cfg[0] = "ARCOLL_PROFILE";
        cfg[1] = prof;
    }
    oob.allgather = shim_oob_allgather;
    oob.barrier = shim_oob_barrier;
    oob.user = c;
    PMPI_Comm_size(comm, &oob.size);
    rc = arcoll_init_config(&oob, cfg, &c->ctx);
    ok = rc == ARCOLL_OK;
    if (PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->oob) != MPI_SUCCESS)
        all = 0;
    if (!all && c->ctx != NULL) {
        /* Finalizing is collective and some rank has no context: keep it
         * unused; the process's exit releases it. */
        shim_log(SHIM_LOG_WARN,
                 "arcoll_init failed on another rank: this communicator "
                 "(%d ranks) uses PMPI",
                 oob.size);
        c->ctx = NULL;
    } else if (!ok) {
        shim_log(SHIM_LOG_WARN, "arcoll_init: %s: %s; this communicator (%d ranks) uses PMPI",
                 arcoll_strerror(rc), arcoll_last_error(NULL), oob.size);
    }
    if (c->ctx != NULL)
        c->team = arcoll_team_world(c->ctx);

decided:
    if (c == NULL) {
        shim_log(SHIM_LOG_WARN, "out of memory: a communicator uses PMPI");
        PMPI_Comm_set_attr(comm, shim_keyval, &shim_comm_nomem);
        return &shim_comm_nomem;
    }
    c->comm = comm;
    if (PMPI_Comm_set_attr(comm, shim_keyval, c) != MPI_SUCCESS) {
        /* Without the attribute it would be created again: stop using arcoll. */
        shim_log(SHIM_LOG_WARN, "MPI_Comm_set_attr failed: every collective goes to PMPI");
        shim_state = SHIM_OFF;
        shim_comm_destroy(c);
        return NULL;
    }
    c->next = shim_live;
    if (shim_live != NULL)
        shim_live->prev = c;
    shim_live = c;
    shim_nlive++;
    if (c->ctx != NULL)
        shim_stats.comms_arcoll++;
    else
        shim_stats.comms_mpi++;
    return c;
}

/* The communicator's context, created at its first call; NULL: use PMPI. */
static arcoll_team_t shim_comm_team(MPI_Comm comm)
{
    shim_comm_t *c = NULL;
    int flag = 0;

    if (shim_state == SHIM_UNKNOWN)
        shim_setup();
    if (shim_state != SHIM_ON || comm == MPI_COMM_NULL)
        return NULL;
    if (PMPI_Comm_get_attr(comm, shim_keyval, &c, &flag) != MPI_SUCCESS)
        return NULL;
    if (!flag)
        c = shim_comm_create(comm);
    return c != NULL ? c->team : NULL;
}

/* Size of a datatype that is plain bytes (named, no gaps); 0 if it is not. */
static size_t shim_type_bytes(MPI_Datatype t)
{
    int ni, na, nd, comb, size;
    MPI_Aint lb, extent, tlb, textent;

    for (unsigned i = 0; i < shim_ntypes; i++)
        if (shim_types[i] == t)
            return shim_type_size[i];
    if (t == MPI_DATATYPE_NULL || PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS ||
        comb != MPI_COMBINER_NAMED || PMPI_Type_size(t, &size) != MPI_SUCCESS ||
        PMPI_Type_get_extent(t, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(t, &tlb, &textent) != MPI_SUCCESS)
        return 0;
    if (size <= 0 || lb != 0 || tlb != 0 || extent != size || textent != size)
        return 0;
    if (shim_ntypes < SHIM_TYPE_CACHE) {
        shim_types[shim_ntypes] = t;
        shim_type_size[shim_ntypes++] = (size_t)size;
    }
    return (size_t)size;
}

/* Why a call cannot go to arcoll, or NULL; *bytes: per block. */
static const char *shim_call_check(const void *sbuf, int scount, MPI_Datatype stype, int rcount,
                                   MPI_Datatype rtype, size_t *bytes)
{
    size_t ssize, rsize;

    if (sbuf == MPI_IN_PLACE)
        return "MPI_IN_PLACE";
    if (scount < 0 || rcount < 0)
        return "negative count";
    ssize = shim_type_bytes(stype);
    rsize = shim_type_bytes(rtype);
    if (ssize == 0 || rsize == 0)
        return "derived or non-contiguous datatype";
    *bytes = (size_t)scount * ssize;
    if (*bytes != (size_t)rcount * rsize)
        return "send and receive sizes differ";
    if (*bytes == 0)
        return "zero bytes";
    return NULL;
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

/* The team for this call, or NULL (with the reason logged) for PMPI. */
static arcoll_team_t shim_route(const char *what, const void *sbuf, int scount, MPI_Datatype stype,
                                int rcount, MPI_Datatype rtype, MPI_Comm comm, size_t *bytes)
{
    arcoll_team_t team;
    const char *why;

    if (shim_busy)
        return NULL;
    shim_busy++;
    team = shim_comm_team(comm);
    shim_busy--;
    if (team == NULL)
        return NULL;
    why = shim_call_check(sbuf, scount, stype, rcount, rtype, bytes);
    if (why != NULL) {
        shim_log(SHIM_LOG_DEBUG, "%s (%d ranks): %s: to PMPI", what, arcoll_team_size(team), why);
        return NULL;
    }
    return team;
}

enum { SHIM_ALLTOALL, SHIM_ALLGATHER };

/* Both collectives; site: the application's call, for ARCOLL_PROFILE. */
static int shim_coll(int kind, const void *site, const void *sbuf, int scount, MPI_Datatype stype,
                     void *rbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm)
{
    const char *what = kind == SHIM_ALLTOALL ? "MPI_Alltoall" : "MPI_Allgather";
    size_t bytes = 0;
    arcoll_team_t team = shim_route(what, sbuf, scount, stype, rcount, rtype, comm, &bytes);
    int rc;

    if (team == NULL) {
        if (kind == SHIM_ALLTOALL) {
            shim_stats.alltoall_mpi++;
            return PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm);
        }
        shim_stats.allgather_mpi++;
        return PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
    }
    arcoll_call_site(site);
    if (kind == SHIM_ALLTOALL) {
        shim_stats.alltoall_arcoll++;
        rc = arcoll_alltoall(team, sbuf, rbuf, bytes);
    } else {
        shim_stats.allgather_arcoll++;
        rc = arcoll_allgather(team, sbuf, rbuf, bytes);
    }
    return shim_error(comm, rc, what);
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, MPI_Comm comm)
{
    return shim_coll(SHIM_ALLTOALL, __builtin_return_address(0), sbuf, scount, stype, rbuf, rcount,
                     rtype, comm);
}

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm)
{
    return shim_coll(SHIM_ALLGATHER, __builtin_return_address(0), sbuf, scount, stype, rbuf, rcount,
                     rtype, comm);
}

/* Free every context still alive, newest first, while MPI still works. */
int MPI_Finalize(void)
{
    if (shim_state == SHIM_ON) {
        shim_busy++;
        while (shim_live != NULL) {
            shim_comm_t *c = shim_live;
            unsigned n = shim_nlive;
            /* The delete callback finalizes, unlinks and frees c; should MPI
             * refuse, do it here. */
            if (PMPI_Comm_delete_attr(c->comm, shim_keyval) != MPI_SUCCESS || shim_nlive == n)
                shim_comm_destroy(c);
        }
        PMPI_Comm_free_keyval(&shim_keyval);
        shim_busy--;
        shim_state = SHIM_OFF;
        shim_log(SHIM_LOG_INFO,
                 "alltoall %llu on arcoll, %llu on MPI; allgather %llu on arcoll, %llu on MPI; "
                 "%llu communicators on arcoll, %llu on MPI; %llu errors",
                 shim_stats.alltoall_arcoll, shim_stats.alltoall_mpi, shim_stats.allgather_arcoll,
                 shim_stats.allgather_mpi, shim_stats.comms_arcoll, shim_stats.comms_mpi,
                 shim_stats.errors);
    }
    return PMPI_Finalize();
}

int arcoll_mpi_stats(arcoll_mpi_stats_t *out)
{
    *out = shim_stats;
    return 0;
}
