// SPDX-License-Identifier: MIT
// Pinned staging slots (one mapped CL_MEM_ALLOC_HOST_PTR buffer of the daemon's own context) and a few copy threads.
//
// Why (docs/performance.md, "NVIDIA H100"): NVIDIA DMAs from pinned memory
// at 52-54 GB/s but copies pageable memory, the shared area's pages
// included, through its own staging at one thread's memcpy speed (6-7 GB/s
// on the device machine), and pins nothing of a USE_HOST_PTR buffer (it
// copies it to the device at creation). So a large transfer's chunk is
// copied by several threads between the area and a pinned slot, and the
// driver DMAs from or to the slot. Pinned memory of one context serves
// every context of the device (CUDA's unified addressing makes it
// portable); the daemon's context exists only to own it.
#include "pinned.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "tuning.h"

#define SLOTS	    8
#define MAX_THREADS 4
#define PIECE_MIN   (256u << 10) /* smaller copies are not split */

struct piece {
	void *dst;
	const void *src;
	uint64_t n;
	struct job *job;
	struct piece *next;
};

struct job {
	void (*done)(void *arg);
	void *arg;
	void *dst;
	const void *src;
	uint64_t n;
	atomic_uint left; /* pieces not yet copied; the last one calls done */
	struct piece p[MAX_THREADS];
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct piece *head, **tail;
	pthread_t threads[MAX_THREADS];
	unsigned nthreads, started;
	int stopping;
	cl_device_id dev;
	/* The pool: written by the first thread before ready's release store. */
	cl_context ctx;
	cl_command_queue q;
	cl_mem buf;
	char *base;
	atomic_int ready; /* store-release after base is mapped; load-acquire in get() */
	int wanted;	  /* a transfer asked for the pool (under lock) */
	unsigned used;	  /* bit per slot, under lock */
	uint64_t min;
} pn = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

/* The daemon's context, its pinned buffer, mapped for good. */
static void pool_make(void)
{
	cl_int e;
	void *p;

	pn.ctx = clCreateContext(NULL, 1, &pn.dev, NULL, NULL, &e);
	if (e)
		goto fail;
	pn.q = clCreateCommandQueue(pn.ctx, pn.dev, 0, &e);
	if (e)
		goto fail;
	pn.buf = clCreateBuffer(pn.ctx, CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_WRITE,
				(size_t)SLOTS * CMX_PINNED_SLOT, NULL, &e);
	if (e)
		goto fail;
	p = clEnqueueMapBuffer(pn.q, pn.buf, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
			       (size_t)SLOTS * CMX_PINNED_SLOT, 0, NULL, NULL, &e);
	if (e)
		goto fail;
	pn.base = p;
	atomic_store_explicit(&pn.ready, 1, memory_order_release);
	cmx_info("pinned staging: %u slots of %u MiB, %u copy threads, transfers from %llu bytes",
		 SLOTS, CMX_PINNED_SLOT >> 20, pn.nthreads, (unsigned long long)pn.min);
	return;
fail:
	cmx_warn("pinned staging unavailable (%d): transfers stay pageable", e);
}

static void push(struct piece *p, unsigned n)
{
	pthread_mutex_lock(&pn.lock);
	for (unsigned m = 0; m < n; m++) {
		p[m].next = NULL;
		*pn.tail = &p[m];
		pn.tail = &p[m].next;
	}
	pthread_cond_broadcast(&pn.cond);
	pthread_mutex_unlock(&pn.lock);
}

/* Cuts j's copy into pieces for the threads (page-aligned), queued. */
static void split(struct job *j)
{
	unsigned k = pn.started, i;
	uint64_t per;

	if (j->n / k < PIECE_MIN)
		k = j->n / PIECE_MIN ? (unsigned)(j->n / PIECE_MIN) : 1;
	per = (j->n / k + 4095) & ~(uint64_t)4095;
	for (i = 0; i < k && (uint64_t)i * per < j->n; i++) {
		uint64_t off = (uint64_t)i * per;
		j->p[i] = (struct piece){(char *)j->dst + off, (const char *)j->src + off,
					 j->n - off < per ? j->n - off : per, j, NULL};
	}
	atomic_init(&j->left, i);
	push(j->p, i);
}

static void *copier(void *arg)
{
	if (arg) {
		/* The pool is made when a transfer first asks for it, not at
		 * start: an idle worker process holds no context of its own
		 * (on a GPU each costs device memory, per process). */
		int go;
		pthread_mutex_lock(&pn.lock);
		while (!pn.wanted && !pn.stopping)
			pthread_cond_wait(&pn.cond, &pn.lock);
		go = !pn.stopping;
		pthread_mutex_unlock(&pn.lock);
		if (go)
			pool_make();
	}
	pthread_mutex_lock(&pn.lock);
	for (;;) {
		struct piece *p;
		struct job *j;

		while (!pn.head && !pn.stopping)
			pthread_cond_wait(&pn.cond, &pn.lock);
		if (!pn.head)
			break;
		p = pn.head;
		pn.head = p->next;
		if (!pn.head)
			pn.tail = &pn.head;
		pthread_mutex_unlock(&pn.lock);
		j = p->job;
		memcpy(p->dst, p->src, p->n);
		/* acq_rel: the last piece's thread sees every other piece's
		 * bytes before it calls done. */
		if (atomic_fetch_sub_explicit(&j->left, 1, memory_order_acq_rel) == 1) {
			j->done(j->arg);
			free(j);
		}
		pthread_mutex_lock(&pn.lock);
	}
	pthread_mutex_unlock(&pn.lock);
	return NULL;
}

int cmx_pinned_start(cl_device_id dev, const struct cmx_tuning *tune)
{
	cl_device_type type = 0;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof(type), &type, NULL);
	/* A CPU driver's host memory is the storage: nothing to gain. */
	if (tune->pinned == CMX_TUNE_AUTO ? (type & CL_DEVICE_TYPE_CPU) != 0 : !tune->pinned)
		return 0;
	pn.dev = dev;
	pn.min = (uint64_t)tune->pinned_min;
	/* A quarter of the cores, 1 to MAX_THREADS: the guests copy too. */
	pn.nthreads = ncpu >= 4 * MAX_THREADS ? MAX_THREADS : ncpu >= 8 ? (unsigned)ncpu / 4 : 1;
	pn.tail = &pn.head;
	for (unsigned i = 0; i < pn.nthreads; i++) {
		/* The first thread makes the pool before it copies. */
		if (pthread_create(&pn.threads[i], NULL, copier, i ? NULL : (void *)1))
			break;
		pn.started++;
	}
	return pn.started ? 0 : -EAGAIN;
}

void cmx_pinned_stop(void)
{
	if (!pn.started)
		return;
	pthread_mutex_lock(&pn.lock);
	pn.stopping = 1;
	pthread_cond_broadcast(&pn.cond);
	pthread_mutex_unlock(&pn.lock);
	for (unsigned i = 0; i < pn.started; i++)
		pthread_join(pn.threads[i], NULL);
	pn.started = 0;
	atomic_store(&pn.ready, 0);
	if (pn.base)
		clEnqueueUnmapMemObject(pn.q, pn.buf, pn.base, 0, NULL, NULL);
	if (pn.q)
		clFinish(pn.q);
	if (pn.buf)
		clReleaseMemObject(pn.buf);
	if (pn.q)
		clReleaseCommandQueue(pn.q);
	if (pn.ctx)
		clReleaseContext(pn.ctx);
}

void *cmx_pinned_get(uint64_t size)
{
	void *slot = NULL;

	if (size < pn.min || size > CMX_PINNED_SLOT || !pn.started)
		return NULL;
	if (!atomic_load_explicit(&pn.ready, memory_order_acquire)) {
		/* The first such transfer goes pageable and has the pool made. */
		pthread_mutex_lock(&pn.lock);
		if (!pn.wanted) {
			pn.wanted = 1;
			pthread_cond_broadcast(&pn.cond);
		}
		pthread_mutex_unlock(&pn.lock);
		return NULL;
	}
	pthread_mutex_lock(&pn.lock);
	for (unsigned i = 0; i < SLOTS; i++)
		if (!(pn.used & (1u << i))) {
			pn.used |= 1u << i;
			slot = pn.base + (size_t)i * CMX_PINNED_SLOT;
			break;
		}
	pthread_mutex_unlock(&pn.lock);
	return slot;
}

void cmx_pinned_put(void *slot)
{
	uint64_t i;

	if (!slot)
		return;
	i = (uint64_t)((char *)slot - pn.base) / CMX_PINNED_SLOT;
	pthread_mutex_lock(&pn.lock);
	pn.used &= ~(1u << i);
	pthread_mutex_unlock(&pn.lock);
}

void cmx_pinned_copy(void *dst, const void *src, uint64_t n, void (*done)(void *arg), void *arg)
{
	struct job *j = malloc(sizeof(*j));

	if (!j || !pn.started || !n) {
		free(j);
		memcpy(dst, src, n);
		done(arg);
		return;
	}
	*j = (struct job){.done = done, .arg = arg, .dst = dst, .src = src, .n = n};
	split(j);
}
