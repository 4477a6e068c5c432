#include "engine/zmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "engine/team.h"
#include "mem/heap.h"
#include "util/log.h"

struct arcoll_mem {
    struct arcoll_mem *next;
    regcache_entry_t *ent; /* pinned until arcoll_mem_deregister */
    char *addr;
    size_t len;
};

/* regcache/heapmr callbacks: a chan_mem_t per registration, as the handle. */
static int zmem_reg_as(chan_t *c, int odp, void *addr, size_t len, void **handle)
{
    chan_mem_t *m = malloc(sizeof(*m));
    int rc;

    if (m == NULL)
        return ARCOLL_ERR_NOMEM;
    rc = odp ? c->ops->mem_reg_odp(c, addr, len, m) : c->ops->mem_reg(c, addr, len, m);
    if (rc != ARCOLL_OK) {
        free(m);
        return rc;
    }
    *handle = m;
    return ARCOLL_OK;
}

static int zmem_reg_cb(void *arg, void *addr, size_t len, void **handle)
{
    return zmem_reg_as(arg, 0, addr, len, handle);
}

/* The heap MR's pinned prefix (tests: ARCOLL_FAULT=heapmr_fail makes it fail). */
static int zmem_reg_heap_cb(void *arg, void *addr, size_t len, void **handle)
{
#ifdef ARCOLL_FAULTS
    if (wire_fault_heapmr_fail)
        return ARCOLL_ERR_NOMEM;
#endif
    return zmem_reg_as(arg, 0, addr, len, handle);
}

static int zmem_reg_odp_cb(void *arg, void *addr, size_t len, void **handle)
{
    return zmem_reg_as(arg, 1, addr, len, handle);
}

static void zmem_dereg_cb(void *arg, void *handle)
{
    chan_t *c = arg;

    c->ops->mem_dereg(c, handle);
    free(handle);
}

int zmem_create(struct arcoll_context *ctx)
{
    regcache_ops_t ops = {zmem_reg_cb, zmem_dereg_cb, ctx->chan};

    return regcache_create(&ops, 0, ctx->cfg.regcache_max, &ctx->regcache);
}

void zmem_destroy(struct arcoll_context *ctx)
{
    while (ctx->user_mems != NULL) {
        struct arcoll_mem *m = ctx->user_mems;
        ctx->user_mems = m->next;
        regcache_put(ctx->regcache, m->ent);
        free(m);
    }
    regcache_destroy(ctx->regcache);
    ctx->regcache = NULL;
    heapmr_destroy(ctx->heapmr);
    ctx->heapmr = NULL;
}

/* A buffer in this process's heap slot, on a channel where registering costs:
 * served from the heap MR (made here at the first one). ARCOLL_OK, or
 * HEAPMR_SKIP: the other paths. */
static int zmem_heap_get(struct arcoll_context *ctx, void *addr, size_t len, zmem_ref_t *ref)
{
    chan_t *c = ctx->chan;
    char *mine;
    size_t slot_len, used;
    int odp, rc;

    if (c->heap_mr == CHAN_HEAP_MR_NONE || ctx->cfg.verbs_heap_mr == CORE_HEAP_MR_OFF ||
        !arcoll_heap_contains(addr) || heap_slot(&mine, &slot_len, &used) != ARCOLL_OK)
        return HEAPMR_SKIP;
    if (ctx->heapmr == NULL) {
        odp = c->heap_mr == CHAN_HEAP_MR_ODP && ctx->cfg.verbs_heap_mr == CORE_HEAP_MR_AUTO &&
              c->ops->mem_reg_odp != NULL;
        regcache_ops_t ops = {odp ? zmem_reg_odp_cb : zmem_reg_heap_cb, zmem_dereg_cb, c};
        rc = heapmr_create(&ops, mine, slot_len, odp ? slot_len : ctx->cfg.verbs_heap_mr_min,
                           &ctx->heapmr);
        if (rc != ARCOLL_OK)
            return HEAPMR_SKIP;
        ctx->heapmr_odp = odp;
        log_debug("%s: heap MR over %s of the %zu-byte slot at %p", c->ops->name,
                  odp ? "all (on demand)" : "a doubling prefix", slot_len, (void *)mine);
    }
    rc = heapmr_get(ctx->heapmr, addr, len, used, &ref->hmr);
    if (rc == ARCOLL_OK) {
        ref->mem = heapmr_handle(ref->hmr);
        return ARCOLL_OK;
    }
    if (rc < 0) {
        struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
        char lim[32] = "unlimited";
        if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
            snprintf(lim, sizeof(lim), "%llu bytes", (unsigned long long)rl.rlim_cur);
        log_info("%s: registering the heap MR for %zu bytes at %p failed: %s (RLIMIT_MEMLOCK "
                 "%s); heap buffers are registered like any other from now on",
                 c->ops->name, len, addr, arcoll_strerror(rc), lim);
    }
    return HEAPMR_SKIP;
}

static int zmem_user_covers(struct arcoll_context *ctx, const char *addr, size_t len)
{
    for (const struct arcoll_mem *m = ctx->user_mems; m != NULL; m = m->next)
        if (addr >= m->addr && len <= m->len && (size_t)(addr - m->addr) <= m->len - len)
            return 1;
    return 0;
}

int zmem_get(struct arcoll_context *ctx, void *addr, size_t len, zmem_ref_t *ref)
{
    chan_t *c = ctx->chan;
    int rc;

    memset(ref, 0, sizeof(*ref));
    if (zmem_heap_get(ctx, addr, len, ref) == ARCOLL_OK)
        return ARCOLL_OK;
    /* The cache answers for memory the user registered, and for everything
     * when ARCOLL_REGCACHE=on (the user then reports frees). */
    if (ctx->cfg.regcache || zmem_user_covers(ctx, addr, len)) {
        rc = regcache_get(ctx->regcache, addr, len, &ref->ent);
        if (rc == ARCOLL_OK)
            ref->mem = regcache_entry_handle(ref->ent);
        return rc;
    }
    rc = c->ops->mem_reg(c, addr, len, &ref->own);
    if (rc == ARCOLL_OK) {
        ref->mem = &ref->own;
        ctx->call_regs++;
    }
    return rc;
}

void zmem_put(struct arcoll_context *ctx, zmem_ref_t *ref)
{
    if (ref->hmr != NULL)
        heapmr_put(ctx->heapmr, ref->hmr);
    else if (ref->ent != NULL)
        regcache_put(ctx->regcache, ref->ent);
    else if (ref->mem != NULL)
        ctx->chan->ops->mem_dereg(ctx->chan, &ref->own);
    memset(ref, 0, sizeof(*ref));
}

int zmem_pin(struct arcoll_context *ctx, void *addr, size_t len, struct arcoll_mem **out)
{
    struct arcoll_mem *m = calloc(1, sizeof(*m));
    int rc;

    if (m == NULL) {
        log_err("registering %zu bytes: out of memory", len);
        return ARCOLL_ERR_NOMEM;
    }
    rc = regcache_get(ctx->regcache, addr, len, &m->ent);
    if (rc != ARCOLL_OK) {
        log_err("registering %zu bytes at %p failed: %s", len, addr, arcoll_strerror(rc));
        free(m);
        return rc;
    }
    m->addr = addr;
    m->len = len;
    m->next = ctx->user_mems;
    ctx->user_mems = m;
    *out = m;
    return ARCOLL_OK;
}

void zmem_unpin(struct arcoll_context *ctx, struct arcoll_mem *mem)
{
    for (struct arcoll_mem **pp = &ctx->user_mems; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == mem) {
            *pp = mem->next;
            /* The memory may be freed next: no later call may find it cached. */
            regcache_invalidate(ctx->regcache, mem->addr, mem->len);
            regcache_put(ctx->regcache, mem->ent);
            free(mem);
            return;
        }
    }
}

void zmem_resources(struct arcoll_context *ctx, arcoll_resources_t *out)
{
    regcache_stats_t rs;
    heapmr_stats_t hs;

    regcache_stats(ctx->regcache, &rs);
    heapmr_stats(ctx->heapmr, &hs);
    out->user_regs = ctx->call_regs + rs.misses;
    out->user_reg_hits = rs.hits;
    out->heap_mr_regs = hs.regs;
    out->heap_mr_hits = hs.hits;
    out->heap_mr_bytes = hs.top;
    out->heap_mr_odp = hs.top != 0 && ctx->heapmr_odp;
}

int zmem_unpin_user(struct arcoll_context *ctx, struct arcoll_mem *mem)
{
    for (struct arcoll_mem *m = ctx->user_mems; m != NULL; m = m->next) {
        if (m == mem) {
            zmem_unpin(ctx, mem);
            return 1;
        }
    }
    return 0;
}

void zmem_invalidate(struct arcoll_context *ctx, void *addr, size_t len)
{
    if (len > 0)
        regcache_invalidate(ctx->regcache, addr, len);
}

void zmem_revoke(struct arcoll_context *ctx, zmem_ref_t *ref)
{
    if (ref->hmr != NULL) {
        heapmr_revoke(ctx->heapmr, ref->hmr);
        /* The key dies now; the handle stays for the holders' puts, and its
         * release later deregisters nothing more (mem_dereg of a deregistered
         * handle does nothing). */
        ctx->chan->ops->mem_dereg(ctx->chan, ref->mem);
        log_info("%s: a failed call revoked the heap MR; the next call registers a new one",
                 ctx->chan->ops->name);
    } else if (ref->ent != NULL) {
        zmem_invalidate(ctx, ref->mem->addr, ref->mem->len);
    }
}
