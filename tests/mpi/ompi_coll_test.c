/*
 * An ordinary MPI program (it does not link arcoll) that checks the Open MPI
 * component mca_coll_arcoll.so when mpirun loads it (tests/mpi/run.sh):
 *
 *   ompi_coll_test MODE [CYCLES]
 *     arcoll  the component must be loaded and serve every call it can
 *     plain   loaded, any serve rules: data checks only
 *     off     it must not be loaded (its release check refused it): the
 *             same calls, all on Open MPI's own components
 *     multiple  MPI_THREAD_MULTIPLE: the same calls, served (counted; a
 *             context per communicator, no team split), then 2 and then 4
 *             threads at once, each with a dup of MPI_COMM_WORLD of its own,
 *             each running every served collective, blocking and
 *             nonblocking, at several sizes (one over 64 KiB: zero-copy),
 *             results checked; the counters must show them all on arcoll
 *     mtfail  MPI_THREAD_MULTIPLE, run with ARCOLL_MPI_FAULT=coll_fail: one
 *             thread's dup (named "arcoll-fault") has its first served call
 *             fail on world rank 1 while another thread runs every served
 *             collective on its own dup (threads_fail)
 *
 * Every served collective (alltoall, allgather, alltoallv, allgatherv,
 * reduce_scatter_block, allreduce and their nonblocking forms) on
 * MPI_COMM_WORLD, a split (reversed keys) and a dup, MPI_IN_PLACE, six
 * nonblocking calls in flight completed in reverse order, each result against
 * the values it computes; fallback consistency: datatypes that differ across
 * ranks for one type signature, a user op, an intercommunicator; CYCLES
 * (default 1000) dup/allreduce/free cycles with nothing left (teams freed,
 * contexts alive unchanged, the same open descriptors and names of arcoll's in
 * /dev/shm after as after the first ten). Calls must show in the component's counters
 * (arcoll_mpi_stats, found with dlsym as tests/mpi/shim_test.c does).
 * Last line on rank 0: "ompi_coll_test on N ranks (MODE): P passed, F failed".
 */
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arcoll_mpi.h"
#include "tl.h"

static int wrank, wsize;
static _Atomic long passed, failed; /* mode multiple: two threads check */
static arcoll_mpi_stats_fn stats_fn;
static int counted; /* mode arcoll: the counters must show every call */

static void check(int ok, const char *what, const char *comm)
{
    if (ok) {
        passed++;
        return;
    }
    if (failed++ < 10)
        fprintf(stderr, "ompi_coll_test[%d]: FAIL %s on %s\n", wrank, what, comm);
}

static arcoll_mpi_stats_t stats(void)
{
    arcoll_mpi_stats_t s;

    memset(&s, 0, sizeof(s));
    if (stats_fn != NULL)
        stats_fn(&s);
    return s;
}

/* Element k of the block rank `from` sends rank `to` (or of the block `to` stands for):
 * tests/lib's pattern (tl.h), a word of it. */
static int val(int from, int to, int k)
{
    return (int)tl_word(0, from, to, (size_t)k);
}

static void blocking(MPI_Comm comm, const char *name)
{
    int me, n, k = 5;

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int *s = malloc(sizeof(int) * (size_t)(n * k * 2)),
        *r = malloc(sizeof(int) * (size_t)(n * k * 2));
    int *sc = malloc(sizeof(int) * (size_t)n), *sd = malloc(sizeof(int) * (size_t)n);
    int *rc = malloc(sizeof(int) * (size_t)n), *rd = malloc(sizeof(int) * (size_t)n);
    int ok = 1;

    /* alltoall */
    for (int j = 0; j < n; j++)
        for (int i = 0; i < k; i++)
            s[j * k + i] = val(me, j, i);
    MPI_Alltoall(s, k, MPI_INT, r, k, MPI_INT, comm);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < k; i++)
            ok &= r[j * k + i] == val(j, me, i);
    check(ok, "MPI_Alltoall", name);
    /* in place */
    for (int j = 0; j < n; j++)
        for (int i = 0; i < k; i++)
            r[j * k + i] = val(me, j, i);
    MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, k, MPI_INT, comm);
    ok = 1;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < k; i++)
            ok &= r[j * k + i] == val(j, me, i);
    check(ok, "MPI_Alltoall in place", name);
    /* allgather, then in place */
    for (int i = 0; i < k; i++)
        s[i] = val(me, 0, i);
    MPI_Allgather(s, k, MPI_INT, r, k, MPI_INT, comm);
    ok = 1;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < k; i++)
            ok &= r[j * k + i] == val(j, 0, i);
    check(ok, "MPI_Allgather", name);
    memset(r, 0, sizeof(int) * (size_t)(n * k));
    for (int i = 0; i < k; i++)
        r[me * k + i] = val(me, 1, i);
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, k, MPI_INT, comm);
    ok = 1;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < k; i++)
            ok &= r[j * k + i] == val(j, 1, i);
    check(ok, "MPI_Allgather in place", name);
    /* alltoallv: rank j gets j + 1 elements from each, packed */
    for (int j = 0, off = 0; j < n; j++) {
        sc[j] = j + 1;
        sd[j] = off;
        for (int i = 0; i < j + 1; i++)
            s[off + i] = val(me, j, i);
        off += j + 1;
        rc[j] = me + 1;
        rd[j] = j * (me + 1);
    }
    MPI_Alltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, comm);
    ok = 1;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < me + 1; i++)
            ok &= r[rd[j] + i] == val(j, me, i);
    check(ok, "MPI_Alltoallv", name);
    /* allgatherv: rank j contributes j + 1 elements */
    for (int j = 0, off = 0; j < n; j++) {
        rc[j] = j + 1;
        rd[j] = off;
        off += j + 1;
    }
    for (int i = 0; i < me + 1; i++)
        s[i] = val(me, 2, i);
    MPI_Allgatherv(s, me + 1, MPI_INT, r, rc, rd, MPI_INT, comm);
    ok = 1;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < j + 1; i++)
            ok &= r[rd[j] + i] == val(j, 2, i);
    check(ok, "MPI_Allgatherv", name);
    /* reduce_scatter_block: block j of the sum is sum over ranks of val(rank, j, i) */
    for (int j = 0; j < n; j++)
        for (int i = 0; i < k; i++)
            s[j * k + i] = val(me, j, i) % 977;
    MPI_Reduce_scatter_block(s, r, k, MPI_INT, MPI_SUM, comm);
    ok = 1;
    for (int i = 0; i < k; i++) {
        int want = 0;
        for (int f = 0; f < n; f++)
            want += val(f, me, i) % 977;
        ok &= r[i] == want;
    }
    check(ok, "MPI_Reduce_scatter_block", name);
    /* allreduce: doubles (sum), ints (max, in place) */
    double d[7], dr[7];
    for (int i = 0; i < 7; i++)
        d[i] = me + i * 0.5;
    MPI_Allreduce(d, dr, 7, MPI_DOUBLE, MPI_SUM, comm);
    ok = 1;
    for (int i = 0; i < 7; i++)
        ok &= dr[i] == (double)n * (n - 1) / 2 + n * i * 0.5;
    check(ok, "MPI_Allreduce", name);
    for (int i = 0; i < k; i++)
        r[i] = me * 10 + i;
    MPI_Allreduce(MPI_IN_PLACE, r, k, MPI_INT, MPI_MAX, comm);
    ok = 1;
    for (int i = 0; i < k; i++)
        ok &= r[i] == (n - 1) * 10 + i;
    check(ok, "MPI_Allreduce in place", name);
    free(s);
    free(r);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
}

/* Six nonblocking calls in flight, completed last first. */
static void nonblocking(MPI_Comm comm, const char *name)
{
    enum { K = 4 };
    int me, n;

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int *a2s = malloc(sizeof(int) * (size_t)(n * K)), *a2r = malloc(sizeof(int) * (size_t)(n * K));
    int *ags = malloc(sizeof(int) * K), *agr = malloc(sizeof(int) * (size_t)(n * K));
    int *vs = malloc(sizeof(int) * (size_t)(n * K)), *vr = malloc(sizeof(int) * (size_t)(n * K));
    int *cnt = malloc(sizeof(int) * (size_t)n), *dsp = malloc(sizeof(int) * (size_t)n);
    int *gvr = malloc(sizeof(int) * (size_t)(n * K)), *rss = malloc(sizeof(int) * (size_t)(n * K));
    int rsr[K], ars[K], arr[K], ok;
    MPI_Request q[6];

    for (int j = 0; j < n; j++) {
        cnt[j] = K;
        dsp[j] = j * K;
        for (int i = 0; i < K; i++) {
            a2s[j * K + i] = val(me, j, i);
            vs[j * K + i] = val(me, j, i + 7);
            rss[j * K + i] = j + i + me;
        }
    }
    for (int i = 0; i < K; i++) {
        ags[i] = val(me, 3, i);
        ars[i] = me + i;
    }
    MPI_Ialltoall(a2s, K, MPI_INT, a2r, K, MPI_INT, comm, &q[0]);
    MPI_Iallgather(ags, K, MPI_INT, agr, K, MPI_INT, comm, &q[1]);
    MPI_Ialltoallv(vs, cnt, dsp, MPI_INT, vr, cnt, dsp, MPI_INT, comm, &q[2]);
    MPI_Iallgatherv(ags, K, MPI_INT, gvr, cnt, dsp, MPI_INT, comm, &q[3]);
    MPI_Ireduce_scatter_block(rss, rsr, K, MPI_INT, MPI_SUM, comm, &q[4]);
    MPI_Iallreduce(ars, arr, K, MPI_INT, MPI_SUM, comm, &q[5]);
    for (int i = 5; i >= 0; i--)
        MPI_Wait(&q[i], MPI_STATUS_IGNORE);
    ok = 1;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < K; i++)
            ok &= a2r[j * K + i] == val(j, me, i) && agr[j * K + i] == val(j, 3, i) &&
                  vr[j * K + i] == val(j, me, i + 7) && gvr[j * K + i] == val(j, 3, i);
    for (int i = 0; i < K; i++)
        ok &= rsr[i] == n * (me + i) + n * (n - 1) / 2 && arr[i] == n * i + n * (n - 1) / 2;
    check(ok, "six nonblocking calls, completed in reverse", name);
    free(a2s);
    free(a2r);
    free(ags);
    free(agr);
    free(vs);
    free(vr);
    free(cnt);
    free(dsp);
    free(gvr);
    free(rss);
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *t)
{
    (void)t;
    for (int i = 0; i < *len; i++)
        ((int *)inout)[i] += ((int *)in)[i];
}

/* Calls the component must hand to Open MPI, or serve whatever each rank's
 * datatype: every rank must choose alike or the job hangs. */
static void fallbacks(void)
{
    arcoll_mpi_stats_t a = stats(), b;
    int v[4], r[64 * 4], x = wrank + 1, y = 0, ok = 1;
    MPI_Datatype four;
    MPI_Op op;
    MPI_Comm inter, half;

    /* One type signature, two descriptions: 4 x MPI_INT on rank 0, one
     * contiguous type of 4 ints elsewhere. */
    MPI_Type_contiguous(4, MPI_INT, &four);
    MPI_Type_commit(&four);
    for (int i = 0; i < 4; i++)
        v[i] = val(wrank, 4, i);
    if (wrank == 0)
        MPI_Allgather(v, 4, MPI_INT, r, 4, MPI_INT, MPI_COMM_WORLD);
    else
        MPI_Allgather(v, 1, four, r, 1, four, MPI_COMM_WORLD);
    for (int j = 0; j < wsize && wsize <= 64; j++)
        for (int i = 0; i < 4; i++)
            ok &= r[j * 4 + i] == val(j, 4, i);
    check(ok, "MPI_Allgather, datatypes differing across ranks", "world");
    MPI_Type_free(&four);
    /* A user op: Open MPI's reduction, on every rank. */
    MPI_Op_create(user_sum, 1, &op);
    MPI_Allreduce(&x, &y, 1, MPI_INT, op, MPI_COMM_WORLD);
    check(y == wsize * (wsize + 1) / 2, "MPI_Allreduce, user op", "world");
    MPI_Op_free(&op);
    b = stats();
    if (counted)
        check(b.allreduce_mpi == a.allreduce_mpi + 1 &&
                  b.allgather_arcoll == a.allgather_arcoll + 1,
              "counters: user op to Open MPI, mixed datatypes on arcoll", "world");
    /* An intercommunicator between the even and the odd ranks. */
    if (wsize >= 2) {
        MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &half);
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, wrank % 2 == 0 ? 1 : 0, 7, &inter);
        x = 1;
        MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, inter);
        check(y == (wrank % 2 == 0 ? wsize / 2 : (wsize + 1) / 2), "MPI_Allreduce", "intercomm");
        MPI_Comm_free(&inter);
        MPI_Comm_free(&half);
    }
}

/*
 * Mode multiple: the six served collectives at `count` elements per block,
 * blocking or all six in flight at once (nb); values offset by the thread
 * (tag), so that data crossing from another thread's communicator shows.
 * The v-forms send rank j count - j % 3 elements.
 */
static void sized(MPI_Comm comm, int count, int nb, int tag)
{
    int me, n, ok = 1;

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    size_t all = (size_t)n * (size_t)count;
    int *a2s = malloc(sizeof(int) * all), *a2r = malloc(sizeof(int) * all);
    int *ags = malloc(sizeof(int) * (size_t)count), *agr = malloc(sizeof(int) * all);
    int *vs = malloc(sizeof(int) * all), *vr = malloc(sizeof(int) * all);
    int *gvr = malloc(sizeof(int) * all), *rss = malloc(sizeof(int) * all);
    int *rsr = malloc(sizeof(int) * (size_t)count), *ars = malloc(sizeof(int) * (size_t)count);
    int *arr = malloc(sizeof(int) * (size_t)count);
    int *sc = malloc(sizeof(int) * (size_t)n), *sd = malloc(sizeof(int) * (size_t)n);
    int *rc = malloc(sizeof(int) * (size_t)n), *rd = malloc(sizeof(int) * (size_t)n);
    int *gc = malloc(sizeof(int) * (size_t)n), *gd = malloc(sizeof(int) * (size_t)n);
    int mine = count - me % 3, k0 = 1000000 * tag;
    MPI_Request q[6];

    for (int j = 0, so = 0, ro = 0, go = 0; j < n; j++) {
        sc[j] = count - j % 3;
        sd[j] = so;
        rc[j] = mine;
        rd[j] = ro;
        gc[j] = count - j % 3;
        gd[j] = go;
        for (int i = 0; i < sc[j]; i++)
            vs[so + i] = val(me, j, k0 + i + 7);
        so += sc[j];
        ro += rc[j];
        go += gc[j];
        for (int i = 0; i < count; i++) {
            a2s[j * count + i] = val(me, j, k0 + i);
            rss[j * count + i] = val(me, j, k0 + i) % 977;
        }
    }
    for (int i = 0; i < count; i++) {
        ags[i] = val(me, 3, k0 + i);
        ars[i] = val(me, 6, k0 + i) % 1000;
    }
    if (nb) {
        MPI_Ialltoall(a2s, count, MPI_INT, a2r, count, MPI_INT, comm, &q[0]);
        MPI_Iallgather(ags, count, MPI_INT, agr, count, MPI_INT, comm, &q[1]);
        MPI_Ialltoallv(vs, sc, sd, MPI_INT, vr, rc, rd, MPI_INT, comm, &q[2]);
        MPI_Iallgatherv(ags, mine, MPI_INT, gvr, gc, gd, MPI_INT, comm, &q[3]);
        MPI_Ireduce_scatter_block(rss, rsr, count, MPI_INT, MPI_SUM, comm, &q[4]);
        MPI_Iallreduce(ars, arr, count, MPI_INT, MPI_SUM, comm, &q[5]);
        MPI_Waitall(6, q, MPI_STATUSES_IGNORE);
    } else {
        MPI_Alltoall(a2s, count, MPI_INT, a2r, count, MPI_INT, comm);
        MPI_Allgather(ags, count, MPI_INT, agr, count, MPI_INT, comm);
        MPI_Alltoallv(vs, sc, sd, MPI_INT, vr, rc, rd, MPI_INT, comm);
        MPI_Allgatherv(ags, mine, MPI_INT, gvr, gc, gd, MPI_INT, comm);
        MPI_Reduce_scatter_block(rss, rsr, count, MPI_INT, MPI_SUM, comm);
        MPI_Allreduce(ars, arr, count, MPI_INT, MPI_SUM, comm);
    }
    for (int j = 0; j < n; j++) {
        for (int i = 0; i < count; i++)
            ok &=
                a2r[j * count + i] == val(j, me, k0 + i) && agr[j * count + i] == val(j, 3, k0 + i);
        for (int i = 0; i < mine; i++)
            ok &= vr[rd[j] + i] == val(j, me, k0 + i + 7);
        for (int i = 0; i < gc[j]; i++)
            ok &= gvr[gd[j] + i] == val(j, 3, k0 + i);
    }
    for (int i = 0; i < count; i++) {
        int rs = 0, ar = 0;
        for (int f = 0; f < n; f++) {
            rs += val(f, me, k0 + i) % 977;
            ar += val(f, 6, k0 + i) % 1000;
        }
        ok &= rsr[i] == rs && arr[i] == ar;
    }
    check(ok, nb ? "six nonblocking calls at once, sized" : "six blocking calls, sized",
          "thread dup");
    free(a2s);
    free(a2r);
    free(ags);
    free(agr);
    free(vs);
    free(vr);
    free(gvr);
    free(rss);
    free(rsr);
    free(ars);
    free(arr);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(gc);
    free(gd);
}

/* Mode multiple: rounds of every served collective per thread, at three
 * sizes (20000 ints: 80000 bytes per block, above arcoll's zero-copy
 * threshold). blocking() and nonblocking() add 10 blocking and 6 nonblocking
 * calls per round. */
enum { MT_ROUNDS = 3, MT_NSIZES = 3 };
static const int mt_sizes[MT_NSIZES] = {3, 1500, 20000};

typedef struct mt_arg {
    MPI_Comm comm;
    int tag;
} mt_arg_t;

static void *thread_main(void *arg)
{
    const mt_arg_t *a = arg;
    MPI_Comm sub;

    for (int r = 0; r < MT_ROUNDS; r++) {
        blocking(a->comm, "thread dup");
        nonblocking(a->comm, "thread dup");
        for (int z = 0; z < MT_NSIZES; z++) {
            sized(a->comm, mt_sizes[z], r % 2, a->tag);
            sized(a->comm, mt_sizes[z], !(r % 2), a->tag);
        }
    }
    /* A communicator made and freed while the other threads run theirs: Open
     * MPI may run its creation's steps in any thread's progress. */
    MPI_Comm_dup(a->comm, &sub);
    blocking(sub, "dup in a thread");
    sized(sub, mt_sizes[MT_NSIZES - 1], 1, a->tag);
    MPI_Comm_free(&sub);
    return NULL;
}

/* Mode multiple: nt threads at once, a dup each (made before and freed after
 * them, in the main thread), and one more that each makes and frees of its
 * own; every call on arcoll, each dup with a context of its own, all freed
 * with it. */
static void threads(int nt)
{
    enum { MAXT = 8 };
    MPI_Comm c[MAXT];
    pthread_t t[MAXT];
    mt_arg_t a[MAXT];
    arcoll_mpi_stats_t s0, s1, s2;
    char what[96];
    int made = 0;

    for (int i = 0; i < nt; i++)
        MPI_Comm_dup(MPI_COMM_WORLD, &c[i]);
    s0 = stats();
    for (int i = 0; i < nt; i++) {
        a[i].comm = c[i];
        a[i].tag = i + 1;
        made += pthread_create(&t[i], NULL, thread_main, &a[i]) == 0;
    }
    check(made == nt, "pthread_create", "-");
    for (int i = 0; i < made; i++)
        pthread_join(t[i], NULL);
    s1 = stats();
    for (int i = 0; i < nt; i++)
        MPI_Comm_free(&c[i]);
    s2 = stats();
    if (made != nt)
        return;
    /* Per thread and round: blocking() 2, 2, 1, 1, 1, 2 (alltoall, allgather,
     * alltoallv, allgatherv, reduce_scatter_block, allreduce), nonblocking()
     * one each, sized() one of each form per size (the dup in the thread:
     * more). */
    unsigned long long r = (unsigned long long)nt * MT_ROUNDS, z = MT_NSIZES;
    snprintf(what, sizeof(what), "counters: %d threads' calls on arcoll", nt);
    check(s1.alltoall_arcoll - s0.alltoall_arcoll >= r * (2 + z) &&
              s1.allgather_arcoll - s0.allgather_arcoll >= r * (2 + z) &&
              s1.alltoallv_arcoll - s0.alltoallv_arcoll >= r * (1 + z) &&
              s1.allgatherv_arcoll - s0.allgatherv_arcoll >= r * (1 + z) &&
              s1.reduce_scatter_block_arcoll - s0.reduce_scatter_block_arcoll >= r * (1 + z) &&
              s1.allreduce_arcoll - s0.allreduce_arcoll >= r * (2 + z) &&
              s1.ialltoall_arcoll - s0.ialltoall_arcoll >= r * (1 + z) &&
              s1.iallgather_arcoll - s0.iallgather_arcoll >= r * (1 + z) &&
              s1.ialltoallv_arcoll - s0.ialltoallv_arcoll >= r * (1 + z) &&
              s1.iallgatherv_arcoll - s0.iallgatherv_arcoll >= r * (1 + z) &&
              s1.ireduce_scatter_block_arcoll - s0.ireduce_scatter_block_arcoll >= r * (1 + z) &&
              s1.iallreduce_arcoll - s0.iallreduce_arcoll >= r * (1 + z) &&
              s1.allreduce_mpi == s0.allreduce_mpi && s1.alltoall_mpi == s0.alltoall_mpi &&
              s1.errors == s0.errors,
          what, "thread dups");
    snprintf(what, sizeof(what), "counters: %d dups and theirs, a context each, all freed", nt);
    check(s1.comms_arcoll - s0.comms_arcoll == 2 * (unsigned long long)nt &&
              s1.contexts - s0.contexts == 2 * (unsigned long long)nt &&
              s1.comms_split == s0.comms_split && s2.contexts_live == s0.contexts_live &&
              s2.comms_freed - s0.comms_freed == 2 * (unsigned long long)nt,
          what, "thread dups");
}

/* Mode mtfail: the fault thread's dup, named "arcoll-fault" (ARCOLL_MPI_FAULT=
 * coll_fail takes that communicator's first served call on world rank 1 as
 * failed). MPI_ERRORS_RETURN: that call fails on rank 1, and at most one more
 * on each rank while they agree; every other call's data is right, the calls
 * after the agreement on MPI. */
static void *fault_thread(void *arg)
{
    const mt_arg_t *a = arg;
    enum { K = 4, CALLS = 40 };
    int *sb = malloc(sizeof(int) * K * (size_t)wsize),
        *rb = malloc(sizeof(int) * K * (size_t)wsize);
    int errs = 0, bad = 0;
    char what[160];

    MPI_Comm_set_errhandler(a->comm, MPI_ERRORS_RETURN);
    for (int i = 0; i < CALLS && sb != NULL && rb != NULL; i++) {
        for (int j = 0; j < K * wsize; j++)
            sb[j] = wrank * 100000 + i * 100 + j;
        memset(rb, 0xff, sizeof(int) * K * (size_t)wsize);
        if (MPI_Alltoall(sb, K, MPI_INT, rb, K, MPI_INT, a->comm) != MPI_SUCCESS) {
            errs++;
            continue;
        }
        for (int j = 0; j < wsize; j++)
            for (int k = 0; k < K; k++)
                bad += rb[j * K + k] != j * 100000 + i * 100 + wrank * K + k;
    }
    /* Rank 1's failed call, and at most one more while the ranks agree (the
     * shim's rule, docs/reliability.md "The PMPI shim after a failure"). */
    snprintf(what, sizeof(what),
             "the failed communicator: %d failed calls (1-2 on rank 1, at most "
             "1 elsewhere), %d wrong ints",
             errs, bad);
    check(sb != NULL && rb != NULL && errs >= (wrank == 1) && errs <= 1 + (wrank == 1) && bad == 0,
          what, "fault dup");
    free(rb);
    free(sb);
    return NULL;
}

/* Mode mtfail: a served call fails on one thread's communicator while another
 * thread runs every served collective on its own: the failure stays on its
 * communicator (agreed by its ranks, later calls on MPI), the other's calls
 * all right and on arcoll, nothing hangs (docs/reliability.md). */
static void threads_fail(void)
{
    MPI_Comm c[2];
    pthread_t t[2];
    mt_arg_t a[2];
    arcoll_mpi_stats_t s0, s1;
    int made = 0;

    for (int i = 0; i < 2; i++)
        MPI_Comm_dup(MPI_COMM_WORLD, &c[i]);
    MPI_Comm_set_name(c[0], "arcoll-fault");
    s0 = stats();
    for (int i = 0; i < 2; i++) {
        a[i].comm = c[i];
        a[i].tag = i + 1;
        made += pthread_create(&t[i], NULL, i == 0 ? fault_thread : thread_main, &a[i]) == 0;
    }
    check(made == 2, "pthread_create", "-");
    for (int i = 0; i < made; i++)
        pthread_join(t[i], NULL);
    s1 = stats();
    for (int i = 0; i < 2; i++)
        MPI_Comm_free(&c[i]);
    /* The healthy thread's blocking allreduces all on arcoll; the failed
     * communicator's alltoalls after the agreement on MPI. */
    check(s1.alltoall_mpi > s0.alltoall_mpi &&
              s1.allreduce_arcoll - s0.allreduce_arcoll >= (unsigned long long)MT_ROUNDS * 2,
          "counters: the failed communicator on MPI, the other on arcoll", "thread dups");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "arcoll";
    long cycles = argc > 2 ? atol(argv[2]) : 1000;
    int want = strcmp(mode, "off") != 0, mtfail = strcmp(mode, "mtfail") == 0,
        multiple = mtfail || strcmp(mode, "multiple") == 0, total[2], mine[2],
        level = MPI_THREAD_SINGLE;
    arcoll_mpi_stats_t s0, s1, s2;
    MPI_Comm split, dup, c;

    if (multiple) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &level);
        check(level == MPI_THREAD_MULTIPLE, "MPI_Init_thread provides MPI_THREAD_MULTIPLE", "-");
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    stats_fn = (arcoll_mpi_stats_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "arcoll_mpi_stats");
    check((stats_fn != NULL) == want,
          want ? "mca_coll_arcoll.so is loaded" : "mca_coll_arcoll.so is not loaded", "-");
    counted = want && strcmp(mode, "plain") != 0;
    s0 = stats();
    blocking(MPI_COMM_WORLD, "world");
    nonblocking(MPI_COMM_WORLD, "world");
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wsize - wrank, &split);
    blocking(split, "split");
    nonblocking(split, "split");
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    blocking(dup, "dup");
    nonblocking(dup, "dup");
    MPI_Comm_free(&dup);
    MPI_Comm_free(&split);
    s1 = stats();
    if (counted) {
        /* Every collective ran on arcoll on each communicator of 2 ranks or
         * more (one of one rank gets no module); Open MPI's own calls in
         * MPI_Comm_split/_dup add some. */
        int ns = 0;
        unsigned long long m;
        MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, 0, &c);
        MPI_Comm_size(c, &ns);
        MPI_Comm_free(&c);
        m = ns >= 2 ? 3 : 2;
        check(s1.alltoall_arcoll - s0.alltoall_arcoll >= 2 * m &&
                  s1.allgather_arcoll - s0.allgather_arcoll >= 2 * m &&
                  s1.alltoallv_arcoll - s0.alltoallv_arcoll >= m &&
                  s1.allgatherv_arcoll - s0.allgatherv_arcoll >= m &&
                  s1.reduce_scatter_block_arcoll - s0.reduce_scatter_block_arcoll >= m &&
                  s1.allreduce_arcoll - s0.allreduce_arcoll >= 2 * m,
              "counters: blocking calls served", "all");
        check(s1.ialltoall_arcoll - s0.ialltoall_arcoll >= m &&
                  s1.iallgather_arcoll - s0.iallgather_arcoll >= m &&
                  s1.ialltoallv_arcoll - s0.ialltoallv_arcoll >= m &&
                  s1.iallgatherv_arcoll - s0.iallgatherv_arcoll >= m &&
                  s1.ireduce_scatter_block_arcoll - s0.ireduce_scatter_block_arcoll >= m &&
                  s1.iallreduce_arcoll - s0.iallreduce_arcoll >= m && s1.requests >= 6 * m,
              "counters: nonblocking calls served", "all");
        if (multiple) /* a context per communicator: no team split from a shared one */
            check(s1.comms_split == 0 && s1.contexts >= m && s1.contexts_freed >= m - 1 &&
                      s1.comms_freed >= m - 1,
                  "counters: a context per communicator, freed with it", "all");
        else
            check(s1.comms_split >= 1 && s1.teams_freed >= m - 1 && s1.comms_freed >= m - 1,
                  "counters: dup shares world's context, teams freed", "all");
    }
    fallbacks();
    /* Communicators made and freed: nothing left behind. */
    s1 = stats();
    long fds = -1, shm = -1;
    for (long i = 0; i < cycles; i++) {
        int one = 1, sum = 0;
        if (i == 10 || (i == 0 && cycles <= 10)) {
            fds = tl_count_dir("/proc/self/fd", NULL);
            shm = tl_count_dir("/dev/shm", "arcoll.");
        }
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c);
        if (sum != wsize)
            check(0, "MPI_Allreduce in a dup/free cycle", "dup");
        MPI_Comm_free(&c);
    }
    s2 = stats();
    if (cycles > 0) {
        long fds2 = tl_count_dir("/proc/self/fd", NULL), shm2 = tl_count_dir("/dev/shm", "arcoll.");
        if (fds2 != fds || shm2 != shm)
            fprintf(stderr,
                    "ompi_coll_test[%d]: descriptors %ld -> %ld, /dev/shm names %ld -> %ld\n",
                    wrank, fds, fds2, shm, shm2);
        check(fds2 == fds && shm2 == shm,
              "dup/free cycles leave descriptors and /dev/shm names as they were", "dup");
    }
    if (counted)
        check(s2.allreduce_arcoll - s1.allreduce_arcoll == (unsigned long long)cycles &&
                  s2.teams_freed - s1.teams_freed == (unsigned long long)cycles &&
                  s2.comms_freed - s1.comms_freed == (unsigned long long)cycles &&
                  s2.contexts_live == s1.contexts_live &&
                  s2.contexts - s1.contexts == (multiple ? (unsigned long long)cycles : 0),
              multiple ? "counters: dup/free cycles on arcoll, a context each, all freed"
                       : "counters: dup/free cycles on arcoll, every team freed, no context made",
              "dup");
    if (mtfail && level == MPI_THREAD_MULTIPLE)
        threads_fail();
    else if (multiple && level == MPI_THREAD_MULTIPLE) {
        threads(2);
        threads(4);
    }
    mine[0] = (int)passed;
    mine[1] = (int)failed;
    MPI_Reduce(mine, total, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (wrank == 0)
        printf("ompi_coll_test on %d ranks (%s): %d passed, %d failed\n", wsize, mode, total[0],
               total[1]);
    MPI_Finalize();
    return failed != 0;
}
