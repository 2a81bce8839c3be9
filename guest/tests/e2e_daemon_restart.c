// SPDX-License-Identifier: MIT
// An application outlives its clmuxd: the daemon is killed (SIGKILL) and a
// new one started on the same address (unix:, or shm: / tcp: with
// CMX_E2E_TRANSPORT). Calls on objects from before fail with
// CL_OUT_OF_RESOURCES and never hang; old events read that status, waits
// on them CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST; a callback pending
// on an old event runs once with that status; releases succeed; the same
// process then makes a new context on the new daemon, and its kernel's
// result matches the native run. A call blocked in the daemon when it dies
// (clFinish, clWaitForEvents, a blocking read) returns an error. A
// restarted daemon whose device answers differently retires the old
// device handle.
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e.h"

#define N 4096

static char dir[64], listen_addr[256], server[256];
static int tcp_port;
/* A configuration file for the next daemon, or NULL. */
static const char *daemon_conf;

static const char src[] = "kernel void scramble(global const uint *a, global uint *b, uint k)\n"
			  "{ size_t i = get_global_id(0); b[i] = a[i] * 2654435761u + k; }\n";

static int transport_is(const char *name)
{
	const char *t = getenv("CMX_E2E_TRANSPORT");

	return t && !strcmp(t, name);
}

/* The address, picked once: a restarted daemon listens on the same one. */
static void address_pick(void)
{
	ck_assert_ptr_nonnull(mkdtemp(strcpy(dir, "/tmp/clmux-restart-XXXXXX")));
	if (transport_is("tcp")) {
		struct sockaddr_in sin = {.sin_family = AF_INET,
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		socklen_t len = sizeof(sin);
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		char path[96];
		FILE *f;

		ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, len), 0);
		ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
		tcp_port = ntohs(sin.sin_port);
		close(fd);
		snprintf(path, sizeof(path), "%s/tokens", dir);
		f = fopen(path, "w");
		ck_assert_ptr_nonnull(f);
		fputs("t1 0123456789abcdef0123456789abcdef\n", f);
		fclose(f);
		chmod(path, 0600);
		setenv("CLMUX_TOKEN", "0123456789abcdef0123456789abcdef", 1);
		snprintf(listen_addr, sizeof(listen_addr), "tcp:127.0.0.1:%d,tokens=%s", tcp_port,
			 path);
		snprintf(server, sizeof(server), "tcp:127.0.0.1:%d", tcp_port);
	} else {
		snprintf(listen_addr, sizeof(listen_addr), "unix:%s/s.sock", dir);
		snprintf(server, sizeof(server), "%s:%s/s.sock",
			 transport_is("shm") ? "shm" : "unix", dir);
	}
	setenv("CLMUX_SERVER", server, 1);
}

static int daemon_accepts(void)
{
	int fd, ok;

	if (tcp_port) {
		struct sockaddr_in sin = {.sin_family = AF_INET,
					  .sin_port = htons(tcp_port),
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		struct sockaddr_in me;
		socklen_t len = sizeof(me);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		ok = connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0;
		/* Before anything listens, a connect to a port of the
		 * ephemeral range can get that port as its own and connect
		 * to itself. */
		if (ok && !getsockname(fd, (struct sockaddr *)&me, &len) &&
		    me.sin_port == sin.sin_port)
			ok = 0;
	} else {
		struct sockaddr_un sun = {.sun_family = AF_UNIX};
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/s.sock", dir);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		ok = connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0;
	}
	close(fd);
	return ok;
}

/* A clmuxd on the picked address; its pid. */
static pid_t daemon_start(void)
{
	const char *bin = getenv("CLMUXD");
	pid_t pid;

	ck_assert_msg(bin && *bin, "CLMUXD unset");
	if (!tcp_port) {
		char sock[96];
		snprintf(sock, sizeof(sock), "%s/s.sock", dir);
		unlink(sock); /* a killed daemon leaves its socket file */
	}
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (daemon_conf)
			execl(bin, bin, "--listen", listen_addr, "--admin", "none", "--config",
			      daemon_conf, (char *)NULL);
		else
			execl(bin, bin, "--listen", listen_addr, "--admin", "none", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 3000; i++) {
		if (daemon_accepts())
			return pid;
		usleep(10000);
	}
	ck_abort_msg("clmuxd did not listen on %s", listen_addr);
	return -1;
}

/* A new context once the daemon is back. The ICD connects again with
 * backoff (50 ms doubling to 1 s): a try that came while the daemon was
 * down holds new contexts at CL_DEVICE_NOT_AVAILABLE until the next one,
 * which is the documented behaviour. Retried for a bound, not timed: the
 * context must come. */
static cl_context context_again(cl_device_id dev, cl_int *e)
{
	cl_context c = NULL;

	for (int i = 0; i < 500; i++) {
		c = clCreateContext(NULL, 1, &dev, NULL, NULL, e);
		if (c || *e != CL_DEVICE_NOT_AVAILABLE)
			break;
		usleep(10000);
	}
	return c;
}

static void daemon_kill(pid_t pid)
{
	int status;

	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
}

static void daemon_stop(pid_t pid)
{
	int status;

	ck_assert_int_eq(kill(pid, SIGTERM), 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
}

static void dir_remove(void)
{
	char path[96];

	snprintf(path, sizeof(path), "%s/s.sock", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/tokens", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/clmuxd.conf", dir);
	unlink(path);
	rmdir(dir);
}

/* Runs scramble over a (N words) on p's device into out. */
static void scramble_run(struct e2e_plat *p, const cl_uint *a, cl_uint k, cl_uint *out)
{
	cl_program prog = e2e_program_build(p, src, NULL);
	cl_kernel kern = e2e_kernel_create(p, prog, "scramble");
	cl_mem ma = e2e_buffer_create(p, CL_MEM_COPY_HOST_PTR, N * 4, (void *)a);
	cl_mem mb = e2e_buffer_create(p, CL_MEM_READ_WRITE, N * 4, NULL);
	size_t g = N;

	E2E_OK(p, clSetKernelArg(kern, 0, sizeof(ma), &ma));
	E2E_OK(p, clSetKernelArg(kern, 1, sizeof(mb), &mb));
	E2E_OK(p, clSetKernelArg(kern, 2, sizeof(k), &k));
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, kern, 1, NULL, &g, NULL, 0, NULL, NULL));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, mb, CL_TRUE, 0, N * 4, out, 0, NULL, NULL));
	E2E_OK(p, clReleaseMemObject(ma));
	E2E_OK(p, clReleaseMemObject(mb));
	E2E_OK(p, clReleaseKernel(kern));
	E2E_OK(p, clReleaseProgram(prog));
}

static atomic_int cb_runs, cb_status;

static void CL_CALLBACK on_event(cl_event e, cl_int status, void *data)
{
	atomic_store(&cb_status, status);
	atomic_fetch_add(&cb_runs, 1);
}

/* A callback that only the session's end can run: a process learns that
 * its daemon is gone when its connection ends, which, with the daemon's
 * worker processes, follows the front end's death once the worker has
 * noticed it (docs/architecture.md). */
static cl_event loss_watch(struct e2e_plat *p)
{
	cl_int e;
	cl_event user = clCreateUserEvent(p->context, &e);

	E2E_OK(p, e);
	atomic_store(&cb_runs, 0);
	E2E_OK(p, clSetEventCallback(user, CL_COMPLETE, on_event, NULL));
	return user;
}

static void loss_wait(void)
{
	while (!atomic_load(&cb_runs))
		usleep(1000);
}

START_TEST(restart)
{
	static cl_uint a[N], want[N], got[N], late[N];
	struct e2e_plat nat, v, v2 = {.role = "virtual (new context)"};
	cl_program prog;
	cl_kernel kern;
	cl_mem ma, mb, m;
	cl_event user, kev, rev;
	cl_device_id dev = NULL;
	cl_platform_id plat;
	cl_uint k = 7, ndev = 0;
	cl_int e, st = 0;
	size_t g = N;
	pid_t pid;

	address_pick();
	pid = daemon_start();
	e2e_rand_u32(a, N, 17, 0);
	ck_assert_int_eq(e2e_plat_init(&nat, "native", e2e_native_match()), 0);
	scramble_run(&nat, a, k, want);
	ck_assert_int_eq(e2e_plat_init(&v, "virtual", e2e_virtual_match()), 0);
	plat = v.platform;

	/* Objects of every kind, a kernel run, and things still pending when
	 * the daemon dies: a callback and a non-blocking read behind a user
	 * event never set. */
	prog = e2e_program_build(&v, src, NULL);
	kern = e2e_kernel_create(&v, prog, "scramble");
	ma = e2e_buffer_create(&v, CL_MEM_COPY_HOST_PTR, sizeof(a), a);
	mb = e2e_buffer_create(&v, CL_MEM_READ_WRITE, sizeof(a), NULL);
	E2E_OK(&v, clSetKernelArg(kern, 0, sizeof(ma), &ma));
	E2E_OK(&v, clSetKernelArg(kern, 1, sizeof(mb), &mb));
	E2E_OK(&v, clSetKernelArg(kern, 2, sizeof(k), &k));
	E2E_OK(&v, clEnqueueNDRangeKernel(v.queue, kern, 1, NULL, &g, NULL, 0, NULL, &kev));
	E2E_OK(&v, clEnqueueReadBuffer(v.queue, mb, CL_TRUE, 0, sizeof(got), got, 0, NULL, NULL));
	ck_assert_mem_eq(got, want, sizeof(got));
	user = clCreateUserEvent(v.context, &e);
	E2E_OK(&v, e);
	E2E_OK(&v, clEnqueueReadBuffer(v.queue_prof, mb, CL_FALSE, 0, sizeof(late), late, 1, &user,
				       &rev));
	E2E_OK(&v, clSetEventCallback(rev, CL_COMPLETE, on_event, NULL));
	E2E_OK(&v, clFlush(v.queue_prof));

	daemon_kill(pid);
	pid = daemon_start();

	/* The callback runs once, with an error status, on the ICD's thread. */
	while (!atomic_load(&cb_runs))
		usleep(1000);
	ck_assert_int_eq(atomic_load(&cb_status), CL_OUT_OF_RESOURCES);

	/* Old objects, before anything asked for a new session... */
	E2E_EXPECT(&v, clEnqueueNDRangeKernel(v.queue, kern, 1, NULL, &g, NULL, 0, NULL, NULL),
		   CL_OUT_OF_RESOURCES);
	E2E_EXPECT(&v, clFinish(v.queue), CL_OUT_OF_RESOURCES);
	E2E_EXPECT(&v, clWaitForEvents(1, &rev), CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);

	/* ... the platform and its device are the ICD's own and stay; the
	 * restarted daemon serves the same device, so the handle is the same. */
	E2E_OK(&v, clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, &ndev));
	ck_assert_ptr_eq(dev, v.device);

	/* A new context on the new daemon: the same kernel, the same result. */
	v2.platform = plat;
	v2.device = dev;
	v2.context = context_again(dev, &e);
	E2E_OK(&v2, e);
	v2.queue = clCreateCommandQueueWithProperties(v2.context, dev, NULL, &e);
	E2E_OK(&v2, e);
	memset(got, 0, sizeof(got));
	scramble_run(&v2, a, k, got);
	ck_assert_mem_eq(got, want, sizeof(got));

	/* Old objects, now that a new session exists: still the error, and
	 * nothing of theirs reaches the new daemon. */
	E2E_EXPECT(&v,
		   clEnqueueReadBuffer(v.queue, mb, CL_TRUE, 0, sizeof(got), got, 0, NULL, NULL),
		   CL_OUT_OF_RESOURCES);
	E2E_EXPECT(&v, clEnqueueNDRangeKernel(v.queue, kern, 1, NULL, &g, NULL, 0, NULL, NULL),
		   CL_OUT_OF_RESOURCES);
	E2E_EXPECT(&v, clFinish(v.queue), CL_OUT_OF_RESOURCES);
	/* Its events failed: a negative status, as a failed command's. */
	E2E_EXPECT(&v, clWaitForEvents(1, &kev), CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
	E2E_OK(&v, clGetEventInfo(kev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, NULL));
	ck_assert_int_eq(st, CL_OUT_OF_RESOURCES);
	E2E_EXPECT(&v, clSetKernelArg(kern, 2, sizeof(k), &k), CL_OUT_OF_RESOURCES);
	E2E_EXPECT(&v, clSetUserEventStatus(user, CL_COMPLETE), CL_OUT_OF_RESOURCES);
	m = clCreateBuffer(v.context, CL_MEM_READ_WRITE, 64, NULL, &e);
	ck_assert_ptr_null(m);
	E2E_EXPECT(&v, e, CL_OUT_OF_RESOURCES);
	ck_assert_int_eq(atomic_load(&cb_runs), 1);

	/* The application can clean up: every release succeeds. */
	E2E_OK(&v, clReleaseEvent(rev));
	E2E_OK(&v, clReleaseEvent(user));
	E2E_OK(&v, clReleaseEvent(kev));
	E2E_OK(&v, clReleaseMemObject(ma));
	E2E_OK(&v, clReleaseMemObject(mb));
	E2E_OK(&v, clReleaseKernel(kern));
	E2E_OK(&v, clReleaseProgram(prog));
	e2e_plat_fini(&v);
	E2E_OK(&v2, clReleaseCommandQueue(v2.queue));
	E2E_OK(&v2, clReleaseContext(v2.context));
	e2e_plat_fini(&nat);
	daemon_stop(pid);
	dir_remove();
}
END_TEST

/* The daemon dies while the application waits in it. */
enum blocked_call { IN_FINISH, IN_WAIT, IN_READ };

static pid_t victim;
static atomic_int about_to_block;

static void *killer(void *arg)
{
	while (!atomic_load(&about_to_block))
		usleep(1000);
	/* Most likely blocked by then; either way the call must fail. */
	usleep(200000);
	kill(victim, SIGKILL);
	return NULL;
}

static void blocked(enum blocked_call how)
{
	static cl_uint buf[N];
	struct e2e_plat v, v2 = {.role = "virtual (new context)"};
	cl_event user, ev;
	cl_mem m, m2;
	pthread_t t;
	cl_int e;
	int status;

	address_pick();
	victim = daemon_start();
	ck_assert_int_eq(e2e_plat_init(&v, "virtual", e2e_virtual_match()), 0);
	m = e2e_buffer_create(&v, CL_MEM_READ_WRITE, sizeof(buf), NULL);
	user = clCreateUserEvent(v.context, &e);
	E2E_OK(&v, e);
	/* A command that waits for an event nobody sets. */
	E2E_OK(&v, clEnqueueMarkerWithWaitList(v.queue, 1, &user, &ev));
	E2E_OK(&v, clFlush(v.queue));
	atomic_store(&about_to_block, 0);
	ck_assert_int_eq(pthread_create(&t, NULL, killer, NULL), 0);
	atomic_store(&about_to_block, 1);
	switch (how) {
	case IN_FINISH:
		E2E_EXPECT(&v, clFinish(v.queue), CL_OUT_OF_RESOURCES);
		break;
	case IN_WAIT:
		E2E_EXPECT(&v, clWaitForEvents(1, &ev),
			   CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
		break;
	case IN_READ:
		E2E_EXPECT(
		    &v,
		    clEnqueueReadBuffer(v.queue, m, CL_TRUE, 0, sizeof(buf), buf, 0, NULL, NULL),
		    CL_OUT_OF_RESOURCES);
		break;
	}
	pthread_join(t, NULL);
	ck_assert_int_eq(waitpid(victim, &status, 0), victim);

	/* And the process goes on with a new daemon. */
	victim = daemon_start();
	v2.context = context_again(v.device, &e);
	E2E_OK(&v2, e);
	v2.queue = clCreateCommandQueueWithProperties(v2.context, v.device, NULL, &e);
	E2E_OK(&v2, e);
	m2 = e2e_buffer_create(&v2, CL_MEM_READ_WRITE, sizeof(buf), NULL);
	for (int i = 0; i < N; i++)
		buf[i] = (cl_uint)i * 3u;
	E2E_OK(&v2,
	       clEnqueueWriteBuffer(v2.queue, m2, CL_TRUE, 0, sizeof(buf), buf, 0, NULL, NULL));
	memset(buf, 0, sizeof(buf));
	E2E_OK(&v2, clEnqueueReadBuffer(v2.queue, m2, CL_TRUE, 0, sizeof(buf), buf, 0, NULL, NULL));
	for (int i = 0; i < N; i++)
		ck_assert_uint_eq(buf[i], (cl_uint)i * 3u);
	E2E_OK(&v, clReleaseEvent(ev));
	E2E_OK(&v, clReleaseEvent(user));
	E2E_OK(&v, clReleaseMemObject(m));
	e2e_plat_fini(&v);
	E2E_OK(&v2, clReleaseMemObject(m2));
	E2E_OK(&v2, clReleaseCommandQueue(v2.queue));
	E2E_OK(&v2, clReleaseContext(v2.context));
	daemon_stop(victim);
	dir_remove();
}

START_TEST(blocked_in_finish)
{
	blocked(IN_FINISH);
}
END_TEST

START_TEST(blocked_in_wait)
{
	blocked(IN_WAIT);
}
END_TEST

START_TEST(blocked_in_read)
{
	blocked(IN_READ);
}
END_TEST

/* The restarted daemon serves a device that answers differently (here: a
 * memory quota caps its global memory): the old handle stays, answers
 * CL_DEVICE_AVAILABLE false and makes no context; clGetDeviceIDs gives the
 * new device, which works. */
START_TEST(other_device)
{
	struct e2e_plat v, v2 = {.role = "virtual (new device)"};
	cl_uint words[64], ndev = 0;
	cl_device_id dev = NULL;
	cl_bool avail = CL_TRUE;
	cl_ulong mem = 0;
	char conf[96];
	cl_event watch;
	cl_context c;
	cl_mem m;
	cl_int e;
	pid_t pid;
	FILE *f;

	address_pick();
	pid = daemon_start();
	ck_assert_int_eq(e2e_plat_init(&v, "virtual", e2e_virtual_match()), 0);
	watch = loss_watch(&v);
	daemon_kill(pid);
	snprintf(conf, sizeof(conf), "%s/clmuxd.conf", dir);
	f = fopen(conf, "w");
	ck_assert_ptr_nonnull(f);
	/* unix: and shm: sessions are the default tenant's, tcp: ones the
	 * token's (t1). */
	fputs(
	    "[clmuxd]\ndefault-tenant = small\n[tenant small]\nmem = 16M\n[tenant t1]\nmem = 16M\n",
	    f);
	fclose(f);
	daemon_conf = conf;
	pid = daemon_start();
	daemon_conf = NULL;
	loss_wait();

	/* The ICD connects again with backoff, and a try can come before the
	 * new daemon serves the tenant (its worker starting): until then
	 * clGetDeviceIDs answers the devices it knew. Retried for a bound,
	 * not timed: the new device must come. */
	for (int i = 0; i < 300; i++) {
		E2E_OK(&v, clGetDeviceIDs(v.platform, CL_DEVICE_TYPE_ALL, 1, &dev, &ndev));
		if (dev != v.device)
			break;
		usleep(100000);
	}
	ck_assert_ptr_ne(dev, v.device);
	E2E_OK(&v, clGetDeviceInfo(v.device, CL_DEVICE_AVAILABLE, sizeof(avail), &avail, NULL));
	ck_assert_int_eq(avail, CL_FALSE);
	c = clCreateContext(NULL, 1, &v.device, NULL, NULL, &e);
	ck_assert_ptr_null(c);
	E2E_EXPECT(&v, e, CL_DEVICE_NOT_AVAILABLE);

	E2E_OK(&v2, clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof(mem), &mem, NULL));
	ck_assert_uint_le(mem, 16u << 20);
	E2E_OK(&v2, clGetDeviceInfo(dev, CL_DEVICE_AVAILABLE, sizeof(avail), &avail, NULL));
	ck_assert_int_eq(avail, CL_TRUE);
	v2.context = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
	E2E_OK(&v2, e);
	v2.queue = clCreateCommandQueueWithProperties(v2.context, dev, NULL, &e);
	E2E_OK(&v2, e);
	for (int i = 0; i < 64; i++)
		words[i] = (cl_uint)i + 5u;
	m = clCreateBuffer(v2.context, CL_MEM_COPY_HOST_PTR, sizeof(words), words, &e);
	E2E_OK(&v2, e);
	memset(words, 0, sizeof(words));
	E2E_OK(&v2,
	       clEnqueueReadBuffer(v2.queue, m, CL_TRUE, 0, sizeof(words), words, 0, NULL, NULL));
	for (int i = 0; i < 64; i++)
		ck_assert_uint_eq(words[i], (cl_uint)i + 5u);
	E2E_OK(&v2, clReleaseMemObject(m));
	E2E_OK(&v2, clReleaseCommandQueue(v2.queue));
	E2E_OK(&v2, clReleaseContext(v2.context));
	E2E_OK(&v, clReleaseEvent(watch));
	e2e_plat_fini(&v);
	daemon_stop(pid);
	dir_remove();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("daemon_restart");
	TCase *tc = tcase_create("daemon_restart");
	SRunner *sr;
	int failed;

	/* Each test starts, kills and restarts daemons of its own; each runs
	 * in a process of its own (Check's fork), so each ICD starts afresh. */
	tcase_add_test(tc, restart);
	tcase_add_test(tc, blocked_in_finish);
	tcase_add_test(tc, blocked_in_wait);
	tcase_add_test(tc, blocked_in_read);
	tcase_add_test(tc, other_device);
	tcase_set_timeout(tc, E2E_TIMEOUT_S);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
