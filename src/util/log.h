/* Logging: the function that decides an error logs it once; callers only
 * pass the status up. Level from ARCOLL_LOG. */
#ifndef ARCOLL_UTIL_LOG_H
#define ARCOLL_UTIL_LOG_H

#include <stdarg.h>

enum { CORE_LOG_NONE, CORE_LOG_ERROR, CORE_LOG_WARN, CORE_LOG_INFO, CORE_LOG_DEBUG };

extern int core_log_level;
extern int core_log_rank;

void core_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Remember msg as the last error (arcoll_last_error) and log it. */
void core_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *core_error_last(void);

#define log_err(...)  core_error(__VA_ARGS__)
#define log_warn(...) core_log(CORE_LOG_WARN, __VA_ARGS__)
#define log_info(...) core_log(CORE_LOG_INFO, __VA_ARGS__)
#define log_debug(...)                             \
    do {                                           \
        if (core_log_level >= CORE_LOG_DEBUG)      \
            core_log(CORE_LOG_DEBUG, __VA_ARGS__); \
    } while (0)

#endif
