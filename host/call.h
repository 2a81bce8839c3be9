// SPDX-License-Identifier: MIT
// One decoded call on its way through a handler, and its reply.
#ifndef CMX_HOST_CALL_H
#define CMX_HOST_CALL_H

#include <stdint.h>

#include "handlers.gen.h"
#include "wire.h"

struct cmx_area;
struct cmx_conn;
struct cmx_server;
struct cmx_session;

#define CMX_CALL_FDS 2

/* Returned by a handler that finishes its call later (cmx_call_done()). */
#define CMX_DEFER 1

struct cmx_rec;

struct cmx_call {
	struct cmx_session *s;
	const struct cmx_opinfo *oi;
	uint16_t op;
	/* Sent sync (CMX_HDR_SYNC): replied to; else a failure is recorded
	 * and answered with the call's answer= notification. */
	uint8_t sync;
	uint32_t seq;
	/* The request's payload; a handler that keeps it sets bulk to NULL and
	 * frees it itself. */
	uint8_t *bulk;
	uint64_t bulk_len;
	/* The reply's payload, freed with rbulk_free(rbulk) once sent. */
	void *rbulk;
	uint64_t rbulk_len;
	void (*rbulk_free)(void *);
	/* The area block a read's data is to land in (CMX_HDR_AREA on a call
	 * without a payload), released with the call unless taken. */
	void *area_out;
	uint64_t area_out_len;
	/* Read data staged for the reply, charged to the tenant's output
	 * (cmx_call_read_buffer()) until the call is done: by then its
	 * reply or notification has queued it, and the queue charges it. */
	uint64_t staged;
	int rfd[2]; /* file descriptors the reply passes (OpenArea), or -1 */
	void **handles; /* resolved id[] arrays */
	void *scratch;	/* freed with the call: outputs that point into it */
	void *blocks;	/* cmx_call_alloc()'s, freed with the call */
	/* Deferred completion (host/exec.h). */
	int (*work)(struct cmx_call *c);
	void (*fin)(struct cmx_call *c, int status);
	int status;
	void *result; /* a work function's product for its fin */
	void *ctx;    /* the handler's own state for its fin (cmx_defer_wait() takes result) */
	void *in, *out;
	uint8_t *args; /* the encoded arguments the decoded pointers refer to */
	uint32_t args_len;
	struct cmx_rec *rec; /* its record, kept when it succeeds (host/record.c) */
	/* A resuming guest's call sent again that the restore already
	 * applied (its kept record has the same sequence number and
	 * arguments): a build answers from what was built, a creation
	 * from the object the restore made. */
	uint8_t applied;
};

/* A reply on conn; a payload in the session's area (area, NULL: none) is
 * marked as such, and fds (NULL, or two of them, -1 for none) travel with
 * it (SCM_RIGHTS). free_fn(bulk) once it has gone. */
void cmx_call_reply_on(struct cmx_conn *conn, const struct cmx_area *area, uint32_t seq,
		       int32_t status, const struct cmx_msgdesc *d, const void *out, void *bulk,
		       uint64_t bulk_len, void (*free_fn)(void *), const int *fds);
/* The same on the session's call channel. */
void cmx_call_reply(struct cmx_session *s, uint32_t seq, int32_t status,
		    const struct cmx_msgdesc *d, const void *out, void *bulk, uint64_t bulk_len,
		    void (*free_fn)(void *), const int *fds);
/* Sends a notification on s's notification channel (dropped when it has
 * none), the counterpart of a reply. The payload is referenced until sent,
 * then freed with free_fn(bulk). */
void cmx_call_notify(struct cmx_session *s, const void *desc, const void *args, void *bulk,
		     uint64_t bulk_len, void (*free_fn)(void *));
/* Finishes a call: replies (sync calls) or records the failure of an async
 * one, then frees it. Runs on the loop. */
void cmx_call_done(struct cmx_call *c, int status);
/* Zeroed memory that lives as long as the call: for outputs that point
 * into more than one block (record arrays and their strings). NULL when
 * none is left. Only the call's owner at the time allocates. */
void *cmx_call_alloc(struct cmx_call *c, size_t size);
/* The tag the call's answer= notification answers (schema/README.md), 0
 * when it has none. */
uint64_t cmx_call_tag(const struct cmx_call *c);

/* The queue the call names (its field with the queue= attribute); a
 * reference to id 0 and no handle when it names none. */
static inline const struct cmx_ref *cmx_call_queue(const struct cmx_call *c)
{
	static const struct cmx_ref none;

	return c->oi->queue < 0 ? &none
				: (const struct cmx_ref *)((const char *)c->in + c->oi->queue);
}
/* Where a read's `size` bytes land: the guest's area block when it gave one
 * (NULL if too small), else fresh staging. Sets rbulk, rbulk_len. */
void *cmx_call_read_buffer(struct cmx_call *c, uint64_t size);

#endif
