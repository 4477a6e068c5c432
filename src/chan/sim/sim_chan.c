/* The model channel of the scale simulator (docs/scale.md): not a transport
 * but a model of one, for virtual ranks that share a process. Regions are
 * plain memory; a put copies its bytes at the call into an event that the
 * driver's model (sim_net.c) applies to the target's memory once the target's
 * virtual clock passes its arrival time, in order per pair of ranks, so a
 * flag word is seen only after the data put before it. Puts complete at
 * once (nothing outstanding); zero-copy is not modelled. stats() reports
 * what the verbs channel would hold: the RC QPs of its connection policy
 * (counted by the driver) and the regions allocated here as registered. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chan/chan.h"
#include "chan/sim/sim.h"
#include "util/log.h"

#define SIM_KIND_MEM 1

typedef struct sim_chan {
    chan_t super;
    int rank;
    uint64_t *last; /* [size]: arrival time of our last put to each rank */
    size_t reg;     /* bytes of the regions allocated now (verbs registers them) */
} sim_chan_t;

/* Every virtual rank lives in this process: a key is the address itself. */
static void sim_mem_key(const chan_t *c, void *addr, size_t len, chan_mem_t *mem)
{
    memset(mem, 0, sizeof(*mem));
    mem->addr = addr;
    mem->len = len;
    mem->rkey.addr = (uint64_t)(uintptr_t)addr;
    mem->rkey.len = len;
    mem->rkey.kind = SIM_KIND_MEM;
    mem->rkey.owner = (uint32_t)c->boot->rank;
}

static int sim_mem_alloc(chan_t *c, size_t len, chan_mem_t *mem)
{
    void *p = calloc(1, len ? len : 1);

    if (p == NULL) {
        log_err("sim: out of memory for a %zu-byte region", len);
        return ARCOLL_ERR_NOMEM;
    }
    sim_mem_key(c, p, len, mem);
    ((sim_chan_t *)c)->reg += len;
    return ARCOLL_OK;
}

static void sim_mem_free(chan_t *c, chan_mem_t *mem)
{
    if (mem->addr != NULL)
        ((sim_chan_t *)c)->reg -= mem->len;
    /* Puts still queued for it (late notes) must not land in freed memory. */
    sim_purge(((sim_chan_t *)c)->rank, mem->addr, mem->len);
    free(mem->addr);
    mem->addr = NULL;
}

/* Zero-copy: a key is the address (sim_mem_key); puts into it are modelled
 * as any other. Registration costs
 * nothing in the model (verbs' cost is per call and per byte: not modelled). */
static int sim_mem_reg(chan_t *c, void *addr, size_t len, chan_mem_t *mem)
{
    sim_mem_key(c, addr, len, mem);
    return ARCOLL_OK;
}

static void sim_mem_dereg(chan_t *c, chan_mem_t *mem)
{
    /* Puts queued for this memory stay: another registration may cover it
     * (the cache's, a later call's), and nothing here tells whose a queued
     * put is. So the model does not revoke: a write after a failed call's
     * revocation lands (on verbs it fails; docs/scale.md). */
    (void)c;
    mem->addr = NULL;
}

static int sim_rmem_import(chan_t *c, int peer, const chan_rkey_t *rkey, chan_rmem_t *rm)
{
    if (peer < 0 || peer >= c->boot->size || rkey->owner != (uint32_t)peer ||
        rkey->kind != SIM_KIND_MEM) {
        log_err("sim: key of rank %u (kind %u) presented as rank %d's", rkey->owner, rkey->kind,
                peer);
        return ARCOLL_ERR_CHANNEL;
    }
    rm->rkey = *rkey;
    rm->map = (void *)(uintptr_t)rkey->addr;
    return ARCOLL_OK;
}

static void sim_rmem_release(chan_t *c, chan_rmem_t *rm)
{
    (void)c;
    rm->map = NULL;
    rm->rkey.kind = 0;
}

static int sim_chan_put(chan_t *c, int peer, const void *src, size_t len, const chan_mem_t *lmem,
                        const chan_rmem_t *dst, uint64_t off)
{
    sim_chan_t *s = (sim_chan_t *)c;

    (void)lmem;
    if (dst->map == NULL || off > dst->rkey.len || len > dst->rkey.len - off) {
        log_err("sim: put of %zu bytes at offset %llu is outside rank %d's %llu-byte region", len,
                (unsigned long long)off, peer, (unsigned long long)dst->rkey.len);
        return ARCOLL_ERR_CHANNEL;
    }
    return sim_put(s->rank, peer, (char *)dst->map + off, src, len, 0, &s->last[peer]);
}

static int sim_chan_put_u64(chan_t *c, int peer, uint64_t val, const chan_rmem_t *dst, uint64_t off)
{
    sim_chan_t *s = (sim_chan_t *)c;

    if (dst->map == NULL || off % 8 || off + 8 > dst->rkey.len) {
        log_err("sim: flag write to rank %d at offset %llu is not inside a region", peer,
                (unsigned long long)off);
        return ARCOLL_ERR_CHANNEL;
    }
    return sim_put(s->rank, peer, (char *)dst->map + off, &val, sizeof(val), 1, &s->last[peer]);
}

static int sim_chan_progress(chan_t *c)
{
    sim_progress(((sim_chan_t *)c)->rank);
    return 0;
}

static int sim_peer_check(chan_t *c, int peer)
{
    (void)c;
    (void)peer;
    return ARCOLL_OK; /* virtual ranks do not die */
}

static uint64_t sim_now_ns(chan_t *c)
{
    return sim_clock(((sim_chan_t *)c)->rank);
}

static void sim_chan_idle(chan_t *c)
{
    sim_idle(((sim_chan_t *)c)->rank);
}

static void sim_chan_cost(chan_t *c, int kind, size_t bytes)
{
    sim_cost(((sim_chan_t *)c)->rank, kind, bytes);
}

static uint64_t sim_chan_landed(chan_t *c)
{
    return sim_landed(((sim_chan_t *)c)->rank);
}

static const void *sim_chan_landed_at(chan_t *c, uint64_t seq)
{
    return sim_landed_at(((sim_chan_t *)c)->rank, seq);
}

static void sim_stats(chan_t *c, int *qps, int *ready, size_t *reg)
{
    sim_chan_t *s = (sim_chan_t *)c;

    *qps = *ready = sim_qps(s->rank); /* a modelled QP is connected at once */
    *reg = s->reg;
}

static void sim_destroy(chan_t *c)
{
    sim_chan_t *s = (sim_chan_t *)c;

    free(s->last);
    free(s);
}

static const struct chan_model_ops sim_model_ops = {
    .now_ns = sim_now_ns,
    .idle = sim_chan_idle,
    .cost = sim_chan_cost,
    .landed = sim_chan_landed,
    .landed_at = sim_chan_landed_at,
};

static const struct chan_ops sim_ops = {
    .name = "sim",
    .mem_alloc = sim_mem_alloc,
    .mem_free = sim_mem_free,
    .mem_reg = sim_mem_reg,
    .mem_dereg = sim_mem_dereg,
    .rmem_import = sim_rmem_import,
    .rmem_release = sim_rmem_release,
    .put = sim_chan_put,
    .put_u64 = sim_chan_put_u64,
    .progress = sim_chan_progress,
    .peer_check = sim_peer_check,
    .stats = sim_stats,
    .destroy = sim_destroy,
    .model = &sim_model_ops,
};

int sim_chan_create(boot_t *boot, const chan_args_t *args, chan_t **out)
{
    char connect[16];
    const char *conn;
    sim_chan_t *s;
    int rc;

    *out = NULL;
    if (sim_active_rank() != boot->rank || sim_size() != boot->size) {
        log_err("ARCOLL_CHANNEL=sim is the scale simulator's model channel: it runs only inside "
                "arcoll-sim (docs/scale.md); use smp or verbs");
        return ARCOLL_ERR_CONFIG;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        log_err("sim: out of memory");
        return ARCOLL_ERR_NOMEM;
    }
    s->last = calloc((size_t)boot->size, sizeof(*s->last));
    if (s->last == NULL) {
        log_err("sim: out of memory");
        free(s);
        return ARCOLL_ERR_NOMEM;
    }
    s->super.ops = &sim_ops;
    s->super.boot = boot;
    /* Zero-copy only where asked (ARCOLL_PATH=zcopy, ARCOLL_ZCOPY_THRESHOLD):
     * the tables of docs/scale.md are of the copy path. */
    s->super.zcopy_threshold = SIZE_MAX;
    s->super.zcopy = 1;
    s->super.solo = 1;
    s->super.models = sim_nic() ? CHAN_MODELS_NIC : CHAN_MODELS_SHM;
    s->super.bounce = sim_nic() ? CHAN_BOUNCE_NET : CHAN_BOUNCE_HOST; /* as the channel it models */
    s->rank = boot->rank;
    sim_rank_place(boot->rank, boot->node_of[boot->rank], boot->local_size);
    /* verbs' init: the allgather of one address record per rank (verbs_addr_t:
     * version, pid, host name, lid, mtu, gid, UD QPN), then eager QPs if asked. */
    rc = sim_oob_model(4 + 4 + BOOT_HOSTNAME_MAX + 2 + 1 + 1 + 16 + 4);
    if (rc != ARCOLL_OK) {
        sim_destroy(&s->super);
        return rc;
    }
    /* The eager connections of verbs' setting (chan.h: a model reads another
     * channel's settings by name). */
    conn = args->setting(args->cfg, "ARCOLL_VERBS_CONNECT", connect, sizeof(connect));
    if (conn != NULL && strcmp(conn, "eager") == 0)
        sim_connect_all(boot->rank);
    *out = &s->super;
    return ARCOLL_OK;
}
