// SPDX-License-Identifier: MIT
// The ICD's objects (the cl_* handles the application holds) and what
// every kind shares: creation, kind checks, wait lists, query answers
// (guest/object.c; sub-devices: guest/context.c).
#ifndef CMX_GUEST_OBJECT_H
#define CMX_GUEST_OBJECT_H

#include <CL/cl.h>
#include <CL/cl_icd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

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

/* The standard param_value_size / param_value / param_value_size_ret dance. */
cl_int cmx_info_copy(size_t size, void *value, size_t *size_ret, const void *src, size_t n);
cl_int cmx_info_str(size_t size, void *value, size_t *size_ret, const char *s);
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

/* A sub-device's memory, and the release of its daemon id (guest/context.c). */
void cmx_subdevice_free(cl_device_id d);
void cmx_subdevice_release_id(uint64_t id);

#endif
