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
#include <arpa/inet.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/chan.h"
#include "core/config.h"
#include "core/log.h"
#include "core/util.h"
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

#define VERBS_UD_QKEY         0x61726331u  /* "arc1": every arcoll UD QP */
#define VERBS_UD_RECVS        64           /* posted HELLO receive buffers */
#define VERBS_UD_SENDS        16           /* HELLO send slots */
#define VERBS_UD_GRH          40           /* a UD receive starts with the GRH (or room for it) */
#define VERBS_UD_SLOT         128          /* GRH + message, per buffer */
#define VERBS_UD_SEND_BIT     (1ULL << 63) /* wr_id of a UD send; receives carry their index */
#define VERBS_HELLO_MAGIC     0x48454c4fu  /* "HELO" */
#define VERBS_HELLO_VERSION   1
#define VERBS_GONE_MAGIC      0x474f4e45u /* "GONE" */
#define VERBS_GONE_VERSION    1
#define VERBS_WATCH_NS        (100ULL * 1000000) /* node-mates' pids: every 100 ms of waiting */
#define VERBS_GONE_SEND_NS    (20ULL * 1000000)  /* wait for a free UD send slot, at most */
#define VERBS_HELLO_RESEND_NS (30ULL * 1000000)  /* retransmit while not ready */
#define VERBS_EAGER_ROUND_NS  (200ULL * 1000000)

/* Connection state toward one peer; each step implies the earlier ones. */
enum {
    VERBS_CONN_NONE,  /* no RC QP */
    VERBS_CONN_INIT,  /* our QP exists (INIT), the peer's QPN is not known */
    VERBS_CONN_RTS,   /* our QP is RTR+RTS toward the peer's QPN */
    VERBS_CONN_READY, /* and the peer's QP is RTR toward ours: we may write */
};

enum { VERBS_OP_PUT, VERBS_OP_U64 };

/* A put to a peer that is not ready yet, posted in order once it is. A
 * larger source stays the caller's (chan.h: reused only at 0 outstanding, and
 * queued operations count); small ones and the u64 value are copied, as the
 * engine passes words on its stack (chan.h, CHAN_PUT_COPY). */
typedef struct verbs_op {
    int kind;
    int has_lmem;
    const void *src;
    size_t len;
    uint64_t val;
    uint64_t off;
    chan_mem_t lmem;
    chan_rmem_t dst;
    unsigned char data[CHAN_PUT_COPY];
} verbs_op_t;

typedef struct verbs_peer {
    struct ibv_qp *qp;
    uint64_t seq;  /* WRs posted */
    uint64_t done; /* WRs known complete */
    uint32_t unsignaled;
    int failed;        /* ibv_wc_status of the first error */
    int gone_by;       /* 0, or 1 + the rank that saw this peer's process end on its host */
    int state;         /* VERBS_CONN_* */
    struct ibv_ah *ah; /* UD address handle for HELLOs */
    uint32_t rqpn;     /* the peer's RC QPN for us, from its HELLO */
    uint32_t hellos_sent, hellos_rcvd;
    uint64_t hello_ns;   /* last HELLO sent */
    uint64_t connect_ns; /* first HELLO of this attempt (drops a stale queue) */
    verbs_op_t *q;       /* queued puts, FIFO */
    uint32_t qlen, qcap;
} verbs_peer_t;

typedef struct verbs_stage_ent {
    uint32_t peer;
    uint64_t seq;
    uint64_t end;
} verbs_stage_ent_t;

/* What one rank tells all others at init: fixed size, so the bootstrap moves
 * O(ranks) bytes in all; RC QPNs travel in HELLOs. */
typedef struct verbs_addr {
    uint32_t version;
    int32_t pid; /* with host: lets peers on the same host see each other die */
    char host[BOOT_HOSTNAME_MAX];
    uint16_t lid;
    uint8_t mtu;
    uint8_t has_gid;
    uint8_t gid[16];
    uint32_t ud_qpn;
} verbs_addr_t;

#define VERBS_ADDR_VERSION 3

/* The one message of the connection handshake (docs/verbs.md, "Connections"). */
typedef struct verbs_hello {
    uint32_t magic;
    uint16_t version;
    uint8_t rtr;       /* the sender's QP is RTR+RTS toward qpn's peer (us) */
    uint8_t ack;       /* the sender knows our QP is RTR: it needs no answer */
    uint32_t src, dst; /* context ranks */
    uint32_t qpn;      /* the sender's RC QP for the receiver */
} verbs_hello_t;

/* A notice to the ranks of other hosts: rank `gone`, on the sender's host,
 * has exited (its pid is gone). Across a link the transport may say nothing
 * for a long time (docs/verbs.md, "A peer that dies"). */
typedef struct verbs_gone {
    uint32_t magic;
    uint16_t version;
    uint16_t pad;
    uint32_t src, dst; /* context ranks */
    uint32_t gone;     /* the rank that exited */
    int32_t pid;       /* its pid, for the log */
} verbs_gone_t;

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
    int eager;
    long timeout_ms;
    verbs_peer_t *peers;
    verbs_addr_t *addrs; /* every rank's record */
    int32_t *pids;       /* of ranks on this host, 0 for the others */
    uint64_t outstanding;
    uint64_t queued;    /* operations waiting for a connection (count as outstanding) */
    int pending;        /* peers with a QP that are not ready */
    int nqps;           /* RC QPs created */
    int nready;         /* peers ready */
    uint64_t resend_ns; /* next retransmission scan */
    uint32_t ud_skip;   /* progress calls since the UD CQ was last polled */
    size_t reg_bytes;   /* registered with the NIC now */
    int cq_room;        /* CQEs the send CQ can still take: one per signaled WR in flight */
    char *stage;
    struct ibv_mr *stage_mr;
    uint64_t stage_head, stage_tail;
    verbs_stage_ent_t *ents;
    uint64_t ent_head, ent_tail;
    chan_mem_t *regions[VERBS_MAX_REGIONS]; /* imm mode: flag shadows by region id */
    struct ibv_cq *ud_cq;
    struct ibv_qp *ud_qp;
    char *ud_buf; /* VERBS_UD_RECVS receive slots, then VERBS_UD_SENDS send slots */
    struct ibv_mr *ud_mr;
    uint32_t ud_send_next, ud_send_busy;
    int ud_send_errs;
    uint64_t watch_ns; /* next look at the node-mates' pids */
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

static uint32_t verbs_psn(uint32_t qpn)
{
    return (qpn * 2654435761u) & 0xffffff;
}

/* Our RC QP for the peer, RESET -> INIT (no peer address needed yet). */
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
    vc->peers[peer].rqpn = rqpn;
    vc->peers[peer].state = VERBS_CONN_RTS;
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
static int verbs_hello_send(verbs_chan_t *vc, int peer)
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
 * failed post fails the call, which no longer needs the rest. */
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
        rc = verbs_flush(vc, peer);
        if (rc != ARCOLL_OK)
            return rc;
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
static int verbs_connect_progress(verbs_chan_t *vc)
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

static int verbs_put(chan_t *c, int peer, const void *src, size_t len, const chan_mem_t *lmem,
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

static int verbs_put_u64(chan_t *c, int peer, uint64_t val, const chan_rmem_t *dst, uint64_t off)
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
static int verbs_peer_ready(chan_t *c, int peer)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;
    const verbs_peer_t *p = &vc->peers[peer];

    return !vc->imm && p->state == VERBS_CONN_READY && p->qlen == 0 && !p->failed;
}

static int verbs_progress(chan_t *c)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;
    uint64_t n;
    int rc = verbs_poll(vc);

    if (rc == ARCOLL_OK)
        rc = verbs_connect_progress(vc);
    if (rc != ARCOLL_OK)
        return rc;
    n = vc->outstanding + vc->queued;
    return n > (uint64_t)INT32_MAX ? INT32_MAX : (int)n;
}

static void verbs_stats(chan_t *c, int *qps, int *ready, size_t *reg)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;

    *qps = vc->nqps;
    *ready = vc->nready;
    *reg = vc->reg_bytes;
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
        if (r == b->rank || vc->pids[r] > 0 || vc->peers[r].gone_by)
            continue; /* this host's ranks see the pid themselves */
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
    log_info("verbs: rank %d (pid %d, on this host) has exited: told %d ranks of other hosts", gone,
             vc->pids[gone], told);
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

static int verbs_peer_check(chan_t *c, int peer)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;
    int by;

    /* On our host we can look at the process itself: the transport may keep
     * acknowledging a dead peer's QP for a while (Soft-RoCE does). */
    verbs_watch(vc);
    if (vc->pids[peer] > 0 && !vc->peers[peer].gone_by && boot_pid_gone(vc->pids[peer]))
        verbs_gone_tell(vc, peer);
    by = vc->peers[peer].gone_by - 1;
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

static void verbs_peer_describe(chan_t *c, int peer, char *buf, size_t len)
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

static int verbs_mr_reg_flags(verbs_chan_t *vc, void *addr, size_t len, int extra, chan_mem_t *mem)
{
    struct ibv_mr *mr =
        ibv_reg_mr(vc->pd, addr, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | extra);

    if (mr == NULL) {
        int err = errno;
        log_debug("verbs: ibv_reg_mr%s of %zu bytes at %p failed: %s", extra ? " (on demand)" : "",
                  len, addr, strerror(err));
        return err == ENOMEM || err == EAGAIN ? ARCOLL_ERR_NOMEM : ARCOLL_ERR_CHANNEL;
    }
    vc->reg_bytes += len;
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

static int verbs_mr_reg(verbs_chan_t *vc, void *addr, size_t len, chan_mem_t *mem)
{
    return verbs_mr_reg_flags(vc, addr, len, 0, mem);
}

static void verbs_mr_dereg(verbs_chan_t *vc, chan_mem_t *mem)
{
    struct ibv_mr *mr = mem->priv;
    size_t len;
    int rc;

    if (mr == NULL)
        return;
    len = mr->length;
    rc = ibv_dereg_mr(mr);
    if (rc != 0)
        log_warn("verbs: ibv_dereg_mr failed: %s", strerror(rc));
    else
        vc->reg_bytes -= len;
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
    verbs_mr_dereg(vc, mem);
    free(buf);
    mem->addr = NULL;
}

static int verbs_mem_reg(chan_t *c, void *addr, size_t len, chan_mem_t *mem)
{
    return verbs_mr_reg((verbs_chan_t *)c, addr, len, mem);
}

static int verbs_mem_reg_odp(chan_t *c, void *addr, size_t len, chan_mem_t *mem)
{
    return verbs_mr_reg_flags((verbs_chan_t *)c, addr, len, IBV_ACCESS_ON_DEMAND, mem);
}

static void verbs_mem_dereg(chan_t *c, chan_mem_t *mem)
{
    verbs_mr_dereg((verbs_chan_t *)c, mem);
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

/* The handshake's UD QP: its CQ, a buffer of receive and send slots, the QP
 * taken to RTS and every receive posted before any peer learns its QPN. */
static int verbs_ud_create(verbs_chan_t *vc)
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
static int verbs_addr_exchange(verbs_chan_t *vc)
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

/* ARCOLL_VERBS_CONNECT=eager: the handshake with every peer, now. A rank ready
 * with all its peers cannot know that its last HELLO arrived, and one waiting
 * in the bootstrap answers nobody; so handshaking goes in rounds of at most
 * VERBS_EAGER_ROUND_NS, each ended by an allgather of "connected to every
 * peer". Once every rank is, every QP is RTR and all peers are ready. */
static int verbs_connect_all(verbs_chan_t *vc)
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
    for (int p = 0; p < b->size && rc == ARCOLL_OK; p++) {
        if (p == b->rank)
            continue;
        rc = verbs_qp_create(vc, p);
        if (rc == ARCOLL_OK)
            rc = verbs_hello_send(vc, p);
    }
    for (;;) {
        uint64_t end = core_time_ns() + VERBS_EAGER_ROUND_NS;
        int connected = 0, failed = -1;
        while (rc == ARCOLL_OK && vc->nready < b->size - 1 && core_time_ns() < end)
            rc = verbs_connect_progress(vc);
        for (int p = 0; p < b->size; p++)
            connected += p != b->rank && vc->peers[p].state >= VERBS_CONN_RTS;
        if (rc == ARCOLL_OK && connected < b->size - 1 && core_time_ns() > deadline) {
            log_err("verbs: ARCOLL_VERBS_CONNECT=eager: connected to %d of %d peers after %ld ms",
                    connected, b->size - 1, vc->timeout_ms);
            rc = ARCOLL_ERR_TIMEOUT;
        }
        mine[0] = rc;
        mine[1] = connected == b->size - 1;
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
                log_err("verbs: ARCOLL_VERBS_CONNECT=eager: rank %d failed to connect", failed);
            goto out;
        }
        if (connected)
            break;
    }
    for (int p = 0; p < b->size; p++) {
        if (p != b->rank && vc->peers[p].state == VERBS_CONN_RTS) {
            vc->peers[p].state = VERBS_CONN_READY;
            vc->pending--;
            vc->nready++;
        }
    }
    log_debug("verbs: eager connection to %d peers in %d round(s)", b->size - 1, round);
out:
    free(all);
    return rc;
}

static void verbs_destroy(chan_t *c)
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

/* Can an RC MR be on-demand paged, as both the source and the target of
 * RDMA WRITE? Then the heap needs one MR over its slot, nothing pinned. */
static int verbs_odp_rc(verbs_chan_t *vc)
{
    const uint32_t need = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_WRITE;
    struct ibv_device_attr_ex dx;
    int rc;

    memset(&dx, 0, sizeof(dx));
    rc = ibv_query_device_ex(vc->ctx, NULL, &dx);
    if (rc != 0) {
        log_debug("verbs: ibv_query_device_ex failed (%s): no on-demand paging", strerror(rc));
        return 0;
    }
    return (dx.odp_caps.general_caps & IBV_ODP_SUPPORT) != 0 &&
           (dx.odp_caps.per_transport_caps.rc_odp_caps & need) == need;
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
    vc->eager = cfg->verbs_connect == CORE_CONNECT_EAGER;
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
    if (rc == ARCOLL_OK && vc->eager)
        rc = verbs_connect_all(vc);
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
