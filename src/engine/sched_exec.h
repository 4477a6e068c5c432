/*
 * The schedule executor's per-call state (engine/sched_run.c), shared with
 * its zero-copy part (engine/sched_zc.c). Internal to the engine.
 */
#ifndef ARCOLL_ENGINE_SCHED_EXEC_H
#define ARCOLL_ENGINE_SCHED_EXEC_H

#include <stdint.h>

#include "engine/engine.h"
#include "engine/zmem.h"

#define SX_NONE UINT32_MAX
/* At most this many landings are sorted through instead of a whole receive
 * scan (sx_landed_peers). */
#define SX_CAND_MAX 512u
/* Folded into the header signature of unordered messages: a receiver can
 * never take one for an ordered message of the same length, or the reverse
 * (their order in a stream differs between the ends only when the ends
 * disagree on which blocks go direct). */
#define SX_SIG_UNORDERED 0x5a5a0f0f3c3c9696ULL

typedef struct sched_exec {
    sched_t s;
    uint32_t cap_n, cap_msg, cap_round;
    /* per peer */
    uint32_t *tx_head, *rx_head; /* next message of the stream, or SX_NONE */
    uint32_t *tx_frag, *rx_frag; /* next fragment of the stream */
    uint32_t *rx_total;          /* fragments of the whole stream from the peer */
    uint32_t *tx_pipe, *rx_pipe; /* the stream's pipe entry (wire_pipe_of) or WIRE_PIPE_NONE */
    uint32_t *rx_cred;           /* fragments of the stream from the peer credited so far */
    /* The peers with messages to send, in PAP's visiting order (rank - 1
     * down, wrapping); sx_pap_tx drops the finished ones, so that a pass
     * costs the peers left, not the team size (large teams, few peers). */
    uint32_t *tx_peers, ntx_peers;
    uint32_t *rx_peers, nrx_peers; /* the same for receives, in rank order */
    uint32_t *tx_seen;             /* sx_sends: the peer had arrived at its first pass */
    uint64_t *tx_off, *rx_off;     /* bytes of the current message done */
    /* per message */
    uint32_t *next_send, *next_recv; /* next message of the same stream */
    /* per round (nrounds + 1 entries) */
    uint32_t *send_left, *recv_left, *local_left;
    uint32_t recv_ok, send_ok, local_ok; /* every X of rounds below it is done */
    uint32_t sends, recvs, locals;       /* still to do */
    uint32_t tx_unordered;               /* of sends: unordered ones (round 0) */
    /* The receive scan (sx_recvs) on a channel that tells where puts landed
     * (chan_model_ops.landed_at): the landings the last scan had seen, and the
     * round gate it saw. A receive the last scan could not take waits for a
     * landing in its slot or for the gate to move, unless its placement was
     * deferred (rx_retry): then the next scan looks at every peer. */
    uint64_t scan_landed;
    uint32_t scan_local_ok;
    int scan_valid; /* scan_* describe a scan of this call */
    int rx_retry;
    uint32_t *rx_cand;   /* [SX_CAND_MAX]: peers whose slot a landing wrote */
    uint32_t local_next; /* locals run in list (round) order */
    uint32_t order_next; /* in_order: the one send that may go */
    int in_order;
    int by_arrival;     /* PAP: sends to peers that have arrived first (ARCOLL_SCHED_ORDER) */
    int wait_adv;       /* a stream's first fragment waits for the receiver's advertisement */
    uint32_t hook_next; /* dynamic schedules: the next round whose hook runs */
    sched_mem_t mem;
    /* Zero-copy messages (sched_zc.c, docs/protocol.md §17). */
    uint64_t zc_min;             /* messages of at least this many bytes; 0: none this call */
    uint32_t *tx_seq, *rx_seq;   /* per peer: the current message's number in its stream */
    uint32_t *tx_zc, *rx_zc;     /* per peer: SX_ZC_* of the current message */
    uint32_t zc_rx_left;         /* eligible receives not done: no landing-scan shortcut */
    zmem_ref_t zreg[SCHED_NBUF]; /* RECV, TMP: registered for this call */
    int zstate[SCHED_NBUF];      /* SX_ZREG_* */
    uint64_t zlo[SCHED_NBUF], zhi[SCHED_NBUF]; /* the span its eligible receives write */
    chan_rkey_t zheap[SCHED_NBUF];             /* the span by node-heap address */
} sched_exec_t;

/* How a buffer of the call is offered to senders (sched_exec_t.zstate). */
enum { SX_ZREG_UNTRIED = 0, SX_ZREG_REG, SX_ZREG_HEAP, SX_ZREG_NONE };

/* Zero-copy messages (sched_zc.c). */
/* Per peer, the state of the stream's current message: */
enum {
    SX_ZC_NONE = 0, /* receiver: not advertised yet; sender: no advertisement read */
    SX_ZC_KEYED,    /* receiver: advertised with a key, waiting for the done word */
    SX_ZC_COPY      /* advertised without a key: this message takes the copy path */
};

/* Start of a call: decide the threshold, count the eligible receives. */
void sx_zc_plan(coll_req_t *r, sched_exec_t *x, int mode);
/* Is message m (a send or a receive, seq-th of its stream) one that meets
 * its peer by advertisement? Both ends compute the same answer. */
static inline int sx_zc_ok(const sched_exec_t *x, const sched_msg_t *m, uint32_t seq)
{
    /* A dynamic schedule's hook may rewrite its ordered messages (lengths
     * included) and move TMP: only its unordered ones (SLOAV's direct blocks),
     * whose lengths both ends know at the start, qualify. */
    return x->zc_min != 0 && (x->s.hook == NULL || m->unordered) && !m->open &&
           m->action == SCHED_COPY && seq <= WIRE_SX_SEQ_MAX &&
           sched_msg_len(&x->s, m) >= x->zc_min;
}
/* Receiver: advertise the current message of peer p's stream or take its
 * done word: 1 the message is complete, 2 it goes by the copy path (take its
 * fragments), 0 not yet, < 0 an error. */
int sx_zc_rx(coll_req_t *r, sched_exec_t *x, uint32_t p);
/* Sender: write the current message to peer p into the advertised buffer:
 * 1 written, 2 the receiver wants its fragments, 0 not yet, < 0 an error. */
int sx_zc_tx(coll_req_t *r, sched_exec_t *x, uint32_t p);
/* Receiver, a copy-path message of p's stream not landed yet: after
 * SX_ZC_LATE_POLLS passes, advertise it without a key, with our length, once;
 * then watch for the sender's refusal. A sender whose own length puts the
 * message on the zero-copy path (a mismatch) waits for an advertisement:
 * this one makes it refuse, so both ends report the mismatch instead of
 * timing out. 0, or < 0 an error (a refusal drops the stream: mismatch). */
#define SX_ZC_LATE_POLLS 256
int sx_zc_late(coll_req_t *r, sched_exec_t *x, uint32_t p);
/* Has peer p said it is in this call through a zero-copy word? */
int sx_zc_arrived(const coll_req_t *r, uint32_t p);

/* A stream's bookkeeping, for both files: its current message is complete
 * (sx_rx_next, sx_tx_next), or the stream is dropped. */
static inline void sx_rx_next(coll_req_t *r, sched_exec_t *x, uint32_t p)
{
    uint32_t mi = x->rx_head[p];
    const sched_msg_t *m = &x->s.recv[mi];

    if (sx_zc_ok(x, m, x->rx_seq[p]))
        x->zc_rx_left--;
    x->rx_head[p] = x->next_recv[mi];
    x->rx_seq[p]++;
    x->rx_zc[p] = SX_ZC_NONE;
    x->recvs--;
    if (!m->unordered)
        x->recv_left[m->round]--;
    if (x->rx_head[p] == SX_NONE)
        r->peers[p].rx_done = 1;
}

static inline void sx_tx_next(coll_req_t *r, sched_exec_t *x, uint32_t p)
{
    uint32_t mi = x->tx_head[p];
    const sched_msg_t *m = &x->s.send[mi];

    x->tx_off[p] = 0;
    x->tx_head[p] = x->next_send[mi];
    x->tx_seq[p]++;
    x->tx_zc[p] = SX_ZC_NONE;
    x->sends--;
    if (!m->unordered)
        x->send_left[m->round]--;
    else
        x->tx_unordered--;
    if (x->in_order)
        x->order_next++;
    if (x->tx_head[p] == SX_NONE)
        r->peers[p].tx_state = COLL_TX_DONE;
}

/* A stream is rejected: its remaining messages count as done, the call fails
 * with deferred MISMATCH once everything else is over. A message advertised
 * with a key stays marked (rx_zc): the revocation at the call's end needs it. */
static inline void sx_drop_rx(sched_exec_t *x, uint32_t p)
{
    for (uint32_t i = x->rx_head[p], seq = x->rx_seq[p]; i != SX_NONE; i = x->next_recv[i], seq++) {
        if (sx_zc_ok(x, &x->s.recv[i], seq))
            x->zc_rx_left--;
        x->recvs--;
        if (!x->s.recv[i].unordered)
            x->recv_left[x->s.recv[i].round]--;
    }
    x->rx_head[p] = SX_NONE;
}

static inline void sx_drop_tx(sched_exec_t *x, uint32_t p)
{
    for (uint32_t i = x->tx_head[p]; i != SX_NONE; i = x->next_send[i]) {
        x->sends--;
        if (!x->s.send[i].unordered)
            x->send_left[x->s.send[i].round]--;
        else
            x->tx_unordered--;
    }
    x->tx_head[p] = SX_NONE;
}

#endif
