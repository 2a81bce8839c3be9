// SPDX-License-Identifier: MIT
// Shared handler plumbing below the calls' ends: binding events, flushing
// queues, the status poll, the drive lock. Deferring calls is host/defer.c.
#include "exec.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "complete.h"
#include "log.h"

void cmx_event_bind(struct cmx_call *c, const struct cmx_ref *ev, cl_event e)
{
	struct cmx_obj *q = cmx_session_obj(c->s, cmx_call_queue(c)->id, CMX_K_QUEUE);

	if (!e)
		return;
	if (q && !(q->flags & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)) {
		clRetainEvent(e);
		/* Until the session has seen a command fail, none of its
		 * events has failed: no status query, no rest
		 * (host/complete.c). */
		if (c->s->failed)
			cmx_complete_release(c->s->srv, c->s->tenant, q->last);
		else if (q->last)
			clReleaseEvent(q->last);
		q->last = e;
	}
	if (!ev->id || c->s->closed ||
	    cmx_session_add(c->s, ev->id, CMX_K_EVENT, e, q ? q->ctx : NULL, 0, NULL))
		clReleaseEvent(e);
}

#define POLL_MIN_NS 1000000ull
#define POLL_MAX_NS 16000000ull
static void poll_done(struct cmx_io *io, int res, unsigned flags);

static void poll_arm(struct cmx_server *srv, uint64_t ns)
{
	struct cmx_exec_poll *poll = &srv->poll;
	struct io_uring_sqe *sqe;
	int any = 0;

	for (int i = 0; i < CMX_POLL_FNS; i++)
		any |= poll->fn[i] != NULL;
	if (poll->armed || !any || !(sqe = cmx_loop_sqe(srv->loop, &poll->io)))
		return;
	poll->armed = 1;
	poll->ns = ns;
	poll->io.cb = poll_done;
	poll->ts.tv_sec = (long long)(ns / 1000000000ull);
	poll->ts.tv_nsec = (long long)(ns % 1000000000ull);
	io_uring_prep_timeout(sqe, &poll->ts, 0, 0);
}

static void poll_done(struct cmx_io *io, int res, unsigned flags)
{
	/* The server's own poll: its io is the one armed. */
	struct cmx_server *srv = (struct cmx_server *)((char *)io - offsetof(struct cmx_server, poll.io));
	struct cmx_exec_poll *poll = &srv->poll;
	uint64_t next = poll->ns < POLL_MAX_NS ? poll->ns * 2 : POLL_MAX_NS;

	/* Still armed while the pollers run: a start from inside arms
	 * nothing. */
	for (int i = 0; i < CMX_POLL_FNS; i++) {
		int r = poll->fn[i] ? poll->fn[i](srv) : -1;

		if (r < 0)
			poll->fn[i] = NULL;
		else if (r > 0)
			next = POLL_MIN_NS;
	}
	poll->armed = 0;
	poll_arm(srv, next);
}

void cmx_exec_poll_start(struct cmx_server *srv, int (*fn)(struct cmx_server *srv))
{
	struct cmx_exec_poll *poll = &srv->poll;
	int free_slot = -1;

	if (!srv->flush_runs)
		return;
	for (int i = 0; i < CMX_POLL_FNS; i++) {
		if (poll->fn[i] == fn)
			goto arm;
		if (!poll->fn[i] && free_slot < 0)
			free_slot = i;
	}
	if (free_slot < 0)
		return;
	poll->fn[free_slot] = fn;
arm:
	poll_arm(srv, POLL_MIN_NS);
}

void cmx_exec_init(struct cmx_server *srv)
{
	pthread_mutex_init(&srv->drive_lock, NULL);
	cmx_complete_init(srv);
}

void cmx_exec_drive_lock(struct cmx_server *srv)
{
	if (srv->flush_runs)
		pthread_mutex_lock(&srv->drive_lock);
}

void cmx_exec_drive_unlock(struct cmx_server *srv)
{
	if (srv->flush_runs)
		pthread_mutex_unlock(&srv->drive_lock);
}

void cmx_exec_check_lost(struct cmx_server *srv, cl_int err, const char *what)
{
	char why[96];

	/* NVIDIA after a kernel's memory fault: waits fail with
	 * CL_INVALID_COMMAND_QUEUE or CL_OUT_OF_RESOURCES while the command
	 * never completes, and every later context fails with -9999. The
	 * process's driver state is gone for good (shared/FIELD.md). */
	if (err != CL_INVALID_COMMAND_QUEUE && err != CL_OUT_OF_RESOURCES && err != -9999)
		return;
	snprintf(why, sizeof(why), "%s: %d", what, err);
	if (srv->report)
		srv->report->poisoned(why);
}

void cmx_queue_flush(const struct cmx_server *srv, cl_command_queue q)
{
	if (!srv->flush_runs)
		clFlush(q);
}

void cmx_queue_flush_to_wait(const struct cmx_server *srv, cl_command_queue q)
{
	if (!srv->submits_at_enqueue)
		cmx_queue_flush(srv, q);
}
