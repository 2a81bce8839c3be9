// SPDX-License-Identifier: MIT
// bench: the same OpenCL microbenchmarks on a native and the clmux platform, side by side.
#define _GNU_SOURCE
#ifndef CL_USE_DEPRECATED_OPENCL_1_2_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#endif
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>
#include <CL/cl_ext.h> /* CL_PLATFORM_NOT_FOUND_KHR */

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024u * 1024u)
#define BW_BYTES (64u * MIB)
#define VEC_N (16u * MIB) /* 16M floats, 64 MiB per array */
#define RATE_BATCH 20000
#define ROUNDS 4 /* turns each platform takes per benchmark */

/* LOWER: times, reported as the median sample; HIGHER: rates, reported as the best one. */
enum better { LOWER, HIGHER };

/* One platform under test: everything created once and shared by every benchmark. */
struct plat {
	const char *role; /* "native" or "virtual" */
	cl_platform_id id;
	cl_device_id dev;
	cl_context ctx;
	cl_command_queue q;
	cl_program prog;
	cl_kernel empty, vadd;
	char name[256], devname[256], driver[128];
};

struct opts {
	const char *native, *virt, *only;
	const char *transport, *clmuxd;
	int reps; /* 0: each benchmark's own default */
	int json, quick;
};

struct bench {
	const char *name, *unit;
	enum better better;
	int reps, quick_reps; /* timed samples per platform */
	void (*run)(struct plat *p, int n, double *out); /* fills out[0..n-1] */
	int selected;
	double val[2]; /* [0] native, [1] virtual */
};

/* For error messages: which benchmark on which platform is running now. */
static const char *cur_bench = "setup";
static const char *cur_role = "-";

static const char kernels_src[] =
	"__kernel void empty(void) {}\n"
	"__kernel void vadd(__global const float *a, __global const float *b,\n"
	"                   __global float *c, uint n)\n"
	"{\n"
	"	size_t i = get_global_id(0);\n"
	"	if (i < n)\n"
	"		c[i] = a[i] + b[i];\n"
	"}\n";

/* Compiled by `build`: a few kernels with loops, local memory, barriers and atomics. */
static const char build_src[] =
	"__kernel void saxpy(float a, __global const float *x, __global float *y)\n"
	"{ size_t i = get_global_id(0); y[i] = fma(a, x[i], y[i]); }\n"
	"__kernel void reduce(__global const float *in, __global float *out,\n"
	"                     __local float *tmp, uint n)\n"
	"{\n"
	"	size_t g = get_global_id(0), l = get_local_id(0);\n"
	"	tmp[l] = g < n ? in[g] : 0.0f;\n"
	"	barrier(CLK_LOCAL_MEM_FENCE);\n"
	"	for (size_t s = get_local_size(0) / 2; s > 0; s >>= 1) {\n"
	"		if (l < s)\n"
	"			tmp[l] += tmp[l + s];\n"
	"		barrier(CLK_LOCAL_MEM_FENCE);\n"
	"	}\n"
	"	if (l == 0)\n"
	"		out[get_group_id(0)] = tmp[0];\n"
	"}\n"
	"__kernel void histogram(__global const uchar *data, uint n,\n"
	"                        __global uint *bins, __local uint *lbins)\n"
	"{\n"
	"	for (size_t i = get_local_id(0); i < 256; i += get_local_size(0))\n"
	"		lbins[i] = 0;\n"
	"	barrier(CLK_LOCAL_MEM_FENCE);\n"
	"	for (size_t i = get_global_id(0); i < n; i += get_global_size(0))\n"
	"		atomic_inc(&lbins[data[i]]);\n"
	"	barrier(CLK_LOCAL_MEM_FENCE);\n"
	"	for (size_t i = get_local_id(0); i < 256; i += get_local_size(0))\n"
	"		atomic_add(&bins[i], lbins[i]);\n"
	"}\n";

static const char *cl_err_name(cl_int err)
{
	switch (err) {
#define E(x) case x: return #x
		E(CL_DEVICE_NOT_FOUND);
		E(CL_DEVICE_NOT_AVAILABLE);
		E(CL_COMPILER_NOT_AVAILABLE);
		E(CL_MEM_OBJECT_ALLOCATION_FAILURE);
		E(CL_OUT_OF_RESOURCES);
		E(CL_OUT_OF_HOST_MEMORY);
		E(CL_BUILD_PROGRAM_FAILURE);
		E(CL_INVALID_VALUE);
		E(CL_INVALID_PLATFORM);
		E(CL_INVALID_DEVICE);
		E(CL_INVALID_CONTEXT);
		E(CL_INVALID_COMMAND_QUEUE);
		E(CL_INVALID_MEM_OBJECT);
		E(CL_INVALID_BINARY);
		E(CL_INVALID_BUILD_OPTIONS);
		E(CL_INVALID_PROGRAM);
		E(CL_INVALID_PROGRAM_EXECUTABLE);
		E(CL_INVALID_KERNEL_NAME);
		E(CL_INVALID_KERNEL);
		E(CL_INVALID_ARG_INDEX);
		E(CL_INVALID_ARG_VALUE);
		E(CL_INVALID_ARG_SIZE);
		E(CL_INVALID_KERNEL_ARGS);
		E(CL_INVALID_WORK_DIMENSION);
		E(CL_INVALID_WORK_GROUP_SIZE);
		E(CL_INVALID_GLOBAL_WORK_SIZE);
		E(CL_INVALID_EVENT_WAIT_LIST);
		E(CL_INVALID_OPERATION);
		E(CL_INVALID_BUFFER_SIZE);
		E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
#undef E
	default:
		return "unknown error";
	}
}

static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "bench: %s on %s: ", cur_bench, cur_role);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* A benchmark has no way to recover from a failed call, so every check ends the run. */
static void check(cl_int err, const char *call)
{
	if (err != CL_SUCCESS) /* name the function, not the whole expression */
		fail("%.*s failed: %d (%s)", (int)strcspn(call, "("), call, err, cl_err_name(err));
}

#define CHECK(call) check((call), #call)

static void *xmalloc(size_t n)
{
	void *p = malloc(n);

	if (!p)
		fail("out of host memory (%zu bytes)", n);
	/* Touch every page now so that first-touch faults never land in a timed
	 * region. Not with zeros: the compiler makes malloc + memset(0) a
	 * calloc, whose fresh pages are all the kernel's one zero page, and a
	 * transfer from those reads from cache. */
	memset(p, 0x5a, n);
	return p;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double best_max(const double *v, int n)
{
	double m = v[0];

	for (int i = 1; i < n; i++)
		m = v[i] > m ? v[i] : m;
	return m;
}

static cl_mem make_buffer_flags(struct plat *p, cl_mem_flags flags, size_t size)
{
	cl_int err;
	cl_mem m = clCreateBuffer(p->ctx, CL_MEM_READ_WRITE | flags, size, NULL, &err);

	check(err, "clCreateBuffer");
	return m;
}

static cl_mem make_buffer(struct plat *p, size_t size)
{
	cl_int err;
	cl_mem m = clCreateBuffer(p->ctx, CL_MEM_READ_WRITE, size, NULL, &err);

	check(err, "clCreateBuffer");
	return m;
}

static cl_kernel make_kernel(struct plat *p, const char *name)
{
	cl_int err;
	cl_kernel k = clCreateKernel(p->prog, name, &err);

	check(err, "clCreateKernel");
	return k;
}

static void launch_empty(struct plat *p)
{
	size_t global = 1;

	CHECK(clEnqueueNDRangeKernel(p->q, p->empty, 1, NULL, &global, NULL, 0, NULL, NULL));
}

/* write64: blocking 64-byte write; latency in microseconds. */
static void bench_write64(struct plat *p, int n, double *out)
{
	char src[64] = { 1 };
	cl_mem m = make_buffer(p, sizeof(src));

	for (int i = -n / 10 - 10; i < n; i++) { /* negative i: warm-up */
		double t0 = now_s();

		CHECK(clEnqueueWriteBuffer(p->q, m, CL_TRUE, 0, sizeof(src), src, 0, NULL, NULL));
		if (i >= 0)
			out[i] = (now_s() - t0) * 1e6;
	}
	CHECK(clReleaseMemObject(m));
}

/* launch_finish: one empty work-item, then clFinish; microseconds. */
static void bench_launch_finish(struct plat *p, int n, double *out)
{
	for (int i = -n / 10 - 10; i < n; i++) {
		double t0 = now_s();

		launch_empty(p);
		CHECK(clFinish(p->q));
		if (i >= 0)
			out[i] = (now_s() - t0) * 1e6;
	}
}

/* alloc_use: a fresh 16 KiB buffer (no host data), a blocking 64-byte read
 * of it, its release; microseconds. clmux zeroes the buffer on the device
 * first (docs/architecture.md): its cost shows here. */
static void bench_alloc_use(struct plat *p, int n, double *out)
{
	char dst[64];

	for (int i = -n / 10 - 10; i < n; i++) {
		double t0 = now_s();
		cl_mem m = make_buffer(p, 16 << 10);

		CHECK(clEnqueueReadBuffer(p->q, m, CL_TRUE, 0, sizeof(dst), dst, 0, NULL, NULL));
		CHECK(clReleaseMemObject(m));
		if (i >= 0)
			out[i] = (now_s() - t0) * 1e6;
	}
}

/* alloc_write: a fresh 64 MiB buffer written whole (blocking), then
 * released; milliseconds. The zeroing's worst case: every byte is touched
 * twice. */
static void bench_alloc_write(struct plat *p, int n, double *out)
{
	char *host = xmalloc(BW_BYTES);

	memset(host, 1, BW_BYTES);
	for (int rep = -1; rep < n; rep++) {
		double t0 = now_s();
		cl_mem m = make_buffer(p, BW_BYTES);

		CHECK(clEnqueueWriteBuffer(p->q, m, CL_TRUE, 0, BW_BYTES, host, 0, NULL, NULL));
		CHECK(clReleaseMemObject(m));
		if (rep >= 0)
			out[rep] = (now_s() - t0) * 1e3;
	}
	free(host);
}

/* enqueue_rate: a batch of non-blocking empty kernels and one clFinish; kernels/s. */
static void bench_enqueue_rate(struct plat *p, int n, double *out)
{
	for (int i = 0; i < 1000; i++)
		launch_empty(p);
	CHECK(clFinish(p->q));
	for (int rep = 0; rep < n; rep++) {
		double t0 = now_s();

		for (int i = 0; i < RATE_BATCH; i++)
			launch_empty(p);
		CHECK(clFinish(p->q));
		out[rep] = RATE_BATCH / (now_s() - t0);
	}
}

/* The transfer size of write_bw, read_bw and their _ahp rows (--bytes). */
static size_t bw_bytes = BW_BYTES;

/* write_bw / read_bw: blocking 64 MiB (--bytes) transfer from or to touched host memory; GB/s.
 * The _ahp rows do the same with a CL_MEM_ALLOC_HOST_PTR buffer. A read
 * reads a buffer written once: a driver's never-written memory can be the
 * kernel's shared zero page (PoCL's is), which reads from cache. */
static void transfer_bw(struct plat *p, int n, double *out, int write, cl_mem_flags flags)
{
	char *host = xmalloc(bw_bytes);
	cl_mem m = make_buffer_flags(p, flags, bw_bytes);

	if (!write) {
		memset(host, 0x5a, bw_bytes);
		CHECK(clEnqueueWriteBuffer(p->q, m, CL_TRUE, 0, bw_bytes, host, 0, NULL, NULL));
	}

	for (int rep = -1; rep < n; rep++) { /* rep -1 lets the device back the buffer */
		double t0 = now_s();

		if (write)
			CHECK(clEnqueueWriteBuffer(p->q, m, CL_TRUE, 0, bw_bytes, host, 0, NULL, NULL));
		else
			CHECK(clEnqueueReadBuffer(p->q, m, CL_TRUE, 0, bw_bytes, host, 0, NULL, NULL));
		if (rep >= 0)
			out[rep] = bw_bytes / (now_s() - t0) * 1e-9;
	}
	CHECK(clReleaseMemObject(m));
	free(host);
}

static void bench_write_bw(struct plat *p, int n, double *out)
{
	transfer_bw(p, n, out, 1, 0);
}

static void bench_read_bw(struct plat *p, int n, double *out)
{
	transfer_bw(p, n, out, 0, 0);
}

static void bench_write_bw_ahp(struct plat *p, int n, double *out)
{
	transfer_bw(p, n, out, 1, CL_MEM_ALLOC_HOST_PTR);
}

static void bench_read_bw_ahp(struct plat *p, int n, double *out)
{
	transfer_bw(p, n, out, 0, CL_MEM_ALLOC_HOST_PTR);
}

/* map_bw_ahp: a CL_MEM_ALLOC_HOST_PTR buffer filled through a blocking
 * write-invalidate map of all 64 MiB, unmapped, then clFinish; GB/s. */
static void bench_map_bw_ahp(struct plat *p, int n, double *out)
{
	char *host = xmalloc(BW_BYTES);
	cl_mem m = make_buffer_flags(p, CL_MEM_ALLOC_HOST_PTR, BW_BYTES);

	for (int rep = -1; rep < n; rep++) {
		double t0 = now_s();
		cl_int err;
		void *map = clEnqueueMapBuffer(p->q, m, CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, 0,
					       BW_BYTES, 0, NULL, NULL, &err);

		check(err, "clEnqueueMapBuffer");
		memcpy(map, host, BW_BYTES);
		CHECK(clEnqueueUnmapMemObject(p->q, m, map, 0, NULL, NULL));
		CHECK(clFinish(p->q));
		if (rep >= 0)
			out[rep] = BW_BYTES / (now_s() - t0) * 1e-9;
	}
	CHECK(clReleaseMemObject(m));
	free(host);
}

/* clpeak_bw: clpeak's transfer buffer (half a 1 GiB device allocation:
 * 512 MiB, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR), created right after
 * a buffer as large was released (clpeak's global-bandwidth test's), a
 * non-blocking write and a non-blocking read of all of it, clFinish; GB/s
 * moved. */
#define CLPEAK_BYTES (512ul << 20)

static void bench_clpeak_bw(struct plat *p, int n, double *out)
{
	const cl_mem_flags flags = CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR;
	char *host = xmalloc(CLPEAK_BYTES);
	cl_mem m = make_buffer_flags(p, flags, CLPEAK_BYTES);

	memset(host, 0x5a, CLPEAK_BYTES);
	CHECK(clEnqueueWriteBuffer(p->q, m, CL_TRUE, 0, CLPEAK_BYTES, host, 0, NULL, NULL));
	CHECK(clFinish(p->q));
	CHECK(clReleaseMemObject(m));
	m = make_buffer_flags(p, flags, CLPEAK_BYTES);
	for (int rep = -1; rep < n; rep++) {
		double t0 = now_s();

		CHECK(clEnqueueWriteBuffer(p->q, m, CL_FALSE, 0, CLPEAK_BYTES, host, 0, NULL, NULL));
		CHECK(clEnqueueReadBuffer(p->q, m, CL_FALSE, 0, CLPEAK_BYTES, host, 0, NULL, NULL));
		CHECK(clFinish(p->q));
		if (rep >= 0)
			out[rep] = 2 * CLPEAK_BYTES / (now_s() - t0) * 1e-9;
	}
	CHECK(clReleaseMemObject(m));
	free(host);
}

/* vecadd: write a, write b, kernel, read c, from host arrays to a verified host result; ms. */
static void bench_vecadd(struct plat *p, int n, double *out)
{
	const size_t bytes = (size_t)VEC_N * sizeof(float);
	float *a = xmalloc(bytes), *b = xmalloc(bytes), *c = xmalloc(bytes);
	cl_mem ma = make_buffer(p, bytes), mb = make_buffer(p, bytes), mc = make_buffer(p, bytes);
	size_t global = VEC_N;
	cl_uint len = VEC_N;

	for (size_t i = 0; i < VEC_N; i++) {
		a[i] = (float)(i % 65536) * 0.5f;
		b[i] = (float)(i / 65536) - 100.0f;
	}
	CHECK(clSetKernelArg(p->vadd, 0, sizeof(ma), &ma));
	CHECK(clSetKernelArg(p->vadd, 1, sizeof(mb), &mb));
	CHECK(clSetKernelArg(p->vadd, 2, sizeof(mc), &mc));
	CHECK(clSetKernelArg(p->vadd, 3, sizeof(len), &len));
	for (int rep = -1; rep < n; rep++) { /* rep -1 warms the kernel and the buffers */
		double t0;

		memset(c, 0xff, bytes); /* NaN everywhere: a skipped read cannot pass */
		t0 = now_s();
		CHECK(clEnqueueWriteBuffer(p->q, ma, CL_FALSE, 0, bytes, a, 0, NULL, NULL));
		CHECK(clEnqueueWriteBuffer(p->q, mb, CL_FALSE, 0, bytes, b, 0, NULL, NULL));
		CHECK(clEnqueueNDRangeKernel(p->q, p->vadd, 1, NULL, &global, NULL, 0, NULL, NULL));
		CHECK(clEnqueueReadBuffer(p->q, mc, CL_TRUE, 0, bytes, c, 0, NULL, NULL));
		if (rep >= 0)
			out[rep] = (now_s() - t0) * 1e3;
		/* a and b are exact in float and so is their sum: compare bit for bit. */
		for (size_t i = 0; i < VEC_N; i++)
			if (c[i] != a[i] + b[i])
				fail("WRONG RESULT: c[%zu] = %g, expected %g", i, c[i], a[i] + b[i]);
	}
	CHECK(clReleaseMemObject(mc));
	CHECK(clReleaseMemObject(mb));
	CHECK(clReleaseMemObject(ma));
	free(c);
	free(b);
	free(a);
}

static void print_build_log(struct plat *p, cl_program prog)
{
	char log[8192] = "";

	clGetProgramBuildInfo(prog, p->dev, CL_PROGRAM_BUILD_LOG, sizeof(log) - 1, log, NULL);
	fprintf(stderr, "build log:\n%s\n", log);
}

static void build_program(struct plat *p, cl_program prog)
{
	cl_int err = clBuildProgram(prog, 1, &p->dev, NULL, NULL, NULL);

	if (err == CL_BUILD_PROGRAM_FAILURE)
		print_build_log(p, prog);
	check(err, "clBuildProgram");
}

/*
 * build: clBuildProgram of build_src, a fresh program each rep; ms.
 * A unique first line per rep keeps compilers' binary caches (PoCL keeps one
 * on disk) from turning later reps into cache look-ups: this times a compile.
 */
static void bench_build(struct plat *p, int n, double *out)
{
	static unsigned salt;

	for (int rep = -1; rep < n; rep++) { /* the first build ever costs 5x: warm up */
		char line[64];
		const char *src[2] = { line, build_src };
		cl_program prog;
		cl_int err;
		double t0;

		snprintf(line, sizeof(line), "#define BENCH_SALT %ld_%u\n", (long)getpid(), salt++);
		prog = clCreateProgramWithSource(p->ctx, 2, src, NULL, &err);
		check(err, "clCreateProgramWithSource");
		t0 = now_s();
		build_program(p, prog);
		if (rep >= 0)
			out[rep] = (now_s() - t0) * 1e3;
		CHECK(clReleaseProgram(prog));
	}
}

/*
 * enqueue_N / cmdbuf_N: N empty kernels and a clFinish; microseconds.
 * enqueue_N enqueues the N launches; cmdbuf_N replays a command buffer
 * (cl_khr_command_buffer) that recorded them: one message through clmux.
 * NAN where the platform offers no command buffers.
 */
static void kernels_enqueue(struct plat *p, int n, double *out, int kernels)
{
	for (int rep = -n / 10 - 2; rep < n; rep++) {
		double t0 = now_s();

		for (int i = 0; i < kernels; i++)
			launch_empty(p);
		CHECK(clFinish(p->q));
		if (rep >= 0)
			out[rep] = (now_s() - t0) * 1e6;
	}
}

static void kernels_replay(struct plat *p, int n, double *out, int kernels)
{
	clCreateCommandBufferKHR_fn create = (clCreateCommandBufferKHR_fn)
	    clGetExtensionFunctionAddressForPlatform(p->id, "clCreateCommandBufferKHR");
	clCommandNDRangeKernelKHR_fn record = (clCommandNDRangeKernelKHR_fn)
	    clGetExtensionFunctionAddressForPlatform(p->id, "clCommandNDRangeKernelKHR");
	clFinalizeCommandBufferKHR_fn finalize = (clFinalizeCommandBufferKHR_fn)
	    clGetExtensionFunctionAddressForPlatform(p->id, "clFinalizeCommandBufferKHR");
	clEnqueueCommandBufferKHR_fn replay = (clEnqueueCommandBufferKHR_fn)
	    clGetExtensionFunctionAddressForPlatform(p->id, "clEnqueueCommandBufferKHR");
	clReleaseCommandBufferKHR_fn release = (clReleaseCommandBufferKHR_fn)
	    clGetExtensionFunctionAddressForPlatform(p->id, "clReleaseCommandBufferKHR");
	cl_command_buffer_khr cb;
	size_t global = 1;
	cl_int err;

	if (!create || !record || !finalize || !replay || !release) {
		for (int rep = 0; rep < n; rep++)
			out[rep] = NAN;
		return;
	}
	cb = create(1, &p->q, NULL, &err);
	check(err, "clCreateCommandBufferKHR");
	for (int i = 0; i < kernels; i++)
		CHECK(record(cb, NULL, NULL, p->empty, 1, NULL, &global, NULL, 0, NULL, NULL,
			     NULL));
	CHECK(finalize(cb));
	for (int rep = -n / 10 - 2; rep < n; rep++) {
		double t0 = now_s();

		CHECK(replay(0, NULL, cb, 0, NULL, NULL));
		CHECK(clFinish(p->q));
		if (rep >= 0)
			out[rep] = (now_s() - t0) * 1e6;
	}
	CHECK(release(cb));
}

static void bench_enqueue_1(struct plat *p, int n, double *out)
{
	kernels_enqueue(p, n, out, 1);
}

static void bench_cmdbuf_1(struct plat *p, int n, double *out)
{
	kernels_replay(p, n, out, 1);
}

static void bench_enqueue_16(struct plat *p, int n, double *out)
{
	kernels_enqueue(p, n, out, 16);
}

static void bench_cmdbuf_16(struct plat *p, int n, double *out)
{
	kernels_replay(p, n, out, 16);
}

static void bench_enqueue_256(struct plat *p, int n, double *out)
{
	kernels_enqueue(p, n, out, 256);
}

static void bench_cmdbuf_256(struct plat *p, int n, double *out)
{
	kernels_replay(p, n, out, 256);
}

static struct bench benches[] = {
	{ "write64", "us", LOWER, 2000, 200, bench_write64, 0, { 0, 0 } },
	{ "launch_finish", "us", LOWER, 2000, 200, bench_launch_finish, 0, { 0, 0 } },
	{ "enqueue_rate", "kernels/s", HIGHER, 6, 2, bench_enqueue_rate, 0, { 0, 0 } },
	{ "write_bw", "GB/s", HIGHER, 10, 3, bench_write_bw, 0, { 0, 0 } },
	{ "read_bw", "GB/s", HIGHER, 10, 3, bench_read_bw, 0, { 0, 0 } },
	{ "write_bw_ahp", "GB/s", HIGHER, 10, 3, bench_write_bw_ahp, 0, { 0, 0 } },
	{ "read_bw_ahp", "GB/s", HIGHER, 10, 3, bench_read_bw_ahp, 0, { 0, 0 } },
	{ "map_bw_ahp", "GB/s", HIGHER, 10, 3, bench_map_bw_ahp, 0, { 0, 0 } },
	{ "clpeak_bw", "GB/s", HIGHER, 6, 2, bench_clpeak_bw, 0, { 0, 0 } },
	{ "vecadd", "ms", LOWER, 6, 2, bench_vecadd, 0, { 0, 0 } },
	{ "build", "ms", LOWER, 6, 2, bench_build, 0, { 0, 0 } },
	{ "alloc_use", "us", LOWER, 1000, 100, bench_alloc_use, 0, { 0, 0 } },
	{ "alloc_write", "ms", LOWER, 10, 3, bench_alloc_write, 0, { 0, 0 } },
	{ "enqueue_1", "us", LOWER, 1000, 100, bench_enqueue_1, 0, { 0, 0 } },
	{ "cmdbuf_1", "us", LOWER, 1000, 100, bench_cmdbuf_1, 0, { 0, 0 } },
	{ "enqueue_16", "us", LOWER, 400, 40, bench_enqueue_16, 0, { 0, 0 } },
	{ "cmdbuf_16", "us", LOWER, 400, 40, bench_cmdbuf_16, 0, { 0, 0 } },
	{ "enqueue_256", "us", LOWER, 60, 10, bench_enqueue_256, 0, { 0, 0 } },
	{ "cmdbuf_256", "us", LOWER, 60, 10, bench_cmdbuf_256, 0, { 0, 0 } },
};

#define NBENCH (sizeof(benches) / sizeof(benches[0]))

/* First platform whose name contains want (case-insensitive), or, with want NULL, lacks avoid. */
static int find_platform(struct plat *p, const char *want, const char *avoid)
{
	cl_platform_id ids[32];
	cl_uint n = 0;
	cl_int err = clGetPlatformIDs(32, ids, &n);

	if (err == CL_PLATFORM_NOT_FOUND_KHR)
		n = 0;
	else
		check(err, "clGetPlatformIDs");
	for (cl_uint i = 0; i < n && i < 32; i++) {
		CHECK(clGetPlatformInfo(ids[i], CL_PLATFORM_NAME, sizeof(p->name), p->name, NULL));
		if (want ? strcasestr(p->name, want) != NULL : strcasestr(p->name, avoid) == NULL) {
			p->id = ids[i];
			return 0;
		}
	}
	return -ENOENT;
}

static void plat_setup(struct plat *p)
{
	const char *src = kernels_src;
	cl_int err;

	cur_role = p->role;
	CHECK(clGetDeviceIDs(p->id, CL_DEVICE_TYPE_ALL, 1, &p->dev, NULL));
	CHECK(clGetDeviceInfo(p->dev, CL_DEVICE_NAME, sizeof(p->devname), p->devname, NULL));
	CHECK(clGetDeviceInfo(p->dev, CL_DRIVER_VERSION, sizeof(p->driver), p->driver, NULL));
	p->ctx = clCreateContext(NULL, 1, &p->dev, NULL, NULL, &err);
	check(err, "clCreateContext");
	p->q = clCreateCommandQueue(p->ctx, p->dev, 0, &err);
	check(err, "clCreateCommandQueue");
	p->prog = clCreateProgramWithSource(p->ctx, 1, &src, NULL, &err);
	check(err, "clCreateProgramWithSource");
	build_program(p, p->prog);
	p->empty = make_kernel(p, "empty");
	p->vadd = make_kernel(p, "vadd");
}

static void plat_teardown(struct plat *p)
{
	cur_role = p->role;
	CHECK(clReleaseKernel(p->vadd));
	CHECK(clReleaseKernel(p->empty));
	CHECK(clReleaseProgram(p->prog));
	CHECK(clReleaseCommandQueue(p->q));
	CHECK(clReleaseContext(p->ctx));
}

/*
 * The platforms take turns, ROUNDS times each, with the first turn alternating:
 * measured back to back, PoCL against itself showed a steady 20-30% bias by
 * order (drift, and work the other context left behind), which this spreads.
 */
static void run_bench(struct bench *b, struct plat *pl, int reps)
{
	double *s[2] = { xmalloc((size_t)reps * sizeof(double)),
			 xmalloc((size_t)reps * sizeof(double)) };
	int chunk = (reps + ROUNDS - 1) / ROUNDS;

	cur_bench = b->name;
	for (int done = 0, round = 0; done < reps; done += chunk, round++) {
		int n = reps - done < chunk ? reps - done : chunk;

		for (int j = 0; j < 2; j++) {
			struct plat *p = &pl[(round + j) % 2];

			cur_role = p->role;
			b->run(p, n, s[p == &pl[1]] + done);
		}
	}
	for (int k = 0; k < 2; k++) {
		b->val[k] = b->better == HIGHER ? best_max(s[k], reps) : median(s[k], reps);
		free(s[k]);
	}
}

/* ratio > 1 always means the virtual platform did better. */
static double bench_ratio(const struct bench *b)
{
	return b->better == HIGHER ? b->val[1] / b->val[0] : b->val[0] / b->val[1];
}

static void print_num(double v)
{
	printf(v >= 1000 ? " %12.0f" : v >= 10 ? " %12.1f" : " %12.2f", v);
}

static void print_table(const struct plat *pl)
{
	printf("native:  %s / %s\nvirtual: %s / %s\nserver:  %s\n", pl[0].name, pl[0].devname,
	       pl[1].name, pl[1].devname, getenv("CLMUX_SERVER") ? getenv("CLMUX_SERVER") : "-");
	printf("ratio > 1: virtual better; delta: virtual - native, in the row's unit\n\n");
	printf("%-14s %-10s %12s %12s %8s %12s\n", "benchmark", "unit", "native", "virtual", "ratio",
	       "delta");
	for (size_t i = 0; i < NBENCH; i++) {
		const struct bench *b = &benches[i];

		if (!b->selected)
			continue;
		printf("%-14s %-10s", b->name, b->unit);
		print_num(b->val[0]);
		print_num(b->val[1]);
		printf(" %7.2fx", bench_ratio(b));
		if (b->better == LOWER)
			printf(" %+12.2f\n", b->val[1] - b->val[0]);
		else
			printf(" %12s\n", "-");
	}
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", (unsigned char)*s);
		else
			putchar(*s);
	}
	putchar('"');
}

/* A number, or null where a platform could not run the row (NAN: no
 * command buffers). */
static void json_num(double v)
{
	if (isfinite(v))
		printf("%.6g", v);
	else
		printf("null");
}

static void print_json(const struct plat *pl)
{
	printf("{");
	for (int i = 0; i < 2; i++) {
		printf("\"%s\":{\"platform\":", pl[i].role);
		json_str(pl[i].name);
		printf(",\"device\":");
		json_str(pl[i].devname);
		printf(",\"driver\":");
		json_str(pl[i].driver);
		printf("},");
	}
	printf("\"bw_bytes\":%zu,\"results\":{", bw_bytes);
	for (size_t i = 0, first = 1; i < NBENCH; i++) {
		const struct bench *b = &benches[i];

		if (!b->selected)
			continue;
		printf("%s\"%s\":{\"unit\":\"%s\",\"better\":\"%s\",\"native\":", first ? "" : ",",
		       b->name, b->unit, b->better == LOWER ? "lower" : "higher");
		json_num(b->val[0]);
		printf(",\"virtual\":");
		json_num(b->val[1]);
		if (isfinite(bench_ratio(b)))
			printf(",\"ratio\":%.4g", bench_ratio(b));
		else
			printf(",\"ratio\":null");
		if (b->better == LOWER && isfinite(b->val[1] - b->val[0]))
			printf(",\"delta\":%.6g}", b->val[1] - b->val[0]);
		else
			printf(",\"delta\":null}");
		first = 0;
	}
	printf("}}\n");
}

/*
 * The transports the ICD can be pointed at. Each is an address scheme the
 * daemon's unix: socket serves (shm upgrades it to shared-memory rings), or
 * a loopback TCP listener of its own with a token (and, for tls, a
 * certificate made for the run; for the -lz4 ones the guest asks for
 * compressed payloads).
 */
static const struct transport {
	const char *name;   /* what --transport takes */
	const char *server; /* CLMUX_SERVER scheme */
	int tcp;	    /* 0: the unix socket; 1: tcp with a token; 2: and TLS */
	const char *compress; /* CLMUX_COMPRESS, or NULL */
} transports[] = {
	{ "unix", "unix", 0, NULL },	 { "shm", "shm", 0, NULL },
	{ "tcp", "tcp", 1, NULL },	 { "tls", "tls", 2, NULL },
	{ "tcp-lz4", "tcp", 1, "lz4" }, { "tls-lz4", "tls", 2, "lz4" },
};

static pid_t daemon_pid;
static char daemon_dir[64];

/* At exit: the daemon itself ends with this process (PR_SET_PDEATHSIG),
 * after the ICD's connections have closed, so it is not seen to vanish. */
static void daemon_cleanup(void)
{
	static const char *const files[] = { "clmuxd.sock", "tokens", "cert.pem", "key.pem" };
	char path[96];

	if (daemon_dir[0]) {
		for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
			snprintf(path, sizeof(path), "%s/%s", daemon_dir, files[i]);
			unlink(path);
		}
		rmdir(daemon_dir);
		daemon_dir[0] = 0;
	}
}

/* A loopback TCP port that is free now (the daemon binds it right after). */
static int free_port(void)
{
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(in);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	if (fd >= 0 && !bind(fd, (struct sockaddr *)&in, len) &&
	    !getsockname(fd, (struct sockaddr *)&in, &len))
		port = ntohs(in.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* For a tcp transport: a token file (and CLMUX_TOKEN), for tls a
 * self-signed certificate for 127.0.0.1 that is also the guest's CA; the
 * listener's options in opts. 0, or -1 with a message. */
static int tcp_setup(const struct transport *t, char *opts, size_t len)
{
	char token[33], path[96], cmd[512];
	FILE *f;
	int n;

	srand((unsigned)(time(NULL) ^ getpid()));
	for (int i = 0; i < 32; i++)
		token[i] = "0123456789abcdef"[rand() & 15];
	token[32] = 0;
	snprintf(path, sizeof(path), "%s/tokens", daemon_dir);
	f = fopen(path, "w");
	if (!f || fchmod(fileno(f), 0600) || fprintf(f, "bench %s\n", token) < 0 || fclose(f)) {
		fprintf(stderr, "bench: cannot write %s\n", path);
		return -1;
	}
	setenv("CLMUX_TOKEN", token, 1);
	n = snprintf(opts, len, ",tokens=%s", path);
	if (t->tcp < 2)
		return 0;
	snprintf(cmd, sizeof(cmd),
		 "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 "
		 "-subj /CN=clmux-bench -addext subjectAltName=IP:127.0.0.1 -keyout %s/key.pem "
		 "-out %s/cert.pem 2>/dev/null",
		 daemon_dir, daemon_dir);
	if (system(cmd)) {
		fprintf(stderr, "bench: openssl could not make a certificate for tls\n");
		return -1;
	}
	snprintf(path, sizeof(path), "%s/cert.pem", daemon_dir);
	setenv("CLMUX_TLS_CA", path, 1);
	snprintf(opts + n, len - (size_t)n, ",tls=%s/cert.pem:%s/key.pem", daemon_dir, daemon_dir);
	return 0;
}

/* Starts clmuxd on a private socket (and a loopback port) and points the
 * ICD at it through the transport t. 0, or -1 with a message. */
static int daemon_start(const char *bin, const struct transport *t)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	char listen_unix[128], listen_tcp[512] = "", server[128], opts[400];
	int port = 0;

	snprintf(daemon_dir, sizeof(daemon_dir), "/tmp/clmux-bench-XXXXXX");
	if (!mkdtemp(daemon_dir)) {
		perror("bench: mkdtemp");
		daemon_dir[0] = 0;
		return -1;
	}
	atexit(daemon_cleanup);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/clmuxd.sock", daemon_dir);
	snprintf(listen_unix, sizeof(listen_unix), "unix:%s", sun.sun_path);
	snprintf(server, sizeof(server), "%s:%s", t->server, sun.sun_path);
	if (t->tcp) {
		port = free_port();
		if (port < 0 || tcp_setup(t, opts, sizeof(opts))) {
			fprintf(stderr, "bench: cannot set up %s\n", t->name);
			return -1;
		}
		snprintf(listen_tcp, sizeof(listen_tcp), "tcp:127.0.0.1:%d%s", port, opts);
		snprintf(server, sizeof(server), "%s:127.0.0.1:%d", t->server, port);
	}
	if (t->compress)
		setenv("CLMUX_COMPRESS", t->compress, 1);
	daemon_pid = fork();
	if (daemon_pid < 0) {
		perror("bench: fork");
		return -1;
	}
	if (daemon_pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		setenv("CLMUX_LOG", "warn", 0); /* the table, not the daemon's chatter */
		/* tcp first: once the unix socket answers, both listen. */
		if (port)
			execl(bin, bin, "--admin", "none", "--listen", listen_tcp, "--listen",
			      listen_unix, (char *)NULL);
		else
			execl(bin, bin, "--admin", "none", "--listen", listen_unix, (char *)NULL);
		fprintf(stderr, "bench: exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int ok = fd >= 0 && connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0;

		if (fd >= 0)
			close(fd);
		if (ok)
			return setenv("CLMUX_SERVER", server, 1);
		if (waitpid(daemon_pid, NULL, WNOHANG) == daemon_pid) {
			fprintf(stderr, "bench: %s exited before listening\n", bin);
			daemon_pid = 0;
			return -1;
		}
		usleep(10000);
	}
	fprintf(stderr, "bench: %s did not listen on %s\n", bin, sun.sun_path);
	return -1;
}

/* Points the ICD at the daemon over the transport asked for: a daemon of our
 * own (--clmuxd, $CLMUXD), else $CLMUX_SERVER's socket with that scheme. */
static int transport_setup(const struct opts *o)
{
	const struct transport *t = NULL;
	const char *server = getenv("CLMUX_SERVER"), *colon;
	char buf[512];

	for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++)
		if (!strcmp(transports[i].name, o->transport ? o->transport : "unix"))
			t = &transports[i];
	if (!t) {
		fprintf(stderr, "bench: unknown transport \"%s\"\n", o->transport);
		return -1;
	}
	if (o->clmuxd && *o->clmuxd)
		return daemon_start(o->clmuxd, t);
	if (!o->transport || !server || !(colon = strchr(server, ':')))
		return 0;
	snprintf(buf, sizeof(buf), "%s%s", t->server, colon);
	if (t->compress)
		setenv("CLMUX_COMPRESS", t->compress, 1);
	return setenv("CLMUX_SERVER", buf, 1);
}

/*
 * --memcpy: the ceiling every copy here runs into. One thread copies
 * 64 MiB between buffers it touched first, then two threads do the same at
 * once, each with its own pair (how a pipelined transfer uses both cores).
 * Best of 10 copies each, GB/s.
 */
struct mc {
	pthread_barrier_t *go;
	double gbs;
};

static void *mc_run(void *arg)
{
	struct mc *m = arg;
	char *src = xmalloc(BW_BYTES), *dst = xmalloc(BW_BYTES);

	memset(src, 1, BW_BYTES);
	memset(dst, 2, BW_BYTES);
	if (m->go)
		pthread_barrier_wait(m->go);
	m->gbs = 0;
	for (int i = 0; i < 10; i++) {
		double t0 = now_s(), r;

		memcpy(dst, src, BW_BYTES);
		__asm__ volatile("" : : "r"(dst) : "memory"); /* the copy is used */
		r = BW_BYTES / (now_s() - t0) * 1e-9;
		m->gbs = r > m->gbs ? r : m->gbs;
	}
	free(dst);
	free(src);
	return NULL;
}

static int memcpy_ceiling(void)
{
	pthread_barrier_t go;
	struct mc one = { NULL, 0 }, two[2] = { { &go, 0 }, { &go, 0 } };
	pthread_t t[2];

	mc_run(&one);
	pthread_barrier_init(&go, NULL, 2);
	for (int i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, mc_run, &two[i]))
			return 1;
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&go);
	printf("memcpy 64 MiB: 1 thread %.2f GB/s; 2 threads at once %.2f + %.2f = %.2f GB/s\n",
	       one.gbs, two[0].gbs, two[1].gbs, two[0].gbs + two[1].gbs);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench [--transport T] [--clmuxd PATH] [--native NAME] [--virtual NAME]\n"
		"             [--reps N] [--only LIST] [--bytes N] [--json] [--quick] | --memcpy\n"
		"  --transport T   how the ICD reaches clmuxd:");
	for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++)
		fprintf(f, " %s", transports[i].name);
	fprintf(f, " (default unix)\n"
		   "  --clmuxd PATH   start this clmuxd on a private socket for the run (default:\n"
		   "                  $CLMUXD; without either, $CLMUX_SERVER's daemon is used,\n"
		   "                  its scheme replaced by --transport)\n");
	fprintf(f,
		"  --native NAME   platform name substring (default: first not containing \"clmux\")\n"
		"  --virtual NAME  platform name substring (default: \"clmux\")\n"
		"  --reps N        timed repetitions for every selected benchmark\n"
		"  --only LIST     comma-separated subset of:");
	for (size_t i = 0; i < NBENCH; i++)
		fprintf(f, " %s", benches[i].name);
	fprintf(f, "\n  --bytes N       transfer size of the *_bw and *_bw_ahp rows (default 64 MiB)\n"
		   "  --json          one JSON object instead of the table\n"
		   "  --quick         fewer repetitions, for CI smoke runs\n"
		   "  --memcpy        only this machine's memcpy bandwidth, 1 and 2 threads\n");
}

static int select_benches(const char *only)
{
	char *list, *save = NULL;

	for (size_t i = 0; i < NBENCH; i++)
		benches[i].selected = only == NULL;
	if (!only)
		return 0;
	list = strdup(only);
	if (!list)
		return -ENOMEM;
	for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t i = 0;

		while (i < NBENCH && strcmp(benches[i].name, tok) != 0)
			i++;
		if (i == NBENCH) {
			fprintf(stderr, "bench: unknown benchmark \"%s\"\n", tok);
			free(list);
			return -EINVAL;
		}
		benches[i].selected = 1;
	}
	free(list);
	return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "native", required_argument, NULL, 'n' }, { "virtual", required_argument, NULL, 'v' },
		{ "reps", required_argument, NULL, 'r' },   { "only", required_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },         { "quick", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },         { "transport", required_argument, NULL, 't' },
		{ "clmuxd", required_argument, NULL, 'd' }, { "memcpy", no_argument, NULL, 'm' },
		{ "bytes", required_argument, NULL, 'b' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	long n;
	int c;

	*o = (struct opts){ .virt = "clmux", .clmuxd = getenv("CLMUXD") };
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'n': o->native = optarg; break;
		case 'v': o->virt = optarg; break;
		case 'o': o->only = optarg; break;
		case 'j': o->json = 1; break;
		case 't': o->transport = optarg; break;
		case 'd': o->clmuxd = optarg; break;
		case 'q': o->quick = 1; break;
		case 'm': exit(memcpy_ceiling());
		case 'r':
			n = strtol(optarg, &end, 10);
			if (*end || end == optarg || n < 1 || n > 1000000) {
				fprintf(stderr, "bench: --reps wants a number from 1 to 1000000\n");
				return -EINVAL;
			}
			o->reps = (int)n;
			break;
		case 'b':
			n = strtol(optarg, &end, 10);
			if (*end || end == optarg || n < 1 || n > (1l << 32)) {
				fprintf(stderr, "bench: --bytes wants a number from 1 to 4 GiB\n");
				return -EINVAL;
			}
			bw_bytes = (size_t)n;
			break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -EINVAL;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return -EINVAL;
	}
	return select_benches(o->only);
}

int main(int argc, char **argv)
{
	struct plat pl[2] = { { .role = "native" }, { .role = "virtual" } };
	struct opts o;

	if (parse_opts(argc, argv, &o) < 0)
		return 2;
	/* Before the first OpenCL call: the ICD reads CLMUX_SERVER when the
	 * loader opens it. */
	if (transport_setup(&o) < 0)
		return 2;
	if (find_platform(&pl[0], o.native, "clmux") < 0) {
		fprintf(stderr, "bench: no native OpenCL platform %s%s%s found\n",
			o.native ? "matching \"" : "(one not named clmux)", o.native ? o.native : "",
			o.native ? "\"" : "");
		return 2;
	}
	if (find_platform(&pl[1], o.virt, NULL) < 0) {
		fprintf(stderr,
			"bench: no virtual OpenCL platform matching \"%s\" found "
			"(is the clmux ICD registered and clmuxd running? --virtual NAME picks another)\n",
			o.virt);
		return 2;
	}
	for (int i = 0; i < 2; i++)
		plat_setup(&pl[i]);
	for (size_t i = 0; i < NBENCH; i++) {
		int reps = o.reps ? o.reps : o.quick ? benches[i].quick_reps : benches[i].reps;

		if (benches[i].selected)
			run_bench(&benches[i], pl, reps);
	}
	cur_bench = "teardown";
	for (int i = 0; i < 2; i++)
		plat_teardown(&pl[i]);
	if (o.json)
		print_json(pl);
	else
		print_table(pl);
	return 0;
}
