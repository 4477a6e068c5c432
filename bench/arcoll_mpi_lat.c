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

enum { COL_MPI, COL_PMPI, NCOLS };
enum { C_ALLTOALL, C_ALLGATHER, C_ALLTOALLV, NCOLLS };
static const char *const coll_names[NCOLLS] = {"alltoall", "allgather", "alltoallv"};

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

static unsigned char fill_byte(int from, int to, size_t k, int it)
{
    return (unsigned char)(from * 29 + to * 7 + (int)(k % 13) + it * 3);
}

/* Block j of the send (recv 0) or receive (recv 1) buffer: its offset and
 * length, and the rank it goes to in fill_byte (allgather: 0 for all). */
static void block(int coll, int recv, int j, size_t bytes, size_t *off, size_t *len, int *to)
{
    if (coll == C_ALLTOALLV) {
        *off = (size_t)(recv ? rd[j] : sd[j]);
        *len = (size_t)(recv ? rc[j] : sc[j]);
    } else {
        *off = (size_t)j * bytes;
        *len = coll == C_ALLGATHER && !recv && j > 0 ? 0 : bytes;
    }
    *to = coll == C_ALLGATHER ? 0 : recv ? rank : j;
}

static void fill(int coll, char *s, size_t bytes, int tag)
{
    for (int j = 0; j < nranks; j++) {
        size_t off, len;
        int to;
        block(coll, 0, j, bytes, &off, &len, &to);
        for (size_t k = 0; k < len; k++)
            s[off + k] = (char)fill_byte(rank, to, k, tag);
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
        for (size_t k = 0; k < len; k++)
            if ((unsigned char)r[off + k] != fill_byte(j, to, k, tag)) {
                bad++;
                break;
            }
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
    int opt, spin = -1;

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
                      NULL};
    while ((opt = getopt(argc, argv, "t:D:m:i:x:M:s:S:cpo:")) != -1) {
        switch (opt) {
        case 't':
            o->colls = 0;
            for (char *t = strtok(optarg, ","); t != NULL; t = strtok(NULL, ",")) {
                int c = 0;
                while (c < NCOLLS && strcmp(t, coll_names[c]) != 0)
                    c++;
                if (c < NCOLLS)
                    o->colls |= 1 << c;
                else if (strcmp(t, "both") == 0)
                    o->colls |= 1 << C_ALLTOALL | 1 << C_ALLGATHER;
                else if (strcmp(t, "all") == 0)
                    o->colls |= (1 << NCOLLS) - 1;
                else
                    return -1;
            }
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
    if (spin == -2 || o->iters < 1 || o->warmup < 0 || o->nmifs == 0 || o->colls == 0)
        return -1;
    /* MPI counts and displacements are ints; vtotal is at least n. */
    if (o->max > INT_MAX / bstat_vtotal(o->dist, nranks))
        return -1;
    o->spin = spin >= 0 ? spin : nranks <= cores;
    return 0;
}

int main(int argc, char **argv)
{
    arcoll_mpi_stats_fn stats_fn;
    arcoll_mpi_stats_t s0, s1;
    lat_opts_t o;
    long bad = 0;
    char *s, *r, *ms, *mr;
    FILE *csv = NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (parse(argc, argv, &o) != 0) {
        if (rank == 0)
            fprintf(stderr, "usage: arcoll-mpi-lat [-t alltoall,allgather,alltoallv|both|all] "
                            "[-D uniform|random|sparse|one-heavy] [-m [MIN:]MAX] [-i ITERS] "
                            "[-x WARMUP] [-M MIF,..] [-s spin|sleep] [-S SEED] [-c] [-p] "
                            "[-o FILE.csv]\n");
        MPI_Finalize();
        return 2;
    }
    stats_fn = bench_shim_stats(&s0);
    /* Room for alltoall's n blocks, or alltoallv's largest total under -D
     * (never less). */
    size_t len = o.max * bstat_vtotal(o.dist, nranks);
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
    if (rank == 0) {
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
    for (int c = 0; c < NCOLLS; c++)
        for (int m = 0; m < o.nmifs && (o.colls >> c & 1); m++)
            for (size_t b = o.min; b <= o.max; b *= 2) {
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
        mine[0] = s1.alltoall_arcoll + s1.allgather_arcoll + s1.alltoallv_arcoll -
                  s0.alltoall_arcoll - s0.allgather_arcoll - s0.alltoallv_arcoll;
        mine[1] = s1.alltoall_mpi + s1.allgather_mpi + s1.alltoallv_mpi - s0.alltoall_mpi -
                  s0.allgather_mpi - s0.alltoallv_mpi;
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
