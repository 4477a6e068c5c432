/*
 * An ordinary MPI program (it does not link arcoll) that checks the PMPI
 * shim's collectives beyond MPI_Alltoall/MPI_Allgather, and its agreement
 * rule, when libarcoll_mpi.so is preloaded:
 *
 *   shim_coll_test MODE
 *     shim   the shim must be loaded and must serve every call it can
 *     plain  no expectation about the shim (data checks only)
 *     serve  MPI_Alltoall/Allgather of mixed datatypes under the tuning
 *            table's serve rules (SHIM_TEST_MPI_BELOW=N: calls of fewer
 *            than N bytes per peer must go to PMPI, on every rank alike)
 *     fail   under MPI_ERRORS_RETURN, a failed team (a size mismatch on a
 *            dup, then ARCOLL_MPI_FAULT=coll_fail on world rank 1):
 *            after the failing call and at most one more, 100 calls must
 *            give PMPI's data and go to PMPI
 *     ifail  the same with nonblocking calls, each completed by MPI_Wait
 *            and followed by an MPI_Barrier the shim does not intercept
 *            (ARCOLL_MPI_FAULT=icoll_fail: world rank 1 takes its first
 *            one on MPI_COMM_WORLD as failed in the wait): the failure must
 *            be reported through the communicator's error handler at that
 *            wait and agreed there, or the barrier hangs
 *     nbfail  mode fail with the calls after the failing one nonblocking,
 *            each started, then an MPI_Barrier the shim does not see, then
 *            waited for: a start may not wait for the others' word (they
 *            send it when their own call times out, after the barrier)
 *     latefail  mode fail with an MPI_Barrier after every call, and world
 *            rank 1 (ARCOLL_MPI_FAULT=coll_fail) reaching the call after
 *            its failing one ARCOLL_TIMEOUT_MS + 1 s late: the others' call
 *            times out before its word comes, and the barrier must not hang
 *
 * Every result is compared byte for byte, gaps of the datatypes included,
 * with the same call made through PMPI_* (the MPI library itself):
 *   - MPI_Alltoall/Allgather(v) with uneven counts (zeros included),
 *     shuffled displacements with holes, several datatypes, and mixed
 *     datatypes of one type signature: rank 0 passes 4 x MPI_INT per unit,
 *     the last rank a non-contiguous MPI_Type_vector, the others a derived
 *     contiguous type; every rank must be served (the agreement rule);
 *   - MPI_Reduce_scatter_block and MPI_Allreduce for every mapped datatype x
 *     op, in place and not;
 *   - 8 MPI_Ialltoall in flight on one communicator, an MPI_Allreduce on it
 *     meanwhile, the 8 completed in reverse order with MPI_Wait;
 *   - the other nonblocking forms through MPI_Waitall, MPI_Testall,
 *     MPI_Waitany and MPI_Test, mixed with point-to-point requests;
 *   - MPI_Comm_free while an MPI_Ialltoall on the communicator is pending;
 *   - calls the shim must hand to PMPI (a user op, MPI_MAXLOC, MPI_UNSIGNED).
 * The shim's counters (arcoll_mpi_stats, found with dlsym) must show which
 * calls arcoll ran. Last line on rank 0:
 * "shim_coll_test on N ranks (MODE): P passed, F failed".
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arcoll_mpi.h"
#include "tl.h"

enum { MODE_SHIM, MODE_PLAIN, MODE_SERVE, MODE_FAIL, MODE_IFAIL, MODE_LATEFAIL, MODE_NBFAIL };
/* Mode nbfail: the calls after the failing one are nonblocking. */
static int nb_after;
enum { SERVED, PASSED };
/* SHIM_TEST_ALLREDUCE_MPI_BELOW=N: the tuning table's serve rules hand
 * allreduces of fewer than N bytes to PMPI (the default table: 4096). */
static long allreduce_mpi_below;

static int mode, wrank, wsize;
static long mpi_below; /* serve: calls of fewer bytes per peer go to PMPI */
static char prefix[32];
static tl_tally_t tally = {prefix, 0, 0}; /* the first 20 failures printed */
static arcoll_mpi_stats_fn stats_fn;

static void stats(arcoll_mpi_stats_t *s)
{
    memset(s, 0, sizeof(*s));
    if (stats_fn != NULL)
        stats_fn(s);
}

static void verdict(int ok, const char *what, const char *detail)
{
    tl_expect_max(&tally, 20, ok, "%s: %s", what, detail);
}

/* The counter of `field` moved by exactly one, the other of the pair not. */
#define COUNTED(s0, s1, name, how)                                                            \
    ((how) == SERVED                                                                          \
         ? (s1).name##_arcoll - (s0).name##_arcoll == 1 && (s1).name##_mpi == (s0).name##_mpi \
         : (s1).name##_mpi - (s0).name##_mpi == 1 && (s1).name##_arcoll == (s0).name##_arcoll)
/* all_passed: every call must go to PMPI (a communicator made from a failed one). */
static int all_passed;
#define EXPECT(s0, s1, name, how0, what, detail)                                       \
    do {                                                                               \
        int expect_how_ = all_passed ? PASSED : (how0);                                \
        if (mode != MODE_PLAIN)                                                        \
            verdict(COUNTED(s0, s1, name, expect_how_),                                \
                    expect_how_ == SERVED ? "not served by arcoll: " what              \
                                          : "served by arcoll, should be PMPI: " what, \
                    detail);                                                           \
    } while (0)

/*
 * A unit of data: m elements of type t, ue bytes of buffer (gaps included).
 * All layouts of one test have the same type signature per unit.
 */
typedef struct lay {
    MPI_Datatype t;
    int m;
    size_t ue;
    const char *name;
} lay_t;

static MPI_Datatype contig4, vec4, contig3, vec2;
static lay_t L_INT4, L_CONTIG4, L_VEC4, L_BYTE, L_DOUBLE, L_INT, L_CONTIG3, L_VEC2, L_DINT;

static void lays_init(void)
{
    MPI_Type_contiguous(4, MPI_INT, &contig4);
    MPI_Type_commit(&contig4);
    MPI_Type_vector(4, 1, 2, MPI_INT, &vec4); /* 4 ints, every other one: extent 7 ints */
    MPI_Type_commit(&vec4);
    MPI_Type_contiguous(3, MPI_INT, &contig3);
    MPI_Type_commit(&contig3);
    MPI_Type_vector(2, 1, 2, MPI_INT, &vec2);
    MPI_Type_commit(&vec2);
    L_INT4 = (lay_t){MPI_INT, 4, 16, "4 x MPI_INT"};
    L_CONTIG4 = (lay_t){contig4, 1, 16, "contiguous(4, MPI_INT)"};
    L_VEC4 = (lay_t){vec4, 1, 28, "vector(4, 1, 2, MPI_INT)"};
    L_BYTE = (lay_t){MPI_BYTE, 1, 1, "MPI_BYTE"};
    L_DOUBLE = (lay_t){MPI_DOUBLE, 1, 8, "MPI_DOUBLE"};
    L_INT = (lay_t){MPI_INT, 1, 4, "MPI_INT"};
    L_CONTIG3 = (lay_t){contig3, 1, 12, "contiguous(3, MPI_INT)"};
    L_VEC2 = (lay_t){vec2, 1, 12, "vector(2, 1, 2, MPI_INT)"};
    L_DINT = (lay_t){MPI_DOUBLE_INT, 1, 16, "MPI_DOUBLE_INT"};
}

/* The layout a rank uses in a test: the same everywhere, or mixed. */
typedef struct laysel {
    const lay_t *all;
    int mixed;
    const char *name;
} laysel_t;

static const lay_t *lay_of(const laysel_t *sel, int rank, int n)
{
    if (!sel->mixed)
        return sel->all;
    if (rank == 0)
        return &L_INT4;
    if (sel->mixed == 2)
        return &L_VEC4;
    return rank == n - 1 && n > 2 ? &L_VEC4 : &L_CONTIG4;
}

static unsigned char *buf2(size_t len, unsigned char **ref, int fill)
{
    unsigned char *b = malloc(len + 1);

    *ref = malloc(len + 1);
    if (b == NULL || *ref == NULL) {
        fprintf(stderr, "shim_coll_test: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(b, fill, len + 1);
    memset(*ref, fill, len + 1);
    return b;
}

/* len bytes of rank a's data in call salt (a tests/lib pattern; results are compared with
 * PMPI's). */
static void fill(unsigned char *b, size_t len, int a, int salt)
{
    tl_fill(b, len, (uint64_t)salt, a, TL_ANY);
}

/* Alltoall or allgather of k units per block; in place or not; blocking. */
static void t_uniform(MPI_Comm comm, const char *cname, int a2a, const laysel_t *sel, int k,
                      int in_place, int salt)
{
    arcoll_mpi_stats_t s0, s1;
    int me, n, rc;
    char detail[256];

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    const lay_t *l = lay_of(sel, me, n);
    size_t blk = (size_t)k * l->ue, slen = a2a ? blk * (size_t)n : blk;
    size_t rlen = blk * (size_t)n;
    unsigned char *sref, *s = buf2(slen, &sref, 0), *ref, *r = buf2(rlen, &ref, 0xEE);
    int cnt = k * l->m, tsize = 0;

    /* Under serve rules: by the bytes per peer, the same on every rank. */
    MPI_Type_size(l->t, &tsize);
    long bytes = (long)cnt * tsize;
    int how = bytes > 0 && bytes < mpi_below ? PASSED : SERVED;

    fill(s, slen, me, salt);
    if (in_place) {
        fill(r, rlen, me + 50, salt);
        if (!a2a)
            memcpy(r + (size_t)me * blk, s, blk);
        memcpy(ref, r, rlen);
    }
    stats(&s0);
    if (a2a)
        rc = MPI_Alltoall(in_place ? MPI_IN_PLACE : s, cnt, l->t, r, cnt, l->t, comm);
    else
        rc = MPI_Allgather(in_place ? MPI_IN_PLACE : s, cnt, l->t, r, cnt, l->t, comm);
    stats(&s1);
    if (a2a)
        PMPI_Alltoall(in_place ? MPI_IN_PLACE : s, cnt, l->t, ref, cnt, l->t, comm);
    else
        PMPI_Allgather(in_place ? MPI_IN_PLACE : s, cnt, l->t, ref, cnt, l->t, comm);
    snprintf(detail, sizeof(detail), "%s %s%s, %d units of %s (rank's %s)", cname,
             a2a ? "MPI_Alltoall" : "MPI_Allgather", in_place ? " in place" : "", k, sel->name,
             l->name);
    verdict(rc == MPI_SUCCESS && memcmp(r, ref, rlen + 1) == 0, "data differs from PMPI", detail);
    if (a2a)
        EXPECT(s0, s1, alltoall, how, "alltoall", detail);
    else
        EXPECT(s0, s1, allgather, how, "allgather", detail);
    free(s);
    free(sref);
    free(r);
    free(ref);
}

/* Units from rank i to rank j in alltoallv (zeros included). */
static int vcount(int i, int j, int salt)
{
    return (i * 7 + j * 3 + salt) % 5 == 0 ? 0 : 1 + (i * 5 + j * 11 + salt) % 4;
}

/*
 * Alltoallv: send blocks in rank order with a hole of one unit after each,
 * receive blocks in reverse rank order with holes of two units.
 */
static void t_alltoallv(MPI_Comm comm, const char *cname, const laysel_t *sel, int salt,
                        int in_place)
{
    arcoll_mpi_stats_t s0, s1;
    int me, n, rc;
    char detail[256];

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    const lay_t *l = lay_of(sel, me, n);
    int *sc = calloc((size_t)n, sizeof(int)), *sd = calloc((size_t)n, sizeof(int));
    int *rcn = calloc((size_t)n, sizeof(int)), *rd = calloc((size_t)n, sizeof(int));
    size_t su = 0, ru = 0;

    for (int j = 0; j < n; j++) {
        /* In place, what goes out is what comes in: MPI needs counts alike. */
        int out = in_place ? vcount(j, me, salt) + vcount(me, j, salt) : vcount(me, j, salt);
        sc[j] = out * l->m;
        sd[j] = (int)su * l->m;
        su += (size_t)out + 1;
    }
    for (int j = n - 1; j >= 0; j--) {
        int in = in_place ? vcount(j, me, salt) + vcount(me, j, salt) : vcount(j, me, salt);
        rcn[j] = in * l->m;
        rd[j] = (int)ru * l->m;
        ru += (size_t)in + 2;
    }
    size_t slen = su * l->ue, rlen = ru * l->ue;
    unsigned char *sref, *s = buf2(slen, &sref, 0), *ref, *r = buf2(rlen, &ref, 0xEE);

    fill(s, slen, me, salt);
    if (in_place) {
        fill(r, rlen, me + 70, salt);
        memcpy(ref, r, rlen);
    }
    stats(&s0);
    rc = MPI_Alltoallv(in_place ? MPI_IN_PLACE : s, sc, sd, l->t, r, rcn, rd, l->t, comm);
    stats(&s1);
    PMPI_Alltoallv(in_place ? MPI_IN_PLACE : s, sc, sd, l->t, ref, rcn, rd, l->t, comm);
    snprintf(detail, sizeof(detail), "%s MPI_Alltoallv%s of %s (rank's %s), salt %d", cname,
             in_place ? " in place" : "", sel->name, l->name, salt);
    verdict(rc == MPI_SUCCESS && memcmp(r, ref, rlen + 1) == 0, "data differs from PMPI", detail);
    EXPECT(s0, s1, alltoallv, SERVED, "alltoallv", detail);
    free(s);
    free(sref);
    free(r);
    free(ref);
    free(sc);
    free(sd);
    free(rcn);
    free(rd);
}

/* Allgatherv: rank j sends vcount(j, 0) units (zeros included); blocks land
 * in a shuffled order with holes. */
static void t_allgatherv(MPI_Comm comm, const char *cname, const laysel_t *sel, int salt,
                         int in_place)
{
    arcoll_mpi_stats_t s0, s1;
    int me, n, rc;
    char detail[256];

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    const lay_t *l = lay_of(sel, me, n);
    int *rcn = calloc((size_t)n, sizeof(int)), *rd = calloc((size_t)n, sizeof(int));
    int *perm = calloc((size_t)n, sizeof(int));
    unsigned seed = 77u + (unsigned)salt; /* the same shuffle on every rank */
    size_t ru = 1;                        /* a hole before the first block too */

    for (int i = 0; i < n; i++)
        perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        seed = seed * 1103515245u + 12345u;
        int j = (int)((seed >> 8) % (unsigned)(i + 1)), tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    for (int pos = 0; pos < n; pos++) {
        int j = perm[pos];
        rcn[j] = vcount(j, 0, salt) * l->m;
        rd[j] = (int)ru * l->m;
        ru += (size_t)vcount(j, 0, salt) + 1;
    }
    free(perm);
    size_t blk = (size_t)vcount(me, 0, salt) * l->ue, rlen = ru * l->ue;
    unsigned char *sref, *s = buf2(blk, &sref, 0), *ref, *r = buf2(rlen, &ref, 0xEE);

    fill(s, blk, me, salt);
    if (in_place) {
        memcpy(r + (size_t)rd[me] / (size_t)l->m * l->ue, s, blk);
        memcpy(ref, r, rlen);
    }
    stats(&s0);
    rc = MPI_Allgatherv(in_place ? MPI_IN_PLACE : s, rcn[me], l->t, r, rcn, rd, l->t, comm);
    stats(&s1);
    PMPI_Allgatherv(in_place ? MPI_IN_PLACE : s, rcn[me], l->t, ref, rcn, rd, l->t, comm);
    snprintf(detail, sizeof(detail), "%s MPI_Allgatherv%s of %s (rank's %s), salt %d", cname,
             in_place ? " in place" : "", sel->name, l->name, salt);
    verdict(rc == MPI_SUCCESS && memcmp(r, ref, rlen + 1) == 0, "data differs from PMPI", detail);
    EXPECT(s0, s1, allgatherv, SERVED, "allgatherv", detail);
    free(s);
    free(sref);
    free(r);
    free(ref);
    free(rcn);
    free(rd);
}

/* Reductions. Values keep every op exact in every type (small integers; for
 * PROD, +-1 and 2 on few elements), so results must equal PMPI's bitwise. */
typedef struct rtype {
    MPI_Datatype t;
    const char *name;
    int fp;
    size_t size;
} rtype_t;

static void rvalue(const rtype_t *rt, void *p, long v)
{
    switch (rt->fp * 100 + (int)rt->size) {
    case 4: *(int32_t *)p = (int32_t)v; break;
    case 8: *(int64_t *)p = (int64_t)v; break;
    case 104: *(float *)p = (float)v; break;
    default: *(double *)p = (double)v; break;
    }
}

static void t_reduce(MPI_Comm comm, const char *cname, int rsb, const rtype_t *rt, MPI_Op op,
                     const char *opname, int count, int in_place, int salt)
{
    arcoll_mpi_stats_t s0, s1;
    int me, n, rc;
    char detail[256];

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    size_t elems = (size_t)count * (rsb ? (size_t)n : 1), len = elems * rt->size;
    size_t rlen = in_place ? len : (size_t)count * rt->size;
    unsigned char *sref, *s = buf2(len, &sref, 0), *ref, *r = buf2(len, &ref, 0xEE);

    for (size_t k = 0; k < elems; k++) {
        long v;
        if (op == MPI_PROD)
            v = (k + (size_t)me + (size_t)salt) % 7 == 0 ? 2 : ((k + (size_t)me) % 3 ? 1 : -1);
        else
            v = (long)((k * 37 + (size_t)me * 101 + (size_t)salt * 13) % 1000) - 300;
        if (rt->t == MPI_UNSIGNED_LONG || rt->t == MPI_UINT64_T || rt->t == MPI_UNSIGNED_LONG_LONG)
            v = v < 0 ? -v : v;
        rvalue(rt, s + k * rt->size, v);
    }
    if (in_place) {
        memcpy(r, s, len);
        memcpy(ref, s, len);
    }
    stats(&s0);
    if (rsb)
        rc = MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : s, r, count, rt->t, op, comm);
    else
        rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : s, r, count, rt->t, op, comm);
    stats(&s1);
    if (rsb)
        PMPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : s, ref, count, rt->t, op, comm);
    else
        PMPI_Allreduce(in_place ? MPI_IN_PLACE : s, ref, count, rt->t, op, comm);
    snprintf(detail, sizeof(detail), "%s %s%s of %d x %s, %s", cname,
             rsb ? "MPI_Reduce_scatter_block" : "MPI_Allreduce", in_place ? " in place" : "", count,
             rt->name, opname);
    /* In place, reduce_scatter_block's result is the first count elements;
     * MPI leaves the rest of rbuf undefined. */
    verdict(rc == MPI_SUCCESS &&
                memcmp(r, ref, in_place && rsb ? (size_t)count * rt->size : rlen) == 0,
            "data differs from PMPI", detail);
    if (rsb)
        EXPECT(s0, s1, reduce_scatter_block, SERVED, "reduce_scatter_block", detail);
    else
        EXPECT(s0, s1, allreduce,
               (long)count * (long)rt->size < allreduce_mpi_below ? PASSED : SERVED, "allreduce",
               detail);
    free(s);
    free(sref);
    free(r);
    free(ref);
}

static const rtype_t rtypes[] = {
    {MPI_INT, "MPI_INT", 0, 4},
    {MPI_INT32_T, "MPI_INT32_T", 0, 4},
    {MPI_LONG, "MPI_LONG", 0, sizeof(long)},
    {MPI_LONG_LONG, "MPI_LONG_LONG", 0, 8},
    {MPI_INT64_T, "MPI_INT64_T", 0, 8},
    {MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", 0, sizeof(unsigned long)},
    {MPI_UINT64_T, "MPI_UINT64_T", 0, 8},
    {MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG", 0, 8},
    {MPI_FLOAT, "MPI_FLOAT", 1, 4},
    {MPI_DOUBLE, "MPI_DOUBLE", 1, 8},
    {MPI_INTEGER, "MPI_INTEGER", 0, 4},
    {MPI_INTEGER8, "MPI_INTEGER8", 0, 8},
    {MPI_REAL, "MPI_REAL", 1, 4},
    {MPI_DOUBLE_PRECISION, "MPI_DOUBLE_PRECISION", 1, 8},
    {MPI_REAL8, "MPI_REAL8", 1, 8},
};

static void reduce_suite(MPI_Comm comm, const char *cname)
{
    const struct {
        MPI_Op op;
        const char *name;
        int bitwise;
    } ops[] = {{MPI_SUM, "MPI_SUM", 0},  {MPI_PROD, "MPI_PROD", 0}, {MPI_MIN, "MPI_MIN", 0},
               {MPI_MAX, "MPI_MAX", 0},  {MPI_BAND, "MPI_BAND", 1}, {MPI_BOR, "MPI_BOR", 1},
               {MPI_BXOR, "MPI_BXOR", 1}};
    int salt = 0;

    for (size_t t = 0; t < sizeof(rtypes) / sizeof(rtypes[0]); t++)
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            if (ops[o].bitwise && rtypes[t].fp)
                continue;
            int count = (int)(1 + (t * 31 + o * 17) % 300);
            for (int rsb = 0; rsb <= 1; rsb++)
                for (int ip = 0; ip <= 1; ip++)
                    t_reduce(comm, cname, rsb, &rtypes[t], ops[o].op, ops[o].name, count, ip,
                             salt++);
        }
    /* Larger vectors, beyond one bounce slot. */
    t_reduce(comm, cname, 0, &rtypes[9], MPI_SUM, "MPI_SUM", 100000, 0, 1);
    t_reduce(comm, cname, 1, &rtypes[0], MPI_MAX, "MPI_MAX", 20000, 1, 2);
}

static void data_suite(MPI_Comm comm, const char *cname)
{
    const laysel_t sels[] = {{&L_BYTE, 0, "MPI_BYTE"},
                             {&L_INT, 0, "MPI_INT"},
                             {&L_DOUBLE, 0, "MPI_DOUBLE"},
                             {&L_CONTIG3, 0, "contiguous(3, MPI_INT)"},
                             {&L_VEC2, 0, "vector(2, 1, 2, MPI_INT)"},
                             {&L_DINT, 0, "MPI_DOUBLE_INT"},
                             {NULL, 1, "mixed: 4 x MPI_INT / contiguous(4) / vector(4)"}};

    for (size_t i = 0; i < sizeof(sels) / sizeof(sels[0]); i++) {
        const int ks[] = {0, 1, 5, 300};
        for (size_t k = 0; k < sizeof(ks) / sizeof(ks[0]); k++)
            for (int ip = 0; ip <= 1; ip++) {
                t_uniform(comm, cname, 1, &sels[i], ks[k], ip, (int)(i + k));
                t_uniform(comm, cname, 0, &sels[i], ks[k], ip, (int)(i + k));
            }
        for (int salt = 0; salt < 3; salt++)
            for (int ip = 0; ip <= 1; ip++) {
                t_alltoallv(comm, cname, &sels[i], salt, ip);
                t_allgatherv(comm, cname, &sels[i], salt, ip);
            }
    }
}

/* 8 MPI_Ialltoall in flight, waited for in reverse order after a blocking
 * MPI_Allreduce; every other one of a non-contiguous type, freed by the
 * program right after the start. */
static void t_inflight(MPI_Comm comm, const char *cname)
{
    enum { NF = 8, K = 37 };
    arcoll_mpi_stats_t s0, s1;
    MPI_Request req[NF];
    unsigned char *s[NF], *r[NF], *ref[NF], *sref;
    size_t len[NF];
    int me, n, ok = 1;
    char detail[128];

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    for (int i = 0; i < NF; i++) {
        const lay_t *l = i % 2 ? &L_VEC4 : &L_INT4;
        len[i] = (size_t)K * l->ue * (size_t)n;
        s[i] = buf2(len[i], &sref, 0);
        free(sref);
        r[i] = buf2(len[i], &ref[i], 0xEE);
        fill(s[i], len[i], me, i);
        PMPI_Alltoall(s[i], K * l->m, l->t, ref[i], K * l->m, l->t, comm);
    }
    stats(&s0);
    for (int i = 0; i < NF; i++) {
        MPI_Datatype t = MPI_INT;
        if (i % 2)
            MPI_Type_dup(vec4, &t);
        ok &= MPI_Ialltoall(s[i], K * (i % 2 ? 1 : 4), t, r[i], K * (i % 2 ? 1 : 4), t, comm,
                            &req[i]) == MPI_SUCCESS;
        if (i % 2)
            MPI_Type_free(&t);
    }
    /* A blocking call beyond the 8 in flight: arcoll first completes the
     * oldest locally. */
    {
        long one = me + 1, sum = 0;
        ok &= MPI_Allreduce(&one, &sum, 1, MPI_LONG, MPI_SUM, comm) == MPI_SUCCESS;
        verdict(sum == (long)n * (n + 1) / 2, "MPI_Allreduce while 8 MPI_Ialltoall in flight",
                cname);
    }
    for (int i = NF - 1; i >= 0; i--) {
        ok &= MPI_Wait(&req[i], MPI_STATUS_IGNORE) == MPI_SUCCESS;
        ok &= req[i] == MPI_REQUEST_NULL;
    }
    stats(&s1);
    for (int i = 0; i < NF; i++) {
        snprintf(detail, sizeof(detail), "%s MPI_Ialltoall %d of %d in flight", cname, i, NF);
        verdict(ok && memcmp(r[i], ref[i], len[i] + 1) == 0, "data differs from PMPI", detail);
        free(s[i]);
        free(r[i]);
        free(ref[i]);
    }
    if (mode == MODE_SHIM)
        verdict(s1.ialltoall_arcoll - s0.ialltoall_arcoll == NF &&
                    s1.requests - s0.requests == NF && s1.ialltoall_mpi == s0.ialltoall_mpi,
                "not served by arcoll: 8 MPI_Ialltoall in flight", cname);
}

/* The other nonblocking forms, with a ring of point-to-point requests in the
 * same arrays. how: 0 MPI_Waitall, 1 MPI_Testall loop, 2 MPI_Waitany,
 * 3 MPI_Test on each. */
static void t_nonblocking(MPI_Comm comm, const char *cname, int how)
{
    enum { NR = 7, K = 50 };
    static const char *const hows[] = {"MPI_Waitall", "MPI_Testall", "MPI_Waitany", "MPI_Test"};
    arcoll_mpi_stats_t s0, s1;
    MPI_Request req[NR];
    int me, n, ok = 1, flag = 0, idx, token = -1, sent;
    char detail[160];

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    size_t un = (size_t)n;
    int *cnt = malloc(un * sizeof(int)), *dis = malloc(un * sizeof(int));
    int *gcnt = malloc(un * sizeof(int));
    int *sa = malloc(un * K * sizeof(int)), *ra = malloc(un * K * sizeof(int) + 1);
    int *rag = malloc(un * K * sizeof(int) + 1), *rv = malloc(un * K * sizeof(int) + 1);
    int *rgv = malloc(un * K * sizeof(int) + 1);
    double *dv = malloc(K * sizeof(double)), *dr = malloc(K * sizeof(double) + 1);
    long *lv = malloc(un * K * sizeof(long)), *lr = malloc(K * sizeof(long) + 1);
    int *ref = malloc(un * K * sizeof(int) + K * sizeof(double) + 1);

    for (size_t k = 0; k < un * K; k++) {
        sa[k] = (int)(me * 100000 + (int)k);
        lv[k] = (long)(k % 97) - me;
    }
    for (int k = 0; k < K; k++)
        dv[k] = k * 0.5 + me;
    /* Alltoallv: me -> j and j -> me alike; allgatherv: rank j's count. */
    for (int j = 0; j < n; j++) {
        cnt[j] = K - (me + j) % 3;
        gcnt[j] = K - j % 3;
        dis[j] = (n - 1 - j) * K;
    }
    memset(ra, 0xEE, un * K * sizeof(int) + 1);
    memset(rag, 0xEE, un * K * sizeof(int) + 1);
    memset(rv, 0xEE, un * K * sizeof(int) + 1);
    memset(rgv, 0xEE, un * K * sizeof(int) + 1);
    stats(&s0);
    ok &= MPI_Ialltoall(sa, K, MPI_INT, ra, K, MPI_INT, comm, &req[0]) == MPI_SUCCESS;
    ok &= MPI_Iallgather(sa, K, MPI_INT, rag, K, MPI_INT, comm, &req[1]) == MPI_SUCCESS;
    ok &= MPI_Iallreduce(dv, dr, K, MPI_DOUBLE, MPI_SUM, comm, &req[2]) == MPI_SUCCESS;
    ok &=
        MPI_Ialltoallv(sa, cnt, dis, MPI_INT, rv, cnt, dis, MPI_INT, comm, &req[3]) == MPI_SUCCESS;
    ok &= MPI_Iallgatherv(sa, gcnt[me], MPI_INT, rgv, gcnt, dis, MPI_INT, comm, &req[4]) ==
          MPI_SUCCESS;
    ok &= MPI_Ireduce_scatter_block(lv, lr, K, MPI_LONG, MPI_MAX, comm, &req[5]) == MPI_SUCCESS;
    sent = me;
    /* A ring: the next rank's token arrives while the collectives run. */
    if (n > 1) {
        MPI_Request sreq;
        MPI_Isend(&sent, 1, MPI_INT, (me + 1) % n, 7, comm, &sreq);
        MPI_Request_free(&sreq);
        MPI_Irecv(&token, 1, MPI_INT, (me + n - 1) % n, 7, comm, &req[6]);
    } else {
        token = 0;
        req[6] = MPI_REQUEST_NULL;
    }
    switch (how) {
    case 0: ok &= MPI_Waitall(NR, req, MPI_STATUSES_IGNORE) == MPI_SUCCESS; break;
    case 1:
        while (ok && !flag)
            ok &= MPI_Testall(NR, req, &flag, MPI_STATUSES_IGNORE) == MPI_SUCCESS;
        break;
    case 2:
        for (int i = 0; ok && i < NR; i++)
            ok &= MPI_Waitany(NR, req, &idx, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
                  (idx == MPI_UNDEFINED || req[idx] == MPI_REQUEST_NULL);
        break;
    default:
        for (int i = 0; ok && i < NR; i++)
            for (flag = 0; ok && !flag;)
                ok &= MPI_Test(&req[i], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS;
    }
    stats(&s1);
    for (int i = 0; i < NR; i++)
        ok &= req[i] == MPI_REQUEST_NULL;
    snprintf(detail, sizeof(detail), "%s nonblocking forms completed with %s", cname, hows[how]);
    verdict(ok && token == (n > 1 ? (me + n - 1) % n : 0), "a call failed or a request is left",
            detail);
    memset(ref, 0xEE, un * K * sizeof(int) + 1);
    PMPI_Alltoall(sa, K, MPI_INT, ref, K, MPI_INT, comm);
    verdict(memcmp(ra, ref, un * K * sizeof(int) + 1) == 0, "MPI_Ialltoall data", detail);
    memset(ref, 0xEE, un * K * sizeof(int) + 1);
    PMPI_Allgather(sa, K, MPI_INT, ref, K, MPI_INT, comm);
    verdict(memcmp(rag, ref, un * K * sizeof(int) + 1) == 0, "MPI_Iallgather data", detail);
    memset(ref, 0xEE, un * K * sizeof(int) + 1);
    PMPI_Alltoallv(sa, cnt, dis, MPI_INT, ref, cnt, dis, MPI_INT, comm);
    verdict(memcmp(rv, ref, un * K * sizeof(int) + 1) == 0, "MPI_Ialltoallv data", detail);
    memset(ref, 0xEE, un * K * sizeof(int) + 1);
    PMPI_Allgatherv(sa, gcnt[me], MPI_INT, ref, gcnt, dis, MPI_INT, comm);
    verdict(memcmp(rgv, ref, un * K * sizeof(int) + 1) == 0, "MPI_Iallgatherv data", detail);
    PMPI_Allreduce(dv, ref, K, MPI_DOUBLE, MPI_SUM, comm);
    verdict(memcmp(dr, ref, K * sizeof(double)) == 0, "MPI_Iallreduce data", detail);
    PMPI_Reduce_scatter_block(lv, ref, K, MPI_LONG, MPI_MAX, comm);
    verdict(memcmp(lr, ref, K * sizeof(long)) == 0, "MPI_Ireduce_scatter_block data", detail);
    EXPECT(s0, s1, ialltoall, SERVED, "ialltoall", detail);
    EXPECT(s0, s1, iallgather, SERVED, "iallgather", detail);
    EXPECT(s0, s1, iallreduce, (long)(K * sizeof(double)) < allreduce_mpi_below ? PASSED : SERVED,
           "iallreduce", detail);
    EXPECT(s0, s1, ialltoallv, SERVED, "ialltoallv", detail);
    EXPECT(s0, s1, iallgatherv, SERVED, "iallgatherv", detail);
    EXPECT(s0, s1, ireduce_scatter_block, SERVED, "ireduce_scatter_block", detail);
    free(cnt);
    free(gcnt);
    free(dis);
    free(sa);
    free(ra);
    free(rag);
    free(rv);
    free(rgv);
    free(dv);
    free(dr);
    free(lv);
    free(lr);
    free(ref);
}

static void my_sum(void *in, void *inout, int *len, MPI_Datatype *t)
{
    (void)t;
    for (int i = 0; i < *len; i++)
        ((int *)inout)[i] += ((int *)in)[i];
}

/* What arcoll does not have goes to PMPI, on every rank alike. */
static void t_passthrough(MPI_Comm comm, const char *cname)
{
    arcoll_mpi_stats_t s0, s1;
    MPI_Op user;
    int me, n, v[4], r[4], ref[4], rc;
    struct {
        int v, i;
    } mv, mr, mref;

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    for (int i = 0; i < 4; i++)
        v[i] = me * 3 + i;
    MPI_Op_create(my_sum, 1, &user);
    stats(&s0);
    rc = MPI_Allreduce(v, r, 4, MPI_INT, user, comm);
    stats(&s1);
    PMPI_Allreduce(v, ref, 4, MPI_INT, MPI_SUM, comm);
    verdict(rc == MPI_SUCCESS && memcmp(r, ref, sizeof(r)) == 0, "data differs from PMPI",
            "MPI_Allreduce with a user op");
    EXPECT(s0, s1, allreduce, PASSED, "allreduce with a user op", cname);
    MPI_Op_free(&user);

    mv.v = (me * 7) % 5;
    mv.i = me;
    stats(&s0);
    rc = MPI_Allreduce(&mv, &mr, 1, MPI_2INT, MPI_MAXLOC, comm);
    stats(&s1);
    PMPI_Allreduce(&mv, &mref, 1, MPI_2INT, MPI_MAXLOC, comm);
    verdict(rc == MPI_SUCCESS && mr.v == mref.v && mr.i == mref.i, "data differs from PMPI",
            "MPI_Allreduce MPI_MAXLOC");
    EXPECT(s0, s1, allreduce, PASSED, "allreduce MPI_MAXLOC of MPI_2INT", cname);

    /* One element per rank: the input holds as many as the communicator has ranks. */
    unsigned *uv = calloc((size_t)n + 1, sizeof(*uv)), ur = 0;
    stats(&s0);
    rc = MPI_Reduce_scatter_block(uv, &ur, 1, MPI_UNSIGNED, MPI_SUM, comm);
    stats(&s1);
    free(uv);
    EXPECT(s0, s1, reduce_scatter_block, PASSED, "reduce_scatter_block of MPI_UNSIGNED", cname);
    (void)rc;
}

/* A communicator freed while a collective on it is pending (MPI lets it
 * complete normally): the shim must finish it before the context goes. */
static void t_request_free(MPI_Comm comm, const char *cname)
{
    enum { K = 64 };
    arcoll_mpi_stats_t s0, s1;
    MPI_Comm dup;
    MPI_Request req;
    int me, n, rc;

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    size_t len = (size_t)K * (size_t)n * sizeof(int);
    int *s = malloc(len), *r = malloc(len + 1), *ref = malloc(len + 1);

    for (size_t k = 0; k < (size_t)K * (size_t)n; k++)
        s[k] = me * 1000 + (int)k;
    memset(r, 0xEE, len + 1);
    memset(ref, 0xEE, len + 1);
    PMPI_Alltoall(s, K, MPI_INT, ref, K, MPI_INT, comm);
    MPI_Comm_dup(comm, &dup);
    stats(&s0);
    rc = MPI_Ialltoall(s, K, MPI_INT, r, K, MPI_INT, dup, &req);
    rc |= MPI_Comm_free(&dup);
    rc |= MPI_Wait(&req, MPI_STATUS_IGNORE);
    stats(&s1);
    verdict(rc == MPI_SUCCESS && req == MPI_REQUEST_NULL && memcmp(r, ref, len + 1) == 0,
            "data differs from PMPI", "MPI_Ialltoall, MPI_Comm_free, MPI_Wait");
    if (mode == MODE_SHIM)
        verdict(s1.ialltoall_arcoll - s0.ialltoall_arcoll == 1 && s1.requests - s0.requests == 1,
                "not served by arcoll: MPI_Ialltoall on a freed communicator", cname);
    free(s);
    free(r);
    free(ref);
}

/* Mixed datatypes of one signature with the serve rules in force: sizes
 * below and above the rules' bound, in place and not. */
static void serve_suite(MPI_Comm comm, const char *cname)
{
    const laysel_t sels[] = {{NULL, 1, "mixed: 4 x MPI_INT / contiguous(4) / vector(4)"},
                             {NULL, 2, "mixed: 4 x MPI_INT / vector(4)"}};
    const int ks[] = {0, 1, 5, 31, 32, 40, 64, 300};

    for (size_t i = 0; i < sizeof(sels) / sizeof(sels[0]); i++)
        for (size_t k = 0; k < sizeof(ks) / sizeof(ks[0]); k++)
            for (int ip = 0; ip <= 1; ip++) {
                t_uniform(comm, cname, 1, &sels[i], ks[k], ip, (int)(i + k));
                t_uniform(comm, cname, 0, &sels[i], ks[k], ip, (int)(i + k));
            }
}

static unsigned long long mpi_calls(const arcoll_mpi_stats_t *s)
{
    return s->allreduce_mpi + s->alltoall_mpi + s->allgather_mpi + s->iallreduce_mpi +
           s->ialltoall_mpi + s->iallgather_mpi;
}

static unsigned long long arcoll_calls(const arcoll_mpi_stats_t *s)
{
    return s->allreduce_arcoll + s->alltoall_arcoll + s->allgather_arcoll + s->iallreduce_arcoll +
           s->ialltoall_arcoll + s->iallgather_arcoll;
}

/* latefail: ARCOLL_TIMEOUT_MS + 1 s asleep. */
static void late(void)
{
    const char *ms = getenv("ARCOLL_TIMEOUT_MS");
    long t = (ms != NULL ? strtol(ms, NULL, 10) : 60000) + 1000;
    struct timespec d = {t / 1000, (t % 1000) * 1000000L};

    nanosleep(&d, NULL);
}

/* Calls of the communicator's error handler (mode ifail). */
static int handled;

static void count_error(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    (void)code;
    handled++;
}

/* The end of a nonblocking call started with status rc: its wait, then a
 * barrier of MPI's own. The first error of the two. */
static int nb_end(MPI_Comm comm, MPI_Request *req, int rc)
{
    int wrc = MPI_Wait(req, MPI_STATUS_IGNORE);

    MPI_Barrier(comm);
    return rc != MPI_SUCCESS ? rc : wrc;
}

/* Mode nbfail: a barrier of MPI's own between the start and the wait. On a
 * rank that saw the failure, a start that waited for the others' word would
 * hang here: they give it when their own call times out, in their wait,
 * after the barrier. */
static int nb_barrier_end(MPI_Comm comm, MPI_Request *req, int rc)
{
    int wrc;

    MPI_Barrier(comm);
    wrc = MPI_Wait(req, MPI_STATUS_IGNORE);
    return rc != MPI_SUCCESS ? rc : wrc;
}

/* Call i of a series after a failure: allreduce, alltoall or allgather,
 * against PMPI; nonblocking in mode ifail, and in mode nbfail after the
 * failing call. *rc: the shim's status. Data compared only on success. */
static int fail_call(MPI_Comm comm, int i, int *rc)
{
    enum { K = 40 };
    int me, n, v[K], r[K * 8], ref[K * 8], nb = mode == MODE_IFAIL || nb_after;
    int (*end)(MPI_Comm, MPI_Request *, int) = nb_after ? nb_barrier_end : nb_end;
    MPI_Request req = MPI_REQUEST_NULL;

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    for (int k = 0; k < K; k++)
        v[k] = me * 1000 + k * 7 + i;
    memset(r, 0, sizeof(r));
    memset(ref, 0, sizeof(ref));
    switch (i % 3) {
    case 0:
        *rc = nb ? end(comm, &req, MPI_Iallreduce(v, r, K, MPI_INT, MPI_SUM, comm, &req))
                 : MPI_Allreduce(v, r, K, MPI_INT, MPI_SUM, comm);
        PMPI_Allreduce(v, ref, K, MPI_INT, MPI_SUM, comm);
        break;
    case 1:
        *rc = nb ? end(comm, &req, MPI_Ialltoall(v, K / n, MPI_INT, r, K / n, MPI_INT, comm, &req))
                 : MPI_Alltoall(v, K / n, MPI_INT, r, K / n, MPI_INT, comm);
        PMPI_Alltoall(v, K / n, MPI_INT, ref, K / n, MPI_INT, comm);
        break;
    default:
        *rc = nb ? end(comm, &req, MPI_Iallgather(v, 5, MPI_INT, r, 5, MPI_INT, comm, &req))
                 : MPI_Allgather(v, 5, MPI_INT, r, 5, MPI_INT, comm);
        PMPI_Allgather(v, 5, MPI_INT, ref, 5, MPI_INT, comm);
        break;
    }
    if (mode == MODE_LATEFAIL)
        MPI_Barrier(comm);
    return *rc != MPI_SUCCESS || memcmp(r, ref, sizeof(r)) == 0;
}

/*
 * The failing call (mismatch: counts that differ across ranks, erroneous MPI
 * that arcoll reports; else the fault hook's), then calls until one
 * succeeds (at most one more may fail: a rank that completed the failing
 * call learns of the failure in the next), then 100 that must give PMPI's
 * data and go to PMPI, with the failure agreed once.
 */
static void t_failure(MPI_Comm comm, const char *cname, int mismatch)
{
    arcoll_mpi_stats_t s0, s1;
    int me, rc, bad = 0, v[8] = {0}, r[8], next = 0, seen = handled;
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Errhandler eh;
    char detail[256];

    MPI_Comm_rank(comm, &me);
    MPI_Comm_create_errhandler(count_error, &eh);
    MPI_Comm_set_errhandler(comm, mode == MODE_IFAIL ? eh : MPI_ERRORS_RETURN);
    MPI_Errhandler_free(&eh);
    stats(&s0);
    if (mismatch && mode == MODE_IFAIL)
        rc =
            nb_end(comm, &req, MPI_Iallreduce(v, r, me == 0 ? 3 : 4, MPI_INT, MPI_SUM, comm, &req));
    else if (mismatch)
        rc = MPI_Allreduce(v, r, me == 0 ? 3 : 4, MPI_INT, MPI_SUM, comm);
    else
        fail_call(comm, 0, &rc);
    if (mode == MODE_LATEFAIL && wrank == 1 && !mismatch)
        late();
    nb_after = mode == MODE_NBFAIL;
    snprintf(detail, sizeof(detail), "%s: the failing call (%s) returned %d", cname,
             mismatch ? "counts differ" : "ARCOLL_MPI_FAULT=(i)coll_fail", rc);
    /* The mismatch fails every rank; the fault hook world rank 1 only. */
    verdict(mismatch || wrank == 1 ? rc != MPI_SUCCESS : 1, "no error", detail);
    for (int tries = 0; tries < 2; tries++, next++) {
        bad += !fail_call(comm, next, &rc);
        if (rc == MPI_SUCCESS)
            break;
    }
    /* ifail: every failed call went through the error handler (and only
     * those: a failure raised once). */
    if (mode == MODE_IFAIL) {
        snprintf(detail, sizeof(detail), "%s: error handler called %d times for %d failed calls",
                 cname, handled - seen, next + (mismatch || wrank == 1));
        verdict(handled - seen == next + (mismatch || wrank == 1),
                "errors not reported through the error handler", detail);
    }
    snprintf(detail, sizeof(detail), "%s: the call after the failing one returned %d", cname, rc);
    verdict(rc == MPI_SUCCESS, "a second call failed", detail);
    stats(&s1);
    for (int i = 0; i < 100; i++) {
        bad += !fail_call(comm, ++next, &rc);
        bad += rc != MPI_SUCCESS;
    }
    stats(&s0);
    snprintf(detail, sizeof(detail), "%s: %d of 100 calls after the failure wrong", cname, bad);
    verdict(bad == 0, "data differs from PMPI", detail);
    snprintf(detail, sizeof(detail), "%s: %llu of 100 calls to MPI, %llu to arcoll, %llu failed",
             cname, mpi_calls(&s0) - mpi_calls(&s1), arcoll_calls(&s0) - arcoll_calls(&s1),
             s0.comms_failed);
    verdict(mpi_calls(&s0) - mpi_calls(&s1) == 100 && arcoll_calls(&s0) == arcoll_calls(&s1),
            "not handed to MPI", detail);
    nb_after = 0;
}

static void fail_suite(void)
{
    arcoll_mpi_stats_t s;
    MPI_Comm dup;
    char detail[128];

    /* A dup (a split team) first: the fault hook fails MPI_COMM_WORLD's. */
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_name(dup, "dup_of_world");
    t_failure(dup, "dup_of_world", 1);
    MPI_Comm_free(&dup);
    t_failure(MPI_COMM_WORLD, "MPI_COMM_WORLD", 0);
    /* A communicator made from the failed one uses PMPI, and so does one made
     * from it (a context of its own each would outlive them: tests/mpi/soak.sh). */
    MPI_Comm_split(MPI_COMM_WORLD, 0, wrank, &dup);
    all_passed = 1;
    data_suite(dup, "split of the failed MPI_COMM_WORLD");
    {
        MPI_Comm dd;
        MPI_Comm_dup(dup, &dd);
        data_suite(dd, "dup of a split of the failed MPI_COMM_WORLD");
        MPI_Comm_free(&dd);
    }
    all_passed = 0;
    MPI_Comm_free(&dup);
    stats(&s);
    snprintf(detail, sizeof(detail), "%llu communicators failed", s.comms_failed);
    verdict(s.comms_failed == 2, "failures not agreed", detail);
}

static void suite(MPI_Comm comm, const char *cname)
{
    data_suite(comm, cname);
    reduce_suite(comm, cname);
    t_inflight(comm, cname);
    for (int how = 0; how < 4; how++)
        t_nonblocking(comm, cname, how);
    t_passthrough(comm, cname);
    t_request_free(comm, cname);
}

int main(int argc, char **argv)
{
    const char *mname = argc > 1 ? argv[1] : "shim";
    MPI_Comm split;
    long sums[2];

    mode = strcmp(mname, "plain") == 0      ? MODE_PLAIN
           : strcmp(mname, "serve") == 0    ? MODE_SERVE
           : strcmp(mname, "fail") == 0     ? MODE_FAIL
           : strcmp(mname, "ifail") == 0    ? MODE_IFAIL
           : strcmp(mname, "latefail") == 0 ? MODE_LATEFAIL
           : strcmp(mname, "nbfail") == 0   ? MODE_NBFAIL
                                            : MODE_SHIM;
    if (getenv("SHIM_TEST_MPI_BELOW") != NULL)
        mpi_below = strtol(getenv("SHIM_TEST_MPI_BELOW"), NULL, 0);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    snprintf(prefix, sizeof(prefix), "shim_coll_test rank %d", wrank);
    stats_fn = (arcoll_mpi_stats_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "arcoll_mpi_stats");
    if (getenv("SHIM_TEST_ALLREDUCE_MPI_BELOW") != NULL)
        allreduce_mpi_below = strtol(getenv("SHIM_TEST_ALLREDUCE_MPI_BELOW"), NULL, 0);
    if (mode != MODE_PLAIN && stats_fn == NULL) {
        if (wrank == 0)
            fprintf(stderr, "shim_coll_test: libarcoll_mpi.so is not loaded (LD_PRELOAD it)\n");
        MPI_Finalize();
        return 1;
    }
    lays_init();
    if (mode == MODE_SERVE) {
        serve_suite(MPI_COMM_WORLD, "MPI_COMM_WORLD");
        MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, &split);
        serve_suite(split, "split(0, reversed)");
        MPI_Comm_free(&split);
    } else if (mode == MODE_FAIL || mode == MODE_IFAIL || mode == MODE_LATEFAIL ||
               mode == MODE_NBFAIL) {
        fail_suite();
    } else {
        suite(MPI_COMM_WORLD, "MPI_COMM_WORLD");
        /* Reversed order, odd sizes: a communicator of its own context. */
        MPI_Comm_split(MPI_COMM_WORLD, wrank % 3 == 1, wsize - wrank, &split);
        suite(split, "split(rank % 3 == 1, reversed)");
        MPI_Comm_free(&split);
    }

    MPI_Type_free(&contig4);
    MPI_Type_free(&vec4);
    MPI_Type_free(&contig3);
    MPI_Type_free(&vec2);
    sums[0] = tally.passed;
    sums[1] = tally.failed;
    PMPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0)
        printf("shim_coll_test on %d ranks (%s): %ld passed, %ld failed\n", wsize, mname, sums[0],
               sums[1]);
    MPI_Finalize();
    return sums[1] == 0 ? 0 : 1;
}
