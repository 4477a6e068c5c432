#include "bench/bench_stats.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

double bstat_uniform(uint64_t seed, uint64_t stream, uint64_t counter)
{
    /* Chained mixing, so that (stream, counter) pairs do not alias the way
     * a plain xor of scaled inputs can. */
    uint64_t x = mix64(mix64(mix64(seed) ^ stream) ^ counter);
    return (double)(x >> 11) * 0x1.0p-53;
}

#define VCOUNT_STREAM 0x56434e54ULL /* "VCNT" */

const char *const bstat_dist_names[BSTAT_NDISTS] = {"uniform", "random", "sparse", "one-heavy"};

int bstat_parse_dist(const char *name)
{
    for (int k = 0; k < BSTAT_NDISTS; k++)
        if (strcmp(name, bstat_dist_names[k]) == 0)
            return k;
    return -1;
}

int bstat_heavy_dst(int src, int n, uint64_t call)
{
    if (n <= 1)
        return src;
    return (int)(((uint64_t)src + 1 + call % (uint64_t)(n - 1)) % (uint64_t)n);
}

size_t bstat_vcount(int dist, uint64_t seed, size_t mean, int src, int dst, int n, uint64_t call)
{
    /* Its own seed stream, apart from the delays' draws of the same seed. */
    double u =
        bstat_uniform(seed ^ VCOUNT_STREAM, (uint64_t)(uint32_t)src << 32 | (uint32_t)dst, call);

    switch (dist) {
    case BSTAT_DIST_RANDOM: {
        size_t c = (size_t)(u * (double)(2 * mean + 1));
        return c > 2 * mean ? 2 * mean : c; /* the product may round up to 2 mean + 1 */
    }
    case BSTAT_DIST_SPARSE: return u < 0.9 ? 0 : 10 * mean;
    case BSTAT_DIST_ONE_HEAVY:
        return dst == bstat_heavy_dst(src, n, call) ? BSTAT_HEAVY * mean : mean;
    default: return mean;
    }
}

size_t bstat_gvcount(int dist, uint64_t seed, size_t mean, int src, int n, uint64_t call)
{
    if (dist == BSTAT_DIST_ONE_HEAVY)
        return n > 0 && (uint64_t)src == call % (uint64_t)n ? BSTAT_HEAVY * mean : mean;
    return bstat_vcount(dist, seed, mean, src, src, n, call);
}

size_t bstat_vtotal(int dist, int n)
{
    size_t un = n > 0 ? (size_t)n : 0;

    switch (dist) {
    case BSTAT_DIST_RANDOM: return 2 * un;
    case BSTAT_DIST_SPARSE: return 10 * un;
    case BSTAT_DIST_ONE_HEAVY: return un > 0 ? un - 1 + BSTAT_HEAVY : 0;
    default: return un;
    }
}

int bstat_nlate(double frac, int n)
{
    double k;

    if (n <= 0 || !(frac > 0))
        return 0;
    k = round(frac * n);
    return k >= n ? n : (int)k;
}

/* Late ranks are drawn on their own stream so that changing the fraction
 * does not change the random-mode delays of a seed, and vice versa. */
#define LATE_STREAM 0x4c415445ULL /* "LATE" */

void bstat_delays(const bstat_skew_t *sk, uint64_t iter, int n, double t_us, int *perm,
                  double *delay)
{
    double unit = sk->mif > 0 && t_us > 0 ? sk->mif * t_us : 0;

    if (sk->mode == BSTAT_SKEW_RANDOM) {
        for (int r = 0; r < n; r++)
            delay[r] = unit * bstat_uniform(sk->seed, (uint64_t)r, iter);
        return;
    }
    /* A partial Fisher-Yates shuffle: perm[0..nlate) is a uniform random
     * subset, the same on every rank for the same (seed, iter). */
    int nlate = bstat_nlate(sk->late_frac, n);
    for (int r = 0; r < n; r++) {
        perm[r] = r;
        delay[r] = 0;
    }
    for (int k = 0; k < nlate; k++) {
        double u = bstat_uniform(sk->seed ^ LATE_STREAM, iter, (uint64_t)k);
        int j = k + (int)(u * (n - k)); /* u < 1, so j < n */
        int x = perm[k];
        perm[k] = perm[j];
        perm[j] = x;
        delay[perm[k]] = unit;
    }
}

void bstat_bounds(const double *arrive, int n, double *bound)
{
    double latest = -INFINITY;

    for (int r = 0; r < n; r++)
        if (arrive[r] > latest)
            latest = arrive[r];
    for (int r = 0; r < n; r++)
        bound[r] = latest - arrive[r];
}

int bstat_point(const double *arrive, const double *lat, int iters, int n, double *rank_sum,
                bstat_point_t *out)
{
    double lat_sum = 0, bound_sum = 0;

    if (iters <= 0 || n <= 0)
        return -1;
    for (int r = 0; r < n; r++)
        rank_sum[r] = 0;
    for (int it = 0; it < iters; it++) {
        const double *a = arrive + (size_t)it * (size_t)n;
        const double *l = lat + (size_t)it * (size_t)n;
        double latest = -INFINITY;
        for (int r = 0; r < n; r++)
            if (a[r] > latest)
                latest = a[r];
        for (int r = 0; r < n; r++) {
            bound_sum += latest - a[r];
            lat_sum += l[r];
            rank_sum[r] += l[r];
        }
    }
    out->lat_mean = lat_sum / ((double)iters * n);
    out->bound_mean = bound_sum / ((double)iters * n);
    out->lat_rank_min = INFINITY;
    out->lat_rank_max = -INFINITY;
    for (int r = 0; r < n; r++) {
        double m = rank_sum[r] / iters;
        if (m < out->lat_rank_min)
            out->lat_rank_min = m;
        if (m > out->lat_rank_max)
            out->lat_rank_max = m;
    }
    out->iters = iters;
    return 0;
}

int bstat_point_median(const double *arrive, const double *lat, int iters, int n, double *scratch,
                       double *lat_median, double *bound_median)
{
    double *l_it = scratch, *b_it = scratch + iters;

    if (iters <= 0 || n <= 0)
        return -1;
    for (int it = 0; it < iters; it++) {
        const double *a = arrive + (size_t)it * (size_t)n;
        const double *l = lat + (size_t)it * (size_t)n;
        double latest = -INFINITY;
        for (int r = 0; r < n; r++)
            latest = a[r] > latest ? a[r] : latest;
        l_it[it] = b_it[it] = 0;
        for (int r = 0; r < n; r++) {
            l_it[it] += l[r] / n;
            b_it[it] += (latest - a[r]) / n;
        }
    }
    *lat_median = bstat_median(l_it, iters);
    *bound_median = bstat_median(b_it, iters);
    return 0;
}

double bstat_mean_bound(const bstat_point_t *res, int nalgs)
{
    double sum = 0;

    if (nalgs <= 0)
        return NAN;
    for (int a = 0; a < nalgs; a++)
        sum += res[a].bound_mean;
    return sum / nalgs;
}

double bstat_ratio(double num, double den)
{
    if (!isfinite(num) || !isfinite(den) || num <= 0 || den <= 0)
        return NAN;
    return num / den;
}

int bstat_iters(size_t bytes, int n)
{
    if (n <= 0 || bytes <= BSTAT_LARGE_SIZE)
        return n > 0 ? n : 0;
    return n >= 10 ? n / 10 : 1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bstat_median(double *v, int n)
{
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int bstat_parse_size(const char *s, size_t *out)
{
    unsigned long long v, mult = 1;
    char *end;

    if (s == NULL || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0)
        return -1;
    switch (*end) {
    case '\0': break;
    case 'k':
    case 'K': mult = 1ULL << 10; break;
    case 'm':
    case 'M': mult = 1ULL << 20; break;
    case 'g':
    case 'G': mult = 1ULL << 30; break;
    default: return -1;
    }
    if (*end != '\0' && end[1] != '\0')
        return -1;
    if (v > SIZE_MAX / mult)
        return -1;
    *out = (size_t)(v * mult);
    return 0;
}

int bstat_sizes(size_t min, size_t max, size_t *sizes, int cap)
{
    int n = 0;

    if (min == 0 || max < min)
        return 0;
    for (size_t s = min;; s *= 2) {
        if (sizes != NULL && n < cap)
            sizes[n] = s;
        n++;
        if (s > max / 2)
            break;
    }
    return n;
}
