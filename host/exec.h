// SPDX-License-Identifier: MIT
// What the handlers (host/exec_*.c) share: events, queue flushes, the
// executor's drive lock, argument checks. Deferring a call: defer.h.
#ifndef CMX_HOST_EXEC_H
#define CMX_HOST_EXEC_H

#include <CL/cl.h>
#include <CL/cl_ext.h>
#include <stdlib.h>

#include "call.h"
#include "object.h"
#include "proto.gen.h"
#include "server.h"
#include "session.h"

/* Wait lists as native arrays. */
#define WAIT(r) (cl_uint)(r).n, (r).n ? (const cl_event *)(r).h : NULL

/* Every enqueue asks for its command's native event and hands it here
 * (the reference with it): the guest's event id gets it when the guest
 * asked for one (ev->id != 0), and an in-order queue remembers it as its
 * last command, which clFinish waits for. The call's first argument is the
 * queue. */
void cmx_event_bind(struct cmx_call *c, const struct cmx_ref *ev, cl_event e);
/* The guest releases an event object: callbacks registered on it still
 * come, and are answered (host/exec_event.c). Loop thread. */
void cmx_event_cbs_detach(struct cmx_obj *o);

/* The ext of an event a restore made (host/eventstate.c): its native
 * event is a user event set as the command ended, and what the command's
 * own event answered is kept here. */
struct cmx_event_past {
	cl_command_type type;
	unsigned prof_have; /* bit i: prof[i] is CL_PROFILING_COMMAND_QUEUED + i's */
	cl_ulong prof[5];
};
/* A checkpoint: o's callbacks whose status its event has reached
 * (status: CL_COMPLETE, an error, or a user event's own) are answered
 * now, by this daemon, so that only those still waiting are written. */
void cmx_event_cbs_reached(struct cmx_obj *o, cl_int status);
/* Each callback on o not answered yet: fn(arg, its status, its tag). */
void cmx_event_cbs_each(struct cmx_obj *o, void (*fn)(void *arg, unsigned type, uint64_t tag),
			void *arg);
/* A callback on o for the guest's tag when o reaches type, as
 * SetEventCallback registers one: 0 or a cl error. */
cl_int cmx_event_cb_add(struct cmx_session *s, struct cmx_obj *o, unsigned type, uint64_t tag);

/* clFlush on the loop, except where the driver runs the queue inside it
 * (struct cmx_server's flush_runs): there an executor's wait does. */
void cmx_queue_flush(const struct cmx_server *srv, cl_command_queue q);
/* The same before a wait: skipped where the driver submits at enqueue. */
void cmx_queue_flush_to_wait(const struct cmx_server *srv, cl_command_queue q);

/*
 * Around every call an executor makes to run the queue (clWaitForEvents,
 * clFlush), on a driver that runs its queue inside them (struct
 * cmx_server's flush_runs): Oclgrind runs commands in the calling thread
 * and is not thread-safe, so two executors driving it at once ran one
 * kernel twice (its assertion `m_kernelInvocation == NULL` aborted the
 * daemon). No-ops elsewhere. A wait that spins on a user event holds the
 * lock; user events are set on the loop, which never takes it.
 */
void cmx_exec_drive_lock(struct cmx_server *srv);
/* The handlers' state in srv (the drive lock, the completions table), once
 * srv->loop is made. */
void cmx_exec_init(struct cmx_server *srv);
void cmx_exec_drive_unlock(struct cmx_server *srv);

/*
 * On a driver that calls completion callbacks only when the whole wait
 * that ran the command returns (flush_runs: Oclgrind), that wait can spin
 * on a user event which is set only once such a callback has come: the
 * next printing kernel's gate, the gate of an area buffer's non-blocking
 * write. Whoever waits for callbacks there also reads statuses on a loop
 * timer: cmx_exec_poll_start(fn) has fn run every 1 ms, doubling to 16 ms
 * while nothing completes; fn returns 1 when it saw a command complete, 0
 * when it still watches one, -1 when it watches nothing (it is dropped
 * until started again). No-op on other drivers. Loop thread.
 */
void cmx_exec_poll_start(struct cmx_server *srv, int (*fn)(struct cmx_server *srv));

/*
 * A native clGet*Info answer as the reply's `value`: the call runs twice,
 * for the size and then into c->scratch, zeroed first (a driver may write
 * less than the size it gave). FN(ARGS..., size, value, size_ret) is the
 * native query; evaluates to its cl_int.
 */
#define CMX_INFO(c, value, FN, ...)                                                                \
	({                                                                                         \
		size_t size_ = 0;                                                                  \
		cl_int e_ = FN(__VA_ARGS__, 0, NULL, &size_);                                      \
		if (e_ == CL_SUCCESS) {                                                            \
			(c)->scratch = calloc(1, size_ ? size_ : 1);                               \
			e_ = (c)->scratch ? FN(__VA_ARGS__, size_, (c)->scratch, NULL)             \
					  : CL_OUT_OF_HOST_MEMORY;                                 \
		}                                                                                  \
		if (e_ == CL_SUCCESS) {                                                            \
			(value)->ptr = (c)->scratch;                                               \
			(value)->len = size_;                                                      \
		}                                                                                  \
		e_;                                                                                \
	})

/* A payload command's native part is enqueued (host/exec_mem.c): a write's
 * staging is freed, or a read's staged data sent (reply or ReadDone), when
 * ev completes; e is the enqueue's status. */
int cmx_write_staged(struct cmx_call *c, cl_int e, cl_event ev, const struct cmx_ref *guest_ev,
		     int sync);
int cmx_read_staged(struct cmx_call *c, cl_int e, cl_event ev, const struct cmx_ref *guest_ev,
		    int sync);
/* A buffer write or read through a pinned slot (host/exec_pinned.c), where
 * the daemon has a pool (a GPU's) and size suits it; CMX_PINNED_NO where
 * not: the caller takes the pageable path. The write takes c->bulk and
 * gives the native event in *ev (the caller binds or waits for it); the
 * read replies through fin(c, status) (CMX_DEFER), as cmx_defer_event(). */
#define CMX_PINNED_NO 2 /* not CMX_DEFER */
int cmx_pinned_write(struct cmx_call *c, cl_command_queue q, cl_mem m, uint64_t off,
		     uint64_t size, cl_uint nwait, const cl_event *wait, cl_event *ev);
int cmx_pinned_read(struct cmx_call *c, cl_command_queue q, cl_mem m, uint64_t off,
		    uint64_t size, cl_uint nwait, const cl_event *wait, const struct cmx_ref *guest_ev,
		    void (*fin)(struct cmx_call *c, int status));
/* [off, off + size) within the buffer `id` of the session (not an image),
 * checked before the driver, which would take the range as given:
 * CL_SUCCESS, CL_INVALID_MEM_OBJECT or CL_INVALID_VALUE (host/exec_mem.c). */
int cmx_buffer_range(struct cmx_call *c, uint64_t id, uint64_t off, uint64_t size);
/* A box of the image `id` of the session (origin and region, 3 each) inside
 * the image, into o and r, and its packed size in *bytes when bytes is
 * given: CL_SUCCESS, CL_INVALID_MEM_OBJECT (no image) or CL_INVALID_VALUE
 * (host/exec_image.c). */
int cmx_image_region(struct cmx_call *c, uint64_t id, const struct cmx_u64s *origin,
		     const struct cmx_u64s *region, size_t o[3], size_t r[3], uint64_t *bytes);
/* A rect of the buffer `id` as the *BufferRect enqueues and a command
 * buffer's copy-rect record take it: origin and region (3 each) into o and
 * r, the pitches *row and *slice (0 filled in as the specification's
 * defaults), every byte it touches inside the buffer; the errors are
 * cmx_buffer_range()'s. The host side of a Read/WriteBufferRect travels
 * packed: its size does not overflow then. */
int cmx_buffer_rect(struct cmx_call *c, uint64_t id, const struct cmx_u64s *origin,
		    const struct cmx_u64s *region, size_t o[3], size_t r[3], size_t *row,
		    size_t *slice);
/* The type of an image object (host/exec_image.c); 0 for a buffer. */
cl_mem_object_type cmx_image_type(const struct cmx_obj *m);
/* An image with memory of its own: its extent (cmx_cl_image_extent()) and
 * the bytes of one element, and 1; 0 for a buffer, and for an image over
 * a buffer, whose bytes are the buffer's (a checkpoint writes them once,
 * with the buffer). host/exec_image.c. */
int cmx_image_shape(const struct cmx_obj *m, uint64_t extent[3], uint64_t *elem);
/* Unmaps the native maps of area buffers the guest left mapped: those of
 * the buffer `mem`, or all of them (0). host/exec_mem.c. */
void cmx_area_maps_drop(struct cmx_session *s, uint64_t mem);

/* An error that means the driver's state in this process is lost (a GPU
 * fault): the worker retires (host/worker.c). Any thread. */
void cmx_exec_check_lost(struct cmx_server *srv, cl_int err, const char *what);

/* The __local memory a launch of `kernel` on q would take fits its device:
 * CL_SUCCESS or CL_OUT_OF_RESOURCES (host/exec_kernel.c). */
cl_int cmx_kernel_local_fits(struct cmx_call *c, uint64_t kernel, cl_command_queue q);
/* Every argument of `kernel` has been set: CL_SUCCESS, else
 * CL_INVALID_KERNEL_ARGS (PoCL 3.1 records a launch of a kernel with an
 * argument unset, and crashes reading it). */
cl_int cmx_kernel_args_set(struct cmx_call *c, uint64_t kernel);
/* Sets a clone's __local arguments again, with the sizes `kernel` has:
 * PoCL 3.1's clCloneKernel leaves their storage short, and a command
 * buffer recording the clone read past it (ASan in the daemon). */
void cmx_kernel_clone_locals(struct cmx_call *c, uint64_t kernel, cl_kernel clone);

/* Command buffers (host/exec_cmdbuf.c): whether d's are forwarded (the
 * extension at a revision of the ABI clmux is built with, and the driver's
 * entry points); a buffer's release, native object and ext; the commands it has recorded,
 * each one of the tenant's objects until the buffer goes (host/release.c). */
int cmx_cmdbuf_supported(const struct cmx_server *srv, cl_device_id d);
void cmx_cmdbuf_release(struct cmx_obj *o);
uint64_t cmx_cmdbuf_commands(const struct cmx_obj *o);

#endif
