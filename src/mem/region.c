/* Same-address shared regions (mem/region.h): a small fixed table, read on
 * every eligibility check of an address-based algorithm. */
#include "mem/region.h"

#include "arcoll.h"

typedef struct heap_region {
    uintptr_t base;
    size_t len;
    uint64_t id;
} heap_region_t;

static heap_region_t heap_regions[HEAP_REGION_MAX];

int heap_region_add(void *base, size_t len, uint64_t id)
{
    uintptr_t b = (uintptr_t)base;
    int slot = -1;

    if (base == NULL || len == 0 || id == 0 || b + len < b)
        return ARCOLL_ERR_INVALID;
    for (int i = 0; i < HEAP_REGION_MAX; i++) {
        const heap_region_t *r = &heap_regions[i];

        if (r->len == 0) {
            if (slot < 0)
                slot = i;
            continue;
        }
        if (b < r->base + r->len && r->base < b + len)
            return ARCOLL_ERR_INVALID;
    }
    if (slot < 0)
        return ARCOLL_ERR_NOMEM;
    heap_regions[slot] = (heap_region_t){.base = b, .len = len, .id = id};
    return ARCOLL_OK;
}

void heap_region_remove(void *base)
{
    for (int i = 0; i < HEAP_REGION_MAX; i++)
        if (heap_regions[i].len != 0 && heap_regions[i].base == (uintptr_t)base)
            heap_regions[i] = (heap_region_t){0};
}

uint64_t heap_region_find(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p;

    if (p == NULL || a + len < a)
        return 0;
    for (int i = 0; i < HEAP_REGION_MAX; i++) {
        const heap_region_t *r = &heap_regions[i];

        if (r->len != 0 && a >= r->base && a + len <= r->base + r->len)
            return r->id;
    }
    return 0;
}
