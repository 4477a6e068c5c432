/* arcoll-pap-report's reader, alignment and tables (tools/pap_report.h): the
 * tool (tools/arcoll_pap_report.c) and its fuzz harness (tests/fuzz/fuzz_profile.c)
 * call rep_report. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/pap_stats.h"
#include "config/algs.h"
#include "engine/req.h"
#include "tools/pap_report.h"
#include "util/textio.h"

#define REP_LABEL 256
/* Input limits (docs/profiling.md, "Limits of the reader"): the largest file
 * (REP_FILE_MAX, pap_report.h) and line it reads (a site line holds a module
 * path of up to 4095 characters), and the most ranks and call sites it
 * accepts. Memory grows with the lines actually read, never with a count a
 * file states. */
#define REP_LINE_MAX  8192
#define REP_RANKS_MAX (1 << 24)
#define REP_SITES_MAX 65536
/* |arrive|, |exit| in ns (146 years): the differences of two fit an int64. */
#define REP_TIME_MAX (INT64_C(1) << 62)

typedef struct rep_call {
    uint64_t epoch, bytes;
    int64_t arrive, exit;
    uint32_t team, leader, team_size, site;
    int32_t status;
    int type; /* index of rep_types */
} rep_call_t;

typedef struct rep_sync {
    int valid;
    int64_t offset_ns;
    uint64_t err_ns;
} rep_sync_t;

/* One rank's file. */
typedef struct rep_rank {
    int rank, nranks;
    char host[128], clock[32], tmethod[64];
    rep_sync_t sync[2];
    uint64_t ncalls, nend, dropped; /* from the header and the "end" line */
    char (*sites)[REP_LABEL];
    size_t nsites, sites_cap;
    rep_call_t *calls;
    size_t n, cap;
    uint64_t tsize[64];
    double t_ns[64];
    size_t nt;
} rep_rank_t;

/* A call of one rank, for sorting by (team, leader, epoch, rank): the teams
 * that one split creates share an id but not their leader (rank 0's
 * context rank). */
typedef struct rep_ref {
    uint32_t team, leader;
    uint64_t epoch;
    int rank;
    size_t idx;
} rep_ref_t;

/* Per context rank, over the calls of its teams. */
typedef struct rep_arrival {
    uint64_t calls, last;
    double sum_late_ns;
} rep_arrival_t;

/* The collectives a profile names: the one list's names for logs and profiles (config/algs.h). */
#define REP_COLL_SHOWN(type, name, shown, bit) [type] = shown,
static const char *const rep_types[] = {CORE_COLL_LIST(REP_COLL_SHOWN)};

int rep_quiet;

static void rep_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void rep_error(const char *fmt, ...)
{
    va_list ap;

    if (rep_quiet)
        return;
    fprintf(stderr, "arcoll-pap-report: error: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static void rep_rank_free(rep_rank_t *r)
{
    free(r->sites);
    free(r->calls);
}

static int rep_type_parse(const char *s)
{
    for (int i = 0; i < (int)(sizeof(rep_types) / sizeof(rep_types[0])); i++)
        if (strcmp(s, rep_types[i]) == 0)
            return i;
    return -1;
}

static int rep_call_push(rep_rank_t *r, const rep_call_t *c)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 1024;
        rep_call_t *calls = realloc(r->calls, sizeof(*calls) * cap);
        if (calls == NULL)
            return -1;
        r->calls = calls;
        r->cap = cap;
    }
    r->calls[r->n++] = *c;
    return 0;
}

static int rep_site_set(rep_rank_t *r, size_t idx, const char *label)
{
    if (idx != r->nsites || idx >= REP_SITES_MAX)
        return -1; /* sites are numbered 0, 1, ... in order */
    if (r->nsites == r->sites_cap) {
        size_t cap = r->sites_cap ? r->sites_cap * 2 : 16;
        char(*sites)[REP_LABEL] = realloc(r->sites, sizeof(*sites) * cap);
        if (sites == NULL)
            return -1;
        r->sites = sites;
        r->sites_cap = cap;
    }
    snprintf(r->sites[idx], REP_LABEL, "%s", label);
    r->nsites++;
    return 0;
}

/* One line of a profile; 1 at "end N", 0 otherwise, -1 on a malformed line. */
static int rep_line_parse(rep_rank_t *r, const char *line)
{
    char key[32], word[REP_LABEL], kind[16];
    unsigned long long a, b;
    long long off;
    rep_call_t c;
    int type, n;

    if (line[0] == '#' || line[0] == '\n' || line[0] == '\0')
        return 0;
    if (sscanf(line, "%31s", key) != 1)
        return -1;
    if ((type = rep_type_parse(key)) >= 0) {
        memset(&c, 0, sizeof(c));
        c.type = type;
        n = sscanf(line,
                   "%*s %" SCNu32 " %" SCNu32 " %" SCNu32 " %" SCNu64 " %" SCNu64 " %" SCNu32
                   " %" SCNd64 " %" SCNd64 " %" SCNd32,
                   &c.team, &c.leader, &c.team_size, &c.epoch, &c.bytes, &c.site, &c.arrive,
                   &c.exit, &c.status);
        if (n != 9 || c.site >= r->nsites || c.team_size == 0 || c.arrive < -REP_TIME_MAX ||
            c.arrive > REP_TIME_MAX || c.exit < -REP_TIME_MAX || c.exit > REP_TIME_MAX)
            return -1;
        return rep_call_push(r, &c) == 0 ? 0 : -1;
    }
    if (strcmp(key, "rank") == 0)
        return sscanf(line, "%*s %d", &r->rank) == 1 ? 0 : -1;
    if (strcmp(key, "nranks") == 0)
        return sscanf(line, "%*s %d", &r->nranks) == 1 && r->nranks > 0 &&
                       r->nranks <= REP_RANKS_MAX
                   ? 0
                   : -1;
    if (strcmp(key, "host") == 0)
        return sscanf(line, "%*s %127s", r->host) == 1 ? 0 : -1;
    if (strcmp(key, "clock") == 0)
        return sscanf(line, "%*s %31s", r->clock) == 1 ? 0 : -1;
    if (strcmp(key, "tmethod") == 0)
        return sscanf(line, "%*s %63s", r->tmethod) == 1 ? 0 : -1;
    if (strcmp(key, "calls") == 0)
        return sscanf(line, "%*s %llu", &a) == 1 ? (r->ncalls = a, 0) : -1;
    if (strcmp(key, "dropped") == 0)
        return sscanf(line, "%*s %llu", &a) == 1 ? (r->dropped = a, 0) : -1;
    if (strcmp(key, "site") == 0)
        return sscanf(line, "%*s %llu %255s", &a, word) == 2 ? rep_site_set(r, (size_t)a, word)
                                                             : -1;
    if (strcmp(key, "sync") == 0) {
        if (sscanf(line, "%*s %15s", kind) != 1)
            return -1;
        int k = strcmp(kind, "finalize") == 0;
        if (sscanf(line, "%*s %*s %llu %lld %llu", &a, &off, &b) == 3) {
            r->sync[k].valid = 1;
            r->sync[k].offset_ns = off;
            r->sync[k].err_ns = b;
        }
        return 0;
    }
    if (strcmp(key, "tsize") == 0) {
        /* Sorted by size, as written: pap_t_interp relies on it. */
        if (sscanf(line, "%*s %llu %llu", &a, &b) != 2 || r->nt == 64 ||
            (r->nt > 0 && a <= r->tsize[r->nt - 1]))
            return -1;
        r->tsize[r->nt] = a;
        r->t_ns[r->nt++] = (double)b;
        return 0;
    }
    if (strcmp(key, "end") == 0)
        return sscanf(line, "%*s %llu", &a) == 1 ? (r->nend = a, 1) : -1;
    return 0; /* keys of later versions: ignored */
}

/* Why core_text_line stopped, for a message naming the file and line. */
static void rep_text_error(const char *path, const core_text_t *t, int got)
{
    if (got == CORE_TEXT_LONG)
        rep_error("%s:%lu: line longer than %d characters (the limit of a line)", path, t->line + 1,
                  REP_LINE_MAX);
    else if (got == CORE_TEXT_BIG)
        rep_error("%s:%lu: the file is larger than %llu bytes (the limit of a profile)", path,
                  t->line + 1, REP_FILE_MAX);
    else if (got == CORE_TEXT_BINARY)
        rep_error("%s:%lu: a NUL byte: not a profile (profiles are text)", path, t->line + 1);
    else
        rep_error("%s:%lu: read error: %s", path, t->line + 1, strerror(errno));
}

/* One rank's profile from t (named path in the messages); 0 or -1. */
static int rep_text_read(core_text_t *t, const char *path, int rank, rep_rank_t *r)
{
    char line[REP_LINE_MAX + 1];
    int version = 0, ended = 0, got;

    memset(r, 0, sizeof(*r));
    r->rank = -1;
    got = core_text_line(t, line, sizeof(line));
    if (got < 0 && got != CORE_TEXT_LONG && got != CORE_TEXT_BINARY) {
        rep_text_error(path, t, got);
        goto err;
    }
    if (got != 1 || sscanf(line, "arcoll-pap-profile %d", &version) != 1) {
        rep_error("%s is not an arcoll PAP profile", path);
        goto err;
    }
    if (version != 1) {
        rep_error("%s: format version %d, this tool reads version 1", path, version);
        goto err;
    }
    while (!ended && (got = core_text_line(t, line, sizeof(line))) == 1) {
        int prc = rep_line_parse(r, line);
        if (prc < 0) {
            rep_error("%s:%lu: malformed line: %.80s", path, t->line, line);
            goto err;
        }
        ended = prc == 1;
    }
    if (got < 0) {
        rep_text_error(path, t, got);
        goto err;
    }
    if (!ended) {
        rep_error("%s is truncated: no \"end\" line after %zu calls (did rank %d reach "
                  "arcoll_finalize?)",
                  path, r->n, rank);
        goto err;
    }
    if (r->n != r->ncalls || r->n != r->nend || r->rank != rank || r->nranks <= 0) {
        rep_error("%s: its header says rank %d and %" PRIu64 " calls, its end %" PRIu64
                  " calls; it holds %zu calls and is named for rank %d",
                  path, r->rank, r->ncalls, r->nend, r->n, rank);
        goto err;
    }
    if (r->dropped) {
        rep_error("%s: rank %d dropped %" PRIu64 " records (out of memory while profiling): "
                  "the profile is incomplete",
                  path, rank, r->dropped);
        goto err;
    }
    return 0;

err:
    rep_rank_free(r);
    return -1;
}

static int rep_file_read(rep_open_fn *open_fn, void *arg, int rank, rep_rank_t *r)
{
    char path[4096];
    core_text_t t;
    int rc;

    if (open_fn(arg, rank, &t, path, sizeof(path)) != 0)
        return -1;
    rc = rep_text_read(&t, path, rank, r);
    core_text_close(&t);
    return rc;
}

static int rep_ref_cmp(const void *x, const void *y)
{
    const rep_ref_t *a = x, *b = y;

    if (a->team != b->team)
        return a->team < b->team ? -1 : 1;
    if (a->leader != b->leader)
        return a->leader < b->leader ? -1 : 1;
    if (a->epoch != b->epoch)
        return a->epoch < b->epoch ? -1 : 1;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

static void rep_ranks_list(const rep_ref_t *g, size_t k, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < k && used + 16 < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? "," : "", g[i].rank);
}

/* The T table of rank 0, sorted by size (as written). */
static double rep_t(const rep_rank_t *r0, uint64_t bytes)
{
    return pap_t_interp(r0->tsize, r0->t_ns, r0->nt, bytes);
}

static void rep_us(char *buf, size_t len, double ns)
{
    snprintf(buf, len, "%.2f", ns / 1000.0);
}

static void rep_factor(char *buf, size_t len, double f)
{
    if (f < 0)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.2f", f);
}

static void rep_header_print(const char *prefix, const rep_rank_t *ranks, int n, uint64_t aligned,
                             uint64_t failed)
{
    const rep_rank_t *r0 = &ranks[0];
    uint64_t total = 0;
    char a[32], b[32];

    for (int i = 0; i < n; i++)
        total += ranks[i].n;
    printf("arcoll PAP profile %s: %d ranks, %" PRIu64 " records, %" PRIu64
           " calls aligned across their ranks, %" PRIu64 " failed or unfinished calls excluded\n\n",
           prefix, n, total, aligned, failed);
    printf("clocks: each rank's offset to rank 0, estimated by Cristian's algorithm at init and "
           "at finalize\n(error <= half the best round trip, after +-). Applied (\"clock\"): 0 "
           "where the rank shares\nrank 0's CLOCK_MONOTONIC (\"shared\"), else the line "
           "through both estimates (\"linear\").\n");
    printf("  %-5s %-20s %-9s %-24s %s\n", "rank", "host", "clock", "estimate at init (us)",
           "estimate at finalize (us)");
    for (int i = 0; i < n; i++) {
        const rep_rank_t *r = &ranks[i];
        char s0[80] = "-", s1[80] = "-";
        for (int k = 0; k < 2; k++) {
            if (!r->sync[k].valid)
                continue;
            rep_us(a, sizeof(a), (double)r->sync[k].offset_ns);
            rep_us(b, sizeof(b), (double)r->sync[k].err_ns);
            snprintf(k ? s1 : s0, sizeof(s0), "%s +- %s", a, b);
        }
        printf("  %-5d %-20s %-9s %-24s %s\n", r->rank, r->host, r->clock, s0, s1);
    }
    printf("\nT = time of one message of the payload size, ");
    if (strcmp(r0->tmethod, "memcpy") == 0)
        printf("a memcpy (a single rank);\n");
    else
        printf("between ranks 0 and 1 (2-rank allgather);\n");
    printf("measured at finalize with the settings of arcoll_init (median of 5 batch means):\n ");
    if (r0->nt == 0)
        printf(" not measured: factors are shown as \"-\"");
    for (size_t i = 0; i < r0->nt; i++) {
        rep_us(a, sizeof(a), r0->t_ns[i]);
        printf(" %" PRIu64 " B: %s us%s", r0->tsize[i], a, i + 1 < r0->nt ? "," : "");
    }
    printf(
        "\n\nImbalance of one call (Qian and Afsahi sec. 3.1) from its ranks' arrival times a_i:\n"
        "  a_bar = mean a_i (eq. 1), d_bar = mean |a_i - a_bar| (eq. 2, average case),\n"
        "  theta = max a_i - min a_i (eq. 3, worst case); factors d_bar/T and theta/T.\n"
        "The factor columns are MEANS OVER THE CALLS of each row; d_bar and theta in us "
        "likewise.\n");
}

static void rep_tables_print(pap_table_t *by_site, pap_table_t *by_size, int sitew)
{
    char f1[32], f2[32], d1[32], d2[32], t[32], tm[32];

    pap_table_sort(by_site);
    pap_table_sort(by_size);
    printf("\n%-10s %-*s %8s %14s %16s %17s %11s %11s\n", "collective", sitew, "call site", "calls",
           "avg size (B)", "avg-case factor", "worst-case factor", "d_bar (us)", "theta (us)");
    for (size_t i = 0; i < by_site->n; i++) {
        const pap_row_t *row = &by_site->rows[i];
        rep_factor(f1, sizeof(f1), pap_row_avg_factor(row));
        rep_factor(f2, sizeof(f2), pap_row_worst_factor(row));
        rep_us(d1, sizeof(d1), row->sum_avg_ns / (double)row->calls);
        rep_us(d2, sizeof(d2), row->sum_worst_ns / (double)row->calls);
        printf("%-10s %-*s %8" PRIu64 " %14.1f %16s %17s %11s %11s\n", rep_types[row->type], sitew,
               row->site, row->calls, pap_row_avg_size(row), f1, f2, d1, d2);
    }
    printf("\nper size (all call sites):\n");
    printf("%-10s %12s %8s %9s %16s %17s %11s %11s %13s\n", "collective", "size (B)", "calls",
           "T (us)", "avg-case factor", "worst-case factor", "d_bar (us)", "theta (us)",
           "in call (us)");
    for (size_t i = 0; i < by_size->n; i++) {
        const pap_row_t *row = &by_size->rows[i];
        rep_factor(f1, sizeof(f1), pap_row_avg_factor(row));
        rep_factor(f2, sizeof(f2), pap_row_worst_factor(row));
        rep_us(d1, sizeof(d1), row->sum_avg_ns / (double)row->calls);
        rep_us(d2, sizeof(d2), row->sum_worst_ns / (double)row->calls);
        if (row->calls_t)
            rep_us(t, sizeof(t), row->sum_t_ns / (double)row->calls_t);
        else
            snprintf(t, sizeof(t), "-");
        rep_us(tm, sizeof(tm), row->sum_time_ns / (double)row->calls);
        printf("%-10s %12" PRIu64 " %8" PRIu64 " %9s %16s %17s %11s %11s %13s\n",
               rep_types[row->type], row->size, row->calls, t, f1, f2, d1, d2, tm);
    }
}

static void rep_arrivals_print(const rep_arrival_t *arr, int n)
{
    char late[32];

    printf("\nper rank (over the aligned calls of its teams): mean of a_i - a_bar, and how often "
           "it arrived last\n");
    printf("%-5s %8s %18s %15s\n", "rank", "calls", "a_i - a_bar (us)", "last to arrive");
    for (int i = 0; i < n; i++) {
        double share = arr[i].calls ? 100.0 * (double)arr[i].last / (double)arr[i].calls : 0;
        rep_us(late, sizeof(late), arr[i].calls ? arr[i].sum_late_ns / (double)arr[i].calls : 0);
        printf("%-5d %8" PRIu64 " %18s %14.1f%%\n", i, arr[i].calls, late, share);
    }
}

/* Align the calls of all ranks and fill the tables; -1 on inconsistent files. */
static int rep_analyse(const rep_rank_t *ranks, int n, pap_table_t *by_site, pap_table_t *by_size,
                       rep_arrival_t *arr, uint64_t *aligned, uint64_t *failed, int *sitew)
{
    rep_ref_t *refs = NULL;
    int64_t *a = NULL;
    size_t total = 0, k = 0, j;
    char who[256];
    int rc = -1;

    for (int i = 0; i < n; i++)
        total += ranks[i].n;
    refs = malloc(sizeof(*refs) * (total ? total : 1));
    a = malloc(sizeof(*a) * (size_t)n);
    if (refs == NULL || a == NULL) {
        rep_error("out of memory for %zu calls", total);
        goto out;
    }
    for (int i = 0; i < n; i++)
        for (size_t c = 0; c < ranks[i].n; c++)
            refs[k++] = (rep_ref_t){ranks[i].calls[c].team, ranks[i].calls[c].leader,
                                    ranks[i].calls[c].epoch, i, c};
    qsort(refs, total, sizeof(*refs), rep_ref_cmp);
    for (size_t g = 0; g < total; g = j) {
        const rep_call_t *c0 = &ranks[refs[g].rank].calls[refs[g].idx];
        int bad = 0, consistent = 1;
        double time_ns = 0;
        pap_imb_t imb;
        pap_row_t *row;

        for (j = g; j < total && refs[j].team == refs[g].team && refs[j].leader == refs[g].leader &&
                    refs[j].epoch == refs[g].epoch;
             j++) {
            const rep_call_t *c = &ranks[refs[j].rank].calls[refs[j].idx];
            bad |= c->status != 0;
            consistent &= c->type == c0->type && c->bytes == c0->bytes &&
                          c->team_size == c0->team_size &&
                          (j == g || refs[j].rank != refs[j - 1].rank);
        }
        k = j - g;
        if (bad) {
            (*failed)++; /* an error on any rank: its arrivals mean nothing */
            continue;
        }
        rep_ranks_list(&refs[g], k, who, sizeof(who));
        if (k != c0->team_size || !consistent) {
            if (k != c0->team_size)
                rep_error("call %" PRIu64 " of team %" PRIu32 " (led by rank %" PRIu32
                          "; %s, %" PRIu64 " B) was recorded by %zu ranks (%s) but the team has "
                          "%" PRIu32 " ranks: the files do not come from one run, or a rank "
                          "lost calls",
                          c0->epoch, c0->team, c0->leader, rep_types[c0->type], c0->bytes, k, who,
                          c0->team_size);
            else
                rep_error("call %" PRIu64 " of team %" PRIu32 " (led by rank %" PRIu32
                          "): ranks %s disagree on its collective, size or team size, or one "
                          "recorded it twice: the files do not come from one run",
                          c0->epoch, c0->team, c0->leader, who);
            goto out;
        }
        for (size_t i = 0; i < k; i++) {
            const rep_call_t *c = &ranks[refs[g + i].rank].calls[refs[g + i].idx];
            a[i] = c->arrive;
            time_ns += (double)(c->exit - c->arrive); /* both within REP_TIME_MAX */
        }
        time_ns /= (double)k;
        pap_imbalance(a, k, &imb);
        for (size_t i = 0; i < k; i++) {
            rep_arrival_t *ar = &arr[refs[g + i].rank];
            ar->calls++;
            ar->last += i == imb.last && k > 1;
            ar->sum_late_ns += pap_lateness(&imb, a[i]);
        }
        /* The call site as the lowest rank of the call saw it. */
        const char *site = ranks[refs[g].rank].sites[c0->site];
        double t = rep_t(&ranks[0], c0->bytes);
        row = pap_table_row(by_site, c0->type, site, PAP_ANY_SIZE);
        if (row != NULL)
            pap_row_add(row, c0->bytes, &imb, t, time_ns);
        row = row != NULL ? pap_table_row(by_size, c0->type, NULL, c0->bytes) : NULL;
        if (row == NULL) {
            rep_error("out of memory for the table");
            goto out;
        }
        pap_row_add(row, c0->bytes, &imb, t, time_ns);
        if ((int)strlen(site) > *sitew)
            *sitew = (int)strlen(site);
        (*aligned)++;
    }
    rc = 0;
out:
    free(a);
    free(refs);
    return rc;
}

/* Every rank's file, FILE.0 first (it says how many there are): *ranks grows
 * with the files read, not with the count FILE.0 states. */
static int rep_ranks_read(const char *prefix, rep_open_fn *open_fn, void *arg, rep_rank_t **ranks,
                          int *nread)
{
    rep_rank_t first;
    size_t cap = 0;
    int n;

    if (rep_file_read(open_fn, arg, 0, &first) != 0)
        return -1;
    n = first.nranks;
    for (*nread = 0; *nread < n; (*nread)++) {
        rep_rank_t *r;
        if ((size_t)*nread == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            r = realloc(*ranks, sizeof(*r) * ncap);
            if (r == NULL) {
                rep_error("out of memory for %zu ranks", ncap);
                goto err;
            }
            *ranks = r;
            cap = ncap;
        }
        r = &(*ranks)[*nread];
        if (*nread == 0) {
            *r = first;
            continue;
        }
        if (rep_file_read(open_fn, arg, *nread, r) != 0)
            return -1;
        if (r->nranks != n) {
            rep_error("%s.%d says %d ranks, %s.0 says %d: files of different runs", prefix, *nread,
                      r->nranks, prefix, n);
            (*nread)++;
            return -1;
        }
    }
    return 0;

err:
    if (*nread == 0)
        rep_rank_free(&first);
    return -1;
}

int rep_report(const char *prefix, rep_open_fn *open_fn, void *arg)
{
    pap_table_t by_site = {0}, by_size = {0};
    rep_rank_t *ranks = NULL;
    rep_arrival_t *arr = NULL;
    uint64_t aligned = 0, failed = 0;
    int n = 0, sitew = 9, rc = 1;

    if (rep_ranks_read(prefix, open_fn, arg, &ranks, &n) != 0)
        goto out;
    arr = calloc((size_t)n, sizeof(*arr));
    if (arr == NULL) {
        rep_error("out of memory for %d ranks", n);
        goto out;
    }
    if (rep_analyse(ranks, n, &by_site, &by_size, arr, &aligned, &failed, &sitew) != 0)
        goto out;
    rep_header_print(prefix, ranks, n, aligned, failed);
    rep_tables_print(&by_site, &by_size, sitew);
    rep_arrivals_print(arr, n);
    rc = 0;
out:
    pap_table_free(&by_size);
    pap_table_free(&by_site);
    for (int i = 0; i < n && ranks != NULL; i++)
        rep_rank_free(&ranks[i]);
    free(arr);
    free(ranks);
    return rc;
}

int rep_file_open(void *arg, int rank, core_text_t *t, char *path, size_t len)
{
    snprintf(path, len, "%s.%d", (const char *)arg, rank);
    if (core_text_open(t, path, REP_FILE_MAX) == 0)
        return 0;
    if (errno == EFBIG)
        rep_error("%s: larger than %llu bytes (the limit of a profile)", path, REP_FILE_MAX);
    else if (errno == EINVAL)
        rep_error("%s: not a regular file (devices and FIFOs are refused)", path);
    else
        rep_error("cannot open %s: %s (every rank writes FILE.<rank> at arcoll_finalize)", path,
                  strerror(errno));
    return -1;
}
