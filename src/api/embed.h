/* State behind the entry points for embedding layers (src/api/embed.c). */
#ifndef ARCOLL_API_EMBED_H
#define ARCOLL_API_EMBED_H

/* Set by arcoll_call_site, taken (and cleared) by the next collective this
 * thread starts: the profiler's call site instead of the direct caller. */
extern _Thread_local const void *core_call_site;

#endif
