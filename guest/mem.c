// SPDX-License-Identifier: MIT
// Buffer objects: flags, creation, sub-buffers, lifetime, queries, copies
// and fills; the pipe and SVM entry points answer as a device without
// those capabilities.
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "area.h"
#include "entry.h"
#include "icd.h"
#include "mem.h"

/*
 * Everything the spec requires to fail synchronously is decided here, from
 * the sizes and flags the guest keeps: the daemon hears only of commands
 * that pass, and non-blocking ones travel without a round trip.
 */

#define ACCESS_FLAGS	  (CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY | CL_MEM_READ_ONLY)
#define HOST_ACCESS_FLAGS (CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS)
#define HOST_PTR_FLAGS	  (CL_MEM_USE_HOST_PTR | CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR)

void cmx_mem_destructor_fired(uint64_t tag);

/* A destructor as the daemon knows it: the tag is this struct's address,
 * which is also that of the cmx_destructor (first member). */
struct mem_destructor {
	struct cmx_destructor d;
	cl_mem mem;
};

static size_t align_bytes(cl_device_id d)
{
	return d->mem_base_addr_align >= 8 ? d->mem_base_addr_align / 8 : 1;
}

static int at_most_one(cl_mem_flags f)
{
	return !(f & (f - 1));
}

/* ---- flags and checks shared by the entry points ---- */

cl_int cmx_mem_flags_check(cl_mem_flags f)
{
	if (f & ~(cl_mem_flags)(ACCESS_FLAGS | HOST_ACCESS_FLAGS | HOST_PTR_FLAGS))
		return CL_INVALID_VALUE;
	if (!at_most_one(f & ACCESS_FLAGS) || !at_most_one(f & HOST_ACCESS_FLAGS))
		return CL_INVALID_VALUE;
	if ((f & CL_MEM_USE_HOST_PTR) && (f & (CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR)))
		return CL_INVALID_VALUE;
	return CL_SUCCESS;
}

/* A sub-buffer's flags may narrow its parent's, never widen them; what they
 * leave out (and the host pointer flags) it inherits. */
static cl_int sub_flags(cl_mem_flags pf, cl_mem_flags f, cl_mem_flags *out)
{
	if (cmx_mem_flags_check(f) || (f & HOST_PTR_FLAGS))
		return CL_INVALID_VALUE;
	if (((pf & CL_MEM_WRITE_ONLY) && (f & (CL_MEM_READ_WRITE | CL_MEM_READ_ONLY))) ||
	    ((pf & CL_MEM_READ_ONLY) && (f & (CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY))) ||
	    ((pf & CL_MEM_HOST_WRITE_ONLY) && (f & CL_MEM_HOST_READ_ONLY)) ||
	    ((pf & CL_MEM_HOST_READ_ONLY) && (f & CL_MEM_HOST_WRITE_ONLY)) ||
	    ((pf & CL_MEM_HOST_NO_ACCESS) &&
	     (f & (CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_WRITE_ONLY))))
		return CL_INVALID_VALUE;
	if (!(f & ACCESS_FLAGS))
		f |= pf & ACCESS_FLAGS;
	if (!(f & HOST_ACCESS_FLAGS))
		f |= pf & HOST_ACCESS_FLAGS;
	*out = f | (pf & HOST_PTR_FLAGS);
	return CL_SUCCESS;
}

/* The checks every buffer command starts with. */
cl_int cmx_mem_check(cl_command_queue q, cl_mem m)
{
	if (!CMX_IS(q, CMX_MAGIC_QUEUE))
		return CL_INVALID_COMMAND_QUEUE;
	if (!CMX_IS(m, CMX_MAGIC_MEM) || m->type != CL_MEM_OBJECT_BUFFER)
		return CL_INVALID_MEM_OBJECT;
	if (m->ctx != q->ctx)
		return CL_INVALID_CONTEXT;
	if (m->parent && m->origin % align_bytes(q->device))
		return CL_MISALIGNED_SUB_BUFFER_OFFSET;
	return CL_SUCCESS;
}

/* CL_MEM_HOST_*: what the application promised not to do from the host. */
cl_int cmx_mem_host_access(cl_mem m, int reads, int writes)
{
	if (reads && (m->flags & (CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_NO_ACCESS)))
		return CL_INVALID_OPERATION;
	if (writes && (m->flags & (CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS)))
		return CL_INVALID_OPERATION;
	return CL_SUCCESS;
}

/* ---- buffers in the shared area: maps are the daemon's native ones ---- */

/*
 * Which buffers live in the heap: those created with ALLOC_HOST_PTR, and,
 * where every device of the context is a CPU (whose driver keeps a host
 * pointer as the storage, so kernels run on the very same pages), large
 * plain ones too: their transfers then copy once instead of twice. A GPU
 * would copy or pin such memory, so there only ALLOC_HOST_PTR asks for it.
 */
#define HEAP_PLAIN_MIN (1u << 20)

static int in_heap(cl_context ctx, cl_mem_flags flags, size_t size)
{
	if (flags & CL_MEM_USE_HOST_PTR)
		return 0;
	if (flags & CL_MEM_ALLOC_HOST_PTR)
		return 1;
	if (size < HEAP_PLAIN_MIN)
		return 0;
	/* Only a device that is a CPU and nothing else (Oclgrind calls itself
	 * every type) works in host memory. */
	for (cl_uint i = 0; i < ctx->ndevices; i++)
		if ((ctx->devices[i]->type & ~(cl_device_type)CL_DEVICE_TYPE_DEFAULT) !=
		    CL_DEVICE_TYPE_CPU)
			return 0;
	return 1;
}

/* Maps [off, off + size) of an area buffer natively: blocking, the bytes
 * are the buffer's on return; otherwise once the command's event is. */
cl_int cmx_mem_area_map(cl_command_queue q, cl_mem m, cl_bool blocking, cl_map_flags flags,
			size_t off, size_t size, struct cmx_cmd *c)
{
	struct cmx_MapBuffer_in in = {.queue = {q->id},
				      .mem = {m->id},
				      .flags = flags,
				      .offset = off,
				      .size = size,
				      .wait = CMD_WAIT(c),
				      .event = {c->ev_id}};
	struct cmx_MapBuffer_out out;
	struct cmx_reply r;

	if (!blocking)
		return CMX_SEND(MapBuffer, &in);
	return cmx_reply_status(cmx_rpc_MapBuffer(cmx_icd.s, &in, &out, &r), &r);
}

cl_int cmx_mem_area_unmap(cl_command_queue q, cl_mem m, size_t off, struct cmx_cmd *c)
{
	struct cmx_UnmapBuffer_in in = {.queue = {q->id},
					.mem = {m->id},
					.offset = off,
					.wait = CMD_WAIT(c),
					.event = {c->ev_id}};

	return CMX_SEND(UnmapBuffer, &in);
}

/* ---- creation and lifetime ---- */

/* Bytes of the process's buffers (not sub-buffers) not yet freed. */
static _Atomic uint64_t live_bytes;

cl_mem cmx_mem_new(cl_context ctx, cl_mem_flags flags, size_t size)
{
	cl_mem m = cmx_object_new(sizeof(*m), CMX_MAGIC_MEM);

	if (!m)
		return NULL;
	m->ctx = ctx;
	m->type = CL_MEM_OBJECT_BUFFER;
	m->flags = flags;
	m->size = size;
	atomic_init(&m->map_count, 0);
	pthread_mutex_init(&m->lock, NULL);
	return m;
}

/* The last of the struct: no reference and no destructor left to run. */
void cmx_mem_free(cl_mem m)
{
	/* The storage is reused once the daemon's native buffer is gone too
	 * (a lost session's heap is never used again). */
	if (m->area_off && !m->parent && !m->image && m->heap)
		cmx_garea_heap_free(m->heap, m->area_off, 1);
	if (m->type == CL_MEM_OBJECT_BUFFER && !m->parent)
		atomic_fetch_sub(&live_bytes, m->size);
	while (m->maps) {
		struct cmx_mapping *mp = m->maps;

		m->maps = mp->next;
		cmx_mapping_drop(mp);
	}
	free(m->spare);
	pthread_mutex_destroy(&m->lock);
	free(m->image);
	free(m->props);
	free(m);
}

/*
 * A buffer in the heap (in_heap()): its storage is a block of the shared
 * area, which the daemon makes the native buffer's host pointer, so that
 * maps move no data and large blocking transfers copy once. Without a
 * heap, or with no room in it, the buffer is an ordinary one.
 */
/*
 * Room that released buffers still hold (clpeak releases a 512 MiB buffer
 * and creates the next at once): their releases left with this process's
 * last call but the daemon may not have destroyed them yet. A round trip
 * sent after them (the context's creation status) sees them handled; a
 * driver that runs the destructor a little later gets a few more looks.
 */
#define RECLAIM_TRIES 20
#define RECLAIM_WAIT_US 1000

static uint64_t heap_alloc_reclaim(struct cmx_garea *heap, const struct cmx_CreateBuffer_in *in)
{
	uint64_t off = cmx_garea_heap_alloc(heap, in->size);

	for (int i = 0; !off && i < RECLAIM_TRIES && cmx_garea_heap_pending(heap) >= in->size;
	     i++) {
		if (i) {
			usleep(RECLAIM_WAIT_US);
		} else {
			struct cmx_GetCreateStatus_in st = {.object = in->context.id};
			struct cmx_GetCreateStatus_out out;
			struct cmx_reply r;

			(void)cmx_rpc_GetCreateStatus(cmx_icd.s, &st, &out, &r);
		}
		off = cmx_garea_heap_alloc(heap, in->size);
	}
	return off;
}

static cl_int area_buffer_create(cl_mem m, const struct cmx_CreateBuffer_in *in,
				 const void *host_ptr)
{
	struct cmx_session *s = cmx_icd.s;
	struct cmx_garea *heap = cmx_session_heap(s);
	struct cmx_CreateBufferArea_in a = {
	    .mem = in->mem, .context = in->context, .flags = in->flags, .size = in->size};
	uint64_t off = heap ? heap_alloc_reclaim(heap, in) : 0;

	if (!off)
		return CMX_SEND(CreateBuffer, in, host_ptr, host_ptr ? in->size : 0);
	/* COPY_HOST_PTR: the contents are the block's when the call goes. */
	if (host_ptr)
		memcpy(heap->base + off, host_ptr, in->size);
	if (cmx_session_send_block(s, &cmx_desc_CreateBufferArea_in, &a, off, in->size)) {
		cmx_garea_heap_free(heap, off, 0);
		return CL_OUT_OF_RESOURCES;
	}
	m->area_off = off;
	m->heap = heap;
	return CL_SUCCESS;
}

/*
 * Creation is asynchronous (the guest checked what the specification lets
 * it), but the device's free memory and the tenant's quota are the
 * daemon's to judge. A buffer of SYNC_CREATE_MIN bytes or more, or one that
 * brings the process's buffers past a device's CL_DEVICE_MAX_MEM_ALLOC_SIZE
 * (a tenant's quota caps it), is confirmed before the call returns, so a
 * refusal is the call's error as natively, not a poisoned id found at first
 * use. Smaller ones stay one-way.
 */
#define SYNC_CREATE_MIN (1u << 20)

static int create_may_fail(cl_context ctx, size_t size, uint64_t live)
{
	if (size >= SYNC_CREATE_MIN)
		return 1;
	for (cl_uint i = 0; i < ctx->ndevices; i++)
		if (ctx->devices[i]->max_alloc && live > ctx->devices[i]->max_alloc)
			return 1;
	return 0;
}

/* The daemon's word on m's creation: 0, or the error it failed with (its id
 * then forgotten there too). */
static cl_int create_confirm(cl_mem m)
{
	struct cmx_GetCreateStatus_in in = {.object = m->id};
	struct cmx_GetCreateStatus_out out;
	struct cmx_ReleaseMem_in rel = {.mem = {m->id}};
	struct cmx_reply r;
	cl_int e;

	e = cmx_reply_status(cmx_rpc_GetCreateStatus(cmx_icd.s, &in, &out, &r), &r);
	if (e)
		(void)CMX_SEND(ReleaseMem, &rel);
	return e;
}

static cl_mem buffer_create(cl_context ctx, const cl_mem_properties *props, cl_mem_flags flags,
			    size_t size, void *host_ptr, cl_int *errcode_ret)
{
	int has_host = (flags & (CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR)) != 0;
	struct cmx_CreateBuffer_in in;
	cl_ulong max_alloc = 0;
	uint64_t live;
	cl_mem m;
	cl_int e;

	if (!CMX_IS(ctx, CMX_MAGIC_CONTEXT))
		return cmx_fail(errcode_ret, CL_INVALID_CONTEXT);
	/* No buffer property is supported: only an empty list passes. */
	if (props && props[0])
		return cmx_fail(errcode_ret, CL_INVALID_PROPERTY);
	if (cmx_mem_flags_check(flags))
		return cmx_fail(errcode_ret, CL_INVALID_VALUE);
	for (cl_uint i = 0; i < ctx->ndevices; i++)
		if (ctx->devices[i]->max_alloc > max_alloc)
			max_alloc = ctx->devices[i]->max_alloc;
	if (!size || (max_alloc && size > max_alloc))
		return cmx_fail(errcode_ret, CL_INVALID_BUFFER_SIZE);
	if (has_host != (host_ptr != NULL))
		return cmx_fail(errcode_ret, CL_INVALID_HOST_PTR);

	m = cmx_mem_new(ctx, flags, size);
	if (!m)
		return cmx_fail(errcode_ret, CL_OUT_OF_HOST_MEMORY);
	/* Counted from here: cmx_mem_free() takes it off. */
	live = atomic_fetch_add(&live_bytes, size) + size;
	if (props) {
		m->props = calloc(1, sizeof(*m->props));
		m->nprops = 1;
		if (!m->props) {
			cmx_mem_free(m);
			return cmx_fail(errcode_ret, CL_OUT_OF_HOST_MEMORY);
		}
	}
	if (flags & CL_MEM_USE_HOST_PTR)
		m->host_ptr = host_ptr;

	/* The contents travel with the creation; for USE_HOST_PTR the daemon
	 * keeps a copy and the guest syncs host_ptr at map/unmap. */
	in = (struct cmx_CreateBuffer_in){
	    .mem = {m->id}, .context = {ctx->id}, .flags = flags, .size = size};
	if (in_heap(ctx, flags, size))
		e = area_buffer_create(m, &in, has_host ? host_ptr : NULL);
	else
		e = CMX_SEND(CreateBuffer, &in, has_host ? host_ptr : NULL, has_host ? size : 0);
	if (!e && create_may_fail(ctx, size, live))
		e = create_confirm(m);
	if (e) {
		cmx_mem_free(m);
		return cmx_fail(errcode_ret, e);
	}
	cmx_clRetainContext(ctx);
	return cmx_succeed(errcode_ret, m);
}

cl_mem cmx_clCreateBuffer(cl_context ctx, cl_mem_flags flags, size_t size, void *host_ptr,
			  cl_int *errcode_ret)
{
	return buffer_create(ctx, NULL, flags, size, host_ptr, errcode_ret);
}

cl_mem cmx_clCreateBufferWithProperties(cl_context ctx, const cl_mem_properties *props,
					cl_mem_flags flags, size_t size, void *host_ptr,
					cl_int *errcode_ret)
{
	return buffer_create(ctx, props, flags, size, host_ptr, errcode_ret);
}

/* Some device of the context takes a sub-buffer starting there. */
static int origin_aligned(cl_context ctx, size_t origin)
{
	for (cl_uint i = 0; i < ctx->ndevices; i++)
		if (origin % align_bytes(ctx->devices[i]) == 0)
			return 1;
	return 0;
}

cl_mem cmx_clCreateSubBuffer(cl_mem parent, cl_mem_flags flags, cl_buffer_create_type type,
			     const void *info, cl_int *errcode_ret)
{
	const cl_buffer_region *r = info;
	struct cmx_CreateSubBuffer_in in;
	cl_mem_flags all;
	cl_mem m;
	cl_int e;

	if (!CMX_IS(parent, CMX_MAGIC_MEM) || parent->type != CL_MEM_OBJECT_BUFFER ||
	    parent->parent)
		return cmx_fail(errcode_ret, CL_INVALID_MEM_OBJECT);
	if (sub_flags(parent->flags, flags, &all) || type != CL_BUFFER_CREATE_TYPE_REGION || !r)
		return cmx_fail(errcode_ret, CL_INVALID_VALUE);
	if (r->origin > parent->size || r->size > parent->size - r->origin)
		return cmx_fail(errcode_ret, CL_INVALID_VALUE);
	if (!r->size)
		return cmx_fail(errcode_ret, CL_INVALID_BUFFER_SIZE);
	if (!origin_aligned(parent->ctx, r->origin))
		return cmx_fail(errcode_ret, CL_MISALIGNED_SUB_BUFFER_OFFSET);

	m = cmx_mem_new(parent->ctx, all, r->size);
	if (!m)
		return cmx_fail(errcode_ret, CL_OUT_OF_HOST_MEMORY);
	m->parent = parent;
	m->origin = r->origin;
	if (parent->host_ptr)
		m->host_ptr = (char *)parent->host_ptr + r->origin;
	if (parent->area_off) {
		m->area_off = parent->area_off + r->origin;
		m->heap = parent->heap;
	}
	/* The daemon gets the flags as given: the native call inherits too. */
	in = (struct cmx_CreateSubBuffer_in){.mem = {m->id},
					     .parent = {parent->id},
					     .flags = flags,
					     .origin = r->origin,
					     .size = r->size};
	e = CMX_SEND(CreateSubBuffer, &in);
	if (e) {
		cmx_mem_free(m);
		return cmx_fail(errcode_ret, e);
	}
	/* The parent outlives its sub-buffers, here and (by this order of
	 * releases) in the daemon. */
	cmx_clRetainMemObject(parent);
	cmx_clRetainContext(m->ctx);
	return cmx_succeed(errcode_ret, m);
}

cl_int cmx_clRetainMemObject(cl_mem m)
{
	if (!CMX_IS(m, CMX_MAGIC_MEM))
		return CL_INVALID_MEM_OBJECT;
	atomic_fetch_add(&m->refs, 1);
	return CL_SUCCESS;
}

/*
 * The last reference: the daemon releases the native object, whose
 * destruction fires the destructors (MemDestroyed). The struct stays until
 * the last of them ran, so each gets the cl_mem it was registered on.
 */
cl_int cmx_clReleaseMemObject(cl_mem m)
{
	struct cmx_ReleaseMem_in in;
	cl_context ctx;
	cl_mem parent;
	int waiting;

	if (!CMX_IS(m, CMX_MAGIC_MEM))
		return CL_INVALID_MEM_OBJECT;
	if (atomic_fetch_sub(&m->refs, 1) != 1)
		return CL_SUCCESS;
	m->magic = 0; /* a stale handle now fails CMX_IS */
	ctx = m->ctx;
	parent = m->parent;
	in.mem.id = m->id;
	/* No destructor can be added now (no reference is left) and none can
	 * fire before ReleaseMem is sent: past the send, m may be freed by
	 * cmx_mem_destructor_fired() when `waiting`. */
	pthread_mutex_lock(&m->lock);
	waiting = m->destructors != NULL;
	pthread_mutex_unlock(&m->lock);
	/* A broken session has dropped it already; one that ended takes no
	 * call naming it. Then the daemon will never say it was destroyed:
	 * the destructors run here, latest first, as MemDestroyed runs them. */
	if (CMX_SEND(ReleaseMem, &in) && waiting) {
		while (m->destructors) {
			struct cmx_destructor *d = m->destructors;
			m->destructors = d->next;
			d->fn(m, d->user_data);
			free(d);
		}
		waiting = 0;
	}
	/* The destructors are the application's to wait for, perhaps without
	 * another OpenCL call: the release must not sit in the batch. */
	if (waiting)
		(void)cmx_session_flush(cmx_icd.s);
	if (!waiting)
		cmx_mem_free(m);
	if (parent)
		cmx_clReleaseMemObject(parent);
	cmx_clReleaseContext(ctx);
	return CL_SUCCESS;
}

cl_int cmx_clSetMemObjectDestructorCallback(cl_mem m, void(CL_CALLBACK *fn)(cl_mem, void *),
					    void *user_data)
{
	struct cmx_SetMemDestructor_in in;
	struct mem_destructor *d;
	struct cmx_destructor **p;
	cl_int e;

	if (!CMX_IS(m, CMX_MAGIC_MEM))
		return CL_INVALID_MEM_OBJECT;
	if (!fn)
		return CL_INVALID_VALUE;
	d = malloc(sizeof(*d));
	if (!d)
		return CL_OUT_OF_HOST_MEMORY;
	d->d.fn = (void(CL_CALLBACK *)(void *, void *))fn;
	d->d.user_data = user_data;
	d->mem = m;
	pthread_mutex_lock(&m->lock);
	d->d.next = m->destructors;
	m->destructors = &d->d;
	pthread_mutex_unlock(&m->lock);
	in.mem.id = m->id;
	in.tag = (uintptr_t)d;
	e = CMX_SEND(SetMemDestructor, &in);
	if (e) {
		pthread_mutex_lock(&m->lock);
		for (p = &m->destructors; *p != &d->d; p = &(*p)->next)
			;
		*p = d->d.next;
		pthread_mutex_unlock(&m->lock);
		free(d);
	}
	return e;
}

/* MemDestroyed(tag), on the notification thread. The daemon registered the
 * native callbacks in our order, so they arrive in reverse, as the spec
 * wants. */
void cmx_mem_destructor_fired(uint64_t tag)
{
	struct mem_destructor *d = (struct mem_destructor *)(uintptr_t)tag;
	struct cmx_destructor **p;
	cl_mem m = d->mem;
	int last;

	pthread_mutex_lock(&m->lock);
	for (p = &m->destructors; *p && *p != &d->d; p = &(*p)->next)
		;
	if (*p)
		*p = d->d.next;
	last = m->destructors == NULL;
	pthread_mutex_unlock(&m->lock);
	d->d.fn(m, d->d.user_data);
	free(d);
	/* Destruction follows the last release, so refs is 0 here. */
	if (last && atomic_load(&m->refs) == 0)
		cmx_mem_free(m);
}

cl_int cmx_clGetMemObjectInfo(cl_mem m, cl_mem_info param, size_t size, void *value,
			      size_t *size_ret)
{
	union {
		cl_mem_object_type type;
		cl_mem_flags flags;
		size_t size;
		void *ptr;
		cl_uint u;
		cl_context ctx;
		cl_mem mem;
		cl_bool b;
	} v;
	size_t n;

	if (!CMX_IS(m, CMX_MAGIC_MEM))
		return CL_INVALID_MEM_OBJECT;
	switch (param) {
	case CL_MEM_TYPE:
		v.type = m->type, n = sizeof(v.type);
		break;
	case CL_MEM_FLAGS:
		v.flags = m->flags, n = sizeof(v.flags);
		break;
	case CL_MEM_SIZE:
		v.size = m->size, n = sizeof(v.size);
		break;
	case CL_MEM_HOST_PTR:
		v.ptr = m->host_ptr, n = sizeof(v.ptr);
		break;
	case CL_MEM_MAP_COUNT:
		v.u = atomic_load(&m->map_count), n = sizeof(v.u);
		break;
	case CL_MEM_REFERENCE_COUNT:
		v.u = atomic_load(&m->refs), n = sizeof(v.u);
		break;
	case CL_MEM_CONTEXT:
		v.ctx = m->ctx, n = sizeof(v.ctx);
		break;
	case CL_MEM_ASSOCIATED_MEMOBJECT:
		v.mem = m->parent, n = sizeof(v.mem);
		break;
	case CL_MEM_OFFSET:
		v.size = m->origin, n = sizeof(v.size);
		break;
	case CL_MEM_USES_SVM_POINTER:
		v.b = CL_FALSE, n = sizeof(v.b);
		break;
	case CL_MEM_PROPERTIES:
		return cmx_info_copy(size, value, size_ret, m->props,
				     m->nprops * sizeof(*m->props));
	default:
		return CL_INVALID_VALUE;
	}
	return cmx_info_copy(size, value, size_ret, &v, n);
}

/* ---- copies and fills ---- */

cl_int cmx_copy_buffer_check(cl_command_queue q, cl_mem src, cl_mem dst, size_t soff, size_t doff,
			     size_t size)
{
	cl_int e = cmx_mem_check(q, src);

	if (!e)
		e = cmx_mem_check(q, dst);
	if (!e && (!cmx_in_range(soff, size, src->size) || !cmx_in_range(doff, size, dst->size)))
		e = CL_INVALID_VALUE;
	/* Overlap counts in the memory they share: the same buffer, or two
	 * sub-buffers of one parent. */
	if (!e && cmx_mem_root(src) == cmx_mem_root(dst)) {
		size_t a = src->origin + soff, b = dst->origin + doff;

		if (a < b + size && b < a + size)
			e = CL_MEM_COPY_OVERLAP;
	}
	return e;
}

cl_int cmx_clEnqueueCopyBuffer(cl_command_queue q, cl_mem src, cl_mem dst, size_t soff, size_t doff,
			       size_t size, cl_uint n, const cl_event *list, cl_event *event)
{
	struct cmx_CopyBuffer_in in;
	struct cmx_cmd c;
	cl_int e = cmx_copy_buffer_check(q, src, dst, soff, doff, size);

	if (e || (e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_COPY_BUFFER)))
		return e;
	in = (struct cmx_CopyBuffer_in){.queue = {q->id},
					.src = {src->id},
					.dst = {dst->id},
					.src_offset = soff,
					.dst_offset = doff,
					.size = size,
					.wait = CMD_WAIT(&c),
					.event = {c.ev_id}};
	return cmx_cmd_end(&c, CMX_SEND(CopyBuffer, &in));
}

cl_int cmx_fill_buffer_check(cl_command_queue q, cl_mem m, const void *pattern, size_t psize,
			     size_t off, size_t size)
{
	cl_int e = cmx_mem_check(q, m);

	/* Pattern sizes: 1, 2, 4, ..., 128 (the largest type, double16). */
	if (!e && (!pattern || !psize || psize > 128 || (psize & (psize - 1)) || off % psize ||
		   size % psize || !cmx_in_range(off, size, m->size)))
		e = CL_INVALID_VALUE;
	return e;
}

cl_int cmx_clEnqueueFillBuffer(cl_command_queue q, cl_mem m, const void *pattern, size_t psize,
			       size_t off, size_t size, cl_uint n, const cl_event *list,
			       cl_event *event)
{
	struct cmx_FillBuffer_in in;
	struct cmx_cmd c;
	cl_int e = cmx_fill_buffer_check(q, m, pattern, psize, off, size);

	if (e || (e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_FILL_BUFFER)))
		return e;
	in = (struct cmx_FillBuffer_in){.queue = {q->id},
					.mem = {m->id},
					.pattern = {pattern, psize},
					.offset = off,
					.size = size,
					.wait = CMD_WAIT(&c),
					.event = {c.ev_id}};
	return cmx_cmd_end(&c, CMX_SEND(FillBuffer, &in));
}

cl_int cmx_clEnqueueMigrateMemObjects(cl_command_queue q, cl_uint nmem, const cl_mem *mems,
				      cl_mem_migration_flags flags, cl_uint n, const cl_event *list,
				      cl_event *event)
{
	const cl_mem_migration_flags known =
	    CL_MIGRATE_MEM_OBJECT_HOST | CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED;
	struct cmx_MigrateMem_in in;
	uint64_t small[32], *ids;
	struct cmx_cmd c;
	cl_int e;

	if (!CMX_IS(q, CMX_MAGIC_QUEUE))
		return CL_INVALID_COMMAND_QUEUE;
	if (!nmem || !mems || (flags & ~known))
		return CL_INVALID_VALUE;
	for (cl_uint i = 0; i < nmem; i++) {
		if (!CMX_IS(mems[i], CMX_MAGIC_MEM))
			return CL_INVALID_MEM_OBJECT;
		if (mems[i]->ctx != q->ctx)
			return CL_INVALID_CONTEXT;
	}
	ids = nmem <= 32 ? small : malloc(nmem * sizeof(*ids));
	if (!ids)
		return CL_OUT_OF_HOST_MEMORY;
	for (cl_uint i = 0; i < nmem; i++)
		ids[i] = mems[i]->id;
	e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_MIGRATE_MEM_OBJECTS);
	if (!e) {
		in = (struct cmx_MigrateMem_in){.queue = {q->id},
						.mems = {ids, nmem},
						.flags = flags,
						.wait = CMD_WAIT(&c),
						.event = {c.ev_id}};
		e = cmx_cmd_end(&c, CMX_SEND(MigrateMem, &in));
	}
	if (ids != small)
		free(ids);
	return e;
}

/* ---- SVM: the device reports no SVM capabilities ---- */

void *cmx_clSVMAlloc(cl_context ctx, cl_svm_mem_flags flags, size_t size, cl_uint alignment)
{
	return NULL;
}

void cmx_clSVMFree(cl_context ctx, void *ptr)
{
}

static cl_int no_svm(cl_command_queue q)
{
	return CMX_IS(q, CMX_MAGIC_QUEUE) ? CL_INVALID_OPERATION : CL_INVALID_COMMAND_QUEUE;
}

cl_int cmx_clEnqueueSVMFree(cl_command_queue q, cl_uint nptr, void *ptrs[],
			    void(CL_CALLBACK *fn)(cl_command_queue, cl_uint, void *[], void *),
			    void *user_data, cl_uint n, const cl_event *list, cl_event *event)
{
	return no_svm(q);
}

cl_int cmx_clEnqueueSVMMemcpy(cl_command_queue q, cl_bool blocking, void *dst, const void *src,
			      size_t size, cl_uint n, const cl_event *list, cl_event *event)
{
	return no_svm(q);
}

cl_int cmx_clEnqueueSVMMemFill(cl_command_queue q, void *ptr, const void *pattern, size_t psize,
			       size_t size, cl_uint n, const cl_event *list, cl_event *event)
{
	return no_svm(q);
}

cl_int cmx_clEnqueueSVMMap(cl_command_queue q, cl_bool blocking, cl_map_flags flags, void *ptr,
			   size_t size, cl_uint n, const cl_event *list, cl_event *event)
{
	return no_svm(q);
}

cl_int cmx_clEnqueueSVMUnmap(cl_command_queue q, void *ptr, cl_uint n, const cl_event *list,
			     cl_event *event)
{
	return no_svm(q);
}

cl_int cmx_clEnqueueSVMMigrateMem(cl_command_queue q, cl_uint nptr, const void **ptrs,
				  const size_t *sizes, cl_mem_migration_flags flags, cl_uint n,
				  const cl_event *list, cl_event *event)
{
	return no_svm(q);
}

cl_int cmx_clSetKernelArgSVMPointer(cl_kernel k, cl_uint index, const void *value)
{
	return CMX_IS(k, CMX_MAGIC_KERNEL) ? CL_INVALID_OPERATION : CL_INVALID_KERNEL;
}

/* ---- pipes: CL_DEVICE_PIPE_SUPPORT is CL_FALSE, so none ever exists ---- */

cl_mem cmx_clCreatePipe(cl_context ctx, cl_mem_flags flags, cl_uint packet_size,
			cl_uint max_packets, const cl_pipe_properties *props, cl_int *errcode_ret)
{
	return cmx_fail(errcode_ret,
		    CMX_IS(ctx, CMX_MAGIC_CONTEXT) ? CL_INVALID_OPERATION : CL_INVALID_CONTEXT);
}

/* No pipe is ever made, so whatever it is given is not "a valid pipe
 * object": CL_INVALID_MEM_OBJECT, a buffer included (as the CTS's
 * consistency_pipes checks). */
cl_int cmx_clGetPipeInfo(cl_mem pipe, cl_pipe_info param, size_t size, void *value,
			 size_t *size_ret)
{
	return CL_INVALID_MEM_OBJECT;
}
