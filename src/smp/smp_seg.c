#include "smp/smp_seg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arcoll.h"
#include "core/log.h"

static void smp_seg_name(char *buf, size_t len, long pid, uint64_t tag)
{
    snprintf(buf, len, "/arcoll.%ld.%llu", pid, (unsigned long long)tag);
}

int smp_seg_create(smp_seg_t *s, size_t len)
{
    static _Atomic uint64_t next_tag;
    uint64_t tag = atomic_fetch_add(&next_tag, 1);
    char name[64];
    void *addr;
    int fd, err;

    memset(s, 0, sizeof(*s));
    smp_seg_name(name, sizeof(name), (long)getpid(), tag);
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        log_err("smp: shm_open(%s) failed: %s", name, strerror(errno));
        return ARCOLL_ERR_NOMEM;
    }
    err = posix_fallocate(fd, 0, (off_t)len);
    if (err != 0) {
        log_err("smp: reserving %zu bytes of shared memory for %s failed: %s "
                "(is /dev/shm large enough?)",
                len, name, strerror(err));
        goto err_unlink;
    }
    addr = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
        log_err("smp: mmap of %zu bytes of %s failed: %s", len, name, strerror(errno));
        goto err_unlink;
    }
    close(fd);
    s->addr = addr;
    s->len = len;
    s->owner = (long)getpid();
    s->tag = tag;
    s->linked = 1;
    return ARCOLL_OK;

err_unlink:
    shm_unlink(name);
    close(fd);
    return ARCOLL_ERR_NOMEM;
}

int smp_seg_attach(smp_seg_t *s, long owner, uint64_t tag, size_t len)
{
    char name[64];
    struct stat st;
    void *addr;
    int fd;

    memset(s, 0, sizeof(*s));
    smp_seg_name(name, sizeof(name), owner, tag);
    fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        log_err("smp: shm_open(%s) failed: %s", name, strerror(errno));
        return ARCOLL_ERR_CHANNEL;
    }
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < len) {
        log_err("smp: segment %s is smaller than the %zu bytes expected", name, len);
        goto err_close;
    }
    addr = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
        log_err("smp: mmap of segment %s failed: %s", name, strerror(errno));
        goto err_close;
    }
    close(fd);
    s->addr = addr;
    s->len = len;
    s->owner = owner;
    s->tag = tag;
    return ARCOLL_OK;

err_close:
    close(fd);
    return ARCOLL_ERR_CHANNEL;
}

void smp_seg_unlink(smp_seg_t *s)
{
    char name[64];

    if (!s->linked)
        return;
    smp_seg_name(name, sizeof(name), s->owner, s->tag);
    if (shm_unlink(name) != 0)
        log_warn("smp: shm_unlink(%s) failed: %s", name, strerror(errno));
    s->linked = 0;
}

void smp_seg_free(smp_seg_t *s)
{
    smp_seg_unlink(s);
    if (s->addr != NULL && munmap(s->addr, s->len) != 0)
        log_warn("smp: munmap of a shared segment failed: %s", strerror(errno));
    s->addr = NULL;
}
