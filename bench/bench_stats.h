/*
 * The arithmetic of arcoll-bench, kept free of communication and clocks so
 * that the unit tests can check it: arrival delays (random and late modes),
 * arrival bounds, per-point latency statistics, ratio columns, the size sweep.
 */
#ifndef ARCOLL_BENCH_STATS_H
#define ARCOLL_BENCH_STATS_H

#include <stddef.h>
#include <stdint.h>

/* OSU Micro-Benchmarks use fewer iterations above this size. */
#define BSTAT_LARGE_SIZE 8192

typedef enum {
    BSTAT_SKEW_RANDOM, /* every rank waits U[0, 1) x MIF x T */
    BSTAT_SKEW_LATE,   /* round(frac x N) ranks wait MIF x T, the others none */
} bstat_mode_t;

typedef struct bstat_skew {
    bstat_mode_t mode;
    double mif;       /* maximum imbalance factor; 0 is no skew */
    double late_frac; /* BSTAT_SKEW_LATE: fraction of late ranks, in [0, 1] */
    uint64_t seed;
} bstat_skew_t;

/* Uniform in [0, 1), a pure function of its arguments (splitmix64), so every
 * rank can compute every rank's delay without communicating. */
double bstat_uniform(uint64_t seed, uint64_t stream, uint64_t counter);

/* -D: how the v-forms' counts spread around the mean (bstat_vcount). */
enum {
    BSTAT_DIST_UNIFORM,   /* every block the mean */
    BSTAT_DIST_RANDOM,    /* uniform in [0, 2 mean], fresh per pair and call */
    BSTAT_DIST_SPARSE,    /* 0 with probability 0.9, else 10 mean */
    BSTAT_DIST_ONE_HEAVY, /* the mean, but BSTAT_HEAVY x to one destination */
    BSTAT_NDISTS
};
#define BSTAT_HEAVY 100
extern const char *const bstat_dist_names[BSTAT_NDISTS];

/* The BSTAT_DIST_* of a -D name, or -1. */
int bstat_parse_dist(const char *name);

/* The one destination src sends BSTAT_HEAVY x the mean to in call `call` of
 * BSTAT_DIST_ONE_HEAVY: (src + 1 + call mod (n - 1)) mod n, never src itself
 * (unless n is 1). The shift is the same for every source, so each rank also
 * receives exactly one heavy block, and it rotates per call so that no pair
 * stays heavy. */
int bstat_heavy_dst(int src, int n, uint64_t call);

/* Bytes src sends dst (of n ranks) in the v-forms' call `call` around mean
 * bytes, a pure function of its arguments, so that sender and receiver agree
 * without communicating (see the BSTAT_DIST_* above). */
size_t bstat_vcount(int dist, uint64_t seed, size_t mean, int src, int dst, int n, uint64_t call);

/* allgatherv's block of src: bstat_vcount of the pair (src, src), except that
 * in BSTAT_DIST_ONE_HEAVY the one rank call mod n sends BSTAT_HEAVY x. */
size_t bstat_gvcount(int dist, uint64_t seed, size_t mean, int src, int n, uint64_t call);

/* The most bytes one rank sends or receives in a v-form call of n ranks, in
 * units of the mean: what its buffers must hold. */
size_t bstat_vtotal(int dist, int n);

/* Number of late ranks: round(frac x n), clamped to [0, n]. */
int bstat_nlate(double frac, int n);

/* Every rank's delay for iteration iter, in us, given t_us = T(size):
 * random mode U[0, 1) x MIF x T, fresh per (seed, rank, iter); late mode
 * MIF x T on a set of bstat_nlate(frac, n) ranks drawn afresh per (seed,
 * iter), 0 elsewhere. perm: scratch of n ints. delay: n doubles. */
void bstat_delays(const bstat_skew_t *sk, uint64_t iter, int n, double t_us, int *perm,
                  double *delay);

/* bound[i] = max_j arrive[j] - arrive[i]: no alltoall or allgather can
 * finish on rank i before the last rank has arrived. */
void bstat_bounds(const double *arrive, int n, double *bound);

typedef struct bstat_point {
    double lat_mean;     /* entry-to-exit latency, mean over ranks and iterations */
    double lat_rank_min; /* the lowest of the ranks' mean latencies */
    double lat_rank_max; /* the highest */
    double bound_mean;   /* arrival bound, mean over ranks and iterations */
    int iters;
} bstat_point_t;

/* Statistics of one algorithm at one point from arrive[it * n + r] (any
 * common time base) and lat[it * n + r]. rank_sum: scratch of n doubles.
 * Returns 0, or -1 if iters or n is not positive. */
int bstat_point(const double *arrive, const double *lat, int iters, int n, double *rank_sum,
                bstat_point_t *out);

/* The same latency and bound, robust to iterations that lost their core to
 * another process (on a shared machine they dominate the mean): the median
 * over iterations of the mean over ranks. scratch: 2 x iters doubles.
 * Returns 0, or -1 if iters or n is not positive. */
int bstat_point_median(const double *arrive, const double *lat, int iters, int n, double *scratch,
                       double *lat_median, double *bound_median);

/* The bound column: the mean of the algorithms' bounds (the same injected
 * delays, but each algorithm's own real arrivals). */
double bstat_mean_bound(const bstat_point_t *res, int nalgs);

/* num / den, or NAN when either is not a finite positive number (a column
 * shows "-" rather than a meaningless ratio). */
double bstat_ratio(double num, double den);

/* Iterations (or warm-up rounds) at a size: n up to BSTAT_LARGE_SIZE, a
 * tenth above it (at least 1 when n > 0), as OSU does with 1000 and 100. */
int bstat_iters(size_t bytes, int n);

/* Median of v[0..n) (sorts v in place); NAN for n == 0. */
double bstat_median(double *v, int n);

/* "64", "4k", "1M" (binary multiples) -> bytes; -1 on a malformed value. */
int bstat_parse_size(const char *s, size_t *out);

/* The size sweep: min, 2 min, 4 min, ... up to max. Returns how many sizes
 * there are; writes at most cap of them to sizes (which may be NULL). */
int bstat_sizes(size_t min, size_t max, size_t *sizes, int cap);

#endif /* ARCOLL_BENCH_STATS_H */
