/* The dispatcher: validation of a call in the caller's terms, the choice of
 * algorithm (configuration, tuning table, fallbacks; the same on every rank)
 * from the one list of config/algs.h, then the engine runs it. */
#include <stdio.h>
#include <string.h>

#include "config/tune.h"
#include "dispatch/coll.h"
#include "engine/reduce.h"
#include "util/log.h"

#define COLL_ALG_EXTERN(id, name, colls) extern const coll_alg_t coll_alg_##name;
CORE_ALG_LIST(COLL_ALG_EXTERN)
#define COLL_ALG_PTR(id, name, colls) [CORE_ALG_##id] = &coll_alg_##name,
static const coll_alg_t *const coll_algs[CORE_ALG_COUNT] = {CORE_ALG_LIST(COLL_ALG_PTR)};

const coll_alg_t *coll_alg_by_id(int id)
{
    return id >= 0 && id < CORE_ALG_COUNT ? coll_algs[id] : NULL;
}

int coll_alg_serves(int id, coll_type_t type)
{
    return id != CORE_ALG_AUTO && core_alg_serves(id, (int)type);
}

static int coll_alg_id(const coll_alg_t *alg)
{
    for (int i = 0; i < CORE_ALG_COUNT; i++)
        if (coll_algs[i] == alg)
            return i;
    return CORE_ALG_PAP;
}

/* The tuning table's pick for the team's shape (both sizes and shapes agree
 * on every rank). */
static int coll_tune_ask(const struct arcoll_team *t, int coll, size_t bytes,
                         const core_tune_shape_t *shape)
{
    return core_tune_pick(&t->ctx->cfg.tune, coll, bytes, shape);
}

static int coll_tune_pick(struct arcoll_team *t, int coll, size_t bytes)
{
    return eng_memo(t, &t->alg_memo, coll, bytes, coll_tune_ask);
}

/* auto for the collectives the tuning table does not cover. Measured on one
 * host (docs/measurements/new-collectives.md: 2 and 4 ranks, 8 B-1 MiB): the
 * linear pap is the fastest of pap, ring, rdd and rdh at every size, so it
 * runs on one node. Across nodes, with many ranks and small blocks, seed
 * 003's rdh (log2 N start-ups instead of N - 1, the largest messages between
 * the nearest ranks) is the choice; that rule is the seed's, not measured
 * here (no network), and the scale simulator will set it. Every input is the
 * same on every rank (team shape, count, the agreed rcounts). */
static int coll_auto_pick(struct arcoll_team *t, const coll_args_t *a)
{
    uint32_t nodes = t->hier != NULL ? t->hier->nnodes : t->size;
    size_t block = 0;
    int id;

    switch (a->type) {
    case COLL_ALLTOALL:
    case COLL_ALLGATHER: return coll_tune_pick(t, (int)a->type, a->bytes);
    case COLL_ALLGATHERV:
        /* the mean block, from rcounts (the own block differs from rank to rank) */
        for (uint32_t j = 0; a->rcounts != NULL && j < t->size; j++)
            block += a->rcounts[j] / t->size;
        if (a->rcounts == NULL)
            block = a->bytes; /* coll_alg_resolve: a size, no call */
        /* The table's rules where it has one (sh_co on one node), else below. */
        id = coll_tune_pick(t, (int)a->type, block);
        if (id != CORE_ALG_PAP)
            return id;
        break;
    case COLL_REDUCE_SCATTER: block = a->count * a->elem; break;
    case COLL_ALLREDUCE: block = a->count * a->elem / (t->size ? t->size : 1); break;
    case COLL_ALLTOALLV:
        /* From the team's shape only, never the counts (each rank knows just
         * its own): every rank picks alike (docs/protocol.md §14). sloav, not
         * sloavx: in the scale simulator (docs/scale.md, "000") sloavx is
         * 1.4-2.7x faster at 1-16 B but up to 1.33x slower at 256 B with 16
         * ranks a node, and slower on one host; the shape cannot tell which. */
        return nodes >= 2 && t->size >= 16 ? CORE_ALG_SLOAV : CORE_ALG_PAP;
    default: return CORE_ALG_PAP;
    }
    return nodes >= 2 && t->size >= 16 && block <= 2048 ? CORE_ALG_RDH : CORE_ALG_PAP;
}

/* The algorithm that runs: the configured one (auto resolved), or its
 * fallback with a one-line notice per team when it cannot run this call. */
static const coll_alg_t *coll_alg_pick(struct arcoll_team *t, const coll_args_t *a, int id)
{
    const coll_alg_t *alg;
    const char *why;

    if (id == CORE_ALG_AUTO)
        id = coll_auto_pick(t, a);
    for (int hops = 0; hops < CORE_ALG_COUNT; hops++) {
        alg = coll_algs[id];
        why = alg->unfit != NULL ? alg->unfit(t, a) : NULL;
        if (why == NULL && coll_alg_serves(id, a->type))
            return alg;
        if (why == NULL)
            why = "it does not serve this collective";
        if (!t->hier_noticed++ && t->rank == 0)
            log_info("%s: %s runs as %s on this team (%s)", coll_type_name(a->type), alg->name,
                     coll_algs[alg->fallback]->name, why);
        id = alg->fallback;
    }
    return coll_algs[CORE_ALG_PAP];
}

int coll_alg_resolve(struct arcoll_team *t, coll_type_t type, size_t bytes, int alg, int *picked,
                     const char **why)
{
    int noticed = t->hier_noticed;
    coll_args_t a;
    const coll_alg_t *run;

    memset(&a, 0, sizeof(a));
    a.type = type;
    a.bytes = bytes;
    a.count = bytes; /* the reductions: bytes as one-byte elements */
    a.elem = 1;
    if (alg == CORE_ALG_AUTO)
        alg = coll_auto_pick(t, &a);
    t->hier_noticed = 1; /* nothing runs: no fallback notice */
    run = coll_alg_pick(t, &a, alg);
    t->hier_noticed = noticed;
    *picked = alg;
    *why = NULL;
    if (run != coll_algs[alg])
        *why = coll_algs[alg]->unfit != NULL ? coll_algs[alg]->unfit(t, &a) : NULL;
    if (run != coll_algs[alg] && *why == NULL)
        *why = "it does not serve this collective";
    return coll_alg_id(run);
}

static int coll_overlap(const void *a, size_t alen, const void *b, size_t blen)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

    return alen && blen && x < y + blen && y < x + alen;
}

/* The bytes [lo, hi) a v-form's blocks span; INVALID if a block overflows. */
static int coll_span(const char *what, const char *name, uint32_t n, const size_t *counts,
                     const size_t *displs, size_t *lo, size_t *hi)
{
    *lo = SIZE_MAX;
    *hi = 0;
    for (uint32_t j = 0; j < n; j++) {
        if (counts[j] == 0)
            continue;
        if (displs[j] > SIZE_MAX - counts[j] || displs[j] + counts[j] > (size_t)INT64_MAX) {
            log_err("%s: block %u of the %s buffer (%zu bytes at %zu) overflows", what, j, name,
                    counts[j], displs[j]);
            return ARCOLL_ERR_INVALID;
        }
        if (displs[j] < *lo)
            *lo = displs[j];
        if (displs[j] + counts[j] > *hi)
            *hi = displs[j] + counts[j];
    }
    if (*hi == 0)
        *lo = 0;
    return ARCOLL_OK;
}

/* A flat v-form's block of len bytes: few enough copy-path fragments that
 * their numbers stay clear of the reject word (wire.h). */
static int coll_frags_ok(const struct arcoll_team *t, const char *what, size_t len)
{
    if (len / t->layout.frag + 1 < WIRE_FRAG_REJECT)
        return ARCOLL_OK;
    log_err("%s: a %zu-byte block needs too many fragments on the copy path", what, len);
    return ARCOLL_ERR_INVALID;
}

/* Validate a call in the caller's terms. *empty: 0 bytes (0 elements) on this
 * rank: it runs as a 0-byte exchange (coll_submit). */
static int coll_validate(const struct arcoll_team *t, coll_args_t *a, int *empty)
{
    const char *what = coll_type_name(a->type);
    size_t n = t->size, slo = 0, shi = 0, rlo = 0, rhi = 0;
    int rc;

    *empty = 0;
    switch (a->type) {
    case COLL_ALLTOALL:
    case COLL_ALLGATHER:
        if (a->bytes == 0) {
            *empty = 1;
            return ARCOLL_OK;
        }
        if (a->bytes > SIZE_MAX / n || a->bytes > INT64_MAX / n) {
            log_err("%s: %zu bytes per rank times %zu ranks overflows", what, a->bytes, n);
            return ARCOLL_ERR_INVALID;
        }
        rhi = a->bytes * n;
        shi = a->in_place ? 0 : a->type == COLL_ALLTOALL ? rhi : a->bytes;
        break;
    case COLL_ALLTOALLV:
        if (a->rcounts == NULL || a->rdispls == NULL ||
            (!a->in_place && (a->scounts == NULL || a->sdispls == NULL))) {
            log_err("%s: a count or displacement array is NULL", what);
            return ARCOLL_ERR_INVALID;
        }
        rc = coll_span(what, "receive", t->size, a->rcounts, a->rdispls, &rlo, &rhi);
        if (rc == ARCOLL_OK && !a->in_place)
            rc = coll_span(what, "send", t->size, a->scounts, a->sdispls, &slo, &shi);
        if (rc != ARCOLL_OK)
            return rc;
        if (!a->in_place) { /* the longest block bounds every block's fragments */
            size_t most = 0;
            for (uint32_t j = 0; j < t->size; j++) {
                if (a->scounts[j] > most)
                    most = a->scounts[j];
                if (a->rcounts[j] > most)
                    most = a->rcounts[j];
            }
            rc = coll_frags_ok(t, what, most);
            if (rc != ARCOLL_OK)
                return rc;
        }
        if (!a->in_place && a->scounts[t->rank] != a->rcounts[t->rank]) {
            log_err("%s: this rank sends itself %zu bytes but expects %zu from itself", what,
                    a->scounts[t->rank], a->rcounts[t->rank]);
            return ARCOLL_ERR_MISMATCH;
        }
        break;
    case COLL_ALLGATHERV:
        if (a->rcounts == NULL || a->rdispls == NULL) {
            log_err("%s: a count or displacement array is NULL", what);
            return ARCOLL_ERR_INVALID;
        }
        if (!a->in_place && a->rcounts[t->rank] != a->bytes) {
            log_err("%s: this rank sends %zu bytes but its rcounts[%u] is %zu: they must agree",
                    what, a->bytes, t->rank, a->rcounts[t->rank]);
            return ARCOLL_ERR_MISMATCH;
        }
        if (a->in_place)
            a->bytes = a->rcounts[t->rank];
        if (!a->in_place) {
            size_t most = 0;
            for (uint32_t j = 0; j < t->size; j++)
                if (a->rcounts[j] > most)
                    most = a->rcounts[j];
            rc = coll_frags_ok(t, what, most);
            if (rc != ARCOLL_OK)
                return rc;
        }
        rc = coll_span(what, "receive", t->size, a->rcounts, a->rdispls, &rlo, &rhi);
        if (rc != ARCOLL_OK)
            return rc;
        shi = a->in_place ? 0 : a->bytes;
        break;
    case COLL_REDUCE_SCATTER:
    case COLL_ALLREDUCE:
        rc = reduce_check(a->dtype, a->op, what);
        if (rc != ARCOLL_OK)
            return rc;
        a->elem = arcoll_dtype_size(a->dtype);
        if (a->count == 0) {
            *empty = 1;
            return ARCOLL_OK;
        }
        if (a->count > (size_t)INT64_MAX / a->elem / n) {
            log_err("%s: %zu elements of %zu bytes times %zu ranks overflows", what, a->count,
                    a->elem, n);
            return ARCOLL_ERR_INVALID;
        }
        a->bytes = a->count * a->elem;
        if (a->type == COLL_REDUCE_SCATTER) {
            rhi = a->in_place ? a->bytes * n : a->bytes;
            shi = a->in_place ? 0 : a->bytes * n;
        } else {
            rhi = a->bytes;
            shi = a->in_place ? 0 : a->bytes;
        }
        break;
    default: log_err("collective %d unknown", (int)a->type); return ARCOLL_ERR_INVALID;
    }
    if (a->rbuf == NULL && rhi > 0) {
        log_err("%s: receive buffer is NULL", what);
        return ARCOLL_ERR_INVALID;
    }
    if (!a->in_place && a->sbuf == NULL && shi > 0) {
        log_err("%s: send buffer is NULL", what);
        return ARCOLL_ERR_INVALID;
    }
    if (!a->in_place &&
        coll_overlap(a->sbuf + slo, shi - slo, a->rbuf + rlo, rhi > rlo ? rhi - rlo : 0)) {
        log_err("%s: send buffer [%p,+%zu) and receive buffer [%p,+%zu) overlap (use "
                "ARCOLL_IN_PLACE)",
                what, (const void *)(a->sbuf + slo), shi - slo, (void *)(a->rbuf + rlo), rhi - rlo);
        return ARCOLL_ERR_INVALID;
    }
    if ((a->type == COLL_ALLTOALL || a->type == COLL_ALLGATHER) &&
        (a->bytes + t->layout.frag - 1) / t->layout.frag >= WIRE_FRAG_REJECT) {
        log_err("%s: %zu bytes per rank needs too many %llu-byte fragments on the copy path", what,
                a->bytes, (unsigned long long)t->layout.frag);
        return ARCOLL_ERR_INVALID;
    }
    return ARCOLL_OK;
}

static uint64_t coll_sig_mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x100000001b3ULL;
}

/* The part of a call that must be equal on every rank (coll_args_t.sig). */
static uint64_t coll_sig(const struct arcoll_team *t, const coll_args_t *a)
{
    uint64_t h = coll_sig_mix(0xcbf29ce484222325ULL, (uint64_t)a->type + 1);

    switch (a->type) {
    case COLL_ALLGATHER: return coll_sig_mix(h, a->bytes);
    case COLL_ALLGATHERV:
        for (uint32_t j = 0; j < t->size; j++)
            h = coll_sig_mix(h, a->rcounts != NULL ? a->rcounts[j] : a->bytes);
        return h;
    case COLL_REDUCE_SCATTER:
    case COLL_ALLREDUCE:
        h = coll_sig_mix(h, a->count);
        h = coll_sig_mix(h, (uint64_t)a->dtype);
        return coll_sig_mix(h, (uint64_t)a->op);
    default: return h; /* alltoall(v): per-pair lengths are checked message by message */
    }
}

static int coll_cfg_alg(const core_config_t *cfg, coll_type_t type)
{
    switch (type) {
    case COLL_ALLTOALL: return cfg->alltoall_alg;
    case COLL_ALLGATHER: return cfg->allgather_alg;
    case COLL_ALLTOALLV: return cfg->alltoallv_alg;
    case COLL_ALLGATHERV: return cfg->allgatherv_alg;
    case COLL_REDUCE_SCATTER: return cfg->reduce_scatter_alg;
    default: return cfg->allreduce_alg;
    }
}

int coll_start_args(struct arcoll_team *t, const coll_args_t *given, const void *site,
                    coll_req_t **out)
{
    return coll_submit(t, given, site, NULL, out);
}

int coll_submit(struct arcoll_team *t, const coll_args_t *given, const void *site,
                struct arcoll_request *u, coll_req_t **out)
{
    coll_args_t a = *given;
    const coll_alg_t *alg;
    int empty, rc, id;

    *out = NULL;
    if (t->failed) {
        log_err("%s: this team failed earlier (%s); its epochs may disagree across "
                "ranks, so it accepts no further collectives",
                coll_type_name(a.type), arcoll_strerror(t->failed));
        return ARCOLL_ERR_STATE;
    }
    rc = coll_validate(t, &a, &empty);
    if (rc != ARCOLL_OK)
        return rc;
    if (empty) {
        /* A 0-byte call (0 elements) is a call like any other: it takes its
         * epoch and runs as a 0-byte pap alltoall on the copy path, one
         * header of size 0 to and from every peer. So where another rank
         * passed data, both sides meet a size mismatch (docs/protocol.md
         * §8), and the 0-byte rank learns it within its own call. */
        coll_type_t was = a.type;
        uint64_t call = a.call;
        int internal = a.internal;
        memset(&a, 0, sizeof(a));
        a.type = COLL_ALLTOALL;
        a.call = call;
        a.internal = internal;
        a.sig = coll_sig(t, &a) ^ (uint64_t)was;
        alg = coll_algs[CORE_ALG_PAP];
        /* not profiled: the profile is of the collectives that move data */
        if (u != NULL && eng_must_queue(t, alg))
            return eng_enqueue(t, &a, alg, COLL_F_NOPROF, site, u);
        return eng_start(t, &a, alg, COLL_F_NOPROF, site, out);
    }
    if (a.in_place)
        a.sbuf = NULL;
    a.sig = coll_sig(t, &a);
    /* In place, alltoall and allgather are their v-forms with equal blocks:
     * the schedules keep what must not be overwritten (engine/sched.h). */
    if (a.in_place && (a.type == COLL_ALLTOALL || a.type == COLL_ALLGATHER)) {
        a.type = a.type == COLL_ALLTOALL ? COLL_ALLTOALLV : COLL_ALLGATHERV;
        id = coll_cfg_alg(&t->ctx->cfg, given->type);
        if (!coll_alg_serves(id, a.type))
            id = CORE_ALG_PAP;
    } else {
        id = a.internal ? CORE_ALG_AUTO : coll_cfg_alg(&t->ctx->cfg, a.type);
    }
    alg = coll_alg_pick(t, &a, id);
    /* A nonblocking start never waits for a peer: behind a full window it
     * queues (MPI's rule that a start is local; docs/protocol.md §5). */
    if (u != NULL && eng_must_queue(t, alg))
        return eng_enqueue(t, &a, alg, id == CORE_ALG_AUTO ? COLL_F_AUTO : 0, site, u);
    return eng_start(t, &a, alg, id == CORE_ALG_AUTO ? COLL_F_AUTO : 0, site, out);
}

int coll_start(struct arcoll_team *t, coll_type_t type, const void *sbuf, void *rbuf, size_t bytes,
               const void *site, coll_req_t **out)
{
    coll_args_t a;

    memset(&a, 0, sizeof(a));
    a.type = type;
    a.sbuf = sbuf;
    a.rbuf = rbuf;
    a.bytes = bytes;
    a.in_place = sbuf == ARCOLL_IN_PLACE;
    return coll_start_args(t, &a, site, out);
}
