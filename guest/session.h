// SPDX-License-Identifier: MIT
// A guest session: the call channel with its batch, and the notification channel.
// Layer: the top of the transport, below every object (guest/icd.h).
#ifndef CMX_GUEST_SESSION_H
#define CMX_GUEST_SESSION_H

#include <stdint.h>

#include "codec.h"
#include "wire.h"

struct cmx_session;
struct cmx_garea;

/* A sync call's reply: status, and the buffer the decoded outputs point into;
 * the outputs' record arrays (rec[] fields) are their own memory, released
 * with the reply, so the outputs must outlive it. */
struct cmx_reply {
	int32_t status;
	void *buf;
	const struct cmx_msgdesc *dout; /* the outputs, where they own records */
	void *out;
};

/* Notifications run on the session's own thread. `bulk_dst` says where a
 * notification's payload goes (NULL: drop it); `done` then handles it. A
 * payload in the shared area is copied to bulk_dst too; its block is the
 * read's own, freed by whoever reserved it. */
struct cmx_notify_ops {
	void *(*bulk_dst)(void *ctx, unsigned op, const void *args, uint64_t len);
	void (*done)(void *ctx, unsigned op, const void *args);
	/* The session has ended: nothing more arrives (optional). */
	void (*lost)(void *ctx, struct cmx_session *s);
};

struct cmx_session_stats {
	uint64_t messages;    /* calls sent, async and sync */
	uint64_t round_trips; /* sync calls: each waits for one reply */
	uint64_t writes;      /* sendmsg() calls on the call channel */
	uint64_t bytes;	      /* bytes written, payload included */
	uint64_t notifications;
};

/* Connects both channels and says hello. 0 or -errno. */
int cmx_session_open(const char *spec, const struct cmx_notify_ops *ops, void *ctx,
		     struct cmx_session **out);
void cmx_session_close(struct cmx_session *s);
/* In a child of fork(): the parent's session is let go of, untouched. */
void cmx_session_forked(struct cmx_session *s);

/* Queues an async call (and its payload) in the batch. 0 or -errno. */
int cmx_session_send(struct cmx_session *s, const struct cmx_msgdesc *d, const void *in,
		     const void *bulk, uint64_t bulk_len);
/* Queues an async call whose data comes back later (a non-blocking read of
 * len bytes): with a shared area, room for the data is reserved there and
 * its offset stored in *area_off (0: none), for cmx_session_area_free()
 * once the data has been taken. 0 or -errno. */
int cmx_session_send_recv(struct cmx_session *s, const struct cmx_msgdesc *d, const void *in,
			  uint64_t len, uint64_t *area_off);
/* Queues an async call naming the area block [off, off + len) (a buffer's
 * storage in the heap). 0 or -errno. */
int cmx_session_send_block(struct cmx_session *s, const struct cmx_msgdesc *d, const void *in,
			   uint64_t off, uint64_t len);
/* Gives back a block reserved by cmx_session_send_recv() (0 is ignored). */
void cmx_session_area_free(struct cmx_session *s, uint64_t off);
/* Whether the daemon has said, in the shared area, that the command of
 * event `id` completed without error: then nobody needs to ask it. */
int cmx_session_fenced(struct cmx_session *s, uint64_t id);
/* Whether the daemon stores fences for this session at all. */
int cmx_session_has_fences(struct cmx_session *s);
/* cmx_garea_fence_state() of the session's area. */
int cmx_session_fence_state(struct cmx_session *s, uint64_t id);
/* How long a waiter looks for the fence of a command the daemon watches
 * before it asks: as long as the daemon looks (the area's fence_spin_us). */
uint64_t cmx_session_fence_spin_ns(struct cmx_session *s);
/* Whether payloads can go through a shared data area. */
int cmx_session_has_area(struct cmx_session *s);
/* The shared area when buffers can live in it (its heap), else NULL. */
struct cmx_garea *cmx_session_heap(struct cmx_session *s);
/* Sends the batch now. */
int cmx_session_flush(struct cmx_session *s);
/* Sends a sync call after the batch and waits for its reply; a reply payload
 * lands in dst (at most dst_len bytes). 0 with r->status set, or -errno when
 * the session is broken. Free r with cmx_reply_fini(). */
int cmx_session_call(struct cmx_session *s, const struct cmx_msgdesc *din, const void *in,
		     const void *bulk, uint64_t bulk_len, const struct cmx_msgdesc *dout, void *out,
		     struct cmx_reply *r, void *dst, uint64_t dst_len);
void cmx_reply_fini(struct cmx_reply *r);

void cmx_session_get_stats(struct cmx_session *s, struct cmx_session_stats *st);
/* True once either channel has failed; every later call fails at once. */
int cmx_session_broken(struct cmx_session *s);
/* Ids below floor name objects of an earlier session: calls naming one
 * fail with -ESTALE without being sent. */
void cmx_session_set_floor(struct cmx_session *s, uint64_t floor);
/* Ends the session as a failed channel does (a bulk lane's error). */
void cmx_session_fail(struct cmx_session *s, int err);
/* The session's bulk lanes (guest/lane.h), or NULL: none, or broken. */
struct cmx_lanes *cmx_session_lanes(struct cmx_session *s);

#endif
