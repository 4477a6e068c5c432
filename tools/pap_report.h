/* arcoll-pap-report's reader of ARCOLL_PROFILE files (tools/pap_report.c): used
 * by the tool (tools/arcoll_pap_report.c) and by tests/fuzz/fuzz_profile.c. */
#ifndef ARCOLL_TOOLS_PAP_REPORT_H
#define ARCOLL_TOOLS_PAP_REPORT_H

#include <stddef.h>

#include "util/textio.h"

/* The largest profile file read (docs/profiling.md, "Limits of the reader"). */
#define REP_FILE_MAX (1ULL << 30)

/* Opens rank's profile into t and names it in path[len]; 0, or -1 having said why. The
 * tool opens FILE.<rank> (rep_file_open, arg the prefix FILE); the fuzz harness opens
 * parts of its input. */
typedef int rep_open_fn(void *arg, int rank, core_text_t *t, char *path, size_t len);
int rep_file_open(void *arg, int rank, core_text_t *t, char *path, size_t len);

/* Reads every rank's profile, aligns the calls and prints the tables to stdout: the exit
 * status of the tool (0, or 1 having said why on stderr). */
int rep_report(const char *prefix, rep_open_fn *open_fn, void *arg);

/* Set by the fuzz harness: the errors of random input are expected, not printed. */
extern int rep_quiet;

#endif
