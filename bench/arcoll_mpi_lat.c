/*
 * arcoll-mpi-lat: OSU-style latency of MPI_Alltoall, MPI_Allgather and
 * MPI_Alltoallv in an ordinary MPI program, side by side with their PMPI_*
 * forms (the MPI library's own, which a PMPI shim does not see) in the same
 * run, under the same arrival skew. With libarcoll_mpi.so preloaded the MPI_*
 * column is arcoll through the shim; without it both columns are the MPI
 * library, and their ratio shows what the method itself adds (should be ~1).
 *
 *   mpirun -np 4 env LD_PRELOAD=build/lib/libarcoll_mpi.so build/bin/arcoll-mpi-lat
 *
 * Options: -t a comma list of alltoall, allgather, alltoallv, or both
 * (alltoall,allgather; the default) or all; -m [MIN:]MAX bytes per block
 * (1:64k), for alltoallv the mean per pair; -D uniform|random|sparse|one-heavy
 * alltoallv's counts (bstat_vcount, as arcoll-bench -D; uniform), the same
 * for both columns, drawn afresh per iteration, displacements packed;
 * -i ITERS (200; a tenth above 8 KiB, fewer again above 1 MiB, at least 5),
 * -x WARMUP (20), -M MIF[,MIF..] (0,32), -s spin|sleep (spin unless ranks
 * outnumber cores), -S SEED (delays and counts), -c (validate every byte of
 * every call), -o FILE (every row also as CSV), -p (the send and receive
 * buffers from mmap, so never in the node heap even under libarcoll_heap.so:
 * what sh_co's fallback to pap costs). Sizes go up to 32 MiB.
 *
 * The memcpy column is the limit a single-copy collective approaches: the
 * time for every rank at once (after a barrier, sharing the memory system as
 * in the collective) to memcpy the bytes it must receive (alltoall and
 * allgather: n x size; alltoallv: its counts' sum) between two buffers of
 * their own, same iteration count, mean over ranks; mcpy/shim is that over
 * the shim's latency (1.0: as fast as one plain copy).
 *
 *   mpirun -np 4 env LD_PRELOAD=build/lib/libarcoll_mpi.so \
 *       build/bin/arcoll-mpi-lat -t alltoallv -D one-heavy -m 1:8k -c
 *
 * Each iteration: PMPI_Barrier, then rank r waits delay_r (random in
 * [0, MIF x T), the same draw for both columns), arrives, calls, leaves.
 * Latency is arrival to exit; the bound is the last rank's arrival minus
 * one's own (no rank can leave before the last one arrives), so
 * "latency - bound" is the time the call took after everyone was there. T is
 * one message of the size between ranks 0 and 1 (half a PMPI ping-pong
 * round trip). Arrivals use CLOCK_MONOTONIC, which all ranks share only on
 * one host: run it on one host. The two columns alternate which goes first.
 *
 * -R, realistic buffer use: the mode above calls the collective again and
 * again on the same two warm buffers, which no application does. Under -R
 * every call gets what an application's call gets: its send buffer written
 * just before (a pattern of iteration, rank and peer), its receive buffer
 * cleared, and its result checked afterwards (every byte; wrong bytes are
 * counted, reported per row and make the exit status 1). -B N buffer pairs
 * (2) are used in turn, each column (MPI_, PMPI_, memcpy) with its own; -F K
 * frees and mallocs a column's pairs every K of its calls (0, never: fresh
 * pages and new addresses, as in codes that allocate work arrays per phase).
 * Each call is timed alone (PMPI_Barrier, call, exit; -M is ignored): the
 * columns are the mean over ranks and iterations (PMPI, MPI_, their ratio),
 * the ratios of the medians and of the 10th percentiles over iterations of
 * the rank mean (robust to calls that lost their core on a loaded host), and
 * the memcpy limit under the same buffer use (a freshly written source, a
 * cleared destination, its own pairs in turn; median, and over MPI_'s
 * median). -W (with -R, for comparison only) leaves the buffers as the last
 * call left them, as the mode without -R does, checking nothing.
 * -t takes also allgatherv (counts per rank by -D, as alltoallv's),
 * allreduce and reduce_scatter_block (sum of -d double|int, bytes = the
 * vector, resp. each rank's block; no memcpy column), ialltoall and
 * iallgather (started and at once MPI_Wait'ed); -t all is all eight.
 * Iterations: -i (200) but at most 2^28 bytes of the largest buffer's worth
 * (at least 5), warm-up -x (20) but at most a tenth of those (at least 1).
 * -g 4 steps sizes by 4 instead of 2 (either mode).
 *
 *   mpirun -np 2 env LD_PRELOAD=build/lib/libarcoll_mpi.so \
 *       build/bin/arcoll-mpi-lat -R -t all -m 1:4m -g 4
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "arcoll_mpi.h"
#include "bench/bench_clock.h"
#include "bench/bench_shim.h"
#include "bench/bench_stats.h"
#include "tl.h"

enum { COL_MPI, COL_PMPI, NCOLS };
/* -R's third column: the memcpy limit under the same buffer use. */
enum { COL_MCPY = NCOLS, NCOLS_R };
/* The first NWARM are the mode without -R; -R runs every one. */
enum {
    C_ALLTOALL,
    C_ALLGATHER,
    C_ALLTOALLV,
    NWARM,
    C_ALLGATHERV = NWARM,
    C_ALLREDUCE,
    C_REDUCE_SCATTER,
    C_IALLTOALL,
    C_IALLGATHER,
    NCOLLS
};
static const char *const coll_names[NCOLLS] = {"alltoall",   "allgather", "alltoallv",
                                               "allgatherv", "allreduce", "reduce_scatter_block",
                                               "ialltoall",  "iallgather"};

#define MAX_PAIRS 64 /* -B */

typedef struct lat_opts {
    int colls; /* bit (1 << C_*) */
    int dist;  /* -D: BSTAT_DIST_* */
    size_t min, max;
    int iters, warmup, spin, validate;
    int private_bufs; /* -p */
    double mifs[8];
    int nmifs;
    uint64_t seed;
    const char *csv; /* -o */
    int step;        /* -g: 2 or 4 */
    int realistic;   /* -R */
    int warm;        /* -W: -R without the rewriting, clearing and checking */
    int pairs;       /* -B */
    int fresh;       /* -F: calls between reallocations, 0 never */
    int ints;        /* -d int: reductions of MPI_INT, else MPI_DOUBLE */
} lat_opts_t;

static int rank, nranks;
/* alltoallv's counts and packed displacements of the current iteration. */
static int *sc, *sd, *rc, *rd;

static int coll_call(int col, int coll, const char *s, char *r, int bytes)
{
    switch (coll) {
    case C_ALLTOALL:
        return col == COL_MPI
                   ? MPI_Alltoall(s, bytes, MPI_BYTE, r, bytes, MPI_BYTE, MPI_COMM_WORLD)
                   : PMPI_Alltoall(s, bytes, MPI_BYTE, r, bytes, MPI_BYTE, MPI_COMM_WORLD);
    case C_ALLGATHER:
        return col == COL_MPI
                   ? MPI_Allgather(s, bytes, MPI_BYTE, r, bytes, MPI_BYTE, MPI_COMM_WORLD)
                   : PMPI_Allgather(s, bytes, MPI_BYTE, r, bytes, MPI_BYTE, MPI_COMM_WORLD);
    default:
        return col == COL_MPI
                   ? MPI_Alltoallv(s, sc, sd, MPI_BYTE, r, rc, rd, MPI_BYTE, MPI_COMM_WORLD)
                   : PMPI_Alltoallv(s, sc, sd, MPI_BYTE, r, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
    }
}

/* alltoallv's counts of call `key`: a pure function of (seed, src, dst, key),
 * so both ends of every pair, and both columns, agree. */
static void set_counts(const lat_opts_t *o, size_t mean, uint64_t key)
{
    int so = 0, ro = 0;

    for (int j = 0; j < nranks; j++) {
        sc[j] = (int)bstat_vcount(o->dist, o->seed, mean, rank, j, nranks, key);
        rc[j] = (int)bstat_vcount(o->dist, o->seed, mean, j, rank, nranks, key);
        sd[j] = so;
        rd[j] = ro;
        so += sc[j]; /* main keeps max x bstat_vtotal within an int */
        ro += rc[j];
    }
}

/* T(size): half the round trip of a PMPI ping-pong between ranks 0 and 1,
 * the median of 11 batches of 10, known to every rank. */
static double measure_t(char *buf, int bytes)
{
    double v[11], t = 0;

    if (nranks < 2)
        return 0;
    for (int b = 0; b < 11; b++) {
        PMPI_Barrier(MPI_COMM_WORLD);
        double t0 = now_us();
        for (int i = 0; i < 10 && rank < 2; i++) {
            if (rank == 0) {
                PMPI_Send(buf, bytes, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
                PMPI_Recv(buf, bytes, MPI_BYTE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                PMPI_Recv(buf, bytes, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                PMPI_Send(buf, bytes, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
            }
        }
        v[b] = (now_us() - t0) / 20;
    }
    if (rank == 0)
        t = bstat_median(v, 11);
    PMPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return t;
}

/* Block j of the send (recv 0) or receive (recv 1) buffer: its offset and
 * length, and the rank it goes to in its pattern (tl.h; allgather: TL_ANY). */
static void block(int coll, int recv, int j, size_t bytes, size_t *off, size_t *len, int *to)
{
    if (coll == C_ALLTOALLV) {
        *off = (size_t)(recv ? rd[j] : sd[j]);
        *len = (size_t)(recv ? rc[j] : sc[j]);
    } else {
        *off = (size_t)j * bytes;
        *len = coll == C_ALLGATHER && !recv && j > 0 ? 0 : bytes;
    }
    *to = coll == C_ALLGATHER ? TL_ANY : recv ? rank : j;
}

static void fill(int coll, char *s, size_t bytes, int tag)
{
    for (int j = 0; j < nranks; j++) {
        size_t off, len;
        int to;
        block(coll, 0, j, bytes, &off, &len, &to);
        tl_fill(s + off, len, (uint64_t)tag, rank, to);
    }
}

/* Wrong blocks of a result, every byte compared. */
static long check(int coll, const char *r, size_t bytes, int tag)
{
    long bad = 0;

    for (int j = 0; j < nranks; j++) {
        size_t off, len;
        int to;
        block(coll, 1, j, bytes, &off, &len, &to);
        bad += tl_check(r + off, len, (uint64_t)tag, j, to, NULL) != 0;
    }
    return bad;
}

/* Iterations at a size: bstat_iters, then proportionally fewer above 1 MiB
 * so a 32 MiB row stays a few seconds (at least `floor`). */
static int lat_iters(size_t bytes, int n, int floor)
{
    int it = bstat_iters(bytes, n);

    if (bytes > ((size_t)1 << 20))
        it = (int)((double)it * (double)((size_t)1 << 20) / (double)bytes);
    return it > floor ? it : floor < n ? floor : n;
}

/* The memcpy limit of a point: mean over ranks of one copy of `len` bytes. */
static double memcpy_limit(char *dst, const char *src, size_t len, int iters)
{
    double sum = 0;

    for (int it = -1; it < iters; it++) {
        PMPI_Barrier(MPI_COMM_WORLD);
        double t0 = now_us();
        memcpy(dst, src, len);
        if (it >= 0)
            sum += now_us() - t0;
    }
    sum /= iters;
    PMPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / nranks;
}

/* One (collective, size, MIF) point: res[col]; returns wrong blocks seen. */
static long run_point(const lat_opts_t *o, int coll, int bytes, double mif, double t_us, char *s,
                      char *r, bstat_point_t *res)
{
    int iters = lat_iters((size_t)bytes, o->iters, 5),
        warm = lat_iters((size_t)bytes, o->warmup, 1);
    size_t nrec = (size_t)iters * NCOLS * 2;
    double *mine = malloc(nrec * sizeof(double)), *all = malloc(nrec * sizeof(double) * nranks);
    double *arrive = malloc(sizeof(double) * (size_t)iters * nranks);
    double *lat = malloc(sizeof(double) * (size_t)iters * nranks);
    double *delay = malloc(sizeof(double) * nranks), *rank_sum = malloc(sizeof(double) * nranks);
    int *perm = malloc(sizeof(int) * nranks);
    bstat_skew_t sk = {BSTAT_SKEW_RANDOM, mif, 0, o->seed};
    long bad = 0;

    if (!mine || !all || !arrive || !lat || !delay || !rank_sum || !perm) {
        fprintf(stderr, "arcoll-mpi-lat[%d]: out of memory\n", rank);
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int it = -warm; it < iters; it++) {
        uint64_t key = (uint64_t)(it + warm) * 2654435761u + (uint64_t)bytes;
        bstat_delays(&sk, key, nranks, t_us, perm, delay);
        if (coll == C_ALLTOALLV) /* both columns get the same counts */
            set_counts(o, (size_t)bytes, key);
        for (int k = 0; k < NCOLS; k++) {
            int col = (it + k) % NCOLS; /* alternate which column goes first */
            if (o->validate)
                fill(coll, s, (size_t)bytes, it + col);
            PMPI_Barrier(MPI_COMM_WORLD);
            double tb = now_us();
            if (delay[rank] > 0)
                wait_until(tb + delay[rank], o->spin);
            double t0 = now_us();
            if (coll_call(col, coll, s, r, bytes) != MPI_SUCCESS)
                bad++;
            double t1 = now_us();
            if (o->validate)
                bad += check(coll, r, (size_t)bytes, it + col);
            if (it >= 0) {
                mine[((size_t)it * NCOLS + col) * 2] = t0;
                mine[((size_t)it * NCOLS + col) * 2 + 1] = t1 - t0;
            }
        }
    }
    PMPI_Allgather(mine, (int)nrec, MPI_DOUBLE, all, (int)nrec, MPI_DOUBLE, MPI_COMM_WORLD);
    for (int col = 0; col < NCOLS; col++) {
        for (int it = 0; it < iters; it++)
            for (int j = 0; j < nranks; j++) {
                const double *m = all + (size_t)j * nrec + ((size_t)it * NCOLS + col) * 2;
                arrive[(size_t)it * nranks + j] = m[0];
                lat[(size_t)it * nranks + j] = m[1];
            }
        bstat_point(arrive, lat, iters, nranks, rank_sum, &res[col]);
    }
    PMPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    free(mine);
    free(all);
    free(arrive);
    free(lat);
    free(delay);
    free(rank_sum);
    free(perm);
    return bad;
}

/* -p: memory of its own mapping, outside any heap (docs/heap.md, "What is eligible"). */
static char *lat_buf(size_t len, int private_bufs)
{
    void *p;

    if (!private_bufs)
        return malloc(len);
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void lat_buf_free(char *p, size_t len, int private_bufs)
{
    if (!private_bufs)
        free(p);
    else if (p != NULL)
        munmap(p, len);
}

static int parse(int argc, char **argv, lat_opts_t *o)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int opt, spin = -1, all = 0;

    *o = (lat_opts_t){1 << C_ALLTOALL | 1 << C_ALLGATHER,
                      BSTAT_DIST_UNIFORM,
                      1,
                      65536,
                      200,
                      20,
                      0,
                      0,
                      0,
                      {0, 32},
                      2,
                      1,
                      NULL,
                      .step = 2,
                      .pairs = 2};
    while ((opt = getopt(argc, argv, "t:D:m:i:x:M:s:S:cpo:g:RWB:F:d:")) != -1) {
        switch (opt) {
        case 't':
            o->colls = 0;
            all = 0;
            for (char *t = strtok(optarg, ","); t != NULL; t = strtok(NULL, ",")) {
                int c = 0;
                while (c < NCOLLS && strcmp(t, coll_names[c]) != 0)
                    c++;
                if (c < NCOLLS)
                    o->colls |= 1 << c;
                else if (strcmp(t, "both") == 0)
                    o->colls |= 1 << C_ALLTOALL | 1 << C_ALLGATHER;
                else if (strcmp(t, "all") == 0)
                    all = 1;
                else
                    return -1;
            }
            break;
        case 'g': o->step = atoi(optarg); break;
        case 'R': o->realistic = 1; break;
        case 'W': o->warm = 1; break;
        case 'B': o->pairs = atoi(optarg); break;
        case 'F': o->fresh = atoi(optarg); break;
        case 'd':
            o->ints = strcmp(optarg, "int") == 0 ? 1 : strcmp(optarg, "double") == 0 ? 0 : -1;
            break;
        case 'D':
            if ((o->dist = bstat_parse_dist(optarg)) < 0)
                return -1;
            break;
        case 'm': {
            char *colon = strchr(optarg, ':');
            if (colon != NULL) {
                *colon = '\0';
                if (bstat_parse_size(optarg, &o->min) != 0)
                    return -1;
            }
            if (bstat_parse_size(colon ? colon + 1 : optarg, &o->max) != 0 || o->min < 1 ||
                o->max < o->min || o->max > (32u << 20))
                return -1;
            break;
        }
        case 'i': o->iters = atoi(optarg); break;
        case 'x': o->warmup = atoi(optarg); break;
        case 'M': {
            o->nmifs = 0;
            for (char *t = strtok(optarg, ","); t != NULL && o->nmifs < 8; t = strtok(NULL, ","))
                o->mifs[o->nmifs++] = atof(t);
            break;
        }
        case 's':
            spin = strcmp(optarg, "spin") == 0 ? 1 : strcmp(optarg, "sleep") == 0 ? 0 : -2;
            break;
        case 'S': o->seed = strtoull(optarg, NULL, 0); break;
        case 'c': o->validate = 1; break;
        case 'p': o->private_bufs = 1; break;
        case 'o': o->csv = optarg; break;
        default: return -1;
        }
    }
    if (all) /* -R's collectives are all eight, the warm mode's the first three */
        o->colls |= o->realistic ? (1 << NCOLLS) - 1 : (1 << NWARM) - 1;
    if (spin == -2 || o->iters < 1 || o->warmup < 0 || o->nmifs == 0 || o->colls == 0 ||
        (o->step != 2 && o->step != 4) || o->pairs < 1 || o->pairs > MAX_PAIRS || o->fresh < 0 ||
        o->ints < 0 || (!o->realistic && (o->colls >> NWARM != 0 || o->warm)))
        return -1;
    /* MPI counts and displacements are ints; vtotal is at least n. */
    if (o->max > INT_MAX / bstat_vtotal(o->dist, nranks))
        return -1;
    o->spin = spin >= 0 ? spin : nranks <= cores;
    return 0;
}

/* ---- -R: realistic buffer use ---- */

static int gsend; /* allgatherv: this rank's count of the current iteration */

static size_t red_esize(const lat_opts_t *o)
{
    return o->ints ? sizeof(int) : sizeof(double);
}

/* Element k of this rank's vector in call `tag`: tl_red_in's small integers, so that sums
 * over ranks are exact in doubles too. */
static void red_fill(const lat_opts_t *o, void *s, size_t count, uint64_t tag)
{
    for (size_t k = 0; k < count; k++)
        if (o->ints)
            ((int *)s)[k] = (int)tl_red_in(tag, rank, k);
        else
            ((double *)s)[k] = (double)tl_red_in(tag, rank, k);
}

/* Wrong bytes of a sum's elements first..first+count-1 in r[0..count). */
static size_t red_check(const lat_opts_t *o, const void *r, size_t first, size_t count,
                        uint64_t tag)
{
    size_t bad = 0;

    for (size_t k = 0; k < count; k++) {
        int64_t want = tl_red_sum(tag, nranks, first + k);
        if (o->ints ? ((const int *)r)[k] != (int)want : ((const double *)r)[k] != (double)want)
            bad += red_esize(o);
    }
    return bad;
}

/* allgatherv's counts of call `key` (bstat_gvcount, as arcoll-bench's),
 * displacements packed. */
static void set_gcounts(const lat_opts_t *o, size_t mean, uint64_t key)
{
    int off = 0;

    for (int j = 0; j < nranks; j++) {
        rc[j] = (int)bstat_gvcount(o->dist, o->seed, mean, j, nranks, key);
        rd[j] = off;
        off += rc[j];
    }
    gsend = rc[rank];
}

/* Bytes a rank receives in the current call (what the memcpy column copies). */
static size_t real_rbytes(int coll, size_t bytes)
{
    switch (coll) {
    case C_ALLTOALLV:
    case C_ALLGATHERV: return (size_t)rd[nranks - 1] + (size_t)rc[nranks - 1];
    case C_ALLREDUCE:
    case C_REDUCE_SCATTER: return bytes;
    default: return (size_t)nranks * bytes;
    }
}

static void real_fill(const lat_opts_t *o, int coll, char *s, size_t bytes, uint64_t tag)
{
    switch (coll) {
    case C_ALLREDUCE: red_fill(o, s, bytes / red_esize(o), tag); break;
    case C_REDUCE_SCATTER: red_fill(o, s, (size_t)nranks * (bytes / red_esize(o)), tag); break;
    case C_ALLGATHER:
    case C_IALLGATHER: tl_fill(s, bytes, tag, rank, TL_ANY); break;
    case C_ALLGATHERV: tl_fill(s, (size_t)gsend, tag, rank, TL_ANY); break;
    case C_ALLTOALLV:
        for (int j = 0; j < nranks; j++)
            tl_fill(s + sd[j], (size_t)sc[j], tag, rank, j);
        break;
    default: tl_fill_blocks(s, bytes, nranks, tag, rank);
    }
}

static size_t real_check(const lat_opts_t *o, int coll, const char *r, size_t bytes, uint64_t tag)
{
    size_t bad = 0, cnt = bytes / red_esize(o);

    switch (coll) {
    case C_ALLREDUCE: return red_check(o, r, 0, cnt, tag);
    case C_REDUCE_SCATTER: return red_check(o, r, (size_t)rank * cnt, cnt, tag);
    case C_ALLGATHER:
    case C_IALLGATHER: return tl_check_blocks(r, bytes, nranks, tag, TL_ANY, NULL);
    case C_ALLGATHERV:
    case C_ALLTOALLV:
        for (int j = 0; j < nranks; j++)
            bad += tl_check(r + rd[j], (size_t)rc[j], tag, j, coll == C_ALLGATHERV ? TL_ANY : rank,
                            NULL);
        return bad;
    default: return tl_check_blocks(r, bytes, nranks, tag, rank, NULL);
    }
}

/* One call of column col (MPI_ or PMPI_); bytes per block, or the vector's. */
static int real_call(const lat_opts_t *o, int col, int coll, const char *s, char *r, size_t bytes)
{
    MPI_Datatype dt = o->ints ? MPI_INT : MPI_DOUBLE;
    int b = (int)bytes, cnt = (int)(bytes / red_esize(o)), rc0, rc1;
    MPI_Request req;

    switch (coll) {
    case C_ALLTOALL:
    case C_ALLGATHER:
    case C_ALLTOALLV: return coll_call(col, coll, s, r, b);
    case C_ALLGATHERV:
        return col == COL_MPI
                   ? MPI_Allgatherv(s, gsend, MPI_BYTE, r, rc, rd, MPI_BYTE, MPI_COMM_WORLD)
                   : PMPI_Allgatherv(s, gsend, MPI_BYTE, r, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
    case C_ALLREDUCE:
        return col == COL_MPI ? MPI_Allreduce(s, r, cnt, dt, MPI_SUM, MPI_COMM_WORLD)
                              : PMPI_Allreduce(s, r, cnt, dt, MPI_SUM, MPI_COMM_WORLD);
    case C_REDUCE_SCATTER:
        return col == COL_MPI ? MPI_Reduce_scatter_block(s, r, cnt, dt, MPI_SUM, MPI_COMM_WORLD)
                              : PMPI_Reduce_scatter_block(s, r, cnt, dt, MPI_SUM, MPI_COMM_WORLD);
    case C_IALLTOALL:
        if (col == COL_MPI) {
            rc0 = MPI_Ialltoall(s, b, MPI_BYTE, r, b, MPI_BYTE, MPI_COMM_WORLD, &req);
            rc1 = rc0 == MPI_SUCCESS ? MPI_Wait(&req, MPI_STATUS_IGNORE) : rc0;
        } else {
            rc0 = PMPI_Ialltoall(s, b, MPI_BYTE, r, b, MPI_BYTE, MPI_COMM_WORLD, &req);
            rc1 = rc0 == MPI_SUCCESS ? PMPI_Wait(&req, MPI_STATUS_IGNORE) : rc0;
        }
        return rc1;
    default: /* C_IALLGATHER */
        if (col == COL_MPI) {
            rc0 = MPI_Iallgather(s, b, MPI_BYTE, r, b, MPI_BYTE, MPI_COMM_WORLD, &req);
            rc1 = rc0 == MPI_SUCCESS ? MPI_Wait(&req, MPI_STATUS_IGNORE) : rc0;
        } else {
            rc0 = PMPI_Iallgather(s, b, MPI_BYTE, r, b, MPI_BYTE, MPI_COMM_WORLD, &req);
            rc1 = rc0 == MPI_SUCCESS ? PMPI_Wait(&req, MPI_STATUS_IGNORE) : rc0;
        }
        return rc1;
    }
}

/* A column's buffer pairs. */
typedef struct real_bufs {
    char *s[MAX_PAIRS], *r[MAX_PAIRS];
    size_t slen, rlen;
} real_bufs_t;

static void real_alloc(const lat_opts_t *o, real_bufs_t *b)
{
    for (int p = 0; p < o->pairs; p++) {
        b->s[p] = lat_buf(b->slen, o->private_bufs);
        b->r[p] = lat_buf(b->rlen, o->private_bufs);
        if (b->s[p] == NULL || b->r[p] == NULL) {
            fprintf(stderr, "arcoll-mpi-lat[%d]: out of memory\n", rank);
            PMPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
}

static void real_free(const lat_opts_t *o, real_bufs_t *b)
{
    for (int p = 0; p < o->pairs; p++) {
        lat_buf_free(b->s[p], b->slen, o->private_bufs);
        lat_buf_free(b->r[p], b->rlen, o->private_bufs);
    }
}

/* Iterations and warm-up rounds of a -R point whose largest buffer is len. */
static void real_iters(const lat_opts_t *o, size_t len, int *iters, int *warm)
{
    size_t lim = ((size_t)1 << 28) / (len > 0 ? len : 1);
    int it = o->iters;

    if ((size_t)it > lim)
        it = lim > 5 ? (int)lim : 5 < o->iters ? 5 : o->iters;
    *iters = it;
    *warm = o->warmup < (it / 10 > 1 ? it / 10 : 1) ? o->warmup : it / 10 > 1 ? it / 10 : 1;
}

typedef struct real_res {
    double mean[NCOLS_R], med[NCOLS_R], p10[NCOLS_R];
    long wrong[NCOLS]; /* wrong bytes (and failed calls), all ranks */
    int iters;
} real_res_t;

/* One (collective, size) point of -R. */
static void real_point(const lat_opts_t *o, int coll, size_t bytes, real_res_t *res)
{
    int ncols = coll == C_ALLREDUCE || coll == C_REDUCE_SCATTER ? NCOLS : NCOLS_R;
    size_t vmax = bytes * bstat_vtotal(o->dist, nranks), n = (size_t)nranks;
    real_bufs_t bufs[NCOLS_R];
    long ncalls[NCOLS_R] = {0}, wrong[NCOLS] = {0};
    int iters, warm;

    switch (coll) {
    case C_ALLGATHER:
    case C_IALLGATHER:
        bufs[0].slen = bytes;
        bufs[0].rlen = n * bytes;
        break;
    case C_ALLTOALLV:
    case C_ALLGATHERV: bufs[0].slen = bufs[0].rlen = vmax; break;
    case C_ALLREDUCE: bufs[0].slen = bufs[0].rlen = bytes; break;
    case C_REDUCE_SCATTER:
        bufs[0].slen = n * bytes;
        bufs[0].rlen = bytes;
        break;
    default: bufs[0].slen = bufs[0].rlen = n * bytes;
    }
    bufs[COL_PMPI].slen = bufs[0].slen;
    bufs[COL_PMPI].rlen = bufs[0].rlen;
    /* memcpy: from a source as long as what a rank receives */
    bufs[COL_MCPY].slen = bufs[COL_MCPY].rlen = bufs[0].rlen;
    real_iters(o, bufs[0].slen > bufs[0].rlen ? bufs[0].slen : bufs[0].rlen, &iters, &warm);
    for (int c = 0; c < ncols; c++)
        real_alloc(o, &bufs[c]);

    size_t nrec = (size_t)iters * NCOLS_R * 2;
    double *mine = calloc(nrec, sizeof(double)), *all = malloc(nrec * sizeof(double) * n);
    double *arrive = malloc(sizeof(double) * (size_t)iters * n);
    double *lat = malloc(sizeof(double) * (size_t)iters * n);
    double *scratch = malloc(sizeof(double) * ((size_t)iters * 2 + n));
    if (!mine || !all || !arrive || !lat || !scratch) {
        fprintf(stderr, "arcoll-mpi-lat[%d]: out of memory\n", rank);
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int it = -warm; it < iters; it++) {
        uint64_t key = (uint64_t)(it + warm) * 2654435761u + (uint64_t)bytes;
        if (coll == C_ALLTOALLV) /* both columns get the same counts */
            set_counts(o, bytes, key);
        else if (coll == C_ALLGATHERV)
            set_gcounts(o, bytes, key);
        size_t mlen = real_rbytes(coll, bytes);
        for (int k = 0; k < ncols; k++) {
            int col = (it + warm + k) % ncols; /* rotate which column goes first */
            uint64_t tag = (uint64_t)(it + warm) * NCOLS_R + (uint64_t)col + 1;
            real_bufs_t *b = &bufs[col];
            if (o->fresh > 0 && ncalls[col] > 0 && ncalls[col] % o->fresh == 0) {
                real_free(o, b);
                real_alloc(o, b);
            }
            char *s = b->s[ncalls[col] % o->pairs], *r = b->r[ncalls[col] % o->pairs];
            ncalls[col]++;
            /* -W: after a pair's first call, as the last call left it */
            if (!o->warm || ncalls[col] <= o->pairs) {
                if (col == COL_MCPY)
                    tl_fill(s, mlen, tag, rank, TL_ANY);
                else
                    real_fill(o, coll, s, bytes, tag);
                memset(r, 0, mlen);
            }
            PMPI_Barrier(MPI_COMM_WORLD);
            double t0 = now_us();
            int err = MPI_SUCCESS;
            if (col == COL_MCPY)
                memcpy(r, s, mlen);
            else
                err = real_call(o, col, coll, s, r, bytes);
            double t1 = now_us();
            if (col != COL_MCPY && !o->warm) {
                size_t bad = real_check(o, coll, r, bytes, tag) + (err != MPI_SUCCESS);
                if (bad > 0 && wrong[col] == 0)
                    fprintf(stderr,
                            "arcoll-mpi-lat[%d]: %s %zu bytes, %s call %d: %zu wrong bytes%s\n",
                            rank, coll_names[coll], bytes, col == COL_MPI ? "MPI_" : "PMPI_", it,
                            bad, err != MPI_SUCCESS ? " (the call failed)" : "");
                wrong[col] += (long)bad;
            }
            if (it >= 0) {
                mine[((size_t)it * NCOLS_R + (size_t)col) * 2] = t0;
                mine[((size_t)it * NCOLS_R + (size_t)col) * 2 + 1] = t1 - t0;
            }
        }
    }
    PMPI_Allgather(mine, (int)nrec, MPI_DOUBLE, all, (int)nrec, MPI_DOUBLE, MPI_COMM_WORLD);
    PMPI_Allreduce(wrong, res->wrong, NCOLS, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (int col = 0; col < NCOLS_R; col++) {
        bstat_point_t pt;
        double bmed;
        res->mean[col] = res->med[col] = res->p10[col] = NAN;
        if (col >= ncols)
            continue;
        for (int it = 0; it < iters; it++)
            for (int j = 0; j < nranks; j++) {
                const double *m = all + (size_t)j * nrec + ((size_t)it * NCOLS_R + col) * 2;
                arrive[(size_t)it * n + j] = m[0];
                lat[(size_t)it * n + j] = m[1];
            }
        bstat_point(arrive, lat, iters, nranks, scratch, &pt);
        res->mean[col] = pt.lat_mean;
        bstat_point_median(arrive, lat, iters, nranks, scratch, &res->med[col], &bmed);
        res->p10[col] = scratch[(iters - 1) / 10]; /* the rank means, sorted */
    }
    res->iters = iters;
    for (int c = 0; c < ncols; c++)
        real_free(o, &bufs[c]);
    free(mine);
    free(all);
    free(arrive);
    free(lat);
    free(scratch);
}

/* The -R sweep; returns the wrong bytes (and failed calls) of all ranks. */
static long run_real(const lat_opts_t *o, FILE *csv, int shim)
{
    long bad = 0;

    if (rank == 0) {
        printf("# arcoll-mpi-lat -R: %d ranks, %d buffer pairs per column in turn, %s; "
               "MPI_* %s\n",
               nranks, o->pairs, o->fresh > 0 ? "freed and malloc'd every -F calls" : "kept",
               shim ? "goes through libarcoll_mpi.so" : "is the MPI library (no shim loaded)");
        if (o->fresh > 0)
            printf("# -F %d: each column's pairs freed and malloc'd every %d of its calls\n",
                   o->fresh, o->fresh);
        printf("# every call: send buffer rewritten, receive buffer cleared, PMPI_Barrier, "
               "call (timed), result checked\n");
        printf("# reductions: MPI_SUM of %s; bytes = the vector (allreduce), each rank's block "
               "(reduce_scatter_block); v-collectives: mean count, -D %s\n",
               o->ints ? "MPI_INT" : "MPI_DOUBLE", bstat_dist_names[o->dist]);
        printf("# us: mean over ranks and iterations; med (p10): median (10th percentile) over "
               "iterations of the rank mean; ratio = MPI_ / PMPI; memcpy (med) = the bytes "
               "received, copied under the same buffer use%s\n",
               o->warm ? "; -W: buffers NOT rewritten, cleared or checked" : "");
        printf("%-20s %8s %5s %10s %10s %7s %10s %10s %7s %7s %10s %9s %8s %8s\n", "coll", "bytes",
               "iters", "PMPI", shim ? "shim" : "MPI_", "ratio", "PMPI-med",
               shim ? "shim-med" : "MPI_-med", "r-med", "r-p10", "memcpy",
               shim ? "mcpy/shim" : "mcpy/MPI_", "wrongM", "wrongP");
        if (csv != NULL)
            fprintf(csv,
                    "coll,bytes,iters,pmpi_us,%s_us,ratio,pmpi_med_us,%s_med_us,ratio_med,"
                    "ratio_p10,memcpy_med_us,memcpy_frac,wrong_mpi,wrong_pmpi\n",
                    shim ? "shim" : "mpi", shim ? "shim" : "mpi");
    }
    for (int c = 0; c < NCOLLS; c++)
        for (size_t b = o->min; b <= o->max && (o->colls >> c & 1); b *= (size_t)o->step) {
            real_res_t res;
            if ((c == C_ALLREDUCE || c == C_REDUCE_SCATTER) && b < red_esize(o))
                continue; /* not one element */
            real_point(o, c, b, &res);
            bad += res.wrong[COL_MPI] + res.wrong[COL_PMPI];
            double ratio = bstat_ratio(res.mean[COL_MPI], res.mean[COL_PMPI]);
            double rmed = bstat_ratio(res.med[COL_MPI], res.med[COL_PMPI]);
            double rp10 = bstat_ratio(res.p10[COL_MPI], res.p10[COL_PMPI]);
            double frac = bstat_ratio(res.med[COL_MCPY], res.med[COL_MPI]);
            if (rank == 0) {
                printf("%-20s %8zu %5d %10.2f %10.2f %7.3f %10.2f %10.2f %7.3f %7.3f %10.2f %9.3f "
                       "%8ld %8ld\n",
                       coll_names[c], b, res.iters, res.mean[COL_PMPI], res.mean[COL_MPI], ratio,
                       res.med[COL_PMPI], res.med[COL_MPI], rmed, rp10, res.med[COL_MCPY], frac,
                       res.wrong[COL_MPI], res.wrong[COL_PMPI]);
                if (csv != NULL)
                    fprintf(csv, "%s,%zu,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%ld,%ld\n",
                            coll_names[c], b, res.iters, res.mean[COL_PMPI], res.mean[COL_MPI],
                            ratio, res.med[COL_PMPI], res.med[COL_MPI], rmed, rp10,
                            res.med[COL_MCPY], frac, res.wrong[COL_MPI], res.wrong[COL_PMPI]);
            }
            fflush(stdout);
        }
    return bad;
}

/* Calls of every collective the shim ran on arcoll (arcoll 1) or handed to PMPI (0). */
static unsigned long long shim_calls(const arcoll_mpi_stats_t *st, int arcoll)
{
    const unsigned long long p[][2] = {
        {st->alltoall_arcoll, st->alltoall_mpi},
        {st->allgather_arcoll, st->allgather_mpi},
        {st->alltoallv_arcoll, st->alltoallv_mpi},
        {st->allgatherv_arcoll, st->allgatherv_mpi},
        {st->reduce_scatter_block_arcoll, st->reduce_scatter_block_mpi},
        {st->allreduce_arcoll, st->allreduce_mpi},
        {st->ialltoall_arcoll, st->ialltoall_mpi},
        {st->iallgather_arcoll, st->iallgather_mpi},
        {st->iallreduce_arcoll, st->iallreduce_mpi},
        {st->ialltoallv_arcoll, st->ialltoallv_mpi},
        {st->iallgatherv_arcoll, st->iallgatherv_mpi},
        {st->ireduce_scatter_block_arcoll, st->ireduce_scatter_block_mpi}};
    unsigned long long sum = 0;

    for (size_t k = 0; k < sizeof(p) / sizeof(p[0]); k++)
        sum += p[k][arcoll ? 0 : 1];
    return sum;
}

int main(int argc, char **argv)
{
    arcoll_mpi_stats_fn stats_fn;
    arcoll_mpi_stats_t s0, s1;
    lat_opts_t o;
    long bad = 0;
    char *s = NULL, *r = NULL, *ms = NULL, *mr = NULL;
    FILE *csv = NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (parse(argc, argv, &o) != 0) {
        if (rank == 0)
            fprintf(stderr, "usage: arcoll-mpi-lat [-t alltoall,allgather,alltoallv|both|all] "
                            "[-D uniform|random|sparse|one-heavy] [-m [MIN:]MAX] [-i ITERS] "
                            "[-x WARMUP] [-M MIF,..] [-s spin|sleep] [-S SEED] [-c] [-p] "
                            "[-o FILE.csv] [-g 2|4]\n"
                            "       arcoll-mpi-lat -R [-t COLL,..|all] [-B PAIRS] [-F K] "
                            "[-d double|int] [-W] (COLL also allgatherv, allreduce, "
                            "reduce_scatter_block, ialltoall, iallgather)\n");
        MPI_Finalize();
        return 2;
    }
    stats_fn = bench_shim_stats(&s0);
    /* Room for alltoall's n blocks, or alltoallv's largest total under -D
     * (never less); -R allocates its own per point. */
    size_t len = o.realistic ? 1 : o.max * bstat_vtotal(o.dist, nranks);
    s = lat_buf(len, o.private_bufs);
    r = lat_buf(len, o.private_bufs);
    ms = malloc(len); /* the memcpy limit's own buffers */
    mr = malloc(len);
    sc = malloc(4 * sizeof(int) * (size_t)nranks);
    if (s == NULL || r == NULL || ms == NULL || mr == NULL || sc == NULL)
        PMPI_Abort(MPI_COMM_WORLD, 1);
    if (rank == 0 && o.csv != NULL && (csv = fopen(o.csv, "w")) == NULL) {
        fprintf(stderr, "arcoll-mpi-lat: -o %s: %s\n", o.csv, strerror(errno));
        PMPI_Abort(MPI_COMM_WORLD, 2);
    }
    sd = sc + nranks;
    rc = sd + nranks;
    rd = rc + nranks;
    memset(s, 1, len);
    memset(ms, 1, len);
    memset(mr, 0, len);
    if (o.realistic)
        bad = run_real(&o, csv, stats_fn != NULL);
    if (rank == 0 && !o.realistic) {
        printf("# arcoll-mpi-lat: %d ranks, skew by %s, seed %llu; MPI_* %s\n", nranks,
               o.spin ? "spinning" : "sleeping", (unsigned long long)o.seed,
               stats_fn ? "goes through libarcoll_mpi.so" : "is the MPI library (no shim loaded)");
        if (o.colls >> C_ALLTOALLV & 1)
            printf("# alltoallv: bytes = mean count per pair, counts -D %s (the same for both "
                   "columns)\n",
                   bstat_dist_names[o.dist]);
        printf("# latency = arrival to exit, mean over ranks and iterations (us); bound = last "
               "arrival - own arrival\n");
        printf("# memcpy = every rank at once copies the bytes it receives (us); mcpy/shim = "
               "memcpy over the MPI_* column\n");
        printf("%-9s %8s %5s %8s %9s %10s %10s %9s %10s %10s %10s %9s\n", "coll", "bytes", "MIF",
               "T(us)", "bound", stats_fn ? "shim" : "MPI_", "PMPI", "ratio",
               stats_fn ? "shim-bnd" : "MPI_-bnd", "PMPI-bnd", "memcpy", "mcpy/shim");
        if (csv != NULL)
            fprintf(csv,
                    "coll,bytes,mif,T_us,bound_us,%s_us,pmpi_us,ratio,memcpy_us,"
                    "memcpy_frac\n",
                    stats_fn ? "shim" : "mpi");
    }
    for (int c = 0; c < NWARM && !o.realistic; c++)
        for (int m = 0; m < o.nmifs && (o.colls >> c & 1); m++)
            for (size_t b = o.min; b <= o.max; b *= (size_t)o.step) {
                bstat_point_t res[NCOLS];
                double t_us = measure_t(s, (int)b);
                bad += run_point(&o, c, (int)b, o.mifs[m], t_us, s, r, res);
                /* alltoallv: the counts of the last iteration, which are typical */
                size_t mlen = (size_t)nranks * b;
                if (c == C_ALLTOALLV)
                    mlen = (size_t)rd[nranks - 1] + (size_t)rc[nranks - 1];
                double mc = memcpy_limit(mr, ms, mlen, lat_iters(b, o.iters, 5));
                double ratio = bstat_ratio(res[COL_MPI].lat_mean, res[COL_PMPI].lat_mean);
                double frac = bstat_ratio(mc, res[COL_MPI].lat_mean);
                if (rank == 0) {
                    printf("%-9s %8zu %5g %8.2f %9.2f %10.2f %10.2f %9.3f %10.2f %10.2f %10.2f "
                           "%9.3f\n",
                           coll_names[c], b, o.mifs[m], t_us, res[COL_MPI].bound_mean,
                           res[COL_MPI].lat_mean, res[COL_PMPI].lat_mean, ratio,
                           res[COL_MPI].lat_mean - res[COL_MPI].bound_mean,
                           res[COL_PMPI].lat_mean - res[COL_PMPI].bound_mean, mc, frac);
                    if (csv != NULL)
                        fprintf(csv, "%s,%zu,%g,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f\n",
                                coll_names[c], b, o.mifs[m], t_us, res[COL_MPI].bound_mean,
                                res[COL_MPI].lat_mean, res[COL_PMPI].lat_mean, ratio, mc, frac);
                }
                fflush(stdout);
            }
    if (stats_fn != NULL) {
        unsigned long long mine[2], sum[2];
        stats_fn(&s1);
        mine[0] = shim_calls(&s1, 1) - shim_calls(&s0, 1);
        mine[1] = shim_calls(&s1, 0) - shim_calls(&s0, 0);
        PMPI_Reduce(mine, sum, 2, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("# shim: %llu MPI_* calls ran on arcoll, %llu went to PMPI (all ranks)\n",
                   sum[0], sum[1]);
    }
    if (rank == 0)
        printf("arcoll-mpi-lat: %d passed, %d failed\n", bad == 0, bad != 0);
    if (csv != NULL)
        fclose(csv);
    lat_buf_free(s, len, o.private_bufs);
    lat_buf_free(r, len, o.private_bufs);
    free(ms);
    free(mr);
    free(sc);
    MPI_Finalize();
    return bad == 0 ? 0 : 1;
}
