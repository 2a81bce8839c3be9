// SPDX-License-Identifier: MIT
// Answers driver questions for clmux's GPU paths: transfer bandwidth by kind of host memory, per-call costs, where kernel printf goes.
//
// usage: clmux-gpu-probe [PLATFORM_SUBSTRING [MIB [lat|stall|queues|fault]]]   (default NVIDIA, 64)
//
// With `lat`, only the per-call costs: run on the clmux platform (CLMUX_SERVER
// set) they are the same calls through the daemon, and "clFinish on an idle
// queue" is then a round trip that the daemon answers with no wait.
//
// Not a benchmark of clmux: it talks to the native driver only, so that
// docs/performance.md can say what the driver does with each kind of host
// memory (pageable malloc, an ALLOC_HOST_PTR buffer's mapped pointer, memfd
// MAP_SHARED pages as the shared area is, such pages under a USE_HOST_PTR
// buffer) and what a status poll, a wait and a callback cost.
#define _GNU_SOURCE
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REPS  5
#define CHUNK (4u << 20)

static cl_context ctx;
static cl_command_queue q;
static cl_device_id dev;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, cl_int e)
{
	fprintf(stderr, "gpu-probe: %s: %d\n", what, e);
	exit(1);
}

#define CK(x)                          \
	do {                           \
		cl_int e_ = (x);       \
		if (e_)                \
			die(#x, e_);   \
	} while (0)

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_u64);
	return v[n / 2];
}

static void report_bw(const char *name, size_t size, uint64_t *ns)
{
	uint64_t m = median(ns, REPS);

	printf("%-44s %7.2f GB/s  (best %.2f)\n", name, (double)size / (double)m,
	       (double)size / (double)ns[0]);
}

/* ---- host memory ---- */

static void *memfd_pages(size_t size)
{
	int fd = memfd_create("probe", MFD_CLOEXEC);
	void *p;

	if (fd < 0 || ftruncate(fd, (off_t)size))
		die("memfd", -1);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		die("mmap", -1);
	memset(p, 1, size);
	return p;
}

struct cp {
	void *dst;
	const void *src;
	size_t n;
};

static void *cp_run(void *arg)
{
	struct cp *c = arg;

	memcpy(c->dst, c->src, c->n);
	return NULL;
}

static void mt_memcpy(void *dst, const void *src, size_t n, int threads)
{
	pthread_t t[16];
	struct cp c[16] = {{0}};
	size_t per = n / (size_t)threads;

	for (int i = 0; i < threads; i++) {
		c[i] = (struct cp){(char *)dst + i * per, (const char *)src + i * per,
				   i == threads - 1 ? n - i * per : per};
		if (i)
			pthread_create(&t[i], NULL, cp_run, &c[i]);
	}
	cp_run(&c[0]);
	for (int i = 1; i < threads; i++)
		pthread_join(t[i], NULL);
}

static void probe_memcpy(size_t size, void *a, void *b, const char *what)
{
	int th[] = {1, 2, 4, 8};
	char name[80];

	for (unsigned k = 0; k < sizeof(th) / sizeof(th[0]); k++) {
		uint64_t ns[REPS];

		for (int r = 0; r < REPS; r++) {
			uint64_t t = now_ns();
			mt_memcpy(a, b, size, th[k]);
			ns[r] = now_ns() - t;
		}
		snprintf(name, sizeof(name), "memcpy %s, %d thread(s)", what, th[k]);
		report_bw(name, size, ns);
	}
}

/* ---- transfers ---- */

static void bw_write(const char *name, cl_mem m, const void *src, size_t size, int chunked)
{
	uint64_t ns[REPS];

	for (int r = 0; r < REPS; r++) {
		uint64_t t = now_ns();
		if (!chunked) {
			CK(clEnqueueWriteBuffer(q, m, CL_TRUE, 0, size, src, 0, NULL, NULL));
		} else {
			for (size_t o = 0; o < size; o += CHUNK)
				CK(clEnqueueWriteBuffer(q, m, CL_FALSE, o, CHUNK, (const char *)src + o, 0,
							NULL, NULL));
			CK(clFinish(q));
		}
		ns[r] = now_ns() - t;
	}
	report_bw(name, size, ns);
}

static void bw_read(const char *name, cl_mem m, void *dst, size_t size, int chunked)
{
	uint64_t ns[REPS];

	for (int r = 0; r < REPS; r++) {
		uint64_t t = now_ns();
		if (!chunked) {
			CK(clEnqueueReadBuffer(q, m, CL_TRUE, 0, size, dst, 0, NULL, NULL));
		} else {
			for (size_t o = 0; o < size; o += CHUNK)
				CK(clEnqueueReadBuffer(q, m, CL_FALSE, o, CHUNK, (char *)dst + o, 0, NULL,
						       NULL));
			CK(clFinish(q));
		}
		ns[r] = now_ns() - t;
	}
	report_bw(name, size, ns);
}

static void bw_copy(const char *name, cl_mem dst, cl_mem src, size_t size)
{
	uint64_t ns[REPS];

	for (int r = 0; r < REPS; r++) {
		uint64_t t = now_ns();
		CK(clEnqueueCopyBuffer(q, src, dst, 0, 0, size, 0, NULL, NULL));
		CK(clFinish(q));
		ns[r] = now_ns() - t;
	}
	report_bw(name, size, ns);
}

/*
 * The path a daemon could take: each chunk copied (threads threads) from
 * the shared pages into one of `slots` pinned staging chunks, then a
 * non-blocking write from there; a slot is reused once its write is done.
 */
static void bw_staged_write(const char *name, cl_mem m, const char *src, char *pinned, size_t size,
			    int slots, int threads)
{
	uint64_t ns[REPS];
	cl_event ev[64] = {0};

	for (int r = 0; r < REPS; r++) {
		uint64_t t = now_ns();
		for (size_t o = 0, k = 0; o < size; o += CHUNK, k++) {
			int s = (int)(k % (size_t)slots);
			if (ev[s]) {
				CK(clWaitForEvents(1, &ev[s]));
				clReleaseEvent(ev[s]);
			}
			mt_memcpy(pinned + (size_t)s * CHUNK, src + o, CHUNK, threads);
			CK(clEnqueueWriteBuffer(q, m, CL_FALSE, o, CHUNK, pinned + (size_t)s * CHUNK, 0,
						NULL, &ev[s]));
			clFlush(q);
		}
		CK(clFinish(q));
		for (int s = 0; s < slots; s++)
			if (ev[s]) {
				clReleaseEvent(ev[s]);
				ev[s] = NULL;
			}
		ns[r] = now_ns() - t;
	}
	report_bw(name, size, ns);
}

/* The read the same way: DMA into a pinned slot, then copied out. */
static void bw_staged_read(const char *name, cl_mem m, char *dst, char *pinned, size_t size,
			   int slots, int threads)
{
	uint64_t ns[REPS];
	size_t nch = size / CHUNK;
	cl_event ev[64] = {0};

	for (int r = 0; r < REPS; r++) {
		uint64_t t = now_ns();
		size_t issued = 0;
		for (size_t k = 0; k < nch; k++) {
			/* Keep `slots` reads in flight. */
			while (issued < nch && issued < k + (size_t)slots) {
				int s = (int)(issued % (size_t)slots);
				CK(clEnqueueReadBuffer(q, m, CL_FALSE, issued * CHUNK, CHUNK,
						       pinned + (size_t)s * CHUNK, 0, NULL, &ev[s]));
				issued++;
			}
			clFlush(q);
			int s = (int)(k % (size_t)slots);
			CK(clWaitForEvents(1, &ev[s]));
			clReleaseEvent(ev[s]);
			ev[s] = NULL;
			mt_memcpy(dst + k * CHUNK, pinned + (size_t)s * CHUNK, CHUNK, threads);
		}
		ns[r] = now_ns() - t;
	}
	report_bw(name, size, ns);
}

static void probe_bandwidth(size_t size)
{
	cl_int e;
	cl_mem dbuf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, size, NULL, &e);
	cl_mem ahp = clCreateBuffer(ctx, CL_MEM_ALLOC_HOST_PTR, size, NULL, &e);
	char *heap = malloc(size), *heap2 = malloc(size), *shared = memfd_pages(size);
	char *pinned;
	uint64_t t;

	if (e || !heap || !heap2)
		die("buffers", e);
	memset(heap, 2, size);
	memset(heap2, 3, size);
	pinned = clEnqueueMapBuffer(q, ahp, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, size, 0, NULL,
				    NULL, &e);
	if (e)
		die("map ALLOC_HOST_PTR", e);
	memset(pinned, 4, size);
	printf("== bandwidth, %zu MiB\n", size >> 20);
	probe_memcpy(size, heap2, heap, "malloc -> malloc");
	probe_memcpy(size, shared, heap, "malloc -> memfd");
	probe_memcpy(size, pinned, shared, "memfd -> pinned");
	/* Warm the driver's paths. */
	CK(clEnqueueWriteBuffer(q, dbuf, CL_TRUE, 0, size, heap, 0, NULL, NULL));
	CK(clEnqueueReadBuffer(q, dbuf, CL_TRUE, 0, size, heap, 0, NULL, NULL));

	bw_write("write (a) malloc, blocking", dbuf, heap, size, 0);
	bw_write("write (a) malloc, 4 MiB chunks", dbuf, heap, size, 1);
	bw_write("write (b) ALLOC_HOST_PTR map, blocking", dbuf, pinned, size, 0);
	bw_write("write (b) ALLOC_HOST_PTR map, chunks", dbuf, pinned, size, 1);
	bw_write("write (c) memfd shared, blocking", dbuf, shared, size, 0);
	bw_write("write (c) memfd shared, chunks", dbuf, shared, size, 1);
	bw_read("read (a) malloc, blocking", dbuf, heap, size, 0);
	bw_read("read (a) malloc, 4 MiB chunks", dbuf, heap, size, 1);
	bw_read("read (b) ALLOC_HOST_PTR map, blocking", dbuf, pinned, size, 0);
	bw_read("read (b) ALLOC_HOST_PTR map, chunks", dbuf, pinned, size, 1);
	bw_read("read (c) memfd shared, blocking", dbuf, shared, size, 0);
	bw_read("read (c) memfd shared, chunks", dbuf, shared, size, 1);

	/* (d) the shared pages under a USE_HOST_PTR buffer: pinned? */
	t = now_ns();
	cl_mem uhp = clCreateBuffer(ctx, CL_MEM_USE_HOST_PTR, size, shared, &e);
	if (e)
		die("USE_HOST_PTR", e);
	printf("USE_HOST_PTR create over memfd: %.1f us\n", (now_ns() - t) / 1e3);
	bw_copy("write (d) CopyBuffer USE_HOST_PTR(memfd)->dev", dbuf, uhp, size);
	bw_copy("read (d) CopyBuffer dev->USE_HOST_PTR(memfd)", uhp, dbuf, size);
	/* Coherence: host writes straight into the pages, then a copy. */
	memset(shared, 0x5a, size);
	CK(clEnqueueCopyBuffer(q, uhp, dbuf, 0, 0, size, 0, NULL, NULL));
	CK(clEnqueueReadBuffer(q, dbuf, CL_TRUE, 0, size, heap, 0, NULL, NULL));
	printf("USE_HOST_PTR coherent without map (host write -> copy): %s\n",
	       heap[0] == 0x5a && heap[size - 1] == 0x5a ? "yes" : "NO");
	CK(clEnqueueWriteBuffer(q, dbuf, CL_TRUE, 0, size, heap2, 0, NULL, NULL));
	CK(clEnqueueCopyBuffer(q, dbuf, uhp, 0, 0, size, 0, NULL, NULL));
	CK(clFinish(q));
	printf("USE_HOST_PTR coherent without map (copy -> host read): %s\n",
	       shared[0] == 3 && shared[size - 1] == 3 ? "yes" : "NO");
	{
		void *mp = clEnqueueMapBuffer(q, uhp, CL_TRUE, CL_MAP_READ, 0, size, 0, NULL, NULL,
					      &e);
		printf("USE_HOST_PTR map returns the host pointer: %s\n",
		       mp == shared ? "yes" : "no (a copy)");
		if (!e)
			clEnqueueUnmapMemObject(q, uhp, mp, 0, NULL, NULL);
		clFinish(q);
	}
	/* Chunked write from USE_HOST_PTR: a sub-range copy per chunk. */
	{
		uint64_t ns[REPS];
		for (int r = 0; r < REPS; r++) {
			t = now_ns();
			for (size_t o = 0; o < size; o += CHUNK)
				CK(clEnqueueCopyBuffer(q, uhp, dbuf, o, o, CHUNK, 0, NULL, NULL));
			CK(clFinish(q));
			ns[r] = now_ns() - t;
		}
		report_bw("write (d) CopyBuffer chunks", size, ns);
	}
	clReleaseMemObject(uhp);

	/* Pinned staging chunks, as a daemon could use them. */
	for (int th = 1; th <= 4; th *= 2) {
		char name[80];
		snprintf(name, sizeof(name), "write (e) memfd->pinned 2 slots, %d thr", th);
		bw_staged_write(name, dbuf, shared, pinned, size, 2, th);
		snprintf(name, sizeof(name), "write (e) memfd->pinned 4 slots, %d thr", th);
		bw_staged_write(name, dbuf, shared, pinned, size, 4, th);
		snprintf(name, sizeof(name), "read (e) pinned->memfd 2 slots, %d thr", th);
		bw_staged_read(name, dbuf, shared, pinned, size, 2, th);
		snprintf(name, sizeof(name), "read (e) pinned->memfd 4 slots, %d thr", th);
		bw_staged_read(name, dbuf, shared, pinned, size, 4, th);
	}
	CK(clEnqueueUnmapMemObject(q, ahp, pinned, 0, NULL, NULL));
	clFinish(q);
	clReleaseMemObject(ahp);
	clReleaseMemObject(dbuf);
	munmap(shared, size);
	free(heap);
	free(heap2);
}

/* ---- per-call costs ---- */

#define N_LAT 2000

static atomic_int cb_fired;
static atomic_uint_fast64_t cb_at;

static void CL_CALLBACK on_done(cl_event e, cl_int s, void *arg)
{
	atomic_store(&cb_at, now_ns());
	atomic_store(&cb_fired, 1);
}

static void lat_report(const char *name, uint64_t *v, int n)
{
	uint64_t m = median(v, n);

	printf("%-44s median %7.1f us  p10 %7.1f  p90 %7.1f\n", name, m / 1e3, v[n / 10] / 1e3,
	       v[n * 9 / 10] / 1e3);
}

/* One launch of an empty kernel, ended one way; its time (ns), and the
 * status polls it took in *polls. */
enum { L_FLUSH = 1, L_CALLBACK = 2, L_YIELD = 4 };
enum { END_FINISH, END_WAIT, END_SPIN, END_CALLBACK };

static cl_kernel empty_k;

static uint64_t launch_once(int flags, int end, uint64_t *polls)
{
	size_t g = 1;
	cl_event ev;
	cl_int st = CL_QUEUED;
	uint64_t t = now_ns(), n = 0, d;

	atomic_store(&cb_fired, 0);
	CK(clEnqueueNDRangeKernel(q, empty_k, 1, NULL, &g, NULL, 0, NULL, &ev));
	if (flags & L_CALLBACK || end == END_CALLBACK)
		CK(clSetEventCallback(ev, CL_COMPLETE, on_done, NULL));
	if (flags & L_FLUSH)
		CK(clFlush(q));
	switch (end) {
	case END_FINISH:
		CK(clFinish(q));
		break;
	case END_WAIT:
		CK(clWaitForEvents(1, &ev));
		break;
	case END_SPIN:
		/* Without a flush, give up after 2 ms: n counts those. */
		while (st > CL_COMPLETE && (flags & L_FLUSH || now_ns() - t < 2000000)) {
			CK(clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st,
					  NULL));
			n++;
			if (flags & L_YIELD)
				sched_yield();
		}
		if (st > CL_COMPLETE)
			n = UINT64_MAX;
		break;
	case END_CALLBACK:
		while (!atomic_load(&cb_fired))
			;
		break;
	}
	d = (end == END_CALLBACK ? atomic_load(&cb_at) : now_ns()) - t;
	if (polls)
		*polls = n;
	clFinish(q); /* the callbacks of this launch are in */
	clReleaseEvent(ev);
	return d;
}

static void lat_launch(const char *name, int flags, int end, int runs)
{
	static uint64_t v[N_LAT], polls[N_LAT];
	int stuck = 0;

	for (int i = 0; i < runs; i++) {
		v[i] = launch_once(flags, end, &polls[i]);
		stuck += polls[i] == UINT64_MAX;
	}
	lat_report(name, v, runs);
	if (end == END_SPIN)
		printf("%-44s median %7llu%s\n", "  polls", (unsigned long long)median(polls, runs),
		       stuck ? " (some never completed: see below)" : "");
	if (stuck || (end == END_SPIN && !(flags & L_FLUSH)))
		printf("%-44s %d of %d not done in 2 ms\n", "  without a flush", stuck, runs);
}

/* A non-blocking 64 B write (read: a read) of b, spun on until done. */
static void lat_nonblocking(const char *name, cl_mem b, int read)
{
	static uint64_t v[N_LAT];
	char small[64] = {1};

	for (int i = 0; i < N_LAT; i++) {
		cl_event ev;
		cl_int st = CL_QUEUED;
		uint64_t t = now_ns();
		if (read)
			CK(clEnqueueReadBuffer(q, b, CL_FALSE, 0, 64, small, 0, NULL, &ev));
		else
			CK(clEnqueueWriteBuffer(q, b, CL_FALSE, 0, 64, small, 0, NULL, &ev));
		while (st > CL_COMPLETE)
			CK(clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, NULL));
		v[i] = now_ns() - t;
		clReleaseEvent(ev);
	}
	lat_report(name, v, N_LAT);
}

/* Launches of the empty kernel with an event, a clFinish every 64; with
 * `callback`, one set on each, its cost in cb[]. */
static void lat_enqueue(const char *name, int callback, uint64_t *cb)
{
	static uint64_t v[N_LAT];
	size_t g = 1;

	for (int i = 0; i < N_LAT; i++) {
		cl_event ev;
		uint64_t t = now_ns(), t2;
		CK(clEnqueueNDRangeKernel(q, empty_k, 1, NULL, &g, NULL, 0, NULL, &ev));
		t2 = now_ns();
		v[i] = t2 - t;
		if (callback) {
			CK(clSetEventCallback(ev, CL_COMPLETE, on_done, NULL));
			cb[i] = now_ns() - t2;
		}
		clReleaseEvent(ev);
		if (i % 64 == 63)
			clFinish(q);
	}
	clFinish(q);
	lat_report(name, v, N_LAT);
}

static void probe_latency(void)
{
	static const char *src = "__kernel void empty(__global int *p) { }\n";
	static uint64_t v[N_LAT], cb[N_LAT];
	cl_int e;
	cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &e);
	cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &e);
	size_t g = 1;
	char small[64] = {1};

	CK(clBuildProgram(p, 1, &dev, "", NULL, NULL));
	empty_k = clCreateKernel(p, "empty", &e);
	CK(e);
	CK(clSetKernelArg(empty_k, 0, sizeof(b), &b));
	printf("== per-call costs (%d runs each)\n", N_LAT);
	for (int i = 0; i < 200; i++)
		CK(clEnqueueNDRangeKernel(q, empty_k, 1, NULL, &g, NULL, 0, NULL, NULL));
	CK(clFinish(q));

	for (int i = 0; i < N_LAT; i++) {
		uint64_t t = now_ns();
		CK(clEnqueueWriteBuffer(q, b, CL_TRUE, 0, 64, small, 0, NULL, NULL));
		v[i] = now_ns() - t;
	}
	lat_report("blocking 64 B write", v, N_LAT);
	for (int i = 0; i < N_LAT; i++) {
		uint64_t t = now_ns();
		CK(clEnqueueReadBuffer(q, b, CL_TRUE, 0, 64, small, 0, NULL, NULL));
		v[i] = now_ns() - t;
	}
	lat_report("blocking 64 B read", v, N_LAT);
	for (int i = 0; i < N_LAT; i++) {
		uint64_t t = now_ns();
		CK(clFinish(q));
		v[i] = now_ns() - t;
	}
	lat_report("clFinish on an idle queue", v, N_LAT);
	lat_launch("launch + clFinish", 0, END_FINISH, N_LAT);
	lat_launch("launch + flush + clWaitForEvents", L_FLUSH, END_WAIT, N_LAT);
	lat_launch("launch + flush + spin clGetEventInfo", L_FLUSH, END_SPIN, N_LAT);
	lat_launch("launch + flush + poll with sched_yield", L_FLUSH | L_YIELD, END_SPIN, N_LAT);
	lat_launch("launch, no flush, spin clGetEventInfo", 0, END_SPIN, 200);
	lat_launch("launch + flush + completion callback", L_FLUSH, END_CALLBACK, N_LAT);
	/* What a callback on the launch (the daemon's scheduler sets one per
	 * queue and loop turn) costs a waiter that polls or finishes. */
	lat_launch("launch + callback set + spin clGetEventInfo", L_CALLBACK, END_SPIN, N_LAT);
	lat_launch("launch + callback set + clFinish", L_CALLBACK, END_FINISH, N_LAT);
	lat_nonblocking("64 B write non-blocking + spin status", b, 0);
	lat_nonblocking("64 B read non-blocking + spin status", b, 1);
	lat_enqueue("clEnqueueNDRangeKernel (with event)", 1, cb);
	lat_enqueue("clEnqueueNDRangeKernel (event, no callback)", 0, NULL);
	for (int i = 0; i < N_LAT; i++) {
		uint64_t t = now_ns();
		CK(clEnqueueNDRangeKernel(q, empty_k, 1, NULL, &g, NULL, 0, NULL, NULL));
		v[i] = now_ns() - t;
		CK(clFinish(q));
	}
	lat_report("clEnqueueNDRangeKernel (no event, idle queue)", v, N_LAT);
	lat_report("clSetEventCallback", cb, N_LAT);
	{
		cl_event ev;
		cl_int st;
		CK(clEnqueueNDRangeKernel(q, empty_k, 1, NULL, &g, NULL, 0, NULL, &ev));
		CK(clFinish(q));
		uint64_t t = now_ns();
		for (int i = 0; i < 100000; i++)
			clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, NULL);
		printf("%-44s %7.1f ns\n", "clGetEventInfo on a complete event", (now_ns() - t) / 1e5);
		t = now_ns();
		for (int i = 0; i < 100000; i++)
			clFlush(q);
		printf("%-44s %7.1f ns\n", "clFlush on an empty queue", (now_ns() - t) / 1e5);
		clReleaseEvent(ev);
	}
	clReleaseKernel(empty_k);
	clReleaseProgram(p);
	clReleaseMemObject(b);
}

/* ---- the machine's own floor: a Unix socket round trip ---- */

static int echo_fd, echo_spin;

/* Echoes 64-byte messages until the socket closes: looking with
 * MSG_DONTWAIT and yielding (as the ICD's reader does), or blocking in
 * recv (a sleeping peer: its wake-up is in the round trip). */
static void *echo_run(void *arg)
{
	char buf[64];

	for (;;) {
		ssize_t n = recv(echo_fd, buf, sizeof(buf), echo_spin ? MSG_DONTWAIT : 0);
		if (n < 0 && errno == EAGAIN) {
			sched_yield();
			continue;
		}
		if (n <= 0 || send(echo_fd, buf, (size_t)n, MSG_NOSIGNAL) != n)
			return NULL;
	}
}

static void probe_socket(int spin)
{
	static uint64_t v[N_LAT * 5];
	char buf[64] = {1};
	int sv[2];
	pthread_t th;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		die("socketpair", -1);
	echo_fd = sv[1];
	echo_spin = spin;
	pthread_create(&th, NULL, echo_run, NULL);
	for (int i = 0; i < N_LAT * 5; i++) {
		uint64_t t = now_ns();
		if (send(sv[0], buf, sizeof(buf), MSG_NOSIGNAL) != sizeof(buf))
			die("send", -1);
		while (recv(sv[0], buf, sizeof(buf), MSG_DONTWAIT) < 0)
			sched_yield();
		v[i] = now_ns() - t;
	}
	close(sv[0]);
	pthread_join(th, NULL);
	close(sv[1]);
	lat_report(spin ? "unix socket round trip, both sides spinning"
			: "unix socket round trip, the echo side asleep",
		   v, N_LAT * 5);
}

/* ---- kernel printf: where does it go? ---- */

static long fd1_size(void)
{
	struct stat st;

	return fstat(1, &st) ? -1 : (long)st.st_size;
}

/* Prints from one launch, then does `how` to end it, and says how many of
 * its bytes fd 1 holds then. */
static long printf_after(cl_kernel k, int how)
{
	cl_event ev;
	cl_int st = CL_QUEUED;
	size_t g = 2;
	long before = fd1_size();

	CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, &ev));
	CK(clFlush(q));
	switch (how) {
	case 0: /* status poll only */
		while (st > CL_COMPLETE)
			CK(clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st,
					  NULL));
		usleep(20000);
		break;
	case 1:
		CK(clWaitForEvents(1, &ev));
		break;
	case 2:
		CK(clFinish(q));
		break;
	}
	clReleaseEvent(ev);
	return fd1_size() - before;
}

static void probe_printf(void)
{
	static const char *src =
		"__kernel void say(int v) { printf(\"probe-printf %d\\n\", v); }\n";
	static const char *how[] = {"completion seen by a status poll (+20 ms)",
				    "clWaitForEvents", "clFinish"};
	char path[] = "/tmp/gpu-probe-out-XXXXXX";
	int fd = mkstemp(path), saved = dup(1);
	cl_int e;
	cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &e);
	cl_kernel k;
	int v = 7;
	long got[3], late, flushed;

	CK(clBuildProgram(p, 1, &dev, "", NULL, NULL));
	k = clCreateKernel(p, "say", &e);
	CK(e);
	CK(clSetKernelArg(k, 0, sizeof(v), &v));
	fflush(stdout);
	dup2(fd, 1); /* the kernel's output goes to a file we can measure */
	for (int h = 0; h < 3; h++)
		got[h] = printf_after(k, h);
	/* What the status poll left behind, if a later sync brought it. */
	late = fd1_size();
	fflush(stdout);
	flushed = fd1_size();
	dup2(saved, 1);
	close(saved);
	printf("== printf (2 work-items, 15 bytes each) to fd 1 (a file)\n");
	for (int h = 0; h < 3; h++)
		printf("   bytes on fd 1 after %s: %ld\n", how[h], got[h]);
	printf("   file total %ld, after fflush(stdout) %ld\n", late, flushed);
	close(fd);
	unlink(path);
	clReleaseKernel(k);
	clReleaseProgram(p);
}

/* Pinned memory of another context as a transfer's host memory. */
static void probe_cross_context(size_t size)
{
	cl_int e;
	cl_context c2 = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
	cl_command_queue q2 = clCreateCommandQueueWithProperties(c2, dev, NULL, &e);
	cl_mem ahp = clCreateBuffer(c2, CL_MEM_ALLOC_HOST_PTR, size, NULL, &e);
	cl_mem dbuf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, size, NULL, &e);
	char *pinned = clEnqueueMapBuffer(q2, ahp, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, size, 0,
					  NULL, NULL, &e);

	if (e)
		die("cross-context pinned", e);
	memset(pinned, 9, size);
	bw_write("write from another context's pinned map", dbuf, pinned, size, 0);
	bw_read("read into another context's pinned map", dbuf, pinned, size, 0);
	bw_write("  the same, 4 MiB chunks", dbuf, pinned, size, 1);
	clEnqueueUnmapMemObject(q2, ahp, pinned, 0, NULL, NULL);
	clFinish(q2);
	clReleaseMemObject(ahp);
	clReleaseMemObject(dbuf);
	clReleaseCommandQueue(q2);
	clReleaseContext(c2);
}

static double now_s(void)
{
	return (double)now_ns() / 1e9;
}

static void CL_CALLBACK fault_note(const char *msg, const void *info, size_t n, void *arg)
{
	printf("fault: context note: %s\n", msg);
	fflush(stdout);
}

/* What the driver says, call by call, once a kernel has stored far outside
 * its buffer: the kernel's event, the queue, a wait, clFinish, a new
 * buffer and a new context. What a daemon can learn cheaply, and when. */
static void probe_fault(void)
{
	static const char *src = "kernel void oob(global int *p) { p[(ulong)1 << 38] = 1; }\n";
	cl_context c;
	cl_command_queue fq;
	cl_program prog;
	cl_kernel k;
	cl_mem m;
	cl_event ev;
	cl_int e, st = 1, w;
	cl_uint refs = 0;
	size_t one = 1;
	double t0;

	c = clCreateContext(NULL, 1, &dev, fault_note, NULL, &e);
	CK(e);
	fq = clCreateCommandQueueWithProperties(c, dev, NULL, &e);
	CK(e);
	prog = clCreateProgramWithSource(c, 1, &src, NULL, &e);
	CK(clBuildProgram(prog, 1, &dev, NULL, NULL, NULL));
	k = clCreateKernel(prog, "oob", &e);
	m = clCreateBuffer(c, CL_MEM_READ_WRITE, 4096, NULL, &e);
	clSetKernelArg(k, 0, sizeof(m), &m);
	CK(clEnqueueNDRangeKernel(fq, k, 1, NULL, &one, NULL, 0, NULL, &ev));
	clFlush(fq);
	t0 = now_s();
	while (now_s() - t0 < 5) {
		e = clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, NULL);
		if (e || st <= CL_COMPLETE)
			break;
	}
	printf("fault: event status %d (query %d) after %.1f us of polling\n", st, e,
	       (now_s() - t0) * 1e6);
	e = clGetCommandQueueInfo(fq, CL_QUEUE_REFERENCE_COUNT, sizeof(refs), &refs, NULL);
	printf("fault: clGetCommandQueueInfo: %d\n", e);
	w = clWaitForEvents(1, &ev);
	clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, NULL);
	printf("fault: clWaitForEvents: %d, then status %d\n", w, st);
	t0 = now_s();
	e = clFinish(fq);
	printf("fault: clFinish: %d (%.1f us)\n", e, (now_s() - t0) * 1e6);
	t0 = now_s();
	e = clFinish(q);
	printf("fault: clFinish of another context's idle queue: %d (%.1f us)\n", e,
	       (now_s() - t0) * 1e6);
	clCreateBuffer(c, CL_MEM_READ_WRITE, 4096, NULL, &e);
	printf("fault: clCreateBuffer: %d\n", e);
	clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
	printf("fault: new clCreateContext: %d\n", e);
	fflush(stdout);
}

/* ---- do completion callbacks stall the queue? ---- */

static void CL_CALLBACK on_nothing(cl_event e, cl_int s, void *arg)
{
	(void)e;
	(void)s;
	(void)arg;
}

/* tools/tenant-bench's short-kernel client for 2 s: K kernels in flight,
 * the oldest waited for, each launch flushed. every: a no-op completion
 * callback on every every-th launch (0: none); late: on the launch before
 * the newest, after the newest is enqueued (the daemon's ticket callback at
 * the end of a loop turn); poll: the newest's status asked after each
 * launch. Kernels per second. */
static double stall_run(cl_kernel k, unsigned inflight, unsigned every, int late, int poll)
{
	cl_event ev[64];
	unsigned head = 0, n = 0, seq = 0;
	uint64_t done = 0, end = now_ns() + 2000000000ull, t0 = now_ns();
	size_t g = 4096;

	while (now_ns() < end) {
		if (n == inflight) {
			CK(clWaitForEvents(1, &ev[head]));
			clReleaseEvent(ev[head]);
			head = (head + 1) % inflight;
			n--;
			done++;
		}
		unsigned slot = (head + n) % inflight;
		CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, &ev[slot]));
		clFlush(q);
		n++;
		seq++;
		if (every && seq % every == 0) {
			if (!late)
				CK(clSetEventCallback(ev[slot], CL_COMPLETE, on_nothing, NULL));
			else if (n >= 2)
				CK(clSetEventCallback(ev[(slot + inflight - 1) % inflight], CL_COMPLETE,
						      on_nothing, NULL));
		}
		if (poll) {
			cl_int st;
			clGetEventInfo(ev[slot], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st,
				       NULL);
		}
	}
	for (; n; n--, head = (head + 1) % inflight) {
		clWaitForEvents(1, &ev[head]);
		clReleaseEvent(ev[head]);
		done++;
	}
	return (double)done / ((double)(now_ns() - t0) / 1e9);
}

/* tools/tenant-bench's short kernel (4096 work-items x 2,000 rounds) in c,
 * its arguments set: its output buffer in *buf. */
static cl_kernel spin_kernel(cl_context c, cl_mem *buf)
{
	static const char *src =
	    "kernel void spin(global uint *p, uint n) {\n"
	    "  uint x = get_global_id(0);\n"
	    "  for (uint i = 0; i < n; i++) x = x * 1664525u + 1013904223u + (x >> 13);\n"
	    "  p[get_global_id(0)] = x;\n"
	    "}\n";
	cl_uint work = 2000;
	cl_int e;
	cl_program prog = clCreateProgramWithSource(c, 1, &src, NULL, &e);
	cl_kernel k;

	CK(e);
	CK(clBuildProgram(prog, 1, &dev, NULL, NULL, NULL));
	k = clCreateKernel(prog, "spin", &e);
	CK(e);
	clReleaseProgram(prog);
	*buf = clCreateBuffer(c, CL_MEM_READ_WRITE, 4096 * 4, NULL, &e);
	CK(e);
	CK(clSetKernelArg(k, 0, sizeof(*buf), buf));
	CK(clSetKernelArg(k, 1, sizeof(work), &work));
	return k;
}

static void probe_stall(void)
{
	cl_mem buf;
	cl_kernel k = spin_kernel(ctx, &buf);

	stall_run(k, 4, 0, 0, 0); /* warm */
	printf("short kernels (4096 x 2000), 4 in flight, kernels/s:\n");
	printf("  no callbacks                          %9.0f\n", stall_run(k, 4, 0, 0, 0));
	printf("  callback on every launch              %9.0f\n", stall_run(k, 4, 1, 0, 0));
	printf("  callback on every 4th launch          %9.0f\n", stall_run(k, 4, 4, 0, 0));
	printf("  callback on every 16th launch         %9.0f\n", stall_run(k, 4, 16, 0, 0));
	printf("  callback on the one before the newest %9.0f\n", stall_run(k, 4, 1, 1, 0));
	printf("  status poll after every launch        %9.0f\n", stall_run(k, 4, 0, 0, 1));
	printf("  16 in flight, no callbacks            %9.0f\n", stall_run(k, 16, 0, 0, 0));
	printf("  16 in flight, callback on every one   %9.0f\n", stall_run(k, 16, 1, 0, 0));
	clReleaseMemObject(buf);
	clReleaseKernel(k);
}

/* ---- one process, several queues: what a group sharing a context could reach ---- */

#define QN 8

struct qrun {
	cl_context c;
	cl_command_queue q;
	cl_kernel k;
	cl_mem buf;
	cl_event ev[4];
	unsigned head, n;
	uint64_t done, end;
};

static void qrun_open(struct qrun *r, cl_context c)
{
	cl_int e;

	r->c = c;
	r->q = clCreateCommandQueueWithProperties(c, dev, NULL, &e);
	CK(e);
	r->k = spin_kernel(c, &r->buf);
}

static void qrun_launch(struct qrun *r)
{
	size_t g = 4096;

	CK(clEnqueueNDRangeKernel(r->q, r->k, 1, NULL, &g, NULL, 0, NULL,
				  &r->ev[(r->head + r->n) % 4]));
	clFlush(r->q);
	r->n++;
}

static void qrun_retire(struct qrun *r)
{
	clReleaseEvent(r->ev[r->head]);
	r->head = (r->head + 1) % 4;
	r->n--;
	r->done++;
}

/* tenant-bench's short-kernel client on one queue: 4 in flight, the oldest
 * waited for. */
static void *qrun_thread(void *arg)
{
	struct qrun *r = arg;

	while (now_ns() < r->end) {
		if (r->n == 4) {
			CK(clWaitForEvents(1, &r->ev[r->head]));
			qrun_retire(r);
		}
		qrun_launch(r);
	}
	clFinish(r->q);
	return NULL;
}

/* QN queues of short kernels for 2 s, kernels/s: contexts of their own,
 * each driven by a thread (native processes' shape, in one process); one
 * context, a thread per queue; one context, one thread polling every
 * queue's oldest and refilling (a worker's loop). */
static double queues_run(int mode)
{
	struct qrun r[QN] = {0};
	pthread_t t[QN];
	uint64_t t0, done = 0;
	cl_int e;
	cl_context shared = mode ? clCreateContext(NULL, 1, &dev, NULL, NULL, &e) : NULL;

	for (int i = 0; i < QN; i++) {
		cl_context c = shared ? shared : clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
		CK(e);
		qrun_open(&r[i], c);
	}
	t0 = now_ns();
	for (int i = 0; i < QN; i++)
		r[i].end = t0 + 2000000000ull;
	if (mode < 2) {
		for (int i = 0; i < QN; i++)
			if (pthread_create(&t[i], NULL, qrun_thread, &r[i]))
				die("pthread_create", -1);
		for (int i = 0; i < QN; i++)
			pthread_join(t[i], NULL);
	} else {
		while (now_ns() < r[0].end)
			for (int i = 0; i < QN; i++) {
				cl_int st = CL_COMPLETE;
				while (r[i].n &&
				       !clGetEventInfo(r[i].ev[r[i].head],
						       CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st,
						       NULL) &&
				       st <= CL_COMPLETE)
					qrun_retire(&r[i]);
				while (r[i].n < 4)
					qrun_launch(&r[i]);
			}
		for (int i = 0; i < QN; i++)
			clFinish(r[i].q);
	}
	for (int i = 0; i < QN; i++) {
		while (r[i].n)
			qrun_retire(&r[i]);
		done += r[i].done;
		clReleaseKernel(r[i].k);
		clReleaseMemObject(r[i].buf);
		clReleaseCommandQueue(r[i].q);
		if (!shared)
			clReleaseContext(r[i].c);
	}
	if (shared)
		clReleaseContext(shared);
	return (double)done / ((double)(now_ns() - t0) / 1e9);
}

static void probe_queues(void)
{
	printf("%d queues of short kernels (4096 x 2000), 4 in flight each, kernels/s:\n", QN);
	printf("  a context each, a thread each         %9.0f\n", queues_run(0));
	printf("  one context, a thread per queue       %9.0f\n", queues_run(1));
	printf("  one context, one thread polling all   %9.0f\n", queues_run(2));
}

int main(int argc, char **argv)
{
	const char *want = argc > 1 ? argv[1] : "NVIDIA";
	size_t size = (argc > 2 ? (size_t)atoi(argv[2]) : 64) << 20;
	int lat_only = argc > 3 && !strcmp(argv[3], "lat");
	cl_platform_id plats[16];
	cl_uint np = 0;
	cl_int e;
	char name[256];
	int found = 0;

	CK(clGetPlatformIDs(16, plats, &np));
	for (cl_uint i = 0; i < np && !found; i++) {
		clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof(name), name, NULL);
		if (strstr(name, want) && !clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 1, &dev, NULL))
			found = 1;
	}
	if (!found)
		die("no such platform", -1);
	clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof(name), name, NULL);
	printf("device: %s\n", name);
	ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
	CK(e);
	q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &e);
	CK(e);
	if (argc > 3 && !strcmp(argv[3], "fault")) {
		/* Last: it leaves the process's driver state broken. */
		probe_fault();
		return 0;
	}
	if (argc > 3 && !strcmp(argv[3], "queues")) {
		probe_queues();
		goto out;
	}
	if (argc > 3 && !strcmp(argv[3], "stall")) {
		probe_stall();
		goto out;
	}
	if (lat_only) {
		probe_latency();
		probe_socket(1);
		probe_socket(0);
		goto out;
	}
	probe_printf();
	fflush(stdout);
	probe_latency();
	fflush(stdout);
	probe_cross_context(size);
	fflush(stdout);
	probe_bandwidth(size);
out:
	fflush(stdout);
	clReleaseCommandQueue(q);
	clReleaseContext(ctx);
	return 0;
}
