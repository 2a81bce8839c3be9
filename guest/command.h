// SPDX-License-Identifier: MIT
// Queues, events and commands (guest/queue.c, event.c, command.c): a
// command's wait list and event, pending non-blocking reads.
#ifndef CMX_GUEST_COMMAND_H
#define CMX_GUEST_COMMAND_H

#include <CL/cl.h>
#include <stdint.h>

#include "object.h"
#include "session.h"
#include "track.h"

/* The event a command returns to the application (NULL when it asked for
 * none): a new guest event bound to q. Sets *id to its id or 0. */
cl_event cmx_event_for(cl_event *want, cl_command_queue q, cl_command_type type, uint64_t *id);
/* Drops an event made by cmx_event_for() when the command was refused. */
void cmx_event_discard(cl_event e);
/* Blocks until every listed event's data has landed (guest/event.c). */
void cmx_events_wait_data(cl_uint n, const cl_event *list);
/* Blocks until q's non-blocking reads have landed (guest/queue.c). */
void cmx_queue_wait_data(cl_command_queue q);
/* A pending non-blocking read: its tag on the wire is this struct's address. */
struct cmx_pending_read {
	struct cmx_track track; /* first: pending_lost() casts */
	void *dst;	       /* where the bytes land */
	uint64_t len;
	uint64_t area_off;     /* the session's area block they came through, or 0 */
	cl_event event;	       /* retained; may be NULL */
	cl_command_queue queue; /* its pending count is decremented */
	/* Rect reads land packed in `dst` and are spread into `out`. */
	void *out;
	size_t region[3], row_pitch, slice_pitch;
	void (*finish)(struct cmx_pending_read *r, int status); /* optional */
	void *arg;
};
/* Called by the notification thread when a read's data has landed
 * (guest/command.c). */
void cmx_read_landed(struct cmx_pending_read *r, int status);
void cmx_event_data_done(cl_event e, int status);

/* Reference counting helpers (each kind's release lives with the kind). */
cl_int cmx_clRetainEvent(cl_event e);
cl_int cmx_clReleaseEvent(cl_event e);

/* One command: its wait list and the event it returns. */
struct cmx_cmd {
	struct cmx_waitlist w;
	cl_event ev;	/* the application's event, or NULL */
	uint64_t ev_id; /* its id on the wire, 0 for none */
	cl_event *want;
};
#define CMD_WAIT(c) ((struct cmx_refs){.v = (c)->w.ids, .n = (c)->w.n})

/* The last check (the wait list), then the command's event. */
cl_int cmx_cmd_begin(struct cmx_cmd *c, cl_command_queue q, cl_uint n, const cl_event *list,
		     cl_event *want, cl_command_type type);
/* Hands the event over, or drops it when the command was not sent. */
cl_int cmx_cmd_end(struct cmx_cmd *c, cl_int e);
/* After a blocking command: non-blocking reads it followed have landed. */
void cmx_blocking_done(cl_command_queue q, cl_uint n, const cl_event *list);
/* A sync call's status (or the transport's error); finishes the reply. */
cl_int cmx_reply_status(int e, struct cmx_reply *r);
/* A non-blocking read about to be sent, and its undoing if it is not. */
struct cmx_pending_read *cmx_pending_new(cl_command_queue q, cl_event ev, void *dst,
					 uint64_t len);
void cmx_pending_cancel(struct cmx_pending_read *p);
/* Sends the read (recv: d reserves room for p->len bytes of data) with p
 * tracked; on failure p is cancelled. CL_SUCCESS or CL_OUT_OF_RESOURCES. */
cl_int cmx_pending_send(struct cmx_pending_read *p, const struct cmx_msgdesc *d, const void *in,
			int recv);

#endif
