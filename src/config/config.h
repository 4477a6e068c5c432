/* ARCOLL_* configuration: one table, parsed and validated once; an unknown
 * value is an error naming the variable and the allowed values. The table's
 * rows are the core's (config.c) and each channel's (chan/<name>/<name>_opts.c,
 * through CHAN_LIST), all treated alike. */
#ifndef ARCOLL_CONFIG_CONFIG_H
#define ARCOLL_CONFIG_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "chan/chan.h"
#include "config/algs.h"
#include "config/tune.h"
#include "util/size.h"

enum { CORE_HEAP_MR_AUTO, CORE_HEAP_MR_PIN, CORE_HEAP_MR_OFF };
enum { CORE_SCHED_ORDER_ARRIVAL, CORE_SCHED_ORDER_FIXED };

#define CORE_CONFIG_AUTO_SIZE SIZE_MAX /* a size variable set to "auto" */
#define CORE_CONFIG_PATH      256
/* Longest value of an enum, size or integer variable (docs/configuration.md,
 * "Input limits"); strings have their field's size, ARCOLL_TUNE its own. */
#define CORE_CONFIG_VALUE_MAX 64

typedef struct core_config {
    int channel;
    int alltoall_alg;
    int allgather_alg;
    int alltoallv_alg;
    int allgatherv_alg;
    int reduce_scatter_alg;
    int allreduce_alg;
    int path;
    size_t zcopy_threshold; /* auto: messages of at least this many bytes go zero-copy */
    size_t bounce_size;     /* payload bytes of one bounce slot */
    long window;            /* calls in flight per team (2 x window banks per peer) */
    int lanes_log2;         /* copy-path fragments in flight per stream: 1 << this lanes a slot */
    size_t pipe_window;     /* a schedule stream's bytes in flight (pipe lanes), 0: none */
    size_t sched_zcopy;     /* schedule messages of at least this many bytes meet by advertisement
                               (auto) */
    size_t shm_max;         /* largest bytes per rank of shm_direct/pap_shm (node segment size) */
    size_t sloav_max;       /* largest block sloav/sloavx route; larger ones go direct */
    long socket_size;       /* sh_co: ranks per pretend socket; 0 = hwloc's sockets */
    int sched_order;        /* CORE_SCHED_ORDER_*: schedules' sends, arrived peers first or not */
    long sloav_phases;      /* sloav: 2 (size, then data) or 1 (data, length in header) */
    long timeout_ms;
    int log_level;
    long spin_count;     /* busy polls before yielding the core; -1: auto */
    int regcache;        /* cache implicit registrations (user reports frees) */
    size_t regcache_max; /* bytes the cache may keep registered */
    /* CORE_HEAP_MR_*: heap buffers share one MR (mem/heapmr.h). The engine's
     * (zmem.c) over the channel's chan.heap_mr, not verbs' own settings. */
    int verbs_heap_mr;
    size_t verbs_heap_mr_min; /* its first prefix */
    /* ARCOLL_PROFILE: file prefix of the PAP profile; "" = off (src/engine/prof.h) */
    char profile[CORE_CONFIG_PATH];
    core_tune_t tune; /* ARCOLL_TUNE rules, then the default table (src/config/tune.h) */
    /* Each channel's settings, the struct its rows fill (chan/<name>/<name>_opts.h),
     * by CORE_CHANNEL_*: core_config_chan. */
    chan_opts_buf_t chan[CORE_CHANNEL_COUNT];
    /* Bumped by every core_config_set: a choice derived from the settings and
     * kept between calls (the teams' memos, engine/team.h) is stale when its
     * generation differs. Per process, never agreed or hashed. */
    unsigned gen;
} core_config_t;

/* Defaults, then every ARCOLL_* variable of the environment; a bad one is
 * reported and skipped, and makes the result ARCOLL_ERR_CONFIG. */
int core_config_init(core_config_t *cfg);
/* Validate and set one variable by its ARCOLL_* name. */
int core_config_set(core_config_t *cfg, const char *name, const char *value);
/* Render a variable's current value; NULL if the name is unknown. */
const char *core_config_get(const core_config_t *cfg, const char *name, char *buf, size_t len);
/* Digest of the settings that must agree across ranks. */
uint64_t core_config_digest(const core_config_t *cfg);
/* The agreed settings one by one (table order, at most max, CORE_CONFIG_NAGREED
 * suffice): a hash of each into h and its name into names (either may be
 * NULL); returns how many. Tells which setting made two digests differ. */
#define CORE_CONFIG_NAGREED 32
size_t core_config_hashes(const core_config_t *cfg, uint64_t *h, const char **names, size_t max);
/* A channel's settings (CORE_CHANNEL_*): the struct of chan/<name>/<name>_opts.h. */
static inline void *core_config_chan(const core_config_t *cfg, int channel)
{
    return (void *)cfg->chan[channel].bytes;
}
/* Print the table of variables (name, value, allowed, description). */
void core_config_print(const core_config_t *cfg, void *file);

#endif
