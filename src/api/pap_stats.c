/* Imbalance of collective calls (Qian and Afsahi §3.1, eq. 1-3) and their means. */
#include "api/pap_stats.h"

#include <stdlib.h>
#include <string.h>

void pap_imbalance(const int64_t *a, size_t n, pap_imb_t *out)
{
    double sum = 0, dev = 0;

    memset(out, 0, sizeof(*out));
    if (n == 0)
        return;
    for (size_t i = 1; i < n; i++) {
        if (a[i] < a[out->first])
            out->first = i;
        if (a[i] > a[out->last])
            out->last = i;
    }
    out->base = a[out->first];
    for (size_t i = 0; i < n; i++)
        sum += (double)(a[i] - out->base);
    out->mean_rel = sum / (double)n;
    for (size_t i = 0; i < n; i++) {
        double d = (double)(a[i] - out->base) - out->mean_rel;
        dev += d < 0 ? -d : d;
    }
    out->avg = dev / (double)n;
    out->worst = (double)(a[out->last] - out->base);
}

double pap_lateness(const pap_imb_t *imb, int64_t a_i)
{
    return (double)(a_i - imb->base) - imb->mean_rel;
}

double pap_t_interp(const uint64_t *sizes, const double *t_ns, size_t n, uint64_t bytes)
{
    size_t i;
    double f, t;

    if (n == 0)
        return 0;
    if (bytes <= sizes[0])
        return t_ns[0];
    for (i = 1; i < n && sizes[i] < bytes; i++)
        ;
    if (i == n) {
        /* Beyond the largest measured size: continue its last segment. */
        if (n == 1 || sizes[n - 1] == sizes[n - 2])
            return t_ns[n - 1];
        f = (t_ns[n - 1] - t_ns[n - 2]) / (double)(sizes[n - 1] - sizes[n - 2]);
        t = t_ns[n - 1] + f * (double)(bytes - sizes[n - 1]);
        return t > t_ns[n - 1] ? t : t_ns[n - 1];
    }
    f = (double)(bytes - sizes[i - 1]) / (double)(sizes[i] - sizes[i - 1]);
    return t_ns[i - 1] + f * (t_ns[i] - t_ns[i - 1]);
}

static int pap_site_eq(const char *a, const char *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

pap_row_t *pap_table_row(pap_table_t *tab, int type, const char *site, uint64_t size)
{
    pap_row_t *row;

    for (size_t i = 0; i < tab->n; i++) {
        row = &tab->rows[i];
        if (row->type == type && row->size == size && pap_site_eq(row->site, site))
            return row;
    }
    if (tab->n == tab->cap) {
        size_t cap = tab->cap ? tab->cap * 2 : 16;
        pap_row_t *rows = realloc(tab->rows, sizeof(*rows) * cap);
        if (rows == NULL)
            return NULL;
        tab->rows = rows;
        tab->cap = cap;
    }
    row = &tab->rows[tab->n++];
    memset(row, 0, sizeof(*row));
    row->type = type;
    row->site = site;
    row->size = size;
    return row;
}

void pap_row_add(pap_row_t *row, uint64_t bytes, const pap_imb_t *imb, double t_ns, double time_ns)
{
    row->calls++;
    row->sum_bytes += (double)bytes;
    row->sum_avg_ns += imb->avg;
    row->sum_worst_ns += imb->worst;
    row->sum_time_ns += time_ns;
    if (t_ns > 0) {
        row->calls_t++;
        row->sum_t_ns += t_ns;
        row->sum_avg_factor += imb->avg / t_ns;
        row->sum_worst_factor += imb->worst / t_ns;
    }
}

double pap_row_avg_size(const pap_row_t *row)
{
    return row->calls ? row->sum_bytes / (double)row->calls : 0;
}

double pap_row_avg_factor(const pap_row_t *row)
{
    return row->calls_t ? row->sum_avg_factor / (double)row->calls_t : -1;
}

double pap_row_worst_factor(const pap_row_t *row)
{
    return row->calls_t ? row->sum_worst_factor / (double)row->calls_t : -1;
}

static int pap_row_cmp(const void *x, const void *y)
{
    const pap_row_t *a = x, *b = y;
    int c;

    if (a->type != b->type)
        return a->type < b->type ? -1 : 1;
    if (a->site != NULL && b->site != NULL && (c = strcmp(a->site, b->site)) != 0)
        return c;
    if ((a->site == NULL) != (b->site == NULL))
        return a->site == NULL ? 1 : -1;
    return a->size < b->size ? -1 : a->size > b->size;
}

void pap_table_sort(pap_table_t *tab)
{
    if (tab->n > 1)
        qsort(tab->rows, tab->n, sizeof(*tab->rows), pap_row_cmp);
}

void pap_table_free(pap_table_t *tab)
{
    free(tab->rows);
    memset(tab, 0, sizeof(*tab));
}
