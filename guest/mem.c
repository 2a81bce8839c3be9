// SPDX-License-Identifier: MIT
// Buffers, sub-buffers, transfers and maps (of images too); the pipe and SVM
// entry points answer as a device without those capabilities.
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "area.h"
#include "clcheck.h"
#include "copy.h"
#include "entry.h"
#include "icd.h"
#include "lane.h"

/*
 * Everything the spec requires to fail synchronously is decided here, from
 * the sizes and flags the guest keeps: the daemon hears only of commands
 * that pass, and non-blocking ones travel without a round trip.
 */

#define ACCESS_FLAGS	  (CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY | CL_MEM_READ_ONLY)
#define HOST_ACCESS_FLAGS (CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS)
#define HOST_PTR_FLAGS	  (CL_MEM_USE_HOST_PTR | CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR)
#define MAP_WRITES	  (CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION)

void cmx_mem_destructor_fired(uint64_t tag);

/* One clEnqueueMapBuffer not yet unmapped, on its buffer's `maps` list. */
struct cmx_mapping {
	void *ptr;
	size_t offset, size;
	uint64_t origin[3], region[3]; /* images: the mapped box, packed at ptr */
	cl_map_flags flags;
	int owned;   /* ptr is ours, not the application's host_ptr */
	size_t cap;  /* owned: the bytes at ptr */
	/* A USE_HOST_PTR image's map is host_ptr's own memory (ptr), in its
	 * pitches; the box travels packed through stage. */
	void *stage;
	size_t w, rows, slices, hrow, hslice;
	int landing; /* a non-blocking map's read is on its way (map_lock) */
	int dropped; /* unmapped or released before it landed (map_lock) */
	struct cmx_mapping *next;
};

/* A destructor as the daemon knows it: the tag is this struct's address,
 * which is also that of the cmx_destructor (first member). */
struct mem_destructor {
	struct cmx_destructor d;
	cl_mem mem;
};

/* Mappings whose read is still landing: the notification thread and the
 * threads that unmap meet here. */
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t map_cond = PTHREAD_COND_INITIALIZER;

static size_t align_bytes(cl_device_id d)
{
	return d->mem_base_addr_align >= 8 ? d->mem_base_addr_align / 8 : 1;
}

/* [off, off + len) inside size bytes, len not 0; written not to wrap. */
static int in_range(size_t off, size_t len, size_t size)
{
	return len && off <= size && len <= size - off;
}

static int at_most_one(cl_mem_flags f)
{
	return !(f & (f - 1));
}

/* ---- flags and checks shared by the entry points ---- */

cl_int cmx_mem_flags_check(cl_mem_flags f)
{
	if (f & ~(cl_mem_flags)(ACCESS_FLAGS | HOST_ACCESS_FLAGS | HOST_PTR_FLAGS))
		return CL_INVALID_VALUE;
	if (!at_most_one(f & ACCESS_FLAGS) || !at_most_one(f & HOST_ACCESS_FLAGS))
		return CL_INVALID_VALUE;
	if ((f & CL_MEM_USE_HOST_PTR) && (f & (CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR)))
		return CL_INVALID_VALUE;
	return CL_SUCCESS;
}

/* A sub-buffer's flags may narrow its parent's, never widen them; what they
 * leave out (and the host pointer flags) it inherits. */
static cl_int sub_flags(cl_mem_flags pf, cl_mem_flags f, cl_mem_flags *out)
{
	if (cmx_mem_flags_check(f) || (f & HOST_PTR_FLAGS))
		return CL_INVALID_VALUE;
	if (((pf & CL_MEM_WRITE_ONLY) && (f & (CL_MEM_READ_WRITE | CL_MEM_READ_ONLY))) ||
	    ((pf & CL_MEM_READ_ONLY) && (f & (CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY))) ||
	    ((pf & CL_MEM_HOST_WRITE_ONLY) && (f & CL_MEM_HOST_READ_ONLY)) ||
	    ((pf & CL_MEM_HOST_READ_ONLY) && (f & CL_MEM_HOST_WRITE_ONLY)) ||
	    ((pf & CL_MEM_HOST_NO_ACCESS) &&
	     (f & (CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_WRITE_ONLY))))
		return CL_INVALID_VALUE;
	if (!(f & ACCESS_FLAGS))
		f |= pf & ACCESS_FLAGS;
	if (!(f & HOST_ACCESS_FLAGS))
		f |= pf & HOST_ACCESS_FLAGS;
	*out = f | (pf & HOST_PTR_FLAGS);
	return CL_SUCCESS;
}

/* The checks every buffer command starts with. */
static cl_int check_qmem(cl_command_queue q, cl_mem m)
{
	if (!CMX_IS(q, CMX_MAGIC_QUEUE))
		return CL_INVALID_COMMAND_QUEUE;
	if (!CMX_IS(m, CMX_MAGIC_MEM) || m->type != CL_MEM_OBJECT_BUFFER)
		return CL_INVALID_MEM_OBJECT;
	if (m->ctx != q->ctx)
		return CL_INVALID_CONTEXT;
	if (m->parent && m->origin % align_bytes(q->device))
		return CL_MISALIGNED_SUB_BUFFER_OFFSET;
	return CL_SUCCESS;
}

/* CL_MEM_HOST_*: what the application promised not to do from the host. */
cl_int cmx_mem_host_access(cl_mem m, int reads, int writes)
{
	if (reads && (m->flags & (CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_NO_ACCESS)))
		return CL_INVALID_OPERATION;
	if (writes && (m->flags & (CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS)))
		return CL_INVALID_OPERATION;
	return CL_SUCCESS;
}

/* ---- commands: wait list, event, and what follows a blocking one ---- */


/* The last check (the wait list), then the command's event: a command that
 * fails a check never creates one. */
cl_int cmx_cmd_begin(struct cmx_cmd *c, cl_command_queue q, cl_uint n, const cl_event *list,
			cl_event *want, cl_command_type type)
{
	cl_int e;

	/* A queue of an ended session: nothing of the command is made. */
	if (cmx_icd_lost(q->id))
		return CL_OUT_OF_RESOURCES;
	e = cmx_waitlist_init(&c->w, n, list, q->ctx);
	if (e)
		return e;
	c->want = want;
	c->ev = cmx_event_for(want, q, type, &c->ev_id);
	if (want && !c->ev) {
		cmx_waitlist_fini(&c->w);
		return CL_OUT_OF_HOST_MEMORY;
	}
	return CL_SUCCESS;
}

/* Hands the event to the application, or drops it when the daemon never
 * got the command (it has not heard of the event either). */
cl_int cmx_cmd_end(struct cmx_cmd *c, cl_int e)
{
	if (e && c->ev) {
		cmx_event_discard(c->ev);
		*c->want = NULL;
	}
	cmx_waitlist_fini(&c->w);
	return e;
}

/* Before waiting for data: the reads it waits for may still sit in the
 * batch (after a marker-only command). False when they never will land. */
static int session_sent(void)
{
	return !cmx_session_flush(cmx_icd.s) && !cmx_session_broken(cmx_icd.s);
}

/*
 * A blocking command's reply comes on the call channel, but the data of
 * non-blocking reads it was ordered after comes on the notification channel
 * and may trail it. In order, everything enqueued earlier is complete once
 * this command is, so its data must be there too; out of order, only the
 * wait list is.
 */
void cmx_blocking_done(cl_command_queue q, cl_uint n, const cl_event *list)
{
	if (!session_sent())
		return;
	if (!(q->props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE))
		cmx_queue_wait_data(q);
	else if (n && list)
		cmx_events_wait_data(n, list);
}

cl_int cmx_reply_status(int e, struct cmx_reply *r)
{
	cl_int status;

	if (e)
		return cmx_transport_err(e);
	status = r->status;
	cmx_reply_fini(r);
	return status;
}

static cl_int send_marker(cl_command_queue q, struct cmx_cmd *c)
{
	struct cmx_EnqueueMarker_in in = {
	    .queue = {q->id}, .wait = CMD_WAIT(c), .event = {c->ev_id}};

	return CMX_SEND(EnqueueMarker, &in);
}

/*
 * A read whose data lands later: the notification thread calls
 * cmx_read_landed() with it, which decrements q->pending, completes the
 * event's data and frees it (and `dst` when `out` is set: a packed rect).
 */
struct cmx_pending_read *cmx_pending_new(cl_command_queue q, cl_event ev, void *dst,
					    uint64_t len)
{
	struct cmx_pending_read *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->dst = dst;
	p->len = len;
	p->queue = q;
	p->event = ev;
	/* Counted before the read is sent; pairs with the decrement (under
	 * wait_lock) in cmx_read_landed(). */
	atomic_fetch_add(&q->pending, 1);
	if (ev) {
		cmx_clRetainEvent(ev);
		atomic_store(&ev->data_pending, 1);
	}
	return p;
}

/* Undoes cmx_pending_new() for a read that was never sent: the same path as a
 * read that failed, so the counts and waiters are settled in one place. */
void cmx_pending_cancel(struct cmx_pending_read *p)
{
	cmx_read_landed(p, CL_OUT_OF_RESOURCES);
}

/* Its session ended before the data came: the read failed, as a command
 * on a lost device does. */
static void pending_lost(struct cmx_track *t)
{
	cmx_read_landed((struct cmx_pending_read *)t, CL_OUT_OF_RESOURCES);
}

cl_int cmx_pending_send(struct cmx_pending_read *p, const struct cmx_msgdesc *d, const void *in,
			int recv)
{
	if (cmx_track_send(&p->track, pending_lost, d, in, recv ? CMX_TRACK_RECV : 0, p->len,
			   &p->area_off)) {
		cmx_pending_cancel(p);
		return CL_OUT_OF_RESOURCES;
	}
	return CL_SUCCESS;
}

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

/* ---- buffers in the shared area: maps are the daemon's native ones ---- */

/*
 * Which buffers live in the heap: those created with ALLOC_HOST_PTR, and,
 * where every device of the context is a CPU (whose driver keeps a host
 * pointer as the storage, so kernels run on the very same pages), large
 * plain ones too: their transfers then copy once instead of twice. A GPU
 * would copy or pin such memory, so there only ALLOC_HOST_PTR asks for it.
 */
#define HEAP_PLAIN_MIN (1u << 20)

static int in_heap(cl_context ctx, cl_mem_flags flags, size_t size)
{
	if (flags & CL_MEM_USE_HOST_PTR)
		return 0;
	if (flags & CL_MEM_ALLOC_HOST_PTR)
		return 1;
	if (size < HEAP_PLAIN_MIN)
		return 0;
	/* Only a device that is a CPU and nothing else (Oclgrind calls itself
	 * every type) works in host memory. */
	for (cl_uint i = 0; i < ctx->ndevices; i++)
		if ((ctx->devices[i]->type & ~(cl_device_type)CL_DEVICE_TYPE_DEFAULT) !=
		    CL_DEVICE_TYPE_CPU)
			return 0;
	return 1;
}

/* Where an area buffer's byte off lies in this process. */
static char *area_at(cl_mem m, size_t off)
{
	return (char *)m->heap->base + m->area_off + off;
}

/* Maps [off, off + size) of an area buffer natively: blocking, the bytes
 * are the buffer's on return; otherwise once the command's event is. */
static cl_int area_map(cl_command_queue q, cl_mem m, cl_bool blocking, cl_map_flags flags,
		       size_t off, size_t size, struct cmx_cmd *c)
{
	struct cmx_MapBuffer_in in = {.queue = {q->id},
				      .mem = {m->id},
				      .flags = flags,
				      .offset = off,
				      .size = size,
				      .wait = CMD_WAIT(c),
				      .event = {c->ev_id}};
	struct cmx_MapBuffer_out out;
	struct cmx_reply r;

	if (!blocking)
		return CMX_SEND(MapBuffer, &in);
	return cmx_reply_status(cmx_rpc_MapBuffer(cmx_icd.s, &in, &out, &r), &r);
}

static cl_int area_unmap(cl_command_queue q, cl_mem m, size_t off, struct cmx_cmd *c)
{
	struct cmx_UnmapBuffer_in in = {.queue = {q->id},
					.mem = {m->id},
					.offset = off,
					.wait = CMD_WAIT(c),
					.event = {c->ev_id}};

	return CMX_SEND(UnmapBuffer, &in);
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
	e = area_map(q, m, CL_TRUE, write ? CL_MAP_WRITE_INVALIDATE_REGION : CL_MAP_READ, off, size,
		     &first);
	if (e)
		return e;
	if (write)
		cmx_copy(area_at(m, off), ptr, size);
	else
		cmx_copy(ptr, area_at(m, off), size);
	return area_unmap(q, m, off, &last);
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
	struct later_copy *w = malloc(sizeof(*w));
	cl_event mapped = NULL;
	cl_int e = CL_OUT_OF_HOST_MEMORY;
	void *at;

	if (!w)
		return e;
	w->size = size;
	w->gate = cmx_clCreateUserEvent(q->ctx, &e);
	if (e)
		goto fail;
	at = cmx_clEnqueueMapBuffer(q, m, CL_FALSE,
				    write ? CL_MAP_WRITE_INVALIDATE_REGION : CL_MAP_READ, off, size,
				    n, list, &mapped, &e);
	if (e)
		goto fail_gate;
	w->dst = write ? at : ptr;
	w->src = write ? ptr : at;
	e = cmx_clEnqueueUnmapMemObject(q, m, at, 1, &w->gate, event);
	if (e) {
		cmx_clReleaseEvent(mapped);
		goto fail_gate;
	}
	if (event && *event)
		(*event)->type = write ? CL_COMMAND_WRITE_BUFFER : CL_COMMAND_READ_BUFFER;
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

/* Reads [off, off + size) of m into dst for a command that passed its
 * checks: blocking, the data is in dst on return; otherwise it lands later
 * and `finish` runs then. */
static cl_int read_region(cl_command_queue q, cl_mem m, cl_bool blocking, size_t off, size_t size,
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

	if (blocking && area_direct(q, m, size))
		return area_transfer(q, m, off, size, dst, 0, c);
	if (blocking && (e = lanes_read(&in, dst)) != -1)
		return e;
	if (blocking) {
		struct cmx_ReadBuffer_out out;
		struct cmx_reply r;
		size_t k, nk = chunks_before_last(q, size);

		/* The leading chunks land as non-blocking reads (their data on
		 * the notification thread, waited for by blocking_done()). */
		for (k = 0; k < nk; k++) {
			struct cmx_ReadBuffer_in ci = in;

			ci.offset = off + k * CHUNK;
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
			in.offset += nk * CHUNK;
			in.size -= nk * CHUNK;
			in.wait.n = 0;
			dst = (char *)dst + nk * CHUNK;
			size -= nk * CHUNK;
		}
		return cmx_reply_status(cmx_rpc_ReadBuffer(cmx_icd.s, &in, &out, &r, dst, size), &r);
	}
	p = cmx_pending_new(q, c->ev, dst, size);
	if (!p)
		return CL_OUT_OF_HOST_MEMORY;
	p->finish = finish;
	p->arg = arg;
	in.tag = (uintptr_t)p;
	return cmx_pending_send(p, &cmx_desc_ReadBuffer_in, &in, 1);
}

/* ---- creation and lifetime ---- */

/* Bytes of the process's buffers (not sub-buffers) not yet freed. */
static _Atomic uint64_t live_bytes;

cl_mem cmx_mem_new(cl_context ctx, cl_mem_flags flags, size_t size)
{
	cl_mem m = cmx_object_new(sizeof(*m), CMX_MAGIC_MEM);

	if (!m)
		return NULL;
	m->ctx = ctx;
	m->type = CL_MEM_OBJECT_BUFFER;
	m->flags = flags;
	m->size = size;
	atomic_init(&m->map_count, 0);
	pthread_mutex_init(&m->lock, NULL);
	return m;
}

static void mapping_drop(struct cmx_mapping *mp);

/* The last of the struct: no reference and no destructor left to run. */
void cmx_mem_free(cl_mem m)
{
	/* The storage is reused once the daemon's native buffer is gone too
	 * (a lost session's heap is never used again). */
	if (m->area_off && !m->parent && !m->image && m->heap)
		cmx_garea_heap_free(m->heap, m->area_off, 1);
	if (m->type == CL_MEM_OBJECT_BUFFER && !m->parent)
		atomic_fetch_sub(&live_bytes, m->size);
	while (m->maps) {
		struct cmx_mapping *mp = m->maps;

		m->maps = mp->next;
		mapping_drop(mp);
	}
	free(m->spare);
	pthread_mutex_destroy(&m->lock);
	free(m->image);
	free(m->props);
	free(m);
}

/*
 * A buffer in the heap (in_heap()): its storage is a block of the shared
 * area, which the daemon makes the native buffer's host pointer, so that
 * maps move no data and large blocking transfers copy once. Without a
 * heap, or with no room in it, the buffer is an ordinary one.
 */
/*
 * Room that released buffers still hold (clpeak releases a 512 MiB buffer
 * and creates the next at once): their releases left with this process's
 * last call but the daemon may not have destroyed them yet. A round trip
 * sent after them (the context's creation status) sees them handled; a
 * driver that runs the destructor a little later gets a few more looks.
 */
#define RECLAIM_TRIES 20
#define RECLAIM_WAIT_US 1000

static uint64_t heap_alloc_reclaim(struct cmx_garea *heap, const struct cmx_CreateBuffer_in *in)
{
	uint64_t off = cmx_garea_heap_alloc(heap, in->size);

	for (int i = 0; !off && i < RECLAIM_TRIES && cmx_garea_heap_pending(heap) >= in->size;
	     i++) {
		if (i) {
			usleep(RECLAIM_WAIT_US);
		} else {
			struct cmx_GetCreateStatus_in st = {.object = in->context.id};
			struct cmx_GetCreateStatus_out out;
			struct cmx_reply r;

			(void)cmx_rpc_GetCreateStatus(cmx_icd.s, &st, &out, &r);
		}
		off = cmx_garea_heap_alloc(heap, in->size);
	}
	return off;
}

static cl_int area_buffer_create(cl_mem m, const struct cmx_CreateBuffer_in *in,
				 const void *host_ptr)
{
	struct cmx_session *s = cmx_icd.s;
	struct cmx_garea *heap = cmx_session_heap(s);
	struct cmx_CreateBufferArea_in a = {
	    .mem = in->mem, .context = in->context, .flags = in->flags, .size = in->size};
	uint64_t off = heap ? heap_alloc_reclaim(heap, in) : 0;

	if (!off)
		return CMX_SEND(CreateBuffer, in, host_ptr, host_ptr ? in->size : 0);
	/* COPY_HOST_PTR: the contents are the block's when the call goes. */
	if (host_ptr)
		memcpy(heap->base + off, host_ptr, in->size);
	if (cmx_session_send_block(s, &cmx_desc_CreateBufferArea_in, &a, off, in->size)) {
		cmx_garea_heap_free(heap, off, 0);
		return CL_OUT_OF_RESOURCES;
	}
	m->area_off = off;
	m->heap = heap;
	return CL_SUCCESS;
}

/*
 * Creation is asynchronous (the guest checked what the specification lets
 * it), but the device's free memory and the tenant's quota are the
 * daemon's to judge. A buffer of SYNC_CREATE_MIN bytes or more, or one that
 * brings the process's buffers past a device's CL_DEVICE_MAX_MEM_ALLOC_SIZE
 * (a tenant's quota caps it), is confirmed before the call returns, so a
 * refusal is the call's error as natively, not a poisoned id found at first
 * use. Smaller ones stay one-way.
 */
#define SYNC_CREATE_MIN (1u << 20)

static int create_may_fail(cl_context ctx, size_t size, uint64_t live)
{
	if (size >= SYNC_CREATE_MIN)
		return 1;
	for (cl_uint i = 0; i < ctx->ndevices; i++)
		if (ctx->devices[i]->max_alloc && live > ctx->devices[i]->max_alloc)
			return 1;
	return 0;
}

/* The daemon's word on m's creation: 0, or the error it failed with (its id
 * then forgotten there too). */
static cl_int create_confirm(cl_mem m)
{
	struct cmx_GetCreateStatus_in in = {.object = m->id};
	struct cmx_GetCreateStatus_out out;
	struct cmx_ReleaseMem_in rel = {.mem = {m->id}};
	struct cmx_reply r;
	cl_int e;

	e = cmx_reply_status(cmx_rpc_GetCreateStatus(cmx_icd.s, &in, &out, &r), &r);
	if (e)
		(void)CMX_SEND(ReleaseMem, &rel);
	return e;
}

static cl_mem buffer_create(cl_context ctx, const cl_mem_properties *props, cl_mem_flags flags,
			    size_t size, void *host_ptr, cl_int *errcode_ret)
{
	int has_host = (flags & (CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR)) != 0;
	struct cmx_CreateBuffer_in in;
	cl_ulong max_alloc = 0;
	uint64_t live;
	cl_mem m;
	cl_int e;

	if (!CMX_IS(ctx, CMX_MAGIC_CONTEXT))
		return cmx_fail(errcode_ret, CL_INVALID_CONTEXT);
	/* No buffer property is supported: only an empty list passes. */
	if (props && props[0])
		return cmx_fail(errcode_ret, CL_INVALID_PROPERTY);
	if (cmx_mem_flags_check(flags))
		return cmx_fail(errcode_ret, CL_INVALID_VALUE);
	for (cl_uint i = 0; i < ctx->ndevices; i++)
		if (ctx->devices[i]->max_alloc > max_alloc)
			max_alloc = ctx->devices[i]->max_alloc;
	if (!size || (max_alloc && size > max_alloc))
		return cmx_fail(errcode_ret, CL_INVALID_BUFFER_SIZE);
	if (has_host != (host_ptr != NULL))
		return cmx_fail(errcode_ret, CL_INVALID_HOST_PTR);

	m = cmx_mem_new(ctx, flags, size);
	if (!m)
		return cmx_fail(errcode_ret, CL_OUT_OF_HOST_MEMORY);
	/* Counted from here: cmx_mem_free() takes it off. */
	live = atomic_fetch_add(&live_bytes, size) + size;
	if (props) {
		m->props = calloc(1, sizeof(*m->props));
		m->nprops = 1;
		if (!m->props) {
			cmx_mem_free(m);
			return cmx_fail(errcode_ret, CL_OUT_OF_HOST_MEMORY);
		}
	}
	if (flags & CL_MEM_USE_HOST_PTR)
		m->host_ptr = host_ptr;

	/* The contents travel with the creation; for USE_HOST_PTR the daemon
	 * keeps a copy and the guest syncs host_ptr at map/unmap. */
	in = (struct cmx_CreateBuffer_in){
	    .mem = {m->id}, .context = {ctx->id}, .flags = flags, .size = size};
	if (in_heap(ctx, flags, size))
		e = area_buffer_create(m, &in, has_host ? host_ptr : NULL);
	else
		e = CMX_SEND(CreateBuffer, &in, has_host ? host_ptr : NULL, has_host ? size : 0);
	if (!e && create_may_fail(ctx, size, live))
		e = create_confirm(m);
	if (e) {
		cmx_mem_free(m);
		return cmx_fail(errcode_ret, e);
	}
	cmx_clRetainContext(ctx);
	return cmx_succeed(errcode_ret, m);
}

cl_mem cmx_clCreateBuffer(cl_context ctx, cl_mem_flags flags, size_t size, void *host_ptr,
			  cl_int *errcode_ret)
{
	return buffer_create(ctx, NULL, flags, size, host_ptr, errcode_ret);
}

cl_mem cmx_clCreateBufferWithProperties(cl_context ctx, const cl_mem_properties *props,
					cl_mem_flags flags, size_t size, void *host_ptr,
					cl_int *errcode_ret)
{
	return buffer_create(ctx, props, flags, size, host_ptr, errcode_ret);
}

/* Some device of the context takes a sub-buffer starting there. */
static int origin_aligned(cl_context ctx, size_t origin)
{
	for (cl_uint i = 0; i < ctx->ndevices; i++)
		if (origin % align_bytes(ctx->devices[i]) == 0)
			return 1;
	return 0;
}

cl_mem cmx_clCreateSubBuffer(cl_mem parent, cl_mem_flags flags, cl_buffer_create_type type,
			     const void *info, cl_int *errcode_ret)
{
	const cl_buffer_region *r = info;
	struct cmx_CreateSubBuffer_in in;
	cl_mem_flags all;
	cl_mem m;
	cl_int e;

	if (!CMX_IS(parent, CMX_MAGIC_MEM) || parent->type != CL_MEM_OBJECT_BUFFER ||
	    parent->parent)
		return cmx_fail(errcode_ret, CL_INVALID_MEM_OBJECT);
	if (sub_flags(parent->flags, flags, &all) || type != CL_BUFFER_CREATE_TYPE_REGION || !r)
		return cmx_fail(errcode_ret, CL_INVALID_VALUE);
	if (r->origin > parent->size || r->size > parent->size - r->origin)
		return cmx_fail(errcode_ret, CL_INVALID_VALUE);
	if (!r->size)
		return cmx_fail(errcode_ret, CL_INVALID_BUFFER_SIZE);
	if (!origin_aligned(parent->ctx, r->origin))
		return cmx_fail(errcode_ret, CL_MISALIGNED_SUB_BUFFER_OFFSET);

	m = cmx_mem_new(parent->ctx, all, r->size);
	if (!m)
		return cmx_fail(errcode_ret, CL_OUT_OF_HOST_MEMORY);
	m->parent = parent;
	m->origin = r->origin;
	if (parent->host_ptr)
		m->host_ptr = (char *)parent->host_ptr + r->origin;
	if (parent->area_off) {
		m->area_off = parent->area_off + r->origin;
		m->heap = parent->heap;
	}
	/* The daemon gets the flags as given: the native call inherits too. */
	in = (struct cmx_CreateSubBuffer_in){.mem = {m->id},
					     .parent = {parent->id},
					     .flags = flags,
					     .origin = r->origin,
					     .size = r->size};
	e = CMX_SEND(CreateSubBuffer, &in);
	if (e) {
		cmx_mem_free(m);
		return cmx_fail(errcode_ret, e);
	}
	/* The parent outlives its sub-buffers, here and (by this order of
	 * releases) in the daemon. */
	cmx_clRetainMemObject(parent);
	cmx_clRetainContext(m->ctx);
	return cmx_succeed(errcode_ret, m);
}

cl_int cmx_clRetainMemObject(cl_mem m)
{
	if (!CMX_IS(m, CMX_MAGIC_MEM))
		return CL_INVALID_MEM_OBJECT;
	atomic_fetch_add(&m->refs, 1);
	return CL_SUCCESS;
}

/*
 * The last reference: the daemon releases the native object, whose
 * destruction fires the destructors (MemDestroyed). The struct stays until
 * the last of them ran, so each gets the cl_mem it was registered on.
 */
cl_int cmx_clReleaseMemObject(cl_mem m)
{
	struct cmx_ReleaseMem_in in;
	cl_context ctx;
	cl_mem parent;
	int waiting;

	if (!CMX_IS(m, CMX_MAGIC_MEM))
		return CL_INVALID_MEM_OBJECT;
	if (atomic_fetch_sub(&m->refs, 1) != 1)
		return CL_SUCCESS;
	m->magic = 0; /* a stale handle now fails CMX_IS */
	ctx = m->ctx;
	parent = m->parent;
	in.mem.id = m->id;
	/* No destructor can be added now (no reference is left) and none can
	 * fire before ReleaseMem is sent: past the send, m may be freed by
	 * cmx_mem_destructor_fired() when `waiting`. */
	pthread_mutex_lock(&m->lock);
	waiting = m->destructors != NULL;
	pthread_mutex_unlock(&m->lock);
	/* A broken session has dropped it already; one that ended takes no
	 * call naming it. Then the daemon will never say it was destroyed:
	 * the destructors run here, latest first, as MemDestroyed runs them. */
	if (CMX_SEND(ReleaseMem, &in) && waiting) {
		while (m->destructors) {
			struct cmx_destructor *d = m->destructors;
			m->destructors = d->next;
			d->fn(m, d->user_data);
			free(d);
		}
		waiting = 0;
	}
	/* The destructors are the application's to wait for, perhaps without
	 * another OpenCL call: the release must not sit in the batch. */
	if (waiting)
		(void)cmx_session_flush(cmx_icd.s);
	if (!waiting)
		cmx_mem_free(m);
	if (parent)
		cmx_clReleaseMemObject(parent);
	cmx_clReleaseContext(ctx);
	return CL_SUCCESS;
}

cl_int cmx_clSetMemObjectDestructorCallback(cl_mem m, void(CL_CALLBACK *fn)(cl_mem, void *),
					    void *user_data)
{
	struct cmx_SetMemDestructor_in in;
	struct mem_destructor *d;
	struct cmx_destructor **p;
	cl_int e;

	if (!CMX_IS(m, CMX_MAGIC_MEM))
		return CL_INVALID_MEM_OBJECT;
	if (!fn)
		return CL_INVALID_VALUE;
	d = malloc(sizeof(*d));
	if (!d)
		return CL_OUT_OF_HOST_MEMORY;
	d->d.fn = (void(CL_CALLBACK *)(void *, void *))fn;
	d->d.user_data = user_data;
	d->mem = m;
	pthread_mutex_lock(&m->lock);
	d->d.next = m->destructors;
	m->destructors = &d->d;
	pthread_mutex_unlock(&m->lock);
	in.mem.id = m->id;
	in.tag = (uintptr_t)d;
	e = CMX_SEND(SetMemDestructor, &in);
	if (e) {
		pthread_mutex_lock(&m->lock);
		for (p = &m->destructors; *p != &d->d; p = &(*p)->next)
			;
		*p = d->d.next;
		pthread_mutex_unlock(&m->lock);
		free(d);
	}
	return e;
}

/* MemDestroyed(tag), on the notification thread. The daemon registered the
 * native callbacks in our order, so they arrive in reverse, as the spec
 * wants. */
void cmx_mem_destructor_fired(uint64_t tag)
{
	struct mem_destructor *d = (struct mem_destructor *)(uintptr_t)tag;
	struct cmx_destructor **p;
	cl_mem m = d->mem;
	int last;

	pthread_mutex_lock(&m->lock);
	for (p = &m->destructors; *p && *p != &d->d; p = &(*p)->next)
		;
	if (*p)
		*p = d->d.next;
	last = m->destructors == NULL;
	pthread_mutex_unlock(&m->lock);
	d->d.fn(m, d->d.user_data);
	free(d);
	/* Destruction follows the last release, so refs is 0 here. */
	if (last && atomic_load(&m->refs) == 0)
		cmx_mem_free(m);
}

cl_int cmx_clGetMemObjectInfo(cl_mem m, cl_mem_info param, size_t size, void *value,
			      size_t *size_ret)
{
	union {
		cl_mem_object_type type;
		cl_mem_flags flags;
		size_t size;
		void *ptr;
		cl_uint u;
		cl_context ctx;
		cl_mem mem;
		cl_bool b;
	} v;
	size_t n;

	if (!CMX_IS(m, CMX_MAGIC_MEM))
		return CL_INVALID_MEM_OBJECT;
	switch (param) {
	case CL_MEM_TYPE:
		v.type = m->type, n = sizeof(v.type);
		break;
	case CL_MEM_FLAGS:
		v.flags = m->flags, n = sizeof(v.flags);
		break;
	case CL_MEM_SIZE:
		v.size = m->size, n = sizeof(v.size);
		break;
	case CL_MEM_HOST_PTR:
		v.ptr = m->host_ptr, n = sizeof(v.ptr);
		break;
	case CL_MEM_MAP_COUNT:
		v.u = atomic_load(&m->map_count), n = sizeof(v.u);
		break;
	case CL_MEM_REFERENCE_COUNT:
		v.u = atomic_load(&m->refs), n = sizeof(v.u);
		break;
	case CL_MEM_CONTEXT:
		v.ctx = m->ctx, n = sizeof(v.ctx);
		break;
	case CL_MEM_ASSOCIATED_MEMOBJECT:
		v.mem = m->parent, n = sizeof(v.mem);
		break;
	case CL_MEM_OFFSET:
		v.size = m->origin, n = sizeof(v.size);
		break;
	case CL_MEM_USES_SVM_POINTER:
		v.b = CL_FALSE, n = sizeof(v.b);
		break;
	case CL_MEM_PROPERTIES:
		return cmx_info_copy(size, value, size_ret, m->props,
				     m->nprops * sizeof(*m->props));
	default:
		return CL_INVALID_VALUE;
	}
	return cmx_info_copy(size, value, size_ret, &v, n);
}

/* ---- reads and writes ---- */

/* The checks a read (host_reads) or a write of [off, off + size) of m
 * starts with. */
static cl_int io_check(cl_command_queue q, cl_mem m, size_t off, size_t size, const void *ptr,
		       int host_reads)
{
	cl_int e = check_qmem(q, m);

	if (!e && (!ptr || !in_range(off, size, m->size)))
		e = CL_INVALID_VALUE;
	if (!e)
		e = cmx_mem_host_access(m, host_reads, !host_reads);
	return e;
}

cl_int cmx_clEnqueueReadBuffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t off,
			       size_t size, void *ptr, cl_uint n, const cl_event *list,
			       cl_event *event)
{
	struct cmx_cmd c;
	cl_int e = io_check(q, m, off, size, ptr, 1);

	if (!e && !blocking && area_direct(q, m, size))
		return area_later(q, m, off, size, ptr, 0, n, list, event);
	if (e || (e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_READ_BUFFER)))
		return e;
	e = cmx_cmd_end(&c, read_region(q, m, blocking, off, size, ptr, &c, NULL, NULL));
	if (!e && blocking)
		cmx_blocking_done(q, n, list);
	return e;
}

cl_int cmx_clEnqueueWriteBuffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t off,
				size_t size, const void *ptr, cl_uint n, const cl_event *list,
				cl_event *event)
{
	struct cmx_WriteBuffer_in in;
	struct cmx_cmd c;
	cl_int e = io_check(q, m, off, size, ptr, 0);

	if (!e && !blocking && area_direct(q, m, size))
		return area_later(q, m, off, size, (void *)ptr, 1, n, list, event);
	if (e || (e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_WRITE_BUFFER)))
		return e;
	in = (struct cmx_WriteBuffer_in){.queue = {q->id},
					 .mem = {m->id},
					 .offset = off,
					 .size = size,
					 .wait = CMD_WAIT(&c),
					 .event = {c.ev_id}};
	/* Either way the data leaves with the command: ptr is free on return. */
	if (blocking && area_direct(q, m, size)) {
		e = area_transfer(q, m, off, size, (void *)ptr, 1, &c);
	} else if (blocking && (e = lanes_write(&in, ptr)) != -1) {
		/* done over the lanes */
	} else if (blocking) {
		struct cmx_WriteBuffer_out out;
		struct cmx_reply r;
		size_t k, nk = chunks_before_last(q, size);

		for (k = 0, e = CL_SUCCESS; k < nk && !e; k++) {
			struct cmx_WriteBuffer_in ci = in;

			ci.offset = off + k * CHUNK;
			ci.size = CHUNK;
			ci.event.id = 0;
			if (k)
				ci.wait.n = 0;
			e = CMX_SEND(WriteBuffer, &ci, (const char *)ptr + k * CHUNK, CHUNK);
		}
		if (nk) {
			in.offset += nk * CHUNK;
			in.size -= nk * CHUNK;
			in.wait.n = 0;
			ptr = (const char *)ptr + nk * CHUNK;
			size -= nk * CHUNK;
		}

		if (!e)
			e = cmx_reply_status(
			    cmx_rpc_WriteBuffer(cmx_icd.s, &in, ptr, size, &out, &r), &r);
	} else {
		e = CMX_SEND(WriteBuffer, &in, ptr, size);
	}
	e = cmx_cmd_end(&c, e);
	if (!e && blocking)
		cmx_blocking_done(q, n, list);
	return e;
}

/* ---- rectangles ---- */

/* A rect transfer's checked geometry, default pitches filled in. The wire's
 * host side is packed: rows of region[0], slices of region[0] * region[1]. */
struct rect {
	uint64_t bo[3], r[3]; /* buffer origin and region, for the wire */
	size_t brow, bslice;  /* buffer pitches */
	size_t hrow, hslice;  /* host pitches */
	size_t host_off;      /* of host_origin in the application's memory */
	size_t packed;	      /* bytes on the wire */
};

static size_t rect_start(const size_t o[3], size_t row, size_t slice)
{
	return o[2] * slice + o[1] * row + o[0];
}

/* The checks a rect read (host_reads) or write starts with; fills x. */
static cl_int rect_check(cl_command_queue q, cl_mem m, const size_t bo[3], const size_t ho[3],
			 const size_t r[3], size_t brow, size_t bslice, size_t hrow, size_t hslice,
			 const void *ptr, int host_reads, struct rect *x)
{
	size_t end;
	cl_int e = check_qmem(q, m);

	if (e)
		return e;
	if (!bo || !ho || !r || !ptr || !r[0] || !r[1] || !r[2])
		return CL_INVALID_VALUE;
	if (cmx_cl_rect_pitches_bad(r, &brow, &bslice) ||
	    cmx_cl_rect_pitches_bad(r, &hrow, &hslice))
		return CL_INVALID_VALUE;
	if (cmx_cl_rect_end(bo, r, brow, bslice, &end) || end > m->size)
		return CL_INVALID_VALUE;
	if (cmx_cl_rect_end(ho, r, hrow, hslice, &end))
		return CL_INVALID_VALUE;
	e = cmx_mem_host_access(m, host_reads, !host_reads);
	if (e)
		return e;
	for (int i = 0; i < 3; i++) {
		x->bo[i] = bo[i];
		x->r[i] = r[i];
	}
	x->brow = brow, x->bslice = bslice;
	x->hrow = hrow, x->hslice = hslice;
	x->host_off = rect_start(ho, hrow, hslice);
	/* No overflow: the buffer side, at least this large, fits in size. */
	x->packed = r[0] * r[1] * r[2];
	return CL_SUCCESS;
}

/* The host region is already packed: it can go or land as it is. */
static int rect_is_packed(const struct rect *x)
{
	return (x->r[1] == 1 || x->hrow == x->r[0]) &&
	       (x->r[2] == 1 || x->hslice == x->r[0] * x->r[1]);
}

/* Copies the host region between the application's pitched memory and a
 * packed buffer, in the direction `pack` says. */
void cmx_pitched_copy(char *pitched, char *packed, size_t w, size_t rows, size_t slices,
		      size_t row_pitch, size_t slice_pitch, int pack)
{
	for (size_t z = 0; z < slices; z++)
		for (size_t y = 0; y < rows; y++) {
			char *h = pitched + z * slice_pitch + y * row_pitch;
			char *p = packed + (z * rows + y) * w;

			memcpy(pack ? p : h, pack ? h : p, w);
		}
}

static void rect_copy(const struct rect *x, char *pitched, char *packed, int pack)
{
	cmx_pitched_copy(pitched, packed, x->r[0], x->r[1], x->r[2], x->hrow, x->hslice, pack);
}

cl_int cmx_clEnqueueReadBufferRect(cl_command_queue q, cl_mem m, cl_bool blocking, const size_t *bo,
				   const size_t *ho, const size_t *region, size_t brow,
				   size_t bslice, size_t hrow, size_t hslice, void *ptr, cl_uint n,
				   const cl_event *list, cl_event *event)
{
	struct cmx_ReadBufferRect_in in;
	struct cmx_pending_read *p;
	struct rect x;
	struct cmx_cmd c;
	char *out;
	void *tmp;
	cl_int e = rect_check(q, m, bo, ho, region, brow, bslice, hrow, hslice, ptr, 1, &x);

	if (e)
		return e;
	out = (char *)ptr + x.host_off;
	tmp = rect_is_packed(&x) ? out : malloc(x.packed);
	if (!tmp)
		return CL_OUT_OF_HOST_MEMORY;
	e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_READ_BUFFER_RECT);
	if (e)
		goto out_tmp;
	in = (struct cmx_ReadBufferRect_in){.queue = {q->id},
					    .mem = {m->id},
					    .origin = {x.bo, 3},
					    .region = {x.r, 3},
					    .row_pitch = x.brow,
					    .slice_pitch = x.bslice,
					    .wait = CMD_WAIT(&c),
					    .event = {c.ev_id}};
	if (blocking) {
		struct cmx_ReadBufferRect_out o;
		struct cmx_reply r;

		e = cmx_reply_status(
		    cmx_rpc_ReadBufferRect(cmx_icd.s, &in, &o, &r, tmp, x.packed), &r);
		if (!e && tmp != out)
			rect_copy(&x, out, tmp, 0);
		e = cmx_cmd_end(&c, e);
		if (!e)
			cmx_blocking_done(q, n, list);
		goto out_tmp;
	}
	p = cmx_pending_new(q, c.ev, tmp, x.packed);
	if (!p) {
		e = cmx_cmd_end(&c, CL_OUT_OF_HOST_MEMORY);
		goto out_tmp;
	}
	if (tmp != out) {
		/* cmx_read_landed() spreads it out (host pitches) and frees tmp. */
		p->out = out;
		for (int i = 0; i < 3; i++)
			p->region[i] = x.r[i];
		p->row_pitch = x.hrow;
		p->slice_pitch = x.hslice;
	}
	in.tag = (uintptr_t)p;
	/* On failure p is cancelled, which frees tmp too. */
	e = cmx_pending_send(p, &cmx_desc_ReadBufferRect_in, &in, 1);
	return cmx_cmd_end(&c, e);

out_tmp:
	if (tmp != out)
		free(tmp);
	return e;
}

cl_int cmx_clEnqueueWriteBufferRect(cl_command_queue q, cl_mem m, cl_bool blocking,
				    const size_t *bo, const size_t *ho, const size_t *region,
				    size_t brow, size_t bslice, size_t hrow, size_t hslice,
				    const void *ptr, cl_uint n, const cl_event *list,
				    cl_event *event)
{
	struct cmx_WriteBufferRect_in in;
	struct rect x;
	struct cmx_cmd c;
	char *src;
	void *tmp;
	cl_int e = rect_check(q, m, bo, ho, region, brow, bslice, hrow, hslice, ptr, 0, &x);

	if (e)
		return e;
	src = (char *)ptr + x.host_off;
	tmp = rect_is_packed(&x) ? src : malloc(x.packed);
	if (!tmp)
		return CL_OUT_OF_HOST_MEMORY;
	if (tmp != src)
		rect_copy(&x, src, tmp, 1);
	e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_WRITE_BUFFER_RECT);
	if (e)
		goto out;
	in = (struct cmx_WriteBufferRect_in){.queue = {q->id},
					     .mem = {m->id},
					     .origin = {x.bo, 3},
					     .region = {x.r, 3},
					     .row_pitch = x.brow,
					     .slice_pitch = x.bslice,
					     .wait = CMD_WAIT(&c),
					     .event = {c.ev_id}};
	if (blocking) {
		struct cmx_WriteBufferRect_out o;
		struct cmx_reply r;

		e = cmx_reply_status(
		    cmx_rpc_WriteBufferRect(cmx_icd.s, &in, tmp, x.packed, &o, &r), &r);
	} else {
		e = CMX_SEND(WriteBufferRect, &in, tmp, x.packed);
	}
	e = cmx_cmd_end(&c, e);
	if (!e && blocking)
		cmx_blocking_done(q, n, list);
out:
	if (tmp != src)
		free(tmp);
	return e;
}

/* ---- copies and fills ---- */

static cl_mem root_of(cl_mem m)
{
	return m->parent ? m->parent : m;
}

cl_int cmx_copy_buffer_check(cl_command_queue q, cl_mem src, cl_mem dst, size_t soff, size_t doff,
			     size_t size)
{
	cl_int e = check_qmem(q, src);

	if (!e)
		e = check_qmem(q, dst);
	if (!e && (!in_range(soff, size, src->size) || !in_range(doff, size, dst->size)))
		e = CL_INVALID_VALUE;
	/* Overlap counts in the memory they share: the same buffer, or two
	 * sub-buffers of one parent. */
	if (!e && root_of(src) == root_of(dst)) {
		size_t a = src->origin + soff, b = dst->origin + doff;

		if (a < b + size && b < a + size)
			e = CL_MEM_COPY_OVERLAP;
	}
	return e;
}

cl_int cmx_clEnqueueCopyBuffer(cl_command_queue q, cl_mem src, cl_mem dst, size_t soff, size_t doff,
			       size_t size, cl_uint n, const cl_event *list, cl_event *event)
{
	struct cmx_CopyBuffer_in in;
	struct cmx_cmd c;
	cl_int e = cmx_copy_buffer_check(q, src, dst, soff, doff, size);

	if (e || (e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_COPY_BUFFER)))
		return e;
	in = (struct cmx_CopyBuffer_in){.queue = {q->id},
					.src = {src->id},
					.dst = {dst->id},
					.src_offset = soff,
					.dst_offset = doff,
					.size = size,
					.wait = CMD_WAIT(&c),
					.event = {c.ev_id}};
	return cmx_cmd_end(&c, CMX_SEND(CopyBuffer, &in));
}

/*
 * Whether two rects with the same pitches, in one linear memory, share a
 * byte (the test of the spec's appendix on copy overlap): their extents
 * meet, and neither fits in the other's gap between rows, nor between
 * slices. Slice pitches are multiples of row pitches (checked before).
 */
static int rects_overlap(size_t so, size_t dof, const size_t r[3], size_t row, size_t slice)
{
	size_t plane = (r[1] - 1) * row + r[0];
	size_t block = (r[2] - 1) * slice + plane;
	size_t sx = so % row, dx = dof % row, sy = so % slice, dy = dof % slice;

	if (dof + block <= so || so + block <= dof)
		return 0;
	if ((dx >= sx + r[0] && dx + r[0] <= sx + row) ||
	    (sx >= dx + r[0] && sx + r[0] <= dx + row))
		return 0;
	if ((dy >= sy + plane && dy + plane <= sy + slice) ||
	    (sy >= dy + plane && sy + plane <= dy + slice))
		return 0;
	return 1;
}

cl_int cmx_copy_buffer_rect_check(cl_command_queue q, cl_mem src, cl_mem dst, const size_t *so,
				  const size_t *dor, const size_t *region, size_t *srowp,
				  size_t *sslicep, size_t *drowp, size_t *dslicep)
{
	size_t send, dend, srow = *srowp, sslice = *sslicep, drow = *drowp, dslice = *dslicep;
	cl_int e = check_qmem(q, src);

	if (!e)
		e = check_qmem(q, dst);
	if (e)
		return e;
	if (!so || !dor || !region || !region[0] || !region[1] || !region[2] ||
	    cmx_cl_rect_pitches_bad(region, &srow, &sslice) ||
	    cmx_cl_rect_pitches_bad(region, &drow, &dslice))
		return CL_INVALID_VALUE;
	*srowp = srow, *sslicep = sslice, *drowp = drow, *dslicep = dslice;
	if (src == dst && sslice != dslice && srow != drow)
		return CL_INVALID_VALUE;
	if (cmx_cl_rect_end(so, region, srow, sslice, &send) || send > src->size ||
	    cmx_cl_rect_end(dor, region, drow, dslice, &dend) || dend > dst->size)
		return CL_INVALID_VALUE;
	if (root_of(src) == root_of(dst)) {
		size_t s0 = src->origin + rect_start(so, srow, sslice);
		size_t d0 = dst->origin + rect_start(dor, drow, dslice);

		/* Pitches that differ leave no simple pattern: any meeting of
		 * the extents counts as overlap. */
		if (srow == drow && sslice == dslice
			? rects_overlap(s0, d0, region, srow, sslice)
			: s0 < dst->origin + dend && d0 < src->origin + send)
			return CL_MEM_COPY_OVERLAP;
	}
	return CL_SUCCESS;
}

cl_int cmx_clEnqueueCopyBufferRect(cl_command_queue q, cl_mem src, cl_mem dst, const size_t *so,
				   const size_t *dor, const size_t *region, size_t srow,
				   size_t sslice, size_t drow, size_t dslice, cl_uint n,
				   const cl_event *list, cl_event *event)
{
	struct cmx_CopyBufferRect_in in;
	uint64_t so64[3], do64[3], r64[3];
	struct cmx_cmd c;
	cl_int e = cmx_copy_buffer_rect_check(q, src, dst, so, dor, region, &srow, &sslice, &drow,
					      &dslice);

	if (e)
		return e;
	if ((e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_COPY_BUFFER_RECT)))
		return e;
	for (int i = 0; i < 3; i++)
		so64[i] = so[i], do64[i] = dor[i], r64[i] = region[i];
	in = (struct cmx_CopyBufferRect_in){.queue = {q->id},
					    .src = {src->id},
					    .dst = {dst->id},
					    .src_origin = {so64, 3},
					    .dst_origin = {do64, 3},
					    .region = {r64, 3},
					    .src_row_pitch = srow,
					    .src_slice_pitch = sslice,
					    .dst_row_pitch = drow,
					    .dst_slice_pitch = dslice,
					    .wait = CMD_WAIT(&c),
					    .event = {c.ev_id}};
	return cmx_cmd_end(&c, CMX_SEND(CopyBufferRect, &in));
}

cl_int cmx_fill_buffer_check(cl_command_queue q, cl_mem m, const void *pattern, size_t psize,
			     size_t off, size_t size)
{
	cl_int e = check_qmem(q, m);

	/* Pattern sizes: 1, 2, 4, ..., 128 (the largest type, double16). */
	if (!e && (!pattern || !psize || psize > 128 || (psize & (psize - 1)) || off % psize ||
		   size % psize || !in_range(off, size, m->size)))
		e = CL_INVALID_VALUE;
	return e;
}

cl_int cmx_clEnqueueFillBuffer(cl_command_queue q, cl_mem m, const void *pattern, size_t psize,
			       size_t off, size_t size, cl_uint n, const cl_event *list,
			       cl_event *event)
{
	struct cmx_FillBuffer_in in;
	struct cmx_cmd c;
	cl_int e = cmx_fill_buffer_check(q, m, pattern, psize, off, size);

	if (e || (e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_FILL_BUFFER)))
		return e;
	in = (struct cmx_FillBuffer_in){.queue = {q->id},
					.mem = {m->id},
					.pattern = {pattern, psize},
					.offset = off,
					.size = size,
					.wait = CMD_WAIT(&c),
					.event = {c.ev_id}};
	return cmx_cmd_end(&c, CMX_SEND(FillBuffer, &in));
}

cl_int cmx_clEnqueueMigrateMemObjects(cl_command_queue q, cl_uint nmem, const cl_mem *mems,
				      cl_mem_migration_flags flags, cl_uint n, const cl_event *list,
				      cl_event *event)
{
	const cl_mem_migration_flags known =
	    CL_MIGRATE_MEM_OBJECT_HOST | CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED;
	struct cmx_MigrateMem_in in;
	uint64_t small[32], *ids;
	struct cmx_cmd c;
	cl_int e;

	if (!CMX_IS(q, CMX_MAGIC_QUEUE))
		return CL_INVALID_COMMAND_QUEUE;
	if (!nmem || !mems || (flags & ~known))
		return CL_INVALID_VALUE;
	for (cl_uint i = 0; i < nmem; i++) {
		if (!CMX_IS(mems[i], CMX_MAGIC_MEM))
			return CL_INVALID_MEM_OBJECT;
		if (mems[i]->ctx != q->ctx)
			return CL_INVALID_CONTEXT;
	}
	ids = nmem <= 32 ? small : malloc(nmem * sizeof(*ids));
	if (!ids)
		return CL_OUT_OF_HOST_MEMORY;
	for (cl_uint i = 0; i < nmem; i++)
		ids[i] = mems[i]->id;
	e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_MIGRATE_MEM_OBJECTS);
	if (!e) {
		in = (struct cmx_MigrateMem_in){.queue = {q->id},
						.mems = {ids, nmem},
						.flags = flags,
						.wait = CMD_WAIT(&c),
						.event = {c.ev_id}};
		e = cmx_cmd_end(&c, CMX_SEND(MigrateMem, &in));
	}
	if (ids != small)
		free(ids);
	return e;
}

/* ---- maps: guest memory, filled by a read and written back on unmap ---- */

static void mapping_free(struct cmx_mapping *mp)
{
	if (mp->owned)
		free(mp->ptr);
	free(mp->stage);
	free(mp);
}

/* Between a host_ptr image map's packed stage and host_ptr (pack: into
 * the stage). */
static void mapping_host_copy(struct cmx_mapping *mp, int pack)
{
	if (mp->stage)
		cmx_pitched_copy(mp->ptr, mp->stage, mp->w, mp->rows, mp->slices, mp->hrow,
				 mp->hslice, pack);
}

/* Makes mp, whose ptr holds the packed box, a map into host_ptr at origin
 * (the spec's rule for CL_MEM_USE_HOST_PTR images); a 1D array's images
 * are its rows. */
static void mapping_into_host(cl_mem m, struct cmx_mapping *mp, const size_t *o,
			      const size_t *r)
{
	size_t row, slice, elem = m->image->elem;
	int arr1d = m->type == CL_MEM_OBJECT_IMAGE1D_ARRAY;

	cmx_image_host_pitches(m, &row, &slice);
	mp->stage = mp->ptr;
	mp->owned = 0;
	mp->w = r[0] * elem;
	mp->rows = r[1];
	mp->slices = arr1d ? 1 : r[2];
	mp->hrow = arr1d ? slice : row;
	mp->hslice = slice;
	mp->ptr = (char *)m->host_ptr + o[0] * elem + (arr1d ? o[1] * slice : o[1] * row + o[2] * slice);
}

static cl_int mapping_new(cl_mem m, size_t off, size_t size, cl_map_flags flags,
			  struct cmx_mapping **out)
{
	struct cmx_mapping *mp = calloc(1, sizeof(*mp));
	long page = sysconf(_SC_PAGESIZE);

	if (!mp)
		return CL_OUT_OF_HOST_MEMORY;
	mp->offset = off;
	mp->size = size;
	mp->flags = flags;
	/* USE_HOST_PTR: the spec has the map point into host_ptr (buffers
	 * here; images: mapping_into_host()). */
	if ((m->flags & CL_MEM_USE_HOST_PTR) && !m->image) {
		mp->ptr = (char *)m->host_ptr + off;
	} else if (m->area_off && !m->image) {
		mp->ptr = area_at(m, off); /* the storage itself */
	} else {
		/* The last map's memory when it fits without wasting half. */
		pthread_mutex_lock(&m->lock);
		if (m->spare && m->spare_size >= size && m->spare_size / 2 <= size) {
			mp->ptr = m->spare;
			mp->cap = m->spare_size;
			m->spare = NULL;
		}
		pthread_mutex_unlock(&m->lock);
		if (!mp->ptr) {
			if (posix_memalign(&mp->ptr, page > 0 ? (size_t)page : 4096,
					   size ? size : 1)) {
				free(mp);
				return CL_OUT_OF_HOST_MEMORY;
			}
			mp->cap = size;
		}
		mp->owned = 1;
	}
	*out = mp;
	return CL_SUCCESS;
}

/* Frees a mapping now, or when its read lands if that is still to come:
 * the notification thread writes into its memory until then. */
static void mapping_drop(struct cmx_mapping *mp)
{
	int later;

	pthread_mutex_lock(&map_lock);
	later = mp->landing;
	mp->dropped = later;
	pthread_mutex_unlock(&map_lock);
	if (!later)
		mapping_free(mp);
}

/* An unmapped mapping: its memory stays with the buffer for the next map
 * (one at a time), unless a read may still land in it. */
static void mapping_retire(cl_mem m, struct cmx_mapping *mp)
{
	int keep;

	pthread_mutex_lock(&map_lock);
	keep = mp->owned && !mp->landing;
	pthread_mutex_unlock(&map_lock);
	if (keep) {
		pthread_mutex_lock(&m->lock);
		if (!m->spare) {
			m->spare = mp->ptr;
			m->spare_size = mp->cap;
			mp->owned = 0;
		}
		pthread_mutex_unlock(&m->lock);
	}
	mapping_drop(mp);
}

/* A non-blocking map's read is done (notification thread). */
static void map_landed(struct cmx_pending_read *r, int status)
{
	struct cmx_mapping *mp = r->arg;
	int dropped;

	/* Before the event reads complete (cmx_read_landed()); host_ptr is
	 * the application's until the image is destroyed, after this. */
	if (status >= 0)
		mapping_host_copy(mp, 0);
	pthread_mutex_lock(&map_lock);
	mp->landing = 0;
	dropped = mp->dropped;
	pthread_cond_broadcast(&map_cond);
	pthread_mutex_unlock(&map_lock);
	if (dropped)
		mapping_free(mp);
}

/* CL_SUCCESS once the map's data is in, or an error when it never will be. */
static cl_int map_wait_landed(struct cmx_mapping *mp)
{
	int landing;

	pthread_mutex_lock(&map_lock);
	landing = mp->landing;
	pthread_mutex_unlock(&map_lock);
	if (!landing)
		return CL_SUCCESS;
	if (!session_sent())
		return CL_OUT_OF_RESOURCES;
	pthread_mutex_lock(&map_lock);
	while (mp->landing)
		pthread_cond_wait(&map_cond, &map_lock);
	pthread_mutex_unlock(&map_lock);
	return CL_SUCCESS;
}

static void mapping_link(cl_mem m, struct cmx_mapping *mp)
{
	pthread_mutex_lock(&m->lock);
	mp->next = m->maps;
	m->maps = mp;
	pthread_mutex_unlock(&m->lock);
}

static struct cmx_mapping *mapping_unlink(cl_mem m, void *ptr)
{
	struct cmx_mapping **p, *mp;

	pthread_mutex_lock(&m->lock);
	for (p = &m->maps; *p && (*p)->ptr != ptr; p = &(*p)->next)
		;
	mp = *p;
	if (mp)
		*p = mp->next;
	pthread_mutex_unlock(&m->lock);
	return mp;
}

/* Known bits only; an invalidating map neither reads nor merges writes. */
static int map_flags_bad(cl_map_flags f)
{
	if (f & ~(cl_map_flags)(CL_MAP_READ | MAP_WRITES))
		return 1;
	return (f & CL_MAP_WRITE_INVALIDATE_REGION) && (f & (CL_MAP_READ | CL_MAP_WRITE));
}

/* The end of a map whose read (or marker) was sent with status e. */
static void *map_end(cl_command_queue q, cl_mem m, struct cmx_mapping *mp, struct cmx_cmd *c,
		     cl_int e, cl_bool blocking, cl_uint n, const cl_event *list,
		     cl_int *errcode_ret)
{
	e = cmx_cmd_end(c, e);
	if (e) {
		mapping_free(mp);
		return cmx_fail(errcode_ret, e);
	}
	mapping_link(m, mp);
	atomic_fetch_add(&m->map_count, 1);
	if (blocking)
		cmx_blocking_done(q, n, list);
	return cmx_succeed(errcode_ret, mp->ptr);
}

void *cmx_clEnqueueMapBuffer(cl_command_queue q, cl_mem m, cl_bool blocking, cl_map_flags flags,
			     size_t off, size_t size, cl_uint n, const cl_event *list,
			     cl_event *event, cl_int *errcode_ret)
{
	struct cmx_mapping *mp;
	struct cmx_cmd c;
	cl_int e = check_qmem(q, m);

	if (!e && (map_flags_bad(flags) || !in_range(off, size, m->size)))
		e = CL_INVALID_VALUE;
	if (!e)
		e = cmx_mem_host_access(m, (flags & CL_MAP_READ) != 0, (flags & MAP_WRITES) != 0);
	if (e || (e = mapping_new(m, off, size, flags, &mp)))
		return cmx_fail(errcode_ret, e);
	e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_MAP_BUFFER);
	if (e) {
		mapping_free(mp);
		return cmx_fail(errcode_ret, e);
	}
	if (m->area_off) {
		/* The daemon maps natively: the bytes are where mp->ptr points. */
		e = area_map(q, m, blocking, flags, off, size, &c);
	} else if (flags & CL_MAP_WRITE_INVALIDATE_REGION) {
		/* Nothing to read: a marker gives the event its place in order. */
		e = send_marker(q, &c);
	} else {
		mp->landing = !blocking; /* not shared yet: no lock needed */
		e = read_region(q, m, blocking, off, size, mp->ptr, &c, map_landed, mp);
	}
	return map_end(q, m, mp, &c, e, blocking, n, list, errcode_ret);
}

/* An image's map is its box packed in guest memory: rows of region[0]
 * pixels, slices (or a 1D array's images) of region[1] rows; that of a
 * CL_MEM_USE_HOST_PTR image is host_ptr itself, in its pitches. */
void *cmx_clEnqueueMapImage(cl_command_queue q, cl_mem m, cl_bool blocking, cl_map_flags flags,
			    const size_t *origin, const size_t *region, size_t *row_pitch,
			    size_t *slice_pitch, cl_uint n, const cl_event *list, cl_event *event,
			    cl_int *errcode_ret)
{
	struct cmx_mapping *mp;
	size_t row, slice = 0;
	struct cmx_cmd c;
	int slices;
	cl_int e = cmx_image_check(q, m);

	if (!e)
		e = cmx_image_region_check(m, origin, region);
	if (e)
		return cmx_fail(errcode_ret, e);
	slices = m->type == CL_MEM_OBJECT_IMAGE3D || m->type == CL_MEM_OBJECT_IMAGE2D_ARRAY ||
		 m->type == CL_MEM_OBJECT_IMAGE1D_ARRAY;
	if (map_flags_bad(flags) || !row_pitch || (slices && !slice_pitch))
		return cmx_fail(errcode_ret, CL_INVALID_VALUE);
	e = cmx_mem_host_access(m, (flags & CL_MAP_READ) != 0, (flags & MAP_WRITES) != 0);
	/* The region was checked: its byte count does not overflow. */
	row = m->image->elem * region[0];
	if (e || (e = mapping_new(m, 0, row * region[1] * region[2], flags, &mp)))
		return cmx_fail(errcode_ret, e);
	for (int i = 0; i < 3; i++)
		mp->origin[i] = origin[i], mp->region[i] = region[i];
	if ((m->flags & CL_MEM_USE_HOST_PTR) && m->host_ptr)
		mapping_into_host(m, mp, origin, region);
	e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_MAP_IMAGE);
	if (e) {
		mapping_free(mp);
		return cmx_fail(errcode_ret, e);
	}
	if (flags & CL_MAP_WRITE_INVALIDATE_REGION) {
		e = send_marker(q, &c);
	} else {
		mp->landing = !blocking; /* not shared yet: no lock needed */
		e = cmx_image_read_packed(q, m, blocking, origin, region,
					  mp->stage ? mp->stage : mp->ptr, &c, map_landed, mp);
		if (!e && blocking)
			mapping_host_copy(mp, 0);
	}
	if (m->type == CL_MEM_OBJECT_IMAGE1D_ARRAY)
		slice = row;
	else if (slices)
		slice = row * region[1];
	if (mp->stage) {
		cmx_image_host_pitches(m, &row, &slice);
		if (!slices)
			slice = 0;
	}
	*row_pitch = row;
	if (slice_pitch)
		*slice_pitch = slice;
	return map_end(q, m, mp, &c, e, blocking, n, list, errcode_ret);
}

cl_int cmx_clEnqueueUnmapMemObject(cl_command_queue q, cl_mem m, void *ptr, cl_uint n,
				   const cl_event *list, cl_event *event)
{
	struct cmx_mapping *mp;
	struct cmx_cmd c;
	cl_int e = CMX_IS(m, CMX_MAGIC_MEM) && m->image ? cmx_image_check(q, m) : check_qmem(q, m);

	if (e)
		return e;
	mp = mapping_unlink(m, ptr);
	if (!mp)
		return CL_INVALID_VALUE;
	e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_UNMAP_MEM_OBJECT);
	if (e)
		goto relink;
	if (m->area_off && !m->image) {
		e = area_unmap(q, m, mp->offset, &c);
	} else if (mp->flags & MAP_WRITES) {
		struct cmx_WriteBuffer_in in = {.queue = {q->id},
						.mem = {m->id},
						.offset = mp->offset,
						.size = mp->size,
						.wait = CMD_WAIT(&c),
						.event = {c.ev_id}};

		/* What goes back must first have arrived (an unmap may follow a
		 * non-blocking map without waiting for it). */
		e = map_wait_landed(mp);
		mapping_host_copy(mp, 1);
		if (!e && m->image)
			e = cmx_image_write_packed(q, m, CL_FALSE, mp->origin, mp->region,
						   mp->stage ? mp->stage : mp->ptr, mp->size, &c);
		else if (!e)
			e = CMX_SEND(WriteBuffer, &in, mp->ptr, mp->size);
	} else {
		e = send_marker(q, &c);
	}
	e = cmx_cmd_end(&c, e);
	if (e)
		goto relink;
	atomic_fetch_sub(&m->map_count, 1);
	mapping_retire(m, mp);
	return CL_SUCCESS;

relink:
	mapping_link(m, mp);
	return e;
}

/* ---- SVM: the device reports no SVM capabilities ---- */

void *cmx_clSVMAlloc(cl_context ctx, cl_svm_mem_flags flags, size_t size, cl_uint alignment)
{
	return NULL;
}

void cmx_clSVMFree(cl_context ctx, void *ptr)
{
}

static cl_int no_svm(cl_command_queue q)
{
	return CMX_IS(q, CMX_MAGIC_QUEUE) ? CL_INVALID_OPERATION : CL_INVALID_COMMAND_QUEUE;
}

cl_int cmx_clEnqueueSVMFree(cl_command_queue q, cl_uint nptr, void *ptrs[],
			    void(CL_CALLBACK *fn)(cl_command_queue, cl_uint, void *[], void *),
			    void *user_data, cl_uint n, const cl_event *list, cl_event *event)
{
	return no_svm(q);
}

cl_int cmx_clEnqueueSVMMemcpy(cl_command_queue q, cl_bool blocking, void *dst, const void *src,
			      size_t size, cl_uint n, const cl_event *list, cl_event *event)
{
	return no_svm(q);
}

cl_int cmx_clEnqueueSVMMemFill(cl_command_queue q, void *ptr, const void *pattern, size_t psize,
			       size_t size, cl_uint n, const cl_event *list, cl_event *event)
{
	return no_svm(q);
}

cl_int cmx_clEnqueueSVMMap(cl_command_queue q, cl_bool blocking, cl_map_flags flags, void *ptr,
			   size_t size, cl_uint n, const cl_event *list, cl_event *event)
{
	return no_svm(q);
}

cl_int cmx_clEnqueueSVMUnmap(cl_command_queue q, void *ptr, cl_uint n, const cl_event *list,
			     cl_event *event)
{
	return no_svm(q);
}

cl_int cmx_clEnqueueSVMMigrateMem(cl_command_queue q, cl_uint nptr, const void **ptrs,
				  const size_t *sizes, cl_mem_migration_flags flags, cl_uint n,
				  const cl_event *list, cl_event *event)
{
	return no_svm(q);
}

cl_int cmx_clSetKernelArgSVMPointer(cl_kernel k, cl_uint index, const void *value)
{
	return CMX_IS(k, CMX_MAGIC_KERNEL) ? CL_INVALID_OPERATION : CL_INVALID_KERNEL;
}

/* ---- pipes: CL_DEVICE_PIPE_SUPPORT is CL_FALSE, so none ever exists ---- */

cl_mem cmx_clCreatePipe(cl_context ctx, cl_mem_flags flags, cl_uint packet_size,
			cl_uint max_packets, const cl_pipe_properties *props, cl_int *errcode_ret)
{
	return cmx_fail(errcode_ret,
		    CMX_IS(ctx, CMX_MAGIC_CONTEXT) ? CL_INVALID_OPERATION : CL_INVALID_CONTEXT);
}

/* No pipe is ever made, so whatever it is given is not "a valid pipe
 * object": CL_INVALID_MEM_OBJECT, a buffer included (as the CTS's
 * consistency_pipes checks). */
cl_int cmx_clGetPipeInfo(cl_mem pipe, cl_pipe_info param, size_t size, void *value,
			 size_t *size_ret)
{
	return CL_INVALID_MEM_OBJECT;
}
