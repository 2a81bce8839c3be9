// SPDX-License-Identifier: MIT
// Events in a state file (docs/architecture.md "Restarting the daemon"):
// a command's event is written as the command ended, and made again as a
// user event set to that end, its command type and profiling values kept
// beside it; a user event the guest has not set is made again unset, with
// the callbacks still waiting for it.
#include "eventstate.h"

#include <CL/cl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "log.h"
#include "scheduler.h"
#include "session.h"
#include "state.h"
#include "tenant.h"

static cl_int native_status(cl_event e)
{
	cl_int st = CL_OUT_OF_RESOURCES;

	if (clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, NULL))
		return CL_OUT_OF_RESOURCES;
	return st;
}

static cl_command_type native_type(cl_event e)
{
	cl_command_type t = 0;

	clGetEventInfo(e, CL_EVENT_COMMAND_TYPE, sizeof(t), &t, NULL);
	return t;
}

/* Not a placeholder of a command the scheduler holds (host/scheduler.c),
 * which is a user event only to the daemon. */
static int guest_user_event(struct cmx_session *s, struct cmx_obj *o)
{
	return o->h && !cmx_sched_is_held(s->srv, o->h) && native_type(o->h) == CL_COMMAND_USER;
}

struct blocked {
	struct cmx_session *s;
	uint64_t id;
};

static void find_blocked(struct cmx_obj *o, void *arg)
{
	struct blocked *b = arg;

	if (!b->id && o->kind == CMX_K_EVENT && (o->flags & CMX_OBJ_WAITED) &&
	    guest_user_event(b->s, o) && native_status(o->h) > CL_COMPLETE)
		b->id = o->id;
}

uint64_t cmx_eventstate_blocked(struct cmx_session *s)
{
	struct blocked b = {.s = s};

	cmx_objtab_each(&s->objs, find_blocked, &b);
	return b.id;
}

struct writing {
	struct cmx_session *s;
	struct cmx_state_writer *w;
	/* The session's contexts, for an event's context id. */
	struct cmx_obj **ctx;
	size_t nctx, cap;
	int oom;
	struct cmx_state_event_cb cbs[CMX_STATE_EVENT_CBS];
	unsigned ncbs;
};

static void collect_contexts(struct cmx_obj *o, void *arg)
{
	struct writing *wr = arg;

	if (o->kind != CMX_K_CONTEXT || !o->h)
		return;
	if (wr->nctx == wr->cap) {
		size_t cap = wr->cap ? wr->cap * 2 : 8;
		struct cmx_obj **v = realloc(wr->ctx, cap * sizeof(*v));
		if (!v) {
			wr->oom = 1;
			return;
		}
		wr->ctx = v;
		wr->cap = cap;
	}
	wr->ctx[wr->nctx++] = o;
}

static uint64_t context_id(const struct writing *wr, void *h)
{
	for (size_t i = 0; h && i < wr->nctx; i++)
		if (wr->ctx[i]->h == h)
			return wr->ctx[i]->id;
	return 0;
}

static void collect_cb(void *arg, unsigned type, uint64_t tag)
{
	struct writing *wr = arg;

	/* The hub holds at most as many (CB_PER_EVENT). */
	if (wr->ncbs < CMX_STATE_EVENT_CBS)
		wr->cbs[wr->ncbs++] = (struct cmx_state_event_cb){.type = type, .tag = tag};
}

/* What o's event ended as: its status, command type and profiling; 1
 * when the status is its native event's. */
static int event_end(struct writing *wr, struct cmx_obj *o, struct cmx_state_event *ev)
{
	ev->context = context_id(wr, o->ctx);
	if (!o->h) {
		/* Failed before it reached the device. */
		ev->status = o->err;
		return 0;
	}
	if (cmx_sched_is_held(wr->s->srv, o->h)) {
		/* Its command is held, not on the device: not drained, and
		 * not kept. It failed, as on a lost device. */
		cmx_warn("session %" PRIu64 ": event %#" PRIx64 " of a command the scheduler "
			 "held written as failed",
			 wr->s->id, o->id);
		ev->status = CL_OUT_OF_RESOURCES;
		return 0;
	}
	if (o->ext) {
		/* Made by a restore: its command's end, kept. */
		const struct cmx_event_past *past = o->ext;
		ev->type = past->type;
		ev->status = native_status(o->h);
		for (unsigned i = 0; i < 5; i++)
			if (past->prof_have & (1u << i)) {
				ev->flags |= CMX_STATE_EV_PROF << i;
				ev->prof[i] = past->prof[i];
			}
		return 1;
	}
	ev->type = native_type(o->h);
	ev->status = native_status(o->h);
	if (ev->type == CL_COMMAND_USER) {
		ev->flags |= CMX_STATE_EV_USER;
		return 1;
	}
	/* A command of a queue the guest released, which was not finished
	 * with the others: nothing it waits for is a user event left unset
	 * (cmx_eventstate_blocked()), so it ends. */
	if (ev->status > CL_COMPLETE) {
		clWaitForEvents(1, (const cl_event *)&o->h);
		ev->status = native_status(o->h);
		if (ev->status > CL_COMPLETE)
			ev->status = CL_OUT_OF_RESOURCES;
	}
	for (unsigned i = 0; i < 5; i++)
		if (!clGetEventProfilingInfo(o->h, CL_PROFILING_COMMAND_QUEUED + i,
					     sizeof(cl_ulong), &ev->prof[i], NULL))
			ev->flags |= CMX_STATE_EV_PROF << i;
		else
			ev->prof[i] = 0;
	return 1;
}

static void write_event(struct cmx_obj *o, void *arg)
{
	struct writing *wr = arg;
	struct cmx_state_event ev = {.id = o->id};
	int native;

	if (o->kind != CMX_K_EVENT)
		return;
	native = event_end(wr, o, &ev);
	if (ev.status >= CL_COMPLETE && !ev.context) {
		/* Its context released (a guest that does not hold what its
		 * events name): there is nothing to make it in. */
		cmx_warn("session %" PRIu64 ": event %#" PRIx64 " of a released context written "
			 "as failed",
			 wr->s->id, o->id);
		ev.status = CL_OUT_OF_RESOURCES;
		ev.flags = 0;
		native = 0;
	}
	/* Those it has reached are answered now, while the guest's
	 * connection is there; those of a user event left unset wait for the
	 * guest's status in the next daemon. */
	if (native)
		cmx_event_cbs_reached(o, (cl_int)ev.status);
	wr->ncbs = 0;
	if (native && ev.status > CL_COMPLETE)
		cmx_event_cbs_each(o, collect_cb, wr);
	ev.nc = wr->ncbs;
	struct iovec iov[2] = {{&ev, sizeof(ev)}, {wr->cbs, wr->ncbs * sizeof(wr->cbs[0])}};
	cmx_state_put(wr->w, CMX_STATE_EVENT, iov, 2);
}

void cmx_eventstate_write(struct cmx_session *s, struct cmx_state_writer *w)
{
	struct writing *wr = calloc(1, sizeof(*wr));

	if (!wr) {
		/* The writer keeps the first failure for its commit. */
		if (!w->err)
			w->err = -ENOMEM;
		return;
	}
	wr->s = s;
	wr->w = w;
	cmx_objtab_each(&s->objs, collect_contexts, wr);
	if (wr->oom) {
		if (!w->err)
			w->err = -ENOMEM;
	} else {
		cmx_objtab_each(&s->objs, write_event, wr);
	}
	free(wr->ctx);
	free(wr);
}

/* The record's values, as a guest's would be checked: an id of the
 * guest's range not taken, room in the tenant's objects quota, a live
 * context of the session for an event that did not fail, a status a
 * checkpoint writes, callbacks only on a user event still unset. */
static const char *check(struct cmx_session *s, const struct cmx_state_event *ev,
			 const uint8_t *cbs, struct cmx_obj **ctx)
{
	int user = !!(ev->flags & CMX_STATE_EV_USER);

	*ctx = ev->context ? cmx_session_obj(s, ev->context, CMX_K_CONTEXT) : NULL;
	if (ev->id < CMX_FIRST_GUEST_ID || cmx_objtab_get(&s->objs, ev->id))
		return "an event id taken or out of range";
	if (cmx_tenant_may_create(s->tenant))
		return "an event past the tenant's objects quota";
	if (ev->status < INT32_MIN || ev->status > CL_SUBMITTED ||
	    (ev->status > CL_COMPLETE && !(user && ev->status == CL_SUBMITTED)))
		return "an event status no checkpoint writes";
	if ((ev->context && !*ctx) || (ev->status >= CL_COMPLETE && (!*ctx || !(*ctx)->h)))
		return "an event of no such context";
	for (uint64_t i = 0; i < ev->nc; i++) {
		struct cmx_state_event_cb cb;
		memcpy(&cb, cbs + i * sizeof(cb), sizeof(cb));
		/* One a status already reached would be answered before the
		 * guest is back to hear it. */
		if (ev->status <= CL_COMPLETE || cb.type >= (uint64_t)ev->status)
			return "a callback no checkpoint writes";
	}
	return NULL;
}

int cmx_eventstate_restore(struct cmx_session *s, const struct cmx_state_rec *rec, const char **why)
{
	const struct cmx_state_event *ev = &rec->ev;
	struct cmx_event_past *past = NULL;
	struct cmx_obj *ctx, *o;
	cl_event e;
	cl_int ce;

	*why = check(s, ev, rec->cbs, &ctx);
	if (*why)
		return -EBADMSG;
	if (ev->status < CL_COMPLETE) {
		/* Failed: poisoned, as one whose command failed before
		 * reaching the device is; its status is its error. */
		if (cmx_session_add(s, ev->id, CMX_K_EVENT, NULL, ctx ? ctx->h : NULL,
				    (int32_t)ev->status, NULL)) {
			*why = "out of memory";
			return -ENOMEM;
		}
		return 0;
	}
	if (!(ev->flags & CMX_STATE_EV_USER)) {
		past = calloc(1, sizeof(*past));
		if (!past) {
			*why = "out of memory";
			return -ENOMEM;
		}
		past->type = ev->type;
		for (unsigned i = 0; i < 5; i++)
			if (ev->flags & (CMX_STATE_EV_PROF << i)) {
				past->prof_have |= 1u << i;
				past->prof[i] = ev->prof[i];
			}
	}
	/* Complete: a user event set so, which every wait list and wait
	 * takes as the command's own event. */
	e = clCreateUserEvent(ctx->h, &ce);
	if (e && ev->status == CL_COMPLETE)
		ce = clSetUserEventStatus(e, CL_COMPLETE);
	if (!e || ce) {
		if (e)
			clReleaseEvent(e);
		free(past);
		*why = "a user event the driver refused";
		return -EIO;
	}
	if (cmx_session_add(s, ev->id, CMX_K_EVENT, e, ctx->h, 0, &o)) {
		clReleaseEvent(e);
		free(past);
		*why = "out of memory";
		return -ENOMEM;
	}
	o->ext = past;
	for (uint64_t i = 0; i < ev->nc; i++) {
		struct cmx_state_event_cb cb;
		memcpy(&cb, rec->cbs + i * sizeof(cb), sizeof(cb));
		if (cmx_event_cb_add(s, o, (unsigned)cb.type, cb.tag)) {
			*why = "a callback past the tenant's objects quota";
			return -EBADMSG;
		}
	}
	return 0;
}
