/*
 * A legal MPI program that keeps many nonblocking collectives in flight on one
 * communicator, mixing ones the PMPI shim serves with arcoll (MPI_Ialltoall,
 * Iallgather, Ialltoallv, Ireduce_scatter_block, Iallreduce) with ones MPI
 * serves (MPI_Ibarrier, Ibcast, Ireduce), and completes them by Waitany,
 * Testall and Waitall. Ranks arrive late in turn (a sleep before a run's
 * completion on one rank), so that the others start more calls than arcoll's
 * window while a peer still sits in an MPI wait.
 *
 * MPI requires every start to be local: before arcoll queued the calls
 * beyond its window, a start there waited for the late rank, which waited in
 * MPI for an Ibarrier that needed the starting rank's MPI progress: a
 * deadlock (issue "Reliability, second round", item 0).
 *
 *   shim_nb_test CALLS [INFLIGHT]   (default 2000 calls, up to 24 in flight,
 *                                    started in runs of 16)
 *   shim_nb_test order [REPS]       the shape of that deadlock, made certain: every
 *                                    rank starts an MPI_Ibarrier; the last rank waits
 *                                    for it before it starts anything else (legal:
 *                                    a dissemination barrier needs the others' progress
 *                                    in its later rounds), while the others start 12
 *                                    MPI_Ialltoall (past the window) and, in turn, one
 *                                    blocking MPI_Alltoall (arcoll waiting in a blocking
 *                                    call must keep MPI's progress going too)
 *
 * Every result is checked. Last line on rank 0:
 * "shim_nb_test on N ranks: P passed, F failed".
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tl.h"

enum { K_A2A, K_AG, K_A2AV, K_RSB, K_AR, K_BARRIER, K_BCAST, K_REDUCE, K_KINDS };
static const char *const kname[K_KINDS] = {
    "Ialltoall",  "Iallgather", "Ialltoallv", "Ireduce_scatter_block",
    "Iallreduce", "Ibarrier",   "Ibcast",     "Ireduce"};

#define MAXF  64 /* at most this many in flight */
#define ELEMS 40 /* ints per block of arcoll's calls */
/* Ints of MPI's Ibcast and Ireduce: past Open MPI's eager limits, so that
 * they need the root's (or a parent's) progress after its start. */
#define BIG 16384

typedef struct {
    int kind, call;
    int *sbuf, *rbuf, *big, *bigr;
    int *sc, *sd, *rc, *rd;
} slot_t;

static int wrank, wsize;
static char prefix[32];
static tl_tally_t tally = {prefix, 0, 0}; /* one verdict a call; the first 5 wrong printed */

/* The data of a call: tests/lib's patterns (tl.h), blocks of ints as bytes. */
#define IB(k) (sizeof(int) * (size_t)(k))

/* The same kind sequence on every rank: a hash of the call number. */
static int kind_of(int call)
{
    uint32_t h = (uint32_t)call * 2654435761u;
    return (int)((h >> 13) % K_KINDS);
}

static void slot_start(slot_t *s, int call, MPI_Request *req)
{
    int n = wsize, k = kind_of(call);

    s->kind = k;
    s->call = call;
    memset(s->rbuf, 0xab, sizeof(int) * ELEMS * (size_t)n);
    switch (k) {
    case K_A2A:
        tl_fill_blocks(s->sbuf, IB(ELEMS), n, (uint64_t)call, wrank);
        MPI_Ialltoall(s->sbuf, ELEMS, MPI_INT, s->rbuf, ELEMS, MPI_INT, MPI_COMM_WORLD, req);
        break;
    case K_AG:
        tl_fill(s->sbuf, IB(ELEMS), (uint64_t)call, wrank, TL_ANY);
        MPI_Iallgather(s->sbuf, ELEMS, MPI_INT, s->rbuf, ELEMS, MPI_INT, MPI_COMM_WORLD, req);
        break;
    case K_A2AV:
        /* Rank r sends (r + j + call) % 5 ints to rank j. */
        for (int j = 0, off = 0; j < n; j++) {
            s->sc[j] = (wrank + j + call) % 5;
            s->sd[j] = off;
            tl_fill(s->sbuf + off, IB(s->sc[j]), (uint64_t)call, wrank, j);
            off += s->sc[j];
        }
        for (int j = 0, off = 0; j < n; j++) {
            s->rc[j] = (j + wrank + call) % 5;
            s->rd[j] = off;
            off += s->rc[j];
        }
        MPI_Ialltoallv(s->sbuf, s->sc, s->sd, MPI_INT, s->rbuf, s->rc, s->rd, MPI_INT,
                       MPI_COMM_WORLD, req);
        break;
    case K_RSB:
        for (int e = 0; e < ELEMS * n; e++)
            s->sbuf[e] = (int)tl_red_in((uint64_t)call, wrank, (size_t)e);
        MPI_Ireduce_scatter_block(s->sbuf, s->rbuf, ELEMS, MPI_INT, MPI_SUM, MPI_COMM_WORLD, req);
        break;
    case K_AR:
        for (int e = 0; e < ELEMS; e++)
            s->sbuf[e] = (int)tl_red_in((uint64_t)call, wrank, (size_t)e);
        MPI_Iallreduce(s->sbuf, s->rbuf, ELEMS, MPI_INT, MPI_SUM, MPI_COMM_WORLD, req);
        break;
    case K_BARRIER: MPI_Ibarrier(MPI_COMM_WORLD, req); break;
    case K_BCAST:
        if (wrank == call % n)
            tl_fill(s->big, IB(BIG), (uint64_t)call, wrank, TL_ANY);
        else
            memset(s->big, 0xff, IB(BIG));
        MPI_Ibcast(s->big, BIG, MPI_INT, call % n, MPI_COMM_WORLD, req);
        break;
    default:
        for (int e = 0; e < BIG; e++)
            s->big[e] = (int)tl_red_in((uint64_t)call, wrank, (size_t)e);
        MPI_Ireduce(s->big, s->bigr, BIG, MPI_INT, MPI_SUM, call % n, MPI_COMM_WORLD, req);
        break;
    }
}

static int slot_check(const slot_t *s)
{
    int n = wsize, call = s->call;

    switch (s->kind) {
    case K_A2A: return tl_check_blocks(s->rbuf, IB(ELEMS), n, (uint64_t)call, wrank, NULL) == 0;
    case K_AG: return tl_check_blocks(s->rbuf, IB(ELEMS), n, (uint64_t)call, TL_ANY, NULL) == 0;
    case K_A2AV:
        for (int j = 0; j < n; j++)
            if (tl_check(s->rbuf + s->rd[j], IB(s->rc[j]), (uint64_t)call, j, wrank, NULL) != 0)
                return 0;
        return 1;
    case K_RSB:
        for (int e = 0; e < ELEMS; e++)
            if (s->rbuf[e] != (int)tl_red_sum((uint64_t)call, n, (size_t)(wrank * ELEMS + e)))
                return 0;
        return 1;
    case K_AR:
    case K_REDUCE: {
        const int *got = s->kind == K_AR ? s->rbuf : s->bigr;
        if (s->kind == K_REDUCE && wrank != call % n)
            return 1;
        for (int e = 0; e < (s->kind == K_AR ? ELEMS : BIG); e++)
            if (got[e] != (int)tl_red_sum((uint64_t)call, n, (size_t)e))
                return 0;
        return 1;
    }
    case K_BCAST: return tl_check(s->big, IB(BIG), (uint64_t)call, call % n, TL_ANY, NULL) == 0;
    default: return 1;
    }
}

static void done(slot_t *s)
{
    tl_expect_max(&tally, 5, slot_check(s), "call %d (%s): wrong result", s->call, kname[s->kind]);
    s->kind = -1;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);

    if (p == NULL) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* The "order" mode (see the top): reps rounds, each result checked. */
static void order_test(int reps)
{
    enum { NA = 12 };
    slot_t s[NA];
    MPI_Request bar, req[NA];
    int n = wsize, last = wrank == n - 1;

    for (int i = 0; i < NA; i++) {
        s[i].sbuf = xmalloc(sizeof(int) * ELEMS * (size_t)n);
        s[i].rbuf = xmalloc(sizeof(int) * ELEMS * (size_t)n);
    }
    for (int rep = 0; rep < reps; rep++) {
        int blocking = rep % 2; /* one blocking alltoall instead of the nonblocking ones */
        if (last) {             /* the others' barriers cannot finish inside their start */
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        MPI_Ibarrier(MPI_COMM_WORLD, &bar);
        if (last)
            MPI_Wait(&bar, MPI_STATUS_IGNORE);
        for (int i = 0; i < (blocking ? 1 : NA); i++) {
            s[i].kind = K_A2A;
            s[i].call = rep * NA + i;
            memset(s[i].rbuf, 0xab, sizeof(int) * ELEMS * (size_t)n);
            tl_fill_blocks(s[i].sbuf, IB(ELEMS), n, (uint64_t)s[i].call, wrank);
            if (blocking)
                MPI_Alltoall(s[i].sbuf, ELEMS, MPI_INT, s[i].rbuf, ELEMS, MPI_INT, MPI_COMM_WORLD);
            else
                MPI_Ialltoall(s[i].sbuf, ELEMS, MPI_INT, s[i].rbuf, ELEMS, MPI_INT, MPI_COMM_WORLD,
                              &req[i]);
        }
        if (!blocking)
            MPI_Waitall(NA, req, MPI_STATUSES_IGNORE);
        if (!last)
            MPI_Wait(&bar, MPI_STATUS_IGNORE);
        for (int i = 0; i < (blocking ? 1 : NA); i++)
            done(&s[i]);
    }
    for (int i = 0; i < NA; i++) {
        free(s[i].sbuf);
        free(s[i].rbuf);
    }
}

int main(int argc, char **argv)
{
    int order = argc > 1 && strcmp(argv[1], "order") == 0;
    int calls = argc > 1 && !order ? atoi(argv[1]) : 2000, inflight = argc > 2 ? atoi(argv[2]) : 24;
    slot_t slots[MAXF];
    MPI_Request req[MAXF];
    int nreq = 0, call = 0, run = 0;
    long tot[2], all[2];
    double t0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    snprintf(prefix, sizeof(prefix), "rank %d", wrank);
    if (inflight < 1 || inflight > MAXF)
        inflight = 24;
    for (int i = 0; i < MAXF; i++) {
        size_t len = sizeof(int) * ELEMS * (size_t)wsize;
        slots[i].sbuf = xmalloc(len);
        slots[i].rbuf = xmalloc(len);
        slots[i].big = xmalloc(sizeof(int) * BIG);
        slots[i].bigr = xmalloc(sizeof(int) * BIG);
        slots[i].sc = xmalloc(sizeof(int) * 4 * (size_t)wsize);
        slots[i].sd = slots[i].sc + wsize;
        slots[i].rc = slots[i].sc + 2 * wsize;
        slots[i].rd = slots[i].sc + 3 * wsize;
        slots[i].kind = -1;
        req[i] = MPI_REQUEST_NULL;
    }
    t0 = MPI_Wtime();
    if (order) {
        int reps = argc > 2 ? atoi(argv[2]) : 20;
        order_test(reps);
        calls = (reps + 1) / 2 * 12 + reps / 2;
        inflight = 12;
        call = calls;
    }
    while (call < calls) {
        /* A run of up to 16 starts; a full array is made room in by Waitany. */
        for (int k = 0; k < 16 && call < calls; k++) {
            int idx = -1;
            if (nreq == inflight) {
                MPI_Waitany(inflight, req, &idx, MPI_STATUS_IGNORE);
                done(&slots[idx]);
                nreq--;
            } else {
                for (idx = 0; req[idx] != MPI_REQUEST_NULL; idx++)
                    ;
            }
            slot_start(&slots[idx], call++, &req[idx]);
            nreq++;
        }
        /* One rank in turn is late into the completion. */
        if (run % wsize == wrank && run % 3 == 0) {
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
        }
        /* Complete: Waitall, a Testall loop, or some Waitany, in turn. */
        switch (run++ % 3) {
        case 0: MPI_Waitall(inflight, req, MPI_STATUSES_IGNORE); break;
        case 1:
            for (int flag = 0; !flag;)
                MPI_Testall(inflight, req, &flag, MPI_STATUSES_IGNORE);
            break;
        default:
            for (int i = 0; i < nreq / 2; i++) {
                int idx;
                MPI_Waitany(inflight, req, &idx, MPI_STATUS_IGNORE);
                if (idx != MPI_UNDEFINED) {
                    done(&slots[idx]);
                    nreq--;
                }
            }
            continue; /* the rest stay in flight into the next run */
        }
        /* Waitall/Testall completed everything: check the ones in flight. */
        for (int i = 0; i < inflight && nreq > 0; i++) {
            if (slots[i].kind < 0)
                continue;
            done(&slots[i]);
            nreq--;
        }
    }
    MPI_Waitall(inflight, req, MPI_STATUSES_IGNORE);
    for (int i = 0; i < inflight && nreq > 0; i++) {
        if (slots[i].kind < 0)
            continue;
        done(&slots[i]);
        slots[i].kind = -1;
        nreq--;
    }
    tot[0] = tally.passed;
    tot[1] = tally.failed;
    MPI_Reduce(tot, all, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (wrank == 0)
        printf("shim_nb_test on %d ranks: %d calls, up to %d in flight, %.2f s\n"
               "shim_nb_test on %d ranks: %ld passed, %ld failed\n",
               wsize, calls, inflight, MPI_Wtime() - t0, wsize, all[0], all[1]);
    for (int i = 0; i < MAXF; i++) {
        free(slots[i].sbuf);
        free(slots[i].rbuf);
        free(slots[i].big);
        free(slots[i].bigr);
        free(slots[i].sc);
    }
    MPI_Finalize();
    return wrank == 0 && (all[1] != 0 || all[0] != (long)calls * wsize) ? 1 : 0;
}
