// SPDX-License-Identifier: MIT
// Deferred calls (host/defer.c): a handler's call that ends when its
// command's event completes, or when work on an executor thread is done.
// The handlers use it; exec.h's event binding and queue flushes lie below
// it, for the scheduler, the zero fills and landing, which defer nothing.
#ifndef CMX_HOST_DEFER_H
#define CMX_HOST_DEFER_H

#include <CL/cl.h>
#include <stdint.h>

struct cmx_call;
struct cmx_server;

/* Finishes c on the loop with fin(c, status) once e completes (status is
 * the event's: CL_COMPLETE or its error). Returns CMX_DEFER, or the error. */
int cmx_defer_event(struct cmx_call *c, cl_event e, void (*fin)(struct cmx_call *c, int status));

/* The same for a call whose application thread is blocked on it: the
 * loop watches e for a short while (fin may run before this returns), then
 * an executor thread waits for it, which wakes sooner than a driver's
 * callback thread on some drivers (NVIDIA: tens of microseconds). The
 * call's first argument is its queue, flushed here where the driver needs
 * it (cmx_queue_flush_to_wait()). */
int cmx_defer_wait(struct cmx_call *c, cl_event e, void (*fin)(struct cmx_call *c, int status));

/* cmx_defer_wait() for an event of no queue the call names (a wait for one
 * event): no flush first, so only where the driver submits at enqueue. */
int cmx_defer_wait_event(struct cmx_call *c, cl_event e,
			 void (*fin)(struct cmx_call *c, int status));

/* Whether a blocking transfer of size bytes with nwait events to wait for
 * may run blocking on the loop (CL_TRUE): where the driver's blocking calls
 * are short (struct cmx_server's short_blocking), for at most
 * CMX_SHORT_BLOCK_MAX bytes, on an in-order queue whose last command has
 * completed, with no wait list and no other tenant's work on the device.
 * The call's first argument is its queue. Loop thread. */
#define CMX_SHORT_BLOCK_MAX (64u << 10)
cl_bool cmx_exec_block_short(struct cmx_call *c, uint64_t size, uint64_t nwait);

/* From any thread: finishes a call deferred with fin set (c->fin) on the
 * loop, as cmx_defer_event() does when its event completes. */
void cmx_defer_post(struct cmx_call *c, int status);

/* Runs work(c) on an executor thread, then fin(c, status) (or, with fin
 * NULL, cmx_call_done) on the loop. Returns CMX_DEFER. */
int cmx_defer_work(struct cmx_call *c, int (*work)(struct cmx_call *c),
		   void (*fin)(struct cmx_call *c, int status));

/* Logs how the loop's watches of blocking calls ended (info). */
void cmx_watch_report(struct cmx_server *srv);

#endif
