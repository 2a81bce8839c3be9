// SPDX-License-Identifier: MIT
// Buffer writes and reads of a GPU through pinned staging (host/pinned.h): the copy threads move the payload, the driver DMAs.
//
// A write takes a pinned slot, enqueues its native write from the slot at
// once, behind a user event (so the queue's order is the guest's), and has
// the copy threads move the payload from the shared area into the slot; the
// copy's end gives the area block back to the guest and sets the user event.
// The slot is free again when the native write completes. A read DMAs into
// a slot; when it lands, the copy threads move it into the reply's block,
// and the call finishes. Either way the daemon's loop copies nothing, and
// the guest's next chunk overlaps this one's copy and DMA.
#include "exec.h"

#include <string.h>

#include "pinned.h"
#include "staging.h"

struct pinned_write {
	void *payload; /* the call's bulk: an area block or staging */
	cl_event gate;
};

static void write_copied(void *arg)
{
	struct pinned_write *w = arg;

	cmx_staging_put(w->payload);
	clSetUserEventStatus(w->gate, CL_COMPLETE);
	clReleaseEvent(w->gate);
	free(w);
}

static void CL_CALLBACK slot_done(cl_event e, cl_int status, void *slot)
{
	cmx_pinned_put(slot);
}

int cmx_pinned_write(struct cmx_call *c, cl_command_queue q, cl_mem m, uint64_t off,
		     uint64_t size, cl_uint nwait, const cl_event *wait, cl_event *ev)
{
	struct pinned_write *w;
	cl_context ctx;
	cl_event *list;
	void *slot;
	cl_int e;

	if (!c->bulk || c->bulk_len != size || !(slot = cmx_pinned_get(size)))
		return CMX_PINNED_NO;
	w = malloc(sizeof(*w));
	list = malloc(((size_t)nwait + 1) * sizeof(*list));
	e = !w || !list ? CL_OUT_OF_HOST_MEMORY
			: clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof(ctx), &ctx, NULL);
	if (!e)
		w->gate = clCreateUserEvent(ctx, &e);
	if (e)
		goto fail;
	if (nwait)
		memcpy(list, wait, nwait * sizeof(*list));
	list[nwait] = w->gate;
	e = clEnqueueWriteBuffer(q, m, CL_FALSE, off, size, slot, nwait + 1, list, ev);
	free(list);
	list = NULL;
	if (e) {
		clSetUserEventStatus(w->gate, CL_COMPLETE);
		clReleaseEvent(w->gate);
		goto fail;
	}
	w->payload = c->bulk;
	c->bulk = NULL;
	cmx_pinned_copy(slot, w->payload, size, write_copied, w);
	/* Without word of the write's end the slot stays taken: a leak, not
	 * a slot reused under a running DMA. */
	clSetEventCallback(*ev, CL_COMPLETE, slot_done, slot);
	return CL_SUCCESS;

fail:
	free(list);
	free(w);
	cmx_pinned_put(slot);
	return e;
}

struct pinned_read {
	struct cmx_call *c;
	void *slot;
	uint64_t size;
};

static void read_copied(void *arg)
{
	struct pinned_read *r = arg;
	struct cmx_call *c = r->c;

	cmx_pinned_put(r->slot);
	free(r);
	cmx_defer_post(c, CL_COMPLETE);
}

/* Driver thread: the DMA into the slot is done (or failed); the copy
 * threads take it from here (a callback must not block). */
static void CL_CALLBACK read_landed(cl_event e, cl_int status, void *arg)
{
	struct pinned_read *r = arg;

	if (status < 0) {
		struct cmx_call *c = r->c;
		cmx_pinned_put(r->slot);
		free(r);
		cmx_defer_post(c, status);
		return;
	}
	cmx_pinned_copy(r->c->rbulk, r->slot, r->size, read_copied, r);
}

int cmx_pinned_read(struct cmx_call *c, cl_command_queue q, cl_mem m, uint64_t off,
		    uint64_t size, cl_uint nwait, const cl_event *wait, const struct cmx_ref *guest_ev,
		    void (*fin)(struct cmx_call *c, int status))
{
	struct pinned_read *r;
	void *slot = cmx_pinned_get(size);
	cl_event ev;
	cl_int e;

	if (!slot)
		return CMX_PINNED_NO;
	r = malloc(sizeof(*r));
	e = r && cmx_read_staging(c, size) ? CL_SUCCESS : CL_OUT_OF_HOST_MEMORY;
	if (!e)
		e = clEnqueueReadBuffer(q, m, CL_FALSE, off, size, slot, nwait, wait, &ev);
	if (e) {
		cmx_staging_put(c->rbulk);
		c->rbulk = NULL;
		free(r);
		cmx_pinned_put(slot);
		return e;
	}
	c->rbulk_free = cmx_staging_put;
	*r = (struct pinned_read){c, slot, size};
	clRetainEvent(ev);
	cmx_event_bind(c, guest_ev, ev);
	c->fin = fin;
	e = clSetEventCallback(ev, CL_COMPLETE, read_landed, r);
	if (e) {
		/* The read is in the queue and lands in the slot: keep both
		 * until it has, then fail the call. */
		clWaitForEvents(1, &ev);
		cmx_pinned_put(slot);
		free(r);
	}
	cmx_queue_flush(q);
	clReleaseEvent(ev);
	return e ? e : CMX_DEFER;
}
