// SPDX-License-Identifier: MIT
// A session's shared memory on the host: the sealed memfd, its mapping, and
// the payload blocks commands hold in it.
#ifndef CMX_HOST_AREA_H
#define CMX_HOST_AREA_H

#include <stdint.h>

#include "area_layout.h"
#include "wire.h"

struct cmx_area {
	uint8_t *base;
	uint64_t size;
	struct cmx_area_hdr hdr; /* the host's own copy: never read back from the guest */
	int refs;		 /* atomic: the session, plus one per block taken */
	struct cmx_area *next;	 /* every live area (cmx_area_release() finds its own) */
};

/* Makes an area of about `size` bytes (with rings when `flags` asks).
 * *fd is the memfd to hand over (the caller closes it). 0 or -errno. */
int cmx_area_create(uint64_t size, unsigned flags, struct cmx_area **out, int *fd);
/* The header's fence_spin_us, before the guest has the area. */
void cmx_area_fence_spin(struct cmx_area *a, uint32_t us);
/* An area laid out in the len bytes at off (a multiple of 4096) of a file
 * the peer maps too (an ivshmem region): its header written, the rings'
 * control lines left for their creator to reset. 0 or -errno. */
int cmx_area_open(int fd, uint64_t off, uint64_t len, unsigned flags, struct cmx_area **out);
/* Another reference (the shm rings' holder). */
void cmx_area_ref(struct cmx_area *a);
/* Whether anyone but the caller still holds a (a session, a block). */
int cmx_area_shared(struct cmx_area *a);
/* Drops the session's reference; the mapping goes with the last block. */
void cmx_area_put(struct cmx_area *a);

/* The payload block [off, off + len) of the data region, referenced until
 * cmx_area_release(); NULL when a guest's offset or length is out of
 * bounds. Loop thread. */
void *cmx_area_take(struct cmx_area *a, uint64_t off, uint64_t len);
/* When p is a block taken from an area: tells the guest the host is done
 * with it (the done word, release ordering), drops its reference and
 * returns 1; else 0. Thread-safe: driver callbacks call it (through
 * cmx_staging_put()) when a native transfer completes. */
int cmx_area_release(void *p);
/* Whether [p, p + len) lies in the data region of a (NULL: none). */
int cmx_area_holds(const struct cmx_area *a, const void *p, uint64_t len);
/* Whether [p, p + len) shares a byte with a's mapping (NULL: none). */
int cmx_area_overlaps(const struct cmx_area *a, const void *p, uint64_t len);
/* When the payload p of an outgoing message is a block of a (NULL: none),
 * marks h so (CMX_HDR_AREA, its offset): the data is not sent in the stream. */
void cmx_area_mark(const struct cmx_area *a, struct cmx_hdr *h, const void *p);

/* Tells the guest that its event `id` completed without error: the
 * completion fence (transport/area_layout.h). Loop thread. */
void cmx_area_fence(struct cmx_area *a, uint64_t id);
/* on: the loop watches event id's command (its word marked watched, so
 * that a waiting guest looks longer before it asks); off: no longer, the
 * mark cleared unless the word changed since. */
void cmx_area_fence_watch(struct cmx_area *a, uint64_t id, int on);

#endif
