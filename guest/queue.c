// SPDX-License-Identifier: MIT
// Command queues: created without a round trip; clFinish is one.
#include "entry.h"
#include "icd.h"

#include <stdlib.h>

extern cl_int cmx_clRetainContext(cl_context c);
extern cl_int cmx_clReleaseContext(cl_context c);

static cl_command_queue queue_create(cl_context ctx, cl_device_id dev,
				     cl_command_queue_properties props,
				     const cl_queue_properties *list, cl_int *errcode)
{
	const cl_command_queue_properties known = CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE |
						  CL_QUEUE_PROFILING_ENABLE;
	struct cmx_CreateQueue_in in = { 0 };
	uint64_t wire[3] = { CL_QUEUE_PROPERTIES, props, 0 };
	cl_command_queue q;
	size_t nlist = 0;
	cl_int e = CL_SUCCESS;
	cl_uint i;

	if (!CMX_IS(ctx, CMX_MAGIC_CONTEXT)) {
		e = CL_INVALID_CONTEXT;
		goto fail;
	}
	for (i = 0; i < ctx->ndevices && ctx->devices[i] != dev; i++)
		;
	if (!CMX_IS(dev, CMX_MAGIC_DEVICE) || i == ctx->ndevices) {
		e = CL_INVALID_DEVICE;
		goto fail;
	}
	if (props & ~known) {
		/* On-device queues: the device reports none (guest/icd.c). */
		e = props & ~(known | CL_QUEUE_ON_DEVICE | CL_QUEUE_ON_DEVICE_DEFAULT)
			    ? CL_INVALID_VALUE
			    : CL_INVALID_QUEUE_PROPERTIES;
		goto fail;
	}
	q = cmx_object_new(sizeof(*q), CMX_MAGIC_QUEUE);
	if (!q) {
		e = CL_OUT_OF_HOST_MEMORY;
		goto fail;
	}
	if (list) {
		while (list[nlist])
			nlist += 2;
		nlist++;
		q->prop_list = malloc(nlist * sizeof(*list));
		if (!q->prop_list) {
			free(q);
			e = CL_OUT_OF_HOST_MEMORY;
			goto fail;
		}
		memcpy(q->prop_list, list, nlist * sizeof(*list));
		q->nprop_list = nlist;
	}
	q->ctx = ctx;
	q->device = dev;
	q->props = props;
	in.queue.id = q->id;
	in.context.id = ctx->id;
	in.device.id = dev->id;
	in.props.v = wire;
	in.props.n = 3;
	e = CMX_SEND(CreateQueue, &in);
	if (e) {
		free(q->prop_list);
		free(q);
		goto fail;
	}
	cmx_clRetainContext(ctx);
	if (errcode)
		*errcode = CL_SUCCESS;
	return q;
fail:
	if (errcode)
		*errcode = e;
	return NULL;
}

cl_command_queue cmx_clCreateCommandQueue(cl_context ctx, cl_device_id dev,
					  cl_command_queue_properties props, cl_int *errcode)
{
	return queue_create(ctx, dev, props, NULL, errcode);
}

cl_command_queue cmx_clCreateCommandQueueWithProperties(cl_context ctx, cl_device_id dev,
							const cl_queue_properties *list,
							cl_int *errcode)
{
	cl_command_queue_properties props = 0;

	for (size_t i = 0; list && list[i]; i += 2) {
		if (list[i] == CL_QUEUE_PROPERTIES) {
			props = list[i + 1];
		} else if (list[i] == CL_QUEUE_SIZE) {
			/* Only meaningful for on-device queues, which are refused. */
			if (errcode)
				*errcode = CL_INVALID_QUEUE_PROPERTIES;
			return NULL;
		} else {
			if (errcode)
				*errcode = CL_INVALID_VALUE;
			return NULL;
		}
	}
	return queue_create(ctx, dev, props, list, errcode);
}

cl_int cmx_clRetainCommandQueue(cl_command_queue q)
{
	if (!CMX_IS(q, CMX_MAGIC_QUEUE))
		return CL_INVALID_COMMAND_QUEUE;
	atomic_fetch_add(&q->refs, 1);
	return CL_SUCCESS;
}

cl_int cmx_clReleaseCommandQueue(cl_command_queue q)
{
	struct cmx_ReleaseQueue_in in;

	if (!CMX_IS(q, CMX_MAGIC_QUEUE))
		return CL_INVALID_COMMAND_QUEUE;
	if (atomic_fetch_sub(&q->refs, 1) != 1)
		return CL_SUCCESS;
	/* The spec's implicit flush; the daemon releases after its commands. */
	in.queue.id = q->id;
	CMX_SEND(ReleaseQueue, &in);
	cmx_session_flush(cmx_icd.s);
	cmx_queue_wait_data(q);
	cmx_clReleaseContext(q->ctx);
	q->magic = 0;
	free(q->prop_list);
	free(q);
	return CL_SUCCESS;
}

cl_int cmx_clGetCommandQueueInfo(cl_command_queue q, cl_command_queue_info param, size_t size,
				 void *value, size_t *size_ret)
{
	cl_uint refs;
	cl_command_queue none = NULL;

	if (!CMX_IS(q, CMX_MAGIC_QUEUE))
		return CL_INVALID_COMMAND_QUEUE;
	switch (param) {
	case CL_QUEUE_CONTEXT:
		return cmx_info_copy(size, value, size_ret, &q->ctx, sizeof(q->ctx));
	case CL_QUEUE_DEVICE:
		return cmx_info_copy(size, value, size_ret, &q->device, sizeof(q->device));
	case CL_QUEUE_REFERENCE_COUNT:
		refs = atomic_load(&q->refs);
		return cmx_info_copy(size, value, size_ret, &refs, sizeof(refs));
	case CL_QUEUE_PROPERTIES:
		return cmx_info_copy(size, value, size_ret, &q->props, sizeof(q->props));
	case CL_QUEUE_PROPERTIES_ARRAY:
		return cmx_info_copy(size, value, size_ret, q->prop_list,
				     q->nprop_list * sizeof(*q->prop_list));
	case CL_QUEUE_DEVICE_DEFAULT:
		return cmx_info_copy(size, value, size_ret, &none, sizeof(none));
	case CL_QUEUE_SIZE:
		return CL_INVALID_COMMAND_QUEUE; /* not an on-device queue */
	}
	return CL_INVALID_VALUE;
}

cl_int cmx_clSetCommandQueueProperty(cl_command_queue q, cl_command_queue_properties props,
				     cl_bool enable, cl_command_queue_properties *old)
{
	return CMX_IS(q, CMX_MAGIC_QUEUE) ? CL_INVALID_OPERATION : CL_INVALID_COMMAND_QUEUE;
}

cl_int cmx_clSetDefaultDeviceCommandQueue(cl_context ctx, cl_device_id dev, cl_command_queue q)
{
	if (!CMX_IS(ctx, CMX_MAGIC_CONTEXT))
		return CL_INVALID_CONTEXT;
	return CL_INVALID_OPERATION; /* no on-device queues */
}

cl_int cmx_clFlush(cl_command_queue q)
{
	struct cmx_Flush_in in;

	if (!CMX_IS(q, CMX_MAGIC_QUEUE))
		return CL_INVALID_COMMAND_QUEUE;
	in.queue.id = q->id;
	if (CMX_SEND(Flush, &in) || cmx_session_flush(cmx_icd.s))
		return CL_OUT_OF_RESOURCES;
	return CL_SUCCESS;
}

cl_int cmx_clFinish(cl_command_queue q)
{
	struct cmx_Finish_in in;
	struct cmx_Finish_out out;
	struct cmx_reply r;
	unsigned ticket, done;
	int e;

	if (!CMX_IS(q, CMX_MAGIC_QUEUE))
		return CL_INVALID_COMMAND_QUEUE;
	ticket = atomic_fetch_add(&q->finish_seq, 1) + 1;
	in.queue.id = q->id;
	e = cmx_rpc_Finish(cmx_icd.s, &in, &out, &r);
	cmx_reply_fini(&r);
	if (e)
		return cmx_transport_err(e);
	/* The device is done; non-blocking reads may still be landing. */
	cmx_queue_wait_data(q);
	done = atomic_load(&q->finished_upto);
	while (r.status == CL_SUCCESS && done < ticket &&
	       !atomic_compare_exchange_weak(&q->finished_upto, &done, ticket))
		;
	return r.status;
}

void cmx_queue_wait_data(cl_command_queue q)
{
	pthread_mutex_lock(&cmx_icd.wait_lock);
	while (atomic_load(&q->pending) && !cmx_icd_lost(q->id))
		cmx_icd_wait_landing();
	pthread_mutex_unlock(&cmx_icd.wait_lock);
}
