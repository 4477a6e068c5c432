/*
 * An ordinary MPI program (it does not link arcoll) that checks how the PMPI
 * shim gives new communicators their teams: MPI_Comm_split, _split_type,
 * _create and _dup make a team with arcoll_team_split from the parent's and
 * share its context (docs/embedding.md, "The PMPI shim").
 *
 *   shim_split_test MODE
 *     shim   the shim must be loaded; new communicators share contexts
 *     plain  no expectation about the shim (data checks only)
 *     fail   under ARCOLL_MPI_FAULT=split_fail: communicators with world
 *            rank 1 in them go to PMPI, decided alike on all their ranks
 *     order  under ARCOLL_MPI_FAULT=split_order: those get contexts of their own
 *     own    under ARCOLL_MPI_SPLIT=off: every communicator its own context
 *     attr   under ARCOLL_MPI_FAULT=setattr_fail (world rank 1's attribute
 *            sets fail every other time): a communicator's first calls may
 *            go to PMPI, but each call alike on all its ranks
 *
 * On every new communicator: its ranks in the order MPI defines, and
 * MPI_Alltoall, MPI_Allreduce and MPI_Allgatherv against PMPI_* on the same
 * input, served by arcoll on every rank or on none. The communicators:
 * MPI_Comm_split of a parent without a context yet (into rank % 2, keys
 * reversed), a split of that split, MPI_Comm_create with a strided group in
 * reverse order and with disjoint groups, MPI_Comm_dup of both,
 * MPI_Comm_split_type, 200 split/free cycles (SHIM_SPLIT_CYCLES; no context made, none left,
 * no /dev/shm segment of this process left), and parents freed before their
 * children: one split, one the root of a context (MPI_Comm_create_group, not
 * intercepted) whose context must go with its last whole child, and one whose
 * context must stay until MPI_Finalize. The shim's counters (arcoll_mpi_stats,
 * found with dlsym) prove which way each went.
 * Last line on rank 0: "shim_split_test on N ranks (MODE): P passed, F failed".
 */
#include <dirent.h>
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arcoll_mpi.h"
#include "tl.h"

enum { MODE_SHIM, MODE_PLAIN, MODE_FAIL, MODE_ORDER, MODE_OWN, MODE_ATTR };

static int mode, wrank, wsize;
static char prefix[40];
static tl_tally_t tally = {prefix, 0, 0}; /* the first 30 failures printed */
static arcoll_mpi_stats_fn stats_fn;

static void stats(arcoll_mpi_stats_t *s)
{
    memset(s, 0, sizeof(*s));
    if (stats_fn != NULL)
        stats_fn(s);
}

static void verdict(int ok, const char *what, const char *detail)
{
    tl_expect_max(&tally, 30, ok, "%s: %s", what, detail);
}

/* Only the checks of the shim's counters depend on the mode. */
static void expect(int ok, const char *what, const char *detail)
{
    if (mode == MODE_SHIM)
        verdict(ok, what, detail);
}

static unsigned long long served(const arcoll_mpi_stats_t *s)
{
    return s->alltoall_arcoll + s->allreduce_arcoll + s->allgatherv_arcoll;
}

/*
 * The three collectives on comm, each against PMPI. Returns 1 if arcoll ran
 * all three, 0 if none; either must hold on every rank of comm alike.
 */
static int colls(MPI_Comm comm, const char *name, int salt)
{
    enum { K = 37 };
    arcoll_mpi_stats_t s0, s1;
    int me, n, rc, lo, hi, all;
    unsigned long long got;

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    size_t nk = (size_t)K * (size_t)n;
    int *s = malloc(nk * sizeof(int)), *r = malloc(nk * sizeof(int)),
        *ref = malloc(nk * sizeof(int));
    double d[K], dr[K], dref[K];
    int *cnt = malloc((size_t)n * sizeof(int)), *dis = malloc((size_t)n * sizeof(int));

    tl_fill(s, nk * sizeof(int), (uint64_t)salt, me, TL_ANY);
    for (int k = 0; k < K; k++)
        d[k] = (double)tl_red_in((uint64_t)salt, me, (size_t)k);
    stats(&s0);
    memset(r, 0xEE, nk * sizeof(int));
    memset(ref, 0xEE, nk * sizeof(int));
    rc = MPI_Alltoall(s, K, MPI_INT, r, K, MPI_INT, comm);
    PMPI_Alltoall(s, K, MPI_INT, ref, K, MPI_INT, comm);
    verdict(rc == MPI_SUCCESS && memcmp(r, ref, nk * sizeof(int)) == 0,
            "MPI_Alltoall differs from PMPI", name);
    rc = MPI_Allreduce(d, dr, K, MPI_DOUBLE, MPI_SUM, comm);
    PMPI_Allreduce(d, dref, K, MPI_DOUBLE, MPI_SUM, comm);
    verdict(rc == MPI_SUCCESS && memcmp(dr, dref, sizeof(dr)) == 0,
            "MPI_Allreduce differs from PMPI", name);
    /* Rank j sends (j + salt) % 4 ints, zero included; blocks land in reverse order. */
    for (int j = n - 1, off = 0; j >= 0; j--) {
        cnt[j] = (j + salt) % 4;
        dis[j] = off;
        off += cnt[j] + 1;
    }
    memset(r, 0xEE, nk * sizeof(int));
    memset(ref, 0xEE, nk * sizeof(int));
    rc = MPI_Allgatherv(s, cnt[me], MPI_INT, r, cnt, dis, MPI_INT, comm);
    PMPI_Allgatherv(s, cnt[me], MPI_INT, ref, cnt, dis, MPI_INT, comm);
    verdict(rc == MPI_SUCCESS && memcmp(r, ref, (size_t)n * 4 * sizeof(int)) == 0,
            "MPI_Allgatherv differs from PMPI", name);
    stats(&s1);
    got = served(&s1) - served(&s0);
    /* attr: the same number served on every rank (each call agreed). */
    all = mode == MODE_ATTR ? (int)got : got == 3 ? 1 : got == 0 ? 0 : -1;
    PMPI_Allreduce(&all, &lo, 1, MPI_INT, MPI_MIN, comm);
    PMPI_Allreduce(&all, &hi, 1, MPI_INT, MPI_MAX, comm);
    verdict(lo == hi && lo >= 0, "arcoll served the calls on some ranks only", name);
    if (mode == MODE_SHIM || mode == MODE_OWN || mode == MODE_ORDER)
        verdict(all == 1, "not served by arcoll", name);
    free(s);
    free(r);
    free(ref);
    free(cnt);
    free(dis);
    return got == 3;
}

/* comm's rank must be `want` (MPI's order, which the team must follow too). */
static void rank_is(MPI_Comm comm, int want, int size, const char *name)
{
    int me = -1, n = -1;

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    verdict(me == want && n == size, "rank or size not as MPI defines", name);
}

/* Segments this process created in /dev/shm (names /arcoll.<pid>.<tag>). */
static int my_segments(void)
{
    char prefix[64];
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    int count = 0;

    if (d == NULL)
        return 0;
    snprintf(prefix, sizeof(prefix), "arcoll.%ld.", (long)getpid());
    while ((e = readdir(d)) != NULL)
        count += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return count;
}

/* Does comm have world rank 1 in it (the rank the fault modes act on)? */
static int has_rank1(MPI_Comm comm)
{
    int mine = wrank == 1, any = 0;

    PMPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm);
    return any;
}

/* split_fail: a communicator made from MPI_COMM_WORLD with world rank 1 in
 * it goes to PMPI, the others not. (A child of one that went to PMPI takes
 * the old path: a context of its own at its first collective.) */
static void fault_check(MPI_Comm comm, int on_arcoll, const char *name)
{
    int r1 = has_rank1(comm);

    if (mode == MODE_FAIL)
        verdict(on_arcoll == !r1, "split_fail: arcoll use not as the fault decides", name);
}

int main(int argc, char **argv)
{
    const char *mname = argc > 1 ? argv[1] : "shim";
    arcoll_mpi_stats_t s0, s1, s2, s3;
    MPI_Comm half, quarter, strided, disjoint, dup, dup_half, node, p, t, root, rdup, rsplit;
    MPI_Group wg, g;
    long sums[2];
    int r, n, on;

    mode = strcmp(mname, "plain") == 0   ? MODE_PLAIN
           : strcmp(mname, "fail") == 0  ? MODE_FAIL
           : strcmp(mname, "order") == 0 ? MODE_ORDER
           : strcmp(mname, "own") == 0   ? MODE_OWN
           : strcmp(mname, "attr") == 0  ? MODE_ATTR
                                         : MODE_SHIM;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    snprintf(prefix, sizeof(prefix), "shim_split_test rank %d", wrank);
    stats_fn = (arcoll_mpi_stats_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "arcoll_mpi_stats");
    if (mode != MODE_PLAIN && stats_fn == NULL) {
        if (wrank == 0)
            fprintf(stderr, "shim_split_test: libarcoll_mpi.so is not loaded (LD_PRELOAD it)\n");
        MPI_Finalize();
        return 1;
    }
    stats(&s0);

    /* MPI_COMM_WORLD has run no collective: the split gives it its context. */
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, -wrank, &half);
    n = (wsize - wrank % 2 + 1) / 2;
    rank_is(half, (wsize - 1 - wrank) / 2, n, "split(rank % 2, reversed keys)");
    stats(&s1);
    expect(s1.contexts - s0.contexts == 1 && s1.comms_split - s0.comms_split == 1,
           "the split made no team, or more than one context", "split(rank % 2)");
    on = colls(half, "split(rank % 2, reversed keys)", 1);
    fault_check(half, on, "split(rank % 2)");

    /* Nested: the split of a split. */
    MPI_Comm_rank(half, &r);
    MPI_Comm_size(half, &n);
    MPI_Comm_split(half, r % 2, r, &quarter);
    rank_is(quarter, r / 2, (n - r % 2 + 1) / 2, "split(split)");
    colls(quarter, "split(split)", 2);

    /* A strided group in reverse order: world ranks size-1, size-3, ... */
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    int range[1][3] = {{wsize - 1, 0, -2}};
    MPI_Group_range_incl(wg, 1, range, &g);
    MPI_Comm_create(MPI_COMM_WORLD, g, &strided);
    MPI_Group_free(&g);
    verdict((strided != MPI_COMM_NULL) == ((wsize - 1 - wrank) % 2 == 0),
            "membership not as MPI defines", "create(strided)");
    if (strided != MPI_COMM_NULL) {
        rank_is(strided, (wsize - 1 - wrank) / 2, (wsize + 1) / 2, "create(strided, reversed)");
        on = colls(strided, "create(strided, reversed)", 3);
        fault_check(strided, on, "create(strided)");
    }
    /* Disjoint groups on one call (MPI-2.2): each rank passes its parity's. */
    MPI_Comm_group(half, &g);
    MPI_Comm_create(MPI_COMM_WORLD, g, &disjoint);
    MPI_Group_free(&g);
    rank_is(disjoint, (wsize - 1 - wrank) / 2, (wsize - wrank % 2 + 1) / 2,
            "create(disjoint groups)");
    on = colls(disjoint, "create(disjoint groups)", 4);
    fault_check(disjoint, on, "create(disjoint groups)");

    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    rank_is(dup, wrank, wsize, "dup(WORLD)");
    on = colls(dup, "dup(WORLD)", 5);
    fault_check(dup, on, "dup(WORLD)");
    MPI_Comm_dup(half, &dup_half);
    rank_is(dup_half, (wsize - 1 - wrank) / 2, (wsize - wrank % 2 + 1) / 2, "dup(split)");
    colls(dup_half, "dup(split)", 6);

    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, wrank, MPI_INFO_NULL, &node);
    on = colls(node, "split_type(shared)", 7);
    fault_check(node, on, "split_type(shared)");
    on = colls(MPI_COMM_WORLD, "MPI_COMM_WORLD", 8);
    stats(&s2);
    /* half, quarter, strided (here or not), disjoint, dup, dup_half, node: 6 or 7. */
    expect(s2.contexts - s0.contexts == 1 && s2.contexts_live - s0.contexts_live == 1 &&
               s2.comms_split - s0.comms_split == 6u + (strided != MPI_COMM_NULL) &&
               s2.split_failed == 0 && s2.split_fallback == 0 && s2.errors == 0,
           "new communicators did not all share one context", "after the constructors");
    if (mode == MODE_FAIL && wrank == 1)
        verdict(s2.split_failed > 0 && s2.comms_split == 0, "split_fail: no split failed", "");
    if (mode == MODE_ORDER && wrank == 1)
        verdict(s2.split_fallback > 0 && s2.contexts > 1, "split_order: no own context", "");
    if (mode == MODE_OWN)
        verdict(s2.comms_split == 0 && s2.contexts > 1, "ARCOLL_MPI_SPLIT=off: splits made", "");

    /* Split/free cycles, 200 (SHIM_SPLIT_CYCLES: fewer for attr, whose failed
     * attributes make a context apiece, 0.2 s): teams come and go, no context,
     * no segment. */
    int segs = my_segments(), bad = 0;
    long cycles = getenv("SHIM_SPLIT_CYCLES") != NULL ? atol(getenv("SHIM_SPLIT_CYCLES")) : 200;
    stats(&s1);
    for (int i = 0; i < cycles; i++) {
        MPI_Comm c;
        int v = wrank + i, sum = 0, want = 0;
        MPI_Comm_split(MPI_COMM_WORLD, (wrank + i) % 2, i % 3 ? wrank : -wrank, &c);
        MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, c);
        /* The members are the world ranks j with (j + i) % 2 equal to mine. */
        for (int j = 0; j < wsize; j++)
            if ((j + i) % 2 == (wrank + i) % 2)
                want += j + i;
        bad += sum != want;
        MPI_Comm_free(&c);
    }
    stats(&s2);
    verdict(bad == 0, "MPI_Allreduce wrong in split/free cycles", "split/free cycles");
    verdict(my_segments() == segs, "/dev/shm segments left by split/free cycles",
            "split/free cycles");
    expect(s2.contexts == s1.contexts && s2.contexts_live == s1.contexts_live &&
               s2.comms_split - s1.comms_split == (unsigned long long)cycles &&
               s2.teams_freed - s1.teams_freed == (unsigned long long)cycles &&
               s2.allreduce_arcoll - s1.allreduce_arcoll == (unsigned long long)cycles,
           "split/free cycles made contexts or kept teams", "split/free cycles");

    /* A split parent freed before its child. */
    MPI_Comm_split(MPI_COMM_WORLD, 0, wrank, &p);
    MPI_Comm_split(p, wrank % 2, wrank, &t);
    MPI_Comm_free(&p);
    colls(t, "split(split) after its parent's free", 9);
    MPI_Comm_free(&t);

    /* A root communicator (MPI_Comm_create_group is not intercepted: its
     * first collective makes a context) freed before its children: its
     * context goes with the last whole one. */
    stats(&s1);
    MPI_Comm_create_group(MPI_COMM_WORLD, wg, 7, &root);
    colls(root, "create_group(WORLD)", 10);
    MPI_Comm_dup(root, &rdup);
    MPI_Comm_split(root, wrank % 2, wrank, &rsplit);
    MPI_Comm_free(&root);
    colls(rdup, "dup(root) after the root's free", 11);
    colls(rsplit, "split(root) after the root's free", 12);
    MPI_Comm_free(&rsplit);
    stats(&s2);
    expect(s2.contexts - s1.contexts == 1 && s2.contexts_live - s1.contexts_live == 1,
           "the root's context went before its last child", "root, dup, split");
    MPI_Comm_free(&rdup);
    stats(&s3);
    expect(s3.contexts_live == s1.contexts_live && s3.contexts_freed - s2.contexts_freed == 1,
           "the root's context did not go with its last child", "root, dup, split");

    /* A root whose last child spans only some of its ranks: its context
     * stays (arcoll_finalize needs all ranks), until MPI_Finalize. */
    stats(&s1);
    MPI_Comm_create_group(MPI_COMM_WORLD, wg, 8, &root);
    colls(root, "create_group(WORLD) #2", 13);
    MPI_Comm_split(root, wrank % 2, wrank, &rsplit);
    MPI_Comm_free(&root);
    colls(rsplit, "split(root #2) after the root's free", 14);
    MPI_Comm_free(&rsplit);
    stats(&s2);
    expect(s2.contexts_live - s1.contexts_live == (wsize > 1),
           "a context whose ranks dropped it apart was not kept", "root #2");
    MPI_Group_free(&wg);

    MPI_Comm_free(&node);
    MPI_Comm_free(&dup_half);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&disjoint);
    if (strided != MPI_COMM_NULL)
        MPI_Comm_free(&strided);
    MPI_Comm_free(&quarter);
    MPI_Comm_free(&half);
    stats(&s3);
    /* World, the two roots: three contexts for every communicator above. */
    expect(s3.contexts - s0.contexts == 3 &&
               s3.comms_split - s0.comms_split > (unsigned long long)cycles && s3.errors == 0,
           "communicators made contexts instead of splitting teams", "whole run");

    sums[0] = tally.passed;
    sums[1] = tally.failed;
    PMPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0)
        printf("shim_split_test on %d ranks (%s): %ld passed, %ld failed\n", wsize, mname, sums[0],
               sums[1]);
    MPI_Finalize();
    return sums[1] == 0 ? 0 : 1;
}
