/* The verbs channel's state and the functions its files share: the channel
 * (verbs_chan.c: create, destroy), wire-up (verbs_wire.c: QPs, the UD
 * handshake, liveness), memory (verbs_mem.c: registrations) and the data path
 * (verbs_data.c: puts, completions, progress). */
#ifndef ARCOLL_CHAN_VERBS_VERBS_INT_H
#define ARCOLL_CHAN_VERBS_VERBS_INT_H

#include <arpa/inet.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chan/chan.h"
#include "chan/verbs/verbs.h"
#include "util/log.h"
#include "util/util.h"

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
#define VERBS_PROBE_NS        (200ULL * 1000000) /* a peer of another host: a probe at most so often */
#define VERBS_HELLO_RESEND_NS (30ULL * 1000000) /* retransmit while not ready */
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
    int gone_probe;    /* gone_by's rank saw it by a failed liveness probe, not by its pid */
    int state;         /* VERBS_CONN_* */
    struct ibv_ah *ah; /* UD address handle for HELLOs */
    uint32_t rqpn;     /* the peer's RC QPN for us, from its HELLO */
    uint32_t hellos_sent, hellos_rcvd;
    uint64_t hello_ns;   /* last HELLO sent */
    uint64_t connect_ns; /* first HELLO of this attempt (drops a stale queue) */
    uint64_t probe_ns;   /* last liveness probe (verbs_probe) */
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
    int flush_due;      /* a peer became ready with writes queued: verbs_progress posts them */
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
    /* Lazy wiring: the peers this rank watches or is watched by (a rank alone
     * on its host and its neighbours in rank order), connected at init
     * (verbs_ring_connect): a lone rank that dies before any HELLO of ours is
     * answered has no node-mate to see its pid go, and no QP we could probe. */
    int ring[2], nring;
} verbs_chan_t;

const char *verbs_peer_desc(verbs_chan_t *vc, int peer);
int verbs_qp_create(verbs_chan_t *vc, int peer);
int verbs_hello_send(verbs_chan_t *vc, int peer);
int verbs_connect_progress(verbs_chan_t *vc);
int verbs_put(chan_t *c, int peer, const void *src, size_t len, const chan_mem_t *lmem,
              const chan_rmem_t *dst, uint64_t off);
int verbs_put_u64(chan_t *c, int peer, uint64_t val, const chan_rmem_t *dst, uint64_t off);
int verbs_peer_ready(chan_t *c, int peer);
int verbs_progress(chan_t *c);
void verbs_stats(chan_t *c, int *qps, int *ready, size_t *reg);
int verbs_mem_alloc(chan_t *c, size_t len, chan_mem_t *mem);
void verbs_mem_free(chan_t *c, chan_mem_t *mem);
int verbs_mem_reg(chan_t *c, void *addr, size_t len, chan_mem_t *mem);
int verbs_mem_reg_odp(chan_t *c, void *addr, size_t len, chan_mem_t *mem);
void verbs_mem_dereg(chan_t *c, chan_mem_t *mem);
int verbs_rmem_import(chan_t *c, int peer, const chan_rkey_t *rkey, chan_rmem_t *rm);
void verbs_rmem_release(chan_t *c, chan_rmem_t *rm);
int verbs_ud_create(verbs_chan_t *vc);
int verbs_addr_exchange(verbs_chan_t *vc);
int verbs_connect_all(verbs_chan_t *vc);
int verbs_ring_connect(verbs_chan_t *vc);
/* A write to peer ended in retry-exceeded: if it is a watch-ring peer, every
 * rank of other hosts is told (GONE), since they may have no QP to probe it. */
void verbs_ring_failed(verbs_chan_t *vc, int peer);
void verbs_destroy(chan_t *c);
int verbs_odp_rc(verbs_chan_t *vc);
/* What this rank knows of a peer's death: its pid gone (on this host), a
 * GONE notice, a failed completion. ARCOLL_ERR_PEER (logged) or ARCOLL_OK. */
int verbs_peer_seen(verbs_chan_t *vc, int peer);
/* The channel's peer_check: verbs_peer_seen, then a liveness probe. */
int verbs_peer_check(chan_t *c, int peer);
void verbs_peer_describe(chan_t *c, int peer, char *buf, size_t len);

#endif
