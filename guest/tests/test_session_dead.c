// SPDX-License-Identifier: MIT
// The guest's session when the daemon dies: over unix: and shm:, a call
// made after clmuxd is killed fails (it must not hang on a ring nobody
// will fill), and the session reports itself broken.
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto.gen.h"
#include "session.h"

static void *no_dst(void *ctx, unsigned op, const void *args, uint64_t len)
{
	return NULL;
}

static void no_done(void *ctx, unsigned op, const void *args)
{
}

static const struct cmx_notify_ops ops = {.bulk_dst = no_dst, .done = no_done};

/* A private clmuxd listening on dir/s.sock; its pid. */
static pid_t daemon_start(const char *dir, char *sock, size_t len)
{
	const char *bin = getenv("CLMUXD");
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char listen_addr[200];
	pid_t pid;

	ck_assert_msg(bin && *bin, "CLMUXD unset");
	snprintf(sock, len, "%s/s.sock", dir);
	snprintf(listen_addr, sizeof(listen_addr), "unix:%s", sock);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execl(bin, bin, "--listen", listen_addr, (char *)NULL);
		_exit(127);
	}
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock);
	for (int i = 0; i < 1000; i++) {
		int fd = socket(AF_UNIX, SOCK_STREAM, 0), ok;
		ok = connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0;
		close(fd);
		if (ok)
			return pid;
		usleep(10000);
	}
	ck_abort_msg("clmuxd did not listen on %s", sock);
	return -1;
}

static int ping(struct cmx_session *s)
{
	struct cmx_Ping_in in = {0};
	struct cmx_Ping_out out;
	struct cmx_reply r;
	int e = cmx_session_call(s, &cmx_desc_Ping_in, &in, NULL, 0, &cmx_desc_Ping_out, &out, &r,
				 NULL, 0);

	if (!e) {
		e = r.status;
		cmx_reply_fini(&r);
	}
	return e;
}

static void daemon_dies_under(const char *scheme)
{
	char dir[] = "/tmp/clmux-dead-XXXXXX", sock[96], spec[128];
	struct cmx_session *s;
	int status;
	pid_t pid;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	pid = daemon_start(dir, sock, sizeof(sock));
	snprintf(spec, sizeof(spec), "%s:%s", scheme, sock);
	ck_assert_int_eq(cmx_session_open(spec, &ops, NULL, &s), 0);
	ck_assert_int_eq(ping(s), 0);
	ck_assert_int_eq(cmx_session_broken(s), 0);
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	/* The call fails instead of waiting forever for a reply. */
	ck_assert_int_lt(ping(s), 0);
	ck_assert_int_ne(cmx_session_broken(s), 0);
	ck_assert_int_lt(ping(s), 0);
	cmx_session_close(s);
	unlink(sock);
	rmdir(dir);
}

START_TEST(daemon_killed_unix)
{
	daemon_dies_under("unix");
}
END_TEST

START_TEST(daemon_killed_shm)
{
	daemon_dies_under("shm");
}
END_TEST

int main(void)
{
	Suite *su = suite_create("session_dead");
	TCase *tc = tcase_create("session_dead");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, daemon_killed_unix);
	tcase_add_test(tc, daemon_killed_shm);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
