/* Unit tests of the team split (src/api/split.c): every virtual rank of a
 * split runs the real state machine in a step-synchronous simulator (call k
 * of every rank, deliver, complete), and split_run itself runs on threads
 * over a barrier mailbox. Results are checked against a qsort of the whole
 * table, which only the test ever builds. Bytes received and bytes held are
 * counted per rank and bounded as docs/split.md states. For 2^16 and 100003
 * ranks the full variant's merges run block by block (all ranks of a block
 * hold the same table), with the real merge and size plan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "api/split.h"
#include "arcoll.h"

/* ---- inputs and the reference ------------------------------------------ */

enum {
    PAT_RANDOM,      /* a few colors, a third UNDEFINED, keys with duplicates */
    PAT_MOSTLY_UND,  /* nine in ten UNDEFINED */
    PAT_ONE,         /* one color for all, negative keys */
    PAT_OWN,         /* each rank its own color */
    PAT_ALL_UND,     /* nobody joins */
    PAT_SAME_KEY,    /* one color, one key: rank order decides */
    PAT_EXTREME,     /* colors and keys at the ends of int32 */
    PAT_SMALL_TEAMS, /* about eight ranks per color */
    NPAT
};

static uint64_t rng_state;

static uint32_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static void gen_entries(split_entry_t *e, uint32_t n, int pat, uint64_t seed)
{
    rng_state = seed * 0x9e3779b97f4a7c15ULL + 12345;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t u = rng_next();
        e[i].rank = i;
        e[i].key = (int32_t)(rng_next() % 7) - 3;
        switch (pat) {
        case PAT_RANDOM: e[i].color = u % 3 == 0 ? SPLIT_UNDEFINED : (int32_t)(u % 5); break;
        case PAT_MOSTLY_UND: e[i].color = u % 10 ? SPLIT_UNDEFINED : (int32_t)(u % 3); break;
        case PAT_ONE:
            e[i].color = 0;
            e[i].key = -(int32_t)(rng_next() % (n + 1));
            break;
        case PAT_OWN: e[i].color = (int32_t)((i * 7919u) % n); break;
        case PAT_ALL_UND: e[i].color = SPLIT_UNDEFINED; break;
        case PAT_SAME_KEY:
            e[i].color = 42;
            e[i].key = 5;
            break;
        case PAT_EXTREME:
            e[i].color = u % 2 ? INT32_MAX : 0;
            e[i].key = rng_next() % 2 ? INT32_MIN : INT32_MAX;
            break;
        case PAT_SMALL_TEAMS: e[i].color = (int32_t)(u % (n / 8 + 1)); break;
        }
    }
}

static int ref_cmp(const void *pa, const void *pb)
{
    const split_entry_t *a = pa, *b = pb;

    if (a->color != b->color)
        return a->color < b->color ? -1 : 1;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return a->rank < b->rank ? -1 : a->rank > b->rank;
}

/* The reference: sort everything, then each rank's run. */
typedef struct ref {
    split_entry_t *sorted;
    uint32_t *first, *size, *index; /* per rank: its run in sorted, its place */
} ref_t;

static void ref_build(ref_t *rf, const split_entry_t *e, uint32_t n)
{
    rf->sorted = malloc(n * sizeof(*rf->sorted));
    rf->first = calloc(n, sizeof(uint32_t));
    rf->size = calloc(n, sizeof(uint32_t));
    rf->index = calloc(n, sizeof(uint32_t));
    assert_non_null(rf->sorted);
    assert_non_null(rf->first);
    assert_non_null(rf->size);
    assert_non_null(rf->index);
    memcpy(rf->sorted, e, n * sizeof(*e));
    qsort(rf->sorted, n, sizeof(*e), ref_cmp);
    for (uint32_t lo = 0, hi; lo < n; lo = hi) {
        for (hi = lo; hi < n && rf->sorted[hi].color == rf->sorted[lo].color; hi++)
            ;
        for (uint32_t i = lo; i < hi; i++) {
            uint32_t r = rf->sorted[i].rank;
            rf->first[r] = lo;
            rf->size[r] = rf->sorted[lo].color == SPLIT_UNDEFINED ? 0 : hi - lo;
            rf->index[r] = i - lo;
        }
    }
}

static void ref_free(ref_t *rf)
{
    free(rf->sorted);
    free(rf->first);
    free(rf->size);
    free(rf->index);
}

static void ref_check(const ref_t *rf, uint32_t r, const uint32_t *m, uint32_t nm, uint32_t idx)
{
    assert_int_equal(nm, rf->size[r]);
    if (nm == 0) {
        assert_null(m);
        assert_int_equal(idx, SPLIT_NONE);
        return;
    }
    assert_int_equal(idx, rf->index[r]);
    for (uint32_t i = 0; i < nm; i++)
        assert_int_equal(m[i], rf->sorted[rf->first[r] + i].rank);
}

/* ---- the step-synchronous simulator ------------------------------------ */

typedef struct sim_stats {
    uint64_t max_rx_bytes, max_peak;
    uint32_t nx;
} sim_stats_t;

static uint32_t levels_of(uint32_t n)
{
    uint32_t lv = 0;

    while ((2u << lv) <= n)
        lv++;
    return lv;
}

/* Run all n ranks; check results and the per-rank bounds of docs/split.md. */
static void sim_run(const split_entry_t *e, uint32_t n, int prune, sim_stats_t *ss)
{
    split_state_t *st = calloc(n, sizeof(*st));
    split_xfer_t *x = calloc(n, sizeof(*x));
    uint64_t *rx = calloc(n, sizeof(*rx));
    uint32_t lv = levels_of(n), p2 = 1u << lv, nx = 0;
    int singles = 1; /* every rank alone in its color */
    ref_t rf;

    assert_non_null(st);
    assert_non_null(x);
    assert_non_null(rx);
    ref_build(&rf, e, n);
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(split_state_init(&st[i], n, i, &e[i], prune), ARCOLL_OK);
    for (;;) {
        int more = split_state_next(&st[0], &x[0]);

        assert_true(more == 0 || more == 1);
        for (uint32_t i = 1; i < n; i++)
            assert_int_equal(split_state_next(&st[i], &x[i]), more); /* same number of calls */
        if (!more)
            break;
        nx++;
        for (uint32_t i = 0; i < n; i++) {
            /* Zero-length messages never travel. */
            assert_true(x[i].to == SPLIT_NONE ? x[i].slen == 0 : x[i].slen > 0);
            assert_true(x[i].from == SPLIT_NONE ? x[i].rlen == 0 : x[i].rlen > 0);
            if (x[i].from == SPLIT_NONE)
                continue;
            assert_true(x[i].from < n);
            assert_int_equal(x[x[i].from].to, i);
            assert_int_equal(x[x[i].from].slen, x[i].rlen);
            memcpy(x[i].rbuf, x[x[i].from].sbuf, x[i].rlen);
            rx[i] += x[i].rlen;
        }
        for (uint32_t i = 0; i < n; i++) /* every send has its receive */
            if (x[i].to != SPLIT_NONE)
                assert_int_equal(x[x[i].to].from, i);
        for (uint32_t i = 0; i < n; i++)
            assert_int_equal(split_state_complete(&st[i]), ARCOLL_OK);
    }
    assert_int_equal(nx, (prune ? 4 : 1) * lv + (p2 < n ? 3 : 0));
    for (uint32_t i = 0; i < n; i++)
        singles &= rf.size[i] == 1;
    memset(ss, 0, sizeof(*ss));
    ss->nx = nx;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t *m = NULL, nm = 0, idx = 0;
        uint64_t team = rf.size[i];

        assert_int_equal(split_state_take(&st[i], &m, &nm, &idx), ARCOLL_OK);
        ref_check(&rf, i, m, nm, idx);
        free(m);
        if (i >= p2) {
            /* A folded rank receives its team only: header and members. */
            assert_int_equal(rx[i], team ? SPLIT_HDR_WIRE + 4 * team : 0);
        } else if (!prune) {
            /* Everyone else's entry, exactly once. */
            assert_int_equal(rx[i], (uint64_t)SPLIT_ENTRY_WIRE * (n - 1));
            assert_int_equal(st[i].rx_entries, (n - 1) - (i < n - p2 ? 1 : 0));
        } else {
            /* At most every other entry and color once, plus headers. */
            assert_true(rx[i] <= 16ull * (n - 1) + 2ull * SPLIT_HDR_WIRE * lv);
            /* Entries of other colors never arrive once pruning has started:
             * with private colors only the fold moves any. */
            if (singles)
                assert_int_equal(st[i].rx_entries, 0);
        }
        /* Bytes held at once: full about 2n entries; pruned adds sets. */
        assert_true(st[i].peak <= (prune ? 40ull : 24ull) * n + 64);
        if (rx[i] > ss->max_rx_bytes)
            ss->max_rx_bytes = rx[i];
        if (st[i].peak > ss->max_peak)
            ss->max_peak = st[i].peak;
        split_state_fini(&st[i]);
    }
    ref_free(&rf);
    free(rx);
    free(x);
    free(st);
}

static void sim_one(uint32_t n, int pat, uint64_t seed)
{
    split_entry_t *e = malloc(n * sizeof(*e));
    sim_stats_t ss;

    assert_non_null(e);
    gen_entries(e, n, pat, seed);
    sim_run(e, n, 0, &ss);
    sim_run(e, n, 1, &ss);
    free(e);
}

static void test_small_all_patterns(void **state)
{
    (void)state;
    for (uint32_t n = 1; n <= 40; n++) {
        for (int pat = 0; pat < NPAT; pat++)
            sim_one(n, pat, n * 31 + (uint64_t)pat);
        for (uint64_t seed = 1; seed <= 4; seed++) /* more draws of the random ones */
            sim_one(n, seed % 2 ? PAT_RANDOM : PAT_SMALL_TEAMS, 1000 * seed + n);
    }
}

static void test_medium(void **state)
{
    static const uint32_t sizes[] = {64, 100, 127, 129, 1000};

    (void)state;
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
        for (int pat = 0; pat < NPAT; pat++)
            sim_one(sizes[s], pat, sizes[s] + (uint64_t)pat);
}

/* The costs behind docs/split.md's table, and pruning's effect at n = 1000
 * and 4099 (pruned only at 4099: full tables of all ranks would be 200 MB). */
static void test_costs(void **state)
{
    static const int pats[] = {PAT_ONE, PAT_RANDOM, PAT_SMALL_TEAMS, PAT_OWN};
    static const char *names[] = {"one color", "5 colors", "n/8 colors", "own color"};
    split_entry_t *e = malloc(4099 * sizeof(*e));
    sim_stats_t full, pr;

    (void)state;
    assert_non_null(e);
    for (size_t p = 0; p < sizeof(pats) / sizeof(pats[0]); p++) {
        gen_entries(e, 1000, pats[p], 7);
        sim_run(e, 1000, 0, &full);
        sim_run(e, 1000, 1, &pr);
        printf("n=1000 %-11s full: %2u xchg, rx <= %6llu B, peak %6llu B; "
               "pruned: %2u xchg, rx <= %6llu B, peak %6llu B\n",
               names[p], full.nx, (unsigned long long)full.max_rx_bytes,
               (unsigned long long)full.max_peak, pr.nx, (unsigned long long)pr.max_rx_bytes,
               (unsigned long long)pr.max_peak);
        if (pats[p] == PAT_SMALL_TEAMS || pats[p] == PAT_OWN)
            assert_true(pr.max_peak < full.max_peak);
    }
    gen_entries(e, 4099, PAT_SMALL_TEAMS, 9);
    sim_run(e, 4099, 1, &pr);
    printf("n=4099 n/8 colors pruned: %u xchg, rx <= %llu B, peak %llu B\n", pr.nx,
           (unsigned long long)pr.max_rx_bytes, (unsigned long long)pr.max_peak);
    free(e);
}

/* ---- large P: the full variant block by block -------------------------- */

/* All ranks of a block hold the same table after each step, so one table per
 * block stands for them: the real merge and the real size plan, n entries per
 * level. */
static void big_one(uint32_t n, int pat)
{
    uint32_t lv = levels_of(n), p2 = 1u << lv;
    split_entry_t *e = malloc(n * sizeof(*e));
    uint8_t *a = malloc((size_t)n * SPLIT_ENTRY_WIRE), *b = malloc((size_t)n * SPLIT_ENTRY_WIRE);
    uint8_t *run = malloc((size_t)n * SPLIT_ENTRY_WIRE);
    ref_t rf;

    assert_non_null(e);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(run);
    gen_entries(e, n, pat, n);
    ref_build(&rf, e, n);
    /* The fold: virtual rank v holds v and p2 + v, at the block's offset. */
    for (uint32_t v = 0; v < p2; v++) {
        uint32_t off = split_plan_count(n, 0, v);
        uint8_t one[2][SPLIT_ENTRY_WIRE];

        split_entry_put(one[0], 0, &e[v]);
        if (v + p2 < n) {
            split_entry_put(one[1], 0, &e[v + p2]);
            assert_int_equal(
                split_tab_merge(one[0], 1, one[1], 1, NULL, a + (size_t)off * SPLIT_ENTRY_WIRE), 2);
        } else {
            memcpy(a + (size_t)off * SPLIT_ENTRY_WIRE, one[0], SPLIT_ENTRY_WIRE);
        }
    }
    for (uint32_t t = 0; t < lv; t++) {
        uint32_t half = 1u << t;
        uint8_t *tmp;

        for (uint32_t blk = 0; blk < p2; blk += 2 * half) {
            uint32_t off = split_plan_count(n, 0, blk);
            uint32_t na = split_plan_count(n, blk, half),
                     nb = split_plan_count(n, blk + half, half);
            uint8_t *pa = a + (size_t)off * SPLIT_ENTRY_WIRE;

            assert_int_equal(split_tab_merge(pa, na, pa + (size_t)na * SPLIT_ENTRY_WIRE, nb, NULL,
                                             b + (size_t)off * SPLIT_ENTRY_WIRE),
                             split_plan_count(n, blk, 2 * half));
        }
        tmp = a;
        a = b;
        b = tmp;
    }
    for (uint32_t i = 0; i < n; i++) {
        split_entry_t g;

        split_entry_get(a, i, &g);
        assert_int_equal(ref_cmp(&g, &rf.sorted[i]), 0);
    }
    /* The last merge's color filter, for a sample of ranks. */
    for (uint32_t s = 0; s < 64; s++) {
        uint32_t r = (uint32_t)(((uint64_t)s * 2654435761u) % n);
        int32_t c = e[r].color;
        split_set_t keep = {&c, 1};
        uint32_t cnt;

        if (c == SPLIT_UNDEFINED)
            continue;
        cnt = split_tab_merge(a, n / 2, a + (size_t)(n / 2) * SPLIT_ENTRY_WIRE, n - n / 2, &keep,
                              run);
        assert_int_equal(cnt, rf.size[r]);
        for (uint32_t i = 0; i < cnt; i++) {
            split_entry_t g;

            split_entry_get(run, i, &g);
            assert_int_equal(g.rank, rf.sorted[rf.first[r] + i].rank);
        }
    }
    ref_free(&rf);
    free(run);
    free(b);
    free(a);
    free(e);
}

static void test_large_p(void **state)
{
    (void)state;
    big_one(65536, PAT_RANDOM);
    big_one(65536, PAT_OWN);
    big_one(100003, PAT_SMALL_TEAMS);
    big_one(100003, PAT_ONE);
}

/* ---- split_run on threads ------------------------------------------------ */

typedef struct mbox {
    pthread_barrier_t bar;
    uint32_t n;
    uint8_t **msg;
    size_t *len;
    uint32_t *to;
    int fail_rank, fail_rc; /* this rank's first exchange fails */
} mbox_t;

typedef struct trank {
    mbox_t *mb;
    uint32_t me;
    split_entry_t e;
    int prune, rc, bad;
    uint32_t *m, nm, idx;
} trank_t;

static int mbox_xchg(void *arg, uint32_t to, const void *sbuf, size_t slen, uint32_t from,
                     void *rbuf, size_t rlen)
{
    trank_t *tr = arg;
    mbox_t *mb = tr->mb;

    if ((int)tr->me == mb->fail_rank)
        return mb->fail_rc;
    mb->msg[tr->me] = NULL;
    mb->to[tr->me] = to;
    mb->len[tr->me] = slen;
    if (to != SPLIT_NONE) {
        mb->msg[tr->me] = malloc(slen);
        if (mb->msg[tr->me] == NULL)
            tr->bad = 1;
        else
            memcpy(mb->msg[tr->me], sbuf, slen);
    }
    pthread_barrier_wait(&mb->bar);
    if (from != SPLIT_NONE) {
        if (from >= mb->n || mb->to[from] != tr->me || mb->len[from] != rlen ||
            mb->msg[from] == NULL)
            tr->bad = 1;
        else
            memcpy(rbuf, mb->msg[from], rlen);
    }
    pthread_barrier_wait(&mb->bar);
    free(mb->msg[tr->me]);
    return ARCOLL_OK;
}

static void *trank_main(void *arg)
{
    trank_t *tr = arg;

    tr->rc = (tr->prune ? split_run_pruned : split_run)(tr->mb->n, tr->me, &tr->e, mbox_xchg, tr,
                                                        &tr->m, &tr->nm, &tr->idx);
    return NULL;
}

static void threads_one(uint32_t n, int pat, int prune)
{
    mbox_t mb = {.n = n, .fail_rank = -1};
    trank_t *tr = calloc(n, sizeof(*tr));
    pthread_t *th = calloc(n, sizeof(*th));
    split_entry_t *e = malloc(n * sizeof(*e));
    ref_t rf;

    assert_non_null(tr);
    assert_non_null(th);
    assert_non_null(e);
    mb.msg = calloc(n, sizeof(*mb.msg));
    mb.len = calloc(n, sizeof(*mb.len));
    mb.to = calloc(n, sizeof(*mb.to));
    assert_non_null(mb.msg);
    assert_non_null(mb.len);
    assert_non_null(mb.to);
    assert_int_equal(pthread_barrier_init(&mb.bar, NULL, n), 0);
    gen_entries(e, n, pat, 100 + n);
    ref_build(&rf, e, n);
    for (uint32_t i = 0; i < n; i++) {
        tr[i] = (trank_t){.mb = &mb, .me = i, .e = e[i], .prune = prune};
        assert_int_equal(pthread_create(&th[i], NULL, trank_main, &tr[i]), 0);
    }
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    for (uint32_t i = 0; i < n; i++) {
        assert_int_equal(tr[i].rc, ARCOLL_OK);
        assert_int_equal(tr[i].bad, 0);
        ref_check(&rf, i, tr[i].m, tr[i].nm, tr[i].idx);
        free(tr[i].m);
    }
    pthread_barrier_destroy(&mb.bar);
    ref_free(&rf);
    free(mb.to);
    free(mb.len);
    free(mb.msg);
    free(e);
    free(th);
    free(tr);
}

static void test_threads(void **state)
{
    static const uint32_t sizes[] = {1, 2, 3, 5, 8, 13, 33};

    (void)state;
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        threads_one(sizes[s], PAT_RANDOM, 0);
        threads_one(sizes[s], PAT_RANDOM, 1);
    }
    threads_one(24, PAT_ONE, 1);
    threads_one(24, PAT_OWN, 0);
}

/* ---- errors and the wire ------------------------------------------------ */

static void test_transport_error_passes_up(void **state)
{
    mbox_t mb = {.n = 4, .fail_rank = 0, .fail_rc = ARCOLL_ERR_TIMEOUT};
    trank_t tr = {.mb = &mb, .me = 0, .e = {3, 0, 0}};
    uint32_t *m = NULL, nm = 99, idx = 99;

    (void)state;
    assert_int_equal(split_run(4, 0, &tr.e, mbox_xchg, &tr, &m, &nm, &idx), ARCOLL_ERR_TIMEOUT);
    assert_int_equal(split_run_pruned(4, 0, &tr.e, mbox_xchg, &tr, &m, &nm, &idx),
                     ARCOLL_ERR_TIMEOUT);
    assert_int_equal(nm, 99); /* outputs untouched on failure */
}

static void test_invalid(void **state)
{
    split_entry_t e = {0, 0, 1};
    split_state_t st;
    uint32_t *m, nm, idx;

    (void)state;
    assert_int_equal(split_state_init(&st, 0, 0, &e, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(split_state_init(&st, 2, 2, &e, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(split_state_init(&st, 2, 0, &e, 0), ARCOLL_ERR_INVALID); /* rank != me */
    e.rank = 0;
    e.color = -2;
    assert_int_equal(split_state_init(&st, 2, 0, &e, 1), ARCOLL_ERR_INVALID);
    assert_int_equal(split_state_init(&st, 2, 0, NULL, 1), ARCOLL_ERR_INVALID);
    e.color = 0;
    assert_int_equal(split_run(2, 0, &e, NULL, NULL, &m, &nm, &idx), ARCOLL_ERR_INVALID);
    /* One rank: no exchange at all. */
    assert_int_equal(split_run(1, 0, &e, mbox_xchg, NULL, &m, &nm, &idx), ARCOLL_OK);
    assert_int_equal(nm, 1);
    assert_int_equal(m[0], 0);
    assert_int_equal(idx, 0);
    free(m);
}

/* A peer out of step (a header of another exchange) is a mismatch. */
static void test_header_mismatch(void **state)
{
    split_entry_t e[2] = {{0, 0, 0}, {0, 0, 1}};
    split_state_t st[2];
    split_xfer_t x[2];

    (void)state;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(split_state_init(&st[i], 2, (uint32_t)i, &e[i], 1), ARCOLL_OK);
        assert_int_equal(split_state_next(&st[i], &x[i]), 1);
    }
    memcpy(x[0].rbuf, x[1].sbuf, x[0].rlen);
    memcpy(x[1].rbuf, x[0].sbuf, x[1].rlen);
    ((uint8_t *)x[1].rbuf)[4] ^= 1;
    assert_int_equal(split_state_complete(&st[0]), ARCOLL_OK);
    assert_int_equal(split_state_complete(&st[1]), ARCOLL_ERR_MISMATCH);
    split_state_fini(&st[0]);
    split_state_fini(&st[1]);
}

static void test_wire_format(void **state)
{
    static const uint8_t want[SPLIT_ENTRY_WIRE] = {0xff, 0xff, 0xff, 0xff, 0x00, 0x00,
                                                   0x00, 0x80, 0x04, 0x03, 0x02, 0x01};
    split_entry_t e = {SPLIT_UNDEFINED, INT32_MIN, 0x01020304u}, g;
    uint8_t w[SPLIT_ENTRY_WIRE];

    (void)state;
    split_entry_put(w, 0, &e);
    assert_memory_equal(w, want, sizeof(want));
    split_entry_get(w, 0, &g);
    assert_int_equal(g.color, e.color);
    assert_int_equal(g.key, e.key);
    assert_int_equal(g.rank, e.rank);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wire_format),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_header_mismatch),
        cmocka_unit_test(test_transport_error_passes_up),
        cmocka_unit_test(test_small_all_patterns),
        cmocka_unit_test(test_medium),
        cmocka_unit_test(test_costs),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_large_p),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
