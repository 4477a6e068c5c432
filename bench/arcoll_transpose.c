/*
 * arcoll-transpose: the global transpose of a distributed 2-D FFT, as real
 * codes run it, with MPI_Alltoall (arcoll when libarcoll_mpi.so is preloaded)
 * and PMPI_Alltoall (the MPI library's own) side by side in one run.
 *
 *   mpirun -np 2 env LD_PRELOAD=build/lib/libarcoll_mpi.so \
 *       build/bin/arcoll-transpose -n 1024,2048,4096 -k 4 -c
 *
 * An N x N matrix of complex doubles is distributed in slabs of N/P rows.
 * One step: pack (the slab's columns into P contiguous blocks, one per
 * destination: a strided gather, not one memcpy), MPI_Alltoall of the blocks
 * ((N/P)^2 x 16 bytes per peer), unpack (each received block transposed into
 * the new slab, which holds N/P columns of the matrix as rows). Unlike a
 * latency loop over one buffer, every -k K steps each column frees and
 * allocates its buffers again, so first touches, page faults and fresh
 * addresses (for the shim: unregistered, unseen memory) are in the numbers,
 * as in applications that allocate work arrays per phase. -k 0: never.
 *
 * Options: -n N[,N..] (1024,2048,4096; P must divide N), -s STEPS (10),
 * -x WARMUP (2), -k K (4), -c (check every element after every step).
 * Each column has its own buffers; the columns alternate which goes first.
 * Reported: mean over steps of the alltoall alone and of the whole step
 * (mean over ranks; max-*: the slowest rank's step), and MPI/PMPI ratios. Last line: "N passed, M
 * failed" as the other benchmarks print it.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arcoll_mpi.h"
#include "bench/bench_clock.h"
#include "bench/bench_shim.h"

enum { COL_MPI, COL_PMPI, NCOLS };

typedef struct cplx {
    double re, im;
} cplx_t;

typedef struct tr_opts {
    long sizes[16];
    int nsizes, steps, warmup, realloc_every, validate;
} tr_opts_t;

/* One column's buffers: the packed send blocks, the received blocks, the
 * transposed slab. */
typedef struct tr_bufs {
    cplx_t *s, *r, *t;
} tr_bufs_t;

static int rank, nranks;

/* Element (row, col) of the global matrix: exact in doubles for N <= 2^13. */
static cplx_t elem(long row, long col)
{
    return (cplx_t){(double)row * 16384.0 + (double)col, -(double)row};
}

static int bufs_alloc(tr_bufs_t *b, size_t elems)
{
    b->s = malloc(elems * sizeof(cplx_t));
    b->r = malloc(elems * sizeof(cplx_t));
    b->t = malloc(elems * sizeof(cplx_t));
    return b->s != NULL && b->r != NULL && b->t != NULL ? 0 : -1;
}

static void bufs_free(tr_bufs_t *b)
{
    free(b->s);
    free(b->r);
    free(b->t);
    *b = (tr_bufs_t){NULL, NULL, NULL};
}

/* Slab a (m rows of n) into P blocks of m x m: block d holds columns
 * [d m, (d+1) m) of every row. */
static void pack(const cplx_t *a, cplx_t *s, long n, long m)
{
    for (long d = 0; d < nranks; d++)
        for (long i = 0; i < m; i++)
            memcpy(s + (d * m + i) * m, a + i * n + d * m, (size_t)m * sizeof(cplx_t));
}

/* Block s of r holds rows [s m, (s+1) m) of our m columns: transpose it into
 * t, whose row j is column rank m + j of the matrix. */
static void unpack(const cplx_t *r, cplx_t *t, long n, long m)
{
    for (long s = 0; s < nranks; s++)
        for (long i = 0; i < m; i++)
            for (long j = 0; j < m; j++)
                t[j * n + s * m + i] = r[(s * m + i) * m + j];
}

static long check(const cplx_t *t, long n, long m)
{
    long bad = 0;

    for (long j = 0; j < m; j++)
        for (long g = 0; g < n; g++) {
            cplx_t want = elem(g, (long)rank * m + j), got = t[j * n + g];
            bad += got.re != want.re || got.im != want.im;
        }
    return bad;
}

static int parse(int argc, char **argv, tr_opts_t *o)
{
    int opt;

    *o = (tr_opts_t){{1024, 2048, 4096}, 3, 10, 2, 4, 0};
    while ((opt = getopt(argc, argv, "n:s:x:k:c")) != -1) {
        switch (opt) {
        case 'n':
            o->nsizes = 0;
            for (char *t = strtok(optarg, ","); t != NULL; t = strtok(NULL, ",")) {
                if (o->nsizes == 16 || (o->sizes[o->nsizes++] = atol(t)) < 1 ||
                    o->sizes[o->nsizes - 1] > 16384)
                    return -1;
            }
            break;
        case 's': o->steps = atoi(optarg); break;
        case 'x': o->warmup = atoi(optarg); break;
        case 'k': o->realloc_every = atoi(optarg); break;
        case 'c': o->validate = 1; break;
        default: return -1;
        }
    }
    return o->nsizes > 0 && o->steps > 0 && o->warmup >= 0 && o->realloc_every >= 0 ? 0 : -1;
}

/* One size: per column, the mean alltoall and step times of this rank;
 * returns wrong elements seen. */
static long run_size(const tr_opts_t *o, long n, double a2a[NCOLS], double step[NCOLS])
{
    long m = n / nranks, bad = 0;
    size_t elems = (size_t)m * (size_t)n;
    int bytes = (int)((size_t)m * (size_t)m * sizeof(cplx_t)), corrupt = 0;
    cplx_t *a = malloc(elems * sizeof(cplx_t));
    tr_bufs_t b[NCOLS] = {{NULL, NULL, NULL}, {NULL, NULL, NULL}};
    const char *env = getenv("ARCOLL_TRANSPOSE_CORRUPT"); /* tests: -c must catch it */

    if (a == NULL) {
        fprintf(stderr, "arcoll-transpose[%d]: out of memory for N=%ld\n", rank, n);
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (long i = 0; i < m; i++)
        for (long c = 0; c < n; c++)
            a[i * n + c] = elem((long)rank * m + i, c);
    for (int c = 0; c < NCOLS; c++)
        a2a[c] = step[c] = 0;
    for (int it = -o->warmup; it < o->steps; it++) {
        for (int k = 0; k < NCOLS; k++) {
            int col = (it + o->warmup + k) % NCOLS; /* alternate which goes first */
            int calls = it + o->warmup;
            if (b[col].s == NULL || (o->realloc_every > 0 && calls % o->realloc_every == 0)) {
                bufs_free(&b[col]);
                if (bufs_alloc(&b[col], elems) != 0) {
                    fprintf(stderr, "arcoll-transpose[%d]: out of memory for N=%ld\n", rank, n);
                    PMPI_Abort(MPI_COMM_WORLD, 1);
                }
            }
            PMPI_Barrier(MPI_COMM_WORLD);
            double t0 = now_us();
            pack(a, b[col].s, n, m);
            double t1 = now_us();
            int rc = col == COL_MPI ? MPI_Alltoall(b[col].s, bytes, MPI_BYTE, b[col].r, bytes,
                                                   MPI_BYTE, MPI_COMM_WORLD)
                                    : PMPI_Alltoall(b[col].s, bytes, MPI_BYTE, b[col].r, bytes,
                                                    MPI_BYTE, MPI_COMM_WORLD);
            double t2 = now_us();
            unpack(b[col].r, b[col].t, n, m);
            double t3 = now_us();
            if (rc != MPI_SUCCESS)
                bad++;
            if (env != NULL && rank == nranks - 1 && col == COL_MPI && !corrupt++)
                b[col].t[elems / 2].re += 1;
            if (o->validate)
                bad += check(b[col].t, n, m);
            if (it >= 0) {
                a2a[col] += (t2 - t1) / o->steps;
                step[col] += (t3 - t0) / o->steps;
            }
        }
    }
    for (int c = 0; c < NCOLS; c++)
        bufs_free(&b[c]);
    free(a);
    return bad;
}

int main(int argc, char **argv)
{
    arcoll_mpi_stats_fn stats_fn;
    arcoll_mpi_stats_t s0, s1;
    tr_opts_t o;
    long bad = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (parse(argc, argv, &o) != 0) {
        if (rank == 0)
            fprintf(stderr, "usage: arcoll-transpose [-n N[,N..]] [-s STEPS] [-x WARMUP] [-k K] "
                            "[-c]\n");
        MPI_Finalize();
        return 2;
    }
    for (int i = 0; i < o.nsizes; i++)
        if (o.sizes[i] % nranks != 0) {
            if (rank == 0)
                fprintf(stderr, "arcoll-transpose: N=%ld is not a multiple of %d ranks\n",
                        o.sizes[i], nranks);
            MPI_Finalize();
            return 2;
        }
    stats_fn = bench_shim_stats(&s0);
    if (rank == 0) {
        printf("# arcoll-transpose: %d ranks; MPI_* %s; %d steps (+%d warm-up), fresh buffers "
               "every %d calls per column%s\n",
               nranks, stats_fn ? "goes through libarcoll_mpi.so" : "is the MPI library", o.steps,
               o.warmup, o.realloc_every, o.validate ? ", every element checked" : "");
        printf("# times per step (us), mean over steps; rank mean and max\n");
        printf("%6s %10s %10s %10s %7s %10s %10s %7s %10s %10s\n", "N", "bytes/peer", "a2a-MPI",
               "a2a-PMPI", "ratio", "step-MPI", "step-PMPI", "ratio", "max-MPI", "max-PMPI");
    }
    for (int i = 0; i < o.nsizes; i++) {
        double a2a[NCOLS], step[NCOLS], sum[2 * NCOLS], max[2 * NCOLS], mine[2 * NCOLS];
        long n = o.sizes[i], m = n / nranks;
        bad += run_size(&o, n, a2a, step);
        for (int c = 0; c < NCOLS; c++) {
            mine[c] = a2a[c];
            mine[NCOLS + c] = step[c];
        }
        PMPI_Reduce(mine, sum, 2 * NCOLS, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        PMPI_Reduce(mine, max, 2 * NCOLS, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            for (int c = 0; c < 2 * NCOLS; c++)
                sum[c] /= nranks;
            printf("%6ld %10ld %10.1f %10.1f %7.3f %10.1f %10.1f %7.3f %10.1f %10.1f\n", n,
                   (long)(m * m * (long)sizeof(cplx_t)), sum[COL_MPI], sum[COL_PMPI],
                   sum[COL_MPI] / sum[COL_PMPI], sum[NCOLS + COL_MPI], sum[NCOLS + COL_PMPI],
                   sum[NCOLS + COL_MPI] / sum[NCOLS + COL_PMPI], max[NCOLS + COL_MPI],
                   max[NCOLS + COL_PMPI]);
            fflush(stdout);
        }
    }
    PMPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (stats_fn != NULL) {
        unsigned long long mine, sum;
        stats_fn(&s1);
        mine = s1.alltoall_arcoll - s0.alltoall_arcoll;
        PMPI_Reduce(&mine, &sum, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("# shim: %llu MPI_Alltoall calls ran on arcoll (all ranks)\n", sum);
    }
    if (rank == 0) {
        if (bad != 0)
            printf("# %ld wrong elements or failed calls\n", bad);
        printf("arcoll-transpose: %d passed, %d failed\n", bad == 0, bad != 0);
    }
    MPI_Finalize();
    return bad == 0 ? 0 : 1;
}
