// SPDX-License-Identifier: MIT
// Shared handler plumbing: binding events, deferring calls to event
// completion or to the executor.
#include "exec.h"

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "complete.h"
#include "executor.h"
#include "log.h"
#include "scheduler.h"
#include "zero.h"

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

static void post_fin(void *arg)
{
	struct cmx_call *c = arg;

	/* A command it waited for failed (cmx_event_bind()). */
	if (c->status < 0)
		c->s->failed = 1;
	if (c->fin)
		c->fin(c, c->status);
	else
		cmx_call_done(c, c->status);
}

void cmx_defer_post(struct cmx_call *c, int status)
{
	c->status = status;
	cmx_loop_post(c->s->srv->loop, post_fin, c);
}

static void event_done(void *arg, cl_int status)
{
	/* After the handler that may be running now, as a driver's callback
	 * would come. */
	cmx_defer_post(arg, status);
}

int cmx_defer_event(struct cmx_call *c, cl_event e, void (*fin)(struct cmx_call *c, int status))
{
	cl_int err;

	c->fin = fin;
	err = cmx_complete_when(c->s->srv, e, event_done, c);
	return err ? err : CMX_DEFER;
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

static int wait_work(struct cmx_call *c)
{
	cl_event e = c->result;
	cl_int status = CL_COMPLETE, we, qe;

	cmx_exec_drive_lock(c->s->srv);
	we = clWaitForEvents(1, &e);
	cmx_exec_drive_unlock(c->s->srv);
	qe = clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, NULL);
	if (we != CL_SUCCESS && (qe != CL_SUCCESS || status > CL_COMPLETE)) {
		/* The wait failed, and the command never ended or its event
		 * cannot even be asked (NVIDIA after a memory fault: -9999
		 * from both): the driver has lost it. */
		cmx_exec_check_lost(c->s->srv, qe != CL_SUCCESS ? qe : we, "clWaitForEvents");
		status = we;
	}
	clReleaseEvent(e);
	c->result = NULL;
	return status;
}

/*
 * How long the loop watches a blocking call's event before it hands the
 * wait to an executor thread: a small transfer or a short kernel on an idle
 * queue is done by then, and its reply leaves with no thread hand-off at all
 * (an executor wake-up and a post back to the loop fewer). The watch ends
 * at once when another connection's I/O waits for the loop; it yields the
 * core on every look, so the driver's own threads are not starved on a
 * small machine. A driver that runs its queue only in a flush or a wait
 * (Oclgrind: struct cmx_server's flush_runs) is not watched: an executor
 * waits at once.
 */
#define WATCH_NS 100000
/* I/O for another connection ends the watch only after this much of it:
 * NVIDIA's completion callbacks for earlier commands post to the loop
 * 15-30 us late, during the next short call's watch, which then went to
 * an executor thread (docs/gpu.md). */
#ifndef CMX_WATCH_MIN_NS
#define CMX_WATCH_MIN_NS 30000
#endif

/* The event's status once it has ended (CL_COMPLETE or its error), or
 * CL_QUEUED if it is still running when the watch ends; counted in
 * srv->watches. */
static cl_int watch(struct cmx_server *srv, cl_event e)
{
	struct cmx_watch_stats *ws = &srv->watches;
	uint64_t start = cmx_now_ns(), now = start;
	cl_int status;

	do {
		if (clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status,
				   NULL) != CL_SUCCESS)
			return CL_QUEUED;
		if (status <= CL_COMPLETE) {
			ws->done++;
			ws->done_ns += cmx_now_ns() - start;
			return status;
		}
		sched_yield();
		now = cmx_now_ns();
	} while ((now - start < CMX_WATCH_MIN_NS || !cmx_loop_io_ready(srv->loop)) &&
		 now - start < WATCH_NS);
	if (now - start < WATCH_NS)
		ws->io++;
	else
		ws->timeout++;
	return CL_QUEUED;
}

void cmx_watch_report(struct cmx_server *srv)
{
	struct cmx_watch_stats *ws = &srv->watches;
	uint64_t n = ws->done + ws->io + ws->timeout;

	if (n)
		cmx_info("watches: %llu; done in the watch %llu (mean %.1f us; medians of the last "
			 "%u: wake-up to wait %.1f us, watch %.1f us, reply %.1f us), ended for I/O "
			 "%llu, after %u us %llu",
			 (unsigned long long)n, (unsigned long long)ws->done,
			 ws->done ? (double)ws->done_ns / (double)ws->done / 1e3 : 0.0,
			 ws->enq.n < CMX_LAT_N ? ws->enq.n : CMX_LAT_N, cmx_lat_median_us(&ws->enq),
			 cmx_lat_median_us(&ws->seen), cmx_lat_median_us(&ws->reply),
			 (unsigned long long)ws->io, WATCH_NS / 1000, (unsigned long long)ws->timeout);
	cmx_loop_report(srv->loop);
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

cl_bool cmx_exec_block_short(struct cmx_call *c, uint64_t size, uint64_t nwait)
{
	struct cmx_obj *q;
	cl_int st = CL_COMPLETE;

	if (!c->s->srv->short_blocking || size > CMX_SHORT_BLOCK_MAX || nwait ||
	    !cmx_sched_alone(c->s->srv, c->s->tenant))
		return CL_FALSE;
	q = cmx_session_obj(c->s, cmx_call_queue(c)->id, CMX_K_QUEUE);
	if (!q || (q->flags & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE))
		return CL_FALSE;
	/* Behind running work (or a command the scheduler holds, or a fill
	 * of fresh memory) the call would wait for that on the loop. */
	if (!cmx_zero_settled(q))
		return CL_FALSE;
	if (q->last && (clGetEventInfo(q->last, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st,
				       NULL) != CL_SUCCESS ||
			st > CL_COMPLETE))
		return CL_FALSE;
	return CL_TRUE;
}

static int defer_wait(struct cmx_call *c, cl_event e, cl_command_queue q,
		      void (*fin)(struct cmx_call *c, int status))
{
	struct cmx_server *srv = c->s->srv;
	struct cmx_watch_stats *ws = &srv->watches;
	cl_int status = CL_QUEUED;
	uint64_t t0 = cmx_now_ns(), t1;

	c->fin = fin; /* the watch's post_fin() finishes with it too */
	/* Every call deferred this way starts with its queue. A driver that
	 * runs its queue only in a flush or a wait gets the executor's. */
	if (!srv->flush_runs) {
		if (q)
			cmx_queue_flush_to_wait(srv, q);
		status = watch(srv, e);
	}
	if (status <= CL_COMPLETE) {
		t1 = cmx_now_ns();
		c->status = status;
		post_fin(c);
		cmx_lat_add(&ws->enq, t0 - cmx_loop_turn_ns(srv->loop));
		cmx_lat_add(&ws->seen, t1 - t0);
		cmx_lat_add(&ws->reply, cmx_now_ns() - t1);
		return CMX_DEFER;
	}
	clRetainEvent(e);
	c->result = e;
	return cmx_defer_work(c, wait_work, fin);
}

int cmx_defer_wait(struct cmx_call *c, cl_event e, void (*fin)(struct cmx_call *c, int status))
{
	return defer_wait(c, e, cmx_call_queue(c)->h, fin);
}

int cmx_defer_wait_event(struct cmx_call *c, cl_event e,
			 void (*fin)(struct cmx_call *c, int status))
{
	return defer_wait(c, e, NULL, fin);
}

static void run_work(void *arg)
{
	struct cmx_call *c = arg;

	c->status = c->work(c);
}

int cmx_defer_work(struct cmx_call *c, int (*work)(struct cmx_call *c),
		   void (*fin)(struct cmx_call *c, int status))
{
	c->work = work;
	c->fin = fin;
	cmx_executor_run(c->s->srv->exec, run_work, post_fin, c);
	return CMX_DEFER;
}
