/* The InfiniBand verbs channel (RC QPs, RDMA WRITE) implements the same
 * chan_ops as src/smp. Until it lands, selecting it is a clear error. */
#include "core/chan.h"
#include "core/log.h"

int verbs_chan_create(boot_t *boot, const struct core_config *cfg, chan_t **out)
{
    (void)boot;
    (void)cfg;
    *out = NULL;
    log_err("ARCOLL_CHANNEL=verbs: the verbs channel is not implemented in this version; "
            "use ARCOLL_CHANNEL=smp");
    return ARCOLL_ERR_UNSUPPORTED;
}
