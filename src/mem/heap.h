/*
 * The node heap (docs/heap.md): this process's slot of a range reserved at the
 * same address in every rank of a node, a sparse memfd mapped there, and a
 * jemalloc arena (linked privately: heap.c's object hides every jemalloc
 * symbol) that carves allocations out of it. The public face is
 * arcoll_heap_* (include/arcoll.h); this header is what the rest of the
 * library needs: the layout for the node agreement (heap_node.c), and the
 * fallback-free primitives of the preload library.
 */
#ifndef ARCOLL_MEM_HEAP_H
#define ARCOLL_MEM_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/boot.h"

typedef struct heap_layout {
    char *base;      /* the reservation, or NULL if none (the heap is then private) */
    size_t slot_len; /* H: bytes per slot */
    int nslots;      /* slots reserved */
    int slot;        /* this process's slot, -1 if its segment is elsewhere */
    long pid;        /* owner of the segment, for the peers' /proc/<pid>/fd/<fd> */
    int fd;          /* the segment's memfd (open while the heap lives) */
} heap_layout_t;

/* Create the heap now if it does not exist (ARCOLL_OK, or ARCOLL_ERR_NOMEM /
 * _UNSUPPORTED if it cannot be made: then every allocation fails). */
int heap_ensure(void);
/* The layout, if the heap exists (ARCOLL_OK) or ARCOLL_ERR_STATE. */
int heap_layout(heap_layout_t *out);
/* This process's slot [*mine, *mine + *slot_len) and the bytes of it handed
 * out so far, from its start (they only grow): ARCOLL_OK, or ARCOLL_ERR_STATE
 * if the heap does not exist (engine/zmem.c's heap MR). */
int heap_slot(char **mine, size_t *slot_len, size_t *used);

/* Collective over b at arcoll_init: every rank of the job takes part. If any
 * rank has a heap, every rank makes one; where every rank of a host has its
 * segment at its slot of the same reservation, each maps the others' slots
 * and the reservation is registered as one same-address region
 * (mem/region.h). Anything short of that leaves the heap private, with an
 * info line; only a bootstrap failure is an error. */
int heap_node_attach(boot_t *b);
/* At arcoll_finalize: the last context out unmaps the peers' slots and
 * removes the region. */
void heap_node_detach(void);
/* The shared heap's region id (mem/region.h), 0 while the heap is not
 * shared on this host: what a rank tells its team at team creation, so that
 * auto may pick sh_co (config/tune.c). */
uint64_t heap_node_region(void);
/* This process's index among its node's ranks as its launcher gives it
 * (ARCOLL_HEAP_SLOT, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID,
 * SLURM_LOCALID, PALS_LOCAL_RANKID), -1 if none does: not an MPI rank.
 * Reads the environment only (no allocation: the preload's malloc calls it). */
int heap_launcher_rank(void);

#endif
