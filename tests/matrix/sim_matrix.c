/*
 * The algorithm matrix in one process (tests/README.md, "The in-process
 * matrix"): every algorithm of the one list (src/config/algs.h) x every
 * collective it serves x sizes x copy and zero-copy paths x blocking, in
 * place and nonblocking with several calls in flight, under random arrival
 * skew, on team shapes from 2 to 16 ranks with pretend nodes (equal and
 * unequal), all over the simulated channel: the library's real algorithm,
 * engine and wire code, N virtual ranks as coroutines of this process.
 * Every received byte is checked (tests/lib patterns).
 *
 *   sim_matrix [--alg NAME[,NAME...]] [--shape N:NODES]... [--combos K]
 *              [--fault reorder|corrupt]
 *
 * A cell is one size of one algorithm's collective; it runs K of the six
 * path x mode combinations (default 2), a different K on each shape, so
 * that across the shapes every size meets every combination (--combos 6:
 * all of them on every shape).
 *
 * An algorithm that never ran as itself on any shape (fell back everywhere)
 * fails the run, so a new algorithm in the list is covered or reported.
 * A name the list does not know fails at once. --fault makes the channel
 * reorder or corrupt puts: the run must then fail.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arcoll.h"
#include "chan/sim/sim.h"
#include "config/algs.h"
#include "config/config.h"
#include "dispatch/coll.h"
#include "tl.h"

enum { NCOLL = COLL_NTYPES };

#define MX_COLL_NAME(type, name, shown, bit) #name,
#define MX_COLL_BIT(type, name, shown, bit)  bit,
#define MX_COLL_TYPE(type, name, shown, bit) type,
static const char *const coll_names[NCOLL] = {CORE_COLL_LIST(MX_COLL_NAME)};
static const unsigned coll_bits[NCOLL] = {CORE_COLL_LIST(MX_COLL_BIT)};
static const coll_type_t coll_types[NCOLL] = {CORE_COLL_LIST(MX_COLL_TYPE)};

#define MX_ALG_NAME(id, name, colls)  #name,
#define MX_ALG_COLLS(id, name, colls) colls,
enum { NALG = CORE_ALG_AUTO };
static const char *const alg_names[NALG] = {CORE_ALG_LIST(MX_ALG_NAME)};
static const unsigned alg_colls[NALG] = {CORE_ALG_LIST(MX_ALG_COLLS)};

/* A team shape: N ranks on pretend nodes (ARCOLL_NODE_SIZE: k ranks a node, or a list),
 * and settings (KEY, VALUE pairs) that change how the bytes move: the copy path's slots
 * (ARCOLL_BOUNCE_SIZE, ARCOLL_LANES; by default on this model of one host a 16 KiB slot, one
 * lane), so that fragments wrap around every lane layout (70000 bytes are 5 fragments of
 * 16 KiB), and the schedules' send order. */
typedef struct shape {
    int n;
    const char *nodes;
    const char *set[5];
} shape_t;

#define SLOTS64 "ARCOLL_BOUNCE_SIZE", "64k"
static const shape_t default_shapes[] = {
    {2, "1", {SLOTS64}},                      /* the smallest team; 4 lanes of 16 KiB */
    {3, "1", {"ARCOLL_BOUNCE_SIZE", "1k"}},   /* partial rounds; 1 KiB slots, 69 fragments */
    {5, "1", {SLOTS64, "ARCOLL_LANES", "1"}}, /* ... and odd; one lane of 64 KiB */
    {8, "1", {SLOTS64}},                      /* three rounds; the budget: 2 lanes of 16 KiB */
    {16, "1", {0}},                           /* four rounds (sloav) */
    {4, "4", {SLOTS64}}, /* one node of four: the node algorithms' one-node case */
    {8, "4", {"ARCOLL_SCHED_ORDER", "fixed"}}, /* two nodes of four; sends in a fixed order */
    {6, "2", {"ARCOLL_REGCACHE", "on"}},       /* three nodes of two; zero-copy keys cached */
    {6, "3,2,1", {0}},                         /* unequal nodes */
    {12, "4", {0}},                            /* three nodes of four */
};

static const size_t sizes[] = {0, 1, 8, 1000, 20000, 70000};
enum { NSIZE = sizeof(sizes) / sizeof(sizes[0]) };
static const char *const paths[] = {"copy", "zcopy"}; /* auto is one of them (tune tests) */
enum { NPATH = 2 };

enum { M_BLOCK, M_INPLACE, M_NB, NMODE };
static const char *const mode_names[NMODE] = {"blocking", "in-place", "nonblocking"};
#define NB_INFLIGHT 3  /* calls in flight in the nonblocking mode */
#define NB_QUEUED   10 /* ... at 8 bytes: past the window of 8, through the start queue */

typedef struct job {
    const shape_t *shape;
    int shape_index;
    bool want_alg[NALG];
    int fault;  /* SIM_FAULT_*: the channel breaks, and the matrix must say so */
    int combos; /* path x mode combinations per cell, rotating across shapes (1..6) */
    long cells, calls, bad_bytes, failed_calls;
    long native[NALG][NCOLL]; /* calls on which the algorithm ran as itself */
    long fell_back[NALG][NCOLL];
    tl_tally_t tally;
} job_t;

/* One call's buffers and arguments. */
typedef struct call {
    int coll, mode, dist;
    uint64_t id;
    size_t base;  /* bytes per block (count of elements for the reductions) */
    size_t count; /* reductions: elements per rank's share */
    unsigned char *s, *r;
    size_t *sc, *sd, *rc, *rd; /* v-forms: counts and displacements (bytes) */
    size_t sbytes, rbytes;
    arcoll_request_t req;
} call_t;

static size_t vcnt(const call_t *c, int src, int dst)
{
    if (c->coll == COLL_ALLGATHERV)
        return tl_vcount(c->dist, src, 0, c->base, c->id);
    if (c->mode == M_INPLACE) /* in place, what a pair exchanges is symmetric */
        return tl_vcount(c->dist, src < dst ? src : dst, src < dst ? dst : src, c->base, c->id);
    return tl_vcount(c->dist, src, dst, c->base, c->id);
}

static void call_free(call_t *c)
{
    free(c->rd);
    free(c->rc);
    free(c->sd);
    free(c->sc);
    free(c->r);
    free(c->s);
    memset(c, 0, sizeof(*c));
}

/* Buffers, counts and send data of call c for this rank. */
static int call_setup(call_t *c, int me, int n)
{
    size_t un = (size_t)n, so = 0, ro = 0;
    int64_t *v;

    c->sc = calloc(un, sizeof(size_t));
    c->sd = calloc(un, sizeof(size_t));
    c->rc = calloc(un, sizeof(size_t));
    c->rd = calloc(un, sizeof(size_t));
    if (c->sc == NULL || c->sd == NULL || c->rc == NULL || c->rd == NULL)
        return -1;
    switch (c->coll) {
    case COLL_ALLTOALL: c->sbytes = c->rbytes = un * c->base; break;
    case COLL_ALLGATHER:
        c->sbytes = c->base;
        c->rbytes = un * c->base;
        break;
    case COLL_ALLTOALLV:
    case COLL_ALLGATHERV:
        /* Gaps of 3 bytes between blocks: a write past a block is seen. */
        for (int j = 0; j < n; j++) {
            c->sc[j] = vcnt(c, me, j);
            c->sd[j] = so;
            so += c->sc[j] + 3;
            c->rc[j] = vcnt(c, j, me);
            c->rd[j] = ro;
            ro += c->rc[j] + 3;
        }
        c->sbytes = c->coll == COLL_ALLGATHERV ? c->sc[0] : so;
        c->rbytes = ro;
        break;
    case COLL_REDUCE_SCATTER:
        c->sbytes = un * c->count * 8;
        c->rbytes = c->mode == M_INPLACE ? c->sbytes : c->count * 8;
        break;
    default: c->sbytes = c->rbytes = c->count * 8; break;
    }
    c->s = malloc(c->sbytes + 1);
    c->r = malloc(c->rbytes + 1);
    if (c->s == NULL || c->r == NULL)
        return -1;
    memset(c->r, 0xee, c->rbytes + 1);
    switch (c->coll) {
    case COLL_ALLTOALL:
        for (int j = 0; j < n; j++)
            tl_fill((c->mode == M_INPLACE ? c->r : c->s) + (size_t)j * c->base, c->base, c->id, me,
                    j);
        break;
    case COLL_ALLGATHER:
        tl_fill(c->mode == M_INPLACE ? c->r + (size_t)me * c->base : c->s, c->base, c->id, me,
                TL_ANY);
        break;
    case COLL_ALLTOALLV:
        for (int j = 0; j < n; j++)
            if (c->mode == M_INPLACE)
                tl_fill(c->r + c->rd[j], c->rc[j], c->id, me, j);
            else
                tl_fill(c->s + c->sd[j], c->sc[j], c->id, me, j);
        break;
    case COLL_ALLGATHERV:
        tl_fill(c->mode == M_INPLACE ? c->r + c->rd[me] : c->s, c->sc[0], c->id, me, TL_ANY);
        break;
    default:
        v = (int64_t *)(void *)(c->mode == M_INPLACE ? c->r : c->s);
        for (size_t i = 0; i < c->sbytes / 8; i++)
            v[i] = tl_red_in(c->id, me, i);
        break;
    }
    return 0;
}

static int call_start(call_t *c, arcoll_team_t t, bool nb)
{
    const void *s = c->mode == M_INPLACE ? ARCOLL_IN_PLACE : c->s;
    arcoll_request_t *q = nb ? &c->req : NULL;

    switch (c->coll) {
    case COLL_ALLTOALL:
        return q ? arcoll_ialltoall(t, s, c->r, c->base, q) : arcoll_alltoall(t, s, c->r, c->base);
    case COLL_ALLGATHER:
        return q ? arcoll_iallgather(t, s, c->r, c->base, q)
                 : arcoll_allgather(t, s, c->r, c->base);
    case COLL_ALLTOALLV:
        return q ? arcoll_ialltoallv(t, s, c->sc, c->sd, c->r, c->rc, c->rd, q)
                 : arcoll_alltoallv(t, s, c->sc, c->sd, c->r, c->rc, c->rd);
    case COLL_ALLGATHERV:
        return q ? arcoll_iallgatherv(t, s, c->sc[0], c->r, c->rc, c->rd, q)
                 : arcoll_allgatherv(t, s, c->sc[0], c->r, c->rc, c->rd);
    case COLL_REDUCE_SCATTER:
        return q ? arcoll_ireduce_scatter_block(t, s, c->r, c->count, ARCOLL_INT64, ARCOLL_SUM, q)
                 : arcoll_reduce_scatter_block(t, s, c->r, c->count, ARCOLL_INT64, ARCOLL_SUM);
    default:
        return q ? arcoll_iallreduce(t, s, c->r, c->count, ARCOLL_INT64, ARCOLL_SUM, q)
                 : arcoll_allreduce(t, s, c->r, c->count, ARCOLL_INT64, ARCOLL_SUM);
    }
}

/* Wrong bytes in this rank's result of c (the gaps between v-blocks included). */
static size_t call_check(const call_t *c, int me, int n, size_t *first)
{
    const int64_t *v = (const int64_t *)(const void *)c->r;
    size_t bad = 0;

    switch (c->coll) {
    case COLL_ALLTOALL:
    case COLL_ALLGATHER:
        for (int j = 0; j < n; j++)
            bad += tl_check(c->r + (size_t)j * c->base, c->base, c->id, j,
                            c->coll == COLL_ALLTOALL ? me : TL_ANY, first);
        break;
    case COLL_ALLTOALLV:
    case COLL_ALLGATHERV:
        for (int j = 0; j < n; j++) {
            bad += tl_check(c->r + c->rd[j], c->rc[j], c->id, j,
                            c->coll == COLL_ALLTOALLV ? me : TL_ANY, first);
            for (size_t g = c->rd[j] + c->rc[j]; g < c->rd[j] + c->rc[j] + 3; g++)
                bad += c->r[g] != 0xee;
        }
        break;
    case COLL_REDUCE_SCATTER:
        for (size_t i = 0; i < c->count; i++)
            bad += v[i] != tl_red_sum(c->id, n, (size_t)me * c->count + i);
        break;
    default:
        for (size_t i = 0; i < c->count; i++)
            bad += v[i] != tl_red_sum(c->id, n, i);
        break;
    }
    return bad + (c->r[c->rbytes] != 0xee); /* the byte past the buffer */
}

static void set(job_t *j, arcoll_context_t ctx, const char *k, const char *v)
{
    int rc = arcoll_config_set(ctx, k, v);
    tl_expect(&j->tally, rc == ARCOLL_OK, "arcoll_config_set %s=%s: %s", k, v, arcoll_strerror(rc));
}

/* One cell: alg x coll x size x path x mode (the calls of a mode: 1, or NB_* in flight). */
static void cell(job_t *j, arcoll_context_t ctx, int me, int a, int k, int z, int p, int m,
                 uint64_t *serial)
{
    arcoll_team_t t = arcoll_team_world(ctx);
    int n = arcoll_team_size(t), picked, ran, ncalls = 1;
    const char *why;
    call_t cs[NB_QUEUED];
    char what[160];

    memset(cs, 0, sizeof(cs));
    if (m == M_NB)
        ncalls = sizes[z] == 8 ? NB_QUEUED : NB_INFLIGHT;
    for (int i = 0; i < ncalls; i++) {
        call_t *c = &cs[i];
        c->coll = k;
        c->mode = m;
        c->id = ++*serial;
        c->base = sizes[z];
        c->count = (sizes[z] + 7) / 8;
        /* v-forms: every distribution meets every size and mode across the cells */
        c->dist = (int)((size_t)(z + p + m + i) % TL_NDIST);
        if (call_setup(c, me, n) != 0) {
            tl_expect(&j->tally, 0, "out of memory");
            goto out;
        }
    }
    ran = coll_alg_resolve(t, coll_types[k],
                           cs[0].coll >= COLL_REDUCE_SCATTER ? cs[0].count * 8 : cs[0].base, a,
                           &picked, &why);
    snprintf(what, sizeof(what), "%s %s %zu B %s %s, %d ranks on nodes %s (ran %s)", alg_names[a],
             coll_names[k], sizes[z], paths[p], mode_names[m], n, j->shape->nodes,
             ran >= 0 && ran < NALG ? alg_names[ran] : "?");
    /* arrival skew: up to 20 us of computation before the call, different per rank and call */
    sim_compute(tl_word(cs[0].id, me, 0, 0) % 20000);
    for (int i = 0; i < ncalls; i++) {
        int rc = call_start(&cs[i], t, m == M_NB);
        if (!tl_expect(&j->tally, rc == ARCOLL_OK, "rank %d: %s: start of call %d: %s (%s)", me,
                       what, i, arcoll_strerror(rc), arcoll_last_error(ctx))) {
            j->failed_calls++;
            goto out; /* the team is failed now: later cells say so */
        }
    }
    /* Completed in the reverse order of their starts. */
    for (int i = ncalls - 1; m == M_NB && i >= 0; i--) {
        int rc = arcoll_wait(&cs[i].req);
        if (!tl_expect(&j->tally, rc == ARCOLL_OK, "rank %d: %s: wait of call %d: %s (%s)", me,
                       what, i, arcoll_strerror(rc), arcoll_last_error(ctx))) {
            j->failed_calls++;
            goto out;
        }
    }
    for (int i = 0; i < ncalls; i++) {
        size_t first = 0, bad = call_check(&cs[i], me, n, &first);
        j->calls++;
        j->bad_bytes += (long)bad;
        tl_expect(&j->tally, bad == 0, "rank %d: %s: call %d: %zu wrong bytes, the first at %zu",
                  me, what, i, bad, first);
    }
    if (me == 0) {
        j->cells++;
        if (ran == a)
            j->native[a][k] += ncalls;
        else
            j->fell_back[a][k] += ncalls;
    }
out:
    for (int i = 0; i < ncalls; i++)
        call_free(&cs[i]);
}

static int rank_main(int me, void *arg)
{
    job_t *j = arg;
    const char *cfg[7] = {"ARCOLL_CHANNEL", "sim", NULL};
    arcoll_context_t ctx;
    arcoll_oob_t oob;
    uint64_t serial = 0;
    char var[64];
    int rc;

    sim_oob(&oob);
    for (int i = 0; j->shape->set[i] != NULL && i < 4; i++)
        cfg[2 + i] = j->shape->set[i];
    rc = arcoll_init_config(&oob, cfg, &ctx);
    if (!tl_expect(&j->tally, rc == ARCOLL_OK, "rank %d: arcoll_init_config: %s (%s)", me,
                   arcoll_strerror(rc), arcoll_last_error(NULL)))
        return rc;
    for (int a = 0; a < NALG; a++) {
        if (!j->want_alg[a])
            continue;
        for (int k = 0; k < NCOLL; k++) {
            if (!(alg_colls[a] & coll_bits[k]))
                continue;
            snprintf(var, sizeof(var), "ARCOLL_%s_ALG", coll_names[k]);
            for (char *q = var; *q; q++)
                *q = (char)(*q >= 'a' && *q <= 'z' ? *q - 'a' + 'A' : *q);
            set(j, ctx, var, alg_names[a]);
            /* Of the path x mode combinations, j->combos per size, a different set on each
             * shape, so that across the shapes every size meets every combination. */
            for (int z = 0; z < NSIZE; z++)
                for (int c = 0; c < j->combos; c++) {
                    int pm = (j->shape_index + z + a + c * (NPATH * NMODE / j->combos)) %
                             (NPATH * NMODE);
                    set(j, ctx, "ARCOLL_PATH", paths[pm / NMODE]);
                    cell(j, ctx, me, a, k, z, pm / NMODE, pm % NMODE, &serial);
                }
            set(j, ctx, var, "auto");
        }
    }
    rc = arcoll_finalize(ctx);
    tl_expect(&j->tally, rc == ARCOLL_OK, "rank %d: arcoll_finalize: %s", me, arcoll_strerror(rc));
    return rc;
}

static int parse_algs(job_t *j, char *list)
{
    memset(j->want_alg, 0, sizeof(j->want_alg));
    for (char *tok = strtok(list, ","); tok != NULL; tok = strtok(NULL, ",")) {
        int a = 0;
        while (a < NALG && strcmp(alg_names[a], tok) != 0)
            a++;
        if (a == NALG) {
            fprintf(stderr,
                    "sim_matrix: unknown algorithm \"%s\" (the list, src/config/algs.h:", tok);
            for (a = 0; a < NALG; a++)
                fprintf(stderr, " %s", alg_names[a]);
            fprintf(stderr, ")\n");
            return -1;
        }
        j->want_alg[a] = true;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static job_t j;
    shape_t shapes[32] = {{0}};
    int nshapes = 0, rc = 0;

    for (int a = 0; a < NALG; a++)
        j.want_alg[a] = true;
    j.combos = 2;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--alg") == 0 && i + 1 < argc) {
            if (parse_algs(&j, argv[++i]) != 0)
                return 2;
        } else if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc && nshapes < 32) {
            char *colon = strchr(argv[++i], ':');
            shapes[nshapes].n = atoi(argv[i]);
            shapes[nshapes].nodes = colon != NULL ? colon + 1 : "1";
            if (shapes[nshapes++].n < 1) {
                fprintf(stderr, "sim_matrix: --shape N:NODES, N >= 1\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--fault") == 0 && i + 1 < argc) {
            i++;
            j.fault = strcmp(argv[i], "reorder") == 0   ? SIM_FAULT_REORDER
                      : strcmp(argv[i], "corrupt") == 0 ? SIM_FAULT_CORRUPT
                                                        : -1;
            if (j.fault < 0) {
                fprintf(stderr, "sim_matrix: --fault reorder|corrupt\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--combos") == 0 && i + 1 < argc) {
            j.combos = atoi(argv[++i]);
            if (j.combos < 1 || j.combos > NPATH * NMODE) {
                fprintf(stderr, "sim_matrix: --combos 1..%d\n", NPATH * NMODE);
                return 2;
            }
        } else {
            fprintf(stderr, "usage: sim_matrix [--alg NAME[,NAME...]] [--shape N:NODES]... "
                            "[--combos K] [--fault reorder|corrupt]\n");
            return 2;
        }
    }
    if (nshapes == 0) {
        nshapes = (int)(sizeof(default_shapes) / sizeof(default_shapes[0]));
        memcpy(shapes, default_shapes, sizeof(default_shapes));
    }
    for (int s = 0; s < nshapes; s++) {
        sim_opts_t so;
        sim_stats_t st;
        long calls0 = j.calls;
        memset(&so, 0, sizeof(so));
        so.n = shapes[s].n;
        so.stack_bytes = 256 * 1024;
        so.fault = j.fault;
        if (sim_params_load("host-shm", &so.params) != ARCOLL_OK)
            return 1;
        setenv("ARCOLL_NODE_SIZE", shapes[s].nodes, 1);
        j.shape = &shapes[s];
        j.shape_index = s;
        rc = sim_run(&so, rank_main, &j, &st);
        tl_expect(&j.tally, rc == ARCOLL_OK, "%d ranks on nodes %s: the simulation: %s",
                  shapes[s].n, shapes[s].nodes, arcoll_strerror(rc));
        printf("sim_matrix: %d ranks on nodes %s: %ld calls checked\n", shapes[s].n,
               shapes[s].nodes, j.calls - calls0);
        fflush(stdout);
    }
    /* Every algorithm asked for ran as itself somewhere, for each collective it serves. */
    for (int a = 0; a < NALG; a++)
        for (int k = 0; j.want_alg[a] && k < NCOLL; k++)
            if (alg_colls[a] & coll_bits[k])
                tl_expect(&j.tally, j.native[a][k] > 0,
                          "%s never ran as itself for %s (%ld calls fell back) on the shapes run",
                          alg_names[a], coll_names[k], j.fell_back[a][k]);
    for (int a = 0; a < NALG; a++) {
        if (!j.want_alg[a])
            continue;
        printf("sim_matrix: %-10s", alg_names[a]);
        for (int k = 0; k < NCOLL; k++)
            if (alg_colls[a] & coll_bits[k])
                printf(" %s %ld/%ld", coll_names[k], j.native[a][k],
                       j.native[a][k] + j.fell_back[a][k]);
        printf("\n");
    }
    printf("sim_matrix: %ld cells, %ld calls, %ld wrong bytes, %ld failed calls\n", j.cells,
           j.calls, j.bad_bytes, j.failed_calls);
    return tl_summary(&j.tally, stdout, "sim_matrix");
}
