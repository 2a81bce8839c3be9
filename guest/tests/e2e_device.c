// SPDX-License-Identifier: MIT
// e2e_device.c - sub-devices through clmux next to native: partitions
// (equally, by counts, by affinity domain where offered), their device info,
// reference counts, errors, and contexts, queues and kernels on them.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e.h"

#define MAX_SUB 16

/* Partitions p's device; the sub-devices in subs, their count returned
 * (and first counted with no room, as applications do). */
static cl_uint partition(struct e2e_plat *p, const cl_device_partition_property *props,
			 cl_device_id *subs)
{
	cl_uint n = 0, made = 0;

	E2E_OK(p, clCreateSubDevices(p->device, props, 0, NULL, &n));
	ck_assert_msg(n >= 1 && n <= MAX_SUB, "%s: %u sub-devices", p->role, n);
	E2E_OK(p, clCreateSubDevices(p->device, props, n, subs, &made));
	ck_assert_uint_eq(made, n);
	return n;
}

static void release_all(struct e2e_plat *p, cl_device_id *subs, cl_uint n)
{
	for (cl_uint i = 0; i < n; i++)
		E2E_OK(p, clReleaseDevice(subs[i]));
}

/* A query's bytes on both sides (NULL-free answers only). */
static void same_info(cl_device_id v, cl_device_id nat, cl_device_info param, const char *what)
{
	unsigned char a[1024], b[1024];
	size_t na = 0, nb = 0;
	cl_int ev = clGetDeviceInfo(v, param, sizeof(a), a, &na);
	cl_int en = clGetDeviceInfo(nat, param, sizeof(b), b, &nb);

	ck_assert_msg(ev == en, "%s: virtual %s, native %s", what, e2e_cl_strerror(ev),
		      e2e_cl_strerror(en));
	if (ev == CL_SUCCESS) {
		ck_assert_msg(na == nb, "%s: %zu bytes, native %zu", what, na, nb);
		e2e_assert_bytes_eq(a, b, na, what);
	}
}

static void sub_info_compare(struct e2e_plat *p, cl_device_id sub, cl_device_id nat_sub)
{
	static const struct {
		cl_device_info param;
		const char *name;
	} same[] = {
	    {CL_DEVICE_TYPE, "TYPE"},
	    {CL_DEVICE_MAX_COMPUTE_UNITS, "MAX_COMPUTE_UNITS"},
	    {CL_DEVICE_PARTITION_TYPE, "PARTITION_TYPE"},
	    {CL_DEVICE_PARTITION_MAX_SUB_DEVICES, "PARTITION_MAX_SUB_DEVICES"},
	    {CL_DEVICE_PARTITION_PROPERTIES, "PARTITION_PROPERTIES"},
	    {CL_DEVICE_PARTITION_AFFINITY_DOMAIN, "PARTITION_AFFINITY_DOMAIN"},
	    {CL_DEVICE_NAME, "NAME"},
	    {CL_DEVICE_VENDOR_ID, "VENDOR_ID"},
	    {CL_DEVICE_MAX_WORK_GROUP_SIZE, "MAX_WORK_GROUP_SIZE"},
	    {CL_DEVICE_MAX_WORK_ITEM_SIZES, "MAX_WORK_ITEM_SIZES"},
	    {CL_DEVICE_GLOBAL_MEM_SIZE, "GLOBAL_MEM_SIZE"},
	    {CL_DEVICE_LOCAL_MEM_SIZE, "LOCAL_MEM_SIZE"},
	    {CL_DEVICE_VERSION, "VERSION"},
	};
	cl_device_id parent = NULL;
	cl_platform_id plat = NULL;
	cl_uint refs = 0;

	for (size_t i = 0; i < sizeof(same) / sizeof(*same); i++)
		same_info(sub, nat_sub, same[i].param, same[i].name);
	/* Handles: each side's own parent and platform. */
	E2E_OK(p, clGetDeviceInfo(sub, CL_DEVICE_PARENT_DEVICE, sizeof(parent), &parent, NULL));
	ck_assert_ptr_eq(parent, p->device);
	E2E_OK(p, clGetDeviceInfo(sub, CL_DEVICE_PLATFORM, sizeof(plat), &plat, NULL));
	ck_assert_ptr_eq(plat, p->platform);
	E2E_OK(p, clGetDeviceInfo(sub, CL_DEVICE_REFERENCE_COUNT, sizeof(refs), &refs, NULL));
	ck_assert_uint_eq(refs, 1);
}

static void partition_both(const cl_device_partition_property *props, const char *what)
{
	cl_device_id vs[MAX_SUB], ns[MAX_SUB];
	cl_uint nv = partition(&e2e_virtual, props, vs);
	cl_uint nn = partition(&e2e_native, props, ns);

	ck_assert_msg(nv == nn, "%s: %u sub-devices, native %u", what, nv, nn);
	for (cl_uint i = 0; i < nv; i++)
		sub_info_compare(&e2e_virtual, vs[i], ns[i]);
	release_all(&e2e_virtual, vs, nv);
	release_all(&e2e_native, ns, nn);
}

/* The root device's partition info reads as the device's. */
START_TEST(root_info)
{
	static const cl_device_info params[] = {
	    CL_DEVICE_PARTITION_MAX_SUB_DEVICES, CL_DEVICE_PARTITION_PROPERTIES,
	    CL_DEVICE_PARTITION_AFFINITY_DOMAIN, CL_DEVICE_PARTITION_TYPE,
	};
	cl_device_id parent = (cl_device_id)1;
	cl_uint refs = 0;

	for (size_t i = 0; i < sizeof(params) / sizeof(*params); i++)
		same_info(e2e_virtual.device, e2e_native.device, params[i], "root partition info");
	E2E_OK(&e2e_virtual, clGetDeviceInfo(e2e_virtual.device, CL_DEVICE_PARENT_DEVICE,
					     sizeof(parent), &parent, NULL));
	ck_assert_ptr_null(parent);
	E2E_OK(&e2e_virtual, clGetDeviceInfo(e2e_virtual.device, CL_DEVICE_REFERENCE_COUNT,
					     sizeof(refs), &refs, NULL));
	ck_assert_uint_eq(refs, 1);
	/* Root devices are not counted: retain and release are no-ops. */
	E2E_OK(&e2e_virtual, clRetainDevice(e2e_virtual.device));
	E2E_OK(&e2e_virtual, clReleaseDevice(e2e_virtual.device));
}
END_TEST

/* Which partition types the device offers (the native answer). */
static int offers(cl_device_partition_property type)
{
	cl_device_partition_property props[8] = {0};
	size_t n = 0;

	clGetDeviceInfo(e2e_native.device, CL_DEVICE_PARTITION_PROPERTIES, sizeof(props), props,
			&n);
	for (size_t i = 0; i < n / sizeof(*props); i++)
		if (props[i] == type)
			return 1;
	return 0;
}

static cl_uint compute_units(void)
{
	cl_uint cu = 0;

	clGetDeviceInfo(e2e_native.device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(cu), &cu, NULL);
	return cu;
}

START_TEST(equally)
{
	const cl_device_partition_property props[] = {CL_DEVICE_PARTITION_EQUALLY, 1, 0};

	if (!offers(CL_DEVICE_PARTITION_EQUALLY)) {
		fprintf(stderr, "e2e_device: the device does not partition equally\n");
		return;
	}
	partition_both(props, "equally 1");
}
END_TEST

START_TEST(by_counts)
{
	const cl_device_partition_property one[] = {
	    CL_DEVICE_PARTITION_BY_COUNTS, 1, CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0};
	const cl_device_partition_property two[] = {
	    CL_DEVICE_PARTITION_BY_COUNTS, 1, 1, CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0};

	if (!offers(CL_DEVICE_PARTITION_BY_COUNTS)) {
		fprintf(stderr, "e2e_device: the device does not partition by counts\n");
		return;
	}
	partition_both(one, "by counts 1");
	if (compute_units() >= 2)
		partition_both(two, "by counts 1, 1");
}
END_TEST

/* Each call on both platforms: the same error (or success). */
static void both_err(const cl_device_partition_property *props, cl_uint room, const char *what)
{
	cl_device_id vs[MAX_SUB], ns[MAX_SUB];
	cl_uint nv = 0, nn = 0;
	cl_int ev = clCreateSubDevices(e2e_virtual.device, props, room, room ? vs : NULL, &nv);
	cl_int en = clCreateSubDevices(e2e_native.device, props, room, room ? ns : NULL, &nn);

	ck_assert_msg(ev == en, "%s: virtual %s (%d), native %s (%d)", what, e2e_cl_strerror(ev),
		      ev, e2e_cl_strerror(en), en);
	if (ev == CL_SUCCESS && room) {
		release_all(&e2e_virtual, vs, nv);
		release_all(&e2e_native, ns, nn);
	}
}

START_TEST(errors)
{
	const cl_device_partition_property affinity[] = {
	    CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN, CL_DEVICE_AFFINITY_DOMAIN_NEXT_PARTITIONABLE,
	    0};
	const cl_device_partition_property zero[] = {CL_DEVICE_PARTITION_EQUALLY, 0, 0};
	const cl_device_partition_property too_many[] = {
	    CL_DEVICE_PARTITION_BY_COUNTS, 1024, CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0};
	const cl_device_partition_property unknown[] = {0x4242, 1, 0};
	const cl_device_partition_property eq1[] = {CL_DEVICE_PARTITION_EQUALLY, 1, 0};
	cl_device_id out[MAX_SUB];
	cl_uint n = 0;

	both_err(affinity, MAX_SUB, "by affinity domain");
	both_err(zero, MAX_SUB, "equally 0");
	both_err(too_many, MAX_SUB, "by counts past the compute units");
	both_err(unknown, MAX_SUB, "unknown partition type");
	if (offers(CL_DEVICE_PARTITION_EQUALLY) && compute_units() >= 2)
		both_err(eq1, 1, "room for fewer than made");
	e2e_check_err("NULL properties",
		      clCreateSubDevices(e2e_virtual.device, NULL, MAX_SUB, out, &n),
		      clCreateSubDevices(e2e_native.device, NULL, MAX_SUB, out, &n),
		      CL_INVALID_VALUE);
	e2e_check_err("NULL device", clCreateSubDevices(NULL, eq1, MAX_SUB, out, &n),
		      CL_INVALID_DEVICE, CL_INVALID_DEVICE);
	e2e_check_err("release of NULL", clReleaseDevice(NULL), CL_INVALID_DEVICE,
		      CL_INVALID_DEVICE);
}
END_TEST

static const char vadd_src[] =
    "__kernel void vadd(__global const float *a, __global const float *b,\n"
    "                   __global float *c)\n"
    "{ size_t i = get_global_id(0); c[i] = a[i] + b[i] * 2.0f; }\n";

#define N 4096

/* A context, queue and kernel on a sub-device; the sub-device's count. */
static void run_on_sub(struct e2e_plat *p, cl_device_id sub, const float *a, const float *b,
		       float *c)
{
	struct e2e_plat on = *p;
	cl_device_id got[2] = {NULL, NULL};
	cl_program prog;
	cl_kernel k;
	cl_mem ma, mb, mc;
	cl_uint refs = 0;
	size_t g = N, n = 0;
	cl_int e;

	/* Counted by the application: retain, release. */
	E2E_OK(p, clRetainDevice(sub));
	E2E_OK(p, clGetDeviceInfo(sub, CL_DEVICE_REFERENCE_COUNT, sizeof(refs), &refs, NULL));
	ck_assert_uint_eq(refs, 2);
	E2E_OK(p, clReleaseDevice(sub));
	on.device = sub;
	on.context = clCreateContext(NULL, 1, &sub, NULL, NULL, &e);
	E2E_OK(p, e);
	E2E_OK(p, clGetContextInfo(on.context, CL_CONTEXT_DEVICES, sizeof(got), got, &n));
	ck_assert_uint_eq(n, sizeof(cl_device_id));
	/* PoCL 3.1 names another device there (the spec: the context's). */
	if (p == &e2e_native && got[0] != sub)
		fprintf(stderr, "e2e: note: native CL_CONTEXT_DEVICES of a context on a sub-device: "
				"%s, not the sub-device\n",
			got[0] == p->device ? "the root device" : "another device");
	else
		ck_assert_msg(got[0] == sub, "%s: CL_CONTEXT_DEVICES %p, not the sub-device %p",
			      p->role, (void *)got[0], (void *)sub);
	on.queue = clCreateCommandQueueWithProperties(on.context, sub, NULL, &e);
	E2E_OK(p, e);
	prog = e2e_program_build(&on, vadd_src, NULL);
	k = e2e_kernel_create(&on, prog, "vadd");
	ma = e2e_buffer_create(&on, CL_MEM_COPY_HOST_PTR | CL_MEM_READ_ONLY, N * sizeof(float),
			       (void *)a);
	mb = e2e_buffer_create(&on, CL_MEM_COPY_HOST_PTR | CL_MEM_READ_ONLY, N * sizeof(float),
			       (void *)b);
	mc = e2e_buffer_create(&on, CL_MEM_WRITE_ONLY, N * sizeof(float), NULL);
	E2E_OK(p, clSetKernelArg(k, 0, sizeof(ma), &ma));
	E2E_OK(p, clSetKernelArg(k, 1, sizeof(mb), &mb));
	E2E_OK(p, clSetKernelArg(k, 2, sizeof(mc), &mc));
	E2E_OK(p, clEnqueueNDRangeKernel(on.queue, k, 1, NULL, &g, NULL, 0, NULL, NULL));
	E2E_OK(p, clEnqueueReadBuffer(on.queue, mc, CL_TRUE, 0, N * sizeof(float), c, 0, NULL,
				      NULL));
	clReleaseMemObject(ma);
	clReleaseMemObject(mb);
	clReleaseMemObject(mc);
	clReleaseKernel(k);
	clReleaseProgram(prog);
	clReleaseCommandQueue(on.queue);
	/* The context keeps the sub-device after the application lets go. */
	E2E_OK(p, clReleaseDevice(sub));
	E2E_OK(p, clReleaseContext(on.context));
}

START_TEST(compute_on_sub)
{
	const cl_device_partition_property props[] = {CL_DEVICE_PARTITION_BY_COUNTS, 1,
						      CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0};
	float *a = e2e_xmalloc(N * sizeof(float)), *b = e2e_xmalloc(N * sizeof(float));
	float *cv = e2e_xmalloc(N * sizeof(float)), *cn = e2e_xmalloc(N * sizeof(float));
	float *want = e2e_xmalloc(N * sizeof(float));
	cl_device_id vs[MAX_SUB], ns[MAX_SUB];
	cl_uint nv, nn;

	if (!offers(CL_DEVICE_PARTITION_BY_COUNTS)) {
		fprintf(stderr, "e2e_device: the device does not partition by counts\n");
		return;
	}
	e2e_rand_float(a, N, 11);
	e2e_rand_float(b, N, 12);
	for (size_t i = 0; i < N; i++)
		want[i] = a[i] + b[i] * 2.0f;
	nv = partition(&e2e_virtual, props, vs);
	nn = partition(&e2e_native, props, ns);
	ck_assert_uint_eq(nv, 1);
	ck_assert_uint_eq(nn, 1);
	run_on_sub(&e2e_virtual, vs[0], a, b, cv);
	run_on_sub(&e2e_native, ns[0], a, b, cn);
	e2e_assert_floats_near(cn, want, N, 1e-6f, 1e-6f, "native on a sub-device");
	e2e_assert_bytes_eq(cv, cn, N * sizeof(float), "clmux vs native on a sub-device");
	free(a);
	free(b);
	free(cv);
	free(cn);
	free(want);
}
END_TEST

/* A sub-device partitioned again, where the device allows it. */
START_TEST(nested)
{
	const cl_device_partition_property one[] = {
	    CL_DEVICE_PARTITION_BY_COUNTS, 1, CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0};
	cl_device_id vs[MAX_SUB], ns[MAX_SUB], vss[MAX_SUB], nss[MAX_SUB];
	cl_uint nv, nn, nvv = 0, nnn = 0;
	cl_int ev, en;

	if (!offers(CL_DEVICE_PARTITION_BY_COUNTS))
		return;
	nv = partition(&e2e_virtual, one, vs);
	nn = partition(&e2e_native, one, ns);
	ev = clCreateSubDevices(vs[0], one, MAX_SUB, vss, &nvv);
	en = clCreateSubDevices(ns[0], one, MAX_SUB, nss, &nnn);
	ck_assert_msg(ev == en, "nested: virtual %s, native %s", e2e_cl_strerror(ev),
		      e2e_cl_strerror(en));
	if (ev == CL_SUCCESS) {
		cl_device_id parent = NULL;
		ck_assert_uint_eq(nvv, nnn);
		E2E_OK(&e2e_virtual, clGetDeviceInfo(vss[0], CL_DEVICE_PARENT_DEVICE,
						     sizeof(parent), &parent, NULL));
		ck_assert_ptr_eq(parent, vs[0]);
		same_info(vss[0], nss[0], CL_DEVICE_MAX_COMPUTE_UNITS, "nested compute units");
		same_info(vss[0], nss[0], CL_DEVICE_PARTITION_TYPE, "nested partition type");
		/* The parent goes first; its child keeps it. */
		release_all(&e2e_virtual, vs, nv);
		release_all(&e2e_virtual, vss, nvv);
		release_all(&e2e_native, nss, nnn);
	} else {
		release_all(&e2e_virtual, vs, nv);
	}
	release_all(&e2e_native, ns, nn);
}
END_TEST

static Suite *device_suite(void)
{
	Suite *s = suite_create("e2e_device");
	TCase *tc = e2e_tcase("subdevices");

	tcase_add_test(tc, root_info);
	tcase_add_test(tc, equally);
	tcase_add_test(tc, by_counts);
	tcase_add_test(tc, errors);
	tcase_add_test(tc, compute_on_sub);
	tcase_add_test(tc, nested);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return e2e_main(device_suite());
}
