/* Device, port and GID selection for the verbs channel, and the listing
 * that arcoll_info prints. docs/verbs.md, "Device and GID". */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chan/verbs/verbs.h"
#include "util/log.h"

static const char *verbs_gid_type_str(uint32_t t)
{
    switch (t) {
    case IBV_GID_TYPE_IB: return "IB";
    case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
    default: return "?";
    }
}

static int verbs_gid_is_ipv4(const union ibv_gid *g)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    return memcmp(g->raw, prefix, sizeof(prefix)) == 0;
}

static void verbs_gid_str(const union ibv_gid *g, char *buf, size_t len)
{
    inet_ntop(AF_INET6, g->raw, buf, (socklen_t)len);
}

/* RoCE: prefer the RoCE v2 GID that carries an IPv4 address (routable, and
 * what every peer on an IPv4 fabric uses), then any RoCE v2, then any valid
 * entry. IB: no GRH unless the user asks for one. */
int verbs_gid_choose(struct ibv_context *ctx, uint8_t port, const struct ibv_port_attr *pa,
                     long want, int *index, union ibv_gid *gid)
{
    struct ibv_gid_entry e;
    int best = -1, best_score = -1;

    if (want >= 0) {
        if (ibv_query_gid(ctx, port, (int)want, gid) != 0) {
            log_err("verbs: ibv_query_gid(port %u, index %ld) failed (ARCOLL_GID_INDEX)", port,
                    want);
            return ARCOLL_ERR_CONFIG;
        }
        *index = (int)want;
        return ARCOLL_OK;
    }
    if (pa->link_layer != IBV_LINK_LAYER_ETHERNET) {
        *index = -1;
        memset(gid, 0, sizeof(*gid));
        return ARCOLL_OK;
    }
    for (int i = 0; i < pa->gid_tbl_len; i++) {
        int score;
        if (ibv_query_gid_ex(ctx, port, (uint32_t)i, &e, 0) != 0)
            continue; /* an empty entry */
        score = (e.gid_type == IBV_GID_TYPE_ROCE_V2) * 2 + verbs_gid_is_ipv4(&e.gid);
        if (score > best_score) {
            best_score = score;
            best = i;
            *gid = e.gid;
        }
    }
    if (best < 0) {
        log_err("verbs: port %u of %s has no usable GID (is the interface up and addressed?)", port,
                ibv_get_device_name(ctx->device));
        return ARCOLL_ERR_CHANNEL;
    }
    *index = best;
    return ARCOLL_OK;
}

/* ARCOLL_DEVICE=name[:port], or the first device with an active port. */
int verbs_dev_open(const char *want, struct ibv_context **out, uint8_t *port_out,
                   struct ibv_port_attr *pa)
{
    struct ibv_device **list;
    char name[64] = "";
    int n, want_port = 0, rc = ARCOLL_ERR_UNSUPPORTED;

    if (want != NULL && *want) {
        const char *colon = strchr(want, ':');
        snprintf(name, sizeof(name), "%.*s", colon ? (int)(colon - want) : (int)strlen(want), want);
        want_port = colon ? atoi(colon + 1) : 0;
    }
    list = ibv_get_device_list(&n);
    if (list == NULL) {
        log_err("verbs: ibv_get_device_list failed: %s", strerror(errno));
        return ARCOLL_ERR_UNSUPPORTED;
    }
    for (int d = 0; d < n; d++) {
        struct ibv_context *ctx;
        struct ibv_device_attr da;
        if (*name && strcmp(ibv_get_device_name(list[d]), name) != 0)
            continue;
        ctx = ibv_open_device(list[d]);
        if (ctx == NULL) {
            log_warn("verbs: ibv_open_device(%s) failed: %s", ibv_get_device_name(list[d]),
                     strerror(errno));
            continue;
        }
        if (ibv_query_device(ctx, &da) == 0) {
            for (int p = 1; p <= da.phys_port_cnt; p++) {
                if (want_port && p != want_port)
                    continue;
                if (ibv_query_port(ctx, (uint8_t)p, pa) == 0 && pa->state == IBV_PORT_ACTIVE) {
                    *out = ctx;
                    *port_out = (uint8_t)p;
                    rc = ARCOLL_OK;
                    goto out;
                }
            }
        }
        ibv_close_device(ctx);
    }
    if (n == 0)
        log_err("verbs: no RDMA device found (no HCA, or rdma_rxe/siw not set up)");
    else if (*name)
        log_err("verbs: ARCOLL_DEVICE=%s: no such device with an active port", want);
    else
        log_err("verbs: none of %d RDMA devices has an active port", n);
out:
    ibv_free_device_list(list);
    return rc;
}

void verbs_info_print(FILE *f)
{
    struct ibv_device **list;
    int n;

    list = ibv_get_device_list(&n);
    if (list == NULL || n == 0) {
        fprintf(f, "verbs devices: none\n");
        if (list != NULL)
            ibv_free_device_list(list);
        return;
    }
    for (int d = 0; d < n; d++) {
        struct ibv_context *ctx = ibv_open_device(list[d]);
        struct ibv_device_attr da;
        if (ctx == NULL || ibv_query_device(ctx, &da) != 0) {
            fprintf(f, "device %s: cannot open or query\n", ibv_get_device_name(list[d]));
            if (ctx != NULL)
                ibv_close_device(ctx);
            continue;
        }
        fprintf(f, "device %s: %d port(s), max_qp %d, max_mr_size %llu\n",
                ibv_get_device_name(list[d]), da.phys_port_cnt, da.max_qp,
                (unsigned long long)da.max_mr_size);
        for (int p = 1; p <= da.phys_port_cnt; p++) {
            struct ibv_port_attr pa;
            if (ibv_query_port(ctx, (uint8_t)p, &pa) != 0)
                continue;
            fprintf(f, "  port %d: %s, %s, lid %u, active mtu %d\n", p,
                    ibv_port_state_str(pa.state),
                    pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet (RoCE)" : "InfiniBand",
                    pa.lid, 128 << pa.active_mtu);
            for (int i = 0; i < pa.gid_tbl_len; i++) {
                struct ibv_gid_entry e;
                char g[64];
                if (ibv_query_gid_ex(ctx, (uint8_t)p, (uint32_t)i, &e, 0) != 0)
                    continue;
                verbs_gid_str(&e.gid, g, sizeof(g));
                fprintf(f, "    gid[%d] %s %s\n", i, g, verbs_gid_type_str(e.gid_type));
            }
        }
        ibv_close_device(ctx);
    }
    ibv_free_device_list(list);
}

/* ARCOLL_WIREUP=rdmacm: ask librdmacm which device and port serve an IPv4
 * address of this host (what rdma_cm would use to connect from it), and
 * take the GID that carries that address. The first up, non-loopback IPv4
 * interface that maps to an RDMA device (ARCOLL_DEVICE's, if set) wins. */
int verbs_rdmacm_resolve(const char *want_dev, char *dev, size_t devlen, uint8_t *port,
                         union ibv_gid *gid)
{
    struct ifaddrs *ifs, *ifa;
    char name[64] = "";
    int rc = ARCOLL_ERR_UNSUPPORTED;

    if (want_dev != NULL && *want_dev)
        snprintf(name, sizeof(name), "%.*s", (int)strcspn(want_dev, ":"), want_dev);
    if (getifaddrs(&ifs) != 0) {
        log_err("verbs: getifaddrs failed: %s", strerror(errno));
        return ARCOLL_ERR_CHANNEL;
    }
    for (ifa = ifs; ifa != NULL && rc != ARCOLL_OK; ifa = ifa->ifa_next) {
        struct rdma_event_channel *ch;
        struct rdma_cm_id *id;
        const struct sockaddr_in *sin = (const struct sockaddr_in *)ifa->ifa_addr;
        if (sin == NULL || sin->sin_family != AF_INET || !(ifa->ifa_flags & IFF_UP) ||
            (ifa->ifa_flags & IFF_LOOPBACK))
            continue;
        ch = rdma_create_event_channel();
        if (ch == NULL) {
            log_err("verbs: rdma_create_event_channel failed: %s", strerror(errno));
            rc = ARCOLL_ERR_CHANNEL;
            break;
        }
        if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0) {
            if (rdma_bind_addr(id, ifa->ifa_addr) == 0 && id->verbs != NULL &&
                (!*name || strcmp(ibv_get_device_name(id->verbs->device), name) == 0)) {
                snprintf(dev, devlen, "%s", ibv_get_device_name(id->verbs->device));
                *port = id->port_num;
                /* RoCE: ::ffff:a.b.c.d; InfiniBand: the source GID rdma_cm chose. */
                memset(gid, 0, sizeof(*gid));
                gid->raw[10] = gid->raw[11] = 0xff;
                memcpy(&gid->raw[12], &sin->sin_addr, 4);
                {
                    struct ibv_port_attr pa;
                    if (ibv_query_port(id->verbs, *port, &pa) == 0 &&
                        pa.link_layer != IBV_LINK_LAYER_ETHERNET)
                        *gid = id->route.addr.addr.ibaddr.sgid;
                }
                log_debug("verbs: rdmacm maps %s (%s) to %s port %u", ifa->ifa_name,
                          inet_ntoa(sin->sin_addr), dev, *port);
                rc = ARCOLL_OK;
            }
            rdma_destroy_id(id);
        } else {
            log_err("verbs: rdma_create_id failed: %s", strerror(errno));
        }
        rdma_destroy_event_channel(ch);
    }
    freeifaddrs(ifs);
    if (rc == ARCOLL_ERR_UNSUPPORTED)
        log_err("verbs: ARCOLL_WIREUP=rdmacm: no IPv4 address of this host maps to %s%s",
                *name ? "device " : "an RDMA device", name);
    return rc;
}

/* The index of a GID in the port's table (prefer RoCE v2 among equal GIDs). */
int verbs_gid_find(struct ibv_context *ctx, uint8_t port, const struct ibv_port_attr *pa,
                   const union ibv_gid *gid)
{
    int best = -1;

    for (int i = 0; i < pa->gid_tbl_len; i++) {
        struct ibv_gid_entry e;
        if (ibv_query_gid_ex(ctx, port, (uint32_t)i, &e, 0) != 0 ||
            memcmp(e.gid.raw, gid->raw, 16) != 0)
            continue;
        if (best < 0 || e.gid_type == IBV_GID_TYPE_ROCE_V2)
            best = i;
    }
    return best;
}
