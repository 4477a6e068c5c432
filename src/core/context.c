/* Contexts and teams: setup ladders and the public entry points. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/coll.h"
#include "core/embed.h"
#include "core/log.h"
#include "core/profile.h"
#include "core/split.h"
#include "core/tune.h"
#include "heap/heap.h"
#include "smp/smp_seg.h"

#define CORE_CTX_MAGIC  0x6172636f6c6c4358ULL
#define CORE_TEAM_MAGIC 0x6172636f6c6c544dULL

/* Live contexts (core_live, the engine's progress registry): handles are
 * checked against that list so that a call after arcoll_finalize is an
 * error, not a use after free. */
int core_ctx_check(arcoll_context_t ctx, const char *what)
{
    for (struct arcoll_context *c = core_live; c != NULL; c = c->next)
        if (c == ctx)
            return ARCOLL_OK;
    if (core_live == NULL)
        log_err("%s: arcoll is not initialized (no live context; was arcoll_finalize "
                "called?)",
                what);
    else
        log_err("%s: invalid or finalized context handle %p", what, (void *)ctx);
    return ARCOLL_ERR_STATE;
}

static int core_team_check(arcoll_team_t team, const char *what)
{
    for (struct arcoll_context *c = core_live; c != NULL; c = c->next)
        for (struct arcoll_team *t = c->teams; t != NULL; t = t->next)
            if (t == team)
                return ARCOLL_OK;
    if (core_live == NULL)
        log_err("%s: arcoll is not initialized (no live context; was arcoll_finalize "
                "called?)",
                what);
    else if (team == NULL)
        log_err("%s: team is NULL", what);
    else
        log_err("%s: invalid or destroyed team handle %p", what, (void *)team);
    return ARCOLL_ERR_STATE;
}

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
    uint64_t seg_key; /* master: the node segment's key (smp/smp_seg.h) */
    int32_t socket;   /* boot_topo_t.socket: sh_co's socket map (core/hier.h) */
    uint64_t heap;    /* the node heap's region id, 0 if not shared (hier_t.heap) */
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
    if (wire_layout_init(&t->layout, t->size, ctx->cfg.bounce_size, 2 * t->window) != 0) {
        log_err("arcoll_team_create: region for %d ranks with %zu-byte bounce slots is too large",
                n, ctx->cfg.bounce_size);
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
    long *pids = NULL;
    uint64_t *keys = NULL;
    int32_t *sockets = NULL;
    uint32_t id;
    int me, rc, brc, heap = 1;

    *out = NULL;
    memset(&mine, 0, sizeof(mine));
    recs = malloc(sizeof(*recs) * (size_t)b->size);
    if (recs == NULL) {
        /* Cannot take part: the others will fail in the bootstrap. */
        log_err("arcoll_team_create: out of memory");
        return ARCOLL_ERR_NOMEM;
    }
    rc = core_team_validate(ctx, ranks, n, &me);
    if (rc == ARCOLL_OK && n > 0)
        rc = core_team_alloc(ctx, ranks, n, me, grouped, &t);
    if (t != NULL) {
        mine.member = 1;
        mine.nranks = (uint32_t)n;
        mine.hash = core_ranks_hash(ranks, n);
        mine.rkey = t->region.rkey;
        mine.pid = (int64_t)getpid();
        mine.seg_key = t->hier != NULL ? t->hier->seg.key : 0;
        mine.socket = ctx->topo.socket;
        mine.heap = heap_node_region();
    }
    brc = b->allgather(b, &mine, recs, sizeof(mine));
    if (brc != ARCOLL_OK) {
        rc = brc;
        goto err_team;
    }
    /* Every rank counts every creation, members or not: ids agree across ranks. */
    id = ctx->next_team_id++;
    for (uint32_t j = 0; rc == ARCOLL_OK && t != NULL && j < t->size; j++) {
        const core_team_rec_t *rec = &recs[t->ranks[j]];
        if (!rec->member || rec->nranks != t->size || rec->hash != mine.hash) {
            log_err("arcoll_team_create: rank %d did not join the same team (member list "
                    "differs or its setup failed)",
                    t->ranks[j]);
            rc = ARCOLL_ERR_INVALID;
        } else if (j != t->rank) {
            rc = c->ops->rmem_import(c, t->ranks[j], &rec->rkey, &t->peer_region[j]);
        }
    }
    if (rc == ARCOLL_OK && t != NULL && t->hier != NULL) {
        pids = malloc(sizeof(*pids) * t->size);
        keys = malloc(sizeof(*keys) * t->size);
        sockets = malloc(sizeof(*sockets) * t->size);
        if (pids == NULL || keys == NULL || sockets == NULL) {
            log_err("arcoll_team_create: out of memory");
            rc = ARCOLL_ERR_NOMEM;
        } else {
            for (uint32_t j = 0; j < t->size; j++) {
                pids[j] = (long)recs[t->ranks[j]].pid;
                keys[j] = recs[t->ranks[j]].seg_key;
                sockets[j] = recs[t->ranks[j]].socket;
                heap &= recs[t->ranks[j]].heap != 0 && recs[t->ranks[j]].heap == mine.heap;
            }
            rc = hier_attach(t, pids, keys, sockets);
            t->hier->heap = heap;
        }
    }
    /* Everyone has imported: names used to find regions may go (smp unlinks). */
    brc = b->barrier(b);
    if (t != NULL && c->ops->mem_seal != NULL)
        c->ops->mem_seal(c, &t->region);
    if (t != NULL)
        hier_seal(t);
    if (rc == ARCOLL_OK)
        rc = brc;
    if (rc != ARCOLL_OK)
        goto err_team;
    free(sockets);
    free(keys);
    free(pids);
    free(recs);
    if (t != NULL)
        t->id = id;
    *out = t;
    return ARCOLL_OK;

err_team:
    core_team_free(t);
    free(sockets);
    free(keys);
    free(pids);
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
    long *pids = NULL;
    uint64_t *keys = NULL;
    int32_t *sockets = NULL;
    int32_t bad, anybad;
    int heap = 1;

    *out = NULL;
    memset(&mine, 0, sizeof(mine));
    cnt = calloc((size_t)np * 4, sizeof(*cnt));
    recs = calloc(n ? n : 1, sizeof(*recs));
    ranks = malloc(sizeof(*ranks) * (n ? n : 1));
    if (cnt == NULL || recs == NULL || ranks == NULL) {
        log_err("arcoll_team_split: out of memory");
        rc = ARCOLL_ERR_NOMEM;
    }
    for (uint32_t j = 0; rc == ARCOLL_OK && j < n; j++)
        ranks[j] = parent->ranks[members[j]];
    if (rc == ARCOLL_OK && n > 0)
        rc = core_team_alloc(ctx, ranks, (int)n, (int)me, grouped, &t);
    if (t != NULL) {
        mine.member = 1;
        mine.nranks = n;
        mine.hash = core_ranks_hash(ranks, (int)n);
        mine.rkey = t->region.rkey;
        mine.pid = (int64_t)getpid();
        mine.seg_key = t->hier != NULL ? t->hier->seg.key : 0;
        mine.socket = ctx->topo.socket;
        mine.heap = heap_node_region();
    }
    /* Every parent member takes part, with nothing to send if it failed. */
    if (cnt != NULL && recs != NULL) {
        size_t *sc = cnt, *sd = cnt + np, *rcn = cnt + 2 * np, *rd = cnt + 3 * np;
        for (uint32_t j = 0; t != NULL && j < n; j++) {
            sc[members[j]] = sizeof(mine);
            rcn[members[j]] = sizeof(mine);
            rd[members[j]] = (size_t)j * sizeof(mine);
        }
        coll_args_t a = {.type = COLL_ALLTOALLV,
                         .sbuf = (const char *)&mine,
                         .rbuf = (char *)recs,
                         .scounts = sc,
                         .sdispls = sd,
                         .rcounts = rcn,
                         .rdispls = rd};
        brc = core_team_run(parent, &a);
        if (rc == ARCOLL_OK)
            rc = brc;
    }
    for (uint32_t j = 0; rc == ARCOLL_OK && t != NULL && j < n; j++) {
        const core_team_rec_t *rec = &recs[j];
        if (!rec->member || rec->nranks != n || rec->hash != mine.hash) {
            log_err("arcoll_team_split: rank %d did not join the same team", ranks[j]);
            rc = ARCOLL_ERR_INVALID;
        } else if (j != me) {
            rc = c->ops->rmem_import(c, ranks[j], &rec->rkey, &t->peer_region[j]);
        }
    }
    if (rc == ARCOLL_OK && t != NULL && t->hier != NULL) {
        pids = malloc(sizeof(*pids) * n);
        keys = malloc(sizeof(*keys) * n);
        sockets = malloc(sizeof(*sockets) * n);
        if (pids == NULL || keys == NULL || sockets == NULL) {
            log_err("arcoll_team_split: out of memory");
            rc = ARCOLL_ERR_NOMEM;
        } else {
            for (uint32_t j = 0; j < n; j++) {
                pids[j] = (long)recs[j].pid;
                keys[j] = recs[j].seg_key;
                sockets[j] = recs[j].socket;
                heap &= recs[j].heap != 0 && recs[j].heap == mine.heap;
            }
            rc = hier_attach(t, pids, keys, sockets);
            t->hier->heap = heap;
        }
    }
    /* Everyone has imported (names may go), and everyone learns of a failure. */
    bad = rc != ARCOLL_OK;
    brc = core_team_max(parent, bad, &anybad);
    if (t != NULL && c->ops->mem_seal != NULL)
        c->ops->mem_seal(c, &t->region);
    if (t != NULL)
        hier_seal(t);
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
    free(sockets);
    free(keys);
    free(pids);
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
static int core_ctx_barrier(struct arcoll_context *ctx)
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

static void core_ureqs_drop(struct arcoll_context *ctx);

static void core_ctx_unlink(struct arcoll_context *ctx)
{
    for (struct arcoll_context **pp = &core_live; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == ctx) {
            *pp = ctx->next;
            return;
        }
    }
}

int arcoll_init(const arcoll_oob_t *oob, arcoll_context_t *out)
{
    return arcoll_init_config(oob, NULL, out);
}

/* Digests differ: one more allgather, of every agreed setting's hash, so
 * that every rank names the same setting (docs/protocol.md §9). */
static int core_init_diff(struct arcoll_context *ctx)
{
    boot_t *b = ctx->boot;
    uint64_t mine[CORE_CONFIG_NAGREED], *all;
    const char *names[CORE_CONFIG_NAGREED];
    size_t n = core_config_hashes(&ctx->cfg, mine, names, CORE_CONFIG_NAGREED);
    int rc, shown = 0;

    all = malloc(sizeof(mine) * (size_t)b->size);
    if (all == NULL) {
        log_err("arcoll_init: out of memory");
        return ARCOLL_ERR_NOMEM; /* the others fail in the bootstrap */
    }
    rc = b->allgather(b, mine, all, sizeof(mine));
    if (rc != ARCOLL_OK)
        goto out;
    for (int r = 1; r < b->size; r++) {
        for (size_t i = 0; i < n; i++) {
            if (all[(size_t)r * CORE_CONFIG_NAGREED + i] == all[i])
                continue;
            if (shown++ < 4)
                log_err("arcoll_init: rank %d has %s different from rank 0 (protocol settings "
                        "must agree: docs/configuration.md)",
                        r, names[i]);
            break;
        }
    }
    if (shown == 0) /* equal settings, different digests: a bug, not a setting */
        log_err("arcoll_init: the settings digests differ but every setting agrees");
    else if (shown > 4)
        log_err("arcoll_init: %d ranks in all have settings different from rank 0", shown);
    rc = ARCOLL_ERR_CONFIG;
out:
    free(all);
    return rc;
}

/* Every rank takes part, a rank whose settings did not parse (cfg_rc) too,
 * so that all fail alike instead of waiting for it. profile: some rank
 * profiles. Settings that change the wire protocol must agree, or peers
 * would wait for signals that never come. */
static int core_init_agree(struct arcoll_context *ctx, int cfg_rc, int *profile)
{
    boot_t *b = ctx->boot;
    /* per rank: settings digest; bit 0 ARCOLL_PROFILE set, bit 1 its host
     * oversubscribed, bit 2 a setting did not parse */
    uint64_t mine[2], *digests;
    int rc, bad = -1, nbad = 0, differ = 0;

    digests = malloc(sizeof(mine) * (size_t)b->size);
    if (digests == NULL) {
        log_err("arcoll_init: out of memory");
        return ARCOLL_ERR_NOMEM;
    }
    mine[0] = core_config_digest(&ctx->cfg);
    mine[1] = (uint64_t)(ctx->cfg.profile[0] != '\0') | (uint64_t)ctx->oversubscribed << 1 |
              (uint64_t)(cfg_rc != ARCOLL_OK) << 2;
    rc = b->allgather(b, mine, digests, sizeof(mine));
    if (rc != ARCOLL_OK)
        goto out;
    for (int i = 0; i < b->size; i++) {
        *profile |= (digests[2 * i + 1] & 1) != 0;
        ctx->job_oversubscribed |= (digests[2 * i + 1] & 2) != 0;
        if (digests[2 * i + 1] & 4) {
            bad = bad < 0 ? i : bad;
            nbad++;
        }
        differ |= digests[2 * i] != digests[0];
    }
    if (nbad > 0) {
        /* The bad rank itself named the setting when it parsed it: that stays
         * its last error. */
        if (cfg_rc == ARCOLL_OK)
            log_err("arcoll_init: rank %d%s has an invalid ARCOLL_* setting (its log names it)",
                    bad, nbad > 1 ? " and others" : "");
        rc = cfg_rc != ARCOLL_OK ? cfg_rc : ARCOLL_ERR_CONFIG;
    } else if (differ) {
        rc = core_init_diff(ctx); /* every rank sees the same digests: all take this branch */
    }
out:
    free(digests);
    return rc;
}

int arcoll_init_config(const arcoll_oob_t *oob, const char *const *config, arcoll_context_t *out)
{
    struct arcoll_context *ctx;
    int *world = NULL, profile = 0;
    int rc, cfg_rc, named;

    if (out == NULL) {
        log_err("arcoll_init: context pointer is NULL");
        return ARCOLL_ERR_INVALID;
    }
    *out = NULL;
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL) {
        log_err("arcoll_init: out of memory");
        return ARCOLL_ERR_NOMEM;
    }
    ctx->magic = CORE_CTX_MAGIC;
    cfg_rc = core_config_init(&ctx->cfg);
    /* The caller's settings win over the environment, for this context only. */
    for (size_t i = 0; config != NULL && config[i] != NULL; i += 2) {
        if (config[i + 1] == NULL) {
            log_err("arcoll_init_config: %s has no value", config[i]);
            cfg_rc = ARCOLL_ERR_INVALID;
            break;
        }
        rc = core_config_set(&ctx->cfg, config[i], config[i + 1]);
        if (cfg_rc == ARCOLL_OK)
            cfg_rc = rc;
    }
    core_log_level = ctx->cfg.log_level;
#ifdef ARCOLL_FAULTS
    core_faults_set(getenv("ARCOLL_FAULT"));
#endif

    /* A rank with a bad setting bootstraps all the same: core_init_agree. */
    rc = oob != NULL ? boot_oob_create(oob, &ctx->boot)
                     : boot_pmix_create(ctx->cfg.timeout_ms, &ctx->boot);
    if (rc != ARCOLL_OK)
        goto err_ctx;
    core_log_rank = ctx->boot->rank;
    boot_topo_query(&ctx->topo);
    ctx->oversubscribed = ctx->boot->host_local_size > ctx->topo.npus;
    rc = core_init_agree(ctx, cfg_rc, &profile);
    if (rc != ARCOLL_OK)
        goto err_boot;

    /* One way of sharing memory for the whole context, so that creators and
     * attachers agree (smp/smp_seg.h); falling back to names, first clear the
     * names of crashed processes (docs/reliability.md). */
    rc = smp_seg_agree(ctx->boot, ctx->cfg.smp_seg, &named);
    if (rc != ARCOLL_OK)
        goto err_boot;
    ctx->cfg.smp_seg = named ? CORE_SEG_NAMED : CORE_SEG_MEMFD;
    if (named && ctx->boot->local_rank == 0)
        smp_seg_sweep(NULL);
    /* The node heap's slots, if any rank uses it (docs/heap.md). */
    rc = heap_node_attach(ctx->boot);
    if (rc != ARCOLL_OK)
        goto err_boot;

    if (ctx->cfg.channel == CORE_CHANNEL_SMP)
        rc = smp_chan_create(ctx->boot, &ctx->cfg, &ctx->chan);
    else if (ctx->cfg.channel == CORE_CHANNEL_SIM)
        rc = sim_chan_create(ctx->boot, &ctx->cfg, &ctx->chan);
    else
        rc = verbs_chan_create(ctx->boot, &ctx->cfg, &ctx->chan);
    if (rc != ARCOLL_OK)
        goto err_heap;

    rc = zmem_create(ctx);
    if (rc != ARCOLL_OK)
        goto err_chan;
    world = malloc(sizeof(int) * (size_t)ctx->boot->size);
    if (world == NULL) {
        log_err("arcoll_init: out of memory");
        rc = ARCOLL_ERR_NOMEM;
        goto err_zmem;
    }
    for (int i = 0; i < ctx->boot->size; i++)
        world[i] = i;
    rc = core_team_create(ctx, world, ctx->boot->size, &ctx->teams);
    if (rc != ARCOLL_OK)
        goto err_world;
    /* ARCOLL_PROFILE need not agree: the clock exchange involves every rank
     * as soon as one profiles. */
    if (profile) {
        rc = prof_create(ctx, &ctx->prof);
        if (rc != ARCOLL_OK)
            goto err_teams;
    }
    free(world);
    if (ctx->oversubscribed && ctx->boot->local_rank == 0)
        log_info("%d ranks on %d processing units: polling yields the core early",
                 ctx->boot->host_local_size, ctx->topo.npus);
    ctx->next = core_live;
    core_live = ctx;
    *out = ctx;
    return ARCOLL_OK;

err_teams:
    core_team_free(ctx->teams);
err_world:
    free(world);
err_zmem:
    zmem_destroy(ctx);
err_chan:
    ctx->chan->ops->destroy(ctx->chan);
err_heap:
    heap_node_detach();
err_boot:
    boot_destroy(ctx->boot);
err_ctx:
    free(ctx);
    return rc;
}

int arcoll_finalize(arcoll_context_t ctx)
{
    int rc = core_ctx_check(ctx, "arcoll_finalize");
    int lost = 0, was;

    if (rc != ARCOLL_OK)
        return rc;
    for (struct arcoll_team *t = ctx->teams; t != NULL; t = t->next)
        lost |= t->failed == ARCOLL_ERR_PEER || t->failed == ARCOLL_ERR_TIMEOUT;
    was = ctx->teams->failed;
    if (ctx->prof != NULL) {
        prof_t *p = ctx->prof;
        ctx->prof = NULL; /* its own collectives are not part of the profile */
        prof_finalize(ctx, p, lost);
    }
    /* Peers may still write into our regions until everyone is done; a lost
     * peer would make that barrier hang, so then we release locally. */
    if (!lost)
        rc = core_ctx_barrier(ctx);
    /* The profile's exchanges over the world team found a peer lost or late:
     * finalize reports it, as its own barrier would have. */
    if (rc == ARCOLL_OK && !was && ctx->teams->failed)
        rc = ctx->teams->failed;
    core_ctx_unlink(ctx);
    core_ureqs_drop(ctx);
    while (ctx->teams != NULL) {
        struct arcoll_team *t = ctx->teams;
        ctx->teams = t->next;
        core_team_free(t);
    }
    zmem_destroy(ctx);
    ctx->chan->ops->destroy(ctx->chan);
    heap_node_detach();
    boot_destroy(ctx->boot);
    ctx->magic = 0;
    free(ctx);
    return rc;
}

int arcoll_context_rank(arcoll_context_t ctx)
{
    return core_ctx_check(ctx, "arcoll_context_rank") == ARCOLL_OK ? ctx->boot->rank : -1;
}

int arcoll_context_size(arcoll_context_t ctx)
{
    return core_ctx_check(ctx, "arcoll_context_size") == ARCOLL_OK ? ctx->boot->size : -1;
}

int arcoll_context_nnodes(arcoll_context_t ctx)
{
    return core_ctx_check(ctx, "arcoll_context_nnodes") == ARCOLL_OK ? ctx->boot->nnodes : -1;
}

int arcoll_context_memory(arcoll_context_t ctx, size_t *bytes)
{
    int rc = core_ctx_check(ctx, "arcoll_context_memory");
    size_t sum;

    if (rc != ARCOLL_OK)
        return rc;
    if (bytes == NULL) {
        log_err("arcoll_context_memory: bytes is NULL");
        return ARCOLL_ERR_INVALID;
    }
    sum = ctx->chan->fixed_bytes;
    for (const struct arcoll_team *t = ctx->teams; t != NULL; t = t->next) {
        sum += t->region.len;
        if (t->hier != NULL && t->hier->xteam != NULL)
            sum += t->hier->xteam->region.len;
        /* A node segment is shared: count this rank's part of it. */
        if (t->hier != NULL)
            sum += t->hier->seg.len / t->hier->lsize;
    }
    *bytes = sum;
    return ARCOLL_OK;
}

int arcoll_context_resources(arcoll_context_t ctx, arcoll_resources_t *out)
{
    chan_t *c;
    int rc = core_ctx_check(ctx, "arcoll_context_resources");

    if (rc != ARCOLL_OK)
        return rc;
    if (out == NULL) {
        log_err("arcoll_context_resources: out is NULL");
        return ARCOLL_ERR_INVALID;
    }
    memset(out, 0, sizeof(*out));
    c = ctx->chan;
    zmem_resources(ctx, out);
    if (c->ops->stats == NULL) {
        /* A channel without a NIC: all of it is shared memory. */
        return arcoll_context_memory(ctx, &out->shared_bytes);
    }
    c->ops->stats(c, &out->qps, &out->qps_ready, &out->registered_bytes);
    /* Node segments are shared memory on every channel: this rank's part. */
    for (const struct arcoll_team *t = ctx->teams; t != NULL; t = t->next)
        if (t->hier != NULL)
            out->shared_bytes += t->hier->seg.len / t->hier->lsize;
    return ARCOLL_OK;
}

int arcoll_context_counters(arcoll_context_t ctx, arcoll_counters_t *out, size_t size)
{
    int rc = core_ctx_check(ctx, "arcoll_context_counters");

    if (rc != ARCOLL_OK)
        return rc;
    if (out == NULL || size == 0) {
        log_err("arcoll_context_counters: out is NULL or size is 0");
        return ARCOLL_ERR_INVALID;
    }
    memcpy(out, &ctx->counters, size < sizeof(ctx->counters) ? size : sizeof(ctx->counters));
    return ARCOLL_OK;
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
    core_tune_shape_team(team, &shape);
    return core_tune_host(&team->ctx->cfg.tune, (int)coll, bytes, &shape);
}

_Static_assert((int)ARCOLL_COLL_ALLTOALL == CORE_TUNE_ALLTOALL &&
                   (int)ARCOLL_COLL_ALLGATHER == CORE_TUNE_ALLGATHER &&
                   (int)ARCOLL_COLL_ALLGATHERV == CORE_TUNE_ALLGATHERV &&
                   (int)ARCOLL_COLL_REDUCE_SCATTER == CORE_TUNE_REDUCE_SCATTER &&
                   (int)ARCOLL_COLL_ALLREDUCE == CORE_TUNE_ALLREDUCE,
               "arcoll_coll_t follows the tuning table's collectives");

/* Live handles of nonblocking calls: a handle is checked against this list,
 * so that a spent or finalized one is an error, not a use after free. */
static struct arcoll_request *core_ureqs;
#define CORE_REQ_MAGIC 0x6172636f6c6c5251ULL

static void core_ureq_unlink(struct arcoll_request *u)
{
    for (struct arcoll_request **pp = &core_ureqs; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == u) {
            *pp = u->next;
            break;
        }
    }
    u->magic = 0;
    free(u);
}

/* Handles of a context that finalize frees: the calls are gone with it. */
static void core_ureqs_drop(struct arcoll_context *ctx)
{
    struct arcoll_request **pp = &core_ureqs;

    for (struct arcoll_team *t = ctx->teams; t != NULL; t = t->next)
        eng_pend_drop(t); /* a failed team's queued calls never started */

    while (*pp != NULL) {
        struct arcoll_request *u = *pp;
        if (u->ctx != ctx) {
            pp = &u->next;
            continue;
        }
        if (u->r != NULL)
            u->r->ureq = NULL;
        *pp = u->next;
        u->magic = 0;
        free(u);
    }
}

/* A nonblocking call: its handle first, which the engine links to the call
 * when it starts (at once, or from the queue behind a full window). A call
 * that finished (or was a no-op) at once is handed back as NULL, which
 * test/wait treat as complete. */
static int core_coll_nb(arcoll_team_t team, coll_args_t *a, arcoll_request_t *req, const void *site)
{
    struct arcoll_request *u = calloc(1, sizeof(*u));
    coll_req_t *r;
    int rc;

    *req = NULL;
    if (u == NULL) {
        /* The others start it: run it to the end here rather than fail. */
        log_warn("nonblocking call: out of memory for a handle; completing it now");
        rc = coll_start_args(team, a, site, &r);
        return rc == ARCOLL_INPROGRESS ? coll_wait(r) : rc;
    }
    u->magic = CORE_REQ_MAGIC;
    u->ctx = team->ctx;
    u->team = team;
    u->status = ARCOLL_INPROGRESS;
    rc = coll_submit(team, a, site, u, &r);
    if (rc != ARCOLL_INPROGRESS) {
        free(u);
        return rc;
    }
    if (u->pend == NULL) {
        r->ureq = u;
        u->r = r;
    }
    u->next = core_ureqs;
    core_ureqs = u;
    *req = u;
    return ARCOLL_OK;
}

/* site: the application's return address, for the profiler. */
static int core_coll_args(arcoll_team_t team, coll_args_t *a, arcoll_request_t *req,
                          const void *site)
{
    coll_req_t *r;
    const void *given = core_call_site; /* arcoll_call_site: applies to this call only */
    int rc;

    core_call_site = NULL;
    if (given != NULL)
        site = given;
    rc = core_team_check(team, coll_type_name(a->type));
    if (rc != ARCOLL_OK)
        return rc;
    a->in_place = a->sbuf == ARCOLL_IN_PLACE;
    if (req != NULL)
        return core_coll_nb(team, a, req, site);
    rc = coll_start_args(team, a, site, &r);
    return rc == ARCOLL_INPROGRESS ? coll_wait(r) : rc;
}

static int core_coll(arcoll_team_t team, coll_type_t type, const void *sbuf, void *rbuf,
                     size_t bytes, arcoll_request_t *req, const void *site)
{
    coll_args_t a = {.type = type, .sbuf = sbuf, .rbuf = rbuf, .bytes = bytes};

    return core_coll_args(team, &a, req, site);
}

/* A nonblocking call needs somewhere to put its handle. */
static int core_req_arg(arcoll_request_t *req, const char *what)
{
    if (req != NULL)
        return ARCOLL_OK;
    log_err("%s: request pointer is NULL", what);
    return ARCOLL_ERR_INVALID;
}

int arcoll_alltoall(arcoll_team_t team, const void *sbuf, void *rbuf, size_t bytes)
{
    return core_coll(team, COLL_ALLTOALL, sbuf, rbuf, bytes, NULL, __builtin_return_address(0));
}

int arcoll_allgather(arcoll_team_t team, const void *sbuf, void *rbuf, size_t bytes)
{
    return core_coll(team, COLL_ALLGATHER, sbuf, rbuf, bytes, NULL, __builtin_return_address(0));
}

int arcoll_ialltoall(arcoll_team_t team, const void *sbuf, void *rbuf, size_t bytes,
                     arcoll_request_t *req)
{
    int rc = core_req_arg(req, "arcoll_ialltoall");

    return rc != ARCOLL_OK ? rc
                           : core_coll(team, COLL_ALLTOALL, sbuf, rbuf, bytes, req,
                                       __builtin_return_address(0));
}

int arcoll_iallgather(arcoll_team_t team, const void *sbuf, void *rbuf, size_t bytes,
                      arcoll_request_t *req)
{
    int rc = core_req_arg(req, "arcoll_iallgather");

    return rc != ARCOLL_OK ? rc
                           : core_coll(team, COLL_ALLGATHER, sbuf, rbuf, bytes, req,
                                       __builtin_return_address(0));
}

static int core_alltoallv(arcoll_team_t team, const void *sbuf, const size_t *scounts,
                          const size_t *sdispls, void *rbuf, const size_t *rcounts,
                          const size_t *rdispls, arcoll_request_t *req, const void *site)
{
    coll_args_t a = {.type = COLL_ALLTOALLV,
                     .sbuf = sbuf,
                     .rbuf = rbuf,
                     .scounts = scounts,
                     .sdispls = sdispls,
                     .rcounts = rcounts,
                     .rdispls = rdispls};

    return core_coll_args(team, &a, req, site);
}

int arcoll_alltoallv(arcoll_team_t team, const void *sbuf, const size_t *scounts,
                     const size_t *sdispls, void *rbuf, const size_t *rcounts,
                     const size_t *rdispls)
{
    return core_alltoallv(team, sbuf, scounts, sdispls, rbuf, rcounts, rdispls, NULL,
                          __builtin_return_address(0));
}

int arcoll_ialltoallv(arcoll_team_t team, const void *sbuf, const size_t *scounts,
                      const size_t *sdispls, void *rbuf, const size_t *rcounts,
                      const size_t *rdispls, arcoll_request_t *req)
{
    int rc = core_req_arg(req, "arcoll_ialltoallv");

    return rc != ARCOLL_OK ? rc
                           : core_alltoallv(team, sbuf, scounts, sdispls, rbuf, rcounts, rdispls,
                                            req, __builtin_return_address(0));
}

static int core_allgatherv(arcoll_team_t team, const void *sbuf, size_t sbytes, void *rbuf,
                           const size_t *rcounts, const size_t *rdispls, arcoll_request_t *req,
                           const void *site)
{
    coll_args_t a = {.type = COLL_ALLGATHERV,
                     .sbuf = sbuf,
                     .rbuf = rbuf,
                     .bytes = sbytes,
                     .rcounts = rcounts,
                     .rdispls = rdispls};

    return core_coll_args(team, &a, req, site);
}

int arcoll_allgatherv(arcoll_team_t team, const void *sbuf, size_t sbytes, void *rbuf,
                      const size_t *rcounts, const size_t *rdispls)
{
    return core_allgatherv(team, sbuf, sbytes, rbuf, rcounts, rdispls, NULL,
                           __builtin_return_address(0));
}

int arcoll_iallgatherv(arcoll_team_t team, const void *sbuf, size_t sbytes, void *rbuf,
                       const size_t *rcounts, const size_t *rdispls, arcoll_request_t *req)
{
    int rc = core_req_arg(req, "arcoll_iallgatherv");

    return rc != ARCOLL_OK ? rc
                           : core_allgatherv(team, sbuf, sbytes, rbuf, rcounts, rdispls, req,
                                             __builtin_return_address(0));
}

static int core_reduce(arcoll_team_t team, coll_type_t type, const void *sbuf, void *rbuf,
                       size_t count, arcoll_dtype_t dtype, arcoll_op_t op, arcoll_request_t *req,
                       const void *site)
{
    coll_args_t a = {
        .type = type, .sbuf = sbuf, .rbuf = rbuf, .count = count, .dtype = dtype, .op = op};

    return core_coll_args(team, &a, req, site);
}

int arcoll_reduce_scatter_block(arcoll_team_t team, const void *sbuf, void *rbuf, size_t count,
                                arcoll_dtype_t dtype, arcoll_op_t op)
{
    return core_reduce(team, COLL_REDUCE_SCATTER, sbuf, rbuf, count, dtype, op, NULL,
                       __builtin_return_address(0));
}

int arcoll_ireduce_scatter_block(arcoll_team_t team, const void *sbuf, void *rbuf, size_t count,
                                 arcoll_dtype_t dtype, arcoll_op_t op, arcoll_request_t *req)
{
    int rc = core_req_arg(req, "arcoll_ireduce_scatter_block");

    return rc != ARCOLL_OK ? rc
                           : core_reduce(team, COLL_REDUCE_SCATTER, sbuf, rbuf, count, dtype, op,
                                         req, __builtin_return_address(0));
}

int arcoll_allreduce(arcoll_team_t team, const void *sbuf, void *rbuf, size_t count,
                     arcoll_dtype_t dtype, arcoll_op_t op)
{
    return core_reduce(team, COLL_ALLREDUCE, sbuf, rbuf, count, dtype, op, NULL,
                       __builtin_return_address(0));
}

int arcoll_iallreduce(arcoll_team_t team, const void *sbuf, void *rbuf, size_t count,
                      arcoll_dtype_t dtype, arcoll_op_t op, arcoll_request_t *req)
{
    int rc = core_req_arg(req, "arcoll_iallreduce");

    return rc != ARCOLL_OK ? rc
                           : core_reduce(team, COLL_ALLREDUCE, sbuf, rbuf, count, dtype, op, req,
                                         __builtin_return_address(0));
}

static int core_req_check(arcoll_request_t *req, struct arcoll_request **out)
{
    struct arcoll_request *u;

    *out = NULL;
    if (req == NULL) {
        log_err("arcoll_test/wait: request pointer is NULL");
        return ARCOLL_ERR_INVALID;
    }
    if (*req == NULL)
        return ARCOLL_OK;
    for (u = core_ureqs; u != NULL; u = u->next) {
        if (u == *req) {
            *out = u;
            return ARCOLL_OK;
        }
    }
    log_err("arcoll_test/wait: invalid, completed or finalized request %p", (void *)*req);
    return ARCOLL_ERR_STATE;
}

/* The call behind u is over: hand its status back and spend the handle. */
static int core_req_spend(arcoll_request_t *req, struct arcoll_request *u)
{
    int rc = u->status;

    core_ureq_unlink(u);
    *req = NULL;
    return rc;
}

int arcoll_test(arcoll_request_t *req)
{
    struct arcoll_request *u;
    int rc = core_req_check(req, &u);

    if (rc != ARCOLL_OK || u == NULL)
        return rc;
    if (u->r != NULL || u->pend != NULL) {
        coll_progress_all(u->r != NULL ? u->r->team : u->team);
        if (u->r != NULL || u->pend != NULL)
            return ARCOLL_INPROGRESS;
    }
    return core_req_spend(req, u);
}

int arcoll_wait(arcoll_request_t *req)
{
    struct arcoll_request *u;
    int rc = core_req_check(req, &u);

    if (rc != ARCOLL_OK || u == NULL)
        return rc;
    eng_ureq_wait(u);
    return core_req_spend(req, u);
}

int arcoll_waitall(int n, arcoll_request_t *reqs)
{
    int first = ARCOLL_OK;

    if (n < 0 || (n > 0 && reqs == NULL)) {
        log_err("arcoll_waitall: %d requests at %p", n, (void *)reqs);
        return ARCOLL_ERR_INVALID;
    }
    for (int i = 0; i < n; i++) {
        int rc = arcoll_wait(&reqs[i]);
        if (rc != ARCOLL_OK && first == ARCOLL_OK)
            first = rc;
    }
    return first;
}

int arcoll_progress(arcoll_context_t ctx)
{
    int rc = core_ctx_check(ctx, "arcoll_progress");

    if (rc != ARCOLL_OK)
        return rc;
    for (struct arcoll_team *t = ctx->teams; t != NULL; t = t->next)
        coll_team_progress(t); /* errors are reported by arcoll_test/wait */
    return ARCOLL_OK;
}

int arcoll_context_progress_hook(arcoll_context_t ctx, void (*fn)(void *arg), void *arg)
{
    int rc = core_ctx_check(ctx, "arcoll_context_progress_hook");

    if (rc != ARCOLL_OK)
        return rc;
    ctx->hook = fn;
    ctx->hook_arg = arg;
    return ARCOLL_OK;
}

int arcoll_config_set(arcoll_context_t ctx, const char *name, const char *value)
{
    int rc = core_ctx_check(ctx, "arcoll_config_set");

    if (rc != ARCOLL_OK)
        return rc;
    if (name != NULL &&
        (strcmp(name, "ARCOLL_CHANNEL") == 0 || strcmp(name, "ARCOLL_PROFILE") == 0 ||
         strcmp(name, "ARCOLL_SMP_SEG") == 0)) {
        log_err("%s can only be chosen at arcoll_init", name);
        return ARCOLL_ERR_CONFIG;
    }
    return core_config_set(&ctx->cfg, name, value);
}

const char *arcoll_config_get(arcoll_context_t ctx, const char *name)
{
    if (core_ctx_check(ctx, "arcoll_config_get") != ARCOLL_OK)
        return NULL;
    return core_config_get(&ctx->cfg, name, ctx->cfgbuf, sizeof(ctx->cfgbuf));
}

/* Registrations, public API (docs in arcoll.h; the memory layer, zcopy/zmem.c, does it). */

int arcoll_mem_register(arcoll_context_t ctx, void *addr, size_t len, arcoll_mem_t *out)
{
    int rc = core_ctx_check(ctx, "arcoll_mem_register");

    if (rc != ARCOLL_OK)
        return rc;
    if (out == NULL || (addr == NULL && len > 0) || len == 0) {
        log_err("arcoll_mem_register: %s", out == NULL ? "handle pointer is NULL"
                                           : len == 0  ? "length is 0"
                                                       : "address is NULL");
        return ARCOLL_ERR_INVALID;
    }
    return zmem_pin(ctx, addr, len, out);
}

int arcoll_mem_deregister(arcoll_context_t ctx, arcoll_mem_t mem)
{
    int rc = core_ctx_check(ctx, "arcoll_mem_deregister");

    if (rc != ARCOLL_OK)
        return rc;
    if (zmem_unpin_user(ctx, mem))
        return ARCOLL_OK;
    log_err("arcoll_mem_deregister: %p is not a registration of this context", (void *)mem);
    return ARCOLL_ERR_INVALID;
}

int arcoll_mem_invalidate(arcoll_context_t ctx, void *addr, size_t len)
{
    int rc = core_ctx_check(ctx, "arcoll_mem_invalidate");

    if (rc != ARCOLL_OK)
        return rc;
    zmem_invalidate(ctx, addr, len);
    return ARCOLL_OK;
}

const char *arcoll_last_error(arcoll_context_t ctx)
{
    (void)ctx;
    return core_error_last();
}
