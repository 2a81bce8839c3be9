// SPDX-License-Identifier: MIT
// A call's life after its dispatch (host/dispatch.c): what it allocates,
// its reply or the record of its failure, and the end that frees it; and
// the session's notifications, which go out as replies do.
#include "call.h"

#include <CL/cl.h>
#include <CL/cl_ext.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "area.h"
#include "codec.h"
#include "conn.h"
#include "fence.h"
#include "log.h"
#include "proto.gen.h"
#include "record.h"
#include "server.h"
#include "session.h"
#include "staging.h"

/* How long the loop looks for a guest's next call after a sync reply. */
#define LINGER_NS 30000

/* A reply on conn; a payload in the session's area is marked as such, and
 * fds (NULL, or two of them, -1 for none) travel with it (SCM_RIGHTS). */
void cmx_call_reply_on(struct cmx_conn *conn, const struct cmx_area *area, uint32_t seq,
		       int32_t status, const struct cmx_msgdesc *d, const void *out, void *bulk,
		       uint64_t bulk_len, void (*free_fn)(void *), const int *fds)
{
	size_t size = 8 + (d && out ? cmx_codec_size(d, out) : 0);
	uint8_t stack[512], *args = size <= sizeof(stack) ? stack : malloc(size);
	int64_t st = status;
	struct cmx_hdr h = { .size = (uint32_t)size, .op = CMX_OP_REPLY, .seq = seq,
			     .bulk = bulk_len };

	if (!args || !conn) {
		if (free_fn)
			free_fn(bulk);
		for (int i = 0; fds && i < CMX_CALL_FDS; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		if (args != stack)
			free(args);
		return;
	}
	memcpy(args, &st, 8);
	if (d && out)
		cmx_codec_encode(d, out, args + 8);
	if (bulk_len)
		cmx_area_mark(area, &h, bulk);
	cmx_conn_send_fd(conn, &h, args, bulk, free_fn, fds);
	if (args != stack)
		free(args);
}

void cmx_call_reply(struct cmx_session *s, uint32_t seq, int32_t status,
		    const struct cmx_msgdesc *d, const void *out, void *bulk, uint64_t bulk_len,
		    void (*free_fn)(void *), const int *fds)
{
	cmx_call_reply_on(s->conn, s->area, seq, status, d, out, bulk, bulk_len, free_fn, fds);
}

void cmx_call_notify(struct cmx_session *s, const void *desc, const void *args, void *bulk,
		     uint64_t bulk_len, void (*free_fn)(void *))
{
	const struct cmx_msgdesc *d = desc;
	size_t size = cmx_codec_size(d, args);
	uint8_t stack[512], *buf = size <= sizeof(stack) ? stack : malloc(size);
	struct cmx_hdr h = { .size = (uint32_t)size, .op = d->op, .bulk = bulk_len };

	if (!buf || !s->nconn || s->closed) {
		if (free_fn)
			free_fn(bulk);
		if (buf != stack)
			free(buf);
		return;
	}
	cmx_codec_encode(d, args, buf);
	cmx_area_mark(s->area, &h, bulk);
	cmx_conn_send(s->nconn, &h, buf, bulk, free_fn);
	if (buf != stack)
		free(buf);
}

/* An async call failed where the guest could not see it: the objects it was
 * to create exist as poisoned ids, so their later use reports the failure
 * (an event's as its error status). */
static void poison_new_ids(struct cmx_call *c, int status)
{
	const struct cmx_msgdesc *d = c->oi->in;

	for (unsigned i = 0; i < d->nfields; i++) {
		const struct cmx_field *f = &d->fields[i];
		uint64_t id = ((struct cmx_ref *)((char *)c->in + f->offset))->id;
		if (f->type == CMX_T_NEWID && id && !cmx_objtab_get(&c->s->objs, id))
			cmx_session_add(c->s, id, f->kind, NULL, NULL, status, NULL);
	}
}

/* An async call that promised the guest a notification (its answered tag)
 * keeps the promise when it fails: a read's waiter and a callback's
 * registrant learn the error instead of waiting forever. */
uint64_t cmx_call_tag(const struct cmx_call *c)
{
	uint64_t tag = 0;

	if (c->oi->tag >= 0)
		memcpy(&tag, (const char *)c->in + c->oi->tag, sizeof(tag));
	return tag;
}

static void notify_failure(struct cmx_call *c, int status)
{
	struct cmx_answer n = { .tag = cmx_call_tag(c), .status = status };

	if (c->oi->answer)
		cmx_call_notify(c->s, c->oi->answer, &n, NULL, 0, NULL);
}

struct call_block {
	struct call_block *next;
	max_align_t data[];
};

void *cmx_call_alloc(struct cmx_call *c, size_t size)
{
	struct call_block *b;

	if (size > SIZE_MAX - sizeof(*b) || !(b = calloc(1, sizeof(*b) + size)))
		return NULL;
	b->next = c->blocks;
	c->blocks = b;
	return b->data;
}

void cmx_call_done(struct cmx_call *c, int status)
{
	struct cmx_session *s = c->s;

	/* What made or changed a lasting object, for a checkpoint. */
	cmx_record_done(c, status);
	if (c->sync) {
		/* A failed call's reply carries its status and no outputs (what
		 * a handler set may point into scratch the driver never
		 * filled), except where the schema says keepouts: the
		 * binaries' statuses, which clCreateProgramWithBinary gives on
		 * failure too. */
		if (status != CL_SUCCESS && c->out && !(c->oi->flags & CMX_OPF_KEEPOUTS))
			memset(c->out, 0, c->oi->out->size);
		if (!s->closed) {
			/* What completed so far goes out with the reply: the
			 * guest's next wait for it asks nothing. */
			if (s->fence_n)
				cmx_fence_poll(s);
			cmx_call_reply(s, c->seq, status, c->oi->out, c->out, c->rbulk,
			      status == CL_SUCCESS ? c->rbulk_len : 0, c->rbulk_free, c->rfd);
			c->rfd[0] = c->rfd[1] = -1;
			/* Its guest's next call is likely close behind (the
			 * shm rings have their own look-ahead). */
			if (!s->shm)
				cmx_loop_linger(s->srv->loop, LINGER_NS);
		} else if (c->rbulk_free) {
			c->rbulk_free(c->rbulk);
		}
	} else if (status != CL_SUCCESS) {
		s->async_errors++;
		s->last_async_error = status;
		cmx_dbg("session %llu: async %s failed: %d", (unsigned long long)s->id,
			c->oi->in->name, status);
		if (!s->closed) {
			poison_new_ids(c, status);
			notify_failure(c, status);
		}
		if (c->rbulk_free)
			c->rbulk_free(c->rbulk);
	}
	s->tenant->output -= c->staged;
	cmx_staging_put(c->bulk);
	cmx_staging_put(c->area_out);
	for (int i = 0; i < CMX_CALL_FDS; i++)
		if (c->rfd[i] >= 0)
			close(c->rfd[i]);
	free(c->handles);
	free(c->scratch);
	for (struct call_block *b = c->blocks, *next; b; b = next) {
		next = b->next;
		free(b);
	}
	cmx_codec_release(c->oi->in, c->in);
	free(c);
	s->calls--;
	/* A restore's request: the next one goes (host/restore.c, through
	 * the hook host/dispatch.c registers). */
	if (s->restore)
		s->srv->replayed(s, status);
	cmx_session_unref(s);
}

void *cmx_call_read_buffer(struct cmx_call *c, uint64_t size)
{
	c->rbulk_len = size;
	if (c->area_out) {
		if (c->area_out_len < size)
			return NULL;
		c->rbulk = c->area_out;
		c->area_out = NULL;
	} else {
		/* Host memory the daemon holds for the tenant: charged against
		 * its mem quota (CL_OUT_OF_HOST_MEMORY past it, as when the
		 * host has none). */
		struct cmx_tenant *t = c->s->tenant;
		if (cmx_tenant_may_hold(t, size)) {
			cmx_dbg("session %llu: %llu bytes to stage for a read: past the mem quota "
				"of tenant %s with %llu held",
				(unsigned long long)c->s->id, (unsigned long long)size, t->name,
				(unsigned long long)t->output);
			c->rbulk = NULL;
			return NULL;
		}
		c->rbulk = cmx_staging_get(&c->s->srv->staging, size);
		if (c->rbulk) {
			c->staged += size;
			t->output += size;
		}
	}
	return c->rbulk;
}
