/* fork_test's sh_co modes (tests/integ/shco_test.c). */
#ifndef ARCOLL_TESTS_SHCO_TEST_H
#define ARCOLL_TESTS_SHCO_TEST_H

#include <stddef.h>

#include "arcoll.h"

/* The parent, before the fork: a shared region of n slices of slice bytes,
 * registered (mem/region.h) so that every rank has it at the same address. */
int shco_region_make(int n, size_t slice);
/* coll_test's hook (coll_test_extra): 1 if mode was "shco". */
int shco_mode(arcoll_context_t ctx, const char *mode, int argc, char **argv);

#endif
