// SPDX-License-Identifier: MIT
// Bulk lanes: large blocking transfers cut into pieces that travel on the
// session's extra connections, received into (or sent from) the mapped buffer.
#include "lane.h"

#include <CL/cl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "conn.h"
#include "exec.h"
#include "log.h"
#include "object.h"
#include "proto.gen.h"
#include "server.h"
#include "session.h"

/*
 * One TCP stream is bounded by its receiver's copy (docs/performance.md):
 * a transfer spread over several streams is copied by several threads.
 * The loop only parses the pieces' headers; their payloads are received
 * (and a read's sent) by io_uring's worker threads, one per lane at once
 * (IOSQE_ASYNC, host/conn.c), straight into the region mapped here.
 *
 * A transfer lives from its WriteLanes/ReadLanes to the last of: its end
 * (WriteLanesEnd, or the read's last piece sent) and every piece being
 * received into it (refs). Until then it holds the queue and the buffer,
 * so a session that ends mid-transfer never frees memory a worker still
 * writes into.
 */
#define PIECES_MAX (4 * CMX_LANES_MAX) /* per transfer: ranges checked for overlap */
/* Transfers one session may hold open (the reference guest: one): each
 * holds a map, a queue and a buffer. */
#define XFERS_MAX 16

struct cmx_xfer {
	const struct cmx_server *srv;
	struct cmx_xfer *next;
	struct cmx_session *s; /* NULL once out of the session's list */
	uint64_t id;
	int refs; /* the session's list, pieces in flight, the parked end */
	int reading;
	int unmapped;
	cl_command_queue q;
	cl_mem m;
	void *ptr;
	uint64_t off, size;
	uint64_t got;		/* write: bytes landed */
	unsigned sending;	/* read: pieces not yet sent */
	cl_event gate;		/* read: the unmap waits for it */
	struct cmx_ref ev;	/* the guest's event for the command */
	struct cmx_call *end;	/* a WriteLanesEnd waiting for bytes */
	uint64_t ranges[PIECES_MAX][2];
	unsigned nranges;
};

int cmx_lane_attach(struct cmx_session *s, struct cmx_conn *c)
{
	if (s->shm || s->closed)
		return -EOPNOTSUPP; /* the rings carry everything */
	if (s->nlanes >= CMX_LANES_MAX)
		return -EMFILE;
	s->lanes[s->nlanes++] = c;
	cmx_session_ref(s);
	return 0;
}

void cmx_lane_detach(struct cmx_session *s, struct cmx_conn *c)
{
	for (unsigned i = 0; i < s->nlanes; i++)
		if (s->lanes[i] == c) {
			memmove(&s->lanes[i], &s->lanes[i + 1],
				(s->nlanes - i - 1) * sizeof(s->lanes[0]));
			s->nlanes--;
			cmx_session_unref(s);
			return;
		}
}

static struct cmx_xfer *xfer_find(struct cmx_session *s, uint64_t id)
{
	for (struct cmx_xfer *x = s->xfers; x; x = x->next)
		if (x->id == id)
			return x;
	return NULL;
}

/* Out of the session's list (and its reference with it). */
static void xfer_unlist(struct cmx_xfer *x)
{
	struct cmx_xfer **pp;

	if (!x->s)
		return;
	for (pp = &x->s->xfers; *pp && *pp != x; pp = &(*pp)->next)
		;
	if (*pp) {
		*pp = x->next;
		x->s->nxfers--;
	}
	x->s = NULL;
	cmx_xfer_put(x);
}

void cmx_xfer_put(struct cmx_xfer *x)
{
	if (--x->refs)
		return;
	/* Nothing writes into the region any more: a transfer that never
	 * ended gives it back unchanged as far as the guest knows. */
	if (!x->unmapped && clEnqueueUnmapMemObject(x->q, x->m, x->ptr, 0, NULL, NULL) == CL_SUCCESS)
		cmx_queue_flush(x->srv, x->q);
	if (x->gate) {
		clSetUserEventStatus(x->gate, CL_COMPLETE);
		clReleaseEvent(x->gate);
	}
	clReleaseMemObject(x->m);
	clReleaseCommandQueue(x->q);
	free(x);
}

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
	if (!id || xfer_find(s, id))
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
		xfer_unlist(x);
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
		xfer_unlist(x);
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
	xfer_unlist(x); /* may free x */
	if (e)
		return e;
	clRetainEvent(ev);
	cmx_event_bind(c, &guest_ev, ev);
	e = cmx_defer_wait(c, ev, NULL);
	clReleaseEvent(ev);
	return e;
}

int cmx_h_WriteLanesEnd(struct cmx_call *c, struct cmx_WriteLanesEnd_in *in,
			struct cmx_WriteLanesEnd_out *out)
{
	struct cmx_xfer *x = xfer_find(c->s, in->transfer);

	if (!x || x->reading || x->end || x->q != in->queue.h)
		return CL_INVALID_VALUE;
	if (x->got == x->size)
		return write_finish(c, x);
	/* Pieces are still arriving on the lanes. */
	x->end = c;
	x->refs++;
	return CMX_DEFER;
}

void *cmx_lane_piece_begin(struct cmx_session *s, uint64_t transfer, uint64_t off, uint64_t len,
			   struct cmx_xfer **out)
{
	struct cmx_xfer *x = s ? xfer_find(s, transfer) : NULL;

	if (!x || x->reading || !len || off > x->size || len > x->size - off ||
	    x->nranges == PIECES_MAX)
		return NULL;
	for (unsigned i = 0; i < x->nranges; i++)
		if (off < x->ranges[i][1] && x->ranges[i][0] < off + len)
			return NULL; /* overlaps a piece already taken */
	x->ranges[x->nranges][0] = off;
	x->ranges[x->nranges][1] = off + len;
	x->nranges++;
	x->refs++;
	*out = x;
	return (char *)x->ptr + off;
}

void cmx_lane_piece_end(struct cmx_xfer *x, uint64_t len)
{
	x->got += len;
	if (x->got == x->size && x->end && x->s) {
		struct cmx_call *c = x->end;
		int e;

		x->end = NULL;
		e = write_finish(c, x);
		if (e != CMX_DEFER)
			cmx_call_done(c, e);
		cmx_xfer_put(x); /* the parked end's */
	}
	cmx_xfer_put(x);
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
		xfer_unlist(x);
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
	xfer_unlist(x);
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
		xfer_unlist(x);
		return e;
	}
	/* Later commands on the queue cannot change the data under the send:
	 * the unmap waits until every piece has left (read_piece_sent()). */
	e = clEnqueueUnmapMemObject(x->q, x->m, x->ptr, 1, &x->gate, &done_ev);
	if (e != CL_SUCCESS) {
		x->unmapped = 0;
		clReleaseEvent(map_ev);
		xfer_unlist(x);
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
		xfer_unlist(x);
		if (end) {
			cmx_call_done(end, CL_INVALID_OPERATION);
			cmx_xfer_put(x);
		}
	}
}
