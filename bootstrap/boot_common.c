/* Node layout shared by every bootstrap implementation, and teardown. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/boot.h"
#include "util/log.h"

/* ARCOLL_NODE_SIZE=k or k1,k2,...: split the ranks of each host into
 * pretend nodes of k consecutive ranks (or of k1, k2, ... in turn, for
 * unequal nodes), so multi-node code paths can be tested on one host.
 * *n = 0 when unset. */
#define BOOT_NODE_SIZES 16
static int boot_node_size_parse(int *sizes, int *n)
{
    const char *s = getenv("ARCOLL_NODE_SIZE"), *p = s;
    char *end = NULL;
    long v;

    *n = 0;
    if (s == NULL)
        return ARCOLL_OK;
    do {
        errno = 0;
        v = strtol(p, &end, 10);
        if (errno != 0 || end == p || (*end != '\0' && *end != ',') || v <= 0 || v > INT_MAX ||
            *n == BOOT_NODE_SIZES) {
            log_err("ARCOLL_NODE_SIZE=\"%.80s\" is invalid: expected a positive integer or a "
                    "list of up to %d of them (k1,k2,...)",
                    s, BOOT_NODE_SIZES);
            return ARCOLL_ERR_CONFIG;
        }
        sizes[(*n)++] = (int)v;
        p = end + 1;
    } while (*end == ',');
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

/* Split each host's ranks into pretend nodes: node_of[] goes from host
 * numbers to pretend node numbers (in order of first rank). */
static int boot_nodes_pretend(boot_t *b, const int *sizes, int nsizes, int *node_of, int nhosts)
{
    int *count = calloc((size_t)nhosts, sizeof(int)), *cur = malloc(sizeof(int) * (size_t)nhosts);
    int *turn = calloc((size_t)nhosts, sizeof(int)), nnodes = 0;

    if (count == NULL || cur == NULL || turn == NULL) {
        free(count);
        free(cur);
        free(turn);
        log_err("out of memory computing pretend nodes");
        return -1;
    }
    for (int r = 0; r < b->size; r++) {
        int h = node_of[r];
        if (count[h] == 0) {
            cur[h] = nnodes++;
        } else if (count[h] == sizes[turn[h] % nsizes]) {
            turn[h]++;
            count[h] = 0;
            cur[h] = nnodes++;
        }
        count[h]++;
        node_of[r] = cur[h];
    }
    free(count);
    free(cur);
    free(turn);
    return nnodes;
}

int boot_nodes_compute(boot_t *b)
{
    int *node_of = NULL;
    int nnodes = 0, nhosts = 0, nsizes, ret;
    int sizes[BOOT_NODE_SIZES];
    int local_rank = 0, local_size = 0, host_local_size = 0;

    ret = boot_node_size_parse(sizes, &nsizes);
    if (ret != ARCOLL_OK)
        goto err;
    node_of = malloc((size_t)b->size * sizeof(*node_of));
    if (node_of == NULL) {
        log_err("out of memory allocating the node map of %d ranks", b->size);
        ret = ARCOLL_ERR_NOMEM;
        goto err;
    }
    ret = boot_nodes_from_hosts(b, node_of, &nhosts);
    if (ret != ARCOLL_OK)
        goto err_node_of;
    for (int r = 0; r < b->size; r++)
        host_local_size += node_of[r] == node_of[b->rank];
    nnodes = nhosts;
    if (nsizes > 0) {
        nnodes = boot_nodes_pretend(b, sizes, nsizes, node_of, nhosts);
        if (nnodes < 0) {
            ret = ARCOLL_ERR_NOMEM;
            goto err_node_of;
        }
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
    b->nhosts = nhosts;
    b->local_rank = local_rank;
    b->local_size = local_size;
    b->host_local_size = host_local_size;
    log_debug("bootstrap: rank %d/%d on %s: node %d of %d, local rank %d/%d%s", b->rank, b->size,
              b->hostname, node_of[b->rank], nnodes, local_rank, local_size,
              nsizes > 0 ? " (ARCOLL_NODE_SIZE)" : "");
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
