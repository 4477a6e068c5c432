/* Unit tests of src/mem/heapmr.c: the one MR over a doubling prefix of the
 * heap slot, over fake reg/dereg callbacks that record every registration
 * (start, length, live) and can be told to fail. Addresses are made up and
 * never dereferenced. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "arcoll.h"
#include "mem/heapmr.h"

#define MIB      ((size_t)1 << 20)
#define BASE     ((uintptr_t)0x200000000000ULL)
#define SLOT     ((size_t)1 << 30)
#define NREG_MAX 64

typedef struct mr {
    uintptr_t addr;
    size_t len;
    int live;
} mr_t;

typedef struct fake {
    mr_t regs[NREG_MAX]; /* successful registrations, in order */
    size_t nreg, calls, live, deregs;
    int fail; /* fail the next reg call with this status (0: succeed) */
} fake_t;

static int fake_reg(void *arg, void *addr, size_t len, void **handle)
{
    fake_t *f = arg;
    mr_t *m;

    f->calls++;
    if (f->fail != 0) {
        int st = f->fail;
        f->fail = 0;
        *handle = (void *)0x1; /* garbage heapmr must not keep */
        return st;
    }
    assert_true(f->nreg < NREG_MAX);
    m = &f->regs[f->nreg++];
    *m = (mr_t){(uintptr_t)addr, len, 1};
    f->live++;
    *handle = m;
    return 0;
}

static void fake_dereg(void *arg, void *handle)
{
    fake_t *f = arg;
    mr_t *m = handle;

    if (m < f->regs || m >= f->regs + f->nreg)
        fail_msg("dereg of a handle reg never returned: %p", handle);
    if (!m->live)
        fail_msg("registration %zu deregistered twice", (size_t)(m - f->regs));
    m->live = 0;
    f->live--;
    f->deregs++;
}

static heapmr_t *mk(fake_t *f, size_t slot, size_t min)
{
    regcache_ops_t ops = {.reg = fake_reg, .dereg = fake_dereg, .arg = f};
    heapmr_t *h = NULL;

    memset(f, 0, sizeof(*f));
    assert_int_equal(heapmr_create(&ops, (void *)BASE, slot, min, &h), ARCOLL_OK);
    return h;
}

/* destroy leaves nothing registered. */
static void destroy_all(heapmr_t *h, fake_t *f)
{
    heapmr_destroy(h);
    assert_int_equal(f->live, 0);
}

static void *at(size_t off)
{
    return (void *)(BASE + off);
}

/* A get that must be served by registration idx, covering [BASE, BASE + top). */
static heapmr_mr_t *get_ok(heapmr_t *h, fake_t *f, size_t off, size_t len, size_t used, size_t idx,
                           size_t top)
{
    heapmr_mr_t *m = NULL;
    mr_t *r;

    assert_int_equal(heapmr_get(h, at(off), len, used, &m), ARCOLL_OK);
    assert_non_null(m);
    r = heapmr_handle(m);
    assert_ptr_equal(r, &f->regs[idx]);
    assert_int_equal(r->addr, BASE);
    assert_int_equal(r->len, top);
    assert_true(r->live);
    return m;
}

static void test_growth(void **state)
{
    fake_t f;
    heapmr_t *h = mk(&f, SLOT, 64 * MIB);
    heapmr_stats_t st;
    heapmr_mr_t *m;

    (void)state;
    /* First buffer: the minimum prefix, whatever the buffer's size. */
    heapmr_put(h, get_ok(h, &f, 0, 1, 4096, 0, 64 * MIB));
    /* Up to the boundary: no registration. */
    heapmr_put(h, get_ok(h, &f, 64 * MIB - 100, 100, 64 * MIB, 0, 64 * MIB));
    heapmr_put(h, get_ok(h, &f, 0, 64 * MIB, 64 * MIB, 0, 64 * MIB));
    assert_int_equal(f.calls, 1);
    /* One byte past it: the doubled prefix replaces the old MR at once (unheld). */
    heapmr_put(h, get_ok(h, &f, 64 * MIB - 1, 2, 64 * MIB + 4096, 1, 128 * MIB));
    assert_int_equal(f.live, 1);
    assert_false(f.regs[0].live);
    /* A buffer below top never grows it, however much the heap has handed out. */
    heapmr_put(h, get_ok(h, &f, 4096, 4096, 900 * MIB, 1, 128 * MIB));
    /* Growth covers the used part, not just the buffer: 128 -> 512 in one step. */
    heapmr_put(h, get_ok(h, &f, 128 * MIB, 1, 300 * MIB, 2, 512 * MIB));
    /* The last byte of the slot: the whole slot, then nothing more. */
    heapmr_put(h, get_ok(h, &f, SLOT - 1, 1, SLOT, 3, SLOT));
    heapmr_put(h, get_ok(h, &f, 0, SLOT, SLOT, 3, SLOT));
    heapmr_stats(h, &st);
    assert_int_equal(st.regs, 4);
    assert_int_equal(st.deregs, 3);
    assert_int_equal(st.hits, 8);
    assert_int_equal(st.top, SLOT);
    assert_int_equal(st.bytes, SLOT);
    assert_int_equal(st.failed, 0);
    assert_int_equal(f.calls, 4);
    /* Outside the slot, straddling its end, empty: not served, nothing registered. */
    assert_int_equal(heapmr_get(h, (void *)(BASE - 1), 1, 0, &m), HEAPMR_SKIP);
    assert_int_equal(heapmr_get(h, (void *)(BASE - 1), 2, 0, &m), HEAPMR_SKIP);
    assert_int_equal(heapmr_get(h, at(SLOT - 1), 2, 0, &m), HEAPMR_SKIP);
    assert_int_equal(heapmr_get(h, at(SLOT), 1, 0, &m), HEAPMR_SKIP);
    assert_int_equal(heapmr_get(h, at(0), 0, 0, &m), HEAPMR_SKIP);
    assert_int_equal(heapmr_get(h, (void *)UINTPTR_MAX, 1, 0, &m), HEAPMR_SKIP);
    assert_int_equal(f.calls, 4);
    destroy_all(h, &f);
}

/* Doubling step by step from 64 MiB: log2(1 GiB / 64 MiB) + 1 = 5 registrations,
 * pinning less than twice the final prefix in all. */
static void test_doubling_count(void **state)
{
    fake_t f;
    heapmr_t *h = mk(&f, SLOT, 64 * MIB);
    size_t pinned = 0;

    (void)state;
    for (size_t used = 1 * MIB; used <= SLOT; used += 1 * MIB) {
        heapmr_mr_t *m = NULL;
        assert_int_equal(heapmr_get(h, at(used - 4096), 4096, used, &m), ARCOLL_OK);
        heapmr_put(h, m);
    }
    assert_int_equal(f.nreg, 5);
    for (size_t i = 0; i < f.nreg; i++) {
        assert_int_equal(f.regs[i].len, (64 * MIB) << i);
        pinned += f.regs[i].len;
    }
    assert_true(pinned < 2 * SLOT);
    destroy_all(h, &f);
}

/* An old MR that a call still holds stays registered until its last put. */
static void test_old_held(void **state)
{
    fake_t f;
    heapmr_t *h = mk(&f, SLOT, 64 * MIB);
    heapmr_mr_t *a = get_ok(h, &f, 0, 4096, 4096, 0, 64 * MIB);
    heapmr_mr_t *a2 = get_ok(h, &f, 8192, 4096, 4096, 0, 64 * MIB);
    heapmr_mr_t *b, *c;
    heapmr_stats_t st;

    (void)state;
    b = get_ok(h, &f, 100 * MIB, 4096, 101 * MIB, 1, 128 * MIB);
    assert_int_equal(f.live, 2);
    heapmr_stats(h, &st);
    assert_int_equal(st.bytes, 192 * MIB); /* both are registered now */
    assert_int_equal(st.top, 128 * MIB);
    heapmr_put(h, a);
    assert_true(f.regs[0].live); /* a2 still holds it */
    /* Another growth while both old ones are held. */
    c = get_ok(h, &f, 200 * MIB, 4096, 201 * MIB, 2, 256 * MIB);
    assert_int_equal(f.live, 3);
    heapmr_put(h, a2);
    assert_false(f.regs[0].live);
    heapmr_put(h, b);
    assert_false(f.regs[1].live);
    /* The current one stays after its last put. */
    heapmr_put(h, c);
    assert_true(f.regs[2].live);
    assert_int_equal(f.live, 1);
    heapmr_put(h, c); /* an extra put is ignored */
    assert_true(f.regs[2].live);
    heapmr_stats(h, &st);
    assert_int_equal(st.bytes, 256 * MIB);
    assert_int_equal(st.deregs, 2);
    destroy_all(h, &f);
}

/* A failed registration is reported once; then every get skips, the old MR
 * goes at its last put, and nothing is registered again. */
static void test_fail_falls_back(void **state)
{
    fake_t f;
    heapmr_t *h = mk(&f, SLOT, 64 * MIB);
    heapmr_mr_t *a = get_ok(h, &f, 0, 4096, 4096, 0, 64 * MIB), *m = NULL;
    heapmr_stats_t st;

    (void)state;
    f.fail = ARCOLL_ERR_NOMEM;
    assert_int_equal(heapmr_get(h, at(64 * MIB), 4096, 65 * MIB, &m), ARCOLL_ERR_NOMEM);
    assert_null(m);
    assert_true(f.regs[0].live); /* a holds it */
    /* Even a range the old MR covers goes to the other path now. */
    assert_int_equal(heapmr_get(h, at(0), 4096, 65 * MIB, &m), HEAPMR_SKIP);
    assert_int_equal(heapmr_get(h, at(64 * MIB), 4096, 65 * MIB, &m), HEAPMR_SKIP);
    heapmr_put(h, a);
    assert_false(f.regs[0].live);
    assert_int_equal(f.calls, 2);
    heapmr_stats(h, &st);
    assert_int_equal(st.failed, 1);
    assert_int_equal(st.regs, 1);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.top, 0);
    assert_int_equal(st.bytes, 0);
    destroy_all(h, &f);

    /* The very first registration failing; a positive status is a channel error. */
    h = mk(&f, SLOT, 64 * MIB);
    f.fail = 5;
    assert_int_equal(heapmr_get(h, at(0), 1, 1, &m), ARCOLL_ERR_CHANNEL);
    assert_int_equal(heapmr_get(h, at(0), 1, 1, &m), HEAPMR_SKIP);
    assert_int_equal(f.calls, 1);
    destroy_all(h, &f);
}

/* On-demand paging: min = the slot, one registration over all of it. A slot
 * that is not a power of two caps the prefix at its end. */
static void test_odp_and_odd_slot(void **state)
{
    fake_t f;
    heapmr_t *h = mk(&f, SLOT, SLOT);
    size_t odd = 768 * MIB;

    (void)state;
    heapmr_put(h, get_ok(h, &f, 0, 1, 4096, 0, SLOT));
    heapmr_put(h, get_ok(h, &f, SLOT - 4096, 4096, SLOT, 0, SLOT));
    assert_int_equal(f.calls, 1);
    destroy_all(h, &f);

    h = mk(&f, odd, 64 * MIB);
    heapmr_put(h, get_ok(h, &f, 600 * MIB, 1, 600 * MIB, 0, odd));
    heapmr_destroy(h);
    /* min is rounded up to a power of two. */
    h = mk(&f, SLOT, 3 * MIB);
    heapmr_put(h, get_ok(h, &f, 0, 1, 1, 0, 4 * MIB));
    heapmr_put(h, get_ok(h, &f, 5 * MIB, 1, 5 * MIB, 1, 8 * MIB));
    destroy_all(h, &f);
}

/* destroy deregisters held MRs too, each exactly once (fake_dereg checks). */
static void test_destroy_held(void **state)
{
    fake_t f;
    heapmr_t *h = mk(&f, SLOT, 64 * MIB);
    regcache_ops_t ops = {.reg = fake_reg, .dereg = fake_dereg, .arg = &f}, bad = {0};
    heapmr_t *x = NULL;

    (void)state;
    get_ok(h, &f, 0, 1, 1, 0, 64 * MIB);
    get_ok(h, &f, 64 * MIB, 1, 1, 1, 128 * MIB);
    assert_int_equal(f.live, 2);
    destroy_all(h, &f);
    assert_int_equal(f.deregs, 2);
    heapmr_destroy(NULL);
    heapmr_put(NULL, NULL);
    /* Bad arguments. */
    assert_int_equal(heapmr_create(&bad, (void *)BASE, SLOT, 0, &x), ARCOLL_ERR_INVALID);
    assert_int_equal(heapmr_create(&ops, NULL, SLOT, 0, &x), ARCOLL_ERR_INVALID);
    assert_int_equal(heapmr_create(&ops, (void *)(BASE + 1), SLOT, 0, &x), ARCOLL_ERR_INVALID);
    assert_int_equal(heapmr_create(&ops, (void *)BASE, 0, 0, &x), ARCOLL_ERR_INVALID);
    assert_int_equal(heapmr_create(&ops, (void *)BASE, SLOT + 1, 0, &x), ARCOLL_ERR_INVALID);
    assert_null(x);
}

/* A revoked MR serves no further get: the next one registers a new MR over
 * the same prefix; the revoked one goes at its last put, also when other
 * calls still held it. */
static void test_revoke(void **state)
{
    fake_t f;
    heapmr_t *h = mk(&f, SLOT, 64 * MIB);
    heapmr_mr_t *a = get_ok(h, &f, 0, 4096, 4096, 0, 64 * MIB);
    heapmr_mr_t *a2 = get_ok(h, &f, 8192, 4096, 4096, 0, 64 * MIB);
    heapmr_mr_t *b;
    heapmr_stats_t st;

    (void)state;
    heapmr_revoke(h, a);
    heapmr_stats(h, &st);
    assert_int_equal(st.revoked, 1);
    assert_true(f.regs[0].live);                      /* held by a and a2 */
    b = get_ok(h, &f, 4096, 4096, 8192, 1, 64 * MIB); /* a new key, same prefix */
    heapmr_put(h, a);
    assert_true(f.regs[0].live);
    heapmr_put(h, a2);
    assert_false(f.regs[0].live);
    heapmr_revoke(h, b); /* revoking an MR that is not current retires nothing else */
    heapmr_revoke(h, b);
    heapmr_put(h, b);
    assert_int_equal(f.live, 0);
    get_ok(h, &f, 0, 4096, 4096, 2, 64 * MIB);
    destroy_all(h, &f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_growth),           cmocka_unit_test(test_doubling_count),
        cmocka_unit_test(test_old_held),         cmocka_unit_test(test_fail_falls_back),
        cmocka_unit_test(test_odp_and_odd_slot), cmocka_unit_test(test_destroy_held),
        cmocka_unit_test(test_revoke),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
