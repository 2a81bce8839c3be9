// SPDX-License-Identifier: MIT
// The device-time scheduler: weighted fair order among tenants, in-flight
// quotas and caps; commands held in the daemon until their turn.
#ifndef CMX_HOST_SCHED_H
#define CMX_HOST_SCHED_H

#include <CL/cl.h>
#include <stdint.h>

struct cmx_call;
struct cmx_ref;
struct cmx_server;
struct cmx_session;
struct cmx_ticket;
struct cmx_tenant;

/* How much estimated device time the scheduler lets onto the device at
 * once (--sched-window, us): what a newly busy tenant may wait behind. */
#define CMX_SCHED_WINDOW_US 2000

/*
 * A command the daemon can hold: everything its native enqueue needs, kept
 * (and retained) by the caller's op until the scheduler gives it its turn.
 */
struct cmx_sched_op {
	/* The native enqueue behind wait; 0 or a cl error. */
	cl_int (*enqueue)(struct cmx_sched_op *op, cl_uint nwait, const cl_event *wait,
			  cl_event *ev);
	/* Releases what the op retained, frees it. */
	void (*destroy)(struct cmx_sched_op *op);
	/* The kernel it launches, or NULL: clSetKernelArg on a kernel with
	 * held launches gives the session a clone (cmx_sched_kernel_arg()). */
	cl_kernel kernel;
};

/*
 * A scheduled enqueue (host/exec_kernel.c):
 *
 *	struct cmx_sched_cmd sc;
 *	e = cmx_sched_begin(c, in->wait.n, in->wait.h, &sc);  // quota, order
 *	if (e) return e;
 *	if (sc.hold) return cmx_sched_hold(&sc, c, &in->event, op);
 *	e = clEnqueueX(..., CMX_SCHED_WAIT(sc), &ev);
 *	cmx_sched_end(&sc, e, ev);  // on the device now
 *
 * A caller that cannot hold its command (copies, fills) ignores sc.hold:
 * its command goes to the driver at once, ordered behind held ones by
 * their placeholders, and counts as on the device.
 */
struct cmx_sched_cmd {
	cl_uint nwait;
	const cl_event *wait;
	struct cmx_ticket *g;
	struct cmx_ticket *join; /* or: the command joins this ticket (a lone tenant's) */
	int hold;	       /* the command must wait in the daemon for its turn */
};

int cmx_sched_create(struct cmx_server *srv, uint64_t window_us);
/* Stops reporting completions; call before the loop is destroyed. */
void cmx_sched_destroy(struct cmx_server *srv);
/* Commands still held or on the device (the daemon drains them first). */
int cmx_sched_busy(struct cmx_server *srv);
/* No other tenant than t has commands on the device or held, and none of
 * t's are held (always, without a scheduler). Loop thread. */
int cmx_sched_alone(const struct cmx_tenant *t);

/* The wait list arguments of the native enqueue, as WAIT() (host/exec.h). */
#define CMX_SCHED_WAIT(sc) (sc).nwait, (sc).nwait ? (sc).wait : NULL

/* 0, or CL_OUT_OF_RESOURCES when the tenant has its in-flight quota's worth
 * of commands already. */
int cmx_sched_begin(struct cmx_call *c, cl_uint nwait, void *const *wait, struct cmx_sched_cmd *sc);
/* After the native enqueue: err its result, ev its event (not consumed). */
void cmx_sched_end(struct cmx_sched_cmd *sc, cl_int err, cl_event ev);
/* sc.hold: the scheduler keeps op (always: destroyed on failure) and gives
 * the guest's event `ev` a placeholder until op is enqueued. 0 or cl error. */
int cmx_sched_hold(struct cmx_sched_cmd *sc, struct cmx_call *c, const struct cmx_ref *ev,
		   struct cmx_sched_op *op);

/* Every call, after its ids are resolved (host/call.c): an enqueue on a
 * queue with held commands waits for them; a placeholder the driver will
 * see is completed as soon as its command is. 0 or a cl error. */
int cmx_sched_resolve(struct cmx_call *c);
/* A command about to go to the driver out of the scheduler's order (a
 * printing kernel): the held commands of its queue (the call's first
 * argument) go to the device first, out of turn. */
void cmx_sched_release_queue(struct cmx_call *c);
/* clSetKernelArg on *k (the session's kernel `id`): when held launches use
 * it, the session's id moves to a clone and *k becomes that clone. */
void cmx_sched_kernel_arg(struct cmx_call *c, uint64_t id, cl_kernel *k);
/* The session releases a buffer or sampler (kind, native h): held commands
 * may use it, so it lives until they are on the device. */
void cmx_sched_keep(struct cmx_session *s, unsigned kind, void *h);
/* A guest user event was set: a held command may be free to go (a driver
 * may call no callback for an error status). */
void cmx_sched_poke(struct cmx_server *srv);
/* Loop thread: clFinish on q has returned; what the scheduler has of q on
 * the device is accounted now, not when a poller or a late callback says
 * so (a tenant that waits for each command is then idle for the
 * scheduler at once, and is given the next turn: a latency probe). */
void cmx_sched_finished(cl_command_queue q);
/* e is the placeholder of a held command: its status, CL_QUEUED. */
int cmx_sched_is_held(cl_event e);

/* Loop thread. The arbiter between workers says (host/ctl.h,
 * CMX_CTL_SHARE): launch at will, hold launches, or launch for a turn of
 * turn_ns and then say TURNED with seq once drained. */
void cmx_sched_share(struct cmx_server *srv, unsigned mode, uint64_t turn_ns, uint64_t seq);

/* The session is closing: its held commands are dropped, not run. */
void cmx_sched_drop(struct cmx_session *s);

#endif
