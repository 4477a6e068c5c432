/*
 * A soak test of the PMPI shim (tests/mpi/soak.sh runs it; issue "Reliability,
 * second round", item 5): for SECONDS, random collectives the shim serves
 * (alltoall, allgather, alltoallv, allgatherv, reduce_scatter_block,
 * allreduce), blocking and nonblocking (up to 4 in flight), in place or not,
 * over MPI_BYTE, MPI_INT, MPI_DOUBLE and a derived type with a gap (3 ints
 * in an extent of 16 bytes: the shim packs it), with
 * sizes from 0 to 48 KiB per peer, on MPI_COMM_WORLD and on communicators
 * made and freed as it goes (split, dup), with random arrival skew. Every
 * byte of every result is checked.
 *
 * Resources are sampled after a warm-up (the first fifth of the time) and
 * at the end: resident memory, open descriptors, arcoll names in /dev/shm
 * and the shim's live contexts; the end must be within a stated bound of the
 * warm-up (RSS + 32 MiB, descriptors + 4, no more names, no more contexts).
 *
 *   shim_soak_test SECONDS [SEED]
 *
 * SOAK_KILL_AT=N: world rank 1 SIGKILLs itself at its call N (the fault
 * jobs of soak.sh). SOAK_FAULT_OK=1: a call that fails is counted, not a
 * failure (with ARCOLL_MPI_FAULT the shim fails one on purpose), and the
 * calls after it must still be right.
 * Last lines on rank 0: "soak: ..." figures, then
 * "shim_soak_test on N ranks: P passed, F failed".
 */
#include <dlfcn.h>
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arcoll_mpi.h"
#include "tl.h"

enum { C_A2A, C_AG, C_A2AV, C_AGV, C_RSB, C_AR, NCOLL };
static const char *const cname[NCOLL] = {
    "alltoall", "allgather", "alltoallv", "allgatherv", "reduce_scatter_block", "allreduce"};
enum { T_BYTE, T_INT, T_DOUBLE, T_TRIPLE, NTYPES };
#define MAXB  (48 * 1024) /* bytes per peer at most */
#define NPOOL 4           /* communicators besides MPI_COMM_WORLD */
#define NINF  4           /* nonblocking calls in flight at most */

static int wrank, wsize, fault_ok;
static char prefix[32];
static tl_tally_t tally = {prefix, 0, 0}; /* calls checked; the first 5 wrong ones printed */
static long faulted;
static unsigned long long bytes_checked, ncalls;
static MPI_Datatype triple; /* 3 ints in an extent of 16 bytes (a gap: packed) */

/* The same stream on every rank (choices), and one of this rank's (data). */
static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

typedef struct {
    int coll, type, inplace;
    uint64_t call;
    MPI_Comm comm;
    int n, me;
    size_t esize, count; /* element bytes; elements per block (uniform forms) */
    char *sbuf, *rbuf;
    int *sc, *sd, *rc, *rd; /* v-forms, in elements */
    int *vmem;              /* where they are allocated */
    MPI_Request req;
} job_t;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);

    if (p == NULL) {
        fprintf(stderr, "soak: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static MPI_Datatype mtype(int t)
{
    return t == T_BYTE ? MPI_BYTE : t == T_INT ? MPI_INT : t == T_DOUBLE ? MPI_DOUBLE : triple;
}

static size_t tsize(int t)
{
    return t == T_BYTE ? 1 : t == T_INT ? 4 : t == T_DOUBLE ? 8 : 16;
}

static int gap_type; /* the type of the block being checked has a gap */

/* A data-movement block from src to dst: tests/lib's pattern (tl.h). */
static void put_block(char *p, size_t bytes, uint64_t call, int src, int dst)
{
    tl_fill(p, bytes, call, src, dst);
}

static int check_block(const char *p, size_t bytes, uint64_t call, int src, int dst)
{
    char *want;
    int ok = 1;

    if (!gap_type) {
        bytes_checked += bytes;
        return tl_check(p, bytes, call, src, dst, NULL) == 0;
    }
    want = xmalloc(bytes);
    tl_fill(want, bytes, call, src, dst);
    for (size_t i = 0; i < bytes && ok; i++) {
        if (i % 16 >= 12)
            continue; /* not part of the datatype: MPI leaves it alone */
        bytes_checked++;
        ok = p[i] == want[i];
    }
    free(want);
    return ok;
}

/* Small integers as elements (tl_red_in: reductions stay exact in every type). */
static void reduce_fill(job_t *j, size_t elems)
{
    for (size_t i = 0; i < elems; i++) {
        int32_t v = (int32_t)tl_red_in(j->call, j->me, i);
        if (j->type == T_DOUBLE)
            ((double *)j->sbuf)[i] = v;
        else
            ((int32_t *)j->sbuf)[i] = v;
    }
}

static int reduce_check(const job_t *j, const char *got, size_t elems, size_t from)
{
    bytes_checked += elems * j->esize;
    for (size_t i = 0; i < elems; i++) {
        long want = (long)tl_red_sum(j->call, j->n, from + i), have;
        have = j->type == T_DOUBLE ? (long)((const double *)got)[i] : ((const int32_t *)got)[i];
        if (have != want)
            return 0;
    }
    return 1;
}

/* Set up buffers and start (or run) one call. */
static int job_start(job_t *j, int nb)
{
    int n = j->n, me = j->me, rc;
    size_t e = j->esize, blk = j->count * e;
    MPI_Datatype t = mtype(j->type);
    int cnt = (int)j->count;

    switch (j->coll) {
    case C_A2A:
        j->sbuf = xmalloc(blk * (size_t)n);
        j->rbuf = xmalloc(blk * (size_t)n);
        for (int d = 0; d < n; d++)
            put_block((j->inplace ? j->rbuf : j->sbuf) + (size_t)d * blk, blk, j->call, me, d);
        rc = nb ? MPI_Ialltoall(j->inplace ? MPI_IN_PLACE : j->sbuf, cnt, t, j->rbuf, cnt, t,
                                j->comm, &j->req)
                : MPI_Alltoall(j->inplace ? MPI_IN_PLACE : j->sbuf, cnt, t, j->rbuf, cnt, t,
                               j->comm);
        break;
    case C_AG:
        j->sbuf = xmalloc(blk);
        j->rbuf = xmalloc(blk * (size_t)n);
        memset(j->rbuf, 0x5a, blk * (size_t)n);
        put_block(j->inplace ? j->rbuf + (size_t)me * blk : j->sbuf, blk, j->call, me, -1);
        rc = nb ? MPI_Iallgather(j->inplace ? MPI_IN_PLACE : j->sbuf, cnt, t, j->rbuf, cnt, t,
                                 j->comm, &j->req)
                : MPI_Allgather(j->inplace ? MPI_IN_PLACE : j->sbuf, cnt, t, j->rbuf, cnt, t,
                                j->comm);
        break;
    case C_A2AV: {
        size_t so = 0, ro = 0;
        j->sc = j->vmem = xmalloc(sizeof(int) * 4 * (size_t)n);
        j->sd = j->sc + n;
        j->rc = j->sc + 2 * n;
        j->rd = j->sc + 3 * n;
        /* Pair (s, d) moves (s + 2 d + call) % (count + 1) elements: both ends know it. */
        for (int d = 0; d < n; d++) {
            j->sc[d] = (int)((uint64_t)(me + 2 * d) + j->call) % (cnt + 1);
            j->sd[d] = (int)so;
            so += (size_t)j->sc[d];
            j->rc[d] = (int)((uint64_t)(d + 2 * me) + j->call) % (cnt + 1);
            j->rd[d] = (int)ro;
            ro += (size_t)j->rc[d];
        }
        j->sbuf = xmalloc(so * e);
        j->rbuf = xmalloc(ro * e);
        for (int d = 0; d < n; d++)
            put_block(j->sbuf + (size_t)j->sd[d] * e, (size_t)j->sc[d] * e, j->call, me, d);
        rc = nb ? MPI_Ialltoallv(j->sbuf, j->sc, j->sd, t, j->rbuf, j->rc, j->rd, t, j->comm,
                                 &j->req)
                : MPI_Alltoallv(j->sbuf, j->sc, j->sd, t, j->rbuf, j->rc, j->rd, t, j->comm);
        break;
    }
    case C_AGV: {
        size_t ro = 0;
        j->rc = j->vmem = xmalloc(sizeof(int) * 2 * (size_t)n);
        j->rd = j->rc + n;
        for (int s = 0; s < n; s++) {
            j->rc[s] = (int)((uint64_t)s * 3 + j->call) % (cnt + 1);
            j->rd[s] = (int)ro;
            ro += (size_t)j->rc[s];
        }
        j->sbuf = xmalloc((size_t)j->rc[me] * e);
        j->rbuf = xmalloc(ro * e);
        put_block(j->inplace ? j->rbuf + (size_t)j->rd[me] * e : j->sbuf, (size_t)j->rc[me] * e,
                  j->call, me, -1);
        rc = nb ? MPI_Iallgatherv(j->inplace ? MPI_IN_PLACE : j->sbuf, j->rc[me], t, j->rbuf, j->rc,
                                  j->rd, t, j->comm, &j->req)
                : MPI_Allgatherv(j->inplace ? MPI_IN_PLACE : j->sbuf, j->rc[me], t, j->rbuf, j->rc,
                                 j->rd, t, j->comm);
        break;
    }
    case C_RSB:
        j->sbuf = xmalloc(blk * (size_t)n);
        j->rbuf = xmalloc(blk * (size_t)n);
        reduce_fill(j, j->count * (size_t)n);
        if (j->inplace)
            memcpy(j->rbuf, j->sbuf, blk * (size_t)n);
        rc = nb ? MPI_Ireduce_scatter_block(j->inplace ? MPI_IN_PLACE : j->sbuf, j->rbuf, cnt, t,
                                            MPI_SUM, j->comm, &j->req)
                : MPI_Reduce_scatter_block(j->inplace ? MPI_IN_PLACE : j->sbuf, j->rbuf, cnt, t,
                                           MPI_SUM, j->comm);
        break;
    default:
        j->sbuf = xmalloc(blk);
        j->rbuf = xmalloc(blk);
        reduce_fill(j, j->count);
        if (j->inplace)
            memcpy(j->rbuf, j->sbuf, blk);
        rc = nb ? MPI_Iallreduce(j->inplace ? MPI_IN_PLACE : j->sbuf, j->rbuf, cnt, t, MPI_SUM,
                                 j->comm, &j->req)
                : MPI_Allreduce(j->inplace ? MPI_IN_PLACE : j->sbuf, j->rbuf, cnt, t, MPI_SUM,
                                j->comm);
        break;
    }
    ncalls++;
    return rc;
}

static void job_check(job_t *j, int rc)
{
    int n = j->n, me = j->me, ok = 1;
    size_t e = j->esize, blk = j->count * e;

    if (rc != MPI_SUCCESS) {
        if (fault_ok)
            faulted++;
        else
            tl_expect(&tally, 0, "call %llu (%s): MPI error %d", (unsigned long long)j->call,
                      cname[j->coll], rc);
        goto out;
    }
    gap_type = j->type == T_TRIPLE;
    switch (j->coll) {
    case C_A2A:
        for (int s = 0; s < n && ok; s++)
            ok = check_block(j->rbuf + (size_t)s * blk, blk, j->call, s, me);
        break;
    case C_AG:
        for (int s = 0; s < n && ok; s++)
            ok = check_block(j->rbuf + (size_t)s * blk, blk, j->call, s, -1);
        break;
    case C_A2AV:
        for (int s = 0; s < n && ok; s++)
            ok = check_block(j->rbuf + (size_t)j->rd[s] * e, (size_t)j->rc[s] * e, j->call, s, me);
        break;
    case C_AGV:
        for (int s = 0; s < n && ok; s++)
            ok = check_block(j->rbuf + (size_t)j->rd[s] * e, (size_t)j->rc[s] * e, j->call, s, -1);
        break;
    case C_RSB: ok = reduce_check(j, j->rbuf, j->count, (size_t)me * j->count); break;
    default: ok = reduce_check(j, j->rbuf, j->count, 0); break;
    }
    tl_expect_max(&tally, 5, ok, "call %llu (%s, type %d, %zu elements, in place %d): wrong",
                  (unsigned long long)j->call, cname[j->coll], j->type, j->count, j->inplace);
out:
    free(j->sbuf);
    free(j->rbuf);
    free(j->vmem);
    memset(j, 0, sizeof(*j));
}

/* Resource levels of this process. */
typedef struct {
    long rss_kib, fds, shm;
    unsigned long long ctxs;
} level_t;

static void level_now(level_t *l, arcoll_mpi_stats_fn stats)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, res = 0;
    arcoll_mpi_stats_t st;

    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &size, &res) != 2)
            res = 0;
        fclose(f);
    }
    l->rss_kib = res * (sysconf(_SC_PAGESIZE) / 1024);
    l->fds = tl_count_dir("/proc/self/fd", NULL);
    l->shm = tl_count_dir("/dev/shm", "arcoll.");
    memset(&st, 0, sizeof(st));
    if (stats != NULL)
        stats(&st);
    l->ctxs = st.contexts_live;
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 60, t0, warm_at;
    uint64_t cs = argc > 2 ? strtoull(argv[2], NULL, 0) : 12345; /* choices: same on all */
    const char *kill_at = getenv("SOAK_KILL_AT");
    MPI_Comm pool[NPOOL];
    job_t inf[NINF];
    int ninf = 0, warm = 0, stop = 0, made = 0, freed = 0;
    level_t lw = {0}, le = {0};
    arcoll_mpi_stats_fn stats;
    long tot[4], all[4];
    unsigned long long bc, allbc;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    snprintf(prefix, sizeof(prefix), "rank %d", wrank);
    fault_ok = getenv("SOAK_FAULT_OK") != NULL;
    stats = (arcoll_mpi_stats_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "arcoll_mpi_stats");
    {
        MPI_Datatype three;
        MPI_Type_contiguous(3, MPI_INT, &three);
        MPI_Type_create_resized(three, 0, 16, &triple);
        MPI_Type_free(&three);
        MPI_Type_commit(&triple);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int i = 0; i < NPOOL; i++)
        pool[i] = MPI_COMM_NULL;
    memset(inf, 0, sizeof(inf));
    t0 = MPI_Wtime();
    warm_at = t0 + secs / 5;
    for (uint64_t it = 0; !stop; it++) {
        uint64_t x = rng(&cs);
        int slot = (int)(x % (NPOOL + 1)) - 1; /* -1: MPI_COMM_WORLD */
        job_t j;
        int nb = (x >> 8) % 3 == 0, rc;

        /* Every 64th iteration: drain, agree on stopping, replace a communicator. */
        if (it % 64 == 0) {
            int flag = MPI_Wtime() - t0 >= secs;
            for (int k = 0; k < ninf; k++)
                job_check(&inf[k], MPI_Wait(&inf[k].req, MPI_STATUS_IGNORE));
            ninf = 0;
            PMPI_Bcast(&flag, 1, MPI_INT, 0, MPI_COMM_WORLD);
            if (flag)
                break;
            if (!warm) { /* rank 0's clock decides for everyone */
                int w = MPI_Wtime() >= warm_at;
                PMPI_Bcast(&w, 1, MPI_INT, 0, MPI_COMM_WORLD);
                if (w) {
                    warm = 1;
                    level_now(&lw, stats);
                }
            }
            {
                int p = (int)((x >> 20) % NPOOL), how = (int)((x >> 24) % 3);
                MPI_Comm parent = how == 2 && pool[(p + 1) % NPOOL] != MPI_COMM_NULL
                                      ? pool[(p + 1) % NPOOL]
                                      : MPI_COMM_WORLD;
                if (pool[p] != MPI_COMM_NULL) {
                    MPI_Comm_free(&pool[p]);
                    freed++;
                }
                if (how == 0)
                    MPI_Comm_dup(parent, &pool[p]);
                else
                    MPI_Comm_split(parent, wrank % 2, (int)((x >> 30) % 7) - wrank, &pool[p]);
                MPI_Comm_set_errhandler(pool[p], MPI_ERRORS_RETURN);
                made++;
            }
        }
        memset(&j, 0, sizeof(j));
        j.comm = slot < 0 || pool[slot] == MPI_COMM_NULL ? MPI_COMM_WORLD : pool[slot];
        MPI_Comm_rank(j.comm, &j.me);
        MPI_Comm_size(j.comm, &j.n);
        j.coll = (int)((x >> 32) % NCOLL);
        j.type = j.coll >= C_RSB ? ((x >> 36) % 2 ? T_INT : T_DOUBLE) : (int)((x >> 36) % NTYPES);
        j.esize = tsize(j.type);
        j.inplace = (x >> 40) % 4 == 0 && j.coll != C_A2AV;
        j.call = it;
        {
            /* mostly small, sometimes up to MAXB bytes per peer, sometimes 0 */
            uint64_t r = x >> 44;
            size_t bytes = r % 16 == 0   ? 0
                           : r % 16 == 1 ? (size_t)(r >> 4) % MAXB
                                         : (size_t)(r >> 4) % 600;
            j.count = bytes / j.esize;
        }
        if (kill_at != NULL && wrank == 1 && (long long)it == atoll(kill_at))
            raise(SIGKILL);
        /* Skew: this rank's own delay, up to 200 us, before one call in four. */
        if ((rng(&(uint64_t){x ^ (uint64_t)wrank * 0x9e37ULL}) % 4) == 0) {
            struct timespec ts = {0, (long)((x ^ (uint64_t)wrank * 7919) % 200) * 1000};
            nanosleep(&ts, NULL);
        }
        if (nb && j.comm == MPI_COMM_WORLD) {
            if (ninf == NINF) {
                for (int k = 0; k < ninf; k++)
                    job_check(&inf[k], MPI_Wait(&inf[k].req, MPI_STATUS_IGNORE));
                ninf = 0;
            }
            rc = job_start(&j, 1);
            if (rc != MPI_SUCCESS) {
                job_check(&j, rc);
            } else {
                inf[ninf++] = j;
            }
        } else {
            rc = job_start(&j, 0);
            job_check(&j, rc);
        }
    }
    for (int k = 0; k < ninf; k++)
        job_check(&inf[k], MPI_Wait(&inf[k].req, MPI_STATUS_IGNORE));
    for (int i = 0; i < NPOOL; i++)
        if (pool[i] != MPI_COMM_NULL) {
            MPI_Comm_free(&pool[i]);
            freed++;
        }
    level_now(&le, stats);
    if (warm) {
        int bad = le.rss_kib > lw.rss_kib + 32 * 1024 || le.fds > lw.fds + 4 || le.shm > lw.shm ||
                  le.ctxs > lw.ctxs;
        tl_expect(&tally, !bad,
                  "resources grew: RSS %ld -> %ld KiB, fds %ld -> %ld, /dev/shm arcoll names "
                  "%ld -> %ld, live contexts %llu -> %llu",
                  lw.rss_kib, le.rss_kib, lw.fds, le.fds, lw.shm, le.shm, lw.ctxs, le.ctxs);
    }
    tot[0] = tally.passed;
    tot[1] = tally.failed;
    tot[2] = faulted;
    tot[3] = (long)ncalls;
    bc = bytes_checked;
    PMPI_Reduce(tot, all, 4, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    PMPI_Reduce(&bc, &allbc, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (wrank == 0) {
        printf("soak: %.0f s, %ld calls, %llu bytes checked, %ld failed calls expected by the "
               "fault, %d communicators made, %d freed\n",
               MPI_Wtime() - t0, all[3], allbc, all[2], made, freed);
        printf("soak: rank 0 after warm-up / at the end: RSS %ld / %ld KiB, fds %ld / %ld, "
               "/dev/shm arcoll names %ld / %ld, live contexts %llu / %llu\n",
               lw.rss_kib, le.rss_kib, lw.fds, le.fds, lw.shm, le.shm, lw.ctxs, le.ctxs);
        printf("shim_soak_test on %d ranks: %ld passed, %ld failed\n", wsize, all[0], all[1]);
    }
    MPI_Type_free(&triple);
    MPI_Finalize();
    return wrank == 0 && all[1] != 0 ? 1 : 0;
}
