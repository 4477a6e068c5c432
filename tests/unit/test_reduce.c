/* Unit tests of src/engine/reduce.c: every dtype x op against a scalar
 * reference, at every alignment of either buffer, plus the edge cases the
 * header promises (wrapping, NaN, signed zeros) and the argument checks. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "arcoll.h"
#include "engine/reduce.h"
#include "util/log.h"

#define GUARD      16 /* bytes checked on each side of a buffer */
#define GUARD_BYTE 0xa5
#define MAX_COUNT  1000

static int op_is_bitwise(arcoll_op_t op)
{
    return op == ARCOLL_BAND || op == ARCOLL_BOR || op == ARCOLL_BXOR;
}

static int dtype_is_float(arcoll_dtype_t d)
{
    return d == ARCOLL_FLOAT || d == ARCOLL_DOUBLE;
}

/* The reference computes in wider or differently written arithmetic than
 * the kernels, one element at a time. */
static int32_t ref_i32(arcoll_op_t op, int32_t x, int32_t y)
{
    int64_t wx = x, wy = y;
    switch (op) {
    case ARCOLL_SUM: return (int32_t)(uint32_t)(uint64_t)(wx + wy);
    case ARCOLL_PROD: return (int32_t)(uint32_t)(uint64_t)(wx * wy);
    case ARCOLL_MIN: return wx <= wy ? x : y;
    case ARCOLL_MAX: return wx >= wy ? x : y;
    case ARCOLL_BAND: return (int32_t)((uint32_t)x & (uint32_t)y);
    case ARCOLL_BOR: return (int32_t)((uint32_t)x | (uint32_t)y);
    case ARCOLL_BXOR: return (int32_t)((uint32_t)x ^ (uint32_t)y);
    default: fail(); return 0;
    }
}

static uint64_t ref_u64(arcoll_op_t op, uint64_t x, uint64_t y)
{
    switch (op) {
    case ARCOLL_SUM: return x + y;
    case ARCOLL_PROD: return x * y;
    case ARCOLL_MIN: return x <= y ? x : y;
    case ARCOLL_MAX: return x >= y ? x : y;
    case ARCOLL_BAND: return x & y;
    case ARCOLL_BOR: return x | y;
    case ARCOLL_BXOR: return x ^ y;
    default: fail(); return 0;
    }
}

static int64_t ref_i64(arcoll_op_t op, int64_t x, int64_t y)
{
    switch (op) {
    case ARCOLL_MIN: return x <= y ? x : y;
    case ARCOLL_MAX: return x >= y ? x : y;
    default: return (int64_t)ref_u64(op, (uint64_t)x, (uint64_t)y);
    }
}

static double ref_fp(arcoll_op_t op, double x, double y)
{
    switch (op) {
    case ARCOLL_SUM: return x + y;
    case ARCOLL_PROD: return x * y;
    case ARCOLL_MIN: return isnan(x) || isnan(y) ? NAN : (x <= y ? x : y);
    case ARCOLL_MAX: return isnan(x) || isnan(y) ? NAN : (x >= y ? x : y);
    default: fail(); return 0;
    }
}

/* Element i of a and b in the reference; accesses go through memcpy as the
 * buffers may be misaligned. */
static void ref_apply(arcoll_dtype_t d, arcoll_op_t op, unsigned char *a, const unsigned char *b,
                      size_t count)
{
    size_t size = arcoll_dtype_size(d);
    for (size_t i = 0; i < count; i++, a += size, b += size) {
        switch (d) {
        case ARCOLL_INT32: {
            int32_t x, y;
            memcpy(&x, a, 4), memcpy(&y, b, 4);
            x = ref_i32(op, x, y);
            memcpy(a, &x, 4);
            break;
        }
        case ARCOLL_INT64: {
            int64_t x, y;
            memcpy(&x, a, 8), memcpy(&y, b, 8);
            x = ref_i64(op, x, y);
            memcpy(a, &x, 8);
            break;
        }
        case ARCOLL_UINT64: {
            uint64_t x, y;
            memcpy(&x, a, 8), memcpy(&y, b, 8);
            x = ref_u64(op, x, y);
            memcpy(a, &x, 8);
            break;
        }
        case ARCOLL_FLOAT: {
            float x, y;
            memcpy(&x, a, 4), memcpy(&y, b, 4);
            /* Rounding to double, then float, equals rounding to float once for +
             * and * (53 >= 2 * 24 + 2). */
            x = (float)ref_fp(op, x, y);
            memcpy(a, &x, 4);
            break;
        }
        case ARCOLL_DOUBLE: {
            double x, y;
            memcpy(&x, a, 8), memcpy(&y, b, 8);
            x = ref_fp(op, x, y);
            memcpy(a, &x, 8);
            break;
        }
        default: fail();
        }
    }
}

static uint64_t rng_next(uint64_t *s)
{
    /* xorshift64*: reproducible inputs without libc's rand(). */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

/* Values that exercise signs, extremes and overflow; floats stay finite so
 * that results compare exactly (NaN has its own test). */
static void fill(arcoll_dtype_t d, unsigned char *p, size_t count, uint64_t *seed)
{
    size_t size = arcoll_dtype_size(d);
    for (size_t i = 0; i < count; i++, p += size) {
        uint64_t r = rng_next(seed);
        if (d == ARCOLL_FLOAT) {
            float v = (float)((int64_t)(r >> 40) - (1 << 23)) / 1024.0f;
            memcpy(p, &v, 4);
        } else if (d == ARCOLL_DOUBLE) {
            double v = (double)((int64_t)(r >> 11) - (INT64_C(1) << 52)) / 65536.0;
            memcpy(p, &v, 8);
        } else {
            if (i % 5 == 0) /* small values, so that products do not always wrap to 0 */
                r = (uint64_t)((int64_t)(r % 201) - 100);
            memcpy(p, &r, size); /* little end of r for int32 */
        }
    }
}

static int same_elements(arcoll_dtype_t d, const unsigned char *x, const unsigned char *y,
                         size_t count)
{
    size_t size = arcoll_dtype_size(d);
    for (size_t i = 0; i < count; i++, x += size, y += size) {
        if (d == ARCOLL_FLOAT) {
            float u, v;
            memcpy(&u, x, 4), memcpy(&v, y, 4);
            if (isnan(u) && isnan(v))
                continue;
        } else if (d == ARCOLL_DOUBLE) {
            double u, v;
            memcpy(&u, x, 8), memcpy(&v, y, 8);
            if (isnan(u) && isnan(v))
                continue;
        }
        if (memcmp(x, y, size) != 0) {
            print_error("element %zu differs\n", i);
            return 0;
        }
    }
    return 1;
}

static void check_guards(const unsigned char *buf, size_t off, size_t bytes)
{
    for (size_t i = 0; i < GUARD + off; i++)
        assert_int_equal(buf[i], GUARD_BYTE);
    for (size_t i = GUARD + off + bytes; i < GUARD + off + bytes + GUARD; i++)
        assert_int_equal(buf[i], GUARD_BYTE);
}

/* One dtype x op x count at offsets aoff, boff from 64-byte aligned bases. */
static void run_case(arcoll_dtype_t d, arcoll_op_t op, size_t count, size_t aoff, size_t boff,
                     uint64_t *seed)
{
    enum { CAP = 2 * GUARD + 8 + MAX_COUNT * 8 };
    static _Alignas(64) unsigned char a[CAP], b[CAP], want[CAP], b_copy[CAP];
    size_t bytes = count * arcoll_dtype_size(d);

    memset(a, GUARD_BYTE, sizeof(a));
    memset(b, GUARD_BYTE, sizeof(b));
    fill(d, a + GUARD + aoff, count, seed);
    fill(d, b + GUARD + boff, count, seed);
    memcpy(want, a + GUARD + aoff, bytes);
    memcpy(b_copy, b, sizeof(b));
    ref_apply(d, op, want, b + GUARD + boff, count);

    reduce_apply(d, op, a + GUARD + aoff, b + GUARD + boff, count);

    if (!same_elements(d, a + GUARD + aoff, want, count))
        fail_msg("%s %s count %zu offsets %zu/%zu", reduce_dtype_name(d), reduce_op_name(op), count,
                 aoff, boff);
    check_guards(a, aoff, bytes);
    assert_memory_equal(b, b_copy, sizeof(b)); /* in is read only */
}

static void test_all_against_reference(void **state)
{
    static const size_t counts[] = {0, 1, 7, 64, 1000};
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int cases = 0;
    (void)state;
    core_log_level = CORE_LOG_NONE;
    for (int d = 0; d < ARCOLL_DTYPE_COUNT; d++) {
        for (int op = 0; op < ARCOLL_OP_COUNT; op++) {
            if (dtype_is_float(d) && op_is_bitwise(op))
                continue;
            assert_int_equal(reduce_check(d, op, "test"), ARCOLL_OK);
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                for (size_t aoff = 0; aoff < 8; aoff++) {
                    for (size_t boff = 0; boff < 8; boff++) {
                        run_case(d, op, counts[c], aoff, boff, &seed);
                        cases++;
                    }
                }
            }
        }
    }
    assert_int_equal(cases, (3 * 7 + 2 * 4) * 5 * 64);
}

static void test_signed_wrap(void **state)
{
    int32_t a32[3] = {INT32_MAX, INT32_MIN, INT32_MIN};
    const int32_t b32[3] = {1, -1, 0};
    int64_t a64[2] = {INT64_MAX, INT64_MIN};
    const int64_t b64[2] = {1, -1};
    uint64_t u64 = UINT64_MAX;
    const uint64_t one = 1;
    (void)state;

    reduce_apply(ARCOLL_INT32, ARCOLL_SUM, a32, b32, 3);
    assert_int_equal(a32[0], INT32_MIN);
    assert_int_equal(a32[1], INT32_MAX);
    assert_int_equal(a32[2], INT32_MIN);
    int32_t p32[2] = {INT32_MIN, 65536};
    const int32_t q32[2] = {-1, 65536};
    reduce_apply(ARCOLL_INT32, ARCOLL_PROD, p32, q32, 2);
    assert_int_equal(p32[0], INT32_MIN); /* -INT32_MIN wraps to itself */
    assert_int_equal(p32[1], 0);         /* 2^32 */

    reduce_apply(ARCOLL_INT64, ARCOLL_SUM, a64, b64, 2);
    assert_true(a64[0] == INT64_MIN);
    assert_true(a64[1] == INT64_MAX);
    int64_t p64 = INT64_MIN;
    const int64_t m1 = -1;
    reduce_apply(ARCOLL_INT64, ARCOLL_PROD, &p64, &m1, 1);
    assert_true(p64 == INT64_MIN);

    reduce_apply(ARCOLL_UINT64, ARCOLL_SUM, &u64, &one, 1);
    assert_true(u64 == 0);
}

static void test_min_max_signs(void **state)
{
    int32_t a32[4] = {-5, 3, -7, INT32_MIN};
    const int32_t b32[4] = {2, -4, -6, INT32_MAX};
    int64_t a64[2] = {-1, INT64_MIN};
    const int64_t b64[2] = {1, 0};
    uint64_t u[2] = {UINT64_MAX, 1};
    const uint64_t v[2] = {1, UINT64_MAX - 1}; /* above INT64_MAX: compared unsigned */
    (void)state;

    int32_t m32[4];
    memcpy(m32, a32, sizeof(m32));
    reduce_apply(ARCOLL_INT32, ARCOLL_MIN, m32, b32, 4);
    assert_int_equal(m32[0], -5);
    assert_int_equal(m32[1], -4);
    assert_int_equal(m32[2], -7);
    assert_int_equal(m32[3], INT32_MIN);
    reduce_apply(ARCOLL_INT32, ARCOLL_MAX, a32, b32, 4);
    assert_int_equal(a32[0], 2);
    assert_int_equal(a32[1], 3);
    assert_int_equal(a32[2], -6);
    assert_int_equal(a32[3], INT32_MAX);

    reduce_apply(ARCOLL_INT64, ARCOLL_MIN, a64, b64, 2);
    assert_true(a64[0] == -1 && a64[1] == INT64_MIN);
    reduce_apply(ARCOLL_INT64, ARCOLL_MAX, a64, b64, 2);
    assert_true(a64[0] == 1 && a64[1] == 0);

    uint64_t w[2] = {u[0], u[1]};
    reduce_apply(ARCOLL_UINT64, ARCOLL_MIN, w, v, 2);
    assert_true(w[0] == 1 && w[1] == 1);
    reduce_apply(ARCOLL_UINT64, ARCOLL_MAX, u, v, 2);
    assert_true(u[0] == UINT64_MAX && u[1] == UINT64_MAX - 1);
}

static void test_float_values(void **state)
{
    float f[4] = {0.5f, -1.25f, 3.0f, 1e30f};
    const float g[4] = {0.25f, 2.0f, -3.0f, 1e30f};
    double x[3] = {0.1, -2.5, 1e300};
    const double y[3] = {0.2, 4.0, 1e300};
    (void)state;

    reduce_apply(ARCOLL_FLOAT, ARCOLL_SUM, f, g, 4);
    assert_true(f[0] == 0.75f && f[1] == 0.75f && f[2] == 0.0f && f[3] == 2e30f);
    reduce_apply(ARCOLL_FLOAT, ARCOLL_PROD, f, g, 4);
    assert_true(f[0] == 0.1875f && f[1] == 1.5f && f[2] == 0.0f && isinf(f[3]));
    reduce_apply(ARCOLL_DOUBLE, ARCOLL_SUM, x, y, 3);
    assert_true(x[0] == 0.1 + 0.2 && x[1] == 1.5 && x[2] == 2e300);
    reduce_apply(ARCOLL_DOUBLE, ARCOLL_PROD, x, y, 3);
    assert_true(x[0] == (0.1 + 0.2) * 0.2 && x[1] == 6.0 && isinf(x[2]));
    reduce_apply(ARCOLL_DOUBLE, ARCOLL_MIN, x, y, 3);
    assert_true(x[0] == (0.1 + 0.2) * 0.2 && x[1] == 4.0 && x[2] == 1e300);
    reduce_apply(ARCOLL_DOUBLE, ARCOLL_MAX, x, (const double[]){-1.0, 5.0, -INFINITY}, 3);
    assert_true(x[0] == (0.1 + 0.2) * 0.2 && x[1] == 5.0 && x[2] == 1e300);
}

/* A NaN in either operand propagates; signed zeros keep inout's value. */
static void test_float_nan_and_zero(void **state)
{
    (void)state;
    for (int op = ARCOLL_MIN; op <= ARCOLL_MAX; op++) {
        float f[5] = {NAN, 1.0f, NAN, -0.0f, 0.0f};
        const float g[5] = {1.0f, NAN, NAN, 0.0f, -0.0f};
        double x[5] = {NAN, -1.0, NAN, -0.0, 0.0};
        const double y[5] = {-1.0, NAN, NAN, 0.0, -0.0};

        reduce_apply(ARCOLL_FLOAT, op, f, g, 5);
        reduce_apply(ARCOLL_DOUBLE, op, x, y, 5);
        for (int i = 0; i < 3; i++) {
            assert_true(isnan(f[i]));
            assert_true(isnan(x[i]));
        }
        assert_true(f[3] == 0.0f && signbit(f[3]));
        assert_true(f[4] == 0.0f && !signbit(f[4]));
        assert_true(x[3] == 0.0 && signbit(x[3]));
        assert_true(x[4] == 0.0 && !signbit(x[4]));
    }
    /* The same through the staged (misaligned) path. */
    _Alignas(8) unsigned char buf[2 * sizeof(double) + 1], in[2 * sizeof(double) + 3];
    const double a[2] = {1.0, NAN}, b[2] = {NAN, 2.0};
    memcpy(buf + 1, a, sizeof(a));
    memcpy(in + 3, b, sizeof(b));
    reduce_apply(ARCOLL_DOUBLE, ARCOLL_MAX, buf + 1, in + 3, 2);
    double r[2];
    memcpy(r, buf + 1, sizeof(r));
    assert_true(isnan(r[0]) && isnan(r[1]));
}

static void test_check_rejects(void **state)
{
    (void)state;
    core_log_level = CORE_LOG_NONE; /* the rejections below are expected */
    for (int op = ARCOLL_BAND; op <= ARCOLL_BXOR; op++) {
        assert_int_equal(reduce_check(ARCOLL_FLOAT, op, "allreduce"), ARCOLL_ERR_INVALID);
        assert_int_equal(reduce_check(ARCOLL_DOUBLE, op, "allreduce"), ARCOLL_ERR_INVALID);
        assert_int_equal(reduce_check(ARCOLL_INT32, op, "allreduce"), ARCOLL_OK);
        assert_int_equal(reduce_check(ARCOLL_INT64, op, "allreduce"), ARCOLL_OK);
        assert_int_equal(reduce_check(ARCOLL_UINT64, op, "allreduce"), ARCOLL_OK);
    }
    assert_int_equal(reduce_check(ARCOLL_FLOAT, ARCOLL_BXOR, "allreduce"), ARCOLL_ERR_INVALID);
    assert_string_equal(core_error_last(), "allreduce: bxor is not defined on float");
    assert_int_equal(reduce_check(ARCOLL_DOUBLE, ARCOLL_BAND, "reduce_scatter_block"),
                     ARCOLL_ERR_INVALID);
    assert_string_equal(core_error_last(), "reduce_scatter_block: band is not defined on double");

    assert_int_equal(reduce_check((arcoll_dtype_t)-1, ARCOLL_SUM, "allreduce"), ARCOLL_ERR_INVALID);
    assert_string_equal(core_error_last(), "allreduce: invalid dtype -1");
    assert_int_equal(reduce_check(ARCOLL_DTYPE_COUNT, ARCOLL_SUM, "allreduce"), ARCOLL_ERR_INVALID);
    assert_int_equal(reduce_check(ARCOLL_INT32, (arcoll_op_t)-3, "allreduce"), ARCOLL_ERR_INVALID);
    assert_string_equal(core_error_last(), "allreduce: invalid op -3");
    assert_int_equal(reduce_check(ARCOLL_INT32, ARCOLL_OP_COUNT, "allreduce"), ARCOLL_ERR_INVALID);
    assert_int_equal(reduce_check(ARCOLL_DOUBLE, (arcoll_op_t)1000, NULL), ARCOLL_ERR_INVALID);
    assert_non_null(strstr(core_error_last(), "invalid op 1000"));

    /* An unchecked invalid pair writes nothing. */
    double d = 1.5;
    const double e = 2.5;
    reduce_apply(ARCOLL_DOUBLE, ARCOLL_BXOR, &d, &e, 1);
    reduce_apply((arcoll_dtype_t)77, ARCOLL_SUM, &d, &e, 1);
    reduce_apply(ARCOLL_DOUBLE, ARCOLL_OP_COUNT, &d, &e, 1);
    assert_true(d == 1.5);
}

static void test_names_and_sizes(void **state)
{
    (void)state;
    assert_int_equal(arcoll_dtype_size(ARCOLL_INT32), 4);
    assert_int_equal(arcoll_dtype_size(ARCOLL_INT64), 8);
    assert_int_equal(arcoll_dtype_size(ARCOLL_UINT64), 8);
    assert_int_equal(arcoll_dtype_size(ARCOLL_FLOAT), 4);
    assert_int_equal(arcoll_dtype_size(ARCOLL_DOUBLE), 8);
    assert_int_equal(arcoll_dtype_size(ARCOLL_DTYPE_COUNT), 0);
    assert_int_equal(arcoll_dtype_size((arcoll_dtype_t)-1), 0);

    assert_string_equal(reduce_dtype_name(ARCOLL_INT32), "int32");
    assert_string_equal(reduce_dtype_name(ARCOLL_UINT64), "uint64");
    assert_string_equal(reduce_dtype_name(ARCOLL_DOUBLE), "double");
    assert_string_equal(reduce_dtype_name((arcoll_dtype_t)-1), "invalid");
    assert_string_equal(reduce_op_name(ARCOLL_SUM), "sum");
    assert_string_equal(reduce_op_name(ARCOLL_BXOR), "bxor");
    assert_string_equal(reduce_op_name(ARCOLL_OP_COUNT), "invalid");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_against_reference), cmocka_unit_test(test_signed_wrap),
        cmocka_unit_test(test_min_max_signs),         cmocka_unit_test(test_float_values),
        cmocka_unit_test(test_float_nan_and_zero),    cmocka_unit_test(test_check_rejects),
        cmocka_unit_test(test_names_and_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
