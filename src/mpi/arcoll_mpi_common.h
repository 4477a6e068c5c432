/*
 * Shared by the PMPI shim (src/mpi/arcoll_pmpi.c) and the Open MPI coll
 * component (src/mpi/ompi/coll_arcoll.c): see arcoll_mpi_common.c. Internal: its
 * symbols are hidden in both libraries. "PMPI" in the comments below means
 * the MPI library's own collectives: PMPI_* for the shim, the saved previous
 * coll module for the component.
 */
#ifndef ARCOLL_MPI_ARCOLL_MPI_COMMON_H
#define ARCOLL_MPI_ARCOLL_MPI_COMMON_H

#include <mpi.h>
#include <stddef.h>

#include "arcoll.h"
#include "arcoll_mpi.h"

#pragma GCC visibility push(hidden)

enum { AMC_LOG_NONE, AMC_LOG_ERROR, AMC_LOG_WARN, AMC_LOG_INFO, AMC_LOG_DEBUG };
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
    AMC_FAULT_NONE,
    AMC_FAULT_SPLIT_FAIL,
    AMC_FAULT_SPLIT_ORDER,
    AMC_FAULT_COLL_FAIL,
    AMC_FAULT_ICOLL_FAIL,
    AMC_FAULT_SETATTR_FAIL,
    AMC_FAULT_COLL_FAIL_NAMED /* coll_fail on a communicator named "arcoll-fault" only */
};
/* A communicator's team: healthy; failed as this rank saw it (the others may
 * not know yet); failed as every rank agreed (calls from `from` on go to
 * PMPI). */
enum { AMC_TEAM_OK, AMC_TEAM_SEEN, AMC_TEAM_AGREED };

/* The collectives, blocking first; AMC_NB + k is the nonblocking form of k. */
enum {
    K_ALLTOALL,
    K_ALLGATHER,
    K_ALLTOALLV,
    K_ALLGATHERV,
    K_RSB,
    K_ALLREDUCE,
    AMC_NB,
    AMC_NKINDS = 2 * AMC_NB
};
/* A context and how many communicators of this process use it. */
typedef struct amc_ctx {
    struct amc_ctx *next, *prev; /* live list, newest first */
    arcoll_context_t ctx;
    MPI_Comm oob;   /* private copy of its root communicator: bootstrap, agreements */
    int size;       /* its ranks */
    int split;      /* every rank allows team splits (ARCOLL_MPI_SPLIT) */
    unsigned users; /* communicators of this process on it */
} amc_ctx_t;

/* One communicator's state (the shim's attribute value, the component's
 * module's). */
typedef struct amc_comm {
    struct amc_comm *next, *prev; /* live list, newest first */
    MPI_Comm comm;                /* the application's */
    amc_ctx_t *sc;                /* NULL: every call on comm goes to PMPI */
    arcoll_team_t team;
    int split; /* team made by arcoll_team_split: freed with comm */
    int size;  /* ranks of comm */
    /* Made (directly or not) from a communicator whose team had failed: it
     * and every communicator made from it use PMPI, agreed at its creation
     * (a context of its own for each would outlive it wherever a parent is
     * freed before a child that does not span it: 67 live contexts and +35
     * MB after 15 s of tests/mpi/soak.sh's fault job). */
    int failed_line;
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
    size_t host_bytes[AMC_NB]; /* 0: none yet (a call of 0 bytes never asks) */
    int host[AMC_NB];
} amc_comm_t;
/* Named datatypes and what they are. Only named ones are cached: their
 * handles are never freed, so an entry cannot come to mean another type. */
typedef struct amc_type {
    size_t size;     /* bytes of data in one element */
    MPI_Aint extent; /* from one element to the next */
    MPI_Aint tlb;    /* where an element's data starts */
    int contig;      /* count elements are count * size bytes at buf + tlb */
} amc_type_t;
/*
 * One collective as arcoll runs it: buffers, byte counts, and the packed
 * copies that stand for non-contiguous user buffers.
 */
typedef struct amc_job {
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
    int v_tls;            /* v is this thread's scratch (amc_v_get), not malloc'd */
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
    int err;         /* an MPI error this rank raises after taking part */
    amc_comm_t *rec; /* comm's record */
    int in_call;     /* inside the call that started it (not a wait or test) */
} amc_job_t;

/* Names of the collectives for messages (AMC_NKINDS, K_* and AMC_NB + K_*). */
extern const char *const amc_names[AMC_NKINDS];
/* Settings and state of this process, set up by the embedding. */
extern int amc_level;        /* AMC_LOG_*: ARCOLL_LOG */
extern int amc_wrank;        /* rank in MPI_COMM_WORLD, for log lines */
extern int amc_led;          /* communicators this process was rank 0 of (profile names) */
extern int amc_split_env;    /* ARCOLL_MPI_SPLIT is not off */
extern int amc_fault;        /* ARCOLL_MPI_FAULT (tests): AMC_FAULT_* */
extern int amc_finalizing;   /* in MPI_Finalize: contexts go whole, teams with them */
extern amc_ctx_t *amc_ctxs;  /* live contexts, newest first */
extern amc_comm_t *amc_live; /* live records, newest first */
extern unsigned amc_nlive;
extern amc_comm_t amc_comm_nomem; /* the record of a rank that had no memory for one */
extern arcoll_mpi_stats_t amc_stats;
extern unsigned long long amc_served[AMC_NKINDS], amc_passed[AMC_NKINDS];
extern arcoll_counters_t amc_counters; /* of the contexts freed so far */
/* The embedding's: its name in log lines; NULL-terminated name, value pairs
 * passed to every arcoll_init_config after ARCOLL_PROFILE; arcoll's progress
 * hook (arg: the amc_ctx_t), which runs the MPI library's progress; whether
 * errors are raised on the communicator here (the shim) or by the MPI
 * library the code is returned to (the component); and how deep this thread
 * is in a callback from inside arcoll (bootstrap, hook), where MPI's progress
 * must not call arcoll again (another thread's may). */
#define AMC_CONFIG_MAX 32
extern const char *amc_log_name;
extern const char *const *amc_config;
extern void (*amc_progress_hook)(void *arg);
extern int amc_call_errhandler;
extern _Thread_local unsigned amc_inlib;

/*
 * MPI_THREAD_MULTIPLE (the component: docs/embedding.md, "Threads"). arcoll
 * is not thread safe: one process-wide lock, in force only when amc_mt is
 * set (a predictable branch otherwise), is held around every call into it
 * and every use of the state above. It is recursive per thread and hands
 * over in arrival order (a ticket lock). Wherever this rank may wait for
 * another (arcoll's progress hook, the bootstrap callbacks, blocking PMPI
 * calls) it is dropped (amc_drop) and taken back (amc_retake), so that
 * another thread's communicator, which a peer may be waiting in, progresses.
 * amc_trylock fails also when this thread holds it.
 */
extern _Atomic int amc_mt;
void amc_lock(void);
void amc_unlock(void);
int amc_trylock(void);
unsigned amc_drop(void);
void amc_retake(unsigned depth);
#define AMC_UNLOCKED(stmt)            \
    do {                              \
        unsigned amc_d_ = amc_drop(); \
        stmt;                         \
        amc_retake(amc_d_);           \
    } while (0)

void amc_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One line on what the node heap's preload malloc decided; state is its
 * preload_heap_state (NULL: no preload in the process). */
void amc_heap_report(int (*state)(size_t *min));
int amc_level_parse(void);
/* The live list of records. */
void amc_comm_link(amc_comm_t *c);
void amc_comm_unlink(amc_comm_t *c);
/* Contexts: create over x->oob (collective; -1: x and x->oob freed), free
 * (collective over its ranks). */
int amc_ctx_create(amc_ctx_t *x, MPI_Comm comm, int n);
void amc_ctx_free(amc_ctx_t *x);
/* Collective over c's communicator when it goes: its team, its context use. */
void amc_comm_release(amc_comm_t *c);
/* The communicator goes (collective over it; its requests already drained):
 * unlink and free c, its agreement copy and unsent words, and drop its use
 * of the context unless release is 0 (MPI_Finalize frees the contexts). */
void amc_comm_destroy(amc_comm_t *c, int release);
/* A private copy of comm (collective over it); -1 on failure. */
int amc_copy(MPI_Comm comm, MPI_Comm *out);
/* Datatypes and ops. */
int amc_type_get(MPI_Datatype t, amc_type_t *ti);
int amc_dtype(MPI_Datatype t, arcoll_dtype_t *out);
int amc_op(MPI_Op op, arcoll_dtype_t dt, arcoll_op_t *out);
const char *amc_reduce_why(MPI_Datatype type, MPI_Op op, arcoll_dtype_t *dt, arcoll_op_t *aop);
/* Errors: an arcoll status, or an MPI code found here; the MPI code back. */
int amc_error(MPI_Comm comm, int rc, const char *what);
int amc_raise(MPI_Comm comm, int code, const char *what, const char *why);
/* The agreement after a team failure. */
void amc_agree(amc_comm_t *c);
void amc_fail_seen(amc_comm_t *c, const char *reason, int in_call);
arcoll_team_t amc_gate(int kind, amc_comm_t *c, MPI_Comm comm, arcoll_team_t team, int *code);
/* Serve rules (the tuning table's @mpi): NULL sends the call to MPI. */
arcoll_team_t amc_route_bytes(int kind, amc_comm_t *c, arcoll_team_t team, size_t bytes);
arcoll_team_t amc_route_size(int kind, amc_comm_t *c, arcoll_team_t team, int rcount,
                             MPI_Datatype rtype);
arcoll_team_t amc_route_mean(int kind, amc_comm_t *c, arcoll_team_t team, const int *rcounts,
                             MPI_Datatype rtype);
arcoll_team_t amc_route_count(int kind, amc_comm_t *c, arcoll_team_t team, int count,
                              MPI_Datatype type);
/* One collective: init, plan (an MPI code), start (an arcoll status; req
 * NULL: blocking), finish (unpack, free, raise: an MPI code). */
void amc_job_init(amc_job_t *j, int kind, MPI_Comm comm, arcoll_team_t team, amc_comm_t *rec);
int amc_plan_uniform(amc_job_t *j, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                     int rcount, MPI_Datatype rtype);
int amc_plan_alltoallv(amc_job_t *j, const void *sbuf, const int *scounts, const int *sdispls,
                       MPI_Datatype stype, void *rbuf, const int *rcounts, const int *rdispls,
                       MPI_Datatype rtype);
int amc_plan_allgatherv(amc_job_t *j, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                        const int *rcounts, const int *displs, MPI_Datatype rtype);
int amc_plan_failed(amc_job_t *j, int code);
int amc_start(amc_job_t *j, arcoll_request_t *req);
int amc_finish(amc_job_t *j, int rc);
void amc_job_free(amc_job_t *j);
int amc_fault_take(int which, const amc_job_t *j, int rc);
/* The counters, and the report at ARCOLL_LOG=info. */
void amc_stats_get(arcoll_mpi_stats_t *out);
void amc_report(void);

#pragma GCC visibility pop
#endif /* ARCOLL_MPI_ARCOLL_MPI_COMMON_H */
