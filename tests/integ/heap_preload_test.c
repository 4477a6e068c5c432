/*
 * libarcoll_heap.so's malloc & co (src/preload/heap_preload.c), run by
 * tests/integ/run.sh as
 *   LD_PRELOAD=libarcoll_heap.so ARCOLL_HEAP_SIZE=64m ARCOLL_HEAP_HUGE=1m heap_preload_test
 * Small requests land in the heap; huge ones, and any once the heap is full,
 * in glibc's memory; glibc's blocks (a fallback's, or one from __libc_malloc
 * as if allocated before the preload) are freed and resized by glibc; a forked
 * child allocates on its own. Prints "heap_preload_test: N passed, N failed".
 * Without the preload (the proof that it can fail) the heap checks fail.
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arcoll.h"

void *__libc_malloc(size_t n);

static int passed, failed;

#define CHECK(cond, what)                                                  \
    do {                                                                   \
        if (cond) {                                                        \
            passed++;                                                      \
        } else {                                                           \
            failed++;                                                      \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, what); \
        }                                                                  \
    } while (0)

static int filled(const unsigned char *p, size_t n, unsigned char c)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != c)
            return 0;
    return 1;
}

static void test_kinds(void)
{
    unsigned char *s = malloc(100), *h = malloc(2 << 20), *z = calloc(1000, 8), *l, *q;
    void *a = NULL;

    CHECK(s != NULL && arcoll_heap_contains(s), "a small malloc is in the heap");
    CHECK(h != NULL && !arcoll_heap_contains(h), "a huge malloc is not");
    CHECK(z != NULL && arcoll_heap_contains(z) && filled(z, 8000, 0), "calloc: heap, zeroed");
    if (s == NULL || h == NULL || z == NULL)
        return;
    memset(s, 0x5a, 100);
    memset(h, 0x6b, 2 << 20);
    CHECK(malloc_usable_size(s) >= 100 && malloc_usable_size(h) >= (2 << 20),
          "malloc_usable_size of both kinds");
    /* A heap block grown past the huge limit moves to glibc with its contents. */
    q = realloc(s, 3 << 20);
    CHECK(q != NULL && !arcoll_heap_contains(q) && filled(q, 100, 0x5a), "realloc heap -> glibc");
    free(q);
    q = realloc(h, 4 << 20);
    CHECK(q != NULL && filled(q, 2 << 20, 0x6b), "realloc of a glibc block");
    free(q);
    free(z);
    CHECK(posix_memalign(&a, 256, 1000) == 0 && (uintptr_t)a % 256 == 0 && arcoll_heap_contains(a),
          "posix_memalign");
    free(a);
    a = aligned_alloc(4096, 4096);
    CHECK(a != NULL && (uintptr_t)a % 4096 == 0 && arcoll_heap_contains(a), "aligned_alloc");
    free(a);
    a = memalign(64, 10);
    CHECK(a != NULL && (uintptr_t)a % 64 == 0, "memalign");
    free(a);
    a = valloc(10);
    CHECK(a != NULL && (uintptr_t)a % 4096 == 0, "valloc");
    free(a);
    CHECK(posix_memalign(&a, 3, 10) != 0, "posix_memalign refuses a bad alignment");
    /* As if allocated before the preload took over. */
    l = __libc_malloc(64);
    CHECK(l != NULL && !arcoll_heap_contains(l), "__libc_malloc is glibc's");
    l = realloc(l, 128);
    CHECK(l != NULL && !arcoll_heap_contains(l), "a glibc block stays glibc's on realloc");
    free(l);
    free(NULL);
}

/* Past 64 MiB the heap is full: malloc goes on, in glibc's memory. */
static void test_exhaustion(void)
{
    enum { N = 256, SZ = 512 << 10 };
    unsigned char *b[N];
    int in = 0, out = 0, null = 0;

    for (int i = 0; i < N; i++) {
        b[i] = malloc(SZ);
        if (b[i] == NULL) {
            null++;
            continue;
        }
        memset(b[i], i, SZ);
        if (arcoll_heap_contains(b[i]))
            in++;
        else
            out++;
    }
    CHECK(null == 0, "no NULL from malloc when the heap is full");
    CHECK(in > 16 && out > 0, "some in the heap, the rest outside");
    for (int i = 0; i < N; i++) {
        if (b[i] != NULL && !filled(b[i], SZ, (unsigned char)i))
            CHECK(0, "a block's contents changed");
        free(b[i]);
    }
    b[0] = malloc(SZ);
    CHECK(b[0] != NULL && arcoll_heap_contains(b[0]), "the heap serves again once freed");
    free(b[0]);
}

static void test_fork(void)
{
    char *p = strdup("parent");
    pid_t pid = fork();
    int st = -1;

    if (pid == 0) {
        int bad = strcmp(p, "parent") != 0;
        for (int i = 0; i < 1000; i++) {
            char *c = malloc(100 + (size_t)i);
            bad |= c == NULL;
            if (c != NULL)
                memset(c, 1, 100);
            free(c);
        }
        strcpy(p, "child!");
        _exit(bad);
    }
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "a forked child allocates and frees");
    CHECK(strcmp(p, "parent") == 0, "the child's write stays in the child");
    free(p);
}

int main(void)
{
    test_kinds();
    test_exhaustion();
    test_fork();
    printf("heap_preload_test: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
