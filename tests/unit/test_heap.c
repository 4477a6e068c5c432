/* Unit tests of the node heap's allocator side (src/mem/heap.c): the API,
 * many threads at once, exhaustion, fork, and the reservation when its range
 * is taken. The process's heap is 64 MiB at slot 0 of a reservation at
 * HEAP_TEST_BASE (set in main, before the first allocation); the cases that
 * need another layout run this binary again (run_self). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "arcoll.h"
#include "mem/heap.h"
#include "mem/region.h"

#define HEAP_TEST_BASE 0x300000000000ULL
#define HEAP_TEST_SIZE ((size_t)64 << 20)

static char self[4096]; /* this binary (readlink: valgrind answers for its client) */

/* Run this binary with argv[1] = mode and the given settings; its exit status. */
static int run_self(const char *mode, const char *size, const char *slot)
{
    pid_t pid = fork();
    int st;

    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("ARCOLL_HEAP_SIZE", size, 1);
        if (slot != NULL)
            setenv("ARCOLL_HEAP_SLOT", slot, 1);
        else
            unsetenv("ARCOLL_HEAP_SLOT");
        execl(self, "test_heap", mode, (char *)NULL);
        _exit(127);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void test_api(void **state)
{
    heap_layout_t l;
    char *p, *q;
    int stack;

    (void)state;
    p = arcoll_heap_malloc(100);
    assert_non_null(p);
    assert_int_equal(heap_layout(&l), ARCOLL_OK);
    /* Slot 0 of the reservation: the address every local rank would see. */
    assert_ptr_equal(l.base, (char *)HEAP_TEST_BASE);
    assert_int_equal(l.slot, 0);
    assert_true(p >= l.base && p < l.base + l.slot_len);
    assert_true(arcoll_heap_contains(p));
    assert_false(arcoll_heap_contains(&stack));
    assert_true(arcoll_heap_usable_size(p) >= 100);
    assert_int_equal(arcoll_heap_usable_size(&stack), 0);
    memset(p, 0x5a, 100);
    q = arcoll_heap_realloc(p, 100000);
    assert_non_null(q);
    for (int i = 0; i < 100; i++)
        assert_int_equal((unsigned char)q[i], 0x5a);
    arcoll_heap_free(q);
    p = arcoll_heap_calloc(1000, 7);
    assert_non_null(p);
    for (int i = 0; i < 7000; i++)
        assert_int_equal(p[i], 0);
    arcoll_heap_free(p);
    p = arcoll_heap_aligned_alloc(4096, 10);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 4096, 0);
    arcoll_heap_free(p);
    errno = 0;
    assert_null(arcoll_heap_aligned_alloc(3, 10));
    assert_int_equal(errno, EINVAL);
    errno = 0;
    assert_null(arcoll_heap_calloc(SIZE_MAX / 2, 4));
    assert_int_equal(errno, ENOMEM);
    arcoll_heap_free(NULL);
    arcoll_heap_free(&stack); /* not ours: ignored, no crash */
    assert_null(arcoll_heap_realloc(&stack, 8));
    /* Not shared before arcoll_init: no same-address region yet. */
    assert_int_equal(heap_region_find(l.base, 1), 0);
}

/* Fill until the heap says no: NULL with ENOMEM, never a crash; and all of
 * it usable again once freed. */
static void test_exhaustion(void **state)
{
    enum { N = 256 };
    void *blk[N];
    int n = 0, again = 0;

    (void)state;
    errno = 0;
    while (n < N && (blk[n] = arcoll_heap_malloc((size_t)1 << 20)) != NULL) {
        memset(blk[n], n, (size_t)1 << 20);
        n++;
    }
    assert_true(n < N);
    assert_true(n >= 16); /* most of 64 MiB */
    assert_int_equal(errno, ENOMEM);
    errno = 0;
    assert_null(arcoll_heap_malloc(HEAP_TEST_SIZE * 2)); /* huge: no fallback in the API */
    assert_int_equal(errno, ENOMEM);
    for (int i = 0; i < n; i++) {
        assert_int_equal(((unsigned char *)blk[i])[(size_t)1 << 19], (unsigned char)i);
        arcoll_heap_free(blk[i]);
    }
    while (again < n && (blk[again] = arcoll_heap_malloc((size_t)1 << 20)) != NULL)
        again++;
    assert_int_equal(again, n);
    for (int i = 0; i < again; i++)
        arcoll_heap_free(blk[i]);
}

#define THREADS 8
#define OPS     100000
#define LIVE    64

typedef struct worker {
    int id;
    int bad;
} worker_t;

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Each live block holds its size and a byte derived from (thread, serial):
 * a block handed out twice, or written by another thread, shows. */
static void *worker_run(void *arg)
{
    worker_t *w = arg;
    unsigned char *blk[LIVE] = {0};
    size_t len[LIVE] = {0};
    unsigned char tag[LIVE] = {0};
    uint64_t r = 0x9e3779b97f4a7c15ULL * (uint64_t)(w->id + 1);

    for (int op = 0; op < OPS; op++) {
        int k = (int)(next_rand(&r) % LIVE);
        size_t n =
            next_rand(&r) % 100 == 0 ? 65536 + next_rand(&r) % 200000 : 1 + next_rand(&r) % 2048;
        if (blk[k] != NULL) {
            for (size_t i = 0; i < len[k]; i += 61)
                if (blk[k][i] != tag[k])
                    w->bad++;
            if (op % 7 == 0) {
                unsigned char *q = arcoll_heap_realloc(blk[k], n);
                if (q == NULL) {
                    w->bad++;
                    continue;
                }
                for (size_t i = 0; i < len[k] && i < n; i += 61)
                    if (q[i] != tag[k])
                        w->bad++;
                blk[k] = q;
                len[k] = n;
                memset(q, tag[k], n);
                continue;
            }
            arcoll_heap_free(blk[k]);
        }
        blk[k] = arcoll_heap_malloc(n);
        if (blk[k] == NULL) {
            w->bad++;
            continue;
        }
        len[k] = n;
        tag[k] = (unsigned char)(w->id * 31 + op);
        memset(blk[k], tag[k], n);
    }
    for (int k = 0; k < LIVE; k++)
        arcoll_heap_free(blk[k]);
    return NULL;
}

static void test_threads(void **state)
{
    pthread_t th[THREADS];
    worker_t w[THREADS];

    (void)state;
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker_t){.id = i};
        assert_int_equal(pthread_create(&th[i], NULL, worker_run, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(w[i].bad, 0);
    }
}

/* A child after fork has a private copy of the heap as it was at fork: what
 * either writes or allocates afterwards is invisible to the other (the
 * parent writes at once, while the child's copy would still be in the
 * making if the child made it), and both go on allocating. */
static void test_fork(void **state)
{
    unsigned char *p = arcoll_heap_malloc(1 << 16), *q;
    pid_t pid;
    int st;

    (void)state;
    assert_non_null(p);
    memset(p, 0x11, 1 << 16);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int bad;
        usleep(100000);
        bad = p[100] != 0x11 || p[60000] != 0x11;
        memset(p, 0xee, 1 << 16);
        for (int i = 0; i < 1000; i++) {
            unsigned char *c = arcoll_heap_malloc(4096);
            bad |= c == NULL || !arcoll_heap_contains(c);
            if (c != NULL)
                memset(c, 0xee, 4096);
            if (i % 2)
                arcoll_heap_free(c);
        }
        _exit(bad);
    }
    memset(p, 0x77, 1 << 16);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    for (int i = 0; i < 1 << 16; i++)
        if (p[i] != 0x77)
            fail_msg("the child's write reached the parent's heap at byte %d", i);
    q = arcoll_heap_malloc(4096);
    assert_non_null(q);
    memset(q, 0x22, 4096);
    assert_int_equal(p[0], 0x77);
    arcoll_heap_free(q);
    arcoll_heap_free(p);
}

/* The range taken by something else: the heap works, private. */
static void test_taken(void **state)
{
    (void)state;
    assert_int_equal(run_self("taken", "64M", "0"), 0);
}

/* No local rank from any launcher: private. */
static void test_no_slot(void **state)
{
    (void)state;
    assert_int_equal(run_self("noslot", "64M", NULL), 0);
}

static int mode_private(int taken)
{
    heap_layout_t l;
    void *p;

    if (taken && mmap((void *)(HEAP_TEST_BASE + (HEAP_TEST_SIZE * 3)), 4096, PROT_READ,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
        return 2;
    p = arcoll_heap_malloc(1000);
    if (p == NULL || heap_layout(&l) != ARCOLL_OK)
        return 3;
    if (l.base != NULL || l.slot != -1 || !arcoll_heap_contains(p))
        return 4;
    arcoll_heap_free(p);
    return 0;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api),     cmocka_unit_test(test_exhaustion),
        cmocka_unit_test(test_threads), cmocka_unit_test(test_fork),
        cmocka_unit_test(test_taken),   cmocka_unit_test(test_no_slot),
    };
    char base[32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

    if (n <= 0)
        return 2;
    self[n] = '\0';
    snprintf(base, sizeof(base), "%#llx", HEAP_TEST_BASE);
    setenv("ARCOLL_HEAP_BASE", base, 1);
    setenv("ARCOLL_HEAP_SLOTS", "4", 1);
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    unsetenv("SLURM_LOCALID");
    unsetenv("MPI_LOCALRANKID");
    unsetenv("PALS_LOCAL_RANKID");
    if (argc > 1)
        return mode_private(strcmp(argv[1], "taken") == 0);
    setenv("ARCOLL_HEAP_SIZE", "64M", 1);
    setenv("ARCOLL_HEAP_SLOT", "0", 1);
    return cmocka_run_group_tests_name("heap", tests, NULL, NULL);
}
