/* The simulator's scheduler: coroutines, a conservative discrete-event
 * scheduler and the out-of-band bootstrap across the virtual ranks
 * (docs/scale.md, "How it runs"). The puts between the ranks, their cost and
 * their delivery are the network model's (sim_net.c); its parameter sets are
 * sim_params.c's.
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

#include "chan/sim/sim_int.h"
#include "util/log.h"

#ifdef SIM_ASM_SWITCH
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
#endif

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
    sim_world.quiet = 0;
    sim_world.active_ns = r->clock;
}

/* ---- run queue -------------------------------------------------------- */

static int rq_less(int a, int b)
{
    return sim_world.r[a].key < sim_world.r[b].key ||
           (sim_world.r[a].key == sim_world.r[b].key && a < b);
}

static void rq_swap(int i, int j)
{
    int t = sim_world.rq[i];

    sim_world.rq[i] = sim_world.rq[j];
    sim_world.rq[j] = t;
    sim_world.r[sim_world.rq[i]].hidx = i;
    sim_world.r[sim_world.rq[j]].hidx = j;
}

static void rq_sift(int i)
{
    while (i > 0 && rq_less(sim_world.rq[i], sim_world.rq[(i - 1) / 2])) {
        rq_swap(i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    for (;;) {
        int l = 2 * i + 1, m = i;
        if (l < sim_world.nrq && rq_less(sim_world.rq[l], sim_world.rq[m]))
            m = l;
        if (l + 1 < sim_world.nrq && rq_less(sim_world.rq[l + 1], sim_world.rq[m]))
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
    sim_rank_t *r = &sim_world.r[id];

    r->key = key;
    if (r->hidx < 0) {
        r->hidx = sim_world.nrq;
        sim_world.rq[sim_world.nrq++] = id;
    }
    rq_sift(r->hidx);
}

static int rq_pop(void)
{
    int id = sim_world.rq[0];

    rq_swap(0, --sim_world.nrq);
    sim_world.r[id].hidx = -1;
    sim_world.nready -= sim_world.r[id].state == SIM_READY;
    if (sim_world.nrq > 0)
        rq_sift(0);
    return id;
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
    __sanitizer_start_switch_fiber(r->state == SIM_DONE ? NULL : &r->asan_fake,
                                   sim_world.main_bottom, sim_world.main_size);
#endif
    SIM_SWAP(&r->uc, &sim_world.main);
#ifdef SIM_ASAN
    __sanitizer_finish_switch_fiber(r->asan_fake, &sim_world.main_bottom, &sim_world.main_size);
#endif
}

static void sim_to_rank(sim_rank_t *r)
{
#ifdef SIM_ASAN
    __sanitizer_start_switch_fiber(&sim_world.main_fake, r->stack_lo, r->stack_len);
#endif
    SIM_SWAP(&sim_world.main, &r->uc);
#ifdef SIM_ASAN
    __sanitizer_finish_switch_fiber(sim_world.main_fake, NULL, NULL);
#endif
}

/* The rank may go on unless it is a lookahead ahead of the next one. */
static void sim_maybe_yield(sim_rank_t *r)
{
    if (sim_world.nrq == 0 || r->clock < sim_world.r[sim_world.rq[0]].key + sim_world.lookahead)
        return;
    r->state = SIM_READY;
    sim_world.nready++;
    rq_set((int)(r - sim_world.r), r->clock);
    sim_to_scheduler(r);
}

/* Nothing to do until a put arrives (or, sharing a node, until the next look
 * at node memory, which peers write without the channel). */
static void sim_block(sim_rank_t *r)
{
    uint64_t key = sim_ev_next(r);

    if (r->local_size > 1 && r->clock + (uint64_t)sim_world.p.poll < key)
        key = r->clock + (uint64_t)sim_world.p.poll + 1;
    r->state = SIM_WAIT_PUT;
    if (key != SIM_NEVER)
        rq_set((int)(r - sim_world.r), key);
    sim_to_scheduler(r);
}

static void sim_entry(void)
{
    int id = sim_world.cur;
    sim_rank_t *r = &sim_world.r[id];

#ifdef SIM_ASAN
    __sanitizer_finish_switch_fiber(NULL, &sim_world.main_bottom, &sim_world.main_size);
#endif
    r->rc = sim_world.fn(id, sim_world.arg);
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
    return sim_world.cur;
}

int sim_size(void)
{
    return sim_world.n;
}

void sim_rank_place(int rank, int node, int local_size)
{
    sim_world.r[rank].node = node;
    sim_world.r[rank].local_size = local_size;
}

uint64_t sim_clock(int rank)
{
    return sim_world.r[rank].clock;
}

/* A put lands on rank id at t: a rank waiting for puts goes on then (or at
 * its clock, if later), unless it is queued to go on sooner. */
static void sim_rank_wake(int id, uint64_t t)
{
    sim_rank_t *r = &sim_world.r[id];

    if (r->state == SIM_WAIT_PUT && (r->hidx < 0 || t < r->key))
        rq_set(id, t > r->clock ? t : r->clock);
}

/* A put made or applied: the rank's next idle pass is no idle one, and its
 * progress calls without news count again from 0 (sim_idle, sim_progress). */
static void sim_rank_changed(sim_rank_t *r)
{
    r->changed = 1;
    r->quiet = 0;
}

void sim_progress(int rank)
{
    sim_rank_t *r = &sim_world.r[rank];

    if (!sim_deliver(r) && ++r->quiet >= 1024) {
        /* A wait loop that never calls the idle hook: treat it as one. */
        r->quiet = 0;
        sim_idle(rank);
    }
}

void sim_idle(int rank)
{
    sim_rank_t *r = &sim_world.r[rank];

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

/* ---- rank side -------------------------------------------------------- */

uint64_t sim_now(void)
{
    return sim_world.r[sim_world.cur].clock;
}

void sim_compute(uint64_t ns)
{
    sim_rank_t *r = &sim_world.r[sim_world.cur];

    r->clock += ns;
    sim_activity(r);
    sim_maybe_yield(r);
}

/* The library's bootstrap collectives cost oob_*; the tool's barrier
 * (sim_barrier) is free: it only lines the ranks up between calls. */
static int sim_oob_gather(const void *sbuf, void *rbuf, size_t len, int charge)
{
    int id = sim_world.cur, p;
    sim_rank_t *r = &sim_world.r[id];
    size_t len_data = len;

    p = r->oob_round++ & 1; /* a round's buffer is reused two rounds later, when all have read */
    if (sbuf == NULL)
        len_data = 0; /* a barrier, or an allgather modelled in time only */
    if (sim_world.oob_arrived[p] == 0) {
        size_t need = (size_t)sim_world.n * (len_data ? len_data : 1);
        if (sim_world.oob_cap[p] < need) {
            unsigned char *b = realloc(sim_world.oob_buf[p], need);
            if (b == NULL)
                return -1;
            sim_world.oob_buf[p] = b;
            sim_world.oob_cap[p] = need;
        }
        sim_world.oob_tmax[p] = 0;
    }
    if (len_data > 0)
        memcpy(sim_world.oob_buf[p] + (size_t)id * len, sbuf, len);
    if (sim_world.oob_tmax[p] < r->clock)
        sim_world.oob_tmax[p] = r->clock;
    sim_activity(r);
    if (++sim_world.oob_arrived[p] == sim_world.n) {
        sim_world.oob_arrived[p] = 0;
        if (charge) {
            int lg = 0;
            while ((1 << lg) < sim_world.n)
                lg++;
            sim_world.oob_tmax[p] +=
                (uint64_t)(sim_world.p.oob_a + sim_world.p.oob_b * lg +
                           sim_world.p.oob_c * (double)sim_world.n * (double)len);
        }
        for (int i = 0; i < sim_world.n; i++) {
            if (sim_world.r[i].state == SIM_WAIT_OOB) {
                sim_world.r[i].state = SIM_READY;
                sim_world.nready++;
                rq_set(i, sim_world.oob_tmax[p]);
            }
        }
        r->clock = sim_world.oob_tmax[p];
        sim_maybe_yield(r);
    } else {
        r->state = SIM_WAIT_OOB;
        sim_to_scheduler(r);
    }
    if (len_data > 0)
        memcpy(rbuf, sim_world.oob_buf[p], (size_t)sim_world.n * len);
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
    oob->rank = sim_world.cur;
    oob->size = sim_world.n;
}

/* ---- sim_run ---------------------------------------------------------- */

static void sim_free(void)
{
    sim_net_free();
    for (int i = 0; sim_world.r != NULL && i < sim_world.n; i++) {
        sim_rank_t *r = &sim_world.r[i];
        if (r->stack != NULL)
            munmap(r->stack, sim_world.stack_bytes);
    }
    free(sim_world.r);
    free(sim_world.rq);
    free(sim_world.oob_buf[0]);
    free(sim_world.oob_buf[1]);
    memset(&sim_world, 0, sizeof(sim_world));
    sim_world.cur = -1;
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
    return sim_world.nready == 0 && sim_world.quiet > 64 * (uint64_t)sim_world.n + 1024 &&
           sim_world.nrq > 0 &&
           sim_world.r[sim_world.rq[0]].key > sim_world.active_ns + SIM_STUCK_NS;
}

static void sim_report_deadlock(void)
{
    static const char *const states[] = {"ready", "running", "waiting for a put",
                                         "in the bootstrap", "done"};
    int shown = 0;

    for (int i = 0; i < sim_world.n; i++) {
        if (sim_world.r[i].state == SIM_DONE)
            continue;
        if (shown++ < 8)
            log_err("sim: deadlock: rank %d %s at %.3f us, %d puts queued", i,
                    states[sim_world.r[i].state], (double)sim_world.r[i].clock / 1e3,
                    sim_world.r[i].nev);
    }
    if (sim_world.nrq == 0)
        log_err("sim: deadlock: %d of %d ranks wait and no put is in flight", shown, sim_world.n);
    else
        log_err("sim: deadlock: %d of %d ranks wait, %llu puts undelivered, none made or "
                "delivered in %.1f ms of virtual time",
                shown, sim_world.n, (unsigned long long)sim_world.inflight,
                (double)SIM_STUCK_NS / 1e6);
}

static int sim_setup(const sim_opts_t *o, int (*fn)(int, void *), void *arg)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    sim_world.n = o->n;
    sim_world.p = o->params;
    sim_world.fn = fn;
    sim_world.arg = arg;
    sim_world.tick = o->tick_s > 0 ? o->tick : NULL;
    sim_world.tick_arg = o->tick_arg;
    sim_world.tick_s = o->tick_s;
    sim_world.tick_next = sim_wall() + o->tick_s;
    sim_world.sched =
        (sim_sched_hooks_t){sim_activity, sim_maybe_yield, sim_rank_wake, sim_rank_changed};
    sim_world.stack_bytes = (o->stack_bytes + page - 1) / page * page + page; /* + guard page */
    sim_world.lookahead =
        (uint64_t)(sim_world.p.intra_L < sim_world.p.inter_L ? sim_world.p.intra_L
                                                             : sim_world.p.inter_L);
    sim_world.r = calloc((size_t)sim_world.n, sizeof(*sim_world.r));
    sim_world.rq = calloc((size_t)sim_world.n, sizeof(*sim_world.rq));
    if (sim_world.r == NULL || sim_world.rq == NULL || sim_net_setup(o) != 0) {
        log_err("sim: out of memory for %d ranks", sim_world.n);
        return ARCOLL_ERR_NOMEM;
    }
    for (int i = 0; i < sim_world.n; i++) {
        sim_rank_t *r = &sim_world.r[i];
        r->hidx = -1;
        r->local_size = 1;
        if (sim_net_rank_setup(r) != 0) {
            log_err("sim: out of memory for rank %d's connection table", i);
            return ARCOLL_ERR_NOMEM;
        }
        r->stack = mmap(NULL, sim_world.stack_bytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (r->stack == MAP_FAILED) {
            r->stack = NULL;
            log_err("sim: cannot map a %zu-byte stack for rank %d: %s", sim_world.stack_bytes, i,
                    strerror(errno));
            return ARCOLL_ERR_NOMEM;
        }
        r->stack_lo = (char *)r->stack + page;
        r->stack_len = sim_world.stack_bytes - page;
        if (mprotect(r->stack, page, PROT_NONE) != 0 || sim_stack_init(r) != 0) {
            log_err("sim: cannot set up rank %d's coroutine: %s", i, strerror(errno));
            return ARCOLL_ERR_NOMEM;
        }
        r->state = SIM_READY;
        sim_world.nready++;
        rq_set(i, 0);
    }
    return ARCOLL_OK;
}

static void sim_stats_fill(sim_stats_t *st)
{
    st->switches = sim_world.switches;
    st->events = sim_world.events;
    st->nodata = sim_world.dropped;
    st->done = sim_world.done;
    st->vtime_ns = 0;
    for (int i = 0; sim_world.r != NULL && i < sim_world.n; i++)
        if (st->vtime_ns < sim_world.r[i].clock)
            st->vtime_ns = sim_world.r[i].clock;
}

/* The progress hook. The clock is read once per 64 turns (a vDSO call of
 * ~20 ns against turns of microseconds; init's turns are long and few). */
static void sim_tick(void)
{
    sim_stats_t now;
    double t;

    if (sim_world.tick == NULL || (sim_world.switches & 63) != 0 ||
        (t = sim_wall()) < sim_world.tick_next)
        return;
    sim_stats_fill(&now);
    sim_world.tick(sim_world.tick_arg, &now);
    sim_world.tick_next = t + sim_world.tick_s;
}

int sim_run(const sim_opts_t *o, int (*fn)(int rank, void *arg), void *arg, sim_stats_t *st)
{
    int rc, first = 0;

    if (sim_world.n != 0 || o->n <= 0) {
        log_err("sim: %s",
                sim_world.n != 0 ? "a simulation is already running" : "no ranks to run");
        return ARCOLL_ERR_STATE;
    }
    rc = sim_setup(o, fn, arg);
    while (rc == ARCOLL_OK && sim_world.nrq > 0 && !sim_stuck()) {
        int id = rq_pop();
        sim_rank_t *r = &sim_world.r[id];
        if (r->clock < r->key)
            r->clock = r->key;
        r->state = SIM_RUNNING;
        sim_world.cur = id;
        core_log_rank = id; /* log lines name the virtual rank */
        sim_world.switches++;
        sim_world.quiet++;
        sim_to_rank(r);
        sim_world.cur = -1;
        if (r->state == SIM_DONE) {
            sim_activity(r);
            sim_world.done++;
            if (r->rc != 0 && first == 0)
                first = r->rc; /* the others still run to their end */
        }
        sim_tick();
    }
    if (rc == ARCOLL_OK && sim_world.done < sim_world.n) {
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
