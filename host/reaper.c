// SPDX-License-Identifier: MIT
// The reaper thread: slow releases off the io_uring loop (host/reaper.h).
#include "reaper.h"

#include <pthread.h>
#include <stdlib.h>

struct job {
	void (*fn)(void *ctx, void *arg);
	void *ctx, *arg;
	struct job *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static struct job *head, **tail = &head;
static int started, pending; /* pending: queued or running jobs */

static void *reaper_main(void *unused)
{
	pthread_mutex_lock(&lock);
	for (;;) {
		struct job *j = head;
		if (!j) {
			pthread_cond_wait(&cond, &lock);
			continue;
		}
		head = j->next;
		if (!head)
			tail = &head;
		pthread_mutex_unlock(&lock);
		j->fn(j->ctx, j->arg);
		free(j);
		pthread_mutex_lock(&lock);
		pending--;
	}
	return NULL;
}

void cmx_reap(void (*fn)(void *ctx, void *arg), void *ctx, void *arg)
{
	struct job *j = malloc(sizeof(*j));

	pthread_mutex_lock(&lock);
	if (!started && j) {
		pthread_attr_t attr;
		pthread_t t;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		started = !pthread_create(&t, &attr, reaper_main, NULL);
		pthread_attr_destroy(&attr);
	}
	if (started && j) {
		j->fn = fn;
		j->ctx = ctx;
		j->arg = arg;
		j->next = NULL;
		*tail = j;
		tail = &j->next;
		pending++;
		pthread_cond_signal(&cond);
		j = NULL;
		fn = NULL;
	}
	pthread_mutex_unlock(&lock);
	free(j);
	if (fn)
		fn(ctx, arg);
}

int cmx_reap_busy(void)
{
	int busy;

	pthread_mutex_lock(&lock);
	busy = pending > 0;
	pthread_mutex_unlock(&lock);
	return busy;
}
