/* The heap MR (mem/heapmr.h): the current MR over [base, base + top) and a
 * list of replaced ones that calls in flight still hold. */
#include "mem/heapmr.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arcoll.h"

struct heapmr_mr {
    void *handle;
    size_t len;
    size_t refs;
    heapmr_mr_t *next; /* on the old list */
};

struct heapmr {
    regcache_ops_t ops;
    uintptr_t base;
    size_t slot_len, min;
    heapmr_mr_t *cur;
    heapmr_mr_t *old; /* replaced, still held */
    int disabled;
    heapmr_stats_t st;
};

int heapmr_create(const regcache_ops_t *ops, void *base, size_t slot_len, size_t min,
                  heapmr_t **out)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t m = page > 0 ? (size_t)page : 4096;
    heapmr_t *h;

    if (ops == NULL || ops->reg == NULL || ops->dereg == NULL || out == NULL || base == NULL ||
        slot_len == 0 || (uintptr_t)base % m != 0 || slot_len % m != 0 ||
        (uintptr_t)base + slot_len < (uintptr_t)base)
        return ARCOLL_ERR_INVALID;
    while (m < min && m <= SIZE_MAX / 2)
        m *= 2;
    h = calloc(1, sizeof(*h));
    if (h == NULL)
        return ARCOLL_ERR_NOMEM;
    h->ops = *ops;
    h->base = (uintptr_t)base;
    h->slot_len = slot_len;
    h->min = m;
    *out = h;
    return ARCOLL_OK;
}

static void heapmr_release(heapmr_t *h, heapmr_mr_t *m)
{
    h->ops.dereg(h->ops.arg, m->handle);
    h->st.deregs++;
    h->st.bytes -= m->len;
    free(m);
}

/* The current MR stops being current: released now if nobody holds it. */
static void heapmr_retire(heapmr_t *h)
{
    heapmr_mr_t *m = h->cur;

    h->cur = NULL;
    h->st.top = 0;
    if (m == NULL)
        return;
    if (m->refs == 0) {
        heapmr_release(h, m);
        return;
    }
    m->next = h->old;
    h->old = m;
}

void heapmr_destroy(heapmr_t *h)
{
    if (h == NULL)
        return;
    if (h->cur != NULL)
        heapmr_release(h, h->cur);
    while (h->old != NULL) {
        heapmr_mr_t *m = h->old;
        h->old = m->next;
        heapmr_release(h, m);
    }
    free(h);
}

/* The smallest min x 2^k covering need bytes, capped at the slot. */
static size_t heapmr_top_for(const heapmr_t *h, size_t need)
{
    size_t top = h->min;

    while (top < need && top < h->slot_len)
        top = top > h->slot_len / 2 ? h->slot_len : top * 2;
    return top < h->slot_len ? top : h->slot_len;
}

/* A new MR over the prefix that covers need bytes (and used). */
static int heapmr_grow(heapmr_t *h, size_t need, size_t used)
{
    heapmr_mr_t *m = calloc(1, sizeof(*m));
    int rc;

    if (m == NULL)
        return ARCOLL_ERR_NOMEM;
    m->len = heapmr_top_for(h, used > need && used <= h->slot_len ? used : need);
    rc = h->ops.reg(h->ops.arg, (void *)h->base, m->len, &m->handle);
    if (rc != 0) {
        free(m);
        return rc < 0 ? rc : ARCOLL_ERR_CHANNEL;
    }
    heapmr_retire(h);
    h->cur = m;
    h->st.regs++;
    h->st.top = m->len;
    h->st.bytes += m->len;
    return ARCOLL_OK;
}

int heapmr_get(heapmr_t *h, void *addr, size_t len, size_t used, heapmr_mr_t **out)
{
    uintptr_t a = (uintptr_t)addr;
    size_t end;
    int rc;

    if (h == NULL || h->disabled || len == 0 || a < h->base || a - h->base > h->slot_len ||
        len > h->slot_len - (a - h->base))
        return HEAPMR_SKIP;
    end = (size_t)(a - h->base) + len;
    if (h->cur == NULL || end > h->cur->len) {
        rc = heapmr_grow(h, end, used);
        if (rc != ARCOLL_OK) {
            /* From now on the caller's other path; what we have goes once unheld. */
            h->disabled = 1;
            h->st.failed++;
            heapmr_retire(h);
            return rc;
        }
    }
    h->cur->refs++;
    h->st.hits++;
    *out = h->cur;
    return ARCOLL_OK;
}

void heapmr_put(heapmr_t *h, heapmr_mr_t *m)
{
    if (h == NULL || m == NULL || m->refs == 0)
        return;
    if (--m->refs != 0 || m == h->cur)
        return;
    for (heapmr_mr_t **pp = &h->old; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == m) {
            *pp = m->next;
            heapmr_release(h, m);
            return;
        }
    }
}

void heapmr_revoke(heapmr_t *h, heapmr_mr_t *m)
{
    if (h == NULL || m == NULL)
        return;
    h->st.revoked++;
    if (m == h->cur)
        heapmr_retire(h); /* held: onto the old list, released at its last put */
}

void *heapmr_handle(const heapmr_mr_t *m)
{
    return m->handle;
}

void heapmr_stats(const heapmr_t *h, heapmr_stats_t *st)
{
    if (h == NULL) {
        memset(st, 0, sizeof(*st));
        return;
    }
    *st = h->st;
}
