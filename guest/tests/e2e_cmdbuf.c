// SPDX-License-Identifier: MIT
// e2e_cmdbuf.c - cl_khr_command_buffer through clmux gives the native results and errors.
#include "e2e.h"

#include <CL/cl_ext.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* x[i] = x[i] * 3 + c[i] + add: a replay applied twice differs from one. */
static const char cb_src[] = "__kernel void step3(__global uint *x, __global const uint *c, uint add)\n"
			     "{\n"
			     "	size_t i = get_global_id(0);\n"
			     "	x[i] = x[i] * 3u + c[i] + add + (uint)i;\n"
			     "}\n";

#define CB_N 4096u
#define CB_BYTES (CB_N * sizeof(cl_uint))
#define CB_REPLAYS 4

struct cbfn {
	clCreateCommandBufferKHR_fn create;
	clRetainCommandBufferKHR_fn retain;
	clReleaseCommandBufferKHR_fn release;
	clFinalizeCommandBufferKHR_fn finalize;
	clEnqueueCommandBufferKHR_fn enqueue;
	clGetCommandBufferInfoKHR_fn info;
	clCommandBarrierWithWaitListKHR_fn barrier;
	clCommandCopyBufferKHR_fn copy;
	clCommandCopyBufferRectKHR_fn copy_rect;
	clCommandFillBufferKHR_fn fill;
	clCommandNDRangeKernelKHR_fn kernel;
};

static int has_cmdbuf(struct e2e_plat *p)
{
	char ext[8192] = "";

	clGetDeviceInfo(p->device, CL_DEVICE_EXTENSIONS, sizeof(ext) - 1, ext, NULL);
	return strstr(ext, "cl_khr_command_buffer") != NULL;
}

static void cbfn_load(struct e2e_plat *p, struct cbfn *f)
{
#define LOOK(field, name)                                                                          \
	do {                                                                                       \
		f->field = (name##_fn)clGetExtensionFunctionAddressForPlatform(p->platform, #name); \
		ck_assert_msg(f->field != NULL, "%s: no %s", p->role, #name);                      \
	} while (0)
	LOOK(create, clCreateCommandBufferKHR);
	LOOK(retain, clRetainCommandBufferKHR);
	LOOK(release, clReleaseCommandBufferKHR);
	LOOK(finalize, clFinalizeCommandBufferKHR);
	LOOK(enqueue, clEnqueueCommandBufferKHR);
	LOOK(info, clGetCommandBufferInfoKHR);
	LOOK(barrier, clCommandBarrierWithWaitListKHR);
	LOOK(copy, clCommandCopyBufferKHR);
	LOOK(copy_rect, clCommandCopyBufferRectKHR);
	LOOK(fill, clCommandFillBufferKHR);
	LOOK(kernel, clCommandNDRangeKernelKHR);
#undef LOOK
}

/* The extension's version the device reports, 0 for none. */
static cl_version cmdbuf_version(struct e2e_plat *p)
{
	cl_name_version v[64];
	size_t n = 0;

	if (clGetDeviceInfo(p->device, CL_DEVICE_EXTENSIONS_WITH_VERSION, sizeof(v), v, &n))
		return 0;
	for (size_t i = 0; i < n / sizeof(v[0]); i++)
		if (!strcmp(v[i].name, "cl_khr_command_buffer"))
			return v[i].version;
	return 0;
}

/*
 * Both platforms offer it, or the test is moot: the native device has
 * none, or has a revision whose entry points differ from those clmux is
 * built with (0.9.0 to 0.9.4), which clmux must then leave out.
 */
static int both_have(void)
{
	cl_version v = cmdbuf_version(&e2e_native);

	if (!has_cmdbuf(&e2e_native)) {
		fprintf(stderr, "native device offers no cl_khr_command_buffer: nothing to compare\n");
		return 0;
	}
	if (v < CL_MAKE_VERSION_KHR(0, 9, 0) || v > CL_MAKE_VERSION_KHR(0, 9, 4)) {
		fprintf(stderr, "native cl_khr_command_buffer %u.%u.%u: not forwarded\n",
			CL_VERSION_MAJOR_KHR(v), CL_VERSION_MINOR_KHR(v), CL_VERSION_PATCH_KHR(v));
		ck_assert_msg(!has_cmdbuf(&e2e_virtual), "clmux offers a revision it cannot call");
		return 0;
	}
	ck_assert_msg(has_cmdbuf(&e2e_virtual), "clmux does not offer cl_khr_command_buffer");
	return 1;
}

START_TEST(test_cmdbuf_device_info)
{
	cl_device_command_buffer_capabilities_khr vc = 0, nc = 0;
	cl_command_queue_properties vr = 1, nr = 1;
	cl_name_version vv[64], nv[64];
	size_t vn = 0, nn = 0;
	cl_version vver = 0, nver = 0;
	struct cbfn f;

	if (!both_have())
		return;
	cbfn_load(&e2e_virtual, &f);
	E2E_OK(&e2e_virtual, clGetDeviceInfo(e2e_virtual.device, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR,
					     sizeof(vc), &vc, NULL));
	E2E_OK(&e2e_native, clGetDeviceInfo(e2e_native.device, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR,
					    sizeof(nc), &nc, NULL));
	/* Less only what clmux says it does not forward: printing kernels in a
	 * record, device-side enqueue. */
	ck_assert_msg(vc == (nc & ~(cl_device_command_buffer_capabilities_khr)(
					    CL_COMMAND_BUFFER_CAPABILITY_KERNEL_PRINTF_KHR |
					    CL_COMMAND_BUFFER_CAPABILITY_DEVICE_SIDE_ENQUEUE_KHR)),
		      "capabilities: virtual %#llx, native %#llx", (unsigned long long)vc,
		      (unsigned long long)nc);
	E2E_OK(&e2e_virtual,
	       clGetDeviceInfo(e2e_virtual.device, CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR,
			       sizeof(vr), &vr, NULL));
	E2E_OK(&e2e_native,
	       clGetDeviceInfo(e2e_native.device, CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR,
			       sizeof(nr), &nr, NULL));
	ck_assert_uint_eq(vr, nr);
	/* The version the device reports passes unchanged. */
	E2E_OK(&e2e_virtual, clGetDeviceInfo(e2e_virtual.device, CL_DEVICE_EXTENSIONS_WITH_VERSION,
					     sizeof(vv), vv, &vn));
	E2E_OK(&e2e_native, clGetDeviceInfo(e2e_native.device, CL_DEVICE_EXTENSIONS_WITH_VERSION,
					    sizeof(nv), nv, &nn));
	for (size_t i = 0; i < vn / sizeof(vv[0]); i++)
		if (!strcmp(vv[i].name, "cl_khr_command_buffer"))
			vver = vv[i].version;
	for (size_t i = 0; i < nn / sizeof(nv[0]); i++)
		if (!strcmp(nv[i].name, "cl_khr_command_buffer"))
			nver = nv[i].version;
	ck_assert_msg(vver && vver == nver, "cl_khr_command_buffer version: virtual %#x, native %#x",
		      vver, nver);
	fprintf(stderr, "cl_khr_command_buffer %u.%u.%u\n", CL_VERSION_MAJOR_KHR(nver),
		CL_VERSION_MINOR_KHR(nver), CL_VERSION_PATCH_KHR(nver));
}
END_TEST

/* What the record does, on the CPU: the expected a and b after one replay
 * with c as written before it. */
static void replay_cpu(cl_uint *a, cl_uint *b, const cl_uint *c)
{
	for (cl_uint i = 0; i < CB_N; i++)
		a[i] = 0x01020304u;
	for (cl_uint i = 0; i < CB_N; i++)
		a[i] = a[i] * 3u + c[i] + 5u + i;
	memcpy(b, a, CB_BYTES);
	for (cl_uint i = 0; i < 256; i++)
		b[i] = 7u;
	for (cl_uint i = 0; i < CB_N; i++)
		b[i] = b[i] * 3u + c[i] + 9u + i;
}

/*
 * A record of fills, a copy, a barrier and two launches, finalized and
 * replayed CB_REPLAYS times, each after a write the replay reads. a, b:
 * CB_REPLAYS results each.
 */
static void replay_run(struct e2e_plat *p, cl_uint *a_out, cl_uint *b_out)
{
	cl_program prog = e2e_program_build(p, cb_src, NULL);
	cl_kernel k1 = e2e_kernel_create(p, prog, "step3");
	cl_kernel k2 = e2e_kernel_create(p, prog, "step3");
	cl_mem a = e2e_buffer_create(p, CL_MEM_READ_WRITE, CB_BYTES, NULL);
	cl_mem b = e2e_buffer_create(p, CL_MEM_READ_WRITE, CB_BYTES, NULL);
	cl_mem c = e2e_buffer_create(p, CL_MEM_READ_ONLY, CB_BYTES, NULL);
	cl_uint pat = 0x01020304u, seven = 7, add1 = 5, add2 = 9;
	cl_uint *cdata = e2e_xmalloc(CB_BYTES);
	cl_sync_point_khr sp[6] = {0};
	cl_command_buffer_state_khr st = 99;
	cl_command_buffer_khr cb;
	size_t gws = CB_N;
	cl_uint refs = 0;
	cl_event ev = NULL;
	cl_command_type type = 0;
	struct cbfn f;
	cl_int e;

	cbfn_load(p, &f);
	E2E_OK(p, clSetKernelArg(k1, 0, sizeof(a), &a));
	E2E_OK(p, clSetKernelArg(k1, 1, sizeof(c), &c));
	E2E_OK(p, clSetKernelArg(k1, 2, sizeof(add1), &add1));
	E2E_OK(p, clSetKernelArg(k2, 0, sizeof(b), &b));
	E2E_OK(p, clSetKernelArg(k2, 1, sizeof(c), &c));
	E2E_OK(p, clSetKernelArg(k2, 2, sizeof(add2), &add2));
	cb = f.create(1, &p->queue, NULL, &e);
	E2E_OK(p, e);
	E2E_OK(p, f.fill(cb, NULL, a, &pat, sizeof(pat), 0, CB_BYTES, 0, NULL, &sp[0], NULL));
	E2E_OK(p, f.kernel(cb, NULL, NULL, k1, 1, NULL, &gws, NULL, 1, &sp[0], &sp[1], NULL));
	E2E_OK(p, f.copy(cb, NULL, a, b, 0, 0, CB_BYTES, 1, &sp[1], &sp[2], NULL));
	E2E_OK(p, f.fill(cb, NULL, b, &seven, sizeof(seven), 0, 256 * sizeof(cl_uint), 1, &sp[2],
			 &sp[3], NULL));
	E2E_OK(p, f.barrier(cb, NULL, 1, &sp[3], &sp[4], NULL));
	E2E_OK(p, f.kernel(cb, NULL, NULL, k2, 1, NULL, &gws, NULL, 1, &sp[4], &sp[5], NULL));
	for (int i = 1; i < 6; i++)
		ck_assert_msg(sp[i] != sp[i - 1], "%s: sync points repeat", p->role);
	E2E_OK(p, f.info(cb, CL_COMMAND_BUFFER_STATE_KHR, sizeof(st), &st, NULL));
	ck_assert_uint_eq(st, CL_COMMAND_BUFFER_STATE_RECORDING_KHR);
	E2E_OK(p, f.finalize(cb));
	E2E_OK(p, f.info(cb, CL_COMMAND_BUFFER_STATE_KHR, sizeof(st), &st, NULL));
	ck_assert_uint_eq(st, CL_COMMAND_BUFFER_STATE_EXECUTABLE_KHR);
	E2E_OK(p, f.retain(cb));
	E2E_OK(p, f.info(cb, CL_COMMAND_BUFFER_REFERENCE_COUNT_KHR, sizeof(refs), &refs, NULL));
	ck_assert_uint_eq(refs, 2);
	E2E_OK(p, f.release(cb));
	for (int r = 0; r < CB_REPLAYS; r++) {
		e2e_rand_u32(cdata, CB_N, 100 + (uint64_t)r, 0);
		E2E_OK(p, clEnqueueWriteBuffer(p->queue, c, CL_FALSE, 0, CB_BYTES, cdata, 0, NULL,
					       NULL));
		E2E_OK(p, f.enqueue(0, NULL, cb, 0, NULL, r == 0 ? &ev : NULL));
		E2E_OK(p, clEnqueueReadBuffer(p->queue, a, CL_FALSE, 0, CB_BYTES,
					      a_out + (size_t)r * CB_N, 0, NULL, NULL));
		E2E_OK(p, clEnqueueReadBuffer(p->queue, b, CL_TRUE, 0, CB_BYTES,
					      b_out + (size_t)r * CB_N, 0, NULL, NULL));
	}
	E2E_OK(p, clWaitForEvents(1, &ev));
	E2E_OK(p, clGetEventInfo(ev, CL_EVENT_COMMAND_TYPE, sizeof(type), &type, NULL));
	ck_assert_uint_eq(type, CL_COMMAND_COMMAND_BUFFER_KHR);
	clReleaseEvent(ev);
	E2E_OK(p, clFinish(p->queue));
	E2E_OK(p, f.release(cb));
	free(cdata);
	clReleaseMemObject(c);
	clReleaseMemObject(b);
	clReleaseMemObject(a);
	clReleaseKernel(k2);
	clReleaseKernel(k1);
	clReleaseProgram(prog);
}

START_TEST(test_cmdbuf_replay)
{
	size_t n = (size_t)CB_REPLAYS * CB_N;
	cl_uint *na = e2e_xcalloc(n * 4), *nb = e2e_xcalloc(n * 4);
	cl_uint *va = e2e_xcalloc(n * 4), *vb = e2e_xcalloc(n * 4);
	cl_uint *wa = e2e_xmalloc(CB_BYTES), *wb = e2e_xmalloc(CB_BYTES);
	cl_uint *c = e2e_xmalloc(CB_BYTES);
	uint64_t nsum = 0, vsum = 0;

	if (!both_have())
		return;
	replay_run(&e2e_native, na, nb);
	replay_run(&e2e_virtual, va, vb);
	for (int r = 0; r < CB_REPLAYS; r++) {
		e2e_rand_u32(c, CB_N, 100 + (uint64_t)r, 0);
		replay_cpu(wa, wb, c);
		e2e_assert_bytes_eq(na + (size_t)r * CB_N, wa, CB_BYTES, "native a vs CPU");
		e2e_assert_bytes_eq(nb + (size_t)r * CB_N, wb, CB_BYTES, "native b vs CPU");
	}
	for (size_t i = 0; i < n; i++) {
		nsum = nsum * 31 + na[i] + nb[i];
		vsum = vsum * 31 + va[i] + vb[i];
	}
	ck_assert_msg(nsum == vsum, "checksums: native %#llx, virtual %#llx",
		      (unsigned long long)nsum, (unsigned long long)vsum);
	e2e_assert_bytes_eq(va, na, n * 4, "virtual a vs native");
	e2e_assert_bytes_eq(vb, nb, n * 4, "virtual b vs native");
	free(c);
	free(wb);
	free(wa);
	free(vb);
	free(va);
	free(nb);
	free(na);
}
END_TEST

/*
 * The arguments of a launch are taken when it is recorded: a later
 * clSetKernelArg changes later launches only. The virtual platform is held
 * to that where the native one is not (PoCL 3.1 reads them at each replay).
 */
static void capture_run(struct e2e_plat *p, cl_uint *out)
{
	cl_program prog = e2e_program_build(p, cb_src, NULL);
	cl_kernel k = e2e_kernel_create(p, prog, "step3");
	cl_mem a = e2e_buffer_create(p, CL_MEM_READ_WRITE, CB_BYTES, NULL);
	cl_mem c = e2e_buffer_create(p, CL_MEM_READ_WRITE, CB_BYTES, NULL);
	cl_uint zero = 0, add = 5;
	cl_command_buffer_khr cb;
	size_t gws = CB_N;
	struct cbfn f;
	cl_int e;

	cbfn_load(p, &f);
	E2E_OK(p, clEnqueueFillBuffer(p->queue, a, &zero, sizeof(zero), 0, CB_BYTES, 0, NULL, NULL));
	E2E_OK(p, clEnqueueFillBuffer(p->queue, c, &zero, sizeof(zero), 0, CB_BYTES, 0, NULL, NULL));
	E2E_OK(p, clSetKernelArg(k, 0, sizeof(a), &a));
	E2E_OK(p, clSetKernelArg(k, 1, sizeof(c), &c));
	E2E_OK(p, clSetKernelArg(k, 2, sizeof(add), &add));
	cb = f.create(1, &p->queue, NULL, &e);
	E2E_OK(p, e);
	E2E_OK(p, f.kernel(cb, NULL, NULL, k, 1, NULL, &gws, NULL, 0, NULL, NULL, NULL));
	E2E_OK(p, f.finalize(cb));
	add = 1000;
	E2E_OK(p, clSetKernelArg(k, 2, sizeof(add), &add));
	E2E_OK(p, clSetKernelArg(k, 0, sizeof(c), &c));
	E2E_OK(p, f.enqueue(0, NULL, cb, 0, NULL, NULL));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, a, CL_TRUE, 0, CB_BYTES, out, 0, NULL, NULL));
	E2E_OK(p, f.release(cb));
	clReleaseMemObject(c);
	clReleaseMemObject(a);
	clReleaseKernel(k);
	clReleaseProgram(prog);
}

START_TEST(test_cmdbuf_args_captured)
{
	cl_uint *nat = e2e_xcalloc(CB_BYTES), *virt = e2e_xcalloc(CB_BYTES);
	cl_uint *want = e2e_xmalloc(CB_BYTES);

	if (!both_have())
		return;
	for (cl_uint i = 0; i < CB_N; i++)
		want[i] = 5u + i;
	capture_run(&e2e_native, nat);
	capture_run(&e2e_virtual, virt);
	if (memcmp(nat, want, CB_BYTES))
		fprintf(stderr, "e2e: note: native replay did not use the arguments recorded "
				"(a[1] %u, want %u)\n",
			nat[1], want[1]);
	e2e_assert_bytes_eq(virt, want, CB_BYTES, "virtual replay vs arguments at record");
	free(want);
	free(virt);
	free(nat);
}
END_TEST

/* Many commands, each waiting for the one before: the daemon's table of
 * sync points grows while it records. */
#define CB_MANY 300
static void many_run(struct e2e_plat *p, cl_uint *out)
{
	cl_mem m = e2e_buffer_create(p, CL_MEM_READ_WRITE, CB_MANY * sizeof(cl_uint), NULL);
	cl_sync_point_khr prev = 0, sp = 0;
	cl_command_buffer_khr cb;
	struct cbfn f;
	cl_int e;

	cbfn_load(p, &f);
	cb = f.create(1, &p->queue, NULL, &e);
	E2E_OK(p, e);
	for (cl_uint i = 0; i < CB_MANY; i++) {
		cl_uint v = i * 7u + 1u;
		E2E_OK(p, f.fill(cb, NULL, m, &v, sizeof(v), i * sizeof(cl_uint), sizeof(cl_uint),
				 i ? 1 : 0, i ? &prev : NULL, &sp, NULL));
		prev = sp;
	}
	E2E_OK(p, f.finalize(cb));
	E2E_OK(p, f.enqueue(0, NULL, cb, 0, NULL, NULL));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_TRUE, 0, CB_MANY * sizeof(cl_uint), out, 0,
				      NULL, NULL));
	E2E_OK(p, f.release(cb));
	clReleaseMemObject(m);
}

START_TEST(test_cmdbuf_many)
{
	cl_uint nat[CB_MANY], virt[CB_MANY], want[CB_MANY];

	if (!both_have())
		return;
	for (cl_uint i = 0; i < CB_MANY; i++)
		want[i] = i * 7u + 1u;
	many_run(&e2e_native, nat);
	many_run(&e2e_virtual, virt);
	e2e_assert_bytes_eq(nat, want, sizeof(want), "native");
	e2e_assert_bytes_eq(virt, nat, sizeof(want), "virtual vs native");
}
END_TEST

/* A rectangle copied by a replay: 48 bytes of 8 rows from a 256-byte
 * pitch at (16, 2) to a 64-byte pitch; *bad: the code of one that reaches
 * past its buffer. */
#define RECT_BYTES 4096
static void rect_run(struct e2e_plat *p, unsigned char *out, cl_int *bad)
{
	unsigned char *src = e2e_xmalloc(RECT_BYTES);
	cl_mem s = e2e_buffer_create(p, CL_MEM_READ_WRITE, RECT_BYTES, NULL);
	cl_mem d = e2e_buffer_create(p, CL_MEM_READ_WRITE, RECT_BYTES, NULL);
	size_t so[3] = {16, 2, 0}, dor[3] = {0, 0, 0}, region[3] = {48, 8, 1};
	size_t far[3] = {16, 15, 0};
	cl_uint zero = 0;
	cl_command_buffer_khr cb;
	cl_sync_point_khr sp = 0;
	struct cbfn f;
	cl_int e;

	cbfn_load(p, &f);
	e2e_rand_bytes(src, RECT_BYTES, 7);
	E2E_OK(p, clEnqueueWriteBuffer(p->queue, s, CL_TRUE, 0, RECT_BYTES, src, 0, NULL, NULL));
	cb = f.create(1, &p->queue, NULL, &e);
	E2E_OK(p, e);
	E2E_OK(p, f.fill(cb, NULL, d, &zero, sizeof(zero), 0, RECT_BYTES, 0, NULL, &sp, NULL));
	E2E_OK(p, f.copy_rect(cb, NULL, s, d, so, dor, region, 256, 0, 64, 0, 1, &sp, NULL, NULL));
	/* Rows 15..22 of a 256-byte pitch: past 4096 bytes. */
	*bad = f.copy_rect(cb, NULL, s, d, far, dor, region, 256, 0, 64, 0, 0, NULL, NULL, NULL);
	E2E_OK(p, f.finalize(cb));
	E2E_OK(p, f.enqueue(0, NULL, cb, 0, NULL, NULL));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, d, CL_TRUE, 0, RECT_BYTES, out, 0, NULL, NULL));
	E2E_OK(p, f.release(cb));
	clReleaseMemObject(d);
	clReleaseMemObject(s);
	free(src);
}

START_TEST(test_cmdbuf_rect)
{
	unsigned char *nat = e2e_xcalloc(RECT_BYTES), *virt = e2e_xcalloc(RECT_BYTES);
	unsigned char *src = e2e_xmalloc(RECT_BYTES), *want = e2e_xcalloc(RECT_BYTES);
	cl_int nbad, vbad;

	if (!both_have())
		return;
	e2e_rand_bytes(src, RECT_BYTES, 7);
	for (int y = 0; y < 8; y++)
		memcpy(want + y * 64, src + (2 + y) * 256 + 16, 48);
	rect_run(&e2e_native, nat, &nbad);
	rect_run(&e2e_virtual, virt, &vbad);
	e2e_assert_bytes_eq(nat, want, RECT_BYTES, "native rect vs CPU");
	e2e_assert_bytes_eq(virt, nat, RECT_BYTES, "virtual rect vs native");
	e2e_check_err("rect past the end", vbad, nbad, CL_INVALID_VALUE);
	free(want);
	free(src);
	free(virt);
	free(nat);
}
END_TEST

#define IMG 16 /* the images' side, in pixels of 4 bytes */

/* Image commands recorded and replayed twice: A (random) copied into B's
 * box, a box of B filled, B read into buffer X, X's first row written
 * into A. The bytes of A, B and X after the replays in out (3 x IMG x IMG
 * x 4); bad[2]: the codes of a copy whose box reaches past A and of a fill
 * of a buffer given as an image. The images' functions looked up by name:
 * a driver's record of them is optional to clmux's build. */
static void images_run(struct e2e_plat *p, unsigned char *out, cl_int bad[2])
{
	const size_t bytes = IMG * IMG * 4;
	cl_image_format fmt = {CL_RGBA, CL_UNSIGNED_INT8};
	cl_image_desc desc = {.image_type = CL_MEM_OBJECT_IMAGE2D, .image_width = IMG,
			      .image_height = IMG};
	unsigned char *src = e2e_xmalloc(bytes);
	size_t zero[3] = {0, 0, 0}, so[3] = {2, 3, 0}, dor[3] = {5, 1, 0}, region[3] = {8, 9, 1};
	size_t fo[3] = {1, 10, 0}, fr[3] = {6, 4, 1}, row[3] = {IMG, 1, 1}, all[3] = {IMG, IMG, 1};
	size_t far[3] = {12, 12, 0};
	cl_uint color[4] = {11, 22, 33, 44};
	cl_command_buffer_khr cb;
	cl_sync_point_khr sp[4];
	struct cbfn f;
	cl_int e;
	clCommandCopyImageKHR_fn copy_image = (clCommandCopyImageKHR_fn)
	    clGetExtensionFunctionAddressForPlatform(p->platform, "clCommandCopyImageKHR");
	clCommandFillImageKHR_fn fill_image = (clCommandFillImageKHR_fn)
	    clGetExtensionFunctionAddressForPlatform(p->platform, "clCommandFillImageKHR");
	clCommandCopyImageToBufferKHR_fn to_buffer = (clCommandCopyImageToBufferKHR_fn)
	    clGetExtensionFunctionAddressForPlatform(p->platform, "clCommandCopyImageToBufferKHR");
	clCommandCopyBufferToImageKHR_fn to_image = (clCommandCopyBufferToImageKHR_fn)
	    clGetExtensionFunctionAddressForPlatform(p->platform, "clCommandCopyBufferToImageKHR");

	ck_assert_msg(copy_image && fill_image && to_buffer && to_image,
		      "%s: the image recording functions are missing", p->role);
	cbfn_load(p, &f);
	e2e_rand_bytes(src, bytes, 11);
	cl_mem a = clCreateImage(p->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, &fmt, &desc,
				 src, &e);
	E2E_OK(p, e);
	cl_mem b = clCreateImage(p->context, CL_MEM_READ_WRITE, &fmt, &desc, NULL, &e);
	E2E_OK(p, e);
	cl_mem x = e2e_buffer_create(p, CL_MEM_READ_WRITE, bytes, NULL);
	cl_uint black[4] = {0, 0, 0, 0};
	E2E_OK(p, clEnqueueFillImage(p->queue, b, black, zero, all, 0, NULL, NULL));
	cb = f.create(1, &p->queue, NULL, &e);
	E2E_OK(p, e);
	E2E_OK(p, copy_image(cb, NULL, a, b, so, dor, region, 0, NULL, &sp[0], NULL));
	E2E_OK(p, fill_image(cb, NULL, b, color, fo, fr, 1, &sp[0], &sp[1], NULL));
	E2E_OK(p, to_buffer(cb, NULL, b, x, zero, all, 0, 1, &sp[1], &sp[2], NULL));
	E2E_OK(p, to_image(cb, NULL, x, a, 0, zero, row, 1, &sp[2], &sp[3], NULL));
	bad[0] = copy_image(cb, NULL, a, b, far, zero, region, 0, NULL, NULL, NULL);
	bad[1] = fill_image(cb, NULL, x, color, zero, row, 0, NULL, NULL, NULL);
	E2E_OK(p, f.finalize(cb));
	for (int i = 0; i < 2; i++) {
		E2E_OK(p, f.enqueue(0, NULL, cb, 0, NULL, NULL));
		E2E_OK(p, clFinish(p->queue));
	}
	E2E_OK(p, clEnqueueReadImage(p->queue, a, CL_TRUE, zero, all, 0, 0, out, 0, NULL, NULL));
	E2E_OK(p, clEnqueueReadImage(p->queue, b, CL_TRUE, zero, all, 0, 0, out + bytes, 0, NULL,
				     NULL));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, x, CL_TRUE, 0, bytes, out + 2 * bytes, 0, NULL,
				      NULL));
	E2E_OK(p, f.release(cb));
	clReleaseMemObject(x);
	clReleaseMemObject(b);
	clReleaseMemObject(a);
	free(src);
}

START_TEST(test_cmdbuf_images)
{
	const size_t bytes = IMG * IMG * 4;
	unsigned char *nat = e2e_xcalloc(3 * bytes), *virt = e2e_xcalloc(3 * bytes);
	cl_bool img = CL_FALSE;
	cl_int nbad[2], vbad[2];

	if (!both_have())
		return;
	clGetDeviceInfo(e2e_native.device, CL_DEVICE_IMAGE_SUPPORT, sizeof(img), &img, NULL);
	if (!img) {
		fprintf(stderr, "native device has no images: nothing to compare\n");
		return;
	}
	images_run(&e2e_native, nat, nbad);
	images_run(&e2e_virtual, virt, vbad);
	/* B's filled box reads the color; X holds B. */
	ck_assert_uint_eq(nat[bytes + (11 * IMG + 2) * 4 + 1], 22);
	ck_assert_mem_eq(nat + bytes, nat + 2 * bytes, bytes);
	e2e_assert_bytes_eq(virt, nat, 3 * bytes, "virtual image records vs native");
	e2e_check_err("image copy past the end", vbad[0], nbad[0], CL_INVALID_VALUE);
	e2e_check_err("image fill of a buffer", vbad[1], nbad[1], CL_INVALID_MEM_OBJECT);
	free(virt);
	free(nat);
}
END_TEST

/* The error paths of one platform, in a fixed order: *codes gets each. */
#define CB_ERRS 12
static void errors_run(struct e2e_plat *p, cl_int codes[CB_ERRS])
{
	cl_context ctx2;
	cl_command_queue q2;
	cl_mem m = e2e_buffer_create(p, CL_MEM_READ_WRITE, 1024, NULL), m2;
	/* Zeroed memory where a command buffer should be. */
	static uint64_t forged[64];
	cl_command_buffer_khr cb, fake = (cl_command_buffer_khr)(void *)forged;
	cl_sync_point_khr bad = 99, sp = 0;
	cl_uint pat = 1;
	cl_event gate;
	struct cbfn f;
	cl_int e;

	cbfn_load(p, &f);
	ctx2 = clCreateContext(NULL, 1, &p->device, NULL, NULL, &e);
	E2E_OK(p, e);
	q2 = clCreateCommandQueueWithProperties(ctx2, p->device, NULL, &e);
	E2E_OK(p, e);
	m2 = clCreateBuffer(ctx2, CL_MEM_READ_WRITE, 1024, NULL, &e);
	E2E_OK(p, e);
	cb = f.create(1, &p->queue, NULL, &e);
	E2E_OK(p, e);
	E2E_OK(p, f.fill(cb, NULL, m, &pat, sizeof(pat), 0, 1024, 0, NULL, &sp, NULL));
	/* 0: enqueue before finalize */
	codes[0] = f.enqueue(0, NULL, cb, 0, NULL, NULL);
	/* 1: a sync point no command has */
	codes[1] = f.fill(cb, NULL, m, &pat, sizeof(pat), 0, 1024, 1, &bad, NULL, NULL);
	/* 2: a buffer of another context */
	codes[2] = f.copy(cb, NULL, m, m2, 0, 0, 1024, 0, NULL, NULL, NULL);
	/* 3: a queue named in the record */
	codes[3] = f.fill(cb, p->queue, m, &pat, sizeof(pat), 0, 1024, 0, NULL, NULL, NULL);
	/* 4: a range past the buffer */
	codes[4] = f.fill(cb, NULL, m, &pat, sizeof(pat), 0, 2048, 0, NULL, NULL, NULL);
	E2E_OK(p, f.finalize(cb));
	/* 5: record after finalize */
	codes[5] = f.fill(cb, NULL, m, &pat, sizeof(pat), 0, 1024, 0, NULL, NULL, NULL);
	/* 6: finalize twice */
	codes[6] = f.finalize(cb);
	/* 7, 8: a forged command buffer (PoCL 3.1 aborts releasing or
	 * retaining one) */
	codes[7] = f.finalize(fake);
	codes[8] = f.enqueue(0, NULL, fake, 0, NULL, NULL);
	codes[9] = f.enqueue(1, NULL, cb, 0, NULL, NULL);
	/* 9: a count of queues and no list */
	/* 10: a queue of another context */
	codes[10] = f.enqueue(1, &q2, cb, 0, NULL, NULL);
	/* 11: a replay while one is pending (held by a user event), without
	 * simultaneous use */
	gate = clCreateUserEvent(p->context, &e);
	E2E_OK(p, e);
	E2E_OK(p, f.enqueue(0, NULL, cb, 1, &gate, NULL));
	codes[11] = f.enqueue(0, NULL, cb, 0, NULL, NULL);
	E2E_OK(p, clSetUserEventStatus(gate, CL_COMPLETE));
	E2E_OK(p, clFinish(p->queue));
	clReleaseEvent(gate);
	/* Done: a replay again, and again after clFinish. */
	E2E_OK(p, f.enqueue(0, NULL, cb, 0, NULL, NULL));
	E2E_OK(p, clFinish(p->queue));
	E2E_OK(p, f.enqueue(0, NULL, cb, 0, NULL, NULL));
	E2E_OK(p, clFinish(p->queue));
	E2E_OK(p, f.release(cb));
	clReleaseMemObject(m2);
	clReleaseMemObject(m);
	clReleaseCommandQueue(q2);
	clReleaseContext(ctx2);
}

START_TEST(test_cmdbuf_errors)
{
	static const char *const what[CB_ERRS] = {
	    "enqueue unfinalized", "bad sync point", "buffer of another context",
	    "queue in a record",   "range past end", "record after finalize",
	    "finalize twice",	   "finalize forged", "enqueue forged",
	    "no queue list",	   "queue of another context", "replay while pending",
	};
	static const cl_int want[CB_ERRS] = {
	    CL_INVALID_OPERATION,	   CL_INVALID_SYNC_POINT_WAIT_LIST_KHR,
	    CL_INVALID_CONTEXT,		   CL_INVALID_COMMAND_QUEUE,
	    CL_INVALID_VALUE,		   CL_INVALID_OPERATION,
	    CL_INVALID_OPERATION,	   CL_INVALID_COMMAND_BUFFER_KHR,
	    CL_INVALID_COMMAND_BUFFER_KHR, CL_INVALID_VALUE,
	    CL_INVALID_CONTEXT,		   CL_INVALID_OPERATION,
	};
	cl_int nat[CB_ERRS], virt[CB_ERRS];

	if (!both_have())
		return;
	errors_run(&e2e_native, nat);
	errors_run(&e2e_virtual, virt);
	for (int i = 0; i < CB_ERRS; i++) {
		e2e_check_err(what[i], virt[i], nat[i], want[i]);
	}
}
END_TEST

static Suite *cmdbuf_suite(void)
{
	Suite *s = suite_create("e2e_cmdbuf");
	TCase *tc = e2e_tcase("cmdbuf");

	tcase_add_test(tc, test_cmdbuf_device_info);
	tcase_add_test(tc, test_cmdbuf_replay);
	tcase_add_test(tc, test_cmdbuf_args_captured);
	tcase_add_test(tc, test_cmdbuf_many);
	tcase_add_test(tc, test_cmdbuf_rect);
	tcase_add_test(tc, test_cmdbuf_images);
	tcase_add_test(tc, test_cmdbuf_errors);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return e2e_main(cmdbuf_suite());
}
