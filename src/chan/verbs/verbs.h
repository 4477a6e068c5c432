/* The InfiniBand verbs channel (RC QPs, RDMA WRITE): internal interface. */
#ifndef ARCOLL_CHAN_VERBS_VERBS_H
#define ARCOLL_CHAN_VERBS_VERBS_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>

#include "arcoll.h"

int verbs_dev_open(const char *want, struct ibv_context **out, uint8_t *port,
                   struct ibv_port_attr *pa);
int verbs_gid_choose(struct ibv_context *ctx, uint8_t port, const struct ibv_port_attr *pa,
                     long want, int *index, union ibv_gid *gid);
int verbs_rdmacm_resolve(const char *want_dev, char *dev, size_t devlen, uint8_t *port,
                         union ibv_gid *gid);
int verbs_gid_find(struct ibv_context *ctx, uint8_t port, const struct ibv_port_attr *pa,
                   const union ibv_gid *gid);
struct chan;
/* The chosen device, port, GID, MTU, QPs and memory, in one line. */
void verbs_chan_describe(struct chan *c, char *buf, size_t len);
/* Devices, ports and GIDs with their types (arcoll_info). */
void verbs_info_print(FILE *f);

#endif
