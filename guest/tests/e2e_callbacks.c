// SPDX-License-Identifier: MIT
// e2e_callbacks.c - event callbacks of every command type, and release callbacks that arrive while
// the application spins.
#include "e2e.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How long a callback that must come is waited for, by spinning. */
#define SPIN_WAIT_S 10
/* How long "exactly once" is given to be broken by a late second call. */
#define AFTER_MS 50
/* How long a native runtime is given to call back for failed commands. */
#define FAILED_WAIT_S 2

static const char src[] = "__kernel void setv(__global uint *x, uint v)\n"
			  "{\n"
			  "	x[get_global_id(0)] = v;\n"
			  "}\n";

#define N     256
#define BYTES (N * sizeof(cl_uint))

/* ---- event callbacks of each command type ---- */

enum cmd {
	CMD_KERNEL,
	CMD_READ,
	CMD_WRITE,
	CMD_MAP,
	CMD_UNMAP,
	CMD_COPY,
	CMD_FILL,
	CMD_MARKER,
	CMD_BARRIER,
	CMD_USER,
	CMD_NUM
};

static const char *const cmd_name[CMD_NUM] = {"kernel", "read", "write",  "map",     "unmap",
					      "copy",	"fill", "marker", "barrier", "user event"};

/* Registered before the command can complete (it waits on a gate), or
 * after it has. */
enum { PH_BEFORE, PH_AFTER, PH_NUM };
static const char *const ph_name[PH_NUM] = {"before completion", "after completion"};

/* CL_COMPLETE, CL_RUNNING, CL_SUBMITTED are 0, 1, 2. */
#define TYPES 3
static const char *const type_name[TYPES] = {"CL_COMPLETE", "CL_RUNNING", "CL_SUBMITTED"};

struct rec {
	atomic_int count;
	atomic_int status;
};

/* Static: a callback that fires late must not write into a dead frame. */
static struct rec recs[CMD_NUM][PH_NUM][TYPES];

struct result {
	int count[CMD_NUM][PH_NUM][TYPES];
	cl_int status[CMD_NUM][PH_NUM][TYPES];
};

static void CL_CALLBACK cb_rec(cl_event ev, cl_int status, void *data)
{
	struct rec *r = data;

	(void)ev;
	atomic_store(&r->status, status);
	atomic_fetch_add(&r->count, 1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A spin's pause, so that the runtime's threads get the machine's few
 * cores; no OpenCL call. */
static void pause_briefly(void)
{
	struct timespec ts = {0, 100 * 1000};

	nanosleep(&ts, NULL);
}

/* Spins, calling no OpenCL, until every record of the phase has been
 * called (with `like`, those called there) or `secs` passed. */
static void spin_for_phase(int ph, const struct result *like, int secs)
{
	double end = now_s() + secs;

	for (;;) {
		int missing = 0;

		for (int c = 0; c < CMD_NUM; c++)
			for (int t = 0; t < TYPES; t++)
				missing += atomic_load(&recs[c][ph][t].count) == 0 &&
					   (!like || like->count[c][ph][t]);
		if (!missing || now_s() > end)
			return;
		pause_briefly();
	}
}

static void register_all(struct e2e_plat *p, cl_event ev, int c, int ph)
{
	for (int t = 0; t < TYPES; t++)
		E2E_OK(p, clSetEventCallback(ev, t, cb_rec, &recs[c][ph][t]));
}

static cl_mem buffer(struct e2e_plat *p)
{
	static cl_uint zero[N];

	return e2e_buffer_create(p, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, BYTES, zero);
}

/*
 * Every command type, each waiting on a gate (a user event) when its
 * callbacks are registered, and registered again once all have completed.
 * gate_status is the gate's: CL_COMPLETE, or an error that fails them all.
 */
static void commands_run(struct e2e_plat *p, cl_int gate_status, const struct result *like,
			 struct result *res)
{
	/* Native runtimes may never call back for a failed command (PoCL's
	 * CL_COMPLETE): their run waits a little for what they do call. */
	int secs = gate_status < 0 && !like ? FAILED_WAIT_S : SPIN_WAIT_S;

	static cl_uint host_r[N], host_w[N];
	cl_program prog = e2e_program_build(p, src, NULL);
	cl_mem a = buffer(p), b = buffer(p);
	cl_kernel k = e2e_kernel_create(p, prog, "setv");
	cl_uint v = 7, pattern = 0x5a5a5a5a;
	cl_event ev[CMD_NUM], gate;
	size_t n = N;
	void *map;
	cl_int err;

	memset(recs, 0, sizeof(recs));
	gate = clCreateUserEvent(p->context, &err);
	E2E_OK(p, err);
	E2E_OK(p, clSetKernelArg(k, 0, sizeof(a), &a));
	E2E_OK(p, clSetKernelArg(k, 1, sizeof(v), &v));

	/* A read or map that fails lands no data: its waits and clFinish end
	 * all the same (PoCL never calls back for a command that failed
	 * through its wait list; the daemon reads the status). */
	E2E_OK(p, clEnqueueReadBuffer(p->queue, a, CL_FALSE, 0, BYTES, host_r, 1, &gate,
				      &ev[CMD_READ]));
	map = clEnqueueMapBuffer(p->queue, b, CL_FALSE, CL_MAP_READ, 0, BYTES, 1, &gate,
				 &ev[CMD_MAP], &err);
	E2E_OK(p, err);
	E2E_OK(p, clEnqueueUnmapMemObject(p->queue, b, map, 1, &gate, &ev[CMD_UNMAP]));
	E2E_OK(p,
	       clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &n, NULL, 1, &gate, &ev[CMD_KERNEL]));
	E2E_OK(p, clEnqueueWriteBuffer(p->queue, b, CL_FALSE, 0, BYTES, host_w, 1, &gate,
				       &ev[CMD_WRITE]));
	E2E_OK(p, clEnqueueCopyBuffer(p->queue, a, b, 0, 0, BYTES, 1, &gate, &ev[CMD_COPY]));
	E2E_OK(p, clEnqueueFillBuffer(p->queue, a, &pattern, sizeof(pattern), 0, BYTES, 1, &gate,
				      &ev[CMD_FILL]));
	E2E_OK(p, clEnqueueMarkerWithWaitList(p->queue, 1, &gate, &ev[CMD_MARKER]));
	E2E_OK(p, clEnqueueBarrierWithWaitList(p->queue, 1, &gate, &ev[CMD_BARRIER]));
	ev[CMD_USER] = gate;
	E2E_OK(p, clRetainEvent(gate));
	E2E_OK(p, clFlush(p->queue));

	for (int c = 0; c < CMD_NUM; c++)
		register_all(p, ev[c], c, PH_BEFORE);
	E2E_OK(p, clSetUserEventStatus(gate, gate_status));
	spin_for_phase(PH_BEFORE, like, secs);

	/* Complete (or failed) now, natively and through clmux alike. */
	(void)clFinish(p->queue);
	for (int c = 0; c < CMD_NUM; c++)
		(void)clWaitForEvents(1, &ev[c]);
	for (int c = 0; c < CMD_NUM; c++)
		register_all(p, ev[c], c, PH_AFTER);
	spin_for_phase(PH_AFTER, like, secs);

	e2e_sleep_ms(AFTER_MS);
	for (int c = 0; c < CMD_NUM; c++)
		for (int ph = 0; ph < PH_NUM; ph++)
			for (int t = 0; t < TYPES; t++) {
				res->count[c][ph][t] = atomic_load(&recs[c][ph][t].count);
				res->status[c][ph][t] = atomic_load(&recs[c][ph][t].status);
			}

	for (int c = 0; c < CMD_NUM; c++)
		clReleaseEvent(ev[c]);
	clReleaseEvent(gate);
	clReleaseKernel(k);
	clReleaseMemObject(b);
	clReleaseMemObject(a);
	clReleaseProgram(prog);
}

/*
 * The virtual platform is held to the specification: each callback once,
 * with its own status on success and a negative one on failure. Native
 * runtimes that fall short of it get a note (PoCL calls back for none of
 * the commands a failed user event fails); the daemon reads their status
 * after a failure and calls back with the error.
 */
static void commands_check(cl_int gate_status)
{
	struct result *nat = e2e_xcalloc(sizeof(*nat)), *virt = e2e_xcalloc(sizeof(*virt));

	commands_run(&e2e_native, gate_status, NULL, nat);
	commands_run(&e2e_virtual, gate_status, gate_status < 0 ? nat : NULL, virt);
	for (int c = 0; c < CMD_NUM; c++)
		for (int ph = 0; ph < PH_NUM; ph++)
			for (int t = 0; t < TYPES; t++) {
				int nc = nat->count[c][ph][t], vc = virt->count[c][ph][t];
				cl_int vs = virt->status[c][ph][t];
				int failed = gate_status < 0;
				/* A user event is submitted from its creation on. */
				int ok_status = !failed ? vs == t
						: c == CMD_USER
						    ? vs == gate_status ||
							  (t == CL_SUBMITTED && vs == CL_SUBMITTED)
						    : vs < 0;

				if (nc != 1 && !e2e_same_platform())
					fprintf(stderr,
						"e2e: note: native %s callback %s registered %s: "
						"called %d times\n",
						cmd_name[c], type_name[t], ph_name[ph], nc);
				/* A failed command too, where PoCL calls nothing. */
				ck_assert_msg(vc == 1,
					      "virtual: %s callback %s registered %s: called %d "
					      "times (native %d), want once",
					      cmd_name[c], type_name[t], ph_name[ph], vc, nc);
				ck_assert_msg(!vc || ok_status,
					      "virtual: %s callback %s registered %s: status %d "
					      "(native %d)",
					      cmd_name[c], type_name[t], ph_name[ph], vs,
					      nat->status[c][ph][t]);
			}
	free(nat);
	free(virt);
}

START_TEST(test_callbacks_complete)
{
	commands_check(CL_COMPLETE);
}
END_TEST

#if 1
START_TEST(test_callbacks_failed)
{
	commands_check(-5);
}
END_TEST
#endif

/* A command that runs at once: its callbacks race its completion. */
static struct rec rec_race[TYPES];

static void race_run(struct e2e_plat *p)
{
	cl_program prog = e2e_program_build(p, src, NULL);
	cl_mem a = buffer(p);
	cl_kernel k = e2e_kernel_create(p, prog, "setv");
	cl_uint v = 9;
	size_t n = N;
	cl_event ev;
	double end;

	memset(rec_race, 0, sizeof(rec_race));
	E2E_OK(p, clSetKernelArg(k, 0, sizeof(a), &a));
	E2E_OK(p, clSetKernelArg(k, 1, sizeof(v), &v));
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &n, NULL, 0, NULL, &ev));
	for (int t = TYPES - 1; t >= 0; t--)
		E2E_OK(p, clSetEventCallback(ev, t, cb_rec, &rec_race[t]));
	E2E_OK(p, clFlush(p->queue));
	end = now_s() + SPIN_WAIT_S;
	while (now_s() < end &&
	       (!atomic_load(&rec_race[0].count) || !atomic_load(&rec_race[1].count) ||
		!atomic_load(&rec_race[2].count)))
		pause_briefly();
	e2e_sleep_ms(AFTER_MS);
	for (int t = 0; t < TYPES; t++) {
		ck_assert_msg(atomic_load(&rec_race[t].count) == 1,
			      "%s: kernel callback %s called %d times in %d s, want once", p->role,
			      type_name[t], atomic_load(&rec_race[t].count), SPIN_WAIT_S);
		ck_assert_msg(atomic_load(&rec_race[t].status) == t,
			      "%s: kernel callback %s: status %d", p->role, type_name[t],
			      atomic_load(&rec_race[t].status));
	}
	clReleaseEvent(ev);
	clReleaseKernel(k);
	clReleaseMemObject(a);
	clReleaseProgram(prog);
}

START_TEST(test_callbacks_racing)
{
	race_run(&e2e_native);
	race_run(&e2e_virtual);
}
END_TEST

/* ---- release callbacks, waited for by spinning ---- */

#define DTORS 3

static atomic_int dtor_order[DTORS];
static atomic_int dtor_count;

static void CL_CALLBACK dtor_cb(cl_mem m, void *data)
{
	int i = atomic_fetch_add(&dtor_count, 1);

	(void)m;
	if (i < DTORS)
		atomic_store(&dtor_order[i], (int)(intptr_t)data);
}

/* Spins, calling no OpenCL, until *count reaches want or SPIN_WAIT_S pass;
 * the count reached. */
static int spin_until(atomic_int *count, int want)
{
	double end = now_s() + SPIN_WAIT_S;

	while (atomic_load(count) < want && now_s() < end)
		pause_briefly();
	return atomic_load(count);
}

/* A buffer that was a kernel argument, released after its kernel ran. */
static void destructor_run(struct e2e_plat *p, int release_kernel_first)
{
	cl_program prog = e2e_program_build(p, src, NULL);
	cl_mem a = buffer(p);
	cl_kernel k = e2e_kernel_create(p, prog, "setv");
	cl_uint v = 3;
	size_t n = N;
	int got;

	atomic_store(&dtor_count, 0);
	for (int i = 0; i < DTORS; i++)
		atomic_store(&dtor_order[i], -1);
	E2E_OK(p, clSetKernelArg(k, 0, sizeof(a), &a));
	E2E_OK(p, clSetKernelArg(k, 1, sizeof(v), &v));
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &n, NULL, 0, NULL, NULL));
	E2E_OK(p, clFinish(p->queue));
	for (int i = 0; i < DTORS; i++)
		E2E_OK(p, clSetMemObjectDestructorCallback(a, dtor_cb, (void *)(intptr_t)i));
	if (release_kernel_first)
		E2E_OK(p, clReleaseKernel(k));
	E2E_OK(p, clReleaseMemObject(a));
	got = spin_until(&dtor_count, DTORS);
	ck_assert_msg(got == DTORS,
		      "%s: %d of %d destructor callbacks came within %d s of the buffer's last "
		      "release, the application spinning without OpenCL calls",
		      p->role, got, DTORS, SPIN_WAIT_S);
	for (int i = 0; i < DTORS; i++)
		ck_assert_msg(atomic_load(&dtor_order[i]) == DTORS - 1 - i,
			      "%s: destructor callback %d ran as number %d: want reverse order of "
			      "registration",
			      p->role, atomic_load(&dtor_order[i]), i);
	if (!release_kernel_first)
		clReleaseKernel(k);
	clReleaseProgram(prog);
}

START_TEST(test_destructor_spin)
{
	destructor_run(&e2e_native, 0);
	destructor_run(&e2e_virtual, 0);
	destructor_run(&e2e_native, 1);
	destructor_run(&e2e_virtual, 1);
}
END_TEST

/* An event callback, the application spinning from the enqueue on. */
static struct rec rec_spin;

static void event_spin_run(struct e2e_plat *p)
{
	cl_program prog = e2e_program_build(p, src, NULL);
	cl_mem a = buffer(p);
	cl_kernel k = e2e_kernel_create(p, prog, "setv");
	cl_uint v = 5;
	size_t n = N;
	cl_event ev;

	memset(&rec_spin, 0, sizeof(rec_spin));
	E2E_OK(p, clSetKernelArg(k, 0, sizeof(a), &a));
	E2E_OK(p, clSetKernelArg(k, 1, sizeof(v), &v));
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &n, NULL, 0, NULL, &ev));
	E2E_OK(p, clSetEventCallback(ev, CL_COMPLETE, cb_rec, &rec_spin));
	/* The application lets go of everything, then waits for the callback. */
	E2E_OK(p, clReleaseEvent(ev));
	E2E_OK(p, clReleaseKernel(k));
	E2E_OK(p, clReleaseMemObject(a));
	E2E_OK(p, clFlush(p->queue));
	ck_assert_msg(spin_until(&rec_spin.count, 1) == 1,
		      "%s: the event callback did not come within %d s, the application spinning "
		      "without OpenCL calls",
		      p->role, SPIN_WAIT_S);
	ck_assert_int_eq(atomic_load(&rec_spin.status), CL_COMPLETE);
	clReleaseProgram(prog);
}

START_TEST(test_event_callback_spin)
{
	event_spin_run(&e2e_native);
	event_spin_run(&e2e_virtual);
}
END_TEST

static atomic_int prog_count, ctx_count, ctx_order[DTORS];

static void CL_CALLBACK prog_cb(cl_program prog, void *data)
{
	(void)prog;
	(void)data;
	atomic_fetch_add(&prog_count, 1);
}

static void CL_CALLBACK ctx_cb(cl_context c, void *data)
{
	int i = atomic_fetch_add(&ctx_count, 1);

	(void)c;
	if (i < DTORS)
		atomic_store(&ctx_order[i], (int)(intptr_t)data);
}

/* A context of its own with a program; *prog_err is what
 * clSetProgramReleaseCallback said. */
static void context_spin_run(struct e2e_plat *p, cl_int *prog_err)
{
	cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)p->platform,
					 0};
	struct e2e_plat q = *p;
	cl_program prog;
	cl_int err;

	atomic_store(&prog_count, 0);
	atomic_store(&ctx_count, 0);
	q.context = clCreateContext(props, 1, &p->device, NULL, NULL, &err);
	E2E_OK(p, err);
	prog = e2e_program_build(&q, src, NULL);
	*prog_err = clSetProgramReleaseCallback(prog, prog_cb, NULL);
	for (int i = 0; i < DTORS; i++)
		E2E_OK(p, clSetContextDestructorCallback(q.context, ctx_cb, (void *)(intptr_t)i));
	E2E_OK(p, clReleaseProgram(prog));
	if (*prog_err == CL_SUCCESS)
		ck_assert_msg(spin_until(&prog_count, 1) == 1,
			      "%s: the program release callback did not come within %d s, the "
			      "application spinning without OpenCL calls",
			      p->role, SPIN_WAIT_S);
	E2E_OK(p, clReleaseContext(q.context));
	ck_assert_msg(spin_until(&ctx_count, DTORS) == DTORS,
		      "%s: %d of %d context destructor callbacks came within %d s, the application "
		      "spinning without OpenCL calls",
		      p->role, atomic_load(&ctx_count), DTORS, SPIN_WAIT_S);
	for (int i = 0; i < DTORS; i++)
		ck_assert_msg(atomic_load(&ctx_order[i]) == DTORS - 1 - i,
			      "%s: context destructor callback %d ran as number %d", p->role,
			      atomic_load(&ctx_order[i]), i);
}

START_TEST(test_context_program_spin)
{
	cl_int nat, virt;

	context_spin_run(&e2e_native, &nat);
	context_spin_run(&e2e_virtual, &virt);
	/* Where the device offers program release callbacks, so must clmux. */
	ck_assert_msg(virt == CL_SUCCESS || nat != CL_SUCCESS,
		      "clSetProgramReleaseCallback: native %s, virtual %s", e2e_cl_strerror(nat),
		      e2e_cl_strerror(virt));
}
END_TEST

static Suite *callbacks_suite(void)
{
	Suite *s = suite_create("e2e_callbacks");
	TCase *tc;

	tc = e2e_tcase("event_callbacks");
	tcase_add_test(tc, test_callbacks_complete);
	tcase_add_test(tc, test_callbacks_failed);
	tcase_add_test(tc, test_callbacks_racing);
	suite_add_tcase(s, tc);

	tc = e2e_tcase("spinning");
	tcase_add_test(tc, test_destructor_spin);
	tcase_add_test(tc, test_event_callback_spin);
	tcase_add_test(tc, test_context_program_spin);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return e2e_main(callbacks_suite());
}
