// SPDX-License-Identifier: MIT
// e2e_multi.c - several client processes share the virtual platform at once.
#include "e2e.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * The test cases here have no fixture: each test's process forks its
 * clients before it makes any OpenCL call itself, so every client starts
 * with a clean runtime and its own connection to the daemon.  Clients
 * report through their exit status, not through Check.
 */

#define NUM_CLIENTS 4
#define CLIENT_ITERS 300
#define MULTI_TIMEOUT_S 120

static const char multi_src[] =
	"__kernel void axpb(__global const uint *x, __global uint *y, uint a,\n"
	"                   uint b)\n"
	"{\n"
	"	size_t i = get_global_id(0);\n"
	"	y[i] = x[i] * a + b;\n"
	"}\n";

#define CLIENT_CL(call)                                                        \
	do {                                                                   \
		cl_int client_err_ = (call);                                   \
		if (client_err_ != CL_SUCCESS) {                               \
			fprintf(stderr, "client %d: %s: %s (%d)\n", id, #call, \
				e2e_cl_strerror(client_err_), client_err_);   \
			goto out;                                              \
		}                                                              \
	} while (0)

/* What a client does besides write, launch and read in each iteration. */
enum client_kind {
	CLIENT_PLAIN, /* write x, axpb, read y */
	CLIENT_MIXED, /* plus a copy, a map of the copy, object churn */
	CLIENT_FOREVER, /* plain, never stops; signals once it is busy */
	CLIENT_FORKS, /* plain, and forks a plain client of its own midway */
};

struct client {
	int id;
	enum client_kind kind;
	int iters;
	int busy_fd; /* CLIENT_FOREVER writes a byte here once busy */
};

struct client_objs {
	cl_program prog;
	cl_kernel k;
	cl_mem x, y, z;
};

static void client_objs_release(struct client_objs *o)
{
	if (o->z)
		clReleaseMemObject(o->z);
	if (o->y)
		clReleaseMemObject(o->y);
	if (o->x)
		clReleaseMemObject(o->x);
	if (o->k)
		clReleaseKernel(o->k);
	if (o->prog)
		clReleaseProgram(o->prog);
	memset(o, 0, sizeof(*o));
}

static int client_objs_create(struct e2e_plat *p, int id, size_t bytes,
			      struct client_objs *o)
{
	const char *src = multi_src;
	cl_int err = CL_SUCCESS;

	memset(o, 0, sizeof(*o));
	o->prog = clCreateProgramWithSource(p->context, 1, &src, NULL, &err);
	if (!o->prog)
		goto fail;
	err = clBuildProgram(o->prog, 1, &p->device, NULL, NULL, NULL);
	if (err != CL_SUCCESS) {
		char *log = e2e_build_log(o->prog, p->device);

		fprintf(stderr, "client %d: build log:\n%s\n", id,
			log ? log : "(none)");
		free(log);
		goto fail;
	}
	o->k = clCreateKernel(o->prog, "axpb", &err);
	if (!o->k)
		goto fail;
	o->x = clCreateBuffer(p->context, CL_MEM_READ_ONLY, bytes, NULL, &err);
	if (!o->x)
		goto fail;
	o->y = clCreateBuffer(p->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
	if (!o->y)
		goto fail;
	o->z = clCreateBuffer(p->context, CL_MEM_READ_WRITE, 2 * bytes, NULL,
			      &err);
	if (!o->z)
		goto fail;
	if ((err = clSetKernelArg(o->k, 0, sizeof(o->x), &o->x)) != CL_SUCCESS ||
	    (err = clSetKernelArg(o->k, 1, sizeof(o->y), &o->y)) != CL_SUCCESS)
		goto fail;
	return 0;
fail:
	fprintf(stderr, "client %d: setup: %s (%d)\n", id, e2e_cl_strerror(err),
		err);
	client_objs_release(o);
	return -EIO;
}

/* Returns the exit status for the client process: 0 when every result
 * was right. */
static int client_main(const struct client *c);

/*
 * The child a CLIENT_FORKS client forks while its session is busy: the
 * session it inherits is the parent's. Reading the parent's buffer fails
 * (it would garble the parent's connection if it went out), and then a
 * client of its own, on a new context of the device from before the
 * fork, gets right results while the parent goes on with its loop.
 */
static int forked_child(struct e2e_plat *p, cl_mem parents, size_t bytes, int id)
{
	struct client c = {.id = id + 1, .kind = CLIENT_PLAIN, .iters = CLIENT_ITERS};
	cl_uint *y = malloc(bytes);
	cl_int err;

	if (!y)
		return 2;
	err = clEnqueueReadBuffer(p->queue, parents, CL_TRUE, 0, bytes, y, 0, NULL, NULL);
	free(y);
	if (err == CL_SUCCESS) {
		fprintf(stderr, "client %d: the parent's buffer read in a child of fork()\n", c.id);
		return 4;
	}
	return client_main(&c);
}

static int client_main(const struct client *c)
{
	struct e2e_plat plat;
	struct e2e_plat *p = &plat;
	struct client_objs o = {0};
	int id = c->id, rc = 1;
	pid_t child = -1;
	/* Each client its own size and data. */
	size_t n = 1024u * (size_t)(id % 4 + 1), bytes = n * sizeof(cl_uint);
	cl_uint *x = malloc(bytes), *y = malloc(bytes);

	if (!x || !y || e2e_plat_init(p, "virtual", e2e_virtual_match()) < 0) {
		free(y);
		free(x);
		return 2;
	}
	if (client_objs_create(p, id, bytes, &o) < 0)
		goto out;

	for (int it = 0; c->kind == CLIENT_FOREVER || it < c->iters; it++) {
		cl_uint a = (cl_uint)(id * 1000 + it) | 1u, b = (cl_uint)id;
		size_t off = (size_t)(it % 7) * sizeof(cl_uint);
		cl_uint *map = NULL;
		cl_int err;

		/* Object churn: new program, kernel and buffers now and then. */
		if (c->kind == CLIENT_MIXED && it > 0 && it % 50 == 0) {
			client_objs_release(&o);
			if (client_objs_create(p, id, bytes, &o) < 0)
				goto out;
		}
		e2e_rand_u32(x, n, ((uint64_t)id << 32) | (uint64_t)it, 0);
		CLIENT_CL(clEnqueueWriteBuffer(p->queue, o.x, CL_FALSE, 0, bytes,
					       x, 0, NULL, NULL));
		CLIENT_CL(clSetKernelArg(o.k, 2, sizeof(a), &a));
		CLIENT_CL(clSetKernelArg(o.k, 3, sizeof(b), &b));
		CLIENT_CL(clEnqueueNDRangeKernel(p->queue, o.k, 1, NULL, &n, NULL,
						 0, NULL, NULL));
		if (c->kind == CLIENT_MIXED) {
			CLIENT_CL(clEnqueueCopyBuffer(p->queue, o.y, o.z, 0, off,
						      bytes, 0, NULL, NULL));
			map = clEnqueueMapBuffer(p->queue, o.z, CL_TRUE,
						 CL_MAP_READ, off, bytes, 0, NULL,
						 NULL, &err);
			if (!map) {
				fprintf(stderr, "client %d: map: %s\n", id,
					e2e_cl_strerror(err));
				goto out;
			}
			memcpy(y, map, bytes);
			CLIENT_CL(clEnqueueUnmapMemObject(p->queue, o.z, map, 0,
							  NULL, NULL));
		} else {
			memset(y, 0xff, bytes);
			CLIENT_CL(clEnqueueReadBuffer(p->queue, o.y, CL_TRUE, 0,
						      bytes, y, 0, NULL, NULL));
		}
		for (size_t i = 0; i < n; i++) {
			if (y[i] != x[i] * a + b) {
				fprintf(stderr,
					"client %d: iteration %d: y[%zu] = %u, "
					"want %u\n",
					id, it, i, y[i], x[i] * a + b);
				goto out;
			}
		}
		if (c->kind == CLIENT_FORKS && it == 10) {
			/* Commands of the parent's still in flight. */
			CLIENT_CL(clEnqueueNDRangeKernel(p->queue, o.k, 1, NULL, &n, NULL, 0,
							 NULL, NULL));
			fflush(NULL);
			child = fork();
			if (child < 0)
				goto out;
			if (child == 0)
				_exit(forked_child(p, o.y, bytes, id));
		}
		if (c->kind == CLIENT_FOREVER && it == 20) {
			char one = 1;

			if (write(c->busy_fd, &one, 1) != 1)
				goto out;
		}
	}
	CLIENT_CL(clFinish(p->queue));
	rc = 0;
out:
	if (child > 0) {
		int st;
		while (waitpid(child, &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "client %d: its forked child: %s %d\n", id,
				WIFEXITED(st) ? "exit status" : "signal",
				WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			rc = 1;
		}
	}
	client_objs_release(&o);
	e2e_plat_fini(p);
	free(y);
	free(x);
	return rc;
}

static pid_t client_spawn(const struct client *c)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		/* Do not outlive a test process that times out. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		_exit(client_main(c));
	}
	return pid;
}

static int client_reap(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		ck_assert_msg(errno == EINTR, "waitpid: %s", strerror(errno));
	return status;
}

static void assert_exit_ok(int id, int status)
{
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "client %d: %s %d", id,
		      WIFEXITED(status) ? "exit status" : "killed by signal",
		      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

/*
 * One client on its own first, which builds the program.  PoCL's on-disk
 * kernel cache can fail a build that several processes start at once on a
 * cold cache (pocl/pocl#1480); the clients are here to race on the daemon,
 * not on the compiler's cache.
 */
static void client_warm_up(void)
{
	struct client c = {.id = 99, .kind = CLIENT_PLAIN, .iters = 1};

	assert_exit_ok(c.id, client_reap(client_spawn(&c)));
}

static void run_clients(enum client_kind kind)
{
	pid_t pids[NUM_CLIENTS];
	int status[NUM_CLIENTS];

	client_warm_up();
	/* Start all before waiting for any, so that they overlap. */
	for (int i = 0; i < NUM_CLIENTS; i++) {
		struct client c = {.id = i, .kind = kind, .iters = CLIENT_ITERS};

		pids[i] = client_spawn(&c);
	}
	for (int i = 0; i < NUM_CLIENTS; i++)
		status[i] = client_reap(pids[i]);
	for (int i = 0; i < NUM_CLIENTS; i++)
		assert_exit_ok(i, status[i]);
}

START_TEST(test_four_clients)
{
	run_clients(CLIENT_PLAIN);
}
END_TEST

START_TEST(test_four_clients_mixed)
{
	run_clients(CLIENT_MIXED);
}
END_TEST

/*
 * A client forks while its session is busy (guest/icd.c, forked()): the
 * child's calls on the parent's objects fail without touching the
 * parent's connection, and each goes on with a session of its own.
 */
START_TEST(test_fork_midway)
{
	struct client c = {.id = 10, .kind = CLIENT_FORKS, .iters = CLIENT_ITERS};

	client_warm_up();
	assert_exit_ok(c.id, client_reap(client_spawn(&c)));
}
END_TEST

/*
 * One client is killed mid-stream, holding objects and in-flight commands;
 * the other three finish, and a client started afterwards still works.
 */
START_TEST(test_client_killed)
{
	struct client victim = {.id = NUM_CLIENTS - 1, .kind = CLIENT_FOREVER};
	struct client after = {.id = NUM_CLIENTS, .kind = CLIENT_MIXED,
			       .iters = 60};
	pid_t pids[NUM_CLIENTS];
	int fds[2], status;
	char byte;
	ssize_t r;

	client_warm_up();
	for (int i = 0; i < NUM_CLIENTS - 1; i++) {
		struct client c = {.id = i, .kind = CLIENT_PLAIN,
				   .iters = CLIENT_ITERS};

		pids[i] = client_spawn(&c);
	}
	/* After the others: only the victim holds the write end, so a victim
	 * that dies early shows as EOF. */
	ck_assert_int_eq(pipe(fds), 0);
	victim.busy_fd = fds[1];
	pids[NUM_CLIENTS - 1] = client_spawn(&victim);
	close(fds[1]);
	do
		r = read(fds[0], &byte, 1);
	while (r < 0 && errno == EINTR);
	close(fds[0]);
	kill(pids[NUM_CLIENTS - 1], SIGKILL);
	status = client_reap(pids[NUM_CLIENTS - 1]);
	/* r != 1: the victim died before it was busy; its status says why. */
	ck_assert_msg(r == 1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		      "victim client was not busy when killed (status 0x%x)",
		      status);
	for (int i = 0; i < NUM_CLIENTS - 1; i++)
		assert_exit_ok(i, client_reap(pids[i]));

	/* This process has made no OpenCL call yet: it can be a client. */
	ck_assert_msg(client_main(&after) == 0,
		      "a client after the kill failed; see stderr");
}
END_TEST

/* The daemon's cap of one peer's connections not past their Hello
 * (CMX_PENDING_PER_PEER, host/pending.h). */
#define PENDING_CAP 64

/* A connection to the daemon's socket at path that says nothing. */
static int silent_dial(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	return fd;
}

/*
 * Many connections at once (applications that start together, or while
 * the daemon is starting): past the daemon's cap of connections not yet
 * past their Hello it ends one unanswered. While this process holds the
 * cap (each held connection made again if the daemon ends it), a client
 * starts; its ICD tries again (it says so on stderr, read here), and once
 * the held connections go its session opens and its results are right.
 */
START_TEST(test_connection_burst)
{
	const char *server = getenv("CLMUX_SERVER");
	struct client c = {.id = 7, .kind = CLIENT_PLAIN, .iters = 20};
	struct pollfd pfd[1 + PENDING_CAP];
	char out[8192] = "";
	size_t got = 0;
	int errp[2], refused = 0, open_ = 1;
	pid_t pid;

	/* shm: is the unix: socket too; tcp: needs a token first. */
	if (!server || (strncmp(server, "unix:", 5) && strncmp(server, "shm:", 4)))
		return;
	server = strchr(server, ':') + 1;
	for (int i = 1; i <= PENDING_CAP; i++)
		pfd[i] = (struct pollfd){.fd = silent_dial(server), .events = POLLIN};
	ck_assert_int_eq(pipe(errp), 0);
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* The held connections are this process's alone. */
		for (int i = 1; i <= PENDING_CAP; i++)
			close(pfd[i].fd);
		dup2(errp[1], 2);
		_exit(client_main(&c));
	}
	close(errp[1]);
	pfd[0] = (struct pollfd){.fd = errp[0], .events = POLLIN};
	/* Until the client says it tries again, or ends. */
	while (open_ && !refused) {
		ck_assert_int_ge(poll(pfd, 1 + PENDING_CAP, -1), 0);
		for (int i = 1; i <= PENDING_CAP; i++)
			if (pfd[i].revents) {
				/* Its 5 s for a Hello ran out: held again. */
				close(pfd[i].fd);
				pfd[i].fd = silent_dial(server);
			}
		if (pfd[0].revents) {
			ssize_t n = read(errp[0], out + got, sizeof(out) - 1 - got);
			open_ = n > 0;
			got += n > 0 ? (size_t)n : 0;
			out[got] = '\0';
			refused = strstr(out, "trying again") != NULL;
		}
	}
	for (int i = 1; i <= PENDING_CAP; i++)
		close(pfd[i].fd);
	/* The rest of its lines, until it ends (or the buffer is full). */
	for (ssize_t n; (n = read(errp[0], out + got, sizeof(out) - 1 - got)) > 0;)
		got += (size_t)n;
	out[got] = '\0';
	close(errp[0]);
	fputs(out, stderr);
	ck_assert_msg(refused, "the client's connection was not refused");
	assert_exit_ok(c.id, client_reap(pid));
}
END_TEST

static Suite *multi_suite(void)
{
	Suite *s = suite_create("e2e_multi");
	TCase *tc = tcase_create("clients");

	/* No fixture: see the comment at the top. */
	tcase_set_timeout(tc, MULTI_TIMEOUT_S);
	tcase_add_test(tc, test_four_clients);
	tcase_add_test(tc, test_four_clients_mixed);
	tcase_add_test(tc, test_client_killed);
	tcase_add_test(tc, test_fork_midway);
	tcase_add_test(tc, test_connection_burst);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return e2e_main(multi_suite());
}
