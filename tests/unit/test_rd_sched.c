/* Unit tests of src/alg/sched/rd_sched.c on the schedule simulator (sched_sim.h):
 * every rank's schedule run together in memory, then the results byte for
 * byte. */
#include "sched_sim.h"

#include "alg/sched/rd_sched.h"

/* ---- collectives against references ------------------------------------ */

static const char *const vname[] = {"halving", "doubling", "ring"};

static uint32_t ilog2(uint32_t n)
{
    uint32_t l = 0;

    while ((1u << l) < n)
        l++;
    return l;
}

static int is_pow2(uint32_t n)
{
    return (n & (n - 1)) == 0;
}

static uint32_t bitrev(uint32_t x, uint32_t nbits)
{
    uint32_t r = 0;

    for (uint32_t i = 0; i < nbits; i++)
        r |= ((x >> i) & 1u) << (nbits - 1 - i);
    return r;
}

/* Did every rank's schedule send exactly `want` bytes in `rounds` rounds? */
static uint64_t total_sent(const sim_t *sim, uint32_t i)
{
    const sched_t *s = &sim->r[i].s;
    uint64_t t = 0;

    for (uint32_t k = 0; k < s->nsend; k++)
        t += sched_msg_len(s, &s->send[k]);
    return t;
}

static void check_allgatherv(int variant, uint32_t n, const uint64_t *counts,
                             const uint64_t *displs, int in_place, uint64_t seed, int regular)
{
    uint64_t recv_len = 0, total = 0;
    uint32_t salt = (uint32_t)seed;
    sim_t sim;

    for (uint32_t j = 0; j < n; j++) {
        if (displs[j] + counts[j] > recv_len)
            recv_len = displs[j] + counts[j];
        total += counts[j];
    }
    recv_len += 5; /* a tail that must stay untouched */
    sim_init(&sim, n, 0);
    for (uint32_t i = 0; i < n; i++) {
        sim_rank_t *r = &sim.r[i];
        assert_int_equal(rd_sched_allgatherv(&r->s, variant, n, i, counts, displs, in_place),
                         ARCOLL_OK);
        sim_alloc(&sim, i, in_place ? 0 : counts[i], recv_len);
        for (uint64_t k = 0; k < counts[i]; k++) {
            if (in_place)
                r->buf[SCHED_BUF_RECV][displs[i] + k] = input_byte(i, k, salt);
            else
                r->buf[SCHED_BUF_SEND][k] = input_byte(i, k, salt);
        }
    }
    SIM_ASSERT(&sim, sim_run(&sim, seed), "allgatherv %s n=%u in_place=%d seed=%llu\n",
               vname[variant], n, in_place, (unsigned long long)seed);
    for (uint32_t i = 0; i < n; i++) {
        const sim_rank_t *r = &sim.r[i];
        const uint8_t *rb = r->buf[SCHED_BUF_RECV];
        uint8_t *mark = calloc(recv_len, 1);
        assert_non_null(mark);
        for (uint32_t j = 0; j < n; j++)
            for (uint64_t k = 0; k < counts[j]; k++) {
                if (rb[displs[j] + k] != input_byte(j, k, salt))
                    fail_msg("allgatherv %s n=%u in_place=%d: rank %u block %u byte %llu wrong",
                             vname[variant], n, in_place, i, j, (unsigned long long)k);
                mark[displs[j] + k] = 1;
            }
        for (uint64_t k = 0; k < recv_len; k++)
            if (!mark[k] && rb[k] != 0xee)
                fail_msg("allgatherv %s n=%u: rank %u wrote gap byte %llu", vname[variant], n, i,
                         (unsigned long long)k);
        free(mark);
        for (uint64_t k = 0; !in_place && k < counts[i]; k++)
            assert_int_equal(r->buf[SCHED_BUF_SEND][k], input_byte(i, k, salt));
        /* Every rank gets every other block once (HALVING: the swap's and
         * its own block once more, unless a fixed point). */
        if (variant != RD_HALVING)
            assert_int_equal(r->received, total - counts[i]);
        else
            assert_true(r->received == total || r->received == total - counts[i]);
        if (regular && !in_place)
            for (uint32_t k = 0; k < r->s.nsend + r->s.nrecv; k++) {
                const sched_msg_t *m = k < r->s.nsend ? &r->s.send[k] : &r->s.recv[k - r->s.nsend];
                /* one run of RECV, split by the own block read from SEND */
                if (variant != RD_RING && m->nseg > 3)
                    fail_msg("allgather %s n=%u rank %u: a message of %u segments", vname[variant],
                             n, i, m->nseg);
            }
        if (regular && counts[0] > 0 && n > 1) {
            uint64_t b = counts[0], want = (n - 1) * b;
            uint32_t lg = ilog2(n), rounds = variant == RD_RING       ? n - 1
                                             : variant == RD_DOUBLING ? lg
                                                                      : lg + 1;
            if (variant == RD_HALVING && is_pow2(n) && bitrev(i, lg) != i)
                want += b;
            if (is_pow2(n) || variant == RD_RING)
                assert_int_equal(total_sent(&sim, i), want);
            if (is_pow2(n) || variant == RD_RING)
                assert_int_equal(r->s.nrounds, rounds);
            else
                assert_true(r->s.nrounds <= rounds);
        }
    }
    sim_free(&sim);
}

static const uint32_t test_ns[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12,
                                   13, 14, 15, 16, 17, 24, 31, 32, 33, 64, 100};
#define N_NS (sizeof(test_ns) / sizeof(test_ns[0]))

static int nseeds(uint32_t n)
{
    return n <= 17 ? 3 : n <= 33 ? 2 : 1;
}

static void test_allgather_regular(void **state)
{
    static const uint64_t sizes[] = {0, 1, 7, 4096};

    (void)state;
    for (size_t a = 0; a < N_NS; a++)
        for (int v = 0; v < RD_NVARIANT; v++)
            for (size_t z = 0; z < 4; z++)
                for (int ip = 0; ip < 2; ip++)
                    for (int sd = 0; sd < nseeds(test_ns[a]); sd++) {
                        uint32_t n = test_ns[a];
                        uint64_t *c = malloc(sizeof(*c) * 2 * n);
                        sim_t chk;
                        assert_non_null(c);
                        for (uint32_t j = 0; j < n; j++) {
                            c[j] = sizes[z];
                            c[n + j] = j * sizes[z];
                        }
                        /* The convenience form builds the same schedule. */
                        sim_init(&chk, 2, 0);
                        assert_int_equal(rd_sched_allgather(&chk.r[0].s, v, n, n - 1, sizes[z], ip),
                                         ARCOLL_OK);
                        assert_int_equal(
                            rd_sched_allgatherv(&chk.r[1].s, v, n, n - 1, c, c + n, ip), ARCOLL_OK);
                        assert_int_equal(chk.r[0].s.nsegs, chk.r[1].s.nsegs);
                        assert_int_equal(chk.r[0].s.nsend, chk.r[1].s.nsend);
                        assert_int_equal(chk.r[0].s.nrecv, chk.r[1].s.nrecv);
                        for (uint32_t g = 0; g < chk.r[0].s.nsegs; g++) {
                            const sched_seg_t *x = &chk.r[0].s.segs[g], *y = &chk.r[1].s.segs[g];
                            assert_true(x->buf == y->buf && x->off == y->off && x->len == y->len);
                        }
                        sim_free(&chk);
                        check_allgatherv(v, n, c, c + n, ip, 1000 + sd * 7919 + n, 1);
                        free(c);
                    }
}

/* Uneven and zero counts, shuffled displacements with gaps. */
static void test_allgatherv_uneven(void **state)
{
    static const uint64_t maxes[] = {1, 7, 4096};

    (void)state;
    for (size_t a = 0; a < N_NS; a++)
        for (int v = 0; v < RD_NVARIANT; v++)
            for (size_t z = 0; z < 3; z++)
                for (int ip = 0; ip < 2; ip++)
                    for (int sd = 0; sd < nseeds(test_ns[a]); sd++) {
                        uint32_t n = test_ns[a], *perm = malloc(sizeof(*perm) * n);
                        uint64_t *c = malloc(sizeof(*c) * 2 * n), at = 3;
                        assert_true(c != NULL && perm != NULL);
                        rng_state = 77 + n * 131 + (uint64_t)sd * 17 + z;
                        for (uint32_t j = 0; j < n; j++) {
                            c[j] = rng_below(4) == 0 ? 0 : rng_below(maxes[z] + 1);
                            perm[j] = j;
                        }
                        for (uint32_t j = n; j-- > 1;) {
                            uint32_t k = rng_below(j + 1), t = perm[j];
                            perm[j] = perm[k];
                            perm[k] = t;
                        }
                        for (uint32_t j = 0; j < n; j++) {
                            c[n + perm[j]] = at;
                            at += c[perm[j]] + rng_below(3);
                        }
                        check_allgatherv(v, n, c, c + n, ip, 5000 + sd * 31 + n, 0);
                        free(c);
                        free(perm);
                    }
}

/* allreduce if counts == NULL (count elements), else reduce-scatter. */
static void check_reduction(int variant, uint32_t n, const uint64_t *counts, uint64_t count,
                            uint64_t elem, int in_place, uint64_t seed)
{
    uint64_t total = 0, *off = calloc(n + 1, sizeof(*off)), *len = calloc(n, sizeof(*len));
    uint32_t salt = (uint32_t)seed * 3;
    const char *what = counts ? "reduce_scatter" : "allreduce";
    uint64_t *ref;
    int allpos = 1;
    sim_t sim;

    assert_true(off != NULL && len != NULL);
    for (uint32_t j = 0; j < n; j++) {
        len[j] = (counts ? counts[j] : count / n + (j < count % n)) * elem;
        off[j] = total;
        total += len[j];
        allpos &= len[j] > 0;
    }
    ref = malloc(sizeof(*ref) * (total / elem + 1));
    assert_non_null(ref);
    for (uint64_t k = 0; k < total; k += elem)
        ref[k / elem] = sim_ref_elem(n, k, elem, salt);
    sim_init(&sim, n, elem);
    for (uint32_t i = 0; i < n; i++) {
        sim_rank_t *r = &sim.r[i];
        uint64_t out = counts ? len[i] : total;
        int rc = counts ? rd_sched_reduce_scatter(&r->s, variant, n, i, counts, elem, in_place)
                        : rd_sched_allreduce(&r->s, variant, n, i, count, elem, in_place);
        assert_int_equal(rc, ARCOLL_OK);
        sim_alloc(&sim, i, in_place ? 0 : total, in_place ? total : out + 3);
        for (uint64_t k = 0; k < total; k++)
            r->buf[in_place ? SCHED_BUF_RECV : SCHED_BUF_SEND][k] = input_byte(i, k, salt);
    }
    SIM_ASSERT(&sim, sim_run(&sim, seed), "%s %s n=%u elem=%llu in_place=%d seed=%llu\n", what,
               vname[variant], n, (unsigned long long)elem, in_place, (unsigned long long)seed);
    for (uint32_t i = 0; i < n; i++) {
        const sim_rank_t *r = &sim.r[i];
        const uint8_t *rb = r->buf[SCHED_BUF_RECV];
        uint64_t from = counts ? off[i] : 0, out = counts ? len[i] : total;
        for (uint64_t k = 0; k < out; k += elem)
            if (sim_get_elem(rb + k, elem) != ref[(from + k) / elem])
                fail_msg("%s %s n=%u elem=%llu in_place=%d: rank %u byte %llu wrong", what,
                         vname[variant], n, (unsigned long long)elem, in_place, i,
                         (unsigned long long)k);
        for (uint64_t k = out; !in_place && k < out + 3; k++)
            assert_int_equal(rb[k], 0xee);
        for (uint64_t k = 0; !in_place && k < total; k++)
            assert_int_equal(r->buf[SCHED_BUF_SEND][k], input_byte(i, k, salt));
        if (n > 1 && is_pow2(n) && variant != RD_RING && allpos) {
            uint32_t lg = ilog2(n);
            /* HALVING's swap is a round of its own unless bitrev(i) == i. */
            uint32_t rounds = counts ? lg + (variant == RD_HALVING && bitrev(i, lg) != i) : 2 * lg;
            assert_int_equal(r->s.nrounds, rounds);
            for (uint32_t k = 0; k < r->s.nsend + r->s.nrecv; k++) {
                const sched_msg_t *m = k < r->s.nsend ? &r->s.send[k] : &r->s.recv[k - r->s.nsend];
                /* allreduce: one run of RECV split by the block reduced here (TMP) */
                if (m->nseg > (counts ? 1u : 3u))
                    fail_msg("%s %s n=%u rank %u: a message of %u segments", what, vname[variant],
                             n, i, m->nseg);
            }
        }
        if (variant != RD_RING)
            assert_true(r->s.nrounds <= (counts ? ilog2(n) + 1 : 2 * ilog2(n)));
        if (n > 1 && variant == RD_RING && allpos)
            assert_int_equal(r->s.nrounds, counts ? n - 1 : 2 * (n - 1));
        if (counts && n > 1 && is_pow2(n) && variant != RD_RING && len[0] > 0) {
            /* Equal blocks: (n-1) blocks in the halving stages, plus the swap. */
            uint64_t want = (n - 1) * len[0];
            int uneven = 0;
            for (uint32_t j = 0; j < n; j++)
                uneven |= len[j] != len[0];
            if (variant == RD_HALVING && bitrev(i, ilog2(n)) != i)
                want += len[0];
            if (!uneven)
                assert_int_equal(total_sent(&sim, i), want);
        }
    }
    sim_free(&sim);
    free(ref);
    free(len);
    free(off);
}

static void test_reduce_scatter(void **state)
{
    static const uint64_t per[] = {0, 1, 7, 1000};

    (void)state;
    for (size_t a = 0; a < N_NS; a++)
        for (int v = 0; v < RD_NVARIANT; v++)
            for (size_t z = 0; z < 4; z++)
                for (int e = 0; e < 2; e++)
                    for (int ip = 0; ip < 2; ip++) {
                        uint32_t n = test_ns[a];
                        uint64_t elem = e ? 4 : 8, *c = malloc(sizeof(*c) * n);
                        /* 1000 elements per block only up to 33 ranks: the
                         * whole input is on every rank, n^2 blocks in memory. */
                        uint64_t k = per[z] == 1000 && n > 33 ? 40 : per[z];
                        assert_non_null(c);
                        for (int sd = 0; sd < nseeds(n); sd++) {
                            for (uint32_t j = 0; j < n; j++)
                                c[j] = k;
                            check_reduction(v, n, c, 0, elem, ip, 300 + sd + n * 3);
                            /* uneven and zero blocks */
                            rng_state = 99 + n + (uint64_t)sd * 1009 + z;
                            for (uint32_t j = 0; j < n; j++)
                                c[j] = rng_below(3) == 0 ? 0 : rng_below(k + 1);
                            check_reduction(v, n, c, 0, elem, ip, 700 + sd + n * 5);
                        }
                        free(c);
                    }
}

static void test_allreduce(void **state)
{
    (void)state;
    for (size_t a = 0; a < N_NS; a++)
        for (int v = 0; v < RD_NVARIANT; v++)
            for (int e = 0; e < 2; e++)
                for (int ip = 0; ip < 2; ip++) {
                    uint32_t n = test_ns[a];
                    /* empty, fewer elements than ranks, uneven, 1000 per block */
                    uint64_t counts[] = {0,
                                         1,
                                         7,
                                         n - 1 ? n - 1 : 1,
                                         3 * (uint64_t)n + n / 2,
                                         (n > 33 ? 40 : 1000) * (uint64_t)n};
                    for (size_t z = 0; z < sizeof(counts) / sizeof(counts[0]); z++)
                        for (int sd = 0; sd < nseeds(n); sd++)
                            check_reduction(v, n, NULL, counts[z], e ? 4 : 8, ip,
                                            900 + sd * 13 + n + z);
                }
}

/* ---- the checker catches broken schedules ------------------------------- */

/* A ring allgatherv of 3 ranks with distinct block sizes, built into sim. */
static void build_ring3(sim_t *sim, const uint64_t *c, const uint64_t *d)
{
    sim_init(sim, 3, 0);
    for (uint32_t i = 0; i < 3; i++) {
        assert_int_equal(rd_sched_allgatherv(&sim->r[i].s, RD_RING, 3, i, c, d, 0), ARCOLL_OK);
        sim_alloc(sim, i, c[i], 16);
    }
}

static void test_checker_catches(void **state)
{
    static const uint64_t c[3] = {2, 3, 5}, d[3] = {0, 2, 5};
    sim_t sim;
    sched_seg_t g8 = {.off = 0, .len = 8, .buf = SCHED_BUF_RECV};
    sched_t *s;

    (void)state;
    /* The unmodified schedule passes. */
    build_ring3(&sim, c, d);
    assert_int_equal(sim_run(&sim, 1), 0);
    sim_free(&sim);

    /* Rank 0 streams 2 then 3 bytes to rank 1, which expects 3 then 2. */
    sim_init(&sim, 2, 0);
    {
        sched_seg_t a = {.off = 0, .len = 2, .buf = SCHED_BUF_SEND};
        sched_seg_t b = {.off = 2, .len = 3, .buf = SCHED_BUF_SEND};
        sched_seg_t x = {.off = 0, .len = 3, .buf = SCHED_BUF_RECV};
        sched_seg_t y = {.off = 3, .len = 2, .buf = SCHED_BUF_RECV};
        assert_int_equal(sched_add_send(&sim.r[0].s, 0, 1, &a, 1), 0);
        assert_int_equal(sched_add_send(&sim.r[0].s, 0, 1, &b, 1), 0);
        assert_int_equal(sched_add_recv(&sim.r[1].s, 0, 0, SCHED_COPY, &x, 1), 0);
        assert_int_equal(sched_add_recv(&sim.r[1].s, 0, 0, SCHED_COPY, &y, 1), 0);
        sim_alloc(&sim, 0, 5, 5);
        sim_alloc(&sim, 1, 5, 5);
    }
    assert_int_not_equal(sim_run(&sim, 1), 0);
    assert_non_null(strstr(sim.err, "bytes, the send"));
    sim_free(&sim);

    /* Rank 0's two ring messages to rank 1 swapped: round 0 now sends the
     * block its round-0 receive writes. */
    build_ring3(&sim, c, d);
    sim.no_static = 1;
    s = &sim.r[0].s;
    assert_int_equal(s->nsend, 2);
    {
        uint32_t seg = s->send[0].seg, nseg = s->send[0].nseg;
        s->send[0].seg = s->send[1].seg;
        s->send[0].nseg = s->send[1].nseg;
        s->send[1].seg = seg;
        s->send[1].nseg = nseg;
    }
    assert_int_not_equal(sim_run(&sim, 1), 0);
    sim_free(&sim);

    /* A receive dropped: a message is left over. */
    build_ring3(&sim, c, d);
    sim.r[2].s.nrecv--;
    assert_int_not_equal(sim_run(&sim, 1), 0);
    assert_non_null(strstr(sim.err, "never received"));
    sim_free(&sim);

    /* A receive added on top of another. */
    build_ring3(&sim, c, d);
    s = &sim.r[1].s;
    assert_int_equal(
        sched_add_recv(s, s->recv[s->nrecv - 1].round, 0, SCHED_COPY, &s->segs[s->recv[0].seg], 1),
        0);
    assert_int_equal(sched_add_send(&sim.r[0].s, s->recv[s->nrecv - 1].round, 1,
                                    &sim.r[0].s.segs[sim.r[0].s.send[0].seg], 1),
                     0);
    assert_int_not_equal(sim_run(&sim, 1), 0);
    sim_free(&sim);

    /* Write-after-read: each of 2 ranks sends RECV[0..8) and receives into
     * it in the same round. The static check catches it for any order; the
     * dynamic one whenever the receive lands while its send may still read. */
    for (int no_static = 0; no_static < 2; no_static++) {
        int caught = 0;
        for (uint64_t seed = 0; seed < 32; seed++) {
            sim_init(&sim, 2, 0);
            sim.no_static = no_static;
            for (uint32_t i = 0; i < 2; i++) {
                assert_int_equal(sched_add_send(&sim.r[i].s, 0, 1 - i, &g8, 1), 0);
                assert_int_equal(sched_add_recv(&sim.r[i].s, 0, 1 - i, SCHED_COPY, &g8, 1), 0);
                sim_alloc(&sim, i, 0, 8);
            }
            caught += sim_run(&sim, seed) != 0;
            sim_free(&sim);
        }
        if (no_static)
            assert_true(caught > 0);
        else
            assert_int_equal(caught, 32);
    }

    /* A send that forwards what it receives in its own round. */
    sim_init(&sim, 2, 0);
    {
        sched_seg_t a = {.off = 0, .len = 4, .buf = SCHED_BUF_RECV};
        sched_seg_t b = {.off = 4, .len = 4, .buf = SCHED_BUF_RECV};
        assert_int_equal(sched_add_send(&sim.r[0].s, 0, 1, &a, 1), 0);
        assert_int_equal(sched_add_recv(&sim.r[1].s, 0, 0, SCHED_COPY, &a, 1), 0);
        assert_int_equal(sched_add_send(&sim.r[1].s, 0, 0, &a, 1), 0);
        assert_int_equal(sched_add_recv(&sim.r[0].s, 0, 1, SCHED_COPY, &b, 1), 0);
        sim_alloc(&sim, 0, 0, 8);
        sim_alloc(&sim, 1, 0, 8);
    }
    assert_int_not_equal(sim_run(&sim, 3), 0);
    assert_non_null(strstr(sim.err, "overlap"));
    sim_free(&sim);
}

static void test_invalid(void **state)
{
    uint64_t c[4] = {1, 1, 1, 1}, d[4] = {0, 1, 2, 3}, big[2] = {UINT64_MAX, 1};
    sched_t s;

    (void)state;
    sched_init(&s);
    assert_int_equal(rd_sched_allgatherv(NULL, RD_RING, 4, 0, c, d, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_allgatherv(&s, RD_RING, 0, 0, c, d, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_allgatherv(&s, RD_RING, 4, 4, c, d, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_allgatherv(&s, 7, 4, 0, c, d, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_allgatherv(&s, -1, 4, 0, c, d, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_allgatherv(&s, RD_HALVING, 4, 0, NULL, d, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_allgatherv(&s, RD_HALVING, 4, 0, c, NULL, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_allgatherv(&s, RD_HALVING, 2, 0, c, big, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_allgather(&s, RD_HALVING, 4, 0, UINT64_MAX / 2, 0),
                     ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_reduce_scatter(&s, RD_HALVING, 4, 0, c, 0, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_reduce_scatter(&s, RD_HALVING, 4, 0, NULL, 8, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_reduce_scatter(&s, RD_HALVING, 2, 0, big, 8, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_allreduce(&s, RD_DOUBLING, 4, 0, 10, 0, 0), ARCOLL_ERR_INVALID);
    assert_int_equal(rd_sched_allreduce(&s, RD_DOUBLING, 4, 0, UINT64_MAX / 4, 8, 0),
                     ARCOLL_ERR_INVALID);
    /* A failed build leaves an empty schedule behind. */
    assert_int_equal(s.nsend + s.nrecv + s.nlocal + s.nrounds, 0);
    assert_int_equal(rd_sched_allreduce(&s, RD_DOUBLING, 4, 0, 10, 8, 0), ARCOLL_OK);
    assert_true(s.nsend > 0);
    sched_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_catches),   cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_allgather_regular), cmocka_unit_test(test_allgatherv_uneven),
        cmocka_unit_test(test_reduce_scatter),    cmocka_unit_test(test_allreduce),
    };

    int rc = cmocka_run_group_tests_name("rd_sched", tests, NULL, NULL);

    print_message("%lu simulated collective calls\n", sim_runs);
    return rc;
}
