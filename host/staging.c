// SPDX-License-Identifier: MIT
// A small cache of large staging buffers. Each buffer carries its capacity
// in a header; buffers above a threshold are kept (up to a total) for the
// next transfer of a similar size instead of going back to the kernel.
#include "staging.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

#include "area.h"

#define KEEP_MIN (1u << 20)	  /* smaller ones: plain malloc/free */
#define KEEP_TOTAL (512ull << 20) /* cached bytes, all buffers together */
#define KEEP_COUNT 8

struct staging {
	uint64_t cap;
	uint64_t pad; /* keeps the payload 16-byte aligned */
	unsigned char data[];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct staging *cache[KEEP_COUNT];
static uint64_t cached;

void *cmx_staging_get(uint64_t size)
{
	struct staging *best = NULL;
	int at = -1;

	if (size >= KEEP_MIN) {
		pthread_mutex_lock(&lock);
		/* The smallest cached buffer that fits, and not absurdly larger. */
		for (int i = 0; i < KEEP_COUNT; i++)
			if (cache[i] && cache[i]->cap >= size && cache[i]->cap <= 4 * size &&
			    (!best || cache[i]->cap < best->cap)) {
				best = cache[i];
				at = i;
			}
		if (best) {
			cache[at] = NULL;
			cached -= best->cap;
		}
		pthread_mutex_unlock(&lock);
		if (best)
			return best->data;
	}
	best = malloc(sizeof(*best) + (size ? size : 1));
	if (!best)
		return NULL;
	best->cap = size;
	return best->data;
}

void cmx_staging_put(void *p)
{
	struct staging *s, *evict = NULL;

	/* A payload in a session's shared area is not ours to keep: the
	 * guest gets the block back. */
	if (!p || cmx_area_release(p))
		return;
	s = (struct staging *)((unsigned char *)p - offsetof(struct staging, data));
	if (s->cap >= KEEP_MIN && s->cap <= KEEP_TOTAL) {
		pthread_mutex_lock(&lock);
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
		if (slot >= 0 && cached - (cache[slot] ? cache[slot]->cap : 0) + s->cap <= KEEP_TOTAL) {
			evict = cache[slot];
			if (evict)
				cached -= evict->cap;
			cache[slot] = s;
			cached += s->cap;
			s = NULL;
		}
		pthread_mutex_unlock(&lock);
	}
	free(s);
	free(evict);
}
