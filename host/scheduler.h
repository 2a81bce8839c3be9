// SPDX-License-Identifier: MIT
// The device-time scheduler: weighted fair order among tenants, in-flight
// quotas and caps, commands held behind gate user events.
#ifndef CMX_HOST_SCHED_H
#define CMX_HOST_SCHED_H

#include <CL/cl.h>
#include <stdint.h>

struct cmx_call;
struct cmx_server;
struct cmx_session;
struct cmx_gate;

/* How much estimated device time the scheduler lets onto the device at
 * once (--sched-window, us): what a newly busy tenant may wait behind. */
#define CMX_SCHED_WINDOW_US 2000

/*
 * A scheduled enqueue (host/exec_kernel.c):
 *
 *	struct cmx_sched_cmd sc;
 *	e = cmx_sched_begin(c, in->wait.n, in->wait.h, &sc);  // quota, gate
 *	if (e) return e;
 *	e = clEnqueueX(..., sc.nwait, sc.wait, &ev);
 *	cmx_sched_end(&sc, e, ev);  // on the device now, or held
 */
struct cmx_sched_cmd {
	cl_uint nwait;
	const cl_event *wait; /* the call's wait list, plus the gate when held */
	struct cmx_gate *g;
};

int cmx_sched_create(struct cmx_server *srv, uint64_t window_us);
/* Stops reporting completions; call before the loop is destroyed. */
void cmx_sched_destroy(struct cmx_server *srv);
/* Commands still held or on the device (the daemon drains them first). */
int cmx_sched_busy(struct cmx_server *srv);

/* The wait list arguments of the native enqueue, as WAIT() (host/exec.h). */
#define CMX_SCHED_WAIT(sc) (sc).nwait, (sc).nwait ? (sc).wait : NULL

/* 0, or CL_OUT_OF_RESOURCES when the tenant has its in-flight quota's worth
 * of commands already. */
int cmx_sched_begin(struct cmx_call *c, cl_uint nwait, void *const *wait, struct cmx_sched_cmd *sc);
/* After the native enqueue: err its result, ev its event (not consumed). */
void cmx_sched_end(struct cmx_sched_cmd *sc, cl_int err, cl_event ev);

/* The session is closing: its held commands are failed, not run. */
void cmx_sched_drop(struct cmx_session *s);

#endif
