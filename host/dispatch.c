// SPDX-License-Identifier: MIT
// The way in of every message of a worker's connections: Auth and Hello,
// then each call decoded, its ids checked against the session's table, and
// its handler run (host/handlers.gen.c); host/call.c ends it.
#include "dispatch.h"

#include <CL/cl.h>
#include <CL/cl_ext.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "call.h"
#include "checkpoint.h"
#include "conn.h"
#include "handlers.gen.h"
#include "lane.h"
#include "log.h"
#include "proto.gen.h"
#include "scheduler.h"
#include "record.h"
#include "release.h"
#include "server.h"
#include "session.h"
#include "shm.h"
#include "staging.h"
#include "zero.h"

#define CMX_POISONED 2 /* internal: the id names a poisoned object */

static const int32_t kind_error[CMX_K_COUNT] = {
	[CMX_K_PLATFORM] = CL_INVALID_PLATFORM, [CMX_K_DEVICE] = CL_INVALID_DEVICE,
	[CMX_K_CONTEXT] = CL_INVALID_CONTEXT,	[CMX_K_QUEUE] = CL_INVALID_COMMAND_QUEUE,
	[CMX_K_MEM] = CL_INVALID_MEM_OBJECT,	[CMX_K_PROGRAM] = CL_INVALID_PROGRAM,
	[CMX_K_KERNEL] = CL_INVALID_KERNEL,	[CMX_K_EVENT] = CL_INVALID_EVENT,
	[CMX_K_SAMPLER] = CL_INVALID_SAMPLER,	[CMX_K_CMDBUF] = CL_INVALID_COMMAND_BUFFER_KHR,
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int cmx_dispatch_auth(struct cmx_conn *c, const struct cmx_hdr *h, const uint8_t *args)
{
	struct cmx_Auth_in in;
	uint8_t key[16];
	uint64_t now = now_ms();

	if (cmx_codec_decode(&cmx_desc_Auth_in, args, h->size, &in))
		return -EBADMSG;
	if (!c->auth) {
		/* This listener asks for no token: identity is the transport's. */
		c->authed = 1;
		cmx_call_reply_on(c, NULL, h->seq, CL_SUCCESS, NULL, NULL, NULL, 0, NULL, NULL);
		return 0;
	}
	cmx_peer_key(&c->peer, key);
	if (cmx_auth_allowed(c->auth, key, now)) {
		cmx_dbg("%s: refused: too many failed tokens", c->peer.name);
		cmx_call_reply_on(c, NULL, h->seq, CL_OUT_OF_RESOURCES, NULL, NULL, NULL, 0, NULL, NULL);
		return -ECONNABORTED;
	}
	/* The token itself is never logged. */
	if (cmx_auth_check(c->auth, in.token.ptr, in.token.len, c->peer.tenant)) {
		int limited = cmx_auth_failed(c->auth, key, now);
		cmx_warn("%s: refused: %s token%s", c->peer.name, in.token.len ? "unknown" : "no",
			 limited ? "; its address is refused for a while" : "");
		cmx_call_reply_on(c, NULL, h->seq, CL_INVALID_VALUE, NULL, NULL, NULL, 0, NULL, NULL);
		return -ECONNABORTED;
	}
	c->authed = 1;
	c->ident.token_tenant = c->peer.tenant;
	cmx_dbg("%s: token of tenant %s", c->peer.name, c->peer.tenant);
	cmx_call_reply_on(c, NULL, h->seq, CL_SUCCESS, NULL, NULL, NULL, 0, NULL, NULL);
	return 0;
}

int cmx_dispatch_hello(struct cmx_conn *c, const struct cmx_hdr *h, const uint8_t *args)
{
	struct cmx_Hello_in in;
	struct cmx_Hello_out out = { .version = CMX_PROTO_VERSION };
	struct cmx_session *s;

	if (cmx_checkpoint_enabled(c->srv))
		out.features = CMX_FEATURE_RESUME;
	if (cmx_codec_decode(&cmx_desc_Hello_in, args, h->size, &in))
		return -EBADMSG;
	if (in.magic != CMX_PROTO_MAGIC)
		return -EPROTONOSUPPORT;
	if (in.version != CMX_PROTO_VERSION) {
		/* Hello's layout is the same in every version: the guest
		 * learns which one this daemon speaks, and says so. */
		cmx_warn("%s: refused: protocol version %llu (this daemon speaks %u)", c->peer.name,
			 (unsigned long long)in.version, CMX_PROTO_VERSION);
		cmx_call_reply_on(c, NULL, h->seq, CL_INVALID_VALUE, &cmx_desc_Hello_out, &out, NULL, 0, NULL,
			 NULL);
		return -ECONNABORTED;
	}
	if (in.role == CMX_ROLE_CALL) {
		struct cmx_tenant *t = cmx_tenant_lookup(&c->srv->tenants, &c->ident);
		if (c->srv->draining)
			return -ESHUTDOWN;
		if (!t) {
			cmx_warn("%s: refused: no tenant for this peer", c->peer.name);
			return -EACCES;
		}
		if (in.session || in.token) {
			/* A guest resuming a session this daemon restored
			 * (host/restore.c): its ids are as it left them. */
			int busy = 0;
			s = c->srv->restore_find ? c->srv->restore_find(c->srv, t, in.session,
									 in.token, &busy)
						 : NULL;
			if (!s) {
				/* Answered, so that the guest knows whether to
				 * try again: CL_DEVICE_NOT_AVAILABLE while its
				 * session is still being restored. */
				if (!busy)
					cmx_warn("%s: refused: no restored session %llu of tenant %s",
						 c->peer.name, (unsigned long long)in.session,
						 t->name);
				memset(&out, 0, sizeof(out));
				out.version = CMX_PROTO_VERSION;
				cmx_call_reply_on(c, NULL, h->seq,
					 busy ? CL_DEVICE_NOT_AVAILABLE : CL_INVALID_VALUE,
					 &cmx_desc_Hello_out, &out, NULL, 0, NULL, NULL);
				return -ECONNABORTED;
			}
			s->restored = 0;
			s->conn = c;
			c->role = CMX_ROLE_CALL;
			c->sess = s;
			out.session = s->id;
			out.token = s->token;
			cmx_call_reply(s, h->seq, CL_SUCCESS, &cmx_desc_Hello_out, &out, NULL, 0, NULL, NULL);
			cmx_info("session %llu: resumed (%s), tenant %s", (unsigned long long)s->id,
				 c->peer.name, t->name);
			return 0;
		}
		if (cmx_tenant_may_open(t)) {
			/* Answered, so that the guest can say why it has no
			 * platform; the connection ends once it is written. */
			cmx_warn("%s: refused: tenant %s has %llu sessions, its quota",
				 c->peer.name, t->name, (unsigned long long)t->sessions);
			cmx_call_reply_on(c, NULL, h->seq, CL_OUT_OF_RESOURCES, &cmx_desc_Hello_out, &out,
				 NULL, 0, NULL, NULL);
			return -ECONNABORTED;
		}
		s = cmx_session_create(c->srv, c, t);
		if (!s)
			return -ENOMEM;
		c->role = CMX_ROLE_CALL;
		c->sess = s;
		out.session = s->id;
		out.token = s->token;
		cmx_call_reply(s, h->seq, CL_SUCCESS, &cmx_desc_Hello_out, &out, NULL, 0, NULL, NULL);
		cmx_info("session %llu: connected (%s), tenant %s", (unsigned long long)s->id,
			 c->peer.name, t->name);
		return 0;
	}
	s = in.role == CMX_ROLE_NOTIFY || in.role == CMX_ROLE_LANE
		    ? cmx_session_find(c->srv, in.session, in.token)
		    : NULL;
	if (s && in.role == CMX_ROLE_LANE) {
		/* A bulk lane (host/lane.c): a connection of the same peer's
		 * tenant, as the session's token already proves. */
		int e = cmx_lane_attach(s, c);
		if (e) {
			cmx_warn("session %llu: refused a lane from %s: %s",
				 (unsigned long long)s->id, c->peer.name, strerror(-e));
			return e;
		}
		c->role = CMX_ROLE_LANE;
		c->sess = s;
		out.session = s->id;
		cmx_call_reply_on(c, NULL, h->seq, CL_SUCCESS, &cmx_desc_Hello_out, &out, NULL, 0, NULL, NULL);
		return 0;
	}
	if (!s || in.role != CMX_ROLE_NOTIFY || s->nconn) {
		cmx_warn("%s: refused: a channel for no session of it (role %llu)", c->peer.name,
			 (unsigned long long)in.role);
		return -EPERM;
	}
	c->role = CMX_ROLE_NOTIFY;
	c->sess = s;
	s->nconn = c;
	/* shm: notifications go to their ring after this reply. */
	if (s->shm)
		c->tx_ring_next = &s->shm->ntf;
	cmx_session_ref(s);
	out.session = s->id;
	/* The reply goes out on this channel, not the call channel. */
	cmx_call_reply_on(c, NULL, h->seq, CL_SUCCESS, &cmx_desc_Hello_out, &out, NULL, 0, NULL, NULL);
	return 0;
}

/* Checks one id against the table; returns 0 or the cl error.
 * in_wait_list: 1 an event waited for, 2 one a command's wait list names. */
static int32_t resolve(struct cmx_session *s, const struct cmx_field *f, uint64_t id, void **h,
		       int in_wait_list)
{
	struct cmx_obj *o;

	if (!id && (f->flags & CMX_F_NULLOK)) {
		*h = NULL;
		return 0;
	}
	o = cmx_objtab_get(&s->objs, id);
	if (!o || o->kind != f->kind)
		return f->err ? f->err : kind_error[f->kind];
	*h = o->h;
	/* A command behind a user event that its guest has not set holds a
	 * checkpoint's drain (cmx_eventstate_blocked()); a wait does not. */
	if (in_wait_list == 2)
		o->flags |= CMX_OBJ_WAITED;
	if (o->err)
		return in_wait_list ? CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST : CMX_POISONED;
	return 0;
}

static int32_t resolve_all(struct cmx_call *c)
{
	const struct cmx_msgdesc *d = c->oi->in;
	size_t nh = 0;

	for (unsigned i = 0; i < d->nfields; i++)
		if (d->fields[i].type == CMX_T_IDS)
			nh += ((struct cmx_refs *)((char *)c->in + d->fields[i].offset))->n;
	if (nh && !(c->handles = malloc(nh * sizeof(void *))))
		return CL_OUT_OF_HOST_MEMORY;
	nh = 0;
	for (unsigned i = 0; i < d->nfields; i++) {
		const struct cmx_field *f = &d->fields[i];
		void *p = (char *)c->in + f->offset;
		int32_t err = 0;

		switch (f->type) {
		case CMX_T_ID:
			err = resolve(c->s, f, ((struct cmx_ref *)p)->id, &((struct cmx_ref *)p)->h, 0);
			if (err == CMX_POISONED)
				/* Releasing it, or asking an event for the
				 * status it failed with: h stays NULL. */
				err = f->flags & CMX_F_POISONED ? 0 : kind_error[f->kind];
			break;
		case CMX_T_NEWID: {
			uint64_t id = ((struct cmx_ref *)p)->id;
			/* A creation sent again names what the restore made. */
			if (c->applied)
				break;
			if ((!id && !(f->flags & CMX_F_NULLOK)) ||
			    (id && (id < CMX_FIRST_GUEST_ID || cmx_objtab_get(&c->s->objs, id))))
				err = CL_INVALID_VALUE;
			else if (id)
				err = cmx_tenant_may_create(c->s->tenant);
			break;
		}
		case CMX_T_IDS: {
			struct cmx_refs *r = p;
			r->h = r->n ? c->handles + nh : NULL;
			nh += r->n;
			/* A command's wait list (2), not a wait's. */
			int wl = f->kind != CMX_K_EVENT ? 0 : c->op == CMX_OP_WaitForEvents ? 1 : 2;
			for (uint64_t k = 0; k < r->n && !err; k++)
				err = resolve(c->s, f, r->v[k], &r->h[k], wl);
			if (err == CMX_POISONED)
				err = kind_error[f->kind];
			break;
		}
		}
		if (err)
			return err;
	}
	return 0;
}

int cmx_dispatch_call(struct cmx_session *s, const struct cmx_hdr *h, const uint8_t *args,
		      uint8_t *bulk)
{
	const struct cmx_opinfo *oi = cmx_op_info(h->op);
	int sync = !!(h->flags & CMX_HDR_SYNC);
	size_t insz = oi->in->size, outsz = sync ? oi->out->size : 0;
	size_t off_in = (sizeof(struct cmx_call) + 7) & ~(size_t)7;
	size_t off_out = off_in + ((insz + 7) & ~(size_t)7);
	size_t off_args = off_out + ((outsz + 7) & ~(size_t)7);
	struct cmx_call *c;
	int status;

	/* One allocation: the call, its decoded structs and a copy of the
	 * encoded arguments, so a deferred handler's pointers stay valid. */
	c = malloc(off_args + h->size);
	if (!c) {
		cmx_staging_put(bulk);
		return -ENOMEM;
	}
	memset(c, 0, off_args);
	c->in = (char *)c + off_in;
	/* A sync call's outputs; an async one has none (out == NULL). */
	c->out = sync ? (char *)c + off_out : NULL;
	c->args = (uint8_t *)c + off_args;
	memcpy(c->args, args, h->size);
	c->args_len = h->size;
	if (cmx_codec_decode(oi->in, c->args, h->size, c->in)) {
		free(c);
		cmx_staging_put(bulk);
		return -EBADMSG;
	}
	c->s = s;
	c->oi = oi;
	c->op = h->op;
	c->sync = (uint8_t)sync;
	c->seq = h->seq;
	c->bulk = bulk;
	c->bulk_len = h->bulk;
	c->rfd[0] = c->rfd[1] = -1;
	if ((h->flags & CMX_HDR_AREA) && !(oi->flags & CMX_OPF_BULK_IN)) {
		/* Not a payload: the room the guest gave for a read's data. */
		c->area_out = bulk;
		c->area_out_len = h->bulk;
		c->bulk = NULL;
		c->bulk_len = 0;
	}
	if (sync)
		s->sync_calls++;
	cmx_session_ref(s);
	s->calls++;
	/* A creation the old daemon applied without answering, sent again
	 * by a resuming guest: answered from what the restore made. */
	c->applied = (uint8_t)cmx_record_made_again(c);
	status = resolve_all(c);
	/* Its record for a checkpoint, charged before anything is made. */
	if (status == CL_SUCCESS)
		status = cmx_record_prepare(c);
	/* Commands held by the scheduler: ordering behind them (host/scheduler.c). */
	if (status == CL_SUCCESS)
		status = cmx_sched_resolve(c);
	/* Fresh memory's zero fills: ordering behind them (host/zero.c). */
	if (status == CL_SUCCESS)
		status = cmx_zero_order(c);
	if (status == CL_SUCCESS)
		status = cmx_handlers[h->op](c, c->in, c->out);
	if (status != CMX_DEFER)
		cmx_call_done(c, status);
	return 0;
}

static const struct cmx_conn_ops dispatch_ops = {
	.auth = cmx_dispatch_auth,
	.hello = cmx_dispatch_hello,
	.dispatch = cmx_dispatch_call,
	.ended = cmx_release_session,
};

void cmx_dispatch_attach(struct cmx_server *srv)
{
	srv->conn_ops = &dispatch_ops;
	srv->release = cmx_release_obj;
}
