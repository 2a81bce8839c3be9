// SPDX-License-Identifier: MIT
// Large socket transfers on a CPU device: a write's payload received straight
// into the native buffer, a read's data sent straight from it (both mapped).
#ifndef CMX_HOST_LAND_H
#define CMX_HOST_LAND_H

#include <CL/cl.h>
#include <stdint.h>

#include "wire.h"

struct cmx_call;
struct cmx_conn;
struct cmx_land;

/* Smaller transfers go through staging: a map and an unmap cost tens of
 * microseconds, a copy of 1 MiB less than a hundred. */
#define CMX_LAND_MIN (1u << 20)

/* At the header of a WriteBuffer, sync or async, whose payload (h->bulk
 * bytes) is still to come on c: a landing (the region of the native buffer
 * mapped for writing) when the payload may be received straight into it,
 * else NULL (staging). Only when nothing on the queue can still touch the
 * buffer: every earlier command done, or only the unmap of the previous
 * landing. */
struct cmx_land *cmx_land_open(struct cmx_conn *c, const struct cmx_hdr *h, const uint8_t *args);
/* Where the payload goes. */
void *cmx_land_ptr(const struct cmx_land *l);
/* A payload no handler took (the connection ended mid-payload, the call
 * failed its checks): unmaps it and frees l. */
void cmx_land_abort(struct cmx_land *l);
/* The handler's side: the landing delivered with this call (its bulk is
 * NULL), or NULL. */
struct cmx_land *cmx_land_take(struct cmx_call *c);
/* Ends a write that landed: the native unmap, its event in *ev. Checks the
 * call's buffer and range against the landing's. Frees l. */
cl_int cmx_land_finish(struct cmx_land *l, cl_command_queue q, cl_mem m, uint64_t off,
		       uint64_t size, cl_uint n, const cl_event *wait, cl_event *ev);

/* A read of [off, off + size) of m sent straight from the native buffer:
 * maps it (*map_ev) and enqueues its unmap (*done_ev), which waits until
 * the data has left (the reply's payload is freed: c->rbulk_free), so later
 * commands on the queue cannot change it under the send. Sets c->rbulk,
 * rbulk_len and rbulk_free. 0, or -1: nothing enqueued, use staging. */
int cmx_land_read(struct cmx_call *c, cl_command_queue q, cl_mem m, uint64_t off, uint64_t size,
		  cl_uint n, const cl_event *wait, cl_event *map_ev, cl_event *done_ev);

#endif
