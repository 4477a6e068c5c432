/* The simulator's driver: coroutines, a conservative discrete-event
 * scheduler, per-rank event queues and the out-of-band bootstrap across the
 * virtual ranks (docs/scale.md, "How it runs"). Its cost model's parameter
 * sets are sim_params.c's.
 *
 * The scheduler always resumes the rank with the smallest key (its clock if
 * it can run, else the arrival time of its next put). A running rank may run
 * ahead of that minimum by less than the smallest latency L of the model
 * (the lookahead): every put it makes then arrives after every other rank's
 * clock, so no rank ever misses a put due before its own time. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "chan/chan.h"
#include "chan/sim/sim.h"
#include "util/log.h"

#if defined(__SANITIZE_ADDRESS__)
/* AddressSanitizer must be told about every stack switch (it keeps a fake
 * stack per real one): the __sanitizer_*_switch_fiber pairs below. */
#include <sanitizer/common_interface_defs.h>
#define SIM_ASAN 1
#endif

#define SIM_NEVER UINT64_MAX
/* An event's landing time: 2^56 ns is over two years of virtual time. */
#define SIM_EV_T_BITS 56
#define SIM_EV_T_MAX  ((UINT64_C(1) << SIM_EV_T_BITS) - 1)
/* Where a rank's last puts landed (chan_model_ops.landed_at), a ring: a poll loop
 * falls behind it only after this many landings, and then scans once. */
#define SIM_LOG 512

/* Stack switches. On x86_64 a hand-written switch (sim_ctx_swap below) that
 * saves only what the ABI says a callee keeps: glibc's swapcontext also saves
 * the signal mask, a sigprocmask system call per switch, which was a large
 * part of the simulator's time (docs/scale.md). Elsewhere, ucontext. */
#if defined(__x86_64__) && !defined(SIM_UCONTEXT)
#define SIM_ASM_SWITCH 1
/* Push rbp rbx r12-r15 and the SSE/x87 control words, store rsp in *from,
 * load to, pop the same. A new stack starts as if switched out just before
 * its entry function (sim_stack_init). */
void sim_ctx_swap(void **from, void *to);
__asm__(".text\n"
        ".p2align 4\n"
        ".globl sim_ctx_swap\n"
        ".hidden sim_ctx_swap\n"
        ".type sim_ctx_swap,@function\n"
        "sim_ctx_swap:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size sim_ctx_swap, .-sim_ctx_swap\n"
        ".section .note.GNU-stack,\"\",@progbits\n"
        ".text\n");
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

/* SIM_EV_POOL: carved from a slab and recycled through the free list of
 * its size class (the class number above SIM_EV_CLASS_SHIFT); else malloc'd
 * alone (puts above CHAN_PUT_COPY bytes). */
enum { SIM_EV_FLAG = 1, SIM_EV_NODATA = 2, SIM_EV_POOL = 4 };
#define SIM_EV_CLASS_SHIFT 3
/* Bytes of data an event of each class holds: payload-free puts need none,
 * flag words 8, slot headers 16, advertisements 56. A large run's memory is
 * mostly events in flight (two per pair of ranks at the peak), so each takes
 * its class's size, not a malloc chunk of the largest. */
static const uint32_t ev_class_len[] = {0, 8, 16, 32, 64};
#define SIM_EV_CLASSES (sizeof(ev_class_len) / sizeof(ev_class_len[0]))
#define SIM_SLAB_BYTES (1u << 20)
_Static_assert(CHAN_PUT_COPY <= 64, "ev_class_len must have a class for CHAN_PUT_COPY bytes");
_Static_assert(((SIM_EV_CLASSES - 1) << SIM_EV_CLASS_SHIFT | 7) < 256,
               "an event's flags and class fit sim_evq_t.flag");
/* Under ASan every event is its own allocation, so that its redzones catch a
 * write past an event's data. */
#ifdef SIM_ASAN
#define SIM_EV_MALLOC 1
#else
#define SIM_EV_MALLOC 0
#endif

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

static struct {
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
    uint64_t *up_free, *down_free;  /* [leaf]: its uplink, downlink busy until */
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
} W = {.cur = -1};

static double sim_wall(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A put made or delivered, a barrier step, a computation or a rank's end:
 * the run is not stuck (sim_stuck). */
static void sim_activity(const sim_rank_t *r)
{
    W.quiet = 0;
    W.active_ns = r->clock;
}

/* ---- run queue -------------------------------------------------------- */

static int rq_less(int a, int b)
{
    return W.r[a].key < W.r[b].key || (W.r[a].key == W.r[b].key && a < b);
}

static void rq_swap(int i, int j)
{
    int t = W.rq[i];

    W.rq[i] = W.rq[j];
    W.rq[j] = t;
    W.r[W.rq[i]].hidx = i;
    W.r[W.rq[j]].hidx = j;
}

static void rq_sift(int i)
{
    while (i > 0 && rq_less(W.rq[i], W.rq[(i - 1) / 2])) {
        rq_swap(i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    for (;;) {
        int l = 2 * i + 1, m = i;
        if (l < W.nrq && rq_less(W.rq[l], W.rq[m]))
            m = l;
        if (l + 1 < W.nrq && rq_less(W.rq[l + 1], W.rq[m]))
            m = l + 1;
        if (m == i)
            return;
        rq_swap(i, m);
        i = m;
    }
}

/* Queue rank id with key, or move it there if queued. */
static void rq_set(int id, uint64_t key)
{
    sim_rank_t *r = &W.r[id];

    r->key = key;
    if (r->hidx < 0) {
        r->hidx = W.nrq;
        W.rq[W.nrq++] = id;
    }
    rq_sift(r->hidx);
}

static int rq_pop(void)
{
    int id = W.rq[0];

    rq_swap(0, --W.nrq);
    W.r[id].hidx = -1;
    W.nready -= W.r[id].state == SIM_READY;
    if (W.nrq > 0)
        rq_sift(0);
    return id;
}

/* ---- event queue of a rank ------------------------------------------- */

static int ev_less(const sim_evq_t *a, const sim_evq_t *b)
{
    /* seq modulo 2^32: a rank never has 2^31 puts in flight to it */
    return a->t < b->t || (a->t == b->t && (int32_t)(a->e->seq - b->e->seq) < 0);
}

static void ev_sift(sim_rank_t *r, int i)
{
    sim_evq_t *q = r->evq;

    while (i > 0 && ev_less(&q[i], &q[(i - 1) / 2])) {
        sim_evq_t t = q[i];
        q[i] = q[(i - 1) / 2];
        q[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
    for (;;) {
        int l = 2 * i + 1, m = i;
        if (l < r->nev && ev_less(&q[l], &q[m]))
            m = l;
        if (l + 1 < r->nev && ev_less(&q[l + 1], &q[m]))
            m = l + 1;
        if (m == i)
            return;
        sim_evq_t t = q[i];
        q[i] = q[m];
        q[m] = t;
        i = m;
    }
}

/* Most puts are small (words, headers, bytes of small messages): their
 * events come from slabs and are recycled, instead of a malloc and free per
 * put. */
static sim_ev_t *ev_new(size_t len, uint32_t *flag)
{
    uint32_t c = 0;
    size_t sz;
    sim_ev_t *e;

    *flag = 0;
    if (len > CHAN_PUT_COPY || SIM_EV_MALLOC)
        return malloc(sizeof(*e) + len);
    while (ev_class_len[c] < len)
        c++;
    *flag = SIM_EV_POOL | c << SIM_EV_CLASS_SHIFT;
    e = W.pool[c];
    if (e != NULL) {
        W.pool[c] = e->dst;
        return e;
    }
    sz = sizeof(*e) + ev_class_len[c];
    if (W.slab_left < sz) {
        void **slab = malloc(SIM_SLAB_BYTES);
        if (slab == NULL)
            return NULL;
        *slab = W.slabs;
        W.slabs = slab;
        W.slab_at = (char *)slab + sizeof(sim_ev_t); /* keeps events 8-aligned */
        W.slab_left = SIM_SLAB_BYTES - sizeof(sim_ev_t);
    }
    e = (sim_ev_t *)(void *)W.slab_at;
    W.slab_at += sz;
    W.slab_left -= sz;
    return e;
}

/* flag: the one ev_new gave (the queue entry's). */
static void ev_free(sim_ev_t *e, uint32_t flag)
{
    if (flag & SIM_EV_POOL) {
        sim_ev_t **pool = &W.pool[flag >> SIM_EV_CLASS_SHIFT];
        e->dst = *pool;
        *pool = e;
    } else {
        free(e);
    }
}

static uint64_t ev_next(const sim_rank_t *r)
{
    return r->nev > 0 ? r->evq[0].t : SIM_NEVER;
}

/* ---- switching -------------------------------------------------------- */

#ifdef SIM_ASM_SWITCH
#define SIM_SWAP(from, to) sim_ctx_swap((from), *(to))
#else
#define SIM_SWAP(from, to)                                                          \
    do {                                                                            \
        if (swapcontext((from), (to)) != 0)                                         \
            abort(); /* cannot happen with a valid context; nothing to unwind to */ \
    } while (0)
#endif

static void sim_to_scheduler(sim_rank_t *r)
{
#ifdef SIM_ASAN
    __sanitizer_start_switch_fiber(r->state == SIM_DONE ? NULL : &r->asan_fake, W.main_bottom,
                                   W.main_size);
#endif
    SIM_SWAP(&r->uc, &W.main);
#ifdef SIM_ASAN
    __sanitizer_finish_switch_fiber(r->asan_fake, &W.main_bottom, &W.main_size);
#endif
}

static void sim_to_rank(sim_rank_t *r)
{
#ifdef SIM_ASAN
    __sanitizer_start_switch_fiber(&W.main_fake, r->stack_lo, r->stack_len);
#endif
    SIM_SWAP(&W.main, &r->uc);
#ifdef SIM_ASAN
    __sanitizer_finish_switch_fiber(W.main_fake, NULL, NULL);
#endif
}

/* The rank may go on unless it is a lookahead ahead of the next one. */
static void sim_maybe_yield(sim_rank_t *r)
{
    if (W.nrq == 0 || r->clock < W.r[W.rq[0]].key + W.lookahead)
        return;
    r->state = SIM_READY;
    W.nready++;
    rq_set((int)(r - W.r), r->clock);
    sim_to_scheduler(r);
}

/* Nothing to do until a put arrives (or, sharing a node, until the next look
 * at node memory, which peers write without the channel). */
static void sim_block(sim_rank_t *r)
{
    uint64_t key = ev_next(r);

    if (r->local_size > 1 && r->clock + (uint64_t)W.p.poll < key)
        key = r->clock + (uint64_t)W.p.poll + 1;
    r->state = SIM_WAIT_PUT;
    if (key != SIM_NEVER)
        rq_set((int)(r - W.r), key);
    sim_to_scheduler(r);
}

static void sim_entry(void)
{
    int id = W.cur;
    sim_rank_t *r = &W.r[id];

#ifdef SIM_ASAN
    __sanitizer_finish_switch_fiber(NULL, &W.main_bottom, &W.main_size);
#endif
    r->rc = W.fn(id, W.arg);
    r->state = SIM_DONE;
    sim_to_scheduler(r);
}

/* A fresh coroutine: its first switch-in enters sim_entry. */
static int sim_stack_init(sim_rank_t *r)
{
#ifdef SIM_ASM_SWITCH
    /* From the top: a 0 return address for sim_entry (never used), the
     * address sim_ctx_swap's ret pops, six saved registers (0) and the
     * control words (MXCSR 0x1f80, x87 0x037f: the ABI's defaults). The
     * ret slot is 16-aligned, so sim_entry starts with rsp = 8 mod 16, as
     * after a call. */
    uintptr_t top = ((uintptr_t)r->stack_lo + r->stack_len) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)(top - 16);

    sp[1] = 0;
    sp[0] = (uint64_t)(uintptr_t)sim_entry;
    sp -= 7;
    memset(sp, 0, 7 * sizeof(*sp));
    sp[0] = 0x1f80 | ((uint64_t)0x037f << 32);
    r->uc = sp;
    return 0;
#else
    if (getcontext(&r->uc) != 0)
        return -1;
    r->uc.uc_stack.ss_sp = r->stack_lo;
    r->uc.uc_stack.ss_size = r->stack_len;
    r->uc.uc_link = NULL;
    makecontext(&r->uc, sim_entry, 0);
    return 0;
#endif
}

/* ---- the channel's side ----------------------------------------------- */

int sim_active_rank(void)
{
    return W.cur;
}

int sim_size(void)
{
    return W.n;
}

int sim_nic(void)
{
    return W.p.nic;
}

void sim_rank_place(int rank, int node, int local_size)
{
    W.r[rank].node = node;
    W.r[rank].local_size = local_size;
}

uint64_t sim_clock(int rank)
{
    return W.r[rank].clock;
}

uint64_t sim_landed(int rank)
{
    return W.rescan ? W.r[rank].landed++ : W.r[rank].landed;
}

const void *sim_landed_at(int rank, uint64_t seq)
{
    const sim_rank_t *r = &W.r[rank];

    if (W.rescan || seq >= r->landed || r->landed - seq > SIM_LOG)
        return NULL;
    return r->log[seq % SIM_LOG];
}

/* One stage of a put's path, busy until *busy. Bytes flow through the stages
 * cut-through: a stage starts no earlier than the one before it started and
 * ends no earlier than that one ended. Stages take puts in the order they are
 * made, which may differ from virtual time order by up to the lookahead. */
static void sim_stage(uint64_t *busy, uint64_t dur, uint64_t *start, uint64_t *end)
{
    if (*start < *busy)
        *start = *busy;
    if (*end < *start + dur)
        *end = *start + dur;
    *busy = *end;
}

/* An inter-node put: the sender's o, its NIC, the leaf uplink and downlink
 * when it changes leaf, the target's NIC; arrival L after the last stage. */
static uint64_t sim_net(sim_rank_t *s, const sim_rank_t *d, size_t len)
{
    const sim_params_t *p = &W.p;
    double wire = (double)len * p->inter_G;
    uint64_t occ = (uint64_t)(wire > p->inter_g ? wire : p->inter_g);
    uint64_t start, end = 0;

    s->clock += (uint64_t)p->inter_o;
    start = s->clock;
    sim_stage(&W.nic_free[s->node], occ, &start, &end);
    if (p->leaf_nodes >= 1) {
        int ls = s->node / (int)p->leaf_nodes, ld = d->node / (int)p->leaf_nodes;
        if (ls != ld) {
            uint64_t up = (uint64_t)((double)len * p->up_G);
            sim_stage(&W.up_free[ls], up, &start, &end);
            sim_stage(&W.down_free[ld], up, &start, &end);
        }
    }
    if (p->rx_nic != 0)
        sim_stage(&W.rx_free[d->node], occ, &start, &end);
    return end + (uint64_t)p->inter_L;
}

int sim_put(int src, int dst, void *to, const void *from, size_t len, int flag, uint64_t *last)
{
    sim_rank_t *s = &W.r[src], *d = &W.r[dst];
    const sim_params_t *p = &W.p;
    sim_ev_t *e;
    uint32_t evflag;
    uint64_t arr, handshake = 0;
    /* Faults hit payload only (puts above CHAN_PUT_COPY bytes; control words
     * are smaller), so that the tool's byte check is what must catch them.
     * Payload-free drops bytes read from the user's buffers (sim_opts_t). */
    int payload = !flag && len > CHAN_PUT_COPY;
    int nodata = !flag && (uintptr_t)from - (uintptr_t)W.nodata < W.nodata_len;

    e = ev_new(nodata ? 0 : len, &evflag);
    if (e == NULL || (d->nev == d->cap && d->cap > INT32_MAX / 2)) {
        if (e != NULL)
            ev_free(e, evflag);
        log_err("sim: out of memory queueing a put");
        return ARCOLL_ERR_NOMEM;
    }
    if (d->nev == d->cap) {
        int cap = d->cap ? 2 * d->cap : 64;
        sim_evq_t *q = realloc(d->evq, sizeof(*q) * (size_t)cap);
        if (q == NULL) {
            ev_free(e, evflag);
            log_err("sim: out of memory queueing a put");
            return ARCOLL_ERR_NOMEM;
        }
        d->evq = q;
        d->cap = cap;
    }
    if (src != dst && !s->qp[dst]) {
        /* verbs' first write to a peer: our QP and a HELLO over UD; the peer
         * creates and connects its own and answers; the put waits for that.
         * A set without QP cost (host-shm: no QPs) has no handshake either. */
        s->qp[dst] = d->qp[src] = 1;
        s->nqps++;
        d->nqps++;
        s->clock += (uint64_t)p->qp_ns;
        if (p->qp_ns > 0)
            handshake = (uint64_t)(p->qp_ns + 2 * (s->node == d->node ? p->intra_L : p->inter_L));
    }
    if (s->node == d->node) {
        s->clock += (uint64_t)(p->intra_o + (double)len * p->intra_G);
        arr = s->clock + (uint64_t)p->intra_L;
    } else {
        arr = sim_net(s, d, len);
    }
    arr += handshake;
    if (W.fault == SIM_FAULT_REORDER && payload) {
        arr += 20000; /* data after its flag: the ordering rule broken on purpose */
    } else {
        if (arr < *last)
            arr = *last; /* one pair's puts land in order (RC) */
        *last = arr;
    }
    if (arr > SIM_EV_T_MAX) {
        ev_free(e, evflag);
        log_err("sim: virtual time passed 2^%d ns", SIM_EV_T_BITS);
        return ARCOLL_ERR_UNSUPPORTED;
    }
    e->seq = d->evseq++;
    e->dst = to;
    e->len = (uint32_t)len;
    evflag |= (flag ? SIM_EV_FLAG : 0) | (nodata ? SIM_EV_NODATA : 0);
    if (!nodata)
        memcpy(e->data, from, len);
    if (W.fault == SIM_FAULT_CORRUPT && payload && !nodata && W.seq++ % 7 == 0)
        e->data[len / 2] ^= 0x5a;
    d->evq[d->nev].t = arr;
    d->evq[d->nev].flag = evflag & 0xffu;
    d->evq[d->nev++].e = e;
    ev_sift(d, d->nev - 1);
    W.inflight++;
    sim_activity(s);
    if (d->state == SIM_WAIT_PUT && (d->hidx < 0 || arr < d->key))
        rq_set(dst, arr > d->clock ? arr : d->clock);
    s->changed = 1;
    s->quiet = 0;
    sim_maybe_yield(s);
    return ARCOLL_OK;
}

/* Apply the puts due by the rank's clock; 1 if there were any. */
static int sim_deliver(sim_rank_t *r)
{
    int applied = 0;

    while (r->nev > 0 && r->evq[0].t <= r->clock) {
        sim_ev_t *e = r->evq[0].e;
        uint32_t flag = r->evq[0].flag;
        r->evq[0] = r->evq[--r->nev];
        if (r->nev > 0)
            ev_sift(r, 0);
        if (flag & SIM_EV_FLAG) {
            uint64_t v;
            memcpy(&v, e->data, sizeof(v));
            __atomic_store_n((uint64_t *)e->dst, v, __ATOMIC_RELEASE);
        } else {
            if (!(flag & SIM_EV_NODATA))
                memcpy(e->dst, e->data, e->len);
            else
                W.dropped++;
            r->clock += (uint64_t)((double)e->len * W.p.copy_G);
        }
        r->log[r->landed++ % SIM_LOG] = e->dst;
        ev_free(e, flag);
        W.events++;
        W.inflight--;
        sim_activity(r);
        applied = 1;
    }
    if (applied) {
        r->changed = 1;
        r->quiet = 0;
    }
    return applied;
}

void sim_progress(int rank)
{
    sim_rank_t *r = &W.r[rank];

    if (!sim_deliver(r) && ++r->quiet >= 1024) {
        /* A wait loop that never calls the idle hook: treat it as one. */
        r->quiet = 0;
        sim_idle(rank);
    }
}

void sim_idle(int rank)
{
    sim_rank_t *r = &W.r[rank];

    /* A phase that polls node memory only (pap_shm's local step) does not
     * call progress(): what is due lands here, or the rank would wait for
     * puts it already has. */
    sim_deliver(r);
    if (r->changed) {
        r->changed = 0;
        r->unchanged = 0;
        sim_maybe_yield(r);
        return;
    }
    /* Two passes in a row saw nothing new: only a put (or node memory) can
     * change that. */
    if (++r->unchanged < 2) {
        sim_maybe_yield(r);
        return;
    }
    sim_block(r);
}

int sim_qps(int rank)
{
    return W.r[rank].nqps;
}

void sim_connect_all(int rank)
{
    sim_rank_t *r = &W.r[rank];

    /* verbs_connect_all creates a QP per peer, then runs the handshakes: the
     * creates are serial on this rank. */
    for (int i = 0; i < W.n; i++) {
        if (i == rank || r->qp[i])
            continue;
        r->qp[i] = W.r[i].qp[rank] = 1;
        r->nqps++;
        W.r[i].nqps++;
        r->clock += (uint64_t)W.p.qp_ns;
    }
    sim_activity(r);
    sim_maybe_yield(r);
}

void sim_purge(int rank, const void *addr, size_t len)
{
    sim_rank_t *r = &W.r[rank];
    const char *lo = addr, *hi = lo + len;
    int k = 0;

    for (int i = 0; i < r->nev; i++) {
        sim_evq_t q = r->evq[i];
        if ((const char *)q.e->dst >= lo && (const char *)q.e->dst < hi) {
            ev_free(q.e, q.flag);
            W.inflight--;
        } else {
            r->evq[k++] = q;
        }
    }
    r->nev = k;
    for (int i = k / 2; i >= 0 && k > 0; i--)
        ev_sift(r, i);
}

/* Local work the channel does not see, charged before it is done: node
 * memory it writes is then visible to the other ranks no earlier than the
 * charged time less the lookahead (a rank runs on without yielding while it
 * is less than a lookahead ahead of the next one). */
void sim_cost(int rank, int kind, size_t bytes)
{
    sim_rank_t *r = &W.r[rank];
    double ns = (double)bytes * (kind == CHAN_COST_REDUCE ? W.p.reduce_G : W.p.copy_G);
    uint64_t whole;

    ns += r->cost_frac;
    whole = (uint64_t)ns;
    r->cost_frac = ns - (double)whole;
    if (whole == 0)
        return;
    r->clock += whole;
    sim_activity(r);
    sim_maybe_yield(r);
}

/* ---- rank side -------------------------------------------------------- */

uint64_t sim_now(void)
{
    return W.r[W.cur].clock;
}

void sim_compute(uint64_t ns)
{
    sim_rank_t *r = &W.r[W.cur];

    r->clock += ns;
    sim_activity(r);
    sim_maybe_yield(r);
}

/* The library's bootstrap collectives cost oob_*; the tool's barrier
 * (sim_barrier) is free: it only lines the ranks up between calls. */
static int sim_oob_gather(const void *sbuf, void *rbuf, size_t len, int charge)
{
    int id = W.cur, p;
    sim_rank_t *r = &W.r[id];
    size_t len_data = len;

    p = r->oob_round++ & 1; /* a round's buffer is reused two rounds later, when all have read */
    if (sbuf == NULL)
        len_data = 0; /* a barrier, or an allgather modelled in time only */
    if (W.oob_arrived[p] == 0) {
        size_t need = (size_t)W.n * (len_data ? len_data : 1);
        if (W.oob_cap[p] < need) {
            unsigned char *b = realloc(W.oob_buf[p], need);
            if (b == NULL)
                return -1;
            W.oob_buf[p] = b;
            W.oob_cap[p] = need;
        }
        W.oob_tmax[p] = 0;
    }
    if (len_data > 0)
        memcpy(W.oob_buf[p] + (size_t)id * len, sbuf, len);
    if (W.oob_tmax[p] < r->clock)
        W.oob_tmax[p] = r->clock;
    sim_activity(r);
    if (++W.oob_arrived[p] == W.n) {
        W.oob_arrived[p] = 0;
        if (charge) {
            int lg = 0;
            while ((1 << lg) < W.n)
                lg++;
            W.oob_tmax[p] +=
                (uint64_t)(W.p.oob_a + W.p.oob_b * lg + W.p.oob_c * (double)W.n * (double)len);
        }
        for (int i = 0; i < W.n; i++) {
            if (W.r[i].state == SIM_WAIT_OOB) {
                W.r[i].state = SIM_READY;
                W.nready++;
                rq_set(i, W.oob_tmax[p]);
            }
        }
        r->clock = W.oob_tmax[p];
        sim_maybe_yield(r);
    } else {
        r->state = SIM_WAIT_OOB;
        sim_to_scheduler(r);
    }
    if (len_data > 0)
        memcpy(rbuf, W.oob_buf[p], (size_t)W.n * len);
    return 0;
}

static int sim_oob_allgather(const void *sbuf, void *rbuf, size_t len, void *user)
{
    (void)user;
    return sim_oob_gather(sbuf, rbuf, len, 1);
}

static int sim_oob_barrier(void *user)
{
    (void)user;
    return sim_oob_gather(NULL, NULL, 0, 1);
}

int sim_oob_model(size_t len)
{
    return sim_oob_gather(NULL, NULL, len, 1) == 0 ? ARCOLL_OK : ARCOLL_ERR_BOOTSTRAP;
}

int sim_barrier(void)
{
    return sim_oob_gather(NULL, NULL, 0, 0) == 0 ? ARCOLL_OK : ARCOLL_ERR_BOOTSTRAP;
}

void sim_oob(arcoll_oob_t *oob)
{
    memset(oob, 0, sizeof(*oob));
    oob->allgather = sim_oob_allgather;
    oob->barrier = sim_oob_barrier;
    oob->rank = W.cur;
    oob->size = W.n;
}

/* ---- sim_run ---------------------------------------------------------- */

static void sim_free(void)
{
    for (int i = 0; W.r != NULL && i < W.n; i++) {
        sim_rank_t *r = &W.r[i];
        for (int k = 0; k < r->nev; k++)
            ev_free(r->evq[k].e, r->evq[k].flag);
        free(r->evq);
        free(r->qp);
        free(r->log);
        if (r->stack != NULL)
            munmap(r->stack, W.stack_bytes);
    }
    while (W.slabs != NULL) {
        void **slab = W.slabs;
        W.slabs = *slab;
        free(slab);
    }
    free(W.r);
    free(W.rq);
    free(W.nic_free);
    free(W.rx_free);
    free(W.up_free);
    free(W.down_free);
    free(W.oob_buf[0]);
    free(W.oob_buf[1]);
    memset(&W, 0, sizeof(W));
    W.cur = -1;
}

/* Ranks sharing a node wake to look at node memory even with no put due, so
 * a deadlock among them never empties the run queue. It is one too when no
 * rank is queued to run on (all only look at node memory) and nothing
 * happened (sim_activity) for SIM_STUCK_NS of virtual time. (A late rank
 * still computing is queued to run on: the others' looks until its clock
 * are no deadlock. Node-memory phases without a put last microseconds.) */
#define SIM_STUCK_NS 10000000ULL
static int sim_stuck(void)
{
    return W.nready == 0 && W.quiet > 64 * (uint64_t)W.n + 1024 && W.nrq > 0 &&
           W.r[W.rq[0]].key > W.active_ns + SIM_STUCK_NS;
}

static void sim_report_deadlock(void)
{
    static const char *const states[] = {"ready", "running", "waiting for a put",
                                         "in the bootstrap", "done"};
    int shown = 0;

    for (int i = 0; i < W.n; i++) {
        if (W.r[i].state == SIM_DONE)
            continue;
        if (shown++ < 8)
            log_err("sim: deadlock: rank %d %s at %.3f us, %d puts queued", i, states[W.r[i].state],
                    (double)W.r[i].clock / 1e3, W.r[i].nev);
    }
    if (W.nrq == 0)
        log_err("sim: deadlock: %d of %d ranks wait and no put is in flight", shown, W.n);
    else
        log_err("sim: deadlock: %d of %d ranks wait, %llu puts undelivered, none made or "
                "delivered in %.1f ms of virtual time",
                shown, W.n, (unsigned long long)W.inflight, (double)SIM_STUCK_NS / 1e6);
}

static int sim_setup(const sim_opts_t *o, int (*fn)(int, void *), void *arg)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    W.n = o->n;
    W.p = o->params;
    W.fault = o->fault;
    W.nodata = o->nodata;
    W.nodata_len = o->nodata_len;
    W.rescan = o->rescan;
    W.fn = fn;
    W.arg = arg;
    W.tick = o->tick_s > 0 ? o->tick : NULL;
    W.tick_arg = o->tick_arg;
    W.tick_s = o->tick_s;
    W.tick_next = sim_wall() + o->tick_s;
    W.stack_bytes = (o->stack_bytes + page - 1) / page * page + page; /* + guard page */
    W.lookahead = (uint64_t)(W.p.intra_L < W.p.inter_L ? W.p.intra_L : W.p.inter_L);
    W.r = calloc((size_t)W.n, sizeof(*W.r));
    W.rq = calloc((size_t)W.n, sizeof(*W.rq));
    W.nic_free = calloc((size_t)W.n, sizeof(*W.nic_free));
    W.rx_free = calloc((size_t)W.n, sizeof(*W.rx_free));
    W.up_free = calloc((size_t)W.n, sizeof(*W.up_free)); /* leaves <= nodes <= ranks */
    W.down_free = calloc((size_t)W.n, sizeof(*W.down_free));
    if (W.r == NULL || W.rq == NULL || W.nic_free == NULL || W.rx_free == NULL ||
        W.up_free == NULL || W.down_free == NULL) {
        log_err("sim: out of memory for %d ranks", W.n);
        return ARCOLL_ERR_NOMEM;
    }
    for (int i = 0; i < W.n; i++) {
        sim_rank_t *r = &W.r[i];
        r->hidx = -1;
        r->local_size = 1;
        r->qp = calloc((size_t)W.n, 1);
        r->log = calloc(SIM_LOG, sizeof(*r->log));
        if (r->qp == NULL || r->log == NULL) {
            log_err("sim: out of memory for rank %d's connection table", i);
            return ARCOLL_ERR_NOMEM;
        }
        r->stack = mmap(NULL, W.stack_bytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (r->stack == MAP_FAILED) {
            r->stack = NULL;
            log_err("sim: cannot map a %zu-byte stack for rank %d: %s", W.stack_bytes, i,
                    strerror(errno));
            return ARCOLL_ERR_NOMEM;
        }
        r->stack_lo = (char *)r->stack + page;
        r->stack_len = W.stack_bytes - page;
        if (mprotect(r->stack, page, PROT_NONE) != 0 || sim_stack_init(r) != 0) {
            log_err("sim: cannot set up rank %d's coroutine: %s", i, strerror(errno));
            return ARCOLL_ERR_NOMEM;
        }
        r->state = SIM_READY;
        W.nready++;
        rq_set(i, 0);
    }
    return ARCOLL_OK;
}

static void sim_stats_fill(sim_stats_t *st)
{
    st->switches = W.switches;
    st->events = W.events;
    st->nodata = W.dropped;
    st->done = W.done;
    st->vtime_ns = 0;
    for (int i = 0; W.r != NULL && i < W.n; i++)
        if (st->vtime_ns < W.r[i].clock)
            st->vtime_ns = W.r[i].clock;
}

/* The progress hook. The clock is read once per 64 turns (a vDSO call of
 * ~20 ns against turns of microseconds; init's turns are long and few). */
static void sim_tick(void)
{
    sim_stats_t now;
    double t;

    if (W.tick == NULL || (W.switches & 63) != 0 || (t = sim_wall()) < W.tick_next)
        return;
    sim_stats_fill(&now);
    W.tick(W.tick_arg, &now);
    W.tick_next = t + W.tick_s;
}

int sim_run(const sim_opts_t *o, int (*fn)(int rank, void *arg), void *arg, sim_stats_t *st)
{
    int rc, first = 0;

    if (W.n != 0 || o->n <= 0) {
        log_err("sim: %s", W.n != 0 ? "a simulation is already running" : "no ranks to run");
        return ARCOLL_ERR_STATE;
    }
    rc = sim_setup(o, fn, arg);
    while (rc == ARCOLL_OK && W.nrq > 0 && !sim_stuck()) {
        int id = rq_pop();
        sim_rank_t *r = &W.r[id];
        if (r->clock < r->key)
            r->clock = r->key;
        r->state = SIM_RUNNING;
        W.cur = id;
        core_log_rank = id; /* log lines name the virtual rank */
        W.switches++;
        W.quiet++;
        sim_to_rank(r);
        W.cur = -1;
        if (r->state == SIM_DONE) {
            sim_activity(r);
            W.done++;
            if (r->rc != 0 && first == 0)
                first = r->rc; /* the others still run to their end */
        }
        sim_tick();
    }
    if (rc == ARCOLL_OK && W.done < W.n) {
        sim_report_deadlock();
        rc = ARCOLL_ERR_STATE;
    }
    if (rc == ARCOLL_OK)
        rc = first;
    if (st != NULL)
        sim_stats_fill(st);
    sim_free();
    return rc;
}
