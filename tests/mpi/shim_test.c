/*
 * An ordinary MPI program (it does not link arcoll) that checks the PMPI shim
 * libarcoll_mpi.so when preloaded:
 *
 *   shim_test MODE [MAXBYTES]
 *     shim      the shim must be loaded and must run every eligible call
 *     multiple  MPI_THREAD_MULTIPLE: the shim must hand every call to PMPI
 *     mixed     world rank 1 alone asks MPI_THREAD_MULTIPLE, the others
 *               MPI_THREAD_SINGLE (legal MPI): every rank must hand every
 *               call to PMPI (the shim's choice is agreed at MPI_Init)
 *     plain     no expectation about the shim (data checks only)
 *
 * Every MPI_Alltoall/MPI_Allgather result is compared with PMPI_Alltoall/
 * PMPI_Allgather on the same input (the MPI library itself) and, for plain
 * datatypes, with the pattern each sender wrote, on MPI_COMM_WORLD, a
 * duplicate of it, communicators from MPI_Comm_split with non-contiguous and
 * reversed rank sets, and an intercommunicator; with several datatypes and
 * sizes up to MAXBYTES per block (default 65536); then back-to-back calls
 * under random arrival delays. The shim's counters (arcoll_mpi_stats, found
 * with dlsym) must show which calls arcoll ran: eligible ones in mode shim,
 * none in mode multiple; MPI_IN_PLACE, derived and gapped datatypes and zero
 * bytes run on arcoll too, intercommunicators go to PMPI (shim_coll_test.c
 * checks the other collectives).
 * Last line on rank 0: "shim_test on N ranks (MODE): P passed, F failed".
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arcoll_mpi.h"
#include "tl.h"

enum { ALLTOALL, ALLGATHER };
enum { MODE_SHIM, MODE_MULTIPLE, MODE_PLAIN };

static int mode, wrank, wsize;
/* SHIM_TEST_MPI_BELOW=N: the tuning table's serve rules hand calls of fewer
 * than N bytes per peer to PMPI (the default table: 512 with ranks <= cores). */
static long mpi_below;
static int copies; /* calls of the application's attribute copy callback */
static char prefix[32];
static tl_tally_t tally = {prefix, 0, 0}; /* the first 10 failures printed */
static arcoll_mpi_stats_fn stats_fn;

static void stats(arcoll_mpi_stats_t *s)
{
    memset(s, 0, sizeof(*s));
    if (stats_fn != NULL)
        stats_fn(s);
}

static void verdict(int ok, const char *what, const char *comm, int coll, MPI_Datatype type,
                    int count)
{
    char tname[MPI_MAX_OBJECT_NAME] = "?";
    int len;

    if (!ok)
        MPI_Type_get_name(type, tname, &len);
    tl_expect_max(&tally, 10, ok, "%s: %s %s of %d x %s", what, comm,
                  coll == ALLTOALL ? "MPI_Alltoall" : "MPI_Allgather", count, tname);
}

/* What a call should have done to the shim's counters. */
typedef enum { EXPECT_ARCOLL, EXPECT_PMPI } expect_t;

/*
 * One collective on comm with count elements of type per block, through
 * MPI_* (the shim, if loaded) and through PMPI_* (the reference). plain:
 * type is plain bytes, so the received bytes must be the senders' pattern.
 * in_place: MPI_IN_PLACE as the send buffer.
 */
static void coll_once(const char *cname, MPI_Comm comm, int coll, MPI_Datatype type, int count,
                      int plain, int in_place, expect_t expect, int iter)
{
    arcoll_mpi_stats_t s0, s1;
    MPI_Aint lb, extent;
    int rank, n, inter = 0, rc, ok = 1;

    MPI_Comm_test_inter(comm, &inter);
    MPI_Comm_rank(comm, &rank);
    if (inter)
        MPI_Comm_remote_size(comm, &n);
    else
        MPI_Comm_size(comm, &n);
    MPI_Type_get_extent(type, &lb, &extent);
    size_t blk = (size_t)count * (size_t)extent;
    int tsize = 0;
    MPI_Type_size(type, &tsize);
    if (expect == EXPECT_ARCOLL && count > 0 && (long)count * tsize < mpi_below)
        expect = EXPECT_PMPI;
    size_t slen = coll == ALLTOALL ? blk * (size_t)n : blk;
    unsigned char *sbuf = malloc(slen + 1), *rbuf = malloc(blk * (size_t)n + 1),
                  *ref = malloc(blk * (size_t)n + 1);

    if (sbuf == NULL || rbuf == NULL || ref == NULL) {
        verdict(0, "out of memory", cname, coll, type, count);
        goto out;
    }
    if (coll == ALLTOALL)
        tl_fill_blocks(sbuf, blk, n, (uint64_t)iter, rank);
    else
        tl_fill(sbuf, blk, (uint64_t)iter, rank, TL_ANY);
    /* Gaps of a datatype are never written: both buffers start alike. */
    memset(rbuf, 0xEE, blk * (size_t)n + 1);
    memset(ref, 0xEE, blk * (size_t)n + 1);
    if (in_place) {
        /* Alltoall in place: rbuf holds what goes out. Allgather: our block. */
        if (coll == ALLTOALL)
            memcpy(rbuf, sbuf, slen);
        else
            memcpy(rbuf + (size_t)rank * blk, sbuf, blk);
        memcpy(ref, rbuf, blk * (size_t)n);
    }
    stats(&s0);
    if (coll == ALLTOALL)
        rc = MPI_Alltoall(in_place ? MPI_IN_PLACE : sbuf, count, type, rbuf, count, type, comm);
    else
        rc = MPI_Allgather(in_place ? MPI_IN_PLACE : sbuf, count, type, rbuf, count, type, comm);
    stats(&s1);
    if (coll == ALLTOALL)
        PMPI_Alltoall(in_place ? MPI_IN_PLACE : sbuf, count, type, ref, count, type, comm);
    else
        PMPI_Allgather(in_place ? MPI_IN_PLACE : sbuf, count, type, ref, count, type, comm);

    ok = rc == MPI_SUCCESS && memcmp(rbuf, ref, blk * (size_t)n + 1) == 0 &&
         (!plain || inter ||
          tl_check_blocks(rbuf, blk, n, (uint64_t)iter, coll == ALLTOALL ? rank : TL_ANY, NULL) ==
              0);
    verdict(ok, "data differs from PMPI or from the senders' pattern", cname, coll, type, count);

    if (mode != MODE_PLAIN) {
        unsigned long long via_arcoll = coll == ALLTOALL
                                            ? s1.alltoall_arcoll - s0.alltoall_arcoll
                                            : s1.allgather_arcoll - s0.allgather_arcoll;
        unsigned long long via_mpi = coll == ALLTOALL ? s1.alltoall_mpi - s0.alltoall_mpi
                                                      : s1.allgather_mpi - s0.allgather_mpi;
        int want = expect == EXPECT_ARCOLL && mode == MODE_SHIM;
        verdict(via_arcoll == (unsigned long long)want && via_mpi == (unsigned long long)!want,
                want ? "the shim did not run this call on arcoll"
                     : "the shim ran on arcoll a call it must hand to PMPI",
                cname, coll, type, count);
    }
out:
    free(sbuf);
    free(rbuf);
    free(ref);
}

static int count_copy(MPI_Comm comm, int key, void *extra, void *in, void *out, int *flag)
{
    (void)comm;
    (void)key;
    (void)extra;
    copies++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

/* Plain datatypes x sizes x both collectives, then in place, derived, gapped, empty. */
static void comm_suite(const char *cname, MPI_Comm comm, size_t maxbytes)
{
    static const size_t sizes[] = {1, 7, 64, 1000, 4096, 20000, 65536};
    MPI_Datatype types[] = {MPI_BYTE, MPI_INT, MPI_DOUBLE, MPI_LONG_LONG};
    MPI_Datatype contig, gapped = MPI_DOUBLE_INT;

    for (int c = ALLTOALL; c <= ALLGATHER; c++) {
        for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
            int tsize;
            MPI_Type_size(types[t], &tsize);
            for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]) && sizes[i] <= maxbytes; i++) {
                int count = (int)(sizes[i] / (size_t)tsize);
                coll_once(cname, comm, c, types[t], count > 0 ? count : 1, 1, 0, EXPECT_ARCOLL,
                          (int)i);
            }
        }
        /* The shim serves any datatype on an intracommunicator (the choice
         * must not depend on a rank's own arguments): in place, derived
         * contiguous, gapped (packed), zero bytes. */
        coll_once(cname, comm, c, MPI_INT, 100, 1, 1, EXPECT_ARCOLL, 1);
        MPI_Type_contiguous(25, MPI_INT, &contig);
        MPI_Type_commit(&contig);
        coll_once(cname, comm, c, contig, 4, 1, 0, EXPECT_ARCOLL, 2);
        MPI_Type_free(&contig);
        coll_once(cname, comm, c, gapped, 10, 0, 0, EXPECT_ARCOLL, 3);
        coll_once(cname, comm, c, MPI_INT, 0, 1, 0, EXPECT_ARCOLL, 4);
    }
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Back-to-back calls, each rank arriving after a random delay. */
static void skew_suite(const char *cname, MPI_Comm comm, int iters)
{
    unsigned seed = 12345u + (unsigned)wrank * 7919u;

    for (int it = 0; it < iters; it++) {
        if (rand_r(&seed) % 3 == 0)
            sleep_us(rand_r(&seed) % 300);
        coll_once(cname, comm, it % 2 ? ALLGATHER : ALLTOALL, MPI_INT, 1 + it % 300, 1, 0,
                  EXPECT_ARCOLL, it);
    }
}

int main(int argc, char **argv)
{
    const char *mname = argc > 1 ? argv[1] : "shim";
    size_t maxbytes = argc > 2 ? strtoul(argv[2], NULL, 0) : 65536;
    arcoll_mpi_stats_t s0, s1;
    MPI_Comm dup, evens, reversed, inter = MPI_COMM_NULL;
    int provided, bad = 0, key, multiple;
    long sums[2];

    mode = strcmp(mname, "multiple") == 0 || strcmp(mname, "mixed") == 0 ? MODE_MULTIPLE
           : strcmp(mname, "plain") == 0                                 ? MODE_PLAIN
                                                                         : MODE_SHIM;
    /* mixed: the world rank from the launcher (Open MPI's mpirun), before MPI_Init. */
    multiple = mode == MODE_MULTIPLE;
    if (strcmp(mname, "mixed") == 0)
        multiple = getenv("OMPI_COMM_WORLD_RANK") != NULL &&
                   strcmp(getenv("OMPI_COMM_WORLD_RANK"), "1") == 0;
    MPI_Init_thread(&argc, &argv, multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    snprintf(prefix, sizeof(prefix), "shim_test rank %d", wrank);
    stats_fn = (arcoll_mpi_stats_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "arcoll_mpi_stats");
    if (getenv("SHIM_TEST_MPI_BELOW") != NULL)
        mpi_below = strtol(getenv("SHIM_TEST_MPI_BELOW"), NULL, 0);
    if (mode != MODE_PLAIN && stats_fn == NULL) {
        if (wrank == 0)
            fprintf(stderr, "shim_test: libarcoll_mpi.so is not loaded (LD_PRELOAD it)\n");
        bad = 1;
    }
    if (multiple && provided != MPI_THREAD_MULTIPLE) {
        if (wrank == 0)
            fprintf(stderr, "shim_test: MPI_THREAD_MULTIPLE not provided (%d)\n", provided);
        bad = 1;
    }
    if (bad) {
        MPI_Finalize();
        return 1;
    }
    stats(&s0);
    /* An attribute of the application's: the shim's own communicators must not copy it. */
    MPI_Comm_create_keyval(count_copy, MPI_COMM_NULL_DELETE_FN, &key, NULL);
    MPI_Comm_set_attr(MPI_COMM_WORLD, key, &key);

    comm_suite("MPI_COMM_WORLD", MPI_COMM_WORLD, maxbytes);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    verdict(copies == 1, "the application's attribute was copied by the shim", "WORLD", ALLTOALL,
            MPI_BYTE, 0);
    comm_suite("dup(WORLD)", dup, maxbytes);
    /* Even and odd world ranks: rank sets that are not contiguous. */
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &evens);
    comm_suite("split(rank % 2)", evens, maxbytes);
    /* Every third rank left out, the others in reverse order. */
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 3 == 2 ? MPI_UNDEFINED : 0, wsize - wrank, &reversed);
    if (reversed != MPI_COMM_NULL)
        comm_suite("split(reversed, no rank % 3 == 2)", reversed, maxbytes);
    if (wsize >= 2) {
        MPI_Intercomm_create(evens, 0, MPI_COMM_WORLD, wrank % 2 ? 0 : 1, 99, &inter);
        for (int c = ALLTOALL; c <= ALLGATHER; c++)
            coll_once("intercomm(evens, odds)", inter, c, MPI_INT, 50, 1, 0, EXPECT_PMPI, 5);
    }
    skew_suite("MPI_COMM_WORLD", MPI_COMM_WORLD, 200);
    skew_suite("split(rank % 2)", evens, 200);

    /* Freeing a communicator releases its team (teams split from the world's). */
    stats(&s1);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&evens);
    if (reversed != MPI_COMM_NULL)
        MPI_Comm_free(&reversed);
    if (inter != MPI_COMM_NULL)
        MPI_Comm_free(&inter);
    if (mode == MODE_SHIM) {
        /* dup and evens were on arcoll, reversed too where this rank was in it. */
        unsigned long long want = 2 + (wrank % 3 != 2);
        arcoll_mpi_stats_t s2;
        stats(&s2);
        verdict(s2.comms_freed - s1.comms_freed == want,
                "MPI_Comm_free did not release the team or context", "split", ALLTOALL, MPI_BYTE,
                0);
        verdict(s2.comms_arcoll - s0.comms_arcoll == want + 1 && s2.errors == 0,
                "unexpected communicator or error counts", "all", ALLTOALL, MPI_BYTE, 0);
    }

    MPI_Comm_delete_attr(MPI_COMM_WORLD, key);
    MPI_Comm_free_keyval(&key);
    sums[0] = tally.passed;
    sums[1] = tally.failed;
    MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0)
        printf("shim_test on %d ranks (%s): %ld passed, %ld failed\n", wsize, mname, sums[0],
               sums[1]);
    MPI_Finalize();
    return sums[1] == 0 ? 0 : 1;
}
