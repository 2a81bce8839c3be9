// SPDX-License-Identifier: MIT
// The platform: the loader's entry point, the devices (cached info) and
// sub-devices, the session (a new one when it ended) and new contexts.
#include "config.h"
#include "icd.h"
#include "object.h"

#include <CL/cl_ext.h>
#include "entry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dial.h"
#include "env.h"
#include "log.h"
#include "timer.h"

#define CMX_EXPORT __attribute__((visibility("default")))
#define PLATFORM_VERSION "OpenCL 3.0 clmux " PACKAGE_VERSION

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_err;

/* ---- devices --------------------------------------------------------- */

static int info_cmp(const void *a, const void *b)
{
	const struct cmx_devinfo *x = a, *y = b;

	return (x->param > y->param) - (x->param < y->param);
}

const struct cmx_devinfo *cmx_device_info(cl_device_id d, cl_uint param)
{
	struct cmx_devinfo key = { .param = param };

	return bsearch(&key, d->info, d->ninfo, sizeof(key), info_cmp);
}

/* Replaces (or adds) one answer; `value` must outlive the device. */
static void info_set(cl_device_id d, cl_uint param, const void *value, size_t size)
{
	struct cmx_devinfo *i = (struct cmx_devinfo *)cmx_device_info(d, param);

	if (!i) {
		struct cmx_devinfo *n = realloc(d->info, (d->ninfo + 1) * sizeof(*n));
		if (!n)
			return;
		d->info = n;
		i = &n[d->ninfo++];
		i->param = param;
	}
	i->value = value;
	i->size = (uint32_t)size;
	qsort(d->info, d->ninfo, sizeof(*d->info), info_cmp);
}

/* Extensions that need nothing from the host API (kernel language, or
 * answers already in the device info): these pass; the rest would promise
 * entry points clmux does not forward. */
static int extension_forwarded(const char *name, size_t n)
{
	static const char *const exact[] = {
		"cl_khr_fp64", "cl_khr_fp16", "cl_khr_int64_base_atomics",
		"cl_khr_int64_extended_atomics", "cl_khr_global_int32_base_atomics",
		"cl_khr_global_int32_extended_atomics", "cl_khr_local_int32_base_atomics",
		"cl_khr_local_int32_extended_atomics", "cl_khr_byte_addressable_store",
		"cl_khr_device_uuid", "cl_khr_pci_bus_info", "cl_khr_extended_versioning",
		"cl_khr_integer_dot_product", "cl_khr_expect_assume", "cl_khr_extended_bit_ops",
		"cl_khr_spirv_no_integer_wrap_decoration", "cl_khr_spirv_linkonce_odr",
		"cl_nv_device_attribute_query", "cl_nv_pragma_unroll", "cl_nv_compiler_options",
		"cl_khr_kernel_clock", "cl_khr_suggested_local_work_size",
		/* images (guest/image.c) */
		"cl_khr_3d_image_writes", "cl_khr_image2d_from_buffer", "cl_khr_depth_images",
		"cl_khr_srgb_image_writes",
	};
	static const char *const prefix[] = { "cl_khr_subgroup_", "cl_khr_work_group_" };

	for (size_t i = 0; i < sizeof(exact) / sizeof(*exact); i++)
		if (strlen(exact[i]) == n && !memcmp(exact[i], name, n))
			return 1;
	for (size_t i = 0; i < sizeof(prefix) / sizeof(*prefix); i++)
		if (n > strlen(prefix[i]) && !memcmp(prefix[i], name, strlen(prefix[i])))
			return 1;
	return 0;
}

/* OpenCL C features that need host support clmux does not give yet. */
static int feature_forwarded(const char *name)
{
	static const char *const dropped[] = {
		"__opencl_c_pipes", "__opencl_c_device_enqueue",
	};

	for (size_t i = 0; i < sizeof(dropped) / sizeof(*dropped); i++)
		if (!strcmp(name, dropped[i]))
			return 0;
	return 1;
}

/* Memory for an answer made here, freed with a sub-device. */
static void *dev_alloc(cl_device_id d, size_t size)
{
	for (size_t k = 0; k < sizeof(d->owned) / sizeof(*d->owned); k++)
		if (!d->owned[k])
			return d->owned[k] = calloc(1, size);
	return NULL;
}

/* cl_khr_command_buffer is forwarded where the daemon gave its device
 * queries (host/exec_cmdbuf.c: a revision of the ABI clmux is built with). */
static int extension_kept(cl_device_id d, const char *name, size_t n)
{
	static const char cb[] = "cl_khr_command_buffer";

	if (n == sizeof(cb) - 1 && !memcmp(name, cb, n))
		return cmx_device_info(d, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR) != NULL;
	return extension_forwarded(name, n);
}

static void filter_extensions(cl_device_id d)
{
	const struct cmx_devinfo *i = cmx_device_info(d, CL_DEVICE_EXTENSIONS);
	char *out;
	size_t n = 0;

	if (i && i->size) {
		const char *s = i->value, *end = s + strnlen(s, i->size);
		out = dev_alloc(d, i->size + 1);
		if (!out)
			return;
		while (s < end) {
			const char *sp = memchr(s, ' ', (size_t)(end - s));
			size_t len = sp ? (size_t)(sp - s) : (size_t)(end - s);
			if (len && extension_kept(d, s, len)) {
				memcpy(out + n, s, len);
				n += len;
				out[n++] = ' ';
			}
			s += len + 1;
		}
		out[n ? n - 1 : 0] = '\0';
		info_set(d, CL_DEVICE_EXTENSIONS, out, strlen(out) + 1);
	}
	i = cmx_device_info(d, CL_DEVICE_EXTENSIONS_WITH_VERSION);
	if (i) {
		const cl_name_version *v = i->value;
		cl_name_version *keep = dev_alloc(d, i->size + 1);
		size_t k = 0;
		if (!keep)
			return;
		for (size_t j = 0; j < i->size / sizeof(*v); j++)
			if (extension_kept(d, v[j].name, strnlen(v[j].name, CL_NAME_VERSION_MAX_NAME_SIZE)))
				keep[k++] = v[j];
		info_set(d, CL_DEVICE_EXTENSIONS_WITH_VERSION, keep, k * sizeof(*keep));
	}
	i = cmx_device_info(d, CL_DEVICE_OPENCL_C_FEATURES);
	if (i) {
		const cl_name_version *v = i->value;
		cl_name_version *keep = dev_alloc(d, i->size + 1);
		size_t k = 0;
		if (!keep)
			return;
		for (size_t j = 0; j < i->size / sizeof(*v); j++)
			if (feature_forwarded(v[j].name))
				keep[k++] = v[j];
		info_set(d, CL_DEVICE_OPENCL_C_FEATURES, keep, k * sizeof(*keep));
	}
}

/* Where clmux's device differs from the physical one: what clmux cannot
 * honour is reported as absent (docs/compatibility.md). */
static void device_overrides(cl_device_id d)
{
	static const cl_bool no = CL_FALSE;
	static const cl_uint zero_u = 0;
	static const cl_ulong zero_ul = 0;
	static const cl_uint refcount = 1;
	static const cl_platform_id platform = &cmx_icd.platform;
	/* Images, samplers and sub-devices are forwarded: their limits and
	 * partition types read as the device's. Pipes and device-side queues
	 * are not. */
	static const cl_uint zeroed[] = { CL_DEVICE_MAX_PIPE_ARGS,
		CL_DEVICE_PIPE_MAX_ACTIVE_RESERVATIONS,
		CL_DEVICE_PIPE_MAX_PACKET_SIZE, CL_DEVICE_MAX_ON_DEVICE_QUEUES,
		CL_DEVICE_MAX_ON_DEVICE_EVENTS, CL_DEVICE_QUEUE_ON_DEVICE_PREFERRED_SIZE,
		CL_DEVICE_QUEUE_ON_DEVICE_MAX_SIZE };
	const struct cmx_devinfo *i;

	info_set(d, CL_DEVICE_PLATFORM, &platform, sizeof(platform));
	/* The guest's parent; a sub-device's count is answered live. */
	info_set(d, CL_DEVICE_PARENT_DEVICE, &d->parent, sizeof(d->parent));
	info_set(d, CL_DEVICE_REFERENCE_COUNT, &refcount, sizeof(refcount));
	for (size_t k = 0; k < sizeof(zeroed) / sizeof(*zeroed); k++)
		if (cmx_device_info(d, zeroed[k]))
			info_set(d, zeroed[k], &zero_u, sizeof(zero_u));
	info_set(d, CL_DEVICE_HOST_UNIFIED_MEMORY, &no, sizeof(no));
	if (cmx_device_info(d, CL_DEVICE_SVM_CAPABILITIES))
		info_set(d, CL_DEVICE_SVM_CAPABILITIES, &zero_ul, sizeof(zero_ul));
	if (cmx_device_info(d, CL_DEVICE_PIPE_SUPPORT))
		info_set(d, CL_DEVICE_PIPE_SUPPORT, &no, sizeof(no));
	if (cmx_device_info(d, CL_DEVICE_QUEUE_ON_DEVICE_PROPERTIES))
		info_set(d, CL_DEVICE_QUEUE_ON_DEVICE_PROPERTIES, &zero_ul, sizeof(zero_ul));
	if (cmx_device_info(d, CL_DEVICE_DEVICE_ENQUEUE_CAPABILITIES))
		info_set(d, CL_DEVICE_DEVICE_ENQUEUE_CAPABILITIES, &zero_ul, sizeof(zero_ul));
	if (cmx_device_info(d, CL_DEVICE_BUILT_IN_KERNELS))
		info_set(d, CL_DEVICE_BUILT_IN_KERNELS, "", 1);
	if (cmx_device_info(d, CL_DEVICE_BUILT_IN_KERNELS_WITH_VERSION))
		info_set(d, CL_DEVICE_BUILT_IN_KERNELS_WITH_VERSION, "", 0);
	i = cmx_device_info(d, CL_DEVICE_EXECUTION_CAPABILITIES);
	if (i && i->size == sizeof(cl_device_exec_capabilities)) {
		/* Each device's own copy: devices may differ. */
		cl_device_exec_capabilities *caps = dev_alloc(d, sizeof(*caps));
		if (caps) {
			memcpy(caps, i->value, sizeof(*caps));
			*caps &= ~(cl_device_exec_capabilities)CL_EXEC_NATIVE_KERNEL;
			info_set(d, CL_DEVICE_EXECUTION_CAPABILITIES, caps, sizeof(*caps));
		}
	}
	i = cmx_device_info(d, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR);
	if (i && i->size == sizeof(cl_device_command_buffer_capabilities_khr)) {
		/* A printing kernel is not recorded (its output has no launch
		 * to come back with), and device-side enqueue is not offered. */
		cl_device_command_buffer_capabilities_khr *caps = dev_alloc(d, sizeof(*caps));
		if (caps) {
			memcpy(caps, i->value, sizeof(*caps));
			*caps &= ~(cl_device_command_buffer_capabilities_khr)(
			    CL_COMMAND_BUFFER_CAPABILITY_KERNEL_PRINTF_KHR |
			    CL_COMMAND_BUFFER_CAPABILITY_DEVICE_SIDE_ENQUEUE_KHR);
			info_set(d, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR, caps, sizeof(*caps));
		}
	}
	filter_extensions(d);
}

static void info_scalar(cl_device_id d, cl_uint param, void *out, size_t size)
{
	const struct cmx_devinfo *i = cmx_device_info(d, param);

	if (i && i->size == size)
		memcpy(out, i->value, size);
}

static int device_load(struct cmx_session *s, cl_device_id d, uint64_t id, cl_device_id parent)
{
	struct cmx_GetDeviceInfoAll_in in = { .device = { .id = id } };
	struct cmx_GetDeviceInfoAll_out out;
	struct cmx_reply r;
	int e = cmx_rpc_GetDeviceInfoAll(s, &in, &out, &r);

	if (e || r.status) {
		cmx_reply_fini(&r);
		return e ? e : -EIO;
	}
	d->dispatch = cmx_icd.platform.dispatch;
	d->magic = CMX_MAGIC_DEVICE;
	d->id = id;
	d->parent = parent;
	atomic_init(&d->refs, 1);
	/* The reply's buffer becomes the device's cache: the values point
	 * into it; the records' array goes with the reply. */
	d->info_blob = r.buf;
	r.buf = NULL;
	d->info = out.info.n ? calloc(out.info.n, sizeof(*d->info)) : NULL;
	if (out.info.n && !d->info) {
		cmx_reply_fini(&r);
		return -ENOMEM;
	}
	for (uint64_t k = 0; k < out.info.n; k++)
		d->info[d->ninfo++] = (struct cmx_devinfo){(uint32_t)out.info.v[k].param,
							   (uint32_t)out.info.v[k].value.len,
							   out.info.v[k].value.ptr};
	cmx_reply_fini(&r);
	qsort(d->info, d->ninfo, sizeof(*d->info), info_cmp);
	device_overrides(d);
	info_scalar(d, CL_DEVICE_TYPE, &d->type, sizeof(d->type));
	info_scalar(d, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, &d->max_dims, sizeof(d->max_dims));
	info_scalar(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, &d->max_wg_size, sizeof(d->max_wg_size));
	info_scalar(d, CL_DEVICE_MAX_WORK_ITEM_SIZES, d->max_wi_sizes, sizeof(d->max_wi_sizes));
	info_scalar(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN, &d->mem_base_addr_align,
		    sizeof(d->mem_base_addr_align));
	info_scalar(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, &d->max_alloc, sizeof(d->max_alloc));
	return 0;
}

static void devices_free(struct _cl_device_id *devs, cl_uint n)
{
	for (cl_uint i = 0; i < n; i++) {
		for (size_t k = 0; k < sizeof(devs[i].owned) / sizeof(*devs[i].owned); k++)
			free(devs[i].owned[k]);
		free(devs[i].info);
		free(devs[i].info_blob);
	}
	free(devs);
}

/* The devices session s offers: *devs (calloc'd) and *n. 0 or -errno
 * (nothing kept). */
static int devices_load(struct cmx_session *s, struct _cl_device_id **devs, cl_uint *n)
{
	struct cmx_GetDeviceIDs_out out;
	struct cmx_GetDeviceIDs_in in = { 0 };
	struct cmx_reply r;
	int e = cmx_rpc_GetDeviceIDs(s, &in, &out, &r);
	cl_uint i = 0;

	*devs = NULL;
	*n = 0;
	if (!e && !r.status && out.devices.n && out.devices.n <= 64) {
		*devs = calloc(out.devices.n, sizeof(**devs));
		if (!*devs)
			e = -ENOMEM;
		for (; !e && i < out.devices.n; i++)
			e = device_load(s, &(*devs)[i], out.devices.v[i], NULL);
		if (!e) {
			*n = (cl_uint)out.devices.n;
		} else if (*devs) {
			/* The one that failed may hold its info too. */
			devices_free(*devs, i);
			*devs = NULL;
		}
	} else if (!e) {
		e = -ENODEV;
	}
	cmx_reply_fini(&r);
	return e;
}

static void forked(void);

static void icd_init(void)
{
	struct cmx_session *s;
	char buf[512];
	const char *spec;
	int e;

	cmx_log_init("clmux", CMX_LOG_WARN);
	cmx_icd.platform.magic = CMX_MAGIC_PLATFORM;
	if (cmx_env()->disable) {
		init_err = -ENODEV;
		return;
	}
	pthread_atfork(NULL, NULL, forked);
	spec = cmx_dial_server(buf, sizeof(buf));
	e = cmx_session_open(spec, &cmx_notify_ops, NULL, &s);
	if (e) {
		/* One clear line, and no platform: never a hang or a crash. */
		if (e == -ENOKEY)
			cmx_err("clmuxd at %s asks for a token and none is set (CLMUX_TOKEN, or "
				"token = ... in " CMX_CLIENT_CONF "); the clmux platform is unavailable",
				spec);
		else if (e == -EKEYREJECTED)
			cmx_err("clmuxd at %s refused the token; the clmux platform is unavailable",
				spec);
		else if (e == -EAGAIN)
			cmx_err("clmuxd at %s refuses this address for a while after failed tokens; "
				"the clmux platform is unavailable", spec);
		else if (e == -EPERM)
			cmx_err("clmuxd at %s refused the session (its log says why, e.g. a quota "
				"of the tenant); the clmux platform is unavailable",
				spec);
		else
			cmx_err("cannot reach clmuxd at %s: %s; the clmux platform is unavailable",
				spec, cmx_dial_strerror(e));
		init_err = e;
		return;
	}
	cmx_session_set_floor(s, CMX_FIRST_GUEST_ID);
	cmx_icd.s = s;
	e = devices_load(s, &cmx_icd.devices, &cmx_icd.ndevices);
	if (e) {
		cmx_err("clmuxd at %s offers no usable device: %s", spec, strerror(-e));
		init_err = e;
	}
}

int cmx_icd_init(void)
{
	pthread_once(&init_once, icd_init);
	return init_err;
}

/*
 * A new session after the daemon (or the tenant's worker) died. Attempts
 * are spaced out: after a failed one the next waits REVIVE_FIRST_MS, then
 * twice that each time up to REVIVE_MAX_MS; a call that needs the daemon
 * waits out what is left of the gap and tries once, so it returns within
 * REVIVE_MAX_MS plus one connection attempt, and the first call after the
 * daemon is back finds it.
 */
#define REVIVE_FIRST_MS 50
#define REVIVE_MAX_MS 1000

static pthread_mutex_t revive_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t revive_next_ns, revive_gap_ms; /* under revive_lock */
static int revive_said; /* the first failure since the session ended is logged */
static int revive_forked; /* the session ended in this process's fork() */

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The same devices: the same ids in the same order, every answer the same
 * (so nothing the application or this ICD learnt of them has changed),
 * but the clock frequency, which some drivers (PoCL) read from the CPU's
 * current speed. */
static int devices_same(const struct _cl_device_id *a, cl_uint na,
			const struct _cl_device_id *b, cl_uint nb)
{
	if (na != nb)
		return 0;
	for (cl_uint i = 0; i < na; i++) {
		if (a[i].id != b[i].id || a[i].ninfo != b[i].ninfo)
			return 0;
		for (size_t k = 0; k < a[i].ninfo; k++) {
			const struct cmx_devinfo *x = &a[i].info[k], *y = &b[i].info[k];
			if (x->param != y->param || x->size != y->size)
				return 0;
			/* An empty answer's value is NULL (a record's bytes). */
			if (x->param != CL_DEVICE_MAX_CLOCK_FREQUENCY && x->size &&
			    memcmp(x->value, y->value, x->size))
				return 0;
		}
	}
	return 1;
}

/* Sessions whose daemon went away, and devices it no longer serves.
 * Another thread may still be inside a call on such a session, and the
 * application may hold such devices (they answer their queries), so they
 * are kept, not freed: a few hundred KiB per restart of the daemon. */
static void lost_keep(void *p)
{
	static void **lost;
	static unsigned nlost;
	void **n = realloc(lost, (nlost + 1) * sizeof(*n));

	if (n) {
		lost = n;
		lost[nlost++] = p;
	}
}

static int revive_locked(void)
{
	struct _cl_device_id *devs = NULL;
	struct cmx_session *s = NULL;
	char buf[512];
	const char *spec = cmx_dial_server(buf, sizeof(buf));
	uint64_t now = mono_ns(), floor;
	cl_uint n = 0;
	int e;

	if (now < revive_next_ns) {
		uint64_t left = revive_next_ns - now;
		struct timespec ts = { .tv_sec = (time_t)(left / 1000000000u),
				       .tv_nsec = (long)(left % 1000000000u) };
		nanosleep(&ts, NULL);
	}
	e = cmx_session_open(spec, &cmx_notify_ops, NULL, &s);
	if (!e) {
		e = devices_load(s, &devs, &n);
		if (e)
			cmx_session_close(s);
	}
	if (e) {
		revive_gap_ms = revive_gap_ms ? revive_gap_ms * 2 : REVIVE_FIRST_MS;
		if (revive_gap_ms > REVIVE_MAX_MS)
			revive_gap_ms = REVIVE_MAX_MS;
		revive_next_ns = mono_ns() + revive_gap_ms * 1000000u;
		if (!revive_said++)
			cmx_warn("cannot reach clmuxd at %s again yet: %s; new contexts fail with "
				 "CL_DEVICE_NOT_AVAILABLE until it is back",
				 spec, cmx_dial_strerror(e));
		else
			cmx_dbg("clmuxd at %s is not back: %s", spec, cmx_dial_strerror(e));
		return e;
	}
	revive_gap_ms = 0;
	revive_next_ns = 0;
	revive_said = 0;
	if (devices_same(cmx_icd.devices, cmx_icd.ndevices, devs, n)) {
		devices_free(devs, n);
	} else {
		/* The application may hold the old handles: they stay, answer
		 * their queries from what they were, and make no context. */
		for (cl_uint i = 0; i < cmx_icd.ndevices; i++)
			cmx_icd.devices[i].gone = 1;
		lost_keep(cmx_icd.devices);
		cmx_icd.devices = devs;
		cmx_icd.ndevices = n;
		cmx_warn("clmuxd at %s now serves other devices: device ids from before are no "
			 "longer available; clGetDeviceIDs gives the new ones", spec);
	}
	/* Ids handed out from here on are the new session's; every smaller
	 * one names a lost object (stale()). The floor is set before the
	 * session is published, so no thread sees the session without it. */
	floor = atomic_load(&cmx_icd.next_id);
	cmx_session_set_floor(s, floor);
	atomic_store(&cmx_icd.floor, floor);
	lost_keep(cmx_icd.s);
	cmx_icd.s = s;
	if (revive_forked)
		cmx_dbg("a child of fork(): a session of its own at %s; objects made before the "
			"fork are the parent's",
			spec);
	else
		cmx_warn("connected to clmuxd at %s again; objects made before are lost", spec);
	revive_forked = 0;
	return 0;
}

/*
 * A child of fork() has the ICD's state but not its threads, and the
 * session it inherits is the parent's, which the parent goes on using:
 * two processes writing one socket would garble both. The child lets go
 * of it (cmx_session_forked()) and treats it as a lost session: calls on
 * objects made before the fork fail as after a daemon's death, never
 * reaching the parent's connection, and its first new context opens a
 * session of its own (revive_locked()), on the same devices.
 */
static void forked(void)
{
	/* Held, perhaps, by a thread that did not come along. */
	pthread_mutex_init(&revive_lock, NULL);
	revive_next_ns = revive_gap_ms = 0;
	revive_said = 0;
	cmx_dial_forked();
	if (!cmx_icd.s)
		return;
	revive_forked = 1;
	cmx_session_forked(cmx_icd.s);
	atomic_store(&cmx_icd.floor, atomic_load(&cmx_icd.next_id));
}

int cmx_icd_revive(void)
{
	int e = cmx_icd_init();

	if (e || !cmx_session_broken(cmx_icd.s))
		return e;
	pthread_mutex_lock(&revive_lock);
	e = cmx_session_broken(cmx_icd.s) ? revive_locked() : 0;
	pthread_mutex_unlock(&revive_lock);
	return e;
}

/* ---- platform -------------------------------------------------------- */

CMX_EXPORT cl_int clIcdGetPlatformIDsKHR(cl_uint n, cl_platform_id *platforms, cl_uint *num)
{
	if ((!n && platforms) || (!platforms && !num))
		return CL_INVALID_VALUE;
	if (cmx_icd_init()) {
		if (num)
			*num = 0;
		return CL_PLATFORM_NOT_FOUND_KHR;
	}
	if (platforms)
		platforms[0] = &cmx_icd.platform;
	if (num)
		*num = 1;
	return CL_SUCCESS;
}

cl_int cmx_clGetPlatformIDs(cl_uint n, cl_platform_id *platforms, cl_uint *num)
{
	return clIcdGetPlatformIDsKHR(n, platforms, num);
}

cl_int cmx_clGetPlatformInfo(cl_platform_id p, cl_platform_info param, size_t size,
				    void *value, size_t *size_ret)
{
	static const cl_name_version ext[] = { { CL_MAKE_VERSION(1, 0, 0), "cl_khr_icd" } };
	cl_version numeric = CL_MAKE_VERSION(3, 0, 0);
	cl_ulong timer = 0;

	if (p && p != &cmx_icd.platform)
		return CL_INVALID_PLATFORM;
	switch (param) {
	case CL_PLATFORM_PROFILE:
		return cmx_info_str(size, value, size_ret, "FULL_PROFILE");
	case CL_PLATFORM_VERSION:
		return cmx_info_str(size, value, size_ret, PLATFORM_VERSION);
	case CL_PLATFORM_NUMERIC_VERSION:
		return cmx_info_copy(size, value, size_ret, &numeric, sizeof(numeric));
	case CL_PLATFORM_NAME:
		return cmx_info_str(size, value, size_ret, "clmux");
	case CL_PLATFORM_VENDOR:
		return cmx_info_str(size, value, size_ret, "clmux project");
	case CL_PLATFORM_EXTENSIONS:
		return cmx_info_str(size, value, size_ret, "cl_khr_icd");
	case CL_PLATFORM_EXTENSIONS_WITH_VERSION:
		return cmx_info_copy(size, value, size_ret, ext, sizeof(ext));
	case CL_PLATFORM_ICD_SUFFIX_KHR:
		return cmx_info_str(size, value, size_ret, "CLMUX");
	case CL_PLATFORM_HOST_TIMER_RESOLUTION:
		/* The guest's clock, where the device has a timer to
		 * calibrate it against; 0 (no host timer) elsewhere. */
		if (cmx_icd.s && cmx_icd.ndevices &&
		    !cmx_timer_read(cmx_icd.s, cmx_icd.devices[0].id, NULL, NULL)) {
			struct timespec res;
			clock_getres(CLOCK_MONOTONIC, &res);
			timer = (cl_ulong)res.tv_sec * 1000000000ull + (cl_ulong)res.tv_nsec;
			timer = timer ? timer : 1;
		}
		return cmx_info_copy(size, value, size_ret, &timer, sizeof(timer));
	}
	return CL_INVALID_VALUE;
}

/* The loader looks this one up by name too (cl_khr_icd: clIcdGetPlatformIDsKHR,
 * clGetPlatformInfo and clGetExtensionFunctionAddress). */
CMX_EXPORT cl_int clGetPlatformInfo(cl_platform_id p, cl_platform_info param, size_t size,
				    void *value, size_t *size_ret)
{
	return cmx_clGetPlatformInfo(p, param, size, value, size_ret);
}

cl_int cmx_clGetDeviceIDs(cl_platform_id p, cl_device_type type, cl_uint n,
				 cl_device_id *devices, cl_uint *num)
{
	cl_uint found = 0;

	if (p && p != &cmx_icd.platform)
		return CL_INVALID_PLATFORM;
	if ((!n && devices) || (!devices && !num))
		return CL_INVALID_VALUE;
	if (cmx_icd_init())
		return CL_INVALID_PLATFORM;
	/* A daemon that is not back yet: the devices last known (a context
	 * on them then fails with CL_DEVICE_NOT_AVAILABLE). */
	(void)cmx_icd_revive();
	pthread_mutex_lock(&revive_lock);
	for (cl_uint i = 0; i < cmx_icd.ndevices; i++) {
		cl_device_id d = &cmx_icd.devices[i];
		if (type == CL_DEVICE_TYPE_ALL || (d->type & type) ||
		    (type == CL_DEVICE_TYPE_DEFAULT && found == 0)) {
			if (devices && found < n)
				devices[found] = d;
			found++;
		}
	}
	pthread_mutex_unlock(&revive_lock);
	if (num)
		*num = found;
	return found ? CL_SUCCESS : CL_DEVICE_NOT_FOUND;
}

static int device_valid(cl_device_id d)
{
	return CMX_IS(d, CMX_MAGIC_DEVICE);
}

/* A device the current daemon does not serve: one of an earlier daemon's
 * other devices, or a sub-device made on an ended session. */
static int device_gone(cl_device_id d)
{
	for (; d; d = d->parent)
		if (d->gone || cmx_icd_stale(d->id))
			return 1;
	return 0;
}

cl_int cmx_clGetDeviceInfo(cl_device_id d, cl_device_info param, size_t size, void *value,
				  size_t *size_ret)
{
	const struct cmx_devinfo *i;

	if (!device_valid(d))
		return CL_INVALID_DEVICE;
	if (param == CL_DEVICE_REFERENCE_COUNT && d->parent) {
		cl_uint refs = atomic_load(&d->refs);
		return cmx_info_copy(size, value, size_ret, &refs, sizeof(refs));
	}
	if (param == CL_DEVICE_AVAILABLE && (device_gone(d) || cmx_session_broken(cmx_icd.s))) {
		cl_bool no = CL_FALSE;
		return cmx_info_copy(size, value, size_ret, &no, sizeof(no));
	}
	i = cmx_device_info(d, param);
	if (!i)
		return CL_INVALID_VALUE;
	return cmx_info_copy(size, value, size_ret, i->value, i->size);
}

/* The partition list's entries, its terminating 0 included (BY_COUNTS
 * holds its own 0 first: CL_DEVICE_PARTITION_BY_COUNTS_LIST_END); 0 when
 * it is longer than the wire takes. */
static size_t partition_len(const cl_device_partition_property *p, size_t max)
{
	size_t i = 0;

	if (p[0] == CL_DEVICE_PARTITION_BY_COUNTS) {
		for (i = 1; i < max && p[i] != CL_DEVICE_PARTITION_BY_COUNTS_LIST_END; i++)
			;
		i++;
	} else {
		while (i < max && p[i])
			i += 2;
	}
	return i < max ? i + 1 : 0;
}

/* The most sub-devices one call makes (the daemon's limit too). */
#define MAX_SUBDEVICES 64

cl_int cmx_clCreateSubDevices(cl_device_id d, const cl_device_partition_property *props,
				     cl_uint n, cl_device_id *out, cl_uint *num)
{
	struct cmx_CreateSubDevices_in in = { 0 };
	struct cmx_CreateSubDevices_out res = { 0 };
	uint64_t pl[64];
	cl_uint room = out ? (n < MAX_SUBDEVICES ? n : MAX_SUBDEVICES) : 0, count;
	struct cmx_reply r;
	size_t np;
	cl_int e;
	int rc;

	if (!device_valid(d) || device_gone(d))
		return CL_INVALID_DEVICE;
	if (!props || (out && !n) || !(np = partition_len(props, 64)))
		return CL_INVALID_VALUE;
	for (size_t i = 0; i < np; i++)
		pl[i] = (uint64_t)props[i];
	in.device.id = d->id;
	in.props.v = pl;
	in.props.n = np;
	in.devices.id = room ? cmx_new_ids(room) : 0;
	in.room = room;
	rc = cmx_rpc_CreateSubDevices(cmx_icd.s, &in, &res, &r);
	if (rc)
		return cmx_transport_err(rc);
	e = r.status;
	count = (cl_uint)res.count;
	cmx_reply_fini(&r);
	if (e)
		return e;
	if (room && count > room)
		return CL_INVALID_VALUE; /* a daemon that made more than asked */
	for (cl_uint i = 0; i < count && out; i++) {
		cl_device_id sd = calloc(1, sizeof(*sd));
		int le = sd ? device_load(cmx_icd.s, sd, in.devices.id + i, d) : -ENOMEM;

		if (le) {
			/* The daemon made them all; none reaches the application. */
			if (sd)
				cmx_subdevice_free(sd);
			for (cl_uint k = 0; k < count; k++) {
				if (k < i)
					cmx_clReleaseDevice(out[k]);
				else
					cmx_subdevice_release_id(in.devices.id + k);
			}
			return le == -ENOMEM ? CL_OUT_OF_HOST_MEMORY : CL_OUT_OF_RESOURCES;
		}
		/* A sub-device keeps its parent. */
		cmx_clRetainDevice(d);
		out[i] = sd;
	}
	if (num)
		*num = count;
	return CL_SUCCESS;
}

/* The guest's clock, calibrated against the device's timer (guest/timer.c);
 * a device without a timer gives the daemon's CL_INVALID_OPERATION. */
cl_int cmx_clGetDeviceAndHostTimer(cl_device_id d, cl_ulong *dev, cl_ulong *host)
{
	if (!device_valid(d) || device_gone(d))
		return CL_INVALID_DEVICE;
	if (!dev || !host)
		return CL_INVALID_VALUE;
	return cmx_timer_read(cmx_icd.s, d->id, dev, host);
}

cl_int cmx_clGetHostTimer(cl_device_id d, cl_ulong *host)
{
	if (!device_valid(d) || device_gone(d))
		return CL_INVALID_DEVICE;
	if (!host)
		return CL_INVALID_VALUE;
	return cmx_timer_read(cmx_icd.s, d->id, NULL, host);
}

/* ---- contexts -------------------------------------------------------- */

static cl_context context_create(const cl_context_properties *props, cl_uint ndev,
				 const cl_device_id *devs,
				 void(CL_CALLBACK *notify)(const char *, const void *, size_t, void *),
				 void *user_data, cl_int *errcode)
{
	uint64_t pl[64], dev_ids[64];
	struct cmx_CreateContext_in in = { 0 };
	size_t np = 0, nprops = 0;
	cl_context c;
	cl_int e = CL_SUCCESS;

	if (cmx_icd_init()) {
		e = CL_INVALID_PLATFORM;
		goto fail;
	}
	if (!ndev || !devs || ndev > 64 || (!notify && user_data)) {
		e = CL_INVALID_VALUE;
		goto fail;
	}
	for (cl_uint i = 0; i < ndev; i++) {
		if (!device_valid(devs[i])) {
			e = CL_INVALID_DEVICE;
			goto fail;
		}
		dev_ids[i] = devs[i]->id;
	}
	/* A new context is where an application starts again after its
	 * daemon died: a new session, if the daemon is back. */
	if (cmx_icd_revive()) {
		e = CL_DEVICE_NOT_AVAILABLE;
		goto fail;
	}
	for (cl_uint i = 0; i < ndev; i++) {
		if (device_gone(devs[i])) {
			e = CL_DEVICE_NOT_AVAILABLE;
			goto fail;
		}
	}
	for (; props && props[nprops]; nprops += 2) {
		if (nprops >= 60) {
			e = CL_INVALID_PROPERTY;
			goto fail;
		}
		switch (props[nprops]) {
		case CL_CONTEXT_PLATFORM:
			if ((cl_platform_id)props[nprops + 1] != &cmx_icd.platform) {
				e = CL_INVALID_PLATFORM;
				goto fail;
			}
			break;
		case CL_CONTEXT_INTEROP_USER_SYNC:
			pl[np++] = (uint64_t)props[nprops];
			pl[np++] = (uint64_t)props[nprops + 1];
			break;
		default:
			e = CL_INVALID_PROPERTY;
			goto fail;
		}
		for (size_t k = 0; k < nprops; k += 2)
			if (props[k] == props[nprops]) {
				e = CL_INVALID_PROPERTY;
				goto fail;
			}
	}
	c = cmx_object_new(sizeof(*c), CMX_MAGIC_CONTEXT);
	if (!c || !(c->devices = malloc(ndev * sizeof(*devs))) ||
	    !(c->props = malloc((nprops + 1) * sizeof(*props)))) {
		if (c) {
			free(c->devices);
			free(c);
		}
		e = CL_OUT_OF_HOST_MEMORY;
		goto fail;
	}
	memcpy(c->devices, devs, ndev * sizeof(*devs));
	c->ndevices = ndev;
	if (props)
		memcpy(c->props, props, (nprops + 1) * sizeof(*props));
	c->nprops = props ? nprops + 1 : 0;
	c->notify = notify;
	c->notify_data = user_data;
	pthread_mutex_init(&c->lock, NULL);
	in.context.id = c->id;
	in.props.v = pl;
	in.props.n = np;
	in.devices.v = dev_ids;
	in.devices.n = ndev;
	in.notify = notify ? (uint64_t)(uintptr_t)c : 0;
	e = CMX_SEND(CreateContext, &in);
	if (e) {
		free(c->props);
		free(c->devices);
		free(c);
		goto fail;
	}
	/* Sub-devices live as long as a context on them. */
	for (cl_uint i = 0; i < ndev; i++)
		cmx_clRetainDevice(devs[i]);
	if (errcode)
		*errcode = CL_SUCCESS;
	return c;
fail:
	if (errcode)
		*errcode = e;
	return NULL;
}

cl_context cmx_clCreateContext(const cl_context_properties *props, cl_uint ndev,
				      const cl_device_id *devs,
				      void(CL_CALLBACK *notify)(const char *, const void *, size_t,
								void *),
				      void *user_data, cl_int *errcode)
{
	return context_create(props, ndev, devs, notify, user_data, errcode);
}

cl_context cmx_clCreateContextFromType(const cl_context_properties *props,
					      cl_device_type type,
					      void(CL_CALLBACK *notify)(const char *, const void *,
									size_t, void *),
					      void *user_data, cl_int *errcode)
{
	cl_device_id devs[64];
	cl_uint n = 0;
	cl_int e;

	if (cmx_icd_init()) {
		if (errcode)
			*errcode = CL_INVALID_PLATFORM;
		return NULL;
	}
	e = cmx_clGetDeviceIDs(NULL, type, 64, devs, &n);
	if (e) {
		if (errcode)
			*errcode = e == CL_INVALID_VALUE ? CL_INVALID_DEVICE_TYPE : e;
		return NULL;
	}
	return context_create(props, n < 64 ? n : 64, devs, notify, user_data, errcode);
}
