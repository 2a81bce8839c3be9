// SPDX-License-Identifier: MIT
// ckpt-bench: how long a checkpoint and a restore take against the bytes
// of a session's buffers (docs/performance.md "Checkpoint and restore").
//
//   clmux-ckpt-bench --clmuxd PATH [--events N] [--images] [--mib N]...
//   clmux-ckpt-bench --clmuxd PATH [--workers off|on] --sessions N --mib M
//                    [--iters K]
//
// For each size: a clmuxd of its own (--workers off, a private state
// directory), one session through the clmux ICD with buffers of N MiB in
// all (pieces of 64 MiB, CL_MEM_USE_HOST_PTR: on a CPU device the ICD puts
// larger plain buffers in the session's shared area, whose bytes a state
// file does not hold) written with known bytes, `checkpoint` on the
// admin socket (its answer says how long the drain and the writing took),
// SIGTERM (which writes the state again), a second clmuxd on the same
// directory, and the restore time from its log line. With --events N the
// session also holds N completed markers' events (for the --mib sizes
// after it), which a checkpoint writes and a restore makes again. With
// --images the bytes are in 2D images (RGBA, 8-bit channels, 4096 pixels
// wide, 64 MiB each) instead, written with clEnqueueWriteImage, which a
// checkpoint reads with clEnqueueReadImage and a restore writes again;
// the native side reads and writes them the same way. Needs
// OCL_ICD_VENDORS to name the clmux ICD and the native one.
//
// With --sessions, a daemon restart under N applications at work (see
// fleet()): M MiB of buffers split among them, each application's loop
// of write, kernel and read checked against what it computes itself,
// SIGTERM in the middle of it (each daemon --workers as given, off by
// default), a second clmuxd on the same directory,
// and every application resumed by its ICD; then the errors and wrong
// results the applications saw, the checkpoint's and the whole restore's
// time from the daemons' log lines, and their longest pause.
//
// Each is set beside what the native platform takes, in a fresh process,
// for the same bytes: to save, map each buffer and write it to a file; to
// restore, make the buffers and write the bytes into them. The ratios are
// native / clmux (1: as fast as an application doing it itself).
#define _GNU_SOURCE
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PIECE (64ull << 20)

static const char *clmuxd, *workers = "off";
/* Completed events the session holds (--events). */
static unsigned long events;
/* The bytes are in images (--images), not buffers. */
static int images;
/* --images: 2D images of this many pixels a row, 4 bytes each; a piece
 * (a whole number of MiB) is a whole number of rows. */
#define IMAGE_W 4096u
static char dir[64], sock[96], admin[96], state[96], logf[96];
/* The daemon running, and the process that started it. */
static pid_t daemon_pid, bench_pid;
/* --sessions: the applications running. */
static pid_t *apps;
static unsigned napps;

__attribute__((noreturn)) static void die(const char *what)
{
	fprintf(stderr, "ckpt-bench: %s\n", what);
	/* Not left behind, holding the caller's pipes. */
	if (daemon_pid > 0 && getpid() == bench_pid)
		kill(daemon_pid, SIGKILL);
	for (unsigned i = 0; i < napps && getpid() == bench_pid; i++)
		if (apps[i] > 0)
			kill(apps[i], SIGKILL);
	exit(1);
}

/* n bytes of the bench's memory (a buffer, or with --images an image)
 * in ctx, its bytes data written on q; NULL on an error. */
static cl_mem mem_make(cl_context ctx, cl_command_queue q, size_t n, const void *data,
		       cl_mem_flags flags, void *host)
{
	static const cl_image_format rgba8 = {CL_RGBA, CL_UNSIGNED_INT8};
	cl_image_desc d = {.image_type = CL_MEM_OBJECT_IMAGE2D,
			   .image_width = IMAGE_W,
			   .image_height = n / (IMAGE_W * 4)};
	const size_t o[3] = {0, 0, 0}, r[3] = {IMAGE_W, n / (IMAGE_W * 4), 1};
	cl_mem m;
	cl_int e;

	if (!images) {
		m = clCreateBuffer(ctx, flags, n, host, &e);
		if (m && clEnqueueWriteBuffer(q, m, CL_TRUE, 0, n, data, 0, NULL, NULL))
			return NULL;
		return m;
	}
	m = clCreateImage(ctx, CL_MEM_READ_WRITE, &rgba8, &d, NULL, &e);
	if (m && clEnqueueWriteImage(q, m, CL_TRUE, o, r, 0, 0, data, 0, NULL, NULL))
		return NULL;
	return m;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A device of the first platform whose name has (want) or has not
 * (!want) "clmux": a GPU first, as clmuxd picks by default. */
static cl_device_id device_of(int want)
{
	static const cl_device_type types[] = {CL_DEVICE_TYPE_GPU, CL_DEVICE_TYPE_ALL};
	cl_platform_id plats[16];
	cl_uint np = 0;
	cl_device_id dev = NULL;
	char name[256];

	clGetPlatformIDs(16, plats, &np);
	for (unsigned t = 0; t < 2 && !dev; t++)
		for (cl_uint i = 0; i < np && !dev; i++) {
			clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof(name), name, NULL);
			if (!strcasestr(name, "clmux") == !want &&
			    clGetDeviceIDs(plats[i], types[t], 1, &dev, NULL))
				dev = NULL;
		}
	return dev;
}

/* The native platform's time for the same bytes, in a process of its own
 * (its memory as fresh as a new daemon's): ms[0] to map every buffer and
 * write it to a file in dir, ms[1] to make the buffers and write their
 * bytes in. */
static void native(unsigned long long bytes, double ms[2])
{
	int pfd[2];
	pid_t pid;

	if (pipe(pfd))
		die("pipe");
	pid = fork();
	if (!pid) {
		unsigned nbuf = (unsigned)((bytes + PIECE - 1) / PIECE);
		cl_device_id dev = device_of(0);
		cl_context ctx;
		cl_command_queue q;
		cl_mem *bufs = calloc(nbuf, sizeof(*bufs));
		uint8_t *data = malloc(PIECE);
		char path[128];
		double r[2], t;
		cl_int e;
		int fd;

		if (!dev || !bufs || !data)
			die("no native platform");
		ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
		q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &e);
		memset(data, 7, PIECE);
		t = now_ms();
		for (unsigned i = 0; i < nbuf; i++) {
			size_t n = i + 1 < nbuf ? PIECE : bytes - (unsigned long long)i * PIECE;
			bufs[i] = mem_make(ctx, q, n, data, CL_MEM_READ_WRITE, NULL);
			if (!bufs[i])
				die("native buffer");
		}
		r[1] = now_ms() - t;
		snprintf(path, sizeof(path), "%s/native", dir);
		t = now_ms();
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		for (unsigned i = 0; i < nbuf; i++) {
			size_t n = i + 1 < nbuf ? PIECE : bytes - (unsigned long long)i * PIECE;
			const size_t o[3] = {0, 0, 0}, rg[3] = {IMAGE_W, n / (IMAGE_W * 4), 1};
			if (images) {
				/* As a checkpoint reads an image: its rows packed. */
				if (clEnqueueReadImage(q, bufs[i], CL_TRUE, o, rg, 0, 0, data, 0,
						       NULL, NULL) ||
				    fd < 0 || write(fd, data, n) != (ssize_t)n)
					die("native save");
				continue;
			}
			void *p = clEnqueueMapBuffer(q, bufs[i], CL_TRUE, CL_MAP_READ, 0, n, 0,
						     NULL, NULL, &e);
			if (e || fd < 0 || write(fd, p, n) != (ssize_t)n)
				die("native save");
			clEnqueueUnmapMemObject(q, bufs[i], p, 0, NULL, NULL);
		}
		clFinish(q);
		close(fd);
		r[0] = now_ms() - t;
		unlink(path);
		if (write(pfd[1], r, sizeof(r)) != sizeof(r))
			_exit(1);
		_exit(0);
	}
	close(pfd[1]);
	if (pid < 0 || read(pfd[0], ms, 2 * sizeof(*ms)) != 2 * sizeof(*ms))
		die("the native run failed");
	close(pfd[0]);
	waitpid(pid, NULL, 0);
}

static int accepts(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0), ok;

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	ok = connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0;
	close(fd);
	return ok;
}

static pid_t daemon_start(void)
{
	char listen[128];
	pid_t pid;

	unlink(sock);
	unlink(admin);
	snprintf(listen, sizeof(listen), "unix:%s", sock);
	pid = fork();
	if (pid < 0)
		die("fork");
	if (!pid) {
		int fd = open(logf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 2);
		execl(clmuxd, clmuxd, "--listen", listen, "--admin", admin, "--state-dir", state,
		      "--workers", workers, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 3000 && !(accepts(sock) && accepts(admin)); i++)
		usleep(10000);
	daemon_pid = pid;
	bench_pid = getpid();
	if (!accepts(sock))
		die("clmuxd did not start");
	return pid;
}

static void daemon_stop(pid_t pid)
{
	int st;

	kill(pid, SIGTERM);
	waitpid(pid, &st, 0);
	daemon_pid = 0;
}

static char *ask(const char *line)
{
	static char buf[4096];
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	size_t got = 0;
	ssize_t n;

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", admin);
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)))
		die("admin socket");
	if (write(fd, line, strlen(line)) != (ssize_t)strlen(line))
		die("admin write");
	while ((n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	close(fd);
	return buf;
}

/* The restore's milliseconds from the second daemon's log ("... in X ms;
 * waiting for its guest"), once it is there. */
static double restore_ms(void)
{
	for (int i = 0; i < 6000; i++) {
		char line[1024];
		FILE *f = fopen(logf, "r");
		while (f && fgets(line, sizeof(line), f)) {
			char *p = strstr(line, " buffer bytes in ");
			if (strstr(line, "restored from") && p)
				return strtod(p + strlen(" buffer bytes in "), NULL);
			if (strstr(line, "not restored"))
				die(line);
		}
		if (f)
			fclose(f);
		usleep(10000);
	}
	die("no restore in the log");
	return 0;
}

/* A private directory: the daemon's sockets, state directory and log. */
static void dir_make(void)
{
	char server[128];

	if (!mkdtemp(strcpy(dir, "/tmp/clmux-ckb-XXXXXX")))
		die("mkdtemp");
	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	snprintf(admin, sizeof(admin), "%s/admin.sock", dir);
	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(logf, sizeof(logf), "%s/clmuxd.log", dir);
	snprintf(server, sizeof(server), "unix:%s", sock);
	setenv("CLMUX_SERVER", server, 1);
}

static void dir_remove(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		die("rm");
}

static void one(unsigned long long mib)
{
	unsigned long long bytes = mib << 20;
	unsigned nbuf = (unsigned)((bytes + PIECE - 1) / PIECE);
	cl_mem *bufs = calloc(nbuf, sizeof(*bufs));
	uint8_t *data = malloc(PIECE);
	cl_device_id dev = NULL;
	cl_context ctx;
	cl_command_queue q;
	cl_int e;
	char name[256];
	double ck_ms = 0, rs_ms, nat[2];
	pid_t pid;
	char *a;

	dir_make();
	pid = daemon_start();

	/* A child per size: the ICD's session ends with it. */
	int pfd[2];
	if (pipe(pfd))
		die("pipe");
	pid_t app = fork();
	if (!app) {
		close(pfd[0]);
		dev = device_of(1);
		if (!dev)
			die("no clmux platform (OCL_ICD_VENDORS)");
		ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
		q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &e);
		for (unsigned i = 0; i < nbuf; i++) {
			size_t n = i + 1 < nbuf ? PIECE : bytes - (unsigned long long)i * PIECE;
			memset(data, (int)(i * 37 + 1), n);
			bufs[i] = mem_make(ctx, q, n, data, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
					   images ? NULL : malloc(n));
			if (!bufs[i])
				die("buffer");
		}
		for (unsigned long i = 0; i < events; i++) {
			cl_event ev; /* held until the process ends */
			if (clEnqueueMarkerWithWaitList(q, 0, NULL, &ev))
				die("marker");
		}
		clFinish(q);
		if (write(pfd[1], "r", 1) != 1)
			die("pipe");
		pause(); /* until killed, holding its session */
		_exit(0);
	}
	close(pfd[1]);
	if (read(pfd[0], name, 1) != 1)
		die("the application failed");
	a = ask("json checkpoint\n");
	if (strncmp(a, "ok\n", 3) || !strstr(a, "\"ms\":"))
		die(a);
	ck_ms = strtod(strstr(a, "\"ms\":") + 5, NULL);
	/* SIGTERM writes the state again, for the next daemon. */
	daemon_stop(pid);
	kill(app, SIGKILL);
	waitpid(app, NULL, 0);
	pid = daemon_start();
	rs_ms = restore_ms();
	daemon_stop(pid);
	native(bytes, nat);
	printf("%6llu MiB %s %6lu events  checkpoint %8.1f ms (%5.2f GB/s, native save %8.1f ms, "
	       "ratio %4.2f)  "
	       "restore %8.1f ms (%5.2f GB/s, native make+write %8.1f ms, ratio %4.2f)\n",
	       mib, images ? "images " : "buffers", events, ck_ms, bytes / ck_ms / 1e6, nat[0],
	       nat[0] / ck_ms, rs_ms, bytes / rs_ms / 1e6, nat[1], nat[1] / rs_ms);
	fflush(stdout);
	dir_remove();
	free(bufs);
	free(data);
	close(pfd[0]);
}

/* ---- --sessions: a restart under many applications at work ---- */

/* Work-items of a step: the uints of its input and output. */
#define GROUP 16384u

/* Each step reads and rewrites GROUP words of the session's buffer r, a
 * window that moves with k, so that across iterations r's bytes change
 * everywhere and a restore that lost any of them shows in a result. */
static const char step_src[] =
    "kernel void advance(global uint *r, global const uint *in, global uint *out, uint n,\n"
    "                 uint k)\n"
    "{\n"
    "	size_t j = get_global_id(0);\n"
    "	uint at = (uint)((j + (ulong)k * get_global_size(0)) % n);\n"
    "	uint v = r[at] * 2654435761u + in[j] + k;\n"
    "	out[j] = v;\n"
    "	r[at] = v;\n"
    "}\n";

/* One application's account, in memory it shares with the bench. */
struct app_stat {
	_Atomic unsigned iters;	     /* iterations done */
	_Atomic int ready, done;     /* its objects made; its last check made */
	unsigned errors, mismatches; /* calls that failed; results not as computed */
	double gap_ms;		     /* the longest time between two iterations */
};

/* Set by the bench: the applications end their loops. */
static _Atomic int *fleet_stop;

static void app_fail(struct app_stat *st, const char *what, cl_int e)
{
	fprintf(stderr, "ckpt-bench: application %d: %s: error %d\n", (int)getpid(), what, e);
	st->errors++;
}

/* Application idx: a session through the clmux ICD with a buffer r of
 * bytes holding known words (CL_MEM_USE_HOST_PTR, as in one()), then a
 * loop of write, kernel and read until told to stop, each result checked
 * against the step computed here on a copy of r; at the end r is read
 * whole and checked. Its first failed call ends the loop. */
static void app(unsigned idx, size_t bytes, struct app_stat *st)
{
	size_t n = bytes / 4, g = n < GROUP ? n : GROUP;
	uint32_t *mirror = malloc(bytes), *host = malloc(bytes), *in = malloc(g * 4),
		 *out = malloc(g * 4);
	cl_device_id dev = device_of(1);
	const char *text = step_src;
	cl_context ctx;
	cl_command_queue q;
	cl_program prog;
	cl_kernel kern;
	cl_mem r, bin, bout;
	cl_uint nw = (cl_uint)n;
	double last;
	cl_int e;

	if (!dev || !mirror || !host || !in || !out) {
		app_fail(st, dev ? "no memory" : "no clmux platform", 0);
		_exit(2);
	}
	for (size_t j = 0; j < n; j++)
		mirror[j] = (uint32_t)j * 0x9e3779b9u ^ idx * 0x85ebca6bu;
	memcpy(host, mirror, bytes);
	ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
	if (e) {
		app_fail(st, "context", e);
		_exit(3);
	}
	q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &e);
	prog = e ? NULL : clCreateProgramWithSource(ctx, 1, &text, NULL, &e);
	if (!e)
		e = clBuildProgram(prog, 1, &dev, NULL, NULL, NULL);
	kern = e ? NULL : clCreateKernel(prog, "advance", &e);
	r = e ? NULL
	      : clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes, host, &e);
	bin = e ? NULL : clCreateBuffer(ctx, CL_MEM_READ_ONLY, g * 4, NULL, &e);
	bout = e ? NULL : clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, g * 4, NULL, &e);
	if (e || (e = clSetKernelArg(kern, 0, sizeof(r), &r)) ||
	    (e = clSetKernelArg(kern, 1, sizeof(bin), &bin)) ||
	    (e = clSetKernelArg(kern, 2, sizeof(bout), &bout)) ||
	    (e = clSetKernelArg(kern, 3, sizeof(nw), &nw)) || (e = clFinish(q))) {
		app_fail(st, "set-up", e);
		_exit(3);
	}
	st->ready = 1;
	last = now_ms();
	for (cl_uint k = 0; !*fleet_stop; k++) {
		for (size_t j = 0; j < g; j++)
			in[j] = (uint32_t)(j + 1) * (k + 7) ^ idx;
		if ((e = clEnqueueWriteBuffer(q, bin, CL_FALSE, 0, g * 4, in, 0, NULL, NULL)) ||
		    (e = clSetKernelArg(kern, 4, sizeof(k), &k)) ||
		    (e = clEnqueueNDRangeKernel(q, kern, 1, NULL, &g, NULL, 0, NULL, NULL)) ||
		    (e = clEnqueueReadBuffer(q, bout, CL_TRUE, 0, g * 4, out, 0, NULL, NULL))) {
			app_fail(st, "iteration", e);
			break;
		}
		int same = 1;
		for (size_t j = 0; j < g; j++) {
			size_t at = (size_t)((j + (uint64_t)k * g) % n);
			mirror[at] = mirror[at] * 2654435761u + in[j] + k;
			same &= out[j] == mirror[at];
		}
		st->mismatches += !same;
		double t = now_ms();
		if (t - last > st->gap_ms)
			st->gap_ms = t - last;
		last = t;
		st->iters++;
	}
	if (!st->errors) {
		e = clEnqueueReadBuffer(q, r, CL_TRUE, 0, bytes, host, 0, NULL, NULL);
		if (e)
			app_fail(st, "the last read", e);
		else
			st->mismatches += memcmp(host, mirror, bytes) != 0;
	}
	st->done = 1;
	_exit(0);
}

/* The sums of the lines of the log that begin with what ("checkpoint: ",
 * "restore: "; a worker logs its own): sessions, failed and bytes, and
 * the longest time. The count of sessions they name, failed included. */
static unsigned log_sums(const char *what, unsigned long long *bytes, double *ms, unsigned *failed)
{
	unsigned sessions = 0;
	char line[1024];
	FILE *f = fopen(logf, "r");

	*bytes = 0;
	*ms = 0;
	*failed = 0;
	while (f && fgets(line, sizeof(line), f)) {
		char *p = strstr(line, what), *b = p ? strstr(p, " buffer bytes) in ") : NULL;
		char *c = p ? strstr(p, "ms, ") : NULL;
		if (!b || !c)
			continue;
		while (b > p && b[-1] != '(' && b[-1] != ' ')
			b--;
		sessions += (unsigned)strtoul(p + strlen(what), NULL, 10);
		*bytes += strtoull(b, NULL, 10);
		double t = strtod(strstr(b, ") in ") + 5, NULL);
		*ms = t > *ms ? t : *ms;
		*failed += (unsigned)strtoul(c + 4, NULL, 10);
	}
	if (f)
		fclose(f);
	return sessions + *failed;
}

/* The log's lines that have what, as they are, indented. */
static void log_show(const char *what)
{
	char line[1024];
	FILE *f = fopen(logf, "r");

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, what))
			printf("  %s", line);
	if (f)
		fclose(f);
}

/* Waits until every application has done at least want[i] iterations
 * (NULL: is ready); dies naming the first that ended or is still short
 * after limit_s seconds. */
static void apps_reach(struct app_stat *st, const unsigned *want, double limit_s)
{
	double end = now_ms() + limit_s * 1e3;
	char why[128];

	for (;;) {
		unsigned short_of = napps;
		for (unsigned i = 0; i < napps && short_of == napps; i++) {
			if (st[i].done || st[i].errors || waitpid(apps[i], NULL, WNOHANG)) {
				snprintf(why, sizeof(why), "application %u ended early (%u errors)",
					 i, st[i].errors);
				die(why);
			}
			if (want ? st[i].iters < want[i] : !st[i].ready)
				short_of = i;
		}
		if (short_of == napps)
			return;
		if (now_ms() > end) {
			snprintf(why, sizeof(why), "application %u: %u iterations after %.0f s",
				 short_of, st[short_of].iters, limit_s);
			die(why);
		}
		usleep(10000);
	}
}

/*
 * nsess applications, mib MiB of buffers among them: each opens its
 * session through the clmux ICD (forked before this process makes any
 * OpenCL call: a child forked after one would share its ICD's session)
 * and runs app() against the first daemon. Once each has done iters
 * iterations, SIGTERM: the daemon drains, writes every session to the
 * state directory and ends; a second clmuxd on the directory restores
 * them, and each application's ICD resumes its session by itself. Once
 * each has done iters more, they stop and check their buffer whole.
 * Returns 1 when every application saw no error and no wrong result.
 */
static int fleet(unsigned nsess, unsigned long long mib, unsigned iters)
{
	size_t per = (size_t)((mib << 20) / nsess) & ~(size_t)3;
	struct app_stat *st;
	unsigned *want = calloc(nsess, sizeof(*want)), errors = 0, mismatches = 0, total = 0;
	unsigned ck_failed, rs_failed;
	unsigned long long ck_bytes, rs_bytes;
	double ck_ms, rs_ms, gap = 0, nat[2];
	pid_t pid;
	int stt;

	if (per < 4096 || !want)
		die("--mib: too little for so many sessions (4 KiB each at least)");
	st = mmap(NULL, nsess * sizeof(*st) + 64, PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	apps = calloc(nsess, sizeof(*apps));
	if (st == MAP_FAILED || !apps)
		die("no memory");
	memset(st, 0, nsess * sizeof(*st) + 64);
	fleet_stop = (_Atomic int *)(st + nsess);
	dir_make();
	pid = daemon_start();
	for (napps = 0; napps < nsess; napps++) {
		apps[napps] = fork();
		if (apps[napps] < 0)
			die("fork");
		if (!apps[napps]) {
			daemon_pid = 0;
			app(napps, per, &st[napps]);
		}
	}
	apps_reach(st, NULL, 600);
	for (unsigned i = 0; i < nsess; i++)
		want[i] = iters;
	apps_reach(st, want, 600);
	/* The checkpoint: at SIGTERM, with every application mid-loop. */
	daemon_stop(pid);
	for (unsigned i = 0; i < nsess; i++)
		want[i] = st[i].iters + iters;
	if (log_sums("checkpoint: ", &ck_bytes, &ck_ms, &ck_failed) != nsess || ck_failed)
		die("the checkpoint did not write every session (see its log)");
	pid = daemon_start();
	for (int i = 0; log_sums("restore: ", &rs_bytes, &rs_ms, &rs_failed) < nsess; i++) {
		if (i > 60000)
			die("no restore of every session in the log");
		usleep(10000);
	}
	apps_reach(st, want, 300);
	*fleet_stop = 1;
	for (unsigned i = 0; i < nsess; i++) {
		if (waitpid(apps[i], &stt, 0) != apps[i] || !WIFEXITED(stt) || WEXITSTATUS(stt) ||
		    !st[i].done)
			errors++;
		apps[i] = 0;
		errors += st[i].errors;
		mismatches += st[i].mismatches;
		total += st[i].iters;
		gap = st[i].gap_ms > gap ? st[i].gap_ms : gap;
	}
	daemon_stop(pid);
	native(rs_bytes, nat);
	printf("%u sessions, %llu MiB, --workers %s: %u application errors, %u checksum "
	       "mismatches, %u iterations, %u sessions not restored\n",
	       nsess, mib, workers, errors, mismatches, total, rs_failed);
	printf("  checkpoint %8.1f ms for %llu bytes (%5.2f GB/s, native save %8.1f ms, ratio "
	       "%4.2f)\n",
	       ck_ms, ck_bytes, ck_bytes / ck_ms / 1e6, nat[0], nat[0] / ck_ms);
	printf(
	    "  restore    %8.1f ms for %llu bytes (%5.2f GB/s, native make+write %8.1f ms, ratio "
	    "%4.2f)\n",
	    rs_ms, rs_bytes, rs_bytes / rs_ms / 1e6, nat[1], nat[1] / rs_ms);
	printf("  longest pause of an application: %.1f ms\n", gap);
	log_show("the longest requests");
	fflush(stdout);
	dir_remove();
	munmap(st, nsess * sizeof(*st) + 64);
	free(want);
	return !errors && !mismatches && !rs_failed;
}

int main(int argc, char **argv)
{
	unsigned sessions = 0, iters = 3;
	int sizes = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--clmuxd") && i + 1 < argc) {
			clmuxd = argv[++i];
		} else if (!strcmp(argv[i], "--workers") && i + 1 < argc) {
			workers = argv[++i];
		} else if (!strcmp(argv[i], "--sessions") && i + 1 < argc) {
			sessions = (unsigned)strtoul(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
			iters = (unsigned)strtoul(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--mib") && i + 1 < argc) {
			sizes++;
			i++;
		} else if (!strcmp(argv[i], "--events") && i + 1 < argc) {
			i++;
		} else if (!strcmp(argv[i], "--images")) {
			images = 1;
		} else {
			fprintf(stderr, "usage: clmux-ckpt-bench --clmuxd PATH [--events N] "
					"[--images] [--mib N]...\n"
					"       clmux-ckpt-bench --clmuxd PATH [--workers off|on] "
					"--sessions N --mib M [--iters K]\n");
			return 2;
		}
	}
	if (!clmuxd)
		die("--clmuxd PATH");
	if (sessions && images)
		die("--images: without --sessions");
	if (sessions) {
		unsigned long long mib = 0;
		for (int i = 1; i + 1 < argc; i++)
			if (!strcmp(argv[i], "--mib"))
				mib = strtoull(argv[i + 1], NULL, 10);
		if (sizes != 1 || !iters)
			die("--sessions: one --mib, and --iters 1 or more");
		return fleet(sessions, mib, iters) ? 0 : 1;
	}
	/* With workers an admin checkpoint only asks them: no time comes back. */
	if (strcmp(workers, "off"))
		die("--workers on: with --sessions only");
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--mib"))
			one(strtoull(argv[++i], NULL, 10));
		else if (!strcmp(argv[i], "--events"))
			events = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--clmuxd") || !strcmp(argv[i], "--workers"))
			i++;
	if (!sizes)
		for (unsigned long long m = 1; m <= 256; m *= 256)
			one(m);
	return 0;
}
