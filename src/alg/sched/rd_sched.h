/*
 * Schedule builders (engine/sched.h) for allgather(v), reduce-scatter and
 * allreduce by recursive doubling / halving and by a ring: pure logic, one
 * rank's schedule per call, no communication.
 *
 * Variants (the name is the allgather's distance order; the reduce-scatter
 * runs the exact time-reverse of the allgather of the same variant):
 *   RD_HALVING   allgather: a "swap" round, then recursive doubling at
 *                distances n/2, n/4, ..., 1 (thesis 003, 3.4.1). The swap
 *                puts rank j's block on the position whose bit reverse is
 *                j, so every message is one contiguous run of blocks.
 *                reduce-scatter: recursive halving at distances 1, 2, ...,
 *                n/2, then the swap back. allreduce: both, swaps cancel.
 *   RD_DOUBLING  allgather at distances 1, 2, ..., n/2; reduce-scatter at
 *                n/2, ..., 1 (MPICH's recursive halving); no swap.
 *   RD_RING      n - 1 rounds to me + 1, from me - 1.
 *
 * Positions and non-powers of two. The recursive variants run on positions
 * 0 .. 2^L - 1, L = ceil(lg n); positions >= n do not exist. Position v
 * holds the block of rank owner(v): identity for RD_DOUBLING; for
 * RD_HALVING owner(v) is the index of bitrev_L(v) among the sorted
 * { bitrev_L(u) : u < n } (exactly bitrev for n = 2^L, and always a
 * permutation of 0 .. n-1, so the swap never targets a missing rank; it is a
 * cycle permutation, not pairwise, when n is not a power of two).
 * Stage s of the allgather flips bit b(s) (b(s) = L-1-s halving, s
 * doubling). Before stage s, position v holds the blocks of its class: the
 * existing positions that differ from v only in bits b(0) .. b(s-1). If v's
 * partner p = v ^ 2^b(s) is missing, what p would have sent (its class) is
 * held by every existing member of p's class: the thesis's forwarding rule
 * ("send in stage s+1 to the process whose s-th and s+1-th bits differ",
 * i.e. the member of p's class that differs from p in bit b(s-1)),
 * generalized: the provider is p with bits b(s-1), b(s-2), ... cleared in
 * that order until it exists; if none exists p's class is empty. The
 * provider sends in stage s itself (it has held that class since stage
 * s-1), so no stage is added: L stages for every n, some ranks send more
 * than one message in a stage. The reduce-scatter reverses every message:
 * the rank that lacks a partner sends its partials for p's class to the
 * provider, which reduces them in as well.
 *
 * What the engine must guarantee beyond sched.h's rules (the builders rely
 * on it; tests/unit/test_rd_sched.c runs schedules under exactly this model):
 *   E1. Receives with SCHED_REDUCE may overlap each other: each combines into
 *       what is there, one at a time. Floating-point results are
 *       deterministic given n iff the engine applies overlapping REDUCE
 *       receives in list order (the builders list them in increasing round,
 *       partner before forwarded partials); with an exact op any order works.
 *   E2. Local copies of round 0 run at the start of the call, before any
 *       send is issued or receive applied: the reductions' working vector
 *       (SCHED_BUF_TMP) is initialized from the input by such a copy.
 * SEND, RECV and TMP must not alias (RECV is the input for in_place).
 *
 * All builders reset *s first, fill it for rank me of n, and return
 * ARCOLL_OK, ARCOLL_ERR_NOMEM or ARCOLL_ERR_INVALID (s reset on error).
 * Zero-length messages are left out on both ends.
 */
#ifndef ARCOLL_ALG_SCHED_RD_SCHED_H
#define ARCOLL_ALG_SCHED_RD_SCHED_H

#include <stdint.h>

#include "engine/sched.h"

enum { RD_HALVING = 0, RD_DOUBLING = 1, RD_RING = 2, RD_NVARIANT };

/*
 * Rank j's counts[j] bytes land at displs[j] of RECV on every rank (blocks
 * must not overlap; gaps are left untouched). Input: SEND offset 0, or RECV
 * at displs[me] if in_place. Displacements may differ between ranks (each
 * schedule uses its own), counts may not.
 * Rounds (L = ceil(lg n)): HALVING L + 1, DOUBLING L, RING n - 1.
 * Bytes: every rank receives every other block once; HALVING ranks that
 * are not fixed points of the swap receive every block once, their own
 * included (with in_place it lands in TMP as a discard, tmp_len =
 * counts[me]). For n = 2^L and equal blocks b each rank sends (n-1) * b,
 * plus b for the swap unless bitrev(me) == me (a local copy instead);
 * otherwise providers send extra messages. With displs[j] = j * b a message
 * is one run of RECV, split at most by the own block read from SEND.
 */
int rd_sched_allgatherv(sched_t *s, int variant, uint32_t n, uint32_t me, const uint64_t *counts,
                        const uint64_t *displs, int in_place);
/* counts[j] = bytes, displs[j] = j * bytes. */
int rd_sched_allgather(sched_t *s, int variant, uint32_t n, uint32_t me, uint64_t bytes,
                       int in_place);

/*
 * Input: n blocks, block j of counts[j] elements of elem bytes, at the
 * prefix sums (SEND, or RECV if in_place); rank j gets the reduction of
 * everyone's block j at RECV offset 0. Working vector: TMP (tmp_len = the
 * whole input), filled by a round-0 local copy (E2); SEND is only read.
 * Rounds: HALVING L + 1 (the swap last), DOUBLING L, RING n - 1.
 * Bytes for equal blocks of b bytes, n = 2^L: each rank sends and receives
 * (n-1) * b in the halving stages (plus b for the swap unless a fixed point
 * of bitrev). Each block is reduced in a fixed tree given n and variant
 * (deterministic under E1's list order); RING reduces every byte once per
 * rank, so its order is fixed whatever the engine does.
 */
int rd_sched_reduce_scatter(sched_t *s, int variant, uint32_t n, uint32_t me,
                            const uint64_t *counts, uint64_t elem, int in_place);

/*
 * count elements of elem bytes (SEND, or RECV if in_place) reduced into
 * RECV on every rank: a reduce-scatter on blocks of count / n elements (the
 * first count % n blocks one more; some empty if count < n) in TMP
 * (tmp_len = count * elem, round-0 copy, E2), then an allgather into RECV.
 * HALVING runs both without their swaps (they cancel: position v reduces and
 * then distributes rank owner(v)'s block). Rounds: HALVING and DOUBLING 2L,
 * RING 2(n-1); bytes about 2 (n-1)/n * count * elem per rank each way.
 */
int rd_sched_allreduce(sched_t *s, int variant, uint32_t n, uint32_t me, uint64_t count,
                       uint64_t elem, int in_place);

#endif
