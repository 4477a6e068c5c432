/*
 * The verbs channel: RC QPs wired on demand, data moved only by RDMA WRITE.
 * docs/verbs.md.
 *
 * Connections: at init each rank creates one UD QP and the bootstrap carries
 * one fixed-size address record per rank. An RC QP to a peer is created and
 * connected by a handshake over UD (HELLO messages) the first time we write to
 * that peer or it writes to us; puts to a peer whose QP is not known to be
 * RTR at the peer are queued in order and posted once it is (ready).
 * ARCOLL_VERBS_CONNECT=eager runs the handshake with every peer at init.
 *
 * Completions: every put_u64 and every staged put is signaled; other puts
 * are signaled at least every VERBS_SIGNAL_EVERY WRs, and a completion of WR
 * n on a QP retires all earlier WRs of that QP (RC completes in order). The
 * engine always ends a series of puts to a peer with put_u64 (chan.h), so
 * progress reaches zero outstanding without extra WRs.
 *
 * Notification: ARCOLL_NOTIFY=flag writes the flag word with RDMA WRITE after
 * the data on the same QP and relies on the HCA placing writes in order.
 * ARCOLL_NOTIFY=imm writes it with RDMA WRITE WITH IMMEDIATE into a shadow
 * word; only the receive completion (which the IB spec orders after the data
 * of all earlier WRs of the QP) makes the receiver copy it to the real flag.
 */
#include "chan/verbs/verbs_int.h"
#include "chan/verbs/verbs_opts.h"

static const struct chan_ops verbs_ops = {
    .name = "verbs",
    .mem_alloc = verbs_mem_alloc,
    .mem_free = verbs_mem_free,
    .mem_seal = NULL,
    .mem_reg = verbs_mem_reg,
    .mem_reg_odp = verbs_mem_reg_odp,
    .mem_dereg = verbs_mem_dereg,
    .rmem_import = verbs_rmem_import,
    .rmem_release = verbs_rmem_release,
    .put = verbs_put,
    .put_u64 = verbs_put_u64,
    .progress = verbs_progress,
    .peer_check = verbs_peer_check,
    .peer_ready = verbs_peer_ready,
    .peer_describe = verbs_peer_describe,
    .stats = verbs_stats,
    .destroy = verbs_destroy,
};

void verbs_destroy(chan_t *c)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;
    int rc;

    /* Reverse order of setup: what the handshakes made, the UD QP and its
     * buffer, then the staging ring and the rest of the ladder. */
    for (int p = 0; vc->peers != NULL && p < c->boot->size; p++) {
        if (vc->peers[p].qp != NULL && (rc = ibv_destroy_qp(vc->peers[p].qp)) != 0)
            log_warn("verbs: ibv_destroy_qp failed: %s", strerror(rc));
        if (vc->peers[p].ah != NULL && (rc = ibv_destroy_ah(vc->peers[p].ah)) != 0)
            log_warn("verbs: ibv_destroy_ah failed: %s", strerror(rc));
        free(vc->peers[p].q);
    }
    if (vc->ud_qp != NULL && (rc = ibv_destroy_qp(vc->ud_qp)) != 0)
        log_warn("verbs: ibv_destroy_qp (UD) failed: %s", strerror(rc));
    if (vc->ud_mr != NULL && (rc = ibv_dereg_mr(vc->ud_mr)) != 0)
        log_warn("verbs: ibv_dereg_mr (UD buffer) failed: %s", strerror(rc));
    free(vc->ud_buf);
    if (vc->ud_cq != NULL && (rc = ibv_destroy_cq(vc->ud_cq)) != 0)
        log_warn("verbs: ibv_destroy_cq (UD) failed: %s", strerror(rc));
    if (vc->stage_mr != NULL && (rc = ibv_dereg_mr(vc->stage_mr)) != 0)
        log_warn("verbs: ibv_dereg_mr (staging) failed: %s", strerror(rc));
    free(vc->stage);
    free(vc->peers);
    free(vc->addrs);
    free(vc->pids);
    free(vc->ents);
    if (vc->srq != NULL && (rc = ibv_destroy_srq(vc->srq)) != 0)
        log_warn("verbs: ibv_destroy_srq failed: %s", strerror(rc));
    if (vc->rcq != NULL && (rc = ibv_destroy_cq(vc->rcq)) != 0)
        log_warn("verbs: ibv_destroy_cq (receive) failed: %s", strerror(rc));
    if (vc->cq != NULL && (rc = ibv_destroy_cq(vc->cq)) != 0)
        log_warn("verbs: ibv_destroy_cq failed: %s", strerror(rc));
    if (vc->pd != NULL && (rc = ibv_dealloc_pd(vc->pd)) != 0)
        log_warn("verbs: ibv_dealloc_pd failed: %s", strerror(rc));
    if (vc->ctx != NULL && ibv_close_device(vc->ctx) != 0)
        log_warn("verbs: ibv_close_device failed");
    free(vc);
}

static int verbs_srq_fill(verbs_chan_t *vc)
{
    struct ibv_srq_init_attr sa;

    memset(&sa, 0, sizeof(sa));
    sa.attr.max_wr = VERBS_SRQ_DEPTH;
    sa.attr.max_sge = 1;
    vc->rcq = ibv_create_cq(vc->ctx, VERBS_SRQ_DEPTH, NULL, NULL, 0);
    if (vc->rcq == NULL) {
        log_err("verbs: ibv_create_cq (receive) failed: %s", strerror(errno));
        return ARCOLL_ERR_CHANNEL;
    }
    vc->srq = ibv_create_srq(vc->pd, &sa);
    if (vc->srq == NULL) {
        log_err("verbs: ibv_create_srq failed: %s", strerror(errno));
        return ARCOLL_ERR_CHANNEL;
    }
    for (int i = 0; i < VERBS_SRQ_DEPTH; i++) {
        struct ibv_recv_wr wr = {0}, *bad;
        if (ibv_post_srq_recv(vc->srq, &wr, &bad) != 0) {
            log_err("verbs: ibv_post_srq_recv failed");
            return ARCOLL_ERR_CHANNEL;
        }
    }
    return ARCOLL_OK;
}

void verbs_chan_describe(struct chan *c, char *buf, size_t len)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;
    char g[64] = "none (LID routing)", inl[32] = "unknown until a QP exists";

    if (vc->gid_index >= 0)
        inet_ntop(AF_INET6, vc->gid.raw, g, sizeof(g));
    if (vc->max_inline != UINT32_MAX)
        snprintf(inl, sizeof(inl), "%u B", vc->max_inline);
    snprintf(buf, len,
             "%s port %u, gid[%d] %s, mtu %d, %d RC QPs (%d ready, connect %s), UD QP %u, "
             "inline %s, staging %u KiB, notify %s, heap MR %s",
             ibv_get_device_name(vc->ctx->device), vc->port, vc->gid_index, g,
             128 << vc->pa.active_mtu, vc->nqps, vc->nready, vc->eager ? "eager" : "lazy",
             vc->ud_qp->qp_num, inl, VERBS_STAGE_SIZE >> 10, vc->imm ? "imm" : "flag",
             vc->super.heap_mr == CHAN_HEAP_MR_ODP ? "on demand" : "pinned prefix");
}

/* Setup ladder: device -> PD -> CQ(s) -> staging MR -> UD QP -> address
 * exchange (-> every RC QP when eager). On failure verbs_destroy walks it
 * down from wherever it got to. */
int verbs_chan_create(boot_t *boot, const chan_args_t *args, chan_t **out)
{
    const verbs_opts_t *o = args->opts;
    verbs_chan_t *vc;
    struct ibv_device_attr da;
    long gid_want = o->gid_index;
    int cqe, rc;

    *out = NULL;
    vc = calloc(1, sizeof(*vc));
    if (vc == NULL) {
        log_err("verbs: out of memory");
        return ARCOLL_ERR_NOMEM;
    }
    vc->super.ops = &verbs_ops;
    vc->super.boot = boot;
    /* Past a few packets the staging copy costs more than a registration. */
    vc->super.zcopy_threshold = 16u << 10;
    vc->super.bounce = CHAN_BOUNCE_NET;
    vc->imm = o->notify == VERBS_NOTIFY_IMM;
    vc->eager = o->connect == VERBS_CONNECT_EAGER;
    vc->timeout_ms = args->timeout_ms;
    vc->max_inline = UINT32_MAX;
    if (o->wireup == VERBS_WIREUP_RDMACM) {
        /* librdmacm names device, port and GID from this host's IP address. */
        char dev[80];
        union ibv_gid want;
        uint8_t port;
        rc = verbs_rdmacm_resolve(o->device, dev, sizeof(dev) - 4, &port, &want);
        if (rc != ARCOLL_OK)
            goto err;
        snprintf(dev + strlen(dev), 5, ":%u", port);
        rc = verbs_dev_open(dev, &vc->ctx, &vc->port, &vc->pa);
        if (rc != ARCOLL_OK)
            goto err;
        gid_want =
            o->gid_index >= 0 ? o->gid_index : verbs_gid_find(vc->ctx, vc->port, &vc->pa, &want);
        if (gid_want < 0) {
            log_err("verbs: ARCOLL_WIREUP=rdmacm: the GID of the address is not in %s's table",
                    dev);
            rc = ARCOLL_ERR_CHANNEL;
            goto err;
        }
    } else {
        rc = verbs_dev_open(o->device, &vc->ctx, &vc->port, &vc->pa);
        if (rc != ARCOLL_OK)
            goto err;
    }
    rc = verbs_gid_choose(vc->ctx, vc->port, &vc->pa, gid_want, &vc->gid_index, &vc->gid);
    if (rc != ARCOLL_OK)
        goto err;
    rc = ARCOLL_ERR_CHANNEL;
    if (ibv_query_device(vc->ctx, &da) != 0) {
        log_err("verbs: ibv_query_device failed");
        goto err;
    }
    vc->pd = ibv_alloc_pd(vc->ctx);
    if (vc->pd == NULL) {
        log_err("verbs: ibv_alloc_pd failed: %s", strerror(errno));
        goto err;
    }
    cqe = VERBS_SQ_DEPTH * (boot->size > 1 ? boot->size - 1 : 1);
    if (cqe > da.max_cqe)
        cqe = da.max_cqe; /* then cq_room, not the SQs, bounds what is in flight */
    vc->cq = ibv_create_cq(vc->ctx, cqe, NULL, NULL, 0);
    if (vc->cq == NULL) {
        log_err("verbs: ibv_create_cq(%d) failed: %s", cqe, strerror(errno));
        goto err;
    }
    vc->cq_room = cqe;
    if (vc->imm && (rc = verbs_srq_fill(vc)) != ARCOLL_OK)
        goto err;
    rc = ARCOLL_ERR_NOMEM;
    vc->peers = calloc((size_t)boot->size, sizeof(*vc->peers));
    vc->addrs = calloc((size_t)boot->size, sizeof(*vc->addrs));
    vc->pids = calloc((size_t)boot->size, sizeof(*vc->pids));
    vc->ents = calloc(VERBS_STAGE_ENTS, sizeof(*vc->ents));
    if (vc->peers == NULL || vc->addrs == NULL || vc->pids == NULL || vc->ents == NULL ||
        posix_memalign((void **)&vc->stage, 4096, VERBS_STAGE_SIZE) != 0) {
        log_err("verbs: out of memory");
        goto err;
    }
    vc->stage_mr = ibv_reg_mr(vc->pd, vc->stage, VERBS_STAGE_SIZE, IBV_ACCESS_LOCAL_WRITE);
    if (vc->stage_mr == NULL) {
        log_err("verbs: ibv_reg_mr of the %u-byte staging buffer failed: %s (locked-memory "
                "limit? see ulimit -l)",
                VERBS_STAGE_SIZE, strerror(errno));
        goto err;
    }
    vc->reg_bytes += VERBS_STAGE_SIZE;
    rc = verbs_ud_create(vc);
    if (rc == ARCOLL_OK)
        rc = verbs_addr_exchange(vc);
    if (rc == ARCOLL_OK)
        rc = vc->eager ? verbs_connect_all(vc) : verbs_ring_connect(vc);
    if (rc != ARCOLL_OK)
        goto err;
    vc->super.zcopy = 1;
    vc->super.heap_mr = verbs_odp_rc(vc) ? CHAN_HEAP_MR_ODP : CHAN_HEAP_MR_PIN;
    vc->super.fixed_bytes = vc->reg_bytes; /* staging ring and UD buffer */
    if (boot->rank == 0) {
        char d[256];
        verbs_chan_describe(&vc->super, d, sizeof(d));
        log_info("verbs: %s", d);
    }
    *out = &vc->super;
    return ARCOLL_OK;

err:
    verbs_destroy(&vc->super);
    return rc;
}
