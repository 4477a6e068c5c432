/* The verbs channel's rows of the ARCOLL_* table (util/setting.h). */
#include "chan/verbs/verbs_opts.h"

#include <stddef.h>

#include "chan/chan.h"

#define VERBS_OFF(f) offsetof(verbs_opts_t, f)

static const char *const verbs_device_form[] = {"name[:port]", NULL};
static const char *const verbs_notify_values[] = {"flag", "imm", NULL};
static const char *const verbs_wireup_values[] = {"oob", "rdmacm", NULL};
static const char *const verbs_connect_values[] = {"lazy", "eager", NULL};

static const core_setting_t verbs_rows[] = {
    {"ARCOLL_DEVICE", CORE_SETTING_STRING, VERBS_OFF(device), verbs_device_form, "auto", 0,
     VERBS_DEVICE_STR - 1, 0, "verbs device as name[:port]; auto: the first active port"},
    {"ARCOLL_GID_INDEX", CORE_SETTING_LONG, VERBS_OFF(gid_index), NULL, "auto", -1, 255, 0,
     "verbs GID index; auto: the RoCE v2 GID of the port's IPv4 address, or none on IB"},
    {"ARCOLL_NOTIFY", CORE_SETTING_ENUM, VERBS_OFF(notify), verbs_notify_values, "flag", 0, 0, 1,
     "verbs: flag (poll the word written after the data) or imm (write with immediate)"},
    {"ARCOLL_WIREUP", CORE_SETTING_ENUM, VERBS_OFF(wireup), verbs_wireup_values, "oob", 0, 0, 0,
     "verbs: oob (GID from the port's table) or rdmacm (GID resolved by librdmacm)"},
    {"ARCOLL_VERBS_CONNECT", CORE_SETTING_ENUM, VERBS_OFF(connect), verbs_connect_values, "lazy", 0,
     0, 1,
     "verbs: lazy (an RC QP to a peer on first use, handshake over UD) or eager (to every peer "
     "at init)"},
};

CHAN_SETTINGS(verbs, verbs_rows, verbs_opts_t);
