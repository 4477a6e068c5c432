/* Unit tests of the write schedules (src/alg/flat/alg_pap.c, alg_direct.c) and of
 * coll_tx/coll_tx_continue (src/dispatch/coll.c): in which order a rank writes to
 * its peers, driven by a scripted protocol. A hand-built team and request
 * stand in for coll_start; nothing here touches a real channel.
 *
 * The scripted protocol is not &coll_proto_zcopy, so PAP scans it the way it
 * scans the copy path, (p - i) mod N. The zero-copy direction, (p + i) mod N,
 * is tested with the real coll_proto_zcopy over a recording fake channel and
 * a local region; likewise the copy direction with the real coll_proto_bounce. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/engine.h"

extern const coll_alg_t coll_alg_pap, coll_alg_direct;

#define MAXN   32
#define MAXLOG 4096

/* ---- the scripted protocol --------------------------------------------- */

typedef struct fake {
    int arrived[MAXN], ready[MAXN];
    int tx_rc[MAXN]; /* if nonzero: what tx() returns instead of the default */
    int frags[MAXN]; /* tx() returns 1 on this call (default 1) */
    int ready_rc;    /* if nonzero: what tx_ready() returns for every peer */
    int tx_calls[MAXN], arrived_calls[MAXN], ready_calls[MAXN];
    uint32_t tx_log[MAXLOG], ready_log[MAXLOG];
    size_t ntx, nready;
    int violations; /* tx() for a peer neither arrived nor ready */
} fake_t;

static fake_t fk;

static int fake_arrived(coll_req_t *r, uint32_t peer)
{
    assert_true(peer < r->team->size);
    assert_int_not_equal(peer, r->team->rank);
    fk.arrived_calls[peer]++;
    return fk.arrived[peer];
}

static int fake_tx_ready(coll_req_t *r, uint32_t peer)
{
    assert_true(peer < r->team->size);
    assert_int_not_equal(peer, r->team->rank);
    fk.ready_calls[peer]++;
    if (fk.nready < MAXLOG)
        fk.ready_log[fk.nready++] = peer;
    return fk.ready_rc ? fk.ready_rc : fk.ready[peer];
}

static int fake_tx(coll_req_t *r, uint32_t peer)
{
    assert_true(peer < r->team->size);
    assert_int_not_equal(peer, r->team->rank);
    if (!fk.ready[peer] && !fk.arrived[peer])
        fk.violations++;
    fk.tx_calls[peer]++;
    assert_true(fk.ntx < MAXLOG);
    fk.tx_log[fk.ntx++] = peer;
    if (fk.tx_rc[peer])
        return fk.tx_rc[peer];
    return fk.tx_calls[peer] >= (fk.frags[peer] ? fk.frags[peer] : 1);
}

static const coll_proto_t fake_proto = {
    .name = "fake",
    .arrived = fake_arrived,
    .tx_ready = fake_tx_ready,
    .tx = fake_tx,
};

/* ---- a hand-built team ------------------------------------------------- */

static struct arcoll_team team;
static coll_peer_t peers[MAXN];

static coll_req_t *req_init(uint32_t n, uint32_t rank, const coll_alg_t *alg,
                            const coll_proto_t *proto)
{
    coll_req_t *r = &team.reqs[0];

    assert_true(n <= MAXN && rank < n);
    memset(&fk, 0, sizeof(fk));
    memset(&team, 0, sizeof(team));
    memset(peers, 0, sizeof(peers));
    team.size = n;
    team.rank = rank;
    r->peers = peers;
    r->team = &team;
    r->proto = proto;
    r->alg = alg;
    r->is_direct = alg == &coll_alg_direct;
    r->type = COLL_ALLGATHER;
    r->nfrags = 1;
    r->tx_left = n - 1;
    r->rx_left = n - 1;
    r->step = 1;
    r->active = 1;
    peers[rank].tx_state = COLL_TX_DONE;
    peers[rank].rx_done = 1;
    return r;
}

static void set_all(int *a, uint32_t n, int v)
{
    for (uint32_t i = 0; i < n; i++)
        a[i] = v;
}

/* The writes since *from equal want[0..nwant). */
static void expect_writes(size_t *from, const uint32_t *want, size_t nwant)
{
    if (fk.ntx - *from != nwant)
        fail_msg("%zu writes, expected %zu", fk.ntx - *from, nwant);
    for (size_t i = 0; i < nwant; i++)
        if (fk.tx_log[*from + i] != want[i])
            fail_msg("write %zu went to peer %u, expected %u", i, fk.tx_log[*from + i], want[i]);
    *from = fk.ntx;
}

#define EXPECT(from, ...)                                             \
    do {                                                              \
        static const uint32_t want_[] = {__VA_ARGS__};                \
        expect_writes(from, want_, sizeof(want_) / sizeof(want_[0])); \
    } while (0)
#define EXPECT_NONE(from) expect_writes(from, NULL, 0)

static void assert_all_written_once(uint32_t n, uint32_t rank)
{
    for (uint32_t p = 0; p < n; p++) {
        if (p == rank) {
            assert_int_equal(fk.tx_calls[p], 0);
            continue;
        }
        if (fk.tx_calls[p] != 1)
            fail_msg("peer %u written %d times", p, fk.tx_calls[p]);
        assert_int_equal(peers[p].tx_state, COLL_TX_DONE);
    }
}

/* ---- PAP over the scripted protocol: the (p - i) direction ------------- */

static void test_pap_arrived_first(void **state)
{
    coll_req_t *r = req_init(8, 3, &coll_alg_pap, &fake_proto);
    size_t at = 0;

    (void)state;
    set_all(fk.ready, 8, 1);
    fk.arrived[6] = fk.arrived[1] = fk.arrived[4] = 1;
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    /* Scan 2,1,0,7,6,5,4: the arrived 1,6,4 first, then the others. */
    EXPECT(&at, 1, 6, 4, 2, 0, 7, 5);
    assert_int_equal(r->tx_left, 0);
    assert_all_written_once(8, 3);
    assert_int_equal(fk.violations, 0);
    /* Done: a further call writes nothing. */
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT_NONE(&at);
}

static void test_pap_scan_direction(void **state)
{
    coll_req_t *r = req_init(5, 0, &coll_alg_pap, &fake_proto);
    size_t at = 0;

    (void)state;
    set_all(fk.ready, 5, 1);
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT(&at, 4, 3, 2, 1);

    r = req_init(5, 4, &coll_alg_pap, &fake_proto);
    at = 0;
    set_all(fk.ready, 5, 1);
    fk.arrived[0] = 1;
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT(&at, 0, 3, 2, 1);
    assert_int_equal(r->tx_left, 0);
}

static void test_pap_arrivals_over_time(void **state)
{
    coll_req_t *r = req_init(6, 2, &coll_alg_pap, &fake_proto);
    size_t at = 0;

    (void)state;
    /* Nobody arrived, nobody ready: nothing, but PAP asked about everyone. */
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT_NONE(&at);
    for (uint32_t p = 0; p < 6; p++) {
        assert_int_equal(fk.arrived_calls[p], p == 2 ? 0 : 1);
        assert_int_equal(fk.ready_calls[p], p == 2 ? 0 : 1);
    }
    assert_int_equal(r->tx_left, 5);
    fk.arrived[4] = 1;
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT(&at, 4);
    fk.arrived[0] = fk.arrived[5] = 1;
    fk.ready[3] = 1;
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT(&at, 0, 5, 3); /* scan 1,0,5,4,3: arrived 0,5, then ready 3 */
    assert_int_equal(r->tx_left, 1);
    fk.ready[1] = 1;
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT(&at, 1);
    assert_int_equal(r->tx_left, 0);
    assert_all_written_once(6, 2);
    /* Served peers are not asked again. */
    assert_int_equal(fk.arrived_calls[4], 2);
}

static void test_pap_never_waits(void **state)
{
    coll_req_t *r = req_init(8, 0, &coll_alg_pap, &fake_proto);
    size_t at = 0;

    (void)state;
    set_all(fk.ready, 8, 1);
    fk.ready[5] = 0; /* the late one */
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT(&at, 7, 6, 4, 3, 2, 1);
    assert_int_equal(r->tx_left, 1);
    assert_int_equal(peers[5].tx_state, COLL_TX_IDLE);
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT_NONE(&at);
    fk.ready[5] = 1;
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT(&at, 5);
    assert_int_equal(r->tx_left, 0);
    assert_all_written_once(8, 0);

    /* The same with the late peer first in scan order and one arrival. */
    r = req_init(8, 4, &coll_alg_pap, &fake_proto);
    at = 0;
    set_all(fk.ready, 8, 1);
    fk.ready[3] = 0;
    fk.arrived[6] = 1;
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT(&at, 6, 2, 1, 0, 7, 5);
    assert_int_equal(r->tx_left, 1);
    assert_int_equal(fk.violations, 0);
}

/* ---- Direct ------------------------------------------------------------ */

static void test_direct_order_and_stall(void **state)
{
    coll_req_t *r = req_init(6, 2, &coll_alg_direct, &fake_proto);
    size_t at = 0;

    (void)state;
    set_all(fk.ready, 6, 1);
    fk.ready[5] = 0;
    fk.arrived[0] = fk.arrived[1] = 1; /* ignored by Direct */
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT(&at, 3, 4);
    assert_int_equal(r->step, 3);
    assert_int_equal(r->tx_left, 3);
    /* It asked about 3, 4, 5 and stopped there: never about 0 or 1. */
    assert_int_equal(fk.nready, 3);
    assert_int_equal(fk.ready_log[2], 5);
    assert_int_equal(fk.ready_calls[0] + fk.ready_calls[1], 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
        EXPECT_NONE(&at);
    }
    assert_int_equal(r->step, 3);
    assert_int_equal(fk.ready_calls[5], 4);
    assert_int_equal(fk.ready_calls[0] + fk.ready_calls[1], 0);
    fk.ready[5] = 1;
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT(&at, 5, 0, 1);
    assert_int_equal(r->step, 6);
    assert_int_equal(r->tx_left, 0);
    assert_all_written_once(6, 2);
    for (uint32_t p = 0; p < 6; p++)
        assert_int_equal(fk.arrived_calls[p], 0);
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT_NONE(&at);
}

static void test_direct_one_at_a_time(void **state)
{
    coll_req_t *r = req_init(5, 0, &coll_alg_direct, &fake_proto);
    size_t at = 0;

    (void)state;
    /* Readiness arrives in reverse step order: nothing moves until step 1's
     * peer is ready, then everything goes at once. */
    fk.ready[4] = 1;
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    fk.ready[3] = 1;
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    fk.ready[2] = 1;
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT_NONE(&at);
    assert_int_equal(r->step, 1);
    fk.ready[1] = 1;
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT(&at, 1, 2, 3, 4);
    assert_int_equal(r->tx_left, 0);

    /* Rank 3 of 4: steps go 0, 1, 2. */
    r = req_init(4, 3, &coll_alg_direct, &fake_proto);
    at = 0;
    fk.ready[0] = 1;
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT(&at, 0);
    fk.ready[2] = 1;
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT_NONE(&at);
    fk.ready[1] = 1;
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT(&at, 1, 2);
    assert_all_written_once(4, 3);
}

/* ---- random schedules against a model ---------------------------------- */

static uint64_t rng_state;

static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

/* What one tx_progress call must write, computed from the state before it. */
static size_t model_writes(const coll_req_t *r, uint32_t *out)
{
    uint32_t n = team.size, p = team.rank;
    size_t k = 0;

    if (r->alg == &coll_alg_direct) {
        for (uint32_t s = r->step; s < n && fk.ready[(p + s) % n]; s++)
            out[k++] = (p + s) % n;
        return k;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 1; i < n; i++) {
            uint32_t q = (p + n - i) % n;
            if (peers[q].tx_state != COLL_TX_IDLE)
                continue;
            if (pass == 0 ? fk.arrived[q] : !fk.arrived[q] && fk.ready[q])
                out[k++] = q;
        }
    }
    return k;
}

static void run_random(const coll_alg_t *alg, uint32_t n, uint32_t rank)
{
    coll_req_t *r = req_init(n, rank, alg, &fake_proto);
    uint32_t want[MAXN];
    size_t at = 0, nwant;
    int calls = 0;

    while (r->tx_left) {
        for (uint32_t q = 0; q < n; q++) {
            /* Arrival and readiness, once there, stay for the epoch. */
            if (q == rank)
                continue;
            if (rng() % 4 == 0 || calls > 50)
                fk.ready[q] = 1;
            if (rng() % 6 == 0)
                fk.arrived[q] = 1;
        }
        nwant = model_writes(r, want);
        assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
        expect_writes(&at, want, nwant);
        if (alg == &coll_alg_pap) {
            /* Nobody that could be served was left waiting. */
            for (uint32_t q = 0; q < n; q++)
                if (peers[q].tx_state == COLL_TX_IDLE && (fk.ready[q] || fk.arrived[q]))
                    fail_msg("n=%u rank=%u: peer %u could be written but was not", n, rank, q);
        }
        assert_true(++calls < 1000);
    }
    assert_all_written_once(n, rank);
    assert_int_equal(fk.violations, 0);
    if (alg == &coll_alg_direct) {
        assert_int_equal(fk.ntx, n - 1);
        for (uint32_t i = 0; i < n - 1; i++)
            assert_int_equal(fk.tx_log[i], (rank + 1 + i) % n);
    }
}

static void test_random_schedules(void **state)
{
    static const uint32_t ns[] = {2, 3, 4, 5, 8, 13, MAXN};

    (void)state;
    rng_state = 0x9e3779b97f4a7c15ULL;
    for (int rep = 0; rep < 10; rep++)
        for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
            for (uint32_t rank = 0; rank < ns[i]; rank++) {
                run_random(&coll_alg_pap, ns[i], rank);
                run_random(&coll_alg_direct, ns[i], rank);
            }
}

static void test_single_rank(void **state)
{
    coll_req_t *r;

    (void)state;
    r = req_init(1, 0, &coll_alg_pap, &fake_proto);
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    r = req_init(1, 0, &coll_alg_direct, &fake_proto);
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    assert_int_equal(fk.ntx + fk.nready, 0);
}

/* ---- fragments: coll_tx_continue --------------------------------------- */

static void test_multi_fragment(void **state)
{
    const coll_alg_t *algs[] = {&coll_alg_pap, &coll_alg_direct};

    (void)state;
    for (int a = 0; a < 2; a++) {
        coll_req_t *r = req_init(4, 1, algs[a], &fake_proto);
        size_t at = 0;

        r->nfrags = 3;
        set_all(fk.frags, 4, 3);
        set_all(fk.ready, 4, 1);
        fk.ready[0] = 0; /* last in both orders */
        assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
        if (a == 0)
            EXPECT(&at, 3, 2);
        else
            EXPECT(&at, 2, 3);
        assert_int_equal(peers[2].tx_state, COLL_TX_ACTIVE);
        assert_int_equal(peers[3].tx_state, COLL_TX_ACTIVE);
        assert_int_equal(r->tx_left, 3);
        /* Started peers continue in peer order, before anyone new. */
        fk.ready[0] = 1;
        assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
        EXPECT(&at, 2, 3, 0);
        assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
        EXPECT(&at, 0, 2, 3);
        assert_int_equal(r->tx_left, 1);
        assert_int_equal(peers[2].tx_state, COLL_TX_DONE);
        assert_int_equal(peers[0].tx_state, COLL_TX_ACTIVE);
        assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
        EXPECT(&at, 0);
        assert_int_equal(r->tx_left, 0);
        for (uint32_t p = 0; p < 4; p++)
            assert_int_equal(fk.tx_calls[p], p == 1 ? 0 : 3);
        assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
        EXPECT_NONE(&at);
    }
}

/* ---- errors ------------------------------------------------------------ */

/* ---- the real protocols over a recording channel ----------------------- */

typedef struct put_rec {
    int peer; /* context rank */
    int is_u64;
    uint64_t off, val, len, key;
} put_rec_t;

static put_rec_t puts[MAXLOG];
static size_t nputs;

static int rec_put(chan_t *c, int peer, const void *src, size_t len, const chan_mem_t *lmem,
                   const chan_rmem_t *dst, uint64_t off)
{
    (void)c;
    (void)lmem;
    assert_non_null(src);
    assert_true(nputs < MAXLOG);
    puts[nputs++] = (put_rec_t){peer, 0, off, 0, len, dst->rkey.key};
    return ARCOLL_OK;
}

static int rec_put_u64(chan_t *c, int peer, uint64_t val, const chan_rmem_t *dst, uint64_t off)
{
    (void)c;
    assert_true(nputs < MAXLOG);
    puts[nputs++] = (put_rec_t){peer, 1, off, val, 8, dst->rkey.key};
    return ARCOLL_OK;
}

static int rec_import(chan_t *c, int peer, const chan_rkey_t *rkey, chan_rmem_t *rm)
{
    (void)c;
    (void)peer;
    memset(rm, 0, sizeof(*rm));
    rm->rkey = *rkey;
    return ARCOLL_OK;
}

static void rec_release(chan_t *c, chan_rmem_t *rm)
{
    (void)c;
    (void)rm;
}

static const struct chan_ops rec_ops = {
    .name = "recording",
    .put = rec_put,
    .put_u64 = rec_put_u64,
    .rmem_import = rec_import,
    .rmem_release = rec_release,
};

#define RANK_BASE 100 /* context rank = team rank + RANK_BASE */
#define KEY_BASE  1000

static chan_t rec_chan;
static struct arcoll_context rec_ctx;
static int rec_ranks[MAXN];
static chan_rmem_t rec_rmem[MAXN];
static char sendbuf[MAXN * 64];

static coll_req_t *real_init(uint32_t n, uint32_t rank, const coll_proto_t *proto, uint64_t epoch,
                             size_t bytes)
{
    coll_req_t *r = req_init(n, rank, &coll_alg_pap, proto);

    nputs = 0;
    memset(&rec_chan, 0, sizeof(rec_chan));
    memset(&rec_ctx, 0, sizeof(rec_ctx));
    rec_chan.ops = &rec_ops;
    rec_ctx.chan = &rec_chan;
    team.ctx = &rec_ctx;
    for (uint32_t i = 0; i < n; i++) {
        rec_ranks[i] = (int)(RANK_BASE + i);
        memset(&rec_rmem[i], 0, sizeof(rec_rmem[i]));
        rec_rmem[i].rkey.key = KEY_BASE + i;
    }
    team.ranks = rec_ranks;
    team.peer_region = rec_rmem;
    assert_int_equal(wire_layout_init(&team.layout, n, 64, WIRE_BANKS, WIRE_LANES, 0), 0);
    team.region.addr = aligned_alloc(WIRE_LINE, team.layout.total);
    assert_non_null(team.region.addr);
    memset(team.region.addr, 0, team.layout.total);
    team.region.len = team.layout.total;
    r->sbuf = sendbuf;
    r->bytes = bytes;
    r->epoch = epoch;
    r->bank = wire_bank(epoch, WIRE_BANKS);
    return r;
}

static void real_fini(void)
{
    free(team.region.addr);
    team.region.addr = NULL;
}

static void test_tx_errors(void **state)
{
    const coll_alg_t *algs[] = {&coll_alg_pap, &coll_alg_direct};

    (void)state;
    for (int a = 0; a < 2; a++) {
        /* A transport error stops the schedule and is returned as is. */
        coll_req_t *r = req_init(4, 0, algs[a], &fake_proto);
        set_all(fk.ready, 4, 1);
        fk.tx_rc[2] = ARCOLL_ERR_CHANNEL;
        assert_int_equal(r->alg->tx_progress(r), ARCOLL_ERR_CHANNEL);
        assert_int_equal(peers[2].tx_state, COLL_TX_IDLE);
        /* PAP wrote 3 before failing on 2, Direct wrote 1; neither went on. */
        assert_int_equal(fk.tx_calls[3], a == 0 ? 1 : 0);
        assert_int_equal(fk.tx_calls[1], a == 0 ? 0 : 1);
        assert_int_equal(fk.tx_calls[2], 1);
        assert_int_equal(r->tx_left, 2);

        /* A size mismatch is deferred: the peer counts as served, the others
         * are still written, and the peer is told once (a reject credit and a
         * done word with the mismatch status, through the channel). */
        r = real_init(4, 0, &fake_proto, 1, 8);
        r->alg = algs[a];
        r->is_direct = algs[a] == &coll_alg_direct;
        set_all(fk.ready, 4, 1);
        fk.tx_rc[2] = ARCOLL_ERR_MISMATCH;
        assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
        assert_int_equal(r->deferred, ARCOLL_ERR_MISMATCH);
        assert_int_equal(r->tx_left, 0);
        assert_all_written_once(4, 0);
        assert_int_equal(nputs, 2);
        for (size_t i = 0; i < nputs; i++)
            assert_true(puts[i].peer == RANK_BASE + 2 && puts[i].is_u64);
        real_fini();

        /* An error from tx_ready is returned; nothing is written. */
        r = req_init(4, 0, algs[a], &fake_proto);
        set_all(fk.ready, 4, 1);
        fk.ready_rc = ARCOLL_ERR_PEER;
        assert_int_equal(r->alg->tx_progress(r), ARCOLL_ERR_PEER);
        assert_int_equal(fk.ntx, 0);
        assert_int_equal(r->tx_left, 3);
    }
}

/* Peer q advertises its receive buffer to us for epoch e (zero-copy). */
static void advertise(uint32_t q, uint64_t epoch, size_t bytes)
{
    wire_ctrl_t *c = (wire_ctrl_t *)((char *)team.region.addr +
                                     wire_ctrl_off(&team.layout, q, wire_bank(epoch, WIRE_BANKS)));

    c->size = bytes;
    c->rkey.key = 5000 + q;
    c->rkey.kind = 1; /* a real key: kind 0 means "no key, use my bounce slots" */
    c->epoch = epoch;
    c->flag = epoch;
}

/* The peers that got the final word (done word / slot flag) since *from. */
static void expect_flags(size_t *from, uint64_t want_val, uint64_t want_off, const uint32_t *want,
                         size_t nwant)
{
    size_t k = 0;

    for (size_t i = *from; i < nputs; i++) {
        if (!puts[i].is_u64)
            continue;
        if (k >= nwant)
            fail_msg("extra flag write to context rank %d", puts[i].peer);
        assert_int_equal(puts[i].peer, RANK_BASE + want[k]);
        assert_int_equal(puts[i].val, want_val);
        assert_int_equal(puts[i].off, want_off);
        assert_int_equal(puts[i].key, KEY_BASE + want[k]); /* into that peer's region */
        k++;
    }
    if (k != nwant)
        fail_msg("%zu flag writes, expected %zu", k, nwant);
    *from = nputs;
}

#define EXPECT_FLAGS(from, val, off, ...)                                      \
    do {                                                                       \
        static const uint32_t want_[] = {__VA_ARGS__};                         \
        expect_flags(from, val, off, want_, sizeof(want_) / sizeof(want_[0])); \
    } while (0)

static void test_pap_zcopy_direction(void **state)
{
    const uint64_t epoch = 5;
    coll_req_t *r = real_init(8, 3, &coll_proto_zcopy, epoch, 8);
    uint64_t done = wire_done_word(epoch, WIRE_ST_OK);
    uint64_t done_off = wire_done_off(&team.layout, 3, wire_bank(epoch, WIRE_BANKS));
    size_t at = 0;

    (void)state;
    advertise(6, epoch, 8);
    advertise(1, epoch, 8);
    advertise(4, epoch, 8);
    advertise(7, epoch - 2, 8); /* same bank, previous use: not an arrival */
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    /* Scan 4,5,6,7,0,1,2: the advertised 4, 6, 1; nobody else may be written. */
    EXPECT_FLAGS(&at, done, done_off, 4, 6, 1);
    assert_int_equal(r->tx_left, 4);
    /* The data went into the advertised buffer, at our block. */
    assert_int_equal(nputs, 6);
    assert_int_equal(puts[0].is_u64, 0);
    assert_int_equal(puts[0].key, 5004);
    assert_int_equal(puts[0].off, 3 * 8);
    assert_int_equal(puts[0].len, 8);

    advertise(2, epoch, 8);
    advertise(5, epoch, 8);
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT_FLAGS(&at, done, done_off, 5, 2);
    advertise(0, epoch, 8);
    advertise(7, epoch, 8);
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT_FLAGS(&at, done, done_off, 7, 0);
    assert_int_equal(r->tx_left, 0);
    for (uint32_t p = 0; p < 8; p++)
        assert_int_equal(peers[p].tx_state, COLL_TX_DONE);
    real_fini();
}

/* A control flag alone (a schedule's readiness, coll_ready_to) over the body
 * an earlier zero-copy call of the same bank left: its key must not be used.
 * The zero-copy sender finds no size for this call, writes nothing but its
 * refusal, and fails the call (docs/protocol.md §2, §8). */
static void test_zcopy_flag_alone(void **state)
{
    const uint64_t epoch = 5 + WIRE_BANKS;
    coll_req_t *r = real_init(4, 0, &coll_proto_zcopy, epoch, 8);
    wire_ctrl_t *c = (wire_ctrl_t *)((char *)team.region.addr +
                                     wire_ctrl_off(&team.layout, 2, wire_bank(epoch, WIRE_BANKS)));

    (void)state;
    advertise(2, epoch - WIRE_BANKS, 8); /* the bank's last call: size 8, key 5002 */
    c->flag = epoch;                     /* this call: the flag alone */
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    assert_int_equal(r->deferred, ARCOLL_ERR_MISMATCH);
    assert_int_equal(peers[2].tx_state, COLL_TX_DONE);
    assert_true(nputs > 0);
    for (size_t i = 0; i < nputs; i++) {
        assert_true(puts[i].is_u64); /* the refusal's words, never data */
        assert_int_equal(puts[i].peer, RANK_BASE + 2);
        assert_int_not_equal(puts[i].key, 5002);
    }
    /* The same body with its own call's stamp is an advertisement. */
    real_fini();
    r = real_init(4, 0, &coll_proto_zcopy, epoch, 8);
    advertise(2, epoch, 8);
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    assert_int_equal(r->deferred, ARCOLL_OK);
    assert_int_equal(puts[0].is_u64, 0);
    assert_int_equal(puts[0].key, 5002);
    real_fini();
}

/* Peer q's first fragment for epoch e landed in our slot (copy path). */
static void slot_filled(uint32_t q, uint64_t epoch)
{
    wire_slot_hdr_t *h =
        (wire_slot_hdr_t *)((char *)team.region.addr +
                            wire_slot_off(&team.layout, q, wire_bank(epoch, WIRE_BANKS)));

    h->size = 8;
    h->flag = wire_frag_word(epoch, 0);
}

static void test_pap_bounce_direction(void **state)
{
    const uint64_t epoch = 4;
    coll_req_t *r = real_init(6, 2, &coll_proto_bounce, epoch, 8);
    uint64_t slot_off = wire_slot_off(&team.layout, 2, wire_bank(epoch, WIRE_BANKS));
    size_t at = 0;

    (void)state;
    slot_filled(5, epoch);
    slot_filled(0, epoch);
    slot_filled(4, epoch - 2); /* same bank, previous use: not an arrival */
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    /* Scan 1,0,5,4,3: arrived 0, 5 first; PAP may write to anyone on this path. */
    EXPECT_FLAGS(&at, wire_frag_word(epoch, 0), slot_off, 0, 5, 1, 4, 3);
    assert_int_equal(r->tx_left, 0);
    real_fini();

    /* Direct over the same path waits for each peer's advertisement. */
    r = real_init(6, 2, &coll_proto_bounce, epoch, 8);
    r->alg = &coll_alg_direct;
    r->is_direct = 1;
    at = 0;
    advertise(3, epoch, 8);
    advertise(5, epoch, 8);
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT_FLAGS(&at, wire_frag_word(epoch, 0), slot_off, 3);
    advertise(4, epoch, 8);
    advertise(1, epoch, 8);
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT_FLAGS(&at, wire_frag_word(epoch, 0), slot_off, 4, 5);
    advertise(0, epoch, 8);
    assert_int_equal(r->alg->tx_progress(r), ARCOLL_OK);
    EXPECT_FLAGS(&at, wire_frag_word(epoch, 0), slot_off, 0, 1);
    assert_int_equal(r->tx_left, 0);
    real_fini();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pap_arrived_first),      cmocka_unit_test(test_pap_scan_direction),
        cmocka_unit_test(test_pap_arrivals_over_time), cmocka_unit_test(test_pap_never_waits),
        cmocka_unit_test(test_direct_order_and_stall), cmocka_unit_test(test_direct_one_at_a_time),
        cmocka_unit_test(test_random_schedules),       cmocka_unit_test(test_single_rank),
        cmocka_unit_test(test_multi_fragment),         cmocka_unit_test(test_tx_errors),
        cmocka_unit_test(test_pap_zcopy_direction),    cmocka_unit_test(test_zcopy_flag_alone),
        cmocka_unit_test(test_pap_bounce_direction),
    };

    return cmocka_run_group_tests_name("sched", tests, NULL, NULL);
}
