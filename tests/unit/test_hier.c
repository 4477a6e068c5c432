/* Unit tests of the node grouping behind the shared-memory aware algorithms:
 * pretend nodes from ARCOLL_NODE_SIZE (bootstrap/boot_common.c) and a team's
 * node map (src/engine/hier.c) and segment layout (src/engine/hier_seg.c), on a hand-built context
 * whose bootstrap puts every rank on one host. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dispatch/coll.h"

/* Every rank reports the same hostname: one host. */
static int one_host_allgather(boot_t *b, const void *sbuf, void *rbuf, size_t len)
{
    for (int r = 0; r < b->size; r++)
        memcpy((char *)rbuf + (size_t)r * len, sbuf, len);
    return ARCOLL_OK;
}

static void boot_init(boot_t *b, int rank, int size, const char *node_size)
{
    memset(b, 0, sizeof(*b));
    b->rank = rank;
    b->size = size;
    strcpy(b->hostname, "host");
    b->allgather = one_host_allgather;
    if (node_size != NULL)
        assert_int_equal(setenv("ARCOLL_NODE_SIZE", node_size, 1), 0);
    else
        unsetenv("ARCOLL_NODE_SIZE");
    assert_int_equal(boot_nodes_compute(b), ARCOLL_OK);
}

static void test_pretend_nodes(void **state)
{
    static const struct {
        const char *spec;
        int size;
        int nnodes;
        int node_of[8];
    } cases[] = {
        {NULL, 5, 1, {0, 0, 0, 0, 0}},          {"2", 5, 3, {0, 0, 1, 1, 2}},
        {"4", 8, 2, {0, 0, 0, 0, 1, 1, 1, 1}},  {"3,1", 8, 4, {0, 0, 0, 1, 2, 2, 2, 3}},
        {"3,2,1", 7, 4, {0, 0, 0, 1, 1, 2, 3}}, {"1", 3, 3, {0, 1, 2}},
    };
    boot_t b;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        boot_init(&b, cases[i].size - 1, cases[i].size, cases[i].spec);
        assert_int_equal(b.nnodes, cases[i].nnodes);
        assert_int_equal(b.nhosts, 1);
        assert_int_equal(b.host_local_size, cases[i].size);
        for (int r = 0; r < cases[i].size; r++)
            assert_int_equal(b.node_of[r], cases[i].node_of[r]);
        free(b.node_of);
    }
    unsetenv("ARCOLL_NODE_SIZE");
}

static void test_pretend_nodes_invalid(void **state)
{
    static const char *bad[] = {
        "0", "-2", "x", "2,", ",2", "2,,1", "1,2,3,4,5,6,7,8,9,1,2,3,4,5,6,7,8"};
    boot_t b;

    (void)state;
    memset(&b, 0, sizeof(b));
    b.size = 4;
    b.allgather = one_host_allgather;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(setenv("ARCOLL_NODE_SIZE", bad[i], 1), 0);
        assert_int_equal(boot_nodes_compute(&b), ARCOLL_ERR_CONFIG);
    }
    unsetenv("ARCOLL_NODE_SIZE");
}

/* A team over context ranks `ranks`, seen by team rank `me`. */
typedef struct fixture {
    boot_t boot;
    chan_t chan;
    struct arcoll_context ctx;
    struct arcoll_team team;
    int ranks[16];
} fixture_t;

static void team_init(fixture_t *f, const char *node_size, int ctx_size, const int *ranks, int n,
                      int me, size_t shm_max)
{
    memset(f, 0, sizeof(*f));
    boot_init(&f->boot, ranks[me], ctx_size, node_size);
    f->ctx.boot = &f->boot;
    f->ctx.chan = &f->chan; /* zcopy 0: no registration of the segment */
    f->ctx.cfg.shm_max = shm_max;
    memcpy(f->ranks, ranks, sizeof(int) * (size_t)n);
    f->team.ctx = &f->ctx;
    f->team.ranks = f->ranks;
    f->team.size = (uint32_t)n;
    f->team.rank = (uint32_t)me;
}

static void team_fini(fixture_t *f)
{
    hier_free(&f->team);
    free(f->boot.node_of);
    unsetenv("ARCOLL_NODE_SIZE");
}

/* Interleaved members: nodes {0,1},{2,3},{4,5} of the context appear in the
 * team as team ranks {0,3},{1,4},{2,5}: no node is consecutive. */
static void test_group_interleaved(void **state)
{
    static const int ranks[] = {0, 2, 4, 1, 3, 5};
    fixture_t f;

    (void)state;
    for (int me = 0; me < 6; me++) {
        team_init(&f, "2", 6, ranks, 6, me, 1024);
        assert_int_equal(hier_plan(&f.team), ARCOLL_OK);
        hier_t *h = f.team.hier;
        assert_non_null(h);
        assert_int_equal(h->nnodes, 3);
        assert_int_equal(h->lmax, 2);
        assert_int_equal(h->node, me % 3);
        assert_int_equal(h->lrank, me / 3);
        assert_int_equal(h->lsize, 2);
        for (uint32_t e = 0; e < 3; e++) {
            assert_int_equal(h->node_size[e], 2);
            assert_int_equal(h->node_first[e], HIER_NONE);
            assert_int_equal(h->node_rank[e * 2], e);
            assert_int_equal(h->node_rank[e * 2 + 1], e + 3);
        }
        assert_int_equal(hier_is_master(h), me < 3);
        assert_int_equal(f.team.hseg->seg.addr != NULL,
                         1 == hier_is_master(h)); /* masters create it */
        {
            int list[6], n;
            /* Equal nodes: every rank has a cross team, its local index on each node. */
            hier_xteam_ranks(&f.team, list, &n);
            assert_int_equal(n, 3);
            for (int i = 0; i < n; i++)
                assert_int_equal(list[i], ranks[i + 3 * (me / 3)]);
            assert_int_equal(h->equal, 1);
            assert_int_equal(h->node_major, 0); /* interleaved */
        }
        team_fini(&f);
    }
}

/* Unequal nodes 3,1 over 8 ranks: nodes of 3,1,3,1; areas padded to lmax = 3. */
static void test_group_unequal(void **state)
{
    static const int ranks[] = {0, 1, 2, 3, 4, 5, 6, 7};
    static const uint32_t size[] = {3, 1, 3, 1}, first[] = {0, 3, 4, 7};
    fixture_t f;

    (void)state;
    team_init(&f, "3,1", 8, ranks, 8, 5, 100);
    assert_int_equal(hier_plan(&f.team), ARCOLL_OK);
    hier_t *h = f.team.hier;
    assert_non_null(h);
    assert_int_equal(h->nnodes, 4);
    assert_int_equal(h->lmax, 3);
    assert_int_equal(h->node, 2);
    assert_int_equal(h->lrank, 1);
    for (uint32_t e = 0; e < 4; e++) {
        assert_int_equal(h->node_size[e], size[e]);
        assert_int_equal(h->node_first[e], first[e]);
    }
    assert_int_equal(h->node_rank[1 * 3 + 1], HIER_NONE); /* padding */
    assert_int_equal(h->equal, 0);
    assert_int_equal(h->node_major, 0);
    {
        /* Unequal nodes: only masters get a cross team (the masters' team). */
        int list[8], n;
        hier_xteam_ranks(&f.team, list, &n);
        assert_int_equal(n, 0);
    }
    /* Layout: lines in order, areas of nnodes*lmax*lmax*max_bytes, nothing overlaps. */
    const hier_seg_t *g = f.team.hseg;
    assert_non_null(g);
    assert_int_equal(g->max_bytes, 100);
    assert_int_equal(g->lay.area, 4 * 3 * 3 * 100);
    assert_true(g->lay.off_arrive >= 64);
    assert_int_equal(g->lay.off_done, g->lay.off_arrive + 3 * 64);
    assert_int_equal(g->lay.off_all, g->lay.off_done + 4 * 64);
    assert_int_equal(g->lay.off_send, g->lay.off_all + 64);
    assert_int_equal(g->lay.off_recv, g->lay.off_send + 2 * g->lay.area);
    assert_int_equal(g->lay.off_addr, (g->lay.off_recv + g->lay.area + 63) / 64 * 64);
    assert_true(g->lay.off_addr >= g->lay.off_recv + g->lay.area);
    assert_int_equal(g->lay.total, g->lay.off_addr + 3 * 64);
    team_fini(&f);
}

/* 8 ranks as 2 nodes of 4 in team order: node-major, cross teams pair local
 * index x of node 0 with local index x of node 1. */
static void test_group_node_major(void **state)
{
    static const int ranks[] = {0, 1, 2, 3, 4, 5, 6, 7};
    fixture_t f;

    (void)state;
    for (int me = 0; me < 8; me++) {
        int list[8], n;
        team_init(&f, "4", 8, ranks, 8, me, 64);
        assert_int_equal(hier_plan(&f.team), ARCOLL_OK);
        hier_t *h = f.team.hier;
        assert_non_null(h);
        assert_int_equal(h->equal, 1);
        assert_int_equal(h->node_major, 1);
        hier_xteam_ranks(&f.team, list, &n);
        assert_int_equal(n, 2);
        assert_int_equal(list[0], me % 4);
        assert_int_equal(list[1], 4 + me % 4);
        team_fini(&f);
    }
}

/* Nothing to share (one rank per node), or no room: no grouping. The area
 * limit lowers the message limit for large nodes. */
static void test_group_limits(void **state)
{
    static const int ranks[] = {0, 1, 2, 3};
    fixture_t f;

    (void)state;
    team_init(&f, "1", 4, ranks, 4, 0, 1024);
    assert_int_equal(hier_plan(&f.team), ARCOLL_OK);
    assert_null(f.team.hier);
    assert_null(f.team.hseg);
    team_fini(&f);

    team_init(&f, "2", 4, ranks, 4, 1, 0); /* ARCOLL_SHM_MAX=0 */
    assert_int_equal(hier_plan(&f.team), ARCOLL_OK);
    assert_null(f.team.hier);
    assert_null(f.team.hseg);
    team_fini(&f);

    team_init(&f, NULL, 4, ranks, 4, 1, (size_t)1 << 30);
    assert_int_equal(hier_plan(&f.team), ARCOLL_OK);
    assert_non_null(f.team.hier);
    /* one node of 4: an area is 1*4*4*max_bytes <= 16 MiB */
    assert_int_equal(f.team.hseg->max_bytes, (16u << 20) / 16);
    team_fini(&f);
}

/* The node's socket map (sh_co's SH-NUMA-CO) from the records' sockets, on
 * the master (which attaches nothing): numbered by first local rank; one
 * socket if some rank's is unknown; ARCOLL_SOCKET_SIZE's pretend sockets. */
static void check_sockets(const int32_t *socket, long size, uint32_t nsockets, const uint32_t *want)
{
    static const int ranks[] = {0, 1, 2, 3, 4, 5};
    long pid[6] = {0};
    uint64_t key[6] = {0};
    fixture_t f;

    team_init(&f, NULL, 6, ranks, 6, 0, 1024);
    f.ctx.cfg.socket_size = size;
    assert_int_equal(hier_plan(&f.team), ARCOLL_OK);
    assert_non_null(f.team.hier);
    assert_int_equal(hier_attach(&f.team, pid, key, socket, 0), ARCOLL_OK);
    assert_int_equal(f.team.hier->nsockets, nsockets);
    for (int q = 0; q < 6; q++)
        assert_int_equal(f.team.hier->lsocket[q], want[q]);
    team_fini(&f);
}

static void test_sockets(void **state)
{
    static const int32_t two[] = {1, 1, 0, 0, 1, 0}, unknown[] = {0, 0, 1, -1, 1, 1};
    static const uint32_t two_map[] = {0, 0, 1, 1, 0, 1}, one[] = {0, 0, 0, 0, 0, 0};
    static const uint32_t by4[] = {0, 0, 0, 0, 1, 1}, by2[] = {0, 0, 1, 1, 2, 2};

    (void)state;
    check_sockets(two, 0, 2, two_map);
    check_sockets(unknown, 0, 1, one);
    check_sockets(unknown, 4, 2, by4); /* pretend sockets override hwloc's */
    check_sockets(two, 2, 3, by2);
    check_sockets(two, 6, 1, one);
    check_sockets(two, 100, 1, one);
}

/* The families' per-team state: made once per kind at its first use, one
 * per kind, each freed once with the team. */
static int state_made, state_freed;

static void *state_make(struct arcoll_team *t)
{
    (void)t;
    state_made++;
    return malloc(8);
}

static void state_free(void *p)
{
    state_freed++;
    free(p);
}

static void *state_make_none(struct arcoll_team *t)
{
    (void)t;
    return NULL;
}

static void test_family_state(void **state)
{
    static const eng_state_kind_t a = {.make = state_make, .free = state_free};
    static const eng_state_kind_t b = {.make = state_make, .free = state_free};
    static const eng_state_kind_t none = {.make = state_make_none, .free = state_free};
    struct arcoll_team t;
    void *pa;

    (void)state;
    memset(&t, 0, sizeof(t));
    pa = eng_state_get(&t, &a);
    assert_non_null(pa);
    assert_ptr_equal(eng_state_get(&t, &a), pa);
    assert_ptr_not_equal(eng_state_get(&t, &b), pa);
    assert_null(eng_state_get(&t, &none)); /* out of memory: nothing kept */
    assert_int_equal(state_made, 2);
    eng_state_free_all(&t);
    assert_int_equal(state_freed, 2);
    assert_null(t.states);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pretend_nodes),     cmocka_unit_test(test_pretend_nodes_invalid),
        cmocka_unit_test(test_group_interleaved), cmocka_unit_test(test_group_unequal),
        cmocka_unit_test(test_group_limits),      cmocka_unit_test(test_group_node_major),
        cmocka_unit_test(test_sockets),           cmocka_unit_test(test_family_state),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
