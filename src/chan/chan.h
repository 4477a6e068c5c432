/*
 * Channel interface: the few one-sided operations the algorithms need.
 * Semantics are those of RDMA WRITE on a reliable connection:
 *   - put() writes bytes into a peer's remotely accessible memory with no
 *     action by the peer;
 *   - put_u64() writes one aligned 64-bit word that the peer may poll; it
 *     becomes visible only after every earlier put() to the same peer
 *     (docs/protocol.md, "Ordering");
 *   - a put's source may be reused once chan_progress() reports no
 *     outstanding operations (local completion), except that a put of at
 *     most CHAN_PUT_COPY bytes from unregistered memory takes its bytes
 *     during the call (the engine passes size and advertisement words from
 *     its stack).
 * Algorithms never see which channel they run on.
 *
 * Contract: every series of puts to a peer ends with a put_u64 (the engine's
 * protocols always finish a message with its flag), so a channel may retire
 * earlier puts only through the completion of that flag write. A channel may
 * also hold puts back (verbs, while connecting to the peer): they count as
 * outstanding, and peers answer only while they call progress().
 */
#ifndef ARCOLL_CHAN_CHAN_H
#define ARCOLL_CHAN_CHAN_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/boot.h"
#include "util/setting.h"

/* A key a peer needs to write into our memory: plain data, fixed size, so it
 * can travel through the bootstrap or inside a control slot. */
typedef struct chan_rkey {
    uint64_t addr; /* channel-defined address (offset or virtual address) */
    uint64_t len;
    uint64_t key;   /* channel-defined key (segment id, rkey, pid) */
    uint32_t kind;  /* channel-defined kind of memory; 0 means "no key" */
    uint32_t owner; /* context rank that owns the memory */
} chan_rkey_t;

/* Local memory known to the channel. */
typedef struct chan_mem {
    void *addr;
    size_t len;
    chan_rkey_t rkey;
    void *priv;
} chan_mem_t;

/* A peer's memory, imported from its rkey (caller-owned storage). */
typedef struct chan_rmem {
    chan_rkey_t rkey;
    void *map; /* channel-private: local mapping, if any */
} chan_rmem_t;

typedef struct chan chan_t;

/* chan.models: a real transport, or the simulator's model of one (shared
 * memory only, or nodes joined by a NIC): the tuning table then sees the job
 * the model describes (hier_team_shape). */
enum { CHAN_MODELS_NONE, CHAN_MODELS_SHM, CHAN_MODELS_NIC };

/* chan.heap_mr: no heap MR (mem_reg is cheap), a growing pinned prefix, or
 * one on-demand-paging MR over the slot (mem_reg_odp). */
enum { CHAN_HEAP_MR_NONE, CHAN_HEAP_MR_PIN, CHAN_HEAP_MR_ODP };

#define CHAN_PUT_COPY 64 /* bytes a put copies at the call, at most (see above) */

struct chan_ops {
    const char *name;
    /* Allocate zeroed memory peers can write into (bounce/control regions). */
    int (*mem_alloc)(chan_t *c, size_t len, chan_mem_t *mem);
    void (*mem_free)(chan_t *c, chan_mem_t *mem);
    /* Every peer has imported mem: names used to find it may go (optional). */
    void (*mem_seal)(chan_t *c, chan_mem_t *mem);
    /* Make a user buffer a target (zero-copy); may fail with
     * ARCOLL_ERR_UNSUPPORTED, and the caller then uses the copy path. */
    int (*mem_reg)(chan_t *c, void *addr, size_t len, chan_mem_t *mem);
    /* The same with on-demand paging: nothing pinned (optional: NULL, or
     * only when heap_mr is CHAN_HEAP_MR_ODP); mem_dereg releases it. */
    int (*mem_reg_odp)(chan_t *c, void *addr, size_t len, chan_mem_t *mem);
    void (*mem_dereg)(chan_t *c, chan_mem_t *mem);
    int (*rmem_import)(chan_t *c, int peer, const chan_rkey_t *rkey, chan_rmem_t *rm);
    void (*rmem_release)(chan_t *c, chan_rmem_t *rm);
    /* lmem: src's registration, or NULL (the channel stages the bytes). */
    int (*put)(chan_t *c, int peer, const void *src, size_t len, const chan_mem_t *lmem,
               const chan_rmem_t *dst, uint64_t off);
    int (*put_u64)(chan_t *c, int peer, uint64_t val, const chan_rmem_t *dst, uint64_t off);
    /* Returns the number of locally incomplete operations (>= 0) or an error. */
    int (*progress)(chan_t *c);
    /* Is the peer still alive? (slow path, called while waiting on it) */
    int (*peer_check)(chan_t *c, int peer);
    /* Optional (NULL: always): a put_u64 to the peer goes out now, queues
     * nothing, and needs no call of the peer's process to land (verbs: the
     * QP is connected and flags are plain writes). For notices that must
     * never cost a connection or pile up: the 0-byte calls' notes. */
    int (*peer_ready)(chan_t *c, int peer);
    /* One line on the transport state toward the peer, for a timeout report. */
    void (*peer_describe)(chan_t *c, int peer, char *buf, size_t len);
    /* RC QPs created, of those connected both ways, bytes registered with the
     * NIC now (optional: NULL on channels without a NIC). */
    void (*stats)(chan_t *c, int *qps, int *ready, size_t *reg);
    void (*destroy)(chan_t *c);
    /* A model of a transport (the simulator, docs/scale.md): NULL on a real
     * channel. */
    const struct chan_model_ops *model;
};

/* What only a model channel offers; every member optional. */
struct chan_model_ops {
    /* The context's clock, which
     * the engine then reads instead of CLOCK_MONOTONIC; and one idle pass of
     * a wait loop, instead of spinning or sched_yield. */
    uint64_t (*now_ns)(chan_t *c);
    void (*idle)(chan_t *c);
    /* The caller is about to do local work on
     * bytes of kind CHAN_COST_* that the channel does not see (a copy through
     * node memory, a reduction); the channel's clock moves on first, so what
     * the work writes appears no earlier than its cost allows. */
    void (*cost)(chan_t *c, int kind, size_t bytes);
    /* Both or neither: a count of the puts that
     * landed in this rank's memory, and where landing number seq (from 0)
     * wrote, or NULL once the channel no longer remembers it (it keeps the
     * last few hundred). The executor's receive pass then looks only at what
     * changed: O(1) per landing instead of a look at every pending slot
     * (real channels cannot know what an RDMA write did: NULL). */
    uint64_t (*landed)(chan_t *c);
    const void *(*landed_at)(chan_t *c, uint64_t seq);
};

enum { CHAN_COST_COPY, CHAN_COST_REDUCE };

/* Default bounce slots (chan_t.bounce): 4 lanes of 16 KiB on a network, one
 * 16 KiB fragment on one host. */
#define CHAN_BOUNCE_NET  ((size_t)64 << 10)
#define CHAN_BOUNCE_HOST ((size_t)16 << 10)

struct chan {
    const struct chan_ops *ops;
    boot_t *boot;
    int zcopy; /* 1 if mem_reg works for every peer pair (agreed at init) */
    /* Whether a registration costs enough (verbs: pinning, a NIC update) for
     * zero-copy buffers in the node heap to share one MR (mem/heapmr.h). */
    int heap_mr;        /* CHAN_HEAP_MR_* */
    size_t fixed_bytes; /* registered/shared memory of the channel itself */
    /* Message size per peer from which zero-copy beats the copy path on this
     * channel (ARCOLL_ZCOPY_THRESHOLD=auto); measured, see docs/configuration.md. */
    size_t zcopy_threshold;
    /* Bounce slot payload (ARCOLL_BOUNCE_SIZE=auto): large enough on a
     * network that a stream's lanes cover its bandwidth-delay product, the
     * old single fragment on one host, where lanes do not pay
     * (docs/measurements/lanes.md). */
    size_t bounce;
    /* The process's other contexts are other ranks (the simulator): waiting
     * progresses only this context's teams. */
    int solo;
    int models; /* CHAN_MODELS_* */
    /* put and put_u64 have landed when they return (shared memory and CMA: the
     * process's own stores and syscalls), so a put_u64 then a sequentially
     * consistent fence is seen by the peer's next load. The zero-copy path
     * relies on it to revoke an advertisement (docs/protocol.md §6,
     * "Revocation"); other channels revoke by deregistering. */
    int puts_sync;
};

/* The channels, one line each: its CORE_CHANNEL_* id, its name (ARCOLL_CHANNEL,
 * logs), and in src/chan/<name>/ its constructor <name>_chan_create, collective
 * over the bootstrap, and its settings <name>_settings (<name>_opts.c: its rows
 * of the ARCOLL_* table and the struct they fill, which the constructor is
 * given). Adding a channel: its directory and one line here (the settings'
 * names, their parsing and listing, the context's creation and the build
 * follow). sim_chan_create fails with ARCOLL_ERR_CONFIG unless the simulator's
 * driver runs this rank (chan/sim/sim.h). */
#define CHAN_LIST(X) X(SMP, smp) X(VERBS, verbs) X(SIM, sim)

#define CHAN_ENUM(id, name) CORE_CHANNEL_##id,
enum { CHAN_LIST(CHAN_ENUM) CORE_CHANNEL_COUNT };
#undef CHAN_ENUM

/* Room for one channel's settings struct in the settings (config/config.h):
 * <name>_opts.c defines <name>_settings with CHAN_SETTINGS, which checks
 * that its struct fits. */
#define CHAN_OPTS_MAX 256
typedef union chan_opts_buf {
    max_align_t align;
    unsigned char bytes[CHAN_OPTS_MAX];
} chan_opts_buf_t;

#define CHAN_SETTINGS(name, rows, type)                                              \
    _Static_assert(sizeof(type) <= CHAN_OPTS_MAX, #type " fits in chan_opts_buf_t"); \
    const core_settings_t name##_settings = {rows, sizeof(rows) / sizeof((rows)[0])}

/* What a channel's constructor is given. */
typedef struct chan_args {
    long timeout_ms; /* ARCOLL_TIMEOUT_MS: bound of every wait at wire-up */
    /* Its own settings: the struct that its rows fill (<name>_opts.h). */
    const void *opts;
    /* Any setting by its ARCOLL_* name, rendered as arcoll_config_get does
     * (NULL if unknown), for a model of another channel: sim follows
     * ARCOLL_VERBS_CONNECT, which it cannot see in verbs' struct (no channel
     * includes another's headers). A real channel reads only opts. */
    const char *(*setting)(const void *cfg, const char *name, char *buf, size_t len);
    const void *cfg;
} chan_args_t;

#define CHAN_DECL(id, name)                                                    \
    int name##_chan_create(boot_t *boot, const chan_args_t *args, chan_t **c); \
    extern const core_settings_t name##_settings;
CHAN_LIST(CHAN_DECL)
#undef CHAN_DECL

static inline uint64_t *chan_mem_u64(const chan_mem_t *m, uint64_t off)
{
    return (uint64_t *)((char *)m->addr + off);
}

#endif
