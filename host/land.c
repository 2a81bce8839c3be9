// SPDX-License-Identifier: MIT
// Large socket transfers on a CPU device, without the staging copy: a write's
// payload is received into the mapped native buffer, a read sent from it.
#include "land.h"

#include <pthread.h>
#include <stdlib.h>

#include "area.h"
#include "call.h"
#include "conn.h"
#include "exec.h"
#include "log.h"
#include "object.h"
#include "proto.gen.h"
#include "server.h"
#include "session.h"
#include "zero.h"

/*
 * Payloads in the stream only: one in a shared area's block already takes
 * the one-copy path. A session with an area sends large ones in the stream
 * too, when they do not fit its blocks (clpeak's 512 MiB transfers, twenty
 * in flight): staging would hold a fresh copy of each. A buffer living in
 * the area itself (its heap) is never landed: a pointer into the area means
 * an area block on the wire (cmx_area_mark()), and its maps move no data.
 *
 * Why only a CPU device: there a map is the buffer's own memory (PoCL: no
 * copy either way), so receiving into it is the one copy a native write
 * makes. Elsewhere a map is a transfer of its own (staging wins).
 *
 * Writes: the payload goes into the region only when nothing can still
 * touch it: every earlier command of the in-order queue is done, or the
 * only one left is the unmap of the landing just before (a chunked
 * transfer's next chunk, another region), and the wait list is complete.
 * The map is not waited for: even on an idle queue a blocking map waited
 * up to 20 ms here while another queue's kernel ran (PoCL), and the loop
 * never waits on the driver. On a CPU device the pointer a non-blocking
 * map returns is the buffer's own memory at once, and with nothing before
 * it the map has nothing to copy (CL_MAP_WRITE_INVALIDATE_REGION). A queue
 * that could still run a kernel on the buffer, or wait for a user event
 * the guest sets later in this same stream, goes through staging, as
 * before.
 */
struct cmx_land {
	const struct cmx_server *srv;
	struct cmx_conn *conn;
	cl_command_queue q;
	cl_mem m;
	void *ptr;
	uint64_t off, size;
};

/* Reads sent from a map: found by the reply payload's pointer when the
 * send is done (rbulk_free). Loop thread, and locked anyway: a free
 * function may run wherever its owner frees the payload. */
struct sent {
	const struct cmx_server *srv;
	struct sent *next;
	void *ptr;
	cl_command_queue q;
	cl_mem m;
	cl_event gate; /* user event the unmap waits for */
};

/* Process-wide, not the server's: sent_done() gets only the payload's
 * pointer from whoever frees it (a reply's rbulk_free, through the
 * transports), and finds its entry here by that address, which is the
 * process's; each entry names its server. */
static pthread_mutex_t sent_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sent *sent_list;

/* The queue's device is a CPU, whose maps are the buffer's own memory, and
 * not one that runs its queue only inside clFlush or a wait (Oclgrind). */
static int on_cpu(const struct cmx_server *srv, cl_command_queue q)
{
	cl_device_id d;
	cl_device_type t;

	if (srv->flush_runs ||
	    clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof(d), &d, NULL) != CL_SUCCESS ||
	    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof(t), &t, NULL) != CL_SUCCESS)
		return 0;
	return (t & CL_DEVICE_TYPE_CPU) != 0;
}

static int in_order(cl_command_queue q)
{
	cl_command_queue_properties p = 0;

	return clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof(p), &p, NULL) == CL_SUCCESS &&
	       !(p & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
}

static int done(cl_event e)
{
	cl_int st = CL_QUEUED;

	return clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, NULL) ==
		   CL_SUCCESS &&
	       st <= CL_COMPLETE;
}

struct cmx_land *cmx_land_open(struct cmx_conn *c, const struct cmx_hdr *h, const uint8_t *args)
{
	struct cmx_session *s = c->sess;
	struct cmx_WriteBuffer_in in;
	struct cmx_obj *q, *m;
	struct cmx_land *l;
	cl_int e;

	if (!s || c->role != CMX_ROLE_CALL || h->bulk < CMX_LAND_MIN ||
	    h->op != CMX_OP_WriteBuffer ||
	    (h->flags & (CMX_HDR_LZ4 | CMX_HDR_AREA)))
		return NULL;
	/* The arguments are checked again, in full, when the call is
	 * dispatched; here only what the map needs, never trusting them. */
	if (((uintptr_t)args & 7) ||
	    cmx_codec_decode(&cmx_desc_WriteBuffer_in, args, h->size, &in) || in.size != h->bulk)
		return NULL;
	q = cmx_session_obj(s, in.queue.id, CMX_K_QUEUE);
	m = cmx_session_obj(s, in.mem.id, CMX_K_MEM);
	if (!q || !m || !q->h || !m->h || (q->flags & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) ||
	    in.offset > m->size || in.size > m->size - in.offset)
		return NULL;
	if (q->last && q->last != c->land_last && !done(q->last))
		goto busy;
	/* The region may still be being zeroed (host/zero.c). */
	if (!cmx_zero_settled(q))
		goto busy;
	for (uint32_t i = 0; i < in.wait.n; i++) {
		struct cmx_obj *ev = cmx_session_obj(s, in.wait.v[i], CMX_K_EVENT);
		if (!ev || !ev->h || !done(ev->h))
			goto busy;
	}
	if (!on_cpu(c->srv, q->h))
		return NULL;
	l = malloc(sizeof(*l));
	if (!l)
		return NULL;
	l->ptr = clEnqueueMapBuffer(q->h, m->h, CL_FALSE, CL_MAP_WRITE_INVALIDATE_REGION, in.offset,
				    in.size, 0, NULL, NULL, &e);
	if (e != CL_SUCCESS || !l->ptr) {
		free(l);
		goto busy;
	}
	if (cmx_area_overlaps(s->area, l->ptr, in.size)) {
		clEnqueueUnmapMemObject(q->h, m->h, l->ptr, 0, NULL, NULL);
		cmx_queue_flush(c->srv, q->h);
		free(l);
		return NULL;
	}
	cmx_queue_flush(c->srv, q->h);
	clRetainCommandQueue(q->h);
	clRetainMemObject(m->h);
	l->srv = c->srv;
	l->conn = c;
	l->q = q->h;
	l->m = m->h;
	l->off = in.offset;
	l->size = in.size;
	return l;
busy:
	cmx_dbg("session %llu: a %llu-byte write goes through staging (queue busy, or no map)",
		(unsigned long long)s->id, (unsigned long long)h->bulk);
	return NULL;
}

void *cmx_land_ptr(const struct cmx_land *l)
{
	return l->ptr;
}

static void land_free(struct cmx_land *l)
{
	clReleaseMemObject(l->m);
	clReleaseCommandQueue(l->q);
	free(l);
}

void cmx_land_abort(struct cmx_land *l)
{
	if (!l)
		return;
	/* The region holds what arrived of the payload; the write never
	 * happened as far as the guest knows. */
	if (clEnqueueUnmapMemObject(l->q, l->m, l->ptr, 0, NULL, NULL) == CL_SUCCESS)
		cmx_queue_flush(l->srv, l->q);
	land_free(l);
}

struct cmx_land *cmx_land_take(struct cmx_call *c)
{
	struct cmx_conn *conn = c->s->conn;
	struct cmx_land *l;

	if (c->bulk || !conn || !conn->landed)
		return NULL;
	l = conn->landed;
	conn->landed = NULL;
	return l;
}

cl_int cmx_land_finish(struct cmx_land *l, cl_command_queue q, cl_mem m, uint64_t off,
		       uint64_t size, cl_uint n, const cl_event *wait, cl_event *ev)
{
	cl_int e;

	if (q != l->q || m != l->m || off != l->off || size != l->size) {
		cmx_land_abort(l);
		return CL_INVALID_VALUE;
	}
	e = clEnqueueUnmapMemObject(q, m, l->ptr, n, wait, ev);
	if (e != CL_SUCCESS) {
		cmx_land_abort(l);
		return e;
	}
	/* The next chunk's map may wait for this unmap (cmx_land_open()). */
	if (l->conn->land_last)
		clReleaseEvent(l->conn->land_last);
	clRetainEvent(*ev);
	l->conn->land_last = *ev;
	land_free(l);
	return CL_SUCCESS;
}

/* rbulk_free of a read sent from a map: the data has left (or never
 * will), so the unmap, and the commands after it, may run. */
static void sent_done(void *ptr)
{
	struct sent **pp, **at = NULL, *t = NULL;

	/* The oldest send of this region (the list is newest first). */
	pthread_mutex_lock(&sent_lock);
	for (pp = &sent_list; *pp; pp = &(*pp)->next)
		if ((*pp)->ptr == ptr)
			at = pp;
	if (at) {
		t = *at;
		*at = t->next;
	}
	pthread_mutex_unlock(&sent_lock);
	if (!t)
		return;
	clSetUserEventStatus(t->gate, CL_COMPLETE);
	cmx_queue_flush(t->srv, t->q);
	clReleaseEvent(t->gate);
	clReleaseMemObject(t->m);
	clReleaseCommandQueue(t->q);
	free(t);
}

int cmx_land_read(struct cmx_call *c, cl_command_queue q, cl_mem m, uint64_t off, uint64_t size,
		  cl_uint n, const cl_event *wait, cl_event *map_ev, cl_event *done_ev)
{
	struct sent *t;
	cl_context ctx;
	cl_int e;

	if (size < CMX_LAND_MIN || c->area_out || !on_cpu(c->s->srv, q) ||
	    clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof(ctx), &ctx, NULL) != CL_SUCCESS ||
	    !(t = calloc(1, sizeof(*t))))
		return -1;
	t->srv = c->s->srv;
	t->gate = clCreateUserEvent(ctx, &e);
	if (e != CL_SUCCESS) {
		free(t);
		return -1;
	}
	t->ptr = clEnqueueMapBuffer(q, m, CL_FALSE, CL_MAP_READ, off, size, n, wait, map_ev, &e);
	if (e != CL_SUCCESS || !t->ptr)
		goto fail;
	/* The same region sent again before the last send ended (clpeak's
	 * twenty non-blocking reads of one buffer): on the same in-order
	 * queue, where each unmap waits for the one before, it does not
	 * matter which of the sends ends first (sent_done() lets the oldest
	 * go). Anywhere else it does: that one goes through staging. */
	pthread_mutex_lock(&sent_lock);
	for (struct sent *o = sent_list; o; o = o->next)
		if (o->ptr == t->ptr && (o->q != q || !in_order(q)))
			e = CL_INVALID_OPERATION;
	pthread_mutex_unlock(&sent_lock);
	if (cmx_area_overlaps(c->s->area, t->ptr, size))
		e = CL_INVALID_OPERATION; /* the area's heap: see above */
	if (e == CL_SUCCESS)
		e = clEnqueueUnmapMemObject(q, m, t->ptr, 1, &t->gate, done_ev);
	if (e != CL_SUCCESS) {
		/* The map stays unmatched for now: unmap it at once, then
		 * read through staging behind it. */
		clEnqueueUnmapMemObject(q, m, t->ptr, 0, NULL, NULL);
		clReleaseEvent(*map_ev);
		goto fail;
	}
	clRetainCommandQueue(q);
	clRetainMemObject(m);
	t->q = q;
	t->m = m;
	pthread_mutex_lock(&sent_lock);
	t->next = sent_list;
	sent_list = t;
	pthread_mutex_unlock(&sent_lock);
	c->rbulk = t->ptr;
	c->rbulk_len = size;
	c->rbulk_free = sent_done;
	return 0;
fail:
	clReleaseEvent(t->gate);
	free(t);
	return -1;
}
