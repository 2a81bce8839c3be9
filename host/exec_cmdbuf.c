// SPDX-License-Identifier: MIT
// Handlers: command buffers (cl_khr_command_buffer), recorded and replayed in the daemon.
#include "exec.h"
#include "kprintf.h"
#include "log.h"
#include "scheduler.h"
#include "tenant.h"

#include <stdlib.h>
#include <string.h>

#include "clcheck.h"

/*
 * The entry points come from the driver (clGetExtensionFunctionAddressForPlatform)
 * and are called with the signatures of the cl_ext.h clmux is built with
 * (opencl-headers 3.0~2023.02.06: cl_khr_command_buffer 0.9.x, each
 * clCommand*KHR with a mutable_handle, only the NDRange with properties).
 * Revision 0.9.5 gave every clCommand*KHR a properties parameter: a driver
 * of that revision would read the arguments shifted, so only a device that
 * reports 0.9.0 to 0.9.4 has its command buffers forwarded.
 */
#define CMDBUF_VERSION_MIN CL_MAKE_VERSION(0, 9, 0)
#define CMDBUF_VERSION_MAX CL_MAKE_VERSION(0, 9, 4)

static struct {
	int state; /* 0: not looked up yet; 1: found; -1: missing */
	clCreateCommandBufferKHR_fn create;
	clRetainCommandBufferKHR_fn retain;
	clReleaseCommandBufferKHR_fn release;
	clFinalizeCommandBufferKHR_fn finalize;
	clEnqueueCommandBufferKHR_fn enqueue;
	clGetCommandBufferInfoKHR_fn info;
	clCommandBarrierWithWaitListKHR_fn barrier;
	clCommandCopyBufferKHR_fn copy;
	clCommandCopyBufferRectKHR_fn copy_rect;
	clCommandFillBufferKHR_fn fill;
	clCommandNDRangeKernelKHR_fn kernel;
	/* The image commands: a driver without them records none. */
	clCommandCopyImageKHR_fn copy_image;
	clCommandCopyImageToBufferKHR_fn copy_image_buffer;
	clCommandCopyBufferToImageKHR_fn copy_buffer_image;
	clCommandFillImageKHR_fn fill_image;
} fn;

static int fn_load(const struct cmx_server *srv)
{
	cl_platform_id p = srv->platform;

	if (fn.state)
		return fn.state > 0;
#define LOOK(field, name) (fn.field = (name##_fn)clGetExtensionFunctionAddressForPlatform(p, #name))
	LOOK(create, clCreateCommandBufferKHR);
	LOOK(retain, clRetainCommandBufferKHR);
	LOOK(release, clReleaseCommandBufferKHR);
	LOOK(finalize, clFinalizeCommandBufferKHR);
	LOOK(enqueue, clEnqueueCommandBufferKHR);
	LOOK(info, clGetCommandBufferInfoKHR);
	LOOK(barrier, clCommandBarrierWithWaitListKHR);
	LOOK(copy, clCommandCopyBufferKHR);
	LOOK(copy_rect, clCommandCopyBufferRectKHR);
	LOOK(fill, clCommandFillBufferKHR);
	LOOK(kernel, clCommandNDRangeKernelKHR);
	LOOK(copy_image, clCommandCopyImageKHR);
	LOOK(copy_image_buffer, clCommandCopyImageToBufferKHR);
	LOOK(copy_buffer_image, clCommandCopyBufferToImageKHR);
	LOOK(fill_image, clCommandFillImageKHR);
#undef LOOK
	fn.state = fn.create && fn.retain && fn.release && fn.finalize && fn.enqueue && fn.info && fn.barrier &&
			   fn.copy && fn.copy_rect && fn.fill && fn.kernel
		       ? 1
		       : -1;
	return fn.state > 0;
}

int cmx_cmdbuf_supported(const struct cmx_server *srv, cl_device_id d)
{
	cl_name_version *v = NULL;
	size_t size = 0;
	int ok = 0;

	if (srv->platform_version < 300 ||
	    clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS_WITH_VERSION, 0, NULL, &size) || !size ||
	    size > 65536 || !(v = malloc(size)) ||
	    clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS_WITH_VERSION, size, v, NULL)) {
		free(v);
		return 0;
	}
	for (size_t i = 0; i < size / sizeof(*v); i++)
		if (!strncmp(v[i].name, "cl_khr_command_buffer", sizeof(v[i].name)))
			ok = v[i].version >= CMDBUF_VERSION_MIN && v[i].version <= CMDBUF_VERSION_MAX;
	free(v);
	return ok && fn_load(srv);
}


/*
 * A buffer as the daemon records it (the object's ext): the native sync
 * point of each command the guest numbered, so that a wait list the guest
 * sends reaches the driver only as points the driver gave. Every recorded
 * command counts as one of the tenant's objects until the buffer goes
 * (cmx_cmdbuf_commands()).
 */
/* Replays the scheduler holds (not yet enqueued natively): the buffer is
 * pending for the guest meanwhile, which the driver cannot tell. Shared
 * by the buffer and its held replays, freed with the last. */
struct holds {
	uint32_t held, refs;
};

static void holds_put(struct holds *h)
{
	if (h && !--h->refs)
		free(h);
}

struct cmdbuf {
	cl_command_queue queue; /* the native queue it records for */
	struct holds *holds;
	cl_kernel *clones;	/* the kernels its launches run (kernel_capture()) */
	uint32_t nclones, clones_cap;
	int32_t failed;		/* the first recording error: Finalize's answer */
	int finalized;
	uint32_t n, cap;	/* commands recorded; room in sp */
	cl_sync_point_khr sp[]; /* sp[i]: command i + 1's native point */
};

/* Commands in one buffer: sync point numbers stay within a cl_uint, and
 * a record of many small commands cannot take the daemon's memory. */
#define CMDBUF_MAX_COMMANDS 65536u

void cmx_cmdbuf_release(struct cmx_obj *o)
{
	struct cmdbuf *b = o->ext;

	if (o->h && fn.release)
		fn.release(o->h);
	/* After the buffer: its replays still pending keep what they use. */
	for (uint32_t i = 0; b && i < b->nclones; i++)
		clReleaseKernel(b->clones[i]);
	if (b) {
		free(b->clones);
		holds_put(b->holds);
	}
	free(b);
	o->ext = NULL;
}

uint64_t cmx_cmdbuf_commands(const struct cmx_obj *o)
{
	const struct cmdbuf *b = o->ext;

	return o->kind == CMX_K_CMDBUF && b ? b->n : 0;
}

int cmx_h_CreateCommandBuffer(struct cmx_call *c, struct cmx_CreateCommandBuffer_in *in)
{
	cl_command_buffer_properties_khr props[3] = {0};
	struct cmx_obj *q = cmx_session_obj(c->s, in->queue.id, CMX_K_QUEUE), *o;
	cl_device_id d = NULL;
	struct cmdbuf *b;
	cl_command_buffer_khr h;
	cl_command_queue nq = in->queue.h;
	cl_int e;

	if (clGetCommandQueueInfo(nq, CL_QUEUE_DEVICE, sizeof(d), &d, NULL) ||
	    !cmx_cmdbuf_supported(c->s->srv, d))
		return CL_INVALID_OPERATION;
	/* The one property there is, whose value the driver checks. */
	if (in->props.n) {
		if (in->props.v[in->props.n - 1] != 0 ||
		    (in->props.n != 1 &&
		     (in->props.n != 3 || in->props.v[0] != CL_COMMAND_BUFFER_FLAGS_KHR)))
			return CL_INVALID_VALUE;
		for (uint64_t i = 0; i < in->props.n; i++)
			props[i] = in->props.v[i];
	}
	b = calloc(1, sizeof(*b) + 16 * sizeof(b->sp[0]));
	if (!b)
		return CL_OUT_OF_HOST_MEMORY;
	h = fn.create(1, &nq, in->props.n ? props : NULL, &e);
	if (e) {
		free(b);
		return e;
	}
	if (cmx_session_add(c->s, in->cmdbuf.id, CMX_K_CMDBUF, h, q ? q->ctx : NULL, 0, &o)) {
		fn.release(h);
		free(b);
		return CL_OUT_OF_HOST_MEMORY;
	}
	b->queue = nq;
	b->cap = 16;
	b->holds = calloc(1, sizeof(*b->holds));
	if (b->holds)
		b->holds->refs = 1;
	o->ext = b;
	return CL_SUCCESS;
}

int cmx_h_ReleaseCommandBuffer(struct cmx_call *c, struct cmx_ReleaseCommandBuffer_in *in)
{
	cmx_session_release(c->s, in->cmdbuf.id, CMX_K_CMDBUF);
	return CL_SUCCESS;
}

int cmx_h_FinalizeCommandBuffer(struct cmx_call *c, struct cmx_FinalizeCommandBuffer_in *in,
				struct cmx_FinalizeCommandBuffer_out *out)
{
	struct cmx_obj *o = cmx_session_obj(c->s, in->cmdbuf.id, CMX_K_CMDBUF);
	struct cmdbuf *b = o ? o->ext : NULL;
	cl_int e;

	if (!b)
		return CL_INVALID_COMMAND_BUFFER_KHR;
	if (b->failed)
		return b->failed;
	e = fn.finalize(in->cmdbuf.h);
	if (!e)
		b->finalized = 1;
	return e;
}

int cmx_h_GetCommandBufferInfo(struct cmx_call *c, struct cmx_GetCommandBufferInfo_in *in,
			       struct cmx_GetCommandBufferInfo_out *out)
{
	struct cmx_obj *o = cmx_session_obj(c->s, in->cmdbuf.id, CMX_K_CMDBUF);
	struct cmdbuf *b = o ? o->ext : NULL;
	cl_int e = CMX_INFO(c, &out->value, fn.info, in->cmdbuf.h, (cl_uint)in->param);
	cl_command_buffer_state_khr st = CL_COMMAND_BUFFER_STATE_PENDING_KHR;

	if (!e && in->param == CL_COMMAND_BUFFER_STATE_KHR && b && b->holds && b->holds->held &&
	    out->value.len == sizeof(st))
		memcpy(c->scratch, &st, sizeof(st));
	return e;
}

/*
 * The start of every record: the buffer still records, and the command is
 * its next (`point`, numbered from 1); its wait list names earlier
 * commands of the buffer, as the driver's points (into *wait, the call's
 * scratch). A buffer whose recording failed records nothing more: its
 * Finalize answers the first error.
 */
static cl_int record_begin(struct cmx_call *c, uint64_t id, uint64_t point,
			   const struct cmx_u64s *points, struct cmdbuf **out,
			   cl_sync_point_khr **wait)
{
	struct cmx_obj *o = cmx_session_obj(c->s, id, CMX_K_CMDBUF);
	struct cmdbuf *b = o ? o->ext : NULL;
	cl_int e;

	*wait = NULL;
	if (!b)
		return CL_INVALID_COMMAND_BUFFER_KHR;
	if (b->finalized)
		return CL_INVALID_OPERATION;
	/* From here on a failure is the buffer's (record_end()). */
	*out = b;
	if (point != (uint64_t)b->n + 1)
		return CL_INVALID_VALUE;
	if (b->n >= CMDBUF_MAX_COMMANDS)
		return CL_OUT_OF_RESOURCES;
	e = cmx_tenant_may_create(c->s->tenant);
	if (e)
		return e;
	if (b->n == b->cap) {
		uint32_t cap = b->cap * 2;
		struct cmdbuf *nb = realloc(b, sizeof(*b) + (size_t)cap * sizeof(b->sp[0]));
		if (!nb)
			return CL_OUT_OF_HOST_MEMORY;
		nb->cap = cap;
		o->ext = *out = b = nb;
	}
	/* The point is the guest's from here on, whatever the driver says:
	 * later commands are numbered past it. */
	b->sp[b->n++] = 0;
	c->s->tenant->objects++;
	if (b->failed)
		return b->failed;
	if (points->n) {
		*wait = c->scratch = malloc(points->n * sizeof(**wait));
		if (!*wait)
			return CL_OUT_OF_HOST_MEMORY;
		for (uint64_t i = 0; i < points->n; i++) {
			/* An earlier command of this buffer (all of them
			 * recorded: the buffer has not failed). */
			uint64_t p = points->v[i];
			if (!p || p >= b->n)
				return CL_INVALID_SYNC_POINT_WAIT_LIST_KHR;
			(*wait)[i] = b->sp[p - 1];
		}
	}
	return CL_SUCCESS;
}

/* The driver's answer to a record: its point kept, or the failure kept
 * for Finalize. */
static cl_int record_end(struct cmdbuf *b, cl_int e, cl_sync_point_khr sp)
{
	if (!b)
		return e;
	if (e) {
		if (!b->failed)
			b->failed = e;
		return e;
	}
	b->sp[b->n - 1] = sp;
	return CL_SUCCESS;
}

int cmx_h_CommandBarrier(struct cmx_call *c, struct cmx_CommandBarrier_in *in)
{
	struct cmdbuf *b = NULL;
	cl_sync_point_khr *w, sp = 0;
	cl_int e = record_begin(c, in->cmdbuf.id, in->point, &in->points, &b, &w);

	if (!e)
		e = fn.barrier(in->cmdbuf.h, NULL, (cl_uint)in->points.n, w, &sp, NULL);
	return record_end(b, e, sp);
}

int cmx_h_CommandCopyBuffer(struct cmx_call *c, struct cmx_CommandCopyBuffer_in *in)
{
	struct cmdbuf *b = NULL;
	cl_sync_point_khr *w, sp = 0;
	cl_int e = record_begin(c, in->cmdbuf.id, in->point, &in->points, &b, &w);

	if (!e)
		e = cmx_buffer_range(c, in->src.id, in->src_offset, in->size);
	if (!e)
		e = cmx_buffer_range(c, in->dst.id, in->dst_offset, in->size);
	if (!e)
		e = fn.copy(in->cmdbuf.h, NULL, in->src.h, in->dst.h, in->src_offset,
			    in->dst_offset, in->size, (cl_uint)in->points.n, w, &sp, NULL);
	return record_end(b, e, sp);
}

int cmx_h_CommandCopyBufferRect(struct cmx_call *c, struct cmx_CommandCopyBufferRect_in *in)
{
	size_t so[3], dO[3], r[3], srow = in->src_row_pitch, sslice = in->src_slice_pitch;
	size_t drow = in->dst_row_pitch, dslice = in->dst_slice_pitch;
	struct cmdbuf *b = NULL;
	cl_sync_point_khr *w, sp = 0;
	cl_int e = record_begin(c, in->cmdbuf.id, in->point, &in->points, &b, &w);

	if (!e)
		e = cmx_buffer_rect(c, in->src.id, &in->src_origin, &in->region, so, r, &srow,
				    &sslice);
	if (!e)
		e = cmx_buffer_rect(c, in->dst.id, &in->dst_origin, &in->region, dO, r, &drow,
				    &dslice);
	if (!e)
		e = fn.copy_rect(in->cmdbuf.h, NULL, in->src.h, in->dst.h, so, dO, r, srow, sslice,
				 drow, dslice, (cl_uint)in->points.n, w, &sp, NULL);
	return record_end(b, e, sp);
}

int cmx_h_CommandFillBuffer(struct cmx_call *c, struct cmx_CommandFillBuffer_in *in)
{
	uint64_t p = in->pattern.len;
	struct cmdbuf *b = NULL;
	cl_sync_point_khr *w, sp = 0;
	cl_int e = record_begin(c, in->cmdbuf.id, in->point, &in->points, &b, &w);

	if (!e)
		e = cmx_buffer_range(c, in->mem.id, in->offset, in->size);
	if (!e && (!p || p > 128 || (p & (p - 1)) || in->offset % p || in->size % p))
		e = CL_INVALID_VALUE;
	if (!e)
		e = fn.fill(in->cmdbuf.h, NULL, in->mem.h, in->pattern.ptr, p, in->offset, in->size,
			    (cl_uint)in->points.n, w, &sp, NULL);
	return record_end(b, e, sp);
}

/* Image commands are checked as their clEnqueue* counterparts are
 * (host/exec_image.c): each box inside its image, the buffer's range
 * inside the buffer. */
int cmx_h_CommandCopyImage(struct cmx_call *c, struct cmx_CommandCopyImage_in *in)
{
	size_t so[3], dO[3], r[3];
	struct cmdbuf *b = NULL;
	cl_sync_point_khr *w, sp = 0;
	cl_int e = record_begin(c, in->cmdbuf.id, in->point, &in->points, &b, &w);

	if (!e)
		e = cmx_image_region(c, in->src.id, &in->src_origin, &in->region, so, r, NULL);
	if (!e)
		e = cmx_image_region(c, in->dst.id, &in->dst_origin, &in->region, dO, r, NULL);
	if (!e && !fn.copy_image)
		e = CL_INVALID_OPERATION;
	if (!e)
		e = fn.copy_image(in->cmdbuf.h, NULL, in->src.h, in->dst.h, so, dO, r,
				  (cl_uint)in->points.n, w, &sp, NULL);
	return record_end(b, e, sp);
}

int cmx_h_CommandCopyImageToBuffer(struct cmx_call *c, struct cmx_CommandCopyImageToBuffer_in *in)
{
	size_t o[3], r[3];
	uint64_t bytes = 0;
	struct cmdbuf *b = NULL;
	cl_sync_point_khr *w, sp = 0;
	cl_int e = record_begin(c, in->cmdbuf.id, in->point, &in->points, &b, &w);

	if (!e)
		e = cmx_image_region(c, in->src.id, &in->src_origin, &in->region, o, r, &bytes);
	if (!e)
		e = cmx_buffer_range(c, in->dst.id, in->dst_offset, bytes);
	if (!e && !fn.copy_image_buffer)
		e = CL_INVALID_OPERATION;
	if (!e)
		e = fn.copy_image_buffer(in->cmdbuf.h, NULL, in->src.h, in->dst.h, o, r,
					 in->dst_offset, (cl_uint)in->points.n, w, &sp, NULL);
	return record_end(b, e, sp);
}

int cmx_h_CommandCopyBufferToImage(struct cmx_call *c, struct cmx_CommandCopyBufferToImage_in *in)
{
	size_t o[3], r[3];
	uint64_t bytes = 0;
	struct cmdbuf *b = NULL;
	cl_sync_point_khr *w, sp = 0;
	cl_int e = record_begin(c, in->cmdbuf.id, in->point, &in->points, &b, &w);

	if (!e)
		e = cmx_image_region(c, in->dst.id, &in->dst_origin, &in->region, o, r, &bytes);
	if (!e)
		e = cmx_buffer_range(c, in->src.id, in->src_offset, bytes);
	if (!e && !fn.copy_buffer_image)
		e = CL_INVALID_OPERATION;
	if (!e)
		e = fn.copy_buffer_image(in->cmdbuf.h, NULL, in->src.h, in->dst.h, in->src_offset, o,
					 r, (cl_uint)in->points.n, w, &sp, NULL);
	return record_end(b, e, sp);
}

int cmx_h_CommandFillImage(struct cmx_call *c, struct cmx_CommandFillImage_in *in)
{
	unsigned char color[16];
	size_t o[3], r[3];
	struct cmdbuf *b = NULL;
	cl_sync_point_khr *w, sp = 0;
	cl_int e = record_begin(c, in->cmdbuf.id, in->point, &in->points, &b, &w);

	if (!e)
		e = cmx_image_region(c, in->mem.id, &in->origin, &in->region, o, r, NULL);
	if (!e && in->color.len != sizeof(color))
		e = CL_INVALID_VALUE;
	if (!e && !fn.fill_image)
		e = CL_INVALID_OPERATION;
	if (!e) {
		memcpy(color, in->color.ptr, sizeof(color));
		e = fn.fill_image(in->cmdbuf.h, NULL, in->mem.h, color, o, r, (cl_uint)in->points.n,
				  w, &sp, NULL);
	}
	return record_end(b, e, sp);
}

/*
 * A launch is recorded with the kernel's arguments as they are, which the
 * driver copies into the record: SetKernelArg has checked each of them,
 * and their __local sizes must fit the device as at a launch. A kernel that
 * may print is refused: its output has no launch of its own to be
 * captured with (host/kprintf.c), so the device is reported without
 * CL_COMMAND_BUFFER_CAPABILITY_KERNEL_PRINTF_KHR.
 */
/*
 * The kernel as the record is to keep it: a clone, which has the
 * arguments set so far and no later ones. The specification has a launch
 * take the arguments at record time, and PoCL 3.1 reads them at each
 * replay instead: a clSetKernelArg after the record changed the replays.
 * The buffer holds the clone until it goes. NULL: out of memory.
 */
static cl_kernel kernel_capture(struct cmdbuf *b, cl_kernel k, cl_int *e)
{
	cl_kernel clone;

	if (b->nclones == b->clones_cap) {
		uint32_t cap = b->clones_cap ? b->clones_cap * 2 : 8;
		cl_kernel *n = realloc(b->clones, cap * sizeof(*n));
		if (!n) {
			*e = CL_OUT_OF_HOST_MEMORY;
			return NULL;
		}
		b->clones = n;
		b->clones_cap = cap;
	}
	clone = clCloneKernel(k, e);
	if (*e)
		return NULL;
	b->clones[b->nclones++] = clone;
	return clone;
}

int cmx_h_CommandKernel(struct cmx_call *c, struct cmx_CommandKernel_in *in)
{
	size_t off[3] = {0}, global[3] = {0}, local[3] = {0};
	cl_uint dim = (cl_uint)in->global.n;
	struct cmx_obj *o = cmx_session_obj(c->s, in->cmdbuf.id, CMX_K_CMDBUF);
	struct cmdbuf *b = NULL;
	cl_sync_point_khr *w, sp = 0;
	cl_context kctx = NULL;
	cl_kernel k = NULL;
	cl_int e = record_begin(c, in->cmdbuf.id, in->point, &in->points, &b, &w);

	if (e)
		return record_end(b, e, sp);
	if (dim < 1 || dim > 3 || (in->offset.n && in->offset.n != dim) ||
	    (in->local.n && in->local.n != dim))
		e = CL_INVALID_WORK_DIMENSION;
	else if (clGetKernelInfo(in->kernel.h, CL_KERNEL_CONTEXT, sizeof(kctx), &kctx, NULL) ||
		 kctx != o->ctx)
		e = CL_INVALID_CONTEXT;
	else if (cmx_kprintf_kernel(c->s, in->kernel.id))
		e = CL_INVALID_OPERATION;
	else if (!(e = cmx_kernel_args_set(c, in->kernel.id)))
		e = cmx_kernel_local_fits(c, in->kernel.id, b->queue);
	for (cl_uint i = 0; !e && i < dim; i++) {
		global[i] = in->global.v[i];
		off[i] = in->offset.n ? in->offset.v[i] : 0;
		local[i] = in->local.n ? in->local.v[i] : 0;
	}
	if (!e && c->s->srv->platform_version >= 210) {
		k = kernel_capture(b, in->kernel.h, &e);
		if (k)
			cmx_kernel_clone_locals(c, in->kernel.id, k);
	}
	else if (!e)
		k = in->kernel.h;
	if (!e)
		e = fn.kernel(in->cmdbuf.h, NULL, NULL, k, dim,
			      in->offset.n ? off : NULL, global, in->local.n ? local : NULL,
			      (cl_uint)in->points.n, w, &sp, NULL);
	return record_end(b, e, sp);
}

/* A replay as the scheduler holds it (struct cmx_sched_op). */
struct replay {
	struct cmx_sched_op op;
	cl_command_queue queue; /* NULL: the buffer's own */
	cl_command_buffer_khr cb;
	struct holds *holds; /* held: counted there until enqueued */
};

/* The held replay leaves the scheduler (enqueued or dropped). */
static void replay_unhold(struct replay *r)
{
	if (r->holds) {
		r->holds->held--;
		holds_put(r->holds);
		r->holds = NULL;
	}
}

static cl_int replay_enqueue(struct cmx_sched_op *op, cl_uint nwait, const cl_event *wait,
			     cl_event *ev)
{
	struct replay *r = (struct replay *)op;

	replay_unhold(r);
	return fn.enqueue(r->queue ? 1 : 0, r->queue ? &r->queue : NULL, r->cb, nwait, wait, ev);
}

static void replay_destroy(struct cmx_sched_op *op)
{
	struct replay *r = (struct replay *)op;

	replay_unhold(r);
	fn.release(r->cb);
	if (r->queue)
		clReleaseCommandQueue(r->queue);
	free(r);
}

int cmx_h_EnqueueCommandBuffer(struct cmx_call *c, struct cmx_EnqueueCommandBuffer_in *in)
{
	struct cmx_obj *o = cmx_session_obj(c->s, in->cmdbuf.id, CMX_K_CMDBUF);
	struct cmx_obj *q = cmx_session_obj(c->s, in->queue.id, CMX_K_QUEUE);
	struct cmdbuf *b = o ? o->ext : NULL;
	struct replay r = {.op = {.enqueue = replay_enqueue}, .cb = in->cmdbuf.h};
	struct cmx_sched_cmd sc;
	cl_event ev = NULL;
	cl_int e;

	if (!b || !q)
		return CL_INVALID_COMMAND_BUFFER_KHR;
	if (!b->finalized)
		return CL_INVALID_OPERATION;
	if (q->ctx != o->ctx)
		return CL_INVALID_CONTEXT;
	if (in->queue.h != b->queue)
		r.queue = in->queue.h;
	e = cmx_sched_begin(c, (cl_uint)in->wait.n, in->wait.h, &sc);
	if (e)
		return e;
	if (sc.hold) {
		struct replay *held = malloc(sizeof(*held));
		if (!held)
			return CL_OUT_OF_HOST_MEMORY;
		*held = r;
		held->op.destroy = replay_destroy;
		if (b->holds) {
			held->holds = b->holds;
			b->holds->held++;
			b->holds->refs++;
		}
		fn.retain(held->cb);
		if (held->queue)
			clRetainCommandQueue(held->queue);
		return cmx_sched_hold(&sc, c, &in->event, &held->op);
	}
	e = replay_enqueue(&r.op, CMX_SCHED_WAIT(sc), &ev);
	cmx_sched_end(&sc, e, ev);
	if (!e)
		cmx_event_bind(c, &in->event, ev);
	return e;
}
