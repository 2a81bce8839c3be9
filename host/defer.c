// SPDX-License-Identifier: MIT
// Deferred calls: a handler's call that ends when its command's event
// completes, watched on the loop or waited for on an executor thread, or
// when work on an executor thread is done; cmx_call_done() ends it on the
// loop. Above exec.c's event binding and queue flushes, which the
// scheduler, the zero fills and landing use without deferring anything.
#include "defer.h"
#include "exec.h"

#include <sched.h>
#include <stdlib.h>

#include "call.h"
#include "complete.h"
#include "executor.h"
#include "fence.h"
#include "log.h"
#include "scheduler.h"
#include "server.h"
#include "session.h"
#include "zero.h"

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
#define WATCH_NS(srv) ((uint64_t)(srv)->tune.watch_us * 1000) /* watch-us: 100 */
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
		 now - start < WATCH_NS(srv));
	if (now - start < WATCH_NS(srv))
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
			 (unsigned long long)ws->io, (unsigned)(WATCH_NS(srv) / 1000), (unsigned long long)ws->timeout);
	cmx_fence_report(srv);
	cmx_loop_report(srv->loop);
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
