/*
 * Runs coll_test without a launcher: forks NRANKS children that bootstrap
 * arcoll through the out-of-band callbacks (the seam an embedding MPI channel
 * uses), implemented over an anonymous shared mapping made before the fork.
 *
 *   fork_test NRANKS MODE [ARGS...]     MODE and ARGS as for coll_test, or shco
 *                                       (tests/integ/shco_test.c)
 *
 * Exit status 0 only if every child exited 0; in MODE kill the last rank must
 * instead die by SIGKILL. Nothing waits forever: an oob barrier gives up after
 * 30 s (or at once when the parent saw a child die), and the parent kills
 * everything after 120 s.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coll_test.h"
#include "launch_verdict.h"
#include "shco_test.h"

/* coll_test keeps member lists in arrays of 64 (sub-team) and 256 ints. */
#define FORK_MAX_RANKS 64
/* The library gathers only small records (hostnames, keys, pids). */
#define FORK_SLOT_BYTES   4096
#define FORK_BARRIER_SECS 30
#define FORK_JOB_SECS     120

/* Lives in the MAP_SHARED mapping: one instance seen by all children. */
struct fork_shared {
    _Alignas(64) atomic_uint count; /* arrivals at the current barrier */
    _Alignas(64) atomic_uint gen;   /* bumped by the last arrival */
    _Alignas(64) atomic_int broken; /* a barrier timed out or a child died */
    _Alignas(64) unsigned char slot[FORK_MAX_RANKS][FORK_SLOT_BYTES];
};

struct fork_oob {
    struct fork_shared *sh;
    int rank, size;
};

static double fork_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Generation-counting barrier: the last arrival resets the count and bumps
 * the generation the others poll. A broken barrier stays broken, because the
 * ranks no longer agree on which barrier they are at. */
static int fork_barrier(void *user)
{
    struct fork_oob *o = user;
    struct fork_shared *sh = o->sh;
    unsigned gen = atomic_load(&sh->gen);
    double deadline = fork_now() + FORK_BARRIER_SECS;

    if (atomic_load(&sh->broken))
        return -1;
    if (atomic_fetch_add(&sh->count, 1) == (unsigned)o->size - 1) {
        atomic_store(&sh->count, 0);
        atomic_fetch_add(&sh->gen, 1);
        return 0;
    }
    for (unsigned spins = 0;; spins++) {
        if (atomic_load(&sh->gen) != gen)
            return 0;
        if (atomic_load(&sh->broken)) {
            /* The barrier may have completed just before a later death. */
            return atomic_load(&sh->gen) != gen ? 0 : -1;
        }
        if (fork_now() > deadline) {
            fprintf(stderr, "[fork_test rank %d] oob barrier: no progress in %d s\n", o->rank,
                    FORK_BARRIER_SECS);
            atomic_store(&sh->broken, 1);
            return -1;
        }
        /* Ranks outnumber cores here: yield first, then sleep so that
         * waiters leave the CPU to the ranks still working; sleep longer
         * once the wait is clearly not a short one. */
        if (spins < 1000) {
            sched_yield();
        } else {
            int long_wait = deadline - fork_now() < FORK_BARRIER_SECS - 1;
            struct timespec ts = {0, long_wait ? 1000000 : 50000};
            nanosleep(&ts, NULL);
        }
    }
}

/* Slot per rank; the second barrier keeps the next call from overwriting a
 * slot that a slower rank is still copying out. */
static int fork_allgather(const void *sbuf, void *rbuf, size_t len, void *user)
{
    struct fork_oob *o = user;
    struct fork_shared *sh = o->sh;

    if (len > FORK_SLOT_BYTES) {
        fprintf(stderr, "[fork_test rank %d] oob allgather of %zu bytes exceeds the %d-byte slot\n",
                o->rank, len, FORK_SLOT_BYTES);
        return -1; /* len is the same on all ranks: all of them refuse */
    }
    memcpy(sh->slot[o->rank], sbuf, len);
    if (fork_barrier(o) != 0)
        return -1;
    for (int r = 0; r < o->size; r++)
        memcpy((unsigned char *)rbuf + (size_t)r * len, sh->slot[r], len);
    return fork_barrier(o);
}

static int fork_child(struct fork_shared *sh, int me, int n, int argc, char **argv)
{
    struct fork_oob o = {sh, me, n};
    arcoll_oob_t oob = {fork_allgather, fork_barrier, &o, me, n};
    char *args[argc];

    /* Orphans would spin in a barrier until their timeout: die with the parent. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1)
        return 1;
    setvbuf(stdout, NULL, _IOLBF, 0); /* keep lines of different ranks apart */
    /* coll_test_main sees "fork_test MODE ARGS...". */
    args[0] = argv[0];
    for (int i = 2; i < argc; i++)
        args[i - 1] = argv[i];
    args[argc - 1] = NULL;
    coll_test_extra = shco_mode;
    return coll_test_main(argc - 1, args, &oob);
}

static void fork_on_sigchld(int sig)
{
    (void)sig; /* only to make SIGCHLD pending for sigtimedwait */
}

int main(int argc, char **argv)
{
    struct fork_shared *sh;
    pid_t pids[FORK_MAX_RANKS];
    int n, kill_mode, left, ok = 1;
    char *end;
    sigset_t chld, old;
    double start, deadline;

    if (argc < 3) {
        fprintf(stderr, "usage: %s NRANKS MODE [ARGS...]\n", argv[0]);
        return 2;
    }
    n = (int)strtol(argv[1], &end, 10);
    if (*end != '\0' || n < 1 || n > FORK_MAX_RANKS) {
        fprintf(stderr, "fork_test: NRANKS must be 1..%d\n", FORK_MAX_RANKS);
        return 2;
    }
    kill_mode = strcmp(argv[2], "kill") == 0;
    if (kill_mode && n < 2) {
        fprintf(stderr, "fork_test: MODE kill needs a survivor (NRANKS >= 2)\n");
        return 2;
    }
    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("fork_test: mmap");
        return 1;
    }
    /* sh_co modes: the same-address region, before the fork (up to two
     * buffers of 4 MiB per peer per rank, for the bench). */
    if (strcmp(argv[2], "shco") == 0 && shco_region_make(n, ((size_t)8 << 20) * n + (4 << 20)))
        return 1;
    atomic_init(&sh->count, 0);
    atomic_init(&sh->gen, 0);
    atomic_init(&sh->broken, 0);

    /* SIGCHLD stays blocked in the parent so that sigtimedwait can wait for
     * it with a deadline; a handler (not SIG_DFL) so it is surely queued. */
    struct sigaction sa = {.sa_handler = fork_on_sigchld};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old);

    fflush(NULL); /* or buffered output would be written once per child */
    start = fork_now();
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            sigprocmask(SIG_SETMASK, &old, NULL);
            signal(SIGCHLD, SIG_DFL);
            exit(fork_child(sh, i, n, argc, argv));
        }
        if (pids[i] < 0) {
            perror("fork_test: fork");
            for (int j = 0; j < i; j++)
                kill(pids[j], SIGKILL);
            for (int j = 0; j < i; j++)
                waitpid(pids[j], NULL, 0);
            return 1;
        }
    }

    deadline = start + FORK_JOB_SECS;
    left = n;
    while (left > 0) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);

        if (p > 0) {
            int r = 0, expect_kill;
            while (r < n && pids[r] != p)
                r++;
            if (r == n)
                continue;
            pids[r] = 0;
            left--;
            expect_kill = kill_mode && r == n - 1;
            if (WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) != 0))
                atomic_store(&sh->broken, 1); /* survivors must not wait for it */
            if (!launch_rank_ok("fork_test", r, st, expect_kill))
                ok = 0;
            continue;
        }
        if (p < 0 && errno != EINTR) {
            perror("fork_test: waitpid");
            ok = 0;
            break;
        }
        double rest = deadline - fork_now();
        if (rest <= 0) {
            fprintf(stderr, "fork_test: %d rank(s) still running after %d s, killing them\n", left,
                    FORK_JOB_SECS);
            ok = 0;
            break;
        }
        struct timespec ts = {(time_t)rest, (long)((rest - (double)(time_t)rest) * 1e9)};
        sigtimedwait(&chld, NULL, &ts);
    }
    for (int r = 0; r < n; r++) {
        if (pids[r] > 0) {
            kill(pids[r], SIGKILL);
            waitpid(pids[r], NULL, 0);
        }
    }
    fprintf(stderr, "fork_test %s on %d ranks: %s in %.2f s\n", argv[2], n, ok ? "OK" : "FAILED",
            fork_now() - start);
    return ok ? 0 : 1;
}
