/* Shared-memory channel with RDMA WRITE semantics, for ranks on one node.
 *
 * Remotely writable memory (bounce/control regions) is a POSIX shared
 * memory segment per allocation, mapped by every peer; a put is a memcpy
 * into the mapping and put_u64 a release store. A peer's private buffer
 * (zero-copy) is written with process_vm_writev (CMA), which returns only
 * when the bytes are in the peer's pages, so a put completes at once and
 * progress never has anything outstanding. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "chan/chan.h"
#include "chan/smp/smp_opts.h"
#include "chan/smp/smp_seg.h"
#include "util/log.h"

enum { SMP_KIND_SEG = 1, SMP_KIND_CMA = 2 };

typedef struct smp_chan {
    chan_t super;
    pid_t *pids; /* [boot->size] */
    int named;   /* regions are named segments (ARCOLL_SMP_SEG, agreed at init) */
} smp_chan_t;

static int smp_mem_alloc(chan_t *c, size_t len, chan_mem_t *mem)
{
    smp_seg_t *seg = malloc(sizeof(*seg));
    int rc;

    if (seg == NULL) {
        log_err("smp: out of memory");
        return ARCOLL_ERR_NOMEM;
    }
    rc = smp_seg_create(seg, len, ((smp_chan_t *)c)->named);
    if (rc != ARCOLL_OK) {
        free(seg);
        return rc;
    }
    memset(mem, 0, sizeof(*mem));
    mem->addr = seg->addr;
    mem->len = len;
    mem->rkey.kind = SMP_KIND_SEG;
    mem->rkey.key = seg->key;
    mem->rkey.len = len;
    mem->rkey.owner = (uint32_t)c->boot->rank;
    mem->priv = seg;
    return ARCOLL_OK;
}

static void smp_mem_seal(chan_t *c, chan_mem_t *mem)
{
    (void)c;
    smp_seg_seal(mem->priv);
}

static void smp_mem_free(chan_t *c, chan_mem_t *mem)
{
    (void)c;
    smp_seg_free(mem->priv);
    free(mem->priv);
    mem->priv = NULL;
    mem->addr = NULL;
}

static int smp_mem_reg(chan_t *c, void *addr, size_t len, chan_mem_t *mem)
{
    if (!c->zcopy) {
        log_err("smp: zero-copy registration requested but CMA is not available");
        return ARCOLL_ERR_UNSUPPORTED;
    }
    memset(mem, 0, sizeof(*mem));
    mem->addr = addr;
    mem->len = len;
    mem->rkey.kind = SMP_KIND_CMA;
    mem->rkey.addr = (uint64_t)(uintptr_t)addr;
    mem->rkey.len = len;
    mem->rkey.key = (uint64_t)getpid();
    mem->rkey.owner = (uint32_t)c->boot->rank;
    return ARCOLL_OK;
}

static void smp_mem_dereg(chan_t *c, chan_mem_t *mem)
{
    (void)c;
    mem->addr = NULL;
}

static int smp_rmem_import(chan_t *c, int peer, const chan_rkey_t *rkey, chan_rmem_t *rm)
{
    smp_chan_t *s = (smp_chan_t *)c;
    smp_seg_t seg;
    int rc;

    if (peer < 0 || peer >= c->boot->size || rkey->owner != (uint32_t)peer) {
        log_err("smp: key of rank %u presented as rank %d's", rkey->owner, peer);
        return ARCOLL_ERR_CHANNEL;
    }
    rm->rkey = *rkey;
    rm->map = NULL;
    if (rkey->kind == SMP_KIND_CMA)
        return c->zcopy ? ARCOLL_OK : ARCOLL_ERR_UNSUPPORTED;
    if (rkey->kind != SMP_KIND_SEG) {
        log_err("smp: rank %d sent a key of unknown kind %u", peer, rkey->kind);
        return ARCOLL_ERR_CHANNEL;
    }
    rc = smp_seg_attach(&seg, (long)s->pids[peer], rkey->key, rkey->len);
    if (rc != ARCOLL_OK)
        return rc;
    rm->map = seg.addr;
    return ARCOLL_OK;
}

static void smp_rmem_release(chan_t *c, chan_rmem_t *rm)
{
    (void)c;
    if (rm->map != NULL && munmap(rm->map, rm->rkey.len) != 0)
        log_warn("smp: munmap of a peer segment failed: %s", strerror(errno));
    rm->map = NULL;
    rm->rkey.kind = 0;
}

static int smp_cma_write(smp_chan_t *s, int peer, const void *src, size_t len, uint64_t raddr)
{
    while (len > 0) {
        struct iovec l = {(void *)(uintptr_t)src, len};
        struct iovec r = {(void *)(uintptr_t)raddr, len};
        ssize_t n = process_vm_writev(s->pids[peer], &l, 1, &r, 1, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            log_err("smp: process_vm_writev of %zu bytes to rank %d (pid %ld) failed: %s", len,
                    peer, (long)s->pids[peer], strerror(errno));
            return errno == ESRCH ? ARCOLL_ERR_PEER : ARCOLL_ERR_CHANNEL;
        }
        src = (const char *)src + n;
        raddr += (uint64_t)n;
        len -= (size_t)n;
    }
    return ARCOLL_OK;
}

static int smp_put(chan_t *c, int peer, const void *src, size_t len, const chan_mem_t *lmem,
                   const chan_rmem_t *dst, uint64_t off)
{
    (void)lmem;
    if (off > dst->rkey.len || len > dst->rkey.len - off) {
        log_err("smp: put of %zu bytes at offset %llu is outside rank %d's %llu-byte buffer", len,
                (unsigned long long)off, peer, (unsigned long long)dst->rkey.len);
        return ARCOLL_ERR_CHANNEL;
    }
    if (dst->rkey.kind == SMP_KIND_CMA)
        return smp_cma_write((smp_chan_t *)c, peer, src, len, dst->rkey.addr + off);
    memcpy((char *)dst->map + off, src, len);
    return ARCOLL_OK;
}

static int smp_put_u64(chan_t *c, int peer, uint64_t val, const chan_rmem_t *dst, uint64_t off)
{
    (void)c;
    if (dst->rkey.kind != SMP_KIND_SEG || off % 8 || off + 8 > dst->rkey.len) {
        log_err("smp: flag write to rank %d at offset %llu is not inside a region", peer,
                (unsigned long long)off);
        return ARCOLL_ERR_CHANNEL;
    }
    /* Release: every earlier put to this peer (memcpy, or CMA copies made by
     * the kernel on this thread) is visible before the word. */
    atomic_store_explicit((_Atomic uint64_t *)((char *)dst->map + off), val, memory_order_release);
    return ARCOLL_OK;
}

static int smp_progress(chan_t *c)
{
    (void)c;
    return 0;
}

static int smp_peer_check(chan_t *c, int peer)
{
    smp_chan_t *s = (smp_chan_t *)c;

    if (!boot_pid_gone(s->pids[peer]))
        return ARCOLL_OK;
    log_err("smp: rank %d (pid %ld) has exited", peer, (long)s->pids[peer]);
    return ARCOLL_ERR_PEER;
}

static void smp_destroy(chan_t *c)
{
    smp_chan_t *s = (smp_chan_t *)c;

    free(s->pids);
    free(s);
}

static const struct chan_ops smp_ops = {
    .name = "smp",
    .mem_alloc = smp_mem_alloc,
    .mem_free = smp_mem_free,
    .mem_seal = smp_mem_seal,
    .mem_reg = smp_mem_reg,
    .mem_dereg = smp_mem_dereg,
    .rmem_import = smp_rmem_import,
    .rmem_release = smp_rmem_release,
    .put = smp_put,
    .put_u64 = smp_put_u64,
    .progress = smp_progress,
    .peer_check = smp_peer_check,
    .destroy = smp_destroy,
};

/* Can we write into the next rank's private memory? Containers and Yama
 * often forbid it. Every rank probes one neighbour and all agree on the
 * answer, so that no pair disagrees about the path. */
static int smp_cma_probe(smp_chan_t *s, int *ok_all)
{
    boot_t *b = s->super.boot;
    struct {
        uint64_t addr;
        int32_t err;
        int32_t pad;
    } mine, *all;
    volatile uint64_t *word;
    uint64_t magic = 0x636d612070726f62ULL;
    int next = (b->rank + 1) % b->size, rc;

    *ok_all = 0;
    word = calloc(1, sizeof(*word));
    all = calloc((size_t)b->size, sizeof(*all));
    if (word == NULL || all == NULL) {
        log_err("smp: out of memory");
        rc = ARCOLL_ERR_NOMEM;
        goto out;
    }
    mine.addr = (uint64_t)(uintptr_t)word;
    mine.err = 0;
    rc = b->allgather(b, &mine, all, sizeof(mine));
    if (rc != ARCOLL_OK)
        goto out;
    {
        struct iovec l = {&magic, sizeof(magic)};
        struct iovec r = {(void *)(uintptr_t)all[next].addr, sizeof(magic)};
        mine.err = process_vm_writev(s->pids[next], &l, 1, &r, 1, 0) == sizeof(magic) ? 0 : errno;
    }
    rc = b->allgather(b, &mine, all, sizeof(mine));
    if (rc != ARCOLL_OK)
        goto out;
    *ok_all = 1;
    for (int i = 0; i < b->size; i++) {
        if (all[i].err != 0) {
            if (*ok_all && b->rank == 0)
                log_warn("smp: process_vm_writev from rank %d to rank %d failed (%s): "
                         "zero-copy is off, the copy path is used for all sizes",
                         i, (i + 1) % b->size, strerror(all[i].err));
            *ok_all = 0;
        }
    }
out:
    free(all);
    free((void *)word);
    return rc;
}

int smp_chan_create(boot_t *boot, const chan_args_t *args, chan_t **out)
{
    const smp_opts_t *o = args->opts;
    smp_chan_t *s;
    pid_t me = getpid();
    int rc, ok;

    *out = NULL;
    if (boot->nhosts != 1) {
        log_err("smp: the shared-memory channel needs all ranks on one host, this job spans %d "
                "(use ARCOLL_CHANNEL=verbs)",
                boot->nhosts);
        return ARCOLL_ERR_UNSUPPORTED;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        log_err("smp: out of memory");
        return ARCOLL_ERR_NOMEM;
    }
    s->super.ops = &smp_ops;
    s->super.puts_sync = 1; /* memcpy, atomic stores and process_vm_writev */
    s->super.boot = boot;
    /* process_vm_writev pins the target pages on every call: measured here, the
     * bounce path stays faster up to about 2 MiB per peer. */
    s->super.zcopy_threshold = 4u << 20;
    s->super.bounce = CHAN_BOUNCE_HOST;
    s->named = o->seg == CORE_SEG_NAMED;
    s->pids = calloc((size_t)boot->size, sizeof(*s->pids));
    if (s->pids == NULL) {
        log_err("smp: out of memory");
        rc = ARCOLL_ERR_NOMEM;
        goto err_chan;
    }
    rc = boot->allgather(boot, &me, s->pids, sizeof(me));
    if (rc != ARCOLL_OK)
        goto err_pids;
    if (o->cma == SMP_CMA_OFF) {
        if (boot->rank == 0)
            log_info("smp: ARCOLL_SMP_CMA=off: zero-copy is off, the copy path is used");
    } else {
        rc = smp_cma_probe(s, &ok);
        if (rc != ARCOLL_OK)
            goto err_pids;
        s->super.zcopy = ok;
    }
    *out = &s->super;
    return ARCOLL_OK;

err_pids:
    free(s->pids);
err_chan:
    free(s);
    return rc;
}
