/* Context, team and collective request: the objects behind arcoll.h. */
#ifndef ARCOLL_CORE_CORE_H
#define ARCOLL_CORE_CORE_H

#include <stdint.h>

#include "arcoll.h"
#include "bootstrap/boot.h"
#include "core/chan.h"
#include "core/config.h"
#include "core/hier.h"
#include "core/wire.h"
#include "zcopy/zmem.h"

typedef enum { COLL_ALLTOALL, COLL_ALLGATHER } coll_type_t;

typedef struct coll_req coll_req_t;

/* How bytes reach a peer: bounce slots (copy) or the final buffer (zcopy).
 * src/pap/bounce.c and src/zcopy/zcopy.c. */
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
} coll_proto_t;

/* In which order to write to peers: src/pap/alg_direct.c, alg_pap.c. */
typedef struct coll_alg {
    const char *name;
    /* Start/continue writing; returns < 0 on error. */
    int (*tx_progress)(coll_req_t *r);
} coll_alg_t;

extern const coll_proto_t coll_proto_bounce;
extern const coll_proto_t coll_proto_zcopy;
extern const coll_alg_t coll_alg_direct;
extern const coll_alg_t coll_alg_pap;
extern const coll_alg_t coll_alg_shm_direct;
extern const coll_alg_t coll_alg_pap_shm;
extern const coll_alg_t coll_alg_leader;
extern const coll_alg_t coll_alg_sa;
extern const coll_alg_t coll_alg_sa_direct;
extern const coll_alg_t coll_alg_rd;
extern const coll_proto_t coll_proto_node;

enum { COLL_TX_IDLE = 0, COLL_TX_ACTIVE, COLL_TX_DONE };

typedef struct coll_peer {
    uint8_t tx_state;
    uint8_t rx_done;
    uint32_t tx_frag; /* next fragment to send */
    uint32_t rx_frag; /* next fragment expected */
} coll_peer_t;

struct coll_req {
    struct arcoll_team *team;
    const coll_proto_t *proto;
    const coll_alg_t *alg;
    coll_type_t type;
    int is_direct;
    const char *sbuf;
    char *rbuf;
    size_t bytes;
    uint64_t epoch;
    unsigned bank;
    uint32_t nfrags;
    uint32_t tx_left, rx_left;
    uint32_t step; /* direct: next step */
    uint32_t polls;
    uint64_t start_ns, deadline_ns, next_check_ns;
    zmem_ref_t rreg; /* zcopy: registered receive buffer */
    zmem_ref_t sreg; /* zcopy: registered send buffer */
    int rreg_valid, sreg_valid;
    int zc_bounce; /* zcopy: our buffer is unregistered, peers use our bounce slots */
    int active;
    int status;
    int deferred;     /* error to report once every peer has been served */
    size_t prof_slot; /* profiler record + 1; 0: not recorded (src/core/profile.h) */
    /* Shared-memory aware algorithms (src/pap/alg_shm.c) */
    int hier;          /* 0: flat; COLL_HIER_DIRECT or COLL_HIER_PAP */
    uint32_t h_phase;  /* master: COLL_PH_* */
    uint32_t h_left;   /* blocks still to copy out */
    coll_req_t *inner; /* master: phase 2 among the masters */
};

/* coll_req.hier: which hierarchical algorithm drives the call. */
enum { COLL_HIER_DIRECT = 1, COLL_HIER_PAP, COLL_HIER_SA, COLL_HIER_SA_DIRECT, COLL_HIER_RD };
enum { COLL_PH_LOCAL = 0, COLL_PH_NET, COLL_PH_DONE };

/* coll_start_ex flags for a step of another collective: leave the own block
 * alone (the outer call reads it where it is), do not profile. */
#define COLL_F_NOSELF 1u
#define COLL_F_NOPROF 2u
#define COLL_F_INNER  (COLL_F_NOSELF | COLL_F_NOPROF)

struct arcoll_team {
    uint64_t magic;
    struct arcoll_context *ctx;
    struct arcoll_team *next;
    uint32_t id; /* creation order in the context: equal on every member (and shared by
                  * the teams of one split) */
    uint32_t rank, size;
    int *ranks; /* team rank -> context rank */
    wire_layout_t layout;
    chan_mem_t region;
    chan_rmem_t *peer_region; /* [size], own entry unused */
    coll_peer_t *peers;       /* [size], reset per collective */
    uint64_t seq;             /* epoch of the last collective started */
    int failed;               /* a collective failed: epochs may disagree */
    coll_req_t req;           /* the one collective in flight */
    hier_t *hier;             /* node grouping, NULL if no node holds two members */
    int hier_noticed;         /* the one-line fallback notice was given */
};

struct arcoll_context {
    uint64_t magic;
    struct arcoll_context *next;
    boot_t *boot;
    chan_t *chan;
    core_config_t cfg;
    boot_topo_t topo;
    int oversubscribed;
    uint32_t next_team_id;
    struct arcoll_team *teams; /* world first */
    regcache_t *regcache;      /* registrations of user buffers (zcopy) */
    struct arcoll_mem *user_mems;
    struct prof *prof; /* PAP profiler, when any rank sets ARCOLL_PROFILE */
    char cfgbuf[CORE_CONFIG_PATH];
};

/* Source of the block for a peer, and where it lands at the peer. */
static inline const char *coll_src(const coll_req_t *r, uint32_t peer)
{
    return r->type == COLL_ALLTOALL ? r->sbuf + (size_t)peer * r->bytes : r->sbuf;
}

static inline int coll_peer_rank(const coll_req_t *r, uint32_t peer)
{
    return r->team->ranks[peer];
}

/* Post our control advertisement (size, optional rkey and the buffer's offset
 * inside the keyed memory) to every peer. */
int coll_advertise(coll_req_t *r, const chan_rkey_t *rkey, uint64_t boff);
/* Read a peer's advertisement for this epoch; 1 if present. */
int coll_ctrl_read(coll_req_t *r, uint32_t peer, wire_ctrl_t *out);
/* The size in a peer's advertisement/slot differs from ours. */
int coll_mismatch(coll_req_t *r, uint32_t peer, uint64_t their_size);

/* Engine (src/core/coll.c). site: the application's call site (profiler), or NULL. */
int coll_start(struct arcoll_team *t, coll_type_t type, const void *sbuf, void *rbuf, size_t bytes,
               const void *site, coll_req_t **out);
/* alg: CORE_ALG_* or -1 for the configured one. */
int coll_start_ex(struct arcoll_team *t, coll_type_t type, const void *sbuf, void *rbuf,
                  size_t bytes, const void *site, unsigned flags, int alg, coll_req_t **out);
/* The algorithm a call of bytes per rank would run, without starting one
 * (arcoll_info): auto through the tuning table into *picked, then coll_alg_pick's
 * fallbacks; *why says why the result differs from *picked (NULL if not). */
int coll_alg_resolve(struct arcoll_team *t, coll_type_t type, size_t bytes, int alg, int *picked,
                     const char **why);
int coll_progress(coll_req_t *r);
/* End a call with rc (< 0): the team is failed from now on. */
int coll_fail(coll_req_t *r, int rc);
/* Finish a call (shared-memory aware algorithms): OK or the deferred error. */
int coll_finish(coll_req_t *r);
/* Shared-memory aware algorithms (src/pap/alg_shm.c). */
int shm_start(coll_req_t *r);
int shm_progress(coll_req_t *r);
/* Non-leader algorithms sa, sa_direct, rd (src/nonleader/alg_nl.c). */
int nl_start(coll_req_t *r);
int nl_progress(coll_req_t *r);
int coll_wait(coll_req_t *r);
/* For algorithms: start/continue writing to one peer; continue every peer
 * whose multi-fragment message is under way. */
int coll_tx(coll_req_t *r, uint32_t peer);
int coll_tx_continue(coll_req_t *r);

uint64_t core_time_ns(void);
/* Is ctx a live context? Logs "what: ..." if not. */
int core_ctx_check(struct arcoll_context *ctx, const char *what);
int core_team_create(struct arcoll_context *ctx, const int *ranks, int n, struct arcoll_team **out);
void core_team_free(struct arcoll_team *t);

#endif
