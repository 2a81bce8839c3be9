// SPDX-License-Identifier: MIT
// The registry of what waits for a notification of one session, settled
// when that session ends without sending it.
#include "icd.h"

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
void cmx_track_sweep(struct cmx_session *s)
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
