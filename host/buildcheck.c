// SPDX-License-Identifier: MIT
// Pre-flight builds: the tenant's source compiled first by `clmuxd
// --build-check` under RLIMIT_DATA and RLIMIT_CPU (docs/architecture.md).
#include "buildcheck.h"

#if defined(__SANITIZE_ADDRESS__)
#define BUILT_WITH_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BUILT_WITH_ASAN 1
#endif
#endif
#ifndef BUILT_WITH_ASAN
#define BUILT_WITH_ASAN 0
#endif

#include <CL/cl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "sandbox.h"
#include "server.h"
#include "tenant.h"

extern char **environ;

/* Most bytes of one request the child reads: the protocol bounds a
 * program's source far below this. */
#define REQ_MAX (512u << 20)

static char exe[4096];
static char device[256];
static int sandbox; /* the worker's mode, the child's too */

/* Pre-flight children running, per tenant: a short list, one entry per
 * tenant that ever built, under one lock (builds are rare and slow). */
struct slot {
	const void *tenant;
	uint64_t running;
	struct slot *next;
};
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t slots_free = PTHREAD_COND_INITIALIZER;
static struct slot *slots;

void cmx_buildcheck_init(const char *device_spec, int sandbox_mode)
{
	sandbox = sandbox_mode;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	exe[n > 0 ? n : 0] = '\0';
	snprintf(device, sizeof(device), "%s", device_spec ? device_spec : "");
}

int cmx_buildcheck_wanted(const struct cmx_build_limits *l)
{
	return exe[0] && (l->mem != CMX_UNLIMITED || l->secs != CMX_UNLIMITED);
}

static struct slot *slot_take(const struct cmx_build_limits *l)
{
	struct slot *s;

	pthread_mutex_lock(&slots_lock);
	for (s = slots; s && s->tenant != l->tenant; s = s->next)
		;
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s) {
			pthread_mutex_unlock(&slots_lock);
			return NULL;
		}
		s->tenant = l->tenant;
		s->next = slots;
		slots = s;
	}
	/* Waits on the executor thread: the build is queued, not refused. */
	while (l->builds && s->running >= l->builds)
		pthread_cond_wait(&slots_free, &slots_lock);
	s->running++;
	pthread_mutex_unlock(&slots_lock);
	return s;
}

static void slot_give(struct slot *s)
{
	pthread_mutex_lock(&slots_lock);
	s->running--;
	pthread_cond_broadcast(&slots_free);
	pthread_mutex_unlock(&slots_lock);
}

/* The request: u64 mem, u64 secs, u32 compile, u32 sandbox, string device, options,
 * source, u32 nheaders, then per header string name, source; a string is
 * u32 length and its bytes. */
struct req {
	char *data;
	size_t len, cap;
	int oom;
};

static void req_put(struct req *r, const void *p, size_t n)
{
	if (r->oom)
		return;
	if (r->len + n > r->cap) {
		size_t cap = (r->len + n) * 2;
		char *d = realloc(r->data, cap);
		if (!d) {
			r->oom = 1;
			return;
		}
		r->data = d;
		r->cap = cap;
	}
	memcpy(r->data + r->len, p, n);
	r->len += n;
}

static void req_str(struct req *r, const char *s)
{
	uint32_t n = s ? (uint32_t)strlen(s) : 0;

	req_put(r, &n, sizeof(n));
	req_put(r, s, n);
}

static void send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return; /* the child is gone: its end says why */
		p += k;
		n -= (size_t)k;
	}
}

static uint64_t now_ms(void)
{
	return cmx_now_ns() / 1000000;
}

/* Reads the child's 8-byte answer until it ends or the deadline (ms, 0
 * none) passes; the bytes read. */
static size_t read_answer(int fd, char *ans, size_t n, uint64_t deadline, int *late)
{
	size_t got = 0;

	while (got < n) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		uint64_t now = now_ms();
		int wait = -1, r;
		ssize_t k;

		if (deadline) {
			if (now >= deadline) {
				*late = 1;
				break;
			}
			wait = deadline - now > 60000 ? 60000 : (int)(deadline - now);
		}
		r = poll(&p, 1, wait);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		if (!r)
			continue;
		k = read(fd, ans + got, n - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	return got;
}

static void format_bytes(uint64_t v, char *out, size_t len)
{
	if (v >= (1ull << 30) && v % (1ull << 30) == 0)
		snprintf(out, len, "%" PRIu64 " GiB", v >> 30);
	else if (v >= (1ull << 20))
		snprintf(out, len, "%" PRIu64 " MiB", v >> 20);
	else
		snprintf(out, len, "%" PRIu64 " bytes", v);
}

int cmx_buildcheck_run(const struct cmx_build_limits *l, const struct cmx_build_src *b, char *why,
		       size_t whylen)
{
	struct req r = {0};
	uint32_t u32;
	int sv[2], e = 0, late = 0, st = 0, by_time;
	posix_spawn_file_actions_t fa;
	char *argv[] = {exe, "--build-check", NULL};
	char ans[8], size[32];
	struct rusage ru;
	struct slot *s;
	pid_t pid;
	size_t got;

	req_put(&r, &l->mem, sizeof(l->mem));
	req_put(&r, &l->secs, sizeof(l->secs));
	u32 = (uint32_t)b->compile;
	req_put(&r, &u32, sizeof(u32));
	u32 = (uint32_t)sandbox;
	req_put(&r, &u32, sizeof(u32));
	req_str(&r, device);
	req_str(&r, b->options);
	req_str(&r, b->source);
	u32 = (uint32_t)b->nheaders;
	req_put(&r, &u32, sizeof(u32));
	for (size_t i = 0; i < b->nheaders; i++) {
		req_str(&r, b->hnames[i]);
		req_str(&r, b->hsources[i]);
	}
	if (r.oom || r.len > REQ_MAX) {
		free(r.data);
		return -ENOMEM;
	}
	s = slot_take(l);
	if (!s) {
		free(r.data);
		return -ENOMEM;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		e = -errno;
		goto out;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
	posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
	/* What a dying compiler prints is no news for the daemon's log. */
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	e = -posix_spawn(&pid, exe, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(sv[1]);
	if (e) {
		close(sv[0]);
		goto out;
	}
	send_all(sv[0], r.data, r.len);
	/* The wall-clock bound: twice the CPU time (a child that sleeps or
	 * waits burns none), else none. */
	got = read_answer(sv[0], ans, sizeof(ans),
			  l->secs == CMX_UNLIMITED ? 0 : now_ms() + 2000 * l->secs, &late);
	/* A filtered worker signals no other process (host/sandbox.c): the
	 * child's own alarm ends it at this deadline then. */
	if (late)
		kill(pid, SIGKILL);
	close(sv[0]);
	while (wait4(pid, &st, 0, &ru) < 0 && errno == EINTR)
		;
	if (got == sizeof(ans) && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		int32_t res, oom;
		memcpy(&res, ans, 4);
		memcpy(&oom, ans + 4, 4);
		/* A build that failed as a compiler fails: the native build
		 * gives the guest its log. */
		if (res != CL_OUT_OF_HOST_MEMORY && res != CL_OUT_OF_RESOURCES && !oom)
			goto out;
	}
	/* The sandbox ended it (a call outside the filter: host/sandbox.c).
	 * The compiler's doing, not the tenant's limits: said so in the log,
	 * and the build still fails rather than run unchecked. */
	if ((WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS) ||
	    (WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGSYS)) {
		cmx_warn("a build pre-flight was refused a system call by the sandbox (clmuxd "
			 "--sandbox log names it)");
		snprintf(why, whylen, "clmux: the build was stopped: its pre-flight was refused "
				      "a system call by the daemon's sandbox");
		e = 1;
		goto out;
	}
	/* Stopped: killed by a signal (SIGXCPU, SIGKILL, LLVM's abort on a
	 * failed allocation), gone before answering, or out of memory. */
	by_time = late ||
		  (WIFSIGNALED(st) && (WTERMSIG(st) == SIGXCPU || WTERMSIG(st) == SIGALRM)) ||
		  (l->secs != CMX_UNLIMITED &&
		   (uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec >= l->secs);
	if (by_time || l->mem == CMX_UNLIMITED) {
		snprintf(
		    why, whylen,
		    "clmux: the build was stopped: over the tenant's build-time limit (%" PRIu64
		    " s)",
		    l->secs);
	} else {
		format_bytes(l->mem, size, sizeof(size));
		snprintf(
		    why, whylen,
		    "clmux: the build was stopped: over the tenant's build-mem limit (%s of "
		    "data)",
		    size);
	}
	e = 1;
out:
	slot_give(s);
	free(r.data);
	return e;
}

/* The child's side. */

static int read_full(int fd, void *p, size_t n)
{
	char *c = p;

	while (n) {
		ssize_t k = read(fd, c, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		c += k;
		n -= (size_t)k;
	}
	return 0;
}

static char *read_str(size_t *total)
{
	uint32_t n;
	char *s;

	if (read_full(0, &n, sizeof(n)) || n > REQ_MAX - *total || !(s = malloc((size_t)n + 1)))
		return NULL;
	*total += n;
	if (read_full(0, s, n)) {
		free(s);
		return NULL;
	}
	s[n] = '\0';
	return s;
}

static void set_limit(int what, uint64_t v, uint64_t hard)
{
	struct rlimit rl = {.rlim_cur = v, .rlim_max = hard};

	if (v != CMX_UNLIMITED)
		setrlimit(what, &rl);
}

static void answer(int32_t res, int32_t oom)
{
	char ans[8];

	memcpy(ans, &res, 4);
	memcpy(ans + 4, &oom, 4);
	if (write(1, ans, sizeof(ans)) != (ssize_t)sizeof(ans))
		_exit(3);
	/* No teardown of the driver: the worker waits for this exit. */
	_exit(0);
}

int cmx_buildcheck_main(void)
{
	uint64_t mem, secs;
	uint32_t compile, mode, nh;
	size_t total = 0;
	char *spec, *opts, *src, **hn = NULL, **hs = NULL, log[4096] = "";
	struct cmx_server srv = {0};
	cl_program p, *hp = NULL;
	cl_context ctx;
	cl_int e;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (read_full(0, &mem, 8) || read_full(0, &secs, 8) || read_full(0, &compile, 4) ||
	    read_full(0, &mode, 4) ||
	    !(spec = read_str(&total)) || !(opts = read_str(&total)) || !(src = read_str(&total)) ||
	    read_full(0, &nh, 4) || nh > 4096)
		return 2;
	if (nh && (!(hn = calloc(nh, sizeof(*hn))) || !(hs = calloc(nh, sizeof(*hs))) ||
		   !(hp = calloc(nh, sizeof(*hp)))))
		return 2;
	for (uint32_t i = 0; i < nh; i++)
		if (!(hn[i] = read_str(&total)) || !(hs[i] = read_str(&total)))
			return 2;
	/* Before the driver loads: every byte and second of it counts. The
	 * data limit (the heap and private writable mappings) is what a
	 * compiler's allocations grow; address space is not: NVIDIA's driver
	 * reserves tens of GiB of it (inaccessible, not data) at load, and a
	 * 1 GiB RLIMIT_AS stopped every build there. An AddressSanitizer
	 * build maps terabytes of writable shadow and cannot run under a data
	 * limit either: there only the CPU and wall-clock limits stop a
	 * build. */
	if (!BUILT_WITH_ASAN)
		set_limit(RLIMIT_DATA, mem, mem);
	set_limit(RLIMIT_CPU, secs, secs + 1);
	/* The wall-clock bound, twice the CPU time, kept by the child itself:
	 * a filtered worker cannot signal it. SIGALRM ends it. */
	if (secs != CMX_UNLIMITED && secs < UINT32_MAX / 2)
		alarm((unsigned)(2 * secs + 1));
	/* The compiler reads the tenant's source: the child's own, smaller
	 * filter, under the worker's that exec kept. */
	if (cmx_sandbox_enter((int)mode, CMX_SANDBOX_BUILD, "clmuxd --build-check", 0, log,
			      sizeof(log)))
		return 5;
	log[0] = '\0';
	if (cmx_device_open(&srv, spec[0] ? spec : NULL))
		return 4;
	ctx = clCreateContext(NULL, 1, srv.devices, NULL, NULL, &e);
	if (!ctx)
		answer(e, 0);
	p = clCreateProgramWithSource(ctx, 1, (const char **)&src, NULL, &e);
	if (!p)
		answer(e, 0);
	if (compile) {
		for (uint32_t i = 0; i < nh; i++) {
			hp[i] = clCreateProgramWithSource(ctx, 1, (const char **)&hs[i], NULL, &e);
			if (!hp[i])
				answer(e, 0);
		}
		e = clCompileProgram(p, 1, srv.devices, opts, nh, hp, (const char **)hn, NULL,
				     NULL);
	} else {
		e = clBuildProgram(p, 1, srv.devices, opts, NULL, NULL);
	}
	/* A compiler that ran out of memory and said so, rather than dying. */
	if (e)
		clGetProgramBuildInfo(p, srv.devices[0], CL_PROGRAM_BUILD_LOG, sizeof(log) - 1, log,
				      NULL);
	answer(e, strstr(log, "out of memory") != NULL);
	return 0;
}
