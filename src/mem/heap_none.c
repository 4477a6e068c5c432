/*
 * No node heap in this process: mem/heap.h and the arcoll_heap_* API for
 * libarcoll_nh.so, the variant of the library without jemalloc that the Open
 * MPI component links (docs/embedding.md, "The Open MPI component").
 * jemalloc's initial-exec TLS marks a library STATIC_TLS, which a library
 * opened late by dlopen (as Open MPI opens its components) cannot get from
 * glibc's small static TLS surplus; this file replaces heap.c there.
 *
 * Everything answers as heap.c does when its heap cannot be made: no layout,
 * no slot, every allocation fails with ENOMEM, no pointer is in the heap.
 * The callers' fallbacks then apply: the node agreement (heap_node.c) sees
 * this rank without a heap (its host's heap stays private, no sh_co), and the
 * heap MR of engine/zmem.c is never made.
 */
#include "mem/heap.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include "arcoll.h"
#include "util/log.h"

static void heap_none_say(void)
{
    log_info("heap: none in this process (libarcoll_nh.so, built without jemalloc: preload "
             "libarcoll_heap.so for the node heap); arcoll_heap_* allocations fail");
}

int heap_ensure(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    pthread_once(&once, heap_none_say);
    return ARCOLL_ERR_UNSUPPORTED;
}

int heap_layout(heap_layout_t *out)
{
    (void)out;
    return ARCOLL_ERR_STATE;
}

int heap_slot(char **mine, size_t *slot_len, size_t *used)
{
    (void)mine, (void)slot_len, (void)used;
    return ARCOLL_ERR_STATE;
}

int arcoll_heap_contains(const void *p)
{
    (void)p;
    return 0;
}

void *arcoll_heap_aligned_alloc(size_t align, size_t size)
{
    (void)size;
    if (align == 0 || (align & (align - 1)) != 0) {
        errno = EINVAL;
        return NULL;
    }
    heap_ensure();
    errno = ENOMEM;
    return NULL;
}

void *arcoll_heap_malloc(size_t size)
{
    return arcoll_heap_aligned_alloc(1, size);
}

void *arcoll_heap_calloc(size_t n, size_t size)
{
    (void)n;
    return arcoll_heap_aligned_alloc(1, size);
}

void arcoll_heap_free(void *p)
{
    if (p != NULL)
        log_warn("arcoll_heap_free: %p is not in this process's heap; ignored", p);
}

void *arcoll_heap_realloc(void *p, size_t size)
{
    if (p == NULL)
        return arcoll_heap_malloc(size);
    log_warn("arcoll_heap_realloc: %p is not in this process's heap", p);
    errno = EINVAL;
    return NULL;
}

size_t arcoll_heap_usable_size(const void *p)
{
    (void)p;
    return 0;
}
