// SPDX-License-Identifier: MIT
// Completions the loop waits for, delivered once even where the driver
// drops the callbacks of commands that failed before they ran.
#ifndef CMX_HOST_COMPLETE_H
#define CMX_HOST_COMPLETE_H

#include <CL/cl.h>

/*
 * fn(arg, status) runs once on the loop thread when e has ended: status is
 * CL_COMPLETE or the event's error. e is retained until then. Returns 0,
 * or the driver's error from clSetEventCallback (nothing registered).
 * Loop thread.
 *
 * PoCL never calls a CL_COMPLETE callback registered on a command that
 * then fails through its wait list (a user event set to an error), so a
 * completion that waits only for the callback waits for ever. After a
 * failure (cmx_complete_failed()) the loop reads the status of every
 * registered event for a while and ends those that have failed; a
 * callback that comes after that finds its slot reused and is ignored.
 */
int cmx_complete_when(cl_event e, void (*fn)(void *arg, cl_int status), void *arg);
/* The same for an earlier status (CL_SUBMITTED, CL_RUNNING): fn gets that
 * status, or the event's error. */
int cmx_complete_at(cl_event e, cl_int type, void (*fn)(void *arg, cl_int status), void *arg);

/* Something failed that commands may wait on (a user event set to an
 * error, a command that ended in one): sweep now and for the next moments.
 * Loop thread. */
void cmx_complete_failed(void);

/* Releases the daemon's reference to ev, which may be its last. A failed
 * command's event rests a few seconds first (host/complete.c says why).
 * Any thread. */
void cmx_complete_release(cl_event ev);
/* Failed events resting now. */
unsigned cmx_complete_resting(void);

/* Completions still registered (tests, the log at exit). */
unsigned cmx_complete_pending(void);

#endif
