/* arcoll-bench's types and the functions its files share: the sweep and its
 * measurements (arcoll_bench.c), the collectives timed (bench_colls.c), the
 * output: tables, CSV, JSON and the plot (bench_out.c), the options
 * (bench_opts.c). */
#ifndef ARCOLL_BENCH_BENCH_H
#define ARCOLL_BENCH_BENCH_H

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
extern const char *const dist_desc[BSTAT_NDISTS];

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

extern const coll_ops_t colls[NCOLLS];

int bench_check(const bench_t *b, int rc, const char *what);
int bench_barrier(bench_t *b);
int bench_share(bench_t *b, const void *in, void *out, size_t len, const char *what);
/* bench_colls.c */
int bench_size_ok(int coll, size_t bytes);
void bench_set_counts(bench_t *b, int coll, size_t bytes, uint64_t key);
void bench_print_header(const bench_t *b);
void bench_print_coll_header(const bench_t *b, int coll);
void bench_print_row(bench_t *b, const row_t *w);
void bench_print_memcpy_row(const bench_t *b, const row_t *first);
void bench_progress(bench_t *b, int done, int total, int coll, size_t bytes);
int bench_plot(const bench_t *b);
void bench_usage(FILE *f);
int bench_parse(int argc, char **argv, opts_t *o, char *err, size_t errlen);
int bench_sweep(bench_t *b);

#endif
