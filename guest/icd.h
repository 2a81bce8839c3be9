// SPDX-License-Identifier: MIT
// The clmux platform and its session: what every entry point uses to
// reach the daemon (the platform object, ids, sending, replies, errors).
//
// The files of guest/ lie in layers, each using only those below it
// (guest/tests/layers.sh checks the built objects), bottom first: the
// environment (env.c: the ICD's CLMUX_* numbers, read once); the
// transport (copy.c, area.c, ivshmem.c, tls.c, dial.c, lane.c, session.c);
// objects (object.c: ids, wait lists, queries; context.c; track.c: what
// waits for a notification); queues and events (queue.c, event.c);
// commands (command.c: wait list, event, pending reads); buffer memory
// (mapping.c, mem.c, transfer.c, rect.c); the notification thread
// (notify.c); the platform and its devices (icd.c); images (image.c);
// maps (map.c); programs and kernels (include.c, program.c, kernel.c,
// cmdbuf.c); and at the top the loader's table (dispatch.c), which every
// object points to. Each header of guest/ declares what its layer's files
// define: object.h (objects), track.h (what waits for a notification),
// command.h (queues, events, commands), mem.h (buffer memory), image.h,
// program.h (programs, kernels, command buffers), and this one (the
// platform: icd.c and the session data object.c keeps).
#ifndef CMX_GUEST_ICD_H
#define CMX_GUEST_ICD_H

#include <CL/cl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "object.h"
#include "session.h"
#include "stubs.gen.h"

/* The one clmux platform and its session. */
struct cmx_icd {
	struct _cl_platform_id platform;
	/* The current session; replaced (never freed) when a new context is
	 * asked for after it ended (cmx_icd_revive()). */
	_Atomic(struct cmx_session *) s;
	cl_uint ndevices;
	struct _cl_device_id *devices;
	atomic_uint_fast64_t next_id;
	/* The first id of the current session's objects: smaller ids name
	 * objects of an ended session. */
	atomic_uint_fast64_t floor;
	/* Notification thread <-> waiting threads (data landing). */
	pthread_mutex_t wait_lock;
	pthread_cond_t wait_cond;
};

extern struct cmx_icd cmx_icd;
/* The table every object points to (guest/dispatch.c, the layer above all
 * others): it names every entry point, so the files below learn it from
 * the platform (cmx_icd.platform.dispatch), which it sets at load. */
extern const struct _cl_icd_dispatch cmx_dispatch;

/* 0 when the platform is up (connecting on first use), else -errno. */
int cmx_icd_init(void);
/* As cmx_icd_init(), and when the session has ended (the daemon or its
 * worker died), a new one on the daemon that serves now: 0 when the
 * session is live, else -errno. Objects of the ended one stay lost. */
int cmx_icd_revive(void);

/* Whether an id names an object of an ended session. */
static inline int cmx_icd_stale(uint64_t id)
{
	return id >= CMX_FIRST_GUEST_ID && id < atomic_load(&cmx_icd.floor);
}

/* Whether the object with this id is gone with the daemon that held it:
 * made on an earlier session, or on the current one, which has ended. */
static inline int cmx_icd_lost(uint64_t id)
{
	return cmx_icd_stale(id) || cmx_session_broken(cmx_icd.s);
}

static inline uint64_t cmx_new_id(void)
{
	return atomic_fetch_add(&cmx_icd.next_id, 1);
}

/* n consecutive ids; the first. */
static inline uint64_t cmx_new_ids(uint64_t n)
{
	return atomic_fetch_add(&cmx_icd.next_id, n);
}

/* A transport failure (-errno) as the cl_int the spec allows everywhere. */
static inline cl_int cmx_transport_err(int e)
{
	return e == -ENOMEM ? CL_OUT_OF_HOST_MEMORY : CL_OUT_OF_RESOURCES;
}

/* Sends an async call; returns CL_SUCCESS or the transport's error. */
#define CMX_SEND(name, in, ...) \
	(cmx_send_##name(cmx_icd.s, (in), ##__VA_ARGS__) ? CL_OUT_OF_RESOURCES : CL_SUCCESS)

/* The end of a forwarded query: the transport's error (rc), else the
 * daemon's status, with its value copied out on success; finishes the
 * reply. */
static inline cl_int cmx_info_reply(int rc, struct cmx_reply *reply, const struct cmx_blob *v,
				    size_t size, void *value, size_t *size_ret)
{
	cl_int e;

	if (rc)
		return cmx_transport_err(rc);
	e = reply->status;
	if (e == CL_SUCCESS)
		e = cmx_info_copy(size, value, size_ret, v->ptr, v->len);
	cmx_reply_fini(reply);
	return e;
}

/* The end of an entry point that returns an object: *errcode_ret (when
 * given) and the object, NULL on failure. */
static inline void *cmx_fail(cl_int *errcode_ret, cl_int e)
{
	if (errcode_ret)
		*errcode_ret = e;
	return NULL;
}

static inline void *cmx_succeed(cl_int *errcode_ret, void *p)
{
	if (errcode_ret)
		*errcode_ret = CL_SUCCESS;
	return p;
}

/* Sleeps, wait_lock held, until the notification thread lands some data
 * or 100 ms pass (a broken session lands nothing more; guest/object.c). */
void cmx_icd_wait_landing(void);
/* The notification thread's entry (guest/notify.c). */
extern const struct cmx_notify_ops cmx_notify_ops;

/* Device info lookup in the cache: NULL when the device has no such query. */
const struct cmx_devinfo *cmx_device_info(cl_device_id d, cl_uint param);

#endif
