/*
 * arcoll: process-arrival-pattern aware alltoall/allgather over one-sided
 * (RDMA WRITE semantics) channels.
 *
 * Lifecycle: arcoll_init() -> teams -> collectives -> arcoll_finalize().
 * Every collective is called by all members of a team in the same order
 * (MPI semantics). A team has up to ARCOLL_MAX_INFLIGHT collectives in flight.
 *
 * Thread safety, stated per call below with these words:
 *   [any]        any thread at any time, concurrently with anything.
 *   [serialized] at most one such call at a time in the whole process, from
 *                any thread (MPI_THREAD_SERIALIZED): the library keeps
 *                process-wide state (the live handles it validates against,
 *                the last error message), so two threads must not call it at
 *                once even on distinct contexts.
 * The library starts no threads and installs no signal handlers: nonblocking
 * calls progress only inside arcoll_test/arcoll_wait/arcoll_progress.
 * docs/embedding.md describes the lifecycle for a layer that embeds arcoll.
 */
#ifndef ARCOLL_H
#define ARCOLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define ARCOLL_VERSION_MAJOR  0
#define ARCOLL_VERSION_MINOR  1
#define ARCOLL_VERSION_PATCH  0
#define ARCOLL_VERSION_STRING "0.1.0"
/* One number for comparisons: (major << 16) | (minor << 8) | patch. */
#define ARCOLL_VERSION                                                                \
    (((unsigned)ARCOLL_VERSION_MAJOR << 16) | ((unsigned)ARCOLL_VERSION_MINOR << 8) | \
     (unsigned)ARCOLL_VERSION_PATCH)

/* Status codes: 0 is success, 1 "in progress", negatives are errors. */
typedef enum {
    ARCOLL_OK = 0,
    ARCOLL_INPROGRESS = 1,
    ARCOLL_ERR_INVALID = -1,     /* bad argument (NULL, overlap, overflow) */
    ARCOLL_ERR_NOMEM = -2,       /* out of memory or shared memory */
    ARCOLL_ERR_TIMEOUT = -3,     /* a peer did not arrive within ARCOLL_TIMEOUT_MS */
    ARCOLL_ERR_PEER = -4,        /* a peer process is gone */
    ARCOLL_ERR_MISMATCH = -5,    /* message sizes differ across ranks */
    ARCOLL_ERR_UNSUPPORTED = -6, /* not possible with this channel/job shape */
    ARCOLL_ERR_BOOTSTRAP = -7,   /* PMIx or out-of-band callback failed */
    ARCOLL_ERR_CHANNEL = -8,     /* transport operation failed */
    ARCOLL_ERR_STATE = -9,       /* not initialized, finalized, busy or failed */
    ARCOLL_ERR_CONFIG = -10,     /* invalid configuration value */
} arcoll_status_t;

typedef struct arcoll_context *arcoll_context_t;
typedef struct arcoll_team *arcoll_team_t;
typedef struct arcoll_request *arcoll_request_t;

/* The version of the library loaded at run time, encoded as ARCOLL_VERSION
 * (compare it with the header's to catch a mismatched libarcoll.so); if
 * string is not NULL it gets e.g. "0.1.0". [any] */
unsigned arcoll_version(const char **string);

/*
 * Out-of-band bootstrap supplied by an embedding runtime (e.g. an MPI
 * channel). allgather: every rank contributes len bytes, rbuf receives
 * size*len bytes ordered by rank; it is blocking and collective. barrier:
 * blocking and collective. Both return 0 on success; any other value makes
 * the arcoll call fail with ARCOLL_ERR_BOOTSTRAP. Called only inside
 * arcoll_init (and arcoll_finalize under ARCOLL_PROFILE), in the same order
 * on every rank, never from another thread, never
 * re-entered; the struct is copied by arcoll_init (user must stay valid
 * until arcoll_finalize returns). docs/embedding.md, "Out-of-band".
 */
typedef struct arcoll_oob {
    int (*allgather)(const void *sbuf, void *rbuf, size_t len, void *user);
    int (*barrier)(void *user);
    void *user;
    int rank;
    int size;
} arcoll_oob_t;

/* Create a context. oob == NULL bootstraps through PMIx (a process started
 * without a launcher is a singleton of size 1). Collective over all ranks.
 * A process may hold several contexts at once (e.g. one per communicator).
 * [serialized] */
int arcoll_init(const arcoll_oob_t *oob, arcoll_context_t *ctx);
/* arcoll_init with settings that override the ARCOLL_* environment for this
 * context only: config is NULL or a NULL-terminated list of name, value
 * pairs, e.g. {"ARCOLL_CHANNEL", "verbs", "ARCOLL_PROFILE", "/tmp/p", NULL},
 * with the names and values of docs/configuration.md (ARCOLL_CHANNEL and
 * ARCOLL_PROFILE included). A bad setting still lets this rank take part in
 * the bootstrap, then fails every rank (ARCOLL_ERR_CONFIG; this rank
 * ARCOLL_ERR_CONFIG or _INVALID): pass the same on every rank. [serialized] */
int arcoll_init_config(const arcoll_oob_t *oob, const char *const *config, arcoll_context_t *ctx);

/* Collective over all ranks of the context; frees every team of it.
 * Any handle of the context is invalid afterwards (calls report
 * ARCOLL_ERR_STATE). [serialized] */
int arcoll_finalize(arcoll_context_t ctx);

/* Queries: -1 (or an error) for a handle that is not live. [serialized] */
int arcoll_context_rank(arcoll_context_t ctx);
int arcoll_context_size(arcoll_context_t ctx);
/* Number of nodes (hosts) the context's ranks span, from the bootstrap. */
int arcoll_context_nnodes(arcoll_context_t ctx);
/* Memory this process has registered or shared for arcoll: every team's
 * region (bounce and control slots) plus the channel's fixed buffers. */
int arcoll_context_memory(arcoll_context_t ctx, size_t *bytes);

/* Transport resources of this process now. The verbs channel wires an RC QP to
 * a peer only when an algorithm first writes to it (or when
 * ARCOLL_VERBS_CONNECT=eager, to all at init), and every team that uses the
 * peer shares it, so the counts grow with the algorithms run. */
typedef struct arcoll_resources {
    int qps;                 /* RC QPs this process has created (verbs; 0 on shared memory) */
    int qps_ready;           /* of those, connected both ways */
    size_t registered_bytes; /* memory this process has registered with the NIC now */
    size_t shared_bytes;     /* this process's share of shared-memory segments and regions */
    /* Registrations of user buffers for zero-copy calls, since arcoll_init: */
    uint64_t user_regs;     /* made for them: per call, cache misses, arcoll_mem_register */
    uint64_t user_reg_hits; /* served by an earlier one (the cache, arcoll_mem_register) */
    uint64_t heap_mr_regs;  /* of the heap MR (verbs; one per doubling of its prefix) */
    uint64_t heap_mr_hits;  /* buffers served by the heap MR, with no registration */
    size_t heap_mr_bytes;   /* the heap MR's length now (in registered_bytes); 0: none */
    int heap_mr_odp;        /* 1 if it is on-demand paged (over the whole slot) */
} arcoll_resources_t;
/* [serialized] */
int arcoll_context_resources(arcoll_context_t ctx, arcoll_resources_t *out);

/* What served this context's calls, counted per rank since arcoll_init.
 * Fields are only ever added at the end: pass sizeof(arcoll_counters_t) as
 * compiled, and fields beyond size are not written. */
typedef struct arcoll_counters {
    /* alltoall/allgather calls given to sh_co (configured, or picked by auto
     * where the node heap is shared) that ran as sh_co: every rank's buffers
     * were in the heap ... */
    unsigned long long sh_co_calls;
    /* ... and those that ran as pap instead, since some rank's were not, ... */
    unsigned long long sh_co_fallbacks;
    /* ... of which those auto sent to pap at once, without looking at the
     * buffers, because the team's last sh_co calls fell back (docs/heap.md). */
    unsigned long long sh_co_skips;
    /* Zero-copy calls of the flat algorithms, by how this rank's receive
     * buffer was given to its peers: by address in the shared node heap (the
     * peers memcpy into it), or registered with the channel (process_vm_writev
     * on one host, an RDMA key across hosts; docs/protocol.md §6). */
    unsigned long long zcopy_heap_calls;
    unsigned long long zcopy_reg_calls;
    /* Late keyless advertisements of schedule messages (docs/protocol.md
     * §17): a receive the copy path serves that waited 256 passes. Never in
     * the library's own agreements (a team's barrier before its memory goes). */
    unsigned long long sched_zc_late;
} arcoll_counters_t;
/* ARCOLL_ERR_INVALID if out is NULL or size is 0. [serialized] */
int arcoll_context_counters(arcoll_context_t ctx, arcoll_counters_t *out, size_t size);

/* The team of all ranks of the context, in rank order. [serialized] */
arcoll_team_t arcoll_team_world(arcoll_context_t ctx);

/* Collective over ALL ranks of the context (like MPI_Comm_split): each rank
 * passes the ordered member list of the team it joins (it must be a member),
 * or nranks == 0 to join none (*team is then NULL). Runs over the world
 * team's channel: if any rank passes bad arguments or a list other than its
 * members', every rank fails with ARCOLL_ERR_INVALID; a lost rank fails it
 * like a collective (ARCOLL_ERR_PEER or _TIMEOUT). [serialized] */
int arcoll_team_create(arcoll_context_t ctx, const int *ranks, int nranks, arcoll_team_t *team);
/* Collective over the context, like create. The world team is not destroyed.
 * [serialized] */
int arcoll_team_destroy(arcoll_context_t ctx, arcoll_team_t team);
/* Collective over the members of team only (MPI_Comm_split): ranks passing
 * the same color >= 0 form a new team, ordered by key and then by their rank
 * in team; color ARCOLL_UNDEFINED joins none (*newteam is then NULL). No rank
 * gathers the whole (color, key) table: sorted tables are merged along a
 * recursive-doubling exchange over the team's own channel (Sack 2011).
 * [serialized] */
#define ARCOLL_UNDEFINED (-1)
int arcoll_team_split(arcoll_team_t team, int color, int key, arcoll_team_t *newteam);
/* Free a team, collective over its members only (like MPI_Comm_free; the
 * others do not call it): a barrier over the team's own channel, then each
 * member releases its part. For any team but the world team, whether made by
 * arcoll_team_split or arcoll_team_create; arcoll_team_destroy remains the
 * form collective over the whole context. [serialized] */
int arcoll_team_free(arcoll_team_t team);
/* [serialized] */
int arcoll_team_rank(arcoll_team_t team);
int arcoll_team_size(arcoll_team_t team);

/* Collectives the tuning table's serve rules name (no alltoallv: no size of
 * it is the same on every rank). */
typedef enum {
    ARCOLL_COLL_ALLTOALL = 0,
    ARCOLL_COLL_ALLGATHER = 1,
    ARCOLL_COLL_ALLGATHERV = 3,
    ARCOLL_COLL_REDUCE_SCATTER = 4,
    ARCOLL_COLL_ALLREDUCE = 5
} arcoll_coll_t;
/* For an embedding MPI library: 1 if the tuning table (ARCOLL_TUNE, then the
 * built-in table) says the MPI library should keep calls of coll of this size
 * on this team for itself (bytes per peer for alltoall, per rank for
 * allgather, the mean of recvcounts for allgatherv, per block for
 * reduce_scatter_block, of the vector for allreduce), because
 * arcoll measured slower there (a serve rule with target @mpi,
 * docs/configuration.md); 0 otherwise or on a bad handle. The answer depends
 * only on the team's shape, the settings agreed at init and bytes, so every
 * member answers alike for the same bytes. arcoll's own collectives ignore
 * serve rules. [serialized] */
int arcoll_team_host_serves(arcoll_team_t team, arcoll_coll_t coll, size_t bytes);

/* alltoall: block i of sbuf (bytes each) goes to team rank i, block j of
 * rbuf comes from team rank j. allgather: sbuf (bytes) is sent to all,
 * rbuf holds size*bytes. bytes == 0 exchanges nothing but the size with
 * every rank (so a rank that passed data fails with ARCOLL_ERR_MISMATCH on
 * every rank, this one included). Buffers must not
 * overlap. Returns only once all outgoing writes are complete and all
 * incoming data has landed. On ARCOLL_ERR_TIMEOUT, _PEER or _CHANNEL the
 * team is failed: later calls on it return ARCOLL_ERR_STATE (destroy it, or
 * finalize; docs/embedding.md, "Failures"). [serialized] */
int arcoll_alltoall(arcoll_team_t team, const void *sbuf, void *rbuf, size_t bytes);
int arcoll_allgather(arcoll_team_t team, const void *sbuf, void *rbuf, size_t bytes);

/* Nonblocking forms: buffers belong to the library until completion. Calls
 * are started in the same order on every member and completed in any order.
 * A start never waits for another rank: up to ARCOLL_MAX_INFLIGHT calls of a
 * team move data at once, and a start beyond that (or behind one still
 * queued) is queued locally and starts, in order, as earlier calls complete,
 * from any progress of the team (arcoll_test, _wait, _progress, another
 * call). A blocking call waits for the queued ones first. [serialized] */
#define ARCOLL_MAX_INFLIGHT 8
int arcoll_ialltoall(arcoll_team_t team, const void *sbuf, void *rbuf, size_t bytes,
                     arcoll_request_t *req);
int arcoll_iallgather(arcoll_team_t team, const void *sbuf, void *rbuf, size_t bytes,
                      arcoll_request_t *req);
/*
 * The collectives around alltoall/allgather (MPI semantics; docs/protocol.md).
 * Counts and displacements of the v-forms are in bytes; those of the
 * reductions in elements of dtype. ARCOLL_IN_PLACE as sbuf: allgather(v)
 * finds this rank's block already in rbuf at its place; allreduce and
 * reduce_scatter_block take their input from rbuf (reduce_scatter_block:
 * count * team size elements, the result in the first count); alltoall(v)
 * take their data from rbuf and replace it (alltoallv: with rcounts/rdispls).
 * Sizes that disagree across ranks are detected where they meet, and
 * nothing is written outside a buffer: a rank that receives a block of
 * another size than it expects gets ARCOLL_ERR_MISMATCH; for allgather(v) and
 * the reductions, whose arguments (count, dtype, op, rcounts) must be equal
 * everywhere, every message carries a signature of them, and a rank that
 * found a disagreement poisons what it sends on, so every rank whose result
 * depends on it gets ARCOLL_ERR_MISMATCH too; alltoallv by pap or direct (not
 * in place) checks each block's length against its receiver's before sending
 * a byte, so both the sender and the receiver of a disagreeing block get it;
 * sloav and sloavx relay small blocks through other ranks, so only the
 * destination can compare: it (and the ranks its later messages reach) gets
 * ARCOLL_ERR_MISMATCH, the sender of a relayed block may return ARCOLL_OK.
 * A mismatch fails the team, like a timeout.
 * [serialized]
 */
#define ARCOLL_IN_PLACE ((const void *)1)

typedef enum {
    ARCOLL_INT32 = 0,
    ARCOLL_INT64,
    ARCOLL_UINT64,
    ARCOLL_FLOAT,
    ARCOLL_DOUBLE,
    ARCOLL_DTYPE_COUNT
} arcoll_dtype_t;

/* band/bor/bxor: integer types only. */
typedef enum {
    ARCOLL_SUM = 0,
    ARCOLL_PROD,
    ARCOLL_MIN,
    ARCOLL_MAX,
    ARCOLL_BAND,
    ARCOLL_BOR,
    ARCOLL_BXOR,
    ARCOLL_OP_COUNT
} arcoll_op_t;

/* Bytes of one element of dtype, 0 if dtype is not one. [any] */
size_t arcoll_dtype_size(arcoll_dtype_t dtype);

/* Block j of sbuf (scounts[j] bytes at sdispls[j]) goes to team rank j, and
 * rcounts[j] bytes from rank j land at rdispls[j] of rbuf. */
int arcoll_alltoallv(arcoll_team_t team, const void *sbuf, const size_t *scounts,
                     const size_t *sdispls, void *rbuf, const size_t *rcounts,
                     const size_t *rdispls);
/* sbytes from every rank; rank j's land at rdispls[j] of rbuf (rcounts[j] ==
 * rank j's sbytes). */
int arcoll_allgatherv(arcoll_team_t team, const void *sbuf, size_t sbytes, void *rbuf,
                      const size_t *rcounts, const size_t *rdispls);
/* Elementwise reduction of count * size elements of every rank's sbuf; rank j
 * gets elements [j * count, (j + 1) * count) of the result in rbuf. */
int arcoll_reduce_scatter_block(arcoll_team_t team, const void *sbuf, void *rbuf, size_t count,
                                arcoll_dtype_t dtype, arcoll_op_t op);
/* Elementwise reduction of count elements of every rank's sbuf, into every rbuf. */
int arcoll_allreduce(arcoll_team_t team, const void *sbuf, void *rbuf, size_t count,
                     arcoll_dtype_t dtype, arcoll_op_t op);

/* Nonblocking forms: the arrays of the v-forms and the buffers belong to the
 * library until completion. */
int arcoll_ialltoallv(arcoll_team_t team, const void *sbuf, const size_t *scounts,
                      const size_t *sdispls, void *rbuf, const size_t *rcounts,
                      const size_t *rdispls, arcoll_request_t *req);
int arcoll_iallgatherv(arcoll_team_t team, const void *sbuf, size_t sbytes, void *rbuf,
                       const size_t *rcounts, const size_t *rdispls, arcoll_request_t *req);
int arcoll_ireduce_scatter_block(arcoll_team_t team, const void *sbuf, void *rbuf, size_t count,
                                 arcoll_dtype_t dtype, arcoll_op_t op, arcoll_request_t *req);
int arcoll_iallreduce(arcoll_team_t team, const void *sbuf, void *rbuf, size_t count,
                      arcoll_dtype_t dtype, arcoll_op_t op, arcoll_request_t *req);

/* ARCOLL_INPROGRESS, or the final status (the request is then freed and
 * *req set to NULL). */
int arcoll_test(arcoll_request_t *req);
int arcoll_wait(arcoll_request_t *req);
/* Wait for n requests (NULL entries are complete); each is set to NULL. The
 * first error seen is returned, after every request has completed. */
int arcoll_waitall(int n, arcoll_request_t *reqs);
/* Progress every outstanding request of the context. [serialized] */
int arcoll_progress(arcoll_context_t ctx);
/* fn(arg) is called now and then while arcoll waits for peers (a blocking
 * collective, arcoll_wait, a blocking call behind a full window, destroy and
 * finalize): an embedding MPI library passes its own progress function, so
 * that its operations which a peer may have to finish before it reaches
 * arcoll's (a nonblocking barrier it waits for) keep moving, as MPI's
 * progress rule requires. Never called from within itself. fn NULL: none
 * (the default). [serialized] */
int arcoll_context_progress_hook(arcoll_context_t ctx, void (*fn)(void *arg), void *arg);

/* For a layer that calls arcoll on an application's behalf (an MPI
 * library): attribute the next collective this thread starts to the code
 * address site, e.g. the layer's own __builtin_return_address(0), in
 * ARCOLL_PROFILE records (docs/profiling.md) instead of the direct caller.
 * Applies to one call. [any] */
void arcoll_call_site(const void *site);

/*
 * Memory registration for the zero-copy path (docs/verbs.md). By default a
 * user buffer is registered for one call and deregistered at its end, which
 * is always safe. Memory the caller owns for long can be registered once:
 * collectives on buffers inside it then skip registration. The caller must
 * deregister before freeing it. With ARCOLL_REGCACHE=on, implicit
 * registrations are cached too, and the caller must report with
 * arcoll_mem_invalidate every free/unmap of memory used in a collective (as
 * an MPI library's memory hooks would), or RDMA could land in pages the
 * allocator has handed elsewhere. The caller owns registered memory; arcoll
 * only reads or writes it during a collective on a buffer inside it.
 * [serialized]
 */
typedef struct arcoll_mem *arcoll_mem_t;
int arcoll_mem_register(arcoll_context_t ctx, void *addr, size_t len, arcoll_mem_t *mem);
int arcoll_mem_deregister(arcoll_context_t ctx, arcoll_mem_t mem);
int arcoll_mem_invalidate(arcoll_context_t ctx, void *addr, size_t len);

/* Set a configuration variable at run time, with the names and values of
 * the ARCOLL_* environment variables (e.g. "ARCOLL_ALLTOALL_ALG", "pap").
 * Every rank must set the same value between the same collectives.
 * [serialized] */
int arcoll_config_set(arcoll_context_t ctx, const char *name, const char *value);
/* Current value as a string, in a buffer of the context that the next
 * arcoll_config_get or arcoll_config_set overwrites. */
const char *arcoll_config_get(arcoll_context_t ctx, const char *name);

/* Human-readable description of a status code (a static string). [any] */
const char *arcoll_strerror(int status);
/* The message of the last error detected in this process, on any context
 * (never NULL; ctx is not used). Valid until the next arcoll call.
 * [serialized] */
const char *arcoll_last_error(arcoll_context_t ctx);

/*
 * Node heap (docs/heap.md): memory from a region that every rank of a node
 * maps at the same virtual address, so that a pointer is valid as it is in
 * every local rank, and address-based algorithms (sh_co) may copy straight
 * between the ranks' buffers. Usable before arcoll_init: the first call makes
 * this process's part (its slot, at ARCOLL_HEAP_BASE + local rank x
 * ARCOLL_HEAP_SIZE); arcoll_init then maps the other local ranks' slots if
 * every one of them has its part in place, else the heap stays private to
 * this process (it works the same, only the algorithms that need it are not
 * eligible). LD_PRELOAD=libarcoll_heap.so puts a program's malloc & co here.
 * After fork the child has a private copy of its heap (never its parent's).
 * All [any]; they set errno like malloc.
 */
/* size bytes, NULL with errno ENOMEM if the heap is exhausted or cannot be
 * made (no fallback to private memory: the preload library does that). */
void *arcoll_heap_malloc(size_t size);
void *arcoll_heap_calloc(size_t n, size_t size);
/* align: a power of two (else NULL, EINVAL). */
void *arcoll_heap_aligned_alloc(size_t align, size_t size);
/* p from this heap or NULL; on ENOMEM p is left as it was. */
void *arcoll_heap_realloc(void *p, size_t size);
/* p from this heap or NULL; a pointer from elsewhere is ignored with a warning. */
void arcoll_heap_free(void *p);
/* They look at the address only (so that gcc does not warn about a fresh
 * block passed to them). */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10
#define ARCOLL_ADDRESS_ONLY(i) __attribute__((access(none, i)))
#else
#define ARCOLL_ADDRESS_ONLY(i)
#endif
/* Is p in this process's part of the heap (what arcoll_heap_free accepts)? */
int arcoll_heap_contains(const void *p) ARCOLL_ADDRESS_ONLY(1);
/* Bytes usable at p (at least what was asked), 0 if p is not from the heap. */
size_t arcoll_heap_usable_size(const void *p) ARCOLL_ADDRESS_ONLY(1);
/* 1 while a context is initialized and every rank of this host maps every
 * other's heap at the same address, else 0. */
int arcoll_heap_is_shared(void);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif /* ARCOLL_H */
