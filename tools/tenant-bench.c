// SPDX-License-Identifier: MIT
// tenant-bench: N tenants share one device through clmuxd; each keeps
// compute-bound kernels in flight for a fixed window. Reports completed
// kernels per tenant, Jain's fairness index, achieved against configured
// shares, and clmuxd's resident memory per idle tenant.
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_TENANTS  256
#define MAX_INFLIGHT 64

static const char src[] =
    "kernel void spin(global uint *p, uint n) {\n"
    "  uint x = get_global_id(0);\n"
    "  for (uint i = 0; i < n; i++) x = x * 1664525u + 1013904223u + (x >> 13);\n"
    "  p[get_global_id(0)] = x;\n"
    "}\n";

struct opts {
	unsigned tenants, inflight, seconds, work, global;
	unsigned weights[16], nweights;
	const char *clmuxd, *device;
	const char *client_vendors; /* OCL_ICD_VENDORS of the clients only */
	int probe;		    /* one more tenant, measuring a small call's latency */
	int group;		    /* every tenant in one group: one worker process */
	int shared;		    /* the group shares one native context */
	int runaway;		    /* one more tenant, whose kernel never ends */
	const char *daemon_args;    /* more clmuxd options, split at spaces */
	const char *scheme;	    /* how clients dial: "unix" or "shm" (rings) */
	int json;		    /* one JSON object instead of the text */
	int poll;		    /* clients wait by polling the status */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int native; /* --native: the clients use the device directly */

static cl_platform_id find_clmux(void)
{
	cl_platform_id p[16];
	cl_uint n = 0;
	char name[256];

	if (clGetPlatformIDs(16, p, &n) != CL_SUCCESS)
		return NULL;
	for (cl_uint i = 0; i < n; i++)
		if (!clGetPlatformInfo(p[i], CL_PLATFORM_NAME, sizeof(name), name, NULL) &&
		    (strstr(name, "clmux") == NULL) == native)
			return p[i];
	return NULL;
}

/*
 * One tenant's client (a process of its own, as a guest would be): builds
 * the kernel, says it is ready, waits for the start, then keeps `inflight`
 * kernels queued until the window closes. Writes its completed count.
 */
struct result {
	unsigned long long tenant, done;
	double med_us, p99_us, base_med_us, base_p99_us; /* the probe's latencies */
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The probe: one tiny kernel and clFinish at a time, every millisecond,
 * until `end`; the median and 99th percentile in us. */
static void probe_run(cl_command_queue q, cl_kernel k, double end, double *med, double *p99)
{
	static double lat[20000];
	size_t n = 0, one = 1;

	while (now_s() < end && n < 20000) {
		double t0 = now_s();
		clEnqueueNDRangeKernel(q, k, 1, NULL, &one, NULL, 0, NULL, NULL);
		clFinish(q);
		lat[n++] = (now_s() - t0) * 1e6;
		usleep(1000);
	}
	qsort(lat, n, sizeof(lat[0]), cmp_double);
	*med = n ? lat[n / 2] : 0;
	*p99 = n ? lat[n * 99 / 100] : 0;
}

/* The runaway: one kernel that never ends, launched, then waited for. */
static int runaway_client(int ready_fd)
{
	static const char *spin =
	    "kernel void forever(volatile global int *p) { while (p[0] == 0) p[1]++; }\n";
	cl_platform_id plat = find_clmux();
	cl_device_id dev;
	cl_context ctx;
	cl_command_queue q;
	cl_program prog;
	cl_kernel k;
	cl_mem buf;
	cl_int e, zero[2] = {0, 0};
	size_t one = 1;

	if (!plat || clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL))
		return 2;
	ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
	q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &e);
	prog = clCreateProgramWithSource(ctx, 1, &spin, NULL, &e);
	if (clBuildProgram(prog, 1, &dev, NULL, NULL, NULL))
		return 4;
	k = clCreateKernel(prog, "forever", &e);
	buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof(zero), zero, &e);
	clSetKernelArg(k, 0, sizeof(buf), &buf);
	if (clEnqueueNDRangeKernel(q, k, 1, NULL, &one, NULL, 0, NULL, NULL))
		return 5;
	clFlush(q);
	if (write(ready_fd, "r", 1) != 1)
		return 3;
	clFinish(q);
	return 0;
}

static pid_t runaway_start(const struct opts *o, const char *dir)
{
	int ready[2];
	pid_t pid;
	char c;

	if (pipe(ready))
		return -1;
	pid = fork();
	if (!pid) {
		char server[512];
		snprintf(server, sizeof(server), "%s:%s/t%u.sock", o->scheme, dir,
			 o->tenants + o->probe);
		setenv("CLMUX_SERVER", server, 1);
		if (o->client_vendors && !native)
			setenv("OCL_ICD_VENDORS", o->client_vendors, 1);
		close(ready[0]);
		_exit(runaway_client(ready[1]));
	}
	close(ready[1]);
	if (read(ready[0], &c, 1) != 1)
		pid = -1;
	close(ready[0]);
	/* Give it a moment on the device. */
	usleep(200000);
	return pid;
}

static int client(const struct opts *o, unsigned idx, int ready_fd, int go_fd, int out_fd, int idle)
{
	struct result r = {idx, 0, 0, 0, 0, 0};
	int probe = o->probe && idx == o->tenants;
	cl_platform_id plat = find_clmux();
	cl_device_id dev;
	cl_context ctx;
	cl_command_queue q;
	cl_program prog;
	cl_kernel k;
	cl_mem buf;
	cl_event ev[MAX_INFLIGHT];
	const char *s = src;
	unsigned long long done = 0;
	unsigned head = 0, n = 0;
	cl_int e;
	char c;
	double end;

	if (!plat || clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL))
		return 2;
	ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
	q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &e);
	if (idle) {
		/* An idle tenant: a context and a queue, nothing running. */
		if (write(ready_fd, "r", 1) != 1 || read(go_fd, &c, 1) < 0)
			return 3;
		return 0;
	}
	prog = clCreateProgramWithSource(ctx, 1, &s, NULL, &e);
	if (clBuildProgram(prog, 1, &dev, NULL, NULL, NULL))
		return 4;
	k = clCreateKernel(prog, "spin", &e);
	buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, o->global * 4, NULL, &e);
	clSetKernelArg(k, 0, sizeof(buf), &buf);
	clSetKernelArg(k, 1, sizeof(cl_uint), &o->work);
	if (write(ready_fd, "r", 1) != 1 || read(go_fd, &c, 1) < 0)
		return 3;
	end = now_s() + o->seconds;
	if (probe) {
		cl_uint tiny = 1;
		clSetKernelArg(k, 1, sizeof(cl_uint), &tiny);
		probe_run(q, k, end, &r.med_us, &r.p99_us);
		/* Alone, once the others have stopped. */
		sleep(2);
		probe_run(q, k, now_s() + 2, &r.base_med_us, &r.base_p99_us);
		return write(out_fd, &r, sizeof(r)) == sizeof(r) ? 0 : 6;
	}
	size_t gl = o->global;
	while (now_s() < end) {
		if (n == o->inflight) {
			/* The oldest first: in order, the queue stays full. */
			if (o->poll) {
				cl_int st = CL_QUEUED;
				while (st > CL_COMPLETE &&
				       clGetEventInfo(ev[head], CL_EVENT_COMMAND_EXECUTION_STATUS,
						      sizeof(st), &st, NULL) == CL_SUCCESS)
					;
			} else {
				clWaitForEvents(1, &ev[head]);
			}
			clReleaseEvent(ev[head]);
			head = (head + 1) % o->inflight;
			n--;
			done++;
		}
		if (clEnqueueNDRangeKernel(q, k, 1, NULL, &gl, NULL, 0, NULL,
					   &ev[(head + n) % o->inflight]))
			return 5;
		clFlush(q);
		n++;
	}
	/* Only what finished inside the window counts. */
	for (; n; n--, head = (head + 1) % o->inflight) {
		cl_int st = 1;
		clGetEventInfo(ev[head], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, NULL);
		if (st == CL_COMPLETE)
			done++;
		clReleaseEvent(ev[head]);
	}
	r.done = done;
	if (write(out_fd, &r, sizeof(r)) != sizeof(r))
		return 6;
	clFinish(q);
	return 0;
}

static long rss_one(pid_t pid);

/* The daemon's resident memory: its own and its workers'. */
static long rss_kib(pid_t pid)
{
	char path[96], kids[4096];
	long kib = rss_one(pid);
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	f = fopen(path, "r");
	if (!f)
		return kib;
	if (fgets(kids, sizeof(kids), f))
		for (char *t = strtok(kids, " \n"); t; t = strtok(NULL, " \n")) {
			long k = rss_one((pid_t)atol(t));
			if (k > 0)
				kib += k;
		}
	fclose(f);
	return kib;
}

static long rss_one(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kib = atol(line + 6);
	fclose(f);
	return kib;
}

static pid_t daemon_start(const struct opts *o, const char *dir)
{
	char conf[512], **argv;
	unsigned a = 0;
	FILE *f;
	pid_t pid;

	snprintf(conf, sizeof(conf), "%s/clmuxd.conf", dir);
	f = fopen(conf, "w");
	if (!f)
		return -1;
	for (unsigned i = 0; i < o->tenants + o->probe + o->runaway; i++)
		fprintf(f, "[tenant t%u]\nweight = %u\n%s", i,
			i < o->tenants ? o->weights[i % o->nweights] : 1,
			o->group ? (o->shared ? "group = g\ncontext = shared\n" : "group = g\n")
				 : "");
	fclose(f);
	argv = calloc(2 * (o->tenants + 2) + 32, sizeof(*argv));
	argv[a++] = (char *)o->clmuxd;
	for (unsigned i = 0; i < o->tenants + o->probe + o->runaway; i++) {
		argv[a++] = "--listen";
		if (asprintf(&argv[a++], "unix:%s/t%u.sock,tenant=t%u", dir, i, i) < 0)
			return -1;
	}
	argv[a++] = "--config";
	argv[a++] = conf;
	argv[a++] = "--admin";
	argv[a++] = "none";
	if (o->device) {
		argv[a++] = "--device";
		argv[a++] = (char *)o->device;
	}
	if (o->daemon_args) {
		char *words = strdup(o->daemon_args);
		for (char *w = strtok(words, " "); w && a < 2 * (o->tenants + 1) + 30;
		     w = strtok(NULL, " "))
			argv[a++] = w;
	}
	pid = fork();
	if (!pid) {
		execvp(o->clmuxd, argv);
		fprintf(stderr, "tenant-bench: %s: %s\n", o->clmuxd, strerror(errno));
		_exit(127);
	}
	for (unsigned i = 0; i < o->tenants + o->probe + o->runaway; i++) {
		char sock[512];
		snprintf(sock, sizeof(sock), "%s/t%u.sock", dir, i);
		for (int t = 0; t < 1000 && access(sock, F_OK); t++)
			usleep(10000);
	}
	return pid;
}

/* Starts n clients (tenant i on t<i>.sock), waits until all are ready,
 * then lets them go at once. */
static int run_clients(const struct opts *o, const char *dir, unsigned n, int idle, pid_t *pids,
		       int *out_rd, int *go_wr)
{
	int ready[2], go[2], out[2];
	char c;

	if (pipe(ready) || pipe(go) || pipe(out))
		return -1;
	for (unsigned i = 0; i < n; i++) {
		pids[i] = fork();
		if (!pids[i]) {
			char server[512];
			snprintf(server, sizeof(server), "%s:%s/t%u.sock", o->scheme, dir, i);
			setenv("CLMUX_SERVER", server, 1);
			if (o->client_vendors && !native)
				setenv("OCL_ICD_VENDORS", o->client_vendors, 1);
			close(ready[0]);
			close(go[1]);
			close(out[0]);
			_exit(client(o, i, ready[1], go[0], out[1], idle));
		}
	}
	close(ready[1]);
	close(go[0]);
	close(out[1]);
	for (unsigned i = 0; i < n; i++)
		if (read(ready[0], &c, 1) != 1)
			return -1;
	close(ready[0]);
	*out_rd = out[0];
	*go_wr = go[1];
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: tenant-bench [--tenants N] [--weights W[:W...]] [--seconds S]\n"
		   "                    [--inflight K] [--work N] [--device SPEC] [--clmuxd PATH]\n"
		   "                    [--client-vendors PATH] [--native] [--probe] [--group]\n"
		   "                    [--daemon-args 'ARGS'] [--runaway] [--shared] [--shm] [--json]\n"
		   "                    [--poll]\n"
		   "  N tenants (default 8), each a client process keeping K (default 4)\n"
		   "  kernels in flight for S seconds (default 10) through one clmuxd;\n"
		   "  weights repeat over the tenants (default 1). OCL_ICD_VENDORS must\n"
		   "  offer the clmux ICD; CLMUXD or --clmuxd names the daemon.\n"
		   "  --client-vendors: the clients' OCL_ICD_VENDORS (e.g. only clmux.icd,\n"
		   "  so 64 clients do not each load the native driver).\n"
		   "  --native: the same clients on the native platform, no clmuxd (the\n"
		   "  baseline: weights cannot apply there).\n"
		   "  --probe: one more tenant launching a 1-item kernel and waiting for it,\n"
		   "  every ms: its latency under the load and alone.\n"
		   "  --group: the tenants form one group (one worker process, clmuxd's\n"
		   "  scheduler between them); default: a worker process each.\n"
		   "  --shared: --group, and the group shares one native context\n"
		   "  (context = shared): the driver runs their queues concurrently.\n"
		   "  --daemon-args: more clmuxd options (e.g. '--workers off').\n"
		   "  --runaway: one more tenant whose kernel never ends runs all along;\n"
		   "  then the time clmuxd takes to exit on SIGTERM.\n"
		   "  --shm: clients use the shared-memory rings (shm:) instead of the\n"
		   "  socket (unix:, the default).\n"
		   "  --json: one JSON object instead of the text.\n"
		   "  --poll: clients wait for their oldest kernel by polling its status\n"
		   "  instead of clWaitForEvents.\n");
}

/* --json: what the text says, as one object (tools/bench-results reads it). */
static int print_json(const struct opts *o, const unsigned long long *done,
		      unsigned long long sum, double norm_sum, double norm_sq,
		      const struct result *probe)
{
	printf("{\"tenants\":%u,\"mode\":\"%s\",\"scheme\":\"%s\",\"seconds\":%u,"
	       "\"inflight\":%u,\"work\":%u,\"global\":%u,\"weights\":[",
	       o->tenants, native ? "native" : o->shared ? "shared" : o->group ? "grouped" : "isolated",
	       native ? "native" : o->scheme, o->seconds, o->inflight, o->work, o->global);
	for (unsigned i = 0; i < o->nweights; i++)
		printf("%s%u", i ? "," : "", o->weights[i]);
	printf("],\"completed\":[");
	for (unsigned i = 0; i < o->tenants; i++)
		printf("%s%llu", i ? "," : "", done[i]);
	printf("],\"total\":%llu,\"kernels_per_s\":%.6g,\"jain\":%.6g", sum,
	       (double)sum / o->seconds, norm_sq ? norm_sum * norm_sum / (o->tenants * norm_sq) : 0);
	if (o->probe)
		printf(",\"probe_us\":{\"median\":%.6g,\"p99\":%.6g,\"alone_median\":%.6g,"
		       "\"alone_p99\":%.6g}",
		       probe->med_us, probe->p99_us, probe->base_med_us, probe->base_p99_us);
	printf("}\n");
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"tenants", 1, NULL, 'n'},	{"weights", 1, NULL, 'w'}, {"seconds", 1, NULL, 's'},
	    {"inflight", 1, NULL, 'k'}, {"work", 1, NULL, 'W'},	   {"device", 1, NULL, 'd'},
	    {"clmuxd", 1, NULL, 'c'},	{"help", 0, NULL, 'h'},	   {"client-vendors", 1, NULL, 'v'},
	    {"native", 0, NULL, 'N'},	{"probe", 0, NULL, 'p'},   {"group", 0, NULL, 'g'},
	    {"daemon-args", 1, NULL, 'D'}, {"runaway", 0, NULL, 'R'}, {"shared", 0, NULL, 'S'},
	    {"shm", 0, NULL, 'M'},	{"json", 0, NULL, 'j'},	   {"poll", 0, NULL, 'P'},
	    {NULL, 0, NULL, 0},
	};
	struct opts o = {.tenants = 8,
			 .inflight = 4,
			 .seconds = 10,
			 .work = 2000,
			 .global = 4096,
			 .weights = {1},
			 .scheme = "unix",
			 .nweights = 1};
	char dir[] = "/tmp/clmux-tenant-bench-XXXXXX", *tok;
	static pid_t pids[MAX_TENANTS + 1];
	unsigned long long done[MAX_TENANTS] = {0}, sum = 0;
	double norm_sum = 0, norm_sq = 0, wsum = 0;
	long rss0, rss1;
	struct result probe = {0};
	int opt, out_rd, go_wr, failed = 0;
	pid_t daemon, runaway = 0;

	o.clmuxd = getenv("CLMUXD") ? getenv("CLMUXD") : "clmuxd";
	while ((opt = getopt_long(argc, argv, "n:w:s:k:W:d:c:hv:NpgD:RSMjP", lo, NULL)) != -1) {
		switch (opt) {
		case 'n':
			o.tenants = (unsigned)atoi(optarg);
			break;
		case 'w':
			o.nweights = 0;
			for (tok = strtok(optarg, ":"); tok && o.nweights < 16;
			     tok = strtok(NULL, ":"))
				o.weights[o.nweights++] = (unsigned)atoi(tok);
			break;
		case 's':
			o.seconds = (unsigned)atoi(optarg);
			break;
		case 'k':
			o.inflight = (unsigned)atoi(optarg);
			break;
		case 'W':
			o.work = (unsigned)atoi(optarg);
			break;
		case 'd':
			o.device = optarg;
			break;
		case 'c':
			o.clmuxd = optarg;
			break;
		case 'v':
			o.client_vendors = optarg;
			break;
		case 'N':
			native = 1;
			break;
		case 'j':
			o.json = 1;
			break;
		case 'P':
			o.poll = 1;
			break;
		case 'p':
			o.probe = 1;
			break;
		case 'g':
			o.group = 1;
			break;
		case 'R':
			o.runaway = 1;
			break;
		case 'S':
			o.group = o.shared = 1;
			break;
		case 'M':
			o.scheme = "shm";
			break;
		case 'D':
			o.daemon_args = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	for (unsigned i = 0; i < o.nweights; i++)
		if (!o.weights[i] || o.weights[i] > 1000)
			o.nweights = 0;
	if (!o.tenants || o.tenants > MAX_TENANTS || !o.inflight || o.inflight > MAX_INFLIGHT ||
	    !o.seconds || !o.nweights) {
		usage(stderr);
		return 2;
	}
	if (!mkdtemp(dir)) {
		perror("tenant-bench: mkdtemp");
		return 1;
	}
	setenv("CLMUX_LOG", getenv("CLMUX_LOG") ? getenv("CLMUX_LOG") : "warn", 1);
	/* Natively there is no daemon: the clients find the device itself. */
	daemon = native ? 0 : daemon_start(&o, dir);
	if (daemon < 0)
		return 1;
	sleep(1);

	/* Resident memory per idle tenant: a session each, nothing running. */
	rss0 = rss1 = daemon > 0 ? rss_kib(daemon) : 0;
	if (!native) {
		if (run_clients(&o, dir, o.tenants, 1, pids, &out_rd, &go_wr))
			return 1;
		sleep(1);
		rss1 = rss_kib(daemon);
		close(go_wr);
		close(out_rd);
		for (unsigned i = 0; i < o.tenants; i++)
			waitpid(pids[i], NULL, 0);
	}

	/* The runaway starts first and runs all along. */
	if (o.runaway && (runaway = runaway_start(&o, dir)) < 0) {
		fprintf(stderr, "tenant-bench: the runaway tenant did not start\n");
		return 1;
	}
	/* The contended window. */
	if (run_clients(&o, dir, o.tenants + o.probe, 0, pids, &out_rd, &go_wr))
		return 1;
	close(go_wr);
	for (unsigned i = 0; i < o.tenants + o.probe; i++) {
		int st;
		waitpid(pids[i], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "tenant-bench: client %u failed (%d)\n", i, st);
			failed = 1;
		}
	}
	/* Results arrive in any order; each names its tenant. */
	for (unsigned i = 0; i < o.tenants + o.probe && !failed; i++) {
		struct result r;
		if (read(out_rd, &r, sizeof(r)) != sizeof(r) || r.tenant > o.tenants)
			failed = 1;
		else if (r.tenant == o.tenants)
			probe = r;
		else
			done[r.tenant] = r.done;
	}
	{
		double t0 = now_s();
		if (daemon > 0) {
			kill(daemon, SIGTERM);
			waitpid(daemon, NULL, 0);
		}
		if (o.runaway && !native)
			printf("clmuxd exited %.3f s after SIGTERM, a runaway kernel running\n",
			       now_s() - t0);
	}
	if (runaway > 0) {
		kill(runaway, SIGKILL);
		waitpid(runaway, NULL, 0);
	}
	{
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd))
			fprintf(stderr, "tenant-bench: could not remove %s\n", dir);
	}
	if (failed)
		return 1;

	for (unsigned i = 0; i < o.tenants; i++) {
		double x = (double)done[i] / o.weights[i % o.nweights];
		sum += done[i];
		wsum += o.weights[i % o.nweights];
		norm_sum += x;
		norm_sq += x * x;
	}
	if (o.json)
		return print_json(&o, done, sum, norm_sum, norm_sq, &probe);
	printf("tenant-bench: %u %s%s, weights", o.tenants,
	       native	  ? "native clients"
	       : o.shared ? "tenants of one group sharing a context"
	       : o.group  ? "tenants of one group"
			  : "tenants",
	       o.runaway ? " beside a runaway kernel" : "");
	for (unsigned i = 0; i < o.nweights; i++)
		printf("%s%u", i ? ":" : " ", o.weights[i]);
	printf(", %u in flight each, %u s, kernel %u x %u iterations\n", o.inflight, o.seconds,
	       o.global, o.work);
	printf("%-8s %6s %10s %9s %9s\n", "tenant", "weight", "completed", "share", "target");
	for (unsigned i = 0; i < o.tenants; i++) {
		unsigned w = o.weights[i % o.nweights];
		if (o.tenants > 16 && i >= 8 && i < o.tenants - 4) {
			if (i == 8)
				printf("...\n");
			continue;
		}
		printf("t%-7u %6u %10llu %8.2f%% %8.2f%%\n", i, w, done[i],
		       sum ? 100.0 * (double)done[i] / (double)sum : 0, 100.0 * w / wsum);
	}
	/* Jain's index over completions per unit of weight: 1 is perfect. */
	printf("total completed: %llu (%.1f kernels/s)\n", sum, (double)sum / o.seconds);
	printf("Jain's fairness index (per weight): %.4f\n",
	       norm_sq ? norm_sum * norm_sum / (o.tenants * norm_sq) : 0);
	if (o.nweights == 2 && o.tenants == 2)
		printf("achieved ratio t1/t0: %.3f (configured %.3f)\n",
		       done[0] ? (double)done[1] / (double)done[0] : 0,
		       (double)o.weights[1] / o.weights[0]);
	if (o.probe)
		printf(
		    "probe tenant (1-item kernel + clFinish every ms): median %.0f us, p99 %.0f us "
		    "under the load; alone %.0f us, p99 %.0f us\n",
		    probe.med_us, probe.p99_us, probe.base_med_us, probe.base_p99_us);
	if (native) {
		printf("native: no clmuxd, no weights\n");
		return 0;
	}
	printf("clmuxd resident memory: %ld KiB with no session, %ld KiB with %u idle tenants: "
	       "%.1f KiB per idle tenant\n",
	       rss0, rss1, o.tenants, (double)(rss1 - rss0) / o.tenants);
	return 0;
}
