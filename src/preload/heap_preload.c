/*
 * The node heap's malloc & co (docs/heap.md, "The preload library"): an
 * unmodified program's blocks come from the node heap (arcoll_heap_*), so
 * that its MPI buffers are eligible for the address-based algorithms. Built
 * twice: libarcoll_heap.so (ARCOLL_HEAP=on by default: every process, every
 * size) and, inside the PMPI shim libarcoll_mpi.so, the one switch of
 * docs/performance.md (ARCOLL_HEAP=auto: only in an MPI rank, only blocks
 * of ARCOLL_HEAP_MIN bytes or more). Anything else goes to the next
 * allocator: glibc's (its __libc_* entry points, which need no dlsym), or
 * the program's own if one follows this library in symbol lookup order
 * (then the heap is off altogether). The heap also passes on
 *   - requests of ARCOLL_HEAP_HUGE bytes or more (default 256 MiB),
 *   - requests it cannot serve (exhausted, or it could not be made),
 *   - calls made while this thread is already inside the heap (its creation
 *     or jemalloc calling back into malloc).
 * free, realloc and malloc_usable_size look at the address: anything outside
 * this process's heap slot belongs to the next allocator (allocated before
 * the preload took over, or passed on). A heap block that realloc cannot
 * grow in the heap moves to the next allocator's memory.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arcoll.h"
#include "config/config.h"
#include "mem/heap.h"
#include "preload/heap_preload.h"

#define PRE_DEF_HUGE ((size_t)256 << 20)
#ifndef PRE_DEF_MODE
#define PRE_DEF_MODE "on"
#endif
#ifndef PRE_DEF_MIN
#define PRE_DEF_MIN 0
#endif

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t align, size_t n);
void __libc_free(void *p);

/* initial-exec: no __tls_get_addr (which may allocate) on the malloc path. */
static __thread int pre_inside __attribute__((tls_model("initial-exec"))); /* in the heap now */
static size_t pre_huge;                                                    /* 0 until read */

/* Decided at the first call of any entry point, then constant. */
enum { PRE_UNDECIDED, PRE_HEAP, PRE_NEXT };
static int pre_mode;
static size_t pre_min;
static pre_why_t pre_why;

/* The next allocator: glibc, or the program's own (pre_decide). */
static struct {
    void *(*malloc)(size_t);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void *(*memalign)(size_t, size_t);
    void (*free)(void *);
    size_t (*usable)(void *);
} pre_next = {__libc_malloc, __libc_calloc, __libc_realloc, __libc_memalign, __libc_free, NULL};

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

/* Another malloc after this library in lookup order (a program linked with
 * jemalloc or tcmalloc): it keeps every block, the heap stays off. Every
 * lookup is made, and dlerror() called, while glibc is still the next
 * allocator: a failed dlsym keeps error state from glibc's malloc, which
 * must go back to glibc's free (the program's crashes on it). */
static int pre_foreign(void)
{
    void *m = dlsym(RTLD_NEXT, "malloc"), *f = dlsym(RTLD_NEXT, "free");
    void *c = dlsym(RTLD_NEXT, "calloc"), *r = dlsym(RTLD_NEXT, "realloc");
    void *a = dlsym(RTLD_NEXT, "memalign"), *u = dlsym(RTLD_NEXT, "malloc_usable_size");
    void *ours = dlsym(RTLD_NEXT, "preload_heap_state");
    Dl_info dm, dours;

    /* The first call formats the message (glibc's malloc), the second frees
     * it and the error state: nothing of glibc's is left for a later
     * dlerror() to hand to the program's free. */
    (void)dlerror();
    (void)dlerror();
    if (m == NULL || m == (void *)__libc_malloc || f == NULL || f == (void *)__libc_free)
        return 0;
    /* Another arcoll preload next (libarcoll_heap.so ahead of the shim): its
     * malloc is never called, since this one comes first. Unless it found a
     * program's allocator behind it (then it forwards everything there, and
     * so does this one through it), glibc stays the next. */
    if (ours != NULL && dladdr(m, &dm) != 0 && dladdr(ours, &dours) != 0 &&
        dm.dli_fbase == dours.dli_fbase && ((int (*)(size_t *))ours)(NULL) != PRE_WHY_FOREIGN)
        return 0;
    pre_next.malloc = (void *(*)(size_t))m;
    pre_next.free = (void (*)(void *))f;
    if (c != NULL)
        pre_next.calloc = (void *(*)(size_t, size_t))c;
    if (r != NULL)
        pre_next.realloc = (void *(*)(void *, size_t))r;
    if (a != NULL)
        pre_next.memalign = (void *(*)(size_t, size_t))a;
    pre_next.usable = (size_t(*)(void *))u;
    return 1;
}

/* ARCOLL_HEAP (on, off, auto: on in a process its launcher gave a local
 * rank) and ARCOLL_HEAP_MIN, read once. Bad values count as the default;
 * the shim reports them (preload_heap_state). */
static int pre_decide(void)
{
    const char *v = getenv("ARCOLL_HEAP"), *m = getenv("ARCOLL_HEAP_MIN");
    size_t min = PRE_DEF_MIN;
    pre_why_t why = PRE_WHY_ON;
    int mode = PRE_HEAP;

    if (pre_inside)
        return PRE_NEXT; /* a call from within the decision below */
    pre_inside = 1;
    if (v == NULL || *v == '\0')
        v = PRE_DEF_MODE;
    if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0) {
        mode = PRE_NEXT;
        why = PRE_WHY_OFF;
    } else if (strcmp(v, "on") != 0 && strcmp(v, "1") != 0) {
        if (strcmp(v, "auto") != 0)
            why = PRE_WHY_BAD;
        if (heap_launcher_rank() < 0) {
            mode = PRE_NEXT;
            why = why == PRE_WHY_BAD ? PRE_WHY_BAD : PRE_WHY_NOT_RANK;
        }
    }
    if (m != NULL && (core_config_parse_size(m, &min) != 0 || min > PRE_DEF_HUGE)) {
        min = PRE_DEF_MIN;
        why = PRE_WHY_BAD;
    }
    if (pre_foreign()) {
        mode = PRE_NEXT;
        why = PRE_WHY_FOREIGN;
    }
    pre_inside = 0;
    pre_min = min;
    pre_why = why;
    __atomic_store_n(&pre_mode, mode, __ATOMIC_RELEASE);
    return mode;
}

static inline int pre_mode_get(void)
{
    int m = __atomic_load_n(&pre_mode, __ATOMIC_ACQUIRE);

    return m != PRE_UNDECIDED ? m : pre_decide();
}

/* This library's own malloc, bound locally (malloc itself may resolve to
 * whichever definition comes first). */
extern __typeof(malloc) pre_malloc_self
    __attribute__((alias("malloc"), visibility("hidden"), copy(malloc)));

int preload_heap_state(size_t *min)
{
    pre_mode_get();
    if (min != NULL)
        *min = pre_min;
    if (pre_why == PRE_WHY_ON && dlsym(RTLD_DEFAULT, "malloc") != (void *)pre_malloc_self)
        return PRE_WHY_SHADOWED;
    return (int)pre_why;
}

/* From the heap if it may and can; NULL otherwise (the caller passes on). */
static void *pre_heap(size_t align, size_t n, int zero)
{
    void *p;

    if (pre_mode_get() != PRE_HEAP || pre_inside || n < pre_min || n >= pre_huge_limit())
        return NULL;
    pre_inside = 1;
    p = align != 0 ? arcoll_heap_aligned_alloc(align, n)
        : zero     ? arcoll_heap_calloc(1, n)
                   : arcoll_heap_malloc(n);
    pre_inside = 0;
    return p;
}

/* A heap block: ours in any mode (a program may also free what it got from
 * arcoll_heap_malloc). */
static int pre_ours(void *p)
{
    return arcoll_heap_contains(p);
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

    return p != NULL ? p : pre_next.malloc(n);
}

void free(void *p)
{
    if (p == NULL)
        return;
    pre_mode_get();
    if (pre_ours(p))
        pre_heap_free(p);
    else
        pre_next.free(p);
}

void *calloc(size_t n, size_t size)
{
    void *p;

    if (size != 0 && n > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    p = pre_heap(0, n * size, 1);
    return p != NULL ? p : pre_next.calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    void *q;
    size_t old;

    if (p == NULL)
        return malloc(n);
    pre_mode_get();
    if (!pre_ours(p))
        return pre_next.realloc(p, n); /* the next allocator's block stays its own */
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
    /* Too large for the heap now: move it to the next allocator's memory. */
    q = pre_next.malloc(n);
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

    return p != NULL ? p : pre_next.memalign(align, n);
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
    static size_t (*glibc)(void *);

    if (p == NULL)
        return 0;
    pre_mode_get();
    if (pre_ours(p))
        return arcoll_heap_usable_size(p);
    if (pre_next.usable != NULL)
        return pre_next.usable(p); /* the program's allocator */
    if (glibc == NULL) {           /* glibc's own (no __libc_ form), not a preload's */
        void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
        if (libc != NULL)
            glibc = (size_t(*)(void *))dlsym(libc, "malloc_usable_size");
    }
    return glibc != NULL ? glibc(p) : 0;
}
