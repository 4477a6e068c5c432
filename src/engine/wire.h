/*
 * What travels between ranks: the per-team region layout and the 64-bit
 * words peers poll. docs/protocol.md is the specification; this header is
 * its only implementation.
 *
 * Every team member owns one region, remotely writable by the other members:
 *
 *   [ header 64 B ]
 *   ctrl[N][B]   64 B each: peer j's arrival advertisement, per epoch bank
 *   done[N][B]   64 B each: peer j's "all data written into your buffer" (zcopy)
 *   cred[N][B]   64 B each: peer j's "I consumed your fragment k" (copy path)
 *   slot[N][B]   peer j's copy-path data: L lanes, each a 64 B header and
 *                bounce / L payload bytes (fragment k in lane k mod L)
 *   pipe[P][B]   schedules only: Lp more lanes (a 64 B header and
 *                pipe_frag payload bytes each) for the stream of the one peer
 *                at distance D[q] (wire_pipe_index)
 *   note[N]      64 B each: 8 bytes unused, then the number of the call in
 *                which peer j failed (wire_fail_word), no banks
 *
 * B = 2 x the team's window w (ARCOLL_WINDOW, at most ARCOLL_MAX_INFLIGHT,
 * so B <= WIRE_BANKS): a call of epoch e uses bank e mod B, and
 * docs/protocol.md §5 argues why a bank is free again when a call reuses it. Entry j is written
 * only by team rank j, so writers never share a cache line.
 */
#ifndef ARCOLL_ENGINE_WIRE_H
#define ARCOLL_ENGINE_WIRE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "arcoll.h"
#include "chan/chan.h"
#include "util/util.h"

#define WIRE_LINE  64
#define WIRE_BANKS (2 * ARCOLL_MAX_INFLIGHT) /* the most banks: window ARCOLL_MAX_INFLIGHT */
/* The region of a team stays within this many bytes where it can: the bounce
 * payload shrinks (to WIRE_BOUNCE_MIN at least) as teams grow. A build may
 * set it (-DWIRE_REGION_BUDGET=...: the simulator's streams at link speed in
 * large teams, docs/scale.md "003"); every rank of a job must agree. */
#ifndef WIRE_REGION_BUDGET
#define WIRE_REGION_BUDGET ((uint64_t)4 << 20)
#endif
#define WIRE_BOUNCE_MIN 1024
/* A slot is cut into up to WIRE_LANES lanes of at least WIRE_LANE_MIN payload
 * bytes: a stream has that many fragments in flight (docs/protocol.md §6).
 * Smaller fragments cost more per byte than they save in round trips where a
 * put has a fixed cost (a work request: docs/measurements/lanes.md). */
#define WIRE_LANES    4
#define WIRE_LANE_MIN 16384
/* A schedule's stream to a peer at a distance d where d or n - d is a power
 * of two (ring, recursive doubling and halving, Bruck: O(log n) peers) has,
 * besides the lanes of its slot, lanes of a pipe entry: enough for
 * ARCOLL_PIPE_WINDOW bytes in flight, within WIRE_PIPE_BUDGET bytes of pipe
 * entries per region (docs/protocol.md §2, §6). */
#define WIRE_PIPE_BUDGET ((uint64_t)2 << 20)
#define WIRE_PIPE_NONE   UINT32_MAX
#define WIRE_MAGIC       0x6172636f6c6c3031ULL /* "arcoll01" */

/* Status carried by a done word or a credit word. */
/* Done-word statuses. BUSY: a zero-copy sender is writing into the receive
 * buffer now (a done word follows); REVOKED: it found the advertisement
 * revoked and wrote nothing (docs/protocol.md §6, "Revocation"). */
enum { WIRE_ST_OK = 0, WIRE_ST_MISMATCH = 1, WIRE_ST_BUSY = 2, WIRE_ST_REVOKED = 3 };
/* A control slot's flag word once its receiver revoked the advertisement: the
 * empty slot's (epochs start at 1), so that no check takes it for another
 * call's. */
#define WIRE_CTRL_REVOKED 0

/* A control slot: [flag][size][rkey] -- flag is written last. */
typedef struct wire_ctrl {
    uint64_t flag; /* epoch of the advertisement */
    uint64_t size; /* sender's bytes per peer, checked by the reader */
    chan_rkey_t rkey;
    uint64_t boff;  /* the buffer starts boff bytes into the keyed memory */
    uint64_t epoch; /* the call the body is for; a flag alone leaves an older body */
} wire_ctrl_t;

/* An advertisement key of this kind is the engine's, not a channel's: the
 * receive buffer lies in the node heap's same-address region, which every
 * member of the one-node team maps (mem/region.h); rkey.addr is its virtual
 * address, valid as it is in the sender, which writes it with memcpy
 * (docs/protocol.md §6, "Heap buffers"). No channel uses this kind. */
#define WIRE_KIND_HEAP 0xffffffffu

/* The size a reader sees in an advertisement that is a flag alone (a
 * schedule's readiness, docs/protocol.md §2): no size and no key for this
 * call, whatever an earlier call of the bank left in the body. */
#define WIRE_SIZE_NONE (UINT64_MAX - 1)
/* Not a size: what a mismatch reports when allgatherv's signatures of the
 * receive counts differ (coll_v_word). */
#define WIRE_SIZE_SIG (UINT64_MAX - 2)

/* The size an advertisement whose flag is this epoch's gives: the body's if
 * the body is this call's, else WIRE_SIZE_NONE (a flag alone). */
static inline uint64_t wire_ctrl_size(const wire_ctrl_t *adv, uint64_t epoch)
{
    return adv->epoch == epoch ? adv->size : WIRE_SIZE_NONE;
}

/* Header of a bounce slot; the payload follows at WIRE_LINE, or, for a
 * message of at most WIRE_INLINE bytes, at WIRE_INLINE_OFF in the header's
 * own line: the receiver then takes flag and data in one line transfer. */
typedef struct wire_slot_hdr {
    uint64_t flag; /* wire_frag_word(epoch, fragment) */
    uint64_t size; /* total bytes per peer of the message (fragment 0) */
    union {
        uint64_t sig;  /* schedules: the call's signature (a message's fragment 0) */
        uint64_t want; /* flat v-forms: the sender's word for the receiver (coll_v_word) */
    };
} wire_slot_hdr_t;

#define WIRE_INLINE_OFF sizeof(wire_slot_hdr_t)
#define WIRE_INLINE     (WIRE_LINE - WIRE_INLINE_OFF)

_Static_assert(sizeof(wire_ctrl_t) == WIRE_LINE, "control slot is one line");
_Static_assert(offsetof(wire_slot_hdr_t, sig) == offsetof(wire_slot_hdr_t, size) + 8,
               "size and sig are written by one put");
/* An advertisement is written from the stack: the channel must copy it at the call. */
_Static_assert(sizeof(wire_ctrl_t) - sizeof(uint64_t) <= CHAN_PUT_COPY, "advertisement copied");

/* Banks rotate with the epoch; docs/protocol.md argues why 2w banks suffice
 * for w calls in flight. */
static inline unsigned wire_bank(uint64_t epoch, unsigned banks)
{
#ifdef ARCOLL_FAULTS
    if (wire_fault_one_bank)
        return 0;
#endif
    return (unsigned)(epoch % banks);
}

/* Fragment k of epoch e in a slot flag, or the credit for it. Never 0 (the
 * value of fresh memory) because of the +1. Only the low 32 bits of the epoch
 * are kept (equality with the current epoch is all that is asked), and frag
 * stays below WIRE_FRAG_REJECT (coll_start refuses more fragments), so the +1
 * never carries into the epoch. */
static inline uint64_t wire_frag_word(uint64_t epoch, uint32_t frag)
{
    return (epoch << 32) | ((uint64_t)frag + 1);
}

/* A credit that tells the sender the receiver rejected the message. */
#define WIRE_FRAG_REJECT 0xfffffffeU

/* May the sender write fragment k of a stream whose receiver's credit word is
 * cred, with lanes fragments in flight (the stream's window: the lanes of its
 * slot, and of its pipe entry if it has one)? Credits are cumulative (the
 * receiver has copied out every fragment up to the one named), so fragment k
 * needs the credit for k - lanes, the last fragment that used its lane. The
 * caller tests for the reject credit first. */
static inline int wire_frag_credited(uint64_t cred, uint64_t epoch, uint32_t k, uint32_t lanes)
{
    if (k < lanes)
        return 1;
    if ((cred >> 32) != (epoch & 0xffffffffULL) || (uint32_t)cred == 0)
        return 0;
    return (uint32_t)cred - 1 >= k - lanes;
}

static inline uint64_t wire_done_word(uint64_t epoch, unsigned status)
{
    return (epoch << 8) | ((uint64_t)(status & 0x7f) << 1) | 1;
}

static inline int wire_done_epoch_match(uint64_t word, uint64_t epoch)
{
    return (word >> 8) == (epoch & (UINT64_MAX >> 8));
}

static inline unsigned wire_done_status(uint64_t word)
{
    return (unsigned)((word >> 1) & 0x7f);
}

/* A schedule's zero-copy message (docs/protocol.md §17): message seq of a
 * stream in the call of epoch e names its advertisement (the control slot's
 * flag and body epoch) and its done words (in place of the epoch). The low 32
 * bits are the epoch's, as in every word the engine's checks read as a call
 * number (engine_check.c); bit 54 keeps every tag apart from any epoch a flat
 * call writes there, and from WIRE_CTRL_REVOKED; a tag fits the done word's
 * 56 bits. */
#define WIRE_SX_SEQ_BITS 20
#define WIRE_SX_SEQ_MAX  ((1u << WIRE_SX_SEQ_BITS) - 1)
#define WIRE_SX_TAG_BIT  (1ULL << 54)

static inline uint64_t wire_sx_tag(uint64_t epoch, uint32_t seq)
{
    return WIRE_SX_TAG_BIT | ((uint64_t)seq << 32) | (epoch & 0xffffffffULL);
}

/* Is word a tag of this epoch, whatever the message (the peer is in the call)? */
static inline int wire_sx_tag_epoch(uint64_t word, uint64_t epoch)
{
    return (word & ~((uint64_t)WIRE_SX_SEQ_MAX << 32)) == wire_sx_tag(epoch, 0);
}

/* Region layout for a team of n ranks, banks banks (2 x its window, at most
 * WIRE_BANKS), at most lanes lanes a slot (a power of 2 up to WIRE_LANES) and
 * bounce payload b, rounded up to a
 * multiple of 64 and lowered toward WIRE_BOUNCE_MIN to keep the region near
 * WIRE_REGION_BUDGET (the same on every rank: it depends on n, b, banks and lanes only). */
typedef struct wire_layout {
    uint32_t n;
    uint32_t banks; /* 2 x the team's window */
    uint64_t bounce;
    uint32_t lanes; /* lanes of a slot */
    uint64_t frag;  /* payload bytes of a lane: a copy-path fragment */
    uint64_t lane_stride;
    uint32_t pipes;      /* P: pipe entries a bank (0: none) */
    uint32_t pipe_lanes; /* Lp: lanes of a pipe entry, each pipe_lane_stride bytes */
    uint64_t pipe_frag;  /* payload bytes of a pipe lane (>= frag) */
    uint64_t pipe_lane_stride;
    uint64_t off_ctrl, off_done, off_cred, off_slot, slot_stride, off_pipe, pipe_stride;
    uint64_t off_note, total;
} wire_layout_t;

/* The powers of two below n: 2^0 .. 2^(nb-1), the distances of pipe entries
 * 0 .. nb-1. */
static inline uint32_t wire_pipe_pow2s(uint32_t n)
{
    uint32_t nb = 0;

    while (nb < 32 && ((uint64_t)1 << nb) < n)
        nb++;
    return nb;
}

static inline int wire_is_pow2(uint64_t v)
{
    return v != 0 && (v & (v - 1)) == 0;
}

/* The distances D of a team of n ranks, in pipe entry order: first 2^j for
 * 2^j < n (entry j), then n - 2^j for the same j where that is not a power of
 * two itself, in increasing j. wire_pipe_index gives the entry of a distance
 * (WIRE_PIPE_NONE if it has none), wire_pipe_dist the distance of an entry;
 * wire_pipe_count(n) is P, the number of entries. */
static inline uint32_t wire_pipe_count(uint32_t n)
{
    uint32_t nb = wire_pipe_pow2s(n), p = nb;

    for (uint32_t j = 0; j < nb; j++)
        if (!wire_is_pow2(n - ((uint64_t)1 << j)))
            p++;
    return p;
}

static inline uint32_t wire_pipe_index(const wire_layout_t *l, uint32_t d)
{
    uint32_t nb, q;

    if (l->pipes == 0 || d == 0 || d >= l->n)
        return WIRE_PIPE_NONE;
    nb = wire_pipe_pow2s(l->n);
    if (wire_is_pow2(d)) {
        for (q = 0; ((uint64_t)1 << q) != d; q++)
            ;
        return q;
    }
    q = nb;
    for (uint32_t j = 0; j < nb; j++) {
        uint64_t e = l->n - ((uint64_t)1 << j);
        if (wire_is_pow2(e))
            continue;
        if (e == d)
            return q;
        q++;
    }
    return WIRE_PIPE_NONE;
}

static inline uint32_t wire_pipe_dist(const wire_layout_t *l, uint32_t q)
{
    uint32_t nb = wire_pipe_pow2s(l->n), i = nb;

    if (q < nb)
        return (uint32_t)1 << q;
    for (uint32_t j = 0; j < nb; j++) {
        uint64_t e = l->n - ((uint64_t)1 << j);
        if (wire_is_pow2(e))
            continue;
        if (i++ == q)
            return (uint32_t)e;
    }
    return 0;
}

/* The pipe entry of the stream from writer to owner (team ranks; the entry
 * lies in the owner's region): by the distance (owner - writer) mod n. */
static inline uint32_t wire_pipe_of(const wire_layout_t *l, uint32_t writer, uint32_t owner)
{
    return wire_pipe_index(l, (owner + l->n - writer) % l->n);
}

static inline int wire_layout_init(wire_layout_t *l, uint32_t n, uint64_t bounce, unsigned banks,
                                   unsigned lanes, uint64_t pipe_window)
{
    if (n == 0 || banks < 2 || banks > WIRE_BANKS || banks % 2 || lanes == 0 ||
        lanes > WIRE_LANES || (lanes & (lanes - 1)))
        return -1;
    uint64_t fit = WIRE_REGION_BUDGET / ((uint64_t)n * banks);

    l->n = n;
    l->banks = banks;
    if (bounce > fit)
        bounce = fit > WIRE_BOUNCE_MIN ? fit : WIRE_BOUNCE_MIN; /* now far below 2^63 */
    l->bounce = (bounce + WIRE_LINE - 1) / WIRE_LINE * WIRE_LINE;
    if (l->bounce == 0)
        l->bounce = WIRE_LINE;
    l->off_ctrl = WIRE_LINE;
    l->off_done = l->off_ctrl + (uint64_t)n * banks * WIRE_LINE;
    l->off_cred = l->off_done + (uint64_t)n * banks * WIRE_LINE;
    l->off_slot = l->off_cred + (uint64_t)n * banks * WIRE_LINE;
    /* Lanes of at least WIRE_LANE_MIN bytes, a multiple of 64 each (no
     * element of a reduction straddles two fragments). */
    l->lanes = lanes;
    while (l->lanes > 1 &&
           (l->bounce / l->lanes < WIRE_LANE_MIN || (l->bounce / l->lanes) % WIRE_LINE))
        l->lanes /= 2;
    l->frag = l->bounce / l->lanes;
    l->lane_stride = WIRE_LINE + l->frag;
    l->slot_stride = l->lanes * l->lane_stride;
    /* n note lines are at most n * banks * ceil(WIRE_LINE / banks) bytes */
    if (l->slot_stride >
        (UINT64_MAX - l->off_slot - WIRE_PIPE_BUDGET) / n / banks - (WIRE_LINE + banks - 1) / banks)
        return -1;
    l->off_pipe = l->off_slot + (uint64_t)n * banks * l->slot_stride;
    /* Pipe lanes: the window's bytes (two slot lanes' at least: one in
     * flight while the other is copied out) beyond the slot's lanes, in
     * lanes of a payload between the slot's lane and WIRE_LANE_MIN, about
     * half of what an entry may hold (so two of them where they fit), as
     * many as the window wants and the budget holds; none if that is none. */
    l->pipes = n > 1 && pipe_window > 0 ? wire_pipe_count(n) : 0;
    l->pipe_lanes = 0;
    l->pipe_frag = l->frag;
    if (l->pipes > 0) {
        uint64_t win = pipe_window > 2 * l->frag ? pipe_window : 2 * l->frag,
                 slot = (uint64_t)l->lanes * l->frag,
                 entry = WIRE_PIPE_BUDGET / ((uint64_t)l->pipes * banks), want, cap, half, fit;
        want = win > slot ? win - slot : 0;
        cap = want < entry ? want : entry;
        half = cap / 2 / WIRE_LINE * WIRE_LINE;
        half = half > WIRE_LINE ? half - WIRE_LINE : 0;
        l->pipe_frag = half < WIRE_LANE_MIN ? half : WIRE_LANE_MIN;
        if (l->pipe_frag < l->frag)
            l->pipe_frag = l->frag;
        fit = entry / (WIRE_LINE + l->pipe_frag);
        want = (want + l->pipe_frag - 1) / l->pipe_frag;
        l->pipe_lanes = (uint32_t)(want < fit ? want : fit);
    }
    if (l->pipe_lanes == 0) {
        l->pipes = 0;
        l->pipe_frag = l->frag;
    }
    l->pipe_lane_stride = WIRE_LINE + l->pipe_frag;
    l->pipe_stride = (uint64_t)l->pipe_lanes * l->pipe_lane_stride;
    l->off_note = l->off_pipe + (uint64_t)l->pipes * banks * l->pipe_stride;
    l->total = l->off_note + (uint64_t)n * WIRE_LINE;
    return 0;
}

static inline uint64_t wire_ctrl_off(const wire_layout_t *l, uint32_t peer, unsigned bank)
{
    return l->off_ctrl + ((uint64_t)peer * l->banks + bank) * WIRE_LINE;
}

static inline uint64_t wire_done_off(const wire_layout_t *l, uint32_t peer, unsigned bank)
{
    return l->off_done + ((uint64_t)peer * l->banks + bank) * WIRE_LINE;
}

static inline uint64_t wire_cred_off(const wire_layout_t *l, uint32_t peer, unsigned bank)
{
    return l->off_cred + ((uint64_t)peer * l->banks + bank) * WIRE_LINE;
}

static inline uint64_t wire_slot_off(const wire_layout_t *l, uint32_t peer, unsigned bank)
{
    return l->off_slot + ((uint64_t)peer * l->banks + bank) * l->slot_stride;
}

/* The lane of fragment k in slot[peer][bank]: its header line, then payload. */
static inline uint64_t wire_lane_off(const wire_layout_t *l, uint32_t peer, unsigned bank,
                                     uint32_t k)
{
    return wire_slot_off(l, peer, bank) + (uint64_t)(k % l->lanes) * l->lane_stride;
}

static inline uint64_t wire_pipe_off(const wire_layout_t *l, uint32_t q, unsigned bank)
{
    return l->off_pipe + ((uint64_t)q * l->banks + bank) * l->pipe_stride;
}

/* Fragments of a schedule's stream in flight: the slot's lanes, and the pipe
 * entry's if the stream has one (q, from wire_pipe_of). */
static inline uint32_t wire_stream_window(const wire_layout_t *l, uint32_t q)
{
    return l->lanes + (q != WIRE_PIPE_NONE ? l->pipe_lanes : 0);
}

/* The lane of fragment k of a schedule's stream from writer, whose pipe
 * entry is q: k mod the window; the first lanes are the slot's (so fragment 0
 * is always in the slot's first lane), the rest the pipe entry's. */
static inline uint64_t wire_stream_lane_off(const wire_layout_t *l, uint32_t writer, unsigned bank,
                                            uint32_t q, uint32_t k)
{
    uint32_t v = k % wire_stream_window(l, q);

    if (v < l->lanes)
        return wire_slot_off(l, writer, bank) + (uint64_t)v * l->lane_stride;
    return wire_pipe_off(l, q, bank) + (uint64_t)(v - l->lanes) * l->pipe_lane_stride;
}

/* The payload bytes of that lane: at most this many of a message go in
 * fragment k (a message's last fragment may hold fewer). */
static inline uint64_t wire_stream_frag(const wire_layout_t *l, uint32_t q, uint32_t k)
{
    return k % wire_stream_window(l, q) < l->lanes ? l->frag : l->pipe_frag;
}

static inline uint64_t wire_note_off(const wire_layout_t *l, uint32_t peer)
{
    return l->off_note + (uint64_t)peer * WIRE_LINE;
}

/* The words above carry the call's number on the team (its epoch; a step
 * of another team's call, that call's number; docs/protocol.md §8).
 * A number read from a peer's word in the bank of our call, other than ours:
 * later, or fewer than banks calls earlier (a stale word of that bank is
 * at least banks calls old), means the peer is in another call at the
 * same epoch: the ranks' calls no longer line up. Compared modulo 2^32, as
 * fragment words keep 32 bits of it. Only for words that are not 0 (fresh). */
static inline int wire_num_stray(uint64_t theirs, uint64_t ours, unsigned banks)
{
    int32_t d = (int32_t)((uint32_t)theirs - (uint32_t)ours);

    return d > 0 || (d < 0 && d > -(int32_t)banks);
}

/* The failure word, 8 bytes into peer j's note line: j's call number n
 * failed with the arcoll error rc, so j serves neither n nor later calls
 * (docs/protocol.md §8, "A rank that fails tells"). 0 while j is healthy. */
static inline uint64_t wire_fail_word(uint64_t num, int rc)
{
    return (num << 8) | (uint64_t)(uint8_t)(-rc);
}

static inline uint64_t wire_fail_num(uint64_t word)
{
    return word >> 8;
}

static inline int wire_fail_rc(uint64_t word)
{
    return -(int)(word & 0xff);
}

static inline uint64_t wire_fail_off(const wire_layout_t *l, uint32_t peer)
{
    return wire_note_off(l, peer) + 8;
}

/* Poll a word a peer writes: the acquire pairs with the writer's release (smp)
 * or with the HCA's in-order placement (verbs), so what was written before
 * the word is visible once the word is. */
static inline uint64_t wire_load(const chan_mem_t *m, uint64_t off)
{
    return atomic_load_explicit((_Atomic uint64_t *)((char *)m->addr + off), memory_order_acquire);
}

#endif
