// SPDX-License-Identifier: MIT
// A small cache of large staging buffers. Each buffer carries its capacity
// in a header; buffers above a threshold are kept (up to a total) for the
// next transfer of a similar size instead of going back to the kernel.
#include "staging.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "reaper.h"

#include "area.h"

#define KEEP_MIN (1u << 20)	  /* smaller ones: plain malloc/free */
#define KEEP_TOTAL (512ull << 20) /* cached bytes, all buffers together */
#define KEEP_COUNT CMX_STAGING_KEEP
/* Unmapped this much at a time: munmap holds the process's mmap lock, which
 * the loop needs to map the next buffer. */
#define UNMAP_STEP (4ull << 20)

struct cmx_staging_buf {
	struct cmx_staging *home; /* the cache it goes back to */
	uint64_t cap;
	uint64_t mapped; /* bytes mapped by buf_alloc() itself (large buffers), else 0 */
	unsigned char data[];
};

/* Large buffers are mapped here, not by malloc, so that the reaper thread
 * can give them back a piece at a time (see UNMAP_STEP). */
static struct cmx_staging_buf *buf_alloc(struct cmx_staging *home, uint64_t size)
{
	struct cmx_staging_buf *s;
	uint64_t len = sizeof(*s) + (size ? size : 1);

	if (size < CMX_REAP_MIN) {
		s = malloc(len);
		if (s)
			s->mapped = 0;
	} else {
		s = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (s == MAP_FAILED)
			return NULL;
		s->mapped = len;
	}
	if (s) {
		s->home = home;
		s->cap = size;
	}
	return s;
}

static void buf_unmap(void *ctx, void *arg)
{
	struct cmx_staging_buf *s = arg;
	uint64_t len = s->mapped;

	for (uint64_t off = 0; off < len; off += UNMAP_STEP)
		munmap((char *)s + off, len - off < UNMAP_STEP ? len - off : UNMAP_STEP);
}

static void buf_free(struct cmx_staging_buf *s)
{
	if (!s)
		return;
	if (!s->mapped)
		free(s);
	else
		cmx_reap(buf_unmap, NULL, s);
}

void cmx_staging_init(struct cmx_staging *st)
{
	*st = (struct cmx_staging){.cached = 0};
	pthread_mutex_init(&st->lock, NULL);
}

void *cmx_staging_get(struct cmx_staging *st, uint64_t size)
{
	struct cmx_staging_buf **cache = st->cache, *best = NULL;
	int at = -1;

	if (size >= KEEP_MIN) {
		pthread_mutex_lock(&st->lock);
		/* The smallest cached buffer that fits, and not absurdly larger. */
		for (int i = 0; i < KEEP_COUNT; i++)
			if (cache[i] && cache[i]->cap >= size && cache[i]->cap <= 4 * size &&
			    (!best || cache[i]->cap < best->cap)) {
				best = cache[i];
				at = i;
			}
		if (best) {
			cache[at] = NULL;
			st->cached -= best->cap;
		}
		pthread_mutex_unlock(&st->lock);
		if (best)
			return best->data;
	}
	best = buf_alloc(st, size);
	return best ? best->data : NULL;
}

void cmx_staging_put(void *p)
{
	struct cmx_staging_buf *s, *evict = NULL, **cache;
	struct cmx_staging *st;

	/* A payload in a session's shared area is not ours to keep: the
	 * guest gets the block back. */
	if (!p || cmx_area_release(p))
		return;
	s = (struct cmx_staging_buf *)((unsigned char *)p - offsetof(struct cmx_staging_buf, data));
	st = s->home;
	cache = st->cache;
	if (s->cap >= KEEP_MIN && s->cap <= KEEP_TOTAL) {
		pthread_mutex_lock(&st->lock);
		int slot = -1;
		for (int i = 0; i < KEEP_COUNT && slot < 0; i++)
			if (!cache[i])
				slot = i;
		/* Full: replace the smallest if this one is larger. */
		if (slot < 0) {
			slot = 0;
			for (int i = 1; i < KEEP_COUNT; i++)
				if (cache[i]->cap < cache[slot]->cap)
					slot = i;
			if (cache[slot]->cap >= s->cap)
				slot = -1;
		}
		if (slot >= 0 &&
		    st->cached - (cache[slot] ? cache[slot]->cap : 0) + s->cap <= KEEP_TOTAL) {
			evict = cache[slot];
			if (evict)
				st->cached -= evict->cap;
			cache[slot] = s;
			st->cached += s->cap;
			s = NULL;
		}
		pthread_mutex_unlock(&st->lock);
	}
	buf_free(s);
	buf_free(evict);
}
