// SPDX-License-Identifier: MIT
// Releasing what a session holds: an object at its clReleaseX, everything
// at the session's end. Above the handlers, whose state an object's release
// reaches into; the handlers release through cmx_session_release(), and a
// call channel's end closes its session through srv->conn_ops.
#include "release.h"

#include <CL/cl.h>
#include <stdlib.h>
#include <unistd.h>

#include "area.h"
#include "complete.h"
#include "conn.h"
#include "exec.h"
#include "fence.h"
#include "incdir.h"
#include "lane.h"
#include "log.h"
#include "parts.h"
#include "reaper.h"
#include "record.h"
#include "scheduler.h"
#include "server.h"
#include "session.h"
#include "shm.h"
#include "tenant.h"
#include "zero.h"

static void user_event_end(struct cmx_obj *o);

/* An object's ext (host/object.h); any thread (the reaper's too). */
static void ext_free(struct cmx_obj *o)
{
	if (o->kind == CMX_K_CONTEXT || o->kind == CMX_K_QUEUE)
		cmx_zero_release(o);
	free(o->ext); /* the other kinds': plain memory */
	o->ext = NULL;
}

/* t: the tenant its failed command's event rests for (host/complete.h),
 * or NULL. */
static void release_native(struct cmx_server *srv, struct cmx_tenant *t, struct cmx_obj *o)
{
	if (o->kind == CMX_K_CMDBUF) {
		/* Its ext holds native objects, released after the buffer. */
		cmx_cmdbuf_release(o);
		return;
	}
	ext_free(o);
	if (!o->h)
		return;
	switch (o->kind) {
	case CMX_K_DEVICE:
		/* Root devices belong to the daemon. */
		if (o->flags & CMX_OBJ_SUBDEVICE)
			clReleaseDevice(o->h);
		break;
	case CMX_K_CONTEXT:
		clReleaseContext(o->h);
		break;
	case CMX_K_QUEUE:
		cmx_complete_release(srv, t, o->last);
		clReleaseCommandQueue(o->h);
		break;
	case CMX_K_MEM:
		clReleaseMemObject(o->h);
		break;
	case CMX_K_PROGRAM:
		clReleaseProgram(o->h);
		break;
	case CMX_K_KERNEL:
		clReleaseKernel(o->h);
		break;
	case CMX_K_EVENT:
		/* A failed command's may still be in the driver's lists. */
		cmx_complete_release(srv, t, o->h);
		break;
	case CMX_K_SAMPLER:
		clReleaseSampler(o->h);
		break;
	}
}

/* ctx: the server. */
static void reap_obj(void *ctx, void *arg)
{
	/* Oclgrind's queue release finishes the queue, running its commands
	 * in this thread: one thread drives that driver at a time. */
	cmx_exec_drive_lock(ctx);
	release_native(ctx, NULL, arg);
	cmx_exec_drive_unlock(ctx);
	free(arg);
}

static void free_obj(struct cmx_session *s, struct cmx_obj *o)
{
	/* A command the scheduler holds may still use it. */
	cmx_sched_keep(s, o->kind, o->h);
	if (o->cbs)
		cmx_event_cbs_detach(o);
	s->bytes -= o->bytes;
	s->srv->bytes -= o->bytes;
	s->tenant->bytes -= o->bytes;
	s->srv->objects--;
	if (o->kind != CMX_K_DEVICE)
		s->tenant->objects -= 1 + cmx_cmdbuf_commands(o);
	/* A large buffer's native release unmaps it, for tens of milliseconds
	 * (PoCL: 80 ms a GiB), and the releases of a closing session may wait
	 * for it on the driver's locks: neither on the loop, nor a queue's
	 * release on Oclgrind, which runs the queue (reap_obj()). The reaper
	 * keeps their order. */
	if (s->closed || (o->kind == CMX_K_MEM && o->size >= CMX_REAP_MIN) ||
	    (o->kind == CMX_K_QUEUE && s->srv->flush_runs)) {
		/* A failed command's event rests charged to the tenant, which
		 * the reaper does not know: handed over here. */
		if (o->kind == CMX_K_EVENT) {
			cmx_complete_release(s->srv, s->tenant, o->h);
			o->h = NULL;
		} else if (o->kind == CMX_K_QUEUE) {
			cmx_complete_release(s->srv, s->tenant, o->last);
			o->last = NULL;
		}
		cmx_reap(reap_obj, s->srv, o);
		return;
	}
	release_native(s->srv, s->tenant, o);
	free(o);
}

void cmx_release_obj(struct cmx_session *s, struct cmx_obj *o)
{
	/* A user event released unset can never be set: the commands behind
	 * it, and an executor waiting for them, would wait until the session
	 * ends and beyond it (the close completes only the events it still
	 * holds). Nobody can tell it from a set one any more, so it is set. */
	if (o->kind == CMX_K_EVENT && !cmx_sched_is_held(s->srv, o->h))
		user_event_end(o);
	cmx_record_forget(s, o);
	free_obj(s, o);
}

/* A user event the guest never set would hold the commands waiting for it
 * (and what they use) for ever: a closing session completes it. Not with
 * an error status: PoCL 3.1 aborts failing the commands that wait on it
 * (a pthread error in pocl_update_event_failed()). Setting one already
 * set only fails the call. */
static void user_event_end(struct cmx_obj *o)
{
	cl_command_type t = 0;

	if (o->kind == CMX_K_EVENT && o->h &&
	    !clGetEventInfo(o->h, CL_EVENT_COMMAND_TYPE, sizeof(t), &t, NULL) &&
	    t == CL_COMMAND_USER)
		clSetUserEventStatus(o->h, CL_COMPLETE);
}

static void collect(struct cmx_obj *o, void *arg)
{
	struct cmx_obj ***cursor = arg;

	*(*cursor)++ = o;
}

void cmx_release_session(struct cmx_session *s)
{
	struct cmx_obj **all, **cursor;
	size_t n = s->objs.count;

	if (s->closed)
		return;
	s->closed = 1;
	s->conn = NULL;
	cmx_fence_forget(s);
	cmx_sched_drop(s);
	if (s->nconn) {
		struct cmx_conn *nc = s->nconn;
		s->nconn = NULL;
		cmx_conn_kill(nc, NULL);
	}
	cmx_lane_session_close(s);
	cmx_area_maps_drop(s, 0);
	/* Release in kind order, dependents first: events, kernels, programs,
	 * buffers, queues, contexts; native reference counts keep anything a
	 * command still uses alive until it completes. */
	all = malloc((n ? n : 1) * sizeof(*all));
	if (all) {
		cursor = all;
		cmx_objtab_each(&s->objs, collect, &cursor);
		for (int kind = CMX_K_COUNT - 1; kind > CMX_K_DEVICE; kind--)
			for (size_t i = 0; i < n; i++)
				if (all[i] && all[i]->kind == kind) {
					user_event_end(all[i]);
					free_obj(s, all[i]);
					all[i] = NULL;
				}
		for (size_t i = 0; i < n; i++)
			if (all[i])
				free_obj(s, all[i]);
		free(all);
	}
	cmx_objtab_fini(&s->objs);
	cmx_parts_drop(s);
	cmx_record_free(s);
	/* Blocks that commands in flight still hold keep the mapping. */
	cmx_shm_close(s->shm);
	s->shm = NULL;
	cmx_area_put(s->area);
	s->area = NULL;
	if (s->area_fd >= 0)
		close(s->area_fd);
	s->area_fd = -1;
	cmx_incdir_drop_session(s->id);
	cmx_info("session %llu: closed, everything it held released", (unsigned long long)s->id);
	cmx_session_unref(s);
}

unsigned cmx_release_tenant(struct cmx_server *srv, struct cmx_tenant *t)
{
	unsigned n = 0;

	/* Killing a connection can free its session: walk again each time. */
	for (;;) {
		struct cmx_session *s = srv->sessions;
		while (s && (s->closed || s->tenant != t || !s->conn))
			s = s->next;
		if (!s)
			return n;
		cmx_conn_kill(s->conn, "evicted by the administrator");
		n++;
	}
}
