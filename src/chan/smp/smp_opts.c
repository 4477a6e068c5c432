/* The smp channel's rows of the ARCOLL_* table (util/setting.h). */
#include "chan/smp/smp_opts.h"

#include <stddef.h>

#include "chan/chan.h"

static const char *const smp_cma_values[] = {"auto", "off", NULL};
static const char *const smp_seg_values[] = {"auto", "memfd", "named", NULL};

static const core_setting_t smp_rows[] = {
    {"ARCOLL_SMP_CMA", CORE_SETTING_ENUM, offsetof(smp_opts_t, cma), smp_cma_values, "auto", 0, 0,
     1, "smp zero-copy through process_vm_writev: auto (probe) or off (copy path)"},
    {"ARCOLL_SMP_SEG", CORE_SETTING_ENUM, offsetof(smp_opts_t, seg), smp_seg_values, "auto", 0, 0,
     1,
     "shared segments: memfd (anonymous, mapped by peers through /proc/<pid>/fd), named "
     "(random /dev/shm names, removed once mapped) or auto (memfd if every rank can; shown "
     "resolved)"},
};

CHAN_SETTINGS(smp, smp_rows, smp_opts_t);
