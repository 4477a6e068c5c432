/* The simulator driver's world state and what its two halves share
 * (docs/scale.md, "How it runs"): the scheduler (sim_sched.c: coroutine
 * ranks, the run queue, virtual clocks, waiting and idling, the oob, sim_run)
 * and the network model (sim_net.c: the ranks' event queues of puts in
 * flight, their cost and delivery, the connection count, the landed log).
 *
 * The scheduler calls the model to deliver (sim_deliver), for a waiting
 * rank's next arrival (sim_ev_next), and to set up and free its state; the
 * model answers only through the hooks the scheduler gives it
 * (sim_world.sched), so the calls go one way. Both charge time to a rank's
 * clock. The world (sim_world) is defined with the model, the lower half. */
#ifndef ARCOLL_CHAN_SIM_SIM_INT_H
#define ARCOLL_CHAN_SIM_SIM_INT_H

#include <stddef.h>
#include <stdint.h>

#include "chan/sim/sim.h"

#if defined(__SANITIZE_ADDRESS__)
/* AddressSanitizer must be told about every stack switch (it keeps a fake
 * stack per real one): the __sanitizer_*_switch_fiber pairs of
 * sim_sched.c. */
#include <sanitizer/common_interface_defs.h>
#define SIM_ASAN 1
#endif

#define SIM_NEVER UINT64_MAX
/* An event's landing time: 2^56 ns is over two years of virtual time. */
#define SIM_EV_T_BITS 56
#define SIM_EV_T_MAX  ((UINT64_C(1) << SIM_EV_T_BITS) - 1)

/* Stack switches. On x86_64 a hand-written switch (sim_ctx_swap in
 * sim_sched.c) that saves only what the ABI says a callee keeps: glibc's
 * swapcontext also saves the signal mask, a sigprocmask system call per
 * switch, which was a large part of the simulator's time (docs/scale.md).
 * Elsewhere, ucontext. */
#if defined(__x86_64__) && !defined(SIM_UCONTEXT)
#define SIM_ASM_SWITCH 1
typedef void *sim_ctx_t; /* the saved stack pointer */
#else
#include <ucontext.h>
typedef ucontext_t sim_ctx_t;
#endif

/* A put in flight: 16 bytes and its data (at the peak of a 4096-rank run
 * about 30 M are in flight). */
typedef struct sim_ev {
    void *dst;
    uint32_t seq; /* the destination's count of puts: order among equal t */
    uint32_t len;
    unsigned char data[];
} sim_ev_t;

/* An entry of a rank's event queue: the landing time and the flags beside
 * the pointer, so that keeping the queue in order reads the queue alone (the
 * events are scattered over slabs: each a cache miss, about 13 per put when
 * the heap compared through them at 4096 ranks). */
typedef struct sim_evq {
    uint64_t t : SIM_EV_T_BITS; /* virtual ns it lands */
    uint64_t flag : 8;          /* SIM_EV_*, and the pool class */
    sim_ev_t *e;
} sim_evq_t;

/* Bytes of data an event of each class holds: payload-free puts need none,
 * flag words 8, slot headers 16, advertisements 56. A large run's memory is
 * mostly events in flight (two per pair of ranks at the peak), so each takes
 * its class's size, not a malloc chunk of the largest. */
static const uint32_t ev_class_len[] = {0, 8, 16, 32, 64};
#define SIM_EV_CLASSES (sizeof(ev_class_len) / sizeof(ev_class_len[0]))

enum { SIM_READY, SIM_RUNNING, SIM_WAIT_PUT, SIM_WAIT_OOB, SIM_DONE };

typedef struct sim_rank {
    sim_ctx_t uc;
    void *stack;
    void *stack_lo; /* usable stack (above the guard page), for ASan */
    size_t stack_len;
    uint64_t clock;
    uint64_t key; /* in the run queue: when it can go on */
    int hidx;     /* index in the run queue, -1 if not in it */
    int state;
    int changed;      /* a put made or applied since the last idle pass */
    int unchanged;    /* idle passes in a row with nothing changed */
    int quiet;        /* progress calls in a row with nothing applied */
    double cost_frac; /* charged local work below 1 ns, carried to the next charge */
    int node, local_size;
    int oob_round;
    uint64_t landed; /* puts applied to its memory (sim_deliver) */
    void **log;      /* [SIM_LOG]: landing k wrote at log[k % SIM_LOG] */
    int nqps;        /* RC QPs verbs would hold (sim_qps) */
    uint8_t *qp;     /* [n]: 1 if it holds one to that peer */
    int rc;
    void *asan_fake; /* ASan's fake stack of this coroutine while it is switched out */
    sim_evq_t *evq;  /* min-heap by (t, seq) */
    int nev, cap;
    uint32_t evseq; /* puts queued to it so far, mod 2^32 (sim_ev_t.seq) */
} sim_rank_t;

/* The simulation (one per process): the scheduler's and the model's state. */
/* What the model tells the scheduler (sim_sched.c sets them in sim_run). */
typedef struct sim_sched_hooks {
    void (*activity)(const sim_rank_t *r); /* something happened at r's clock */
    void (*maybe_yield)(sim_rank_t *r);    /* r may have to let earlier ranks run */
    void (*wake)(int id, uint64_t t);      /* a put for rank id arrives at t */
    void (*changed)(sim_rank_t *r);        /* r's clock moved: requeue it */
} sim_sched_hooks_t;

typedef struct sim_world {
    int n, cur, fault;
    int rescan;         /* sim_opts_t.rescan */
    const void *nodata; /* sim_opts_t.nodata */
    size_t nodata_len;
    sim_params_t p;
    uint64_t lookahead, seq, switches, events, dropped; /* seq: payload puts (fault corrupt) */
    uint64_t inflight;                                  /* puts queued, all ranks */
    uint64_t quiet;     /* switches since anything happened (a put, a delivery, a barrier) */
    uint64_t active_ns; /* the virtual time it last did */
    int nready;         /* ranks queued to run on (not waiting for a put or node memory) */
    size_t stack_bytes;
    sim_rank_t *r;
    int *rq, nrq;                   /* run queue: min-heap of ranks by (key, rank) */
    uint64_t *nic_free, *rx_free;   /* [node]: a NIC busy sending, receiving until */
    uint64_t *up_free, *down_free;  /* [leaf x up_links + cable]: up, down busy until */
    sim_ev_t *pool[SIM_EV_CLASSES]; /* free events by class (ev_new), linked through dst */
    void *slabs;                    /* each slab's first word links to the next */
    char *slab_at;                  /* the unused rest of the newest slab */
    size_t slab_left;
    sim_ctx_t main;
    const void *main_bottom; /* the scheduler's stack, for ASan */
    size_t main_size;
    void *main_fake;
    int (*fn)(int, void *);
    void *arg;
    unsigned char *oob_buf[2];
    size_t oob_cap[2];
    int oob_arrived[2];
    uint64_t oob_tmax[2];
    int done; /* ranks that have returned */
    void (*tick)(void *, const sim_stats_t *);
    void *tick_arg;
    double tick_s, tick_next; /* seconds, CLOCK_MONOTONIC */
    sim_sched_hooks_t sched;
} sim_world_t;

extern sim_world_t sim_world;

/* The model's (sim_net.c), for the scheduler. */
int sim_deliver(sim_rank_t *r);
uint64_t sim_ev_next(const sim_rank_t *r);
int sim_net_setup(const sim_opts_t *o);
int sim_net_rank_setup(sim_rank_t *r);
void sim_net_free(void);

#endif
