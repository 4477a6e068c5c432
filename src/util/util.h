/* Utilities every layer may call (nothing here calls anything of arcoll's
 * but the log): the clock, the status strings (arcoll_strerror, in
 * arcoll.h) and the fault switches of the test builds. */
#ifndef ARCOLL_UTIL_UTIL_H
#define ARCOLL_UTIL_UTIL_H

#include <stdint.h>

/* CLOCK_MONOTONIC in ns. The engine's own clock is eng_time_ns (a channel
 * may keep virtual time); this one is the host's. */
uint64_t core_time_ns(void);
/* The same clock at its tick (a few ms; CLOCK_MONOTONIC_COARSE, a few ns to read), never ahead
 * of core_time_ns: for deadlines, not for measuring. */
uint64_t core_time_coarse_ns(void);

#ifdef ARCOLL_FAULTS
/* ARCOLL_FAULT (tests; coll_test_fault and the fault builds only): each
 * switch breaks one rule on purpose, so that a test can show it is caught.
 * Set once by core_faults_set at context creation. */
extern int wire_fault_one_bank;    /* one epoch bank for every call (protocol.md §5) */
extern int wire_fault_no_epoch;    /* flags keep the fragment, lose the epoch */
extern int wire_fault_reg_fail;    /* zero-copy registration fails */
extern int wire_fault_bad_rkey;    /* a zero-copy write uses a wrong key */
extern int wire_fault_hello_drop;  /* 1: every other HELLO lost; 2: all */
extern int wire_fault_heapmr_fail; /* the heap MR cannot be made */
extern int eng_fault_fail_call;    /* context rank 1 fails a call after 300 ms */
/* The last context rank, in its third zero-copy call, stalls for 2 x
 * ARCOLL_TIMEOUT_MS between its last look at a receiver's advertisement and
 * its write (issue 40: a writer slower than the receiver's timeout). */
extern int wire_fault_zc_stall;
void core_faults_set(const char *spec);
#endif

#endif
