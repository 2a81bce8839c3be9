// SPDX-License-Identifier: MIT
// The driver (guest) side of a split virtqueue over a test arena standing
// in for guest memory, for the device-side unit tests.
#ifndef CMX_TEST_VQ_DRIVER_H
#define CMX_TEST_VQ_DRIVER_H

#include <check.h>
#include <linux/virtio_ring.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "virtq.h"

#define ARENA_SIZE (4u << 20)
#define QNUM 16u

/* Guest memory: gpa 0x10000 .. 0x10000 + ARENA_SIZE. */
struct arena {
	uint8_t *mem;
	uint64_t base;
	uint64_t next; /* bump allocator for buffers */
};

static inline void *arena_xlate(void *ctx, uint64_t gpa, uint64_t len)
{
	struct arena *a = ctx;

	if (gpa < a->base || gpa - a->base > ARENA_SIZE || len > ARENA_SIZE - (gpa - a->base))
		return NULL;
	return a->mem + (gpa - a->base);
}

static inline void arena_init(struct arena *a)
{
	a->mem = calloc(1, ARENA_SIZE);
	a->base = 0x10000;
	a->next = a->base + 0x1000; /* the rings live below */
}

static inline uint64_t arena_alloc(struct arena *a, size_t len)
{
	uint64_t g = a->next;

	a->next += (len + 63) & ~(uint64_t)63;
	return g;
}

struct drv {
	struct arena *a;
	struct vring_desc *desc;
	struct vring_avail *avail;
	struct vring_used *used;
	uint16_t free_desc, avail_idx, used_seen;
};

/* Sets up the rings of queue q at arena offset off (0x400 per queue). */
static inline void drv_init(struct drv *d, struct arena *a, struct cmx_virtq *q, unsigned off)
{
	uint8_t *base = a->mem + off;

	memset(d, 0, sizeof(*d));
	d->a = a;
	d->desc = (void *)base;
	d->avail = (void *)(base + 16 * QNUM);
	d->used = (void *)(base + 16 * QNUM + 64);
	cmx_virtq_init(q, QNUM, d->desc, d->avail, d->used, 0, arena_xlate, a);
}

/* Adds a chain of nout readable then nin writable buffers; the head. */
static inline uint16_t drv_add(struct drv *d, const uint64_t *gpa, const uint32_t *len,
			       unsigned nout, unsigned nin)
{
	uint16_t head = d->free_desc;

	for (unsigned i = 0; i < nout + nin; i++) {
		struct vring_desc *x = &d->desc[(head + i) % QNUM];
		x->addr = gpa[i];
		x->len = len[i];
		x->flags = (i >= nout ? VRING_DESC_F_WRITE : 0) |
			   (i + 1 < nout + nin ? VRING_DESC_F_NEXT : 0);
		x->next = (uint16_t)((head + i + 1) % QNUM);
	}
	d->free_desc = (uint16_t)((head + nout + nin) % QNUM);
	d->avail->ring[d->avail_idx % QNUM] = head;
	__atomic_store_n(&d->avail->idx, ++d->avail_idx, __ATOMIC_RELEASE);
	return head;
}

/* The next used entry: 1 and its length, or 0. */
static inline int drv_used(struct drv *d, uint16_t *id, uint32_t *len)
{
	if (__atomic_load_n(&d->used->idx, __ATOMIC_ACQUIRE) == d->used_seen)
		return 0;
	*id = (uint16_t)d->used->ring[d->used_seen % QNUM].id;
	*len = d->used->ring[d->used_seen % QNUM].len;
	d->used_seen++;
	return 1;
}

/* Runs one test case's tests: the exit status of the test program. */
static inline int vq_run(const char *name, TCase *tc)
{
	Suite *s = suite_create(name);
	SRunner *sr;
	int failed;

	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

#endif
