/*
 * libarcoll_heap.so (docs/heap.md): LD_PRELOAD it and an unmodified
 * program's malloc & co come from the node heap (arcoll_heap_*), so that its
 * MPI buffers are eligible for the address-based algorithms. Falls back to
 * glibc's allocator (its __libc_* entry points, which need no dlsym) for
 *   - requests of ARCOLL_HEAP_HUGE bytes or more (default 256 MiB),
 *   - requests the heap cannot serve (exhausted, or it could not be made),
 *   - calls made while this thread is already inside the heap (its creation
 *     or jemalloc calling back into malloc).
 * free, realloc and malloc_usable_size look at the address: anything outside
 * this process's heap slot is glibc's (allocated before the preload took
 * over, or by a fallback). A heap block that realloc cannot grow in the heap
 * moves to glibc's memory.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arcoll.h"
#include "core/config.h"

#define PRE_DEF_HUGE ((size_t)256 << 20)

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t align, size_t n);
void __libc_free(void *p);

/* initial-exec: no __tls_get_addr (which may allocate) on the malloc path. */
static __thread int pre_inside __attribute__((tls_model("initial-exec"))); /* in the heap now */
static size_t pre_huge;                                                    /* 0 until read */

static size_t pre_huge_limit(void)
{
    size_t h = __atomic_load_n(&pre_huge, __ATOMIC_RELAXED);

    if (h == 0) {
        const char *v = getenv("ARCOLL_HEAP_HUGE");
        if (v == NULL || core_config_parse_size(v, &h) != 0 || h == 0)
            h = PRE_DEF_HUGE;
        __atomic_store_n(&pre_huge, h, __ATOMIC_RELAXED);
    }
    return h;
}

/* From the heap if it may and can; NULL otherwise (the caller falls back). */
static void *pre_heap(size_t align, size_t n, int zero)
{
    void *p;

    if (pre_inside || n >= pre_huge_limit())
        return NULL;
    pre_inside = 1;
    p = align != 0 ? arcoll_heap_aligned_alloc(align, n)
        : zero     ? arcoll_heap_calloc(1, n)
                   : arcoll_heap_malloc(n);
    pre_inside = 0;
    return p;
}

static void pre_heap_free(void *p)
{
    int was = pre_inside;

    pre_inside = 1;
    arcoll_heap_free(p);
    pre_inside = was;
}

void *malloc(size_t n)
{
    void *p = pre_heap(0, n, 0);

    return p != NULL ? p : __libc_malloc(n);
}

void free(void *p)
{
    if (p == NULL)
        return;
    if (arcoll_heap_contains(p))
        pre_heap_free(p);
    else
        __libc_free(p);
}

void *calloc(size_t n, size_t size)
{
    void *p;

    if (size != 0 && n > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    p = pre_heap(0, n * size, 1);
    return p != NULL ? p : __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    void *q;
    size_t old;

    if (p == NULL)
        return malloc(n);
    if (!arcoll_heap_contains(p))
        return __libc_realloc(p, n); /* glibc's block stays glibc's */
    if (n == 0) {
        pre_heap_free(p);
        return NULL;
    }
    q = NULL;
    if (!pre_inside && n < pre_huge_limit()) {
        pre_inside = 1;
        q = arcoll_heap_realloc(p, n);
        pre_inside = 0;
    }
    if (q != NULL)
        return q;
    /* Too large for the heap now: move it to glibc's memory. */
    q = __libc_malloc(n);
    if (q == NULL)
        return NULL;
    old = arcoll_heap_usable_size(p);
    memcpy(q, p, old < n ? old : n);
    pre_heap_free(p);
    return q;
}

static void *pre_aligned(size_t align, size_t n)
{
    void *p = pre_heap(align, n, 0);

    return p != NULL ? p : __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    void *p;

    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return EINVAL;
    p = pre_aligned(align, n);
    if (p == NULL)
        return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t n)
{
    if (align == 0 || (align & (align - 1)) != 0) {
        errno = EINVAL;
        return NULL;
    }
    return pre_aligned(align, n);
}

void *memalign(size_t align, size_t n)
{
    if (align == 0 || (align & (align - 1)) != 0) {
        errno = EINVAL;
        return NULL;
    }
    return pre_aligned(align, n);
}

void *valloc(size_t n)
{
    return pre_aligned((size_t)sysconf(_SC_PAGESIZE), n);
}

void *pvalloc(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    return pre_aligned(page, (n + page - 1) & ~(page - 1));
}

size_t malloc_usable_size(void *p)
{
    static size_t (*next)(void *);

    if (p == NULL)
        return 0;
    if (arcoll_heap_contains(p))
        return arcoll_heap_usable_size(p);
    if (next == NULL)
        next = (size_t(*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
    return next != NULL ? next(p) : 0;
}
