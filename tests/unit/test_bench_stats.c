/* Unit tests of bench/bench_stats.c: the arithmetic behind arcoll-bench's
 * columns (delays, arrival bounds, latency statistics, ratios, sweeps). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench/bench_stats.h"

#define EPS 1e-9

static void test_uniform_range_and_determinism(void **state)
{
    double sum = 0;
    (void)state;
    for (uint64_t i = 0; i < 100000; i++) {
        double u = bstat_uniform(7, i % 13, i);
        assert_true(u >= 0 && u < 1);
        assert_true(u == bstat_uniform(7, i % 13, i));
        sum += u;
    }
    /* Mean of 1e5 uniforms: 0.5 within many standard errors (0.0009). */
    assert_true(fabs(sum / 100000 - 0.5) < 0.01);
    assert_true(bstat_uniform(1, 0, 0) != bstat_uniform(2, 0, 0));
    assert_true(bstat_uniform(1, 0, 1) != bstat_uniform(1, 1, 0));
}

static void test_bounds_from_arrivals(void **state)
{
    double arrive[4] = {10.0, 13.5, 11.0, 12.0}, bound[4];
    (void)state;
    bstat_bounds(arrive, 4, bound);
    assert_float_equal(bound[0], 3.5, EPS);
    assert_float_equal(bound[1], 0.0, EPS); /* the last rank to arrive waits for nobody */
    assert_float_equal(bound[2], 2.5, EPS);
    assert_float_equal(bound[3], 1.5, EPS);
    /* One rank: nothing to wait for. */
    bstat_bounds(arrive, 1, bound);
    assert_float_equal(bound[0], 0.0, EPS);
}

static void test_point_mean_min_max(void **state)
{
    /* 2 iterations x 3 ranks. */
    const double arrive[6] = {0, 4, 1, /* it 1 */ 100, 100, 106};
    const double lat[6] = {10, 6, 11, /* it 1 */ 20, 22, 14};
    double scratch[3];
    bstat_point_t p;
    (void)state;
    assert_int_equal(bstat_point(arrive, lat, 2, 3, scratch, &p), 0);
    assert_float_equal(p.lat_mean, (10 + 6 + 11 + 20 + 22 + 14) / 6.0, EPS);
    /* Per-rank means: 15, 14, 12.5. */
    assert_float_equal(p.lat_rank_min, 12.5, EPS);
    assert_float_equal(p.lat_rank_max, 15.0, EPS);
    /* Bounds: it 0 {4, 0, 3}, it 1 {6, 6, 0}. */
    assert_float_equal(p.bound_mean, (4 + 0 + 3 + 6 + 6 + 0) / 6.0, EPS);
    assert_int_equal(p.iters, 2);
    assert_int_equal(bstat_point(arrive, lat, 0, 3, scratch, &p), -1);
    assert_int_equal(bstat_point(arrive, lat, 2, 0, scratch, &p), -1);
}

/* The median statistic ignores one iteration that lost its core. */
static void test_point_median(void **state)
{
    /* 3 iterations x 2 ranks; iteration 1 preempted (1000 us). */
    const double arrive[6] = {0, 2, /* it 1 */ 5, 5, /* it 2 */ 9, 1};
    const double lat[6] = {10, 12, /* it 1 */ 1000, 1000, /* it 2 */ 14, 10};
    double scratch[6], lm, bm;
    (void)state;
    assert_int_equal(bstat_point_median(arrive, lat, 3, 2, scratch, &lm, &bm), 0);
    assert_float_equal(lm, 12, EPS); /* rank means 11, 1000, 12 */
    assert_float_equal(bm, 1, EPS);  /* bound means 1, 0, 4 */
    assert_int_equal(bstat_point_median(arrive, lat, 0, 2, scratch, &lm, &bm), -1);
}

static void test_point_bound_is_time_base_invariant(void **state)
{
    /* Shifting one iteration's arrivals by a constant (another clock origin,
     * or delays measured from the barrier) must not change the bound. */
    double a1[4] = {5, 7, 5, 9}, a2[4] = {1005, 1007, 1005, 1009};
    double lat[4] = {1, 1, 1, 1}, scratch[4];
    bstat_point_t p1, p2;
    (void)state;
    bstat_point(a1, lat, 1, 4, scratch, &p1);
    bstat_point(a2, lat, 1, 4, scratch, &p2);
    assert_float_equal(p1.bound_mean, p2.bound_mean, EPS);
    assert_float_equal(p1.bound_mean, (4 + 2 + 4 + 0) / 4.0, EPS);
}

static void test_ratio_columns(void **state)
{
    (void)state;
    /* baseline / alg: 2 means the algorithm is twice as fast as the baseline. */
    assert_float_equal(bstat_ratio(100.0, 50.0), 2.0, EPS);
    assert_float_equal(bstat_ratio(30.0, 20.0), 1.5, EPS);
    /* No bound (one rank, or no skew at all) gives no ratio, not infinity. */
    assert_true(isnan(bstat_ratio(10.0, 0.0)));
    assert_true(isnan(bstat_ratio(10.0, -1.0)));
    assert_true(isnan(bstat_ratio(NAN, 1.0)));
    assert_true(isnan(bstat_ratio(1.0, INFINITY)));
    assert_true(isnan(bstat_ratio(0.0, 1.0)));
}

static void test_mean_bound_column(void **state)
{
    bstat_point_t res[3] = {{.bound_mean = 10}, {.bound_mean = 12}, {.bound_mean = 20}};
    (void)state;
    assert_float_equal(bstat_mean_bound(res, 3), 14.0, EPS);
    assert_float_equal(bstat_mean_bound(res, 1), 10.0, EPS);
    assert_true(isnan(bstat_mean_bound(res, 0)));
}

static void test_random_delays_bounded(void **state)
{
    bstat_skew_t sk = {BSTAT_SKEW_RANDOM, 32, 0, 12345};
    double d[16], lo = INFINITY, hi = 0;
    int perm[16];
    (void)state;
    for (uint64_t it = 0; it < 2000; it++) {
        bstat_delays(&sk, it, 16, 2.5, perm, d);
        for (int r = 0; r < 16; r++) {
            assert_true(d[r] >= 0 && d[r] < 32 * 2.5);
            lo = fmin(lo, d[r]);
            hi = fmax(hi, d[r]);
        }
    }
    /* The bound is actually approached from both ends. */
    assert_true(lo < 0.01 * 80 && hi > 0.99 * 80);
    /* Fresh every iteration, and a pure function of (seed, rank, iter). */
    double a[16], b[16], c[16];
    bstat_delays(&sk, 3, 16, 2.5, perm, a);
    bstat_delays(&sk, 4, 16, 2.5, perm, b);
    bstat_delays(&sk, 3, 16, 2.5, perm, c);
    assert_memory_equal(a, c, sizeof(a));
    assert_memory_not_equal(a, b, sizeof(a));
    for (int r = 0; r < 16; r++)
        assert_true(a[r] == 2.5 * 32 * bstat_uniform(12345, (uint64_t)r, 3));
}

static void test_mif_zero_is_no_skew(void **state)
{
    bstat_skew_t rnd = {BSTAT_SKEW_RANDOM, 0, 0, 9};
    bstat_skew_t late = {BSTAT_SKEW_LATE, 0, 0.5, 9};
    double d[8];
    int perm[8];
    (void)state;
    bstat_delays(&rnd, 1, 8, 3.0, perm, d);
    for (int r = 0; r < 8; r++)
        assert_true(d[r] == 0);
    bstat_delays(&late, 1, 8, 3.0, perm, d);
    for (int r = 0; r < 8; r++)
        assert_true(d[r] == 0);
}

static void test_nlate_rounding(void **state)
{
    (void)state;
    assert_int_equal(bstat_nlate(0.25, 4), 1);
    assert_int_equal(bstat_nlate(0.75, 4), 3);
    assert_int_equal(bstat_nlate(0.25, 8), 2);
    assert_int_equal(bstat_nlate(0.25, 3), 1); /* 0.75 -> 1 */
    assert_int_equal(bstat_nlate(0.75, 3), 2); /* 2.25 -> 2 */
    assert_int_equal(bstat_nlate(0.5, 3), 2);  /* 1.5 -> 2: halves round away from 0 */
    assert_int_equal(bstat_nlate(0.25, 2), 1); /* 0.5 -> 1 */
    assert_int_equal(bstat_nlate(0.1, 4), 0);  /* 0.4 -> 0 */
    assert_int_equal(bstat_nlate(1.0, 5), 5);
    assert_int_equal(bstat_nlate(1.5, 5), 5); /* clamped */
    assert_int_equal(bstat_nlate(0.0, 5), 0);
    assert_int_equal(bstat_nlate(-0.5, 5), 0);
    assert_int_equal(bstat_nlate(NAN, 5), 0);
    assert_int_equal(bstat_nlate(0.5, 0), 0);
}

static void test_late_delays(void **state)
{
    const int n = 12;
    const double fracs[] = {0.25, 0.75, 0.5, 1.0, 0.0, 0.3};
    double d[12];
    int perm[12], hits[12] = {0};
    (void)state;
    for (size_t f = 0; f < sizeof(fracs) / sizeof(fracs[0]); f++) {
        bstat_skew_t sk = {BSTAT_SKEW_LATE, 128, fracs[f], 42};
        for (uint64_t it = 0; it < 500; it++) {
            int late = 0;
            bstat_delays(&sk, it, n, 1.5, perm, d);
            for (int r = 0; r < n; r++) {
                /* Late ranks are late by exactly MIF x T; the rest on time. */
                assert_true(d[r] == 0 || d[r] == 128 * 1.5);
                late += d[r] > 0;
                if (fracs[f] == 0.25)
                    hits[r] += d[r] > 0;
            }
            assert_int_equal(late, bstat_nlate(fracs[f], n));
        }
    }
    /* The late set moves around: every rank is late sometimes at 25%. */
    for (int r = 0; r < n; r++)
        assert_true(hits[r] > 500 * 3 / 12 / 3);
}

static void test_late_set_deterministic_from_seed(void **state)
{
    bstat_skew_t sk = {BSTAT_SKEW_LATE, 16, 0.25, 1};
    double a[8], b[8];
    int perm[8], differ = 0;
    (void)state;
    /* Same seed and iteration: the same late ranks, as each rank computes it. */
    for (uint64_t it = 0; it < 50; it++) {
        bstat_delays(&sk, it, 8, 1.0, perm, a);
        bstat_delays(&sk, it, 8, 1.0, perm, b);
        assert_memory_equal(a, b, sizeof(a));
    }
    /* Another seed: another sequence of late sets. */
    for (uint64_t it = 0; it < 50; it++) {
        sk.seed = 1;
        bstat_delays(&sk, it, 8, 1.0, perm, a);
        sk.seed = 2;
        bstat_delays(&sk, it, 8, 1.0, perm, b);
        differ += memcmp(a, b, sizeof(a)) != 0;
    }
    assert_true(differ > 25);
}

static void test_iters_by_size(void **state)
{
    (void)state;
    assert_int_equal(bstat_iters(1, 1000), 1000);
    assert_int_equal(bstat_iters(8192, 1000), 1000);
    assert_int_equal(bstat_iters(8193, 1000), 100);
    assert_int_equal(bstat_iters(1 << 20, 200), 20);
    assert_int_equal(bstat_iters(1 << 20, 5), 1);
    assert_int_equal(bstat_iters(1 << 20, 0), 0); /* no warm-up stays none */
    assert_int_equal(bstat_iters(16, 0), 0);
}

static void test_median(void **state)
{
    double odd[5] = {5, 1, 4, 2, 3}, even[4] = {10, 1, 3, 2}, one[1] = {7};
    (void)state;
    assert_float_equal(bstat_median(odd, 5), 3, EPS);
    assert_float_equal(bstat_median(even, 4), 2.5, EPS);
    assert_float_equal(bstat_median(one, 1), 7, EPS);
    assert_true(isnan(bstat_median(one, 0)));
}

static void test_parse_size(void **state)
{
    size_t v = 0;
    (void)state;
    assert_int_equal(bstat_parse_size("64", &v), 0);
    assert_int_equal(v, 64);
    assert_int_equal(bstat_parse_size("4k", &v), 0);
    assert_int_equal(v, 4096);
    assert_int_equal(bstat_parse_size("1M", &v), 0);
    assert_int_equal(v, 1 << 20);
    assert_int_equal(bstat_parse_size("", &v), -1);
    assert_int_equal(bstat_parse_size("-1", &v), -1);
    assert_int_equal(bstat_parse_size("4kb", &v), -1);
    assert_int_equal(bstat_parse_size("x", &v), -1);
    assert_int_equal(bstat_parse_size("99999999999999999999", &v), -1);
}

static void test_sizes(void **state)
{
    size_t s[32];
    (void)state;
    assert_int_equal(bstat_sizes(1, 1 << 20, s, 32), 21); /* OSU's 1 B .. 1 MiB */
    assert_int_equal(s[0], 1);
    assert_int_equal(s[20], 1 << 20);
    assert_int_equal(bstat_sizes(3, 20, s, 32), 3); /* 3 6 12 */
    assert_int_equal(s[2], 12);
    assert_int_equal(bstat_sizes(8, 8, s, 32), 1);
    assert_int_equal(bstat_sizes(0, 8, s, 32), 0);
    assert_int_equal(bstat_sizes(9, 8, s, 32), 0);
    assert_int_equal(bstat_sizes(1, 1 << 20, NULL, 0), 21);
    assert_int_equal(bstat_sizes(SIZE_MAX / 2 + 1, SIZE_MAX, s, 32), 1); /* no overflow */
}

/* The v-forms' counts: pure, within range, and the mean they claim. */
static void test_vcounts(void **state)
{
    double sum[3] = {0};
    int zeros = 0, calls = 20000;
    (void)state;
    for (int k = 0; k < calls; k++)
        for (int dist = 0; dist < 3; dist++) {
            size_t c = bstat_vcount(dist, 7, 100, k % 5, k % 3, 5, (uint64_t)k);
            assert_int_equal(c, bstat_vcount(dist, 7, 100, k % 5, k % 3, 5, (uint64_t)k));
            assert_true(c <= (dist == 2 ? 1000u : dist == 1 ? 200u : 100u));
            assert_true(dist != 2 || c == 0 || c == 1000);
            zeros += dist == 2 && c == 0;
            sum[dist] += (double)c;
        }
    assert_true(sum[0] / calls == 100);
    assert_true(fabs(sum[1] / calls - 100) < 3);
    assert_true(fabs(sum[2] / calls - 100) < 10);
    assert_true(zeros > calls * 0.88 && zeros < calls * 0.92);
    assert_int_equal(bstat_vcount(1, 1, 0, 0, 1, 2, 1), 0);
    assert_true(bstat_vcount(1, 1, 100, 0, 1, 2, 1) != bstat_vcount(1, 1, 100, 1, 0, 2, 1) ||
                bstat_vcount(1, 1, 100, 0, 1, 2, 2) != bstat_vcount(1, 1, 100, 1, 0, 2, 2));
}

/* one-heavy: per call and source exactly one block of 100x, never to itself,
 * each destination receiving exactly one; the totals what vtotal claims. */
static void test_vcounts_one_heavy(void **state)
{
    (void)state;
    assert_int_equal(bstat_parse_dist("one-heavy"), BSTAT_DIST_ONE_HEAVY);
    assert_int_equal(bstat_parse_dist("uniform"), BSTAT_DIST_UNIFORM);
    assert_int_equal(bstat_parse_dist("heavy"), -1);
    for (int n = 1; n <= 9; n++)
        for (uint64_t call = 0; call < 20; call++) {
            int heavy_in[9] = {0}, gheavy = 0;
            for (int src = 0; src < n; src++) {
                size_t total = 0;
                int heavy = 0;
                for (int dst = 0; dst < n; dst++) {
                    size_t c = bstat_vcount(BSTAT_DIST_ONE_HEAVY, 3, 10, src, dst, n, call);
                    assert_true(c == 10 || c == 10 * BSTAT_HEAVY);
                    if (c != 10) {
                        heavy++;
                        heavy_in[dst]++;
                        assert_int_equal(dst, bstat_heavy_dst(src, n, call));
                        assert_true(n == 1 || dst != src);
                    }
                    total += c;
                }
                assert_int_equal(heavy, 1);
                assert_int_equal(total, 10 * bstat_vtotal(BSTAT_DIST_ONE_HEAVY, n));
                gheavy += bstat_gvcount(BSTAT_DIST_ONE_HEAVY, 3, 10, src, n, call) != 10;
            }
            for (int dst = 0; dst < n; dst++)
                assert_int_equal(heavy_in[dst], 1);
            assert_int_equal(gheavy, 1);
        }
    /* The destination moves from call to call. */
    assert_true(bstat_heavy_dst(0, 4, 0) != bstat_heavy_dst(0, 4, 1));
    assert_int_equal(bstat_vtotal(BSTAT_DIST_SPARSE, 4), 40);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uniform_range_and_determinism),
        cmocka_unit_test(test_bounds_from_arrivals),
        cmocka_unit_test(test_point_mean_min_max),
        cmocka_unit_test(test_point_median),
        cmocka_unit_test(test_point_bound_is_time_base_invariant),
        cmocka_unit_test(test_ratio_columns),
        cmocka_unit_test(test_mean_bound_column),
        cmocka_unit_test(test_random_delays_bounded),
        cmocka_unit_test(test_mif_zero_is_no_skew),
        cmocka_unit_test(test_nlate_rounding),
        cmocka_unit_test(test_late_delays),
        cmocka_unit_test(test_late_set_deterministic_from_seed),
        cmocka_unit_test(test_iters_by_size),
        cmocka_unit_test(test_median),
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_vcounts),
        cmocka_unit_test(test_vcounts_one_heavy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
