// SPDX-License-Identifier: MIT
// A growing pool of threads for blocking OpenCL calls (builds, finishes,
// waits); each job's completion is posted back to the loop.
#include "executor.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "log.h"
#include "loop.h"

#define IDLE_SECONDS 10

struct job {
	void (*work)(void *);
	void (*done)(void *);
	void *arg;
	struct job *next;
};

struct cmx_executor {
	struct cmx_loop *loop;
	pthread_mutex_t lock;
	pthread_cond_t cond, drained;
	struct job *head, **tail;
	unsigned threads, idle, max, busy;
	int stopping;
};

static void *worker(void *arg)
{
	struct cmx_executor *x = arg;

	pthread_mutex_lock(&x->lock);
	for (;;) {
		struct job *j;
		while (!x->head && !x->stopping) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += IDLE_SECONDS;
			x->idle++;
			int e = pthread_cond_timedwait(&x->cond, &x->lock, &ts);
			x->idle--;
			if (e == ETIMEDOUT && !x->head)
				goto out;
		}
		if (!x->head)
			goto out;
		j = x->head;
		x->head = j->next;
		if (!x->head)
			x->tail = &x->head;
		x->busy++;
		pthread_mutex_unlock(&x->lock);
		j->work(j->arg);
		cmx_loop_post(x->loop, j->done, j->arg);
		free(j);
		pthread_mutex_lock(&x->lock);
		x->busy--;
	}
out:
	x->threads--;
	pthread_cond_broadcast(&x->drained);
	pthread_mutex_unlock(&x->lock);
	return NULL;
}

int cmx_executor_create(struct cmx_loop *loop, unsigned max_threads, struct cmx_executor **out)
{
	struct cmx_executor *x = calloc(1, sizeof(*x));

	if (!x)
		return -ENOMEM;
	x->loop = loop;
	x->max = max_threads;
	x->tail = &x->head;
	pthread_mutex_init(&x->lock, NULL);
	pthread_cond_init(&x->cond, NULL);
	pthread_cond_init(&x->drained, NULL);
	*out = x;
	return 0;
}

void cmx_executor_run(struct cmx_executor *x, void (*work)(void *), void (*done)(void *), void *arg)
{
	struct job *j = malloc(sizeof(*j));

	if (!j) {
		cmx_err("out of memory queueing a job");
		abort();
	}
	j->work = work;
	j->done = done;
	j->arg = arg;
	j->next = NULL;
	pthread_mutex_lock(&x->lock);
	*x->tail = j;
	x->tail = &j->next;
	if (!x->idle && x->threads < x->max) {
		pthread_t t;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		if (!pthread_create(&t, &a, worker, x))
			x->threads++;
		pthread_attr_destroy(&a);
		if (!x->threads)
			cmx_err("cannot start an executor thread");
	}
	pthread_cond_signal(&x->cond);
	pthread_mutex_unlock(&x->lock);
}

unsigned cmx_executor_busy(struct cmx_executor *x)
{
	unsigned n;

	pthread_mutex_lock(&x->lock);
	n = x->busy;
	for (struct job *j = x->head; j; j = j->next)
		n++;
	pthread_mutex_unlock(&x->lock);
	return n;
}

void cmx_executor_destroy(struct cmx_executor *x)
{
	pthread_mutex_lock(&x->lock);
	x->stopping = 1;
	pthread_cond_broadcast(&x->cond);
	while (x->threads)
		pthread_cond_wait(&x->drained, &x->lock);
	pthread_mutex_unlock(&x->lock);
	free(x);
}
