/* Bootstrap over callbacks supplied by an embedding runtime (e.g. MPI). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/boot.h"
#include "util/log.h"

static int boot_oob_allgather(boot_t *b, const void *sbuf, void *rbuf, size_t len)
{
    const arcoll_oob_t *oob = b->impl;
    int rc = oob->allgather(sbuf, rbuf, len, oob->user);

    if (rc != 0) {
        log_err("out-of-band allgather callback failed (rc=%d)", rc);
        return ARCOLL_ERR_BOOTSTRAP;
    }
    return ARCOLL_OK;
}

static int boot_oob_barrier(boot_t *b)
{
    const arcoll_oob_t *oob = b->impl;
    int rc = oob->barrier(oob->user);

    if (rc != 0) {
        log_err("out-of-band barrier callback failed (rc=%d)", rc);
        return ARCOLL_ERR_BOOTSTRAP;
    }
    return ARCOLL_OK;
}

static void boot_oob_fini(boot_t *b)
{
    free(b->impl);
    b->impl = NULL;
}

static int boot_oob_hostname_get(char *host)
{
    char buf[256];
    size_t n;

    /* A larger buffer: glibc fails rather than truncates an over-long name. */
    if (gethostname(buf, sizeof(buf)) != 0) {
        log_err("gethostname failed");
        return ARCOLL_ERR_BOOTSTRAP;
    }
    n = strnlen(buf, BOOT_HOSTNAME_MAX - 1);
    memcpy(host, buf, n);
    host[n] = '\0';
    return ARCOLL_OK;
}

int boot_oob_create(const arcoll_oob_t *oob, boot_t **out)
{
    boot_t *b = NULL;
    arcoll_oob_t *copy = NULL;
    int ret = ARCOLL_ERR_INVALID;

    *out = NULL;
    if (oob == NULL || oob->allgather == NULL || oob->barrier == NULL) {
        log_err("invalid out-of-band bootstrap: %s",
                oob == NULL ? "oob is NULL" : "allgather and barrier callbacks are required");
        goto err;
    }
    if (oob->size <= 0 || oob->rank < 0 || oob->rank >= oob->size) {
        log_err("invalid out-of-band bootstrap: rank %d, size %d (need 0 <= rank < size)",
                oob->rank, oob->size);
        goto err;
    }
    ret = ARCOLL_ERR_NOMEM;
    b = calloc(1, sizeof(*b));
    if (b == NULL) {
        log_err("out of memory allocating the out-of-band bootstrap");
        goto err;
    }
    copy = malloc(sizeof(*copy));
    if (copy == NULL) {
        log_err("out of memory allocating the out-of-band bootstrap");
        goto err_b;
    }
    *copy = *oob; /* the caller's struct may be a temporary */

    b->rank = oob->rank;
    b->size = oob->size;
    ret = boot_oob_hostname_get(b->hostname);
    if (ret != ARCOLL_OK)
        goto err_copy;
    b->allgather = boot_oob_allgather;
    b->barrier = boot_oob_barrier;
    b->fini = boot_oob_fini;
    b->impl = copy;

    ret = boot_nodes_compute(b);
    if (ret != ARCOLL_OK)
        goto err_copy;
    *out = b;
    return ARCOLL_OK;

err_copy:
    free(copy);
err_b:
    free(b);
err:
    return ret;
}
