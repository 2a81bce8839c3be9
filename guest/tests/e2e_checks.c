// SPDX-License-Identifier: MIT
// e2e_checks.c - arguments a driver would trust are refused by the ICD with
// the specification's error, before any message leaves for the daemon
// (counted by clGetSessionStatsCLMUX): __local sizes, image pitches, rect
// and image boxes, by-value sizes. Native PoCL takes several of them (and
// aborts or reads past the caller's memory): it is only asked where that is
// harmless.
#include "e2e.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct stats_clmux {
	cl_ulong messages, round_trips, writes, bytes, notifications, fences;
};
typedef cl_int(CL_API_CALL *stats_fn)(cl_platform_id, struct stats_clmux *);

static const char src[] = "__kernel void k(__global int *o, int i, __local char *a,\n"
			  "                __local char *b) {\n"
			  "  a[get_local_id(0)] = 1; b[get_local_id(0)] = 2;\n"
			  "  barrier(CLK_LOCAL_MEM_FENCE);\n"
			  "  o[get_global_id(0)] = a[0] + b[0] + i;\n"
			  "}\n";

static const cl_image_format rgba8 = {CL_RGBA, CL_UNSIGNED_INT8};

/* Messages the ICD has sent the daemon so far. */
static cl_ulong messages(void)
{
	stats_fn f = (stats_fn)clGetExtensionFunctionAddressForPlatform(e2e_virtual.platform,
									"clGetSessionStatsCLMUX");
	struct stats_clmux st;

	ck_assert_msg(f, "clmux exports clGetSessionStatsCLMUX");
	E2E_OK(&e2e_virtual, f(e2e_virtual.platform, &st));
	return st.messages;
}

/* The virtual call's error, found without a message to the daemon. */
#define LOCAL_ONLY(what, call)                                                                     \
	({                                                                                         \
		cl_ulong m0_ = messages();                                                         \
		cl_int e_ = (call);                                                                \
		ck_assert_msg(messages() == m0_, "%s: the ICD sent %llu messages", what,           \
			      (unsigned long long)(messages() - m0_));                             \
		e_;                                                                                \
	})

static cl_ulong local_mem(struct e2e_plat *p)
{
	cl_ulong v = 0;

	E2E_OK(p, clGetDeviceInfo(p->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof(v), &v, NULL));
	ck_assert_uint_gt(v, 0);
	return v;
}

/* Case 3: a 2^40-byte __local argument aborted PoCL at launch (natively
 * the application; through a daemon, every tenant's). */
START_TEST(test_local_sizes)
{
	struct e2e_plat *v = &e2e_virtual, *n = &e2e_native;
	cl_program pv = e2e_program_build(v, src, NULL), pn = e2e_program_build(n, src, NULL);
	cl_kernel kv = e2e_kernel_create(v, pv, "k"), kn = e2e_kernel_create(n, pn, "k");
	cl_mem out = e2e_buffer_create(v, CL_MEM_READ_WRITE, 64 * sizeof(cl_int), NULL);
	cl_ulong lm = local_mem(v);
	size_t g = 64;
	cl_int i = 0, res[64];

	/* Natively taken (never launched here: PoCL would abort). */
	e2e_check_err("a 2^40-byte __local argument",
		      LOCAL_ONLY("2^40", clSetKernelArg(kv, 2, (size_t)1 << 40, NULL)),
		      clSetKernelArg(kn, 2, (size_t)1 << 40, NULL), CL_INVALID_ARG_SIZE);
	E2E_EXPECT(v, LOCAL_ONLY("one byte over", clSetKernelArg(kv, 2, lm + 1, NULL)),
		   CL_INVALID_ARG_SIZE);
	/* Each fits; together they do not: the launch is refused. */
	E2E_OK(v, clSetKernelArg(kv, 0, sizeof(out), &out));
	E2E_OK(v, clSetKernelArg(kv, 1, sizeof(i), &i));
	E2E_OK(v, clSetKernelArg(kv, 2, lm, NULL));
	E2E_OK(v, clSetKernelArg(kv, 3, lm, NULL));
	E2E_EXPECT(v,
		   LOCAL_ONLY("both",
			      clEnqueueNDRangeKernel(v->queue, kv, 1, NULL, &g, &g, 0, NULL, NULL)),
		   CL_OUT_OF_RESOURCES);
	/* Sizes that fit run. */
	E2E_OK(v, clSetKernelArg(kv, 2, 64, NULL));
	E2E_OK(v, clSetKernelArg(kv, 3, 64, NULL));
	E2E_OK(v, clEnqueueNDRangeKernel(v->queue, kv, 1, NULL, &g, &g, 0, NULL, NULL));
	E2E_OK(v, clEnqueueReadBuffer(v->queue, out, CL_TRUE, 0, sizeof(res), res, 0, NULL, NULL));
	for (int k = 0; k < 64; k++)
		ck_assert_int_eq(res[k], 3);
	clReleaseMemObject(out);
	clReleaseKernel(kv);
	clReleaseKernel(kn);
	clReleaseProgram(pv);
	clReleaseProgram(pn);
}
END_TEST

/* By-value sizes against the argument's type: PoCL checks them too. */
START_TEST(test_value_sizes)
{
	struct e2e_plat *v = &e2e_virtual, *n = &e2e_native;
	cl_program pv = e2e_program_build(v, src, NULL), pn = e2e_program_build(n, src, NULL);
	cl_kernel kv = e2e_kernel_create(v, pv, "k"), kn = e2e_kernel_create(n, pn, "k");
	char wide[64] = {0};

	e2e_check_err("1 byte for an int", LOCAL_ONLY("1 byte", clSetKernelArg(kv, 1, 1, wide)),
		      clSetKernelArg(kn, 1, 1, wide), CL_INVALID_ARG_SIZE);
	e2e_check_err("64 bytes for an int",
		      LOCAL_ONLY("64 bytes", clSetKernelArg(kv, 1, sizeof(wide), wide)),
		      clSetKernelArg(kn, 1, sizeof(wide), wide), CL_INVALID_ARG_SIZE);
	e2e_check_err("a value for __local", LOCAL_ONLY("value", clSetKernelArg(kv, 2, 4, wide)),
		      clSetKernelArg(kn, 2, 4, wide), CL_INVALID_ARG_VALUE);
	clReleaseKernel(kv);
	clReleaseKernel(kn);
	clReleaseProgram(pv);
	clReleaseProgram(pn);
}
END_TEST

static cl_int make_image(struct e2e_plat *p, cl_mem_flags flags, const cl_image_desc *d, void *host)
{
	cl_int e = CL_SUCCESS;
	cl_mem m = clCreateImage(p->context, flags, &rgba8, d, host, &e);

	if (m)
		clReleaseMemObject(m);
	return e;
}

/* Case 7: a 4x2 RGBA8 image with row_pitch 8 was made from 8 bytes past
 * its 16-byte contents (natively, PoCL takes it and reads past them). */
START_TEST(test_image_pitches)
{
	static unsigned char px[256];
	static const struct {
		const char *what;
		cl_image_desc d;
		int host;
	} cases[] = {
	    {"a row pitch shorter than a row", {CL_MEM_OBJECT_IMAGE2D, 4, 2, 0, 0, 8, 0}, 1},
	    {"a row pitch not of whole pixels", {CL_MEM_OBJECT_IMAGE2D, 4, 2, 0, 0, 18, 0}, 1},
	    {"a row pitch without contents", {CL_MEM_OBJECT_IMAGE2D, 4, 2, 0, 0, 64, 0}, 0},
	    {"a slice pitch shorter than a slice", {CL_MEM_OBJECT_IMAGE3D, 4, 2, 2, 0, 16, 16}, 1},
	    {"a 1D array's slice shorter than a row",
	     {CL_MEM_OBJECT_IMAGE1D_ARRAY, 4, 0, 0, 2, 16, 8},
	     1},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		cl_mem_flags f = cases[i].host ? CL_MEM_COPY_HOST_PTR : 0;
		void *h = cases[i].host ? px : NULL;

		e2e_check_err(
		    cases[i].what,
		    LOCAL_ONLY(cases[i].what, make_image(&e2e_virtual, f, &cases[i].d, h)),
		    make_image(&e2e_native, f, &cases[i].d, h), CL_INVALID_IMAGE_DESCRIPTOR);
	}
	/* 64 pixels over a 64-byte buffer: 256 bytes it does not have. */
	{
		cl_mem bv = e2e_buffer_create(&e2e_virtual, CL_MEM_READ_WRITE, 64, NULL);
		cl_mem bn = e2e_buffer_create(&e2e_native, CL_MEM_READ_WRITE, 64, NULL);
		cl_image_desc dv = {
		    .image_type = CL_MEM_OBJECT_IMAGE1D_BUFFER, .image_width = 64, .buffer = bv};
		cl_image_desc dn = dv;

		dn.buffer = bn;
		e2e_check_err("an image larger than its buffer",
			      LOCAL_ONLY("over a buffer", make_image(&e2e_virtual, 0, &dv, NULL)),
			      make_image(&e2e_native, 0, &dn, NULL), CL_INVALID_IMAGE_DESCRIPTOR);
		clReleaseMemObject(bv);
		clReleaseMemObject(bn);
	}
}
END_TEST

/* Transfers: host pitches shorter than the region, boxes outside the
 * object, sizes whose product overflows. */
START_TEST(test_transfer_boxes)
{
	struct e2e_plat *v = &e2e_virtual, *n = &e2e_native;
	cl_image_desc d = {
	    .image_type = CL_MEM_OBJECT_IMAGE2D, .image_width = 4, .image_height = 2};
	cl_int e;
	cl_mem iv = clCreateImage(v->context, 0, &rgba8, &d, NULL, &e);
	cl_mem in_ = clCreateImage(n->context, 0, &rgba8, &d, NULL, &e);
	cl_mem bv = e2e_buffer_create(v, CL_MEM_READ_WRITE, 4096, NULL);
	cl_mem bn = e2e_buffer_create(n, CL_MEM_READ_WRITE, 4096, NULL);
	size_t o[3] = {0, 0, 0}, r[3] = {4, 2, 1}, far[3] = {3, 0, 0};
	size_t huge[3] = {16, (size_t)1 << 60, 16}, rows[3] = {16, 16, 1};
	static unsigned char host[1 << 16];

	ck_assert_ptr_nonnull(iv);
	ck_assert_ptr_nonnull(in_);
	/* PoCL reads with the short pitch natively: into host[], harmless. */
	e2e_check_err("a read's row pitch shorter than a row",
		      LOCAL_ONLY("pitch", clEnqueueReadImage(v->queue, iv, CL_TRUE, o, r, 8, 0,
							     host, 0, NULL, NULL)),
		      clEnqueueReadImage(n->queue, in_, CL_TRUE, o, r, 8, 0, host, 0, NULL, NULL),
		      CL_INVALID_VALUE);
	e2e_check_err("an image box past its end",
		      LOCAL_ONLY("box", clEnqueueReadImage(v->queue, iv, CL_TRUE, far, r, 0, 0,
							   host, 0, NULL, NULL)),
		      clEnqueueReadImage(n->queue, in_, CL_TRUE, far, r, 0, 0, host, 0, NULL, NULL),
		      CL_INVALID_VALUE);
	e2e_check_err("a rect whose size overflows",
		      LOCAL_ONLY("huge", clEnqueueReadBufferRect(v->queue, bv, CL_TRUE, o, o, huge,
								 16, 0, 0, 0, host, 0, NULL, NULL)),
		      clEnqueueReadBufferRect(n->queue, bn, CL_TRUE, o, o, huge, 16, 0, 0, 0, host,
					      0, NULL, NULL),
		      CL_INVALID_VALUE);
	e2e_check_err("a rect row pitch shorter than a row",
		      LOCAL_ONLY("rows", clEnqueueReadBufferRect(v->queue, bv, CL_TRUE, o, o, rows,
								 8, 0, 0, 0, host, 0, NULL, NULL)),
		      clEnqueueReadBufferRect(n->queue, bn, CL_TRUE, o, o, rows, 8, 0, 0, 0, host,
					      0, NULL, NULL),
		      CL_INVALID_VALUE);
	e2e_check_err(
	    "a copy to a buffer past its end",
	    LOCAL_ONLY("image to buffer",
		       clEnqueueCopyImageToBuffer(v->queue, iv, bv, o, r, 4090, 0, NULL, NULL)),
	    clEnqueueCopyImageToBuffer(n->queue, in_, bn, o, r, 4090, 0, NULL, NULL),
	    CL_INVALID_VALUE);
	clReleaseMemObject(iv);
	clReleaseMemObject(in_);
	clReleaseMemObject(bv);
	clReleaseMemObject(bn);
}
END_TEST

/* Fresh memory through the ICD reads as zeros, buffers and images alike
 * (host/tests/test_hostile_args.c has another tenant write it first). */
START_TEST(test_fresh_memory)
{
	struct e2e_plat *v = &e2e_virtual;
	enum { N = 16, SIZE = 16 << 10 };
	static unsigned char got[SIZE];
	cl_image_desc d = {
	    .image_type = CL_MEM_OBJECT_IMAGE2D, .image_width = 64, .image_height = 64};
	size_t o[3] = {0, 0, 0}, r[3] = {64, 64, 1};

	for (int i = 0; i < N; i++) {
		cl_mem b = e2e_buffer_create(v, CL_MEM_READ_WRITE, SIZE, NULL);
		cl_int e;
		cl_mem img = clCreateImage(v->context, 0, &rgba8, &d, NULL, &e);

		E2E_OK(v, e);
		memset(got, 0x5a, sizeof(got));
		E2E_OK(v, clEnqueueReadBuffer(v->queue, b, CL_TRUE, 0, SIZE, got, 0, NULL, NULL));
		for (size_t k = 0; k < SIZE; k++)
			ck_assert_msg(!got[k], "buffer %d byte %zu: %u", i, k, got[k]);
		memset(got, 0x5a, sizeof(got));
		E2E_OK(v,
		       clEnqueueReadImage(v->queue, img, CL_TRUE, o, r, 0, 0, got, 0, NULL, NULL));
		for (size_t k = 0; k < SIZE; k++)
			ck_assert_msg(!got[k], "image %d byte %zu: %u", i, k, got[k]);
		clReleaseMemObject(b);
		clReleaseMemObject(img);
	}
}
END_TEST

/*
 * clmux reports no SVM (CL_DEVICE_SVM_CAPABILITIES 0) and no pipes
 * (CL_DEVICE_PIPE_SUPPORT CL_FALSE): every entry point fails as the OpenCL
 * 3.0 API specification has it for a device without them. Native PoCL has
 * both, so these are held to the specification alone (the sentences
 * quoted), as the CTS's consistency_svm and consistency_pipes hold them.
 */
START_TEST(test_svm_pipes_absent)
{
	struct e2e_plat *v = &e2e_virtual;
	cl_program prog = e2e_program_build(v, src, NULL);
	cl_kernel k = e2e_kernel_create(v, prog, "k");
	cl_mem buf = e2e_buffer_create(v, CL_MEM_READ_WRITE, 64, NULL);
	cl_device_svm_capabilities caps = 1;
	cl_bool pipes = CL_TRUE, uses_svm = CL_TRUE, fine = CL_TRUE;
	void *bogus0 = (void *)(uintptr_t)0xdeadbeef, *bogus1 = (void *)(uintptr_t)0xdeaddead;
	const void *migrate[1] = {bogus1};
	cl_uint pattern = 0xaaaaaaaau, u = 7;
	cl_int err = CL_SUCCESS;
	cl_mem pipe;

	if (e2e_same_platform())
		return; /* the native device has both */
	E2E_OK(v, clGetDeviceInfo(v->device, CL_DEVICE_SVM_CAPABILITIES, sizeof(caps), &caps, NULL));
	ck_assert_msg(caps == 0, "CL_DEVICE_SVM_CAPABILITIES 0x%llx", (unsigned long long)caps);
	E2E_OK(v, clGetDeviceInfo(v->device, CL_DEVICE_PIPE_SUPPORT, sizeof(pipes), &pipes, NULL));
	ck_assert_msg(pipes == CL_FALSE, "CL_DEVICE_PIPE_SUPPORT %u", pipes);
	E2E_OK(v, clGetDeviceInfo(v->device, CL_DEVICE_MAX_PIPE_ARGS, sizeof(u), &u, NULL));
	ck_assert_msg(u == 0, "CL_DEVICE_MAX_PIPE_ARGS %u", u);
	/* "CL_MEM_USES_SVM_POINTER ... CL_TRUE if memobj is a buffer object
	 * that was created with CL_MEM_USE_HOST_PTR or is a sub-buffer ... and
	 * the host_ptr ... is a pointer returned by clSVMAlloc" */
	E2E_OK(v, clGetMemObjectInfo(buf, CL_MEM_USES_SVM_POINTER, sizeof(uses_svm), &uses_svm,
				     NULL));
	ck_assert_msg(uses_svm == CL_FALSE, "CL_MEM_USES_SVM_POINTER %u", uses_svm);

	/* clSVMAlloc: "Returns NULL if ... there are no devices in context
	 * that support Shared Virtual Memory." */
	ck_assert_msg(clSVMAlloc(v->context, CL_MEM_READ_WRITE, 64, 0) == NULL, "clSVMAlloc");
	/* clSVMFree takes what clSVMAlloc gave; NULL is a no-op. */
	clSVMFree(v->context, NULL);
	/* clEnqueueSVMFree, clEnqueueSVMMemcpy, clEnqueueSVMMemFill,
	 * clEnqueueSVMMap, clEnqueueSVMUnmap, clEnqueueSVMMigrateMem:
	 * "CL_INVALID_OPERATION if the device associated with command_queue
	 * does not support Shared Virtual Memory." */
	E2E_EXPECT(v, clEnqueueSVMMemFill(v->queue, bogus0, &pattern, sizeof(pattern), 64, 0, NULL,
					  NULL),
		   CL_INVALID_OPERATION);
	E2E_EXPECT(v, clEnqueueSVMMemcpy(v->queue, CL_TRUE, bogus1, bogus0, 64, 0, NULL, NULL),
		   CL_INVALID_OPERATION);
	E2E_EXPECT(v, clEnqueueSVMMap(v->queue, CL_TRUE, CL_MAP_READ, bogus1, 64, 0, NULL, NULL),
		   CL_INVALID_OPERATION);
	E2E_EXPECT(v, clEnqueueSVMUnmap(v->queue, bogus1, 0, NULL, NULL), CL_INVALID_OPERATION);
	E2E_EXPECT(v, clEnqueueSVMMigrateMem(v->queue, 1, migrate, NULL, 0, 0, NULL, NULL),
		   CL_INVALID_OPERATION);
	E2E_EXPECT(v, clEnqueueSVMFree(v->queue, 1, &bogus0, NULL, NULL, 0, NULL, NULL),
		   CL_INVALID_OPERATION);
	/* An invalid queue is still CL_INVALID_COMMAND_QUEUE. */
	E2E_EXPECT(v, clEnqueueSVMUnmap(NULL, bogus1, 0, NULL, NULL), CL_INVALID_COMMAND_QUEUE);
	/* clSetKernelArgSVMPointer and clSetKernelExecInfo:
	 * "CL_INVALID_OPERATION if no devices in the context associated with
	 * kernel support Shared Virtual Memory." (the CTS passes 0, NULL) */
	E2E_EXPECT(v, clSetKernelArgSVMPointer(k, 0, NULL), CL_INVALID_OPERATION);
	E2E_EXPECT(v, clSetKernelExecInfo(k, CL_KERNEL_EXEC_INFO_SVM_PTRS, 0, NULL),
		   CL_INVALID_OPERATION);
	E2E_EXPECT(v, clSetKernelExecInfo(k, CL_KERNEL_EXEC_INFO_SVM_PTRS, sizeof(bogus0),
					  &bogus0),
		   CL_INVALID_OPERATION);
	E2E_EXPECT(v, clSetKernelExecInfo(k, CL_KERNEL_EXEC_INFO_SVM_FINE_GRAIN_SYSTEM, sizeof(fine),
					  &fine),
		   CL_INVALID_OPERATION);
	E2E_EXPECT(v, clSetKernelExecInfo(NULL, CL_KERNEL_EXEC_INFO_SVM_PTRS, 0, NULL),
		   CL_INVALID_KERNEL);

	/* clCreatePipe: "CL_INVALID_OPERATION if no devices in context
	 * support Pipes." */
	pipe = clCreatePipe(v->context, CL_MEM_HOST_NO_ACCESS, 4, 4, NULL, &err);
	ck_assert_msg(pipe == NULL && err == CL_INVALID_OPERATION, "clCreatePipe: %p, %d",
		      (void *)pipe, err);
	/* clGetPipeInfo: "CL_INVALID_MEM_OBJECT if pipe is a not a valid pipe
	 * object" -- no pipe can be made, so a buffer is not one. */
	E2E_EXPECT(v, clGetPipeInfo(buf, CL_PIPE_PACKET_SIZE, sizeof(u), &u, NULL),
		   CL_INVALID_MEM_OBJECT);
	E2E_EXPECT(v, clGetPipeInfo(NULL, CL_PIPE_PACKET_SIZE, sizeof(u), &u, NULL),
		   CL_INVALID_MEM_OBJECT);

	clReleaseMemObject(buf);
	clReleaseKernel(k);
	clReleaseProgram(prog);
}
END_TEST

static Suite *checks_suite(void)
{
	Suite *s = suite_create("e2e_checks");
	TCase *tc = e2e_tcase("arguments");

	tcase_add_test(tc, test_local_sizes);
	tcase_add_test(tc, test_value_sizes);
	suite_add_tcase(s, tc);
	tc = e2e_tcase("memory");
	tcase_add_test(tc, test_image_pitches);
	tcase_add_test(tc, test_transfer_boxes);
	tcase_add_test(tc, test_fresh_memory);
	suite_add_tcase(s, tc);
	tc = e2e_tcase("absent");
	tcase_add_test(tc, test_svm_pipes_absent);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return e2e_main(checks_suite());
}
