// SPDX-License-Identifier: MIT
// Events: ids chosen here, statuses asked of the daemon, callbacks delivered
// by the notification thread, and read data that must land before an event
// counts as complete.
#include "entry.h"
#include "command.h"
#include "icd.h"
#include "object.h"
#include "track.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern cl_int cmx_clRetainContext(cl_context c);
extern cl_int cmx_clReleaseContext(cl_context c);

/* A callback registered with clSetEventCallback; its tag is its address. */
struct cmx_event_cb {
	struct cmx_track track; /* first: callback_lost() casts */
	void(CL_CALLBACK *fn)(cl_event, cl_int, void *);
	void *user_data;
	cl_event event; /* retained until the callback ran */
	cl_int type;
	struct cmx_event_cb *next;
};

static cl_event event_new(cl_context ctx, cl_command_queue q, cl_command_type type)
{
	cl_event e = cmx_object_new(sizeof(*e), CMX_MAGIC_EVENT);

	if (!e)
		return NULL;
	e->ctx = ctx;
	e->queue = q;
	e->type = type;
	pthread_mutex_init(&e->lock, NULL);
	cmx_clRetainContext(ctx);
	if (q)
		cmx_clRetainCommandQueue(q);
	return e;
}

static void event_free(cl_event e)
{
	if (e->queue)
		cmx_clReleaseCommandQueue(e->queue);
	cmx_clReleaseContext(e->ctx);
	e->magic = 0;
	pthread_mutex_destroy(&e->lock);
	free(e);
}

cl_event cmx_event_for(cl_event *want, cl_command_queue q, cl_command_type type, uint64_t *id)
{
	cl_event e;

	*id = 0;
	if (!want)
		return NULL;
	e = event_new(q->ctx, q, type);
	if (e)
		*id = e->id;
	*want = e;
	return e;
}

void cmx_event_discard(cl_event e)
{
	if (e)
		event_free(e);
}

cl_int cmx_clRetainEvent(cl_event e)
{
	if (!CMX_IS(e, CMX_MAGIC_EVENT))
		return CL_INVALID_EVENT;
	atomic_fetch_add(&e->refs, 1);
	return CL_SUCCESS;
}

cl_int cmx_clReleaseEvent(cl_event e)
{
	struct cmx_ReleaseEvent_in in;

	if (!CMX_IS(e, CMX_MAGIC_EVENT))
		return CL_INVALID_EVENT;
	if (atomic_fetch_sub(&e->refs, 1) != 1)
		return CL_SUCCESS;
	in.event.id = e->id;
	CMX_SEND(ReleaseEvent, &in);
	event_free(e);
	return CL_SUCCESS;
}

cl_event cmx_clCreateUserEvent(cl_context ctx, cl_int *errcode)
{
	struct cmx_CreateUserEvent_in in;
	cl_event e;
	cl_int err;

	if (!CMX_IS(ctx, CMX_MAGIC_CONTEXT)) {
		err = CL_INVALID_CONTEXT;
		goto out;
	}
	e = event_new(ctx, NULL, CL_COMMAND_USER);
	if (!e) {
		err = CL_OUT_OF_HOST_MEMORY;
		goto out;
	}
	in.event.id = e->id;
	in.context.id = ctx->id;
	err = CMX_SEND(CreateUserEvent, &in);
	if (err) {
		event_free(e);
		goto out;
	}
	if (errcode)
		*errcode = CL_SUCCESS;
	return e;
out:
	if (errcode)
		*errcode = err;
	return NULL;
}

cl_int cmx_clSetUserEventStatus(cl_event e, cl_int status)
{
	struct cmx_SetUserEventStatus_in in;
	int was_set;

	if (!CMX_IS(e, CMX_MAGIC_EVENT) || e->type != CL_COMMAND_USER || e->queue)
		return CL_INVALID_EVENT;
	if (status > CL_COMPLETE)
		return CL_INVALID_VALUE;
	pthread_mutex_lock(&e->lock);
	was_set = e->data_status == 1;
	e->data_status = 1; /* user events: "status already set" */
	pthread_mutex_unlock(&e->lock);
	if (was_set)
		return CL_INVALID_OPERATION;
	in.event.id = e->id;
	in.status = status;
	/* Other threads may be blocked on it in the daemon: send now. */
	if (CMX_SEND(SetUserEventStatus, &in) || cmx_session_flush(cmx_icd.s))
		return CL_OUT_OF_RESOURCES;
	return CL_SUCCESS;
}

void cmx_events_wait_data(cl_uint n, const cl_event *list)
{
	pthread_mutex_lock(&cmx_icd.wait_lock);
	for (cl_uint i = 0; i < n; i++)
		while (atomic_load(&list[i]->data_pending) && !cmx_icd_lost(list[i]->id))
			cmx_icd_wait_landing();
	pthread_mutex_unlock(&cmx_icd.wait_lock);
}

/* The commands of list completed on the device: once their data has
 * landed, whether it all did. */
static cl_int events_landed(cl_uint n, const cl_event *list)
{
	cmx_events_wait_data(n, list);
	for (cl_uint i = 0; i < n; i++)
		if (list[i]->queue && list[i]->data_status < 0)
			return CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST;
	return CL_SUCCESS;
}

/* Whether the daemon says, in the shared area, that every command of list
 * completed (their fences, host/fence.c): then there is nothing to ask it.
 * The waiter looks, yielding the core, before it asks: FENCE_SPIN_NS, or
 * while the daemon watches the command for its completion (its fence
 * word says so) as long as the daemon looks (50 us; 5 ms with a GPU and 8
 * or more cores: the area's header says), so that a client keeping a few
 * commands in flight refills its queue within microseconds, as natively,
 * where the driver gives the device to another context when it runs dry. */
#define FENCE_SPIN_NS 50000

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int fences_came(cl_uint n, const cl_event *list)
{
	uint64_t start = 0, limit;
	cl_uint done = 0;
	int st = 0;

	for (;;) {
		while (done < n && (st = cmx_session_fence_state(cmx_icd.s, list[done]->id)) == 1)
			done++;
		if (done == n)
			return 1;
		/* No fence to come: no shared area, or a command the daemon
		 * does not look at (a user event). */
		if (!list[done]->queue || cmx_session_broken(cmx_icd.s) ||
		    !cmx_session_has_fences(cmx_icd.s))
			return 0;
		limit = st < 0 ? cmx_session_fence_spin_ns(cmx_icd.s) : FENCE_SPIN_NS;
		if (!start)
			start = mono_ns();
		else if (mono_ns() - start >= limit)
			return 0;
		sched_yield();
	}
}

cl_int cmx_clWaitForEvents(cl_uint n, const cl_event *list)
{
	struct cmx_WaitForEvents_in in = { 0 };
	struct cmx_WaitForEvents_out out;
	struct cmx_waitlist w;
	struct cmx_reply r;
	cl_int err;
	int e;

	if (!n || !list)
		return CL_INVALID_VALUE;
	for (cl_uint i = 0; i < n; i++) {
		if (!CMX_IS(list[i], CMX_MAGIC_EVENT))
			return CL_INVALID_EVENT;
		if (list[i]->ctx != list[0]->ctx)
			return CL_INVALID_CONTEXT;
	}
	/* An event of an ended session failed (event_status()). */
	for (cl_uint i = 0; i < n; i++)
		if (cmx_icd_lost(list[i]->id))
			return CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST;
	if (fences_came(n, list))
		return events_landed(n, list);
	err = cmx_waitlist_init(&w, n, list, NULL);
	if (err)
		return err;
	in.events.v = w.ids;
	in.events.n = n;
	e = cmx_rpc_WaitForEvents(cmx_icd.s, &in, &out, &r);
	cmx_reply_fini(&r);
	cmx_waitlist_fini(&w);
	/* The session ended while waiting: the events failed with it. */
	if (e && cmx_icd_lost(list[0]->id))
		return CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST;
	if (e)
		return cmx_transport_err(e);
	if (r.status) {
		cmx_events_wait_data(n, list);
		return r.status;
	}
	return events_landed(n, list);
}

static cl_int event_status(cl_event e, cl_int *status)
{
	struct cmx_GetEventInfo_in in = { .event = { .id = e->id },
					  .param = CL_EVENT_COMMAND_EXECUTION_STATUS };
	struct cmx_GetEventInfo_out out;
	struct cmx_reply r;
	int err;

	/* The session that ran it has ended (its daemon or worker died): the
	 * command failed, as on a lost device, so that a loop polling the
	 * status ends as it would on a failed command. */
	if (cmx_icd_lost(e->id)) {
		*status = CL_OUT_OF_RESOURCES;
		return CL_SUCCESS;
	}
	if (cmx_session_fenced(cmx_icd.s, e->id)) {
		*status = CL_COMPLETE;
		goto landed;
	}
	err = cmx_rpc_GetEventInfo(cmx_icd.s, &in, &out, &r);
	if (err && cmx_icd_lost(e->id)) {
		*status = CL_OUT_OF_RESOURCES;
		return CL_SUCCESS;
	}
	if (err)
		return cmx_transport_err(err);
	if (!r.status && out.value.len == sizeof(cl_int))
		memcpy(status, out.value.ptr, sizeof(cl_int));
	err = r.status;
	cmx_reply_fini(&r);
	if (err)
		return err;
landed:
	/* Complete on the device, but its data is still on the way. */
	if (*status == CL_COMPLETE && atomic_load(&e->data_pending))
		*status = CL_RUNNING;
	else if (*status == CL_COMPLETE && e->queue && e->data_status < 0)
		*status = e->data_status;
	return CL_SUCCESS;
}

cl_int cmx_clGetEventInfo(cl_event e, cl_event_info param, size_t size, void *value,
			  size_t *size_ret)
{
	cl_uint refs;
	cl_int status = CL_QUEUED, err;

	if (!CMX_IS(e, CMX_MAGIC_EVENT))
		return CL_INVALID_EVENT;
	switch (param) {
	case CL_EVENT_COMMAND_QUEUE:
		return cmx_info_copy(size, value, size_ret, &e->queue, sizeof(e->queue));
	case CL_EVENT_CONTEXT:
		return cmx_info_copy(size, value, size_ret, &e->ctx, sizeof(e->ctx));
	case CL_EVENT_COMMAND_TYPE:
		return cmx_info_copy(size, value, size_ret, &e->type, sizeof(e->type));
	case CL_EVENT_REFERENCE_COUNT:
		refs = atomic_load(&e->refs);
		return cmx_info_copy(size, value, size_ret, &refs, sizeof(refs));
	case CL_EVENT_COMMAND_EXECUTION_STATUS:
		if (value && size < sizeof(cl_int))
			return CL_INVALID_VALUE;
		err = event_status(e, &status);
		if (err)
			return err;
		return cmx_info_copy(size, value, size_ret, &status, sizeof(status));
	}
	return CL_INVALID_VALUE;
}

cl_int cmx_clGetEventProfilingInfo(cl_event e, cl_profiling_info param, size_t size, void *value,
				   size_t *size_ret)
{
	struct cmx_GetEventProfilingInfo_in in;
	struct cmx_GetEventProfilingInfo_out out;
	struct cmx_reply r;
	cl_ulong v;
	int err;

	if (!CMX_IS(e, CMX_MAGIC_EVENT))
		return CL_INVALID_EVENT;
	if (!e->queue || !(e->queue->props & CL_QUEUE_PROFILING_ENABLE))
		return CL_PROFILING_INFO_NOT_AVAILABLE;
	if (param < CL_PROFILING_COMMAND_QUEUED || param > CL_PROFILING_COMMAND_COMPLETE)
		return CL_INVALID_VALUE;
	if (value && size < sizeof(cl_ulong))
		return CL_INVALID_VALUE;
	in.event.id = e->id;
	in.param = param;
	err = cmx_rpc_GetEventProfilingInfo(cmx_icd.s, &in, &out, &r);
	cmx_reply_fini(&r);
	if (err)
		return cmx_transport_err(err);
	if (r.status)
		return r.status;
	v = out.value;
	return cmx_info_copy(size, value, size_ret, &v, sizeof(v));
}

void cmx_event_callback_fired(uint64_t tag, int64_t status);

/* The session ended before the callback came: the command failed, as on a
 * lost device, and the callback runs once with that status. */
static void callback_lost(struct cmx_track *t)
{
	cmx_event_callback_fired((uint64_t)(uintptr_t)t, CL_OUT_OF_RESOURCES);
}

cl_int cmx_clSetEventCallback(cl_event e, cl_int type,
			      void(CL_CALLBACK *fn)(cl_event, cl_int, void *), void *user_data)
{
	struct cmx_SetEventCallback_in in;
	struct cmx_event_cb *cb;

	if (!CMX_IS(e, CMX_MAGIC_EVENT))
		return CL_INVALID_EVENT;
	if (!fn || (type != CL_SUBMITTED && type != CL_RUNNING && type != CL_COMPLETE))
		return CL_INVALID_VALUE;
	cb = malloc(sizeof(*cb));
	if (!cb)
		return CL_OUT_OF_HOST_MEMORY;
	cb->fn = fn;
	cb->user_data = user_data;
	cb->event = e;
	cb->type = type;
	cmx_clRetainEvent(e);
	in.event.id = e->id;
	in.type = (uint64_t)type;
	in.tag = (uint64_t)(uintptr_t)cb;
	/* The application waits for the callback: the command must be sent. */
	if (cmx_track_send(&cb->track, callback_lost, &cmx_desc_SetEventCallback_in, &in,
			   CMX_TRACK_FLUSH, 0, NULL)) {
		cmx_clReleaseEvent(e);
		free(cb);
		return CL_OUT_OF_RESOURCES;
	}
	return CL_SUCCESS;
}

static void callback_run(struct cmx_event_cb *cb, cl_int status)
{
	cl_event e = cb->event;

	/* An error status is reported as is; otherwise the state it reached. */
	cb->fn(e, status < 0 ? status : cb->type, cb->user_data);
	cmx_clReleaseEvent(e);
	free(cb);
}

/* EventDone: a completion callback waits for its event's data. */
void cmx_event_callback_fired(uint64_t tag, int64_t status)
{
	struct cmx_event_cb *cb = (struct cmx_event_cb *)(uintptr_t)tag;
	cl_event e = cb->event;

	cmx_track_end(&cb->track);
	if (cb->type == CL_COMPLETE) {
		pthread_mutex_lock(&e->lock);
		if (atomic_load(&e->data_pending)) {
			cb->next = e->after_data;
			e->after_data = cb;
			pthread_mutex_unlock(&e->lock);
			return;
		}
		pthread_mutex_unlock(&e->lock);
		if (e->queue && e->data_status < 0)
			status = e->data_status;
	}
	callback_run(cb, (cl_int)status);
}

void cmx_event_data_done(cl_event e, int status)
{
	struct cmx_event_cb *held;

	pthread_mutex_lock(&e->lock);
	e->data_status = status < 0 ? status : 0;
	held = e->after_data;
	e->after_data = NULL;
	pthread_mutex_lock(&cmx_icd.wait_lock);
	atomic_store(&e->data_pending, 0);
	pthread_cond_broadcast(&cmx_icd.wait_cond);
	pthread_mutex_unlock(&cmx_icd.wait_lock);
	pthread_mutex_unlock(&e->lock);
	while (held) {
		struct cmx_event_cb *next = held->next;
		callback_run(held, status < 0 ? status : CL_COMPLETE);
		held = next;
	}
}

/* Markers and barriers. */
static cl_int enqueue_sync_point(cl_command_queue q, cl_uint n, const cl_event *list,
				 cl_event *event, int barrier)
{
	struct cmx_EnqueueMarker_in in = { 0 };
	struct cmx_waitlist w;
	cl_event ev;
	cl_int err;

	if (!CMX_IS(q, CMX_MAGIC_QUEUE))
		return CL_INVALID_COMMAND_QUEUE;
	err = cmx_waitlist_init(&w, n, list, q->ctx);
	if (err)
		return err;
	ev = cmx_event_for(event, q, barrier ? CL_COMMAND_BARRIER : CL_COMMAND_MARKER,
			   &in.event.id);
	if (event && !ev) {
		cmx_waitlist_fini(&w);
		return CL_OUT_OF_HOST_MEMORY;
	}
	in.queue.id = q->id;
	in.wait.v = w.ids;
	in.wait.n = w.n;
	_Static_assert(sizeof(struct cmx_EnqueueBarrier_in) == sizeof(in), "one layout");
	err = barrier ? CMX_SEND(EnqueueBarrier, (struct cmx_EnqueueBarrier_in *)&in)
		      : CMX_SEND(EnqueueMarker, &in);
	cmx_waitlist_fini(&w);
	if (err && ev) {
		cmx_event_discard(ev);
		*event = NULL;
	}
	return err;
}

cl_int cmx_clEnqueueMarkerWithWaitList(cl_command_queue q, cl_uint n, const cl_event *list,
				       cl_event *event)
{
	return enqueue_sync_point(q, n, list, event, 0);
}

cl_int cmx_clEnqueueBarrierWithWaitList(cl_command_queue q, cl_uint n, const cl_event *list,
					cl_event *event)
{
	return enqueue_sync_point(q, n, list, event, 1);
}

cl_int cmx_clEnqueueMarker(cl_command_queue q, cl_event *event)
{
	if (!event)
		return CMX_IS(q, CMX_MAGIC_QUEUE) ? CL_INVALID_VALUE : CL_INVALID_COMMAND_QUEUE;
	return enqueue_sync_point(q, 0, NULL, event, 0);
}

cl_int cmx_clEnqueueBarrier(cl_command_queue q)
{
	return enqueue_sync_point(q, 0, NULL, NULL, 1);
}

cl_int cmx_clEnqueueWaitForEvents(cl_command_queue q, cl_uint n, const cl_event *list)
{
	if (CMX_IS(q, CMX_MAGIC_QUEUE) && (!n || !list))
		return CL_INVALID_VALUE;
	return enqueue_sync_point(q, n, list, NULL, 1);
}
