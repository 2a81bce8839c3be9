// SPDX-License-Identifier: MIT
// Handlers: command queues.
#include "exec.h"

#include <stdlib.h>

#include "defer.h"
#include "scheduler.h"
#include "zero.h"

int cmx_h_CreateQueue(struct cmx_call *c, struct cmx_CreateQueue_in *in)
{
	cl_command_queue_properties flags = 0, prof = c->s->srv->profile ? CL_QUEUE_PROFILING_ENABLE : 0;
	cl_queue_properties props[16];
	cl_command_queue q;
	struct cmx_obj *o;
	size_t n = 0;
	int has_flags = 0;
	cl_int e;

	for (uint64_t i = 0; i + 1 < in->props.n && in->props.v[i] && n + 5 < 16; i += 2) {
		props[n++] = in->props.v[i];
		props[n++] = in->props.v[i + 1];
		if (in->props.v[i] == CL_QUEUE_PROPERTIES) {
			flags = in->props.v[i + 1];
			has_flags = 1;
			props[n - 1] |= prof;
		}
	}
	/* Where tenants share the device every native queue profiles: the
	 * scheduler takes a command's device time from it (host/scheduler.c).
	 * The guest answers profiling queries from the properties it asked
	 * for. */
	if (!has_flags && prof) {
		props[n++] = CL_QUEUE_PROPERTIES;
		props[n++] = prof;
	}
	props[n] = 0;
	if (c->s->srv->platform_version >= 200)
		q = clCreateCommandQueueWithProperties(in->context.h, in->device.h, props, &e);
	else
		q = clCreateCommandQueue(in->context.h, in->device.h, flags | prof, &e);
	if (e)
		return e;
	if (cmx_session_add(c->s, in->queue.id, CMX_K_QUEUE, q, in->context.h, 0, &o)) {
		clReleaseCommandQueue(q);
		return CL_OUT_OF_HOST_MEMORY;
	}
	o->flags = flags;
	/* Ordered after the zero fills of its context (host/zero.c). */
	o->ext = cmx_zero_queue(cmx_session_obj(c->s, in->context.id, CMX_K_CONTEXT));
	if (!o->ext) {
		cmx_session_release(c->s, in->queue.id, CMX_K_QUEUE);
		return CL_OUT_OF_HOST_MEMORY;
	}
	return CL_SUCCESS;
}

int cmx_h_ReleaseQueue(struct cmx_call *c, struct cmx_ReleaseQueue_in *in)
{
	cmx_session_release(c->s, in->queue.id, CMX_K_QUEUE);
	return CL_SUCCESS;
}

static int flush_work(struct cmx_call *c)
{
	cl_int e;

	cmx_exec_drive_lock(c->s->srv);
	e = clFlush(((struct cmx_Flush_in *)c->in)->queue.h);
	cmx_exec_drive_unlock(c->s->srv);
	return e;
}

int cmx_h_Flush(struct cmx_call *c, struct cmx_Flush_in *in)
{
	/* Where the driver runs the queue inside clFlush, off the loop. */
	if (c->s->srv->flush_runs)
		return cmx_defer_work(c, flush_work, NULL);
	return clFlush(in->queue.h);
}

/* A failed command fails its own event; clFinish itself still succeeds, as
 * natively. */
/*
 * A queue whose wait found the driver's state lost (-9999: NVIDIA after a
 * kernel's memory fault): the driver's own clFinish answers for it,
 * CL_INVALID_COMMAND_QUEUE, which the application gets as natively, and the
 * worker retires (cmx_exec_check_lost()). A lost queue answers at once; a
 * command that merely failed never comes here, so the loop never waits in
 * clFinish (nor runs a queue in it, as Oclgrind's would).
 */
static cl_int finish_failed(struct cmx_server *srv, cl_command_queue q)
{
	cl_int e = clFinish(q);

	if (e != CL_SUCCESS)
		cmx_exec_check_lost(srv, e, "clFinish");
	return e;
}

static void finish_done(struct cmx_call *c, int status)
{
	struct cmx_Finish_in *in = c->in;

	if (status != -9999)
		cmx_sched_finished(c->s->srv, in->queue.h);
	cmx_call_done(c, status == -9999 ? finish_failed(c->s->srv, in->queue.h) : CL_SUCCESS);
}

int cmx_h_Finish(struct cmx_call *c, struct cmx_Finish_in *in, struct cmx_Finish_out *out)
{
	struct cmx_obj *q = cmx_session_obj(c->s, in->queue.id, CMX_K_QUEUE);
	cl_int status = CL_QUEUED, e;
	cl_event ev;

	cmx_queue_flush_to_wait(c->s->srv, in->queue.h);
	if (q->last) {
		/* In order: done when the last command is. Often it already is,
		 * and the reply goes out at once. */
		e = clGetEventInfo(q->last, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status,
				   NULL);
		if (e == CL_SUCCESS && status <= CL_COMPLETE)
			return CL_SUCCESS;
		return cmx_defer_wait(c, q->last, finish_done);
	}
	/* Out of order: a marker with an empty wait list completes after all
	 * commands before it. Either way an executor thread waits, not the
	 * loop: a driver may run its queue only while someone waits on it
	 * (Oclgrind never completes a command, nor calls its callback,
	 * otherwise). */
	e = clEnqueueMarkerWithWaitList(in->queue.h, 0, NULL, &ev);
	if (e)
		return e;
	e = cmx_defer_wait(c, ev, finish_done);
	clReleaseEvent(ev);
	return e;
}

int cmx_h_GetQueueInfo(struct cmx_call *c, struct cmx_GetQueueInfo_in *in,
		       struct cmx_GetQueueInfo_out *out)
{
	return CMX_INFO(c, &out->value, clGetCommandQueueInfo, in->queue.h, (cl_uint)in->param);
}
