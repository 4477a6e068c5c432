/* Unit tests of src/alg/sched/mnco_sched.c (MN-CO, Li et al. §2.5) on the schedule
 * simulator (sched_sim.h): the ownership rule (a tiling, the Morton order for
 * powers of two), every rank's schedule run together in memory and checked
 * byte for byte, and the message counts the seed gives. */
#include "sched_sim.h"

#include "alg/sched/mnco_sched.h"
#include "alg/sched/morton.h"

static int is_pow2(uint32_t n)
{
    return (n & (n - 1)) == 0;
}

/* Exact square root, or 0. */
static uint32_t isqrt_exact(uint32_t n)
{
    for (uint32_t r = 1; r * r <= n; r++)
        if (r * r == n)
            return r;
    return 0;
}

/* The rectangles tile the n x n matrix, none empty; for n = 2^k rank j's is
 * exactly the box of Morton codes [n*j, n*(j+1)) (row = destination). */
static void check_rects(uint32_t n)
{
    mnco_rect_t *rc = malloc(sizeof(*rc) * n);
    uint8_t *cover = calloc((size_t)n * n, 1);
    uint64_t area = 0;

    assert_true(rc != NULL && cover != NULL);
    mnco_rects(n, rc);
    for (uint32_t j = 0; j < n; j++) {
        const mnco_rect_t *q = &rc[j];
        if (!(q->x0 < q->x1 && q->x1 <= n && q->y0 < q->y1 && q->y1 <= n))
            fail_msg("n=%u: rank %u's rectangle [%u,%u) x [%u,%u) is empty or outside", n, j, q->x0,
                     q->x1, q->y0, q->y1);
        for (uint32_t x = q->x0; x < q->x1; x++)
            for (uint32_t y = q->y0; y < q->y1; y++) {
                if (cover[(size_t)x * n + y]++)
                    fail_msg("n=%u: block (%u,%u) owned twice (rank %u)", n, x, y, j);
                area++;
            }
        if (is_pow2(n)) {
            uint32_t x0 = n, x1 = 0, y0 = n, y1 = 0;
            for (uint64_t c = (uint64_t)n * j; c < (uint64_t)n * (j + 1); c++) {
                morton_block_t b = morton_block_rect(n, n, c);
                x0 = b.col < x0 ? b.col : x0;
                x1 = b.col + 1 > x1 ? b.col + 1 : x1;
                y0 = b.row < y0 ? b.row : y0;
                y1 = b.row + 1 > y1 ? b.row + 1 : y1;
            }
            if ((uint64_t)(x1 - x0) * (y1 - y0) != n || x0 != q->x0 || x1 != q->x1 || y0 != q->y0 ||
                y1 != q->y1)
                fail_msg("n=%u: rank %u owns [%u,%u) x [%u,%u), its Morton codes [%u,%u) x "
                         "[%u,%u)",
                         n, j, q->x0, q->x1, q->y0, q->y1, x0, x1, y0, y1);
        }
    }
    assert_int_equal(area, (uint64_t)n * n);
    free(cover);
    free(rc);
}

static void test_rects(void **state)
{
    (void)state;
    for (uint32_t n = 1; n <= 300; n++)
        check_rects(n);
    check_rects(512);
    check_rects(1000);
    check_rects(1024);
}

/* Messages of rank i: sends (recvs) plus its own-part copies, SEND -> TMP
 * (round 0) and TMP -> RECV (round 1) counted once per round, as the seed
 * counts "communications". */
static void count_msgs(const sim_t *sim, uint32_t i, uint32_t *out0, uint32_t *out1, uint32_t *in0,
                       uint32_t *in1)
{
    const sched_t *s = &sim->r[i].s;
    int self0 = 0, self1 = 0;

    *out0 = *out1 = *in0 = *in1 = 0;
    for (uint32_t k = 0; k < s->nsend; k++)
        (s->send[k].round == 0 ? (*out0)++ : (*out1)++);
    for (uint32_t k = 0; k < s->nrecv; k++)
        (s->recv[k].round == 0 ? (*in0)++ : (*in1)++);
    for (uint32_t k = 0; k < s->nlocal; k++) {
        const sched_msg_t *m = &s->local[k];
        self0 |= s->segs[sched_src_seg(m)].buf == SCHED_BUF_SEND;
        self1 |= s->segs[m->seg].buf == SCHED_BUF_RECV;
    }
    *out0 += self0;
    *in0 += self0;
    *out1 += self1;
    *in1 += self1;
}

/* Run all n ranks' schedules of one collective (bytes per block) under a
 * seeded random order; check every byte and the untouched tails. */
static void check_coll(int a2a, uint32_t n, uint64_t m, uint64_t seed)
{
    uint64_t slen = a2a ? n * m : m, rlen = n * m;
    uint32_t salt = (uint32_t)(seed * 7 + n);
    uint32_t r0 = is_pow2(n) ? isqrt_exact(n) : 0, r2 = is_pow2(n) ? isqrt_exact(2 * n) : 0;
    sim_t sim;

    sim_init(&sim, n, 0);
    for (uint32_t i = 0; i < n; i++) {
        sim_rank_t *r = &sim.r[i];
        int rc = a2a ? mnco_sched_alltoall(&r->s, n, i, m) : mnco_sched_allgather(&r->s, n, i, m);
        assert_int_equal(rc, ARCOLL_OK);
        sim_alloc(&sim, i, slen, rlen);
        for (uint64_t k = 0; k < slen; k++)
            r->buf[SCHED_BUF_SEND][k] = input_byte(i, k, salt);
    }
    SIM_ASSERT(&sim, sim_run(&sim, seed), "mn_co %s n=%u m=%llu seed=%llu\n",
               a2a ? "alltoall" : "allgather", n, (unsigned long long)m, (unsigned long long)seed);
    for (uint32_t y = 0; y < n; y++) {
        const sim_rank_t *r = &sim.r[y];
        uint32_t o0, o1, i0, i1;
        for (uint32_t x = 0; x < n; x++)
            for (uint64_t k = 0; k < m; k++) {
                uint8_t want = input_byte(x, a2a ? y * m + k : k, salt);
                if (r->buf[SCHED_BUF_RECV][x * m + k] != want)
                    fail_msg("mn_co %s n=%u m=%llu: rank %u block from %u byte %llu wrong",
                             a2a ? "alltoall" : "allgather", n, (unsigned long long)m, y, x,
                             (unsigned long long)k);
            }
        for (int b = 0; b < SCHED_NBUF; b++)
            if (r->buf[b][r->blen[b]] != 0xee)
                fail_msg("mn_co n=%u: rank %u wrote past buffer %d", n, y, b);
        for (uint64_t k = 0; k < slen; k++)
            if (r->buf[SCHED_BUF_SEND][k] != input_byte(y, k, salt))
                fail_msg("mn_co n=%u: rank %u's send buffer changed", n, y);
        /* The seed's counts: 2 sqrt(P) for P = 4^k; sqrt(2P) then sqrt(P/2)
         * for P = 2 * 4^k (and the same received). */
        count_msgs(&sim, y, &o0, &o1, &i0, &i1);
        if (r0 != 0 && (o0 != r0 || o1 != r0 || i0 != r0 || i1 != r0))
            fail_msg("n=%u rank %u: %u + %u messages out, %u + %u in, want %u + %u", n, y, o0, o1,
                     i0, i1, r0, r0);
        if (r2 != 0 && (o0 != r2 || o1 != r2 / 2 || i0 != r2 || i1 != r2 / 2))
            fail_msg("n=%u rank %u: %u + %u messages out, %u + %u in, want %u + %u", n, y, o0, o1,
                     i0, i1, r2, r2 / 2);
        assert_true(r->s.nrounds <= 2);
    }
    sim_free(&sim);
}

/* Both collectives at n = 1 .. 64 (two block sizes, two orders) and a few
 * larger n, around powers of two and squares. */
static void test_colls(void **state)
{
    static const uint32_t big[] = {81, 96, 100, 128, 200, 255, 256};

    (void)state;
    for (int a2a = 0; a2a < 2; a2a++) {
        for (uint32_t n = 1; n <= 64; n++)
            for (uint64_t seed = 0; seed < 2; seed++)
                check_coll(a2a, n, seed ? 3u + 2u * !a2a : 1, seed + n);
        for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
            check_coll(a2a, big[i], 2 - a2a, big[i]);
    }
}

/* The alltoall's per-rank bytes: every rank sends (or copies) its whole row
 * in round 0 and its whole rectangle in round 1 (2 P m for P = 4^k). */
static void test_bytes(void **state)
{
    static const uint32_t ns[] = {4, 6, 16, 27};
    mnco_rect_t rc[27];
    sched_t s;

    (void)state;
    sched_init(&s);
    for (size_t t = 0; t < sizeof(ns) / sizeof(ns[0]); t++) {
        uint32_t n = ns[t];
        mnco_rects(n, rc);
        for (uint32_t i = 0; i < n; i++) {
            uint64_t sent = 0, copied = 0, m = 10;
            assert_int_equal(mnco_sched_alltoall(&s, n, i, m), ARCOLL_OK);
            for (uint32_t k = 0; k < s.nsend; k++)
                sent += sched_msg_len(&s, &s.send[k]);
            for (uint32_t k = 0; k < s.nlocal; k++)
                if (s.segs[sched_src_seg(&s.local[k])].buf == SCHED_BUF_SEND ||
                    s.segs[s.local[k].seg].buf == SCHED_BUF_RECV)
                    copied += sched_msg_len(&s, &s.local[k]);
            assert_int_equal(sent + copied,
                             (n + (uint64_t)(rc[i].x1 - rc[i].x0) * (rc[i].y1 - rc[i].y0)) * m);
            assert_int_equal(s.tmp_len,
                             2 * (uint64_t)(rc[i].x1 - rc[i].x0) * (rc[i].y1 - rc[i].y0) * m);
        }
    }
    sched_free(&s);
}

static void test_invalid(void **state)
{
    sched_t s;

    (void)state;
    sched_init(&s);
    assert_int_equal(mnco_sched_alltoall(NULL, 4, 0, 8), ARCOLL_ERR_INVALID);
    assert_int_equal(mnco_sched_alltoall(&s, 0, 0, 8), ARCOLL_ERR_INVALID);
    assert_int_equal(mnco_sched_alltoall(&s, 4, 4, 8), ARCOLL_ERR_INVALID);
    assert_int_equal(mnco_sched_allgather(&s, 4, 0, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(mnco_sched_alltoall(&s, 4, 0, UINT64_MAX / 8), ARCOLL_ERR_INVALID);
    assert_int_equal(mnco_sched_allgather(&s, 4, 1, 8), ARCOLL_OK);
    assert_true(s.nsend > 0);
    sched_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rects),
        cmocka_unit_test(test_colls),
        cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_invalid),
    };
    int rc = cmocka_run_group_tests_name("mnco_sched", tests, NULL, NULL);

    print_message("%lu simulated collective calls\n", sim_runs);
    return rc;
}
