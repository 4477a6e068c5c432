/* Unit tests of src/engine/wire.h: the 64-bit words peers poll and the layout
 * of a team region. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/wire.h"

/* ---- fragment words ---------------------------------------------------- */

/* clang-format off */
static const uint64_t test_epochs[] = {
    0, 1, 2, 3, 255, 256, 0xfffffffeULL, 0xffffffffULL, 0x100000000ULL, 0x100000001ULL,
    0x123456789abcULL, UINT64_MAX - 1, UINT64_MAX,
};
/* clang-format on */
#define N_EPOCHS (sizeof(test_epochs) / sizeof(test_epochs[0]))

/* Every fragment index the protocol can put on the wire: data fragments are
 * below WIRE_FRAG_REJECT (coll_start refuses more), plus the reject credit. */
/* clang-format off */
static const uint32_t test_frags[] = {
    0, 1, 2, 63, 64, 0xffff, 0x10000, 0x7fffffff, 0x80000000U, WIRE_FRAG_REJECT - 1,
    WIRE_FRAG_REJECT,
};
/* clang-format on */
#define N_FRAGS (sizeof(test_frags) / sizeof(test_frags[0]))

static void test_frag_word_never_zero(void **state)
{
    (void)state;
    for (size_t e = 0; e < N_EPOCHS; e++)
        for (size_t f = 0; f < N_FRAGS; f++)
            assert_int_not_equal(wire_frag_word(test_epochs[e], test_frags[f]), 0);
    /* The low half carries frag + 1; the high half the epoch. */
    assert_int_equal(wire_frag_word(0, 0), 1);
    assert_int_equal(wire_frag_word(1, 0), 0x100000001ULL);
    assert_int_equal(wire_frag_word(7, 4), 0x700000005ULL);
    assert_int_equal(wire_frag_word(2, WIRE_FRAG_REJECT), 0x2ffffffffULL);
}

static void test_frag_word_distinct(void **state)
{
    (void)state;
    /* Epochs that differ in their low 32 bits: all words distinct. */
    static const uint64_t epochs[] = {0, 1, 2, 3, 0xfffffffe, 0xffffffff, 0x12345678};
    enum { NE = sizeof(epochs) / sizeof(epochs[0]) };
    uint64_t words[NE * N_FRAGS];
    size_t n = 0;

    for (size_t e = 0; e < NE; e++)
        for (size_t f = 0; f < N_FRAGS; f++)
            words[n++] = wire_frag_word(epochs[e], test_frags[f]);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            assert_int_not_equal(words[i], words[j]);

    /* Neighbouring epochs never share a word for the same or the next fragment:
     * a slot left over from the previous epoch cannot pass for the current one. */
    for (size_t e = 0; e < N_EPOCHS; e++) {
        uint64_t ep = test_epochs[e];
        for (size_t f = 0; f < N_FRAGS; f++) {
            uint32_t k = test_frags[f];
            assert_int_not_equal(wire_frag_word(ep, k), wire_frag_word(ep + 1, k));
            assert_int_not_equal(wire_frag_word(ep, k), wire_frag_word(ep - 1, k));
            assert_int_not_equal(wire_frag_word(ep, k), wire_frag_word(ep - 2, k));
            if (k < WIRE_FRAG_REJECT)
                assert_int_not_equal(wire_frag_word(ep, k), wire_frag_word(ep, k + 1));
        }
    }
}

static void test_frag_word_epoch_wrap(void **state)
{
    (void)state;
    /* As implemented, only the low 32 bits of the epoch reach the word: epochs
     * 2^32 apart alias, and 2^32 - 1 -> 2^32 wraps the epoch field to 0. */
    assert_int_equal(wire_frag_word(0x100000000ULL, 0), wire_frag_word(0, 0));
    assert_int_equal(wire_frag_word(0x100000005ULL, 9), wire_frag_word(5, 9));
    assert_int_equal(wire_frag_word(0xffffffffULL, 0), 0xffffffff00000001ULL);
    assert_int_equal(wire_frag_word(0x100000000ULL, 0), 1);
    /* Even there, consecutive epochs still differ (the case the two banks need). */
    assert_int_not_equal(wire_frag_word(0xffffffffULL, 3), wire_frag_word(0x100000000ULL, 3));
    assert_int_not_equal(wire_frag_word(UINT64_MAX, 0), wire_frag_word(0, 0));
}

/* ---- done words -------------------------------------------------------- */

static void test_done_word_roundtrip(void **state)
{
    (void)state;
    for (size_t e = 0; e < N_EPOCHS; e++) {
        uint64_t ep = test_epochs[e];
        for (unsigned st = 0; st < 128; st++) {
            uint64_t w = wire_done_word(ep, st);
            assert_int_not_equal(w, 0);
            assert_true(wire_done_epoch_match(w, ep));
            assert_int_equal(wire_done_status(w), st);
        }
        assert_int_equal(wire_done_status(wire_done_word(ep, WIRE_ST_OK)), WIRE_ST_OK);
        assert_int_equal(wire_done_status(wire_done_word(ep, WIRE_ST_MISMATCH)), WIRE_ST_MISMATCH);
    }
    /* Status is a 7-bit field: larger values are masked, never spill into the
     * epoch. */
    assert_int_equal(wire_done_status(wire_done_word(9, 0x80 | WIRE_ST_MISMATCH)),
                     WIRE_ST_MISMATCH);
    assert_true(wire_done_epoch_match(wire_done_word(9, 0xffffffffU), 9));
    assert_int_equal(wire_done_word(1, WIRE_ST_OK), 0x101);
    assert_int_equal(wire_done_word(1, WIRE_ST_MISMATCH), 0x103);
}

static void test_done_word_other_epoch(void **state)
{
    (void)state;
    for (size_t e = 0; e < N_EPOCHS; e++) {
        uint64_t ep = test_epochs[e];
        for (unsigned st = 0; st < 2; st++) {
            uint64_t w = wire_done_word(ep, st);
            assert_false(wire_done_epoch_match(w, ep + 1));
            assert_false(wire_done_epoch_match(w, ep - 1));
            assert_false(wire_done_epoch_match(w, ep + 2));
        }
    }
    /* Fresh memory (0) matches no epoch the engine uses (epochs start at 1). */
    for (uint64_t ep = 1; ep < 1000; ep++)
        assert_false(wire_done_epoch_match(0, ep));
    /* The epoch field is 56 bits wide: epochs 2^56 apart alias, as implemented. */
    assert_true(wire_done_epoch_match(wire_done_word(3, 0), 3 + (1ULL << 56)));
    assert_true(wire_done_epoch_match(wire_done_word((1ULL << 56) - 1, 0), UINT64_MAX));
}

/* ---- banks ------------------------------------------------------------- */

static void test_bank_parity(void **state)
{
    (void)state;
    assert_int_equal(WIRE_BANKS, 2 * ARCOLL_MAX_INFLIGHT);
    assert_int_equal(wire_bank(0, WIRE_BANKS), 0);
    assert_int_equal(wire_bank(1, WIRE_BANKS), 1);
    assert_int_equal(wire_bank(WIRE_BANKS, WIRE_BANKS), 0);
    assert_int_equal(wire_bank(UINT64_MAX, WIRE_BANKS), UINT64_MAX % WIRE_BANKS);
    for (uint64_t ep = 1; ep < 1000; ep++) {
        assert_true(wire_bank(ep, WIRE_BANKS) < WIRE_BANKS);
        assert_int_equal(wire_bank(ep, WIRE_BANKS), ep % WIRE_BANKS);
        /* Calls less than WIRE_BANKS apart never share a bank (docs/protocol.md §5). */
        for (uint64_t d = 1; d < WIRE_BANKS; d++)
            assert_int_not_equal(wire_bank(ep, WIRE_BANKS), wire_bank(ep + d, WIRE_BANKS));
        assert_int_equal(wire_bank(ep, WIRE_BANKS), wire_bank(ep + WIRE_BANKS, WIRE_BANKS));
    }
    for (size_t e = 0; e < N_EPOCHS; e++)
        assert_int_not_equal(wire_bank(test_epochs[e], WIRE_BANKS),
                             wire_bank(test_epochs[e] + 1, WIRE_BANKS));
}

static void test_struct_shapes(void **state)
{
    (void)state;
    assert_int_equal(sizeof(wire_ctrl_t), WIRE_LINE);
    assert_int_equal(offsetof(wire_ctrl_t, flag), 0);
    assert_true(sizeof(wire_slot_hdr_t) <= WIRE_LINE);
    assert_int_equal(offsetof(wire_slot_hdr_t, flag), 0);
}

/* ---- layout ------------------------------------------------------------ */

typedef struct span {
    uint64_t start, len;
    const char *what;
} span_t;

static int span_cmp(const void *a, const void *b)
{
    const span_t *x = a, *y = b;

    return x->start < y->start ? -1 : x->start > y->start;
}

/* Every entry of the region: aligned, inside total, and pairwise disjoint
 * (so on distinct cache lines, since all are multiples of 64). */
static void check_layout(uint32_t n, uint64_t bounce, uint64_t pipe_window)
{
    wire_layout_t l;
    size_t cnt = 0, max;
    uint64_t fit = WIRE_REGION_BUDGET / ((uint64_t)n * WIRE_BANKS);
    span_t *s;

    memset(&l, 0xa5, sizeof(l));
    assert_int_equal(wire_layout_init(&l, n, bounce, WIRE_BANKS, WIRE_LANES, pipe_window), 0);
    max = 1 + (size_t)n * (4 * WIRE_BANKS + 1) + (size_t)l.pipes * WIRE_BANKS;
    /* Pipe lanes: the window (two slot lanes at least) beyond the slot's
     * lanes, in lanes of the slot's lane size up to WIRE_LANE_MIN, within the
     * budget; no entries without lanes. */
    if (pipe_window == 0 || n < 2) {
        assert_int_equal(l.pipes, 0);
    } else if (l.pipes > 0) {
        uint64_t win = pipe_window > 2 * l.frag ? pipe_window : 2 * l.frag;
        uint64_t want = win - l.lanes * l.frag, entry;
        assert_int_equal(l.pipes, wire_pipe_count(n));
        entry = WIRE_PIPE_BUDGET / ((uint64_t)l.pipes * WIRE_BANKS);
        assert_true(win > l.lanes * l.frag);
        assert_true(l.pipe_frag >= l.frag);
        assert_true(l.pipe_frag == l.frag || l.pipe_frag <= WIRE_LANE_MIN);
        assert_int_equal(l.pipe_frag % WIRE_LINE, 0);
        assert_true(l.pipe_lanes <= (want + l.pipe_frag - 1) / l.pipe_frag);
        assert_true((uint64_t)l.pipe_lanes * (WIRE_LINE + l.pipe_frag) <= entry);
        if (l.pipe_lanes < (want + l.pipe_frag - 1) / l.pipe_frag)
            assert_true((uint64_t)(l.pipe_lanes + 1) * (WIRE_LINE + l.pipe_frag) > entry);
    }
    assert_true((uint64_t)l.pipes * WIRE_BANKS * l.pipe_stride <= WIRE_PIPE_BUDGET);
    assert_int_equal(l.pipes == 0, l.pipe_lanes == 0);
    assert_int_equal(l.pipe_lane_stride, WIRE_LINE + l.pipe_frag);
    assert_int_equal(l.pipe_stride, l.pipe_lanes * l.pipe_lane_stride);
    assert_int_equal(l.n, n);
    /* Bounce rounded up to whole lines, lowered to the budget but not below the minimum. */
    assert_int_equal(l.bounce % WIRE_LINE, 0);
    assert_true(l.bounce >= WIRE_LINE);
    if (bounce == 0)
        assert_int_equal(l.bounce, WIRE_LINE);
    else if (bounce <= fit)
        assert_true(l.bounce >= bounce && l.bounce - bounce < WIRE_LINE);
    else
        assert_true(l.bounce < bounce && l.bounce >= WIRE_BOUNCE_MIN &&
                    (l.bounce - WIRE_LINE < fit || l.bounce == WIRE_BOUNCE_MIN));
    /* Lanes: as many as WIRE_LANES allows with whole-line payloads of at
     * least WIRE_LANE_MIN, splitting the payload exactly. */
    assert_true(l.lanes == 1 || l.lanes == 2 || l.lanes == 4);
    assert_int_equal(l.frag * l.lanes, l.bounce);
    assert_int_equal(l.frag % WIRE_LINE, 0);
    assert_true(l.lanes == 1 || l.frag >= WIRE_LANE_MIN);
    if (l.lanes < WIRE_LANES)
        assert_true(l.bounce / (2 * l.lanes) < WIRE_LANE_MIN ||
                    (l.bounce / (2 * l.lanes)) % WIRE_LINE != 0);
    assert_int_equal(l.lane_stride, WIRE_LINE + l.frag);
    assert_int_equal(l.slot_stride, l.lanes * l.lane_stride);
    assert_int_equal(wire_lane_off(&l, n - 1, 1, 0), wire_slot_off(&l, n - 1, 1));
    assert_int_equal(wire_lane_off(&l, n - 1, 1, l.lanes - 1) + l.lane_stride,
                     wire_slot_off(&l, n - 1, 1) + l.slot_stride);
    assert_int_equal(wire_lane_off(&l, 0, 0, l.lanes), wire_lane_off(&l, 0, 0, 0));
    assert_int_equal(l.off_ctrl % WIRE_LINE, 0);
    assert_int_equal(l.off_done % WIRE_LINE, 0);
    assert_int_equal(l.off_cred % WIRE_LINE, 0);
    assert_int_equal(l.off_slot % WIRE_LINE, 0);
    assert_int_equal(l.slot_stride % WIRE_LINE, 0);
    assert_int_equal(l.total % WIRE_LINE, 0);

    s = calloc(max, sizeof(*s));
    assert_non_null(s);
    s[cnt++] = (span_t){0, WIRE_LINE, "header"};
    for (uint32_t p = 0; p < n; p++) {
        for (unsigned b = 0; b < WIRE_BANKS; b++) {
            s[cnt++] = (span_t){wire_ctrl_off(&l, p, b), WIRE_LINE, "ctrl"};
            s[cnt++] = (span_t){wire_slot_off(&l, p, b), l.slot_stride, "slot"};
            s[cnt++] = (span_t){wire_done_off(&l, p, b), WIRE_LINE, "done"};
            s[cnt++] = (span_t){wire_cred_off(&l, p, b), WIRE_LINE, "cred"};
        }
        s[cnt++] = (span_t){wire_note_off(&l, p), WIRE_LINE, "note"};
    }
    for (uint32_t q = 0; q < l.pipes; q++)
        for (unsigned b = 0; b < WIRE_BANKS; b++)
            s[cnt++] = (span_t){wire_pipe_off(&l, q, b), l.pipe_stride, "pipe"};
    assert_int_equal(cnt, max);
    for (size_t i = 0; i < cnt; i++) {
        assert_int_equal(s[i].start % WIRE_LINE, 0);
        assert_true(s[i].start + s[i].len <= l.total);
    }
    qsort(s, cnt, sizeof(*s), span_cmp);
    for (size_t i = 1; i < cnt; i++) {
        if (s[i - 1].start + s[i - 1].len > s[i].start)
            fail_msg("n=%u bounce=%llu: %s at %llu+%llu overlaps %s at %llu", n,
                     (unsigned long long)bounce, s[i - 1].what, (unsigned long long)s[i - 1].start,
                     (unsigned long long)s[i - 1].len, s[i].what, (unsigned long long)s[i].start);
        /* back to back: nothing wasted between entries */
        assert_int_equal(s[i - 1].start + s[i - 1].len, s[i].start);
    }
    /* Nothing wasted at the end: the last note line ends the region. */
    assert_int_equal(s[cnt - 1].start + s[cnt - 1].len, l.total);
    free(s);
}

static void test_layout_many(void **state)
{
    static const uint32_t ns[] = {1, 2, 3, 4, 5, 7, 8, 16, 33, 64, 257};
    static const uint64_t bounces[] = {0,   1,    63,   64,    65,    100,   127,
                                       128, 4095, 4096, 16383, 16384, 16385, 64 << 20};

    (void)state;
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
        for (size_t j = 0; j < sizeof(bounces) / sizeof(bounces[0]); j++) {
            check_layout(ns[i], bounces[j], 0);
            check_layout(ns[i], bounces[j], 65536);
            check_layout(ns[i], bounces[j], 1);
        }
}

/* Pipe entries (docs/protocol.md §2): the distances d where d or n - d is a
 * power of two, each with one entry, so one writer (the peer at d below the
 * owner); the stream's lanes: the slot's first, fragment 0 in the slot. */
static void test_pipes(void **state)
{
    (void)state;
    for (uint32_t n = 1; n <= 300; n++) {
        wire_layout_t l;
        uint32_t seen = 0;
        assert_int_equal(wire_layout_init(&l, n, 1024, WIRE_BANKS, WIRE_LANES, 65536), 0);
        assert_int_equal(l.pipes, n > 1 ? wire_pipe_count(n) : 0);
        for (uint32_t d = 0; d < n + 2; d++) {
            uint32_t q = wire_pipe_index(&l, d);
            int want = d > 0 && d < n && (wire_is_pow2(d) || wire_is_pow2(n - d));
            assert_int_equal(q != WIRE_PIPE_NONE, want);
            if (q == WIRE_PIPE_NONE)
                continue;
            assert_true(q < l.pipes);
            assert_int_equal(wire_pipe_dist(&l, q), d);
            seen++;
        }
        assert_int_equal(seen, l.pipes);
        for (uint32_t q = 0; q < l.pipes; q++)
            assert_int_equal(wire_pipe_index(&l, wire_pipe_dist(&l, q)), q);
        /* Ring, recursive doubling (at powers of two), Bruck: every step has an entry. */
        if (n > 1) {
            assert_int_not_equal(wire_pipe_of(&l, 0, 1), WIRE_PIPE_NONE);
            assert_int_not_equal(wire_pipe_of(&l, 1, 0), WIRE_PIPE_NONE);
        }
        for (uint32_t k = 0; n > 1 && wire_is_pow2(n) && ((uint32_t)1 << k) < n; k++)
            for (uint32_t r = 0; r < n; r++)
                assert_int_not_equal(wire_pipe_of(&l, r ^ (1u << k), r), WIRE_PIPE_NONE);
    }
    {
        wire_layout_t l;
        uint32_t q;
        assert_int_equal(wire_layout_init(&l, 8, 4096, WIRE_BANKS, WIRE_LANES, 65536), 0);
        assert_int_equal(l.pipes, 5); /* 1, 2, 4, 7, 6 */
        assert_int_equal(wire_pipe_dist(&l, 3), 7);
        assert_int_equal(wire_pipe_dist(&l, 4), 6);
        assert_int_equal(l.lanes, 1);
        /* 60 KiB wanted beyond the slot; an entry may hold 2 MiB / (5 x 16) =
         * 26214 bytes: lanes of 13107 / 64 x 64 - 64 = 12992 bytes, 2 fit. */
        assert_int_equal(l.pipe_frag, 12992);
        assert_int_equal(l.pipe_lanes, 2);
        q = wire_pipe_of(&l, 3, 5); /* distance 2 */
        assert_int_equal(q, 1);
        assert_int_equal(wire_stream_window(&l, q), 3);
        assert_int_equal(wire_stream_window(&l, WIRE_PIPE_NONE), 1);
        assert_int_equal(wire_stream_lane_off(&l, 3, 2, q, 0), wire_slot_off(&l, 3, 2));
        assert_int_equal(wire_stream_lane_off(&l, 3, 2, q, 3), wire_slot_off(&l, 3, 2));
        assert_int_equal(wire_stream_lane_off(&l, 3, 2, q, 1), wire_pipe_off(&l, q, 2));
        assert_int_equal(wire_stream_lane_off(&l, 3, 2, q, 4), wire_pipe_off(&l, q, 2));
        assert_int_equal(wire_stream_lane_off(&l, 3, 2, q, 2),
                         wire_pipe_off(&l, q, 2) + 64 + 12992);
        assert_int_equal(wire_stream_frag(&l, q, 0), 4096);
        assert_int_equal(wire_stream_frag(&l, q, 2), 12992);
        assert_int_equal(wire_stream_frag(&l, q, 3), 4096);
        assert_int_equal(wire_stream_frag(&l, WIRE_PIPE_NONE, 2), 4096);
        assert_int_equal(wire_stream_lane_off(&l, 3, 2, WIRE_PIPE_NONE, 5),
                         wire_slot_off(&l, 3, 2));
        assert_int_equal(wire_pipe_of(&l, 0, 3), WIRE_PIPE_NONE); /* distance 3: none */
        assert_true(wire_frag_credited(0, 9, 2, wire_stream_window(&l, q)));
        assert_false(wire_frag_credited(0, 9, 3, wire_stream_window(&l, q)));
        assert_true(wire_frag_credited(wire_frag_word(9, 0), 9, 3, wire_stream_window(&l, q)));
        assert_false(wire_frag_credited(wire_frag_word(9, 0), 9, 4, wire_stream_window(&l, q)));
    }
}

static void test_layout_exact(void **state)
{
    const uint64_t B = WIRE_BANKS;
    wire_layout_t l;

    (void)state;
    /* n = 4, bounce 100 -> 128: header, then ctrl, done, cred (4 x B lines each),
     * then 4 x B slots of 192, then 4 note lines. */
    assert_int_equal(wire_layout_init(&l, 4, 100, WIRE_BANKS, WIRE_LANES, 0), 0);
    assert_int_equal(l.bounce, 128);
    assert_int_equal(l.off_ctrl, 64);
    assert_int_equal(l.off_done, 64 + 4 * B * 64);
    assert_int_equal(l.off_cred, 64 + 8 * B * 64);
    assert_int_equal(l.off_slot, 64 + 12 * B * 64);
    assert_int_equal(l.slot_stride, 192);
    assert_int_equal(l.off_note, 64 + 12 * B * 64 + 4 * B * 192);
    assert_int_equal(l.total, l.off_note + 4 * 64);
    assert_int_equal(wire_note_off(&l, 2), l.off_note + 2 * 64);
    assert_int_equal(wire_ctrl_off(&l, 2, 1), 64 + (2 * B + 1) * 64);
    assert_int_equal(wire_done_off(&l, 3, 0), l.off_done + 3 * B * 64);
    assert_int_equal(wire_cred_off(&l, 1, 5), l.off_cred + (B + 5) * 64);
    assert_int_equal(wire_slot_off(&l, 1, 1), l.off_slot + (B + 1) * 192);
    /* Distinct banks and distinct peers never share a ctrl or slot entry. */
    assert_int_not_equal(wire_ctrl_off(&l, 0, 1), wire_ctrl_off(&l, 1, 0));
    assert_int_not_equal(wire_slot_off(&l, 0, 1), wire_slot_off(&l, 1, 0));
}

static void test_layout_lanes(void **state)
{
    wire_layout_t l;

    (void)state;
    /* A network's default: 4 lanes of 16 KiB. */
    assert_int_equal(wire_layout_init(&l, 2, 65536, WIRE_BANKS, WIRE_LANES, 0), 0);
    assert_int_equal(l.lanes, 4);
    assert_int_equal(l.frag, 16384);
    assert_int_equal(l.slot_stride, 4 * (64 + 16384));
    assert_int_equal(wire_lane_off(&l, 1, 3, 6), wire_slot_off(&l, 1, 3) + 2 * (64 + 16384));
    /* Fewer lanes asked for, or fewer that hold 16 KiB. */
    assert_int_equal(wire_layout_init(&l, 2, 65536, WIRE_BANKS, 2, 0), 0);
    assert_int_equal(l.lanes, 2);
    assert_int_equal(l.frag, 32768);
    assert_int_equal(wire_layout_init(&l, 2, 65536, WIRE_BANKS, 1, 0), 0);
    assert_int_equal(l.lanes, 1);
    assert_int_equal(wire_layout_init(&l, 2, 32768, WIRE_BANKS, WIRE_LANES, 0), 0);
    assert_int_equal(l.lanes, 2);
    /* One host's default and smaller: one lane, the single-slot protocol. */
    assert_int_equal(wire_layout_init(&l, 2, 16384, WIRE_BANKS, WIRE_LANES, 0), 0);
    assert_int_equal(l.lanes, 1);
    assert_int_equal(l.frag, 16384);
    assert_int_equal(l.slot_stride, 64 + 16384);
    /* Halves that are not whole lines: 32832 / 2 = 16416 = 256.5 lines, one lane. */
    assert_int_equal(wire_layout_init(&l, 2, 32832, WIRE_BANKS, WIRE_LANES, 0), 0);
    assert_int_equal(l.lanes, 1);
    /* The budget lowers the slot, then the lanes: 8 ranks get 32 KiB, 2 lanes. */
    assert_int_equal(wire_layout_init(&l, 8, 65536, WIRE_BANKS, WIRE_LANES, 0), 0);
    assert_int_equal(l.bounce, 32768);
    assert_int_equal(l.lanes, 2);
    /* Lanes: a power of 2 from 1 to WIRE_LANES. */
    assert_int_equal(wire_layout_init(&l, 2, 65536, WIRE_BANKS, 0, 0), -1);
    assert_int_equal(wire_layout_init(&l, 2, 65536, WIRE_BANKS, 3, 0), -1);
    assert_int_equal(wire_layout_init(&l, 2, 65536, WIRE_BANKS, 2 * WIRE_LANES, 0), -1);
}

/* Cumulative credits: fragment k waits for the credit of k - lanes, of this
 * epoch; a credit of another epoch or none allows only the first lanes. */
static void test_frag_credited(void **state)
{
    const uint64_t e = 7;

    (void)state;
    for (uint32_t k = 0; k < 4; k++)
        assert_true(wire_frag_credited(0, e, k, 4));
    assert_false(wire_frag_credited(0, e, 4, 4));
    assert_true(wire_frag_credited(wire_frag_word(e, 0), e, 4, 4));
    assert_false(wire_frag_credited(wire_frag_word(e, 0), e, 5, 4));
    assert_true(wire_frag_credited(wire_frag_word(e, 9), e, 5, 4));
    assert_true(wire_frag_credited(wire_frag_word(e, 9), e, 13, 4));
    assert_false(wire_frag_credited(wire_frag_word(e, 9), e, 14, 4));
    /* Another epoch's credit (a stale word of the bank) allows nothing more. */
    assert_false(wire_frag_credited(wire_frag_word(e - 16, 100), e, 4, 4));
    assert_false(wire_frag_credited(wire_frag_word(e + 1, 100), e, 4, 4));
    /* One lane: the exact credit rule of a single slot. */
    assert_false(wire_frag_credited(0, e, 1, 1));
    assert_true(wire_frag_credited(wire_frag_word(e, 0), e, 1, 1));
    assert_false(wire_frag_credited(wire_frag_word(e, 0), e, 2, 1));
    /* The low 32 bits of the epoch are what a fragment word keeps. */
    assert_true(wire_frag_credited(wire_frag_word(e + (1ULL << 32), 0), e, 4, 4));
}

static void test_layout_budget(void **state)
{
    wire_layout_t l;

    (void)state;
    assert_int_equal(wire_layout_init(&l, 0, 64, WIRE_BANKS, WIRE_LANES, 0), -1);
    /* Small teams keep the configured bounce; large ones shrink it to the budget. */
    assert_int_equal(wire_layout_init(&l, 8, 16384, WIRE_BANKS, WIRE_LANES, 0), 0);
    assert_int_equal(l.bounce, 16384);
    assert_int_equal(wire_layout_init(&l, 64, 16384, WIRE_BANKS, WIRE_LANES, 0), 0);
    assert_int_equal(l.bounce, WIRE_REGION_BUDGET / (64 * WIRE_BANKS));
    assert_int_equal(wire_layout_init(&l, 4096, 16384, WIRE_BANKS, WIRE_LANES, 0), 0);
    assert_int_equal(l.bounce, WIRE_BOUNCE_MIN);
    /* Any team size gives a region, never an overflow. */
    assert_int_equal(wire_layout_init(&l, UINT32_MAX, UINT64_MAX, WIRE_BANKS, WIRE_LANES, 0), 0);
    assert_int_equal(l.bounce, WIRE_BOUNCE_MIN);
    assert_true(l.total > (uint64_t)UINT32_MAX * WIRE_BANKS * WIRE_BOUNCE_MIN);
}

/* ARCOLL_WINDOW w: 2w banks, every entry of a peer w times smaller than at 8. */
static void test_layout_window(void **state)
{
    wire_layout_t l8, l1, l3;

    (void)state;
    assert_int_equal(wire_layout_init(&l1, 64, 64, 0, WIRE_LANES, 0), -1);
    assert_int_equal(wire_layout_init(&l1, 64, 64, 3, WIRE_LANES, 0), -1);
    assert_int_equal(wire_layout_init(&l1, 64, 64, WIRE_BANKS + 2, WIRE_LANES, 0), -1);
    assert_int_equal(wire_layout_init(&l8, 64, 64, WIRE_BANKS, WIRE_LANES, 0), 0);
    assert_int_equal(wire_layout_init(&l1, 64, 64, 2, WIRE_LANES, 0), 0);
    assert_int_equal(wire_layout_init(&l3, 64, 64, 6, WIRE_LANES, 0), 0);
    assert_int_equal(l1.total - WIRE_LINE - 64 * WIRE_LINE,
                     (l8.total - WIRE_LINE - 64 * WIRE_LINE) / ARCOLL_MAX_INFLIGHT);
    assert_int_equal(wire_slot_off(&l1, 5, 1), l1.off_slot + (5 * 2 + 1) * l1.slot_stride);
    assert_int_equal(wire_cred_off(&l3, 7, 5), l3.off_cred + (7 * 6 + 5) * WIRE_LINE);
    assert_int_equal(wire_note_off(&l3, 63) + WIRE_LINE, l3.total);
    for (uint64_t ep = 0; ep < 40; ep++)
        assert_int_equal(wire_bank(ep, 6), ep % 6);
    assert_true(wire_num_stray(7 - 5, 7, 6));
    assert_false(wire_num_stray(7 - 6, 7, 6));
}

/* A word of another call in our bank: later, or too recent to be a stale
 * word of that bank (docs/protocol.md §8); modulo 2^32. */
static void test_num_stray(void **state)
{
    (void)state;
    assert_false(wire_num_stray(7, 7, WIRE_BANKS));
    assert_true(wire_num_stray(8, 7, WIRE_BANKS));
    assert_true(wire_num_stray(6, 7, WIRE_BANKS));
    assert_true(wire_num_stray(7 - (WIRE_BANKS - 1), 7, WIRE_BANKS));
    assert_false(
        wire_num_stray(7 + 100 - WIRE_BANKS - 100, 7, WIRE_BANKS)); /* WIRE_BANKS calls back */
    assert_false(wire_num_stray(1, 1000, WIRE_BANKS));              /* stale */
    assert_true(wire_num_stray(0x100000000ULL, 0xffffffffULL, WIRE_BANKS)); /* across the wrap */
    assert_false(wire_num_stray(0xffffffffULL, 0xffffffffULL + WIRE_BANKS, WIRE_BANKS));
}

/* ---- polling ----------------------------------------------------------- */

static void test_wire_load(void **state)
{
    _Alignas(64) uint64_t buf[32];
    chan_mem_t m;

    (void)state;
    memset(buf, 0, sizeof(buf));
    memset(&m, 0, sizeof(m));
    m.addr = buf;
    m.len = sizeof(buf);
    buf[8] = wire_frag_word(5, 2);
    buf[9] = 77;
    assert_int_equal(wire_load(&m, 64), wire_frag_word(5, 2));
    assert_int_equal(wire_load(&m, 72), 77);
    assert_int_equal(wire_load(&m, 0), 0);
}

/* Schedule message tags (protocol.md §17): the low 32 bits are the epoch's
 * (the engine's checks read them as the call number); a tag is never a flat
 * call's epoch (below 2^54) nor WIRE_CTRL_REVOKED; it survives the done word;
 * tags of one epoch are told apart by their message, and from other epochs'. */
static void test_sx_tag(void **state)
{
    static const uint32_t seqs[] = {0, 1, 2, 1000, WIRE_SX_SEQ_MAX};

    (void)state;
    for (size_t e = 0; e < N_EPOCHS; e++) {
        uint64_t ep = test_epochs[e];
        for (size_t i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++) {
            uint64_t tag = wire_sx_tag(ep, seqs[i]), w;
            assert_int_equal(tag & 0xffffffffULL, ep & 0xffffffffULL);
            assert_true(tag >= WIRE_SX_TAG_BIT && tag != WIRE_CTRL_REVOKED);
            assert_true(wire_sx_tag_epoch(tag, ep));
            assert_false(wire_sx_tag_epoch(tag, ep + 1));
            assert_false(wire_sx_tag_epoch(ep + 1, ep + 1)); /* a flat call's flag */
            w = wire_done_word(tag, WIRE_ST_BUSY);
            assert_true(wire_done_epoch_match(w, tag));
            assert_int_equal(wire_done_status(w), WIRE_ST_BUSY);
            assert_true(wire_sx_tag_epoch(w >> 8, ep));
            for (size_t j = 0; j < sizeof(seqs) / sizeof(seqs[0]); j++)
                if (j != i)
                    assert_false(wire_done_epoch_match(w, wire_sx_tag(ep, seqs[j])));
            assert_false(wire_done_epoch_match(w, wire_sx_tag(ep + 1, seqs[i])));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frag_word_never_zero),
        cmocka_unit_test(test_frag_word_distinct),
        cmocka_unit_test(test_frag_word_epoch_wrap),
        cmocka_unit_test(test_done_word_roundtrip),
        cmocka_unit_test(test_done_word_other_epoch),
        cmocka_unit_test(test_bank_parity),
        cmocka_unit_test(test_struct_shapes),
        cmocka_unit_test(test_layout_many),
        cmocka_unit_test(test_layout_exact),
        cmocka_unit_test(test_pipes),
        cmocka_unit_test(test_num_stray),
        cmocka_unit_test(test_layout_lanes),
        cmocka_unit_test(test_frag_credited),
        cmocka_unit_test(test_layout_budget),
        cmocka_unit_test(test_layout_window),
        cmocka_unit_test(test_wire_load),
        cmocka_unit_test(test_sx_tag),
    };

    return cmocka_run_group_tests_name("wire", tests, NULL, NULL);
}
