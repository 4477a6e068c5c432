/* PAP profiler, the API's side: clock offsets to rank 0 (Cristian's
 * algorithm over the world team), T(size) between ranks 0 and 1, and the
 * profile file. The engine's per-call records: prof_rec.c. Format and error
 * bounds: docs/profiling.md. */
#include "api/profile.h"
#include "dispatch/coll.h"
#include "engine/prof_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"

/* How many contexts of this process have profiled into each FILE prefix. A
 * process may hold several contexts (an MPI shim keeps one per communicator)
 * and ranks may have taken part in different numbers of them, so the k of
 * FILE.ctx<k> is agreed at prof_create. Kept for the life of the process. */
typedef struct prof_prefix {
    struct prof_prefix *next;
    unsigned uses;
    char name[CORE_CONFIG_PATH];
} prof_prefix_t;

static prof_prefix_t *prof_prefixes;

/* The use count of prefix name, created at 0; NULL if out of memory. */
static unsigned *prof_prefix_uses(const char *name)
{
    prof_prefix_t *e;

    for (e = prof_prefixes; e != NULL; e = e->next)
        if (strcmp(e->name, name) == 0)
            return &e->uses;
    e = calloc(1, sizeof(*e));
    if (e == NULL)
        return NULL;
    snprintf(e->name, sizeof(e->name), "%s", name);
    e->next = prof_prefixes;
    prof_prefixes = e;
    return &e->uses;
}

#ifdef ARCOLL_FAULTS
uint64_t prof_fault_rank, prof_fault_t0; /* profile_int.h */
#endif

/* ---- clock ------------------------------------------------------------- */

static void prof_hello_fill(prof_hello_t *h)
{
    FILE *f;
    char key[32];
    long long sec, nsec;

    memset(h, 0, sizeof(*h));
    f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
        if (fgets(h->boot_id, sizeof(h->boot_id), f) == NULL)
            h->boot_id[0] = '\0';
        fclose(f);
    }
    /* Linux >= 5.6: a time namespace may shift CLOCK_MONOTONIC. */
    f = fopen("/proc/self/timens_offsets", "r");
    if (f != NULL) {
        while (fscanf(f, "%31s %lld %lld", key, &sec, &nsec) == 3)
            if (strcmp(key, "monotonic") == 0 || strcmp(key, "1") == 0)
                h->ns_shift = (int64_t)sec * 1000000000LL + nsec;
        fclose(f);
    }
}

/* An allgather of len bytes per rank over team t (the world team after init:
 * no bootstrap, and the team's timeout bounds it when a rank is gone). */
static int prof_allgather(struct arcoll_team *t, const void *val, void *all, size_t len)
{
    coll_req_t *r;
    int rc = coll_start(t, COLL_ALLGATHER, val, all, len, NULL, &r);

    return rc == ARCOLL_INPROGRESS ? coll_wait(r) : rc;
}

/* Cristian's algorithm, every rank against rank 0 at once. In a round, rank
 * j reads s, joins allgather A, joins allgather B, reads e. Rank 0 leaves A
 * only after rank j entered it, then reads t0 and sends it in B, which rank j
 * leaves only after t0 arrived: t0 was read between s and e. So
 * t0 - (s + e) / 2 is the offset within (e - s) / 2, the round trip's half. */
static int prof_sync_run(struct arcoll_context *ctx, uint64_t *all, prof_sync_t *out)
{
    struct arcoll_team *w = ctx->teams;
    uint64_t best = UINT64_MAX, mine, s, e;
    int rc;

    memset(out, 0, sizeof(*out));
    for (int k = 0; k < PROF_ROUNDS; k++) {
        s = prof_local(core_time_ns());
        mine = s;
        rc = prof_allgather(w, &mine, all, sizeof(mine));
        if (rc != ARCOLL_OK)
            return rc;
        mine = prof_local(core_time_ns());
        rc = prof_allgather(w, &mine, all, sizeof(mine));
        if (rc != ARCOLL_OK)
            return rc;
        e = prof_local(core_time_ns());
        if (e - s < best) {
            best = e - s;
            out->local_ns = s + (e - s) / 2;
            out->offset_ns = (int64_t)all[0] - (int64_t)out->local_ns;
            out->err_ns = (e - s + 1) / 2;
        }
    }
    if (w->rank == 0) {
        out->offset_ns = 0;
        out->err_ns = 0;
    }
    out->valid = 1;
    return ARCOLL_OK;
}

/* Offset applied at local time t: exact on rank 0's clock, else the line
 * through both exchanges (linear drift), else the first one. */
static int64_t prof_offset_at(const prof_t *p, uint64_t t)
{
    const prof_sync_t *a = &p->sync[0], *b = &p->sync[1];
    double slope;

    if (p->same_clock)
        return 0;
    if (!b->valid || b->local_ns <= a->local_ns)
        return a->offset_ns;
    slope = (double)(b->offset_ns - a->offset_ns) / (double)(b->local_ns - a->local_ns);
    return a->offset_ns + (int64_t)(slope * (double)((int64_t)t - (int64_t)a->local_ns));
}

static const char *prof_clock_mode(const prof_t *p)
{
    if (p->same_clock)
        return "shared";
    return p->sync[1].valid && p->sync[1].local_ns > p->sync[0].local_ns ? "linear" : "constant";
}

int prof_create(struct arcoll_context *ctx, prof_t **out)
{
    boot_t *b = ctx->boot;
    prof_xrec_t *xbuf;
    prof_xrec_t x; /* every rank sends a whole record */
    prof_hello_t *mine = &x.hello;
    prof_t *p;
    unsigned *uses = NULL;
    int all_ok = 1, rc;

    *out = NULL;
    xbuf = calloc((size_t)b->size, sizeof(*xbuf));
    if (xbuf == NULL) {
        /* Cannot take part: the others will fail in the bootstrap. */
        log_err("arcoll_init: out of memory (ARCOLL_PROFILE)");
        return ARCOLL_ERR_NOMEM;
    }
    p = calloc(1, sizeof(*p));
    memset(&x, 0, sizeof(x));
    prof_hello_fill(mine);
    if (ctx->cfg.profile[0] != '\0') {
        uses = prof_prefix_uses(ctx->cfg.profile);
        mine->seq = uses != NULL ? *uses : 0;
    }
    mine->ok = p != NULL && (uses != NULL || ctx->cfg.profile[0] == '\0');
    rc = b->allgather(b, &x, xbuf, sizeof(*xbuf));
    if (rc != ARCOLL_OK)
        goto err_p;
    for (int i = 0; i < b->size; i++)
        all_ok &= xbuf[i].hello.ok != 0;
    if (!all_ok) {
        log_warn("ARCOLL_PROFILE: a rank is out of memory; profiling is off");
        rc = ARCOLL_OK;
        goto err_p;
    }
    p->xbuf = xbuf;
    /* The largest count of any rank: a number none of them has used yet. */
    for (int i = 0; i < b->size; i++)
        if (xbuf[i].hello.seq > p->seq)
            p->seq = (unsigned)xbuf[i].hello.seq;
    if (uses != NULL)
        *uses = p->seq + 1;
    p->same_clock = mine->boot_id[0] != '\0' && strcmp(mine->boot_id, xbuf[0].hello.boot_id) == 0 &&
                    mine->ns_shift == xbuf[0].hello.ns_shift;
#ifdef ARCOLL_FAULTS
    {
        const char *f = getenv("ARCOLL_FAULT");
        if (f != NULL && strstr(f, "clock_skew") != NULL) {
            prof_fault_rank = (uint64_t)b->rank;
            prof_fault_t0 = core_time_ns();
            p->same_clock = 0;
        }
    }
#endif
    p->record = ctx->cfg.profile[0] != '\0';
    p->cfg0 = ctx->cfg;
    if (p->record) {
        p->recs = malloc(sizeof(*p->recs) * PROF_FIRST_RECS);
        p->cap = p->recs != NULL ? PROF_FIRST_RECS : 0;
    } else {
        log_warn("ARCOLL_PROFILE is set on other ranks but not on this one: it records nothing");
    }
    rc = prof_sync_run(ctx, &xbuf[0].stamp, &p->sync[0]);
    if (rc != ARCOLL_OK)
        goto err_recs;
    log_debug("profile: clock offset to rank 0 %lld ns (+-%llu ns)%s",
              (long long)p->sync[0].offset_ns, (unsigned long long)p->sync[0].err_ns,
              p->same_clock ? ", same clock: 0 applied" : "");
    *out = p;
    return ARCOLL_OK;

err_recs:
    free(p->recs);
err_p:
    free(p);
    free(xbuf);
    return rc;
}

/* ---- T(size) ----------------------------------------------------------- */

static void prof_sizes_add(prof_sizes_t *set, uint64_t v)
{
    unsigned lo = 0, hi = set->n;

    /* A call of 0 bytes moves nothing: there is no T(0) to measure (and
     * prof_t_reps would divide by it). */
    if (v == 0)
        return;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (set->v[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < set->n && set->v[lo] == v)
        return;
    if (set->n == PROF_SIZE_SET) {
        /* Keep the extremes: T is interpolated between measured sizes. */
        if (lo == 0)
            set->v[0] = v;
        else if (lo == set->n)
            set->v[set->n - 1] = v;
        return;
    }
    memmove(&set->v[lo + 1], &set->v[lo], sizeof(set->v[0]) * (set->n - lo));
    set->v[lo] = v;
    set->n++;
}

/* At most PROF_NSIZES of the set, evenly by rank, smallest and largest included. */
static unsigned prof_sizes_pick(const prof_sizes_t *set, uint64_t *out)
{
    unsigned k = set->n < PROF_NSIZES ? set->n : PROF_NSIZES;

    for (unsigned i = 0; i < k; i++)
        out[i] = set->v[k > 1 ? (size_t)i * (set->n - 1) / (k - 1) : 0];
    return k;
}

static uint64_t prof_median(uint64_t *v, unsigned n)
{
    for (unsigned i = 1; i < n; i++)
        for (unsigned j = i; j > 0 && v[j - 1] > v[j]; j--) {
            uint64_t x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    return v[n / 2];
}

static unsigned prof_t_reps(uint64_t size)
{
    uint64_t reps = PROF_T_VOLUME / size;

    return reps < 1 ? 1 : reps > PROF_T_MAXREPS ? PROF_T_MAXREPS : (unsigned)reps;
}

/* One message of size: an allgather of the team {0, 1} (each member sends
 * the other one message), or a memcpy when alone. */
static int prof_t_once(struct arcoll_team *t, char *buf, size_t max, size_t size)
{
    coll_req_t *r;
    int rc;

    if (t == NULL) {
        memcpy(buf + max, buf, size);
        __asm__ __volatile__("" ::: "memory"); /* keep the copy */
        return ARCOLL_OK;
    }
    rc = coll_start(t, COLL_ALLGATHER, buf, buf + max, size, NULL, &r);
    return rc == ARCOLL_INPROGRESS ? coll_wait(r) : rc;
}

/* T(size) for each size: the median over batches of a batch's mean time per
 * call. Means, because back-to-back exchanges alternate between a call whose
 * data is already there and one that waits for the peer; batches
 * interleaved over the sizes, so that a disturbance hits them alike. Only
 * rank 0 keeps the result. */
static int prof_t_batches(struct arcoll_team *t, char *buf, const uint64_t *sizes, unsigned nsz,
                          uint64_t (*d)[PROF_T_BATCHES])
{
    size_t max = (size_t)sizes[nsz - 1];
    int rc = ARCOLL_OK;

    for (unsigned i = 0; rc == ARCOLL_OK && i < nsz; i++)
        for (unsigned k = 0; rc == ARCOLL_OK && k < PROF_T_WARMUP; k++)
            rc = prof_t_once(t, buf, max, (size_t)sizes[i]);
    for (unsigned b = 0; rc == ARCOLL_OK && b < PROF_T_BATCHES; b++) {
        for (unsigned i = 0; rc == ARCOLL_OK && i < nsz; i++) {
            unsigned reps = prof_t_reps(sizes[i]);
            uint64_t s = core_time_ns();
            for (unsigned k = 0; rc == ARCOLL_OK && k < reps; k++)
                rc = prof_t_once(t, buf, max, (size_t)sizes[i]);
            d[i][b] = (core_time_ns() - s) / reps;
        }
    }
    return rc;
}

/* A barrier over the world team that sleeps while it waits: the ranks that
 * do not measure T wait here while ranks 0 and 1 do, and must leave them the
 * cores (a polling wait there inflated T many times over, 3 ranks on 2 cores). */
static int prof_world_rest(struct arcoll_context *ctx)
{
    const struct timespec nap = {0, 50000};
    int32_t zero = 0, any = 0;
    coll_args_t a = {.type = COLL_ALLREDUCE,
                     .sbuf = (const char *)&zero,
                     .rbuf = (char *)&any,
                     .count = 1,
                     .dtype = ARCOLL_INT32,
                     .op = ARCOLL_MAX,
                     .internal = 1};
    coll_req_t *r;
    int rc = coll_start_args(ctx->teams, &a, NULL, &r);

    while (rc == ARCOLL_INPROGRESS) {
        nanosleep(&nap, NULL);
        rc = coll_progress(r);
    }
    return rc;
}

/* With the settings of arcoll_init (the ARCOLL_* environment): T is a
 * property of the system, not of what arcoll_config_set chose last. */
static void prof_t_measure(struct arcoll_context *ctx, prof_t *p, const uint64_t *sizes,
                           unsigned nsz)
{
    static const int pair[2] = {0, 1};
    uint64_t max = sizes[nsz - 1], d[PROF_NSIZES][PROF_T_BATCHES];
    int me = ctx->boot->rank, single = ctx->boot->size == 1, rc = ARCOLL_OK, brc;
    core_config_t cfg = ctx->cfg;
    struct arcoll_team *t = NULL;
    char *buf = NULL;

    ctx->cfg = p->cfg0;
    if (me < 2 && max <= SIZE_MAX / 3) {
        buf = calloc(3, (size_t)max);
        if (buf == NULL)
            log_warn("ARCOLL_PROFILE: no memory to measure T for %llu bytes",
                     (unsigned long long)max);
    }
    /* Collective over all ranks even if this one has no buffer: the other
     * member then sees that this one did not join, and nobody waits. A split
     * of the world team, over its channel (no bootstrap after init). */
    if (!single) {
        rc = arcoll_team_create(ctx, pair, buf != NULL ? 2 : 0, &t);
        if (rc != ARCOLL_OK)
            log_warn("ARCOLL_PROFILE: cannot create the team {0, 1} to measure T (%s)",
                     arcoll_strerror(rc));
    }
    if (buf != NULL && (single || t != NULL)) {
        rc = prof_t_batches(t, buf, sizes, nsz, d);
        if (rc != ARCOLL_OK)
            log_warn("ARCOLL_PROFILE: measuring T failed (%s)", arcoll_strerror(rc));
        for (unsigned i = 0; rc == ARCOLL_OK && me == 0 && i < nsz; i++) {
            p->tsize[i] = sizes[i];
            p->t_ns[i] = prof_median(d[i], PROF_T_BATCHES);
            p->t_reps[i] = PROF_T_BATCHES * prof_t_reps(sizes[i]);
            p->nt = i + 1;
        }
    }
    p->t_method = single ? "memcpy" : "allgather-ranks-0-1";
    /* Its members only: the free's closing exchange over the team keeps
     * either from freeing its region while the other may still write. */
    if (t != NULL) {
        brc = arcoll_team_free(t);
        if (brc != ARCOLL_OK)
            log_warn("ARCOLL_PROFILE: freeing the team that measured T failed (%s)",
                     arcoll_strerror(brc));
    }
    if (!single && (brc = prof_world_rest(ctx)) != ARCOLL_OK)
        log_warn("ARCOLL_PROFILE: barrier after measuring T failed (%s)", arcoll_strerror(brc));
    free(buf);
    ctx->cfg = cfg;
}

static void prof_fini_collective(struct arcoll_context *ctx, prof_t *p)
{
    struct arcoll_team *w = ctx->teams;
    prof_sizes_t set;
    prof_xrec_t x;
    prof_bye_t *mine = &x.bye;
    uint64_t sizes[PROF_NSIZES];
    unsigned nsz;
    int rc;

    memset(&x, 0, sizeof(x));
    set.n = 0;
    for (size_t i = 0; i < p->nrecs; i++)
        prof_sizes_add(&set, p->recs[i].bytes);
    mine->nsizes = prof_sizes_pick(&set, mine->sizes);
    /* Over the world team, not the bootstrap: calls still in flight on it
     * finish first (every rank started them); a rank whose world team failed
     * takes no part, and the others' exchange ends in the team's timeout. */
    rc = w->failed ? w->failed : coll_team_drain(w);
    if (rc == ARCOLL_OK)
        rc = prof_allgather(w, &x, p->xbuf, sizeof(*p->xbuf));
    if (rc != ARCOLL_OK) {
        log_warn("ARCOLL_PROFILE: exchange at finalize failed (%s); no T, one clock exchange",
                 arcoll_strerror(rc));
        return;
    }
    set.n = 0;
    for (int r = 0; r < (int)w->size; r++) {
        const prof_bye_t *bye = &p->xbuf[r].bye;
        for (uint64_t i = 0; i < bye->nsizes && i < PROF_NSIZES; i++)
            prof_sizes_add(&set, bye->sizes[i]);
    }
    /* Every rank goes on alike: the exchange completed everywhere. */
    rc = prof_sync_run(ctx, &p->xbuf[0].stamp, &p->sync[1]);
    if (rc != ARCOLL_OK) {
        log_warn("ARCOLL_PROFILE: clock exchange at finalize failed (%s); the offset "
                 "from arcoll_init is used",
                 arcoll_strerror(rc));
        return;
    }
    nsz = prof_sizes_pick(&set, sizes);
    if (nsz > 0)
        prof_t_measure(ctx, p, sizes, nsz);
}

/* ---- file -------------------------------------------------------------- */

/* "symbol+0xoff" if the dynamic symbol table knows the address, else
 * "module+0xoff" with the offset addr2line expects for that module. */
static const char *prof_site_label(const void *addr, char *label, size_t len, char *exe,
                                   size_t exelen)
{
    struct link_map *lm = NULL;
    const char *module = "?", *base;
    Dl_info info;
    ssize_t n;

    if (addr != NULL && dladdr1(addr, &info, (void **)&lm, RTLD_DL_LINKMAP) != 0) {
        if (info.dli_fname != NULL && info.dli_fname[0] != '\0')
            module = info.dli_fname;
        /* The main program is named as argv[0]; its absolute path serves addr2line. */
        if (lm != NULL && lm->l_name[0] == '\0' &&
            (n = readlink("/proc/self/exe", exe, exelen - 1)) > 0) {
            exe[n] = '\0';
            module = exe;
        }
        base = strrchr(module, '/') != NULL ? strrchr(module, '/') + 1 : module;
        if (info.dli_sname != NULL && info.dli_saddr != NULL)
            snprintf(label, len, "%.200s+0x%tx", info.dli_sname,
                     (const char *)addr - (const char *)info.dli_saddr);
        else
            snprintf(label, len, "%.200s+0x%" PRIxPTR, base,
                     (uintptr_t)addr - (uintptr_t)(lm != NULL ? lm->l_addr : 0));
        return module;
    }
    snprintf(label, len, "0x%" PRIxPTR, (uintptr_t)addr);
    return module;
}

static const char *prof_type_name(uint32_t type)
{
    return coll_type_name((coll_type_t)type);
}

/* Index of addr in sites, appended if new; -1 when out of memory. */
static long prof_site_index(const void ***sites, size_t *n, size_t *cap, const void *addr)
{
    for (size_t i = *n; i > 0; i--)
        if ((*sites)[i - 1] == addr)
            return (long)(i - 1);
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        const void **s = realloc(*sites, sizeof(*s) * ncap);
        if (s == NULL)
            return -1;
        *sites = s;
        *cap = ncap;
    }
    (*sites)[*n] = addr;
    return (long)(*n)++;
}

static int prof_write(struct arcoll_context *ctx, prof_t *p, const char *path)
{
    const boot_t *b = ctx->boot;
    const void **sites = NULL;
    size_t nsites = 0, cap = 0;
    long *site_of = NULL;
    char label[256], exe[4096];
    FILE *f = NULL;
    int rc = -1;

    site_of = malloc(sizeof(*site_of) * (p->nrecs ? p->nrecs : 1));
    if (site_of == NULL)
        goto out;
    for (size_t i = 0; i < p->nrecs; i++) {
        site_of[i] = prof_site_index(&sites, &nsites, &cap, p->recs[i].site);
        if (site_of[i] < 0)
            goto out;
    }
    f = fopen(path, "w");
    if (f == NULL)
        goto out;
    fprintf(f, "arcoll-pap-profile %d\n", PROF_FORMAT_VERSION);
    fprintf(f, "rank %d\nnranks %d\nhost %s\ncontext %u\n", b->rank, b->size, b->hostname, p->seq);
    for (int k = 0; k < 2; k++) {
        const prof_sync_t *s = &p->sync[k];
        if (s->valid)
            fprintf(f, "sync %s %" PRIu64 " %" PRId64 " %" PRIu64 "\n", k ? "finalize" : "init",
                    s->local_ns, s->offset_ns, s->err_ns);
        else
            fprintf(f, "sync %s none\n", k ? "finalize" : "init");
    }
    fprintf(f, "clock %s\n", prof_clock_mode(p));
    fprintf(f, "calls %zu\ndropped %" PRIu64 "\n", p->nrecs, p->dropped);
    for (size_t i = 0; i < nsites; i++) {
        const char *module = prof_site_label(sites[i], label, sizeof(label), exe, sizeof(exe));
        fprintf(f, "site %zu %s 0x%" PRIxPTR " %s\n", i, label, (uintptr_t)sites[i], module);
    }
    if (p->nt > 0)
        fprintf(f, "tmethod %s\n", p->t_method);
    for (unsigned i = 0; i < p->nt; i++)
        fprintf(f, "tsize %" PRIu64 " %" PRIu64 " %u\n", p->tsize[i], p->t_ns[i], p->t_reps[i]);
    fprintf(f, "# type team leader team_size epoch bytes site arrive_ns exit_ns status\n");
    for (size_t i = 0; i < p->nrecs; i++) {
        const prof_rec_t *r = &p->recs[i];
        uint64_t exit_ns = r->exit_ns ? r->exit_ns : r->arrive_ns;
        fprintf(f,
                "%s %" PRIu32 " %" PRIu32 " %" PRIu32 " %" PRIu64 " %" PRIu64 " %ld %" PRId64
                " %" PRId64 " %d\n",
                prof_type_name(r->type), r->team_id, r->leader, r->team_size, r->epoch, r->bytes,
                site_of[i], (int64_t)r->arrive_ns + prof_offset_at(p, r->arrive_ns),
                (int64_t)exit_ns + prof_offset_at(p, exit_ns), (int)r->status);
    }
    fprintf(f, "end %zu\n", p->nrecs);
    rc = ferror(f) ? -1 : 0;
out:
    if (f != NULL && fclose(f) != 0)
        rc = -1;
    free(site_of);
    free(sites);
    return rc;
}

void prof_finalize(struct arcoll_context *ctx, prof_t *p, int lost)
{
    char path[CORE_CONFIG_PATH + 32];

    if (!lost)
        prof_fini_collective(ctx, p);
    if (p->record) {
        if (p->seq == 0)
            snprintf(path, sizeof(path), "%s.%d", ctx->cfg.profile, ctx->boot->rank);
        else
            snprintf(path, sizeof(path), "%s.ctx%u.%d", ctx->cfg.profile, p->seq, ctx->boot->rank);
        if (prof_write(ctx, p, path) != 0)
            log_warn("ARCOLL_PROFILE: cannot write %s: %s", path, strerror(errno));
    }
    free(p->recs);
    free(p->xbuf);
    free(p);
}
