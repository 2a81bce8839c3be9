// SPDX-License-Identifier: MIT
// Kernel printf: the daemon's stdout is a pipe read on the loop; printing
// kernels run one at a time, daemon-wide, and what the pipe holds when one
// completes is sent to its session as KernelOutput.
#define _GNU_SOURCE /* F_SETPIPE_SZ */
#include "kprintf.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "exec.h"
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
	int released;	/* gate set: it may run, and the pipe's bytes are its */
	int abandoned;	/* its session went away before it ran: gate failed */
	int status;	/* completion status, from the driver's callback */
};

static struct {
	struct cmx_loop *loop;
	struct cmx_io io;
	int rfd, orig_out;
	/* Launches in enqueue order; only the head runs. Loop thread only. */
	struct kp_cmd *head, **tail;
	struct cmx_buf out; /* what the running head has printed so far */
	uint64_t dropped;
} kp = { .rfd = -1, .orig_out = -1, .tail = &kp.head };

static void write_all(int fd, const char *p, size_t n)
{
	while (fd >= 0 && n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* Everything the pipe holds now: the running launch's, or (nobody runs: a
 * driver's own message, a kernel nobody thought could print) the daemon's
 * stdout's. Only the loop reads, so no byte is read out of order. */
static void drain(void)
{
	char buf[65536];
	ssize_t n;

	while (kp.rfd >= 0 && ((n = read(kp.rfd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))) {
		if (n < 0)
			continue;
		if (!kp.head || !kp.head->released) {
			write_all(kp.orig_out, buf, (size_t)n);
		} else if (kp.out.len + (size_t)n > KP_MAX_OUTPUT) {
			kp.dropped += (uint64_t)n;
		} else {
			cmx_buf_put(&kp.out, buf, (size_t)n);
		}
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

int cmx_kprintf_init(struct cmx_loop *l)
{
	int fds[2];

	kp.loop = l;
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
	if (kp.rfd < 0)
		return;
	drain();
	if (kp.out.len)
		write_all(kp.orig_out, (const char *)kp.out.data, kp.out.len);
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

	for (s = cmx_srv->sessions; s && s->id != id; s = s->next)
		;
	return s && !s->closed ? s : NULL;
}

/* Lets the oldest launch run. One whose session is gone is failed instead
 * (it must not hold the others back on a wait list that is never set). */
static void kick(void)
{
	while (kp.head && !kp.head->released) {
		struct kp_cmd *k = kp.head;

		if (session_of(k->session)) {
			drain(); /* what came before is not its */
			k->released = 1;
			kp.out.len = 0;
			clSetUserEventStatus(k->gate, CL_COMPLETE);
			return;
		}
		/* Its completion callback frees it. */
		k->abandoned = 1;
		kp.head = k->next;
		if (!kp.head)
			kp.tail = &kp.head;
		clSetUserEventStatus(k->gate, CL_INVALID_EVENT);
	}
}

static void kp_done(void *arg)
{
	struct kp_cmd *k = arg;
	struct cmx_session *s;
	void *bytes = NULL;

	if (k->abandoned || k != kp.head) {
		/* Failed by kick(), or completed without running (an error in
		 * its wait list); anything it wrote went to the head or out. */
		if (!k->abandoned) {
			struct kp_cmd **pp = &kp.head;
			while (*pp != k)
				pp = &(*pp)->next;
			*pp = k->next;
			if (kp.tail == &k->next)
				kp.tail = pp;
		}
		goto out;
	}
	/* The driver wrote before it reported completion: it is all here. */
	drain();
	kp.head = k->next;
	if (!kp.head)
		kp.tail = &kp.head;
	s = session_of(k->session);
	if (kp.dropped) {
		cmx_warn("session %llu: kernel printf output over %u bytes, %llu dropped",
			 (unsigned long long)k->session, KP_MAX_OUTPUT,
			 (unsigned long long)kp.dropped);
		kp.dropped = 0;
	}
	if (s && (k->tag || kp.out.len)) {
		struct cmx_KernelOutput_in n = { .tag = k->tag, .status = k->status };
		if (kp.out.len && !(bytes = malloc(kp.out.len)))
			n.status = k->status < 0 ? k->status : CL_OUT_OF_HOST_MEMORY;
		else if (bytes)
			memcpy(bytes, kp.out.data, kp.out.len);
		cmx_session_notify(s, &cmx_desc_KernelOutput_in, &n, bytes, bytes ? kp.out.len : 0,
				   bytes ? free : NULL);
	}
	kp.out.len = 0;
out:
	clReleaseEvent(k->gate);
	free(k);
	kick();
}

static void CL_CALLBACK kp_complete(cl_event e, cl_int status, void *arg)
{
	struct kp_cmd *k = arg;

	k->status = status;
	/* A driver thread: the rest on the loop. */
	cmx_loop_post(cmx_srv->loop, kp_done, k);
}

int cmx_kprintf_enqueue(struct cmx_call *c, const struct cmx_EnqueueKernel_in *in, cl_uint dim,
			const size_t *off, const size_t *gl, const size_t *lo, uint64_t tag)
{
	struct cmx_obj *q = cmx_session_obj(c->s, in->queue.id, CMX_K_QUEUE);
	cl_event small[33], *wait = small, ev = NULL;
	size_t nw = in->wait.n;
	struct kp_cmd *k;
	cl_int e;

	if (!q)
		return CL_INVALID_COMMAND_QUEUE;
	k = calloc(1, sizeof(*k));
	if (nw >= sizeof(small) / sizeof(*small))
		wait = malloc((nw + 1) * sizeof(*wait));
	if (!k || !wait) {
		e = CL_OUT_OF_HOST_MEMORY;
		goto fail;
	}
	k->session = c->s->id;
	k->tag = tag;
	k->gate = clCreateUserEvent(q->ctx, &e);
	if (e)
		goto fail;
	if (nw)
		memcpy(wait, in->wait.h, nw * sizeof(*wait));
	wait[nw] = k->gate;
	e = clEnqueueNDRangeKernel(in->queue.h, in->kernel.h, dim, in->offset.n ? off : NULL, gl,
				   in->local.n ? lo : NULL, (cl_uint)nw + 1, wait, &ev);
	if (e) {
		clSetUserEventStatus(k->gate, CL_INVALID_EVENT);
		clReleaseEvent(k->gate);
		goto fail;
	}
	if (wait != small)
		free(wait);
	*kp.tail = k;
	kp.tail = &k->next;
	if (clSetEventCallback(ev, CL_COMPLETE, kp_complete, k))
		cmx_err("kernel printf: no completion callback; printing kernels stop here");
	cmx_event_bind(c, &in->event, ev);
	kick();
	return CL_SUCCESS;
fail:
	if (wait != small)
		free(wait);
	free(k);
	return e;
}
