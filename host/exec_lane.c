// SPDX-License-Identifier: MIT
// The calls of bulk lanes: large blocking transfers cut into pieces that
// travel on the session's extra connections (host/lane.c), received into
// (or sent from) the mapped buffer.
#include "lane.h"

#include <CL/cl.h>
#include <stdlib.h>

#include "call.h"
#include "conn.h"
#include "defer.h"
#include "exec.h"
#include "log.h"
#include "object.h"
#include "proto.gen.h"
#include "server.h"
#include "session.h"

/* Transfers one session may hold open (the reference guest: one): each
 * holds a map, a queue and a buffer. */
#define XFERS_MAX 16

/* A new transfer of [off, off + size) of mem on the call's queue, listed
 * in the session. CL_SUCCESS or the error for the call. */
static cl_int xfer_new(struct cmx_call *c, uint64_t id, const struct cmx_ref *q,
		       const struct cmx_ref *mem, uint64_t off, uint64_t size, uint64_t lanes,
		       struct cmx_xfer **out)
{
	struct cmx_session *s = c->s;
	struct cmx_obj *m = cmx_session_obj(s, mem->id, CMX_K_MEM);
	struct cmx_xfer *x;

	if (!s->nlanes || lanes != s->nlanes)
		return CL_INVALID_OPERATION;
	if (!id || cmx_lane_xfer(s, id))
		return CL_INVALID_VALUE;
	if (s->nxfers >= XFERS_MAX)
		return CL_OUT_OF_RESOURCES;
	if (!m || m->ext) /* an image is not a buffer */
		return CL_INVALID_MEM_OBJECT;
	if (!size || off > m->size || size > m->size - off)
		return CL_INVALID_VALUE;
	x = calloc(1, sizeof(*x));
	if (!x)
		return CL_OUT_OF_HOST_MEMORY;
	x->srv = s->srv;
	x->id = id;
	x->off = off;
	x->size = size;
	x->q = q->h;
	x->m = mem->h;
	clRetainCommandQueue(x->q);
	clRetainMemObject(x->m);
	x->refs = 1;
	x->s = s;
	x->next = s->xfers;
	s->xfers = x;
	s->nxfers++;
	*out = x;
	return CL_SUCCESS;
}

/* Finishes c with fin(c, status) once the map (map_ev, released here) is
 * done; c holds a reference on x meanwhile (c->ctx). */
static int on_mapped(struct cmx_call *c, struct cmx_xfer *x, cl_event map_ev,
		     void (*fin)(struct cmx_call *c, int status))
{
	int e;

	x->refs++;
	c->ctx = x;
	e = cmx_defer_wait(c, map_ev, fin);
	clReleaseEvent(map_ev);
	return e;
}

/* ---- writes ---- */

static void write_mapped(struct cmx_call *c, int status)
{
	struct cmx_xfer *x = c->ctx;

	c->ctx = NULL;
	if (status < 0)
		cmx_xfer_unlist(x);
	cmx_xfer_put(x); /* the call's */
	cmx_call_done(c, status < 0 ? status : CL_SUCCESS);
}

int cmx_h_WriteLanes(struct cmx_call *c, struct cmx_WriteLanes_in *in, struct cmx_WriteLanes_out *out)
{
	struct cmx_xfer *x;
	cl_event map_ev;
	cl_int e = xfer_new(c, in->transfer, &in->queue, &in->mem, in->offset, in->size, in->lanes,
			    &x);

	if (e)
		return e;
	x->ptr = clEnqueueMapBuffer(x->q, x->m, CL_FALSE, CL_MAP_WRITE_INVALIDATE_REGION, x->off,
				    x->size, WAIT(in->wait), &map_ev, &e);
	if (e != CL_SUCCESS || !x->ptr) {
		x->unmapped = 1;
		cmx_xfer_unlist(x);
		return e ? e : CL_MAP_FAILURE;
	}
	x->ev = in->event;
	/* The guest sends the pieces once the region is its own. */
	return on_mapped(c, x, map_ev, write_mapped);
}

/* Every byte is in: the unmap is the command, its event the guest's. */
static int write_finish(struct cmx_call *c, struct cmx_xfer *x)
{
	struct cmx_ref guest_ev = x->ev;
	cl_event ev;
	cl_int e = clEnqueueUnmapMemObject(x->q, x->m, x->ptr, 0, NULL, &ev);

	if (e == CL_SUCCESS)
		x->unmapped = 1;
	cmx_xfer_unlist(x); /* may free x */
	if (e)
		return e;
	clRetainEvent(ev);
	cmx_event_bind(c, &guest_ev, ev);
	e = cmx_defer_wait(c, ev, NULL);
	clReleaseEvent(ev);
	return e;
}

/* The last piece of x came in (cmx_lane_piece_end()) while its
 * WriteLanesEnd waited. */
static void end_parked(struct cmx_xfer *x)
{
	struct cmx_call *c = x->end;
	int e;

	x->end = NULL;
	e = write_finish(c, x);
	if (e != CMX_DEFER)
		cmx_call_done(c, e);
	cmx_xfer_put(x); /* the parked end's */
}

int cmx_h_WriteLanesEnd(struct cmx_call *c, struct cmx_WriteLanesEnd_in *in,
			struct cmx_WriteLanesEnd_out *out)
{
	struct cmx_xfer *x = cmx_lane_xfer(c->s, in->transfer);

	if (!x || x->reading || x->end || x->q != in->queue.h)
		return CL_INVALID_VALUE;
	if (x->got == x->size)
		return write_finish(c, x);
	/* Pieces are still arriving on the lanes. */
	x->end = c;
	x->end_fin = end_parked;
	x->refs++;
	return CMX_DEFER;
}

/* ---- reads ---- */

/* A piece has left (or never will: its lane ended). */
static void read_piece_sent(void *arg)
{
	struct cmx_xfer *x = arg;

	if (!--x->sending) {
		/* The unmap, and what the queue has after it, may run. */
		clSetUserEventStatus(x->gate, CL_COMPLETE);
		cmx_queue_flush(x->srv, x->q);
	}
	cmx_xfer_put(x);
}

static void read_mapped(struct cmx_call *c, int status)
{
	struct cmx_xfer *x = c->ctx;
	struct cmx_session *s = c->s;
	unsigned n = s->nlanes;

	c->ctx = NULL;
	if (status < 0 || s->closed || !x->s || !n) {
		cmx_xfer_unlist(x);
		cmx_xfer_put(x); /* the call's */
		cmx_call_done(c, status < 0 ? status : CL_INVALID_OPERATION);
		return;
	}
	/* Counted first: a piece sent (or dropped) at once must not open the
	 * gate before the others are queued. */
	x->sending = 1;
	for (unsigned i = 0; i < n; i++) {
		struct cmx_LanePiece_in p = { .transfer = x->id };
		uint64_t args[2];
		struct cmx_hdr h = { .size = sizeof(args), .op = CMX_OP_LanePiece };

		cmx_lane_piece(x->size, n, i, &p.offset, &h.bulk);
		if (!h.bulk)
			continue;
		_Static_assert(sizeof(args) == 16, "LanePiece: two u64");
		cmx_codec_encode(&cmx_desc_LanePiece_in, &p, (uint8_t *)args);
		x->sending++;
		x->refs++;
		cmx_conn_send_ref(s->lanes[i], &h, args, (char *)x->ptr + p.offset, read_piece_sent,
				  x);
	}
	read_piece_sent(x); /* the count's own, with the call's reference */
	cmx_xfer_unlist(x);
	cmx_call_done(c, CL_SUCCESS);
}

int cmx_h_ReadLanes(struct cmx_call *c, struct cmx_ReadLanes_in *in, struct cmx_ReadLanes_out *out)
{
	struct cmx_xfer *x;
	cl_context ctx;
	cl_event map_ev, done_ev;
	cl_int e = xfer_new(c, in->transfer, &in->queue, &in->mem, in->offset, in->size, in->lanes,
			    &x);

	if (e)
		return e;
	x->reading = 1;
	x->unmapped = 1; /* the gated unmap below is enqueued with the map */
	e = clGetCommandQueueInfo(x->q, CL_QUEUE_CONTEXT, sizeof(ctx), &ctx, NULL);
	if (e == CL_SUCCESS)
		x->gate = clCreateUserEvent(ctx, &e);
	if (e == CL_SUCCESS)
		x->ptr = clEnqueueMapBuffer(x->q, x->m, CL_FALSE, CL_MAP_READ, x->off, x->size,
					    WAIT(in->wait), &map_ev, &e);
	if (e == CL_SUCCESS && !x->ptr)
		e = CL_MAP_FAILURE;
	if (e != CL_SUCCESS) {
		cmx_xfer_unlist(x);
		return e;
	}
	/* Later commands on the queue cannot change the data under the send:
	 * the unmap waits until every piece has left (read_piece_sent()). */
	e = clEnqueueUnmapMemObject(x->q, x->m, x->ptr, 1, &x->gate, &done_ev);
	if (e != CL_SUCCESS) {
		x->unmapped = 0;
		clReleaseEvent(map_ev);
		cmx_xfer_unlist(x);
		return e;
	}
	cmx_event_bind(c, &in->event, done_ev);
	return on_mapped(c, x, map_ev, read_mapped);
}

void cmx_lane_session_close(struct cmx_session *s)
{
	while (s->nlanes)
		cmx_conn_kill(s->lanes[s->nlanes - 1], NULL); /* detaches it */
	while (s->xfers) {
		struct cmx_xfer *x = s->xfers;
		struct cmx_call *end = x->end;

		x->end = NULL;
		cmx_xfer_unlist(x);
		if (end) {
			cmx_call_done(end, CL_INVALID_OPERATION);
			cmx_xfer_put(x);
		}
	}
}
