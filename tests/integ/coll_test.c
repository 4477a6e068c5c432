/*
 * Integration test of the collectives, launched by mpirun (PMIx bootstrap)
 * or forked by tests/integ/fork_test (callback bootstrap). Every received
 * byte is checked against a pattern that depends on the call, the source and
 * the destination, so stale or overwritten data cannot pass.
 *
 *   coll_test matrix                every alg x path x coll x size, blocking and not
 *   coll_test skew ITERS US MODE    back-to-back calls under injected delays;
 *                                   MODE random (all ranks) or late (last rank)
 *   coll_test env                   sizes 0..1 MiB with the ARCOLL_* of the environment
 *   coll_test sizes                 the algorithms under test, 0 and 1 B .. 64 KiB per block
 *   coll_test realloc               zero-copy into freed and reallocated buffers
 *   coll_test bad                   bad input: each case fails cleanly
 *   coll_test kill                  the last rank dies mid-run; others must error
 *   coll_test v | vbad | inflight | split | vskew ITERS US
 *                                   the other collectives (tests/integ/coll_more.c)
 *   coll_test qps N[,N...]          a few alltoalls with the configured algorithm, then
 *                                   rank i must have N_i RC QPs (one N: every rank)
 *   coll_test heap [shared|private] the node heap: every rank reads every other's heap
 *                                   buffers through their owner's pointers (one host)
 *   coll_test heapauto [shared|private]
 *                                   which algorithm served (arcoll_context_counters) with the
 *                                   environment's auto or sh_co, on heap, malloc'd and mixed
 *                                   buffers: sh_co counted where it ran, fallbacks where not;
 *                                   then calls in flight on mixed buffers
 *   coll_test heapbench             what sh_co's fallback costs at 8 B .. 4 KiB (with
 *                                   ARCOLL_TUNE=alltoall:0-inf:@sh_co#allgather:0-inf:@sh_co)
 *   coll_test heapcoll ITERS US     alltoall and allgather on buffers from arcoll_heap_malloc
 *                                   with the algorithms of the environment (sh_co: run.sh
 *                                   counts its "ran as sh_co" debug lines), 1 B .. 1 MiB, then
 *                                   ITERS back-to-back calls under random delays up to US
 *   coll_test heapmr [api|preload] [ITERS]
 *                                   zero-copy calls on heap buffers reallocated per call,
 *                                   the heap MR's registrations counted (coll_heapmr.c)
 *   coll_test phasefault PHASE SIG  the last rank kills (SIG kill) or stops (stop) itself
 *                                   just before PHASE (init, create, destroy, alltoall,
 *                                   finalize); every survivor must fail that call with
 *                                   TIMEOUT or PEER (BOOTSTRAP: init through callbacks)
 *                                   within ARCOLL_TIMEOUT_MS + 5 s (mpirun, tcp_launch)
 *
 * COLL_TEST_ALGS=A,B,...: the algorithms under test (default direct, pap,
 * shm_direct and pap_shm): names of src/config/algs.h that serve alltoall or
 * allgather, and auto; an unknown name fails the run (exit status 2).
 *
 * Rank 0 prints "N passed, N failed" (summed over ranks); exit status 0 only
 * if nothing failed. main is tests/integ/coll_test_main.c; fork_test and
 * tcp_launch call coll_test_main with their own bootstrap callbacks.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coll_test.h"
#include "config/algs.h"

int ct_rank, ct_nranks;
static char ct_prefix[32] = "rank 0";
tl_tally_t ct_tally = {ct_prefix, 0, 0};
int (*coll_test_extra)(arcoll_context_t ctx, const char *mode, int argc, char **argv);
static double init_ms; /* arcoll_init's wall time here (qps prints it) */

/* The algorithms coll_test knows: those of the library's list (src/config/algs.h) that serve
 * alltoall or allgather, in its order, with the collectives they serve; then auto (the
 * tuning table's choice). */
#define CT_KNOWN(id, name, colls) {#name, (colls) & (ALGS_A2A | ALGS_AG)},
static const struct ct_known {
    const char *name;
    unsigned colls; /* ALGS_A2A, ALGS_AG */
} ct_known[] = {CORE_ALG_LIST(CT_KNOWN){"auto", ALGS_A2A | ALGS_AG}};
#define NKNOWN ((int)(sizeof(ct_known) / sizeof(ct_known[0])))

/* Algorithms under test: these four, or the comma-separated COLL_TEST_ALGS (the others only
 * when named: the alltoall-only ones need pretend nodes to differ from pap; auto is the
 * tuning table's choice). */
#define CT_DEFAULT_ALGS "direct,pap,shm_direct,pap_shm"
static const char *algs[NKNOWN];
static unsigned alg_colls[NKNOWN];
static int nalgs;

/* The entry of the name name[0..len) that serves alltoall or allgather, or NULL. */
static const struct ct_known *ct_find(const char *name, size_t len)
{
    for (int k = 0; k < NKNOWN; k++)
        if (strlen(ct_known[k].name) == len && strncmp(ct_known[k].name, name, len) == 0 &&
            ct_known[k].colls != 0)
            return &ct_known[k];
    return NULL;
}

/* The algorithms COLL_TEST_ALGS names, in the list's order; -1 (and why, with the names it
 * knows) if it names one that it does not know (or serves neither collective), or is empty. */
static int algs_init(void)
{
    const char *env = getenv("COLL_TEST_ALGS"), *list = env != NULL ? env : CT_DEFAULT_ALGS;
    int chosen[NKNOWN] = {0};

    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ",");
        const struct ct_known *k = ct_find(p, len);
        if (k == NULL) {
            fprintf(stderr,
                    "coll_test: COLL_TEST_ALGS=%s: unknown algorithm \"%.*s\"; known:", list,
                    (int)len, p);
            for (int i = 0; i < NKNOWN; i++)
                if (ct_known[i].colls != 0)
                    fprintf(stderr, " %s", ct_known[i].name);
            fputc('\n', stderr);
            return -1;
        }
        chosen[k - ct_known] = 1;
        p += len;
        if (*p == '\0')
            break;
    }
    nalgs = 0;
    for (int k = 0; k < NKNOWN; k++)
        if (chosen[k]) {
            algs[nalgs] = ct_known[k].name;
            alg_colls[nalgs++] = ct_known[k].colls;
        }
    return 0;
}

/* Collective c (1 alltoall, 0 allgather) of algorithm a under test: the algorithm where it
 * serves c, else pap; and the range of c it serves, [c_lo, c_hi). */
static const char *alg_for(int a, int c)
{
    return alg_colls[a] & (c ? ALGS_A2A : ALGS_AG) ? algs[a] : "pap";
}

static int c_lo(int a)
{
    return alg_colls[a] & ALGS_AG ? 0 : 1;
}

static int c_hi(int a)
{
    return alg_colls[a] & ALGS_A2A ? 2 : 1;
}

int ct_a2a_only(const char *alg)
{
    const struct ct_known *k = ct_find(alg, strlen(alg));

    return k != NULL && k->colls == ALGS_A2A;
}

static void ct_set_rank(int r)
{
    ct_rank = r;
    snprintf(ct_prefix, sizeof(ct_prefix), "rank %d", r);
}

void ct_check(int ok, const char *file, int line, const char *fmt, ...)
{
    char msg[1024] = "";
    va_list ap;

    if (!ok) {
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
    }
    tl_expect(&ct_tally, ok, "%s:%d: %s", file, line, msg);
}

void ct_fill(int alltoall, uint64_t call, int me, int n, size_t bytes, uint8_t *sbuf)
{
    if (alltoall)
        tl_fill_blocks(sbuf, bytes, n, call, me);
    else
        tl_fill(sbuf, bytes, call, me, TL_ANY);
}

size_t ct_verify(int alltoall, uint64_t call, int me, int n, size_t bytes, const uint8_t *rbuf,
                 const char *what)
{
    int dst = alltoall ? me : TL_ANY;
    size_t first = 0, bad = tl_check_blocks(rbuf, bytes, n, call, dst, &first);

    if (bad > 0)
        fprintf(stderr,
                "[rank %d] %s call %llu: %zu wrong bytes; byte %zu from rank %d is %u, want %u\n",
                me, what, (unsigned long long)call, bad, first % bytes, (int)(first / bytes),
                rbuf[first], tl_byte(call, (int)(first / bytes), dst, first % bytes));
    return bad;
}

void ct_set(arcoll_context_t ctx, const char *name, const char *value)
{
    int rc = arcoll_config_set(ctx, name, value);
    CHECK(rc == ARCOLL_OK, "config_set %s=%s: %s", name, value, arcoll_strerror(rc));
}

/* Algorithm a for both collectives (pap for one it does not serve). */
static void set_alg(arcoll_context_t ctx, int a)
{
    ct_set(ctx, "ARCOLL_ALLTOALL_ALG", alg_for(a, 1));
    ct_set(ctx, "ARCOLL_ALLGATHER_ALG", alg_for(a, 0));
}

int ct_run_coll(arcoll_team_t team, int alltoall, int nonblocking, const void *s, void *r,
                size_t bytes)
{
    arcoll_request_t req;
    int rc;

    if (!nonblocking)
        return alltoall ? arcoll_alltoall(team, s, r, bytes) : arcoll_allgather(team, s, r, bytes);
    rc = alltoall ? arcoll_ialltoall(team, s, r, bytes, &req)
                  : arcoll_iallgather(team, s, r, bytes, &req);
    if (rc != ARCOLL_OK)
        return rc;
    while ((rc = arcoll_test(&req)) == ARCOLL_INPROGRESS)
        ;
    return rc;
}

/* One validated collective on a team; call numbers must match across ranks. */
void ct_one(arcoll_team_t team, int alltoall, int nonblocking, uint64_t call, size_t bytes,
            const char *what)
{
    int me = arcoll_team_rank(team), n = arcoll_team_size(team);
    size_t sl = alltoall ? bytes * (size_t)n : bytes, rl = bytes * (size_t)n;
    uint8_t *s = malloc(sl ? sl : 1), *r = malloc(rl ? rl : 1);
    int rc;

    ct_fill(alltoall, call, me, n, bytes, s);
    memset(r, 0xee, rl ? rl : 1);
    rc = ct_run_coll(team, alltoall, nonblocking, s, r, bytes);
    CHECK(rc == ARCOLL_OK, "%s: %s (%s)", what, arcoll_strerror(rc), arcoll_last_error(NULL));
    if (rc == ARCOLL_OK)
        CHECK(ct_verify(alltoall, call, me, n, bytes, r, what) == 0, "%s: wrong data", what);
    free(s);
    free(r);
}

static void test_matrix(arcoll_context_t ctx)
{
    static const char *paths[] = {"copy", "zcopy", "auto"};
    static const size_t sizes[] = {0, 1, 7, 4096, 1 << 20};
    arcoll_team_t world = arcoll_team_world(ctx);
    uint64_t call = 0;
    char what[128];

    for (int a = 0; a < nalgs; a++) {
        set_alg(ctx, a);
        for (int p = 0; p < 3; p++) {
            ct_set(ctx, "ARCOLL_PATH", paths[p]);
            for (int c = c_lo(a); c < c_hi(a); c++)
                for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++)
                    for (int nb = 0; nb < 2; nb++) {
                        snprintf(what, sizeof(what), "%s %s/%s %zu B%s",
                                 c ? "alltoall" : "allgather", algs[a], paths[p], sizes[z],
                                 nb ? " nonblocking" : "");
                        ct_one(world, c, nb, ++call, sizes[z], what);
                    }
        }
    }
    /* A sub-team of the odd ranks in reverse order (not "team == all ranks"),
     * with small bounce slots so that messages fragment. */
    ct_set(ctx, "ARCOLL_BOUNCE_SIZE", "64");
    {
        int members[64], k = 0, mine = 0;
        arcoll_team_t sub;
        for (int i = ct_nranks - 1; i >= 0; i--)
            if (i % 2 == ct_rank % 2)
                members[k++] = i;
        mine = k;
        int rc = arcoll_team_create(ctx, members, mine, &sub);
        CHECK(rc == ARCOLL_OK && sub != NULL, "team_create: %s", arcoll_strerror(rc));
        if (rc == ARCOLL_OK) {
            CHECK(arcoll_team_size(sub) == k, "sub-team size %d want %d", arcoll_team_size(sub), k);
            for (int a = 0; a < nalgs; a++) {
                set_alg(ctx, a);
                for (int p = 0; p < 2; p++) {
                    ct_set(ctx, "ARCOLL_PATH", paths[p]);
                    for (int c = c_lo(a); c < c_hi(a); c++) {
                        snprintf(what, sizeof(what), "sub-team %s %s/%s 1000 B",
                                 c ? "alltoall" : "allgather", algs[a], paths[p]);
                        ct_one(sub, c, 0, ++call, 1000, what);
                    }
                }
            }
            rc = arcoll_team_destroy(ctx, sub);
            CHECK(rc == ARCOLL_OK, "team_destroy: %s", arcoll_strerror(rc));
        }
    }
    /* All ranks, even ones first: with pretend nodes, a node's ranks are not
     * consecutive in the team (the shared-memory algorithms' general case). */
    ct_set(ctx, "ARCOLL_BOUNCE_SIZE", "auto");
    {
        int members[256], k = 0;
        arcoll_team_t sub;
        for (int i = 0; i < ct_nranks; i += 2)
            members[k++] = i;
        for (int i = 1; i < ct_nranks; i += 2)
            members[k++] = i;
        int rc = arcoll_team_create(ctx, members, k, &sub);
        CHECK(rc == ARCOLL_OK && sub != NULL, "team_create: %s", arcoll_strerror(rc));
        if (rc == ARCOLL_OK) {
            for (int a = 0; a < nalgs; a++) {
                set_alg(ctx, a);
                for (int c = c_lo(a); c < c_hi(a); c++)
                    for (int nb = 0; nb < 2; nb++) {
                        snprintf(what, sizeof(what), "interleaved team %s %s 1000 B%s",
                                 c ? "alltoall" : "allgather", algs[a], nb ? " nonblocking" : "");
                        ct_one(sub, c, nb, ++call, 1000, what);
                    }
            }
            rc = arcoll_team_destroy(ctx, sub);
            CHECK(rc == ARCOLL_OK, "team_destroy: %s", arcoll_strerror(rc));
        }
    }
}

void ct_delay_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    if (us > 0)
        nanosleep(&ts, NULL);
}

/* Back-to-back calls with a random delay before each. In "late" mode only the
 * last rank is delayed, so the others run a whole call ahead of it and write
 * the next epoch while it still reads the current one. In "mix" mode (random
 * delays) the algorithm changes with every call, through all of the list:
 * algorithms share the node segments and must hand them over safely. */
static void test_skew(arcoll_context_t ctx, long iters, long max_us, const char *mode)
{
    static const char *paths[] = {"copy", "zcopy"};
    int late = strcmp(mode, "late") == 0, mix = strcmp(mode, "mix") == 0;
    arcoll_team_t team;
    uint64_t call = 0;
    int rc;

    srand(1234u + (unsigned)ct_rank * 7919u);
    /* Small bounce slots: the 200-byte copy-path messages go as 4 fragments. */
    ct_set(ctx, "ARCOLL_BOUNCE_SIZE", "64");
    int *all = malloc(sizeof(int) * (size_t)ct_nranks);
    for (int i = 0; i < ct_nranks; i++)
        all[i] = i;
    rc = arcoll_team_create(ctx, all, ct_nranks, &team);
    free(all);
    CHECK(rc == ARCOLL_OK, "team_create: %s", arcoll_strerror(rc));
    if (rc != ARCOLL_OK)
        return;
    for (int a = 0; a < (mix ? 1 : nalgs); a++) {
        set_alg(ctx, a);
        for (int p = 0; p < 2; p++) {
            ct_set(ctx, "ARCOLL_PATH", paths[p]);
            for (int c = mix ? 0 : c_lo(a); c < (mix ? 2 : c_hi(a)); c++) {
                size_t sizes[] = {8, 200};
                int n = ct_nranks, bad_calls = 0, errors = 0;
                uint8_t *s = malloc(200 * (size_t)n), *r = malloc(200 * (size_t)n);
                for (long it = 0; it < iters; it++) {
                    size_t bytes = sizes[it % 2];
                    call++;
                    if (mix) {
                        int m = (int)((it / 2) % nalgs); /* both sizes with each algorithm */
                        ct_set(ctx, c ? "ARCOLL_ALLTOALL_ALG" : "ARCOLL_ALLGATHER_ALG",
                               alg_for(m, c));
                    }
                    ct_fill(c, call, ct_rank, n, bytes, s);
                    if (!late || ct_rank == n - 1)
                        ct_delay_us(rand() % (max_us + 1));
                    rc = c ? arcoll_alltoall(team, s, r, bytes)
                           : arcoll_allgather(team, s, r, bytes);
                    if (rc != ARCOLL_OK) {
                        if (errors++ == 0)
                            fprintf(stderr, "[rank %d] call %llu: %s\n", ct_rank,
                                    (unsigned long long)call, arcoll_strerror(rc));
                        break;
                    }
                    bad_calls += ct_verify(c, call, ct_rank, n, bytes, r, "skew") != 0;
                }
                CHECK(errors == 0 && bad_calls == 0,
                      "%s %s/%s skew %s: %d corrupted calls of %ld, %d errors",
                      c ? "alltoall" : "allgather", algs[a], paths[p], mode, bad_calls, iters,
                      errors);
                free(s);
                free(r);
                if (errors)
                    goto out;
            }
        }
    }
out:
    arcoll_team_destroy(ctx, team);
}

/* Calls on heap buffers (docs/heap.md) with the algorithms of the
 * environment: 6 sizes x 2 collectives, then iters skewed calls of each
 * collective (8 and 200 B alternating). The summary allgather afterwards runs
 * as pap, so that every sh_co call of a run is one of these. */
static void test_heapcoll(arcoll_context_t ctx, long iters, long max_us)
{
    static const size_t sizes[] = {1, 8, 200, 4096, 65536, 1 << 20};
    arcoll_team_t world = arcoll_team_world(ctx);
    size_t len = ((size_t)1 << 20) * (size_t)ct_nranks;
    uint8_t *s = arcoll_heap_malloc(len), *r = arcoll_heap_malloc(len);
    uint64_t call = 0;
    char what[160];
    int rc;

    CHECK(s != NULL && r != NULL && arcoll_heap_contains(s) && arcoll_heap_contains(r),
          "heap buffers of %zu bytes", len);
    if (s == NULL || r == NULL)
        goto out;
    srand(4321u + (unsigned)ct_rank * 7919u);
    for (int c = 0; c < 2; c++) {
        const char *alg =
            arcoll_config_get(ctx, c ? "ARCOLL_ALLTOALL_ALG" : "ARCOLL_ALLGATHER_ALG");
        int bad_calls = 0, errors = 0;
        for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
            snprintf(what, sizeof(what), "heap %s %s %zu B", c ? "alltoall" : "allgather", alg,
                     sizes[z]);
            ct_fill(c, ++call, ct_rank, ct_nranks, sizes[z], s);
            memset(r, 0xee, sizes[z] * (size_t)ct_nranks);
            rc = ct_run_coll(world, c, 0, s, r, sizes[z]);
            CHECK(rc == ARCOLL_OK, "%s: %s (%s)", what, arcoll_strerror(rc),
                  arcoll_last_error(NULL));
            if (rc == ARCOLL_OK)
                CHECK(ct_verify(c, call, ct_rank, ct_nranks, sizes[z], r, what) == 0,
                      "%s: wrong data", what);
        }
        for (long it = 0; it < iters; it++) {
            size_t bytes = it % 2 ? 200 : 8;
            ct_fill(c, ++call, ct_rank, ct_nranks, bytes, s);
            ct_delay_us(rand() % (max_us + 1));
            rc = c ? arcoll_alltoall(world, s, r, bytes) : arcoll_allgather(world, s, r, bytes);
            if (rc != ARCOLL_OK) {
                errors++;
                fprintf(stderr, "[rank %d] heap skew call %llu: %s\n", ct_rank,
                        (unsigned long long)call, arcoll_strerror(rc));
                break;
            }
            bad_calls += ct_verify(c, call, ct_rank, ct_nranks, bytes, r, "heap skew") != 0;
        }
        CHECK(errors == 0 && bad_calls == 0,
              "heap %s %s skew: %d corrupted calls of %ld, %d errors", c ? "alltoall" : "allgather",
              alg, bad_calls, iters, errors);
    }
out:
    arcoll_heap_free(r);
    arcoll_heap_free(s);
    ct_set(ctx, "ARCOLL_ALLTOALL_ALG", "pap");
    ct_set(ctx, "ARCOLL_ALLGATHER_ALG", "pap");
}

/* What served each call, by arcoll_context_counters: with the algorithms of
 * the environment (auto or sh_co) on buffers in the heap, outside it (malloc,
 * glibc's unless preloaded), on rank 0 only outside it, and small heap calls
 * (200 B, under every default sh_co rule). auto picks sh_co only where the heap
 * is shared (want "shared"), at sizes of the default table's sh_co rules
 * (64 KiB and 512 KiB are in all of them); forced sh_co is tried at any size.
 * A tried call counts once, as sh_co if every rank's buffers are in the
 * shared heap, else as a fallback; under auto, after a fallback the next
 * 1, 2, 4 .. 64 tried calls (doubling per fallback in a row, cleared by a
 * served call) go to pap at once and count as fallbacks and skips (the
 * model below follows alg_sh_co.c). Every call's data is checked. */
/* Four calls in flight at a time, each on heap or malloc'd buffers (the same
 * draw on every rank), 64 KiB per peer: the hint's choice must stay the same
 * on every rank while calls overlap (a difference would pair sh_co with pap:
 * a mismatch or a timeout), and every call's data must be right. */
static void heapauto_inflight(arcoll_context_t ctx, uint8_t *hs, uint8_t *hr, uint8_t *ms,
                              uint8_t *mr)
{
    enum { K = 4, ROUNDS = 40, BYTES = 65536 };
    arcoll_team_t world = arcoll_team_world(ctx);
    size_t slice = (size_t)BYTES * (size_t)ct_nranks; /* call k's part of each buffer */
    arcoll_request_t req[K];
    uint64_t call = 9000;
    int bad = 0, errors = 0;

    srand(777u); /* the same draw on every rank */
    for (int round = 0; round < ROUNDS && !errors; round++) {
        int c = round % 2, rc;
        uint8_t *r[K];
        for (int k = 0; k < K; k++) {
            int in_heap = rand() % 3 != 0;
            uint8_t *sb = (in_heap ? hs : ms) + (size_t)k * slice;
            r[k] = (in_heap ? hr : mr) + (size_t)k * slice;
            ct_fill(c, call + (uint64_t)k, ct_rank, ct_nranks, BYTES, sb);
            memset(r[k], 0xee, slice);
            rc = c ? arcoll_ialltoall(world, sb, r[k], BYTES, &req[k])
                   : arcoll_iallgather(world, sb, r[k], BYTES, &req[k]);
            if (rc != ARCOLL_OK) {
                fprintf(stderr, "[rank %d] in flight: start: %s\n", ct_rank, arcoll_strerror(rc));
                errors++;
                for (int j = 0; j < k; j++)
                    arcoll_wait(&req[j]);
                break;
            }
        }
        if (errors)
            break;
        rc = arcoll_waitall(K, req);
        if (rc != ARCOLL_OK) {
            fprintf(stderr, "[rank %d] in flight: wait: %s\n", ct_rank, arcoll_strerror(rc));
            errors++;
            break;
        }
        for (int k = 0; k < K; k++)
            bad +=
                ct_verify(c, call + (uint64_t)k, ct_rank, ct_nranks, BYTES, r[k], "in flight") != 0;
        call += K;
    }
    CHECK(errors == 0 && bad == 0, "heapauto in flight: %d corrupted calls, %d errors", bad,
          errors);
}

static void test_heapauto(arcoll_context_t ctx, const char *want)
{
    static const size_t sizes[] = {65536, 1 << 19, 200};
    static const char *const where[] = {"heap", "malloc", "rank 0 malloc"};
    /* Per entry, both collectives at the three sizes: heap buffers, then malloc'd and mixed
     * ones in a row (a fallback, then skips doubling with each fallback in a row), then heap
     * buffers again (skipped until the skips run out, then served). */
    static const int plan[] = {0, 0, 1, 2, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    arcoll_team_t world = arcoll_team_world(ctx);
    size_t len = ((size_t)1 << 19) * (size_t)ct_nranks;
    uint8_t *hs = arcoll_heap_malloc(len), *hr = arcoll_heap_malloc(len);
    uint8_t *ms = malloc(len), *mr = malloc(len);
    int shared = strcmp(want, "shared") == 0;
    unsigned skip = 0, backoff = 0, skips = 0;
    uint64_t call = 500;
    char what[200];

    CHECK(arcoll_heap_is_shared() == shared, "arcoll_heap_is_shared() = %d, want %s",
          arcoll_heap_is_shared(), want);
    CHECK(hs != NULL && hr != NULL && ms != NULL && mr != NULL, "buffers of %zu bytes", len);
    if (hs == NULL || hr == NULL || ms == NULL || mr == NULL)
        goto out;
    for (size_t i = 0; i < sizeof(plan) / sizeof(plan[0]) * 2 * 3; i++) {
        int c = (int)(i % 2), w = plan[i / 6];
        size_t bytes = sizes[i / 2 % 3];
        const char *alg =
            arcoll_config_get(ctx, c ? "ARCOLL_ALLTOALL_ALG" : "ARCOLL_ALLGATHER_ALG");
        int forced = strcmp(alg, "sh_co") == 0;
        int in_heap = w == 0 || (w == 2 && ct_rank != 0);
        uint8_t *s = in_heap ? hs : ms, *r = in_heap ? hr : mr;
        int tried = forced || (shared && bytes >= 65536), skipped = 0, served;
        arcoll_counters_t c0, c1;
        int rc;
        if (w > 0 && bytes < 65536)
            continue; /* small calls: heap buffers only (on every rank alike) */
        /* The library's hint (src/alg/node/alg_sh_co.c), for auto only. */
        if (tried && !forced && skip > 0) {
            skip--;
            skipped = 1;
        }
        served = tried && !skipped && shared && w == 0;
        if (tried && !forced && !skipped) {
            backoff = served ? 0 : backoff == 0 ? 1 : backoff * 2 > 64 ? 64 : backoff * 2;
            skip = served ? 0 : backoff;
        }
        skips += (unsigned)skipped;
        snprintf(what, sizeof(what), "call %zu: %s %s, %s buffers, %zu B", i,
                 c ? "alltoall" : "allgather", alg, where[w], bytes);
        ct_fill(c, ++call, ct_rank, ct_nranks, bytes, s);
        memset(r, 0xee, bytes * (size_t)ct_nranks);
        rc = arcoll_context_counters(ctx, &c0, sizeof(c0));
        CHECK(rc == ARCOLL_OK, "arcoll_context_counters: %s", arcoll_strerror(rc));
        rc = ct_run_coll(world, c, (int)(call & 1), s, r, bytes);
        CHECK(rc == ARCOLL_OK, "%s: %s (%s)", what, arcoll_strerror(rc), arcoll_last_error(NULL));
        if (rc == ARCOLL_OK)
            CHECK(ct_verify(c, call, ct_rank, ct_nranks, bytes, r, what) == 0, "%s: wrong data",
                  what);
        arcoll_context_counters(ctx, &c1, sizeof(c1));
        CHECK(c1.sh_co_calls - c0.sh_co_calls == (unsigned long long)served &&
                  c1.sh_co_fallbacks - c0.sh_co_fallbacks ==
                      (unsigned long long)(tried && !served) &&
                  c1.sh_co_skips - c0.sh_co_skips == (unsigned long long)skipped,
              "%s: %llu sh_co calls, %llu fallbacks and %llu skips counted, want %d, %d and %d",
              what, c1.sh_co_calls - c0.sh_co_calls, c1.sh_co_fallbacks - c0.sh_co_fallbacks,
              c1.sh_co_skips - c0.sh_co_skips, served, tried && !served, skipped);
    }
    if (shared && strcmp(arcoll_config_get(ctx, "ARCOLL_ALLTOALL_ALG"), "auto") == 0)
        CHECK(skips > 0, "auto never skipped sh_co after a fallback");
    heapauto_inflight(ctx, hs, hr, ms, mr);
    {
        arcoll_counters_t k;
        memset(&k, 0xff, sizeof(k));
        /* A caller compiled with fewer fields: nothing past them is written. */
        CHECK(arcoll_context_counters(ctx, &k, sizeof(k.sh_co_calls)) == ARCOLL_OK &&
                  k.sh_co_fallbacks == ~0ULL,
              "arcoll_context_counters wrote past the size it was given");
        CHECK(arcoll_context_counters(ctx, NULL, sizeof(k)) == ARCOLL_ERR_INVALID &&
                  arcoll_context_counters(ctx, &k, 0) == ARCOLL_ERR_INVALID,
              "arcoll_context_counters accepted NULL or size 0");
    }
out:
    free(mr);
    free(ms);
    arcoll_heap_free(hr);
    arcoll_heap_free(hs);
    ct_set(ctx, "ARCOLL_ALLTOALL_ALG", "pap");
    ct_set(ctx, "ARCOLL_ALLGATHER_ALG", "pap");
}

/* sizes[0 .. nz) of both collectives on the world team, three times each (the
 * third nonblocking), with the configuration as it is. */
static void env_sizes(arcoll_context_t ctx, const size_t *sizes, size_t nz)
{
    arcoll_team_t world = arcoll_team_world(ctx);
    uint64_t call = 0;
    char what[160];

    for (int c = 0; c < 2; c++)
        for (size_t z = 0; z < nz; z++)
            for (int rep = 0; rep < 3; rep++) {
                snprintf(what, sizeof(what), "%s %s/%s %zu B", c ? "alltoall" : "allgather",
                         arcoll_config_get(ctx, c ? "ARCOLL_ALLTOALL_ALG" : "ARCOLL_ALLGATHER_ALG"),
                         arcoll_config_get(ctx, "ARCOLL_PATH"), sizes[z]);
                ct_one(world, c, rep == 2, ++call, sizes[z], what);
            }
}

/* Whatever ARCOLL_* the environment sets (the run script varies it). */
static void test_env(arcoll_context_t ctx)
{
    static const size_t sizes[] = {0, 1, 7, 4096, 1 << 20};

    env_sizes(ctx, sizes, sizeof(sizes) / sizeof(sizes[0]));
}

/* The algorithms under test at 0 and 1 B .. 64 KiB per block, around the
 * 16 KiB bounce slot (schedules fragment there). */
static void test_sizes(arcoll_context_t ctx)
{
    static const size_t sizes[] = {0, 1, 2, 7, 64, 1000, 4096, 16383, 16384, 16385, 65536};

    for (int a = 0; a < nalgs; a++) {
        set_alg(ctx, a);
        env_sizes(ctx, sizes, sizeof(sizes) / sizeof(sizes[0]));
    }
}

/* Zero-copy into buffers that are freed and allocated again, as an application
 * does: the same virtual address comes back with other pages, and no stale
 * registration may send data to the old ones. Default per-call registration,
 * explicit registration, and the cache with arcoll_mem_invalidate. */
static void test_realloc(arcoll_context_t ctx)
{
    arcoll_team_t world = arcoll_team_world(ctx);
    size_t bytes = 256 * 1024, len = bytes * (size_t)ct_nranks; /* mmap-sized: munmap on free */
    uint64_t call = 1000;
    char what[96];

    ct_set(ctx, "ARCOLL_PATH", "zcopy");
    for (int mode = 0; mode < 3; mode++) {
        ct_set(ctx, "ARCOLL_REGCACHE", mode == 2 ? "on" : "off");
        for (int it = 0; it < 6; it++) {
            uint8_t *s = malloc(len), *r = malloc(len);
            arcoll_mem_t mem = NULL;
            int rc;
            if (mode == 1) {
                rc = arcoll_mem_register(ctx, r, len, &mem);
                CHECK(rc == ARCOLL_OK, "arcoll_mem_register: %s", arcoll_strerror(rc));
            }
            ct_fill(1, ++call, ct_rank, ct_nranks, bytes, s);
            memset(r, 0, len);
            rc = arcoll_alltoall(world, s, r, bytes);
            snprintf(what, sizeof(what), "realloc mode %d iteration %d", mode, it);
            CHECK(rc == ARCOLL_OK, "%s: %s", what, arcoll_strerror(rc));
            if (rc == ARCOLL_OK)
                CHECK(ct_verify(1, call, ct_rank, ct_nranks, bytes, r, what) == 0, "%s: wrong data",
                      what);
            if (mem != NULL) {
                rc = arcoll_mem_deregister(ctx, mem);
                CHECK(rc == ARCOLL_OK, "arcoll_mem_deregister: %s", arcoll_strerror(rc));
            }
            if (mode == 2) {
                arcoll_mem_invalidate(ctx, s, len);
                arcoll_mem_invalidate(ctx, r, len);
            }
            free(s);
            free(r);
        }
    }
    ct_set(ctx, "ARCOLL_REGCACHE", "off");
}

static void test_bad(arcoll_context_t ctx)
{
    arcoll_team_t world = arcoll_team_world(ctx), t2;
    size_t n = (size_t)ct_nranks;
    char *buf = calloc(n * 64, 2), *s = buf, *r = buf + n * 64;
    int rc, all[256];
    uint64_t call = 0;

    for (int i = 0; i < ct_nranks; i++)
        all[i] = i;
    rc = arcoll_alltoall(world, NULL, r, 8);
    CHECK(rc == ARCOLL_ERR_INVALID, "NULL send buffer: %s", arcoll_strerror(rc));
    rc = arcoll_allgather(world, s, NULL, 8);
    CHECK(rc == ARCOLL_ERR_INVALID, "NULL receive buffer: %s", arcoll_strerror(rc));
    rc = arcoll_alltoall(world, NULL, NULL, 0);
    CHECK(rc == ARCOLL_OK, "zero bytes is a no-op: %s", arcoll_strerror(rc));
    rc = arcoll_alltoall(world, buf, buf + 8, 16);
    CHECK(rc == ARCOLL_ERR_INVALID, "overlapping buffers: %s", arcoll_strerror(rc));
    rc = arcoll_allgather(world, buf, buf, 8);
    CHECK(rc == ARCOLL_ERR_INVALID, "identical buffers: %s", arcoll_strerror(rc));
    rc = arcoll_alltoall(world, s, r, SIZE_MAX / 2);
    CHECK(rc == ARCOLL_ERR_INVALID, "huge count: %s", arcoll_strerror(rc));
    rc = arcoll_config_set(ctx, "ARCOLL_PATH", "fast");
    CHECK(rc == ARCOLL_ERR_CONFIG, "bad config value: %s", arcoll_strerror(rc));
    rc = arcoll_config_set(ctx, "ARCOLL_NO_SUCH", "1");
    CHECK(rc == ARCOLL_ERR_CONFIG, "unknown config variable: %s", arcoll_strerror(rc));
    rc = arcoll_config_set(ctx, "ARCOLL_TIMEOUT_MS", "-5");
    CHECK(rc == ARCOLL_ERR_CONFIG, "negative timeout: %s", arcoll_strerror(rc));
    /* The team still works after all that. */
    ct_one(world, 1, 0, ++call, 16, "after bad input");

    /* Sizes that differ across ranks: never an overrun, an error on the ranks
     * that see it (copy and zero-copy), within the timeout on the others. */
    if (ct_nranks > 1) {
        static const char *paths[] = {"copy", "zcopy"};
        ct_set(ctx, "ARCOLL_TIMEOUT_MS", "3000");
        for (int p = 0; p < 2; p++) {
            ct_set(ctx, "ARCOLL_PATH", paths[p]);
            rc = arcoll_team_create(ctx, all, ct_nranks, &t2);
            CHECK(rc == ARCOLL_OK, "team_create: %s", arcoll_strerror(rc));
            size_t bytes = ct_rank == 0 ? 24 : 16;
            memset(r, 0x5a, n * 64);
            rc = arcoll_alltoall(t2, s, r, bytes);
            int saw = rc == ARCOLL_ERR_MISMATCH, any;
            CHECK(rc == ARCOLL_ERR_MISMATCH || rc == ARCOLL_ERR_TIMEOUT || rc == ARCOLL_OK,
                  "size mismatch (%s): unexpected %s", paths[p], arcoll_strerror(rc));
            for (size_t i = n * 24; i < n * 64; i++)
                if ((unsigned char)r[i] != 0x5a) {
                    CHECK(0, "size mismatch (%s) wrote past the receive buffer", paths[p]);
                    break;
                }
            /* Somebody must have seen it: a world allgather of the flags. */
            int flags[256];
            rc = arcoll_allgather(world, &saw, flags, sizeof(int));
            CHECK(rc == ARCOLL_OK, "allgather of flags: %s", arcoll_strerror(rc));
            any = 0;
            for (int i = 0; i < ct_nranks; i++)
                any |= flags[i];
            CHECK(any, "size mismatch (%s): no rank reported ARCOLL_ERR_MISMATCH", paths[p]);
            rc = arcoll_alltoall(t2, s, r, 16);
            CHECK(rc == ARCOLL_ERR_STATE || saw == 0, "a failed team must refuse further calls: %s",
                  arcoll_strerror(rc));
            arcoll_team_destroy(ctx, t2);
        }
        ct_set(ctx, "ARCOLL_TIMEOUT_MS", "60000");
    }
    /* A schedule's message whose length is on the zero-copy side of
     * ARCOLL_SCHED_ZCOPY at one end only (ring allgather: rank 0's blocks are
     * 24 bytes, the others' 16, the threshold 20; docs/protocol.md §17): rank
     * 0 waits for an advertisement from rank 1, which waits for fragments, and
     * rank n-1's fragments land where rank 0 waits for a done word. Every rank
     * must report the mismatch, none time out. */
    if (ct_nranks > 1) {
        struct timespec a, b;
        int codes[256], mine;
        char alg[64], path[16];
        snprintf(alg, sizeof(alg), "%s", arcoll_config_get(ctx, "ARCOLL_ALLGATHER_ALG"));
        snprintf(path, sizeof(path), "%s", arcoll_config_get(ctx, "ARCOLL_PATH"));
        ct_set(ctx, "ARCOLL_TIMEOUT_MS", "10000");
        ct_set(ctx, "ARCOLL_PATH", "auto");
        ct_set(ctx, "ARCOLL_ALLGATHER_ALG", "ring");
        ct_set(ctx, "ARCOLL_SCHED_ZCOPY", "20");
        ct_set(ctx, "ARCOLL_ZCOPY_THRESHOLD", "1"); /* a key at any size: CMA */
        rc = arcoll_team_create(ctx, all, ct_nranks, &t2);
        CHECK(rc == ARCOLL_OK, "team_create: %s", arcoll_strerror(rc));
        memset(r, 0x5a, n * 64);
        clock_gettime(CLOCK_MONOTONIC, &a);
        rc = arcoll_allgather(t2, s, r, ct_rank == 0 ? 24 : 16);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
        CHECK(rc == ARCOLL_ERR_MISMATCH, "schedule zero-copy on one side only: %s after %.2f s",
              arcoll_strerror(rc), secs);
        for (size_t i = n * 24; i < n * 64; i++)
            if ((unsigned char)r[i] != 0x5a) {
                CHECK(0, "schedule zero-copy on one side only wrote past the receive buffer");
                break;
            }
        arcoll_team_destroy(ctx, t2);
        mine = rc;
        rc = arcoll_allgather(world, &mine, codes, sizeof(int));
        CHECK(rc == ARCOLL_OK, "allgather of codes: %s", arcoll_strerror(rc));
        ct_set(ctx, "ARCOLL_ZCOPY_THRESHOLD", "auto");
        ct_set(ctx, "ARCOLL_SCHED_ZCOPY", "auto");
        ct_set(ctx, "ARCOLL_ALLGATHER_ALG", alg);
        ct_set(ctx, "ARCOLL_PATH", path);
        ct_set(ctx, "ARCOLL_TIMEOUT_MS", "60000");
    }
    /* Region settings that differ when a team is created (set after init, so
     * the init digest cannot see them): refused on every rank, never used. */
    if (ct_nranks > 1) {
        ct_set(ctx, "ARCOLL_BOUNCE_SIZE", "64k");
        ct_set(ctx, "ARCOLL_LANES", ct_rank == 0 ? "1" : "4");
        rc = arcoll_team_create(ctx, all, ct_nranks, &t2);
        CHECK(rc == ARCOLL_ERR_CONFIG, "lanes that differ across ranks: %s", arcoll_strerror(rc));
        if (rc == ARCOLL_OK)
            arcoll_team_destroy(ctx, t2);
        ct_set(ctx, "ARCOLL_LANES", "4");
        ct_set(ctx, "ARCOLL_BOUNCE_SIZE", "auto");
        ct_one(world, 1, 0, ++call, 16, "after a refused team");
        /* Pipe windows that differ: other pipe lanes (docs/protocol.md §2). */
        ct_set(ctx, "ARCOLL_PIPE_WINDOW", ct_rank == 0 ? "0" : "256k"); /* above any slot */
        rc = arcoll_team_create(ctx, all, ct_nranks, &t2);
        CHECK(rc == ARCOLL_ERR_CONFIG, "pipe windows that differ across ranks: %s",
              arcoll_strerror(rc));
        if (rc == ARCOLL_OK)
            arcoll_team_destroy(ctx, t2);
        ct_set(ctx, "ARCOLL_PIPE_WINDOW", "64k");
        ct_one(world, 1, 0, ++call, 16, "after a refused team");
    }
    /* A peer that never arrives: the last rank skips one call; the others must
     * fail with ARCOLL_ERR_TIMEOUT within ARCOLL_TIMEOUT_MS, not hang. */
    if (ct_nranks > 1) {
        rc = arcoll_team_create(ctx, all, ct_nranks, &t2);
        CHECK(rc == ARCOLL_OK, "team_create: %s", arcoll_strerror(rc));
        ct_set(ctx, "ARCOLL_TIMEOUT_MS", "1000");
        if (ct_rank != ct_nranks - 1) {
            struct timespec a, b;
            clock_gettime(CLOCK_MONOTONIC, &a);
            rc = arcoll_alltoall(t2, s, r, 8);
            clock_gettime(CLOCK_MONOTONIC, &b);
            double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
            CHECK(rc == ARCOLL_ERR_TIMEOUT, "peer never arrives: %s", arcoll_strerror(rc));
            CHECK(secs >= 0.9 && secs < 5.0, "timeout after %.2f s, ARCOLL_TIMEOUT_MS=1000", secs);
        }
        ct_set(ctx, "ARCOLL_TIMEOUT_MS", "60000");
        rc = arcoll_team_destroy(ctx, t2);
        CHECK(rc == ARCOLL_OK, "team_destroy after a timeout: %s", arcoll_strerror(rc));
    }
    /* A member list that does not contain the caller. */
    {
        int other = (ct_rank + 1) % ct_nranks;
        rc = arcoll_team_create(ctx, &other, ct_nranks > 1 ? 1 : 0, &t2);
        CHECK(ct_nranks == 1 ? rc == ARCOLL_OK : rc != ARCOLL_OK, "foreign member list: %s",
              arcoll_strerror(rc));
    }
    free(buf);
}

/* No write after return (issue 40 item 1): with ARCOLL_TIMEOUT_MS = T (ms,
 * set here after init), the last rank comes 2T late to a zero-copy call (len
 * bytes per peer, 256 KiB unless given), so the others time out while they have advertised their
 * receive buffers to it. Each of them fills its receive buffer with a canary
 * at once and checks, 2T later (the late rank has come and gone by then),
 * that no byte of it changed: the late rank must not write into a buffer whose
 * call has returned. coll is alltoall, allgather or alltoallv. Calls 1-2
 * before are ordinary (checked).
 * heap: the buffers are in the node heap and the alltoall or allgather runs
 * as sh_co, where every rank copies a share of the blocks between the others'
 * buffers (docs/protocol.md §15): no copier may write into a returned call's
 * buffer either; each also overwrites its send buffer on return, and a late
 * rank's call must fail (at two ranks with smaller blocks sh_co copies by
 * column: the late rank then only reads the returned rank's send buffer, and
 * what it read never counts). heap alltoallv: no sh_co; the flat zero-copy path advertises
 * the heap buffers by address and its peers memcpy into them (protocol.md §6,
 * "Heap buffers"), which must revoke as a registration does.
 * stall (coll_test_fault stallwrite, ARCOLL_FAULT=zc_stall): the last rank
 * comes on time but stalls for 2T inside its first write of call 3, after its
 * last look at the advertisement: on shared memory the receiver it stalls on
 * must wait for that copy to end before it returns, on verbs the heap MR must
 * be revoked (heap alltoallv: by address on shared memory, the heap MR on
 * verbs). */
static void test_latewrite(arcoll_context_t ctx, const char *coll, int heap, int stall, long t_ms,
                           size_t len)
{
    char tbuf[32];
    arcoll_team_t world = arcoll_team_world(ctx);
    size_t n = (size_t)ct_nranks, changed = 0;
    int alltoall = strcmp(coll, "allgather") != 0, v = strcmp(coll, "alltoallv") == 0;
    uint8_t *s = heap ? arcoll_heap_calloc(n, len) : calloc(n, len);
    uint8_t *r = heap ? arcoll_heap_calloc(n, len) : calloc(n, len);
    size_t *cnt = calloc(n, sizeof(size_t)), *dsp = calloc(n, sizeof(size_t));
    int rc = ARCOLL_OK, late = ct_rank == ct_nranks - 1;
    double t0, secs = 0;
    arcoll_counters_t c0, c1;
    arcoll_resources_t r0, r1;

    for (size_t j = 0; j < n; j++) {
        cnt[j] = len;
        dsp[j] = j * len;
    }
    snprintf(tbuf, sizeof(tbuf), "%ld", t_ms);
    /* stall: calls 1-2 connect and register (the heap MR) under the launcher's timeout. */
    if (!stall)
        ct_set(ctx, "ARCOLL_TIMEOUT_MS", tbuf);
    ct_set(ctx, "ARCOLL_PATH", "zcopy");
    /* An algorithm named in the environment stays: a schedule (ring, rdd)
     * writes its zero-copy messages into the heap buffers by address too
     * (protocol.md §17). */
    if (heap && getenv("ARCOLL_ALLTOALL_ALG") == NULL)
        ct_set(ctx, "ARCOLL_ALLTOALL_ALG", "sh_co");
    if (heap && getenv("ARCOLL_ALLGATHER_ALG") == NULL)
        ct_set(ctx, "ARCOLL_ALLGATHER_ALG", "sh_co");
    CHECK(arcoll_context_counters(ctx, &c0, sizeof(c0)) == ARCOLL_OK, "counters");
    CHECK(arcoll_context_resources(ctx, &r0) == ARCOLL_OK, "resources");
    for (uint64_t call = 1; call <= 3; call++) {
        if (call == 3 && heap && v) {
            CHECK(arcoll_context_counters(ctx, &c1, sizeof(c1)) == ARCOLL_OK, "counters");
            CHECK(arcoll_context_resources(ctx, &r1) == ARCOLL_OK, "resources");
            /* By address where the heap is shared memory, by the heap MR on verbs. */
            CHECK((c1.zcopy_heap_calls - c0.zcopy_heap_calls == 2 &&
                   c1.zcopy_reg_calls == c0.zcopy_reg_calls) ||
                      r1.heap_mr_hits - r0.heap_mr_hits >= 2,
                  "alltoallv on heap buffers: %llu calls advertised by address, %llu registered, "
                  "%llu heap MR hits (expected 2, 0 or 2+ hits)",
                  c1.zcopy_heap_calls - c0.zcopy_heap_calls,
                  c1.zcopy_reg_calls - c0.zcopy_reg_calls,
                  (unsigned long long)(r1.heap_mr_hits - r0.heap_mr_hits));
        }
        if (call == 3 && stall)
            ct_set(ctx, "ARCOLL_TIMEOUT_MS", tbuf);
        if (call == 3 && late && !stall)
            usleep((useconds_t)(2 * t_ms * 1000));
        ct_fill(alltoall, call, ct_rank, ct_nranks, len, s);
        t0 = ct_now();
        if (v)
            rc = arcoll_alltoallv(world, s, cnt, dsp, r, cnt, dsp);
        else if (alltoall)
            rc = arcoll_alltoall(world, s, r, len);
        else
            rc = arcoll_allgather(world, s, r, len);
        secs = ct_now() - t0;
        if (call < 3) {
            CHECK(rc == ARCOLL_OK, "call %llu: %s", (unsigned long long)call, arcoll_strerror(rc));
            CHECK(ct_verify(alltoall, call, ct_rank, ct_nranks, len, r, "latewrite") == 0,
                  "call %llu data", (unsigned long long)call);
        }
    }
    if (!late) {
        memset(r, 0xc5, n * len);
        memset(s, 0x5c, n * len); /* reused, as a program may once its call returned */
        usleep((useconds_t)(2 * t_ms * 1000));
        for (size_t b = 0; b < n * len; b++)
            changed += r[b] != 0xc5;
        CHECK(rc != ARCOLL_OK, "call 3 without the late rank returned %s", arcoll_strerror(rc));
        CHECK(changed == 0, "%zu bytes of the receive buffer changed after call 3 returned %s",
              changed, arcoll_strerror(rc));
        printf("[rank %d] %s %s %s%s: call 3 %s after %.2f s, %zu bytes changed after\n", ct_rank,
               rc != ARCOLL_OK && changed == 0 ? "CANARY-OK" : "CANARY-FAIL",
               stall ? "stallwrite" : "latewrite", coll, heap ? " (heap)" : "", arcoll_strerror(rc),
               secs, changed);
    } else {
        /* It came after the others returned (stall: after their timeout): its
         * call cannot have all its blocks. */
        CHECK(rc != ARCOLL_OK || stall, "the late rank's call 3 returned %s", arcoll_strerror(rc));
        printf("[rank %d] %s %s %s: call 3 %s after %.2f s\n", ct_rank,
               rc != ARCOLL_OK || stall ? "LATE-OK" : "LATE-FAIL",
               stall ? "stallwrite" : "latewrite", coll, arcoll_strerror(rc), secs);
    }
    fflush(stdout);
    usleep(500000);
    free(dsp);
    free(cnt);
    if (heap) {
        arcoll_heap_free(r);
        arcoll_heap_free(s);
    } else {
        free(r);
        free(s);
    }
}

static void test_kill(arcoll_context_t ctx)
{
    arcoll_team_t world = arcoll_team_world(ctx);
    size_t n = (size_t)ct_nranks;
    uint8_t *s = calloc(n, 64), *r = calloc(n, 64);
    int rc = ARCOLL_OK;
    struct timespec t0, t1;

    /* KILL_V=1: the same as alltoallv of 64-byte blocks (the v-form's algorithms) */
    const char *kv = getenv("KILL_V");
    size_t *cnt = calloc(2 * n, sizeof(size_t)), *dsp = cnt + n;

    for (size_t j = 0; cnt != NULL && j < n; j++) {
        cnt[j] = 64;
        dsp[j] = j * 64;
    }
    ct_set(ctx, "ARCOLL_TIMEOUT_MS", "5000");
    for (uint64_t call = 1; call <= 50; call++) {
        if (call == 20 && ct_rank == ct_nranks - 1)
            raise(SIGKILL);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        ct_fill(1, call, ct_rank, ct_nranks, 64, s);
        if (kv != NULL && *kv == '1' && cnt != NULL)
            rc = arcoll_alltoallv(world, s, cnt, dsp, r, cnt, dsp);
        else
            rc = arcoll_alltoall(world, s, r, 64);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (rc != ARCOLL_OK)
            break;
        CHECK(ct_verify(1, call, ct_rank, ct_nranks, 64, r, "kill") == 0, "data before the kill");
    }
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    CHECK(rc == ARCOLL_ERR_PEER || rc == ARCOLL_ERR_TIMEOUT, "survivor got %s",
          arcoll_strerror(rc));
    CHECK(secs < 6.0, "survivor took %.1f s to notice", secs);
    printf("[rank %d] KILL-OK %s after %.2f s\n", ct_rank, arcoll_strerror(rc), secs);
    fflush(stdout);
    free(cnt);
    free(s);
    free(r);
}

/* A rank that fails tells (docs/protocol.md §8): with ARCOLL_FAULT=fail_call
 * (coll_test_fault) context rank 1 fails call 4 (ARCOLL_ERR_CHANNEL, as a
 * transport error would) after 300 ms of waiting for the last rank, which
 * comes 1 s late. Blocks of 1 MiB on the copy path: rank 1 has written only
 * the first fragment to the late rank, which then waits for the rest from a
 * rank that is alive and will never send it. It must fail with rank 1's error
 * within 2 s of its arrival (ARCOLL_TIMEOUT_MS 20 s: before the failure word,
 * it timed out). The others may have had all of rank 1's part before it
 * failed: they succeed with their data right, or fail alike; then their next
 * call on the team (call 5, which rank 1 answers with ARCOLL_ERR_STATE at
 * once) must fail within 2 s too, not wait for rank 1 until the timeout
 * (issue 40 item 3: a failure one rank saw, then another collective). */
static void test_failtell(arcoll_context_t ctx)
{
    arcoll_team_t world = arcoll_team_world(ctx);
    size_t n = (size_t)ct_nranks, len = 1 << 20;
    uint8_t *s = calloc(n, len), *r = calloc(n, len);
    int rc = ARCOLL_OK, ok;
    double t0, secs = 0;

    ct_set(ctx, "ARCOLL_PATH", "copy");
    for (uint64_t call = 1; call <= 4; call++) {
        if (call == 4 && ct_rank == ct_nranks - 1)
            usleep(1000000);
        ct_fill(1, call, ct_rank, ct_nranks, len, s);
        t0 = ct_now();
        rc = arcoll_alltoall(world, s, r, len);
        secs = ct_now() - t0;
        if (call < 4) {
            CHECK(rc == ARCOLL_OK, "call %llu: %s", (unsigned long long)call, arcoll_strerror(rc));
            CHECK(ct_verify(1, call, ct_rank, ct_nranks, len, r, "failtell") == 0, "call %llu data",
                  (unsigned long long)call);
        }
    }
    ok = rc == ARCOLL_ERR_CHANNEL || (rc == ARCOLL_OK && ct_rank != 1 && ct_rank != ct_nranks - 1 &&
                                      ct_verify(1, 4, ct_rank, ct_nranks, len, r, "failtell") == 0);
    CHECK(ok, "call 4 returned %s, want the failed rank's error", arcoll_strerror(rc));
    CHECK(secs < 2.0, "call 4 took %.2f s", secs);
    if (rc == ARCOLL_OK) {
        t0 = ct_now();
        rc = arcoll_alltoall(world, s, r, len);
        secs = ct_now() - t0;
        ok = ok && rc == ARCOLL_ERR_CHANNEL;
        CHECK(rc == ARCOLL_ERR_CHANNEL, "call 5 after a failure elsewhere returned %s",
              arcoll_strerror(rc));
        CHECK(secs < 2.0, "call 5 took %.2f s", secs);
    }
    printf("[rank %d] %s failtell: %s after %.2f s\n", ct_rank, ok && secs < 2.0 ? "TOLD" : "FAIL",
           arcoll_strerror(rc), secs);
    fflush(stdout);
    /* Alive until every rank has reported: an exit would be seen by its pid
     * (ARCOLL_ERR_PEER), not through the failure word. */
    usleep(3000000);
    free(s);
    free(r);
}

/* Connections on demand: after some alltoalls with ARCOLL_ALLTOALL_ALG, this
 * rank holds exactly the RC QPs the algorithm needs (spec: one count per
 * rank, or one for all), each connected both ways, and zero-copy calls give
 * their registrations back. */
static void test_qps(arcoll_context_t ctx, const char *spec)
{
    static const size_t sizes[] = {1, 1024, 32 << 10}; /* 32 KiB: zero-copy on verbs */
    arcoll_team_t world = arcoll_team_world(ctx);
    const char *chan = arcoll_config_get(ctx, "ARCOLL_CHANNEL");
    int verbs = chan != NULL && strcmp(chan, "verbs") == 0, want = -1;
    arcoll_resources_t before, after;
    char *end;

    for (int i = 0; spec != NULL && i <= ct_rank; i++) {
        want = (int)strtol(spec, &end, 10);
        if (end == spec || (*end != ',' && *end != '\0')) {
            want = -1;
            break;
        }
        if (*end == '\0')
            break; /* the last count stands for the remaining ranks */
        spec = end + 1;
    }
    CHECK(want >= 0, "qps: expected counts like 1,0,1,0 or 3");
    if (want < 0)
        return;
    CHECK(arcoll_context_resources(ctx, &before) == ARCOLL_OK, "arcoll_context_resources");
    CHECK(before.qps ==
              (verbs && strcmp(arcoll_config_get(ctx, "ARCOLL_VERBS_CONNECT"), "eager") == 0
                   ? ct_nranks - 1
                   : 0),
          "%d RC QPs before any collective", before.qps);
    ct_one(world, 1, 0, 1, 8, "qps warm-up");
    CHECK(arcoll_context_resources(ctx, &before) == ARCOLL_OK, "arcoll_context_resources");
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        for (uint64_t call = 0; call < 3; call++)
            ct_one(world, 1, (int)call & 1, 2 + 3 * i + call, sizes[i], "qps");
    CHECK(arcoll_context_resources(ctx, &after) == ARCOLL_OK, "arcoll_context_resources");
    printf("[rank %d] qps: %d RC QPs (%d ready), %zu registered bytes, %zu shared bytes, init "
           "%.3f ms\n",
           ct_rank, after.qps, after.qps_ready, after.registered_bytes, after.shared_bytes,
           init_ms);
    fflush(stdout);
    CHECK(after.qps == want, "%d RC QPs after alltoall %s, expected %d", after.qps,
          arcoll_config_get(ctx, "ARCOLL_ALLTOALL_ALG"), want);
    CHECK(after.qps_ready == after.qps, "%d of %d RC QPs ready", after.qps_ready, after.qps);
    CHECK(after.registered_bytes == before.registered_bytes,
          "registered bytes %zu after the zero-copy calls, %zu before", after.registered_bytes,
          before.registered_bytes);
    if (verbs)
        CHECK(after.registered_bytes > 0, "verbs: %zu registered bytes", after.registered_bytes);
    else
        CHECK(after.registered_bytes == 0 && after.shared_bytes > 0,
              "smp: %zu registered, %zu shared bytes", after.registered_bytes, after.shared_bytes);
    /* The closing summary is an allgather: through node masters (pap_shm), it
     * needs no QP beyond the alltoall's, so a rank that gets there first does
     * not open a connection to one still counting (lazy connections are
     * opened by whichever side writes first). */
    ct_set(ctx, "ARCOLL_ALLGATHER_ALG", "pap_shm");
}

/* Monotonic seconds (phasefault, and coll_more.c's vbad). */
double ct_now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* The median of iters timings (the machine is shared: a preempted call is
 * an outlier, not the algorithm's cost). */
double ct_bench_median(double *t, int iters)
{
    qsort(t, (size_t)iters, sizeof(*t), bench_cmp);
    return t[iters / 2];
}

/* Seconds per call of alg (both collectives' setting): each rank's median
 * over iters calls, the slowest rank's; -1 on an error. */
double ct_bench_time(arcoll_context_t ctx, const char *alg, int a2a, size_t bytes, uint8_t *s,
                     uint8_t *r, int iters, double *t)
{
    enum { BENCH_MAX_RANKS = 64 };
    arcoll_team_t world = arcoll_team_world(ctx);
    double mine, all[BENCH_MAX_RANKS], worst = 0;

    if (ct_nranks > BENCH_MAX_RANKS)
        return -1;
    ct_set(ctx, "ARCOLL_ALLTOALL_ALG", alg);
    ct_set(ctx, "ARCOLL_ALLGATHER_ALG", alg);
    for (int i = 0; i < 2; i++)
        ct_run_coll(world, a2a, 0, s, r, bytes);
    ct_set(ctx, "ARCOLL_ALLTOALL_ALG", "pap");
    ct_set(ctx, "ARCOLL_ALLGATHER_ALG", "pap");
    if (arcoll_allgather(world, &worst, all, sizeof(worst)) != ARCOLL_OK) /* a barrier */
        return -1;
    ct_set(ctx, "ARCOLL_ALLTOALL_ALG", alg);
    ct_set(ctx, "ARCOLL_ALLGATHER_ALG", alg);
    for (int i = 0; i < iters; i++) {
        double t0 = ct_now();
        if (ct_run_coll(world, a2a, 0, s, r, bytes) != ARCOLL_OK)
            return -1;
        t[i] = ct_now() - t0;
    }
    mine = ct_bench_median(t, iters);
    ct_set(ctx, "ARCOLL_ALLTOALL_ALG", "pap");
    ct_set(ctx, "ARCOLL_ALLGATHER_ALG", "pap");
    if (arcoll_allgather(world, &mine, all, sizeof(mine)) != ARCOLL_OK)
        return -1;
    for (int i = 0; i < ct_nranks; i++)
        worst = all[i] > worst ? all[i] : worst;
    return worst;
}

/* What sh_co's fallback costs where a fixed cost shows (8 B .. 4 KiB per peer),
 * the heap shared, run with ARCOLL_TUNE=alltoall:0-inf:@sh_co#allgather:0-inf:@sh_co
 * so that auto picks sh_co at every size: pap on malloc'd buffers; sh_co forced
 * on them (every call publishes, reads every rank's record, then runs as pap);
 * auto on them (its fallback hint sends most calls to pap at once); auto on
 * heap buffers (sh_co served). Each cell: the slowest rank's median over 2000
 * calls, best of 5 batches taken in turn. */
static void test_heapbench(arcoll_context_t ctx)
{
    enum { ITERS = 2000, BATCHES = 5 };
    static const char *const cols[] = {"pap", "sh_co", "auto", "auto"};
    size_t max = 4096 * (size_t)ct_nranks;
    uint8_t *ms = malloc(max), *mr = malloc(max);
    uint8_t *hs = arcoll_heap_malloc(max), *hr = arcoll_heap_malloc(max);
    double *ts = malloc(sizeof(double) * ITERS);

    CHECK(ms != NULL && mr != NULL && hs != NULL && hr != NULL && ts != NULL,
          "bench buffers of %zu bytes", max);
    CHECK(arcoll_heap_is_shared(), "the heap is not shared");
    if (ms == NULL || mr == NULL || hs == NULL || hr == NULL || ts == NULL)
        goto out;
    memset(ms, 1, max);
    memset(hs, 1, max);
    for (int c = 1; c >= 0; c--) {
        if (ct_rank == 0)
            printf("%s, %d ranks: us per call (slowest rank's median of %d, best of %d)\n"
                   "%6s %10s %10s %10s %10s %12s %12s\n",
                   c ? "alltoall" : "allgather", ct_nranks, ITERS, BATCHES, "bytes", "pap",
                   "sh_co->pap", "auto", "auto heap", "sh_co->pap/pap", "auto/pap");
        for (size_t bytes = 8; bytes <= 4096; bytes *= 8) {
            double best[4] = {1e30, 1e30, 1e30, 1e30};
            for (int b = 0; b < BATCHES; b++)
                for (int k = 0; k < 4; k++) {
                    double t = ct_bench_time(ctx, cols[k], c, bytes, k == 3 ? hs : ms,
                                             k == 3 ? hr : mr, ITERS, ts);
                    CHECK(t >= 0, "heapbench %s %zu B failed", cols[k], bytes);
                    best[k] = t >= 0 && t < best[k] ? t : best[k];
                }
            if (ct_rank == 0)
                printf("%6zu %10.2f %10.2f %10.2f %10.2f %12.2f %12.2f\n", bytes, best[0] * 1e6,
                       best[1] * 1e6, best[2] * 1e6, best[3] * 1e6, best[1] / best[0],
                       best[2] / best[0]);
        }
    }
out:
    free(ts);
    arcoll_heap_free(hr);
    arcoll_heap_free(hs);
    free(mr);
    free(ms);
}

/* ---- phasefault: a rank lost outside the data path ---------------------- */

/* The victim: SIGKILL now, or SIGSTOP with a child that kills the stopped
 * process once the survivors are done, so that mpirun can end. */
static void phase_die(const char *sig, long timeout_ms)
{
    fflush(stdout);
    fflush(stderr);
    if (strcmp(sig, "stop") == 0) {
        pid_t parent = getpid();
        if (fork() == 0) {
            close(0);
            close(1);
            close(2);
            sleep((unsigned)(timeout_ms / 1000 + 3)); /* survivors report at the timeout */
            kill(parent, SIGKILL);
            _exit(0);
        }
        raise(SIGSTOP);
    }
    raise(SIGKILL);
}

/* The code's name, which the fault tests' verdicts match exactly. */
static const char *phase_code(int rc)
{
    switch (rc) {
    case ARCOLL_OK: return "OK";
    case ARCOLL_ERR_TIMEOUT: return "TIMEOUT";
    case ARCOLL_ERR_PEER: return "PEER";
    case ARCOLL_ERR_BOOTSTRAP: return "BOOTSTRAP";
    case ARCOLL_ERR_CHANNEL: return "CHANNEL";
    case ARCOLL_ERR_STATE: return "STATE";
    default: return "OTHER";
    }
}

/* A survivor's verdict on the call that met the lost rank. Through callbacks
 * (oob) init's failure is the callback's: ARCOLL_ERR_BOOTSTRAP. */
static void phase_report(const char *phase, int rc, double secs, long timeout_ms, bool oob)
{
    bool ok = (rc == ARCOLL_ERR_TIMEOUT || rc == ARCOLL_ERR_PEER ||
               (oob && rc == ARCOLL_ERR_BOOTSTRAP)) &&
              secs < (double)timeout_ms / 1000.0 + 5.0;

    printf("[rank %d] %s phasefault %s: %s (%s) after %.2f s\n", ct_rank, ok ? "KILL-OK" : "FAIL",
           phase, phase_code(rc), arcoll_strerror(rc), secs);
    fflush(stdout);
    /* COLL_PHASE_LINGER: stay until every survivor has met its own timeout, so
     * that no survivor sees another one exit (ARCOLL_ERR_PEER instead of what
     * the victim caused): then each rank's code is the victim's doing. */
    if (getenv("COLL_PHASE_LINGER") != NULL && secs < (double)timeout_ms / 1000.0 + 1.0) {
        double rest = (double)timeout_ms / 1000.0 + 1.0 - secs;
        struct timespec ts = {(time_t)rest, (long)((rest - (double)(time_t)rest) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

/* Validated alltoalls on the world team, then the victim leaves before one
 * more: the survivors report that call. */
static void phase_alltoall(arcoll_context_t ctx, bool victim, const char *sig, long timeout_ms,
                           bool oob)
{
    arcoll_team_t world = arcoll_team_world(ctx);
    size_t bytes = 4096, len = bytes * (size_t)ct_nranks;
    uint8_t *s = malloc(len), *r = malloc(len);
    double t0;
    int rc;

    for (uint64_t call = 1; call <= 5; call++)
        ct_one(world, 1, 0, call, bytes, "phasefault alltoall before the fault");
    if (victim)
        phase_die(sig, timeout_ms);
    ct_fill(1, 6, ct_rank, ct_nranks, bytes, s);
    t0 = ct_now();
    rc = arcoll_alltoall(world, s, r, bytes);
    phase_report("alltoall", rc, ct_now() - t0, timeout_ms, oob);
    free(s);
    free(r);
}

static int test_phasefault(int argc, char **argv, const arcoll_oob_t *oob)
{
    const char *phase = argc > 2 ? argv[2] : "create", *sig = argc > 3 ? argv[3] : "kill";
    const char *env = getenv("ARCOLL_TIMEOUT_MS");
    const char *wr = getenv("OMPI_COMM_WORLD_RANK"), *ws = getenv("OMPI_COMM_WORLD_SIZE");
    long timeout_ms = env != NULL ? atol(env) : 60000;
    if (wr == NULL || ws == NULL) { /* srun */
        wr = getenv("SLURM_PROCID");
        ws = getenv("SLURM_NTASKS");
    }
    /* The launcher's rank: mpirun's or srun's environment, or the callbacks' own. */
    int wrank = oob != NULL ? oob->rank : wr != NULL ? atoi(wr) : 0;
    bool victim = oob != NULL ? oob->rank == oob->size - 1
                              : wr != NULL && ws != NULL && atoi(wr) == atoi(ws) - 1;
    arcoll_context_t ctx;
    arcoll_team_t team = NULL;
    int rc, *all;
    double t0;

    if (strcmp(phase, "init") == 0 && victim)
        phase_die(sig, timeout_ms);
    t0 = ct_now();
    rc = arcoll_init(oob, &ctx);
    if (strcmp(phase, "init") == 0) {
        ct_set_rank(wrank);
        phase_report(phase, rc, ct_now() - t0, timeout_ms, oob != NULL);
        if (rc == ARCOLL_OK)
            arcoll_finalize(ctx);
        return 0;
    }
    if (rc != ARCOLL_OK) {
        fprintf(stderr, "arcoll_init: %s: %s\n", arcoll_strerror(rc), arcoll_last_error(NULL));
        return 1;
    }
    ct_set_rank(arcoll_context_rank(ctx));
    ct_nranks = arcoll_context_size(ctx);
    all = malloc(sizeof(int) * (size_t)ct_nranks);
    for (int i = 0; i < ct_nranks; i++)
        all[i] = i;
    if (strcmp(phase, "create") == 0) {
        if (victim)
            phase_die(sig, timeout_ms);
        t0 = ct_now();
        rc = arcoll_team_create(ctx, all, ct_nranks, &team);
        phase_report(phase, rc, ct_now() - t0, timeout_ms, oob != NULL);
    } else if (strcmp(phase, "destroy") == 0) {
        rc = arcoll_team_create(ctx, all, ct_nranks, &team);
        CHECK(rc == ARCOLL_OK, "team create: %s", arcoll_strerror(rc));
        if (victim)
            phase_die(sig, timeout_ms);
        t0 = ct_now();
        rc = arcoll_team_destroy(ctx, team);
        phase_report(phase, rc, ct_now() - t0, timeout_ms, oob != NULL);
    } else if (strcmp(phase, "alltoall") == 0) {
        phase_alltoall(ctx, victim, sig, timeout_ms, oob != NULL);
    } else if (strcmp(phase, "finalize") == 0) {
        if (victim)
            phase_die(sig, timeout_ms);
        t0 = ct_now();
        rc = arcoll_finalize(ctx);
        phase_report(phase, rc, ct_now() - t0, timeout_ms, oob != NULL);
        free(all);
        return 0;
    } else {
        tl_expect(&ct_tally, 0, "unknown phase %s", phase);
    }
    free(all);
    /* The survivors still release what they hold, without waiting again. */
    t0 = ct_now();
    rc = arcoll_finalize(ctx);
    printf("[rank %d] finalize after the fault: %s after %.2f s\n", ct_rank, arcoll_strerror(rc),
           ct_now() - t0);
    return ct_tally.failed > 0;
}

/* The node heap (docs/heap.md): a buffer allocated before arcoll_init and one
 * after, filled by their owner; every rank reads every other's through the
 * pointer value the owner published (one allgather): the same address in
 * every process. want: "shared" (all ranks on one host, one slot each) or
 * "private" (a run that must not share, e.g. every rank given slot 0). */
static void test_heap(arcoll_context_t ctx, uint8_t *early, const char *want)
{
    enum { EARLY = 4096, LATE = 1 << 20 };
    arcoll_team_t world = arcoll_team_world(ctx);
    uint8_t *late = arcoll_heap_malloc(LATE);
    uint64_t mine[2], *all = calloc((size_t)ct_nranks, sizeof(mine));
    int shared = arcoll_heap_is_shared(), rc, bad = 0;

    CHECK(early != NULL && late != NULL && all != NULL, "heap allocation failed");
    CHECK(shared == (strcmp(want, "shared") == 0), "arcoll_heap_is_shared() = %d, want %s", shared,
          want);
    if (early == NULL || late == NULL || all == NULL)
        goto out;
    CHECK(arcoll_heap_contains(early) && arcoll_heap_contains(late), "not in the heap");
    tl_fill(early, EARLY, 1, ct_rank, TL_ANY);
    tl_fill(late, LATE, 2, ct_rank, TL_ANY);
    mine[0] = (uint64_t)(uintptr_t)early;
    mine[1] = (uint64_t)(uintptr_t)late;
    ct_set(ctx, "ARCOLL_PATH", "copy");
    rc = arcoll_allgather(world, mine, all, sizeof(mine));
    CHECK(rc == ARCOLL_OK, "allgather of the pointers: %s", arcoll_strerror(rc));
    if (rc != ARCOLL_OK || !shared)
        goto out;
    for (int r = 0; r < ct_nranks; r++) {
        const uint8_t *e = (const uint8_t *)(uintptr_t)all[2 * r];
        const uint8_t *l = (const uint8_t *)(uintptr_t)all[2 * r + 1];
        CHECK(r == ct_rank || !arcoll_heap_contains(e), "rank %d's buffer is in my slot", r);
        bad = tl_check(e, EARLY, 1, r, TL_ANY, NULL) + tl_check(l, LATE, 2, r, TL_ANY, NULL) != 0;
        CHECK(!bad, "rank %d's heap buffers read wrong through their address", r);
    }
    /* A forked child's heap is a private copy: its writes reach nobody. */
    {
        pid_t pid = fork();
        int st = -1;
        if (pid == 0) {
            int ok = !arcoll_heap_is_shared() && early[5] == tl_byte(1, ct_rank, TL_ANY, 5);
            memset(early, 0xee, EARLY);
            memset(late, 0xee, LATE);
            _exit(ok ? 0 : 1);
        }
        CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "the forked child saw a shared heap or wrong data");
    }
    rc = arcoll_allgather(world, mine, all, sizeof(mine));
    CHECK(rc == ARCOLL_OK, "allgather (barrier): %s", arcoll_strerror(rc));
    for (int r = 0; r < ct_nranks && rc == ARCOLL_OK; r++) {
        const uint8_t *e = (const uint8_t *)(uintptr_t)all[2 * r];
        const uint8_t *l = (const uint8_t *)(uintptr_t)all[2 * r + 1];
        bad = e[EARLY - 1] != tl_byte(1, r, TL_ANY, EARLY - 1) ||
              l[LATE - 1] != tl_byte(2, r, TL_ANY, LATE - 1);
        CHECK(!bad, "rank %d's buffers changed after its child wrote its copy", r);
    }
    /* Nobody frees while another still reads. */
    rc = arcoll_allgather(world, mine, all, sizeof(mine));
    CHECK(rc == ARCOLL_OK, "allgather (barrier): %s", arcoll_strerror(rc));
out:
    free(all);
    arcoll_heap_free(late);
    arcoll_heap_free(early);
}

int coll_test_main(int argc, char **argv, const arcoll_oob_t *oob)
{
    arcoll_context_t ctx;
    int rc, counts[2], *all;
    const char *mode = argc > 1 ? argv[1] : "matrix";
    uint8_t *heap_early;

    /* An algorithm it does not know fails the run, before any rank starts. */
    if (algs_init() != 0)
        return 2;
    if (strcmp(mode, "phasefault") == 0)
        return test_phasefault(argc, argv, oob);
    /* Calls before arcoll_init are errors, not crashes. */
    {
        char b[8] = {0}, c[8];
        rc = arcoll_alltoall(NULL, b, c, 1);
        tl_expect(&ct_tally, rc == ARCOLL_ERR_STATE, "call before init returned %s",
                  arcoll_strerror(rc));
    }
    /* heap, heapcoll: one buffer from before init (the heap made at first use;
     * arcoll_init shares it only if it exists then, docs/heap.md). */
    heap_early = strncmp(mode, "heap", 4) == 0 || strcmp(mode, "stallwrite") == 0
                     ? arcoll_heap_malloc(4096)
                     : NULL;
    init_ms = ct_now();
    rc = arcoll_init(oob, &ctx);
    init_ms = (ct_now() - init_ms) * 1e3;
    if (rc != ARCOLL_OK) {
        fprintf(stderr, "arcoll_init: %s: %s\n", arcoll_strerror(rc), arcoll_last_error(NULL));
        return 1;
    }
    ct_set_rank(arcoll_context_rank(ctx));
    ct_nranks = arcoll_context_size(ctx);
    if (strcmp(mode, "matrix") == 0)
        test_matrix(ctx);
    else if (strcmp(mode, "skew") == 0)
        test_skew(ctx, argc > 2 ? atol(argv[2]) : 1000, argc > 3 ? atol(argv[3]) : 100,
                  argc > 4 ? argv[4] : "random");
    else if (strcmp(mode, "env") == 0)
        test_env(ctx);
    else if (strcmp(mode, "sizes") == 0)
        test_sizes(ctx);
    else if (strcmp(mode, "realloc") == 0)
        test_realloc(ctx);
    else if (strcmp(mode, "bad") == 0)
        test_bad(ctx);
    else if (strcmp(mode, "v") == 0)
        ct_test_v(ctx);
    else if (strcmp(mode, "a2av") == 0)
        ct_test_a2av(ctx);
    else if (strcmp(mode, "vbad") == 0)
        ct_test_vbad(ctx);
    else if (strcmp(mode, "split") == 0)
        ct_test_split(ctx);
    else if (strcmp(mode, "churn") == 0)
        ct_test_churn(ctx, argc > 2 ? atol(argv[2]) : 40);
    else if (strcmp(mode, "inflight") == 0)
        ct_test_inflight(ctx);
    else if (strcmp(mode, "vskew") == 0)
        ct_test_vskew(ctx, argc > 2 ? atol(argv[2]) : 1000, argc > 3 ? atol(argv[3]) : 100);
    else if (strcmp(mode, "qps") == 0)
        test_qps(ctx, argc > 2 ? argv[2] : NULL);
    else if (strcmp(mode, "heapmr") == 0)
        ct_test_heapmr(ctx, argc > 2 ? argv[2] : "api", argc > 3 ? atol(argv[3]) : 40);
    else if (strcmp(mode, "heapbench") == 0) {
        test_heapbench(ctx);
        arcoll_heap_free(heap_early);
    } else if (strcmp(mode, "heapauto") == 0) {
        test_heapauto(ctx, argc > 2 ? argv[2] : "shared");
        arcoll_heap_free(heap_early);
    } else if (strcmp(mode, "heapcoll") == 0) {
        test_heapcoll(ctx, argc > 2 ? atol(argv[2]) : 1000, argc > 3 ? atol(argv[3]) : 100);
        arcoll_heap_free(heap_early);
    } else if (strcmp(mode, "heap") == 0)
        test_heap(ctx, heap_early, argc > 2 ? argv[2] : "shared");
    else if (strcmp(mode, "kill") == 0 || strcmp(mode, "failtell") == 0 ||
             strcmp(mode, "latewrite") == 0 || strcmp(mode, "heaplatewrite") == 0 ||
             strcmp(mode, "stallwrite") == 0) {
        if (strcmp(mode, "kill") == 0)
            test_kill(ctx);
        else if (strcmp(mode, "failtell") != 0)
            test_latewrite(ctx, argc > 2 ? argv[2] : "alltoall", mode[0] != 'l', mode[0] == 's',
                           argc > 3 ? atol(argv[3]) : 1000,
                           argc > 4 ? (size_t)atol(argv[4]) : (size_t)256 << 10);
        else
            test_failtell(ctx);
        if (heap_early != NULL)
            arcoll_heap_free(heap_early);
        /* The team lost a rank: no collective summary is possible. */
        arcoll_finalize(ctx);
        return ct_tally.failed ? 1 : 0;
    } else if (coll_test_extra == NULL || !coll_test_extra(ctx, mode, argc, argv)) {
        tl_expect(&ct_tally, 0, "unknown mode %s", mode);
    }

    /* Sum the verdicts over ranks (a broken library would fail here too). */
    counts[0] = (int)ct_tally.passed;
    counts[1] = (int)ct_tally.failed;
    all = calloc((size_t)ct_nranks, sizeof(counts));
    ct_set(ctx, "ARCOLL_PATH", "copy");
    rc = arcoll_allgather(arcoll_team_world(ctx), counts, all, sizeof(counts));
    if (rc == ARCOLL_OK && ct_rank == 0) {
        int p = 0, f = 0;
        for (int i = 0; i < ct_nranks; i++) {
            p += all[2 * i];
            f += all[2 * i + 1];
        }
        printf("coll_test %s on %d ranks (%d nodes): %d passed, %d failed\n", mode, ct_nranks,
               arcoll_context_nnodes(ctx), p, f);
    }
    free(all);
    tl_expect(&ct_tally, rc == ARCOLL_OK, "allgather of the counts: %s", arcoll_strerror(rc));
    rc = arcoll_finalize(ctx);
    tl_expect(&ct_tally, rc == ARCOLL_OK, "arcoll_finalize: %s", arcoll_strerror(rc));
    /* Calls after finalize are errors, not crashes. */
    {
        char b[8] = {0}, c[8];
        rc = arcoll_alltoall(arcoll_team_world(ctx), b, c, 1);
        tl_expect(&ct_tally, rc == ARCOLL_ERR_STATE, "call after finalize returned %s",
                  arcoll_strerror(rc));
    }
    return ct_tally.failed ? 1 : 0;
}
