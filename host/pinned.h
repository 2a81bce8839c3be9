// SPDX-License-Identifier: MIT
// Pinned staging for a GPU's transfers, and the threads that copy between it and the shared area.
#ifndef CMX_HOST_PINNED_H
#define CMX_HOST_PINNED_H

#include <CL/cl.h>
#include <stdint.h>

/* The size of one staging slot: the guest's chunk (guest/mem.c CHUNK). */
#define CMX_PINNED_SLOT (4u << 20)

struct cmx_tuning;

/* Starts the pool for dev, in the background: a driver that pins the
 * memory of a CL_MEM_ALLOC_HOST_PTR buffer (a GPU's) DMAs from it several
 * times faster than from pageable memory. Off for a CPU device, unless
 * the pinned key is on (tests); off turns it off; transfers from
 * pinned-min bytes take it. 0 or -errno. */
int cmx_pinned_start(cl_device_id dev, const struct cmx_tuning *tune);
/* Waits for the copies under way, frees the pool. */
void cmx_pinned_stop(void);
/* A free slot for a transfer of size bytes, or NULL (no pool, not ready
 * yet, too small or too large a transfer, every slot in use): the caller
 * takes the pageable path then. Thread-safe. */
void *cmx_pinned_get(uint64_t size);
/* Gives a slot back. Thread-safe (driver callbacks call it). */
void cmx_pinned_put(void *slot);
/* Copies n bytes on the pool's threads, split among them; done(arg) runs
 * on the thread that finishes last (in the caller when memory is short). */
void cmx_pinned_copy(void *dst, const void *src, uint64_t n, void (*done)(void *arg), void *arg);

#endif
