/* Named POSIX shared-memory segments: the smp channel's regions and the
 * node segments of the shared-memory aware algorithms. A segment is named
 * after its creator's pid and a tag, found by the others through that pair,
 * and unlinked once everyone has mapped it (no name outlives setup). */
#ifndef ARCOLL_SMP_SMP_SEG_H
#define ARCOLL_SMP_SMP_SEG_H

#include <stddef.h>
#include <stdint.h>

typedef struct smp_seg {
    void *addr;
    size_t len;
    long owner; /* creator's pid */
    uint64_t tag;
    int linked; /* 1 while the name exists (creator only) */
} smp_seg_t;

/* Create, size (pages reserved now, so a full /dev/shm fails here and not
 * with SIGBUS later) and map a zeroed segment; s->tag is unique in this
 * process (several contexts may live in one). ARCOLL_ERR_NOMEM on failure. */
int smp_seg_create(smp_seg_t *s, size_t len);
/* Map another process's segment; ARCOLL_ERR_CHANNEL if it is missing or short. */
int smp_seg_attach(smp_seg_t *s, long owner, uint64_t tag, size_t len);
/* Remove the name (creator); mappings stay valid. */
void smp_seg_unlink(smp_seg_t *s);
/* Unmap (and unlink if still named). */
void smp_seg_free(smp_seg_t *s);

#endif
