// SPDX-License-Identifier: MIT
// Handlers: events, markers and barriers.
#include "exec.h"
#include "defer.h"
#include "complete.h"
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
	if (cmx_sched_is_held(c->s->srv, in->event.h))
		return CL_INVALID_EVENT;
	e = clSetUserEventStatus(in->event.h, (cl_int)in->status);
	/* Commands behind it fail, and a driver may never call back for
	 * them. */
	if (e == CL_SUCCESS && in->status < 0) {
		c->s->failed = 1;
		cmx_complete_failed(c->s->srv);
	}
	cmx_sched_poke(c->s->srv);
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

	cmx_exec_drive_lock(c->s->srv);
	e = clWaitForEvents((cl_uint)in->events.n, (const cl_event *)in->events.h);
	cmx_exec_drive_unlock(c->s->srv);

	for (uint64_t i = 0; i < in->events.n; i++) {
		cl_int st = CL_COMPLETE, qe;
		/* A failed held command's placeholder is a user event, for which
		 * NVIDIA's clWaitForEvents reports no error: its status does. */
		qe = clGetEventInfo(in->events.h[i], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st),
				    &st, NULL);
		if (!e && st < 0)
			e = CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST;
		if (e && e != CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST &&
		    (qe != CL_SUCCESS || st > CL_COMPLETE))
			cmx_exec_check_lost(c->s->srv, qe != CL_SUCCESS ? qe : e,
					    "clWaitForEvents");
		clReleaseEvent(in->events.h[i]);
	}
	return e;
}

/* A failed command's wait answers CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST;
 * a wait the driver itself failed (its state lost: -9999 on NVIDIA), what
 * the driver said, as natively. */
static void wait1_done(struct cmx_call *c, int status)
{
	int lost = status == -9999 || status == CL_INVALID_COMMAND_QUEUE;

	cmx_call_done(c, status >= 0 ? CL_SUCCESS
			 : lost	     ? status
				     : CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
}

int cmx_h_WaitForEvents(struct cmx_call *c, struct cmx_WaitForEvents_in *in,
			struct cmx_WaitForEvents_out *out)
{
	if (!in->events.n)
		return CL_INVALID_VALUE;
	/* One event on a driver that starts commands as they are enqueued
	 * (NVIDIA): the loop watches it as it watches clFinish's, and the
	 * reply of a short wait leaves with no executor hand-off (an
	 * executor's clWaitForEvents cost twice a clFinish). */
	if (in->events.n == 1 && c->s->srv->submits_at_enqueue && !c->s->srv->flush_runs)
		return cmx_defer_wait_event(c, in->events.h[0], wait1_done);
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
	cl_int e;

	if (!in->event.h) {
		/* Poisoned: its command failed before reaching the device. */
		if (in->param != CL_EVENT_COMMAND_EXECUTION_STATUS)
			return CL_INVALID_EVENT;
		return status_answer(c, out, o ? o->err : CL_INVALID_EVENT);
	}
	/* Held in the daemon: queued, as far as the guest can tell. */
	if (in->param == CL_EVENT_COMMAND_EXECUTION_STATUS &&
	    cmx_sched_is_held(c->s->srv, in->event.h))
		return status_answer(c, out, CL_QUEUED);
	/* Made by a restore: its native event is a user event, the command's
	 * type is kept. */
	if (in->param == CL_EVENT_COMMAND_TYPE && o && o->ext)
		return status_answer(c, out, (cl_int)((struct cmx_event_past *)o->ext)->type);
	e = CMX_INFO(c, &out->value, clGetEventInfo, in->event.h, (cl_uint)in->param);
	/* A failed command seen (cmx_event_bind()). */
	if (e == CL_SUCCESS && in->param == CL_EVENT_COMMAND_EXECUTION_STATUS &&
	    out->value.len == sizeof(cl_int) && *(const cl_int *)out->value.ptr < 0)
		c->s->failed = 1;
	return e;
}

int cmx_h_GetEventProfilingInfo(struct cmx_call *c, struct cmx_GetEventProfilingInfo_in *in,
				struct cmx_GetEventProfilingInfo_out *out)
{
	struct cmx_obj *o = cmx_session_obj(c->s, in->event.id, CMX_K_EVENT);
	const struct cmx_event_past *past = o ? o->ext : NULL;
	uint64_t i = in->param - CL_PROFILING_COMMAND_QUEUED;
	cl_ulong v = 0;
	cl_int e;

	/* Made by a restore: the values its command's event had (a user
	 * event has none). */
	if (past) {
		if (in->param < CL_PROFILING_COMMAND_QUEUED || i >= 5)
			return CL_INVALID_VALUE;
		if (!(past->prof_have & (1u << i)))
			return CL_PROFILING_INFO_NOT_AVAILABLE;
		out->value = past->prof[i];
		return CL_SUCCESS;
	}
	e = clGetEventProfilingInfo(in->event.h, (cl_uint)in->param, sizeof(v), &v, NULL);
	out->value = v;
	return e;
}

/*
 * Event callbacks. A guest may register any number of callbacks on one
 * event, and a driver's cost per registration can grow with those already
 * there (PoCL's with their square), on the loop thread. So the daemon
 * registers one native callback per event and status (a slot), on its
 * first registration, and fans out to the guest's records (notes) when it
 * comes. Each note is an object of the tenant (its objects quota) until it
 * is answered, and an event takes at most CB_PER_EVENT of them.
 */
#define CB_PER_EVENT 64
#define CB_TYPES     3 /* CL_COMPLETE, CL_RUNNING, CL_SUBMITTED */

struct cb_note {
	uint64_t tag;
	struct cb_note *next;
};

struct cb_hub;

/* One native registration: the event reaching `type`. Loop thread, but for
 * `native`, written by the driver's thread before it posts. */
struct cmx_cb_slot {
	struct cb_hub *hub;
	cl_int type;
	int armed;     /* the native callback is registered and not yet called */
	int fired;     /* the status is reached: later notes are answered at once */
	cl_int status; /* what fired it (an error status, or type) */
	cl_int native; /* what the native callback said */
	int watched;   /* on the status poll's list (flush_runs) */
	struct cb_note *notes, **notes_tail; /* in registration order */
	struct cmx_cb_slot *next_watched;
};

/* The callbacks of one native event, of one session; hangs off the event's
 * object (o->cbs) until the guest releases it, then lives until its last
 * native callback has come. */
struct cb_hub {
	cl_event ev; /* retained */
	struct cmx_server *srv;
	uint64_t session;
	struct cmx_tenant *t; /* charged one object per note */
	struct cmx_obj *obj;  /* NULL once released */
	unsigned notes;
	struct cmx_cb_slot slot[CB_TYPES];
};

static struct cmx_session *hub_session(const struct cb_hub *h)
{
	struct cmx_session *s;

	for (s = h->srv->sessions; s && s->id != h->session; s = s->next)
		;
	return s && !s->closed ? s : NULL;
}

static void notify_done(struct cmx_session *s, uint64_t tag, cl_int status)
{
	struct cmx_EventDone_in in = {.tag = tag, .status = status};

	cmx_call_notify(s, &cmx_desc_EventDone_in, &in, NULL, 0, NULL);
}

static void hub_maybe_free(struct cb_hub *h)
{
	if (h->obj || h->notes)
		return;
	for (int i = 0; i < CB_TYPES; i++)
		if (h->slot[i].armed || h->slot[i].watched)
			return;
	clReleaseEvent(h->ev);
	free(h);
}

/* The slot's status is reached: every note is answered (a gone session's
 * only freed) and its object returned. */
static void slot_fire_one(struct cmx_cb_slot *sl, cl_int status)
{
	struct cb_hub *h = sl->hub;
	struct cmx_session *s = hub_session(h);

	sl->fired = 1;
	sl->status = status;
	while (sl->notes) {
		struct cb_note *n = sl->notes;
		sl->notes = n->next;
		if (!sl->notes)
			sl->notes_tail = &sl->notes;
		if (s)
			notify_done(s, n->tag, status);
		free(n);
		h->notes--;
		h->t->objects--;
	}
}

/*
 * A callback is due when its event reaches its status or one past it
 * (a placeholder or user event goes from queued straight to complete, and
 * a failed command may never run): reaching a status fires the slots of
 * the earlier ones too, earliest first, each once.
 */
static void slot_fire(struct cmx_cb_slot *sl, cl_int status)
{
	struct cb_hub *h = sl->hub;

	for (int i = CB_TYPES - 1; i > sl->type; i--)
		if (!h->slot[i].fired)
			slot_fire_one(&h->slot[i], status < 0 ? status : i);
	slot_fire_one(sl, status);
}

static void unwatch(struct cmx_cb_slot *sl)
{
	for (struct cmx_cb_slot **pp = &sl->hub->srv->cb_watched; *pp; pp = &(*pp)->next_watched)
		if (*pp == sl) {
			*pp = sl->next_watched;
			sl->watched = 0;
			return;
		}
}

static void slot_called(void *arg)
{
	struct cmx_cb_slot *sl = arg;

	sl->armed = 0;
	if (!sl->fired)
		slot_fire(sl, sl->native);
	if (sl->watched)
		unwatch(sl);
	hub_maybe_free(sl->hub);
}

/*
 * On a driver that calls callbacks only when the whole wait that ran the
 * command returns (Oclgrind: cmx_exec_poll_start()), an area buffer's
 * non-blocking write deadlocked: its unmap waits on a user event the guest
 * sets from the map's callback, and the wait that ran the map spun on that
 * unmap. The loop reads the watched events' status and answers as soon as
 * one has reached its slot's status; the callback, when it comes, only
 * ends the slot.
 */
static int callbacks_poll(struct cmx_server *srv)
{
	int seen = 0;

	for (struct cmx_cb_slot **pp = &srv->cb_watched, *sl; (sl = *pp);) {
		cl_int st = CL_QUEUED;

		/* A gone session's notes are left to the callback. */
		if (hub_session(sl->hub) &&
		    (clGetEventInfo(sl->hub->ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st,
				    NULL) != CL_SUCCESS ||
		     st > sl->type)) {
			pp = &sl->next_watched;
			continue;
		}
		if (hub_session(sl->hub))
			slot_fire(sl, st < 0 ? st : sl->type);
		*pp = sl->next_watched;
		sl->watched = 0;
		hub_maybe_free(sl->hub);
		seen = 1;
	}
	return seen ? 1 : srv->cb_watched ? 0 : -1;
}

/* The slot's native registration has ended (host/complete.c: at its
 * status, or at the event's error, once). */
static void slot_settled(void *arg, cl_int status)
{
	struct cmx_cb_slot *sl = arg;

	/* A failed command seen (cmx_event_bind()). */
	if (status < 0 && hub_session(sl->hub))
		hub_session(sl->hub)->failed = 1;
	sl->native = status;
	slot_called(sl);
}

/* The hub of o's native event, made on its first callback. */
static struct cb_hub *hub_of(struct cmx_session *s, struct cmx_obj *o)
{
	struct cb_hub *h = o->cbs;

	/* The scheduler gave a held command's event its own handle since:
	 * the old hub lives on until its callbacks come. */
	if (h && h->ev != o->h) {
		cmx_event_cbs_detach(o);
		h = NULL;
	}
	if (h)
		return h;
	h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	clRetainEvent(o->h);
	h->ev = o->h;
	h->srv = s->srv;
	h->session = s->id;
	h->t = s->tenant;
	h->obj = o;
	for (int i = 0; i < CB_TYPES; i++) {
		h->slot[i].hub = h;
		h->slot[i].type = i;
		h->slot[i].notes_tail = &h->slot[i].notes;
	}
	o->cbs = h;
	return h;
}

void cmx_event_cbs_detach(struct cmx_obj *o)
{
	struct cb_hub *h = o->cbs;

	if (!h)
		return;
	o->cbs = NULL;
	h->obj = NULL;
	hub_maybe_free(h);
}

/* The event's one native registration for the slot's status: the
 * driver's own list stays short whatever the guest registers. 0 or the
 * driver's error. */
static cl_int slot_arm(struct cmx_cb_slot *sl)
{
	struct cmx_server *srv = sl->hub->srv;
	cl_int e;

	if (sl->armed || sl->fired)
		return CL_SUCCESS;
	e = cmx_complete_at(srv, sl->hub->ev, sl->type, slot_settled, sl);
	if (e)
		return e;
	sl->armed = 1;
	if (srv->flush_runs && !sl->watched) {
		sl->watched = 1;
		sl->next_watched = srv->cb_watched;
		srv->cb_watched = sl;
		cmx_exec_poll_start(srv, callbacks_poll);
	}
	return CL_SUCCESS;
}

static int event_is_user(cl_event ev)
{
	cl_command_type t = 0;

	return clGetEventInfo(ev, CL_EVENT_COMMAND_TYPE, sizeof(t), &t, NULL) == CL_SUCCESS &&
	       t == CL_COMMAND_USER;
}

cl_int cmx_event_cb_add(struct cmx_session *s, struct cmx_obj *o, unsigned type, uint64_t tag)
{
	struct cmx_cb_slot *sl;
	struct cb_note *n;
	struct cb_hub *h;
	cl_int e;

	if (type >= CB_TYPES)
		return CL_INVALID_VALUE;
	if (!o->h) {
		/* A poisoned event has already failed: answered at once. */
		notify_done(s, tag, o->err);
		return CL_SUCCESS;
	}
	h = hub_of(s, o);
	if (!h)
		return CL_OUT_OF_HOST_MEMORY;
	sl = &h->slot[type];
	/* Armed before, the driver may never call back (PoCL's for a command
	 * whose dependency failed): the status it has now decides. */
	if (!sl->fired && h->slot[CL_COMPLETE].armed) {
		cl_int st = CL_QUEUED;

		if (clGetEventInfo(h->ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st,
				   NULL) == CL_SUCCESS &&
		    st <= sl->type)
			slot_fire(sl, st < 0 ? st : sl->type);
	}
	if (sl->fired) {
		notify_done(s, tag, sl->status);
		return CL_SUCCESS;
	}
	/* Past either, the call fails: its EventDone carries the error
	 * (cmx_call_done()), as for any asynchronous call that promised one. */
	if (h->notes >= CB_PER_EVENT)
		return CL_OUT_OF_RESOURCES;
	e = cmx_tenant_may_create(s->tenant);
	if (e)
		return e;
	n = malloc(sizeof(*n));
	if (!n)
		return CL_OUT_OF_HOST_MEMORY;
	/* The completion fires an earlier status that the driver skipped or
	 * never reports: a user event's (the scheduler's placeholders too)
	 * never runs, so that slot is left to it alone. */
	e = type == CL_COMPLETE ? CL_SUCCESS : slot_arm(&h->slot[CL_COMPLETE]);
	if (!e && !(type == CL_RUNNING && event_is_user(h->ev)))
		e = slot_arm(sl);
	if (e) {
		free(n);
		hub_maybe_free(h);
		return e;
	}
	n->tag = tag;
	n->next = NULL;
	*sl->notes_tail = n;
	sl->notes_tail = &n->next;
	h->notes++;
	h->t->objects++;
	return CL_SUCCESS;
}

int cmx_h_SetEventCallback(struct cmx_call *c, struct cmx_SetEventCallback_in *in)
{
	struct cmx_obj *o = cmx_session_obj(c->s, in->event.id, CMX_K_EVENT);

	if (in->type >= CB_TYPES)
		return CL_INVALID_VALUE;
	if (!o) {
		notify_done(c->s, in->tag, CL_INVALID_EVENT);
		return CL_SUCCESS;
	}
	return cmx_event_cb_add(c->s, o, (unsigned)in->type, in->tag);
}

void cmx_event_cbs_reached(struct cmx_obj *o, cl_int status)
{
	struct cb_hub *h = o->cbs;

	if (!h)
		return;
	/* Latest first: slot_fire() fires the earlier ones with it. */
	for (int i = 0; i < CB_TYPES; i++)
		if (!h->slot[i].fired && status <= i)
			slot_fire(&h->slot[i], status < 0 ? status : i);
}

void cmx_event_cbs_each(struct cmx_obj *o, void (*fn)(void *arg, unsigned type, uint64_t tag),
			void *arg)
{
	struct cb_hub *h = o->cbs;

	for (int i = 0; h && i < CB_TYPES; i++)
		for (struct cb_note *n = h->slot[i].fired ? NULL : h->slot[i].notes; n; n = n->next)
			fn(arg, (unsigned)i, n->tag);
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
