/* Unit tests of src/config/tune.c: the ARCOLL_TUNE parser (every error class,
 * range boundaries, suffixes, conditions, files), the default table, the pick
 * over team shapes, ARCOLL_TUNE as a configuration variable (digest, render,
 * environment), and coll_alg_resolve on hand-built teams. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "arcoll.h"
#include "config/config.h"
#include "config/tune.h"
#include "dispatch/coll.h"
#include "util/log.h"

enum { A2A = CORE_TUNE_ALLTOALL, AG = CORE_TUNE_ALLGATHER };

static int setup(void **state)
{
    (void)state;
    unsetenv("ARCOLL_TUNE");
    core_log_level = CORE_LOG_NONE; /* the rejections below are expected */
    return 0;
}

static core_tune_shape_t shape(uint32_t nodes, uint32_t ppn, int equal)
{
    core_tune_shape_t s = {nodes, ppn, equal, 0, CORE_CHANNEL_SMP, 0};
    return s;
}

static int pick(const core_tune_t *tab, int coll, size_t bytes, uint32_t nodes, uint32_t ppn,
                int equal)
{
    core_tune_shape_t s = shape(nodes, ppn, equal);
    return core_tune_pick(tab, coll, bytes, &s);
}

static void set_ok(core_tune_t *tab, const char *value)
{
    if (core_tune_set(tab, value) != ARCOLL_OK)
        fail_msg("ARCOLL_TUNE=\"%s\" rejected: %s", value, core_error_last());
}

/* Rejected with a message holding every one of the texts; the table stays. */
static void set_bad(const char *value, const char *text1, const char *text2)
{
    core_tune_t tab, before;

    set_ok(&tab, "alltoall:0-1:@direct");
    before = tab;
    if (core_tune_set(&tab, value) != ARCOLL_ERR_CONFIG)
        fail_msg("ARCOLL_TUNE=\"%s\" accepted", value);
    assert_memory_equal(&tab, &before, sizeof(tab));
    if (strstr(core_error_last(), "ARCOLL_TUNE") == NULL ||
        (text1 != NULL && strstr(core_error_last(), text1) == NULL) ||
        (text2 != NULL && strstr(core_error_last(), text2) == NULL))
        fail_msg("ARCOLL_TUNE=\"%s\": message \"%s\" lacks \"%s\" or \"%s\"", value,
                 core_error_last(), text1 ? text1 : "", text2 ? text2 : "");
}

static char *write_file(const char *text)
{
    static char path[64];
    int fd;

    snprintf(path, sizeof(path), "/tmp/arcoll-tune-XXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

/* ---- parsing ----------------------------------------------------------- */

static void test_parse_rules(void **state)
{
    core_tune_t tab;
    const core_tune_rule_t *r;

    (void)state;
    set_ok(&tab, "alltoall:0-256:@pap_shm#alltoall:256-inf:@pap");
    assert_int_equal(tab.nuser, 2);
    assert_true(tab.n > tab.nuser); /* the default table follows */
    r = &tab.rule[0];
    assert_int_equal(r->coll, A2A);
    assert_int_equal(r->alg, CORE_ALG_PAP_SHM);
    assert_int_equal(r->lo, 0);
    assert_int_equal(r->hi, 256);
    assert_int_equal(r->ppn_lo, 1);
    assert_int_equal(r->ppn_hi, CORE_TUNE_INF);
    assert_int_equal(r->nodes_lo, 1);
    assert_int_equal(r->nodes_hi, CORE_TUNE_INF);
    assert_true(tab.rule[1].hi == SIZE_MAX);
    assert_string_equal(tab.file, "");

    /* Suffixes like the other sizes, case-insensitive names, blanks around rules. */
    set_ok(&tab, " AllGather:1k-2MB:@Direct #\talltoall:64K-1g:ppn=4:nodes=2-8:@SA_direct ");
    assert_int_equal(tab.nuser, 2);
    assert_int_equal(tab.rule[0].coll, AG);
    assert_int_equal(tab.rule[0].alg, CORE_ALG_DIRECT);
    assert_int_equal(tab.rule[0].lo, 1024);
    assert_int_equal(tab.rule[0].hi, 2 << 20);
    r = &tab.rule[1];
    assert_int_equal(r->alg, CORE_ALG_SA_DIRECT);
    assert_int_equal(r->lo, 64 << 10);
    assert_int_equal(r->hi, 1 << 30);
    assert_int_equal(r->ppn_lo, 4);
    assert_int_equal(r->ppn_hi, 4);
    assert_int_equal(r->nodes_lo, 2);
    assert_int_equal(r->nodes_hi, 8);

    /* Conditions in either order, inf as the upper end, every algorithm but auto. */
    set_ok(&tab, "alltoall:0-INF:nodes=3-inf:ppn=2-5:@rd#alltoall:1-2:@leader#"
                 "allgather:1-2:@shm_direct#allgather:7-9:@pap");
    assert_int_equal(tab.rule[0].nodes_lo, 3);
    assert_int_equal(tab.rule[0].nodes_hi, CORE_TUNE_INF);
    assert_int_equal(tab.rule[0].ppn_lo, 2);
    assert_int_equal(tab.rule[0].ppn_hi, 5);
    assert_true(tab.rule[0].hi == SIZE_MAX);
    assert_int_equal(tab.rule[1].alg, CORE_ALG_LEADER);
    assert_int_equal(tab.rule[2].alg, CORE_ALG_SHM_DIRECT);

    /* "default" (any case): the built-in table only. */
    set_ok(&tab, "DEFAULT");
    assert_int_equal(tab.nuser, 0);
    assert_true(tab.n > 0);
}

static void test_parse_errors(void **state)
{
    static const struct {
        const char *value, *text1, *text2;
    } bad[] = {
        /* unknown collective */
        {"bcast:0-1:@pap", "unknown collective \"bcast\"", "rule 1"},
        {"alltoall:0-1:@pap#reduce:0-1:@pap", "unknown collective", "rule 2"},
        /* bad byte ranges */
        {"alltoall:0:@pap", "bad byte range \"0\"", NULL},
        {"alltoall:-1:@pap", "bad byte range", NULL},
        {"alltoall:x-1:@pap", "bad byte range", NULL},
        {"alltoall:0-1x:@pap", "bad byte range", NULL},
        {"alltoall:0-:@pap", "bad byte range", NULL},
        {"alltoall:inf-inf:@pap", "bad byte range", NULL},
        {"alltoall: 0-1:@pap", "bad byte range", NULL},
        {"alltoall::@pap", "bad byte range", NULL},
        {"alltoall:1t-inf:@pap", "bad byte range", NULL},
        /* LO >= HI */
        {"alltoall:256-256:@pap", "LO must be below HI", "\"256-256\""},
        {"alltoall:1k-1000:@pap", "LO must be below HI", NULL},
        /* unknown algorithm, auto, an algorithm that does not serve the collective */
        {"alltoall:0-1:@bruck", "unknown algorithm \"bruck\"", "allowed: direct"},
        {"alltoall:0-1:@", "unknown algorithm", NULL},
        {"alltoall:0-1:@auto", "auto cannot be", NULL},
        {"allgather:0-1:@sa", "sa does not serve allgather", "rule 1"},
        {"allgatherv:0-1:@sa", "sa does not serve allgatherv", "rule 1"},
        {"allreduce:0-1:@rdh", "allreduce takes serve rules only", "ARCOLL_ALLREDUCE_ALG"},
        {"allgather:0-1:@sa_direct", "does not serve allgather", NULL},
        {"allgather:0-1:@rd", "does not serve allgather", NULL},
        {"allgather:0-1:@leader", "does not serve allgather", NULL},
        {"alltoall:0-1:@ring", "does not serve alltoall", NULL},
        /* shape */
        {"alltoall:0-1:pap", "expected COLL:LO-HI", NULL},
        {"alltoall:0-1", "expected COLL:LO-HI", NULL},
        {"alltoall", "expected COLL:LO-HI", NULL},
        {"alltoall:@pap", "expected COLL:LO-HI", NULL},
        {"alltoall:0-1:@pap:ppn=2", "expected COLL:LO-HI", NULL},
        {"alltoall:0-1:ppn=1:ppn=1:ppn=1:ppn=1:ppn=1:ppn=1:@pap", NULL, NULL},
        /* conditions */
        {"alltoall:0-1:cores=2:@pap", "unknown condition \"cores=2\"", NULL},
        {"alltoall:0-1:ppn=2:ppn=3:@pap", "given twice", NULL},
        {"alltoall:0-1:nodes=2:nodes=2:@pap", "given twice", NULL},
        {"alltoall:0-1:ppn=0:@pap", "bad range \"ppn=0\"", NULL},
        {"alltoall:0-1:ppn=3-2:@pap", "bad range", NULL},
        {"alltoall:0-1:ppn=:@pap", "bad range", NULL},
        {"alltoall:0-1:ppn=inf:@pap", "bad range", NULL},
        {"alltoall:0-1:nodes=2k:@pap", "bad range", NULL},
        {"alltoall:0-1:nodes=-2:@pap", "bad range", NULL},
        {"alltoall:0-1:nodes=4294967295:@pap", "bad range", NULL},
        /* empty rules, and the position of the offending one */
        {"", "empty rule", "rule 1"},
        {"#alltoall:0-1:@pap", "empty rule", "rule 1"},
        {"alltoall:0-1:@pap#", "empty rule", "rule 2"},
        {"alltoall:0-1:@pap## alltoall:1-2:@pap", "empty rule", "rule 2"},
        {"alltoall:0-1:@pap# #", "empty rule", "rule 2"},
        {"alltoall:0-1:@pap#alltoall:1-2:@pap#alltoall:2-1:@pap", "rule 3",
         "\"alltoall:2-1:@pap\""},
    };

    char many[64 * 24 + 32], *p = many;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        set_bad(bad[i].value, bad[i].text1, bad[i].text2);
    /* a rule longer than the parser takes */
    memset(many, 'x', 300);
    many[300] = '\0';
    set_bad(many, "longer than", NULL);
    set_bad(NULL, "expected default", NULL);

    /* 64 rules are allowed, 65 are not */
    for (int i = 0; i < 64; i++)
        p += sprintf(p, "%salltoall:%d-%d:@pap", i ? "#" : "", i, i + 1);
    {
        core_tune_t tab;
        set_ok(&tab, many);
        assert_int_equal(tab.nuser, CORE_TUNE_MAX);
    }
    sprintf(p, "#alltoall:64-65:@pap");
    set_bad(many, "more than 64 rules", "rule 65");
}

/* ---- files ------------------------------------------------------------- */

static void test_file(void **state)
{
    char value[128], *path;
    core_tune_t tab;

    (void)state;
    path = write_file("; tuning for the 2x2 bed\n"
                      "\n"
                      "alltoall:0-256:ppn=2-inf:@pap_shm # alltoall:256-inf:@pap\n"
                      "   ; an indented comment\n"
                      "  \t \r\n"
                      "allgather:0-1k:@shm_direct\r\n"
                      "allgather:1k-inf:@direct"); /* no newline at the end */
    snprintf(value, sizeof(value), "file:%s", path);
    set_ok(&tab, value);
    assert_int_equal(tab.nuser, 4);
    assert_string_equal(tab.file, path);
    assert_int_equal(tab.rule[0].alg, CORE_ALG_PAP_SHM);
    assert_int_equal(tab.rule[0].ppn_lo, 2);
    assert_int_equal(tab.rule[1].lo, 256);
    assert_int_equal(tab.rule[2].coll, AG);
    assert_int_equal(tab.rule[3].alg, CORE_ALG_DIRECT);
    /* An absolute path names a file too. */
    set_ok(&tab, path);
    assert_int_equal(tab.nuser, 4);
    unlink(path);

    /* A bad line: the file and the line are in the message. */
    path = write_file("; header\nalltoall:0-1:@pap\n\nalltoall:1-2:@pap # alltoall:5-3:@pap\n");
    snprintf(value, sizeof(value), "file:%s", path);
    set_bad(value, path, "line 4, rule 2 \"alltoall:5-3:@pap\"");
    unlink(path);
    path = write_file("alltoall:0-1:@pap#\n");
    set_bad(path, "line 1, rule 2", "empty rule");
    unlink(path);

    /* Only comments: no rules of its own, the default table serves. */
    path = write_file("; nothing yet\n\n");
    set_ok(&tab, path);
    assert_int_equal(tab.nuser, 0);
    assert_true(tab.n > 0);
    unlink(path);

    /* The rule limit counts over all lines. */
    {
        char text[70 * 24], *p = text;
        for (int i = 0; i < 65; i++)
            p += sprintf(p, "alltoall:%d-%d:@pap\n", i, i + 1);
        path = write_file(text);
        set_bad(path, "line 65", "more than 64 rules");
        unlink(path);
    }

    /* Missing file, empty path, a relative one. */
    set_bad("file:/nonexistent/tune.txt", "/nonexistent/tune.txt", "cannot open");
    set_bad("/nonexistent/tune.txt", "cannot open", NULL);
    set_bad("file:", "expected file:PATH", NULL);
    set_bad("./nonexistent-tune.txt", "./nonexistent-tune.txt", "cannot open");
}

/* ---- input limits (docs/configuration.md, "Input limits") -------------- */

/* A file of n bytes: comment lines of up to line_len characters each. */
static char *write_sized(size_t n, size_t line_len)
{
    char *text = malloc(n + 1);

    assert_non_null(text);
    for (size_t i = 0; i < n; i++)
        text[i] = (i + 1) % (line_len + 1) == 0 || i + 1 == n ? '\n' : ';';
    text[n] = '\0';
    char *path = write_file(text);
    free(text);
    return path;
}

static void test_file_limits(void **state)
{
    char fifo[] = "/tmp/arcoll-tune-fifo-XXXXXX", *path, value[CORE_TUNE_TEXT_MAX + 2];
    core_tune_t tab;
    int fd;

    (void)state;
    /* Devices and FIFOs are refused at once (a bug read /dev/zero until memory ran out;
     * a FIFO without a writer blocked); the alarm turns a hang into a failure. */
    alarm(20);
    set_bad("file:/dev/zero", "/dev/zero", "not a regular file");
    set_bad("/dev/urandom", "not a regular file", NULL);
    fd = mkstemp(fifo);
    assert_true(fd >= 0);
    close(fd);
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    set_bad(fifo, fifo, "not a regular file");
    unlink(fifo);
    alarm(0);

    /* The size limit: 1 MiB of comments is read, one byte more is refused. */
    path = write_sized(CORE_TUNE_FILE_MAX, 80);
    set_ok(&tab, path);
    assert_int_equal(tab.nuser, 0);
    unlink(path);
    path = write_sized(CORE_TUNE_FILE_MAX + 1, 80);
    set_bad(path, path, "larger than 1048576 bytes (the limit of a tune file)");
    unlink(path);

    /* The line limit: a line of 4096 characters is read, one of 4097 is refused by number. */
    path = write_sized(CORE_TUNE_LINE_MAX + 1, CORE_TUNE_LINE_MAX);
    set_ok(&tab, path);
    unlink(path);
    {
        char *text = malloc(CORE_TUNE_LINE_MAX + 64);
        assert_non_null(text);
        int n = sprintf(text, "alltoall:0-1:@pap\n");
        memset(text + n, ';', CORE_TUNE_LINE_MAX + 1);
        strcpy(text + n + CORE_TUNE_LINE_MAX + 1, "\n");
        path = write_file(text);
        free(text);
    }
    set_bad(path, "line 2: longer than 4096 characters", "limit of a line");
    unlink(path);

    /* Binary data: a NUL byte would hide the rest of its line. */
    {
        static const char bin[] = "alltoall:0-1:@pap\0#allgather:0-1:@sa\n";
        snprintf(fifo, sizeof(fifo), "/tmp/arcoll-tune-XXXXXX");
        fd = mkstemp(fifo);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, bin, sizeof(bin) - 1), (ssize_t)sizeof(bin) - 1);
        close(fd);
        set_bad(fifo, "line 1: a NUL byte", NULL);
        unlink(fifo);
    }

    /* The value itself: 16 KiB, checked before any rule is cut out. */
    memset(value, 'x', CORE_TUNE_TEXT_MAX + 1);
    value[CORE_TUNE_TEXT_MAX + 1] = '\0';
    set_bad(value, "longer than 16384 characters", NULL);

    /* The buffer entry point (tests/fuzz) reads like file:PATH. */
    {
        static const char text[] = "; x\nalltoall:0-256:@direct # allgather:0-1k:@ring\r\n";
        core_tune_t from_file;
        path = write_file(text);
        set_ok(&from_file, path);
        assert_int_equal(core_tune_file_parse_buf(&tab, path, text, strlen(text)), ARCOLL_OK);
        assert_int_equal(tab.nuser, 2);
        assert_int_equal(core_tune_digest(&tab, 1), core_tune_digest(&from_file, 1));
        unlink(path);
        assert_int_equal(core_tune_file_parse_buf(&tab, "empty", "", 0), ARCOLL_OK);
        assert_int_equal(tab.nuser, 0);
        assert_int_equal(core_tune_file_parse_buf(&tab, "bad", "alltoall:1-0:@pap", 17),
                         ARCOLL_ERR_CONFIG);
    }
}

/* ---- the default table ------------------------------------------------- */

static void test_default_table(void **state)
{
    core_tune_t tab;

    (void)state;
    set_ok(&tab, "default");
    /* One node or one rank per node: pap at every size. */
    for (size_t b = 1; b <= (size_t)1 << 30; b <<= 1) {
        assert_int_equal(pick(&tab, A2A, b, 1, 8, 1), CORE_ALG_PAP);
        assert_int_equal(pick(&tab, A2A, b, 16, 1, 1), CORE_ALG_PAP);
        assert_int_equal(pick(&tab, AG, b, 4, 4, 1), CORE_ALG_PAP);
    }
    /* Several nodes of several ranks: pap too (measured on pretend nodes). */
    assert_int_equal(pick(&tab, A2A, 0, 2, 2, 1), CORE_ALG_PAP);
    assert_int_equal(pick(&tab, A2A, 100, 64, 32, 1), CORE_ALG_PAP);
    assert_int_equal(pick(&tab, A2A, SIZE_MAX, 64, 32, 1), CORE_ALG_PAP);
    assert_int_equal(pick(&tab, A2A, 100, 2, 3, 0), CORE_ALG_PAP);
    /* The rule docs/configuration.md suggests for real nodes goes before it. */
    set_ok(&tab, "alltoall:0-1k:ppn=2-inf:nodes=2-inf:@sa");
    assert_int_equal(pick(&tab, A2A, 1023, 2, 2, 1), CORE_ALG_SA);
    assert_int_equal(pick(&tab, A2A, 1024, 2, 2, 1), CORE_ALG_PAP);
    /* sa cannot run on unequal nodes: its rule is passed over. */
    assert_int_equal(pick(&tab, A2A, 100, 2, 3, 0), CORE_ALG_PAP);
}

/* The rules for 2+ nodes over a NIC (bench/sim-tune.sh, docs/scale.md "Tuning at scale"):
 * chan=verbs, over=no only; one node and smp keep their picks. */
static int pick_net(const core_tune_t *tab, int coll, size_t bytes, uint32_t nodes, uint32_t ppn,
                    int equal, int over, int chan)
{
    core_tune_shape_t s = {nodes, ppn, equal, over, chan, 0};
    return core_tune_pick(tab, coll, bytes, &s);
}

static void test_default_nodes(void **state)
{
    enum { V = CORE_CHANNEL_VERBS, S = CORE_CHANNEL_SMP };
    core_tune_t tab;

    (void)state;
    set_ok(&tab, "default");
    /* Nodes of 2+ ranks: sa below 1 KiB up to 8 nodes of 8, below 512 B beyond; pap_shm
     * below 1 KiB, and below 8 KiB with 4+ ranks per node; pap above. */
    assert_int_equal(pick_net(&tab, A2A, 8, 2, 2, 1, 0, V), CORE_ALG_SA);
    assert_int_equal(pick_net(&tab, A2A, 1023, 8, 8, 1, 0, V), CORE_ALG_SA);
    assert_int_equal(pick_net(&tab, A2A, 1024, 2, 8, 1, 0, V), CORE_ALG_PAP);
    assert_int_equal(pick_net(&tab, A2A, 511, 9, 8, 1, 0, V), CORE_ALG_SA);
    assert_int_equal(pick_net(&tab, A2A, 512, 9, 8, 1, 0, V), CORE_ALG_PAP);
    assert_int_equal(pick_net(&tab, A2A, 511, 4, 16, 1, 0, V), CORE_ALG_SA);
    assert_int_equal(pick_net(&tab, A2A, 512, 4, 16, 1, 0, V), CORE_ALG_PAP);
    assert_int_equal(pick_net(&tab, A2A, 512, 16, 16, 1, 0, V), CORE_ALG_PAP);
    assert_int_equal(pick_net(&tab, AG, 0, 2, 2, 1, 0, V), CORE_ALG_PAP_SHM);
    assert_int_equal(pick_net(&tab, AG, 1023, 16, 16, 0, 0, V), CORE_ALG_PAP_SHM);
    assert_int_equal(pick_net(&tab, AG, 1024, 2, 2, 1, 0, V), CORE_ALG_PAP);
    assert_int_equal(pick_net(&tab, AG, 1024, 4, 4, 1, 0, V), CORE_ALG_PAP_SHM);
    assert_int_equal(pick_net(&tab, AG, 8191, 2, 4, 1, 0, V), CORE_ALG_PAP_SHM);
    assert_int_equal(pick_net(&tab, AG, 4096, 2, 3, 1, 0, V), CORE_ALG_PAP);
    assert_int_equal(pick_net(&tab, AG, 8192, 16, 16, 1, 0, V), CORE_ALG_PAP);
    /* mn_cox from 16 nodes of 2-8 (allgather 2-16) while a node pair's block stays small
     * (docs/scale.md "004"). */
    assert_int_equal(pick_net(&tab, A2A, 127, 16, 2, 1, 0, V), CORE_ALG_MN_COX);
    assert_int_equal(pick_net(&tab, A2A, 128, 16, 2, 1, 0, V), CORE_ALG_SA);
    assert_int_equal(pick_net(&tab, A2A, 8, 15, 2, 1, 0, V), CORE_ALG_SA);
    assert_int_equal(pick_net(&tab, A2A, 63, 256, 4, 1, 0, V), CORE_ALG_MN_COX);
    assert_int_equal(pick_net(&tab, A2A, 64, 256, 4, 1, 0, V), CORE_ALG_SA);
    assert_int_equal(pick_net(&tab, A2A, 15, 64, 8, 0, 0, V), CORE_ALG_MN_COX);
    assert_int_equal(pick_net(&tab, A2A, 16, 64, 8, 1, 0, V), CORE_ALG_SA);
    assert_int_equal(pick_net(&tab, A2A, 8, 16, 16, 1, 0, V), CORE_ALG_SA);
    assert_int_equal(pick_net(&tab, A2A, 8, 16, 4, 1, 0, S), CORE_ALG_PAP);
    assert_int_equal(pick_net(&tab, AG, 511, 16, 2, 1, 0, V), CORE_ALG_MN_COX);
    assert_int_equal(pick_net(&tab, AG, 512, 16, 2, 1, 0, V), CORE_ALG_PAP_SHM);
    assert_int_equal(pick_net(&tab, AG, 255, 64, 4, 1, 0, V), CORE_ALG_MN_COX);
    assert_int_equal(pick_net(&tab, AG, 256, 64, 4, 1, 0, V), CORE_ALG_PAP_SHM);
    assert_int_equal(pick_net(&tab, AG, 127, 16, 16, 1, 0, V), CORE_ALG_MN_COX);
    assert_int_equal(pick_net(&tab, AG, 128, 16, 16, 1, 0, V), CORE_ALG_PAP_SHM);
    assert_int_equal(pick_net(&tab, AG, 8, 16, 32, 1, 0, V), CORE_ALG_PAP_SHM);
    assert_int_equal(pick_net(&tab, AG, 8, 15, 4, 1, 0, V), CORE_ALG_PAP_SHM);
    /* Unequal nodes: sa cannot run, nothing else matches: pap. */
    assert_int_equal(pick_net(&tab, A2A, 8, 2, 3, 0, 0, V), CORE_ALG_PAP);
    /* One rank per node: mn_co from 16 nodes, below 1536 B (alltoall) and 3 KiB (allgather). */
    assert_int_equal(pick_net(&tab, A2A, 8, 4, 1, 1, 0, V), CORE_ALG_PAP);
    assert_int_equal(pick_net(&tab, A2A, 8, 15, 1, 1, 0, V), CORE_ALG_PAP);
    assert_int_equal(pick_net(&tab, A2A, 8, 16, 1, 1, 0, V), CORE_ALG_MN_CO);
    assert_int_equal(pick_net(&tab, A2A, 1535, 1024, 1, 1, 0, V), CORE_ALG_MN_CO);
    assert_int_equal(pick_net(&tab, A2A, 1536, 64, 1, 1, 0, V), CORE_ALG_PAP);
    assert_int_equal(pick_net(&tab, AG, 3071, 16, 1, 1, 0, V), CORE_ALG_MN_CO);
    assert_int_equal(pick_net(&tab, AG, 3072, 16, 1, 1, 0, V), CORE_ALG_PAP);
    /* Not for one node, smp, or an oversubscribed job. */
    for (size_t b = 0; b < 4096; b += 64) {
        for (int coll = A2A; coll <= AG; coll++) {
            assert_int_equal(pick_net(&tab, coll, b, 1, 8, 1, 0, V), CORE_ALG_PAP);
            assert_int_equal(pick_net(&tab, coll, b, 2, 8, 1, 0, S), CORE_ALG_PAP);
            assert_int_equal(pick_net(&tab, coll, b, 64, 1, 1, 0, S), CORE_ALG_PAP);
            assert_int_equal(pick_net(&tab, coll, b, 2, 8, 1, 1, V), CORE_ALG_PAP);
            assert_int_equal(pick_net(&tab, coll, b, 64, 1, 1, 1, V), CORE_ALG_PAP);
        }
    }
}

/* sh_co where one node's ranks share the node heap (docs/measurements/sh-co.md): 2 KiB-1 MiB
 * alltoall and from 2 KiB allgather with ranks <= cores, from 16 KiB when oversubscribed. */
static int pick_heap(const core_tune_t *tab, int coll, size_t bytes, uint32_t nodes, uint32_t ppn,
                     int over, int heap)
{
    core_tune_shape_t s = {nodes, ppn, 1, over, CORE_CHANNEL_SMP, heap};
    return core_tune_pick(tab, coll, bytes, &s);
}

static void test_default_sh_co(void **state)
{
    core_tune_t tab;

    (void)state;
    set_ok(&tab, "default");
    for (int over = 0; over <= 1; over++) {
        size_t lo = over ? 16384 : 2048;
        for (int coll = A2A; coll <= AG; coll++) {
            assert_int_equal(pick_heap(&tab, coll, lo - 1, 1, 2, over, 1), CORE_ALG_PAP);
            assert_int_equal(pick_heap(&tab, coll, lo, 1, 2, over, 1), CORE_ALG_SH_CO);
            assert_int_equal(pick_heap(&tab, coll, lo, 1, 8, over, 1), CORE_ALG_SH_CO);
            assert_int_equal(pick_heap(&tab, coll, (size_t)1 << 19, 1, 4, over, 1), CORE_ALG_SH_CO);
            assert_int_equal(pick_heap(&tab, coll, SIZE_MAX - 1, 1, 2, over, 1), CORE_ALG_SH_CO);
            /* No shared heap, or more than one node: never. */
            assert_int_equal(pick_heap(&tab, coll, lo, 1, 2, over, 0), CORE_ALG_PAP);
            assert_int_equal(pick_heap(&tab, coll, lo, 2, 2, over, 1), CORE_ALG_PAP);
        }
    }
    /* allgatherv (the mean block) from 16 KiB with ranks <= cores only. */
    assert_int_equal(pick_heap(&tab, CORE_TUNE_ALLGATHERV, 16383, 1, 2, 0, 1), CORE_ALG_PAP);
    assert_int_equal(pick_heap(&tab, CORE_TUNE_ALLGATHERV, 16384, 1, 2, 0, 1), CORE_ALG_SH_CO);
    assert_int_equal(pick_heap(&tab, CORE_TUNE_ALLGATHERV, 16384, 1, 4, 1, 1), CORE_ALG_PAP);
    assert_int_equal(pick_heap(&tab, CORE_TUNE_ALLGATHERV, 16384, 1, 2, 0, 0), CORE_ALG_PAP);
    /* A user's rule before it wins. */
    set_ok(&tab, "alltoall:0-inf:@pap");
    assert_int_equal(pick_heap(&tab, A2A, 4096, 1, 2, 0, 1), CORE_ALG_PAP);
    assert_int_equal(pick_heap(&tab, AG, 4096, 1, 2, 0, 1), CORE_ALG_SH_CO);
    /* allgatherv takes algorithm rules too, by the mean block. */
    set_ok(&tab, "allgatherv:4k-16k:nodes=1:@sh_co");
    assert_int_equal(pick_heap(&tab, CORE_TUNE_ALLGATHERV, 4096, 1, 2, 0, 1), CORE_ALG_SH_CO);
    assert_int_equal(pick_heap(&tab, CORE_TUNE_ALLGATHERV, 4095, 1, 2, 0, 1), CORE_ALG_PAP);
    assert_int_equal(pick_heap(&tab, CORE_TUNE_ALLGATHERV, 4096, 1, 2, 0, 0), CORE_ALG_PAP);
}

static int path_of(const core_tune_t *tab, int coll, size_t bytes, int over, int chan);

/* The default path rules (bench/arcoll-tune.sh through the shim on a 2-core host): zero-copy
 * from 32 KiB per peer, with ranks <= cores and oversubscribed; on verbs none (the channel's
 * own threshold decides). */
static void test_default_paths(void **state)
{
    static const int colls[] = {A2A, AG};
    core_tune_t tab;

    (void)state;
    set_ok(&tab, "default");
    for (int c = 0; c < 2; c++) {
        assert_int_equal(path_of(&tab, colls[c], 1, 0, CORE_CHANNEL_SMP), CORE_PATH_COPY);
        assert_int_equal(path_of(&tab, colls[c], 32767, 0, CORE_CHANNEL_SMP), CORE_PATH_COPY);
        assert_int_equal(path_of(&tab, colls[c], 32768, 0, CORE_CHANNEL_SMP), CORE_PATH_ZCOPY);
        assert_int_equal(path_of(&tab, colls[c], SIZE_MAX, 0, CORE_CHANNEL_SMP), CORE_PATH_ZCOPY);
        assert_int_equal(path_of(&tab, colls[c], 32767, 1, CORE_CHANNEL_SMP), CORE_PATH_COPY);
        assert_int_equal(path_of(&tab, colls[c], 32768, 1, CORE_CHANNEL_SMP), CORE_PATH_ZCOPY);
        assert_int_equal(path_of(&tab, colls[c], 1 << 20, 0, CORE_CHANNEL_VERBS), -1);
        assert_int_equal(path_of(&tab, colls[c], 1 << 20, 1, CORE_CHANNEL_VERBS), -1);
    }
    /* ARCOLL_TUNE rules come first. */
    set_ok(&tab, "alltoall:0-inf:@copy");
    assert_int_equal(path_of(&tab, A2A, 1 << 20, 0, CORE_CHANNEL_SMP), CORE_PATH_COPY);
    assert_int_equal(path_of(&tab, AG, 1 << 20, 0, CORE_CHANNEL_SMP), CORE_PATH_ZCOPY);
}

/* ---- path rules ---------------------------------------------------------- */

static int path_of(const core_tune_t *tab, int coll, size_t bytes, int over, int chan)
{
    core_tune_shape_t s = {1, 2, 1, over, chan, 0};
    return core_tune_path(tab, coll, bytes, &s);
}

static void test_path_rules(void **state)
{
    static const struct {
        const char *value, *text1, *text2;
    } bad[] = {
        {"alltoall:0-1:over=maybe:@zcopy", "bad condition \"over=maybe\"", "over=yes or over=no"},
        {"alltoall:0-1:chan=ib:@zcopy", "bad condition \"chan=ib\"", "chan=smp or chan=verbs"},
        {"alltoall:0-1:over=no:over=yes:@copy", "given twice", NULL},
        {"alltoall:0-1:chan=smp:chan=smp:@copy", "given twice", NULL},
        {"alltoall:0-1:over:@copy", "unknown condition \"over\"", "over=yes|no"},
        {"alltoall:0-1:@zcop", "unknown algorithm \"zcop\"", "copy, zcopy"},
    };
    core_tune_t tab, other;
    char buf[512];

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        set_bad(bad[i].value, bad[i].text1, bad[i].text2);

    set_ok(&tab, "alltoall:64k-inf:over=no:chan=smp:@zcopy#alltoall:1m-inf:over=yes:@zcopy#"
                 "allgather:0-inf:chan=verbs:@copy#alltoall:0-inf:@direct");
    /* Path rules only by their conditions; algorithm rules are not paths. Where no user
     * rule matches, the default table's path rules (smp only, test_default_paths) answer. */
    assert_int_equal(path_of(&tab, A2A, 65535, 0, CORE_CHANNEL_VERBS), -1);
    assert_int_equal(path_of(&tab, A2A, 65536, 0, CORE_CHANNEL_SMP), CORE_PATH_ZCOPY);
    assert_int_equal(path_of(&tab, A2A, 65536, 0, CORE_CHANNEL_VERBS), -1);
    assert_int_equal(path_of(&tab, A2A, 65536, 1, CORE_CHANNEL_VERBS), -1);
    assert_int_equal(path_of(&tab, A2A, 1 << 20, 1, CORE_CHANNEL_VERBS), CORE_PATH_ZCOPY);
    assert_int_equal(path_of(&tab, AG, 1, 1, CORE_CHANNEL_VERBS), CORE_PATH_COPY);
    assert_int_equal(path_of(&tab, AG, 1 << 20, 0, CORE_CHANNEL_SMP), CORE_PATH_ZCOPY);
    /* The user's rule wins over the default's (which says copy at 1 B on smp). */
    set_ok(&other, "allgather:0-inf:chan=smp:@zcopy");
    assert_int_equal(path_of(&other, AG, 1, 1, CORE_CHANNEL_SMP), CORE_PATH_ZCOPY);
    /* ... and path rules are not algorithms: the algorithm rule still serves. */
    assert_int_equal(pick(&tab, A2A, 1 << 20, 1, 2, 1), CORE_ALG_DIRECT);
    assert_int_equal(pick(&tab, AG, 1, 1, 2, 1), CORE_ALG_PAP);
    /* An algorithm rule with over= matches only that shape. */
    set_ok(&other, "alltoall:0-inf:over=yes:@direct");
    assert_int_equal(pick(&other, A2A, 1, 1, 2, 1), CORE_ALG_PAP); /* over 0 */

    /* The canonical form reads back to the same rules; the digest sees them. */
    core_tune_get(&tab, buf, sizeof(buf));
    assert_string_equal(buf, "alltoall:64k-inf:over=no:chan=smp:@zcopy#alltoall:1m-inf:over=yes:"
                             "@zcopy#allgather:0-inf:chan=verbs:@copy#alltoall:0-inf:@direct");
    set_ok(&other, buf);
    assert_true(core_tune_digest(&tab, 1) == core_tune_digest(&other, 1));
    set_ok(&other, "alltoall:64k-inf:over=yes:chan=smp:@zcopy#alltoall:1m-inf:over=yes:@zcopy#"
                   "allgather:0-inf:chan=verbs:@copy#alltoall:0-inf:@direct");
    assert_true(core_tune_digest(&tab, 1) != core_tune_digest(&other, 1));
    set_ok(&other, "alltoall:64k-inf:over=no:chan=smp:@copy#alltoall:1m-inf:over=yes:@zcopy#"
                   "allgather:0-inf:chan=verbs:@copy#alltoall:0-inf:@direct");
    assert_true(core_tune_digest(&tab, 1) != core_tune_digest(&other, 1));
}

/* ---- serve rules (@mpi, @arcoll) ---------------------------------------- */

static int host_of(const core_tune_t *tab, int coll, size_t bytes, int over, int chan)
{
    core_tune_shape_t s = {1, 2, 1, over, chan, 0};
    return core_tune_host(tab, coll, bytes, &s);
}

static void test_serve_rules(void **state)
{
    core_tune_t tab, other;
    char buf[512];

    (void)state;
    set_bad("alltoall:0-1:@mp", "unknown algorithm \"mp\"", "mpi, arcoll");
    set_bad("allreduce:0-1:@pap", "allreduce takes serve rules only", "ARCOLL_ALLREDUCE_ALG");
    set_bad("reduce_scatter:0-1:@zcopy", "reduce_scatter takes serve rules only", NULL);
    set_bad("alltoallv:0-1:@mpi", "unknown collective \"alltoallv\"", "allreduce");
    /* allreduce: below 4 KiB to MPI, in both shapes, on smp; allgatherv below
     * 2 KiB (mean block) and reduce_scatter below 1 KiB (block) with ranks <=
     * cores on smp only. */
    set_ok(&tab, "default");
    assert_int_equal(host_of(&tab, CORE_TUNE_ALLREDUCE, 4095, 0, CORE_CHANNEL_SMP), 1);
    assert_int_equal(host_of(&tab, CORE_TUNE_ALLREDUCE, 4095, 1, CORE_CHANNEL_SMP), 1);
    assert_int_equal(host_of(&tab, CORE_TUNE_ALLREDUCE, 4096, 0, CORE_CHANNEL_SMP), 0);
    assert_int_equal(host_of(&tab, CORE_TUNE_ALLREDUCE, 8, 0, CORE_CHANNEL_VERBS), 0);
    assert_int_equal(host_of(&tab, CORE_TUNE_REDUCE_SCATTER, 8, 0, CORE_CHANNEL_SMP), 1);
    assert_int_equal(host_of(&tab, CORE_TUNE_REDUCE_SCATTER, 1023, 0, CORE_CHANNEL_SMP), 1);
    assert_int_equal(host_of(&tab, CORE_TUNE_REDUCE_SCATTER, 1024, 0, CORE_CHANNEL_SMP), 0);
    assert_int_equal(host_of(&tab, CORE_TUNE_REDUCE_SCATTER, 8, 1, CORE_CHANNEL_SMP), 0);
    assert_int_equal(host_of(&tab, CORE_TUNE_REDUCE_SCATTER, 8, 0, CORE_CHANNEL_VERBS), 0);
    assert_int_equal(host_of(&tab, CORE_TUNE_ALLGATHERV, 2047, 0, CORE_CHANNEL_SMP), 1);
    assert_int_equal(host_of(&tab, CORE_TUNE_ALLGATHERV, 2048, 0, CORE_CHANNEL_SMP), 0);
    assert_int_equal(host_of(&tab, CORE_TUNE_ALLGATHERV, 8, 1, CORE_CHANNEL_SMP), 0);
    set_ok(&other, "allgatherv:0-1k:@mpi#reduce_scatter:0-64:over=yes:@mpi");
    assert_int_equal(host_of(&other, CORE_TUNE_ALLGATHERV, 1023, 0, CORE_CHANNEL_VERBS), 1);
    assert_int_equal(host_of(&other, CORE_TUNE_REDUCE_SCATTER, 8, 1, CORE_CHANNEL_SMP), 1);
    /* (on smp with ranks <= cores the default table's rule would answer) */
    assert_int_equal(host_of(&other, CORE_TUNE_REDUCE_SCATTER, 8, 0, CORE_CHANNEL_VERBS), 0);
    core_tune_get(&other, buf, sizeof(buf));
    assert_string_equal(buf, "allgatherv:0-1k:@mpi#reduce_scatter:0-64:over=yes:@mpi");
    /* The default: the shim keeps 0-511 B per peer in MPI with ranks <= cores on smp only. */
    set_ok(&tab, "default");
    for (int c = 0; c < 2; c++) {
        int coll = c ? AG : A2A;
        assert_int_equal(host_of(&tab, coll, 0, 0, CORE_CHANNEL_SMP), 1);
        assert_int_equal(host_of(&tab, coll, 511, 0, CORE_CHANNEL_SMP), 1);
        assert_int_equal(host_of(&tab, coll, 512, 0, CORE_CHANNEL_SMP), 0);
        assert_int_equal(host_of(&tab, coll, 8, 1, CORE_CHANNEL_SMP), 0);
        assert_int_equal(host_of(&tab, coll, 8, 0, CORE_CHANNEL_VERBS), 0);
        /* Serve rules are neither algorithms nor paths. */
        assert_int_equal(pick(&tab, coll, 8, 1, 2, 1), CORE_ALG_PAP);
        assert_int_equal(path_of(&tab, coll, 8, 0, CORE_CHANNEL_SMP), CORE_PATH_COPY);
    }
    /* A user's @arcoll before the default's @mpi keeps the calls in arcoll. */
    set_ok(&other, "alltoall:0-inf:@arcoll");
    assert_int_equal(host_of(&other, A2A, 8, 0, CORE_CHANNEL_SMP), 0);
    assert_int_equal(host_of(&other, AG, 8, 0, CORE_CHANNEL_SMP), 1);
    set_ok(&other, "allgather:1k-2k:chan=verbs:@mpi");
    assert_int_equal(host_of(&other, AG, 1024, 1, CORE_CHANNEL_VERBS), 1);
    assert_int_equal(host_of(&other, AG, 2048, 1, CORE_CHANNEL_VERBS), 0);
    /* Canonical form and digest. */
    core_tune_get(&other, buf, sizeof(buf));
    assert_string_equal(buf, "allgather:1k-2k:chan=verbs:@mpi");
    set_ok(&tab, "allgather:1k-2k:chan=verbs:@arcoll");
    assert_true(core_tune_digest(&tab, 1) != core_tune_digest(&other, 1));
    set_ok(&tab, buf);
    assert_true(core_tune_digest(&tab, 1) == core_tune_digest(&other, 1));
}

/* ---- pick -------------------------------------------------------------- */

static void test_pick(void **state)
{
    core_tune_t tab, empty;

    (void)state;
    /* LO inclusive, HI exclusive; user rules before the default table. */
    set_ok(&tab, "alltoall:0-256:@direct#alltoall:256-4k:@pap_shm#alltoall:4k-inf:@pap");
    assert_int_equal(pick(&tab, A2A, 0, 2, 2, 1), CORE_ALG_DIRECT);
    assert_int_equal(pick(&tab, A2A, 255, 2, 2, 1), CORE_ALG_DIRECT);
    assert_int_equal(pick(&tab, A2A, 256, 2, 2, 1), CORE_ALG_PAP_SHM);
    assert_int_equal(pick(&tab, A2A, 4095, 2, 2, 1), CORE_ALG_PAP_SHM);
    assert_int_equal(pick(&tab, A2A, 4096, 2, 2, 1), CORE_ALG_PAP);
    assert_int_equal(pick(&tab, A2A, SIZE_MAX - 1, 2, 2, 1), CORE_ALG_PAP);
    /* The rules are alltoall's: allgather goes to the default table. */
    assert_int_equal(pick(&tab, AG, 100, 2, 2, 1), CORE_ALG_PAP);
    /* pap_shm needs a node of two ranks: with one rank per node the next rule
     * that matches serves (here the default table's). */
    assert_int_equal(pick(&tab, A2A, 300, 4, 1, 1), CORE_ALG_PAP);

    /* First match wins, even over a narrower rule further down. */
    set_ok(&tab, "allgather:0-inf:@direct#allgather:0-8:@shm_direct");
    assert_int_equal(pick(&tab, AG, 4, 2, 2, 1), CORE_ALG_DIRECT);
    set_ok(&tab, "allgather:0-8:@shm_direct#allgather:0-inf:@direct");
    assert_int_equal(pick(&tab, AG, 4, 2, 2, 1), CORE_ALG_SHM_DIRECT);
    assert_int_equal(pick(&tab, AG, 8, 2, 2, 1), CORE_ALG_DIRECT);

    /* Shape conditions are inclusive. */
    set_ok(&tab, "alltoall:0-inf:ppn=2-4:nodes=2-8:@leader#alltoall:0-inf:ppn=8:@rd");
    assert_int_equal(pick(&tab, A2A, 300, 2, 2, 1), CORE_ALG_LEADER);
    assert_int_equal(pick(&tab, A2A, 300, 8, 4, 1), CORE_ALG_LEADER);
    assert_int_equal(pick(&tab, A2A, 300, 8, 4, 0), CORE_ALG_LEADER); /* leader takes unequal */
    assert_int_equal(pick(&tab, A2A, 300, 9, 4, 1), CORE_ALG_PAP);    /* nodes above */
    assert_int_equal(pick(&tab, A2A, 300, 1, 4, 1), CORE_ALG_PAP);    /* nodes below */
    assert_int_equal(pick(&tab, A2A, 300, 4, 5, 1), CORE_ALG_PAP);    /* ppn above */
    assert_int_equal(pick(&tab, A2A, 300, 4, 8, 1), CORE_ALG_RD);
    assert_int_equal(pick(&tab, A2A, 300, 4, 8, 0), CORE_ALG_PAP); /* rd: equal nodes only */

    /* Nothing matches at all: pap. */
    memset(&empty, 0, sizeof(empty));
    assert_int_equal(pick(&empty, A2A, 9, 4, 8, 1), CORE_ALG_PAP);
    assert_int_equal(pick(&empty, AG, 0, 1, 1, 1), CORE_ALG_PAP);
}

static void test_fits(void **state)
{
    core_tune_shape_t flat = shape(4, 1, 1), eq = shape(2, 2, 1), uneq = shape(2, 3, 0);

    (void)state;
    for (int a = 0; a < CORE_ALG_COUNT; a++) {
        int node = a == CORE_ALG_SHM_DIRECT || a == CORE_ALG_PAP_SHM || a == CORE_ALG_LEADER ||
                   a == CORE_ALG_MN_COX || a == CORE_ALG_SA || a == CORE_ALG_SA_DIRECT ||
                   a == CORE_ALG_RD;
        int needs_equal = a == CORE_ALG_SA || a == CORE_ALG_SA_DIRECT || a == CORE_ALG_RD;
        if (a == CORE_ALG_AUTO) {
            assert_false(core_tune_fits(a, &eq));
            continue;
        }
        if (a == CORE_ALG_SH_CO) { /* one node whose ranks share the heap */
            core_tune_shape_t one = shape(1, 4, 1), one_heap = one, two_heap = eq;
            one_heap.heap = two_heap.heap = 1;
            assert_false(core_tune_fits(a, &flat) || core_tune_fits(a, &eq) ||
                         core_tune_fits(a, &uneq) || core_tune_fits(a, &one) ||
                         core_tune_fits(a, &two_heap));
            assert_true(core_tune_fits(a, &one_heap));
            continue;
        }
        assert_int_equal(core_tune_fits(a, &flat), !node);
        assert_true(core_tune_fits(a, &eq));
        assert_int_equal(core_tune_fits(a, &uneq), !needs_equal);
    }
}

static void test_shape(void **state)
{
    uint32_t eq[3] = {4, 4, 4}, uneq[3] = {3, 1, 2};
    hier_t h;
    core_tune_shape_t s;

    (void)state;
    hier_shape(NULL, 6, &s);
    assert_int_equal(s.nodes, 6);
    assert_int_equal(s.ppn, 1);
    assert_true(s.equal);
    memset(&h, 0, sizeof(h));
    h.nnodes = 3;
    h.lmax = 4;
    h.node_size = eq;
    hier_shape(&h, 12, &s);
    assert_int_equal(s.nodes, 3);
    assert_int_equal(s.ppn, 4);
    assert_true(s.equal);
    assert_false(s.heap);
    h.heap = 1; /* the heap counts on one node only */
    hier_shape(&h, 12, &s);
    assert_false(s.heap);
    h.nnodes = 1;
    hier_shape(&h, 4, &s);
    assert_true(s.heap);
    h.nnodes = 3;
    h.heap = 0;
    h.lmax = 3;
    h.node_size = uneq;
    hier_shape(&h, 6, &s);
    assert_int_equal(s.nodes, 3);
    assert_int_equal(s.ppn, 3);
    assert_false(s.equal);
}

/* ---- as a configuration variable --------------------------------------- */

static void test_config_var(void **state)
{
    core_config_t cfg, copy;
    char buf[1024], value[128], *path;
    uint64_t d0, d1;

    (void)state;
    assert_int_equal(core_config_init(&cfg), ARCOLL_OK);
    assert_int_equal(cfg.tune.nuser, 0);
    assert_true(cfg.tune.n > 0); /* the default table parsed at init */
    assert_string_equal(core_config_get(&cfg, "ARCOLL_TUNE", buf, sizeof(buf)), "default");
    d0 = core_config_digest(&cfg);

    /* Rendered canonically, accepted back, same digest. */
    assert_int_equal(core_config_set(&cfg, "ARCOLL_TUNE",
                                     "ALLTOALL:0-1024:ppn=1-inf:nodes=2-inf:@Pap_shm#"
                                     "allgather:3-2097152:ppn=2:nodes=1-7:@direct#"
                                     "alltoall:1G-inf:@sa"),
                     ARCOLL_OK);
    assert_string_equal(core_config_get(&cfg, "ARCOLL_TUNE", buf, sizeof(buf)),
                        "alltoall:0-1k:nodes=2-inf:@pap_shm#allgather:3-2m:ppn=2:nodes=1-7:@direct#"
                        "alltoall:1g-inf:@sa");
    d1 = core_config_digest(&cfg);
    assert_int_not_equal(d1, d0);
    assert_int_equal(core_config_init(&copy), ARCOLL_OK);
    assert_int_equal(core_config_set(&copy, "ARCOLL_TUNE", buf), ARCOLL_OK);
    assert_int_equal(core_config_digest(&copy), d1);

    /* Every part of a rule is in the digest. */
    {
        static const char *const variants[] = {
            "alltoall:0-1k:nodes=2-inf:@pap#allgather:3-2m:ppn=2:nodes=1-7:@direct#alltoall:1g-inf:"
            "@sa",
            "alltoall:0-1025:nodes=2-inf:@pap_shm#allgather:3-2m:ppn=2:nodes=1-7:@direct#alltoall:"
            "1g-inf:@sa",
            "alltoall:1-1k:nodes=2-inf:@pap_shm#allgather:3-2m:ppn=2:nodes=1-7:@direct#alltoall:1g-"
            "inf:@sa",
            "alltoall:0-1k:nodes=3-inf:@pap_shm#allgather:3-2m:ppn=2:nodes=1-7:@direct#alltoall:1g-"
            "inf:@sa",
            "alltoall:0-1k:nodes=2-inf:@pap_shm#allgather:3-2m:ppn=2-3:nodes=1-7:@direct#alltoall:"
            "1g-inf:@sa",
            "alltoall:0-1k:nodes=2-inf:@pap_shm#allgather:3-2m:ppn=2:nodes=1-8:@direct#alltoall:1g-"
            "inf:@sa",
            "alltoall:0-1k:nodes=2-inf:@pap_shm#alltoall:3-2m:ppn=2:nodes=1-7:@direct#alltoall:1g-"
            "inf:@sa",
            "allgather:3-2m:ppn=2:nodes=1-7:@direct#alltoall:0-1k:nodes=2-inf:@pap_shm#alltoall:1g-"
            "inf:@sa",
            "alltoall:0-1k:nodes=2-inf:@pap_shm#allgather:3-2m:ppn=2:nodes=1-7:@direct",
        };
        for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
            copy = cfg;
            assert_int_equal(core_config_set(&copy, "ARCOLL_TUNE", variants[i]), ARCOLL_OK);
            if (core_config_digest(&copy) == d1)
                fail_msg("digest unchanged by ARCOLL_TUNE=%s", variants[i]);
        }
    }

    /* A file with the same rules agrees with the string: content, not source. */
    path = write_file("; same rules\nalltoall:0-1024:nodes=2-inf:@pap_shm\n"
                      "allgather:3-2m:ppn=2:nodes=1-7:@direct # alltoall:1g-inf:@sa\n");
    snprintf(value, sizeof(value), "file:%s", path);
    assert_int_equal(core_config_set(&copy, "ARCOLL_TUNE", value), ARCOLL_OK);
    assert_int_equal(core_config_digest(&copy), d1);
    assert_string_equal(core_config_get(&copy, "ARCOLL_TUNE", buf, sizeof(buf)), value);
    assert_non_null(strstr(core_tune_source(&copy.tune, buf, sizeof(buf)), path));
    assert_non_null(strstr(buf, "3 rules"));
    unlink(path);

    /* Back to the default table. */
    assert_int_equal(core_config_set(&cfg, "ARCOLL_TUNE", "default"), ARCOLL_OK);
    assert_int_equal(core_config_digest(&cfg), d0);
    assert_non_null(strstr(core_tune_source(&cfg.tune, buf, sizeof(buf)), "default table"));

    /* A rejected value leaves the table as it was. */
    assert_int_equal(core_config_set(&cfg, "ARCOLL_TUNE", "alltoall:0-1:@nope"), ARCOLL_ERR_CONFIG);
    assert_int_equal(core_config_digest(&cfg), d0);

    /* From the environment at init; a bad one fails init, naming the variable. */
    assert_int_equal(setenv("ARCOLL_TUNE", "allgather:0-inf:@direct", 1), 0);
    assert_int_equal(core_config_init(&cfg), ARCOLL_OK);
    assert_int_equal(cfg.tune.nuser, 1);
    assert_int_equal(cfg.tune.rule[0].alg, CORE_ALG_DIRECT);
    assert_int_equal(setenv("ARCOLL_TUNE", "allgather:0-inf:@sa", 1), 0);
    assert_int_equal(core_config_init(&cfg), ARCOLL_ERR_CONFIG);
    assert_non_null(strstr(core_error_last(), "ARCOLL_TUNE"));
    unsetenv("ARCOLL_TUNE");

    /* The algorithm variables: auto, and allgather refuses the alltoall-only ones in any case. */
    assert_int_equal(core_config_init(&cfg), ARCOLL_OK);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_ALLTOALL_ALG", "auto"), ARCOLL_OK);
    assert_int_equal(cfg.alltoall_alg, CORE_ALG_AUTO);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_ALLGATHER_ALG", "Auto"), ARCOLL_OK);
    assert_int_equal(cfg.allgather_alg, CORE_ALG_AUTO);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_ALLGATHER_ALG", "SA"), ARCOLL_ERR_CONFIG);
    assert_int_equal(core_config_set(&cfg, "ARCOLL_ALLGATHER_ALG", "Leader"), ARCOLL_ERR_CONFIG);
    assert_int_equal(cfg.allgather_alg, CORE_ALG_AUTO);
    assert_non_null(strstr(core_error_last(), "alltoall-only"));
}

/* ---- coll_alg_resolve on hand-built teams ------------------------------- */

typedef struct fixture {
    struct arcoll_context ctx;
    chan_t chan; /* a real transport (models: none) unless a test says otherwise */
    struct arcoll_team team;
    hier_t hier;
    hier_seg_t hseg; /* never mapped: the algorithms' fitness reads max_bytes */
    uint32_t node_size[4];
} fixture_t;

/* nodes x ppn, or unequal when node_size is given; nodes == 0: no hier. */
static fixture_t *team_make(uint32_t size, uint32_t nodes, const uint32_t *node_size)
{
    fixture_t *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    assert_int_equal(core_config_init(&f->ctx.cfg), ARCOLL_OK);
    f->ctx.chan = &f->chan;
    f->team.ctx = &f->ctx;
    f->team.size = size;
    f->team.rank = 1; /* no fallback notice from rank 0 */
    if (nodes > 0) {
        f->hier.nnodes = nodes;
        for (uint32_t e = 0; e < nodes; e++) {
            f->node_size[e] = node_size[e];
            if (node_size[e] > f->hier.lmax)
                f->hier.lmax = node_size[e];
        }
        f->hier.node_size = f->node_size;
        f->hier.equal = 1;
        for (uint32_t e = 0; e < nodes; e++)
            f->hier.equal &= node_size[e] == f->hier.lmax;
        f->hseg.max_bytes = 64 << 10;
        f->team.hier = &f->hier;
        f->team.hseg = &f->hseg;
    }
    return f;
}

static void test_resolve(void **state)
{
    static const uint32_t two_two[] = {2, 2}, three_one[] = {3, 1};
    fixture_t *f;
    const char *why;
    int picked, run;

    (void)state;
    /* 2 nodes x 2 ranks, sa below 256 B. */
    f = team_make(4, 2, two_two);
    assert_int_equal(core_config_set(&f->ctx.cfg, "ARCOLL_TUNE", "alltoall:0-256:@sa"), ARCOLL_OK);
    run = coll_alg_resolve(&f->team, COLL_ALLTOALL, 100, CORE_ALG_AUTO, &picked, &why);
    assert_int_equal(picked, CORE_ALG_SA);
    assert_int_equal(run, CORE_ALG_SA);
    assert_null(why);
    run = coll_alg_resolve(&f->team, COLL_ALLTOALL, 256, CORE_ALG_AUTO, &picked, &why);
    assert_int_equal(picked, CORE_ALG_PAP);
    assert_int_equal(run, CORE_ALG_PAP);
    assert_null(why);
    /* A user rule: pap_shm up to the node segment's limit, pap above it. */
    assert_int_equal(core_config_set(&f->ctx.cfg, "ARCOLL_TUNE", "allgather:0-inf:@pap_shm"),
                     ARCOLL_OK);
    run = coll_alg_resolve(&f->team, COLL_ALLGATHER, 64 << 10, CORE_ALG_AUTO, &picked, &why);
    assert_int_equal(run, CORE_ALG_PAP_SHM);
    assert_null(why);
    run = coll_alg_resolve(&f->team, COLL_ALLGATHER, (64 << 10) + 1, CORE_ALG_AUTO, &picked, &why);
    assert_int_equal(picked, CORE_ALG_PAP_SHM);
    assert_int_equal(run, CORE_ALG_PAP);
    assert_non_null(strstr(why, "ARCOLL_SHM_MAX"));
    /* A fixed algorithm goes through the same fallbacks; nothing is noticed. */
    run = coll_alg_resolve(&f->team, COLL_ALLTOALL, 8, CORE_ALG_SHM_DIRECT, &picked, &why);
    assert_int_equal(picked, CORE_ALG_SHM_DIRECT);
    assert_int_equal(run, CORE_ALG_SHM_DIRECT);
    assert_int_equal(f->team.hier_noticed, 0);
    free(f);

    /* Unequal nodes: auto passes sa over; sa set by hand falls back. */
    f = team_make(4, 2, three_one);
    run = coll_alg_resolve(&f->team, COLL_ALLTOALL, 100, CORE_ALG_AUTO, &picked, &why);
    assert_int_equal(picked, CORE_ALG_PAP);
    assert_null(why);
    run = coll_alg_resolve(&f->team, COLL_ALLTOALL, 100, CORE_ALG_SA, &picked, &why);
    assert_int_equal(picked, CORE_ALG_SA);
    assert_int_equal(run, CORE_ALG_PAP);
    assert_string_equal(why, "unequal ranks per node");
    run = coll_alg_resolve(&f->team, COLL_ALLTOALL, 100, CORE_ALG_SA_DIRECT, &picked, &why);
    assert_int_equal(run, CORE_ALG_DIRECT);
    free(f);

    /* No node holds two ranks: one rank per node, the node algorithms run flat. */
    f = team_make(3, 0, NULL);
    run = coll_alg_resolve(&f->team, COLL_ALLTOALL, 1, CORE_ALG_AUTO, &picked, &why);
    assert_int_equal(picked, CORE_ALG_PAP);
    assert_int_equal(run, CORE_ALG_PAP);
    run = coll_alg_resolve(&f->team, COLL_ALLGATHER, 1, CORE_ALG_SHM_DIRECT, &picked, &why);
    assert_int_equal(run, CORE_ALG_DIRECT);
    assert_string_equal(why, "no node holds two of its ranks");
    free(f);
}

/* Under chan.models = models, the team's shape has over and chan, and auto
 * picks alg for an 8-byte alltoall. */
static void model_expect(fixture_t *f, int models, int over, int chan, int alg)
{
    core_tune_shape_t s;
    const char *why;
    int picked;

    /* A channel's model is fixed for its teams' lives, so the team's memo of the
     * table's answers does not look at it: this fixture changes it, so forget. */
    f->chan.models = models;
    f->team.alg_memo.valid = f->team.path_memo.valid = 0;
    hier_team_shape(&f->team, &s);
    assert_int_equal(s.nodes, 2);
    assert_int_equal(s.ppn, 2);
    assert_int_equal(s.over, over);
    assert_int_equal(s.chan, chan);
    assert_int_equal(coll_alg_resolve(&f->team, COLL_ALLTOALL, 8, CORE_ALG_AUTO, &picked, &why),
                     alg);
}

/* The simulator's model channel: the table sees the job the model describes (every virtual
 * rank has a core; the rules of the transport modelled), not the host running it. */
static void test_model_shape(void **state)
{
    static const uint32_t two_two[] = {2, 2};
    fixture_t *f;

    (void)state;
    f = team_make(4, 2, two_two);
    f->ctx.cfg.channel = CORE_CHANNEL_SIM;
    f->ctx.job_oversubscribed = 1; /* 4 virtual ranks on a host of fewer cores */
    assert_int_equal(core_config_set(&f->ctx.cfg, "ARCOLL_TUNE",
                                     "alltoall:0-inf:nodes=2:over=no:chan=verbs:@sa#"
                                     "alltoall:0-inf:over=no:chan=smp:@direct"),
                     ARCOLL_OK);
    /* No model: the host's view (oversubscribed, chan sim): neither rule. */
    model_expect(f, CHAN_MODELS_NONE, 1, CORE_CHANNEL_SIM, CORE_ALG_PAP);
    /* A parameter set with a NIC: verbs' rules, not oversubscribed. */
    model_expect(f, CHAN_MODELS_NIC, 0, CORE_CHANNEL_VERBS, CORE_ALG_SA);
    /* One host's shared memory: smp's rules. */
    model_expect(f, CHAN_MODELS_SHM, 0, CORE_CHANNEL_SMP, CORE_ALG_DIRECT);
    free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_parse_rules, setup),
        cmocka_unit_test_setup(test_parse_errors, setup),
        cmocka_unit_test_setup(test_file, setup),
        cmocka_unit_test_setup(test_file_limits, setup),
        cmocka_unit_test_setup(test_default_table, setup),
        cmocka_unit_test_setup(test_default_nodes, setup),
        cmocka_unit_test_setup(test_default_sh_co, setup),
        cmocka_unit_test_setup(test_default_paths, setup),
        cmocka_unit_test_setup(test_path_rules, setup),
        cmocka_unit_test_setup(test_serve_rules, setup),
        cmocka_unit_test_setup(test_pick, setup),
        cmocka_unit_test_setup(test_fits, setup),
        cmocka_unit_test_setup(test_shape, setup),
        cmocka_unit_test_setup(test_config_var, setup),
        cmocka_unit_test_setup(test_resolve, setup),
        cmocka_unit_test_setup(test_model_shape, setup),
    };

    return cmocka_run_group_tests_name("tune", tests, NULL, NULL);
}
