/* The simulator's cost model parameter sets (docs/scale.md, "Parameter sets"):
 * the built-in ones, a file of key = value lines, and key=value overrides. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chan/sim/sim.h"
#include "util/log.h"

/* host-shm: shared memory of this host (2-core AMD EPYC KVM guest), measured
 * by bench/sim-calibrate.sh on 2026-11-26 at load ~9.7 (docs/scale.md,
 * "Calibration"); inter-node values are the same (no NIC).
 * ib-edr: 100 Gb/s EDR InfiniBand, figures cited in docs/scale.md, one
 * non-blocking switch; its intra-node values are the estimate host-shm had
 * before the calibration. ib-edr-2to1: a 2:1 fat tree of 36-port switches
 * (24 nodes and 12 uplinks per leaf: up_G = inter_G / 12), the uplinks as one
 * pipe. ib-edr-mu2: the same tree with its 12 uplinks as 12 cables of EDR
 * speed, D-mod-k routed (mu = 12 / 24 = 1/2: docs/scale.md, "003"). */
#define SIM_HOST_EST \
    .intra_o = 50, .intra_L = 150, .intra_G = 0.1, .copy_G = 0.1, .reduce_G = 0.2, .poll = 100
#define SIM_IB_EDR \
    .inter_o = 200, .inter_L = 1000, .inter_G = 0.08, .inter_g = 5, .rx_nic = 1, .nic = 1
/* The IB sets' start-up costs, all assumed (docs/scale.md, "Resources per
 * rank"): a bootstrap fence of 20 us + 5 us per doubling + 1 ns per gathered
 * byte; an RC QP created and taken to RTS in 100 us. host-shm: none. */
#define SIM_IB_START .oob_a = 20000, .oob_b = 5000, .oob_c = 1, .qp_ns = 100000
static const sim_params_t sim_builtin[] = {
    {.name = "host-shm",
     .intra_o = 4.6,
     .intra_L = 172,
     .intra_G = 0.53,
     .copy_G = 0.058,
     .reduce_G = 0.2,
     .poll = 176,
     .inter_o = 4.6,
     .inter_L = 172,
     .inter_G = 0.53},
    {.name = "ib-edr", SIM_HOST_EST, SIM_IB_EDR, SIM_IB_START},
    {.name = "ib-edr-2to1",
     SIM_HOST_EST,
     SIM_IB_EDR,
     SIM_IB_START,
     .leaf_nodes = 24,
     .up_G = 0.08 / 12},
    {.name = "ib-edr-mu2",
     SIM_HOST_EST,
     SIM_IB_EDR,
     SIM_IB_START,
     .leaf_nodes = 24,
     .up_G = 0.08,
     .up_links = 12},
};

/* clang-format off */
#define SIM_KEY(k) {#k, offsetof(sim_params_t, k)}
/* clang-format on */
static int sim_params_set(sim_params_t *p, const char *key, double v)
{
    static const struct {
        const char *key;
        size_t off;
    } keys[] = {
        SIM_KEY(intra_o), SIM_KEY(intra_L),  SIM_KEY(intra_G),  SIM_KEY(inter_o),
        SIM_KEY(inter_L), SIM_KEY(inter_G),  SIM_KEY(inter_g),  SIM_KEY(copy_G),
        SIM_KEY(poll),    SIM_KEY(reduce_G), SIM_KEY(rx_nic),   SIM_KEY(leaf_nodes),
        SIM_KEY(up_G),    SIM_KEY(up_links), SIM_KEY(up_route), SIM_KEY(oob_a),
        SIM_KEY(oob_b),   SIM_KEY(oob_c),    SIM_KEY(qp_ns),
    };

    /* inf and nan would pass "v >= 0" checks and end up cast to the
     * uint64 virtual clock (undefined behaviour, nonsense rows). */
    if (!isfinite(v))
        return -1;
    /* Whole cables and one of the two routings. */
    if ((strcmp(key, "up_links") == 0 && (v != floor(v) || v > SIM_UP_LINKS_MAX)) ||
        (strcmp(key, "up_route") == 0 && v != 0 && v != 1))
        return -1;
    if (strcmp(key, "nic") == 0) {
        p->nic = v != 0;
        return v == 0 || v == 1 ? 0 : -1;
    }
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if (strcmp(key, keys[i].key) == 0) {
            *(double *)(void *)((char *)p + keys[i].off) = v;
            return 0;
        }
    }
    return -1;
}

int sim_params_load(const char *name, sim_params_t *p)
{
    char line[256], key[64];
    double v;
    int lineno = 0, rc = ARCOLL_OK;
    FILE *f;

    for (size_t i = 0; i < sizeof(sim_builtin) / sizeof(sim_builtin[0]); i++) {
        if (strcmp(name, sim_builtin[i].name) == 0) {
            *p = sim_builtin[i];
            return ARCOLL_OK;
        }
    }
    f = fopen(name, "r");
    if (f == NULL) {
        log_err("sim: parameter set \"%s\" is neither built in (host-shm, ib-edr, ib-edr-2to1, "
                "ib-edr-mu2) nor a readable file: %s",
                name, strerror(errno));
        return ARCOLL_ERR_CONFIG;
    }
    *p = sim_builtin[0]; /* a file names what differs from host-shm */
    snprintf(p->name, sizeof(p->name), "%s", name);
    while (rc == ARCOLL_OK && fgets(line, sizeof(line), f) != NULL) {
        char *h = strchr(line, '#');
        lineno++;
        if (h != NULL)
            *h = '\0';
        if (sscanf(line, " %63s", key) != 1)
            continue; /* blank or comment */
        if (strcmp(key, "name") == 0) {
            if (sscanf(line, " name %63s", p->name) != 1)
                rc = ARCOLL_ERR_CONFIG;
        } else if (sscanf(line, " %63s %lf", key, &v) != 2 || v < 0 ||
                   sim_params_set(p, key, v) != 0) {
            rc = ARCOLL_ERR_CONFIG;
        }
        if (rc != ARCOLL_OK)
            log_err(
                "sim: %s line %d: expected \"KEY VALUE\" with KEY one of intra_o intra_L "
                "intra_G inter_o inter_L inter_G inter_g copy_G reduce_G poll rx_nic "
                "leaf_nodes up_G up_links (whole, <= %d) up_route (0 or 1) oob_a oob_b oob_c qp_ns "
                "nic (0 or 1) name, VALUE finite and >= 0",
                name, lineno, SIM_UP_LINKS_MAX);
    }
    fclose(f);
    if (rc == ARCOLL_OK && (p->intra_L < 1 || p->inter_L < 1)) {
        log_err("sim: %s: latencies below 1 ns leave the scheduler no lookahead", name);
        rc = ARCOLL_ERR_CONFIG;
    }
    return rc;
}

int sim_params_override(sim_params_t *p, const char *kv)
{
    char key[64], *end;
    const char *eq = strchr(kv, '=');
    sim_params_t q = *p; /* p is left as it was if kv is refused */
    size_t len = strlen(q.name), room = sizeof(q.name) - len;
    double v;

    if (eq == NULL || (size_t)(eq - kv) >= sizeof(key))
        goto bad;
    memcpy(key, kv, (size_t)(eq - kv));
    key[eq - kv] = '\0';
    v = strtod(eq + 1, &end);
    if (end == eq + 1 || *end != '\0' || !(v >= 0) || sim_params_set(&q, key, v) != 0 ||
        q.intra_L < 1 || q.inter_L < 1)
        goto bad;
    /* The set's name says what was changed, so rows of different runs stay
     * apart: a cut name could read as another value ("+oob_a=12"). */
    if ((size_t)snprintf(q.name + len, room, "+%s", kv) >= room)
        goto bad;
    *p = q;
    return ARCOLL_OK;
bad:
    log_err("sim: \"%s\": expected KEY=VALUE, KEY a parameter of the set (docs/scale.md, "
            "\"Parameter sets\"), VALUE finite and >= 0 (latencies >= 1, nic and up_route 0 or 1, "
            "up_links whole), and "
            "the set's name \"%s\" with \"+KEY=VALUE\" under %zu characters",
            kv, p->name, sizeof(p->name));
    return ARCOLL_ERR_CONFIG;
}
