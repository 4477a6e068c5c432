/*
 * coll_test heapmr [api|preload] ITERS: zero-copy alltoall and allgather on
 * buffers in the node heap, allocated afresh for every call (api:
 * arcoll_heap_malloc; preload: plain malloc under LD_PRELOAD=libarcoll_heap.so),
 * while the heap grows, every byte checked. The counters of
 * arcoll_context_resources must show (docs/heap.md, "The heap registered on
 * verbs"): on verbs no registration of any heap buffer outside the heap MR,
 * which registers again exactly when a call's buffers end above its prefix
 * (twice forced), at least doubling, the replaced MR deregistered; buffers
 * outside the heap (mmap) still registered per call, or by the cache with
 * ARCOLL_REGCACHE=on; on smp no heap MR at all. Under ARCOLL_FAULT=heapmr_fail
 * (coll_test_fault) the heap MR fails and heap buffers must be registered per
 * call instead. A mode of coll_test (coll_test.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "coll_test.h"

typedef struct heapmr_alloc {
    void *(*alloc)(size_t);
    void (*release)(void *);
} heapmr_alloc_t;

static void *heapmr_mmap(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* The start of this process's heap slot, found from a pointer p in it with
 * arcoll_heap_contains alone (true exactly on the slot): a binary search. */
static uintptr_t heapmr_slot_start(const void *p)
{
    uintptr_t lo = (uintptr_t)p > ((uintptr_t)1 << 40) ? (uintptr_t)p - ((uintptr_t)1 << 40) : 0,
              hi = (uintptr_t)p; /* contains(hi); the answer is in (lo, hi] */

    while (hi - lo > 1) {
        uintptr_t mid = lo + (hi - lo) / 2;
        if (arcoll_heap_contains((const void *)mid))
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

static arcoll_resources_t heapmr_res(arcoll_context_t ctx)
{
    arcoll_resources_t r;
    int rc = arcoll_context_resources(ctx, &r);

    CHECK(rc == ARCOLL_OK, "arcoll_context_resources: %s", arcoll_strerror(rc));
    return r;
}

/* One alltoall (c = 1) or allgather from s into r, checked. */
static void heapmr_call(arcoll_team_t world, int c, uint64_t call, size_t bytes, uint8_t *s,
                        uint8_t *r, const char *what)
{
    int rc;

    ct_fill(c, call, ct_rank, ct_nranks, bytes, s);
    memset(r, 0xee, bytes * (size_t)ct_nranks);
    rc = c ? arcoll_alltoall(world, s, r, bytes) : arcoll_allgather(world, s, r, bytes);
    CHECK(rc == ARCOLL_OK, "%s call %llu: %s (%s)", what, (unsigned long long)call,
          arcoll_strerror(rc), arcoll_last_error(NULL));
    if (rc == ARCOLL_OK)
        CHECK(ct_verify(c, call, ct_rank, ct_nranks, bytes, r, what) == 0,
              "%s call %llu: wrong data", what, (unsigned long long)call);
}

/* Buffers outside the heap: registered per call, or through the cache. */
static void heapmr_outside(arcoll_context_t ctx, uint64_t *call)
{
    arcoll_team_t world = arcoll_team_world(ctx);
    size_t bytes = 32 << 10, len = bytes * (size_t)ct_nranks;
    uint8_t *s = heapmr_mmap(len), *r = heapmr_mmap(len);
    arcoll_resources_t a, b;

    CHECK(s != NULL && r != NULL && !arcoll_heap_contains(s), "mmap buffers");
    if (s == NULL || r == NULL)
        goto out;
    a = heapmr_res(ctx);
    heapmr_call(world, 1, ++*call, bytes, s, r, "mmap per call");
    b = heapmr_res(ctx);
    CHECK(b.user_regs == a.user_regs + 2 && b.heap_mr_hits == a.heap_mr_hits,
          "mmap buffers, per call: %llu registrations (want 2), %llu heap MR hits (want 0)",
          (unsigned long long)(b.user_regs - a.user_regs),
          (unsigned long long)(b.heap_mr_hits - a.heap_mr_hits));
    ct_set(ctx, "ARCOLL_REGCACHE", "on");
    for (int i = 0; i < 3; i++)
        heapmr_call(world, 1, ++*call, bytes, s, r, "mmap cached");
    a = heapmr_res(ctx);
    CHECK(a.user_regs == b.user_regs + 2 && a.user_reg_hits == b.user_reg_hits + 4 &&
              a.heap_mr_hits == b.heap_mr_hits,
          "mmap buffers, cached: %llu misses (want 2), %llu hits (want 4), %llu heap MR hits",
          (unsigned long long)(a.user_regs - b.user_regs),
          (unsigned long long)(a.user_reg_hits - b.user_reg_hits),
          (unsigned long long)(a.heap_mr_hits - b.heap_mr_hits));
    arcoll_mem_invalidate(ctx, s, len);
    arcoll_mem_invalidate(ctx, r, len);
out:
    if (s != NULL)
        munmap(s, len);
    if (r != NULL)
        munmap(r, len);
}

void ct_test_heapmr(arcoll_context_t ctx, const char *how, long iters)
{
    static void *ballast[512];
    arcoll_team_t world = arcoll_team_world(ctx);
    heapmr_alloc_t al = {arcoll_heap_malloc, arcoll_heap_free};
    const char *chan = arcoll_config_get(ctx, "ARCOLL_CHANNEL");
    int verbs = chan != NULL && strcmp(chan, "verbs") == 0, growths = 0, nb = 0;
    /* coll_test_fault with ARCOLL_FAULT=heapmr_fail: the heap MR cannot be
     * registered, and heap buffers must go the usual way (per call). */
    const char *fault = getenv("ARCOLL_FAULT");
    int fallback = verbs && fault != NULL && strstr(fault, "heapmr_fail") != NULL;
    size_t min = 0, prev_top = 0, fixed = 0, allocated = 0;
    uintptr_t mine = 0;
    int forced = 0;
    uint64_t call = 0, heap_calls = 0;
    arcoll_resources_t r0, a, b;
    char tops[256] = "";
    const char *v;

    if (strcmp(how, "preload") == 0)
        al = (heapmr_alloc_t){malloc, free};
    /* A small first prefix, so that a few MiB of heap double it several times
     * (it applies when the heap MR is made: at the first heap buffer below). */
    ct_set(ctx, "ARCOLL_VERBS_HEAP_MR_MIN", "1m");
    v = arcoll_config_get(ctx, "ARCOLL_VERBS_HEAP_MR_MIN");
    if (v != NULL)
        min = strtoull(v, NULL, 10); /* rendered in bytes */
    CHECK(min == 1 << 20, "ARCOLL_VERBS_HEAP_MR_MIN is %s", v != NULL ? v : "unknown");
    ct_set(ctx, "ARCOLL_PATH", "zcopy");
    ct_set(ctx, "ARCOLL_REGCACHE", "off");
    r0 = heapmr_res(ctx);
    for (long it = 0; it < iters; it++) {
        /* Growing sizes, fresh buffers; the heap grows meanwhile (ballast). */
        size_t bytes = (size_t)(16 << 10) * (size_t)(1 + it), len = bytes * (size_t)ct_nranks;
        size_t pad = 0, end;
        int c = (int)(it & 1);
        uint8_t *s, *blk, *r;

        /* Twice a receive buffer at the end of a block that reaches past the
         * prefix (whatever the allocator reuses): the prefix must grow. */
        a = heapmr_res(ctx);
        s = al.alloc(c ? len : bytes);
        blk = al.alloc(len);
        if (verbs && !fallback && !a.heap_mr_odp && mine != 0 && blk != NULL &&
            (it == iters / 4 || it == iters / 2)) {
            for (int try = 0; try < 8 && (uintptr_t)blk + pad + len <= mine + a.heap_mr_bytes;
                 try++) {
                al.release(blk);
                pad = (size_t)(mine + a.heap_mr_bytes - (uintptr_t)blk) + 4096;
                blk = al.alloc(pad + len);
                if (blk == NULL)
                    break;
            }
            forced += blk != NULL && (uintptr_t)blk + pad + len > mine + a.heap_mr_bytes;
        }
        r = blk != NULL ? blk + pad : NULL;
        CHECK(s != NULL && r != NULL && arcoll_heap_contains(s) && arcoll_heap_contains(r),
              "%s: buffers of %zu bytes not in this process's heap", how, len);
        if (s == NULL || r == NULL || !arcoll_heap_contains(s) || !arcoll_heap_contains(r))
            return;
        if (mine == 0)
            mine = heapmr_slot_start(s);
        end = (size_t)((uintptr_t)r + len - mine);
        if ((uintptr_t)s + (c ? len : bytes) - mine > end)
            end = (size_t)((uintptr_t)s + (c ? len : bytes) - mine);
        heapmr_call(world, c, ++call, bytes, s, r, c ? "heap alltoall" : "heap allgather");
        b = heapmr_res(ctx);
        heap_calls++;
        al.release(s);
        al.release(blk);
        /* The heap grows: a kept block per call, so the prefix must double. */
        if (nb < (int)(sizeof(ballast) / sizeof(ballast[0]))) {
            ballast[nb] = al.alloc((size_t)1 << 20);
            CHECK(ballast[nb] != NULL, "ballast");
            allocated += (size_t)1 << 20;
            nb++;
        }
        if (!verbs) { /* registering is free there: no heap MR */
            CHECK(b.heap_mr_regs == 0 && b.heap_mr_hits == 0 && b.heap_mr_bytes == 0,
                  "smp: a heap MR (%llu registrations)", (unsigned long long)b.heap_mr_regs);
            continue;
        }
        if (fallback) {
            CHECK(b.heap_mr_regs == 0 && b.heap_mr_hits == 0 && b.heap_mr_bytes == 0 &&
                      b.user_regs == a.user_regs + 2,
                  "call %llu after a failed heap MR: %llu heap MR registrations, %llu per call "
                  "(want 0 and 2)",
                  (unsigned long long)call, (unsigned long long)b.heap_mr_regs,
                  (unsigned long long)(b.user_regs - a.user_regs));
            continue;
        }
        CHECK(b.user_regs == r0.user_regs && b.user_reg_hits == r0.user_reg_hits,
              "call %llu: %llu registrations, %llu cache hits for heap buffers (want 0)",
              (unsigned long long)call, (unsigned long long)(b.user_regs - r0.user_regs),
              (unsigned long long)(b.user_reg_hits - r0.user_reg_hits));
        CHECK(b.heap_mr_hits == a.heap_mr_hits + 2, "call %llu: %llu heap MR hits (want 2)",
              (unsigned long long)call, (unsigned long long)(b.heap_mr_hits - a.heap_mr_hits));
        /* A registration exactly when the buffers end above the prefix. */
        CHECK(b.heap_mr_bytes >= end &&
                  b.heap_mr_regs == a.heap_mr_regs + (end > a.heap_mr_bytes && !a.heap_mr_odp),
              "call %llu: buffers end at %zu in the slot; heap MR %zu -> %zu bytes with %llu "
              "registrations",
              (unsigned long long)call, end, a.heap_mr_bytes, b.heap_mr_bytes,
              (unsigned long long)(b.heap_mr_regs - a.heap_mr_regs));
        if (b.heap_mr_bytes != prev_top) {
            CHECK(b.heap_mr_regs == a.heap_mr_regs + 1 &&
                      (prev_top == 0 || b.heap_mr_bytes >= 2 * prev_top),
                  "call %llu: heap MR %zu -> %zu bytes with %llu registrations",
                  (unsigned long long)call, prev_top, b.heap_mr_bytes,
                  (unsigned long long)(b.heap_mr_regs - a.heap_mr_regs));
            if (prev_top == 0)
                fixed = b.registered_bytes - b.heap_mr_bytes;
            prev_top = b.heap_mr_bytes;
            growths++;
            if (strlen(tops) + 24 < sizeof(tops))
                snprintf(tops + strlen(tops), sizeof(tops) - strlen(tops), "%s%zu KiB@call%llu",
                         growths > 1 ? ", " : "", prev_top >> 10, (unsigned long long)call);
        } else {
            CHECK(b.heap_mr_regs == a.heap_mr_regs, "call %llu: heap MR registered again at %zu",
                  (unsigned long long)call, prev_top);
        }
        /* The old MR is gone once the call is over: only the current one is counted. */
        CHECK(b.registered_bytes == fixed + b.heap_mr_bytes,
              "call %llu: %zu registered bytes, want %zu + the heap MR's %zu",
              (unsigned long long)call, b.registered_bytes, fixed, b.heap_mr_bytes);
    }
    b = heapmr_res(ctx);
    if (verbs && !fallback) {
        int steps = 1;
        for (size_t t = min; t != 0 && t < b.heap_mr_bytes; t *= 2)
            steps++;
        CHECK(b.heap_mr_odp ? b.heap_mr_regs == 1
                            : (b.heap_mr_regs == (uint64_t)growths &&
                               b.heap_mr_regs >= 1 + (uint64_t)forced &&
                               b.heap_mr_regs <= (uint64_t)steps && b.heap_mr_bytes % min == 0),
              "heap MR: %llu registrations (%d changes seen; at most %d from %zu to %zu)",
              (unsigned long long)b.heap_mr_regs, growths, steps, min, b.heap_mr_bytes);
        printf("[rank %d] heapmr %s: %llu calls on heap buffers, %zu bytes kept allocated: heap MR "
               "%s%zu bytes after %llu registrations, %llu hits; %llu other registrations; prefix "
               "%s\n",
               ct_rank, how, (unsigned long long)heap_calls, allocated,
               b.heap_mr_odp ? "on demand, " : "", b.heap_mr_bytes,
               (unsigned long long)b.heap_mr_regs, (unsigned long long)b.heap_mr_hits,
               (unsigned long long)(b.user_regs - r0.user_regs), tops);
        fflush(stdout);
    }
    heapmr_outside(ctx, &call);
    /* Heap buffers bypass the cache even when it is on. */
    {
        size_t bytes = 32 << 10, len = bytes * (size_t)ct_nranks;
        uint8_t *s = al.alloc(len), *r = al.alloc(len);
        if (s != NULL && r != NULL) {
            a = heapmr_res(ctx);
            heapmr_call(world, 1, ++call, bytes, s, r, "heap, cache on");
            b = heapmr_res(ctx);
            CHECK(!verbs || fallback ||
                      (b.user_regs == a.user_regs && b.user_reg_hits == a.user_reg_hits &&
                       b.heap_mr_hits == a.heap_mr_hits + 2),
                  "heap buffers with the cache on: %llu misses, %llu hits, %llu heap MR hits",
                  (unsigned long long)(b.user_regs - a.user_regs),
                  (unsigned long long)(b.user_reg_hits - a.user_reg_hits),
                  (unsigned long long)(b.heap_mr_hits - a.heap_mr_hits));
        }
        al.release(s);
        al.release(r);
    }
    ct_set(ctx, "ARCOLL_REGCACHE", "off");
    ct_set(ctx, "ARCOLL_PATH", "auto");
    while (nb > 0)
        al.release(ballast[--nb]);
}
