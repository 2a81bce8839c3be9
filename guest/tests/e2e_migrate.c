// SPDX-License-Identifier: MIT
// Live migration between daemons (issue 17): an application runs a loop of
// write, kernel and read with every result checked against the native run,
// while `migrate --tenant default --to B` moves its session from daemon A
// to daemon B and back, several times. The guest's address (a symlink in
// CLMUX_SERVER) is pointed at the destination first, as a VM's vsock
// address stays while its host changes. Each move must report the one
// session, and the application must finish with no error and no
// mismatch. The longest gap between two completed iterations (the
// blackout) is printed. A destination refuses bytes that are no whole
// state file. Over unix, and shm from e2e-shm.sh.
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../host/state.h"
#include "../../host/tests/adminclient.h"
#include "e2e.h"

#define N 65536
/* Moves (more with -DMOVES=N: docs/performance.md), and the iterations
 * the application completes between two. */
#ifndef MOVES
#define MOVES 6
#endif
#define ITERS_GAP 3

struct daemon {
	pid_t pid;
	char sock[96], admin[96], state[96];
};

static char dir[64], link_path[96];
/* Start the next daemon without --state-dir. */
static int stateless;

static const char src[] = "kernel void scramble(global const uint *a, global uint *b, uint k)\n"
			  "{ size_t i = get_global_id(0); b[i] = a[i] * 2654435761u + k; }\n";

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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

/* Daemon `name` of dir, with a state directory of its own. */
static void daemon_start(struct daemon *d, const char *name, const char *workers)
{
	const char *bin = getenv("CLMUXD");
	char conf[128];
	FILE *f;

	ck_assert_msg(bin && *bin, "CLMUXD unset");
	snprintf(d->sock, sizeof(d->sock), "%s/%s.sock", dir, name);
	snprintf(d->admin, sizeof(d->admin), "%s/%s-admin.sock", dir, name);
	snprintf(d->state, sizeof(d->state), "%s/%s-state", dir, name);
	snprintf(conf, sizeof(conf), "%s/clmuxd.conf", dir);
	f = fopen(conf, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "[clmuxd]\ndefault-tenant = default\n");
	ck_assert_int_eq(fclose(f), 0);
	d->pid = fork();
	ck_assert_int_ge(d->pid, 0);
	if (d->pid == 0) {
		char listen[128];
		snprintf(listen, sizeof(listen), "unix:%s", d->sock);
		if (stateless)
			execl(bin, bin, "--listen", listen, "--config", conf, "--admin", d->admin,
			      "--workers", workers, (char *)NULL);
		else
			execl(bin, bin, "--listen", listen, "--config", conf, "--admin", d->admin,
			      "--state-dir", d->state, "--workers", workers, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 3000 && !(accepts(d->sock) && accepts(d->admin)); i++)
		usleep(10000);
	ck_assert_msg(accepts(d->sock), "clmuxd did not listen on %s", d->sock);
}

static void daemon_stop(struct daemon *d)
{
	int st;

	kill(d->pid, SIGTERM);
	ck_assert_int_eq(waitpid(d->pid, &st, 0), d->pid);
}

/* The guest's address now leads to d: a new link renamed over the old. */
static void point_at(const struct daemon *d)
{
	char tmp[112];

	snprintf(tmp, sizeof(tmp), "%s.new", link_path);
	unlink(tmp);
	ck_assert_int_eq(symlink(d->sock, tmp), 0);
	ck_assert_int_eq(rename(tmp, link_path), 0);
}

struct mark {
	uint32_t i;
	uint64_t ns;
};

/* The application: iterations of write, kernel, read, each result
 * compared with the native run's, until a byte comes on stop; after each
 * it writes its number and time to fd. Exits 0 when every one matched. */
static void app(int fd, int stop)
{
	static uint32_t a[N], want[N], got[N];
	struct e2e_plat nat, v;
	cl_program prog, nprog;
	cl_kernel kern, nkern;
	cl_mem ma, mb, na, nb;
	size_t g = N;
	cl_int e;

	if (e2e_plat_init(&nat, "native", e2e_native_match()) ||
	    e2e_plat_init(&v, "virtual", e2e_virtual_match()))
		_exit(2);
	prog = e2e_program_build(&v, src, NULL);
	kern = e2e_kernel_create(&v, prog, "scramble");
	nprog = e2e_program_build(&nat, src, NULL);
	nkern = e2e_kernel_create(&nat, nprog, "scramble");
	ma = clCreateBuffer(v.context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, N * 4, NULL, &e);
	mb = clCreateBuffer(v.context, CL_MEM_READ_WRITE, N * 4, NULL, &e);
	na = clCreateBuffer(nat.context, CL_MEM_READ_WRITE, N * 4, NULL, &e);
	nb = clCreateBuffer(nat.context, CL_MEM_READ_WRITE, N * 4, NULL, &e);
	if (!ma || !mb || !na || !nb || clSetKernelArg(kern, 0, sizeof(ma), &ma) ||
	    clSetKernelArg(kern, 1, sizeof(mb), &mb) || clSetKernelArg(nkern, 0, sizeof(na), &na) ||
	    clSetKernelArg(nkern, 1, sizeof(nb), &nb))
		_exit(3);
	fcntl(stop, F_SETFL, O_NONBLOCK);
	for (uint32_t i = 0;; i++) {
		char byte;
		if (read(stop, &byte, 1) == 1)
			break;
		e2e_rand_u32(a, N, 100 + i, 0);
		if (clEnqueueWriteBuffer(nat.queue, na, CL_TRUE, 0, N * 4, a, 0, NULL, NULL) ||
		    clSetKernelArg(nkern, 2, sizeof(i), &i) ||
		    clEnqueueNDRangeKernel(nat.queue, nkern, 1, NULL, &g, NULL, 0, NULL, NULL) ||
		    clEnqueueReadBuffer(nat.queue, nb, CL_TRUE, 0, N * 4, want, 0, NULL, NULL))
			_exit(3);
		int step = 0;
		if ((e = clEnqueueWriteBuffer(v.queue, ma, CL_TRUE, 0, N * 4, a, 0, NULL, NULL)) ||
		    (step++, e = clSetKernelArg(kern, 2, sizeof(i), &i)) ||
		    (step++,
		     e = clEnqueueNDRangeKernel(v.queue, kern, 1, NULL, &g, NULL, 0, NULL, NULL)) ||
		    (step++,
		     e = clEnqueueReadBuffer(v.queue, mb, CL_TRUE, 0, N * 4, got, 0, NULL, NULL))) {
			static const char *const steps[] = {"write", "argument", "launch", "read"};
			fprintf(stderr, "migrate app: iteration %u: %s: error %d\n", i, steps[step],
				e);
			_exit(4);
		}
		if (memcmp(got, want, sizeof(got))) {
			fprintf(stderr, "migrate app: iteration %u: checksum differs\n", i);
			_exit(5);
		}
		struct mark m = {i, now_ns()};
		if (write(fd, &m, sizeof(m)) != sizeof(m))
			_exit(6);
	}
	_exit(0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* refused: the destination has no state directory, the one move is
 * refused, and the session goes on where it was. */
static void migrate_loop(const char *workers, int refused)
{
	struct daemon d[2];
	int pfd[2], sfd[2], st;
	struct mark m = {0};
	uint64_t last = 0, gap_max = 0, gaps[4096];
	unsigned ngaps = 0, seen = 0, after = 0;
	uint64_t moved_ns = 0;
	pid_t pid;

	ck_assert_ptr_nonnull(mkdtemp(strcpy(dir, "/tmp/clmux-migrate-XXXXXX")));
	daemon_start(&d[0], "a", workers);
	stateless = refused;
	daemon_start(&d[1], "b", workers);
	stateless = 0;
	snprintf(link_path, sizeof(link_path), "%s/guest.sock", dir);
	point_at(&d[0]);
	char server[128];
	const char *t = getenv("CMX_E2E_TRANSPORT");
	snprintf(server, sizeof(server), "%s:%s", t && !strcmp(t, "shm") ? "shm" : "unix",
		 link_path);
	setenv("CLMUX_SERVER", server, 1);
	ck_assert_int_eq(pipe(pfd), 0);
	ck_assert_int_eq(pipe(sfd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(pfd[0]);
		close(sfd[1]);
		app(pfd[1], sfd[0]);
	}
	close(pfd[1]);
	close(sfd[0]);
	for (unsigned moves = 0;;) {
		ck_assert_msg(read(pfd[0], &m, sizeof(m)) == sizeof(m),
			      "the application ended after %u iterations", seen);
		ck_assert_uint_eq(m.i, seen);
		if (seen) {
			uint64_t gap = m.ns - last;
			gap_max = gap > gap_max ? gap : gap_max;
			if (ngaps < sizeof(gaps) / sizeof(gaps[0]))
				gaps[ngaps++] = gap;
		}
		last = m.ns;
		seen++;
		/* Iterations that ended on the source while the move ran
		 * may come after its answer: these count from then on. */
		after += m.ns > moved_ns;
		if (after < ITERS_GAP)
			continue;
		if (moves == MOVES)
			break;
		/* From the daemon that has the session to the other. */
		const struct daemon *from = &d[moves % 2], *to = &d[(moves + 1) % 2];
		char req[160], *ans;
		if (!refused)
			point_at(to);
		snprintf(req, sizeof(req), "migrate --tenant default --to unix:%s\n", to->admin);
		ans = ask(from->admin, req);
		if (refused)
			ck_assert_msg(!strcmp(ans,
					      "error: the destination: no state directory here "
					      "(clmuxd --state-dir)\n"),
				      "%s", ans);
		else
			ck_assert_msg(!strncmp(ans, "ok\n1 session moved", 18), "move %u: %s",
				      moves, ans);
		free(ans);
		moves = refused ? MOVES : moves + 1;
		moved_ns = now_ns();
		after = 0;
	}
	ck_assert_int_eq(write(sfd[1], "", 1), 1);
	close(sfd[1]);
	while (read(pfd[0], &m, sizeof(m)) == sizeof(m))
		;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the application failed: %d", st);
	close(pfd[0]);
	qsort(gaps, ngaps, sizeof(gaps[0]), cmp_u64);
	if (!refused)
		fprintf(stderr,
			"e2e_migrate (workers %s): %d moves, %u iterations; blackout (longest gap "
			"between two iterations) %.1f ms, median iteration %.1f ms\n",
			workers, MOVES, seen, (double)gap_max / 1e6,
			ngaps ? (double)gaps[ngaps / 2] / 1e6 : 0.0);
	/* The moves' files are gone from the sources' state directories. */
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A '%s')\"", d[0].state);
	ck_assert_int_eq(system(cmd), 0);
	daemon_stop(&d[0]);
	daemon_stop(&d[1]);
	char rm[96];
	snprintf(rm, sizeof(rm), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(rm), 0);
}

/* What the destination's admin socket takes is checked before it is
 * kept: bytes that are no state file, and one whose checksum is wrong,
 * are refused with the reason, nothing is left in the state directory,
 * and the daemon goes on answering. */
START_TEST(state_in_refused)
{
	struct daemon d;
	char req[160 + 128 + 16], *ans;
	uint32_t head[32] = {0};

	ck_assert_ptr_nonnull(mkdtemp(strcpy(dir, "/tmp/clmux-migrate-XXXXXX")));
	daemon_start(&d, "b", "off");
	memset(req, 'x', sizeof(req));
	memcpy(req, "state-in\n", 9);
	ans = ask_n(d.admin, req, 9 + 200);
	ck_assert_msg(!strcmp(ans, "error: not a state file\n"), "%s", ans);
	free(ans);
	/* A header that says 16 bytes follow, without its checksum. */
	memcpy(head, "CMXSTAT\n", 8);
	head[2] = CMX_STATE_VERSION;
	head[3] = 128; /* head_size */
	head[14] = 16; /* body */
	memcpy(req + 9, head, sizeof(head));
	ans = ask_n(d.admin, req, 9 + 128 + 16);
	ck_assert_msg(!strcmp(ans, "error: a damaged state file\n"), "%s", ans);
	free(ans);
	ans = ask(d.admin, "tenants\n");
	ck_assert_msg(!strncmp(ans, "ok\n", 3), "%s", ans);
	free(ans);
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A '%s')\"", d.state);
	ck_assert_int_eq(system(cmd), 0);
	daemon_stop(&d);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* A destination that cannot take the session: the move is refused with
 * its reason, the session stays on the source, and the application goes
 * on with no error. */
START_TEST(refused_move_stays)
{
	migrate_loop("on", 1);
}
END_TEST

START_TEST(migrate_no_workers)
{
	migrate_loop("off", 0);
}
END_TEST

/* With worker processes: the source's tenant worker writes and sends,
 * the destination's front end takes the files and its worker restores. */
START_TEST(migrate_workers)
{
	migrate_loop("on", 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("migrate");
	TCase *tc = tcase_create("off"), *tw = tcase_create("workers");
	SRunner *sr;
	int failed;

	if (!getenv("CLMUXD"))
		return E2E_EXIT_SKIP;
	tcase_add_test(tc, state_in_refused);
	tcase_add_test(tc, refused_move_stays);
	tcase_add_test(tc, migrate_no_workers);
	tcase_add_test(tw, migrate_workers);
	tcase_set_timeout(tc, E2E_TIMEOUT_S * 2);
	tcase_set_timeout(tw, E2E_TIMEOUT_S * 2);
	suite_add_tcase(s, tc);
	suite_add_tcase(s, tw);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
