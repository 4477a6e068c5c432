/* The checks a waiting call runs (docs/protocol.md, "Completion" and
 * "Failure"): the sizes every rank passed (mismatch), refusals, calls that
 * do not line up, the peers' failure words, liveness and the call's
 * deadline. */
#include <stdio.h>

#include "engine/eng_int.h"
#include "util/log.h"

void coll_log_sizes(const coll_req_t *r, const char *what, uint32_t peer, uint64_t theirs,
                    size_t ours, const char *note)
{
    if (theirs == WIRE_SIZE_NONE) {
        log_err("%s (epoch %llu): team rank %u is in another kind of call at this epoch (its "
                "advertisement carries no size; this rank passed %zu bytes per peer): every rank "
                "must make the same call with the same size%s",
                what, (unsigned long long)r->epoch, peer, ours, note);
        return;
    }
    if (theirs == HIER_OTHER_CALL) {
        log_err("%s (epoch %llu): team rank %u is in another call of this team: some call passed "
                "0 bytes on one rank and data on another, so the calls no longer line up (every "
                "rank must pass the same size; this rank passed %zu)",
                what, (unsigned long long)r->epoch, peer, ours);
        return;
    }
    log_err("%s (epoch %llu): team rank %u passed %llu bytes per peer, team rank %u (this rank) "
            "passed %zu: every rank must pass the same size%s",
            what, (unsigned long long)r->epoch, peer, (unsigned long long)theirs, r->team->rank,
            ours, note);
}

int coll_mismatch(coll_req_t *r, uint32_t peer, int tx, uint64_t their_size)
{
    const char *what = coll_type_name(r->type);
    unsigned long long e = (unsigned long long)r->epoch;
    unsigned me = r->team->rank;
    size_t ours = tx ? coll_tx_len(r, peer) : coll_rx_len(r, peer);

    if (r->mm_peer == 0) {
        r->mm_peer = peer + 1;
        r->mm_size = their_size;
    }
    if (r->flags & COLL_F_NOSELF)
        return ARCOLL_ERR_MISMATCH; /* its team and sizes are internal: the outer call logs */
    if (their_size == WIRE_SIZE_SIG)
        log_err("%s (epoch %llu): team rank %u called it with other receive counts than this rank: "
                "every rank must pass the same rcounts",
                what, e, peer);
    else if (r->type == COLL_ALLTOALLV && their_size == UINT64_MAX)
        log_err("%s (epoch %llu): team rank %u %s (%zu bytes here): its length differs there", what,
                e, peer, tx ? "refused the block we send it" : "refused to send its block", ours);
    else if (r->type == COLL_ALLTOALLV && their_size != WIRE_SIZE_NONE)
        log_err("%s (epoch %llu): the block %s team rank %u is %llu bytes there, %zu here: "
                "message sizes must agree",
                what, e, tx ? "to" : "from", peer, (unsigned long long)their_size, ours);
    else if (their_size == UINT64_MAX)
        log_err("%s (epoch %llu): team rank %u reported a size mismatch with this rank (team rank "
                "%u, %zu bytes per peer)",
                what, e, peer, me, ours);
    else
        coll_log_sizes(r, what, peer, their_size, ours, "");
    return ARCOLL_ERR_MISMATCH;
}

int coll_refused(const coll_req_t *r, uint32_t peer)
{
    const struct arcoll_team *t = r->team;
    uint64_t w = wire_load(&t->region, wire_done_off(&t->layout, peer, r->bank));

    return wire_done_epoch_match(w, r->epoch) && wire_done_status(w) == WIRE_ST_MISMATCH;
}

int coll_refuse(coll_req_t *r, uint32_t peer)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;
    int rc;

    rc = c->ops->put_u64(c, t->ranks[peer], wire_frag_word(r->epoch, WIRE_FRAG_REJECT),
                         &t->peer_region[peer], wire_cred_off(&t->layout, t->rank, r->bank));
    if (rc != ARCOLL_OK)
        return rc;
    return c->ops->put_u64(c, t->ranks[peer], wire_done_word(r->epoch, WIRE_ST_MISMATCH),
                           &t->peer_region[peer], wire_done_off(&t->layout, t->rank, r->bank));
}

/* A size mismatch with a peer ends the call with it both ways: tell it (once),
 * stop sending to it, stop receiving from it. Except a zero-copy receive
 * (rx_over 0): the peer may be writing our buffer, so it goes on until the
 * peer's done word, which comes after its last byte and always comes (its
 * data's, or its own refusal). Then keep serving the others and fail. */
int coll_peer_drop(coll_req_t *r, uint32_t peer, int rx_over)
{
    coll_peer_t *p = &r->peers[peer];

    r->deferred = ARCOLL_ERR_MISMATCH;
    if (!p->rx_done && (rx_over || !coll_rx_keyed(r, peer))) {
        p->rx_done = 1;
        r->rx_left--;
    }
    if (p->tx_state != COLL_TX_DONE) {
        p->tx_state = COLL_TX_DONE;
        r->tx_left--;
    }
    if (p->told)
        return ARCOLL_OK;
    p->told = 1;
    return coll_refuse(r, peer);
}

/* A number of 32 bits (read from a word) as the full number nearest ours. */
static uint64_t coll_num_near(const coll_req_t *r, uint64_t theirs)
{
    return r->epoch + (uint64_t)(int64_t)(int32_t)((uint32_t)theirs - (uint32_t)r->epoch);
}

/* A word of the peer in our bank belongs to another call of the team. */
static int coll_other_call(const coll_req_t *r, uint32_t peer, uint64_t *num)
{
    const struct arcoll_team *t = r->team;
    const wire_layout_t *l = &t->layout;
    uint64_t w[4] = {wire_load(&t->region, wire_ctrl_off(l, peer, r->bank)),
                     wire_load(&t->region, wire_slot_off(l, peer, r->bank)) >> 32,
                     wire_load(&t->region, wire_done_off(l, peer, r->bank)) >> 8,
                     wire_load(&t->region, wire_cred_off(l, peer, r->bank)) >> 32};

#ifdef ARCOLL_FAULTS
    if (wire_fault_no_epoch || wire_fault_one_bank)
        return 0; /* tests of the epochs and banks themselves: let them show */
#endif
    for (int i = 0; i < 4; i++) {
        if (w[i] != 0 && wire_num_stray(w[i], r->epoch, l->banks)) {
            *num = coll_num_near(r, w[i]);
            return 1;
        }
    }
    return 0;
}

/* Say in the caller's terms why a peer's calls do not line up with ours. */
static void coll_log_lineup(const coll_req_t *r, uint32_t peer, uint64_t theirs)
{
    const char *what = coll_type_name(r->type);
    unsigned long long c = (unsigned long long)r->epoch;

    if (r->flags & COLL_F_NOSELF)
        return; /* a step: the outer call says it */
    log_err("%s (call %llu of this team): team rank %u is at the same epoch in its call "
            "%llu: the calls no longer line up (a call made on one rank and not on another, "
            "as one refused on one rank only for its arguments)",
            what, c, peer, (unsigned long long)theirs);
}

int coll_flat_check(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    uint64_t size;

    for (uint32_t peer = 0; peer < t->size; peer++) {
        if (peer != t->rank && coll_other_call(r, peer, &size)) {
            coll_log_lineup(r, peer, size);
            return ARCOLL_ERR_MISMATCH;
        }
        if (peer == t->rank || !coll_flat_arrival(r, peer, &size))
            continue;
        char note[96];
        snprintf(note, sizeof(note), " (%s runs up to ARCOLL_SHM_MAX, its flat fallback above)",
                 r->alg->name);
        coll_log_sizes(r, coll_type_name(r->type), peer, size, r->bytes, note);
        return ARCOLL_ERR_MISMATCH;
    }
    return ARCOLL_OK;
}

int coll_refuse_all(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    int rc;

    for (uint32_t peer = 0; peer < t->size; peer++) {
        if (peer == t->rank)
            continue;
        rc = coll_refuse(r, peer);
        if (rc != ARCOLL_OK)
            return rc;
    }
    return ARCOLL_OK;
}

static void coll_list_peers(coll_req_t *r, int want_rx, char *buf, size_t len)
{
    struct arcoll_team *t = r->team;
    size_t used = 0;
    int n = 0;

    buf[0] = '\0';
    for (uint32_t peer = 0; peer < t->size && used + 16 < len; peer++) {
        coll_peer_t *p = &r->peers[peer];
        int waiting = want_rx ? !p->rx_done : p->tx_state != COLL_TX_DONE;
        if (!waiting)
            continue;
        if (n++ == 8) {
            used += (size_t)snprintf(buf + used, len - used, ",...");
            break;
        }
        used += (size_t)snprintf(buf + used, len - used, "%s%u", used ? "," : "", peer);
    }
    if (n == 0)
        snprintf(buf, len, "none");
}

/* This rank serves neither call num of the team nor later ones: say so in
 * every peer's region (the failure word), so that a peer waiting for us, or
 * for a rank that waits for us, fails at its next check instead of at its
 * timeout (docs/protocol.md §8). Only over ready links: a notice must not
 * need a connection this rank would no longer progress. Best effort. */
void eng_fail_tell(struct arcoll_team *t, uint64_t num, int rc)
{
    chan_t *c = t->ctx->chan;
    uint64_t w = wire_fail_word(num, rc);

    if (t->fail_told || rc >= 0)
        return;
    t->fail_told = 1;
    for (uint32_t i = 1; i < t->size; i++) {
        uint32_t peer = (t->rank + i) % t->size;
        int cr = t->ranks[peer];
        if (c->ops->peer_ready != NULL && !c->ops->peer_ready(c, cr))
            continue;
        (void)c->ops->put_u64(c, cr, w, &t->peer_region[peer], wire_fail_off(&t->layout, t->rank));
    }
}

/* A peer this call still waits for or sends to has failed this call or an
 * earlier one (its failure word): it will not serve the rest. *peer and its
 * error. A peer that already did all its part of the call is not asked. */
static int coll_peer_failed(const coll_req_t *r, uint32_t *peer, int *rc)
{
    const struct arcoll_team *t = r->team;

    for (uint32_t p = 0; p < t->size; p++) {
        const coll_peer_t *cp = &r->peers[p];
        if (p == t->rank || (cp->rx_done && cp->tx_state == COLL_TX_DONE))
            continue;
        uint64_t w = wire_load(&t->region, wire_fail_off(&t->layout, p));
        if (w != 0 && wire_fail_num(w) <= (r->epoch & (UINT64_MAX >> 8))) {
            *peer = p;
            *rc = wire_fail_rc(w);
            return 1;
        }
    }
    return 0;
}

/* ARCOLL_FAULT=fail_call (util/util.h): context rank 1 fails
 * (ARCOLL_ERR_CHANNEL) the first call that has waited 300 ms, as a transport
 * error would: its peers must learn it from its failure word (coll_test
 * failtell). */
static int coll_slow_path(coll_req_t *r, uint64_t now)
{
    struct arcoll_team *t = r->team;
    chan_t *c = t->ctx->chan;
    char rx[96], tx[96];

    r->next_check_ns = now + COLL_CHECK_NS;
#ifdef ARCOLL_FAULTS
    if (eng_fault_fail_call && t->ctx->boot->rank == 1 && now - r->start_ns >= 300000000ULL) {
        eng_fault_fail_call = 0;
        log_err("%s (epoch %llu): ARCOLL_FAULT=fail_call: this call fails here",
                coll_type_name(r->type), (unsigned long long)r->epoch);
        return ARCOLL_ERR_CHANNEL;
    }
#endif
    for (uint32_t peer = 0; peer < t->size; peer++) {
        coll_peer_t *p = &r->peers[peer];
        if (peer == t->rank || (p->rx_done && p->tx_state == COLL_TX_DONE))
            continue;
        int rc = c->ops->peer_check(c, t->ranks[peer]);
        if (rc != ARCOLL_OK)
            return rc; /* logged by the channel */
    }
    uint32_t fp;
    int frc;
    if (coll_peer_failed(r, &fp, &frc)) {
        if (!(r->flags & COLL_F_NOSELF))
            log_err("%s (epoch %llu): team rank %u failed this call or an earlier one (%s) and "
                    "will not serve the rest of it",
                    coll_type_name(r->type), (unsigned long long)r->epoch, fp,
                    arcoll_strerror(frc));
        return frc;
    }
    if (now < r->deadline_ns)
        return ARCOLL_INPROGRESS;
    coll_list_peers(r, 1, rx, sizeof(rx));
    coll_list_peers(r, 0, tx, sizeof(tx));
    log_err("%s (epoch %llu, %s/%s, %zu bytes) timed out after %ld ms (ARCOLL_TIMEOUT_MS): "
            "no data yet from team ranks %s; could not finish sending to team ranks %s",
            coll_type_name(r->type), (unsigned long long)r->epoch, r->alg->name, r->proto->name,
            r->bytes, t->ctx->cfg.timeout_ms, rx, tx);
    /* What the transport knows about each peer we wait for, to tell a lost
     * peer from a stuck link (logged, not returned). */
    for (uint32_t peer = 0; c->ops->peer_describe != NULL && peer < t->size; peer++) {
        coll_peer_t *p = &r->peers[peer];
        char desc[160];
        if (peer == t->rank || (p->rx_done && p->tx_state == COLL_TX_DONE))
            continue;
        c->ops->peer_describe(c, t->ranks[peer], desc, sizeof(desc));
        log_warn("  team rank %u: rx %s (fragment %u), tx %s (fragment %u); %s", peer,
                 p->rx_done ? "done" : "waiting", p->rx_frag,
                 p->tx_state == COLL_TX_DONE ? "done"
                 : p->tx_state               ? "active"
                                             : "idle",
                 p->tx_frag, desc);
    }
    return ARCOLL_ERR_TIMEOUT;
}

/* Every 64th pass: a peer we still wait for or send to that is in another
 * call at our epoch (its words): refused and dropped as on a size mismatch,
 * the others still served. */
static int coll_lineup_check(coll_req_t *r)
{
    struct arcoll_team *t = r->team;
    uint64_t num;
    int rc;

    for (uint32_t peer = 0; peer < t->size; peer++) {
        coll_peer_t *p = &r->peers[peer];
        if (peer == t->rank || (p->rx_done && p->tx_state == COLL_TX_DONE))
            continue;
        if (!coll_other_call(r, peer, &num)) {
            /* A flat peer in another kind of call refuses a schedule with its
             * done word (§8), which nothing else of a schedule reads; our own
             * done word answers it, the word a zero-copy receive waits for. */
            if (r->proto == &coll_proto_none && coll_refused(r, peer)) {
                if (!r->deferred)
                    (void)coll_mismatch(r, peer, 0, UINT64_MAX);
                if (r->drop_peer != NULL)
                    r->drop_peer(r, peer);
                rc = coll_refuse(r, peer);
                if (rc != ARCOLL_OK)
                    return rc;
            }
            continue;
        }
        if (!r->deferred)
            coll_log_lineup(r, peer, num);
        if (r->mm_peer == 0) {
            r->mm_peer = peer + 1;
            r->mm_size = UINT64_MAX;
        }
        if (r->proto == &coll_proto_none) {
            if (r->drop_peer != NULL)
                r->drop_peer(r, peer);
            continue;
        }
        rc = coll_peer_drop(r, peer, 1);
        if (rc != ARCOLL_OK)
            return rc;
    }
    return ARCOLL_OK;
}

int eng_check_time(coll_req_t *r)
{
    uint64_t now;
    int rc;

    /* The clock is for timeouts and liveness only: read it every 64th pass. */
    if ((++r->polls & 63) != 0)
        return ARCOLL_INPROGRESS;
    rc = coll_lineup_check(r);
    if (rc != ARCOLL_OK)
        return rc;
    now = eng_time_ns(r->team->ctx);
    return now >= r->next_check_ns ? coll_slow_path(r, now) : ARCOLL_INPROGRESS;
}
