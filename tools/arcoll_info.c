/* arcoll_info: version, RDMA devices (ports, GIDs with their types), the job
 * shape, the chosen channel/device/GID, memory per process, and the active
 * configuration. Run it like the application (mpirun/srun, or alone). */
#include <stdio.h>

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
    if (ctx->boot->rank == 0) {
        char desc[256] = "";
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
        printf("\nconfiguration:\n");
        core_config_print(&ctx->cfg, stdout);
    }
    return arcoll_finalize(ctx) == ARCOLL_OK ? 0 : 1;
}
