// SPDX-License-Identifier: MIT
// Shared memory of a session: a memfd sealed against resizing (a guest that
// could shrink it would turn the host's next access into SIGBUS), mapped
// once, with payload blocks that commands reference until they complete.
#define _GNU_SOURCE
#include "area.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "wire.h"

#define PAGE	   4096ull
#define RING_BYTES (256ull << 10) /* each control ring, when asked for */

/*
 * Every live area, for cmx_area_release() from driver threads. Process-wide
 * on purpose, not the server's: it maps the process's address space (a
 * pointer lies in at most one mapping, whichever server made it), and
 * cmx_area_release() gets only a payload's pointer, from whoever frees it
 * (a reply's rbulk_free, through the transports).
 */
static pthread_mutex_t areas_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cmx_area *areas;

static uint64_t round_up(uint64_t v, uint64_t to)
{
	return (v + to - 1) / to * to;
}

/* The layout of an area with `data_len` bytes of data region. */
static void layout(struct cmx_area *a, unsigned flags, uint64_t data_len)
{
	uint64_t at = PAGE;

	a->hdr.magic = CMX_AREA_MAGIC;
	a->hdr.version = CMX_AREA_VERSION;
	if (flags & CMX_AREA_RINGS)
		for (int i = 0; i < CMX_RING_COUNT; i++) {
			a->hdr.ring_off[i] = at;
			a->hdr.ring_len[i] = RING_BYTES;
			at += RING_BYTES;
		}
	a->hdr.fence_at = CMX_AREA_FENCE_AT;
	a->hdr.fence_n = CMX_AREA_FENCE_N;
	a->hdr.data_off = at;
	a->hdr.data_len = data_len;
	a->hdr.size = a->size = at + data_len;
	a->refs = 1;
}

/* Maps `a->size` bytes of fd at off, writes the header, makes it live. */
static int map(struct cmx_area *a, int fd, uint64_t off)
{
	a->base = mmap(NULL, a->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
	if (a->base == MAP_FAILED)
		return -errno;
	/* The whole page: an ivshmem region's file may hold an earlier
	 * session's fences. */
	memset(a->base, 0, PAGE);
	memcpy(a->base, &a->hdr, sizeof(a->hdr));
	pthread_mutex_lock(&areas_lock);
	a->next = areas;
	areas = a;
	pthread_mutex_unlock(&areas_lock);
	return 0;
}

int cmx_area_create(uint64_t size, unsigned flags, struct cmx_area **out, int *fdp)
{
	struct cmx_area *a = calloc(1, sizeof(*a));
	int fd, e;

	if (!a)
		return -ENOMEM;
	if (size < CMX_AREA_MIN)
		size = CMX_AREA_MIN;
	if (size > CMX_AREA_MAX)
		size = CMX_AREA_MAX;
	layout(a, flags, round_up(size, PAGE));
	fd = memfd_create("clmux-area", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		e = -errno;
		goto fail;
	}
	if (ftruncate(fd, (off_t)a->size) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		e = -errno;
		goto fail_fd;
	}
	e = map(a, fd, 0);
	if (e)
		goto fail_fd;
	*out = a;
	*fdp = fd;
	return 0;
fail_fd:
	close(fd);
fail:
	free(a);
	return e;
}

void cmx_area_fence_spin(struct cmx_area *a, uint32_t us)
{
	a->hdr.fence_spin_us = us;
	((struct cmx_area_hdr *)a->base)->fence_spin_us = us;
}

int cmx_area_open(int fd, uint64_t off, uint64_t len, unsigned flags, struct cmx_area **out)
{
	struct cmx_area *a = calloc(1, sizeof(*a));
	uint64_t fixed = PAGE + ((flags & CMX_AREA_RINGS) ? CMX_RING_COUNT * RING_BYTES : 0);
	int e;

	if (!a)
		return -ENOMEM;
	if ((off % PAGE) || len < fixed + CMX_AREA_BLK * 2) {
		free(a);
		return -EINVAL;
	}
	layout(a, flags, (len - fixed) / PAGE * PAGE);
	e = map(a, fd, off);
	if (e) {
		free(a);
		return e;
	}
	*out = a;
	return 0;
}

/* Drops one reference; called with areas_lock held. Returns the area to
 * unmap when that was the last. */
static struct cmx_area *unref_locked(struct cmx_area *a)
{
	struct cmx_area **pp;

	if (--a->refs)
		return NULL;
	for (pp = &areas; *pp != a; pp = &(*pp)->next)
		;
	*pp = a->next;
	return a;
}

static void destroy(struct cmx_area *a)
{
	if (!a)
		return;
	munmap(a->base, a->size);
	free(a);
}

void cmx_area_ref(struct cmx_area *a)
{
	pthread_mutex_lock(&areas_lock);
	a->refs++;
	pthread_mutex_unlock(&areas_lock);
}

int cmx_area_shared(struct cmx_area *a)
{
	int n;

	pthread_mutex_lock(&areas_lock);
	n = a->refs;
	pthread_mutex_unlock(&areas_lock);
	return n > 1;
}

void cmx_area_put(struct cmx_area *a)
{
	struct cmx_area *gone;

	if (!a)
		return;
	pthread_mutex_lock(&areas_lock);
	gone = unref_locked(a);
	pthread_mutex_unlock(&areas_lock);
	destroy(gone);
}

void *cmx_area_take(struct cmx_area *a, uint64_t off, uint64_t len)
{
	const struct cmx_area_hdr *h = &a->hdr;

	/* Every bound from the host's copy of the layout; off is checked
	 * before it is used in a sum, so nothing below can wrap. */
	if (off < h->data_off + CMX_AREA_BLK || off >= h->data_off + h->data_len || (off & 7) ||
	    len > h->data_off + h->data_len - off)
		return NULL;
	pthread_mutex_lock(&areas_lock);
	a->refs++;
	pthread_mutex_unlock(&areas_lock);
	return a->base + off;
}

static struct cmx_area *find_locked(const void *p)
{
	const uint8_t *b = p;

	for (struct cmx_area *a = areas; a; a = a->next)
		if (b >= a->base && b < a->base + a->size)
			return a;
	return NULL;
}

int cmx_area_release(void *p)
{
	struct cmx_area *a, *gone = NULL;

	pthread_mutex_lock(&areas_lock);
	a = find_locked(p);
	if (a) {
		/* Pairs with the guest's acquire load of `done` before it reuses
		 * the block: every host access to the payload comes before. */
		__atomic_store_n((uint64_t *)((uint8_t *)p - CMX_AREA_DONE_AT), 1,
				 __ATOMIC_RELEASE);
		gone = unref_locked(a);
	}
	pthread_mutex_unlock(&areas_lock);
	destroy(gone);
	return a != NULL;
}

void cmx_area_mark(const struct cmx_area *a, struct cmx_hdr *h, const void *p)
{
	const uint8_t *b = p;

	if (a && b && b >= a->base && b < a->base + a->size) {
		h->flags |= CMX_HDR_AREA;
		h->area_off = (uint32_t)(b - a->base);
	}
}

int cmx_area_overlaps(const struct cmx_area *a, const void *p, uint64_t len)
{
	uintptr_t b = (uintptr_t)p, lo, hi;

	if (!a || !p || !len)
		return 0;
	lo = (uintptr_t)a->base;
	hi = lo + a->size;
	return b < hi && (b >= lo || len > lo - b);
}

int cmx_area_holds(const struct cmx_area *a, const void *p, uint64_t len)
{
	const uint8_t *b = p, *lo, *hi;

	if (!a || !b)
		return 0;
	lo = a->base + a->hdr.data_off;
	hi = lo + a->hdr.data_len;
	return b >= lo && b <= hi && len <= (uint64_t)(hi - b);
}

void cmx_area_fence(struct cmx_area *a, uint64_t id)
{
	uint64_t *w = (uint64_t *)(a->base + a->hdr.fence_at) + id % a->hdr.fence_n;

	__atomic_store_n(w, id, __ATOMIC_RELEASE);
}

void cmx_area_fence_watch(struct cmx_area *a, uint64_t id, int on)
{
	uint64_t *w = (uint64_t *)(a->base + a->hdr.fence_at) + id % a->hdr.fence_n;
	uint64_t mark = id | CMX_AREA_FENCE_WATCHED;

	if (on)
		__atomic_store_n(w, mark, __ATOMIC_RELEASE);
	else /* unless another event's news took the word since */
		__atomic_compare_exchange_n(w, &mark, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}
