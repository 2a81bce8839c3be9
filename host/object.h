// SPDX-License-Identifier: MIT
// A guest-visible object as the daemon holds it: kind, native handle, charges.
#ifndef CMX_HOST_OBJECT_H
#define CMX_HOST_OBJECT_H

#include <stdint.h>

struct cmx_rec;

struct cmx_obj {
	uint64_t id;	/* the guest's id, unique in its session */
	uint8_t kind;	/* enum cmx_kind */
	int32_t err;	/* != 0: creation failed with this cl_int ("poisoned") */
	void *h;	/* the native cl_* handle; NULL when poisoned */
	void *ctx;	/* native context of queues, buffers, programs, events */
	uint64_t bytes; /* device memory charged to the session */
	uint64_t size;	/* buffers: size in bytes */
	uint64_t flags; /* queues: CL_QUEUE_PROPERTIES; others: CMX_OBJ_* */
	void *last;	/* in-order queues: the last command's native event */
	/* What handlers check later calls against, freed with the object
	 * (host/release.c): kernels' arguments (host/exec_kernel.c), images'
	 * shapes (host/exec_image.c), contexts' and queues' zeroing
	 * (host/zero.c); NULL for the other kinds. */
	void *ext;
	void *cbs;	/* events: their callbacks (host/exec_event.c), or NULL */
	struct cmx_rec *recs; /* the requests that made and changed it (host/record.c) */
};

/* flags of programs and kernels: it may call printf (host/kprintf.c). */
#define CMX_OBJ_PRINTS 0x1
/* flags of devices: a sub-device, released natively with its id. */
#define CMX_OBJ_SUBDEVICE 0x2
/* flags of events: a command's wait list named it (host/eventstate.c). */
#define CMX_OBJ_WAITED 0x4

#endif
