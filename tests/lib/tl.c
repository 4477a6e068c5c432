/* The tests' support library: see tl.h. */
#define _DEFAULT_SOURCE /* opendir, readdir */
#include "tl.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static uint64_t tl_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Block (call, src, dst)'s key: word w of it is tl_mix(key + w). */
static uint64_t tl_key(uint64_t call, int src, int dst)
{
    return tl_mix(call ^ ((uint64_t)(uint32_t)src << 32) ^ (uint64_t)(uint32_t)(dst + 1));
}

/* Word w as its 8 bytes are in memory (little-endian). */
static uint64_t tl_word_mem(uint64_t key, size_t w)
{
    uint64_t v = tl_mix(key + (uint64_t)w);

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

uint64_t tl_word(uint64_t call, int src, int dst, size_t w)
{
    return tl_mix(tl_key(call, src, dst) + (uint64_t)w);
}

uint8_t tl_byte(uint64_t call, int src, int dst, size_t i)
{
    return (uint8_t)(tl_word(call, src, dst, i / 8) >> (8 * (i % 8)));
}

void tl_fill_at(void *p, size_t off, size_t len, uint64_t call, int src, int dst)
{
    uint64_t key = tl_key(call, src, dst), v;
    uint8_t *b = p;
    size_t i = 0;

    for (; i < len && (off + i) % 8; i++)
        b[i] = tl_byte(call, src, dst, off + i);
    for (; i + 8 <= len; i += 8) {
        v = tl_word_mem(key, (off + i) / 8);
        memcpy(b + i, &v, 8);
    }
    for (; i < len; i++)
        b[i] = tl_byte(call, src, dst, off + i);
}

void tl_fill(void *p, size_t len, uint64_t call, int src, int dst)
{
    tl_fill_at(p, 0, len, call, src, dst);
}

size_t tl_check(const void *p, size_t len, uint64_t call, int src, int dst, size_t *first)
{
    uint64_t key = tl_key(call, src, dst), v, got = 0;
    const uint8_t *b = p;
    size_t bad = 0;

    for (size_t i = 0; i < len; i += 8) {
        size_t n = len - i < 8 ? len - i : 8;
        v = tl_word_mem(key, i / 8);
        memcpy(&got, b + i, n);
        if (n == 8 && got == v)
            continue;
        for (size_t k = 0; k < n; k++)
            if (b[i + k] != ((const uint8_t *)&v)[k] && bad++ == 0 && first != NULL)
                *first = i + k;
    }
    return bad;
}

void tl_fill_blocks(void *p, size_t len, int n, uint64_t call, int src)
{
    for (int j = 0; j < n; j++)
        tl_fill((uint8_t *)p + (size_t)j * len, len, call, src, j);
}

size_t tl_check_blocks(const void *p, size_t len, int n, uint64_t call, int dst, size_t *first)
{
    size_t bad = 0;

    for (int j = 0; j < n; j++) {
        size_t at = 0, b = tl_check((const uint8_t *)p + (size_t)j * len, len, call, j, dst, &at);
        if (b > 0 && bad == 0 && first != NULL)
            *first = (size_t)j * len + at;
        bad += b;
    }
    return bad;
}

int64_t tl_red_in(uint64_t call, int r, size_t i)
{
    return (int64_t)(r + 1) * (int64_t)(i % 1021 + 1) + (int64_t)(call % 997);
}

int64_t tl_red_sum(uint64_t call, int n, size_t i)
{
    return (int64_t)n * (n + 1) / 2 * (int64_t)(i % 1021 + 1) + (int64_t)n * (int64_t)(call % 997);
}

const char *const tl_dist_names[TL_NDIST] = {"equal", "ragged", "zeros", "one-big"};

size_t tl_vcount(int dist, int src, int dst, size_t base, uint64_t salt)
{
    switch (dist) {
    case TL_DIST_RAGGED:
        return (size_t)(tl_mix(salt ^ ((uint64_t)(uint32_t)src << 20) ^ (uint64_t)(uint32_t)dst) %
                        (2 * base + 1));
    case TL_DIST_ZEROS: return (src + 2 * dst + (int)(salt % 3)) % 3 == 0 ? 0 : base;
    case TL_DIST_ONE_BIG: return src == 0 ? 4 * base : base / 4;
    default: return base;
    }
}

/* tl_expect and tl_expect_max: max < 0 prints every failure. */
static int tl_vexpect(tl_tally_t *t, long max, int ok, const char *fmt, va_list ap)
{
    char line[4096];
    int n;

    if (ok) {
        t->passed++;
        return 1;
    }
    t->failed++;
    if (max >= 0 && t->failed > max)
        return 0;
    /* One write: the lines of processes that share stderr do not interleave. */
    n = snprintf(line, sizeof(line), "%s%s%sFAIL ", t->prefix != NULL ? "[" : "",
                 t->prefix != NULL ? t->prefix : "", t->prefix != NULL ? "] " : "");
    if (n >= 0 && (size_t)n < sizeof(line))
        vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    fprintf(stderr, "%s\n", line);
    return 0;
}

int tl_expect(tl_tally_t *t, int ok, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = tl_vexpect(t, -1, ok, fmt, ap);
    va_end(ap);
    return r;
}

int tl_expect_max(tl_tally_t *t, long max, int ok, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = tl_vexpect(t, max, ok, fmt, ap);
    va_end(ap);
    return r;
}

int tl_summary(const tl_tally_t *t, FILE *f, const char *name)
{
    fprintf(f, "%s: %ld passed, %ld failed\n", name, t->passed, t->failed);
    return t->failed != 0;
}

long tl_env_long(const char *name, long def)
{
    const char *s = getenv(name);
    char *end;
    long v;

    if (s == NULL || *s == '\0')
        return def;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0) {
        fprintf(stderr, "%s=\"%s\": expected a non-negative integer\n", name, s);
        return -1;
    }
    return v;
}

long tl_count_dir(const char *path, const char *prefix)
{
    DIR *d = opendir(path);
    struct dirent *e;
    long n = 0;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.' &&
            (prefix == NULL || strncmp(e->d_name, prefix, strlen(prefix)) == 0))
            n++;
    closedir(d);
    return n;
}
