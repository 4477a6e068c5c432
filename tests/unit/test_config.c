/* Unit tests of src/config/config.c: ARCOLL_* defaults, parsing, validation,
 * rendering, the cross-rank digest and the environment. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "arcoll.h"
#include "chan/smp/smp_opts.h"
#include "chan/verbs/verbs_opts.h"
#include "config/config.h"
#include "util/log.h"

static const char *const all_vars[] = {
    "ARCOLL_CHANNEL",         "ARCOLL_ALLTOALL_ALG", "ARCOLL_ALLGATHER_ALG", "ARCOLL_PATH",
    "ARCOLL_ZCOPY_THRESHOLD", "ARCOLL_BOUNCE_SIZE",  "ARCOLL_TIMEOUT_MS",    "ARCOLL_LOG",
    "ARCOLL_SPIN_COUNT",      "ARCOLL_SMP_CMA",      "ARCOLL_SHM_MAX",
};
#define N_VARS (sizeof(all_vars) / sizeof(all_vars[0]))

/* Remove every ARCOLL_* variable from the environment. */
static void env_clean(void)
{
    char names[256][64];
    size_t n = 0;

    for (char **e = environ; e != NULL && *e != NULL && n < 256; e++) {
        size_t len = strcspn(*e, "=");
        if (strncmp(*e, "ARCOLL_", 7) != 0 || len >= sizeof(names[0]))
            continue;
        memcpy(names[n], *e, len);
        names[n++][len] = '\0';
    }
    for (size_t i = 0; i < n; i++)
        unsetenv(names[i]);
    for (char **e = environ; e != NULL && *e != NULL; e++)
        assert_int_not_equal(strncmp(*e, "ARCOLL_", 7), 0);
}

static int setup(void **state)
{
    (void)state;
    env_clean();
    core_log_level = CORE_LOG_NONE; /* the rejections below are expected */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    env_clean();
    core_log_level = CORE_LOG_NONE;
    return 0;
}

static void init_clean(core_config_t *cfg)
{
    assert_int_equal(core_config_init(cfg), ARCOLL_OK);
}

/* The smp channel's settings, which its rows fill (chan/smp/smp_opts.c). */
static const smp_opts_t *smp_of(const core_config_t *cfg)
{
    return (const smp_opts_t *)(const void *)cfg->chan[CORE_CHANNEL_SMP].bytes;
}

/* Field by field: struct assignment need not copy padding. */
static void assert_cfg_equal(const core_config_t *a, const core_config_t *b)
{
    assert_int_equal(a->channel, b->channel);
    assert_int_equal(a->alltoall_alg, b->alltoall_alg);
    assert_int_equal(a->allgather_alg, b->allgather_alg);
    assert_int_equal(a->path, b->path);
    assert_int_equal(a->zcopy_threshold, b->zcopy_threshold);
    assert_int_equal(a->bounce_size, b->bounce_size);
    assert_int_equal(a->timeout_ms, b->timeout_ms);
    assert_int_equal(a->log_level, b->log_level);
    assert_int_equal(a->spin_count, b->spin_count);
    assert_int_equal(smp_of(a)->cma, smp_of(b)->cma);
}

static const char *get(const core_config_t *cfg, const char *name)
{
    static char buf[64];

    memset(buf, 0, sizeof(buf));
    return core_config_get(cfg, name, buf, sizeof(buf));
}

/* ---- defaults ---------------------------------------------------------- */

static void test_defaults(void **state)
{
    core_config_t cfg;

    (void)state;
    memset(&cfg, 0x5a, sizeof(cfg));
    init_clean(&cfg);
    assert_int_equal(cfg.channel, CORE_CHANNEL_SMP);
    /* auto everywhere: the one switch (docs/heap.md) needs no ARCOLL_*_ALG. */
    assert_int_equal(cfg.alltoall_alg, CORE_ALG_AUTO);
    assert_int_equal(cfg.allgather_alg, CORE_ALG_AUTO);
    assert_int_equal(cfg.alltoallv_alg, CORE_ALG_AUTO);
    assert_int_equal(cfg.path, CORE_PATH_AUTO);
    /* "auto": each channel brings its own measured crossover. */
    assert_true(cfg.zcopy_threshold == CORE_CONFIG_AUTO_SIZE);
    {
        char buf[32];
        assert_string_equal(core_config_get(&cfg, "ARCOLL_ZCOPY_THRESHOLD", buf, sizeof(buf)),
                            "auto");
        assert_int_equal(core_config_set(&cfg, "ARCOLL_ZCOPY_THRESHOLD", "64k"), ARCOLL_OK);
        assert_int_equal(cfg.zcopy_threshold, 65536);
        assert_int_equal(core_config_set(&cfg, "ARCOLL_ZCOPY_THRESHOLD", "AUTO"), ARCOLL_OK);
        assert_true(cfg.zcopy_threshold == CORE_CONFIG_AUTO_SIZE);
        /* Only variables whose default is auto take it. */
        assert_int_equal(core_config_set(&cfg, "ARCOLL_SHM_MAX", "auto"), ARCOLL_ERR_CONFIG);
    }
    assert_true(cfg.bounce_size == CORE_CONFIG_AUTO_SIZE); /* the channel's */
    assert_int_equal(cfg.timeout_ms, 60000);
    assert_int_equal(cfg.log_level, CORE_LOG_WARN);
    assert_int_equal(cfg.spin_count, -1); /* auto */
    assert_string_equal(get(&cfg, "ARCOLL_SPIN_COUNT"), "auto");
    assert_int_equal(smp_of(&cfg)->cma, SMP_CMA_AUTO);

    assert_string_equal(get(&cfg, "ARCOLL_CHANNEL"), "smp");
    assert_string_equal(get(&cfg, "ARCOLL_ALLTOALL_ALG"), "auto");
    assert_string_equal(get(&cfg, "ARCOLL_ALLGATHER_ALG"), "auto");
    assert_string_equal(get(&cfg, "ARCOLL_PATH"), "auto");
    assert_string_equal(get(&cfg, "ARCOLL_ZCOPY_THRESHOLD"), "auto");
    assert_string_equal(get(&cfg, "ARCOLL_BOUNCE_SIZE"), "auto");
    assert_string_equal(get(&cfg, "ARCOLL_TIMEOUT_MS"), "60000");
    assert_string_equal(get(&cfg, "ARCOLL_LOG"), "warn");
    assert_string_equal(get(&cfg, "ARCOLL_SPIN_COUNT"), "auto");
    assert_string_equal(get(&cfg, "ARCOLL_SMP_CMA"), "auto");
}

/* ---- enums ------------------------------------------------------------- */

typedef struct enum_case {
    const char *name;
    size_t offset;
    const char *values[6]; /* index = expected stored value */
} enum_case_t;

static const enum_case_t enum_cases[] = {
    {"ARCOLL_CHANNEL", offsetof(core_config_t, channel), {"smp", "verbs"}},
    {"ARCOLL_ALLTOALL_ALG",
     offsetof(core_config_t, alltoall_alg),
     {"direct", "pap", "shm_direct", "pap_shm"}},
    {"ARCOLL_ALLGATHER_ALG",
     offsetof(core_config_t, allgather_alg),
     {"direct", "pap", "shm_direct", "pap_shm"}},
    {"ARCOLL_PATH", offsetof(core_config_t, path), {"copy", "zcopy", "auto"}},
    {"ARCOLL_LOG", offsetof(core_config_t, log_level), {"none", "error", "warn", "info", "debug"}},
    {"ARCOLL_SMP_CMA",
     offsetof(core_config_t, chan[CORE_CHANNEL_SMP]) + offsetof(smp_opts_t, cma),
     {"auto", "off"}},
};

static int field_int(const core_config_t *cfg, size_t off)
{
    return *(const int *)((const char *)cfg + off);
}

static void upcase(char *dst, const char *src, int every_other)
{
    size_t i;

    for (i = 0; src[i]; i++)
        dst[i] = (!every_other || i % 2 == 0) && src[i] >= 'a' && src[i] <= 'z'
                     ? (char)(src[i] - 'a' + 'A')
                     : src[i];
    dst[i] = '\0';
}

static void test_enum_values(void **state)
{
    core_config_t cfg;
    char up[32];

    (void)state;
    init_clean(&cfg);
    for (size_t c = 0; c < sizeof(enum_cases) / sizeof(enum_cases[0]); c++) {
        const enum_case_t *ec = &enum_cases[c];
        /* Go through the values backwards so each set changes the field. */
        for (int rep = 0; rep < 3; rep++) {
            for (int i = 5; i >= 0; i--) {
                const char *v = ec->values[i];
                if (v == NULL)
                    continue;
                if (rep == 0)
                    snprintf(up, sizeof(up), "%s", v);
                else
                    upcase(up, v, rep == 2);
                assert_int_equal(core_config_set(&cfg, ec->name, up), ARCOLL_OK);
                assert_int_equal(field_int(&cfg, ec->offset), i);
                assert_string_equal(get(&cfg, ec->name), v); /* canonical spelling */
            }
        }
    }
    /* The stored indexes are the enums the library switches on. */
    assert_int_equal(core_config_set(&cfg, "ARCOLL_CHANNEL", "verbs"), ARCOLL_OK);
    assert_int_equal(cfg.channel, CORE_CHANNEL_VERBS);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_ALLTOALL_ALG", "Direct"), ARCOLL_OK);
    assert_int_equal(cfg.alltoall_alg, CORE_ALG_DIRECT);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_PATH", "ZCOPY"), ARCOLL_OK);
    assert_int_equal(cfg.path, CORE_PATH_ZCOPY);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_SMP_CMA", "OFF"), ARCOLL_OK);
    assert_int_equal(smp_of(&cfg)->cma, SMP_CMA_OFF);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_LOG", "Debug"), ARCOLL_OK);
    assert_int_equal(cfg.log_level, CORE_LOG_DEBUG);
    /* Setting ARCOLL_LOG takes effect on the logger at once. */
    assert_int_equal(core_log_level, CORE_LOG_DEBUG);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_LOG", "error"), ARCOLL_OK);
    assert_int_equal(core_log_level, CORE_LOG_ERROR);
    core_log_level = CORE_LOG_NONE;
}

static void test_enum_rejects(void **state)
{
    static const char *const bad[] = {"",  " pap", "pap ",       "pa",    "papx", "1",
                                      "0", "-1",   "pap,direct", "p a p", "zcopy"};
    core_config_t cfg, before;

    (void)state;
    init_clean(&cfg);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_ALLTOALL_ALG", "direct"), ARCOLL_OK);
    before = cfg;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(core_config_set(&cfg, "ARCOLL_ALLTOALL_ALG", bad[i]), ARCOLL_ERR_CONFIG);
        /* A rejected value leaves the old one in place. */
        assert_cfg_equal(&cfg, &before);
    }
    assert_int_equal(core_config_set(&cfg, "ARCOLL_ALLTOALL_ALG", NULL), ARCOLL_ERR_CONFIG);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_CHANNEL", "shm"), ARCOLL_ERR_CONFIG);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_PATH", "direct"), ARCOLL_ERR_CONFIG);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_LOG", "warning"), ARCOLL_ERR_CONFIG);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_SMP_CMA", "on"), ARCOLL_ERR_CONFIG);
    assert_cfg_equal(&cfg, &before);

    /* The error names the variable and the allowed values. */
    assert_int_equal(core_config_set(&cfg, "ARCOLL_PATH", "bogus"), ARCOLL_ERR_CONFIG);
    assert_non_null(strstr(core_error_last(), "ARCOLL_PATH"));
    assert_non_null(strstr(core_error_last(), "bogus"));
    assert_non_null(strstr(core_error_last(), "copy|zcopy|auto"));
}

/* ---- sizes and integers ------------------------------------------------ */

static void test_size_values(void **state)
{
    static const struct {
        const char *in;
        size_t out;
    } ok[] = {
        {"0", 0},
        {"64", 64},
        {"100", 100},
        {"4096", 4096},
        {"16k", 16384},
        {"16K", 16384},
        {"16kb", 16384},
        {"16KB", 16384},
        {"1m", 1 << 20},
        {"1M", 1 << 20},
        {"64m", 64 << 20},
        {"1g", 1 << 30},
        {"1024G", (size_t)1 << 40},
    };
    core_config_t cfg;

    (void)state;
    init_clean(&cfg);
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        char expect[32];
        snprintf(expect, sizeof(expect), "%zu", ok[i].out);
        assert_int_equal(core_config_set(&cfg, "ARCOLL_ZCOPY_THRESHOLD", ok[i].in), ARCOLL_OK);
        assert_int_equal(cfg.zcopy_threshold, ok[i].out);
        assert_string_equal(get(&cfg, "ARCOLL_ZCOPY_THRESHOLD"), expect);
    }
    assert_int_equal(core_config_set(&cfg, "ARCOLL_BOUNCE_SIZE", "64"), ARCOLL_OK);
    assert_int_equal(cfg.bounce_size, 64);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_BOUNCE_SIZE", "100"), ARCOLL_OK);
    assert_int_equal(cfg.bounce_size, 100);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_BOUNCE_SIZE", "4k"), ARCOLL_OK);
    assert_int_equal(cfg.bounce_size, 4096);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_BOUNCE_SIZE", "64M"), ARCOLL_OK);
    assert_int_equal(cfg.bounce_size, 64 << 20);
    assert_string_equal(get(&cfg, "ARCOLL_BOUNCE_SIZE"), "67108864");
}

static void test_size_rejects(void **state)
{
    static const struct {
        const char *name, *value;
    } bad[] = {
        {"ARCOLL_BOUNCE_SIZE", ""},
        {"ARCOLL_BOUNCE_SIZE", "-1"},
        {"ARCOLL_BOUNCE_SIZE", "-64"},
        {"ARCOLL_BOUNCE_SIZE", "0"},
        {"ARCOLL_BOUNCE_SIZE", "63"},  /* below the minimum of 64 */
        {"ARCOLL_BOUNCE_SIZE", "65m"}, /* above 64 MiB */
        {"ARCOLL_BOUNCE_SIZE", "67108865"},
        {"ARCOLL_BOUNCE_SIZE", "1g"},
        {"ARCOLL_BOUNCE_SIZE", "16x"},
        {"ARCOLL_BOUNCE_SIZE", "16kx"},
        {"ARCOLL_BOUNCE_SIZE", "16kk"},
        {"ARCOLL_BOUNCE_SIZE", "16 k"},
        {"ARCOLL_BOUNCE_SIZE", " 16k"},
        {"ARCOLL_BOUNCE_SIZE", "16k "},
        {"ARCOLL_BOUNCE_SIZE", "k"},
        {"ARCOLL_BOUNCE_SIZE", "1.5k"},
        {"ARCOLL_BOUNCE_SIZE", "0x100"},
        {"ARCOLL_BOUNCE_SIZE", "1t"},
        {"ARCOLL_BOUNCE_SIZE", "99999999999999999999g"},
        {"ARCOLL_BOUNCE_SIZE", "99999999999999999999"},
        {"ARCOLL_ZCOPY_THRESHOLD", "1025g"}, /* above 2^40 */
        {"ARCOLL_ZCOPY_THRESHOLD", "1099511627777"},
        {"ARCOLL_ZCOPY_THRESHOLD", "18446744073709551615"},
        {"ARCOLL_ZCOPY_THRESHOLD", "17179869184g"}, /* 2^64 */
        {"ARCOLL_ZCOPY_THRESHOLD", "-0"},
        {"ARCOLL_ZCOPY_THRESHOLD", "+16"},
        {"ARCOLL_ZCOPY_THRESHOLD", "sixteen"},
    };
    core_config_t cfg, before;

    (void)state;
    init_clean(&cfg);
    before = cfg;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (core_config_set(&cfg, bad[i].name, bad[i].value) != ARCOLL_ERR_CONFIG)
            fail_msg("%s=\"%s\" was accepted", bad[i].name, bad[i].value);
        assert_cfg_equal(&cfg, &before);
    }
    assert_int_equal(core_config_set(&cfg, "ARCOLL_ZCOPY_THRESHOLD", "1024g"), ARCOLL_OK);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_BOUNCE_SIZE", "1g"), ARCOLL_ERR_CONFIG);
    assert_non_null(strstr(core_error_last(), "ARCOLL_BOUNCE_SIZE"));
}

/* Every value has a length limit, checked before parsing: a huge one is refused quickly with a
 * short message naming the variable and the limit. */
static void test_value_limits(void **state)
{
    static const struct {
        const char *name;
        size_t max;
    } vars[] = {
        {"ARCOLL_LOG", CORE_CONFIG_VALUE_MAX},        {"ARCOLL_BOUNCE_SIZE", CORE_CONFIG_VALUE_MAX},
        {"ARCOLL_TIMEOUT_MS", CORE_CONFIG_VALUE_MAX}, {"ARCOLL_DEVICE", VERBS_DEVICE_STR - 1},
        {"ARCOLL_PROFILE", CORE_CONFIG_PATH - 1},     {"ARCOLL_TUNE", CORE_TUNE_TEXT_MAX},
    };
    size_t huge = 1 << 20;
    char *value = malloc(huge + 1), want[64];
    core_config_t cfg;

    (void)state;
    assert_non_null(value);
    init_clean(&cfg);
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        size_t lens[] = {vars[i].max + 1, huge};
        snprintf(want, sizeof(want), "longer than %zu characters", vars[i].max);
        for (size_t k = 0; k < 2; k++) {
            memset(value, '1', lens[k]);
            value[lens[k]] = '\0';
            assert_int_equal(core_config_set(&cfg, vars[i].name, value), ARCOLL_ERR_CONFIG);
            if (strstr(core_error_last(), vars[i].name) == NULL ||
                strstr(core_error_last(), want) == NULL)
                fail_msg("%s of %zu characters: message \"%s\" lacks \"%s\"", vars[i].name, lens[k],
                         core_error_last(), want);
            assert_true(strlen(core_error_last()) < 200);
        }
    }
    /* At the limit a string is taken whole. */
    memset(value, 'p', CORE_CONFIG_PATH - 1);
    value[CORE_CONFIG_PATH - 1] = '\0';
    assert_int_equal(core_config_set(&cfg, "ARCOLL_PROFILE", value), ARCOLL_OK);
    assert_int_equal(strlen(cfg.profile), CORE_CONFIG_PATH - 1);
    /* From the environment likewise. */
    memset(value, 'x', huge);
    value[huge] = '\0';
    assert_int_equal(setenv("ARCOLL_ALLTOALL_ALG", value, 1), 0);
    assert_int_equal(core_config_init(&cfg), ARCOLL_ERR_CONFIG);
    assert_non_null(strstr(core_error_last(), "ARCOLL_ALLTOALL_ALG"));
    assert_non_null(strstr(core_error_last(), "longer than 64 characters"));
    free(value);
}

static void test_long_values(void **state)
{
    static const struct {
        const char *name, *value;
        long out;
    } ok[] = {
        {"ARCOLL_TIMEOUT_MS", "1", 1},
        {"ARCOLL_TIMEOUT_MS", "250", 250},
        {"ARCOLL_TIMEOUT_MS", "86400000", 86400000L},
        {"ARCOLL_SPIN_COUNT", "0", 0},
        {"ARCOLL_SPIN_COUNT", "17", 17},
        {"ARCOLL_SPIN_COUNT", "1073741824", 1L << 30},
    };
    static const struct {
        const char *name, *value;
    } bad[] = {
        {"ARCOLL_TIMEOUT_MS", ""},
        {"ARCOLL_TIMEOUT_MS", "0"},
        {"ARCOLL_TIMEOUT_MS", "-5"},
        {"ARCOLL_TIMEOUT_MS", "86400001"},
        {"ARCOLL_TIMEOUT_MS", "100ms"},
        {"ARCOLL_TIMEOUT_MS", "1e3"},
        {"ARCOLL_TIMEOUT_MS", "10 "},
        {"ARCOLL_TIMEOUT_MS", "abc"},
        {"ARCOLL_TIMEOUT_MS", "16k"}, /* integers take no size suffix */
        {"ARCOLL_TIMEOUT_MS", "99999999999999999999"},
        {"ARCOLL_SPIN_COUNT", "-2"},
        {"ARCOLL_SPIN_COUNT", "1073741825"},
        {"ARCOLL_SPIN_COUNT", "9223372036854775808"},
        {"ARCOLL_SPIN_COUNT", "-9223372036854775809"},
        {"ARCOLL_SPIN_COUNT", "2.5"},
        {"ARCOLL_SPIN_COUNT", ""},
    };
    core_config_t cfg, before;
    char expect[32];

    (void)state;
    init_clean(&cfg);
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        assert_int_equal(core_config_set(&cfg, ok[i].name, ok[i].value), ARCOLL_OK);
        assert_int_equal(strcmp(ok[i].name, "ARCOLL_TIMEOUT_MS") == 0 ? cfg.timeout_ms
                                                                      : cfg.spin_count,
                         ok[i].out);
        snprintf(expect, sizeof(expect), "%ld", ok[i].out);
        assert_string_equal(get(&cfg, ok[i].name), expect);
    }
    before = cfg;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (core_config_set(&cfg, bad[i].name, bad[i].value) != ARCOLL_ERR_CONFIG)
            fail_msg("%s=\"%s\" was accepted", bad[i].name, bad[i].value);
        assert_cfg_equal(&cfg, &before);
    }
}

/* ---- names ------------------------------------------------------------- */

static void test_unknown_names(void **state)
{
    static const char *const bad[] = {"ARCOLL_FOO",       "arcoll_channel", "CHANNEL",
                                      "ARCOLL_CHANNEL ",  "ARCOLL_",        "",
                                      "ARCOLL_NODE_SIZE", "ARCOLL_FAULT"};
    core_config_t cfg, before;
    char buf[64];

    (void)state;
    init_clean(&cfg);
    before = cfg;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(core_config_set(&cfg, bad[i], "smp"), ARCOLL_ERR_CONFIG);
        assert_null(core_config_get(&cfg, bad[i], buf, sizeof(buf)));
    }
    assert_cfg_equal(&cfg, &before);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_FOO", "1"), ARCOLL_ERR_CONFIG);
    assert_non_null(strstr(core_error_last(), "ARCOLL_FOO"));
    assert_int_equal(core_config_set(&cfg, NULL, "smp"), ARCOLL_ERR_INVALID);
    assert_int_equal(core_config_set(NULL, "ARCOLL_CHANNEL", "smp"), ARCOLL_ERR_INVALID);
    assert_null(core_config_get(&cfg, NULL, buf, sizeof(buf)));
    assert_null(core_config_get(NULL, "ARCOLL_CHANNEL", buf, sizeof(buf)));
}

/* ---- get --------------------------------------------------------------- */

static void test_get_roundtrip(void **state)
{
    static const struct {
        const char *name, *value, *rendered;
    } cases[] = {
        {"ARCOLL_CHANNEL", "VERBS", "verbs"},
        {"ARCOLL_ALLTOALL_ALG", "direct", "direct"},
        {"ARCOLL_ALLGATHER_ALG", "Direct", "direct"},
        {"ARCOLL_PATH", "copy", "copy"},
        {"ARCOLL_ZCOPY_THRESHOLD", "2m", "2097152"},
        {"ARCOLL_BOUNCE_SIZE", "8K", "8192"},
        {"ARCOLL_TIMEOUT_MS", "1234", "1234"},
        {"ARCOLL_LOG", "INFO", "info"},
        {"ARCOLL_SPIN_COUNT", "99", "99"},
        {"ARCOLL_SMP_CMA", "off", "off"},
    };
    core_config_t cfg, copy;
    char buf[64], small[4];

    (void)state;
    init_clean(&cfg);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(core_config_set(&cfg, cases[i].name, cases[i].value), ARCOLL_OK);
        assert_ptr_equal(core_config_get(&cfg, cases[i].name, buf, sizeof(buf)), buf);
        assert_string_equal(buf, cases[i].rendered);
    }
    core_log_level = CORE_LOG_NONE;
    /* Every rendered value is accepted back and gives the same settings. */
    init_clean(&copy);
    for (size_t i = 0; i < N_VARS; i++) {
        assert_non_null(core_config_get(&cfg, all_vars[i], buf, sizeof(buf)));
        assert_int_equal(core_config_set(&copy, all_vars[i], buf), ARCOLL_OK);
    }
    core_log_level = CORE_LOG_NONE;
    assert_cfg_equal(&cfg, &copy);
    assert_int_equal(core_config_digest(&cfg), core_config_digest(&copy));
    /* A short buffer is truncated, not overrun. */
    memset(small, 'x', sizeof(small));
    assert_ptr_equal(core_config_get(&cfg, "ARCOLL_CHANNEL", small, sizeof(small)), small);
    assert_string_equal(small, "ver");
}

/* ---- digest ------------------------------------------------------------ */

static void test_digest(void **state)
{
    static const struct {
        const char *name, *value;
    } agreed[] =
        {
            {"ARCOLL_CHANNEL", "verbs"},        {"ARCOLL_ALLTOALL_ALG", "direct"},
            {"ARCOLL_ALLGATHER_ALG", "direct"}, {"ARCOLL_PATH", "copy"},
            {"ARCOLL_PATH", "zcopy"},           {"ARCOLL_ZCOPY_THRESHOLD", "16385"},
            {"ARCOLL_ZCOPY_THRESHOLD", "0"},    {"ARCOLL_BOUNCE_SIZE", "8k"},
            {"ARCOLL_BOUNCE_SIZE", "16448"},    {"ARCOLL_SMP_CMA", "off"},
        },
      local[] = {
          {"ARCOLL_LOG", "debug"},    {"ARCOLL_LOG", "none"},
          {"ARCOLL_TIMEOUT_MS", "1"}, {"ARCOLL_TIMEOUT_MS", "86400000"},
          {"ARCOLL_SPIN_COUNT", "0"}, {"ARCOLL_SPIN_COUNT", "1000000"},
      };
    enum { NA = sizeof(agreed) / sizeof(agreed[0]) };
    core_config_t base, cfg;
    uint64_t d0, d[NA];

    (void)state;
    init_clean(&base);
    d0 = core_config_digest(&base);
    init_clean(&cfg);
    assert_int_equal(core_config_digest(&cfg), d0); /* deterministic */

    for (size_t i = 0; i < NA; i++) {
        cfg = base;
        assert_int_equal(core_config_set(&cfg, agreed[i].name, agreed[i].value), ARCOLL_OK);
        d[i] = core_config_digest(&cfg);
        if (d[i] == d0)
            fail_msg("digest unchanged by %s=%s", agreed[i].name, agreed[i].value);
        for (size_t j = 0; j < i; j++)
            assert_int_not_equal(d[i], d[j]);
    }
    for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++) {
        cfg = base;
        assert_int_equal(core_config_set(&cfg, local[i].name, local[i].value), ARCOLL_OK);
        if (core_config_digest(&cfg) != d0)
            fail_msg("digest changed by %s=%s", local[i].name, local[i].value);
    }
    core_log_level = CORE_LOG_NONE;

    /* The value matters, not its spelling. */
    cfg = base;
    assert_int_equal(core_config_set(&cfg, "ARCOLL_BOUNCE_SIZE", "AUTO"), ARCOLL_OK);
    assert_int_equal(core_config_digest(&cfg), d0);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_PATH", "AUTO"), ARCOLL_OK);
    assert_int_equal(core_config_digest(&cfg), d0);

    /* Which variable holds which value matters too. */
    cfg = base;
    assert_int_equal(core_config_set(&cfg, "ARCOLL_ALLTOALL_ALG", "direct"), ARCOLL_OK);
    d0 = core_config_digest(&cfg);
    cfg = base;
    assert_int_equal(core_config_set(&cfg, "ARCOLL_ALLGATHER_ALG", "direct"), ARCOLL_OK);
    assert_int_not_equal(core_config_digest(&cfg), d0);
    cfg = base;
    assert_int_equal(core_config_set(&cfg, "ARCOLL_ZCOPY_THRESHOLD", "4096"), ARCOLL_OK);
    d0 = core_config_digest(&cfg);
    cfg = base;
    assert_int_equal(core_config_set(&cfg, "ARCOLL_BOUNCE_SIZE", "4096"), ARCOLL_OK);
    assert_int_not_equal(core_config_digest(&cfg), d0);
    /* Values are delimited: 163841 + 6384 is not 16384 + 16384. */
    cfg = base;
    assert_int_equal(core_config_set(&cfg, "ARCOLL_ZCOPY_THRESHOLD", "163841"), ARCOLL_OK);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_BOUNCE_SIZE", "6384"), ARCOLL_OK);
    assert_int_not_equal(core_config_digest(&cfg), core_config_digest(&base));
}

/* ---- environment ------------------------------------------------------- */

static void test_env_read(void **state)
{
    core_config_t cfg;

    (void)state;
    assert_int_equal(setenv("ARCOLL_CHANNEL", "Verbs", 1), 0);
    assert_int_equal(setenv("ARCOLL_ALLTOALL_ALG", "direct", 1), 0);
    assert_int_equal(setenv("ARCOLL_PATH", "zcopy", 1), 0);
    assert_int_equal(setenv("ARCOLL_ZCOPY_THRESHOLD", "1m", 1), 0);
    assert_int_equal(setenv("ARCOLL_BOUNCE_SIZE", "4k", 1), 0);
    assert_int_equal(setenv("ARCOLL_TIMEOUT_MS", "1500", 1), 0);
    assert_int_equal(setenv("ARCOLL_LOG", "none", 1), 0);
    assert_int_equal(setenv("ARCOLL_SPIN_COUNT", "7", 1), 0);
    assert_int_equal(setenv("ARCOLL_SMP_CMA", "off", 1), 0);
    init_clean(&cfg);
    assert_int_equal(cfg.channel, CORE_CHANNEL_VERBS);
    assert_int_equal(cfg.alltoall_alg, CORE_ALG_DIRECT);
    assert_int_equal(cfg.allgather_alg, CORE_ALG_AUTO); /* not set: default */
    assert_int_equal(cfg.path, CORE_PATH_ZCOPY);
    assert_int_equal(cfg.zcopy_threshold, 1 << 20);
    assert_int_equal(cfg.bounce_size, 4096);
    assert_int_equal(cfg.timeout_ms, 1500);
    assert_int_equal(cfg.log_level, CORE_LOG_NONE);
    assert_int_equal(cfg.spin_count, 7);
    assert_int_equal(smp_of(&cfg)->cma, SMP_CMA_OFF);

    /* A second init starts again from the defaults. */
    env_clean();
    init_clean(&cfg);
    assert_int_equal(cfg.channel, CORE_CHANNEL_SMP);
    assert_true(cfg.bounce_size == CORE_CONFIG_AUTO_SIZE); /* the channel's */
}

static void test_env_invalid(void **state)
{
    static const struct {
        const char *name, *value;
    } bad[] = {
        {"ARCOLL_PATH", "bogus"},
        {"ARCOLL_BOUNCE_SIZE", "16q"},
        {"ARCOLL_BOUNCE_SIZE", ""},
        {"ARCOLL_TIMEOUT_MS", "-1"},
        {"ARCOLL_SPIN_COUNT", "lots"},
        {"ARCOLL_LOG", "loud"},
        {"ARCOLL_ZCOPY_THRESHOLD", "99999999999999999999g"},
    };
    core_config_t cfg;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        env_clean();
        assert_int_equal(setenv(bad[i].name, bad[i].value, 1), 0);
        if (core_config_init(&cfg) != ARCOLL_ERR_CONFIG)
            fail_msg("init accepted %s=\"%s\"", bad[i].name, bad[i].value);
        assert_non_null(strstr(core_error_last(), bad[i].name));
    }
    /* One bad variable among good ones still fails. */
    env_clean();
    assert_int_equal(setenv("ARCOLL_CHANNEL", "smp", 1), 0);
    assert_int_equal(setenv("ARCOLL_SMP_CMA", "maybe", 1), 0);
    assert_int_equal(core_config_init(&cfg), ARCOLL_ERR_CONFIG);
}

static void test_env_unknown(void **state)
{
    core_config_t cfg;

    (void)state;
    /* A misspelt variable in the environment is warned about, not fatal; the
     * launcher-set ones are known. */
    assert_int_equal(setenv("ARCOLL_CHANEL", "verbs", 1), 0);
    assert_int_equal(setenv("ARCOLL_NODE_SIZE", "4", 1), 0);
    assert_int_equal(setenv("ARCOLL_FAULT", "x", 1), 0);
    init_clean(&cfg);
    assert_int_equal(cfg.channel, CORE_CHANNEL_SMP);
}

/* ---- print ------------------------------------------------------------- */

static void test_print(void **state)
{
    core_config_t cfg;
    char *text = NULL;
    size_t len = 0;
    FILE *f;

    (void)state;
    init_clean(&cfg);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_BOUNCE_SIZE", "2k"), ARCOLL_OK);
    f = open_memstream(&text, &len);
    assert_non_null(f);
    core_config_print(&cfg, f);
    assert_int_equal(fclose(f), 0);
    assert_non_null(text);
    for (size_t i = 0; i < N_VARS; i++)
        assert_non_null(strstr(text, all_vars[i]));
    assert_non_null(strstr(text, "2048"));
    assert_non_null(strstr(text, "direct|pap"));
    free(text);
}

/* ---- the channels' rows ------------------------------------------------ */

static const verbs_opts_t *verbs_of(const core_config_t *cfg)
{
    return (const verbs_opts_t *)(const void *)cfg->chan[CORE_CHANNEL_VERBS].bytes;
}

/* Each channel's rows (chan/<name>/<name>_opts.c) are in the one table: set
 * into that channel's struct only, listed in the order of old, agreed as
 * their rows say. */
static void test_chan_rows(void **state)
{
    static const char *const order[] = {
        "ARCOLL_SPIN_COUNT", "ARCOLL_SMP_CMA",      "ARCOLL_SMP_SEG", "ARCOLL_DEVICE",
        "ARCOLL_GID_INDEX",  "ARCOLL_NOTIFY",       "ARCOLL_WIREUP",  "ARCOLL_VERBS_CONNECT",
        "ARCOLL_REGCACHE",   "ARCOLL_REGCACHE_MAX", "ARCOLL_PROFILE",
    };
    static const char *const agreed[] = {"ARCOLL_SMP_CMA", "ARCOLL_SMP_SEG", "ARCOLL_NOTIFY",
                                         "ARCOLL_VERBS_CONNECT"};
    static const char *const local[] = {"ARCOLL_DEVICE", "ARCOLL_GID_INDEX", "ARCOLL_WIREUP"};
    const char *names[CORE_CONFIG_NAGREED];
    core_config_t base, cfg;
    smp_opts_t smp;
    char *text = NULL, *at;
    size_t len = 0, n;
    FILE *f;

    (void)state;
    init_clean(&base);
    assert_int_equal(verbs_of(&base)->connect, VERBS_CONNECT_LAZY);
    assert_int_equal(verbs_of(&base)->gid_index, -1);
    assert_string_equal(verbs_of(&base)->device, "");
    assert_int_equal(smp_of(&base)->seg, CORE_SEG_AUTO);
    cfg = base;
    smp = *smp_of(&cfg);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_NOTIFY", "imm"), ARCOLL_OK);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_VERBS_CONNECT", "Eager"), ARCOLL_OK);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_WIREUP", "rdmacm"), ARCOLL_OK);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_GID_INDEX", "3"), ARCOLL_OK);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_DEVICE", "mlx5_0:1"), ARCOLL_OK);
    assert_int_equal(verbs_of(&cfg)->notify, VERBS_NOTIFY_IMM);
    assert_int_equal(verbs_of(&cfg)->connect, VERBS_CONNECT_EAGER);
    assert_int_equal(verbs_of(&cfg)->wireup, VERBS_WIREUP_RDMACM);
    assert_int_equal(verbs_of(&cfg)->gid_index, 3);
    assert_string_equal(verbs_of(&cfg)->device, "mlx5_0:1");
    assert_memory_equal(smp_of(&cfg), &smp, sizeof(smp)); /* another channel's: untouched */
    assert_int_equal(core_config_set(&cfg, "ARCOLL_SMP_SEG", "named"), ARCOLL_OK);
    assert_int_equal(smp_of(&cfg)->seg, CORE_SEG_NAMED);
    assert_int_equal(verbs_of(&cfg)->notify, VERBS_NOTIFY_IMM);

    /* Listed once each, between the core's rows as before. */
    f = open_memstream(&text, &len);
    assert_non_null(f);
    core_config_print(&base, f);
    assert_int_equal(fclose(f), 0);
    at = text;
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        char line[64];
        snprintf(line, sizeof(line), "\n%s ", order[i]);
        at = strstr(at, line);
        if (at == NULL)
            fail_msg("%s is not listed after %s", order[i], i ? order[i - 1] : "the start");
        assert_null(strstr(at + 1, line));
    }
    free(text);

    /* Agreed or local, as the rows say. */
    n = core_config_hashes(&base, NULL, names, CORE_CONFIG_NAGREED);
    assert_true(n < CORE_CONFIG_NAGREED);
    for (size_t i = 0; i < sizeof(agreed) / sizeof(agreed[0]); i++) {
        size_t k = 0;
        while (k < n && strcmp(names[k], agreed[i]) != 0)
            k++;
        if (k == n)
            fail_msg("%s is not agreed", agreed[i]);
    }
    for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
        for (size_t k = 0; k < n; k++)
            assert_string_not_equal(names[k], local[i]);
    cfg = base;
    assert_int_equal(core_config_set(&cfg, "ARCOLL_DEVICE", "mlx5_0"), ARCOLL_OK);
    assert_int_equal(core_config_digest(&cfg), core_config_digest(&base));
    assert_int_equal(core_config_set(&cfg, "ARCOLL_NOTIFY", "imm"), ARCOLL_OK);
    assert_int_not_equal(core_config_digest(&cfg), core_config_digest(&base));

    /* Every channel's rows are known by name, defaults included. */
#define CHAN_ROWS_CHECK(id, ch)                                                                \
    for (size_t i = 0; i < ch##_settings.n; i++) {                                             \
        char buf[64];                                                                          \
        assert_non_null(core_config_get(&base, ch##_settings.rows[i].name, buf, sizeof(buf))); \
        assert_int_equal(                                                                      \
            core_config_set(&cfg, ch##_settings.rows[i].name, ch##_settings.rows[i].dflt),     \
            ARCOLL_OK);                                                                        \
    }
    CHAN_LIST(CHAN_ROWS_CHECK)
#undef CHAN_ROWS_CHECK
}

/* ---- core_config_parse_size -------------------------------------------- */

static void test_parse_size(void **state)
{
    static const struct {
        const char *in;
        size_t out;
    } ok[] = {
        {"0", 0},
        {"1", 1},
        {"4096", 4096},
        {"64k", 65536},
        {"64K", 65536},
        {"64kB", 65536},
        {"1M", 1 << 20},
        {"1mb", 1 << 20},
        {"3g", (size_t)3 << 30},
        {"0k", 0},
        {"007", 7},
        {"18446744073709551615", SIZE_MAX},
        {"17179869183g", SIZE_MAX - ((1ULL << 30) - 1)},
        {"17592186044415m", SIZE_MAX - ((1ULL << 20) - 1)},
    };
    static const char *const bad[] = {
        "",
        "k",
        "-1",
        "+1",
        " 1",
        "1 ",
        "1kk",
        "1kbb",
        "1x",
        "1t",
        "1.0",
        "0x10",
        "1e3",
        "1bk",
        "kb",
        "1k b",
        "18446744073709551616",
        "99999999999999999999g",
        "17179869184g",
        "17592186044416m",
        "18014398509481984k",
    };
    size_t v;

    (void)state;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        v = 12345;
        if (core_config_parse_size(ok[i].in, &v) != 0)
            fail_msg("\"%s\" rejected", ok[i].in);
        assert_int_equal(v, ok[i].out);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 12345;
        if (core_config_parse_size(bad[i], &v) == 0)
            fail_msg("\"%s\" accepted as %zu", bad[i], v);
        assert_int_equal(v, 12345); /* untouched on failure */
    }
    v = 12345;
    assert_int_not_equal(core_config_parse_size(NULL, &v), 0);
    assert_int_equal(v, 12345);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_enum_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_enum_rejects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_size_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_size_rejects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_long_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_value_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_get_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_digest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_invalid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_unknown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_print, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chan_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parse_size, setup, teardown),
    };

    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
