// SPDX-License-Identifier: MIT
// A compile bomb under the tenant's build limits (issue 22, case 4): nested
// macros that ask the compiler for gigabytes and minutes fail with
// CL_BUILD_PROGRAM_FAILURE and a log line naming the limit, the same
// session then builds and runs a kernel (its worker lived), and another
// tenant's checksummed workload runs throughout.
#define _GNU_SOURCE
#include <errno.h>
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

/* 2^26 copies of a statement: natively about 6.5 GB and over a minute of
 * PoCL's compiler, far past a 1 GiB limit. */
#define BOMB_DEPTH 26
#define B_ROUNDS   40
#define B_N	   65536

static char dir[40], sock_a[64], sock_b[64], admin[64], conf[64];
static pid_t daemon_pid;

static void daemon_start(void)
{
	const char *bin = getenv("CLMUXD");
	char la[200], lb[200];
	FILE *f;

	ck_assert_msg(bin && *bin, "CLMUXD unset");
	snprintf(dir, sizeof(dir), "/tmp/clmux-builds-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sock_a, sizeof(sock_a), "%s/a.sock", dir);
	snprintf(sock_b, sizeof(sock_b), "%s/b.sock", dir);
	snprintf(admin, sizeof(admin), "%s/admin.sock", dir);
	snprintf(conf, sizeof(conf), "%s/clmuxd.conf", dir);
	f = fopen(conf, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "[tenant a]\nbuild-mem = 1G\nbuild-time = 10\n\n[tenant b]\n");
	fclose(f);
	snprintf(la, sizeof(la), "unix:%s,tenant=a", sock_a);
	snprintf(lb, sizeof(lb), "unix:%s,tenant=b", sock_b);
	daemon_pid = fork();
	ck_assert_int_ge(daemon_pid, 0);
	if (!daemon_pid) {
		setenv("TMPDIR", dir, 1);
		execl(bin, bin, "--listen", la, "--listen", lb, "--config", conf, "--admin", admin,
		      (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 3000; i++) {
		const char *paths[] = {admin, sock_a, sock_b};
		int ok = 1;
		for (int k = 0; k < 3 && ok; k++) {
			struct sockaddr_un sun = {.sun_family = AF_UNIX};
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

static int reap(pid_t pid)
{
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return st;
}

static void daemon_stop(void)
{
	char p[200];
	int st;

	kill(daemon_pid, SIGTERM);
	st = reap(daemon_pid);
	ck_assert_msg(WIFEXITED(st) && !WEXITSTATUS(st), "clmuxd ended with %d", st);
	snprintf(p, sizeof(p), "rm -rf %s", dir);
	ck_assert_int_eq(system(p), 0);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char churn_src[] =
    "kernel void churn(global const uint *a, global uint *b, uint r) {\n"
    "  size_t i = get_global_id(0); b[i] = a[i] * 2654435761u + r; }\n";

/* Builds churn in p's context and runs it `rounds` times, each checked on
 * the host: 0 when every checksum was right. */
static int churn(struct e2e_plat *p, int rounds, const char *who)
{
	static uint32_t a[B_N], b[B_N];
	cl_program prog;
	cl_kernel k;
	cl_mem ma, mb;
	cl_int e;

	for (uint32_t i = 0; i < B_N; i++)
		a[i] = i * 7u + 1u;
	prog = clCreateProgramWithSource(p->context, 1, (const char *[]){churn_src}, NULL, &e);
	if (!prog || clBuildProgram(prog, 0, NULL, NULL, NULL, NULL))
		return 10;
	k = clCreateKernel(prog, "churn", &e);
	ma = clCreateBuffer(p->context, CL_MEM_COPY_HOST_PTR, sizeof(a), a, &e);
	mb = clCreateBuffer(p->context, CL_MEM_READ_WRITE, sizeof(b), NULL, &e);
	if (!k || !ma || !mb)
		return 11;
	for (int r = 0; r < rounds; r++) {
		size_t g = B_N;
		cl_uint rr = (cl_uint)r;
		clSetKernelArg(k, 0, sizeof(ma), &ma);
		clSetKernelArg(k, 1, sizeof(mb), &mb);
		clSetKernelArg(k, 2, sizeof(rr), &rr);
		if (clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &g, NULL, 0, NULL, NULL) ||
		    clEnqueueReadBuffer(p->queue, mb, CL_TRUE, 0, sizeof(b), b, 0, NULL, NULL))
			return 12;
		for (uint32_t i = 0; i < B_N; i++)
			if (b[i] != a[i] * 2654435761u + rr) {
				fprintf(stderr, "e2e_build_limits: %s round %d word %u wrong\n",
					who, r, i);
				return 13;
			}
	}
	clReleaseMemObject(ma);
	clReleaseMemObject(mb);
	clReleaseKernel(k);
	clReleaseProgram(prog);
	return 0;
}

/* B: its own builds and launches while A's bomb is in the compiler. */
static int run_b(void)
{
	struct e2e_plat p;
	char server[160];

	snprintf(server, sizeof(server), "unix:%s", sock_b);
	setenv("CLMUX_SERVER", server, 1);
	if (e2e_plat_init(&p, "virtual", e2e_virtual_match()))
		return 2;
	return churn(&p, B_ROUNDS, "B");
}

/* A: the bomb, its status and log, then an ordinary kernel in the same
 * session. */
static int run_a(void)
{
	struct e2e_plat p;
	char server[160], src[4096], log[1024] = "";
	size_t n = 0;
	cl_program prog;
	cl_int e;
	double t0;

	snprintf(server, sizeof(server), "unix:%s", sock_a);
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
	prog = clCreateProgramWithSource(p.context, 1, (const char *[]){src}, NULL, &e);
	if (!prog)
		return 3;
	t0 = now_s();
	e = clBuildProgram(prog, 0, NULL, NULL, NULL, NULL);
	fprintf(stderr, "e2e_build_limits: the bomb's build: %s after %.1f s\n", e2e_cl_strerror(e),
		now_s() - t0);
	if (e != CL_BUILD_PROGRAM_FAILURE)
		return 4;
	if (clGetProgramBuildInfo(prog, p.device, CL_PROGRAM_BUILD_LOG, sizeof(log), log, NULL))
		return 5;
	fprintf(stderr, "e2e_build_limits: its log: %s\n", log);
	if (!strstr(log, "clmux: the build was stopped: over the tenant's build-") ||
	    (!strstr(log, "build-mem limit (1 GiB") && !strstr(log, "build-time limit (10 s)")))
		return 6;
	{
		cl_build_status st = CL_BUILD_SUCCESS;
		clGetProgramBuildInfo(prog, p.device, CL_PROGRAM_BUILD_STATUS, sizeof(st), &st,
				      NULL);
		if (st != CL_BUILD_ERROR)
			return 7;
	}
	clReleaseProgram(prog);
	/* The same session, so the same worker: it lived. */
	return churn(&p, 4, "A");
}

START_TEST(compile_bomb)
{
	pid_t a, b;
	int st;

	daemon_start();
	a = fork();
	ck_assert_int_ge(a, 0);
	if (!a)
		_exit(run_a());
	b = fork();
	ck_assert_int_ge(b, 0);
	if (!b)
		_exit(run_b());
	st = reap(a);
	ck_assert_msg(WIFEXITED(st) && !WEXITSTATUS(st), "A: status %d", st);
	st = reap(b);
	ck_assert_msg(WIFEXITED(st) && !WEXITSTATUS(st), "B: status %d", st);
	ck_assert_int_eq(kill(daemon_pid, 0), 0);
	daemon_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("build_limits");
	TCase *tc = tcase_create("build_limits");
	SRunner *sr;
	int failed;

	/* The harness's own daemon is not wanted: the test starts its own. */
	tcase_add_test(tc, compile_bomb);
	tcase_set_timeout(tc, E2E_TIMEOUT_S * 3);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
