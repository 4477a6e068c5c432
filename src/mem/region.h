/*
 * Same-address shared regions: memory mapped at the same virtual address in
 * every rank of this node, so that a pointer published by one local rank is
 * usable as it is by every other. The node heap (arcoll_heap_*) registers its
 * range here; a test may register a MAP_SHARED range made before fork. An
 * algorithm that reads or writes a peer's buffer through its address (sh_co)
 * may do so only when both ends name the same region id.
 */
#ifndef ARCOLL_MEM_REGION_H
#define ARCOLL_MEM_REGION_H

#include <stddef.h>
#include <stdint.h>

#define HEAP_REGION_MAX 8

/* Register [base, base + len) under a node-unique id (equal in every local
 * rank that maps it; never 0). ARCOLL_OK, ARCOLL_ERR_INVALID (empty, overlap,
 * id 0) or ARCOLL_ERR_NOMEM (table full). Not thread safe against add/remove
 * of other regions; lookups may run concurrently with neither. */
int heap_region_add(void *base, size_t len, uint64_t id);
/* Forget the region that starts at base (no-op if none). */
void heap_region_remove(void *base);
/* The id of the region holding all of [p, p + len), or 0 if none does. */
uint64_t heap_region_find(const void *p, size_t len);

#endif
