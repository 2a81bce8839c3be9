// SPDX-License-Identifier: MIT
// io_uring event loop: one submit per turn, cross-thread posts via eventfd.
#include "loop.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define RING_ENTRIES 1024

struct post {
	void (*fn)(void *arg);
	void *arg;
	struct post *next;
};

struct cmx_loop {
	struct io_uring ring;
	int running;

	/* Posts from other threads: a mutex-protected list and an eventfd that
	 * the loop keeps a read armed on. `armed` says a wake-up is already
	 * pending, so a burst of posts costs one eventfd write. */
	pthread_mutex_t post_lock;
	struct post *posts, **posts_tail;
	atomic_int wake_pending;
	/* Posts the loop makes to itself run after the current completion,
	 * with no eventfd: the loop is awake already. */
	struct post *local, **local_tail;
	pthread_t thread;
	uint64_t linger_until; /* CLOCK_MONOTONIC ns; 0: none */
	/* What a linger does between its looks (cmx_loop_linger_with()), and
	 * until when: a function that has nothing left to look for ends its
	 * part of the linger. */
	int (*linger_fn[CMX_LINGER_FNS])(void *arg);
	void *linger_arg[CMX_LINGER_FNS];
	uint64_t linger_fn_until[CMX_LINGER_FNS];
	uint64_t turn_ns; /* when the current turn's completions came */
	/* Lingers asked for (sync replies on sockets), those that ran out
	 * with nothing to do, and the times the loop slept in the kernel. */
	uint64_t lingers, idle_lingers, sleeps;
	int efd;
	uint64_t efd_val;
	struct cmx_io efd_io;
};

struct io_uring_sqe *cmx_loop_sqe(struct cmx_loop *l, struct cmx_io *io)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);

	if (!sqe) {
		/* Full: hand the queued entries to the kernel and retry. */
		io_uring_submit(&l->ring);
		sqe = io_uring_get_sqe(&l->ring);
	}
	if (sqe)
		io_uring_sqe_set_data(sqe, io);
	return sqe;
}

static void arm_eventfd(struct cmx_loop *l)
{
	struct io_uring_sqe *sqe = cmx_loop_sqe(l, &l->efd_io);

	io_uring_prep_read(sqe, l->efd, &l->efd_val, sizeof(l->efd_val), 0);
}

static void run_posts(struct cmx_loop *l)
{
	struct post *p;

	pthread_mutex_lock(&l->post_lock);
	p = l->posts;
	l->posts = NULL;
	l->posts_tail = &l->posts;
	/* Pairs with the exchange in post(): a post queued after this
	 * point writes the eventfd again. */
	atomic_store(&l->wake_pending, 0);
	pthread_mutex_unlock(&l->post_lock);
	while (p) {
		struct post *next = p->next;
		p->fn(p->arg);
		free(p);
		p = next;
	}
}

static void efd_done(struct cmx_io *io, int res, unsigned flags)
{
	struct cmx_loop *l = (struct cmx_loop *)((char *)io - offsetof(struct cmx_loop, efd_io));

	run_posts(l);
	arm_eventfd(l);
}

static void run_local(struct cmx_loop *l)
{
	while (l->local) {
		struct post *p = l->local;
		l->local = p->next;
		if (!l->local)
			l->local_tail = &l->local;
		p->fn(p->arg);
		free(p);
	}
}

static void post(struct cmx_loop *l, void (*fn)(void *arg), void *arg, int shared)
{
	struct post *p = malloc(sizeof(*p));
	uint64_t one = 1;

	if (!p) {
		cmx_err("out of memory posting to the loop");
		abort();
	}
	p->fn = fn;
	p->arg = arg;
	p->next = NULL;
	if (pthread_equal(pthread_self(), l->thread)) {
		/* Shared: behind what other threads posted and the loop has
		 * not run yet, if anything. */
		if (shared) {
			pthread_mutex_lock(&l->post_lock);
			shared = l->posts != NULL;
			if (shared) {
				*l->posts_tail = p;
				l->posts_tail = &p->next;
			}
			pthread_mutex_unlock(&l->post_lock);
			if (shared)
				return; /* the eventfd was written for the first */
		}
		*l->local_tail = p;
		l->local_tail = &p->next;
		return;
	}
	pthread_mutex_lock(&l->post_lock);
	*l->posts_tail = p;
	l->posts_tail = &p->next;
	pthread_mutex_unlock(&l->post_lock);
	if (!atomic_exchange(&l->wake_pending, 1) && write(l->efd, &one, sizeof(one)) < 0)
		cmx_err("eventfd write: %m");
}

void cmx_loop_post(struct cmx_loop *l, void (*fn)(void *arg), void *arg)
{
	post(l, fn, arg, 0);
}

void cmx_loop_post_shared(struct cmx_loop *l, void (*fn)(void *arg), void *arg)
{
	post(l, fn, arg, 1);
}

/*
 * The operations the daemon submits (the loop's users in host/), and no
 * others. A worker runs its tenants' kernels (native code on PoCL): code
 * that took it over could submit an openat or a connect through the ring,
 * which its seccomp filter never sees (host/sandbox.c). A new operation
 * goes here too, or its completions say -EACCES.
 */
static const uint8_t ring_ops[] = {
    IORING_OP_NOP,	    IORING_OP_READ,    IORING_OP_RECV,
    IORING_OP_SEND,	    IORING_OP_SENDMSG, IORING_OP_ACCEPT,
    IORING_OP_POLL_ADD,	    IORING_OP_TIMEOUT, IORING_OP_TIMEOUT_REMOVE,
    IORING_OP_ASYNC_CANCEL,
};

/* A ring made disabled takes its restrictions, then starts. */
static int ring_restrict(struct io_uring *ring)
{
	struct io_uring_restriction res[sizeof(ring_ops) + 1];
	unsigned n = 0;

	memset(res, 0, sizeof(res));
	for (; n < sizeof(ring_ops); n++) {
		res[n].opcode = IORING_RESTRICTION_SQE_OP;
		res[n].sqe_op = ring_ops[n];
	}
	/* host/conn.c asks for IOSQE_ASYNC on large sends. */
	res[n].opcode = IORING_RESTRICTION_SQE_FLAGS_ALLOWED;
	res[n++].sqe_flags = IOSQE_ASYNC;
	/* The system call itself: Debian's liburing.so.2 (2.3) does not
	 * export io_uring_register_restrictions() and io_uring_enable_rings(). */
	if (syscall(__NR_io_uring_register, ring->ring_fd, IORING_REGISTER_RESTRICTIONS, res, n) ||
	    syscall(__NR_io_uring_register, ring->ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0))
		return -errno;
	return 0;
}

int cmx_loop_create(struct cmx_loop **out, int coop)
{
	struct cmx_loop *l = calloc(1, sizeof(*l));
	int e;

	if (!l)
		return -ENOMEM;
	/* A completion for the loop (a socket's bytes, the eventfd of a post)
	 * then waits for the loop's next system call instead of interrupting
	 * it: the loop makes one on every look while it watches or lingers
	 * (sched_yield()), and the interrupt costs a virtual machine an exit.
	 * uring-coop = off turns it off; a kernel without it (before 5.19)
	 * gets the default. */
	e = -EINVAL;
	if (coop)
		e = io_uring_queue_init(RING_ENTRIES, &l->ring,
					IORING_SETUP_COOP_TASKRUN | IORING_SETUP_R_DISABLED);
	if (e == -EINVAL)
		e = io_uring_queue_init(RING_ENTRIES, &l->ring, IORING_SETUP_R_DISABLED);
	if (e) {
		free(l);
		return e;
	}
	/* Restrictions came with Linux 5.10, as did R_DISABLED. */
	e = ring_restrict(&l->ring);
	if (e) {
		io_uring_queue_exit(&l->ring);
		free(l);
		return e;
	}
	l->efd = eventfd(0, EFD_CLOEXEC);
	if (l->efd < 0) {
		e = -errno;
		io_uring_queue_exit(&l->ring);
		free(l);
		return e;
	}
	pthread_mutex_init(&l->post_lock, NULL);
	l->posts_tail = &l->posts;
	l->local_tail = &l->local;
	/* The loop runs on the thread that makes it. */
	l->thread = pthread_self();
	l->efd_io.cb = efd_done;
	arm_eventfd(l);
	*out = l;
	return 0;
}

void cmx_loop_destroy(struct cmx_loop *l)
{
	run_local(l);
	run_posts(l);
	io_uring_queue_exit(&l->ring);
	close(l->efd);
	free(l);
}

int cmx_loop_io_ready(struct cmx_loop *l)
{
	return io_uring_cq_ready(&l->ring) != 0;
}

int cmx_loop_busy(struct cmx_loop *l)
{
	return l->local || atomic_load(&l->wake_pending) || io_uring_cq_ready(&l->ring);
}

void cmx_loop_stop(struct cmx_loop *l)
{
	l->running = 0;
}

static double ms_since(const struct timespec *a, clockid_t clock)
{
	struct timespec b;

	clock_gettime(clock, &b);
	return (double)(b.tv_sec - a->tv_sec) * 1e3 + (double)(b.tv_nsec - a->tv_nsec) / 1e6;
}

/* With CLMUX_LOG=debug: every completion handler that holds the loop for
 * more than STALL_MS, with the CPU time it used (a long wall time with
 * little CPU is the thread waiting or preempted, not working). */
#define STALL_MS 2.0

static void run_timed(struct cmx_io *io, int res, unsigned flags)
{
	struct timespec wall, cpu;
	double ms;

	clock_gettime(CLOCK_MONOTONIC, &wall);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
	io->cb(io, res, flags);
	ms = ms_since(&wall, CLOCK_MONOTONIC);
	if (ms > STALL_MS)
		cmx_dbg("loop: a completion (result %d) took %.1f ms, %.1f ms of CPU", res, ms,
			ms_since(&cpu, CLOCK_THREAD_CPUTIME_ID));
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t cmx_loop_turn_ns(const struct cmx_loop *l)
{
	return l->turn_ns;
}

void cmx_loop_turn_mark(struct cmx_loop *l)
{
	l->turn_ns = now_ns();
}

void cmx_loop_linger(struct cmx_loop *l, uint64_t ns)
{
	uint64_t until = now_ns() + ns;

	l->lingers++;
	if (until > l->linger_until)
		l->linger_until = until;
}

void cmx_loop_linger_with(struct cmx_loop *l, uint64_t ns, int (*fn)(void *arg), void *arg)
{
	uint64_t until = now_ns() + ns;
	int slot = -1;

	for (int i = 0; i < CMX_LINGER_FNS; i++) {
		if (l->linger_fn[i] == fn && l->linger_arg[i] == arg) {
			slot = i;
			break;
		}
		if (!l->linger_fn[i] && slot < 0)
			slot = i;
	}
	if (slot < 0) {
		/* No room: a plain linger, the function not called. */
		cmx_loop_linger(l, ns);
		return;
	}
	l->linger_fn[slot] = fn;
	l->linger_arg[slot] = arg;
	if (until > l->linger_fn_until[slot])
		l->linger_fn_until[slot] = until;
}

/* When the linger ends: the plain one's end, or a later one of a
 * function still looking; 0 when none is due. */
static uint64_t linger_end(const struct cmx_loop *l)
{
	uint64_t end = l->linger_until;

	for (int i = 0; i < CMX_LINGER_FNS; i++)
		if (l->linger_fn[i] && l->linger_fn_until[i] > end)
			end = l->linger_fn_until[i];
	return end;
}

/* Before sleeping: submits, then looks for completions until the linger
 * time ends. Each sched_yield() enters the kernel, where the ring's pending
 * work (a socket's received bytes) becomes completions. */
static void linger(struct cmx_loop *l)
{
	uint64_t now;

	io_uring_submit(&l->ring);
	now = now_ns();
	while (!io_uring_cq_ready(&l->ring) && !l->local && !atomic_load(&l->wake_pending) &&
	       now < linger_end(l)) {
		for (int i = 0; i < CMX_LINGER_FNS; i++)
			if (l->linger_fn[i] &&
			    (now >= l->linger_fn_until[i] || !l->linger_fn[i](l->linger_arg[i]))) {
				l->linger_fn[i] = NULL;
				l->linger_fn_until[i] = 0;
			}
		sched_yield();
		now = now_ns();
	}
	/* The first completion is often the reply's own send, done in the
	 * submit: the linger goes on in the next turn until its time ends. */
	if (now >= linger_end(l)) {
		if (l->linger_until)
			l->idle_lingers++;
		l->linger_until = 0;
		for (int i = 0; i < CMX_LINGER_FNS; i++) {
			l->linger_fn[i] = NULL;
			l->linger_fn_until[i] = 0;
		}
	}
}

void cmx_lat_add(struct cmx_lat *t, uint64_t ns)
{
	t->ns[t->n++ % CMX_LAT_N] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

double cmx_lat_median_us(struct cmx_lat *t)
{
	unsigned n = t->n < CMX_LAT_N ? t->n : CMX_LAT_N;

	if (!n)
		return 0;
	qsort(t->ns, n, sizeof(t->ns[0]), cmp_u32);
	return t->ns[n / 2] / 1e3;
}

void cmx_hist_add(struct cmx_hist *h, uint64_t ns)
{
	uint64_t us = ns / 1000;
	unsigned i = us ? 64 - (unsigned)__builtin_clzll(us) : 0;

	h->b[i < CMX_HIST_N ? i : CMX_HIST_N - 1]++;
	h->n++;
}

unsigned cmx_hist_quantile_us(const struct cmx_hist *h, unsigned pm)
{
	uint64_t want = (h->n * pm + 999) / 1000, seen = 0;

	for (unsigned i = 0; i < CMX_HIST_N; i++) {
		seen += h->b[i];
		if (seen >= want && seen)
			return 1u << i;
	}
	return 1u << (CMX_HIST_N - 1);
}

void cmx_loop_report(struct cmx_loop *l)
{
	cmx_info("loop: lingered after %llu sync replies, %llu lingers ran out, slept %llu times",
		 (unsigned long long)l->lingers, (unsigned long long)l->idle_lingers,
		 (unsigned long long)l->sleeps);
}

int cmx_loop_run(struct cmx_loop *l)
{
	int timed = cmx_log_enabled(CMX_LOG_DEBUG);

	l->running = 1;
	while (l->running) {
		struct io_uring_cqe *cqe;
		struct timespec cpu;
		int e;

		/* Waiting costs no CPU; receiving inline in the submit does. */
		if (linger_end(l))
			linger(l);
		if (timed)
			clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
		if (!io_uring_cq_ready(&l->ring) && !l->local && !atomic_load(&l->wake_pending))
			l->sleeps++;
		e = io_uring_submit_and_wait(&l->ring, 1);
		if (timed && ms_since(&cpu, CLOCK_THREAD_CPUTIME_ID) > STALL_MS)
			cmx_dbg("loop: the submit used %.1f ms of CPU",
				ms_since(&cpu, CLOCK_THREAD_CPUTIME_ID));

		if (e < 0 && e != -EINTR && e != -EAGAIN && e != -EBUSY)
			return e;
		l->turn_ns = now_ns();
		/* Each completion leaves the queue before its callback runs, so
		 * that cmx_loop_busy() sees only the ones still waiting. */
		while (io_uring_peek_cqe(&l->ring, &cqe) == 0) {
			struct cmx_io *io = io_uring_cqe_get_data(cqe);
			int res = cqe->res;
			unsigned flags = cqe->flags;

			io_uring_cqe_seen(&l->ring, cqe);
			if (io && timed)
				run_timed(io, res, flags);
			else if (io)
				io->cb(io, res, flags);
			run_local(l);
		}
	}
	return 0;
}
