// SPDX-License-Identifier: MIT
// hol-bench: does one client's huge write hold up another client's small
// calls? One process streams large blocking clEnqueueWriteBuffer calls
// through clmux while another times blocking 64-byte writes and reads.
#define _GNU_SOURCE
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024ull * 1024ull)
#define MAX_SAMPLES 200000

struct cl {
	cl_context ctx;
	cl_command_queue q;
	cl_device_id dev;
};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void die(const char *what, cl_int err)
{
	fprintf(stderr, "hol-bench: %s: error %d\n", what, err);
	exit(1);
}

/* The first platform whose name contains `match`. */
static void cl_open(struct cl *c, const char *match)
{
	cl_platform_id ids[16];
	cl_uint n = 0;
	cl_int err;

	if (clGetPlatformIDs(16, ids, &n) != CL_SUCCESS)
		n = 0;
	for (cl_uint i = 0; i < n && i < 16; i++) {
		char name[256] = "";
		clGetPlatformInfo(ids[i], CL_PLATFORM_NAME, sizeof(name) - 1, name, NULL);
		if (!strstr(name, match))
			continue;
		if ((err = clGetDeviceIDs(ids[i], CL_DEVICE_TYPE_ALL, 1, &c->dev, NULL)))
			die("clGetDeviceIDs", err);
		c->ctx = clCreateContext(NULL, 1, &c->dev, NULL, NULL, &err);
		if (!c->ctx)
			die("clCreateContext", err);
		c->q = clCreateCommandQueueWithProperties(c->ctx, c->dev, NULL, &err);
		if (!c->q)
			die("clCreateCommandQueue", err);
		return;
	}
	fprintf(stderr, "hol-bench: no platform named like \"%s\" (is CLMUX_SERVER set?)\n", match);
	exit(1);
}

/* One blocking transfer of the whole buffer, in the chosen direction. */
static cl_int bulk_move(struct cl *c, cl_mem m, uint64_t size, char *host, int rd)
{
	return rd ? clEnqueueReadBuffer(c->q, m, CL_TRUE, 0, size, host, 0, NULL, NULL)
		  : clEnqueueWriteBuffer(c->q, m, CL_TRUE, 0, size, host, 0, NULL, NULL);
}

/* The bulk client: `rounds` blocking writes (or reads) of `size` bytes;
 * tells the prober when it starts (a byte on `go`) and reports its time on
 * `done`. */
static void bulk_main(const char *match, uint64_t size, int rounds, int rd, int go, int done)
{
	struct cl c;
	cl_int err;
	char *src = malloc(size);
	cl_mem m;
	double t0, t;

	if (!src)
		die("malloc", CL_OUT_OF_HOST_MEMORY);
	memset(src, 0x5a, size);
	cl_open(&c, match);
	m = clCreateBuffer(c.ctx, CL_MEM_READ_WRITE, size, NULL, &err);
	if (!m)
		die("clCreateBuffer (bulk)", err);
	/* One round first, untimed: the device memory and the daemon's
	 * staging are touched once before the prober starts. */
	if ((err = bulk_move(&c, m, size, src, 0)) || (rd && (err = bulk_move(&c, m, size, src, 1))))
		die("bulk transfer", err);
	if (write(go, "g", 1) != 1)
		exit(1);
	t0 = now_us();
	for (int i = 0; i < rounds; i++)
		if ((err = bulk_move(&c, m, size, src, rd)))
			die("bulk transfer", err);
	t = now_us() - t0;
	if (write(done, &t, sizeof(t)) != sizeof(t))
		exit(1);
	clReleaseMemObject(m);
	clReleaseCommandQueue(c.q);
	clReleaseContext(c.ctx);
	exit(0);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *what, double *v, int n)
{
	if (!n) {
		printf("%-28s %8s\n", what, "no samples");
		return;
	}
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	printf("%-28s %8d %9.1f %9.1f %9.1f\n", what, n, v[n / 2], v[(int)(n * 0.99)], v[n - 1]);
}

/* Times blocking 64-byte writes and reads, alternating, until `stop` is
 * readable (or n samples each). */
static int probe(struct cl *c, cl_mem m, int stop, int max, double *wr, double *rd, int *nrd)
{
	char buf[64] = { 1 };
	int n = 0;

	*nrd = 0;
	while (n < max) {
		double t0 = now_us();
		cl_int err = clEnqueueWriteBuffer(c->q, m, CL_TRUE, 0, sizeof(buf), buf, 0, NULL, NULL);
		if (err)
			die("clEnqueueWriteBuffer (probe)", err);
		wr[n++] = now_us() - t0;
		t0 = now_us();
		if ((err = clEnqueueReadBuffer(c->q, m, CL_TRUE, 0, sizeof(buf), buf, 0, NULL, NULL)))
			die("clEnqueueReadBuffer (probe)", err);
		rd[(*nrd)++] = now_us() - t0;
		if (stop >= 0) {
			struct timeval tv = { 0, 0 };
			fd_set fds;
			FD_ZERO(&fds);
			FD_SET(stop, &fds);
			if (select(stop + 1, &fds, NULL, NULL, &tv) > 0)
				break;
		}
	}
	return n;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: hol-bench [--size MIB] [--rounds N] [--read] [--platform NAME]\n"
		   "  --size MIB      each bulk transfer (default 1024)\n"
		   "  --rounds N      timed bulk transfers (default 3)\n"
		   "  --read          the bulk client reads instead of writing\n"
		   "  --platform NAME platform name substring (default \"clmux\")\n"
		   "  The server is CLMUX_SERVER (and CLMUX_TOKEN), as for any clmux client.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "size", required_argument, NULL, 's' }, { "rounds", required_argument, NULL, 'r' },
		{ "platform", required_argument, NULL, 'p' }, { "read", no_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *match = "clmux";
	uint64_t size = 1024 * MIB;
	int rounds = 3, opt, go[2], done[2], status, nw, nr, idle = 2000, reads = 0;
	double *wr = calloc(MAX_SAMPLES, sizeof(double)), *rd = calloc(MAX_SAMPLES, sizeof(double));
	double bulk_us = 0;
	struct cl c;
	cl_mem m;
	cl_int err;
	pid_t pid;
	char b;

	while ((opt = getopt_long(argc, argv, "s:r:p:Rh", opts, NULL)) != -1) {
		switch (opt) {
		case 's':
			size = strtoull(optarg, NULL, 10) * MIB;
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		case 'p':
			match = optarg;
			break;
		case 'R':
			reads = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!size || rounds < 1 || !wr || !rd || pipe(go) || pipe(done)) {
		usage(stderr);
		return 2;
	}
	/* Forked before any OpenCL call: each process is its own clmux session. */
	pid = fork();
	if (pid == 0)
		bulk_main(match, size, rounds, reads, go[1], done[1]);
	if (pid < 0)
		return 1;
	cl_open(&c, match);
	m = clCreateBuffer(c.ctx, CL_MEM_READ_WRITE, 64, NULL, &err);
	if (!m)
		die("clCreateBuffer (probe)", err);
	printf("hol-bench: %s, bulk %d x %llu MiB blocking %s\n",
	       getenv("CLMUX_SERVER") ? getenv("CLMUX_SERVER") : "(default server)", rounds,
	       (unsigned long long)(size / MIB), reads ? "reads" : "writes");
	printf("%-28s %8s %9s %9s %9s\n", "probe (64 B, blocking)", "n", "p50 us", "p99 us", "max us");
	nw = probe(&c, m, -1, idle, wr, rd, &nr);
	report("write, alone", wr, nw);
	report("read, alone", rd, nr);
	if (read(go[0], &b, 1) != 1)
		return 1;
	nw = probe(&c, m, done[0], MAX_SAMPLES, wr, rd, &nr);
	if (read(done[0], &bulk_us, sizeof(bulk_us)) != sizeof(bulk_us))
		return 1;
	report("write, during bulk", wr, nw);
	report("read, during bulk", rd, nr);
	printf("bulk: %.2f GB/s (%d x %llu MiB in %.2f s)\n",
	       (double)size * rounds / bulk_us / 1e3, rounds, (unsigned long long)(size / MIB),
	       bulk_us / 1e6);
	waitpid(pid, &status, 0);
	clReleaseMemObject(m);
	clReleaseCommandQueue(c.q);
	clReleaseContext(c.ctx);
	return WIFEXITED(status) && !WEXITSTATUS(status) ? 0 : 1;
}
