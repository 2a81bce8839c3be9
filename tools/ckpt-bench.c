// SPDX-License-Identifier: MIT
// ckpt-bench: how long a checkpoint and a restore take against the bytes
// of a session's buffers (docs/performance.md "Checkpoint and restore").
//
//   clmux-ckpt-bench --clmuxd PATH [--events N] [--mib N]...
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
// after it), which a checkpoint writes and a restore makes again. Needs
// OCL_ICD_VENDORS to name the clmux ICD and the native one.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PIECE (64ull << 20)

static const char *clmuxd;
/* Completed events the session holds (--events). */
static unsigned long events;
static char dir[64], sock[96], admin[96], state[96], logf[96];
/* The daemon running, and the process that started it. */
static pid_t daemon_pid, bench_pid;

__attribute__((noreturn)) static void die(const char *what)
{
	fprintf(stderr, "ckpt-bench: %s\n", what);
	/* Not left behind, holding the caller's pipes. */
	if (daemon_pid > 0 && getpid() == bench_pid)
		kill(daemon_pid, SIGKILL);
	exit(1);
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
			bufs[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n, NULL, &e);
			if (e ||
			    clEnqueueWriteBuffer(q, bufs[i], CL_TRUE, 0, n, data, 0, NULL, NULL))
				die("native buffer");
		}
		r[1] = now_ms() - t;
		snprintf(path, sizeof(path), "%s/native", dir);
		t = now_ms();
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		for (unsigned i = 0; i < nbuf; i++) {
			size_t n = i + 1 < nbuf ? PIECE : bytes - (unsigned long long)i * PIECE;
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
		      "--workers", "off", (char *)NULL);
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
	char name[256], server[128];
	double ck_ms = 0, rs_ms, nat[2];
	pid_t pid;
	char *a;

	if (!mkdtemp(strcpy(dir, "/tmp/clmux-ckb-XXXXXX")))
		die("mkdtemp");
	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	snprintf(admin, sizeof(admin), "%s/admin.sock", dir);
	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(logf, sizeof(logf), "%s/clmuxd.log", dir);
	snprintf(server, sizeof(server), "unix:%s", sock);
	setenv("CLMUX_SERVER", server, 1);
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
			bufs[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, n,
						 malloc(n), &e);
			if (e ||
			    clEnqueueWriteBuffer(q, bufs[i], CL_TRUE, 0, n, data, 0, NULL, NULL))
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
	printf("%6llu MiB %6lu events  checkpoint %8.1f ms (%5.2f GB/s, native save %8.1f ms, "
	       "ratio %4.2f)  "
	       "restore %8.1f ms (%5.2f GB/s, native make+write %8.1f ms, ratio %4.2f)\n",
	       mib, events, ck_ms, bytes / ck_ms / 1e6, nat[0], nat[0] / ck_ms, rs_ms,
	       bytes / rs_ms / 1e6, nat[1], nat[1] / rs_ms);
	fflush(stdout);
	snprintf(name, sizeof(name), "rm -rf '%s'", dir);
	if (system(name))
		die("rm");
	free(bufs);
	free(data);
	close(pfd[0]);
}

int main(int argc, char **argv)
{
	int sizes = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--clmuxd") && i + 1 < argc) {
			clmuxd = argv[++i];
		} else if (!strcmp(argv[i], "--mib") && i + 1 < argc) {
			sizes++;
			i++;
		} else if (!strcmp(argv[i], "--events") && i + 1 < argc) {
			i++;
		} else {
			fprintf(stderr, "usage: clmux-ckpt-bench --clmuxd PATH [--events N] "
					"[--mib N]...\n");
			return 2;
		}
	}
	if (!clmuxd)
		die("--clmuxd PATH");
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--mib"))
			one(strtoull(argv[++i], NULL, 10));
		else if (!strcmp(argv[i], "--events"))
			events = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--clmuxd"))
			i++;
	if (!sizes)
		for (unsigned long long m = 1; m <= 256; m *= 256)
			one(m);
	return 0;
}
