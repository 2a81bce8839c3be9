// SPDX-License-Identifier: MIT
// Buffer writes and reads of a GPU through pinned staging (host/pinned.h): the copy threads move the payload, the driver DMAs.
//
// A write takes up to four pinned slots, cuts its payload into chunks of a
// slot, and enqueues every chunk's native write at once, from its slot and
// behind a user event of its own (so the queue's order is the guest's);
// the copy threads copy a chunk into its slot and set its event, and a
// slot whose write has completed takes its next chunk. The last copy gives
// the area block back to the guest. A read DMAs into a slot; when it
// lands, the copy threads move it into the reply's block, and the call
// finishes. Either way the daemon's loop copies nothing, and the guest's
// next chunk overlaps this one's copy and DMA.
#include "exec.h"

#include <string.h>

#include "complete.h"
#include "defer.h"
#include "pinned.h"
#include "staging.h"

/* Slots one transfer holds at most. */
#define COPY_STREAMS 4

/*
 * The slots of one transfer of n chunks of a slot each (the last maybe
 * shorter): stream i serves chunks i, i + count, ... Fixed before the first
 * chunk's callback can run: the callbacks read it.
 */
struct copy_streams {
	uint64_t size, n;
	unsigned count;
	void *slot[COPY_STREAMS];
};

static uint64_t chunk_len(const struct copy_streams *l, uint64_t k)
{
	uint64_t at = k * CMX_PINNED_SLOT;

	return l->size - at < CMX_PINNED_SLOT ? l->size - at : CMX_PINNED_SLOT;
}

static void *chunk_slot(const struct copy_streams *l, uint64_t k)
{
	return l->slot[k % l->count];
}

/* Takes the slots of a transfer of size bytes on q: 0, or CMX_PINNED_NO
 * where none is free, or for several chunks on an out-of-order queue
 * (they keep their order only on an in-order one). */
static int streams_take(struct copy_streams *l, cl_command_queue q, uint64_t size)
{
	cl_command_queue_properties props = 0;

	l->size = size;
	l->n = (size + CMX_PINNED_SLOT - 1) / CMX_PINNED_SLOT;
	l->count = 0;
	if (!size ||
	    (l->n > 1 && (clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof(props), &props,
						NULL) ||
			  (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE))))
		return CMX_PINNED_NO;
	while (l->count < COPY_STREAMS && l->count < l->n &&
	       (l->slot[l->count] = cmx_pinned_get(chunk_len(l, l->count))))
		l->count++;
	return l->count ? 0 : CMX_PINNED_NO;
}

/* Gates [from, n) of a transfer on q, each a user event; 0 or a cl error. */
static cl_int gates_make(cl_event *gates, uint64_t from, uint64_t n, cl_command_queue q)
{
	cl_context ctx;
	cl_int e = clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof(ctx), &ctx, NULL);

	for (uint64_t k = from; k < n && !e; k++)
		gates[k] = clCreateUserEvent(ctx, &e);
	return e;
}

/* Only the first `done` chunks were enqueued: the gates from `first` of
 * those that were not are set (nobody waits for them), and the streams past
 * them give their slots back (every stream when done is 0). */
static void streams_trim(struct copy_streams *l, cl_event *gates, uint64_t first, uint64_t done)
{
	for (uint64_t k = done > first ? done : first; gates && k < l->n; k++)
		if (gates[k]) {
			clSetUserEventStatus(gates[k], CL_COMPLETE);
			clReleaseEvent(gates[k]);
		}
	for (unsigned i = (unsigned)(done < l->count ? done : l->count); i < l->count; i++)
		cmx_pinned_put(l->slot[i]);
	if (done < l->count)
		l->count = (unsigned)done;
	l->n = done;
}

/*
 * A write of n chunks. Chunk k's native write goes from its stream's slot
 * behind its own user event, set when the copy threads have copied it in;
 * when that write completes, the stream's next chunk is copied into the
 * same slot. One reference per copy and per native write still to come:
 * the last frees it.
 */
struct chunk {
	struct pinned_write *w;
	uint64_t k;
};

struct pinned_write {
	struct copy_streams l;
	struct cmx_server *srv;
	struct cmx_tenant *tenant; /* the session's: charged for resting chunks */
	void *payload; /* the call's bulk: an area block or staging */
	uint64_t off;
	atomic_uint copies; /* chunks not yet copied: the last gives the payload back */
	atomic_uint refs;
	cl_event *gates;
	/* [k]: chunk k's native write, held until its gate is set. PoCL 3.1
	 * keeps a command that failed (its wait list did) in the notify list
	 * of every other event it waits for, and walks that list when the
	 * event ends: freed before its gate ends, the write would be used
	 * after its free and the worker abort in pocl_lock_events_inorder(). */
	cl_event *held;
	struct chunk *chunks;
};

static void write_put(struct pinned_write *w)
{
	if (atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel) != 1)
		return;
	free(w->gates);
	free(w->held);
	free(w->chunks);
	free(w);
}

static void chunk_copied(void *arg)
{
	struct chunk *ch = arg;
	struct pinned_write *w = ch->w;

	clSetUserEventStatus(w->gates[ch->k], CL_COMPLETE);
	clReleaseEvent(w->gates[ch->k]);
	cmx_complete_release(w->srv, w->tenant, w->held[ch->k]);
	if (atomic_fetch_sub_explicit(&w->copies, 1, memory_order_acq_rel) == 1)
		cmx_staging_put(w->payload);
	write_put(w);
}

static void chunk_copy(struct pinned_write *w, uint64_t k)
{
	cmx_pinned_copy(chunk_slot(&w->l, k), (char *)w->payload + k * CMX_PINNED_SLOT,
			chunk_len(&w->l, k), chunk_copied, &w->chunks[k]);
}

/* Loop thread (host/complete.c): chunk k is on the device, or failed; its
 * slot takes the stream's next chunk, or goes back to the pool. */
static void chunk_written(void *arg, cl_int status)
{
	struct chunk *ch = arg;
	struct pinned_write *w = ch->w;

	if (ch->k + w->l.count < w->l.n)
		chunk_copy(w, ch->k + w->l.count);
	else
		cmx_pinned_put(chunk_slot(&w->l, ch->k));
	write_put(w);
}

/* The native writes of chunks [0, n): enqueued, each with its callback;
 * returns how many were, the last one's event in *ev. */
static uint64_t chunks_enqueue(struct cmx_server *srv, struct pinned_write *w, cl_command_queue q,
			       cl_mem m, cl_uint nwait, const cl_event *wait, cl_event *list,
			       cl_event *ev, cl_int *err)
{
	uint64_t k;

	for (k = 0; k < w->l.n; k++) {
		cl_event e;
		cl_uint nl = k ? 0 : nwait; /* in order: the first carries the wait list */

		if (nl)
			memcpy(list, wait, nl * sizeof(*list));
		list[nl] = w->gates[k];
		*err = clEnqueueWriteBuffer(q, m, CL_FALSE, w->off + k * CMX_PINNED_SLOT,
					    chunk_len(&w->l, k), chunk_slot(&w->l, k), nl + 1, list,
					    &e);
		if (*err)
			break;
		w->chunks[k] = (struct chunk){w, k};
		/* Not the driver's callback: PoCL 3.1 calls none for a command
		 * whose wait list failed, and the slot would never come back;
		 * host/complete.c finds those. */
		if (cmx_complete_when(srv, e, chunk_written, &w->chunks[k])) {
			/* Without word of its end nothing would copy the stream's
			 * next chunk: this one is let go uncopied (the call
			 * fails) and counts as never enqueued. */
			clSetUserEventStatus(w->gates[k], CL_COMPLETE);
			clReleaseEvent(e);
			*err = CL_OUT_OF_RESOURCES;
			break;
		}
		/* The enqueue's reference is held (w->held); the last
		 * chunk's event is also the call's. */
		w->held[k] = e;
		if (k + 1 == w->l.n) {
			clRetainEvent(e);
			*ev = e;
		}
	}
	return k;
}

int cmx_pinned_write(struct cmx_call *c, cl_command_queue q, cl_mem m, uint64_t off,
		     uint64_t size, cl_uint nwait, const cl_event *wait, cl_event *ev)
{
	struct pinned_write *w;
	cl_event *list = NULL;
	uint64_t done;
	unsigned streams;
	cl_int e;

	if (!c->bulk || c->bulk_len != size || !(w = calloc(1, sizeof(*w))))
		return CMX_PINNED_NO;
	if (streams_take(&w->l, q, size)) {
		free(w);
		return CMX_PINNED_NO;
	}
	w->off = off;
	w->gates = calloc(w->l.n, sizeof(*w->gates));
	w->held = calloc(w->l.n, sizeof(*w->held));
	w->chunks = calloc(w->l.n, sizeof(*w->chunks));
	list = malloc(((size_t)nwait + 1) * sizeof(*list));
	e = !w->gates || !w->held || !w->chunks || !list ? CL_OUT_OF_HOST_MEMORY
					     : gates_make(w->gates, 0, w->l.n, q);
	done = e ? 0 : chunks_enqueue(c->s->srv, w, q, m, nwait, wait, list, ev, &e);
	free(list);
	/* What was enqueued runs to its end (a failure after the first
	 * chunk still fails the call). */
	streams_trim(&w->l, w->gates, 0, done);
	if (!done) {
		free(w->gates);
		free(w->held);
		free(w->chunks);
		free(w);
		return e;
	}
	w->payload = c->bulk;
	w->srv = c->s->srv;
	w->tenant = c->s->tenant;
	c->bulk = NULL;
	atomic_init(&w->copies, (unsigned)done);
	atomic_init(&w->refs, (unsigned)(2 * done));
	/* Once the last stream's copy is posted, w may be gone (its chunks
	 * copied, written and freed on other threads): not read again. */
	streams = w->l.count;
	for (unsigned k = 0; k < streams; k++)
		chunk_copy(w, k);
	return e;
}

/*
 * A read of n chunks. Every chunk's native read is enqueued at once, into
 * its stream's slot; a chunk past the first of each stream waits behind a
 * user event of its own, set when the stream's previous chunk has been
 * copied out of the slot (an in-order queue runs them in order anyway:
 * the gate only keeps a slot from being overwritten before its copy). The
 * copy threads move each landed chunk into the reply; the last copy
 * finishes the call.
 */
struct rchunk {
	struct pinned_read *r;
	uint64_t k;
};

struct pinned_read {
	struct copy_streams l;
	struct cmx_call *c;
	struct cmx_server *srv;
	struct cmx_tenant *tenant; /* the session's: charged for resting chunks */
	cl_event *gates; /* [k] for k >= l.count */
	/* [k] for k >= l.count: chunk k's native read, held until its gate
	 * is set (struct pinned_write's held says why). */
	cl_event *held;
	struct rchunk *chunks;
	atomic_uint left;  /* chunks not yet copied out */
	atomic_int status; /* the first failure */
};

/* Chunk k is out of its slot (or failed): the slot takes the stream's next
 * chunk, or goes back; the last one finishes the call. Any thread. */
static void rchunk_done(struct pinned_read *r, uint64_t k)
{
	struct cmx_call *c = r->c;
	int status;

	if (k + r->l.count < r->l.n) {
		clSetUserEventStatus(r->gates[k + r->l.count], CL_COMPLETE);
		clReleaseEvent(r->gates[k + r->l.count]);
		cmx_complete_release(r->srv, r->tenant, r->held[k + r->l.count]);
	} else {
		cmx_pinned_put(chunk_slot(&r->l, k));
	}
	if (atomic_fetch_sub_explicit(&r->left, 1, memory_order_acq_rel) != 1)
		return;
	status = atomic_load_explicit(&r->status, memory_order_acquire);
	free(r->gates);
	free(r->held);
	free(r->chunks);
	free(r);
	cmx_defer_post(c, status < 0 ? status : CL_COMPLETE);
}

static void read_copied(void *arg)
{
	struct rchunk *ch = arg;

	rchunk_done(ch->r, ch->k);
}

/* Loop thread (host/complete.c): the DMA into the slot is done (or
 * failed); the copy threads take it from here. */
static void read_landed(void *arg, cl_int status)
{
	struct rchunk *ch = arg;
	struct pinned_read *r = ch->r;
	int ok = 0;

	if (status < 0) {
		atomic_compare_exchange_strong(&r->status, &ok, status);
		rchunk_done(r, ch->k);
		return;
	}
	cmx_pinned_copy((char *)r->c->rbulk + ch->k * CMX_PINNED_SLOT, chunk_slot(&r->l, ch->k),
			chunk_len(&r->l, ch->k), read_copied, ch);
}

/* The native reads of chunks [0, n), each its event in evs; returns how
 * many were enqueued. */
static uint64_t rchunks_enqueue(struct pinned_read *r, cl_command_queue q, cl_mem m, uint64_t off,
				cl_uint nwait, const cl_event *wait, cl_event *evs, cl_int *err)
{
	uint64_t k;

	for (k = 0; k < r->l.n; k++) {
		/* In order: the first carries the wait list, a later stream's
		 * chunk its slot's gate. */
		cl_uint nl = k ? (k >= r->l.count) : nwait;
		const cl_event *wl = k ? &r->gates[k] : wait;

		*err = clEnqueueReadBuffer(q, m, CL_FALSE, off + k * CMX_PINNED_SLOT,
					   chunk_len(&r->l, k), chunk_slot(&r->l, k), nl,
					   nl ? wl : NULL, &evs[k]);
		if (*err)
			break;
		r->chunks[k] = (struct rchunk){r, k};
	}
	return k;
}

int cmx_pinned_read(struct cmx_call *c, cl_command_queue q, cl_mem m, uint64_t off,
		    uint64_t size, cl_uint nwait, const cl_event *wait, const struct cmx_ref *guest_ev,
		    void (*fin)(struct cmx_call *c, int status))
{
	struct pinned_read *r = calloc(1, sizeof(*r));
	cl_event *evs = NULL;
	uint64_t done;
	cl_int e;

	if (!r || streams_take(&r->l, q, size)) {
		free(r);
		return CMX_PINNED_NO;
	}
	r->c = c;
	r->srv = c->s->srv;
	r->tenant = c->s->tenant;
	r->gates = calloc(r->l.n, sizeof(*r->gates));
	r->held = calloc(r->l.n, sizeof(*r->held));
	r->chunks = calloc(r->l.n, sizeof(*r->chunks));
	evs = calloc(r->l.n, sizeof(*evs));
	e = !r->gates || !r->held || !r->chunks || !evs || !cmx_call_read_buffer(c, size)
		    ? CL_OUT_OF_HOST_MEMORY
		    : gates_make(r->gates, r->l.count, r->l.n, q);
	done = e ? 0 : rchunks_enqueue(r, q, m, off, nwait, wait, evs, &e);
	/* What was enqueued runs to its end, and a failure after the first
	 * chunk fails the call. */
	streams_trim(&r->l, r->gates, r->l.count, done);
	if (!done) {
		cmx_staging_put(c->rbulk);
		c->rbulk = NULL;
		free(r->gates);
		free(r->held);
		free(r->chunks);
		free(r);
		free(evs);
		return e;
	}
	atomic_init(&r->left, (unsigned)done);
	atomic_init(&r->status, e);
	c->rbulk_free = cmx_staging_put;
	c->fin = fin;
	clRetainEvent(evs[done - 1]);
	cmx_event_bind(c, guest_ev, evs[done - 1]);
	/* Before the first completion can set a gate. */
	for (uint64_t k = r->l.count; k < done; k++) {
		clRetainEvent(evs[k]);
		r->held[k] = evs[k];
	}
	for (uint64_t k = 0; k < done; k++) {
		/* Not the driver's callback: PoCL 3.1 calls none for a read
		 * whose wait list failed, and the guest would wait for its
		 * data forever; host/complete.c finds those. */
		if (cmx_complete_when(c->s->srv, evs[k], read_landed, &r->chunks[k])) {
			/* Without word of its end, wait for it here: the
			 * slot is the driver's until then. */
			cl_int st = CL_COMPLETE;
			clWaitForEvents(1, &evs[k]);
			clGetEventInfo(evs[k], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st,
				       NULL);
			read_landed(&r->chunks[k], st < 0 ? st : CL_OUT_OF_RESOURCES);
		}
		clReleaseEvent(evs[k]);
	}
	free(evs);
	cmx_queue_flush(c->s->srv, q);
	return CMX_DEFER;
}
