// SPDX-License-Identifier: MIT
// Handlers: events, markers and barriers.
#include "exec.h"
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

int cmx_h_CreateUserEvent(struct cmx_call *c, struct cmx_CreateUserEvent_in *in)
{
	cl_int e;
	cl_event ev = clCreateUserEvent(in->context.h, &e);

	if (e)
		return e;
	if (cmx_session_add(c->s, in->event.id, CMX_K_EVENT, ev, in->context.h, 0, NULL)) {
		clReleaseEvent(ev);
		return CL_OUT_OF_HOST_MEMORY;
	}
	return CL_SUCCESS;
}

int cmx_h_SetUserEventStatus(struct cmx_call *c, struct cmx_SetUserEventStatus_in *in)
{
	cl_int e;

	/* A held command's placeholder is a user event only to the daemon. */
	if (cmx_sched_is_held(in->event.h))
		return CL_INVALID_EVENT;
	e = clSetUserEventStatus(in->event.h, (cl_int)in->status);
	cmx_sched_poke(cmx_srv);
	return e;
}

int cmx_h_ReleaseEvent(struct cmx_call *c, struct cmx_ReleaseEvent_in *in)
{
	cmx_session_release(c->s, in->event.id, CMX_K_EVENT);
	return CL_SUCCESS;
}

static int wait_work(struct cmx_call *c)
{
	struct cmx_WaitForEvents_in *in = c->in;
	cl_int e;

	cmx_exec_drive_lock();
	e = clWaitForEvents((cl_uint)in->events.n, (const cl_event *)in->events.h);
	cmx_exec_drive_unlock();

	for (uint64_t i = 0; i < in->events.n; i++) {
		cl_int st = CL_COMPLETE;
		/* A failed held command's placeholder is a user event, for which
		 * NVIDIA's clWaitForEvents reports no error: its status does. */
		clGetEventInfo(in->events.h[i], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st,
			       NULL);
		if (!e && st < 0)
			e = CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST;
		if (e && e != CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST && st > CL_COMPLETE)
			cmx_exec_check_lost(e, "clWaitForEvents");
		clReleaseEvent(in->events.h[i]);
	}
	return e;
}

int cmx_h_WaitForEvents(struct cmx_call *c, struct cmx_WaitForEvents_in *in,
			struct cmx_WaitForEvents_out *out)
{
	if (!in->events.n)
		return CL_INVALID_VALUE;
	for (uint64_t i = 0; i < in->events.n; i++)
		clRetainEvent(in->events.h[i]);
	return cmx_defer_work(c, wait_work, NULL);
}

/* An execution status the daemon answers itself. */
static int status_answer(struct cmx_call *c, struct cmx_GetEventInfo_out *out, cl_int status)
{
	c->scratch = malloc(sizeof(cl_int));
	if (!c->scratch)
		return CL_OUT_OF_HOST_MEMORY;
	*(cl_int *)c->scratch = status;
	out->value.ptr = c->scratch;
	out->value.len = sizeof(cl_int);
	return CL_SUCCESS;
}

int cmx_h_GetEventInfo(struct cmx_call *c, struct cmx_GetEventInfo_in *in,
		       struct cmx_GetEventInfo_out *out)
{
	struct cmx_obj *o = cmx_session_obj(c->s, in->event.id, CMX_K_EVENT);

	if (!in->event.h) {
		/* Poisoned: its command failed before reaching the device. */
		if (in->param != CL_EVENT_COMMAND_EXECUTION_STATUS)
			return CL_INVALID_EVENT;
		return status_answer(c, out, o ? o->err : CL_INVALID_EVENT);
	}
	/* Held in the daemon: queued, as far as the guest can tell. */
	if (in->param == CL_EVENT_COMMAND_EXECUTION_STATUS && cmx_sched_is_held(in->event.h))
		return status_answer(c, out, CL_QUEUED);
	return CMX_INFO(c, &out->value, clGetEventInfo, in->event.h, (cl_uint)in->param);
}

int cmx_h_GetEventProfilingInfo(struct cmx_call *c, struct cmx_GetEventProfilingInfo_in *in,
				struct cmx_GetEventProfilingInfo_out *out)
{
	cl_ulong v = 0;
	cl_int e = clGetEventProfilingInfo(in->event.h, (cl_uint)in->param, sizeof(v), &v, NULL);

	out->value = v;
	return e;
}

struct callback_note {
	uint64_t session, tag;
	cl_int status;
	/* Watched by the status poll (a driver that calls callbacks late,
	 * below): the event, the status that fires it, the next watched one;
	 * sent: the poll has notified, the callback only frees. Loop thread. */
	cl_event ev;
	cl_int type;
	int sent;
	struct callback_note *next;
};

/* Callbacks the status poll watches (flush_runs only). */
static struct callback_note *watched;

static struct cmx_session *note_session(const struct callback_note *n)
{
	struct cmx_session *s;

	for (s = cmx_srv->sessions; s && s->id != n->session; s = s->next)
		;
	return s && !s->closed ? s : NULL;
}

static void notify_done(const struct callback_note *n, cl_int status)
{
	struct cmx_session *s = note_session(n);

	if (s) {
		struct cmx_EventDone_in in = {.tag = n->tag, .status = status};
		cmx_session_notify(s, &cmx_desc_EventDone_in, &in, NULL, 0, NULL);
	}
}

static void unwatch(struct callback_note *n)
{
	for (struct callback_note **pp = &watched; *pp; pp = &(*pp)->next)
		if (*pp == n) {
			*pp = n->next;
			clReleaseEvent(n->ev);
			n->ev = NULL;
			return;
		}
}

static void callback_post(void *arg)
{
	struct callback_note *n = arg;

	if (!n->sent)
		notify_done(n, n->status);
	unwatch(n);
	free(n);
}

/*
 * On a driver that calls callbacks only when the whole wait that ran the
 * command returns (Oclgrind: cmx_exec_poll_start()), an area buffer's
 * non-blocking write deadlocked: its unmap waits on a user event the guest
 * sets from the map's callback, and the wait that ran the map spun on that
 * unmap. The loop reads the watched events' status and notifies as soon as
 * one has reached its callback's status; the callback, when it comes, only
 * frees the note.
 */
static int callbacks_poll(void)
{
	int seen = 0;

	for (struct callback_note **pp = &watched, *n; (n = *pp);) {
		cl_int st = CL_QUEUED;

		/* A gone session's note is left to its callback. */
		if (note_session(n) &&
		    (clGetEventInfo(n->ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st,
				    NULL) != CL_SUCCESS || st > n->type)) {
			pp = &n->next;
			continue;
		}
		if (note_session(n)) {
			notify_done(n, st < 0 ? st : n->type);
			n->sent = 1;
		}
		*pp = n->next;
		clReleaseEvent(n->ev);
		n->ev = NULL;
		seen = 1;
	}
	return seen ? 1 : watched ? 0 : -1;
}

static void CL_CALLBACK event_callback(cl_event e, cl_int status, void *arg)
{
	struct callback_note *n = arg;
	cl_int now;

	/* NVIDIA calls a CL_COMPLETE callback with CL_COMPLETE for a command it
	 * dropped because a dependency failed; the event's status says so. */
	if (status == CL_COMPLETE &&
	    clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(now), &now, NULL) ==
		    CL_SUCCESS &&
	    now < 0)
		status = now;
	n->status = status;
	cmx_loop_post(cmx_srv->loop, callback_post, n);
}

int cmx_h_SetEventCallback(struct cmx_call *c, struct cmx_SetEventCallback_in *in)
{
	struct cmx_obj *o = cmx_session_obj(c->s, in->event.id, CMX_K_EVENT);
	struct callback_note *n = malloc(sizeof(*n));
	cl_int e;

	if (!n)
		return CL_OUT_OF_HOST_MEMORY;
	memset(n, 0, sizeof(*n));
	n->session = c->s->id;
	n->tag = in->tag;
	if (!in->event.h) {
		/* A poisoned event has already failed: report it at once. */
		n->status = o ? o->err : CL_INVALID_EVENT;
		callback_post(n);
		return CL_SUCCESS;
	}
	e = clSetEventCallback(in->event.h, (cl_int)in->type, event_callback, n);
	if (e) {
		free(n);
		return e;
	}
	if (cmx_srv->flush_runs) {
		clRetainEvent(in->event.h);
		n->ev = in->event.h;
		n->type = (cl_int)in->type;
		n->next = watched;
		watched = n;
		cmx_exec_poll_start(callbacks_poll);
	}
	return CL_SUCCESS;
}

int cmx_h_EnqueueMarker(struct cmx_call *c, struct cmx_EnqueueMarker_in *in)
{
	cl_event ev;
	cl_int e =
	    clEnqueueMarkerWithWaitList(in->queue.h, WAIT(in->wait), &ev);

	if (!e)
		cmx_event_bind(c, &in->event, ev);
	return e;
}

int cmx_h_EnqueueBarrier(struct cmx_call *c, struct cmx_EnqueueBarrier_in *in)
{
	cl_event ev;
	cl_int e =
	    clEnqueueBarrierWithWaitList(in->queue.h, WAIT(in->wait), &ev);

	if (!e)
		cmx_event_bind(c, &in->event, ev);
	return e;
}
