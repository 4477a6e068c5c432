/*
 * The decision layer that the PMPI shim (arcoll_pmpi.c) and the Open MPI
 * coll component (src/mpi/ompi/coll_arcoll.c) share: contexts over a private
 * copy of a communicator, the per-communicator record with its serve-rule
 * cache and the agreement after a team failure, datatype layout and packing,
 * the (datatype, op) mapping, and the plan, start and finish of one
 * collective as arcoll runs it. What each embedding does differently (how a
 * record is found, requests, the MPI entry points) stays in its own file.
 * The rules themselves are described at the top of arcoll_pmpi.c and in
 * docs/embedding.md.
 */
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arcoll_mpi_common.h"
#include "preload/heap_preload.h"

const char *const amc_names[AMC_NKINDS] = {"MPI_Alltoall",
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
int amc_level = AMC_LOG_WARN;
int amc_wrank = -1;    /* rank in MPI_COMM_WORLD, for log lines */
int amc_led;           /* communicators this process was rank 0 of (profile names) */
int amc_split_env = 1; /* ARCOLL_MPI_SPLIT is not off */
int amc_fault;         /* ARCOLL_MPI_FAULT (tests): AMC_FAULT_* */
int amc_finalizing;    /* in MPI_Finalize: contexts go whole, teams with them */
amc_ctx_t *amc_ctxs;
amc_comm_t *amc_live;
unsigned amc_nlive;
/* The attribute of a communicator this rank had no memory for: it uses PMPI,
 * as the others learn from the first allreduce of the record's creation. */
amc_comm_t amc_comm_nomem;
arcoll_mpi_stats_t amc_stats;
unsigned long long amc_served[AMC_NKINDS], amc_passed[AMC_NKINDS];
/* arcoll_context_counters of the contexts freed so far: the report at MPI_Finalize. */
arcoll_counters_t amc_counters;
/* RC QPs connected, summed over the contexts at their finalize: the summary
 * line shows that a job ran over verbs (0 on shared memory). */
static unsigned long long amc_qps;
const char *amc_log_name = "arcoll-mpi";
static const char *const amc_no_config[1] = {NULL};
const char *const *amc_config = amc_no_config;
void (*amc_progress_hook)(void *arg);
int amc_call_errhandler = 1;
_Thread_local unsigned amc_inlib;
_Atomic int amc_mt;
/* The lock: tickets, so that a thread that drops it in arcoll's hook and
 * takes it back at once cannot starve one that waits for it. */
static pthread_mutex_t amc_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t amc_cv = PTHREAD_COND_INITIALIZER;
static unsigned long amc_next, amc_now;
static _Thread_local unsigned amc_depth; /* this thread's holds */
#define AMC_TYPE_CACHE 16
static MPI_Datatype amc_types[AMC_TYPE_CACHE];
static amc_type_t amc_type_info[AMC_TYPE_CACHE];
static unsigned amc_ntypes;
static void amc_acquire(void)
{
    pthread_mutex_lock(&amc_mu);
    unsigned long me = amc_next++;
    while (amc_now != me)
        pthread_cond_wait(&amc_cv, &amc_mu);
    pthread_mutex_unlock(&amc_mu);
}

static void amc_release(void)
{
    pthread_mutex_lock(&amc_mu);
    amc_now++;
    pthread_cond_broadcast(&amc_cv);
    pthread_mutex_unlock(&amc_mu);
}

void amc_lock(void)
{
    if (amc_mt && amc_depth++ == 0)
        amc_acquire();
}

/* Also after a section entered before amc_mt was set: depth 0, nothing. */
void amc_unlock(void)
{
    if (amc_depth > 0 && --amc_depth == 0)
        amc_release();
}

int amc_trylock(void)
{
    int ok;

    if (!amc_mt)
        return 1;
    if (amc_depth > 0)
        return 0;
    pthread_mutex_lock(&amc_mu);
    ok = amc_now == amc_next;
    if (ok)
        amc_next++;
    pthread_mutex_unlock(&amc_mu);
    if (ok)
        amc_depth = 1;
    return ok;
}

unsigned amc_drop(void)
{
    unsigned d = amc_depth;

    if (d > 0) {
        amc_depth = 0;
        amc_release();
    }
    return d;
}

void amc_retake(unsigned depth)
{
    if (depth > 0) {
        amc_acquire();
        amc_depth = depth;
    }
}

void amc_log(int level, const char *fmt, ...)
{
    static const char *const names[] = {"", "error", "warning", "info", "debug"};
    char msg[2048];
    va_list ap;

    if (level > amc_level)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s[%d] %s: %s\n", amc_log_name, amc_wrank, names[level], msg);
}

/* ARCOLL_LOG as the library reads it; the library reports a bad value. */
int amc_level_parse(void)
{
    static const char *const names[] = {"none", "error", "warn", "info", "debug"};
    const char *s = getenv("ARCOLL_LOG");

    for (int i = 0; s != NULL && i <= AMC_LOG_DEBUG; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return AMC_LOG_WARN;
}

static int amc_oob_allgather(const void *sbuf, void *rbuf, size_t len, void *user)
{
    const amc_ctx_t *x = user;

    int rc;

    if (len > INT_MAX)
        return -1;
    amc_inlib++;
    AMC_UNLOCKED(rc = PMPI_Allgather(sbuf, (int)len, MPI_BYTE, rbuf, (int)len, MPI_BYTE, x->oob) ==
                              MPI_SUCCESS
                          ? 0
                          : -1);
    amc_inlib--;
    return rc;
}

static int amc_oob_barrier(void *user)
{
    const amc_ctx_t *x = user;

    int rc;

    amc_inlib++;
    AMC_UNLOCKED(rc = PMPI_Barrier(x->oob) == MPI_SUCCESS ? 0 : -1);
    amc_inlib--;
    return rc;
}

void amc_comm_link(amc_comm_t *c)
{
    c->prev = NULL;
    c->next = amc_live;
    if (amc_live != NULL)
        amc_live->prev = c;
    amc_live = c;
    amc_nlive++;
}

void amc_comm_unlink(amc_comm_t *c)
{
    if (c->prev == NULL && amc_live != c)
        return; /* never linked */
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        amc_live = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    c->next = c->prev = NULL;
    amc_nlive--;
}

/* Collective over the context's ranks: finalize it and forget it. */
void amc_ctx_free(amc_ctx_t *x)
{
    arcoll_resources_t res;
    arcoll_counters_t c;
    int rc;

    if (x->prev != NULL)
        x->prev->next = x->next;
    else
        amc_ctxs = x->next;
    if (x->next != NULL)
        x->next->prev = x->prev;
    if (arcoll_context_counters(x->ctx, &c, sizeof(c)) == ARCOLL_OK) {
        amc_counters.sh_co_calls += c.sh_co_calls;
        amc_counters.sh_co_fallbacks += c.sh_co_fallbacks;
        amc_counters.zcopy_heap_calls += c.zcopy_heap_calls;
        amc_counters.zcopy_reg_calls += c.zcopy_reg_calls;
    }
    if (arcoll_context_resources(x->ctx, &res) == ARCOLL_OK && res.qps_ready > 0)
        amc_qps += (unsigned long long)res.qps_ready;
    rc = arcoll_finalize(x->ctx);
    if (rc != ARCOLL_OK)
        amc_log(AMC_LOG_WARN, "arcoll_finalize: %s: %s", arcoll_strerror(rc),
                arcoll_last_error(NULL));
    if (x->oob != MPI_COMM_NULL)
        AMC_UNLOCKED(PMPI_Comm_free(&x->oob));
    free(x);
    amc_stats.contexts_live--;
}

/*
 * Collective over c's communicator (in its MPI_Comm_free): free its own
 * team, then drop its use of the context. The context goes only where the
 * communicator spans all of its ranks, so that all of them take part, and
 * only once none uses it (MAX of the users left): on other frees the ranks
 * may drop their last use at different times, and the context waits for a
 * later whole free or MPI_Finalize.
 */
void amc_comm_release(amc_comm_t *c)
{
    amc_ctx_t *x = c->sc;
    unsigned left, most = 1;
    int rc;

    if (c->split) {
        rc = arcoll_team_free(c->team);
        if (rc != ARCOLL_OK)
            amc_log(AMC_LOG_WARN, "arcoll_team_free: %s: %s", arcoll_strerror(rc),
                    arcoll_last_error(NULL));
        amc_stats.teams_freed++;
    }
    left = --x->users;
    if (c->size != x->size)
        return;
    AMC_UNLOCKED(rc = PMPI_Allreduce(&left, &most, 1, MPI_UNSIGNED, MPI_MAX, x->oob));
    if (rc == MPI_SUCCESS && most == 0) {
        amc_ctx_free(x);
        amc_stats.contexts_freed++;
    }
}

void amc_comm_destroy(amc_comm_t *c, int release)
{
    amc_comm_unlink(c);
    if (c->sends != NULL) {
        /* Its word, sent before an agreement that never came: eight bytes,
         * sent eagerly; the buffer goes with c. */
        AMC_UNLOCKED(PMPI_Waitall(c->size, c->sends, MPI_STATUSES_IGNORE));
        free(c->sends);
    }
    if (c->agree != MPI_COMM_NULL)
        AMC_UNLOCKED(PMPI_Comm_free(&c->agree));
    if (c->sc != NULL) {
        if (release)
            amc_comm_release(c);
        amc_stats.comms_freed++;
    }
    free(c);
}

/* ARCOLL_PROFILE, when set: MPI_COMM_WORLD profiles into FILE itself, any
 * other root communicator into FILE.comm<L>_<n> (L: world rank of its rank
 * 0, n: how many communicators L had led before), a name all its ranks agree
 * on and no other communicator of the job has. Collective over oob. */
static int amc_profile_name(MPI_Comm comm, MPI_Comm oob, char *name, size_t len)
{
    const char *base = getenv("ARCOLL_PROFILE");
    int me, rc, id[2] = {amc_wrank, amc_led};

    name[0] = '\0';
    PMPI_Comm_rank(oob, &me);
    if (me == 0)
        amc_led++;
    AMC_UNLOCKED(rc = PMPI_Bcast(id, 2, MPI_INT, 0, oob));
    if (rc != MPI_SUCCESS)
        return -1;
    if (base == NULL || base[0] == '\0' || strcmp(base, "off") == 0 || comm == MPI_COMM_WORLD)
        return 0;
    if ((size_t)snprintf(name, len, "%s.comm%d_%d", base, id[0], id[1]) >= len) {
        amc_log(AMC_LOG_WARN, "ARCOLL_PROFILE=%s: too long for a per-communicator name", base);
        name[0] = '\0';
    } else if (me == 0) {
        amc_log(AMC_LOG_INFO, "a communicator led by world rank %d profiles into %s", id[0], name);
    }
    return 0;
}
/* Collective over x->oob (the private copy of comm, which has n ranks):
 * create the context and agree that every rank has one. -1 when some rank
 * failed: then x and its copy are freed. */
int amc_ctx_create(amc_ctx_t *x, MPI_Comm comm, int n)
{
    arcoll_oob_t oob = {0};
    char prof[1024];
    const char *cfg[2 + AMC_CONFIG_MAX + 1] = {NULL};
    int ok[2], all[2] = {0, 0}, rc, init_rc, k = 0;

    PMPI_Comm_rank(x->oob, &oob.rank);
    if (amc_profile_name(comm, x->oob, prof, sizeof(prof)) == 0 && prof[0] != '\0') {
        cfg[k++] = "ARCOLL_PROFILE";
        cfg[k++] = prof;
    }
    if (amc_mt) {
        /* The profiler's exchanges in arcoll_init run before the progress
         * hook is set, and one at finalize sleeps without it: they would
         * wait holding the lock (docs/embedding.md, "Threads"). */
        const char *p = getenv("ARCOLL_PROFILE");
        static int said;
        if (p != NULL && p[0] != '\0' && strcmp(p, "off") != 0 && said++ == 0)
            amc_log(AMC_LOG_WARN, "MPI_THREAD_MULTIPLE: ARCOLL_PROFILE is off");
        k = 0;
        cfg[k++] = "ARCOLL_PROFILE";
        cfg[k++] = "off";
    }
    /* The embedding's own settings (the component's MCA variables). */
    for (int i = 0; amc_config[i] != NULL && amc_config[i + 1] != NULL && i < AMC_CONFIG_MAX;
         i += 2) {
        cfg[k++] = amc_config[i];
        cfg[k++] = amc_config[i + 1];
    }
    oob.allgather = amc_oob_allgather;
    oob.barrier = amc_oob_barrier;
    oob.user = x;
    oob.size = n;
    rc = arcoll_init_config(&oob, cfg, &x->ctx);
    init_rc = rc;
    /* With it, whether every rank lets its communicators split teams: not
     * at MPI_THREAD_MULTIPLE, where two threads' splits could reach the
     * shared parent team in different orders on different ranks, and where
     * a thread's wait on one team of a context skips the hook while another
     * thread is in it (the context's in_hook): a context per communicator. */
    ok[0] = rc == ARCOLL_OK;
    ok[1] = amc_split_env && !amc_mt;
    AMC_UNLOCKED(rc = PMPI_Allreduce(ok, all, 2, MPI_INT, MPI_MIN, x->oob));
    if (rc != MPI_SUCCESS)
        all[0] = 0;
    if (!all[0]) {
        if (ok[0])
            /* Finalizing is collective and some rank has no context: keep it
             * unused; the process's exit releases it. */
            amc_log(AMC_LOG_WARN,
                    "arcoll_init failed on another rank: this communicator "
                    "(%d ranks) uses PMPI",
                    n);
        else
            amc_log(AMC_LOG_WARN, "arcoll_init: %s: %s; this communicator (%d ranks) uses PMPI",
                    arcoll_strerror(init_rc), arcoll_last_error(NULL), n);
        AMC_UNLOCKED(PMPI_Comm_free(&x->oob));
        free(x);
        return -1;
    }
    x->size = n;
    x->split = all[1];
    if (amc_progress_hook != NULL)
        arcoll_context_progress_hook(x->ctx, amc_progress_hook, x);
    x->next = amc_ctxs;
    if (amc_ctxs != NULL)
        amc_ctxs->prev = x;
    amc_ctxs = x;
    amc_stats.contexts++;
    amc_stats.contexts_live++;
    return 0;
}

/* A private copy of comm (collective over it): a split, not a dup, which
 * would run the application's attribute copy callbacks on it. */
int amc_copy(MPI_Comm comm, MPI_Comm *out)
{
    int me = 0, rc;

    PMPI_Comm_rank(comm, &me);
    AMC_UNLOCKED(rc = PMPI_Comm_split(comm, 0, me, out));
    if (rc != MPI_SUCCESS) {
        *out = MPI_COMM_NULL;
        return -1;
    }
    PMPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
    return 0;
}

/* The datatype's layout; -1 for an invalid handle. */
int amc_type_get(MPI_Datatype t, amc_type_t *ti)
{
    int ni, na, nd, comb, size;
    MPI_Aint lb, textent;

    for (unsigned i = 0; i < amc_ntypes; i++)
        if (amc_types[i] == t) {
            *ti = amc_type_info[i];
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
    if (amc_ntypes < AMC_TYPE_CACHE &&
        PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) == MPI_SUCCESS &&
        comb == MPI_COMBINER_NAMED) {
        amc_types[amc_ntypes] = t;
        amc_type_info[amc_ntypes++] = *ti;
    }
    return 0;
}

/* buf + off, also for MPI_BOTTOM (NULL) with absolute displacements. */
static char *amc_at(const void *buf, MPI_Aint off)
{
    return (char *)(uintptr_t)((uintptr_t)buf + (uintptr_t)off);
}

/* count elements of t at buf, packed at byte off of out (len bytes long). */
static int amc_pack(const void *buf, int count, MPI_Datatype t, size_t size, char *out, size_t len,
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

/* Reduction datatypes and ops that arcoll has: by size, for C and Fortran.
 * The last predefined type found is remembered (they are never freed): a
 * program's reductions repeat one type, and the table scan with its
 * PMPI_Type_size was 4% of a small MPI_Allreduce passed through the shim. */
static int amc_dtype_scan(MPI_Datatype t, arcoll_dtype_t *out);
int amc_dtype(MPI_Datatype t, arcoll_dtype_t *out)
{
    static MPI_Datatype last = MPI_DATATYPE_NULL;
    static arcoll_dtype_t last_dt;

    if (t != MPI_DATATYPE_NULL && t == last) {
        *out = last_dt;
        return 0;
    }
    if (amc_dtype_scan(t, out) != 0)
        return -1;
    last_dt = *out;
    last = t;
    return 0;
}

static int amc_dtype_scan(MPI_Datatype t, arcoll_dtype_t *out)
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

int amc_op(MPI_Op op, arcoll_dtype_t dt, arcoll_op_t *out)
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
int amc_error(MPI_Comm comm, int rc, const char *what)
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
    amc_stats.errors++;
    amc_log(AMC_LOG_ERROR, "%s on arcoll: %s: %s", what, arcoll_strerror(rc),
            arcoll_last_error(NULL));
    if (amc_call_errhandler)
        PMPI_Comm_call_errhandler(comm, code);
    return code;
}

/* An MPI error this rank found by itself (bad argument, no memory). */
int amc_raise(MPI_Comm comm, int code, const char *what, const char *why)
{
    amc_stats.errors++;
    amc_log(AMC_LOG_ERROR, "%s: %s", what, why);
    if (amc_call_errhandler)
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
enum { AMC_TAG_WORD = 1 };

/* The end of the agreement: every other rank's word (all sent, or being
 * sent without waiting), the highest wins. */
void amc_agree(amc_comm_t *c)
{
    unsigned long long top = c->word, theirs;
    char name[MPI_MAX_OBJECT_NAME] = "";
    int me = 0, n = 0, len = 0, ok = 1;
    MPI_Request *sends = c->sends;
    unsigned held;

    if (c->agree == MPI_COMM_NULL)
        return; /* stays SEEN: every later call fails, as arcoll's would */
    PMPI_Comm_rank(c->agree, &me);
    PMPI_Comm_size(c->agree, &n);
    amc_log(AMC_LOG_DEBUG, "a failed team: waiting for the other ranks' word at call %llu",
            c->calls);
    /* Its sends are its own now: at MPI_THREAD_MULTIPLE another thread that
     * completes a request of c may be sending its word while the lock is
     * dropped; those it hands over later go with c (amc_comm_destroy). */
    c->sends = NULL;
    held = amc_drop(); /* c's thread alone agrees (in a call or a wait on c) */
    for (int r = 0; r < n; r++) {
        if (r == me)
            continue;
        if (PMPI_Recv(&theirs, 1, MPI_UNSIGNED_LONG_LONG, r, AMC_TAG_WORD, c->agree,
                      MPI_STATUS_IGNORE) != MPI_SUCCESS)
            ok = 0;
        else if (theirs > top)
            top = theirs;
    }
    if (sends != NULL)
        PMPI_Waitall(n, sends, MPI_STATUSES_IGNORE);
    amc_retake(held);
    free(sends);
    c->fail = AMC_TEAM_AGREED;
    c->from = ok ? top : ULLONG_MAX;
    amc_stats.comms_failed++;
    PMPI_Comm_get_name(c->comm, name, &len);
    amc_log(me == 0 ? AMC_LOG_WARN : AMC_LOG_INFO,
            "arcoll team of communicator %s (%d ranks) failed (%s); its collectives go to MPI "
            "from now on",
            len > 0 ? name : "<unnamed>", n, c->reason);
}

/* Whether every other rank's word is here: probed for up to 10 ms (a
 * message may need some progress to be seen; only after a failure). */
static int amc_words_here(amc_comm_t *c)
{
    int me = 0, n = 0, flag, here;

    PMPI_Comm_rank(c->agree, &me);
    PMPI_Comm_size(c->agree, &n);
    for (double end = PMPI_Wtime() + 0.01;;) {
        here = 0;
        for (int r = 0; r < n; r++) {
            flag = 0;
            if (r != me &&
                (PMPI_Iprobe(r, AMC_TAG_WORD, c->agree, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS ||
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
void amc_fail_seen(amc_comm_t *c, const char *reason, int in_call)
{
    int me = 0, n = 0, now;
    MPI_Request *sends;
    unsigned held;

    if (c == NULL || c == &amc_comm_nomem || c->fail != AMC_TEAM_OK)
        return;
    c->fail = AMC_TEAM_SEEN;
    snprintf(c->reason, sizeof(c->reason), "%s", reason);
    if (c->agree == MPI_COMM_NULL)
        return;
    c->word = c->calls + 1;
    PMPI_Comm_rank(c->agree, &me);
    PMPI_Comm_size(c->agree, &n);
    sends = malloc((size_t)n * sizeof(*sends));
    /* MPI's progress (a probe runs it) may wait in a thread that waits for
     * this lock; the sends go into c once they are all made. */
    held = amc_drop();
    for (int r = 0; r < n; r++) {
        if (sends != NULL)
            sends[r] = MPI_REQUEST_NULL;
        if (r == me)
            continue;
        if (sends != NULL)
            PMPI_Isend(&c->word, 1, MPI_UNSIGNED_LONG_LONG, r, AMC_TAG_WORD, c->agree, &sends[r]);
        else /* eight bytes: sent eagerly */
            PMPI_Send(&c->word, 1, MPI_UNSIGNED_LONG_LONG, r, AMC_TAG_WORD, c->agree);
    }
    now = in_call && amc_words_here(c);
    amc_retake(held);
    c->sends = sends;
    amc_log(AMC_LOG_DEBUG, "a failed team at call %llu (%s): %s", c->calls, reason,
            now ? "every rank's word is here, agreeing now" : "agreeing at the next call");
    if (now)
        amc_agree(c);
}

/* A call on comm (record c) that the rules so far send to arcoll (team):
 * counted, and once the team failed sent to MPI (NULL) or failed (NULL,
 * *code raised; a nonblocking call then has no request). */
arcoll_team_t amc_gate(int kind, amc_comm_t *c, MPI_Comm comm, arcoll_team_t team, int *code)
{
    *code = MPI_SUCCESS;
    if (team == NULL || c == NULL || c == &amc_comm_nomem)
        return team;
    c->calls++;
    if (c->fail == AMC_TEAM_OK)
        return team;
    if (c->fail == AMC_TEAM_SEEN)
        amc_agree(c);
    if (c->fail == AMC_TEAM_AGREED && c->calls >= c->from) {
        amc_passed[kind]++;
        return NULL;
    }
    *code = amc_raise(comm, MPI_ERR_OTHER, amc_names[kind],
                      "the communicator's arcoll team failed; this call failed with it");
    return NULL;
}

/* A blocking call's v-arrays come from a scratch of its thread: a malloc and
 * a free were a fifth of the shim's own cost of a small MPI_Alltoallv
 * (np=1: 0.16 us against 0.10 through the API). Blocking calls of one thread
 * run one at a time, so one scratch per thread serves them; a nonblocking job
 * outlives its call and mallocs, as does a team too large for the scratch or
 * a call made while it is taken (a callback inside a call). */
#define AMC_V_TLS 128
static _Thread_local size_t amc_v_scratch[AMC_V_TLS];
static _Thread_local int amc_v_taken;

static size_t *amc_v_get(amc_job_t *j, size_t len)
{
    if (j->kind < AMC_NB && len <= AMC_V_TLS && !amc_v_taken) {
        amc_v_taken = 1;
        j->v_tls = 1;
        return amc_v_scratch;
    }
    return malloc(len * sizeof(size_t));
}

void amc_job_free(amc_job_t *j)
{
    free(j->stmp);
    free(j->rtmp);
    if (j->v_tls)
        amc_v_taken = 0;
    else
        free(j->v);
    j->v_tls = 0;
    if (j->utype_dup)
        PMPI_Type_free(&j->utype);
    j->stmp = j->rtmp = NULL;
    j->v = NULL;
    j->utype_dup = 0;
}

/* Unpack rtmp into the user's buffer. */
static int amc_unpack(amc_job_t *j)
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
                         amc_at(j->ubuf, (MPI_Aint)j->udispls[b] * j->uext), j->ucounts[b],
                         j->utype, j->comm);
    }
    return rc;
}

/* The end of a job that arcoll ran with status rc: unpack, free, raise. */
int amc_finish(amc_job_t *j, int rc)
{
    const char *what = amc_names[j->kind];
    int code = MPI_SUCCESS;

    if (rc == ARCOLL_OK && j->ubuf != NULL)
        code = amc_unpack(j);
    amc_job_free(j);
    if (rc != ARCOLL_OK) {
        amc_fail_seen(j->rec, arcoll_strerror(rc), j->in_call);
        return amc_error(j->comm, rc, what);
    }
    if (code != MPI_SUCCESS)
        return amc_raise(j->comm, code, what, "MPI_Unpack failed");
    if (j->err != MPI_SUCCESS)
        return amc_raise(j->comm, j->err, what,
                         "send and receive sizes differ (zeros sent in their place)");
    return MPI_SUCCESS;
}

/* Where arcoll's input or output for n blocks of count elements of t at buf
 * is: buf itself when t is contiguous, else a packed copy (in: filled now). */
static int amc_side_uniform(amc_job_t *j, const void *buf, int count, MPI_Datatype t,
                            const amc_type_t *ti, int n, int in, char **where, char **tmp)
{
    size_t len = (size_t)count * ti->size * (size_t)n;

    if (ti->contig) {
        *where = amc_at(buf, ti->tlb);
        return MPI_SUCCESS;
    }
    *tmp = malloc(len ? len : 1);
    if (*tmp == NULL)
        return MPI_ERR_NO_MEM;
    *where = *tmp;
    j->packed = 1;
    return in ? amc_pack(buf, count * n, t, ti->size, *tmp, len, 0, j->comm) : MPI_SUCCESS;
}

/* alltoall/allgather (j->kind, j->comm, j->team set). */
int amc_plan_uniform(amc_job_t *j, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                     int rcount, MPI_Datatype rtype)
{
    int a2a = j->kind % AMC_NB == K_ALLTOALL, n = arcoll_team_size(j->team);
    int me = arcoll_team_rank(j->team), nsend = a2a ? n : 1, rc;
    amc_type_t st, rt;
    char *rwhere, *swhere;
    size_t rblk, sblk;

    if (rcount < 0 || (sbuf != MPI_IN_PLACE && scount < 0))
        return MPI_ERR_COUNT;
    if (amc_type_get(rtype, &rt) != 0 || (sbuf != MPI_IN_PLACE && amc_type_get(stype, &st)))
        return MPI_ERR_TYPE;
    rblk = (size_t)rcount * rt.size;
    rc = amc_side_uniform(j, rbuf, rcount, rtype, &rt, n, 0, &rwhere, &j->rtmp);
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
        const char *in = a2a ? rbuf : amc_at(rbuf, (MPI_Aint)me * rcount * rt.extent);
        size_t len = rblk * (size_t)nsend;
        j->stmp = malloc(len ? len : 1);
        if (j->stmp == NULL)
            return MPI_ERR_NO_MEM;
        j->sbuf = j->stmp;
        if (rt.contig) {
            if (len > 0)
                memcpy(j->stmp, amc_at(in, rt.tlb), len);
            return MPI_SUCCESS;
        }
        j->packed = 1;
        return amc_pack(in, rcount * nsend, rtype, rt.size, j->stmp, len, 0, j->comm);
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
    rc = amc_side_uniform(j, sbuf, scount, stype, &st, nsend, 1, &swhere, &j->stmp);
    j->sbuf = swhere;
    return rc;
}

/*
 * One side of a v-form: n blocks of counts[b] elements of t at buf +
 * displs[b] * extent. Gives arcoll's base and byte counts/displacements;
 * a non-contiguous t gets a packed copy (blocks in order), filled with the
 * block `only` (or all of them when only < 0) if in.
 */
static int amc_side_v(amc_job_t *j, const void *buf, const int *counts, const int *displs,
                      MPI_Datatype t, int n, int in, int only, size_t *bc, size_t *bd, char **base,
                      char **tmp, size_t *tlen, amc_type_t *ti)
{
    MPI_Aint lo = 0, off;
    size_t total = 0;
    int any = 0, rc = MPI_SUCCESS;

    if (amc_type_get(t, ti) != 0)
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
        *base = amc_at(buf, lo);
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
            rc = amc_pack(amc_at(buf, (MPI_Aint)displs[b] * ti->extent), counts[b], t, ti->size,
                          *tmp, total, bd[b], j->comm);
    return rc;
}

static void amc_unpack_v(amc_job_t *j, void *rbuf, MPI_Datatype rtype, const amc_type_t *rt,
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

int amc_plan_alltoallv(amc_job_t *j, const void *sbuf, const int *scounts, const int *sdispls,
                       MPI_Datatype stype, void *rbuf, const int *rcounts, const int *rdispls,
                       MPI_Datatype rtype)
{
    size_t n = (size_t)arcoll_team_size(j->team), unused = 0;
    amc_type_t st, rt;
    char *sbase = NULL, *rbase = NULL;
    int rc, in_place = sbuf == MPI_IN_PLACE;

    j->v = amc_v_get(j, 4 * n);
    if (j->v == NULL)
        return MPI_ERR_NO_MEM;
    /* In place, the input is rbuf's blocks: a packed copy starts with them. */
    rc = amc_side_v(j, rbuf, rcounts, rdispls, rtype, (int)n, in_place, -1, j->v + 2 * n,
                    j->v + 3 * n, &rbase, &j->rtmp, &j->rlen, &rt);
    if (rc != MPI_SUCCESS)
        return rc;
    j->rbuf = rbase;
    if (j->rtmp != NULL)
        amc_unpack_v(j, rbuf, rtype, &rt, rcounts, rdispls, j->v + 3 * n, (int)n);
    if (in_place) {
        memcpy(j->v, j->v + 2 * n, 2 * n * sizeof(size_t));
        j->sbuf = ARCOLL_IN_PLACE;
        return MPI_SUCCESS;
    }
    rc = amc_side_v(j, sbuf, scounts, sdispls, stype, (int)n, 1, -1, j->v, j->v + n, &sbase,
                    &j->stmp, &unused, &st);
    j->sbuf = sbase;
    return rc;
}

int amc_plan_allgatherv(amc_job_t *j, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                        const int *rcounts, const int *displs, MPI_Datatype rtype)
{
    size_t n = (size_t)arcoll_team_size(j->team);
    int me = arcoll_team_rank(j->team), rc, in_place = sbuf == MPI_IN_PLACE;
    amc_type_t st, rt;
    char *rbase = NULL, *swhere = NULL;

    j->v = amc_v_get(j, 2 * n);
    if (j->v == NULL)
        return MPI_ERR_NO_MEM;
    rc = amc_side_v(j, rbuf, rcounts, displs, rtype, (int)n, in_place, me, j->v, j->v + n, &rbase,
                    &j->rtmp, &j->rlen, &rt);
    if (rc != MPI_SUCCESS)
        return rc;
    j->rbuf = rbase;
    if (j->rtmp != NULL)
        amc_unpack_v(j, rbuf, rtype, &rt, rcounts, displs, j->v + n, (int)n);
    if (in_place) {
        j->sbuf = ARCOLL_IN_PLACE;
        j->bytes = j->v[me];
        return MPI_SUCCESS;
    }
    if (scount < 0)
        return MPI_ERR_COUNT;
    if (amc_type_get(stype, &st) != 0)
        return MPI_ERR_TYPE;
    j->bytes = (size_t)scount * st.size;
    rc = amc_side_uniform(j, sbuf, scount, stype, &st, 1, 1, &swhere, &j->stmp);
    j->sbuf = swhere;
    return rc;
}

/* Start the job: blocking when req is NULL. An arcoll status. */
int amc_start(amc_job_t *j, arcoll_request_t *req)
{
    arcoll_team_t t = j->team;
    size_t n = (size_t)arcoll_team_size(t);
    size_t *v = j->v;

    switch (j->kind % AMC_NB) {
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

/* ARCOLL_MPI_FAULT=coll_fail or icoll_fail (which): the first such call on
 * MPI_COMM_WORLD that arcoll completed is taken as timed out; coll_fail_named
 * (the component): the first blocking one on a communicator named
 * "arcoll-fault" (a thread's own, at MPI_THREAD_MULTIPLE). */
int amc_fault_take(int which, const amc_job_t *j, int rc)
{
    char name[MPI_MAX_OBJECT_NAME] = "";
    int len = 0;

    if (rc != ARCOLL_OK)
        return rc;
    if (amc_fault == AMC_FAULT_COLL_FAIL_NAMED && which == AMC_FAULT_COLL_FAIL) {
        if (PMPI_Comm_get_name(j->comm, name, &len) != MPI_SUCCESS ||
            strcmp(name, "arcoll-fault") != 0)
            return rc;
    } else if (amc_fault != which || j->comm != MPI_COMM_WORLD) {
        return rc;
    }
    amc_log(AMC_LOG_WARN, "ARCOLL_MPI_FAULT=%s: %s taken as failed",
            amc_fault == AMC_FAULT_COLL_FAIL_NAMED ? "coll_fail_named"
            : which == AMC_FAULT_COLL_FAIL         ? "coll_fail"
                                                   : "icoll_fail",
            amc_names[j->kind]);
    amc_fault = AMC_FAULT_NONE;
    return ARCOLL_ERR_TIMEOUT;
}

void amc_job_init(amc_job_t *j, int kind, MPI_Comm comm, arcoll_team_t team, amc_comm_t *rec)
{
    memset(j, 0, sizeof(*j));
    j->kind = kind;
    j->comm = comm;
    j->team = team;
    j->utype = MPI_DATATYPE_NULL;
    j->rec = rec;
}

/* A plan that failed on this rank: free it and raise the error. */
int amc_plan_failed(amc_job_t *j, int code)
{
    amc_job_free(j);
    amc_fail_seen(j->rec, "this rank could not take part in a call", 1);
    return amc_raise(j->comm, code, amc_names[j->kind],
                     code == MPI_ERR_NO_MEM ? "out of memory" : "invalid count or datatype");
}

/* A serve rule of the tuning table (@mpi: measured faster in the MPI library)
 * keeps this call in PMPI. Every rank decides alike: bytes is a size MPI
 * makes equal on every rank (the callers say which). */
arcoll_team_t amc_route_bytes(int kind, amc_comm_t *c, arcoll_team_t team, size_t bytes)
{
    int k = kind % AMC_NB;

    if (team == NULL || bytes == 0 || k == K_ALLTOALLV)
        return team;
    if (c == NULL || c == &amc_comm_nomem)
        return team;
    if (c->host_bytes[k] != bytes) {
        c->host[k] = arcoll_team_host_serves(team, (arcoll_coll_t)k, bytes);
        c->host_bytes[k] = bytes;
    }
    if (!c->host[k])
        return team;
    amc_passed[kind]++;
    return NULL;
}

/* The same for alltoall and allgather: rcount x the receive type's size is
 * the call's bytes per peer on every rank (MPI's type-signature rule),
 * MPI_IN_PLACE or not. */
arcoll_team_t amc_route_size(int kind, amc_comm_t *c, arcoll_team_t team, int rcount,
                             MPI_Datatype rtype)
{
    int tsize;

    if (team == NULL || rcount <= 0 || PMPI_Type_size(rtype, &tsize) != MPI_SUCCESS || tsize <= 0)
        return team;
    return amc_route_bytes(kind, c, team, (size_t)rcount * (size_t)tsize);
}

/* The same for allgatherv: the mean of recvcounts, the same array on every
 * rank. */
arcoll_team_t amc_route_mean(int kind, amc_comm_t *c, arcoll_team_t team, const int *rcounts,
                             MPI_Datatype rtype)
{
    int n, tsize = 0;
    size_t sum = 0;

    if (team == NULL || rcounts == NULL)
        return team;
    n = arcoll_team_size(team);
    for (int i = 0; i < n; i++)
        sum += rcounts[i] > 0 ? (size_t)rcounts[i] : 0;
    if (n > 0 && PMPI_Type_size(rtype, &tsize) == MPI_SUCCESS && tsize > 0)
        team = amc_route_bytes(kind, c, team, sum * (size_t)tsize / (size_t)n);
    return team;
}

/* The same for the reductions: count (per block, or of the vector) is the
 * same on every rank. */
arcoll_team_t amc_route_count(int kind, amc_comm_t *c, arcoll_team_t team, int count,
                              MPI_Datatype type)
{
    int tsize = 0;

    if (team != NULL && count > 0 && PMPI_Type_size(type, &tsize) == MPI_SUCCESS && tsize > 0)
        team = amc_route_bytes(kind, c, team, (size_t)count * (size_t)tsize);
    return team;
}

/* Why a reduction goes to MPI (a reason every rank shares: the (datatype, op)
 * pair is the same on all), or NULL with its arcoll type and op. */
const char *amc_reduce_why(MPI_Datatype type, MPI_Op op, arcoll_dtype_t *dt, arcoll_op_t *aop)
{
    return amc_dtype(type, dt) != 0    ? "datatype not in arcoll"
           : amc_op(op, *dt, aop) != 0 ? "op not in arcoll"
                                       : NULL;
}

void amc_report(void)
{
    static const char *const short_names[AMC_NKINDS] = {"alltoall",
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

    for (int k = 0; k < AMC_NKINDS; k++)
        if (amc_served[k] + amc_passed[k] > 0 && len < sizeof(line))
            len +=
                (size_t)snprintf(line + len, sizeof(line) - len, "%s %llu on arcoll, %llu on MPI; ",
                                 short_names[k], amc_served[k], amc_passed[k]);
    amc_log(AMC_LOG_INFO,
            "%s%llu packed, %llu from Fortran, %llu requests; %llu communicators on arcoll "
            "(%llu by team split), %llu on MPI; %llu contexts; %llu errors; sh_co: %llu calls, "
            "%llu fallbacks to pap; zero-copy receive buffers: %llu in the node heap, %llu "
            "registered; %llu RC QPs",
            len > 0 ? line : "no collectives; ", amc_stats.packed, amc_stats.fortran,
            amc_stats.requests, amc_stats.comms_arcoll, amc_stats.comms_split, amc_stats.comms_mpi,
            amc_stats.contexts, amc_stats.errors, amc_counters.sh_co_calls,
            amc_counters.sh_co_fallbacks, amc_counters.zcopy_heap_calls,
            amc_counters.zcopy_reg_calls, amc_qps);
}
/* The counters of arcoll_mpi_stats. */
void amc_stats_get(arcoll_mpi_stats_t *out)
{
    arcoll_mpi_stats_t *s = &amc_stats;
    unsigned long long *pairs[AMC_NKINDS][2] = {
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

    amc_lock();
    for (int k = 0; k < AMC_NKINDS; k++) {
        *pairs[k][0] = amc_served[k];
        *pairs[k][1] = amc_passed[k];
    }
    *out = amc_stats;
    amc_unlock();
}

/* What the node heap's preload malloc decided: one line from world rank 0
 * (docs/heap.md, "The one switch"); a bad setting warns on every rank. */
void amc_heap_report(int (*state)(size_t *min))
{
    static const char *const why[] = {
        [PRE_WHY_OFF] = "off (ARCOLL_HEAP=off)",
        [PRE_WHY_NOT_RANK] = "off (no local rank from the launcher)",
        [PRE_WHY_FOREIGN] = "off (the program brings its own malloc)",
        [PRE_WHY_SHADOWED] = "unused (another malloc comes first: a sanitizer or an earlier "
                             "preload)",
    };
    size_t min = 0;
    int w;

    if (state == NULL) {
        if (amc_wrank == 0)
            amc_log(AMC_LOG_INFO, "node heap: not in this program (no preload: sh_co and "
                                  "zero-copy by address serve only arcoll_heap_* buffers)");
        return;
    }
    w = state(&min);
    if (w == PRE_WHY_BAD)
        amc_log(AMC_LOG_WARN,
                "ARCOLL_HEAP=%s, ARCOLL_HEAP_MIN=%s: expected on, off or auto, and a "
                "size below 256m; the defaults are used",
                getenv("ARCOLL_HEAP") ? getenv("ARCOLL_HEAP") : "(unset)",
                getenv("ARCOLL_HEAP_MIN") ? getenv("ARCOLL_HEAP_MIN") : "(unset)");
    else if (amc_wrank == 0 && w == PRE_WHY_ON)
        amc_log(AMC_LOG_INFO, "node heap: serves this program's blocks of %zu bytes or more", min);
    else if (amc_wrank == 0 && w >= 0 && w < (int)(sizeof(why) / sizeof(why[0])) && why[w])
        amc_log(AMC_LOG_INFO, "node heap: %s", why[w]);
}
