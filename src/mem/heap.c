/*
 * The node heap's allocator side (mem/heap.h, docs/heap.md): the
 * reservation, this process's memfd segment in its slot, and a jemalloc arena
 * whose extent hooks carve from that segment. jemalloc (Debian's
 * libjemalloc_pic.a) is linked into this one object, whose symbols the
 * Makefile then localizes: the library exports no malloc and changes no
 * program's allocator by being linked. The arena's metadata stays in private
 * memory (metadata_use_hooks = false), so the segment holds only user data:
 * a peer cannot corrupt the allocator and a forked child's copy of it is
 * consistent.
 */
#include "mem/heap.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>

#include "arcoll.h"
#include "chan/smp/smp_seg.h"
#include "mem/region.h"
#include "util/log.h"
#include "util/size.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define HEAP_DEF_BASE  ((uintptr_t)0x200000000000ULL) /* 32 TiB: far from brk, mmap and stacks */
#define HEAP_DEF_SIZE  ((size_t)1 << 30)
#define HEAP_DEF_SLOTS 64
/* jemalloc grows its arena geometrically; pages are reserved (fallocate) as
 * they are handed out, so cap the step: a grown extent is real memory. */
#define HEAP_GROW_LIMIT ((size_t)8 << 20)

enum { HEAP_NONE, HEAP_READY, HEAP_FAILED };

/* jemalloc 5.3's arena_config_t (experimental.arenas_create_ext; not in its
 * public header). */
typedef struct heap_je_config {
    extent_hooks_t *hooks;
    bool metadata_use_hooks;
} heap_je_config_t;

static struct {
    pthread_mutex_t create; /* one creator */
    pthread_mutex_t lock;   /* the bump pointer */
    _Atomic int state;
    heap_layout_t lay;
    smp_seg_t seg;
    char *mine;   /* this process's segment */
    size_t used;  /* bytes of it handed to jemalloc, from the start */
    int private_; /* a forked child: its copy is private memory, no fallocate */
    int flags;    /* mallocx flags: our arena, no thread cache */
} heap = {.create = PTHREAD_MUTEX_INITIALIZER, .lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- settings (process-wide, read once at creation: docs/heap.md) ---- */

/* A size (suffix k, m or g) or, hex = 1, an address (0x...); a bad value is
 * warned about and the default stands. */
static void heap_env(const char *name, int hex, size_t dflt, size_t *out)
{
    const char *v = getenv(name);
    unsigned long long n;
    char *end;

    *out = dflt;
    if (v == NULL || *v == '\0')
        return;
    errno = 0;
    if (hex) {
        n = strtoull(v, &end, 16);
        if (errno == 0 && *end == '\0' && v[0] != '-') {
            *out = (size_t)n;
            return;
        }
    } else if (core_config_parse_size(v, out) == 0) {
        return;
    }
    *out = dflt;
    log_warn("heap: %s=%s is not %s; using %#zx", name, v, hex ? "an address" : "a size", dflt);
}

/* ---- extent hooks: a bump allocator over the segment ---- */

static void *heap_hook_alloc(extent_hooks_t *h, void *new_addr, size_t size, size_t align,
                             bool *zero, bool *commit, unsigned arena)
{
    size_t off;
    char *p = NULL;

    (void)h;
    (void)arena;
    pthread_mutex_lock(&heap.lock);
    off = (heap.used + align - 1) & ~(align - 1);
    if (off < heap.used || off > heap.lay.slot_len || size > heap.lay.slot_len - off)
        goto out;
    if (new_addr != NULL && new_addr != heap.mine + off)
        goto out;
    /* Pages now, so that a short memory gives ENOMEM here and not SIGBUS at
     * the first write. */
    if (!heap.private_ && posix_fallocate(heap.lay.fd, (off_t)off, (off_t)size) != 0)
        goto out;
    heap.used = off + size;
    p = heap.mine + off;
    *zero = true; /* fresh pages of the file (or of the child's private copy) */
    *commit = true;
out:
    pthread_mutex_unlock(&heap.lock);
    return p;
}

/* Keep every extent: jemalloc retains and reuses it (true = "not done"). */
static bool heap_hook_dalloc(extent_hooks_t *h, void *addr, size_t size, bool committed,
                             unsigned arena)
{
    (void)h, (void)addr, (void)size, (void)committed, (void)arena;
    return true;
}

static void heap_hook_destroy(extent_hooks_t *h, void *addr, size_t size, bool committed,
                              unsigned arena)
{
    (void)h, (void)addr, (void)size, (void)committed, (void)arena;
}

static bool heap_hook_commit(extent_hooks_t *h, void *addr, size_t size, size_t off, size_t len,
                             unsigned arena)
{
    (void)h, (void)addr, (void)size, (void)off, (void)len, (void)arena;
    return false; /* always committed */
}

static bool heap_hook_decommit(extent_hooks_t *h, void *addr, size_t size, size_t off, size_t len,
                               unsigned arena)
{
    (void)h, (void)addr, (void)size, (void)off, (void)len, (void)arena;
    return true; /* never: the pages are a peer's view too */
}

/* One mapping: any split and any merge of its extents is fine. */
static bool heap_hook_split(extent_hooks_t *h, void *addr, size_t size, size_t a, size_t b,
                            bool committed, unsigned arena)
{
    (void)h, (void)addr, (void)size, (void)a, (void)b, (void)committed, (void)arena;
    return false;
}

static bool heap_hook_merge(extent_hooks_t *h, void *a, size_t alen, void *b, size_t blen,
                            bool committed, unsigned arena)
{
    (void)h, (void)a, (void)alen, (void)b, (void)blen, (void)committed, (void)arena;
    return false;
}

static extent_hooks_t heap_hooks = {
    .alloc = heap_hook_alloc,
    .dalloc = heap_hook_dalloc,
    .destroy = heap_hook_destroy,
    .commit = heap_hook_commit,
    .decommit = heap_hook_decommit,
    .purge_lazy = NULL, /* no purge: freed pages stay, as a peer may map them */
    .purge_forced = NULL,
    .split = heap_hook_split,
    .merge = heap_hook_merge,
};

/* ---- fork: the child gets a private copy ---- */

/* Replace [addr, addr + len) by inaccessible reserved space (a peer's slot
 * we no longer map) or by private read-write memory. */
static int heap_remap(void *addr, size_t len, int rw)
{
    void *p = mmap(addr, len, rw ? PROT_READ | PROT_WRITE : PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    return p == MAP_FAILED ? -1 : 0;
}

/* The child would otherwise share its parent's live segment (and see the
 * peers'). The parent copies what is in use just before fork, so that the
 * child gets the memory as it was at fork (a copy made in the child would
 * see what the parent writes meanwhile); the child puts that copy in place.
 * The cost: a memcpy of the heap's used part per fork. */
static void *heap_fork_snap;

static void heap_atfork_prepare(void)
{
    pthread_mutex_lock(&heap.lock); /* no bump across fork */
    heap_fork_snap = NULL;
    if (atomic_load(&heap.state) != HEAP_READY || heap.private_ || heap.used == 0)
        return;
    heap_fork_snap =
        mmap(NULL, heap.used, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (heap_fork_snap != MAP_FAILED)
        memcpy(heap_fork_snap, heap.mine, heap.used);
}

static void heap_atfork_parent(void)
{
    if (heap_fork_snap != NULL && heap_fork_snap != MAP_FAILED)
        munmap(heap_fork_snap, heap.used);
    heap_fork_snap = NULL;
    pthread_mutex_unlock(&heap.lock);
}

/* Only syscalls: the child of a multi-threaded parent. */
static void heap_atfork_child(void)
{
    size_t used = heap.used, total;

    pthread_mutex_unlock(&heap.lock);
    if (atomic_load(&heap.state) != HEAP_READY || heap.private_)
        return;
    if (heap_fork_snap == MAP_FAILED)
        goto fail;
    if (used > 0 &&
        mremap(heap_fork_snap, used, used, MREMAP_MAYMOVE | MREMAP_FIXED, heap.mine) == MAP_FAILED)
        goto fail;
    if (used < heap.lay.slot_len && heap_remap(heap.mine + used, heap.lay.slot_len - used, 1) != 0)
        goto fail;
    if (heap.lay.base != NULL) {
        total = heap.lay.slot_len * (size_t)heap.lay.nslots;
        heap_region_remove(heap.lay.base);
        if (heap.mine > heap.lay.base)
            heap_remap(heap.lay.base, (size_t)(heap.mine - heap.lay.base), 0);
        if (heap.mine + heap.lay.slot_len < heap.lay.base + total)
            heap_remap(heap.mine + heap.lay.slot_len,
                       (size_t)(heap.lay.base + total - heap.mine - heap.lay.slot_len), 0);
    }
    close(heap.lay.fd);
    heap.lay.fd = -1;
    heap.lay.slot = -1;
    heap.lay.pid = (long)getpid();
    heap.private_ = 1;
    heap_fork_snap = NULL;
    return;

fail:
    /* No private copy: the child must not touch the segment at all. */
    mprotect(heap.mine, heap.lay.slot_len, PROT_NONE);
    atomic_store(&heap.state, HEAP_FAILED);
}

/* ---- creation ---- */

/* Reserve nslots x H at base without replacing anything there; NULL if the
 * range (or part of it) is taken. */
static char *heap_reserve(uintptr_t base, size_t total)
{
    void *p = mmap((void *)base, total, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);

    if (p == MAP_FAILED) {
        log_info("heap: reserving %zu bytes at %#lx failed: %s; the heap is private", total,
                 (unsigned long)base, strerror(errno));
        return NULL;
    }
    if ((uintptr_t)p != base) { /* a kernel before 4.17 took the flag as a hint */
        munmap(p, total);
        log_info("heap: %#lx is taken; the heap is private", (unsigned long)base);
        return NULL;
    }
    return p;
}

static int heap_arena_create(void)
{
    heap_je_config_t cfg = {.hooks = &heap_hooks, .metadata_use_hooks = false};
    unsigned ind;
    size_t sz = sizeof(ind), grow = HEAP_GROW_LIMIT;
    char name[64];
    int err;

    err = mallctl("experimental.arenas_create_ext", &ind, &sz, &cfg, sizeof(cfg));
    if (err != 0) {
        log_err("heap: jemalloc experimental.arenas_create_ext failed: %s", strerror(err));
        return ARCOLL_ERR_UNSUPPORTED;
    }
    snprintf(name, sizeof(name), "arena.%u.retain_grow_limit", ind);
    err = mallctl(name, NULL, NULL, &grow, sizeof(grow));
    if (err != 0)
        log_warn("heap: jemalloc %s failed: %s", name, strerror(err));
    heap.flags = (int)MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE;
    log_debug("heap: jemalloc arena %u; %zu bytes of the segment used by its setup", ind,
              heap.used);
    return ARCOLL_OK;
}

static int heap_create(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), h, nslots, base, total;
    char *res = NULL;
    int slot = heap_launcher_rank(), rc;

    heap_env("ARCOLL_HEAP_SIZE", 0, HEAP_DEF_SIZE, &h);
    heap_env("ARCOLL_HEAP_SLOTS", 0, HEAP_DEF_SLOTS, &nslots);
    heap_env("ARCOLL_HEAP_BASE", 1, HEAP_DEF_BASE, &base);
    h = (h + page - 1) & ~(page - 1);
    if (h < page || nslots == 0 || nslots > (1 << 20) || base % page != 0 ||
        h > SIZE_MAX / nslots) {
        log_err("heap: ARCOLL_HEAP_SIZE %zu x ARCOLL_HEAP_SLOTS %zu at ARCOLL_HEAP_BASE %#zx "
                "is not a usable layout",
                h, nslots, base);
        return ARCOLL_ERR_CONFIG;
    }
    total = h * nslots;
    if (slot < 0)
        log_info("heap: no local rank from the launcher (ARCOLL_HEAP_SLOT); the heap is private");
    else if ((size_t)slot >= nslots)
        log_info("heap: local rank %d is past ARCOLL_HEAP_SLOTS=%zu; the heap is private", slot,
                 nslots);
    else
        res = heap_reserve(base, total);
    heap.lay = (heap_layout_t){.base = res,
                               .slot_len = h,
                               .nslots = (int)nslots,
                               .slot = res != NULL ? slot : -1,
                               .pid = (long)getpid()};
    rc = smp_seg_create_at(&heap.seg, h, res != NULL ? res + (size_t)slot * h : NULL);
    if (rc != ARCOLL_OK)
        goto err_res;
    heap.mine = heap.seg.addr;
    heap.lay.fd = heap.seg.fd;
    heap.used = 0;
    rc = heap_arena_create();
    if (rc != ARCOLL_OK)
        goto err_seg;
    rc = pthread_atfork(heap_atfork_prepare, heap_atfork_parent, heap_atfork_child);
    if (rc != 0) {
        log_err("heap: pthread_atfork failed: %s", strerror(rc));
        rc = ARCOLL_ERR_NOMEM;
        goto err_seg; /* the arena stays, unused: jemalloc cannot destroy hooked arenas here */
    }
    return ARCOLL_OK;

err_seg:
    if (res != NULL) /* keep the slot reserved, not a hole someone else may map */
        heap_remap(heap.mine, h, 0);
    smp_seg_seal(&heap.seg);
    if (res == NULL)
        smp_seg_free(&heap.seg);
    heap.mine = NULL;
err_res:
    if (res != NULL)
        munmap(res, total);
    heap.lay = (heap_layout_t){.slot = -1, .fd = -1};
    return rc;
}

int heap_ensure(void)
{
    int st = atomic_load_explicit(&heap.state, memory_order_acquire);

    if (st == HEAP_NONE) {
        pthread_mutex_lock(&heap.create);
        st = atomic_load(&heap.state);
        if (st == HEAP_NONE) {
            st = heap_create() == ARCOLL_OK ? HEAP_READY : HEAP_FAILED;
            atomic_store_explicit(&heap.state, st, memory_order_release);
        }
        pthread_mutex_unlock(&heap.create);
    }
    return st == HEAP_READY ? ARCOLL_OK : ARCOLL_ERR_NOMEM;
}

int heap_layout(heap_layout_t *out)
{
    if (atomic_load_explicit(&heap.state, memory_order_acquire) != HEAP_READY)
        return ARCOLL_ERR_STATE;
    *out = heap.lay;
    return ARCOLL_OK;
}

int heap_slot(char **mine, size_t *slot_len, size_t *used)
{
    if (atomic_load_explicit(&heap.state, memory_order_acquire) != HEAP_READY)
        return ARCOLL_ERR_STATE;
    *mine = heap.mine;
    *slot_len = heap.lay.slot_len;
    pthread_mutex_lock(&heap.lock);
    *used = heap.used;
    pthread_mutex_unlock(&heap.lock);
    return ARCOLL_OK;
}

/* ---- the public API ---- */

int arcoll_heap_contains(const void *p)
{
    return atomic_load_explicit(&heap.state, memory_order_acquire) == HEAP_READY &&
           (const char *)p >= heap.mine && (const char *)p < heap.mine + heap.lay.slot_len;
}

void *arcoll_heap_aligned_alloc(size_t align, size_t size)
{
    void *p = NULL;

    if (align == 0 || (align & (align - 1)) != 0) {
        errno = EINVAL;
        return NULL;
    }
    if (heap_ensure() == ARCOLL_OK)
        p = mallocx(size != 0 ? size : 1, heap.flags | MALLOCX_ALIGN(align));
    if (p == NULL)
        errno = ENOMEM;
    return p;
}

void *arcoll_heap_malloc(size_t size)
{
    void *p = NULL;

    if (heap_ensure() == ARCOLL_OK)
        p = mallocx(size != 0 ? size : 1, heap.flags);
    if (p == NULL)
        errno = ENOMEM;
    return p;
}

void *arcoll_heap_calloc(size_t n, size_t size)
{
    void *p = NULL;

    if (size != 0 && n > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    if (heap_ensure() == ARCOLL_OK)
        p = mallocx(n * size != 0 ? n * size : 1, heap.flags | MALLOCX_ZERO);
    if (p == NULL)
        errno = ENOMEM;
    return p;
}

void arcoll_heap_free(void *p)
{
    if (p == NULL)
        return;
    if (!arcoll_heap_contains(p)) {
        log_warn("arcoll_heap_free: %p is not in this process's heap; ignored", p);
        return;
    }
    dallocx(p, MALLOCX_TCACHE_NONE);
}

void *arcoll_heap_realloc(void *p, size_t size)
{
    void *q;

    if (p == NULL)
        return arcoll_heap_malloc(size);
    if (!arcoll_heap_contains(p)) {
        log_warn("arcoll_heap_realloc: %p is not in this process's heap", p);
        errno = EINVAL;
        return NULL;
    }
    if (size == 0) {
        dallocx(p, MALLOCX_TCACHE_NONE);
        return NULL;
    }
    q = rallocx(p, size, heap.flags);
    if (q == NULL)
        errno = ENOMEM;
    return q;
}

size_t arcoll_heap_usable_size(const void *p)
{
    return arcoll_heap_contains(p) ? sallocx((void *)(uintptr_t)p, 0) : 0;
}
