/*
 * coll_test's parts (tests/integ/coll_test.c and the modes of coll_more.c and
 * coll_heapmr.c), and what its launchers call (coll_test_main.c, fork_test.c,
 * tcp_launch.c; fork_test's shco_test.c uses the helpers too). Data patterns
 * and pass/fail counting are tests/lib's (tl.h).
 */
#ifndef ARCOLL_TESTS_COLL_TEST_H
#define ARCOLL_TESTS_COLL_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "arcoll.h"
#include "tl.h"

/* MODE [ARGS...] as argv[1..] (coll_test.c's top comment); oob NULL: PMIx. */
int coll_test_main(int argc, char **argv, const arcoll_oob_t *oob);
/* A launcher's own modes (fork_test: shco_test.c): 1 if it ran mode. */
extern int (*coll_test_extra)(arcoll_context_t ctx, const char *mode, int argc, char **argv);

/* This process's context rank and size, and its verdicts ("[rank R] FAIL ..."). */
extern int ct_rank, ct_nranks;
extern tl_tally_t ct_tally;

/* A verdict: a failure names the file and line of the check. */
#define CHECK(cond, ...) ct_check((cond) != 0, __FILE__, __LINE__, __VA_ARGS__)
void ct_check(int ok, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* An alltoall's (alltoall 1) or allgather's send buffer of call from rank me
 * of n, bytes per block; the receive buffer's wrong bytes (the first reported). */
void ct_fill(int alltoall, uint64_t call, int me, int n, size_t bytes, uint8_t *sbuf);
size_t ct_verify(int alltoall, uint64_t call, int me, int n, size_t bytes, const uint8_t *rbuf,
                 const char *what);
/* arcoll_config_set, checked. */
void ct_set(arcoll_context_t ctx, const char *name, const char *value);
/* alg serves alltoall and not allgather (src/config/algs.h). */
int ct_a2a_only(const char *alg);
/* One alltoall or allgather, blocking or not (tested to completion). */
int ct_run_coll(arcoll_team_t team, int alltoall, int nonblocking, const void *s, void *r,
                size_t bytes);
/* One validated collective on a team; call numbers must match across ranks. */
void ct_one(arcoll_team_t team, int alltoall, int nonblocking, uint64_t call, size_t bytes,
            const char *what);
void ct_delay_us(long us);
/* Monotonic seconds. */
double ct_now(void);
/* The median of iters timings (sorts t). */
double ct_bench_median(double *t, int iters);
/* Seconds per call of alg (both collectives): the slowest rank's median; -1 on an error. */
double ct_bench_time(arcoll_context_t ctx, const char *alg, int a2a, size_t bytes, uint8_t *s,
                     uint8_t *r, int iters, double *t);

/* The modes of coll_more.c. */
void ct_test_v(arcoll_context_t ctx);
void ct_test_a2av(arcoll_context_t ctx);
void ct_test_vbad(arcoll_context_t ctx);
void ct_test_split(arcoll_context_t ctx);
void ct_test_churn(arcoll_context_t ctx, long cycles);
void ct_test_inflight(arcoll_context_t ctx);
void ct_test_vskew(arcoll_context_t ctx, long iters, long us);
/* coll_heapmr.c */
void ct_test_heapmr(arcoll_context_t ctx, const char *how, long iters);

#endif
