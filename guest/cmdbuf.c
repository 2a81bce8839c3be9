// SPDX-License-Identifier: MIT
// cl_khr_command_buffer: the record lives in the daemon, a replay is one message by id.
#include "entry.h"
#include "command.h"
#include "icd.h"
#include "image.h"
#include "mem.h"
#include "object.h"
#include "program.h"

#include <CL/cl_ext.h>
#include <stdlib.h>
#include <string.h>

/*
 * A command buffer as the guest knows it: enough to answer at once every
 * error the specification wants from a recording call (the commands
 * themselves travel async, checked here as their enqueues are), and the
 * sync points, which the guest numbers itself: the daemon maps them to
 * the driver's.
 */
struct _cl_command_buffer_khr {
	CMX_OBJECT_HEAD;
	cl_command_queue queue; /* retained */
	cl_command_buffer_state_khr state; /* RECORDING or EXECUTABLE, as known here */
	cl_uint points;			   /* commands recorded: the last sync point */
	cl_command_buffer_properties_khr props[3];
	size_t nprops; /* entries of props, the terminating 0 included; 0: none given */
	int simultaneous; /* CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR */
	/* The last replay's queue (retained) and its finish tickets then: a
	 * replay may still be pending unless a clFinish begun after it has
	 * returned (replay_may_pend()). */
	cl_command_queue last_queue;
	unsigned last_mark;
	pthread_mutex_t lock;
};

static int is_cmdbuf(cl_command_buffer_khr b)
{
	return CMX_IS(b, CMX_MAGIC_CMDBUF);
}

/* What the device allows (CL_DEVICE_COMMAND_BUFFER_*_KHR, as guest/icd.c
 * reports them); *ok 0 where the device has no command buffers here. */
static cl_bitfield device_caps(cl_device_id d, cl_uint param, int *ok)
{
	const struct cmx_devinfo *i = cmx_device_info(d, param);
	cl_bitfield v = 0;

	*ok = i && i->size == sizeof(v);
	if (*ok)
		memcpy(&v, i->value, sizeof(v));
	return v;
}

static cl_command_buffer_khr CL_API_CALL
cmx_clCreateCommandBufferKHR(cl_uint num_queues, const cl_command_queue *queues,
			     const cl_command_buffer_properties_khr *properties, cl_int *errcode_ret)
{
	struct cmx_CreateCommandBuffer_in in;
	uint64_t props[3] = {0};
	cl_command_buffer_khr b;
	cl_command_queue q;
	cl_bitfield caps, required, flags = 0;
	size_t nprops = 0;
	int ok;

	if (num_queues != 1 || !queues)
		return cmx_fail(errcode_ret, CL_INVALID_VALUE);
	q = queues[0];
	if (!CMX_IS(q, CMX_MAGIC_QUEUE))
		return cmx_fail(errcode_ret, CL_INVALID_COMMAND_QUEUE);
	caps = device_caps(q->device, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR, &ok);
	if (!ok)
		return cmx_fail(errcode_ret, CL_INVALID_OPERATION);
	required = device_caps(q->device, CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR, &ok);
	if (properties) {
		for (; properties[nprops]; nprops += 2) {
			if (nprops || properties[nprops] != CL_COMMAND_BUFFER_FLAGS_KHR)
				return cmx_fail(errcode_ret, CL_INVALID_VALUE);
			flags = properties[nprops + 1];
		}
		nprops++;
		if (flags & ~(cl_bitfield)CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR)
			return cmx_fail(errcode_ret, CL_INVALID_VALUE);
		if ((flags & CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR) &&
		    !(caps & CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR))
			return cmx_fail(errcode_ret, CL_INVALID_PROPERTY);
	}
	if ((q->props & required) != required ||
	    ((q->props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) &&
	     !(caps & CL_COMMAND_BUFFER_CAPABILITY_OUT_OF_ORDER_KHR)))
		return cmx_fail(errcode_ret, CL_INCOMPATIBLE_COMMAND_QUEUE_KHR);
	b = cmx_object_new(sizeof(*b), CMX_MAGIC_CMDBUF);
	if (!b)
		return cmx_fail(errcode_ret, CL_OUT_OF_HOST_MEMORY);
	pthread_mutex_init(&b->lock, NULL);
	b->queue = q;
	b->state = CL_COMMAND_BUFFER_STATE_RECORDING_KHR;
	b->nprops = nprops;
	b->simultaneous = !!(flags & CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR);
	for (size_t i = 0; i < nprops; i++)
		b->props[i] = props[i] = properties[i];
	in = (struct cmx_CreateCommandBuffer_in){
	    .cmdbuf.id = b->id, .queue.id = q->id, .props = {props, nprops}};
	if (CMX_SEND(CreateCommandBuffer, &in)) {
		pthread_mutex_destroy(&b->lock);
		free(b);
		return cmx_fail(errcode_ret, CL_OUT_OF_RESOURCES);
	}
	cmx_clRetainCommandQueue(q);
	return cmx_succeed(errcode_ret, b);
}

static cl_int CL_API_CALL cmx_clRetainCommandBufferKHR(cl_command_buffer_khr b)
{
	if (!is_cmdbuf(b))
		return CL_INVALID_COMMAND_BUFFER_KHR;
	atomic_fetch_add(&b->refs, 1);
	return CL_SUCCESS;
}

static cl_int CL_API_CALL cmx_clReleaseCommandBufferKHR(cl_command_buffer_khr b)
{
	struct cmx_ReleaseCommandBuffer_in in;
	cl_command_queue q;

	if (!is_cmdbuf(b))
		return CL_INVALID_COMMAND_BUFFER_KHR;
	if (atomic_fetch_sub(&b->refs, 1) != 1)
		return CL_SUCCESS;
	b->magic = 0;
	q = b->queue;
	in.cmdbuf.id = b->id;
	CMX_SEND(ReleaseCommandBuffer, &in);
	if (b->last_queue)
		cmx_clReleaseCommandQueue(b->last_queue);
	pthread_mutex_destroy(&b->lock);
	free(b);
	cmx_clReleaseCommandQueue(q);
	return CL_SUCCESS;
}

static cl_int CL_API_CALL cmx_clFinalizeCommandBufferKHR(cl_command_buffer_khr b)
{
	struct cmx_FinalizeCommandBuffer_in in;
	struct cmx_FinalizeCommandBuffer_out out;
	struct cmx_reply r;
	cl_int e;

	if (!is_cmdbuf(b))
		return CL_INVALID_COMMAND_BUFFER_KHR;
	pthread_mutex_lock(&b->lock);
	if (b->state != CL_COMMAND_BUFFER_STATE_RECORDING_KHR) {
		pthread_mutex_unlock(&b->lock);
		return CL_INVALID_OPERATION;
	}
	in.cmdbuf.id = b->id;
	/* Sync: it answers any error of the recording only the daemon found. */
	e = cmx_reply_status(cmx_rpc_FinalizeCommandBuffer(cmx_icd.s, &in, &out, &r), &r);
	if (!e)
		b->state = CL_COMMAND_BUFFER_STATE_EXECUTABLE_KHR;
	pthread_mutex_unlock(&b->lock);
	return e;
}

/*
 * What every recording call checks first: the buffer records, no queue is
 * named (cl_khr_command_buffer_multi_device is not offered), no mutable
 * handle is asked for (nor cl_khr_command_buffer_mutable_dispatch), and the
 * wait list names earlier commands. Takes the buffer's lock, held on
 * success until record_send().
 */
static cl_int record_begin(cl_command_buffer_khr b, cl_command_queue q, cl_uint n,
			   const cl_sync_point_khr *list, cl_mutable_command_khr *mutable_handle)
{
	if (!is_cmdbuf(b))
		return CL_INVALID_COMMAND_BUFFER_KHR;
	if (q)
		return CL_INVALID_COMMAND_QUEUE;
	if (mutable_handle)
		return CL_INVALID_VALUE;
	if ((n && !list) || (!n && list))
		return CL_INVALID_SYNC_POINT_WAIT_LIST_KHR;
	pthread_mutex_lock(&b->lock);
	if (b->state != CL_COMMAND_BUFFER_STATE_RECORDING_KHR) {
		pthread_mutex_unlock(&b->lock);
		return CL_INVALID_OPERATION;
	}
	for (cl_uint i = 0; i < n; i++)
		if (!list[i] || list[i] > b->points) {
			pthread_mutex_unlock(&b->lock);
			return CL_INVALID_SYNC_POINT_WAIT_LIST_KHR;
		}
	return CL_SUCCESS;
}

/* The wait list as the wire has it: cl_sync_point_khr is 32 bits. */
static uint64_t *points_wire(cl_uint n, const cl_sync_point_khr *list, uint64_t small[16])
{
	uint64_t *v = n <= 16 ? small : malloc(n * sizeof(*v));

	for (cl_uint i = 0; v && i < n; i++)
		v[i] = list[i];
	return v;
}

/*
 * The rest of every recording call once record_begin() has passed, with e
 * the status of the call's own checks and `in` (the message d describes)
 * filled where e is CL_SUCCESS: the command takes the next sync point
 * (*point), its wait list goes on the wire (*points), the message is sent
 * async and the sync point returned. A point a failed send took is given
 * back. Drops the buffer's lock.
 */
static cl_int record_send(cl_command_buffer_khr b, cl_int e, cl_uint n,
			  const cl_sync_point_khr *list, cl_sync_point_khr *sync_point,
			  const struct cmx_msgdesc *d, const void *in, struct cmx_u64s *points,
			  uint64_t *point)
{
	uint64_t small[16], *w = NULL;

	if (!e) {
		w = points_wire(n, list, small);
		if (!w)
			e = CL_OUT_OF_HOST_MEMORY;
	}
	if (!e) {
		*points = (struct cmx_u64s){w, n};
		*point = ++b->points;
		e = cmx_session_send(cmx_icd.s, d, in, NULL, 0) ? CL_OUT_OF_RESOURCES : CL_SUCCESS;
		if (e)
			b->points--;
		else if (sync_point)
			*sync_point = b->points;
	}
	if (w != small)
		free(w);
	pthread_mutex_unlock(&b->lock);
	return e;
}

static cl_int CL_API_CALL cmx_clCommandBarrierWithWaitListKHR(
    cl_command_buffer_khr b, cl_command_queue q, cl_uint n, const cl_sync_point_khr *list,
    cl_sync_point_khr *sync_point, cl_mutable_command_khr *mutable_handle)
{
	struct cmx_CommandBarrier_in in;
	cl_int e = record_begin(b, q, n, list, mutable_handle);

	if (e)
		return e;
	in = (struct cmx_CommandBarrier_in){.cmdbuf.id = b->id};
	return record_send(b, e, n, list, sync_point, &cmx_desc_CommandBarrier_in, &in, &in.points,
			   &in.point);
}

static cl_int CL_API_CALL cmx_clCommandCopyBufferKHR(
    cl_command_buffer_khr b, cl_command_queue q, cl_mem src, cl_mem dst, size_t soff,
    size_t doff, size_t size, cl_uint n, const cl_sync_point_khr *list,
    cl_sync_point_khr *sync_point, cl_mutable_command_khr *mutable_handle)
{
	struct cmx_CommandCopyBuffer_in in;
	cl_int e = record_begin(b, q, n, list, mutable_handle);

	if (e)
		return e;
	e = cmx_copy_buffer_check(b->queue, src, dst, soff, doff, size);
	if (!e)
		in = (struct cmx_CommandCopyBuffer_in){.cmdbuf.id = b->id,
						       .src.id = src->id,
						       .dst.id = dst->id,
						       .src_offset = soff,
						       .dst_offset = doff,
						       .size = size};
	return record_send(b, e, n, list, sync_point, &cmx_desc_CommandCopyBuffer_in, &in,
			   &in.points, &in.point);
}

static cl_int CL_API_CALL cmx_clCommandCopyBufferRectKHR(
    cl_command_buffer_khr b, cl_command_queue q, cl_mem src, cl_mem dst, const size_t *so,
    const size_t *dor, const size_t *region, size_t srow, size_t sslice, size_t drow,
    size_t dslice, cl_uint n, const cl_sync_point_khr *list, cl_sync_point_khr *sync_point,
    cl_mutable_command_khr *mutable_handle)
{
	struct cmx_CommandCopyBufferRect_in in;
	uint64_t so64[3], do64[3], r64[3];
	cl_int e = record_begin(b, q, n, list, mutable_handle);

	if (e)
		return e;
	e = cmx_copy_buffer_rect_check(b->queue, src, dst, so, dor, region, &srow, &sslice, &drow,
				       &dslice);
	if (!e) {
		for (int i = 0; i < 3; i++)
			so64[i] = so[i], do64[i] = dor[i], r64[i] = region[i];
		in = (struct cmx_CommandCopyBufferRect_in){.cmdbuf.id = b->id,
							   .src.id = src->id,
							   .dst.id = dst->id,
							   .src_origin = {so64, 3},
							   .dst_origin = {do64, 3},
							   .region = {r64, 3},
							   .src_row_pitch = srow,
							   .src_slice_pitch = sslice,
							   .dst_row_pitch = drow,
							   .dst_slice_pitch = dslice};
	}
	return record_send(b, e, n, list, sync_point, &cmx_desc_CommandCopyBufferRect_in, &in,
			   &in.points, &in.point);
}

static cl_int CL_API_CALL cmx_clCommandFillBufferKHR(
    cl_command_buffer_khr b, cl_command_queue q, cl_mem m, const void *pattern, size_t psize,
    size_t off, size_t size, cl_uint n, const cl_sync_point_khr *list,
    cl_sync_point_khr *sync_point, cl_mutable_command_khr *mutable_handle)
{
	struct cmx_CommandFillBuffer_in in;
	cl_int e = record_begin(b, q, n, list, mutable_handle);

	if (e)
		return e;
	e = cmx_fill_buffer_check(b->queue, m, pattern, psize, off, size);
	if (!e)
		in = (struct cmx_CommandFillBuffer_in){.cmdbuf.id = b->id,
						       .mem.id = m->id,
						       .pattern = {pattern, psize},
						       .offset = off,
						       .size = size};
	return record_send(b, e, n, list, sync_point, &cmx_desc_CommandFillBuffer_in, &in,
			   &in.points, &in.point);
}

static void u64x3(uint64_t *d, const size_t *s)
{
	for (int i = 0; i < 3; i++)
		d[i] = s[i];
}

static cl_int CL_API_CALL cmx_clCommandCopyImageKHR(
    cl_command_buffer_khr b, cl_command_queue q, cl_mem src, cl_mem dst, const size_t *so,
    const size_t *dor, const size_t *region, cl_uint n, const cl_sync_point_khr *list,
    cl_sync_point_khr *sync_point, cl_mutable_command_khr *mutable_handle)
{
	struct cmx_CommandCopyImage_in in;
	uint64_t s64[3], d64[3], r64[3];
	cl_int e = record_begin(b, q, n, list, mutable_handle);

	if (e)
		return e;
	e = cmx_copy_image_check(b->queue, src, dst, so, dor, region);
	if (!e) {
		u64x3(s64, so), u64x3(d64, dor), u64x3(r64, region);
		in = (struct cmx_CommandCopyImage_in){.cmdbuf.id = b->id,
						      .src.id = src->id,
						      .dst.id = dst->id,
						      .src_origin = {s64, 3},
						      .dst_origin = {d64, 3},
						      .region = {r64, 3}};
	}
	return record_send(b, e, n, list, sync_point, &cmx_desc_CommandCopyImage_in, &in,
			   &in.points, &in.point);
}

static cl_int CL_API_CALL cmx_clCommandCopyImageToBufferKHR(
    cl_command_buffer_khr b, cl_command_queue q, cl_mem src, cl_mem dst, const size_t *so,
    const size_t *region, size_t doff, cl_uint n, const cl_sync_point_khr *list,
    cl_sync_point_khr *sync_point, cl_mutable_command_khr *mutable_handle)
{
	struct cmx_CommandCopyImageToBuffer_in in;
	uint64_t o64[3], r64[3];
	cl_int e = record_begin(b, q, n, list, mutable_handle);

	if (e)
		return e;
	e = cmx_image_buffer_check(b->queue, src, dst, doff, so, region);
	if (!e) {
		u64x3(o64, so), u64x3(r64, region);
		in = (struct cmx_CommandCopyImageToBuffer_in){.cmdbuf.id = b->id,
							      .src.id = src->id,
							      .dst.id = dst->id,
							      .src_origin = {o64, 3},
							      .region = {r64, 3},
							      .dst_offset = doff};
	}
	return record_send(b, e, n, list, sync_point, &cmx_desc_CommandCopyImageToBuffer_in, &in,
			   &in.points, &in.point);
}

static cl_int CL_API_CALL cmx_clCommandCopyBufferToImageKHR(
    cl_command_buffer_khr b, cl_command_queue q, cl_mem src, cl_mem dst, size_t soff,
    const size_t *dor, const size_t *region, cl_uint n, const cl_sync_point_khr *list,
    cl_sync_point_khr *sync_point, cl_mutable_command_khr *mutable_handle)
{
	struct cmx_CommandCopyBufferToImage_in in;
	uint64_t o64[3], r64[3];
	cl_int e = record_begin(b, q, n, list, mutable_handle);

	if (e)
		return e;
	e = cmx_image_buffer_check(b->queue, dst, src, soff, dor, region);
	if (!e) {
		u64x3(o64, dor), u64x3(r64, region);
		in = (struct cmx_CommandCopyBufferToImage_in){.cmdbuf.id = b->id,
							      .src.id = src->id,
							      .dst.id = dst->id,
							      .src_offset = soff,
							      .dst_origin = {o64, 3},
							      .region = {r64, 3}};
	}
	return record_send(b, e, n, list, sync_point, &cmx_desc_CommandCopyBufferToImage_in, &in,
			   &in.points, &in.point);
}

static cl_int CL_API_CALL cmx_clCommandFillImageKHR(
    cl_command_buffer_khr b, cl_command_queue q, cl_mem m, const void *color,
    const size_t *origin, const size_t *region, cl_uint n, const cl_sync_point_khr *list,
    cl_sync_point_khr *sync_point, cl_mutable_command_khr *mutable_handle)
{
	struct cmx_CommandFillImage_in in;
	unsigned char col[16];
	uint64_t o64[3], r64[3];
	cl_int e = record_begin(b, q, n, list, mutable_handle);

	if (e)
		return e;
	e = cmx_fill_image_check(b->queue, m, color, origin, region, col);
	if (!e) {
		u64x3(o64, origin), u64x3(r64, region);
		in = (struct cmx_CommandFillImage_in){.cmdbuf.id = b->id,
						      .mem.id = m->id,
						      .color = {col, sizeof(col)},
						      .origin = {o64, 3},
						      .region = {r64, 3}};
	}
	return record_send(b, e, n, list, sync_point, &cmx_desc_CommandFillImage_in, &in,
			   &in.points, &in.point);
}

/* The arguments are the kernel's now: the daemon's driver copies them into
 * the record, and later clSetKernelArg calls change only later launches. */
static cl_int CL_API_CALL cmx_clCommandNDRangeKernelKHR(
    cl_command_buffer_khr b, cl_command_queue q,
    const cl_ndrange_kernel_command_properties_khr *properties, cl_kernel k, cl_uint dim,
    const size_t *offset, const size_t *global, const size_t *local, cl_uint n,
    const cl_sync_point_khr *list, cl_sync_point_khr *sync_point,
    cl_mutable_command_khr *mutable_handle)
{
	struct cmx_CommandKernel_in in;
	uint64_t off[3], gl[3], lo[3];
	cl_int e = record_begin(b, q, n, list, mutable_handle);

	if (e)
		return e;
	/* No property is defined without mutable dispatch. */
	if (properties && properties[0])
		e = CL_INVALID_VALUE;
	if (!e)
		e = cmx_kernel_launch_check(b->queue, k, dim, offset, global, local);
	/* Its output would have no launch to come back with. */
	if (!e && k->program->may_print)
		e = CL_INVALID_OPERATION;
	if (!e) {
		for (cl_uint i = 0; i < dim; i++) {
			off[i] = offset ? offset[i] : 0;
			gl[i] = global[i];
			lo[i] = local ? local[i] : 0;
		}
		in = (struct cmx_CommandKernel_in){.cmdbuf.id = b->id,
						   .kernel.id = k->id,
						   .offset = {off, offset ? dim : 0},
						   .global = {gl, dim},
						   .local = {lo, local ? dim : 0}};
	}
	return record_send(b, e, n, list, sync_point, &cmx_desc_CommandKernel_in, &in, &in.points,
			   &in.point);
}

/*
 * A buffer without simultaneous use may not be replayed while a replay of
 * it is pending (CL_INVALID_OPERATION). Where no clFinish begun after the
 * last replay has returned, the daemon is asked for the buffer's state
 * (one round trip); a replay followed by clFinish needs none. Under b's
 * lock.
 */
static cl_int replay_may_pend(cl_command_buffer_khr b)
{
	struct cmx_GetCommandBufferInfo_in in = {.cmdbuf.id = b->id,
						 .param = CL_COMMAND_BUFFER_STATE_KHR};
	struct cmx_GetCommandBufferInfo_out out;
	cl_command_buffer_state_khr st = 0;
	struct cmx_reply r;
	cl_int e;

	if (b->simultaneous || !b->last_queue ||
	    atomic_load(&b->last_queue->finished_upto) > b->last_mark)
		return CL_SUCCESS;
	e = cmx_info_reply(cmx_rpc_GetCommandBufferInfo(cmx_icd.s, &in, &out, &r), &r,
			   &out.value, sizeof(st), &st, NULL);
	if (e)
		return e;
	return st == CL_COMMAND_BUFFER_STATE_PENDING_KHR ? CL_INVALID_OPERATION : CL_SUCCESS;
}

static cl_int CL_API_CALL cmx_clEnqueueCommandBufferKHR(cl_uint num_queues,
							cl_command_queue *queues,
							cl_command_buffer_khr b, cl_uint n,
							const cl_event *list, cl_event *event)
{
	struct cmx_EnqueueCommandBuffer_in in;
	cl_command_queue q;
	struct cmx_cmd c;
	cl_int e;

	if (!is_cmdbuf(b))
		return CL_INVALID_COMMAND_BUFFER_KHR;
	if (num_queues > 1 || (num_queues && !queues) || (!num_queues && queues))
		return CL_INVALID_VALUE;
	q = num_queues ? queues[0] : b->queue;
	if (!CMX_IS(q, CMX_MAGIC_QUEUE))
		return CL_INVALID_COMMAND_QUEUE;
	if (q->ctx != b->queue->ctx)
		return CL_INVALID_CONTEXT;
	if (q != b->queue && (q->device != b->queue->device || q->props != b->queue->props))
		return CL_INCOMPATIBLE_COMMAND_QUEUE_KHR;
	pthread_mutex_lock(&b->lock);
	e = b->state == CL_COMMAND_BUFFER_STATE_EXECUTABLE_KHR ? CL_SUCCESS : CL_INVALID_OPERATION;
	if (!e)
		e = replay_may_pend(b);
	if (e || (e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_COMMAND_BUFFER_KHR))) {
		pthread_mutex_unlock(&b->lock);
		return e;
	}
	in = (struct cmx_EnqueueCommandBuffer_in){
	    .queue.id = q->id, .cmdbuf.id = b->id, .wait = CMD_WAIT(&c), .event.id = c.ev_id};
	e = cmx_cmd_end(&c, CMX_SEND(EnqueueCommandBuffer, &in));
	/* Tickets past this one are of finishes sent after the replay (the
	 * session's messages keep their order). */
	b->last_mark = atomic_load(&q->finish_seq);
	if (!e && b->last_queue != q) {
		cmx_clRetainCommandQueue(q);
		if (b->last_queue)
			cmx_clReleaseCommandQueue(b->last_queue);
		b->last_queue = q;
	}
	pthread_mutex_unlock(&b->lock);
	return e;
}

static cl_int CL_API_CALL cmx_clGetCommandBufferInfoKHR(cl_command_buffer_khr b,
							cl_command_buffer_info_khr param,
							size_t size, void *value, size_t *size_ret)
{
	struct cmx_GetCommandBufferInfo_in in;
	struct cmx_GetCommandBufferInfo_out out;
	struct cmx_reply r;
	cl_uint u;

	if (!is_cmdbuf(b))
		return CL_INVALID_COMMAND_BUFFER_KHR;
	switch (param) {
	case CL_COMMAND_BUFFER_QUEUES_KHR:
		return cmx_info_copy(size, value, size_ret, &b->queue, sizeof(b->queue));
	case CL_COMMAND_BUFFER_NUM_QUEUES_KHR:
		u = 1;
		return cmx_info_copy(size, value, size_ret, &u, sizeof(u));
	case CL_COMMAND_BUFFER_REFERENCE_COUNT_KHR:
		u = atomic_load(&b->refs);
		return cmx_info_copy(size, value, size_ret, &u, sizeof(u));
	case CL_COMMAND_BUFFER_PROPERTIES_ARRAY_KHR:
		return cmx_info_copy(size, value, size_ret, b->props,
				     b->nprops * sizeof(b->props[0]));
	case CL_COMMAND_BUFFER_STATE_KHR:
		/* Pending is the daemon's to tell. */
		in = (struct cmx_GetCommandBufferInfo_in){.cmdbuf.id = b->id, .param = param};
		return cmx_info_reply(cmx_rpc_GetCommandBufferInfo(cmx_icd.s, &in, &out, &r), &r,
				      &out.value, size, value, size_ret);
	default:
		return CL_INVALID_VALUE;
	}
}

void *cmx_cmdbuf_function(const char *name)
{
	static const struct {
		const char *name;
		void *fn;
	} fns[] = {
#define FN(n) {#n, (void *)cmx_##n}
	    FN(clCreateCommandBufferKHR),	 FN(clRetainCommandBufferKHR),
	    FN(clReleaseCommandBufferKHR),	 FN(clFinalizeCommandBufferKHR),
	    FN(clCommandBarrierWithWaitListKHR), FN(clCommandCopyBufferKHR),
	    FN(clCommandCopyBufferRectKHR),	 FN(clCommandCopyImageKHR),
	    FN(clCommandCopyImageToBufferKHR),	 FN(clCommandCopyBufferToImageKHR),
	    FN(clCommandFillImageKHR),
	    FN(clCommandFillBufferKHR),		 FN(clCommandNDRangeKernelKHR),
	    FN(clEnqueueCommandBufferKHR),	 FN(clGetCommandBufferInfoKHR),
#undef FN
	};

	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		if (!strcmp(fns[i].name, name))
			return fns[i].fn;
	return NULL;
}
