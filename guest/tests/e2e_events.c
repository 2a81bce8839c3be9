// SPDX-License-Identifier: MIT
// e2e_events.c - event ordering, user events, callbacks and profiling match native.
#include "e2e.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How long a command that must stay blocked is given to (wrongly) run. */
#define BLOCKED_MS 50
/* How long a callback that must fire is waited for. */
#define CALLBACK_WAIT_MS 5000

static const char events_src[] =
	"__kernel void produce(__global uint *x, uint k)\n"
	"{\n"
	"	size_t i = get_global_id(0);\n"
	"	x[i] = (uint)i * 3u + k;\n"
	"}\n"
	"__kernel void consume(__global const uint *x, __global uint *y)\n"
	"{\n"
	"	size_t i = get_global_id(0);\n"
	"	y[i] = x[i] * 2u + 1u;\n"
	"}\n"
	"__kernel void setv(__global uint *x, uint v)\n"
	"{\n"
	"	x[get_global_id(0)] = v;\n"
	"}\n";

static cl_int event_status(struct e2e_plat *p, cl_event ev)
{
	cl_int st = 0x7fffffff;

	E2E_OK(p, clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS,
				 sizeof(st), &st, NULL));
	return st;
}

/*
 * An event's CL_EVENT_COMMAND_TYPE.  clmux answers it from its own record
 * of the command, so the virtual side is held to the spec; a native driver
 * that reports another type (NVIDIA 580: 0x4003 for a marker or barrier
 * with a wait list) only gets a note.  When both roles are the same platform the virtual
 * side is that driver too, and gets the same treatment.
 */
static void check_command_type(struct e2e_plat *p, cl_command_type type,
			       cl_command_type want, const char *what)
{
	if (type != want && (p == &e2e_native || e2e_same_platform())) {
		fprintf(stderr,
			"e2e: note: %s %s: CL_EVENT_COMMAND_TYPE 0x%x, the spec "
			"says 0x%x\n",
			p->role, what, (unsigned)type, (unsigned)want);
		return;
	}
	ck_assert_msg(type == want,
		      "%s %s: CL_EVENT_COMMAND_TYPE 0x%x, want 0x%x", p->role,
		      what, (unsigned)type, (unsigned)want);
}

/* A command waiting on an incomplete event is queued or submitted. */
static void assert_blocked(struct e2e_plat *p, cl_event ev, const char *what)
{
	cl_int st = event_status(p, ev);

	ck_assert_msg(st == CL_QUEUED || st == CL_SUBMITTED,
		      "%s: %s ran before its dependency (status %d)", p->role,
		      what, st);
}

static cl_event user_event(struct e2e_plat *p)
{
	cl_int err;
	cl_event u = clCreateUserEvent(p->context, &err);

	ck_assert_msg(u && err == CL_SUCCESS, "%s: clCreateUserEvent: %s",
		      p->role, e2e_cl_strerror(err));
	return u;
}

static cl_kernel kernel_setv(struct e2e_plat *p, cl_program prog, cl_mem m,
			     cl_uint v)
{
	cl_kernel k = e2e_kernel_create(p, prog, "setv");

	E2E_OK(p, clSetKernelArg(k, 0, sizeof(m), &m));
	E2E_OK(p, clSetKernelArg(k, 1, sizeof(v), &v));
	return k;
}

static cl_mem buffer_zeroed(struct e2e_plat *p, size_t bytes)
{
	void *zero = e2e_xcalloc(bytes);
	cl_mem m = e2e_buffer_create(p, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
				     bytes, zero);

	free(zero);
	return m;
}

/* Fails unless all n uints of the buffer (read on q) equal v. */
static void assert_filled(struct e2e_plat *p, cl_command_queue q, cl_mem m,
			  size_t n, cl_uint v, const char *what)
{
	cl_uint *h = e2e_xmalloc(n * sizeof(cl_uint));

	E2E_OK(p, clEnqueueReadBuffer(q, m, CL_TRUE, 0, n * sizeof(cl_uint), h, 0,
				      NULL, NULL));
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(h[i] == v, "%s: %s: [%zu] = 0x%x, want 0x%x",
			      p->role, what, i, h[i], v);
	free(h);
}

/* ---- producer on queue A, consumer on queue B ---- */

#define XQ_N 65536u
#define XQ_K 17u

static void cross_queue_run(struct e2e_plat *p, cl_uint *y)
{
	size_t n = XQ_N, bytes = XQ_N * sizeof(cl_uint);
	cl_program prog = e2e_program_build(p, events_src, NULL);
	cl_kernel kp = e2e_kernel_create(p, prog, "produce");
	cl_kernel kc = e2e_kernel_create(p, prog, "consume");
	cl_mem mx = buffer_zeroed(p, bytes), my = buffer_zeroed(p, bytes);
	cl_event u = user_event(p), ev_p, ev_c;
	cl_uint k = XQ_K;

	E2E_OK(p, clSetKernelArg(kp, 0, sizeof(mx), &mx));
	E2E_OK(p, clSetKernelArg(kp, 1, sizeof(k), &k));
	E2E_OK(p, clSetKernelArg(kc, 0, sizeof(mx), &mx));
	E2E_OK(p, clSetKernelArg(kc, 1, sizeof(my), &my));
	/* The user event holds the producer back, so the consumer can only
	 * be right if it really waits for the producer's event. */
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, kp, 1, NULL, &n, NULL, 1, &u,
					 &ev_p));
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue_prof, kc, 1, NULL, &n, NULL, 1,
					 &ev_p, &ev_c));
	E2E_OK(p, clFlush(p->queue));
	E2E_OK(p, clFlush(p->queue_prof));
	e2e_sleep_ms(BLOCKED_MS);
	assert_blocked(p, ev_p, "producer");
	assert_blocked(p, ev_c, "consumer");
	E2E_OK(p, clSetUserEventStatus(u, CL_COMPLETE));
	E2E_OK(p, clWaitForEvents(1, &ev_c));
	ck_assert_int_eq(event_status(p, ev_p), CL_COMPLETE);
	E2E_OK(p, clEnqueueReadBuffer(p->queue_prof, my, CL_TRUE, 0, bytes, y, 0,
				      NULL, NULL));
	clReleaseEvent(ev_c);
	clReleaseEvent(ev_p);
	clReleaseEvent(u);
	clReleaseMemObject(my);
	clReleaseMemObject(mx);
	clReleaseKernel(kc);
	clReleaseKernel(kp);
	clReleaseProgram(prog);
}

START_TEST(test_cross_queue_wait)
{
	size_t bytes = XQ_N * sizeof(cl_uint);
	cl_uint *nat = e2e_xcalloc(bytes), *virt = e2e_xcalloc(bytes);

	cross_queue_run(&e2e_native, nat);
	cross_queue_run(&e2e_virtual, virt);
	for (cl_uint i = 0; i < XQ_N; i++) {
		cl_uint want = (i * 3u + XQ_K) * 2u + 1u;

		ck_assert_msg(nat[i] == want && virt[i] == want,
			      "y[%u]: virtual %u native %u, want %u", i, virt[i],
			      nat[i], want);
	}
	free(virt);
	free(nat);
}
END_TEST

/* ---- markers ---- */

static void marker_run(struct e2e_plat *p)
{
	cl_program prog = e2e_program_build(p, events_src, NULL);
	cl_mem m = buffer_zeroed(p, 256 * sizeof(cl_uint));
	cl_kernel k = kernel_setv(p, prog, m, 0xabcd);
	cl_event u = user_event(p), u2 = user_event(p);
	cl_event ev1, ev2, mk, mk2, wl[2];
	cl_command_type type = 0;
	cl_command_queue q = NULL;
	size_t n = 256;

	/* Marker on B waiting for a kernel on A and a user event. */
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &n, NULL, 0, NULL,
					 &ev1));
	wl[0] = ev1;
	wl[1] = u;
	E2E_OK(p, clEnqueueMarkerWithWaitList(p->queue_prof, 2, wl, &mk));
	E2E_OK(p, clFlush(p->queue_prof));
	E2E_OK(p, clWaitForEvents(1, &ev1));
	e2e_sleep_ms(BLOCKED_MS);
	assert_blocked(p, mk, "marker");
	E2E_OK(p, clSetUserEventStatus(u, CL_COMPLETE));
	E2E_OK(p, clWaitForEvents(1, &mk));
	E2E_OK(p, clGetEventInfo(mk, CL_EVENT_COMMAND_TYPE, sizeof(type), &type,
				 NULL));
	E2E_OK(p, clGetEventInfo(mk, CL_EVENT_COMMAND_QUEUE, sizeof(q), &q, NULL));
	check_command_type(p, type, CL_COMMAND_MARKER, "marker");
	ck_assert_ptr_eq(q, p->queue_prof);
	assert_filled(p, p->queue_prof, m, n, 0xabcd, "after marker");

	/* A marker with no wait list waits for everything before it. */
	E2E_OK(p, clSetKernelArg(k, 1, sizeof(cl_uint), &(cl_uint){0x1234}));
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &n, NULL, 1, &u2,
					 &ev2));
	E2E_OK(p, clEnqueueMarkerWithWaitList(p->queue, 0, NULL, &mk2));
	E2E_OK(p, clFlush(p->queue));
	e2e_sleep_ms(BLOCKED_MS);
	assert_blocked(p, mk2, "marker after a blocked kernel");
	E2E_OK(p, clSetUserEventStatus(u2, CL_COMPLETE));
	E2E_OK(p, clWaitForEvents(1, &mk2));
	ck_assert_int_eq(event_status(p, ev2), CL_COMPLETE);
	assert_filled(p, p->queue_prof, m, n, 0x1234, "after empty marker");

	clReleaseEvent(mk2);
	clReleaseEvent(ev2);
	clReleaseEvent(mk);
	clReleaseEvent(ev1);
	clReleaseEvent(u2);
	clReleaseEvent(u);
	clReleaseKernel(k);
	clReleaseMemObject(m);
	clReleaseProgram(prog);
}

START_TEST(test_marker_with_wait_list)
{
	marker_run(&e2e_native);
	marker_run(&e2e_virtual);
}
END_TEST

/* ---- barriers ---- */

#define BAR_N 1024u

static void barrier_run(struct e2e_plat *p)
{
	cl_uint *pat = e2e_xmalloc(BAR_N * sizeof(cl_uint));
	cl_mem m = buffer_zeroed(p, BAR_N * sizeof(cl_uint));
	cl_event u = user_event(p), bar, evw;
	cl_command_type type = 0;

	for (size_t i = 0; i < BAR_N; i++)
		pat[i] = 0x5eed;
	E2E_OK(p, clEnqueueBarrierWithWaitList(p->queue_prof, 1, &u, &bar));
	E2E_OK(p, clEnqueueWriteBuffer(p->queue_prof, m, CL_FALSE, 0,
				       BAR_N * sizeof(cl_uint), pat, 0, NULL,
				       &evw));
	E2E_OK(p, clFlush(p->queue_prof));
	e2e_sleep_ms(BLOCKED_MS);
	assert_blocked(p, bar, "barrier");
	assert_blocked(p, evw, "write behind a barrier");
	/* Queue A is not blocked, and the write has not happened. */
	assert_filled(p, p->queue, m, BAR_N, 0, "before the barrier opens");
	E2E_OK(p, clSetUserEventStatus(u, CL_COMPLETE));
	E2E_OK(p, clWaitForEvents(1, &evw));
	ck_assert_int_eq(event_status(p, bar), CL_COMPLETE);
	E2E_OK(p, clGetEventInfo(bar, CL_EVENT_COMMAND_TYPE, sizeof(type), &type,
				 NULL));
	check_command_type(p, type, CL_COMMAND_BARRIER, "barrier");
	assert_filled(p, p->queue, m, BAR_N, 0x5eed, "after the barrier");

	clReleaseEvent(evw);
	clReleaseEvent(bar);
	clReleaseEvent(u);
	clReleaseMemObject(m);
	free(pat);
}

START_TEST(test_barrier_with_wait_list)
{
	barrier_run(&e2e_native);
	barrier_run(&e2e_virtual);
}
END_TEST

/* ---- user events ---- */

static void user_event_blocks_run(struct e2e_plat *p)
{
	cl_program prog = e2e_program_build(p, events_src, NULL);
	cl_mem m = buffer_zeroed(p, 4096 * sizeof(cl_uint));
	cl_kernel k = kernel_setv(p, prog, m, 42);
	cl_event u = user_event(p), ev;
	size_t n = 4096;

	ck_assert_int_eq(event_status(p, u), CL_SUBMITTED);
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &n, NULL, 1, &u,
					 &ev));
	E2E_OK(p, clFlush(p->queue));
	e2e_sleep_ms(BLOCKED_MS);
	assert_blocked(p, ev, "kernel behind a user event");
	assert_filled(p, p->queue_prof, m, n, 0, "before clSetUserEventStatus");
	E2E_OK(p, clSetUserEventStatus(u, CL_COMPLETE));
	ck_assert_int_eq(event_status(p, u), CL_COMPLETE);
	E2E_OK(p, clWaitForEvents(1, &ev));
	ck_assert_int_eq(event_status(p, ev), CL_COMPLETE);
	assert_filled(p, p->queue_prof, m, n, 42, "after clSetUserEventStatus");

	clReleaseEvent(ev);
	clReleaseEvent(u);
	clReleaseKernel(k);
	clReleaseMemObject(m);
	clReleaseProgram(prog);
}

START_TEST(test_user_event_blocks)
{
	user_event_blocks_run(&e2e_native);
	user_event_blocks_run(&e2e_virtual);
}
END_TEST

struct user_neg {
	cl_int u_status;   /* the user event's own status after the set */
	cl_int dep_status; /* the dependent kernel's */
	cl_int wait_err;   /* clWaitForEvents on the dependent */
	cl_int set_again;  /* a second clSetUserEventStatus */
	cl_int set_running; /* CL_RUNNING on a fresh user event */
};

static void user_event_negative_run(struct e2e_plat *p, struct user_neg *r)
{
	cl_program prog = e2e_program_build(p, events_src, NULL);
	cl_mem m = buffer_zeroed(p, 256 * sizeof(cl_uint));
	cl_kernel k = kernel_setv(p, prog, m, 7);
	cl_event u = user_event(p), u2 = user_event(p), ev;
	size_t n = 256;

	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &n, NULL, 1, &u,
					 &ev));
	E2E_OK(p, clFlush(p->queue));
	E2E_OK(p, clSetUserEventStatus(u, -5));
	r->wait_err = clWaitForEvents(1, &ev);
	r->u_status = event_status(p, u);
	r->dep_status = event_status(p, ev);
	r->set_again = clSetUserEventStatus(u, CL_COMPLETE);
	r->set_running = clSetUserEventStatus(u2, CL_RUNNING);
	/* The failed kernel never wrote; queue B still works. */
	assert_filled(p, p->queue_prof, m, n, 0, "after a failed dependency");

	clSetUserEventStatus(u2, CL_COMPLETE);
	clReleaseEvent(ev);
	clReleaseEvent(u2);
	clReleaseEvent(u);
	clReleaseKernel(k);
	clReleaseMemObject(m);
	clReleaseProgram(prog);
}

START_TEST(test_user_event_negative)
{
	struct user_neg nat, virt;

	user_event_negative_run(&e2e_native, &nat);
	user_event_negative_run(&e2e_virtual, &virt);
	e2e_check_err("clWaitForEvents on a command after a failed user event",
		      virt.wait_err, nat.wait_err,
		      CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
	ck_assert_msg(virt.u_status == -5, "virtual user event status %d, want -5",
		      virt.u_status);
	ck_assert_msg(virt.dep_status < 0 && nat.dep_status < 0,
		      "dependent status: virtual %d native %d, want negative",
		      virt.dep_status, nat.dep_status);
	e2e_check_err("second clSetUserEventStatus", virt.set_again,
		      nat.set_again, CL_INVALID_OPERATION);
	e2e_check_err("clSetUserEventStatus(CL_RUNNING)", virt.set_running,
		      nat.set_running, CL_INVALID_VALUE);
}
END_TEST

/* ---- callbacks ---- */

struct cb_state {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int count;
	cl_int status;
	cl_event event;
	pthread_t thread;
};

static void CL_CALLBACK cb_record(cl_event ev, cl_int status, void *data)
{
	struct cb_state *s = data;

	pthread_mutex_lock(&s->mu);
	s->count++;
	s->status = status;
	s->event = ev;
	s->thread = pthread_self();
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static void cb_init(struct cb_state *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	s->status = 0x7fffffff;
}

/* Waits until the callback has run at least once or the timeout passes;
 * returns the count. */
static int cb_wait(struct cb_state *s, unsigned ms)
{
	struct timespec dl;
	int count, rc = 0;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += ms / 1000;
	dl.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&s->mu);
	while (s->count == 0 && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&s->cv, &s->mu, &dl);
	count = s->count;
	pthread_mutex_unlock(&s->mu);
	return count;
}

static int cb_count(struct cb_state *s)
{
	int count;

	pthread_mutex_lock(&s->mu);
	count = s->count;
	pthread_mutex_unlock(&s->mu);
	return count;
}

/* Static: a callback that fires late must not write into a dead frame. */
static struct cb_state cb_kernel, cb_user, cb_done, cb_failed;

/* How long a callback that some runtimes never call is waited for. */
#define CALLBACK_MAYBE_MS 500

struct cb_failed_res {
	int count;
	cl_int status;
};

static void callback_run(struct e2e_plat *p, unsigned failed_wait_ms,
			 struct cb_failed_res *failed)
{
	cl_program prog = e2e_program_build(p, events_src, NULL);
	cl_mem m = buffer_zeroed(p, 256 * sizeof(cl_uint));
	cl_kernel k = kernel_setv(p, prog, m, 3);
	cl_event u = user_event(p), u2 = user_event(p), ev, ev2;
	size_t n = 256;

	cb_init(&cb_kernel);
	cb_init(&cb_user);
	cb_init(&cb_done);
	cb_init(&cb_failed);

	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &n, NULL, 1, &u,
					 &ev));
	E2E_OK(p, clSetEventCallback(ev, CL_COMPLETE, cb_record, &cb_kernel));
	E2E_OK(p, clSetEventCallback(u, CL_COMPLETE, cb_record, &cb_user));
	E2E_OK(p, clFlush(p->queue));
	e2e_sleep_ms(BLOCKED_MS);
	ck_assert_msg(cb_count(&cb_kernel) == 0 && cb_count(&cb_user) == 0,
		      "%s: callback fired before the user event was set", p->role);

	E2E_OK(p, clSetUserEventStatus(u, CL_COMPLETE));
	ck_assert_msg(cb_wait(&cb_kernel, CALLBACK_WAIT_MS) == 1,
		      "%s: kernel callback count %d after %d ms, want 1", p->role,
		      cb_count(&cb_kernel), CALLBACK_WAIT_MS);
	ck_assert_msg(cb_wait(&cb_user, CALLBACK_WAIT_MS) == 1,
		      "%s: user event callback count %d, want 1", p->role,
		      cb_count(&cb_user));
	ck_assert_int_eq(cb_kernel.status, CL_COMPLETE);
	ck_assert_ptr_eq(cb_kernel.event, ev);
	ck_assert_int_eq(cb_user.status, CL_COMPLETE);
	ck_assert_ptr_eq(cb_user.event, u);

	/* On an event already complete it still fires, once. */
	E2E_OK(p, clFinish(p->queue));
	E2E_OK(p, clSetEventCallback(ev, CL_COMPLETE, cb_record, &cb_done));
	ck_assert_msg(cb_wait(&cb_done, CALLBACK_WAIT_MS) == 1,
		      "%s: callback on a complete event: count %d", p->role,
		      cb_count(&cb_done));
	ck_assert_int_eq(cb_done.status, CL_COMPLETE);

	/* A failed dependency: the spec calls the callback with a negative
	 * status; the caller compares what each platform did. */
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue_prof, k, 1, NULL, &n, NULL, 1,
					 &u2, &ev2));
	E2E_OK(p, clSetEventCallback(ev2, CL_COMPLETE, cb_record, &cb_failed));
	E2E_OK(p, clFlush(p->queue_prof));
	E2E_OK(p, clSetUserEventStatus(u2, -3));
	E2E_EXPECT(p, clWaitForEvents(1, &ev2),
		   CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
	cb_wait(&cb_failed, failed_wait_ms);

	/* Exactly once: nothing more arrives later. */
	e2e_sleep_ms(BLOCKED_MS);
	ck_assert_int_eq(cb_count(&cb_kernel), 1);
	ck_assert_int_eq(cb_count(&cb_user), 1);
	ck_assert_int_eq(cb_count(&cb_done), 1);
	pthread_mutex_lock(&cb_failed.mu);
	failed->count = cb_failed.count;
	failed->status = cb_failed.status;
	pthread_mutex_unlock(&cb_failed.mu);

	clReleaseEvent(ev2);
	clReleaseEvent(ev);
	clReleaseEvent(u2);
	clReleaseEvent(u);
	clReleaseKernel(k);
	clReleaseMemObject(m);
	clReleaseProgram(prog);
}

START_TEST(test_event_callback)
{
	struct cb_failed_res nat, virt;

	callback_run(&e2e_native, CALLBACK_MAYBE_MS, &nat);
	callback_run(&e2e_virtual,
		     nat.count ? CALLBACK_WAIT_MS : CALLBACK_MAYBE_MS, &virt);
	/* The virtual platform does at least what native does: where native
	 * calls back for a failed command, so must it, once, negative. */
	if (nat.count == 0)
		fprintf(stderr, "e2e: note: native never calls a CL_COMPLETE "
				"callback of a command whose dependency failed\n");
	ck_assert_msg(nat.count <= 1 && virt.count <= 1,
		      "failed command's callback ran %d (native) / %d (virtual) "
		      "times",
		      nat.count, virt.count);
	ck_assert_msg(virt.count >= nat.count,
		      "failed command's callback: native called, virtual not");
	ck_assert_msg(!virt.count || virt.status < 0,
		      "failed command's callback status %d, want negative",
		      virt.status);
}
END_TEST

/* ---- profiling ---- */

static const cl_profiling_info prof_params[] = {
	CL_PROFILING_COMMAND_QUEUED, CL_PROFILING_COMMAND_SUBMIT,
	CL_PROFILING_COMMAND_START,  CL_PROFILING_COMMAND_END,
};

static void assert_profiled(struct e2e_plat *p, cl_event ev, const char *what,
			    cl_int *complete_err)
{
	cl_ulong t[4], done = 0;

	for (int i = 0; i < 4; i++) {
		t[i] = 0;
		E2E_OK(p, clGetEventProfilingInfo(ev, prof_params[i], sizeof(t[i]),
						  &t[i], NULL));
		ck_assert_msg(t[i] != 0, "%s: %s: timestamp %d is 0", p->role,
			      what, i);
		if (i > 0)
			ck_assert_msg(t[i - 1] <= t[i],
				      "%s: %s: timestamp %d (%llu) > %d (%llu)",
				      p->role, what, i - 1,
				      (unsigned long long)t[i - 1], i,
				      (unsigned long long)t[i]);
	}
	/* CL_PROFILING_COMMAND_COMPLETE (2.0): where there, not before END. */
	*complete_err = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_COMPLETE,
						sizeof(done), &done, NULL);
	if (*complete_err == CL_SUCCESS)
		ck_assert_msg(done >= t[3], "%s: %s: COMPLETE %llu < END %llu",
			      p->role, what, (unsigned long long)done,
			      (unsigned long long)t[3]);
}

struct prof_res {
	cl_int complete_err[2];
	cl_int unprofiled_err;
	cl_int user_err;
};

static void profiling_run(struct e2e_plat *p, struct prof_res *r)
{
	cl_program prog = e2e_program_build(p, events_src, NULL);
	cl_mem m = buffer_zeroed(p, 65536 * sizeof(cl_uint));
	cl_kernel k = kernel_setv(p, prog, m, 9);
	cl_uint *h = e2e_xmalloc(65536 * sizeof(cl_uint));
	cl_event ek, er, en, u = user_event(p);
	size_t n = 65536;
	cl_ulong t;

	E2E_OK(p, clEnqueueNDRangeKernel(p->queue_prof, k, 1, NULL, &n, NULL, 0,
					 NULL, &ek));
	E2E_OK(p, clEnqueueReadBuffer(p->queue_prof, m, CL_FALSE, 0,
				      n * sizeof(cl_uint), h, 0, NULL, &er));
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &n, NULL, 0, NULL,
					 &en));
	E2E_OK(p, clWaitForEvents(1, &er));
	E2E_OK(p, clWaitForEvents(1, &en));
	assert_profiled(p, ek, "kernel", &r->complete_err[0]);
	assert_profiled(p, er, "read", &r->complete_err[1]);
	r->unprofiled_err = clGetEventProfilingInfo(en, CL_PROFILING_COMMAND_START,
						    sizeof(t), &t, NULL);
	E2E_OK(p, clSetUserEventStatus(u, CL_COMPLETE));
	r->user_err = clGetEventProfilingInfo(u, CL_PROFILING_COMMAND_QUEUED,
					      sizeof(t), &t, NULL);
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_eq(h[i], 9);

	clReleaseEvent(u);
	clReleaseEvent(en);
	clReleaseEvent(er);
	clReleaseEvent(ek);
	free(h);
	clReleaseKernel(k);
	clReleaseMemObject(m);
	clReleaseProgram(prog);
}

/* A non-blocking read gated by a user event that then fails: the read ends
 * with an error, and every way of waiting for it says so rather than
 * waiting for data that will never come. */
/* The ways of one run: a completion callback, a flush before the failure,
 * clFinish before clWaitForEvents, a rect read. (A read enqueued after its
 * gate failed is left out: PoCL 3.1 never ends it natively.) */
enum { READ_CB = 1, READ_FLUSH = 2, READ_FINISH_FIRST = 4, READ_RECT = 8 };

struct read_fail {
	cl_int wait_err;   /* clWaitForEvents on the read */
	cl_int status;     /* its CL_EVENT_COMMAND_EXECUTION_STATUS */
	cl_int finish_err; /* clFinish on its queue */
	cl_int cb_status;  /* its CL_COMPLETE callback's status */
};

static void read_fail_cb(cl_event ev, cl_int status, void *data)
{
	(void)ev;
	__atomic_store_n((cl_int *)data, status, __ATOMIC_SEQ_CST);
}

static void read_fail_run(struct e2e_plat *p, size_t n, int how, struct read_fail *r)
{
	cl_uint *dst = e2e_xmalloc(n * sizeof(cl_uint));
	cl_mem m = buffer_zeroed(p, n * sizeof(cl_uint));
	cl_event u = user_event(p), ev;
	cl_uint more = 0;

	memset(dst, 0xab, n * sizeof(cl_uint));
	r->cb_status = 1;
	if (how & READ_RECT) {
		size_t o[3] = {0, 0, 0}, reg[3] = {n * sizeof(cl_uint) / 4, 4, 1};
		E2E_OK(p, clEnqueueReadBufferRect(p->queue, m, CL_FALSE, o, o, reg, 0, 0, 0, 0, dst,
						  1, &u, &ev));
	} else {
		E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_FALSE, 0, n * sizeof(cl_uint), dst, 1,
					      &u, &ev));
	}
	if (how & READ_CB)
		E2E_OK(p, clSetEventCallback(ev, CL_COMPLETE, read_fail_cb, &r->cb_status));
	if (how & READ_FLUSH)
		E2E_OK(p, clFlush(p->queue));
	E2E_OK(p, clSetUserEventStatus(u, -5));
	if (how & READ_FINISH_FIRST) {
		r->finish_err = clFinish(p->queue);
		r->wait_err = clWaitForEvents(1, &ev);
	} else {
		r->wait_err = clWaitForEvents(1, &ev);
		r->finish_err = clFinish(p->queue);
	}
	r->status = event_status(p, ev);
	/* Natively (PoCL) it may never come: only the virtual side waits. */
	for (int i = 0; (how & READ_CB) && p == &e2e_virtual && i < CALLBACK_WAIT_MS &&
			__atomic_load_n(&r->cb_status, __ATOMIC_SEQ_CST) == 1;
	     i++)
		e2e_sleep_ms(1);
	/* The failed read wrote nothing, and the queue goes on working. */
	ck_assert_msg(dst[0] == 0xabababab && dst[n - 1] == 0xabababab,
		      "%s: the failed read wrote 0x%x", p->role, dst[0]);
	E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_TRUE, 0, sizeof(more), &more, 0, NULL,
				      NULL));
	ck_assert_msg(more == 0, "%s: a read after the failed one: %u", p->role, more);
	clReleaseEvent(ev);
	clReleaseEvent(u);
	clReleaseMemObject(m);
	free(dst);
}

/* The daemon's worker outlived the failed reads and their releases: a
 * round trip after them still works (a worker that aborted loses the
 * session, and this fails). */
static void read_fail_alive(void)
{
	struct e2e_plat *p = &e2e_virtual;
	cl_mem m = buffer_zeroed(p, sizeof(cl_uint));
	cl_uint v = 1;

	E2E_OK(p, clFinish(p->queue));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_TRUE, 0, sizeof(v), &v, 0, NULL, NULL));
	ck_assert_msg(v == 0, "virtual: a read after the failed ones: %u", v);
	E2E_OK(p, clReleaseMemObject(m));
	E2E_OK(p, clFinish(p->queue));
}

static void read_fail_check(size_t n, int how)
{
	struct read_fail nat, virt;

	read_fail_run(&e2e_native, n, how, &nat);
	read_fail_run(&e2e_virtual, n, how, &virt);
	read_fail_alive();
	e2e_check_err("clWaitForEvents on a read after a failed user event", virt.wait_err,
		      nat.wait_err, CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
	ck_assert_msg(virt.status < 0 && (nat.status < 0 || e2e_same_platform()),
		      "how %d: failed read's status: virtual %d native %d, want negative", how,
		      virt.status, nat.status);
	/* clFinish lists no error for a command that failed: NVIDIA answers
	 * the failed command's (-5 here) when the queue's failed read was
	 * not waited for first; the virtual side answers as natively or, as
	 * the specification has it, CL_SUCCESS (docs/compatibility.md). */
	if (virt.finish_err != nat.finish_err && virt.finish_err == CL_SUCCESS)
		fprintf(stderr, "e2e: note: native: how %d: clFinish after a failed read: %d\n",
			how, nat.finish_err);
	else
		ck_assert_msg(virt.finish_err == nat.finish_err,
			      "how %d: clFinish: virtual %d native %d", how, virt.finish_err,
			      nat.finish_err);
	/* "The registered callback function will be called ... with the
	 * error code" when the command fails: PoCL 3.1 never calls it for a
	 * command whose wait list failed, so the virtual side is held to the
	 * spec alone. */
	if ((how & READ_CB) && nat.cb_status >= 0)
		fprintf(stderr, "e2e: note: native: how %d: a failed read's callback: %d\n", how,
			nat.cb_status);
	ck_assert_msg(!(how & READ_CB) || virt.cb_status < 0,
		      "how %d: failed read's callback: virtual %d, want negative", how,
		      virt.cb_status);
}

START_TEST(test_nonblocking_read_failed)
{
	for (int how = 0; how < 16; how++)
		read_fail_check(256, how);
}
END_TEST

/* Large enough for the daemon's mapped read path (host/land.c); one chunk
 * of the pinned path (host/exec_pinned.c, e2e-pinned.sh). */
START_TEST(test_nonblocking_read_failed_large)
{
	static const int hows[] = {0, READ_CB | READ_FLUSH, READ_FINISH_FIRST, READ_RECT | READ_CB};

	for (size_t i = 0; i < sizeof(hows) / sizeof(*hows); i++)
		read_fail_check((3u << 20) / sizeof(cl_uint), hows[i]);
}
END_TEST

/* Past the daemon's pinned slot (4 MiB, host/pinned.h): with
 * CLMUX_PINNED=1 (e2e-pinned.sh) the read is cut into 5 and 9 chunks, the
 * later ones each behind a gate of the daemon's; they fail together. */
START_TEST(test_nonblocking_read_failed_chunks)
{
	static const struct {
		size_t mib;
		int how;
	} runs[] = {{18, 0}, {18, READ_CB | READ_FLUSH}, {33, READ_FINISH_FIRST | READ_CB},
		    {18, READ_FLUSH}};

	for (size_t i = 0; i < sizeof(runs) / sizeof(*runs); i++)
		read_fail_check((runs[i].mib << 20) / sizeof(cl_uint), runs[i].how);
}
END_TEST

/* Host timers: what the native device offers, the virtual one offers, its
 * errors included. Where the device has a timer, the virtual device timer
 * read between two native reads is printed with its distance from their
 * midpoint (docs/compatibility.md: the error bound); no timing is checked. */
struct timer_res {
	cl_int err, host_err, null_err, null_host_err, bad_err;
	cl_ulong res, dev[2], host[2], host_only;
};

static void timer_run(struct e2e_plat *p, struct timer_res *r)
{
	cl_ulong x;

	E2E_OK(p, clGetPlatformInfo(p->platform, CL_PLATFORM_HOST_TIMER_RESOLUTION,
				    sizeof(r->res), &r->res, NULL));
	r->err = clGetDeviceAndHostTimer(p->device, &r->dev[0], &r->host[0]);
	if (!r->err)
		ck_assert_int_eq(clGetDeviceAndHostTimer(p->device, &r->dev[1], &r->host[1]),
				 CL_SUCCESS);
	r->host_err = clGetHostTimer(p->device, &r->host_only);
	r->null_err = clGetDeviceAndHostTimer(p->device, NULL, &x);
	r->null_host_err = clGetHostTimer(p->device, NULL);
	r->bad_err = clGetDeviceAndHostTimer(NULL, &x, &x);
}

START_TEST(test_host_timer)
{
	struct timer_res nat, virt;

	timer_run(&e2e_native, &nat);
	timer_run(&e2e_virtual, &virt);
	e2e_check_err("clGetDeviceAndHostTimer", virt.err, nat.err, nat.err);
	e2e_check_err("clGetHostTimer", virt.host_err, nat.host_err, nat.host_err);
	e2e_check_err("clGetDeviceAndHostTimer(NULL device)", virt.bad_err, nat.bad_err,
		      CL_INVALID_DEVICE);
	e2e_check_err("clGetDeviceAndHostTimer(device, NULL, &t)", virt.null_err, nat.null_err,
		      CL_INVALID_VALUE);
	e2e_check_err("clGetHostTimer(device, NULL)", virt.null_host_err, nat.null_host_err,
		      CL_INVALID_VALUE);
	ck_assert_msg(!virt.res == !nat.res,
		      "CL_PLATFORM_HOST_TIMER_RESOLUTION: virtual %llu native %llu (0: no timer)",
		      (unsigned long long)virt.res, (unsigned long long)nat.res);
	/* The calibration's bound, half the shortest of 5 sync round trips,
	 * measured with clFinish on an empty queue (a device without a timer
	 * has none to calibrate, but the bound is the transport's). */
	for (int g = 0; g < 3; g++) {
		uint64_t best = UINT64_MAX;
		for (int i = 0; i < 5; i++) {
			struct timespec a, b;
			uint64_t ns;
			clock_gettime(CLOCK_MONOTONIC, &a);
			E2E_OK(&e2e_virtual, clFinish(e2e_virtual.queue));
			clock_gettime(CLOCK_MONOTONIC, &b);
			ns = (uint64_t)(b.tv_sec - a.tv_sec) * 1000000000ull +
			     (uint64_t)(b.tv_nsec - a.tv_nsec);
			best = ns < best ? ns : best;
		}
		fprintf(stderr, "e2e: timer: calibration bound (half the shortest of 5 round "
				"trips): %llu ns\n",
			(unsigned long long)(best / 2));
	}
	if (virt.err)
		return;
	/* Monotonic, and the host timer is the one clGetHostTimer reads. */
	ck_assert_msg(virt.dev[1] >= virt.dev[0] && virt.host[1] >= virt.host[0],
		      "virtual timers went back: device %llu -> %llu, host %llu -> %llu",
		      (unsigned long long)virt.dev[0], (unsigned long long)virt.dev[1],
		      (unsigned long long)virt.host[0], (unsigned long long)virt.host[1]);
	ck_assert_msg(virt.host_only >= virt.host[1], "clGetHostTimer went back: %llu < %llu",
		      (unsigned long long)virt.host_only, (unsigned long long)virt.host[1]);
	/* The measurement: native, virtual, native, a few times. */
	for (int i = 0; i < 5; i++) {
		cl_ulong n0, n1, v, h;
		E2E_OK(&e2e_native, clGetDeviceAndHostTimer(e2e_native.device, &n0, &h));
		E2E_OK(&e2e_virtual, clGetDeviceAndHostTimer(e2e_virtual.device, &v, &h));
		E2E_OK(&e2e_native, clGetDeviceAndHostTimer(e2e_native.device, &n1, &h));
		fprintf(stderr,
			"e2e: timer: virtual device timer %+lld ns from the native reads' "
			"midpoint, which are %llu ns apart\n",
			(long long)(v - (n0 + (n1 - n0) / 2)), (unsigned long long)(n1 - n0));
	}
}
END_TEST

START_TEST(test_profiling)
{
	struct prof_res nat, virt;

	profiling_run(&e2e_native, &nat);
	profiling_run(&e2e_virtual, &virt);
	e2e_check_err("profiling info on the non-profiling queue",
		      virt.unprofiled_err, nat.unprofiled_err,
		      CL_PROFILING_INFO_NOT_AVAILABLE);
	e2e_check_err("profiling info of a user event", virt.user_err,
		      nat.user_err, CL_PROFILING_INFO_NOT_AVAILABLE);
	for (int i = 0; i < 2; i++)
		ck_assert_msg(virt.complete_err[i] == nat.complete_err[i],
			      "CL_PROFILING_COMMAND_COMPLETE: virtual %s native %s",
			      e2e_cl_strerror(virt.complete_err[i]),
			      e2e_cl_strerror(nat.complete_err[i]));
}
END_TEST

/* ---- non-blocking reads ---- */

#define NB_N (1u << 20)
#define NB_K 5u

/* Produce on A; read the first half on A and the second half on B (after
 * the kernel's event), both non-blocking, then wait for both reads. */
static void nonblocking_run(struct e2e_plat *p, cl_uint *out)
{
	size_t n = NB_N, half = NB_N / 2 * sizeof(cl_uint);
	cl_program prog = e2e_program_build(p, events_src, NULL);
	cl_kernel k = e2e_kernel_create(p, prog, "produce");
	cl_mem m = e2e_buffer_create(p, CL_MEM_READ_WRITE, NB_N * sizeof(cl_uint),
				     NULL);
	cl_uint kv = NB_K;
	cl_event ek, er[2];

	E2E_OK(p, clSetKernelArg(k, 0, sizeof(m), &m));
	E2E_OK(p, clSetKernelArg(k, 1, sizeof(kv), &kv));
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &n, NULL, 0, NULL,
					 &ek));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_FALSE, 0, half, out, 0,
				      NULL, &er[0]));
	E2E_OK(p, clEnqueueReadBuffer(p->queue_prof, m, CL_FALSE, half, half,
				      (char *)out + half, 1, &ek, &er[1]));
	E2E_OK(p, clWaitForEvents(2, er));
	ck_assert_int_eq(event_status(p, er[0]), CL_COMPLETE);
	ck_assert_int_eq(event_status(p, er[1]), CL_COMPLETE);
	clReleaseEvent(er[1]);
	clReleaseEvent(er[0]);
	clReleaseEvent(ek);
	clReleaseMemObject(m);
	clReleaseKernel(k);
	clReleaseProgram(prog);
}

START_TEST(test_nonblocking_read)
{
	size_t bytes = NB_N * sizeof(cl_uint);
	cl_uint *nat = e2e_xmalloc(bytes), *virt = e2e_xmalloc(bytes);

	memset(nat, 0xff, bytes);
	memset(virt, 0xff, bytes);
	nonblocking_run(&e2e_native, nat);
	nonblocking_run(&e2e_virtual, virt);
	for (cl_uint i = 0; i < NB_N; i++)
		ck_assert_msg(virt[i] == i * 3u + NB_K && nat[i] == virt[i],
			      "[%u]: virtual %u native %u, want %u", i, virt[i],
			      nat[i], i * 3u + NB_K);
	free(nat);
	free(virt);
}
END_TEST

/* A non-blocking read whose event and queue the application released before
 * its data landed: landing drops the last references, and the thread that
 * delivers read data must not wait for itself doing so (it did: the queue's
 * release waited for the read's pending count, settled only afterwards). */
static void released_before_landing_run(struct e2e_plat *p)
{
	enum { N = 1024 };
	cl_uint *src = e2e_xmalloc(N * sizeof(cl_uint)), *dst = e2e_xcalloc(N * sizeof(cl_uint));
	cl_uint *again = e2e_xcalloc(N * sizeof(cl_uint));
	cl_command_queue q2;
	cl_event u = user_event(p), ev;
	cl_mem m;
	cl_int err;

	for (cl_uint i = 0; i < N; i++)
		src[i] = i * 7u + 1;
	m = e2e_buffer_create(p, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, N * sizeof(cl_uint),
			      src);
	q2 = clCreateCommandQueueWithProperties(p->context, p->device, NULL, &err);
	E2E_OK(p, err);
	E2E_OK(p, clEnqueueReadBuffer(q2, m, CL_FALSE, 0, N * sizeof(cl_uint), dst, 1, &u, &ev));
	E2E_OK(p, clReleaseEvent(ev));
	E2E_OK(p, clReleaseCommandQueue(q2));
	E2E_OK(p, clSetUserEventStatus(u, CL_COMPLETE));
	/* Until it lands (the test's timeout bounds this). */
	while (memcmp(dst, src, N * sizeof(cl_uint)))
		e2e_sleep_ms(1);
	/* Read data still arrives afterwards. */
	E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_FALSE, 0, N * sizeof(cl_uint), again, 0,
				      NULL, NULL));
	E2E_OK(p, clFinish(p->queue));
	e2e_assert_bytes_eq(again, src, N * sizeof(cl_uint), "a read after the released one");
	clReleaseEvent(u);
	clReleaseMemObject(m);
	free(src);
	free(dst);
	free(again);
}

START_TEST(test_released_before_landing)
{
	released_before_landing_run(&e2e_native);
	released_before_landing_run(&e2e_virtual);
}
END_TEST

/* ---- clGetEventInfo ---- */

enum { EI_NUM = 10 };

struct event_info {
	cl_command_type type[EI_NUM];
	cl_int short_err;
};

static void event_info_check(struct e2e_plat *p, cl_event ev,
			     cl_command_queue want_q, cl_command_type *type)
{
	cl_command_queue q = (cl_command_queue)1;
	cl_context c = NULL;
	size_t ret = 0;

	E2E_OK(p, clGetEventInfo(ev, CL_EVENT_COMMAND_TYPE, sizeof(*type), type,
				 &ret));
	ck_assert_uint_eq(ret, sizeof(cl_command_type));
	E2E_OK(p, clGetEventInfo(ev, CL_EVENT_COMMAND_QUEUE, sizeof(q), &q, NULL));
	ck_assert_msg(q == want_q, "%s: event of type 0x%x: queue %p, want %p",
		      p->role, *type, (void *)q, (void *)want_q);
	E2E_OK(p, clGetEventInfo(ev, CL_EVENT_CONTEXT, sizeof(c), &c, NULL));
	ck_assert_ptr_eq(c, p->context);
	ck_assert_int_eq(event_status(p, ev), CL_COMPLETE);
}

static void event_info_run(struct e2e_plat *p, struct event_info *r)
{
	cl_program prog = e2e_program_build(p, events_src, NULL);
	cl_mem m = buffer_zeroed(p, 1024), m2 = buffer_zeroed(p, 1024);
	cl_kernel k = kernel_setv(p, prog, m, 1);
	cl_event ev[EI_NUM], u = user_event(p);
	unsigned char h[1024];
	cl_uint pat = 0x01020304;
	size_t n = 256;
	int i = 0;
	cl_int err;
	void *map;
	char tiny;

	memset(h, 0x21, sizeof(h));
	ck_assert_int_eq(event_status(p, u), CL_SUBMITTED);
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &n, NULL, 0, NULL,
					 &ev[i++]));
	E2E_OK(p, clEnqueueWriteBuffer(p->queue, m2, CL_FALSE, 0, sizeof(h), h, 0,
				       NULL, &ev[i++]));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_FALSE, 0, sizeof(h), h, 0,
				      NULL, &ev[i++]));
	E2E_OK(p, clEnqueueCopyBuffer(p->queue, m, m2, 0, 0, 512, 0, NULL,
				      &ev[i++]));
	E2E_OK(p, clEnqueueFillBuffer(p->queue, m, &pat, sizeof(pat), 0, 512, 0,
				      NULL, &ev[i++]));
	map = clEnqueueMapBuffer(p->queue, m, CL_FALSE, CL_MAP_READ, 0, 512, 0,
				 NULL, &ev[i++], &err);
	ck_assert_msg(map && err == CL_SUCCESS, "%s: map: %s", p->role,
		      e2e_cl_strerror(err));
	E2E_OK(p, clEnqueueUnmapMemObject(p->queue, m, map, 0, NULL, &ev[i++]));
	E2E_OK(p, clEnqueueMarkerWithWaitList(p->queue, 0, NULL, &ev[i++]));
	E2E_OK(p, clEnqueueBarrierWithWaitList(p->queue, 0, NULL, &ev[i++]));
	ck_assert_int_eq(i, EI_NUM - 1);
	E2E_OK(p, clFinish(p->queue));
	for (int j = 0; j < EI_NUM - 1; j++)
		event_info_check(p, ev[j], p->queue, &r->type[j]);
	E2E_OK(p, clSetUserEventStatus(u, CL_COMPLETE));
	event_info_check(p, u, NULL, &r->type[EI_NUM - 1]);
	r->short_err = clGetEventInfo(ev[0], CL_EVENT_COMMAND_TYPE, 1, &tiny,
				      NULL);

	for (int j = 0; j < EI_NUM - 1; j++)
		clReleaseEvent(ev[j]);
	clReleaseEvent(u);
	clReleaseKernel(k);
	clReleaseMemObject(m2);
	clReleaseMemObject(m);
	clReleaseProgram(prog);
}

START_TEST(test_event_info)
{
	static const cl_command_type want[EI_NUM] = {
		CL_COMMAND_NDRANGE_KERNEL, CL_COMMAND_WRITE_BUFFER,
		CL_COMMAND_READ_BUFFER,    CL_COMMAND_COPY_BUFFER,
		CL_COMMAND_FILL_BUFFER,    CL_COMMAND_MAP_BUFFER,
		CL_COMMAND_UNMAP_MEM_OBJECT, CL_COMMAND_MARKER,
		CL_COMMAND_BARRIER,        CL_COMMAND_USER,
	};
	struct event_info nat, virt;

	event_info_run(&e2e_native, &nat);
	event_info_run(&e2e_virtual, &virt);
	for (int i = 0; i < EI_NUM; i++) {
		char what[32];

		snprintf(what, sizeof(what), "event %d", i);
		check_command_type(&e2e_native, nat.type[i], want[i], what);
		check_command_type(&e2e_virtual, virt.type[i], want[i], what);
	}
	e2e_check_err("clGetEventInfo into 1 byte", virt.short_err,
		      nat.short_err, CL_INVALID_VALUE);
}
END_TEST

static Suite *events_suite(void)
{
	Suite *s = suite_create("e2e_events");
	TCase *tc;

	tc = e2e_tcase("ordering");
	tcase_add_test(tc, test_cross_queue_wait);
	tcase_add_test(tc, test_marker_with_wait_list);
	tcase_add_test(tc, test_barrier_with_wait_list);
	tcase_add_test(tc, test_nonblocking_read);
	tcase_add_test(tc, test_released_before_landing);
	suite_add_tcase(s, tc);

	tc = e2e_tcase("user_events");
	tcase_add_test(tc, test_user_event_blocks);
	tcase_add_test(tc, test_user_event_negative);
	tcase_add_test(tc, test_event_callback);
	tcase_add_test(tc, test_nonblocking_read_failed);
	tcase_add_test(tc, test_nonblocking_read_failed_large);
	tcase_add_test(tc, test_nonblocking_read_failed_chunks);
	suite_add_tcase(s, tc);

	tc = e2e_tcase("info");
	tcase_add_test(tc, test_host_timer);
	tcase_add_test(tc, test_profiling);
	tcase_add_test(tc, test_event_info);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return e2e_main(events_suite());
}
