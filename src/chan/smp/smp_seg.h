/* Shared-memory segments: the smp channel's regions and the node segments of
 * the shared-memory aware algorithms (docs/protocol.md §2, §10;
 * docs/reliability.md "Shared memory").
 *
 * A segment is an anonymous memfd by default: a peer of the same user maps it
 * through /proc/<owner pid>/fd/<fd>, and the owner closes that fd once every
 * peer has (smp_seg_seal), so nothing is ever named and a crash at any moment
 * leaves nothing behind. Where /proc/<pid>/fd cannot be opened, the context
 * falls back to POSIX shm names /arcoll.<pid>.<64 random bits>, created
 * O_EXCL and unlinked at the seal. Which of the two a context uses is agreed
 * once at init (smp_seg_agree); the 64-bit key a peer needs says which too. */
#ifndef ARCOLL_CHAN_SMP_SMP_SEG_H
#define ARCOLL_CHAN_SMP_SMP_SEG_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/boot.h"

/* Key of a named segment: this bit, and the random part of the name in the
 * others; without it, the key is the owner's memfd number. */
#define SMP_SEG_KEY_NAMED ((uint64_t)1 << 63)

/* ARCOLL_SMP_SEG (chan/smp/smp_opts.c): auto is resolved at init to memfd
 * or named, for every shared segment of the context (smp_seg_agree). */
enum { CORE_SEG_AUTO, CORE_SEG_MEMFD, CORE_SEG_NAMED };

typedef struct smp_seg {
    void *addr;
    size_t len;
    long owner;   /* creator's pid */
    uint64_t key; /* what an attacher needs besides the pid (see above) */
    int fd;       /* creator of a memfd segment: open until sealed, else -1 */
    int linked;   /* creator of a named segment: 1 while the name exists */
} smp_seg_t;

/* Create, size (pages reserved now, so a full /dev/shm fails here and not
 * with SIGBUS later) and map a zeroed segment, a memfd or (named != 0) a
 * randomly named one. ARCOLL_ERR_NOMEM only if the memory itself is short;
 * ARCOLL_ERR_CHANNEL if the segment cannot be made. */
int smp_seg_create(smp_seg_t *s, size_t len, int named);
/* The node heap's segment (mem/heap.c): a memfd of len bytes with no pages
 * reserved (its owner reserves them as it hands them out) mapped MAP_FIXED at
 * at, over the caller's PROT_NONE reservation, or anywhere if at is NULL. Its
 * fd stays open (s->fd) until smp_seg_seal. */
int smp_seg_create_at(smp_seg_t *s, size_t len, void *at);
/* Map another process's segment; ARCOLL_ERR_CHANNEL if it is missing, not
 * ours or short, ARCOLL_ERR_PEER if its owner has exited. */
int smp_seg_attach(smp_seg_t *s, long owner, uint64_t key, size_t len);
/* The same at at (MAP_FIXED over the caller's reservation; NULL: anywhere). */
int smp_seg_attach_at(smp_seg_t *s, long owner, uint64_t key, size_t len, void *at);
/* Every peer has attached (creator): close the memfd or remove the name, so
 * that nothing outlives the mappings. */
void smp_seg_seal(smp_seg_t *s);
/* Unmap (and seal first if still findable). */
void smp_seg_free(smp_seg_t *s);
/* Collective over b: can every rank map a memfd of a rank on its node through
 * /proc? want: CORE_SEG_* (above). *named = 0 (memfd) if so and want
 * is not named; 1 if want is named or (auto) if any rank cannot;
 * ARCOLL_ERR_CHANNEL if want is memfd and some rank cannot. */
int smp_seg_agree(boot_t *b, int want, int *named);
/* Remove /dev/shm/arcoll.<pid>.* of this user whose creator has exited,
 * naming each on out, a FILE * (or in the info log if NULL; void * keeps
 * stdio out of the headers that include this one). Returns how many. */
int smp_seg_sweep(void *out);

#endif
