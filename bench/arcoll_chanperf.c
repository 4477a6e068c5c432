/*
 * arcoll-chanperf: one RDMA WRITE through arcoll's channel layer, measured
 * the way perftest measures the raw verbs, so the two can be put side by
 * side in the same guest: ping-pong latency (half the round trip, like
 * ib_write_lat) and streaming bandwidth (like ib_write_bw). Two ranks.
 *
 *   lat flag   : one put_u64 (one 8-byte RDMA WRITE) each way, polled in memory
 *   lat msg    : a 2-byte put + put_u64 (what a copy-path message costs)
 *   bw         : a stream of zero-copy puts of SIZE bytes, a flag after the last
 *
 * arcoll-chanperf --sim [ITERS] measures instead the simulator's cost model
 * on this channel (docs/scale.md, "Calibration") and prints it on rank 0 as
 * parameter-file lines (KEY VALUE, ns and ns per byte; bench/sim-calibrate.sh
 * repeats it and keeps the medians). Every figure is a median over batches or
 * rounds, so that a batch that lost its core to another process drops out.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arcoll.h"
#include "bench/bench_stats.h"
#include "dispatch/coll.h"

#define CAL_BATCHES 15
#define CAL_BIG     65536 /* the payload of the per-byte figures: 64 KiB */

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static uint64_t load(const chan_mem_t *m, uint64_t off)
{
    return atomic_load_explicit((_Atomic uint64_t *)((char *)m->addr + off), memory_order_acquire);
}

/* Wait until our flag word reaches val, progressing our own sends meanwhile. */
static int wait_flag(chan_t *c, const chan_mem_t *m, uint64_t val)
{
    double deadline = now_us() + 30e6;
    while (load(m, 0) < val) {
        int rc = c->ops->progress(c);
        if (rc < 0)
            return rc;
        if (now_us() > deadline) {
            fprintf(stderr, "arcoll-chanperf: peer silent for 30 s\n");
            return ARCOLL_ERR_TIMEOUT;
        }
    }
    return ARCOLL_OK;
}

static int drain(chan_t *c)
{
    int rc;
    while ((rc = c->ops->progress(c)) > 0)
        ;
    return rc;
}

/* One round trip of flags: rank 0 writes seq and waits for it back. */
static int ping(chan_t *c, int me, int peer, const chan_mem_t *m, const chan_rmem_t *rm,
                uint64_t seq)
{
    int rc;

    if (me == 0) {
        if ((rc = c->ops->put_u64(c, peer, seq, rm, 0)) != 0)
            return rc;
        return wait_flag(c, m, seq);
    }
    if ((rc = wait_flag(c, m, seq)) != 0)
        return rc;
    return c->ops->put_u64(c, peer, seq, rm, 0);
}

/* The cost model's parameters on this channel (sim_params_t, src/chan/sim/sim.h):
 *   o: a put of 8 bytes as the sender's CPU sees it (back to back, 1000 a batch)
 *   G: a 64 KiB put into the peer's region minus o, per byte, with the peer
 *      reading each one out (so its lines move between cores as in a call)
 *   copy_G: that read-out (the target's copy of a delivered payload) per byte
 *   L: half a flag round trip minus the flag's o + 8 G
 *   poll: one look of a wait loop (progress + a load of the flag word)
 * and, as comments, local memcpy per byte (hot cache) and the half round trip. */
static int calibrate(arcoll_context_t ctx, chan_t *c, int me, int peer, const chan_mem_t *m,
                     const chan_rmem_t *rm, int iters, uint64_t *seq)
{
    int reps = iters > 10 ? iters : 10, rounds = reps > 200 ? 200 : reps, rc = ARCOLL_OK;
    double batch[CAL_BATCHES], *put_ns = NULL, *copy_ns = NULL, t0, share[2], all[4];
    double half_rtt, o, poll, memcpy_g;
    unsigned char *priv = malloc(2 * CAL_BIG), src8[8] = {0};

    put_ns = malloc(sizeof(double) * (size_t)rounds);
    copy_ns = malloc(sizeof(double) * (size_t)rounds);
    if (priv == NULL || put_ns == NULL || copy_ns == NULL) {
        fprintf(stderr, "arcoll-chanperf: out of memory\n");
        rc = ARCOLL_ERR_NOMEM;
        goto out;
    }
    memset(priv, 1, 2 * CAL_BIG);
    /* Half a flag round trip. */
    for (int i = 0; i < 100 && rc == 0; i++)
        rc = ping(c, me, peer, m, rm, ++*seq);
    for (int k = 0; k < CAL_BATCHES && rc == 0; k++) {
        t0 = now_us();
        for (int i = 0; i < reps && rc == 0; i++)
            rc = ping(c, me, peer, m, rm, ++*seq);
        batch[k] = (now_us() - t0) * 1e3 / reps / 2;
    }
    if (rc != 0)
        goto out;
    half_rtt = bstat_median(batch, CAL_BATCHES);
    /* o: rank 0 puts 8 bytes back to back (one line of the region after
     * another), while rank 1 waits for the flag that ends the phase. */
    o = 0;
    if (me == 0) {
        for (int k = 0; k < CAL_BATCHES && rc == 0; k++) {
            t0 = now_us();
            for (int i = 0; i < 1000 && rc == 0; i++)
                rc = c->ops->put(c, peer, src8, 8, NULL, rm, 64 + (uint64_t)(i % 1024) * 64);
            batch[k] = (now_us() - t0) * 1e3 / 1000;
        }
        o = bstat_median(batch, CAL_BATCHES);
    }
    if (rc == 0)
        rc = ping(c, me, peer, m, rm, ++*seq);
    /* A 64 KiB payload and its read-out, round by round. */
    for (int i = -10; i < rounds && rc == 0; i++) {
        double t1;
        if (me == 0) {
            t0 = now_us();
            rc = c->ops->put(c, peer, priv, CAL_BIG, NULL, rm, 64);
            t1 = now_us();
            if (rc == 0)
                rc = ping(c, me, peer, m, rm, ++*seq);
            if (i >= 0)
                put_ns[i] = (t1 - t0) * 1e3;
        } else {
            if ((rc = wait_flag(c, m, ++*seq)) != 0)
                break;
            t0 = now_us();
            memcpy(priv, (const char *)m->addr + 64, CAL_BIG);
            __asm__ __volatile__("" : : "r"(priv) : "memory"); /* keep the copy */
            t1 = now_us();
            rc = c->ops->put_u64(c, peer, *seq, rm, 0);
            if (i >= 0)
                copy_ns[i] = (t1 - t0) * 1e3;
        }
    }
    if (rc != 0)
        goto out;
    /* Local memcpy (hot cache) and one look of a wait loop, on rank 0. */
    memcpy_g = poll = 0;
    if (me == 0) {
        for (int k = 0; k < CAL_BATCHES; k++) {
            t0 = now_us();
            for (int i = 0; i < 100; i++) {
                memcpy(priv + CAL_BIG, priv, CAL_BIG);
                __asm__ __volatile__("" : : "r"(priv) : "memory");
            }
            batch[k] = (now_us() - t0) * 1e3 / 100 / CAL_BIG;
        }
        memcpy_g = bstat_median(batch, CAL_BATCHES);
        for (int k = 0; k < CAL_BATCHES && rc >= 0; k++) {
            uint64_t seen = 0;
            t0 = now_us();
            for (int i = 0; i < 10000 && rc >= 0; i++) {
                rc = c->ops->progress(c);
                seen += load(m, 0);
            }
            batch[k] = (now_us() - t0) * 1e3 / 10000;
            __asm__ __volatile__("" : : "r"(seen) : "memory");
        }
        poll = bstat_median(batch, CAL_BATCHES);
        if (rc > 0)
            rc = 0;
    }
    if (rc != 0)
        goto out;
    share[0] = me == 0 ? bstat_median(put_ns, rounds) : bstat_median(copy_ns, rounds);
    share[1] = 0;
    rc = ctx->boot->allgather(ctx->boot, share, all, sizeof(share));
    if (rc != ARCOLL_OK || me != 0)
        goto out;
    {
        double g = (all[0] - o) / CAL_BIG, copy_g = all[2] / CAL_BIG;
        double l = half_rtt - o - 8 * g;
        printf("# arcoll-chanperf --sim on %s: half flag round trip %.1f ns, 64 KiB put %.1f ns, "
               "its read-out %.1f ns, local memcpy %.4f ns/B (%d reps, %d rounds)\n",
               c->ops->name, half_rtt, all[0], all[2], memcpy_g, reps, rounds);
        printf("intra_o %.2f\nintra_L %.2f\nintra_G %.5f\ncopy_G %.5f\npoll %.2f\n"
               "# memcpy_G %.5f\n",
               o, l > 1 ? l : 1, g > 0 ? g : 0, copy_g, poll, memcpy_g);
    }
out:
    free(copy_ns);
    free(put_ns);
    free(priv);
    return rc;
}

int main(int argc, char **argv)
{
    int sim = argc > 1 && strcmp(argv[1], "--sim") == 0;
    size_t bw_size = argc > 1 && !sim ? (size_t)atol(argv[1]) : 65536;
    int iters = argc > 2 ? atoi(argv[2]) : 1000, rc, me, peer;
    arcoll_context_t ctx;
    chan_mem_t mem;
    chan_rkey_t keys[2];
    chan_rmem_t rm;
    chan_t *c;
    double t0, lat_flag = 0, lat_msg = 0, bw;
    uint64_t seq = 0;
    char two[2] = {1, 2};

    rc = arcoll_init(NULL, &ctx);
    if (rc != ARCOLL_OK)
        return 1;
    if (arcoll_context_size(ctx) != 2) {
        fprintf(stderr, "arcoll-chanperf: run with exactly 2 ranks\n");
        arcoll_finalize(ctx);
        return 2;
    }
    c = ctx->chan;
    me = ctx->boot->rank;
    peer = 1 - me;
    /* [flag line][data...]: the flag at offset 0, data from offset 64. */
    rc = c->ops->mem_alloc(c, 64 + bw_size, &mem);
    if (rc != ARCOLL_OK)
        goto out_fin;
    rc = ctx->boot->allgather(ctx->boot, &mem.rkey, keys, sizeof(mem.rkey));
    if (rc == ARCOLL_OK)
        rc = c->ops->rmem_import(c, peer, &keys[peer], &rm);
    if (rc != ARCOLL_OK)
        goto out_mem;
    /* Sealed only once the peer has imported it (smp: the import opens our
     * segment through /proc/PID/fd, which the seal closes). */
    ctx->boot->barrier(ctx->boot);
    if (c->ops->mem_seal)
        c->ops->mem_seal(c, &mem);
    if (sim) {
        rc = calibrate(ctx, c, me, peer, &mem, &rm, iters, &seq);
        goto out_rm;
    }

    /* Latency of the flag alone: ping-pong of one 8-byte write. */
    for (int phase = 0; phase < 2; phase++) {
        int warm = 100;
        t0 = 0;
        for (int i = -warm; i < iters; i++) {
            if (i == 0)
                t0 = now_us();
            if (me == 0) {
                if (phase == 1 && (rc = c->ops->put(c, peer, two, 2, NULL, &rm, 64)) != 0)
                    goto out_rm;
                if ((rc = c->ops->put_u64(c, peer, ++seq, &rm, 0)) != 0 ||
                    (rc = wait_flag(c, &mem, seq)) != 0)
                    goto out_rm;
            } else {
                if ((rc = wait_flag(c, &mem, ++seq)) != 0)
                    goto out_rm;
                if (phase == 1 && (rc = c->ops->put(c, peer, two, 2, NULL, &rm, 64)) != 0)
                    goto out_rm;
                if ((rc = c->ops->put_u64(c, peer, seq, &rm, 0)) != 0)
                    goto out_rm;
            }
        }
        if (phase == 0)
            lat_flag = (now_us() - t0) / iters / 2;
        else
            lat_msg = (now_us() - t0) / iters / 2;
    }
    if ((rc = drain(c)) < 0)
        goto out_rm;

    /* Bandwidth: a stream of zero-copy writes from our registered buffer. */
    {
        int n = iters / 2 > 0 ? iters / 2 : 1;
        ctx->boot->barrier(ctx->boot);
        t0 = now_us();
        if (me == 0) {
            for (int i = 0; i < n; i++)
                if ((rc = c->ops->put(c, peer, (char *)mem.addr + 64, bw_size, &mem, &rm, 64)) != 0)
                    goto out_rm;
            if ((rc = c->ops->put_u64(c, peer, ++seq, &rm, 0)) != 0 ||
                (rc = wait_flag(c, &mem, seq)) != 0)
                goto out_rm;
        } else {
            if ((rc = wait_flag(c, &mem, ++seq)) != 0 ||
                (rc = c->ops->put_u64(c, peer, seq, &rm, 0)) != 0)
                goto out_rm;
        }
        bw = (double)n * (double)bw_size * 8 / ((now_us() - t0) * 1e3); /* Gb/s */
        if ((rc = drain(c)) < 0)
            goto out_rm;
    }
    if (me == 0)
        printf("arcoll-chanperf %s: lat_flag %.2f us, lat_msg_2B %.2f us, bw_%zuB %.3f Gb/s "
               "(%d iterations)\n",
               c->ops->name, lat_flag, lat_msg, bw_size, bw, iters);
    rc = 0;
out_rm:
    c->ops->rmem_release(c, &rm);
out_mem:
    ctx->boot->barrier(ctx->boot);
    c->ops->mem_free(c, &mem);
out_fin:
    arcoll_finalize(ctx);
    return rc == 0 ? 0 : 1;
}
