/* Bounded reading of text from outside the library (ARCOLL_TUNE files, PAP
 * profiles): a file is opened only if it is a regular file within a size
 * limit, and read line by line into the caller's buffer, so that neither a
 * device such as /dev/zero nor a FIFO nor a huge file can make a reader hang
 * or allocate by what it reads (docs/reliability.md, "Bounded input"). */
#ifndef ARCOLL_UTIL_TEXTIO_H
#define ARCOLL_UTIL_TEXTIO_H

#include <stddef.h>
#include <stdio.h>

/* core_text_line's results besides a line (1) and the end (0). */
enum {
    CORE_TEXT_ERROR = -1,  /* read error: errno says which */
    CORE_TEXT_LONG = -2,   /* the line does not fit the buffer */
    CORE_TEXT_BINARY = -3, /* a NUL byte: not a text file */
    CORE_TEXT_BIG = -4     /* more bytes than the limit */
};

typedef struct core_text {
    FILE *f;
    size_t left; /* bytes the limit still allows */
    unsigned long line;
} core_text_t;

/* Open path for reading if it is a regular file of at most max bytes. Never
 * blocks (a FIFO is refused, not waited on). 0 on success; -1 with errno:
 * EINVAL not a regular file, EFBIG larger than max, or open's errno. */
int core_text_open(core_text_t *t, const char *path, size_t max);
/* Read an already open stream (e.g. fmemopen) with the same limits. */
void core_text_init(core_text_t *t, FILE *f, size_t max);
/* The next line without its '\n' (and '\r') into buf[cap], NUL-terminated:
 * 1 a line, 0 the end, or a CORE_TEXT_* error. Reads at most cap bytes of a
 * line and never more than the limit in all. */
int core_text_line(core_text_t *t, char *buf, size_t cap);
void core_text_close(core_text_t *t);
/* What a negative core_text_open/core_text_line result means, for messages. */
const char *core_text_strerror(int rc, int err);

#endif
