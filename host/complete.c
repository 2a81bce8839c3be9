// SPDX-License-Identifier: MIT
// Completions the loop waits for (host/complete.h): a slot per registered
// event, named to the driver by index and generation, never by pointer.
#include "complete.h"

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "log.h"
#include "loop.h"
#include "server.h"

struct slot {
	cl_event ev; /* NULL: free */
	cl_int type; /* the status waited for */
	void (*fn)(void *arg, cl_int status);
	void *arg;
	uint32_t gen;
	uint32_t next_free;
};

#define NONE UINT32_MAX
/* After a failure the sweep runs at once, then after 1, 2, 4 ... 256 ms:
 * PoCL fails a command's dependants inside clSetUserEventStatus, another
 * driver may take its time. */
#define SWEEP_FIRST_MS 1
#define SWEEP_LAST_MS 256

static struct {
	struct slot *v;
	uint32_t n, free, live;
	struct cmx_io io;
	struct __kernel_timespec ts;
	unsigned ms;
	int armed, sweeping, again;
} cs = {.free = NONE};

static uintptr_t key_of(uint32_t idx, uint32_t gen)
{
	return (uintptr_t)((uint64_t)gen << 32 | idx);
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
 * event keeps the daemon's reference for REST_MS.
 */
#define REST_MS 3000
#define REST_TICK_MS 250

struct rest {
	cl_event ev;
	uint64_t until; /* CLOCK_MONOTONIC ns */
};

static struct {
	struct rest *v;
	size_t n, cap;
	struct cmx_io io;
	struct __kernel_timespec ts;
	int armed;
} rs;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void rest_arm(void);

static void rest_tick(struct cmx_io *io, int res, unsigned flags)
{
	uint64_t now = mono_ns();
	size_t k = 0;

	(void)io;
	(void)res;
	(void)flags;
	rs.armed = 0;
	for (size_t i = 0; i < rs.n; i++) {
		if (rs.v[i].until <= now)
			clReleaseEvent(rs.v[i].ev);
		else
			rs.v[k++] = rs.v[i];
	}
	rs.n = k;
	rest_arm();
}

static void rest_arm(void)
{
	struct io_uring_sqe *sqe;

	if (rs.armed || !rs.n || !(sqe = cmx_loop_sqe(cmx_srv->loop, &rs.io)))
		return;
	rs.armed = 1;
	rs.io.cb = rest_tick;
	rs.ts.tv_sec = 0;
	rs.ts.tv_nsec = REST_TICK_MS * 1000000ll;
	io_uring_prep_timeout(sqe, &rs.ts, 0, 0);
}

/* Loop thread: ev rests (or, with no room to note it, is kept for good:
 * a leak is better than a worker that aborts). */
static void rest_add(void *arg)
{
	cl_event ev = arg;

	if (rs.n == rs.cap) {
		size_t cap = rs.cap ? rs.cap * 2 : 64;
		struct rest *v = realloc(rs.v, cap * sizeof(*v));

		if (!v)
			return;
		rs.v = v;
		rs.cap = cap;
	}
	rs.v[rs.n++] = (struct rest){ev, mono_ns() + REST_MS * 1000000ull};
	rest_arm();
}

void cmx_complete_release(cl_event ev)
{
	cl_int st = CL_COMPLETE;

	if (!ev)
		return;
	if (clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, NULL) ||
	    st >= CL_COMPLETE || !cmx_srv->loop)
		clReleaseEvent(ev);
	else
		cmx_loop_post(cmx_srv->loop, rest_add, ev);
}

unsigned cmx_complete_resting(void)
{
	return (unsigned)rs.n;
}

/* Slot idx is free again (a new generation) and its event released. */
static void slot_free(uint32_t idx)
{
	struct slot *s = &cs.v[idx];
	cl_event ev = s->ev;

	s->ev = NULL;
	s->fn = NULL;
	s->gen++;
	s->next_free = cs.free;
	cs.free = idx;
	cs.live--;
	cmx_complete_release(ev);
}

static void settle(uint32_t idx, cl_int status)
{
	void (*fn)(void *, cl_int) = cs.v[idx].fn;
	void *arg = cs.v[idx].arg;

	slot_free(idx);
	if (status < 0)
		cmx_complete_failed();
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
	uint64_t key = (uint64_t)(uintptr_t)arg;
	uint32_t idx = (uint32_t)key, gen = (uint32_t)(key >> 32);
	cl_int st;

	if (idx >= cs.n || !cs.v[idx].ev || cs.v[idx].gen != gen)
		return; /* settled by a sweep already */
	st = status_of(cs.v[idx].ev);
	settle(idx, st < 0 ? st : cs.v[idx].type);
}

static void CL_CALLBACK on_complete(cl_event e, cl_int status, void *arg)
{
	(void)e;
	(void)status;
	/* A driver thread: the slot is the loop's to read. */
	cmx_loop_post(cmx_srv->loop, called, arg);
}

static int grow(void)
{
	uint32_t n = cs.n ? cs.n * 2 : 64;
	struct slot *v = realloc(cs.v, (size_t)n * sizeof(*v));

	if (!v || n <= cs.n)
		return -1;
	for (uint32_t i = cs.n; i < n; i++)
		v[i] = (struct slot){.next_free = i + 1 < n ? i + 1 : cs.free};
	cs.free = cs.n;
	cs.v = v;
	cs.n = n;
	return 0;
}

int cmx_complete_when(cl_event e, void (*fn)(void *arg, cl_int status), void *arg)
{
	return cmx_complete_at(e, CL_COMPLETE, fn, arg);
}

int cmx_complete_at(cl_event e, cl_int type, void (*fn)(void *arg, cl_int status), void *arg)
{
	struct slot *s;
	uint32_t idx;
	cl_int err;

	if (cs.free == NONE && grow())
		return CL_OUT_OF_HOST_MEMORY;
	idx = cs.free;
	s = &cs.v[idx];
	cs.free = s->next_free;
	clRetainEvent(e);
	s->ev = e;
	s->type = type;
	s->fn = fn;
	s->arg = arg;
	cs.live++;
	err = clSetEventCallback(e, type, on_complete, (void *)key_of(idx, s->gen));
	if (err)
		slot_free(idx);
	return err;
}

/* Ends every registered event that has failed. A failure found on the way
 * (settle() reports it) runs the sweep again rather than inside itself:
 * a long chain of dependants does not recurse. */
static void sweep(void)
{
	if (cs.sweeping) {
		cs.again = 1;
		return;
	}
	cs.sweeping = 1;
	do {
		cs.again = 0;
		for (uint32_t i = 0; i < cs.n; i++) {
			cl_int st;
			if (!cs.v[i].ev)
				continue;
			st = status_of(cs.v[i].ev);
			if (st < 0)
				settle(i, st);
		}
	} while (cs.again);
	cs.sweeping = 0;
}

static void sweep_arm(void);

static void sweep_tick(struct cmx_io *io, int res, unsigned flags)
{
	(void)io;
	(void)res;
	(void)flags;
	cs.armed = 0;
	sweep();
	if (cs.ms < SWEEP_LAST_MS && cs.live) {
		cs.ms *= 2;
		sweep_arm();
	}
}

static void sweep_arm(void)
{
	struct io_uring_sqe *sqe;

	if (cs.armed || !(sqe = cmx_loop_sqe(cmx_srv->loop, &cs.io)))
		return;
	cs.armed = 1;
	cs.io.cb = sweep_tick;
	cs.ts.tv_sec = cs.ms / 1000;
	cs.ts.tv_nsec = (long long)(cs.ms % 1000) * 1000000ll;
	io_uring_prep_timeout(sqe, &cs.ts, 0, 0);
}

void cmx_complete_failed(void)
{
	/* A series in progress starts again. */
	cs.ms = SWEEP_FIRST_MS;
	if (!cs.live)
		return;
	sweep();
	if (cs.live)
		sweep_arm();
}

unsigned cmx_complete_pending(void)
{
	return cs.live;
}
