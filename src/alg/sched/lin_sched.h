/* Linear schedules of the v-forms and reductions (src/alg/sched/lin_sched.c): one
 * message per peer and round, run PAP-aware (pap) or in order (direct). */
#ifndef ARCOLL_ALG_SCHED_LIN_SCHED_H
#define ARCOLL_ALG_SCHED_LIN_SCHED_H

#include "engine/engine.h"

/* Build the call's linear schedule into s. */
int lin_sched_build(const coll_req_t *r, sched_t *s);

#endif
