/* Teams: made over the context's channel (arcoll_team_create) or over a
 * parent team's (arcoll_team_split), checked, freed. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "api/split.h"
#include "dispatch/coll.h"
#include "mem/heap.h"
#include "util/log.h"

static uint64_t core_ranks_hash(const int *ranks, int n)
{
    uint64_t h = 1469598103934665603ULL;

    for (int i = 0; i < n; i++)
        h = (h ^ (uint64_t)(unsigned)ranks[i]) * 1099511628211ULL;
    return h ^ (uint64_t)n;
}

/* What every rank tells the others when a team is created. */
typedef struct core_team_rec {
    uint32_t member;
    uint32_t nranks;
    uint64_t hash;
    chan_rkey_t rkey;
    int64_t pid;      /* for the node segment's name and liveness checks */
    uint64_t seg_key; /* master: the node segment's key (chan/smp/smp_seg.h) */
    int32_t socket;   /* boot_topo_t.socket: sh_co's socket map (engine/hier.h) */
    uint64_t heap;    /* the node heap's region id, 0 if not shared (hier_t.heap) */
    /* The region's layout (wire_layout_t): settings read at creation, which must
     * agree, or a rank would poll where another writes payload. */
    uint64_t bounce;
    uint32_t lanes, banks, pipe_lanes, pad;
} core_team_rec_t;

void core_team_free(struct arcoll_team *t)
{
    chan_t *c;

    if (t == NULL)
        return;
    c = t->ctx->chan;
    for (unsigned i = 0; i < ARCOLL_MAX_INFLIGHT; i++)
        eng_sched_release(&t->reqs[i]);
    if (t->hier != NULL) { /* the masters' team, made here with the hier */
        core_team_free(t->hier->xteam);
        t->hier->xteam = NULL;
    }
    hier_free(t);
    eng_state_free_all(t);
    for (uint32_t j = 0; t->peer_region != NULL && j < t->size; j++)
        if (j != t->rank && t->peer_region[j].rkey.kind != 0)
            c->ops->rmem_release(c, &t->peer_region[j]);
    if (t->region.addr != NULL)
        c->ops->mem_free(c, &t->region);
    free(t->peer_mem);
    free(t->peer_region);
    free(t->ranks);
    free(t);
}

static int core_team_validate(struct arcoll_context *ctx, const int *ranks, int n, int *me)
{
    int size = ctx->boot->size, rc = ARCOLL_OK;
    unsigned char *seen;

    *me = -1;
    if (n < 0 || n > size || (n > 0 && ranks == NULL)) {
        log_err("arcoll_team_create: %d ranks (context has %d) with list %p", n, size,
                (const void *)ranks);
        return ARCOLL_ERR_INVALID;
    }
    /* One pass with a mark per context rank: pairwise checks were O(n^2)
     * per rank, seconds at thousands of ranks in the simulator. */
    seen = calloc((size_t)size + 1, 1);
    if (seen == NULL) {
        log_err("arcoll_team_create: out of memory");
        return ARCOLL_ERR_NOMEM;
    }
    for (int i = 0; i < n && rc == ARCOLL_OK; i++) {
        if (ranks[i] < 0 || ranks[i] >= size) {
            log_err("arcoll_team_create: rank %d out of range [0,%d)", ranks[i], size);
            rc = ARCOLL_ERR_INVALID;
        } else if (seen[ranks[i]]++) {
            log_err("arcoll_team_create: rank %d listed twice", ranks[i]);
            rc = ARCOLL_ERR_INVALID;
        } else if (ranks[i] == ctx->boot->rank) {
            *me = i;
        }
    }
    free(seen);
    if (rc == ARCOLL_OK && n > 0 && *me < 0) {
        log_err("arcoll_team_create: the calling rank %d is not in its own member list",
                ctx->boot->rank);
        rc = ARCOLL_ERR_INVALID;
    }
    return rc;
}

/* Local half of team creation: the team object and its region. */
static int core_team_alloc(struct arcoll_context *ctx, const int *ranks, int n, int me, int grouped,
                           struct arcoll_team **out)
{
    chan_t *c = ctx->chan;
    struct arcoll_team *t;
    size_t bounce;
    int rc;

    t = calloc(1, sizeof(*t));
    if (t == NULL) {
        log_err("arcoll_team_create: out of memory");
        return ARCOLL_ERR_NOMEM;
    }
    t->magic = CORE_TEAM_MAGIC;
    t->ctx = ctx;
    t->rank = (uint32_t)me;
    t->size = (uint32_t)n;
    t->ranks = malloc(sizeof(int) * (size_t)n);
    t->peer_region = calloc((size_t)n, sizeof(*t->peer_region));
    t->window = (unsigned)ctx->cfg.window;
    t->peer_mem = calloc((size_t)n * t->window, sizeof(*t->peer_mem));
    if (t->ranks == NULL || t->peer_region == NULL || t->peer_mem == NULL) {
        log_err("arcoll_team_create: out of memory");
        rc = ARCOLL_ERR_NOMEM;
        goto err_team;
    }
    memcpy(t->ranks, ranks, sizeof(int) * (size_t)n);
    bounce = ctx->cfg.bounce_size != CORE_CONFIG_AUTO_SIZE ? ctx->cfg.bounce_size
             : c->bounce != 0                              ? c->bounce
                                                           : CHAN_BOUNCE_HOST;
    if (wire_layout_init(&t->layout, t->size, bounce, 2 * t->window, 1u << ctx->cfg.lanes_log2,
                         ctx->cfg.pipe_window) != 0) {
        log_err("arcoll_team_create: region for %d ranks with %zu-byte bounce slots is too large",
                n, bounce);
        rc = ARCOLL_ERR_INVALID;
        goto err_team;
    }
    rc = c->ops->mem_alloc(c, t->layout.total, &t->region);
    if (rc != ARCOLL_OK)
        goto err_team;
    *chan_mem_u64(&t->region, 0) = WIRE_MAGIC;
    if (grouped) {
        rc = hier_plan(t);
        if (rc != ARCOLL_OK)
            goto err_team;
    }
    log_debug("team of %d ranks: region %llu bytes (bounce %llu per slot)", n,
              (unsigned long long)t->layout.total, (unsigned long long)t->layout.bounce);
    *out = t;
    return ARCOLL_OK;

err_team:
    core_team_free(t); /* frees whatever of it exists */
    return rc;
}

/* This rank's record for the new team t, for the others to check and import
 * (all zero when it is not a member or its setup failed). */
static void core_team_rec_fill(const struct arcoll_team *t, const int *ranks, int n,
                               core_team_rec_t *mine)
{
    memset(mine, 0, sizeof(*mine));
    if (t == NULL)
        return;
    mine->member = 1;
    mine->nranks = (uint32_t)n;
    mine->hash = core_ranks_hash(ranks, n);
    mine->rkey = t->region.rkey;
    mine->pid = (int64_t)getpid();
    mine->seg_key = t->hseg != NULL ? t->hseg->seg.key : 0;
    mine->socket = t->ctx->topo.socket;
    mine->heap = heap_node_region();
    mine->bounce = t->layout.bounce;
    mine->lanes = t->layout.lanes;
    mine->pipe_lanes = t->layout.pipe_lanes;
    mine->banks = t->layout.banks;
}

/* The members' records (member j's is recs[at ? at[j] : j]): each must have
 * joined the same team; import their regions, then attach the node grouping.
 * what names the entry point in messages. */
static int core_team_join(struct arcoll_team *t, const core_team_rec_t *mine,
                          const core_team_rec_t *recs, const int *at, const char *what)
{
    chan_t *c = t->ctx->chan;
    long *pids = NULL;
    uint64_t *keys = NULL;
    int32_t *sockets = NULL;
    int rc = ARCOLL_OK, heap = 1;

    for (uint32_t j = 0; rc == ARCOLL_OK && j < t->size; j++) {
        const core_team_rec_t *rec = &recs[at != NULL ? (uint32_t)at[j] : j];
        if (!rec->member || rec->nranks != t->size || rec->hash != mine->hash) {
            log_err("%s: rank %d did not join the same team (member list differs or its setup "
                    "failed)",
                    what, t->ranks[j]);
            rc = ARCOLL_ERR_INVALID;
        } else if (rec->bounce != mine->bounce || rec->lanes != mine->lanes ||
                   rec->banks != mine->banks || rec->pipe_lanes != mine->pipe_lanes) {
            log_err("%s: rank %d cuts the team's region differently (%llu-byte slots, %u lanes, "
                    "%u banks, %u pipe lanes; this rank %llu, %u, %u, %u): ARCOLL_BOUNCE_SIZE, "
                    "ARCOLL_LANES, ARCOLL_WINDOW and ARCOLL_PIPE_WINDOW must agree when a team is "
                    "created",
                    what, t->ranks[j], (unsigned long long)rec->bounce, rec->lanes, rec->banks,
                    rec->pipe_lanes, (unsigned long long)mine->bounce, mine->lanes, mine->banks,
                    mine->pipe_lanes);
            rc = ARCOLL_ERR_CONFIG;
        } else if (j != t->rank) {
            rc = c->ops->rmem_import(c, t->ranks[j], &rec->rkey, &t->peer_region[j]);
        }
    }
    if (rc != ARCOLL_OK || t->hier == NULL)
        return rc;
    pids = malloc(sizeof(*pids) * t->size);
    keys = malloc(sizeof(*keys) * t->size);
    sockets = malloc(sizeof(*sockets) * t->size);
    if (pids == NULL || keys == NULL || sockets == NULL) {
        log_err("%s: out of memory", what);
        rc = ARCOLL_ERR_NOMEM;
        goto out;
    }
    for (uint32_t j = 0; j < t->size; j++) {
        const core_team_rec_t *rec = &recs[at != NULL ? (uint32_t)at[j] : j];
        pids[j] = (long)rec->pid;
        keys[j] = rec->seg_key;
        sockets[j] = rec->socket;
        heap &= rec->heap != 0 && rec->heap == mine->heap;
    }
    rc = hier_attach(t, pids, keys, sockets, heap);
out:
    free(sockets);
    free(keys);
    free(pids);
    return rc;
}

/* Collective over the whole context. Every rank reaches the allgather and
 * the barrier even when its own arguments are bad, so that one rank's error
 * never leaves the others hanging; the others then see it as "did not join".
 * grouped: plan node segments (hier.h). */
static int core_team_make(struct arcoll_context *ctx, const int *ranks, int n, int grouped,
                          struct arcoll_team **out)
{
    boot_t *b = ctx->boot;
    chan_t *c = ctx->chan;
    struct arcoll_team *t = NULL;
    core_team_rec_t mine, *recs;
    uint32_t id;
    int me, rc, brc;

    *out = NULL;
    recs = malloc(sizeof(*recs) * (size_t)b->size);
    if (recs == NULL) {
        /* Cannot take part: the others will fail in the bootstrap. */
        log_err("arcoll_team_create: out of memory");
        return ARCOLL_ERR_NOMEM;
    }
    rc = core_team_validate(ctx, ranks, n, &me);
    if (rc == ARCOLL_OK && n > 0)
        rc = core_team_alloc(ctx, ranks, n, me, grouped, &t);
    core_team_rec_fill(t, ranks, n, &mine);
    brc = b->allgather(b, &mine, recs, sizeof(mine));
    if (brc != ARCOLL_OK) {
        rc = brc;
        goto err_team;
    }
    /* Every rank counts every creation, members or not: ids agree across ranks. */
    id = ctx->next_team_id++;
    if (rc == ARCOLL_OK && t != NULL)
        rc = core_team_join(t, &mine, recs, t->ranks, "arcoll_team_create");
    /* Everyone has imported: names used to find regions may go (smp unlinks). */
    brc = b->barrier(b);
    if (t != NULL && c->ops->mem_seal != NULL)
        c->ops->mem_seal(c, &t->region);
    if (t != NULL)
        hier_seg_seal(t->hseg);
    if (rc == ARCOLL_OK)
        rc = brc;
    if (rc != ARCOLL_OK)
        goto err_team;
    free(recs);
    if (t != NULL)
        t->id = id;
    *out = t;
    return ARCOLL_OK;

err_team:
    core_team_free(t);
    free(recs);
    return rc;
}

/* A team, then (a second round every rank takes part in, since only members
 * know the team's shape) the cross teams: the ranks with one local index on
 * every node (hier.h; local index 0 is the masters' team of the node-master
 * algorithms, every index is a step of the non-leader ones). */
int core_team_create(struct arcoll_context *ctx, const int *ranks, int n, struct arcoll_team **out)
{
    struct arcoll_team *t = NULL;
    int *masters = NULL, nm = 0, rc, mrc;

    *out = NULL;
    rc = core_team_make(ctx, ranks, n, 1, &t);
    if (t != NULL) {
        masters = malloc(sizeof(*masters) * t->size);
        if (masters == NULL) {
            log_err("arcoll_team_create: out of memory");
            rc = ARCOLL_ERR_NOMEM;
        } else {
            hier_xteam_ranks(t, masters, &nm);
        }
    }
    mrc = core_team_make(ctx, masters, rc == ARCOLL_OK ? nm : 0, 0,
                         t != NULL && t->hier != NULL ? &t->hier->xteam
                                                      : &(struct arcoll_team *){NULL});
    free(masters);
    if (rc == ARCOLL_OK)
        rc = mrc;
    if (rc != ARCOLL_OK) {
        core_team_free(t);
        return rc;
    }
    if (t->hier != NULL)
        t->hier->xready = 1;
    *out = t;
    return ARCOLL_OK;
}

/* ---- teams made over a parent team's channel (arcoll_team_split) ------- */

/* A collective on a team not (yet) in the context's list: no handle checks. */
static int core_team_run(struct arcoll_team *t, coll_args_t *a)
{
    coll_req_t *r;
    int rc;

    a->in_place = 0;
    rc = coll_start_args(t, a, NULL, &r);
    return rc == ARCOLL_INPROGRESS ? coll_wait(r) : rc;
}

/* The library's one-word agreement over t: *out = the largest mine. An
 * allreduce, so it doubles as a barrier; internal, so it runs auto's pick
 * whatever ARCOLL_ALLREDUCE_ALG forces (docs/protocol.md §9). */
static int core_team_max(struct arcoll_team *t, int32_t mine, int32_t *out)
{
    coll_args_t a = {.type = COLL_ALLREDUCE,
                     .sbuf = (const char *)&mine,
                     .rbuf = (char *)out,
                     .count = 1,
                     .dtype = ARCOLL_INT32,
                     .op = ARCOLL_MAX,
                     .internal = 1};

    return core_team_run(t, &a);
}

/* Collective over parent: every member of parent calls it, with the parent
 * ranks of the team it joins (members[0..n), its own index me) or n = 0.
 * Records go to the team's members by an alltoallv on parent, and the
 * outcome is agreed by an allreduce on parent, so no PMIx call is made and a
 * dead or late member ends in the parent's timeout like any collective. */
static int core_team_make_over(struct arcoll_team *parent, const uint32_t *members, uint32_t n,
                               uint32_t me, int grouped, uint32_t id, struct arcoll_team **out)
{
    struct arcoll_context *ctx = parent->ctx;
    chan_t *c = ctx->chan;
    uint32_t np = parent->size;
    struct arcoll_team *t = NULL;
    core_team_rec_t mine, *recs = NULL;
    size_t *cnt = NULL;
    int *ranks = NULL, rc = ARCOLL_OK, brc;
    int32_t bad, anybad;

    *out = NULL;
    cnt = calloc((size_t)np * 4, sizeof(*cnt));
    recs = calloc(n ? n : 1, sizeof(*recs));
    ranks = calloc(n ? n : 1, sizeof(*ranks));
    if (cnt == NULL || recs == NULL || ranks == NULL) {
        log_err("arcoll_team_split: out of memory");
        rc = ARCOLL_ERR_NOMEM;
    }
    for (uint32_t j = 0; rc == ARCOLL_OK && j < n; j++)
        ranks[j] = parent->ranks[members[j]];
    if (rc == ARCOLL_OK && n > 0)
        rc = core_team_alloc(ctx, ranks, (int)n, (int)me, grouped, &t);
    core_team_rec_fill(t, ranks, (int)n, &mine);
    /* Every parent member takes part, with nothing to send if it failed. */
    if (cnt != NULL && recs != NULL) {
        size_t *sc = cnt, *sd = cnt + np, *rcn = cnt + 2 * np, *rd = cnt + 3 * np;
        for (uint32_t j = 0; t != NULL && j < n; j++) {
            sc[members[j]] = sizeof(mine);
            rcn[members[j]] = sizeof(mine);
            rd[members[j]] = (size_t)j * sizeof(mine);
        }
        /* The library's own exchange, like the agreements (internal): auto's
         * algorithm whatever the user forces, and nothing written late. */
        coll_args_t a = {.type = COLL_ALLTOALLV,
                         .sbuf = (const char *)&mine,
                         .rbuf = (char *)recs,
                         .scounts = sc,
                         .sdispls = sd,
                         .rcounts = rcn,
                         .rdispls = rd,
                         .internal = 1};
        brc = core_team_run(parent, &a);
        if (rc == ARCOLL_OK)
            rc = brc;
    }
    if (rc == ARCOLL_OK && t != NULL)
        rc = core_team_join(t, &mine, recs, NULL, "arcoll_team_split");
    /* Everyone has imported (names may go), and everyone learns of a failure. */
    bad = rc != ARCOLL_OK;
    brc = core_team_max(parent, bad, &anybad);
    if (t != NULL && c->ops->mem_seal != NULL)
        c->ops->mem_seal(c, &t->region);
    if (t != NULL)
        hier_seg_seal(t->hseg);
    if (rc == ARCOLL_OK && brc != ARCOLL_OK)
        rc = brc;
    if (rc == ARCOLL_OK && anybad) {
        log_err("arcoll_team_split: another member failed to set up its part of a new team");
        rc = ARCOLL_ERR_INVALID;
    }
    if (rc != ARCOLL_OK) {
        core_team_free(t);
        t = NULL;
    } else if (t != NULL) {
        t->id = id;
    }
    free(ranks);
    free(recs);
    free(cnt);
    *out = t;
    return rc;
}

/* A new team made over parent, then its cross teams over the new team. */
static int core_team_create_over(struct arcoll_team *parent, const uint32_t *members, uint32_t n,
                                 uint32_t me, uint32_t id, struct arcoll_team **out)
{
    struct arcoll_team *t = NULL;
    uint32_t *xm = NULL, nx = 0, xme = 0;
    int *xranks = NULL, nxr = 0, rc, xrc;

    rc = core_team_make_over(parent, members, n, me, 1, id, &t);
    if (rc != ARCOLL_OK)
        return rc;
    if (t == NULL)
        return ARCOLL_OK;
    xranks = malloc(sizeof(*xranks) * t->size);
    xm = calloc(t->size, sizeof(*xm));
    if (xranks == NULL || xm == NULL) {
        log_err("arcoll_team_split: out of memory");
        rc = ARCOLL_ERR_NOMEM; /* the others fail in the exchange below */
    } else {
        hier_xteam_ranks(t, xranks, &nxr);
        /* context ranks -> ranks of t */
        for (int i = 0; i < nxr; i++)
            for (uint32_t j = 0; j < t->size; j++)
                if (t->ranks[j] == xranks[i]) {
                    if (j == t->rank)
                        xme = nx;
                    xm[nx++] = j;
                }
    }
    xrc = core_team_make_over(t, xm, rc == ARCOLL_OK ? nx : 0, xme, 0, id,
                              t->hier != NULL ? &t->hier->xteam : &(struct arcoll_team *){NULL});
    free(xm);
    free(xranks);
    if (rc == ARCOLL_OK)
        rc = xrc;
    if (rc != ARCOLL_OK) {
        core_team_free(t);
        return rc;
    }
    if (t->hier != NULL)
        t->hier->xready = 1;
    *out = t;
    return ARCOLL_OK;
}

static int core_split_xchg(void *arg, uint32_t to, const void *sbuf, size_t slen, uint32_t from,
                           void *rbuf, size_t rlen)
{
    return eng_sendrecv(arg, to, sbuf, slen, from, rbuf, rlen);
}

/* The agreed outcome over parent of a local check: 0 if every rank passed,
 * else 1 + the highest failing parent rank. Doubles as a barrier. */
static int core_team_agree(struct arcoll_team *parent, int ok, int32_t *worst)
{
    return core_team_max(parent, ok ? 0 : (int32_t)parent->rank + 1, worst);
}

/* Collective over parent: split it by (color, key) and make the new team
 * over parent's channel (docs/protocol.md §13). want/nwant (nwant < 0: no
 * check): the member list the caller expects; every member of parent then
 * checks its split result against it, and all fail alike if one differs. */
static int core_team_split(struct arcoll_team *parent, int color, int key, const int *want,
                           int nwant, const char *what, struct arcoll_team **out)
{
    struct arcoll_team *t = NULL;
    split_entry_t mine;
    uint32_t *members = NULL, nm = 0, me = 0, id;
    int32_t worst = 0;
    int rc, same;

    *out = NULL;
    /* Calls in flight here may be done elsewhere already: finish them (every
     * rank does), never refuse on one rank only. */
    rc = coll_team_drain(parent);
    if (rc != ARCOLL_OK)
        return rc;
    mine.color = color;
    mine.key = key;
    mine.rank = parent->rank;
    rc = split_run(parent->size, parent->rank, &mine, core_split_xchg, parent, &members, &nm, &me);
    if (rc != ARCOLL_OK)
        return rc;
    if (nwant >= 0) {
        same = (uint32_t)nwant == nm;
        for (uint32_t j = 0; same && j < nm; j++)
            same = parent->ranks[members[j]] == want[j];
        rc = core_team_agree(parent, same, &worst);
        if (rc == ARCOLL_OK && worst > 0) {
            log_err("%s: rank %d passed invalid arguments or a member list other than its "
                    "members'",
                    what, parent->ranks[worst - 1]);
            rc = ARCOLL_ERR_INVALID;
        }
        if (rc != ARCOLL_OK)
            goto out;
    }
    /* Equal on every member of a new team: the parent's id and its count of splits. */
    id = (uint32_t)(parent->id * 2654435761u) ^ (uint32_t)++parent->nsplits ^ 0x80000000u;
    rc = core_team_create_over(parent, members, nm, me, id, &t);
    if (rc == ARCOLL_OK && t != NULL) {
        /* The world team stays first. */
        t->next = parent->ctx->teams->next;
        parent->ctx->teams->next = t;
    }
    *out = t;
out:
    free(members);
    return rc;
}

/* The closing barrier of destroy and finalize, over the world team's
 * channel: after it no member writes into a region of ours again. A failed
 * world team cannot run it (its peers are lost or out of step): then each
 * rank releases locally. */
int core_ctx_barrier(struct arcoll_context *ctx)
{
    int32_t worst;
    int rc;

    if (ctx->teams->failed)
        return ARCOLL_OK;
    rc = coll_team_drain(ctx->teams);
    return rc != ARCOLL_OK ? rc : core_team_agree(ctx->teams, 1, &worst);
}

int arcoll_team_split(arcoll_team_t team, int color, int key, arcoll_team_t *newteam)
{
    int rc = core_team_check(team, "arcoll_team_split");

    if (rc != ARCOLL_OK)
        return rc;
    if (newteam == NULL || color < ARCOLL_UNDEFINED) {
        log_err("arcoll_team_split: %s", newteam == NULL
                                             ? "newteam pointer is NULL"
                                             : "color must be >= 0 or ARCOLL_UNDEFINED");
        return ARCOLL_ERR_INVALID;
    }
    *newteam = NULL;
    return core_team_split(team, color, key, NULL, -1, "arcoll_team_split", newteam);
}

arcoll_team_t arcoll_team_world(arcoll_context_t ctx)
{
    return core_ctx_check(ctx, "arcoll_team_world") == ARCOLL_OK ? ctx->teams : NULL;
}

/* A split of the world team (color: the first member; key: the position in
 * the list), then a check that every member passed the list it got: no PMIx
 * call, and a lost rank ends in ARCOLL_TIMEOUT_MS like any collective. */
int arcoll_team_create(arcoll_context_t ctx, const int *ranks, int nranks, arcoll_team_t *team)
{
    int me, ok, rc = core_ctx_check(ctx, "arcoll_team_create");

    if (rc != ARCOLL_OK)
        return rc;
    if (team == NULL) {
        log_err("arcoll_team_create: team pointer is NULL");
        return ARCOLL_ERR_INVALID; /* before any communication: all ranks see the same call */
    }
    *team = NULL;
    /* A rank with bad arguments still takes part, and the check fails all. */
    ok = core_team_validate(ctx, ranks, nranks, &me) == ARCOLL_OK;
    return core_team_split(ctx->teams, ok && nranks > 0 ? ranks[0] : ARCOLL_UNDEFINED, me,
                           ok ? ranks : NULL, ok ? nranks : INT_MAX, "arcoll_team_create", team);
}

int arcoll_team_destroy(arcoll_context_t ctx, arcoll_team_t team)
{
    int rc = core_ctx_check(ctx, "arcoll_team_destroy");

    if (rc != ARCOLL_OK)
        return rc;
    if (team != NULL) {
        rc = core_team_check(team, "arcoll_team_destroy");
        if (rc != ARCOLL_OK)
            return rc;
        if (team == ctx->teams || team->ctx != ctx || coll_team_busy(team)) {
            log_err("arcoll_team_destroy: %s", team == ctx->teams ? "the world team is "
                                                                    "freed by arcoll_finalize"
                                               : coll_team_busy(team)
                                                   ? "a collective is in "
                                                     "progress"
                                                   : "team belongs to another context");
            return ARCOLL_ERR_STATE;
        }
    }
    /* No member may free its region while another still writes into it. */
    rc = core_ctx_barrier(ctx);
    if (team != NULL) {
        for (struct arcoll_team **pp = &ctx->teams; *pp != NULL; pp = &(*pp)->next) {
            if (*pp == team) {
                *pp = team->next;
                break;
            }
        }
        core_team_free(team);
    }
    return rc;
}

int arcoll_team_free(arcoll_team_t team)
{
    struct arcoll_context *ctx;
    int32_t any = 0;
    int rc = core_team_check(team, "arcoll_team_free");

    if (rc != ARCOLL_OK)
        return rc;
    ctx = team->ctx;
    if (team == ctx->teams) {
        log_err("arcoll_team_free: the world team is freed by arcoll_finalize");
        return ARCOLL_ERR_STATE;
    }
    coll_team_drain(team); /* a failed call fails the team: freed locally below */
    /* The barrier: once every member started this full exchange, none writes into
     * our region again (docs/protocol.md §13). A failed team cannot run it: its
     * peers are lost or out of step, so we release locally. */
    if (!team->failed)
        rc = core_team_max(team, 0, &any);
    for (struct arcoll_team **pp = &ctx->teams; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == team) {
            *pp = team->next;
            break;
        }
    }
    core_team_free(team);
    return rc;
}

int arcoll_team_rank(arcoll_team_t team)
{
    return core_team_check(team, "arcoll_team_rank") == ARCOLL_OK ? (int)team->rank : -1;
}

int arcoll_team_size(arcoll_team_t team)
{
    return core_team_check(team, "arcoll_team_size") == ARCOLL_OK ? (int)team->size : -1;
}

int arcoll_team_host_serves(arcoll_team_t team, arcoll_coll_t coll, size_t bytes)
{
    core_tune_shape_t shape;

    if ((coll != ARCOLL_COLL_ALLTOALL && coll != ARCOLL_COLL_ALLGATHER &&
         coll != ARCOLL_COLL_ALLGATHERV && coll != ARCOLL_COLL_REDUCE_SCATTER &&
         coll != ARCOLL_COLL_ALLREDUCE) ||
        core_team_check(team, "arcoll_team_host_serves") != ARCOLL_OK)
        return 0;
    hier_team_shape(team, &shape);
    return core_tune_host(&team->ctx->cfg.tune, (int)coll, bytes, &shape);
}

_Static_assert((int)ARCOLL_COLL_ALLTOALL == CORE_TUNE_ALLTOALL &&
                   (int)ARCOLL_COLL_ALLGATHER == CORE_TUNE_ALLGATHER &&
                   (int)ARCOLL_COLL_ALLGATHERV == CORE_TUNE_ALLGATHERV &&
                   (int)ARCOLL_COLL_REDUCE_SCATTER == CORE_TUNE_REDUCE_SCATTER &&
                   (int)ARCOLL_COLL_ALLREDUCE == CORE_TUNE_ALLREDUCE,
               "arcoll_coll_t follows the tuning table's collectives");
