// SPDX-License-Identifier: MIT
// Staging buffers for payloads, reused so large transfers do not pay for
// fresh pages (page faults) on every call.
#ifndef CMX_HOST_STAGING_H
#define CMX_HOST_STAGING_H

#include <pthread.h>
#include <stdint.h>

#define CMX_STAGING_KEEP 8

struct cmx_staging_buf;

/* The large buffers kept for the next transfer of a similar size (one per
 * server: struct cmx_server's staging). */
struct cmx_staging {
	pthread_mutex_t lock;
	struct cmx_staging_buf *cache[CMX_STAGING_KEEP];
	uint64_t cached; /* bytes, all buffers together */
};

/* An empty cache. */
void cmx_staging_init(struct cmx_staging *st);
/* At least size bytes, or NULL; it goes back to st. Thread-safe. */
void *cmx_staging_get(struct cmx_staging *st, uint64_t size);
/* Returns a buffer from cmx_staging_get() to its cache (each buffer knows
 * its own), or a block of a session's shared area (host/area.h) to its
 * guest; NULL is ignored. Thread-safe: driver callbacks return staging
 * when a native transfer completes, and a reply's payload is freed with
 * only its pointer. */
void cmx_staging_put(void *p);

#endif
