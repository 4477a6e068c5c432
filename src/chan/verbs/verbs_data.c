/* The verbs channel's data path: puts (posted, staged or queued until the peer
 * is ready), completions and progress (docs/verbs.md). */
#include "chan/verbs/verbs_int.h"

/* Retire completions; in imm mode also deliver arrived flags. */
static int verbs_poll(verbs_chan_t *vc)
{
    struct ibv_wc wc[16];
    int n, rc = ARCOLL_OK;

    n = ibv_poll_cq(vc->cq, 16, wc);
    if (n < 0) {
        log_err("verbs: ibv_poll_cq failed (%d)", n);
        return ARCOLL_ERR_CHANNEL;
    }
    vc->cq_room += n;
    for (int i = 0; i < n; i++) {
        uint32_t peer = (uint32_t)(wc[i].wr_id >> VERBS_SEQ_BITS);
        uint64_t seq = wc[i].wr_id & ((1ULL << VERBS_SEQ_BITS) - 1);
        verbs_peer_t *p = &vc->peers[peer];
        if (wc[i].status != IBV_WC_SUCCESS) {
            if (!p->failed) {
                p->failed = wc[i].status;
                log_err("verbs: RDMA WRITE to %s failed: %s (vendor error 0x%x)",
                        verbs_peer_desc(vc, (int)peer), ibv_wc_status_str(wc[i].status),
                        wc[i].vendor_err);
                if (wc[i].status == IBV_WC_RETRY_EXC_ERR)
                    verbs_ring_failed(vc, (int)peer);
            }
            if (rc == ARCOLL_OK)
                rc =
                    wc[i].status == IBV_WC_RETRY_EXC_ERR || wc[i].status == IBV_WC_RNR_RETRY_EXC_ERR
                        ? ARCOLL_ERR_PEER
                        : ARCOLL_ERR_CHANNEL;
        }
        if (seq > p->done) {
            vc->outstanding -= seq - p->done;
            p->done = seq;
        }
    }
    /* Staging space comes back in allocation order. */
    while (vc->ent_tail < vc->ent_head) {
        verbs_stage_ent_t *e = &vc->ents[vc->ent_tail % VERBS_STAGE_ENTS];
        if (vc->peers[e->peer].done < e->seq)
            break;
        vc->stage_tail = e->end;
        vc->ent_tail++;
    }
    if (vc->imm) {
        n = ibv_poll_cq(vc->rcq, 16, wc);
        if (n < 0) {
            log_err("verbs: ibv_poll_cq (receive) failed (%d)", n);
            return ARCOLL_ERR_CHANNEL;
        }
        for (int i = 0; i < n; i++) {
            struct ibv_recv_wr wr = {0}, *bad;
            uint32_t imm = ntohl(wc[i].imm_data), id = imm >> VERBS_IMM_LINE_BITS;
            uint64_t line = imm & ((1u << VERBS_IMM_LINE_BITS) - 1);
            chan_mem_t *m = id < VERBS_MAX_REGIONS ? vc->regions[id] : NULL;
            if (wc[i].status != IBV_WC_SUCCESS || wc[i].opcode != IBV_WC_RECV_RDMA_WITH_IMM) {
                log_err("verbs: receive completion failed: %s", ibv_wc_status_str(wc[i].status));
                rc = ARCOLL_ERR_CHANNEL;
                continue;
            }
            if (m != NULL && line * 64 < m->len) {
                /* The completion orders the data before it; publish the flag. */
                uint64_t v = *(volatile uint64_t *)((char *)m->addr + m->len + line * 8);
                atomic_store_explicit((_Atomic uint64_t *)((char *)m->addr + line * 64), v,
                                      memory_order_release);
            }
            if (ibv_post_srq_recv(vc->srq, &wr, &bad) != 0) {
                log_err("verbs: ibv_post_srq_recv failed");
                rc = ARCOLL_ERR_CHANNEL;
            }
        }
    }
    return rc;
}

/* Wait for a send-queue slot on the peer's QP, or for staging space. */
static int verbs_wait_room(verbs_chan_t *vc, int peer, size_t stage_len)
{
    verbs_peer_t *p = &vc->peers[peer];
    uint64_t deadline = 0;
    int rc;

    for (;;) {
        /* Room for this WR in the SQ, and for its CQE should it be signaled. */
        int sq_ok = p->seq - p->done < VERBS_SQ_DEPTH - 1 && vc->cq_room > 0;
        int st_ok = stage_len == 0 ||
                    (VERBS_STAGE_SIZE - (vc->stage_head - vc->stage_tail) >= 2 * stage_len &&
                     vc->ent_head - vc->ent_tail < VERBS_STAGE_ENTS);
        if (p->failed) {
            log_err("verbs: %s is unreachable (%s)", verbs_peer_desc(vc, peer),
                    ibv_wc_status_str((enum ibv_wc_status)p->failed));
            return ARCOLL_ERR_PEER;
        }
        if (sq_ok && st_ok)
            return ARCOLL_OK;
        rc = verbs_poll(vc);
        if (rc != ARCOLL_OK)
            return rc;
        if (deadline == 0)
            deadline = core_time_ns() + (uint64_t)vc->timeout_ms * 1000000ULL;
        else if (core_time_ns() > deadline) {
            log_err("verbs: no send completions for %ld ms (send queue to %s full)", vc->timeout_ms,
                    verbs_peer_desc(vc, peer));
            return ARCOLL_ERR_TIMEOUT;
        }
    }
}

static int verbs_post(verbs_chan_t *vc, int peer, enum ibv_wr_opcode op, const void *laddr,
                      uint32_t lkey, size_t len, uint64_t raddr, uint32_t rkey, int inl, int signal,
                      uint32_t imm)
{
    verbs_peer_t *p = &vc->peers[peer];
    struct ibv_sge sge = {(uintptr_t)laddr, (uint32_t)len, lkey};
    struct ibv_send_wr wr, *bad;
    int rc;

    memset(&wr, 0, sizeof(wr));
    if (++p->unsignaled >= VERBS_SIGNAL_EVERY)
        signal = 1;
    wr.wr_id = ((uint64_t)peer << VERBS_SEQ_BITS) | (p->seq + 1);
    wr.sg_list = len ? &sge : NULL;
    wr.num_sge = len ? 1 : 0;
    wr.opcode = op;
    wr.send_flags = (signal ? IBV_SEND_SIGNALED : 0) | (inl ? IBV_SEND_INLINE : 0);
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    if (op == IBV_WR_RDMA_WRITE_WITH_IMM)
        wr.imm_data = htonl(imm);
    rc = ibv_post_send(p->qp, &wr, &bad);
    if (rc != 0) {
        log_err("verbs: ibv_post_send of %zu bytes to %s failed: %s", len,
                verbs_peer_desc(vc, peer), strerror(rc));
        return ARCOLL_ERR_CHANNEL;
    }
    p->seq++;
    if (signal) {
        p->unsignaled = 0;
        vc->cq_room--;
    }
    vc->outstanding++;
    return ARCOLL_OK;
}

/* A liveness probe to a peer of another host that a call has waited for: one
 * 0-byte RDMA WRITE, signaled (C9-88: a 0-byte write needs no address or key,
 * so it touches nothing at a live peer). A dead process's QP is gone with it,
 * its host's transport drops the write, and after the retries (timeout 14,
 * retry_cnt 6: 7 tries, about 0.5 s) the completion says IBV_WC_RETRY_EXC_ERR, which
 * verbs_poll turns into ARCOLL_ERR_PEER. A stopped process's kernel still
 * acknowledges: only the timeout finds it. Skipped when the queue or the CQ
 * has no room: the data writes in flight then probe as well. */
static void verbs_probe(verbs_chan_t *vc, int peer, uint64_t now)
{
    verbs_peer_t *p = &vc->peers[peer];

    if (p->state != VERBS_CONN_READY || p->failed || now < p->probe_ns + VERBS_PROBE_NS)
        return;
    if (p->seq - p->done >= VERBS_SQ_DEPTH - 1 || vc->cq_room <= 0)
        return;
    p->probe_ns = now;
    (void)verbs_post(vc, peer, IBV_WR_RDMA_WRITE, NULL, 0, 0, 0, 0, 0, 1, 0); /* logs a failure */
}

int verbs_peer_check(chan_t *c, int peer)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;
    int rc = verbs_peer_seen(vc, peer);

    /* Of another host: a node-mate of it may tell (GONE); where none can (the
     * rank alone on its host, or its node-mates busy elsewhere), the transport
     * does, once we write to it. */
    if (rc == ARCOLL_OK && vc->pids[peer] <= 0)
        verbs_probe(vc, peer, core_time_ns());
    /* The watch ring (lazy wiring): its peers are probed while we wait, awaited
     * or not; a failed one is told by verbs_ring_failed, from the completion. */
    for (int i = 0; i < vc->nring; i++)
        if (!vc->peers[vc->ring[i]].gone_by && !vc->peers[vc->ring[i]].failed)
            verbs_probe(vc, vc->ring[i], core_time_ns());
    return rc;
}

/* Copy into the staging ring and write from there (signaled, so that the
 * space comes back). */
static int verbs_post_staged(verbs_chan_t *vc, int peer, enum ibv_wr_opcode op, const void *src,
                             size_t len, uint64_t raddr, uint32_t rkey, uint32_t imm)
{
    uint64_t pos = vc->stage_head % VERBS_STAGE_SIZE;
    verbs_stage_ent_t *e;
    int rc = verbs_wait_room(vc, peer, len);

    if (rc != ARCOLL_OK)
        return rc;
    if (pos + len > VERBS_STAGE_SIZE) { /* no wrap inside one buffer */
        vc->stage_head += VERBS_STAGE_SIZE - pos;
        pos = 0;
    }
    memcpy(vc->stage + pos, src, len);
    rc = verbs_post(vc, peer, op, vc->stage + pos, vc->stage_mr->lkey, len, raddr, rkey, 0, 1, imm);
    if (rc != ARCOLL_OK)
        return rc;
    vc->stage_head += len;
    e = &vc->ents[vc->ent_head++ % VERBS_STAGE_ENTS];
    e->peer = (uint32_t)peer;
    e->seq = vc->peers[peer].seq;
    e->end = vc->stage_head;
    return ARCOLL_OK;
}

static int verbs_check_dst(int peer, size_t len, const chan_rmem_t *dst, uint64_t off)
{
    if (dst->rkey.kind != VERBS_KIND_MR || off > dst->rkey.len || len > dst->rkey.len - off) {
        log_err("verbs: write of %zu bytes at offset %llu is outside rank %d's %llu-byte "
                "buffer",
                len, (unsigned long long)off, peer, (unsigned long long)dst->rkey.len);
        return ARCOLL_ERR_CHANNEL;
    }
    return ARCOLL_OK;
}

/* The post paths, for a ready peer; the destination is checked. */
static int verbs_put_now(verbs_chan_t *vc, int peer, const void *src, size_t len,
                         const chan_mem_t *lmem, const chan_rmem_t *dst, uint64_t off)
{
    uint64_t raddr = dst->rkey.addr + off;
    uint32_t rkey = (uint32_t)dst->rkey.key;
    const char *s = src;
    int rc;

    if (lmem != NULL) {
        const struct ibv_mr *mr = lmem->priv;
        if (mr == NULL) {
            /* A failed call revoked the registration (the heap MR, engine/zmem.h). */
            log_err("verbs: the registration of a %zu-byte send buffer to %s was revoked by a "
                    "failed call",
                    len, verbs_peer_desc(vc, peer));
            return ARCOLL_ERR_CHANNEL;
        }
        /* Zero copy from registered memory, in pieces below the 2^31 message limit. */
        for (size_t done = 0; done < len;) {
            size_t n = len - done < (1u << 30) ? len - done : (1u << 30);
            rc = verbs_wait_room(vc, peer, 0);
            if (rc == ARCOLL_OK)
                rc = verbs_post(vc, peer, IBV_WR_RDMA_WRITE, s + done, mr->lkey, n, raddr + done,
                                rkey, 0, 0, 0);
            if (rc != ARCOLL_OK)
                return rc;
            done += n;
        }
        return ARCOLL_OK;
    }
    if (len <= vc->max_inline) {
        rc = verbs_wait_room(vc, peer, 0);
        return rc != ARCOLL_OK
                   ? rc
                   : verbs_post(vc, peer, IBV_WR_RDMA_WRITE, src, 0, len, raddr, rkey, 1, 0, 0);
    }
    for (size_t done = 0; done < len;) {
        size_t n = len - done < VERBS_STAGE_SIZE / 4 ? len - done : VERBS_STAGE_SIZE / 4;
        rc = verbs_post_staged(vc, peer, IBV_WR_RDMA_WRITE, s + done, n, raddr + done, rkey, 0);
        if (rc != ARCOLL_OK)
            return rc;
        done += n;
    }
    return ARCOLL_OK;
}

static int verbs_put_u64_now(verbs_chan_t *vc, int peer, uint64_t val, const chan_rmem_t *dst,
                             uint64_t off)
{
    uint32_t rkey = (uint32_t)dst->rkey.key;
    int rc;

    if (vc->imm) {
        /* The shadow word of line L is at len + 8 L, and the immediate names
         * region and line. */
        uint32_t id = (uint32_t)(dst->rkey.key >> 32);
        uint64_t line = off / 64;
        return verbs_post_staged(vc, peer, IBV_WR_RDMA_WRITE_WITH_IMM, &val, sizeof(val),
                                 dst->rkey.addr + dst->rkey.len + line * 8, rkey,
                                 (id << VERBS_IMM_LINE_BITS) | (uint32_t)line);
    }
    if (vc->max_inline >= sizeof(val)) {
        rc = verbs_wait_room(vc, peer, 0);
        return rc != ARCOLL_OK ? rc
                               : verbs_post(vc, peer, IBV_WR_RDMA_WRITE, &val, 0, sizeof(val),
                                            dst->rkey.addr + off, rkey, 1, 1, 0);
    }
    return verbs_post_staged(vc, peer, IBV_WR_RDMA_WRITE, &val, sizeof(val), dst->rkey.addr + off,
                             rkey, 0);
}

/* Keep a put for a peer that is not ready; the first one opens the connection. */
static int verbs_enqueue(verbs_chan_t *vc, int peer, const verbs_op_t *op)
{
    verbs_peer_t *p = &vc->peers[peer];
    int rc;

    if (p->qlen == p->qcap) {
        uint32_t cap = p->qcap ? 2 * p->qcap : 16;
        verbs_op_t *q = realloc(p->q, cap * sizeof(*q));
        if (q == NULL) {
            log_err("verbs: out of memory queueing a write to rank %d", peer);
            return ARCOLL_ERR_NOMEM;
        }
        p->q = q;
        p->qcap = cap;
    }
    p->q[p->qlen++] = *op;
    vc->queued++;
    if (p->qlen > 1)
        return ARCOLL_OK; /* the connection is already being asked for */
    p->connect_ns = core_time_ns();
    if (p->qp == NULL && (rc = verbs_qp_create(vc, peer)) != ARCOLL_OK)
        return rc;
    return verbs_hello_send(vc, peer);
}

/* The peer became ready: post its queue in order through the normal paths. A
 * failed post fails the call, which no longer needs the rest. Until then its
 * puts keep queueing behind (qlen), so the order holds. */
static int verbs_flush(verbs_chan_t *vc, int peer)
{
    verbs_peer_t *p = &vc->peers[peer];
    uint32_t i = 0;
    int rc = ARCOLL_OK;

    while (rc == ARCOLL_OK && i < p->qlen) {
        const verbs_op_t *op = &p->q[i++];
        vc->queued--;
        rc = op->kind == VERBS_OP_PUT
                 ? verbs_put_now(vc, peer, op->src ? op->src : op->data, op->len,
                                 op->has_lmem ? &op->lmem : NULL, &op->dst, op->off)
                 : verbs_put_u64_now(vc, peer, op->val, &op->dst, op->off);
    }
    vc->queued -= p->qlen - i;
    p->qlen = 0;
    p->connect_ns = 0;
    return rc;
}

int verbs_put(chan_t *c, int peer, const void *src, size_t len, const chan_mem_t *lmem,
              const chan_rmem_t *dst, uint64_t off)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;
    verbs_peer_t *p = &vc->peers[peer];
    int rc = verbs_check_dst(peer, len, dst, off);

    if (rc != ARCOLL_OK || len == 0)
        return rc;
    if (p->state != VERBS_CONN_READY || p->qlen) {
        verbs_op_t op;
        memset(&op, 0, sizeof(op));
        op.kind = VERBS_OP_PUT;
        op.src = src;
        op.len = len;
        op.off = off;
        op.dst = *dst;
        if (lmem != NULL) {
            op.has_lmem = 1;
            op.lmem = *lmem;
        } else if (len <= CHAN_PUT_COPY) {
            memcpy(op.data, src, len);
            op.src = NULL; /* at flush: the copy inside the queue entry */
        }
        return verbs_enqueue(vc, peer, &op);
    }
    return verbs_put_now(vc, peer, src, len, lmem, dst, off);
}

int verbs_put_u64(chan_t *c, int peer, uint64_t val, const chan_rmem_t *dst, uint64_t off)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;
    verbs_peer_t *p = &vc->peers[peer];
    int rc = verbs_check_dst(peer, sizeof(val), dst, off);

    if (rc != ARCOLL_OK)
        return rc;
    /* Flags live at the start of a 64-byte line (wire.h); imm mode names the line. */
    if (vc->imm && (off % 64 || off / 64 >= (1u << VERBS_IMM_LINE_BITS))) {
        log_err("verbs: flag at offset %llu is not at a line start", (unsigned long long)off);
        return ARCOLL_ERR_CHANNEL;
    }
    if (p->state != VERBS_CONN_READY || p->qlen) {
        verbs_op_t op;
        memset(&op, 0, sizeof(op));
        op.kind = VERBS_OP_U64;
        op.val = val;
        op.off = off;
        op.dst = *dst;
        return verbs_enqueue(vc, peer, &op);
    }
    return verbs_put_u64_now(vc, peer, val, dst, off);
}

/* Notes may go to this peer now: connected, nothing queued, not failed, and
 * plain flag writes (with ARCOLL_NOTIFY=imm every flag consumes one of the
 * peer's receives, which only its progress reposts: a loop of notes to a
 * process that does not progress would exhaust them). */
int verbs_peer_ready(chan_t *c, int peer)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;
    const verbs_peer_t *p = &vc->peers[peer];

    return !vc->imm && p->state == VERBS_CONN_READY && p->qlen == 0 && !p->failed;
}

int verbs_progress(chan_t *c)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;
    uint64_t n;
    int rc = verbs_poll(vc);

    if (rc == ARCOLL_OK)
        rc = verbs_connect_progress(vc);
    for (int peer = 0; rc == ARCOLL_OK && vc->flush_due && peer < c->boot->size; peer++)
        if (vc->peers[peer].state == VERBS_CONN_READY && vc->peers[peer].qlen)
            rc = verbs_flush(vc, peer);
    if (rc != ARCOLL_OK)
        return rc;
    vc->flush_due = 0;
    n = vc->outstanding + vc->queued;
    return n > (uint64_t)INT32_MAX ? INT32_MAX : (int)n;
}

void verbs_stats(chan_t *c, int *qps, int *ready, size_t *reg)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;

    *qps = vc->nqps;
    *ready = vc->nready;
    *reg = vc->reg_bytes;
}
