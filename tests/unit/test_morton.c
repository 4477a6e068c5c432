/* Unit tests of the Morton order of the block matrix (src/alg/sched/morton.c):
 * interleave and de-interleave, portable against BMI2; every block exactly
 * once over the ranks' shares; the halving order equal to the interleave for
 * powers of two; each share a compact piece of the matrix; the NUMA shares
 * (every block once, written on the copier's socket, read from socket
 * (r + i) % s in step i, one socket = the plain shares). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alg/sched/morton.h"

static const uint32_t big[] = {96, 100, 127, 128, 200, 256, 1000};

/* The paper's example: x = 2 (column), y = 1 (row) is Z-value 6. */
static void test_interleave(void **state)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL;

    (void)state;
    assert_int_equal(morton_encode(1, 2), 6);
    assert_int_equal(morton_encode(0xffffffffu, 0), 0xAAAAAAAAAAAAAAAAULL);
    assert_int_equal(morton_encode(0, 0xffffffffu), 0x5555555555555555ULL);
    for (int i = 0; i < 100000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint32_t row = (uint32_t)x, col = (uint32_t)(x >> 32);
        morton_block_t b = morton_decode(morton_encode(row, col));
        assert_int_equal(b.row, row);
        assert_int_equal(b.col, col);
        b = morton_decode(x);
        assert_int_equal(morton_encode(b.row, b.col), x);
    }
}

static void test_bmi2_equal(void **state)
{
    uint64_t x = 88172645463325252ULL;

    (void)state;
    if (!morton_have_bmi2()) {
        print_message("no BMI2 on this CPU: only the portable code runs\n");
        skip();
    }
    for (int i = 0; i < 100000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint32_t row = (uint32_t)x, col = (uint32_t)(x >> 32);
        morton_block_t a = morton_decode(x), b = morton_decode_bmi2(x);
        assert_int_equal(morton_encode_bmi2(row, col), morton_encode(row, col));
        assert_int_equal(a.row, b.row);
        assert_int_equal(a.col, b.col);
    }
}

/* Every block of the p x p matrix was seen exactly once. */
static void assert_each_once(const uint8_t *seen, uint32_t p)
{
    for (size_t i = 0; i < (size_t)p * p; i++)
        assert_int_equal(seen[i], 1);
}

/* Shares of p ranks: P blocks each, every block once. Returns the most
 * distinct rows + distinct columns one share touches (the source and
 * destination buffers whose lines it brings into the copier's cache). */
static uint32_t check_shares(uint32_t p)
{
    uint8_t *seen = calloc((size_t)p * p, 1), *rows = malloc(p), *cols = malloc(p);
    morton_block_t *s = malloc(sizeof(*s) * p);
    uint32_t widest = 0;

    assert_non_null(seen);
    assert_non_null(rows);
    assert_non_null(cols);
    assert_non_null(s);
    for (uint32_t r = 0; r < p; r++) {
        uint32_t w = 0;
        memset(rows, 0, p);
        memset(cols, 0, p);
        morton_share(p, r, s);
        for (uint32_t i = 0; i < p; i++) {
            assert_true(s[i].row < p && s[i].col < p);
            assert_int_equal(seen[(size_t)s[i].row * p + s[i].col]++, 0);
            morton_block_t b = morton_block(p, (uint64_t)p * r + i);
            assert_int_equal(b.row, s[i].row);
            assert_int_equal(b.col, s[i].col);
            w += !rows[s[i].row]++;
            w += !cols[s[i].col]++;
        }
        widest = w > widest ? w : widest;
    }
    assert_each_once(seen, p);
    free(s);
    free(cols);
    free(rows);
    free(seen);
    return widest;
}

static void test_every_block_once(void **state)
{
    (void)state;
    for (uint32_t p = 1; p <= 64; p++)
        check_shares(p);
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
        check_shares(big[i]);
}

/* Powers of two: the shares are the interleave's (codes P*i .. P*(i+1)-1),
 * whichever decoder morton_share picked, and the halvings give the same. */
static void test_pow2_is_interleave(void **state)
{
    (void)state;
    for (uint32_t p = 1; p <= 1024; p *= 2) {
        morton_block_t *s = malloc(sizeof(*s) * p);
        assert_non_null(s);
        for (uint32_t r = 0; r < p; r++) {
            morton_share(p, r, s);
            for (uint32_t i = 0; i < p; i++) {
                morton_block_t b = morton_decode((uint64_t)p * r + i),
                               h = morton_block_halving(p, (uint64_t)p * r + i);
                assert_int_equal(s[i].row, b.row);
                assert_int_equal(s[i].col, b.col);
                assert_int_equal(h.row, b.row);
                assert_int_equal(h.col, b.col);
                assert_int_equal(morton_encode(s[i].row, s[i].col), (uint64_t)p * r + i);
            }
        }
        free(s);
    }
}

/* A share touches few rows and columns: exactly 2 sqrt(P) for P = 4^k,
 * 3 sqrt(P/2) for P = 2 * 4^k, and for other P (a share may straddle two
 * halvings) at most 4 ceil(sqrt(P)) (measured up to P = 2000: 3.67 sqrt(P)
 * at worst); the naive order (one source row per rank) touches 1 + P. */
static uint32_t isqrt_up(uint32_t p)
{
    uint32_t s = 0;

    while (s * s < p)
        s++;
    return s;
}

static void test_locality(void **state)
{
    (void)state;
    for (uint32_t p = 1; p <= 1000; p += p < 64 ? 1 : p < 128 ? 64 : 37) {
        uint32_t w = check_shares(p), bound = 4 * isqrt_up(p);
        if (p == 4 || p == 16 || p == 64 || p == 256)
            assert_int_equal(w, 2 * isqrt_up(p));
        if (p == 2 || p == 8 || p == 32 || p == 128 || p == 512)
            assert_int_equal(w, 3 * isqrt_up(p / 2));
        if (w > bound)
            fail_msg("P = %u: a share spans %u rows + columns, more than %u", p, w, bound);
    }
}

/* The allgather form reads the source's one block, the alltoall form the
 * source's block for the destination; both write the source's slot. */
static void test_offsets(void **state)
{
    morton_block_t b = {.row = 3, .col = 5};

    (void)state;
    assert_int_equal(morton_src_off(1, b, 100), 500);
    assert_int_equal(morton_src_off(0, b, 100), 0);
    assert_int_equal(morton_dst_off(b, 100), 300);
}

/* NUMA shares of p ranks on ns sockets, socket[q] for rank q. */
static void check_numa(uint32_t p, uint32_t ns, const uint32_t *socket)
{
    uint8_t *seen = calloc((size_t)p * p, 1);
    uint32_t *size = calloc(ns, sizeof(*size));
    morton_block_t *s = malloc(sizeof(*s) * p), *plain = malloc(sizeof(*plain) * p);

    assert_non_null(seen);
    assert_non_null(size);
    assert_non_null(s);
    assert_non_null(plain);
    for (uint32_t q = 0; q < p; q++)
        size[socket[q]]++;
    for (uint32_t r = 0; r < p; r++) {
        uint32_t me = socket[r], i = 0, k = 0;
        assert_int_equal(morton_numa_share(p, ns, socket, r, s), 0);
        for (uint32_t b = 0; b < p; b++) {
            while (k == size[(me + i) % ns]) { /* the next step */
                i++;
                k = 0;
            }
            k++;
            assert_true(s[b].row < p && s[b].col < p);
            assert_int_equal(seen[(size_t)s[b].row * p + s[b].col]++, 0);
            assert_int_equal(socket[s[b].col], me);            /* a socket-local write */
            assert_int_equal(socket[s[b].row], (me + i) % ns); /* from step i's socket */
        }
        if (ns == 1) {
            morton_share(p, r, plain);
            assert_memory_equal(s, plain, sizeof(*s) * p);
        }
    }
    assert_each_once(seen, p);
    free(plain);
    free(s);
    free(size);
    free(seen);
}

static void test_numa_shares(void **state)
{
    uint32_t socket[64];

    (void)state;
    for (uint32_t p = 1; p <= 64; p++) {
        for (uint32_t ns = 1; ns <= p && ns <= 4; ns++) {
            for (uint32_t q = 0; q < p; q++) /* consecutive, as equal as can be */
                socket[q] = q * ns / p;
            check_numa(p, ns, socket);
            for (uint32_t q = 0; q < p; q++) /* round robin */
                socket[q] = q % ns;
            check_numa(p, ns, socket);
        }
        for (uint32_t q = 0; q < p; q++) /* all but the last on socket 0 (3 + 1 at 4) */
            socket[q] = p > 1 && q == p - 1;
        check_numa(p, p > 1 ? 2 : 1, socket);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interleave),       cmocka_unit_test(test_bmi2_equal),
        cmocka_unit_test(test_every_block_once), cmocka_unit_test(test_pow2_is_interleave),
        cmocka_unit_test(test_locality),         cmocka_unit_test(test_offsets),
        cmocka_unit_test(test_numa_shares),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
