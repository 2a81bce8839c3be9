// SPDX-License-Identifier: MIT
// Completions the loop waits for (host/complete.h): a slot per registered
// event, named to the driver by its address (slots never move, and one is
// not reused before the driver's callback for it has come).
#include "complete.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "log.h"
#include "loop.h"
#include "server.h"
#include "tenant.h"

struct cmx_complete_slot {
	cl_event ev; /* NULL: settled */
	cl_int type; /* the status waited for */
	void (*fn)(void *arg, cl_int status);
	void *arg;
	struct cmx_server *srv; /* set when the slot is made, read by driver threads */
	/* The driver's callback is registered and has not come yet: the
	 * slot is not reused until it has, so a late callback for a slot a
	 * sweep settled finds it settled. */
	int pending;
	uint32_t idx, next_free;
};

#define NONE UINT32_MAX
#define CHUNK 256u
/* After a failure the sweep runs at once, then after 1, 2, 4 ... 256 ms:
 * PoCL fails a command's dependants inside clSetUserEventStatus, another
 * driver may take its time. */
#define SWEEP_FIRST_MS 1
#define SWEEP_LAST_MS 256

static struct cmx_complete_slot *slot_at(struct cmx_completions *cs, uint32_t idx)
{
	return &cs->chunk[idx / CHUNK][idx % CHUNK];
}

void cmx_complete_init(struct cmx_server *srv)
{
	srv->complete.free = NONE;
}

/*
 * Failed events the daemon is done with rest here before their release.
 * PoCL 3.1 leaves a command that failed through one event of its wait list
 * in the notify list of every other event it waits for (its in-order
 * predecessor, the migration of a buffer made from host memory on a queue
 * of its own, another wait-list event), and walks that list when such an
 * event ends. Released at once, the failed command is freed before that
 * walk, which then locks a destroyed mutex and aborts the worker
 * (pocl_lock_events_inorder(): Invalid argument), or hangs on a reused
 * one. Nothing says when the last of those events has ended, so a failed
 * event keeps the daemon's reference for REST_MS, charged to the tenant
 * whose session held it (CMX_COMPLETE_REST_BYTES: the driver's event and
 * command, rounded up), so that a tenant's failures are bounded by its
 * own mem quota. The tenants of a process outlive its rests: a worker's
 * live as long as it does, and the front end removes one only with its
 * worker.
 *
 * Finding out takes a status query. An in-order queue's previous command
 * is released at every enqueue, so that query is skipped until the
 * session has seen a command fail (struct cmx_session's failed:
 * cmx_event_bind()): a user event set to an error, a wait, event callback
 * or status query that found one. A command that fails on its own with
 * none of these noticing it is released at once, as every command was
 * before the rest.
 */
#define REST_MS 3000
#define REST_TICK_MS 250

struct cmx_complete_rest {
	cl_event ev;
	uint64_t until;		 /* CLOCK_MONOTONIC ns */
	struct cmx_tenant *tenant; /* charged CMX_COMPLETE_REST_BYTES, or NULL */
};

/* What a resting event holds for its tenant, charged to its mem quota:
 * the tenant's failures cost it, not the daemon. */
static void rest_charge(struct cmx_tenant *t, int64_t n)
{
	if (t)
		t->bytes += (uint64_t)n;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void rest_arm(struct cmx_server *srv);

static void rest_tick(struct cmx_io *io, int res, unsigned flags)
{
	/* The server's own timer: its io is the one armed. */
	struct cmx_server *srv =
	    (struct cmx_server *)((char *)io - offsetof(struct cmx_server, complete.rest_io));
	struct cmx_completions *cs = &srv->complete;
	uint64_t now = mono_ns();
	size_t k = 0;

	(void)res;
	(void)flags;
	cs->rest_armed = 0;
	for (size_t i = 0; i < cs->rest_n; i++) {
		if (cs->rest[i].until <= now) {
			clReleaseEvent(cs->rest[i].ev);
			rest_charge(cs->rest[i].tenant, -(int64_t)CMX_COMPLETE_REST_BYTES);
		} else
			cs->rest[k++] = cs->rest[i];
	}
	cs->rest_n = k;
	rest_arm(srv);
}

static void rest_arm(struct cmx_server *srv)
{
	struct cmx_completions *cs = &srv->complete;
	struct io_uring_sqe *sqe;

	if (cs->rest_armed || !cs->rest_n || !(sqe = cmx_loop_sqe(srv->loop, &cs->rest_io)))
		return;
	cs->rest_armed = 1;
	cs->rest_io.cb = rest_tick;
	cs->rest_ts.tv_sec = 0;
	cs->rest_ts.tv_nsec = REST_TICK_MS * 1000000ll;
	io_uring_prep_timeout(sqe, &cs->rest_ts, 0, 0);
}

struct rest_post {
	struct cmx_server *srv;
	struct cmx_tenant *tenant;
	cl_event ev;
};

/* Loop thread: ev rests (or, with no room to note it, is kept for good:
 * a leak is better than a worker that aborts). */
static void rest_add(void *arg)
{
	struct rest_post *p = arg;
	struct cmx_completions *cs = &p->srv->complete;

	if (cs->rest_n == cs->rest_cap) {
		size_t cap = cs->rest_cap ? cs->rest_cap * 2 : 64;
		struct cmx_complete_rest *v = realloc(cs->rest, cap * sizeof(*v));

		if (!v) {
			free(p);
			return;
		}
		cs->rest = v;
		cs->rest_cap = cap;
	}
	cs->rest[cs->rest_n++] =
	    (struct cmx_complete_rest){p->ev, mono_ns() + REST_MS * 1000000ull, p->tenant};
	rest_charge(p->tenant, CMX_COMPLETE_REST_BYTES);
	rest_arm(p->srv);
	free(p);
}

void cmx_complete_release(struct cmx_server *srv, struct cmx_tenant *t, cl_event ev)
{
	struct rest_post *p;
	cl_int st = CL_COMPLETE;

	if (!ev)
		return;
	if (clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, NULL) ||
	    st >= CL_COMPLETE || !srv || !srv->loop || !(p = malloc(sizeof(*p)))) {
		clReleaseEvent(ev);
		return;
	}
	p->srv = srv;
	p->tenant = t;
	p->ev = ev;
	cmx_loop_post(srv->loop, rest_add, p);
}

unsigned cmx_complete_resting(const struct cmx_server *srv)
{
	return (unsigned)srv->complete.rest_n;
}

/* Slot idx is settled: its event released, and the slot free again
 * unless the driver's callback is still to come. */
static void slot_free(struct cmx_completions *cs, uint32_t idx)
{
	struct cmx_complete_slot *s = slot_at(cs, idx);
	cl_event ev = s->ev;

	s->ev = NULL;
	s->fn = NULL;
	cs->live--;
	if (!s->pending) {
		s->next_free = cs->free;
		cs->free = idx;
	}
	/* The daemon's own reference: charged to no tenant (the session's
	 * references to the same event are). */
	cmx_complete_release(s->srv, NULL, ev);
}

/* Ends slot idx with status: frees it first, so that fn may register
 * again. */
static void settle(struct cmx_server *srv, uint32_t idx, cl_int status)
{
	struct cmx_complete_slot *s = slot_at(&srv->complete, idx);
	void (*fn)(void *, cl_int) = s->fn;
	void *arg = s->arg;

	slot_free(&srv->complete, idx);
	if (status < 0)
		cmx_complete_failed(srv);
	fn(arg, status);
}

/* The event's status now: CL_COMPLETE, an error, or above CL_COMPLETE
 * while it runs. NVIDIA calls CL_COMPLETE callbacks with CL_COMPLETE for a
 * command it dropped because a dependency failed; the status says so. */
static cl_int status_of(cl_event ev)
{
	cl_int st;

	if (clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, NULL))
		return CL_COMPLETE;
	return st;
}

static void called(void *arg)
{
	struct cmx_complete_slot *s = arg;
	struct cmx_completions *cs = &s->srv->complete;
	uint32_t idx = s->idx;
	cl_int st;

	s->pending = 0;
	if (!s->ev) {
		/* Settled by a sweep already: free now that the driver is done
		 * with it. */
		s->next_free = cs->free;
		cs->free = idx;
		return;
	}
	st = status_of(s->ev);
	settle(s->srv, idx, st < 0 ? st : s->type);
}

static void CL_CALLBACK on_complete(cl_event e, cl_int status, void *arg)
{
	struct cmx_complete_slot *s = arg;

	(void)e;
	(void)status;
	/* A driver thread, or the loop's own inside clSetEventCallback for
	 * an event already complete: the slot is the loop's to read, but for
	 * srv, written before the slot was first handed to the driver. Either
	 * way behind the completions the driver's threads reported before:
	 * a non-blocking read's ReadDone writes the guest's memory, in the
	 * order the reads completed. */
	cmx_loop_post_shared(s->srv->loop, called, s);
}

static int grow(struct cmx_server *srv)
{
	struct cmx_completions *cs = &srv->complete;
	struct cmx_complete_slot **chunk, *v;
	uint32_t c = cs->nchunk;

	if (cs->n > UINT32_MAX - 2 * CHUNK)
		return -1;
	chunk = realloc(cs->chunk, (size_t)(c + 1) * sizeof(*chunk));
	if (!chunk)
		return -1;
	cs->chunk = chunk;
	v = calloc(CHUNK, sizeof(*v));
	if (!v)
		return -1;
	for (uint32_t i = 0; i < CHUNK; i++) { /* the rest zero: calloc() */
		v[i].srv = srv;
		v[i].idx = cs->n + i;
		v[i].next_free = i + 1 < CHUNK ? cs->n + i + 1 : cs->free;
	}
	chunk[c] = v;
	cs->free = cs->n;
	cs->n += CHUNK;
	cs->nchunk = c + 1;
	return 0;
}

int cmx_complete_when(struct cmx_server *srv, cl_event e, void (*fn)(void *arg, cl_int status),
		      void *arg)
{
	return cmx_complete_at(srv, e, CL_COMPLETE, fn, arg);
}

int cmx_complete_at(struct cmx_server *srv, cl_event e, cl_int type,
		    void (*fn)(void *arg, cl_int status), void *arg)
{
	struct cmx_completions *cs = &srv->complete;
	struct cmx_complete_slot *s;
	uint32_t idx;
	cl_int err;

	if (cs->free == NONE && grow(srv))
		return CL_OUT_OF_HOST_MEMORY;
	idx = cs->free;
	s = slot_at(cs, idx);
	cs->free = s->next_free;
	clRetainEvent(e);
	s->ev = e;
	s->type = type;
	s->fn = fn;
	s->arg = arg;
	s->pending = 1;
	cs->live++;
	err = clSetEventCallback(e, type, on_complete, s);
	if (err) {
		s->pending = 0;
		slot_free(cs, idx);
	}
	return err;
}

/* Ends every registered event that has failed. A failure found on the way
 * (settle() reports it) runs the sweep again rather than inside itself:
 * a long chain of dependants does not recurse. */
static void sweep(struct cmx_server *srv)
{
	struct cmx_completions *cs = &srv->complete;

	if (cs->sweeping) {
		cs->again = 1;
		return;
	}
	cs->sweeping = 1;
	do {
		cs->again = 0;
		for (uint32_t i = 0; i < cs->n; i++) {
			struct cmx_complete_slot *s = slot_at(cs, i);
			cl_int st;
			if (!s->ev)
				continue;
			st = status_of(s->ev);
			if (st < 0)
				settle(srv, i, st);
		}
	} while (cs->again);
	cs->sweeping = 0;
}

static void sweep_arm(struct cmx_server *srv);

static void sweep_tick(struct cmx_io *io, int res, unsigned flags)
{
	/* The server's own timer: its io is the one armed. */
	struct cmx_server *srv =
	    (struct cmx_server *)((char *)io - offsetof(struct cmx_server, complete.io));
	struct cmx_completions *cs = &srv->complete;

	(void)res;
	(void)flags;
	cs->armed = 0;
	sweep(srv);
	if (cs->ms < SWEEP_LAST_MS && cs->live) {
		cs->ms *= 2;
		sweep_arm(srv);
	}
}

static void sweep_arm(struct cmx_server *srv)
{
	struct cmx_completions *cs = &srv->complete;
	struct io_uring_sqe *sqe;

	if (cs->armed || !(sqe = cmx_loop_sqe(srv->loop, &cs->io)))
		return;
	cs->armed = 1;
	cs->io.cb = sweep_tick;
	cs->ts.tv_sec = cs->ms / 1000;
	cs->ts.tv_nsec = (long long)(cs->ms % 1000) * 1000000ll;
	io_uring_prep_timeout(sqe, &cs->ts, 0, 0);
}

void cmx_complete_failed(struct cmx_server *srv)
{
	struct cmx_completions *cs = &srv->complete;

	/* A series in progress starts again. */
	cs->ms = SWEEP_FIRST_MS;
	if (!cs->live)
		return;
	sweep(srv);
	if (cs->live)
		sweep_arm(srv);
}

unsigned cmx_complete_pending(const struct cmx_server *srv)
{
	return srv->complete.live;
}
