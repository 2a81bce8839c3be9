// SPDX-License-Identifier: MIT
// e2e_printf.c - kernel printf: a program's stdout through clmux, byte for
// byte the same as natively, alone and with another printing client.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e.h"

/*
 * The test cases have no fixture: each forks programs that run OpenCL with
 * their stdout in a file, natively and through clmux, and compares the
 * files. The program writes its own lines with write(2), as PoCL writes a
 * kernel's output, so the order of the two is the order of the calls.
 */

#define PRINTF_TIMEOUT_S 120

static const char printf_src[] =
    "kernel void hello(global int *out, int launch)\n"
    "{\n"
    "  int i = get_global_id(0);\n"
    "  printf(\"launch %d item %d: %s %f %x\\n\", launch, i, \"str\",\n"
    "         (float)i * 0.5f, 0xab + i);\n"
    "  out[i] = i * launch;\n"
    "}\n"
    "kernel void vec(int k)\n"
    "{\n"
    "  printf(\"vec %v4hld %c\\n\", (int4)(k, k + 1, k + 2, k + 3), 'A' + k);\n"
    "}\n"
    "kernel void maybe(int k)\n"
    "{\n"
    "  if (k < 0)\n"
    "    printf(\"never\\n\");\n"
    "}\n";

/* No printf anywhere: launches of it are not serialized. */
static const char quiet_src[] =
    "kernel void fill(global int *out) { out[get_global_id(0)] = 7; }\n";

static void say(const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0 && write(STDOUT_FILENO, line, (size_t)n) != n)
		_exit(3);
}

#define RUN_CL(call)                                                           \
	do {                                                                   \
		cl_int e_ = (call);                                            \
		if (e_ != CL_SUCCESS) {                                        \
			fprintf(stderr, "%s: %s: %s (%d)\n", p.role, #call,    \
				e2e_cl_strerror(e_), e_);                      \
			goto out;                                              \
		}                                                              \
	} while (0)

static cl_kernel make_kernel(struct e2e_plat *p, cl_program prog, const char *name)
{
	cl_int e;
	cl_kernel k = clCreateKernel(prog, name, &e);

	if (!k)
		fprintf(stderr, "%s: clCreateKernel(%s): %d\n", p->role, name, e);
	return k;
}

/* The program whose stdout is compared; 0 when every call succeeded. */
static int printing_main(const char *role, const char *match)
{
	struct e2e_plat p;
	cl_program prog = NULL, quiet = NULL;
	cl_kernel hello = NULL, vec = NULL, maybe = NULL, fill = NULL;
	cl_mem out = NULL, qout = NULL;
	cl_event ev = NULL;
	size_t g = 8, l = 8, one = 1;
	int launch = 0, got[8], rc = 1;
	cl_int e;

	if (e2e_plat_init(&p, role, match))
		return 1;
	prog = clCreateProgramWithSource(p.context, 1, (const char *[]){printf_src}, NULL, &e);
	quiet = clCreateProgramWithSource(p.context, 1, (const char *[]){quiet_src}, NULL, &e);
	if (!prog || !quiet)
		goto out;
	RUN_CL(clBuildProgram(prog, 1, &p.device, NULL, NULL, NULL));
	RUN_CL(clBuildProgram(quiet, 1, &p.device, NULL, NULL, NULL));
	hello = make_kernel(&p, prog, "hello");
	vec = make_kernel(&p, prog, "vec");
	maybe = make_kernel(&p, prog, "maybe");
	fill = make_kernel(&p, quiet, "fill");
	out = clCreateBuffer(p.context, CL_MEM_READ_WRITE, sizeof(got), NULL, &e);
	qout = clCreateBuffer(p.context, CL_MEM_READ_WRITE, sizeof(got), NULL, &e);
	if (!hello || !vec || !maybe || !fill || !out || !qout)
		goto out;
	RUN_CL(clSetKernelArg(hello, 0, sizeof(out), &out));
	RUN_CL(clSetKernelArg(fill, 0, sizeof(qout), &qout));

	/* clFinish: one work-group of 8 items, so the items print in order. */
	for (launch = 1; launch <= 3; launch++) {
		say("before launch %d\n", launch);
		RUN_CL(clSetKernelArg(hello, 1, sizeof(launch), &launch));
		RUN_CL(clEnqueueNDRangeKernel(p.queue, hello, 1, NULL, &g, &l, 0, NULL, NULL));
		RUN_CL(clEnqueueNDRangeKernel(p.queue, fill, 1, NULL, &g, &l, 0, NULL, NULL));
		RUN_CL(clFinish(p.queue));
		say("after finish %d\n", launch);
	}
	/* clWaitForEvents on the kernel's event. */
	RUN_CL(clSetKernelArg(hello, 1, sizeof(launch), &launch));
	RUN_CL(clEnqueueNDRangeKernel(p.queue, hello, 1, NULL, &g, &l, 0, NULL, &ev));
	RUN_CL(clWaitForEvents(1, &ev));
	say("after wait\n");
	/* A blocking read after it on the in-order queue. */
	launch++;
	RUN_CL(clSetKernelArg(hello, 1, sizeof(launch), &launch));
	RUN_CL(clEnqueueNDRangeKernel(p.queue, hello, 1, NULL, &g, &l, 0, NULL, NULL));
	RUN_CL(clEnqueueReadBuffer(p.queue, out, CL_TRUE, 0, sizeof(got), got, 0, NULL, NULL));
	say("after read: %d\n", got[3]);
	/* Several launches, one flush point; vector and char conversions; a
	 * printing kernel that prints nothing. */
	for (int k = 0; k < 3; k++) {
		RUN_CL(clSetKernelArg(vec, 0, sizeof(k), &k));
		RUN_CL(clEnqueueNDRangeKernel(p.queue, vec, 1, NULL, &one, &one, 0, NULL, NULL));
	}
	RUN_CL(clSetKernelArg(maybe, 0, sizeof(launch), &launch));
	RUN_CL(clEnqueueNDRangeKernel(p.queue, maybe, 1, NULL, &one, &one, 0, NULL, NULL));
	RUN_CL(clFinish(p.queue));
	say("end\n");
	rc = 0;
out:
	if (ev)
		clReleaseEvent(ev);
	if (out)
		clReleaseMemObject(out);
	if (qout)
		clReleaseMemObject(qout);
	if (hello)
		clReleaseKernel(hello);
	if (vec)
		clReleaseKernel(vec);
	if (maybe)
		clReleaseKernel(maybe);
	if (fill)
		clReleaseKernel(fill);
	if (prog)
		clReleaseProgram(prog);
	if (quiet)
		clReleaseProgram(quiet);
	e2e_plat_fini(&p);
	return rc;
}

/* Runs printing_main() in a child with its stdout in path. */
static pid_t spawn(const char *role, const char *match, const char *path)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0)
			_exit(2);
		/* A driver that prints through stdio (Oclgrind) would keep a
		 * kernel's output in stdout's buffer past clFinish, where
		 * the specification has it flushed, and lose it at _exit():
		 * unbuffered, its output lands when it is printed. */
		setvbuf(stdout, NULL, _IONBF, 0);
		_exit(printing_main(role, match));
	}
	return pid;
}

static void reap_ok(pid_t pid, const char *what)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		ck_assert_msg(errno == EINTR, "waitpid: %s", strerror(errno));
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "%s: %s %d (see stderr)", what,
		      WIFEXITED(status) ? "exit status" : "killed by signal",
		      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0;

	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	*len = 0;
	for (;;) {
		if (*len == cap) {
			cap = cap ? cap * 2 : 4096;
			buf = realloc(buf, cap + 1);
			ck_assert(buf != NULL);
		}
		size_t n = fread(buf + *len, 1, cap - *len, f);
		if (!n)
			break;
		*len += n;
	}
	fclose(f);
	buf[*len] = '\0';
	return buf;
}

static void assert_same_file(const char *got_path, const char *want_path, const char *what)
{
	size_t got_len, want_len;
	char *got = slurp(got_path, &got_len), *want = slurp(want_path, &want_len);

	/* The native output must be what the program asked for, or the
	 * comparison proves nothing. NVIDIA (580, CUDA 13.0) drops the text
	 * before a vector conversion: "2,3,4,5 C" for "vec %v4hld %c";
	 * clmux must print the same. */
	ck_assert_msg(strstr(want, "launch 5 item 7: str 3.500000 b2\n") &&
			  strstr(want, "2,3,4,5 C\n") && !strstr(want, "never"),
		      "native stdout lacks the kernels' output:\n%s", want);
	ck_assert_msg(got_len == want_len && !memcmp(got, want, want_len),
		      "%s: stdout differs from native.\n--- native\n%s--- clmux\n%s", what, want,
		      got);
	free(got);
	free(want);
}

static char dir[] = "/tmp/cmx-e2e-printf-XXXXXX";

static void paths(char *native, char *virt, char *virt2, size_t n)
{
	ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
	snprintf(native, n, "%s/native.out", dir);
	snprintf(virt, n, "%s/clmux.out", dir);
	snprintf(virt2, n, "%s/clmux2.out", dir);
}

START_TEST(test_stdout_same)
{
	char native[256], virt[256], virt2[256];

	paths(native, virt, virt2, sizeof(native));
	reap_ok(spawn("native", e2e_native_match(), native), "native run");
	reap_ok(spawn("virtual", e2e_virtual_match(), virt), "clmux run");
	assert_same_file(virt, native, "clmux run");
}
END_TEST

/* Two printing clients at once: each gets its own output, in order. */
START_TEST(test_two_clients)
{
	char native[256], virt[256], virt2[256];
	pid_t a, b;

	paths(native, virt, virt2, sizeof(native));
	reap_ok(spawn("native", e2e_native_match(), native), "native run");
	a = spawn("virtual", e2e_virtual_match(), virt);
	b = spawn("virtual", e2e_virtual_match(), virt2);
	reap_ok(a, "first clmux client");
	reap_ok(b, "second clmux client");
	assert_same_file(virt, native, "first clmux client");
	assert_same_file(virt2, native, "second clmux client");
}
END_TEST

/*
 * Printing launches one after another, each waiting for the one before it
 * (its gate), then one wait for the last: clFinish, clWaitForEvents on its
 * event, a blocking read. A driver that runs its queue only inside a wait
 * and calls completion callbacks only when that wait returns (Oclgrind)
 * runs the first launch in the application's wait and then spins on the
 * second's gate: the daemon must see the first complete without its
 * callback. The kernel may print (never does), so it is gated; the buffer
 * counts the launches that ran.
 */
static const char gated_src[] =
    "kernel void bump(global int *n, int k)\n"
    "{\n"
    "  if (k < 0)\n"
    "    printf(\"never\\n\");\n"
    "  n[get_global_id(0)] += 1;\n"
    "}\n";

static void gated_run(struct e2e_plat *p, int got[3])
{
	cl_program prog = e2e_program_build(p, gated_src, NULL);
	cl_kernel k = e2e_kernel_create(p, prog, "bump");
	int zero[4] = {0}, one = 1, n[4];
	cl_mem buf = e2e_buffer_create(p, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof(n), zero);
	size_t g = 4;
	cl_event ev = NULL;

	E2E_OK(p, clSetKernelArg(k, 0, sizeof(buf), &buf));
	E2E_OK(p, clSetKernelArg(k, 1, sizeof(one), &one));
	for (int i = 0; i < 3; i++)
		E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &g, NULL, 0, NULL, NULL));
	E2E_OK(p, clFinish(p->queue));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, buf, CL_TRUE, 0, sizeof(n), n, 0, NULL, NULL));
	got[0] = n[3];
	for (int i = 0; i < 3; i++)
		E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &g, NULL, 0, NULL,
						 i == 2 ? &ev : NULL));
	E2E_OK(p, clWaitForEvents(1, &ev));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, buf, CL_TRUE, 0, sizeof(n), n, 0, NULL, NULL));
	got[1] = n[0];
	for (int i = 0; i < 2; i++)
		E2E_OK(p, clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &g, NULL, 0, NULL, NULL));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, buf, CL_TRUE, 0, sizeof(n), n, 0, NULL, NULL));
	got[2] = n[1];
	clReleaseEvent(ev);
	clReleaseMemObject(buf);
	clReleaseKernel(k);
	clReleaseProgram(prog);
}

START_TEST(test_gated_launches)
{
	int nat[3], virt[3];

	gated_run(&e2e_native, nat);
	gated_run(&e2e_virtual, virt);
	ck_assert_int_eq(nat[0], 3);
	ck_assert_int_eq(nat[2], 8);
	for (int i = 0; i < 3; i++)
		ck_assert_msg(virt[i] == nat[i], "after wait %d: clmux %d, native %d", i, virt[i],
			      nat[i]);
}
END_TEST

static Suite *printf_suite(void)
{
	Suite *s = suite_create("e2e_printf");
	TCase *tc = tcase_create("printf");

	/* No fixture: see the comment at the top. */
	tcase_set_timeout(tc, PRINTF_TIMEOUT_S);
	tcase_add_test(tc, test_stdout_same);
	tcase_add_test(tc, test_two_clients);
	suite_add_tcase(s, tc);
	tc = e2e_tcase("gated");
	tcase_add_test(tc, test_gated_launches);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return e2e_main(printf_suite());
}
