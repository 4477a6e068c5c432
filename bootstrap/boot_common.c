/* Node layout shared by every bootstrap implementation, and teardown. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/boot.h"
#include "core/log.h"

/* ARCOLL_NODE_SIZE=k: pretend every k consecutive ranks share a node, so
 * multi-node code paths can be tested on one host. *k = 0 when unset. */
static int boot_node_size_parse(int *k)
{
    const char *s = getenv("ARCOLL_NODE_SIZE");
    char *end = NULL;
    long v;

    *k = 0;
    if (s == NULL)
        return ARCOLL_OK;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v <= 0 || v > INT_MAX) {
        log_err("ARCOLL_NODE_SIZE=\"%s\" is invalid: expected a positive integer", s);
        return ARCOLL_ERR_CONFIG;
    }
    *k = (int)v;
    return ARCOLL_OK;
}

/* Node index of every rank, nodes numbered by order of first appearance. */
static int boot_nodes_from_hosts(boot_t *b, int *node_of, int *nnodes)
{
    size_t n = (size_t)b->size;
    char *hosts = NULL;
    int *leader = NULL; /* first rank of each node, to compare hostnames against */
    char mine[BOOT_HOSTNAME_MAX];
    int ret = ARCOLL_ERR_NOMEM;

    hosts = malloc(n * BOOT_HOSTNAME_MAX);
    if (hosts == NULL) {
        log_err("out of memory gathering %d hostnames", b->size);
        goto err;
    }
    leader = malloc(n * sizeof(*leader));
    if (leader == NULL) {
        log_err("out of memory computing the node layout of %d ranks", b->size);
        goto err_hosts;
    }
    /* Zero padding makes the records comparable whatever the name length. */
    memset(mine, 0, sizeof(mine));
    memcpy(mine, b->hostname, strnlen(b->hostname, sizeof(mine) - 1));
    ret = b->allgather(b, mine, hosts, sizeof(mine));
    if (ret != ARCOLL_OK)
        goto err_leader;

    *nnodes = 0;
    for (int r = 0; r < b->size; r++) {
        const char *h = hosts + (size_t)r * BOOT_HOSTNAME_MAX;
        int node = 0;

        while (node < *nnodes &&
               strncmp(h, hosts + (size_t)leader[node] * BOOT_HOSTNAME_MAX, BOOT_HOSTNAME_MAX) != 0)
            node++;
        if (node == *nnodes)
            leader[(*nnodes)++] = r;
        node_of[r] = node;
    }
    free(leader);
    free(hosts);
    return ARCOLL_OK;

err_leader:
    free(leader);
err_hosts:
    free(hosts);
err:
    return ret;
}

int boot_nodes_compute(boot_t *b)
{
    int *node_of = NULL;
    int nnodes = 0, k, ret;
    int local_rank = 0, local_size = 0;

    ret = boot_node_size_parse(&k);
    if (ret != ARCOLL_OK)
        goto err;
    node_of = malloc((size_t)b->size * sizeof(*node_of));
    if (node_of == NULL) {
        log_err("out of memory allocating the node map of %d ranks", b->size);
        ret = ARCOLL_ERR_NOMEM;
        goto err;
    }
    if (k > 0) {
        /* Purely local, so no allgather: every rank derives the same map. */
        for (int r = 0; r < b->size; r++)
            node_of[r] = r / k;
        nnodes = (b->size - 1) / k + 1;
    } else {
        ret = boot_nodes_from_hosts(b, node_of, &nnodes);
        if (ret != ARCOLL_OK)
            goto err_node_of;
    }

    for (int r = 0; r < b->size; r++) {
        if (node_of[r] != node_of[b->rank])
            continue;
        if (r < b->rank)
            local_rank++;
        local_size++;
    }
    free(b->node_of);
    b->node_of = node_of;
    b->nnodes = nnodes;
    b->local_rank = local_rank;
    b->local_size = local_size;
    log_debug("bootstrap: rank %d/%d on %s: node %d of %d, local rank %d/%d%s", b->rank, b->size,
              b->hostname, node_of[b->rank], nnodes, local_rank, local_size,
              k > 0 ? " (ARCOLL_NODE_SIZE)" : "");
    return ARCOLL_OK;

err_node_of:
    free(node_of);
err:
    return ret;
}

void boot_destroy(boot_t *b)
{
    if (b == NULL)
        return;
    if (b->fini != NULL)
        b->fini(b);
    free(b->node_of);
    free(b);
}

int boot_pid_gone(long pid)
{
    char path[64], buf[256], *p;
    int gone = 0;
    FILE *f;

    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
        return 1;
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    f = fopen(path, "r");
    if (f != NULL) {
        if (fgets(buf, sizeof(buf), f) != NULL && (p = strrchr(buf, ')')) != NULL &&
            (p[2] == 'Z' || p[2] == 'X'))
            gone = 1;
        fclose(f);
    }
    return gone;
}
