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

	switch (in->kind) {
	case 0:
		if (in->value.len != in->size)
			return CL_INVALID_ARG_SIZE;
		return clSetKernelArg(in->kernel.h, idx, in->size, in->value.ptr);
	case 1:
		return clSetKernelArg(in->kernel.h, idx, sizeof(m), &m);
	case 2:
		return clSetKernelArg(in->kernel.h, idx, in->size, NULL);
	case 3:
		return clSetKernelArg(in->kernel.h, idx, sizeof(smp), &smp);
	}
	return CL_INVALID_VALUE;
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

/* prints: the kernel may call printf; its output goes to the guest as
 * KernelOutput(tag) (host/kprintf.c), and it takes the printing kernels'
 * turn instead of the scheduler's. */
static int enqueue_kernel(struct cmx_call *c, struct cmx_EnqueueKernel_in *in, int prints,
			  uint64_t tag)
{
	size_t off[3], gl[3], lo[3];
	cl_uint dim = (cl_uint)in->global.n;
	struct cmx_sched_cmd sc;
	cl_event ev = NULL;
	cl_int e;

	if (dim < 1 || dim > 3 || (in->offset.n && in->offset.n != dim) ||
	    (in->local.n && in->local.n != dim))
		return CL_INVALID_WORK_DIMENSION;
	for (cl_uint i = 0; i < dim; i++) {
		gl[i] = in->global.v[i];
		off[i] = in->offset.n ? in->offset.v[i] : 0;
		lo[i] = in->local.n ? in->local.v[i] : 0;
	}
	if (prints)
		return cmx_kprintf_enqueue(c, in, dim, off, gl, lo, tag);
	/* The tenant's turn on the device (host/scheduler.c). */
	e = cmx_sched_begin(c, (cl_uint)in->wait.n, in->wait.h, &sc);
	if (e)
		return e;
	e = clEnqueueNDRangeKernel(in->queue.h, in->kernel.h, dim, in->offset.n ? off : NULL, gl,
				   in->local.n ? lo : NULL, CMX_SCHED_WAIT(sc), &ev);
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
