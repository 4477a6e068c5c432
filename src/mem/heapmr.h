/* The heap MR (docs/heap.md, "The heap registered on verbs"): one registration
 * over a prefix of this process's heap slot, [base, base + top), that serves
 * every zero-copy buffer inside it without a registration cache lookup. The
 * heap never changes a page's backing under an address (no purge, no
 * decommit), so the registration cannot go stale and needs no invalidation.
 *
 * When a buffer ends above top, the prefix doubles (top: the smallest power
 * of two times min covering the buffer and the heap's used part, at most the
 * slot): a new MR over the whole new prefix replaces the old one, which is
 * deregistered at its last put (a call in flight may still hold its key). So
 * a buffer below top is always covered by one MR, and at most log2(slot/min)
 * + 1 registrations are made. With on-demand paging the caller passes min =
 * slot: one registration over the slot, nothing pinned.
 *
 * A failed registration is returned once; from then on every get answers
 * HEAPMR_SKIP (the caller uses its other path).
 *
 * Pure logic over regcache_ops_t callbacks (tests/unit/test_heapmr.c). Not
 * thread safe: one per context, called from its progress context.
 */
#ifndef ARCOLL_MEM_HEAPMR_H
#define ARCOLL_MEM_HEAPMR_H

#include <stddef.h>
#include <stdint.h>

#include "mem/regcache.h"

#define HEAPMR_SKIP 1 /* not served: outside the slot, or disabled after a failure */

typedef struct heapmr heapmr_t;
typedef struct heapmr_mr heapmr_mr_t;

typedef struct heapmr_stats {
    uint64_t regs;    /* successful registrations (growth steps) */
    uint64_t deregs;  /* registrations released */
    uint64_t hits;    /* gets served */
    uint64_t failed;  /* failed registrations (0 or 1: then disabled) */
    uint64_t revoked; /* MRs revoked by failed calls (heapmr_revoke) */
    size_t top;       /* length of the current MR (0: none) */
    size_t bytes;     /* registered now: the current MR and old ones still held */
} heapmr_stats_t;

/* base and slot_len: page aligned; min: rounded up to a power of two (at
 * least a page). ARCOLL_ERR_INVALID without callbacks or with a bad slot. */
int heapmr_create(const regcache_ops_t *ops, void *base, size_t slot_len, size_t min,
                  heapmr_t **out);
/* Deregisters every MR exactly once, including held ones (put them first). */
void heapmr_destroy(heapmr_t *h);

/* Serve [addr, addr + len) (len > 0) from the MR, growing it first if the
 * range ends above top; used: bytes of the slot the heap has handed out.
 * ARCOLL_OK with *out held until heapmr_put; HEAPMR_SKIP; or, once, the
 * failed registration's status (negative), after which every get skips. */
int heapmr_get(heapmr_t *h, void *addr, size_t len, size_t used, heapmr_mr_t **out);
void heapmr_put(heapmr_t *h, heapmr_mr_t *m);
/* m (held) must serve no further get: if it is the current MR, the next get
 * registers a new one over the same prefix. It is released at its last put. */
void heapmr_revoke(heapmr_t *h, heapmr_mr_t *m);
/* What reg stored for this MR; it starts at base. */
void *heapmr_handle(const heapmr_mr_t *m);

void heapmr_stats(const heapmr_t *h, heapmr_stats_t *st);

#endif
