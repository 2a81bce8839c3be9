// SPDX-License-Identifier: MIT
// The worker's sandbox: a seccomp allowlist of the system calls the daemon
// and the vendor driver need (measured: docs/security.md), and rlimits.
//
// The filter is classic BPF written here, with no libseccomp: the GPU
// machines that run clmuxd from a bundle have no libseccomp, and one
// filter everywhere means the list tested on PoCL is the list that runs on
// NVIDIA. x86_64 only; elsewhere the sandbox reports that it has no filter.
#define _GNU_SOURCE
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__linux__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#define HAVE_FILTER 1
#else
#define HAVE_FILTER 0
#endif

int cmx_sandbox_parse(const char *s)
{
	if (!strcmp(s, "on"))
		return CMX_SANDBOX_ON;
	if (!strcmp(s, "off"))
		return CMX_SANDBOX_OFF;
	if (!strcmp(s, "log"))
		return CMX_SANDBOX_LOG;
	return -EINVAL;
}

const char *cmx_sandbox_name(int mode)
{
	return mode == CMX_SANDBOX_ON ? "on" : mode == CMX_SANDBOX_LOG ? "log" : "off";
}

unsigned cmx_sandbox_nofile(unsigned long long sessions)
{
	/* A session holds two connections, its area memfd, ring eventfds
	 * and TCP lanes: 16 covers it. 512 for the loop, the executors, the
	 * driver's device files and the compiler's. No quota: 4096 sessions. */
	if (sessions > 4096)
		sessions = 4096;
	return (unsigned)(512 + 16 * sessions);
}

/* rlimits: what a worker may hold, and no core files (a dump of a worker
 * is its tenants' data). Not limited: address space (GPU drivers reserve
 * terabytes of it), data, stack, file size (an area memfd is truncated to
 * its size), processes (RLIMIT_NPROC counts every process of the user, the
 * front end's and other workers' too). */
static int limits(unsigned nofile, char *err, size_t errlen)
{
	struct rlimit core = {0, 0}, nf;

	if (setrlimit(RLIMIT_CORE, &core)) {
		snprintf(err, errlen, "RLIMIT_CORE: %s", strerror(errno));
		return -errno;
	}
	if (nofile && !getrlimit(RLIMIT_NOFILE, &nf)) {
		rlim_t n = nofile;
		if (nf.rlim_max != RLIM_INFINITY && n > nf.rlim_max)
			n = nf.rlim_max;
		/* Descriptors already open stay; new ones past n fail. */
		nf.rlim_cur = nf.rlim_max = n;
		if (setrlimit(RLIMIT_NOFILE, &nf)) {
			snprintf(err, errlen, "RLIMIT_NOFILE %u: %s", nofile, strerror(errno));
			return -errno;
		}
	}
	return 0;
}

#if HAVE_FILTER

/* How a call is checked beyond its number. */
enum rule {
	ANY,   /* allowed whatever its arguments */
	SELF,  /* arg0 must be this process's pid: kill, tgkill */
	ZERO,  /* arg0 must be 0 (this process): prlimit64 */
	NO_NS, /* clone: no CLONE_NEW* flag */
	UNIX,  /* socket, socketpair: AF_UNIX only */
	NOSYS, /* answered ENOSYS: clone3, whose flags sit in memory the
		* filter cannot read; glibc then uses clone */
};

#define W 1 /* a worker */
#define B 2 /* a build pre-flight child */

struct sc {
	int nr;
	const char *name;
	unsigned char rule, who;
};

#define S(n, r, w)                                                                                 \
	{                                                                                          \
		__NR_##n, #n, r, w                                                                 \
	}

/*
 * The allowlist. Measured with `strace -f` of clmuxd across `make check`
 * and check-apps on PoCL (tools/seccomp-trace.py), counting a worker's
 * calls from the moment its filter is loaded; what a driver may add where
 * it is harmless is marked. A build child runs under the worker's filter
 * too (exec keeps it) and adds its own: its calls must be in both.
 */
static const struct sc allow[] = {
    /* The io_uring loop. Its ring exists before the filter and takes only
     * the operations the loop submits (host/loop.c); no new ring, no
     * io_uring_register. */
    S(io_uring_enter, ANY, W),
    /* Locks, threads and their ends (glibc, PoCL's and the driver's
     * threads). Threads are cloned; a clone asking for a new namespace
     * is refused. */
    S(futex, ANY, W | B),
    S(clone, NO_NS, W | B),
    S(clone3, NOSYS, W | B),
    S(vfork, ANY, W | B),
    S(set_robust_list, ANY, W | B),
    S(rseq, ANY, W | B),
    S(set_tid_address, ANY, W | B),
    S(exit, ANY, W | B),
    S(exit_group, ANY, W | B),
    S(gettid, ANY, W | B),
    S(getpid, ANY, W | B),
    S(getppid, ANY, W | B),
    S(sched_yield, ANY, W | B),
    S(sched_getaffinity, ANY, W | B),
    S(sched_setaffinity, ANY, W | B),
    S(madvise, ANY, W | B),
    /* Signals: handlers, masks, returns; signals to this process only. */
    S(rt_sigaction, ANY, W | B),
    S(rt_sigprocmask, ANY, W | B),
    S(rt_sigreturn, ANY, W | B),
    S(sigaltstack, ANY, W | B),
    S(kill, SELF, W | B),
    S(tgkill, SELF, W | B),
    S(signalfd4, ANY, W),
    /* Memory: the heap, mappings (the driver's and the compiler's; PoCL
     * maps the kernels it built), the shared areas given to sessions. */
    S(brk, ANY, W | B),
    S(mmap, ANY, W | B),
    S(munmap, ANY, W | B),
    S(mprotect, ANY, W | B),
    S(mremap, ANY, W | B),
    /* A build child too: NVIDIA's driver makes its own as it loads (the
     * pre-flight was ended there at once without them). */
    S(memfd_create, ANY, W | B),
    S(ftruncate, ANY, W | B),
    /* Descriptors: reads and writes of sockets, pipes and files. */
    S(read, ANY, W | B),
    S(write, ANY, W | B),
    S(readv, ANY, W | B),
    S(writev, ANY, W | B),
    S(pread64, ANY, W | B),
    S(pwrite64, ANY, W | B),
    S(lseek, ANY, W | B),
    S(close, ANY, W | B),
    S(dup, ANY, W | B),
    S(dup2, ANY, W | B),
    S(dup3, ANY, W | B),
    S(fcntl, ANY, W | B),
    S(ioctl, ANY, W | B),
    S(pipe2, ANY, W | B),
    S(eventfd2, ANY, W | B),
    S(fdatasync, ANY, W | B),
    S(fsync, ANY, W | B),
    /* Sessions' sockets: the worker's own listeners (already bound by
     * the front end, or vhost-user sockets it binds), accepted peers,
     * and the Unix socket pair of a build child. No network socket of
     * its own: socket() takes AF_UNIX only. */
    S(socket, UNIX, W | B),
    S(socketpair, UNIX, W),
    S(bind, ANY, W),
    S(listen, ANY, W),
    S(accept4, ANY, W),
    S(getsockname, ANY, W),
    S(getpeername, ANY, W),
    S(getsockopt, ANY, W),
    S(setsockopt, ANY, W | B),
    /* NVIDIA's compiler, in a build's pre-flight, connects to a Unix
     * socket (socket() can make no other kind) and keeps its compute
     * cache with symbolic links (measured on an H200). */
    S(connect, ANY, W | B),
    S(shutdown, ANY, W),
    S(sendmsg, ANY, W),
    S(recvmsg, ANY, W),
    S(sendto, ANY, W | B),
    S(recvfrom, ANY, W | B),
    /* Files: the driver's libraries and device nodes, the compiler's
     * headers and cache, the session's include tree (host/incdir.c).
     * Which paths is the job of the daemon's user (--user), not of this
     * filter. */
    S(openat, ANY, W | B),
    S(newfstatat, ANY, W | B),
    S(fstat, ANY, W | B),
    S(statx, ANY, W | B),
    S(access, ANY, W | B),
    S(faccessat2, ANY, W | B),
    S(readlink, ANY, W | B),
    S(getdents64, ANY, W | B),
    S(getcwd, ANY, W | B),
    S(mkdir, ANY, W | B),
    S(rename, ANY, W | B),
    S(unlink, ANY, W | B),
    /* State files (host/state.c): written in the state directory by
     * its descriptor, renamed into place. */
    S(renameat, ANY, W | B),
    S(unlinkat, ANY, W | B),
    S(symlink, ANY, W | B),
    S(symlinkat, ANY, W | B),
    S(rmdir, ANY, W | B),
    S(chmod, ANY, W | B),
    S(umask, ANY, W | B),
    /* PoCL links each kernel with the system linker (/usr/bin/ld), and a
     * build's pre-flight is `clmuxd --build-check`: both are executed,
     * and keep this filter, no_new_privs and the rlimits. */
    S(execve, ANY, W | B),
    /* The build child stacks its own, smaller filter on the worker's:
     * another filter only ever takes calls away. */
    S(seccomp, ANY, W),
    S(wait4, ANY, W | B),
    S(alarm, ANY, W | B),
    /* Queries of the process and the system. */
    S(arch_prctl, ANY, W | B),
    S(prctl, ANY, W | B),
    S(prlimit64, ZERO, W | B),
    S(getrusage, ANY, W | B),
    S(sysinfo, ANY, W | B),
    S(uname, ANY, W | B),
    S(getrandom, ANY, W | B),
    S(getuid, ANY, W | B),
    S(geteuid, ANY, W | B),
    S(getgid, ANY, W | B),
    S(getegid, ANY, W | B),
    /* Not seen with PoCL; waits, clocks and memory-policy queries a GPU
     * driver's threads use, which give no access to anything. */
    S(poll, ANY, W | B),
    S(ppoll, ANY, W | B),
    S(nanosleep, ANY, W | B),
    S(clock_nanosleep, ANY, W | B),
    S(clock_gettime, ANY, W | B),
    S(clock_getres, ANY, W | B),
    S(gettimeofday, ANY, W | B),
    S(get_mempolicy, ANY, W | B),
    /* The kernel's restart of a wait a signal or a stop interrupted:
     * without it, a debugger's attach would end the worker. */
    S(restart_syscall, ANY, W | B),
    /* Not seen with PoCL; what drivers' service threads commonly use to
     * wait, pin and ask, each reaching only this process's own things. */
    S(epoll_create1, ANY, W | B),
    S(epoll_ctl, ANY, W | B),
    S(epoll_wait, ANY, W | B),
    S(epoll_pwait, ANY, W | B),
    S(timerfd_create, ANY, W | B),
    S(timerfd_settime, ANY, W | B),
    S(timerfd_gettime, ANY, W | B),
    S(rt_sigtimedwait, ANY, W | B),
    S(rt_sigsuspend, ANY, W | B),
    S(membarrier, ANY, W | B),
    S(mlock, ANY, W | B),
    S(munlock, ANY, W | B),
    S(mincore, ANY, W | B),
    S(msync, ANY, W | B),
    S(set_mempolicy, ANY, W | B),
    S(mbind, ANY, W | B),
    S(getcpu, ANY, W | B),
    S(sched_getparam, ANY, W | B),
    S(sched_getscheduler, ANY, W | B),
    /* NVIDIA's driver asks them when it starts its threads (measured:
     * the sandbox step of tools/gpu-check on an H200). */
    S(sched_get_priority_max, ANY, W | B),
    S(sched_get_priority_min, ANY, W | B),
    S(getpriority, ANY, W | B),
    S(statfs, ANY, W | B),
    S(fstatfs, ANY, W | B),
    S(fadvise64, ANY, W | B),
    S(readlinkat, ANY, W | B),
    S(getresuid, ANY, W | B),
    S(getresgid, ANY, W | B),
    S(getgroups, ANY, W | B),
    S(capget, ANY, W | B),
    /* Older forms of calls above, with no more reach than theirs (open is
     * openat at the working directory): what code built against an old
     * libc, or a sanitizer's runtime, calls directly. */
    S(open, ANY, W | B),
    S(stat, ANY, W | B),
    S(lstat, ANY, W | B),
    S(pipe, ANY, W | B),
    S(getdents, ANY, W | B),
    S(select, ANY, W | B),
};

static struct {
	char line[160];
	size_t len;
} trap;

/* Puts v in decimal at p; the end. */
static char *put_u(char *p, unsigned long v)
{
	char d[24];
	int n = 0;

	do
		d[n++] = (char)('0' + v % 10);
	while ((v /= 10) && n < (int)sizeof(d));
	while (n)
		*p++ = d[--n];
	return p;
}

/* A call outside the list (mode on): one line naming its number, then the
 * process ends by SIGSYS as SECCOMP_RET_KILL_PROCESS would end it. Only
 * async-signal-safe calls, all of them in the list. A driver thread that
 * blocks SIGSYS dies the same way without the line (the kernel's audit log
 * still names the call). */
static void on_sigsys(int sig, siginfo_t *si, void *uc)
{
	char buf[sizeof(trap.line) + 40], *p = buf;
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigset_t set;

	(void)uc;
	memcpy(p, trap.line, trap.len);
	p += trap.len;
	p = put_u(p, (unsigned long)si->si_syscall);
	memcpy(p, ")\n", 2);
	p += 2;
	if (write(2, buf, (size_t)(p - buf)) < 0) {
		/* nothing more to say */
	}
	sigaction(sig, &dfl, NULL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), sig);
	_exit(128 + sig);
}

struct prog {
	struct sock_filter f[1024];
	unsigned n;
};

static void put(struct prog *p, uint16_t code, uint8_t jt, uint8_t jf, uint32_t k)
{
	if (p->n < sizeof(p->f) / sizeof(p->f[0]))
		p->f[p->n] = (struct sock_filter)BPF_JUMP(code, k, jt, jf);
	p->n++;
}

#define ARG0_LO	  offsetof(struct seccomp_data, args[0]) /* little-endian */
#define NR_OFF	  offsetof(struct seccomp_data, nr)
#define RET(p, v) put(p, BPF_RET | BPF_K, 0, 0, v)

/* Every namespace a clone could ask for. */
#define CLONE_NS                                                                                   \
	(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |             \
	 CLONE_NEWPID | CLONE_NEWNET)

/*
 * The program: the architecture (x86_64 only; x32 numbers refused), then
 * per allowed call "is it this one? then check, return", and at the end
 * the default. Each call costs two instructions when it is not the one,
 * so no jump is longer than a few; the kernel caches the verdict of every
 * call allowed without an argument check, so those run no BPF at all.
 */
static void build(struct prog *p, int who, uint32_t deny, uint32_t refuse, pid_t self)
{
	put(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, arch));
	put(p, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, AUDIT_ARCH_X86_64);
	/* Another ABI's numbers mean other calls: the process ends (in log
	 * mode, logged like the rest). */
	RET(p, deny == SECCOMP_RET_LOG ? SECCOMP_RET_LOG : SECCOMP_RET_KILL_PROCESS);
	put(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, NR_OFF);
	put(p, BPF_JMP | BPF_JGE | BPF_K, 0, 1, 0x40000000u); /* __X32_SYSCALL_BIT */
	RET(p, deny);
	for (size_t i = 0; i < sizeof(allow) / sizeof(allow[0]); i++) {
		const struct sc *s = &allow[i];
		uint32_t nr = (uint32_t)s->nr;
		if (!(s->who & who))
			continue;
		switch (s->rule) {
		case ANY:
			put(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, nr);
			RET(p, SECCOMP_RET_ALLOW);
			break;
		case NOSYS:
			put(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, nr);
			RET(p, SECCOMP_RET_ERRNO | ENOSYS);
			break;
		case SELF:
		case ZERO:
			/* int arguments: the kernel reads the low 32 bits. */
			put(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 4, nr);
			put(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, ARG0_LO);
			put(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1,
			    s->rule == SELF ? (uint32_t)self : 0);
			RET(p, SECCOMP_RET_ALLOW);
			RET(p, refuse | EPERM);
			break;
		case NO_NS:
			/* clone's flags: the kernel reads the low 32 bits. */
			put(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 4, nr);
			put(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, ARG0_LO);
			put(p, BPF_JMP | BPF_JSET | BPF_K, 1, 0, CLONE_NS);
			RET(p, SECCOMP_RET_ALLOW);
			RET(p, refuse | EPERM);
			break;
		case UNIX:
			put(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 4, nr);
			put(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, ARG0_LO);
			put(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, AF_UNIX);
			RET(p, SECCOMP_RET_ALLOW);
			RET(p, refuse | EAFNOSUPPORT);
			break;
		}
	}
	RET(p, deny);
}

static int load(int mode, int who, const char *name, char *err, size_t errlen)
{
	static struct prog p;
	struct sock_fprog fp;
	/* on: a call outside the list traps (the line, then the end);
	 * arguments outside a rule get an error. log: both run, and the
	 * kernel logs them (SECCOMP_RET_LOG: the audit log or dmesg). */
	uint32_t deny = mode == CMX_SANDBOX_LOG ? SECCOMP_RET_LOG : SECCOMP_RET_TRAP;
	uint32_t refuse = mode == CMX_SANDBOX_LOG ? SECCOMP_RET_LOG : SECCOMP_RET_ERRNO;
	long r;

	p.n = 0;
	build(&p, who, deny, refuse, getpid());
	if (p.n > sizeof(p.f) / sizeof(p.f[0])) {
		snprintf(err, errlen, "seccomp: the filter is too long (%u)", p.n);
		return -E2BIG;
	}
	if (mode == CMX_SANDBOX_ON) {
		struct sigaction sa = {.sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO};
		int k = snprintf(trap.line, sizeof(trap.line),
				 "%s: sandbox: refused system call (number ", name);
		trap.len = k < 0			    ? 0
			   : (size_t)k >= sizeof(trap.line) ? sizeof(trap.line) - 1
							    : (size_t)k;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGSYS, &sa, NULL);
	}
	fp.len = (unsigned short)p.n;
	fp.filter = p.f;
	/* Every thread at once (the executors', the driver's, PoCL's): TSYNC
	 * fails rather than leave one out, and gives each no_new_privs.
	 * SPEC_ALLOW: by default the kernel forces its speculative-store
	 * mitigation on a filtered process, which made a worker's copies
	 * ten to a hundred times slower on this AMD machine (clpeak's
	 * transfers through clmux: 0.13-0.99 GB/s against 14-17 without the
	 * filter); a worker's secrets are its own tenants'. */
	r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
		    SECCOMP_FILTER_FLAG_TSYNC | SECCOMP_FILTER_FLAG_SPEC_ALLOW, &fp);
	if (r) {
		int e = r > 0 ? ESRCH : errno;
		snprintf(err, errlen, "seccomp: %s",
			 r > 0 ? "a thread could not be filtered" : strerror(e));
		return -e;
	}
	return 0;
}

void cmx_sandbox_list(FILE *f, int who)
{
	int mask = who == CMX_SANDBOX_BUILD ? B : W;

	for (size_t i = 0; i < sizeof(allow) / sizeof(allow[0]); i++)
		if (allow[i].who & mask)
			fprintf(f, "%s\n", allow[i].name);
}

#else

static int load(int mode, int who, const char *name, char *err, size_t errlen)
{
	(void)mode;
	(void)who;
	(void)name;
	snprintf(err, errlen, "seccomp: no filter for this architecture");
	return -ENOSYS;
}

void cmx_sandbox_list(FILE *f, int who)
{
	(void)f;
	(void)who;
}

#endif

int cmx_sandbox_enter(int mode, int who, const char *name, unsigned nofile, char *err,
		      size_t errlen)
{
	int e;

	/* A worker's memory is its tenants': no core file, and no other
	 * process of the same user (another tenant's worker) may read or
	 * write it through /proc/PID/mem or ptrace. */
	e = limits(nofile, err, errlen);
	if (e)
		return e;
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)) {
		snprintf(err, errlen, "PR_SET_DUMPABLE: %s", strerror(errno));
		return -errno;
	}
	if (mode == CMX_SANDBOX_OFF)
		return 0;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		snprintf(err, errlen, "no_new_privs: %s", strerror(errno));
		return -errno;
	}
	return load(mode, who == CMX_SANDBOX_BUILD ? B : W, name, err, errlen);
}
