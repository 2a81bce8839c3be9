// SPDX-License-Identifier: MIT
// Handlers: devices and contexts.
#include "exec.h"

#include <stdlib.h>
#include <string.h>

#include "defer.h"
#include "log.h"
#include "tenant.h"
#include "zero.h"

/* A tenant's memory quota is its device's memory: the two sizes are
 * answered no larger than what it may allocate. */
static void tenant_view(struct cmx_call *c, unsigned param, void *v, size_t size)
{
	uint64_t quota = c->s->tenant->q.mem, val;

	if ((param != CL_DEVICE_GLOBAL_MEM_SIZE && param != CL_DEVICE_MAX_MEM_ALLOC_SIZE) ||
	    size != sizeof(val) || quota == CMX_UNLIMITED)
		return;
	memcpy(&val, v, sizeof(val));
	if (val > quota)
		memcpy(v, &quota, sizeof(quota));
}

int cmx_h_GetCreateStatus(struct cmx_call *c, struct cmx_GetCreateStatus_in *in,
			  struct cmx_GetCreateStatus_out *out)
{
	struct cmx_obj *o = cmx_objtab_get(&c->s->objs, in->object);

	if (!o)
		return CL_INVALID_VALUE;
	return o->err;
}

int cmx_h_GetDeviceIDs(struct cmx_call *c, struct cmx_GetDeviceIDs_in *in,
		       struct cmx_GetDeviceIDs_out *out)
{
	uint64_t *ids = malloc(CMX_MAX_DEVICES * sizeof(*ids));

	if (!ids)
		return CL_OUT_OF_HOST_MEMORY;
	for (unsigned i = 0; i < c->s->srv->ndevices; i++)
		ids[i] = i + 1;
	c->scratch = ids;
	out->devices.v = ids;
	out->devices.n = c->s->srv->ndevices;
	return CL_SUCCESS;
}

/* Every device query the driver answers, in the core and the extension
 * ranges; the guest keeps what it mirrors. */
static const struct {
	unsigned first, last;
} info_ranges[] = {
    {0x1000, 0x10ff},
    {0x4000, 0x42ff},
};

int cmx_h_GetDeviceInfoAll(struct cmx_call *c, struct cmx_GetDeviceInfoAll_in *in,
			   struct cmx_GetDeviceInfoAll_out *out)
{
	static const unsigned cb[] = {CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR,
				      CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR};
	cl_device_id dev = in->device.h;
	struct cmx_DeviceInfo *rec;
	size_t n = 0, room = sizeof(cb) / sizeof(cb[0]);

	for (size_t r = 0; r < sizeof(info_ranges) / sizeof(info_ranges[0]); r++)
		room += info_ranges[r].last - info_ranges[r].first + 1;
	if (!(c->scratch = rec = calloc(room, sizeof(*rec))))
		return CL_OUT_OF_HOST_MEMORY;
	for (size_t r = 0; r < sizeof(info_ranges) / sizeof(info_ranges[0]); r++) {
		for (unsigned p = info_ranges[r].first; p <= info_ranges[r].last; p++) {
			size_t size = 0;
			void *v;
			if (clGetDeviceInfo(dev, p, 0, NULL, &size) != CL_SUCCESS ||
			    size > CMX_MAX_DEVINFO)
				continue;
			/* An empty answer (NVIDIA's *_WITH_VERSION lists): a second
			 * query with a 0-byte buffer may fail, so none is made. */
			if (!size) {
				rec[n++] = (struct cmx_DeviceInfo){.param = p};
				continue;
			}
			if (!(v = cmx_call_alloc(c, size)))
				return CL_OUT_OF_HOST_MEMORY;
			if (clGetDeviceInfo(dev, p, size, v, NULL) == CL_SUCCESS) {
				tenant_view(c, p, v, size);
				rec[n++] = (struct cmx_DeviceInfo){.param = p, .value = {v, size}};
			}
		}
	}
	/* Outside the ranges: cl_khr_command_buffer's, where it is forwarded
	 * (the guest offers the extension only with them). */
	for (size_t k = 0; cmx_cmdbuf_supported(c->s->srv, dev) && k < sizeof(cb) / sizeof(cb[0]); k++) {
		cl_bitfield *v = cmx_call_alloc(c, sizeof(*v));
		if (!v)
			return CL_OUT_OF_HOST_MEMORY;
		if (clGetDeviceInfo(dev, cb[k], sizeof(*v), v, NULL) == CL_SUCCESS)
			rec[n++] =
			    (struct cmx_DeviceInfo){.param = cb[k], .value = {v, sizeof(*v)}};
	}
	out->info.v = rec;
	out->info.n = n;
	return CL_SUCCESS;
}

int cmx_h_GetDeviceInfo(struct cmx_call *c, struct cmx_GetDeviceInfo_in *in,
			struct cmx_GetDeviceInfo_out *out)
{
	cl_int e = CMX_INFO(c, &out->value, clGetDeviceInfo, in->device.h, (cl_uint)in->param);

	if (e == CL_SUCCESS)
		tenant_view(c, (unsigned)in->param, c->scratch, out->value.len);
	return e;
}

/* The most sub-devices one partition makes (ids the guest reserves). */
#define MAX_SUBDEVICES 64

int cmx_h_CreateSubDevices(struct cmx_call *c, struct cmx_CreateSubDevices_in *in,
			   struct cmx_CreateSubDevices_out *out)
{
	cl_device_partition_property props[65];
	cl_device_id subs[MAX_SUBDEVICES];
	uint64_t base = in->devices.id;
	cl_uint room = in->room < MAX_SUBDEVICES ? (cl_uint)in->room : MAX_SUBDEVICES, n = 0,
		added = 0;
	cl_int e;

	/* The list must end in its 0 (the driver reads up to it). */
	if (!in->props.n || in->props.v[in->props.n - 1] || (room && !base))
		return CL_INVALID_VALUE;
	for (uint64_t i = 0; i < in->props.n; i++)
		props[i] = (cl_device_partition_property)in->props.v[i];
	e = clCreateSubDevices(in->device.h, props, room, room ? subs : NULL, &n);
	if (e || !room) {
		out->count = n;
		return e;
	}
	/* Every id the guest reserved must be free (the first one was
	 * checked with the call). */
	for (cl_uint i = 1; i < n && !e; i++)
		if (base + i < base || cmx_objtab_get(&c->s->objs, base + i))
			e = CL_INVALID_VALUE;
	for (cl_uint i = 0; i < n; i++) {
		struct cmx_obj *o;
		if (e || cmx_session_add(c->s, base + i, CMX_K_DEVICE, subs[i], NULL, 0, &o)) {
			clReleaseDevice(subs[i]);
			e = e ? e : CL_OUT_OF_HOST_MEMORY;
			continue;
		}
		o->flags = CMX_OBJ_SUBDEVICE;
		added++;
	}
	/* The guest learns of none of them after a failure: those made go. */
	for (cl_uint i = 0; e && i < added; i++)
		cmx_session_release(c->s, base + i, CMX_K_DEVICE);
	out->count = e ? 0 : n;
	return e;
}

int cmx_h_ReleaseDevice(struct cmx_call *c, struct cmx_ReleaseDevice_in *in)
{
	struct cmx_obj *o = cmx_session_obj(c->s, in->device.id, CMX_K_DEVICE);

	if (o && (o->flags & CMX_OBJ_SUBDEVICE))
		cmx_session_release(c->s, in->device.id, CMX_K_DEVICE);
	return CL_SUCCESS;
}

struct ctx_note {
	struct cmx_server *srv;
	uint64_t session, context;
	char *errinfo;
	void *info;
	size_t cb;
};

static void ctx_note_post(void *arg)
{
	struct ctx_note *n = arg;
	struct cmx_session *s;

	for (s = n->srv->sessions; s && s->id != n->session; s = s->next)
		;
	if (s && !s->closed) {
		struct cmx_ContextError_in in = {
		    .tag = n->context,
		    .errinfo = {n->errinfo, strlen(n->errinfo) + 1},
		    .info = {n->info, n->cb},
		};
		cmx_call_notify(s, &cmx_desc_ContextError_in, &in, NULL, 0, NULL);
	}
	free(n->errinfo);
	free(n->info);
	free(n);
}

/* The context's error callback: copied and handed to the loop. */
static void CL_CALLBACK ctx_notify(const char *errinfo, const void *info, size_t cb, void *arg)
{
	struct ctx_note *n = calloc(1, sizeof(*n)), *tmpl = arg;

	if (!n)
		return;
	*n = *tmpl;
	if (cb > 65536)
		cb = 65536;
	n->errinfo = strdup(errinfo ? errinfo : "");
	n->info = malloc(cb ? cb : 1);
	if (!n->errinfo || !n->info) {
		free(n->errinfo);
		free(n->info);
		free(n);
		return;
	}
	memcpy(n->info, info, cb);
	n->cb = cb;
	cmx_loop_post(n->srv->loop, ctx_note_post, n);
}

/*
 * A group whose tenants share one native context (context = shared): a
 * guest context of the served device with no properties of its own is the
 * group's one native context, retained for it. The guest's ids stay its
 * own, so no tenant can name another's objects; what the group shares is
 * the GPU's address space and its fate (docs/admin.md).
 */
static cl_context shared_context(struct cmx_server *srv, uint64_t ndev, void *const *devs)
{
	cl_int e;

	if (!srv->shared_context || ndev != 1 || devs[0] != srv->devices[0])
		return NULL;
	if (!srv->shared_ctx) {
		cl_context_properties props[] = { CL_CONTEXT_PLATFORM,
						  (cl_context_properties)srv->platform, 0 };
		srv->shared_ctx = clCreateContext(props, 1, (const cl_device_id *)devs, NULL, NULL,
						  &e);
		if (e) {
			srv->shared_ctx = NULL;
			return NULL;
		}
		cmx_info("the group's guest contexts share one native context");
	}
	clRetainContext(srv->shared_ctx);
	return srv->shared_ctx;
}

/* The native context ctx becomes the session's object, with its zeroing
 * queue; the error releases it. */
static cl_int context_add(struct cmx_call *c, uint64_t id, cl_context ctx)
{
	struct cmx_obj *o;

	if (cmx_session_add(c->s, id, CMX_K_CONTEXT, ctx, ctx, 0, &o)) {
		clReleaseContext(ctx);
		return CL_OUT_OF_HOST_MEMORY;
	}
	/* Its fresh memory is zeroed on its own queue (host/zero.c). */
	o->ext = cmx_zero_context(c->s->srv, ctx);
	if (!o->ext) {
		cmx_session_release(c->s, id, CMX_K_CONTEXT);
		return CL_OUT_OF_HOST_MEMORY;
	}
	return CL_SUCCESS;
}

/*
 * A restore's context is made on an executor thread. NVIDIA takes about
 * 270 ms to make one, and 64 sessions restored with each made on the loop
 * took 17 s, one after another, every other session's replay waiting. A
 * restore replays a session's requests in order, the next after this
 * one's end, so its later requests find the context. A guest's own
 * CreateContext is async, its next requests already behind it on the
 * wire: it is made on the loop.
 */
struct ctx_job {
	cl_context_properties props[70];
	struct ctx_note *tmpl;
	cl_context ctx;
};

static int context_work(struct cmx_call *c)
{
	struct cmx_CreateContext_in *in = c->in;
	struct ctx_job *j = c->ctx;
	cl_int e;

	j->ctx = clCreateContext(j->props, (cl_uint)in->devices.n,
				 (const cl_device_id *)in->devices.h, j->tmpl ? ctx_notify : NULL,
				 j->tmpl, &e);
	return e;
}

static void context_made(struct cmx_call *c, int status)
{
	struct cmx_CreateContext_in *in = c->in;
	struct ctx_job *j = c->ctx;

	c->ctx = NULL;
	if (status) {
		free(j->tmpl);
		if (status == -9999)
			cmx_exec_check_lost(c->s->srv, status, "clCreateContext");
	} else if (c->s->closed) {
		clReleaseContext(j->ctx);
	} else {
		status = context_add(c, in->context.id, j->ctx);
	}
	free(j);
	cmx_call_done(c, status);
}

int cmx_h_CreateContext(struct cmx_call *c, struct cmx_CreateContext_in *in)
{
	cl_context_properties props[70];
	struct ctx_note *tmpl = NULL;
	size_t n = 0;
	cl_context ctx;
	cl_int e;

	if (!in->devices.n)
		return CL_INVALID_VALUE;
	props[n++] = CL_CONTEXT_PLATFORM;
	props[n++] = (cl_context_properties)c->s->srv->platform;
	for (uint64_t i = 0; i + 1 < in->props.n && in->props.v[i]; i += 2) {
		if (in->props.v[i] == CL_CONTEXT_PLATFORM)
			continue;
		props[n++] = (cl_context_properties)in->props.v[i];
		props[n++] = (cl_context_properties)in->props.v[i + 1];
	}
	props[n] = 0;
	if (in->notify) {
		/* Lives as long as the daemon: a context may outlive its session
		 * only inside the driver, and the note finds no session then. */
		tmpl = calloc(1, sizeof(*tmpl));
		if (!tmpl)
			return CL_OUT_OF_HOST_MEMORY;
		tmpl->srv = c->s->srv;
		tmpl->session = c->s->id;
		tmpl->context = in->notify;
	}
	ctx = n == 2 ? shared_context(c->s->srv, in->devices.n, in->devices.h) : NULL;
	if (ctx) {
		/* The driver's notes on a shared context concern every guest
		 * context of the group: none is singled out. */
		free(tmpl);
		return context_add(c, in->context.id, ctx);
	}
	if (c->s->restore) {
		struct ctx_job *j = calloc(1, sizeof(*j));
		if (!j) {
			free(tmpl);
			return CL_OUT_OF_HOST_MEMORY;
		}
		memcpy(j->props, props, (n + 1) * sizeof(props[0]));
		j->tmpl = tmpl;
		c->ctx = j;
		return cmx_defer_work(c, context_work, context_made);
	}
	ctx = clCreateContext(props, (cl_uint)in->devices.n, (const cl_device_id *)in->devices.h,
			      tmpl ? ctx_notify : NULL, tmpl, &e);
	if (e) {
		free(tmpl);
		if (e == -9999)
			cmx_exec_check_lost(c->s->srv, e, "clCreateContext");
		return e;
	}
	return context_add(c, in->context.id, ctx);
}

int cmx_h_ReleaseContext(struct cmx_call *c, struct cmx_ReleaseContext_in *in)
{
	cmx_session_release(c->s, in->context.id, CMX_K_CONTEXT);
	return CL_SUCCESS;
}

int cmx_h_GetContextInfo(struct cmx_call *c, struct cmx_GetContextInfo_in *in,
			 struct cmx_GetContextInfo_out *out)
{
	return CMX_INFO(c, &out->value, clGetContextInfo, in->context.h, (cl_uint)in->param);
}
