/* Unit tests of src/api/pap_stats.c, the arithmetic of arcoll-pap-report:
 * hand-made arrival patterns with known mean, average- and worst-case
 * imbalance (Qian and Afsahi §3.1, eq. 1-3), the factors against T, T between
 * measured sizes, and the grouping of calls by call site and by size. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/pap_stats.h"

#define EPS 1e-9

/* ---- one call ---------------------------------------------------------- */

static void test_one_late_rank(void **state)
{
    /* Three ranks at 0, one D = 400 ns late: a_bar = D/4, d_bar = 3D/8, theta = D. */
    const int64_t a[] = {0, 0, 0, 400};
    pap_imb_t imb;

    (void)state;
    pap_imbalance(a, 4, &imb);
    assert_int_equal(imb.base, 0);
    assert_float_equal(imb.mean_rel, 100.0, EPS);
    assert_float_equal(imb.avg, 150.0, EPS);
    assert_float_equal(imb.worst, 400.0, EPS);
    assert_int_equal(imb.first, 0);
    assert_int_equal(imb.last, 3);
    assert_float_equal(pap_lateness(&imb, a[3]), 300.0, EPS);
    assert_float_equal(pap_lateness(&imb, a[0]), -100.0, EPS);
}

static void test_spread_pattern(void **state)
{
    /* 10, 20, 30, 40, 100: a_bar = 40, |a_i - a_bar| = 30 20 10 0 60 -> d_bar = 24,
     * theta = 90. In any order. */
    const int64_t a[] = {40, 100, 10, 30, 20};
    pap_imb_t imb;

    (void)state;
    pap_imbalance(a, 5, &imb);
    assert_int_equal(imb.base, 10);
    assert_float_equal(imb.base + imb.mean_rel, 40.0, EPS);
    assert_float_equal(imb.avg, 24.0, EPS);
    assert_float_equal(imb.worst, 90.0, EPS);
    assert_int_equal(imb.first, 2);
    assert_int_equal(imb.last, 1);
}

static void test_balanced_and_single(void **state)
{
    const int64_t same[] = {777, 777, 777}, one[] = {-5};
    pap_imb_t imb;

    (void)state;
    pap_imbalance(same, 3, &imb);
    assert_float_equal(imb.avg, 0.0, EPS);
    assert_float_equal(imb.worst, 0.0, EPS);
    assert_int_equal(imb.first, 0); /* ties: the lowest index */
    assert_int_equal(imb.last, 0);
    pap_imbalance(one, 1, &imb);
    assert_int_equal(imb.base, -5);
    assert_float_equal(imb.mean_rel, 0.0, EPS);
    assert_float_equal(imb.avg, 0.0, EPS);
    assert_float_equal(imb.worst, 0.0, EPS);
}

static void test_large_clock_values(void **state)
{
    /* Common-clock times around 2^62 ns, some shifted below rank 0's by an
     * offset: exact to the nanosecond, as the arithmetic is relative. */
    const int64_t b = (int64_t)1 << 62;
    const int64_t a[] = {b + 3, b - 1, b + 1, b + 1};
    pap_imb_t imb;

    (void)state;
    pap_imbalance(a, 4, &imb);
    assert_int_equal(imb.base, b - 1);
    assert_float_equal(imb.mean_rel, 2.0, EPS); /* a_bar = b + 1 */
    assert_float_equal(imb.avg, 1.0, EPS);      /* |2| + |-2| + 0 + 0 over 4 */
    assert_float_equal(imb.worst, 4.0, EPS);
    assert_int_equal(imb.last, 0);
}

/* ---- T(size) ----------------------------------------------------------- */

static void test_t_interp(void **state)
{
    const uint64_t sizes[] = {8, 200, 1000};
    const double t[] = {1000, 1200, 2000};

    (void)state;
    assert_float_equal(pap_t_interp(sizes, t, 3, 8), 1000, EPS);
    assert_float_equal(pap_t_interp(sizes, t, 3, 200), 1200, EPS);
    assert_float_equal(pap_t_interp(sizes, t, 3, 1000), 2000, EPS);
    assert_float_equal(pap_t_interp(sizes, t, 3, 104), 1100, EPS); /* half way */
    assert_float_equal(pap_t_interp(sizes, t, 3, 600), 1600, EPS);
    assert_float_equal(pap_t_interp(sizes, t, 3, 1), 1000, EPS);    /* below: the smallest */
    assert_float_equal(pap_t_interp(sizes, t, 3, 1800), 2800, EPS); /* above: last slope */
    assert_float_equal(pap_t_interp(sizes, t, 1, 5000), 1000, EPS);
    assert_float_equal(pap_t_interp(sizes, t, 0, 8), 0, EPS);
    /* A last segment that falls never extrapolates below the largest size's T. */
    {
        const double down[] = {1000, 3000, 2000};
        assert_float_equal(pap_t_interp(sizes, down, 3, 5000), 2000, EPS);
    }
}

/* ---- grouping ---------------------------------------------------------- */

static void add_call(pap_table_t *by_site, pap_table_t *by_size, int type, const char *site,
                     uint64_t bytes, const int64_t *a, size_t n, double t)
{
    pap_imb_t imb;
    pap_row_t *row;

    pap_imbalance(a, n, &imb);
    row = pap_table_row(by_site, type, site, PAP_ANY_SIZE);
    assert_non_null(row);
    pap_row_add(row, bytes, &imb, t, 10.0);
    row = pap_table_row(by_size, type, NULL, bytes);
    assert_non_null(row);
    pap_row_add(row, bytes, &imb, t, 10.0);
}

static void test_group_by_site(void **state)
{
    /* Site strings from different ranks' files: equal by content, not pointer. */
    char site_a1[] = "main+0x10", site_a2[] = "main+0x10", site_b[] = "solver+0x2c";
    const int64_t late[] = {0, 0, 0, 400}, even[] = {0, 0, 0, 0}, pair[] = {0, 100};
    pap_table_t by_site = {0}, by_size = {0};
    const pap_row_t *r;

    (void)state;
    /* alltoall at main+0x10: 8 B with T = 100 (factors 1.5, 4), 200 B with T = 200
     * (0.75, 2), then a balanced 8 B call (0, 0). */
    add_call(&by_site, &by_size, 0, site_a1, 8, late, 4, 100);
    add_call(&by_site, &by_size, 0, site_a2, 200, late, 4, 200);
    add_call(&by_site, &by_size, 0, site_a1, 8, even, 4, 100);
    /* allgather at the same site and at solver+0x2c: other rows. */
    add_call(&by_site, &by_size, 1, site_a1, 64, pair, 2, 50);
    add_call(&by_site, &by_size, 0, site_b, 16, pair, 2, 0); /* T unknown */

    assert_int_equal(by_site.n, 3);
    pap_table_sort(&by_site);
    r = &by_site.rows[0]; /* alltoall main+0x10 */
    assert_int_equal(r->type, 0);
    assert_string_equal(r->site, "main+0x10");
    assert_int_equal(r->calls, 3);
    assert_float_equal(pap_row_avg_size(r), (8 + 200 + 8) / 3.0, EPS);
    /* Means of the per-call factors, not ratios of means. */
    assert_float_equal(pap_row_avg_factor(r), (1.5 + 0.75 + 0) / 3, EPS);
    assert_float_equal(pap_row_worst_factor(r), (4 + 2 + 0) / 3.0, EPS);
    assert_float_equal(r->sum_avg_ns / (double)r->calls, (150 + 150 + 0) / 3.0, EPS);
    assert_float_equal(r->sum_worst_ns / (double)r->calls, (400 + 400 + 0) / 3.0, EPS);
    r = &by_site.rows[1]; /* alltoall solver+0x2c, no T: no factors */
    assert_string_equal(r->site, "solver+0x2c");
    assert_int_equal(r->calls, 1);
    assert_int_equal(r->calls_t, 0);
    assert_true(pap_row_avg_factor(r) < 0);
    assert_true(pap_row_worst_factor(r) < 0);
    assert_float_equal(r->sum_worst_ns, 100, EPS);
    r = &by_site.rows[2]; /* allgather main+0x10: d_bar = 50, theta = 100, T = 50 */
    assert_int_equal(r->type, 1);
    assert_float_equal(pap_row_avg_factor(r), 1.0, EPS);
    assert_float_equal(pap_row_worst_factor(r), 2.0, EPS);
    assert_float_equal(pap_row_avg_size(r), 64, EPS);

    /* By size: alltoall 8 (2 calls), 16, 200; allgather 64. */
    assert_int_equal(by_size.n, 4);
    pap_table_sort(&by_size);
    assert_int_equal(by_size.rows[0].size, 8);
    assert_int_equal(by_size.rows[0].calls, 2);
    assert_float_equal(pap_row_avg_factor(&by_size.rows[0]), 0.75, EPS);
    assert_float_equal(pap_row_worst_factor(&by_size.rows[0]), 2.0, EPS);
    assert_float_equal(by_size.rows[0].sum_t_ns / (double)by_size.rows[0].calls_t, 100, EPS);
    assert_int_equal(by_size.rows[1].size, 16);
    assert_int_equal(by_size.rows[2].size, 200);
    assert_int_equal(by_size.rows[3].type, 1);
    assert_float_equal(by_size.rows[3].sum_time_ns, 10.0, EPS);
    assert_null(by_size.rows[3].site);

    pap_table_free(&by_site);
    pap_table_free(&by_size);
    assert_int_equal(by_site.n, 0);
    assert_null(by_site.rows);
}

static void test_many_rows(void **state)
{
    /* More rows than the first allocation: rows stay found and counted. */
    pap_table_t tab = {0};
    const int64_t a[] = {0, 10};
    pap_imb_t imb;
    char names[100][16];

    (void)state;
    pap_imbalance(a, 2, &imb);
    for (int rep = 0; rep < 2; rep++)
        for (int i = 99; i >= 0; i--) {
            snprintf(names[i], sizeof(names[i]), "f%03d+0x1", i);
            pap_row_t *row = pap_table_row(&tab, i % 2, names[i], PAP_ANY_SIZE);
            assert_non_null(row);
            pap_row_add(row, (uint64_t)i + 1, &imb, 10, 0);
        }
    assert_int_equal(tab.n, 100);
    pap_table_sort(&tab);
    for (size_t i = 0; i < tab.n; i++) {
        assert_int_equal(tab.rows[i].calls, 2);
        assert_float_equal(pap_row_worst_factor(&tab.rows[i]), 1.0, EPS);
        if (i > 0 && tab.rows[i].type == tab.rows[i - 1].type)
            assert_true(strcmp(tab.rows[i - 1].site, tab.rows[i].site) < 0);
    }
    assert_int_equal(tab.rows[0].type, 0);
    assert_int_equal(tab.rows[99].type, 1);
    pap_table_free(&tab);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_late_rank),
        cmocka_unit_test(test_spread_pattern),
        cmocka_unit_test(test_balanced_and_single),
        cmocka_unit_test(test_large_clock_values),
        cmocka_unit_test(test_t_interp),
        cmocka_unit_test(test_group_by_site),
        cmocka_unit_test(test_many_rows),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
