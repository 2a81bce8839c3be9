// SPDX-License-Identifier: MIT
// The clmux ICD's objects and the helpers every entry point shares.
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
// object points to. Each declaration below names the file defining it
// where that is not the section's.
#ifndef CMX_GUEST_ICD_H
#define CMX_GUEST_ICD_H

#include <CL/cl.h>
#include <errno.h>
#include <CL/cl_icd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "session.h"
#include "mayprint.h"
#include "stubs.gen.h"

/*
 * Every object starts with the loader's dispatch pointer (cl_khr_icd), then
 * a magic that tells its kind, its guest-chosen id (the name the daemon
 * knows it by) and the application's reference count. The count lives only
 * here: the daemon hears of an object again only when the count reaches
 * zero (Release*).
 */
#define CMX_OBJECT_HEAD                  \
	const struct _cl_icd_dispatch *dispatch; \
	uint32_t magic;                  \
	atomic_uint refs;                \
	uint64_t id

enum {
	CMX_MAGIC_PLATFORM = 0x636d7850,
	CMX_MAGIC_DEVICE = 0x636d7844,
	CMX_MAGIC_CONTEXT = 0x636d7843,
	CMX_MAGIC_QUEUE = 0x636d7851,
	CMX_MAGIC_MEM = 0x636d784d,
	CMX_MAGIC_PROGRAM = 0x636d7872,
	CMX_MAGIC_KERNEL = 0x636d784b,
	CMX_MAGIC_EVENT = 0x636d7845,
	CMX_MAGIC_SAMPLER = 0x636d7853,
	CMX_MAGIC_CMDBUF = 0x636d7842,
};

/* One immutable device query answer, from GetDeviceInfoAll. */
struct cmx_devinfo {
	uint32_t param;
	uint32_t size;
	const void *value;
};

struct _cl_platform_id {
	CMX_OBJECT_HEAD;
};

struct _cl_device_id {
	CMX_OBJECT_HEAD;
	cl_device_type type;
	struct cmx_devinfo *info; /* sorted by param */
	size_t ninfo;
	void *info_blob;
	/* Often-checked limits, taken from info. */
	cl_uint max_dims;
	size_t max_wg_size, max_wi_sizes[3];
	cl_uint mem_base_addr_align; /* bits */
	cl_ulong max_alloc;
	/* Sub-devices (clCreateSubDevices): their parent, NULL for the
	 * daemon's devices, which live as long as the platform. */
	cl_device_id parent;
	void *owned[6]; /* answers made here (dev_alloc()), freed with it */
	/* A daemon that came back serves another device: this handle stays
	 * (the application may hold it) but makes no context. */
	int gone;
};

/* One clGetSupportedImageFormats answer, cached on its context (made by
 * guest/image.c, freed with the context by guest/context.c). */
struct cmx_formats {
	struct cmx_formats *next;
	cl_mem_flags flags;
	cl_mem_object_type type;
	cl_uint n;
	cl_image_format v[];
};

struct _cl_context {
	CMX_OBJECT_HEAD;
	cl_uint ndevices;
	cl_device_id *devices;
	cl_context_properties *props; /* as the application gave them */
	size_t nprops;		      /* entries, the terminating 0 included */
	void(CL_CALLBACK *notify)(const char *, const void *, size_t, void *);
	void *notify_data;
	struct cmx_destructor *destructors; /* clSetContextDestructorCallback */
	struct cmx_formats *formats;	    /* clGetSupportedImageFormats answers */
	pthread_mutex_t lock;
};

struct _cl_command_queue {
	CMX_OBJECT_HEAD;
	cl_context ctx;
	cl_device_id device;
	cl_command_queue_properties props;
	cl_queue_properties *prop_list; /* clCreateCommandQueueWithProperties */
	size_t nprop_list;
	/* Non-blocking reads whose data has not landed yet (clFinish waits). */
	atomic_uint pending;
	/* clFinish calls: tickets taken as each starts, and the highest of a
	 * finish that returned CL_SUCCESS (what a command buffer's replay
	 * enqueued before a ticket was taken has completed; guest/cmdbuf.c). */
	atomic_uint finish_seq, finished_upto;
};

struct cmx_mapping; /* guest/mem.h */

struct _cl_mem {
	CMX_OBJECT_HEAD;
	cl_context ctx;
	cl_mem_object_type type;
	cl_mem_flags flags;
	size_t size;
	void *host_ptr;	  /* CL_MEM_USE_HOST_PTR */
	cl_mem parent;	  /* sub-buffers */
	size_t origin;
	/* CL_MEM_ALLOC_HOST_PTR buffers in the shared area's heap: the offset
	 * of the storage (a sub-buffer's own start), else 0. */
	uint64_t area_off;
	struct cmx_garea *heap; /* the heap area_off is in (its session's) */
	atomic_uint map_count;
	struct cmx_mapping *maps;
	/* The memory of the last map, kept for the next (lock): a new
	 * allocation as large as the buffer is fresh pages to fault in on
	 * every map, where a CPU driver's map is the buffer itself. */
	void *spare;
	size_t spare_size;
	struct cmx_destructor *destructors;
	cl_mem_properties *props;
	size_t nprops;
	struct cmx_image *image; /* images only (guest/image.c) */
	pthread_mutex_t lock;
};

/* What an image's commands are checked against. A 1D image buffer or 2D
 * image over a memory object keeps that object as its mem's `parent`. */
struct cmx_image {
	cl_image_format format;
	cl_image_desc desc; /* as given; desc.buffer is the guest's object */
	size_t elem;	    /* bytes per pixel */
};

struct _cl_sampler {
	CMX_OBJECT_HEAD;
	cl_context ctx;
	cl_bool normalized;
	cl_addressing_mode addressing;
	cl_filter_mode filter;
	cl_sampler_properties props[7]; /* clCreateSamplerWithProperties' list */
	size_t nprops;			/* entries, the terminating 0 included */
};

/* What BuildProgram's reply says of one kernel. */
struct cmx_arginfo {
	cl_kernel_arg_address_qualifier address;
	cl_kernel_arg_access_qualifier access;
	cl_kernel_arg_type_qualifier type_qual;
	const char *type_name;
	const char *name;
	size_t value_size; /* 0: unknown (a struct): not checked */
};

struct cmx_kinfo {
	const char *name;
	const char *attributes;
	cl_uint nargs;
	struct cmx_arginfo *args;
	/* CL_KERNEL_COMPILE_WORK_GROUP_SIZE from the daemon; reqd_known 0
	 * (a KernelInfo record without it): read from the attributes. */
	size_t reqd[3];
	int reqd_known;
};

struct _cl_program {
	CMX_OBJECT_HEAD;
	cl_context ctx;
	char *source; /* NUL-terminated, NULL for binaries */
	size_t source_len;
	void *il;
	size_t il_len;
	cl_uint ndevices;
	cl_device_id *devices;
	/* Set by a successful build or link, under lock. */
	pthread_mutex_t lock;
	cl_uint nkernels;
	struct cmx_kinfo *kernels;
	void *kernels_blob;
	atomic_uint kernels_alive; /* clBuildProgram fails while kernels exist */
	int built;
	cl_program_binary_type binary_type;
	char *options;
	/* It may call printf (cmx_may_print(), as the daemon judges it): its
	 * launches expect KernelOutput. Set before kernels exist, only grows. */
	int may_print;
};

struct _cl_kernel {
	CMX_OBJECT_HEAD;
	cl_program program;
	const struct cmx_kinfo *info;
	uint64_t *arg_set; /* bitmap of arguments given */
	pthread_mutex_t lock;
};

struct cmx_event_cb; /* guest/event.c */

struct _cl_event {
	CMX_OBJECT_HEAD;
	cl_context ctx;
	cl_command_queue queue; /* NULL for user events */
	cl_command_type type;
	/* Data of a non-blocking read or map still on its way: the event is
	 * not complete for the application until it has landed. */
	atomic_int data_pending;
	int32_t data_status;
	struct cmx_event_cb *after_data; /* callbacks held back until then */
	pthread_mutex_t lock;
};

struct cmx_destructor {
	void(CL_CALLBACK *fn)(void *obj, void *user_data);
	void *user_data;
	struct cmx_destructor *next;
};

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

/* The standard param_value_size / param_value / param_value_size_ret dance. */
cl_int cmx_info_copy(size_t size, void *value, size_t *size_ret, const void *src, size_t n);
cl_int cmx_info_str(size_t size, void *value, size_t *size_ret, const char *s);
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

/* Fresh object of a kind, dispatch and magic set, refs 1, a new id. */
void *cmx_object_new(size_t size, uint32_t magic);

/* Object checks: true when o is a live object of that kind. */
#define CMX_IS(o, MAGIC) ((o) && (o)->magic == (MAGIC))

/* Wait lists: checks them (CL_INVALID_EVENT_WAIT_LIST, CL_INVALID_CONTEXT
 * when ctx is given and differs) and fills ids (at most n, caller's). */
cl_int cmx_wait_ids(cl_uint n, const cl_event *list, cl_context ctx, uint64_t *ids);
/* A wait list's ids, on the stack up to 32 entries. */
struct cmx_waitlist {
	uint64_t small[32];
	uint64_t *ids;
	cl_uint n;
};
cl_int cmx_waitlist_init(struct cmx_waitlist *w, cl_uint n, const cl_event *list, cl_context ctx);
void cmx_waitlist_fini(struct cmx_waitlist *w);

/* The event a command returns to the application (NULL when it asked for
 * none): a new guest event bound to q. Sets *id to its id or 0. */
cl_event cmx_event_for(cl_event *want, cl_command_queue q, cl_command_type type, uint64_t *id);
/* Drops an event made by cmx_event_for() when the command was refused. */
void cmx_event_discard(cl_event e);
/* Blocks until every listed event's data has landed (guest/event.c). */
void cmx_events_wait_data(cl_uint n, const cl_event *list);
/* Blocks until q's non-blocking reads have landed (guest/queue.c). */
void cmx_queue_wait_data(cl_command_queue q);
/* Sleeps, wait_lock held, until the notification thread lands some data
 * or 100 ms pass (a broken session lands nothing more; guest/object.c). */
void cmx_icd_wait_landing(void);
/* The notification thread's entry (guest/notify.c). */
extern const struct cmx_notify_ops cmx_notify_ops;

/*
 * Something that waits for a notification of one session: a non-blocking
 * read's data, an event callback. When that session ends without sending
 * it (the daemon or its worker died), lost() settles it, once, on the
 * session's notification thread (guest/notify.c).
 */
struct cmx_track {
	struct cmx_track *prev, *next; /* under the registry's lock */
	struct cmx_session *s;	       /* the session it was sent on */
	void (*lost)(struct cmx_track *t);
	int listed;
};
#define CMX_TRACK_RECV 0x1u  /* the call reserves room for len bytes of data */
#define CMX_TRACK_FLUSH 0x2u /* sent at once, not left in the batch */
/* Sends an async call on the current session with t listed on it. 0, or
 * -errno: not sent, and t not listed. */
int cmx_track_send(struct cmx_track *t, void (*lost)(struct cmx_track *),
		   const struct cmx_msgdesc *d, const void *in, unsigned flags, uint64_t len,
		   uint64_t *area_off);
/* t's notification arrived (or it was never sent): unlists it. */
void cmx_track_end(struct cmx_track *t);
/* Session s has ended: settles every record sent on it (lost()). */
void cmx_track_sweep(struct cmx_session *s);

/* A pending non-blocking read: its tag on the wire is this struct's address. */
struct cmx_pending_read {
	struct cmx_track track; /* first: pending_lost() casts */
	void *dst;	       /* where the bytes land */
	uint64_t len;
	uint64_t area_off;     /* the session's area block they came through, or 0 */
	cl_event event;	       /* retained; may be NULL */
	cl_command_queue queue; /* its pending count is decremented */
	/* Rect reads land packed in `dst` and are spread into `out`. */
	void *out;
	size_t region[3], row_pitch, slice_pitch;
	void (*finish)(struct cmx_pending_read *r, int status); /* optional */
	void *arg;
};
/* Called by the notification thread when a read's data has landed
 * (guest/command.c). */
void cmx_read_landed(struct cmx_pending_read *r, int status);
void cmx_event_data_done(cl_event e, int status);

/* Reference counting helpers (each kind's release lives with the kind). */
cl_int cmx_clRetainEvent(cl_event e);
cl_int cmx_clReleaseEvent(cl_event e);

/* A sub-device's memory, and the release of its daemon id (guest/context.c). */
void cmx_subdevice_free(cl_device_id d);
void cmx_subdevice_release_id(uint64_t id);

/* Device info lookup in the cache: NULL when the device has no such query. */
const struct cmx_devinfo *cmx_device_info(cl_device_id d, cl_uint param);

/* ---- guest/mem.c, command.c and rect.c, shared with guest/image.c ---- */

/* One command: its wait list and the event it returns. */
struct cmx_cmd {
	struct cmx_waitlist w;
	cl_event ev;	/* the application's event, or NULL */
	uint64_t ev_id; /* its id on the wire, 0 for none */
	cl_event *want;
};
#define CMD_WAIT(c) ((struct cmx_refs){.v = (c)->w.ids, .n = (c)->w.n})

/* The last check (the wait list), then the command's event. */
cl_int cmx_cmd_begin(struct cmx_cmd *c, cl_command_queue q, cl_uint n, const cl_event *list,
		     cl_event *want, cl_command_type type);
/* Hands the event over, or drops it when the command was not sent. */
cl_int cmx_cmd_end(struct cmx_cmd *c, cl_int e);
/* After a blocking command: non-blocking reads it followed have landed. */
void cmx_blocking_done(cl_command_queue q, cl_uint n, const cl_event *list);
/* A sync call's status (or the transport's error); finishes the reply. */
cl_int cmx_reply_status(int e, struct cmx_reply *r);
/* A non-blocking read about to be sent, and its undoing if it is not. */
struct cmx_pending_read *cmx_pending_new(cl_command_queue q, cl_event ev, void *dst,
					 uint64_t len);
void cmx_pending_cancel(struct cmx_pending_read *p);
/* Sends the read (recv: d reserves room for p->len bytes of data) with p
 * tracked; on failure p is cancelled. CL_SUCCESS or CL_OUT_OF_RESOURCES. */
cl_int cmx_pending_send(struct cmx_pending_read *p, const struct cmx_msgdesc *d, const void *in,
			int recv);
/* The checks of clEnqueueCopyBuffer and clEnqueueFillBuffer before their
 * wait lists (command buffers record the same commands). */
cl_int cmx_copy_buffer_check(cl_command_queue q, cl_mem src, cl_mem dst, size_t soff, size_t doff,
			     size_t size);
cl_int cmx_fill_buffer_check(cl_command_queue q, cl_mem m, const void *pattern, size_t psize,
			     size_t off, size_t size);
/* clEnqueueCopyBufferRect's; the pitches given 0 become their defaults. */
cl_int cmx_copy_buffer_rect_check(cl_command_queue q, cl_mem src, cl_mem dst, const size_t *so,
				  const size_t *dor, const size_t *region, size_t *srow,
				  size_t *sslice, size_t *drow, size_t *dslice);
/* The checks of clEnqueueNDRangeKernel before its wait list (guest/kernel.c). */
cl_int cmx_kernel_launch_check(cl_command_queue q, cl_kernel k, cl_uint dim, const size_t *offset,
			       const size_t *global, const size_t *local);
/* cl_khr_command_buffer's entry points by name, or NULL (guest/cmdbuf.c). */
void *cmx_cmdbuf_function(const char *name);
/* CL_MEM_* flags: CL_INVALID_VALUE for unknown bits or conflicts. */
cl_int cmx_mem_flags_check(cl_mem_flags f);
/* CL_INVALID_OPERATION where CL_MEM_HOST_* forbids the access. */
cl_int cmx_mem_host_access(cl_mem m, int reads, int writes);
cl_mem cmx_mem_new(cl_context ctx, cl_mem_flags flags, size_t size);
void cmx_mem_free(cl_mem m);

/* ---- guest/image.c ---- */

/* The row and slice pitches of an image's host_ptr (defaults filled). */
void cmx_image_host_pitches(cl_mem m, size_t *row, size_t *slice);
/* Bytes per pixel of a format, 0 for a format the spec does not define. */
size_t cmx_image_elem_size(const cl_image_format *f);
/* An image command's checks: queue, image, context, device support. */
cl_int cmx_image_check(cl_command_queue q, cl_mem m);
/* origin + region inside m (CL_INVALID_VALUE otherwise). */
cl_int cmx_image_region_check(cl_mem m, const size_t *origin, const size_t *region);
/* Reads a packed region into dst; non-blocking, finish(arg) runs when it
 * has landed. Writes packed data (which leaves with the command). */
cl_int cmx_image_read_packed(cl_command_queue q, cl_mem m, cl_bool blocking, const size_t *origin,
			     const size_t *region, void *dst, struct cmx_cmd *c,
			     void (*finish)(struct cmx_pending_read *, int), void *arg);
cl_int cmx_image_write_packed(cl_command_queue q, cl_mem m, cl_bool blocking, const uint64_t o[3],
			      const uint64_t r[3], const void *data, size_t len, struct cmx_cmd *c);

/* Build options as the daemon gets them (guest/include.c): each -I DIR
 * names a directory whose headers were just sent for p. *wire: malloc'd. */
cl_int cmx_include_prepare(cl_program p, const char *opts, char **wire);

/* Whether d is one of p's devices (guest/program.c). */
int cmx_program_has_device(cl_program p, cl_device_id d);

#endif
