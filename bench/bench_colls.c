/*
 * The collectives arcoll-bench times: for each, its name and size unit, the
 * data pattern written before and checked after a call (tests/lib/tl.h,
 * fresh per call), and the call itself, arcoll's and (arcoll-bench-mpi)
 * Open MPI's. The driver (arcoll_bench.c) and the output (bench_out.c) read
 * the table; this file calls neither.
 */
#include "bench/bench.h"

const char *const dist_desc[BSTAT_NDISTS] = {", uniform", ", random 0..2x per call",
                                             ", sparse: 90% 0, else 10x",
                                             ", one-heavy: 100x to one peer"};

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
void bench_set_counts(bench_t *b, int coll, size_t bytes, uint64_t key)
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
const coll_ops_t colls[NCOLLS] = {
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
int bench_size_ok(int coll, size_t bytes)
{
    return !colls[coll].reduces || red_count(bytes) > 0;
}
