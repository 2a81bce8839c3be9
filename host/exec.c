// SPDX-License-Identifier: MIT
// Shared handler plumbing: binding events, deferring calls to event
// completion or to the executor.
#include "exec.h"

#include <stdlib.h>
#include <string.h>

#include "executor.h"
#include "log.h"

void cmx_event_bind(struct cmx_call *c, const struct cmx_ref *ev, cl_event e)
{
	struct cmx_obj *q = cmx_session_obj(c->s, ((struct cmx_ref *)c->in)->id, CMX_K_QUEUE);

	if (!e)
		return;
	if (q && !(q->flags & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)) {
		clRetainEvent(e);
		if (q->last)
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

	if (c->fin)
		c->fin(c, c->status);
	else
		cmx_call_done(c, c->status);
}

static void CL_CALLBACK event_cb(cl_event e, cl_int status, void *arg)
{
	struct cmx_call *c = arg;

	c->status = status;
	/* Runs on a driver thread: hand the rest to the loop. */
	cmx_loop_post(cmx_srv->loop, post_fin, c);
}

int cmx_defer_event(struct cmx_call *c, cl_event e, void (*fin)(struct cmx_call *c, int status))
{
	cl_int err;

	c->fin = fin;
	err = clSetEventCallback(e, CL_COMPLETE, event_cb, c);
	return err ? err : CMX_DEFER;
}

static int wait_work(struct cmx_call *c)
{
	cl_event e = c->result;
	cl_int status = CL_COMPLETE;

	clWaitForEvents(1, &e);
	clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, NULL);
	clReleaseEvent(e);
	c->result = NULL;
	return status;
}

int cmx_defer_wait(struct cmx_call *c, cl_event e, void (*fin)(struct cmx_call *c, int status))
{
	clRetainEvent(e);
	c->result = e;
	return cmx_defer_work(c, wait_work, fin);
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
	cmx_executor_run(cmx_srv->exec, run_work, post_fin, c);
	return CMX_DEFER;
}
