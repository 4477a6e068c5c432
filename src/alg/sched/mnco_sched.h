/*
 * MN-CO schedule builders (Li et al. §2.5; docs/protocol.md §16): alltoall
 * and allgather among n ranks as two rounds of aggregated messages, pure
 * logic, one rank's schedule per call, no communication.
 *
 * The P x P block matrix: entry (x, y) is what rank x sends to rank y (its
 * block for y; allgather: its one block). Rank j owns a rectangle
 * X_j x Y_j = [x0, x1) x [y0, y1) of it (mnco_rects): the matrix is cut
 * recursively, the longer side in two (destinations on a tie), the ranks in
 * two halves (the first floor(n/2) take the low part), the side in
 * proportion to them. For P = 2^k this is the seed's Morton order, rank j the
 * codes [P*j, P*(j+1)) of morton_block_rect(P, P, .) with row = y, col = x:
 * sqrt(P) x sqrt(P) squares for P = 4^k, |X_j| = sqrt(2P) by |Y_j| = sqrt(P/2)
 * for P = 2 * 4^k.
 *
 * Round 0: rank x sends each owner j with x in X_j one message, its blocks
 * for Y_j (alltoall: SEND[y0 .. y1), contiguous; allgather: its block),
 * which j receives into TMP row x - x0. Round 1: alltoall, a local transpose
 * TMP row-major by source -> TMP second half row-major by destination, in
 * Morton order over the rectangle; then j sends each y in Y_j one message,
 * the blocks of all x in X_j, landing contiguous at RECV[x0 .. x1) of y.
 * A rank that is its own source or destination copies locally instead.
 * Messages per rank: sends + own-part copies = (rectangles crossing its
 * row x) + |Y_j| = 2 sqrt(P) for P = 4^k (3 sqrt(P/2) for P = 2 * 4^k).
 *
 * Both builders reset *s, fill it for rank me of n, and return ARCOLL_OK,
 * ARCOLL_ERR_NOMEM or ARCOLL_ERR_INVALID (s reset on error). bytes > 0 (a
 * 0-byte call never reaches an algorithm); not in place (in place runs as
 * the v-forms). SEND, RECV and TMP must not alias.
 */
#ifndef ARCOLL_ALG_SCHED_MNCO_SCHED_H
#define ARCOLL_ALG_SCHED_MNCO_SCHED_H

#include <stdint.h>

#include "engine/sched.h"

typedef struct mnco_rect {
    uint32_t x0, x1; /* sources [x0, x1) */
    uint32_t y0, y1; /* destinations [y0, y1) */
} mnco_rect_t;

/* Every rank's rectangle for n ranks, into out[n] (the rule above). */
void mnco_rects(uint32_t n, mnco_rect_t *out);

int mnco_sched_alltoall(sched_t *s, uint32_t n, uint32_t me, uint64_t bytes);
int mnco_sched_allgather(sched_t *s, uint32_t n, uint32_t me, uint64_t bytes);

#endif
