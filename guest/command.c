// SPDX-License-Identifier: MIT
// What every enqueued command shares: its wait list and event, the end of a
// blocking one, and reads whose data lands later.
#include <stdlib.h>

#include "entry.h"
#include "icd.h"
#include "mem.h"

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
int cmx_cmd_sent(void)
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
	if (!cmx_cmd_sent())
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

cl_int cmx_cmd_marker(cl_command_queue q, struct cmx_cmd *c)
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

/* Spreads a packed rectangle into the application's pitched memory. */
static void unpack_rect(const struct cmx_pending_read *r)
{
	const char *src = r->dst;
	char *out = r->out;

	for (size_t z = 0; z < r->region[2]; z++)
		for (size_t y = 0; y < r->region[1]; y++)
			memcpy(out + z * r->slice_pitch + y * r->row_pitch,
			       src + (z * r->region[1] + y) * r->region[0], r->region[0]);
}

void cmx_read_landed(struct cmx_pending_read *r, int status)
{
	cl_command_queue q = r->queue;

	cmx_track_end(&r->track);
	/* The data, if it came through the area, was copied to dst already
	 * (the area of the session the read went on). */
	if (r->area_off)
		cmx_session_area_free(r->track.s, r->area_off);
	if (status >= 0 && r->out)
		unpack_rect(r);
	if (r->out)
		free(r->dst);
	if (r->finish)
		r->finish(r, status);
	if (r->event)
		cmx_event_data_done(r->event, status);
	pthread_mutex_lock(&cmx_icd.wait_lock);
	atomic_fetch_sub(&q->pending, 1);
	pthread_cond_broadcast(&cmx_icd.wait_cond);
	pthread_mutex_unlock(&cmx_icd.wait_lock);
	/* Last: the event's may be the last reference to the queue, whose
	 * release waits for its pending count, settled just above (in the
	 * other order this thread would wait for itself). */
	if (r->event)
		cmx_clReleaseEvent(r->event);
	free(r);
}
