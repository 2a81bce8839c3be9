// SPDX-License-Identifier: MIT
// Buffer reads and writes: the ways their bytes travel (the call channel in
// chunks, the bulk lanes, the shared area) and the entry points.
#include <stdlib.h>

#include "copy.h"
#include "entry.h"
#include "icd.h"
#include "lane.h"
#include "mem.h"

/*
 * A large blocking transfer on an in-order queue goes in chunks, so this
 * side's copy of one chunk (into the shared area, or into the socket)
 * overlaps the daemon's copy of the one before (64 MiB over TCP: writes at
 * 0.16-0.21 of native in one piece, 0.32-0.37 in chunks). The queue keeps
 * them in order; only the first carries the wait list and only the last the
 * application's event (whose profiling times therefore cover the last chunk
 * only).
 */
#define CHUNK (4u << 20)

static size_t chunks_before_last(cl_command_queue q, size_t size)
{
	if (size < 2 * CHUNK || (q->props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE))
		return 0;
	return (size - 1) / CHUNK;
}

/* ---- large blocking transfers over bulk lanes (tcp) ---- */

/*
 * One loopback TCP stream is bounded by its receiver's copy; the session's
 * lanes (guest/lane.c) carry a large blocking transfer as one piece each,
 * copied by as many threads on both sides. A sync call opens the transfer
 * (the daemon maps the region), the pieces follow on the lanes, and a sync
 * call ends it (a write: the unmap, once every byte is in; a read replies
 * once its pieces are queued). -1: the lanes are not for this one (none,
 * too small, another thread's transfer has them): take the call channel.
 */
static struct cmx_lanes *lanes_for(uint64_t size, uint64_t *transfer)
{
	struct cmx_lanes *l = size >= CMX_LANES_MIN ? cmx_session_lanes(cmx_icd.s) : NULL;

	return l && cmx_lanes_take(l, transfer) ? l : NULL;
}

static cl_int lanes_write(const struct cmx_WriteBuffer_in *in, const void *ptr)
{
	struct cmx_WriteLanes_in wi = { .queue = in->queue, .mem = in->mem, .offset = in->offset,
					.size = in->size, .wait = in->wait, .event = in->event };
	struct cmx_WriteLanesEnd_in ei = { .queue = in->queue };
	struct cmx_WriteLanes_out wo;
	struct cmx_WriteLanesEnd_out eo;
	struct cmx_lanes *l = lanes_for(in->size, &wi.transfer);
	struct cmx_reply r;
	cl_int e;
	int err;

	if (!l)
		return -1;
	wi.lanes = cmx_lanes_count(l);
	ei.transfer = wi.transfer;
	e = cmx_reply_status(cmx_rpc_WriteLanes(cmx_icd.s, &wi, &wo, &r), &r);
	if (!e && (err = cmx_lanes_send(l, wi.transfer, ptr, in->size))) {
		/* The daemon holds a transfer that can never complete. */
		cmx_session_fail(cmx_icd.s, err);
		e = cmx_transport_err(err);
	}
	if (!e)
		e = cmx_reply_status(cmx_rpc_WriteLanesEnd(cmx_icd.s, &ei, &eo, &r), &r);
	cmx_lanes_give(l);
	return e;
}

static cl_int lanes_read(const struct cmx_ReadBuffer_in *in, void *dst)
{
	struct cmx_ReadLanes_in ri = { .queue = in->queue, .mem = in->mem, .offset = in->offset,
				       .size = in->size, .wait = in->wait, .event = in->event };
	struct cmx_ReadLanes_out ro;
	struct cmx_lanes *l = lanes_for(in->size, &ri.transfer);
	struct cmx_reply r;
	cl_int e;
	int err;

	if (!l)
		return -1;
	ri.lanes = cmx_lanes_count(l);
	/* The pieces are queued when the reply comes (a refused read sends
	 * none); the lanes' sockets hold what arrives before they listen. */
	e = cmx_reply_status(cmx_rpc_ReadLanes(cmx_icd.s, &ri, &ro, &r), &r);
	if (e) {
		cmx_lanes_give(l);
		return e;
	}
	cmx_lanes_recv_start(l, ri.transfer, dst, in->size);
	err = cmx_lanes_wait(l);
	if (err) {
		cmx_session_fail(cmx_icd.s, err);
		e = cmx_transport_err(err);
	}
	cmx_lanes_give(l);
	return e;
}

/*
 * A blocking transfer of an area buffer on an in-order queue copies once,
 * as native does: a blocking native map waits for the transfer's turn in
 * the queue, this thread copies straight between the application's memory
 * and the buffer's storage, and the unmap, which carries the event, lets
 * the queue go on. That costs two native commands (about 95 us on PoCL,
 * the map's round trip and the unmap the next command waits for), which
 * the copy saved pays back from about 2 MiB (PoCL, 2 cores); smaller
 * transfers keep the one-message path.
 */
#define AREA_DIRECT (2u << 20)

static int area_direct(cl_command_queue q, cl_mem m, size_t size)
{
	return m->area_off && size >= AREA_DIRECT &&
	       !(q->props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
}

static cl_int area_transfer(cl_command_queue q, cl_mem m, size_t off, size_t size, void *ptr,
			    int write, struct cmx_cmd *c)
{
	struct cmx_cmd first = *c, last = *c;
	cl_int e;

	/* The map carries the wait list, the unmap the event. */
	first.ev_id = 0;
	last.w.n = 0;
	e = cmx_mem_area_map(q, m, CL_TRUE, write ? CL_MAP_WRITE_INVALIDATE_REGION : CL_MAP_READ,
			     off, size, &first);
	if (e)
		return e;
	if (write)
		cmx_copy(cmx_mem_area_at(m, off), ptr, size);
	else
		cmx_copy(ptr, cmx_mem_area_at(m, off), size);
	return cmx_mem_area_unmap(q, m, off, &last);
}

/*
 * A non-blocking transfer of such a buffer copies once as well, when its
 * turn comes: a non-blocking native map, whose completion the notification
 * thread answers by copying between the application's memory and the
 * storage and opening a user event that holds the unmap back; the unmap
 * carries the application's event. The application keeps ptr until that
 * event, as it must for any non-blocking transfer.
 */
struct later_copy {
	void *dst;
	const void *src;
	size_t size;
	cl_event gate;
};

static void CL_CALLBACK later_copy(cl_event mapped, cl_int status, void *arg)
{
	struct later_copy *w = arg;

	if (status >= 0)
		cmx_copy(w->dst, w->src, w->size);
	cmx_clSetUserEventStatus(w->gate, status >= 0 ? CL_COMPLETE : status);
	cmx_clReleaseEvent(w->gate);
	free(w);
}

static cl_int area_later(cl_command_queue q, cl_mem m, size_t off, size_t size, void *ptr,
			 int write, cl_uint n, const cl_event *list, cl_event *event)
{
	cl_map_flags flags = write ? CL_MAP_WRITE_INVALIDATE_REGION : CL_MAP_READ;
	struct later_copy *w = malloc(sizeof(*w));
	char *at = cmx_mem_area_at(m, off);
	cl_event mapped = NULL;
	cl_int e = CL_OUT_OF_HOST_MEMORY;
	struct cmx_cmd c;

	if (!w)
		return e;
	w->size = size;
	w->dst = write ? at : ptr;
	w->src = write ? ptr : at;
	w->gate = cmx_clCreateUserEvent(q->ctx, &e);
	if (e)
		goto fail;
	/* The native map and unmap clEnqueueMapBuffer and
	 * clEnqueueUnmapMemObject send for an area buffer; the map is not
	 * one of the application's, so it is on no list of the buffer. */
	e = cmx_cmd_begin(&c, q, n, list, &mapped, CL_COMMAND_MAP_BUFFER);
	if (!e)
		e = cmx_cmd_end(&c, cmx_mem_area_map(q, m, CL_FALSE, flags, off, size, &c));
	if (e)
		goto fail_gate;
	e = cmx_cmd_begin(&c, q, 1, &w->gate, event,
			  write ? CL_COMMAND_WRITE_BUFFER : CL_COMMAND_READ_BUFFER);
	if (!e)
		e = cmx_cmd_end(&c, cmx_mem_area_unmap(q, m, off, &c));
	if (e) {
		cmx_clReleaseEvent(mapped);
		goto fail_gate;
	}
	if (cmx_clSetEventCallback(mapped, CL_COMPLETE, later_copy, w)) {
		/* No callback to come: do its work here. */
		later_copy(mapped, cmx_clWaitForEvents(1, &mapped) ? -1 : CL_COMPLETE, w);
	}
	cmx_clReleaseEvent(mapped);
	return CL_SUCCESS;

fail_gate:
	cmx_clSetUserEventStatus(w->gate, CL_OUT_OF_RESOURCES);
	cmx_clReleaseEvent(w->gate);
fail:
	free(w);
	return e;
}

/*
 * The one choice of how a transfer's bytes travel, for reads and writes
 * alike, made from the queue, the buffer, blocking and size only.
 */
enum transfer_way {
	WAY_SEND,	/* non-blocking: one message; a read's data lands later */
	WAY_CALL,	/* blocking: the call channel, a large one in chunks */
	WAY_LANES,	/* blocking and large: the bulk lanes if free, else WAY_CALL */
	WAY_AREA_NOW,	/* blocking, area buffer: native map, one copy here, unmap */
	WAY_AREA_LATER, /* non-blocking, area buffer: the copy once the map is done */
};

static enum transfer_way transfer_way(cl_command_queue q, cl_mem m, cl_bool blocking,
				      size_t size)
{
	if (area_direct(q, m, size))
		return blocking ? WAY_AREA_NOW : WAY_AREA_LATER;
	if (!blocking)
		return WAY_SEND;
	return size >= CMX_LANES_MIN ? WAY_LANES : WAY_CALL;
}

/* A blocking read over the call channel. The leading chunks land as
 * non-blocking reads (their data on the notification thread, waited for by
 * blocking_done()). */
static cl_int read_call(cl_command_queue q, struct cmx_ReadBuffer_in *in, void *dst)
{
	struct cmx_ReadBuffer_out out;
	struct cmx_reply r;
	struct cmx_pending_read *p;
	size_t k, nk = chunks_before_last(q, in->size);

	for (k = 0; k < nk; k++) {
		struct cmx_ReadBuffer_in ci = *in;

		ci.offset = in->offset + k * CHUNK;
		ci.size = CHUNK;
		ci.event.id = 0;
		if (k)
			ci.wait.n = 0;
		p = cmx_pending_new(q, NULL, (char *)dst + k * CHUNK, CHUNK);
		if (!p)
			return CL_OUT_OF_HOST_MEMORY;
		ci.tag = (uintptr_t)p;
		if (cmx_pending_send(p, &cmx_desc_ReadBuffer_in, &ci, 1))
			return CL_OUT_OF_RESOURCES;
	}
	if (nk) {
		in->offset += nk * CHUNK;
		in->size -= nk * CHUNK;
		in->wait.n = 0;
		dst = (char *)dst + nk * CHUNK;
	}
	return cmx_reply_status(cmx_rpc_ReadBuffer(cmx_icd.s, in, &out, &r, dst, in->size), &r);
}

/* A blocking write over the call channel, the leading chunks sent ahead. */
static cl_int write_call(cl_command_queue q, struct cmx_WriteBuffer_in *in, const void *ptr)
{
	struct cmx_WriteBuffer_out out;
	struct cmx_reply r;
	size_t k, nk = chunks_before_last(q, in->size);
	cl_int e = CL_SUCCESS;

	for (k = 0; k < nk && !e; k++) {
		struct cmx_WriteBuffer_in ci = *in;

		ci.offset = in->offset + k * CHUNK;
		ci.size = CHUNK;
		ci.event.id = 0;
		if (k)
			ci.wait.n = 0;
		e = CMX_SEND(WriteBuffer, &ci, (const char *)ptr + k * CHUNK, CHUNK);
	}
	if (nk) {
		in->offset += nk * CHUNK;
		in->size -= nk * CHUNK;
		in->wait.n = 0;
		ptr = (const char *)ptr + nk * CHUNK;
	}
	if (!e)
		e = cmx_reply_status(cmx_rpc_WriteBuffer(cmx_icd.s, in, ptr, in->size, &out, &r),
				     &r);
	return e;
}

/* A read of a command that passed its checks, the way `w` says (a
 * WAY_AREA_LATER read that gets here is sent as WAY_SEND). */
static cl_int read_by(enum transfer_way w, cl_command_queue q, cl_mem m, size_t off, size_t size,
		      void *dst, struct cmx_cmd *c, void (*finish)(struct cmx_pending_read *, int),
		      void *arg)
{
	struct cmx_ReadBuffer_in in = {.queue = {q->id},
				       .mem = {m->id},
				       .offset = off,
				       .size = size,
				       .wait = CMD_WAIT(c),
				       .event = {c->ev_id}};
	struct cmx_pending_read *p;
	cl_int e;

	switch (w) {
	case WAY_AREA_NOW:
		return area_transfer(q, m, off, size, dst, 0, c);
	case WAY_LANES:
		/* Not free, or not open: the call channel. */
		if ((e = lanes_read(&in, dst)) != -1)
			return e;
		/* fall through */
	case WAY_CALL:
		return read_call(q, &in, dst);
	case WAY_SEND:
	case WAY_AREA_LATER:
		break;
	}
	p = cmx_pending_new(q, c->ev, dst, size);
	if (!p)
		return CL_OUT_OF_HOST_MEMORY;
	p->finish = finish;
	p->arg = arg;
	in.tag = (uintptr_t)p;
	return cmx_pending_send(p, &cmx_desc_ReadBuffer_in, &in, 1);
}

/* A write of a command that passed its checks; either way the data leaves
 * with the command: ptr is free on return. */
static cl_int write_by(enum transfer_way w, cl_command_queue q, cl_mem m, size_t off, size_t size,
		       const void *ptr, struct cmx_cmd *c)
{
	struct cmx_WriteBuffer_in in = {.queue = {q->id},
					.mem = {m->id},
					.offset = off,
					.size = size,
					.wait = CMD_WAIT(c),
					.event = {c->ev_id}};
	cl_int e;

	switch (w) {
	case WAY_AREA_NOW:
		return area_transfer(q, m, off, size, (void *)ptr, 1, c);
	case WAY_LANES:
		/* Not free, or not open: the call channel. */
		if ((e = lanes_write(&in, ptr)) != -1)
			return e;
		/* fall through */
	case WAY_CALL:
		return write_call(q, &in, ptr);
	case WAY_SEND:
	case WAY_AREA_LATER:
		break;
	}
	return CMX_SEND(WriteBuffer, &in, ptr, size);
}

/* Reads [off, off + size) of m into dst for a command that passed its
 * checks: blocking, the data is in dst on return; otherwise it lands later
 * and `finish` runs then. */
cl_int cmx_transfer_read(cl_command_queue q, cl_mem m, cl_bool blocking, size_t off, size_t size,
			 void *dst, struct cmx_cmd *c,
			 void (*finish)(struct cmx_pending_read *, int), void *arg)
{
	return read_by(transfer_way(q, m, blocking, size), q, m, off, size, dst, c, finish, arg);
}

/* ---- reads and writes ---- */

/* The checks a read (host_reads) or a write of [off, off + size) of m
 * starts with. */
static cl_int io_check(cl_command_queue q, cl_mem m, size_t off, size_t size, const void *ptr,
		       int host_reads)
{
	cl_int e = cmx_mem_check(q, m);

	if (!e && (!ptr || !cmx_in_range(off, size, m->size)))
		e = CL_INVALID_VALUE;
	if (!e)
		e = cmx_mem_host_access(m, host_reads, !host_reads);
	return e;
}

cl_int cmx_clEnqueueReadBuffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t off,
			       size_t size, void *ptr, cl_uint n, const cl_event *list,
			       cl_event *event)
{
	enum transfer_way w;
	struct cmx_cmd c;
	cl_int e = io_check(q, m, off, size, ptr, 1);

	if (e)
		return e;
	w = transfer_way(q, m, blocking, size);
	if (w == WAY_AREA_LATER)
		return area_later(q, m, off, size, ptr, 0, n, list, event);
	if ((e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_READ_BUFFER)))
		return e;
	e = cmx_cmd_end(&c, read_by(w, q, m, off, size, ptr, &c, NULL, NULL));
	if (!e && blocking)
		cmx_blocking_done(q, n, list);
	return e;
}

cl_int cmx_clEnqueueWriteBuffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t off,
				size_t size, const void *ptr, cl_uint n, const cl_event *list,
				cl_event *event)
{
	enum transfer_way w;
	struct cmx_cmd c;
	cl_int e = io_check(q, m, off, size, ptr, 0);

	if (e)
		return e;
	w = transfer_way(q, m, blocking, size);
	if (w == WAY_AREA_LATER)
		return area_later(q, m, off, size, (void *)ptr, 1, n, list, event);
	if ((e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_WRITE_BUFFER)))
		return e;
	e = cmx_cmd_end(&c, write_by(w, q, m, off, size, ptr, &c));
	if (!e && blocking)
		cmx_blocking_done(q, n, list);
	return e;
}
