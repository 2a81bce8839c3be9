// SPDX-License-Identifier: MIT
// Completions the loop waits for, delivered once even where the driver
// drops the callbacks of commands that failed before they ran.
#ifndef CMX_HOST_COMPLETE_H
#define CMX_HOST_COMPLETE_H

#include <CL/cl.h>

struct cmx_server;
struct cmx_tenant;

/*
 * fn(arg, status) runs once on the loop thread when e has ended: status is
 * CL_COMPLETE or the event's error. e is retained until then. Returns 0,
 * or the driver's error from clSetEventCallback (nothing registered).
 * Loop thread. cmx_complete_init() readies srv's table first.
 *
 * PoCL never calls a CL_COMPLETE callback registered on a command that
 * then fails through its wait list (a user event set to an error), so a
 * completion that waits only for the callback waits for ever. After a
 * failure (cmx_complete_failed()) the loop reads the status of every
 * registered event for a while and ends those that have failed; a
 * callback that comes after that finds its slot settled (the slot is not
 * reused before its callback has come) and is ignored.
 */
int cmx_complete_when(struct cmx_server *srv, cl_event e, void (*fn)(void *arg, cl_int status),
		      void *arg);
/* The same for an earlier status (CL_SUBMITTED, CL_RUNNING): fn gets that
 * status, or the event's error. */
int cmx_complete_at(struct cmx_server *srv, cl_event e, cl_int type,
		    void (*fn)(void *arg, cl_int status), void *arg);

/* Something failed that commands may wait on (a user event set to an
 * error, a command that ended in one): sweep now and for the next moments.
 * Loop thread. */
void cmx_complete_failed(struct cmx_server *srv);

/* An empty table in srv (srv->loop set). */
void cmx_complete_init(struct cmx_server *srv);

/* Releases the daemon's reference to ev, which may be its last. A failed
 * command's event rests a few seconds first (host/complete.c says why),
 * charged CMX_COMPLETE_REST_BYTES of t's mem quota meanwhile (t: the
 * tenant whose session held the reference; NULL: the daemon's own).
 * Any thread; t's charge is changed on the loop thread. */
#define CMX_COMPLETE_REST_BYTES 4096u
void cmx_complete_release(struct cmx_server *srv, struct cmx_tenant *t, cl_event ev);
/* Failed events resting now. */
unsigned cmx_complete_resting(const struct cmx_server *srv);

/* Completions still registered (tests, the log at exit). */
unsigned cmx_complete_pending(const struct cmx_server *srv);

#endif
