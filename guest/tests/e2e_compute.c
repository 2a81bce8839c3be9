// SPDX-License-Identifier: MIT
// e2e_compute.c - kernels on the virtual platform give the native results.
#include "e2e.h"

#include <stdlib.h>
#include <string.h>

static const char compute_src[] =
	"__kernel void vadd(__global const float *a, __global const float *b,\n"
	"                   __global float *c, uint n)\n"
	"{\n"
	"	size_t i = get_global_id(0);\n"
	"	if (i < n)\n"
	"		c[i] = a[i] + b[i];\n"
	"}\n"
	"__kernel void matmul(__global const float *a, __global const float *b,\n"
	"                     __global float *c, uint n)\n"
	"{\n"
	"	size_t col = get_global_id(0), row = get_global_id(1);\n"
	"	float acc = 0.0f;\n"
	"	for (uint k = 0; k < n; k++)\n"
	"		acc += a[row * n + k] * b[k * n + col];\n"
	"	c[row * n + col] = acc;\n"
	"}\n"
	"__kernel void group_sum(__global const uint *in, __global uint *out,\n"
	"                        __local uint *scratch)\n"
	"{\n"
	"	size_t l = get_local_id(0);\n"
	"	scratch[l] = in[get_global_id(0)];\n"
	"	barrier(CLK_LOCAL_MEM_FENCE);\n"
	"	for (size_t s = get_local_size(0) / 2; s > 0; s /= 2) {\n"
	"		if (l < s)\n"
	"			scratch[l] += scratch[l + s];\n"
	"		barrier(CLK_LOCAL_MEM_FENCE);\n"
	"	}\n"
	"	if (l == 0)\n"
	"		out[get_group_id(0)] = scratch[0];\n"
	"}\n"
	"__kernel void scale(__global float *x, float s)\n"
	"{\n"
	"	x[get_global_id(0)] *= s;\n"
	"}\n"
	"__kernel void offset(__global float *x, float o)\n"
	"{\n"
	"	x[get_global_id(0)] += o;\n"
	"}\n"
	"__kernel __attribute__((reqd_work_group_size(16, 1, 1)))\n"
	"void fixed16(__global int *x)\n"
	"{\n"
	"	x[get_global_id(0)] = (int)get_local_id(0);\n"
	"}\n";

/* The kernels of compute_src, sorted by name, with their argument counts. */
static const struct {
	const char *name;
	cl_uint num_args;
} compute_kernels[] = {
	{"fixed16", 1}, {"group_sum", 3}, {"matmul", 4},
	{"offset", 2},  {"scale", 2},     {"vadd", 4},
};
#define COMPUTE_NUM_KERNELS (sizeof(compute_kernels) / sizeof(compute_kernels[0]))

static void set_mem_arg(struct e2e_plat *p, cl_kernel k, cl_uint i, cl_mem m)
{
	E2E_OK(p, clSetKernelArg(k, i, sizeof(m), &m));
}

/* ---- vector add ---- */

#define VADD_N (1u << 20)

static void vadd_run(struct e2e_plat *p, const float *a, const float *b,
		     float *c)
{
	size_t bytes = VADD_N * sizeof(float), gws = VADD_N;
	cl_program prog = e2e_program_build(p, compute_src, NULL);
	cl_kernel k = e2e_kernel_create(p, prog, "vadd");
	cl_mem ma, mb, mc;
	cl_uint n = VADD_N;

	ma = e2e_buffer_create(p, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes,
			       (void *)a);
	mb = e2e_buffer_create(p, CL_MEM_READ_ONLY, bytes, NULL);
	mc = e2e_buffer_create(p, CL_MEM_WRITE_ONLY, bytes, NULL);
	E2E_OK(p, clEnqueueWriteBuffer(p->queue, mb, CL_FALSE, 0, bytes, b, 0,
				       NULL, NULL));
	set_mem_arg(p, k, 0, ma);
	set_mem_arg(p, k, 1, mb);
	set_mem_arg(p, k, 2, mc);
	E2E_OK(p, clSetKernelArg(k, 3, sizeof(n), &n));
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &gws, NULL, 0,
					 NULL, NULL));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, mc, CL_TRUE, 0, bytes, c, 0,
				      NULL, NULL));
	clReleaseMemObject(mc);
	clReleaseMemObject(mb);
	clReleaseMemObject(ma);
	clReleaseKernel(k);
	clReleaseProgram(prog);
}

START_TEST(test_vector_add)
{
	size_t bytes = VADD_N * sizeof(float);
	float *a = e2e_xmalloc(bytes), *b = e2e_xmalloc(bytes);
	float *want = e2e_xmalloc(bytes);
	float *nat = e2e_xmalloc(bytes), *virt = e2e_xmalloc(bytes);

	e2e_rand_float(a, VADD_N, 1);
	e2e_rand_float(b, VADD_N, 2);
	for (size_t i = 0; i < VADD_N; i++)
		want[i] = a[i] + b[i];
	/* Poison the outputs so that a read that never lands shows. */
	memset(nat, 0xff, bytes);
	memset(virt, 0xff, bytes);

	vadd_run(&e2e_native, a, b, nat);
	vadd_run(&e2e_virtual, a, b, virt);
	/* One IEEE add per element: exact on every conforming device. */
	e2e_assert_bytes_eq(nat, want, bytes, "native vadd vs CPU");
	e2e_assert_bytes_eq(virt, nat, bytes, "virtual vadd vs native");

	free(virt);
	free(nat);
	free(want);
	free(b);
	free(a);
}
END_TEST

/* ---- matrix multiply ---- */

#define MM_N 256

static void matmul_run(struct e2e_plat *p, const float *a, const float *b,
		       float *c)
{
	size_t bytes = (size_t)MM_N * MM_N * sizeof(float);
	size_t gws[2] = {MM_N, MM_N};
	cl_program prog = e2e_program_build(p, compute_src, NULL);
	cl_kernel k = e2e_kernel_create(p, prog, "matmul");
	cl_uint n = MM_N;
	cl_mem ma, mb, mc;

	ma = e2e_buffer_create(p, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes,
			       (void *)a);
	mb = e2e_buffer_create(p, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes,
			       (void *)b);
	mc = e2e_buffer_create(p, CL_MEM_WRITE_ONLY, bytes, NULL);
	set_mem_arg(p, k, 0, ma);
	set_mem_arg(p, k, 1, mb);
	set_mem_arg(p, k, 2, mc);
	E2E_OK(p, clSetKernelArg(k, 3, sizeof(n), &n));
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 2, NULL, gws, NULL, 0,
					 NULL, NULL));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, mc, CL_TRUE, 0, bytes, c, 0,
				      NULL, NULL));
	clReleaseMemObject(mc);
	clReleaseMemObject(mb);
	clReleaseMemObject(ma);
	clReleaseKernel(k);
	clReleaseProgram(prog);
}

START_TEST(test_matmul)
{
	size_t n2 = (size_t)MM_N * MM_N, bytes = n2 * sizeof(float);
	float *a = e2e_xmalloc(bytes), *b = e2e_xmalloc(bytes);
	float *want = e2e_xmalloc(bytes);
	float *nat = e2e_xmalloc(bytes), *virt = e2e_xmalloc(bytes);

	e2e_rand_float(a, n2, 11);
	e2e_rand_float(b, n2, 12);
	for (size_t r = 0; r < MM_N; r++) {
		for (size_t c = 0; c < MM_N; c++) {
			double acc = 0.0;

			for (size_t k = 0; k < MM_N; k++)
				acc += (double)a[r * MM_N + k] *
				       (double)b[k * MM_N + c];
			want[r * MM_N + c] = (float)acc;
		}
	}
	memset(nat, 0xff, bytes);
	memset(virt, 0xff, bytes);

	matmul_run(&e2e_native, a, b, nat);
	matmul_run(&e2e_virtual, a, b, virt);
	/* 256 float products of values in [-1, 1): sums stay below ~20 and
	 * the float accumulation error well below 1e-3. */
	e2e_assert_floats_near(nat, want, n2, 1e-3f, 1e-4f,
			       "native matmul vs CPU");
	e2e_assert_floats_near(virt, want, n2, 1e-3f, 1e-4f,
			       "virtual matmul vs CPU");
	e2e_assert_floats_near(virt, nat, n2, 1e-4f, 1e-5f,
			       "virtual matmul vs native");

	free(virt);
	free(nat);
	free(want);
	free(b);
	free(a);
}
END_TEST

/* ---- local memory ---- */

#define GS_N (1u << 16)

static void group_sum_run(struct e2e_plat *p, const cl_uint *in, size_t lws,
			  cl_uint *out)
{
	size_t gws = GS_N, groups = GS_N / lws;
	cl_program prog = e2e_program_build(p, compute_src, NULL);
	cl_kernel k = e2e_kernel_create(p, prog, "group_sum");
	cl_mem min, mout;

	min = e2e_buffer_create(p, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
				GS_N * sizeof(cl_uint), (void *)in);
	mout = e2e_buffer_create(p, CL_MEM_WRITE_ONLY, groups * sizeof(cl_uint),
				 NULL);
	set_mem_arg(p, k, 0, min);
	set_mem_arg(p, k, 1, mout);
	/* The local argument: a size and no value. */
	E2E_OK(p, clSetKernelArg(k, 2, lws * sizeof(cl_uint), NULL));
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &gws, &lws, 0,
					 NULL, NULL));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, mout, CL_TRUE, 0,
				      groups * sizeof(cl_uint), out, 0, NULL,
				      NULL));
	clReleaseMemObject(mout);
	clReleaseMemObject(min);
	clReleaseKernel(k);
	clReleaseProgram(prog);
}

START_TEST(test_local_memory)
{
	static const size_t lws_list[] = {64, 256};
	cl_uint *in = e2e_xmalloc(GS_N * sizeof(cl_uint));

	/* Values below 2^20 keep every group sum inside 32 bits. */
	e2e_rand_u32(in, GS_N, 21, 1u << 20);
	for (size_t t = 0; t < sizeof(lws_list) / sizeof(lws_list[0]); t++) {
		size_t lws = lws_list[t], groups = GS_N / lws;
		size_t bytes = groups * sizeof(cl_uint);
		cl_uint *want = e2e_xcalloc(bytes);
		cl_uint *nat = e2e_xmalloc(bytes), *virt = e2e_xmalloc(bytes);

		for (size_t i = 0; i < GS_N; i++)
			want[i / lws] += in[i];
		memset(nat, 0xff, bytes);
		memset(virt, 0xff, bytes);
		group_sum_run(&e2e_native, in, lws, nat);
		group_sum_run(&e2e_virtual, in, lws, virt);
		e2e_assert_bytes_eq(nat, want, bytes, "native group sums vs CPU");
		e2e_assert_bytes_eq(virt, want, bytes,
				    "virtual group sums vs CPU");
		free(virt);
		free(nat);
		free(want);
	}
	free(in);
}
END_TEST

/* ---- several kernels of one program ---- */

#define SO_N 4096

static void scale_offset_run(struct e2e_plat *p, const float *x, float s,
			     float o, float *out)
{
	size_t gws = SO_N, bytes = SO_N * sizeof(float);
	cl_program prog = e2e_program_build(p, compute_src, NULL);
	cl_kernel ks = e2e_kernel_create(p, prog, "scale");
	cl_kernel ko = e2e_kernel_create(p, prog, "offset");
	cl_mem m = e2e_buffer_create(p, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
				     bytes, (void *)x);

	set_mem_arg(p, ks, 0, m);
	E2E_OK(p, clSetKernelArg(ks, 1, sizeof(s), &s));
	set_mem_arg(p, ko, 0, m);
	E2E_OK(p, clSetKernelArg(ko, 1, sizeof(o), &o));
	/* In-order queue: offset sees scale's result; scale twice. */
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, ks, 1, NULL, &gws, NULL, 0,
					 NULL, NULL));
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, ko, 1, NULL, &gws, NULL, 0,
					 NULL, NULL));
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, ks, 1, NULL, &gws, NULL, 0,
					 NULL, NULL));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_TRUE, 0, bytes, out, 0,
				      NULL, NULL));
	clReleaseMemObject(m);
	clReleaseKernel(ko);
	clReleaseKernel(ks);
	clReleaseProgram(prog);
}

START_TEST(test_multiple_kernels)
{
	size_t bytes = SO_N * sizeof(float);
	float *x = e2e_xmalloc(bytes), *want = e2e_xmalloc(bytes);
	float *nat = e2e_xmalloc(bytes), *virt = e2e_xmalloc(bytes);
	const float s = 1.5f, o = -0.25f;

	e2e_rand_float(x, SO_N, 31);
	for (size_t i = 0; i < SO_N; i++) {
		float t = x[i] * s;

		t = t + o;
		want[i] = t * s;
	}
	memset(nat, 0xff, bytes);
	memset(virt, 0xff, bytes);
	scale_offset_run(&e2e_native, x, s, o, nat);
	scale_offset_run(&e2e_virtual, x, s, o, virt);
	e2e_assert_floats_near(nat, want, SO_N, 1e-6f, 1e-6f,
			       "native scale/offset vs CPU");
	e2e_assert_bytes_eq(virt, nat, bytes, "virtual scale/offset vs native");
	free(virt);
	free(nat);
	free(want);
	free(x);
}
END_TEST

/* ---- clCreateKernelsInProgram ---- */

static int kernel_name_cmp(const void *a, const void *b)
{
	char na[64] = "", nb[64] = "";

	clGetKernelInfo(*(const cl_kernel *)a, CL_KERNEL_FUNCTION_NAME,
			sizeof(na) - 1, na, NULL);
	clGetKernelInfo(*(const cl_kernel *)b, CL_KERNEL_FUNCTION_NAME,
			sizeof(nb) - 1, nb, NULL);
	return strcmp(na, nb);
}

/* Creates all kernels, checks names and argument counts, then runs "scale"
 * from the set on x (in place). */
static void kernels_in_program_run(struct e2e_plat *p, float *x, size_t n)
{
	cl_program prog = e2e_program_build(p, compute_src, NULL);
	cl_kernel ks[COMPUTE_NUM_KERNELS + 2];
	cl_uint count = 0;
	float s = -2.0f;
	cl_mem m;

	E2E_OK(p, clCreateKernelsInProgram(prog, 0, NULL, &count));
	ck_assert_msg(count == COMPUTE_NUM_KERNELS, "%s: %u kernels, want %zu",
		      p->role, count, COMPUTE_NUM_KERNELS);
	E2E_EXPECT(p, clCreateKernelsInProgram(prog, 1, ks, NULL),
		   CL_INVALID_VALUE);
	memset(ks, 0, sizeof(ks));
	count = 0;
	E2E_OK(p, clCreateKernelsInProgram(prog, COMPUTE_NUM_KERNELS + 2, ks,
					   &count));
	ck_assert_uint_eq(count, COMPUTE_NUM_KERNELS);
	qsort(ks, count, sizeof(ks[0]), kernel_name_cmp);
	for (cl_uint i = 0; i < count; i++) {
		char name[64] = "";
		cl_uint nargs = 0;

		ck_assert_ptr_nonnull(ks[i]);
		E2E_OK(p, clGetKernelInfo(ks[i], CL_KERNEL_FUNCTION_NAME,
					  sizeof(name) - 1, name, NULL));
		E2E_OK(p, clGetKernelInfo(ks[i], CL_KERNEL_NUM_ARGS,
					  sizeof(nargs), &nargs, NULL));
		ck_assert_msg(strcmp(name, compute_kernels[i].name) == 0,
			      "%s: kernel %u is \"%s\", want \"%s\"", p->role, i,
			      name, compute_kernels[i].name);
		ck_assert_msg(nargs == compute_kernels[i].num_args,
			      "%s: %s has %u args, want %u", p->role, name,
			      nargs, compute_kernels[i].num_args);
	}

	/* compute_kernels is sorted, so index 4 is "scale". */
	m = e2e_buffer_create(p, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
			      n * sizeof(float), x);
	set_mem_arg(p, ks[4], 0, m);
	E2E_OK(p, clSetKernelArg(ks[4], 1, sizeof(s), &s));
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, ks[4], 1, NULL, &n, NULL, 0,
					 NULL, NULL));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_TRUE, 0, n * sizeof(float),
				      x, 0, NULL, NULL));
	clReleaseMemObject(m);
	for (cl_uint i = 0; i < count; i++)
		clReleaseKernel(ks[i]);
	clReleaseProgram(prog);
}

START_TEST(test_create_kernels_in_program)
{
	enum { N = 1024 };
	float x[N], nat[N], virt[N], want[N];

	e2e_rand_float(x, N, 41);
	for (size_t i = 0; i < N; i++)
		want[i] = x[i] * -2.0f;
	memcpy(nat, x, sizeof(x));
	memcpy(virt, x, sizeof(x));
	kernels_in_program_run(&e2e_native, nat, N);
	kernels_in_program_run(&e2e_virtual, virt, N);
	e2e_assert_bytes_eq(nat, want, sizeof(want), "native scale vs CPU");
	e2e_assert_bytes_eq(virt, want, sizeof(want), "virtual scale vs CPU");
}
END_TEST

/* ---- clGetKernelWorkGroupInfo ---- */

struct wg_info {
	size_t wg_size;
	size_t compile[3];
	cl_ulong local_mem;
	size_t multiple;
	cl_ulong private_mem;
};

static void wg_info_get(struct e2e_plat *p, cl_kernel k, struct wg_info *w)
{
	memset(w, 0, sizeof(*w));
	E2E_OK(p, clGetKernelWorkGroupInfo(k, p->device, CL_KERNEL_WORK_GROUP_SIZE,
					   sizeof(w->wg_size), &w->wg_size,
					   NULL));
	E2E_OK(p, clGetKernelWorkGroupInfo(k, p->device,
					   CL_KERNEL_COMPILE_WORK_GROUP_SIZE,
					   sizeof(w->compile), w->compile,
					   NULL));
	E2E_OK(p, clGetKernelWorkGroupInfo(k, p->device, CL_KERNEL_LOCAL_MEM_SIZE,
					   sizeof(w->local_mem), &w->local_mem,
					   NULL));
	E2E_OK(p, clGetKernelWorkGroupInfo(
			  k, p->device,
			  CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
			  sizeof(w->multiple), &w->multiple, NULL));
	E2E_OK(p, clGetKernelWorkGroupInfo(k, p->device,
					   CL_KERNEL_PRIVATE_MEM_SIZE,
					   sizeof(w->private_mem),
					   &w->private_mem, NULL));
}

static const char *const wg_kernels[] = {"vadd", "group_sum", "fixed16"};
#define WG_NUM (sizeof(wg_kernels) / sizeof(wg_kernels[0]))

/* Queries each kernel of wg_kernels (group_sum with a 1 KiB local
 * argument), then runs fixed16 with a wrong and the required local size. */
static void wg_run(struct e2e_plat *p, struct wg_info *w, int *out16)
{
	cl_program prog = e2e_program_build(p, compute_src, NULL);
	size_t gws = 64, lws_bad = 8, lws = 16;
	cl_mem m;

	for (size_t i = 0; i < WG_NUM; i++) {
		cl_kernel k = e2e_kernel_create(p, prog, wg_kernels[i]);

		if (strcmp(wg_kernels[i], "group_sum") == 0)
			E2E_OK(p, clSetKernelArg(k, 2, 1024, NULL));
		wg_info_get(p, k, &w[i]);
		clReleaseKernel(k);
	}

	cl_kernel k = e2e_kernel_create(p, prog, "fixed16");

	m = e2e_buffer_create(p, CL_MEM_WRITE_ONLY, gws * sizeof(int), NULL);
	set_mem_arg(p, k, 0, m);
	E2E_EXPECT(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &gws,
					     &lws_bad, 0, NULL, NULL),
		   CL_INVALID_WORK_GROUP_SIZE);
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &gws, &lws, 0,
					 NULL, NULL));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_TRUE, 0, gws * sizeof(int),
				      out16, 0, NULL, NULL));
	clReleaseMemObject(m);
	clReleaseKernel(k);
	clReleaseProgram(prog);
}

START_TEST(test_work_group_info)
{
	struct wg_info nat[WG_NUM], virt[WG_NUM];
	int out_n[64], out_v[64];

	memset(out_n, 0xff, sizeof(out_n));
	memset(out_v, 0xff, sizeof(out_v));
	wg_run(&e2e_native, nat, out_n);
	wg_run(&e2e_virtual, virt, out_v);
	for (size_t i = 0; i < WG_NUM; i++) {
		const char *name = wg_kernels[i];

		ck_assert_msg(virt[i].wg_size == nat[i].wg_size,
			      "%s: WORK_GROUP_SIZE virtual %zu native %zu", name,
			      virt[i].wg_size, nat[i].wg_size);
		ck_assert_msg(virt[i].wg_size > 0, "%s: WORK_GROUP_SIZE 0", name);
		for (int d = 0; d < 3; d++)
			ck_assert_msg(virt[i].compile[d] == nat[i].compile[d],
				      "%s: COMPILE_WORK_GROUP_SIZE[%d] virtual "
				      "%zu native %zu",
				      name, d, virt[i].compile[d],
				      nat[i].compile[d]);
		ck_assert_msg(virt[i].local_mem == nat[i].local_mem,
			      "%s: LOCAL_MEM_SIZE virtual %llu native %llu",
			      name, (unsigned long long)virt[i].local_mem,
			      (unsigned long long)nat[i].local_mem);
		ck_assert_msg(virt[i].multiple == nat[i].multiple,
			      "%s: PREFERRED_WORK_GROUP_SIZE_MULTIPLE virtual "
			      "%zu native %zu",
			      name, virt[i].multiple, nat[i].multiple);
		ck_assert_msg(virt[i].private_mem == nat[i].private_mem,
			      "%s: PRIVATE_MEM_SIZE virtual %llu native %llu",
			      name, (unsigned long long)virt[i].private_mem,
			      (unsigned long long)nat[i].private_mem);
	}
	/* vadd declares no size; fixed16 requires (16, 1, 1). */
	ck_assert_uint_eq(virt[0].compile[0], 0);
	ck_assert_uint_eq(virt[2].compile[0], 16);
	ck_assert_uint_eq(virt[2].compile[1], 1);
	ck_assert_uint_eq(virt[2].compile[2], 1);
	/* The 1 KiB local argument counts towards group_sum's local memory. */
	ck_assert_msg(virt[1].local_mem >= 1024,
		      "group_sum LOCAL_MEM_SIZE %llu < 1024",
		      (unsigned long long)virt[1].local_mem);
	for (int i = 0; i < 64; i++)
		ck_assert_msg(out_v[i] == i % 16 && out_n[i] == i % 16,
			      "fixed16[%d]: virtual %d native %d, want %d", i,
			      out_v[i], out_n[i], i % 16);
}
END_TEST

/* Every clGetKernelWorkGroupInfo parameter, the errors, the sizes alone,
 * and answers from the guest's cache, next to native, for several kernels. */
static const cl_kernel_work_group_info wg_params[] = {
	CL_KERNEL_WORK_GROUP_SIZE, CL_KERNEL_COMPILE_WORK_GROUP_SIZE, CL_KERNEL_LOCAL_MEM_SIZE,
	CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE, CL_KERNEL_PRIVATE_MEM_SIZE,
	CL_KERNEL_GLOBAL_WORK_SIZE, 0x4242,
};
#define WG_PARAMS (sizeof(wg_params) / sizeof(wg_params[0]))

/* One answer: its status, size and bytes. */
struct wg_answer {
	cl_int err, err_null_dev, err_small;
	size_t size, size_only;
	unsigned char value[64];
};

static void wg_answer_get(struct e2e_plat *p, cl_kernel k, cl_kernel_work_group_info param,
			  struct wg_answer *a)
{
	unsigned char one;

	memset(a, 0, sizeof(*a));
	/* Twice: the second answer may come from the guest's cache. */
	for (int i = 0; i < 2; i++) {
		a->err = clGetKernelWorkGroupInfo(k, p->device, param, sizeof(a->value), a->value,
						  &a->size);
		clGetKernelWorkGroupInfo(k, p->device, param, 0, NULL, &a->size_only);
	}
	/* One device in the program: NULL names it. */
	a->err_null_dev = clGetKernelWorkGroupInfo(k, NULL, param, sizeof(a->value), a->value,
						   NULL);
	a->err_small = clGetKernelWorkGroupInfo(k, p->device, param, 1, &one, NULL);
}

static void wg_answers_compare(const char *kname, cl_kernel_work_group_info param,
			       const struct wg_answer *v, const struct wg_answer *n)
{
	if (param == CL_KERNEL_GLOBAL_WORK_SIZE) {
		/* Only custom devices and built-in kernels answer it. */
		e2e_check_err("GLOBAL_WORK_SIZE", v->err, n->err, CL_INVALID_VALUE);
		return;
	}
	ck_assert_msg(v->err == n->err && v->err_small == n->err_small,
		      "%s, param 0x%x: virtual %d/%d/%d, native %d/%d/%d", kname, param, v->err,
		      v->err_null_dev, v->err_small, n->err, n->err_null_dev, n->err_small);
	/* NULL names the program's one device: the answer with it (Oclgrind
	 * 21.10 says CL_INVALID_DEVICE). */
	e2e_check_err("a NULL device, one in the program", v->err_null_dev, n->err_null_dev,
		      n->err);
	if (v->err != CL_SUCCESS)
		return;
	ck_assert_msg(v->size == n->size && v->size_only == n->size,
		      "%s, param 0x%x: size %zu (alone %zu), native %zu", kname, param, v->size,
		      v->size_only, n->size);
	ck_assert_msg(!memcmp(v->value, n->value, v->size),
		      "%s, param 0x%x: answer differs from native", kname, param);
}

static const char *const wg_all_kernels[] = {"vadd", "matmul", "group_sum", "scale", "fixed16"};
#define WG_ALL (sizeof(wg_all_kernels) / sizeof(wg_all_kernels[0]))

static void wg_all_run(struct e2e_plat *p, struct wg_answer (*a)[WG_PARAMS],
		       cl_ulong local_mem[2], cl_int *bad_kernel)
{
	cl_program prog = e2e_program_build(p, compute_src, NULL);

	for (size_t i = 0; i < WG_ALL; i++) {
		cl_kernel k = e2e_kernel_create(p, prog, wg_all_kernels[i]);

		if (!strcmp(wg_all_kernels[i], "group_sum")) {
			/* LOCAL_MEM_SIZE follows the __local argument. */
			E2E_OK(p, clSetKernelArg(k, 2, 1024, NULL));
			E2E_OK(p, clGetKernelWorkGroupInfo(k, p->device, CL_KERNEL_LOCAL_MEM_SIZE,
							   sizeof(cl_ulong), &local_mem[0], NULL));
			E2E_OK(p, clSetKernelArg(k, 2, 4096, NULL));
			E2E_OK(p, clGetKernelWorkGroupInfo(k, p->device, CL_KERNEL_LOCAL_MEM_SIZE,
							   sizeof(cl_ulong), &local_mem[1], NULL));
		}
		for (size_t j = 0; j < WG_PARAMS; j++)
			wg_answer_get(p, k, wg_params[j], &a[i][j]);
		clReleaseKernel(k);
	}
	*bad_kernel = clGetKernelWorkGroupInfo(NULL, p->device, CL_KERNEL_WORK_GROUP_SIZE, 0, NULL,
					       NULL);
	clReleaseProgram(prog);
}

START_TEST(test_work_group_info_every_param)
{
	static struct wg_answer v[WG_ALL][WG_PARAMS], n[WG_ALL][WG_PARAMS];
	cl_ulong vl[2], nl[2];
	cl_int vbad, nbad;

	wg_all_run(&e2e_virtual, v, vl, &vbad);
	wg_all_run(&e2e_native, n, nl, &nbad);
	for (size_t i = 0; i < WG_ALL; i++)
		for (size_t j = 0; j < WG_PARAMS; j++)
			wg_answers_compare(wg_all_kernels[i], wg_params[j], &v[i][j], &n[i][j]);
	ck_assert_msg(vl[0] == nl[0] && vl[1] == nl[1],
		      "group_sum LOCAL_MEM_SIZE with 1 and 4 KiB: virtual %llu, %llu; native "
		      "%llu, %llu",
		      (unsigned long long)vl[0], (unsigned long long)vl[1],
		      (unsigned long long)nl[0], (unsigned long long)nl[1]);
	ck_assert_msg(vl[1] >= vl[0] + 3072, "LOCAL_MEM_SIZE did not follow the argument");
	e2e_check_err("NULL kernel", vbad, nbad, CL_INVALID_KERNEL);
}
END_TEST

static Suite *compute_suite(void)
{
	Suite *s = suite_create("e2e_compute");
	TCase *tc = e2e_tcase("compute");

	tcase_add_test(tc, test_vector_add);
	tcase_add_test(tc, test_matmul);
	tcase_add_test(tc, test_local_memory);
	tcase_add_test(tc, test_multiple_kernels);
	tcase_add_test(tc, test_create_kernels_in_program);
	tcase_add_test(tc, test_work_group_info);
	tcase_add_test(tc, test_work_group_info_every_param);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return e2e_main(compute_suite());
}
