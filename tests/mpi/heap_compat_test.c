/*
 * An ordinary MPI program that checks the node heap's malloc carried by the
 * PMPI shim (src/preload/heap_preload.c, docs/heap.md) against what real
 * programs do with their allocator:
 *
 *   mpirun -np 2 env LD_PRELOAD=libarcoll_mpi.so ARCOLL_HEAP_SIZE=64m heap_compat_test
 *
 *   - blocks made before a late MPI_Init, used by collectives after it;
 *   - 4 threads allocating, resizing and freeing at once (10^5 operations);
 *   - fork: the child sees its parent's blocks as they were, not the parent's
 *     later writes, and allocates on its own; a fork while threads allocate;
 *   - posix_memalign, aligned_alloc, memalign, valloc, pvalloc,
 *     malloc_usable_size, realloc to 0, to 64 MiB, past ARCOLL_HEAP_HUGE and
 *     back, calloc (zeroed even on reused memory; overflow), a block larger
 *     than the heap, the heap exhausted by 1 MiB blocks;
 *   - alltoall and allgather of 64 KiB per peer on malloc'd buffers.
 *
 * Placement: a fresh block of 1 KiB or more (below ARCOLL_HEAP_HUGE) must be
 * in this process's heap slot (arcoll_heap_contains), a smaller or a huge one
 * not. With HEAP_COMPAT_EXPECT=off no block may be in the heap (ARCOLL_HEAP=off,
 * or a program that brings its own malloc). Built with -DHEAP_COMPAT_JEMALLOC
 * and -ljemalloc, it also proves by jemalloc's own counters that jemalloc
 * served a 1 MiB malloc. Every byte written is checked.
 * Last line on rank 0: "heap_compat: P passed, F failed" (all ranks' counts);
 * exit 1 on any failure.
 */
#include <errno.h>
#include <malloc.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arcoll.h"
#include "tl.h"

#define KiB       ((size_t)1 << 10)
#define MiB       ((size_t)1 << 20)
#define HEAP_MIN  KiB /* the shim's ARCOLL_HEAP_MIN default */
#define PRE_MAXR  32  /* ranks the buffers made before MPI_Init can serve */
#define PRE_BLK   (4 * KiB)
#define PRE_SMALL 8 /* PRE_MAXR x 8 = 256 bytes: below HEAP_MIN */

static int wrank = -1, wsize;
static int expect_heap; /* 1: fresh blocks of HEAP_MIN or more are in the heap */
static size_t heap_size, heap_huge;
static char prefix[32] = "rank ?";
static tl_tally_t tally = {prefix, 0, 0};

/* ARCOLL_* sizes as the library reads them (k, m, g suffixes). */
static size_t env_size(const char *name, size_t def)
{
    const char *v = getenv(name);
    char *end;
    unsigned long long n;

    if (v == NULL || *v == '\0')
        return def;
    n = strtoull(v, &end, 0);
    switch (*end) {
    case 'k':
    case 'K': n <<= 10; break;
    case 'm':
    case 'M': n <<= 20; break;
    case 'g':
    case 'G': n <<= 30; break;
    default: break;
    }
    return (size_t)n;
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* 1 .. 64 KiB, log-uniform: many small blocks, some large. */
static size_t rnd_size(uint64_t *s)
{
    return 1 + (size_t)(rnd(s) % ((uint64_t)1 << (rnd(s) % 17)));
}

static int filled(const void *p, size_t n, unsigned char c)
{
    const unsigned char *b = p;
    unsigned char bad = 0;

    for (size_t i = 0; i < n; i++)
        bad |= (unsigned char)(b[i] ^ c);
    return bad == 0;
}

/* Where p must be: in the heap if the heap is expected and the block is one
 * it serves (in_heap), else anywhere but the heap. */
static void placed(const void *p, int in_heap, const char *what)
{
    int want = expect_heap && in_heap;

    tl_expect(&tally, p != NULL && arcoll_heap_contains(p) == want, "%s is %sin the node heap",
              what, want ? "" : "not ");
}

/* ---- blocks made before MPI_Init ---- */

static struct {
    unsigned char *a2a_s, *a2a_r, *ag_s, *ag_r; /* PRE_BLK per peer: heap */
    unsigned char *sm_s, *sm_r;                 /* PRE_SMALL per peer: glibc */
    unsigned char *keep, *grow;                 /* freed / resized after MPI_Init */
    int envrank;                                /* the launcher's rank, or -1 */
} pre;

static int env_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};

    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        if (getenv(vars[i]) != NULL)
            return atoi(getenv(vars[i]));
    return -1;
}

/* Before MPI_Init: the send buffers get this rank's pattern (the launcher's
 * rank, which MPI_Init must confirm). */
static void pre_init_alloc(void)
{
    pre.envrank = env_rank();
    pre.a2a_s = malloc(PRE_MAXR * PRE_BLK);
    pre.a2a_r = calloc(PRE_MAXR, PRE_BLK);
    pre.ag_s = malloc(PRE_BLK);
    pre.ag_r = malloc(PRE_MAXR * PRE_BLK);
    pre.sm_s = malloc(PRE_MAXR * PRE_SMALL);
    pre.sm_r = malloc(PRE_MAXR * PRE_SMALL);
    pre.keep = malloc(100 * KiB);
    pre.grow = malloc(8 * KiB);
    if (!pre.a2a_s || !pre.a2a_r || !pre.ag_s || !pre.ag_r || !pre.sm_s || !pre.sm_r || !pre.keep ||
        !pre.grow) {
        fprintf(stderr, "heap_compat: malloc before MPI_Init failed\n");
        exit(1);
    }
    if (pre.envrank >= 0) {
        tl_fill_blocks(pre.a2a_s, PRE_BLK, PRE_MAXR, 1, pre.envrank);
        tl_fill(pre.ag_s, PRE_BLK, 2, pre.envrank, TL_ANY);
        tl_fill_blocks(pre.sm_s, PRE_SMALL, PRE_MAXR, 3, pre.envrank);
    }
    memset(pre.ag_r, 0xee, PRE_MAXR * PRE_BLK);
    memset(pre.sm_r, 0xee, PRE_MAXR * PRE_SMALL);
    memset(pre.keep, 0x5a, 100 * KiB);
    memset(pre.grow, 0x6b, 8 * KiB);
}

static void pre_init_use(void)
{
    size_t bad = 0;
    unsigned char *q;

    placed(pre.a2a_s, 1, "a 128 KiB block from before MPI_Init");
    placed(pre.a2a_r, 1, "a 128 KiB calloc'd block from before MPI_Init");
    placed(pre.ag_s, 1, "a 4 KiB block from before MPI_Init");
    placed(pre.sm_s, 0, "a 256-byte block from before MPI_Init");
    placed(pre.sm_r, 0, "a 256-byte block from before MPI_Init");
    tl_expect(&tally, pre.envrank == wrank, "the launcher's rank %d is MPI's %d", pre.envrank,
              wrank);
    if (pre.envrank != wrank || wsize > PRE_MAXR) {
        /* Refill for MPI's rank: the calls below still run. */
        tl_fill_blocks(pre.a2a_s, PRE_BLK, PRE_MAXR, 1, wrank);
        tl_fill(pre.ag_s, PRE_BLK, 2, wrank, TL_ANY);
        tl_fill_blocks(pre.sm_s, PRE_SMALL, PRE_MAXR, 3, wrank);
    }
    if (wsize > PRE_MAXR) {
        printf("heap_compat: %d ranks: the collectives on blocks from before MPI_Init skipped\n",
               wsize);
        return;
    }
    /* MPI_Init left them alone. */
    for (int j = 0; j < PRE_MAXR; j++)
        bad += tl_check(pre.a2a_s + (size_t)j * PRE_BLK, PRE_BLK, 1, wrank, j, NULL);
    tl_expect(&tally,
              bad == 0 && filled(pre.a2a_r, PRE_MAXR * PRE_BLK, 0) &&
                  filled(pre.keep, 100 * KiB, 0x5a) && filled(pre.grow, 8 * KiB, 0x6b),
              "blocks from before MPI_Init unchanged by it (%zu bytes wrong)", bad);
    MPI_Alltoall(pre.a2a_s, PRE_BLK, MPI_BYTE, pre.a2a_r, PRE_BLK, MPI_BYTE, MPI_COMM_WORLD);
    bad = tl_check_blocks(pre.a2a_r, PRE_BLK, wsize, 1, wrank, NULL);
    tl_expect(&tally, bad == 0, "alltoall on blocks from before MPI_Init: %zu bytes wrong", bad);
    MPI_Allgather(pre.ag_s, PRE_BLK, MPI_BYTE, pre.ag_r, PRE_BLK, MPI_BYTE, MPI_COMM_WORLD);
    bad = tl_check_blocks(pre.ag_r, PRE_BLK, wsize, 2, TL_ANY, NULL);
    tl_expect(&tally,
              bad == 0 && filled(pre.ag_r + wsize * PRE_BLK, (PRE_MAXR - wsize) * PRE_BLK, 0xee),
              "allgather on blocks from before MPI_Init: %zu bytes wrong", bad);
    MPI_Alltoall(pre.sm_s, PRE_SMALL, MPI_BYTE, pre.sm_r, PRE_SMALL, MPI_BYTE, MPI_COMM_WORLD);
    bad = tl_check_blocks(pre.sm_r, PRE_SMALL, wsize, 3, wrank, NULL);
    tl_expect(&tally, bad == 0, "alltoall on small blocks from before MPI_Init: %zu bytes wrong",
              bad);
    /* Resized and freed after MPI_Init: the same allocator takes them back. */
    q = realloc(pre.grow, 512 * KiB);
    tl_expect(&tally, q != NULL && filled(q, 8 * KiB, 0x6b),
              "a block from before MPI_Init grown to 512 KiB after it keeps its contents");
    placed(q, 1, "a block from before MPI_Init grown to 512 KiB");
    free(q);
    free(pre.keep);
    free(pre.a2a_s);
    free(pre.a2a_r);
    free(pre.ag_s);
    free(pre.ag_r);
    free(pre.sm_s);
    free(pre.sm_r);
}

/* ---- threads ---- */

#define T_THREADS 4
#define T_OPS     25000 /* per thread: 10^5 in all */
#define T_SLOTS   64

struct worker {
    pthread_t tid;
    int id;
    long ops;                      /* T_OPS, or until stop is set (0) */
    long nulls, wrong, misplaced;  /* failures */
    long fresh, in_heap, realloc_; /* counts */
};

static int stop; /* test_fork_busy's threads: end now */

/* One thread's random malloc/calloc/realloc/free on T_SLOTS blocks, each
 * filled with one byte value and checked before it is resized or freed. */
static void *worker(void *arg)
{
    struct worker *w = arg;
    unsigned char *blk[T_SLOTS] = {0}, tag[T_SLOTS] = {0};
    size_t len[T_SLOTS] = {0};
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(w->id + 1) + (uint64_t)wrank;

    for (long i = 0; w->ops > 0 ? i < w->ops : !__atomic_load_n(&stop, __ATOMIC_RELAXED); i++) {
        int k = (int)(rnd(&s) % T_SLOTS);
        size_t n = rnd_size(&s);
        unsigned char c = (unsigned char)(i * 7 + w->id), *q;

        if (blk[k] == NULL) {
            int zero = rnd(&s) % 4 == 0;

            q = zero ? calloc(1, n) : malloc(n);
            if (q == NULL) {
                w->nulls++;
                continue;
            }
            if (zero && !filled(q, n, 0))
                w->wrong++;
            w->fresh++;
            w->in_heap += arcoll_heap_contains(q);
            if (arcoll_heap_contains(q) != (expect_heap && n >= HEAP_MIN))
                w->misplaced++;
        } else {
            if (!filled(blk[k], len[k], tag[k]))
                w->wrong++;
            if (rnd(&s) % 2 == 0) {
                free(blk[k]);
                blk[k] = NULL;
                continue;
            }
            q = realloc(blk[k], n);
            if (q == NULL) {
                w->nulls++;
                continue;
            }
            w->realloc_++;
            if (!filled(q, len[k] < n ? len[k] : n, tag[k]))
                w->wrong++;
        }
        memset(q, c, n);
        blk[k] = q;
        len[k] = n;
        tag[k] = c;
    }
    for (int k = 0; k < T_SLOTS; k++) {
        if (blk[k] != NULL && !filled(blk[k], len[k], tag[k]))
            w->wrong++;
        free(blk[k]);
    }
    return NULL;
}

static void report_workers(struct worker *w, int n, const char *what)
{
    long nulls = 0, wrong = 0, misplaced = 0, fresh = 0, in_heap = 0, re = 0;

    for (int i = 0; i < n; i++) {
        nulls += w[i].nulls;
        wrong += w[i].wrong;
        misplaced += w[i].misplaced;
        fresh += w[i].fresh;
        in_heap += w[i].in_heap;
        re += w[i].realloc_;
    }
    tl_expect(&tally, nulls == 0, "%s: %ld allocations failed", what, nulls);
    tl_expect(&tally, wrong == 0, "%s: %ld blocks with wrong contents", what, wrong);
    tl_expect(&tally, misplaced == 0 && (in_heap > 0) == expect_heap,
              "%s: %ld of %ld fresh blocks misplaced (%ld in the node heap)", what, misplaced,
              fresh, in_heap);
    tl_expect(&tally, re > 0, "%s: some reallocs (%ld)", what, re);
}

static void test_threads(void)
{
    struct worker w[T_THREADS];
    int n = 0;

    memset(w, 0, sizeof(w));
    for (; n < T_THREADS; n++) {
        w[n].id = n;
        w[n].ops = T_OPS;
        if (pthread_create(&w[n].tid, NULL, worker, &w[n]) != 0)
            break;
    }
    for (int i = 0; i < n; i++)
        pthread_join(w[i].tid, NULL);
    tl_expect(&tally, n == T_THREADS, "%d of %d threads started", n, T_THREADS);
    report_workers(w, n, "4 threads x 25000 operations");
}

/* ---- fork ---- */

/* The child's findings, as bits of its exit status. */
enum { CH_OLD_BIG = 1, CH_OLD_SMALL = 2, CH_ALLOC = 4, CH_CONTENTS = 8, CH_PLACE = 16 };

static int child_allocates(void)
{
    int bad = 0;

    for (size_t n = 16; n <= 4 * MiB; n *= 4) {
        unsigned char *p = malloc(n), *q;

        if (p == NULL) {
            bad |= CH_ALLOC;
            continue;
        }
        if (arcoll_heap_contains(p) != (expect_heap && n >= HEAP_MIN))
            bad |= CH_PLACE;
        memset(p, 0x77, n);
        q = realloc(p, 2 * n);
        if (q == NULL) {
            free(p);
            bad |= CH_ALLOC;
            continue;
        }
        if (!filled(q, n, 0x77))
            bad |= CH_CONTENTS;
        free(q);
    }
    return bad;
}

static void test_fork(void)
{
    size_t n = 256 * KiB;
    unsigned char *big = malloc(n), *small = malloc(100), *p;
    int go[2], status = -1, bad;
    pid_t pid;
    char b = 0;

    if (big == NULL || small == NULL || pipe(go) != 0) {
        tl_expect(&tally, 0, "fork: set-up");
        return;
    }
    placed(big, 1, "a 256 KiB block before fork");
    memset(big, 0xa1, n);
    memset(small, 0xb2, 100);
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        alarm(10); /* a child that hangs fails */
        close(go[1]);
        /* Only after the parent has overwritten its blocks: a child that saw
         * its parent's slot (shared memory) would see the new bytes. */
        bad = read(go[0], &b, 1) == 1 ? 0 : CH_OLD_BIG;
        if (!filled(big, n, 0xa1))
            bad |= CH_OLD_BIG;
        if (!filled(small, 100, 0xb2))
            bad |= CH_OLD_SMALL;
        bad |= child_allocates();
        memset(big, 0xc3, n);                         /* the parent must not see this */
        __asm__ volatile("" : : "r"(big) : "memory"); /* a store free() makes dead: kept */
        free(big);
        free(small);
        _exit(bad);
    }
    close(go[0]);
    memset(big, 0xd4, n);
    memset(small, 0xe5, 100);
    if (write(go[1], "x", 1) != 1)
        tl_expect(&tally, 0, "fork: pipe write");
    close(go[1]);
    tl_expect(&tally, pid > 0 && waitpid(pid, &status, 0) == pid,
              "fork: the child started and ended");
    bad = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    tl_expect(&tally, bad == 0, "fork: child exit %d (signal %d): %s%s%s%s%s", bad,
              WIFSIGNALED(status) ? WTERMSIG(status) : 0,
              bad > 0 && (bad & CH_OLD_BIG) ? "saw the parent's later writes to its heap block; "
                                            : "",
              bad > 0 && (bad & CH_OLD_SMALL) ? "the small block changed; " : "",
              bad > 0 && (bad & CH_ALLOC) ? "an allocation failed; " : "",
              bad > 0 && (bad & CH_CONTENTS) ? "a realloc lost contents; " : "",
              bad > 0 && (bad & CH_PLACE) ? "its fresh blocks misplaced" : "");
    tl_expect(&tally, filled(big, n, 0xd4) && filled(small, 100, 0xe5),
              "fork: the parent's blocks unchanged by the child");
    free(big);
    free(small);
    p = malloc(MiB);
    placed(p, 1, "a 1 MiB block after fork");
    free(p);
}

/* fork while 2 threads allocate (as system() in a threaded program): the
 * child must find the allocator usable (no lock left held), within 10 s. */
static void test_fork_busy(void)
{
    struct worker w[2];
    int forks = 20, good = 0;

    memset(w, 0, sizeof(w));
    for (int i = 0; i < 2; i++) {
        w[i].id = 10 + i;
        if (pthread_create(&w[i].tid, NULL, worker, &w[i]) != 0) {
            tl_expect(&tally, 0, "fork while threads allocate: pthread_create");
            __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
            for (int j = 0; j < i; j++)
                pthread_join(w[j].tid, NULL);
            return;
        }
    }
    for (int i = 0; i < forks; i++) {
        int status = -1;
        pid_t pid = fork();

        if (pid == 0) {
            alarm(10);
            _exit(child_allocates());
        }
        if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
            WEXITSTATUS(status) == 0)
            good++;
        else if (good == i) /* the first failure only */
            fprintf(stderr, "[%s] fork %d while threads allocate: status 0x%x\n", prefix, i,
                    status);
        usleep(2000);
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 2; i++)
        pthread_join(w[i].tid, NULL);
    tl_expect(&tally, good == forks, "fork while 2 threads allocate: %d of %d children right", good,
              forks);
    report_workers(w, 2, "2 threads during forks");
}

/* ---- the entry points one by one ---- */

/* One aligned block of each entry point: aligned, writable, where it must be. */
static void *aligned_one(int how, size_t a, size_t n, int *bad)
{
    /* aligned_alloc's size: a multiple of the alignment (C11), the request. */
    size_t req = how == 1 ? (n + a - 1) / a * a : n;
    void *p = NULL;

    if (how == 0 && posix_memalign(&p, a, n) != 0)
        p = NULL;
    else if (how == 1)
        p = aligned_alloc(a, req);
    else if (how == 2)
        p = memalign(a, n);
    if (p == NULL || (uintptr_t)p % a != 0 ||
        arcoll_heap_contains(p) != (expect_heap && req >= HEAP_MIN))
        (*bad)++;
    if (p != NULL)
        memset(p, 0x3c + how, n);
    return p;
}

static void test_aligned(void)
{
    static const size_t sizes[] = {100, 1000, 3000, 40000};
    enum { NA = 9, NS = sizeof(sizes) / sizeof(sizes[0]) };
    void *keep[3][NA][NS], *p;
    int bad = 0, wrong = 0;

    /* All kept until the end, so that each takes a place of its own (a block
     * freed and asked for again would come back where it was). */
    for (int how = 0; how < 3; how++)
        for (int i = 0; i < NA; i++)
            for (int j = 0; j < (int)NS; j++)
                keep[how][i][j] = aligned_one(how, (size_t)16 << i, sizes[j], &bad);
    for (int how = 0; how < 3; how++)
        for (int i = 0; i < NA; i++)
            for (int j = 0; j < (int)NS; j++) {
                p = keep[how][i][j];
                wrong += p != NULL && !filled(p, sizes[j], (unsigned char)(0x3c + how));
                free(p);
            }
    tl_expect(&tally, bad == 0 && wrong == 0,
              "posix_memalign, aligned_alloc, memalign: alignments 16..4096, 100 B..40 KiB: %d "
              "misaligned or misplaced, %d overwritten",
              bad, wrong);
    p = (void *)1;
    tl_expect(&tally, posix_memalign(&p, 24, 64) == EINVAL && p == (void *)1,
              "posix_memalign refuses alignment 24");
    p = aligned_alloc(64, 4096);
    tl_expect(&tally, p != NULL && (uintptr_t)p % 64 == 0, "aligned_alloc(64, 4096) aligned");
    placed(p, 1, "aligned_alloc(64, 4096)");
    if (p != NULL)
        memset(p, 1, 4096);
    free(p);
    p = aligned_alloc(4096, 64 * KiB);
    tl_expect(&tally, p != NULL && (uintptr_t)p % 4096 == 0, "aligned_alloc(4096, 64 KiB) aligned");
    placed(p, 1, "aligned_alloc(4096, 64 KiB)");
    free(p);
    p = memalign(256, 2000);
    tl_expect(&tally, p != NULL && (uintptr_t)p % 256 == 0, "memalign(256, 2000) aligned");
    placed(p, 1, "memalign(256, 2000)");
    if (p != NULL)
        memset(p, 2, 2000);
    free(p);
    p = memalign(32, 40);
    tl_expect(&tally, p != NULL && (uintptr_t)p % 32 == 0, "memalign(32, 40) aligned");
    placed(p, 0, "memalign(32, 40)");
    free(p);
    p = valloc(5000);
    tl_expect(&tally, p != NULL && (uintptr_t)p % 4096 == 0, "valloc(5000) page aligned");
    placed(p, 1, "valloc(5000)");
    if (p != NULL)
        memset(p, 3, 5000);
    free(p);
    p = valloc(10);
    tl_expect(&tally, p != NULL && (uintptr_t)p % 4096 == 0, "valloc(10) page aligned");
    placed(p, 0, "valloc(10)");
    free(p);
#ifndef HEAP_COMPAT_JEMALLOC
    /* pvalloc rounds up to whole pages: all of them usable. (jemalloc has no
     * pvalloc: a program linked with it gets glibc's, which its free cannot
     * take.) */
    p = pvalloc(3000);
    tl_expect(&tally, p != NULL && (uintptr_t)p % 4096 == 0 && malloc_usable_size(p) >= 4096,
              "pvalloc(3000) page aligned, a page usable");
    placed(p, 1, "pvalloc(3000)");
    if (p != NULL)
        memset(p, 4, 4096);
    free(p);
#endif
}

static void test_usable(void)
{
    static const size_t sizes[] = {1, 100, 1000, 1024, 5000, 100 * KiB, MiB};
    int bad = 0;

    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        unsigned char *p = malloc(sizes[i]);
        size_t u = malloc_usable_size(p);

        /* Every usable byte is the program's to write. */
        if (p == NULL || u < sizes[i] ||
            arcoll_heap_contains(p) != (expect_heap && sizes[i] >= HEAP_MIN)) {
            bad++;
        } else {
            memset(p, 0x42, u);
            if (!filled(p, u, 0x42))
                bad++;
        }
        free(p);
    }
    tl_expect(&tally, bad == 0, "malloc_usable_size >= the request, all of it writable: %d wrong",
              bad);
    tl_expect(&tally, malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) is 0");
}

static void test_realloc(void)
{
    unsigned char *p, *q;
    size_t big = 64 * MiB;

    /* realloc(p, 0): NULL (p freed) or a block free() takes (a crash fails). */
    p = malloc(8 * KiB);
    q = realloc(p, 0);
    free(q);
    p = malloc(10);
    q = realloc(p, 0);
    free(q);
    q = realloc(NULL, 4 * KiB);
    placed(q, 1, "realloc(NULL, 4 KiB)");
    free(q);
    p = malloc(0);
    free(p);
    /* Grown in steps to 64 MiB, then past the huge limit: out of the heap,
     * contents kept; shrunk back. */
    p = malloc(8 * KiB);
    placed(p, 1, "an 8 KiB block");
    if (p == NULL)
        return;
    memset(p, 0x11, 8 * KiB);
    q = realloc(p, 512 * KiB);
    tl_expect(&tally, q != NULL && filled(q, 8 * KiB, 0x11), "realloc 8 KiB -> 512 KiB keeps it");
    if (q == NULL)
        return;
    placed(q, 1, "a block grown to 512 KiB");
    memset(q, 0x22, 512 * KiB);
    p = q;
    q = realloc(p, big);
    tl_expect(&tally, q != NULL && filled(q, 512 * KiB, 0x22),
              "realloc 512 KiB -> 64 MiB keeps it");
    if (q == NULL)
        return;
    /* In the heap only if it fits there (not in a 64 MiB one with other blocks). */
    if (heap_size >= 4 * big)
        placed(q, 1, "a block grown to 64 MiB");
    tl_expect(&tally, malloc_usable_size(q) >= big, "malloc_usable_size of 64 MiB");
    memset(q, 0x33, big);
    p = q;
    q = realloc(p, heap_huge + 4096);
    tl_expect(&tally, q != NULL && filled(q, heap_huge + 4096 < big ? heap_huge + 4096 : big, 0x33),
              "realloc 64 MiB -> ARCOLL_HEAP_HUGE + 4 KiB keeps it");
    if (q == NULL)
        return;
    placed(q, 0, "a block grown past ARCOLL_HEAP_HUGE");
    q[heap_huge + 4095] = 0x44;
    p = q;
    q = realloc(p, 4 * KiB);
    tl_expect(&tally, q != NULL && filled(q, 4 * KiB, 0x33), "realloc huge -> 4 KiB keeps it");
    free(q);
    /* Where the heap could hold a huge block (ARCOLL_HEAP_HUGE well below
     * ARCOLL_HEAP_SIZE), it must still not: from malloc, or grown by realloc. */
    if (heap_size >= 4 * heap_huge) {
        p = malloc(heap_huge - 4096);
        placed(p, 1, "a block just below ARCOLL_HEAP_HUGE");
        free(p);
        p = malloc(heap_huge);
        placed(p, 0, "a block of ARCOLL_HEAP_HUGE bytes");
        free(p);
        p = malloc(heap_huge / 2);
        if (p != NULL)
            memset(p, 0x45, heap_huge / 2);
        q = realloc(p, heap_huge);
        tl_expect(&tally, q != NULL && filled(q, heap_huge / 2, 0x45),
                  "realloc ARCOLL_HEAP_HUGE / 2 -> ARCOLL_HEAP_HUGE keeps it");
        placed(q, 0, "a heap block grown to ARCOLL_HEAP_HUGE");
        free(q);
    }
    /* A heap block shrunk, and shrunk below ARCOLL_HEAP_MIN. */
    p = malloc(256 * KiB);
    if (p == NULL)
        return;
    memset(p, 0x55, 256 * KiB);
    q = realloc(p, 2 * KiB);
    tl_expect(&tally, q != NULL && filled(q, 2 * KiB, 0x55), "realloc 256 KiB -> 2 KiB keeps it");
    placed(q, 1, "a heap block shrunk to 2 KiB");
    p = q;
    q = realloc(p, 100);
    tl_expect(&tally, q != NULL && filled(q, 100, 0x55), "realloc 2 KiB -> 100 bytes keeps it");
    free(q);
    /* A small block grown large keeps working (it may stay where it was). */
    p = malloc(50);
    if (p == NULL)
        return;
    memset(p, 0x66, 50);
    q = realloc(p, MiB);
    tl_expect(&tally, q != NULL && filled(q, 50, 0x66), "realloc 50 bytes -> 1 MiB keeps it");
    if (q != NULL)
        memset(q, 0x67, MiB);
    free(q);
}

static void test_calloc(void)
{
    volatile size_t half = SIZE_MAX / 2 + 1, four = 4, one = 1;
    unsigned char *p;
    int bad = 0;

    /* Reused memory must come back zeroed: fill, free, calloc the same size. */
    for (size_t n = 4 * KiB; n <= 4 * MiB; n *= 4) {
        for (int round = 0; round < 3; round++) {
            p = malloc(n);
            if (p != NULL)
                memset(p, 0xff, n);
            free(p);
            p = calloc(n / 8, 8);
            if (p == NULL || !filled(p, n, 0) ||
                arcoll_heap_contains(p) != (expect_heap && n < heap_huge))
                bad++;
            free(p);
        }
    }
    p = calloc(10, 10);
    if (p == NULL || !filled(p, 100, 0) || arcoll_heap_contains(p))
        bad++;
    free(p);
    tl_expect(&tally, bad == 0, "calloc zeroes, even reused memory (4 KiB..4 MiB): %d wrong", bad);
    errno = 0;
    p = calloc(half, four);
    tl_expect(&tally, p == NULL && errno == ENOMEM, "calloc(SIZE_MAX / 2 + 1, 4) is NULL, ENOMEM");
    free(p);
    errno = 0;
    p = calloc(four, half);
    tl_expect(&tally, p == NULL && errno == ENOMEM, "calloc(4, SIZE_MAX / 2 + 1) is NULL, ENOMEM");
    free(p);
    p = calloc(0, one);
    free(p);
}

/* Blocks the heap cannot hold: one larger than it, then 1 MiB blocks until
 * it is full and 16 more. */
static void test_beyond(void)
{
    size_t n = heap_size + 36 * MiB, count = 0, outside = 0, wrong = 0;
    enum { MAXB = 4096 };
    static unsigned char *blk[MAXB];
    unsigned char *p;

    if (n < heap_huge && n <= 512 * MiB) {
        p = malloc(n);
        tl_expect(&tally, p != NULL, "malloc of the heap's size + 36 MiB (%zu MiB) succeeds",
                  n / MiB);
        placed(p, 0, "a block larger than the heap");
        if (p != NULL) {
            memset(p, 0x12, n);
            tl_expect(&tally, filled(p, n, 0x12), "a block larger than the heap holds its bytes");
        }
        free(p);
    } else if (wrank == 0) {
        printf("heap_compat: ARCOLL_HEAP_SIZE=%zu MiB: no block larger than the heap below "
               "ARCOLL_HEAP_HUGE (skipped)\n",
               heap_size / MiB);
    }
    if (heap_size > 256 * MiB) {
        if (wrank == 0)
            printf("heap_compat: ARCOLL_HEAP_SIZE=%zu MiB: exhaustion skipped (at most 256m)\n",
                   heap_size / MiB);
        return;
    }
    while (count < MAXB && outside < 16) {
        p = malloc(MiB);
        if (p == NULL)
            break;
        blk[count] = p;
        /* Its first and last bytes (not every page: up to 300 MiB per rank). */
        memset(p, (int)(count & 0xff), 64);
        memset(p + MiB - 64, (int)(count & 0xff), 64);
        count++;
        outside += !arcoll_heap_contains(p);
    }
    tl_expect(&tally, outside == 16,
              "1 MiB blocks past a full heap keep coming (%zu, %zu outside the heap)", count,
              outside);
    if (expect_heap)
        tl_expect(&tally, count - outside >= heap_size / MiB / 2,
                  "the heap (%zu MiB) held %zu of the 1 MiB blocks", heap_size / MiB,
                  count - outside);
    else
        tl_expect(&tally, count == 16, "no 1 MiB block in the heap (%zu)", count - outside);
    for (size_t i = 0; i < count; i++) {
        if (!filled(blk[i], 64, (unsigned char)i) ||
            !filled(blk[i] + MiB - 64, 64, (unsigned char)i))
            wrong++;
        free(blk[i]);
    }
    tl_expect(&tally, wrong == 0, "%zu of the 1 MiB blocks wrong", wrong);
    /* Freed heap memory is used again. */
    p = malloc(MiB);
    placed(p, 1, "a 1 MiB block after the heap was full and freed");
    free(p);
}

#ifdef HEAP_COMPAT_JEMALLOC
void *__libc_malloc(size_t n);
void __libc_free(void *p);
int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

/* jemalloc counts what it hands this thread: a 1 MiB malloc must show. */
static void test_jemalloc(void)
{
    uint64_t before = 0, after = 0;
    size_t len = sizeof(before);
    int rc;
    void *p;

    rc = mallctl("thread.allocated", &before, &len, NULL, 0);
    /* HEAP_COMPAT_GLIBC_BLOCK (the proof that this check can fail): the block
     * from glibc, as a malloc that bypassed the program's allocator would. */
    p = getenv("HEAP_COMPAT_GLIBC_BLOCK") ? __libc_malloc(MiB) : malloc(MiB);
    memset(p, 1, MiB);
    len = sizeof(after);
    rc |= mallctl("thread.allocated", &after, &len, NULL, 0);
    tl_expect(&tally, rc == 0 && after - before >= MiB,
              "jemalloc served a 1 MiB malloc (thread.allocated %llu -> %llu, mallctl %d)",
              (unsigned long long)before, (unsigned long long)after, rc);
    placed(p, 0, "jemalloc's 1 MiB block");
    if (getenv("HEAP_COMPAT_GLIBC_BLOCK"))
        __libc_free(p);
    else
        free(p);
}
#endif

/* ---- the collectives at the end ---- */

static void test_final_collectives(void)
{
    size_t blk = 64 * KiB, n = (size_t)wsize * blk, bad;
    unsigned char *s = malloc(n), *r = malloc(n), *gs = malloc(blk), *gr = malloc(n);

    placed(s, 1, "a malloc'd alltoall send buffer");
    placed(gr, 1, "a malloc'd allgather receive buffer");
    if (s == NULL || r == NULL || gs == NULL || gr == NULL)
        return;
    tl_fill_blocks(s, blk, wsize, 10, wrank);
    memset(r, 0xee, n);
    MPI_Alltoall(s, (int)blk, MPI_BYTE, r, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
    bad = tl_check_blocks(r, blk, wsize, 10, wrank, NULL);
    tl_expect(&tally, bad == 0, "alltoall 64 KiB per peer: %zu bytes wrong", bad);
    tl_fill(gs, blk, 11, wrank, TL_ANY);
    memset(gr, 0xee, n);
    MPI_Allgather(gs, (int)blk, MPI_BYTE, gr, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
    bad = tl_check_blocks(gr, blk, wsize, 11, TL_ANY, NULL);
    tl_expect(&tally, bad == 0, "allgather 64 KiB per peer: %zu bytes wrong", bad);
    free(s);
    free(r);
    free(gs);
    free(gr);
}

/* After fork: the parent still allocates and runs a collective. */
static void test_after_fork_collective(void)
{
    size_t blk = 8 * KiB, bad;
    unsigned char *s = malloc((size_t)wsize * blk), *r = malloc((size_t)wsize * blk);

    if (s == NULL || r == NULL) {
        tl_expect(&tally, 0, "malloc after fork");
        return;
    }
    tl_fill_blocks(s, blk, wsize, 12, wrank);
    MPI_Alltoall(s, (int)blk, MPI_BYTE, r, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
    bad = tl_check_blocks(r, blk, wsize, 12, wrank, NULL);
    tl_expect(&tally, bad == 0, "alltoall after fork: %zu bytes wrong", bad);
    free(s);
    free(r);
}

int main(int argc, char **argv)
{
    const char *e = getenv("HEAP_COMPAT_EXPECT");
    long mine[2], all[2] = {0, 0};
    tl_tally_t sum = {NULL, 0, 0};

    expect_heap = !(e != NULL && strcmp(e, "off") == 0);
    heap_size = env_size("ARCOLL_HEAP_SIZE", 1024 * MiB);
    heap_huge = env_size("ARCOLL_HEAP_HUGE", 256 * MiB);
    pre_init_alloc(); /* a late MPI_Init: the program allocated first */
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    snprintf(prefix, sizeof(prefix), "rank %d", wrank);
    if (wrank == 0)
        printf("heap_compat on %d ranks: blocks of %zu bytes or more expected %s the node heap "
               "(%zu MiB, huge from %zu MiB)\n",
               wsize, HEAP_MIN, expect_heap ? "in" : "outside", heap_size / MiB, heap_huge / MiB);
    pre_init_use();
#ifdef HEAP_COMPAT_JEMALLOC
    test_jemalloc();
#endif
    test_threads();
    test_fork();
    test_after_fork_collective();
    test_fork_busy();
    test_aligned();
    test_usable();
    test_realloc();
    test_calloc();
    test_beyond();
    test_final_collectives();
    mine[0] = tally.passed;
    mine[1] = tally.failed;
    MPI_Allreduce(mine, all, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    sum.passed = all[0];
    sum.failed = all[1];
    fflush(stdout);
    if (wrank == 0)
        tl_summary(&sum, stdout, "heap_compat");
    MPI_Finalize();
    return sum.failed != 0;
}
