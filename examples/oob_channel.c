/*
 * A toy "MPI channel" that embeds arcoll through the public API only
 * (docs/embedding.md walks through it):
 *
 *   oob_channel NRANKS [fail]
 *
 * The parent forks NRANKS ranks joined to rank 0 by socket pairs, which is
 * all the out-of-band transport the channel has: arcoll's bootstrap
 * callbacks run over it (rank 0 gathers and sends back). Each rank then
 * initializes arcoll, checks the library version, runs a blocking alltoall,
 * a sub-team of the even ranks, a nonblocking allgather progressed from the
 * channel's own polling loop, an alltoall on memory it registered once, and
 * finalizes. With `fail` the last rank dies after the first alltoall: the
 * others see the next call fail (ARCOLL_ERR_PEER, or _TIMEOUT after
 * ARCOLL_TIMEOUT_MS), find the team failed, and finalize locally.
 *
 * Build: cc oob_channel.c $(pkg-config --cflags --libs arcoll)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arcoll.h>

#define MAXRANKS 32
#define BYTES    4096

/* The channel's own transport: rank 0 holds a socket to every rank. */
typedef struct channel {
    int rank, size;
    int fd[MAXRANKS]; /* rank 0: fd[r] reaches rank r; others: fd[0] reaches rank 0 */
} channel_t;

static int xfer(int fd, void *buf, size_t len, int out)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = out ? write(fd, (char *)buf + done, len - done)
                        : read(fd, (char *)buf + done, len - done);
        if (n <= 0)
            return -1; /* a peer is gone: arcoll turns it into ARCOLL_ERR_BOOTSTRAP */
        done += (size_t)n;
    }
    return 0;
}

/* arcoll's allgather callback: blocking, collective, rank order. */
static int oob_allgather(const void *sbuf, void *rbuf, size_t len, void *user)
{
    channel_t *ch = user;

    if (ch->rank != 0)
        return xfer(ch->fd[0], (void *)sbuf, len, 1) || xfer(ch->fd[0], rbuf, len * ch->size, 0);
    memcpy(rbuf, sbuf, len);
    for (int r = 1; r < ch->size; r++)
        if (xfer(ch->fd[r], (char *)rbuf + (size_t)r * len, len, 0) != 0)
            return -1;
    for (int r = 1; r < ch->size; r++)
        if (xfer(ch->fd[r], rbuf, len * ch->size, 1) != 0)
            return -1;
    return 0;
}

static int oob_barrier(void *user)
{
    channel_t *ch = user;
    char in = 0, all[MAXRANKS];

    return oob_allgather(&in, all, 1, ch);
}

/* How this channel reports arcoll's status to its own users: an MPI
 * channel would return MPI error classes (docs/embedding.md, "Errors"). */
static const char *channel_error(int rc)
{
    switch (rc) {
    case ARCOLL_OK: return "MPI_SUCCESS";
    case ARCOLL_ERR_INVALID: return "MPI_ERR_BUFFER";
    case ARCOLL_ERR_NOMEM: return "MPI_ERR_NO_MEM";
    case ARCOLL_ERR_MISMATCH: return "MPI_ERR_TRUNCATE";
    case ARCOLL_ERR_PEER:
    case ARCOLL_ERR_TIMEOUT: return "MPI_ERR_OTHER (a process failed)";
    default: return "MPI_ERR_OTHER";
    }
}

static int check(const channel_t *ch, int rc, const char *what)
{
    if (rc == ARCOLL_OK)
        return 0;
    fprintf(stderr, "rank %d: %s: %s (%s) -> %s\n", ch->rank, what, arcoll_strerror(rc),
            arcoll_last_error(NULL), channel_error(rc));
    return 1;
}

/* Its own tiny check, not tests/lib's patterns: this example is meant to be copied alone. */
/* Block j of buf came from rank from[j] (from == NULL: rank j). */
static int verify(const char *buf, int n, const int *from, int me, int alltoall, int tag)
{
    for (int j = 0; j < n; j++)
        for (int k = 0; k < BYTES; k++)
            if (buf[(size_t)j * BYTES + k] !=
                (char)((from ? from[j] : j) * 7 + (alltoall ? me : 0) + k + tag))
                return 1;
    return 0;
}

static void fill(char *buf, int n, int me, int alltoall, int tag)
{
    for (int j = 0; j < (alltoall ? n : 1); j++)
        for (int k = 0; k < BYTES; k++)
            buf[(size_t)j * BYTES + k] = (char)(me * 7 + (alltoall ? j : 0) + k + tag);
}

/* One rank's life. Returns its exit status. */
static int rank_main(channel_t *ch, int fail)
{
    arcoll_oob_t oob = {oob_allgather, oob_barrier, ch, ch->rank, ch->size};
    arcoll_context_t ctx;
    arcoll_team_t world, evens = NULL;
    arcoll_request_t req;
    arcoll_mem_t mem;
    int n = ch->size, me = ch->rank, evens_list[MAXRANKS], nevens = 0, rc, bad = 1;
    long polls = 0;
    char *s = malloc((size_t)n * BYTES), *r = malloc((size_t)n * BYTES);
    char *pool = malloc(2 * (size_t)n * BYTES); /* long-lived, registered once */

    if (s == NULL || r == NULL || pool == NULL)
        goto out;
    /* The header this was built with must match the library loaded. */
    if (arcoll_version(NULL) >> 16 != ARCOLL_VERSION_MAJOR) {
        fprintf(stderr, "rank %d: libarcoll %x, built for %x\n", me, arcoll_version(NULL),
                ARCOLL_VERSION);
        goto out;
    }
    if (check(ch, arcoll_init(&oob, &ctx), "arcoll_init"))
        goto out;
    world = arcoll_team_world(ctx);

    fill(s, n, me, 1, 1);
    bad =
        check(ch, arcoll_alltoall(world, s, r, BYTES), "alltoall") || verify(r, n, NULL, me, 1, 1);

    if (fail) {
        if (me == n - 1)
            raise(SIGKILL); /* a process of the job dies */
        rc = arcoll_alltoall(world, s, r, BYTES);
        printf("rank %d: alltoall after a peer died: %s -> %s\n", me, arcoll_strerror(rc),
               channel_error(rc));
        bad |= rc != ARCOLL_ERR_PEER && rc != ARCOLL_ERR_TIMEOUT;
        /* The team is failed now: every later call says so at once. */
        bad |= arcoll_allgather(world, s, r, BYTES) != ARCOLL_ERR_STATE;
        /* Finalize skips its barrier when a team lost a peer: it is local. */
        bad |= check(ch, arcoll_finalize(ctx), "arcoll_finalize");
        goto out;
    }

    /* A sub-team: collective over the whole context, like MPI_Comm_split. */
    for (int i = 0; i < n; i += 2)
        evens_list[nevens++] = i;
    bad |=
        check(ch, arcoll_team_create(ctx, evens_list, me % 2 ? 0 : nevens, &evens), "team_create");
    if (evens != NULL) {
        fill(s, 1, me, 0, 2);
        bad |= check(ch, arcoll_allgather(evens, s, r, BYTES), "allgather(evens)");
        bad |= verify(r, nevens, evens_list, me, 0, 2);
    }

    /* Nonblocking: the channel keeps polling its own work meanwhile; arcoll
     * progresses only inside arcoll_test (no thread of its own). */
    fill(s, 1, me, 0, 3);
    bad |= check(ch, arcoll_iallgather(world, s, r, BYTES, &req), "iallgather");
    while ((rc = arcoll_test(&req)) == ARCOLL_INPROGRESS)
        polls++; /* ...the channel's point-to-point progress would go here... */
    bad |= check(ch, rc, "test") || verify(r, n, NULL, me, 0, 3);

    /* Memory the channel owns for long: registered once, used by many calls,
     * deregistered before it is freed. */
    bad |= check(ch, arcoll_mem_register(ctx, pool, 2 * (size_t)n * BYTES, &mem), "mem_register");
    fill(pool, n, me, 1, 4);
    bad |= check(ch, arcoll_alltoall(world, pool, pool + (size_t)n * BYTES, BYTES), "alltoall") ||
           verify(pool + (size_t)n * BYTES, n, NULL, me, 1, 4);
    bad |= check(ch, arcoll_mem_deregister(ctx, mem), "mem_deregister");

    bad |= check(ch, arcoll_team_destroy(ctx, evens), "team_destroy");
    bad |= check(ch, arcoll_finalize(ctx), "arcoll_finalize");
    if (me == 0)
        printf("rank 0: iallgather completed after %ld tests\n", polls);
out:
    printf("rank %d: %s\n", me, bad ? "FAILED" : "ok");
    free(s);
    free(r);
    free(pool);
    return bad;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 4, fail = argc > 2 && strcmp(argv[2], "fail") == 0;
    int ok = 0, want = fail ? n - 1 : n, sv[MAXRANKS][2];
    pid_t pid[MAXRANKS];

    if (n < 1 || n > MAXRANKS || (fail && n < 2)) {
        fprintf(stderr, "usage: oob_channel NRANKS(1-%d) [fail]\n", MAXRANKS);
        return 2;
    }
    for (int i = 1; i < n; i++)
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]) != 0)
            return 1;
    fflush(stdout);
    for (int i = 0; i < n; i++) {
        pid[i] = fork();
        if (pid[i] == 0) {
            channel_t ch = {.rank = i, .size = n};
            for (int j = 1; j < n; j++) {
                if (i == 0)
                    ch.fd[j] = sv[j][0];
                else if (j == i)
                    ch.fd[0] = sv[j][1];
                else
                    close(sv[j][1]);
                if (i != 0)
                    close(sv[j][0]);
            }
            int rc = rank_main(&ch, fail);
            fflush(stdout); /* _exit does not */
            _exit(rc);
        }
    }
    for (int i = 1; i < n; i++) {
        close(sv[i][0]);
        close(sv[i][1]);
    }
    for (int i = 0; i < n; i++) {
        int st;
        waitpid(pid[i], &st, 0);
        ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    printf("oob_channel: %d of %d ranks ended as expected%s\n", ok, want,
           fail ? " (the last one was killed)" : "");
    return ok == want ? 0 : 1;
}
