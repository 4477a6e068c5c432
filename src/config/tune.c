#include "config/tune.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "arcoll.h"
#include "config/algs.h"
#include "util/log.h"
#include "util/size.h"
#include "util/textio.h"

/*
 * The built-in table, consulted after the ARCOLL_TUNE rules: one rule per
 * line, in the ARCOLL_TUNE syntax and parsed by the same code at init (so a
 * typo here fails test_tune, not a job). Measured (docs/configuration.md
 * "Tuning table"): 8 ranks as 4x2 and 2x4 pretend nodes on a 2-core host,
 * 64 B-64 KiB, MIF 0 and 32: pap was fastest nearly everywhere; of the node
 * algorithms sa came closest (pap/sa 0.6-1.0), then rd, sa_direct, pap_shm,
 * leader. Pretend nodes share one memory, so the inter-node step costs what
 * the intra-node one does: the rules for 2+ nodes over a NIC (chan=verbs,
 * over=no) come from the scale simulator instead (bench/sim-tune.sh).
 * The sh_co rules come first: they apply only where one node's ranks share
 * the node heap (core_tune_fits); measured with bench/heap-sweep.sh
 * (docs/measurements/sh-co.md).
 */
static const char tune_default[] = "alltoall:2k-inf:nodes=1:over=no:@sh_co#"
                                   "allgather:2k-inf:nodes=1:over=no:@sh_co#"
                                   "alltoall:16k-inf:nodes=1:over=yes:@sh_co#"
                                   "allgather:16k-inf:nodes=1:over=yes:@sh_co#"
                                   /* allgatherv by the mean block, packed blocks (else
                                    * it runs as pap): np=2, realistic mode, sh_co/pap
                                    * 0.97 at 4 KiB, 0.59-0.90 at 16-64 KiB, 0.86-1.0
                                    * above; at np=4 (over=yes) 0.84-1.08: no rule. */
                                   "allgatherv:16k-inf:nodes=1:over=no:@sh_co#"
                                   /* 2+ nodes over a NIC, from the simulator:
                                    * bench/sim-tune.sh build out, params ib-edr,
                                    * intra-node copies free (docs/scale.md, "Tuning at
                                    * scale"; NxP: N nodes of P ranks, x: pap/winner). */
                                   /* alltoall 2x2 sa 1.25 at 8-512 B; 2x4 rd 1.94, sa
                                    * 1.68 at 512; 2x8 rd 3.6, sa 1.75 at 512; 4x4 rd
                                    * 2.8, pap_shm 3.1 (sa 2.5) at 512; 8x8 sa 6.6 at 8 B,
                                    * 1.89 at 512; sa and rd within 4% of each other below
                                    * 1 KiB; pap (or a tie) from 4 KiB on every shape. */
                                   /* mn_cox (bench/sim-tune.sh cells, --bounce 4096;
                                    * docs/scale.md "004"): from 16 nodes, while a node
                                    * pair's block (ppn^2 x B) stays near 512 B; x over
                                    * the best other: 16x2 1.12-1.25, 64x2 1.06-1.36 at
                                    * 8-64 B (mn_co from 128 B); 16x3, 64x3, 16x4, 64x4
                                    * 1.08-1.62 at 8-32 B (a tie or a loss at 64 B);
                                    * 16x6, 32x6, 16x8, 32x8, 64x8 1.32-1.87 at 8 B (0.76-
                                    * 1.27 at 16 B). Below 16 nodes sa wins (0.6-1.0). */
                                   "alltoall:0-128:ppn=2:nodes=16-inf:over=no:chan=verbs:@mn_cox#"
                                   "alltoall:0-64:ppn=3-4:nodes=16-inf:over=no:chan=verbs:@mn_cox#"
                                   "alltoall:0-16:ppn=5-8:nodes=16-inf:over=no:chan=verbs:@mn_cox#"
                                   "alltoall:0-1k:ppn=2-8:nodes=2-8:over=no:chan=verbs:@sa#"
                                   /* 4x16 sa 10.6 at 8 B, 1.13 at 512; 16x16 sa 14 at 8 B,
                                    * 6.4 at 64, 1.09 at 512: pap from 512 B. */
                                   "alltoall:0-512:ppn=2-inf:nodes=2-inf:over=no:chan=verbs:@sa#"
                                   /* allgather mn_cox (--bounce 4096, docs/scale.md
                                    * "004"), x over the best other: 16x2 1.17-1.28 to
                                    * 256 B, 64x2 1.08-1.13 to 256 B (0.90 at 512);
                                    * 16x4, 64x4 1.15-1.45 to 128 B (64x4 a tie at 256);
                                    * 16x8, 32x8, 16x16 1.32-1.57 at 8-64 B (0.80-1.37 at
                                    * 128). Below 16 nodes pap_shm (0.64-1.07). */
                                   "allgather:0-512:ppn=2:nodes=16-inf:over=no:chan=verbs:@"
                                   "mn_cox#"
                                   "allgather:0-256:ppn=3-4:nodes=16-inf:over=no:chan=verbs:@"
                                   "mn_cox#"
                                   "allgather:0-128:ppn=5-16:nodes=16-inf:over=no:chan=verbs:@"
                                   "mn_cox#"
                                   /* allgather 2x2 1.25, 2x4 1.9-2.0, 2x8 3.6, 4x4 2.8-2.9
                                    * at 8-512 B (4 KiB too, but there the free copies
                                    * decide). */
                                   "allgather:0-1k:ppn=2-inf:nodes=2-inf:over=no:chan=verbs:@"
                                   "pap_shm#"
                                   /* Re-swept with node copies charged (2026-11-26): at
                                    * 4 KiB pap_shm still wins with 4+ ranks per node, 2x4
                                    * 1.10, 2x8 1.32, 4x4 1.63, 8x8 2.85, 4x16 4.02, 16x16
                                    * 4.45; 2x2 pap (1.14). */
                                   "allgather:1k-8k:ppn=4-inf:nodes=2-inf:over=no:chan=verbs:@"
                                   "pap_shm#"
                                   /* One rank per node: mn_co at 16x1 1.64 at 8 B, 1.25 at
                                    * 1 KiB, even at 2 KiB; 64x1 3.7 at 8 B, 1.33 at 1 KiB,
                                    * pap 1.32 faster at 2 KiB; 2x1 and 4x1: pap. */
                                   "alltoall:0-1536:ppn=1:nodes=16-inf:over=no:chan=verbs:@mn_co#"
                                   /* allgather 16x1 mn_co 1.64 at 8 B, 1.12 at 4 KiB; 64x1
                                    * 3.7 at 8 B, 1.29 at 2 KiB, pap 1.15 faster at 4 KiB. */
                                   "allgather:0-3k:ppn=1:nodes=16-inf:over=no:chan=verbs:@mn_co#"
                                   "alltoall:0-inf:@pap#"
                                   "allgather:0-inf:@pap#"
                                   /* Path rules: TUNE_BENCH=shim bench/arcoll-tune.sh
                                    * build t 2 4 (docs/configuration.md, "The default
                                    * table"). */
                                   "alltoall:0-32k:over=no:chan=smp:@copy#"
                                   "alltoall:32k-inf:over=no:chan=smp:@zcopy#"
                                   "allgather:0-32k:over=no:chan=smp:@copy#"
                                   "allgather:32k-inf:over=no:chan=smp:@zcopy#"
                                   "alltoall:0-32k:over=yes:chan=smp:@copy#"
                                   "alltoall:32k-inf:over=yes:chan=smp:@zcopy#"
                                   "allgather:0-32k:over=yes:chan=smp:@copy#"
                                   "allgather:32k-inf:over=yes:chan=smp:@zcopy#"
                                   /* Serve rules, for the PMPI shim: with ranks <= cores,
                                    * 1-256 B per peer measured 1.14-1.44x slower than Open
                                    * MPI's vader (docs/performance.md), so the shim passes
                                    * those calls to it. */
                                   "alltoall:0-512:over=no:chan=smp:@mpi#"
                                   "allgather:0-512:over=no:chan=smp:@mpi#"
                                   /* allreduce: Open MPI measured faster below 4 KiB at 2
                                    * and 4 ranks, MIF 0 and 32
                                    * (docs/measurements/new-collectives.md). */
                                   "allreduce:0-4k:chan=smp:@mpi#"
                                   /* allgatherv (the mean block) and reduce_scatter_block
                                    * (the block) with ranks <= cores: 1-256 B measured
                                    * 1.53-2.29x and 1.76-1.91x Open MPI's time, 1 KiB 1.16x
                                    * and 0.97x, 4 KiB on faster (arcoll-mpi-lat -R, np=2,
                                    * docs/performance.md, "Realistic buffer use"); at 4
                                    * ranks on 2 cores arcoll was as fast or faster. */
                                   "allgatherv:0-2k:over=no:chan=smp:@mpi#"
                                   "reduce_scatter:0-1k:over=no:chan=smp:@mpi#"
                                   /* 4 ranks on fewer cores: Open MPI switches to a faster
                                    * algorithm at 32-128 B blocks (2.8-3.0 us against its
                                    * 3.7 us at 8-16 B; arcoll's pap 3.4-3.9 us, rdh, rdd
                                    * and ring no better): 1.13-1.28x there, 1.04-1.07x
                                    * handed to it (realistic mode, 3 rounds); 8 ranks on 2
                                    * cores measured 1.03 at 32-64 B and 0.75 at 128 B, so
                                    * the rule names 4. */
                                   "reduce_scatter:32-256:ppn=4:nodes=1:over=yes:chan=smp:@mpi";

#define TUNE_RULE_LEN 256 /* characters of one rule */

/* The collectives' setting names (config/algs.h); alltoallv has no size every rank shares,
 * so no rules name it. */
#define TUNE_COLL_NAME(type, name, shown, bit) [type] = #name,
static const char *const tune_colls[] = {CORE_COLL_LIST(TUNE_COLL_NAME)};
#undef TUNE_COLL_NAME
#define TUNE_NCOLLS (int)(sizeof(tune_colls) / sizeof(tune_colls[0]))

/* Where the text being parsed comes from, for the messages. */
typedef struct tune_src {
    const char *what; /* "ARCOLL_TUNE", "ARCOLL_TUNE file PATH", ... */
    unsigned line;    /* line of a file; 0: not a file */
} tune_src_t;

static int tune_fail(const tune_src_t *src, unsigned idx, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int tune_fail(const tune_src_t *src, unsigned idx, const char *rule, const char *fmt, ...)
{
    char msg[320];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (src->line)
        log_err("%s line %u, rule %u \"%.80s\": %s", src->what, src->line, idx, rule, msg);
    else
        log_err("%s rule %u \"%.80s\": %s", src->what, idx, rule, msg);
    return ARCOLL_ERR_CONFIG;
}

/* "LO-HI" in bytes per rank: LO inclusive, HI exclusive or inf. */
static int tune_bytes(const char *s, size_t *lo, size_t *hi)
{
    char buf[64];
    const char *dash = strchr(s, '-');
    size_t n = dash != NULL ? (size_t)(dash - s) : 0;

    if (dash == NULL || n >= sizeof(buf))
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (core_config_parse_size(buf, lo) != 0)
        return -1;
    if (strcasecmp(dash + 1, "inf") == 0) {
        *hi = SIZE_MAX;
        return 0;
    }
    return core_config_parse_size(dash + 1, hi);
}

static int tune_count_one(const char *s, size_t n, int inf_ok, uint32_t *out)
{
    unsigned long long v = 0;

    if (inf_ok && n == 3 && strncasecmp(s, "inf", 3) == 0) {
        *out = CORE_TUNE_INF;
        return 0;
    }
    if (n == 0 || n > 10)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (unsigned long long)(s[i] - '0');
    }
    if (v < 1 || v >= CORE_TUNE_INF)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* "A" or "A-B" (inclusive), A >= 1, B a number or inf. */
static int tune_count(const char *s, uint32_t *lo, uint32_t *hi)
{
    const char *dash = strchr(s, '-');

    if (dash == NULL) {
        if (tune_count_one(s, strlen(s), 0, lo) != 0)
            return -1;
        *hi = *lo;
        return 0;
    }
    if (tune_count_one(s, (size_t)(dash - s), 0, lo) != 0 ||
        tune_count_one(dash + 1, strlen(dash + 1), 1, hi) != 0)
        return -1;
    return 0;
}

static int tune_alg(const char *name)
{
    for (int a = 0; a < CORE_ALG_COUNT; a++)
        if (strcasecmp(name, core_alg_name(a)) == 0)
            return a;
    return -1;
}

/* "yes"/"no" (over=) or a channel name (chan=): the value, -1 if not valid. */
static int tune_word(const char *arg, const char *const *words, int n)
{
    for (int i = 0; i < n; i++)
        if (strcasecmp(arg, words[i]) == 0)
            return i;
    return -1;
}

static const char *const tune_yesno[] = {"no", "yes"};
static const char *const tune_chans[] = {"smp", "verbs"};   /* CORE_CHANNEL_* order */
static const char *const tune_paths[] = {"copy", "zcopy"};  /* CORE_PATH_* order */
static const char *const tune_serves[] = {"arcoll", "mpi"}; /* CORE_TUNE_SERVE_* order */

/* The conditions between the byte range and the target. */
static int tune_conds_parse(core_tune_rule_t *r, char **f, int nf, const char *text,
                            const tune_src_t *src, unsigned idx)
{
    int have_ppn = 0, have_nodes = 0;

    r->ppn_lo = r->nodes_lo = 1;
    r->ppn_hi = r->nodes_hi = CORE_TUNE_INF;
    r->over = r->chan = -1;
    for (int i = 2; i < nf - 1; i++) {
        uint32_t *lo, *hi;
        int *seen;
        const char *arg;
        if (strncasecmp(f[i], "over=", 5) == 0 || strncasecmp(f[i], "chan=", 5) == 0) {
            int is_over = tolower((unsigned char)f[i][0]) == 'o';
            int *dst = is_over ? &r->over : &r->chan;
            if (*dst >= 0)
                return tune_fail(src, idx, text, "condition \"%s\" given twice", f[i]);
            *dst =
                is_over ? tune_word(f[i] + 5, tune_yesno, 2) : tune_word(f[i] + 5, tune_chans, 2);
            if (*dst < 0)
                return tune_fail(src, idx, text, "bad condition \"%s\": expected %s", f[i],
                                 is_over ? "over=yes or over=no" : "chan=smp or chan=verbs");
            continue;
        }
        if (strncasecmp(f[i], "ppn=", 4) == 0) {
            lo = &r->ppn_lo, hi = &r->ppn_hi, seen = &have_ppn, arg = f[i] + 4;
        } else if (strncasecmp(f[i], "nodes=", 6) == 0) {
            lo = &r->nodes_lo, hi = &r->nodes_hi, seen = &have_nodes, arg = f[i] + 6;
        } else {
            return tune_fail(src, idx, text,
                             "unknown condition \"%s\": allowed are ppn=A-B, nodes=A-B, "
                             "over=yes|no and chan=smp|verbs",
                             f[i]);
        }
        if ((*seen)++)
            return tune_fail(src, idx, text, "condition \"%s\" given twice", f[i]);
        if (tune_count(arg, lo, hi) != 0 || *lo > *hi)
            return tune_fail(src, idx, text,
                             "bad range \"%s\": expected A or A-B, inclusive, with 1 <= A <= B "
                             "(B may be inf)",
                             f[i]);
    }
    return ARCOLL_OK;
}

/* One rule, already cut out and trimmed. */
static int tune_rule_parse(core_tune_rule_t *r, char *rule, const tune_src_t *src, unsigned idx)
{
    char text[TUNE_RULE_LEN], *f[8];
    int nf = 0, rc;

    snprintf(text, sizeof(text), "%s", rule); /* rule is cut into fields below */
    for (char *p = rule; nf < 8; nf++) {
        f[nf] = p;
        p = strchr(p, ':');
        if (p == NULL) {
            nf++;
            break;
        }
        *p++ = '\0';
    }
    if (nf < 3 || f[nf - 1][0] != '@')
        return tune_fail(src, idx, text,
                         "expected COLL:LO-HI[:ppn=A-B][:nodes=A-B][:over=yes|no][:chan=smp|verbs]"
                         ":@ALG, :@copy|zcopy or :@mpi|arcoll (the target last, after '@')");
    memset(r, 0, sizeof(*r));
    r->coll = -1;
    for (int c = 0; c < TUNE_NCOLLS; c++)
        if (c != CORE_TUNE_ALLTOALLV && strcasecmp(f[0], tune_colls[c]) == 0)
            r->coll = c;
    if (r->coll < 0)
        return tune_fail(src, idx, text,
                         "unknown collective \"%s\"; allowed: alltoall, allgather, allgatherv, "
                         "and for serve rules (@mpi, @arcoll) also reduce_scatter, allreduce",
                         f[0]);
    if (tune_bytes(f[1], &r->lo, &r->hi) != 0)
        return tune_fail(src, idx, text,
                         "bad byte range \"%s\": expected LO-HI in bytes per rank (suffix k, m or "
                         "g allowed; HI may be inf), e.g. 0-256 or 64k-inf",
                         f[1]);
    if (r->lo >= r->hi)
        return tune_fail(src, idx, text,
                         "byte range \"%s\" is empty: LO must be below HI (LO inclusive, HI "
                         "exclusive)",
                         f[1]);
    rc = tune_conds_parse(r, f, nf, text, src, idx);
    if (rc != ARCOLL_OK)
        return rc;
    r->serve = tune_word(f[nf - 1] + 1, tune_serves, 2);
    r->path = tune_word(f[nf - 1] + 1, tune_paths, 2);
    if (r->serve >= 0 || (r->path >= 0 && r->coll <= CORE_TUNE_ALLGATHER)) {
        r->alg = -1; /* a path or serve rule */
        return ARCOLL_OK;
    }
    if (r->coll > CORE_TUNE_ALLGATHERV)
        return tune_fail(src, idx, text,
                         "%s takes serve rules only (@mpi or @arcoll): its algorithm is "
                         "ARCOLL_%s_ALG's",
                         tune_colls[r->coll],
                         r->coll == CORE_TUNE_ALLREDUCE ? "ALLREDUCE" : "REDUCE_SCATTER");
    r->alg = tune_alg(f[nf - 1] + 1);
    if (r->alg < 0)
        return tune_fail(src, idx, text,
                         "unknown algorithm \"%s\"; allowed: direct, pap, shm_direct, "
                         "pap_shm, sa, sa_direct, rd, leader, ring, rdd, rdh (or a path rule's "
                         "copy, zcopy, or a serve rule's mpi, arcoll)",
                         f[nf - 1] + 1);
    if (r->alg == CORE_ALG_AUTO)
        return tune_fail(src, idx, text, "auto cannot be a rule's algorithm: name the one to run");
    if (!core_alg_serves(r->alg, r->coll))
        return tune_fail(src, idx, text, "%s does not serve %s", core_alg_name(r->alg),
                         tune_colls[r->coll]);
    return ARCOLL_OK;
}

/* '#'-separated rules appended to tab, up to max rules in all. */
static int tune_text_parse(core_tune_t *tab, uint32_t max, const char *text, const tune_src_t *src)
{
    const char *p = text;

    for (unsigned idx = 1;; idx++) {
        const char *end = strchr(p, '#');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        char rule[TUNE_RULE_LEN];
        int rc;

        while (len > 0 && isspace((unsigned char)*p))
            p++, len--;
        while (len > 0 && isspace((unsigned char)p[len - 1]))
            len--;
        snprintf(rule, sizeof(rule), "%.*s", (int)(len < sizeof(rule) ? len : sizeof(rule) - 1), p);
        if (len >= sizeof(rule))
            return tune_fail(src, idx, rule, "longer than %zu characters", sizeof(rule) - 1);
        if (len == 0)
            return tune_fail(src, idx, rule,
                             "empty rule (a '#' at the start or end, or two in a row)");
        if (tab->n >= max)
            return tune_fail(src, idx, rule, "more than %u rules", max - tab->nuser);
        rc = tune_rule_parse(&tab->rule[tab->n], rule, src, idx);
        if (rc != ARCOLL_OK)
            return rc;
        tab->n++;
        if (end == NULL)
            return ARCOLL_OK;
        p = end + 1;
    }
}

/* Lines of a tune file: '#'-separated rules per line; blank lines and lines
 * whose first non-blank character is ';' are skipped. t's limits bound what
 * is read (CORE_TUNE_FILE_MAX in all, CORE_TUNE_LINE_MAX per line). */
static int tune_lines_parse(core_tune_t *tab, core_text_t *t, const char *what)
{
    tune_src_t src = {what, 0};
    char line[CORE_TUNE_LINE_MAX + 1];
    int rc = ARCOLL_OK, got;

    while (rc == ARCOLL_OK && (got = core_text_line(t, line, sizeof(line))) > 0) {
        const char *p = line;
        src.line = (unsigned)t->line;
        while (isspace((unsigned char)*p))
            p++;
        if (*p == '\0' || *p == ';')
            continue;
        rc = tune_text_parse(tab, CORE_TUNE_MAX, line, &src);
    }
    if (rc != ARCOLL_OK)
        return rc;
    switch (got) {
    case 0: return ARCOLL_OK;
    case CORE_TEXT_LONG:
        log_err("%s line %lu: longer than %d characters (the limit of a line)", what, t->line + 1,
                CORE_TUNE_LINE_MAX);
        break;
    case CORE_TEXT_BIG:
        log_err("%s line %lu: the file is larger than %d bytes (the limit of a tune file)", what,
                t->line + 1, CORE_TUNE_FILE_MAX);
        break;
    case CORE_TEXT_BINARY:
        log_err("%s line %lu: a NUL byte (a tune file is text)", what, t->line + 1);
        break;
    default: log_err("%s line %lu: read error: %s", what, t->line + 1, strerror(errno));
    }
    return ARCOLL_ERR_CONFIG;
}

static int tune_file_parse(core_tune_t *tab, const char *path)
{
    char what[CORE_TUNE_FILE + 32];
    core_text_t t;
    int rc;

    snprintf(what, sizeof(what), "ARCOLL_TUNE file %s", path);
    if (core_text_open(&t, path, CORE_TUNE_FILE_MAX) != 0) {
        if (errno == EFBIG)
            log_err("%s: larger than %d bytes (the limit of a tune file)", what,
                    CORE_TUNE_FILE_MAX);
        else if (errno == EINVAL)
            log_err("%s: not a regular file (devices and FIFOs are refused)", what);
        else
            log_err("%s: cannot open it: %s", what, strerror(errno));
        return ARCOLL_ERR_CONFIG;
    }
    rc = tune_lines_parse(tab, &t, what);
    core_text_close(&t);
    return rc;
}

/* The user's rules in t, then the built-in table; *tab only on success. */
static int tune_finish(core_tune_t *tab, core_tune_t *t)
{
    static const tune_src_t dflt = {"built-in tuning table (src/config/tune.c)", 0};
    int rc;

    t->nuser = t->n;
    rc = tune_text_parse(t, t->nuser + CORE_TUNE_DEFAULT_MAX, tune_default, &dflt);
    if (rc != ARCOLL_OK)
        return rc;
    *tab = *t;
    return ARCOLL_OK;
}

int core_tune_set(core_tune_t *tab, const char *value)
{
    static const tune_src_t env = {"ARCOLL_TUNE", 0};
    core_tune_t t;
    const char *path = NULL;
    size_t len;
    int rc = ARCOLL_OK;

    if (value == NULL) {
        log_err("ARCOLL_TUNE=(null) is not valid; expected default, rules "
                "COLL:LO-HI[:CONDITION...]:@TARGET separated by '#', or file:PATH");
        return ARCOLL_ERR_CONFIG;
    }
    len = strnlen(value, CORE_TUNE_TEXT_MAX + 1);
    if (len > CORE_TUNE_TEXT_MAX) {
        log_err("ARCOLL_TUNE=%.40s...: longer than %d characters (the limit of the value; put "
                "more rules in a file)",
                value, CORE_TUNE_TEXT_MAX);
        return ARCOLL_ERR_CONFIG;
    }
    memset(&t, 0, sizeof(t));
    if (strncmp(value, "file:", 5) == 0)
        path = value + 5;
    else if (value[0] == '/' || strncmp(value, "./", 2) == 0)
        path = value;
    if (path != NULL) {
        if (path[0] == '\0' || strlen(path) >= sizeof(t.file)) {
            log_err("ARCOLL_TUNE=%.300s: expected file:PATH with a path of 1 to %zu characters",
                    value, sizeof(t.file) - 1);
            return ARCOLL_ERR_CONFIG;
        }
        snprintf(t.file, sizeof(t.file), "%s", path);
        rc = tune_file_parse(&t, path);
    } else if (strcasecmp(value, "default") != 0) {
        rc = tune_text_parse(&t, CORE_TUNE_MAX, value, &env);
    }
    if (rc != ARCOLL_OK)
        return rc;
    return tune_finish(tab, &t);
}

int core_tune_file_parse_buf(core_tune_t *tab, const char *name, const void *buf, size_t len)
{
    char what[CORE_TUNE_FILE + 32];
    core_text_t text;
    core_tune_t t;
    FILE *f;
    int rc;

    snprintf(what, sizeof(what), "ARCOLL_TUNE file %s", name);
    memset(&t, 0, sizeof(t));
    snprintf(t.file, sizeof(t.file), "%s", name);
    /* fmemopen refuses an empty buffer: an empty file holds no rules. */
    f = len > 0 ? fmemopen((void *)(uintptr_t)buf, len, "r") : NULL;
    if (f == NULL && len > 0) {
        log_err("%s: cannot read it: %s", what, strerror(errno));
        return ARCOLL_ERR_NOMEM;
    }
    if (f != NULL) {
        core_text_init(&text, f, CORE_TUNE_FILE_MAX);
        rc = tune_lines_parse(&t, &text, what);
        core_text_close(&text);
        if (rc != ARCOLL_OK)
            return rc;
    }
    return tune_finish(tab, &t);
}

/* snprintf that appends and never overruns. */
static void tune_cat(char *buf, size_t len, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void tune_cat(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (*used >= len)
        return;
    va_start(ap, fmt);
    n = vsnprintf(buf + *used, len - *used, fmt, ap);
    va_end(ap);
    *used = n < 0 ? len : *used + (size_t)n;
}

static const char *tune_size_str(size_t v, char *buf, size_t len)
{
    static const char sfx[] = "gmk";

    if (v == SIZE_MAX) {
        snprintf(buf, len, "inf");
        return buf;
    }
    for (int i = 0; i < 3; i++) {
        size_t unit = (size_t)1 << (10 * (3 - i));
        if (v != 0 && v % unit == 0) {
            snprintf(buf, len, "%zu%c", v / unit, sfx[i]);
            return buf;
        }
    }
    snprintf(buf, len, "%zu", v);
    return buf;
}

static void tune_cat_count(char *buf, size_t len, size_t *used, const char *name, uint32_t lo,
                           uint32_t hi)
{
    if (lo == 1 && hi == CORE_TUNE_INF)
        return; /* no condition */
    if (lo == hi)
        tune_cat(buf, len, used, ":%s=%u", name, lo);
    else if (hi == CORE_TUNE_INF)
        tune_cat(buf, len, used, ":%s=%u-inf", name, lo);
    else
        tune_cat(buf, len, used, ":%s=%u-%u", name, lo, hi);
}

const char *core_tune_get(const core_tune_t *tab, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    if (tab->file[0] != '\0') {
        snprintf(buf, len, "file:%s", tab->file);
        return buf;
    }
    if (tab->nuser == 0) {
        snprintf(buf, len, "default");
        return buf;
    }
    for (uint32_t i = 0; i < tab->nuser; i++) {
        const core_tune_rule_t *r = &tab->rule[i];
        char lo[32], hi[32];
        tune_cat(buf, len, &used, "%s%s:%s-%s", i ? "#" : "", tune_colls[r->coll],
                 tune_size_str(r->lo, lo, sizeof(lo)), tune_size_str(r->hi, hi, sizeof(hi)));
        tune_cat_count(buf, len, &used, "ppn", r->ppn_lo, r->ppn_hi);
        tune_cat_count(buf, len, &used, "nodes", r->nodes_lo, r->nodes_hi);
        if (r->over >= 0)
            tune_cat(buf, len, &used, ":over=%s", tune_yesno[r->over]);
        if (r->chan >= 0)
            tune_cat(buf, len, &used, ":chan=%s", tune_chans[r->chan]);
        tune_cat(buf, len, &used, ":@%s",
                 r->path >= 0    ? tune_paths[r->path]
                 : r->serve >= 0 ? tune_serves[r->serve]
                                 : core_alg_name(r->alg));
    }
    return buf;
}

static uint64_t tune_hash(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        h = (h ^ (v & 0xff)) * 1099511628211ULL;
    return h;
}

uint64_t core_tune_digest(const core_tune_t *tab, uint64_t h)
{
    h = tune_hash(h, tab->n);
    for (uint32_t i = 0; i < tab->n; i++) {
        const core_tune_rule_t *r = &tab->rule[i];
        h = tune_hash(h, (uint64_t)r->coll << 32 | (uint32_t)r->alg);
        h = tune_hash(h, r->lo);
        h = tune_hash(h, r->hi);
        h = tune_hash(h, (uint64_t)r->ppn_lo << 32 | r->ppn_hi);
        h = tune_hash(h, (uint64_t)r->nodes_lo << 32 | r->nodes_hi);
        h = tune_hash(h, (uint64_t)(r->serve + 1) << 24 | (uint64_t)(r->path + 1) << 16 |
                             (uint64_t)(r->over + 1) << 8 | (uint64_t)(r->chan + 1));
    }
    return h;
}

const char *core_tune_source(const core_tune_t *tab, char *buf, size_t len)
{
    if (tab->file[0] != '\0')
        snprintf(buf, len, "file %s: %u rule%s, then the default table", tab->file, tab->nuser,
                 tab->nuser == 1 ? "" : "s");
    else if (tab->nuser > 0)
        snprintf(buf, len, "ARCOLL_TUNE string: %u rule%s, then the default table", tab->nuser,
                 tab->nuser == 1 ? "" : "s");
    else
        snprintf(buf, len, "the default table (src/config/tune.c)");
    return buf;
}

int core_tune_fits(int alg, const core_tune_shape_t *shape)
{
    switch (alg) {
    case CORE_ALG_DIRECT:
    case CORE_ALG_PAP:
    case CORE_ALG_RING:
    case CORE_ALG_RDD:
    case CORE_ALG_RDH:
    case CORE_ALG_SLOAV:
    case CORE_ALG_SLOAVX:
    case CORE_ALG_MN_CO: return 1;
    case CORE_ALG_SHM_DIRECT:
    case CORE_ALG_PAP_SHM:
    case CORE_ALG_LEADER:
    case CORE_ALG_MN_COX: return shape->ppn >= 2;
    case CORE_ALG_SA:
    case CORE_ALG_SA_DIRECT:
    case CORE_ALG_RD: return shape->ppn >= 2 && shape->equal;
    /* sh_co: the team's ranks share the heap; whether this call's buffers are in
     * it is known per rank only, so sh_co judges that per call and runs as pap
     * when they are not. */
    case CORE_ALG_SH_CO: return shape->heap && shape->nodes == 1 && shape->ppn >= 2;
    default: return 0;
    }
}

/* Whether a rule's collective, size and conditions match (not its target). */
static int tune_match(const core_tune_rule_t *r, int coll, size_t bytes,
                      const core_tune_shape_t *shape)
{
    return r->coll == coll && bytes >= r->lo && (bytes < r->hi || r->hi == SIZE_MAX) &&
           shape->ppn >= r->ppn_lo && shape->ppn <= r->ppn_hi && shape->nodes >= r->nodes_lo &&
           shape->nodes <= r->nodes_hi && (r->over < 0 || r->over == shape->over) &&
           (r->chan < 0 || r->chan == shape->chan);
}

int core_tune_pick(const core_tune_t *tab, int coll, size_t bytes, const core_tune_shape_t *shape)
{
    for (uint32_t i = 0; i < tab->n; i++) {
        const core_tune_rule_t *r = &tab->rule[i];
        if (r->alg >= 0 && tune_match(r, coll, bytes, shape) && core_tune_fits(r->alg, shape))
            return r->alg;
    }
    return CORE_ALG_PAP;
}

int core_tune_path(const core_tune_t *tab, int coll, size_t bytes, const core_tune_shape_t *shape)
{
    for (uint32_t i = 0; i < tab->n; i++) {
        const core_tune_rule_t *r = &tab->rule[i];
        if (r->path >= 0 && tune_match(r, coll, bytes, shape))
            return r->path;
    }
    return -1;
}

int core_tune_host(const core_tune_t *tab, int coll, size_t bytes, const core_tune_shape_t *shape)
{
    for (uint32_t i = 0; i < tab->n; i++) {
        const core_tune_rule_t *r = &tab->rule[i];
        if (r->serve >= 0 && tune_match(r, coll, bytes, shape))
            return r->serve == CORE_TUNE_SERVE_HOST;
    }
    return 0;
}

_Static_assert(CORE_TUNE_ALLTOALL == (int)COLL_ALLTOALL &&
                   CORE_TUNE_ALLGATHER == (int)COLL_ALLGATHER &&
                   CORE_TUNE_ALLGATHERV == (int)COLL_ALLGATHERV &&
                   CORE_TUNE_REDUCE_SCATTER == (int)COLL_REDUCE_SCATTER &&
                   CORE_TUNE_ALLREDUCE == (int)COLL_ALLREDUCE,
               "a coll_type_t is a CORE_TUNE_* collective");
_Static_assert(CORE_CHANNEL_SMP == 0 && CORE_CHANNEL_VERBS == 1 && CORE_PATH_COPY == 0 &&
                   CORE_PATH_ZCOPY == 1,
               "tune_chans and tune_paths follow the enums");
