/* The profiler's state, shared by its two halves (private to them): the
 * engine's recorder (prof_rec.c: a record per call) and the API's exchanges
 * at init and finalize (profile.c: clock offsets, T(size), the file). */
#ifndef ARCOLL_ENGINE_PROF_INT_H
#define ARCOLL_ENGINE_PROF_INT_H

#include "engine/prof.h"

#define PROF_ROUNDS     16        /* clock exchanges; the shortest round trip is kept */
#define PROF_NSIZES     16        /* payload sizes whose T is measured */
#define PROF_SIZE_SET   1024      /* distinct sizes considered before picking PROF_NSIZES */
#define PROF_FIRST_RECS 4096      /* records preallocated; the buffer doubles when full */
#define PROF_T_VOLUME   (8 << 20) /* bytes per size and batch when measuring T */
#define PROF_T_MAXREPS  16        /* calls per size and batch */
#define PROF_T_BATCHES  5
#define PROF_T_WARMUP   2
#define PROF_BOOT_ID    40

typedef struct prof_rec {
    uint64_t arrive_ns, exit_ns; /* local CLOCK_MONOTONIC; exit 0 = never completed */
    uint64_t epoch, bytes;
    const void *site;
    uint32_t team_id, team_size;
    uint32_t leader; /* context rank of team rank 0: tells apart the teams of one split */
    int32_t status;
    uint32_t type;
} prof_rec_t;

/* One clock exchange: rank 0's clock minus ours around local_ns, within err_ns. */
typedef struct prof_sync {
    uint64_t local_ns;
    int64_t offset_ns;
    uint64_t err_ns;
    int valid;
} prof_sync_t;

/* Identity of a CLOCK_MONOTONIC: the running kernel and the time namespace's
 * shift of it. Equal identities read the same clock. */
typedef struct prof_hello {
    uint64_t ok;
    uint64_t seq; /* contexts profiled earlier into this rank's FILE (prof_prefix_uses) */
    int64_t ns_shift;
    char boot_id[PROF_BOOT_ID];
} prof_hello_t;

/* What every rank says at finalize. */
typedef struct prof_bye {
    uint64_t nsizes;
    uint64_t sizes[PROF_NSIZES];
} prof_bye_t;

/* Exchange buffer: one record per rank, for every exchange above. */
typedef union prof_xrec {
    prof_hello_t hello;
    prof_bye_t bye;
    uint64_t stamp;
} prof_xrec_t;

/* Sorted distinct sizes; when full, only the extremes still get in. */
typedef struct prof_sizes {
    uint64_t v[PROF_SIZE_SET];
    unsigned n;
} prof_sizes_t;

struct prof {
    int record;     /* ARCOLL_PROFILE is set on this rank (else: take part only) */
    int same_clock; /* our CLOCK_MONOTONIC is rank 0's: the offset is exactly 0 */
    unsigned seq;   /* FILE.ctx<seq>: agreed by the context's ranks (0: plain FILE) */
    prof_rec_t *recs;
    size_t nrecs, cap;
    uint64_t dropped;
    int warned;
    prof_xrec_t *xbuf;   /* [size], allocated at init: finalize needs no memory to take part */
    prof_sync_t sync[2]; /* at init, at finalize */
    uint64_t tsize[PROF_NSIZES], t_ns[PROF_NSIZES];
    unsigned t_reps[PROF_NSIZES], nt;
    const char *t_method;
    core_config_t cfg0; /* the settings of arcoll_init, for measuring T */
};

#ifdef ARCOLL_FAULTS
/* ARCOLL_FAULT=clock_skew (tests): rank r's clock reads r * 3 ms ahead and
 * runs r * 100 ppm fast, as another host's could, so that the report must
 * rely on the estimated offsets. */
extern uint64_t prof_fault_rank, prof_fault_t0;
#endif

/* CLOCK_MONOTONIC as this rank's profiler sees it. */
static inline uint64_t prof_local(uint64_t t)
{
#ifdef ARCOLL_FAULTS
    if (prof_fault_rank > 0)
        return t + prof_fault_rank * 3000000 + (t - prof_fault_t0) / 10000 * prof_fault_rank;
#endif
    return t;
}

#endif
