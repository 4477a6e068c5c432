/* Unit tests of src/alg/sched/lin_sched.c (the linear schedules of pap and direct)
 * on the schedule simulator (sched_sim.h): every rank's schedule run
 * together in memory, then the results byte for byte; and that the blocks
 * every message shares are stored once (sched_add_segs). */
#include "sched_sim.h"

#include "alg/sched/lin_sched.h"
#include "engine/team.h"

static const uint32_t lin_ns[] = {1, 2, 3, 4, 5, 7, 8, 13, 16};
#define N_LIN_NS (sizeof(lin_ns) / sizeof(lin_ns[0]))

typedef struct lin_rank {
    struct arcoll_team team;
    coll_req_t req;
} lin_rank_t;

/* Rank i's request: the team's shape and the call's arguments. */
static void lin_req(lin_rank_t *l, uint32_t n, uint32_t i, const coll_args_t *a)
{
    memset(l, 0, sizeof(*l));
    l->team.size = n;
    l->team.rank = i;
    l->req.team = &l->team;
    l->req.args = *a;
}

/* allreduce (rs == 0: count elements in all) or reduce-scatter (count per
 * rank), integer sums, run together; checks every rank's result. */
static void check_lin_reduction(uint32_t n, int rs, uint64_t count, uint64_t elem, int in_place,
                                uint64_t seed)
{
    uint64_t total = (rs ? count * n : count) * elem, out = rs ? count * elem : total;
    uint32_t salt = (uint32_t)seed;
    coll_args_t a = {.type = rs ? COLL_REDUCE_SCATTER : COLL_ALLREDUCE,
                     .count = count,
                     .elem = elem,
                     .in_place = in_place};
    lin_rank_t l;
    sim_t sim;

    sim_init(&sim, n, elem);
    for (uint32_t i = 0; i < n; i++) {
        sim_rank_t *r = &sim.r[i];
        lin_req(&l, n, i, &a);
        assert_int_equal(lin_sched_build(&l.req, &r->s), ARCOLL_OK);
        sim_alloc(&sim, i, in_place ? 0 : total, in_place ? total : out + 3);
        for (uint64_t k = 0; k < total; k++)
            r->buf[in_place ? SCHED_BUF_RECV : SCHED_BUF_SEND][k] = input_byte(i, k, salt);
        if (n > 1) {
            /* Every peer's block reduces into one segment, and an allreduce
             * sends one block to every peer: each stored once. Without the
             * sharing a rank holds 2 (rs) or 4 segments per peer. */
            uint32_t most = (rs ? 1 : 2) * (n - 1) + 6;
            if (r->s.nsegs > most)
                fail_msg("%s n=%u rank %u: %u segments, at most %u", rs ? "rs" : "allreduce", n, i,
                         r->s.nsegs, most);
        }
    }
    SIM_ASSERT(&sim, sim_run(&sim, seed), "lin %s n=%u count=%llu elem=%llu in_place=%d\n",
               rs ? "reduce_scatter" : "allreduce", n, (unsigned long long)count,
               (unsigned long long)elem, in_place);
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *rb = sim.r[i].buf[SCHED_BUF_RECV];
        uint64_t from = rs ? i * out : 0;
        for (uint64_t k = 0; k < out; k += elem)
            if (sim_get_elem(rb + k, elem) != sim_ref_elem(n, from + k, elem, salt))
                fail_msg("lin %s n=%u count=%llu in_place=%d: rank %u byte %llu wrong",
                         rs ? "reduce_scatter" : "allreduce", n, (unsigned long long)count,
                         in_place, i, (unsigned long long)k);
        for (uint64_t k = out; !in_place && k < out + 3; k++)
            assert_int_equal(rb[k], 0xee);
    }
    sim_free(&sim);
}

static void test_lin_allreduce(void **state)
{
    (void)state;
    for (size_t a = 0; a < N_LIN_NS; a++) {
        uint32_t n = lin_ns[a];
        /* empty, fewer elements than ranks (empty blocks), uneven, several per block */
        uint64_t counts[] = {0, 1, n > 1 ? n - 1 : 1, 3 * (uint64_t)n + 1, 40 * (uint64_t)n};
        for (size_t z = 0; z < sizeof(counts) / sizeof(counts[0]); z++)
            for (int e = 0; e < 2; e++)
                for (int ip = 0; ip < 2; ip++)
                    check_lin_reduction(n, 0, counts[z], e ? 4 : 8, ip, 300 + n * 7 + z);
    }
}

static void test_lin_reduce_scatter(void **state)
{
    (void)state;
    for (size_t a = 0; a < N_LIN_NS; a++)
        for (uint64_t count = 0; count < 4; count += 3)
            for (int ip = 0; ip < 2; ip++)
                check_lin_reduction(lin_ns[a], 1, count + 1, 8, ip, 500 + lin_ns[a] + count);
}

/* allgatherv with uneven blocks (some empty) at scattered displacements. */
static void test_lin_allgatherv(void **state)
{
    (void)state;
    for (size_t z = 0; z < N_LIN_NS; z++)
        for (int ip = 0; ip < 2; ip++) {
            uint32_t n = lin_ns[z], salt = 40 + n;
            size_t *c = calloc(2 * (size_t)n, sizeof(*c)), at = 2, len;
            lin_rank_t l;
            sim_t sim;

            assert_non_null(c);
            for (uint32_t j = 0; j < n; j++) {
                c[j] = (j * 5 + 3) % 7; /* 0 for some j */
                c[n + j] = at;
                at += c[j] + j % 2;
            }
            len = at + 3;
            sim_init(&sim, n, 0);
            for (uint32_t i = 0; i < n; i++) {
                sim_rank_t *r = &sim.r[i];
                coll_args_t a = {.type = COLL_ALLGATHERV,
                                 .bytes = c[i],
                                 .rcounts = c,
                                 .rdispls = c + n,
                                 .in_place = ip};
                lin_req(&l, n, i, &a);
                assert_int_equal(lin_sched_build(&l.req, &r->s), ARCOLL_OK);
                /* one segment for all sends: 1 + n - 1 receives + the local copy's 2 */
                assert_true(r->s.nsegs <= n + 2);
                sim_alloc(&sim, i, ip ? 0 : c[i], len);
                for (size_t k = 0; k < c[i]; k++)
                    r->buf[ip ? SCHED_BUF_RECV : SCHED_BUF_SEND][(ip ? c[n + i] : 0) + k] =
                        input_byte(i, k, salt);
            }
            SIM_ASSERT(&sim, sim_run(&sim, salt), "lin allgatherv n=%u in_place=%d\n", n, ip);
            for (uint32_t i = 0; i < n; i++)
                for (uint32_t j = 0; j < n; j++)
                    for (size_t k = 0; k < c[j]; k++)
                        if (sim.r[i].buf[SCHED_BUF_RECV][c[n + j] + k] != input_byte(j, k, salt))
                            fail_msg("lin allgatherv n=%u in_place=%d: rank %u, block %u byte %zu",
                                     n, ip, i, j, k);
            sim_free(&sim);
            free(c);
        }
}

/* More segments than a message can name: refused, not truncated. */
static void test_lin_nseg_limit(void **state)
{
    sched_seg_t g = {.off = 0, .len = 1, .buf = SCHED_BUF_SEND};
    uint32_t first = 0;
    sched_t s;

    (void)state;
    sched_init(&s);
    assert_int_equal(sched_add_segs(&s, &g, 1, &first), ARCOLL_OK);
    assert_int_equal(sched_add_send_at(&s, 0, 1, first, SCHED_NSEG_MAX + 1u),
                     ARCOLL_ERR_UNSUPPORTED);
    assert_int_equal(sched_add_recv_at(&s, 0, 1, SCHED_COPY, first, SCHED_NSEG_MAX + 1u),
                     ARCOLL_ERR_UNSUPPORTED);
    assert_int_equal(s.nsend + s.nrecv, 0);
    assert_int_equal(sched_add_send_at(&s, 0, 1, first, 1), ARCOLL_OK);
    assert_int_equal(sched_add_send_at(&s, 0, 2, first, 1), ARCOLL_OK);
    assert_int_equal(s.nsegs, 1);
    assert_int_equal(s.send[1].seg, first);
    assert_int_equal(s.send[1].nseg, 1);
    assert_int_equal(sched_msg_len(&s, &s.send[1]), 1);
    sched_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lin_allreduce),
        cmocka_unit_test(test_lin_reduce_scatter),
        cmocka_unit_test(test_lin_allgatherv),
        cmocka_unit_test(test_lin_nseg_limit),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
