// SPDX-License-Identifier: MIT
// The worker's sandbox (host/sandbox.c): its filter in forked children
// (what it refuses, how, and what it lets through), and every worker of a
// live clmuxd filtered while a client builds and runs a kernel.
#define _GNU_SOURCE
#include <CL/cl.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "e2e.h"
#include "sandbox.h"

#define WAIT_STEPS 6000 /* of 10 ms: only "never" fails, not "slow" */

/* How a forked child that entered the sandbox ended: its exit status, or
 * 128 + the signal; what it wrote on stderr in err. */
struct ending {
	int code;
	char err[1024];
};

/* Runs fn in a child that entered the sandbox in mode for who. */
static struct ending in_sandbox(int mode, int who, void (*fn)(void))
{
	struct ending e = {0};
	int p[2], st;
	pid_t pid;
	ssize_t n;

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char why[200];
		dup2(p[1], 2);
		if (cmx_sandbox_enter(mode, who, "test", 600, why, sizeof(why))) {
			dprintf(2, "enter: %s\n", why);
			_exit(99);
		}
		fn();
		_exit(0);
	}
	close(p[1]);
	n = read(p[0], e.err, sizeof(e.err) - 1);
	e.err[n > 0 ? n : 0] = '\0';
	close(p[0]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	e.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return e;
}

static void do_ptrace(void)
{
	syscall(SYS_ptrace, PTRACE_TRACEME, 0, 0, 0);
}
static void do_mount(void)
{
	mount("none", "/mnt", "tmpfs", 0, NULL);
}
static void do_unshare(void)
{
	unshare(CLONE_NEWUSER);
}
static void do_setns(void)
{
	syscall(SYS_setns, 0, 0);
}
static void do_bpf(void)
{
	syscall(SYS_bpf, 0, NULL, 0);
}
static void do_perf(void)
{
	syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0);
}
static void do_vm_read(void)
{
	syscall(SYS_process_vm_readv, getppid(), NULL, 0, NULL, 0, 0);
}
static void do_uring_setup(void)
{
	syscall(SYS_io_uring_setup, 4, NULL);
}
static void do_keyctl(void)
{
	syscall(SYS_keyctl, 0, 0, 0, 0, 0);
}
static void do_chroot(void)
{
	syscall(SYS_chroot, "/");
}
static void do_x32(void)
{
	/* getpid by its x32 number: another ABI's table, refused whole. */
	syscall(0x40000000 | SYS_getpid);
}

/* Calls outside the list end the child by SIGSYS, after one line naming
 * the call's number. */
START_TEST(refused_calls_end_the_process)
{
	static const struct {
		void (*fn)(void);
		long nr;
	} calls[] = {
	    {do_ptrace, SYS_ptrace},
	    {do_mount, SYS_mount},
	    {do_unshare, SYS_unshare},
	    {do_setns, SYS_setns},
	    {do_bpf, SYS_bpf},
	    {do_perf, SYS_perf_event_open},
	    {do_vm_read, SYS_process_vm_readv},
	    {do_uring_setup, SYS_io_uring_setup},
	    {do_keyctl, SYS_keyctl},
	    {do_chroot, SYS_chroot},
	    {do_x32, 0x40000000 | SYS_getpid},
	};

	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		struct ending e = in_sandbox(CMX_SANDBOX_ON, CMX_SANDBOX_WORKER, calls[i].fn);
		char want[96];
		ck_assert_msg(e.code == 128 + SIGSYS, "call %ld: ended %d, said %s", calls[i].nr,
			      e.code, e.err);
		snprintf(want, sizeof(want), "test: sandbox: refused system call (number %ld)",
			 calls[i].nr);
		ck_assert_msg(strstr(e.err, want), "call %ld said '%s'", calls[i].nr, e.err);
	}
}
END_TEST

static void errors_fn(void)
{
	struct rlimit rl;
	int code = 0;

	/* Network sockets: none of its own. */
	if (socket(AF_INET, SOCK_STREAM, 0) >= 0 || errno != EAFNOSUPPORT)
		code |= 1;
	if (socket(AF_NETLINK, SOCK_RAW, 0) >= 0 || errno != EAFNOSUPPORT)
		code |= 2;
	/* Signals and rlimits of other processes. */
	if (kill(getppid(), 0) == 0 || errno != EPERM)
		code |= 4;
	if (syscall(SYS_tgkill, getppid(), getppid(), 0) == 0 || errno != EPERM)
		code |= 8;
	if (prlimit(getppid(), RLIMIT_NOFILE, NULL, &rl) == 0 || errno != EPERM)
		code |= 16;
	/* Namespaces through clone. */
	if (syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0) >= 0 || errno != EPERM)
		code |= 32;
	/* clone3 hides its flags from the filter: glibc falls back. */
	if (syscall(SYS_clone3, NULL, 0) >= 0 || errno != ENOSYS)
		code |= 64;
	_exit(code);
}

/* What the filter answers with an error rather than an end: arguments a
 * rule refuses, and clone3. */
START_TEST(refused_arguments_get_errors)
{
	struct ending e = in_sandbox(CMX_SANDBOX_ON, CMX_SANDBOX_WORKER, errors_fn);

	ck_assert_msg(e.code == 0, "failed checks %#x: %s", e.code, e.err);
}
END_TEST

static void *thread_main(void *arg)
{
	return arg;
}

static void allowed_fn(void)
{
	struct rlimit rl;
	pthread_t t;
	void *ret = NULL;
	int sv[2], st, code = 0;
	pid_t pid;
	char *argv[] = {"true", NULL};

	/* Threads (clone3 refused, glibc's clone), processes, exec (the
	 * linker PoCL runs), Unix sockets, files, signals to itself. */
	if (pthread_create(&t, NULL, thread_main, &code) || pthread_join(t, &ret) || ret != &code)
		code |= 1;
	pid = fork();
	if (pid == 0)
		_exit(7);
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 7)
		code |= 2;
	pid = fork();
	if (pid == 0) {
		execv("/bin/true", argv);
		_exit(126);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		code |= 4;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		code |= 8;
	if (open("/dev/null", O_RDONLY) < 0)
		code |= 16;
	if (kill(getpid(), 0))
		code |= 32;
	/* The rlimits and the dumpable flag came with the filter. */
	if (getrlimit(RLIMIT_CORE, &rl) || rl.rlim_cur || rl.rlim_max)
		code |= 64;
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_max > 600)
		code |= 128;
	if (prctl(PR_GET_DUMPABLE) != 0)
		code |= 256;
	_exit(code > 255 ? 255 : code);
}

/* What a worker and its driver do runs under the filter. */
START_TEST(allowed_calls_run)
{
	struct ending e = in_sandbox(CMX_SANDBOX_ON, CMX_SANDBOX_WORKER, allowed_fn);

	ck_assert_msg(e.code == 0, "failed checks %#x: %s", e.code, e.err);
}
END_TEST

static int go[2];

static void *late_main(void *arg)
{
	char c;

	(void)arg;
	if (read(go[0], &c, 1) == 1)
		syscall(SYS_ptrace, PTRACE_TRACEME, 0, 0, 0);
	return NULL;
}

static void thread_fn(void)
{
	/* Never reached: the thread started before the filter ends the
	 * process. The filter was entered by the main thread, in
	 * in_sandbox(); this thread was made by the constructor below. */
	if (write(go[1], "x", 1) != 1)
		_exit(3);
	sleep(30);
	_exit(4);
}

/* A thread that existed before the filter is filtered too: the driver's
 * and the executors' threads start before the worker enters its sandbox. */
START_TEST(threads_made_before_are_filtered)
{
	struct ending e;
	pid_t pid;
	int st;

	/* The thread must exist before the child enters: fork first, make
	 * the thread, then enter, in a grandchild of its own. */
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		pthread_t t;
		char why[200];
		if (pipe(go) || pthread_create(&t, NULL, late_main, NULL))
			_exit(98);
		if (cmx_sandbox_enter(CMX_SANDBOX_ON, CMX_SANDBOX_WORKER, "test", 0, why,
				      sizeof(why)))
			_exit(99);
		thread_fn();
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	e.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	ck_assert_int_eq(e.code, 128 + SIGSYS);
}
END_TEST

static void sleep_fn(void)
{
	struct timespec ts = {.tv_sec = 1};

	/* Stopped and continued in the middle: the kernel goes on with
	 * restart_syscall, which the filter must let through. */
	for (int i = 0; i < 2; i++)
		nanosleep(&ts, NULL);
	_exit(0);
}

/* A stop (a debugger attaching, ^Z) in the middle of a wait does not end
 * the worker. */
START_TEST(stop_and_continue)
{
	pid_t pid;
	int st;

	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char why[200];
		if (cmx_sandbox_enter(CMX_SANDBOX_ON, CMX_SANDBOX_WORKER, "test", 0, why,
				      sizeof(why)))
			_exit(99);
		sleep_fn();
	}
	usleep(300000);
	kill(pid, SIGSTOP);
	usleep(100000);
	kill(pid, SIGCONT);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "ended %#x", st);
}
END_TEST

static void log_fn(void)
{
	/* Outside the list, and outside a rule: both run. */
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		_exit(1);
	syscall(SYS_personality, 0xffffffffUL);
	_exit(0);
}

/* --sandbox log: nothing is refused (the kernel's audit log names it). */
START_TEST(log_mode_lets_through)
{
	struct ending e = in_sandbox(CMX_SANDBOX_LOG, CMX_SANDBOX_WORKER, log_fn);

	ck_assert_msg(e.code == 0, "ended %d: %s", e.code, e.err);
}
END_TEST

static void build_socket_fn(void)
{
	socket(AF_UNIX, SOCK_STREAM, 0);
	_exit(0);
}
static void build_inet_fn(void)
{
	_exit(socket(AF_INET, SOCK_STREAM, 0) < 0 && errno == EAFNOSUPPORT ? 0 : 1);
}
static void build_uring_fn(void)
{
	syscall(SYS_io_uring_enter, 0, 0, 0, 0, NULL, 0);
	_exit(0);
}

/* A build child's own filter is smaller: no io_uring; Unix sockets only
 * (NVIDIA's compiler connects to one). */
START_TEST(build_filter_is_smaller)
{
	ck_assert_int_eq(in_sandbox(CMX_SANDBOX_ON, CMX_SANDBOX_BUILD, build_socket_fn).code, 0);
	ck_assert_int_eq(in_sandbox(CMX_SANDBOX_ON, CMX_SANDBOX_BUILD, build_inet_fn).code, 0);
	ck_assert_int_eq(in_sandbox(CMX_SANDBOX_ON, CMX_SANDBOX_BUILD, build_uring_fn).code,
			 128 + SIGSYS);
	ck_assert_int_eq(in_sandbox(CMX_SANDBOX_ON, CMX_SANDBOX_WORKER, build_socket_fn).code, 0);
}
END_TEST

/* ---- a live clmuxd ---- */

static char dir[] = "/tmp/clmux-sandbox-XXXXXX";
static char logpath[PATH_MAX], sock[96];

static pid_t spawn(const char *const *more)
{
	const char *bin = getenv("CLMUXD");
	const char *argv[16] = {bin, "--admin", "none", "--listen", NULL};
	char listen[PATH_MAX + 8];
	int n = 5;
	pid_t pid;

	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	snprintf(listen, sizeof(listen), "unix:%s", sock);
	argv[4] = listen;
	for (; *more && n < 15; more++)
		argv[n++] = *more;
	argv[n] = NULL;
	unlink(sock);
	snprintf(logpath, sizeof(logpath), "%s/clmuxd.log", dir);
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(fd, 1);
		dup2(fd, 2);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < WAIT_STEPS; i++) {
		struct sockaddr_un sun = {.sun_family = AF_UNIX};
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), ok, st;
		memcpy(sun.sun_path, sock, sizeof(sock));
		ok = connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0;
		close(fd);
		if (ok)
			return pid;
		ck_assert_msg(waitpid(pid, &st, WNOHANG) != pid, "clmuxd exited; see %s", logpath);
		usleep(10000);
	}
	ck_abort_msg("clmuxd never listened");
	return -1;
}

static void stop(pid_t pid)
{
	int st;

	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "clmuxd ended %#x; see %s", st,
		      logpath);
}

/* The value of a "Key:" line of /proc/PID/status, or -1. */
static long status_of(pid_t pid, const char *key)
{
	char path[64], line[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)))
			v = strtol(line + strlen(key), NULL, 10);
	fclose(f);
	return v;
}

/* The daemon's children (its workers), up to max. */
static int children(pid_t parent, pid_t *out, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)) && n < max) {
		char path[300], buf[512], *rp;
		int ppid = 0;
		FILE *f;
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f) && (rp = strrchr(buf, ')')) &&
		    sscanf(rp + 2, "%*c %d", &ppid) == 1 && ppid == parent)
			out[n++] = (pid_t)atoi(de->d_name);
		fclose(f);
	}
	closedir(d);
	return n;
}

/* "Max core file size" of /proc/PID/limits: soft and hard both 0. */
static int no_core(pid_t pid)
{
	char path[64], line[256];
	int ok = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/limits", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long soft, hard;
		if (!strncmp(line, "Max core file size", 18) &&
		    sscanf(line + 18, "%llu %llu", &soft, &hard) == 2)
			ok = !soft && !hard;
	}
	fclose(f);
	return ok;
}

static const char *vadd_src = "__kernel void vadd(__global const int *a, __global int *b)\n"
			      "{ size_t i = get_global_id(0); b[i] = a[i] * 3 + 1; }\n";

/* A client's kernel built (the compiler, PoCL's linker) and run in the
 * worker, its result checked. */
static void client_runs_kernel(void)
{
	struct e2e_plat p;
	int a[1024], b[1024];
	cl_program prog;
	cl_kernel k;
	cl_mem ma, mb;
	size_t n = 1024;
	char addr[PATH_MAX + 8];

	snprintf(addr, sizeof(addr), "unix:%s", sock);
	ck_assert_int_eq(setenv("CLMUX_SERVER", addr, 1), 0);
	ck_assert_int_eq(e2e_plat_init(&p, "virtual", e2e_virtual_match()), 0);
	for (int i = 0; i < 1024; i++)
		a[i] = i;
	prog = e2e_program_build(&p, vadd_src, NULL);
	k = e2e_kernel_create(&p, prog, "vadd");
	ma = e2e_buffer_create(&p, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof(a), a);
	mb = e2e_buffer_create(&p, CL_MEM_WRITE_ONLY, sizeof(b), NULL);
	ck_assert_int_eq(clSetKernelArg(k, 0, sizeof(ma), &ma), CL_SUCCESS);
	ck_assert_int_eq(clSetKernelArg(k, 1, sizeof(mb), &mb), CL_SUCCESS);
	ck_assert_int_eq(clEnqueueNDRangeKernel(p.queue, k, 1, NULL, &n, NULL, 0, NULL, NULL),
			 CL_SUCCESS);
	ck_assert_int_eq(clEnqueueReadBuffer(p.queue, mb, CL_TRUE, 0, sizeof(b), b, 0, NULL, NULL),
			 CL_SUCCESS);
	for (int i = 0; i < 1024; i++)
		ck_assert_int_eq(b[i], i * 3 + 1);
	clReleaseMemObject(ma);
	clReleaseMemObject(mb);
	clReleaseKernel(k);
	clReleaseProgram(prog);
	e2e_plat_fini(&p);
}

/* Each worker: want is the Seccomp mode its status shows (2: filtered,
 * 0: --sandbox off); always no_new_privs and no core files. The front end
 * stays unfiltered. */
static void workers_are(pid_t pid, long want)
{
	pid_t kids[16];
	int n = children(pid, kids, 16);

	ck_assert_int_ge(n, 1);
	for (int i = 0; i < n; i++) {
		ck_assert_int_eq(status_of(kids[i], "Seccomp:"), want);
		ck_assert_int_eq(status_of(kids[i], "NoNewPrivs:"), 1);
		ck_assert_msg(no_core(kids[i]), "worker %d may dump core", (int)kids[i]);
	}
	ck_assert_int_eq(status_of(pid, "Seccomp:"), 0);
}

START_TEST(live_workers_filtered)
{
	const char *none[] = {NULL};
	pid_t pid = spawn(none);

	client_runs_kernel();
	workers_are(pid, 2);
	stop(pid);
}
END_TEST

START_TEST(live_sandbox_off)
{
	const char *off[] = {"--sandbox", "off", NULL};
	pid_t pid = spawn(off);

	client_runs_kernel();
	workers_are(pid, 0);
	stop(pid);
}
END_TEST

/* A config that says sandbox = off; more options after it. */
static pid_t spawn_config(const char *opt, const char *val)
{
	static char conf[PATH_MAX];
	const char *more[] = {"--config", conf, opt, val, NULL};
	FILE *f;

	snprintf(conf, sizeof(conf), "%s/clmuxd.conf", dir);
	f = fopen(conf, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "[clmuxd]\ndefault-tenant = t\nsandbox = off\n[tenant t]\n");
	fclose(f);
	return spawn(more);
}

/* The config's key. (One daemon per test: a client process's ICD keeps
 * its session, and the end of its daemon, for good.) */
START_TEST(live_config_key)
{
	pid_t pid = spawn_config(NULL, NULL);

	client_runs_kernel();
	workers_are(pid, 0);
	stop(pid);
}
END_TEST

/* The command line over the config. */
START_TEST(live_option_over_config)
{
	pid_t pid = spawn_config("--sandbox", "log");

	client_runs_kernel();
	workers_are(pid, 2);
	stop(pid);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sandbox");
	TCase *tc = tcase_create("filter"), *live = tcase_create("live");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, refused_calls_end_the_process);
	tcase_add_test(tc, refused_arguments_get_errors);
	tcase_add_test(tc, allowed_calls_run);
	tcase_add_test(tc, threads_made_before_are_filtered);
	tcase_add_test(tc, stop_and_continue);
	tcase_add_test(tc, log_mode_lets_through);
	tcase_add_test(tc, build_filter_is_smaller);
	suite_add_tcase(s, tc);
	if (getenv("CLMUXD") && *getenv("CLMUXD") && mkdtemp(dir)) {
		tcase_add_test(live, live_workers_filtered);
		tcase_add_test(live, live_sandbox_off);
		tcase_add_test(live, live_config_key);
		tcase_add_test(live, live_option_over_config);
		tcase_set_timeout(live, 300);
		suite_add_tcase(s, live);
	}
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	if (dir[sizeof(dir) - 2] != 'X') {
		char cmd[64 + sizeof(dir)];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd))
			fprintf(stderr, "test_sandbox: could not remove %s\n", dir);
	}
	return failed ? 1 : 0;
}
