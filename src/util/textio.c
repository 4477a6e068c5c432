#include "util/textio.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int core_text_open(core_text_t *t, const char *path, size_t max)
{
    struct stat st;
    FILE *f;
    int fd, err;

    /* O_NONBLOCK: opening a FIFO without a writer would wait for one. */
    fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) != 0)
        goto err_fd;
    if (!S_ISREG(st.st_mode)) {
        errno = EINVAL;
        goto err_fd;
    }
    if ((unsigned long long)st.st_size > max) {
        errno = EFBIG;
        goto err_fd;
    }
    if (fcntl(fd, F_SETFL, 0) != 0)
        goto err_fd;
    f = fdopen(fd, "r");
    if (f == NULL)
        goto err_fd;
    core_text_init(t, f, max);
    return 0;

err_fd:
    err = errno;
    close(fd);
    errno = err;
    return -1;
}

void core_text_init(core_text_t *t, FILE *f, size_t max)
{
    t->f = f;
    t->left = max;
    t->line = 0;
}

int core_text_line(core_text_t *t, char *buf, size_t cap)
{
    size_t n = 0;
    int c;

    /* The file may have grown since core_text_open: the limit counts bytes read. */
    while ((c = getc_unlocked(t->f)) != EOF) {
        if (t->left == 0)
            return CORE_TEXT_BIG;
        t->left--;
        if (c == '\n')
            break;
        if (c == '\0')
            return CORE_TEXT_BINARY;
        if (n + 1 >= cap)
            return CORE_TEXT_LONG;
        buf[n++] = (char)c;
    }
    if (c == EOF && ferror(t->f))
        return CORE_TEXT_ERROR;
    if (c == EOF && n == 0)
        return 0;
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    buf[n] = '\0';
    t->line++;
    return 1;
}

void core_text_close(core_text_t *t)
{
    if (t->f != NULL)
        fclose(t->f);
    t->f = NULL;
}

const char *core_text_strerror(int rc, int err)
{
    switch (rc) {
    case CORE_TEXT_LONG: return "line too long";
    case CORE_TEXT_BINARY: return "a NUL byte: not a text file";
    case CORE_TEXT_BIG: return "larger than the limit";
    default:
        if (err == EINVAL)
            return "not a regular file";
        if (err == EFBIG)
            return "larger than the limit";
        return strerror(err);
    }
}
