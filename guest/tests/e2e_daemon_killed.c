// SPDX-License-Identifier: MIT
// An application whose clmuxd is killed: over unix: (or shm:, with
// CMX_E2E_TRANSPORT=shm, or an ivshmem region with CMX_E2E_TRANSPORT=ivshmem,
// where the daemon's polling stops) a blocking call made after the daemon died fails
// with an error instead of waiting forever for a reply that cannot come,
// and later calls fail at once.
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e.h"

/* A private clmuxd on dir/s.sock, the ICD pointed at it; its pid. */
static pid_t daemon_start(char *dir)
{
	const char *bin = getenv("CLMUXD"), *t = getenv("CMX_E2E_TRANSPORT");
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char listen_addr[160], server[200], region[160], ivs[200];
	int ivshmem = t && !strcmp(t, "ivshmem");
	pid_t pid;

	ck_assert_msg(bin && *bin, "CLMUXD unset");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/s.sock", dir);
	snprintf(listen_addr, sizeof(listen_addr), "unix:%s", sun.sun_path);
	snprintf(server, sizeof(server), "%s:%s", t && *t ? t : "unix", sun.sun_path);
	snprintf(region, sizeof(region), "%s/region", dir);
	snprintf(ivs, sizeof(ivs), "ivshmem:%s,size=16M", region);
	if (ivshmem)
		snprintf(server, sizeof(server), "ivshmem:%s", region);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (ivshmem)
			execl(bin, bin, "--listen", listen_addr, "--listen", ivs, (char *)NULL);
		else
			execl(bin, bin, "--listen", listen_addr, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 1000; i++) {
		int fd = socket(AF_UNIX, SOCK_STREAM, 0), ok;
		ok = connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0;
		close(fd);
		/* The region is ready a moment after the socket. */
		if (ok && ivshmem)
			ok = e2e_file_has_magic(region, 0x49584d43u);
		if (ok) {
			setenv("CLMUX_SERVER", server, 1);
			return pid;
		}
		usleep(10000);
	}
	ck_abort_msg("clmuxd did not listen on %s", sun.sun_path);
	return -1;
}

START_TEST(daemon_killed)
{
	char dir[] = "/tmp/clmux-killed-XXXXXX", sock[64], data[4096] = {1};
	pid_t pid = daemon_start(dir);
	struct e2e_plat p;
	cl_int e;
	cl_mem m;
	int status;

	ck_assert_int_eq(e2e_plat_init(&p, "virtual", e2e_virtual_match()), 0);
	m = clCreateBuffer(p.context, CL_MEM_READ_WRITE, sizeof(data), NULL, &e);
	ck_assert_int_eq(e, CL_SUCCESS);
	ck_assert_int_eq(
	    clEnqueueWriteBuffer(p.queue, m, CL_TRUE, 0, sizeof(data), data, 0, NULL, NULL),
	    CL_SUCCESS);
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	/* A reply that cannot come: the call must fail, not hang. */
	ck_assert_int_ne(
	    clEnqueueReadBuffer(p.queue, m, CL_TRUE, 0, sizeof(data), data, 0, NULL, NULL),
	    CL_SUCCESS);
	ck_assert_int_ne(clFinish(p.queue), CL_SUCCESS);
	ck_assert_int_ne(
	    clEnqueueWriteBuffer(p.queue, m, CL_TRUE, 0, sizeof(data), data, 0, NULL, NULL),
	    CL_SUCCESS);
	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	unlink(sock);
	snprintf(sock, sizeof(sock), "%s/region", dir);
	unlink(sock);
	rmdir(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("daemon_killed");
	TCase *tc = tcase_create("daemon_killed");
	SRunner *sr;
	int failed;

	/* The harness's own daemon is not wanted: this test kills its own. */
	tcase_add_test(tc, daemon_killed);
	tcase_set_timeout(tc, E2E_TIMEOUT_S);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
