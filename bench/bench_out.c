/* arcoll-bench's output: the table, CSV and JSON rows, progress lines and the
 * gnuplot plot. */
#include "bench/bench.h"

/* ---- Output ---- */

static int col_w(const char *name)
{
    int w = (int)strlen(name) + 1;
    return w < 10 ? 10 : w;
}

static void put_f(double v, int w, int prec)
{
    if (isnan(v))
        printf(" %*s", w, "-");
    else
        printf(" %*.*f", w, prec, v);
}

void bench_print_header(const bench_t *b)
{
    const opts_t *o = &b->o;
    char algs[128] = "";

    for (int a = 0; a < o->nalgs; a++)
        snprintf(algs + strlen(algs), sizeof(algs) - strlen(algs), "%s%s", a ? "," : "",
                 o->algs[a]);
    if (o->format == FMT_CSV) {
        printf("coll,size,mif,late,T_us,bound_us,memcpy_us,alg,lat_us,lat_min_us,lat_max_us,"
               "iters,baseline,base_over_alg,alg_over_bound,memcpy_frac\n");
        return;
    }
    if (o->format == FMT_JSON) {
        printf("{\"bench\": \"arcoll-bench\", \"version\": \"%s\", \"ranks\": %d, "
               "\"nodes\": %d, \"cores\": %ld, \"algorithms\": \"%s\", \"baseline\": \"%s\",\n"
               " \"skew\": \"%s\", \"mode\": \"%s\", \"seed\": %llu, \"dist\": \"%s\", \"stat\": "
               "\"%s\", \"clock\": "
               "\"%s\", "
               "\"barrier\": \"%s\", \"path\": \"%s\",\n"
               " \"memory_bytes\": {\"rank0\": %zu, \"min\": %zu, \"max\": %zu}, "
               "\"mpi\": %s%s%s,\n \"results\": [",
               ARCOLL_VERSION_STRING, b->n, b->nnodes, b->cores, algs, o->algs[b->base],
               b->spin ? "spin" : "sleep", o->nlates ? "late" : "random",
               (unsigned long long)o->seed, bstat_dist_names[o->dist],
               o->median ? "median" : "mean", b->shared_clock ? "monotonic" : "delays",
#ifdef ARCOLL_BENCH_MPI
               "MPI_Barrier",
#else
               "arcoll allgather",
#endif
               arcoll_config_get(b->ctx, "ARCOLL_PATH"), b->mem_self, b->mem_min, b->mem_max,
               *b->mpi_info ? "\"" : "", *b->mpi_info ? b->mpi_info : "null",
               *b->mpi_info ? "\"" : "");
        return;
    }
    printf("# arcoll-bench %s: %d rank%s on %d node%s, %ld cores here%s\n", ARCOLL_VERSION_STRING,
           b->n, b->n > 1 ? "s" : "", b->nnodes, b->nnodes > 1 ? "s" : "", b->cores,
           b->local_n > b->cores ? " (ranks outnumber cores)" : "");
    /* One arcoll_config_get at a time: each call reuses the same buffer. */
    printf("# algorithms %s, baseline %s; path %s", algs, o->algs[b->base],
           arcoll_config_get(b->ctx, "ARCOLL_PATH"));
    printf(", channel %s\n", arcoll_config_get(b->ctx, "ARCOLL_CHANNEL"));
    if (o->nlates)
        printf("# skew: late mode: round(fraction x %d) ranks, drawn afresh every iteration, "
               "wait MIF x T; the others none\n",
               b->n);
    else
        printf("# skew: every rank waits U[0,1) x MIF x T after the barrier, fresh every "
               "iteration\n");
    printf("# skew by %s%s; seed %llu (--seed)\n", b->spin ? "spinning" : "sleeping",
           b->local_n > b->cores
               ? (b->spin ? " although ranks outnumber cores: latencies are inflated"
                          : ", as ranks outnumber cores (a spinning rank steals a core)")
               : "",
           (unsigned long long)o->seed);
    if (!b->spin)
        printf("# a sleep ends %.1f us late on average here (all ranks sleeping 20 us at once)\n",
               b->overshoot_us);
    if (b->shared_clock)
        printf("# arrivals: CLOCK_MONOTONIC, shared by all ranks (one host): bound from real "
               "arrivals\n");
    else
        printf("# arrivals: %s: bound from each rank's measured delay after its own barrier "
               "exit (barrier exit skew unseen)\n",
               b->one_host ? "--arrivals delays" : "no common clock (several hosts)");
#ifdef ARCOLL_BENCH_MPI
    printf("# barrier: MPI_Barrier; arcoll bootstrap: MPI callbacks; %s\n", b->mpi_info);
#else
    printf("# barrier: 8-byte arcoll allgather (direct); arcoll bootstrap: PMIx\n");
#endif
    printf("# memory registered/shared per process: %zu B on rank 0 (%.1f KiB x %d ranks), "
           "%zu..%zu B over ranks\n",
           b->mem_self, (double)b->mem_self / 1024 / b->n, b->n, b->mem_min, b->mem_max);
    printf("# iterations %d (%d above %d B), warm-up %d (%d); validation %s\n", o->iters,
           bstat_iters(BSTAT_LARGE_SIZE + 1, o->iters), BSTAT_LARGE_SIZE, o->warmup,
           bstat_iters(BSTAT_LARGE_SIZE + 1, o->warmup), o->validate ? "every iteration" : "off");
    printf("# T: one message of the size between ranks 0 and 1 (2-rank allgather, median of 7 "
           "batches)%s\n",
           b->n < 2 ? "; 1 rank: none, so no skew" : "");
    if (o->median)
        printf("# latency: own entry to own exit, median over iterations of the mean over ranks "
               "(us, --stat median); bound: the same of latest arrival - own arrival, averaged "
               "over the algorithms\n");
    else
        printf("# latency: own entry to own exit, mean over ranks and iterations (us); bound: "
               "mean of latest arrival - own arrival, averaged over the algorithms\n");
    printf("# %s/ALG: latency of %s / latency of ALG (>1: ALG faster); ALG/bnd: latency / "
           "ALG's own bound%s\n",
           o->algs[b->base], o->algs[b->base], o->full ? " (ALG:bnd)" : " (-f shows it)");
    printf("# memcpy rows: T column = one core copying the %d x size bytes a rank receives "
           "(reduce_scatter: its input; allreduce: size bytes) (us); ALG columns = that / ALG "
           "latency at %s %g\n",
           b->n, o->nlates ? "late" : "MIF", o->nlates ? b->points[0].late : b->points[0].mif);
    if (o->full)
        printf("# ALG:min/ALG:max: lowest/highest per-rank mean latency; ALG:bnd: the bound "
               "from ALG's own arrivals\n");
}

void bench_print_coll_header(const bench_t *b, int coll)
{
    const opts_t *o = &b->o;
    char h[64];

    if (o->format != FMT_TABLE)
        return;
    printf("\n# %s (size: %s%s)\n%-10s %7s", colls[coll].name, colls[coll].size_is,
           !colls[coll].vcounts ? ""
           : coll == COLL_ALLGATHERV && o->dist == BSTAT_DIST_ONE_HEAVY
               ? ", one-heavy: one rank's block 100x"
               : dist_desc[o->dist],
           "# Size", "MIF");
    if (o->nlates)
        printf(" %5s", "late");
    printf(" %8s %10s", "T(us)", "bound(us)");
    for (int a = 0; a < o->nalgs; a++)
        printf(" %*s", col_w(o->algs[a]), o->algs[a]);
    for (int a = 0; a < o->nalgs; a++) {
        if (a == b->base)
            continue;
        snprintf(h, sizeof(h), "%s/%s", o->algs[b->base], o->algs[a]);
        printf(" %*s", col_w(h), h);
    }
    for (int a = 0; a < o->nalgs; a++) {
        snprintf(h, sizeof(h), "%s/bnd", o->algs[a]);
        printf(" %*s", col_w(h), h);
    }
    if (o->full) {
        for (int a = 0; a < o->nalgs; a++) {
            snprintf(h, sizeof(h), "%s:min", o->algs[a]);
            printf(" %*s", col_w(h), h);
            snprintf(h, sizeof(h), "%s:max", o->algs[a]);
            printf(" %*s", col_w(h), h);
            snprintf(h, sizeof(h), "%s:bnd", o->algs[a]);
            printf(" %*s", col_w(h), h);
        }
        printf(" %6s", "iters");
    }
    printf("\n");
}

static void json_num(const char *key, double v, int comma)
{
    if (isnan(v))
        printf("\"%s\": null%s", key, comma ? ", " : "");
    else
        printf("\"%s\": %.4f%s", key, v, comma ? ", " : "");
}

void bench_print_row(bench_t *b, const row_t *w)
{
    const opts_t *o = &b->o;
    const point_t *pt = &b->points[w->point];
    const bstat_point_t *res = w->res, *base = &res[b->base];
    double bound = bstat_mean_bound(res, o->nalgs); /* each ALG/bnd uses ALG's own */
    char h[64];

    if (o->format == FMT_CSV) {
        for (int a = 0; a < o->nalgs; a++) {
            printf("%s,%zu,%g,", colls[w->coll].name, w->bytes, pt->mif);
            if (pt->late >= 0)
                printf("%g", pt->late);
            printf(",%.4f,%.4f,%.4f,%s,%.4f,%.4f,%.4f,%d,%s,", w->t_us, res[a].bound_mean,
                   w->memcpy_us, o->algs[a], res[a].lat_mean, res[a].lat_rank_min,
                   res[a].lat_rank_max, res[a].iters, o->algs[b->base]);
            double r1 = bstat_ratio(base->lat_mean, res[a].lat_mean);
            double r2 = bstat_ratio(res[a].lat_mean, res[a].bound_mean);
            double r3 = bstat_ratio(w->memcpy_us, res[a].lat_mean);
            double v[3] = {r1, r2, r3};
            for (int k = 0; k < 3; k++) {
                if (!isnan(v[k]))
                    printf("%.4f", v[k]);
                printf(k < 2 ? "," : "\n");
            }
        }
        return;
    }
    if (o->format == FMT_JSON) {
        printf("%s\n  {\"coll\": \"%s\", \"size\": %zu, \"mif\": %g, ", b->json_first ? "" : ",",
               colls[w->coll].name, w->bytes, pt->mif);
        b->json_first = 0;
        json_num("late", pt->late >= 0 ? pt->late : NAN, 1);
        json_num("T_us", w->t_us, 1);
        json_num("bound_us", bound, 1);
        json_num("memcpy_us", w->memcpy_us, 1);
        printf("\"iters\": %d, \"alg\": {", res[0].iters);
        for (int a = 0; a < o->nalgs; a++) {
            printf("%s\"%s\": {", a ? ", " : "", o->algs[a]);
            json_num("lat_us", res[a].lat_mean, 1);
            json_num("lat_min_us", res[a].lat_rank_min, 1);
            json_num("lat_max_us", res[a].lat_rank_max, 1);
            json_num("bound_us", res[a].bound_mean, 1);
            json_num("base_over_alg", bstat_ratio(base->lat_mean, res[a].lat_mean), 1);
            json_num("alg_over_bound", bstat_ratio(res[a].lat_mean, res[a].bound_mean), 1);
            json_num("memcpy_frac", bstat_ratio(w->memcpy_us, res[a].lat_mean), 0);
            printf("}");
        }
        printf("}}");
        return;
    }
    printf("%-10zu %7g", w->bytes, pt->mif);
    if (o->nlates)
        printf(" %5g", pt->late);
    put_f(w->t_us, 8, 3);
    put_f(bound, 10, 2);
    for (int a = 0; a < o->nalgs; a++)
        put_f(res[a].lat_mean, col_w(o->algs[a]), 2);
    for (int a = 0; a < o->nalgs; a++) {
        if (a == b->base)
            continue;
        snprintf(h, sizeof(h), "%s/%s", o->algs[b->base], o->algs[a]);
        put_f(bstat_ratio(base->lat_mean, res[a].lat_mean), col_w(h), 2);
    }
    for (int a = 0; a < o->nalgs; a++) {
        snprintf(h, sizeof(h), "%s/bnd", o->algs[a]);
        put_f(bstat_ratio(res[a].lat_mean, res[a].bound_mean), col_w(h), 2);
    }
    if (o->full) {
        for (int a = 0; a < o->nalgs; a++) {
            snprintf(h, sizeof(h), "%s:min", o->algs[a]);
            put_f(res[a].lat_rank_min, col_w(h), 2);
            put_f(res[a].lat_rank_max, col_w(h), 2);
            snprintf(h, sizeof(h), "%s:bnd", o->algs[a]);
            put_f(res[a].bound_mean, col_w(h), 2);
        }
        printf(" %6d", res[0].iters);
    }
    printf("\n");
}

/* The single-copy limit under a size's rows: memcpy time, then for each
 * algorithm the fraction of that limit it reached at the first point. */
void bench_print_memcpy_row(const bench_t *b, const row_t *first)
{
    const opts_t *o = &b->o;

    if (o->format != FMT_TABLE)
        return;
    printf("%-10zu %7s", first->bytes, "memcpy");
    if (o->nlates)
        printf(" %5s", "");
    put_f(first->memcpy_us, 8, 3);
    printf(" %10s", "");
    for (int a = 0; a < o->nalgs; a++) {
        double f = bstat_ratio(first->memcpy_us, first->res[a].lat_mean);
        char pc[32];
        if (isnan(f))
            snprintf(pc, sizeof(pc), "-");
        else
            snprintf(pc, sizeof(pc), "%.2g%%", 100 * f);
        printf(" %*s", col_w(o->algs[a]), pc);
    }
    printf("\n");
}

void bench_progress(bench_t *b, int done, int total, int coll, size_t bytes)
{
    double now = now_us();

    if (b->o.quiet || b->rank != 0 || done == total)
        return;
    /* Only sweeps longer than a few seconds, and not too often. */
    if (now - b->t_start < 3e6 || now - b->t_progress < 5e6)
        return;
    b->t_progress = now;
    double el = (now - b->t_start) / 1e6;
    fprintf(stderr, "arcoll-bench: %d/%d points (%s %zu B done), %.0f s\n", done, total,
            colls[coll].name, bytes, el);
}

/* ---- The plot (gnuplot) ---- */

/* Binary sizes: "512", "4K", "1M" for axes; "512 B", "4 KiB" with unit. */
static const char *size_label(size_t v, char *buf, size_t len, int unit)
{
    if (unit) {
        if (v >= (1u << 20) && v % (1u << 20) == 0)
            snprintf(buf, len, "%zu MiB", v >> 20);
        else if (v >= 1024 && v % 1024 == 0)
            snprintf(buf, len, "%zu KiB", v >> 10);
        else
            snprintf(buf, len, "%zu B", v);
        return buf;
    }
    if (v >= (1u << 20) && v % (1u << 20) == 0)
        snprintf(buf, len, "%zuM", v >> 20);
    else if (v >= 1024 && v % 1024 == 0)
        snprintf(buf, len, "%zuK", v >> 10);
    else
        snprintf(buf, len, "%zu", v);
    return buf;
}

/* A datablock of the rows of one collective selected by point (p >= 0,
 * x = size) or by size (p < 0, x = MIF): x, bound, memcpy, latencies. Sets
 * *ymin to a decade below everything but memcpy, which may be clipped where
 * it is far below the collectives (small sizes). */
static void plot_block(FILE *g, const bench_t *b, int coll, int p, size_t bytes, const char *name,
                       double *ymin)
{
    double lo = INFINITY;

    fprintf(g, "%s << EOD\n", name);
    for (int i = 0; i < b->nrows; i++) {
        const row_t *w = &b->rows[i];
        if (w->coll != coll || (p >= 0 ? w->point != p : w->bytes != bytes))
            continue;
        double bound = bstat_mean_bound(w->res, b->o.nalgs);
        if (p >= 0)
            fprintf(g, "%zu", w->bytes);
        else
            fprintf(g, "%g", b->points[w->point].mif);
        fprintf(g, " %g %g", bound > 0 ? bound : NAN, w->memcpy_us > 0 ? w->memcpy_us : NAN);
        if (bound > 0)
            lo = fmin(lo, bound);
        for (int a = 0; a < b->o.nalgs; a++) {
            fprintf(g, " %g", w->res[a].lat_mean);
            if (w->res[a].lat_mean > 0)
                lo = fmin(lo, w->res[a].lat_mean);
        }
        fprintf(g, "\n");
    }
    fprintf(g, "EOD\n");
    *ymin = isfinite(lo) ? pow(10, floor(log10(lo))) : 0.01;
}

static const char *point_title(const bench_t *b, int p, char *buf, size_t len)
{
    const point_t *pt = &b->points[p];
    if (pt->late >= 0)
        snprintf(buf, len, "MIF %g, %g%% of ranks late", pt->mif, 100 * pt->late);
    else if (pt->mif == 0)
        snprintf(buf, len, "MIF 0 (no skew)");
    else
        snprintf(buf, len, "MIF %g", pt->mif);
    return buf;
}

/* Latency vs size per algorithm (log-log), one panel per collective and
 * point; with several MIFs also latency vs MIF at the smallest and largest
 * size. Returns 0 or an error already reported. */
int bench_plot(const bench_t *b)
{
    const opts_t *o = &b->o;
    int cl[NCOLLS], ncolls = 0, nmifp = 0;
    size_t mifsz[2];
    char title[96], lbl[32], name[32];
    double ymin;
    FILE *g;

    if (strchr(o->plot, '\'') != NULL || strchr(o->plot, '\\') != NULL) {
        fprintf(stderr, "arcoll-bench: --plot: no quotes or backslashes in the file name\n");
        return 1;
    }
    for (int c = 0; c < NCOLLS; c++)
        if (o->colls & (1 << c))
            cl[ncolls++] = c;
    if (o->nlates == 0 && o->nmifs > 1) {
        mifsz[nmifp++] = b->sizes[0];
        if (b->nsizes > 1)
            mifsz[nmifp++] = b->sizes[b->nsizes - 1];
    }
    int ncol = b->npoints + nmifp;
    g = popen("gnuplot", "w");
    if (g == NULL) {
        fprintf(stderr, "arcoll-bench: cannot start gnuplot: %s\n", strerror(errno));
        return 1;
    }
    fprintf(g, "set terminal pngcairo size %d,%d font 'sans,10' noenhanced\n", 500 * ncol,
            480 * ncolls + 40);
    fprintf(g, "set output '%s'\n", o->plot);
    fprintf(g,
            "set multiplot layout %d,%d title 'arcoll-bench %s: %d ranks, %s skew, seed "
            "%llu; latency = mean over ranks of own entry to own exit' font 'sans,12'\n",
            ncolls, ncol, ARCOLL_VERSION_STRING, b->n, b->spin ? "spin" : "sleep",
            (unsigned long long)o->seed);
    fprintf(g, "set grid\nset key below horizontal maxcols 3 font 'sans,9'\n"
               "set logscale y 10\nset format y '%%g'\nset ylabel 'latency (us)'\n"
               "set style line 100 lc rgb 'gray30' dt 2 lw 2\n"
               "set style line 101 lc rgb 'black' dt 3 lw 2\n");
    for (int ci = 0; ci < ncolls; ci++) {
        int c = cl[ci];
        /* Tics at every other power of two of the sweep, labelled 1K, 1M. */
        fprintf(g, "set logscale x 2\nset xlabel '%s'\nset xtics (", colls[c].size_is);
        for (int si = 0; si<b->nsizes; si += b->nsizes> 8 ? 2 : 1)
            fprintf(g, "%s'%s' %zu", si ? ", " : "", size_label(b->sizes[si], lbl, sizeof(lbl), 0),
                    b->sizes[si]);
        /* A margin: a tic exactly on a log-scale range end can be dropped. */
        fprintf(g, ")\nset xrange [%g:%g]\n", b->sizes[0] / 1.2, b->sizes[b->nsizes - 1] * 1.2);
        for (int p = 0; p < b->npoints; p++) {
            snprintf(name, sizeof(name), "$c%dp%d", c, p);
            plot_block(g, b, c, p, 0, name, &ymin);
            fprintf(g, "set yrange [%g:*]\nset title '%s, %s'\nplot ", ymin, colls[c].name,
                    point_title(b, p, title, sizeof(title)));
            for (int a = 0; a < o->nalgs; a++)
                fprintf(g, "%s using 1:%d with linespoints lw 2 pt %d title '%s', ", name, 4 + a,
                        5 + 2 * a, o->algs[a]);
            fprintf(g,
                    "%s using 1:2 with lines ls 100 title 'arrival bound', "
                    "%s using 1:3 with lines ls 101 title 'memcpy of %d x size, 1 core'\n",
                    name, name, colls[c].memcpy_one ? 1 : b->n);
        }
        fprintf(g, "unset logscale x\nset xtics autofreq\nset xrange [-1:*]\n"
                   "set xlabel 'MIF (delay bound / T)'\n");
        for (int k = 0; k < nmifp; k++) {
            size_t at = mifsz[k];
            for (int si = 0; si < b->nsizes && !bench_size_ok(c, at); si++)
                at = b->sizes[si]; /* reductions skip sizes below one double */
            snprintf(name, sizeof(name), "$c%dm%d", c, k);
            plot_block(g, b, c, -1, at, name, &ymin);
            fprintf(g, "set yrange [%g:*]\nset title '%s, size %s, vs MIF'\nplot ", ymin,
                    colls[c].name, size_label(at, lbl, sizeof(lbl), 1));
            for (int a = 0; a < o->nalgs; a++)
                fprintf(g, "%s using 1:%d with linespoints lw 2 pt %d title '%s', ", name, 4 + a,
                        5 + 2 * a, o->algs[a]);
            fprintf(g, "%s using 1:2 with linespoints ls 100 pt 1 title 'arrival bound'\n", name);
        }
    }
    fprintf(g, "unset multiplot\n");
    int st = pclose(g);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 127)
            fprintf(stderr, "arcoll-bench: gnuplot not found (Debian: apt-get install "
                            "gnuplot-nox); no plot written\n");
        else
            fprintf(stderr, "arcoll-bench: gnuplot failed; %s may be incomplete\n", o->plot);
        return 1;
    }
    return 0;
}
