// SPDX-License-Identifier: MIT
// Kernel printf: the daemon's stdout is a pipe read on the loop; printing
// kernels run one at a time, daemon-wide, and what the pipe holds when one
// completes is sent to its session as KernelOutput.
#define _GNU_SOURCE /* F_SETPIPE_SZ */
#include "kprintf.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "complete.h"
#include "exec.h"
#include "fdio.h"
#include "log.h"
#include "mayprint.h"

/* One command's output is bounded; the rest is dropped (and logged). */
#define KP_MAX_OUTPUT (16u << 20)
#define KP_PIPE_SIZE (1 << 20)

/* A printing launch, from its enqueue until its completion is handled. */
struct kp_cmd {
	struct kp_cmd *next;
	uint64_t session, tag;
	cl_event gate;	/* user event in the kernel's wait list; set when it may run */
	cl_event ev;	/* the launch's own event (retained) */
	int finished;	/* done with, found by the poll: freed when the callback comes */
	/* What it waits for natively besides the gate (its wait list, and an
	 * in-order queue's previous command): it is let run only once these
	 * are done, so the one running never waits on anything but the device
	 * (a user event never set would stop every printing kernel). */
	cl_event *deps;
	size_t ndeps;
	int status;	/* completion status, from the driver's callback */
};

/* One per process, as its stdout is. */
static struct {
	struct cmx_server *srv;
	struct cmx_loop *loop;
	struct cmx_io io;
	int rfd, orig_out;
	/* Launches waiting to run, in enqueue order, and the one running (its
	 * gate set: the pipe's bytes are its). Loop thread only. */
	struct kp_cmd *waiting, *running;
	struct cmx_buf out; /* what the running one has printed so far */
	uint64_t dropped;
} kp = { .rfd = -1, .orig_out = -1 };

/* Output nobody waits for: what no printing launch claims (a kernel whose
 * text hid printf from cmx_may_print(), a driver's own message). It must
 * reach neither another tenant nor the daemon's stdout and log, with or
 * without worker processes: it is counted and dropped, with a line at most
 * every 10 s. */
static void pass_on(const void *p, size_t n)
{
	static uint64_t unclaimed, told_ns;
	uint64_t now;

	(void)p;
	unclaimed += n;
	now = cmx_now_ns();
	if (now - told_ns >= 10000000000ull) {
		cmx_warn("kernel output claimed by no printing launch: %llu bytes dropped",
			 (unsigned long long)unclaimed);
		told_ns = now;
	}
}

/* Everything the pipe holds now: the running launch's, or (nobody runs: a
 * driver's own message, a kernel nobody thought could print) nobody's.
 * Only the loop reads, so no byte is read out of order. */
static void drain(void)
{
	char buf[65536];
	ssize_t n;

	while (kp.rfd >= 0 && ((n = read(kp.rfd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))) {
		if (n < 0)
			continue;
		if (!kp.running) {
			pass_on(buf, (size_t)n);
		} else if (kp.out.len + (size_t)n > KP_MAX_OUTPUT) {
			kp.dropped += (uint64_t)n;
		} else {
			cmx_buf_put(&kp.out, buf, (size_t)n);
		}
	}
}

/* Reads what a driver that trails its completion still writes: until the
 * pipe has been quiet for KP_QUIET_MS, at most KP_TRAIL_MS in all. It holds
 * the loop that long after each printing launch, on such a driver only
 * (struct cmx_server's printf_trails); printing is a debugging path. */
#define KP_QUIET_MS 2
#define KP_TRAIL_MS 20

static void drain_trailing(void)
{
	struct pollfd p = { .fd = kp.rfd, .events = POLLIN };
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (kp.rfd >= 0 && poll(&p, 1, KP_QUIET_MS) > 0) {
		drain();
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= KP_TRAIL_MS)
			break;
	}
}

static void arm(void);

static void poll_done(struct cmx_io *io, int res, unsigned flags)
{
	drain();
	if (res >= 0 || res == -EINTR || res == -ECANCELED)
		arm();
}

static void arm(void)
{
	struct io_uring_sqe *sqe = cmx_loop_sqe(kp.loop, &kp.io);

	if (sqe)
		io_uring_prep_poll_add(sqe, kp.rfd, POLLIN);
}

int cmx_kprintf_init(struct cmx_server *srv)
{
	int fds[2];

	kp.srv = srv;
	kp.loop = srv->loop;
	kp.io.cb = poll_done;
	cmx_buf_init(&kp.out);
	kp.orig_out = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	/* Room for a kernel's whole output without stalling the driver's
	 * thread before the loop comes round (best effort). */
	fcntl(fds[1], F_SETPIPE_SZ, KP_PIPE_SIZE);
	if (fcntl(fds[0], F_SETFL, O_NONBLOCK) || dup2(fds[1], STDOUT_FILENO) < 0) {
		int e = -errno;
		close(fds[0]);
		close(fds[1]);
		return e;
	}
	close(fds[1]);
	kp.rfd = fds[0];
	arm();
	return 0;
}

void cmx_kprintf_fini(void)
{
	/* Launches that never ran stay held: their callbacks would find no
	 * loop. */
	if (kp.rfd < 0)
		return;
	drain();
	if (kp.out.len)
		pass_on(kp.out.data, kp.out.len);
	cmx_buf_fini(&kp.out);
	if (kp.orig_out >= 0)
		dup2(kp.orig_out, STDOUT_FILENO);
	close(kp.rfd);
	kp.rfd = -1;
}

int cmx_kprintf_kernel(struct cmx_session *s, uint64_t kernel_id)
{
	struct cmx_obj *o = cmx_session_obj(s, kernel_id, CMX_K_KERNEL);

	return o && (o->flags & CMX_OBJ_PRINTS);
}

void cmx_kprintf_program(struct cmx_session *s, uint64_t program_id, const void *p, size_t n)
{
	struct cmx_obj *o = cmx_session_obj(s, program_id, CMX_K_PROGRAM);

	if (o && cmx_may_print(p, n))
		o->flags |= CMX_OBJ_PRINTS;
}

static struct cmx_session *session_of(uint64_t id)
{
	struct cmx_session *s;

	for (s = kp.srv->sessions; s && s->id != id; s = s->next)
		;
	return s && !s->closed ? s : NULL;
}

static void cmd_free(struct kp_cmd *k)
{
	for (size_t i = 0; i < k->ndeps; i++)
		clReleaseEvent(k->deps[i]);
	free(k->deps);
	clReleaseEvent(k->gate);
	if (k->ev)
		clReleaseEvent(k->ev);
	free(k);
}

/* 1: every dependency is done; 0: one is not; -1: one is a user event
 * not set yet (which only its session could set). */
static int cmd_ready(struct kp_cmd *k)
{
	int ready = 1;

	for (size_t i = 0; i < k->ndeps; i++) {
		cl_int st = CL_QUEUED;
		cl_command_type t = 0;

		clGetEventInfo(k->deps[i], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, NULL);
		if (st <= CL_COMPLETE)
			continue;
		clGetEventInfo(k->deps[i], CL_EVENT_COMMAND_TYPE, sizeof(t), &t, NULL);
		if (t == CL_COMMAND_USER)
			return -1;
		ready = 0;
	}
	return ready;
}

static void kick(void);
static void finish(struct kp_cmd *k, int status);

/*
 * The status poll (kp_poll(), cmx_exec_poll_start()), on a driver that runs
 * its queue only inside a wait (struct cmx_server's flush_runs: Oclgrind).
 * There the application's wait (an executor's clWaitForEvents or clFinish)
 * runs every command before the one it waits for, in that one call, and
 * calls their completion callbacks only when it returns. A second printing
 * launch waits on its gate, which is set once the first's completion is
 * handled: by the callback alone, that never happens, because the wait
 * that ran the first is the one now spinning on the second's gate
 * (Oclgrind spins on an unset user event). The loop therefore reads the
 * running launch's status itself while launches are pending, handles its
 * completion when it sees it, and lets the next one run; the callback,
 * when it comes, only frees it.
 */
static int kp_poll(struct cmx_server *srv)
{
	struct kp_cmd *k = kp.running;
	cl_int st = CL_QUEUED;
	int seen = 0;

	if (k && clGetEventInfo(k->ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, NULL) ==
			 CL_SUCCESS && st <= CL_COMPLETE) {
		finish(k, st);
		k->finished = 1;
		seen = 1;
	}
	kick(); /* reads the waiting ones' dependencies */
	return seen ? 1 : kp.running || kp.waiting ? 0 : -1;
}

/* Lets the oldest ready launch run when none does (that of a session now
 * gone too: its output goes nowhere). One whose session is gone and that
 * waits on a user event its guest never set is forgotten, its gate left
 * unset (failing it instead makes PoCL 3.1 abort once the session's
 * objects are released): it stays allocated, as its native command does. */
static void kick(void)
{
	struct kp_cmd **pp = &kp.waiting, *k;

	while (!kp.running && (k = *pp)) {
		int ready = cmd_ready(k);

		if (ready > 0) {
			*pp = k->next;
			k->next = NULL;
			drain(); /* what came before is not its */
			kp.out.len = 0;
			kp.running = k;
			clSetUserEventStatus(k->gate, CL_COMPLETE);
		} else if (ready < 0 && !session_of(k->session)) {
			*pp = k->next;
			k->next = NULL;
			for (size_t i = 0; i < k->ndeps; i++)
				clReleaseEvent(k->deps[i]);
			k->ndeps = 0;
		} else {
			pp = &k->next;
		}
	}
	if (kp.running || kp.waiting)
		cmx_exec_poll_start(kp.srv, kp_poll);
}

static void kick_post(void *arg)
{
	kick();
}

/* A dependency of a waiting launch is done (a driver thread). */
static void CL_CALLBACK dep_done(cl_event e, cl_int status, void *arg)
{
	cmx_loop_post(kp.loop, kick_post, NULL);
}

static void send_output(struct kp_cmd *k)
{
	struct cmx_session *s = session_of(k->session);
	struct cmx_KernelOutput_in n = { .tag = k->tag, .status = k->status };
	void *bytes = NULL;

	if (kp.dropped) {
		cmx_warn("session %llu: kernel printf output over %u bytes, %llu dropped",
			 (unsigned long long)k->session, KP_MAX_OUTPUT,
			 (unsigned long long)kp.dropped);
		kp.dropped = 0;
	}
	if (!s || (!k->tag && !kp.out.len))
		return;
	if (kp.out.len && !(bytes = malloc(kp.out.len)))
		n.status = k->status < 0 ? k->status : CL_OUT_OF_HOST_MEMORY;
	else if (bytes)
		memcpy(bytes, kp.out.data, kp.out.len);
	cmx_call_notify(s, &cmx_desc_KernelOutput_in, &n, bytes, bytes ? kp.out.len : 0,
			bytes ? free : NULL);
}

/* Its command has ended: the running one's output goes to its session; one
 * that failed before it ran leaves the waiting list. */
static void finish(struct kp_cmd *k, int status)
{
	k->status = status;
	if (k == kp.running) {
		/* The driver wrote before it reported completion: it is all
		 * here, or in stdout's buffer where a driver prints through
		 * stdio (Oclgrind), flushed here rather than left unbuffered
		 * under every driver. NVIDIA may still be writing, piece by
		 * piece (e2e_printf on the H100 lost the rest of a line):
		 * drain_trailing() waits for the pipe to go quiet. */
		fflush(stdout);
		drain();
		if (kp.srv->printf_trails)
			drain_trailing();
		send_output(k);
		kp.out.len = 0;
		kp.running = NULL;
	} else {
		/* Failed before it ran (an error in its wait list): anything
		 * printed meanwhile was not its. */
		for (struct kp_cmd **pp = &kp.waiting; *pp; pp = &(*pp)->next)
			if (*pp == k) {
				*pp = k->next;
				break;
			}
	}
}

static void kp_done(void *arg)
{
	struct kp_cmd *k = arg;

	if (!k->finished)
		finish(k, k->status);
	cmd_free(k);
	kick();
}

static void kp_complete(void *arg, cl_int status)
{
	struct kp_cmd *k = arg;

	k->status = status;
	/* After the handler that may be running now (a sweep settles from
	 * inside one). */
	cmx_loop_post(kp.loop, kp_done, k);
}

int cmx_kprintf_enqueue(struct cmx_call *c, const struct cmx_EnqueueKernel_in *in, cl_uint dim,
			const size_t *off, const size_t *gl, const size_t *lo, uint64_t tag)
{
	struct cmx_obj *q = cmx_session_obj(c->s, in->queue.id, CMX_K_QUEUE);
	size_t nw = in->wait.n;
	cl_event *wait, ev = NULL;
	struct kp_cmd *k, **pp;
	cl_int e;

	if (!q)
		return CL_INVALID_COMMAND_QUEUE;
	k = calloc(1, sizeof(*k));
	/* deps: the wait list, the queue's previous command; then the gate. */
	wait = calloc(nw + 2, sizeof(*wait));
	if (!k || !wait) {
		free(k);
		free(wait);
		return CL_OUT_OF_HOST_MEMORY;
	}
	k->session = c->s->id;
	k->tag = tag;
	k->gate = clCreateUserEvent(q->ctx, &e);
	if (e) {
		free(k);
		free(wait);
		return e;
	}
	if (nw)
		memcpy(wait, in->wait.h, nw * sizeof(*wait));
	wait[nw] = k->gate;
	e = clEnqueueNDRangeKernel(in->queue.h, in->kernel.h, dim, in->offset.n ? off : NULL, gl,
				   in->local.n ? lo : NULL, (cl_uint)nw + 1, wait, &ev);
	if (e) {
		clSetUserEventStatus(k->gate, CL_INVALID_EVENT);
		clReleaseEvent(k->gate);
		free(k);
		free(wait);
		return e;
	}
	k->deps = wait;
	k->ndeps = nw;
	if (q->last && !(q->flags & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE))
		wait[k->ndeps++] = q->last;
	for (size_t i = 0; i < k->ndeps; i++) {
		clRetainEvent(k->deps[i]);
		clSetEventCallback(k->deps[i], CL_COMPLETE, dep_done, NULL);
	}
	for (pp = &kp.waiting; *pp; pp = &(*pp)->next)
		;
	*pp = k;
	clRetainEvent(ev);
	k->ev = ev;
	/* A completion slot (host/complete.c): PoCL never calls back for a
	 * launch failed through its wait list, which would hold every
	 * printing launch after it. */
	if (cmx_complete_when(c->s->srv, ev, kp_complete, k))
		cmx_err("kernel printf: no completion callback; printing kernels stop here");
	cmx_event_bind(c, &in->event, ev);
	kick();
	return CL_SUCCESS;
}
