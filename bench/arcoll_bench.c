/*
 * arcoll-bench: alltoall/allgather latency under injected process-arrival
 * skew (seed 002 §3.2), several algorithms side by side in one run.
 *
 * Per iteration and algorithm: a barrier, then each rank waits a random time
 * in [0, MIF x T(size)] (T = measured time of one message of the payload
 * over the same channel), then the timed collective. Latency is from the
 * rank's own entry to its exit, averaged over ranks and iterations. The
 * arrival bound of rank i is (latest arrival - arrival of i): no alltoall or
 * allgather can finish on i before the last rank arrives, so latency/bound
 * says how much any algorithm could still gain.
 *
 * Delays come from a counter-based generator of (seed, rank, iteration), so
 * every rank knows every rank's delay without communicating.
 */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "arcoll.h"

#define MAX_ALGS 4
#define MAX_MIFS 8

typedef struct opts {
    int colls; /* bit 0 alltoall, bit 1 allgather */
    const char *algs[MAX_ALGS];
    int nalgs;
    size_t min, max;
    int iters, warmup;
    double mifs[MAX_MIFS];
    int nmifs;
    int spin; /* 1 spin, 0 sleep */
    int skew_set;
    uint64_t seed;
    int validate;
    const char *path;
} opts_t;

static int rank, nranks;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* splitmix64 of (seed, rank, iteration): uniform in [0, 1). */
static double uniform(uint64_t seed, int r, uint64_t it)
{
    uint64_t x = seed ^ ((uint64_t)r * 0x9e3779b97f4a7c15ULL) ^ (it * 0xbf58476d1ce4e5b9ULL);
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (double)(x >> 11) / 9007199254740992.0;
}

static void wait_us(double us, int spin)
{
    if (us <= 0)
        return;
    if (spin) {
        double end = now_us() + us;
        while (now_us() < end)
            ;
    } else {
        struct timespec ts = {(time_t)(us / 1e6), (long)(fmod(us, 1e6) * 1e3)};
        nanosleep(&ts, NULL);
    }
}

static int check(int rc, const char *what)
{
    if (rc != ARCOLL_OK) {
        fprintf(stderr, "arcoll-bench[%d]: %s: %s (%s)\n", rank, what, arcoll_strerror(rc),
                arcoll_last_error(NULL));
        return 1;
    }
    return 0;
}

static int coll(arcoll_team_t t, int alltoall, const void *s, void *r, size_t bytes)
{
    return alltoall ? arcoll_alltoall(t, s, r, bytes) : arcoll_allgather(t, s, r, bytes);
}

static int barrier(arcoll_team_t world)
{
    uint64_t in = 0, out[1024];
    return arcoll_allgather(world, &in, nranks <= 1024 ? out : NULL, sizeof(in));
}

/* T(size): the time of one message of `bytes` over the channel, from an
 * allgather between ranks 0 and 1 (one message each way, run concurrently). */
static double measure_t(arcoll_context_t ctx, arcoll_team_t pair, size_t bytes, char *s, char *r)
{
    arcoll_team_t world = arcoll_team_world(ctx);
    double t = 0, all[1024];
    int reps = bytes >= 65536 ? 5 : 30;

    if (pair != NULL) {
        double batch[7];
        for (int i = 0; i < 5; i++)
            arcoll_allgather(pair, s, r, bytes);
        /* Median of batch means: robust to a batch that lost its core. */
        for (int b = 0; b < 7; b++) {
            double t0 = now_us();
            for (int i = 0; i < reps; i++)
                arcoll_allgather(pair, s, r, bytes);
            batch[b] = (now_us() - t0) / reps;
            for (int k = b; k > 0 && batch[k] < batch[k - 1]; k--) {
                double x = batch[k];
                batch[k] = batch[k - 1];
                batch[k - 1] = x;
            }
        }
        t = batch[3];
    }
    if (check(arcoll_allgather(world, &t, all, sizeof(t)), "sharing T"))
        return -1;
    return nranks > 1 ? all[0] : t;
}

static void fill(char *s, size_t n, uint64_t it)
{
    for (size_t i = 0; i < n; i++)
        s[i] = (char)(it * 31 + (uint64_t)rank * 7 + i);
}

static int verify(const char *r, int alltoall, size_t bytes, uint64_t it)
{
    for (int src = 0; src < nranks; src++)
        for (size_t i = 0; i < bytes; i++) {
            size_t off = alltoall ? (size_t)rank * bytes + i : i;
            if (r[(size_t)src * bytes + i] != (char)(it * 31 + (uint64_t)src * 7 + off))
                return 1;
        }
    return 0;
}

typedef struct result {
    double lat, bound;
} result_t;

/* One (collective, size, MIF) point: iterations outer, algorithms inner, so
 * that drift and noise hit every algorithm alike. Arrival and exit times are
 * read on CLOCK_MONOTONIC, which all ranks of one node share, and exchanged
 * after the loop (outside the timed region). */
static int run_point(arcoll_context_t ctx, const opts_t *o, int alltoall, size_t bytes, double mif,
                     double t_us, char *s, char *r, result_t *res)
{
    arcoll_team_t world = arcoll_team_world(ctx);
    int iters = bytes > 8192 ? (o->iters + 9) / 10 : o->iters;
    size_t slen = alltoall ? bytes * (size_t)nranks : bytes;
    size_t npts = (size_t)iters * (size_t)o->nalgs * 2;
    double *mine = calloc(npts, sizeof(double)), *all = NULL;
    static uint64_t it_global;
    char name[64];
    int rc = 1;

    all = malloc(npts * sizeof(double) * (size_t)nranks);
    if (mine == NULL || all == NULL) {
        fprintf(stderr, "arcoll-bench: out of memory\n");
        goto out;
    }
    snprintf(name, sizeof(name), "ARCOLL_%s_ALG", alltoall ? "ALLTOALL" : "ALLGATHER");
    for (int it = -o->warmup; it < iters; it++) {
        for (int a = 0; a < o->nalgs; a++) {
            uint64_t key = ++it_global;
            if (check(arcoll_config_set(ctx, name, o->algs[a]), "algorithm"))
                goto out;
            if (o->validate)
                fill(s, slen, key);
            if (check(barrier(world), "barrier"))
                goto out;
            wait_us(uniform(o->seed, rank, key) * mif * t_us, o->spin);
            double t0 = now_us();
            if (check(coll(world, alltoall, s, r, bytes), o->algs[a]))
                goto out;
            double t1 = now_us();
            if (o->validate && verify(r, alltoall, bytes, key)) {
                fprintf(stderr, "arcoll-bench[%d]: %s %zu B: wrong data\n", rank, o->algs[a],
                        bytes);
                goto out;
            }
            if (it >= 0) {
                size_t k = ((size_t)it * (size_t)o->nalgs + (size_t)a) * 2;
                mine[k] = t0;
                mine[k + 1] = t1;
            }
        }
    }
    if (check(arcoll_allgather(world, mine, all, npts * sizeof(double)), "gathering times"))
        goto out;
    for (int a = 0; a < o->nalgs; a++) {
        double lat = 0, bound = 0;
        for (int it = 0; it < iters; it++) {
            size_t k = ((size_t)it * (size_t)o->nalgs + (size_t)a) * 2;
            double latest = 0;
            for (int j = 0; j < nranks; j++)
                if (all[(size_t)j * npts + k] > latest)
                    latest = all[(size_t)j * npts + k];
            for (int j = 0; j < nranks; j++) {
                lat += all[(size_t)j * npts + k + 1] - all[(size_t)j * npts + k];
                bound += latest - all[(size_t)j * npts + k];
            }
        }
        res[a].lat = lat / iters / nranks;
        res[a].bound = bound / iters / nranks;
    }
    rc = 0;
out:
    free(mine);
    free(all);
    return rc;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: arcoll-bench [-c alltoall|allgather|both] [-a ALG,ALG] [-m [MIN:]MAX]\n"
            "                    [-i ITERS] [-x WARMUP] [-M MIF,MIF] [-s spin|sleep] [-S SEED]\n"
            "                    [-p copy|zcopy|auto] [-v]\n"
            "  launch with mpirun -np N (or srun --mpi=pmix); ALG: direct, pap\n");
}

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (*end == 'k' || *end == 'K')
        v *= 1024;
    else if (*end == 'm' || *end == 'M')
        v *= 1048576;
    return (size_t)v;
}

static int parse(int argc, char **argv, opts_t *o)
{
    int c;
    char *tok, *save;

    memset(o, 0, sizeof(*o));
    o->colls = 3;
    o->algs[0] = "direct";
    o->algs[1] = "pap";
    o->nalgs = 2;
    o->min = 1;
    o->max = 65536;
    o->iters = 200;
    o->warmup = 10;
    o->mifs[0] = 0;
    o->mifs[1] = 32;
    o->nmifs = 2;
    o->seed = 1;
    while ((c = getopt(argc, argv, "c:a:m:i:x:M:s:S:p:vh")) != -1) {
        switch (c) {
        case 'c':
            o->colls = strcmp(optarg, "alltoall") == 0    ? 1
                       : strcmp(optarg, "allgather") == 0 ? 2
                       : strcmp(optarg, "both") == 0      ? 3
                                                          : 0;
            if (!o->colls)
                return -1;
            break;
        case 'a':
            o->nalgs = 0;
            for (tok = strtok_r(optarg, ",", &save); tok && o->nalgs < MAX_ALGS;
                 tok = strtok_r(NULL, ",", &save))
                o->algs[o->nalgs++] = tok;
            break;
        case 'm': {
            char *colon = strchr(optarg, ':');
            if (colon) {
                *colon = '\0';
                o->min = parse_size(optarg);
                o->max = parse_size(colon + 1);
            } else {
                o->max = parse_size(optarg);
            }
            if (o->min < 1 || o->max < o->min)
                return -1;
            break;
        }
        case 'i': o->iters = atoi(optarg); break;
        case 'x': o->warmup = atoi(optarg); break;
        case 'M':
            o->nmifs = 0;
            for (tok = strtok_r(optarg, ",", &save); tok && o->nmifs < MAX_MIFS;
                 tok = strtok_r(NULL, ",", &save))
                o->mifs[o->nmifs++] = atof(tok);
            break;
        case 's':
            o->spin = strcmp(optarg, "spin") == 0;
            if (!o->spin && strcmp(optarg, "sleep") != 0)
                return -1;
            o->skew_set = 1;
            break;
        case 'S': o->seed = strtoull(optarg, NULL, 0); break;
        case 'p': o->path = optarg; break;
        case 'v': o->validate = 1; break;
        default: return -1;
        }
    }
    return o->iters > 0 && o->warmup >= 0 && o->nalgs > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    arcoll_context_t ctx;
    arcoll_team_t pair = NULL;
    opts_t o;
    char *s, *r;
    int rc = 1, oversub;
    long npus = sysconf(_SC_NPROCESSORS_ONLN);

    /* The default 50 us timer slack would stretch every short sleep. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    if (parse(argc, argv, &o) != 0) {
        usage();
        return 2;
    }
    if (check(arcoll_init(NULL, &ctx), "arcoll_init"))
        return 1;
    rank = arcoll_context_rank(ctx);
    nranks = arcoll_context_size(ctx);
    oversub = nranks > npus;
    if (!o.skew_set)
        o.spin = !oversub; /* a spinning late rank would steal an early rank's core */
    if (o.path && check(arcoll_config_set(ctx, "ARCOLL_PATH", o.path), "ARCOLL_PATH"))
        goto out_fin;
    for (int a = 0; a < o.nalgs; a++)
        if (check(arcoll_config_set(ctx, "ARCOLL_ALLTOALL_ALG", o.algs[a]), "-a"))
            goto out_fin;
    {
        int two[2] = {0, 1};
        if (check(arcoll_team_create(ctx, two, rank < 2 && nranks > 1 ? 2 : 0, &pair), "pair team"))
            goto out_fin;
    }
    s = malloc(o.max * (size_t)nranks);
    r = malloc(o.max * (size_t)nranks);
    if (s == NULL || r == NULL) {
        fprintf(stderr, "arcoll-bench: out of memory\n");
        goto out_buf;
    }
    memset(s, 1, o.max * (size_t)nranks);
    if (rank == 0) {
        printf("# arcoll-bench %s: %d ranks, %ld cores, %s skew%s, seed %llu, path %s\n",
               ARCOLL_VERSION_STRING, nranks, npus, o.spin ? "spin" : "sleep",
               oversub ? " (ranks outnumber cores: sleeping, since a spinning rank would "
                         "steal a core)"
                       : "",
               (unsigned long long)o.seed, arcoll_config_get(ctx, "ARCOLL_PATH"));
        printf("# latency: mean over ranks of entry-to-exit, us; bound: mean over ranks of "
               "(latest arrival - own arrival) on the node's monotonic clock, us\n");
        printf("# T: measured time of one message of the size (pair allgather), us\n");
    }
    for (int c = 0; c < 2; c++) {
        int alltoall = c == 0;
        if (!(o.colls & (1 << c)))
            continue;
        if (rank == 0) {
            printf("\n# %s\n%-9s %5s %9s %10s", alltoall ? "alltoall" : "allgather", "# size",
                   "MIF", "T(us)", "bound(us)");
            for (int a = 0; a < o.nalgs; a++)
                printf(" %10s", o.algs[a]);
            for (int a = 1; a < o.nalgs; a++)
                printf(" %6s/%-6s", o.algs[0], o.algs[a]);
            for (int a = 0; a < o.nalgs; a++)
                printf(" %6s/bnd", o.algs[a]);
            printf("\n");
        }
        for (size_t bytes = o.min; bytes <= o.max; bytes *= 4) {
            double t_us = measure_t(ctx, pair, bytes, s, r);
            if (t_us < 0)
                goto out_buf;
            for (int m = 0; m < o.nmifs; m++) {
                result_t res[MAX_ALGS];
                if (run_point(ctx, &o, alltoall, bytes, o.mifs[m], t_us, s, r, res))
                    goto out_buf;
                if (rank != 0)
                    continue;
                printf("%-9zu %5g %9.2f %10.2f", bytes, o.mifs[m], t_us,
                       (res[0].bound + res[o.nalgs - 1].bound) / 2);
                for (int a = 0; a < o.nalgs; a++)
                    printf(" %10.2f", res[a].lat);
                for (int a = 1; a < o.nalgs; a++)
                    printf(" %13.2f", res[0].lat / res[a].lat);
                for (int a = 0; a < o.nalgs; a++)
                    printf(" %10.2f", res[a].bound > 0.05 ? res[a].lat / res[a].bound : NAN);
                printf("\n");
                fflush(stdout);
            }
            if (bytes > SIZE_MAX / 4)
                break;
        }
    }
    rc = 0;
out_buf:
    free(s);
    free(r);
    if (pair != NULL || nranks > 1)
        arcoll_team_destroy(ctx, pair);
out_fin:
    arcoll_finalize(ctx);
    return rc;
}
