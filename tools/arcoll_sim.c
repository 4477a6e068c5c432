/*
 * arcoll-sim: the library's own algorithms at N virtual ranks in one process,
 * in virtual time (docs/scale.md).
 *
 *   arcoll-sim -n 64 --ppn 8 --coll alltoall --alg pap --size 8[,64,...] --iters 10
 *              [--warmup W] [--skew MIF [--late FRAC]]
 *              [--params host-shm|ib-edr|ib-edr-2to1|ib-edr-mu2|FILE]
 *              [--set KEY=VALUE]... [--csv|--json] [--bounce B] [--seed S] [--stack KIB]
 *              [--resources] [--connect lazy|eager] [--no-payload] [--rescan] [--window W]
 *              [--pipe W] [--progress S]
 *
 * Every rank runs arcoll_init_config (ARCOLL_CHANNEL=sim), the world team and
 * iters calls of one collective, each after a barrier and the bench's skew
 * (random: U[0,1) x MIF x T per rank; late: round(FRAC x n) ranks drawn afresh
 * wait MIF x T), T being the model's time of one message of the size. Rows are
 * OSU-style: size, then the virtual latency (own entry to own exit) averaged
 * over ranks and iterations, and the lowest and highest per-rank mean. Every
 * received byte is checked; a wrong one makes the run fail ("corrupted
 * calls"). A progress line goes to stderr: redrawn twice a second on a terminal,
 * and with --progress S a line every S seconds, terminal or not (logs). --bounce sets
 * ARCOLL_BOUNCE_SIZE: the team regions (2 slots per peer) are most of the memory at large n.
 * --pipe sets ARCOLL_PIPE_WINDOW (a schedule stream's bytes in flight; 0: the slot's lanes only).
 * --set KEY=VALUE changes one parameter of the set (e.g. poll=1000: waiting
 * ranks look at node memory every 1 us, far fewer turns at large n).
 * --resources: after the calls each rank reads arcoll_context_resources (the
 * model channel counts the RC QPs the verbs channel would hold, and its
 * regions as registered bytes) and its init time (virtual time spent in
 * arcoll_init_config); min/avg/max over ranks are printed per field.
 * --connect eager: ARCOLL_VERBS_CONNECT=eager, every QP made at init.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "arcoll.h"
#include "chan/sim/sim.h"
#include "dispatch/coll.h"
#include "tl.h"

#define MAX_SIZES 16

/* The collectives: the one list (config/algs.h), indexed by coll_type_t; --coll takes the
 * settings name, and ARCOLL_<NAME>_ALG chooses the algorithm. */
enum { C_N = COLL_NTYPES };
#define SIM_COLL_NAME(type, name, shown, bit) [type] = #name,
static const char *const coll_names[C_N] = {CORE_COLL_LIST(SIM_COLL_NAME)};
#define SIM_COLL_ALG(type, name, shown, bit) [type] = offsetof(core_config_t, name##_alg),
static const size_t coll_cfg_off[C_N] = {CORE_COLL_LIST(SIM_COLL_ALG)};
/* The reductions: int64 sums, sizes in bytes of each rank's result (reduce_scatter_block:
 * each rank's share). */
#define IS_RED(c) ((c) == COLL_ALLREDUCE || (c) == COLL_REDUCE_SCATTER)
#define IS_AG(c)  ((c) == COLL_ALLGATHER || (c) == COLL_ALLGATHERV)

/* One rank's resources after its calls (--resources). */
typedef struct res {
    double qps, reg, shared, init_us;
} res_t;
enum { RES_FIELDS = 4 };
static const char *const res_names[RES_FIELDS] = {"qps", "registered_bytes", "shared_bytes",
                                                  "init_us"};

typedef struct job {
    int n, ppn, coll, iters, warmup, csv, json, fault, resources, no_payload;
    double progress;     /* --progress: seconds between progress lines, 0: none */
    const char *connect; /* ARCOLL_VERBS_CONNECT, NULL: the library's default (lazy) */
    const char *alg;
    const char *bounce; /* ARCOLL_BOUNCE_SIZE, NULL: the library's default */
    const char *window; /* ARCOLL_WINDOW, NULL: the library's default */
    const char *pipe;   /* ARCOLL_PIPE_WINDOW, NULL: the library's default */
    /* --no-payload: every rank uses these (zeros; results not checked) */
    unsigned char *shared_s, *shared_r;
    size_t *shared_counts, *shared_displs;
    size_t sizes[MAX_SIZES];
    int ran[MAX_SIZES]; /* CORE_ALG_* that runs each size (auto resolved, fallbacks taken) */
    int nsizes;
    double mif, late; /* late < 0: random skew */
    uint64_t seed;
    sim_opts_t so;
    double *lat;  /* [nsizes][n]: sum of a rank's latencies (ns) */
    long checked; /* calls checked (warm-up included), over ranks */
    long corrupt; /* calls with a wrong byte, over ranks */
    long failed;  /* calls that returned an error */
    res_t *res;   /* [n], --resources */
    double wall0;
    long inited;     /* ranks through arcoll_init_config, for the progress line */
    long calls_done; /* calls returned (warm-up included), over ranks */
    int drawn;       /* a progress line is on the terminal without its newline */
} job_t;

static double wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* The model's time of one message of bytes (the bench's T). */
static double msg_ns(const job_t *j, size_t bytes)
{
    const sim_params_t *p = &j->so.params;

    if (j->ppn >= j->n)
        return p->intra_o + p->intra_L + (double)bytes * p->intra_G;
    return p->inter_o + p->inter_L + (double)bytes * p->inter_G;
}

/* This rank's wait before call it: the bench's skew model. */
static uint64_t skew_ns(const job_t *j, int rank, int it, size_t bytes)
{
    double w = j->mif * msg_ns(j, bytes);
    uint64_t h = mix64(j->seed ^ ((uint64_t)(unsigned)it << 32));

    if (j->mif <= 0)
        return 0;
    if (j->late < 0)
        return (uint64_t)(w * (double)(mix64(h ^ (uint64_t)(unsigned)rank) >> 11) * 0x1p-53);
    /* Late mode: the first k of a permutation drawn from the iteration's seed
     * (partial Fisher-Yates, the same on every rank). */
    int k = (int)lround(j->late * j->n), late = 0;
    int *perm = malloc(sizeof(int) * (size_t)j->n);
    if (perm == NULL)
        return 0;
    for (int i = 0; i < j->n; i++)
        perm[i] = i;
    for (int i = 0; i < k && i < j->n; i++) {
        int r = i + (int)(mix64(h + (uint64_t)i) % (uint64_t)(j->n - i));
        int t = perm[i];
        perm[i] = perm[r];
        perm[r] = t;
        late |= perm[i] == rank;
    }
    free(perm);
    return late ? (uint64_t)w : 0;
}

/* Iteration it's data (tests/lib, tl.h): the blocks of the patterns, the reductions' small
 * integers. */
static void fill(const job_t *j, int rank, int it, size_t bytes, unsigned char *s)
{
    if (IS_RED(j->coll)) {
        int64_t *v = (int64_t *)(void *)s;
        size_t len = j->coll == COLL_REDUCE_SCATTER ? (size_t)j->n * bytes : bytes;
        for (size_t i = 0; i < len / 8; i++)
            v[i] = tl_red_in((uint64_t)it, rank, i);
    } else if (IS_AG(j->coll)) {
        tl_fill(s, bytes, (uint64_t)it, rank, TL_ANY);
    } else {
        tl_fill_blocks(s, bytes, j->n, (uint64_t)it, rank);
    }
}

/* 1 if every received byte is right. */
static int check(const job_t *j, int rank, int it, size_t bytes, const unsigned char *r)
{
    if (IS_RED(j->coll)) {
        const int64_t *v = (const int64_t *)(const void *)r;
        size_t first = j->coll == COLL_REDUCE_SCATTER ? (size_t)rank * (bytes / 8) : 0;
        for (size_t i = 0; i < bytes / 8; i++)
            if (v[i] != tl_red_sum((uint64_t)it, j->n, first + i))
                return 0;
        return 1;
    }
    return tl_check_blocks(r, bytes, j->n, (uint64_t)it, IS_AG(j->coll) ? TL_ANY : rank, NULL) == 0;
}

static int call(const job_t *j, arcoll_team_t t, const void *s, void *r, size_t bytes,
                const size_t *counts, const size_t *displs)
{
    switch (j->coll) {
    case COLL_ALLTOALL: return arcoll_alltoall(t, s, r, bytes);
    case COLL_ALLGATHER: return arcoll_allgather(t, s, r, bytes);
    case COLL_ALLTOALLV: return arcoll_alltoallv(t, s, counts, displs, r, counts, displs);
    case COLL_ALLGATHERV: return arcoll_allgatherv(t, s, bytes, r, counts, displs);
    case COLL_REDUCE_SCATTER:
        return arcoll_reduce_scatter_block(t, s, r, bytes / 8, ARCOLL_INT64, ARCOLL_SUM);
    default: return arcoll_allreduce(t, s, r, bytes / 8, ARCOLL_INT64, ARCOLL_SUM);
    }
}

static int rank_size(job_t *j, int rank, arcoll_team_t team, int si)
{
    size_t bytes = j->sizes[si], n = (size_t)j->n;
    size_t sb = j->coll == COLL_ALLREDUCE || IS_AG(j->coll) ? bytes : n * bytes;
    size_t rb = IS_RED(j->coll) ? bytes : n * bytes;
    unsigned char *s, *r;
    size_t *counts, *displs;
    int rc = ARCOLL_OK;

    if (j->no_payload) {
        s = r = NULL; /* the shared zeros below, never freed here */
        counts = displs = NULL;
    } else {
        s = malloc(sb ? sb : 1);
        r = malloc(rb ? rb : 1);
        counts = malloc(sizeof(size_t) * n);
        displs = malloc(sizeof(size_t) * n);
    }
    if (!j->no_payload && (s == NULL || r == NULL || counts == NULL || displs == NULL)) {
        fprintf(stderr, "arcoll-sim: rank %d: out of memory\n", rank);
        rc = ARCOLL_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; !j->no_payload && i < n; i++) {
        counts[i] = bytes;
        displs[i] = i * bytes;
    }
    if (j->fault == SIM_FAULT_QUIT && rank == 1) {
        fprintf(stderr, "arcoll-sim: rank 1 skips its calls (--fault quit)\n");
        rc = ARCOLL_ERR_STATE;
        goto out;
    }
    for (int it = -j->warmup; it < j->iters; it++) {
        uint64_t t0, t1;
        int crc;
        if (!j->no_payload) {
            fill(j, rank, it, bytes, s);
            memset(r, 0xee, rb);
        }
        rc = sim_barrier();
        if (rc != ARCOLL_OK)
            goto out;
        sim_compute(skew_ns(j, rank, it, bytes));
        t0 = sim_now();
        if (j->no_payload)
            crc = call(j, team, j->shared_s, j->shared_r, bytes, j->shared_counts + si * n,
                       j->shared_displs + si * n);
        else
            crc = call(j, team, s, r, bytes, counts, displs);
        t1 = sim_now();
        if (crc != ARCOLL_OK) {
            fprintf(stderr, "arcoll-sim: rank %d: %s of %zu bytes failed: %s (%s)\n", rank,
                    coll_names[j->coll], bytes, arcoll_strerror(crc), arcoll_last_error(NULL));
            j->failed++;
            rc = crc;
            goto out;
        }
        if (!j->no_payload) {
            j->checked++;
            if (!check(j, rank, it, bytes, r))
                j->corrupt++;
        }
        if (it >= 0)
            j->lat[(size_t)si * n + (size_t)rank] += (double)(t1 - t0);
        j->calls_done++;
    }
out:
    free(displs);
    free(counts);
    free(r);
    free(s);
    return rc;
}

static int rank_main(int rank, void *arg)
{
    job_t *j = arg;
    const char *cfg[13] = {"ARCOLL_CHANNEL", "sim", NULL, j->alg};
    char var[64];
    arcoll_context_t ctx;
    arcoll_oob_t oob;
    arcoll_resources_t ar;
    uint64_t t0;
    int rc, frc, k = 4;

    snprintf(var, sizeof(var), "ARCOLL_%s_ALG", coll_names[j->coll]);
    for (char *q = var; *q != '\0'; q++)
        *q = (char)toupper((unsigned char)*q);
    cfg[2] = var;
    if (j->bounce != NULL) {
        cfg[k++] = "ARCOLL_BOUNCE_SIZE";
        cfg[k++] = j->bounce;
    }
    if (j->connect != NULL) {
        cfg[k++] = "ARCOLL_VERBS_CONNECT";
        cfg[k++] = j->connect;
    }
    if (j->window != NULL) {
        cfg[k++] = "ARCOLL_WINDOW";
        cfg[k++] = j->window;
    }
    if (j->pipe != NULL) {
        cfg[k++] = "ARCOLL_PIPE_WINDOW";
        cfg[k++] = j->pipe;
    }
    cfg[k] = NULL;
    sim_oob(&oob);
    t0 = sim_now();
    rc = arcoll_init_config(&oob, cfg, &ctx);
    j->res[rank].init_us = (double)(sim_now() - t0) / 1e3;
    j->inited += rc == ARCOLL_OK;
    if (rc != ARCOLL_OK) {
        if (rank == 0)
            fprintf(stderr, "arcoll-sim: arcoll_init_config: %s (%s)\n", arcoll_strerror(rc),
                    arcoll_last_error(NULL));
        return rc;
    }
    /* What the dispatcher runs (the table's pick for auto): the same on every rank. */
    for (int si = 0; rank == 0 && si < j->nsizes; si++) {
        int picked;
        const char *why;
        int alg = *(const int *)(const void *)((const char *)&ctx->cfg + coll_cfg_off[j->coll]);
        j->ran[si] = coll_alg_resolve(arcoll_team_world(ctx), (coll_type_t)j->coll, j->sizes[si],
                                      alg, &picked, &why);
    }
    for (int si = 0; rc == ARCOLL_OK && si < j->nsizes; si++)
        rc = rank_size(j, rank, arcoll_team_world(ctx), si);
    /* Between two barriers: a peer already in arcoll_finalize (which
     * exchanges with every rank) would otherwise add connections to us. */
    if (rc == ARCOLL_OK && j->resources && (rc = sim_barrier()) == ARCOLL_OK) {
        rc = arcoll_context_resources(ctx, &ar);
        j->res[rank].qps = ar.qps;
        j->res[rank].reg = (double)ar.registered_bytes;
        j->res[rank].shared = (double)ar.shared_bytes;
        if (sim_barrier() != ARCOLL_OK && rc == ARCOLL_OK)
            rc = ARCOLL_ERR_BOOTSTRAP;
    }
    frc = arcoll_finalize(ctx);
    return rc != ARCOLL_OK ? rc : frc;
}

/* --no-payload: one set of buffers, zeros, for every rank (the ranks run one
 * at a time; what lands there is never read back). Receive side the
 * largest of any collective; counts and displacements per size. */
static int shared_alloc(job_t *j)
{
    size_t n = (size_t)j->n, big = 0;

    for (int si = 0; si < j->nsizes; si++)
        big = j->sizes[si] > big ? j->sizes[si] : big;
    /* One block, so that the simulator is told one range (sim_opts_t.nodata) */
    j->shared_s = calloc(2 * (n * big + 1), 1);
    j->shared_r = j->shared_s != NULL ? j->shared_s + n * big + 1 : NULL;
    j->shared_counts = malloc(sizeof(size_t) * n * (size_t)j->nsizes);
    j->shared_displs = malloc(sizeof(size_t) * n * (size_t)j->nsizes);
    if (j->shared_s == NULL || j->shared_r == NULL || j->shared_counts == NULL ||
        j->shared_displs == NULL)
        return -1;
    for (int si = 0; si < j->nsizes; si++)
        for (size_t i = 0; i < n; i++) {
            j->shared_counts[(size_t)si * n + i] = j->sizes[si];
            j->shared_displs[(size_t)si * n + i] = i * j->sizes[si];
        }
    return 0;
}

static void shared_free(job_t *j)
{
    free(j->shared_displs);
    free(j->shared_counts);
    free(j->shared_s);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: arcoll-sim -n N [--ppn P] [--coll ");
    for (int c = 0; c < C_N; c++)
        fprintf(f, "%s%s", c ? "|" : "", coll_names[c]);
    fprintf(f, "]\n"
               "       [--alg NAME] [--size B[,B...]] [--iters K] [--warmup W]\n"
               "       [--skew MIF [--late FRAC]] "
               "[--params host-shm|ib-edr|ib-edr-2to1|ib-edr-mu2|FILE] [--csv|--json]\n"
               "       [--set KEY=VALUE]... [--bounce B] [--window W] [--pipe W] [--no-payload] "
               "[--rescan] "
               "[--seed S] "
               "[--stack KIB]\n"
               "       [--fault reorder|corrupt|quit] [--resources] [--connect lazy|eager] "
               "[--progress S]\n");
}

static int parse_sizes(job_t *j, char *s)
{
    for (char *tok = strtok(s, ","); tok != NULL; tok = strtok(NULL, ",")) {
        char *end;
        unsigned long long v;
        errno = 0;
        v = strtoull(tok, &end, 10);
        if (errno || *end || end == tok || j->nsizes == MAX_SIZES || v > (1ULL << 30))
            return -1;
        j->sizes[j->nsizes++] = (size_t)v;
    }
    return j->nsizes > 0 ? 0 : -1;
}

static int parse(job_t *j, int argc, char **argv)
{
    const char *params = "host-shm", *sets[16];
    int nsets = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used = 1;
        if (strcmp(a, "--csv") == 0) {
            j->csv = 1;
            used = 0;
        } else if (strcmp(a, "--json") == 0) {
            j->json = 1;
            used = 0;
        } else if (strcmp(a, "--resources") == 0) {
            j->resources = 1;
            used = 0;
        } else if (strcmp(a, "--no-payload") == 0) {
            j->no_payload = 1;
            used = 0;
        } else if (strcmp(a, "--rescan") == 0) {
            j->so.rescan = 1; /* scan on every pass, as on a real channel (sim.h) */
            used = 0;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        } else if (v == NULL) {
            fprintf(stderr, "arcoll-sim: %s needs a value\n", a);
            return -1;
        } else if (strcmp(a, "-n") == 0) {
            j->n = atoi(v);
        } else if (strcmp(a, "--ppn") == 0) {
            j->ppn = atoi(v);
        } else if (strcmp(a, "--coll") == 0) {
            j->coll = -1;
            for (int c = 0; c < C_N; c++)
                if (strcmp(v, coll_names[c]) == 0)
                    j->coll = c;
            if (j->coll < 0) {
                fprintf(stderr, "arcoll-sim: unknown --coll %s\n", v);
                return -1;
            }
        } else if (strcmp(a, "--alg") == 0) {
            j->alg = v;
        } else if (strcmp(a, "--size") == 0) {
            char buf[256];
            snprintf(buf, sizeof(buf), "%s", v);
            if (parse_sizes(j, buf) != 0) {
                fprintf(stderr, "arcoll-sim: --size wants up to %d sizes B[,B...]\n", MAX_SIZES);
                return -1;
            }
        } else if (strcmp(a, "--iters") == 0) {
            j->iters = atoi(v);
        } else if (strcmp(a, "--warmup") == 0) {
            j->warmup = atoi(v);
        } else if (strcmp(a, "--skew") == 0) {
            j->mif = atof(v);
        } else if (strcmp(a, "--late") == 0) {
            j->late = atof(v);
        } else if (strcmp(a, "--progress") == 0) {
            char *end;
            j->progress = strtod(v, &end);
            if (*end != '\0' || !(j->progress > 0)) {
                fprintf(stderr, "arcoll-sim: --progress wants seconds > 0\n");
                return -1;
            }
        } else if (strcmp(a, "--connect") == 0) {
            j->connect = v;
        } else if (strcmp(a, "--bounce") == 0) {
            j->bounce = v;
        } else if (strcmp(a, "--window") == 0) {
            j->window = v;
        } else if (strcmp(a, "--pipe") == 0) {
            j->pipe = v;
        } else if (strcmp(a, "--params") == 0) {
            params = v;
        } else if (strcmp(a, "--set") == 0) {
            if (nsets == (int)(sizeof(sets) / sizeof(sets[0]))) {
                fprintf(stderr, "arcoll-sim: at most %d --set\n", nsets);
                return -1;
            }
            sets[nsets++] = v;
        } else if (strcmp(a, "--seed") == 0) {
            j->seed = strtoull(v, NULL, 0);
        } else if (strcmp(a, "--stack") == 0) {
            j->so.stack_bytes = (size_t)atol(v) * 1024;
        } else if (strcmp(a, "--fault") == 0) {
            j->fault = strcmp(v, "reorder") == 0   ? SIM_FAULT_REORDER
                       : strcmp(v, "corrupt") == 0 ? SIM_FAULT_CORRUPT
                       : strcmp(v, "quit") == 0    ? SIM_FAULT_QUIT
                                                   : -1;
        } else {
            fprintf(stderr, "arcoll-sim: unknown option %s\n", a);
            return -1;
        }
        i += used;
    }
    if (j->n < 1 || j->ppn < 1 || j->iters < 1 || j->warmup < 0 || j->mif < 0 || j->late > 1 ||
        j->fault < 0 || j->so.stack_bytes < 65536 || j->nsizes == 0) {
        fprintf(stderr, "arcoll-sim: need -n >= 1, --ppn >= 1, --iters >= 1, --warmup >= 0, "
                        "--skew >= 0, --late <= 1, --stack >= 64, a --size\n");
        return -1;
    }
    if (IS_RED(j->coll))
        for (int i = 0; i < j->nsizes; i++)
            if (j->sizes[i] % 8) {
                fprintf(stderr, "arcoll-sim: %s sizes are of int64 vectors: multiples of 8\n",
                        coll_names[j->coll]);
                return -1;
            }
    if (sim_params_load(params, &j->so.params) != ARCOLL_OK)
        return -1;
    for (int i = 0; i < nsets; i++)
        if (sim_params_override(&j->so.params, sets[i]) != ARCOLL_OK)
            return -1;
    return 0;
}

static double res_field(const res_t *r, int f)
{
    return f == 0 ? r->qps : f == 1 ? r->reg : f == 2 ? r->shared : r->init_us;
}

/* min, avg, max over ranks of resource field f. */
static void res_stat(const job_t *j, int f, double m[3])
{
    m[0] = INFINITY;
    m[1] = 0;
    m[2] = -INFINITY;
    for (int r = 0; r < j->n; r++) {
        double v = res_field(&j->res[r], f);
        m[0] = v < m[0] ? v : m[0];
        m[1] += v / j->n;
        m[2] = v > m[2] ? v : m[2];
    }
}

/* The resources after a row: CSV columns, a JSON member or comment lines. */
static void res_print(const job_t *j)
{
    for (int f = 0; j->resources && f < RES_FIELDS; f++) {
        double m[3];
        res_stat(j, f, m);
        if (j->csv)
            printf(",%.0f,%.2f,%.0f", m[0], m[1], m[2]);
        else if (j->json)
            printf("%s\"%s\": {\"min\": %.3f, \"avg\": %.3f, \"max\": %.3f}%s",
                   f ? ", " : ", \"resources\": {", res_names[f], m[0], m[1], m[2],
                   f == RES_FIELDS - 1 ? "}" : "");
        else
            printf("# resources: %-16s min %.0f avg %.2f max %.0f\n", res_names[f], m[0], m[1],
                   m[2]);
    }
}

static void report(const job_t *j, double wall, const sim_stats_t *st)
{
    struct rusage ru;
    const sim_params_t *p = &j->so.params;
    int nodes = (j->n + j->ppn - 1) / j->ppn;

    getrusage(RUSAGE_SELF, &ru);
    if (j->csv) {
        printf("coll,alg,n,ppn,nodes,params,size,mif,late,avg_us,min_us,max_us,iters,corrupt");
        for (int f = 0; j->resources && f < RES_FIELDS; f++)
            printf(",%s_min,%s_avg,%s_max", res_names[f], res_names[f], res_names[f]);
        printf(",ran\n");
    } else if (j->json)
        printf("[");
    else
        printf("# arcoll-sim: %s %s, %d ranks = %d nodes x %d, params %s (intra o %g L %g G %g; "
               "inter o %g L %g G %g g %g; copy_G %g reduce_G %g; rx_nic %g; leaf_nodes %g "
               "up_G %g up_links %g up_route %g; ns), %d calls after %d, skew %s %g%s\n"
               "# virtual latency, own entry to own exit: mean over ranks and calls; min/max: "
               "lowest/highest per-rank mean\n"
               "# %-10s %12s %12s %12s  %s\n",
               coll_names[j->coll], j->alg, j->n, nodes, j->ppn, p->name, p->intra_o, p->intra_L,
               p->intra_G, p->inter_o, p->inter_L, p->inter_G, p->inter_g, p->copy_G, p->reduce_G,
               p->rx_nic, p->leaf_nodes, p->up_G, p->up_links, p->up_route, j->iters, j->warmup,
               j->late >= 0 ? "late" : "random", j->mif, j->late >= 0 ? " of MIF" : "", "Size",
               "Avg(us)", "Min(us)", "Max(us)", "Ran");
    for (int si = 0; si < j->nsizes; si++) {
        double sum = 0, lo = INFINITY, hi = 0;
        for (int r = 0; r < j->n; r++) {
            double m = j->lat[(size_t)si * (size_t)j->n + (size_t)r] / j->iters / 1e3;
            sum += m;
            lo = m < lo ? m : lo;
            hi = m > hi ? m : hi;
        }
        if (j->csv) {
            printf("%s,%s,%d,%d,%d,%s,%zu,%g,%g,%.3f,%.3f,%.3f,%d,%ld", coll_names[j->coll], j->alg,
                   j->n, j->ppn, nodes, p->name, j->sizes[si], j->mif, j->late, sum / j->n, lo, hi,
                   j->iters, j->corrupt);
            res_print(j);
            printf(",%s\n", core_alg_name(j->ran[si]));
        } else if (j->json) {
            printf("%s\n  {\"coll\": \"%s\", \"alg\": \"%s\", \"n\": %d, \"ppn\": %d, \"nodes\": "
                   "%d, \"params\": \"%s\", \"size\": %zu, \"mif\": %g, \"late\": %g, \"avg_us\": "
                   "%.3f, \"min_us\": %.3f, \"max_us\": %.3f, \"iters\": %d, \"corrupt\": %ld",
                   si ? "," : "", coll_names[j->coll], j->alg, j->n, j->ppn, nodes, p->name,
                   j->sizes[si], j->mif, j->late, sum / j->n, lo, hi, j->iters, j->corrupt);
            res_print(j);
            printf(", \"ran\": \"%s\"}", core_alg_name(j->ran[si]));
        } else
            printf("  %-10zu %12.3f %12.3f %12.3f  %s\n", j->sizes[si], sum / j->n, lo, hi,
                   core_alg_name(j->ran[si]));
    }
    if (j->json)
        printf("\n]\n");
    else if (!j->csv && j->no_payload) {
        printf("# check: none (--no-payload: bulk bytes not carried, results not checked)\n");
        res_print(j);
    } else if (!j->csv) {
        printf("# check: %ld calls checked byte for byte, %ld corrupted calls\n", j->checked,
               j->corrupt);
        res_print(j);
    }
    fprintf(stderr,
            "%sarcoll-sim: %d ranks, wall %.2f s, max RSS %.1f MiB, %llu switches, %llu puts, "
            "virtual %.3f ms, %ld corrupted calls",
            isatty(2) ? "\r" : "", j->n, wall, (double)ru.ru_maxrss / 1024.0,
            (unsigned long long)st->switches, (unsigned long long)st->events,
            (double)st->vtime_ns / 1e6, j->corrupt);
    if (j->no_payload)
        fprintf(stderr, " (payload-free: not checked, %llu of them payload-free)",
                (unsigned long long)st->nodata);
    fprintf(stderr, "\n");
}

/* The progress line (sim_opts_t.tick): how far the ranks are, in calls over
 * all ranks (a large run spends minutes in init and in one call). */
static void tick(void *arg, const sim_stats_t *now)
{
    job_t *j = arg;
    long total = (long)j->n * j->nsizes * (j->warmup + j->iters);
    int tty = j->progress == 0 && isatty(2); /* --progress: lines, as for a log */

    fprintf(stderr,
            "%sarcoll-sim: %.1f s: init %ld/%d ranks, calls %ld/%ld (%.0f%%), %d ranks done, "
            "%.1f M puts, virtual %.3f ms%s",
            tty ? "\r" : "", wall_now() - j->wall0, j->inited, j->n, j->calls_done, total,
            total ? 100.0 * (double)j->calls_done / (double)total : 100.0, now->done,
            (double)now->events / 1e6, (double)now->vtime_ns / 1e6, tty ? "   " : "\n");
    j->drawn = tty;
}

int main(int argc, char **argv)
{
    job_t j;
    sim_stats_t st;
    char ppn[32];
    int rc;

    memset(&j, 0, sizeof(j));
    j.ppn = 1;
    j.iters = 10;
    j.warmup = 1;
    j.alg = "pap";
    j.late = -1;
    j.seed = 1;
    j.so.stack_bytes = 256 * 1024;
    if (parse(&j, argc, argv) != 0) {
        usage(stderr);
        return 2;
    }
    /* Pretend nodes of ppn ranks (bootstrap/boot_common.c); ppn 1 makes every
     * rank a node of its own, so that the inter-node parameters apply. */
    snprintf(ppn, sizeof(ppn), "%d", j.ppn);
    setenv("ARCOLL_NODE_SIZE", ppn, 1);
    j.so.n = j.n;
    j.so.fault = j.fault;
    if (j.progress > 0 || isatty(2)) {
        j.so.tick = tick;
        j.so.tick_arg = &j;
        j.so.tick_s = j.progress > 0 ? j.progress : 0.5;
    }
    if (j.no_payload) {
        if (shared_alloc(&j) != 0) {
            fprintf(stderr, "arcoll-sim: out of memory\n");
            shared_free(&j);
            return 1;
        }
        j.so.nodata = j.shared_s;
        j.so.nodata_len = (size_t)(j.shared_r - j.shared_s) * 2;
    }
    j.lat = calloc((size_t)j.nsizes * (size_t)j.n, sizeof(double));
    j.res = calloc((size_t)j.n, sizeof(*j.res));
    if (j.lat == NULL || j.res == NULL) {
        fprintf(stderr, "arcoll-sim: out of memory\n");
        free(j.res);
        free(j.lat);
        return 1;
    }
    j.wall0 = wall_now();
    rc = sim_run(&j.so, rank_main, &j, &st);
    if (j.drawn)
        fputc('\n', stderr); /* the rows and messages below start a line of their own */
    if (rc != ARCOLL_OK) {
        fprintf(stderr,
                "arcoll-sim: the simulation failed: %s (%ld corrupted calls, %ld failed "
                "calls)\n",
                arcoll_strerror(rc), j.corrupt, j.failed);
        free(j.res);
        shared_free(&j);
        free(j.lat);
        return 1;
    }
    report(&j, wall_now() - j.wall0, &st);
    free(j.res);
    shared_free(&j);
    free(j.lat);
    return j.corrupt || j.failed ? 1 : 0;
}
