/* The verbs channel's settings (verbs_opts.c). */
#ifndef ARCOLL_CHAN_VERBS_VERBS_OPTS_H
#define ARCOLL_CHAN_VERBS_VERBS_OPTS_H

enum { VERBS_NOTIFY_FLAG, VERBS_NOTIFY_IMM };
enum { VERBS_WIREUP_OOB, VERBS_WIREUP_RDMACM };
enum { VERBS_CONNECT_LAZY, VERBS_CONNECT_EAGER };
#define VERBS_DEVICE_STR 64

typedef struct verbs_opts {
    char device[VERBS_DEVICE_STR]; /* ARCOLL_DEVICE: "" = automatic, else name[:port] */
    long gid_index;                /* -1 = automatic */
    int notify;                    /* VERBS_NOTIFY_*: flag polling or write-with-immediate */
    int wireup;                    /* VERBS_WIREUP_*: how the local address/GID is found */
    int connect;                   /* VERBS_CONNECT_*: RC QPs on first use (lazy) or all at init */
} verbs_opts_t;

#endif
