// SPDX-License-Identifier: MIT
// The guest's side of the session's shared data area: a ring allocator of
// payload blocks, and a heap of buffers' storage, that the host hands back
// through each block's done word.
// Layer: transport, below session.c (guest/icd.h has the layers).
#ifndef CMX_GUEST_AREA_H
#define CMX_GUEST_AREA_H

#include <pthread.h>
#include <stdint.h>

#include "area_layout.h"

struct cmx_hblk;

struct cmx_garea {
	uint8_t *base;
	uint64_t size;
	uint64_t start, end; /* the ring allocator's part of the data region */
	struct cmx_area_hdr hdr;
	pthread_mutex_t lock;
	uint64_t head, tail, used; /* next block, oldest live block, bytes held */
	/* The heap (cmx_garea_split()): the rest of the data region, where
	 * buffers live as long as they exist; blocks sorted by offset. */
	uint64_t heap_start, heap_end;
	struct cmx_hblk *heap;
	int mapped; /* the mapping is ours (cmx_garea_map), else the caller's */
};

/* Maps the host's memfd (fd stays the caller's) and checks its header. */
int cmx_garea_map(struct cmx_garea *a, int fd, uint64_t size);
void cmx_garea_unmap(struct cmx_garea *a);
/* The same over memory the caller mapped (an ivshmem slot's area), which
 * holds at most size bytes; unmap leaves the mapping alone. */
int cmx_garea_bind(struct cmx_garea *a, void *p, uint64_t size);

/* Puts the memfd `fd` of a resumed session's new daemon, laid out as the
 * mapped area is, under the area's addresses (pointers into it stay
 * valid): the data region's bytes and the fences come over from `old`
 * (the mapping's own memfd); the heap blocks the guest holds are the
 * host's again. The new rings are mapped apart, at *rings (ring i at
 * *rings + hdr.ring_off[i]; NULL without rings), so that a reader still
 * on an old ring reads old memory. 0 or -errno (the old mapping stays). */
int cmx_garea_move(struct cmx_garea *a, int old, int fd, uint8_t **rings);

/* Where ring i lies (CMX_RING_*): 0 with *mem and *len set, or -ENOENT
 * when the area has no such ring or it lies outside the mapping. */
int cmx_garea_ring(const struct cmx_garea *a, int i, void **mem, uint64_t *len);
/* A block of len bytes: its payload offset, or 0 when the area is full.
 * `busy`: the guest also holds it (a read's landing room) until
 * cmx_garea_free(); otherwise it comes back when the host is done. */
uint64_t cmx_garea_alloc(struct cmx_garea *a, uint64_t len, int busy);
/* The guest is done with a busy block (its data copied out). */
void cmx_garea_free(struct cmx_garea *a, uint64_t off);
/* Keeps the first ring_len bytes of the data region for the ring allocator
 * and makes the rest the heap (nothing, when too little is left). Before
 * any allocation. */
void cmx_garea_split(struct cmx_garea *a, uint64_t ring_len);
/* A heap block of len bytes, its payload page-aligned (drivers keep such
 * host pointers as the storage): its offset, or 0 when there is no room. */
uint64_t cmx_garea_heap_alloc(struct cmx_garea *a, uint64_t len);
/* The guest is done with a heap block; it is reused once the host stored
 * its done word too, at once when `sent` is 0 (the host never heard of it). */
void cmx_garea_heap_free(struct cmx_garea *a, uint64_t off, int sent);
/* Bytes of heap blocks the guest freed that the host is not yet done with. */
uint64_t cmx_garea_heap_pending(struct cmx_garea *a);
/* What the host has said of the command of event `id` (its completion
 * fence, transport/area_layout.h): 1 it completed without error, -1 the
 * host is watching it for its completion, 0 nothing. */
static inline int cmx_garea_fence_state(const struct cmx_garea *a, uint64_t id)
{
	const uint64_t *w;
	uint64_t v;

	if (!a->base || !a->hdr.fence_n)
		return 0;
	w = (const uint64_t *)(a->base + a->hdr.fence_at) + id % a->hdr.fence_n;
	v = __atomic_load_n(w, __ATOMIC_ACQUIRE);
	return v == id ? 1 : v == (id | CMX_AREA_FENCE_WATCHED) ? -1 : 0;
}

static inline int cmx_garea_fenced(const struct cmx_garea *a, uint64_t id)
{
	return cmx_garea_fence_state(a, id) == 1;
}
/* Whether [off, off + len) lies in the ring allocator's part. */
int cmx_garea_valid(const struct cmx_garea *a, uint64_t off, uint64_t len);

#endif
