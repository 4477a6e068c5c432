/*
 * The tests' support library (tests/lib): data patterns with their checks,
 * the irregular counts of the v-forms, and pass/fail counting. Used by the
 * tests, the benchmarks and the tools, so that a pattern is written once.
 * Plain C, no arcoll or MPI dependency: MPI programs link it too.
 *
 * A block is what one rank sends to one other in one call. Its bytes are a
 * function of (call, src, dst, offset), so a byte that lands in the wrong
 * place, from the wrong peer or from the wrong call is seen. Blocks every
 * receiver gets alike (allgather forms) use dst = TL_ANY.
 */
#ifndef ARCOLL_TESTS_TL_H
#define ARCOLL_TESTS_TL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TL_ANY (-1)

/* The 8 bytes at offset 8 x w of block (call, src, dst), little-endian. */
uint64_t tl_word(uint64_t call, int src, int dst, size_t w);
/* Byte i of block (call, src, dst). */
uint8_t tl_byte(uint64_t call, int src, int dst, size_t i);
/* Bytes [off, off + len) of block (call, src, dst) into p. */
void tl_fill_at(void *p, size_t off, size_t len, uint64_t call, int src, int dst);
void tl_fill(void *p, size_t len, uint64_t call, int src, int dst);
/* Wrong bytes in p against block (call, src, dst); *first gets the offset
 * of the first (first may be NULL). */
size_t tl_check(const void *p, size_t len, uint64_t call, int src, int dst, size_t *first);
/* An alltoall's send buffer: n blocks of len bytes, block j that of
 * (call, src, j). */
void tl_fill_blocks(void *p, size_t len, int n, uint64_t call, int src);
/* Wrong bytes in n blocks of len bytes, block j against (call, j, dst): an
 * alltoall's receive buffer (dst the receiver) or an allgather's (TL_ANY);
 * *first gets the offset in p of the first (first may be NULL). */
size_t tl_check_blocks(const void *p, size_t len, int n, uint64_t call, int dst, size_t *first);

/* Reductions over int64: element i of rank r's input in call, and the sum
 * of that element over ranks 0..n-1 (small values: no overflow). */
int64_t tl_red_in(uint64_t call, int r, size_t i);
int64_t tl_red_sum(uint64_t call, int n, size_t i);

/* The v-forms' count distributions: how many bytes src sends dst. */
enum {
    TL_DIST_EQUAL,   /* base for every pair */
    TL_DIST_RAGGED,  /* 0 .. 2 x base, different for every pair */
    TL_DIST_ZEROS,   /* every third pair sends nothing, the others base */
    TL_DIST_ONE_BIG, /* rank 0 sends 4 x base, the others base / 4 */
    TL_NDIST
};
extern const char *const tl_dist_names[TL_NDIST];
size_t tl_vcount(int dist, int src, int dst, size_t base, uint64_t salt);

/* Pass/fail counting with one output format: a failure prints
 * "[PREFIX] FAIL what" to stderr; the summary "NAME: P passed, F failed". */
typedef struct tl_tally {
    const char *prefix; /* e.g. "rank 3", or NULL */
    long passed, failed;
} tl_tally_t;

int tl_expect(tl_tally_t *t, int ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* tl_expect printing only the first max failures of t (the others are
 * counted): a run where everything fails does not flood its log. */
int tl_expect_max(tl_tally_t *t, long max, int ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Prints the summary line to f; returns 0 if nothing failed, else 1. */
int tl_summary(const tl_tally_t *t, FILE *f, const char *name);

/* A positive integer from the environment, def when unset; -1 (and a
 * message) when set to something else. */
long tl_env_long(const char *name, long def);

/* Entries of a directory whose name starts with prefix (NULL: all), -1 if it
 * cannot be read: a process's open descriptors, arcoll's names in /dev/shm. */
long tl_count_dir(const char *path, const char *prefix);

#endif
