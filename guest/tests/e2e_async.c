// SPDX-License-Identifier: MIT
// The async path: non-blocking calls cost no round trip. 10,000 kernel
// enqueues and one clFinish through clmux must take a handful of round
// trips and few socket writes, counted by the ICD's own session counters
// (the clGetSessionStatsCLMUX extension), with the same results as native.
#include "e2e.h"

#include <string.h>

struct stats_clmux {
	cl_ulong messages, round_trips, writes, bytes, notifications;
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

int main(void)
{
	Suite *s = suite_create("e2e_async");
	TCase *tc = e2e_tcase("async");

	tcase_add_test(tc, ten_thousand_enqueues);
	tcase_add_test(tc, sync_sees_async);
	suite_add_tcase(s, tc);
	return e2e_main(s);
}
