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

#include "core/chan.h"
#include "core/config.h"
#include "core/log.h"

enum { SMP_KIND_SEG = 1, SMP_KIND_CMA = 2 };

typedef struct smp_chan {
    chan_t super;
    pid_t *pids; /* [boot->size] */
    uint64_t next_seg;
} smp_chan_t;

static void smp_seg_name(char *buf, size_t len, pid_t pid, uint64_t id)
{
    snprintf(buf, len, "/arcoll.%ld.%llu", (long)pid, (unsigned long long)id);
}

static int smp_mem_alloc(chan_t *c, size_t len, chan_mem_t *mem)
{
    smp_chan_t *s = (smp_chan_t *)c;
    uint64_t id = s->next_seg++;
    char name[64];
    void *addr;
    int fd, err;

    smp_seg_name(name, sizeof(name), getpid(), id);
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        log_err("smp: shm_open(%s) failed: %s", name, strerror(errno));
        return ARCOLL_ERR_NOMEM;
    }
    /* Reserve the pages now: a full /dev/shm is an error here, not a SIGBUS
     * in the middle of a collective. */
    err = posix_fallocate(fd, 0, (off_t)len);
    if (err != 0) {
        log_err("smp: reserving %zu bytes of shared memory for %s failed: %s "
                "(is /dev/shm large enough?)",
                len, name, strerror(err));
        goto err_unlink;
    }
    addr = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
        log_err("smp: mmap of %zu bytes of %s failed: %s", len, name, strerror(errno));
        goto err_unlink;
    }
    close(fd);
    memset(mem, 0, sizeof(*mem));
    mem->addr = addr;
    mem->len = len;
    mem->rkey.kind = SMP_KIND_SEG;
    mem->rkey.key = id;
    mem->rkey.len = len;
    mem->rkey.owner = (uint32_t)c->boot->rank;
    mem->priv = (void *)1; /* name still linked */
    return ARCOLL_OK;

err_unlink:
    shm_unlink(name);
    close(fd);
    return ARCOLL_ERR_NOMEM;
}

static void smp_mem_seal(chan_t *c, chan_mem_t *mem)
{
    char name[64];

    (void)c;
    if (mem->priv == NULL)
        return;
    smp_seg_name(name, sizeof(name), getpid(), mem->rkey.key);
    if (shm_unlink(name) != 0)
        log_warn("smp: shm_unlink(%s) failed: %s", name, strerror(errno));
    mem->priv = NULL;
}

static void smp_mem_free(chan_t *c, chan_mem_t *mem)
{
    smp_mem_seal(c, mem);
    if (munmap(mem->addr, mem->len) != 0)
        log_warn("smp: munmap of a region failed: %s", strerror(errno));
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
    char name[64];
    struct stat st;
    int fd;

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
    smp_seg_name(name, sizeof(name), s->pids[peer], rkey->key);
    fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        log_err("smp: shm_open(%s) of rank %d failed: %s", name, peer, strerror(errno));
        return ARCOLL_ERR_CHANNEL;
    }
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < rkey->len) {
        log_err("smp: segment %s of rank %d is smaller than advertised", name, peer);
        goto err_close;
    }
    rm->map = mmap(NULL, rkey->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (rm->map == MAP_FAILED) {
        rm->map = NULL;
        log_err("smp: mmap of rank %d's segment %s failed: %s", peer, name, strerror(errno));
        goto err_close;
    }
    close(fd);
    return ARCOLL_OK;

err_close:
    close(fd);
    return ARCOLL_ERR_CHANNEL;
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

int smp_chan_create(boot_t *boot, const struct core_config *cfg, chan_t **out)
{
    smp_chan_t *s;
    pid_t me = getpid();
    int rc, ok;

    *out = NULL;
    if (boot->nnodes != 1) {
        log_err("smp: the shared-memory channel needs all ranks on one node, this job has %d "
                "nodes (use ARCOLL_CHANNEL=verbs)",
                boot->nnodes);
        return ARCOLL_ERR_UNSUPPORTED;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        log_err("smp: out of memory");
        return ARCOLL_ERR_NOMEM;
    }
    s->super.ops = &smp_ops;
    s->super.boot = boot;
    /* process_vm_writev pins the target pages on every call: measured here, the
     * bounce path stays faster up to about 2 MiB per peer. */
    s->super.zcopy_threshold = 4u << 20;
    s->pids = calloc((size_t)boot->size, sizeof(*s->pids));
    if (s->pids == NULL) {
        log_err("smp: out of memory");
        rc = ARCOLL_ERR_NOMEM;
        goto err_chan;
    }
    rc = boot->allgather(boot, &me, s->pids, sizeof(me));
    if (rc != ARCOLL_OK)
        goto err_pids;
    if (cfg->smp_cma == CORE_CMA_OFF) {
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
