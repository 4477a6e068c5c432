/* Bootstrap over a PMIx client: the launcher (mpirun, srun, prterun) is the
 * out-of-band network. Without a launcher the process is a singleton. */
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pmix.h>

#include "bootstrap/boot.h"
#include "util/log.h"

typedef struct boot_pmix {
    pmix_proc_t self;
    pmix_proc_t all;        /* own nspace, wildcard rank: fences span the whole job */
    unsigned long ag_count; /* PMIx keys cannot be overwritten reliably: one key per call */
    int timeout_s;          /* PMIX_TIMEOUT of fences and gets: ARCOLL_TIMEOUT_MS rounded up */
    bool singleton;
} boot_pmix_t;

/* A fence or get past its deadline is a timeout, like a collective's; any
 * other failure is the bootstrap's. */
static int boot_pmix_status(boot_pmix_t *p, pmix_status_t rc, const char *what)
{
    if (rc == PMIX_ERR_TIMEOUT) {
        log_err("%s: not every rank of the job arrived within %d s (ARCOLL_TIMEOUT_MS)", what,
                p->timeout_s);
        return ARCOLL_ERR_TIMEOUT;
    }
    log_err("%s failed: %s", what, PMIx_Error_string(rc));
    return ARCOLL_ERR_BOOTSTRAP;
}

/* PMIx_Fence over the whole job with the deadline; collect: carry the
 * committed keys, so that the gets after it are local lookups. */
static int boot_pmix_fence(boot_pmix_t *p, bool collect, const char *what)
{
    pmix_info_t info[2];
    pmix_status_t rc;

    PMIX_INFO_CONSTRUCT(&info[0]);
    PMIX_INFO_CONSTRUCT(&info[1]);
    PMIX_INFO_LOAD(&info[0], PMIX_TIMEOUT, &p->timeout_s, PMIX_INT);
    PMIX_INFO_LOAD(&info[1], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    rc = PMIx_Fence(&p->all, 1, info, 2);
    PMIX_INFO_DESTRUCT(&info[1]);
    PMIX_INFO_DESTRUCT(&info[0]);
    return rc == PMIX_SUCCESS ? ARCOLL_OK : boot_pmix_status(p, rc, what);
}

static int boot_pmix_allgather(boot_t *b, const void *sbuf, void *rbuf, size_t len)
{
    boot_pmix_t *p = b->impl;
    char key[PMIX_MAX_KEYLEN + 1];
    char what[PMIX_MAX_KEYLEN + 64];
    pmix_value_t val, *got = NULL;
    pmix_info_t info;
    pmix_status_t rc;
    int ret = ARCOLL_ERR_BOOTSTRAP;

    if (len == 0)
        return ARCOLL_OK;
    if (p->singleton) {
        memcpy(rbuf, sbuf, len);
        return ARCOLL_OK;
    }
    /* Every rank calls in the same order, so the counters agree. */
    snprintf(key, sizeof(key), "arcoll.ag.%lu", p->ag_count++);

    PMIX_VALUE_CONSTRUCT(&val);
    val.type = PMIX_BYTE_OBJECT;
    val.data.bo.bytes = (char *)sbuf; /* PMIx_Put copies; never freed through val */
    val.data.bo.size = len;
    rc = PMIx_Put(PMIX_GLOBAL, key, &val);
    if (rc != PMIX_SUCCESS) {
        log_err("PMIx_Put(%s) failed: %s", key, PMIx_Error_string(rc));
        goto err;
    }
    rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) {
        log_err("PMIx_Commit failed: %s", PMIx_Error_string(rc));
        goto err;
    }
    snprintf(what, sizeof(what), "PMIx_Fence (allgather %s)", key);
    ret = boot_pmix_fence(p, true, what);
    if (ret != ARCOLL_OK)
        goto err;
    /* A rank's key is in the fence's data; the deadline covers a server that
     * would otherwise wait for a rank that never put it. */
    PMIX_INFO_CONSTRUCT(&info);
    PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &p->timeout_s, PMIX_INT);
    for (int r = 0; r < b->size; r++) {
        pmix_proc_t peer;

        PMIX_LOAD_PROCID(&peer, p->self.nspace, (pmix_rank_t)r);
        rc = PMIx_Get(&peer, key, &info, 1, &got);
        if (rc != PMIX_SUCCESS) {
            snprintf(what, sizeof(what), "PMIx_Get(%s) from rank %d", key, r);
            ret = boot_pmix_status(p, rc, what);
            goto err_info;
        }
        if (got->type != PMIX_BYTE_OBJECT || got->data.bo.size != len) {
            log_err("PMIx_Get(%s) from rank %d: got %zu bytes (type %d), expected %zu bytes", key,
                    r, got->type == PMIX_BYTE_OBJECT ? got->data.bo.size : 0, (int)got->type, len);
            ret = ARCOLL_ERR_BOOTSTRAP;
            goto err_got;
        }
        memcpy((char *)rbuf + (size_t)r * len, got->data.bo.bytes, len);
        PMIX_VALUE_RELEASE(got);
    }
    PMIX_INFO_DESTRUCT(&info);
    return ARCOLL_OK;

err_got:
    PMIX_VALUE_RELEASE(got);
err_info:
    PMIX_INFO_DESTRUCT(&info);
err:
    return ret;
}

static int boot_pmix_barrier(boot_t *b)
{
    boot_pmix_t *p = b->impl;

    if (p->singleton)
        return ARCOLL_OK;
    return boot_pmix_fence(p, false, "PMIx_Fence (barrier)");
}

static void boot_pmix_fini(boot_t *b)
{
    boot_pmix_t *p = b->impl;
    pmix_status_t rc;

    rc = PMIx_Finalize(NULL, 0);
    if (rc != PMIX_SUCCESS)
        log_err("PMIx_Finalize failed: %s", PMIx_Error_string(rc));
    free(p);
    b->impl = NULL;
}

static int boot_pmix_size_get(boot_pmix_t *p, int *size)
{
    pmix_value_t *val = NULL;
    pmix_status_t rc;
    uint64_t n = 0;
    int ret = ARCOLL_ERR_BOOTSTRAP;

    rc = PMIx_Get(&p->all, PMIX_JOB_SIZE, NULL, 0, &val);
    if (rc != PMIX_SUCCESS) {
        log_err("PMIx_Get(PMIX_JOB_SIZE) failed: %s", PMIx_Error_string(rc));
        goto err;
    }
    PMIX_VALUE_GET_NUMBER(rc, val, n, uint64_t);
    if (rc != PMIX_SUCCESS || n == 0 || n > INT_MAX) {
        log_err("PMIx_Get(PMIX_JOB_SIZE) returned an unusable value (type %d, %llu)",
                (int)val->type, (unsigned long long)n);
        goto err_val;
    }
    *size = (int)n;
    PMIX_VALUE_RELEASE(val);
    return ARCOLL_OK;

err_val:
    PMIX_VALUE_RELEASE(val);
err:
    return ret;
}

static int boot_pmix_hostname_get(boot_pmix_t *p, char *host)
{
    pmix_value_t *val = NULL;
    pmix_info_t info;
    bool optional = true;
    pmix_status_t rc = PMIX_ERR_NOT_FOUND;
    char buf[256];
    size_t n;

    if (!p->singleton) {
        /* Job data is already local; do not ask the server for a missing key. */
        PMIX_INFO_CONSTRUCT(&info);
        PMIX_INFO_LOAD(&info, PMIX_OPTIONAL, &optional, PMIX_BOOL);
        rc = PMIx_Get(&p->self, PMIX_HOSTNAME, &info, 1, &val);
        PMIX_INFO_DESTRUCT(&info);
    }
    if (rc == PMIX_SUCCESS && val->type == PMIX_STRING && val->data.string != NULL) {
        n = strnlen(val->data.string, BOOT_HOSTNAME_MAX - 1);
        memcpy(host, val->data.string, n);
        host[n] = '\0';
        PMIX_VALUE_RELEASE(val);
        return ARCOLL_OK;
    }
    if (rc == PMIX_SUCCESS)
        PMIX_VALUE_RELEASE(val);
    log_debug("PMIX_HOSTNAME unavailable (%s), using gethostname", PMIx_Error_string(rc));
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

int boot_pmix_create(long timeout_ms, boot_t **out)
{
    boot_t *b = NULL;
    boot_pmix_t *p = NULL;
    pmix_status_t rc;
    int ret = ARCOLL_ERR_NOMEM;

    *out = NULL;
    b = calloc(1, sizeof(*b));
    if (b == NULL) {
        log_err("out of memory allocating the PMIx bootstrap");
        goto err;
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        log_err("out of memory allocating the PMIx bootstrap");
        goto err_b;
    }
    p->timeout_s = (int)((timeout_ms + 999) / 1000); /* at most a day: config.c's bound */
    rc = PMIx_Init(&p->self, NULL, 0);
    if (rc == PMIX_ERR_UNREACH && PMIx_Initialized()) {
        /* No server to connect to, but the library runs: started without a launcher. */
        p->singleton = true;
        log_debug("PMIx_Init: %s, running as a singleton", PMIx_Error_string(rc));
    } else if (rc != PMIX_SUCCESS) {
        log_err("PMIx_Init failed: %s", PMIx_Error_string(rc));
        ret = ARCOLL_ERR_BOOTSTRAP;
        goto err_p;
    }

    if (p->singleton) {
        b->rank = 0;
        b->size = 1;
    } else {
        PMIX_LOAD_PROCID(&p->all, p->self.nspace, PMIX_RANK_WILDCARD);
        ret = boot_pmix_size_get(p, &b->size);
        if (ret != ARCOLL_OK)
            goto err_init;
        if (p->self.rank >= (pmix_rank_t)b->size) {
            log_err("PMIx rank %u is outside the job size %d", p->self.rank, b->size);
            ret = ARCOLL_ERR_BOOTSTRAP;
            goto err_init;
        }
        b->rank = (int)p->self.rank;
    }
    ret = boot_pmix_hostname_get(p, b->hostname);
    if (ret != ARCOLL_OK)
        goto err_init;
    b->allgather = boot_pmix_allgather;
    b->barrier = boot_pmix_barrier;
    b->fini = boot_pmix_fini;
    b->impl = p;

    ret = boot_nodes_compute(b);
    if (ret != ARCOLL_OK)
        goto err_init;
    *out = b;
    return ARCOLL_OK;

err_init:
    PMIx_Finalize(NULL, 0);
err_p:
    free(p);
err_b:
    free(b);
err:
    return ret;
}
