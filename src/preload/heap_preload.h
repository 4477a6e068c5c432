/*
 * What the preload's malloc decided (src/preload/heap_preload.c), for the
 * shim's report: whether the node heap serves this process, and why not.
 */
#ifndef ARCOLL_PRELOAD_HEAP_PRELOAD_H
#define ARCOLL_PRELOAD_HEAP_PRELOAD_H

#include <stddef.h>

typedef enum {
    PRE_WHY_ON,       /* the heap serves blocks of *min bytes or more */
    PRE_WHY_OFF,      /* ARCOLL_HEAP=off */
    PRE_WHY_NOT_RANK, /* auto, and no launcher gave a local rank */
    PRE_WHY_FOREIGN,  /* the program brings its own malloc */
    PRE_WHY_BAD,      /* ARCOLL_HEAP or ARCOLL_HEAP_MIN not valid: the defaults */
    PRE_WHY_SHADOWED, /* another malloc comes first (a sanitizer, a preload before this one) */
} pre_why_t;

/* The decision (made now if no allocation made it yet), and the least size
 * the heap serves. Exported: a second arcoll preload library found next in
 * lookup order is recognised by it, not taken for a program's allocator. */
int preload_heap_state(size_t *min);

#endif
