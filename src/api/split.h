/*
 * Team split (arcoll_team_split, docs/split.md): which ranks of a parent team
 * form the new team of this rank, computed by merging sorted (color, key,
 * rank) tables along a recursive-doubling exchange (Sack 2011). No rank ever
 * sorts the whole table: each step is one linear merge of two sorted ones.
 *
 * The algorithm never sees a channel: it runs over split_xchg_fn, one
 * blocking exchange per call, so the same code runs over the team's channel
 * and in memory in the unit tests. For tests that simulate many virtual ranks
 * step by step, split_run is also available as a state machine
 * (split_state_*): next exchange, complete it, repeat.
 *
 * Exchange contract (split_xchg_fn):
 *   - every rank of the parent team makes the same number of calls, and call
 *     k of one rank pairs with call k of its peers (a transport may tag by k
 *     or rely on per-pair FIFO order: both hold);
 *   - to/from are parent-team ranks or SPLIT_NONE; a zero-length message is
 *     never sent: slen == 0 comes with to == SPLIT_NONE and rlen == 0 with
 *     from == SPLIT_NONE, consistently on both ends;
 *   - rlen is exact: an arriving message of another length is a protocol
 *     error the transport reports as ARCOLL_ERR_MISMATCH;
 *   - sbuf stays valid until the call returns; the call may return before
 *     the peer has received (buffered send) but not before rbuf is filled.
 *
 * Wire format: every field is a 32-bit little-endian word (int32 in two's
 * complement). An entry is 12 bytes {color, key, rank}; a color set is 4
 * bytes per color; a header is 8 bytes {count, SPLIT_HDR_MAGIC ^ k} with k the
 * exchange index, so a peer out of step is reported as ARCOLL_ERR_MISMATCH.
 */
#ifndef ARCOLL_API_SPLIT_H
#define ARCOLL_API_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#define SPLIT_NONE       UINT32_MAX
#define SPLIT_UNDEFINED  (-1) /* = ARCOLL_UNDEFINED */
#define SPLIT_ENTRY_WIRE 12u  /* bytes of one entry on the wire */
#define SPLIT_HDR_WIRE   8u
#define SPLIT_HDR_MAGIC  0x53504c54u /* "SPLT" */
#define SPLIT_MAX_LEVELS 32

/* One rank's input. Tables are ordered by (color, key, rank), signed. */
typedef struct split_entry {
    int32_t color; /* >= 0, or SPLIT_UNDEFINED */
    int32_t key;
    uint32_t rank; /* in the parent team */
} split_entry_t;

typedef int (*split_xchg_fn)(void *arg, uint32_t to, const void *sbuf, size_t slen, uint32_t from,
                             void *rbuf, size_t rlen);

/* Full variant: the plain 003 merge. log2(p2) exchanges (p2: n rounded down
 * to a power of two), + 3 if n is not a power of two; message sizes follow
 * from n; a rank receives 3 (n - 1) words and holds at most 2n entries.
 * mine->rank must be me. *members (caller frees) lists the parent ranks of
 * the new team in its order, *myindex is this rank's place in it; for
 * SPLIT_UNDEFINED *members = NULL, *nmembers = 0, *myindex = SPLIT_NONE.
 * Outputs are untouched on failure. */
int split_run(uint32_t n, uint32_t me, const split_entry_t *mine, split_xchg_fn xchg, void *arg,
              uint32_t **members, uint32_t *nmembers, uint32_t *myindex);

/* Pruned variant, same contract: a first pass unites color sets so that each
 * step sends only the entries whose colors a later receiver needs; a rank
 * ends holding its own color's run. 4 log2(p2) exchanges, + 3 if n is not a
 * power of two; at most 4 (n - 1) words of entries and colors received, plus
 * 2 per header. */
int split_run_pruned(uint32_t n, uint32_t me, const split_entry_t *mine, split_xchg_fn xchg,
                     void *arg, uint32_t **members, uint32_t *nmembers, uint32_t *myindex);

/* ---- the state machine behind both, for step-synchronous simulators ---- */

typedef struct split_set {
    int32_t *c; /* ascending, unique, defined colors */
    uint32_t n;
} split_set_t;

typedef struct split_xfer {
    uint32_t to, from;
    const void *sbuf;
    size_t slen;
    void *rbuf;
    size_t rlen;
} split_xfer_t;

typedef struct split_state {
    uint32_t n, me, p2, r, levels; /* n = p2 + r, p2 = 2^levels */
    int prune;
    split_entry_t self;
    int32_t xcolor; /* color of the folded-in rank p2 + me, if me < r */
    uint32_t k, nx; /* next exchange, exchanges in all */
    uint8_t *tab;   /* sorted table, wire format */
    uint32_t ntab;
    uint8_t *sbuf, *rbuf; /* pruned send staging, receive buffer */
    size_t scap, rcap;
    uint8_t hdr_s[SPLIT_HDR_WIRE], hdr_r[SPLIT_HDR_WIRE];
    uint32_t rcount;                    /* what the current exchange receives, in items */
    split_set_t own;                    /* defined colors of self and the folded rank */
    split_set_t cur;                    /* pruned, first pass: colors of the ranks seen so far */
    split_set_t mine[SPLIT_MAX_LEVELS]; /* pruned: colors needed here after step t */
    split_set_t part[SPLIT_MAX_LEVELS]; /* pruned: colors the step-t partner needs */
    int extracted;
    int send_tab;                 /* pruned: this step sends the whole table */
    uint32_t *out, nout, myindex; /* this rank's new team */
    uint32_t *xout, nxout;        /* the folded rank's new team, to send back */
    size_t held, peak;            /* bytes allocated now / at most */
    uint64_t rx_entries;          /* table entries received */
} split_state_t;

/* prune: 0 full, 1 pruned. On failure st is still safe to split_state_fini. */
int split_state_init(split_state_t *st, uint32_t n, uint32_t me, const split_entry_t *mine,
                     int prune);
/* 1: *x is the next exchange to make; 0: none left; < 0: an error. */
int split_state_next(split_state_t *st, split_xfer_t *x);
/* The exchange of the last split_state_next has completed. */
int split_state_complete(split_state_t *st);
/* After the last exchange: hand over the result (members to the caller). */
int split_state_take(split_state_t *st, uint32_t **members, uint32_t *nmembers, uint32_t *myindex);
void split_state_fini(split_state_t *st);

/* Entries (wire format) of the virtual block [first, first + size) of an
 * n-rank split: virtual rank v < n - p2 stands for ranks v and p2 + v. */
uint32_t split_plan_count(uint32_t n, uint32_t first, uint32_t size);
/* Merge sorted wire tables a and b, keeping the entries whose colors are in
 * keep (all if keep is NULL), into out (room for the result; NULL: count
 * only). Returns the entries written. Linear in na + nb, or with keep, in
 * keep->n log((na + nb) / keep->n) + the result. */
uint32_t split_tab_merge(const uint8_t *a, uint32_t na, const uint8_t *b, uint32_t nb,
                         const split_set_t *keep, uint8_t *out);
void split_entry_put(uint8_t *w, uint32_t i, const split_entry_t *e);
void split_entry_get(const uint8_t *w, uint32_t i, split_entry_t *e);

#endif
