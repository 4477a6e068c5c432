#include "util/log.h"

#include <stdio.h>
#include <string.h>

int core_log_level = CORE_LOG_WARN;
int core_log_rank = -1;

/* Process-wide: the library is not thread safe on one context (arcoll.h). */
static char core_error_msg[512] = "no error";

static void core_log_emit(int level, const char *msg)
{
    static const char *const names[] = {"", "error", "warning", "info", "debug"};

    if (level > core_log_level)
        return;
    if (core_log_rank >= 0)
        fprintf(stderr, "arcoll[%d] %s: %s\n", core_log_rank, names[level], msg);
    else
        fprintf(stderr, "arcoll %s: %s\n", names[level], msg);
}

void core_log(int level, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (level > core_log_level)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    core_log_emit(level, msg);
}

void core_error(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(core_error_msg, sizeof(core_error_msg), fmt, ap);
    va_end(ap);
    core_log_emit(CORE_LOG_ERROR, core_error_msg);
}

const char *core_error_last(void)
{
    return core_error_msg;
}
