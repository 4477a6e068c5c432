/*
 * An ordinary MPI program (no arcoll header, no PMPI call) whose results must
 * not depend on whether libarcoll_mpi.so is preloaded: tests/mpi/run.sh runs
 * it with and without the shim and compares the outputs byte for byte.
 *
 *   shim_a2av_test [ITERS]    (3 iterations of every pattern by default)
 *
 * MPI_Alltoallv and MPI_Ialltoallv + MPI_Wait, on MPI_COMM_WORLD and on a
 * split communicator (even and odd ranks, in reverse order), with uneven
 * counts in these patterns, each ITERS times with fresh counts and data:
 *   mixed        MPI_INT, blocks of 0, 1 and ~1 MiB in one call
 *   zeros        MPI_INT, every count 0
 *   one-heavy    MPI_DOUBLE, ~1000 per pair, 100x that to rank + 1
 *   random-int   MPI_INT, seeded random counts (a quarter 0)
 *   random-dbl   MPI_DOUBLE, the same
 *   in-place     MPI_DOUBLE, MPI_IN_PLACE (symmetric counts, zeros included);
 *                blocking only: Open MPI 4.1.4's own in-place MPI_Ialltoallv
 *                (libnbc) returns wrong data at 5 and 8 ranks, so the run
 *                without the shim would not be a reference
 *                (SHIM_A2AV_INPLACE_NB=1 adds it, to see that)
 *   vector       MPI_Type_vector(2, 1, 2, MPI_INT): non-contiguous, a hole in
 *                every element that must stay untouched
 * The receive blocks stand in reverse rank order with holes between them.
 * Every rank checks its whole receive buffer (holes and slack included)
 * against the expected bytes and that its send buffer is unchanged.
 *
 * stdout, rank 0 only: one line per call, "PATTERN COMM OP ITER:" and the
 * 64-bit FNV-1a hash of each world rank's whole receive buffer, in rank
 * order. stderr: failures, and rank 0's last line
 * "shim_a2av_test on N ranks: P passed, F failed" (exit 1 if any failed).
 *
 * SHIM_A2AV_CORRUPT=1 flips one received byte on the last rank in the first
 * blocking random-int call on MPI_COMM_WORLD, after MPI returned: the check
 * and the digest must both see it (run.sh proves that the comparison can
 * fail).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tl.h"

#define SLACK     64   /* bytes after the last block, which must stay untouched */
#define RECV_FILL 0xa5 /* receive buffers' bytes outside the blocks */
#define SEND_FILL 0x5a /* send buffers' holes */

enum { P_MIXED, P_ZEROS, P_ONE_HEAVY, P_RANDOM_INT, P_RANDOM_DBL, P_IN_PLACE, P_VECTOR, NPATS };
static const char *const pat_names[NPATS] = {"mixed",      "zeros",    "one-heavy", "random-int",
                                             "random-dbl", "in-place", "vector"};

/* An element of a pattern's datatype: nunits ints or doubles at off[]. */
typedef struct elem {
    MPI_Datatype type;
    size_t extent;
    int nunits, dbl;
    size_t off[2];
} elem_t;

static int wrank, wsize, corrupt, inplace_nb;
static char prefix[40];
static tl_tally_t tally = {prefix, 0, 0}; /* the first 20 failures printed */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint64_t fnv1a(const unsigned char *p, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;

    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

/* Elements src sends dst (ranks of a communicator of n) in call `salt`. */
static int count(int pat, int src, int dst, int n, int salt)
{
    uint64_t h = mix64(mix64((uint64_t)salt << 40 | (uint64_t)src << 20 | (uint64_t)dst));

    switch (pat) {
    case P_MIXED: {
        int sel = (src + 2 * dst + salt) % 3;
        return sel == 0 ? 0 : sel == 1 ? 1 : (1 << 18) + 3 * src + dst; /* 1 MiB of ints */
    }
    case P_ZEROS: return 0;
    case P_ONE_HEAVY: {
        int mean = 1000 + (src + dst) % 7;
        return dst == (src + 1) % n ? 100 * mean : mean;
    }
    case P_IN_PLACE: {
        /* The same both ways: in place, what j sends me is what I send j. */
        int sym = (src + dst + salt) % 5;
        return sym == 0 ? 0 : sym * 300 + (src < dst ? src : dst);
    }
    case P_VECTOR: return (int)(h % 700);
    default: return h % 4 == 0 ? 0 : (int)((h >> 8) % 5000);
    }
}

/* Writes the block src sends dst in call `salt`, cnt elements, at base: its units (ints or
 * doubles) hold tests/lib's pattern (tl.h) of the block, the holes between them untouched. */
static void put_block(const elem_t *e, unsigned char *base, int cnt, int src, int dst, int salt)
{
    size_t usize = e->dbl ? sizeof(double) : sizeof(int);

    if (e->nunits == 1 && e->extent == usize) { /* contiguous */
        tl_fill(base, (size_t)cnt * usize, (uint64_t)salt, src, dst);
        return;
    }
    for (size_t k = 0; k < (size_t)cnt; k++)
        for (int u = 0; u < e->nunits; u++)
            tl_fill_at(base + k * e->extent + e->off[u],
                       (k * (size_t)e->nunits + (size_t)u) * usize, usize, (uint64_t)salt, src,
                       dst);
}

static void verdict(int ok, const char *what)
{
    tl_expect_max(&tally, 20, ok, "%s", what);
}

/* One call of pattern pat on comm: its checks, then rank 0 prints the
 * digests. */
static void one_call(int pat, const elem_t *e, MPI_Comm comm, const char *cname, int nb, int iter)
{
    int me, n, salt = (pat * 16 + iter) * 2 + nb;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int *sc = malloc(4 * sizeof(int) * (size_t)n), *sd = sc + n, *rc = sd + n, *rd = rc + n;
    size_t stot = 0, rtot = 0;
    int in_place = pat == P_IN_PLACE;
    char what[160];

    if (sc == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    /* Send blocks packed in rank order; receive blocks in reverse rank order
     * with a hole of j % 3 elements before each. */
    for (int j = 0; j < n; j++) {
        sc[j] = count(pat, me, j, n, salt);
        rc[j] = count(pat, j, me, n, salt);
        sd[j] = (int)stot;
        stot += (size_t)sc[j];
    }
    for (int j = n - 1; j >= 0; j--) {
        rtot += (size_t)(j % 3);
        rd[j] = (int)rtot;
        rtot += (size_t)rc[j];
    }
    size_t slen = stot * e->extent + SLACK, rlen = rtot * e->extent + SLACK;
    unsigned char *s = malloc(slen), *r = malloc(rlen), *want = malloc(rlen);
    if (s == NULL || r == NULL || want == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    memset(s, SEND_FILL, slen);
    memset(r, RECV_FILL, rlen);
    memset(want, RECV_FILL, rlen);
    for (int j = 0; j < n; j++) {
        /* In place, rbuf's block j is first what goes to j (sc[j] == rc[j]). */
        if (in_place)
            put_block(e, r + (size_t)rd[j] * e->extent, sc[j], me, j, salt);
        else
            put_block(e, s + (size_t)sd[j] * e->extent, sc[j], me, j, salt);
        put_block(e, want + (size_t)rd[j] * e->extent, rc[j], j, me, salt);
    }
    uint64_t sdig = fnv1a(s, slen);
    const void *sbuf = in_place ? MPI_IN_PLACE : (const void *)s;
    int rcode;
    if (nb) {
        MPI_Request req;
        rcode = MPI_Ialltoallv(sbuf, sc, sd, e->type, r, rc, rd, e->type, comm, &req);
        if (rcode == MPI_SUCCESS)
            rcode = MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
        rcode = MPI_Alltoallv(sbuf, sc, sd, e->type, r, rc, rd, e->type, comm);
    }
    if (corrupt && pat == P_RANDOM_INT && comm == MPI_COMM_WORLD && !nb && iter == 0 &&
        wrank == wsize - 1)
        for (int j = 0; j < n; j++)
            if (rc[j] > 0) {
                r[(size_t)rd[j] * e->extent] ^= 1;
                break;
            }
    snprintf(what, sizeof(what), "%s %s %s %d (rank %d of %d)", pat_names[pat], cname,
             nb ? "ialltoallv" : "alltoallv", iter, me, n);
    verdict(rcode == MPI_SUCCESS, what);
    size_t bad = 0;
    while (bad < rlen && r[bad] == want[bad])
        bad++;
    if (bad < rlen) {
        char more[320];
        snprintf(more, sizeof(more), "%s: received byte %zu of %zu is %#x, not %#x", what, bad,
                 rlen, r[bad], want[bad]);
        verdict(0, more);
    } else {
        verdict(1, what);
    }
    if (!in_place && fnv1a(s, slen) != sdig) {
        char more[320];
        snprintf(more, sizeof(more), "%s: the send buffer changed", what);
        verdict(0, more);
    }
    /* Every world rank's digest, in world rank order: both split halves run
     * the same sequence of calls, so all ranks get here together. */
    unsigned long long dig = fnv1a(r, rlen), *all = NULL;
    if (wrank == 0 && (all = malloc(sizeof(*all) * (size_t)wsize)) == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Gather(&dig, 1, MPI_UNSIGNED_LONG_LONG, all, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    if (wrank == 0) {
        printf("%s %s %s %d:", pat_names[pat], cname, nb ? "ialltoallv" : "alltoallv", iter);
        for (int i = 0; i < wsize; i++)
            printf(" %016llx", all[i]);
        printf("\n");
        free(all);
    }
    free(s);
    free(r);
    free(want);
    free(sc);
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 3;
    const char *c = getenv("SHIM_A2AV_CORRUPT"), *ipnb = getenv("SHIM_A2AV_INPLACE_NB");
    MPI_Datatype vec;
    MPI_Comm half;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    snprintf(prefix, sizeof(prefix), "shim_a2av_test rank %d", wrank);
    corrupt = c != NULL && strcmp(c, "1") == 0;
    inplace_nb = ipnb != NULL && strcmp(ipnb, "1") == 0;
    if (iters < 1) {
        if (wrank == 0)
            fprintf(stderr, "usage: shim_a2av_test [ITERS]\n");
        MPI_Finalize();
        return 2;
    }
    MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    /* Even and odd ranks, each half in reverse world order. */
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wsize - wrank, &half);
    const elem_t ints = {MPI_INT, sizeof(int), 1, 0, {0, 0}};
    const elem_t dbls = {MPI_DOUBLE, sizeof(double), 1, 1, {0, 0}};
    const elem_t vecs = {vec, 3 * sizeof(int), 2, 0, {0, 2 * sizeof(int)}};
    const elem_t *elems[NPATS] = {&ints, &ints, &dbls, &ints, &dbls, &dbls, &vecs};

    for (int p = 0; p < NPATS; p++)
        for (int it = 0; it < iters; it++)
            for (int nb = 0; nb < (p == P_IN_PLACE && !inplace_nb ? 1 : 2); nb++) {
                one_call(p, elems[p], MPI_COMM_WORLD, "world", nb, it);
                one_call(p, elems[p], half, "half", nb, it);
            }
    MPI_Comm_free(&half);
    MPI_Type_free(&vec);
    long sums[2] = {tally.passed, tally.failed}, tot[2];
    MPI_Reduce(sums, tot, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (wrank == 0) {
        fflush(stdout);
        fprintf(stderr, "shim_a2av_test on %d ranks: %ld passed, %ld failed\n", wsize, tot[0],
                tot[1]);
    }
    MPI_Finalize();
    return tally.failed == 0 ? 0 : 1;
}
