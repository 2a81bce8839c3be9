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

#include "pinned.h"
#include "staging.h"

/* Slots one write holds at most: lane i serves its chunks i, i + lanes, ... */
#define LANES 4

/*
 * A write of n chunks (of a slot each, the last maybe shorter). Chunk k's
 * native write goes from its lane's slot behind its own user event, set
 * when the copy threads have copied it in; when that write completes, the
 * lane's next chunk is copied into the same slot. One reference per copy
 * and per native write still to come: the last frees it.
 */
struct chunk {
	struct pinned_write *w;
	uint64_t k;
};

struct pinned_write {
	void *payload; /* the call's bulk: an area block or staging */
	uint64_t off, size, n;
	unsigned lanes;
	void *slot[LANES];
	atomic_uint copies; /* chunks not yet copied: the last gives the payload back */
	atomic_uint refs;
	cl_event *gates;
	struct chunk *chunks;
};

static void write_put(struct pinned_write *w)
{
	if (atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel) != 1)
		return;
	free(w->gates);
	free(w->chunks);
	free(w);
}

static uint64_t chunk_len(const struct pinned_write *w, uint64_t k)
{
	uint64_t at = k * CMX_PINNED_SLOT;

	return w->size - at < CMX_PINNED_SLOT ? w->size - at : CMX_PINNED_SLOT;
}

static void chunk_copied(void *arg)
{
	struct chunk *ch = arg;
	struct pinned_write *w = ch->w;

	clSetUserEventStatus(w->gates[ch->k], CL_COMPLETE);
	clReleaseEvent(w->gates[ch->k]);
	if (atomic_fetch_sub_explicit(&w->copies, 1, memory_order_acq_rel) == 1)
		cmx_staging_put(w->payload);
	write_put(w);
}

static void chunk_copy(struct pinned_write *w, uint64_t k)
{
	cmx_pinned_copy(w->slot[k % w->lanes], (char *)w->payload + k * CMX_PINNED_SLOT,
			chunk_len(w, k), chunk_copied, &w->chunks[k]);
}

/* Driver thread: chunk k is on the device; its slot takes the lane's next
 * chunk, or goes back to the pool. */
static void CL_CALLBACK chunk_written(cl_event e, cl_int status, void *arg)
{
	struct chunk *ch = arg;
	struct pinned_write *w = ch->w;

	if (ch->k + w->lanes < w->n)
		chunk_copy(w, ch->k + w->lanes);
	else
		cmx_pinned_put(w->slot[ch->k % w->lanes]);
	write_put(w);
}

/* The native writes of chunks [0, n): enqueued, each with its callback;
 * returns how many were, the last one's event in *ev. */
static uint64_t chunks_enqueue(struct pinned_write *w, cl_command_queue q, cl_mem m,
			       cl_uint nwait, const cl_event *wait, cl_event *list, cl_event *ev,
			       cl_int *err)
{
	uint64_t k;

	for (k = 0; k < w->n; k++) {
		cl_event e;
		cl_uint nl = k ? 0 : nwait; /* in order: the first carries the wait list */

		if (nl)
			memcpy(list, wait, nl * sizeof(*list));
		list[nl] = w->gates[k];
		*err = clEnqueueWriteBuffer(q, m, CL_FALSE, w->off + k * CMX_PINNED_SLOT,
					    chunk_len(w, k), w->slot[k % w->lanes], nl + 1, list, &e);
		if (*err)
			break;
		w->chunks[k] = (struct chunk){w, k};
		if (clSetEventCallback(e, CL_COMPLETE, chunk_written, &w->chunks[k])) {
			/* Without word of its end nothing would copy the lane's
			 * next chunk: this one is let go uncopied (the call
			 * fails) and counts as never enqueued. */
			clSetUserEventStatus(w->gates[k], CL_COMPLETE);
			clReleaseEvent(e);
			*err = CL_OUT_OF_RESOURCES;
			break;
		}
		if (k + 1 < w->n)
			clReleaseEvent(e);
		else
			*ev = e;
	}
	return k;
}

int cmx_pinned_write(struct cmx_call *c, cl_command_queue q, cl_mem m, uint64_t off,
		     uint64_t size, cl_uint nwait, const cl_event *wait, cl_event *ev)
{
	struct pinned_write *w;
	cl_command_queue_properties props = 0;
	cl_context ctx;
	cl_event *list = NULL;
	uint64_t n = (size + CMX_PINNED_SLOT - 1) / CMX_PINNED_SLOT, done;
	unsigned lanes;
	cl_int e;

	if (!c->bulk || c->bulk_len != size || !size)
		return CMX_PINNED_NO;
	/* Several chunks keep their order only on an in-order queue. */
	if (n > 1 && (clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof(props), &props, NULL) ||
		      (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)))
		return CMX_PINNED_NO;
	w = calloc(1, sizeof(*w));
	if (!w)
		return CMX_PINNED_NO;
	w->off = off;
	w->size = size;
	w->n = n;
	while (w->lanes < LANES && w->lanes < n &&
	       (w->slot[w->lanes] = cmx_pinned_get(chunk_len(w, w->lanes))))
		w->lanes++;
	if (!w->lanes) {
		free(w);
		return CMX_PINNED_NO;
	}
	w->gates = calloc(n, sizeof(*w->gates));
	w->chunks = calloc(n, sizeof(*w->chunks));
	list = malloc(((size_t)nwait + 1) * sizeof(*list));
	e = !w->gates || !w->chunks || !list
		    ? CL_OUT_OF_HOST_MEMORY
		    : clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof(ctx), &ctx, NULL);
	for (uint64_t k = 0; k < n && !e; k++)
		w->gates[k] = clCreateUserEvent(ctx, &e);
	done = e ? 0 : chunks_enqueue(w, q, m, nwait, wait, list, ev, &e);
	free(list);
	for (uint64_t k = done; k < n; k++)
		if (w->gates[k]) {
			clSetUserEventStatus(w->gates[k], CL_COMPLETE);
			clReleaseEvent(w->gates[k]);
		}
	if (!done) {
		for (unsigned i = 0; i < w->lanes; i++)
			cmx_pinned_put(w->slot[i]);
		free(w->gates);
		free(w->chunks);
		free(w);
		return e;
	}
	/* What was enqueued runs to its end (a failure after the first
	 * chunk still fails the call); lanes past it give their slots back. */
	for (unsigned i = (unsigned)(done < w->lanes ? done : w->lanes); i < w->lanes; i++)
		cmx_pinned_put(w->slot[i]);
	if (done < w->lanes)
		w->lanes = (unsigned)done;
	w->n = done;
	w->payload = c->bulk;
	c->bulk = NULL;
	atomic_init(&w->copies, (unsigned)done);
	atomic_init(&w->refs, (unsigned)(2 * done));
	/* Once the last lane's copy is posted, w may be gone (its chunks
	 * copied, written and freed on other threads): not read again. */
	lanes = w->lanes;
	for (unsigned k = 0; k < lanes; k++)
		chunk_copy(w, k);
	return e;
}

/*
 * A read of n chunks over up to four slots. Every chunk's native read is
 * enqueued at once, into its lane's slot; chunk k >= lanes waits behind a
 * user event of its own, set when chunk k - lanes has been copied out of
 * the slot (an in-order queue runs them in order anyway: the gate only
 * keeps a slot from being overwritten before its copy). The copy threads
 * move each landed chunk into the reply; the last copy finishes the call.
 */
struct rchunk {
	struct pinned_read *r;
	uint64_t k;
};

struct pinned_read {
	struct cmx_call *c;
	uint64_t size, n;
	unsigned lanes;
	void *slot[LANES];
	cl_event *gates; /* [k] for k >= lanes */
	struct rchunk *chunks;
	atomic_uint left; /* chunks not yet copied out */
	atomic_int status; /* the first failure */
};

static uint64_t rchunk_len(const struct pinned_read *r, uint64_t k)
{
	uint64_t at = k * CMX_PINNED_SLOT;

	return r->size - at < CMX_PINNED_SLOT ? r->size - at : CMX_PINNED_SLOT;
}

/* Chunk k is out of its slot (or failed): the slot takes the lane's next
 * chunk, or goes back; the last one finishes the call. Any thread. */
static void rchunk_done(struct pinned_read *r, uint64_t k)
{
	struct cmx_call *c = r->c;
	int status;

	if (k + r->lanes < r->n) {
		clSetUserEventStatus(r->gates[k + r->lanes], CL_COMPLETE);
		clReleaseEvent(r->gates[k + r->lanes]);
	} else {
		cmx_pinned_put(r->slot[k % r->lanes]);
	}
	if (atomic_fetch_sub_explicit(&r->left, 1, memory_order_acq_rel) != 1)
		return;
	status = atomic_load_explicit(&r->status, memory_order_acquire);
	free(r->gates);
	free(r->chunks);
	free(r);
	cmx_defer_post(c, status < 0 ? status : CL_COMPLETE);
}

static void read_copied(void *arg)
{
	struct rchunk *ch = arg;

	rchunk_done(ch->r, ch->k);
}

/* Driver thread: the DMA into the slot is done (or failed); the copy
 * threads take it from here (a callback must not block). */
static void CL_CALLBACK read_landed(cl_event e, cl_int status, void *arg)
{
	struct rchunk *ch = arg;
	struct pinned_read *r = ch->r;
	int ok = 0;

	if (status < 0) {
		atomic_compare_exchange_strong(&r->status, &ok, status);
		rchunk_done(r, ch->k);
		return;
	}
	cmx_pinned_copy((char *)r->c->rbulk + ch->k * CMX_PINNED_SLOT, r->slot[ch->k % r->lanes],
			rchunk_len(r, ch->k), read_copied, ch);
}

/* The native reads of chunks [0, n), each its event in evs; returns how
 * many were enqueued. */
static uint64_t rchunks_enqueue(struct pinned_read *r, cl_command_queue q, cl_mem m, uint64_t off,
				cl_uint nwait, const cl_event *wait, cl_event *evs, cl_int *err)
{
	uint64_t k;

	for (k = 0; k < r->n; k++) {
		/* In order: the first carries the wait list, a later lane's
		 * chunk its slot's gate. */
		cl_uint nl = k ? (k >= r->lanes) : nwait;
		const cl_event *l = k ? &r->gates[k] : wait;

		*err = clEnqueueReadBuffer(q, m, CL_FALSE, off + k * CMX_PINNED_SLOT,
					   rchunk_len(r, k), r->slot[k % r->lanes], nl,
					   nl ? l : NULL, &evs[k]);
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
	uint64_t n = (size + CMX_PINNED_SLOT - 1) / CMX_PINNED_SLOT, done;
	cl_command_queue_properties props = 0;
	struct pinned_read *r;
	cl_event *evs = NULL;
	cl_context ctx;
	cl_int e;

	if (!size)
		return CMX_PINNED_NO;
	/* Several chunks keep their order only on an in-order queue. */
	if (n > 1 && (clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof(props), &props, NULL) ||
		      (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)))
		return CMX_PINNED_NO;
	r = calloc(1, sizeof(*r));
	if (!r)
		return CMX_PINNED_NO;
	r->c = c;
	r->size = size;
	r->n = n;
	while (r->lanes < LANES && r->lanes < n &&
	       (r->slot[r->lanes] = cmx_pinned_get(rchunk_len(r, r->lanes))))
		r->lanes++;
	if (!r->lanes) {
		free(r);
		return CMX_PINNED_NO;
	}
	r->gates = calloc(n, sizeof(*r->gates));
	r->chunks = calloc(n, sizeof(*r->chunks));
	evs = calloc(n, sizeof(*evs));
	e = !r->gates || !r->chunks || !evs || !cmx_read_staging(c, size)
		    ? CL_OUT_OF_HOST_MEMORY
		    : clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof(ctx), &ctx, NULL);
	for (uint64_t k = r->lanes; k < n && !e; k++)
		r->gates[k] = clCreateUserEvent(ctx, &e);
	done = e ? 0 : rchunks_enqueue(r, q, m, off, nwait, wait, evs, &e);
	/* Gates of chunks never enqueued: nobody waits for them. */
	for (uint64_t k = done > r->lanes ? done : r->lanes; k < n; k++)
		if (r->gates[k]) {
			clSetUserEventStatus(r->gates[k], CL_COMPLETE);
			clReleaseEvent(r->gates[k]);
		}
	if (!done) {
		for (unsigned i = 0; i < r->lanes; i++)
			cmx_pinned_put(r->slot[i]);
		cmx_staging_put(c->rbulk);
		c->rbulk = NULL;
		free(r->gates);
		free(r->chunks);
		free(r);
		free(evs);
		return e;
	}
	/* What was enqueued runs to its end, and a failure after the first
	 * chunk fails the call; lanes past it give their slots back. Fixed
	 * before the first callback is set: they read n and lanes. */
	for (unsigned i = (unsigned)(done < r->lanes ? done : r->lanes); i < r->lanes; i++)
		cmx_pinned_put(r->slot[i]);
	if (done < r->lanes)
		r->lanes = (unsigned)done;
	r->n = done;
	atomic_init(&r->left, (unsigned)done);
	atomic_init(&r->status, e);
	c->rbulk_free = cmx_staging_put;
	c->fin = fin;
	clRetainEvent(evs[done - 1]);
	cmx_event_bind(c, guest_ev, evs[done - 1]);
	for (uint64_t k = 0; k < done; k++) {
		if (clSetEventCallback(evs[k], CL_COMPLETE, read_landed, &r->chunks[k])) {
			/* Without word of its end, wait for it here: the
			 * slot is the driver's until then. */
			cl_int st = CL_COMPLETE;
			clWaitForEvents(1, &evs[k]);
			clGetEventInfo(evs[k], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st,
				       NULL);
			read_landed(evs[k], st < 0 ? st : CL_OUT_OF_RESOURCES, &r->chunks[k]);
		}
		clReleaseEvent(evs[k]);
	}
	free(evs);
	cmx_queue_flush(q);
	return CMX_DEFER;
}
