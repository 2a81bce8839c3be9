// SPDX-License-Identifier: MIT
// Handlers: events, markers and barriers.
#include "exec.h"
#include "scheduler.h"

#include <stdlib.h>

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
};

static void callback_post(void *arg)
{
	struct callback_note *n = arg;
	struct cmx_session *s;

	for (s = cmx_srv->sessions; s && s->id != n->session; s = s->next)
		;
	if (s && !s->closed) {
		struct cmx_EventDone_in in = {.tag = n->tag, .status = n->status};
		cmx_session_notify(s, &cmx_desc_EventDone_in, &in, NULL, 0, NULL);
	}
	free(n);
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
	n->session = c->s->id;
	n->tag = in->tag;
	if (!in->event.h) {
		/* A poisoned event has already failed: report it at once. */
		n->status = o ? o->err : CL_INVALID_EVENT;
		callback_post(n);
		return CL_SUCCESS;
	}
	e = clSetEventCallback(in->event.h, (cl_int)in->type, event_callback, n);
	if (e)
		free(n);
	return e;
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
