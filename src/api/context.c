/* Contexts: init and finalize (the setup ladder), queries, settings and
 * registrations. Teams are team.c's, collective calls calls.c's. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/profile.h"
#include "chan/smp/smp_opts.h"
#include "chan/smp/smp_seg.h"
#include "mem/heap.h"
#include "util/log.h"

static void core_ctx_unlink(struct arcoll_context *ctx)
{
    for (struct arcoll_context **pp = &core_live; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == ctx) {
            *pp = ctx->next;
            return;
        }
    }
}

int arcoll_init(const arcoll_oob_t *oob, arcoll_context_t *out)
{
    return arcoll_init_config(oob, NULL, out);
}

/* The simulator's channel is in its own library (libarcoll_sim.a), linked by
 * arcoll-sim and the tests that run it, not in libarcoll: a weak reference,
 * NULL elsewhere. */
#pragma weak sim_chan_create

/* A setting by name, for a model channel (chan_args.setting). */
static const char *core_chan_setting(const void *cfg, const char *name, char *buf, size_t len)
{
    return core_config_get(cfg, name, buf, len);
}

/* The context's channel, by the settings' ARCOLL_CHANNEL, from the one list of
 * chan/chan.h; the channel is given only its own settings (chan_args_t). */
static int core_chan_create(struct arcoll_context *ctx)
{
    typedef int (*chan_create_fn)(boot_t *, const chan_args_t *, chan_t **);
#define CORE_CHAN_CREATE(id, name) [CORE_CHANNEL_##id] = name##_chan_create,
    static const chan_create_fn creates[CORE_CHANNEL_COUNT] = {CHAN_LIST(CORE_CHAN_CREATE)};
#undef CORE_CHAN_CREATE
    const core_config_t *cfg = &ctx->cfg;
    chan_args_t a = {.timeout_ms = cfg->timeout_ms,
                     .opts = cfg->chan[cfg->channel].bytes,
                     .setting = core_chan_setting,
                     .cfg = cfg};

    if (creates[cfg->channel] == NULL) { /* the simulator's library is not linked */
        log_err("ARCOLL_CHANNEL=sim runs only inside arcoll-sim (the simulator's library "
                "libarcoll_sim.a is not linked into this program)");
        return ARCOLL_ERR_CONFIG;
    }
    return creates[cfg->channel](ctx->boot, &a, &ctx->chan);
}

/* Digests differ: one more allgather, of every agreed setting's hash, so
 * that every rank names the same setting (docs/protocol.md §9). */
static int core_init_diff(struct arcoll_context *ctx)
{
    boot_t *b = ctx->boot;
    uint64_t mine[CORE_CONFIG_NAGREED], *all;
    const char *names[CORE_CONFIG_NAGREED];
    size_t n = core_config_hashes(&ctx->cfg, mine, names, CORE_CONFIG_NAGREED);
    int rc, shown = 0;

    all = malloc(sizeof(mine) * (size_t)b->size);
    if (all == NULL) {
        log_err("arcoll_init: out of memory");
        return ARCOLL_ERR_NOMEM; /* the others fail in the bootstrap */
    }
    rc = b->allgather(b, mine, all, sizeof(mine));
    if (rc != ARCOLL_OK)
        goto out;
    for (int r = 1; r < b->size; r++) {
        for (size_t i = 0; i < n; i++) {
            if (all[(size_t)r * CORE_CONFIG_NAGREED + i] == all[i])
                continue;
            if (shown++ < 4)
                log_err("arcoll_init: rank %d has %s different from rank 0 (protocol settings "
                        "must agree: docs/configuration.md)",
                        r, names[i]);
            break;
        }
    }
    if (shown == 0) /* equal settings, different digests: a bug, not a setting */
        log_err("arcoll_init: the settings digests differ but every setting agrees");
    else if (shown > 4)
        log_err("arcoll_init: %d ranks in all have settings different from rank 0", shown);
    rc = ARCOLL_ERR_CONFIG;
out:
    free(all);
    return rc;
}

/* Every rank takes part, a rank whose settings did not parse (cfg_rc) too,
 * so that all fail alike instead of waiting for it. profile: some rank
 * profiles. Settings that change the wire protocol must agree, or peers
 * would wait for signals that never come. */
static int core_init_agree(struct arcoll_context *ctx, int cfg_rc, int *profile)
{
    boot_t *b = ctx->boot;
    /* per rank: settings digest; bit 0 ARCOLL_PROFILE set, bit 1 its host
     * oversubscribed, bit 2 a setting did not parse */
    uint64_t mine[2], *digests;
    int rc, bad = -1, nbad = 0, differ = 0;

    digests = malloc(sizeof(mine) * (size_t)b->size);
    if (digests == NULL) {
        log_err("arcoll_init: out of memory");
        return ARCOLL_ERR_NOMEM;
    }
    mine[0] = core_config_digest(&ctx->cfg);
    mine[1] = (uint64_t)(ctx->cfg.profile[0] != '\0') | (uint64_t)ctx->oversubscribed << 1 |
              (uint64_t)(cfg_rc != ARCOLL_OK) << 2;
    rc = b->allgather(b, mine, digests, sizeof(mine));
    if (rc != ARCOLL_OK)
        goto out;
    for (int i = 0; i < b->size; i++) {
        *profile |= (digests[2 * i + 1] & 1) != 0;
        ctx->job_oversubscribed |= (digests[2 * i + 1] & 2) != 0;
        if (digests[2 * i + 1] & 4) {
            bad = bad < 0 ? i : bad;
            nbad++;
        }
        differ |= digests[2 * i] != digests[0];
    }
    if (nbad > 0) {
        /* The bad rank itself named the setting when it parsed it: that stays
         * its last error. */
        if (cfg_rc == ARCOLL_OK)
            log_err("arcoll_init: rank %d%s has an invalid ARCOLL_* setting (its log names it)",
                    bad, nbad > 1 ? " and others" : "");
        rc = cfg_rc != ARCOLL_OK ? cfg_rc : ARCOLL_ERR_CONFIG;
    } else if (differ) {
        rc = core_init_diff(ctx); /* every rank sees the same digests: all take this branch */
    }
out:
    free(digests);
    return rc;
}

int arcoll_init_config(const arcoll_oob_t *oob, const char *const *config, arcoll_context_t *out)
{
    struct arcoll_context *ctx;
    int *world = NULL, profile = 0;
    int rc, cfg_rc, named;
    smp_opts_t *smp;

    if (out == NULL) {
        log_err("arcoll_init: context pointer is NULL");
        return ARCOLL_ERR_INVALID;
    }
    *out = NULL;
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL) {
        log_err("arcoll_init: out of memory");
        return ARCOLL_ERR_NOMEM;
    }
    ctx->magic = CORE_CTX_MAGIC;
    cfg_rc = core_config_init(&ctx->cfg);
    /* The caller's settings win over the environment, for this context only. */
    for (size_t i = 0; config != NULL && config[i] != NULL; i += 2) {
        if (config[i + 1] == NULL) {
            log_err("arcoll_init_config: %s has no value", config[i]);
            cfg_rc = ARCOLL_ERR_INVALID;
            break;
        }
        rc = core_config_set(&ctx->cfg, config[i], config[i + 1]);
        if (cfg_rc == ARCOLL_OK)
            cfg_rc = rc;
    }
    core_log_level = ctx->cfg.log_level;
#ifdef ARCOLL_FAULTS
    core_faults_set(getenv("ARCOLL_FAULT"));
#endif

    /* A rank with a bad setting bootstraps all the same: core_init_agree. */
    rc = oob != NULL ? boot_oob_create(oob, &ctx->boot)
                     : boot_pmix_create(ctx->cfg.timeout_ms, &ctx->boot);
    if (rc != ARCOLL_OK)
        goto err_ctx;
    core_log_rank = ctx->boot->rank;
    boot_topo_query(&ctx->topo);
    ctx->oversubscribed = ctx->boot->host_local_size > ctx->topo.npus;
    rc = core_init_agree(ctx, cfg_rc, &profile);
    if (rc != ARCOLL_OK)
        goto err_boot;

    /* One way of sharing memory for the whole context, so that creators and
     * attachers agree (chan/smp/smp_seg.h); falling back to names, first clear the
     * names of crashed processes (docs/reliability.md). */
    smp = core_config_chan(&ctx->cfg, CORE_CHANNEL_SMP);
    rc = smp_seg_agree(ctx->boot, smp->seg, &named);
    if (rc != ARCOLL_OK)
        goto err_boot;
    smp->seg = named ? CORE_SEG_NAMED : CORE_SEG_MEMFD; /* for every shared segment */
    if (named && ctx->boot->local_rank == 0)
        smp_seg_sweep(NULL);
    /* The node heap's slots, if any rank uses it (docs/heap.md). */
    rc = heap_node_attach(ctx->boot);
    if (rc != ARCOLL_OK)
        goto err_boot;

    rc = core_chan_create(ctx);
    if (rc != ARCOLL_OK)
        goto err_heap;

    rc = zmem_create(ctx);
    if (rc != ARCOLL_OK)
        goto err_chan;
    world = malloc(sizeof(int) * (size_t)ctx->boot->size);
    if (world == NULL) {
        log_err("arcoll_init: out of memory");
        rc = ARCOLL_ERR_NOMEM;
        goto err_zmem;
    }
    for (int i = 0; i < ctx->boot->size; i++)
        world[i] = i;
    rc = core_team_create(ctx, world, ctx->boot->size, &ctx->teams);
    if (rc != ARCOLL_OK)
        goto err_world;
    /* ARCOLL_PROFILE need not agree: the clock exchange involves every rank
     * as soon as one profiles. */
    if (profile) {
        rc = prof_create(ctx, &ctx->prof);
        if (rc != ARCOLL_OK)
            goto err_teams;
    }
    free(world);
    if (ctx->oversubscribed && ctx->boot->local_rank == 0)
        log_info("%d ranks on %d processing units: polling yields the core early",
                 ctx->boot->host_local_size, ctx->topo.npus);
    ctx->next = core_live;
    core_live = ctx;
    *out = ctx;
    return ARCOLL_OK;

err_teams:
    core_team_free(ctx->teams);
err_world:
    free(world);
err_zmem:
    zmem_destroy(ctx);
err_chan:
    ctx->chan->ops->destroy(ctx->chan);
err_heap:
    heap_node_detach();
err_boot:
    boot_destroy(ctx->boot);
err_ctx:
    free(ctx);
    return rc;
}

int arcoll_finalize(arcoll_context_t ctx)
{
    int rc = core_ctx_check(ctx, "arcoll_finalize");
    int lost = 0, was;

    if (rc != ARCOLL_OK)
        return rc;
    for (struct arcoll_team *t = ctx->teams; t != NULL; t = t->next)
        lost |= t->failed == ARCOLL_ERR_PEER || t->failed == ARCOLL_ERR_TIMEOUT;
    was = ctx->teams->failed;
    if (ctx->prof != NULL) {
        prof_t *p = ctx->prof;
        ctx->prof = NULL; /* its own collectives are not part of the profile */
        prof_finalize(ctx, p, lost);
    }
    /* Peers may still write into our regions until everyone is done; a lost
     * peer would make that barrier hang, so then we release locally. */
    if (!lost)
        rc = core_ctx_barrier(ctx);
    /* The profile's exchanges over the world team found a peer lost or late:
     * finalize reports it, as its own barrier would have. */
    if (rc == ARCOLL_OK && !was && ctx->teams->failed)
        rc = ctx->teams->failed;
    core_ctx_unlink(ctx);
    core_ureqs_drop(ctx);
    while (ctx->teams != NULL) {
        struct arcoll_team *t = ctx->teams;
        ctx->teams = t->next;
        core_team_free(t);
    }
    zmem_destroy(ctx);
    ctx->chan->ops->destroy(ctx->chan);
    heap_node_detach();
    boot_destroy(ctx->boot);
    ctx->magic = 0;
    free(ctx);
    return rc;
}

int arcoll_context_rank(arcoll_context_t ctx)
{
    return core_ctx_check(ctx, "arcoll_context_rank") == ARCOLL_OK ? ctx->boot->rank : -1;
}

int arcoll_context_size(arcoll_context_t ctx)
{
    return core_ctx_check(ctx, "arcoll_context_size") == ARCOLL_OK ? ctx->boot->size : -1;
}

int arcoll_context_nnodes(arcoll_context_t ctx)
{
    return core_ctx_check(ctx, "arcoll_context_nnodes") == ARCOLL_OK ? ctx->boot->nnodes : -1;
}

int arcoll_context_memory(arcoll_context_t ctx, size_t *bytes)
{
    int rc = core_ctx_check(ctx, "arcoll_context_memory");
    size_t sum;

    if (rc != ARCOLL_OK)
        return rc;
    if (bytes == NULL) {
        log_err("arcoll_context_memory: bytes is NULL");
        return ARCOLL_ERR_INVALID;
    }
    sum = ctx->chan->fixed_bytes;
    for (const struct arcoll_team *t = ctx->teams; t != NULL; t = t->next) {
        sum += t->region.len;
        if (t->hier != NULL && t->hier->xteam != NULL)
            sum += t->hier->xteam->region.len;
        /* A node segment is shared: count this rank's part of it. */
        if (t->hier != NULL)
            sum += t->hseg->seg.len / t->hier->lsize;
    }
    *bytes = sum;
    return ARCOLL_OK;
}

int arcoll_context_resources(arcoll_context_t ctx, arcoll_resources_t *out)
{
    chan_t *c;
    int rc = core_ctx_check(ctx, "arcoll_context_resources");

    if (rc != ARCOLL_OK)
        return rc;
    if (out == NULL) {
        log_err("arcoll_context_resources: out is NULL");
        return ARCOLL_ERR_INVALID;
    }
    memset(out, 0, sizeof(*out));
    c = ctx->chan;
    zmem_resources(ctx, out);
    if (c->ops->stats == NULL) {
        /* A channel without a NIC: all of it is shared memory. */
        return arcoll_context_memory(ctx, &out->shared_bytes);
    }
    c->ops->stats(c, &out->qps, &out->qps_ready, &out->registered_bytes);
    /* Node segments are shared memory on every channel: this rank's part. */
    for (const struct arcoll_team *t = ctx->teams; t != NULL; t = t->next)
        if (t->hier != NULL)
            out->shared_bytes += t->hseg->seg.len / t->hier->lsize;
    return ARCOLL_OK;
}

int arcoll_context_counters(arcoll_context_t ctx, arcoll_counters_t *out, size_t size)
{
    int rc = core_ctx_check(ctx, "arcoll_context_counters");

    if (rc != ARCOLL_OK)
        return rc;
    if (out == NULL || size == 0) {
        log_err("arcoll_context_counters: out is NULL or size is 0");
        return ARCOLL_ERR_INVALID;
    }
    memcpy(out, &ctx->counters, size < sizeof(ctx->counters) ? size : sizeof(ctx->counters));
    return ARCOLL_OK;
}

int arcoll_config_set(arcoll_context_t ctx, const char *name, const char *value)
{
    int rc = core_ctx_check(ctx, "arcoll_config_set");

    if (rc != ARCOLL_OK)
        return rc;
    if (name != NULL &&
        (strcmp(name, "ARCOLL_CHANNEL") == 0 || strcmp(name, "ARCOLL_PROFILE") == 0 ||
         strcmp(name, "ARCOLL_SMP_SEG") == 0)) {
        log_err("%s can only be chosen at arcoll_init", name);
        return ARCOLL_ERR_CONFIG;
    }
    return core_config_set(&ctx->cfg, name, value);
}

const char *arcoll_config_get(arcoll_context_t ctx, const char *name)
{
    if (core_ctx_check(ctx, "arcoll_config_get") != ARCOLL_OK)
        return NULL;
    return core_config_get(&ctx->cfg, name, ctx->cfgbuf, sizeof(ctx->cfgbuf));
}

/* Registrations, public API (docs in arcoll.h; the memory layer, engine/zmem.c, does it). */

int arcoll_mem_register(arcoll_context_t ctx, void *addr, size_t len, arcoll_mem_t *out)
{
    int rc = core_ctx_check(ctx, "arcoll_mem_register");

    if (rc != ARCOLL_OK)
        return rc;
    if (out == NULL || (addr == NULL && len > 0) || len == 0) {
        log_err("arcoll_mem_register: %s", out == NULL ? "handle pointer is NULL"
                                           : len == 0  ? "length is 0"
                                                       : "address is NULL");
        return ARCOLL_ERR_INVALID;
    }
    return zmem_pin(ctx, addr, len, out);
}

int arcoll_mem_deregister(arcoll_context_t ctx, arcoll_mem_t mem)
{
    int rc = core_ctx_check(ctx, "arcoll_mem_deregister");

    if (rc != ARCOLL_OK)
        return rc;
    if (zmem_unpin_user(ctx, mem))
        return ARCOLL_OK;
    log_err("arcoll_mem_deregister: %p is not a registration of this context", (void *)mem);
    return ARCOLL_ERR_INVALID;
}

int arcoll_mem_invalidate(arcoll_context_t ctx, void *addr, size_t len)
{
    int rc = core_ctx_check(ctx, "arcoll_mem_invalidate");

    if (rc != ARCOLL_OK)
        return rc;
    zmem_invalidate(ctx, addr, len);
    return ARCOLL_OK;
}

const char *arcoll_last_error(arcoll_context_t ctx)
{
    (void)ctx;
    return core_error_last();
}
