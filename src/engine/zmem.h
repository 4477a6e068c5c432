/* Registration of user buffers for the zero-copy path (docs/verbs.md,
 * "Registration"): on verbs one MR for buffers in this process's heap slot
 * (mem/heapmr.h), explicit registrations (arcoll_mem_register), an optional
 * cache of implicit ones (ARCOLL_REGCACHE=on), and otherwise per-call
 * registration, which can never meet a stale key. */
#ifndef ARCOLL_ENGINE_ZMEM_H
#define ARCOLL_ENGINE_ZMEM_H

#include <stddef.h>

#include "arcoll.h"
#include "chan/chan.h"
#include "mem/heapmr.h"
#include "mem/regcache.h"

struct arcoll_context;

/* A registration in use by one collective. */
typedef struct zmem_ref {
    chan_mem_t *mem;       /* covers the buffer; mem->addr may be below it */
    regcache_entry_t *ent; /* from the cache, or NULL */
    heapmr_mr_t *hmr;      /* from the heap MR, or NULL */
    chan_mem_t own;        /* per-call registration when not cached */
} zmem_ref_t;

int zmem_create(struct arcoll_context *ctx);
void zmem_destroy(struct arcoll_context *ctx);
int zmem_get(struct arcoll_context *ctx, void *addr, size_t len, zmem_ref_t *ref);
void zmem_put(struct arcoll_context *ctx, zmem_ref_t *ref);
/* Register memory until zmem_unpin (arcoll_mem_register's work, also used
 * for the library's own node segments); zmem_get then finds it. */
int zmem_pin(struct arcoll_context *ctx, void *addr, size_t len, struct arcoll_mem **out);
void zmem_unpin(struct arcoll_context *ctx, struct arcoll_mem *m);
/* zmem_unpin if mem is one of the context's user registrations: 1, else 0. */
int zmem_unpin_user(struct arcoll_context *ctx, struct arcoll_mem *mem);
/* A call that advertised ref failed while a peer may still write with its
 * key: no later write may land. A cached registration is dropped from the
 * cache (deregistered at the call's put); the heap MR is deregistered now and
 * replaced at the next get (other calls that hold it then fail, with an error,
 * not a write into a returned buffer); a per-call one goes at the put. */
void zmem_revoke(struct arcoll_context *ctx, zmem_ref_t *ref);
/* The program changed the mapping of [addr, addr+len): drop cached registrations there. */
void zmem_invalidate(struct arcoll_context *ctx, void *addr, size_t len);
/* The registration counters of arcoll_context_resources. */
void zmem_resources(struct arcoll_context *ctx, arcoll_resources_t *out);

#endif
