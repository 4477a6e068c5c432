/* Memory-registration cache (see regcache.h). The cached entries live in an
 * array sorted by start address and kept disjoint, so their ends are sorted
 * too and one binary search finds both a covering entry and the run of
 * entries a range overlaps. Unpinned cached entries are also on an LRU list;
 * pinned entries dropped from the index (invalidated or merged) wait on a
 * detached list for their last put, so destroy can still find them. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arcoll.h"
#include "mem/regcache.h"
#include "util/log.h"

enum { REGCACHE_CACHED, REGCACHE_DETACHED };

struct regcache_entry {
    uintptr_t start, end; /* page-aligned, end exclusive */
    void *handle;
    size_t refs;
    int state;
    /* LRU list while cached and unpinned; detached list while detached. */
    regcache_entry_t *prev, *next;
};

typedef struct regcache_list {
    regcache_entry_t *head, *tail; /* head: least recently used */
} regcache_list_t;

struct regcache {
    regcache_ops_t ops;
    uintptr_t page;
    size_t max_entries, max_bytes;
    regcache_entry_t **idx; /* cached entries, sorted by start, disjoint */
    size_t n, cap;
    size_t bytes; /* sum of the cached entries' lengths */
    regcache_list_t lru, detached;
    regcache_stats_t st;
};

static void regcache_list_push(regcache_list_t *l, regcache_entry_t *e)
{
    e->next = NULL;
    e->prev = l->tail;
    if (l->tail != NULL)
        l->tail->next = e;
    else
        l->head = e;
    l->tail = e;
}

static void regcache_list_remove(regcache_list_t *l, regcache_entry_t *e)
{
    if (e->prev != NULL)
        e->prev->next = e->next;
    else
        l->head = e->next;
    if (e->next != NULL)
        e->next->prev = e->prev;
    else
        l->tail = e->prev;
    e->prev = e->next = NULL;
}

void *regcache_entry_handle(const regcache_entry_t *e)
{
    return e->handle;
}

void *regcache_entry_addr(const regcache_entry_t *e)
{
    return (void *)e->start;
}

size_t regcache_entry_len(const regcache_entry_t *e)
{
    return (size_t)(e->end - e->start);
}

/* Index of the first cached entry ending after addr (n if none). */
static size_t regcache_lower(const regcache_t *rc, uintptr_t addr)
{
    size_t lo = 0, hi = rc->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rc->idx[mid]->end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Take idx[i, i+cnt) out of the index; the caller drops the entries. */
static void regcache_index_cut(regcache_t *rc, size_t i, size_t cnt)
{
    memmove(&rc->idx[i], &rc->idx[i + cnt], (rc->n - i - cnt) * sizeof(rc->idx[0]));
    rc->n -= cnt;
}

static void regcache_free_entry(regcache_t *rc, regcache_entry_t *e)
{
    rc->ops.dereg(rc->ops.arg, e->handle);
    free(e);
}

/* e has left the index: deregister it now, or at its last put if pinned. */
static void regcache_drop(regcache_t *rc, regcache_entry_t *e)
{
    rc->bytes -= (size_t)(e->end - e->start);
    if (e->refs == 0) {
        regcache_list_remove(&rc->lru, e);
        regcache_free_entry(rc, e);
        return;
    }
    e->state = REGCACHE_DETACHED;
    regcache_list_push(&rc->detached, e);
}

static int regcache_over(const regcache_t *rc)
{
    return rc->n > rc->max_entries || rc->bytes > rc->max_bytes;
}

/* Evict least recently used unpinned entries until within the bounds;
 * nonzero if still over them (everything left is pinned). */
static int regcache_trim(regcache_t *rc)
{
    while (regcache_over(rc) && rc->lru.head != NULL) {
        regcache_entry_t *e = rc->lru.head;
        /* Disjoint entries: the first one ending after e's start is e. */
        regcache_index_cut(rc, regcache_lower(rc, e->start), 1);
        regcache_drop(rc, e);
        rc->st.evictions++;
    }
    return regcache_over(rc);
}

int regcache_create(const regcache_ops_t *ops, size_t max_entries, size_t max_bytes,
                    regcache_t **out)
{
    regcache_t *rc;
    long page = sysconf(_SC_PAGESIZE);

    if (ops == NULL || ops->reg == NULL || ops->dereg == NULL || out == NULL)
        return ARCOLL_ERR_INVALID;
    rc = calloc(1, sizeof(*rc));
    if (rc == NULL)
        return ARCOLL_ERR_NOMEM;
    rc->ops = *ops;
    /* Only a power of two works for the rounding masks. */
    rc->page = (page > 0 && (page & (page - 1)) == 0) ? (uintptr_t)page : 4096;
    rc->max_entries = max_entries != 0 ? max_entries : REGCACHE_DEFAULT_MAX_ENTRIES;
    rc->max_bytes = max_bytes != 0 ? max_bytes : SIZE_MAX;
    *out = rc;
    return ARCOLL_OK;
}

void regcache_destroy(regcache_t *rc)
{
    size_t pinned = 0;

    if (rc == NULL)
        return;
    for (size_t i = 0; i < rc->n; i++) {
        pinned += rc->idx[i]->refs != 0;
        regcache_free_entry(rc, rc->idx[i]);
    }
    while (rc->detached.head != NULL) {
        regcache_entry_t *e = rc->detached.head;
        regcache_list_remove(&rc->detached, e);
        regcache_free_entry(rc, e);
        pinned++;
    }
    if (pinned != 0)
        log_debug("regcache: destroyed with %zu pinned entries", pinned);
    free(rc->idx);
    free(rc);
}

/* Register [s, e) merged with the cached entries idx[i0..] it overlaps. */
static int regcache_miss(regcache_t *rc, uintptr_t s, uintptr_t e, size_t i0,
                         regcache_entry_t **out)
{
    regcache_entry_t *ent = NULL;
    size_t j = i0;
    int status;

    while (j < rc->n && rc->idx[j]->start < e)
        j++;
    if (j > i0) {
        s = rc->idx[i0]->start < s ? rc->idx[i0]->start : s;
        e = rc->idx[j - 1]->end > e ? rc->idx[j - 1]->end : e;
    }
    /* Allocate before reg: after a successful reg nothing may fail. */
    if (rc->n == rc->cap) {
        size_t cap = rc->cap != 0 ? rc->cap * 2 : 16;
        regcache_entry_t **idx = realloc(rc->idx, cap * sizeof(*idx));
        if (idx == NULL) {
            status = ARCOLL_ERR_NOMEM;
            goto fail;
        }
        rc->idx = idx;
        rc->cap = cap;
    }
    ent = calloc(1, sizeof(*ent));
    if (ent == NULL) {
        status = ARCOLL_ERR_NOMEM;
        goto fail;
    }
    status = rc->ops.reg(rc->ops.arg, (void *)s, (size_t)(e - s), &ent->handle);
    if (status != 0) {
        status = status < 0 ? status : ARCOLL_ERR_CHANNEL;
        goto fail;
    }

    /* The new entry replaces the run idx[i0, j) it covers. */
    for (size_t k = i0; k < j; k++)
        regcache_drop(rc, rc->idx[k]);
    regcache_index_cut(rc, i0, j - i0);
    memmove(&rc->idx[i0 + 1], &rc->idx[i0], (rc->n - i0) * sizeof(rc->idx[0]));
    rc->idx[i0] = ent;
    rc->n++;
    ent->start = s;
    ent->end = e;
    ent->refs = 1;
    ent->state = REGCACHE_CACHED;
    rc->bytes += (size_t)(e - s);
    rc->st.misses++;
    if (regcache_trim(rc))
        rc->st.overflows++;
    *out = ent;
    return ARCOLL_OK;

fail:
    free(ent);
    return status;
}

int regcache_get(regcache_t *rc, void *addr, size_t len, regcache_entry_t **out)
{
    uintptr_t a = (uintptr_t)addr, s, e;
    size_t i;

    if (rc == NULL || out == NULL || len == 0 || a > UINTPTR_MAX - len ||
        a + len > UINTPTR_MAX - (rc->page - 1))
        return ARCOLL_ERR_INVALID;
    s = a & ~(rc->page - 1);
    e = (a + len + rc->page - 1) & ~(rc->page - 1);
    i = regcache_lower(rc, s);
    if (i < rc->n && rc->idx[i]->start <= s && rc->idx[i]->end >= e) {
        regcache_entry_t *ent = rc->idx[i];
        if (ent->refs++ == 0)
            regcache_list_remove(&rc->lru, ent);
        rc->st.hits++;
        *out = ent;
        return ARCOLL_OK;
    }
    return regcache_miss(rc, s, e, i, out);
}

void regcache_put(regcache_t *rc, regcache_entry_t *e)
{
    if (rc == NULL || e == NULL || e->refs == 0)
        return;
    if (--e->refs != 0)
        return;
    if (e->state == REGCACHE_DETACHED) {
        regcache_list_remove(&rc->detached, e);
        regcache_free_entry(rc, e);
        return;
    }
    regcache_list_push(&rc->lru, e);
    /* An entry left over the bound while everything was pinned goes now. */
    regcache_trim(rc);
}

void regcache_invalidate(regcache_t *rc, void *addr, size_t len)
{
    uintptr_t a = (uintptr_t)addr;
    uintptr_t b = a > UINTPTR_MAX - len ? UINTPTR_MAX : a + len;
    size_t i0, j;

    if (rc == NULL || len == 0)
        return;
    i0 = regcache_lower(rc, a);
    for (j = i0; j < rc->n && rc->idx[j]->start < b; j++) {
        regcache_drop(rc, rc->idx[j]);
        rc->st.invalidations++;
    }
    regcache_index_cut(rc, i0, j - i0);
}

void regcache_stats(const regcache_t *rc, regcache_stats_t *st)
{
    if (rc == NULL) {
        memset(st, 0, sizeof(*st));
        return;
    }
    *st = rc->st;
    st->entries = rc->n;
    st->bytes = rc->bytes;
}
