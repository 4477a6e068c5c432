/*
 * The node agreement of the heap (mem/heap.h, docs/heap.md): at arcoll_init
 * every rank publishes where its heap segment is; the ranks of one host that
 * all sit at their slots of the same reservation map each other's slots
 * there, through the smp channel's memfd attach, and register the reservation
 * as one same-address region (mem/region.h).
 */
#include "mem/heap.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arcoll.h"
#include "chan/smp/smp_seg.h"
#include "mem/region.h"
#include "util/log.h"

enum { CARD_NONE, CARD_PRIVATE, CARD_SLOT };

typedef struct heap_card {
    uint64_t host; /* hostname and boot id: ranks that can share memory */
    uint64_t base, slot_len;
    int64_t pid;
    int32_t fd, slot, nslots, state; /* state: CARD_* */
} heap_card_t;

static struct {
    int users;  /* contexts attached */
    int shared; /* peers' slots mapped, region registered */
    char *base; /* of the region */
    size_t len;
} heap_node;

static uint64_t heap_fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;

    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 0x100000001b3ULL;
    return h;
}

/* Ranks of one kernel: the same hostname and boot id. */
static uint64_t heap_host_key(const boot_t *b)
{
    char id[64] = "";
    uint64_t h = heap_fnv(0xcbf29ce484222325ULL, b->hostname, strlen(b->hostname));
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);

    if (fd >= 0) {
        ssize_t n = read(fd, id, sizeof(id) - 1);
        close(fd);
        if (n > 0)
            h = heap_fnv(h, id, (size_t)n);
    }
    return h;
}

static void heap_card_mine(heap_card_t *c, uint64_t host)
{
    heap_layout_t l;

    memset(c, 0, sizeof(*c));
    c->host = host;
    c->slot = -1;
    if (heap_layout(&l) != ARCOLL_OK)
        return;
    c->state = l.slot >= 0 ? CARD_SLOT : CARD_PRIVATE;
    c->base = (uint64_t)(uintptr_t)l.base;
    c->slot_len = l.slot_len;
    c->nslots = l.nslots;
    c->slot = l.slot;
    c->pid = l.pid;
    c->fd = l.fd;
}

/* Why this host's ranks cannot share (NULL if they can); *id the region's
 * id, alike on all of them. */
static const char *heap_host_check(const heap_card_t *all, int n, int me, uint64_t *id)
{
    const heap_card_t *m = &all[me];
    int64_t minpid = m->pid;

    if (m->state != CARD_SLOT)
        return "this rank's heap is not at its slot";
    for (int i = 0; i < n; i++) {
        const heap_card_t *c = &all[i];
        if (c->host != m->host)
            continue;
        if (c->state != CARD_SLOT)
            return "a rank of this host has no heap at its slot";
        if (c->base != m->base || c->slot_len != m->slot_len || c->nslots != m->nslots)
            return "the ranks of this host differ in ARCOLL_HEAP_BASE/_SIZE/_SLOTS";
        for (int j = 0; j < i; j++)
            if (all[j].host == m->host && all[j].slot == c->slot)
                return "two ranks of this host have the same slot (local rank)";
        if (c->pid < minpid)
            minpid = c->pid;
    }
    *id = heap_fnv(heap_fnv(m->host, &m->base, sizeof(m->base)), &minpid, sizeof(minpid)) | 1;
    return NULL;
}

/* The peers' slots back to reserved, inaccessible space. */
static void heap_node_unmap(const heap_card_t *me)
{
    char *base = (char *)(uintptr_t)me->base;
    size_t h = me->slot_len;

    for (int s = 0; s < me->nslots; s++) {
        if (s == me->slot)
            continue;
        if (mmap(base + (size_t)s * h, h, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
            log_warn("heap: unmapping slot %d failed", s);
    }
}

/* Map every peer of this host at its slot; 0 or -1 (then none stays). */
static int heap_node_map(const heap_card_t *all, int n, int me)
{
    const heap_card_t *m = &all[me];
    char *base = (char *)(uintptr_t)m->base;

    for (int i = 0; i < n; i++) {
        smp_seg_t s;
        if (i == me || all[i].host != m->host)
            continue;
        if (smp_seg_attach_at(&s, (long)all[i].pid, (uint64_t)all[i].fd, m->slot_len,
                              base + (size_t)all[i].slot * m->slot_len) != ARCOLL_OK) {
            heap_node_unmap(m);
            return -1;
        }
    }
    return 0;
}

int heap_node_attach(boot_t *b)
{
    heap_card_t mine, *all;
    const char *why = NULL;
    uint64_t id = 0, host = heap_host_key(b);
    int32_t ok = 0, *oks = NULL;
    int rc, any = 0, shared = 1, mapped = 0;

    all = calloc((size_t)b->size, sizeof(*all));
    oks = calloc((size_t)b->size, sizeof(*oks));
    if (all == NULL || oks == NULL) {
        log_err("heap: out of memory");
        rc = ARCOLL_ERR_NOMEM; /* the others fail in the bootstrap */
        goto out;
    }
    heap_card_mine(&mine, host);
    rc = b->allgather(b, &mine, all, sizeof(mine));
    if (rc != ARCOLL_OK)
        goto out;
    for (int i = 0; i < b->size; i++)
        any |= all[i].state != CARD_NONE;
    if (!any) /* nobody uses the heap: one allgather, nothing else */
        goto out;
    /* Somebody does: join with ours, so that its host can share. */
    if (mine.state == CARD_NONE)
        heap_ensure();
    heap_card_mine(&mine, host);
    rc = b->allgather(b, &mine, all, sizeof(mine));
    if (rc != ARCOLL_OK)
        goto out;
    if (heap_node.shared) {
        ok = 1; /* another context mapped them already */
    } else {
        why = heap_host_check(all, b->size, b->rank, &id);
        ok = why == NULL && heap_node_map(all, b->size, b->rank) == 0;
        mapped = ok;
        if (why == NULL && !ok)
            why = "mapping a peer's slot failed";
    }
    /* Every rank of the host mapped everyone, or nobody keeps anything. */
    rc = b->allgather(b, &ok, oks, sizeof(ok));
    if (rc != ARCOLL_OK)
        goto out;
    for (int i = 0; i < b->size; i++)
        if (all[i].host == host && !oks[i])
            shared = 0;
    if (!shared && why == NULL)
        why = "another rank of this host could not map its peers";
    if (!shared && mapped) {
        heap_node_unmap(&mine);
        mapped = 0;
    }
    if (shared && !heap_node.shared) {
        heap_node.base = (char *)(uintptr_t)mine.base;
        heap_node.len = mine.slot_len * (size_t)mine.nslots;
        if (heap_region_add(heap_node.base, heap_node.len, id) != ARCOLL_OK) {
            log_warn("heap: registering the heap's region failed (table full or overlap)");
            shared = 0;
        } else {
            heap_node.shared = 1;
            mapped = 0; /* the region's now: heap_node_detach unmaps */
            if (b->local_rank == 0)
                log_info("heap: shared by this host's ranks at %p (%d slots of %zu bytes)",
                         (void *)heap_node.base, mine.nslots, (size_t)mine.slot_len);
        }
    }
    if (!shared && why != NULL && b->local_rank == 0)
        log_info("heap: not shared on this node: %s", why);
out:
    if (mapped) /* a bootstrap failure after mapping, or no region */
        heap_node_unmap(&mine);
    if (rc == ARCOLL_OK)
        heap_node.users++;
    free(oks);
    free(all);
    return rc;
}

void heap_node_detach(void)
{
    heap_card_t me;

    if (heap_node.users == 0 || --heap_node.users > 0 || !heap_node.shared)
        return;
    heap_region_remove(heap_node.base);
    heap_card_mine(&me, 0);
    if (me.state == CARD_SLOT)
        heap_node_unmap(&me);
    heap_node.shared = 0;
}

/* A forked child's heap is private: its region is gone (heap.c). */
uint64_t heap_node_region(void)
{
    return heap_node.shared ? heap_region_find(heap_node.base, 1) : 0;
}

int arcoll_heap_is_shared(void)
{
    return heap_node_region() != 0;
}
