#include "config/config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arcoll.h"
#include "util/log.h"

#define CFG_CHAN_NAME(id, name) #name,
static const char *const cfg_channels[] = {CHAN_LIST(CFG_CHAN_NAME) NULL};
/* The names of config/algs.h's list (the index is the CORE_ALG_* value), then
 * auto; core_config_set refuses one that does not serve the variable's
 * collective. */
#define CFG_ALG_NAME(id, name, colls) #name,
static const char *const cfg_algs[] = {CORE_ALG_LIST(CFG_ALG_NAME) "auto", NULL};
static const char *const cfg_paths[] = {"copy", "zcopy", "auto", NULL};
static const char *const cfg_lanes[] = {"1", "2", "4", NULL}; /* log2 of the lanes */
static const char *const cfg_sched_orders[] = {"arrival", "fixed", NULL};
static const char *const cfg_logs[] = {"none", "error", "warn", "info", "debug", NULL};
static const char *const cfg_onoff[] = {"off", "on", NULL};
static const char *const cfg_heap_mr[] = {"auto", "pin", "off", NULL};
static const char *const cfg_profile_form[] = {"FILE", NULL};

#define CFG_OFF(f) offsetof(core_config_t, f)

/* The core's rows before the channels'. */
static const core_setting_t cfg_rows_head[] = {
    {"ARCOLL_CHANNEL", CORE_SETTING_ENUM, CFG_OFF(channel), cfg_channels, "smp", 0, 0, 1,
     "transport: smp (shared memory, one node), verbs (InfiniBand/RoCE) or sim (the model "
     "channel of arcoll-sim, docs/scale.md; only inside the simulator)"},
    {"ARCOLL_ALLTOALL_ALG", CORE_SETTING_ENUM, CFG_OFF(alltoall_alg), cfg_algs, "auto", 0, 0, 1,
     "alltoall algorithm: direct (arrival-oblivious baseline), pap (PAP_Direct), shm_direct "
     "or pap_shm (node masters through shared memory, Qian and Afsahi 4.4), sa or sa_direct "
     "(non-leader send-side aggregation, PAP or Direct inter-node step, Kumar et al.), rd "
     "(receive-side distribution), leader (one leader per node, Direct), sh_co (one node, "
     "buffers in a same-address region: memcpy in Morton order, Li et al.), mn_co (two rounds "
     "of aggregated messages through Morton-order owners, Li et al. 2.5), mn_cox (mn_co among "
     "node masters, one message per node pair, the node's ranks through shared memory), auto "
     "(by size and job shape, ARCOLL_TUNE; sh_co only where one node's ranks share the node "
     "heap)"},
    {"ARCOLL_ALLGATHER_ALG", CORE_SETTING_ENUM, CFG_OFF(allgather_alg), cfg_algs, "auto", 0, 0, 1,
     "allgather algorithm: direct, pap, shm_direct, pap_shm, ring, rdd (recursive doubling), "
     "rdh (recursive doubling in distance-halving order, Sack 2011), sh_co, mn_co or mn_cox (Li "
     "et al.) or auto"},
    {"ARCOLL_ALLTOALLV_ALG", CORE_SETTING_ENUM, CFG_OFF(alltoallv_alg), cfg_algs, "auto", 0, 0, 1,
     "alltoallv algorithm: direct or pap (per pair: copy or zcopy path by length), sloav or "
     "sloavx (logarithmic, Xu et al.), or auto"},
    {"ARCOLL_ALLGATHERV_ALG", CORE_SETTING_ENUM, CFG_OFF(allgatherv_alg), cfg_algs, "auto", 0, 0, 1,
     "allgatherv algorithm: direct, pap, ring, rdd, rdh or auto (by size)"},
    {"ARCOLL_REDUCE_SCATTER_ALG", CORE_SETTING_ENUM, CFG_OFF(reduce_scatter_alg), cfg_algs, "auto",
     0, 0, 1,
     "reduce_scatter_block algorithm: direct, pap, ring, rdd (recursive halving), rdh "
     "(distance-halving order, Sack 2011) or auto (by size)"},
    {"ARCOLL_ALLREDUCE_ALG", CORE_SETTING_ENUM, CFG_OFF(allreduce_alg), cfg_algs, "auto", 0, 0, 1,
     "allreduce algorithm (reduce-scatter + allgather): direct, pap, ring, rdd, rdh or auto"},
    {"ARCOLL_TUNE", CORE_SETTING_TUNE, CFG_OFF(tune), NULL, "default", 0, 0, 1,
     "auto's tuning table: COLL:LO-HI[:ppn=A-B][:nodes=A-B]:@ALG rules separated by '#', or "
     "file:PATH; consulted before the default table"},
    {"ARCOLL_PATH", CORE_SETTING_ENUM, CFG_OFF(path), cfg_paths, "auto", 0, 0, 1,
     "copy (bounce slots), zcopy (into the final buffer) or auto (by size)"},
    {"ARCOLL_ZCOPY_THRESHOLD", CORE_SETTING_SIZE, CFG_OFF(zcopy_threshold), NULL, "auto", 0,
     (long)1 << 40, 1,
     "auto path: messages of at least this size per peer use zcopy; auto: the channel's"},
    {"ARCOLL_BOUNCE_SIZE", CORE_SETTING_SIZE, CFG_OFF(bounce_size), NULL, "auto", 64, 64L << 20, 1,
     "payload bytes of one bounce slot (2 x ARCOLL_WINDOW per peer per team); larger messages "
     "fragment; auto: the channel's (verbs 64k, shared memory 16k)"},
    {"ARCOLL_LANES", CORE_SETTING_ENUM, CFG_OFF(lanes_log2), cfg_lanes, "4", 0, 0, 1,
     "copy-path fragments of one stream in flight: each bounce slot is cut into this many lanes "
     "(1, 2 or 4; fewer where a lane would hold less than 16 KiB), a fragment each"},
    {"ARCOLL_PIPE_WINDOW", CORE_SETTING_SIZE, CFG_OFF(pipe_window), NULL, "64k", 0, 64L << 20, 1,
     "bytes of a schedule's stream in flight to a peer at a power-of-two distance (or n minus "
     "one): lanes of a pipe entry beyond the slot's, within 2 MiB a team region; 0: none"},
    {"ARCOLL_SCHED_ZCOPY", CORE_SETTING_SIZE, CFG_OFF(sched_zcopy), NULL, "auto", 0, 1L << 40, 1,
     "schedule messages (ring, rdd, rdh, mn_co, ...) of at least this many bytes: the receiver "
     "advertises where the message goes and the sender writes it there (zero-copy), or asks "
     "for the copy path; auto: 4k, 64k in an oversubscribed job; 0: always the copy path"},
    {"ARCOLL_WINDOW", CORE_SETTING_LONG, CFG_OFF(window), NULL, "8", 1, ARCOLL_MAX_INFLIGHT, 1,
     "collectives of a team in flight before a start waits for the oldest; each peer's "
     "region entries hold 2 x this many banks, so a smaller window shrinks a team's memory "
     "(large jobs)"},
    {"ARCOLL_SHM_MAX", CORE_SETTING_SIZE, CFG_OFF(shm_max), NULL, "64k", 0, 1L << 30, 1,
     "largest bytes per rank that shm_direct/pap_shm carry (sizes each team's node segment); "
     "larger calls run direct/pap"},
    {"ARCOLL_SLOAV_MAX", CORE_SETTING_SIZE, CFG_OFF(sloav_max), NULL, "2k", 0, (1L << 31), 1,
     "sloav/sloavx alltoallv: blocks up to this size are routed in log steps (sloavx: go "
     "through the node segment, up to what it holds), larger ones go direct (decided per "
     "block by its length, which both its ends know)"},
    {"ARCOLL_SOCKET_SIZE", CORE_SETTING_LONG, CFG_OFF(socket_size), NULL, "0", 0, 1L << 20, 1,
     "sh_co: pretend sockets of this many consecutive local ranks (the last may be smaller) "
     "instead of hwloc's (0); a value >= the node's ranks means one socket"},
    {"ARCOLL_SLOAV_PHASES", CORE_SETTING_LONG, CFG_OFF(sloav_phases), NULL, "1", 1, 2, 1,
     "sloav: 1 = each step sends its data alone, the receiver reads the length from "
     "the message header; 2 = the size first, then the data (Xu et al.: twice the start-ups)"},
    {"ARCOLL_SCHED_ORDER", CORE_SETTING_ENUM, CFG_OFF(sched_order), cfg_sched_orders, "arrival", 0,
     0, 0,
     "schedules (ring, rdd, rdh, sloav, sloavx, mn_co): among a round's sends that may go, "
     "arrival = to peers whose data has landed here first (PAP), fixed = in a fixed peer order "
     "(rank - 1 down, wrapping); "
     "for measuring what arrival order is worth (docs/scale.md)"},
    {"ARCOLL_TIMEOUT_MS", CORE_SETTING_LONG, CFG_OFF(timeout_ms), NULL, "60000", 1, 86400000L, 0,
     "a collective fails with ARCOLL_ERR_TIMEOUT if a peer has not arrived by then"},
    {"ARCOLL_LOG", CORE_SETTING_ENUM, CFG_OFF(log_level), cfg_logs, "warn", 0, 0, 0,
     "log level on stderr"},
    {"ARCOLL_SPIN_COUNT", CORE_SETTING_LONG, CFG_OFF(spin_count), NULL, "auto", -1, 1L << 30, 0,
     "busy polls before a waiting rank yields its core; auto: 32 when ranks outnumber cores, "
     "else never (spin, as MPI libraries do)"},
};

/* The core's rows after the channels' (the listing's order). */
static const core_setting_t cfg_rows_tail[] = {
    {"ARCOLL_REGCACHE", CORE_SETTING_ENUM, CFG_OFF(regcache), cfg_onoff, "off", 0, 0, 0,
     "cache registrations of user buffers; on requires arcoll_mem_invalidate before free"},
    {"ARCOLL_REGCACHE_MAX", CORE_SETTING_SIZE, CFG_OFF(regcache_max), NULL, "1g", 1 << 20,
     (long)1 << 46, 0, "bytes the registration cache keeps registered (LRU eviction)"},
    /* Named for verbs, but the engine's (zmem.c): it reads them over any
     * channel whose registrations are costly (chan.heap_mr). */
    {"ARCOLL_VERBS_HEAP_MR", CORE_SETTING_ENUM, CFG_OFF(verbs_heap_mr), cfg_heap_mr, "auto", 0, 0,
     0,
     "verbs: zero-copy buffers in this process's heap slot share one MR: auto (on-demand paged "
     "over the slot if the device can, else a pinned prefix that doubles), pin (the prefix) or "
     "off (like any buffer)"},
    {"ARCOLL_VERBS_HEAP_MR_MIN", CORE_SETTING_SIZE, CFG_OFF(verbs_heap_mr_min), NULL, "64m", 4096,
     (long)1 << 40, 0, "verbs: the heap MR's first prefix (rounded up to a power of two)"},
    {"ARCOLL_PROFILE", CORE_SETTING_STRING, CFG_OFF(profile), cfg_profile_form, "off", 0,
     CORE_CONFIG_PATH - 1, 0,
     "record every collective's arrival/exit per rank into FILE.<rank> (arcoll-pap-report)"},
};

/* The whole table: the core's rows, and between their two parts each
 * channel's, in CHAN_LIST order, at its struct in core_config_t.chan. */
#define CFG_COUNT(a) (sizeof(a) / sizeof((a)[0]))
static const core_settings_t cfg_head = {cfg_rows_head, CFG_COUNT(cfg_rows_head)};
static const core_settings_t cfg_tail = {cfg_rows_tail, CFG_COUNT(cfg_rows_tail)};
#define CFG_CHAN_GROUP(id, name) {&name##_settings, CFG_OFF(chan[CORE_CHANNEL_##id])},
static const struct cfg_group {
    const core_settings_t *set;
    size_t base; /* of the struct its rows fill */
} cfg_groups[] = {{&cfg_head, 0}, CHAN_LIST(CFG_CHAN_GROUP){&cfg_tail, 0}};
#define CFG_NGROUPS CFG_COUNT(cfg_groups)

/* A row of the table and its field's place in core_config_t. */
typedef struct cfg_var {
    const core_setting_t *s;
    size_t off;
    size_t group, row; /* the next row of the walk */
} cfg_var_t;

/* The rows in order: for (cfg_var_t v = {0}; cfg_var_next(&v);). */
static int cfg_var_next(cfg_var_t *v)
{
    for (; v->group < CFG_NGROUPS; v->group++, v->row = 0) {
        const struct cfg_group *g = &cfg_groups[v->group];
        if (v->row < g->set->n) {
            v->s = &g->set->rows[v->row++];
            v->off = g->base + v->s->offset;
            return 1;
        }
    }
    return 0;
}

static int cfg_var_find(const char *name, cfg_var_t *v)
{
    *v = (cfg_var_t){0};
    while (cfg_var_next(v))
        if (strcmp(v->s->name, name) == 0)
            return 1;
    return 0;
}

static void cfg_values_join(const core_setting_t *v, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; v->values[i] != NULL && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? "|" : "", v->values[i]);
}

/* The longest value a variable takes: checked before any parsing, so that a
 * huge value is refused in a bounded time with a message of bounded size. */
static size_t cfg_value_max(const core_setting_t *v)
{
    switch (v->type) {
    case CORE_SETTING_TUNE: return CORE_TUNE_TEXT_MAX;
    case CORE_SETTING_STRING: return (size_t)v->max;
    default: return CORE_CONFIG_VALUE_MAX;
    }
}

static int cfg_var_set(core_config_t *cfg, const cfg_var_t *var, const char *value)
{
    const core_setting_t *v = var->s;
    char *field = (char *)cfg + var->off;
    size_t max = cfg_value_max(v);
    char allowed[128];

    if (value == NULL && v->type != CORE_SETTING_TUNE)
        goto err_value;
    if (value != NULL && strnlen(value, max + 1) > max) {
        log_err("%s=%.40s...: longer than %zu characters (the limit of this variable)", v->name,
                value, max);
        return ARCOLL_ERR_CONFIG;
    }
    switch (v->type) {
    case CORE_SETTING_ENUM:
        for (int i = 0; v->values[i] != NULL; i++) {
            if (strcasecmp(value, v->values[i]) == 0) {
                *(int *)field = i;
                return ARCOLL_OK;
            }
        }
        goto err_value;
    case CORE_SETTING_SIZE: {
        size_t sz;
        if (strcmp(v->dflt, "auto") == 0 && strcasecmp(value, "auto") == 0) {
            *(size_t *)field = CORE_CONFIG_AUTO_SIZE; /* the channel decides */
            return ARCOLL_OK;
        }
        if (core_config_parse_size(value, &sz) != 0 || sz < (size_t)v->min || sz > (size_t)v->max)
            goto err_value;
        *(size_t *)field = sz;
        return ARCOLL_OK;
    }
    case CORE_SETTING_TUNE:
        return core_tune_set((core_tune_t *)field, value); /* it says what is wrong */
    case CORE_SETTING_STRING:
        snprintf(field, (size_t)v->max + 1, "%s", strcasecmp(value, v->dflt) == 0 ? "" : value);
        return ARCOLL_OK;
    case CORE_SETTING_LONG: {
        char *end;
        long l;
        if (v->min < 0 && strcasecmp(value, "auto") == 0) {
            *(long *)field = v->min; /* the least value stands for "automatic" */
            return ARCOLL_OK;
        }
        if (!isdigit((unsigned char)value[0]) && value[0] != '-')
            goto err_value; /* no blanks or '+': the same strictness as sizes */
        errno = 0;
        l = strtol(value, &end, 10);
        if (errno != 0 || end == value || *end != '\0' || l < v->min || l > v->max)
            goto err_value;
        *(long *)field = l;
        return ARCOLL_OK;
    }
    }
err_value:
    if (v->type == CORE_SETTING_ENUM) {
        cfg_values_join(v, allowed, sizeof(allowed));
        log_err("%s=%s is not valid; allowed values: %s", v->name, value ? value : "(null)",
                allowed);
    } else if (v->type == CORE_SETTING_STRING) {
        log_err("%s=%s is not valid; expected %s or a name of at most %ld characters", v->name,
                value ? value : "(null)", v->dflt, v->max);
    } else if (v->min < 0) {
        log_err("%s=%s is not valid; expected auto or an integer from 0 to %ld", v->name,
                value ? value : "(null)", v->max);
    } else {
        log_err("%s=%s is not valid; expected %s from %ld to %ld", v->name,
                value ? value : "(null)",
                v->type == CORE_SETTING_SIZE ? "a size in bytes (suffix k, m or g allowed)"
                                             : "an integer",
                v->min, v->max);
    }
    return ARCOLL_ERR_CONFIG;
}

/* The algorithm variables, by collective (the COLL_* order of engine/req.h). */
static const size_t cfg_alg_vars[] = {CFG_OFF(alltoall_alg),       CFG_OFF(allgather_alg),
                                      CFG_OFF(alltoallv_alg),      CFG_OFF(allgatherv_alg),
                                      CFG_OFF(reduce_scatter_alg), CFG_OFF(allreduce_alg)};

int core_config_set(core_config_t *cfg, const char *name, const char *value)
{
    cfg_var_t v;
    int rc;

    if (cfg == NULL || name == NULL) {
        log_err("arcoll_config_set: NULL argument");
        return ARCOLL_ERR_INVALID;
    }
    cfg->gen++;
    if (!cfg_var_find(name, &v)) {
        log_err("unknown configuration variable %s (see docs/configuration.md)", name);
        return ARCOLL_ERR_CONFIG;
    }
    for (int c = 0; c < (int)(sizeof(cfg_alg_vars) / sizeof(cfg_alg_vars[0])); c++) {
        int *slot, old;
        if (v.off != cfg_alg_vars[c])
            continue;
        slot = (int *)(void *)((char *)cfg + v.off);
        old = *slot;
        rc = cfg_var_set(cfg, &v, value);
        /* After parsing, so that "SA" is refused like "sa". */
        if (rc == ARCOLL_OK && !core_alg_serves(*slot, c)) {
            char allowed[256];
            size_t used = 0;
            int bad = *slot, a2a_only = core_alg_serves(bad, 0);
            *slot = old;
            for (int k = 1; k < 6; k++)
                a2a_only &= !core_alg_serves(bad, k);
            allowed[0] = '\0';
            for (int a = 0; a < CORE_ALG_COUNT && used + 16 < sizeof(allowed); a++)
                if (core_alg_serves(a, c))
                    used += (size_t)snprintf(allowed + used, sizeof(allowed) - used, "%s%s",
                                             used ? ", " : "", cfg_algs[a]);
            log_err("%s=%s: that algorithm is %s (allowed: %s)", name, value,
                    a2a_only ? "alltoall-only" : "not one of this collective's", allowed);
            return ARCOLL_ERR_CONFIG;
        }
        return rc;
    }
    rc = cfg_var_set(cfg, &v, value);
    if (rc == ARCOLL_OK && v.off == CFG_OFF(log_level))
        core_log_level = cfg->log_level;
    return rc;
}

int core_config_init(core_config_t *cfg)
{
    extern char **environ;
    cfg_var_t v;
    int rc = ARCOLL_OK;

    memset(cfg, 0, sizeof(*cfg));
    for (cfg_var_t v = {0}; cfg_var_next(&v);)
        if (cfg_var_set(cfg, &v, v.s->dflt) != ARCOLL_OK)
            return ARCOLL_ERR_CONFIG; /* a bad default is a bug: caught by the unit tests */
    /* Past a bad value the others are still read: the caller still joins the
     * bootstrap (its deadline is ARCOLL_TIMEOUT_MS) to tell its peers. */
    for (cfg_var_t v = {0}; cfg_var_next(&v);) {
        const char *env = getenv(v.s->name);
        if (env != NULL && core_config_set(cfg, v.s->name, env) != ARCOLL_OK)
            rc = ARCOLL_ERR_CONFIG;
    }
    /* A misspelt variable would otherwise be silently ignored. ARCOLL_MPI_*
     * belong to the PMPI shim, ARCOLL_HEAP(_*) to the node heap (read before
     * any init): they read them themselves. */
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        char name[64];
        size_t n = strcspn(*e, "=");
        if (strncmp(*e, "ARCOLL_", 7) != 0 || n >= sizeof(name))
            continue;
        memcpy(name, *e, n);
        name[n] = '\0';
        if (!cfg_var_find(name, &v) && strcmp(name, "ARCOLL_NODE_SIZE") != 0 &&
            strcmp(name, "ARCOLL_FAULT") != 0 && strncmp(name, "ARCOLL_MPI_", 11) != 0 &&
            strncmp(name, "ARCOLL_HEAP_", 12) != 0 && strcmp(name, "ARCOLL_HEAP") != 0)
            log_warn("ignoring unknown environment variable %s", name);
    }
    return rc;
}

/* Render a row's value into buf. */
static const char *cfg_var_get(const core_config_t *cfg, const cfg_var_t *var, char *buf,
                               size_t len)
{
    const core_setting_t *v = var->s;
    const char *field = (const char *)cfg + var->off;

    switch (v->type) {
    case CORE_SETTING_ENUM: snprintf(buf, len, "%s", v->values[*(const int *)field]); break;
    case CORE_SETTING_SIZE:
        if (*(const size_t *)field == CORE_CONFIG_AUTO_SIZE)
            snprintf(buf, len, "auto");
        else
            snprintf(buf, len, "%zu", *(const size_t *)field);
        break;
    case CORE_SETTING_LONG:
        if (v->min < 0 && *(const long *)field == v->min)
            snprintf(buf, len, "auto");
        else
            snprintf(buf, len, "%ld", *(const long *)field);
        break;
    case CORE_SETTING_STRING: snprintf(buf, len, "%s", *field ? field : v->dflt); break;
    case CORE_SETTING_TUNE: core_tune_get((const core_tune_t *)field, buf, len); break;
    }
    return buf;
}

const char *core_config_get(const core_config_t *cfg, const char *name, char *buf, size_t len)
{
    cfg_var_t v;

    if (name == NULL || cfg == NULL || !cfg_var_find(name, &v))
        return NULL;
    return cfg_var_get(cfg, &v, buf, len);
}

/* FNV-1a of one agreed variable's value, continuing from h. */
static uint64_t cfg_var_hash(const core_config_t *cfg, const cfg_var_t *v, uint64_t h)
{
    char buf[64];

    if (v->s->type == CORE_SETTING_TUNE) /* the rules, not their spelling or file name */
        return core_tune_digest((const core_tune_t *)(const void *)((const char *)cfg + v->off), h);
    cfg_var_get(cfg, v, buf, sizeof(buf));
    for (const char *p = buf; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return (h ^ 0xff) * 1099511628211ULL;
}

uint64_t core_config_digest(const core_config_t *cfg)
{
    uint64_t h = 1469598103934665603ULL;

    for (cfg_var_t v = {0}; cfg_var_next(&v);)
        if (v.s->agreed)
            h = cfg_var_hash(cfg, &v, h);
    return h;
}

size_t core_config_hashes(const core_config_t *cfg, uint64_t *h, const char **names, size_t max)
{
    size_t n = 0;

    for (cfg_var_t v = {0}; n < max && cfg_var_next(&v);) {
        if (!v.s->agreed)
            continue;
        if (h != NULL)
            h[n] = cfg_var_hash(cfg, &v, 1469598103934665603ULL);
        if (names != NULL)
            names[n] = v.s->name;
        n++;
    }
    return n;
}

void core_config_print(const core_config_t *cfg, void *file)
{
    FILE *f = file;
    char buf[CORE_CONFIG_PATH], allowed[128];

    for (cfg_var_t var = {0}; cfg_var_next(&var);) {
        const core_setting_t *v = var.s;
        if (v->type == CORE_SETTING_ENUM)
            cfg_values_join(v, allowed, sizeof(allowed));
        else if (v->type == CORE_SETTING_STRING)
            snprintf(allowed, sizeof(allowed), "%s|%s", v->dflt, v->values[0]);
        else if (v->type == CORE_SETTING_TUNE)
            snprintf(allowed, sizeof(allowed), "default|RULES|file:PATH");
        else if (v->min < 0)
            snprintf(allowed, sizeof(allowed), "auto|0..%ld", v->max);
        else
            snprintf(allowed, sizeof(allowed), "%ld..%ld", v->min, v->max);
        fprintf(f, "%-24s %-8s %-28s %s\n", v->name, cfg_var_get(cfg, &var, buf, sizeof(buf)),
                allowed, v->desc);
    }
}
