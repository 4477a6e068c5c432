/* Memory-registration cache for the zero-copy path: a user buffer is
 * registered once and reused by later collectives on the same memory, since
 * registering (pinning pages, programming the NIC) costs far more than a
 * collective's start. Pure logic over reg/dereg callbacks, so it runs without
 * hardware.
 *
 * Registrations are rounded out to whole pages, so buffers sharing a page share
 * an entry. The cached entries are kept disjoint and sorted by address: a get
 * is a binary search and hits when one entry covers the whole range. A miss
 * that overlaps cached entries registers their union in one new entry and
 * drops them (those still pinned are deregistered at their last put). The
 * cache is bounded by entry count and bytes with LRU eviction of unpinned
 * entries; pinned entries are never evicted, so a get never fails only because
 * the cache is full (the cache then runs over its bound: stats.overflows).
 *
 * STALE REGISTRATIONS. A registration pins the physical pages that backed the
 * range when it was made. If the application frees or unmaps that memory and
 * the same virtual addresses later come back backed by other pages (malloc
 * reusing an address after munmap/mmap, a new mapping at the same place), a
 * cached registration still points to the OLD pages: a hit hands out a key for
 * memory nobody reads any more, and RDMA writes land there silently while the
 * application's buffer never changes. The cache is only correct if
 * regcache_invalidate() is called for every free/unmap of memory that may be
 * registered, before the addresses can be reused. Where that information comes
 * from (allocator hooks, a memory notifier, the application) is the channel's
 * decision; this module only acts on it.
 *
 * Not thread safe: one cache per channel, called from its progress context.
 */
#ifndef ARCOLL_MEM_REGCACHE_H
#define ARCOLL_MEM_REGCACHE_H

#include <stddef.h>
#include <stdint.h>

/* max_entries passed as 0 */
#define REGCACHE_DEFAULT_MAX_ENTRIES 1024

typedef struct regcache regcache_t;

typedef struct regcache_ops {
    /* Register [addr, addr+len) (whole pages); on success return 0 and store an
     * opaque handle. A nonzero return is a failure: a negative value is passed
     * up to regcache_get's caller unchanged (a positive one as
     * ARCOLL_ERR_CHANNEL). */
    int (*reg)(void *arg, void *addr, size_t len, void **handle);
    void (*dereg)(void *arg, void *handle);
    void *arg;
} regcache_ops_t;

typedef struct regcache_entry regcache_entry_t;

/* What reg stored; valid while the entry is pinned. */
void *regcache_entry_handle(const regcache_entry_t *e);
/* The registered range: page-aligned, covering what was asked for. */
void *regcache_entry_addr(const regcache_entry_t *e);
size_t regcache_entry_len(const regcache_entry_t *e);

/* max_entries 0 means REGCACHE_DEFAULT_MAX_ENTRIES; max_bytes 0 means no
 * bound on bytes. The ops are copied. ARCOLL_ERR_INVALID without reg/dereg. */
int regcache_create(const regcache_ops_t *ops, size_t max_entries, size_t max_bytes,
                    regcache_t **out);
/* Deregisters everything exactly once, including entries still pinned (their
 * pointers become invalid: put every entry first). NULL is a no-op. */
void regcache_destroy(regcache_t *rc);

/* Find a registration covering [addr, addr+len) or make one; the entry is
 * pinned (reference counted) until regcache_put. len 0 or a range that wraps
 * around the address space: ARCOLL_ERR_INVALID. A failure of reg or of memory
 * allocation leaves the cache unchanged (statistics included). */
int regcache_get(regcache_t *rc, void *addr, size_t len, regcache_entry_t **out);
/* Unpin; a pinned entry that was invalidated or merged away is deregistered at
 * its last put. */
void regcache_put(regcache_t *rc, regcache_entry_t *e);

/* The application freed/unmapped [addr, addr+len): drop every entry that
 * overlaps it by at least one byte. Unpinned entries are deregistered now,
 * pinned ones at their last put; either way no later get returns them. */
void regcache_invalidate(regcache_t *rc, void *addr, size_t len);

/* hits/misses count successful gets; evictions count entries dropped for the
 * bounds, invalidations entries dropped by regcache_invalidate (entries merged
 * into a larger one count in neither); overflows counts gets that left the
 * cache over a bound because everything else was pinned. entries/bytes: the
 * cached entries now (not the pinned ones already dropped). */
typedef struct regcache_stats {
    uint64_t hits, misses, evictions, invalidations;
    size_t entries, bytes;
    uint64_t overflows;
} regcache_stats_t;

void regcache_stats(const regcache_t *rc, regcache_stats_t *st);

#endif
