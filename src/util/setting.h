/* The rows of the ARCOLL_* settings table. Each owner describes its own
 * settings and the struct they fill: config/config.c the core's, each
 * channel its own (chan/<name>/<name>_opts.c); config.c alone parses,
 * checks, renders and hashes them, all rows alike. Here, below both, so that
 * a channel need not know the settings layer. */
#ifndef ARCOLL_UTIL_SETTING_H
#define ARCOLL_UTIL_SETTING_H

#include <stddef.h>

/* CORE_SETTING_TUNE: the tuning table (config/tune.c parses and renders it). */
typedef enum {
    CORE_SETTING_ENUM,
    CORE_SETTING_SIZE,
    CORE_SETTING_LONG,
    CORE_SETTING_STRING,
    CORE_SETTING_TUNE
} core_setting_type_t;

typedef struct core_setting {
    const char *name; /* ARCOLL_* */
    core_setting_type_t type;
    size_t offset; /* of the field in the owner's struct */
    /* ENUM: NULL-terminated, index = stored value; STRING: values[0] names
     * the form of a non-default value (the default is stored as ""). */
    const char *const *values;
    const char *dflt;
    long min, max; /* SIZE/LONG bounds; STRING: max = the longest value */
    int agreed;    /* must be equal on every rank (part of the digest) */
    const char *desc;
} core_setting_t;

/* One owner's rows, in the order they are listed. */
typedef struct core_settings {
    const core_setting_t *rows;
    size_t n;
} core_settings_t;

#endif
