/*
 * SH-CO (Li et al. §2.1): alltoall and allgather on one node by plain memcpy
 * from the sender's buffer straight into the receiver's, when every rank's
 * buffers lie in one same-address region (mem/region.h), the block matrix
 * cut among the ranks in Morton order (alg/sched/morton.h). docs/protocol.md §15.
 * allgatherv too (not in place), where every rank's receive blocks lie packed in
 * rank order (rdispls the running sum of rcounts, the layout MPI programs use):
 * then every rank knows where block s goes in every receiver's buffer from the
 * rcounts all ranks share; a rank with other displacements publishes no region,
 * and the call runs as pap, as for a buffer outside the region.
 *
 * Each rank publishes its buffers in its addr line of the node segment
 * (engine/hier_seg.h) and copies the blocks of its share whose sender and receiver
 * have both arrived (PAP-aware: early ranks work among themselves), then
 * stores its done word; it returns once every rank's done word is there, so
 * no block into its receive buffer is still to come and no one reads its
 * send buffer any more. If the records show a size mismatch (or another
 * call of the team) every rank fails with it, as does a rank whose wait
 * shows a peer running this call flat, as a 0-byte call does (§8; it is
 * refused and fails too); if some rank's buffers are
 * outside the common region every rank goes on as the flat pap in the same
 * epoch (eng_switch_flat); under auto a per-team hint then sends the next
 * calls to pap at once (shco_team_t). The context counts both outcomes
 * (arcoll_context_counters).
 *
 * SH-NUMA-CO (Li et al. §2.4) is this with other shares: on a node whose ranks
 * are on several sockets (hier_t.lsocket) a rank copies, socket pair by socket
 * pair, only blocks into its own socket's receive buffers
 * (morton_numa_share); no barrier between its steps (docs/protocol.md §15).
 * At two ranks on one socket, smaller blocks go by column instead: each rank
 * copies both blocks into its own buffer (shco_share, SHCO_PULL_*_BELOW).
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "alg/sched/morton.h"
#include "engine/engine.h"
#include "engine/team.h"
#include "mem/region.h"
#include "util/log.h"

extern const coll_alg_t coll_alg_pap;

/* Words of a rank's addr line: arrive (the segment's call number) is stored
 * last with release, the rest before it; done (a done word) when its share
 * is over. call: the team's call number (r->epoch): a 0-byte call takes no
 * segment call number, so after one on a rank its segment numbers name other
 * calls than its peers' (docs/protocol.md §8). */
enum { AW_ARRIVE = 0, AW_DONE, AW_SBUF, AW_RBUF, AW_BYTES, AW_TYPE, AW_REGION, AW_CALL };
_Static_assert((AW_CALL + 1) * sizeof(uint64_t) <= WIRE_LINE, "an addr line is one line");

/* Per team (eng_state_get): the rank's Morton share and per-call flags. */
typedef struct shco_team {
    uint32_t p;
    morton_block_t *share; /* [p] */
    morton_block_t *pull;  /* [p] if pull_ok: column me, every block into our own buffer */
    int pull_ok;           /* two ranks on one socket: the column serves small blocks */
    uint8_t *seen;         /* [p] the rank's record of this call was read */
    uint8_t *copied;       /* [p] the share's block was copied */
    uintptr_t *sbuf;       /* [p] buffers read from the records */
    uintptr_t *rbuf;       /* [p] */
    size_t *off;           /* [p + 1] allgatherv: block s's offset in a packed receive buffer */
    /* auto's fallback hint: after a call that fell back, the next skip calls
     * auto gives sh_co run as pap at once (no records, no wait for every
     * rank's); skip doubles with each fallback in a row, up to SHCO_SKIP_MAX,
     * and a call served as sh_co clears it. Every rank of the team saw the
     * same outcomes, and a call starts only once the previous sh_co call's is
     * known (serial): the same choice on every rank. */
    uint32_t skip, backoff;
} shco_team_t;

#define SHCO_SKIP_MAX 64

/* At two ranks the Morton share is a row of the block matrix: each rank
 * writes its blocks into the other's receive buffer, whose owner has just
 * written it (cleared it, read the last result), so every line crosses
 * between the cores twice, for the write and for the owner's next read. Below
 * these block sizes each copies its column instead, into its own buffer,
 * reading the other's send buffer: once. np=2, column over row, realistic
 * mode (arcoll-mpi-lat -R) / warm buffers: alltoall 0.72-0.96 / 0.61-0.86 at
 * 4-64 KiB, 0.92-0.95 / 0.61 at 256 KiB, 0.80 / 0.75 at 512 KiB, 0.92 / 1.11
 * at 1 MiB; allgather 0.79-0.95 / 0.60-0.84 at 4-64 KiB, 1.16-1.19 / 0.69 at
 * 256 KiB (docs/performance.md, "sh_co at two ranks"). */
#define SHCO_PULL_A2A_BELOW (1024u << 10)
#define SHCO_PULL_AG_BELOW  (256u << 10)

/* Per call (inside the request). */
typedef struct shco_call {
    uint64_t seq;    /* the node segment's call number */
    uint32_t nseen;  /* records read */
    uint32_t left;   /* share blocks not copied */
    uint32_t ndone;  /* ranks whose done word was seen (in order) */
    int published;   /* our done word is stored */
    int mismatch;    /* 1 + the first rank whose size or collective differs */
    int ineligible;  /* 1 + the first rank whose buffers are not in our region */
    int skipped;     /* a peer runs this call flat: another size (0 bytes, a path) */
    uint64_t region; /* our buffers' common region id, 0 if none */
    shco_team_t *st; /* the team's, kept for the polling loops */
} shco_call_t;

#define SC(r) COLL_PRIV(r, shco_call_t)

static void shco_team_free(void *p)
{
    shco_team_t *st = p;

    if (st == NULL)
        return;
    free(st->off);
    free(st->rbuf);
    free(st->sbuf);
    free(st->copied);
    free(st->seen);
    free(st->pull);
    free(st->share);
    free(st);
}

static void *shco_team_make(struct arcoll_team *t)
{
    const hier_t *h = t->hier;
    shco_team_t *st = calloc(1, sizeof(*st));

    if (st == NULL)
        goto fail;
    st->p = t->size;
    st->share = malloc(sizeof(*st->share) * t->size);
    st->pull_ok = t->size == 2 && h->nsockets <= 1; /* what was measured */
    st->pull = st->pull_ok ? malloc(sizeof(*st->pull) * t->size) : NULL;
    st->seen = malloc(t->size);
    st->copied = malloc(t->size);
    st->sbuf = malloc(sizeof(*st->sbuf) * t->size);
    st->rbuf = malloc(sizeof(*st->rbuf) * t->size);
    st->off = malloc(sizeof(*st->off) * (t->size + 1));
    if (st->share == NULL || (st->pull_ok && st->pull == NULL) || st->seen == NULL ||
        st->copied == NULL || st->sbuf == NULL || st->rbuf == NULL || st->off == NULL)
        goto fail;
    /* One node: the local index is the team rank. */
    if (h->nsockets > 1 &&
        morton_numa_share(t->size, h->nsockets, h->lsocket, t->rank, st->share) != 0)
        goto fail;
    if (h->nsockets <= 1)
        morton_share(t->size, t->rank, st->share);
    else if (t->rank == 0)
        log_info("sh_co: %u sockets on the node: SH-NUMA-CO order (Li et al. §2.4)", h->nsockets);
    for (uint32_t i = 0; st->pull_ok && i < t->size; i++) /* our own block first */
        st->pull[i] = (morton_block_t){.row = (t->rank + i) % t->size, .col = t->rank};
    return st;
fail:
    log_err("sh_co: out of memory for the Morton share of %u ranks", t->size);
    shco_team_free(st);
    return NULL;
}

static const eng_state_kind_t shco_team_kind = {.make = shco_team_make, .free = shco_team_free};

/* Team rank q's addr line (one node: local index = team rank). */
static _Atomic uint64_t *shco_line(const coll_req_t *r, uint32_t q)
{
    const hier_seg_t *g = r->team->hseg;

    return hier_seg_word(g, g->lay.off_addr + (uint64_t)q * WIRE_LINE);
}

static size_t shco_slen(const coll_req_t *r)
{
    return r->type == COLL_ALLTOALL ? r->bytes * r->team->size : r->bytes;
}

/* What every rank must publish alike: the block size, or for allgatherv the
 * signature of rcounts (shifted: never HIER_OTHER_CALL). */
static uint64_t shco_word(const coll_req_t *r)
{
    return r->type == COLL_ALLGATHERV ? r->args.sig >> 2 : r->bytes;
}

/* The receive buffer's length, and whether its blocks lie where every rank
 * can compute them: always, but for an allgatherv whose rdispls are not the
 * running sum of rcounts (st->off, filled here). */
static size_t shco_rlen(const coll_req_t *r, shco_team_t *st, int *packed)
{
    const coll_args_t *a = &r->args;
    uint32_t n = r->team->size;

    *packed = 1;
    if (r->type != COLL_ALLGATHERV)
        return r->bytes * n;
    st->off[0] = 0;
    for (uint32_t s = 0; s < n; s++) {
        if (a->rcounts[s] > 0 && a->rdispls[s] != st->off[s])
            *packed = 0;
        st->off[s + 1] = st->off[s] + a->rcounts[s];
    }
    return st->off[n];
}

static int shco_start(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    shco_team_t *st = eng_state_get(t, &shco_team_kind);
    _Atomic uint64_t *w = shco_line(r, t->rank);
    uint64_t sid, rid;
    size_t rlen;
    int packed;

    if (st == NULL)
        return ARCOLL_ERR_NOMEM;
    if ((r->flags & COLL_F_AUTO) && st->skip > 0) {
        st->skip--;
        t->ctx->counters.sh_co_fallbacks++;
        t->ctx->counters.sh_co_skips++;
        return eng_switch_flat(r, &coll_alg_pap);
    }
    memset(SC(r), 0, sizeof(*SC(r)));
    SC(r)->st = st;
    SC(r)->seq = ++t->hseg->seq;
    SC(r)->left = t->size;
    memset(st->seen, 0, t->size);
    memset(st->copied, 0, t->size);
    rlen = shco_rlen(r, st, &packed);
    sid = heap_region_find(r->sbuf, shco_slen(r));
    rid = heap_region_find(r->rbuf, rlen);
    SC(r)->region = sid == rid && packed ? sid : 0;
    atomic_store_explicit(w + AW_SBUF, (uint64_t)(uintptr_t)r->sbuf, memory_order_relaxed);
    atomic_store_explicit(w + AW_RBUF, (uint64_t)(uintptr_t)r->rbuf, memory_order_relaxed);
    atomic_store_explicit(w + AW_BYTES, shco_word(r), memory_order_relaxed);
    atomic_store_explicit(w + AW_TYPE, (uint64_t)r->type, memory_order_relaxed);
    atomic_store_explicit(w + AW_REGION, SC(r)->region, memory_order_relaxed);
    atomic_store_explicit(w + AW_CALL, r->epoch, memory_order_relaxed);
    /* The send buffer's contents and the fields above, before the arrival. */
    atomic_store_explicit(w + AW_ARRIVE, SC(r)->seq, memory_order_release);
    return ARCOLL_OK;
}

/* Read the records of ranks that arrived since the last pass; compare their
 * size, collective and region with ours. A rank's record stays as it is
 * until it has seen our done word, which we store only after reading all. */
static void shco_scan(coll_req_t *r, shco_team_t *st)
{
    uint32_t n = r->team->size;

    for (uint32_t q = 0; q < n && SC(r)->nseen < n; q++) {
        _Atomic uint64_t *w = shco_line(r, q);
        uint64_t bytes, type;
        if (st->seen[q] || atomic_load_explicit(w + AW_ARRIVE, memory_order_acquire) != SC(r)->seq)
            continue;
        st->seen[q] = 1;
        SC(r)->nseen++;
        st->sbuf[q] = (uintptr_t)atomic_load_explicit(w + AW_SBUF, memory_order_relaxed);
        st->rbuf[q] = (uintptr_t)atomic_load_explicit(w + AW_RBUF, memory_order_relaxed);
        bytes = atomic_load_explicit(w + AW_BYTES, memory_order_relaxed);
        type = atomic_load_explicit(w + AW_TYPE, memory_order_relaxed);
        if (atomic_load_explicit(w + AW_CALL, memory_order_relaxed) != r->epoch)
            bytes = HIER_OTHER_CALL; /* its call, not ours: never paired */
        if ((bytes != shco_word(r) || type != (uint64_t)r->type) && !SC(r)->mismatch) {
            SC(r)->mismatch = (int)q + 1;
            if (type != (uint64_t)r->type)
                log_err("%s (epoch %llu): team rank %u runs %s with sh_co in this call",
                        coll_type_name(r->type), (unsigned long long)r->epoch, q,
                        coll_type_name((coll_type_t)type));
            else if (r->type == COLL_ALLGATHERV && bytes != HIER_OTHER_CALL)
                log_err("%s (epoch %llu): team rank %u called it with other receive counts",
                        coll_type_name(r->type), (unsigned long long)r->epoch, q);
            else
                coll_log_sizes(r, coll_type_name(r->type), q, bytes, r->bytes, "");
        }
        if ((SC(r)->region == 0 ||
             atomic_load_explicit(w + AW_REGION, memory_order_relaxed) != SC(r)->region) &&
            !SC(r)->ineligible)
            SC(r)->ineligible = (int)q + 1;
    }
}

/* Is rank q still in the call (it has not revoked its arrival)? */
static int shco_present(coll_req_t *r, uint32_t q)
{
    return atomic_load_explicit(shco_line(r, q) + AW_ARRIVE, memory_order_acquire) == SC(r)->seq;
}

/* The call's share: alike on every rank whose size is ours (the team's size,
 * the collective and the block size), and only those copy to or from us. */
static const morton_block_t *shco_share(const coll_req_t *r, const shco_team_t *st)
{
    size_t below = r->type == COLL_ALLTOALL    ? SHCO_PULL_A2A_BELOW
                   : r->type == COLL_ALLGATHER ? SHCO_PULL_AG_BELOW
                                               : 0;
    return st->pull_ok && r->bytes < below ? st->pull : st->share;
}

/* Copy the blocks of our share whose two ends have arrived, in share order.
 * A pass that copies says so first: our done word reads BUSY during it, and
 * each block's two ranks are looked at again after a fence, so that a rank
 * whose call fails (shco_revoke) either sees us copying and waits, or is
 * seen gone and its buffers are left alone (docs/protocol.md §15, Errors). */

static void shco_copy(coll_req_t *r, shco_team_t *st)
{
    const morton_block_t *share = shco_share(r, st);
    _Atomic uint64_t *done = shco_line(r, r->team->rank) + AW_DONE;
    int a2a = r->type == COLL_ALLTOALL, v = r->type == COLL_ALLGATHERV;
    size_t m = r->bytes, len;
    uint64_t before;
    uint32_t i;

    for (i = 0; i < st->p; i++) {
        morton_block_t b = share[i];
        if (!st->copied[i] && st->seen[b.row] && st->seen[b.col])
            break;
    }
    if (i == st->p)
        return;
    before = atomic_load_explicit(done, memory_order_relaxed);
    atomic_store_explicit(done, wire_done_word(SC(r)->seq, WIRE_ST_BUSY), memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    for (; i < st->p && SC(r)->left; i++) {
        morton_block_t b = share[i];
        if (st->copied[i] || !st->seen[b.row] || !st->seen[b.col])
            continue;
        if (!shco_present(r, b.row) || !shco_present(r, b.col))
            continue; /* its call failed: it is waited for by nobody */
        /* allgatherv: block row of rcounts[row] bytes, at its packed offset */
        len = v ? r->args.rcounts[b.row] : m;
        eng_cost(r->team->ctx, CHAN_COST_COPY, len);
        memcpy((char *)st->rbuf[b.col] + (v ? st->off[b.row] : morton_dst_off(b, m)),
               (const char *)st->sbuf[b.row] + morton_src_off(a2a, b, m), len);
        st->copied[i] = 1;
        SC(r)->left--;
    }
    atomic_store_explicit(done, before, memory_order_release);
}

/* The call fails here and is about to return: after that no rank may copy
 * into our receive buffer (or out of our send buffer). Revoke the arrival,
 * fence, then wait out every copier caught in a pass (BUSY): one pass of its
 * share, for as long as it lives (stopped inside it, it ends the pass when it
 * resumes; a warning after ARCOLL_TIMEOUT_MS). A copier that had not started its pass sees the
 * revocation after its own fence (docs/protocol.md §15, Errors). */
static void shco_revoke(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    const hier_t *h = t->hier;
    uint64_t until = eng_time_ns(t->ctx) + (uint64_t)t->ctx->cfg.timeout_ms * 1000000ULL;

    atomic_store_explicit(shco_line(r, t->rank) + AW_ARRIVE, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    for (uint32_t q = 0; q < t->size; q++) {
        while (q != t->rank &&
               atomic_load_explicit(shco_line(r, q) + AW_DONE, memory_order_acquire) ==
                   wire_done_word(SC(r)->seq, WIRE_ST_BUSY)) {
            if (hier_rank_gone(h, q))
                break; /* exited: it copies nothing more */
            if (until != 0 && eng_time_ns(t->ctx) > until) {
                /* Alive inside its pass: it finishes the pass when it runs again. */
                log_warn("sh_co: team rank %u was copying when this call failed and has not "
                         "finished within ARCOLL_TIMEOUT_MS; waiting for it to finish its pass "
                         "(it is alive)",
                         q);
                until = 0;
            }
            sched_yield();
        }
    }
}

static int shco_slow_path(coll_req_t *r, uint64_t now)
{
    const hier_t *h = r->team->hier;
    int s;

    r->next_check_ns = now + 100000000ULL;
    s = hier_local_gone(h);
    if (s >= 0) {
        log_err("%s (epoch %llu): team rank %d (pid %ld) has exited", coll_type_name(r->type),
                (unsigned long long)r->epoch, s, h->local_pid[s]);
        return ARCOLL_ERR_PEER;
    }
    if (now < r->deadline_ns)
        return ARCOLL_INPROGRESS;
    log_err("%s (epoch %llu, sh_co, %zu bytes) timed out after %ld ms (ARCOLL_TIMEOUT_MS): %u of "
            "%u ranks arrived, %u of %u blocks of this rank's share copied, %u done words seen",
            coll_type_name(r->type), (unsigned long long)r->epoch, r->bytes,
            r->team->ctx->cfg.timeout_ms, SC(r)->nseen, r->team->size, r->team->size - SC(r)->left,
            r->team->size, SC(r)->ndone);
    return ARCOLL_ERR_TIMEOUT;
}

/* Rank q runs this call flat (its size put it on pap: 0 bytes, or a path
 * rule): its first words are in our team region, never in the segment. */
static int shco_flat_peer(const coll_req_t *r, uint32_t q)
{
    uint64_t size;

    return q != r->team->rank && coll_flat_arrival(r, q, &size);
}

/* Every rank's share is over (their done words, in rank order from where
 * the last pass stopped). Once a peer was seen to run this call flat, ranks
 * that do are not waited for: they copy nothing of ours. */
static int shco_all_done(coll_req_t *r)
{
    for (; SC(r)->ndone < r->team->size; SC(r)->ndone++) {
        uint64_t d =
            atomic_load_explicit(shco_line(r, SC(r)->ndone) + AW_DONE, memory_order_acquire);
        if ((!wire_done_epoch_match(d, SC(r)->seq) || wire_done_status(d) == WIRE_ST_BUSY) &&
            !(SC(r)->skipped && shco_flat_peer(r, SC(r)->ndone)))
            return 0;
    }
    return 1;
}

/* Our done word: our share is over, or will not happen. */
static void shco_publish(coll_req_t *r, unsigned status)
{
    atomic_store_explicit(shco_line(r, r->team->rank) + AW_DONE, wire_done_word(SC(r)->seq, status),
                          memory_order_release);
    SC(r)->published = 1;
}

static int shco_progress(coll_req_t *r)
{
    shco_team_t *st = SC(r)->st;
    uint32_t n = r->team->size;
    int rc;

    if (SC(r)->nseen < n)
        shco_scan(r, st);
    if (!SC(r)->mismatch && !SC(r)->ineligible && !SC(r)->skipped)
        shco_copy(r, st);
    /* Done once every record is read (so each rank judged the call from all
     * of them) and our copies are over, or will not happen. */
    if (!SC(r)->published && SC(r)->nseen == n &&
        (SC(r)->left == 0 || SC(r)->mismatch || SC(r)->ineligible))
        shco_publish(r, WIRE_ST_OK);
    if (SC(r)->published && shco_all_done(r)) {
        if (SC(r)->mismatch || SC(r)->skipped)
            return coll_fail(r, ARCOLL_ERR_MISMATCH);
        /* What served the call: the counters, and one debug line per call. */
        if (!SC(r)->ineligible) {
            st->skip = st->backoff = 0;
            r->team->ctx->counters.sh_co_calls++;
            log_debug("%s: %zu B per peer ran as sh_co (call %llu)", coll_type_name(r->type),
                      r->bytes, (unsigned long long)SC(r)->seq);
            return coll_finish(r);
        }
        r->team->ctx->counters.sh_co_fallbacks++;
        if (r->flags & COLL_F_AUTO) {
            st->backoff = st->backoff == 0 ? 1 : st->backoff * 2;
            st->backoff = st->backoff > SHCO_SKIP_MAX ? SHCO_SKIP_MAX : st->backoff;
            st->skip = st->backoff;
        }
        log_debug("%s: %zu B per peer: sh_co ran as pap (call %llu, team rank %d's buffers)",
                  coll_type_name(r->type), r->bytes, (unsigned long long)SC(r)->seq,
                  SC(r)->ineligible - 1);
        /* Every rank saw the same records: all of them go on as pap. */
        if (!r->team->hier_noticed++ && r->team->rank == 0)
            log_info("%s: sh_co runs as pap in this call (team rank %d's buffers are not in the "
                     "same-address region of the others)",
                     coll_type_name(r->type), SC(r)->ineligible - 1);
        rc = eng_switch_flat(r, &coll_alg_pap);
        return rc != ARCOLL_OK ? coll_fail(r, rc) : coll_progress(r);
    }
    if ((++r->polls & 63) == 0) {
        uint64_t now = eng_time_ns(r->team->ctx);
        /* A peer that runs this call flat (another size) never arrives
         * here: its words are in our team region. We copy no more, refuse
         * every peer (the flat ones read it and fail at once; ours ignore
         * it), store our done word, then leave once the ranks that may still
         * copy into our buffers or from them are done: the done barrier.
         * Once every record is read, a peer's flat words are the agreed
         * fallback to pap (it saw every done word, ours included). */
        rc = SC(r)->skipped || SC(r)->nseen == r->team->size ? ARCOLL_OK : coll_flat_check(r);
        if (rc == ARCOLL_ERR_MISMATCH) {
            SC(r)->skipped = 1;
            if (!SC(r)->published)
                shco_publish(r, WIRE_ST_MISMATCH);
            rc = coll_refuse_all(r);
            if (rc != ARCOLL_OK) {
                shco_revoke(r);
                return coll_fail(r, rc);
            }
            return ARCOLL_INPROGRESS;
        }
        if (now >= r->next_check_ns)
            rc = shco_slow_path(r, now);
        if (rc != ARCOLL_OK && rc != ARCOLL_INPROGRESS) {
            shco_revoke(r);
            return coll_fail(r, rc);
        }
    }
    return ARCOLL_INPROGRESS;
}

/* Same on every rank: the team's shape only (whether the buffers allow it
 * is judged per call from what every rank published). */
static const char *shco_unfit(const struct arcoll_team *t, const coll_args_t *a)
{
    if (a->type == COLL_ALLGATHERV && a->in_place)
        return "allgatherv in place"; /* MPI: in place on every rank or on none */
    if (t->hier == NULL)
        return "no node holds two of its ranks, or ARCOLL_SHM_MAX is 0";
    if (t->hier->nnodes != 1)
        return "its ranks are on more than one node";
    return NULL;
}

const coll_alg_t coll_alg_sh_co = {.name = "sh_co",
                                   .unfit = shco_unfit,
                                   .fallback = CORE_ALG_PAP,
                                   .serial = 1,
                                   .start = shco_start,
                                   .progress = shco_progress};
