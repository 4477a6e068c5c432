/*
 * Z-order (Morton) traversal of the P x P block matrix of an alltoall or
 * allgather among P ranks that can address each other's buffers (Li et al.
 * §2.1-2.2). Block (row, col) moves data from rank row (the source) to rank
 * col (the destination); codes 0 .. P*P-1 visit the blocks so that nearby
 * codes touch nearby rows and columns, and rank i takes the codes
 * [P*i, P*(i+1)): every block exactly once, P blocks per rank.
 *
 * P a power of two: the code's even bits are the column, its odd bits the
 * row (pext with 0x55.. / 0xAA..). Any P: the longer dimension of the matrix
 * is halved recursively (rows on a tie, the first half floor(len/2) long) and
 * a code is located by descending those halvings; for powers of two both
 * give the same order.
 *
 * Allgather uses the same order over the same matrix: block (s, d) copies
 * source s's one block to destination d (the "each source block to every
 * destination" matrix), so a source block is reused by codes close together.
 */
#ifndef ARCOLL_ALG_SCHED_MORTON_H
#define ARCOLL_ALG_SCHED_MORTON_H

#include <stddef.h>
#include <stdint.h>

typedef struct morton_block {
    uint32_t row; /* source rank */
    uint32_t col; /* destination rank */
} morton_block_t;

/* Bit interleave of 32-bit coordinates: col at even bits, row at odd bits,
 * and its inverse; portable code. */
uint64_t morton_encode(uint32_t row, uint32_t col);
morton_block_t morton_decode(uint64_t code);
/* The same with BMI2's pdep/pext; 1 if this CPU has BMI2 (only then may the
 * _bmi2 functions be called). */
int morton_have_bmi2(void);
uint64_t morton_encode_bmi2(uint32_t row, uint32_t col);
morton_block_t morton_decode_bmi2(uint64_t code);

/* The block of code (< p * p) in the order for p ranks (any p >= 1), and
 * the same by descending the halvings for every p (the binary search). */
morton_block_t morton_block(uint32_t p, uint64_t code);
morton_block_t morton_block_halving(uint32_t p, uint64_t code);
/* The same halving over an nr x nc matrix (a socket pair's bunch of SH-NUMA-CO,
 * Li et al. §2.4), code < nr * nc. */
morton_block_t morton_block_rect(uint32_t nr, uint32_t nc, uint64_t code);
/* Rank's share, codes [p*rank, p*(rank+1)) in order, into out[p]. */
void morton_share(uint32_t p, uint32_t rank, morton_block_t *out);
/* SH-NUMA-CO (Li et al. §2.4), ranks on ns sockets (socket[q] < ns for each
 * rank q; any sizes, any order): in step i socket r copies the bunch from
 * socket x = (r + i) % ns into its own ranks' receive buffers, its q_r ranks
 * splitting the q_x x q_r bunch (x's ranks by rank x its ranks by rank) in
 * Morton order (morton_block_rect): the socket's j-th rank takes codes
 * [q_x*j, q_x*(j+1)). Rank's share, the steps in order, into out[p] (p
 * blocks in all, each with destination on rank's socket); 0, or -1 if out
 * of memory. */
int morton_numa_share(uint32_t p, uint32_t ns, const uint32_t *socket, uint32_t rank,
                      morton_block_t *out);

/* Byte offsets of block b's data for per-peer size m: in the source's send
 * buffer (alltoall: its block for the destination; allgather: its one block)
 * and in the destination's receive buffer (the source's slot). */
static inline size_t morton_src_off(int alltoall, morton_block_t b, size_t m)
{
    return alltoall ? (size_t)b.col * m : 0;
}

static inline size_t morton_dst_off(morton_block_t b, size_t m)
{
    return (size_t)b.row * m;
}

#endif
