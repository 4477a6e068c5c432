/* The smp channel's settings (smp_opts.c): ARCOLL_SMP_*. */
#ifndef ARCOLL_CHAN_SMP_SMP_OPTS_H
#define ARCOLL_CHAN_SMP_SMP_OPTS_H

#include "chan/smp/smp_seg.h"

enum { SMP_CMA_AUTO, SMP_CMA_OFF };

typedef struct smp_opts {
    int cma; /* SMP_CMA_*: process_vm_writev for large puts */
    /* CORE_SEG_* (smp_seg.h), resolved by the context at init: how peers find
     * every shared segment, the channel's and the node segments alike. */
    int seg;
} smp_opts_t;

#endif
