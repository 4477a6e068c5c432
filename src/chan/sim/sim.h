/* The scale simulator (docs/scale.md): N virtual ranks as coroutines of one
 * process run the unchanged library (init, teams, algorithms, engine) over
 * the model channel of sim_chan.c, in virtual time. A put is delivered into
 * the target's real memory at a virtual arrival time given by a LogGP cost
 * model; the target sees it only once its own clock has passed that time.
 * One simulation per process at a time; not thread-safe. */
#ifndef ARCOLL_CHAN_SIM_SIM_H
#define ARCOLL_CHAN_SIM_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "arcoll.h"

/* LogGP parameters (ns, ns per byte), one set within a node and one between
 * nodes; a node's ranks share one NIC (inter-node puts serialize on it, and
 * with rx_nic on the target's too); optional two-level switch topology. */
typedef struct sim_params {
    char name[64];
    double intra_o, intra_L, intra_G;          /* a put to a rank of the node: CPU copy */
    double inter_o, inter_L, inter_G, inter_g; /* a put through the node's NIC */
    double copy_G;   /* local memcpy: a put read out, a copy through node memory */
    double reduce_G; /* applying a reduction operator, per byte of input */
    double poll;     /* a rank waiting on node memory looks again after */
    double rx_nic;   /* 1: an inter-node put also occupies the target node's NIC */
    /* Leaf switches of leaf_nodes nodes (0: one non-blocking switch). A put
     * between leaves crosses the source leaf's uplink and the target leaf's
     * downlink. up_links 0: each one queue of up_G ns per byte (all its
     * cables as one, perfect adaptive routing). up_links U >= 1: U cables
     * up and U down per leaf, each a queue of up_G ns per byte; a put takes
     * cable k of both by static routing, up_route 0: D-mod-k (k = target
     * node mod U), 1: a hash of the (source node, target node) pair (static
     * ECMP). mu = U / leaf_nodes when up_G = inter_G. */
    double leaf_nodes, up_G, up_links, up_route;
    /* Start-up (docs/scale.md, "Resources per rank"): one bootstrap allgather
     * or barrier of the library costs oob_a + oob_b x log2(N) + oob_c x the
     * bytes gathered (N x len), once every rank is in it; creating one RC QP
     * and taking it to RTS costs qp_ns on each side of the connection. */
    double oob_a, oob_b, oob_c;
    double qp_ns;
    int nic; /* 1: nodes joined by a NIC (the tuning table's chan=verbs), 0: one host's memory */
} sim_params_t;

/* A built-in set (host-shm, ib-edr, ib-edr-2to1, ib-edr-mu2) or a file of "key value" lines
 * (docs/scale.md, "Parameter sets"). ARCOLL_ERR_CONFIG names what is wrong. */
int sim_params_load(const char *name, sim_params_t *p);
/* One parameter of a loaded set changed, "KEY=VALUE" (arcoll-sim --set); the
 * set's name gets "+KEY=VALUE". ARCOLL_ERR_CONFIG names what is wrong. */
int sim_params_override(sim_params_t *p, const char *kv);
/* The most uplinks of a leaf (up_links). */
#define SIM_UP_LINKS_MAX 1024

/* Test-only faults: the channel breaks ordering or corrupts payload; QUIT is
 * the tool's (rank 1 skips its calls: the driver must report a deadlock). */
enum { SIM_FAULT_NONE, SIM_FAULT_REORDER, SIM_FAULT_CORRUPT, SIM_FAULT_QUIT };

typedef struct sim_stats {
    uint64_t switches; /* coroutine switches */
    uint64_t events;   /* puts delivered */
    uint64_t nodata;   /* of them, without their bytes (sim_opts_t.nodata) */
    int done;          /* ranks that have returned */
    uint64_t vtime_ns; /* latest virtual clock (at the end, or so far) */
} sim_stats_t;

typedef struct sim_opts {
    int n;
    size_t stack_bytes;
    sim_params_t params;
    int fault; /* SIM_FAULT_*: tests that the tool's validation catches a broken channel */
    /* Payload-free: puts whose bytes come from [nodata, nodata + nodata_len)
     * (the tool's user buffers, shared by all ranks) cost their time but
     * their bytes are neither kept nor delivered. Everything the library
     * writes from its own memory (flags, sizes, slot headers, advertisements,
     * the routing headers of sloav's messages, staged copies) still is.
     * Results are garbage; virtual times are those of a run with payload. */
    const void *nodata;
    size_t nodata_len;
    /* 1: the channel has no landing count to offer (chan_model_ops.landed moves at
     * every call), so the executor scans on every pass as on a real channel;
     * the rows must be the same (a test compares them). */
    int rescan;
    /* Called between two ranks' turns about every tick_s seconds of wall time
     * (tick NULL or tick_s <= 0: never), with the counts so far: a progress
     * line for runs that take minutes (4096 ranks). */
    void (*tick)(void *arg, const sim_stats_t *now);
    void *tick_arg;
    double tick_s;
} sim_opts_t;

/* Run fn(rank, arg) as n virtual ranks to completion. ARCOLL_OK if every
 * rank returned 0; ARCOLL_ERR_STATE on a deadlock (every rank waits and no
 * put is in flight; the ranks and what they wait for are logged); else the
 * first non-zero return. */
int sim_run(const sim_opts_t *o, int (*fn)(int rank, void *arg), void *arg, sim_stats_t *st);

/* Inside a rank of sim_run. */
uint64_t sim_now(void);          /* this rank's virtual clock */
void sim_compute(uint64_t ns);   /* computation between calls: the clock moves on */
int sim_barrier(void);           /* all ranks, clocks set to the latest (free in time) */
void sim_oob(arcoll_oob_t *oob); /* bootstrap callbacks across the virtual ranks (cost: oob_*) */

/* For the model channel (sim_chan.c). */
int sim_active_rank(void); /* the rank running now, -1 outside a simulation */
int sim_size(void);
int sim_nic(void); /* the parameter set's nic */
void sim_rank_place(int rank, int node, int local_size);
uint64_t sim_clock(int rank);
uint64_t sim_landed(int rank); /* puts applied to rank's memory so far (chan_model_ops.landed) */
const void *sim_landed_at(int rank, uint64_t seq); /* chan_model_ops.landed_at */
int sim_put(int src, int dst, void *to, const void *from, size_t len, int flag, uint64_t *last);
void sim_progress(int rank);
void sim_idle(int rank);
void sim_purge(int rank, const void *addr, size_t len);
void sim_cost(int rank, int kind, size_t bytes); /* kind: CHAN_COST_* (chan/chan.h) */
/* The verbs channel's connection policy, counted: the RC QPs rank holds (one
 * per peer it wrote to or that wrote to it, as verbs wires them on first
 * write); connect_all: every peer now (ARCOLL_VERBS_CONNECT=eager). */
int sim_qps(int rank);
/* A bootstrap allgather of len bytes per rank, in time only (its cost, no data). */
int sim_oob_model(size_t len);
void sim_connect_all(int rank);

#endif
