/* libFuzzer harness of arcoll-pap-report: the input holds the profiles of
 * ranks 0, 1, ... separated by 0xff bytes (never in a profile, which is
 * text), read, aligned and printed by the tool's own code (tools/pap_report.c;
 * stdout goes to /dev/null). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/pap_report.h"
#include "util/textio.h"

#define FUZZ_RANKS 8

typedef struct fuzz_parts {
    const uint8_t *p[FUZZ_RANKS];
    size_t len[FUZZ_RANKS];
    int n;
} fuzz_parts_t;

static int fuzz_part_open(void *arg, int rank, core_text_t *t, char *path, size_t len)
{
    fuzz_parts_t *parts = arg;
    FILE *f;

    snprintf(path, len, "fuzz.%d", rank);
    /* fmemopen refuses an empty buffer; a missing rank is like a missing file. */
    if (rank >= parts->n || parts->len[rank] == 0)
        return -1;
    f = fmemopen((void *)(uintptr_t)parts->p[rank], parts->len[rank], "r");
    if (f == NULL)
        return -1;
    core_text_init(t, f, REP_FILE_MAX);
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    rep_quiet = 1;
    if (freopen("/dev/null", "w", stdout) == NULL)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_parts_t parts = {.n = 0};
    const uint8_t *p = data, *end = data + size;

    while (parts.n < FUZZ_RANKS) {
        const uint8_t *sep = memchr(p, 0xff, (size_t)(end - p));
        parts.p[parts.n] = p;
        parts.len[parts.n++] = (size_t)((sep != NULL ? sep : end) - p);
        if (sep == NULL)
            break;
        p = sep + 1;
    }
    rep_report("fuzz", fuzz_part_open, &parts);
    return 0;
}
