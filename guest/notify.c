// SPDX-License-Identifier: MIT
// The notification thread's work: read data landing, event callbacks, buffer
// destructors and context errors, all sent by the daemon unasked.
#include "icd.h"

#include <stdlib.h>

#include "fdio.h"

/* The KernelOutput being received: bulk_dst() to done(), on the one
 * notification thread. */
static char *output_buf;
static size_t output_len;

void cmx_event_callback_fired(uint64_t tag, int64_t status);
void cmx_mem_destructor_fired(uint64_t tag);

/* Spreads a packed rectangle into the application's pitched memory. */
static void unpack_rect(const struct cmx_pending_read *r)
{
	const char *src = r->dst;
	char *out = r->out;

	for (size_t z = 0; z < r->region[2]; z++)
		for (size_t y = 0; y < r->region[1]; y++)
			memcpy(out + z * r->slice_pitch + y * r->row_pitch,
			       src + (z * r->region[1] + y) * r->region[0], r->region[0]);
}

/* The registry of what waits for a notification. Senders hold track_rw
 * for reading from listing to sending; the sweep of an ended session
 * holds it for writing, so it never settles a record whose call is still
 * on its way out (and that its sender may yet undo). */
static pthread_rwlock_t track_rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_mutex_t track_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cmx_track track_head = { &track_head, &track_head, NULL, NULL, 1 };

static void track_unlist_locked(struct cmx_track *t)
{
	if (!t->listed)
		return;
	t->prev->next = t->next;
	t->next->prev = t->prev;
	t->listed = 0;
}

void cmx_track_end(struct cmx_track *t)
{
	pthread_mutex_lock(&track_lock);
	track_unlist_locked(t);
	pthread_mutex_unlock(&track_lock);
}

int cmx_track_send(struct cmx_track *t, void (*lost)(struct cmx_track *),
		   const struct cmx_msgdesc *d, const void *in, unsigned flags, uint64_t len,
		   uint64_t *area_off)
{
	struct cmx_session *s;
	int e;

	pthread_rwlock_rdlock(&track_rw);
	s = cmx_icd.s;
	t->s = s;
	t->lost = lost;
	pthread_mutex_lock(&track_lock);
	t->next = &track_head;
	t->prev = track_head.prev;
	track_head.prev->next = t;
	track_head.prev = t;
	t->listed = 1;
	pthread_mutex_unlock(&track_lock);
	/* Listed before it goes: its notification may arrive at once. */
	if (flags & CMX_TRACK_RECV)
		e = cmx_session_send_recv(s, d, in, len, area_off);
	else
		e = cmx_session_send(s, d, in, NULL, 0);
	if (!e && (flags & CMX_TRACK_FLUSH))
		e = cmx_session_flush(s);
	if (e)
		cmx_track_end(t);
	pthread_rwlock_unlock(&track_rw);
	return e;
}

/* Session s has ended: every record sent on it is lost. */
static void track_sweep(struct cmx_session *s)
{
	struct cmx_track *gone = NULL, *t, *next;

	pthread_rwlock_wrlock(&track_rw);
	pthread_mutex_lock(&track_lock);
	for (t = track_head.next; t != &track_head; t = next) {
		next = t->next;
		if (t->s != s)
			continue;
		track_unlist_locked(t);
		t->next = gone;
		gone = t;
	}
	pthread_mutex_unlock(&track_lock);
	pthread_rwlock_unlock(&track_rw);
	/* Oldest first: gone is newest first, so reverse it. */
	for (t = NULL; gone; gone = next) {
		next = gone->next;
		gone->next = t;
		t = gone;
	}
	for (; t; t = next) {
		next = t->next;
		t->lost(t);
	}
}

static void lost(void *ctx, struct cmx_session *s)
{
	track_sweep(s);
}

void cmx_read_landed(struct cmx_pending_read *r, int status)
{
	cl_command_queue q = r->queue;

	cmx_track_end(&r->track);
	/* The data, if it came through the area, was copied to dst already
	 * (the area of the session the read went on). */
	if (r->area_off)
		cmx_session_area_free(r->track.s, r->area_off);
	if (status >= 0 && r->out)
		unpack_rect(r);
	if (r->out)
		free(r->dst);
	if (r->finish)
		r->finish(r, status);
	if (r->event)
		cmx_event_data_done(r->event, status);
	pthread_mutex_lock(&cmx_icd.wait_lock);
	atomic_fetch_sub(&q->pending, 1);
	pthread_cond_broadcast(&cmx_icd.wait_cond);
	pthread_mutex_unlock(&cmx_icd.wait_lock);
	/* Last: the event's may be the last reference to the queue, whose
	 * release waits for its pending count, settled just above (in the
	 * other order this thread would wait for itself). */
	if (r->event)
		cmx_clReleaseEvent(r->event);
	free(r);
}

/* The largest kernel output taken (the daemon sends at most 16 MiB). */
#define OUTPUT_MAX (64u << 20)

void *cmx_nbulk_ReadDone(const struct cmx_ReadDone_in *in, uint64_t len)
{
	struct cmx_pending_read *r = (struct cmx_pending_read *)(uintptr_t)in->tag;

	return r && len == r->len ? r->dst : NULL;
}

void cmx_n_ReadDone(const struct cmx_ReadDone_in *in)
{
	cmx_read_landed((struct cmx_pending_read *)(uintptr_t)in->tag, (int)in->status);
}

void *cmx_nbulk_KernelOutput(const struct cmx_KernelOutput_in *in, uint64_t len)
{
	(void)in;
	/* The bytes land in a buffer of their own; cmx_n_KernelOutput()
	 * writes them. */
	output_buf = len <= OUTPUT_MAX ? malloc(len) : NULL;
	output_len = output_buf ? len : 0;
	return output_buf;
}

void cmx_n_KernelOutput(const struct cmx_KernelOutput_in *in)
{
	struct cmx_pending_read *r = (struct cmx_pending_read *)(uintptr_t)in->tag;

	/* Where the driver would have written it in the application's own
	 * process: straight to fd 1, past stdio's buffer. */
	if (output_len)
		(void)cmx_fd_write_all(STDOUT_FILENO, output_buf, output_len);
	free(output_buf);
	output_buf = NULL;
	output_len = 0;
	/* Tag 0: a launch the daemon found printing and this side did not;
	 * nothing waits for it. */
	if (r)
		cmx_read_landed(r, (int)in->status);
}

void cmx_n_EventDone(const struct cmx_EventDone_in *in)
{
	cmx_event_callback_fired(in->tag, in->status);
}

void cmx_n_MemDestroyed(const struct cmx_MemDestroyed_in *in)
{
	cmx_mem_destructor_fired(in->tag);
}

void cmx_n_ContextError(const struct cmx_ContextError_in *in)
{
	cl_context c = (cl_context)(uintptr_t)in->tag;

	if (CMX_IS(c, CMX_MAGIC_CONTEXT) && c->notify)
		c->notify(in->errinfo.len ? in->errinfo.ptr : "", in->info.ptr, in->info.len,
			  c->notify_data);
}

/* Each notification to its handler above, by the generated tables. */
static void *bulk_dst(void *ctx, unsigned op, const void *args, uint64_t len)
{
	(void)ctx;
	return cmx_notify_bulk_dst(op, args, len);
}

static void done(void *ctx, unsigned op, const void *args)
{
	(void)ctx;
	(void)cmx_notify_dispatch(op, args);
}

const struct cmx_notify_ops cmx_notify_ops = { .bulk_dst = bulk_dst, .done = done, .lost = lost };
