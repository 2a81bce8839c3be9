// SPDX-License-Identifier: MIT
// Fresh device memory is zeroed on the device before its tenant can read it:
// a fill on the context's own queue, and a barrier on the tenant's queues
// (on Oclgrind, creation from zero pages instead).
#include "zero.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "call.h"
#include "exec.h"
#include "log.h"
#include "server.h"
#include "session.h"

/*
 * Per context: the daemon's own in-order queue (made at the first fill) and
 * the newest fill on it, whose completion means every fill so far is done.
 * `epoch` counts the fills; a tenant queue remembers the epoch it was last
 * ordered after, so a burst of creations costs its next command one check
 * and at most one barrier. The context object and each of its queue
 * objects hold a reference: a queue may outlive its context's object.
 */
struct cmx_zero {
	const struct cmx_server *srv;
	atomic_int refs;
	cl_context ctx;
	cl_command_queue q;
	cl_event last; /* the newest fill; NULL once seen complete */
	uint64_t epoch;
};

/* A tenant queue's side (its object's ext). */
struct zero_queue {
	struct cmx_zero *z;
	uint64_t seen; /* the epoch it is ordered after */
};

static void zero_put(struct cmx_zero *z)
{
	/* Pairs with the increment in cmx_zero_queue(): the last holder,
	 * on whichever thread, releases. */
	if (atomic_fetch_sub(&z->refs, 1) != 1)
		return;
	if (z->last)
		clReleaseEvent(z->last);
	if (z->q)
		clReleaseCommandQueue(z->q);
	clReleaseContext(z->ctx);
	free(z);
}

void *cmx_zero_context(const struct cmx_server *srv, cl_context ctx)
{
	struct cmx_zero *z = calloc(1, sizeof(*z));

	if (!z)
		return NULL;
	z->srv = srv;
	atomic_init(&z->refs, 1);
	z->ctx = ctx;
	clRetainContext(ctx);
	return z;
}

void *cmx_zero_queue(struct cmx_obj *ctx)
{
	struct zero_queue *zq;

	if (!ctx || ctx->kind != CMX_K_CONTEXT || !ctx->ext)
		return NULL;
	zq = calloc(1, sizeof(*zq));
	if (!zq)
		return NULL;
	zq->z = ctx->ext;
	atomic_fetch_add(&zq->z->refs, 1);
	/* A new queue has nothing of the tenant's before the fills made
	 * already: it is ordered after them at its first command. */
	zq->seen = 0;
	return zq;
}

void cmx_zero_release(struct cmx_obj *o)
{
	if (!o->ext)
		return;
	if (o->kind == CMX_K_CONTEXT) {
		zero_put(o->ext);
	} else if (o->kind == CMX_K_QUEUE) {
		struct zero_queue *zq = o->ext;
		zero_put(zq->z);
		free(zq);
	}
	o->ext = NULL;
}

/* The fills so far have completed (the newest one is released then). */
static int zero_done(struct cmx_zero *z)
{
	cl_int st = CL_QUEUED;

	if (!z->last)
		return 1;
	if (clGetEventInfo(z->last, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, NULL) !=
		CL_SUCCESS ||
	    st > CL_COMPLETE)
		return 0;
	clReleaseEvent(z->last);
	z->last = NULL;
	return 1;
}

static cl_int zero_queue_make(struct cmx_zero *z)
{
	cl_device_id devs[CMX_MAX_DEVICES];
	size_t n = 0;
	cl_int e;

	if (z->q)
		return CL_SUCCESS;
	/* Any device of the context will do: its memory is the context's. */
	e = clGetContextInfo(z->ctx, CL_CONTEXT_DEVICES, sizeof(devs), devs, &n);
	if (e || n < sizeof(devs[0]))
		return e ? e : CL_INVALID_CONTEXT;
	if (z->srv->platform_version >= 200)
		z->q = clCreateCommandQueueWithProperties(z->ctx, devs[0], NULL, &e);
	else
		z->q = clCreateCommandQueue(z->ctx, devs[0], 0, &e);
	return z->q ? CL_SUCCESS : e ? e : CL_OUT_OF_RESOURCES;
}

/* A fill was enqueued (e its status, ev its event): it becomes the newest,
 * and starts. */
static int zero_started(struct cmx_zero *z, cl_int e, cl_event ev)
{
	if (e)
		return e;
	if (z->last)
		clReleaseEvent(z->last);
	z->last = ev;
	z->epoch++;
	cmx_queue_flush(z->srv, z->q);
	return CL_SUCCESS;
}

/*
 * The context's zeroing state, its queue made; NULL with *e the error, or
 * with *e 0 where there is nothing to fill: a driver that runs its queues
 * only inside a flush or a wait (Oclgrind, a simulator) gets no fills. Its
 * runtime keeps every queue's commands in global lists without a lock, and
 * a fill enqueued on the loop while an executor's wait runs a queue
 * corrupted them (a wait that never returned, e2e_printf under load). Its
 * memory is created from zeros instead (cmx_zero_host()).
 */
static struct cmx_zero *zero_ready(struct cmx_obj *ctx, cl_int *e)
{
	struct cmx_zero *z = ctx ? ctx->ext : NULL;

	*e = z ? CL_SUCCESS : CL_OUT_OF_HOST_MEMORY;
	if (!z || z->srv->flush_runs)
		return NULL;
	*e = zero_queue_make(z);
	return *e ? NULL : z;
}

int cmx_zero_host(const struct cmx_server *srv, uint64_t size, const void **zeros)
{
	void *p;

	*zeros = NULL;
	if (!srv->flush_runs || !size)
		return CL_SUCCESS;
	if (size > SIZE_MAX)
		return CL_OUT_OF_HOST_MEMORY;
	/* Never written: every page is the kernel's zero page. */
	p = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return CL_OUT_OF_HOST_MEMORY;
	*zeros = p;
	return CL_SUCCESS;
}

void cmx_zero_host_put(const void *zeros, uint64_t size)
{
	if (zeros)
		munmap((void *)zeros, (size_t)size);
}

int cmx_zero_buffer(struct cmx_obj *ctx, cl_mem m, uint64_t size)
{
	static const unsigned char zeros[128];
	size_t pattern = sizeof(zeros);
	cl_event ev = NULL;
	cl_int e;
	struct cmx_zero *z = zero_ready(ctx, &e);

	if (!z)
		return e;
	/* The widest pattern that divides the size: PoCL fills a pattern at
	 * a time. */
	while (pattern > 1 && size % pattern)
		pattern /= 2;
	e = clEnqueueFillBuffer(z->q, m, zeros, pattern, 0, size, 0, NULL, &ev);
	return zero_started(z, e, ev);
}

int cmx_zero_image(struct cmx_obj *ctx, cl_mem m, const uint64_t extent[3])
{
	/* Zero in every channel type: float 0.0, integer 0. */
	static const cl_uint color[4];
	size_t origin[3] = {0, 0, 0}, region[3];
	cl_event ev = NULL;
	cl_int e;
	struct cmx_zero *z = zero_ready(ctx, &e);

	if (!z)
		return e;
	for (int i = 0; i < 3; i++)
		region[i] = extent[i];
	e = clEnqueueFillImage(z->q, m, color, origin, region, 0, NULL, &ev);
	return zero_started(z, e, ev);
}

int cmx_zero_order(struct cmx_call *c)
{
	struct zero_queue *zq;
	struct cmx_obj *q;
	cl_int e;

	/* Only a command enqueued on the queue touches memory: flushing,
	 * finishing, querying or releasing the queue orders nothing. */
	if (c->oi->queue_use != CMX_QUEUE_ENQUEUE)
		return CL_SUCCESS;
	q = cmx_session_obj(c->s, cmx_call_queue(c)->id, CMX_K_QUEUE);
	zq = q ? q->ext : NULL;
	if (!zq || zq->seen == zq->z->epoch)
		return CL_SUCCESS;
	if (!zero_done(zq->z)) {
		/* The commands after it on this queue wait for the fills;
		 * none of the tenant's own is held up by it. */
		e = clEnqueueBarrierWithWaitList(q->h, 1, &zq->z->last, NULL);
		if (e) {
			/* Never a command that could see unzeroed memory. */
			cmx_warn("session %llu: no barrier after a zero fill (%d)",
				 (unsigned long long)c->s->id, e);
			return CL_OUT_OF_RESOURCES;
		}
	}
	zq->seen = zq->z->epoch;
	return CL_SUCCESS;
}

int cmx_zero_settled(struct cmx_obj *q)
{
	struct zero_queue *zq = q ? q->ext : NULL;

	return !zq || zero_done(zq->z);
}
