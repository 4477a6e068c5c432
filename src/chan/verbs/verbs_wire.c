/* The verbs channel's wire-up: RC QPs, the UD handshake (HELLO), GONE
 * notices and the liveness of peers (docs/verbs.md). */
#include "chan/verbs/verbs_int.h"

const char *verbs_peer_desc(verbs_chan_t *vc, int peer)
{
    static char buf[32];
    (void)vc;
    snprintf(buf, sizeof(buf), "rank %d", peer);
    return buf;
}

static uint32_t verbs_psn(uint32_t qpn)
{
    return (qpn * 2654435761u) & 0xffffff;
}

/* Our RC QP for the peer, RESET -> INIT (no peer address needed yet). */
int verbs_qp_create(verbs_chan_t *vc, int peer)
{
    struct ibv_qp_init_attr ia;
    struct ibv_qp_attr a;
    struct ibv_qp *qp;
    int rc;

    memset(&ia, 0, sizeof(ia));
    ia.send_cq = vc->cq;
    ia.recv_cq = vc->imm ? vc->rcq : vc->cq;
    ia.srq = vc->srq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = VERBS_SQ_DEPTH;
    ia.cap.max_recv_wr = vc->srq ? 0 : 1;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = VERBS_MAX_INLINE;
    qp = ibv_create_qp(vc->pd, &ia);
    if (qp == NULL) {
        ia.cap.max_inline_data = 0; /* some devices have no inline data */
        qp = ibv_create_qp(vc->pd, &ia);
    }
    if (qp == NULL) {
        log_err("verbs: ibv_create_qp for rank %d failed: %s", peer, strerror(errno));
        return ARCOLL_ERR_CHANNEL;
    }
    if (vc->max_inline == UINT32_MAX || ia.cap.max_inline_data < vc->max_inline)
        vc->max_inline = ia.cap.max_inline_data;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = vc->port;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    rc =
        ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc != 0) {
        log_err("verbs: ibv_modify_qp(INIT) for rank %d failed: %s", peer, strerror(rc));
        ibv_destroy_qp(qp);
        return ARCOLL_ERR_CHANNEL;
    }
    vc->peers[peer].qp = qp;
    vc->peers[peer].state = VERBS_CONN_INIT;
    vc->nqps++;
    vc->pending++;
    return ARCOLL_OK;
}

/* INIT -> RTR -> RTS with the peer's advertised address (rc_pingpong's ladder). */
static int verbs_qp_connect(verbs_chan_t *vc, int peer, uint32_t rqpn)
{
    const verbs_addr_t *ra = &vc->addrs[peer];
    struct ibv_qp *qp = vc->peers[peer].qp;
    struct ibv_qp_attr a;
    int rc;

    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = ra->mtu < vc->pa.active_mtu ? (enum ibv_mtu)ra->mtu : vc->pa.active_mtu;
    a.dest_qp_num = rqpn;
    a.rq_psn = verbs_psn(rqpn);
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.dlid = ra->lid;
    a.ah_attr.sl = 0;
    a.ah_attr.port_num = vc->port;
    if (vc->gid_index >= 0) {
        /* RoCE (or a GRH the user asked for): route by GID. */
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, ra->gid, 16);
        a.ah_attr.grh.sgid_index = (uint8_t)vc->gid_index;
        a.ah_attr.grh.hop_limit = 64;
    }
    rc = ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                           IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc != 0) {
        log_err("verbs: ibv_modify_qp(RTR) to rank %d failed: %s", peer, strerror(rc));
        return ARCOLL_ERR_CHANNEL;
    }
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14; /* 4.096 us * 2^14 = 67 ms per try */
    /* 6, not 7: Soft-RoCE takes 7 as "retry for ever" (as the spec does for
     * rnr_retry only), and a write to a dead peer then never completes. With
     * 6, 7 tries: a dead peer is reported after about half a second. */
    a.retry_cnt = 6;
    a.rnr_retry = 7;
    a.sq_psn = verbs_psn(qp->qp_num);
    a.max_rd_atomic = 1;
    rc = ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                           IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc != 0) {
        log_err("verbs: ibv_modify_qp(RTS) to rank %d failed: %s", peer, strerror(rc));
        return ARCOLL_ERR_CHANNEL;
    }
    vc->peers[peer].rqpn = rqpn;
    vc->peers[peer].state = VERBS_CONN_RTS;
    return ARCOLL_OK;
}

/* The UD address handle to the peer, created on first use and kept. */
static int verbs_ah_get(verbs_chan_t *vc, int peer, struct ibv_ah **out)
{
    verbs_peer_t *p = &vc->peers[peer];
    const verbs_addr_t *ra = &vc->addrs[peer];
    struct ibv_ah_attr aa;

    if (p->ah == NULL) {
        memset(&aa, 0, sizeof(aa));
        aa.dlid = ra->lid;
        aa.port_num = vc->port;
        if (vc->gid_index >= 0) { /* the same routing as the RC QPs */
            aa.is_global = 1;
            memcpy(aa.grh.dgid.raw, ra->gid, 16);
            aa.grh.sgid_index = (uint8_t)vc->gid_index;
            aa.grh.hop_limit = 64;
        }
        p->ah = ibv_create_ah(vc->pd, &aa);
        if (p->ah == NULL) {
            log_err("verbs: ibv_create_ah to rank %d failed: %s", peer, strerror(errno));
            return ARCOLL_ERR_CHANNEL;
        }
    }
    *out = p->ah;
    return ARCOLL_OK;
}

/* One datagram to the peer's UD QP (a HELLO or a notice). With every send
 * slot in flight it is skipped (ARCOLL_INPROGRESS): both kinds are resent
 * by their callers' clocks or are best effort. */
static int verbs_ud_send(verbs_chan_t *vc, int peer, const void *msg, size_t len)
{
    struct ibv_send_wr wr, *bad;
    struct ibv_sge sge;
    struct ibv_ah *ah;
    uint32_t slot;
    void *buf;
    int rc = verbs_ah_get(vc, peer, &ah);

    if (rc != ARCOLL_OK)
        return rc;
    if (vc->ud_send_busy >= VERBS_UD_SENDS)
        return ARCOLL_INPROGRESS;
    /* UD sends complete in order, so slots come back round-robin. */
    slot = vc->ud_send_next++ % VERBS_UD_SENDS;
    buf = vc->ud_buf + (size_t)(VERBS_UD_RECVS + slot) * VERBS_UD_SLOT;
    memcpy(buf, msg, len);
    sge.addr = (uintptr_t)buf;
    sge.length = (uint32_t)len;
    sge.lkey = vc->ud_mr->lkey;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = VERBS_UD_SEND_BIT | slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = vc->addrs[peer].ud_qpn;
    wr.wr.ud.remote_qkey = VERBS_UD_QKEY;
    rc = ibv_post_send(vc->ud_qp, &wr, &bad);
    if (rc != 0) {
        log_err("verbs: ibv_post_send of a datagram to rank %d failed: %s", peer, strerror(rc));
        return ARCOLL_ERR_CHANNEL;
    }
    vc->ud_send_busy++;
    return ARCOLL_OK;
}

/* HELLO{our QPN, rtr, ack} to the peer. Losing one is harmless (the side that
 * is not ready retransmits), so with every send slot busy it is skipped. */
int verbs_hello_send(verbs_chan_t *vc, int peer)
{
    verbs_peer_t *p = &vc->peers[peer];
    verbs_hello_t h;
    int rc;

    p->hello_ns = core_time_ns();
    memset(&h, 0, sizeof(h));
    h.magic = VERBS_HELLO_MAGIC;
    h.version = VERBS_HELLO_VERSION;
    h.rtr = p->state >= VERBS_CONN_RTS;
    h.ack = p->state == VERBS_CONN_READY;
    h.src = (uint32_t)vc->super.boot->rank;
    h.dst = (uint32_t)peer;
    h.qpn = p->qp->qp_num;
    rc = verbs_ud_send(vc, peer, &h, sizeof(h));
    if (rc == ARCOLL_INPROGRESS) {
        log_debug("verbs: HELLO to rank %d skipped: every UD send slot is in flight", peer);
        return ARCOLL_OK;
    }
    if (rc == ARCOLL_OK)
        p->hellos_sent++;
    return rc;
}

/* One HELLO from a peer: create and connect our QP if needed, note whether
 * the peer's QP is RTR toward ours (then we are ready), and answer unless the
 * peer already knows ours is. */
static int verbs_hello_recv(verbs_chan_t *vc, const verbs_hello_t *h, uint32_t src_qp)
{
    boot_t *b = vc->super.boot;
    int peer = (int)h->src, rc;
    verbs_peer_t *p;

    if (h->magic != VERBS_HELLO_MAGIC || h->version != VERBS_HELLO_VERSION ||
        h->dst != (uint32_t)b->rank || h->src >= (uint32_t)b->size || peer == b->rank ||
        src_qp != vc->addrs[peer].ud_qpn) {
        log_warn("verbs: ignoring a malformed HELLO from UD QP %u", src_qp);
        return ARCOLL_OK;
    }
    p = &vc->peers[peer];
    p->hellos_rcvd++;
    if (p->qp == NULL && (rc = verbs_qp_create(vc, peer)) != ARCOLL_OK)
        return rc;
    if (p->state == VERBS_CONN_INIT) {
        rc = verbs_qp_connect(vc, peer, h->qpn);
        if (rc != ARCOLL_OK)
            return rc;
    } else if (p->rqpn != h->qpn) {
        log_warn("verbs: rank %d's HELLO names its QP %u, ours is connected to QP %u: ignored",
                 peer, h->qpn, p->rqpn);
        return ARCOLL_OK;
    }
    if (h->rtr && p->state != VERBS_CONN_READY) {
        p->state = VERBS_CONN_READY;
        vc->pending--;
        vc->nready++;
        vc->flush_due |= p->qlen > 0; /* posted by verbs_progress, after this poll */
    }
    return h->ack ? ARCOLL_OK : verbs_hello_send(vc, peer);
}

static int verbs_ud_post_recv(verbs_chan_t *vc, uint32_t idx)
{
    struct ibv_sge sge;
    struct ibv_recv_wr wr, *bad;
    int rc;

    sge.addr = (uintptr_t)(vc->ud_buf + (size_t)idx * VERBS_UD_SLOT);
    sge.length = VERBS_UD_SLOT;
    sge.lkey = vc->ud_mr->lkey;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = idx;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    rc = ibv_post_recv(vc->ud_qp, &wr, &bad);
    if (rc != 0) {
        log_err("verbs: ibv_post_recv on the UD QP failed: %s", strerror(rc));
        return ARCOLL_ERR_CHANNEL;
    }
    return ARCOLL_OK;
}

#ifdef ARCOLL_FAULTS
/* ARCOLL_FAULT=hello_drop: lose every other arriving HELLO (retransmission must
 * still connect); hello_drop_all: lose them all (the call must time out and
 * name the silent peer). */

static int verbs_fault_hello_lost(void)
{
    static unsigned n;
    return wire_fault_hello_drop == 2 || (wire_fault_hello_drop == 1 && n++ % 2 == 0);
}

#else
#define verbs_fault_hello_lost() 0
#endif

/* A GONE notice: note that the rank exited (a peer check of it then fails). */
static void verbs_gone_recv(verbs_chan_t *vc, const verbs_gone_t *g, uint32_t src_qp)
{
    boot_t *b = vc->super.boot;

    if (g->version != VERBS_GONE_VERSION || g->dst != (uint32_t)b->rank ||
        g->src >= (uint32_t)b->size || g->gone >= (uint32_t)b->size ||
        g->src == (uint32_t)b->rank || g->gone == (uint32_t)b->rank ||
        src_qp != vc->addrs[g->src].ud_qpn) {
        log_warn("verbs: ignoring a malformed GONE notice from UD QP %u", src_qp);
        return;
    }
    if (vc->peers[g->gone].gone_by == 0) {
        vc->peers[g->gone].gone_by = (int)g->src + 1;
        /* pid 0: seen by the watch ring's probe, from another host */
        vc->peers[g->gone].gone_probe = g->pid == 0;
        if (g->pid == 0)
            log_info("verbs: rank %u reports that rank %u failed its liveness probe", g->src,
                     g->gone);
        else
            log_info("verbs: rank %u reports that rank %u (pid %d on its host) has exited", g->src,
                     g->gone, g->pid);
    }
}

/* Retire UD sends, handle arrived HELLOs and notices, give their buffers back. */
static int verbs_ud_poll(verbs_chan_t *vc)
{
    struct ibv_wc wc[16];
    int n, rc = ARCOLL_OK;

    n = ibv_poll_cq(vc->ud_cq, 16, wc);
    if (n < 0) {
        log_err("verbs: ibv_poll_cq (UD) failed (%d)", n);
        return ARCOLL_ERR_CHANNEL;
    }
    for (int i = 0; i < n; i++) {
        uint32_t idx = (uint32_t)wc[i].wr_id;
        int r = ARCOLL_OK;
        if (wc[i].wr_id & VERBS_UD_SEND_BIT) {
            vc->ud_send_busy--;
            if (wc[i].status != IBV_WC_SUCCESS && vc->ud_send_errs++ == 0)
                log_warn("verbs: a HELLO send failed: %s (it is retransmitted)",
                         ibv_wc_status_str(wc[i].status));
            continue;
        }
        const char *msg = vc->ud_buf + (size_t)idx * VERBS_UD_SLOT + VERBS_UD_GRH;
        uint32_t magic;
        memcpy(&magic, msg, sizeof(magic));
        if (wc[i].status != IBV_WC_SUCCESS)
            log_warn("verbs: a UD receive failed: %s", ibv_wc_status_str(wc[i].status));
        else if (magic == VERBS_GONE_MAGIC && wc[i].byte_len >= VERBS_UD_GRH + sizeof(verbs_gone_t))
            verbs_gone_recv(vc, (const verbs_gone_t *)msg, wc[i].src_qp);
        else if (wc[i].byte_len >= VERBS_UD_GRH + sizeof(verbs_hello_t) &&
                 !verbs_fault_hello_lost())
            r = verbs_hello_recv(vc, (const verbs_hello_t *)msg, wc[i].src_qp);
        if (r == ARCOLL_OK)
            r = verbs_ud_post_recv(vc, idx);
        if (rc == ARCOLL_OK)
            rc = r;
    }
    return rc;
}

/* Progress calls between two polls of the UD CQ once no handshake of ours is
 * under way: it then only carries a peer's first HELLO or a retransmission,
 * which can wait that long, and the data path keeps one CQ poll per call. */
#define VERBS_UD_POLL_EVERY 16

/* The handshake's clock: HELLOs, retransmissions to peers that are not ready,
 * and writes queued for a peer that has not answered for ARCOLL_TIMEOUT_MS
 * dropped (the call that queued them has timed out by then, and a late answer
 * must not post them into a later call). */
int verbs_connect_progress(verbs_chan_t *vc)
{
    uint64_t now;
    int rc;

    if (vc->pending == 0 && ++vc->ud_skip < VERBS_UD_POLL_EVERY)
        return ARCOLL_OK;
    vc->ud_skip = 0;
    rc = verbs_ud_poll(vc);
    if (rc != ARCOLL_OK || vc->pending == 0)
        return rc;
    now = core_time_ns();
    if (now < vc->resend_ns)
        return ARCOLL_OK;
    vc->resend_ns = now + VERBS_HELLO_RESEND_NS / 4;
    for (int peer = 0; peer < vc->super.boot->size; peer++) {
        verbs_peer_t *p = &vc->peers[peer];
        if (p->qp == NULL || p->state == VERBS_CONN_READY)
            continue;
        if (p->qlen && now - p->connect_ns > (uint64_t)vc->timeout_ms * 1000000ULL) {
            log_warn("verbs: rank %d answered none of %u HELLOs in %ld ms: %u queued writes "
                     "dropped",
                     peer, p->hellos_sent, vc->timeout_ms, p->qlen);
            vc->queued -= p->qlen;
            p->qlen = 0;
            p->connect_ns = 0;
        }
        if (now - p->hello_ns >= VERBS_HELLO_RESEND_NS && (rc = verbs_hello_send(vc, peer)) != 0)
            return rc;
    }
    return ARCOLL_OK;
}

/* A rank of this host has exited: tell every rank of the other hosts, which
 * may be waiting for it with nothing from the transport (a write to a dead
 * process's QP need not fail for a long time: docs/verbs.md). Best effort,
 * once: a notice lost leaves them their timeout. */
static void verbs_gone_tell(verbs_chan_t *vc, int gone)
{
    boot_t *b = vc->super.boot;
    verbs_gone_t g;
    int told = 0;

    vc->peers[gone].gone_by = b->rank + 1;
    memset(&g, 0, sizeof(g));
    g.magic = VERBS_GONE_MAGIC;
    g.version = VERBS_GONE_VERSION;
    g.src = (uint32_t)b->rank;
    g.gone = (uint32_t)gone;
    g.pid = vc->pids[gone];
    for (int r = 0; r < b->size; r++) {
        uint64_t until = core_time_ns() + VERBS_GONE_SEND_NS;
        int rc;
        if (r == b->rank || vc->peers[r].gone_by ||
            strncmp(vc->addrs[r].host, vc->addrs[gone].host, BOOT_HOSTNAME_MAX) == 0)
            continue; /* the dead rank's node-mates see its pid themselves */
        g.dst = (uint32_t)r;
        /* Every slot busy: retire sends (and take arrivals) for a while. */
        while ((rc = verbs_ud_send(vc, r, &g, sizeof(g))) == ARCOLL_INPROGRESS &&
               core_time_ns() < until && verbs_ud_poll(vc) == ARCOLL_OK)
            ;
        if (rc != ARCOLL_OK) {
            log_warn("verbs: could not tell rank %d that rank %d has exited", r, gone);
            continue;
        }
        told++;
    }
    /* Out of our hands before the caller may return and exit. */
    for (uint64_t until = core_time_ns() + VERBS_GONE_SEND_NS;
         vc->ud_send_busy > 0 && core_time_ns() < until && verbs_ud_poll(vc) == ARCOLL_OK;)
        ;
    if (vc->pids[gone] > 0)
        log_info("verbs: rank %d (pid %d, on this host) has exited: told %d ranks of other hosts",
                 gone, vc->pids[gone], told);
    else
        log_info("verbs: rank %d (watched, alone on its host) failed its liveness probe: told %d "
                 "ranks",
                 gone, told);
}

/* Every VERBS_WATCH_NS of waiting, a look at every node-mate, not only the
 * ones this call waits for: the ranks of other hosts may wait for them. */
static void verbs_watch(verbs_chan_t *vc)
{
    uint64_t now = core_time_ns();

    if (now < vc->watch_ns)
        return;
    vc->watch_ns = now + VERBS_WATCH_NS;
    for (int r = 0; r < vc->super.boot->size; r++)
        if (r != vc->super.boot->rank && vc->pids[r] > 0 && !vc->peers[r].gone_by &&
            boot_pid_gone(vc->pids[r]))
            verbs_gone_tell(vc, r);
}

void verbs_ring_failed(verbs_chan_t *vc, int peer)
{
    verbs_peer_t *p = &vc->peers[peer];

    if (p->gone_by || vc->pids[peer] > 0 ||
        (vc->ring[0] != peer && (vc->nring < 2 || vc->ring[1] != peer)) || vc->nring == 0)
        return;
    p->gone_probe = 1;
    verbs_gone_tell(vc, peer);
}

int verbs_peer_seen(verbs_chan_t *vc, int peer)
{
    chan_t *c = &vc->super;
    int by;

    /* On our host we can look at the process itself: the transport may keep
     * acknowledging a dead peer's QP for a while (Soft-RoCE does). */
    verbs_watch(vc);
    if (vc->pids[peer] > 0 && !vc->peers[peer].gone_by && boot_pid_gone(vc->pids[peer]))
        verbs_gone_tell(vc, peer);
    by = vc->peers[peer].gone_by - 1;
    if (by >= 0 && vc->peers[peer].gone_probe) {
        log_err("verbs: rank %d is gone (its liveness probe by rank %d found no process)", peer,
                by);
        return ARCOLL_ERR_PEER;
    }
    if (by == c->boot->rank) {
        log_err("verbs: rank %d (pid %d, on this host) has exited", peer, vc->pids[peer]);
        return ARCOLL_ERR_PEER;
    }
    if (by >= 0) {
        log_err("verbs: rank %d has exited (seen on its host by rank %d)", peer, by);
        return ARCOLL_ERR_PEER;
    }
    if (vc->peers[peer].failed) {
        log_err("verbs: %s is unreachable (%s)", verbs_peer_desc(vc, peer),
                ibv_wc_status_str((enum ibv_wc_status)vc->peers[peer].failed));
        return ARCOLL_ERR_PEER;
    }
    return ARCOLL_OK;
}

void verbs_peer_describe(chan_t *c, int peer, char *buf, size_t len)
{
    static const char *const states[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
    verbs_chan_t *vc = (verbs_chan_t *)c;
    verbs_peer_t *p = &vc->peers[peer];
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    const char *st = "?";

    if (p->state != VERBS_CONN_READY) {
        char ans[64] = "no answer";
        if (p->hellos_rcvd)
            snprintf(ans, sizeof(ans), "%u received (its QP %u)", p->hellos_rcvd, p->rqpn);
        snprintf(buf, len, "verbs to rank %d: %s: %u hellos sent, %s, %u writes queued", peer,
                 p->qp == NULL ? "no QP (never written to)" : "connecting", p->hellos_sent, ans,
                 p->qlen);
        return;
    }
    if (p->qp != NULL && ibv_query_qp(p->qp, &a, IBV_QP_STATE, &ia) == 0 &&
        a.qp_state < sizeof(states) / sizeof(states[0]))
        st = states[a.qp_state];
    snprintf(buf, len,
             "verbs QP %u to rank %d: %s, WRs posted %llu, completed %llu, cq room %d%s%s",
             p->qp ? p->qp->qp_num : 0, peer, st, (unsigned long long)p->seq,
             (unsigned long long)p->done, vc->cq_room, p->failed ? ", failed: " : "",
             p->failed ? ibv_wc_status_str((enum ibv_wc_status)p->failed) : "");
}

/* The handshake's UD QP: its CQ, a buffer of receive and send slots, the QP
 * taken to RTS and every receive posted before any peer learns its QPN. */
int verbs_ud_create(verbs_chan_t *vc)
{
    size_t len = (size_t)(VERBS_UD_RECVS + VERBS_UD_SENDS) * VERBS_UD_SLOT;
    struct ibv_qp_init_attr ia;
    struct ibv_qp_attr a;
    int rc;

    vc->ud_cq = ibv_create_cq(vc->ctx, VERBS_UD_RECVS + VERBS_UD_SENDS, NULL, NULL, 0);
    if (vc->ud_cq == NULL) {
        log_err("verbs: ibv_create_cq (UD) failed: %s", strerror(errno));
        return ARCOLL_ERR_CHANNEL;
    }
    if (posix_memalign((void **)&vc->ud_buf, 4096, len) != 0) {
        vc->ud_buf = NULL;
        log_err("verbs: out of memory for the UD buffer");
        return ARCOLL_ERR_NOMEM;
    }
    memset(vc->ud_buf, 0, len);
    vc->ud_mr = ibv_reg_mr(vc->pd, vc->ud_buf, len, IBV_ACCESS_LOCAL_WRITE);
    if (vc->ud_mr == NULL) {
        log_err("verbs: ibv_reg_mr of the %zu-byte UD buffer failed: %s", len, strerror(errno));
        return ARCOLL_ERR_CHANNEL;
    }
    vc->reg_bytes += len;
    memset(&ia, 0, sizeof(ia));
    ia.send_cq = vc->ud_cq;
    ia.recv_cq = vc->ud_cq;
    ia.qp_type = IBV_QPT_UD;
    ia.cap.max_send_wr = VERBS_UD_SENDS;
    ia.cap.max_recv_wr = VERBS_UD_RECVS;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    vc->ud_qp = ibv_create_qp(vc->pd, &ia);
    if (vc->ud_qp == NULL) {
        log_err("verbs: ibv_create_qp (UD) failed: %s", strerror(errno));
        return ARCOLL_ERR_CHANNEL;
    }
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = vc->port;
    a.qkey = VERBS_UD_QKEY;
    rc = ibv_modify_qp(vc->ud_qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    if (rc != 0) {
        log_err("verbs: ibv_modify_qp(UD INIT) failed: %s", strerror(rc));
        return ARCOLL_ERR_CHANNEL;
    }
    for (uint32_t i = 0; i < VERBS_UD_RECVS; i++)
        if ((rc = verbs_ud_post_recv(vc, i)) != ARCOLL_OK)
            return rc;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    rc = ibv_modify_qp(vc->ud_qp, &a, IBV_QP_STATE);
    if (rc != 0) {
        log_err("verbs: ibv_modify_qp(UD RTR) failed: %s", strerror(rc));
        return ARCOLL_ERR_CHANNEL;
    }
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    rc = ibv_modify_qp(vc->ud_qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
    if (rc != 0) {
        log_err("verbs: ibv_modify_qp(UD RTS) failed: %s", strerror(rc));
        return ARCOLL_ERR_CHANNEL;
    }
    return ARCOLL_OK;
}

/* One fixed-size record per rank through the bootstrap (O(ranks) bytes in
 * all); RC QPs come later, per peer, from the handshake. */
int verbs_addr_exchange(verbs_chan_t *vc)
{
    boot_t *b = vc->super.boot;
    verbs_addr_t mine;
    int rc;

    memset(&mine, 0, sizeof(mine));
    mine.version = VERBS_ADDR_VERSION;
    mine.pid = (int32_t)getpid();
    snprintf(mine.host, sizeof(mine.host), "%s", b->hostname);
    mine.lid = vc->pa.lid;
    mine.mtu = (uint8_t)vc->pa.active_mtu;
    mine.has_gid = vc->gid_index >= 0;
    memcpy(mine.gid, vc->gid.raw, 16);
    mine.ud_qpn = vc->ud_qp->qp_num;
    rc = b->allgather(b, &mine, vc->addrs, sizeof(mine));
    if (rc != ARCOLL_OK)
        return rc;
    for (int p = 0; p < b->size; p++) {
        const verbs_addr_t *ra = &vc->addrs[p];
        /* A pid means something only on its own host (not a pretend node). */
        vc->pids[p] = strncmp(ra->host, mine.host, sizeof(mine.host)) == 0 ? ra->pid : 0;
        if (p == b->rank)
            continue;
        if (ra->version != VERBS_ADDR_VERSION || ra->has_gid != mine.has_gid) {
            log_err("verbs: rank %d %s", p,
                    ra->version != VERBS_ADDR_VERSION
                        ? "runs another arcoll wire-up version"
                        : "disagrees on GID routing (mixed InfiniBand and RoCE?)");
            return ARCOLL_ERR_CHANNEL;
        }
    }
    return ARCOLL_OK;
}

/* The handshake with the peers in set (every rank calls this, with its own
 * set, possibly empty), now. A rank ready with all its peers cannot know that
 * its last HELLO arrived, and one waiting in the bootstrap answers nobody; so
 * handshaking goes in rounds of at most VERBS_EAGER_ROUND_NS, each ended by an
 * allgather of "connected to every peer of my set". Once every rank is, every
 * QP of every set is RTR and those peers are ready. what names the mode. */
static int verbs_connect_set(verbs_chan_t *vc, const int *set, int nset, const char *what)
{
    boot_t *b = vc->super.boot;
    uint64_t deadline = core_time_ns() + (uint64_t)vc->timeout_ms * 1000000ULL;
    int32_t mine[2], *all = malloc(2 * sizeof(int32_t) * (size_t)b->size);
    int rc = ARCOLL_ERR_NOMEM, round = 0;

    if (all == NULL) {
        log_err("verbs: out of memory");
        goto out;
    }
    rc = ARCOLL_OK;
    for (int i = 0; i < nset && rc == ARCOLL_OK; i++) {
        rc = verbs_qp_create(vc, set[i]);
        if (rc == ARCOLL_OK)
            rc = verbs_hello_send(vc, set[i]);
    }
    for (;;) {
        uint64_t end = core_time_ns() + VERBS_EAGER_ROUND_NS;
        int connected = 0, failed = -1;
        for (;;) {
            connected = 0;
            for (int i = 0; i < nset; i++)
                connected += vc->peers[set[i]].state >= VERBS_CONN_RTS;
            if (rc != ARCOLL_OK || connected == nset || core_time_ns() >= end)
                break;
            rc = verbs_connect_progress(vc);
        }
        if (rc == ARCOLL_OK && connected < nset && core_time_ns() > deadline) {
            log_err("verbs: %s: connected to %d of %d peers after %ld ms", what, connected, nset,
                    vc->timeout_ms);
            rc = ARCOLL_ERR_TIMEOUT;
        }
        mine[0] = rc;
        mine[1] = connected == nset;
        if ((rc = b->allgather(b, mine, all, sizeof(mine))) != ARCOLL_OK)
            goto out;
        connected = 1;
        for (int p = 0; p < b->size; p++) {
            if (all[2 * p] != ARCOLL_OK && failed < 0)
                failed = p;
            connected &= all[2 * p + 1];
        }
        round++;
        if (failed >= 0) { /* every rank leaves in the same round */
            rc = all[2 * b->rank] != ARCOLL_OK ? all[2 * b->rank] : ARCOLL_ERR_CHANNEL;
            if (failed != b->rank)
                log_err("verbs: %s: rank %d failed to connect", what, failed);
            goto out;
        }
        if (connected)
            break;
    }
    for (int i = 0; i < nset; i++) {
        verbs_peer_t *p = &vc->peers[set[i]];
        if (p->state == VERBS_CONN_RTS) {
            p->state = VERBS_CONN_READY;
            vc->pending--;
            vc->nready++;
        }
    }
    log_debug("verbs: %s: connected to %d peers in %d round(s)", what, nset, round);
out:
    free(all);
    return rc;
}

/* ARCOLL_VERBS_CONNECT=eager: the handshake with every peer, now. */
int verbs_connect_all(verbs_chan_t *vc)
{
    boot_t *b = vc->super.boot;
    int *set = malloc(sizeof(int) * (size_t)b->size), n = 0, rc;

    if (set == NULL) {
        log_err("verbs: out of memory");
        return ARCOLL_ERR_NOMEM;
    }
    for (int p = 0; p < b->size; p++)
        if (p != b->rank)
            set[n++] = p;
    rc = verbs_connect_set(vc, set, n, "ARCOLL_VERBS_CONNECT=eager");
    free(set);
    return rc;
}

static int verbs_host_cmp(const void *a, const void *b, void *arg)
{
    const verbs_addr_t *addrs = arg;
    return strncmp(addrs[*(const int *)a].host, addrs[*(const int *)b].host, BOOT_HOSTNAME_MAX);
}

/* Lazy wiring's watch ring: a rank alone on its host is watched by its
 * neighbours in rank order (both on other hosts), over QPs connected now.
 * Every rank computes the same plan from the same records, so the common
 * case (no rank alone) costs no bootstrap round at all. */
int verbs_ring_connect(verbs_chan_t *vc)
{
    boot_t *b = vc->super.boot;
    int n = b->size, r = b->rank, *ord, *lone, any = 0, rc = ARCOLL_OK;

    vc->nring = 0;
    if (n < 2)
        return ARCOLL_OK;
    ord = malloc(sizeof(int) * (size_t)n);
    lone = calloc((size_t)n, sizeof(int));
    if (ord == NULL || lone == NULL) {
        log_err("verbs: out of memory");
        rc = ARCOLL_ERR_NOMEM;
        goto out;
    }
    for (int i = 0; i < n; i++)
        ord[i] = i;
    qsort_r(ord, (size_t)n, sizeof(int), verbs_host_cmp, vc->addrs);
    for (int i = 0; i < n; i++) {
        int prev = i > 0 && verbs_host_cmp(&ord[i - 1], &ord[i], vc->addrs) == 0;
        int next = i + 1 < n && verbs_host_cmp(&ord[i + 1], &ord[i], vc->addrs) == 0;
        lone[ord[i]] = !prev && !next;
        any |= lone[ord[i]];
    }
    if (!any)
        goto out;
    /* Our neighbours if we are alone; a neighbour that is alone, ours to watch. */
    for (int d = -1; d <= 1; d += 2) {
        int q = (r + d + n) % n;
        if (q != r && (lone[r] || lone[q]) && (vc->nring == 0 || vc->ring[0] != q))
            vc->ring[vc->nring++] = q;
    }
    rc = verbs_connect_set(vc, vc->ring, vc->nring, "watch ring");
    for (int i = 0; rc == ARCOLL_OK && i < vc->nring; i++)
        log_debug("verbs: watch ring: rank %d, connected now", vc->ring[i]);
out:
    free(lone);
    free(ord);
    return rc;
}
