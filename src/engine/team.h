/* Context and team: the objects behind arcoll.h. The per-call state and the
 * exchange primitives are the engine's (engine/engine.h); which algorithm runs
 * a call is the dispatcher's (dispatch/coll.h). */
#ifndef ARCOLL_ENGINE_TEAM_H
#define ARCOLL_ENGINE_TEAM_H

#include <stdint.h>

#include "arcoll.h"
#include "bootstrap/boot.h"
#include "chan/chan.h"
#include "config/config.h"
#include "engine/hier.h"
#include "engine/hier_seg.h"
#include "engine/req.h"
#include "engine/wire.h"
#include "engine/zmem.h"
#include "util/util.h"

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
    coll_peer_t *peer_mem;    /* [window * size]: the requests' peers */
    uint64_t seq;             /* epoch of the last collective started */
    int failed;               /* a collective failed: epochs may disagree */
    int fail_told;            /* its failure word went to the peers (eng_fail_tell) */
    /* Calls in flight: epoch e uses reqs[e % window] (ARCOLL_WINDOW, at most
     * ARCOLL_MAX_INFLIGHT; layout.banks = 2 x window). */
    coll_req_t reqs[ARCOLL_MAX_INFLIGHT];
    unsigned window;
    unsigned nactive; /* of reqs */
    /* Nonblocking calls accepted while their window slot (or the node
     * segment of a serial family) was still busy: started in order, as slots
     * free up, by any progress of the team, so that a start never waits for
     * a peer (MPI's rule; docs/protocol.md §5). Later calls queue behind
     * them: epochs follow the order of the calls. */
    struct eng_pend *pend_head, *pend_tail;
    unsigned npend;
    uint32_t nsplits; /* arcoll_team_split calls on this team (team ids) */
    /* The last call was a partial exchange (docs/protocol.md §5): the next
     * schedule waits for its receivers' advertisements. */
    int after_partial;
    /* Node grouping (read-only once the team is made) and node segment: both
     * NULL if no node holds two members (or ARCOLL_SHM_MAX is 0), else both set. */
    hier_t *hier;
    hier_seg_t *hseg;
    int hier_noticed;         /* the one-line fallback notice was given */
    struct eng_state *states; /* the families' per-team state (eng_state_get) */
    /* The last tuning-table answers (a table scan each), reused while the
     * collective, size and settings generation are the same (eng_memo; the
     * team's shape is fixed): the path (eng_zcopy_pick) and auto's algorithm
     * (dispatch/coll.c). */
    struct eng_memo {
        unsigned gen;
        int type, val, valid;
        size_t len;
    } path_memo, alg_memo;
};

struct arcoll_context {
    uint64_t magic;
    struct arcoll_context *next;
    boot_t *boot;
    chan_t *chan;
    core_config_t cfg;
    boot_topo_t topo;
    int oversubscribed;         /* this host has more local ranks than processing units */
    int job_oversubscribed;     /* some host of the job has: agreed at init, for the tune table */
    arcoll_counters_t counters; /* arcoll_context_counters */
    uint32_t next_team_id;
    struct arcoll_team *teams; /* world first */
    regcache_t *regcache;      /* registrations of user buffers (zcopy) */
    struct arcoll_mem *user_mems;
    heapmr_t *heapmr;   /* the heap MR, made at the first zero-copy heap buffer */
    int heapmr_odp;     /* it is one on-demand-paged MR over the slot */
    uint64_t call_regs; /* per-call registrations of user buffers (zmem_get) */
    struct prof *prof;  /* PAP profiler, when any rank sets ARCOLL_PROFILE */
    /* The embedding's progress (arcoll_context_progress_hook): called while
     * arcoll waits, so that the host library's own operations, which a peer
     * may need before it can reach ours, keep moving. */
    void (*hook)(void *arg);
    void *hook_arg;
    unsigned hook_polls;
    int in_hook; /* no re-entry from the hook itself */
    char cfgbuf[CORE_CONFIG_PATH];
};

/* Live contexts (newest first) and the calls in flight in all of them: a
 * rank waiting for one call must progress the others too, on every team and
 * context, since a peer may be blocked in any of them (MPI's progress rule).
 * The engine's progress registry (eng_call.c); context.c links contexts. */
extern struct arcoll_context *core_live;
extern unsigned core_nactive;

#endif
