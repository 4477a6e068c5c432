/* Z-order traversal of the block matrix (alg/sched/morton.h). */
#include "alg/sched/morton.h"

#include <stdlib.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define MORTON_EVEN 0x5555555555555555ULL
#define MORTON_ODD  0xAAAAAAAAAAAAAAAAULL

/* Spread the 32 bits of x to the even bits of a 64-bit word. */
static uint64_t morton_spread(uint32_t x)
{
    uint64_t v = x;

    v = (v | (v << 16)) & 0x0000FFFF0000FFFFULL;
    v = (v | (v << 8)) & 0x00FF00FF00FF00FFULL;
    v = (v | (v << 4)) & 0x0F0F0F0F0F0F0F0FULL;
    v = (v | (v << 2)) & 0x3333333333333333ULL;
    v = (v | (v << 1)) & MORTON_EVEN;
    return v;
}

/* The inverse: the even bits of v, packed. */
static uint32_t morton_pack(uint64_t v)
{
    v &= MORTON_EVEN;
    v = (v | (v >> 1)) & 0x3333333333333333ULL;
    v = (v | (v >> 2)) & 0x0F0F0F0F0F0F0F0FULL;
    v = (v | (v >> 4)) & 0x00FF00FF00FF00FFULL;
    v = (v | (v >> 8)) & 0x0000FFFF0000FFFFULL;
    v = (v | (v >> 16)) & 0x00000000FFFFFFFFULL;
    return (uint32_t)v;
}

uint64_t morton_encode(uint32_t row, uint32_t col)
{
    return morton_spread(col) | (morton_spread(row) << 1);
}

morton_block_t morton_decode(uint64_t code)
{
    return (morton_block_t){.row = morton_pack(code >> 1), .col = morton_pack(code)};
}

#if defined(__x86_64__)
int morton_have_bmi2(void)
{
    __builtin_cpu_init(); /* may run before the constructors that do it */
    return __builtin_cpu_supports("bmi2");
}

__attribute__((target("bmi2"))) uint64_t morton_encode_bmi2(uint32_t row, uint32_t col)
{
    return _pdep_u64(col, MORTON_EVEN) | _pdep_u64(row, MORTON_ODD);
}

__attribute__((target("bmi2"))) morton_block_t morton_decode_bmi2(uint64_t code)
{
    return (morton_block_t){.row = (uint32_t)_pext_u64(code, MORTON_ODD),
                            .col = (uint32_t)_pext_u64(code, MORTON_EVEN)};
}
#else
int morton_have_bmi2(void)
{
    return 0;
}

uint64_t morton_encode_bmi2(uint32_t row, uint32_t col)
{
    return morton_encode(row, col);
}

morton_block_t morton_decode_bmi2(uint64_t code)
{
    return morton_decode(code);
}
#endif

/* Rows on a tie: for p = 2^k that puts the row bit above the column bit, as
 * the interleave does. */
morton_block_t morton_block_halving(uint32_t p, uint64_t code)
{
    return morton_block_rect(p, p, code);
}

morton_block_t morton_block_rect(uint32_t nr, uint32_t nc, uint64_t code)
{
    uint32_t r0 = 0, c0 = 0;

    while ((uint64_t)nr * nc > 1) {
        if (nr >= nc) {
            uint32_t h = nr / 2;
            uint64_t n0 = (uint64_t)h * nc;
            if (code < n0) {
                nr = h;
            } else {
                code -= n0;
                r0 += h;
                nr -= h;
            }
        } else {
            uint32_t h = nc / 2;
            uint64_t n0 = (uint64_t)h * nr;
            if (code < n0) {
                nc = h;
            } else {
                code -= n0;
                c0 += h;
                nc -= h;
            }
        }
    }
    return (morton_block_t){.row = r0, .col = c0};
}

morton_block_t morton_block(uint32_t p, uint64_t code)
{
    return (p & (p - 1)) == 0 ? morton_decode(code) : morton_block_halving(p, code);
}

void morton_share(uint32_t p, uint32_t rank, morton_block_t *out)
{
    uint64_t first = (uint64_t)p * rank;

    if ((p & (p - 1)) != 0) {
        for (uint32_t i = 0; i < p; i++)
            out[i] = morton_block_halving(p, first + i);
    } else if (morton_have_bmi2()) {
        for (uint32_t i = 0; i < p; i++)
            out[i] = morton_decode_bmi2(first + i);
    } else {
        for (uint32_t i = 0; i < p; i++)
            out[i] = morton_decode(first + i);
    }
}

int morton_numa_share(uint32_t p, uint32_t ns, const uint32_t *socket, uint32_t rank,
                      morton_block_t *out)
{
    uint32_t me = socket[rank], j = 0, n = 0;
    uint32_t *first = calloc((size_t)ns + 1, sizeof(*first)); /* socket x: by[first[x] ..] */
    uint32_t *pos = malloc(sizeof(*pos) * ns);
    uint32_t *by = malloc(sizeof(*by) * p); /* the ranks, by socket, then by rank */
    int rc = -1;

    if (first == NULL || pos == NULL || by == NULL)
        goto out;
    for (uint32_t q = 0; q < p; q++)
        first[socket[q] + 1]++;
    for (uint32_t x = 0; x < ns; x++) {
        pos[x] = first[x];
        first[x + 1] += first[x];
    }
    for (uint32_t q = 0; q < p; q++) {
        if (q == rank)
            j = pos[me] - first[me];
        by[pos[socket[q]]++] = q;
    }
    for (uint32_t i = 0; i < ns; i++) {
        uint32_t x = (me + i) % ns, qx = first[x + 1] - first[x], qr = first[me + 1] - first[me];
        for (uint64_t c = (uint64_t)qx * j; c < (uint64_t)qx * (j + 1); c++) {
            morton_block_t b = morton_block_rect(qx, qr, c);
            out[n++] = (morton_block_t){.row = by[first[x] + b.row], .col = by[first[me] + b.col]};
        }
    }
    rc = 0;
out:
    free(by);
    free(pos);
    free(first);
    return rc;
}
