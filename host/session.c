// SPDX-License-Identifier: MIT
// Sessions: object ownership, release on disconnect, notifications.
#include "session.h"
#include "incdir.h"

#include <CL/cl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "area.h"
#include "codec.h"
#include "complete.h"
#include "conn.h"
#include "exec.h"
#include "fence.h"
#include "lane.h"
#include "log.h"
#include "parts.h"
#include "reaper.h"
#include "server.h"
#include "shm.h"
#include "scheduler.h"
#include "server.h"
#include "tenant.h"
#include "zero.h"

struct cmx_session *cmx_session_create(struct cmx_server *srv, struct cmx_conn *conn,
				       struct cmx_tenant *t)
{
	struct cmx_session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->srv = srv;
	s->tenant = t;
	t->sessions++;
	s->conn = conn;
	s->refs = 1;
	s->area_fd = -1;
	s->id = ++srv->next_session;
	/* The notification channel proves it belongs to this session with it. */
	if (getrandom(&s->token, sizeof(s->token), 0) != sizeof(s->token))
		s->token = (uint64_t)(uintptr_t)s ^ s->id * 0x9e3779b97f4a7c15ull;
	cmx_objtab_init(&s->objs);
	/* Devices exist before the guest asks: ids 1..n in every session. */
	for (unsigned i = 0; i < srv->ndevices; i++)
		cmx_session_add(s, i + 1, CMX_K_DEVICE, srv->devices[i], NULL, 0, NULL);
	s->next = srv->sessions;
	if (s->next)
		s->next->pprev = &s->next;
	s->pprev = &srv->sessions;
	srv->sessions = s;
	srv->nsessions++;
	return s;
}

struct cmx_session *cmx_session_find(struct cmx_server *srv, uint64_t id, uint64_t token)
{
	/* The token is compared in constant time (a channel that guesses
	 * learns nothing from how long a refusal takes). */
	for (struct cmx_session *s = srv->sessions; s; s = s->next)
		if (s->id == id && !s->closed) {
			volatile uint64_t diff = s->token ^ token;
			return diff ? NULL : s;
		}
	return NULL;
}

struct cmx_obj *cmx_session_obj(struct cmx_session *s, uint64_t id, unsigned kind)
{
	struct cmx_obj *o = cmx_objtab_get(&s->objs, id);

	return o && o->kind == kind ? o : NULL;
}

int cmx_session_add(struct cmx_session *s, uint64_t id, unsigned kind, void *h, void *ctx,
		    int32_t err, struct cmx_obj **out)
{
	struct cmx_obj *o = calloc(1, sizeof(*o));
	int e;

	if (!o)
		return -ENOMEM;
	o->id = id;
	o->kind = (uint8_t)kind;
	o->h = h;
	o->ctx = ctx;
	o->err = err;
	e = cmx_objtab_add(&s->objs, o);
	if (e) {
		free(o);
		return e;
	}
	s->srv->objects++;
	if (kind != CMX_K_DEVICE)
		s->tenant->objects++;
	if (out)
		*out = o;
	return 0;
}

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

void cmx_session_charge(struct cmx_session *s, struct cmx_obj *o, uint64_t bytes)
{
	o->bytes += bytes;
	s->bytes += bytes;
	s->srv->bytes += bytes;
	s->tenant->bytes += bytes;
}

static void user_event_end(struct cmx_obj *o);

void cmx_session_release(struct cmx_session *s, uint64_t id, unsigned kind)
{
	struct cmx_obj *o = cmx_session_obj(s, id, kind);

	if (!o || !cmx_objtab_del(&s->objs, id))
		return;
	/* A user event released unset can never be set: the commands behind
	 * it, and an executor waiting for them, would wait until the session
	 * ends and beyond it (the close completes only the events it still
	 * holds). Nobody can tell it from a set one any more, so it is set. */
	if (kind == CMX_K_EVENT && !cmx_sched_is_held(s->srv, o->h))
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

void cmx_session_close(struct cmx_session *s)
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

unsigned cmx_session_evict(struct cmx_server *srv, struct cmx_tenant *t)
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

void cmx_session_ref(struct cmx_session *s)
{
	s->refs++;
}

void cmx_session_unref(struct cmx_session *s)
{
	if (--s->refs)
		return;
	*s->pprev = s->next;
	if (s->next)
		s->next->pprev = s->pprev;
	s->srv->nsessions--;
	s->tenant->sessions--;
	free(s);
}

void cmx_session_notify(struct cmx_session *s, const void *desc, const void *args, void *bulk,
			uint64_t bulk_len, void (*free_fn)(void *))
{
	const struct cmx_msgdesc *d = desc;
	size_t size = cmx_codec_size(d, args);
	uint8_t stack[512], *buf = size <= sizeof(stack) ? stack : malloc(size);
	struct cmx_hdr h = { .size = (uint32_t)size, .op = d->op, .bulk = bulk_len };

	if (!buf || !s->nconn || s->closed) {
		if (free_fn)
			free_fn(bulk);
		if (buf != stack)
			free(buf);
		return;
	}
	cmx_codec_encode(d, args, buf);
	cmx_area_mark(s->area, &h, bulk);
	cmx_conn_send(s->nconn, &h, buf, bulk, free_fn);
	if (buf != stack)
		free(buf);
}
