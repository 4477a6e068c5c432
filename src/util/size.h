/* Sizes in settings and rules: "64k", "1M", "4096" (bytes). Alone in its
 * object (size.c): the heap's preload library links it without the rest of
 * the settings. */
#ifndef ARCOLL_UTIL_SIZE_H
#define ARCOLL_UTIL_SIZE_H

#include <stddef.h>

/* 0 on success, -1 if s is not a size. */
int core_config_parse_size(const char *s, size_t *out);

#endif
