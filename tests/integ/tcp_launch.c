/*
 * Runs coll_test across hosts without mpirun or ssh: one launcher per host
 * forks that host's ranks, which bootstrap arcoll through the out-of-band
 * callbacks implemented over TCP to a rendezvous server that node 0's
 * launcher runs as one more child.
 *
 *   tcp_launch --nodes N --node I --ppn P --server HOST:PORT [--timeout S]
 *     (--ppn P0,P1,...: a count per node, for uneven nodes)
 *              [--round-timeout S] [--job-timeout S] -- MODE [ARGS...]
 *                                                       MODE and ARGS as for coll_test
 *
 * Global rank = I*P + local index, size = N*P. Start one launcher per node,
 * in any order within --timeout (default 60 s) of each other.
 *
 * Protocol (integers big-endian): a rank connects and sends HELLO {magic,
 * rank, size}; each allgather sends {magic, 0, u64 len} and len bytes; the
 * server waits for all ranks and answers each with {magic, status, u64 total}
 * followed, on status 0, by the blobs in rank order. A barrier is a 0-byte
 * allgather. Once any rank has left, every later round fails at once, so a
 * dead rank never leaves the others waiting on the server.
 *
 * Nothing waits forever: every oob call gives up after --timeout (so ranks
 * must reach each oob call within that of each other), the server if not all
 * ranks connect in time, and the launcher kills everything after --job-timeout
 * (default 300 s), or --timeout after its ranks failed if only the server is
 * left. --round-timeout bounds a round once every rank has connected: the
 * server fails it for every rank that came (and every later round) when the
 * others have not come within S of the first, so a rank stopped or hung in
 * the job costs its peers S, not the launch allowance --timeout (give it
 * ARCOLL_TIMEOUT_MS, the bound arcoll puts on its own waits). Exit status 0
 * only if every local rank (and the server) exited 0; in MODE kill and
 * phasefault the last global rank must instead die by SIGKILL.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coll_test.h"
#include "launch_verdict.h"

/* coll_test keeps member lists in arrays of 64 (sub-team) and 256 ints. */
#define TCP_MAX_RANKS 64
/* Stray connections the server tolerates besides the ranks' own. */
#define TCP_SPARE_CONNS 8
/* The library gathers only small records (hostnames, keys, pids). */
#define TCP_MAX_BLOB (1u << 20)
#define TCP_MAGIC    0x41524331u /* "ARC1" */
#define TCP_HELLO    12
#define TCP_HDR      16

#define TCP_DEFAULT_TIMEOUT 60.0
#define TCP_DEFAULT_JOB     300.0

/* Reply status. */
enum { ST_OK = 0, ST_MISMATCH = 1, ST_TOO_BIG = 2, ST_LEFT = 3, ST_EXPIRED = 4 };

/* A connection that ended (as opposed to an errno). */
#define IO_EOF (-1)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int ms_until(double deadline)
{
    double rest = deadline - now_s();
    if (rest <= 0)
        return 0;
    return rest > 1e6 ? 1000000000 : (int)(rest * 1000) + 1;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (24 - 8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
    put_u32(p, (uint32_t)(v >> 32));
    put_u32(p + 4, (uint32_t)v);
}

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get_u64(const unsigned char *p)
{
    return (uint64_t)get_u32(p) << 32 | get_u32(p + 4);
}

static const char *io_str(int e)
{
    if (e == IO_EOF)
        return "connection closed by the other side";
    if (e == ETIMEDOUT)
        return "no progress within the timeout";
    return strerror(e);
}

/* 0 once fd is ready (or in error: the next call reports it), else an errno. */
static int io_wait(int fd, short events, double deadline)
{
    for (;;) {
        struct pollfd p = {fd, events, 0};
        int rc;
        if (now_s() >= deadline)
            return ETIMEDOUT;
        rc = poll(&p, 1, ms_until(deadline));
        if (rc > 0)
            return 0;
        if (rc < 0 && errno != EINTR)
            return errno;
    }
}

/* Sockets are nonblocking: these loop over short transfers until deadline.
 * MSG_NOSIGNAL because a dead peer must be an error, not a SIGPIPE death. */
static int send_all(int fd, const void *buf, size_t len, double deadline)
{
    const unsigned char *p = buf;

    while (len > 0) {
        ssize_t k = send(fd, p, len, MSG_NOSIGNAL);
        if (k > 0) {
            p += k;
            len -= (size_t)k;
        } else if (k < 0 && errno == EINTR) {
            continue;
        } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int e = io_wait(fd, POLLOUT, deadline);
            if (e != 0)
                return e;
        } else {
            return k < 0 ? errno : EIO;
        }
    }
    return 0;
}

static int recv_all(int fd, void *buf, size_t len, double deadline)
{
    unsigned char *p = buf;

    while (len > 0) {
        ssize_t k = recv(fd, p, len, 0);
        if (k > 0) {
            p += k;
            len -= (size_t)k;
        } else if (k == 0) {
            return IO_EOF;
        } else if (errno == EINTR) {
            continue;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int e = io_wait(fd, POLLIN, deadline);
            if (e != 0)
                return e;
        } else {
            return errno;
        }
    }
    return 0;
}

static void set_nodelay(int fd)
{
    int one = 1;
    /* Each oob round is a few small messages: never wait for Nagle. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---- rank side: the arcoll_oob_t callbacks ---- */

struct tcp_oob {
    int fd;
    int rank, size;
    double timeout;
    int broken; /* the stream is out of step or gone: every later call fails */
};

static int oob_fail(struct tcp_oob *o, const char *what, int e)
{
    fprintf(stderr, "[tcp_launch rank %d] oob %s: %s\n", o->rank, what, io_str(e));
    close(o->fd);
    o->fd = -1;
    o->broken = 1;
    return -1;
}

/* One deadline covers the send and the wait for the slowest rank. */
static int tcp_allgather(const void *sbuf, void *rbuf, size_t len, void *user)
{
    struct tcp_oob *o = user;
    unsigned char hdr[TCP_HDR];
    double deadline = now_s() + o->timeout;
    uint32_t status;
    uint64_t total;
    int e;

    if (o->broken)
        return -1;
    put_u32(hdr, TCP_MAGIC);
    put_u32(hdr + 4, 0);
    put_u64(hdr + 8, len);
    /* An oversized blob goes as a header alone: the server fails the round
     * for all ranks instead of leaving them waiting for this one. */
    e = send_all(o->fd, hdr, sizeof(hdr), deadline);
    if (e == 0 && len <= TCP_MAX_BLOB)
        e = send_all(o->fd, sbuf, len, deadline);
    if (e != 0)
        return oob_fail(o, "allgather send", e);
    e = recv_all(o->fd, hdr, sizeof(hdr), deadline);
    if (e != 0)
        return oob_fail(o, "allgather reply", e);
    status = get_u32(hdr + 4);
    total = get_u64(hdr + 8);
    if (get_u32(hdr) != TCP_MAGIC || (status == ST_OK && total != (uint64_t)len * o->size)) {
        fprintf(stderr, "[tcp_launch rank %d] oob allgather: malformed reply\n", o->rank);
        return oob_fail(o, "allgather", EPROTO);
    }
    if (status != ST_OK) {
        /* The server answered every rank alike: the stream stays usable. */
        fprintf(stderr, "[tcp_launch rank %d] oob allgather of %zu bytes failed: %s\n", o->rank,
                len,
                status == ST_MISMATCH  ? "lengths differ across ranks"
                : status == ST_TOO_BIG ? "blob exceeds the 1 MiB limit"
                : status == ST_EXPIRED ? "a rank did not come within the round timeout"
                                       : "a rank has left the job");
        return -1;
    }
    e = recv_all(o->fd, rbuf, (size_t)total, deadline);
    if (e != 0)
        return oob_fail(o, "allgather reply", e);
    return 0;
}

static int tcp_barrier(void *user)
{
    return tcp_allgather(NULL, NULL, 0, user);
}

/* Retries until the deadline: the server's host may start later than ours. */
static int tcp_connect(const char *host, const char *port, double timeout, int rank)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    double deadline = now_s() + timeout;
    char last[160] = "no address";

    for (;;) {
        struct addrinfo *ai = NULL;
        int grc = getaddrinfo(host, port, &hints, &ai);

        if (grc != 0)
            snprintf(last, sizeof(last), "%s", gai_strerror(grc));
        for (struct addrinfo *a = ai; grc == 0 && a != NULL; a = a->ai_next) {
            int fd =
                socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
            int e = 0;
            socklen_t el = sizeof(e);

            if (fd < 0) {
                snprintf(last, sizeof(last), "socket: %s", strerror(errno));
                continue;
            }
            if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
                e = errno;
                if (e == EINPROGRESS || e == EINTR) {
                    /* Bounded per attempt so that a lost SYN is retried. */
                    double until = now_s() + 2.0;
                    e = io_wait(fd, POLLOUT, until < deadline ? until : deadline);
                    if (e == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0)
                        e = errno;
                }
            }
            if (e == 0) {
                freeaddrinfo(ai);
                set_nodelay(fd);
                return fd;
            }
            snprintf(last, sizeof(last), "%s", strerror(e));
            close(fd);
        }
        if (ai != NULL)
            freeaddrinfo(ai);
        if (now_s() + 0.2 >= deadline)
            break;
        sleep_s(0.2);
    }
    fprintf(stderr, "[tcp_launch rank %d] cannot connect to %s:%s within %g s: %s\n", rank, host,
            port, timeout, last);
    return -1;
}

struct opts {
    int nodes, node, ppn, size;
    int base;             /* this node's first rank */
    const char *ppn_list; /* --ppn P0,P1,...: ranks per node, node by node */
    const char *host, *port;
    double timeout, round_timeout, job;
    int margc; /* MODE and ARGS */
    char **margv;
    int kill_mode;
};

static int rank_main(const struct opts *op, int local, pid_t launcher)
{
    struct tcp_oob o = {-1, op->base + local, op->size, op->timeout, 0};
    arcoll_oob_t oob = {tcp_allgather, tcp_barrier, &o, o.rank, o.size};
    unsigned char hello[TCP_HELLO];
    char *args[op->margc + 2];
    int e, rc;

    /* Orphans would wait in the oob until their timeout: die with the launcher. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher)
        return 1;
    setvbuf(stdout, NULL, _IOLBF, 0); /* keep lines of different ranks apart */
    o.fd = tcp_connect(op->host, op->port, op->timeout, o.rank);
    if (o.fd < 0)
        return 1;
    put_u32(hello, TCP_MAGIC);
    put_u32(hello + 4, (uint32_t)o.rank);
    put_u32(hello + 8, (uint32_t)o.size);
    e = send_all(o.fd, hello, sizeof(hello), now_s() + op->timeout);
    if (e != 0) {
        oob_fail(&o, "hello", e);
        return 1;
    }
    /* coll_test_main sees "tcp_launch MODE ARGS...". */
    args[0] = "tcp_launch";
    for (int i = 0; i < op->margc; i++)
        args[i + 1] = op->margv[i];
    args[op->margc + 1] = NULL;
    rc = coll_test_main(op->margc + 1, args, &oob);
    if (o.fd >= 0)
        close(o.fd); /* tells the server this rank is done */
    return rc;
}

/* ---- rendezvous server ---- */

enum { C_HELLO, C_HDR, C_BODY, C_DONE, C_GONE };

struct srv_conn {
    int fd;   /* -1 with rank -1: free slot */
    int rank; /* -1 until the hello arrived */
    int state;
    double since; /* accept time: the hello must follow within the timeout */
    unsigned char hdr[TCP_HDR];
    size_t got; /* bytes of hdr, then of body, received so far */
    uint64_t len;
    int too_big;
    unsigned char *body;
};

struct srv {
    int lfd, n;
    double timeout, accept_deadline, job_deadline;
    double round_timeout; /* 0: none */
    double round_since;   /* when the current round became due (0: not yet) */
    int expired;          /* a round timed out: every later one fails at once */
    struct srv_conn c[TCP_MAX_RANKS + TCP_SPARE_CONNS];
    int by_rank[TCP_MAX_RANKS];
    int registered, left, failed;
    unsigned long round;
};

#define SRV_NCONN (TCP_MAX_RANKS + TCP_SPARE_CONNS)

static void srv_drop(struct srv *s, struct srv_conn *c, const char *why)
{
    if (why != NULL && c->rank >= 0)
        fprintf(stderr, "[tcp_launch server] rank %d: %s\n", c->rank, why);
    close(c->fd);
    c->fd = -1;
    free(c->body);
    c->body = NULL;
    if (c->rank >= 0) {
        c->state = C_GONE;
        s->left++;
    }
}

static void srv_reset(struct srv_conn *c)
{
    free(c->body);
    c->body = NULL;
    c->got = 0;
    c->len = 0;
    c->too_big = 0;
    c->state = C_HDR;
}

/* Reads what is available into c's current message. Returns 0, or -1 after
 * dropping c (closed, failed or protocol error). */
static int srv_read(struct srv *s, struct srv_conn *c)
{
    char why[96];

    while (c->state == C_HELLO || c->state == C_HDR || c->state == C_BODY) {
        size_t need = c->state == C_HELLO ? TCP_HELLO : c->state == C_HDR ? TCP_HDR : c->len;
        unsigned char *base = c->state == C_BODY ? c->body : c->hdr;
        ssize_t k = recv(c->fd, base + c->got, need - c->got, 0);

        if (k == 0) {
            /* Between rounds a close is a rank that is done (or died). */
            int clean = c->state == C_HDR && c->got == 0;
            srv_drop(s, c, clean ? NULL : "connection closed in the middle of a message");
            return -1;
        }
        if (k < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            snprintf(why, sizeof(why), "receive: %s", strerror(errno));
            srv_drop(s, c, why);
            return -1;
        }
        c->got += (size_t)k;
        if (c->got < need)
            continue;
        c->got = 0;
        if (c->state == C_HELLO) {
            uint32_t r = get_u32(c->hdr + 4), sz = get_u32(c->hdr + 8);
            if (get_u32(c->hdr) != TCP_MAGIC || sz != (uint32_t)s->n || r >= sz ||
                s->by_rank[r] >= 0) {
                fprintf(stderr,
                        "[tcp_launch server] refused a connection: magic %#x rank %u size %u "
                        "(job size %d, or the rank is already connected)\n",
                        get_u32(c->hdr), r, sz, s->n);
                srv_drop(s, c, NULL);
                return -1;
            }
            c->rank = (int)r;
            s->by_rank[r] = (int)(c - s->c);
            s->registered++;
            c->state = C_HDR;
        } else if (c->state == C_HDR) {
            if (get_u32(c->hdr) != TCP_MAGIC) {
                srv_drop(s, c, "bad message header");
                return -1;
            }
            c->len = get_u64(c->hdr + 8);
            if (c->len > TCP_MAX_BLOB) {
                c->too_big = 1; /* the rank sent no body */
                c->state = C_DONE;
            } else if (c->len == 0) {
                c->state = C_DONE;
            } else {
                c->body = malloc(c->len);
                if (c->body == NULL) {
                    srv_drop(s, c, "out of memory");
                    return -1;
                }
                c->state = C_BODY;
            }
        } else {
            c->state = C_DONE;
        }
    }
    return 0;
}

static void srv_reply(struct srv *s, struct srv_conn *c, const unsigned char *msg, size_t len)
{
    int e = send_all(c->fd, msg, len, now_s() + s->timeout);

    if (e != 0) {
        char why[96];
        snprintf(why, sizeof(why), "reply: %s", io_str(e));
        srv_drop(s, c, why);
        return;
    }
    srv_reset(c);
}

/* Answers the round if it is complete, or fails it at once if it cannot be. */
static int srv_progress(struct srv *s)
{
    unsigned char hdr[TCP_HDR];
    int done = 0;

    for (int r = 0; r < s->n; r++)
        done += s->by_rank[r] >= 0 && s->c[s->by_rank[r]].state == C_DONE;
    /* The round is due once every rank has connected and one has come. */
    if (s->registered == s->n && done > 0 && s->round_since == 0)
        s->round_since = now_s();
    if (!s->expired && s->round_timeout > 0 && s->round_since > 0 && done < s->n &&
        now_s() >= s->round_since + s->round_timeout) {
        fprintf(stderr, "[tcp_launch server] oob round %lu fails: rank(s)", s->round);
        for (int r = 0; r < s->n; r++)
            if (s->c[s->by_rank[r]].state != C_DONE)
                fprintf(stderr, " %d", r);
        fprintf(stderr, " did not come within %g s\n", s->round_timeout);
        s->expired = 1;
    }
    if ((s->left > 0 || s->expired) && done > 0) {
        /* A rank that left can never contribute: nobody may wait for it. */
        if (!s->failed && !s->expired) {
            int gone = 0;
            while (gone < s->n && (s->by_rank[gone] < 0 || s->c[s->by_rank[gone]].state != C_GONE))
                gone++;
            fprintf(stderr, "[tcp_launch server] oob round %lu fails: rank %d has left the job\n",
                    s->round, gone);
        }
        s->failed = 1;
        put_u32(hdr, TCP_MAGIC);
        put_u32(hdr + 4, s->expired ? ST_EXPIRED : ST_LEFT);
        put_u64(hdr + 8, 0);
        for (int r = 0; r < s->n; r++)
            if (s->by_rank[r] >= 0 && s->c[s->by_rank[r]].state == C_DONE)
                srv_reply(s, &s->c[s->by_rank[r]], hdr, sizeof(hdr));
        return 0;
    }
    if (s->registered < s->n || done < s->n)
        return 0;

    uint64_t len = s->c[s->by_rank[0]].len;
    uint32_t status = ST_OK;
    for (int r = 0; r < s->n; r++) {
        struct srv_conn *c = &s->c[s->by_rank[r]];
        if (c->too_big || c->len != len) {
            fprintf(stderr,
                    "[tcp_launch server] oob round %lu: rank %d sent %llu bytes, rank 0 "
                    "%llu%s\n",
                    s->round, r, (unsigned long long)c->len, (unsigned long long)len,
                    c->too_big ? " (over the limit)" : "");
            status = c->too_big ? ST_TOO_BIG : ST_MISMATCH;
            s->failed = 1;
            break;
        }
    }
    size_t total = status == ST_OK ? (size_t)len * (size_t)s->n : 0;
    unsigned char *msg = malloc(TCP_HDR + total);
    if (msg == NULL) {
        fprintf(stderr, "[tcp_launch server] out of memory for a %zu-byte reply\n", total);
        return -1;
    }
    put_u32(msg, TCP_MAGIC);
    put_u32(msg + 4, status);
    put_u64(msg + 8, total);
    for (int r = 0; r < s->n && total > 0; r++)
        memcpy(msg + TCP_HDR + (size_t)r * len, s->c[s->by_rank[r]].body, len);
    for (int r = 0; r < s->n; r++)
        srv_reply(s, &s->c[s->by_rank[r]], msg, TCP_HDR + total);
    free(msg);
    s->round++;
    s->round_since = 0;
    return 0;
}

static void srv_accept(struct srv *s)
{
    for (;;) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), i = 0;

        if (fd < 0)
            return; /* EAGAIN, or a transient error: poll tells us again */
        while (i < SRV_NCONN && (s->c[i].fd >= 0 || s->c[i].rank >= 0))
            i++;
        if (i == SRV_NCONN) {
            close(fd);
            continue;
        }
        set_nodelay(fd);
        memset(&s->c[i], 0, sizeof(s->c[i]));
        s->c[i].fd = fd;
        s->c[i].rank = -1;
        s->c[i].state = C_HELLO;
        s->c[i].since = now_s();
    }
}

/* Returns the process exit status: 0 when every rank connected, every round
 * succeeded and every rank closed; 1 on a setup error or a deadline; 2 when a
 * round failed (a rank left early, or lengths differed). */
static int srv_run(int lfd, int n, double timeout, double round_timeout, double job_deadline)
{
    static struct srv s; /* large: off the stack */
    struct pollfd pf[SRV_NCONN + 1];
    int idx[SRV_NCONN + 1];

    s.lfd = lfd;
    s.n = n;
    s.timeout = timeout;
    s.round_timeout = round_timeout;
    /* Clients retry for --timeout from their own start; allow for a launch. */
    s.accept_deadline = now_s() + timeout + 1.0;
    s.job_deadline = job_deadline;
    for (int i = 0; i < SRV_NCONN; i++) {
        s.c[i].fd = -1;
        s.c[i].rank = -1;
    }
    for (int r = 0; r < TCP_MAX_RANKS; r++)
        s.by_rank[r] = -1;

    while (s.registered < n || s.left < n) {
        double t = now_s(), until = s.job_deadline;
        int np = 0, rc;

        if (t >= s.job_deadline) {
            fprintf(stderr, "[tcp_launch server] job deadline reached, giving up\n");
            return 1;
        }
        if (s.registered < n) {
            if (t >= s.accept_deadline) {
                fprintf(stderr, "[tcp_launch server] only %d of %d ranks connected within %g s\n",
                        s.registered, n, timeout + 1.0);
                return 1;
            }
            if (s.accept_deadline < until)
                until = s.accept_deadline;
            pf[np] = (struct pollfd){s.lfd, POLLIN, 0};
            idx[np++] = -1;
        } else if (s.round_timeout > 0 && s.round_since > 0 && !s.expired &&
                   s.round_since + s.round_timeout < until) {
            until = s.round_since + s.round_timeout; /* wake up to expire the round */
        }
        if (s.registered == n && s.lfd >= 0) {
            close(s.lfd); /* everybody is here: refuse strays */
            s.lfd = -1;
        }
        for (int i = 0; i < SRV_NCONN; i++) {
            struct srv_conn *c = &s.c[i];
            if (c->fd < 0 || c->state == C_DONE)
                continue;
            if (c->rank < 0) {
                if (t >= c->since + timeout) {
                    close(c->fd); /* a stranger that never said hello */
                    c->fd = -1;
                    continue;
                }
                if (c->since + timeout < until)
                    until = c->since + timeout;
            }
            pf[np] = (struct pollfd){c->fd, POLLIN, 0};
            idx[np++] = i;
        }
        rc = poll(pf, (nfds_t)np, ms_until(until));
        if (rc < 0 && errno != EINTR) {
            perror("[tcp_launch server] poll");
            return 1;
        }
        for (int k = 0; rc > 0 && k < np; k++) {
            if (pf[k].revents == 0)
                continue;
            if (idx[k] < 0)
                srv_accept(&s);
            else
                srv_read(&s, &s.c[idx[k]]);
        }
        if (srv_progress(&s) != 0)
            return 1;
    }
    return s.failed ? 2 : 0;
}

/* Listens on every address of HOST's family: HOST names node 0 for the
 * clients, but node 0 may reach itself by another address. */
static int srv_listen(const char *host, const char *port)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    struct addrinfo phints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *pa = NULL;
    int one = 1, fd, grc;

    phints.ai_family = AF_INET;
    if (getaddrinfo(host, port, &hints, &ai) == 0) {
        phints.ai_family = ai->ai_family;
        freeaddrinfo(ai);
    }
    grc = getaddrinfo(NULL, port, &phints, &pa);
    if (grc != 0) {
        fprintf(stderr, "tcp_launch: port %s: %s\n", port, gai_strerror(grc));
        return -1;
    }
    fd = socket(pa->ai_family, pa->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, pa->ai_protocol);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, pa->ai_addr, pa->ai_addrlen) != 0 || listen(fd, 2 * TCP_MAX_RANKS) != 0) {
        fprintf(stderr, "tcp_launch: cannot listen on port %s: %s\n", port, strerror(errno));
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    freeaddrinfo(pa);
    return fd;
}

/* ---- launcher ---- */

static void usage(void)
{
    fprintf(stderr, "usage: tcp_launch --nodes N --node I --ppn P --server HOST:PORT "
                    "[--timeout S] [--round-timeout S] [--job-timeout S] -- MODE [ARGS...]\n");
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_secs(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || !(v > 0 && v < 1e6))
        return -1;
    *out = v;
    return 0;
}

static int parse_opts(int argc, char **argv, struct opts *op)
{
    static char hostbuf[256];
    const char *server = NULL;
    int i;

    *op = (struct opts){
        .nodes = -1, .node = -1, .ppn = -1, .timeout = TCP_DEFAULT_TIMEOUT, .job = TCP_DEFAULT_JOB};
    for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i += 2) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (v == NULL)
            bad = 1;
        else if (strcmp(k, "--nodes") == 0)
            bad = parse_int(v, 1, TCP_MAX_RANKS, &op->nodes);
        else if (strcmp(k, "--node") == 0)
            bad = parse_int(v, 0, TCP_MAX_RANKS - 1, &op->node);
        else if (strcmp(k, "--ppn") == 0 && strchr(v, ',') != NULL)
            op->ppn_list = v;
        else if (strcmp(k, "--ppn") == 0)
            bad = parse_int(v, 1, TCP_MAX_RANKS, &op->ppn);
        else if (strcmp(k, "--server") == 0)
            server = v;
        else if (strcmp(k, "--timeout") == 0)
            bad = parse_secs(v, &op->timeout);
        else if (strcmp(k, "--round-timeout") == 0)
            bad = parse_secs(v, &op->round_timeout);
        else if (strcmp(k, "--job-timeout") == 0)
            bad = parse_secs(v, &op->job);
        else
            bad = 1;
        if (bad) {
            fprintf(stderr, "tcp_launch: bad option %s %s\n", k, v ? v : "(missing value)");
            return -1;
        }
    }
    if (op->ppn_list != NULL && op->nodes > 0 && op->node >= 0) {
        /* Uneven nodes: P0,P1,... (one count per node). */
        const char *c = op->ppn_list;
        int k = 0, n, used;
        op->size = 0;
        while (k < op->nodes && sscanf(c, "%d%n", &n, &used) == 1 && n >= 1 &&
               n <= TCP_MAX_RANKS - op->size) {
            if (k < op->node)
                op->base += n;
            if (k == op->node)
                op->ppn = n;
            op->size += n;
            k++;
            c += used;
            if (*c == ',')
                c++;
        }
        if (k != op->nodes || *c != '\0') {
            fprintf(stderr, "tcp_launch: --ppn %s: want %d counts of 1 or more\n", op->ppn_list,
                    op->nodes);
            return -1;
        }
    }
    if (i >= argc - 1 || op->nodes < 0 || op->node < 0 || op->ppn < 0 || server == NULL) {
        usage();
        return -1;
    }
    op->margc = argc - i - 1;
    op->margv = argv + i + 1;
    if (op->ppn_list == NULL && (op->node >= op->nodes || op->nodes * op->ppn > TCP_MAX_RANKS)) {
        fprintf(stderr, "tcp_launch: need node < nodes and nodes*ppn <= %d\n", TCP_MAX_RANKS);
        return -1;
    }
    if (op->ppn_list == NULL) {
        op->base = op->node * op->ppn;
        op->size = op->nodes * op->ppn;
    }
    /* HOST:PORT, or [V6ADDR]:PORT. */
    const char *colon = strrchr(server, ':');
    size_t hl = colon ? (size_t)(colon - server) : 0;
    if (colon == NULL || hl == 0 || hl >= sizeof(hostbuf) || colon[1] == '\0') {
        fprintf(stderr, "tcp_launch: --server wants HOST:PORT, got %s\n", server);
        return -1;
    }
    if (server[0] == '[' && hl > 2 && server[hl - 1] == ']') {
        server++;
        hl -= 2;
    }
    memcpy(hostbuf, server, hl);
    hostbuf[hl] = '\0';
    op->host = hostbuf;
    op->port = colon + 1;
    /* phasefault's victim dies by SIGKILL too (a stopped one is killed later). */
    op->kill_mode = strcmp(op->margv[0], "kill") == 0 || strcmp(op->margv[0], "phasefault") == 0;
    if (op->kill_mode && op->size < 2) {
        fprintf(stderr, "tcp_launch: MODE %s needs a survivor (nodes*ppn >= 2)\n", op->margv[0]);
        return -1;
    }
    return 0;
}

static void on_sigchld(int sig)
{
    (void)sig; /* only to make SIGCHLD pending for sigtimedwait */
}

int main(int argc, char **argv)
{
    struct opts op;
    pid_t pids[TCP_MAX_RANKS + 1], launcher = getpid();
    int nproc, left, ok = 1, lfd = -1, grace = 0;
    sigset_t chld, old;
    double start = now_s(), deadline;

    if (parse_opts(argc, argv, &op) != 0)
        return 2;
    deadline = start + op.job;
    if (op.node == 0) {
        /* Before any rank starts, so that a taken port fails the launch at once. */
        lfd = srv_listen(op.host, op.port);
        if (lfd < 0)
            return 1;
    }

    /* SIGCHLD stays blocked in the launcher so that sigtimedwait can wait for
     * it with a deadline; a handler (not SIG_DFL) so it is surely queued. */
    struct sigaction sa = {.sa_handler = on_sigchld};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old);

    fflush(NULL); /* or buffered output would be written once per child */
    /* pids[0..ppn-1] are the local ranks, pids[ppn] the server (node 0 only). */
    nproc = op.ppn + (op.node == 0);
    for (int i = 0; i < nproc; i++) {
        int server = i == op.ppn;
        pids[i] = fork();
        if (pids[i] == 0) {
            sigprocmask(SIG_SETMASK, &old, NULL);
            signal(SIGCHLD, SIG_DFL);
            if (server) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                exit(getppid() == launcher
                         ? srv_run(lfd, op.size, op.timeout, op.round_timeout, deadline)
                         : 1);
            }
            if (lfd >= 0)
                close(lfd);
            exit(rank_main(&op, i, launcher));
        }
        if (pids[i] < 0) {
            perror("tcp_launch: fork");
            for (int j = 0; j < i; j++)
                kill(pids[j], SIGKILL);
            for (int j = 0; j < i; j++)
                waitpid(pids[j], NULL, 0);
            return 1;
        }
    }
    /* The socket listened before any rank dialled; now only the server holds it. */
    if (lfd >= 0)
        close(lfd);

    left = nproc;
    while (left > 0) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);

        if (p > 0) {
            int i = 0, expect_kill, good;
            while (i < nproc && pids[i] != p)
                i++;
            if (i == nproc)
                continue;
            pids[i] = 0;
            left--;
            if (i == op.ppn) {
                /* In kill mode a failed round just means the victim left. */
                good = WIFEXITED(st) &&
                       (WEXITSTATUS(st) == 0 || (op.kill_mode && WEXITSTATUS(st) == 2));
                if (!good) {
                    ok = 0;
                    if (WIFSIGNALED(st))
                        fprintf(stderr, "tcp_launch: server killed by signal %d\n", WTERMSIG(st));
                    else
                        fprintf(stderr, "tcp_launch: server exited with status %d\n",
                                WEXITSTATUS(st));
                }
                continue;
            }
            int r = op.base + i;
            expect_kill = op.kill_mode && r == op.size - 1;
            if (!launch_rank_ok("tcp_launch", r, st, expect_kill))
                ok = 0;
            continue;
        }
        if (p < 0 && errno != EINTR) {
            perror("tcp_launch: waitpid");
            ok = 0;
            break;
        }
        /* Only the server is left and the job already failed: remote ranks
         * still in an oob call get their answer at once, so after --timeout
         * whoever keeps it up is stuck, and must not hold us for the job deadline. */
        if (!ok && !grace && left == 1 && nproc > op.ppn && pids[op.ppn] > 0) {
            grace = 1;
            if (now_s() + op.timeout < deadline)
                deadline = now_s() + op.timeout;
        }
        double rest = deadline - now_s();
        if (rest <= 0) {
            fprintf(stderr, "tcp_launch: %d process(es) still running after %.0f s, killing them\n",
                    left, now_s() - start);
            ok = 0;
            break;
        }
        struct timespec ts = {(time_t)rest, (long)((rest - (double)(time_t)rest) * 1e9)};
        sigtimedwait(&chld, NULL, &ts);
    }
    for (int i = 0; i < nproc; i++) {
        if (pids[i] > 0) {
            kill(pids[i], SIGKILL);
            waitpid(pids[i], NULL, 0);
        }
    }
    fprintf(stderr, "tcp_launch node %d/%d %s (ranks %d..%d of %d): %s in %.2f s\n", op.node,
            op.nodes, op.margv[0], op.base, op.base + op.ppn - 1, op.size, ok ? "OK" : "FAILED",
            now_s() - start);
    return ok ? 0 : 1;
}
