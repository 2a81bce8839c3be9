// SPDX-License-Identifier: MIT
// What every object of the ICD shares: the platform's ids and session, a
// new object, wait lists and the answer of a query.
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "icd.h"
#include "object.h"

struct cmx_icd cmx_icd = {
	.next_id = CMX_FIRST_GUEST_ID,
	.floor = CMX_FIRST_GUEST_ID,
	.wait_lock = PTHREAD_MUTEX_INITIALIZER,
	.wait_cond = PTHREAD_COND_INITIALIZER,
};

cl_int cmx_info_copy(size_t size, void *value, size_t *size_ret, const void *src, size_t n)
{
	if (value) {
		if (size < n)
			return CL_INVALID_VALUE;
		if (n)
			memcpy(value, src, n);
	}
	if (size_ret)
		*size_ret = n;
	return CL_SUCCESS;
}

cl_int cmx_info_str(size_t size, void *value, size_t *size_ret, const char *s)
{
	return cmx_info_copy(size, value, size_ret, s, strlen(s) + 1);
}

void *cmx_object_new(size_t size, uint32_t magic)
{
	struct _cl_platform_id *o = calloc(1, size);

	if (!o)
		return NULL;
	o->dispatch = cmx_icd.platform.dispatch;
	o->magic = magic;
	atomic_init(&o->refs, 1);
	o->id = cmx_new_id();
	return o;
}

cl_int cmx_wait_ids(cl_uint n, const cl_event *list, cl_context ctx, uint64_t *ids)
{
	if ((n && !list) || (!n && list))
		return CL_INVALID_EVENT_WAIT_LIST;
	for (cl_uint i = 0; i < n; i++) {
		if (!CMX_IS(list[i], CMX_MAGIC_EVENT))
			return CL_INVALID_EVENT_WAIT_LIST;
		if (ctx && list[i]->ctx != ctx)
			return CL_INVALID_CONTEXT;
		ids[i] = list[i]->id;
	}
	return CL_SUCCESS;
}

cl_int cmx_waitlist_init(struct cmx_waitlist *w, cl_uint n, const cl_event *list, cl_context ctx)
{
	cl_int e;

	w->n = n;
	w->ids = n <= 32 ? w->small : malloc(n * sizeof(uint64_t));
	if (!w->ids)
		return CL_OUT_OF_HOST_MEMORY;
	e = cmx_wait_ids(n, list, ctx, w->ids);
	if (e)
		cmx_waitlist_fini(w);
	return e;
}

void cmx_waitlist_fini(struct cmx_waitlist *w)
{
	if (w->ids != w->small)
		free(w->ids);
	w->ids = w->small;
	w->n = 0;
}

/* Sleeps, wait_lock held, until the notification thread lands some data.
 * A broken session lands nothing more: the callers' waits (for an event's
 * data, guest/event.c; a queue's, guest/queue.c) re-check it every 100 ms. */
void cmx_icd_wait_landing(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 100 * 1000 * 1000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&cmx_icd.wait_cond, &cmx_icd.wait_lock, &ts);
}
