// SPDX-License-Identifier: MIT
// The async path: non-blocking calls cost no round trip. 10,000 kernel
// enqueues and one clFinish through clmux must take a handful of round
// trips and few socket writes, counted by the ICD's own session counters
// (the clGetSessionStatsCLMUX extension), with the same results as native;
// waiting for a command the daemon has said complete in the shared area
// takes none.
#include "e2e.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct stats_clmux {
	cl_ulong messages, round_trips, writes, bytes, notifications, fences;
};
typedef cl_int(CL_API_CALL *stats_fn)(cl_platform_id, struct stats_clmux *);

static const char *src = "__kernel void bump(__global uint *c) { c[get_global_id(0)] += 1; }\n";

static stats_fn stats_function(void)
{
	stats_fn f = (stats_fn)clGetExtensionFunctionAddressForPlatform(e2e_virtual.platform,
									"clGetSessionStatsCLMUX");
	ck_assert_msg(f, "clmux exports clGetSessionStatsCLMUX");
	return f;
}

static void run(struct e2e_plat *p, unsigned n, cl_uint *out)
{
	cl_program prog = e2e_program_build(p, src, NULL);
	cl_kernel k = e2e_kernel_create(p, prog, "bump");
	cl_uint zero[4] = { 0 };
	cl_mem m = e2e_buffer_create(p, CL_MEM_COPY_HOST_PTR, sizeof(zero), zero);
	size_t g = 4;

	E2E_OK(p, clSetKernelArg(k, 0, sizeof(m), &m));
	for (unsigned i = 0; i < n; i++)
		E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &g, NULL, 0, NULL, NULL));
	E2E_OK(p, clFinish(p->queue));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_TRUE, 0, sizeof(zero), out, 0, NULL, NULL));
	clReleaseMemObject(m);
	clReleaseKernel(k);
	clReleaseProgram(prog);
}

START_TEST(ten_thousand_enqueues)
{
	enum { N = 10000 };
	stats_fn stats = stats_function();
	struct stats_clmux before, after;
	cl_uint nat[4], virt[4];
	cl_program prog;

	/* Build once outside the count: the build itself is one round trip. */
	prog = e2e_program_build(&e2e_virtual, src, NULL);
	clReleaseProgram(prog);
	run(&e2e_native, N, nat);
	E2E_OK(&e2e_virtual, stats(e2e_virtual.platform, &before));
	run(&e2e_virtual, N, virt);
	E2E_OK(&e2e_virtual, stats(e2e_virtual.platform, &after));
	e2e_assert_bytes_eq(virt, nat, sizeof(nat), "counters after 10,000 launches");
	ck_assert_uint_eq(virt[0], N);
	/* Round trips: the build, clFinish, the blocking read. */
	ck_assert_msg(after.round_trips - before.round_trips <= 5,
		      "%llu round trips for %d enqueues",
		      (unsigned long long)(after.round_trips - before.round_trips), N);
	/* Every call is a message, but they travel in batches. */
	ck_assert_uint_ge(after.messages - before.messages, N);
	ck_assert_msg(after.writes - before.writes <= N / 100,
		      "%llu socket writes for %d enqueues",
		      (unsigned long long)(after.writes - before.writes), N);
}
END_TEST

/* Blocking calls do wait: a sync query after a burst sees its effects. */
START_TEST(sync_sees_async)
{
	stats_fn stats = stats_function();
	struct stats_clmux before, after;
	cl_uint value = 0;
	cl_uint init = 7;
	cl_mem m;

	E2E_OK(&e2e_virtual, stats(e2e_virtual.platform, &before));
	m = e2e_buffer_create(&e2e_virtual, CL_MEM_COPY_HOST_PTR, sizeof(init), &init);
	E2E_OK(&e2e_virtual, clEnqueueFillBuffer(e2e_virtual.queue, m, &(cl_uint){ 42 }, 4, 0, 4, 0,
						 NULL, NULL));
	E2E_OK(&e2e_virtual, clEnqueueReadBuffer(e2e_virtual.queue, m, CL_TRUE, 0, 4, &value, 0,
						 NULL, NULL));
	E2E_OK(&e2e_virtual, stats(e2e_virtual.platform, &after));
	ck_assert_uint_eq(value, 42);
	ck_assert_uint_eq(after.round_trips - before.round_trips, 1);
	clReleaseMemObject(m);
}
END_TEST

/* Three launches with events, then clFinish: waiting for them, and asking
 * their status, needs no further round trip where the session has a
 * shared area (the daemon stored their fences before clFinish's reply),
 * and gives what native gives. */
static void done_waits(struct e2e_plat *p, cl_uint *out, cl_ulong *trips, cl_ulong *fences)
{
	stats_fn stats = p == &e2e_virtual ? stats_function() : NULL;
	cl_program prog = e2e_program_build(p, src, NULL);
	cl_kernel k = e2e_kernel_create(p, prog, "bump");
	cl_uint zero[4] = { 0 };
	cl_mem m = e2e_buffer_create(p, CL_MEM_COPY_HOST_PTR, sizeof(zero), zero);
	struct stats_clmux before = { 0 }, after = { 0 };
	cl_event ev[3];
	size_t g = 4;

	E2E_OK(p, clSetKernelArg(k, 0, sizeof(m), &m));
	for (int i = 0; i < 3; i++)
		E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &g, NULL, 0, NULL, &ev[i]));
	E2E_OK(p, clFinish(p->queue));
	if (stats)
		E2E_OK(p, stats(p->platform, &before));
	for (int i = 0; i < 3; i++) {
		cl_int st = -1;
		E2E_OK(p, clWaitForEvents(1, &ev[i]));
		E2E_OK(p, clGetEventInfo(ev[i], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st,
					 NULL));
		ck_assert_int_eq(st, CL_COMPLETE);
	}
	E2E_OK(p, clWaitForEvents(3, ev));
	if (stats)
		E2E_OK(p, stats(p->platform, &after));
	*trips = after.round_trips - before.round_trips;
	*fences = after.fences;
	E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_TRUE, 0, sizeof(zero), out, 0, NULL, NULL));
	for (int i = 0; i < 3; i++)
		clReleaseEvent(ev[i]);
	clReleaseMemObject(m);
	clReleaseKernel(k);
	clReleaseProgram(prog);
}

START_TEST(waits_for_done_commands)
{
	cl_uint nat[4], virt[4];
	cl_ulong trips, fences;
	const char *t = getenv("CMX_E2E_TRANSPORT");

	done_waits(&e2e_native, nat, &trips, &fences);
	done_waits(&e2e_virtual, virt, &trips, &fences);
	e2e_assert_bytes_eq(virt, nat, sizeof(nat), "counters after 3 launches");
	ck_assert_uint_eq(virt[0], 3);
	/* A session with a shared area has fences: with the test's own
	 * daemon (CLMUXD), over its Unix socket, shm or ivshmem, unless
	 * CLMUX_AREA_MB=0. */
	if (getenv("CLMUXD") &&
	    (!t || !*t || !strcmp(t, "unix") || !strcmp(t, "shm") || !strcmp(t, "ivshmem")))
		ck_assert_uint_eq(fences, !getenv("CLMUX_AREA_MB") || atoi(getenv("CLMUX_AREA_MB")));
	if (fences)
		ck_assert_msg(trips == 0, "%llu round trips for waits on completed commands",
			      (unsigned long long)trips);
	else
		ck_assert_uint_le(trips, 7);
}
END_TEST

/* A command behind a user event the application has not set is not
 * complete, whatever the daemon answered in between; once set, it is. */
START_TEST(fence_waits_for_the_command)
{
	struct e2e_plat *p = &e2e_virtual;
	cl_program prog = e2e_program_build(p, src, NULL);
	cl_kernel k = e2e_kernel_create(p, prog, "bump");
	cl_uint zero[4] = { 0 }, out[4];
	cl_mem m = e2e_buffer_create(p, CL_MEM_COPY_HOST_PTR, sizeof(zero), zero);
	cl_event gate, ev[2];
	cl_int e, st;
	size_t g = 4;

	gate = clCreateUserEvent(p->context, &e);
	E2E_OK(p, e);
	E2E_OK(p, clSetKernelArg(k, 0, sizeof(m), &m));
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &g, NULL, 1, &gate, &ev[0]));
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &g, NULL, 0, NULL, &ev[1]));
	E2E_OK(p, clFlush(p->queue));
	/* Round trips on the other queue: replies carry whatever fences the
	 * daemon has. */
	for (int i = 0; i < 20; i++) {
		E2E_OK(p, clFinish(p->queue_prof));
		for (int j = 0; j < 2; j++) {
			E2E_OK(p, clGetEventInfo(ev[j], CL_EVENT_COMMAND_EXECUTION_STATUS,
						 sizeof(st), &st, NULL));
			ck_assert_msg(st > CL_COMPLETE, "launch %d behind an unset user event: %d",
				      j, st);
		}
	}
	E2E_OK(p, clSetUserEventStatus(gate, CL_COMPLETE));
	E2E_OK(p, clWaitForEvents(2, ev));
	for (int j = 0; j < 2; j++) {
		E2E_OK(p, clGetEventInfo(ev[j], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st,
					 NULL));
		ck_assert_int_eq(st, CL_COMPLETE);
	}
	E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_TRUE, 0, sizeof(out), out, 0, NULL, NULL));
	ck_assert_uint_eq(out[0], 2);
	ck_assert_uint_eq(out[3], 2);
	clReleaseEvent(ev[0]);
	clReleaseEvent(ev[1]);
	clReleaseEvent(gate);
	clReleaseMemObject(m);
	clReleaseKernel(k);
	clReleaseProgram(prog);
}
END_TEST

/* Run as a fresh process: with no daemon at CLMUX_SERVER the loader lists
 * no clmux platform, at once. Exit 0 when that holds. */
static int probe_no_server(void)
{
	cl_platform_id plats[16];
	cl_uint n = 0;
	char name[256];

	alarm(20); /* a hang fails the probe */
	setenv("CLMUX_SERVER", "unix:/nonexistent/clmuxd.sock", 1);
	if (clGetPlatformIDs(16, plats, &n) != CL_SUCCESS && n != 0)
		return 2;
	for (cl_uint i = 0; i < n && i < 16; i++) {
		clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof(name), name, NULL);
		if (strstr(name, "clmux"))
			return 3;
	}
	return 0;
}

START_TEST(no_server_no_platform)
{
	int err[2], status;
	char buf[4096] = "";
	ssize_t got, len = 0;
	pid_t pid;

	ck_assert_int_eq(pipe(err), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(err[1], 2);
		execl("/proc/self/exe", "e2e_async", "--probe-no-server", (char *)NULL);
		_exit(127);
	}
	close(err[1]);
	while ((got = read(err[0], buf + len, sizeof(buf) - 1 - (size_t)len)) > 0)
		len += got;
	buf[len] = '\0';
	close(err[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "probe status %d: %s", status, buf);
	ck_assert_msg(strstr(buf, "cannot reach clmuxd"), "one clear line on stderr, got: %s", buf);
	ck_assert_msg(!strchr(strchr(buf, '\n') + 1, '\n') || strstr(buf, "e2e"),
		      "more than one line: %s", buf);
}
END_TEST

int main(int argc, char **argv)
{
	Suite *s;
	TCase *tc, *plain;

	if (argc > 1 && !strcmp(argv[1], "--probe-no-server"))
		return probe_no_server();
	s = suite_create("e2e_async");
	tc = e2e_tcase("async");
	tcase_add_test(tc, ten_thousand_enqueues);
	tcase_add_test(tc, sync_sees_async);
	tcase_add_test(tc, waits_for_done_commands);
	tcase_add_test(tc, fence_waits_for_the_command);
	suite_add_tcase(s, tc);
	plain = tcase_create("no_server");
	tcase_add_test(plain, no_server_no_platform);
	tcase_set_timeout(plain, 60);
	suite_add_tcase(s, plain);
	return e2e_main(s);
}
