// SPDX-License-Identifier: MIT
// Least privilege, against real clmuxd processes: an ivshmem region file
// someone else prepared is refused; mode= and group= land on every kind of
// Unix socket; the metrics endpoint stays on loopback unless told; and
// --user leaves a daemon without root that still serves. The parts that
// need root (chown to another user, --user) are skipped without it.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ivshmem_layout.h"
#include "rawclient.h"

#define WAIT_STEPS 6000 /* of 10 ms: only "never" fails, not "slow" */

static char dir[] = "/tmp/clmux-priv-XXXXXX";
static char logpath[PATH_MAX];

/* Starts $CLMUXD with args (NULL-terminated) and umask 022, its output in
 * logpath. */
static pid_t spawn(const char *const *args)
{
	const char *bin = getenv("CLMUXD");
	const char *argv[32] = {bin};
	pid_t pid;
	int n = 1;

	ck_assert_msg(bin && *bin, "CLMUXD unset");
	for (; *args && n < 31; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	snprintf(logpath, sizeof(logpath), "%s/clmuxd.log", dir);
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		umask(022);
		setenv("CLMUX_LOG", "info", 1); /* the tests read its info lines */
		dup2(fd, 1);
		dup2(fd, 2);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/* The daemon's exit status once it exits on its own, or -1 (killed) when it
 * is still running after WAIT_STEPS. */
static int exit_status(pid_t pid)
{
	int status;

	for (int i = 0; i < WAIT_STEPS; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

static int log_has(const char *text)
{
	char buf[16384];
	FILE *f = fopen(logpath, "r");
	size_t n;

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, text) != NULL;
}

/* Waits until the Unix socket at path accepts (the daemon is serving);
 * fails when the daemon exits first. */
static void wait_serving(pid_t pid, const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int status;

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	for (int i = 0; i < WAIT_STEPS; i++) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;
		ok = connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0;
		close(fd);
		if (ok)
			return;
		ck_assert_msg(waitpid(pid, &status, WNOHANG) != pid, "clmuxd exited; see %s",
			      logpath);
		usleep(10000);
	}
	ck_abort_msg("clmuxd never listened on %s", path);
}

static int file_has_magic(const char *path, uint32_t magic)
{
	uint32_t v = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	if (read(fd, &v, sizeof(v)) != sizeof(v))
		v = 0;
	close(fd);
	return v == magic;
}

/* SIGTERM; the daemon drains and exits 0. */
static void stop(pid_t pid)
{
	kill(pid, SIGTERM);
	ck_assert_int_eq(exit_status(pid), 0);
}

static const char *at(const char *name)
{
	static char paths[64][PATH_MAX];
	static unsigned next;
	char *p = paths[next++ % 64];

	snprintf(p, PATH_MAX, "%s/%s", dir, name);
	return p;
}

static const char *spec(const char *fmt, const char *path)
{
	static char specs[64][PATH_MAX + 128];
	static unsigned next;
	char *s = specs[next++ % 64];

	snprintf(s, sizeof(specs[0]), fmt, path);
	return s;
}

/* A region file a daemon may not take: it exits 1 naming the reason, and
 * the file is as it was. */
static void region_refused(const char *path, const char *why)
{
	const char *args[] = {"--admin",  "none",
			      "--listen", spec("unix:%s", at("s.sock")),
			      "--listen", spec("ivshmem:%s,size=4M", path),
			      NULL};
	struct stat before, after;
	int have = !lstat(path, &before);

	ck_assert_int_eq(exit_status(spawn(args)), 1);
	ck_assert_msg(log_has(why), "no '%s' in %s", why, logpath);
	ck_assert_msg(log_has("remove it"), "the error names no fix");
	if (have) {
		ck_assert_int_eq(lstat(path, &after), 0);
		ck_assert_int_eq(after.st_size, before.st_size);
		ck_assert_int_eq(after.st_uid, before.st_uid);
		ck_assert_int_eq(after.st_mode, before.st_mode);
	}
}

START_TEST(ivshmem_region_file)
{
	const char *mine = at("r-mine"), *open_ = at("r-0666"), *link_ = at("r-link"),
		   *target = at("r-target"), *theirs = at("r-theirs");
	const char *serve[] = {"--admin",  "none",
			       "--listen", spec("unix:%s", at("s.sock")),
			       "--listen", spec("ivshmem:%s,size=4M", mine),
			       NULL};
	const char *shared[] = {"--admin",  "none",
				"--listen", spec("unix:%s", at("s.sock")),
				"--listen", spec("ivshmem:%s,size=4M,mode=0660,group=", mine),
				NULL};
	/* A group other than ours where we may choose one (root). */
	gid_t gid = geteuid() == 0 ? 65534 : getegid();
	char g[32];
	struct stat st;
	pid_t pid;
	int fd;

	snprintf(g, sizeof(g), "%u", (unsigned)gid);
	strcat((char *)shared[5], g);

	/* Made by the daemon: its own, 0600 whatever the umask. */
	pid = spawn(serve);
	wait_serving(pid, at("s.sock"));
	for (int i = 0; i < WAIT_STEPS && !file_has_magic(mine, CMX_IVS_MAGIC); i++)
		usleep(10000);
	ck_assert(file_has_magic(mine, CMX_IVS_MAGIC));
	ck_assert_int_eq(lstat(mine, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_uint_eq(st.st_uid, geteuid());
	ck_assert_int_eq(st.st_size, 4 << 20);
	stop(pid);
	/* Its own file from an earlier run is taken again, with today's
	 * mode= and group=. */
	pid = spawn(shared);
	wait_serving(pid, at("s.sock"));
	for (int i = 0; i < WAIT_STEPS && !log_has("serving ivshmem"); i++)
		usleep(10000);
	ck_assert_int_eq(lstat(mine, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0660);
	ck_assert_uint_eq(st.st_gid, gid);
	stop(pid);

	/* Writable by others: anyone could have shrunk it, or read it. */
	fd = open(open_, O_RDWR | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fchmod(fd, 0666), 0);
	close(fd);
	region_refused(open_, "writable by its group or by others");
	/* A link to somewhere else: nothing is created there. */
	ck_assert_int_eq(symlink(target, link_), 0);
	region_refused(link_, "symbolic link");
	ck_assert_int_ne(access(target, F_OK), 0);
	/* Made first by another user. */
	fd = open(theirs, O_RDWR | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	if (geteuid() != 0) {
		fprintf(stderr, "test_privilege: not root: the other-owner case is skipped\n");
		return;
	}
	ck_assert_int_eq(chown(theirs, 65534, 65534), 0);
	region_refused(theirs, "owned by another user");
}
END_TEST

/* mode= and group= on unix:, vsock-uds: and vhost-user-vsock: sockets; the
 * umask's mode without them; bad values refused at start-up. */
START_TEST(socket_mode_group)
{
	/* A group other than ours where we may choose one (root). */
	gid_t gid = geteuid() == 0 ? 65534 : getegid();
	char g[32];
	const char *args[] = {"--admin",  "none", "--listen", spec("unix:%s", at("plain.sock")),
			      "--listen", NULL,	  "--listen", NULL,
			      "--listen", NULL,	  NULL};
	static const char *const bad[][2] = {
	    {"unix:%s,mode=0999", "mode=0999"},
	    {"unix:%s,mode=01777", "mode=01777"},
	    {"unix:%s,group=no-such-group-clmux", "group=no-such-group-clmux"},
	    {"vsock-uds:%s,cid=3,mode=rw", "mode=rw"},
	};
	struct client c;
	struct stat st;
	pid_t pid;

	snprintf(g, sizeof(g), "%u", (unsigned)gid);
	args[5] = spec("unix:%s,mode=0660,group=", at("a.sock"));
	strcat((char *)args[5], g);
	args[7] = spec("vsock-uds:%s,cid=3,mode=0600", at("v.sock_7447"));
	args[9] = spec("vhost-user-vsock:%s,cid=5,mode=0640,group=", at("vh.sock"));
	strcat((char *)args[9], g);
	pid = spawn(args);
	wait_serving(pid, at("plain.sock"));
	wait_serving(pid, at("vh.sock"));
	ck_assert_int_eq(stat(at("a.sock"), &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0660);
	ck_assert_uint_eq(st.st_gid, gid);
	ck_assert_int_eq(stat(at("v.sock_7447"), &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(stat(at("vh.sock"), &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0640);
	ck_assert_uint_eq(st.st_gid, gid);
	/* Without the options: what the umask (022) leaves. */
	ck_assert_int_eq(stat(at("plain.sock"), &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0755);
	/* And the socket serves. */
	hello_at(&c, at("a.sock"));
	ping_ok(&c);
	close(c.fd);
	stop(pid);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *b[] = {"--admin", "none", "--listen", spec(bad[i][0], at("b.sock")),
				   NULL};
		ck_assert_int_eq(exit_status(spawn(b)), 2);
		ck_assert_msg(log_has(bad[i][1]), "case %zu: no '%s' in %s", i, bad[i][1], logpath);
		ck_assert_int_ne(access(at("b.sock"), F_OK), 0);
	}
	/* Not on sockets without a file. */
	{
		const char *b[] = {"--admin", "none", "--listen", "tcp:127.0.0.1:1,mode=0600",
				   NULL};
		ck_assert_int_eq(exit_status(spawn(b)), 2);
		ck_assert(log_has("unknown option 'mode'"));
	}
}
END_TEST

/* A loopback port free now. */
static int free_port(void)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port;

	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	port = ntohs(sin.sin_port);
	close(fd);
	return port;
}

static int tcp_connects(int port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				  .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

	ok = connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0;
	close(fd);
	return ok;
}

/* Metrics ask nobody for a token: a wildcard or other non-loopback address
 * only with ,public; a Unix socket 0600 unless mode= says otherwise. */
START_TEST(metrics_loopback)
{
	char m[64];
	const char *args[] = {"--admin",   "none", "--listen", spec("unix:%s", at("s.sock")),
			      "--metrics", m,	   NULL};
	int port = free_port();
	struct stat st;
	pid_t pid;

	snprintf(m, sizeof(m), "tcp:0.0.0.0:%d", port);
	ck_assert_int_eq(exit_status(spawn(args)), 1);
	ck_assert(log_has("not a loopback address"));
	ck_assert(log_has(",public"));
	/* (It exited: whoever may listen on the port now is another
	 * program's, so no connect check here.) */

	snprintf(m, sizeof(m), "tcp:0.0.0.0:%d,public", port);
	pid = spawn(args);
	wait_serving(pid, at("s.sock"));
	for (int i = 0; i < WAIT_STEPS && !tcp_connects(port); i++)
		usleep(10000);
	ck_assert(tcp_connects(port));
	stop(pid);

	snprintf(m, sizeof(m), "unix:%s", at("m.sock"));
	pid = spawn(args);
	/* The guests' sockets listen first, the metrics socket after. */
	wait_serving(pid, at("s.sock"));
	wait_serving(pid, at("m.sock"));
	ck_assert_int_eq(stat(at("m.sock"), &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	stop(pid);
}
END_TEST

/* The numbers of one /proc/PID/status line ("Uid:", "Groups:"), up to 64. */
static int status_ids(pid_t pid, const char *key, long *v)
{
	char path[64], line[1024];
	int n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (n < 0 && fgets(line, sizeof(line), f)) {
		char *p = line + strlen(key), *end;
		if (strncmp(line, key, strlen(key)))
			continue;
		n = 0;
		for (long x;
		     n < 64 && (x = strtol(p, &end, !strcmp(key, "CapEff:") ? 16 : 10), end != p);
		     p = end)
			v[n++] = x;
	}
	fclose(f);
	ck_assert_msg(n >= 0, "no %s line", key);
	return n;
}

static int has(const long *v, int n, long x)
{
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return 1;
	return 0;
}

/* --user nobody: after start-up the daemon holds none of root's ids, no
 * capability, no_new_privs, nobody's groups, and still serves a client its
 * buffers. */
START_TEST(user_drop)
{
	const char *args[] = {"--admin", "none",   "--listen", spec("unix:%s", at("u.sock")),
			      "--user",	 "nobody", NULL};
	uint8_t data[4096], back[4096];
	struct cmx_WriteBuffer_in wr = {
	    .queue = {0x10001}, .mem = {0x10002}, .size = sizeof(data)};
	struct cmx_ReadBuffer_in rd = {
	    .queue = {0x10001}, .mem = {0x10002}, .size = sizeof(back)};
	struct passwd *pw = getpwnam("nobody");
	long v[64], want[64];
	gid_t groups[64];
	int n, ng = 64;
	struct client c;
	pid_t pid;

	if (geteuid() != 0) {
		fprintf(stderr, "test_privilege: not root: --user is skipped\n");
		return;
	}
	ck_assert_ptr_nonnull(pw);
	ck_assert_int_ge(getgrouplist("nobody", pw->pw_gid, groups, &ng), 0);
	pid = spawn(args);
	wait_serving(pid, at("u.sock"));
	/* The socket listens before the daemon changes user. The front
	 * end's line, not its worker's ("clmuxd[t:default]: ..."), which
	 * may come first. */
	for (int i = 0; i < WAIT_STEPS && !log_has("clmuxd: info: running as nobody"); i++)
		usleep(10000);
	ck_assert(log_has("clmuxd: info: running as nobody"));
	n = status_ids(pid, "Uid:", v);
	ck_assert_int_eq(n, 4);
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(v[i], (long)pw->pw_uid);
	n = status_ids(pid, "Gid:", v);
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(v[i], (long)pw->pw_gid);
	n = status_ids(pid, "Groups:", v);
	ck_assert_int_eq(n, ng);
	for (int i = 0; i < ng; i++) {
		want[i] = groups[i];
		ck_assert_msg(has(v, n, want[i]), "group %ld missing", want[i]);
	}
	ck_assert_int_eq(status_ids(pid, "NoNewPrivs:", v), 1);
	ck_assert_int_eq(v[0], 1);
	ck_assert_int_eq(status_ids(pid, "CapEff:", v), 1);
	ck_assert_int_eq(v[0], 0);
	/* A client: a buffer written and read back. */
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 3);
	hello_at(&c, at("u.sock"));
	queue_and_buffer(&c, 0x10000, sizeof(data));
	send_msg(&c, &cmx_desc_WriteBuffer_in, &wr, 1, data, sizeof(data));
	ck_assert_int_eq(recv_reply(&c, NULL, NULL, NULL), 0);
	send_msg(&c, &cmx_desc_ReadBuffer_in, &rd, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&c, NULL, NULL, NULL), 0);
	ck_assert_int_eq(recv(c.fd, back, sizeof(back), MSG_WAITALL), (ssize_t)sizeof(back));
	ck_assert_mem_eq(back, data, sizeof(data));
	close(c.fd);
	stop(pid);

	/* A user that is not there, and root, are refused: the daemon never
	 * runs on with more than it was told. */
	args[5] = "no-such-user-clmux";
	ck_assert_int_eq(exit_status(spawn(args)), 1);
	ck_assert(log_has("no such user"));
	args[5] = "root";
	ck_assert_int_eq(exit_status(spawn(args)), 1);
	ck_assert(log_has("that is root"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("privilege");
	TCase *tc = tcase_create("privilege");
	SRunner *sr;
	int failed;

	if (!getenv("CLMUXD") || !*getenv("CLMUXD"))
		return 77;
	if (!mkdtemp(dir))
		return 1;
	tcase_add_test(tc, ivshmem_region_file);
	tcase_add_test(tc, socket_mode_group);
	tcase_add_test(tc, metrics_loopback);
	tcase_add_test(tc, user_drop);
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	if (failed) {
		/* The last daemon's log says why (each test runs in a child,
		 * so the parent knows only the directory). */
		char cmd[64 + sizeof(dir)];
		snprintf(cmd, sizeof(cmd), "tail -40 '%s/clmuxd.log' >&2", dir);
		if (system(cmd))
			fprintf(stderr, "test_privilege: no daemon log\n");
	}
	{
		char cmd[64 + sizeof(dir)];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd))
			fprintf(stderr, "test_privilege: could not remove %s\n", dir);
	}
	return failed ? 1 : 0;
}
