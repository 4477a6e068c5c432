/* arcoll_info: version, RDMA devices (ports, GIDs with their types), the job
 * shape, the chosen channel/device/GID, resources per process, and the active
 * configuration. Run it like the application (mpirun/srun, or alone). */
#include <stdio.h>
#include <stdlib.h>

#include "arcoll.h"
#include "core/core.h"
#include "verbs/verbs.h"

int main(void)
{
    arcoll_context_t ctx;
    core_config_t cfg;
    int rc;

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
        printf("world team region: %llu bytes per rank (%u bounce slots of %llu bytes)\n",
               (unsigned long long)ctx->teams->layout.total, 2 * ctx->teams->size,
               (unsigned long long)ctx->teams->layout.bounce);
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
        if (ctx->cfg.channel == CORE_CHANNEL_VERBS && ctx->cfg.verbs_connect == CORE_CONNECT_LAZY)
            printf("  (no RC QP yet: with ARCOLL_VERBS_CONNECT=lazy a QP to a peer is connected "
                   "when an algorithm first writes to it)\n");
        printf("\nconfiguration:\n");
        core_config_print(&ctx->cfg, stdout);
    }
    free(all);
    return arcoll_finalize(ctx) == ARCOLL_OK ? 0 : 1;
}
