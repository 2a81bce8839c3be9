// SPDX-License-Identifier: MIT
// Guest area allocator. Blocks are carved in order from a ring over the data
// region; each starts with a 64-byte header:
//   +0  u64 total   block bytes, header included (guest only)
//   +8  u64 busy    1 while the guest itself still needs it (guest only)
//   +56 u64 done    0 when handed out; the host stores 1 when finished
// The tail moves past blocks whose done is 1 and busy is 0, so blocks come
// back in the order they were handed out.
#define _GNU_SOURCE
#include "area.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define BLK  CMX_AREA_BLK
#define PAGE 4096ull

/* A heap block, kept in the guest's own memory: [off, off + total), its
 * payload at off + PAGE, the block header just before the payload. */
struct cmx_hblk {
	uint64_t off, total;
	int freed; /* the guest let go; reusable once done is 1 as well */
	struct cmx_hblk *next;
};

struct blk {
	uint64_t total;
	uint64_t busy;
	uint64_t pad[5];
	uint64_t done;
};
_Static_assert(sizeof(struct blk) == CMX_AREA_BLK, "block header");
_Static_assert(offsetof(struct blk, done) == CMX_AREA_BLK - CMX_AREA_DONE_AT, "done word");

int cmx_garea_bind(struct cmx_garea *a, void *p, uint64_t size)
{
	struct cmx_area_hdr h;

	if (size < sizeof(h))
		return -EPROTO;
	memcpy(&h, p, sizeof(h));
	/* The host is trusted, but a mistaken layout must not send us out of
	 * the mapping. */
	if (h.magic != CMX_AREA_MAGIC || h.version != CMX_AREA_VERSION || h.size > size ||
	    h.data_off % BLK || h.data_len % BLK || h.data_off > h.size ||
	    h.data_len > h.size - h.data_off || h.data_len < 2 * BLK)
		return -EPROTO;
	/* Fences somewhere other than the rest of the header's page are
	 * not used. */
	if (h.fence_n && (h.fence_at < sizeof(h) || h.fence_at % 8 || h.size < PAGE ||
			  h.fence_at + 8ull * h.fence_n > PAGE))
		h.fence_n = 0;
	a->base = p;
	a->size = h.size;
	a->hdr = h;
	a->start = a->head = a->tail = h.data_off;
	a->end = h.data_off + h.data_len;
	a->used = 0;
	a->mapped = 0;
	pthread_mutex_init(&a->lock, NULL);
	return 0;
}

int cmx_garea_map(struct cmx_garea *a, int fd, uint64_t size)
{
	void *p;
	int e;

	if (size < sizeof(struct cmx_area_hdr) || size > (1ull << 40))
		return -EPROTO;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	e = cmx_garea_bind(a, p, size);
	if (e || a->size != size) {
		munmap(p, size);
		a->base = NULL;
		return e ? e : -EPROTO;
	}
	a->mapped = 1;
	return 0;
}

void cmx_garea_unmap(struct cmx_garea *a)
{
	if (!a->base)
		return;
	while (a->heap) {
		struct cmx_hblk *b = a->heap;

		a->heap = b->next;
		free(b);
	}
	if (a->mapped)
		munmap(a->base, a->size);
	pthread_mutex_destroy(&a->lock);
	a->base = NULL;
}

static struct blk *at(struct cmx_garea *a, uint64_t off)
{
	return (struct blk *)(a->base + off);
}

/* Moves the tail past every block nobody needs any more. */
static void reclaim_locked(struct cmx_garea *a)
{
	while (a->used) {
		struct blk *b = at(a, a->tail);

		/* Acquire pairs with the host's release store of done in
		 * cmx_area_release(): its accesses to the payload are over. */
		if (!__atomic_load_n(&b->done, __ATOMIC_ACQUIRE) ||
		    __atomic_load_n(&b->busy, __ATOMIC_ACQUIRE))
			break;
		a->used -= b->total;
		a->tail += b->total;
		if (a->tail == a->end)
			a->tail = a->start;
	}
	if (!a->used)
		a->head = a->tail = a->start; /* reuse the warm pages at the start */
}

static uint64_t carve(struct cmx_garea *a, uint64_t need, int busy)
{
	struct blk *b = at(a, a->head);
	uint64_t off = a->head + BLK;

	b->total = need;
	b->busy = (uint64_t)busy;
	b->done = 0;
	a->head += need;
	a->used += need;
	if (a->head == a->end)
		a->head = a->start;
	return off;
}

uint64_t cmx_garea_alloc(struct cmx_garea *a, uint64_t len, int busy)
{
	uint64_t need, off = 0;

	if (!a->base || len > a->end - a->start)
		return 0;
	need = BLK + (len + BLK - 1) / BLK * BLK;
	pthread_mutex_lock(&a->lock);
	reclaim_locked(a);
	if (a->used == a->end - a->start)
		goto out; /* full (head == tail) */
	if (a->head >= a->tail && a->used) {
		/* Live blocks in [tail, head): room at the end, else at the
		 * start behind a pad block that fills the end. */
		if (a->end - a->head >= need) {
			off = carve(a, need, busy);
		} else if (a->tail - a->start >= need) {
			uint64_t pad = a->end - a->head;
			off = carve(a, pad, 0) - BLK;
			at(a, off)->done = 1;
			off = carve(a, need, busy);
		}
	} else if (!a->used) {
		if (a->end - a->head >= need)
			off = carve(a, need, busy);
	} else if (a->tail - a->head >= need) {
		off = carve(a, need, busy); /* wrapped: room in [head, tail) */
	}
out:
	pthread_mutex_unlock(&a->lock);
	return off;
}

void cmx_garea_free(struct cmx_garea *a, uint64_t off)
{
	/* Release pairs with the acquire in reclaim_locked(): the guest's copy
	 * out of the block is over before it can be handed out again. */
	__atomic_store_n(&at(a, off - BLK)->busy, 0, __ATOMIC_RELEASE);
}

int cmx_garea_ring(const struct cmx_garea *a, int i, void **mem, uint64_t *len)
{
	uint64_t off = a->hdr.ring_off[i], n = a->hdr.ring_len[i];

	if (!a->base || !off || (off & 63) || off > a->size || n > a->size - off)
		return -ENOENT;
	*mem = a->base + off;
	*len = n;
	return 0;
}

int cmx_garea_valid(const struct cmx_garea *a, uint64_t off, uint64_t len)
{
	return a->base && off >= a->start + BLK && off < a->end && len <= a->end - off;
}

void cmx_garea_split(struct cmx_garea *a, uint64_t ring_len)
{
	uint64_t cut = a->start + (ring_len + PAGE - 1) / PAGE * PAGE;

	/* The ring allocator keeps at least two blocks' worth. */
	if (!a->base || ring_len < 2 * BLK || cut >= a->end || a->end - cut < 2 * PAGE)
		return;
	a->heap_start = cut;
	a->heap_end = a->end;
	a->end = cut;
}

static uint64_t *done_word(struct cmx_garea *a, uint64_t payload)
{
	return (uint64_t *)(a->base + payload - CMX_AREA_DONE_AT);
}

/* Forgets blocks that both sides are done with. */
static void heap_reclaim_locked(struct cmx_garea *a)
{
	struct cmx_hblk **pp = &a->heap;

	while (*pp) {
		struct cmx_hblk *b = *pp;

		/* Acquire pairs with the host's release store of done when the
		 * native buffer is destroyed: no command touches it any more. */
		if (b->freed && __atomic_load_n(done_word(a, b->off + PAGE), __ATOMIC_ACQUIRE)) {
			*pp = b->next;
			free(b);
		} else {
			pp = &b->next;
		}
	}
}

uint64_t cmx_garea_heap_alloc(struct cmx_garea *a, uint64_t len)
{
	struct cmx_hblk **pp, *b;
	uint64_t need, at;

	if (!a->base || !a->heap_end || !len || len > a->heap_end - a->heap_start)
		return 0;
	need = PAGE + (len + PAGE - 1) / PAGE * PAGE;
	b = malloc(sizeof(*b));
	if (!b)
		return 0;
	pthread_mutex_lock(&a->lock);
	heap_reclaim_locked(a);
	/* First fit: the lowest pages have been touched already. */
	at = a->heap_start;
	for (pp = &a->heap; *pp; pp = &(*pp)->next) {
		if ((*pp)->off - at >= need)
			break;
		at = (*pp)->off + (*pp)->total;
	}
	if (!*pp && a->heap_end - at < need) {
		pthread_mutex_unlock(&a->lock);
		free(b);
		return 0;
	}
	b->off = at;
	b->total = need;
	b->freed = 0;
	b->next = *pp;
	*pp = b;
	*done_word(a, at + PAGE) = 0;
	pthread_mutex_unlock(&a->lock);
	return at + PAGE;
}

void cmx_garea_heap_free(struct cmx_garea *a, uint64_t off, int sent)
{
	pthread_mutex_lock(&a->lock);
	for (struct cmx_hblk *b = a->heap; b; b = b->next)
		if (b->off + PAGE == off) {
			b->freed = 1;
			if (!sent)
				*done_word(a, off) = 1;
			break;
		}
	pthread_mutex_unlock(&a->lock);
}

uint64_t cmx_garea_heap_pending(struct cmx_garea *a)
{
	uint64_t n = 0;

	pthread_mutex_lock(&a->lock);
	heap_reclaim_locked(a);
	for (struct cmx_hblk *b = a->heap; b; b = b->next)
		if (b->freed)
			n += b->total;
	pthread_mutex_unlock(&a->lock);
	return n;
}

int cmx_garea_move(struct cmx_garea *a, int old, int fd, uint8_t **rings)
{
	const struct cmx_area_hdr *h;
	uint64_t d = a->hdr.data_off;
	uint8_t *p;
	off_t at;

	*rings = NULL;
	if (!a->base || !a->mapped)
		return -EINVAL;
	p = mmap(NULL, a->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	h = (const struct cmx_area_hdr *)p;
	if (h->magic != a->hdr.magic || h->size != a->hdr.size || h->data_off != a->hdr.data_off ||
	    h->data_len != a->hdr.data_len ||
	    memcmp(h->ring_off, a->hdr.ring_off, sizeof(h->ring_off)) ||
	    h->fence_at != a->hdr.fence_at || h->fence_n != a->hdr.fence_n) {
		munmap(p, a->size);
		return -EPROTO;
	}
	/* Only what was written: an untouched page reads as zero on both
	 * sides, and copying it would allocate it. */
	for (at = (off_t)a->hdr.data_off; at < (off_t)a->size;) {
		off_t d = lseek(old, at, SEEK_DATA), e;
		if (d < 0 || d >= (off_t)a->size)
			break;
		e = lseek(old, d, SEEK_HOLE);
		if (e < 0 || e > (off_t)a->size)
			e = (off_t)a->size;
		memcpy(p + d, a->base + d, (size_t)(e - d));
		at = e;
	}
	if (a->hdr.fence_n)
		memcpy(p + a->hdr.fence_at, a->base + a->hdr.fence_at, 8ull * a->hdr.fence_n);
	if (!a->hdr.ring_len[0]) {
		if (mremap(p, a->size, a->size, MREMAP_MAYMOVE | MREMAP_FIXED, a->base) ==
		    MAP_FAILED) {
			int e = -errno;
			munmap(p, a->size);
			return e;
		}
	} else {
		/* The header's page and the data region move; the rings
		 * (between them) stay at p, the rest of p a hole. */
		if (d % PAGE || d < PAGE ||
		    mremap(p, PAGE, PAGE, MREMAP_MAYMOVE | MREMAP_FIXED, a->base) == MAP_FAILED) {
			int e = d % PAGE || d < PAGE ? -EPROTO : -errno;
			munmap(p, a->size);
			return e;
		}
		if (mremap(p + d, a->size - d, a->size - d, MREMAP_MAYMOVE | MREMAP_FIXED,
			   a->base + d) == MAP_FAILED) {
			/* The new header's page is in place: nothing to go
			 * back to; the session does not resume. */
			int e = -errno;
			munmap(p + PAGE, a->size - PAGE);
			return e;
		}
		*rings = p;
	}
	pthread_mutex_lock(&a->lock);
	/* The new daemon made again the buffers it had (each done word 0
	 * until it lets go); the old one may have let go of them at exit. */
	for (struct cmx_hblk *b = a->heap; b; b = b->next)
		if (!b->freed)
			*done_word(a, b->off + PAGE) = 0;
	pthread_mutex_unlock(&a->lock);
	return 0;
}
