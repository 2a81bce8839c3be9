// SPDX-License-Identifier: MIT
// Handlers: buffers and transfers. Payloads arrive staged (c->bulk) and
// leave from staging; staging is freed when the native command completes.
#include "exec.h"
#include "defer.h"
#include "complete.h"
#include "scheduler.h"
#include "land.h"
#include "staging.h"
#include "tenant.h"

#include <stdlib.h>
#include <string.h>

#include "area.h"
#include "clcheck.h"
#include "conn.h"
#include "zero.h"

/* Host-access flags only bind the guest (which enforces them); the daemon
 * itself must be able to read and write every buffer. */
#define HOST_ACCESS (CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS)
#define HOST_PTR    (CL_MEM_USE_HOST_PTR | CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR)

/* The native buffer of a CreateBuffer or CreateBufferArea that passed its
 * checks, charged to the tenant; host_ptr as the native call wants it. */
static int buffer_make(struct cmx_call *c, const struct cmx_ref *id, cl_context ctx,
		       cl_mem_flags flags, uint64_t size, const struct cmx_u64s *props,
		       void *host_ptr, cl_mem *out)
{
	cl_mem_properties p[16];
	struct cmx_obj *o;
	cl_mem m;
	cl_int e;

	/* The tenant's memory quota, before the device sees the request. */
	e = cmx_tenant_may_alloc(c->s->tenant, size);
	if (e)
		return e;
	if (props->n && c->s->srv->platform_version >= 300) {
		size_t n = 0;
		for (uint64_t i = 0; i < props->n && n < 15; i++)
			p[n++] = props->v[i];
		p[n] = 0;
		m = clCreateBufferWithProperties(ctx, p, flags, size, host_ptr, &e);
	} else {
		m = clCreateBuffer(ctx, flags, size, host_ptr, &e);
	}
	if (e)
		return e;
	*out = m;
	if (cmx_session_add(c->s, id->id, CMX_K_MEM, m, ctx, 0, &o)) {
		clReleaseMemObject(m);
		return CL_OUT_OF_HOST_MEMORY;
	}
	o->size = size;
	cmx_session_charge(c->s, o, size);
	return CL_SUCCESS;
}

int cmx_h_CreateBuffer(struct cmx_call *c, struct cmx_CreateBuffer_in *in)
{
	cl_mem_flags flags = in->flags & ~(cl_mem_flags)(HOST_ACCESS | CL_MEM_USE_HOST_PTR);
	const void *zeros = NULL;
	cl_mem m;
	cl_int e;

	if (c->bulk_len && c->bulk_len != in->size)
		return CL_INVALID_VALUE;
	/* A restore that writes every byte of it next, before a guest can
	 * reach it, needs no fill (host/restore.c). */
	if (!c->bulk_len && c->s->restore && c->s->srv->restore_covers(c->s, in->mem.id, in->size)) {
		flags &= ~(cl_mem_flags)CL_MEM_COPY_HOST_PTR;
		e = buffer_make(c, &in->mem, in->context.h, flags, in->size, &in->props, NULL, &m);
		if (!e)
			c->s->srv->restore_unfilled(c->s, in->mem.id, m);
		return e;
	}
	/* Without contents, on a driver that takes no fill: made from zeros. */
	if (!c->bulk_len && (e = cmx_zero_host(c->s->srv, in->size, &zeros)))
		return e;
	/* USE_HOST_PTR lives in the guest; here the contents are copied in. */
	flags = c->bulk_len || zeros ? flags | CL_MEM_COPY_HOST_PTR
				     : flags & ~(cl_mem_flags)CL_MEM_COPY_HOST_PTR;
	e = buffer_make(c, &in->mem, in->context.h, flags, in->size, &in->props,
			c->bulk_len ? c->bulk : (void *)zeros, &m);
	cmx_zero_host_put(zeros, in->size);
	if (e || c->bulk_len || zeros)
		return e;
	/* Without contents it is zeroed before the tenant can read it: the
	 * driver's fresh memory may be another tenant's freed memory. */
	e = cmx_zero_buffer(cmx_session_obj(c->s, in->context.id, CMX_K_CONTEXT), m, in->size);
	if (e)
		cmx_session_release(c->s, in->mem.id, CMX_K_MEM);
	return e;
}

int cmx_buffer_range(struct cmx_call *c, uint64_t id, uint64_t off, uint64_t size)
{
	struct cmx_obj *m = cmx_session_obj(c->s, id, CMX_K_MEM);

	if (!m || m->ext)
		return CL_INVALID_MEM_OBJECT;
	return cmx_cl_range_bad(off, size, m->size) ? CL_INVALID_VALUE : CL_SUCCESS;
}

int cmx_h_CreateSubBuffer(struct cmx_call *c, struct cmx_CreateSubBuffer_in *in)
{
	cl_buffer_region r = {in->origin, in->size};
	struct cmx_obj *parent = cmx_session_obj(c->s, in->parent.id, CMX_K_MEM), *o;
	cl_int e = cmx_buffer_range(c, in->parent.id, in->origin, in->size);
	cl_mem m;

	if (e)
		return e;
	m = clCreateSubBuffer(in->parent.h, in->flags & ~(cl_mem_flags)HOST_ACCESS,
			      CL_BUFFER_CREATE_TYPE_REGION, &r, NULL);
	if (!m) {
		m = clCreateSubBuffer(in->parent.h, in->flags & ~(cl_mem_flags)HOST_ACCESS,
				      CL_BUFFER_CREATE_TYPE_REGION, &r, &e);
		return e ? e : CL_INVALID_VALUE;
	}
	if (cmx_session_add(c->s, in->mem.id, CMX_K_MEM, m, parent ? parent->ctx : NULL, 0, &o)) {
		clReleaseMemObject(m);
		return CL_OUT_OF_HOST_MEMORY;
	}
	o->size = in->size;
	return CL_SUCCESS;
}

int cmx_h_ReleaseMem(struct cmx_call *c, struct cmx_ReleaseMem_in *in)
{
	cmx_area_maps_drop(c->s, in->mem.id);
	cmx_session_release(c->s, in->mem.id, CMX_K_MEM);
	return CL_SUCCESS;
}

struct destructor_note {
	struct cmx_server *srv;
	uint64_t session, tag;
};

static void destructor_post(void *arg)
{
	struct destructor_note *n = arg;
	struct cmx_session *s;

	for (s = n->srv->sessions; s && s->id != n->session; s = s->next)
		;
	if (s && !s->closed) {
		struct cmx_MemDestroyed_in in = {.tag = n->tag};
		cmx_call_notify(s, &cmx_desc_MemDestroyed_in, &in, NULL, 0, NULL);
	}
	free(n);
}

static void CL_CALLBACK destructor_cb(cl_mem m, void *arg)
{
	struct destructor_note *n = arg;

	cmx_loop_post(n->srv->loop, destructor_post, n);
}

int cmx_h_SetMemDestructor(struct cmx_call *c, struct cmx_SetMemDestructor_in *in)
{
	struct destructor_note *n = malloc(sizeof(*n));
	cl_int e;

	if (!n)
		return CL_OUT_OF_HOST_MEMORY;
	n->srv = c->s->srv;
	n->session = c->s->id;
	n->tag = in->tag;
	e = clSetMemObjectDestructorCallback(in->mem.h, destructor_cb, n);
	if (e)
		free(n);
	return e;
}

int cmx_h_GetMemInfo(struct cmx_call *c, struct cmx_GetMemInfo_in *in,
		     struct cmx_GetMemInfo_out *out)
{
	return CMX_INFO(c, &out->value, clGetMemObjectInfo, in->mem.h, (cl_uint)in->param);
}

static void free_staging(void *arg, cl_int status)
{
	cmx_staging_put(arg);
}

/* A sync command's native event: bound to the guest's id, and the call
 * replies when it completes. */
static int bind_wait(struct cmx_call *c, cl_event ev, const struct cmx_ref *guest_ev)
{
	int e;

	clRetainEvent(ev);
	cmx_event_bind(c, guest_ev, ev);
	e = cmx_defer_wait(c, ev, NULL);
	clReleaseEvent(ev);
	return e;
}

/* Enqueues the native write of a staged payload; the staging is freed when
 * the write completes. With `sync`, the call replies then. */
static int write_staged(struct cmx_call *c, cl_int e, cl_event ev, const struct cmx_ref *guest_ev,
			int sync)
{
	if (e)
		return e;
	if (sync)
		return bind_wait(c, ev, guest_ev); /* the staging goes with the call */
	if (c->bulk) { /* not already taken (host/exec_pinned.c) */
		e = cmx_complete_when(c->s->srv, ev, free_staging, c->bulk);
		if (e == CL_SUCCESS)
			c->bulk = NULL;
		else
			clWaitForEvents(1, &ev); /* cannot free early: keep it correct */
	}
	cmx_event_bind(c, guest_ev, ev);
	return CL_SUCCESS;
}

static int write_buffer(struct cmx_call *c, struct cmx_WriteBuffer_in *in, int sync)
{
	struct cmx_land *land = cmx_land_take(c);
	cl_event ev;
	cl_int e = c->bulk_len != in->size ? CL_INVALID_VALUE
					   : cmx_buffer_range(c, in->mem.id, in->offset, in->size);

	if (e) {
		cmx_land_abort(land);
		return e;
	}
	if (land) {
		/* The payload is in the buffer already (host/land.c). */
		e = cmx_land_finish(land, in->queue.h, in->mem.h, in->offset, in->size,
				    WAIT(in->wait), &ev);
		return write_staged(c, e, ev, &in->event, sync);
	}
	e = cmx_pinned_write(c, in->queue.h, in->mem.h, in->offset, in->size, WAIT(in->wait), &ev);
	if (e == CMX_PINNED_NO)
		e = clEnqueueWriteBuffer(in->queue.h, in->mem.h, CL_FALSE, in->offset, in->size,
					 c->bulk, WAIT(in->wait), &ev);
	return write_staged(c, e, ev, &in->event, sync);
}

int cmx_h_WriteBuffer(struct cmx_call *c, struct cmx_WriteBuffer_in *in,
		      struct cmx_WriteBuffer_out *out)
{
	return write_buffer(c, in, c->sync);
}

int cmx_buffer_rect(struct cmx_call *c, uint64_t id, const struct cmx_u64s *origin,
		    const struct cmx_u64s *region, size_t o[3], size_t r[3], size_t *row,
		    size_t *slice)
{
	size_t end;
	cl_int e = cmx_buffer_range(c, id, 0, 0);

	if (e)
		return e;
	if (origin->n != 3 || region->n != 3)
		return CL_INVALID_VALUE;
	for (int i = 0; i < 3; i++) {
		o[i] = origin->v[i];
		r[i] = region->v[i];
	}
	if (!r[0] || !r[1] || !r[2] || cmx_cl_rect_pitches_bad(r, row, slice) ||
	    cmx_cl_rect_end(o, r, *row, *slice, &end) || cmx_buffer_range(c, id, 0, end))
		return CL_INVALID_VALUE;
	return CL_SUCCESS;
}

static int write_rect(struct cmx_call *c, struct cmx_WriteBufferRect_in *in, int sync)
{
	size_t o[3], r[3], zero[3] = {0, 0, 0}, row = in->row_pitch, slice = in->slice_pitch;
	cl_event ev;
	cl_int e = cmx_buffer_rect(c, in->mem.id, &in->origin, &in->region, o, r, &row, &slice);

	if (e)
		return e;
	if (c->bulk_len != r[0] * r[1] * r[2])
		return CL_INVALID_VALUE;
	e = clEnqueueWriteBufferRect(in->queue.h, in->mem.h, CL_FALSE, o, zero, r, row, slice, r[0],
				     r[0] * r[1], c->bulk, WAIT(in->wait), &ev);
	return write_staged(c, e, ev, &in->event, sync);
}

int cmx_h_WriteBufferRect(struct cmx_call *c, struct cmx_WriteBufferRect_in *in,
			  struct cmx_WriteBufferRect_out *out)
{
	return write_rect(c, in, c->sync);
}

/* Reads land in staging; a sync call replies with it, an async one sends it
 * as ReadDone(tag) on the notification channel. */
static void read_done_sync(struct cmx_call *c, int status)
{
	if (status != CL_SUCCESS) {
		c->rbulk_free(c->rbulk);
		c->rbulk = NULL;
		c->rbulk_free = NULL;
	}
	cmx_call_done(c, status < 0 ? status : CL_SUCCESS);
}

static void read_done_async(struct cmx_call *c, int status)
{
	struct cmx_ReadDone_in n = {.tag = cmx_call_tag(c), .status = status < 0 ? status : 0};

	cmx_call_notify(c->s, &cmx_desc_ReadDone_in, &n, c->rbulk, status < 0 ? 0 : c->rbulk_len,
			c->rbulk_free);
	c->rbulk = NULL;
	c->rbulk_free = NULL;
	cmx_call_done(c, CL_SUCCESS);
}

static int read_staged(struct cmx_call *c, cl_int e, cl_event ev, const struct cmx_ref *guest_ev,
		       int sync)
{
	if (e) {
		cmx_staging_put(c->rbulk);
		c->rbulk = NULL;
		return e;
	}
	c->rbulk_free = cmx_staging_put;
	clRetainEvent(ev);
	cmx_event_bind(c, guest_ev, ev);
	e = sync ? cmx_defer_wait(c, ev, read_done_sync) : cmx_defer_event(c, ev, read_done_async);
	clReleaseEvent(ev);
	return e;
}

static void *staging(struct cmx_call *c, uint64_t size)
{
	/* The guest's shared area block when it gave one: no staging copy. */
	return cmx_call_read_buffer(c, size);
}

/* A large read on a CPU device, sent from the mapped buffer (host/land.c):
 * the reply (or ReadDone) leaves when the map completes; the guest's event
 * is the unmap's, which waits until the data has left. */
static int read_mapped(struct cmx_call *c, struct cmx_ReadBuffer_in *in, int sync, int *e)
{
	cl_event map_ev, done_ev;

	if (c->area_out || in->size < CMX_LAND_MIN ||
	    cmx_land_read(c, in->queue.h, in->mem.h, in->offset, in->size, WAIT(in->wait), &map_ev,
			  &done_ev))
		return 0;
	cmx_event_bind(c, &in->event, done_ev);
	*e = sync ? cmx_defer_wait(c, map_ev, read_done_sync)
		  : cmx_defer_event(c, map_ev, read_done_async);
	clReleaseEvent(map_ev);
	return 1;
}

static int read_buffer(struct cmx_call *c, struct cmx_ReadBuffer_in *in, int sync)
{
	cl_event ev;
	void *dst;
	int e = cmx_buffer_range(c, in->mem.id, in->offset, in->size);

	if (e)
		return e;
	if (read_mapped(c, in, sync, &e))
		return e;
	e = cmx_pinned_read(c, in->queue.h, in->mem.h, in->offset, in->size, WAIT(in->wait),
			    &in->event, sync ? read_done_sync : read_done_async);
	if (e != CMX_PINNED_NO)
		return e;
	dst = staging(c, in->size);
	if (!dst)
		return CL_OUT_OF_HOST_MEMORY;
	/* A small one blocking where the driver's are short: NVIDIA's
	 * non-blocking read into pageable memory completes ~6 us after its
	 * blocking one would have returned (docs/gpu.md). */
	e = clEnqueueReadBuffer(in->queue.h, in->mem.h,
				sync && cmx_exec_block_short(c, in->size, in->wait.n), in->offset,
				in->size, dst, WAIT(in->wait), &ev);
	return read_staged(c, e, ev, &in->event, sync);
}

int cmx_h_ReadBuffer(struct cmx_call *c, struct cmx_ReadBuffer_in *in,
		     struct cmx_ReadBuffer_out *out)
{
	return read_buffer(c, in, c->sync);
}

static int read_rect(struct cmx_call *c, struct cmx_ReadBufferRect_in *in, int sync)
{
	size_t o[3], r[3], zero[3] = {0, 0, 0}, row = in->row_pitch, slice = in->slice_pitch;
	cl_event ev;
	cl_int e = cmx_buffer_rect(c, in->mem.id, &in->origin, &in->region, o, r, &row, &slice);
	void *dst;

	if (e)
		return e;
	dst = staging(c, r[0] * r[1] * r[2]);
	if (!dst)
		return CL_OUT_OF_HOST_MEMORY;
	e = clEnqueueReadBufferRect(in->queue.h, in->mem.h, CL_FALSE, o, zero, r, row, slice, r[0],
				    r[0] * r[1], dst, WAIT(in->wait), &ev);
	return read_staged(c, e, ev, &in->event, sync);
}

int cmx_h_ReadBufferRect(struct cmx_call *c, struct cmx_ReadBufferRect_in *in,
			 struct cmx_ReadBufferRect_out *out)
{
	return read_rect(c, in, c->sync);
}

/* Copies and fills take the device like kernels: scheduled (host/scheduler.c). */
int cmx_h_CopyBuffer(struct cmx_call *c, struct cmx_CopyBuffer_in *in)
{
	struct cmx_sched_cmd sc;
	cl_event ev = NULL;
	cl_int e = cmx_buffer_range(c, in->src.id, in->src_offset, in->size);

	if (e || (e = cmx_buffer_range(c, in->dst.id, in->dst_offset, in->size)) ||
	    (e = cmx_sched_begin(c, (cl_uint)in->wait.n, in->wait.h, &sc)))
		return e;
	e = clEnqueueCopyBuffer(in->queue.h, in->src.h, in->dst.h, in->src_offset, in->dst_offset,
				in->size, CMX_SCHED_WAIT(sc), &ev);
	cmx_sched_end(&sc, e, ev);
	if (!e)
		cmx_event_bind(c, &in->event, ev);
	return e;
}

int cmx_h_CopyBufferRect(struct cmx_call *c, struct cmx_CopyBufferRect_in *in)
{
	size_t so[3], dO[3], r[3], srow = in->src_row_pitch, sslice = in->src_slice_pitch;
	size_t drow = in->dst_row_pitch, dslice = in->dst_slice_pitch;
	struct cmx_sched_cmd sc;
	cl_event ev = NULL;
	cl_int e =
	    cmx_buffer_rect(c, in->src.id, &in->src_origin, &in->region, so, r, &srow, &sslice);

	if (e ||
	    (e = cmx_buffer_rect(c, in->dst.id, &in->dst_origin, &in->region, dO, r, &drow,
				 &dslice)) ||
	    (e = cmx_sched_begin(c, (cl_uint)in->wait.n, in->wait.h, &sc)))
		return e;
	e = clEnqueueCopyBufferRect(in->queue.h, in->src.h, in->dst.h, so, dO, r, srow, sslice,
				    drow, dslice, CMX_SCHED_WAIT(sc), &ev);
	cmx_sched_end(&sc, e, ev);
	if (!e)
		cmx_event_bind(c, &in->event, ev);
	return e;
}

int cmx_h_FillBuffer(struct cmx_call *c, struct cmx_FillBuffer_in *in)
{
	uint64_t p = in->pattern.len;
	struct cmx_sched_cmd sc;
	cl_event ev = NULL;
	cl_int e = cmx_buffer_range(c, in->mem.id, in->offset, in->size);

	/* A pattern of 1 to 128 bytes, a power of two, the range a whole
	 * number of patterns. */
	if (!e && (!p || p > 128 || (p & (p - 1)) || in->offset % p || in->size % p))
		e = CL_INVALID_VALUE;
	if (e || (e = cmx_sched_begin(c, (cl_uint)in->wait.n, in->wait.h, &sc)))
		return e;
	e = clEnqueueFillBuffer(in->queue.h, in->mem.h, in->pattern.ptr, in->pattern.len,
				in->offset, in->size, CMX_SCHED_WAIT(sc), &ev);
	cmx_sched_end(&sc, e, ev);
	if (!e)
		cmx_event_bind(c, &in->event, ev);
	return e;
}

int cmx_h_MigrateMem(struct cmx_call *c, struct cmx_MigrateMem_in *in)
{
	cl_event ev;
	cl_int e =
	    clEnqueueMigrateMemObjects(in->queue.h, (cl_uint)in->mems.n, (const cl_mem *)in->mems.h,
				       in->flags, WAIT(in->wait), &ev);

	if (!e)
		cmx_event_bind(c, &in->event, ev);
	return e;
}

/* ---- buffers in the shared area (CL_MEM_ALLOC_HOST_PTR, zero-copy) ---- */

/* The native object is gone, and with it every command that used the
 * block: the guest may have it back (driver thread). */
static void CL_CALLBACK area_buffer_gone(cl_mem m, void *blk)
{
	cmx_area_release(blk);
}

int cmx_h_CreateBufferArea(struct cmx_call *c, struct cmx_CreateBufferArea_in *in)
{
	cl_mem_flags flags =
	    (in->flags & ~(cl_mem_flags)(HOST_ACCESS | HOST_PTR)) | CL_MEM_USE_HOST_PTR;
	cl_mem m;
	cl_int e;

	/* The storage must be the guest's block: conn.c took it, bounds
	 * checked, and holds the area for it. A payload in the stream is
	 * staging and would vanish under the buffer. */
	if (!c->bulk || !cmx_area_holds(c->s->area, c->bulk, c->bulk_len))
		return CL_INVALID_OPERATION;
	if (c->bulk_len != in->size)
		return CL_INVALID_VALUE;
	e = buffer_make(c, &in->mem, in->context.h, flags, in->size, &in->props, c->bulk, &m);
	if (e)
		return e; /* the block goes back with the call */
	/* From here the block is the buffer's until the native object is
	 * destroyed, after the last command that uses it. */
	e = clSetMemObjectDestructorCallback(m, area_buffer_gone, c->bulk);
	if (e) {
		cmx_session_release(c->s, in->mem.id, CMX_K_MEM);
		return e;
	}
	c->bulk = NULL;
	return CL_SUCCESS;
}

/* Where [off, off + size) of an area buffer (or a sub-buffer of one) lies
 * in this host's mapping; NULL when m's storage is not in the session's
 * area or the range is not in m. */
static void *area_ptr(struct cmx_call *c, cl_mem m, uint64_t off, uint64_t size)
{
	void *hp = NULL;
	size_t len = 0;

	if (clGetMemObjectInfo(m, CL_MEM_HOST_PTR, sizeof(hp), &hp, NULL) ||
	    clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof(len), &len, NULL) || !hp ||
	    !cmx_area_holds(c->s->area, hp, len) || off > len || size > len - off)
		return NULL;
	return (char *)hp + off;
}

/*
 * A native map of an area buffer that the guest has not unmapped. The
 * driver holds a mapped buffer (and so the area block under it) until it is
 * unmapped, so the maps a guest leaves behind are unmapped for it when it
 * releases the buffer or goes away.
 */
struct cmx_amap {
	const struct cmx_server *srv;
	uint64_t mem; /* the guest's id */
	cl_command_queue q;
	cl_mem m;
	void *ptr;
	struct cmx_amap *next;
};

static void amap_end(struct cmx_amap *a, int unmap)
{
	if (unmap && !clEnqueueUnmapMemObject(a->q, a->m, a->ptr, 0, NULL, NULL))
		cmx_queue_flush(a->srv, a->q);
	clReleaseMemObject(a->m);
	clReleaseCommandQueue(a->q);
	free(a);
}

void cmx_area_maps_drop(struct cmx_session *s, uint64_t mem)
{
	struct cmx_amap **pp = &s->amaps;

	while (*pp) {
		struct cmx_amap *a = *pp;

		if (mem && a->mem != mem) {
			pp = &a->next;
			continue;
		}
		*pp = a->next;
		amap_end(a, 1);
	}
}

static int amap_add(struct cmx_session *s, uint64_t mem, cl_command_queue q, cl_mem m, void *ptr)
{
	struct cmx_amap *a = malloc(sizeof(*a));

	if (!a)
		return CL_OUT_OF_HOST_MEMORY;
	*a = (struct cmx_amap){.srv = s->srv, .mem = mem, .q = q, .m = m, .ptr = ptr, .next = s->amaps};
	clRetainCommandQueue(q);
	clRetainMemObject(m);
	s->amaps = a;
	return CL_SUCCESS;
}

/* The guest's map of mem at ptr, taken off the list; NULL when none. */
static struct cmx_amap *amap_take(struct cmx_session *s, uint64_t mem, const void *ptr)
{
	for (struct cmx_amap **pp = &s->amaps; *pp; pp = &(*pp)->next)
		if ((*pp)->mem == mem && (*pp)->ptr == ptr) {
			struct cmx_amap *a = *pp;
			*pp = a->next;
			return a;
		}
	return NULL;
}

static int map_buffer(struct cmx_call *c, struct cmx_MapBuffer_in *in, int sync)
{
	void *want = area_ptr(c, in->mem.h, in->offset, in->size), *p;
	cl_event ev;
	cl_int e;

	if (!want)
		return CL_INVALID_MEM_OBJECT;
	p = clEnqueueMapBuffer(in->queue.h, in->mem.h, CL_FALSE, in->flags, in->offset, in->size,
			       WAIT(in->wait), &ev, &e);
	if (e)
		return e;
	/* The spec derives a USE_HOST_PTR buffer's map from its host pointer;
	 * a driver that maps elsewhere cannot share it. */
	e = p == want ? amap_add(c->s, in->mem.id, in->queue.h, in->mem.h, p) : CL_MAP_FAILURE;
	if (e) {
		clEnqueueUnmapMemObject(in->queue.h, in->mem.h, p, 1, &ev, NULL);
		clReleaseEvent(ev);
		return e;
	}
	/* What the guest writes into a map of its area buffer is received
	 * without a message: the tenant's rate counts the region, and its
	 * next call (the unmap) waits as a socket's bytes would make it. */
	if ((in->flags & (CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION)) && c->s->conn)
		cmx_conn_rate_charge(c->s->conn, in->size);
	if (sync)
		return bind_wait(c, ev, &in->event);
	cmx_event_bind(c, &in->event, ev);
	return CL_SUCCESS;
}

int cmx_h_MapBuffer(struct cmx_call *c, struct cmx_MapBuffer_in *in,
		     struct cmx_MapBuffer_out *out)
{
	return map_buffer(c, in, c->sync);
}

int cmx_h_UnmapBuffer(struct cmx_call *c, struct cmx_UnmapBuffer_in *in)
{
	void *p = area_ptr(c, in->mem.h, in->offset, 1);
	struct cmx_amap *a;
	cl_event ev;
	cl_int e;

	if (!p)
		return CL_INVALID_MEM_OBJECT;
	a = amap_take(c->s, in->mem.id, p);
	if (!a)
		return CL_INVALID_VALUE; /* not mapped there */
	e = clEnqueueUnmapMemObject(in->queue.h, in->mem.h, p, WAIT(in->wait), &ev);
	if (e) {
		a->next = c->s->amaps; /* still mapped */
		c->s->amaps = a;
		return e;
	}
	amap_end(a, 0);
	cmx_event_bind(c, &in->event, ev);
	return CL_SUCCESS;
}

/* For the other payload handlers (host/exec_image.c). */
int cmx_write_staged(struct cmx_call *c, cl_int e, cl_event ev, const struct cmx_ref *guest_ev,
		     int sync)
{
	return write_staged(c, e, ev, guest_ev, sync);
}

int cmx_read_staged(struct cmx_call *c, cl_int e, cl_event ev, const struct cmx_ref *guest_ev,
		    int sync)
{
	return read_staged(c, e, ev, guest_ev, sync);
}
