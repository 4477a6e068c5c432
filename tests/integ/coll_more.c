/*
 * coll_test modes for the collectives around alltoall/allgather (coll_test.h:
 * coll_test.c's CHECK, counters and helpers; data patterns from tests/lib):
 *
 *   coll_test v                 alltoallv, allgatherv, reduce_scatter_block and
 *                               allreduce x every algorithm that serves them x
 *                               sizes 0, 1, 7, 4096, 200000 B x in place or not
 *                               x blocking or not; every byte checked
 *   coll_test inflight          8 nonblocking calls on one team at once (and a
 *                               mix of collectives), completed in reverse order
 *   coll_test vskew ITERS US    back-to-back calls of random collective,
 *                               algorithm and size under random delays
 *                               (VSKEW_ALG=ring: that algorithm for every call;
 *                               =sloav or sloavx: alltoallv only, rotating the
 *                               count distributions)
 *   coll_test a2av              alltoallv by sloav, sloavx and pap x count
 *                               distributions x sizes around ARCOLL_SLOAV_MAX
 *
 * Knobs of coll_test v, to shorten it where calls are slow (Soft-RoCE guests,
 * tests/vm/) without dropping an algorithm, a collective, in place or
 * nonblocking:
 *   COLL_V_SIZES=0,7,4096   the sizes (bytes), instead of all five
 *   COLL_V_OPS_EVERY=K      of the dtype x op pairs of the reductions, only
 *                           every K-th in each (size, in place, blocking) cell,
 *                           rotating from cell to cell: any K consecutive cells
 *                           run every pair once (20 cells per algorithm)
 *
 * Knob of coll_test a2av, likewise (it keeps every algorithm, distribution,
 * size, routing limit, in place, nonblocking and a 0/1/1 MiB mixed call):
 *   COLL_A2AV_QUICK=1       sloav and sloavx run each (distribution, size)
 *                           cell under one of the limits 2k, 0, 64k, rotating
 *                           from cell to cell (every distribution and every
 *                           size still meets every limit), and one mixed call
 *                           per (algorithm, limit), blocking or nonblocking
 *                           alternating, instead of two: 67 calls, not 154
 *
 * Counts, displacements and values are functions of (call, source,
 * destination), so every rank computes what it must receive.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll_test.h"

static const char *const v_algs[] = {"direct", "pap", "ring", "rdd", "rdh"};
#define NV_ALGS ((int)(sizeof(v_algs) / sizeof(v_algs[0])))
static const arcoll_dtype_t v_dtypes[] = {ARCOLL_INT32, ARCOLL_INT64, ARCOLL_UINT64, ARCOLL_FLOAT,
                                          ARCOLL_DOUBLE};
static const char *const v_dtype_names[] = {"int32", "int64", "uint64", "float", "double"};
static const char *const v_op_names[] = {"sum", "prod", "min", "max", "band", "bor", "bxor"};

/* v_count's max for 0, 1 or 1 MiB per pair: copy and zero-copy blocks in one call. */
#define V_MIX SIZE_MAX

/* alltoallv count distributions of coll_test a2av (as arcoll-bench -D). */
enum { VD_RANDOM, VD_UNIFORM, VD_ONE_HEAVY, VD_SPARSE, VD_N };
static const char *const vd_names[] = {"random", "uniform", "one-heavy", "sparse"};
static int v_dist = VD_RANDOM;
/* Received bytes that were wrong (or written into a gap), summed by vskew. */
static uint64_t v_wrong_bytes;

/* Bytes rank src sends rank dst in call: 0 .. max, some zero (random), or
 * by the distribution v_dist with mean max. */
static size_t v_count(uint64_t call, int src, int dst, size_t max)
{
    uint64_t x = call * 2654435761u + (uint64_t)src * 40503u + (uint64_t)dst * 9176u;

    if (max != V_MIX && v_dist == VD_UNIFORM)
        return max;
    if (max != V_MIX && v_dist == VD_ONE_HEAVY) /* each source: one peer gets 100x */
        return dst == (src + 1 + (int)(call % (uint64_t)ct_nranks)) % ct_nranks ? 100 * max : max;
    if (max != V_MIX && v_dist == VD_SPARSE)
        return (x >> 7) % 10 == 0 ? 10 * max : 0;
    if (max == V_MIX) {
        static const size_t mix[] = {0, 1, (size_t)1 << 20};
        return mix[(x >> 7) % 3];
    }
    if (max == 0 || (x >> 7) % 5 == 0)
        return 0;
    return max <= 1 ? max : (size_t)(x % max) + 1;
}

/* Shuffled displacements with gaps: block j at a place that depends on call. */
static size_t v_displs(uint64_t call, int n, const size_t *counts, size_t *displs)
{
    size_t at = 0;

    for (int i = 0; i < n; i++) {
        int j = (int)((i * 5 + call) % (uint64_t)n);
        /* 5 is coprime with the team sizes tested except 5 itself: then plain */
        if (n % 5 == 0)
            j = n - 1 - i;
        displs[j] = at;
        at += counts[j] + 3; /* a gap that must stay untouched */
    }
    return at;
}

static int v_wait(int rc, arcoll_request_t *req, int nonblocking)
{
    if (!nonblocking || rc != ARCOLL_OK)
        return rc;
    return arcoll_wait(req);
}

static void v_alltoallv(arcoll_team_t team, uint64_t call, size_t max, int in_place, int nb,
                        const char *what)
{
    int me = arcoll_team_rank(team), n = arcoll_team_size(team);
    size_t *sc = calloc((size_t)n * 4, sizeof(size_t)), *sd = sc + n, *rc_ = sc + 2 * n,
           *rd = sc + 3 * n, slen, rlen;
    uint8_t *s, *r;
    arcoll_request_t req = NULL;
    size_t bad = 0;
    int rc;

    for (int j = 0; j < n; j++) {
        sc[j] = v_count(call, me, j, max);
        rc_[j] = v_count(call, j, me, max);
    }
    slen = v_displs(call, n, sc, sd);
    rlen = v_displs(call + 1, n, rc_, rd);
    if (in_place) {
        /* In place the send data is taken from rbuf with rcounts/rdispls: then the
         * counts must be symmetric, so use the receive counts both ways. */
        for (int j = 0; j < n; j++)
            rc_[j] = v_count(call, j < me ? j : me, j < me ? me : j, max);
        rlen = v_displs(call + 1, n, rc_, rd);
    }
    s = malloc(slen + 1);
    r = malloc(rlen + 1);
    for (int j = 0; j < n; j++)
        tl_fill(in_place ? r + rd[j] : s + sd[j], in_place ? rc_[j] : sc[j], call, me, j);
    if (!in_place)
        memset(r, 0xee, rlen + 1);
    else
        for (int j = 0; j < n; j++) /* gaps */
            memset(r + rd[j] + rc_[j], 0xee, 3);
    rc = nb ? arcoll_ialltoallv(team, in_place ? ARCOLL_IN_PLACE : s, sc, sd, r, rc_, rd, &req)
            : arcoll_alltoallv(team, in_place ? ARCOLL_IN_PLACE : s, sc, sd, r, rc_, rd);
    rc = v_wait(rc, &req, nb);
    CHECK(rc == ARCOLL_OK, "%s: %s (%s)", what, arcoll_strerror(rc), arcoll_last_error(NULL));
    for (int j = 0; rc == ARCOLL_OK && j < n; j++) {
        size_t i = 0, b = tl_check(r + rd[j], rc_[j], call, j, me, &i);
        if (b > 0 && bad == 0)
            fprintf(stderr, "[rank %d] %s: byte %zu from %d wrong\n", me, what, i, j);
        bad += b;
        for (i = 0; i < 3; i++)
            bad += r[rd[j] + rc_[j] + i] != 0xee;
    }
    if (rc == ARCOLL_OK)
        CHECK(bad == 0, "%s: %zu wrong bytes", what, bad);
    v_wrong_bytes += bad;
    free(s);
    free(r);
    free(sc);
}

static void v_allgatherv(arcoll_team_t team, uint64_t call, size_t max, int in_place, int nb,
                         const char *what)
{
    int me = arcoll_team_rank(team), n = arcoll_team_size(team);
    size_t *cnt = calloc((size_t)n * 2, sizeof(size_t)), *dsp = cnt + n, rlen, bad = 0;
    uint8_t *s, *r;
    arcoll_request_t req = NULL;
    int rc;

    for (int j = 0; j < n; j++)
        cnt[j] = v_count(call, j, 0, max);
    rlen = v_displs(call, n, cnt, dsp);
    s = malloc(cnt[me] + 1);
    r = malloc(rlen + 1);
    memset(r, 0xee, rlen + 1);
    tl_fill(in_place ? r + dsp[me] : s, cnt[me], call, me, TL_ANY);
    rc = nb ? arcoll_iallgatherv(team, in_place ? ARCOLL_IN_PLACE : s, cnt[me], r, cnt, dsp, &req)
            : arcoll_allgatherv(team, in_place ? ARCOLL_IN_PLACE : s, cnt[me], r, cnt, dsp);
    rc = v_wait(rc, &req, nb);
    CHECK(rc == ARCOLL_OK, "%s: %s (%s)", what, arcoll_strerror(rc), arcoll_last_error(NULL));
    for (int j = 0; rc == ARCOLL_OK && j < n; j++) {
        size_t i = 0, b = tl_check(r + dsp[j], cnt[j], call, j, TL_ANY, &i);
        if (b > 0 && bad == 0)
            fprintf(stderr, "[rank %d] %s: byte %zu from %d wrong\n", me, what, i, j);
        bad += b;
        for (i = 0; i < 3; i++)
            bad += r[dsp[j] + cnt[j] + i] != 0xee;
    }
    if (rc == ARCOLL_OK)
        CHECK(bad == 0, "%s: %zu wrong bytes", what, bad);
    v_wrong_bytes += bad;
    free(s);
    free(r);
    free(cnt);
}

/* Element i of rank src's input: small values, so sums and products are exact
 * in every type (float included) for the team sizes tested. */
static int64_t v_val(int op, uint64_t call, int src, size_t i)
{
    uint64_t x = call * 13 + (uint64_t)src * 31 + i * 7;

    if (op == ARCOLL_PROD)
        return 1 + (int64_t)((x >> 3) % 2); /* 1 or 2: at most 2^16 for 16 ranks */
    if (op == ARCOLL_MIN || op == ARCOLL_MAX)
        return (int64_t)(x % 97) - (src % 2 ? 40 : 0);
    return (int64_t)(x % 9);
}

static void v_put(arcoll_dtype_t d, void *buf, size_t i, int64_t v)
{
    switch (d) {
    case ARCOLL_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case ARCOLL_INT64: ((int64_t *)buf)[i] = v; break;
    case ARCOLL_UINT64: ((uint64_t *)buf)[i] = (uint64_t)(v + 1000); break;
    case ARCOLL_FLOAT: ((float *)buf)[i] = (float)v; break;
    default: ((double *)buf)[i] = (double)v; break;
    }
}

/* Sums and products wrap like the library's integer kernels (computed in
 * uint64_t: no signed overflow, and modular, so the order does not matter). */
static int64_t v_combine(int op, int64_t a, int64_t b)
{
    uint64_t x = (uint64_t)a, y = (uint64_t)b;

    switch (op) {
    case ARCOLL_SUM: return (int64_t)(x + y);
    case ARCOLL_PROD: return (int64_t)(x * y);
    case ARCOLL_MIN: return a < b ? a : b;
    case ARCOLL_MAX: return a > b ? a : b;
    case ARCOLL_BAND: return (int64_t)(x & y);
    case ARCOLL_BOR: return (int64_t)(x | y);
    default: return (int64_t)(x ^ y);
    }
}

/* The expected element as the dtype's bytes. uint64 values are shifted by
 * 1000, so fold over the shifted values. */
static int v_expect(arcoll_dtype_t d, int op, uint64_t call, int n, size_t i, void *out)
{
    int64_t acc = 0;

    for (int src = 0; src < n; src++) {
        int64_t v = v_val(op, call, src, i) + (d == ARCOLL_UINT64 ? 1000 : 0);
        acc = src == 0 ? v : v_combine(op, acc, v);
    }
    switch (d) {
    case ARCOLL_INT32: *(int32_t *)out = (int32_t)(uint32_t)(uint64_t)acc; return 4;
    case ARCOLL_INT64: *(int64_t *)out = acc; return 8;
    case ARCOLL_UINT64: *(uint64_t *)out = (uint64_t)acc; return 8;
    case ARCOLL_FLOAT: *(float *)out = (float)acc; return 4;
    default: *(double *)out = (double)acc; return 8;
    }
}

/* reduce_scatter_block (rs) or allreduce of about bytes bytes per result block. */
static void v_reduce(arcoll_team_t team, int rs, int dt, int op, uint64_t call, size_t bytes,
                     int in_place, int nb, const char *what)
{
    arcoll_dtype_t d = v_dtypes[dt];
    size_t e = arcoll_dtype_size(d), count = bytes / e, total, rlen, bad = 0;
    int me = arcoll_team_rank(team), n = arcoll_team_size(team);
    arcoll_request_t req = NULL;
    uint8_t *s, *r, want[8];
    int rc;

    if (bytes && !count)
        count = 1;
    total = rs ? count * (size_t)n : count;
    rlen = rs && !in_place ? count : total;
    s = malloc(total * e + 1);
    r = malloc(rlen * e + e);
    for (size_t i = 0; i < total; i++)
        v_put(d, in_place ? r : s, i, v_val(op, call, me, i));
    rc = rs ? (nb ? arcoll_ireduce_scatter_block(team, in_place ? ARCOLL_IN_PLACE : s, r, count, d,
                                                 (arcoll_op_t)op, &req)
                  : arcoll_reduce_scatter_block(team, in_place ? ARCOLL_IN_PLACE : s, r, count, d,
                                                (arcoll_op_t)op))
            : (nb ? arcoll_iallreduce(team, in_place ? ARCOLL_IN_PLACE : s, r, count, d,
                                      (arcoll_op_t)op, &req)
                  : arcoll_allreduce(team, in_place ? ARCOLL_IN_PLACE : s, r, count, d,
                                     (arcoll_op_t)op));
    rc = v_wait(rc, &req, nb);
    CHECK(rc == ARCOLL_OK, "%s: %s (%s)", what, arcoll_strerror(rc), arcoll_last_error(NULL));
    for (size_t i = 0; rc == ARCOLL_OK && i < count; i++) {
        size_t gi = rs ? (size_t)me * count + i : i;
        int w = v_expect(d, op, call, n, gi, want);
        if (memcmp(r + i * e, want, (size_t)w) != 0 && bad++ == 0)
            fprintf(stderr, "[rank %d] %s: element %zu wrong\n", me, what, i);
    }
    if (rc == ARCOLL_OK)
        CHECK(bad == 0, "%s: %zu wrong elements", what, bad);
    v_wrong_bytes += bad * e;
    free(s);
    free(r);
}

void ct_test_v(arcoll_context_t ctx)
{
    size_t sizes[16] = {0, 1, 7, 4096, 200000};
    int nsizes = 5, every = 1, cell = 0;
    const char *env = getenv("COLL_V_SIZES");
    arcoll_team_t world = arcoll_team_world(ctx);
    uint64_t call = 1000;
    char what[160];

    if (env != NULL && *env != '\0') {
        char *end;
        for (nsizes = 0; nsizes < 16; env = end + 1) {
            unsigned long long b = strtoull(env, &end, 10);
            if (end == env)
                break;
            sizes[nsizes++] = (size_t)b;
            if (*end != ',')
                break;
        }
    }
    env = getenv("COLL_V_OPS_EVERY");
    if (env != NULL && atoi(env) > 1)
        every = atoi(env);

    for (int a = 0; a < NV_ALGS; a++) {
        int flat = a < 2; /* direct and pap serve alltoallv; the others do not */
        ct_set(ctx, "ARCOLL_ALLTOALLV_ALG", flat ? v_algs[a] : "pap");
        ct_set(ctx, "ARCOLL_ALLGATHERV_ALG", v_algs[a]);
        ct_set(ctx, "ARCOLL_REDUCE_SCATTER_ALG", v_algs[a]);
        ct_set(ctx, "ARCOLL_ALLREDUCE_ALG", v_algs[a]);
        ct_set(ctx, "ARCOLL_ALLGATHER_ALG", v_algs[a]);
        for (int z = 0; z < nsizes; z++) {
            for (int ip = 0; ip < 2; ip++) {
                for (int nb = 0; nb < 2; nb++, cell++) {
                    const char *tag = nb ? " nonblocking" : "";
                    if (flat) {
                        snprintf(what, sizeof(what), "alltoallv %s %zu B%s%s", v_algs[a], sizes[z],
                                 ip ? " in place" : "", tag);
                        v_alltoallv(world, ++call, sizes[z], ip, nb, what);
                    }
                    snprintf(what, sizeof(what), "allgatherv %s %zu B%s%s", v_algs[a], sizes[z],
                             ip ? " in place" : "", tag);
                    v_allgatherv(world, ++call, sizes[z], ip, nb, what);
                    /* The reductions: every dtype x op once per size, rotating
                     * in place and blocking so the matrix stays small. */
                    for (int dt = 0; dt < 5; dt++) {
                        for (int op = 0; op < 7; op++) {
                            if (op >= ARCOLL_BAND && (dt == 3 || dt == 4))
                                continue;
                            if ((dt + op + ip + nb) % 4 != 0 && sizes[z] > 4096)
                                continue;
                            if ((dt * 7 + op + cell) % every != 0)
                                continue;
                            for (int rs = 0; rs < 2; rs++) {
                                snprintf(what, sizeof(what), "%s %s %s/%s %zu B%s%s",
                                         rs ? "reduce_scatter_block" : "allreduce", v_algs[a],
                                         v_dtype_names[dt], v_op_names[op], sizes[z],
                                         ip ? " in place" : "", tag);
                                v_reduce(world, rs, dt, op, ++call, sizes[z], ip, nb, what);
                            }
                        }
                    }
                }
            }
            /* allgather through the same algorithm (in place too) */
            if (!flat || a < 2) {
                snprintf(what, sizeof(what), "allgather %s %zu B", v_algs[a], sizes[z]);
                ct_one(world, 0, 0, ++call, sizes[z], what);
            }
        }
    }
    /* alltoallv with blocks of 0, 1 and 1 MiB in one call: per pair the copy
     * or the zero-copy path, by its length (the threshold auto and 64 KiB). */
    for (int th = 0; th < 2; th++) {
        ct_set(ctx, "ARCOLL_ZCOPY_THRESHOLD", th ? "64k" : "auto");
        for (int a = 0; a < 2; a++) {
            ct_set(ctx, "ARCOLL_ALLTOALLV_ALG", v_algs[a]);
            for (int k = 0; k < 4; k++) {
                snprintf(what, sizeof(what), "alltoallv %s 0/1/1M mixed, threshold %s%s", v_algs[a],
                         th ? "64k" : "auto", k & 1 ? " nonblocking" : "");
                v_alltoallv(world, ++call, V_MIX, 0, k & 1, what);
            }
        }
    }
    ct_set(ctx, "ARCOLL_ZCOPY_THRESHOLD", "auto");
    ct_set(ctx, "ARCOLL_ALLTOALLV_ALG", "pap");
    ct_set(ctx, "ARCOLL_ALLGATHER_ALG", "pap");
}

/* coll_test a2av: alltoallv by the logarithmic algorithms (sloav, sloavx)
 * and the flat pap, every count distribution, sizes around the routing limit
 * (ARCOLL_SLOAV_MAX: blocks above it go direct), in place, nonblocking, and
 * blocks of 0, 1 and 1 MiB in one call; every byte and gap checked. */
void ct_test_a2av(arcoll_context_t ctx)
{
    static const char *const algs[] = {"sloav", "sloavx", "pap"};
    static const char *const limits[] = {"2k", "0", "64k"};
    static const size_t sizes[] = {0, 1, 7, 300, 5000};
    arcoll_team_t world = arcoll_team_world(ctx);
    uint64_t call = 60000;
    char what[160];
    const char *env = getenv("COLL_A2AV_QUICK");
    int quick = env != NULL && atoi(env) > 0;

    for (int a = 0; a < 3; a++) {
        ct_set(ctx, "ARCOLL_ALLTOALLV_ALG", algs[a]);
        for (int l = 0; l < (a < 2 ? 3 : 1); l++) {
            ct_set(ctx, "ARCOLL_SLOAV_MAX", limits[l]);
            for (int d = 0; d < VD_N; d++) {
                v_dist = d;
                for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
                    int ip = (int)(z + d) % 2, nb = (int)(z / 2 + l) % 2;
                    if (quick && a < 2 && (int)(z + d) % 3 != l)
                        continue; /* this cell runs under another limit */
                    snprintf(what, sizeof(what), "alltoallv %s limit %s %s %zu B%s%s", algs[a],
                             limits[l], vd_names[d], sizes[z], ip ? " in place" : "",
                             nb ? " nonblocking" : "");
                    v_alltoallv(world, ++call, sizes[z], ip, nb, what);
                }
            }
            v_dist = VD_RANDOM;
            for (int k = 0; k < 2; k++) {
                if (quick && k != (a + l) % 2)
                    continue;
                snprintf(what, sizeof(what), "alltoallv %s limit %s 0/1/1M mixed%s", algs[a],
                         limits[l], k ? " nonblocking" : "");
                v_alltoallv(world, ++call, V_MIX, 0, k, what);
            }
        }
    }
    ct_set(ctx, "ARCOLL_SLOAV_MAX", "2k");
    ct_set(ctx, "ARCOLL_ALLTOALLV_ALG", "pap");
}

/* 8 nonblocking calls in flight on one team, waited for newest first. */
void ct_test_inflight(arcoll_context_t ctx)
{
    enum { K = ARCOLL_MAX_INFLIGHT };
    arcoll_team_t world = arcoll_team_world(ctx);
    int me = ct_rank, n = ct_nranks;
    size_t bytes = 3000;
    uint8_t *s[K], *r[K];
    arcoll_request_t req[K];
    int rc;

    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < K; k++) {
            uint64_t call = 5000 + (uint64_t)round * K + (uint64_t)k;
            s[k] = malloc(bytes * (size_t)n);
            r[k] = malloc(bytes * (size_t)n);
            ct_fill(1, call, me, n, bytes, s[k]);
            rc = arcoll_ialltoall(world, s[k], r[k], bytes, &req[k]);
            CHECK(rc == ARCOLL_OK, "ialltoall %d: %s", k, arcoll_strerror(rc));
        }
        for (int k = K - 1; k >= 0; k--) {
            uint64_t call = 5000 + (uint64_t)round * K + (uint64_t)k;
            rc = arcoll_wait(&req[k]);
            CHECK(rc == ARCOLL_OK && req[k] == NULL, "wait %d: %s", k, arcoll_strerror(rc));
            CHECK(ct_verify(1, call, me, n, bytes, r[k], "in flight") == 0, "in flight %d: wrong",
                  k);
            free(s[k]);
            free(r[k]);
        }
    }
    /* More than the window: the ninth start progresses the oldest first. */
    {
        enum { M = 2 * K + 3 };
        arcoll_request_t q[M];
        uint8_t *rs[M], *rr[M];
        for (int k = 0; k < M; k++) {
            rs[k] = malloc(64 * (size_t)n);
            rr[k] = malloc(64 * (size_t)n);
            ct_fill(0, 7000 + (uint64_t)k, me, n, 64, rs[k]);
            rc = arcoll_iallgather(world, rs[k], rr[k], 64, &q[k]);
            CHECK(rc == ARCOLL_OK, "iallgather %d: %s", k, arcoll_strerror(rc));
        }
        rc = arcoll_waitall(M, q);
        CHECK(rc == ARCOLL_OK, "waitall: %s", arcoll_strerror(rc));
        for (int k = 0; k < M; k++) {
            CHECK(q[k] == NULL, "waitall left request %d", k);
            CHECK(ct_verify(0, 7000 + (uint64_t)k, me, n, 64, rr[k], "window") == 0,
                  "window %d: wrong", k);
            free(rs[k]);
            free(rr[k]);
        }
    }
    /* 64 calls of every nonblocking kind (and a 0-byte one, queued like the
     * others) started while rank 0 is still away: a start never waits for a
     * peer (MPI's rule), so every
     * start returns, and the first call is still in progress, before rank 0
     * arrives. Before calls beyond the window queued, the ninth start waited
     * for rank 0 and the first call was complete by the time it returned. */
    {
        enum { Q = 64, B = 48, E = 12 };
        arcoll_request_t q[Q];
        uint8_t *qs[Q], *qr[Q];
        size_t cnt[64], dsp[64], bcnt[64], bdsp[64];
        int early = -2;
        CHECK(n <= 64, "queue test: at most 64 ranks");
        for (int j = 0; j < n && j < 64; j++) {
            cnt[j] = B;
            dsp[j] = (size_t)j * B;
            bcnt[j] = B;
            bdsp[j] = (size_t)j * B;
        }
        if (me == 0) {
            struct timespec ts = {1, 0};
            nanosleep(&ts, NULL);
        }
        for (int k = 0; k < Q; k++) {
            uint64_t call = 9000 + (uint64_t)k;
            int32_t *si, *ri;
            qs[k] = malloc(B * (size_t)n);
            qr[k] = malloc(B * (size_t)n);
            si = (int32_t *)qs[k];
            ri = (int32_t *)qr[k];
            memset(qr[k], 0, B * (size_t)n);
            switch (k % 6) {
            case 0:
                ct_fill(1, call, me, n, B, qs[k]);
                rc = arcoll_ialltoall(world, qs[k], qr[k], k == 30 ? 0 : B, &q[k]);
                break;
            case 1:
                ct_fill(0, call, me, n, B, qs[k]);
                rc = arcoll_iallgather(world, qs[k], qr[k], B, &q[k]);
                break;
            case 2:
                ct_fill(1, call, me, n, B, qs[k]);
                rc = arcoll_ialltoallv(world, qs[k], cnt, dsp, qr[k], cnt, dsp, &q[k]);
                break;
            case 3:
                ct_fill(0, call, me, n, B, qs[k]);
                rc = arcoll_iallgatherv(world, qs[k], B, qr[k], bcnt, bdsp, &q[k]);
                break;
            case 4:
                for (int i = 0; i < E * n; i++)
                    si[i] = (int32_t)tl_red_in(call, me, (size_t)i);
                rc =
                    arcoll_ireduce_scatter_block(world, si, ri, E, ARCOLL_INT32, ARCOLL_SUM, &q[k]);
                break;
            default:
                for (int i = 0; i < E; i++)
                    si[i] = (int32_t)tl_red_in(call, me, (size_t)i);
                rc = arcoll_iallreduce(world, si, ri, E, ARCOLL_INT32, ARCOLL_SUM, &q[k]);
                break;
            }
            CHECK(rc == ARCOLL_OK, "queued start %d: %s", k, arcoll_strerror(rc));
            /* A 0-byte call is a call (docs/protocol.md §8): it queues too. */
            CHECK(k != 30 || q[k] != NULL, "a 0-byte start behind queued calls has a handle");
        }
        if (me != 0)
            early = arcoll_test(&q[0]);
        CHECK(me == 0 || early == ARCOLL_INPROGRESS,
              "64 starts waited for the late rank 0 (the first call was %s when they returned)",
              arcoll_strerror(early));
        /* Completed oldest-last, with test and wait mixed. */
        for (int k = Q - 1; k >= 0; k--) {
            uint64_t call = 9000 + (uint64_t)k;
            const int32_t *ri = (const int32_t *)qr[k];
            rc = k % 2 ? arcoll_wait(&q[k]) : ARCOLL_INPROGRESS;
            while (rc == ARCOLL_INPROGRESS)
                rc = arcoll_test(&q[k]);
            if (k == 0 && early == ARCOLL_OK)
                rc = ARCOLL_OK; /* spent by the probe above (already reported) */
            CHECK(rc == ARCOLL_OK && q[k] == NULL, "queued call %d: %s", k, arcoll_strerror(rc));
            switch (k % 6) {
            case 0:
                if (k != 30)
                    CHECK(ct_verify(1, call, me, n, B, qr[k], "queued") == 0, "queued %d", k);
                break;
            case 1:
            case 3:
                CHECK(ct_verify(0, call, me, n, B, qr[k], "queued") == 0, "queued %d", k);
                break;
            case 2:
                CHECK(ct_verify(1, call, me, n, B, qr[k], "queued") == 0, "queued %d", k);
                break;
            case 4:
                for (int i = 0; i < E; i++) {
                    int32_t want = (int32_t)tl_red_sum(call, n, (size_t)(me * E + i));
                    if (ri[i] != want) {
                        CHECK(0, "queued reduce_scatter %d element %d: %d, want %d", k, i, ri[i],
                              want);
                        break;
                    }
                }
                break;
            default:
                for (int i = 0; i < E; i++)
                    if (ri[i] != (int32_t)tl_red_sum(call, n, (size_t)i)) {
                        CHECK(0, "queued allreduce %d element %d: %d", k, i, ri[i]);
                        break;
                    }
                break;
            }
            free(qs[k]);
            free(qr[k]);
        }
    }
    /* Calls in flight on two teams, waited for in different orders on different
     * ranks (legal MPI): a rank blocked in one team's call must progress the
     * other team's, or both time out. 1 MiB blocks need many fragments. */
    {
        arcoll_team_t b = NULL;
        size_t big = (size_t)1 << 20;
        uint8_t *s1 = malloc(big * (size_t)n), *r1 = malloc(big * (size_t)n);
        uint8_t *s2 = malloc(64 * (size_t)n), *r2 = malloc(64 * (size_t)n);
        arcoll_request_t q = NULL;
        rc = arcoll_team_split(world, 0, me, &b);
        CHECK(rc == ARCOLL_OK && b != NULL, "split for two teams: %s", arcoll_strerror(rc));
        ct_set(ctx, "ARCOLL_PATH", "copy");
        ct_fill(1, 8000, me, n, big, s1);
        ct_fill(1, 8001, me, n, 64, s2);
        rc = arcoll_ialltoall(world, s1, r1, big, &q);
        CHECK(rc == ARCOLL_OK, "ialltoall on A: %s", arcoll_strerror(rc));
        if (me == 0) {
            rc = arcoll_alltoall(b, s2, r2, 64);
            CHECK(rc == ARCOLL_OK, "alltoall on B first: %s", arcoll_strerror(rc));
            rc = arcoll_wait(&q);
            CHECK(rc == ARCOLL_OK, "then wait on A: %s", arcoll_strerror(rc));
        } else {
            rc = arcoll_wait(&q);
            CHECK(rc == ARCOLL_OK, "wait on A first: %s", arcoll_strerror(rc));
            rc = arcoll_alltoall(b, s2, r2, 64);
            CHECK(rc == ARCOLL_OK, "then alltoall on B: %s", arcoll_strerror(rc));
        }
        CHECK(ct_verify(1, 8000, me, n, big, r1, "team A") == 0, "team A: wrong data");
        CHECK(ct_verify(1, 8001, me, n, 64, r2, "team B") == 0, "team B: wrong data");
        ct_set(ctx, "ARCOLL_PATH", "auto");
        if (b != NULL) {
            /* split and free drain calls in flight rather than refuse on one rank */
            rc = arcoll_ialltoall(b, s2, r2, 64, &q);
            CHECK(rc == ARCOLL_OK, "ialltoall before free: %s", arcoll_strerror(rc));
            rc = arcoll_team_free(b);
            CHECK(rc == ARCOLL_OK, "free with a call in flight: %s", arcoll_strerror(rc));
            rc = arcoll_wait(&q);
            CHECK(rc == ARCOLL_OK || rc == ARCOLL_ERR_STATE, "the drained call: %s",
                  arcoll_strerror(rc));
        }
        free(s1);
        free(r1);
        free(s2);
        free(r2);
    }
    /* allgatherv under auto with blocks on both sides of auto's size limit: every
     * rank must pick the same algorithm (from rcounts, not its own block). */
    ct_set(ctx, "ARCOLL_ALLGATHERV_ALG", "auto");
    for (int k = 0; k < 6; k++)
        v_allgatherv(world, 8100 + (uint64_t)k, k % 2 ? 4096 : 6000, 0, 0, "allgatherv auto");
    /* A mix of collectives in flight, tested round-robin until all are done. */
    {
        int32_t in[4][64], out[4][64];
        arcoll_request_t q[4];
        int left = 0;
        for (int k = 0; k < 4; k++) {
            for (int i = 0; i < 64; i++)
                in[k][i] = (int32_t)tl_red_in((uint64_t)k, me, (size_t)i);
            rc = arcoll_iallreduce(world, in[k], out[k], 64, ARCOLL_INT32, ARCOLL_SUM, &q[k]);
            CHECK(rc == ARCOLL_OK, "iallreduce %d: %s", k, arcoll_strerror(rc));
            left += rc == ARCOLL_OK && q[k] != NULL; /* NULL: done at once, or failed */
        }
        while (left > 0) {
            for (int k = 3; k >= 0; k--) {
                if (q[k] == NULL)
                    continue;
                rc = arcoll_test(&q[k]);
                if (rc != ARCOLL_INPROGRESS) {
                    CHECK(rc == ARCOLL_OK, "test %d: %s", k, arcoll_strerror(rc));
                    left--;
                }
            }
        }
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < 64; i++)
                if (out[k][i] != (int32_t)tl_red_sum((uint64_t)k, n, (size_t)i)) {
                    CHECK(0, "iallreduce %d element %d: %d", k, i, out[k][i]);
                    break;
                }
    }
}

/* Back-to-back random collectives, algorithms and sizes under random delays. */
void ct_test_vskew(arcoll_context_t ctx, long iters, long us)
{
    static const char *const algs_rd[] = {"pap", "direct", "ring", "rdd", "rdh"};
    arcoll_team_t world = arcoll_team_world(ctx);
    uint64_t call = 90000, mine[2], sum[2];
    long failed0 = ct_tally.failed;
    int rc;
    char what[128];

    v_wrong_bytes = 0;
    for (long it = 0; it < iters; it++) {
        uint64_t x = (uint64_t)it * 0x9e3779b97f4a7c15ULL;
        int kind = (int)((x >> 11) % 4), a = (int)((x >> 17) % 5);
        const char *fixed = getenv("VSKEW_ALG"); /* one algorithm for all calls */
        size_t bytes = (size_t)((x >> 23) % 3000);
        long delay =
            us > 0 ? (long)(((uint64_t)it * 7919 + (uint64_t)ct_rank * 104729) % (uint64_t)us) : 0;
        if (delay > 0) {
            struct timespec ts = {0, delay * 1000};
            nanosleep(&ts, NULL);
        }
        const char *alg = fixed != NULL ? fixed : algs_rd[a];
        /* sloav and sloavx serve alltoallv only: every call is one then */
        int a2av_only = fixed != NULL && strncmp(fixed, "sloav", 5) == 0;
        if (a2av_only)
            kind = 0;
        ct_set(ctx, "ARCOLL_ALLGATHERV_ALG", a2av_only ? "pap" : alg);
        ct_set(ctx, "ARCOLL_REDUCE_SCATTER_ALG", a2av_only ? "pap" : alg);
        ct_set(ctx, "ARCOLL_ALLREDUCE_ALG", a2av_only ? "pap" : alg);
        ct_set(ctx, "ARCOLL_ALLTOALLV_ALG", a2av_only || (a < 2 && fixed == NULL) ? alg : "pap");
        if (a2av_only)
            v_dist = (int)(it % VD_N);
        snprintf(what, sizeof(what), "vskew %ld kind %d %s %zu B", it, kind, alg, bytes);
        switch (kind) {
        case 0: v_alltoallv(world, ++call, bytes, 0, (int)(it & 1), what); break;
        case 1: v_allgatherv(world, ++call, bytes, (int)((it >> 1) & 1), 0, what); break;
        case 2: v_reduce(world, 1, (int)(it % 3), ARCOLL_SUM, ++call, bytes, 0, 0, what); break;
        default: v_reduce(world, 0, (int)(it % 5), ARCOLL_MAX, ++call, bytes, 0, 0, what); break;
        }
    }
    /* The job's count, for the stated total of validated calls (issue 19). */
    mine[0] = v_wrong_bytes;
    mine[1] = (uint64_t)(ct_tally.failed - failed0);
    rc = arcoll_allreduce(world, mine, sum, 2, ARCOLL_UINT64, ARCOLL_SUM);
    CHECK(rc == ARCOLL_OK, "vskew totals: %s", arcoll_strerror(rc));
    if (rc == ARCOLL_OK && ct_rank == 0)
        printf("vskew: %ld validated calls (%s, skew up to %ld us), %d ranks: %llu corrupt "
               "bytes, %llu failed checks\n",
               iters, getenv("VSKEW_ALG") != NULL ? getenv("VSKEW_ALG") : "random algorithm", us,
               ct_nranks, (unsigned long long)sum[0], (unsigned long long)sum[1]);
}

/* Teams made and freed in turn, one rank late to every free (a different one
 * each time): the others wait in the free's barrier, the team's last exchange
 * before its memory goes, long past the 256 passes after which a schedule's
 * receive advertises late (protocol.md §17). The library's own agreements
 * write nothing late: over verbs such a write can land after its peer
 * deregistered the team's memory, a remote access error that takes the
 * pair's QP down for every team. Counted here on any channel. */
void ct_test_churn(arcoll_context_t ctx, long cycles)
{
    arcoll_team_t world = arcoll_team_world(ctx), sub;
    arcoll_counters_t c0, c1;
    long i;
    int rc = arcoll_context_counters(ctx, &c0, sizeof(c0));

    CHECK(rc == ARCOLL_OK, "counters: %s", arcoll_strerror(rc));
    for (i = 0; i < cycles && rc == ARCOLL_OK; i++) {
        sub = NULL;
        rc = arcoll_team_split(world, 0, (int)((ct_rank + i) % ct_nranks), &sub);
        CHECK(rc == ARCOLL_OK && sub != NULL, "cycle %ld: team_split: %s (%s)", i,
              arcoll_strerror(rc), arcoll_last_error(NULL));
        if (rc != ARCOLL_OK || sub == NULL)
            break;
        if (ct_rank == (int)(i % ct_nranks))
            usleep(2000);
        rc = arcoll_team_free(sub);
        CHECK(rc == ARCOLL_OK, "cycle %ld: team_free: %s (%s)", i, arcoll_strerror(rc),
              arcoll_last_error(NULL));
    }
    rc = arcoll_context_counters(ctx, &c1, sizeof(c1));
    CHECK(rc == ARCOLL_OK && c1.sched_zc_late == c0.sched_zc_late,
          "%ld team cycles: %llu late advertisements in the library's own agreements (want 0)", i,
          c1.sched_zc_late - c0.sched_zc_late);
}

/* arcoll_team_split: colors rank % 3 (rank 1 joins none), keys in reverse
 * rank order; collectives on the new team (a node algorithm too), a split of
 * the split, then destroy. */
void ct_test_split(arcoll_context_t ctx)
{
    arcoll_team_t world = arcoll_team_world(ctx), sub = NULL, sub2 = NULL;
    int color = ct_rank == 1 && ct_nranks > 2 ? ARCOLL_UNDEFINED : ct_rank % 3, want_n = 0,
        want_r = 0;
    uint64_t call = 40000;
    int rc;

    for (int i = 0; i < ct_nranks; i++) {
        int ci = i == 1 && ct_nranks > 2 ? ARCOLL_UNDEFINED : i % 3;
        if (ci != color || color == ARCOLL_UNDEFINED)
            continue;
        want_n++;
        if (i > ct_rank)
            want_r++; /* key -i: higher ranks first */
    }
    rc = arcoll_team_split(world, color, -ct_rank, &sub);
    CHECK(rc == ARCOLL_OK, "team_split: %s (%s)", arcoll_strerror(rc), arcoll_last_error(NULL));
    if (color == ARCOLL_UNDEFINED) {
        CHECK(sub == NULL, "undefined color got a team");
    } else if (rc == ARCOLL_OK) {
        CHECK(sub != NULL && arcoll_team_size(sub) == want_n && arcoll_team_rank(sub) == want_r,
              "split team: size %d rank %d, want %d %d", sub ? arcoll_team_size(sub) : -1,
              sub ? arcoll_team_rank(sub) : -1, want_n, want_r);
        for (int a = 0; a < 4; a++) {
            static const char *const sa[] = {"pap", "direct", "pap_shm", "shm_direct"};
            ct_set(ctx, "ARCOLL_ALLTOALL_ALG", sa[a]);
            ct_set(ctx, "ARCOLL_ALLGATHER_ALG", sa[a]);
            ct_one(sub, 1, 0, ++call, 1000, "alltoall on a split team");
            ct_one(sub, 0, 1, ++call, 333, "allgather on a split team");
        }
        ct_set(ctx, "ARCOLL_ALLTOALL_ALG", "pap");
        ct_set(ctx, "ARCOLL_ALLGATHER_ALG", "pap");
        v_reduce(sub, 0, 0, ARCOLL_SUM, ++call, 4096, 0, 0, "allreduce on a split team");
        /* and split that team in two by its own rank parity, same keys */
        rc = arcoll_team_split(sub, arcoll_team_rank(sub) % 2, 0, &sub2);
        CHECK(rc == ARCOLL_OK && sub2 != NULL, "nested split: %s", arcoll_strerror(rc));
        if (rc == ARCOLL_OK && sub2 != NULL) {
            int sn = arcoll_team_size(sub);
            int sr = arcoll_team_rank(sub);
            CHECK(arcoll_team_size(sub2) == (sn + 1 - sr % 2) / 2 &&
                      arcoll_team_rank(sub2) == sr / 2,
                  "nested split: size %d rank %d", arcoll_team_size(sub2), arcoll_team_rank(sub2));
            ct_one(sub2, 1, 0, ++call, 77, "alltoall on a nested split team");
        }
    }
    /* The nested team is freed by its members only (arcoll_team_free), the split
     * team by the whole context (arcoll_team_destroy: every rank calls it). */
    if (sub2 != NULL) {
        rc = arcoll_team_free(sub2);
        CHECK(rc == ARCOLL_OK, "free nested: %s", arcoll_strerror(rc));
        CHECK(arcoll_team_size(sub2) < 0, "a freed team still answers");
    }
    rc = arcoll_team_destroy(ctx, sub);
    CHECK(rc == ARCOLL_OK, "destroy split: %s", arcoll_strerror(rc));
    /* Split and free many times: nothing may pile up (epochs, ids, memory). */
    for (int i = 0; i < 20; i++) {
        arcoll_team_t t = NULL;
        rc = arcoll_team_split(world, i % 2 == 0 ? ct_rank % 2 : 0, ct_rank, &t);
        CHECK(rc == ARCOLL_OK && t != NULL, "split %d: %s", i, arcoll_strerror(rc));
        if (t != NULL) {
            /* the call number must agree: ranks did different calls above */
            ct_one(t, 0, 0, 50000 + (uint64_t)i, 100, "allgather on a short-lived team");
            rc = arcoll_team_free(t);
            CHECK(rc == ARCOLL_OK, "free %d: %s", i, arcoll_strerror(rc));
        }
    }
    /* Bad input, the same on every rank: an error before any communication. */
    rc = arcoll_team_split(world, -7, 0, &sub);
    CHECK(rc == ARCOLL_ERR_INVALID, "color -7: %s", arcoll_strerror(rc));
    rc = arcoll_team_split(world, 0, 0, NULL);
    CHECK(rc == ARCOLL_ERR_INVALID, "NULL newteam: %s", arcoll_strerror(rc));
}

/* One rank passes 0 bytes (0 elements) where the others pass data. A 0-byte
 * call is a call (docs/protocol.md §8): every rank, the 0-byte one included,
 * must get ARCOLL_ERR_MISMATCH in that very call, within 5 s
 * (ARCOLL_TIMEOUT_MS 20000), say why, and write nothing past its receive
 * area. Variant 0: the 0-byte rank is the last one (not a node master);
 * variant 1: the first (a master); for the node algorithms both matter.
 * Settings and buffers as vbad_sizes', which calls it. */
static void vbad_empty(arcoll_context_t ctx, arcoll_team_t world, uint8_t *sbuf, uint8_t *rbuf,
                       size_t guard, size_t most)
{
    static const struct {
        int coll; /* 0 alltoall, 1 allgather, 2 reduce_scatter_block, 3 allreduce */
        const char *alg;
        size_t size; /* bytes per rank (collectives 2, 3: int32 elements) */
    } k[] = {
        {0, "pap", 100},      {0, "pap", 20000},      {0, "direct", 100},     {0, "direct", 20000},
        {0, "pap_shm", 100},  {0, "shm_direct", 100}, {0, "sa", 100},         {0, "sa_direct", 100},
        {0, "rd", 100},       {0, "sh_co", 100},      {0, "mn_co", 100},      {1, "pap", 100},
        {1, "direct", 20000}, {1, "pap_shm", 100},    {1, "shm_direct", 100}, {1, "sh_co", 100},
        {2, "pap", 16},       {2, "ring", 16},        {2, "rdh", 16},         {3, "pap", 64},
        {3, "rdd", 64},       {3, "ring", 64},        {3, "rdh", 64},
    };
    static const char *const var[] = {"ARCOLL_ALLTOALL_ALG", "ARCOLL_ALLGATHER_ALG",
                                      "ARCOLL_REDUCE_SCATTER_ALG", "ARCOLL_ALLREDUCE_ALG"};
    int n = ct_nranks, me = ct_rank;

    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
        for (int v = 0; v < 2; v++) {
            int odd = v == 0 ? n - 1 : 0, c = k[i].coll, rc;
            size_t area = c == 0 || c == 1 ? (size_t)n * k[i].size : k[i].size * 4, bad = 0;
            size_t mine = me == odd ? 0 : k[i].size;
            arcoll_team_t t = NULL;
            float f[2] = {0};
            double t0, secs;
            char what[160], before[512];
            snprintf(what, sizeof(what),
                     "empty kind %zu.%d, %s %s, rank %d passes 0, the others %zu", i, v, k[i].alg,
                     var[c] + 7, odd, k[i].size);
            rc = arcoll_team_split(world, 0, 0, &t);
            CHECK(rc == ARCOLL_OK && t != NULL, "split for %s: %s", what, arcoll_strerror(rc));
            if (t == NULL)
                continue;
            ct_set(ctx, var[c], k[i].alg);
            memset(sbuf, 0, (size_t)n * most);
            memset(rbuf, 0xa5, (size_t)n * most + guard);
            arcoll_allreduce(world, f, f + 1, 1, ARCOLL_FLOAT, ARCOLL_BXOR); /* a known error */
            snprintf(before, sizeof(before), "%s", arcoll_last_error(NULL));
            t0 = ct_now();
            rc = c == 0   ? arcoll_alltoall(t, sbuf, rbuf, mine)
                 : c == 1 ? arcoll_allgather(t, sbuf, rbuf, mine)
                 : c == 2
                     ? arcoll_reduce_scatter_block(t, sbuf, rbuf, mine, ARCOLL_INT32, ARCOLL_SUM)
                     : arcoll_allreduce(t, sbuf, rbuf, mine, ARCOLL_INT32, ARCOLL_SUM);
            secs = ct_now() - t0;
            if (getenv("COLL_VBAD_VERBOSE") != NULL)
                printf("[rank %d] %s: %s in %.4f s: %s\n", me, what, arcoll_strerror(rc), secs,
                       arcoll_last_error(NULL));
            for (size_t j = me == odd ? 0 : area; j < (size_t)n * most + guard; j++)
                bad += rbuf[j] != 0xa5;
            CHECK(rc == ARCOLL_ERR_MISMATCH, "%s: got %s, want a mismatch (%s)", what,
                  arcoll_strerror(rc), arcoll_last_error(NULL));
            /* schedules: a rank downstream of the one that saw it is told
             * its input differs (protocol.md §12) */
            CHECK(strcmp(arcoll_last_error(NULL), before) != 0 &&
                      (c >= 2 || strstr(arcoll_last_error(NULL), "size") != NULL),
                  "%s: failed without saying why (last error: %s)", what, arcoll_last_error(NULL));
            CHECK(secs < 5.0, "%s: took %.2f s, want a prompt mismatch", what, secs);
            CHECK(bad == 0, "%s: %zu bytes written past the %zu-byte receive area", what, bad,
                  me == odd ? (size_t)0 : area);
            rc = arcoll_team_destroy(ctx, t);
            CHECK(rc == ARCOLL_OK, "destroy after %s: %s", what, arcoll_strerror(rc));
            ct_set(ctx, var[c], "pap");
        }
    }
}

/* alltoall and allgather where one rank's size puts it on another path or
 * algorithm than the others (docs/protocol.md §8): copy against zero-copy
 * (threshold 16k), a node algorithm against its flat fallback (ARCOLL_SHM_MAX
 * 4k; pretend nodes with ARCOLL_NODE_SIZE, or one node), in both directions,
 * the odd rank a node master (0) or not (n-1). Every rank must return
 * ARCOLL_ERR_MISMATCH well within the timeout (COLL_VBAD_TIMEOUT_MS, default
 * 20000; each call must end in 5 s), say why in arcoll_last_error, and leave
 * the bytes past its receive area untouched. */
static void vbad_sizes(arcoll_context_t ctx, arcoll_team_t world)
{
    static const struct {
        const char *alg;
        size_t odd, rest; /* bytes per rank of the odd rank, of the others */
    } k[] = {
        {"pap", 20000, 100},
        {"pap", 100, 20000},
        {"direct", 20000, 100},
        {"direct", 100, 20000},
        {"pap", 15000, 20000},
        {"pap_shm", 5000, 100},
        {"pap_shm", 20000, 100},
        {"pap_shm", 100, 5000},
        {"shm_direct", 5000, 100},
        {"shm_direct", 100, 20000},
        {"pap_shm", 3000, 100},
        /* the non-leader ones (alltoall only) against their flat fallback */
        {"sa", 5000, 100},
        {"sa", 100, 5000},
        {"sa_direct", 5000, 100},
        {"sa_direct", 100, 20000},
        {"rd", 5000, 100},
        {"rd", 100, 5000},
    };
    const char *tmo = getenv("COLL_VBAD_TIMEOUT_MS");
    const size_t guard = 4096, most = 20000;
    int n = ct_nranks, me = ct_rank;
    uint8_t *sbuf = malloc((size_t)n * most), *rbuf = malloc((size_t)n * most + guard);

    if (sbuf == NULL || rbuf == NULL) {
        CHECK(0, "vbad sizes: out of memory");
        goto out;
    }
    ct_set(ctx, "ARCOLL_TIMEOUT_MS", tmo != NULL ? tmo : "20000");
    ct_set(ctx, "ARCOLL_ZCOPY_THRESHOLD", "16k");
    ct_set(ctx, "ARCOLL_SHM_MAX", "4k");
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
        for (int coll = 0; coll < (ct_a2a_only(k[i].alg) ? 1 : 2); coll++) {
            int odd = i % 2 == 0 ? 0 : n - 1, rc;
            size_t mine = me == odd ? k[i].odd : k[i].rest, area = (size_t)n * mine, bad = 0;
            arcoll_team_t t = NULL;
            float f[2] = {0};
            double t0, secs;
            char what[128], before[512];
            snprintf(what, sizeof(what), "size kind %zu, %s %s, rank %d passes %zu, the others %zu",
                     i, k[i].alg, coll == 0 ? "alltoall" : "allgather", odd, k[i].odd, k[i].rest);
            rc = arcoll_team_split(world, 0, 0, &t);
            CHECK(rc == ARCOLL_OK && t != NULL, "split for %s: %s", what, arcoll_strerror(rc));
            if (t == NULL)
                continue;
            ct_set(ctx, coll == 0 ? "ARCOLL_ALLTOALL_ALG" : "ARCOLL_ALLGATHER_ALG", k[i].alg);
            memset(sbuf, 0x3c, (size_t)n * most);
            memset(rbuf, 0xa5, (size_t)n * most + guard);
            /* a known last error, so that a failure that sets none shows */
            arcoll_allreduce(world, f, f + 1, 1, ARCOLL_FLOAT, ARCOLL_BXOR);
            snprintf(before, sizeof(before), "%s", arcoll_last_error(NULL));
            t0 = ct_now();
            rc = coll == 0 ? arcoll_alltoall(t, sbuf, rbuf, mine)
                           : arcoll_allgather(t, sbuf, rbuf, mine);
            secs = ct_now() - t0;
            for (size_t j = area; j < (size_t)n * most + guard; j++)
                bad += rbuf[j] != 0xa5;
            CHECK(rc == ARCOLL_ERR_MISMATCH, "%s: got %s, want a mismatch (%s)", what,
                  arcoll_strerror(rc), arcoll_last_error(NULL));
            CHECK(strcmp(arcoll_last_error(NULL), before) != 0 &&
                      strstr(arcoll_last_error(NULL), "size") != NULL,
                  "%s: failed without saying why (last error: %s)", what, arcoll_last_error(NULL));
            CHECK(secs < 5.0, "%s: took %.2f s, want a prompt mismatch", what, secs);
            CHECK(bad == 0, "%s: %zu bytes written past the %zu-byte receive area", what, bad,
                  area);
            if (getenv("COLL_VBAD_VERBOSE") != NULL)
                printf("[rank %d] %s: %s in %.4f s: %s\n", me, what, arcoll_strerror(rc), secs,
                       arcoll_last_error(NULL));
            rc = arcoll_team_destroy(ctx, t);
            CHECK(rc == ARCOLL_OK, "destroy after %s: %s", what, arcoll_strerror(rc));
        }
    }
    ct_set(ctx, "ARCOLL_ALLTOALL_ALG", "pap");
    ct_set(ctx, "ARCOLL_ALLGATHER_ALG", "pap");
    vbad_empty(ctx, world, sbuf, rbuf, guard, most);
    ct_set(ctx, "ARCOLL_ZCOPY_THRESHOLD", "auto");
    ct_set(ctx, "ARCOLL_SHM_MAX", "64k");
out:
    free(sbuf);
    free(rbuf);
}

/* Bad input of the other collectives: local errors (the same on every rank,
 * before any communication: the team stays usable), then disagreements
 * across ranks, each on a fresh team split off the world (a mismatch fails
 * the team): every rank must see ARCOLL_ERR_MISMATCH, none a hang or OK. */
/* Two kinds of call at one epoch: rank 0 runs allreduce direct, whose
 * advertisement is the control flag alone (docs/protocol.md §2), where the
 * others run alltoall on the zero-copy path. The body under rank 0's flag is
 * an earlier zero-copy alltoall's, key included: nobody may write into that
 * buffer, and every rank fails the call. */
static void vbad_kinds(arcoll_context_t ctx, arcoll_team_t world)
{
    const size_t blk = 32 * 1024;
    int n = ct_nranks, me = ct_rank, bad = 0;
    arcoll_team_t t = NULL;
    unsigned char *sbuf = malloc((size_t)n * blk), *keep = malloc((size_t)n * blk),
                  *out = malloc((size_t)n * blk);
    int64_t in[16] = {0}, res[16];
    int rc;

    CHECK(sbuf != NULL && keep != NULL && out != NULL, "vbad kinds: out of memory");
    rc = arcoll_team_split(world, 0, 0, &t);
    CHECK(rc == ARCOLL_OK && t != NULL, "split for kinds: %s", arcoll_strerror(rc));
    if (sbuf == NULL || keep == NULL || out == NULL || t == NULL)
        goto out;
    ct_set(ctx, "ARCOLL_PATH", "zcopy");
    ct_set(ctx, "ARCOLL_ALLTOALL_ALG", "direct");
    ct_set(ctx, "ARCOLL_ALLREDUCE_ALG", "direct");
    memset(sbuf, me + 1, (size_t)n * blk);
    /* Every bank (at most 16) gets a zero-copy advertisement of keep. */
    for (int i = 0; i < 16; i++) {
        rc = arcoll_alltoall(t, sbuf, keep, blk);
        CHECK(rc == ARCOLL_OK, "kinds: alltoall %d: %s", i, arcoll_strerror(rc));
        if (rc != ARCOLL_OK)
            goto out;
    }
    memset(keep, 0xab, (size_t)n * blk);
    if (me == 0)
        rc = arcoll_allreduce(t, in, res, 16, ARCOLL_INT64, ARCOLL_SUM);
    else
        rc = arcoll_alltoall(t, sbuf, out, blk);
    CHECK(rc == ARCOLL_ERR_MISMATCH, "kinds: %s against %s: got %s, want a mismatch (%s)",
          me == 0 ? "allreduce" : "alltoall", me == 0 ? "alltoall" : "allreduce",
          arcoll_strerror(rc), arcoll_last_error(NULL));
    for (size_t i = 0; i < (size_t)n * blk; i++)
        bad += keep[i] != 0xab;
    CHECK(bad == 0, "kinds: %d bytes of an earlier call's buffer were written", bad);
out:
    ct_set(ctx, "ARCOLL_PATH", "auto");
    if (t != NULL) {
        rc = arcoll_team_destroy(ctx, t);
        CHECK(rc == ARCOLL_OK, "destroy after kinds: %s", arcoll_strerror(rc));
    }
    free(out);
    free(keep);
    free(sbuf);
}

void ct_test_vbad(arcoll_context_t ctx)
{
    static const char *const algs_m[] = {"pap", "direct", "ring", "rdd", "rdh", "sloav", "sloavx"};
    arcoll_team_t world = arcoll_team_world(ctx);
    int n = ct_nranks, me = ct_rank;
    size_t *c = calloc((size_t)n * 4, sizeof(size_t)), *d = c + n, *c2 = c + 2 * n, *d2 = c + 3 * n;
    char *buf = calloc((size_t)n * 64 + 64, 1), *out = calloc((size_t)n * 64 + 64, 1);
    char *big = calloc((size_t)n, 96 * 1024), *bigout = calloc((size_t)n, 96 * 1024);
    float f[4] = {0};
    int rc;

    for (int j = 0; j < n; j++) {
        c[j] = c2[j] = 8;
        d[j] = d2[j] = (size_t)j * 8;
    }
    rc = arcoll_alltoallv(world, buf, NULL, d, out, c2, d2);
    CHECK(rc == ARCOLL_ERR_INVALID, "alltoallv NULL counts: %s", arcoll_strerror(rc));
    rc = arcoll_alltoallv(world, buf, c, d, buf + 8, c2, d2);
    CHECK(rc == ARCOLL_ERR_INVALID, "alltoallv overlapping: %s", arcoll_strerror(rc));
    c[0] = SIZE_MAX;
    rc = arcoll_alltoallv(world, buf, c, d, out, c2, d2);
    CHECK(rc == ARCOLL_ERR_INVALID, "alltoallv huge count: %s", arcoll_strerror(rc));
    c[0] = 8;
    rc = arcoll_allgatherv(world, buf, 5, out, c2, d2);
    CHECK(rc == ARCOLL_ERR_MISMATCH, "allgatherv own count: %s", arcoll_strerror(rc));
    rc = arcoll_allgatherv(world, buf, 8, NULL, c2, d2);
    CHECK(rc == ARCOLL_ERR_INVALID, "allgatherv NULL rbuf: %s", arcoll_strerror(rc));
    rc = arcoll_allreduce(world, f, f + 1, 1, ARCOLL_FLOAT, ARCOLL_BXOR);
    CHECK(rc == ARCOLL_ERR_INVALID, "bxor on float: %s", arcoll_strerror(rc));
    rc = arcoll_allreduce(world, f, f + 1, 1, (arcoll_dtype_t)99, ARCOLL_SUM);
    CHECK(rc == ARCOLL_ERR_INVALID, "bad dtype: %s", arcoll_strerror(rc));
    rc = arcoll_allreduce(world, f, f + 1, 1, ARCOLL_FLOAT, (arcoll_op_t)-1);
    CHECK(rc == ARCOLL_ERR_INVALID, "bad op: %s", arcoll_strerror(rc));
    rc = arcoll_allreduce(world, f, f, 2, ARCOLL_FLOAT, ARCOLL_SUM);
    CHECK(rc == ARCOLL_ERR_INVALID, "allreduce overlapping: %s", arcoll_strerror(rc));
    rc = arcoll_reduce_scatter_block(world, f, NULL, 1, ARCOLL_FLOAT, ARCOLL_SUM);
    CHECK(rc == ARCOLL_ERR_INVALID, "reduce_scatter NULL rbuf: %s", arcoll_strerror(rc));
    rc = arcoll_allreduce(world, f, f + 1, SIZE_MAX / 2, ARCOLL_FLOAT, ARCOLL_SUM);
    CHECK(rc == ARCOLL_ERR_INVALID, "allreduce huge count: %s", arcoll_strerror(rc));
    rc = arcoll_allreduce(world, NULL, NULL, 0, ARCOLL_FLOAT, ARCOLL_SUM);
    CHECK(rc == ARCOLL_OK, "allreduce of nothing: %s", arcoll_strerror(rc));
    rc = arcoll_iallreduce(world, f, f + 1, 1, ARCOLL_FLOAT, ARCOLL_SUM, NULL);
    CHECK(rc == ARCOLL_ERR_INVALID, "NULL request: %s", arcoll_strerror(rc));
    /* The world is still fine after all that. */
    v_reduce(world, 0, 1, ARCOLL_SUM, 61000, 64, 0, 0, "allreduce after bad input");
    if (n < 2)
        goto out;
    ct_set(ctx, "ARCOLL_TIMEOUT_MS", "8000");
    ct_set(ctx, "ARCOLL_SLOAV_MAX", "16k"); /* sloav(x): 80K blocks go direct, 8 B routed */
    for (int a = 0; a < 7; a++) {
        /* kinds 0..2 and 11 for the algorithms of every collective; 3..8
         * are alltoallv's, which pap, direct, sloav and sloavx serve; 9..10
         * sloav(x)'s, which serve only alltoallv */
        int a2av = a < 2 || a >= 5;
        for (int kind = 0; kind < 12; kind++) {
            arcoll_team_t t = NULL;
            char what[96];
            if (!((kind <= 2 && a < 5) || (kind >= 3 && kind <= 8 && a2av) ||
                  (kind >= 9 && kind <= 10 && a >= 5) || (kind == 11 && a < 5)))
                continue;
            rc = arcoll_team_split(world, 0, 0, &t);
            CHECK(rc == ARCOLL_OK && t != NULL, "split for mismatch: %s", arcoll_strerror(rc));
            if (t == NULL)
                continue;
            ct_set(ctx, "ARCOLL_ALLGATHERV_ALG", a < 5 ? algs_m[a] : "pap");
            ct_set(ctx, "ARCOLL_REDUCE_SCATTER_ALG", a < 5 ? algs_m[a] : "pap");
            ct_set(ctx, "ARCOLL_ALLREDUCE_ALG", a < 5 ? algs_m[a] : "pap");
            ct_set(ctx, "ARCOLL_ALLTOALLV_ALG", a2av ? algs_m[a] : "pap");
            if (kind == 0) { /* rank 0 reduces one element more */
                int64_t in[64] = {0}, res[64];
                rc = arcoll_allreduce(t, in, res, me == 0 ? 17 : 16, ARCOLL_INT64, ARCOLL_SUM);
            } else if (kind == 1) { /* rank 0 uses another op */
                int32_t in[64] = {0}, res[64];
                rc = arcoll_reduce_scatter_block(t, in, res, 3, ARCOLL_INT32,
                                                 me == 0 ? ARCOLL_MAX : ARCOLL_SUM);
            } else if (kind == 2) { /* allgatherv: rank n-1 says rank 0 sends more */
                for (int j = 0; j < n; j++) {
                    c2[j] = 8 + (j == 0 && me == n - 1 ? 8 : 0);
                    d2[j] = (size_t)j * 16;
                }
                rc = arcoll_allgatherv(t, buf, 8, out, c2, d2);
            } else if (kind == 11) {
                /* allgatherv, 80K blocks (zero-copy from 16k): the same
                 * disagreement, seen through the advertisements, where the
                 * flat allgatherv carries the signature of the counts */
                const size_t stride = 96 * 1024;
                for (int j = 0; j < n; j++) {
                    c2[j] = 80 * 1024 + (j == 0 && me == n - 1 ? 8 : 0);
                    d2[j] = (size_t)j * stride;
                }
                ct_set(ctx, "ARCOLL_ZCOPY_THRESHOLD", "16k");
                rc = arcoll_allgatherv(t, big, 80 * 1024, bigout, c2, d2);
                ct_set(ctx, "ARCOLL_ZCOPY_THRESHOLD", "auto");
            } else {
                /* alltoallv: rank 0 sends rank 1 what it does not expect;
                 * sent/expected: 3: 11/8 (copy), 4: 80K+3/80K (zero-copy, the
                 * threshold 16k), 5: 0/8, 6: 8/0, 7: 8/80K and 8: 80K/8 (the
                 * two ends' lengths pick different paths; for sloav(x):
                 * routed at one end, direct at the other). */
                static const size_t sent[] = {11, 80 * 1024 + 3, 0, 8, 8, 80 * 1024, 2040, 3000};
                static const size_t want[] = {8, 80 * 1024, 8, 0, 80 * 1024, 8, 2056, 4000};
                const size_t stride = 96 * 1024;
                for (int j = 0; j < n; j++) {
                    c[j] = me == 0 && j == 1 ? sent[kind - 3] : 8;
                    c2[j] = me == 1 && j == 0 ? want[kind - 3] : 8;
                    d[j] = d2[j] = (size_t)j * stride;
                }
                /* sloav(x), limit 2k: kind 9, a routed 2040-byte block whose
                 * packed message (2056 bytes) is exactly the direct block its
                 * receiver expects; kind 10, two disagreements at rank 1 (a
                 * direct block's length, and from rank 2 a routed block where
                 * a direct one is expected). */
                if (kind == 10 && n > 2) {
                    c[1] = me == 2 ? 100 : c[1];
                    c2[2] = me == 1 ? 3000 : c2[2];
                }
                if (kind >= 9)
                    ct_set(ctx, "ARCOLL_SLOAV_MAX", "2k");
                ct_set(ctx, "ARCOLL_ZCOPY_THRESHOLD", "16k");
                rc = arcoll_alltoallv(t, big, c, d, bigout, c2, d2);
                ct_set(ctx, "ARCOLL_ZCOPY_THRESHOLD", "auto");
                ct_set(ctx, "ARCOLL_SLOAV_MAX", "16k");
            }
            snprintf(what, sizeof(what), "mismatch kind %d, %s", kind, algs_m[a]);
            if (kind >= 3 && kind <= 10 && (me > 1 || (me == 0 && a >= 5)))
                /* alltoallv: only the sender (0) and receiver (1) of the
                 * disagreeing block are involved; both must see it on the
                 * flat paths. sloav(x) routes a block through other ranks:
                 * only its destination can compare (docs/protocol.md §14),
                 * others may pass on the poisoned messages. Never a hang. */
                CHECK(rc == ARCOLL_OK || rc == ARCOLL_ERR_MISMATCH, "%s: %s", what,
                      arcoll_strerror(rc));
            else
                CHECK(rc == ARCOLL_ERR_MISMATCH, "%s: got %s, want a mismatch (%s)", what,
                      arcoll_strerror(rc), arcoll_last_error(NULL));
            rc = arcoll_team_destroy(ctx, t);
            CHECK(rc == ARCOLL_OK, "destroy after mismatch: %s", arcoll_strerror(rc));
        }
    }
    vbad_kinds(ctx, world);
    ct_set(ctx, "ARCOLL_TIMEOUT_MS", "20000");
    ct_set(ctx, "ARCOLL_SLOAV_MAX", "2k");
    ct_set(ctx, "ARCOLL_ALLTOALLV_ALG", "pap");
    vbad_sizes(ctx, world);
out:
    free(buf);
    free(out);
    free(big);
    free(bigout);
    free(c);
}
