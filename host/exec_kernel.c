// SPDX-License-Identifier: MIT
// Handlers: kernels, their arguments and launches.
#include "exec.h"
#include "kprintf.h"
#include "scheduler.h"

#include <stdlib.h>

int cmx_h_CreateKernel(struct cmx_call *c, struct cmx_CreateKernel_in *in)
{
	cl_int e;
	cl_kernel k = clCreateKernel(in->program.h, in->name.ptr, &e);
	struct cmx_obj *o, *p = cmx_session_obj(c->s, in->program.id, CMX_K_PROGRAM);

	if (e)
		return e;
	if (cmx_session_add(c->s, in->kernel.id, CMX_K_KERNEL, k, NULL, 0, &o)) {
		clReleaseKernel(k);
		return CL_OUT_OF_HOST_MEMORY;
	}
	o->flags = p ? p->flags & CMX_OBJ_PRINTS : 0;
	return CL_SUCCESS;
}

int cmx_h_CloneKernel(struct cmx_call *c, struct cmx_CloneKernel_in *in)
{
	struct cmx_obj *o;
	cl_int e;
	cl_kernel k;

	if (cmx_srv->platform_version < 210)
		return CL_INVALID_OPERATION;
	k = clCloneKernel(in->source.h, &e);
	if (e)
		return e;
	if (cmx_session_add(c->s, in->kernel.id, CMX_K_KERNEL, k, NULL, 0, &o)) {
		clReleaseKernel(k);
		return CL_OUT_OF_HOST_MEMORY;
	}
	o->flags = cmx_kprintf_kernel(c->s, in->source.id) ? CMX_OBJ_PRINTS : 0;
	return CL_SUCCESS;
}

int cmx_h_ReleaseKernel(struct cmx_call *c, struct cmx_ReleaseKernel_in *in)
{
	cmx_session_release(c->s, in->kernel.id, CMX_K_KERNEL);
	return CL_SUCCESS;
}

int cmx_h_SetKernelArg(struct cmx_call *c, struct cmx_SetKernelArg_in *in)
{
	cl_uint idx = (cl_uint)in->index;
	cl_mem m = in->mem.h;
	cl_sampler smp = in->sampler.h;
	cl_kernel k = in->kernel.h;

	if (in->kind > 3 || (in->kind == 0 && in->value.len != in->size))
		return in->kind > 3 ? CL_INVALID_VALUE : CL_INVALID_ARG_SIZE;
	/* Held launches keep the arguments they were enqueued with. */
	cmx_sched_kernel_arg(c, in->kernel.id, &k);
	switch (in->kind) {
	case 0:
		return clSetKernelArg(k, idx, in->size, in->value.ptr);
	case 1:
		return clSetKernelArg(k, idx, sizeof(m), &m);
	case 2:
		return clSetKernelArg(k, idx, in->size, NULL);
	}
	return clSetKernelArg(k, idx, sizeof(smp), &smp);
}

int cmx_h_GetKernelWorkGroupInfo(struct cmx_call *c, struct cmx_GetKernelWorkGroupInfo_in *in,
				 struct cmx_GetKernelWorkGroupInfo_out *out)
{
	return CMX_INFO(c, &out->value, clGetKernelWorkGroupInfo, in->kernel.h, in->device.h,
			(cl_uint)in->param);
}

int cmx_h_GetKernelSubGroupInfo(struct cmx_call *c, struct cmx_GetKernelSubGroupInfo_in *in,
				struct cmx_GetKernelSubGroupInfo_out *out)
{
	if (cmx_srv->platform_version < 210)
		return CL_INVALID_OPERATION;
	return CMX_INFO(c, &out->value, clGetKernelSubGroupInfo, in->kernel.h, in->device.h,
			(cl_uint)in->param, in->input.len, in->input.ptr);
}

/* A launch as the scheduler holds it (struct cmx_sched_op): the kernel
 * retained as it was, arguments included, when the guest enqueued it. */
struct launch {
	struct cmx_sched_op op;
	cl_command_queue queue;
	cl_uint dim;
	int has_off, has_local;
	size_t off[3], global[3], local[3];
};

static cl_int launch_enqueue(struct cmx_sched_op *op, cl_uint nwait, const cl_event *wait,
			     cl_event *ev)
{
	struct launch *l = (struct launch *)op;

	return clEnqueueNDRangeKernel(l->queue, op->kernel, l->dim, l->has_off ? l->off : NULL,
				      l->global, l->has_local ? l->local : NULL, nwait, wait, ev);
}

static void launch_destroy(struct cmx_sched_op *op)
{
	struct launch *l = (struct launch *)op;

	clReleaseKernel(op->kernel);
	clReleaseCommandQueue(l->queue);
	free(l);
}

static int launch_hold(struct cmx_call *c, struct cmx_sched_cmd *sc, const struct launch *l,
		       const struct cmx_ref *ev)
{
	struct launch *held = malloc(sizeof(*held));

	if (!held)
		return CL_OUT_OF_HOST_MEMORY;
	*held = *l;
	held->op.destroy = launch_destroy;
	clRetainKernel(l->op.kernel);
	clRetainCommandQueue(l->queue);
	return cmx_sched_hold(sc, c, ev, &held->op);
}

/* prints: the kernel may call printf; its output goes to the guest as
 * KernelOutput(tag) (host/kprintf.c), and it takes the printing kernels'
 * turn instead of the scheduler's. */
static int enqueue_kernel(struct cmx_call *c, struct cmx_EnqueueKernel_in *in, int prints,
			  uint64_t tag)
{
	struct launch l = {
		.op = { .enqueue = launch_enqueue, .kernel = in->kernel.h },
		.queue = in->queue.h,
		.dim = (cl_uint)in->global.n,
		.has_off = in->offset.n != 0,
		.has_local = in->local.n != 0,
	};
	struct cmx_sched_cmd sc;
	cl_event ev = NULL;
	cl_int e;

	if (l.dim < 1 || l.dim > 3 || (in->offset.n && in->offset.n != l.dim) ||
	    (in->local.n && in->local.n != l.dim))
		return CL_INVALID_WORK_DIMENSION;
	for (cl_uint i = 0; i < l.dim; i++) {
		l.global[i] = in->global.v[i];
		l.off[i] = l.has_off ? in->offset.v[i] : 0;
		l.local[i] = l.has_local ? in->local.v[i] : 0;
	}
	if (prints) {
		/* Its own turn (host/kprintf.c), after what the scheduler
		 * holds of its queue: those go to the device first. */
		cmx_sched_release_queue(c);
		return cmx_kprintf_enqueue(c, in, l.dim, l.off, l.global, l.local, tag);
	}
	/* The tenant's turn on the device (host/scheduler.c): now, or held
	 * in the daemon until the scheduler enqueues it. */
	e = cmx_sched_begin(c, (cl_uint)in->wait.n, in->wait.h, &sc);
	if (e)
		return e;
	if (sc.hold)
		return launch_hold(c, &sc, &l, &in->event);
	e = launch_enqueue(&l.op, CMX_SCHED_WAIT(sc), &ev);
	cmx_sched_end(&sc, e, ev);
	if (!e)
		cmx_event_bind(c, &in->event, ev);
	return e;
}

int cmx_h_EnqueueKernel(struct cmx_call *c, struct cmx_EnqueueKernel_in *in)
{
	return enqueue_kernel(c, in, cmx_kprintf_kernel(c->s, in->kernel.id), 0);
}

int cmx_h_EnqueueKernelPrintf(struct cmx_call *c, struct cmx_EnqueueKernelPrintf_in *in)
{
	/* The same fields, the queue first (cmx_event_bind() reads c->in). */
	struct cmx_EnqueueKernel_in k = {
	    .queue = in->queue,
	    .kernel = in->kernel,
	    .offset = in->offset,
	    .global = in->global,
	    .local = in->local,
	    .wait = in->wait,
	    .event = in->event,
	};

	return enqueue_kernel(c, &k, 1, in->tag);
}
