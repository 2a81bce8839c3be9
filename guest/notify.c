// SPDX-License-Identifier: MIT
// The notification thread's work: read data landing, event callbacks, buffer
// destructors and context errors, all sent by the daemon unasked.
#include "icd.h"

#include <stdlib.h>

#include "fdio.h"

/* The KernelOutput being received: bulk_dst() to done(), on the one
 * notification thread. */
static char *output_buf;
static size_t output_len;

void cmx_event_callback_fired(uint64_t tag, int64_t status);
void cmx_mem_destructor_fired(uint64_t tag);

static void lost(void *ctx, struct cmx_session *s)
{
	cmx_track_sweep(s);
}

/* The largest kernel output taken (the daemon sends at most 16 MiB). */
#define OUTPUT_MAX (64u << 20)

void *cmx_nbulk_ReadDone(const struct cmx_ReadDone_in *in, uint64_t len)
{
	struct cmx_pending_read *r = (struct cmx_pending_read *)(uintptr_t)in->tag;

	return r && len == r->len ? r->dst : NULL;
}

void cmx_n_ReadDone(const struct cmx_ReadDone_in *in)
{
	cmx_read_landed((struct cmx_pending_read *)(uintptr_t)in->tag, (int)in->status);
}

void *cmx_nbulk_KernelOutput(const struct cmx_KernelOutput_in *in, uint64_t len)
{
	(void)in;
	/* The bytes land in a buffer of their own; cmx_n_KernelOutput()
	 * writes them. */
	output_buf = len <= OUTPUT_MAX ? malloc(len) : NULL;
	output_len = output_buf ? len : 0;
	return output_buf;
}

void cmx_n_KernelOutput(const struct cmx_KernelOutput_in *in)
{
	struct cmx_pending_read *r = (struct cmx_pending_read *)(uintptr_t)in->tag;

	/* Where the driver would have written it in the application's own
	 * process: straight to fd 1, past stdio's buffer. */
	if (output_len)
		(void)cmx_fd_write_all(STDOUT_FILENO, output_buf, output_len);
	free(output_buf);
	output_buf = NULL;
	output_len = 0;
	/* Tag 0: a launch the daemon found printing and this side did not;
	 * nothing waits for it. */
	if (r)
		cmx_read_landed(r, (int)in->status);
}

void cmx_n_EventDone(const struct cmx_EventDone_in *in)
{
	cmx_event_callback_fired(in->tag, in->status);
}

void cmx_n_MemDestroyed(const struct cmx_MemDestroyed_in *in)
{
	cmx_mem_destructor_fired(in->tag);
}

void cmx_n_ContextError(const struct cmx_ContextError_in *in)
{
	cl_context c = (cl_context)(uintptr_t)in->tag;

	if (CMX_IS(c, CMX_MAGIC_CONTEXT) && c->notify)
		c->notify(in->errinfo.len ? in->errinfo.ptr : "", in->info.ptr, in->info.len,
			  c->notify_data);
}

/* Each notification to its handler above, by the generated tables. */
static void *bulk_dst(void *ctx, unsigned op, const void *args, uint64_t len)
{
	(void)ctx;
	return cmx_notify_bulk_dst(op, args, len);
}

static void done(void *ctx, unsigned op, const void *args)
{
	(void)ctx;
	(void)cmx_notify_dispatch(op, args);
}

const struct cmx_notify_ops cmx_notify_ops = { .bulk_dst = bulk_dst, .done = done, .lost = lost };
