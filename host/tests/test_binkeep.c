// SPDX-License-Identifier: MIT
// Unit tests of the binaries a restore keeps (host/binkeep.c), on the
// native platform: a kept binary loads and runs in another context; none
// is shared between tenants or builds that differ; a build that fails
// lets those waiting for it compile themselves; one that succeeds gives
// them its binary; clearing keeps a build still running; what is kept is
// charged to its tenant, and a build past the tenant's room is not kept.
#define _GNU_SOURCE
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "binkeep.h"
#include "tenant.h"

#define N 256

static const char src[] = "kernel void triple(global uint *o) { size_t i = get_global_id(0); "
			  "o[i] = (uint)i * 3u; }\n";
static const char opts[] = "-cl-kernel-arg-info";

static cl_device_id dev;

/* The native platform's first device (CMX_E2E_NATIVE, default PoCL). */
static int device_find(void)
{
	const char *want = getenv("CMX_E2E_NATIVE") ? getenv("CMX_E2E_NATIVE") : "Portable";
	cl_platform_id p[16];
	cl_uint n = 0;
	char name[256];

	if (clGetPlatformIDs(16, p, &n))
		return 0;
	for (cl_uint i = 0; i < n && i < 16; i++) {
		clGetPlatformInfo(p[i], CL_PLATFORM_NAME, sizeof(name), name, NULL);
		if (strcasestr(name, want) &&
		    !clGetDeviceIDs(p[i], CL_DEVICE_TYPE_ALL, 1, &dev, NULL))
			return 1;
	}
	return 0;
}

/* Each test's own process finds it (a driver's threads do not survive a
 * fork). */
static void setup(void)
{
	ck_assert(device_find());
}

/* Whether there is a native device, asked in a child of its own. */
static int device_there(void)
{
	pid_t pid = fork();
	int st;

	if (!pid)
		_exit(device_find() ? 0 : 1);
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st);
}

static cl_context context(void)
{
	cl_int e;
	cl_context c = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);

	ck_assert_int_eq(e, CL_SUCCESS);
	return c;
}

/* A program of ctx built from src. */
static cl_program from_source(cl_context ctx)
{
	const char *text = src;
	cl_int e;
	cl_program p = clCreateProgramWithSource(ctx, 1, &text, NULL, &e);

	ck_assert_int_eq(e, CL_SUCCESS);
	ck_assert_int_eq(clBuildProgram(p, 1, &dev, opts, NULL, NULL), CL_SUCCESS);
	return p;
}

/* p's kernel gives what src says. */
static void runs(cl_context ctx, cl_program p)
{
	static cl_uint got[N];
	cl_int e;
	cl_kernel k = clCreateKernel(p, "triple", &e);
	cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &e);
	cl_mem o = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, sizeof(got), NULL, &e);
	size_t g = N;

	ck_assert_ptr_nonnull(k);
	ck_assert_int_eq(clSetKernelArg(k, 0, sizeof(o), &o), CL_SUCCESS);
	ck_assert_int_eq(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL),
			 CL_SUCCESS);
	ck_assert_int_eq(clEnqueueReadBuffer(q, o, CL_TRUE, 0, sizeof(got), got, 0, NULL, NULL),
			 CL_SUCCESS);
	for (cl_uint i = 0; i < N; i++)
		ck_assert_uint_eq(got[i], i * 3);
	clReleaseMemObject(o);
	clReleaseKernel(k);
	clReleaseCommandQueue(q);
}

/* Tenant a's build: the first compiles (mine), the binary it keeps. */
static void kept_for(const char *tenant, cl_context ctx)
{
	int mine = 0;
	cl_program p;

	ck_assert_ptr_null(cmx_binkeep_build(tenant, CMX_UNLIMITED, ctx, dev, opts, src, &mine));
	ck_assert_int_eq(mine, 1);
	p = from_source(ctx);
	cmx_binkeep_put(tenant, CMX_UNLIMITED, dev, opts, src, p);
	clReleaseProgram(p);
}

START_TEST(loaded)
{
	cl_context a = context(), b = context();
	int mine = 1;
	cl_program p;

	kept_for("a", a);
	p = cmx_binkeep_build("a", CMX_UNLIMITED, b, dev, opts, src, &mine);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(mine, 0);
	runs(b, p);
	clReleaseProgram(p);
}
END_TEST

START_TEST(not_shared)
{
	cl_context a = context();
	int mine = 0;

	kept_for("a", a);
	/* Another tenant, other options, another source: compiled. */
	ck_assert_ptr_null(cmx_binkeep_build("b", CMX_UNLIMITED, a, dev, opts, src, &mine));
	ck_assert_int_eq(mine, 1);
	cmx_binkeep_put("b", CMX_UNLIMITED, dev, opts, src, NULL);
	ck_assert_ptr_null(cmx_binkeep_build("a", CMX_UNLIMITED, a, dev, "", src, &mine));
	ck_assert_int_eq(mine, 1);
	cmx_binkeep_put("a", CMX_UNLIMITED, dev, "", src, NULL);
	ck_assert_ptr_null(
	    cmx_binkeep_build("a", CMX_UNLIMITED, a, dev, opts, "kernel void x(void) {}", &mine));
	ck_assert_int_eq(mine, 1);
	cmx_binkeep_put("a", CMX_UNLIMITED, dev, opts, "kernel void x(void) {}", NULL);
}
END_TEST

struct waiter {
	cl_context ctx;
	cl_program got;
	int mine;
};

static void *wait_main(void *arg)
{
	struct waiter *w = arg;

	w->got = cmx_binkeep_build("a", CMX_UNLIMITED, w->ctx, dev, opts, src, &w->mine);
	return NULL;
}

/* A second build while the first runs: it waits, then loads the first's
 * binary, or compiles itself when the first failed. */
static void second_build(int first_fails)
{
	struct waiter w = {.ctx = context()};
	cl_context a = context();
	pthread_t t;
	int mine = 0;

	ck_assert_ptr_null(cmx_binkeep_build("a", CMX_UNLIMITED, a, dev, opts, src, &mine));
	ck_assert_int_eq(mine, 1);
	ck_assert_int_eq(pthread_create(&t, NULL, wait_main, &w), 0);
	if (first_fails) {
		cmx_binkeep_put("a", CMX_UNLIMITED, dev, opts, src, NULL);
	} else {
		cl_program p = from_source(a);
		cmx_binkeep_put("a", CMX_UNLIMITED, dev, opts, src, p);
		clReleaseProgram(p);
	}
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	if (first_fails) {
		ck_assert_ptr_null(w.got);
		ck_assert_int_eq(w.mine, 1);
		cmx_binkeep_put("a", CMX_UNLIMITED, dev, opts, src, NULL);
	} else {
		ck_assert_ptr_nonnull(w.got);
		ck_assert_int_eq(w.mine, 0);
		runs(w.ctx, w.got);
	}
}

START_TEST(first_fails)
{
	second_build(1);
}
END_TEST

START_TEST(first_builds)
{
	second_build(0);
}
END_TEST

START_TEST(cleared)
{
	cl_context a = context();
	int mine = 0;
	cl_program p;

	kept_for("a", a);
	cmx_binkeep_clear();
	/* Gone: the next compiles, and clearing meanwhile keeps its entry. */
	ck_assert_ptr_null(cmx_binkeep_build("a", CMX_UNLIMITED, a, dev, opts, src, &mine));
	ck_assert_int_eq(mine, 1);
	cmx_binkeep_clear();
	p = from_source(a);
	cmx_binkeep_put("a", CMX_UNLIMITED, dev, opts, src, p);
	clReleaseProgram(p);
	p = cmx_binkeep_build("a", CMX_UNLIMITED, a, dev, opts, src, &mine);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(mine, 0);
	clReleaseProgram(p);
}
END_TEST

/* The bytes of src's entry before its binary comes. */
#define SRC_BYTES (sizeof(src) - 1 + sizeof(opts) - 1)

START_TEST(charged)
{
	struct cmx_tenant a = {.name = "a", .bytes = 1000},
			  b = {.name = "b", .bytes = 7, .next = &a};
	struct cmx_tenants ts = {.list = &b};
	cl_context ctx = context();
	uint64_t kept;

	kept_for("a", ctx);
	kept = cmx_binkeep_held("a");
	ck_assert_uint_gt(kept, SRC_BYTES); /* its binary too */
	cmx_binkeep_charge(&ts);
	ck_assert_uint_eq(a.bytes, 1000 + kept);
	ck_assert_uint_eq(a.kept, kept);
	ck_assert_uint_eq(b.bytes, 7);
	/* Charged once. */
	cmx_binkeep_charge(&ts);
	ck_assert_uint_eq(a.bytes, 1000 + kept);
	/* Gone with the restores: back to its base. */
	cmx_binkeep_clear();
	cmx_binkeep_charge(&ts);
	ck_assert_uint_eq(a.bytes, 1000);
	ck_assert_uint_eq(a.kept, 0);
}
END_TEST

/* A tenant whose room has no space for the source: nothing kept, each
 * build compiles itself and none waits for another. */
START_TEST(past_quota_source)
{
	cl_context ctx = context();
	int mine = 1;

	ck_assert_ptr_null(cmx_binkeep_build("a", SRC_BYTES - 1, ctx, dev, opts, src, &mine));
	ck_assert_int_eq(mine, 0);
	ck_assert_uint_eq(cmx_binkeep_held("a"), 0);
	mine = 1;
	ck_assert_ptr_null(cmx_binkeep_build("a", SRC_BYTES - 1, ctx, dev, opts, src, &mine));
	ck_assert_int_eq(mine, 0);
}
END_TEST

/* Room for the source, not the binary: the entry goes when its build
 * ends, and the next build compiles. */
START_TEST(past_quota_binary)
{
	cl_context ctx = context();
	cl_program p;
	int mine = 0;

	ck_assert_ptr_null(cmx_binkeep_build("a", SRC_BYTES, ctx, dev, opts, src, &mine));
	ck_assert_int_eq(mine, 1);
	ck_assert_uint_eq(cmx_binkeep_held("a"), SRC_BYTES);
	p = from_source(ctx);
	cmx_binkeep_put("a", SRC_BYTES, dev, opts, src, p);
	clReleaseProgram(p);
	ck_assert_uint_eq(cmx_binkeep_held("a"), 0);
	ck_assert_ptr_null(cmx_binkeep_build("a", SRC_BYTES, ctx, dev, opts, src, &mine));
	ck_assert_int_eq(mine, 1);
	cmx_binkeep_put("a", SRC_BYTES, dev, opts, src, NULL);
	/* Another tenant's room is its own. */
	kept_for("b", ctx);
	ck_assert_uint_gt(cmx_binkeep_held("b"), SRC_BYTES);
	ck_assert_uint_eq(cmx_binkeep_held("a"), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("binkeep");
	TCase *tc = tcase_create("binkeep");
	SRunner *sr;
	int failed;

	/* The clmux ICD in OCL_ICD_VENDORS stays quiet: no daemon here. */
	setenv("CLMUX_DISABLE", "1", 1);
	if (!device_there())
		return getenv("CMX_E2E_REQUIRE") ? 1 : 77;
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, loaded);
	tcase_add_test(tc, not_shared);
	tcase_add_test(tc, first_fails);
	tcase_add_test(tc, first_builds);
	tcase_add_test(tc, cleared);
	tcase_add_test(tc, charged);
	tcase_add_test(tc, past_quota_source);
	tcase_add_test(tc, past_quota_binary);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
