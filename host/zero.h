// SPDX-License-Identifier: MIT
// Fresh device memory is zeroed on the device before its tenant can read it.
#ifndef CMX_HOST_ZERO_H
#define CMX_HOST_ZERO_H

#include <CL/cl.h>
#include <stdint.h>

#include "object.h"

struct cmx_server;

struct cmx_call;

/*
 * A driver hands out memory as it finds it: PoCL's fresh buffers held
 * another tenant's freed bytes. A buffer or image created without host data
 * is filled with zeros on a queue of the daemon's own in its context, as
 * soon as it is made; every later command of the tenant, on any queue of
 * that context, is ordered after the fills (cmx_zero_order()). Loop thread,
 * except cmx_zero_release(), which the reaper may run.
 */

/* The state of a new context object (its ext): NULL when out of memory. */
void *cmx_zero_context(const struct cmx_server *srv, cl_context ctx);
/* The state of a new queue object of the context object ctx (its ext);
 * NULL when out of memory. */
void *cmx_zero_queue(struct cmx_obj *ctx);
/* Frees a context's or queue's ext (host/release.c). Any thread. */
void cmx_zero_release(struct cmx_obj *o);

/* Fills the new buffer m of the context object ctx (size bytes), or the
 * new image m of that extent (cmx_cl_image_extent()), with zeros. 0, or
 * the cl error of a fill that could not be enqueued. */
int cmx_zero_buffer(struct cmx_obj *ctx, cl_mem m, uint64_t size);
int cmx_zero_image(struct cmx_obj *ctx, cl_mem m, const uint64_t extent[3]);

/*
 * A driver that runs its queues only inside a flush or a wait (Oclgrind)
 * takes no fill beside a running wait: its memory is created from host
 * zeros instead (CL_MEM_COPY_HOST_PTR), which needs no queue. *zeros: the
 * zeros for size bytes (zero pages, mapped read-only: they cost no
 * memory), or NULL where fills zero the memory instead (or size is 0: the
 * driver refuses it). 0, or CL_OUT_OF_HOST_MEMORY. Any thread.
 */
int cmx_zero_host(const struct cmx_server *srv, uint64_t size, const void **zeros);
void cmx_zero_host_put(const void *zeros, uint64_t size);

/* Orders a command (the call's first argument its queue) after every fill
 * of the queue's context so far: a barrier on that queue where one is still
 * running. 0 or a cl error, before the handler runs (host/call.c). */
int cmx_zero_order(struct cmx_call *c);
/* Whether the fills of the queue object q's context have all completed:
 * its memory may be touched from the host at once (host/land.c). */
int cmx_zero_settled(struct cmx_obj *q);

#endif
