// SPDX-License-Identifier: MIT
// e2e_zcopy.c - CL_MEM_ALLOC_HOST_PTR buffers (in the shared area) match native.
#include "e2e.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * Over unix: and shm: the ICD puts CL_MEM_ALLOC_HOST_PTR buffers in the
 * session's shared area, where the daemon's native buffer keeps them
 * (CL_MEM_USE_HOST_PTR): maps move no data, and blocking transfers of
 * 64 KiB and more copy once, after a native map that waits for their turn
 * in the queue. Every test runs the same work natively and compares.
 */

#define AHP (CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR)

static const char zcopy_src[] = "__kernel void inc(__global uint *x)\n"
				"{\n"
				"	x[get_global_id(0)] += 1;\n"
				"}\n"
				/* Long enough that a transfer which did not wait for it would be
				 * overwritten (or read too early): every element ends +reps. */
				"__kernel void slow_add(__global uint *x, uint reps)\n"
				"{\n"
				"	size_t i = get_global_id(0);\n"
				"	for (uint r = 0; r < reps; r++)\n"
				"		x[i] = x[i] * 3u + 1u;\n"
				"}\n";

struct kern {
	cl_program prog;
	cl_kernel inc, slow;
};

static void kern_init(struct e2e_plat *p, struct kern *k)
{
	k->prog = e2e_program_build(p, zcopy_src, NULL);
	k->inc = e2e_kernel_create(p, k->prog, "inc");
	k->slow = e2e_kernel_create(p, k->prog, "slow_add");
}

static void kern_fini(struct kern *k)
{
	clReleaseKernel(k->slow);
	clReleaseKernel(k->inc);
	clReleaseProgram(k->prog);
}

static void run_inc(struct e2e_plat *p, struct kern *k, cl_mem m, size_t n)
{
	E2E_OK(p, clSetKernelArg(k->inc, 0, sizeof(m), &m));
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k->inc, 1, NULL, &n, NULL, 0, NULL, NULL));
}

static void run_slow(struct e2e_plat *p, struct kern *k, cl_mem m, size_t n, cl_uint reps)
{
	E2E_OK(p, clSetKernelArg(k->slow, 0, sizeof(m), &m));
	E2E_OK(p, clSetKernelArg(k->slow, 1, sizeof(reps), &reps));
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k->slow, 1, NULL, &n, NULL, 0, NULL, NULL));
}

static cl_uint slow_of(cl_uint v, cl_uint reps)
{
	for (cl_uint r = 0; r < reps; r++)
		v = v * 3u + 1u;
	return v;
}

static void *map(struct e2e_plat *p, cl_mem m, cl_bool blocking, cl_map_flags f, size_t off,
		 size_t size, cl_event *ev)
{
	cl_int err;
	void *ptr = clEnqueueMapBuffer(p->queue, m, blocking, f, off, size, 0, NULL, ev, &err);

	ck_assert_msg(ptr && err == CL_SUCCESS, "%s: map: %s", p->role, e2e_cl_strerror(err));
	return ptr;
}

/* Runs `run` on both platforms; each must leave want's bytes in its out. */
static void both_match(void (*run)(struct e2e_plat *, cl_uint *), const cl_uint *want, size_t bytes,
		       const char *what)
{
	cl_uint *nat = e2e_xcalloc(bytes), *virt = e2e_xcalloc(bytes);
	char msg[128];

	run(&e2e_native, nat);
	run(&e2e_virtual, virt);
	snprintf(msg, sizeof(msg), "native %s", what);
	e2e_assert_bytes_eq(nat, want, bytes, msg);
	snprintf(msg, sizeof(msg), "virtual %s", what);
	e2e_assert_bytes_eq(virt, want, bytes, msg);
	free(virt);
	free(nat);
}

/* Both platforms must leave n uints of the seed's data plus `add` each. */
static void seeded_match(void (*run)(struct e2e_plat *, cl_uint *), size_t n, uint64_t seed,
			 cl_uint add, const char *what)
{
	cl_uint *want = e2e_xmalloc(n * sizeof(cl_uint));

	e2e_rand_u32(want, n, seed, 1u << 30);
	for (size_t i = 0; i < n; i++)
		want[i] += add;
	both_match(run, want, n * sizeof(cl_uint), what);
	free(want);
}

/* ---- maps ---- */

#define MAP_N (256u * 1024) /* uints: 1 MiB */

/* Fills through a write-invalidate map, inc, then reads through blocking
 * and non-blocking read maps; out gets the second read. */
static void map_run(struct e2e_plat *p, cl_uint *out)
{
	size_t bytes = MAP_N * sizeof(cl_uint);
	cl_mem m = e2e_buffer_create(p, AHP, bytes, NULL);
	cl_uint *orig = e2e_xmalloc(bytes), *w, *r, *r2;
	struct kern k;
	cl_event ev;
	cl_uint count = 9;

	kern_init(p, &k);
	e2e_rand_u32(orig, MAP_N, 501, 1u << 30);
	w = map(p, m, CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, 0, bytes, NULL);
	memcpy(w, orig, bytes);
	E2E_OK(p, clGetMemObjectInfo(m, CL_MEM_MAP_COUNT, sizeof(count), &count, NULL));
	/* Oclgrind 21.10 counts no mapping (0): clmux is held to the spec. */
	if (p == &e2e_virtual && !e2e_same_platform())
		ck_assert_uint_eq(count, 1);
	else if (count != 1)
		fprintf(stderr,
			"e2e: note: %s CL_MEM_MAP_COUNT %u with one mapping, the spec says 1\n",
			p->role, count);
	E2E_OK(p, clEnqueueUnmapMemObject(p->queue, m, w, 0, NULL, NULL));
	run_inc(p, &k, m, MAP_N);
	r = map(p, m, CL_TRUE, CL_MAP_READ, 0, bytes, NULL);
	for (size_t i = 0; i < MAP_N; i++)
		ck_assert_msg(r[i] == orig[i] + 1, "%s: [%zu] = %u after inc, want %u", p->role, i,
			      r[i], orig[i] + 1);
	E2E_OK(p, clEnqueueUnmapMemObject(p->queue, m, r, 0, NULL, NULL));
	run_inc(p, &k, m, MAP_N);
	/* A non-blocking map of the second half: valid once its event is. */
	r2 = map(p, m, CL_FALSE, CL_MAP_READ, bytes / 2, bytes / 2, &ev);
	E2E_OK(p, clWaitForEvents(1, &ev));
	memcpy(out + MAP_N / 2, r2, bytes / 2);
	E2E_OK(p, clEnqueueUnmapMemObject(p->queue, m, r2, 0, NULL, NULL));
	r = map(p, m, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes / 2, NULL);
	memcpy(out, r, bytes / 2);
	E2E_OK(p, clEnqueueUnmapMemObject(p->queue, m, r, 0, NULL, NULL));
	E2E_OK(p, clFinish(p->queue));
	/* The spec calls the map count stale the moment it is read (PoCL
	 * lowers it just after the unmap's event completes): it must reach
	 * 0, soon. */
	for (int i = 0; i < 2000; i++) {
		E2E_OK(p, clGetMemObjectInfo(m, CL_MEM_MAP_COUNT, sizeof(count), &count, NULL));
		if (!count)
			break;
		usleep(1000);
	}
	ck_assert_msg(count == 0, "%s: map count %u after every unmap", p->role, count);
	clReleaseEvent(ev);
	kern_fini(&k);
	clReleaseMemObject(m);
	free(orig);
}

START_TEST(test_map_unmap)
{
	seeded_match(map_run, MAP_N, 501, 2, "maps");
}
END_TEST

/* ---- reads and writes, small and large, blocking or not ---- */

#define RW_N (2u * 1024 * 1024) /* uints: 8 MiB */

/*
 * Writes a region of each size class both ways, runs inc over all of it,
 * reads it back both ways. out gets the whole buffer.
 */
static void rw_run(struct e2e_plat *p, cl_uint *out)
{
	size_t bytes = RW_N * sizeof(cl_uint);
	cl_uint *src = e2e_xmalloc(bytes);
	cl_mem m = e2e_buffer_create(p, AHP, bytes, NULL);
	struct kern k;
	cl_event ev;

	kern_init(p, &k);
	e2e_rand_u32(src, RW_N, 502, 1u << 30);
	/* Large blocking (the one-copy path) at an odd offset, small
	 * blocking, large and small non-blocking. */
	E2E_OK(p, clEnqueueWriteBuffer(p->queue, m, CL_TRUE, 12, bytes / 2 - 12, (char *)src + 12,
				       0, NULL, NULL));
	E2E_OK(p, clEnqueueWriteBuffer(p->queue, m, CL_TRUE, 0, 12, src, 0, NULL, NULL));
	E2E_OK(p, clEnqueueWriteBuffer(p->queue, m, CL_FALSE, bytes / 2, bytes / 4,
				       (char *)src + bytes / 2, 0, NULL, NULL));
	E2E_OK(p, clEnqueueWriteBuffer(p->queue, m, CL_FALSE, bytes / 4 * 3, bytes / 4,
				       (char *)src + bytes / 4 * 3, 0, NULL, &ev));
	E2E_OK(p, clWaitForEvents(1, &ev));
	clReleaseEvent(ev);
	run_inc(p, &k, m, RW_N);
	E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_TRUE, 0, bytes / 2, out, 0, NULL, NULL));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_TRUE, bytes / 2, 100, (char *)out + bytes / 2,
				      0, NULL, NULL));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_FALSE, bytes / 2 + 100, bytes / 2 - 100,
				      (char *)out + bytes / 2 + 100, 0, NULL, &ev));
	E2E_OK(p, clWaitForEvents(1, &ev));
	clReleaseEvent(ev);
	kern_fini(&k);
	clReleaseMemObject(m);
	free(src);
}

START_TEST(test_read_write)
{
	seeded_match(rw_run, RW_N, 502, 1, "read/write");
}
END_TEST

/* ---- queue order: a transfer happens when its turn comes ---- */

#define ORD_N	 (1024u * 1024) /* uints: 4 MiB */
#define ORD_REPS 200u

/*
 * A slow kernel on the buffer, then a blocking write of all of it: the
 * write must land after the kernel (else the kernel's result survives).
 * Then the slow kernel again and a blocking read: it must see the kernel's
 * result. And a kernel held by a user event, then a non-blocking write.
 */
static void order_run(struct e2e_plat *p, cl_uint *out, cl_uint *out2)
{
	size_t bytes = ORD_N * sizeof(cl_uint);
	cl_uint *src = e2e_xmalloc(bytes);
	cl_mem m = e2e_buffer_create(p, AHP, bytes, NULL);
	struct kern k;
	cl_event gate, ev;
	cl_int err;

	kern_init(p, &k);
	e2e_rand_u32(src, ORD_N, 503, 1u << 30);
	E2E_OK(p, clEnqueueWriteBuffer(p->queue, m, CL_TRUE, 0, bytes, src, 0, NULL, NULL));
	run_slow(p, &k, m, ORD_N, ORD_REPS);
	E2E_OK(p, clEnqueueWriteBuffer(p->queue, m, CL_TRUE, 0, bytes, src, 0, NULL, NULL));
	run_slow(p, &k, m, ORD_N, ORD_REPS);
	E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_TRUE, 0, bytes, out, 0, NULL, NULL));

	gate = clCreateUserEvent(p->context, &err);
	E2E_OK(p, err);
	E2E_OK(p, clSetKernelArg(k.inc, 0, sizeof(m), &m));
	{
		size_t n = ORD_N;
		E2E_OK(p,
		       clEnqueueNDRangeKernel(p->queue, k.inc, 1, NULL, &n, NULL, 1, &gate, NULL));
	}
	E2E_OK(p, clEnqueueWriteBuffer(p->queue, m, CL_FALSE, 0, bytes, src, 0, NULL, &ev));
	E2E_OK(p, clSetUserEventStatus(gate, CL_COMPLETE));
	E2E_OK(p, clWaitForEvents(1, &ev));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_TRUE, 0, bytes, out2, 0, NULL, NULL));
	clReleaseEvent(ev);
	clReleaseEvent(gate);
	kern_fini(&k);
	clReleaseMemObject(m);
	free(src);
}

START_TEST(test_queue_order)
{
	size_t bytes = ORD_N * sizeof(cl_uint);
	cl_uint *src = e2e_xmalloc(bytes), *want = e2e_xmalloc(bytes);
	cl_uint *nat = e2e_xcalloc(bytes), *virt = e2e_xcalloc(bytes);
	cl_uint *nat2 = e2e_xcalloc(bytes), *virt2 = e2e_xcalloc(bytes);

	e2e_rand_u32(src, ORD_N, 503, 1u << 30);
	for (size_t i = 0; i < ORD_N; i++)
		want[i] = slow_of(src[i], ORD_REPS);
	order_run(&e2e_native, nat, nat2);
	order_run(&e2e_virtual, virt, virt2);
	e2e_assert_bytes_eq(nat, want, bytes, "native: write after the kernel");
	e2e_assert_bytes_eq(virt, want, bytes, "virtual: write after the kernel");
	e2e_assert_bytes_eq(nat2, src, bytes, "native: write after the gated kernel");
	e2e_assert_bytes_eq(virt2, src, bytes, "virtual: write after the gated kernel");
	free(virt2);
	free(nat2);
	free(virt);
	free(nat);
	free(want);
	free(src);
}
END_TEST

/* ---- sub-buffers ---- */

#define SUB_N (64u * 1024) /* uints */

/* Where the sub-buffer starts: a quarter in, rounded up to the device's
 * alignment (bytes). */
static size_t sub_origin(struct e2e_plat *p)
{
	cl_uint align = 0;

	E2E_OK(p, clGetDeviceInfo(p->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof(align), &align,
				  NULL));
	align = align / 8 < 4 ? 4 : align / 8;
	return (SUB_N * sizeof(cl_uint) / 4 + align - 1) / align * align;
}

/* A sub-buffer in the middle of an ALLOC_HOST_PTR parent made with
 * contents: mapped, written, inc'd; out gets the parent. */
static void sub_run(struct e2e_plat *p, cl_uint *out)
{
	size_t bytes = SUB_N * sizeof(cl_uint);
	cl_uint *src = e2e_xmalloc(bytes), *w;
	cl_buffer_region r = {sub_origin(p), bytes / 2};
	cl_mem parent, sub;
	struct kern k;
	cl_int err;

	e2e_rand_u32(src, SUB_N, 504, 1u << 30);
	parent = e2e_buffer_create(p, AHP | CL_MEM_COPY_HOST_PTR, bytes, src);
	sub = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
	E2E_OK(p, err);
	kern_init(p, &k);
	w = map(p, sub, CL_TRUE, CL_MAP_WRITE, 0, r.size, NULL);
	for (size_t i = 0; i < r.size / sizeof(cl_uint); i++)
		w[i] = (cl_uint)i * 7u;
	E2E_OK(p, clEnqueueUnmapMemObject(p->queue, sub, w, 0, NULL, NULL));
	run_inc(p, &k, sub, r.size / sizeof(cl_uint));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, parent, CL_TRUE, 0, bytes, out, 0, NULL, NULL));
	kern_fini(&k);
	clReleaseMemObject(sub);
	clReleaseMemObject(parent);
	free(src);
}

START_TEST(test_sub_buffer)
{
	size_t bytes = SUB_N * sizeof(cl_uint), first = sub_origin(&e2e_virtual) / sizeof(cl_uint);
	cl_uint *want = e2e_xmalloc(bytes);

	ck_assert_uint_eq(sub_origin(&e2e_native), sub_origin(&e2e_virtual));
	e2e_rand_u32(want, SUB_N, 504, 1u << 30);
	for (size_t i = 0; i < SUB_N / 2; i++)
		want[first + i] = (cl_uint)i * 7u + 1u;
	both_match(sub_run, want, bytes, "sub-buffer");
	free(want);
}
END_TEST

/* ---- storage reused only once the native buffer is gone ---- */

#define REUSE_N (2u * 1024 * 1024) /* uints: 8 MiB */

/* Buffers released while a slow kernel still writes them, and new ones
 * made with contents at once: each must read back as made. */
static void reuse_run(struct e2e_plat *p, int *bad)
{
	size_t bytes = REUSE_N * sizeof(cl_uint);
	cl_uint *src = e2e_xmalloc(bytes), *got = e2e_xmalloc(bytes);
	struct kern k;

	kern_init(p, &k);
	*bad = -1;
	for (int i = 0; i < 6 && *bad < 0; i++) {
		cl_mem old = e2e_buffer_create(p, AHP, bytes, NULL), m;

		run_slow(p, &k, old, REUSE_N, 50);
		E2E_OK(p, clFlush(p->queue));
		clReleaseMemObject(old);
		e2e_rand_u32(src, REUSE_N, 600 + (uint64_t)i, 1u << 30);
		m = e2e_buffer_create(p, AHP | CL_MEM_COPY_HOST_PTR, bytes, src);
		E2E_OK(p, clFinish(p->queue));
		E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_TRUE, 0, bytes, got, 0, NULL, NULL));
		if (memcmp(got, src, bytes))
			*bad = i;
		clReleaseMemObject(m);
	}
	kern_fini(&k);
	free(got);
	free(src);
}

START_TEST(test_reuse)
{
	int nat, virt;

	reuse_run(&e2e_native, &nat);
	reuse_run(&e2e_virtual, &virt);
	ck_assert_msg(nat < 0, "native: buffer %d overwritten", nat);
	ck_assert_msg(virt < 0, "virtual: buffer %d overwritten by a released one's kernel", virt);
}
END_TEST

/* ---- a client killed mid-transfer ---- */

/*
 * A client process loops over large transfers and maps of an
 * ALLOC_HOST_PTR buffer with kernels in between; it is killed in the
 * middle of that. Then this process uses the same daemon: it must serve a
 * new session (and, at the end, exit cleanly: e2e_main checks).
 */
static void busy_client(int ready)
{
	struct e2e_plat p;
	size_t bytes = 16u << 20;
	char *host = malloc(bytes);
	cl_int err;
	cl_mem m;
	char one = 1;

	if (!host || e2e_plat_init(&p, "virtual", e2e_virtual_match()) < 0)
		_exit(2);
	m = clCreateBuffer(p.context, AHP, bytes, NULL, &err);
	if (err)
		_exit(3);
	memset(host, 7, bytes);
	for (unsigned i = 0;; i++) {
		void *ptr;

		if (clEnqueueWriteBuffer(p.queue, m, CL_TRUE, 0, bytes, host, 0, NULL, NULL) ||
		    clEnqueueWriteBuffer(p.queue, m, CL_FALSE, 0, bytes, host, 0, NULL, NULL) ||
		    clEnqueueReadBuffer(p.queue, m, CL_FALSE, 0, bytes, host, 0, NULL, NULL))
			_exit(4);
		ptr = clEnqueueMapBuffer(p.queue, m, CL_FALSE, CL_MAP_WRITE, 0, bytes, 0, NULL,
					 NULL, &err);
		if (err || clEnqueueUnmapMemObject(p.queue, m, ptr, 0, NULL, NULL))
			_exit(5);
		if (i == 1 && write(ready, &one, 1) != 1)
			_exit(6);
	}
}

START_TEST(test_client_killed)
{
	struct e2e_plat p;
	cl_uint in[4096], out[4096];
	int fds[2], status;
	char c;
	pid_t pid;
	cl_mem m;
	cl_int err;

	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		close(fds[0]);
		busy_client(fds[1]);
	}
	close(fds[1]);
	ck_assert_msg(read(fds[0], &c, 1) == 1, "the client never got going");
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFSIGNALED(status), "client ended by itself (status 0x%x)", status);
	close(fds[0]);

	ck_assert_int_eq(e2e_plat_init(&p, "virtual", e2e_virtual_match()), 0);
	for (int i = 0; i < 4096; i++)
		in[i] = (cl_uint)i * 5u;
	m = clCreateBuffer(p.context, AHP | CL_MEM_COPY_HOST_PTR, sizeof(in), in, &err);
	E2E_OK(&p, err);
	E2E_OK(&p, clEnqueueReadBuffer(p.queue, m, CL_TRUE, 0, sizeof(out), out, 0, NULL, NULL));
	ck_assert_mem_eq(in, out, sizeof(in));
	clReleaseMemObject(m);
	e2e_plat_fini(&p);
}
END_TEST

/*
 * A non-blocking write of 4 MiB (a map, the copy on the map's callback, an
 * unmap held by a user event until then), a kernel, clFinish. On a driver
 * that runs the map inside the wait for the kernel and calls the map's
 * callback only when that wait returns (Oclgrind), the wait spun on the
 * unmap's user event: the daemon must report the map's completion by its
 * status (run by make check-oclgrind).
 */
#define LATER_N (1024u * 1024) /* uints: 4 MiB */

static void later_write_run(struct e2e_plat *p, cl_uint *out)
{
	size_t bytes = LATER_N * sizeof(cl_uint);
	cl_mem m = e2e_buffer_create(p, AHP, bytes, NULL);
	cl_uint *src = e2e_xmalloc(bytes);
	struct kern k;

	kern_init(p, &k);
	e2e_rand_u32(src, LATER_N, 907, 1u << 30);
	E2E_OK(p, clEnqueueWriteBuffer(p->queue, m, CL_FALSE, 0, bytes, src, 0, NULL, NULL));
	run_inc(p, &k, m, 64);
	E2E_OK(p, clFinish(p->queue));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_TRUE, 0, bytes, out, 0, NULL, NULL));
	for (size_t i = 64; i < LATER_N; i++)
		out[i]++; /* the kernel ran on the first 64 */
	free(src);
	kern_fini(&k);
	clReleaseMemObject(m);
}

START_TEST(test_later_write)
{
	seeded_match(later_write_run, LATER_N, 907, 1, "non-blocking write, kernel, clFinish");
}
END_TEST

/*
 * A non-blocking read of 4 MiB (its copy on the map's callback, as the
 * write's) after a kernel, then at once a non-blocking write of zeros over
 * the buffer: the read sees the kernel's result and not the zeros, its
 * event is a read's and completes with the data in place.
 */
static void later_read_run(struct e2e_plat *p, cl_uint *out)
{
	size_t bytes = LATER_N * sizeof(cl_uint);
	cl_mem m = e2e_buffer_create(p, AHP, bytes, NULL);
	cl_uint *src = e2e_xmalloc(bytes), *zero = calloc(1, bytes);
	cl_command_type type = 0;
	cl_event ev;
	struct kern k;

	ck_assert_ptr_nonnull(zero);
	kern_init(p, &k);
	e2e_rand_u32(src, LATER_N, 911, 1u << 30);
	E2E_OK(p, clEnqueueWriteBuffer(p->queue, m, CL_TRUE, 0, bytes, src, 0, NULL, NULL));
	run_inc(p, &k, m, 64);
	E2E_OK(p, clEnqueueReadBuffer(p->queue, m, CL_FALSE, 0, bytes, out, 0, NULL, &ev));
	E2E_OK(p, clEnqueueWriteBuffer(p->queue, m, CL_FALSE, 0, bytes, zero, 0, NULL, NULL));
	E2E_OK(p, clWaitForEvents(1, &ev));
	E2E_OK(p, clGetEventInfo(ev, CL_EVENT_COMMAND_TYPE, sizeof(type), &type, NULL));
	ck_assert_uint_eq(type, CL_COMMAND_READ_BUFFER);
	E2E_OK(p, clFinish(p->queue));
	for (size_t i = 64; i < LATER_N; i++)
		out[i]++; /* the kernel ran on the first 64 */
	clReleaseEvent(ev);
	free(zero);
	free(src);
	kern_fini(&k);
	clReleaseMemObject(m);
}

START_TEST(test_later_read)
{
	seeded_match(later_read_run, LATER_N, 911, 1, "kernel, non-blocking read, write over it");
}
END_TEST

static Suite *zcopy_suite(void)
{
	Suite *s = suite_create("zcopy");
	TCase *tc = e2e_tcase("alloc_host_ptr");
	TCase *tk = tcase_create("killed");

	tcase_add_test(tc, test_map_unmap);
	tcase_add_test(tc, test_read_write);
	tcase_add_test(tc, test_queue_order);
	tcase_add_test(tc, test_sub_buffer);
	tcase_add_test(tc, test_reuse);
	suite_add_tcase(s, tc);
	tc = e2e_tcase("later_write");
	tcase_add_test(tc, test_later_write);
	tcase_add_test(tc, test_later_read);
	suite_add_tcase(s, tc);
	/* No fixture: the client is forked before this process touches OpenCL. */
	tcase_set_timeout(tk, E2E_TIMEOUT_S);
	tcase_add_test(tk, test_client_killed);
	suite_add_tcase(s, tk);
	return s;
}

int main(void)
{
	return e2e_main(zcopy_suite());
}
