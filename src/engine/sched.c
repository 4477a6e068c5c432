/* Schedule containers (sched.h): growing arrays, nothing else. */
#include "engine/sched.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arcoll.h"

void sched_init(sched_t *s)
{
    memset(s, 0, sizeof(*s));
}

void sched_free(sched_t *s)
{
    free(s->send);
    free(s->recv);
    free(s->local);
    free(s->segs);
    free(s->aux);
    sched_init(s);
}

void *sched_aux(sched_t *s, size_t len)
{
    void *p;

    if (len <= s->aux_cap)
        return s->aux;
    p = realloc(s->aux, len);
    if (p == NULL)
        return NULL;
    memset((char *)p + s->aux_cap, 0, len - s->aux_cap);
    s->aux = p;
    s->aux_cap = len;
    return p;
}

int sched_mem_tmp(sched_mem_t *m, size_t len)
{
    size_t want = m->tmp_cap ? m->tmp_cap : 4096;
    char *p;

    if (len <= m->tmp_cap)
        return ARCOLL_OK;
    if (m->pinned)
        return ARCOLL_INPROGRESS;
    while (want < len)
        want = want > SIZE_MAX / 2 ? len : want * 2;
    p = realloc(m->buf[SCHED_BUF_TMP], want);
    if (p == NULL)
        return ARCOLL_ERR_NOMEM;
    m->buf[SCHED_BUF_TMP] = p;
    m->tmp_cap = want;
    return ARCOLL_OK;
}

void sched_reset(sched_t *s)
{
    s->nrounds = 0;
    s->nsend = s->nrecv = s->nlocal = s->nsegs = 0;
    s->tmp_len = 0;
    s->hook = NULL;
    s->on_size = NULL;
    s->hook_arg = NULL;
}

/* Make room for one more element of size sz in *arr (capacity *cap). */
static int sched_grow(void **arr, uint32_t *cap, uint32_t n, uint32_t more, size_t sz)
{
    uint32_t want;
    void *p;

    if (n + more <= *cap)
        return 0;
    want = *cap ? *cap : 8;
    while (want < n + more)
        want *= 2;
    p = realloc(*arr, (size_t)want * sz);
    if (p == NULL)
        return ARCOLL_ERR_NOMEM;
    *arr = p;
    *cap = want;
    return 0;
}

int sched_add_segs(sched_t *s, const sched_seg_t *segs, uint32_t n, uint32_t *first)
{
    if (n > SCHED_NSEG_MAX)
        return ARCOLL_ERR_UNSUPPORTED;
    if (sched_grow((void **)&s->segs, &s->cap_segs, s->nsegs, n, sizeof(*segs)) != 0)
        return ARCOLL_ERR_NOMEM;
    memcpy(s->segs + s->nsegs, segs, sizeof(*segs) * n);
    *first = s->nsegs;
    s->nsegs += n;
    return 0;
}

/* Sends and receives define the rounds; local copies do not (rule 4). */
static int sched_msg_add(sched_t *s, sched_msg_t **arr, uint32_t *n, uint32_t *cap,
                         const sched_msg_t *m, int counts)
{
    if (sched_grow((void **)arr, cap, *n, 1, sizeof(*m)) != 0)
        return ARCOLL_ERR_NOMEM;
    (*arr)[(*n)++] = *m;
    if (counts && m->round + 1 > s->nrounds)
        s->nrounds = m->round + 1;
    return 0;
}

int sched_add_send_at(sched_t *s, uint32_t round, uint32_t peer, uint32_t first, uint32_t nseg)
{
    sched_msg_t m = {.peer = peer, .round = round, .seg = first, .nseg = nseg};

    if (nseg > SCHED_NSEG_MAX)
        return ARCOLL_ERR_UNSUPPORTED;
    return sched_msg_add(s, &s->send, &s->nsend, &s->cap_send, &m, 1);
}

int sched_add_recv_at(sched_t *s, uint32_t round, uint32_t peer, int action, uint32_t first,
                      uint32_t nseg)
{
    sched_msg_t m = {.peer = peer, .round = round, .seg = first, .nseg = nseg, .action = action};

    if (nseg > SCHED_NSEG_MAX)
        return ARCOLL_ERR_UNSUPPORTED;
    return sched_msg_add(s, &s->recv, &s->nrecv, &s->cap_recv, &m, 1);
}

int sched_add_send(sched_t *s, uint32_t round, uint32_t peer, const sched_seg_t *segs,
                   uint32_t nseg)
{
    uint32_t first;
    int rc = sched_add_segs(s, segs, nseg, &first);

    return rc != 0 ? rc : sched_add_send_at(s, round, peer, first, nseg);
}

int sched_add_recv(sched_t *s, uint32_t round, uint32_t peer, int action, const sched_seg_t *segs,
                   uint32_t nseg)
{
    uint32_t first;
    int rc = sched_add_segs(s, segs, nseg, &first);

    return rc != 0 ? rc : sched_add_recv_at(s, round, peer, action, first, nseg);
}

int sched_add_local(sched_t *s, uint32_t round, const sched_seg_t *dst, uint32_t ndst,
                    const sched_seg_t *src, uint32_t nsrc)
{
    sched_msg_t m = {.round = round, .nseg = ndst, .src_nseg = nsrc};
    uint32_t src_seg;
    int rc;

    if (ndst > SCHED_NSEG_MAX)
        return ARCOLL_ERR_UNSUPPORTED;
    /* The source segments follow the destination ones (sched_src_seg). */
    rc = sched_add_segs(s, dst, ndst, &m.seg);
    if (rc == 0)
        rc = sched_add_segs(s, src, nsrc, &src_seg);
    return rc != 0 ? rc : sched_msg_add(s, &s->local, &s->nlocal, &s->cap_local, &m, 0);
}

uint64_t sched_msg_len(const sched_t *s, const sched_msg_t *m)
{
    uint64_t len = 0;

    for (uint32_t i = 0; i < m->nseg; i++)
        len += s->segs[m->seg + i].len;
    return len;
}
