/* The simulator's channel has no setting of its own: it follows those of the
 * channel it models, by name (chan_args.setting: ARCOLL_VERBS_CONNECT). In
 * libarcoll like every channel's settings (the Makefile), so that the table
 * is the same in every program. */
#include "chan/chan.h"

const core_settings_t sim_settings = {NULL, 0};
