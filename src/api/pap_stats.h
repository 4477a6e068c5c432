/* Arithmetic of arcoll-pap-report: the imbalance of one collective call as
 * defined in Qian and Afsahi §3.1 and its means over calls. Pure functions (the
 * table only allocates its rows), so that unit tests can check them. */
#ifndef ARCOLL_API_PAP_STATS_H
#define ARCOLL_API_PAP_STATS_H

#include <stddef.h>
#include <stdint.h>

/* One call's arrival pattern. Times are relative to base, the earliest
 * arrival, so that nanosecond clocks of 10^15 and more lose no precision. */
typedef struct pap_imb {
    int64_t base;    /* min a_i */
    double mean_rel; /* ā - base, eq. 1 */
    double avg;      /* d̄ = mean |a_i - ā|, eq. 2 (average-case imbalance time) */
    double worst;    /* θ = max a_i - min a_i, eq. 3 (worst-case imbalance time) */
    size_t first;    /* index of the earliest arrival (the lowest on ties) */
    size_t last;     /* index of the latest arrival (the lowest on ties) */
} pap_imb_t;

/* ā, d̄ and θ of arrival times a[0..n-1] (ns); n >= 1. */
void pap_imbalance(const int64_t *a, size_t n, pap_imb_t *out);
/* a_i - ā: how late a rank arrived compared to the mean (negative: early). */
double pap_lateness(const pap_imb_t *imb, int64_t a_i);

/* T(bytes) from points (sizes[i], t_ns[i]) sorted by size: exact at a
 * point, linear between two, the smallest's below them, and the last
 * segment's slope above them (never below the largest's). 0 if n == 0. */
double pap_t_interp(const uint64_t *sizes, const double *t_ns, size_t n, uint64_t bytes);

#define PAP_ANY_SIZE UINT64_MAX

/* Sums over the calls of one row of the table: (collective, call site) or
 * (collective, size). The factors are per call, d̄/T and θ/T; a row reports
 * their means over its calls. */
typedef struct pap_row {
    int type;
    const char *site; /* not owned; NULL in rows by size */
    uint64_t size;    /* PAP_ANY_SIZE in rows by site */
    uint64_t calls;
    uint64_t calls_t; /* calls with a known T */
    double sum_bytes, sum_avg_ns, sum_worst_ns, sum_time_ns, sum_t_ns;
    double sum_avg_factor, sum_worst_factor;
} pap_row_t;

typedef struct pap_table {
    pap_row_t *rows;
    size_t n, cap;
} pap_table_t;

/* The row with these keys (site compared as strings), added if new; NULL if
 * out of memory. */
pap_row_t *pap_table_row(pap_table_t *tab, int type, const char *site, uint64_t size);
/* One call of bytes per rank with imbalance imb, T = t_ns (<= 0: unknown)
 * and time_ns spent in the call (mean over ranks). */
void pap_row_add(pap_row_t *row, uint64_t bytes, const pap_imb_t *imb, double t_ns, double time_ns);
/* Means over the row's calls; the factors over the calls with a known T
 * (negative if none). */
double pap_row_avg_size(const pap_row_t *row);
double pap_row_avg_factor(const pap_row_t *row);
double pap_row_worst_factor(const pap_row_t *row);
/* Rows by type, then site, then size. */
void pap_table_sort(pap_table_t *tab);
void pap_table_free(pap_table_t *tab);

#endif
