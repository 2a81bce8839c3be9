// SPDX-License-Identifier: MIT
// Handlers: kernels, their arguments and launches.
#include "exec.h"
#include "fence.h"
#include "kprintf.h"
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

#include "clcheck.h"

/*
 * What SetKernelArg checks an argument against: its kind, from the
 * driver's argument info (the daemon builds every program with
 * -cl-kernel-arg-info), so that no value reaches the driver as something
 * else. A driver takes the bytes it is given as what the argument is:
 * PoCL 3.1 dereferences 8 bytes given for a buffer or a sampler as a
 * handle (SIGSEGV in the daemon), and hands a buffer given for an image to
 * the kernel as an image.
 */
enum karg_class {
	KA_UNKNOWN, /* no argument info: the driver's checks alone */
	KA_BUFFER,  /* __global or __constant memory (or a pipe) */
	KA_IMAGE,
	KA_LOCAL,
	KA_SAMPLER,
	KA_VALUE, /* by value */
};

struct karg {
	uint8_t cls;
	cl_mem_object_type image; /* KA_IMAGE: the type it takes, 0: any */
	uint64_t size;		  /* KA_VALUE: its type's size, 0: unknown (a struct) */
	uint64_t local;		  /* KA_LOCAL, KA_UNKNOWN: the size set, 0: none */
	uint8_t set;		  /* SetKernelArg has given it (cmx_kernel_args_set()) */
};

/* One device of the kernel's program: how much __local memory the
 * arguments of one work-group may take there. */
struct kdev {
	cl_device_id dev;
	cl_ulong room; /* CL_DEVICE_LOCAL_MEM_SIZE less the kernel's own */
};

struct cmx_kargs {
	cl_ulong local_max; /* the largest local memory among the devices */
	size_t param_max;   /* the largest CL_DEVICE_MAX_PARAMETER_SIZE among them */
	unsigned ndevs;
	struct kdev devs[CMX_MAX_DEVICES];
	cl_uint nargs;
	struct karg a[];
};

static struct karg karg_of(cl_kernel k, cl_uint i, size_t addr_bytes)
{
	cl_kernel_arg_address_qualifier aq = 0;
	cl_kernel_arg_type_qualifier tq = 0;
	struct karg a = {.cls = KA_UNKNOWN};
	char type[256];

	if (clGetKernelArgInfo(k, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof(aq), &aq, NULL))
		return a;
	/* A type name longer than the room is a struct's: size unknown. */
	if (clGetKernelArgInfo(k, i, CL_KERNEL_ARG_TYPE_NAME, sizeof(type), type, NULL))
		type[0] = '\0';
	type[sizeof(type) - 1] = '\0';
	clGetKernelArgInfo(k, i, CL_KERNEL_ARG_TYPE_QUALIFIER, sizeof(tq), &tq, NULL);
	switch (aq) {
	case CL_KERNEL_ARG_ADDRESS_GLOBAL:
	case CL_KERNEL_ARG_ADDRESS_CONSTANT:
		if (!(tq & CL_KERNEL_ARG_TYPE_PIPE) && !strncmp(type, "image", 5)) {
			a.cls = KA_IMAGE;
			a.image = cmx_cl_image_arg_type(type);
		} else {
			a.cls = KA_BUFFER;
		}
		break;
	case CL_KERNEL_ARG_ADDRESS_LOCAL:
		a.cls = KA_LOCAL;
		break;
	case CL_KERNEL_ARG_ADDRESS_PRIVATE:
		if (!strcmp(type, "sampler_t")) {
			a.cls = KA_SAMPLER;
		} else {
			a.cls = KA_VALUE;
			a.size = cmx_cl_type_size(type, addr_bytes);
		}
		break;
	}
	return a;
}

/* The argument checks of a new native kernel k; NULL when out of memory. */
static struct cmx_kargs *kargs_make(cl_kernel k)
{
	cl_device_id devs[CMX_MAX_DEVICES];
	cl_program p = NULL;
	struct cmx_kargs *ka;
	cl_uint nargs = 0, bits = 64;
	size_t n = 0;

	clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof(nargs), &nargs, NULL);
	/* The driver's own count; bounded only by what it compiled. */
	ka = calloc(1, sizeof(*ka) + (size_t)nargs * sizeof(ka->a[0]));
	if (!ka)
		return NULL;
	ka->nargs = nargs;
	if (clGetKernelInfo(k, CL_KERNEL_PROGRAM, sizeof(p), &p, NULL) ||
	    clGetProgramInfo(p, CL_PROGRAM_DEVICES, sizeof(devs), devs, &n))
		n = 0;
	for (size_t i = 0; i < n / sizeof(devs[0]); i++) {
		cl_ulong mem = 0, own = 0;
		size_t params = 0;

		clGetDeviceInfo(devs[i], CL_DEVICE_LOCAL_MEM_SIZE, sizeof(mem), &mem, NULL);
		clGetDeviceInfo(devs[i], CL_DEVICE_MAX_PARAMETER_SIZE, sizeof(params), &params,
				NULL);
		if (params > ka->param_max)
			ka->param_max = params;
		/* Asked before any argument is set: the kernel's own variables. */
		clGetKernelWorkGroupInfo(k, devs[i], CL_KERNEL_LOCAL_MEM_SIZE, sizeof(own), &own,
					 NULL);
		ka->devs[ka->ndevs++] = (struct kdev){devs[i], own < mem ? mem - own : 0};
		if (mem > ka->local_max)
			ka->local_max = mem;
		if (i == 0)
			clGetDeviceInfo(devs[i], CL_DEVICE_ADDRESS_BITS, sizeof(bits), &bits, NULL);
	}
	for (cl_uint i = 0; i < nargs; i++)
		ka->a[i] = karg_of(k, i, bits == 32 ? 4 : 8);
	return ka;
}

static struct cmx_kargs *kargs_copy(const struct cmx_kargs *src)
{
	size_t size = sizeof(*src) + (size_t)src->nargs * sizeof(src->a[0]);
	struct cmx_kargs *ka = malloc(size);

	if (ka)
		memcpy(ka, src, size);
	return ka;
}

static int kernel_add(struct cmx_call *c, uint64_t id, cl_kernel k, struct cmx_kargs *ka,
		      uint64_t flags)
{
	struct cmx_obj *o;

	if (!ka || cmx_session_add(c->s, id, CMX_K_KERNEL, k, NULL, 0, &o)) {
		free(ka);
		clReleaseKernel(k);
		return CL_OUT_OF_HOST_MEMORY;
	}
	o->ext = ka;
	o->flags = flags;
	return CL_SUCCESS;
}

int cmx_h_CreateKernel(struct cmx_call *c, struct cmx_CreateKernel_in *in)
{
	cl_int e;
	cl_kernel k = clCreateKernel(in->program.h, in->name.ptr, &e);
	struct cmx_obj *p = cmx_session_obj(c->s, in->program.id, CMX_K_PROGRAM);

	if (e)
		return e;
	return kernel_add(c, in->kernel.id, k, kargs_make(k), p ? p->flags & CMX_OBJ_PRINTS : 0);
}

int cmx_h_CloneKernel(struct cmx_call *c, struct cmx_CloneKernel_in *in)
{
	struct cmx_obj *src = cmx_session_obj(c->s, in->source.id, CMX_K_KERNEL);
	cl_int e;
	cl_kernel k;

	if (c->s->srv->platform_version < 210)
		return CL_INVALID_OPERATION;
	k = clCloneKernel(in->source.h, &e);
	if (e)
		return e;
	/* The clone has the source's arguments, __local sizes included. */
	return kernel_add(c, in->kernel.id, k,
			  src && src->ext ? kargs_copy(src->ext) : kargs_make(k),
			  cmx_kprintf_kernel(c->s, in->source.id) ? CMX_OBJ_PRINTS : 0);
}

int cmx_h_ReleaseKernel(struct cmx_call *c, struct cmx_ReleaseKernel_in *in)
{
	cmx_session_release(c->s, in->kernel.id, CMX_K_KERNEL);
	return CL_SUCCESS;
}

/*
 * An argument against its kind (struct karg; enum cmx_arg): a value's
 * bytes, a memory object, no value (a __local size, or a NULL buffer), a
 * sampler. The errors are clSetKernelArg's. A handle's size is the
 * daemon's to give (the native handle's), whatever the call said.
 */
static cl_int karg_check(struct cmx_call *c, const struct cmx_kargs *ka,
			 const struct cmx_SetKernelArg_in *in)
{
	const struct karg *a = &ka->a[in->index];
	struct cmx_obj *m;

	switch (a->cls) {
	case KA_BUFFER:
		if (in->kind == CMX_ARG_VALUE || in->kind == CMX_ARG_SAMPLER)
			return CL_INVALID_MEM_OBJECT;
		if (in->kind == CMX_ARG_LOCAL && in->size != sizeof(cl_mem))
			return CL_INVALID_ARG_SIZE;
		m = in->kind == CMX_ARG_MEM && in->mem.id
			? cmx_session_obj(c->s, in->mem.id, CMX_K_MEM)
			: NULL;
		return m && m->ext ? CL_INVALID_MEM_OBJECT : CL_SUCCESS;
	case KA_IMAGE:
		if (in->kind == CMX_ARG_LOCAL || (in->kind == CMX_ARG_MEM && !in->mem.id))
			return CL_INVALID_ARG_VALUE;
		if (in->kind != CMX_ARG_MEM)
			return CL_INVALID_MEM_OBJECT;
		m = cmx_session_obj(c->s, in->mem.id, CMX_K_MEM);
		if (!m || !m->ext || (a->image && cmx_image_type(m) != a->image))
			return CL_INVALID_MEM_OBJECT;
		return CL_SUCCESS;
	case KA_LOCAL:
		if (in->kind != CMX_ARG_LOCAL)
			return CL_INVALID_ARG_VALUE;
		break;
	case KA_SAMPLER:
		return in->kind != CMX_ARG_SAMPLER || !in->sampler.id ? CL_INVALID_SAMPLER
								      : CL_SUCCESS;
	case KA_VALUE:
		/* A handle's bytes would tell the kernel the daemon's
		 * addresses. */
		if (in->kind != CMX_ARG_VALUE)
			return CL_INVALID_ARG_VALUE;
		return a->size && in->size != a->size ? CL_INVALID_ARG_SIZE : CL_SUCCESS;
	default:
		if (in->kind != CMX_ARG_LOCAL)
			return CL_SUCCESS;
	}
	/* A __local size: PoCL 3.1 takes any, and aborts the daemon at launch
	 * on one larger than its memory. */
	if (!in->size || (ka->local_max && in->size > ka->local_max))
		return CL_INVALID_ARG_SIZE;
	return CL_SUCCESS;
}

/*
 * By-value bytes whose size the daemon could not check (a struct, or a
 * kernel without argument info). A driver that knows no struct sizes
 * (PoCL 3.1) takes any size, keeps that many bytes, and the kernel reads
 * the whole struct from them: past a short value, the driver's heap. It
 * is given a copy padded with zeros to at least the device's parameter
 * room (CL_DEVICE_MAX_PARAMETER_SIZE, which bounds a kernel's arguments
 * together), so that it reads only the tenant's bytes or zeros. A driver
 * that knows the size refuses the padded one (CL_INVALID_ARG_SIZE), and
 * checks the tenant's own size itself.
 */
static cl_int value_set_unknown(cl_kernel k, cl_uint idx, const struct cmx_kargs *ka,
				const void *value, size_t size)
{
	size_t room = ka->param_max > size ? ka->param_max : size;
	uint8_t *pad;
	cl_int e;

	if (room == size)
		return clSetKernelArg(k, idx, size, value);
	pad = calloc(1, room);
	if (!pad)
		return CL_OUT_OF_HOST_MEMORY;
	memcpy(pad, value, size);
	e = clSetKernelArg(k, idx, room, pad);
	free(pad);
	if (e == CL_INVALID_ARG_SIZE)
		e = clSetKernelArg(k, idx, size, value);
	return e;
}

int cmx_h_SetKernelArg(struct cmx_call *c, struct cmx_SetKernelArg_in *in)
{
	struct cmx_obj *o = cmx_session_obj(c->s, in->kernel.id, CMX_K_KERNEL);
	struct cmx_kargs *ka = o ? o->ext : NULL;
	cl_uint idx = (cl_uint)in->index;
	cl_mem m = in->mem.h;
	cl_sampler smp = in->sampler.h;
	cl_kernel k = in->kernel.h;
	cl_int e;

	if (!cmx_arg_valid(in->kind))
		return CL_INVALID_VALUE;
	if (in->kind == CMX_ARG_VALUE && in->value.len != in->size)
		return CL_INVALID_ARG_SIZE;
	if (!ka || in->index >= ka->nargs)
		return ka ? CL_INVALID_ARG_INDEX : CL_INVALID_KERNEL;
	e = karg_check(c, ka, in);
	if (e)
		return e;
	/* Held launches keep the arguments they were enqueued with. */
	cmx_sched_kernel_arg(c, in->kernel.id, &k);
	switch (in->kind) {
	case CMX_ARG_VALUE:
		if (ka->a[idx].cls == KA_VALUE && ka->a[idx].size)
			e = clSetKernelArg(k, idx, in->size, in->value.ptr);
		else
			e = value_set_unknown(k, idx, ka, in->value.ptr, in->size);
		break;
	case CMX_ARG_MEM:
		e = clSetKernelArg(k, idx, sizeof(m), &m);
		break;
	case CMX_ARG_LOCAL:
		e = clSetKernelArg(k, idx, in->size, NULL);
		break;
	case CMX_ARG_SAMPLER:
	default:
		e = clSetKernelArg(k, idx, sizeof(smp), &smp);
	}
	if (e == CL_SUCCESS && (ka->a[idx].cls == KA_LOCAL || ka->a[idx].cls == KA_UNKNOWN))
		ka->a[idx].local = in->kind == CMX_ARG_LOCAL ? in->size : 0;
	if (e == CL_SUCCESS)
		ka->a[idx].set = 1;
	return e;
}

/* The __local memory a launch's work-group takes, the kernel's own and its
 * arguments', against its device's: CL_OUT_OF_RESOURCES, as drivers refuse
 * a launch that cannot fit (PoCL 3.1 aborts in it). Each size is at most
 * the memory (karg_check()); the sum saturates. */
static cl_int local_fits(struct cmx_call *c, uint64_t kernel, cl_command_queue q)
{
	struct cmx_obj *o = cmx_session_obj(c->s, kernel, CMX_K_KERNEL);
	const struct cmx_kargs *ka = o ? o->ext : NULL;
	cl_device_id d = NULL;
	uint64_t sum = 0;

	if (!ka)
		return CL_SUCCESS;
	for (cl_uint i = 0; i < ka->nargs; i++)
		if (__builtin_add_overflow(sum, ka->a[i].local, &sum))
			return CL_OUT_OF_RESOURCES;
	if (!sum)
		return CL_SUCCESS;
	if (ka->ndevs > 1)
		clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof(d), &d, NULL);
	for (unsigned i = 0; i < ka->ndevs; i++)
		if (ka->ndevs == 1 || ka->devs[i].dev == d)
			return sum > ka->devs[i].room ? CL_OUT_OF_RESOURCES : CL_SUCCESS;
	return CL_SUCCESS;
}

cl_int cmx_kernel_local_fits(struct cmx_call *c, uint64_t kernel, cl_command_queue q)
{
	return local_fits(c, kernel, q);
}

cl_int cmx_kernel_args_set(struct cmx_call *c, uint64_t kernel)
{
	struct cmx_obj *o = cmx_session_obj(c->s, kernel, CMX_K_KERNEL);
	const struct cmx_kargs *ka = o ? o->ext : NULL;

	for (cl_uint i = 0; ka && i < ka->nargs; i++)
		if (!ka->a[i].set)
			return CL_INVALID_KERNEL_ARGS;
	return ka ? CL_SUCCESS : CL_INVALID_KERNEL;
}

void cmx_kernel_clone_locals(struct cmx_call *c, uint64_t kernel, cl_kernel clone)
{
	struct cmx_obj *o = cmx_session_obj(c->s, kernel, CMX_K_KERNEL);
	const struct cmx_kargs *ka = o ? o->ext : NULL;

	for (cl_uint i = 0; ka && i < ka->nargs; i++)
		if (ka->a[i].local)
			clSetKernelArg(clone, i, ka->a[i].local, NULL);
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
	if (c->s->srv->platform_version < 210)
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
	uint64_t arrived = cmx_now_ns();
	cl_event ev = NULL;
	cl_int e;

	if (l.dim < 1 || l.dim > 3 || (in->offset.n && in->offset.n != l.dim) ||
	    (in->local.n && in->local.n != l.dim))
		return CL_INVALID_WORK_DIMENSION;
	e = local_fits(c, in->kernel.id, in->queue.h);
	if (e)
		return e;
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
	/* A held launch gets no fence: it waits for a turn that may be a
	 * round away, and a loop and guest looking for it that long would
	 * take the cores the turn's holder refills the device with. Its
	 * guest asks the daemon. */
	if (sc.hold)
		return launch_hold(c, &sc, &l, &in->event);
	e = launch_enqueue(&l.op, CMX_SCHED_WAIT(sc), &ev);
	cmx_sched_end(&sc, e, ev);
	if (!e) {
		cmx_event_bind(c, &in->event, ev);
		/* What a client keeps in flight and waits for. */
		cmx_fence_track(c->s, in->event.id);
		cmx_fence_launch(c->s->srv, arrived);
	}
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
