#include "chan/smp/smp_seg.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arcoll.h"
#include "chan/chan.h"
#include "util/log.h"

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif

#define SMP_SEG_DIR    "/dev/shm"
#define SMP_SEG_PREFIX "arcoll."
#define SMP_SEG_MEMFD  "arcoll" /* /proc/<pid>/fd/N reads "/memfd:arcoll (deleted)" */

static void smp_seg_name(char *buf, size_t len, long pid, uint64_t key)
{
    snprintf(buf, len, "/" SMP_SEG_PREFIX "%ld.%016llx", pid, (unsigned long long)key);
}

/* ENOMEM/ENOSPC while reserving pages is memory that is short; anything else
 * is a segment that cannot be made, which more memory would not fix. */
static int smp_seg_status(int err)
{
    return err == ENOMEM || err == ENOSPC ? ARCOLL_ERR_NOMEM : ARCOLL_ERR_CHANNEL;
}

/* A sized, sealed memfd; 0 or the errno, *what names the call that failed
 * (the caller decides whether that is an error or a probe's answer). sparse:
 * sized but no pages reserved (the node heap reserves them as it grows). */
static int smp_seg_memfd_new(size_t len, int sparse, int *out, const char **what)
{
    int fd, err;

    /* MFD_NOEXEC_SEAL keeps 6.3+ kernels from warning; 6.1 refuses it. */
    fd = memfd_create(SMP_SEG_MEMFD, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
    if (fd < 0 && errno == EINVAL)
        fd = memfd_create(SMP_SEG_MEMFD, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        *what = "memfd_create";
        return errno;
    }
    if (sparse) {
        err = ftruncate(fd, (off_t)len) != 0 ? errno : 0;
        *what = "ftruncate";
    } else {
        err = posix_fallocate(fd, 0, (off_t)len);
        *what = "posix_fallocate";
    }
    if (err != 0)
        goto err_close;
    /* A peer that maps it can then never shrink it under another (SIGBUS). */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        err = errno;
        *what = "fcntl(F_ADD_SEALS)";
        goto err_close;
    }
    *out = fd;
    return 0;

err_close:
    close(fd);
    return err;
}

static int smp_seg_create_memfd(smp_seg_t *s, size_t len, int sparse)
{
    const char *what = "";
    int err = smp_seg_memfd_new(len, sparse, &s->fd, &what);

    if (err != 0) {
        log_err("smp: %s for a %zu-byte shared segment failed: %s%s", what, len, strerror(err),
                err == ENOMEM || err == ENOSPC ? " (memory or the memory cgroup limit is short)"
                                               : " (ARCOLL_SMP_SEG=named uses /dev/shm instead)");
        return smp_seg_status(err);
    }
    s->key = (uint64_t)s->fd;
    return ARCOLL_OK;
}

/* O_EXCL on a name nobody can guess: a name that exists is someone else's
 * (or a collision), never ours to reuse, so draw again. */
static int smp_seg_create_named(smp_seg_t *s, size_t len, char *name, size_t name_len)
{
    uint64_t r;
    int err;

    err = EEXIST;
    for (int tries = 0; s->fd < 0 && err == EEXIST && tries < 8; tries++) {
        if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
            log_err("smp: getrandom for a shared segment name failed: %s", strerror(errno));
            return ARCOLL_ERR_CHANNEL;
        }
        s->key = SMP_SEG_KEY_NAMED | r;
        smp_seg_name(name, name_len, s->owner, s->key);
        s->fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW, 0600);
        err = s->fd < 0 ? errno : 0;
        if (err == EEXIST)
            log_warn("smp: shared segment name %s exists already; drawing another", name);
    }
    if (s->fd < 0) {
        log_err("smp: shm_open(%s) failed: %s (is " SMP_SEG_DIR " mounted and writable?)", name,
                strerror(err));
        return ARCOLL_ERR_CHANNEL;
    }
    s->linked = 1;
    err = posix_fallocate(s->fd, 0, (off_t)len);
    if (err != 0) {
        log_err("smp: reserving %zu bytes of shared memory for %s failed: %s "
                "(is " SMP_SEG_DIR " large enough?)",
                len, name, strerror(err));
        smp_seg_seal(s);
        return smp_seg_status(err);
    }
    return ARCOLL_OK;
}

/* Map at `at` over the caller's reservation (MAP_FIXED) or where the kernel
 * likes (NULL). */
static void *smp_seg_map(void *at, size_t len, int fd)
{
    return mmap(at, len, PROT_READ | PROT_WRITE, MAP_SHARED | (at != NULL ? MAP_FIXED : 0), fd, 0);
}

static int smp_seg_make(smp_seg_t *s, size_t len, int named, void *at, int sparse)
{
    char name[64] = "a memfd";
    void *addr;
    int rc;

    memset(s, 0, sizeof(*s));
    s->fd = -1;
    s->owner = (long)getpid();
    rc = named ? smp_seg_create_named(s, len, name, sizeof(name))
               : smp_seg_create_memfd(s, len, sparse);
    if (rc != ARCOLL_OK)
        return rc;
    addr = smp_seg_map(at, len, s->fd);
    if (addr == MAP_FAILED) {
        rc = smp_seg_status(errno);
        log_err("smp: mmap of %zu bytes of %s failed: %s", len, name, strerror(errno));
        goto err_seal;
    }
    if (named) { /* the name finds it now; the fd is not needed */
        close(s->fd);
        s->fd = -1;
    }
    s->addr = addr;
    s->len = len;
    return ARCOLL_OK;

err_seal:
    smp_seg_seal(s);
    return rc;
}

int smp_seg_create(smp_seg_t *s, size_t len, int named)
{
    return smp_seg_make(s, len, named, NULL, 0);
}

int smp_seg_create_at(smp_seg_t *s, size_t len, void *at)
{
    return smp_seg_make(s, len, 0, at, 1);
}

/* Open the owner's segment: its memfd through /proc (the kernel checks that
 * we may ptrace-read the owner: same user, owner dumpable), or its name. */
static int smp_seg_open(long owner, uint64_t key, char *what, size_t what_len)
{
    if (key & SMP_SEG_KEY_NAMED) {
        smp_seg_name(what, what_len, owner, key);
        return shm_open(what, O_RDWR | O_NOFOLLOW, 0);
    }
    snprintf(what, what_len, "/proc/%ld/fd/%llu", owner, (unsigned long long)key);
    return open(what, O_RDWR | O_CLOEXEC);
}

int smp_seg_attach_at(smp_seg_t *s, long owner, uint64_t key, size_t len, void *at)
{
    char what[64];
    struct stat st;
    void *addr;
    int fd, seals;

    memset(s, 0, sizeof(*s));
    s->fd = -1;
    fd = smp_seg_open(owner, key, what, sizeof(what));
    if (fd < 0) {
        int err = errno;
        if (boot_pid_gone(owner)) {
            log_err("smp: the owner of shared segment %s (pid %ld) has exited", what, owner);
            return ARCOLL_ERR_PEER;
        }
        log_err("smp: open of shared segment %s failed: %s%s", what, strerror(err),
                key & SMP_SEG_KEY_NAMED ? "" : " (ARCOLL_SMP_SEG=named avoids /proc/<pid>/fd)");
        return ARCOLL_ERR_CHANNEL;
    }
    if (fstat(fd, &st) != 0) {
        log_err("smp: fstat of shared segment %s failed: %s", what, strerror(errno));
        goto err_close;
    }
    /* Only the owner's own segment will do: ours, a file, large enough, and a
     * memfd sealed at its size (not whatever a recycled pid holds there). */
    seals = key & SMP_SEG_KEY_NAMED ? F_SEAL_SHRINK : fcntl(fd, F_GET_SEALS);
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (uint64_t)st.st_size < len || seals < 0 ||
        (seals & F_SEAL_SHRINK) == 0) {
        log_err("smp: shared segment %s is not a %zu-byte segment of this user (uid %ld, "
                "%lld bytes)",
                what, len, (long)st.st_uid, (long long)st.st_size);
        goto err_close;
    }
    addr = smp_seg_map(at, len, fd);
    if (addr == MAP_FAILED) {
        log_err("smp: mmap of shared segment %s failed: %s", what, strerror(errno));
        goto err_close;
    }
    close(fd);
    s->addr = addr;
    s->len = len;
    s->owner = owner;
    s->key = key;
    return ARCOLL_OK;

err_close:
    close(fd);
    return ARCOLL_ERR_CHANNEL;
}

int smp_seg_attach(smp_seg_t *s, long owner, uint64_t key, size_t len)
{
    return smp_seg_attach_at(s, owner, key, len, NULL);
}

void smp_seg_seal(smp_seg_t *s)
{
    char name[64];

    if (s->fd >= 0 && close(s->fd) != 0)
        log_warn("smp: close of a shared segment's fd failed: %s", strerror(errno));
    s->fd = -1;
    if (!s->linked)
        return;
    smp_seg_name(name, sizeof(name), s->owner, s->key);
    if (shm_unlink(name) != 0)
        log_warn("smp: shm_unlink(%s) failed: %s", name, strerror(errno));
    s->linked = 0;
}

void smp_seg_free(smp_seg_t *s)
{
    smp_seg_seal(s);
    if (s->addr != NULL && munmap(s->addr, s->len) != 0)
        log_warn("smp: munmap of a shared segment failed: %s", strerror(errno));
    s->addr = NULL;
}

/* The rank whose memfd this one tries: the next on its node (the smp channel
 * maps every rank of its one host; node segments, the ranks of a node). */
static int smp_seg_probe_peer(const boot_t *b, int rank)
{
    for (int i = 1; i < b->size; i++) {
        int p = (rank + i) % b->size;
        if (b->nhosts == 1 || b->node_of[p] == b->node_of[rank])
            return p;
    }
    return rank;
}

int smp_seg_agree(boot_t *b, int want, int *named)
{
    /* stage: 0 fine, 1 memfd_create/sizing failed, 2 opening the peer's failed */
    struct {
        int64_t pid;
        int32_t fd, err, stage, pad;
    } mine = {0}, *all;
    const char *what = "";
    char path[64];
    int peer = smp_seg_probe_peer(b, b->rank), fd = -1, rc, bad = -1;

    *named = 1;
    if (want == CORE_SEG_NAMED)
        return ARCOLL_OK;
    all = calloc((size_t)b->size, sizeof(*all));
    if (all == NULL) {
        log_err("smp: out of memory");
        return ARCOLL_ERR_NOMEM; /* the others fail in the bootstrap */
    }
    mine.pid = (int64_t)getpid();
    mine.err = smp_seg_memfd_new((size_t)sysconf(_SC_PAGESIZE), 0, &fd, &what);
    mine.stage = mine.err != 0;
    mine.fd = fd;
    rc = b->allgather(b, &mine, all, sizeof(mine));
    if (rc != ARCOLL_OK)
        goto out;
    if (mine.err == 0 && peer != b->rank && all[peer].err == 0) {
        int pfd;
        snprintf(path, sizeof(path), "/proc/%lld/fd/%d", (long long)all[peer].pid, all[peer].fd);
        pfd = open(path, O_RDWR | O_CLOEXEC);
        if (pfd < 0) {
            mine.err = errno;
            mine.stage = 2;
        } else {
            close(pfd);
        }
    }
    /* Also the barrier that keeps every probe fd open until its peer tried it. */
    rc = b->allgather(b, &mine, all, sizeof(mine));
    if (rc != ARCOLL_OK)
        goto out;
    for (int i = 0; i < b->size && bad < 0; i++)
        if (all[i].err != 0)
            bad = i;
    *named = bad >= 0;
    if (bad >= 0 && (want == CORE_SEG_MEMFD || b->rank == 0)) {
        char why[160];
        if (all[bad].stage == 1)
            snprintf(why, sizeof(why), "memfd_create on rank %d failed: %s", bad,
                     strerror(all[bad].err));
        else
            snprintf(why, sizeof(why), "rank %d cannot open rank %d's memfd through /proc: %s", bad,
                     smp_seg_probe_peer(b, bad), strerror(all[bad].err));
        if (want == CORE_SEG_MEMFD) {
            log_err("smp: ARCOLL_SMP_SEG=memfd, but %s (is /proc mounted, and the ranks one "
                    "user's dumpable processes? auto falls back to named segments)",
                    why);
            rc = ARCOLL_ERR_CHANNEL;
        } else {
            log_warn("smp: %s: shared segments are named in " SMP_SEG_DIR
                     " (random names, removed once mapped)",
                     why);
        }
    }
out:
    if (fd >= 0)
        close(fd);
    free(all);
    return rc;
}

int smp_seg_sweep(void *out)
{
    struct dirent *e;
    struct stat st;
    int n = 0;
    DIR *d;

    d = opendir(SMP_SEG_DIR);
    if (d == NULL) {
        if (errno != ENOENT)
            log_warn("smp: opendir(" SMP_SEG_DIR ") failed: %s; stale segments not removed",
                     strerror(errno));
        return 0;
    }
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid;

        if (strncmp(e->d_name, SMP_SEG_PREFIX, strlen(SMP_SEG_PREFIX)) != 0)
            continue;
        pid = strtol(e->d_name + strlen(SMP_SEG_PREFIX), &end, 10);
        if (pid <= 0 || *end != '.')
            continue;
        /* Only this user's regular files, and only of a creator that is gone:
         * a live creator may still be waiting for its peers to attach. */
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != geteuid() || !boot_pid_gone(pid))
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) != 0) {
            if (errno != ENOENT) /* another rank's sweep may have been first */
                log_warn("smp: unlink of stale " SMP_SEG_DIR "/%s failed: %s", e->d_name,
                         strerror(errno));
            continue;
        }
        n++;
        if (out != NULL)
            fprintf(out, "removed " SMP_SEG_DIR "/%s (%lld bytes; pid %ld has exited)\n", e->d_name,
                    (long long)st.st_size, pid);
        else
            log_info("removed stale shared segment " SMP_SEG_DIR "/%s (pid %ld has exited)",
                     e->d_name, pid);
    }
    closedir(d);
    return n;
}
