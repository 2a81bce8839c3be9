// SPDX-License-Identifier: MIT
// Large copies between the application's memory and the shared area, split over helper threads where the machine has cores to spare.
//
// A GPU's transfers through clmux copy twice on the CPU where the driver
// copies once (application <-> area here, area <-> pinned staging in the
// daemon), and one thread's memcpy is what limits both: 5.6-6.5 GB/s on
// the H100 machine, against 18-21 GB/s for four (docs/gpu.md). So a large
// copy is cut into pieces that helper threads take from a queue while the
// caller copies the first; the caller then takes back whatever no helper
// has started, so a copy never depends on a helper running (nor on one
// existing: after fork() the child has none). Off on small machines: on two
// cores the helpers would take the core the daemon or the driver needs.
#include "copy.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"

#define CMX_COPY_SPLIT (1u << 20)
#define PIECE_MIN      (256u << 10)
#define MAX_HELPERS    7

struct piece {
	char *dst;
	const char *src;
	size_t n;
	struct call *call;
	struct piece *next;
};

struct call {
	unsigned left; /* pieces not finished, under the lock */
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t work, done;
	struct piece *head, **tail;
	unsigned helpers;
} cp = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL,
	&cp.head, 0};
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Takes the first queued piece (of `call` only, when given). Under the lock. */
static struct piece *take(struct call *call)
{
	for (struct piece **pp = &cp.head; *pp; pp = &(*pp)->next) {
		struct piece *p = *pp;
		if (call && p->call != call)
			continue;
		*pp = p->next;
		if (!*pp)
			cp.tail = pp;
		return p;
	}
	return NULL;
}

static void finish(struct piece *p)
{
	pthread_mutex_lock(&cp.lock);
	if (!--p->call->left)
		pthread_cond_broadcast(&cp.done);
	pthread_mutex_unlock(&cp.lock);
}

static void *helper(void *arg)
{
	pthread_mutex_lock(&cp.lock);
	for (;;) {
		struct piece *p;
		while (!(p = take(NULL)))
			pthread_cond_wait(&cp.work, &cp.lock);
		pthread_mutex_unlock(&cp.lock);
		memcpy(p->dst, p->src, p->n);
		finish(p);
		pthread_mutex_lock(&cp.lock);
	}
	return NULL;
}

/* The child of a fork has no helpers (and maybe a lock held by one). */
static void after_fork(void)
{
	pthread_mutex_init(&cp.lock, NULL);
	pthread_cond_init(&cp.work, NULL);
	pthread_cond_init(&cp.done, NULL);
	cp.head = NULL;
	cp.tail = &cp.head;
	cp.helpers = 0;
}

static void start(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN), want = (long)cmx_env()->copy_threads;

	if (want == CMX_ENV_AUTO)
		want = ncpu >= 8 ? 3 : 0;
	pthread_attr_t a;

	if (want > MAX_HELPERS)
		want = MAX_HELPERS;
	pthread_atfork(NULL, NULL, after_fork);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	for (long i = 0; i < want; i++) {
		pthread_t t;
		sigset_t all, old;
		/* The application's signals are not the helpers' to take. */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		int e = pthread_create(&t, &a, helper, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (e)
			break;
		pthread_mutex_lock(&cp.lock);
		cp.helpers++;
		pthread_mutex_unlock(&cp.lock);
	}
	pthread_attr_destroy(&a);
}

void cmx_copy(void *dst, const void *src, size_t n)
{
	struct piece pieces[MAX_HELPERS];
	struct call call = {0};
	unsigned k;
	size_t per;

	if (n >= CMX_COPY_SPLIT)
		pthread_once(&once, start);
	k = n >= CMX_COPY_SPLIT ? __atomic_load_n(&cp.helpers, __ATOMIC_RELAXED) : 0;
	if (k > n / PIECE_MIN - 1)
		k = (unsigned)(n / PIECE_MIN - 1);
	if (!k) {
		memcpy(dst, src, n);
		return;
	}
	/* k pieces for the helpers, the first (k + 1)th for this thread;
	 * page-aligned cuts. */
	per = (n / (k + 1) + 4095) & ~(size_t)4095;
	pthread_mutex_lock(&cp.lock);
	for (unsigned i = 0; i < k; i++) {
		size_t off = per * (i + 1);
		if (off >= n)
			break;
		pieces[i] = (struct piece){(char *)dst + off, (const char *)src + off,
					   n - off < per ? n - off : per, &call, NULL};
		*cp.tail = &pieces[i];
		cp.tail = &pieces[i].next;
		call.left++;
	}
	pthread_cond_broadcast(&cp.work);
	pthread_mutex_unlock(&cp.lock);
	memcpy(dst, src, per < n ? per : n);
	/* What no helper has taken, this thread does. */
	pthread_mutex_lock(&cp.lock);
	for (struct piece *p; (p = take(&call));) {
		pthread_mutex_unlock(&cp.lock);
		memcpy(p->dst, p->src, p->n);
		pthread_mutex_lock(&cp.lock);
		call.left--;
	}
	while (call.left)
		pthread_cond_wait(&cp.done, &cp.lock);
	pthread_mutex_unlock(&cp.lock);
}

/* Copies the host region between the application's pitched memory and a
 * packed buffer, in the direction `pack` says. */
void cmx_pitched_copy(char *pitched, char *packed, size_t w, size_t rows, size_t slices,
		      size_t row_pitch, size_t slice_pitch, int pack)
{
	for (size_t z = 0; z < slices; z++)
		for (size_t y = 0; y < rows; y++) {
			char *h = pitched + z * slice_pitch + y * row_pitch;
			char *p = packed + (z * rows + y) * w;

			memcpy(pack ? p : h, pack ? h : p, w);
		}
}
