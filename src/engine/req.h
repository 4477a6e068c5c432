/*
 * The per-call objects (types only): what a collective call asks for
 * (coll_args_t), the engine's request, and the two plug-in tables below it,
 * protocols (how bytes reach a peer) and algorithms (one ops table each,
 * registered, with the collectives it serves, in the one list of
 * config/algs.h). docs/architecture.md.
 */
#ifndef ARCOLL_ENGINE_REQ_H
#define ARCOLL_ENGINE_REQ_H

#include <stddef.h>
#include <stdint.h>

#include "arcoll.h"
#include "config/algs.h"
#include "engine/sched.h"
#include "engine/zmem.h"

typedef struct coll_req coll_req_t;
struct arcoll_team;

/* What the caller asked for, as validated by the dispatcher. Sizes are bytes
 * except count (elements of dtype). */
typedef struct coll_args {
    coll_type_t type;
    const char *sbuf; /* NULL with in_place */
    char *rbuf;
    size_t bytes;                    /* alltoall/allgather per peer; allgatherv own */
    const size_t *scounts, *sdispls; /* alltoallv */
    const size_t *rcounts, *rdispls; /* alltoallv, allgatherv */
    size_t count;                    /* reductions: elements (per block: rs) */
    arcoll_dtype_t dtype;
    arcoll_op_t op;
    size_t elem; /* bytes of one element of dtype */
    int in_place;
    uint32_t to, from; /* sendrecv: peers (UINT32_MAX: none); bytes out, rbytes in */
    size_t rbytes;
    /* What every rank must pass alike (collective, counts of the reductions,
     * dtype, op, allgatherv's rcounts), hashed: schedules carry it in every
     * message so that a disagreement is a mismatch wherever it shows. */
    uint64_t sig;
    /* A step of another team's call: that call's number (wire words carry
     * it, so steps of calls that do not line up never match); 0: the call is
     * numbered on its own team (docs/protocol.md §8). */
    uint64_t call;
    /* The library's own exchange (closing barrier, a split's records and outcome): the
     * dispatcher's auto pick, never the algorithm the user forced for the
     * collective (a linear pap allreduce of one word at 4096 ranks is 34 M
     * messages, empty ones included, where rdh needs about 8 K), and no
     * zero-copy schedule message nor late advertisement (sched_zc.c); a
     * family passes it on to its inner steps. */
    int internal;
} coll_args_t;

/* How bytes reach a peer: bounce slots (copy) or the final buffer (zcopy).
 * src/engine/bounce.c and src/engine/zcopy.c. */
typedef struct coll_proto {
    const char *name;
    int (*start)(coll_req_t *r);
    /* PAP's arrival signal: 1 if the peer is known to be in this epoch. */
    int (*arrived)(coll_req_t *r, uint32_t peer);
    /* 1 if we may start writing to the peer now. */
    int (*tx_ready)(coll_req_t *r, uint32_t peer);
    /* Advance sending to the peer: 1 done, 0 not yet, < 0 error. */
    int (*tx)(coll_req_t *r, uint32_t peer);
    /* Advance receiving from the peer: 1 done, 0 not yet, < 0 error. */
    int (*rx)(coll_req_t *r, uint32_t peer);
    void (*finish)(coll_req_t *r);
    /* Optional: the call failed and is about to return; make sure no peer
     * writes into its buffers afterwards (zero-copy: docs/protocol.md §6). */
    void (*revoke)(coll_req_t *r);
} coll_proto_t;

/* An algorithm: one file, one ops table, one line in config/algs.h.
 *   flat:       start == NULL; the engine runs the per-peer protocol and
 *               asks tx_progress in which order to write (pap, direct);
 *   multi-phase/schedule: start and progress drive the call themselves with
 *               the engine's primitives (node segments, sub-calls on other
 *               teams, schedules). */
typedef struct coll_alg {
    const char *name;
    /* Why it cannot run this call on this team, or NULL. Must give the same
     * answer on every rank (team shape, settings and the call's agreed sizes). */
    const char *(*unfit)(const struct arcoll_team *t, const coll_args_t *a);
    int fallback;  /* CORE_ALG_* that runs instead when unfit */
    int serial;    /* one call at a time per team (it owns the node segment) */
    int variant;   /* family-private: which member of the family */
    int is_direct; /* flat: writes wait for each receiver's readiness */
    int (*start)(coll_req_t *r);
    int (*progress)(coll_req_t *r);
    int (*tx_progress)(coll_req_t *r);
} coll_alg_t;

enum { COLL_TX_IDLE = 0, COLL_TX_ACTIVE, COLL_TX_DONE };

typedef struct coll_peer {
    uint8_t tx_state;
    uint8_t rx_done;
    uint8_t rx_zc;    /* alltoallv: this peer's block comes zero-copy (we advertised a key) */
    uint8_t told;     /* we sent it our refusal of this call (docs/protocol.md §8) */
    uint8_t tx_eager; /* alltoallv: our block to it goes on the copy path at once (zcopy.c) */
    uint8_t adv_owed; /* v-forms: our advertisement to it is held back (zcopy.c) */
    uint32_t tx_frag; /* next fragment to send */
    uint32_t rx_frag; /* next fragment expected */
    uint64_t rx_want; /* v-forms: the peer's word for us from its header (coll_v_word) */
} coll_peer_t;

/* Bytes of per-call state a multi-phase family keeps inside the request
 * (each family casts it to its own struct, with a static assert on the size). */
#define COLL_PRIV_BYTES 128

struct sched_exec;

struct coll_req {
    struct arcoll_team *team;
    coll_peer_t *peers;          /* [team size], reset per call */
    struct arcoll_request *ureq; /* the caller's handle of a nonblocking call, or NULL */
    const coll_proto_t *proto;
    const coll_alg_t *alg;
    coll_args_t args;
    coll_type_t type; /* = args.type; the flat protocols read these three */
    const char *sbuf;
    char *rbuf;
    size_t bytes;
    int is_direct;
    uint64_t epoch; /* the call's number on the team, which its wire words carry (§8) */
    unsigned bank;  /* of its epoch: the calls that moved data, counted */
    uint32_t nfrags;
    uint32_t tx_left, rx_left;
    uint32_t step; /* direct: next step */
    uint32_t polls;
    uint64_t start_ns, deadline_ns, next_check_ns;
    zmem_ref_t rreg; /* zcopy: registered receive buffer */
    zmem_ref_t sreg; /* zcopy: registered send buffer */
    int rreg_valid, sreg_valid;
    /* zcopy: the receive span advertised by address in the node heap
     * (WIRE_KIND_HEAP) instead of registered; peers write it by memcpy */
    chan_rkey_t rheap;
    int zc_bounce; /* zcopy: our buffer is unregistered, peers use our bounce slots */
    size_t zp_len; /* eng_zcopy_pick's last length (0: none) and its answer */
    int zp_val;
    int active;
    int status;
    int deferred;          /* error to report once every peer has been served */
    unsigned flags;        /* eng_start's COLL_F_* */
    uint32_t mm_peer;      /* 1 + the first peer a size mismatch was found with; 0: none */
    uint64_t mm_size;      /* its size there (UINT64_MAX: it reported the mismatch) */
    size_t prof_slot;      /* profiler record + 1; 0: not recorded (src/engine/prof.h) */
    struct sched_exec *sx; /* schedules: the executor's state (kept for reuse) */
    /* A multi-phase call's own way to stop serving a peer whose call
     * disagrees (the schedule executor's: eng_sched_start sets it), for the
     * engine's checks, which call nothing above them; NULL: none. */
    void (*drop_peer)(coll_req_t *r, uint32_t peer);
    /* The same for the end of the call (coll_fail: failed 1, coll_finish: 0),
     * before the protocol's finish: the schedule executor's zero-copy
     * messages revoke and release what they advertised (docs/protocol.md
     * §17); NULL: nothing to do. */
    void (*on_end)(coll_req_t *r, int failed);
    _Alignas(16) unsigned char priv[COLL_PRIV_BYTES];
};

/* The caller's handle of a nonblocking call: it outlives the engine's
 * request slot, which the window may reuse once the call completed. */
struct arcoll_request {
    uint64_t magic;
    struct arcoll_request *next; /* live handles of the process */
    struct arcoll_context *ctx;
    struct arcoll_team *team;
    coll_req_t *r;         /* NULL once the call completed, or while it is queued */
    struct eng_pend *pend; /* queued, not started yet (the window was full) */
    int status;            /* the final status, once r and pend are NULL */
};

#endif
