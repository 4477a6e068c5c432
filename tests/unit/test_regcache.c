/* Unit tests of src/mem/regcache.c: the registration cache of the zero-copy
 * path, over fake reg/dereg callbacks that record every call and can be told
 * to fail. Addresses are never dereferenced, so they are made-up numbers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "arcoll.h"
#include "mem/regcache.h"

/* ---- fake registration callbacks --------------------------------------- */

#define FAKE_MAX 16384

typedef struct fake_reg {
    uintptr_t addr;
    size_t len;
    int live;
} fake_reg_t;

typedef struct fake {
    fake_reg_t regs[FAKE_MAX]; /* every successful registration, in order */
    size_t nreg;
    size_t reg_calls; /* failed ones included */
    size_t live;
    size_t ndereg;
    size_t dereg_order[FAKE_MAX]; /* registration ids, in dereg order */
    int fail_count;               /* fail this many next reg calls ... */
    int fail_status;              /* ... returning this */
    uintptr_t page;
} fake_t;

static int fake_reg(void *arg, void *addr, size_t len, void **handle)
{
    fake_t *f = arg;
    fake_reg_t *r;

    f->reg_calls++;
    /* The cache registers whole pages only. */
    assert_int_equal((uintptr_t)addr % f->page, 0);
    assert_int_equal(len % f->page, 0);
    assert_true(len > 0);
    if (f->fail_count > 0) {
        f->fail_count--;
        *handle = (void *)0x1; /* garbage the cache must not keep */
        return f->fail_status;
    }
    assert_true(f->nreg < FAKE_MAX);
    r = &f->regs[f->nreg++];
    r->addr = (uintptr_t)addr;
    r->len = len;
    r->live = 1;
    f->live++;
    *handle = r;
    return 0;
}

static void fake_dereg(void *arg, void *handle)
{
    fake_t *f = arg;
    fake_reg_t *r = handle;

    if (r < f->regs || r >= f->regs + f->nreg)
        fail_msg("dereg of a handle reg never returned: %p", handle);
    if (!r->live)
        fail_msg("registration %zu deregistered twice", (size_t)(r - f->regs));
    r->live = 0;
    f->live--;
    f->dereg_order[f->ndereg++] = (size_t)(r - f->regs);
}

static int setup(void **state)
{
    fake_t *f = calloc(1, sizeof(*f));

    if (f == NULL)
        return -1;
    f->page = (uintptr_t)sysconf(_SC_PAGESIZE);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

static regcache_t *mk(fake_t *f, size_t max_entries, size_t max_bytes)
{
    regcache_ops_t ops = {.reg = fake_reg, .dereg = fake_dereg, .arg = f};
    regcache_t *rc = NULL;

    assert_int_equal(regcache_create(&ops, max_entries, max_bytes, &rc), ARCOLL_OK);
    assert_non_null(rc);
    return rc;
}

/* Registration id behind an entry. */
static size_t rid(fake_t *f, const regcache_entry_t *e)
{
    fake_reg_t *r = regcache_entry_handle(e);

    assert_true(r >= f->regs && r < f->regs + f->nreg);
    return (size_t)(r - f->regs);
}

/* Start of page n of a made-up region (aligned for any page size <= 1 GiB). */
static char *pg_addr(fake_t *f, size_t n)
{
    return (char *)(uintptr_t)0x40000000u + n * f->page;
}

static regcache_entry_t *get_ok(regcache_t *rc, void *addr, size_t len)
{
    regcache_entry_t *e = NULL;

    assert_int_equal(regcache_get(rc, addr, len, &e), ARCOLL_OK);
    assert_non_null(e);
    /* Whatever it returns covers the range. */
    assert_true((uintptr_t)regcache_entry_addr(e) <= (uintptr_t)addr);
    assert_true((uintptr_t)regcache_entry_addr(e) + regcache_entry_len(e) >= (uintptr_t)addr + len);
    return e;
}

/* get then put: the range ends up cached and unpinned. */
static regcache_entry_t *touch(regcache_t *rc, void *addr, size_t len)
{
    regcache_entry_t *e = get_ok(rc, addr, len);

    regcache_put(rc, e);
    return e;
}

static regcache_stats_t stats_of(const regcache_t *rc)
{
    regcache_stats_t st;

    memset(&st, 0xa5, sizeof(st));
    regcache_stats(rc, &st);
    return st;
}

/* ---- tests -------------------------------------------------------------- */

static void test_bad_args(void **state)
{
    fake_t *f = *state;
    regcache_ops_t ops = {.reg = fake_reg, .dereg = fake_dereg, .arg = f};
    regcache_ops_t noreg = {.reg = NULL, .dereg = fake_dereg, .arg = f};
    regcache_ops_t nodereg = {.reg = fake_reg, .dereg = NULL, .arg = f};
    regcache_t *rc = NULL;
    regcache_entry_t *e = (regcache_entry_t *)0x1;

    assert_int_equal(regcache_create(NULL, 4, 0, &rc), ARCOLL_ERR_INVALID);
    assert_int_equal(regcache_create(&noreg, 4, 0, &rc), ARCOLL_ERR_INVALID);
    assert_int_equal(regcache_create(&nodereg, 4, 0, &rc), ARCOLL_ERR_INVALID);
    assert_int_equal(regcache_create(&ops, 4, 0, NULL), ARCOLL_ERR_INVALID);
    assert_null(rc);

    rc = mk(f, 4, 0);
    assert_int_equal(regcache_get(NULL, pg_addr(f, 0), 1, &e), ARCOLL_ERR_INVALID);
    assert_int_equal(regcache_get(rc, pg_addr(f, 0), 1, NULL), ARCOLL_ERR_INVALID);
    assert_int_equal(regcache_get(rc, pg_addr(f, 0), 0, &e), ARCOLL_ERR_INVALID);
    /* Wraps around the address space, or only once rounded to pages. */
    assert_int_equal(regcache_get(rc, (void *)(UINTPTR_MAX - 10), 100, &e), ARCOLL_ERR_INVALID);
    assert_int_equal(regcache_get(rc, (void *)(UINTPTR_MAX - 10), 5, &e), ARCOLL_ERR_INVALID);
    assert_ptr_equal(e, (regcache_entry_t *)0x1);
    assert_int_equal(f->reg_calls, 0);

    /* Harmless no-ops. */
    regcache_put(rc, NULL);
    regcache_put(NULL, NULL);
    regcache_invalidate(rc, pg_addr(f, 0), 0);
    regcache_invalidate(NULL, pg_addr(f, 0), 1);
    regcache_destroy(NULL);
    regcache_destroy(rc);
    assert_int_equal(f->ndereg, 0);
}

static void test_hit_miss_rounding(void **state)
{
    fake_t *f = *state;
    regcache_t *rc = mk(f, 16, 0);
    regcache_entry_t *e1, *e2, *e3, *e4;
    regcache_stats_t st;

    /* A small buffer inside page 0: page 0 is registered. */
    e1 = touch(rc, pg_addr(f, 0) + 100, 200);
    assert_int_equal(f->reg_calls, 1);
    assert_int_equal(f->regs[0].addr, (uintptr_t)pg_addr(f, 0));
    assert_int_equal(f->regs[0].len, f->page);
    assert_ptr_equal(regcache_entry_addr(e1), pg_addr(f, 0));
    assert_int_equal(regcache_entry_len(e1), f->page);
    assert_ptr_equal(regcache_entry_handle(e1), &f->regs[0]);

    /* A neighbouring buffer in the same page shares the entry. */
    e2 = touch(rc, pg_addr(f, 1) - 50, 50);
    assert_ptr_equal(e2, e1);
    assert_int_equal(f->reg_calls, 1);

    /* Unaligned start and length spanning 3 pages: pages 3..5. */
    e3 = touch(rc, pg_addr(f, 3) + 1, 2 * f->page);
    assert_int_equal(f->reg_calls, 2);
    assert_int_equal(f->regs[1].addr, (uintptr_t)pg_addr(f, 3));
    assert_int_equal(f->regs[1].len, 3 * f->page);
    assert_ptr_equal(regcache_entry_addr(e3), pg_addr(f, 3));

    /* The last byte of page 2 touches neither neighbour: a new page-2 entry. */
    e4 = touch(rc, pg_addr(f, 3) - 1, 1);
    assert_int_equal(f->reg_calls, 3);
    assert_int_equal(f->regs[2].addr, (uintptr_t)pg_addr(f, 2));
    assert_int_equal(f->regs[2].len, f->page);
    assert_ptr_not_equal(e4, e3);

    st = stats_of(rc);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.misses, 3);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.bytes, 5 * f->page);
    assert_int_equal(f->ndereg, 0);
    regcache_destroy(rc);
}

static void test_containment(void **state)
{
    fake_t *f = *state;
    regcache_t *rc = mk(f, 16, 0);
    regcache_entry_t *big, *e;

    big = touch(rc, pg_addr(f, 10), 8 * f->page); /* pages 10..17 */
    assert_ptr_equal(touch(rc, pg_addr(f, 12) + 7, f->page), big);
    assert_ptr_equal(touch(rc, pg_addr(f, 10), 8 * f->page), big);
    assert_ptr_equal(touch(rc, pg_addr(f, 10), 1), big);
    assert_ptr_equal(touch(rc, pg_addr(f, 18) - 1, 1), big);
    assert_int_equal(f->reg_calls, 1);
    assert_int_equal(stats_of(rc).hits, 4);

    /* One byte past the end is not covered. */
    e = touch(rc, pg_addr(f, 18) - 1, 2);
    assert_int_equal(f->reg_calls, 2);
    assert_ptr_not_equal(e, big);
    assert_int_equal(stats_of(rc).misses, 2);
    /* Before the start neither; the new entry covers the old one too. */
    e = touch(rc, pg_addr(f, 10) - 1, 2);
    assert_int_equal(f->reg_calls, 3);
    assert_ptr_equal(regcache_entry_addr(e), pg_addr(f, 9));
    assert_int_equal(regcache_entry_len(e), 10 * f->page);
    regcache_destroy(rc);
}

static void test_refcount(void **state)
{
    fake_t *f = *state;
    regcache_t *rc = mk(f, 1, 0);
    regcache_entry_t *a1, *a2, *b, *c, *d;

    a1 = get_ok(rc, pg_addr(f, 0), 10);
    a2 = get_ok(rc, pg_addr(f, 0) + 20, 10);
    assert_ptr_equal(a1, a2);
    assert_int_equal(f->reg_calls, 1);

    /* A pinned twice: a new entry goes over the bound, nothing is evicted. */
    b = get_ok(rc, pg_addr(f, 4), 10);
    assert_int_equal(f->ndereg, 0);
    assert_int_equal(stats_of(rc).entries, 2);
    /* B unpinned while over the bound: it goes at once, A stays. */
    regcache_put(rc, b);
    assert_int_equal(f->ndereg, 1);
    assert_int_equal(f->dereg_order[0], 1);
    assert_int_equal(stats_of(rc).entries, 1);

    /* One put of two: A is still pinned. */
    regcache_put(rc, a1);
    c = get_ok(rc, pg_addr(f, 8), 10);
    regcache_put(rc, c);
    assert_int_equal(f->ndereg, 2);
    assert_int_equal(f->dereg_order[1], 2);
    assert_true(f->regs[0].live);

    /* Last put: A stays cached, unpinned, and hits. */
    regcache_put(rc, a2);
    assert_int_equal(f->ndereg, 2);
    assert_ptr_equal(touch(rc, pg_addr(f, 0), 1), a1);
    assert_int_equal(f->reg_calls, 3);

    /* Now A can be evicted. */
    d = get_ok(rc, pg_addr(f, 12), 10);
    assert_int_equal(f->ndereg, 3);
    assert_int_equal(f->dereg_order[2], 0);
    regcache_put(rc, d);
    /* A put too many on an unpinned entry changes nothing. */
    regcache_put(rc, d);
    assert_int_equal(f->ndereg, 3);
    assert_ptr_equal(touch(rc, pg_addr(f, 12), 1), d);
    assert_int_equal(f->reg_calls, 4);
    regcache_destroy(rc);
    assert_int_equal(f->ndereg, 4);
}

static void test_lru_by_entries(void **state)
{
    fake_t *f = *state;
    regcache_t *rc = mk(f, 3, 0);
    regcache_entry_t *a;
    regcache_stats_t st;

    a = touch(rc, pg_addr(f, 0), 1);                  /* reg 0 */
    touch(rc, pg_addr(f, 2), 1);                      /* reg 1: B */
    touch(rc, pg_addr(f, 4), 1);                      /* reg 2: C */
    assert_ptr_equal(touch(rc, pg_addr(f, 0), 1), a); /* A most recent: B, C, A */
    assert_int_equal(f->ndereg, 0);

    touch(rc, pg_addr(f, 6), 1); /* D: evicts B */
    assert_int_equal(f->ndereg, 1);
    assert_int_equal(f->dereg_order[0], 1);
    touch(rc, pg_addr(f, 8), 1); /* E: evicts C */
    assert_int_equal(f->ndereg, 2);
    assert_int_equal(f->dereg_order[1], 2);

    /* A survived both; B is registered anew (evicting D, the oldest now). */
    assert_ptr_equal(touch(rc, pg_addr(f, 0), 1), a);
    assert_int_equal(f->reg_calls, 5);
    touch(rc, pg_addr(f, 2), 1);
    assert_int_equal(f->reg_calls, 6);
    assert_int_equal(f->dereg_order[2], 3);

    st = stats_of(rc);
    assert_int_equal(st.evictions, 3);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.overflows, 0);
    regcache_destroy(rc);
}

static void test_lru_by_bytes(void **state)
{
    fake_t *f = *state;
    regcache_t *rc = mk(f, 100, 4 * f->page);
    regcache_entry_t *big;
    regcache_stats_t st;

    touch(rc, pg_addr(f, 0), f->page);     /* A: 1 page */
    touch(rc, pg_addr(f, 2), 2 * f->page); /* B: 2 pages */
    touch(rc, pg_addr(f, 5), f->page);     /* C: 1 page, 4 in all */
    touch(rc, pg_addr(f, 0), 1);           /* A most recent: B, C, A */
    assert_int_equal(f->ndereg, 0);
    assert_int_equal(stats_of(rc).bytes, 4 * f->page);

    touch(rc, pg_addr(f, 8), 2 * f->page); /* D: 6 pages, B goes */
    assert_int_equal(f->ndereg, 1);
    assert_int_equal(f->dereg_order[0], 1);
    assert_int_equal(stats_of(rc).bytes, 4 * f->page);
    touch(rc, pg_addr(f, 11), f->page); /* E: 5 pages, C goes */
    assert_int_equal(f->ndereg, 2);
    assert_int_equal(f->dereg_order[1], 2);

    st = stats_of(rc);
    assert_int_equal(st.bytes, 4 * f->page);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.evictions, 2);
    assert_int_equal(f->reg_calls, 5);
    /* A, D and E still hit. */
    touch(rc, pg_addr(f, 0), 1);
    touch(rc, pg_addr(f, 8), 2 * f->page);
    touch(rc, pg_addr(f, 11), 1);
    assert_int_equal(f->reg_calls, 5);

    /* One buffer larger than the bound: everything else goes, it is still
     * registered (over the bound), and goes itself once unpinned. */
    big = get_ok(rc, pg_addr(f, 20), 6 * f->page);
    st = stats_of(rc);
    assert_int_equal(st.entries, 1);
    assert_int_equal(st.bytes, 6 * f->page);
    assert_int_equal(st.evictions, 5);
    assert_int_equal(st.overflows, 1);
    assert_int_equal(f->live, 1);
    regcache_put(rc, big);
    st = stats_of(rc);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.bytes, 0);
    assert_int_equal(f->live, 0);
    regcache_destroy(rc);
}

static void test_pinned_not_evicted(void **state)
{
    fake_t *f = *state;
    regcache_t *rc = mk(f, 2, 0);
    regcache_entry_t *a, *b, *c;
    regcache_stats_t st;

    a = get_ok(rc, pg_addr(f, 0), 1);
    b = get_ok(rc, pg_addr(f, 2), 1);
    c = get_ok(rc, pg_addr(f, 4), 1);
    st = stats_of(rc);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.evictions, 0);
    assert_int_equal(st.overflows, 1);
    assert_int_equal(f->live, 3);
    assert_int_equal(f->ndereg, 0);

    /* The first unpinned entry while over the bound is evicted... */
    regcache_put(rc, a);
    assert_int_equal(f->ndereg, 1);
    assert_int_equal(f->dereg_order[0], 0);
    /* ... after that the cache is within its bound again. */
    regcache_put(rc, b);
    regcache_put(rc, c);
    assert_int_equal(f->ndereg, 1);
    st = stats_of(rc);
    assert_int_equal(st.entries, 2);
    assert_int_equal(st.evictions, 1);

    /* With B pinned again, D evicts C although B is older. */
    b = get_ok(rc, pg_addr(f, 2), 1);
    touch(rc, pg_addr(f, 6), 1);
    assert_int_equal(f->ndereg, 2);
    assert_int_equal(f->dereg_order[1], 2);
    assert_true(f->regs[1].live);
    regcache_put(rc, b);
    regcache_destroy(rc);
}

static void test_merge_overlap(void **state)
{
    fake_t *f = *state;
    regcache_t *rc = mk(f, 16, 0);
    regcache_entry_t *a, *m, *x, *y, *z;
    regcache_stats_t st;

    /* Unpinned A [0,2) and a miss on [1,3): one entry [0,3), A deregistered. */
    a = touch(rc, pg_addr(f, 0), 2 * f->page);
    m = touch(rc, pg_addr(f, 1), 2 * f->page);
    assert_ptr_not_equal(m, a);
    assert_int_equal(f->regs[1].addr, (uintptr_t)pg_addr(f, 0));
    assert_int_equal(f->regs[1].len, 3 * f->page);
    assert_int_equal(f->ndereg, 1);
    assert_int_equal(f->dereg_order[0], 0);
    assert_ptr_equal(touch(rc, pg_addr(f, 0), 1), m);
    st = stats_of(rc);
    assert_int_equal(st.entries, 1);
    assert_int_equal(st.bytes, 3 * f->page);

    /* Pinned X [10,11) and Y [12,13), then a miss on [10,13): the union is
     * registered, X and Y stay registered until put, and are not found again. */
    x = get_ok(rc, pg_addr(f, 10), 1);
    y = get_ok(rc, pg_addr(f, 12), 1);
    z = get_ok(rc, pg_addr(f, 10), 3 * f->page);
    assert_int_equal(rid(f, z), 4);
    assert_int_equal(f->regs[4].addr, (uintptr_t)pg_addr(f, 10));
    assert_int_equal(f->regs[4].len, 3 * f->page);
    assert_int_equal(f->ndereg, 1);
    assert_ptr_equal(touch(rc, pg_addr(f, 10), 1), z);
    assert_ptr_equal(touch(rc, pg_addr(f, 12), 1), z);
    st = stats_of(rc);
    assert_int_equal(st.entries, 2);
    assert_int_equal(st.bytes, 6 * f->page);
    regcache_put(rc, x);
    assert_int_equal(f->ndereg, 2);
    assert_int_equal(f->dereg_order[1], 2);
    regcache_put(rc, y);
    assert_int_equal(f->ndereg, 3);
    assert_int_equal(f->dereg_order[2], 3);
    regcache_put(rc, z);
    assert_int_equal(f->ndereg, 3);

    /* A miss that spans a gap merges the entries on both sides. */
    touch(rc, pg_addr(f, 20), 1);
    touch(rc, pg_addr(f, 22), 1);
    m = touch(rc, pg_addr(f, 21) - 1, f->page + 2);
    assert_ptr_equal(regcache_entry_addr(m), pg_addr(f, 20));
    assert_int_equal(regcache_entry_len(m), 3 * f->page);
    assert_int_equal(f->ndereg, 5);

    /* A miss overlapping only the head of an entry keeps its tail. */
    touch(rc, pg_addr(f, 30), 3 * f->page);
    m = touch(rc, pg_addr(f, 29), 2 * f->page);
    assert_ptr_equal(regcache_entry_addr(m), pg_addr(f, 29));
    assert_int_equal(regcache_entry_len(m), 4 * f->page);
    assert_ptr_equal(touch(rc, pg_addr(f, 32), 1), m);

    /* Merging is neither eviction nor invalidation. */
    st = stats_of(rc);
    assert_int_equal(st.evictions, 0);
    assert_int_equal(st.invalidations, 0);
    assert_int_equal(st.entries, 4);
    regcache_destroy(rc);
    assert_int_equal(f->live, 0);
}

static void test_invalidate_unpinned(void **state)
{
    fake_t *f = *state;
    regcache_t *rc = mk(f, 16, 0);
    regcache_entry_t *b2;
    regcache_stats_t st;

    touch(rc, pg_addr(f, 0), 1);           /* A [0,1)  reg 0 */
    touch(rc, pg_addr(f, 2), 2 * f->page); /* B [2,4)  reg 1 */
    touch(rc, pg_addr(f, 4), 1);           /* C [4,5)  reg 2 */
    touch(rc, pg_addr(f, 8), 1);           /* D [8,9)  reg 3 */

    /* Two bytes across the B/C boundary: both go, A and D stay. */
    regcache_invalidate(rc, pg_addr(f, 4) - 1, 2);
    assert_int_equal(f->ndereg, 2);
    assert_false(f->regs[1].live);
    assert_false(f->regs[2].live);
    st = stats_of(rc);
    assert_int_equal(st.invalidations, 2);
    assert_int_equal(st.entries, 2);
    assert_int_equal(st.bytes, 2 * f->page);

    /* Ranges that only touch an entry's edges drop nothing. */
    regcache_invalidate(rc, pg_addr(f, 1), f->page);
    regcache_invalidate(rc, pg_addr(f, 5), 3 * f->page);
    assert_int_equal(f->ndereg, 2);

    /* The last byte of D is enough. */
    regcache_invalidate(rc, pg_addr(f, 9) - 1, 1);
    assert_int_equal(f->ndereg, 3);
    assert_false(f->regs[3].live);

    /* B's address again: registered anew. */
    b2 = touch(rc, pg_addr(f, 2), 2 * f->page);
    assert_int_equal(f->reg_calls, 5);
    assert_int_equal(rid(f, b2), 4);
    assert_true(f->regs[0].live);
    assert_ptr_equal(regcache_entry_handle(touch(rc, pg_addr(f, 0), 1)), &f->regs[0]);

    /* A length reaching past the end of the address space drops the rest. */
    regcache_invalidate(rc, pg_addr(f, 0), SIZE_MAX);
    assert_int_equal(f->live, 0);
    st = stats_of(rc);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.bytes, 0);
    assert_int_equal(st.invalidations, 5);
    regcache_destroy(rc);
    assert_int_equal(f->ndereg, 5);
}

static void test_invalidate_pinned_realloc(void **state)
{
    fake_t *f = *state;
    regcache_t *rc = mk(f, 16, 0);
    char *buf = pg_addr(f, 0) + 16;
    regcache_entry_t *old, *fresh;
    regcache_stats_t st;

    /* A collective holds buf's registration while the application frees it. */
    old = get_ok(rc, buf, 100);
    regcache_invalidate(rc, pg_addr(f, 0), f->page);
    assert_int_equal(f->ndereg, 0); /* deferred: still in use */
    st = stats_of(rc);
    assert_int_equal(st.invalidations, 1);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.bytes, 0);

    /* malloc returns the same address: it must not get the stale entry. */
    fresh = get_ok(rc, buf, 100);
    assert_ptr_not_equal(fresh, old);
    assert_int_equal(f->reg_calls, 2);
    assert_int_equal(rid(f, fresh), 1);
    assert_ptr_equal(get_ok(rc, buf, 1), fresh);
    regcache_put(rc, fresh);

    /* Invalidating again does not count the already dropped entry. */
    regcache_invalidate(rc, pg_addr(f, 1), f->page);
    assert_int_equal(stats_of(rc).invalidations, 1);

    /* The old one goes at its last put, and only it. */
    regcache_put(rc, old);
    assert_int_equal(f->ndereg, 1);
    assert_int_equal(f->dereg_order[0], 0);
    assert_true(f->regs[1].live);
    regcache_put(rc, fresh);
    assert_int_equal(f->ndereg, 1);
    assert_ptr_equal(touch(rc, buf, 100), fresh);

    /* Same story with the entry unpinned: dropped at once, registered anew. */
    regcache_invalidate(rc, buf, 1);
    assert_int_equal(f->ndereg, 2);
    assert_int_equal(f->dereg_order[1], 1);
    assert_int_equal(rid(f, touch(rc, buf, 100)), 2);
    regcache_destroy(rc);
    assert_int_equal(f->ndereg, 3);
    assert_int_equal(f->live, 0);
}

static void test_reg_failure(void **state)
{
    fake_t *f = *state;
    regcache_t *rc = mk(f, 1, 0);
    regcache_entry_t *a, *e;
    regcache_stats_t before, after;

    a = touch(rc, pg_addr(f, 0), 2 * f->page);
    before = stats_of(rc);

    /* A miss that would evict A fails: A stays, stats do not move. */
    f->fail_count = 1;
    f->fail_status = ARCOLL_ERR_CHANNEL;
    e = (regcache_entry_t *)0x1;
    assert_int_equal(regcache_get(rc, pg_addr(f, 10), 1, &e), ARCOLL_ERR_CHANNEL);
    assert_ptr_equal(e, (regcache_entry_t *)0x1);
    assert_int_equal(f->ndereg, 0);
    after = stats_of(rc);
    assert_memory_equal(&before, &after, sizeof(before));

    /* A miss that would merge A fails: A stays. */
    f->fail_count = 1;
    f->fail_status = ARCOLL_ERR_NOMEM;
    assert_int_equal(regcache_get(rc, pg_addr(f, 1), 2 * f->page, &e), ARCOLL_ERR_NOMEM);
    assert_int_equal(f->ndereg, 0);
    after = stats_of(rc);
    assert_memory_equal(&before, &after, sizeof(before));

    /* Other negative statuses pass through; positive ones are channel errors. */
    f->fail_count = 2;
    f->fail_status = -42;
    assert_int_equal(regcache_get(rc, pg_addr(f, 10), 1, &e), -42);
    assert_int_equal(regcache_get(rc, pg_addr(f, 10), 1, &e), -42);
    f->fail_count = 1;
    f->fail_status = 5;
    assert_int_equal(regcache_get(rc, pg_addr(f, 10), 1, &e), ARCOLL_ERR_CHANNEL);
    assert_int_equal(f->reg_calls, 6);
    assert_int_equal(f->nreg, 1);

    /* A still hits, unchanged. */
    assert_ptr_equal(touch(rc, pg_addr(f, 1), 1), a);
    assert_ptr_equal(regcache_entry_handle(a), &f->regs[0]);

    /* A pinned entry overlapping a failed miss stays cached: its put keeps it. */
    a = get_ok(rc, pg_addr(f, 0), 1);
    f->fail_count = 1;
    f->fail_status = ARCOLL_ERR_CHANNEL;
    assert_int_equal(regcache_get(rc, pg_addr(f, 1), 2 * f->page, &e), ARCOLL_ERR_CHANNEL);
    regcache_put(rc, a);
    assert_int_equal(f->ndereg, 0);
    assert_ptr_equal(touch(rc, pg_addr(f, 0), 1), a);

    /* And the cache works normally afterwards. */
    e = touch(rc, pg_addr(f, 10), 1);
    assert_int_equal(rid(f, e), 1);
    assert_int_equal(f->ndereg, 1); /* A evicted, max_entries 1 */
    regcache_destroy(rc);
    assert_int_equal(f->live, 0);
}

static void test_destroy_deregs_once(void **state)
{
    fake_t *f = *state;
    regcache_t *rc;

    /* Empty cache. */
    rc = mk(f, 4, 0);
    regcache_destroy(rc);
    assert_int_equal(f->ndereg, 0);

    /* Every kind of entry: cached unpinned, cached pinned, pinned and
     * invalidated, pinned and merged away, already evicted. */
    rc = mk(f, 4, 0);
    touch(rc, pg_addr(f, 0), 1);        /* reg 0: cached */
    (void)get_ok(rc, pg_addr(f, 2), 1); /* reg 1: pinned */
    (void)get_ok(rc, pg_addr(f, 4), 1); /* reg 2: pinned, invalidated */
    regcache_invalidate(rc, pg_addr(f, 4), 1);
    (void)get_ok(rc, pg_addr(f, 6), 1);           /* reg 3: pinned, merged into reg 4 */
    (void)get_ok(rc, pg_addr(f, 6), 2 * f->page); /* reg 4: pinned */
    touch(rc, pg_addr(f, 10), 1);                 /* reg 5 */
    touch(rc, pg_addr(f, 12), 1);                 /* reg 6: evicts reg 0 */
    assert_int_equal(f->nreg, 7);
    assert_int_equal(f->ndereg, 1);
    assert_int_equal(f->dereg_order[0], 0);

    regcache_destroy(rc); /* the fake fails on a double dereg */
    assert_int_equal(f->ndereg, 7);
    assert_int_equal(f->live, 0);
    for (size_t i = 0; i < f->nreg; i++)
        assert_false(f->regs[i].live);
}

static void test_stats(void **state)
{
    fake_t *f = *state;
    regcache_t *rc = mk(f, 2, 0);
    regcache_entry_t *p, *q[3];
    regcache_stats_t st;

    st = stats_of(rc);
    assert_int_equal(st.hits, 0);
    assert_int_equal(st.misses, 0);
    assert_int_equal(st.evictions, 0);
    assert_int_equal(st.invalidations, 0);
    assert_int_equal(st.overflows, 0);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.bytes, 0);

    touch(rc, pg_addr(f, 0), 1);           /* miss */
    touch(rc, pg_addr(f, 0), 1);           /* hit */
    touch(rc, pg_addr(f, 2), 3 * f->page); /* miss */
    touch(rc, pg_addr(f, 3), 1);           /* hit */
    touch(rc, pg_addr(f, 8), 1);           /* miss, evicts [0,1) */
    p = get_ok(rc, pg_addr(f, 8), 1);      /* hit, stays pinned */
    touch(rc, pg_addr(f, 20), 1);          /* miss, evicts [2,5) */
    touch(rc, pg_addr(f, 22), 1);          /* miss, evicts [20,21), not p */
    st = stats_of(rc);
    assert_int_equal(st.hits, 3);
    assert_int_equal(st.misses, 5);
    assert_int_equal(st.evictions, 3);
    assert_int_equal(st.invalidations, 0);
    assert_int_equal(st.entries, 2);
    assert_int_equal(st.bytes, 2 * f->page);

    regcache_invalidate(rc, pg_addr(f, 0), 23 * f->page); /* p and [22,23) */
    st = stats_of(rc);
    assert_int_equal(st.invalidations, 2);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.bytes, 0);
    regcache_put(rc, p);

    touch(rc, pg_addr(f, 30), 2 * f->page); /* miss */
    q[0] = get_ok(rc, pg_addr(f, 40), 1);   /* miss */
    q[1] = get_ok(rc, pg_addr(f, 42), 1);   /* miss, evicts [30,32) */
    q[2] = get_ok(rc, pg_addr(f, 44), 1);   /* miss, over the bound */
    st = stats_of(rc);
    assert_int_equal(st.hits, 3);
    assert_int_equal(st.misses, 9);
    assert_int_equal(st.evictions, 4);
    assert_int_equal(st.invalidations, 2);
    assert_int_equal(st.overflows, 1);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.bytes, 3 * f->page);
    for (int i = 0; i < 3; i++)
        regcache_put(rc, q[i]); /* q[0] goes: back within the bound */
    st = stats_of(rc);
    assert_int_equal(st.evictions, 5);
    assert_int_equal(st.overflows, 1);
    assert_int_equal(st.entries, 2);
    regcache_destroy(rc);

    /* A NULL cache reads as empty. */
    memset(&st, 0xff, sizeof(st));
    regcache_stats(NULL, &st);
    assert_int_equal(st.hits, 0);
    assert_int_equal(st.entries, 0);
}

static void test_default_bound(void **state)
{
    fake_t *f = *state;
    regcache_t *rc = mk(f, 0, 0);
    regcache_stats_t st;

    for (size_t i = 0; i <= REGCACHE_DEFAULT_MAX_ENTRIES; i++)
        touch(rc, pg_addr(f, 2 * i), 1);
    st = stats_of(rc);
    assert_int_equal(st.entries, REGCACHE_DEFAULT_MAX_ENTRIES);
    assert_int_equal(st.evictions, 1);
    assert_int_equal(f->dereg_order[0], 0);
    /* No byte bound by default. */
    touch(rc, pg_addr(f, 4000), 1u << 30);
    assert_int_equal(stats_of(rc).evictions, 2);
    regcache_destroy(rc);
}

/* Deterministic generator so failures reproduce. */
static uint64_t rng_next(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

static void test_many_entries(void **state)
{
    fake_t *f = *state;
    enum { N = 1000 };
    regcache_t *rc = mk(f, 2 * N, 0);
    size_t order[N];
    size_t reg_of[N];
    uint64_t seed = 12345;

    /* Entries on even pages, inserted in shuffled order. */
    for (size_t i = 0; i < N; i++)
        order[i] = i;
    for (size_t i = N - 1; i > 0; i--) {
        size_t j = (size_t)(rng_next(&seed) % (i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < N; i++) {
        regcache_entry_t *e = touch(rc, pg_addr(f, 2 * order[i]) + 3, 5);
        reg_of[order[i]] = rid(f, e);
    }
    assert_int_equal(f->nreg, N);
    for (size_t k = 0; k < N; k++) {
        regcache_entry_t *e = touch(rc, pg_addr(f, 2 * k) + f->page / 2, 1);
        assert_int_equal(rid(f, e), reg_of[k]);
        assert_ptr_equal(regcache_entry_addr(e), pg_addr(f, 2 * k));
    }
    assert_int_equal(f->nreg, N);

    /* Drop every third one; the rest still hit the right entry. */
    for (size_t k = 0; k < N; k += 3)
        regcache_invalidate(rc, pg_addr(f, 2 * k), 1);
    assert_int_equal(stats_of(rc).entries, N - (N + 2) / 3);
    for (size_t k = 0; k < N; k++) {
        size_t before = f->nreg;
        regcache_entry_t *e = touch(rc, pg_addr(f, 2 * k), 1);
        if (k % 3 == 0) {
            assert_int_equal(f->nreg, before + 1);
        } else {
            assert_int_equal(f->nreg, before);
            assert_int_equal(rid(f, e), reg_of[k]);
        }
    }
    regcache_destroy(rc);
    assert_int_equal(f->live, 0);
}

/* Random gets, puts, invalidations and reg failures checked against what must
 * hold: a get returns a live registration covering the range, never one made
 * before an invalidation it overlaps; the bounds hold once nothing is pinned;
 * nothing is deregistered twice or leaked. */
static void test_random(void **state)
{
    fake_t *f = *state;
    enum { SPACE = 64, MAXE = 8, MAXP = 24, OPS = 20000, OUT = 12, MAXINV = 8192 };
    regcache_t *rc = mk(f, MAXE, MAXP * f->page);
    regcache_entry_t *out[OUT];
    size_t nout = 0, ninv = 0;
    struct {
        uintptr_t a, b;
        size_t nreg; /* registrations made before it */
    } *inv = calloc(MAXINV, sizeof(*inv));
    uint64_t seed = 42;

    assert_non_null(inv);
    for (int op = 0; op < OPS; op++) {
        unsigned r = (unsigned)(rng_next(&seed) % 100);
        uintptr_t a = (uintptr_t)pg_addr(f, 0) + rng_next(&seed) % (SPACE * f->page);
        size_t len = 1 + (size_t)(rng_next(&seed) % (4 * f->page));

        if (r < 45 && nout < OUT) {
            regcache_stats_t before = stats_of(rc), after;
            size_t live = f->live;
            regcache_entry_t *e = NULL;
            int fail = rng_next(&seed) % 20 == 0;

            f->fail_count = fail;
            f->fail_status = ARCOLL_ERR_CHANNEL;
            if (regcache_get(rc, (void *)a, len, &e) != ARCOLL_OK) {
                assert_true(fail);
                assert_int_equal(f->live, live);
                after = stats_of(rc);
                assert_memory_equal(&before, &after, sizeof(before));
                continue;
            }
            f->fail_count = 0;
            fake_reg_t *g = regcache_entry_handle(e);
            size_t id = rid(f, e);
            assert_true(g->live);
            assert_int_equal(g->addr, (uintptr_t)regcache_entry_addr(e));
            assert_int_equal(g->len, regcache_entry_len(e));
            assert_true(g->addr <= a && a + len <= g->addr + g->len);
            for (size_t k = 0; k < ninv; k++)
                if (id < inv[k].nreg && g->addr < inv[k].b && inv[k].a < g->addr + g->len)
                    fail_msg("op %d: registration %zu returned after invalidation %zu", op, id, k);
            out[nout++] = e;
        } else if (r < 80 && nout > 0) {
            size_t k = (size_t)(rng_next(&seed) % nout);
            regcache_put(rc, out[k]);
            out[k] = out[--nout];
        } else if (r >= 80 && ninv < MAXINV) {
            regcache_invalidate(rc, (void *)a, len);
            inv[ninv].a = a;
            inv[ninv].b = a + len;
            inv[ninv].nreg = f->nreg;
            ninv++;
        }

        regcache_stats_t st = stats_of(rc);
        assert_true(st.entries <= f->live);
        if (nout == 0) {
            size_t bytes = 0;
            for (size_t i = 0; i < f->nreg; i++)
                bytes += f->regs[i].live ? f->regs[i].len : 0;
            assert_int_equal(st.entries, f->live);
            assert_int_equal(st.bytes, bytes);
            assert_true(st.entries <= MAXE);
            assert_true(st.bytes <= MAXP * f->page);
        }
    }
    while (nout > 0)
        regcache_put(rc, out[--nout]);
    assert_true(stats_of(rc).hits > 0);
    assert_true(stats_of(rc).evictions > 0);
    regcache_destroy(rc);
    assert_int_equal(f->live, 0);
    assert_int_equal(f->ndereg, f->nreg);
    free(inv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bad_args, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hit_miss_rounding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_containment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refcount, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lru_by_entries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lru_by_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pinned_not_evicted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge_overlap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalidate_unpinned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalidate_pinned_realloc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reg_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_deregs_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stats, setup, teardown),
        cmocka_unit_test_setup_teardown(test_default_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_entries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random, setup, teardown),
    };

    return cmocka_run_group_tests_name("regcache", tests, NULL, NULL);
}
