/* arcoll-pap-report FILE: the process arrival pattern of a run profiled with
 * ARCOLL_PROFILE=FILE, per collective and call site, like Qian and Afsahi Table 1.
 * Reads FILE.0 .. FILE.<n-1> (format: docs/profiling.md), aligns every call
 * across its ranks by (team id, epoch) and prints the means over calls of
 * the imbalance factors d/T and theta/T (Qian and Afsahi §3.1, eq. 1-3). Exit status 1
 * on missing, truncated or inconsistent files. */
#include <stdio.h>
#include <string.h>

#include "tools/pap_report.h"

int main(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(argc == 2 && strcmp(argv[1], "-h") == 0 ? stdout : stderr,
                "usage: %s FILE\n"
                "  Summarise the arrival pattern recorded with ARCOLL_PROFILE=FILE: reads\n"
                "  FILE.0 .. FILE.<n-1> and prints, per collective and call site, the number\n"
                "  of calls, the average size and the mean average-/worst-case imbalance\n"
                "  factors (Qian and Afsahi sec. 3.1). See docs/profiling.md.\n",
                argv[0]);
        return argc == 2 && strcmp(argv[1], "-h") == 0 ? 0 : 1;
    }
    return rep_report(argv[1], rep_file_open, argv[1]);
}
