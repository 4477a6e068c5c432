/* State behind the entry points for embedding layers (src/core/embed.c). */
#ifndef ARCOLL_CORE_EMBED_H
#define ARCOLL_CORE_EMBED_H

/* Set by arcoll_call_site, taken (and cleared) by the next collective this
 * thread starts: the profiler's call site instead of the direct caller. */
extern _Thread_local const void *core_call_site;

#endif
