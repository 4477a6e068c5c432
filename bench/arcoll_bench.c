/*
 * arcoll-bench: collective latency (alltoall, allgather, their v-forms,
 * reduce_scatter_block, allreduce) under injected process-arrival skew
 * (Qian and Afsahi §3.2), several algorithms side by side in one run.
 *
 * Per iteration: a barrier, then each rank waits (spins or sleeps) a delay
 * bounded by MIF x T(size), T being the measured time of one message of the
 * payload over the same channel, then the timed collective. Latency is from
 * a rank's own entry to its own exit; the figure of merit is its mean over
 * ranks. The arrival bound of rank i is (latest arrival - arrival of i): no
 * collective measured here can finish on i before the last rank has arrived
 * (every result depends on every rank; with -D sparse a v-form's may not),
 * so latency/bound says how much any algorithm could still gain.
 *
 * Iterations are the outer loop and algorithms the inner one, and all
 * algorithms of an iteration get the same delays, so drift, noise and the
 * arrival pattern hit them alike. Delays come from a counter-based generator
 * of (seed, rank, iteration) (bench_stats.c), so every rank knows every
 * rank's delay without communicating.
 *
 * Built with mpicc and -DARCOLL_BENCH_MPI, `mpi` is one more algorithm
 * (Open MPI's own collective under the identical skew), the barrier is
 * MPI_Barrier and arcoll bootstraps through MPI callbacks instead of PMIx.
 */
#include "bench/bench.h"

int bench_check(const bench_t *b, int rc, const char *what)
{
    if (rc != ARCOLL_OK) {
        fprintf(stderr, "arcoll-bench[%d]: %s: %s (%s)\n", b->rank, what, arcoll_strerror(rc),
                arcoll_last_error(b->ctx));
        return 1;
    }
    return 0;
}

/* ---- Communication that is not being measured ---- */

#ifdef ARCOLL_BENCH_MPI
static int oob_allgather(const void *sbuf, void *rbuf, size_t len, void *user)
{
    (void)user;
    if (len > INT_MAX)
        return -1;
    return MPI_Allgather(sbuf, (int)len, MPI_BYTE, rbuf, (int)len, MPI_BYTE, MPI_COMM_WORLD) ==
                   MPI_SUCCESS
               ? 0
               : -1;
}

static int oob_barrier(void *user)
{
    (void)user;
    return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}

#endif

static int set_alg(bench_t *b, int coll, const char *alg)
{
    const char *var = colls[coll].alg_var;

    if (b->cur_alg[coll] != NULL && strcmp(b->cur_alg[coll], alg) == 0)
        return 0;
    if (bench_check(b, arcoll_config_set(b->ctx, var, alg), var))
        return 1;
    b->cur_alg[coll] = alg;
    return 0;
}

/* Column a's algorithm and data path (ALG/PATH compares paths in one run). */
static int set_column(bench_t *b, int coll, int a)
{
    const char *path = b->o.alg_path[a] ? b->o.alg_path[a] : b->base_path;

    if (set_alg(b, coll, b->o.alg_name[a]))
        return 1;
    if (b->cur_path != NULL && strcmp(b->cur_path, path) == 0)
        return 0;
    if (bench_check(b, arcoll_config_set(b->ctx, "ARCOLL_PATH", path), "ARCOLL_PATH"))
        return 1;
    b->cur_path = path;
    return 0;
}

/* MPI_Barrier in the MPI build; otherwise an 8-byte arcoll allgather, always
 * with the direct algorithm so that the barrier does not change with the
 * algorithm under test. */
int bench_barrier(bench_t *b)
{
#ifdef ARCOLL_BENCH_MPI
    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS) {
        fprintf(stderr, "arcoll-bench[%d]: MPI_Barrier failed\n", b->rank);
        return 1;
    }
    return 0;
#else
    uint64_t in = 0;
    if (set_alg(b, COLL_ALLGATHER, "direct"))
        return 1;
    return bench_check(b, arcoll_allgather(b->world, &in, b->bar, sizeof(in)), "barrier");
#endif
}

/* Every rank's `len` bytes into out (n x len), outside any timed region. */
int bench_share(bench_t *b, const void *in, void *out, size_t len, const char *what)
{
#ifdef ARCOLL_BENCH_MPI
    if (oob_allgather(in, out, len, NULL) != 0) {
        fprintf(stderr, "arcoll-bench[%d]: %s: MPI_Allgather failed\n", b->rank, what);
        return 1;
    }
    return 0;
#else
    return bench_check(b, arcoll_allgather(b->world, in, out, len), what);
#endif
}

/* bench_share() for ranks that may wait long while others measure: they sleep
 * between polls, so that a measurement gets its cores to itself even when
 * ranks outnumber cores. */
static int share_idle(bench_t *b, const void *in, void *out, size_t len, const char *what)
{
    const struct timespec nap = {0, 200000};
#ifdef ARCOLL_BENCH_MPI
    MPI_Request req;
    int done = 0;
    if (MPI_Iallgather(in, (int)len, MPI_BYTE, out, (int)len, MPI_BYTE, MPI_COMM_WORLD, &req) !=
        MPI_SUCCESS)
        goto fail;
    while (!done) {
        if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            goto fail;
        if (!done)
            nanosleep(&nap, NULL);
    }
    return 0;
fail:
    fprintf(stderr, "arcoll-bench[%d]: %s: MPI_Iallgather failed\n", b->rank, what);
    return 1;
#else
    arcoll_request_t req;
    int rc = arcoll_iallgather(b->world, in, out, len, &req);
    while (rc == ARCOLL_OK && req != NULL && (rc = arcoll_test(&req)) == ARCOLL_INPROGRESS) {
        nanosleep(&nap, NULL);
        rc = ARCOLL_OK;
    }
    return bench_check(b, rc, what);
#endif
}

/* ---- Measurements outside the sweep: T(size), memcpy ---- */

/* T(size): one message of `bytes` over the channel, from a 2-rank allgather
 * between ranks 0 and 1 (one message each way, concurrently). The median of
 * batch means is robust to a batch that lost its core. */
static int measure_t(bench_t *b, size_t bytes, double *t_us)
{
    double t = 0, batch[7];
    double *all = b->rank_sum; /* n doubles of scratch */
    int reps = bytes >= 65536 ? 5 : 30;

    if (set_alg(b, COLL_ALLGATHER, "direct"))
        return 1;
    if (b->pair != NULL) {
        /* On one host, ranks 0 and 1 on distinct cores: otherwise T depends on
         * where the scheduler happened to put them (0.2 vs 4 us when they
         * share a core and hand it back and forth). */
        cpu_set_t saved, one;
        int pinned = 0;
        if (b->one_host && sched_getaffinity(0, sizeof(saved), &saved) == 0 &&
            CPU_COUNT(&saved) > 1) {
            for (int cpu = 0, k = 0; cpu < CPU_SETSIZE && !pinned; cpu++)
                if (CPU_ISSET(cpu, &saved) && k++ == b->rank) {
                    CPU_ZERO(&one);
                    CPU_SET(cpu, &one);
                    pinned = sched_setaffinity(0, sizeof(one), &one) == 0;
                }
        }
        for (int i = 0; i < reps; i++)
            if (bench_check(b, arcoll_allgather(b->pair, b->s, b->r, bytes), "T(size)"))
                return 1;
        for (int k = 0; k < 7; k++) {
            double t0 = now_us();
            for (int i = 0; i < reps; i++)
                if (bench_check(b, arcoll_allgather(b->pair, b->s, b->r, bytes), "T(size)"))
                    return 1;
            batch[k] = (now_us() - t0) / reps;
        }
        t = bstat_median(batch, 7);
        if (pinned)
            sched_setaffinity(0, sizeof(saved), &saved);
    }
    if (share_idle(b, &t, all, sizeof(t), "sharing T"))
        return 1;
    *t_us = all[0];
    return 0;
}

/* The single-copy limit: one core (rank 0's) copying len bytes (what a rank
 * receives, or must read for a reduction), while the other ranks wait. */
static int measure_memcpy(bench_t *b, size_t len, double *us)
{
    double t = 0, batch[7];
    double *all = b->rank_sum;

    if (b->rank == 0) {
        int reps = len >= (4u << 20) ? 3 : (int)((4u << 20) / len);
        if (reps > 1000)
            reps = 1000;
        memcpy(b->r, b->s, len);
        for (int k = 0; k < 7; k++) {
            double t0 = now_us();
            for (int i = 0; i < reps; i++) {
                memcpy(b->r, b->s, len);
                __asm__ __volatile__("" : : "r"(b->r) : "memory"); /* keep every copy */
            }
            batch[k] = (now_us() - t0) / reps;
        }
        t = bstat_median(batch, 7);
    }
    if (share_idle(b, &t, all, sizeof(t), "sharing memcpy time"))
        return 1;
    *us = all[0];
    return 0;
}

/* ---- One point of the sweep ---- */

static int timed_coll(bench_t *b, int a, int coll, size_t bytes, const char *s, char *r)
{
#ifdef ARCOLL_BENCH_MPI
    if (b->is_mpi[a]) {
        int rc = colls[coll].run_mpi(b, s, r, bytes);
        if (rc != MPI_SUCCESS)
            fprintf(stderr, "arcoll-bench[%d]: MPI %s failed\n", b->rank, colls[coll].name);
        return rc != MPI_SUCCESS;
    }
#endif
    return bench_check(b, colls[coll].run(b, s, r, bytes), b->o.algs[a]);
}

/* Per rank and (iteration, algorithm): barrier exit, entry, exit; then one
 * slot with the count of wrong results, so that all ranks stop together.
 * Returns 0, 1 on a failure of this rank alone, 2 when all ranks stop. */
#define REC 3

static int run_point(bench_t *b, int coll, size_t bytes, const point_t *pt, double t_us,
                     bstat_point_t *res)
{
    const opts_t *o = &b->o;
    const coll_ops_t *ops = &colls[coll];
    int iters = bstat_iters(bytes, o->iters), warm = bstat_iters(bytes, o->warmup);
    size_t nrec = (size_t)iters * (size_t)o->nalgs * REC + 1;
    double *mine = calloc(nrec, sizeof(double)), *all = malloc(nrec * sizeof(double) * b->n);
    bstat_skew_t sk = {pt->late >= 0 ? BSTAT_SKEW_LATE : BSTAT_SKEW_RANDOM, pt->mif, pt->late,
                       o->seed};
    int rc = 1;

    if (mine == NULL || all == NULL) {
        fprintf(stderr, "arcoll-bench[%d]: out of memory\n", b->rank);
        goto out;
    }
    for (int it = -warm; it < iters; it++) {
        uint64_t key = ++b->iter_key;
        bstat_delays(&sk, key, b->n, t_us, b->perm, b->delay);
        if (ops->vcounts) /* every algorithm of the iteration gets the same counts */
            bench_set_counts(b, coll, bytes, key);
        for (int a = 0; a < o->nalgs; a++) {
            char *s = b->is_mpi[a] ? b->ms : b->s, *r = b->is_mpi[a] ? b->mr : b->r;
            uint64_t dkey = key * MAX_ALGS + (uint64_t)a; /* fresh data per call */
            if (o->validate)
                ops->fill(b, s, bytes, dkey);
            if (bench_barrier(b))
                goto out;
            double tb = now_us();
            /* Set after the barrier, which may itself be an arcoll allgather. */
            if (!b->is_mpi[a] && set_column(b, coll, a))
                goto out;
            if (b->delay[b->rank] > 0)
                wait_until(tb + b->delay[b->rank], b->spin);
            double t0 = now_us();
            if (timed_coll(b, a, coll, bytes, s, r))
                goto out;
            double t1 = now_us();
            if (o->validate) {
                int bad = ops->verify(b, r, bytes, dkey);
                b->checked++;
                if (bad && mine[nrec - 1] == 0)
                    fprintf(stderr, "arcoll-bench[%d]: %s %s %zu B: wrong data\n", b->rank,
                            o->algs[a], ops->name, bytes);
                mine[nrec - 1] += bad;
            }
            if (it >= 0) {
                double *m = mine + ((size_t)it * (size_t)o->nalgs + (size_t)a) * REC;
                m[0] = tb;
                m[1] = t0;
                m[2] = t1;
            }
        }
    }
    if (bench_share(b, mine, all, nrec * sizeof(double), "gathering times"))
        goto out;
    for (int j = 0; j < b->n; j++)
        b->failed += (long)all[(size_t)j * nrec + nrec - 1];
    if (b->failed > 0) {
        if (b->rank == 0)
            fprintf(stderr, "arcoll-bench: wrong data at %s %zu B; stopping\n", ops->name, bytes);
        rc = 2; /* every rank knows: they can still finalize together */
        goto out;
    }
    /* Arrivals on the node's common clock when there is one; otherwise each
     * rank's measured delay after its barrier exit (barrier skew unseen). */
    for (int a = 0; a < o->nalgs; a++) {
        for (int it = 0; it < iters; it++)
            for (int j = 0; j < b->n; j++) {
                const double *m =
                    all + (size_t)j * nrec + ((size_t)it * (size_t)o->nalgs + (size_t)a) * REC;
                size_t k = (size_t)it * (size_t)b->n + (size_t)j;
                b->arrive[k] = b->shared_clock ? m[1] : m[1] - m[0];
                b->lat[k] = m[2] - m[1];
            }
        bstat_point(b->arrive, b->lat, iters, b->n, b->rank_sum, &res[a]);
        /* --stat median: every latency and bound column shows it instead
         * (lat_rank_min/max stay per-rank means). */
        if (o->median)
            bstat_point_median(b->arrive, b->lat, iters, b->n, b->med, &res[a].lat_mean,
                               &res[a].bound_mean);
    }
    rc = 0;
out:
    free(mine);
    free(all);
    return rc;
}

/* Algorithm names, the baseline, the points and the sizes. */
static int setup_sweep(bench_t *b, char *err, size_t errlen)
{
    opts_t *o = &b->o;

    b->base = -1;
    for (int a = 0; a < o->nalgs; a++) {
        if (o->alg_name[a][0] == '\0') /* a default column: no /PATH */
            snprintf(o->alg_name[a], sizeof(o->alg_name[a]), "%s", o->algs[a]);
        b->is_mpi[a] = strcmp(o->alg_name[a], "mpi") == 0;
        if (b->is_mpi[a] && o->alg_path[a] != NULL) {
            snprintf(err, errlen, "--alg %s: the MPI library's path is its own", o->algs[a]);
            return -1;
        }
#ifndef ARCOLL_BENCH_MPI
        if (b->is_mpi[a]) {
            snprintf(err, errlen,
                     "--alg mpi: this binary is built without MPI; use "
                     "arcoll-bench-mpi");
            return -1;
        }
#endif
        for (int k = 0; k < a; k++)
            if (strcmp(o->algs[k], o->algs[a]) == 0) {
                snprintf(err, errlen, "--alg: %s twice", o->algs[a]);
                return -1;
            }
    }
    /* The named baseline; by default mpi, else direct, else the first. */
    const char *const prefs[3] = {o->baseline ? o->baseline : "mpi", o->baseline ? "" : "direct",
                                  o->algs[0]};
    for (int pass = 0; pass < 3 && b->base < 0; pass++)
        for (int a = 0; a < o->nalgs && b->base < 0; a++)
            if (strcmp(o->algs[a], prefs[pass]) == 0)
                b->base = a;
    if (o->baseline != NULL && strcmp(o->algs[b->base], o->baseline) != 0) {
        snprintf(err, errlen, "--baseline %s is not one of --alg", o->baseline);
        return -1;
    }
    for (int m = 0; m < o->nmifs; m++) {
        if (o->nlates == 0)
            b->points[b->npoints++] = (point_t){o->mifs[m], -1};
        for (int l = 0; l < o->nlates; l++)
            b->points[b->npoints++] = (point_t){o->mifs[m], o->lates[l]};
    }
    /* A rank's v-form data is at most vtotal x the mean; MPI counts and
     * displacements are ints. */
    int v = 0, red = 0;
    for (int c = 0; c < NCOLLS; c++) {
        v |= (o->colls >> c & 1) && colls[c].vcounts;
        red |= (o->colls >> c & 1) && colls[c].reduces;
    }
    int n = arcoll_context_size(b->ctx);
    b->vtotal = bstat_vtotal(v ? o->dist : BSTAT_DIST_UNIFORM, n);
    if (o->max > INT_MAX / b->vtotal) {
        snprintf(err, errlen, "--message-size: %zu B x %zu (%s, %d ranks) does not fit an int",
                 o->max, b->vtotal, bstat_dist_names[v ? o->dist : BSTAT_DIST_UNIFORM], n);
        return -1;
    }
    if (red && o->max < sizeof(double)) {
        snprintf(err, errlen, "--message-size: reductions need at least 8 B (one double)");
        return -1;
    }
    b->nsizes = bstat_sizes(o->min, o->max, NULL, 0);
    b->sizes = calloc((size_t)b->nsizes, sizeof(size_t));
    b->t_cache = malloc((size_t)b->nsizes * sizeof(double));
    b->memcpy_cache[0] = malloc((size_t)b->nsizes * sizeof(double));
    b->memcpy_cache[1] = malloc((size_t)b->nsizes * sizeof(double));
    b->rows = calloc((size_t)b->nsizes * NCOLLS * (size_t)b->npoints, sizeof(row_t));
    if (b->sizes == NULL || b->t_cache == NULL || b->memcpy_cache[0] == NULL ||
        b->memcpy_cache[1] == NULL || b->rows == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    bstat_sizes(o->min, o->max, b->sizes, b->nsizes);
    for (int i = 0; i < b->nsizes; i++)
        b->t_cache[i] = b->memcpy_cache[0][i] = b->memcpy_cache[1][i] = -1;
    return 0;
}

#ifdef ARCOLL_BENCH_MPI
/* What MPI the baseline is and whether it yields when idle, read through
 * MPI_T so the header says what was really in effect. */
static void mpi_describe(bench_t *b)
{
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0, provided, ncvar = 0, yield = -1;

    MPI_Get_library_version(ver, &len);
    ver[strcspn(ver, ",\n")] = '\0';
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) == MPI_SUCCESS) {
        MPI_T_cvar_get_num(&ncvar);
        for (int i = 0; i < ncvar && yield < 0; i++) {
            char name[128], desc[8];
            int nlen = sizeof(name), dlen = sizeof(desc), verb, bind, scope, count;
            MPI_Datatype dt;
            MPI_T_enum en;
            MPI_T_cvar_handle h;
            if (MPI_T_cvar_get_info(i, name, &nlen, &verb, &dt, &en, desc, &dlen, &bind, &scope) !=
                    MPI_SUCCESS ||
                strcmp(name, "mpi_yield_when_idle") != 0)
                continue;
            if (MPI_T_cvar_handle_alloc(i, NULL, &h, &count) == MPI_SUCCESS) {
                union {
                    int i;
                    char c[16];
                } v = {0};
                if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS)
                    yield = dt == MPI_INT ? v.i != 0 : v.c[0] != 0;
                MPI_T_cvar_handle_free(&h);
            }
        }
        MPI_T_finalize();
    }
    snprintf(b->mpi_info, sizeof(b->mpi_info), "mpi: %.100s, mpi_yield_when_idle %s", ver,
             yield < 0 ? "unknown"
             : yield   ? "on"
                       : "off");
}

#endif

/* Hosts (for the clock basis and ranks per host), memory, the pair team,
 * buffers. */
static int setup_run(bench_t *b)
{
    char host[HOST_LEN] = "", *hosts = NULL;
    uint64_t mem = 0, *mems = NULL;
    int rc = 1;

    b->world = arcoll_team_world(b->ctx);
    b->rank = arcoll_context_rank(b->ctx);
    b->n = arcoll_context_size(b->ctx);
    b->nnodes = arcoll_context_nnodes(b->ctx);
    b->cores = sysconf(_SC_NPROCESSORS_ONLN);
    b->delay = calloc((size_t)b->n, sizeof(double));
    b->rank_sum = calloc((size_t)b->n, sizeof(double));
    b->perm = calloc((size_t)b->n, sizeof(int));
    b->bar = calloc((size_t)b->n, sizeof(uint64_t));
    hosts = calloc((size_t)b->n, HOST_LEN);
    mems = calloc((size_t)b->n, sizeof(uint64_t));
    b->buflen = b->o.max * b->vtotal;
    b->sc = calloc((size_t)b->n, sizeof(size_t));
    b->sd = calloc((size_t)b->n, sizeof(size_t));
    b->rc = calloc((size_t)b->n, sizeof(size_t));
    b->rd = calloc((size_t)b->n, sizeof(size_t));
    b->isc = calloc((size_t)b->n, sizeof(int));
    b->isd = calloc((size_t)b->n, sizeof(int));
    b->irc = calloc((size_t)b->n, sizeof(int));
    b->ird = calloc((size_t)b->n, sizeof(int));
    b->s = aligned_alloc(4096, (b->buflen + 4095) / 4096 * 4096);
    b->r = aligned_alloc(4096, (b->buflen + 4095) / 4096 * 4096);
    for (int a = 0; a < b->o.nalgs; a++)
        if (b->is_mpi[a] && b->ms == NULL) {
            b->ms = aligned_alloc(4096, (b->buflen + 4095) / 4096 * 4096);
            b->mr = aligned_alloc(4096, (b->buflen + 4095) / 4096 * 4096);
            if (b->ms == NULL || b->mr == NULL)
                goto nomem;
            memset(b->ms, 1, b->buflen);
            memset(b->mr, 0, b->buflen);
        }
    if (b->delay == NULL || b->rank_sum == NULL || b->perm == NULL || b->bar == NULL ||
        hosts == NULL || mems == NULL || b->s == NULL || b->r == NULL || b->sc == NULL ||
        b->sd == NULL || b->rc == NULL || b->rd == NULL || b->isc == NULL || b->isd == NULL ||
        b->irc == NULL || b->ird == NULL)
        goto nomem;
    /* Touch every page now rather than inside a timed call. */
    memset(b->s, 1, b->buflen);
    memset(b->r, 0, b->buflen);

    /* One host means one CLOCK_MONOTONIC: real arrivals can be compared. */
    gethostname(host, sizeof(host) - 1);
    if (bench_share(b, host, hosts, HOST_LEN, "sharing host names"))
        goto out;
    b->one_host = 1;
    b->local_n = 0;
    for (int j = 0; j < b->n; j++) {
        b->one_host &= strcmp(hosts + (size_t)j * HOST_LEN, hosts) == 0;
        b->local_n += strcmp(hosts + (size_t)j * HOST_LEN, host) == 0;
    }
    b->spin = b->o.skew >= 0 ? b->o.skew : b->local_n <= b->cores;
    if (b->o.arrivals == 1 && !b->one_host) {
        fprintf(stderr,
                "arcoll-bench[%d]: --arrivals clock: the ranks span several hosts, "
                "which share no clock\n",
                b->rank);
        goto out;
    }
    b->shared_clock = b->o.arrivals != 0 && b->one_host;
    if (!b->spin) {
        /* What a sleeping rank's arrival really looks like: all ranks at once,
         * as in the sweep. The bound uses real arrivals either way. */
        double late = 0, *all = b->rank_sum;
        for (int i = 0; i < 20; i++) {
            double until = now_us() + 20;
            wait_until(until, 0);
            late += now_us() - until;
        }
        late /= 20;
        if (bench_share(b, &late, all, sizeof(late), "sharing sleep lateness"))
            goto out;
        for (int j = 0; j < b->n; j++)
            b->overshoot_us += all[j] / b->n;
    }

    /* Before the pair team, which only the bench needs. */
    if (bench_check(b, arcoll_context_memory(b->ctx, &b->mem_self), "arcoll_context_memory"))
        goto out;
    mem = b->mem_self;
    if (bench_share(b, &mem, mems, sizeof(mem), "sharing memory use"))
        goto out;
    b->mem_self = mems[0];
    b->mem_min = SIZE_MAX;
    for (int j = 0; j < b->n; j++) {
        b->mem_min = mems[j] < b->mem_min ? mems[j] : b->mem_min;
        b->mem_max = mems[j] > b->mem_max ? mems[j] : b->mem_max;
    }

    int two[2] = {0, 1};
    if (bench_check(b, arcoll_team_create(b->ctx, two, b->rank < 2 && b->n > 1 ? 2 : 0, &b->pair),
                    "pair team for T"))
        goto out;
    rc = 0;
    goto out;
nomem:
    fprintf(stderr, "arcoll-bench[%d]: out of memory (%zu B buffers)\n", b->rank, b->buflen);
out:
    free(hosts);
    free(mems);
    return rc;
}

/* Every rank's RC QPs and registered bytes after the run, as min/mean/max
 * into out[0..2] and out[3..5] (the same on every rank). */
static int resources(bench_t *b, double out[6])
{
    arcoll_resources_t mine, *all = calloc((size_t)b->n, sizeof(mine));
    int rc = 1;

    if (all == NULL) {
        fprintf(stderr, "arcoll-bench[%d]: out of memory\n", b->rank);
        return 1;
    }
    if (bench_check(b, arcoll_context_resources(b->ctx, &mine), "arcoll_context_resources") ||
        bench_share(b, &mine, all, sizeof(mine), "sharing resources"))
        goto out;
    out[0] = out[3] = INFINITY;
    out[1] = out[2] = out[4] = out[5] = 0;
    for (int j = 0; j < b->n; j++) {
        double q = all[j].qps, m = (double)all[j].registered_bytes;
        out[0] = q < out[0] ? q : out[0];
        out[1] += q / b->n;
        out[2] = q > out[2] ? q : out[2];
        out[3] = m < out[3] ? m : out[3];
        out[4] += m / b->n;
        out[5] = m > out[5] ? m : out[5];
    }
    rc = 0;
out:
    free(all);
    return rc;
}

/* The whole sweep: collectives, sizes, points. Returns like run_point. */
int bench_sweep(bench_t *b)
{
    const opts_t *o = &b->o;
    int total = 0, done = 0;

    for (int c = 0; c < NCOLLS; c++)
        for (int si = 0; si < b->nsizes; si++)
            total += (o->colls >> c & 1) * bench_size_ok(c, b->sizes[si]) * b->npoints;
    b->t_start = b->t_progress = now_us();
    for (int c = 0; c < NCOLLS; c++) {
        if (!(o->colls & (1 << c)))
            continue;
        int si0 = 0;
        while (!bench_size_ok(c, b->sizes[si0])) /* setup_sweep checked that the largest is */
            si0++;
        /* Untimed: first calls set up channels and pages and fault in code. */
        bstat_point_t discard[MAX_ALGS];
        point_t quiet = {0, -1};
        int prc = run_point(b, c, b->sizes[si0], &quiet, 0, discard);
        if (prc != 0)
            return prc;
        if (b->rank == 0)
            bench_print_coll_header(b, c);
        for (int si = si0; si < b->nsizes; si++) {
            size_t bytes = b->sizes[si];
            row_t *first = NULL;
            int one = colls[c].memcpy_one;
            double *mc = &b->memcpy_cache[one][si];
            /* T and the memcpy limit do not depend on the collective. */
            if (b->t_cache[si] < 0 && measure_t(b, bytes, &b->t_cache[si]))
                return 1;
            if (*mc < 0 && measure_memcpy(b, one ? bytes : bytes * (size_t)b->n, mc))
                return 1;
            for (int p = 0; p < b->npoints; p++) {
                row_t *w = &b->rows[b->nrows];
                *w = (row_t){.coll = c,
                             .point = p,
                             .bytes = bytes,
                             .t_us = b->t_cache[si],
                             .memcpy_us = *mc};
                prc = run_point(b, c, bytes, &b->points[p], w->t_us, w->res);
                if (prc != 0)
                    return prc;
                b->nrows++;
                if (first == NULL)
                    first = w;
                if (b->rank == 0) {
                    bench_print_row(b, w);
                    fflush(stdout);
                }
                bench_progress(b, ++done, total, c, bytes);
            }
            if (b->rank == 0)
                bench_print_memcpy_row(b, first);
        }
    }
    return 0;
}

static void bench_free(bench_t *b)
{
    free(b->s);
    free(b->r);
    free(b->ms);
    free(b->mr);
    free(b->delay);
    free(b->rank_sum);
    free(b->perm);
    free(b->bar);
    free(b->arrive);
    free(b->lat);
    free(b->med);
    free(b->sizes);
    free(b->t_cache);
    free(b->memcpy_cache[0]);
    free(b->memcpy_cache[1]);
    free(b->sc);
    free(b->sd);
    free(b->rc);
    free(b->rd);
    free(b->isc);
    free(b->isd);
    free(b->irc);
    free(b->ird);
    free(b->rows);
}

int main(int argc, char **argv)
{
    static bench_t bench;
    bench_t *b = &bench;
    char err[256] = "";
    int rc = 1, prc, setup_ok = 0;
    double res[6] = {0};

    /* The default 50 us timer slack would stretch every short sleep. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    prc = bench_parse(argc, argv, &b->o, err, sizeof(err));
    if (prc == 1) {
        bench_usage(stdout);
        return 0;
    }
#ifdef ARCOLL_BENCH_MPI
    int mrank, msize;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &mrank);
    MPI_Comm_size(MPI_COMM_WORLD, &msize);
    if (prc != 0) {
        if (mrank == 0) {
            fprintf(stderr, "arcoll-bench: %s\n", err);
            bench_usage(stderr);
        }
        MPI_Finalize();
        return 2;
    }
    arcoll_oob_t oob = {oob_allgather, oob_barrier, NULL, mrank, msize};
    if (bench_check(b, arcoll_init(&oob, &b->ctx), "arcoll_init"))
        MPI_Abort(MPI_COMM_WORLD, 1);
#else
    if (bench_check(b, arcoll_init(NULL, &b->ctx), "arcoll_init"))
        return 1;
    if (prc != 0) {
        if (arcoll_context_rank(b->ctx) == 0) {
            fprintf(stderr, "arcoll-bench: %s\n", err);
            bench_usage(stderr);
        }
        arcoll_finalize(b->ctx);
        return 2;
    }
#endif
    /* Option errors are the same on every rank: all stop, one speaks. */
    if (setup_sweep(b, err, sizeof(err)) != 0) {
        if (arcoll_context_rank(b->ctx) == 0)
            fprintf(stderr, "arcoll-bench: %s\n", err);
        rc = 2;
        goto out_fin;
    }
    /* The library says which algorithm serves which collective. */
    for (int a = 0; a < b->o.nalgs; a++)
        for (int c = 0; c < NCOLLS; c++)
            if (!b->is_mpi[a] && b->o.colls & (1 << c) &&
                arcoll_config_set(b->ctx, colls[c].alg_var, b->o.alg_name[a]) != ARCOLL_OK) {
                if (arcoll_context_rank(b->ctx) == 0)
                    fprintf(stderr, "arcoll-bench: --alg %s: not an algorithm of %s (%s)\n",
                            b->o.algs[a], colls[c].name, arcoll_last_error(b->ctx));
                rc = 2;
                goto out_fin;
            }
    if (b->o.path &&
        bench_check(b, arcoll_config_set(b->ctx, "ARCOLL_PATH", b->o.path), "--path")) {
        rc = 2;
        goto out_fin;
    }
    const char *cur = arcoll_config_get(b->ctx, "ARCOLL_PATH");
    snprintf(b->base_path, sizeof(b->base_path), "%s", cur ? cur : "auto");
    if (setup_run(b) != 0)
        goto out_local;
    setup_ok = 1;
    b->arrive = malloc((size_t)b->o.iters * (size_t)b->n * sizeof(double));
    b->lat = malloc((size_t)b->o.iters * (size_t)b->n * sizeof(double));
    b->med = malloc((size_t)b->o.iters * 2 * sizeof(double));
    if (b->arrive == NULL || b->lat == NULL || b->med == NULL) {
        fprintf(stderr, "arcoll-bench[%d]: out of memory\n", b->rank);
        goto out_local;
    }
#ifdef ARCOLL_BENCH_MPI
    mpi_describe(b);
#endif
    if (b->rank == 0) {
        if (b->local_n > b->cores)
            fprintf(stderr, "arcoll-bench: warning: %d ranks on %ld cores: %s\n", b->local_n,
                    b->cores,
                    b->spin ? "spinning as asked (--skew spin): a spinning late rank steals the "
                              "core an early rank needs, so latencies are inflated"
                            : "injecting skew by sleeping (a spinning rank would steal a core)");
        bench_print_header(b);
        b->json_first = 1;
    }
    prc = bench_sweep(b);
    if (prc == 1)
        goto out_local;
    rc = prc == 0 ? 0 : 1;
    if (rc == 0 && resources(b, res) != 0)
        goto out_local;
    if (b->rank == 0) {
        FILE *f = b->o.format == FMT_TABLE ? stdout : stderr;
        if (b->o.format == FMT_JSON && rc == 0)
            printf("\n ],\n \"resources\": {\"rc_qps\": [%.0f, %.3g, %.0f], "
                   "\"registered_bytes\": [%.0f, %.6g, %.0f]},\n"
                   " \"validation\": {\"checked\": %ld, \"failed\": %ld}}\n",
                   res[0], res[1], res[2], res[3], res[4], res[5], b->checked, b->failed);
        fflush(stdout); /* the data before the closing lines on stderr */
        if (rc == 0 && b->o.format != FMT_JSON)
            fprintf(f,
                    "%s# resources per process: RC QPs min/mean/max %.0f/%.3g/%.0f, registered "
                    "bytes min/mean/max %.0f/%.6g/%.0f%s\n",
                    b->o.format == FMT_TABLE ? "\n" : "", res[0], res[1], res[2], res[3], res[4],
                    res[5],
#ifdef ARCOLL_BENCH_MPI
                    " (QPs: the algorithms run, and ranks 0-1 for T)"
#else
                    " (QPs: the algorithms run, the barrier's direct allgather wires every pair)"
#endif
            );
        if (b->o.validate)
            fprintf(f, "%s# validation: %ld passed, %ld failed (calls checked over %d rank%s)\n",
                    b->o.format == FMT_TABLE ? "\n" : "", b->checked * b->n - b->failed, b->failed,
                    b->n, b->n > 1 ? "s" : "");
        fprintf(f, "# %.1f s\n", (now_us() - b->t_start) / 1e6);
    }
out_fin:
    /* Every rank gets here together, so the collective teardown is safe. */
    if (setup_ok)
        arcoll_team_destroy(b->ctx, b->pair);
    arcoll_finalize(b->ctx);
#ifdef ARCOLL_BENCH_MPI
    MPI_Finalize();
#endif
    fflush(stdout);
    if (rc == 0 && b->rank == 0 && b->o.plot != NULL && bench_plot(b) != 0)
        rc = 1;
    bench_free(b);
    return rc;

out_local:
    /* This rank alone failed: a collective teardown would wait for the
     * others forever. The launcher ends the job when a rank exits non-zero. */
#ifdef ARCOLL_BENCH_MPI
    MPI_Abort(MPI_COMM_WORLD, 1);
#endif
    bench_free(b);
    return 1;
}
