/* The engine's ground floor: a call's name, the engine's clock, reading a
 * peer's control slot and a flat peer's arrival without changing anything,
 * the protocol of calls that move their own data (coll_proto_none), and the
 * families' per-team state (eng_state_get).
 * Every other engine file calls down to these; they call nothing of the
 * engine's above them (the state machine in eng_call.c, its checks in
 * engine_check.c, the schedule executor in sched_run.c). */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "util/log.h"

uint64_t eng_time_ns(const struct arcoll_context *ctx)
{
    chan_t *c = ctx->chan;

    return c->ops->model != NULL && c->ops->model->now_ns != NULL ? c->ops->model->now_ns(c)
                                                                  : core_time_ns();
}

uint64_t eng_start_time_ns(const struct arcoll_context *ctx)
{
    chan_t *c = ctx->chan;

    if (c->ops->model != NULL && c->ops->model->now_ns != NULL)
        return c->ops->model->now_ns(c);
    return ctx->prof != NULL ? core_time_ns() : core_time_coarse_ns();
}

const char *coll_type_name(coll_type_t type)
{
#define ENG_COLL_SHOWN(type, name, shown, bit) [type] = shown,
    static const char *const names[COLL_NTYPES] = {CORE_COLL_LIST(ENG_COLL_SHOWN)};
#undef ENG_COLL_SHOWN

    if (type == COLL_SENDRECV)
        return "exchange";
    return (unsigned)type < COLL_NTYPES ? names[type] : "collective";
}

int coll_ctrl_read(coll_req_t *r, uint32_t peer, wire_ctrl_t *out)
{
    struct arcoll_team *t = r->team;
    uint64_t off = wire_ctrl_off(&t->layout, peer, r->bank);

    if (wire_load(&t->region, off) != r->epoch)
        return 0;
    memcpy(out, (char *)t->region.addr + off, sizeof(*out));
    if (wire_ctrl_size(out, r->epoch) == WIRE_SIZE_NONE) {
        /* The flag alone (coll_ready_to): the body is an earlier call's, and
         * its key must never be used. */
        memset(out, 0, sizeof(*out));
        out->flag = r->epoch;
        out->size = WIRE_SIZE_NONE;
    }
    return 1;
}

int coll_flat_arrival(const coll_req_t *r, uint32_t peer, uint64_t *size)
{
    const struct arcoll_team *t = r->team;
    uint64_t off = wire_ctrl_off(&t->layout, peer, r->bank);

    if (wire_load(&t->region, off) == r->epoch) {
        const wire_ctrl_t *adv = (const wire_ctrl_t *)((const char *)t->region.addr + off);
        *size = wire_ctrl_size(adv, r->epoch);
        return 1;
    }
    off = wire_slot_off(&t->layout, peer, r->bank);
    if (wire_load(&t->region, off) == wire_frag_word(r->epoch, 0)) {
        *size = ((const wire_slot_hdr_t *)((const char *)t->region.addr + off))->size;
        return 1;
    }
    return 0;
}

static int none_hook(coll_req_t *r, uint32_t peer)
{
    (void)r;
    (void)peer;
    return 0;
}

static int none_start(coll_req_t *r)
{
    (void)r;
    return ARCOLL_OK;
}

static void none_finish(coll_req_t *r)
{
    (void)r;
}

const coll_proto_t coll_proto_none = {
    .name = "none",
    .start = none_start,
    .arrived = none_hook,
    .tx_ready = none_hook,
    .tx = none_hook,
    .rx = none_hook,
    .finish = none_finish,
};

/* One family's state on a team: a short list (one entry per family that ran
 * on the team), walked at a call's start only. */
struct eng_state {
    const eng_state_kind_t *kind;
    void *state;
    struct eng_state *next;
};

void *eng_state_get(struct arcoll_team *t, const eng_state_kind_t *kind)
{
    struct eng_state *e;

    for (e = t->states; e != NULL; e = e->next)
        if (e->kind == kind)
            return e->state;
    e = malloc(sizeof(*e));
    if (e == NULL) {
        log_err("arcoll: out of memory for an algorithm's per-team state");
        return NULL;
    }
    e->state = kind->make(t);
    if (e->state == NULL) {
        free(e);
        return NULL;
    }
    e->kind = kind;
    e->next = t->states;
    t->states = e;
    return e->state;
}

void eng_state_free_all(struct arcoll_team *t)
{
    while (t->states != NULL) {
        struct eng_state *e = t->states;
        t->states = e->next;
        e->kind->free(e->state);
        free(e);
    }
}
