/* Size-based algorithm selection (ARCOLL_ALLTOALL_ALG=auto, ARCOLL_ALLGATHER_ALG=auto):
 * the tuning table of ARCOLL_TUNE rules, then the built-in default table
 * (docs/configuration.md, "Tuning table").
 *
 * A rule is COLL:LO-HI[:ppn=A-B][:nodes=A-B][:over=yes|no][:chan=smp|verbs]:@TARGET;
 * rules are separated by '#'. LO-HI are bytes per rank, LO inclusive, HI
 * exclusive (or inf); ppn and nodes are inclusive ranges of the team's shape;
 * over is whether the job has more ranks on a node than processing units
 * (agreed at init); chan is the context's channel. TARGET is an algorithm
 * (an algorithm rule, used with ARCOLL_*_ALG=auto), copy/zcopy (a path
 * rule, used with ARCOLL_PATH=auto and ARCOLL_ZCOPY_THRESHOLD=auto) or
 * mpi/arcoll (a serve rule: whether an embedding MPI library, such as the
 * PMPI shim, should keep the call for itself; arcoll's own API ignores it).
 * The first matching rule of its kind wins. */
#ifndef ARCOLL_CONFIG_TUNE_H
#define ARCOLL_CONFIG_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "chan/chan.h"

/* coll_type_t values; the last two take serve rules only (allgatherv: serve and algorithm
 * rules, by the mean block). */
enum {
    CORE_TUNE_ALLTOALL,
    CORE_TUNE_ALLGATHER,
    CORE_TUNE_ALLTOALLV, /* no rules: no size every rank shares */
    CORE_TUNE_ALLGATHERV,
    CORE_TUNE_REDUCE_SCATTER,
    CORE_TUNE_ALLREDUCE
};

#define CORE_TUNE_MAX         64 /* rules of ARCOLL_TUNE (string or file) */
#define CORE_TUNE_DEFAULT_MAX 64 /* rules of the built-in table */
#define CORE_TUNE_FILE        256
/* Input limits (docs/configuration.md, "Input limits"): an ARCOLL_TUNE value
 * (64 rules of up to 255 characters fit), a tune file and one of its lines. */
#define CORE_TUNE_TEXT_MAX 16384
#define CORE_TUNE_FILE_MAX (1 << 20)
#define CORE_TUNE_LINE_MAX 4096
#define CORE_TUNE_INF      UINT32_MAX /* "inf" as the upper end of ppn/nodes */

/* Serve rules: @arcoll, @mpi (the tune_serves order). */
enum { CORE_TUNE_SERVE_ARCOLL, CORE_TUNE_SERVE_HOST };

typedef struct core_tune_rule {
    int coll;                    /* CORE_TUNE_ALLTOALL or CORE_TUNE_ALLGATHER */
    int alg;                     /* CORE_ALG_*, never auto; -1 in a path rule */
    int path;                    /* CORE_PATH_COPY or _ZCOPY in a path rule; -1 otherwise */
    int serve;                   /* CORE_TUNE_SERVE_* in a serve rule; -1 otherwise */
    int over;                    /* -1 any, 0 not oversubscribed, 1 oversubscribed */
    int chan;                    /* -1 any, or CORE_CHANNEL_* */
    size_t lo, hi;               /* bytes per rank in [lo, hi); hi == SIZE_MAX: no bound */
    uint32_t ppn_lo, ppn_hi;     /* ranks per node, inclusive */
    uint32_t nodes_lo, nodes_hi; /* nodes, inclusive */
} core_tune_rule_t;

typedef struct core_tune {
    uint32_t n;                /* rules in all */
    uint32_t nuser;            /* rule[0 .. nuser): ARCOLL_TUNE; the rest: the default table */
    char file[CORE_TUNE_FILE]; /* the rules came from this file; "" otherwise */
    core_tune_rule_t rule[CORE_TUNE_MAX + CORE_TUNE_DEFAULT_MAX];
} core_tune_t;

/* Paths, as settings and rules name them (config.h); the channels are chan/chan.h's. */
enum { CORE_PATH_COPY, CORE_PATH_ZCOPY, CORE_PATH_AUTO };

/* The shape of a team as the table sees it: every member computes the same. */
typedef struct core_tune_shape {
    uint32_t nodes, ppn; /* nodes, and ranks on the fullest node */
    int equal;           /* every node holds ppn ranks */
    int over;            /* the job is oversubscribed (agreed at init) */
    int chan;            /* CORE_CHANNEL_* */
    int heap;            /* one node, every member maps the node heap (hier_t.heap) */
} core_tune_shape_t;

/* Set the table from an ARCOLL_TUNE value: "default" (the built-in table
 * only), '#'-separated rules, or a file (file:PATH, /PATH, ./PATH). On error
 * the table is unchanged and the message names the rule and what is wrong. */
int core_tune_set(core_tune_t *tab, const char *value);
/* The same for the contents of a tune file in memory (name: for the
 * messages), as file:PATH reads it; the entry point of tests/fuzz. */
int core_tune_file_parse_buf(core_tune_t *tab, const char *name, const void *buf, size_t len);
/* Render the value: "default", "file:PATH" or the rules in canonical form
 * (accepted back by core_tune_set); returns buf. */
const char *core_tune_get(const core_tune_t *tab, char *buf, size_t len);
/* Fold the rules (not their spelling or file name) into an FNV-1a hash. */
uint64_t core_tune_digest(const core_tune_t *tab, uint64_t h);
/* One line saying where the rules come from, for arcoll_info. */
const char *core_tune_source(const core_tune_t *tab, char *buf, size_t len);

/* Whether an algorithm can run on the shape: the node algorithms need a node
 * holding two ranks, sa/sa_direct/rd also equal nodes, sh_co one node whose
 * ranks share the node heap (a call whose buffers are elsewhere runs as pap). */
int core_tune_fits(int alg, const core_tune_shape_t *shape);
/* The algorithm for a call: the first rule that matches the collective, size
 * and shape and whose algorithm fits the shape; pap if none does. */
int core_tune_pick(const core_tune_t *tab, int coll, size_t bytes, const core_tune_shape_t *shape);
/* The path of the first matching path rule (CORE_PATH_COPY or _ZCOPY), -1 if
 * none matches. */
int core_tune_path(const core_tune_t *tab, int coll, size_t bytes, const core_tune_shape_t *shape);

/* Whether the first matching serve rule is @mpi (the embedding MPI library
 * keeps the call): 1 yes, 0 for @arcoll or no matching rule. */
int core_tune_host(const core_tune_t *tab, int coll, size_t bytes, const core_tune_shape_t *shape);

#endif
