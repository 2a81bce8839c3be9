// SPDX-License-Identifier: MIT
// Containment: tenant A's kernel stores far outside its buffer, or never
// ends, while tenant B runs a checksummed workload through the same clmuxd.
// Natively the out-of-bounds store kills A's process; through clmux it
// ends A's worker only: A gets an error, B finishes with every checksum
// right, the admin socket answers, and A's next process works. An endless
// kernel of A costs B only a share of the device; `clmuxctl evict a` ends
// it, and the daemon still exits promptly on SIGTERM with one running. A
// tenant's kernel-time ends its endless kernel the same way. A printf
// hidden from the scan reaches nobody else (nor the daemon's stdout, with
// worker processes or without), a group sharing one context keeps each
// tenant's results, and a compile bomb under build limits fails that build
// alone.
#define _GNU_SOURCE
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

#include "e2e.h"

#define B_ROUNDS 100
#define B_N 65536

static char dir[40], sock_a[64], sock_b[64], admin[64];
static pid_t daemon_pid;

/* Whether the next daemon runs every tenant in its own process. */
static int daemon_workers_off;

/* A daemon with listeners for tenants a and b, and conf (or none) as its
 * configuration file. */
static void daemon_start_with(const char *conf)
{
	const char *bin = getenv("CLMUXD");
	char la[200], lb[200], cpath[96];

	ck_assert_msg(bin && *bin, "CLMUXD unset");
	snprintf(dir, sizeof(dir), "/tmp/clmux-contain-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sock_a, sizeof(sock_a), "%s/a.sock", dir);
	snprintf(sock_b, sizeof(sock_b), "%s/b.sock", dir);
	snprintf(admin, sizeof(admin), "%s/admin.sock", dir);
	snprintf(la, sizeof(la), "unix:%s,tenant=a", sock_a);
	snprintf(lb, sizeof(lb), "unix:%s,tenant=b", sock_b);
	snprintf(cpath, sizeof(cpath), "%s/clmuxd.conf", dir);
	if (conf) {
		FILE *f = fopen(cpath, "w");
		ck_assert_ptr_nonnull(f);
		fputs(conf, f);
		fclose(f);
	}
	daemon_pid = fork();
	ck_assert_int_ge(daemon_pid, 0);
	if (!daemon_pid) {
		char out[80];
		int fd;
		/* The daemon's stdout, where no tenant's output may land. */
		snprintf(out, sizeof(out), "%s/stdout", dir);
		fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0)
			dup2(fd, 1);
		char *argv[12] = {(char *)bin, "--listen", la, "--listen", lb, "--admin", admin};
		int argc = 7;

		setenv("TMPDIR", dir, 1);
		if (conf) {
			argv[argc++] = "--config";
			argv[argc++] = cpath;
		}
		if (daemon_workers_off) {
			argv[argc++] = "--workers";
			argv[argc++] = "off";
		}
		argv[argc] = NULL;
		execv(bin, argv);
		_exit(127);
	}
	for (int i = 0; i < 3000; i++) {
		const char *paths[] = { admin, sock_a, sock_b };
		int ok = 1;
		for (int k = 0; k < 3 && ok; k++) {
			struct sockaddr_un sun = { .sun_family = AF_UNIX };
			int fd = socket(AF_UNIX, SOCK_STREAM, 0);
			snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", paths[k]);
			ok = connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0;
			close(fd);
		}
		if (ok)
			return;
		usleep(10000);
	}
	ck_abort_msg("clmuxd did not start");
}

static void daemon_start(void)
{
	daemon_start_with(NULL);
}

/* Sends one admin line, returns the whole answer (malloc'd). */
static char *ask(const char *line)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	char *buf = calloc(1, 65536);
	size_t got = 0;
	ssize_t n;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", admin);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	ck_assert_int_eq(send(fd, line, strlen(line), MSG_NOSIGNAL), (ssize_t)strlen(line));
	while ((n = recv(fd, buf + got, 65535 - got, 0)) > 0)
		got += (size_t)n;
	close(fd);
	return buf;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- what the tenants run, each in a process of its own ---- */

static const char b_src[] = "kernel void churn(global const uint *a, global uint *b, uint r) {\n"
			    "  size_t i = get_global_id(0); b[i] = a[i] * 2654435761u + r; }\n";

/* B: rounds of launch + blocking read, each checked on the host. Exit 0
 * when every round's checksum was right. */
static int churn(struct e2e_plat *p, int rounds)
{
	static uint32_t a[B_N], b[B_N];
	cl_program prog;
	cl_kernel k;
	cl_mem ma, mb;
	cl_int e;

	for (uint32_t i = 0; i < B_N; i++)
		a[i] = i * 7u + 1u;
	prog = e2e_program_build(p, b_src, NULL);
	k = e2e_kernel_create(p, prog, "churn");
	ma = clCreateBuffer(p->context, CL_MEM_COPY_HOST_PTR, sizeof(a), a, &e);
	mb = clCreateBuffer(p->context, CL_MEM_READ_WRITE, sizeof(b), NULL, &e);
	if (e)
		return 3;
	for (int r = 0; r < rounds; r++) {
		size_t g = B_N;
		cl_uint rr = (cl_uint)r;
		clSetKernelArg(k, 0, sizeof(ma), &ma);
		clSetKernelArg(k, 1, sizeof(mb), &mb);
		clSetKernelArg(k, 2, sizeof(rr), &rr);
		if (clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &g, NULL, 0, NULL, NULL) ||
		    clEnqueueReadBuffer(p->queue, mb, CL_TRUE, 0, sizeof(b), b, 0, NULL, NULL))
			return 4;
		for (uint32_t i = 0; i < B_N; i++)
			if (b[i] != a[i] * 2654435761u + rr) {
				fprintf(stderr, "e2e_contain: round %d word %u wrong\n", r, i);
				return 5;
			}
	}
	clReleaseMemObject(ma);
	clReleaseMemObject(mb);
	clReleaseKernel(k);
	clReleaseProgram(prog);
	return 0;
}

static int run_b(const char *server, int rounds)
{
	struct e2e_plat p;

	setenv("CLMUX_SERVER", server, 1);
	if (e2e_plat_init(&p, "virtual", e2e_virtual_match()))
		return 2;
	return churn(&p, rounds);
}

/* A's bad kernels. */
static const char oob_src[] = "kernel void oob(global int *p) { p[(ulong)1 << 38] = 1; }\n";
static const char spin_src[] =
	"kernel void spin(volatile global int *p) { while (p[0] == 0) p[1]++; }\n";

/* A: builds and launches one kernel of src on one work-item, then waits;
 * the status of clFinish is the exit status's concern: 0 when it
 * returned CL_SUCCESS, 1 when it returned an error. */
static int run_a(const char *server, const char *match, const char *src, const char *name,
		 int started)
{
	struct e2e_plat p;
	cl_program prog;
	cl_kernel k;
	cl_mem m;
	cl_int e;
	size_t g = 1;
	int zero[4] = { 0 };

	if (server)
		setenv("CLMUX_SERVER", server, 1);
	if (e2e_plat_init(&p, server ? "virtual" : "native", match))
		return 2;
	prog = e2e_program_build(&p, src, NULL);
	k = e2e_kernel_create(&p, prog, name);
	m = clCreateBuffer(p.context, CL_MEM_COPY_HOST_PTR, sizeof(zero), zero, &e);
	if (e)
		return 3;
	clSetKernelArg(k, 0, sizeof(m), &m);
	if (clEnqueueNDRangeKernel(p.queue, k, 1, NULL, &g, NULL, 0, NULL, NULL))
		return 1;
	clFlush(p.queue);
	/* Launched: the parent may go on (a status query makes sure the
	 * daemon has it). */
	clGetDeviceInfo(p.device, CL_DEVICE_NAME, 0, NULL, NULL);
	if (started >= 0 && write(started, "s", 1) != 1)
		return 4;
	e = clFinish(p.queue);
	fprintf(stderr, "e2e_contain: A's clFinish: %s\n", e2e_cl_strerror(e));
	return e == CL_SUCCESS ? 0 : 1;
}

static pid_t spawn_b(int rounds)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (!pid) {
		char server[160];
		snprintf(server, sizeof(server), "unix:%s", sock_b);
		_exit(run_b(server, rounds));
	}
	return pid;
}

/* A in a process of its own; with wait set, returns once its kernel is
 * launched. */
static pid_t spawn_a(const char *src, const char *name, int native, int wait)
{
	int fds[2];
	pid_t pid;
	char x;

	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		char server[160];
		close(fds[0]);
		snprintf(server, sizeof(server), "unix:%s", sock_a);
		_exit(native ? run_a(NULL, e2e_native_match(), src, name, wait ? fds[1] : -1)
			     : run_a(server, e2e_virtual_match(), src, name, wait ? fds[1] : -1));
	}
	close(fds[1]);
	if (wait)
		ck_assert_msg(read(fds[0], &x, 1) == 1, "A did not launch its kernel");
	close(fds[0]);
	return pid;
}

static int reap(pid_t pid)
{
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return st;
}

static void daemon_alive(void)
{
	char *r = ask("tenants\n");

	ck_assert_msg(!strncmp(r, "ok\n", 3), "admin: %s", r);
	free(r);
	ck_assert_int_eq(kill(daemon_pid, 0), 0);
}

/* The fds of process pid that are sockets (their inodes) or io_urings. */
static unsigned fds_of(pid_t pid, unsigned long *socks, unsigned max, unsigned *urings)
{
	char path[64], link[128];
	unsigned n = 0;

	*urings = 0;
	for (int fd = 0; fd < 1024; fd++) {
		ssize_t k;
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
		k = readlink(path, link, sizeof(link) - 1);
		if (k <= 0)
			continue;
		link[k] = '\0';
		if (!strncmp(link, "socket:[", 8) && n < max)
			socks[n++] = strtoul(link + 8, NULL, 10);
		else if (strstr(link, "io_uring"))
			(*urings)++;
	}
	return n;
}

/* Each worker holds its own io_uring and sockets only: no socket of
 * another worker (another tenant's peers, listeners, control channel),
 * and not the front end's io_uring. */
static void workers_hold_their_own(void)
{
	static unsigned long socks[16][256];
	unsigned nsock[16], nw = 0, urings;
	char path[64], kids[512];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)daemon_pid,
		 (int)daemon_pid);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(kids, sizeof(kids), f));
	fclose(f);
	for (char *t = strtok(kids, " \n"); t && nw < 16; t = strtok(NULL, " \n")) {
		nsock[nw] = fds_of((pid_t)atoi(t), socks[nw], 256, &urings);
		ck_assert_msg(urings == 1, "worker %s holds %u io_urings", t, urings);
		nw++;
	}
	ck_assert_uint_ge(nw, 2);
	for (unsigned i = 0; i < nw; i++)
		for (unsigned j = i + 1; j < nw; j++)
			for (unsigned a = 0; a < nsock[i]; a++)
				for (unsigned b = 0; b < nsock[j]; b++)
					ck_assert_msg(socks[i][a] != socks[j][b],
						      "two workers share socket %lu", socks[i][a]);
}

/* A fresh process of A gets a working context at once. */
static void a_works_again(void)
{
	pid_t b = spawn_b(3);
	int st;
	pid_t a = fork();

	ck_assert_int_ge(a, 0);
	if (!a) {
		char server[160];
		snprintf(server, sizeof(server), "unix:%s", sock_a);
		_exit(run_b(server, 3));
	}
	st = reap(a);
	ck_assert_msg(WIFEXITED(st) && !WEXITSTATUS(st), "A's new process: status %d", st);
	st = reap(b);
	ck_assert_msg(WIFEXITED(st) && !WEXITSTATUS(st), "B: status %d", st);
}

static void daemon_stop_keep(void)
{
	int st;

	kill(daemon_pid, SIGTERM);
	st = reap(daemon_pid);
	ck_assert_msg(WIFEXITED(st) && !WEXITSTATUS(st), "clmuxd ended with %d", st);
}

static void daemon_cleanup(void)
{
	char p[200];

	snprintf(p, sizeof(p), "rm -rf %s", dir);
	ck_assert_int_eq(system(p), 0);
}

static void daemon_stop(void)
{
	daemon_stop_keep();
	daemon_cleanup();
}

START_TEST(out_of_bounds_store)
{
	pid_t a, b;
	int st, want;

	/* Natively the store is the process's own SIGSEGV on PoCL, and a
	 * failed clFinish on NVIDIA (exit 1). Where it lands in mapped memory
	 * (an ASan build's shadow), nothing happens (exit 0). */
	st = reap(spawn_a(oob_src, "oob", 1, 0));
	fprintf(stderr, "e2e_contain: natively, A ended with %s %d\n",
		WIFSIGNALED(st) ? "signal" : "status",
		WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	/* Through clmux A lives: where the native process died, its clFinish
	 * fails; otherwise it ends as natively. */
	want = WIFSIGNALED(st) ? 1 : WEXITSTATUS(st);
	daemon_start();
	b = spawn_b(B_ROUNDS);
	a = spawn_a(oob_src, "oob", 0, 0);
	st = reap(a);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == want, "A: status %d, want exit %d", st,
		      want);
	st = reap(b);
	ck_assert_msg(WIFEXITED(st) && !WEXITSTATUS(st), "B: status %d", st);
	daemon_alive();
	a_works_again();
	workers_hold_their_own();
	daemon_stop();
}
END_TEST

START_TEST(endless_kernel)
{
	pid_t a, b;
	double t0;
	int st;
	char *r;

	double alone;

	daemon_start();
	t0 = now_s();
	st = reap(spawn_b(B_ROUNDS));
	ck_assert_msg(WIFEXITED(st) && !WEXITSTATUS(st), "B alone: status %d", st);
	alone = now_s() - t0;
	/* B beside A's kernel, which spins on the device all along. */
	a = spawn_a(spin_src, "spin", 0, 1);
	t0 = now_s();
	b = spawn_b(B_ROUNDS);
	st = reap(b);
	ck_assert_msg(WIFEXITED(st) && !WEXITSTATUS(st), "B beside the endless kernel: status %d",
		      st);
	fprintf(stderr,
		"e2e_contain: B's %d rounds alone %.3f s, beside the endless kernel %.3f s "
		"(rate %.2f of alone)\n",
		B_ROUNDS, alone, now_s() - t0, alone / (now_s() - t0));
	ck_assert_int_eq(waitpid(a, &st, WNOHANG), 0); /* A still waits */
	t0 = now_s();
	r = ask("evict a\n");
	ck_assert_msg(!strcmp(r, "ok\n1 session of a closed\n"), "evict: %s", r);
	free(r);
	st = reap(a);
	fprintf(stderr, "e2e_contain: evict ended A's endless kernel in %.3f s\n", now_s() - t0);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "A after evict: status %d", st);
	daemon_alive();
	t0 = now_s();
	a_works_again();
	fprintf(stderr, "e2e_contain: B's and A's next 3 rounds after the evict: %.3f s\n",
		now_s() - t0);
	/* SIGTERM with an endless kernel running. */
	a = spawn_a(spin_src, "spin", 0, 1);
	t0 = now_s();
	daemon_stop();
	fprintf(stderr, "e2e_contain: SIGTERM with an endless kernel: exited in %.3f s\n",
		now_s() - t0);
	st = reap(a);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "A after SIGTERM: status %d", st);
}
END_TEST

/* A's endless kernel under kernel-time = 1: the watchdog has A's worker
 * ended, A's clFinish fails, B's rounds run throughout, and A's next
 * process works. */
START_TEST(kernel_time)
{
	double t0;
	pid_t a, b;
	int st;

	daemon_start_with("[tenant a]\nkernel-time = 1\n\n[tenant b]\n");
	a = spawn_a(spin_src, "spin", 0, 1);
	t0 = now_s();
	b = spawn_b(B_ROUNDS);
	st = reap(a);
	fprintf(stderr, "e2e_contain: kernel-time 1 s ended A's endless kernel after %.3f s\n",
		now_s() - t0);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "A past kernel-time: status %d", st);
	st = reap(b);
	ck_assert_msg(WIFEXITED(st) && !WEXITSTATUS(st), "B: status %d", st);
	daemon_alive();
	a_works_again();
	daemon_stop();
}
END_TEST

/* Whether the file at path holds needle. */
static int file_has(const char *path, const char *needle)
{
	char *buf = calloc(1, 1 << 20);
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, (1 << 20) - 1, f) : 0;
	int has;

	if (f)
		fclose(f);
	buf[n] = '\0';
	has = strstr(buf, needle) != NULL;
	free(buf);
	return has;
}

/* A's kernel prints, but its text hides printf from any scan (a line
 * splice); B's prints its own line. */
static const char hidden_src[] = "kernel void k(global int *p) {\n"
				 "  if (get_global_id(0) == 0) pr\\\nintf(\"A-SECRET %d\\n\", p[0]); }\n";
static const char shown_src[] = "kernel void k(global int *p) {\n"
				"  if (get_global_id(0) == 0) printf(\"B-LINE %d\\n\", p[0]); }\n";

/* Launches src's kernel rounds times, each waited for; stdout to out. */
static int run_printer(const char *sock, const char *src, int rounds, const char *out)
{
	struct e2e_plat p;
	char server[160];
	cl_program prog;
	cl_kernel k;
	cl_mem m;
	cl_int e;
	size_t g = 64;
	int zero[64] = { 0 };
	int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || dup2(fd, 1) < 0)
		return 2;
	snprintf(server, sizeof(server), "unix:%s", sock);
	setenv("CLMUX_SERVER", server, 1);
	if (e2e_plat_init(&p, "virtual", e2e_virtual_match()))
		return 2;
	prog = e2e_program_build(&p, src, NULL);
	k = e2e_kernel_create(&p, prog, "k");
	m = clCreateBuffer(p.context, CL_MEM_COPY_HOST_PTR, sizeof(zero), zero, &e);
	clSetKernelArg(k, 0, sizeof(m), &m);
	for (int r = 0; r < rounds; r++)
		if (clEnqueueNDRangeKernel(p.queue, k, 1, NULL, &g, NULL, 0, NULL, NULL) ||
		    clFinish(p.queue))
			return 3;
	fflush(stdout);
	return 0;
}

/* Case 8 of the hostile-tenant issue: A's hidden printf, run while B's
 * printing launches run, reaches neither B's output nor the daemon's. */
START_TEST(hidden_printf)
{
	char out_a[96], out_b[96], log[96];
	pid_t a, b;
	int st;

	daemon_start();
	snprintf(out_a, sizeof(out_a), "%s/a.out", dir);
	snprintf(out_b, sizeof(out_b), "%s/b.out", dir);
	snprintf(log, sizeof(log), "%s/stdout", dir);
	a = fork();
	ck_assert_int_ge(a, 0);
	if (!a)
		_exit(run_printer(sock_a, hidden_src, 200, out_a));
	b = fork();
	ck_assert_int_ge(b, 0);
	if (!b)
		_exit(run_printer(sock_b, shown_src, 50, out_b));
	st = reap(a);
	ck_assert_msg(WIFEXITED(st) && !WEXITSTATUS(st), "A: status %d", st);
	st = reap(b);
	ck_assert_msg(WIFEXITED(st) && !WEXITSTATUS(st), "B: status %d", st);
	ck_assert_msg(file_has(out_b, "B-LINE 0"), "B's own output is missing");
	ck_assert_msg(!file_has(out_b, "A-SECRET"), "A's output reached B");
	daemon_stop_keep();
	ck_assert_msg(!file_has(log, "A-SECRET"), "A's output reached the daemon's stdout");
	daemon_cleanup();
}
END_TEST

/* The same hidden printf with every tenant in the daemon's one process
 * (--workers off): what no printing launch claims is dropped there too,
 * and never reaches the daemon's stdout. */
START_TEST(hidden_printf_workers_off)
{
	char out_a[96], log[96];
	pid_t a;
	int st;

	daemon_workers_off = 1;
	daemon_start();
	daemon_workers_off = 0;
	snprintf(out_a, sizeof(out_a), "%s/a.out", dir);
	snprintf(log, sizeof(log), "%s/stdout", dir);
	a = fork();
	ck_assert_int_ge(a, 0);
	if (!a)
		_exit(run_printer(sock_a, hidden_src, 50, out_a));
	st = reap(a);
	ck_assert_msg(WIFEXITED(st) && !WEXITSTATUS(st), "A: status %d", st);
	daemon_stop_keep();
	ck_assert_msg(!file_has(log, "A-SECRET"), "A's output reached the daemon's stdout");
	daemon_cleanup();
}
END_TEST

/* Two tenants of a group sharing one native context run checksummed work
 * at once in one worker: each gets its own results. */
START_TEST(shared_group)
{
	pid_t a, b;
	int st;
	char *r;

	daemon_start_with("[tenant a]\ngroup = g\ncontext = shared\n[tenant b]\ngroup = g\n");
	r = ask("workers\n");
	ck_assert_msg(strstr(r, "t:g ") && (strstr(r, "  a b\n") || strstr(r, "  b a\n")),
		      "%s", r);
	free(r);
	a = fork();
	ck_assert_int_ge(a, 0);
	if (!a) {
		char server[160];
		snprintf(server, sizeof(server), "unix:%s", sock_a);
		_exit(run_b(server, B_ROUNDS));
	}
	b = spawn_b(B_ROUNDS);
	st = reap(a);
	ck_assert_msg(WIFEXITED(st) && !WEXITSTATUS(st), "a: status %d", st);
	st = reap(b);
	ck_assert_msg(WIFEXITED(st) && !WEXITSTATUS(st), "b: status %d", st);
	daemon_stop();
}
END_TEST

/* 2^26 copies of a statement: natively about 6.5 GB and over a minute of
 * PoCL's compiler, far past a 1 GiB limit. */
#define BOMB_DEPTH 26

/* A: the bomb, its status and log, then ordinary rounds in the same
 * session (so the same worker: it lived). */
static int run_bomb(const char *server)
{
	struct e2e_plat p;
	char src[4096], log[1024] = "";
	cl_build_status bst = CL_BUILD_SUCCESS;
	size_t n = 0;
	cl_program prog;
	cl_int e;
	double t0;

	setenv("CLMUX_SERVER", server, 1);
	if (e2e_plat_init(&p, "virtual", e2e_virtual_match()))
		return 2;
	n += (size_t)snprintf(src + n, sizeof(src) - n, "#define A1(x) x x\n");
	for (int d = 2; d <= BOMB_DEPTH; d++)
		n += (size_t)snprintf(src + n, sizeof(src) - n, "#define A%d(x) A%d(A%d(x))\n", d,
				      d - 1, d - 1);
	snprintf(src + n, sizeof(src) - n,
		 "kernel void bomb(global int *p) { int v = 0; A%d(v++;) p[0] = v; }\n",
		 BOMB_DEPTH);
	prog = clCreateProgramWithSource(p.context, 1, (const char *[]){ src }, NULL, &e);
	if (!prog)
		return 3;
	t0 = now_s();
	e = clBuildProgram(prog, 0, NULL, NULL, NULL, NULL);
	fprintf(stderr, "e2e_contain: the bomb's build: %s after %.1f s\n", e2e_cl_strerror(e),
		now_s() - t0);
	if (e != CL_BUILD_PROGRAM_FAILURE)
		return 6;
	if (clGetProgramBuildInfo(prog, p.device, CL_PROGRAM_BUILD_LOG, sizeof(log), log, NULL))
		return 7;
	fprintf(stderr, "e2e_contain: its log: %s\n", log);
	if (!strstr(log, "clmux: the build was stopped: over the tenant's build-") ||
	    (!strstr(log, "build-mem limit (1 GiB") && !strstr(log, "build-time limit (10 s)")))
		return 8;
	clGetProgramBuildInfo(prog, p.device, CL_PROGRAM_BUILD_STATUS, sizeof(bst), &bst, NULL);
	if (bst != CL_BUILD_ERROR)
		return 9;
	clReleaseProgram(prog);
	return churn(&p, 4);
}

/* A compile bomb under A's build limits (issue 22, case 4) fails with
 * CL_BUILD_PROGRAM_FAILURE and a log line naming the limit; the same
 * session then builds and runs a kernel, and B's rounds run throughout. */
START_TEST(compile_bomb)
{
	char server[160];
	pid_t a, b;
	int st;

	daemon_start_with("[tenant a]\nbuild-mem = 1G\nbuild-time = 10\n\n[tenant b]\n");
	snprintf(server, sizeof(server), "unix:%s", sock_a);
	a = fork();
	ck_assert_int_ge(a, 0);
	if (!a)
		_exit(run_bomb(server));
	b = spawn_b(40);
	st = reap(a);
	ck_assert_msg(WIFEXITED(st) && !WEXITSTATUS(st), "A: status %d", st);
	st = reap(b);
	ck_assert_msg(WIFEXITED(st) && !WEXITSTATUS(st), "B: status %d", st);
	daemon_alive();
	daemon_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("contain");
	TCase *tc = tcase_create("contain");
	SRunner *sr;
	int failed;

	/* The harness's own daemon is not wanted: the tests start theirs. */
	tcase_add_test(tc, out_of_bounds_store);
	tcase_add_test(tc, endless_kernel);
	tcase_add_test(tc, kernel_time);
	tcase_add_test(tc, hidden_printf);
	tcase_add_test(tc, hidden_printf_workers_off);
	tcase_add_test(tc, shared_group);
	tcase_add_test(tc, compile_bomb);
	tcase_set_timeout(tc, E2E_TIMEOUT_S * 2);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
