// SPDX-License-Identifier: MIT
// The notification thread's work: read data landing, event callbacks, buffer
// destructors and context errors, all sent by the daemon unasked.
#include "icd.h"

#include <stdlib.h>

void cmx_event_callback_fired(uint64_t tag, int64_t status);
void cmx_mem_destructor_fired(uint64_t tag);

/* Spreads a packed rectangle into the application's pitched memory. */
static void unpack_rect(const struct cmx_pending_read *r)
{
	const char *src = r->dst;
	char *out = r->out;

	for (size_t z = 0; z < r->region[2]; z++)
		for (size_t y = 0; y < r->region[1]; y++)
			memcpy(out + z * r->slice_pitch + y * r->row_pitch,
			       src + (z * r->region[1] + y) * r->region[0], r->region[0]);
}

void cmx_read_landed(struct cmx_pending_read *r, int status)
{
	cl_command_queue q = r->queue;

	/* The data, if it came through the area, was copied to dst already. */
	cmx_session_area_free(cmx_icd.s, r->area_off);
	if (status >= 0 && r->out)
		unpack_rect(r);
	if (r->out)
		free(r->dst);
	if (r->finish)
		r->finish(r, status);
	if (r->event) {
		cmx_event_data_done(r->event, status);
		cmx_clReleaseEvent(r->event);
	}
	pthread_mutex_lock(&cmx_icd.wait_lock);
	atomic_fetch_sub(&q->pending, 1);
	pthread_cond_broadcast(&cmx_icd.wait_cond);
	pthread_mutex_unlock(&cmx_icd.wait_lock);
	free(r);
}

static void *bulk_dst(void *ctx, unsigned op, const void *args, uint64_t len)
{
	const struct cmx_ReadDone_in *in = args;
	struct cmx_pending_read *r = (struct cmx_pending_read *)(uintptr_t)in->tag;

	if (op != CMX_OP_ReadDone || !r || len != r->len)
		return NULL;
	return r->dst;
}

static void done(void *ctx, unsigned op, const void *args)
{
	switch (op) {
	case CMX_OP_ReadDone: {
		const struct cmx_ReadDone_in *in = args;
		cmx_read_landed((struct cmx_pending_read *)(uintptr_t)in->tag, (int)in->status);
		break;
	}
	case CMX_OP_EventDone: {
		const struct cmx_EventDone_in *in = args;
		cmx_event_callback_fired(in->tag, in->status);
		break;
	}
	case CMX_OP_MemDestroyed: {
		const struct cmx_MemDestroyed_in *in = args;
		cmx_mem_destructor_fired(in->tag);
		break;
	}
	case CMX_OP_ContextError: {
		const struct cmx_ContextError_in *in = args;
		cl_context c = (cl_context)(uintptr_t)in->tag;
		if (CMX_IS(c, CMX_MAGIC_CONTEXT) && c->notify)
			c->notify(in->errinfo.len ? in->errinfo.ptr : "", in->info.ptr, in->info.len,
				  c->notify_data);
		break;
	}
	}
}

const struct cmx_notify_ops cmx_notify_ops = { .bulk_dst = bulk_dst, .done = done };
