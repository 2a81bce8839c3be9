// SPDX-License-Identifier: MIT
// What waits for a notification of one session, settled when the session
// ends without it (guest/track.c).
#ifndef CMX_GUEST_TRACK_H
#define CMX_GUEST_TRACK_H

#include <stdint.h>

#include "session.h"

/*
 * Something that waits for a notification of one session: a non-blocking
 * read's data, an event callback. When that session ends without sending
 * it (the daemon or its worker died), lost() settles it, once, on the
 * session's notification thread (guest/notify.c).
 */
struct cmx_track {
	struct cmx_track *prev, *next; /* under the registry's lock */
	struct cmx_session *s;	       /* the session it was sent on */
	void (*lost)(struct cmx_track *t);
	int listed;
};
#define CMX_TRACK_RECV 0x1u  /* the call reserves room for len bytes of data */
#define CMX_TRACK_FLUSH 0x2u /* sent at once, not left in the batch */
/* Sends an async call on the current session with t listed on it. 0, or
 * -errno: not sent, and t not listed. */
int cmx_track_send(struct cmx_track *t, void (*lost)(struct cmx_track *),
		   const struct cmx_msgdesc *d, const void *in, unsigned flags, uint64_t len,
		   uint64_t *area_off);
/* t's notification arrived (or it was never sent): unlists it. */
void cmx_track_end(struct cmx_track *t);
/* Session s has ended: settles every record sent on it (lost()). */
void cmx_track_sweep(struct cmx_session *s);

#endif
