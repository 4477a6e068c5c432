/*
 * The one list of algorithms: its CORE_ALG_* id, its configuration name and
 * its ops table (coll_alg_<name>, defined in the algorithm's own file).
 * Adding an algorithm: write its file, add one X() line here.
 */
#ifndef ARCOLL_CONFIG_ALGS_H
#define ARCOLL_CONFIG_ALGS_H

/* Collectives an algorithm serves (bits of coll_type_t, engine/req.h). */
#define ALGS_A2A  0x01u
#define ALGS_AG   0x02u
#define ALGS_A2AV 0x04u
#define ALGS_AGV  0x08u
#define ALGS_RS   0x10u
#define ALGS_AR   0x20u
#define ALGS_ALL  0x3fu

#define CORE_ALG_LIST(X)                                                                           \
    X(DIRECT, direct, ALGS_ALL) /* linear, arrival-oblivious (Qian and Afsahi) */                  \
    X(PAP, pap, ALGS_ALL)       /* PAP_Direct (Qian and Afsahi) */                                 \
    X(SHM_DIRECT, shm_direct, ALGS_A2A | ALGS_AG) /* node masters, Direct (Qian and Afsahi 4.4) */ \
    X(PAP_SHM, pap_shm, ALGS_A2A | ALGS_AG)       /* node masters, PAP (Qian and Afsahi 4.5) */    \
    X(SA, sa, ALGS_A2A)               /* non-leader send-side aggregation (Kumar et al.) */        \
    X(SA_DIRECT, sa_direct, ALGS_A2A) /* the same with a Direct step 2 */                          \
    X(RD, rd, ALGS_A2A)               /* receive-side distribution (Kumar et al.) */               \
    X(LEADER, leader, ALGS_A2A)       /* one leader per node, Direct (Kumar et al.) */             \
    X(RING, ring, ALGS_AG | ALGS_AGV | ALGS_RS | ALGS_AR) /* ring (Sack 2011's baseline) */        \
    X(RDD, rdd, ALGS_AG | ALGS_AGV | ALGS_RS | ALGS_AR)   /* recursive doubling/halving */         \
    X(RDH, rdh, ALGS_AG | ALGS_AGV | ALGS_RS | ALGS_AR)   /* distance-halving (Sack 2011) */       \
    X(SH_CO, sh_co, ALGS_A2A | ALGS_AG | ALGS_AGV) /* same-address copy, Morton (Li et al.) */     \
    X(MN_CO, mn_co, ALGS_A2A | ALGS_AG)            /* two rounds, Morton owners (Li et al.) */     \
    X(MN_COX, mn_cox, ALGS_A2A | ALGS_AG) /* node masters, mn_co among them (Li et al.) */         \
    X(SLOAV, sloav, ALGS_A2AV)            /* logarithmic alltoallv (Xu et al.) */                  \
    X(SLOAVX, sloavx, ALGS_A2AV)          /* its node-leader form (Xu et al. IV) */

#define CORE_ALG_ENUM(id, name, colls) CORE_ALG_##id,

/* Algorithms: the list above, then auto (by size and job shape from the
 * tuning table). */
enum { CORE_ALG_LIST(CORE_ALG_ENUM) CORE_ALG_AUTO, CORE_ALG_COUNT };

/* "pap", "sa", ... for a CORE_ALG_* value (algs.c). */
const char *core_alg_name(int alg);
/* Does the algorithm serve the collective (COLL_* of engine/req.h)? auto serves all. */
int core_alg_serves(int alg, int coll);

/* The collectives, in the order of CORE_COLL_LIST below. */
typedef enum {
    COLL_ALLTOALL = 0,
    COLL_ALLGATHER,
    COLL_ALLTOALLV,
    COLL_ALLGATHERV,
    COLL_REDUCE_SCATTER, /* reduce_scatter_block */
    COLL_ALLREDUCE,
    COLL_NTYPES,
    COLL_SENDRECV = COLL_NTYPES /* engine-internal: one exchange (team split) */
} coll_type_t;

/* The one list of collectives: its coll_type_t (engine/req.h), its name in settings
 * (ARCOLL_<NAME>_ALG, ARCOLL_TUNE), its name in logs and profiles, and its ALGS_* bit. */
#define CORE_COLL_LIST(X)                                                   \
    X(COLL_ALLTOALL, alltoall, "alltoall", ALGS_A2A)                        \
    X(COLL_ALLGATHER, allgather, "allgather", ALGS_AG)                      \
    X(COLL_ALLTOALLV, alltoallv, "alltoallv", ALGS_A2AV)                    \
    X(COLL_ALLGATHERV, allgatherv, "allgatherv", ALGS_AGV)                  \
    X(COLL_REDUCE_SCATTER, reduce_scatter, "reduce_scatter_block", ALGS_RS) \
    X(COLL_ALLREDUCE, allreduce, "allreduce", ALGS_AR)

#endif
