/*
 * arcoll-bench: collective latency (alltoall, allgather, their v-forms,
 * reduce_scatter_block, allreduce) under injected process-arrival skew
 * (seed 002 §3.2), several algorithms side by side in one run.
 *
 * Per iteration: a barrier, then each rank waits (spins or sleeps) a delay
 * bounded by MIF x T(size), T being the measured time of one message of the
 * payload over the same channel, then the timed collective. Latency is from
 * a rank's own entry to its own exit; the figure of merit is its mean over
 * ranks. The arrival bound of rank i is (latest arrival - arrival of i): no
 * collective measured here can finish on i before the last rank has arrived
 * (every result depends on every rank; with -D sparse a v-form's may not),
 * so latency/bound says how much any algorithm could still gain.
 *
 * Iterations are the outer loop and algorithms the inner one, and all
 * algorithms of an iteration get the same delays, so drift, noise and the
 * arrival pattern hit them alike. Delays come from a counter-based generator
 * of (seed, rank, iteration) (bench_stats.c), so every rank knows every
 * rank's delay without communicating.
 *
 * Built with mpicc and -DARCOLL_BENCH_MPI, `mpi` is one more algorithm
 * (Open MPI's own collective under the identical skew), the barrier is
 * MPI_Barrier and arcoll bootstraps through MPI callbacks instead of PMIx.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef ARCOLL_BENCH_MPI
#include <mpi.h>
#endif

#include "arcoll.h"
#include "bench/bench_clock.h"
#include "bench/bench_stats.h"
#include "tl.h"

#define MAX_ALGS   8
#define MAX_MIFS   16
#define MAX_LATES  8
#define MAX_POINTS (MAX_MIFS * MAX_LATES)
#define HOST_LEN   64

enum { FMT_TABLE, FMT_CSV, FMT_JSON };
/* The order of colls[] below, which is also the order of the sweep. */
enum {
    COLL_ALLTOALL,
    COLL_ALLGATHER,
    COLL_ALLGATHERV,
    COLL_ALLTOALLV,
    COLL_REDUCE_SCATTER,
    COLL_ALLREDUCE,
    NCOLLS
};
/* -D in the v-forms' table headers (bstat_vcount). */
static const char *const dist_desc[BSTAT_NDISTS] = {", uniform", ", random 0..2x per call",
                                                    ", sparse: 90% 0, else 10x",
                                                    ", one-heavy: 100x to one peer"};

typedef struct opts {
    int colls;                      /* bit (1 << COLL_*) */
    const char *algs[MAX_ALGS];     /* as given: ALG or ALG/PATH, the column's name */
    const char *alg_path[MAX_ALGS]; /* PATH of ALG/PATH; NULL: the run's path (-p) */
    char alg_name[MAX_ALGS][32];    /* ALG of ALG/PATH */
    int nalgs;
    const char *baseline; /* NULL: mpi, else direct, else the first */
    size_t min, max;
    int iters, warmup;
    double mifs[MAX_MIFS];
    int nmifs, mif_set;
    double lates[MAX_LATES]; /* empty: random mode */
    int nlates;
    int skew;     /* -1 auto, 0 sleep, 1 spin */
    int arrivals; /* -1 auto, 0 measured delays, 1 common clock */
    uint64_t seed;
    int dist;   /* -D: BSTAT_DIST_* */
    int median; /* --stat median */
    int validate, full, format, quiet;
    const char *plot, *path;
} opts_t;

/* One (MIF, late fraction) combination of the sweep; late < 0 in random mode. */
typedef struct point {
    double mif, late;
} point_t;

/* One printed row: a collective at a size and point, every algorithm. */
typedef struct row {
    int coll, point;
    size_t bytes;
    double t_us, memcpy_us;
    bstat_point_t res[MAX_ALGS];
} row_t;

typedef struct bench {
    opts_t o;
    int base; /* index of the baseline algorithm */
    int is_mpi[MAX_ALGS];
    point_t points[MAX_POINTS];
    int npoints;
    size_t *sizes;
    int nsizes;
    double *t_cache;         /* per size index, < 0 until measured */
    double *memcpy_cache[2]; /* the same, copying n x size [0] or size [1] bytes */

    arcoll_context_t ctx;
    arcoll_team_t world, pair;
    int rank, n, nnodes, local_n;
    long cores;
    int spin, one_host, shared_clock; /* shared_clock: arrivals on CLOCK_MONOTONIC */
    double overshoot_us;              /* mean lateness of a short sleep, over ranks */
    size_t mem_self, mem_min, mem_max;
    char mpi_info[160];

    char *s, *r, *ms, *mr; /* arcoll buffers, MPI's own buffers */
    size_t buflen, vtotal; /* vtotal: a rank's largest v-form total / the size (-D) */
    /* The v-forms' counts and displacements (bytes) of the current iteration,
     * and the same as ints for MPI. */
    size_t *sc, *sd, *rc, *rd;
    int *isc, *isd, *irc, *ird;
    double *delay, *rank_sum, *arrive, *lat, *med; /* med: bstat_point_median's scratch */
    uint64_t *bar;                                 /* the barrier's receive buffer */
    int *perm;
    uint64_t iter_key;
    const char *cur_alg[NCOLLS]; /* last value set, to skip redundant config_set */
    char base_path[16];          /* ARCOLL_PATH of columns without /PATH */
    const char *cur_path;        /* last ARCOLL_PATH set */

    long checked, failed;
    row_t *rows;
    int nrows;
    int json_first;
    double t_start, t_progress;
} bench_t;

/* What the sweep needs of one collective: adding one is a row of colls[]. */
typedef struct coll_ops {
    const char *name;    /* -t and the output */
    const char *alg_var; /* its ARCOLL_*_ALG */
    const char *size_is; /* what the size column means */
    int reduces;         /* on doubles: floor(size / 8) of them, sizes below 8 B skipped */
    int memcpy_one;      /* the memcpy reference copies size bytes rather than n x size */
    int vcounts;         /* the counts come from -D, fresh each iteration */
    /* Data of call `key` into sbuf, and its check in rbuf (0: right). */
    void (*fill)(const bench_t *b, char *s, size_t bytes, uint64_t key);
    int (*verify)(const bench_t *b, const char *r, size_t bytes, uint64_t key);
    int (*run)(const bench_t *b, const char *s, char *r, size_t bytes); /* an arcoll status */
#ifdef ARCOLL_BENCH_MPI
    int (*run_mpi)(const bench_t *b, const char *s, char *r, size_t bytes); /* an MPI code */
#endif
} coll_ops_t;

static const coll_ops_t colls[NCOLLS];

static int check(const bench_t *b, int rc, const char *what)
{
    if (rc != ARCOLL_OK) {
        fprintf(stderr, "arcoll-bench[%d]: %s: %s (%s)\n", b->rank, what, arcoll_strerror(rc),
                arcoll_last_error(b->ctx));
        return 1;
    }
    return 0;
}

/* ---- Communication that is not being measured ---- */

#ifdef ARCOLL_BENCH_MPI
static int oob_allgather(const void *sbuf, void *rbuf, size_t len, void *user)
{
    (void)user;
    if (len > INT_MAX)
        return -1;
    return MPI_Allgather(sbuf, (int)len, MPI_BYTE, rbuf, (int)len, MPI_BYTE, MPI_COMM_WORLD) ==
                   MPI_SUCCESS
               ? 0
               : -1;
}

static int oob_barrier(void *user)
{
    (void)user;
    return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}
#endif

static int set_alg(bench_t *b, int coll, const char *alg)
{
    const char *var = colls[coll].alg_var;

    if (b->cur_alg[coll] != NULL && strcmp(b->cur_alg[coll], alg) == 0)
        return 0;
    if (check(b, arcoll_config_set(b->ctx, var, alg), var))
        return 1;
    b->cur_alg[coll] = alg;
    return 0;
}

/* Column a's algorithm and data path (ALG/PATH compares paths in one run). */
static int set_column(bench_t *b, int coll, int a)
{
    const char *path = b->o.alg_path[a] ? b->o.alg_path[a] : b->base_path;

    if (set_alg(b, coll, b->o.alg_name[a]))
        return 1;
    if (b->cur_path != NULL && strcmp(b->cur_path, path) == 0)
        return 0;
    if (check(b, arcoll_config_set(b->ctx, "ARCOLL_PATH", path), "ARCOLL_PATH"))
        return 1;
    b->cur_path = path;
    return 0;
}

/* MPI_Barrier in the MPI build; otherwise an 8-byte arcoll allgather, always
 * with the direct algorithm so that the barrier does not change with the
 * algorithm under test. */
static int barrier(bench_t *b)
{
#ifdef ARCOLL_BENCH_MPI
    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS) {
        fprintf(stderr, "arcoll-bench[%d]: MPI_Barrier failed\n", b->rank);
        return 1;
    }
    return 0;
#else
    uint64_t in = 0;
    if (set_alg(b, COLL_ALLGATHER, "direct"))
        return 1;
    return check(b, arcoll_allgather(b->world, &in, b->bar, sizeof(in)), "barrier");
#endif
}

/* Every rank's `len` bytes into out (n x len), outside any timed region. */
static int share(bench_t *b, const void *in, void *out, size_t len, const char *what)
{
#ifdef ARCOLL_BENCH_MPI
    if (oob_allgather(in, out, len, NULL) != 0) {
        fprintf(stderr, "arcoll-bench[%d]: %s: MPI_Allgather failed\n", b->rank, what);
        return 1;
    }
    return 0;
#else
    return check(b, arcoll_allgather(b->world, in, out, len), what);
#endif
}

/* share() for ranks that may wait long while others measure: they sleep
 * between polls, so that a measurement gets its cores to itself even when
 * ranks outnumber cores. */
static int share_idle(bench_t *b, const void *in, void *out, size_t len, const char *what)
{
    const struct timespec nap = {0, 200000};
#ifdef ARCOLL_BENCH_MPI
    MPI_Request req;
    int done = 0;
    if (MPI_Iallgather(in, (int)len, MPI_BYTE, out, (int)len, MPI_BYTE, MPI_COMM_WORLD, &req) !=
        MPI_SUCCESS)
        goto fail;
    while (!done) {
        if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            goto fail;
        if (!done)
            nanosleep(&nap, NULL);
    }
    return 0;
fail:
    fprintf(stderr, "arcoll-bench[%d]: %s: MPI_Iallgather failed\n", b->rank, what);
    return 1;
#else
    arcoll_request_t req;
    int rc = arcoll_iallgather(b->world, in, out, len, &req);
    while (rc == ARCOLL_OK && req != NULL && (rc = arcoll_test(&req)) == ARCOLL_INPROGRESS) {
        nanosleep(&nap, NULL);
        rc = ARCOLL_OK;
    }
    return check(b, rc, what);
#endif
}

/* ---- Measurements outside the sweep: T(size), memcpy ---- */

/* T(size): one message of `bytes` over the channel, from a 2-rank allgather
 * between ranks 0 and 1 (one message each way, concurrently). The median of
 * batch means is robust to a batch that lost its core. */
static int measure_t(bench_t *b, size_t bytes, double *t_us)
{
    double t = 0, batch[7];
    double *all = b->rank_sum; /* n doubles of scratch */
    int reps = bytes >= 65536 ? 5 : 30;

    if (set_alg(b, COLL_ALLGATHER, "direct"))
        return 1;
    if (b->pair != NULL) {
        /* On one host, ranks 0 and 1 on distinct cores: otherwise T depends on
         * where the scheduler happened to put them (0.2 vs 4 us when they
         * share a core and hand it back and forth). */
        cpu_set_t saved, one;
        int pinned = 0;
        if (b->one_host && sched_getaffinity(0, sizeof(saved), &saved) == 0 &&
            CPU_COUNT(&saved) > 1) {
            for (int cpu = 0, k = 0; cpu < CPU_SETSIZE && !pinned; cpu++)
                if (CPU_ISSET(cpu, &saved) && k++ == b->rank) {
                    CPU_ZERO(&one);
                    CPU_SET(cpu, &one);
                    pinned = sched_setaffinity(0, sizeof(one), &one) == 0;
                }
        }
        for (int i = 0; i < reps; i++)
            if (check(b, arcoll_allgather(b->pair, b->s, b->r, bytes), "T(size)"))
                return 1;
        for (int k = 0; k < 7; k++) {
            double t0 = now_us();
            for (int i = 0; i < reps; i++)
                if (check(b, arcoll_allgather(b->pair, b->s, b->r, bytes), "T(size)"))
                    return 1;
            batch[k] = (now_us() - t0) / reps;
        }
        t = bstat_median(batch, 7);
        if (pinned)
            sched_setaffinity(0, sizeof(saved), &saved);
    }
    if (share_idle(b, &t, all, sizeof(t), "sharing T"))
        return 1;
    *t_us = all[0];
    return 0;
}

/* The single-copy limit: one core (rank 0's) copying len bytes (what a rank
 * receives, or must read for a reduction), while the other ranks wait. */
static int measure_memcpy(bench_t *b, size_t len, double *us)
{
    double t = 0, batch[7];
    double *all = b->rank_sum;

    if (b->rank == 0) {
        int reps = len >= (4u << 20) ? 3 : (int)((4u << 20) / len);
        if (reps > 1000)
            reps = 1000;
        memcpy(b->r, b->s, len);
        for (int k = 0; k < 7; k++) {
            double t0 = now_us();
            for (int i = 0; i < reps; i++) {
                memcpy(b->r, b->s, len);
                __asm__ __volatile__("" : : "r"(b->r) : "memory"); /* keep every copy */
            }
            batch[k] = (now_us() - t0) / reps;
        }
        t = bstat_median(batch, 7);
    }
    if (share_idle(b, &t, all, sizeof(t), "sharing memcpy time"))
        return 1;
    *us = all[0];
    return 0;
}

/* ---- Data validation: the patterns of tests/lib (tl.h), fresh per call (key) ---- */

static void fill_alltoall(const bench_t *b, char *s, size_t bytes, uint64_t key)
{
    tl_fill_blocks(s, bytes, b->n, key, b->rank);
}

static int verify_alltoall(const bench_t *b, const char *r, size_t bytes, uint64_t key)
{
    return tl_check_blocks(r, bytes, b->n, key, b->rank, NULL) != 0;
}

static void fill_allgather(const bench_t *b, char *s, size_t bytes, uint64_t key)
{
    tl_fill(s, bytes, key, b->rank, TL_ANY);
}

static int verify_allgather(const bench_t *b, const char *r, size_t bytes, uint64_t key)
{
    return tl_check_blocks(r, bytes, b->n, key, TL_ANY, NULL) != 0;
}

static void fill_allgatherv(const bench_t *b, char *s, size_t bytes, uint64_t key)
{
    (void)bytes;
    tl_fill(s, b->rc[b->rank], key, b->rank, TL_ANY);
}

static int verify_allgatherv(const bench_t *b, const char *r, size_t bytes, uint64_t key)
{
    (void)bytes;
    for (int src = 0; src < b->n; src++)
        if (tl_check(r + b->rd[src], b->rc[src], key, src, TL_ANY, NULL) != 0)
            return 1;
    return 0;
}

static void fill_alltoallv(const bench_t *b, char *s, size_t bytes, uint64_t key)
{
    (void)bytes;
    for (int dst = 0; dst < b->n; dst++)
        tl_fill(s + b->sd[dst], b->sc[dst], key, b->rank, dst);
}

static int verify_alltoallv(const bench_t *b, const char *r, size_t bytes, uint64_t key)
{
    (void)bytes;
    for (int src = 0; src < b->n; src++)
        if (tl_check(r + b->rd[src], b->rc[src], key, src, b->rank, NULL) != 0)
            return 1;
    return 0;
}

static size_t red_count(size_t bytes)
{
    return bytes / sizeof(double);
}

static void fill_reduce_scatter(const bench_t *b, char *s, size_t bytes, uint64_t key)
{
    double *v = (double *)(void *)s;
    size_t len = red_count(bytes) * (size_t)b->n;
    for (size_t i = 0; i < len; i++)
        v[i] = (double)tl_red_in(key, b->rank, i);
}

/* Elements [first, first + count) of the sum over ranks: small integers (tl_red_in), so
 * that every sum is exact whatever the order, and a missing or doubled contribution shows. */
static int verify_sum(const bench_t *b, const char *r, size_t first, size_t count, uint64_t key)
{
    const double *v = (const double *)(const void *)r;
    for (size_t i = 0; i < count; i++)
        if (v[i] != (double)tl_red_sum(key, b->n, first + i))
            return 1;
    return 0;
}

static int verify_reduce_scatter(const bench_t *b, const char *r, size_t bytes, uint64_t key)
{
    size_t count = red_count(bytes);
    return verify_sum(b, r, (size_t)b->rank * count, count, key);
}

static void fill_allreduce(const bench_t *b, char *s, size_t bytes, uint64_t key)
{
    double *v = (double *)(void *)s;
    for (size_t i = 0; i < red_count(bytes); i++)
        v[i] = (double)tl_red_in(key, b->rank, i);
}

static int verify_allreduce(const bench_t *b, const char *r, size_t bytes, uint64_t key)
{
    return verify_sum(b, r, 0, red_count(bytes), key);
}

/* The v-forms' counts for the iteration `key`, from the pure function of
 * (seed, src, dst, key) in bench_stats.c, so every rank agrees without
 * communicating. allgatherv: rank j sends rc[j]; alltoallv: sc[dst] from
 * this rank, rc[src] to it. Displacements pack the blocks. */
static void set_counts(bench_t *b, int coll, size_t bytes, uint64_t key)
{
    size_t so = 0, ro = 0;

    for (int j = 0; j < b->n; j++) {
        if (coll == COLL_ALLGATHERV) {
            b->rc[j] = bstat_gvcount(b->o.dist, b->o.seed, bytes, j, b->n, key);
            b->sc[j] = 0;
        } else {
            b->sc[j] = bstat_vcount(b->o.dist, b->o.seed, bytes, b->rank, j, b->n, key);
            b->rc[j] = bstat_vcount(b->o.dist, b->o.seed, bytes, j, b->rank, b->n, key);
        }
        b->sd[j] = so;
        b->rd[j] = ro;
        so += b->sc[j];
        ro += b->rc[j];
        /* setup_sweep keeps every total below INT_MAX */
        b->isc[j] = (int)b->sc[j];
        b->isd[j] = (int)b->sd[j];
        b->irc[j] = (int)b->rc[j];
        b->ird[j] = (int)b->rd[j];
    }
}

/* ---- The collectives, arcoll's and MPI's ---- */

static int run_alltoall(const bench_t *b, const char *s, char *r, size_t bytes)
{
    return arcoll_alltoall(b->world, s, r, bytes);
}

static int run_allgather(const bench_t *b, const char *s, char *r, size_t bytes)
{
    return arcoll_allgather(b->world, s, r, bytes);
}

static int run_allgatherv(const bench_t *b, const char *s, char *r, size_t bytes)
{
    (void)bytes;
    return arcoll_allgatherv(b->world, s, b->rc[b->rank], r, b->rc, b->rd);
}

static int run_alltoallv(const bench_t *b, const char *s, char *r, size_t bytes)
{
    (void)bytes;
    return arcoll_alltoallv(b->world, s, b->sc, b->sd, r, b->rc, b->rd);
}

static int run_reduce_scatter(const bench_t *b, const char *s, char *r, size_t bytes)
{
    return arcoll_reduce_scatter_block(b->world, s, r, red_count(bytes), ARCOLL_DOUBLE, ARCOLL_SUM);
}

static int run_allreduce(const bench_t *b, const char *s, char *r, size_t bytes)
{
    return arcoll_allreduce(b->world, s, r, red_count(bytes), ARCOLL_DOUBLE, ARCOLL_SUM);
}

#ifdef ARCOLL_BENCH_MPI
static int mpi_alltoall(const bench_t *b, const char *s, char *r, size_t bytes)
{
    (void)b;
    return MPI_Alltoall(s, (int)bytes, MPI_BYTE, r, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
}

static int mpi_allgather(const bench_t *b, const char *s, char *r, size_t bytes)
{
    (void)b;
    return MPI_Allgather(s, (int)bytes, MPI_BYTE, r, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
}

static int mpi_allgatherv(const bench_t *b, const char *s, char *r, size_t bytes)
{
    (void)bytes;
    return MPI_Allgatherv(s, b->irc[b->rank], MPI_BYTE, r, b->irc, b->ird, MPI_BYTE,
                          MPI_COMM_WORLD);
}

static int mpi_alltoallv(const bench_t *b, const char *s, char *r, size_t bytes)
{
    (void)bytes;
    return MPI_Alltoallv(s, b->isc, b->isd, MPI_BYTE, r, b->irc, b->ird, MPI_BYTE, MPI_COMM_WORLD);
}

static int mpi_reduce_scatter(const bench_t *b, const char *s, char *r, size_t bytes)
{
    (void)b;
    return MPI_Reduce_scatter_block(s, r, (int)red_count(bytes), MPI_DOUBLE, MPI_SUM,
                                    MPI_COMM_WORLD);
}

static int mpi_allreduce(const bench_t *b, const char *s, char *r, size_t bytes)
{
    (void)b;
    return MPI_Allreduce(s, r, (int)red_count(bytes), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}
#define MPI_OPS(f) , f
#else
#define MPI_OPS(f)
#endif

#define OPS(x) fill_##x, verify_##x, run_##x MPI_OPS(mpi_##x)
static const coll_ops_t colls[NCOLLS] = {
    [COLL_ALLTOALL] = {"alltoall", "ARCOLL_ALLTOALL_ALG", "bytes per peer", 0, 0, 0, OPS(alltoall)},
    [COLL_ALLGATHER] = {"allgather", "ARCOLL_ALLGATHER_ALG", "bytes per rank", 0, 0, 0,
                        OPS(allgather)},
    [COLL_ALLGATHERV] = {"allgatherv", "ARCOLL_ALLGATHERV_ALG", "mean bytes per rank", 0, 0, 1,
                         OPS(allgatherv)},
    [COLL_ALLTOALLV] = {"alltoallv", "ARCOLL_ALLTOALLV_ALG", "mean bytes per peer", 0, 0, 1,
                        OPS(alltoallv)},
    [COLL_REDUCE_SCATTER] = {"reduce_scatter", "ARCOLL_REDUCE_SCATTER_ALG",
                             "bytes per block (doubles, sum)", 1, 0, 0, OPS(reduce_scatter)},
    [COLL_ALLREDUCE] = {"allreduce", "ARCOLL_ALLREDUCE_ALG", "bytes of the vector (doubles, sum)",
                        1, 1, 0, OPS(allreduce)},
};
#undef OPS

/* Reductions need at least one element. */
static int size_ok(int coll, size_t bytes)
{
    return !colls[coll].reduces || red_count(bytes) > 0;
}

/* ---- One point of the sweep ---- */

static int timed_coll(bench_t *b, int a, int coll, size_t bytes, const char *s, char *r)
{
#ifdef ARCOLL_BENCH_MPI
    if (b->is_mpi[a]) {
        int rc = colls[coll].run_mpi(b, s, r, bytes);
        if (rc != MPI_SUCCESS)
            fprintf(stderr, "arcoll-bench[%d]: MPI %s failed\n", b->rank, colls[coll].name);
        return rc != MPI_SUCCESS;
    }
#endif
    return check(b, colls[coll].run(b, s, r, bytes), b->o.algs[a]);
}

/* Per rank and (iteration, algorithm): barrier exit, entry, exit; then one
 * slot with the count of wrong results, so that all ranks stop together.
 * Returns 0, 1 on a failure of this rank alone, 2 when all ranks stop. */
#define REC 3

static int run_point(bench_t *b, int coll, size_t bytes, const point_t *pt, double t_us,
                     bstat_point_t *res)
{
    const opts_t *o = &b->o;
    const coll_ops_t *ops = &colls[coll];
    int iters = bstat_iters(bytes, o->iters), warm = bstat_iters(bytes, o->warmup);
    size_t nrec = (size_t)iters * (size_t)o->nalgs * REC + 1;
    double *mine = calloc(nrec, sizeof(double)), *all = malloc(nrec * sizeof(double) * b->n);
    bstat_skew_t sk = {pt->late >= 0 ? BSTAT_SKEW_LATE : BSTAT_SKEW_RANDOM, pt->mif, pt->late,
                       o->seed};
    int rc = 1;

    if (mine == NULL || all == NULL) {
        fprintf(stderr, "arcoll-bench[%d]: out of memory\n", b->rank);
        goto out;
    }
    for (int it = -warm; it < iters; it++) {
        uint64_t key = ++b->iter_key;
        bstat_delays(&sk, key, b->n, t_us, b->perm, b->delay);
        if (ops->vcounts) /* every algorithm of the iteration gets the same counts */
            set_counts(b, coll, bytes, key);
        for (int a = 0; a < o->nalgs; a++) {
            char *s = b->is_mpi[a] ? b->ms : b->s, *r = b->is_mpi[a] ? b->mr : b->r;
            uint64_t dkey = key * MAX_ALGS + (uint64_t)a; /* fresh data per call */
            if (o->validate)
                ops->fill(b, s, bytes, dkey);
            if (barrier(b))
                goto out;
            double tb = now_us();
            /* Set after the barrier, which may itself be an arcoll allgather. */
            if (!b->is_mpi[a] && set_column(b, coll, a))
                goto out;
            if (b->delay[b->rank] > 0)
                wait_until(tb + b->delay[b->rank], b->spin);
            double t0 = now_us();
            if (timed_coll(b, a, coll, bytes, s, r))
                goto out;
            double t1 = now_us();
            if (o->validate) {
                int bad = ops->verify(b, r, bytes, dkey);
                b->checked++;
                if (bad && mine[nrec - 1] == 0)
                    fprintf(stderr, "arcoll-bench[%d]: %s %s %zu B: wrong data\n", b->rank,
                            o->algs[a], ops->name, bytes);
                mine[nrec - 1] += bad;
            }
            if (it >= 0) {
                double *m = mine + ((size_t)it * (size_t)o->nalgs + (size_t)a) * REC;
                m[0] = tb;
                m[1] = t0;
                m[2] = t1;
            }
        }
    }
    if (share(b, mine, all, nrec * sizeof(double), "gathering times"))
        goto out;
    for (int j = 0; j < b->n; j++)
        b->failed += (long)all[(size_t)j * nrec + nrec - 1];
    if (b->failed > 0) {
        if (b->rank == 0)
            fprintf(stderr, "arcoll-bench: wrong data at %s %zu B; stopping\n", ops->name, bytes);
        rc = 2; /* every rank knows: they can still finalize together */
        goto out;
    }
    /* Arrivals on the node's common clock when there is one; otherwise each
     * rank's measured delay after its barrier exit (barrier skew unseen). */
    for (int a = 0; a < o->nalgs; a++) {
        for (int it = 0; it < iters; it++)
            for (int j = 0; j < b->n; j++) {
                const double *m =
                    all + (size_t)j * nrec + ((size_t)it * (size_t)o->nalgs + (size_t)a) * REC;
                size_t k = (size_t)it * (size_t)b->n + (size_t)j;
                b->arrive[k] = b->shared_clock ? m[1] : m[1] - m[0];
                b->lat[k] = m[2] - m[1];
            }
        bstat_point(b->arrive, b->lat, iters, b->n, b->rank_sum, &res[a]);
        /* --stat median: every latency and bound column shows it instead
         * (lat_rank_min/max stay per-rank means). */
        if (o->median)
            bstat_point_median(b->arrive, b->lat, iters, b->n, b->med, &res[a].lat_mean,
                               &res[a].bound_mean);
    }
    rc = 0;
out:
    free(mine);
    free(all);
    return rc;
}

/* ---- Output ---- */

static int col_w(const char *name)
{
    int w = (int)strlen(name) + 1;
    return w < 10 ? 10 : w;
}

static void put_f(double v, int w, int prec)
{
    if (isnan(v))
        printf(" %*s", w, "-");
    else
        printf(" %*.*f", w, prec, v);
}

static void print_header(const bench_t *b)
{
    const opts_t *o = &b->o;
    char algs[128] = "";

    for (int a = 0; a < o->nalgs; a++)
        snprintf(algs + strlen(algs), sizeof(algs) - strlen(algs), "%s%s", a ? "," : "",
                 o->algs[a]);
    if (o->format == FMT_CSV) {
        printf("coll,size,mif,late,T_us,bound_us,memcpy_us,alg,lat_us,lat_min_us,lat_max_us,"
               "iters,baseline,base_over_alg,alg_over_bound,memcpy_frac\n");
        return;
    }
    if (o->format == FMT_JSON) {
        printf("{\"bench\": \"arcoll-bench\", \"version\": \"%s\", \"ranks\": %d, "
               "\"nodes\": %d, \"cores\": %ld, \"algorithms\": \"%s\", \"baseline\": \"%s\",\n"
               " \"skew\": \"%s\", \"mode\": \"%s\", \"seed\": %llu, \"dist\": \"%s\", \"stat\": "
               "\"%s\", \"clock\": "
               "\"%s\", "
               "\"barrier\": \"%s\", \"path\": \"%s\",\n"
               " \"memory_bytes\": {\"rank0\": %zu, \"min\": %zu, \"max\": %zu}, "
               "\"mpi\": %s%s%s,\n \"results\": [",
               ARCOLL_VERSION_STRING, b->n, b->nnodes, b->cores, algs, o->algs[b->base],
               b->spin ? "spin" : "sleep", o->nlates ? "late" : "random",
               (unsigned long long)o->seed, bstat_dist_names[o->dist],
               o->median ? "median" : "mean", b->shared_clock ? "monotonic" : "delays",
#ifdef ARCOLL_BENCH_MPI
               "MPI_Barrier",
#else
               "arcoll allgather",
#endif
               arcoll_config_get(b->ctx, "ARCOLL_PATH"), b->mem_self, b->mem_min, b->mem_max,
               *b->mpi_info ? "\"" : "", *b->mpi_info ? b->mpi_info : "null",
               *b->mpi_info ? "\"" : "");
        return;
    }
    printf("# arcoll-bench %s: %d rank%s on %d node%s, %ld cores here%s\n", ARCOLL_VERSION_STRING,
           b->n, b->n > 1 ? "s" : "", b->nnodes, b->nnodes > 1 ? "s" : "", b->cores,
           b->local_n > b->cores ? " (ranks outnumber cores)" : "");
    /* One arcoll_config_get at a time: each call reuses the same buffer. */
    printf("# algorithms %s, baseline %s; path %s", algs, o->algs[b->base],
           arcoll_config_get(b->ctx, "ARCOLL_PATH"));
    printf(", channel %s\n", arcoll_config_get(b->ctx, "ARCOLL_CHANNEL"));
    if (o->nlates)
        printf("# skew: late mode: round(fraction x %d) ranks, drawn afresh every iteration, "
               "wait MIF x T; the others none\n",
               b->n);
    else
        printf("# skew: every rank waits U[0,1) x MIF x T after the barrier, fresh every "
               "iteration\n");
    printf("# skew by %s%s; seed %llu (--seed)\n", b->spin ? "spinning" : "sleeping",
           b->local_n > b->cores
               ? (b->spin ? " although ranks outnumber cores: latencies are inflated"
                          : ", as ranks outnumber cores (a spinning rank steals a core)")
               : "",
           (unsigned long long)o->seed);
    if (!b->spin)
        printf("# a sleep ends %.1f us late on average here (all ranks sleeping 20 us at once)\n",
               b->overshoot_us);
    if (b->shared_clock)
        printf("# arrivals: CLOCK_MONOTONIC, shared by all ranks (one host): bound from real "
               "arrivals\n");
    else
        printf("# arrivals: %s: bound from each rank's measured delay after its own barrier "
               "exit (barrier exit skew unseen)\n",
               b->one_host ? "--arrivals delays" : "no common clock (several hosts)");
#ifdef ARCOLL_BENCH_MPI
    printf("# barrier: MPI_Barrier; arcoll bootstrap: MPI callbacks; %s\n", b->mpi_info);
#else
    printf("# barrier: 8-byte arcoll allgather (direct); arcoll bootstrap: PMIx\n");
#endif
    printf("# memory registered/shared per process: %zu B on rank 0 (%.1f KiB x %d ranks), "
           "%zu..%zu B over ranks\n",
           b->mem_self, (double)b->mem_self / 1024 / b->n, b->n, b->mem_min, b->mem_max);
    printf("# iterations %d (%d above %d B), warm-up %d (%d); validation %s\n", o->iters,
           bstat_iters(BSTAT_LARGE_SIZE + 1, o->iters), BSTAT_LARGE_SIZE, o->warmup,
           bstat_iters(BSTAT_LARGE_SIZE + 1, o->warmup), o->validate ? "every iteration" : "off");
    printf("# T: one message of the size between ranks 0 and 1 (2-rank allgather, median of 7 "
           "batches)%s\n",
           b->n < 2 ? "; 1 rank: none, so no skew" : "");
    if (o->median)
        printf("# latency: own entry to own exit, median over iterations of the mean over ranks "
               "(us, --stat median); bound: the same of latest arrival - own arrival, averaged "
               "over the algorithms\n");
    else
        printf("# latency: own entry to own exit, mean over ranks and iterations (us); bound: "
               "mean of latest arrival - own arrival, averaged over the algorithms\n");
    printf("# %s/ALG: latency of %s / latency of ALG (>1: ALG faster); ALG/bnd: latency / "
           "ALG's own bound%s\n",
           o->algs[b->base], o->algs[b->base], o->full ? " (ALG:bnd)" : " (-f shows it)");
    printf("# memcpy rows: T column = one core copying the %d x size bytes a rank receives "
           "(reduce_scatter: its input; allreduce: size bytes) (us); ALG columns = that / ALG "
           "latency at %s %g\n",
           b->n, o->nlates ? "late" : "MIF", o->nlates ? b->points[0].late : b->points[0].mif);
    if (o->full)
        printf("# ALG:min/ALG:max: lowest/highest per-rank mean latency; ALG:bnd: the bound "
               "from ALG's own arrivals\n");
}

static void print_coll_header(const bench_t *b, int coll)
{
    const opts_t *o = &b->o;
    char h[64];

    if (o->format != FMT_TABLE)
        return;
    printf("\n# %s (size: %s%s)\n%-10s %7s", colls[coll].name, colls[coll].size_is,
           !colls[coll].vcounts ? ""
           : coll == COLL_ALLGATHERV && o->dist == BSTAT_DIST_ONE_HEAVY
               ? ", one-heavy: one rank's block 100x"
               : dist_desc[o->dist],
           "# Size", "MIF");
    if (o->nlates)
        printf(" %5s", "late");
    printf(" %8s %10s", "T(us)", "bound(us)");
    for (int a = 0; a < o->nalgs; a++)
        printf(" %*s", col_w(o->algs[a]), o->algs[a]);
    for (int a = 0; a < o->nalgs; a++) {
        if (a == b->base)
            continue;
        snprintf(h, sizeof(h), "%s/%s", o->algs[b->base], o->algs[a]);
        printf(" %*s", col_w(h), h);
    }
    for (int a = 0; a < o->nalgs; a++) {
        snprintf(h, sizeof(h), "%s/bnd", o->algs[a]);
        printf(" %*s", col_w(h), h);
    }
    if (o->full) {
        for (int a = 0; a < o->nalgs; a++) {
            snprintf(h, sizeof(h), "%s:min", o->algs[a]);
            printf(" %*s", col_w(h), h);
            snprintf(h, sizeof(h), "%s:max", o->algs[a]);
            printf(" %*s", col_w(h), h);
            snprintf(h, sizeof(h), "%s:bnd", o->algs[a]);
            printf(" %*s", col_w(h), h);
        }
        printf(" %6s", "iters");
    }
    printf("\n");
}

static void json_num(const char *key, double v, int comma)
{
    if (isnan(v))
        printf("\"%s\": null%s", key, comma ? ", " : "");
    else
        printf("\"%s\": %.4f%s", key, v, comma ? ", " : "");
}

static void print_row(bench_t *b, const row_t *w)
{
    const opts_t *o = &b->o;
    const point_t *pt = &b->points[w->point];
    const bstat_point_t *res = w->res, *base = &res[b->base];
    double bound = bstat_mean_bound(res, o->nalgs); /* each ALG/bnd uses ALG's own */
    char h[64];

    if (o->format == FMT_CSV) {
        for (int a = 0; a < o->nalgs; a++) {
            printf("%s,%zu,%g,", colls[w->coll].name, w->bytes, pt->mif);
            if (pt->late >= 0)
                printf("%g", pt->late);
            printf(",%.4f,%.4f,%.4f,%s,%.4f,%.4f,%.4f,%d,%s,", w->t_us, res[a].bound_mean,
                   w->memcpy_us, o->algs[a], res[a].lat_mean, res[a].lat_rank_min,
                   res[a].lat_rank_max, res[a].iters, o->algs[b->base]);
            double r1 = bstat_ratio(base->lat_mean, res[a].lat_mean);
            double r2 = bstat_ratio(res[a].lat_mean, res[a].bound_mean);
            double r3 = bstat_ratio(w->memcpy_us, res[a].lat_mean);
            double v[3] = {r1, r2, r3};
            for (int k = 0; k < 3; k++) {
                if (!isnan(v[k]))
                    printf("%.4f", v[k]);
                printf(k < 2 ? "," : "\n");
            }
        }
        return;
    }
    if (o->format == FMT_JSON) {
        printf("%s\n  {\"coll\": \"%s\", \"size\": %zu, \"mif\": %g, ", b->json_first ? "" : ",",
               colls[w->coll].name, w->bytes, pt->mif);
        b->json_first = 0;
        json_num("late", pt->late >= 0 ? pt->late : NAN, 1);
        json_num("T_us", w->t_us, 1);
        json_num("bound_us", bound, 1);
        json_num("memcpy_us", w->memcpy_us, 1);
        printf("\"iters\": %d, \"alg\": {", res[0].iters);
        for (int a = 0; a < o->nalgs; a++) {
            printf("%s\"%s\": {", a ? ", " : "", o->algs[a]);
            json_num("lat_us", res[a].lat_mean, 1);
            json_num("lat_min_us", res[a].lat_rank_min, 1);
            json_num("lat_max_us", res[a].lat_rank_max, 1);
            json_num("bound_us", res[a].bound_mean, 1);
            json_num("base_over_alg", bstat_ratio(base->lat_mean, res[a].lat_mean), 1);
            json_num("alg_over_bound", bstat_ratio(res[a].lat_mean, res[a].bound_mean), 1);
            json_num("memcpy_frac", bstat_ratio(w->memcpy_us, res[a].lat_mean), 0);
            printf("}");
        }
        printf("}}");
        return;
    }
    printf("%-10zu %7g", w->bytes, pt->mif);
    if (o->nlates)
        printf(" %5g", pt->late);
    put_f(w->t_us, 8, 3);
    put_f(bound, 10, 2);
    for (int a = 0; a < o->nalgs; a++)
        put_f(res[a].lat_mean, col_w(o->algs[a]), 2);
    for (int a = 0; a < o->nalgs; a++) {
        if (a == b->base)
            continue;
        snprintf(h, sizeof(h), "%s/%s", o->algs[b->base], o->algs[a]);
        put_f(bstat_ratio(base->lat_mean, res[a].lat_mean), col_w(h), 2);
    }
    for (int a = 0; a < o->nalgs; a++) {
        snprintf(h, sizeof(h), "%s/bnd", o->algs[a]);
        put_f(bstat_ratio(res[a].lat_mean, res[a].bound_mean), col_w(h), 2);
    }
    if (o->full) {
        for (int a = 0; a < o->nalgs; a++) {
            snprintf(h, sizeof(h), "%s:min", o->algs[a]);
            put_f(res[a].lat_rank_min, col_w(h), 2);
            put_f(res[a].lat_rank_max, col_w(h), 2);
            snprintf(h, sizeof(h), "%s:bnd", o->algs[a]);
            put_f(res[a].bound_mean, col_w(h), 2);
        }
        printf(" %6d", res[0].iters);
    }
    printf("\n");
}

/* The single-copy limit under a size's rows: memcpy time, then for each
 * algorithm the fraction of that limit it reached at the first point. */
static void print_memcpy_row(const bench_t *b, const row_t *first)
{
    const opts_t *o = &b->o;

    if (o->format != FMT_TABLE)
        return;
    printf("%-10zu %7s", first->bytes, "memcpy");
    if (o->nlates)
        printf(" %5s", "");
    put_f(first->memcpy_us, 8, 3);
    printf(" %10s", "");
    for (int a = 0; a < o->nalgs; a++) {
        double f = bstat_ratio(first->memcpy_us, first->res[a].lat_mean);
        char pc[32];
        if (isnan(f))
            snprintf(pc, sizeof(pc), "-");
        else
            snprintf(pc, sizeof(pc), "%.2g%%", 100 * f);
        printf(" %*s", col_w(o->algs[a]), pc);
    }
    printf("\n");
}

static void progress(bench_t *b, int done, int total, int coll, size_t bytes)
{
    double now = now_us();

    if (b->o.quiet || b->rank != 0 || done == total)
        return;
    /* Only sweeps longer than a few seconds, and not too often. */
    if (now - b->t_start < 3e6 || now - b->t_progress < 5e6)
        return;
    b->t_progress = now;
    double el = (now - b->t_start) / 1e6;
    fprintf(stderr, "arcoll-bench: %d/%d points (%s %zu B done), %.0f s\n", done, total,
            colls[coll].name, bytes, el);
}

/* ---- The plot (gnuplot) ---- */

/* Binary sizes: "512", "4K", "1M" for axes; "512 B", "4 KiB" with unit. */
static const char *size_label(size_t v, char *buf, size_t len, int unit)
{
    if (unit) {
        if (v >= (1u << 20) && v % (1u << 20) == 0)
            snprintf(buf, len, "%zu MiB", v >> 20);
        else if (v >= 1024 && v % 1024 == 0)
            snprintf(buf, len, "%zu KiB", v >> 10);
        else
            snprintf(buf, len, "%zu B", v);
        return buf;
    }
    if (v >= (1u << 20) && v % (1u << 20) == 0)
        snprintf(buf, len, "%zuM", v >> 20);
    else if (v >= 1024 && v % 1024 == 0)
        snprintf(buf, len, "%zuK", v >> 10);
    else
        snprintf(buf, len, "%zu", v);
    return buf;
}

/* A datablock of the rows of one collective selected by point (p >= 0,
 * x = size) or by size (p < 0, x = MIF): x, bound, memcpy, latencies. Sets
 * *ymin to a decade below everything but memcpy, which may be clipped where
 * it is far below the collectives (small sizes). */
static void plot_block(FILE *g, const bench_t *b, int coll, int p, size_t bytes, const char *name,
                       double *ymin)
{
    double lo = INFINITY;

    fprintf(g, "%s << EOD\n", name);
    for (int i = 0; i < b->nrows; i++) {
        const row_t *w = &b->rows[i];
        if (w->coll != coll || (p >= 0 ? w->point != p : w->bytes != bytes))
            continue;
        double bound = bstat_mean_bound(w->res, b->o.nalgs);
        if (p >= 0)
            fprintf(g, "%zu", w->bytes);
        else
            fprintf(g, "%g", b->points[w->point].mif);
        fprintf(g, " %g %g", bound > 0 ? bound : NAN, w->memcpy_us > 0 ? w->memcpy_us : NAN);
        if (bound > 0)
            lo = fmin(lo, bound);
        for (int a = 0; a < b->o.nalgs; a++) {
            fprintf(g, " %g", w->res[a].lat_mean);
            if (w->res[a].lat_mean > 0)
                lo = fmin(lo, w->res[a].lat_mean);
        }
        fprintf(g, "\n");
    }
    fprintf(g, "EOD\n");
    *ymin = isfinite(lo) ? pow(10, floor(log10(lo))) : 0.01;
}

static const char *point_title(const bench_t *b, int p, char *buf, size_t len)
{
    const point_t *pt = &b->points[p];
    if (pt->late >= 0)
        snprintf(buf, len, "MIF %g, %g%% of ranks late", pt->mif, 100 * pt->late);
    else if (pt->mif == 0)
        snprintf(buf, len, "MIF 0 (no skew)");
    else
        snprintf(buf, len, "MIF %g", pt->mif);
    return buf;
}

/* Latency vs size per algorithm (log-log), one panel per collective and
 * point; with several MIFs also latency vs MIF at the smallest and largest
 * size. Returns 0 or an error already reported. */
static int plot(const bench_t *b)
{
    const opts_t *o = &b->o;
    int cl[NCOLLS], ncolls = 0, nmifp = 0;
    size_t mifsz[2];
    char title[96], lbl[32], name[32];
    double ymin;
    FILE *g;

    if (strchr(o->plot, '\'') != NULL || strchr(o->plot, '\\') != NULL) {
        fprintf(stderr, "arcoll-bench: --plot: no quotes or backslashes in the file name\n");
        return 1;
    }
    for (int c = 0; c < NCOLLS; c++)
        if (o->colls & (1 << c))
            cl[ncolls++] = c;
    if (o->nlates == 0 && o->nmifs > 1) {
        mifsz[nmifp++] = b->sizes[0];
        if (b->nsizes > 1)
            mifsz[nmifp++] = b->sizes[b->nsizes - 1];
    }
    int ncol = b->npoints + nmifp;
    g = popen("gnuplot", "w");
    if (g == NULL) {
        fprintf(stderr, "arcoll-bench: cannot start gnuplot: %s\n", strerror(errno));
        return 1;
    }
    fprintf(g, "set terminal pngcairo size %d,%d font 'sans,10' noenhanced\n", 500 * ncol,
            480 * ncolls + 40);
    fprintf(g, "set output '%s'\n", o->plot);
    fprintf(g,
            "set multiplot layout %d,%d title 'arcoll-bench %s: %d ranks, %s skew, seed "
            "%llu; latency = mean over ranks of own entry to own exit' font 'sans,12'\n",
            ncolls, ncol, ARCOLL_VERSION_STRING, b->n, b->spin ? "spin" : "sleep",
            (unsigned long long)o->seed);
    fprintf(g, "set grid\nset key below horizontal maxcols 3 font 'sans,9'\n"
               "set logscale y 10\nset format y '%%g'\nset ylabel 'latency (us)'\n"
               "set style line 100 lc rgb 'gray30' dt 2 lw 2\n"
               "set style line 101 lc rgb 'black' dt 3 lw 2\n");
    for (int ci = 0; ci < ncolls; ci++) {
        int c = cl[ci];
        /* Tics at every other power of two of the sweep, labelled 1K, 1M. */
        fprintf(g, "set logscale x 2\nset xlabel '%s'\nset xtics (", colls[c].size_is);
        for (int si = 0; si<b->nsizes; si += b->nsizes> 8 ? 2 : 1)
            fprintf(g, "%s'%s' %zu", si ? ", " : "", size_label(b->sizes[si], lbl, sizeof(lbl), 0),
                    b->sizes[si]);
        /* A margin: a tic exactly on a log-scale range end can be dropped. */
        fprintf(g, ")\nset xrange [%g:%g]\n", b->sizes[0] / 1.2, b->sizes[b->nsizes - 1] * 1.2);
        for (int p = 0; p < b->npoints; p++) {
            snprintf(name, sizeof(name), "$c%dp%d", c, p);
            plot_block(g, b, c, p, 0, name, &ymin);
            fprintf(g, "set yrange [%g:*]\nset title '%s, %s'\nplot ", ymin, colls[c].name,
                    point_title(b, p, title, sizeof(title)));
            for (int a = 0; a < o->nalgs; a++)
                fprintf(g, "%s using 1:%d with linespoints lw 2 pt %d title '%s', ", name, 4 + a,
                        5 + 2 * a, o->algs[a]);
            fprintf(g,
                    "%s using 1:2 with lines ls 100 title 'arrival bound', "
                    "%s using 1:3 with lines ls 101 title 'memcpy of %d x size, 1 core'\n",
                    name, name, colls[c].memcpy_one ? 1 : b->n);
        }
        fprintf(g, "unset logscale x\nset xtics autofreq\nset xrange [-1:*]\n"
                   "set xlabel 'MIF (delay bound / T)'\n");
        for (int k = 0; k < nmifp; k++) {
            size_t at = mifsz[k];
            for (int si = 0; si < b->nsizes && !size_ok(c, at); si++)
                at = b->sizes[si]; /* reductions skip sizes below one double */
            snprintf(name, sizeof(name), "$c%dm%d", c, k);
            plot_block(g, b, c, -1, at, name, &ymin);
            fprintf(g, "set yrange [%g:*]\nset title '%s, size %s, vs MIF'\nplot ", ymin,
                    colls[c].name, size_label(at, lbl, sizeof(lbl), 1));
            for (int a = 0; a < o->nalgs; a++)
                fprintf(g, "%s using 1:%d with linespoints lw 2 pt %d title '%s', ", name, 4 + a,
                        5 + 2 * a, o->algs[a]);
            fprintf(g, "%s using 1:2 with linespoints ls 100 pt 1 title 'arrival bound'\n", name);
        }
    }
    fprintf(g, "unset multiplot\n");
    int st = pclose(g);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 127)
            fprintf(stderr, "arcoll-bench: gnuplot not found (Debian: apt-get install "
                            "gnuplot-nox); no plot written\n");
        else
            fprintf(stderr, "arcoll-bench: gnuplot failed; %s may be incomplete\n", o->plot);
        return 1;
    }
    return 0;
}

/* ---- Options ---- */

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: mpirun -np N arcoll-bench%s [options]\n"
        "  -t, --coll LIST       collectives, comma-separated (both): alltoall, allgather,\n"
        "                        allgatherv, alltoallv, reduce_scatter (_block), allreduce;\n"
        "                        both = alltoall,allgather; all = every one\n"
        "  -a, --alg LIST        algorithms side by side (pap,direct%s): pap, direct, and\n"
        "                        each -t collective's ARCOLL_*_ALG names (e.g. ring, rdd, "
        "rdh,\n"
        "                        shm_direct, pap_shm; auto)%s; every one must serve every "
        "-t;\n"
        "                        ALG/copy, ALG/zcopy, ALG/auto: that algorithm on that data\n"
        "                        path (pap/copy,pap/zcopy compares the paths in one run)\n"
        "  -b, --baseline ALG    numerator of the ratio columns (mpi, else direct, else "
        "the first)\n"
        "  -m, --message-size [MIN:]MAX   k/M suffixes (1:1M): bytes per peer (alltoall), "
        "per\n"
        "                        rank (allgather), their means (v-forms), per block\n"
        "                        (reduce_scatter), of the vector (allreduce); the "
        "reductions\n"
        "                        sum floor(size / 8) doubles and skip sizes below 8\n"
        "  -D, --dist uniform|random|sparse|one-heavy   v-forms' counts: all the size;\n"
        "                        random 0..2x per pair and call; sparse 90%% 0, else 10x;\n"
        "                        one-heavy the size, but 100x from each rank to one\n"
        "                        (alltoallv: to rank + 1 + call mod (n - 1); allgatherv:\n"
        "                        from rank call mod n) (uniform)\n"
        "  -i, --iterations N    timed iterations (1000; a tenth above %d B)\n"
        "  -x, --warmup N        warm-up iterations (200; a tenth above %d B)\n"
        "  -f, --full            also min/max per-rank latency and iterations\n"
        "  -c, --validation      check the data of every iteration of every algorithm\n"
        "  -M, --mif LIST        maximum imbalance factors, 0 = no skew (0,32; 128 with "
        "--late)\n"
        "  -L, --late LIST       late mode: these fractions of ranks wait MIF x T, the "
        "rest none\n"
        "  -s, --skew spin|sleep how a rank waits (spin; sleep when ranks outnumber "
        "cores)\n"
        "  -S, --seed N          seed of the delays and of random, sparse counts (1)\n"
        "  -p, --path copy|zcopy|auto   arcoll data path (ARCOLL_PATH)\n"
        "  -F, --format table|csv|json  output (table)\n"
        "  -P, --plot FILE.png   latency vs size (and vs MIF) with gnuplot\n"
        "  -q, --quiet           no progress line on stderr\n"
        "      --arrivals auto|clock|delays   bound from CLOCK_MONOTONIC arrivals (one "
        "host) or\n"
        "                        from each rank's measured delay after the barrier (auto: "
        "clock\n"
        "                        when all ranks share a host)\n"
        "      --stat mean|median   latency and bound of a point: the mean over ranks and\n"
        "                        iterations, or the median over iterations of the mean over\n"
        "                        ranks, robust to preempted iterations on a busy machine (mean)\n"
        "  -h, --help\n",
#ifdef ARCOLL_BENCH_MPI
        "-mpi", ",mpi",
        ",\n                        mpi (MPI_Alltoall(v), MPI_Allgather(v), "
        "MPI_Reduce_scatter_block,\n                        MPI_Allreduce)",
#else
        "", "", "",
#endif
        BSTAT_LARGE_SIZE, BSTAT_LARGE_SIZE);
}

static int parse_list(char *arg, double *v, int cap, double lo, double hi, const char *what,
                      char *err, size_t errlen)
{
    int n = 0;
    char *save, *end;

    for (char *tok = strtok_r(arg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        double x = strtod(tok, &end);
        if (*end != '\0' || end == tok || !(x >= lo && x <= hi) || n == cap) {
            snprintf(err, errlen, "%s: bad value or more than %d values: %s", what, cap, tok);
            return -1;
        }
        v[n++] = x;
    }
    if (n == 0)
        snprintf(err, errlen, "%s: empty list", what);
    return n > 0 ? n : -1;
}

static int parse_int(const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || end == s || v < 0 || v > INT_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

/* Returns 0, 1 for --help, or -1 with err set. */
static int parse(int argc, char **argv, opts_t *o, char *err, size_t errlen)
{
    static const struct option lopts[] = {
        {"coll", required_argument, NULL, 't'},
        {"dist", required_argument, NULL, 'D'},
        {"alg", required_argument, NULL, 'a'},
        {"baseline", required_argument, NULL, 'b'},
        {"message-size", required_argument, NULL, 'm'},
        {"iterations", required_argument, NULL, 'i'},
        {"warmup", required_argument, NULL, 'x'},
        {"full", no_argument, NULL, 'f'},
        {"validation", no_argument, NULL, 'c'},
        {"mif", required_argument, NULL, 'M'},
        {"late", required_argument, NULL, 'L'},
        {"skew", required_argument, NULL, 's'},
        {"seed", required_argument, NULL, 'S'},
        {"path", required_argument, NULL, 'p'},
        {"format", required_argument, NULL, 'F'},
        {"plot", required_argument, NULL, 'P'},
        {"quiet", no_argument, NULL, 'q'},
        {"arrivals", required_argument, NULL, 'A'},
        {"stat", required_argument, NULL, 'E'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char *save, *end;
    int c;

    memset(o, 0, sizeof(*o));
    o->colls = (1 << COLL_ALLTOALL) | (1 << COLL_ALLGATHER);
    o->algs[o->nalgs++] = "pap";
    o->algs[o->nalgs++] = "direct";
#ifdef ARCOLL_BENCH_MPI
    o->algs[o->nalgs++] = "mpi";
#endif
    o->min = 1;
    o->max = 1 << 20;
    o->iters = 1000;
    o->warmup = 200;
    o->skew = -1;
    o->arrivals = -1;
    o->seed = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "t:a:b:m:i:x:fcvM:L:s:S:p:F:P:qhD:", lopts, NULL)) != -1) {
        switch (c) {
        case 't':
            o->colls = 0;
            for (char *tok = strtok_r(optarg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                int bits = strcmp(tok, "both") == 0  ? 1 << COLL_ALLTOALL | 1 << COLL_ALLGATHER
                           : strcmp(tok, "all") == 0 ? (1 << NCOLLS) - 1
                           : strcmp(tok, "reduce_scatter_block") == 0 ? 1 << COLL_REDUCE_SCATTER
                                                                      : 0;
                for (int k = 0; k < NCOLLS && bits == 0; k++)
                    bits = strcmp(tok, colls[k].name) == 0 ? 1 << k : 0;
                if (bits == 0) {
                    snprintf(err, errlen,
                             "--coll: alltoall, allgather, allgatherv, alltoallv, "
                             "reduce_scatter, allreduce, both or all, not %s",
                             tok);
                    return -1;
                }
                o->colls |= bits;
            }
            if (!o->colls) {
                snprintf(err, errlen, "--coll: empty list");
                return -1;
            }
            break;
        case 'D':
            o->dist = bstat_parse_dist(optarg);
            if (o->dist < 0) {
                snprintf(err, errlen, "--dist: uniform, random, sparse or one-heavy, not %s",
                         optarg);
                return -1;
            }
            break;
        case 'a':
            o->nalgs = 0;
            for (char *tok = strtok_r(optarg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (o->nalgs == MAX_ALGS) {
                    snprintf(err, errlen, "--alg: at most %d algorithms", MAX_ALGS);
                    return -1;
                }
                char *slash = strchr(tok, '/');
                size_t nlen = slash ? (size_t)(slash - tok) : strlen(tok);
                if (nlen == 0 || nlen >= sizeof(o->alg_name[0]) ||
                    (slash && strcmp(slash + 1, "copy") != 0 && strcmp(slash + 1, "zcopy") != 0 &&
                     strcmp(slash + 1, "auto") != 0)) {
                    snprintf(err, errlen, "--alg %s: expected ALG or ALG/copy|zcopy|auto", tok);
                    return -1;
                }
                memcpy(o->alg_name[o->nalgs], tok, nlen);
                o->alg_name[o->nalgs][nlen] = '\0';
                o->alg_path[o->nalgs] = slash ? slash + 1 : NULL;
                o->algs[o->nalgs++] = tok;
            }
            if (o->nalgs == 0) {
                snprintf(err, errlen, "--alg: empty list");
                return -1;
            }
            break;
        case 'b': o->baseline = optarg; break;
        case 'm': {
            char *colon = strchr(optarg, ':');
            if (colon != NULL)
                *colon = '\0';
            if ((colon != NULL && bstat_parse_size(optarg, &o->min) != 0) ||
                bstat_parse_size(colon != NULL ? colon + 1 : optarg, &o->max) != 0 || o->min < 1 ||
                o->max < o->min || o->max > INT_MAX / 2) {
                snprintf(err, errlen, "--message-size: [MIN:]MAX with 1 <= MIN <= MAX < 1G");
                return -1;
            }
            break;
        }
        case 'i':
            if (parse_int(optarg, &o->iters) != 0 || o->iters < 1) {
                snprintf(err, errlen, "--iterations: a positive number");
                return -1;
            }
            break;
        case 'x':
            if (parse_int(optarg, &o->warmup) != 0) {
                snprintf(err, errlen, "--warmup: a number >= 0");
                return -1;
            }
            break;
        case 'f': o->full = 1; break;
        case 'c':
        case 'v': /* -v: validation in the first version's options, kept for scripts */
            o->validate = 1;
            break;
        case 'M':
            o->nmifs = parse_list(optarg, o->mifs, MAX_MIFS, 0, 1e6, "--mif", err, errlen);
            if (o->nmifs < 0)
                return -1;
            o->mif_set = 1;
            break;
        case 'L':
            o->nlates = parse_list(optarg, o->lates, MAX_LATES, 0, 1, "--late", err, errlen);
            if (o->nlates < 0)
                return -1;
            break;
        case 's':
            o->skew = strcmp(optarg, "spin") == 0 ? 1 : strcmp(optarg, "sleep") == 0 ? 0 : -2;
            if (o->skew == -2) {
                snprintf(err, errlen, "--skew: spin or sleep, not %s", optarg);
                return -1;
            }
            break;
        case 'S':
            errno = 0;
            o->seed = strtoull(optarg, &end, 0);
            if (errno != 0 || *end != '\0' || end == optarg) {
                snprintf(err, errlen, "--seed: a number, not %s", optarg);
                return -1;
            }
            break;
        case 'p': o->path = optarg; break;
        case 'F':
            o->format = strcmp(optarg, "table") == 0  ? FMT_TABLE
                        : strcmp(optarg, "csv") == 0  ? FMT_CSV
                        : strcmp(optarg, "json") == 0 ? FMT_JSON
                                                      : -1;
            if (o->format < 0) {
                snprintf(err, errlen, "--format: table, csv or json, not %s", optarg);
                return -1;
            }
            break;
        case 'P': o->plot = optarg; break;
        case 'q': o->quiet = 1; break;
        case 'E':
            o->median = strcmp(optarg, "median") == 0 ? 1 : strcmp(optarg, "mean") == 0 ? 0 : -1;
            if (o->median < 0) {
                snprintf(err, errlen, "--stat: mean or median, not %s", optarg);
                return -1;
            }
            break;
        case 'A':
            o->arrivals = strcmp(optarg, "clock") == 0    ? 1
                          : strcmp(optarg, "delays") == 0 ? 0
                          : strcmp(optarg, "auto") == 0   ? -1
                                                          : -2;
            if (o->arrivals == -2) {
                snprintf(err, errlen, "--arrivals: auto, clock or delays, not %s", optarg);
                return -1;
            }
            break;
        case 'h': return 1;
        default:
            snprintf(err, errlen, "unknown option or missing value: %s", argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument: %s", argv[optind]);
        return -1;
    }
    if (!o->mif_set) {
        o->nmifs = o->nlates ? 1 : 2;
        o->mifs[0] = o->nlates ? 128 : 0; /* 002 Fig. 10/13 use MIF 128 for late ranks */
        o->mifs[1] = 32;
    }
    return 0;
}

/* Algorithm names, the baseline, the points and the sizes. */
static int setup_sweep(bench_t *b, char *err, size_t errlen)
{
    opts_t *o = &b->o;

    b->base = -1;
    for (int a = 0; a < o->nalgs; a++) {
        if (o->alg_name[a][0] == '\0') /* a default column: no /PATH */
            snprintf(o->alg_name[a], sizeof(o->alg_name[a]), "%s", o->algs[a]);
        b->is_mpi[a] = strcmp(o->alg_name[a], "mpi") == 0;
        if (b->is_mpi[a] && o->alg_path[a] != NULL) {
            snprintf(err, errlen, "--alg %s: the MPI library's path is its own", o->algs[a]);
            return -1;
        }
#ifndef ARCOLL_BENCH_MPI
        if (b->is_mpi[a]) {
            snprintf(err, errlen,
                     "--alg mpi: this binary is built without MPI; use "
                     "arcoll-bench-mpi");
            return -1;
        }
#endif
        for (int k = 0; k < a; k++)
            if (strcmp(o->algs[k], o->algs[a]) == 0) {
                snprintf(err, errlen, "--alg: %s twice", o->algs[a]);
                return -1;
            }
    }
    /* The named baseline; by default mpi, else direct, else the first. */
    const char *const prefs[3] = {o->baseline ? o->baseline : "mpi", o->baseline ? "" : "direct",
                                  o->algs[0]};
    for (int pass = 0; pass < 3 && b->base < 0; pass++)
        for (int a = 0; a < o->nalgs && b->base < 0; a++)
            if (strcmp(o->algs[a], prefs[pass]) == 0)
                b->base = a;
    if (o->baseline != NULL && strcmp(o->algs[b->base], o->baseline) != 0) {
        snprintf(err, errlen, "--baseline %s is not one of --alg", o->baseline);
        return -1;
    }
    for (int m = 0; m < o->nmifs; m++) {
        if (o->nlates == 0)
            b->points[b->npoints++] = (point_t){o->mifs[m], -1};
        for (int l = 0; l < o->nlates; l++)
            b->points[b->npoints++] = (point_t){o->mifs[m], o->lates[l]};
    }
    /* A rank's v-form data is at most vtotal x the mean; MPI counts and
     * displacements are ints. */
    int v = 0, red = 0;
    for (int c = 0; c < NCOLLS; c++) {
        v |= (o->colls >> c & 1) && colls[c].vcounts;
        red |= (o->colls >> c & 1) && colls[c].reduces;
    }
    int n = arcoll_context_size(b->ctx);
    b->vtotal = bstat_vtotal(v ? o->dist : BSTAT_DIST_UNIFORM, n);
    if (o->max > INT_MAX / b->vtotal) {
        snprintf(err, errlen, "--message-size: %zu B x %zu (%s, %d ranks) does not fit an int",
                 o->max, b->vtotal, bstat_dist_names[v ? o->dist : BSTAT_DIST_UNIFORM], n);
        return -1;
    }
    if (red && o->max < sizeof(double)) {
        snprintf(err, errlen, "--message-size: reductions need at least 8 B (one double)");
        return -1;
    }
    b->nsizes = bstat_sizes(o->min, o->max, NULL, 0);
    b->sizes = calloc((size_t)b->nsizes, sizeof(size_t));
    b->t_cache = malloc((size_t)b->nsizes * sizeof(double));
    b->memcpy_cache[0] = malloc((size_t)b->nsizes * sizeof(double));
    b->memcpy_cache[1] = malloc((size_t)b->nsizes * sizeof(double));
    b->rows = calloc((size_t)b->nsizes * NCOLLS * (size_t)b->npoints, sizeof(row_t));
    if (b->sizes == NULL || b->t_cache == NULL || b->memcpy_cache[0] == NULL ||
        b->memcpy_cache[1] == NULL || b->rows == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    bstat_sizes(o->min, o->max, b->sizes, b->nsizes);
    for (int i = 0; i < b->nsizes; i++)
        b->t_cache[i] = b->memcpy_cache[0][i] = b->memcpy_cache[1][i] = -1;
    return 0;
}

#ifdef ARCOLL_BENCH_MPI
/* What MPI the baseline is and whether it yields when idle, read through
 * MPI_T so the header says what was really in effect. */
static void mpi_describe(bench_t *b)
{
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0, provided, ncvar = 0, yield = -1;

    MPI_Get_library_version(ver, &len);
    ver[strcspn(ver, ",\n")] = '\0';
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) == MPI_SUCCESS) {
        MPI_T_cvar_get_num(&ncvar);
        for (int i = 0; i < ncvar && yield < 0; i++) {
            char name[128], desc[8];
            int nlen = sizeof(name), dlen = sizeof(desc), verb, bind, scope, count;
            MPI_Datatype dt;
            MPI_T_enum en;
            MPI_T_cvar_handle h;
            if (MPI_T_cvar_get_info(i, name, &nlen, &verb, &dt, &en, desc, &dlen, &bind, &scope) !=
                    MPI_SUCCESS ||
                strcmp(name, "mpi_yield_when_idle") != 0)
                continue;
            if (MPI_T_cvar_handle_alloc(i, NULL, &h, &count) == MPI_SUCCESS) {
                union {
                    int i;
                    char c[16];
                } v = {0};
                if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS)
                    yield = dt == MPI_INT ? v.i != 0 : v.c[0] != 0;
                MPI_T_cvar_handle_free(&h);
            }
        }
        MPI_T_finalize();
    }
    snprintf(b->mpi_info, sizeof(b->mpi_info), "mpi: %.100s, mpi_yield_when_idle %s", ver,
             yield < 0 ? "unknown"
             : yield   ? "on"
                       : "off");
}
#endif

/* Hosts (for the clock basis and ranks per host), memory, the pair team,
 * buffers. */
static int setup_run(bench_t *b)
{
    char host[HOST_LEN] = "", *hosts = NULL;
    uint64_t mem = 0, *mems = NULL;
    int rc = 1;

    b->world = arcoll_team_world(b->ctx);
    b->rank = arcoll_context_rank(b->ctx);
    b->n = arcoll_context_size(b->ctx);
    b->nnodes = arcoll_context_nnodes(b->ctx);
    b->cores = sysconf(_SC_NPROCESSORS_ONLN);
    b->delay = calloc((size_t)b->n, sizeof(double));
    b->rank_sum = calloc((size_t)b->n, sizeof(double));
    b->perm = calloc((size_t)b->n, sizeof(int));
    b->bar = calloc((size_t)b->n, sizeof(uint64_t));
    hosts = calloc((size_t)b->n, HOST_LEN);
    mems = calloc((size_t)b->n, sizeof(uint64_t));
    b->buflen = b->o.max * b->vtotal;
    b->sc = calloc((size_t)b->n, sizeof(size_t));
    b->sd = calloc((size_t)b->n, sizeof(size_t));
    b->rc = calloc((size_t)b->n, sizeof(size_t));
    b->rd = calloc((size_t)b->n, sizeof(size_t));
    b->isc = calloc((size_t)b->n, sizeof(int));
    b->isd = calloc((size_t)b->n, sizeof(int));
    b->irc = calloc((size_t)b->n, sizeof(int));
    b->ird = calloc((size_t)b->n, sizeof(int));
    b->s = aligned_alloc(4096, (b->buflen + 4095) / 4096 * 4096);
    b->r = aligned_alloc(4096, (b->buflen + 4095) / 4096 * 4096);
    for (int a = 0; a < b->o.nalgs; a++)
        if (b->is_mpi[a] && b->ms == NULL) {
            b->ms = aligned_alloc(4096, (b->buflen + 4095) / 4096 * 4096);
            b->mr = aligned_alloc(4096, (b->buflen + 4095) / 4096 * 4096);
            if (b->ms == NULL || b->mr == NULL)
                goto nomem;
            memset(b->ms, 1, b->buflen);
            memset(b->mr, 0, b->buflen);
        }
    if (b->delay == NULL || b->rank_sum == NULL || b->perm == NULL || b->bar == NULL ||
        hosts == NULL || mems == NULL || b->s == NULL || b->r == NULL || b->sc == NULL ||
        b->sd == NULL || b->rc == NULL || b->rd == NULL || b->isc == NULL || b->isd == NULL ||
        b->irc == NULL || b->ird == NULL)
        goto nomem;
    /* Touch every page now rather than inside a timed call. */
    memset(b->s, 1, b->buflen);
    memset(b->r, 0, b->buflen);

    /* One host means one CLOCK_MONOTONIC: real arrivals can be compared. */
    gethostname(host, sizeof(host) - 1);
    if (share(b, host, hosts, HOST_LEN, "sharing host names"))
        goto out;
    b->one_host = 1;
    b->local_n = 0;
    for (int j = 0; j < b->n; j++) {
        b->one_host &= strcmp(hosts + (size_t)j * HOST_LEN, hosts) == 0;
        b->local_n += strcmp(hosts + (size_t)j * HOST_LEN, host) == 0;
    }
    b->spin = b->o.skew >= 0 ? b->o.skew : b->local_n <= b->cores;
    if (b->o.arrivals == 1 && !b->one_host) {
        fprintf(stderr,
                "arcoll-bench[%d]: --arrivals clock: the ranks span several hosts, "
                "which share no clock\n",
                b->rank);
        goto out;
    }
    b->shared_clock = b->o.arrivals != 0 && b->one_host;
    if (!b->spin) {
        /* What a sleeping rank's arrival really looks like: all ranks at once,
         * as in the sweep. The bound uses real arrivals either way. */
        double late = 0, *all = b->rank_sum;
        for (int i = 0; i < 20; i++) {
            double until = now_us() + 20;
            wait_until(until, 0);
            late += now_us() - until;
        }
        late /= 20;
        if (share(b, &late, all, sizeof(late), "sharing sleep lateness"))
            goto out;
        for (int j = 0; j < b->n; j++)
            b->overshoot_us += all[j] / b->n;
    }

    /* Before the pair team, which only the bench needs. */
    if (check(b, arcoll_context_memory(b->ctx, &b->mem_self), "arcoll_context_memory"))
        goto out;
    mem = b->mem_self;
    if (share(b, &mem, mems, sizeof(mem), "sharing memory use"))
        goto out;
    b->mem_self = mems[0];
    b->mem_min = SIZE_MAX;
    for (int j = 0; j < b->n; j++) {
        b->mem_min = mems[j] < b->mem_min ? mems[j] : b->mem_min;
        b->mem_max = mems[j] > b->mem_max ? mems[j] : b->mem_max;
    }

    int two[2] = {0, 1};
    if (check(b, arcoll_team_create(b->ctx, two, b->rank < 2 && b->n > 1 ? 2 : 0, &b->pair),
              "pair team for T"))
        goto out;
    rc = 0;
    goto out;
nomem:
    fprintf(stderr, "arcoll-bench[%d]: out of memory (%zu B buffers)\n", b->rank, b->buflen);
out:
    free(hosts);
    free(mems);
    return rc;
}

/* Every rank's RC QPs and registered bytes after the run, as min/mean/max
 * into out[0..2] and out[3..5] (the same on every rank). */
static int resources(bench_t *b, double out[6])
{
    arcoll_resources_t mine, *all = calloc((size_t)b->n, sizeof(mine));
    int rc = 1;

    if (all == NULL) {
        fprintf(stderr, "arcoll-bench[%d]: out of memory\n", b->rank);
        return 1;
    }
    if (check(b, arcoll_context_resources(b->ctx, &mine), "arcoll_context_resources") ||
        share(b, &mine, all, sizeof(mine), "sharing resources"))
        goto out;
    out[0] = out[3] = INFINITY;
    out[1] = out[2] = out[4] = out[5] = 0;
    for (int j = 0; j < b->n; j++) {
        double q = all[j].qps, m = (double)all[j].registered_bytes;
        out[0] = q < out[0] ? q : out[0];
        out[1] += q / b->n;
        out[2] = q > out[2] ? q : out[2];
        out[3] = m < out[3] ? m : out[3];
        out[4] += m / b->n;
        out[5] = m > out[5] ? m : out[5];
    }
    rc = 0;
out:
    free(all);
    return rc;
}

/* The whole sweep: collectives, sizes, points. Returns like run_point. */
static int sweep(bench_t *b)
{
    const opts_t *o = &b->o;
    int total = 0, done = 0;

    for (int c = 0; c < NCOLLS; c++)
        for (int si = 0; si < b->nsizes; si++)
            total += (o->colls >> c & 1) * size_ok(c, b->sizes[si]) * b->npoints;
    b->t_start = b->t_progress = now_us();
    for (int c = 0; c < NCOLLS; c++) {
        if (!(o->colls & (1 << c)))
            continue;
        int si0 = 0;
        while (!size_ok(c, b->sizes[si0])) /* setup_sweep checked that the largest is */
            si0++;
        /* Untimed: first calls set up channels and pages and fault in code. */
        bstat_point_t discard[MAX_ALGS];
        point_t quiet = {0, -1};
        int prc = run_point(b, c, b->sizes[si0], &quiet, 0, discard);
        if (prc != 0)
            return prc;
        if (b->rank == 0)
            print_coll_header(b, c);
        for (int si = si0; si < b->nsizes; si++) {
            size_t bytes = b->sizes[si];
            row_t *first = NULL;
            int one = colls[c].memcpy_one;
            double *mc = &b->memcpy_cache[one][si];
            /* T and the memcpy limit do not depend on the collective. */
            if (b->t_cache[si] < 0 && measure_t(b, bytes, &b->t_cache[si]))
                return 1;
            if (*mc < 0 && measure_memcpy(b, one ? bytes : bytes * (size_t)b->n, mc))
                return 1;
            for (int p = 0; p < b->npoints; p++) {
                row_t *w = &b->rows[b->nrows];
                *w = (row_t){.coll = c,
                             .point = p,
                             .bytes = bytes,
                             .t_us = b->t_cache[si],
                             .memcpy_us = *mc};
                prc = run_point(b, c, bytes, &b->points[p], w->t_us, w->res);
                if (prc != 0)
                    return prc;
                b->nrows++;
                if (first == NULL)
                    first = w;
                if (b->rank == 0) {
                    print_row(b, w);
                    fflush(stdout);
                }
                progress(b, ++done, total, c, bytes);
            }
            if (b->rank == 0)
                print_memcpy_row(b, first);
        }
    }
    return 0;
}

static void bench_free(bench_t *b)
{
    free(b->s);
    free(b->r);
    free(b->ms);
    free(b->mr);
    free(b->delay);
    free(b->rank_sum);
    free(b->perm);
    free(b->bar);
    free(b->arrive);
    free(b->lat);
    free(b->med);
    free(b->sizes);
    free(b->t_cache);
    free(b->memcpy_cache[0]);
    free(b->memcpy_cache[1]);
    free(b->sc);
    free(b->sd);
    free(b->rc);
    free(b->rd);
    free(b->isc);
    free(b->isd);
    free(b->irc);
    free(b->ird);
    free(b->rows);
}

int main(int argc, char **argv)
{
    static bench_t bench;
    bench_t *b = &bench;
    char err[256] = "";
    int rc = 1, prc, setup_ok = 0;
    double res[6] = {0};

    /* The default 50 us timer slack would stretch every short sleep. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    prc = parse(argc, argv, &b->o, err, sizeof(err));
    if (prc == 1) {
        usage(stdout);
        return 0;
    }
#ifdef ARCOLL_BENCH_MPI
    int mrank, msize;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &mrank);
    MPI_Comm_size(MPI_COMM_WORLD, &msize);
    if (prc != 0) {
        if (mrank == 0) {
            fprintf(stderr, "arcoll-bench: %s\n", err);
            usage(stderr);
        }
        MPI_Finalize();
        return 2;
    }
    arcoll_oob_t oob = {oob_allgather, oob_barrier, NULL, mrank, msize};
    if (check(b, arcoll_init(&oob, &b->ctx), "arcoll_init"))
        MPI_Abort(MPI_COMM_WORLD, 1);
#else
    if (check(b, arcoll_init(NULL, &b->ctx), "arcoll_init"))
        return 1;
    if (prc != 0) {
        if (arcoll_context_rank(b->ctx) == 0) {
            fprintf(stderr, "arcoll-bench: %s\n", err);
            usage(stderr);
        }
        arcoll_finalize(b->ctx);
        return 2;
    }
#endif
    /* Option errors are the same on every rank: all stop, one speaks. */
    if (setup_sweep(b, err, sizeof(err)) != 0) {
        if (arcoll_context_rank(b->ctx) == 0)
            fprintf(stderr, "arcoll-bench: %s\n", err);
        rc = 2;
        goto out_fin;
    }
    /* The library says which algorithm serves which collective. */
    for (int a = 0; a < b->o.nalgs; a++)
        for (int c = 0; c < NCOLLS; c++)
            if (!b->is_mpi[a] && b->o.colls & (1 << c) &&
                arcoll_config_set(b->ctx, colls[c].alg_var, b->o.alg_name[a]) != ARCOLL_OK) {
                if (arcoll_context_rank(b->ctx) == 0)
                    fprintf(stderr, "arcoll-bench: --alg %s: not an algorithm of %s (%s)\n",
                            b->o.algs[a], colls[c].name, arcoll_last_error(b->ctx));
                rc = 2;
                goto out_fin;
            }
    if (b->o.path && check(b, arcoll_config_set(b->ctx, "ARCOLL_PATH", b->o.path), "--path")) {
        rc = 2;
        goto out_fin;
    }
    const char *cur = arcoll_config_get(b->ctx, "ARCOLL_PATH");
    snprintf(b->base_path, sizeof(b->base_path), "%s", cur ? cur : "auto");
    if (setup_run(b) != 0)
        goto out_local;
    setup_ok = 1;
    b->arrive = malloc((size_t)b->o.iters * (size_t)b->n * sizeof(double));
    b->lat = malloc((size_t)b->o.iters * (size_t)b->n * sizeof(double));
    b->med = malloc((size_t)b->o.iters * 2 * sizeof(double));
    if (b->arrive == NULL || b->lat == NULL || b->med == NULL) {
        fprintf(stderr, "arcoll-bench[%d]: out of memory\n", b->rank);
        goto out_local;
    }
#ifdef ARCOLL_BENCH_MPI
    mpi_describe(b);
#endif
    if (b->rank == 0) {
        if (b->local_n > b->cores)
            fprintf(stderr, "arcoll-bench: warning: %d ranks on %ld cores: %s\n", b->local_n,
                    b->cores,
                    b->spin ? "spinning as asked (--skew spin): a spinning late rank steals the "
                              "core an early rank needs, so latencies are inflated"
                            : "injecting skew by sleeping (a spinning rank would steal a core)");
        print_header(b);
        b->json_first = 1;
    }
    prc = sweep(b);
    if (prc == 1)
        goto out_local;
    rc = prc == 0 ? 0 : 1;
    if (rc == 0 && resources(b, res) != 0)
        goto out_local;
    if (b->rank == 0) {
        FILE *f = b->o.format == FMT_TABLE ? stdout : stderr;
        if (b->o.format == FMT_JSON && rc == 0)
            printf("\n ],\n \"resources\": {\"rc_qps\": [%.0f, %.3g, %.0f], "
                   "\"registered_bytes\": [%.0f, %.6g, %.0f]},\n"
                   " \"validation\": {\"checked\": %ld, \"failed\": %ld}}\n",
                   res[0], res[1], res[2], res[3], res[4], res[5], b->checked, b->failed);
        fflush(stdout); /* the data before the closing lines on stderr */
        if (rc == 0 && b->o.format != FMT_JSON)
            fprintf(f,
                    "%s# resources per process: RC QPs min/mean/max %.0f/%.3g/%.0f, registered "
                    "bytes min/mean/max %.0f/%.6g/%.0f%s\n",
                    b->o.format == FMT_TABLE ? "\n" : "", res[0], res[1], res[2], res[3], res[4],
                    res[5],
#ifdef ARCOLL_BENCH_MPI
                    " (QPs: the algorithms run, and ranks 0-1 for T)"
#else
                    " (QPs: the algorithms run, the barrier's direct allgather wires every pair)"
#endif
            );
        if (b->o.validate)
            fprintf(f, "%s# validation: %ld passed, %ld failed (calls checked over %d rank%s)\n",
                    b->o.format == FMT_TABLE ? "\n" : "", b->checked * b->n - b->failed, b->failed,
                    b->n, b->n > 1 ? "s" : "");
        fprintf(f, "# %.1f s\n", (now_us() - b->t_start) / 1e6);
    }
out_fin:
    /* Every rank gets here together, so the collective teardown is safe. */
    if (setup_ok)
        arcoll_team_destroy(b->ctx, b->pair);
    arcoll_finalize(b->ctx);
#ifdef ARCOLL_BENCH_MPI
    MPI_Finalize();
#endif
    fflush(stdout);
    if (rc == 0 && b->rank == 0 && b->o.plot != NULL && plot(b) != 0)
        rc = 1;
    bench_free(b);
    return rc;

out_local:
    /* This rank alone failed: a collective teardown would wait for the
     * others forever. The launcher ends the job when a rank exits non-zero. */
#ifdef ARCOLL_BENCH_MPI
    MPI_Abort(MPI_COMM_WORLD, 1);
#endif
    bench_free(b);
    return 1;
}
