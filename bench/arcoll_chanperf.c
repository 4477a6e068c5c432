/*
 * arcoll-chanperf: one RDMA WRITE through arcoll's channel layer, measured
 * the way perftest measures the raw verbs, so the two can be put side by
 * side in the same guest: ping-pong latency (half the round trip, like
 * ib_write_lat) and streaming bandwidth (like ib_write_bw). Two ranks.
 *
 *   lat flag   : one put_u64 (one 8-byte RDMA WRITE) each way, polled in memory
 *   lat msg    : a 2-byte put + put_u64 (what a copy-path message costs)
 *   bw         : a stream of zero-copy puts of SIZE bytes, a flag after the last
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arcoll.h"
#include "core/coll.h"

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

int main(int argc, char **argv)
{
    size_t bw_size = argc > 1 ? (size_t)atol(argv[1]) : 65536;
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
    if (c->ops->mem_seal)
        c->ops->mem_seal(c, &mem);
    ctx->boot->barrier(ctx->boot);

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
