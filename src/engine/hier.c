/* Node grouping of a team (hier.h); its node segment is hier_seg.c's. */
#include "engine/hier.h"

#include <stdlib.h>
#include <string.h>

#include "engine/team.h"
#include "util/log.h"

static void hier_release(hier_t *h)
{
    free(h->lsocket);
    free(h->local_pid);
    free(h->node_first);
    free(h->node_rank);
    free(h->node_size);
    free(h);
}

/* Group the team's ranks by node: fills all but the pids, sockets and heap. */
static int hier_group(const struct arcoll_team *t, hier_t *h)
{
    const boot_t *b = t->ctx->boot;
    uint32_t *team_node = NULL; /* context node -> team node */
    int rc = ARCOLL_ERR_NOMEM;

    team_node = malloc(sizeof(*team_node) * (size_t)b->nnodes);
    h->node_size = calloc(t->size, sizeof(*h->node_size));
    h->node_first = malloc(sizeof(*h->node_first) * t->size);
    if (team_node == NULL || h->node_size == NULL || h->node_first == NULL)
        goto out;
    for (int i = 0; i < b->nnodes; i++)
        team_node[i] = HIER_NONE;
    for (uint32_t q = 0; q < t->size; q++) {
        int cn = b->node_of[t->ranks[q]];
        uint32_t e = team_node[cn];
        if (e == HIER_NONE) {
            e = team_node[cn] = h->nnodes++;
            h->node_first[e] = q;
        } else if (h->node_first[e] != HIER_NONE && h->node_first[e] + h->node_size[e] != q) {
            h->node_first[e] = HIER_NONE; /* not consecutive in the team */
        }
        if (q == t->rank) {
            h->node = e;
            h->lrank = h->node_size[e];
        }
        if (++h->node_size[e] > h->lmax)
            h->lmax = h->node_size[e];
    }
    h->lsize = h->node_size[h->node];
    h->node_rank = malloc(sizeof(*h->node_rank) * (size_t)h->nnodes * h->lmax);
    h->local_pid = calloc(h->lsize, sizeof(*h->local_pid));
    h->lsocket = calloc(h->lsize, sizeof(*h->lsocket));
    if (h->node_rank == NULL || h->local_pid == NULL || h->lsocket == NULL)
        goto out;
    for (size_t i = 0; i < (size_t)h->nnodes * h->lmax; i++)
        h->node_rank[i] = HIER_NONE;
    memset(h->node_size, 0, sizeof(*h->node_size) * t->size);
    for (uint32_t q = 0; q < t->size; q++) {
        uint32_t e = team_node[b->node_of[t->ranks[q]]];
        h->node_rank[(size_t)e * h->lmax + h->node_size[e]++] = q;
    }
    h->equal = h->node_major = 1;
    for (uint32_t e = 0; e < h->nnodes; e++) {
        h->equal &= h->node_size[e] == h->lmax;
        h->node_major &= h->node_first[e] == e * h->lmax;
    }
    h->node_major &= h->equal;
    rc = ARCOLL_OK;
out:
    if (rc != ARCOLL_OK)
        log_err("arcoll_team_create: out of memory grouping %u ranks by node", t->size);
    free(team_node);
    return rc;
}

int hier_plan(struct arcoll_team *t)
{
    struct arcoll_context *ctx = t->ctx;
    hier_t *h;
    size_t max_bytes;
    int rc;

    t->hier = NULL;
    t->hseg = NULL;
    h = calloc(1, sizeof(*h));
    if (h == NULL) {
        log_err("arcoll_team_create: out of memory");
        return ARCOLL_ERR_NOMEM;
    }
    rc = hier_group(t, h);
    if (rc != ARCOLL_OK)
        goto err_hier;
    if (h->lmax < 2) {
        hier_release(h); /* one rank per node: nothing to share */
        return ARCOLL_OK;
    }
    max_bytes = hier_seg_max_bytes(h->nnodes, h->lmax, ctx->cfg.shm_max);
    if (max_bytes == 0) {
        hier_release(h);
        return ARCOLL_OK;
    }
    rc = hier_seg_create(ctx, h->nnodes, h->lmax, max_bytes, hier_is_master(h), &t->hseg);
    if (rc != ARCOLL_OK)
        goto err_hier;
    log_debug("team of %u ranks: %u nodes, up to %u ranks per node, node segment %llu "
              "bytes (up to %zu bytes per rank)",
              t->size, h->nnodes, h->lmax, (unsigned long long)t->hseg->lay.total, max_bytes);
    t->hier = h;
    return ARCOLL_OK;

err_hier:
    hier_release(h);
    return rc;
}

/* Number the sockets of the node's ranks by first local rank (the same on
 * every rank: the same records in the same order, an agreed variable). */
static void hier_sockets(hier_t *h, const int32_t *socket, long size)
{
    const uint32_t *lr = h->node_rank + (size_t)h->node * h->lmax;

    h->nsockets = 1;
    memset(h->lsocket, 0, sizeof(*h->lsocket) * h->lsize);
    if (size > 0) {
        for (uint32_t s = 0; s < h->lsize; s++)
            h->lsocket[s] = s / (uint32_t)size;
        h->nsockets = (h->lsize + (uint32_t)size - 1) / (uint32_t)size;
        return;
    }
    for (uint32_t s = 0; s < h->lsize; s++)
        if (socket[lr[s]] < 0)
            return; /* unknown: one socket, plain SH-CO */
    h->nsockets = 0;
    for (uint32_t s = 0; s < h->lsize; s++) {
        uint32_t f = 0;
        while (f < s && socket[lr[f]] != socket[lr[s]])
            f++;
        h->lsocket[s] = f < s ? h->lsocket[f] : h->nsockets++;
    }
}

int hier_attach(struct arcoll_team *t, const long *pid, const uint64_t *key, const int32_t *socket,
                int heap)
{
    hier_t *h = t->hier;
    uint32_t master;

    if (h == NULL)
        return ARCOLL_OK;
    for (uint32_t s = 0; s < h->lsize; s++)
        h->local_pid[s] = pid[h->node_rank[(size_t)h->node * h->lmax + s]];
    hier_sockets(h, socket, t->ctx->cfg.socket_size);
    h->heap = heap;
    if (hier_is_master(h))
        return ARCOLL_OK;
    master = h->node_rank[(size_t)h->node * h->lmax];
    return hier_seg_attach(t->hseg, pid[master], key[master]);
}

void hier_xteam_ranks(const struct arcoll_team *t, int *list, int *n)
{
    const hier_t *h = t->hier;

    *n = 0;
    if (h == NULL || h->nnodes < 2 || !(hier_is_master(h) || h->equal))
        return;
    for (uint32_t e = 0; e < h->nnodes; e++)
        list[(*n)++] = t->ranks[h->node_rank[(size_t)e * h->lmax + h->lrank]];
}

int hier_local_gone(const hier_t *h)
{
    for (uint32_t s = 0; s < h->lsize; s++)
        if (s != h->lrank && boot_pid_gone(h->local_pid[s]))
            return (int)s;
    return -1;
}

int hier_rank_gone(const hier_t *h, uint32_t q)
{
    for (uint32_t s = 0; s < h->lsize; s++)
        if (h->node_rank[(size_t)h->node * h->lmax + s] == q)
            return s != h->lrank && boot_pid_gone(h->local_pid[s]);
    return 0;
}

void hier_free(struct arcoll_team *t)
{
    /* h->xteam is a team: core_team_free freed it first. */
    hier_seg_free(t->ctx, t->hseg);
    t->hseg = NULL;
    if (t->hier != NULL)
        hier_release(t->hier);
    t->hier = NULL;
}

void hier_shape(const hier_t *h, uint32_t team_size, core_tune_shape_t *out)
{
    out->nodes = team_size;
    out->ppn = 1;
    out->equal = 1;
    out->over = 0;
    out->chan = 0;
    out->heap = 0;
    if (h == NULL)
        return;
    out->nodes = h->nnodes;
    out->ppn = h->lmax;
    out->heap = h->heap && h->nnodes == 1;
    for (uint32_t e = 0; e < h->nnodes; e++)
        if (h->node_size[e] != h->lmax)
            out->equal = 0;
}

void hier_team_shape(const struct arcoll_team *t, core_tune_shape_t *out)
{
    const chan_t *c = t->ctx->chan;

    hier_shape(t->hier, t->size, out);
    out->over = t->ctx->job_oversubscribed;
    out->chan = t->ctx->cfg.channel;
    /* A model channel's virtual ranks each have a core, and the rules are those
     * of the transport it models. */
    if (c->models != CHAN_MODELS_NONE) {
        out->over = 0;
        out->chan = c->models == CHAN_MODELS_NIC ? CORE_CHANNEL_VERBS : CORE_CHANNEL_SMP;
    }
}
