/*
 * The verbs channel: one RC QP per peer, wired through the bootstrap (no
 * per-pair handshakes), data moved only by RDMA WRITE. docs/verbs.md.
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
#include <arpa/inet.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/chan.h"
#include "core/config.h"
#include "core/core.h"
#include "core/log.h"
#include "verbs/verbs.h"

enum { VERBS_KIND_MR = 0x10 };

#define VERBS_SQ_DEPTH      128 /* send WRs per QP */
#define VERBS_SIGNAL_EVERY  32  /* unsignaled WRs between two signaled ones, at most */
#define VERBS_MAX_INLINE    64  /* requested; the device may grant less */
#define VERBS_STAGE_SIZE    (4u << 20)
#define VERBS_STAGE_ENTS    4096
#define VERBS_SRQ_DEPTH     1024
#define VERBS_SEQ_BITS      40
#define VERBS_IMM_LINE_BITS 26 /* imm = region id (6 bits) | flag line (26 bits) */
#define VERBS_MAX_REGIONS   64

typedef struct verbs_peer {
    struct ibv_qp *qp;
    uint64_t seq;  /* WRs posted */
    uint64_t done; /* WRs known complete */
    uint32_t unsignaled;
    int failed; /* ibv_wc_status of the first error */
} verbs_peer_t;

typedef struct verbs_stage_ent {
    uint32_t peer;
    uint64_t seq;
    uint64_t end;
} verbs_stage_ent_t;

/* What one rank tells all others at wire-up: header, then one QPN per rank. */
typedef struct verbs_addr {
    uint32_t version;
    int32_t pid; /* with host: lets peers on the same host see each other die */
    char host[BOOT_HOSTNAME_MAX];
    uint16_t lid;
    uint8_t mtu;
    uint8_t has_gid;
    uint8_t gid[16];
    uint32_t qpn[];
} verbs_addr_t;

#define VERBS_ADDR_VERSION 2

typedef struct verbs_chan {
    chan_t super;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_cq *rcq; /* imm mode */
    struct ibv_srq *srq;
    uint8_t port;
    struct ibv_port_attr pa;
    int gid_index;
    union ibv_gid gid;
    uint32_t max_inline;
    int imm;
    long timeout_ms;
    verbs_peer_t *peers;
    int32_t *pids; /* of ranks on this host, 0 for the others */
    uint64_t outstanding;
    int cq_room; /* CQEs the send CQ can still take: one per signaled WR in flight */
    char *stage;
    struct ibv_mr *stage_mr;
    uint64_t stage_head, stage_tail;
    verbs_stage_ent_t *ents;
    uint64_t ent_head, ent_tail;
    chan_mem_t *regions[VERBS_MAX_REGIONS]; /* imm mode: flag shadows by region id */
} verbs_chan_t;

static const char *verbs_peer_desc(verbs_chan_t *vc, int peer)
{
    static char buf[32];
    (void)vc;
    snprintf(buf, sizeof(buf), "rank %d", peer);
    return buf;
}

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

static int verbs_put(chan_t *c, int peer, const void *src, size_t len, const chan_mem_t *lmem,
                     const chan_rmem_t *dst, uint64_t off)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;
    uint64_t raddr = dst->rkey.addr + off;
    uint32_t rkey = (uint32_t)dst->rkey.key;
    const char *s = src;
    int rc = verbs_check_dst(peer, len, dst, off);

    if (rc != ARCOLL_OK || len == 0)
        return rc;
    if (lmem != NULL) {
        const struct ibv_mr *mr = lmem->priv;
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

static int verbs_put_u64(chan_t *c, int peer, uint64_t val, const chan_rmem_t *dst, uint64_t off)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;
    uint32_t rkey = (uint32_t)dst->rkey.key;
    int rc = verbs_check_dst(peer, sizeof(val), dst, off);

    if (rc != ARCOLL_OK)
        return rc;
    if (vc->imm) {
        /* Flags live at the start of a 64-byte line (wire.h); the shadow word
         * of line L is at len + 8 L, and the immediate names region and line. */
        uint32_t id = (uint32_t)(dst->rkey.key >> 32);
        uint64_t line = off / 64;
        if (off % 64 || line >= (1u << VERBS_IMM_LINE_BITS)) {
            log_err("verbs: flag at offset %llu is not at a line start", (unsigned long long)off);
            return ARCOLL_ERR_CHANNEL;
        }
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

static int verbs_progress(chan_t *c)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;
    int rc = verbs_poll(vc);

    if (rc != ARCOLL_OK)
        return rc;
    return vc->outstanding > (uint64_t)INT32_MAX ? INT32_MAX : (int)vc->outstanding;
}

static int verbs_peer_check(chan_t *c, int peer)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;

    /* On our host we can look at the process itself: the transport may keep
     * acknowledging a dead peer's QP for a while (Soft-RoCE does). */
    if (vc->pids[peer] > 0 && boot_pid_gone(vc->pids[peer])) {
        log_err("verbs: rank %d (pid %d, on this host) has exited", peer, vc->pids[peer]);
        return ARCOLL_ERR_PEER;
    }
    if (vc->peers[peer].failed) {
        log_err("verbs: %s is unreachable (%s)", verbs_peer_desc(vc, peer),
                ibv_wc_status_str((enum ibv_wc_status)vc->peers[peer].failed));
        return ARCOLL_ERR_PEER;
    }
    return ARCOLL_OK;
}

static void verbs_peer_describe(chan_t *c, int peer, char *buf, size_t len)
{
    static const char *const states[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
    verbs_chan_t *vc = (verbs_chan_t *)c;
    verbs_peer_t *p = &vc->peers[peer];
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    const char *st = "?";

    if (p->qp != NULL && ibv_query_qp(p->qp, &a, IBV_QP_STATE, &ia) == 0 &&
        a.qp_state < sizeof(states) / sizeof(states[0]))
        st = states[a.qp_state];
    snprintf(buf, len,
             "verbs QP %u to rank %d: %s, WRs posted %llu, completed %llu, cq room %d%s%s",
             p->qp ? p->qp->qp_num : 0, peer, st, (unsigned long long)p->seq,
             (unsigned long long)p->done, vc->cq_room, p->failed ? ", failed: " : "",
             p->failed ? ibv_wc_status_str((enum ibv_wc_status)p->failed) : "");
}

static int verbs_mr_reg(verbs_chan_t *vc, void *addr, size_t len, chan_mem_t *mem)
{
    struct ibv_mr *mr =
        ibv_reg_mr(vc->pd, addr, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);

    if (mr == NULL) {
        int err = errno;
        log_debug("verbs: ibv_reg_mr of %zu bytes at %p failed: %s", len, addr, strerror(err));
        return err == ENOMEM || err == EAGAIN ? ARCOLL_ERR_NOMEM : ARCOLL_ERR_CHANNEL;
    }
    memset(mem, 0, sizeof(*mem));
    mem->addr = addr;
    mem->len = len;
    mem->priv = mr;
    mem->rkey.addr = (uint64_t)(uintptr_t)addr;
    mem->rkey.len = len;
    mem->rkey.key = mr->rkey;
    mem->rkey.kind = VERBS_KIND_MR;
    mem->rkey.owner = (uint32_t)vc->super.boot->rank;
    return ARCOLL_OK;
}

static void verbs_mr_dereg(chan_mem_t *mem)
{
    int rc;

    if (mem->priv == NULL)
        return;
    rc = ibv_dereg_mr(mem->priv);
    if (rc != 0)
        log_warn("verbs: ibv_dereg_mr failed: %s", strerror(rc));
    mem->priv = NULL;
}

/* Regions peers write into. In imm mode a shadow of len/8 bytes follows, one
 * word per 64-byte line, where write-with-immediate puts flags. */
static int verbs_mem_alloc(chan_t *c, size_t len, chan_mem_t *mem)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;
    size_t total = vc->imm ? len + len / 8 + 64 : len;
    uint32_t id = 0;
    void *buf;
    int rc;

    if (vc->imm) {
        while (id < VERBS_MAX_REGIONS && vc->regions[id] != NULL)
            id++;
        if (id == VERBS_MAX_REGIONS || len % 64) {
            log_err("verbs: at most %d teams with ARCOLL_NOTIFY=imm", VERBS_MAX_REGIONS);
            return ARCOLL_ERR_NOMEM;
        }
    }
    if (posix_memalign(&buf, 4096, total) != 0) {
        log_err("verbs: out of memory for a %zu-byte region", total);
        return ARCOLL_ERR_NOMEM;
    }
    memset(buf, 0, total);
    rc = verbs_mr_reg(vc, buf, total, mem);
    if (rc != ARCOLL_OK) {
        log_err("verbs: registering a %zu-byte region failed (locked-memory limit? see ulimit "
                "-l)",
                total);
        free(buf);
        return rc;
    }
    mem->len = len;
    mem->rkey.len = len;
    mem->rkey.key |= (uint64_t)id << 32;
    if (vc->imm)
        vc->regions[id] = mem;
    return ARCOLL_OK;
}

static void verbs_mem_free(chan_t *c, chan_mem_t *mem)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;
    uint32_t id = (uint32_t)(mem->rkey.key >> 32);
    void *buf = mem->addr;

    if (vc->imm && id < VERBS_MAX_REGIONS && vc->regions[id] == mem)
        vc->regions[id] = NULL;
    verbs_mr_dereg(mem);
    free(buf);
    mem->addr = NULL;
}

static int verbs_mem_reg(chan_t *c, void *addr, size_t len, chan_mem_t *mem)
{
    return verbs_mr_reg((verbs_chan_t *)c, addr, len, mem);
}

static void verbs_mem_dereg(chan_t *c, chan_mem_t *mem)
{
    (void)c;
    verbs_mr_dereg(mem);
}

static int verbs_rmem_import(chan_t *c, int peer, const chan_rkey_t *rkey, chan_rmem_t *rm)
{
    (void)c;
    if (rkey->kind != VERBS_KIND_MR || rkey->owner != (uint32_t)peer) {
        log_err("verbs: rank %d sent a key that is not a verbs memory key of its own", peer);
        return ARCOLL_ERR_CHANNEL;
    }
    rm->rkey = *rkey;
    rm->map = NULL;
    return ARCOLL_OK;
}

static void verbs_rmem_release(chan_t *c, chan_rmem_t *rm)
{
    (void)c;
    rm->rkey.kind = 0;
}

static void verbs_destroy(chan_t *c);

static const struct chan_ops verbs_ops = {
    .name = "verbs",
    .mem_alloc = verbs_mem_alloc,
    .mem_free = verbs_mem_free,
    .mem_seal = NULL,
    .mem_reg = verbs_mem_reg,
    .mem_dereg = verbs_mem_dereg,
    .rmem_import = verbs_rmem_import,
    .rmem_release = verbs_rmem_release,
    .put = verbs_put,
    .put_u64 = verbs_put_u64,
    .progress = verbs_progress,
    .peer_check = verbs_peer_check,
    .peer_describe = verbs_peer_describe,
    .destroy = verbs_destroy,
};

static uint32_t verbs_psn(uint32_t qpn)
{
    return (qpn * 2654435761u) & 0xffffff;
}

/* RESET -> INIT for every peer's QP. */
static int verbs_qp_create(verbs_chan_t *vc, int peer)
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
    return ARCOLL_OK;
}

/* INIT -> RTR -> RTS with the peer's advertised address (rc_pingpong's ladder). */
static int verbs_qp_connect(verbs_chan_t *vc, int peer, const verbs_addr_t *ra, int me)
{
    struct ibv_qp *qp = vc->peers[peer].qp;
    struct ibv_qp_attr a;
    int rc;

    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = ra->mtu < vc->pa.active_mtu ? (enum ibv_mtu)ra->mtu : vc->pa.active_mtu;
    a.dest_qp_num = ra->qpn[me];
    a.rq_psn = verbs_psn(ra->qpn[me]);
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
    a.timeout = 14;  /* 4.096 us * 2^14 = 67 ms per try */
    a.retry_cnt = 7; /* a dead peer is reported after about half a second */
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
    return ARCOLL_OK;
}

static int verbs_wireup(verbs_chan_t *vc)
{
    boot_t *b = vc->super.boot;
    size_t rec = sizeof(verbs_addr_t) + sizeof(uint32_t) * (size_t)b->size;
    verbs_addr_t *mine = calloc(1, rec);
    char *all = malloc(rec * (size_t)b->size);
    int rc = ARCOLL_ERR_NOMEM;

    if (mine == NULL || all == NULL) {
        log_err("verbs: out of memory for the wire-up records");
        goto out;
    }
    mine->version = VERBS_ADDR_VERSION;
    mine->pid = (int32_t)getpid();
    snprintf(mine->host, sizeof(mine->host), "%s", b->hostname);
    mine->lid = vc->pa.lid;
    mine->mtu = (uint8_t)vc->pa.active_mtu;
    mine->has_gid = vc->gid_index >= 0;
    memcpy(mine->gid, vc->gid.raw, 16);
    for (int p = 0; p < b->size; p++) {
        if (p == b->rank)
            continue;
        rc = verbs_qp_create(vc, p);
        if (rc != ARCOLL_OK)
            goto out; /* the created QPs are destroyed by the caller */
        mine->qpn[p] = vc->peers[p].qp->qp_num;
    }
    rc = b->allgather(b, mine, all, rec);
    if (rc != ARCOLL_OK)
        goto out;
    for (int p = 0; p < b->size && rc == ARCOLL_OK; p++) {
        const verbs_addr_t *ra = (const verbs_addr_t *)(all + rec * (size_t)p);
        /* A pid means something only on its own host (not a pretend node). */
        vc->pids[p] = strncmp(ra->host, mine->host, sizeof(mine->host)) == 0 ? ra->pid : 0;
        if (p == b->rank)
            continue;
        if (ra->version != VERBS_ADDR_VERSION || ra->has_gid != mine->has_gid) {
            log_err("verbs: rank %d %s", p,
                    ra->version != VERBS_ADDR_VERSION
                        ? "runs another arcoll wire-up version"
                        : "disagrees on GID routing (mixed InfiniBand and RoCE?)");
            rc = ARCOLL_ERR_CHANNEL;
            break;
        }
        rc = verbs_qp_connect(vc, p, ra, b->rank);
    }
    /* No rank writes before every rank's QPs are ready to receive. */
    if (rc == ARCOLL_OK)
        rc = b->barrier(b);
out:
    free(all);
    free(mine);
    return rc;
}

static void verbs_destroy(chan_t *c)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;
    int rc;

    for (int p = 0; vc->peers != NULL && p < c->boot->size; p++) {
        if (vc->peers[p].qp != NULL && (rc = ibv_destroy_qp(vc->peers[p].qp)) != 0)
            log_warn("verbs: ibv_destroy_qp failed: %s", strerror(rc));
    }
    free(vc->peers);
    free(vc->pids);
    free(vc->ents);
    if (vc->stage_mr != NULL && (rc = ibv_dereg_mr(vc->stage_mr)) != 0)
        log_warn("verbs: ibv_dereg_mr (staging) failed: %s", strerror(rc));
    free(vc->stage);
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
    char g[64] = "none (LID routing)";
    int nqp = 0;

    if (vc->gid_index >= 0)
        inet_ntop(AF_INET6, vc->gid.raw, g, sizeof(g));
    for (int p = 0; p < c->boot->size; p++)
        nqp += vc->peers[p].qp != NULL;
    snprintf(buf, len,
             "%s port %u, gid[%d] %s, mtu %d, %d RC QPs, inline %u B, staging %u KiB, "
             "notify %s",
             ibv_get_device_name(vc->ctx->device), vc->port, vc->gid_index, g,
             128 << vc->pa.active_mtu, nqp, vc->max_inline, VERBS_STAGE_SIZE >> 10,
             vc->imm ? "imm" : "flag");
}

/* Setup ladder: device -> PD -> CQ(s) -> staging MR -> QPs -> wire-up. On
 * failure verbs_destroy walks it down from wherever it got to. */
int verbs_chan_create(boot_t *boot, const struct core_config *cfg, chan_t **out)
{
    verbs_chan_t *vc;
    struct ibv_device_attr da;
    long gid_want = cfg->gid_index;
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
    vc->imm = cfg->notify == CORE_NOTIFY_IMM;
    vc->timeout_ms = cfg->timeout_ms;
    vc->max_inline = UINT32_MAX;
    if (cfg->wireup == CORE_WIREUP_RDMACM) {
        /* librdmacm names device, port and GID from this host's IP address. */
        char dev[80];
        union ibv_gid want;
        uint8_t port;
        rc = verbs_rdmacm_resolve(cfg->device, dev, sizeof(dev) - 4, &port, &want);
        if (rc != ARCOLL_OK)
            goto err;
        snprintf(dev + strlen(dev), 5, ":%u", port);
        rc = verbs_dev_open(dev, &vc->ctx, &vc->port, &vc->pa);
        if (rc != ARCOLL_OK)
            goto err;
        gid_want = cfg->gid_index >= 0 ? cfg->gid_index
                                       : verbs_gid_find(vc->ctx, vc->port, &vc->pa, &want);
        if (gid_want < 0) {
            log_err("verbs: ARCOLL_WIREUP=rdmacm: the GID of the address is not in %s's table",
                    dev);
            rc = ARCOLL_ERR_CHANNEL;
            goto err;
        }
    } else {
        rc = verbs_dev_open(cfg->device, &vc->ctx, &vc->port, &vc->pa);
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
    vc->pids = calloc((size_t)boot->size, sizeof(*vc->pids));
    vc->ents = calloc(VERBS_STAGE_ENTS, sizeof(*vc->ents));
    if (vc->peers == NULL || vc->pids == NULL || vc->ents == NULL ||
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
    rc = verbs_wireup(vc);
    if (rc != ARCOLL_OK)
        goto err;
    vc->super.zcopy = 1;
    vc->super.fixed_bytes = VERBS_STAGE_SIZE;
    if (boot->rank == 0) {
        char g[64] = "none";
        if (vc->gid_index >= 0)
            inet_ntop(AF_INET6, vc->gid.raw, g, sizeof(g));
        log_info("verbs: %s port %u, gid[%d] %s, mtu %d, inline %u, notify %s",
                 ibv_get_device_name(vc->ctx->device), vc->port, vc->gid_index, g,
                 128 << vc->pa.active_mtu, vc->max_inline, vc->imm ? "imm" : "flag");
    }
    *out = &vc->super;
    return ARCOLL_OK;

err:
    verbs_destroy(&vc->super);
    return rc;
}
