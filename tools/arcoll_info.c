/* arcoll_info: version, RDMA devices (ports, GIDs with their types), the job
 * shape, the chosen channel/device/GID, resources per process, which algorithm
 * serves which message size, and the active configuration. Run it like the
 * application (mpirun/srun, or alone). --cleanup: remove the shared-memory
 * names of this user's exited processes (docs/reliability.md) and exit. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arcoll.h"
#include "chan/smp/smp_seg.h"
#include "chan/verbs/verbs.h"
#include "chan/verbs/verbs_opts.h"
#include "dispatch/coll.h"
#include "engine/engine.h"

#define INFO_MAX_BYTES ((size_t)1 << 40) /* sizes above this print as "inf" */

static void info_size(size_t v, char *buf, size_t len)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;

    if (v >= INFO_MAX_BYTES && v != (size_t)1 << 40) {
        snprintf(buf, len, "inf");
        return;
    }
    while (u < 4 && v >= 1024 && v % 1024 == 0)
        v /= 1024, u++;
    snprintf(buf, len, "%zu %s", v, unit[u]);
}

static int info_cmp(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;

    return x < y ? -1 : x > y;
}

/* One line per range of bytes per rank [from, to) served alike: the sizes
 * where a choice can change are the rules' bounds, the node segment limits and,
 * for anything else, the powers of two. */
static void info_algs(struct arcoll_team *t, coll_type_t type, int alg)
{
    const core_tune_t *tab = &t->ctx->cfg.tune;
    int coll = type == COLL_ALLTOALL    ? CORE_TUNE_ALLTOALL
               : type == COLL_ALLGATHER ? CORE_TUNE_ALLGATHER
                                        : -1; /* no table: auto's built-in rule */
    /* Serve rules also name allgatherv, reduce_scatter and allreduce. */
    int scoll = type == COLL_ALLTOALLV ? -1 : (int)type;
    size_t cut[2 * (CORE_TUNE_MAX + CORE_TUNE_DEFAULT_MAX) + 48], n = 0;
    size_t from = 0;
    int last_run = -1, last_picked = -1, last_zc = -1, last_host = 0;
    core_tune_shape_t shape;
    const char *last_why = NULL;

    for (int i = 0; i <= 40; i++)
        cut[n++] = (size_t)1 << i;
    for (uint32_t i = 0; i < tab->n; i++) {
        if (tab->rule[i].coll != scoll)
            continue;
        cut[n++] = tab->rule[i].lo;
        cut[n++] = tab->rule[i].hi;
    }
    cut[n++] = t->ctx->cfg.shm_max + 1;
    cut[n++] = t->ctx->chan->zcopy_threshold;
    if (t->hseg != NULL)
        cut[n++] = t->hseg->max_bytes + 1;
    qsort(cut, n, sizeof(cut[0]), info_cmp);
    hier_team_shape(t, &shape);
    for (size_t i = 0; i <= n; i++) {
        char a[32], b[32];
        const char *why = NULL;
        int picked = -1, run = -1, zc = -1, host = 0;
        if (i < n && (cut[i] == 0 || cut[i] > INFO_MAX_BYTES || (i > 0 && cut[i] == cut[i - 1])))
            continue;
        if (i < n)
            run = coll_alg_resolve(t, type, cut[i], alg, &picked, &why);
        /* The path matters to the flat algorithms of alltoall and allgather. */
        if (run >= 0 && coll_alg_by_id(run)->tx_progress != NULL && coll >= 0)
            zc = eng_path_zcopy(t, (int)type, cut[i]);
        /* A serve rule sends the shim's calls of this size to MPI. */
        if (i < n && scoll >= 0)
            host = core_tune_host(tab, scoll, cut[i], &shape);
        if (i < n && run == last_run && picked == last_picked && why == last_why && zc == last_zc &&
            host == last_host)
            continue;
        if (last_run >= 0) {
            char range[80];
            info_size(from, a, sizeof(a));
            info_size(i < n ? cut[i] : SIZE_MAX, b, sizeof(b));
            snprintf(range, sizeof(range), "%s-%s", a, b);
            printf("  %-20s %-10s %-20s %s", coll_type_name(type), core_alg_name(alg), range,
                   core_alg_name(last_picked));
            if (last_why != NULL)
                printf(" (falls back to %s: %s)", core_alg_name(last_run), last_why);
            if (last_host)
                printf(" (the shim: MPI's)");
            if (last_zc >= 0)
                printf(" [%s]", last_zc ? "zcopy" : "copy");
            printf("\n");
        }
        from = i < n ? cut[i] : 0;
        last_run = run, last_picked = picked, last_why = why, last_zc = zc, last_host = host;
    }
}

/* Which algorithm serves which size on the world team, and the table's source. */
static void info_shape(struct arcoll_context *ctx)
{
    struct arcoll_team *world = ctx->teams;
    core_tune_shape_t shape;
    char src[CORE_TUNE_FILE + 64];

    hier_shape(world->hier, world->size, &shape);
    printf("\nalgorithm by bytes per rank, from-to (to excluded), on the world team: %u nodes x %u "
           "ranks%s\n",
           shape.nodes, shape.ppn, shape.equal ? "" : " on the fullest (unequal nodes)");
    printf("  %-20s %-10s %-20s %s\n", "", "configured", "bytes per rank", "runs");
    info_algs(world, COLL_ALLTOALL, ctx->cfg.alltoall_alg);
    info_algs(world, COLL_ALLGATHER, ctx->cfg.allgather_alg);
    info_algs(world, COLL_ALLTOALLV, ctx->cfg.alltoallv_alg);
    info_algs(world, COLL_ALLGATHERV, ctx->cfg.allgatherv_alg);
    info_algs(world, COLL_REDUCE_SCATTER, ctx->cfg.reduce_scatter_alg);
    info_algs(world, COLL_ALLREDUCE, ctx->cfg.allreduce_alg);
    printf("  (allgatherv: mean block; reduce_scatter_block: bytes per block; allreduce: bytes of "
           "the vector)\n");
    printf("tuning table (ARCOLL_TUNE): %s\n", core_tune_source(&ctx->cfg.tune, src, sizeof(src)));
}

int main(int argc, char **argv)
{
    arcoll_context_t ctx;
    core_config_t cfg;
    int rc;

    if (argc == 2 && strcmp(argv[1], "--cleanup") == 0) {
        rc = smp_seg_sweep(stdout);
        printf("arcoll_info --cleanup: removed %d stale shared segment%s\n", rc,
               rc == 1 ? "" : "s");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "usage: %s [--cleanup]\n", argv[0]);
        return 2;
    }
    rc = arcoll_init(NULL, &ctx);
    if (rc != ARCOLL_OK) {
        /* Still show what a user needs to fix it. */
        printf("arcoll %s\n\n", ARCOLL_VERSION_STRING);
        verbs_info_print(stdout);
        printf("\narcoll_init failed: %s: %s\n", arcoll_strerror(rc), arcoll_last_error(NULL));
        if (core_config_init(&cfg) == ARCOLL_OK) {
            printf("\nconfiguration:\n");
            core_config_print(&cfg, stdout);
        }
        return 1;
    }
    /* Every rank's resources, for the min/max (the bootstrap is collective). */
    arcoll_resources_t res, *all = calloc((size_t)ctx->boot->size, sizeof(res));
    if (all == NULL || arcoll_context_resources(ctx, &res) != ARCOLL_OK ||
        ctx->boot->allgather(ctx->boot, &res, all, sizeof(res)) != ARCOLL_OK) {
        fprintf(stderr, "arcoll_info: resources: %s\n", arcoll_last_error(ctx));
        free(all);
        arcoll_finalize(ctx);
        return 1;
    }
    if (ctx->boot->rank == 0) {
        const verbs_opts_t *verbs = core_config_chan(&ctx->cfg, CORE_CHANNEL_VERBS);
        char desc[512] = "";
        printf("arcoll %s\n\n", ARCOLL_VERSION_STRING);
        verbs_info_print(stdout);
        printf("\nranks %d, nodes %d, ranks on this node %d, cores %d, PUs %d%s\n", ctx->boot->size,
               ctx->boot->nnodes, ctx->boot->local_size, ctx->topo.ncores, ctx->topo.npus,
               ctx->oversubscribed ? " (oversubscribed)" : "");
        if (ctx->cfg.channel == CORE_CHANNEL_VERBS)
            verbs_chan_describe(ctx->chan, desc, sizeof(desc));
        printf("channel %s%s%s, zero-copy %s\n", ctx->chan->ops->name, *desc ? ": " : "", desc,
               ctx->chan->zcopy ? "available" : "not available (copy path only)");
        printf("world team region: %llu bytes per rank (%u bounce slots of %llu bytes, %u lane%s "
               "of %llu: copy-path fragments in flight per stream)\n",
               (unsigned long long)ctx->teams->layout.total,
               ctx->teams->size * ctx->teams->layout.banks,
               (unsigned long long)ctx->teams->layout.bounce, ctx->teams->layout.lanes,
               ctx->teams->layout.lanes == 1 ? "" : "s",
               (unsigned long long)ctx->teams->layout.frag);
        printf(
            "schedule pipe entries: %u per bank of %u lane%s of %llu bytes (a schedule stream to "
            "a peer at a power-of-two distance has %u fragments in flight)\n",
            ctx->teams->layout.pipes, ctx->teams->layout.pipe_lanes,
            ctx->teams->layout.pipe_lanes == 1 ? "" : "s",
            (unsigned long long)ctx->teams->layout.pipe_frag,
            ctx->teams->layout.lanes + ctx->teams->layout.pipe_lanes);
        printf("resources: %d RC QPs (%d ready), %zu registered bytes, %zu shared bytes per "
               "process",
               res.qps, res.qps_ready, res.registered_bytes, res.shared_bytes);
        if (ctx->boot->size > 1) {
            arcoll_resources_t lo = res, hi = res;
            for (int r = 0; r < ctx->boot->size; r++) {
                lo.qps = all[r].qps < lo.qps ? all[r].qps : lo.qps;
                hi.qps = all[r].qps > hi.qps ? all[r].qps : hi.qps;
                lo.registered_bytes = all[r].registered_bytes < lo.registered_bytes
                                          ? all[r].registered_bytes
                                          : lo.registered_bytes;
                hi.registered_bytes = all[r].registered_bytes > hi.registered_bytes
                                          ? all[r].registered_bytes
                                          : hi.registered_bytes;
            }
            printf(" (rank 0; over %d ranks: RC QPs %d..%d, registered %zu..%zu)", ctx->boot->size,
                   lo.qps, hi.qps, lo.registered_bytes, hi.registered_bytes);
        }
        printf("\n");
        if (ctx->cfg.channel == CORE_CHANNEL_VERBS && verbs->connect == VERBS_CONNECT_LAZY)
            printf("  (no RC QP yet: with ARCOLL_VERBS_CONNECT=lazy a QP to a peer is connected "
                   "when an algorithm first writes to it)\n");
        info_shape(ctx);
        printf("\nconfiguration:\n");
        core_config_print(&ctx->cfg, stdout);
    }
    free(all);
    return arcoll_finalize(ctx) == ARCOLL_OK ? 0 : 1;
}
