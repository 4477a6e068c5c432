/* arcoll_info: version, job shape, channel and the active configuration. */
#include <stdio.h>

#include "arcoll.h"
#include "core/core.h"

int main(void)
{
    arcoll_context_t ctx;
    int rc = arcoll_init(NULL, &ctx);

    if (rc != ARCOLL_OK) {
        fprintf(stderr, "arcoll_info: arcoll_init: %s: %s\n", arcoll_strerror(rc),
                arcoll_last_error(NULL));
        return 1;
    }
    if (ctx->boot->rank == 0) {
        printf("arcoll %s\n", ARCOLL_VERSION_STRING);
        printf("ranks %d, nodes %d, ranks on this node %d, cores %d, PUs %d%s\n", ctx->boot->size,
               ctx->boot->nnodes, ctx->boot->local_size, ctx->topo.ncores, ctx->topo.npus,
               ctx->oversubscribed ? " (oversubscribed)" : "");
        printf("channel %s, zero-copy %s\n", ctx->chan->ops->name,
               ctx->chan->zcopy ? "available" : "not available (copy path only)");
        printf("world team region: %llu bytes per rank (%u slots of %llu bytes payload)\n",
               (unsigned long long)ctx->teams->layout.total, 2 * ctx->teams->size,
               (unsigned long long)ctx->teams->layout.bounce);
        printf("\nconfiguration:\n");
        core_config_print(&ctx->cfg, stdout);
    }
    return arcoll_finalize(ctx) == ARCOLL_OK ? 0 : 1;
}
