/* The verbs channel's memory: registrations (MRs, ODP) and imported remote
 * keys. */
#include "chan/verbs/verbs_int.h"

static int verbs_mr_reg_flags(verbs_chan_t *vc, void *addr, size_t len, int extra, chan_mem_t *mem)
{
    struct ibv_mr *mr =
        ibv_reg_mr(vc->pd, addr, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | extra);

    if (mr == NULL) {
        int err = errno;
        log_debug("verbs: ibv_reg_mr%s of %zu bytes at %p failed: %s", extra ? " (on demand)" : "",
                  len, addr, strerror(err));
        return err == ENOMEM || err == EAGAIN ? ARCOLL_ERR_NOMEM : ARCOLL_ERR_CHANNEL;
    }
    vc->reg_bytes += len;
    memset(mem, 0, sizeof(*mem));
    mem->addr = addr;
    mem->len = len;
    mem->priv = mr;
    mem->rkey.addr = (uint64_t)(uintptr_t)addr;
    mem->rkey.len = len;
    mem->rkey.key = mr->rkey;
    mem->rkey.kind = VERBS_KIND_MR;
    mem->rkey.owner = (uint32_t)vc->super.boot->rank;
    return ARCOLL_OK;
}

static int verbs_mr_reg(verbs_chan_t *vc, void *addr, size_t len, chan_mem_t *mem)
{
    return verbs_mr_reg_flags(vc, addr, len, 0, mem);
}

static void verbs_mr_dereg(verbs_chan_t *vc, chan_mem_t *mem)
{
    struct ibv_mr *mr = mem->priv;
    size_t len;
    int rc;

    if (mr == NULL)
        return;
    len = mr->length;
    rc = ibv_dereg_mr(mr);
    if (rc != 0)
        log_warn("verbs: ibv_dereg_mr failed: %s", strerror(rc));
    else
        vc->reg_bytes -= len;
    mem->priv = NULL;
}

/* Regions peers write into. In imm mode a shadow of len/8 bytes follows, one
 * word per 64-byte line, where write-with-immediate puts flags. */
int verbs_mem_alloc(chan_t *c, size_t len, chan_mem_t *mem)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;
    size_t total = vc->imm ? len + len / 8 + 64 : len;
    uint32_t id = 0;
    void *buf;
    int rc;

    if (vc->imm) {
        while (id < VERBS_MAX_REGIONS && vc->regions[id] != NULL)
            id++;
        if (id == VERBS_MAX_REGIONS || len % 64) {
            log_err("verbs: at most %d teams with ARCOLL_NOTIFY=imm", VERBS_MAX_REGIONS);
            return ARCOLL_ERR_NOMEM;
        }
    }
    if (posix_memalign(&buf, 4096, total) != 0) {
        log_err("verbs: out of memory for a %zu-byte region", total);
        return ARCOLL_ERR_NOMEM;
    }
    memset(buf, 0, total);
    rc = verbs_mr_reg(vc, buf, total, mem);
    if (rc != ARCOLL_OK) {
        log_err("verbs: registering a %zu-byte region failed (locked-memory limit? see ulimit "
                "-l)",
                total);
        free(buf);
        return rc;
    }
    mem->len = len;
    mem->rkey.len = len;
    mem->rkey.key |= (uint64_t)id << 32;
    if (vc->imm)
        vc->regions[id] = mem;
    return ARCOLL_OK;
}

void verbs_mem_free(chan_t *c, chan_mem_t *mem)
{
    verbs_chan_t *vc = (verbs_chan_t *)c;
    uint32_t id = (uint32_t)(mem->rkey.key >> 32);
    void *buf = mem->addr;

    if (vc->imm && id < VERBS_MAX_REGIONS && vc->regions[id] == mem)
        vc->regions[id] = NULL;
    verbs_mr_dereg(vc, mem);
    free(buf);
    mem->addr = NULL;
}

int verbs_mem_reg(chan_t *c, void *addr, size_t len, chan_mem_t *mem)
{
    return verbs_mr_reg((verbs_chan_t *)c, addr, len, mem);
}

int verbs_mem_reg_odp(chan_t *c, void *addr, size_t len, chan_mem_t *mem)
{
    return verbs_mr_reg_flags((verbs_chan_t *)c, addr, len, IBV_ACCESS_ON_DEMAND, mem);
}

void verbs_mem_dereg(chan_t *c, chan_mem_t *mem)
{
    verbs_mr_dereg((verbs_chan_t *)c, mem);
}

int verbs_rmem_import(chan_t *c, int peer, const chan_rkey_t *rkey, chan_rmem_t *rm)
{
    (void)c;
    if (rkey->kind != VERBS_KIND_MR || rkey->owner != (uint32_t)peer) {
        log_err("verbs: rank %d sent a key that is not a verbs memory key of its own", peer);
        return ARCOLL_ERR_CHANNEL;
    }
    rm->rkey = *rkey;
    rm->map = NULL;
    return ARCOLL_OK;
}

void verbs_rmem_release(chan_t *c, chan_rmem_t *rm)
{
    (void)c;
    rm->rkey.kind = 0;
}

/* Can an RC MR be on-demand paged, as both the source and the target of
 * RDMA WRITE? Then the heap needs one MR over its slot, nothing pinned. */
int verbs_odp_rc(verbs_chan_t *vc)
{
    const uint32_t need = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_WRITE;
    struct ibv_device_attr_ex dx;
    int rc;

    memset(&dx, 0, sizeof(dx));
    rc = ibv_query_device_ex(vc->ctx, NULL, &dx);
    if (rc != 0) {
        log_debug("verbs: ibv_query_device_ex failed (%s): no on-demand paging", strerror(rc));
        return 0;
    }
    return (dx.odp_caps.general_caps & IBV_ODP_SUPPORT) != 0 &&
           (dx.odp_caps.per_transport_caps.rc_odp_caps & need) == need;
}
