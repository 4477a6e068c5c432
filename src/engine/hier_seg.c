/* A team's node segment (hier_seg.h): its layout, its mapping through the
 * smp segment code, its registration for phase 2. */
#include "engine/hier_seg.h"

#include <stdlib.h>

#include "chan/smp/smp_opts.h"
#include "engine/team.h"
#include "util/log.h"

/* An area larger than this is not worth it: the node segment holds three. */
#define HIER_AREA_MAX ((uint64_t)16 << 20)

size_t hier_seg_max_bytes(uint32_t nnodes, uint32_t lmax, size_t shm_max)
{
    uint64_t cap = HIER_AREA_MAX / ((uint64_t)nnodes * lmax * lmax);

    return shm_max < cap ? shm_max : (size_t)cap;
}

static void hier_seg_layout(hier_layout_t *l, uint32_t nnodes, uint32_t lmax, size_t max_bytes)
{
    l->area = (uint64_t)nnodes * lmax * lmax * max_bytes;
    l->off_arrive = WIRE_LINE;
    l->off_done = l->off_arrive + (uint64_t)lmax * WIRE_LINE;
    l->off_all = l->off_done + (uint64_t)nnodes * WIRE_LINE;
    l->off_send = l->off_all + WIRE_LINE;
    l->off_recv = l->off_send + 2 * l->area;
    /* Whole lines: max_bytes may be odd, the words below are atomics. */
    l->off_addr = (l->off_recv + l->area + WIRE_LINE - 1) / WIRE_LINE * WIRE_LINE;
    l->total = l->off_addr + (uint64_t)lmax * WIRE_LINE;
}

int hier_seg_create(struct arcoll_context *ctx, uint32_t nnodes, uint32_t lmax, size_t max_bytes,
                    int master, hier_seg_t **out)
{
    hier_seg_t *g = calloc(1, sizeof(*g));
    int rc;

    *out = NULL;
    if (g == NULL) {
        log_err("arcoll_team_create: out of memory for a node segment");
        return ARCOLL_ERR_NOMEM;
    }
    g->max_bytes = max_bytes;
    hier_seg_layout(&g->lay, nnodes, lmax, max_bytes);
    if (master) {
        /* The smp channel's ARCOLL_SMP_SEG, resolved at init, holds for every
         * shared segment of the context, on any channel. */
        const smp_opts_t *so = core_config_chan(&ctx->cfg, CORE_CHANNEL_SMP);
        rc = smp_seg_create(&g->seg, g->lay.total, so->seg == CORE_SEG_NAMED);
        if (rc != ARCOLL_OK)
            goto err_seg;
        *(uint64_t *)g->seg.addr = WIRE_MAGIC;
        /* Phase 2 reads and writes the areas: register them once, not per call. */
        if (nnodes > 1 && ctx->chan->zcopy &&
            zmem_pin(ctx, g->seg.addr, g->seg.len, &g->pin) != ARCOLL_OK)
            log_debug("node segment not registered; phase 2 registers per call");
    }
    *out = g;
    return ARCOLL_OK;

err_seg:
    free(g);
    return rc;
}

int hier_seg_attach(hier_seg_t *g, long owner, uint64_t key)
{
    return smp_seg_attach(&g->seg, owner, key, g->lay.total);
}

void hier_seg_seal(hier_seg_t *g)
{
    if (g != NULL)
        smp_seg_seal(&g->seg);
}

void hier_seg_free(struct arcoll_context *ctx, hier_seg_t *g)
{
    if (g == NULL)
        return;
    if (g->pin != NULL)
        zmem_unpin(ctx, g->pin);
    smp_seg_free(&g->seg);
    free(g);
}
