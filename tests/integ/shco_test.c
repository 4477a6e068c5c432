/*
 * sh_co on forked ranks (fork_test.c's shco modes, on coll_test's helpers): the
 * parent maps one MAP_SHARED anonymous region before the fork and registers
 * it (mem/region.h), so it is at the same address, under the same id, in
 * every rank; each rank takes its buffers from its own slice of it.
 *
 *   fork_test N shco check          alltoall and allgather 1 B .. 1 MiB per peer, blocking and
 *                                   not, and in place (runs as pap); allgatherv with packed
 *                                   blocks (sh_co), one rank's in another order (pap), other
 *                                   rcounts (mismatch) and in place; every rank gets
 *                                   ARCOLL_ERR_MISMATCH on unequal sizes;
 *                                   a rank's send or receive buffer outside the region: every
 *                                   rank still gets the right data (the pap fallback); calls in
 *                                   flight around sh_co; a rank that never arrives: the others
 *                                   time out; 0 bytes on one rank against data: every rank
 *                                   with data gets ARCOLL_ERR_MISMATCH; 0 bytes on every rank:
 *                                   the next calls pair
 *   fork_test N shco skew ITERS US [random|late|mix]
 *                                   back-to-back calls, random delays up to US before each
 *                                   (late: only the last rank's, so the others copy among
 *                                   themselves first; mix: sh_co alternating with pap_shm,
 *                                   shm_direct and pap)
 *   fork_test N shco bench          sh_co vs pap vs direct, 1 KiB .. 4 MiB per peer, and a
 *                                   single-threaded memcpy of the bytes one rank receives
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "coll_test.h"
#include "mem/region.h"
#include "shco_test.h"

#define SHCO_REGION_ID 0x5c0c0ULL

static char *shco_base;   /* the region, mapped before the fork */
static size_t shco_slice; /* bytes of it per rank */
static size_t shco_used;  /* bump allocation in this rank's slice */

/* Parent, before the fork: the region and its registration, inherited. */
int shco_region_make(int n, size_t slice)
{
    size_t len = slice * (size_t)n;

    shco_base =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (shco_base == MAP_FAILED) {
        perror("fork_test: mmap of the sh_co region");
        return -1;
    }
    shco_slice = slice;
    if (heap_region_add(shco_base, len, SHCO_REGION_ID) != ARCOLL_OK) {
        fprintf(stderr, "fork_test: heap_region_add failed\n");
        return -1;
    }
    return 0;
}

static void *shco_alloc(size_t len)
{
    char *p = shco_base + (size_t)ct_rank * shco_slice + shco_used;

    len = (len + 63) & ~(size_t)63;
    if (shco_used + len > shco_slice) {
        fprintf(stderr, "[rank %d] sh_co region slice of %zu bytes exhausted\n", ct_rank,
                shco_slice);
        abort();
    }
    shco_used += len;
    return p;
}

static void shco_free_all(void)
{
    shco_used = 0;
}

static void shco_algs(arcoll_context_t ctx, const char *alg)
{
    ct_set(ctx, "ARCOLL_ALLTOALL_ALG", alg);
    ct_set(ctx, "ARCOLL_ALLGATHER_ALG", alg);
}

/* One validated call with the given buffers. */
static int shco_one(arcoll_team_t team, int a2a, int nb, uint64_t call, size_t bytes, uint8_t *s,
                    uint8_t *r, const char *what)
{
    int me = arcoll_team_rank(team), n = arcoll_team_size(team), rc;

    ct_fill(a2a, call, me, n, bytes, s);
    memset(r, 0xee, bytes * (size_t)n);
    rc = ct_run_coll(team, a2a, nb, s, r, bytes);
    CHECK(rc == ARCOLL_OK, "%s: %s (%s)", what, arcoll_strerror(rc), arcoll_last_error(NULL));
    if (rc == ARCOLL_OK)
        CHECK(ct_verify(a2a, call, me, n, bytes, r, what) == 0, "%s: wrong data", what);
    return rc;
}

/* The context's sh_co counters now (arcoll_context_counters). */
static arcoll_counters_t shco_counters(arcoll_context_t ctx)
{
    arcoll_counters_t c;
    int rc = arcoll_context_counters(ctx, &c, sizeof(c));

    CHECK(rc == ARCOLL_OK, "arcoll_context_counters: %s", arcoll_strerror(rc));
    if (rc != ARCOLL_OK)
        memset(&c, 0, sizeof(c));
    return c;
}

/* Since c0: ran calls served by sh_co and fell calls by its pap fallback, exactly. */
static void shco_counted(arcoll_context_t ctx, arcoll_counters_t c0, unsigned long long ran,
                         unsigned long long fell, const char *what)
{
    arcoll_counters_t c1 = shco_counters(ctx);

    CHECK(c1.sh_co_calls - c0.sh_co_calls == ran && c1.sh_co_fallbacks - c0.sh_co_fallbacks == fell,
          "%s: counters say %llu sh_co calls and %llu fallbacks, want %llu and %llu", what,
          c1.sh_co_calls - c0.sh_co_calls, c1.sh_co_fallbacks - c0.sh_co_fallbacks, ran, fell);
}

static arcoll_team_t shco_team_all(arcoll_context_t ctx)
{
    int *all = malloc(sizeof(int) * (size_t)ct_nranks);
    arcoll_team_t t = NULL;
    int rc = ARCOLL_ERR_NOMEM;

    for (int i = 0; all != NULL && i < ct_nranks; i++)
        all[i] = i;
    if (all != NULL)
        rc = arcoll_team_create(ctx, all, ct_nranks, &t);
    free(all);
    CHECK(rc == ARCOLL_OK, "team_create: %s", arcoll_strerror(rc));
    return rc == ARCOLL_OK ? t : NULL;
}

static void shco_sizes(arcoll_context_t ctx)
{
    static const size_t sizes[] = {1, 7, 64, 1000, 4096, 65536, 1 << 20};
    arcoll_team_t world = arcoll_team_world(ctx);
    uint64_t call = 0;
    char what[128];

    shco_algs(ctx, "sh_co");
    for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
        size_t len = sizes[z] * (size_t)ct_nranks;
        uint8_t *s = shco_alloc(len), *r = shco_alloc(len);
        for (int c = 0; c < 2; c++)
            for (int nb = 0; nb < 2; nb++) {
                arcoll_counters_t c0 = shco_counters(ctx);
                snprintf(what, sizeof(what), "sh_co %s %zu B%s", c ? "alltoall" : "allgather",
                         sizes[z], nb ? " nonblocking" : "");
                shco_one(world, c, nb, ++call, sizes[z], s, r, what);
                shco_counted(ctx, c0, 1, 0, what); /* it ran as sh_co */
            }
        shco_free_all();
    }
}

/* In place, alltoall and allgather are their v-forms, which sh_co does not
 * serve: they run as pap, with the right data. */
static void shco_in_place(arcoll_context_t ctx)
{
    arcoll_team_t world = arcoll_team_world(ctx);
    size_t bytes = 4096, len = bytes * (size_t)ct_nranks;
    uint8_t *r = shco_alloc(len);
    uint64_t call = 7000;

    shco_algs(ctx, "sh_co");
    for (int c = 0; c < 2; c++) {
        int rc;
        memset(r, 0xee, len);
        ct_fill(c, ++call, ct_rank, ct_nranks, bytes, c ? r : r + (size_t)ct_rank * bytes);
        rc = c ? arcoll_alltoall(world, ARCOLL_IN_PLACE, r, bytes)
               : arcoll_allgather(world, ARCOLL_IN_PLACE, r, bytes);
        CHECK(rc == ARCOLL_OK, "sh_co %s in place: %s", c ? "alltoall" : "allgather",
              arcoll_strerror(rc));
        if (rc == ARCOLL_OK)
            CHECK(ct_verify(c, call, ct_rank, ct_nranks, bytes, r, "in place") == 0,
                  "sh_co %s in place: wrong data", c ? "alltoall" : "allgather");
    }
    shco_free_all();
}

/* Unequal sizes: every rank, not only some, fails with ARCOLL_ERR_MISMATCH
 * (the sizes are in the records every rank reads), and nothing is written
 * past the smaller receive buffers. */
static void shco_mismatch(arcoll_context_t ctx)
{
    size_t n = (size_t)ct_nranks;
    arcoll_team_t t = shco_team_all(ctx);
    uint8_t *s = shco_alloc(n * 64), *r = shco_alloc(n * 64);

    if (t == NULL)
        return;
    shco_algs(ctx, "sh_co");
    for (int c = 0; c < 2; c++) {
        size_t bytes = ct_rank == 0 ? 24 : 16;
        memset(r, 0x5a, n * 64);
        int rc = c ? arcoll_alltoall(t, s, r, bytes) : arcoll_allgather(t, s, r, bytes);
        CHECK(rc == ARCOLL_ERR_MISMATCH, "sh_co %s size mismatch: %s, want every rank to see it",
              c ? "alltoall" : "allgather", arcoll_strerror(rc));
        for (size_t i = n * bytes; i < n * 64; i++)
            if (r[i] != 0x5a) {
                CHECK(0, "sh_co size mismatch wrote past the receive buffer (byte %zu)", i);
                break;
            }
        arcoll_team_destroy(ctx, t);
        if (c == 0 && (t = shco_team_all(ctx)) == NULL)
            break;
    }
    shco_free_all();
}

/* The last rank's send buffer, receive buffer or both outside the region:
 * every rank must see it in the records and go on as pap, with the right
 * data everywhere, and the team must stay usable. */
static void shco_fallback(arcoll_context_t ctx)
{
    static const size_t sizes[] = {8, 4096, 300000};
    arcoll_team_t world = arcoll_team_world(ctx);
    uint64_t call = 5000;
    char what[128];

    shco_algs(ctx, "sh_co");
    for (int outside = 1; outside <= 3; outside++)
        for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
            size_t len = sizes[z] * (size_t)ct_nranks;
            uint8_t *ps = malloc(len), *pr = malloc(len);
            uint8_t *s = shco_alloc(len), *r = shco_alloc(len);
            if (ct_rank == ct_nranks - 1) {
                s = outside & 1 ? ps : s;
                r = outside & 2 ? pr : r;
            }
            for (int c = 0; c < 2; c++) {
                arcoll_counters_t c0 = shco_counters(ctx);
                snprintf(what, sizeof(what), "sh_co %s %zu B, last rank's %s outside the region",
                         c ? "alltoall" : "allgather", sizes[z],
                         outside == 1   ? "send buffer"
                         : outside == 2 ? "receive buffer"
                                        : "buffers");
                shco_one(world, c, 0, ++call, sizes[z], s, r, what);
                shco_counted(ctx, c0, 0, 1, what); /* every rank: a fallback */
            }
            /* and the next call, all in the region, is sh_co again */
            s = shco_alloc(len);
            r = shco_alloc(len);
            {
                arcoll_counters_t c0 = shco_counters(ctx);
                shco_one(world, 1, 0, ++call, sizes[z], s, r, "sh_co after a fallback");
                shco_counted(ctx, c0, 1, 0, "sh_co after a fallback");
            }
            free(ps);
            free(pr);
            shco_free_all();
        }
}

/* A rank that never arrives: the others fail with ARCOLL_ERR_TIMEOUT in time. */
static void shco_timeout(arcoll_context_t ctx)
{
    size_t n = (size_t)ct_nranks;
    arcoll_team_t t = shco_team_all(ctx);
    uint8_t *s = shco_alloc(n * 8), *r = shco_alloc(n * 8);

    if (t == NULL)
        return;
    shco_algs(ctx, "sh_co");
    ct_set(ctx, "ARCOLL_TIMEOUT_MS", "1000");
    if (ct_rank != ct_nranks - 1) {
        double t0 = ct_now();
        int rc = arcoll_alltoall(t, s, r, 8);
        double secs = ct_now() - t0;
        CHECK(rc == ARCOLL_ERR_TIMEOUT, "sh_co peer never arrives: %s", arcoll_strerror(rc));
        /* A wide margin: waiting ranks yield between polls, and under the ASan
         * build on a machine loaded 14x over its cores one run took 7.8 s. */
        CHECK(secs >= 0.9 && secs < 16.0, "sh_co timeout after %.2f s, ARCOLL_TIMEOUT_MS=1000",
              secs);
    }
    ct_set(ctx, "ARCOLL_TIMEOUT_MS", "60000");
    arcoll_team_destroy(ctx, t);
    shco_free_all();
}

/* One rank passes 0 bytes where the others pass data under sh_co: the 0-byte
 * call runs as a flat pap call and never publishes in the node segment, yet
 * every rank, the 0-byte one included, must get ARCOLL_ERR_MISMATCH in that
 * call within 5 s (ARCOLL_TIMEOUT_MS 20000), say why, and write nothing past
 * its receive area (docs/protocol.md §8, §15). outside 1: every buffer
 * outside the region (a call that would go on as pap in the same epoch). The
 * 0-byte rank is the first or the last. */
static void shco_empty(arcoll_context_t ctx)
{
    const size_t bytes = 64, area = bytes * (size_t)ct_nranks, guard = 4096;

    shco_algs(ctx, "sh_co");
    ct_set(ctx, "ARCOLL_TIMEOUT_MS", "20000");
    for (int outside = 0; outside < 2; outside++)
        for (int first = 0; first < 2; first++)
            for (int c = 0; c < 2; c++) {
                int odd = (outside + first + c) % 2 ? ct_nranks - 1 : 0, rc;
                arcoll_team_t t = shco_team_all(ctx);
                uint8_t *ps = malloc(area), *pr = malloc(area + guard);
                uint8_t *s = outside ? ps : shco_alloc(area);
                uint8_t *r = outside ? pr : shco_alloc(area + guard);
                size_t mine = ct_rank == odd ? 0 : bytes, bad = 0;
                char what[160];
                double t0, secs;
                snprintf(what, sizeof(what), "sh_co %s, rank %d passes 0%s",
                         c ? "alltoall" : "allgather", odd,
                         outside ? ", buffers outside the region" : "");
                if (t == NULL || ps == NULL || pr == NULL) {
                    CHECK(0, "%s: no team or buffers", what);
                    goto next;
                }
                memset(s, 1, area);
                memset(r, 0xa5, area + guard);
                t0 = ct_now();
                rc = c ? arcoll_alltoall(t, s, r, mine) : arcoll_allgather(t, s, r, mine);
                secs = ct_now() - t0;
                for (size_t j = mine == 0 ? 0 : area; j < area + guard; j++)
                    bad += r[j] != 0xa5;
                CHECK(rc == ARCOLL_ERR_MISMATCH, "%s: got %s, want a mismatch (%s)", what,
                      arcoll_strerror(rc), arcoll_last_error(NULL));
                CHECK(strstr(arcoll_last_error(NULL), "size") != NULL,
                      "%s: failed without saying why (last error: %s)", what,
                      arcoll_last_error(NULL));
                CHECK(secs < 5.0, "%s: took %.2f s, want a prompt mismatch", what, secs);
                CHECK(bad == 0, "%s: %zu bytes written past the receive area", what, bad);
            next:
                if (t != NULL)
                    arcoll_team_destroy(ctx, t);
                free(ps);
                free(pr);
                shco_free_all();
            }
    ct_set(ctx, "ARCOLL_TIMEOUT_MS", "60000");
}

/* 0 bytes on every rank takes no call of the node segment on any: the sh_co
 * calls after it (also with pap_shm, which shares the segment's call
 * numbers, in between, and nonblocking) must pair and give the right data. */
static void shco_empty_all(arcoll_context_t ctx)
{
    static const char *algs[] = {"sh_co", "pap_shm", "sh_co"};
    arcoll_team_t world = arcoll_team_world(ctx);
    const size_t bytes = 200, len = bytes * (size_t)ct_nranks;
    uint8_t *s = shco_alloc(len), *r = shco_alloc(len);
    uint64_t call = 11000;
    char what[128];

    for (int round = 0; round < 3; round++)
        for (int c = 0; c < 2; c++) {
            int rc;
            shco_algs(ctx, "sh_co");
            for (int k = 0; k <= round; k++) {
                rc = c ? arcoll_alltoall(world, s, r, 0) : arcoll_allgather(world, s, r, 0);
                CHECK(rc == ARCOLL_OK, "sh_co 0 bytes on every rank: %s", arcoll_strerror(rc));
            }
            for (int a = 0; a < 3; a++) {
                shco_algs(ctx, algs[a]);
                snprintf(what, sizeof(what), "%s %s after %d 0-byte calls on every rank", algs[a],
                         c ? "alltoall" : "allgather", round + 1);
                shco_one(world, c, a == 2, ++call, bytes, s, r, what);
            }
        }
    shco_free_all();
}

/* Nonblocking calls in flight around sh_co: sh_co, then a pap call and
 * another sh_co (which waits for the first: they share the node segment),
 * all waited for together; once with the last rank's buffer outside the
 * region, so that the first one goes on as pap while the others are in flight. */
static void shco_inflight(arcoll_context_t ctx)
{
    arcoll_team_t world = arcoll_team_world(ctx);
    size_t bytes = 1000, len = bytes * (size_t)ct_nranks;
    uint64_t call = 9000;

    for (int outside = 0; outside < 2; outside++) {
        uint8_t *s[3], *r[3], *priv = malloc(len);
        arcoll_request_t req[3];
        const char *alg[3] = {"sh_co", "pap", "sh_co"};
        int rc[3];
        for (int k = 0; k < 3; k++) {
            s[k] = shco_alloc(len);
            r[k] = shco_alloc(len);
            ct_fill(k != 1, call + (uint64_t)k, ct_rank, ct_nranks, bytes, s[k]);
            memset(r[k], 0xee, len);
        }
        if (outside && ct_rank == ct_nranks - 1)
            r[0] = priv;
        for (int k = 0; k < 3; k++) {
            shco_algs(ctx, alg[k]);
            rc[k] = k != 1 ? arcoll_ialltoall(world, s[k], r[k], bytes, &req[k])
                           : arcoll_iallgather(world, s[k], r[k], bytes, &req[k]);
            CHECK(rc[k] == ARCOLL_OK, "in flight: start %d: %s", k, arcoll_strerror(rc[k]));
        }
        for (int k = 2; k >= 0; k--) {
            if (rc[k] != ARCOLL_OK)
                continue;
            rc[k] = arcoll_wait(&req[k]);
            CHECK(rc[k] == ARCOLL_OK, "in flight: call %d: %s", k, arcoll_strerror(rc[k]));
            if (rc[k] == ARCOLL_OK)
                CHECK(ct_verify(k != 1, call + (uint64_t)k, ct_rank, ct_nranks, bytes, r[k],
                                "in flight") == 0,
                      "in flight (outside %d): call %d: wrong data", outside, k);
        }
        call += 3;
        free(priv);
        shco_free_all();
    }
}

static void shco_skew(arcoll_context_t ctx, long iters, long max_us, const char *mode)
{
    static const size_t sizes[] = {8, 200, 4096};
    static const char *mixed[] = {"sh_co", "pap_shm", "sh_co", "shm_direct", "sh_co", "pap"};
    arcoll_team_t world = arcoll_team_world(ctx);
    size_t most = 4096 * (size_t)ct_nranks;
    uint8_t *s = shco_alloc(most), *r = shco_alloc(most);
    int bad_calls = 0, errors = 0, mix = strcmp(mode, "mix") == 0, late = strcmp(mode, "late") == 0;

    srand(4321u + (unsigned)ct_rank * 7919u);
    shco_algs(ctx, "sh_co");
    for (long it = 0; it < iters; it++) {
        size_t bytes = sizes[it % 3];
        int c = (int)((it / 3) % 2), rc;
        if (mix) /* algorithms that share the node segment, call by call */
            shco_algs(ctx, mixed[it % 6]);
        ct_fill(c, (uint64_t)it + 1, ct_rank, ct_nranks, bytes, s);
        if (!late || ct_rank == ct_nranks - 1)
            ct_delay_us(rand() % (max_us + 1));
        rc = c ? arcoll_alltoall(world, s, r, bytes) : arcoll_allgather(world, s, r, bytes);
        if (rc != ARCOLL_OK) {
            fprintf(stderr, "[rank %d] sh_co skew call %ld: %s\n", ct_rank, it,
                    arcoll_strerror(rc));
            errors++;
            break;
        }
        bad_calls +=
            ct_verify(c, (uint64_t)it + 1, ct_rank, ct_nranks, bytes, r, "sh_co skew") != 0;
    }
    CHECK(errors == 0 && bad_calls == 0, "sh_co skew %s: %d corrupted calls of %ld, %d errors",
          mode, bad_calls, iters, errors);
    shco_free_all();
}

/* One thread copying the bytes one rank receives, the same buffers: the
 * median seconds. */
static double shco_memcpy_time(uint8_t *s, uint8_t *r, size_t len, int iters, double *t)
{
    for (int i = 0; i < iters; i++) {
        double t0 = ct_now();
        memcpy(r, s, len);
        __asm__ __volatile__("" ::"r"(r) : "memory");
        t[i] = ct_now() - t0;
    }
    return ct_bench_median(t, iters);
}

/* The machine is shared and noisy: SHCO_BATCHES batches per algorithm,
 * interleaved so that a busy spell hits all of them; the best batch median
 * of each is reported. */
#define SHCO_BATCHES 5

/* only: "sh_co" times sh_co and memcpy alone (runs to compare across
 * settings that hold for a whole run, e.g. ARCOLL_SOCKET_SIZE). */
static void shco_bench(arcoll_context_t ctx, const char *only)
{
    static const char *algs3[] = {"sh_co", "pap", "direct"};
    int nalg = only != NULL && strcmp(only, "sh_co") == 0 ? 1 : 3;

    for (int c = 1; c >= 0; c--) {
        if (ct_rank == 0)
            printf("%s, %d ranks: us per call (slowest rank's median over a batch, best of %d "
                   "batches); GB/s = bytes one rank receives / time; memcpy = one thread "
                   "copying those bytes once\n"
                   "%9s %10s %10s %10s %10s %8s %8s %8s\n",
                   c ? "alltoall" : "allgather", ct_nranks, SHCO_BATCHES, "bytes", "sh_co", "pap",
                   "direct", "memcpy", "sh_co", "memcpy", "sh/mcpy");
        for (size_t bytes = 1024; bytes <= (4u << 20); bytes *= 4) {
            size_t len = bytes * (size_t)ct_nranks;
            uint8_t *s = shco_alloc(len), *r = shco_alloc(len);
            int iters = (int)((16u << 20) / len);
            double best[4] = {1e30, 1e30, 1e30, 1e30}, ts[500];
            iters = iters < 5 ? 5 : iters > 500 ? 500 : iters;
            memset(s, 1, len);
            memset(r, 2, len);
            for (int b = 0; b < SHCO_BATCHES; b++) {
                for (int a = 0; a < nalg; a++) {
                    double t = ct_bench_time(ctx, algs3[a], c, bytes, s, r, iters, ts);
                    best[a] = t >= 0 && t < best[a] ? t : best[a];
                }
                double t = shco_memcpy_time(s, r, len, iters, ts);
                best[3] = t < best[3] ? t : best[3];
            }
            if (ct_rank == 0 && nalg == 1)
                printf("%9zu %10.1f %10s %10s %10.1f %8.2f %8.2f %8.2f\n", bytes, best[0] * 1e6,
                       "-", "-", best[3] * 1e6, (double)len / best[0] / 1e9,
                       (double)len / best[3] / 1e9, best[3] / best[0]);
            else if (ct_rank == 0)
                printf("%9zu %10.1f %10.1f %10.1f %10.1f %8.2f %8.2f %8.2f\n", bytes, best[0] * 1e6,
                       best[1] * 1e6, best[2] * 1e6, best[3] * 1e6, (double)len / best[0] / 1e9,
                       (double)len / best[3] / 1e9, best[3] / best[0]);
            shco_free_all();
        }
    }
}

/* allgatherv: block s is ((3s + 1) % 5) * unit bytes (0 from 4 ranks), a pattern of
 * the call, s and the byte. Packed displacements on every rank: it runs as
 * sh_co (blocking and nonblocking); the last rank's blocks in reverse order:
 * every rank goes on as pap, right data; one rank's rcounts differ: every rank
 * fails with ARCOLL_ERR_MISMATCH; in place: pap (sh_co does not serve it). */
static uint8_t shco_v_byte(uint64_t call, int s, size_t i)
{
    return (uint8_t)(call * 7 + (uint64_t)s * 31 + i);
}

static void shco_allgatherv(arcoll_context_t ctx)
{
    static const size_t units[] = {1, 64, 4096, 100000};
    size_t n = (size_t)ct_nranks, *rc = malloc(n * sizeof(size_t)),
           *rd = malloc(n * sizeof(size_t));
    uint64_t call = 13000;
    char what[160];

    if (rc == NULL || rd == NULL) {
        CHECK(0, "allgatherv: no memory for the counts");
        goto out;
    }
    ct_set(ctx, "ARCOLL_ALLGATHERV_ALG", "sh_co");
    for (size_t z = 0; z < sizeof(units) / sizeof(units[0]); z++)
        for (int kind = 0; kind < 5; kind++) { /* packed, packed nb, reversed, mismatch, in place */
            arcoll_team_t t = kind == 3 ? shco_team_all(ctx) : arcoll_team_world(ctx);
            size_t total = 0, bad = 0, mine;
            arcoll_counters_t c0 = shco_counters(ctx);
            arcoll_request_t req;
            uint8_t *s, *r;
            int rv;
            ++call;
            for (size_t q = 0; q < n; q++) {
                rc[q] = ((q * 3 + 1) % 5) * units[z];
                total += rc[q];
            }
            for (size_t q = 0, at = 0; q < n; q++) { /* reversed: the last block first */
                size_t b = kind == 2 && ct_rank == ct_nranks - 1 ? n - 1 - q : q;
                rd[b] = at;
                at += rc[b];
            }
            mine = rc[ct_rank];
            if (kind == 3 && ct_rank == 0)
                rc[n - 1] += 8; /* this rank expects more from the last one */
            s = shco_alloc(mine + 1);
            r = shco_alloc(total + 64);
            for (size_t i = 0; i < mine; i++)
                s[i] = shco_v_byte(call, ct_rank, i);
            memset(r, 0xee, total + 64);
            if (kind == 4)
                memcpy(r + rd[ct_rank], s, mine);
            snprintf(what, sizeof(what), "sh_co allgatherv unit %zu %s", units[z],
                     (const char *[]){"packed", "packed nonblocking", "last rank reversed",
                                      "rcounts differ", "in place"}[kind]);
            if (t == NULL)
                continue;
            if (kind == 1) {
                rv = arcoll_iallgatherv(t, s, mine, r, rc, rd, &req);
                if (rv == ARCOLL_OK)
                    rv = arcoll_wait(&req);
            } else {
                rv = arcoll_allgatherv(t, kind == 4 ? ARCOLL_IN_PLACE : s, mine, r, rc, rd);
            }
            if (kind == 3) {
                CHECK(rv == ARCOLL_ERR_MISMATCH, "%s: %s, want a mismatch on every rank", what,
                      arcoll_strerror(rv));
                arcoll_team_destroy(ctx, t);
                shco_free_all();
                continue;
            }
            CHECK(rv == ARCOLL_OK, "%s: %s (%s)", what, arcoll_strerror(rv),
                  arcoll_last_error(NULL));
            for (size_t q = 0; rv == ARCOLL_OK && q < n; q++)
                for (size_t i = 0; i < rc[q]; i++)
                    bad += r[rd[q] + i] != shco_v_byte(call, (int)q, i);
            for (size_t i = total; i < total + 64; i++)
                bad += r[i] != 0xee;
            CHECK(bad == 0, "%s: %zu wrong bytes", what, bad);
            /* packed: sh_co; reversed: every rank's fallback; in place: not sh_co at all */
            shco_counted(ctx, c0, kind < 2, kind == 2, what);
            shco_free_all();
        }
    ct_set(ctx, "ARCOLL_ALLGATHERV_ALG", "auto");
out:
    free(rc);
    free(rd);
}

/* coll_test's hook for the modes above: 1 if mode was one of them. */
int shco_mode(arcoll_context_t ctx, const char *mode, int argc, char **argv)
{
    if (strcmp(mode, "shco") != 0)
        return 0;
    const char *what = argc > 2 ? argv[2] : "check";
    if (strcmp(what, "check") == 0) {
        shco_sizes(ctx);
        shco_in_place(ctx);
        shco_mismatch(ctx);
        shco_fallback(ctx);
        shco_inflight(ctx);
        shco_timeout(ctx);
        shco_empty_all(ctx);
        shco_empty(ctx);
        shco_allgatherv(ctx);
    } else if (strcmp(what, "skew") == 0) {
        shco_skew(ctx, argc > 3 ? atol(argv[3]) : 1000, argc > 4 ? atol(argv[4]) : 100,
                  argc > 5 ? argv[5] : "random");
    } else if (strcmp(what, "bench") == 0) {
        shco_bench(ctx, argc > 3 ? argv[3] : NULL);
    } else {
        tl_expect(&ct_tally, 0, "unknown shco mode %s", what);
    }
    return 1;
}
